/*
 * Answering named database operations for children.  The request was checked
 * against the IPC catalog already; here the op name, the caller's role, the
 * argument types and the op's scope are checked before anything reaches
 * PostgreSQL, and the reply goes back only to the same incarnation of the
 * child that asked.
 */
#include <libpq-fe.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "supervisor/db.h"
#include "supervisor/supervisor.h"

struct dbop_ctx {
	struct proc *p;
	uint64_t gen;
	uint64_t msgid;
	int sweep; /* a connection may be gone: its mirror with it */
};

static void
dbop_reply_error(struct proc *p, uint64_t msgid, int code, const char *err)
{
	struct ipc_wbuf w;

	ipc_wbuf_begin(&w, IMSG_DB_RESULT, msgid, 4);
	ipc_put_u64(&w, (uint64_t)code);
	ipc_put_strn(&w, err, strnlen(err, IPC_ERRMSG_MAX));
	ipc_put_u64(&w, 0);
	ipc_put_array(&w, 0);
	if (ipc_wbuf_finish(&w, sup.conf.ipc_max_frame) == 0 && p->chan != NULL)
		ipc_chan_send(p->chan, &w, -1);
	ipc_wbuf_free(&w);
}

/* Encode a result; returns 0 or -1 when it does not fit the limits. */
static int
dbop_encode_rows(struct ipc_wbuf *w, uint64_t msgid, PGresult *res)
{
	int nrows = PQntuples(res), ncols = PQnfields(res), i, j;

	if (nrows > IPC_DB_MAXROWS || ncols > IPC_DB_MAXCOLS ||
	    (size_t)nrows * (size_t)(ncols + 1) + 16 > IPC_MAX_VALUES)
		return -1;
	ipc_wbuf_begin(w, IMSG_DB_RESULT, msgid, 4);
	ipc_put_u64(w, DB_OK);
	ipc_put_str(w, "");
	ipc_put_u64(w, (uint64_t)ncols);
	ipc_put_array(w, (uint32_t)nrows);
	for (i = 0; i < nrows; i++) {
		ipc_put_array(w, (uint32_t)ncols);
		for (j = 0; j < ncols; j++) {
			if (PQgetisnull(res, i, j))
				ipc_put_nil(w);
			else
				ipc_put_strn(w, PQgetvalue(res, i, j),
				    (size_t)PQgetlength(res, i, j));
		}
	}
	return ipc_wbuf_finish(w, sup.conf.ipc_max_frame);
}

static void
dbop_done(uint64_t reqid, int code, const char *err, void *pgres, void *arg)
{
	struct dbop_ctx *x = arg;
	struct proc *p = x->p;
	struct ipc_wbuf w;

	p->inflight--;
	if (x->sweep && code == DB_OK)
		mirror_sweep();
	if (p->gen != x->gen || p->chan == NULL) {
		free(x); /* the child that asked is gone */
		if (p->inflight == 0 && p->on_idle != NULL)
			p->on_idle(p);
		return;
	}
	if (code != DB_OK) {
		dbop_reply_error(x->p, x->msgid, code, err);
	} else if (dbop_encode_rows(&w, x->msgid, pgres) == -1) {
		ipc_wbuf_free(&w);
		dbop_reply_error(x->p, x->msgid, DB_ERR_TOO_LARGE, "result too large");
	} else {
		ipc_chan_send(x->p->chan, &w, -1);
		ipc_wbuf_free(&w);
	}
	free(x);
	if (p->inflight == 0 && p->on_idle != NULL)
		p->on_idle(p);
}

void
sup_db_op(struct proc *p, struct ipc_msg *m)
{
	struct ipc_db_op req;
	const struct sql_op *op;
	struct db_params params;
	char err[IPC_ERRMSG_MAX];
	int code;

	if (ipc_dec_db_op(m->body, &req) == -1) {
		dbop_reply_error(p, m->id, DB_ERR_ARGS, "malformed request");
		return;
	}
	if ((op = db_op_lookup(req.op)) == NULL) {
		log_warnx("%s asked for unknown op %s", p->name, req.op);
		dbop_reply_error(p, m->id, DB_ERR_UNKNOWN_OP, "no such operation");
		return;
	}
	code = db_op_check(op, p->role, p->instance, p->run[0] != '\0' ? p->run : NULL,
	    p->owner[0] != '\0' ? p->owner : NULL, &req, &params, err, sizeof(err));
	if (code != DB_OK) {
		log_warnx("%s: %s", p->name, err);
		dbop_reply_error(p, m->id, code, err);
		return;
	}
	/* a step starts: its network list goes to egress before the runner
	 * hears it may run it (egress_runs.c) */
	if (p->role == ROLE_RUNNER && strcmp(req.op, "runner_step_begin") == 0 && params.n > 3)
		egress_runs_step(p->run, params.values[3]);
	/* a step ends: its network totals join its step.finished, which may
	 * wait for egress's count (egress_runs.c takes the params then) */
	if (p->role == ROLE_RUNNER && strcmp(req.op, "runner_step_end") == 0 &&
	    egress_runs_step_end(p, m->id, op, &params))
		return;
	sup_db_submit(p, p->gen, m->id, op, &params);
}

void
sup_db_submit(struct proc *p, uint64_t gen, uint64_t msgid, const struct sql_op *op,
    struct db_params *params)
{
	struct dbop_ctx *x;

	if ((x = malloc(sizeof(*x))) == NULL)
		fatal("malloc");
	x->p = p;
	x->gen = gen;
	x->msgid = msgid;
	x->sweep = strcmp(op->name, "httpd_repo_remove") == 0;
	p->inflight++;
	if (db_pool_submit(op, params, dbop_done, x) == 0) {
		p->inflight--;
		db_params_free(params);
		free(x);
		if (p->gen == gen)
			dbop_reply_error(p, msgid, DB_ERR_UNAVAILABLE, "database unavailable");
	}
}
