/*
 * runner: drives one run (DESIGN.md sections 1, 3.3-3.5).
 *
 * The supervisor starts it for a run its engine claimed and hands it, in
 * RUNNER_START, the run, the lease owner it acts for and its end of the
 * run's sandbox channel.  The runner loads the run (template, params, every
 * step attempt so far, approvals), then walks the steps in order:
 *  - a step that already ended is not run again; an attempt left running by
 *    a runner that died is marked crashed and run again, without counting
 *    as a retry (RUNNER_CRASH_MAX crashes fail it), unless its kind resumes
 *    it (a checkpoint's decision);
 *  - "when" decides whether a step runs (success: no failure so far,
 *    failure: some step failed, always, ${params.NAME}: the parameter is
 *    true and no step failed); a step that does not run is skipped;
 *  - a step that runs is started by its kind (kinds.c): command
 *    (step_command.c), agent (agent.c, once the attempt reserved what it
 *    may spend), patch (step_patch.c), checkpoint (step_checkpoint.c: the
 *    run is parked and this runner exits), pull_request (step_pr.c: the
 *    change pushed and its pull request opened, by the supervisor's git
 *    helper);
 *  - a failed attempt is retried up to "retry" times (artifact.c).
 * A failed step fails the run unless it allows failure.  Every database
 * change is one operation that checks the lease, so a runner that lost its
 * lease changes nothing and stops.  Operations go one at a time, so events
 * are stored in the order they happened.
 */
#include <event2/event.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "runner/core.h"
#include "runner/runner.h"

struct runner rn;

static void next_step(void);

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

/* Every callback checks exiting. */
void
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

/* The lease is gone (another engine took the run, or it expired). */
void
runner_lease_lost(void)
{
	log_warnx("run %s: the lease is no longer held; stopping", rn.run);
	runner_exit(IPC_RUN_STOPPED);
}

/* ---- template and history ------------------------------------------------ */

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
			s->id = runner_jstr(st, "id", "?");
			s->kind = runner_jstr(st, "kind", "?");
			s->k = step_kind_find(s->kind);
			s->phase = runner_jstr(ph, "name", "?");
			s->when = runner_jstr(st, "when", "success");
			s->retry = runner_jint(st, "retry", 0);
			s->timeout_s = runner_jint(st, "timeout_s", 0);
			s->allow_failure = json_is_true(json_object_get(st, "allow_failure"));
			s->first_in_phase = j == 0;
			s->last_in_phase = j + 1 == json_array_size(steps);
		}
	}
	json_array_foreach(rn.hist, i, a) {
		struct rstep *s = step_by_id(runner_jstr(a, "step_id", ""));
		const char *status = runner_jstr(a, "status", "");
		int att = runner_jint(a, "attempt", 0);

		if (s == NULL)
			continue;
		if (att > s->last_attempt)
			s->last_attempt = att;
		/* a crash hands its session on; any other end closes it */
		if (json_is_string(json_object_get(a, "session")))
			s->session = runner_jstr(a, "session", NULL);
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

/* Whether step s runs, by its "when". */
static int
when_holds(const struct rstep *s)
{
	if (strcmp(s->when, "always") == 0)
		return 1;
	if (strcmp(s->when, "failure") == 0)
		return rn.failing;
	if (strncmp(s->when, "${params.", 9) == 0) {
		char *v = runner_expand(s->when);
		int yes = strcmp(v, "true") == 0;

		free(v);
		return yes && !rn.failing;
	}
	return !rn.failing;
}

void
runner_note_failure(const struct rstep *s, const char *fmt, ...)
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
	runner_db_check(r, "ending a step");
	if (!cell_true(r)) {
		runner_lease_lost();
		return;
	}
	if (final)
		rn.cur++;
	next_step();
}

/* The phase may end with a final end. */
void
runner_step_end(const char *status, int exit_status, const char *error, json_t *extra,
    int final, json_t *arts)
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

void
runner_step_fail(const struct rstep *s, const char *error)
{
	runner_note_failure(s, "step %s: %s", s->id, error);
	runner_step_end("failed", -1, error, NULL, 1, NULL);
}

/* ---- starting a step ----------------------------------------------------- */

/* The outcome word of step_begin or step_reserve, in *v (len bytes); -1
 * when it ended the runner's part already: the lease is lost ('lost'), or
 * a cancel came first ('cancelled'). */
static int
step_op_outcome(const struct ipc_db_result *r, const char *what, const char **v, size_t *len)
{
	runner_db_check(r, what);
	if ((*v = child_db_cell(r, 0, len)) == NULL || cell_is(*v, *len, "lost")) {
		runner_lease_lost();
		return -1;
	}
	if (cell_is(*v, *len, "cancelled")) {
		rn.cancel = 1;
		runner_finish("cancelled", NULL);
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
		runner_step_fail(s, "its budget is spent and more was refused");
	} else if (s->crashes >= RUNNER_CRASH_MAX) {
		/* a step that keeps killing its runner: this attempt fails at once */
		char err[128];

		snprintf(err, sizeof(err), "its runner died %d times", s->crashes);
		runner_step_fail(s, err);
	} else
		s->k->start(s);
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

/* The attempt that is next: a step of a kind that spends (agent) first
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
	if (!s->k->spends) {
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

	runner_db_check(r, "marking a crashed attempt");
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
	runner_db_check(r, "skipping a step");
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
		runner_finish("cancelled", NULL);
		return;
	}
	if (rn.cur >= rn.nsteps) {
		runner_finish(rn.failing ? "failed" : "succeeded", rn.failing ? rn.fail_error : NULL);
		return;
	}
	s = &rn.steps[rn.cur];
	if (s->final != NULL) { /* ended before this runner */
		if (strcmp(s->final, "failed") == 0)
			runner_note_failure(s, "step %s failed", s->id);
		rn.cur++;
		next_step();
		return;
	}
	if (s->running != 0) {
		if (s->k->resume != NULL) {
			s->k->resume(s);
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

	runner_db_check(r, "ending the run");
	if ((v = child_db_cell(r, 0, &len)) == NULL) {
		runner_lease_lost();
		return;
	}
	log_info("run %s: %.*s", rn.run, (int)len, v);
	runner_exit(IPC_RUN_FINISHED);
}

void
runner_finish(const char *status, const char *error)
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
	runner_db_check(r, "loading the run");
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

/* ---- the channels -------------------------------------------------------- */

void
runner_sbx_send(struct ipc_wbuf *w)
{
	if (ipc_wbuf_finish(w, rn.c.max_frame) == -1 || ipc_chan_send(rn.sbx, w, -1) == -1)
		fatalx("cannot send to the sandbox");
	ipc_wbuf_free(w);
}

/* Each kind, in the table's order, is offered a message the core does not
 * take, from the sandbox (sbx) or the supervisor; a kind claims only what
 * answers its own request, or a type of its own. */
static int
kinds_msg(int sbx, struct ipc_msg *m)
{
	const struct step_kind *const *k;
	int (*fn)(struct ipc_msg *);

	for (k = step_kinds; *k != NULL; k++)
		if ((fn = sbx ? (*k)->sbx_msg : (*k)->sup_msg) != NULL && fn(m))
			return 1;
	return 0;
}

static int
kinds_reply(uint64_t id, const struct ipc_runner_reply *rr)
{
	const struct step_kind *const *k;

	for (k = step_kinds; *k != NULL; k++)
		if ((*k)->reply != NULL && (*k)->reply(id, rr))
			return 1;
	return 0;
}

static void
kinds_cancel(void)
{
	const struct step_kind *const *k;

	for (k = step_kinds; *k != NULL; k++)
		if ((*k)->cancel != NULL)
			(*k)->cancel();
}

/* The sandbox: ready, then what the kinds asked, and the artifacts. */
static void
sbx_msg(struct ipc_chan *ch, struct ipc_msg *m, void *arg)
{
	struct ipc_sbx_output o;
	struct ipc_sbx_exit x;

	if (rn.exiting || kinds_msg(1, m))
		return;
	switch (m->type) {
	case IMSG_SBX_READY:
		if (rn.sbx_ready++)
			fatalx("the sandbox said ready twice");
		runner_op_send(runner_op("runner_load", 0), loaded, NULL);
		return;
	case IMSG_SBX_OUTPUT:
		if (ipc_dec_sbx_output(m->body, &o) == 0 && o.stream == 0 &&
		    runner_art_reading(m->id))
			runner_art_output(o.data, o.len);
		return;
	case IMSG_SBX_EXIT:
		if (ipc_dec_sbx_exit(m->body, &x) == -1)
			fatalx("the sandbox sent a bad exit");
		fatalx("the sandbox sent an exit for no command");
	case IMSG_SBX_RESULT:
		if (!runner_art_reading(m->id))
			fatalx("the sandbox sent a result for nothing asked");
		runner_art_result(m);
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
		if (!runner_art_put_reply(m->id, &rr) && !kinds_reply(m->id, &rr))
			fatalx("a reply from the supervisor to nothing asked");
		return;
	case IMSG_RUNNER_CANCEL:
		if (rn.cancel)
			return;
		rn.cancel = 1;
		log_info("run %s: cancel requested", rn.run);
		kinds_cancel();
		/* what runs is stopped; otherwise the next step boundary (or the
		 * current operation's reply) ends the run */
		return;
	default:
		/* RUNNER_PROXY: the agent's model channel */
		if (!kinds_msg(0, m))
			fatalx("unexpected %s from the supervisor", ipc_msg_name(m->type));
	}
}

void
runner_main(void)
{
	child_bootstrap(&rn.c, ROLE_RUNNER);
	if ((rn.c.base = event_base_new()) == NULL)
		fatalx("event_base_new");
	runner_output_init();
	child_lockdown(&rn.c);
	child_run(&rn.c, runner_dispatch);
	/* SHUTDOWN: the daemon drains; the step in progress is taken up
	 * again by the next runner once the lease lapses. */
	log_debug("run %s: runner stopping for shutdown", rn.run);
	exit(0);
}
