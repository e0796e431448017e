/*
 * The supervisor's side of egress (DESIGN.md section 4.1): which runs get
 * a way out, the list in force for each, the listeners their sandboxes
 * made, and the egress process's reports.
 *
 * A run's policies come from its pinned template (op sup_run_network) when
 * it is set up: the template's network and each step's own.  Presets are
 * resolved against the configuration in force then; a preset it lacks
 * fails the run, naming it.  With egress.enabled false, or no network
 * anywhere in the template, the run gets no listener: nothing changes.
 *
 * Per step: the list in force is the running step's (its own network, or
 * else the template's).  The supervisor learns that a step starts from
 * the runner's runner_step_begin operation, which it answers itself, and
 * sends the step's list before it forwards the operation, so the list is
 * in the egress process before the runner hears it may run the step.
 * Before the first step the list is empty: nothing is allowed.
 *
 * The supervisor keeps a copy of every listener, so that a new egress
 * process (after a crash) gets them all again with their lists.
 *
 * A step's end (runner_step_end) waits for egress's totals of the step
 * (EGRESS_STEP, answered by EGRESS_TOTALS on the channel its events came
 * on, so after all of them), which join step.finished as "network".  When
 * egress is not there or does not answer within EGSTEP_WAIT_MS, the
 * supervisor's own count of the step's events stands in.
 */
#include <sys/queue.h>

#include <event2/event.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "egress/addr.h"
#include "egress/policy.h"
#include "supervisor/db.h"
#include "supervisor/supervisor.h"

/* One network: of the template (step "") or of a step. */
struct egnet {
	char step[IPC_SBX_NAME_MAX + 1];
	char **rules; /* canonical entries, the presets' resolved */
	size_t nrules;
};

struct egrun {
	LIST_ENTRY(egrun) entry;
	char run[IPC_UUID_LEN + 1]; /* the run, or an MCP server's own id */
	/* an MCP server's (egress_mcp_add): its run, where its events go, and
	 * its name; "" for a run's own */
	char owner[IPC_UUID_LEN + 1];
	char server[IPC_MCP_NAME_MAX + 1];
	int fd;                /* the listener, -1 until the sandbox made it */
	struct egnet *nets;
	size_t nnets;
	const struct egnet *cur; /* the list in force; NULL: none */
	unsigned tunnels;      /* open now, as egress last reported */
	uint64_t allowed, denied;
	/* the running step's, from the events egress reported (the stand-in
	 * for its own count) */
	uint64_t st_allowed, st_denied, st_up, st_down;
};
static LIST_HEAD(, egrun) egruns = LIST_HEAD_INITIALIZER(egruns);

static struct egrun *
egrun_find(const char *run)
{
	struct egrun *e;

	LIST_FOREACH(e, &egruns, entry)
		if (strcmp(e->run, run) == 0)
			return e;
	return NULL;
}

static void
egrun_free(struct egrun *e)
{
	size_t i, j;

	LIST_REMOVE(e, entry);
	for (i = 0; i < e->nnets; i++) {
		for (j = 0; j < e->nets[i].nrules; j++)
			free(e->nets[i].rules[j]);
		free(e->nets[i].rules);
	}
	free(e->nets);
	if (e->fd >= 0)
		close(e->fd);
	free(e);
}

static struct egnet *
egrun_net(struct egrun *e, const char *step)
{
	size_t i;

	for (i = 0; i < e->nnets; i++)
		if (strcmp(e->nets[i].step, step) == 0)
			return &e->nets[i];
	if ((e->nets = reallocarray(e->nets, e->nnets + 1, sizeof(*e->nets))) == NULL)
		fatal("reallocarray");
	memset(&e->nets[e->nnets], 0, sizeof(e->nets[0]));
	snprintf(e->nets[e->nnets].step, sizeof(e->nets[0].step), "%s", step);
	return &e->nets[e->nnets++];
}

static void
egnet_add(struct egnet *n, const char *text)
{
	if ((n->rules = reallocarray(n->rules, n->nrules + 1, sizeof(*n->rules))) == NULL ||
	    (n->rules[n->nrules] = strdup(text)) == NULL)
		fatal("egress rules");
	n->nrules++;
}

/* A preset's entries into n; -1 when the configuration has no such preset. */
static int
egnet_preset(struct egnet *n, const char *name)
{
	const struct conf_egress *c = &sup.conf.egress;
	char buf[EGRESS_RULE_TEXT_MAX + 1];
	size_t i, j;

	for (i = 0; i < c->npresets; i++) {
		if (strcmp(c->presets[i].name, name) != 0)
			continue;
		for (j = 0; j < c->presets[i].nrules; j++) {
			egress_rule_format(&c->presets[i].rules[j], buf, sizeof(buf));
			egnet_add(n, buf);
		}
		return 0;
	}
	return -1;
}

/* A new entry for id (a run's, or an MCP server's), with no listener yet. */
static struct egrun *
egrun_new(const char *id)
{
	struct egrun *e;

	if ((e = calloc(1, sizeof(*e))) == NULL)
		fatal("calloc");
	snprintf(e->run, sizeof(e->run), "%s", id);
	e->fd = -1;
	LIST_INSERT_HEAD(&egruns, e, entry);
	return e;
}

int
egress_runs_load(const char *run, struct pg_result *res, int *want, char *err, size_t errsz)
{
	struct egrun *e;
	struct egnet *n;
	const char *step, *kind, *val;
	int i;

	*want = 0;
	if ((e = egrun_find(run)) != NULL)
		egrun_free(e);
	if (!sup.conf.egress.enabled || PQntuples(res) == 0 || PQnfields(res) != 3)
		return 0;
	e = egrun_new(run);
	for (i = 0; i < PQntuples(res); i++) {
		step = PQgetvalue(res, i, 0);
		kind = PQgetvalue(res, i, 1);
		val = PQgetvalue(res, i, 2);
		n = egrun_net(e, step);
		if (strcmp(kind, "allow") == 0)
			egnet_add(n, val);
		else if (strcmp(kind, "preset") == 0 && egnet_preset(n, val) == -1) {
			if (step[0] != '\0')
				snprintf(err, errsz, "step %s: network.presets: no preset %s in "
				                     "egress.presets", step, val);
			else
				snprintf(err, errsz, "network.presets: no preset %s in egress.presets",
				    val);
			egrun_free(e);
			return -1;
		}
	}
	*want = 1;
	return 0;
}

static void
egress_put_rules(struct ipc_wbuf *w, const struct egnet *n)
{
	size_t i, k = n != NULL ? n->nrules : 0;

	if (k > IPC_EGRESS_RULES_MAX)
		k = IPC_EGRESS_RULES_MAX; /* cannot happen: 64 + 16 presets of 64 */
	ipc_put_array(w, (uint32_t)k);
	for (i = 0; i < k; i++)
		ipc_put_str(w, n->rules[i]);
}

static void
egress_send_run(struct proc *p, struct egrun *e)
{
	struct ipc_wbuf w;

	ipc_wbuf_begin(&w, IMSG_EGRESS_RUN, 0, 2);
	ipc_put_str(&w, e->run);
	egress_put_rules(&w, e->cur);
	if (proc_send(p, &w, e->fd) == -1)
		log_warnx("run %s: cannot hand its listener to egress", e->run);
}

void
egress_runs_listener(const char *run, int fd)
{
	struct egrun *e = egrun_find(run);
	struct proc *p = proc_by_role(ROLE_EGRESS);

	if (e == NULL) {
		close(fd);
		return;
	}
	if (e->fd >= 0)
		close(e->fd);
	e->fd = fd;
	/* an MCP server's one list is in force from the start */
	e->cur = e->owner[0] != '\0' && e->nnets > 0 ? &e->nets[0] : NULL;
	if (p != NULL && p->ready)
		egress_send_run(p, e);
}

int
egress_mcp_add(const char *id, const char *run, const char *server,
               const struct egress_rule *allow, size_t nallow, const char *const *presets,
               size_t npresets, char *err, size_t errsz)
{
	char buf[EGRESS_RULE_TEXT_MAX + 1];
	struct egrun *e;
	struct egnet *n;
	size_t i;

	if (!sup.conf.egress.enabled || (nallow == 0 && npresets == 0))
		return 0;
	e = egrun_new(id);
	snprintf(e->owner, sizeof(e->owner), "%s", run);
	snprintf(e->server, sizeof(e->server), "%s", server);
	n = egrun_net(e, "");
	for (i = 0; i < nallow; i++) {
		egress_rule_format(&allow[i], buf, sizeof(buf));
		egnet_add(n, buf);
	}
	for (i = 0; i < npresets; i++)
		if (egnet_preset(n, presets[i]) == -1) {
			snprintf(err, errsz, "network.presets: no preset %s in egress.presets",
			         presets[i]);
			egrun_free(e);
			return -1;
		}
	return 1;
}

int
egress_runs_wanted(const char *run)
{
	return egrun_find(run) != NULL;
}

void
egress_runs_step(const char *run, const char *step)
{
	struct egrun *e = egrun_find(run);
	struct proc *p = proc_by_role(ROLE_EGRESS);
	struct ipc_wbuf w;
	size_t i;

	if (e == NULL)
		return;
	e->st_allowed = e->st_denied = e->st_up = e->st_down = 0;
	e->cur = NULL;
	for (i = 0; i < e->nnets; i++)
		if (strcmp(e->nets[i].step, step) == 0)
			e->cur = &e->nets[i];
	for (i = 0; e->cur == NULL && i < e->nnets; i++)
		if (e->nets[i].step[0] == '\0')
			e->cur = &e->nets[i];
	if (e->fd < 0 || p == NULL || !p->ready)
		return;
	ipc_wbuf_begin(&w, IMSG_EGRESS_POLICY, 0, 2);
	ipc_put_str(&w, e->run);
	egress_put_rules(&w, e->cur);
	if (proc_send(p, &w, -1) == -1)
		log_warnx("run %s: cannot send egress its list", e->run);
}

void
egress_runs_end(const char *run)
{
	struct egrun *e = egrun_find(run);
	struct proc *p = proc_by_role(ROLE_EGRESS);
	struct ipc_wbuf w;

	if (e == NULL)
		return;
	if (e->fd >= 0 && p != NULL && p->ready) {
		ipc_wbuf_begin(&w, IMSG_EGRESS_END, 0, 1);
		ipc_put_str(&w, e->run);
		proc_send(p, &w, -1);
	}
	egrun_free(e);
}

/* The configuration every run shares. */
static void
egress_send_conf(struct proc *p)
{
	const struct conf_egress *c = &sup.conf.egress;
	char buf[EGRESS_CIDR_TEXT_MAX + 8];
	struct ipc_wbuf w;
	size_t i;

	ipc_wbuf_begin(&w, IMSG_EGRESS_CONF, 0, 5);
	ipc_put_array(&w, (uint32_t)c->ncidrs);
	for (i = 0; i < c->ncidrs; i++) {
		egress_cidr_format(&c->cidrs[i], buf, sizeof(buf));
		ipc_put_str(&w, buf);
	}
	ipc_put_u64(&w, c->tunnels_per_run);
	ipc_put_u64(&w, c->connect_timeout);
	ipc_put_u64(&w, c->idle_timeout);
	ipc_put_u64(&w, c->bytes_per_run);
	if (proc_send(p, &w, -1) == -1)
		log_warnx("egress: cannot send its configuration");
}

void
egress_ready(struct proc *p)
{
	struct egrun *e;

	egress_send_conf(p);
	LIST_FOREACH(e, &egruns, entry) {
		e->tunnels = 0;
		if (e->fd >= 0)
			egress_send_run(p, e);
	}
}

void
egress_reconfigure(void)
{
	struct proc *p = proc_by_role(ROLE_EGRESS);

	if (p != NULL && p->ready)
		egress_send_conf(p);
}

/*
 * The events are stored one at a time, in the order egress reported them:
 * the pool runs what is queued on several connections at once, and a
 * run's network.closed could otherwise land before its network.allowed.
 * Pending ones wait here (at most EGEV_PENDING_MAX; more are dropped with a
 * warning, as when the database is unavailable).
 */
#define EGEV_PENDING_MAX 4096

struct egev {
	STAILQ_ENTRY(egev) entry;
	struct db_params params; /* run, type, payload; owned until submitted */
};
static STAILQ_HEAD(, egev) egevs = STAILQ_HEAD_INITIALIZER(egevs);
static size_t egev_pending;
static int egev_busy; /* one is with the pool */

static void egress_store_next(void);

static void
egress_event_done(uint64_t reqid, int code, const char *err, void *pgres, void *arg)
{
	if (code != DB_OK)
		log_warnx("egress: a network event not stored: %s", err);
	egev_busy = 0;
	egress_store_next();
}

/* Submits the oldest pending event unless one is with the pool already. */
static void
egress_store_next(void)
{
	const struct sql_op *op = db_op_lookup("sup_run_network_event");
	struct egev *q;

	if (op == NULL)
		fatalx("no op sup_run_network_event");
	while (!egev_busy && (q = STAILQ_FIRST(&egevs)) != NULL) {
		STAILQ_REMOVE_HEAD(&egevs, entry);
		egev_pending--;
		/* busy first: the pool may finish it (and call back) at once */
		egev_busy = 1;
		if (db_pool_submit(op, &q->params, egress_event_done, NULL) == 0) {
			egev_busy = 0;
			log_warnx("run %s: %s not stored: the database is unavailable",
			    q->params.values[0], q->params.values[1]);
			db_params_free(&q->params);
		}
		free(q);
	}
}

/* The run's event: written by the supervisor for the run, while it runs
 * (op sup_run_network_event); the payload's fields per kind are those of
 * docs/events.md. */
static void
egress_store(const char *type, const struct ipc_egress_event *ev, const struct egrun *e)
{
	const char *run = e->owner[0] != '\0' ? e->owner : ev->run;

	struct egev *q;
	json_t *o;
	char *s;

	if (egev_pending >= EGEV_PENDING_MAX) {
		log_warnx("run %s: %s not stored: %d events wait for the database", run,
		    type, EGEV_PENDING_MAX);
		return;
	}
	o = json_pack("{s:s, s:i}", "host", ev->host, "port", (json_int_t)ev->port);
	if (o == NULL)
		fatalx("json_pack");
	if (ev->kind == IPC_EGRESS_EV_DENIED)
		json_object_set_new(o, "reason", json_string(ev->reason));
	else
		json_object_set_new(o, "address", json_string(ev->address));
	if (ev->kind == IPC_EGRESS_EV_CLOSED) {
		json_object_set_new(o, "bytes_up", json_integer((json_int_t)ev->up));
		json_object_set_new(o, "bytes_down", json_integer((json_int_t)ev->down));
		json_object_set_new(o, "duration_ms", json_integer((json_int_t)ev->ms));
	}
	if (ev->suppressed > 0)
		json_object_set_new(o, "suppressed", json_integer((json_int_t)ev->suppressed));
	if (e->server[0] != '\0')
		json_object_set_new(o, "mcp_server", json_string(e->server));
	if ((s = json_dumps(o, JSON_COMPACT)) == NULL)
		fatalx("json_dumps");
	json_decref(o);
	if ((q = calloc(1, sizeof(*q))) == NULL ||
	    (q->params.values[0] = strdup(run)) == NULL ||
	    (q->params.values[1] = strdup(type)) == NULL)
		fatal("egress_store");
	q->params.values[2] = s;
	q->params.n = 3;
	STAILQ_INSERT_TAIL(&egevs, q, entry);
	egev_pending++;
	egress_store_next();
}

void
egress_event_in(struct proc *p, struct ipc_msg *m)
{
	static const char *const names[IPC_EGRESS_EV__COUNT] = { "network.allowed",
		"network.denied", "network.closed", "", "" };
	struct ipc_egress_event ev;
	struct egrun *e;

	if (ipc_dec_egress_event(m->body, &ev) == -1)
		return; /* the catalog checked it */
	/* egress reports only runs it was given; one it was not is a lie */
	if ((e = egrun_find(ev.run)) == NULL || e->fd < 0) {
		log_debug("egress: an event of run %s, which it does not serve", ev.run);
		return;
	}
	if (ev.kind == IPC_EGRESS_EV_ALLOWED || ev.kind == IPC_EGRESS_EV_UP) {
		e->allowed++;
		e->st_allowed++;
		metrics_egress(1, 1);
		e->tunnels++;
	} else if (ev.kind == IPC_EGRESS_EV_DENIED) {
		e->denied++;
		e->st_denied++;
		metrics_egress(0, 1);
	} else if (e->tunnels > 0)
		e->tunnels--;
	/* refusals the rate limit left out (an allowed one left out came as UP) */
	e->st_denied += ev.suppressed_denied;
	metrics_egress(0, ev.suppressed_denied);
	if (ev.kind == IPC_EGRESS_EV_CLOSED) {
		e->st_up += ev.up;
		e->st_down += ev.down;
	}
	if (ev.kind == IPC_EGRESS_EV_UP || ev.kind == IPC_EGRESS_EV_DOWN)
		return;
	if (e->owner[0] != '\0' && strcmp(e->owner, "-") == 0) {
		/* an MCP server of agrippactl mcp test: no run to write to */
		log_info("egress: mcp server %s: %s %s:%u%s%s", e->server, names[ev.kind], ev.host,
		         ev.port, ev.kind == IPC_EGRESS_EV_DENIED ? ": " : "",
		         ev.kind == IPC_EGRESS_EV_DENIED ? ev.reason : "");
		return;
	}
	egress_store(names[ev.kind], &ev, e);
}

size_t
egress_runs_status(unsigned *tunnels)
{
	struct egrun *e;
	size_t n = 0;

	*tunnels = 0;
	LIST_FOREACH(e, &egruns, entry) {
		if (e->fd < 0)
			continue;
		n++;
		*tunnels += e->tunnels;
	}
	return n;
}

/* ---- a step's network totals in its step.finished ---------------------------------- */

#define EGSTEP_WAIT_MS 2000

/* A runner_step_end waiting for egress's EGRESS_TOTALS. */
struct egstep {
	LIST_ENTRY(egstep) entry;
	uint64_t id; /* the EGRESS_STEP's */
	char run[IPC_UUID_LEN + 1];
	struct proc *p;
	uint64_t gen, msgid;
	const struct sql_op *op;
	struct db_params params;
	struct event *timer;
};
static LIST_HEAD(, egstep) egsteps = LIST_HEAD_INITIALIZER(egsteps);
static uint64_t egstep_seq;

/*
 * extra ($8 of runner_step_end, JSON text or NULL) with "network" set to
 * the totals (net non-NULL) or taken out.  A value that is not a JSON
 * object is left as it is: the SQL refuses it.
 */
static void
egstep_set_network(struct db_params *params, json_t *net)
{
	json_t *o;
	char *s;

	if (params->n < 8) {
		json_decref(net);
		return;
	}
	o = params->values[7] != NULL ? json_loads(params->values[7], 0, NULL) : json_object();
	if (!json_is_object(o)) {
		json_decref(o);
		json_decref(net);
		return;
	}
	if (net != NULL)
		json_object_set_new(o, "network", net);
	else
		json_object_del(o, "network");
	if ((s = json_dumps(o, JSON_COMPACT)) == NULL)
		fatalx("json_dumps");
	json_decref(o);
	free(params->values[7]);
	params->values[7] = s;
	params->lengths[7] = (int)strlen(s);
}

static json_t *
egstep_totals(uint64_t allowed, uint64_t denied, uint64_t up, uint64_t down)
{
	json_t *net = json_pack("{s:I, s:I, s:I, s:I}", "allowed", (json_int_t)allowed, "denied",
	    (json_int_t)denied, "bytes_up", (json_int_t)up, "bytes_down", (json_int_t)down);

	if (net == NULL)
		fatalx("json_pack");
	return net;
}

/* The supervisor's own count of the step, from the events it was given. */
static json_t *
egstep_own(const char *run)
{
	struct egrun *e = egrun_find(run);

	if (e == NULL)
		return egstep_totals(0, 0, 0, 0);
	return egstep_totals(e->st_allowed, e->st_denied, e->st_up, e->st_down);
}

/* The op goes on, to the runner's incarnation that asked (a runner gone
 * meanwhile gets nothing: as dbop_done does). */
static void
egstep_resume(struct egstep *q)
{
	struct proc *p = q->p;

	LIST_REMOVE(q, entry);
	event_free(q->timer);
	p->inflight--;
	if (p->gen == q->gen && p->chan != NULL)
		sup_db_submit(p, q->gen, q->msgid, q->op, &q->params);
	else {
		db_params_free(&q->params);
		if (p->inflight == 0 && p->on_idle != NULL)
			p->on_idle(p);
	}
	free(q);
}

static void
egstep_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct egstep *q = arg;

	log_warnx("run %s: egress did not give the step's network totals in time; counted from "
		  "its events",
	    q->run);
	egstep_set_network(&q->params, egstep_own(q->run));
	egstep_resume(q);
}

int
egress_runs_step_end(struct proc *p, uint64_t msgid, const struct sql_op *op,
    struct db_params *params)
{
	struct egrun *e = egrun_find(p->run);
	struct proc *eg = proc_by_role(ROLE_EGRESS);
	struct timeval tv = { EGSTEP_WAIT_MS / 1000, (EGSTEP_WAIT_MS % 1000) * 1000 };
	struct ipc_wbuf w;
	struct egstep *q;

	if (e == NULL || e->fd < 0) {
		/* no way out: no totals (and the extra untouched unless it names one) */
		if (params->n >= 8 && params->values[7] != NULL &&
		    strstr(params->values[7], "\"network\"") != NULL)
			egstep_set_network(params, NULL);
		return 0;
	}
	if (eg == NULL || !eg->ready) {
		egstep_set_network(params, egstep_own(p->run));
		return 0;
	}
	if ((q = calloc(1, sizeof(*q))) == NULL)
		fatal("calloc");
	q->id = ++egstep_seq;
	memcpy(q->run, p->run, sizeof(q->run));
	q->p = p;
	q->gen = p->gen;
	q->msgid = msgid;
	q->op = op;
	q->params = *params; /* taken */
	if ((q->timer = evtimer_new(sup.base, egstep_timeout, q)) == NULL)
		fatalx("evtimer_new");
	ipc_wbuf_begin(&w, IMSG_EGRESS_STEP, q->id, 1);
	ipc_put_str(&w, p->run);
	if (proc_send(eg, &w, -1) == -1) {
		event_free(q->timer);
		free(q);
		egstep_set_network(params, egstep_own(p->run));
		return 0;
	}
	LIST_INSERT_HEAD(&egsteps, q, entry);
	p->inflight++;
	evtimer_add(q->timer, &tv);
	return 1;
}

void
egress_totals_in(struct proc *p, struct ipc_msg *m)
{
	struct ipc_egress_totals t;
	struct egstep *q;

	if (ipc_dec_egress_totals(m->body, &t) == -1)
		return; /* the catalog checked it */
	LIST_FOREACH(q, &egsteps, entry)
		if (q->id == m->id)
			break;
	/* late (the wait is over) or not asked for: nothing waits for it */
	if (q == NULL || strcmp(q->run, t.run) != 0) {
		log_debug("egress: totals of run %s nobody waits for", t.run);
		return;
	}
	egstep_set_network(&q->params, egstep_totals(t.allowed, t.denied, t.up, t.down));
	egstep_resume(q);
}
