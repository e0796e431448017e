/*
 * The message catalog built from IPC_MSG_LIST, role names, and one typed
 * decoder per body; the catalog's validators are those decoders with the
 * result thrown away, so what is checked and what is decoded cannot drift.
 */
#include "ipc_msg.h"

#include <string.h>

static const char *const role_names[ROLE__COUNT] = {
	[ROLE_SUPERVISOR] = "supervisor",
	[ROLE_ENGINE] = "engine",
	[ROLE_HTTPD] = "httpd",
	[ROLE_PROXY] = "proxy",
	[ROLE_RUNNER] = "runner",
	[ROLE_SANDBOX] = "sandbox",
	[ROLE_GITHELPER] = "githelper",
	[ROLE_CTL] = "ctl",
};

const char *
ipc_role_name(enum ipc_role role)
{
	if ((unsigned)role >= ROLE__COUNT)
		return "unknown";
	return role_names[role];
}

int
ipc_role_from_name(const char *name, enum ipc_role *out)
{
	unsigned r;

	for (r = 0; r < ROLE__COUNT; r++) {
		if (strcmp(name, role_names[r]) == 0) {
			*out = (enum ipc_role)r;
			return 0;
		}
	}
	return -1;
}

/* ---- typed decoders --------------------------------------------------- */

int
ipc_dec_hello(const msgpack_object *body, struct ipc_hello *out)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_u32(&c, &out->proto) == -1 || ipc_get_u32(&c, &out->role) == -1 ||
	    ipc_get_u32(&c, &out->verbose) == -1 || ipc_get_bool(&c, &out->devmode) == -1 ||
	    ipc_get_u32(&c, &out->uid) == -1 || ipc_get_u32(&c, &out->gid) == -1 ||
	    ipc_get_cstr(&c, out->chroot, sizeof(out->chroot)) == -1 ||
	    ipc_get_cstr(&c, out->instance, sizeof(out->instance)) == -1 || ipc_end(&c) == -1)
		return -1;
	if (out->role >= ROLE__COUNT || out->chroot[0] != '/')
		return -1;
	return 0;
}

int
ipc_dec_ready(const msgpack_object *body, struct ipc_ready *out)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_u32(&c, &out->proto) == -1 || ipc_get_u32(&c, &out->pid) == -1 ||
	    ipc_end(&c) == -1)
		return -1;
	return 0;
}

int
ipc_dec_log_verbose(const msgpack_object *body, uint32_t *level)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_u32(&c, level) == -1 || ipc_end(&c) == -1)
		return -1;
	return *level <= 3 ? 0 : -1;
}

/* An operation name: 1..IPC_OPNAME_MAX of [a-z0-9_]. */
static int
db_opname_ok(const char *s)
{
	size_t len = strlen(s);

	if (len == 0 || len > IPC_OPNAME_MAX)
		return 0;
	return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_") == len;
}

static int
db_arg_ok(const msgpack_object *o)
{
	switch (o->type) {
	case MSGPACK_OBJECT_NIL:
	case MSGPACK_OBJECT_BOOLEAN:
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
	case MSGPACK_OBJECT_NEGATIVE_INTEGER:
		return 1;
	case MSGPACK_OBJECT_STR:
		return o->via.str.size <= IPC_DB_ARG_MAX;
	case MSGPACK_OBJECT_BIN:
		return o->via.bin.size <= IPC_DB_ARG_MAX;
	default:
		return 0;
	}
}

int
ipc_dec_db_op(const msgpack_object *body, struct ipc_db_op *out)
{
	struct ipc_cur c, a;
	const msgpack_object *o;

	ipc_cur_init(&c, body);
	if (ipc_get_cstr(&c, out->op, sizeof(out->op)) == -1 || !db_opname_ok(out->op) ||
	    ipc_get_array(&c, &out->args, IPC_DB_MAXARGS) == -1 || ipc_end(&c) == -1)
		return -1;
	out->nargs = out->args.n;
	a = out->args;
	while (ipc_get_any(&a, &o) == 0) {
		if (!db_arg_ok(o))
			return -1;
	}
	return 0;
}

/* One result row: exactly ncols values, each nil or a string. */
static int
db_row_ok(struct ipc_cur *rows, uint32_t ncols)
{
	struct ipc_cur row;
	const msgpack_object *o;

	if (ipc_get_array(rows, &row, ncols) == -1 || row.n != ncols)
		return 0;
	while (ipc_get_any(&row, &o) == 0) {
		if (o->type != MSGPACK_OBJECT_NIL && o->type != MSGPACK_OBJECT_STR)
			return 0;
	}
	return 1;
}

int
ipc_dec_db_result(const msgpack_object *body, struct ipc_db_result *out)
{
	struct ipc_cur c, rows;

	ipc_cur_init(&c, body);
	if (ipc_get_u32(&c, &out->code) == -1 ||
	    ipc_get_str(&c, &out->error, &out->errlen, IPC_ERRMSG_MAX) == -1 ||
	    ipc_get_u32(&c, &out->ncols) == -1 || out->ncols > IPC_DB_MAXCOLS ||
	    ipc_get_array(&c, &out->rows, IPC_DB_MAXROWS) == -1 || ipc_end(&c) == -1)
		return -1;
	out->nrows = out->rows.n;
	rows = out->rows;
	while (rows.i < rows.n) {
		if (!db_row_ok(&rows, out->ncols))
			return -1;
	}
	return 0;
}

int
ipc_dec_listen_fd(const msgpack_object *body, char *addr, size_t addrsz)
{
	struct ipc_cur c, probe;
	const char *s;
	size_t len;

	/* The bound is the protocol's, whatever the size of the caller's buffer. */
	ipc_cur_init(&c, body);
	probe = c;
	if (ipc_get_str(&probe, &s, &len, IPC_ADDR_MAX) == -1 ||
	    ipc_get_cstr(&c, addr, addrsz) == -1 || ipc_end(&c) == -1)
		return -1;
	return 0;
}

int
ipc_dec_chunk(const msgpack_object *body, struct ipc_chunk *out)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_u64(&c, &out->stream) == -1 || ipc_get_u32(&c, &out->seq) == -1 ||
	    ipc_get_bool(&c, &out->last) == -1 ||
	    ipc_get_bin(&c, &out->data, &out->len, IPC_CHUNK_SIZE) == -1 || ipc_end(&c) == -1)
		return -1;
	return 0;
}

int
ipc_dec_ctl_request(const msgpack_object *body, struct ipc_ctl_request *out)
{
	struct ipc_cur c, a;
	const char *s;
	size_t len;

	ipc_cur_init(&c, body);
	if (ipc_get_cstr(&c, out->cmd, sizeof(out->cmd)) == -1 ||
	    ipc_get_array(&c, &out->args, IPC_CTL_MAXARGS) == -1 || ipc_end(&c) == -1)
		return -1;
	out->nargs = out->args.n;
	a = out->args;
	while (a.i < a.n) {
		if (ipc_get_str(&a, &s, &len, IPC_CTL_ARG_MAX) == -1)
			return -1;
	}
	return 0;
}

int
ipc_dec_ctl_reply(const msgpack_object *body, struct ipc_ctl_reply *out)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_u32(&c, &out->code) == -1 ||
	    ipc_get_str(&c, &out->message, &out->msglen, IPC_ERRMSG_MAX * 4) == -1 ||
	    ipc_get_any(&c, &out->data) == -1 || ipc_end(&c) == -1)
		return -1;
	return 0;
}

/* ---- validators: one per IPC_MSG_LIST symbol -------------------------- */

static int
val_IMSG_HELLO(const msgpack_object *body)
{
	struct ipc_hello h;

	return ipc_dec_hello(body, &h);
}

static int
val_IMSG_READY(const msgpack_object *body)
{
	struct ipc_ready r;

	return ipc_dec_ready(body, &r);
}

static int
val_IMSG_SHUTDOWN(const msgpack_object *body)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	return ipc_end(&c);
}

static int
val_IMSG_LOG_VERBOSE(const msgpack_object *body)
{
	uint32_t level;

	return ipc_dec_log_verbose(body, &level);
}

static int
val_IMSG_DB_OP(const msgpack_object *body)
{
	struct ipc_db_op op;

	return ipc_dec_db_op(body, &op);
}

static int
val_IMSG_DB_RESULT(const msgpack_object *body)
{
	struct ipc_db_result r;

	return ipc_dec_db_result(body, &r);
}

static int
val_IMSG_LISTEN_FD(const msgpack_object *body)
{
	char addr[IPC_ADDR_MAX + 1];

	return ipc_dec_listen_fd(body, addr, sizeof(addr));
}

static int
val_IMSG_CHUNK(const msgpack_object *body)
{
	struct ipc_chunk ck;

	return ipc_dec_chunk(body, &ck);
}

static int
val_IMSG_CTL_REQUEST(const msgpack_object *body)
{
	struct ipc_ctl_request r;

	return ipc_dec_ctl_request(body, &r);
}

static int
val_IMSG_CTL_REPLY(const msgpack_object *body)
{
	struct ipc_ctl_reply r;

	return ipc_dec_ctl_reply(body, &r);
}

/* ---- catalog ---------------------------------------------------------- */

/* Indexed by type number; IMSG__MAX is one past the last number only when
 * numbers increase down the list, which this assertion enforces. */
#define IPC_X_ASSERT(sym, num, snd, rcv, fl)                                                \
	_Static_assert((num) > 0 && (num) < IMSG__MAX, #sym " is numbered out of order");
IPC_MSG_LIST(IPC_X_ASSERT)
#undef IPC_X_ASSERT

static const struct ipc_msg_info catalog[IMSG__MAX] = {
#define IPC_X_INFO(sym, num, snd, rcv, fl) [num] = { num, #sym, snd, rcv, fl, val_##sym },
	IPC_MSG_LIST(IPC_X_INFO)
#undef IPC_X_INFO
};

const struct ipc_msg_info *
ipc_msg_lookup(uint32_t type)
{
	if (type >= IMSG__MAX || catalog[type].name == NULL)
		return NULL;
	return &catalog[type];
}

const char *
ipc_msg_name(uint32_t type)
{
	const struct ipc_msg_info *mi = ipc_msg_lookup(type);

	return mi != NULL ? mi->name : "unknown";
}

int
ipc_msg_check(const struct ipc_msg *m, enum ipc_role from, enum ipc_role to, int has_fd,
    const char **err)
{
	const struct ipc_msg_info *mi;

	if ((mi = ipc_msg_lookup(m->type)) == NULL) {
		*err = "unknown message type";
		return -1;
	}
	if ((unsigned)from >= ROLE__COUNT || (mi->senders & ROLE_BIT(from)) == 0) {
		*err = "the sender's role may not send this message type";
		return -1;
	}
	if ((unsigned)to >= ROLE__COUNT || (mi->receivers & ROLE_BIT(to)) == 0) {
		*err = "the receiver's role may not receive this message type";
		return -1;
	}
	if (has_fd && !(mi->flags & IPC_F_FD)) {
		*err = "unexpected descriptor for a message type that carries none";
		return -1;
	}
	if (!has_fd && (mi->flags & IPC_F_FD)) {
		*err = "descriptor missing for a message type that carries one";
		return -1;
	}
	if (m->body == NULL || mi->validate(m->body) == -1) {
		*err = "body failed validation for its message type";
		return -1;
	}
	return 0;
}
