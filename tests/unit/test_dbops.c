/*
 * Named operations: the supervisor's checks of a child's DB_OP request
 * against the op's declaration (role, argument count and types, scope), and
 * the SQL tables generated from sql/.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ipc/ipc.h"
#include "ipc/ipc_msg.h"
#include "supervisor/db.h"

/* Build a DB_OP body with the given args (a packer callback fills them). */
struct req {
	struct ipc_wbuf w;
	struct ipc_msg m;
	struct ipc_db_op op;
};

static void
req_build(struct req *r, const char *op, uint32_t nargs, void (*fill)(struct ipc_wbuf *))
{
	const char *err = NULL;

	ipc_wbuf_begin(&r->w, IMSG_DB_OP, 1, 2);
	ipc_put_str(&r->w, op);
	ipc_put_array(&r->w, nargs);
	fill(&r->w);
	assert_int_equal(ipc_wbuf_finish(&r->w, IPC_MAX_FRAME_DEFAULT), 0);
	assert_int_equal(ipc_frame_decode((const uint8_t *)r->w.sb.data + 4, r->w.sb.size - 4,
			     &r->m, &err),
	    0);
	assert_int_equal(ipc_dec_db_op(r->m.body, &r->op), 0);
}

static void
req_free(struct req *r)
{
	ipc_msg_free(&r->m);
	ipc_wbuf_free(&r->w);
}

static void
fill_none(struct ipc_wbuf *w)
{
}

static void
fill_hb_ok(struct ipc_wbuf *w)
{
	ipc_put_str(w, "engine-1");
	ipc_put_str(w, "host");
	ipc_put_u64(w, 42);
	ipc_put_str(w, "0123456789abcdef0123456789abcdef"); /* the host id */
}

static void
fill_hb_other(struct ipc_wbuf *w)
{
	ipc_put_str(w, "engine-2");
	ipc_put_str(w, "host");
	ipc_put_u64(w, 42);
	ipc_put_str(w, "0123456789abcdef0123456789abcdef"); /* the host id */
}

static void
fill_hb_bigpid(struct ipc_wbuf *w)
{
	ipc_put_str(w, "engine-1");
	ipc_put_str(w, "host");
	ipc_put_u64(w, (uint64_t)INT32_MAX + 1);
	ipc_put_str(w, "0123456789abcdef0123456789abcdef"); /* the host id */
}

static void
fill_hb_negpid(struct ipc_wbuf *w)
{
	ipc_put_str(w, "engine-1");
	ipc_put_str(w, "host");
	ipc_put_i64(w, -5);
	ipc_put_str(w, "0123456789abcdef0123456789abcdef"); /* the host id */
}

static void
fill_hb_wrongtype(struct ipc_wbuf *w)
{
	ipc_put_str(w, "engine-1");
	ipc_put_u64(w, 7); /* hostname must be text */
	ipc_put_u64(w, 42);
	ipc_put_str(w, "0123456789abcdef0123456789abcdef"); /* the host id */
}

static void
fill_hb_nil(struct ipc_wbuf *w)
{
	ipc_put_str(w, "engine-1");
	ipc_put_nil(w); /* not nullable */
	ipc_put_u64(w, 42);
	ipc_put_str(w, "0123456789abcdef0123456789abcdef"); /* the host id */
}

static void
fill_hb_bin(struct ipc_wbuf *w)
{
	ipc_put_str(w, "engine-1");
	ipc_put_bin(w, "host", 4); /* bin is not text */
	ipc_put_u64(w, 42);
	ipc_put_str(w, "0123456789abcdef0123456789abcdef"); /* the host id */
}

static void
fill_hb_nul(struct ipc_wbuf *w)
{
	ipc_put_str(w, "engine-1");
	ipc_put_strn(w, "ho\0st", 5); /* text cannot hold NUL */
	ipc_put_u64(w, 42);
	ipc_put_str(w, "0123456789abcdef0123456789abcdef"); /* the host id */
}

static void
fill_hb_nohost(struct ipc_wbuf *w)
{
	ipc_put_str(w, "engine-1");
	ipc_put_str(w, "host");
	ipc_put_u64(w, 42);
	ipc_put_nil(w); /* before the configuration: no host id yet */
}

static void
fill_one(struct ipc_wbuf *w)
{
	ipc_put_u64(w, 1);
}

static void
t_tables(void **state)
{
	size_t i;
	int j;

	assert_true(sql_nmigrations >= 1);
	assert_int_equal(sql_migrations[0].version, 1);
	for (i = 1; i < sql_nmigrations; i++)
		assert_true(sql_migrations[i].version > sql_migrations[i - 1].version);
	assert_non_null(db_op_lookup("health"));
	assert_non_null(db_op_lookup("engine_heartbeat"));
	assert_null(db_op_lookup("Health"));
	assert_null(db_op_lookup(""));
	for (i = 0; i < sql_nops; i++) {
		assert_true(sql_ops[i].roles != 0);
		assert_true(strlen(sql_ops[i].name) <= IPC_OPNAME_MAX);
		assert_true(sql_ops[i].nargs <= IPC_DB_MAXARGS);
		for (j = 0; j < sql_ops[i].nargs; j++)
			assert_true(db_type_oid(sql_ops[i].args[j].type) != 0);
		/* The supervisor and sandboxes call no op as children do.  The
		 * supervisor's own ops (role ctl) are named ctl_* (agrippactl's
		 * commands) or sup_* (its own work, such as opening a stored
		 * artifact for httpd); no child may call one, and the
		 * supervisor calls nothing else. */
		assert_int_equal(sql_ops[i].roles &
				     (ROLE_BIT(ROLE_SUPERVISOR) | ROLE_BIT(ROLE_SANDBOX)),
		    0);
		if (strncmp(sql_ops[i].name, "ctl_", 4) == 0 ||
		    strncmp(sql_ops[i].name, "sup_", 4) == 0)
			assert_int_equal(sql_ops[i].roles, ROLE_BIT(ROLE_CTL));
		else
			assert_int_equal(sql_ops[i].roles & ROLE_BIT(ROLE_CTL), 0);
	}
}

static int
check(const char *op, enum ipc_role role, const char *inst, uint32_t nargs,
    void (*fill)(struct ipc_wbuf *), char *err, struct db_params *p)
{
	struct req r;
	int code;

	req_build(&r, op, nargs, fill);
	code = db_op_check(db_op_lookup(op), role, inst, NULL, NULL, &r.op, p, err, 256);
	req_free(&r);
	return code;
}

static void
t_heartbeat_ok(void **state)
{
	struct db_params p;
	char err[256];

	assert_int_equal(check("engine_heartbeat", ROLE_ENGINE, "engine-1", 4, fill_hb_ok, err, &p),
	    DB_OK);
	assert_int_equal(p.n, 4);
	assert_string_equal(p.values[0], "engine-1");
	assert_string_equal(p.values[1], "host");
	assert_string_equal(p.values[2], "42");
	assert_string_equal(p.values[3], "0123456789abcdef0123456789abcdef");
	db_params_free(&p);
	/* the host id may be null (text?) */
	assert_int_equal(check("engine_heartbeat", ROLE_ENGINE, "engine-1", 4, fill_hb_nohost, err,
	    &p), DB_OK);
	assert_null(p.values[3]);
	db_params_free(&p);
}

static void
fill_user(struct ipc_wbuf *w)
{
	ipc_put_str(w, "alice");
	ipc_put_str(w, "Alice");
}

static void
t_role_denied(void **state)
{
	struct db_params p;
	char err[256];

	assert_int_equal(check("engine_heartbeat", ROLE_HTTPD, "httpd-1", 4, fill_hb_ok, err, &p),
	    DB_ERR_DENIED);
	assert_non_null(strstr(err, "not permitted for httpd"));
	assert_int_equal(check("engine_heartbeat", ROLE_PROXY, "proxy-1", 4, fill_hb_ok, err, &p),
	    DB_ERR_DENIED);
	assert_int_equal(check("health", ROLE_PROXY, "proxy-1", 0, fill_none, err, &p),
	    DB_ERR_DENIED);
	/* No child reaches the control socket's ops (user and token admin). */
	assert_int_equal(check("ctl_user_add", ROLE_HTTPD, "httpd-1", 2, fill_user, err, &p),
	    DB_ERR_DENIED);
	assert_int_equal(check("ctl_user_add", ROLE_RUNNER, "runner-1", 2, fill_user, err, &p),
	    DB_ERR_DENIED);
	assert_int_equal(check("ctl_user_add", ROLE_CTL, "", 2, fill_user, err, &p), DB_OK);
	db_params_free(&p);
}

static void
t_scope_other_instance(void **state)
{
	struct db_params p;
	char err[256];

	assert_int_equal(
	    check("engine_heartbeat", ROLE_ENGINE, "engine-1", 4, fill_hb_other, err, &p),
	    DB_ERR_DENIED);
	assert_non_null(strstr(err, "own instance"));
}

static void
t_arg_count(void **state)
{
	struct db_params p;
	char err[256];

	assert_int_equal(check("health", ROLE_HTTPD, "h", 1, fill_one, err, &p), DB_ERR_ARGS);
	assert_non_null(strstr(err, "takes 0 arguments, got 1"));
}

static void
t_arg_types(void **state)
{
	struct db_params p;
	char err[256];

	assert_int_equal(
	    check("engine_heartbeat", ROLE_ENGINE, "engine-1", 4, fill_hb_bigpid, err, &p),
	    DB_ERR_ARGS);
	assert_non_null(strstr(err, "argument 3: out of range"));
	assert_int_equal(
	    check("engine_heartbeat", ROLE_ENGINE, "engine-1", 4, fill_hb_negpid, err, &p), DB_OK);
	assert_string_equal(p.values[2], "-5"); /* the SQL CHECK refuses it, not the type */
	db_params_free(&p);
	assert_int_equal(
	    check("engine_heartbeat", ROLE_ENGINE, "engine-1", 4, fill_hb_wrongtype, err, &p),
	    DB_ERR_ARGS);
	assert_non_null(strstr(err, "argument 2: wrong type"));
	assert_int_equal(check("engine_heartbeat", ROLE_ENGINE, "engine-1", 4, fill_hb_nil, err, &p),
	    DB_ERR_ARGS);
	assert_int_equal(check("engine_heartbeat", ROLE_ENGINE, "engine-1", 4, fill_hb_bin, err, &p),
	    DB_ERR_ARGS);
	assert_int_equal(check("engine_heartbeat", ROLE_ENGINE, "engine-1", 4, fill_hb_nul, err, &p),
	    DB_ERR_ARGS);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_tables),
		cmocka_unit_test(t_heartbeat_ok),
		cmocka_unit_test(t_role_denied),
		cmocka_unit_test(t_scope_other_instance),
		cmocka_unit_test(t_arg_count),
		cmocka_unit_test(t_arg_types),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
