/*
 * The asynchronous libpq pool.  A few connections, each a small state machine
 * driven by libevent (connect -> prepare every named op -> idle <-> busy), so
 * that one slow query never blocks the supervisor's other work.  A broken
 * connection fails its request with DB_ERR_UNAVAILABLE and reconnects with
 * backoff.
 */
#include <sys/queue.h>

#include <event2/event.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "supervisor/db.h"

#define DB_POOL_MAX 64
#define DB_QUEUE_MAX 10000
#define DB_BACKOFF_MIN_MS 250
#define DB_BACKOFF_MAX_MS 10000

struct db_req {
	TAILQ_ENTRY(db_req) entry;
	uint64_t id;
	const struct sql_op *op;
	struct db_params p;
	db_done_cb cb;
	void *arg;
	uint64_t t0_us; /* submitted at (monotonic) */
};
TAILQ_HEAD(db_reqq, db_req);

enum conn_state { C_DOWN, C_CONNECTING, C_PREPARING, C_IDLE, C_BUSY };

struct db_conn {
	PGconn *pg;
	enum conn_state st;
	struct event *ev;    /* on the connection's socket */
	struct event *retry; /* reconnect timer */
	unsigned backoff_ms;
	size_t prep_next;    /* next op to prepare */
	PGresult *last;      /* last result of the current command */
	struct db_req *cur;
};

static struct {
	struct event_base *base;
	char *conninfo;
	unsigned size;
	struct db_conn conns[DB_POOL_MAX];
	struct db_reqq queue;
	size_t queued;
	uint64_t next_id;
	int shutting_down;
	struct db_pool_stats st; /* size, ready, busy, queued filled when asked */
} pool;

static uint64_t
db_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* Count a finished request: its result and its time since submission. */
static void
db_count(const struct db_req *r, int code)
{
	static const uint64_t bounds[IPC_METRIC_DB_NBOUNDS] = IPC_METRIC_DB_BOUNDS_US;
	uint64_t us = db_now_us() - r->t0_us;
	size_t i;

	if (code == DB_OK)
		pool.st.ok++;
	else if (code == DB_ERR_UNAVAILABLE)
		pool.st.unavailable++;
	else
		pool.st.error++;
	pool.st.latency_sum_us += us;
	for (i = 0; i < IPC_METRIC_DB_NBOUNDS && us > bounds[i]; i++)
		;
	pool.st.latency[i]++;
}

static void conn_start(struct db_conn *c);
static void conn_dispatch(void);
static void conn_io(evutil_socket_t fd, short what, void *arg);

static void
req_finish(struct db_req *r, int code, const char *err, PGresult *res)
{
	db_count(r, code);
	if (r->cb != NULL)
		r->cb(r->id, code, err, res, r->arg);
	db_params_free(&r->p);
	free(r);
}

/* Wait for the socket to become readable (or writable too). */
static void
conn_watch(struct db_conn *c, short what)
{
	int fd = PQsocket(c->pg);

	if (c->ev != NULL)
		event_free(c->ev);
	c->ev = event_new(pool.base, fd, what, conn_io, c);
	if (c->ev == NULL || event_add(c->ev, NULL) == -1)
		fatalx("db: cannot watch connection socket");
}

static void
conn_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	conn_start(arg);
}

static void
conn_fail(struct db_conn *c, const char *why)
{
	struct timeval tv;

	if (pool.shutting_down)
		log_debug("db: connection closed");
	else if (c->st == C_IDLE || c->st == C_BUSY || c->st == C_PREPARING)
		log_warnx("db: connection lost: %s", why);
	else
		log_debug("db: connect failed: %s", why);
	if (c->ev != NULL) {
		event_free(c->ev);
		c->ev = NULL;
	}
	if (c->last != NULL) {
		PQclear(c->last);
		c->last = NULL;
	}
	if (c->cur != NULL) {
		struct db_req *r = c->cur;

		c->cur = NULL; /* before the callback, as in conn_command_done */
		req_finish(r, DB_ERR_UNAVAILABLE, "database connection lost", NULL);
	}
	if (c->pg != NULL)
		PQfinish(c->pg);
	c->pg = NULL;
	c->st = C_DOWN;
	if (pool.shutting_down)
		return;
	c->backoff_ms = c->backoff_ms ? c->backoff_ms * 2 : DB_BACKOFF_MIN_MS;
	if (c->backoff_ms > DB_BACKOFF_MAX_MS)
		c->backoff_ms = DB_BACKOFF_MAX_MS;
	tv.tv_sec = c->backoff_ms / 1000;
	tv.tv_usec = (c->backoff_ms % 1000) * 1000;
	evtimer_add(c->retry, &tv);
	/* With nothing usable or coming up, queued requests fail now rather than wait. */
	if (strcmp(db_pool_state(), "down") == 0) {
		struct db_req *r;

		while ((r = TAILQ_FIRST(&pool.queue)) != NULL) {
			TAILQ_REMOVE(&pool.queue, r, entry);
			pool.queued--;
			req_finish(r, DB_ERR_UNAVAILABLE, "database unavailable", NULL);
		}
	}
}

static void
conn_start(struct db_conn *c)
{
	c->pg = PQconnectStart(pool.conninfo);
	if (c->pg == NULL) {
		conn_fail(c, "out of memory");
		return;
	}
	if (PQstatus(c->pg) == CONNECTION_BAD) {
		conn_fail(c, PQerrorMessage(c->pg));
		return;
	}
	c->st = C_CONNECTING;
	conn_watch(c, EV_WRITE);
}

static void
conn_prepare_next(struct db_conn *c)
{
	const struct sql_op *op;
	unsigned oids[IPC_DB_MAXARGS];
	char name[IPC_OPNAME_MAX + 4];
	int i;

	if (c->prep_next == sql_nops) {
		c->st = C_IDLE;
		c->backoff_ms = 0;
		conn_watch(c, EV_READ | EV_PERSIST);
		log_debug("db: connection ready");
		conn_dispatch();
		return;
	}
	op = &sql_ops[c->prep_next++];
	for (i = 0; i < op->nargs; i++)
		oids[i] = db_type_oid(op->args[i].type);
	snprintf(name, sizeof(name), "op_%s", op->name);
	if (!PQsendPrepare(c->pg, name, op->sql, op->nargs, oids)) {
		conn_fail(c, PQerrorMessage(c->pg));
		return;
	}
	conn_watch(c, EV_READ | EV_PERSIST);
}

static void
conn_connect_step(struct db_conn *c, short what)
{
	switch (PQconnectPoll(c->pg)) {
	case PGRES_POLLING_READING:
		conn_watch(c, EV_READ);
		return;
	case PGRES_POLLING_WRITING:
		conn_watch(c, EV_WRITE);
		return;
	case PGRES_POLLING_OK:
		if (PQsetnonblocking(c->pg, 1) == -1) {
			conn_fail(c, PQerrorMessage(c->pg));
			return;
		}
		c->st = C_PREPARING;
		c->prep_next = 0;
		conn_prepare_next(c);
		return;
	default:
		conn_fail(c, PQerrorMessage(c->pg));
		return;
	}
}

/* Collect every result of the command in flight; returns 1 when complete. */
static int
conn_collect(struct db_conn *c)
{
	PGresult *res;

	if (!PQconsumeInput(c->pg))
		return -1;
	while (!PQisBusy(c->pg)) {
		res = PQgetResult(c->pg);
		if (res == NULL)
			return 1;
		if (c->last != NULL)
			PQclear(c->last);
		c->last = res;
	}
	return 0;
}

static void
conn_command_done(struct db_conn *c)
{
	PGresult *res = c->last;
	ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
	char err[IPC_ERRMSG_MAX];
	const char *state, *msg;
	struct db_req *r;

	c->last = NULL;
	if (c->st == C_PREPARING) {
		if (st != PGRES_COMMAND_OK) {
			log_warnx("db: prepare of op %s failed: %s", sql_ops[c->prep_next - 1].name,
			    res ? PQresultErrorMessage(res) : "no result");
			PQclear(res);
			fatalx("db: a named operation does not prepare; the SQL is broken");
		}
		PQclear(res);
		conn_prepare_next(c);
		return;
	}
	/* The request leaves the connection before its callback runs: a
	 * callback that submits another operation may be given this very
	 * connection, now idle, and that request must not be forgotten. */
	r = c->cur;
	c->cur = NULL;
	c->st = C_IDLE;
	if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) {
		req_finish(r, DB_OK, "", res);
	} else {
		state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
		msg = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
		snprintf(err, sizeof(err), "%s: %s", state ? state : "XX000",
		    msg ? msg : "query failed");
		req_finish(r, state != NULL && strcmp(state, "AGK01") == 0 ? DB_ERR_KEY_ROTATED
		                                                          : DB_ERR_QUERY,
		           err, res);
	}
	PQclear(res);
	conn_dispatch();
}

static void
conn_io(evutil_socket_t fd, short what, void *arg)
{
	struct db_conn *c = arg;
	int r;

	if (c->st == C_CONNECTING) {
		conn_connect_step(c, what);
		return;
	}
	if (what & EV_WRITE) {
		r = PQflush(c->pg);
		if (r == -1) {
			conn_fail(c, PQerrorMessage(c->pg));
			return;
		}
		if (r == 0)
			conn_watch(c, EV_READ | EV_PERSIST);
		if (!(what & EV_READ))
			return;
	}
	if (c->st == C_IDLE) {
		/* Nothing in flight: only EOF or notices arrive here. */
		if (!PQconsumeInput(c->pg) || PQstatus(c->pg) == CONNECTION_BAD)
			conn_fail(c, PQerrorMessage(c->pg));
		return;
	}
	r = conn_collect(c);
	if (r == -1)
		conn_fail(c, PQerrorMessage(c->pg));
	else if (r == 1)
		conn_command_done(c);
}

static void
conn_run(struct db_conn *c, struct db_req *r)
{
	char name[IPC_OPNAME_MAX + 4];
	int fl;

	snprintf(name, sizeof(name), "op_%s", r->op->name);
	c->cur = r;
	c->st = C_BUSY;
	if (!PQsendQueryPrepared(c->pg, name, r->p.n, (const char *const *)r->p.values,
		r->p.lengths, r->p.formats, 0)) {
		conn_fail(c, PQerrorMessage(c->pg));
		return;
	}
	fl = PQflush(c->pg);
	if (fl == -1)
		conn_fail(c, PQerrorMessage(c->pg));
	else if (fl == 1)
		conn_watch(c, EV_READ | EV_WRITE | EV_PERSIST);
}

static void
conn_dispatch(void)
{
	unsigned i;
	struct db_req *r;

	for (i = 0; i < pool.size && !TAILQ_EMPTY(&pool.queue); i++) {
		if (pool.conns[i].st != C_IDLE)
			continue;
		r = TAILQ_FIRST(&pool.queue);
		TAILQ_REMOVE(&pool.queue, r, entry);
		pool.queued--;
		conn_run(&pool.conns[i], r);
	}
}

int
db_pool_init(struct event_base *base, const char *conninfo, unsigned size)
{
	unsigned i;

	if (size == 0 || size > DB_POOL_MAX)
		return -1;
	pool.base = base;
	pool.size = size;
	pool.conninfo = strdup(conninfo);
	if (pool.conninfo == NULL)
		fatal("strdup");
	TAILQ_INIT(&pool.queue);
	for (i = 0; i < size; i++) {
		pool.conns[i].retry = evtimer_new(base, conn_retry_cb, &pool.conns[i]);
		if (pool.conns[i].retry == NULL)
			fatalx("db: evtimer_new");
		conn_start(&pool.conns[i]);
	}
	return 0;
}

void
db_pool_shutdown(void)
{
	struct db_req *r;
	unsigned i;

	pool.shutting_down = 1;
	while ((r = TAILQ_FIRST(&pool.queue)) != NULL) {
		TAILQ_REMOVE(&pool.queue, r, entry);
		req_finish(r, DB_ERR_UNAVAILABLE, "shutting down", NULL);
	}
	pool.queued = 0;
	for (i = 0; i < pool.size; i++) {
		struct db_conn *c = &pool.conns[i];

		if (c->retry != NULL)
			event_free(c->retry);
		c->retry = NULL;
		if (c->pg != NULL || c->cur != NULL)
			conn_fail(c, "shutdown");
	}
	if (pool.conninfo != NULL) {
		explicit_bzero(pool.conninfo, strlen(pool.conninfo));
		free(pool.conninfo);
		pool.conninfo = NULL;
	}
}

unsigned
db_pool_ready(void)
{
	unsigned i, n = 0;

	for (i = 0; i < pool.size; i++)
		if (pool.conns[i].st == C_IDLE || pool.conns[i].st == C_BUSY)
			n++;
	return n;
}

void
db_pool_stats(struct db_pool_stats *s)
{
	unsigned i;

	*s = pool.st;
	s->size = pool.size;
	s->ready = db_pool_ready();
	s->busy = 0;
	for (i = 0; i < pool.size; i++)
		s->busy += pool.conns[i].st == C_BUSY;
	s->queued = pool.queued;
}

const char *
db_pool_state(void)
{
	unsigned i;

	if (db_pool_ready() > 0)
		return "up";
	for (i = 0; i < pool.size; i++)
		if (pool.conns[i].st == C_CONNECTING || pool.conns[i].st == C_PREPARING)
			return "connecting";
	return "down";
}

uint64_t
db_pool_submit(const struct sql_op *op, struct db_params *p, db_done_cb cb, void *arg)
{
	struct db_req *r;

	if (strcmp(db_pool_state(), "down") == 0 || pool.queued >= DB_QUEUE_MAX)
		return 0;
	if ((r = calloc(1, sizeof(*r))) == NULL)
		fatal("calloc");
	r->id = ++pool.next_id;
	r->op = op;
	r->p = *p; /* takes ownership of the parameter buffers */
	memset(p, 0, sizeof(*p));
	r->cb = cb;
	r->arg = arg;
	r->t0_us = db_now_us();
	TAILQ_INSERT_TAIL(&pool.queue, r, entry);
	pool.queued++;
	conn_dispatch();
	return r->id;
}

void
db_pool_cancel_owner(void *arg)
{
	struct db_req *r;
	unsigned i;

	TAILQ_FOREACH(r, &pool.queue, entry)
		if (r->arg == arg)
			r->cb = NULL;
	for (i = 0; i < pool.size; i++)
		if (pool.conns[i].cur != NULL && pool.conns[i].cur->arg == arg)
			pool.conns[i].cur->cb = NULL;
}
