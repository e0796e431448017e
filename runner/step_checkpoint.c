/*
 * step_checkpoint: a checkpoint step, a human's approval.
 *
 * The approval is requested with its expiry and the run parked; this
 * runner exits.  Once the approval is decided (or expires) the engine
 * claims the run again, and the new runner finds the attempt left running
 * and ends it with the decision.
 */
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "runner/core.h"

static void
checkpoint_done(struct child *c, const struct ipc_db_result *r, void *arg)
{
	size_t len;

	runner_db_check(r, "requesting an approval");
	if (child_db_cell(r, 0, &len) == NULL) {
		/* no approval: the lease is gone or a cancel came first */
		runner_finish("cancelled", NULL);
		return;
	}
	log_info("run %s: waiting for approval at step %s", rn.run, rn.steps[rn.cur].id);
	runner_exit(IPC_RUN_PARKED);
}

static void
checkpoint_start(struct rstep *s)
{
	struct qop *q = runner_op("runner_checkpoint", 4);
	char *msg = runner_expand(runner_jstr(s->j, "message", ""));

	ipc_put_str(&q->w, s->id);
	ipc_put_u64(&q->w, (uint64_t)rn.attempt);
	ipc_put_str(&q->w, msg);
	ipc_put_u64(&q->w, (uint64_t)runner_jint(s->j, "expires_s", 86400));
	free(msg);
	runner_op_send(q, checkpoint_done, NULL);
}

/* The decision on the checkpoint whose attempt was left running. */
static void
checkpoint_resume(struct rstep *s)
{
	const char *decision = NULL;
	json_t *a;
	size_t i;

	json_array_foreach(rn.approvals, i, a)
		if (strcmp(runner_jstr(a, "step_id", ""), s->id) == 0)
			decision = runner_jstr(a, "status", "");
	rn.attempt = s->running;
	s->running = 0;
	if (decision != NULL && strcmp(decision, "approved") == 0) {
		runner_step_end("succeeded", -1, NULL, json_pack("{s:s}", "approval", decision), 1,
		    NULL);
		return;
	}
	if (decision == NULL || strcmp(decision, "pending") == 0) {
		/* claimed while still pending: not ours to decide */
		log_warnx("run %s: checkpoint %s has no decision yet", rn.run, s->id);
		runner_exit(IPC_RUN_STOPPED);
		return;
	}
	runner_note_failure(s, "step %s: the approval was %s", s->id, decision);
	runner_step_end("failed", -1, strcmp(decision, "rejected") == 0 ?
	    "the approval was rejected" : "the approval expired",
	    json_pack("{s:s}", "approval", decision), 1, NULL);
}

const struct step_kind step_checkpoint = {
	.name = "checkpoint",
	.start = checkpoint_start,
	.resume = checkpoint_resume,
};
