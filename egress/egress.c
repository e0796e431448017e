/*
 * The egress process: start-up (name resolution loaded before the chroot),
 * the runs the supervisor hands over, and their events (egress.h).
 */
#include <sys/socket.h>

#include <errno.h>
#include <signal.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "egress/egress.h"

struct egress eg;

static struct erun *
erun_find(const char *run)
{
	struct erun *r;

	TAILQ_FOREACH(r, &eg.runs, entry)
		if (strcmp(r->run, run) == 0)
			return r;
	return NULL;
}

static void
erun_free(struct erun *r)
{
	conn_close_all(r);
	if (r->lis != NULL)
		evconnlistener_free(r->lis);
	TAILQ_REMOVE(&eg.runs, r, entry);
	free(r->rules);
	free(r);
}

/*
 * The rules of an EGRESS_RUN or EGRESS_POLICY into a new array (*out, the
 * caller frees).  The supervisor wrote them with egress_rule_format: one
 * that does not parse back is a broken protocol.
 */
static void
egress_rules(const struct ipc_egress_run *m, struct egress_rule **out, size_t *n)
{
	struct ipc_cur l = m->rules;
	const char *s;
	size_t len;

	*n = 0;
	if ((*out = calloc(l.n ? l.n : 1, sizeof(**out))) == NULL)
		fatal("calloc");
	while (l.i < l.n) {
		if (ipc_get_str(&l, &s, &len, IPC_EGRESS_TEXT_MAX) == -1 ||
		    egress_rule_parse(s, len, &(*out)[*n]) != NULL)
			fatalx("run %s: a rule that does not parse", m->run);
		(*n)++;
	}
}

static void
egress_conf(struct ipc_msg *m)
{
	struct ipc_egress_conf c;
	const char *s, *why;
	size_t len;

	if (ipc_dec_egress_conf(m->body, &c) == -1)
		fatalx("a bad configuration"); /* cannot happen: validated */
	eg.ncidrs = 0;
	while (c.cidrs.i < c.cidrs.n) {
		if (ipc_get_str(&c.cidrs, &s, &len, IPC_EGRESS_TEXT_MAX) == -1 ||
		    (why = egress_cidr_parse(s, len, &eg.cidrs[eg.ncidrs])) != NULL)
			fatalx("allow_cidrs: an entry that does not parse");
		eg.ncidrs++;
	}
	eg.tunnels = c.tunnels;
	eg.connect_timeout = c.connect_timeout;
	eg.idle_timeout = c.idle_timeout;
	eg.bytes = c.bytes;
	eg.configured = 1;
	log_debug("configured: %zu allowed networks, %u tunnels per run", eg.ncidrs, eg.tunnels);
}

static void
egress_accept_cb(struct evconnlistener *lis, evutil_socket_t fd, struct sockaddr *sa, int salen,
    void *arg)
{
	conn_accept(arg, fd);
}

static void
egress_accept_err(struct evconnlistener *lis, void *arg)
{
	struct erun *r = arg;
	int e = EVUTIL_SOCKET_ERROR();

	/* EMFILE and the like: wait for descriptors to come back rather than
	 * spin; the listener is retried by the next accept. */
	log_warnx("run %s: accept: %s", r->run, strerror(e));
}

static void
egress_run(struct ipc_msg *m)
{
	struct ipc_egress_run d;
	struct erun *r;

	if (!eg.configured || ipc_dec_egress_run(m->body, &d) == -1)
		fatalx("a run before the configuration");
	if ((r = erun_find(d.run)) != NULL)
		erun_free(r); /* its sandbox was rebuilt: the old listener is gone */
	if ((r = calloc(1, sizeof(*r))) == NULL)
		fatal("calloc");
	memcpy(r->run, d.run, sizeof(r->run));
	TAILQ_INIT(&r->conns);
	egress_rules(&d, &r->rules, &r->nrules);
	if (evutil_make_socket_nonblocking(m->fd) == -1)
		fatal("run %s: listener", r->run);
	r->lis = evconnlistener_new(eg.c.base, egress_accept_cb, r,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, m->fd);
	if (r->lis == NULL)
		fatalx("run %s: cannot serve its listener", r->run);
	m->fd = -1;
	evconnlistener_set_error_cb(r->lis, egress_accept_err);
	TAILQ_INSERT_TAIL(&eg.runs, r, entry);
	log_debug("run %s: serving, %zu rules", r->run, r->nrules);
}

static void
egress_policy(struct ipc_msg *m)
{
	struct ipc_egress_run d;
	struct erun *r;

	if (ipc_dec_egress_run(m->body, &d) == -1)
		fatalx("a bad policy");
	if ((r = erun_find(d.run)) == NULL)
		return; /* ended meanwhile */
	free(r->rules);
	egress_rules(&d, &r->rules, &r->nrules);
	/* a new step: its totals start now */
	r->st_allowed = r->st_denied = r->st_up = r->st_down = 0;
	log_debug("run %s: %zu rules now", r->run, r->nrules);
}

/* The run's step ended: its totals, answered with the request's id (zeros
 * for a run that is not served, whose listener went meanwhile). */
static void
egress_step(struct ipc_msg *m)
{
	char run[IPC_UUID_LEN + 1];
	struct ipc_wbuf w;
	struct erun *r;

	if (ipc_dec_egress_step(m->body, run) == -1)
		fatalx("a bad step");
	r = erun_find(run);
	ipc_wbuf_begin(&w, IMSG_EGRESS_TOTALS, m->id, 5);
	ipc_put_str(&w, run);
	ipc_put_u64(&w, r != NULL ? r->st_allowed : 0);
	ipc_put_u64(&w, r != NULL ? r->st_denied : 0);
	ipc_put_u64(&w, r != NULL ? r->st_up : 0);
	ipc_put_u64(&w, r != NULL ? r->st_down : 0);
	if (ipc_wbuf_finish(&w, eg.c.max_frame) == -1 || ipc_chan_send(eg.c.sup, &w, -1) == -1)
		fatalx("cannot answer the supervisor");
	ipc_wbuf_free(&w);
}

static void
egress_end(struct ipc_msg *m)
{
	char run[IPC_UUID_LEN + 1];
	struct erun *r;

	if (ipc_dec_egress_end(m->body, run) == -1)
		fatalx("a bad end");
	if ((r = erun_find(run)) != NULL) {
		log_debug("run %s: ended, closing %u tunnels", run, r->tunnels);
		erun_free(r);
	}
}

static void
egress_dispatch_supervisor(struct child *c, struct ipc_msg *m)
{
	switch (m->type) {
	case IMSG_EGRESS_CONF:
		egress_conf(m);
		return;
	case IMSG_EGRESS_RUN:
		egress_run(m);
		return;
	case IMSG_EGRESS_POLICY:
		egress_policy(m);
		return;
	case IMSG_EGRESS_END:
		egress_end(m);
		return;
	case IMSG_EGRESS_STEP:
		egress_step(m);
		return;
	default:
		fatalx("unexpected %s from the supervisor", ipc_msg_name(m->type));
	}
}

/* Whether one more decision of r (a refusal when denied) may be reported
 * now: EGRESS_EVENTS_PER_S per second, the rest counted. */
static int
egress_event_room(struct erun *r, int denied)
{
	time_t now = time(NULL);

	if (now != r->ev_sec) {
		r->ev_sec = now;
		r->ev_count = 0;
	}
	if (r->ev_count >= EGRESS_EVENTS_PER_S) {
		r->suppressed++;
		r->suppressed_denied += denied != 0;
		return 0;
	}
	r->ev_count++;
	return 1;
}

int
egress_event(struct erun *r, uint32_t kind, const char *host, unsigned port,
    const char *address, const char *reason, uint64_t up, uint64_t down, uint64_t ms)
{
	int decision = kind == IPC_EGRESS_EV_ALLOWED || kind == IPC_EGRESS_EV_DENIED;
	struct ipc_wbuf w;

	if (kind == IPC_EGRESS_EV_DENIED)
		r->st_denied++; /* reported or not */
	if (decision && !egress_event_room(r, kind == IPC_EGRESS_EV_DENIED))
		return 0;
	ipc_wbuf_begin(&w, IMSG_EGRESS_EVENT, 0, 11);
	ipc_put_str(&w, r->run);
	ipc_put_u64(&w, kind);
	ipc_put_str(&w, host);
	ipc_put_u64(&w, port);
	ipc_put_str(&w, address);
	ipc_put_str(&w, reason);
	ipc_put_u64(&w, up);
	ipc_put_u64(&w, down);
	ipc_put_u64(&w, ms);
	/* the count left out goes with the next decision reported, which is an
	 * event of the run's (a close or an UP/DOWN count would lose it) */
	ipc_put_u64(&w, decision ? r->suppressed : 0);
	ipc_put_u64(&w, decision ? r->suppressed_denied : 0);
	if (ipc_wbuf_finish(&w, eg.c.max_frame) == -1 || ipc_chan_send(eg.c.sup, &w, -1) == -1)
		fatalx("cannot report to the supervisor");
	ipc_wbuf_free(&w);
	if (decision)
		r->suppressed = r->suppressed_denied = 0;
	return 1;
}

/*
 * Name resolution, before the chroot: evdns reads resolv.conf and the
 * hosts file now (DNS_OPTIONS_ALL includes the hosts file) and opens its
 * sockets to the name servers; the random ids of its queries come from a
 * generator seeded here too.  Nothing is read by name afterwards.
 */
static void
egress_dns(void)
{
	int rc;

	if (evutil_secure_rng_init() == -1)
		fatalx("evutil_secure_rng_init");
	if ((eg.dns = evdns_base_new(eg.c.base, 0)) == NULL)
		fatalx("evdns_base_new");
	rc = evdns_base_resolv_conf_parse(eg.dns, DNS_OPTIONS_ALL, "/etc/resolv.conf");
	if (rc != 0)
		log_warnx("/etc/resolv.conf: not read (evdns error %d); names resolve only "
		          "through the hosts file and localhost's name server",
		    rc);
	if (evdns_base_load_hosts(eg.dns, NULL) != 0)
		log_debug("/etc/hosts: not read");
}

void
egress_main(void)
{
	child_bootstrap(&eg.c, ROLE_EGRESS);
	/* a write to a tunnel whose other end went (splice(2) has no
	 * MSG_NOSIGNAL) fails with EPIPE, never kills the process */
	signal(SIGPIPE, SIG_IGN);
	if ((eg.c.base = event_base_new()) == NULL)
		fatalx("event_base_new");
	TAILQ_INIT(&eg.runs);
	egress_dns();
	child_lockdown(&eg.c);
	child_run(&eg.c, egress_dispatch_supervisor);
	while (!TAILQ_EMPTY(&eg.runs))
		erun_free(TAILQ_FIRST(&eg.runs));
	evdns_base_free(eg.dns, 0);
	log_debug("exiting");
	exit(0);
}
