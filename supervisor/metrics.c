/*
 * The supervisor's share of GET /metrics: what only it knows (sandboxes,
 * egress decisions, the database pool, child restarts, IPC protocol
 * errors), counted here and sent to httpd as numbers only (IMSG_METRICS).
 * httpd serves them on the metrics_listen socket (httpd/metrics.c); no
 * name, id or secret is ever part of the reply.
 */
#include <stdint.h>

#include "common/log.h"
#include "supervisor/db.h"
#include "supervisor/sbx.h"
#include "supervisor/supervisor.h"

static struct {
	uint64_t sbx_started;
	uint64_t egress_allowed, egress_denied;
	uint64_t ipc_errors[IPC_MCHILD__COUNT];
} counts;

/* The metrics slot of a child's role, or -1 for roles without one. */
static int
metrics_child(enum ipc_role role)
{
	switch (role) {
	case ROLE_ENGINE:
		return IPC_MCHILD_ENGINE;
	case ROLE_HTTPD:
		return IPC_MCHILD_HTTPD;
	case ROLE_PROXY:
		return IPC_MCHILD_PROXY;
	case ROLE_EGRESS:
		return IPC_MCHILD_EGRESS;
	case ROLE_RUNNER:
		return IPC_MCHILD_RUNNER;
	default:
		return -1;
	}
}

void
metrics_sbx_started(void)
{
	counts.sbx_started++;
}

void
metrics_egress(int allowed, uint64_t n)
{
	if (allowed)
		counts.egress_allowed += n;
	else
		counts.egress_denied += n;
}

void
metrics_ipc_error(enum ipc_role role)
{
	int i = metrics_child(role);

	if (i >= 0)
		counts.ipc_errors[i]++;
}

/* Fill v (IPC_METRIC__COUNT values) with what the supervisor knows now. */
static void
metrics_collect(uint64_t *v)
{
	struct db_pool_stats ds;
	unsigned tunnels;
	size_t i;
	int c;

	(void)egress_runs_status(&tunnels);
	db_pool_stats(&ds);
	v[IPC_METRIC_SBX_LIVE] = (uint64_t)sbx_count();
	v[IPC_METRIC_SBX_STARTED] = counts.sbx_started;
	v[IPC_METRIC_EGRESS_ALLOWED] = counts.egress_allowed;
	v[IPC_METRIC_EGRESS_DENIED] = counts.egress_denied;
	v[IPC_METRIC_EGRESS_TUNNELS] = tunnels;
	v[IPC_METRIC_DB_POOL_SIZE] = ds.size;
	v[IPC_METRIC_DB_POOL_READY] = ds.ready;
	v[IPC_METRIC_DB_POOL_BUSY] = ds.busy;
	v[IPC_METRIC_DB_QUEUED] = ds.queued;
	v[IPC_METRIC_DB_OPS_OK] = ds.ok;
	v[IPC_METRIC_DB_OPS_ERROR] = ds.error;
	v[IPC_METRIC_DB_OPS_UNAVAILABLE] = ds.unavailable;
	v[IPC_METRIC_DB_LATENCY_SUM_US] = ds.latency_sum_us;
	for (i = 0; i <= IPC_METRIC_DB_NBOUNDS; i++)
		v[IPC_METRIC_DB_LATENCY_BUCKET + i] = ds.latency[i];
	for (i = 0; i < IPC_MCHILD__COUNT; i++) {
		v[IPC_METRIC_RESTARTS + i] = 0;
		v[IPC_METRIC_IPC_ERRORS + i] = counts.ipc_errors[i];
	}
	for (i = 0; i < nprocs; i++)
		if ((c = metrics_child(procs[i].role)) >= 0)
			v[IPC_METRIC_RESTARTS + (size_t)c] += procs[i].restarts;
	v[IPC_METRIC_RESTARTS + IPC_MCHILD_POSTGRES] = sup.pg_embedded ? sup.pg_restarts : 0;
}

void
metrics_get(struct proc *p, struct ipc_msg *m)
{
	uint64_t v[IPC_METRIC__COUNT];
	struct ipc_wbuf w;
	size_t i;

	if (ipc_dec_metrics_get(m->body) == -1)
		return; /* the catalog checked it */
	metrics_collect(v);
	ipc_wbuf_begin(&w, IMSG_METRICS, m->id, 1);
	ipc_put_array(&w, IPC_METRIC__COUNT);
	for (i = 0; i < IPC_METRIC__COUNT; i++)
		ipc_put_u64(&w, v[i]);
	if (proc_send(p, &w, -1) == -1)
		log_warnx("%s: cannot send metrics", p->name);
}
