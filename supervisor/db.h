/*
 * The supervisor's database side: the SQL built into the binary (migrations
 * and named operations, generated from sql/ by scripts/sqlgen.sh), the
 * migration runner, and the asynchronous libpq pool that answers named
 * operations for children.
 */
#ifndef AGRIPPA_DB_H
#define AGRIPPA_DB_H

#include <stddef.h>
#include <stdint.h>

#include "ipc/ipc.h"
#include "ipc/ipc_msg.h"

struct event_base;

enum sql_type {
	SQL_T_TEXT,
	SQL_T_INT4,
	SQL_T_INT8,
	SQL_T_BOOL,
	SQL_T_BYTEA,
	SQL_T_JSONB,
	SQL_T_UUID,
	SQL_T_TIMESTAMPTZ,
};

enum sql_scope {
	SQL_SCOPE_NONE,
	SQL_SCOPE_INSTANCE, /* $1 must equal the calling child's instance id */
	SQL_SCOPE_RUN,      /* $1 the calling runner's run, $2 its lease owner */
};

struct sql_arg {
	enum sql_type type;
	int nullable;
};

struct sql_migration {
	int version;
	const char *name;
	const char *sql;
};

struct sql_op {
	const char *name;
	uint32_t roles; /* ROLE_BIT mask of callers */
	enum sql_scope scope;
	int nargs;
	struct sql_arg args[IPC_DB_MAXARGS];
	const char *sql;
};

extern const struct sql_migration sql_migrations[];
extern const size_t sql_nmigrations;
extern const struct sql_op sql_ops[];
extern const size_t sql_nops;

/* db_ops.c */
const struct sql_op *db_op_lookup(const char *name);
/*
 * Check a DB_OP request from a child of role `role` (instance id `instance`)
 * against the op's declaration.  Converts the arguments to libpq text/binary
 * parameters in *p (see struct db_params; free with db_params_free).  Returns
 * DB_OK or a db_code with errbuf set to a reason naming the argument.
 */
struct db_params {
	int n;
	char *values[IPC_DB_MAXARGS];
	int lengths[IPC_DB_MAXARGS];
	int formats[IPC_DB_MAXARGS];
};
/* run and owner: a runner's run and lease owner (NULL for other callers),
 * which SQL_SCOPE_RUN ops must name as $1 and $2. */
int db_op_check(const struct sql_op *op, enum ipc_role role, const char *instance,
    const char *run, const char *owner, const struct ipc_db_op *req, struct db_params *p, char *errbuf, size_t errsz);
void db_params_free(struct db_params *p);
unsigned db_type_oid(enum sql_type t);

/* migrate.c: apply pending migrations over a blocking connection.
 * Returns 0 or -1 (logged). */
int db_migrate(const char *conninfo);

/* db.c: the pool */
typedef void (*db_done_cb)(uint64_t reqid, int code, const char *err, void *pgres, void *arg);
int db_pool_init(struct event_base *base, const char *conninfo, unsigned size);
void db_pool_shutdown(void);
/* "up" (some connection ready), "connecting", or "down". */
const char *db_pool_state(void);
unsigned db_pool_ready(void);
/*
 * Queue one named op.  cb runs later with code DB_OK and the PGresult (owned
 * by the pool, valid only during the call) or an error code and message.
 * Returns a request handle or 0 when it failed at once (cb not called).
 */
uint64_t db_pool_submit(const struct sql_op *op, struct db_params *p, db_done_cb cb, void *arg);
/* The pool's use since the start, for GET /metrics: latency[i] counts
 * operations that took at most IPC_METRIC_DB_BOUNDS_US[i] (and more than the
 * bound before; the last: more than every bound), from submission to result. */
struct db_pool_stats {
	uint64_t size, ready, busy, queued;
	uint64_t ok, error, unavailable;
	uint64_t latency_sum_us;
	uint64_t latency[IPC_METRIC_DB_NBOUNDS + 1];
};
void db_pool_stats(struct db_pool_stats *s);
/* Forget the callback of requests whose owner vanished (arg match). */
void db_pool_cancel_owner(void *arg);

#endif
