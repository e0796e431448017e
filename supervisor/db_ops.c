/*
 * Named database operations: the only way a child touches the database.  A
 * child names an op and sends typed arguments; the supervisor checks the
 * caller's role, the argument count and every argument's type against the
 * op's declaration in sql/ops/NAME.sql, and only then binds them as libpq
 * parameters.  No SQL text ever crosses IPC.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "supervisor/db.h"

const struct sql_op *
db_op_lookup(const char *name)
{
	size_t i;

	for (i = 0; i < sql_nops; i++)
		if (strcmp(sql_ops[i].name, name) == 0)
			return &sql_ops[i];
	return NULL;
}

unsigned
db_type_oid(enum sql_type t)
{
	switch (t) {
	case SQL_T_TEXT:
		return 25;
	case SQL_T_INT4:
		return 23;
	case SQL_T_INT8:
		return 20;
	case SQL_T_BOOL:
		return 16;
	case SQL_T_BYTEA:
		return 17;
	case SQL_T_JSONB:
		return 3802;
	case SQL_T_UUID:
		return 2950;
	case SQL_T_TIMESTAMPTZ:
		return 1184;
	}
	return 0;
}

void
db_params_free(struct db_params *p)
{
	int i;

	for (i = 0; i < p->n; i++)
		free(p->values[i]);
	memset(p, 0, sizeof(*p));
}

static char *
dup_bytes(const void *s, size_t len)
{
	char *d = malloc(len + 1);

	if (d == NULL)
		fatal("malloc");
	memcpy(d, s, len);
	d[len] = '\0';
	return d;
}

/* Convert one msgpack argument; returns 0 or -1 with a reason in errbuf. */
static int
db_arg_convert(const struct sql_arg *a, const msgpack_object *o, int i, struct db_params *p,
    char *errbuf, size_t errsz)
{
	char num[32];

	p->values[i] = NULL;
	p->lengths[i] = 0;
	p->formats[i] = 0;
	if (o->type == MSGPACK_OBJECT_NIL) {
		if (!a->nullable)
			goto bad;
		return 0;
	}
	switch (a->type) {
	case SQL_T_INT4:
	case SQL_T_INT8:
		if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
			if (a->type == SQL_T_INT4 ? o->via.u64 > INT32_MAX : o->via.u64 > INT64_MAX)
				goto range;
			snprintf(num, sizeof(num), "%" PRIu64, o->via.u64);
		} else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
			if (a->type == SQL_T_INT4 && o->via.i64 < INT32_MIN)
				goto range;
			snprintf(num, sizeof(num), "%" PRId64, o->via.i64);
		} else
			goto bad;
		p->values[i] = dup_bytes(num, strlen(num));
		return 0;
	case SQL_T_BOOL:
		if (o->type != MSGPACK_OBJECT_BOOLEAN)
			goto bad;
		p->values[i] = dup_bytes(o->via.boolean ? "t" : "f", 1);
		return 0;
	case SQL_T_BYTEA:
		if (o->type != MSGPACK_OBJECT_BIN)
			goto bad;
		p->values[i] = dup_bytes(o->via.bin.ptr, o->via.bin.size);
		p->lengths[i] = (int)o->via.bin.size;
		p->formats[i] = 1;
		return 0;
	default:
		if (o->type != MSGPACK_OBJECT_STR)
			goto bad;
		if (memchr(o->via.str.ptr, '\0', o->via.str.size) != NULL)
			goto bad;
		p->values[i] = dup_bytes(o->via.str.ptr, o->via.str.size);
		return 0;
	}
bad:
	snprintf(errbuf, errsz, "argument %d: wrong type", i + 1);
	return -1;
range:
	snprintf(errbuf, errsz, "argument %d: out of range", i + 1);
	return -1;
}

int
db_op_check(const struct sql_op *op, enum ipc_role role, const char *instance,
    const char *run, const char *owner, const struct ipc_db_op *req, struct db_params *p, char *errbuf, size_t errsz)
{
	struct ipc_cur c = req->args;
	const msgpack_object *o;
	int i;

	memset(p, 0, sizeof(*p));
	if ((op->roles & ROLE_BIT(role)) == 0) {
		snprintf(errbuf, errsz, "op %s: not permitted for %s", op->name,
		    ipc_role_name(role));
		return DB_ERR_DENIED;
	}
	if (req->nargs != (uint32_t)op->nargs) {
		snprintf(errbuf, errsz, "op %s: takes %d arguments, got %u", op->name, op->nargs,
		    req->nargs);
		return DB_ERR_ARGS;
	}
	for (i = 0; i < op->nargs; i++) {
		if (ipc_get_any(&c, &o) == -1 ||
		    db_arg_convert(&op->args[i], o, i, p, errbuf, errsz) == -1) {
			p->n = i + 1;
			db_params_free(p);
			return DB_ERR_ARGS;
		}
		p->n = i + 1;
	}
	if (op->scope == SQL_SCOPE_INSTANCE &&
	    (p->n < 1 || p->values[0] == NULL || strcmp(p->values[0], instance) != 0)) {
		snprintf(errbuf, errsz, "op %s: may only name the caller's own instance", op->name);
		db_params_free(p);
		return DB_ERR_DENIED;
	}
	if (op->scope == SQL_SCOPE_RUN &&
	    (run == NULL || owner == NULL || p->n < 2 || p->values[0] == NULL ||
		p->values[1] == NULL || strcasecmp(p->values[0], run) != 0 ||
		strcmp(p->values[1], owner) != 0)) {
		snprintf(errbuf, errsz, "op %s: may only name the caller's own run and lease",
		    op->name);
		db_params_free(p);
		return DB_ERR_DENIED;
	}
	return DB_OK;
}
