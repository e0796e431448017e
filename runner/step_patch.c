/*
 * step_patch: a patch step, the workspace's diff against the run's base
 * commit.
 *
 * The supervisor's git helper makes it from its trusted copy (PATCH_MAKE),
 * never from the workspace's .git, so the agent cannot supply it.  It is
 * the contract's patch artifact: the first of kind patch, or an optional
 * "patch"; other keys a patch step names are not made.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "runner/core.h"

static uint64_t patch_id;   /* the PATCH_MAKE in flight, 0 for none */

static void
patch_start(struct rstep *s)
{
	struct ipc_wbuf w;

	patch_id = runner_req_id();
	ipc_wbuf_begin(&w, IMSG_PATCH_MAKE, patch_id, 1);
	ipc_put_u64(&w, runner_art_cap());
	if (ipc_wbuf_finish(&w, rn.c.max_frame) == -1 || ipc_chan_send(rn.c.sup, &w, -1) == -1)
		fatalx("cannot ask for a patch");
	ipc_wbuf_free(&w);
}

/* The supervisor's patch (rr->data, or in the store when it sent none). */
static void
patch_done(const struct ipc_runner_reply *rr)
{
	json_t *extra = json_pack("{s:I}", "patch_size", (json_int_t)rr->size);
	struct art *a;

	if (!rr->ok) {
		char err[IPC_ERRMSG_MAX + 64];

		snprintf(err, sizeof(err), "the patch could not be made: %.*s", (int)rr->errlen,
		    rr->error);
		runner_attempt_over_bare("failed", -1, err, extra);
		return;
	}
	a = runner_art_made("patch", extra);
	if (rr->size == 0) {
		snprintf(a->why, sizeof(a->why), "the workspace has no change");
	} else {
		a->ok = 1;
		a->len = (size_t)rr->size;
		memcpy(a->sha, rr->sha256, 32);
		if (rr->len > 0) {
			if ((a->data = malloc(rr->len)) == NULL)
				fatal("malloc");
			memcpy(a->data, rr->data, rr->len);
		} else
			a->stored = 1;
	}
	runner_art_made_end(a);
}

static int
patch_reply(uint64_t id, const struct ipc_runner_reply *rr)
{
	if (id == 0 || id != patch_id)
		return 0;
	patch_id = 0;
	patch_done(rr);
	return 1;
}

const struct step_kind step_patch = {
	.name = "patch",
	.start = patch_start,
	.reply = patch_reply,
};
