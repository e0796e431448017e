/*
 * The supervisor's LISTEN connection: one libpq connection, apart from the
 * pool, that LISTENs on the channels the database's functions NOTIFY
 * (run_events from append_run_event / finalize_run; auth_changed from the
 * triggers on tokens, users and memberships) and turns each notification
 * into an IPC message for httpd: IMSG_RUN_WAKE for the event streams,
 * IMSG_AUTH_FLUSH for its cache of token lookups; and run_queued (a submit,
 * a decided approval) and run_cancel into IMSG_ENGINE_WAKE for the engine
 * (supervisor/runs.c).  A notification is a wake-up only:
 * receivers replay from the database, so a lost or forged one costs a query,
 * never an event.  When the connection is (re-)established, notifications
 * sent in between are lost: httpd then gets a wake-up for all runs and a
 * flush.
 * Driven by libevent like the pool; reconnects with backoff.
 */
#include <event2/event.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "supervisor/supervisor.h"

#define NOTIFY_BACKOFF_MIN_MS 250
#define NOTIFY_BACKOFF_MAX_MS 10000

static const char notify_listen_sql[] =
    "LISTEN run_events; LISTEN auth_changed; LISTEN run_queued; LISTEN run_cancel";

static struct {
	struct event_base *base;
	char *conninfo;
	PGconn *pg;
	enum { N_DOWN, N_CONNECTING, N_LISTENING, N_UP } st;
	struct event *ev, *retry;
	unsigned backoff_ms;
	int stopping;
} nt;

static void notify_start(void);

/* httpd, when it is up to hear (NULL otherwise). */
static struct proc *
notify_httpd(void)
{
	struct proc *p = proc_by_role(ROLE_HTTPD);

	return p != NULL && p->chan != NULL && p->ready ? p : NULL;
}

/* IMSG_RUN_WAKE to httpd; run "" means every run. */
static void
notify_wake(const char *run, uint64_t seq)
{
	struct proc *p = notify_httpd();
	struct ipc_wbuf w;

	if (p == NULL)
		return;
	ipc_wbuf_begin(&w, IMSG_RUN_WAKE, 0, 2);
	ipc_put_str(&w, run);
	ipc_put_u64(&w, seq);
	proc_send(p, &w, -1);
}

/* IMSG_AUTH_FLUSH to httpd. */
static void
notify_auth_flush(void)
{
	struct proc *p = notify_httpd();
	struct ipc_wbuf w;

	if (p == NULL)
		return;
	ipc_wbuf_begin(&w, IMSG_AUTH_FLUSH, 0, 0);
	proc_send(p, &w, -1);
}

/* "RUN:SEQ" from run_events; anything else is dropped with a warning. */
static void
notify_run_event(const char *payload)
{
	const char *colon = strchr(payload, ':');
	char run[IPC_UUID_LEN + 1], *end;
	unsigned long long seq;

	if (colon == NULL || !ipc_is_uuid(payload, (size_t)(colon - payload)) ||
	    colon[1] < '1' || colon[1] > '9')
		goto bad;
	seq = strtoull(colon + 1, &end, 10);
	if (*end != '\0' || seq == 0 || seq > INT64_MAX)
		goto bad;
	memcpy(run, payload, IPC_UUID_LEN);
	run[IPC_UUID_LEN] = '\0';
	notify_wake(run, (uint64_t)seq);
	return;
bad:
	log_warnx("notify: malformed run_events payload dropped");
}

static void
notify_fail(const char *why)
{
	struct timeval tv;

	if (nt.stopping)
		log_debug("notify: LISTEN connection closed");
	else if (nt.st == N_UP)
		log_warnx("notify: LISTEN connection lost: %s", why);
	else
		log_debug("notify: connect failed: %s", why);
	if (nt.ev != NULL)
		event_free(nt.ev);
	nt.ev = NULL;
	if (nt.pg != NULL)
		PQfinish(nt.pg);
	nt.pg = NULL;
	nt.st = N_DOWN;
	if (nt.stopping)
		return;
	nt.backoff_ms = nt.backoff_ms ? nt.backoff_ms * 2 : NOTIFY_BACKOFF_MIN_MS;
	if (nt.backoff_ms > NOTIFY_BACKOFF_MAX_MS)
		nt.backoff_ms = NOTIFY_BACKOFF_MAX_MS;
	tv.tv_sec = nt.backoff_ms / 1000;
	tv.tv_usec = (nt.backoff_ms % 1000) * 1000;
	evtimer_add(nt.retry, &tv);
}

static void notify_io(evutil_socket_t fd, short what, void *arg);

static void
notify_watch(short what)
{
	if (nt.ev != NULL)
		event_free(nt.ev);
	nt.ev = event_new(nt.base, PQsocket(nt.pg), what, notify_io, NULL);
	if (nt.ev == NULL || event_add(nt.ev, NULL) == -1)
		fatalx("notify: cannot watch the connection");
}

/* Drain results and notifications; -1 when the connection broke. */
static int
notify_drain(void)
{
	PGnotify *n;
	PGresult *res;

	if (PQconsumeInput(nt.pg) == 0)
		return -1;
	while (!PQisBusy(nt.pg) && (res = PQgetResult(nt.pg)) != NULL) {
		if (PQresultStatus(res) != PGRES_COMMAND_OK) {
			log_warnx("notify: LISTEN failed: %s", PQresultErrorMessage(res));
			PQclear(res);
			return -1;
		}
		PQclear(res);
		if (nt.st == N_LISTENING) {
			nt.st = N_UP;
			nt.backoff_ms = 0;
			log_debug("notify: listening");
			/* whatever was notified before now is lost */
			notify_wake("", 0);
			notify_auth_flush();
			runs_wake(IPC_WAKE_CLAIM, "");
		}
	}
	while ((n = PQnotifies(nt.pg)) != NULL) {
		if (strcmp(n->relname, "run_events") == 0)
			notify_run_event(n->extra);
		else if (strcmp(n->relname, "auth_changed") == 0)
			notify_auth_flush();
		else if (strcmp(n->relname, "run_queued") == 0)
			runs_wake(IPC_WAKE_CLAIM, "");
		else if (strcmp(n->relname, "run_cancel") == 0 &&
		    ipc_is_uuid(n->extra, strlen(n->extra)))
			runs_wake(IPC_WAKE_CANCEL, n->extra);
		PQfreemem(n);
	}
	return 0;
}

static void
notify_io(evutil_socket_t fd, short what, void *arg)
{
	PostgresPollingStatusType ps;

	if (nt.st == N_CONNECTING) {
		ps = PQconnectPoll(nt.pg);
		if (ps == PGRES_POLLING_FAILED) {
			notify_fail(PQerrorMessage(nt.pg));
		} else if (ps == PGRES_POLLING_READING) {
			notify_watch(EV_READ);
		} else if (ps == PGRES_POLLING_WRITING) {
			notify_watch(EV_WRITE);
		} else if (ps == PGRES_POLLING_OK) {
			if (PQsetnonblocking(nt.pg, 1) == -1 ||
			    PQsendQuery(nt.pg, notify_listen_sql) == 0 || PQflush(nt.pg) == -1) {
				notify_fail(PQerrorMessage(nt.pg));
				return;
			}
			nt.st = N_LISTENING;
			notify_watch(EV_READ | EV_PERSIST);
		}
		return;
	}
	if (notify_drain() == -1)
		notify_fail(PQerrorMessage(nt.pg));
}

static void
notify_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	notify_start();
}

static void
notify_start(void)
{
	nt.pg = PQconnectStart(nt.conninfo);
	if (nt.pg == NULL) {
		notify_fail("out of memory");
		return;
	}
	if (PQstatus(nt.pg) == CONNECTION_BAD) {
		notify_fail(PQerrorMessage(nt.pg));
		return;
	}
	nt.st = N_CONNECTING;
	notify_watch(EV_WRITE);
}

void
notify_init(struct event_base *base, const char *conninfo)
{
	nt.base = base;
	if ((nt.conninfo = strdup(conninfo)) == NULL)
		fatal("strdup");
	if ((nt.retry = evtimer_new(base, notify_retry_cb, NULL)) == NULL)
		fatalx("notify: evtimer_new");
	notify_start();
}

void
notify_shutdown(void)
{
	nt.stopping = 1;
	if (nt.retry != NULL)
		evtimer_del(nt.retry);
	if (nt.pg != NULL)
		notify_fail("shutting down");
}
