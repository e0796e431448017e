/*
 * artifact: how an attempt ends (see core.h).
 *
 * The end of an attempt is held (struct pending_end) while the artifacts
 * its step's contract names are read from the sandbox, one at a time
 * (SBX_ARTIFACT, the bytes as SBX_OUTPUT, then SBX_RESULT with their size
 * and sha256); one too large for the database goes to the supervisor's
 * store first (ARTIFACT_PUT).  Then the contract is checked, and the
 * attempt is retried or its step ended with what it keeps.
 */
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "runner/core.h"

#define ART_ID_BASE (1ull << 40)   /* SBX_ARTIFACT ids */

/* A step end held back until the attempt's artifacts are read. */
struct pending_end {
	char status[16];
	int exit_status, final;
	char error[IPC_ERRMSG_MAX + 64];
	json_t *extra;
};

/* The artifacts of the current attempt. */
static struct {
	struct art *arts;
	size_t narts, cur;
	uint64_t id;                /* the one being read, or the last request's */
	struct pending_end *pend;   /* the end waiting for the artifacts */
	uint64_t put_id;
} at;

static void
arts_free(void)
{
	size_t i;

	for (i = 0; i < at.narts; i++)
		free(at.arts[i].data);
	free(at.arts);
	at.arts = NULL;
	at.narts = at.cur = 0;
}

/* The current step's contract: its "produces". */
static void
arts_load(void)
{
	struct rstep *s = &rn.steps[rn.cur];
	json_t *prod = json_object_get(s->j, "produces"), *p;
	size_t i;

	arts_free();
	at.narts = json_array_size(prod);
	if ((at.arts = calloc(at.narts + 1, sizeof(*at.arts))) == NULL)
		fatal("calloc");
	json_array_foreach(prod, i, p) {
		at.arts[i].key = runner_jstr(p, "key", "");
		at.arts[i].kind = runner_jstr(p, "kind", "text");
		at.arts[i].file = runner_jstr(p, "file", "");
		at.arts[i].required = json_is_true(json_object_get(p, "required"));
		snprintf(at.arts[i].why, sizeof(at.arts[i].why), "missing");
	}
}

uint64_t
runner_art_cap(void)
{
	return rn.c.max_frame > 2 * 65536 ? rn.c.max_frame - 65536 : 65536;
}

static char *
b64(const unsigned char *p, size_t len)
{
	size_t n = sodium_base64_encoded_len(len, sodium_base64_VARIANT_ORIGINAL);
	char *o = malloc(n);

	if (o == NULL)
		fatal("malloc");
	sodium_bin2base64(o, n, p, len, sodium_base64_VARIANT_ORIGINAL);
	return o;
}

static void attempt_decide(void);

/* Every artifact read: the contract is checked and the end goes out. */
static void
arts_finish(void)
{
	struct pending_end *e = at.pend;
	json_t *arts = json_array();
	char hex[65], *enc;
	size_t i;

	for (i = 0; i < at.narts; i++) {
		struct art *a = &at.arts[i];
		json_t *o;

		if (!a->ok) {
			if (a->required && strcmp(e->status, "succeeded") == 0) {
				snprintf(e->error, sizeof(e->error),
				    "contract_violation: artifact %.64s (%.128s): %.512s", a->key, a->file,
				    a->why);
				snprintf(e->status, sizeof(e->status), "failed");
			}
			continue;
		}
		sodium_bin2hex(hex, sizeof(hex), a->sha, sizeof(a->sha));
		o = json_pack("{s:s, s:s, s:I, s:s}", "key", a->key, "kind", a->kind, "size",
		    (json_int_t)a->len, "sha256", hex);
		if (!a->stored) {
			enc = b64(a->data, a->len);
			json_object_set_new(o, "inline", json_string(enc));
			free(enc);
		}
		json_array_append_new(arts, o);
	}
	json_object_set_new(e->extra, "artifacts_json", arts);
	attempt_decide();
}

static void arts_next(void);

static void
art_rejected(struct art *a)
{
	struct rstep *s = &rn.steps[rn.cur];

	runner_event("artifact.rejected", json_pack("{s:s, s:i, s:s, s:s, s:s}", "step_id", s->id,
	    "attempt", rn.attempt, "key", a->key, "file", a->file, "reason", a->why));
}

/* SBX_RESULT of an SBX_ARTIFACT. */
void
runner_art_result(const struct ipc_msg *m)
{
	struct art *a = &at.arts[at.cur];
	struct ipc_sbx_result res;
	struct ipc_cur c;
	const uint8_t *sha;
	unsigned char got[32];
	uint64_t size;
	size_t slen;
	struct ipc_wbuf w;

	if (ipc_dec_sbx_result(m->body, &res) == -1)
		fatalx("a bad artifact result from the sandbox");
	if (res.code != 0) {
		if (res.code == ENOENT)
			snprintf(a->why, sizeof(a->why), "missing");
		else
			snprintf(a->why, sizeof(a->why), "%.*s", (int)res.errlen, res.error);
		if (res.code != ENOENT)
			art_rejected(a);
		at.cur++;
		arts_next();
		return;
	}
	if (res.data->type != MSGPACK_OBJECT_ARRAY)
		fatalx("a bad artifact result from the sandbox");
	ipc_cur_init(&c, res.data);
	if (ipc_get_u64(&c, &size) == -1 || ipc_get_bin(&c, &sha, &slen, 32) == -1 || slen != 32)
		fatalx("a bad artifact result from the sandbox");
	crypto_hash_sha256(got, a->data, a->len);
	if (size != a->len || sodium_memcmp(got, sha, 32) != 0) {
		snprintf(a->why, sizeof(a->why), "it changed while it was read");
		art_rejected(a);
		at.cur++;
		arts_next();
		return;
	}
	memcpy(a->sha, got, 32);
	a->ok = 1;
	if (a->len <= IPC_INLINE_MAX) {
		at.cur++;
		arts_next();
		return;
	}
	/* too large for the database: into the store first */
	at.put_id = runner_req_id();
	ipc_wbuf_begin(&w, IMSG_ARTIFACT_PUT, at.put_id, 2);
	ipc_put_bin(&w, a->sha, 32);
	ipc_put_bin(&w, a->data, a->len);
	if (ipc_wbuf_finish(&w, rn.c.max_frame) == -1 || ipc_chan_send(rn.c.sup, &w, -1) == -1)
		fatalx("cannot send an artifact to the supervisor");
	ipc_wbuf_free(&w);
}

/* The supervisor stored (or not) the artifact sent with ARTIFACT_PUT. */
static void
art_put_done(const struct ipc_runner_reply *rr)
{
	struct art *a = &at.arts[at.cur];

	at.put_id = 0;
	if (rr->ok) {
		a->stored = 1;
	} else {
		a->ok = 0;
		snprintf(a->why, sizeof(a->why), "%.*s", (int)rr->errlen, rr->error);
		art_rejected(a);
	}
	at.cur++;
	arts_next();
}

static void
arts_next(void)
{
	struct ipc_wbuf w;
	struct art *a;

	if (at.cur >= at.narts) {
		arts_finish();
		return;
	}
	a = &at.arts[at.cur];
	a->cap = runner_art_cap();
	at.id = ART_ID_BASE + at.cur;
	ipc_wbuf_begin(&w, IMSG_SBX_ARTIFACT, at.id, 4);
	ipc_put_str(&w, a->key);
	ipc_put_str(&w, a->kind);
	ipc_put_str(&w, a->file);
	ipc_put_u64(&w, a->cap);
	runner_sbx_send(&w);
}

void
runner_art_output(const uint8_t *data, size_t len)
{
	struct art *a = &at.arts[at.cur];

	if (a->len + len > a->cap)
		fatalx("the sandbox sent more of an artifact than its cap");
	if ((a->data = realloc(a->data, a->len + len)) == NULL)
		fatal("realloc");
	memcpy(a->data + a->len, data, len);
	a->len += len;
}

/* Hold the attempt's end (extra consumed) until its artifacts are known. */
static void
end_hold(const char *status, int exit_status, const char *error, json_t *extra)
{
	struct pending_end *e;

	if ((e = calloc(1, sizeof(*e))) == NULL)
		fatal("calloc");
	snprintf(e->status, sizeof(e->status), "%s", status);
	snprintf(e->error, sizeof(e->error), "%s", error != NULL ? error : "");
	e->exit_status = exit_status;
	e->extra = extra != NULL ? extra : json_object();
	at.pend = e;
}

void
runner_attempt_over(const char *status, int exit_status, const char *error, json_t *extra)
{
	struct rstep *s = &rn.steps[rn.cur];
	int failed = strcmp(status, "failed") == 0;

	end_hold(status, exit_status, error, extra);
	arts_load();
	if (at.narts > 0 && !rn.cancel &&
	    (strcmp(status, "succeeded") == 0 ||
		(failed && s->allow_failure && s->fails + 1 > s->retry))) {
		arts_next();
		return;
	}
	attempt_decide();
}

/* Retry, or end the step, with what the attempt left. */
static void
attempt_decide(void)
{
	struct rstep *s = &rn.steps[rn.cur];
	struct pending_end *e = at.pend;
	json_t *arts = json_object_get(e->extra, "artifacts_json");
	int final = 1;

	at.pend = NULL;
	if (arts != NULL)
		json_incref(arts);
	json_object_del(e->extra, "artifacts_json");
	if (strcmp(e->status, "failed") == 0 || strcmp(e->status, "timed_out") == 0) {
		s->fails++;
		if (rn.no_retry)
			s->fails = s->retry + 1;
		if (s->fails <= s->retry) {
			final = 0;
			json_object_set_new(e->extra, "retrying", json_true());
			json_decref(arts); /* a retried attempt keeps nothing */
			arts = NULL;
		} else
			runner_note_failure(s, "step %s: %s", s->id, e->error);
	}
	arts_free();
	runner_step_end(e->status, e->exit_status, e->error[0] != '\0' ? e->error : NULL, e->extra,
	    final, arts);
	free(e);
}

void
runner_attempt_over_bare(const char *status, int exit_status, const char *error,
    json_t *extra)
{
	end_hold(status, exit_status, error, extra);
	arts_free();
	attempt_decide();
}

struct art *
runner_art_made(const char *kind, json_t *extra)
{
	struct art *a = NULL;
	size_t i;

	end_hold("succeeded", -1, NULL, extra);
	arts_load();
	for (i = 0; i < at.narts && a == NULL; i++)
		if (strcmp(at.arts[i].kind, kind) == 0)
			a = &at.arts[i];
	if (a == NULL) {
		arts_free();
		if ((at.arts = calloc(1, sizeof(*at.arts))) == NULL)
			fatal("calloc");
		at.narts = 1;
		a = &at.arts[0];
		a->key = kind;
		a->kind = kind;
		a->file = "";
	}
	return a;
}

void
runner_art_made_end(const struct art *a)
{
	size_t i;

	for (i = 0; i < at.narts; i++)
		if (&at.arts[i] != a)
			at.arts[i].required = 0, at.arts[i].ok = 0;
	arts_finish();
}

uint64_t
runner_req_id(void)
{
	return ++at.id;
}

int
runner_art_reading(uint64_t id)
{
	return id == at.id && id >= ART_ID_BASE && at.cur < at.narts;
}

int
runner_art_put_reply(uint64_t id, const struct ipc_runner_reply *rr)
{
	if (id == 0 || id != at.put_id)
		return 0;
	art_put_done(rr);
	return 1;
}
