/*
 * runner: drives one run (DESIGN.md sections 1, 3.3-3.5).
 *
 * The supervisor starts it for a run its engine claimed and hands it, in
 * RUNNER_START, the run, the lease owner it acts for and its end of the
 * run's sandbox channel.  The runner loads the run (template, params, every
 * step attempt so far, approvals), then walks the steps in order:
 *  - a step that already ended is not run again; an attempt left running by
 *    a runner that died is marked crashed and run again, without counting
 *    as a retry (RUNNER_CRASH_MAX crashes fail it);
 *  - "when" decides whether a step runs (success: no failure so far,
 *    failure: some step failed, always, ${params.NAME}: the parameter is
 *    true and no step failed); a step that does not run is skipped;
 *  - command: /bin/sh -c in the sandbox, output as step.output events,
 *    retried up to "retry" times, killed after "timeout";
 *  - checkpoint: an approval is requested and the run parked; the runner
 *    exits, and a new one resumes the run once it is decided;
 *  - patch: the workspace's diff against the base commit, made by the
 *    supervisor's git helper from its trusted copy;
 *  - agent: the tool-use loop of agent.c, after the attempt reserved what
 *    it may spend;
 *  - pull_request: refused with a clear error until its own work lands.
 * A failed step fails the run unless it allows failure.  Every database
 * change is one operation that checks the lease, so a runner that lost its
 * lease changes nothing and stops.  Operations go one at a time, so events
 * are stored in the order they happened.
 */
#include <sys/types.h>

#include <errno.h>
#include <event2/event.h>
#include <jansson.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "privsep/child.h"
#include "runner/runner.h"

#define ART_ID_BASE (1ull << 40)   /* SBX_ARTIFACT ids */
#define CLEAN_ID (1ull << 50)      /* the stale-artifact removal */

struct rstep {
	json_t *j;           /* borrowed from the template */
	const char *id, *kind, *phase, *when;
	int retry, timeout_s, allow_failure, last_in_phase, first_in_phase;
	/* from the history */
	int last_attempt;    /* highest attempt number so far, 0 for none */
	int fails;           /* attempts failed or timed out */
	int crashes;         /* attempts crashed */
	int running;         /* attempt left running, 0 for none */
	const char *session; /* agent: the session a new attempt takes over, or NULL */
	const char *final;   /* "succeeded", "skipped", "failed", "timed_out", "cancelled" or NULL */
};

/* An artifact the step's contract names, and what became of it. */
struct art {
	const char *key, *kind, *file;
	int required;
	unsigned char *data;     /* read from the sandbox */
	size_t len, cap;
	unsigned char sha[32];
	int ok;                  /* read and checked */
	int stored;              /* in the store (too large for the database) */
	char why[IPC_ERRMSG_MAX + 64]; /* why it was not taken, when not */
};

/* A step end held back until the attempt's artifacts are read. */
struct pending_end {
	char status[16];
	int exit_status, final;
	char error[IPC_ERRMSG_MAX + 64];
	json_t *extra;
};

struct outbuf {
	char *buf;
	size_t len, cap;
};

static struct runner {
	struct child c;
	char run[IPC_UUID_LEN + 1];
	char owner[IPC_INSTANCE_MAX + 1];
	char previous[IPC_STATUS_MAX + 1];
	uint32_t exec_max_ms;
	uint64_t step_budget;  /* engine.step_budget, micro-dollars */
	int started;
	struct ipc_chan *sbx;
	int sbx_ready;
	json_t *tmpl, *params, *hist, *approvals;
	struct rstep *steps;
	size_t nsteps, cur;
	int failing;
	char fail_error[1024];
	int cancel;          /* a cancel was requested */
	int exiting;         /* RUNNER_DONE sent: nothing more happens */
	int finishing;       /* run_finish sent: nothing else starts */
	/* the current attempt */
	int attempt;
	int64_t reserved;    /* its reservation (agent steps), micro-dollars */
	int refused;         /* more spend was refused: the attempt fails */
	int no_retry;        /* the attempt's failure ends the step (agent budget) */
	int exec_running;
	uint64_t exec_id;
	struct outbuf out[3];
	struct event *flush_ev;
	/* the artifacts of the current attempt */
	struct art *arts;
	size_t narts, art_cur;
	uint64_t art_id;
	struct pending_end *pend;   /* the end waiting for the artifacts */
	uint64_t put_id, patch_id;
	int cleaning;               /* the stale-artifact removal is running */
	/* the operation queue */
	struct qop *qhead, *qtail;
	int inflight;
} rn;

static void next_step(void);
static void finish_run(const char *status, const char *error);
static void attempt_over(const char *status, int exit_status, const char *error, json_t *extra);
static void art_output(const uint8_t *data, size_t len);
static void art_result(const struct ipc_msg *m);
static void art_put_done(const struct ipc_runner_reply *rr);
static void patch_start(void);
static void patch_done(const struct ipc_runner_reply *rr);

/* ---- the operation queue ------------------------------------------------- */

/* A scoped operation: $1 the run, $2 the lease owner, then nargs more. */
struct qop *
runner_op(const char *op, uint32_t nargs)
{
	struct qop *q;

	if ((q = calloc(1, sizeof(*q))) == NULL)
		fatal("calloc");
	q->id = child_db_begin(&rn.c, &q->w, op, nargs + 2);
	ipc_put_str(&q->w, rn.run);
	ipc_put_str(&q->w, rn.owner);
	return q;
}

static void q_pump(void);

static void
q_done(struct child *c, const struct ipc_db_result *r, void *arg)
{
	struct qop *q = arg;

	rn.inflight = 0;
	if (r == NULL)
		fatalx("the supervisor went away");
	if (rn.exiting) {
		free(q);
		return;
	}
	q->cb(c, r, q->arg);
	free(q);
	q_pump();
}

static void
q_pump(void)
{
	struct qop *q;

	if (rn.inflight || (q = rn.qhead) == NULL)
		return;
	rn.qhead = q->next;
	if (rn.qhead == NULL)
		rn.qtail = NULL;
	rn.inflight = 1;
	if (child_db_send(&rn.c, &q->w, q->id, q_done, q) == -1)
		fatalx("cannot send a database operation");
}

void
runner_op_send(struct qop *q, child_db_cb cb, void *arg)
{
	q->cb = cb;
	q->arg = arg;
	if (rn.qtail != NULL)
		rn.qtail->next = q;
	else
		rn.qhead = q;
	rn.qtail = q;
	q_pump();
}

/* A database error ends this runner; the lease expires and another takes
 * the run up where it stopped. */
static void
check_db(const struct ipc_db_result *r, const char *what)
{
	if (r->code != DB_OK)
		fatalx("%s: %.*s", what, (int)r->errlen, r->error);
}

static int
cell_true(const struct ipc_db_result *r)
{
	size_t len;
	const char *s = child_db_cell(r, 0, &len);

	return s != NULL && len == 1 && s[0] == 't';
}

/* A cell (v, len bytes, not NUL-terminated) that reads exactly word. */
static int
cell_is(const char *v, size_t len, const char *word)
{
	return v != NULL && len == strlen(word) && memcmp(v, word, len) == 0;
}

/* ---- leaving ------------------------------------------------------------- */

static void
exit_check(evutil_socket_t fd, short what, void *arg)
{
	static int tries;

	if (ipc_chan_pending(rn.c.sup) > 0 && tries++ < 1000)
		return;
	log_debug("run %s: runner done", rn.run);
	exit(0);
}

/* Say how this runner ends, then exit once that has been written; nothing
 * else happens meanwhile (every callback checks exiting). */
static void
runner_exit(uint32_t outcome)
{
	struct ipc_wbuf w;
	struct event *ev;
	struct timeval tv = {0, 2000};

	if (rn.exiting)
		return;
	rn.exiting = 1;
	ipc_wbuf_begin(&w, IMSG_RUNNER_DONE, 0, 1);
	ipc_put_u64(&w, outcome);
	if (ipc_wbuf_finish(&w, rn.c.max_frame) == 0)
		ipc_chan_send(rn.c.sup, &w, -1);
	ipc_wbuf_free(&w);
	if ((ev = event_new(rn.c.base, -1, EV_PERSIST, exit_check, NULL)) == NULL ||
	    event_add(ev, &tv) == -1)
		fatalx("exit timer");
}

/* The lease is gone (another engine took the run, or it expired): stop
 * touching the run at once.  The caller returns. */
void
runner_lease_lost(void)
{
	log_warnx("run %s: the lease is no longer held; stopping", rn.run);
	runner_exit(IPC_RUN_STOPPED);
}

/* ---- events -------------------------------------------------------------- */

static void
event_done(struct child *c, const struct ipc_db_result *r, void *arg)
{
	size_t len;

	check_db(r, "an event");
	if (child_db_cell(r, 0, &len) == NULL)
		runner_lease_lost();
}

static void
send_event(const char *type, json_t *payload)
{
	struct qop *q = runner_op("runner_event", 2);
	char *s;

	if ((s = json_dumps(payload, JSON_COMPACT)) == NULL)
		fatalx("out of memory");
	json_decref(payload);
	ipc_put_str(&q->w, type);
	ipc_put_str(&q->w, s);
	free(s);
	runner_op_send(q, event_done, NULL);
}

json_t *
runner_utf8_text(const unsigned char *p, size_t len, int last, size_t *used)
{
	char *o;
	size_t i = 0, n = 0;
	json_t *j;

	if ((o = malloc(len * 3 + 1)) == NULL)
		fatal("malloc");
	while (i < len) {
		unsigned char b = p[i];
		size_t k, need;

		if (b >= 0x01 && b < 0x80) {
			o[n++] = (char)b;
			i++;
			continue;
		}
		need = (b & 0xe0) == 0xc0 ? 2 : (b & 0xf0) == 0xe0 ? 3 : (b & 0xf8) == 0xf0 ? 4 : 0;
		if (need != 0 && i + need > len && !last) {
			for (k = 1; i + k < len && (p[i + k] & 0xc0) == 0x80; k++)
				;
			if (i + k == len)
				break; /* maybe completed by the next chunk */
		}
		if (need >= 2 && i + need <= len) {
			uint32_t cp = b & (need == 2 ? 0x1f : need == 3 ? 0x0f : 0x07);
			int ok = 1;

			for (k = 1; k < need; k++) {
				if ((p[i + k] & 0xc0) != 0x80) {
					ok = 0;
					break;
				}
				cp = (cp << 6) | (p[i + k] & 0x3f);
			}
			if (ok && ((need == 2 && cp >= 0x80) || (need == 3 && cp >= 0x800 &&
			    (cp < 0xd800 || cp > 0xdfff)) || (need == 4 && cp >= 0x10000 &&
			    cp <= 0x10ffff))) {
				memcpy(o + n, p + i, need);
				n += need;
				i += need;
				continue;
			}
		}
		memcpy(o + n, "\xef\xbf\xbd", 3);
		n += 3;
		i++;
	}
	*used = i;
	j = json_stringn(o, n);
	free(o);
	if (j == NULL)
		fatalx("output text");
	return j;
}

static void
flush_stream(int stream, int last)
{
	struct outbuf *b = &rn.out[stream];
	size_t used;

	while (b->len > 0) {
		size_t take = b->len < RUNNER_OUTPUT_EVENT_MAX ? b->len : RUNNER_OUTPUT_EVENT_MAX;
		int end = last && take == b->len;
		/* a character cut at the end of this piece waits for the next
		 * one (it is in the buffer already, or still to come) unless
		 * this is the command's last output */
		json_t *text = runner_utf8_text((unsigned char *)b->buf, take, end, &used);

		if (used == 0) {
			json_decref(text);
			break; /* only the start of a character: wait for the rest */
		}
		send_event("step.output", json_pack("{s:s, s:i, s:s, s:o}",
		    "step_id", rn.steps[rn.cur].id, "attempt", rn.attempt,
		    "stream", stream == 1 ? "stdout" : "stderr", "text", text));
		memmove(b->buf, b->buf + used, b->len - used);
		b->len -= used;
	}
}

static void
flush_output(int last)
{
	flush_stream(1, last);
	flush_stream(2, last);
	if (last)
		rn.out[1].len = rn.out[2].len = 0;
}

static void
flush_timer(evutil_socket_t fd, short what, void *arg)
{
	if (!rn.exiting)
		flush_output(0);
}

static void
buffer_output(uint32_t stream, const uint8_t *data, size_t len)
{
	struct outbuf *b;
	struct timeval tv = {0, RUNNER_OUTPUT_FLUSH_MS * 1000};

	if (stream < 1 || stream > 2)
		return;
	b = &rn.out[stream];
	if (b->len + len > b->cap) {
		size_t cap = (b->len + len) * 2;

		if ((b->buf = realloc(b->buf, cap)) == NULL)
			fatal("realloc");
		b->cap = cap;
	}
	memcpy(b->buf + b->len, data, len);
	b->len += len;
	if (b->len >= RUNNER_OUTPUT_EVENT_MAX)
		flush_stream((int)stream, 0);
	if (!evtimer_pending(rn.flush_ev, NULL))
		evtimer_add(rn.flush_ev, &tv);
}

/* ---- template and history ------------------------------------------------ */

static const char *
jstr(json_t *o, const char *key, const char *def)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s != NULL ? s : def;
}

static int
jint(json_t *o, const char *key, int def)
{
	json_t *v = json_object_get(o, key);

	return json_is_integer(v) ? (int)json_integer_value(v) : def;
}

static struct rstep *
step_by_id(const char *id)
{
	size_t i;

	for (i = 0; i < rn.nsteps; i++)
		if (strcmp(rn.steps[i].id, id) == 0)
			return &rn.steps[i];
	return NULL;
}

static void
load_template(void)
{
	json_t *phases = json_object_get(rn.tmpl, "phases"), *ph, *steps, *st, *a;
	size_t i, j, n = 0;

	if (!json_is_array(phases))
		fatalx("run %s: the template has no phases", rn.run);
	json_array_foreach(phases, i, ph)
		n += json_array_size(json_object_get(ph, "steps"));
	if ((rn.steps = calloc(n + 1, sizeof(*rn.steps))) == NULL)
		fatal("calloc");
	json_array_foreach(phases, i, ph) {
		steps = json_object_get(ph, "steps");
		json_array_foreach(steps, j, st) {
			struct rstep *s = &rn.steps[rn.nsteps++];

			s->j = st;
			s->id = jstr(st, "id", "?");
			s->kind = jstr(st, "kind", "?");
			s->phase = jstr(ph, "name", "?");
			s->when = jstr(st, "when", "success");
			s->retry = jint(st, "retry", 0);
			s->timeout_s = jint(st, "timeout_s", 0);
			s->allow_failure = json_is_true(json_object_get(st, "allow_failure"));
			s->first_in_phase = j == 0;
			s->last_in_phase = j + 1 == json_array_size(steps);
		}
	}
	json_array_foreach(rn.hist, i, a) {
		struct rstep *s = step_by_id(jstr(a, "step_id", ""));
		const char *status = jstr(a, "status", "");
		int att = jint(a, "attempt", 0);

		if (s == NULL)
			continue;
		if (att > s->last_attempt)
			s->last_attempt = att;
		/* a crash hands its session on; any other end closes it */
		if (json_is_string(json_object_get(a, "session")))
			s->session = jstr(a, "session", NULL);
		if (strcmp(status, "running") != 0 && strcmp(status, "crashed") != 0)
			s->session = NULL;
		if (strcmp(status, "running") == 0)
			s->running = att;
		else if (strcmp(status, "crashed") == 0)
			s->crashes++;
		else if (strcmp(status, "failed") == 0 || strcmp(status, "timed_out") == 0) {
			s->fails++;
			if (s->fails > s->retry)
				s->final = "failed";
		} else
			s->final = status; /* succeeded, skipped, cancelled */
	}
}

/* ${params.NAME} expanded in s (other text as it is). */
static char *
expand(const char *s)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	if (f == NULL)
		fatal("open_memstream");
	while (*s != '\0') {
		const char *end;

		if (strncmp(s, "${params.", 9) == 0 && (end = strchr(s + 9, '}')) != NULL) {
			char name[128];
			json_t *v;

			snprintf(name, sizeof(name), "%.*s", (int)(end - s - 9), s + 9);
			v = json_object_get(rn.params, name);
			if (json_is_string(v))
				fputs(json_string_value(v), f);
			else if (json_is_integer(v))
				fprintf(f, "%lld", (long long)json_integer_value(v));
			else if (json_is_boolean(v))
				fputs(json_is_true(v) ? "true" : "false", f);
			s = end + 1;
			continue;
		}
		fputc(*s++, f);
	}
	if (fclose(f) != 0)
		fatal("expand");
	return out;
}

/* Whether step s runs, by its "when". */
static int
when_holds(const struct rstep *s)
{
	if (strcmp(s->when, "always") == 0)
		return 1;
	if (strcmp(s->when, "failure") == 0)
		return rn.failing;
	if (strncmp(s->when, "${params.", 9) == 0) {
		char *v = expand(s->when);
		int yes = strcmp(v, "true") == 0;

		free(v);
		return yes && !rn.failing;
	}
	return !rn.failing;
}

static void
note_failure(const struct rstep *s, const char *fmt, ...)
{
	va_list ap;

	if (s->allow_failure || rn.failing)
		return;
	rn.failing = 1;
	va_start(ap, fmt);
	vsnprintf(rn.fail_error, sizeof(rn.fail_error), fmt, ap);
	va_end(ap);
}

/* ---- step ends ----------------------------------------------------------- */

struct end_ctx {
	int final; /* the step is over (no retry follows) */
};

static void
step_end_done(struct child *c, const struct ipc_db_result *r, void *arg)
{
	struct end_ctx *x = arg;
	int final = x->final;

	free(x);
	check_db(r, "ending a step");
	if (!cell_true(r)) {
		runner_lease_lost();
		return;
	}
	if (final)
		rn.cur++;
	next_step();
}

/* End attempt rn.attempt of the current step with status; final: no retry
 * follows (the phase may end with it). */
static void
step_end_arts(const char *status, int exit_status, const char *error, json_t *extra, int final,
    json_t *arts)
{
	struct rstep *s = &rn.steps[rn.cur];
	struct qop *q = runner_op("runner_step_end", 7);
	struct end_ctx *x;
	char *js;

	if ((x = calloc(1, sizeof(*x))) == NULL)
		fatal("calloc");
	x->final = final;
	log_info("run %s: step %s attempt %d %s%s%s", rn.run, s->id, rn.attempt, status,
	    error != NULL ? ": " : "", error != NULL ? error : "");
	if (extra == NULL)
		extra = json_object();
	if (final && s->last_in_phase)
		json_object_set_new(extra, "phase_done", json_string(s->phase));
	ipc_put_str(&q->w, s->id);
	ipc_put_u64(&q->w, (uint64_t)rn.attempt);
	ipc_put_str(&q->w, status);
	if (exit_status >= 0)
		ipc_put_u64(&q->w, (uint64_t)exit_status);
	else
		ipc_put_nil(&q->w);
	if (error != NULL)
		ipc_put_strn(&q->w, error, strnlen(error, 8000));
	else
		ipc_put_nil(&q->w);
	if ((js = json_dumps(extra, JSON_COMPACT)) == NULL)
		fatalx("out of memory");
	json_decref(extra);
	ipc_put_str(&q->w, js);
	free(js);
	if (arts != NULL) {
		if ((js = json_dumps(arts, JSON_COMPACT)) == NULL)
			fatalx("out of memory");
		json_decref(arts);
		ipc_put_str(&q->w, js);
		free(js);
	} else
		ipc_put_nil(&q->w);
	runner_op_send(q, step_end_done, x);
}

static void
step_end(const char *status, int exit_status, const char *error, json_t *extra, int final)
{
	step_end_arts(status, exit_status, error, extra, final, NULL);
}

/* ---- command steps ------------------------------------------------------- */

void
runner_sbx_send(struct ipc_wbuf *w)
{
	if (ipc_wbuf_finish(w, rn.c.max_frame) == -1 || ipc_chan_send(rn.sbx, w, -1) == -1)
		fatalx("cannot send to the sandbox");
	ipc_wbuf_free(w);
}

/* The step's timeout, cut to the sandbox's longest (0: no timeout of its
 * own, the sandbox's). */
static uint64_t
step_timeout_ms(const struct rstep *s)
{
	uint64_t ms = (uint64_t)s->timeout_s * 1000;

	return ms == 0 || ms > rn.exec_max_ms ? rn.exec_max_ms : ms;
}

static void
command_run(void)
{
	struct rstep *s = &rn.steps[rn.cur];
	struct ipc_wbuf w;
	char *cmd = expand(jstr(s->j, "run", ""));

	rn.exec_id++;
	rn.exec_running = 1;
	ipc_wbuf_begin(&w, IMSG_SBX_EXEC, rn.exec_id, 4);
	ipc_put_bool(&w, 1);
	ipc_put_array(&w, 1);
	ipc_put_str(&w, cmd);
	ipc_put_str(&w, "");
	ipc_put_u64(&w, step_timeout_ms(s));
	free(cmd);
	runner_sbx_send(&w);
}

static void
command_exited(const struct ipc_sbx_exit *x)
{
	struct rstep *s = &rn.steps[rn.cur];
	const char *status;
	char err[IPC_ERRMSG_MAX + 64];
	json_t *extra;

	rn.exec_running = 0;
	evtimer_del(rn.flush_ev);
	flush_output(1);
	extra = json_pack("{s:I, s:b}", "duration_ms", (json_int_t)x->duration_ms,
	    "output_truncated", x->truncated);
	err[0] = '\0';
	if (rn.cancel) {
		status = "cancelled";
		snprintf(err, sizeof(err), "cancelled");
	} else if (x->code != 0) {
		status = "failed";
		snprintf(err, sizeof(err), "the command could not run: %.*s", (int)x->errlen,
		    x->error);
	} else if (x->timed_out) {
		status = "timed_out";
		snprintf(err, sizeof(err), "timed out after %llu ms",
		    (unsigned long long)step_timeout_ms(s));
	} else if (x->status != 0) {
		status = "failed";
		if (x->status < 0)
			snprintf(err, sizeof(err), "killed by signal %u", x->signal);
		else
			snprintf(err, sizeof(err), "exited with status %lld", (long long)x->status);
	} else
		status = "succeeded";
	attempt_over(status, x->status >= 0 && x->status <= 255 && x->code == 0 ? (int)x->status : -1,
	    err[0] != '\0' ? err : NULL, extra);
}

/* ---- artifacts ----------------------------------------------------------- */

static void
arts_free(void)
{
	size_t i;

	for (i = 0; i < rn.narts; i++)
		free(rn.arts[i].data);
	free(rn.arts);
	rn.arts = NULL;
	rn.narts = rn.art_cur = 0;
}

/* The current step's contract: its "produces". */
static void
arts_load(void)
{
	struct rstep *s = &rn.steps[rn.cur];
	json_t *prod = json_object_get(s->j, "produces"), *p;
	size_t i;

	arts_free();
	rn.narts = json_array_size(prod);
	if ((rn.arts = calloc(rn.narts + 1, sizeof(*rn.arts))) == NULL)
		fatal("calloc");
	json_array_foreach(prod, i, p) {
		rn.arts[i].key = jstr(p, "key", "");
		rn.arts[i].kind = jstr(p, "kind", "text");
		rn.arts[i].file = jstr(p, "file", "");
		rn.arts[i].required = json_is_true(json_object_get(p, "required"));
		snprintf(rn.arts[i].why, sizeof(rn.arts[i].why), "missing");
	}
}

/* The largest artifact a frame to the supervisor can carry. */
static uint64_t
art_cap(void)
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
	struct pending_end *e = rn.pend;
	json_t *arts = json_array();
	char hex[65], *enc;
	size_t i;

	for (i = 0; i < rn.narts; i++) {
		struct art *a = &rn.arts[i];
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

	send_event("artifact.rejected", json_pack("{s:s, s:i, s:s, s:s, s:s}", "step_id", s->id,
	    "attempt", rn.attempt, "key", a->key, "file", a->file, "reason", a->why));
}

/* SBX_RESULT of an SBX_ARTIFACT. */
static void
art_result(const struct ipc_msg *m)
{
	struct art *a = &rn.arts[rn.art_cur];
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
		rn.art_cur++;
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
		rn.art_cur++;
		arts_next();
		return;
	}
	memcpy(a->sha, got, 32);
	a->ok = 1;
	if (a->len <= IPC_INLINE_MAX) {
		rn.art_cur++;
		arts_next();
		return;
	}
	/* too large for the database: into the store first */
	rn.put_id = ++rn.art_id;
	ipc_wbuf_begin(&w, IMSG_ARTIFACT_PUT, rn.put_id, 2);
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
	struct art *a = &rn.arts[rn.art_cur];

	rn.put_id = 0;
	if (rr->ok) {
		a->stored = 1;
	} else {
		a->ok = 0;
		snprintf(a->why, sizeof(a->why), "%.*s", (int)rr->errlen, rr->error);
		art_rejected(a);
	}
	rn.art_cur++;
	arts_next();
}

static void
arts_next(void)
{
	struct ipc_wbuf w;
	struct art *a;

	if (rn.art_cur >= rn.narts) {
		arts_finish();
		return;
	}
	a = &rn.arts[rn.art_cur];
	a->cap = art_cap();
	rn.art_id = ART_ID_BASE + rn.art_cur;
	ipc_wbuf_begin(&w, IMSG_SBX_ARTIFACT, rn.art_id, 4);
	ipc_put_str(&w, a->key);
	ipc_put_str(&w, a->kind);
	ipc_put_str(&w, a->file);
	ipc_put_u64(&w, a->cap);
	runner_sbx_send(&w);
}

static void
art_output(const uint8_t *data, size_t len)
{
	struct art *a = &rn.arts[rn.art_cur];

	if (a->len + len > a->cap)
		fatalx("the sandbox sent more of an artifact than its cap");
	if ((a->data = realloc(a->data, a->len + len)) == NULL)
		fatal("realloc");
	memcpy(a->data + a->len, data, len);
	a->len += len;
}

/* The attempt ended with status: read its artifacts when it keeps them
 * (succeeded, or failed for good where failure is allowed), then decide. */
static void
attempt_over(const char *status, int exit_status, const char *error, json_t *extra)
{
	struct rstep *s = &rn.steps[rn.cur];
	struct pending_end *e;
	int failed = strcmp(status, "failed") == 0;

	if ((e = calloc(1, sizeof(*e))) == NULL)
		fatal("calloc");
	snprintf(e->status, sizeof(e->status), "%s", status);
	snprintf(e->error, sizeof(e->error), "%s", error != NULL ? error : "");
	e->exit_status = exit_status;
	e->extra = extra != NULL ? extra : json_object();
	rn.pend = e;
	arts_load();
	if (rn.narts > 0 && !rn.cancel &&
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
	struct pending_end *e = rn.pend;
	json_t *arts = json_object_get(e->extra, "artifacts_json");
	int final = 1;

	rn.pend = NULL;
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
			note_failure(s, "step %s: %s", s->id, e->error);
	}
	arts_free();
	step_end_arts(e->status, e->exit_status, e->error[0] != '\0' ? e->error : NULL, e->extra,
	    final, arts);
	free(e);
}

/* ---- patch steps --------------------------------------------------------- */

static void
patch_start(void)
{
	struct ipc_wbuf w;

	rn.patch_id = ++rn.art_id;
	ipc_wbuf_begin(&w, IMSG_PATCH_MAKE, rn.patch_id, 1);
	ipc_put_u64(&w, art_cap());
	if (ipc_wbuf_finish(&w, rn.c.max_frame) == -1 || ipc_chan_send(rn.c.sup, &w, -1) == -1)
		fatalx("cannot ask for a patch");
	ipc_wbuf_free(&w);
}

/* The supervisor's patch: the contract's patch artifact (the first of kind
 * patch, or an optional "patch"). */
static void
patch_done(const struct ipc_runner_reply *rr)
{
	struct pending_end *e;
	struct art *a = NULL;
	size_t i;

	rn.patch_id = 0;
	if ((e = calloc(1, sizeof(*e))) == NULL)
		fatal("calloc");
	e->exit_status = -1;
	e->extra = json_pack("{s:I}", "patch_size", (json_int_t)rr->size);
	rn.pend = e;
	if (!rr->ok) {
		snprintf(e->status, sizeof(e->status), "failed");
		snprintf(e->error, sizeof(e->error), "the patch could not be made: %.*s",
		    (int)rr->errlen, rr->error);
		arts_free();
		attempt_decide();
		return;
	}
	snprintf(e->status, sizeof(e->status), "succeeded");
	arts_load();
	for (i = 0; i < rn.narts && a == NULL; i++)
		if (strcmp(rn.arts[i].kind, "patch") == 0)
			a = &rn.arts[i];
	if (a == NULL) {
		arts_free();
		if ((rn.arts = calloc(1, sizeof(*rn.arts))) == NULL)
			fatal("calloc");
		rn.narts = 1;
		a = &rn.arts[0];
		a->key = "patch";
		a->kind = "patch";
		a->file = "";
	}
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
	/* only the patch artifact: other keys a patch step names are not made */
	for (i = 0; i < rn.narts; i++)
		if (&rn.arts[i] != a)
			rn.arts[i].required = 0, rn.arts[i].ok = 0;
	arts_finish();
}

/* Before a command whose step produces artifacts: its contracted files go,
 * so that a file an earlier attempt left is never taken for this one's. */
static void
command_start(void)
{
	struct rstep *s = &rn.steps[rn.cur];
	json_t *prod = json_object_get(s->j, "produces"), *p;
	struct ipc_wbuf w;
	size_t i, n = json_array_size(prod);
	char path[IPC_SBX_NAME_MAX + 32];

	if (n == 0) {
		command_run();
		return;
	}
	rn.cleaning = 1;
	ipc_wbuf_begin(&w, IMSG_SBX_EXEC, CLEAN_ID, 4);
	ipc_put_bool(&w, 0);
	ipc_put_array(&w, (uint32_t)(n + 3));
	ipc_put_str(&w, "rm");
	ipc_put_str(&w, "-f");
	ipc_put_str(&w, "--");
	json_array_foreach(prod, i, p) {
		snprintf(path, sizeof(path), ".agrippa/artifacts/%s", jstr(p, "file", ""));
		ipc_put_str(&w, path);
	}
	ipc_put_str(&w, "");
	ipc_put_u64(&w, 60000);
	runner_sbx_send(&w);
}

/* ---- checkpoints --------------------------------------------------------- */

static void
checkpoint_done(struct child *c, const struct ipc_db_result *r, void *arg)
{
	size_t len;

	check_db(r, "requesting an approval");
	if (child_db_cell(r, 0, &len) == NULL) {
		/* no approval: the lease is gone or a cancel came first */
		finish_run("cancelled", NULL);
		return;
	}
	log_info("run %s: waiting for approval at step %s", rn.run, rn.steps[rn.cur].id);
	runner_exit(IPC_RUN_PARKED);
}

static void
checkpoint_start(void)
{
	struct rstep *s = &rn.steps[rn.cur];
	struct qop *q = runner_op("runner_checkpoint", 4);
	char *msg = expand(jstr(s->j, "message", ""));

	ipc_put_str(&q->w, s->id);
	ipc_put_u64(&q->w, (uint64_t)rn.attempt);
	ipc_put_str(&q->w, msg);
	ipc_put_u64(&q->w, (uint64_t)jint(s->j, "expires_s", 86400));
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
		if (strcmp(jstr(a, "step_id", ""), s->id) == 0)
			decision = jstr(a, "status", "");
	rn.attempt = s->running;
	s->running = 0;
	if (decision != NULL && strcmp(decision, "approved") == 0) {
		step_end("succeeded", -1, NULL, json_pack("{s:s}", "approval", decision), 1);
		return;
	}
	if (decision == NULL || strcmp(decision, "pending") == 0) {
		/* claimed while still pending: not ours to decide */
		log_warnx("run %s: checkpoint %s has no decision yet", rn.run, s->id);
		runner_exit(IPC_RUN_STOPPED);
		return;
	}
	note_failure(s, "step %s: the approval was %s", s->id, decision);
	step_end("failed", -1, strcmp(decision, "rejected") == 0 ? "the approval was rejected" :
	    "the approval expired", json_pack("{s:s}", "approval", decision), 1);
}

/* ---- agent steps --------------------------------------------------------- */

/* The names of the skills step s requires, as a JSON array (new). */
static json_t *
step_skills(const struct rstep *s)
{
	json_t *names = json_array(), *r;
	size_t i;

	json_array_foreach(json_object_get(json_object_get(s->j, "requires"), "skills"), i, r)
		json_array_append_new(names, json_string(jstr(r, "name", "")));
	return names;
}

static void
agent_begin(struct rstep *s)
{
	struct agent_step a;
	json_t *ws = json_object_get(rn.tmpl, "workspace");
	char *prompt = expand(jstr(s->j, "prompt", ""));
	json_t *skills = step_skills(s);

	memset(&a, 0, sizeof(a));
	a.step = s->id;
	a.phase = s->phase;
	a.attempt = rn.attempt;
	a.prompt = prompt;
	a.max_turns = jint(s->j, "max_turns", 50);
	a.readonly = strcmp(jstr(ws, "access", "readWrite"), "readOnly") == 0;
	a.produces = json_object_get(s->j, "produces");
	a.skills = skills;
	a.reserved = rn.reserved;
	a.resume = s->session;
	s->session = NULL;
	agent_start(&a);
	free(prompt);
	json_decref(skills);
}

int
runner_cancelled(void)
{
	return rn.cancel;
}

void
runner_agent_over(const char *status, const char *error, json_t *extra, int no_retry)
{
	rn.no_retry = no_retry;
	if (strcmp(status, "cancelled") == 0) {
		json_decref(extra);
		attempt_over("cancelled", -1, "cancelled", NULL);
		return;
	}
	attempt_over(status, -1, error, extra);
}

/* ---- starting a step ----------------------------------------------------- */

/* The outcome word of step_begin or step_reserve, in *v (len bytes); -1
 * when it ended the runner's part already: the lease is lost ('lost'), or
 * a cancel came first ('cancelled'). */
static int
step_op_outcome(const struct ipc_db_result *r, const char *what, const char **v, size_t *len)
{
	check_db(r, what);
	if ((*v = child_db_cell(r, 0, len)) == NULL || cell_is(*v, *len, "lost")) {
		runner_lease_lost();
		return -1;
	}
	if (cell_is(*v, *len, "cancelled")) {
		rn.cancel = 1;
		finish_run("cancelled", NULL);
		return -1;
	}
	return 0;
}

static void
step_begun(struct child *c, const struct ipc_db_result *r, void *arg)
{
	struct rstep *s = &rn.steps[rn.cur];
	size_t len;
	const char *v;

	if (step_op_outcome(r, "starting a step", &v, &len) == -1)
		return;
	s->last_attempt = rn.attempt;
	log_debug("run %s: step %s attempt %d", rn.run, s->id, rn.attempt);
	if (rn.refused) {
		const char *err = "its budget is spent and more was refused";

		note_failure(s, "step %s: %s", s->id, err);
		step_end("failed", -1, err, NULL, 1);
	} else if (s->crashes >= RUNNER_CRASH_MAX) {
		/* a step that keeps killing its runner: this attempt fails at once */
		char err[128];

		snprintf(err, sizeof(err), "its runner died %d times", s->crashes);
		note_failure(s, "step %s: %s", s->id, err);
		step_end("failed", -1, err, NULL, 1);
	} else if (strcmp(s->kind, "command") == 0) {
		command_start();
	} else if (strcmp(s->kind, "checkpoint") == 0) {
		checkpoint_start();
	} else if (strcmp(s->kind, "patch") == 0) {
		patch_start();
	} else if (strcmp(s->kind, "agent") == 0) {
		agent_begin(s);
	} else {
		char err[128];

		snprintf(err, sizeof(err), "%s steps are not supported yet", s->kind);
		note_failure(s, "step %s: %s", s->id, err);
		step_end("failed", -1, err, NULL, 1);
	}
}

static void
step_begin(void)
{
	struct rstep *s = &rn.steps[rn.cur];
	struct qop *q = runner_op("runner_step_begin", 4);

	ipc_put_str(&q->w, s->phase);
	ipc_put_str(&q->w, s->id);
	ipc_put_u64(&q->w, (uint64_t)rn.attempt);
	ipc_put_str(&q->w, s->kind);
	runner_op_send(q, step_begun, NULL);
}

/* ---- budgets ------------------------------------------------------------- */

static void
reserve_done(struct child *c, const struct ipc_db_result *r, void *arg)
{
	struct rstep *s = &rn.steps[rn.cur];
	const char *v, *a;
	size_t len, alen;
	char num[24];

	if (step_op_outcome(r, "reserving a step's budget", &v, &len) == -1)
		return;
	if (cell_is(v, len, "paused")) {
		log_info("run %s: step %s has no budget left; waiting for more", rn.run, s->id);
		runner_exit(IPC_RUN_PARKED);
		return;
	}
	if (cell_is(v, len, "refused")) {
		rn.refused = 1;
		step_begin();
		return;
	}
	if ((a = child_db_cell(r, 1, &alen)) == NULL || alen == 0 || alen >= sizeof(num))
		fatalx("run %s: a reservation without an amount", rn.run);
	memcpy(num, a, alen);
	num[alen] = '\0';
	rn.reserved = strtoll(num, NULL, 10);
	log_debug("run %s: step %s attempt %d may spend %lld micro-dollars (%.*s)", rn.run,
	    s->id, rn.attempt, (long long)rn.reserved, (int)len, v);
	step_begin();
}

/* The attempt that is next: an agent step's (the kind that spends) first
 * reserves what it may spend, or parks the run when it may spend nothing
 * more (step_reserve); any other starts at once. */
static void
attempt_next(void)
{
	struct rstep *s = &rn.steps[rn.cur];
	struct qop *q;

	rn.attempt = s->last_attempt + 1;
	rn.reserved = 0;
	rn.refused = 0;
	rn.no_retry = 0;
	if (strcmp(s->kind, "agent") != 0) {
		step_begin();
		return;
	}
	q = runner_op("runner_step_reserve", 4);
	ipc_put_str(&q->w, s->phase);
	ipc_put_str(&q->w, s->id);
	ipc_put_u64(&q->w, (uint64_t)rn.attempt);
	ipc_put_u64(&q->w, rn.step_budget);
	runner_op_send(q, reserve_done, NULL);
}

static void
crash_done(struct child *c, const struct ipc_db_result *r, void *arg)
{
	struct rstep *s = &rn.steps[rn.cur];

	check_db(r, "marking a crashed attempt");
	if (!cell_true(r)) {
		runner_lease_lost();
		return;
	}
	s->crashes++;
	s->running = 0;
	next_step();
}

static void
skip_done(struct child *c, const struct ipc_db_result *r, void *arg)
{
	check_db(r, "skipping a step");
	if (!cell_true(r)) {
		runner_lease_lost();
		return;
	}
	rn.cur++;
	next_step();
}

static void
next_step(void)
{
	struct rstep *s;

	if (rn.finishing)
		return;
	if (rn.cancel) {
		finish_run("cancelled", NULL);
		return;
	}
	if (rn.cur >= rn.nsteps) {
		finish_run(rn.failing ? "failed" : "succeeded", rn.failing ? rn.fail_error : NULL);
		return;
	}
	s = &rn.steps[rn.cur];
	if (s->final != NULL) { /* ended before this runner */
		if (strcmp(s->final, "failed") == 0)
			note_failure(s, "step %s failed", s->id);
		rn.cur++;
		next_step();
		return;
	}
	if (s->running != 0) {
		if (strcmp(s->kind, "checkpoint") == 0) {
			checkpoint_resume(s);
		} else {
			struct qop *q = runner_op("runner_step_crash", 2);

			log_info("run %s: step %s attempt %d was interrupted; running it again",
			    rn.run, s->id, s->running);
			ipc_put_str(&q->w, s->id);
			ipc_put_u64(&q->w, (uint64_t)s->running);
			runner_op_send(q, crash_done, NULL);
		}
		return;
	}
	if (s->last_attempt == 0 && !when_holds(s)) {
		struct qop *q = runner_op("runner_step_skip", 4);

		ipc_put_str(&q->w, s->phase);
		ipc_put_str(&q->w, s->id);
		ipc_put_str(&q->w, s->when);
		ipc_put_bool(&q->w, s->last_in_phase);
		runner_op_send(q, skip_done, NULL);
		return;
	}
	attempt_next();
}

/* ---- the run's end ------------------------------------------------------- */

static void
finish_done(struct child *c, const struct ipc_db_result *r, void *arg)
{
	size_t len;
	const char *v;

	check_db(r, "ending the run");
	if ((v = child_db_cell(r, 0, &len)) == NULL) {
		runner_lease_lost();
		return;
	}
	log_info("run %s: %.*s", rn.run, (int)len, v);
	runner_exit(IPC_RUN_FINISHED);
}

static void
finish_run(const char *status, const char *error)
{
	struct qop *q;

	if (rn.finishing)
		return;
	rn.finishing = 1;
	q = runner_op("runner_finish", 2);
	ipc_put_str(&q->w, status);
	if (error != NULL)
		ipc_put_str(&q->w, error);
	else
		ipc_put_nil(&q->w);
	runner_op_send(q, finish_done, NULL);
}

/* ---- loading ------------------------------------------------------------- */

static json_t *
cell_json(const struct ipc_db_result *r, uint32_t col)
{
	size_t len;
	const char *s = child_db_cell(r, col, &len);
	json_t *j;

	if (s == NULL || (j = json_loadb(s, len, 0, NULL)) == NULL)
		fatalx("run %s: column %u of its load is not JSON", rn.run, col);
	return j;
}

static void
loaded(struct child *c, const struct ipc_db_result *r, void *arg)
{
	check_db(r, "loading the run");
	if (r->nrows != 1) {
		runner_lease_lost();
		return;
	}
	rn.cancel = cell_true(r);
	rn.tmpl = cell_json(r, 1);
	rn.params = cell_json(r, 2);
	rn.hist = cell_json(r, 3);
	rn.approvals = cell_json(r, 4);
	load_template();
	log_info("run %s: runner started (%zu steps, claimed from %s)", rn.run, rn.nsteps,
	    rn.previous);
	next_step();
}

static void
sbx_msg(struct ipc_chan *ch, struct ipc_msg *m, void *arg)
{
	struct ipc_sbx_output o;
	struct ipc_sbx_exit x;

	if (rn.exiting || agent_sbx_msg(m))
		return;
	switch (m->type) {
	case IMSG_SBX_READY:
		if (rn.sbx_ready++)
			fatalx("the sandbox said ready twice");
		runner_op_send(runner_op("runner_load", 0), loaded, NULL);
		return;
	case IMSG_SBX_OUTPUT:
		if (ipc_dec_sbx_output(m->body, &o) == -1)
			return;
		if (m->id == rn.exec_id && rn.exec_running)
			buffer_output(o.stream, o.data, o.len);
		else if (m->id == rn.art_id && m->id >= ART_ID_BASE && o.stream == 0 &&
		    rn.art_cur < rn.narts)
			art_output(o.data, o.len);
		return;
	case IMSG_SBX_EXIT:
		if (ipc_dec_sbx_exit(m->body, &x) == -1)
			fatalx("the sandbox sent a bad exit");
		if (m->id == CLEAN_ID && rn.cleaning) {
			rn.cleaning = 0;
			if (x.code != 0 || x.status != 0)
				log_warnx("run %s: removing stale artifacts failed", rn.run);
			if (rn.cancel) {
				attempt_over("cancelled", -1, "cancelled", NULL);
				return;
			}
			command_run();
			return;
		}
		if (m->id != rn.exec_id || !rn.exec_running)
			fatalx("the sandbox sent an exit for no command");
		command_exited(&x);
		return;
	case IMSG_SBX_RESULT:
		if (m->id != rn.art_id || m->id < ART_ID_BASE || rn.art_cur >= rn.narts)
			fatalx("the sandbox sent a result for nothing asked");
		art_result(m);
		return;
	default:
		fatalx("unexpected %s from the sandbox", ipc_msg_name(m->type));
	}
}

static void
sbx_err(struct ipc_chan *ch, const char *reason, void *arg)
{
	/* The sandbox is gone (killed, out of memory): this runner cannot go
	 * on.  Its lease lapses and the run is taken up again. */
	fatalx("run %s: sandbox channel: %s", rn.run, reason);
}

static void
runner_dispatch(struct child *c, struct ipc_msg *m)
{
	struct ipc_runner_start st;
	struct ipc_runner_reply rr;
	struct ipc_wbuf w;

	if (rn.exiting)
		return;
	switch (m->type) {
	case IMSG_RUNNER_START:
		if (rn.started++ || ipc_dec_runner_start(m->body, &st) == -1 || m->fd < 0)
			fatalx("a bad start");
		memcpy(rn.run, st.run, sizeof(rn.run));
		memcpy(rn.owner, st.owner, sizeof(rn.owner));
		memcpy(rn.previous, st.previous, sizeof(rn.previous));
		rn.exec_max_ms = st.exec_max_ms;
		rn.step_budget = st.step_budget;
		rn.sbx = ipc_chan_new(c->base, m->fd, ROLE_RUNNER, ROLE_SANDBOX, c->max_frame,
		    sbx_msg, sbx_err, NULL);
		if (rn.sbx == NULL)
			fatalx("cannot set up the sandbox channel");
		m->fd = -1;
		return;
	case IMSG_RUNNER_REPLY:
		if (ipc_dec_runner_reply(m->body, &rr) == -1)
			fatalx("a bad reply from the supervisor");
		if (m->id != 0 && m->id == rn.put_id)
			art_put_done(&rr);
		else if (m->id != 0 && m->id == rn.patch_id)
			patch_done(&rr);
		else
			fatalx("a reply from the supervisor to nothing asked");
		return;
	case IMSG_RUNNER_PROXY:
		agent_proxy(m);
		return;
	case IMSG_RUNNER_CANCEL:
		if (rn.cancel)
			return;
		rn.cancel = 1;
		log_info("run %s: cancel requested", rn.run);
		agent_cancel();
		if (rn.exec_running) {
			ipc_wbuf_begin(&w, IMSG_SBX_KILL, rn.exec_id, 0);
			runner_sbx_send(&w);
		}
		/* otherwise the next step boundary (or the current operation's
		 * reply) ends the run */
		return;
	default:
		fatalx("unexpected %s from the supervisor", ipc_msg_name(m->type));
	}
}

void
runner_main(void)
{
	child_bootstrap(&rn.c, ROLE_RUNNER);
	if ((rn.c.base = event_base_new()) == NULL)
		fatalx("event_base_new");
	if ((rn.flush_ev = evtimer_new(rn.c.base, flush_timer, NULL)) == NULL)
		fatalx("evtimer_new");
	agent_init(&rn.c);
	child_lockdown(&rn.c);
	child_run(&rn.c, runner_dispatch);
	/* SHUTDOWN: the daemon drains; the step in progress is taken up
	 * again by the next runner once the lease lapses. */
	log_debug("run %s: runner stopping for shutdown", rn.run);
	exit(0);
}
