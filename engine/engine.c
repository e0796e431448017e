/*
 * engine: the scheduler (DESIGN.md sections 1 and 3.4).  It holds nothing
 * secret and reaches the database only through named operations answered
 * by the supervisor.
 *
 *  - It claims runs (engine_claim: FOR UPDATE SKIP LOCKED under a lease
 *    whose owner is this engine's instance id) while fewer than
 *    engine.concurrency of its runs are live, and asks the supervisor to
 *    start each one (RUN_START).  A claim is tried when the supervisor
 *    forwards a NOTIFY run_queued (a submit, a decided approval), when a
 *    run of ours ends, and every sweep period (leases that lapsed wake
 *    nobody).
 *  - It renews the leases of its live runs every third of the lease; a
 *    lease it could not renew (another engine took the run) stops the run's
 *    runner at once.
 *  - A run whose runner died or stopped is handed back at once
 *    (engine_release), so the next claim takes it up and recovers the
 *    interrupted step.  Once claimed, a run belongs to this host (its
 *    STATE/host-id, in ENGINE_CONF): only engines of this host take it up
 *    again, where its workspace is.
 *  - A cancel (NOTIFY run_cancel) of a run of ours is forwarded to its
 *    runner; sweeps (expired approvals, cancelled runs nobody runs) run
 *    every engine.sweep seconds.
 *  - It records a heartbeat for its own instance every
 *    ENGINE_HEARTBEAT_SECS.
 */
#include <sys/queue.h>
#include <sys/utsname.h>

#include <event2/event.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "engine/engine.h"
#include "privsep/child.h"

struct erun {
	TAILQ_ENTRY(erun) entry;
	char run[IPC_UUID_LEN + 1];
	int renewing;
	int stopped; /* RUN_STOP sent for a lost lease */
};
static TAILQ_HEAD(, erun) eruns = TAILQ_HEAD_INITIALIZER(eruns);

static struct child engine;
static char engine_host[256];
static struct event *hb_ev; /* the heartbeat's timer */
static int heartbeat_failures;
static struct ipc_engine_conf conf;
static int have_conf;
static size_t nlive;
static int claiming, claim_again;
static struct event *renew_ev, *sweep_ev;

static void engine_claim(void);

static struct erun *
erun_find(const char *run)
{
	struct erun *e;

	TAILQ_FOREACH(e, &eruns, entry)
		if (strcmp(e->run, run) == 0)
			return e;
	return NULL;
}

static void
send_sup(struct ipc_wbuf *w)
{
	if (ipc_wbuf_finish(w, engine.max_frame) == -1 || ipc_chan_send(engine.sup, w, -1) == -1)
		fatalx("cannot send to the supervisor");
	ipc_wbuf_free(w);
}

static void
run_stop(struct erun *e, uint32_t reason)
{
	struct ipc_wbuf w;

	ipc_wbuf_begin(&w, IMSG_RUN_STOP, 0, 2);
	ipc_put_str(&w, e->run);
	ipc_put_u64(&w, reason);
	send_sup(&w);
}

/* ---- claiming ------------------------------------------------------------ */

static void
claim_done(struct child *c, const struct ipc_db_result *r, void *arg)
{
	struct ipc_wbuf w;
	struct erun *e;
	const char *run, *prev;
	size_t rlen, plen;

	claiming = 0;
	if (r == NULL)
		return;
	if (r->code != DB_OK) {
		log_warnx("claim: %.*s", (int)r->errlen, r->error);
		return; /* the next sweep period tries again */
	}
	if ((run = child_db_cell(r, 0, &rlen)) == NULL || rlen != IPC_UUID_LEN ||
	    (prev = child_db_cell(r, 1, &plen)) == NULL || plen > IPC_STATUS_MAX) {
		if (claim_again) {
			claim_again = 0;
			engine_claim();
		}
		return;
	}
	if ((e = calloc(1, sizeof(*e))) == NULL)
		fatal("calloc");
	memcpy(e->run, run, rlen);
	TAILQ_INSERT_TAIL(&eruns, e, entry);
	nlive++;
	log_info("claimed run %s (was %.*s)", e->run, (int)plen, prev);
	ipc_wbuf_begin(&w, IMSG_RUN_START, 0, 2);
	ipc_put_str(&w, e->run);
	ipc_put_strn(&w, prev, plen);
	send_sup(&w);
	engine_claim(); /* there may be more */
}

static void
engine_claim(void)
{
	struct ipc_wbuf w;
	uint64_t id;

	if (!have_conf || engine.stopping)
		return;
	if (claiming) {
		claim_again = 1;
		return;
	}
	if (nlive >= conf.concurrency)
		return;
	claiming = 1;
	claim_again = 0;
	id = child_db_begin(&engine, &w, "engine_claim", 3);
	ipc_put_str(&w, engine.hello.instance);
	ipc_put_u64(&w, conf.lease);
	ipc_put_str(&w, conf.host);
	if (child_db_send(&engine, &w, id, claim_done, NULL) == -1) {
		claiming = 0;
		log_warnx("claim: cannot send");
	}
}

/* ---- leases -------------------------------------------------------------- */

static void
renew_done(struct child *c, const struct ipc_db_result *r, void *arg)
{
	char *run = arg;
	struct erun *e = erun_find(run);
	size_t len;
	const char *v;

	free(run);
	if (e == NULL || r == NULL)
		return;
	e->renewing = 0;
	if (r->code != DB_OK) {
		log_warnx("renewing the lease of run %s: %.*s", e->run, (int)r->errlen, r->error);
		return; /* tried again at the next period, before the lease lapses */
	}
	v = child_db_cell(r, 0, &len);
	if (v != NULL && len == 1 && v[0] == 't')
		return;
	if (!e->stopped) {
		log_warnx("run %s: lease lost; stopping its runner", e->run);
		e->stopped = 1;
		run_stop(e, IPC_STOP_LEASE);
	}
}

static void
renew_all(evutil_socket_t fd, short what, void *arg)
{
	struct ipc_wbuf w;
	struct erun *e;
	uint64_t id;
	char *run;

	TAILQ_FOREACH(e, &eruns, entry) {
		if (e->renewing || e->stopped)
			continue;
		if ((run = strdup(e->run)) == NULL)
			fatal("strdup");
		id = child_db_begin(&engine, &w, "engine_renew", 3);
		ipc_put_str(&w, engine.hello.instance);
		ipc_put_str(&w, e->run);
		ipc_put_u64(&w, conf.lease);
		if (child_db_send(&engine, &w, id, renew_done, run) == -1) {
			free(run);
			log_warnx("renew: cannot send");
			continue;
		}
		e->renewing = 1;
	}
}

/* Not a claim at once: a run whose runner keeps dying (or cannot start)
 * is taken up again at the next sweep period, not in a tight loop. */
static void
release_done(struct child *c, const struct ipc_db_result *r, void *arg)
{
	if (r != NULL && r->code != DB_OK)
		log_warnx("releasing a lease: %.*s", (int)r->errlen, r->error);
}

static void
run_ended(struct ipc_msg *m)
{
	char run[IPC_UUID_LEN + 1];
	struct ipc_wbuf w;
	struct erun *e;
	uint32_t outcome;
	uint64_t id;

	if (ipc_dec_run_ended(m->body, run, &outcome) == -1 || (e = erun_find(run)) == NULL)
		return; /* a run of an earlier incarnation */
	TAILQ_REMOVE(&eruns, e, entry);
	nlive--;
	log_debug("run %s: runner ended (outcome %u)", run, outcome);
	if ((outcome == IPC_RUN_CRASHED || outcome == IPC_RUN_STOPPED) && !e->stopped &&
	    !engine.stopping) {
		/* hand it back now: the next claim recovers the step */
		id = child_db_begin(&engine, &w, "engine_release", 2);
		ipc_put_str(&w, engine.hello.instance);
		ipc_put_str(&w, run);
		if (child_db_send(&engine, &w, id, release_done, NULL) == -1)
			log_warnx("release: cannot send");
	} else
		engine_claim();
	free(e);
}

/* ---- sweeping ------------------------------------------------------------ */

static void
sweep_done(struct child *c, const struct ipc_db_result *r, void *arg)
{
	if (r != NULL && r->code != DB_OK)
		log_warnx("sweep: %.*s", (int)r->errlen, r->error);
}

static void
sweep(evutil_socket_t fd, short what, void *arg)
{
	struct ipc_wbuf w;
	uint64_t id;

	id = child_db_begin(&engine, &w, "engine_sweep", 1);
	ipc_put_u64(&w, conf.host_grace);
	if (child_db_send(&engine, &w, id, sweep_done, NULL) == -1)
		log_warnx("sweep: cannot send");
	engine_claim(); /* leases that lapsed notify nobody */
}

static void
set_conf(struct ipc_msg *m)
{
	struct timeval rtv = {0, 0}, stv = {0, 0};

	if (ipc_dec_engine_conf(m->body, &conf) == -1)
		fatalx("a bad engine configuration");
	have_conf = 1;
	rtv.tv_sec = conf.lease / 3 > 0 ? conf.lease / 3 : 1;
	stv.tv_sec = conf.sweep;
	if (event_add(renew_ev, &rtv) == -1 || event_add(sweep_ev, &stv) == -1)
		fatalx("engine timers");
	log_debug("concurrency %u, lease %u s, sweep every %u s, host grace %u s",
	    conf.concurrency, conf.lease, conf.sweep, conf.host_grace);
	/* a beat that names the host before the first sweep judges hosts */
	if (hb_ev != NULL)
		event_active(hb_ev, EV_TIMEOUT, 0);
	engine_claim();
}

/* ---- heartbeat ----------------------------------------------------------- */

static void
engine_heartbeat_done(struct child *c, const struct ipc_db_result *r, void *arg)
{
	if (r == NULL)
		return;
	if (r->code != DB_OK) {
		if (heartbeat_failures++ == 0)
			log_warnx("heartbeat failed: %.*s", (int)r->errlen, r->error);
		return;
	}
	if (heartbeat_failures > 0)
		log_info("heartbeat recovered after %d failures", heartbeat_failures);
	heartbeat_failures = 0;
}

static void
engine_heartbeat(evutil_socket_t fd, short what, void *arg)
{
	struct ipc_wbuf w;
	uint64_t id;

	id = child_db_begin(&engine, &w, "engine_heartbeat", 4);
	ipc_put_str(&w, engine.hello.instance);
	ipc_put_str(&w, engine_host);
	ipc_put_u64(&w, (uint64_t)getpid());
	if (have_conf)
		ipc_put_str(&w, conf.host); /* the host this engine claims for */
	else
		ipc_put_nil(&w);
	if (child_db_send(&engine, &w, id, engine_heartbeat_done, NULL) == -1)
		log_warnx("heartbeat: cannot send");
}

static void
engine_dispatch_supervisor(struct child *c, struct ipc_msg *m)
{
	char run[IPC_UUID_LEN + 1];
	struct erun *e;
	uint32_t kind;

	switch (m->type) {
	case IMSG_ENGINE_CONF:
		set_conf(m);
		return;
	case IMSG_ENGINE_WAKE:
		if (ipc_dec_engine_wake(m->body, &kind, run) == -1)
			return;
		if (kind == IPC_WAKE_CANCEL) {
			if ((e = erun_find(run)) != NULL && !e->stopped)
				run_stop(e, IPC_STOP_CANCEL);
			return;
		}
		engine_claim();
		return;
	case IMSG_RUN_ENDED:
		run_ended(m);
		return;
	default:
		fatalx("unexpected %s from the supervisor", ipc_msg_name(m->type));
	}
}

void
engine_main(void)
{
	struct utsname u;
	struct event *hb;
	struct timeval tv = { ENGINE_HEARTBEAT_SECS, 0 };

	child_bootstrap(&engine, ROLE_ENGINE);
	if (uname(&u) == 0)
		snprintf(engine_host, sizeof(engine_host), "%s", u.nodename);
	else
		snprintf(engine_host, sizeof(engine_host), "unknown");
	if ((engine.base = event_base_new()) == NULL)
		fatalx("event_base_new");
	child_lockdown(&engine);
	hb = hb_ev = event_new(engine.base, -1, EV_PERSIST, engine_heartbeat, NULL);
	renew_ev = event_new(engine.base, -1, EV_PERSIST, renew_all, NULL);
	sweep_ev = event_new(engine.base, -1, EV_PERSIST, sweep, NULL);
	if (hb == NULL || renew_ev == NULL || sweep_ev == NULL || event_add(hb, &tv) == -1)
		fatalx("engine timers");
	event_active(hb, EV_TIMEOUT, 0); /* first beat at once */
	child_run(&engine, engine_dispatch_supervisor);
	log_debug("exiting");
	exit(0);
}
