/*
 * The message catalog built from IPC_MSG_LIST, role names, and one typed
 * decoder per body; the catalog's validators are those decoders with the
 * result thrown away, so what is checked and what is decoded cannot drift.
 */
#include "ipc_msg.h"

#include <stdlib.h>
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
	[ROLE_EGRESS] = "egress",
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
	/* "" only for the proxy, which is not chrooted (DESIGN 1) */
	if (out->role >= ROLE__COUNT || (out->chroot[0] != '/' &&
	    !(out->chroot[0] == '\0' && out->role == ROLE_PROXY)))
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
ipc_dec_metrics(const msgpack_object *body, uint64_t *v)
{
	struct ipc_cur c, a;
	size_t i;

	ipc_cur_init(&c, body);
	if (ipc_get_array(&c, &a, IPC_METRIC__COUNT) == -1 || a.n != IPC_METRIC__COUNT)
		return -1;
	for (i = 0; i < IPC_METRIC__COUNT; i++)
		if (ipc_get_u64(&a, &v[i]) == -1)
			return -1;
	if (ipc_end(&a) == -1 || ipc_end(&c) == -1)
		return -1;
	return 0;
}

int
ipc_dec_metrics_get(const msgpack_object *body)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	return ipc_end(&c);
}

int
ipc_is_uuid(const char *s, size_t len)
{
	size_t i;

	if (len != IPC_UUID_LEN)
		return 0;
	for (i = 0; i < len; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return 0;
		} else if (strchr("0123456789abcdef", s[i]) == NULL || s[i] == '\0')
			return 0;
	}
	return 1;
}

int
ipc_dec_run_wake(const msgpack_object *body, char run[IPC_UUID_LEN + 1], uint64_t *seq)
{
	struct ipc_cur c;
	const char *s;
	size_t len;

	ipc_cur_init(&c, body);
	if (ipc_get_str(&c, &s, &len, IPC_UUID_LEN) == -1 || ipc_get_u64(&c, seq) == -1 ||
	    ipc_end(&c) == -1)
		return -1;
	if (len == 0) {
		if (*seq != 0)
			return -1;
	} else if (!ipc_is_uuid(s, len) || *seq == 0)
		return -1;
	memcpy(run, s, len);
	run[len] = '\0';
	return 0;
}

/* One canonical UUID string into out. */
static int
ipc_get_uuid(struct ipc_cur *c, char out[IPC_UUID_LEN + 1])
{
	const char *s;
	size_t len;

	if (ipc_get_str(c, &s, &len, IPC_UUID_LEN) == -1 || !ipc_is_uuid(s, len))
		return -1;
	memcpy(out, s, len);
	out[len] = '\0';
	return 0;
}

int
ipc_dec_auth_flush(const msgpack_object *body)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	return ipc_end(&c);
}

/* At most max lower-case hex digits, NUL-terminated into out (max + 1
 * bytes); their number in *len. */
static int
ipc_get_hex(struct ipc_cur *c, char *out, size_t max, size_t *len)
{
	const char *s;
	size_t i;

	if (ipc_get_str(c, &s, len, max) == -1)
		return -1;
	for (i = 0; i < *len; i++)
		if (strchr("0123456789abcdef", s[i]) == NULL || s[i] == '\0')
			return -1;
	memcpy(out, s, *len);
	out[*len] = '\0';
	return 0;
}

/* A commit id in hex: 40 or 64 lower-case digits, NUL-terminated into out. */
static int
ipc_get_oid(struct ipc_cur *c, char out[65])
{
	size_t len;

	return ipc_get_hex(c, out, 64, &len) == -1 || (len != 40 && len != 64) ? -1 : 0;
}

/* An absolute path of 1..IPC_GIT_PATH_MAX bytes. */
static int
ipc_get_abspath(struct ipc_cur *c, char *out, size_t outsz)
{
	struct ipc_cur probe = *c;
	const char *s;
	size_t len;

	if (ipc_get_str(&probe, &s, &len, IPC_GIT_PATH_MAX) == -1 || len == 0 || s[0] != '/')
		return -1;
	return ipc_get_cstr(c, out, outsz);
}

/* "" or an absolute path of 1..IPC_GIT_PATH_MAX bytes. */
static int
ipc_get_abspath_opt(struct ipc_cur *c, char *out, size_t outsz)
{
	struct ipc_cur probe = *c;
	const char *s;
	size_t len;

	if (ipc_get_str(&probe, &s, &len, IPC_GIT_PATH_MAX) == -1 || (len > 0 && s[0] != '/'))
		return -1;
	return ipc_get_cstr(c, out, outsz);
}

/* A URL of 1..IPC_GIT_URL_MAX bytes (the helper checks its form). */
static int
ipc_get_git_url(struct ipc_cur *c, char *out, size_t outsz)
{
	struct ipc_cur probe = *c;
	const char *s;
	size_t len;

	if (ipc_get_str(&probe, &s, &len, IPC_GIT_URL_MAX) == -1 || len == 0)
		return -1;
	return ipc_get_cstr(c, out, outsz);
}

/* A ref as a template names it: 0..IPC_GIT_REF_MAX printable bytes without
 * a space, not starting with '-' (the helper checks the rest). */
static int
ipc_get_git_ref(struct ipc_cur *c, char out[IPC_GIT_REF_MAX + 1])
{
	const char *s;
	size_t len, i;

	if (ipc_get_str(c, &s, &len, IPC_GIT_REF_MAX) == -1 || (len > 0 && s[0] == '-'))
		return -1;
	for (i = 0; i < len; i++)
		if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
			return -1;
	memcpy(out, s, len);
	out[len] = '\0';
	return 0;
}

int
ipc_dec_git_fetch(const msgpack_object *body, struct ipc_git_fetch *out)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_git_url(&c, out->url, sizeof(out->url)) == -1 ||
	    ipc_get_bin(&c, &out->token, &out->toklen, IPC_SECRET_MAX) == -1 ||
	    ipc_get_abspath(&c, out->mirror, sizeof(out->mirror)) == -1 || ipc_end(&c) == -1)
		return -1;
	return 0;
}

int
ipc_dec_git_checkout(const msgpack_object *body, struct ipc_git_checkout *out)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_abspath(&c, out->mirror, sizeof(out->mirror)) == -1 ||
	    ipc_get_git_ref(&c, out->ref) == -1 ||
	    ipc_get_abspath(&c, out->workspace, sizeof(out->workspace)) == -1 ||
	    ipc_get_git_url(&c, out->url, sizeof(out->url)) == -1 || ipc_end(&c) == -1)
		return -1;
	return 0;
}

int
ipc_dec_git_diff(const msgpack_object *body, struct ipc_git_diff *out)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_abspath(&c, out->gitdir, sizeof(out->gitdir)) == -1 ||
	    ipc_get_abspath(&c, out->workspace, sizeof(out->workspace)) == -1 ||
	    ipc_get_oid(&c, out->base) == -1 || ipc_get_u64(&c, &out->cap) == -1 ||
	    ipc_get_abspath_opt(&c, out->stats, sizeof(out->stats)) == -1 ||
	    ipc_end(&c) == -1 || out->cap == 0)
		return -1;
	return 0;
}

/* A run status name: 1..IPC_STATUS_MAX of [a-z_]. */
static int
ipc_get_status(struct ipc_cur *c, char out[IPC_STATUS_MAX + 1])
{
	const char *s;
	size_t len, i;

	if (ipc_get_str(c, &s, &len, IPC_STATUS_MAX) == -1 || len == 0)
		return -1;
	for (i = 0; i < len; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || s[i] == '_'))
			return -1;
	memcpy(out, s, len);
	out[len] = '\0';
	return 0;
}

int
ipc_dec_engine_wake(const msgpack_object *body, uint32_t *kind, char run[IPC_UUID_LEN + 1])
{
	struct ipc_cur c;
	const char *s;
	size_t len;
	uint64_t k;

	ipc_cur_init(&c, body);
	if (ipc_get_u64(&c, &k) == -1 || k > IPC_WAKE_CANCEL ||
	    ipc_get_str(&c, &s, &len, IPC_UUID_LEN) == -1 || ipc_end(&c) == -1 ||
	    (len != 0 && !ipc_is_uuid(s, len)))
		return -1;
	*kind = (uint32_t)k;
	memcpy(run, s, len);
	run[len] = '\0';
	return 0;
}

int
ipc_dec_run_start(const msgpack_object *body, char run[IPC_UUID_LEN + 1],
    char previous[IPC_STATUS_MAX + 1])
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_uuid(&c, run) == -1 || ipc_get_status(&c, previous) == -1 ||
	    ipc_end(&c) == -1)
		return -1;
	return 0;
}

/* [run uuid, n u32 <= max] */
static int
ipc_dec_run_u32(const msgpack_object *body, char run[IPC_UUID_LEN + 1], uint32_t *out,
    uint32_t max)
{
	struct ipc_cur c;
	uint64_t v;

	ipc_cur_init(&c, body);
	if (ipc_get_uuid(&c, run) == -1 || ipc_get_u64(&c, &v) == -1 || v > max ||
	    ipc_end(&c) == -1)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

int
ipc_dec_run_stop(const msgpack_object *body, char run[IPC_UUID_LEN + 1], uint32_t *reason)
{
	return ipc_dec_run_u32(body, run, reason, IPC_STOP_LEASE);
}

int
ipc_dec_run_ended(const msgpack_object *body, char run[IPC_UUID_LEN + 1], uint32_t *outcome)
{
	return ipc_dec_run_u32(body, run, outcome, IPC_RUN__MAX);
}

int
ipc_dec_runner_start(const msgpack_object *body, struct ipc_runner_start *out)
{
	struct ipc_cur c;
	const char *s;
	size_t len, i;

	ipc_cur_init(&c, body);
	if (ipc_get_uuid(&c, out->run) == -1 ||
	    ipc_get_str(&c, &s, &len, IPC_INSTANCE_MAX) == -1 || len == 0)
		return -1;
	for (i = 0; i < len; i++)
		if (s[i] <= ' ' || s[i] > '~')
			return -1;
	memcpy(out->owner, s, len);
	out->owner[len] = '\0';
	if (ipc_get_status(&c, out->previous) == -1 || ipc_get_u32(&c, &out->exec_max_ms) == -1 ||
	    ipc_get_u64(&c, &out->step_budget) == -1 || ipc_end(&c) == -1 ||
	    out->exec_max_ms == 0 || out->step_budget == 0 || out->step_budget > IPC_USD_MICROS_MAX)
		return -1;
	return 0;
}

/* ---- model calls ------------------------------------------------------- */

/* 1 to max of [a-z0-9][a-z0-9_-]*: a provider's or an MCP server's name. */
static int
ipc_is_lname(const char *s, size_t len, size_t max)
{
	size_t i;

	if (len == 0 || len > max || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9')))
		return 0;
	for (i = 1; i < len; i++)
		if (s[i] == '\0' || strchr("abcdefghijklmnopqrstuvwxyz0123456789_-", s[i]) == NULL)
			return 0;
	return 1;
}

int
ipc_is_provider_name(const char *s, size_t len)
{
	return ipc_is_lname(s, len, IPC_PROVIDER_NAME_MAX);
}

int
ipc_is_model_name(const char *s, size_t len)
{
	static const char alnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
	size_t i;

	if (len == 0 || len > IPC_MODEL_NAME_MAX || s[0] == '\0' || strchr(alnum, s[0]) == NULL)
		return 0;
	for (i = 1; i < len; i++)
		if (s[i] == '\0' || (strchr(alnum, s[i]) == NULL && strchr("._:/@-", s[i]) == NULL))
			return 0;
	return 1;
}

/* An MCP server's name: [a-z0-9][a-z0-9_-]{0,63}, as mcp add takes it. */
static int
ipc_is_mcp_name(const char *s, size_t len)
{
	return ipc_is_lname(s, len, IPC_MCP_NAME_MAX);
}

/* A string that passes is_name (or is empty, when empty_ok) into out. */
static int
ipc_get_name(struct ipc_cur *c, char *out, size_t max, int (*is_name)(const char *, size_t),
    int empty_ok)
{
	const char *s;
	size_t len;

	if (ipc_get_str(c, &s, &len, max) == -1 || (len == 0 && !empty_ok) ||
	    (len > 0 && !is_name(s, len)))
		return -1;
	memcpy(out, s, len);
	out[len] = '\0';
	return 0;
}

/* Bytes that are all printable ASCII (no space, quote or backslash when
 * strict: a credential that must survive a header and a JSON string). */
static int
ipc_printable(const uint8_t *p, size_t len, int strict)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] < (strict ? 0x21 : 0x20) || p[i] > 0x7e ||
		    (strict && (p[i] == '"' || p[i] == '\\')))
			return 0;
	return 1;
}

static int
ipc_get_model(struct ipc_cur *c, struct ipc_model *m)
{
	struct ipc_cur sub;
	int i;

	if (ipc_get_array(c, &sub, 5) == -1 || sub.n != 5 ||
	    ipc_get_name(&sub, m->name, IPC_MODEL_NAME_MAX, ipc_is_model_name, 0) == -1)
		return -1;
	for (i = 0; i < 4; i++)
		if (ipc_get_u64(&sub, &m->price[i]) == -1 || m->price[i] > IPC_PRICE_MAX)
			return -1;
	return ipc_end(&sub);
}

/* http://HOST... or https://HOST... */
static int
ipc_is_http_url(const char *s, size_t len)
{
	return (len > 7 && memcmp(s, "http://", 7) == 0) ||
	    (len > 8 && memcmp(s, "https://", 8) == 0);
}

static int
ipc_get_provider(struct ipc_cur *c, struct ipc_provider *p)
{
	struct ipc_cur sub, models;
	const char *url;
	size_t len;

	if (ipc_get_array(c, &sub, 9) == -1 || sub.n != 9 ||
	    ipc_get_name(&sub, p->name, IPC_PROVIDER_NAME_MAX, ipc_is_provider_name, 0) == -1 ||
	    ipc_get_u32(&sub, &p->kind) == -1 || p->kind > 1 ||
	    ipc_get_str(&sub, &url, &len, IPC_URL_MAX) == -1 ||
	    !ipc_printable((const uint8_t *)url, len, 1) || !ipc_is_http_url(url, len) ||
	    ipc_get_bin(&sub, &p->key, &p->keylen, IPC_SECRET_MAX) == -1 ||
	    !ipc_printable(p->key, p->keylen, 1) || ipc_get_u32(&sub, &p->timeout_s) == -1 ||
	    p->timeout_s < 1 || p->timeout_s > 3600 || ipc_get_u32(&sub, &p->retries) == -1 ||
	    p->retries > 10 || ipc_get_bool(&sub, &p->stream) == -1 ||
	    ipc_get_bool(&sub, &p->max_completion) == -1 ||
	    (p->max_completion && p->kind != 1) ||
	    ipc_get_array(&sub, &models, IPC_MODELS_MAX) == -1 || models.n == 0 ||
	    ipc_end(&sub) == -1)
		return -1;
	memcpy(p->base_url, url, len);
	p->base_url[len] = '\0';
	for (p->nmodels = 0; p->nmodels < models.n; p->nmodels++)
		if (ipc_get_model(&models, &p->models[p->nmodels]) == -1)
			return -1;
	return ipc_end(&models);
}

/* Whether provider n repeats an earlier one's name, or names a model twice:
 * a lookup would silently take the first. */
static int
ipc_provider_dup(const struct ipc_provider *p, size_t n)
{
	size_t i, j;

	for (i = 0; i < n; i++)
		if (strcmp(p[i].name, p[n].name) == 0)
			return 1;
	for (i = 0; i < p[n].nmodels; i++)
		for (j = 0; j < i; j++)
			if (strcmp(p[n].models[i].name, p[n].models[j].name) == 0)
				return 1;
	return 0;
}

int
ipc_dec_proxy_conf(const msgpack_object *body, struct ipc_provider *out, size_t *n)
{
	struct ipc_cur c, list;

	ipc_cur_init(&c, body);
	if (ipc_get_array(&c, &list, IPC_PROVIDERS_MAX) == -1 || ipc_end(&c) == -1)
		return -1;
	for (*n = 0; *n < list.n; (*n)++)
		if (ipc_get_provider(&list, &out[*n]) == -1 || ipc_provider_dup(out, *n))
			return -1;
	return ipc_end(&list);
}

int
ipc_dec_proxy_channel(const msgpack_object *body, char run[IPC_UUID_LEN + 1])
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_uuid(&c, run) == -1 || ipc_end(&c) == -1)
		return -1;
	return 0;
}

int
ipc_dec_runner_proxy(const msgpack_object *body, struct ipc_runner_proxy *out)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_name(&c, out->provider, IPC_PROVIDER_NAME_MAX, ipc_is_provider_name, 1) == -1 ||
	    ipc_get_name(&c, out->model, IPC_MODEL_NAME_MAX, ipc_is_model_name, 1) == -1 ||
	    ipc_get_u32(&c, &out->max_tokens) == -1 || ipc_get_u32(&c, &out->tool_output_max) == -1 ||
	    ipc_get_u32(&c, &out->mcp_tools_max) == -1 ||
	    ipc_get_u32(&c, &out->mcp_tool_bytes_max) == -1 ||
	    out->mcp_tools_max > IPC_MCP_TOOLS_MAX || out->mcp_tool_bytes_max < 1024 ||
	    out->mcp_tool_bytes_max > IPC_MCP_TOOL_BYTES_MAX ||
	    ipc_end(&c) == -1 || out->max_tokens == 0 || out->tool_output_max < 1024 ||
	    out->tool_output_max > 1048576 || (out->provider[0] == '\0') != (out->model[0] == '\0'))
		return -1;
	return 0;
}

/* A step id: [a-z0-9_-]{1,64}, as templates name steps. */
static int
ipc_get_step_id(struct ipc_cur *c, char out[65])
{
	const char *s;
	size_t len, i;

	if (ipc_get_str(c, &s, &len, 64) == -1 || len == 0)
		return -1;
	for (i = 0; i < len; i++)
		if (s[i] == '\0' || strchr("abcdefghijklmnopqrstuvwxyz0123456789_-", s[i]) == NULL)
			return -1;
	memcpy(out, s, len);
	out[len] = '\0';
	return 0;
}

int
ipc_dec_model_call(const msgpack_object *body, struct ipc_model_call *out)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_step_id(&c, out->step) == -1 || ipc_get_u32(&c, &out->attempt) == -1 ||
	    out->attempt == 0 ||
	    ipc_get_name(&c, out->provider, IPC_PROVIDER_NAME_MAX, ipc_is_provider_name, 0) == -1 ||
	    ipc_get_name(&c, out->model, IPC_MODEL_NAME_MAX, ipc_is_model_name, 0) == -1 ||
	    ipc_get_u32(&c, &out->max_tokens) == -1 || out->max_tokens == 0 ||
	    ipc_get_u64(&c, &out->limit) == -1 || out->limit > IPC_USD_MICROS_MAX ||
	    ipc_get_str(&c, &out->request, &out->reqlen, SIZE_MAX) == -1 || out->reqlen == 0 ||
	    ipc_end(&c) == -1)
		return -1;
	return 0;
}

int
ipc_dec_model_reply(const msgpack_object *body, struct ipc_model_reply *out)
{
	struct ipc_cur c, u;
	int i;

	ipc_cur_init(&c, body);
	if (ipc_get_u32(&c, &out->code) == -1 || out->code >= IPC_MODEL__MAX ||
	    ipc_get_str(&c, &out->error, &out->errlen, IPC_ERRMSG_MAX) == -1 ||
	    (out->code == IPC_MODEL_OK && out->errlen > 0) ||
	    ipc_get_u64(&c, &out->cost) == -1 || out->cost > IPC_USD_MICROS_MAX ||
	    ipc_get_u64(&c, &out->worst) == -1 || out->worst > IPC_USD_MICROS_MAX ||
	    ipc_get_array(&c, &u, 4) == -1 || u.n != 4)
		return -1;
	for (i = 0; i < 4; i++)
		if (ipc_get_u64(&u, &out->usage[i]) == -1)
			return -1;
	if (ipc_get_u32(&c, &out->stop) == -1 || out->stop > 3 ||
	    ipc_get_str(&c, &out->content, &out->contentlen, SIZE_MAX) == -1 || ipc_end(&c) == -1 ||
	    (out->code == IPC_MODEL_OK) != (out->contentlen > 0))
		return -1;
	return 0;
}

int
ipc_dec_engine_conf(const msgpack_object *body, struct ipc_engine_conf *out)
{
	struct ipc_cur c;
	size_t len;

	ipc_cur_init(&c, body);
	if (ipc_get_u32(&c, &out->concurrency) == -1 || ipc_get_u32(&c, &out->lease) == -1 ||
	    ipc_get_u32(&c, &out->sweep) == -1 ||
	    ipc_get_hex(&c, out->host, IPC_HOST_ID_LEN, &len) == -1 ||
	    ipc_get_u32(&c, &out->host_grace) == -1 || ipc_end(&c) == -1 ||
	    out->concurrency > 1024 || out->lease < 2 || out->lease > 3600 || out->sweep < 1 ||
	    out->sweep > 3600 || len != IPC_HOST_ID_LEN || out->host_grace < 60 ||
	    out->host_grace > 31536000)
		return -1;
	return 0;
}

int
ipc_dec_httpd_conf(const msgpack_object *body, struct ipc_httpd_conf *out)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_cstr(&c, out->public_url, sizeof(out->public_url)) == -1 ||
	    ipc_get_cstr(&c, out->ui_dir, sizeof(out->ui_dir)) == -1 ||
	    ipc_get_u32(&c, &out->session_lifetime) == -1 ||
	    ipc_get_u32(&c, &out->user_rate) == -1 || ipc_get_u32(&c, &out->user_burst) == -1 ||
	    ipc_get_u64(&c, &out->sse_queued_max) == -1 || ipc_end(&c) == -1 ||
	    out->sse_queued_max < 1024 * 1024 || out->sse_queued_max > (16ull << 30) || out->ui_dir[0] != '/' || out->session_lifetime < 60 ||
	    out->session_lifetime > 2592000 || out->user_rate > 100000 || out->user_burst < 1 ||
	    out->user_burst > 1000000)
		return -1;
	return 0;
}

int
ipc_dec_artifact_put(const msgpack_object *body, const uint8_t **sha, const uint8_t **data,
    size_t *len)
{
	struct ipc_cur c;
	size_t slen;

	ipc_cur_init(&c, body);
	if (ipc_get_bin(&c, sha, &slen, 32) == -1 || slen != 32 ||
	    ipc_get_bin(&c, data, len, SIZE_MAX) == -1 || *len == 0 || ipc_end(&c) == -1)
		return -1;
	return 0;
}

int
ipc_dec_patch_make(const msgpack_object *body, uint64_t *cap)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_u64(&c, cap) == -1 || *cap == 0 || ipc_end(&c) == -1)
		return -1;
	return 0;
}

int
ipc_dec_runner_reply(const msgpack_object *body, struct ipc_runner_reply *out)
{
	struct ipc_cur c;
	size_t slen;

	ipc_cur_init(&c, body);
	if (ipc_get_bool(&c, &out->ok) == -1 ||
	    ipc_get_str(&c, &out->error, &out->errlen, IPC_ERRMSG_MAX) == -1 ||
	    ipc_get_u64(&c, &out->size) == -1 || ipc_get_bin(&c, &out->sha256, &slen, 32) == -1 ||
	    (slen != 0 && slen != 32) || ipc_get_bin(&c, &out->data, &out->len, SIZE_MAX) == -1 ||
	    ipc_end(&c) == -1 || out->len > out->size || (out->ok && out->size > 0 && slen != 32))
		return -1;
	if (slen == 0)
		out->sha256 = NULL;
	return 0;
}

int
ipc_dec_runner_cancel(const msgpack_object *body)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	return ipc_end(&c);
}

int
ipc_dec_runner_done(const msgpack_object *body, uint32_t *outcome)
{
	struct ipc_cur c;
	uint64_t v;

	ipc_cur_init(&c, body);
	if (ipc_get_u64(&c, &v) == -1 || v > IPC_RUN__MAX || ipc_end(&c) == -1)
		return -1;
	*outcome = (uint32_t)v;
	return 0;
}

int
ipc_dec_git_result(const msgpack_object *body, struct ipc_git_result *out)
{
	struct ipc_cur c;
	size_t len;

	ipc_cur_init(&c, body);
	if (ipc_get_bool(&c, &out->ok) == -1 ||
	    ipc_get_str(&c, &out->error, &out->errlen, IPC_ERRMSG_MAX) == -1 ||
	    ipc_get_hex(&c, out->base, 64, &len) == -1 || ipc_get_u64(&c, &out->size) == -1 ||
	    ipc_get_git_ref(&c, out->ref) == -1 || ipc_end(&c) == -1)
		return -1;
	if (out->ok)
		return len != 0 && len != 40 && len != 64 ? -1 : 0;
	return len != 0 || out->ref[0] != '\0' ? -1 : 0;
}

/* ---- pull requests ------------------------------------------------------ */

/* Text of min..max bytes without NUL (a commit message, a title, a body);
 * it points into the message. */
static int
ipc_get_text(struct ipc_cur *c, const char **s, size_t *len, size_t min, size_t max)
{
	if (ipc_get_str(c, s, len, max) == -1 || *len < min ||
	    (*len > 0 && memchr(*s, '\0', *len) != NULL))
		return -1;
	return 0;
}

/* A branch: a ref of 1.. bytes (the helper and the database check the rest). */
static int
ipc_get_branch(struct ipc_cur *c, char out[IPC_GIT_REF_MAX + 1])
{
	return ipc_get_git_ref(c, out) == -1 || out[0] == '\0' ? -1 : 0;
}

/* A lease: "" or a commit id. */
static int
ipc_get_lease(struct ipc_cur *c, char out[65])
{
	size_t len;

	return ipc_get_hex(c, out, 64, &len) == -1 || (len != 0 && len != 40 && len != 64) ? -1
	                                                                                  : 0;
}

/* Printable ASCII but '<', '>', of 1..max bytes (an author's name or
 * address), or of 0..max of [A-Za-z0-9._-] when user. */
static int
ipc_get_ident(struct ipc_cur *c, char *out, size_t max, int user)
{
	const char *s;
	size_t len, i;

	if (ipc_get_str(c, &s, &len, max) == -1 || (!user && len == 0))
		return -1;
	for (i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (user ? strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-",
		                  ch) == NULL || ch == '\0'
		         : ch < 0x20 || ch >= 0x7f || ch == '<' || ch == '>')
			return -1;
	}
	memcpy(out, s, len);
	out[len] = '\0';
	return 0;
}

int
ipc_dec_pr_push(const msgpack_object *body, struct ipc_pr_push *out)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_branch(&c, out->branch) == -1 || ipc_get_lease(&c, out->lease) == -1 ||
	    ipc_get_u64(&c, &out->when) == -1 ||
	    ipc_get_text(&c, &out->message, &out->messagelen, 1, IPC_PR_MESSAGE_MAX) == -1 ||
	    ipc_end(&c) == -1)
		return -1;
	return 0;
}

int
ipc_dec_pr_open(const msgpack_object *body, struct ipc_pr_open *out)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_branch(&c, out->head) == -1 || ipc_get_branch(&c, out->base) == -1 ||
	    ipc_get_text(&c, &out->title, &out->titlelen, 1, IPC_PR_TITLE_MAX) == -1 ||
	    ipc_get_text(&c, &out->body, &out->bodylen, 0, IPC_PR_BODY_MAX) == -1 ||
	    ipc_get_bool(&c, &out->draft) == -1 || ipc_get_u64(&c, &out->number) == -1 ||
	    ipc_end(&c) == -1)
		return -1;
	return 0;
}

int
ipc_dec_pr_result(const msgpack_object *body, struct ipc_pr_result *out)
{
	struct ipc_cur c;
	uint64_t flags;

	ipc_cur_init(&c, body);
	if (ipc_get_bool(&c, &out->ok) == -1 ||
	    ipc_get_str(&c, &out->error, &out->errlen, IPC_ERRMSG_MAX) == -1 ||
	    ipc_get_lease(&c, out->commit) == -1 || ipc_get_u64(&c, &flags) == -1 ||
	    flags > IPC_PR_F_ALL || ipc_get_u64(&c, &out->number) == -1 ||
	    ipc_get_cstr(&c, out->url, sizeof(out->url)) == -1 ||
	    ipc_get_cstr(&c, out->note, sizeof(out->note)) == -1 || ipc_end(&c) == -1)
		return -1;
	out->flags = (uint32_t)flags;
	/* a failure carries nothing else; a pull request has a number and
	 * an https URL together */
	if (!out->ok && (out->commit[0] != '\0' || flags != 0 || out->number != 0 ||
	                 out->url[0] != '\0'))
		return -1;
	if ((out->number == 0) != (out->url[0] == '\0') ||
	    (out->url[0] != '\0' && strncmp(out->url, "https://", 8) != 0))
		return -1;
	return 0;
}

int
ipc_dec_git_push(const msgpack_object *body, struct ipc_git_push *out)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_git_url(&c, out->url, sizeof(out->url)) == -1 ||
	    ipc_get_bin(&c, &out->token, &out->toklen, IPC_SECRET_MAX) == -1 ||
	    ipc_get_ident(&c, out->username, IPC_PR_USER_MAX, 1) == -1 ||
	    ipc_get_abspath(&c, out->mirror, sizeof(out->mirror)) == -1 ||
	    ipc_get_abspath(&c, out->workspace, sizeof(out->workspace)) == -1 ||
	    ipc_get_oid(&c, out->base) == -1 || ipc_get_u64(&c, &out->cap) == -1 ||
	    out->cap == 0 || ipc_get_ident(&c, out->author_name, IPC_PR_AUTHOR_MAX, 0) == -1 ||
	    ipc_get_ident(&c, out->author_email, IPC_PR_AUTHOR_MAX, 0) == -1 ||
	    ipc_get_u64(&c, &out->when) == -1 ||
	    ipc_get_text(&c, &out->message, &out->messagelen, 1, IPC_PR_MESSAGE_MAX) == -1 ||
	    ipc_get_branch(&c, out->branch) == -1 || ipc_get_lease(&c, out->lease) == -1 ||
	    ipc_get_abspath_opt(&c, out->stats, sizeof(out->stats)) == -1 || ipc_end(&c) == -1)
		return -1;
	return 0;
}

int
ipc_dec_git_pr(const msgpack_object *body, struct ipc_git_pr *out)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_u32(&c, &out->forge) == -1 ||
	    (out->forge != IPC_FORGE_GITHUB && out->forge != IPC_FORGE_GITLAB) ||
	    ipc_get_cstr(&c, out->api_url, sizeof(out->api_url)) == -1 ||
	    strncmp(out->api_url, "https://", 8) != 0 ||
	    ipc_get_git_url(&c, out->url, sizeof(out->url)) == -1 ||
	    ipc_get_bin(&c, &out->token, &out->toklen, IPC_SECRET_MAX) == -1 ||
	    ipc_get_branch(&c, out->head) == -1 || ipc_get_branch(&c, out->base) == -1 ||
	    ipc_get_text(&c, &out->title, &out->titlelen, 1, IPC_PR_TITLE_MAX) == -1 ||
	    ipc_get_text(&c, &out->body, &out->bodylen, 0, IPC_PR_BODY_MAX) == -1 ||
	    ipc_get_bool(&c, &out->draft) == -1 || ipc_get_u64(&c, &out->number) == -1 ||
	    ipc_end(&c) == -1)
		return -1;
	return 0;
}

int
ipc_dec_repo_seal(const msgpack_object *body, const uint8_t **token, size_t *len)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_bin(&c, token, len, IPC_SECRET_MAX) == -1 || ipc_end(&c) == -1 || *len == 0)
		return -1;
	return 0;
}

int
ipc_dec_repo_sealed(const msgpack_object *body, const uint8_t **nonce, const uint8_t **ct,
                    size_t *ctlen)
{
	struct ipc_cur c;
	size_t nlen;

	ipc_cur_init(&c, body);
	if (ipc_get_bin(&c, nonce, &nlen, 24) == -1 ||
	    ipc_get_bin(&c, ct, ctlen, IPC_SECRET_MAX + 16) == -1 || ipc_end(&c) == -1 ||
	    nlen != 24 || *ctlen <= 16)
		return -1;
	return 0;
}

int
ipc_dec_artifact_open(const msgpack_object *body, char user[IPC_UUID_LEN + 1],
                      char art[IPC_UUID_LEN + 1])
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_uuid(&c, user) == -1 || ipc_get_uuid(&c, art) == -1 || ipc_end(&c) == -1)
		return -1;
	return 0;
}

int
ipc_dec_artifact_fd(const msgpack_object *body, uint64_t *size)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_u64(&c, size) == -1 || ipc_end(&c) == -1 || *size == 0 ||
	    *size > INT64_MAX)
		return -1;
	return 0;
}

int
ipc_dec_artifact_err(const msgpack_object *body, uint32_t *status)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_u32(&c, status) == -1 || ipc_end(&c) == -1 ||
	    (*status != 404 && *status != 500 && *status != 503))
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

int
ipc_dec_ctl_sandbox(const msgpack_object *body, char *id, size_t idsz)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_cstr(&c, id, idsz) == -1 || ipc_end(&c) == -1)
		return -1;
	return id[0] != '\0' ? 0 : -1;
}

int
ipc_dec_sbx_hello(const msgpack_object *body, struct ipc_sbx_hello *out)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_u32(&c, &out->proto) == -1 || ipc_get_u32(&c, &out->verbose) == -1 ||
	    ipc_get_u32(&c, &out->access) == -1 || ipc_get_u64(&c, &out->file_max) == -1 ||
	    ipc_get_u64(&c, &out->output_max) == -1 ||
	    ipc_get_u32(&c, &out->timeout_max_ms) == -1 ||
	    ipc_get_u64(&c, &out->artifact_max) == -1 ||
	    ipc_get_cstr(&c, out->id, sizeof(out->id)) == -1 || ipc_end(&c) == -1)
		return -1;
	if (out->verbose > 3 || out->access > 1 || out->file_max == 0 || out->output_max == 0 ||
	    out->timeout_max_ms == 0 || out->artifact_max == 0 || out->id[0] == '\0')
		return -1;
	return 0;
}

int
ipc_dec_sbx_read(const msgpack_object *body, struct ipc_sbx_read *out)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_cstr(&c, out->path, sizeof(out->path)) == -1 ||
	    ipc_get_u64(&c, &out->offset) == -1 || ipc_get_u64(&c, &out->limit) == -1 ||
	    ipc_end(&c) == -1)
		return -1;
	return 0;
}

int
ipc_dec_sbx_write(const msgpack_object *body, struct ipc_sbx_write *out)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_cstr(&c, out->path, sizeof(out->path)) == -1 ||
	    ipc_get_bin(&c, &out->data, &out->len, IPC_SBX_DATA_MAX) == -1 ||
	    ipc_get_bool(&c, &out->mkdirs) == -1 || ipc_end(&c) == -1)
		return -1;
	return 0;
}

int
ipc_dec_sbx_edit(const msgpack_object *body, struct ipc_sbx_edit *out)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_cstr(&c, out->path, sizeof(out->path)) == -1 ||
	    ipc_get_str(&c, &out->old, &out->oldlen, IPC_SBX_DATA_MAX) == -1 ||
	    ipc_get_str(&c, &out->new, &out->newlen, IPC_SBX_DATA_MAX) == -1 ||
	    ipc_get_u32(&c, &out->count) == -1 || ipc_end(&c) == -1)
		return -1;
	return 0;
}

int
ipc_dec_sbx_list(const msgpack_object *body, struct ipc_sbx_list *out)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_cstr(&c, out->path, sizeof(out->path)) == -1 ||
	    ipc_get_u32(&c, &out->max) == -1 || ipc_end(&c) == -1)
		return -1;
	return 0;
}

int
ipc_dec_sbx_glob(const msgpack_object *body, struct ipc_sbx_glob *out)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_cstr(&c, out->pattern, sizeof(out->pattern)) == -1 ||
	    ipc_get_cstr(&c, out->base, sizeof(out->base)) == -1 ||
	    ipc_get_u32(&c, &out->max) == -1 || ipc_end(&c) == -1)
		return -1;
	return out->pattern[0] != '\0' ? 0 : -1;
}

int
ipc_dec_sbx_grep(const msgpack_object *body, struct ipc_sbx_grep *out)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_cstr(&c, out->regex, sizeof(out->regex)) == -1 ||
	    ipc_get_cstr(&c, out->path, sizeof(out->path)) == -1 ||
	    ipc_get_cstr(&c, out->include, sizeof(out->include)) == -1 ||
	    ipc_get_bool(&c, &out->icase) == -1 || ipc_get_u32(&c, &out->max) == -1 ||
	    ipc_end(&c) == -1)
		return -1;
	return out->regex[0] != '\0' ? 0 : -1;
}

int
ipc_dec_sbx_stat(const msgpack_object *body, char *path, size_t pathsz)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_cstr(&c, path, pathsz) == -1 || ipc_end(&c) == -1)
		return -1;
	return 0;
}

int
ipc_dec_sbx_exec(const msgpack_object *body, struct ipc_sbx_exec *out)
{
	struct ipc_cur c, a;
	const char *s;
	size_t len;

	ipc_cur_init(&c, body);
	if (ipc_get_bool(&c, &out->shell) == -1 ||
	    ipc_get_array(&c, &out->argv, IPC_SBX_MAXARGV) == -1 ||
	    ipc_get_cstr(&c, out->cwd, sizeof(out->cwd)) == -1 ||
	    ipc_get_u32(&c, &out->timeout_ms) == -1 || ipc_end(&c) == -1)
		return -1;
	out->argc = out->argv.n;
	if (out->argc == 0 || (out->shell && out->argc != 1))
		return -1;
	a = out->argv;
	while (a.i < a.n) {
		if (ipc_get_str(&a, &s, &len, IPC_SBX_ARG_MAX) == -1 || memchr(s, '\0', len))
			return -1;
		if (a.i == 1 && len == 0) /* an empty program name */
			return -1;
	}
	return 0;
}

int
ipc_dec_sbx_artifact(const msgpack_object *body, struct ipc_sbx_artifact *out)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_cstr(&c, out->key, sizeof(out->key)) == -1 ||
	    ipc_get_cstr(&c, out->kind, sizeof(out->kind)) == -1 ||
	    ipc_get_cstr(&c, out->name, sizeof(out->name)) == -1 ||
	    ipc_get_u64(&c, &out->cap) == -1 || ipc_end(&c) == -1)
		return -1;
	if (out->key[0] == '\0' || out->kind[0] == '\0' || out->name[0] == '\0' || out->cap == 0)
		return -1;
	return 0;
}

int
ipc_dec_sbx_output(const msgpack_object *body, struct ipc_sbx_output *out)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_u32(&c, &out->stream) == -1 ||
	    ipc_get_bin(&c, &out->data, &out->len, IPC_CHUNK_SIZE) == -1 || ipc_end(&c) == -1)
		return -1;
	return out->stream <= 2 ? 0 : -1;
}

int
ipc_dec_sbx_exit(const msgpack_object *body, struct ipc_sbx_exit *out)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_u32(&c, &out->code) == -1 ||
	    ipc_get_str(&c, &out->error, &out->errlen, IPC_ERRMSG_MAX) == -1 ||
	    ipc_get_i64(&c, &out->status) == -1 || ipc_get_u32(&c, &out->signal) == -1 ||
	    ipc_get_bool(&c, &out->timed_out) == -1 || ipc_get_bool(&c, &out->truncated) == -1 ||
	    ipc_get_u64(&c, &out->duration_ms) == -1 ||
	    ipc_get_u64(&c, &out->output_bytes) == -1 || ipc_end(&c) == -1)
		return -1;
	if (out->status < -1 || out->status > 255 || out->signal > 64)
		return -1;
	return 0;
}

int
ipc_dec_sbx_result(const msgpack_object *body, struct ipc_sbx_result *out)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_u32(&c, &out->code) == -1 ||
	    ipc_get_str(&c, &out->error, &out->errlen, IPC_ERRMSG_MAX) == -1 ||
	    ipc_get_any(&c, &out->data) == -1 || ipc_end(&c) == -1)
		return -1;
	return 0;
}

/* ---- egress ----------------------------------------------------------- */

/* Every element of list a string of 1..IPC_EGRESS_TEXT_MAX bytes without a
 * NUL; the cursor is left at the list's start for the caller. */
static int
ipc_egress_texts(const struct ipc_cur *list)
{
	struct ipc_cur l = *list;
	const char *s;
	size_t len;

	while (l.i < l.n)
		if (ipc_get_str(&l, &s, &len, IPC_EGRESS_TEXT_MAX) == -1 || len == 0 ||
		    memchr(s, '\0', len) != NULL)
			return -1;
	return 0;
}

int
ipc_dec_egress_conf(const msgpack_object *body, struct ipc_egress_conf *out)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_array(&c, &out->cidrs, IPC_EGRESS_CIDRS_MAX) == -1 ||
	    ipc_egress_texts(&out->cidrs) == -1 || ipc_get_u32(&c, &out->tunnels) == -1 ||
	    ipc_get_u32(&c, &out->connect_timeout) == -1 ||
	    ipc_get_u32(&c, &out->idle_timeout) == -1 || ipc_get_u64(&c, &out->bytes) == -1 ||
	    ipc_end(&c) == -1)
		return -1;
	if (out->tunnels < 1 || out->tunnels > 1024 || out->connect_timeout < 1 ||
	    out->connect_timeout > 300 || out->idle_timeout < 1 || out->idle_timeout > 86400 ||
	    out->bytes < 1)
		return -1;
	return 0;
}

int
ipc_dec_egress_run(const msgpack_object *body, struct ipc_egress_run *out)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_uuid(&c, out->run) == -1 ||
	    ipc_get_array(&c, &out->rules, IPC_EGRESS_RULES_MAX) == -1 ||
	    ipc_egress_texts(&out->rules) == -1 || ipc_end(&c) == -1)
		return -1;
	return 0;
}

int
ipc_dec_egress_end(const msgpack_object *body, char run[IPC_UUID_LEN + 1])
{
	return ipc_dec_proxy_channel(body, run); /* the same body: [run] */
}

int
ipc_dec_egress_event(const msgpack_object *body, struct ipc_egress_event *out)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_uuid(&c, out->run) == -1 || ipc_get_u32(&c, &out->kind) == -1 ||
	    ipc_get_cstr(&c, out->host, sizeof(out->host)) == -1 ||
	    ipc_get_u32(&c, &out->port) == -1 ||
	    ipc_get_cstr(&c, out->address, sizeof(out->address)) == -1 ||
	    ipc_get_cstr(&c, out->reason, sizeof(out->reason)) == -1 ||
	    ipc_get_u64(&c, &out->up) == -1 || ipc_get_u64(&c, &out->down) == -1 ||
	    ipc_get_u64(&c, &out->ms) == -1 || ipc_get_u64(&c, &out->suppressed) == -1 ||
	    ipc_get_u64(&c, &out->suppressed_denied) == -1 || ipc_end(&c) == -1)
		return -1;
	if (out->kind >= IPC_EGRESS_EV__COUNT || out->port > 65535 ||
	    out->suppressed_denied > out->suppressed)
		return -1;
	/* only a decision carries what the rate limit left out */
	return out->suppressed == 0 || out->kind == IPC_EGRESS_EV_ALLOWED ||
	               out->kind == IPC_EGRESS_EV_DENIED
	           ? 0
	           : -1;
}

int
ipc_dec_egress_step(const msgpack_object *body, char run[IPC_UUID_LEN + 1])
{
	return ipc_dec_proxy_channel(body, run); /* the same body: [run] */
}

int
ipc_dec_egress_totals(const msgpack_object *body, struct ipc_egress_totals *out)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_uuid(&c, out->run) == -1 || ipc_get_u64(&c, &out->allowed) == -1 ||
	    ipc_get_u64(&c, &out->denied) == -1 || ipc_get_u64(&c, &out->up) == -1 ||
	    ipc_get_u64(&c, &out->down) == -1 || ipc_end(&c) == -1)
		return -1;
	return 0;
}

/* ---- MCP servers of runs --------------------------------------------- */

int
ipc_dec_mcp_start(const msgpack_object *body, struct ipc_mcp_start *out)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	/* an MCP server's name is a provider's name but longer */
	if (ipc_get_name(&c, out->server, IPC_MCP_NAME_MAX, ipc_is_mcp_name, 0) == -1 ||
	    ipc_get_step_id(&c, out->step) == -1 || ipc_end(&c) == -1)
		return -1;
	return 0;
}

int
ipc_dec_mcp_channel(const msgpack_object *body, struct ipc_mcp_channel *out)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_u32(&c, &out->what) == -1 || ipc_get_u32(&c, &out->transport) == -1 ||
	    ipc_get_u32(&c, &out->startup_ms) == -1 || ipc_get_u32(&c, &out->call_ms) == -1 ||
	    ipc_end(&c) == -1 || out->what > IPC_MCP_FD_STDERR ||
	    (out->transport != IPC_MCP_STDIO && out->transport != IPC_MCP_HTTP) ||
	    (out->transport == IPC_MCP_HTTP && out->what == IPC_MCP_FD_STDERR) ||
	    out->startup_ms < 1000 || out->startup_ms > 600000 || out->call_ms < 1000 ||
	    out->call_ms > 3600000)
		return -1;
	return 0;
}

int
ipc_dec_mcp_failed(const msgpack_object *body, struct ipc_mcp_failed *out)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_str(&c, &out->error, &out->errlen, IPC_ERRMSG_MAX) == -1 || out->errlen == 0 ||
	    ipc_get_bool(&c, &out->absent) == -1 || ipc_end(&c) == -1)
		return -1;
	return 0;
}

int
ipc_dec_mcp_stop(const msgpack_object *body)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	return ipc_end(&c);
}

/* Every element of a an array of bins of minlen..maxlen bytes, printable
 * ASCII (a header line, a credential). */
static int
ipc_bins_ok(struct ipc_cur a, size_t minlen, size_t maxlen)
{
	const uint8_t *p;
	size_t len;

	while (ipc_get_bin(&a, &p, &len, maxlen) == 0)
		if (len < minlen || !ipc_printable(p, len, 0))
			return -1;
	return ipc_end(&a);
}

int
ipc_dec_proxy_mcp(const msgpack_object *body, struct ipc_proxy_mcp *out)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	if (ipc_get_uuid(&c, out->run) == -1 ||
	    ipc_get_name(&c, out->server, IPC_MCP_NAME_MAX, ipc_is_mcp_name, 0) == -1 ||
	    ipc_get_cstr(&c, out->url, sizeof(out->url)) == -1 ||
	    (strncmp(out->url, "http://", 7) != 0 && strncmp(out->url, "https://", 8) != 0) ||
	    ipc_get_array(&c, &out->headers, IPC_MCP_HEADERS_MAX) == -1 ||
	    ipc_get_array(&c, &out->secrets, IPC_MCP_SECRETS_MAX) == -1 ||
	    ipc_get_u32(&c, &out->call_ms) == -1 || ipc_end(&c) == -1 || out->call_ms < 1000 ||
	    out->call_ms > 3600000 || ipc_bins_ok(out->headers, 3, IPC_MCP_HEADER_MAX) == -1 ||
	    ipc_bins_ok(out->secrets, 8, IPC_SECRET_MAX) == -1)
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
val_IMSG_RUN_WAKE(const msgpack_object *body)
{
	char run[IPC_UUID_LEN + 1];
	uint64_t seq;

	return ipc_dec_run_wake(body, run, &seq);
}

static int
val_IMSG_AUTH_FLUSH(const msgpack_object *body)
{
	return ipc_dec_auth_flush(body);
}

static int
val_IMSG_GIT_CHECKOUT(const msgpack_object *body)
{
	static struct ipc_git_checkout g;

	return ipc_dec_git_checkout(body, &g);
}

static int
val_IMSG_GIT_FETCH(const msgpack_object *body)
{
	static struct ipc_git_fetch g;

	return ipc_dec_git_fetch(body, &g);
}

static int
val_IMSG_GIT_RESULT(const msgpack_object *body)
{
	struct ipc_git_result r;

	return ipc_dec_git_result(body, &r);
}

static int
val_IMSG_PR_PUSH(const msgpack_object *body)
{
	struct ipc_pr_push p;

	return ipc_dec_pr_push(body, &p);
}

static int
val_IMSG_PR_OPEN(const msgpack_object *body)
{
	struct ipc_pr_open p;

	return ipc_dec_pr_open(body, &p);
}

static int
val_IMSG_PR_RESULT(const msgpack_object *body)
{
	static struct ipc_pr_result r;

	return ipc_dec_pr_result(body, &r);
}

static int
val_IMSG_GIT_PUSH(const msgpack_object *body)
{
	static struct ipc_git_push g;

	return ipc_dec_git_push(body, &g);
}

static int
val_IMSG_GIT_PR(const msgpack_object *body)
{
	static struct ipc_git_pr g;

	return ipc_dec_git_pr(body, &g);
}

static int
val_IMSG_GIT_DIFF(const msgpack_object *body)
{
	static struct ipc_git_diff g;

	return ipc_dec_git_diff(body, &g);
}

static int
val_IMSG_ENGINE_WAKE(const msgpack_object *body)
{
	char run[IPC_UUID_LEN + 1];
	uint32_t k;

	return ipc_dec_engine_wake(body, &k, run);
}

static int
val_IMSG_RUN_START(const msgpack_object *body)
{
	char run[IPC_UUID_LEN + 1], prev[IPC_STATUS_MAX + 1];

	return ipc_dec_run_start(body, run, prev);
}

static int
val_IMSG_RUN_STOP(const msgpack_object *body)
{
	char run[IPC_UUID_LEN + 1];
	uint32_t r;

	return ipc_dec_run_stop(body, run, &r);
}

static int
val_IMSG_RUN_ENDED(const msgpack_object *body)
{
	char run[IPC_UUID_LEN + 1];
	uint32_t o;

	return ipc_dec_run_ended(body, run, &o);
}

static int
val_IMSG_RUNNER_START(const msgpack_object *body)
{
	struct ipc_runner_start r;

	return ipc_dec_runner_start(body, &r);
}

static int
val_IMSG_RUNNER_CANCEL(const msgpack_object *body)
{
	return ipc_dec_runner_cancel(body);
}

static int
val_IMSG_RUNNER_DONE(const msgpack_object *body)
{
	uint32_t o;

	return ipc_dec_runner_done(body, &o);
}

static int
val_IMSG_ENGINE_CONF(const msgpack_object *body)
{
	struct ipc_engine_conf e;

	return ipc_dec_engine_conf(body, &e);
}

static int
val_IMSG_HTTPD_CONF(const msgpack_object *body)
{
	struct ipc_httpd_conf h;

	return ipc_dec_httpd_conf(body, &h);
}

static int
val_IMSG_ARTIFACT_PUT(const msgpack_object *body)
{
	const uint8_t *sha, *data;
	size_t len;

	return ipc_dec_artifact_put(body, &sha, &data, &len);
}

static int
val_IMSG_PATCH_MAKE(const msgpack_object *body)
{
	uint64_t cap;

	return ipc_dec_patch_make(body, &cap);
}

static int
val_IMSG_RUNNER_REPLY(const msgpack_object *body)
{
	struct ipc_runner_reply r;

	return ipc_dec_runner_reply(body, &r);
}

static int
val_IMSG_PROXY_CONF(const msgpack_object *body)
{
	struct ipc_provider *p;
	size_t n;
	int rv;

	if ((p = calloc(IPC_PROVIDERS_MAX, sizeof(*p))) == NULL)
		return -1;
	rv = ipc_dec_proxy_conf(body, p, &n);
	free(p);
	return rv;
}

static int
val_IMSG_PROXY_CHANNEL(const msgpack_object *body)
{
	char run[IPC_UUID_LEN + 1];

	return ipc_dec_proxy_channel(body, run);
}

static int
val_IMSG_RUNNER_PROXY(const msgpack_object *body)
{
	struct ipc_runner_proxy r;

	return ipc_dec_runner_proxy(body, &r);
}

static int
val_IMSG_MODEL_CALL(const msgpack_object *body)
{
	struct ipc_model_call r;

	return ipc_dec_model_call(body, &r);
}

static int
val_IMSG_MODEL_REPLY(const msgpack_object *body)
{
	struct ipc_model_reply r;

	return ipc_dec_model_reply(body, &r);
}

static int
val_IMSG_REPO_SEAL(const msgpack_object *body)
{
	const uint8_t *t;
	size_t len;

	return ipc_dec_repo_seal(body, &t, &len);
}

static int
val_IMSG_REPO_SEALED(const msgpack_object *body)
{
	const uint8_t *n, *ct;
	size_t len;

	return ipc_dec_repo_sealed(body, &n, &ct, &len);
}

static int
val_IMSG_ARTIFACT_OPEN(const msgpack_object *body)
{
	char user[IPC_UUID_LEN + 1], art[IPC_UUID_LEN + 1];

	return ipc_dec_artifact_open(body, user, art);
}

static int
val_IMSG_ARTIFACT_FD(const msgpack_object *body)
{
	uint64_t size;

	return ipc_dec_artifact_fd(body, &size);
}

static int
val_IMSG_ARTIFACT_ERR(const msgpack_object *body)
{
	uint32_t status;

	return ipc_dec_artifact_err(body, &status);
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

static int
val_IMSG_CTL_SANDBOX(const msgpack_object *body)
{
	char id[IPC_SBX_ID_MAX + 1];

	return ipc_dec_ctl_sandbox(body, id, sizeof(id));
}

static int
val_IMSG_SBX_HELLO(const msgpack_object *body)
{
	struct ipc_sbx_hello h;

	return ipc_dec_sbx_hello(body, &h);
}

static int
val_IMSG_SBX_READY(const msgpack_object *body)
{
	struct ipc_ready r;

	return ipc_dec_ready(body, &r);
}

static int
val_IMSG_SBX_READ(const msgpack_object *body)
{
	struct ipc_sbx_read r;

	return ipc_dec_sbx_read(body, &r);
}

static int
val_IMSG_SBX_WRITE(const msgpack_object *body)
{
	struct ipc_sbx_write r;

	return ipc_dec_sbx_write(body, &r);
}

static int
val_IMSG_SBX_EDIT(const msgpack_object *body)
{
	struct ipc_sbx_edit r;

	return ipc_dec_sbx_edit(body, &r);
}

static int
val_IMSG_SBX_LIST(const msgpack_object *body)
{
	struct ipc_sbx_list r;

	return ipc_dec_sbx_list(body, &r);
}

static int
val_IMSG_SBX_GLOB(const msgpack_object *body)
{
	struct ipc_sbx_glob r;

	return ipc_dec_sbx_glob(body, &r);
}

static int
val_IMSG_SBX_GREP(const msgpack_object *body)
{
	struct ipc_sbx_grep r;

	return ipc_dec_sbx_grep(body, &r);
}

static int
val_IMSG_SBX_STAT(const msgpack_object *body)
{
	char path[IPC_SBX_PATH_MAX + 1];

	return ipc_dec_sbx_stat(body, path, sizeof(path));
}

static int
val_IMSG_SBX_EXEC(const msgpack_object *body)
{
	struct ipc_sbx_exec r;

	return ipc_dec_sbx_exec(body, &r);
}

static int
val_IMSG_SBX_KILL(const msgpack_object *body)
{
	struct ipc_cur c;

	ipc_cur_init(&c, body);
	return ipc_end(&c);
}

static int
val_IMSG_SBX_ARTIFACT(const msgpack_object *body)
{
	struct ipc_sbx_artifact r;

	return ipc_dec_sbx_artifact(body, &r);
}

static int
val_IMSG_SBX_OUTPUT(const msgpack_object *body)
{
	struct ipc_sbx_output r;

	return ipc_dec_sbx_output(body, &r);
}

static int
val_IMSG_SBX_EXIT(const msgpack_object *body)
{
	struct ipc_sbx_exit r;

	return ipc_dec_sbx_exit(body, &r);
}

static int
val_IMSG_SBX_RESULT(const msgpack_object *body)
{
	struct ipc_sbx_result r;

	return ipc_dec_sbx_result(body, &r);
}

static int
val_IMSG_EGRESS_CONF(const msgpack_object *body)
{
	struct ipc_egress_conf r;

	return ipc_dec_egress_conf(body, &r);
}

static int
val_IMSG_EGRESS_RUN(const msgpack_object *body)
{
	struct ipc_egress_run r;

	return ipc_dec_egress_run(body, &r);
}

static int
val_IMSG_EGRESS_POLICY(const msgpack_object *body)
{
	struct ipc_egress_run r;

	return ipc_dec_egress_run(body, &r);
}

static int
val_IMSG_EGRESS_END(const msgpack_object *body)
{
	char run[IPC_UUID_LEN + 1];

	return ipc_dec_egress_end(body, run);
}

static int
val_IMSG_EGRESS_EVENT(const msgpack_object *body)
{
	struct ipc_egress_event r;

	return ipc_dec_egress_event(body, &r);
}

static int
val_IMSG_EGRESS_STEP(const msgpack_object *body)
{
	char run[IPC_UUID_LEN + 1];

	return ipc_dec_egress_step(body, run);
}

static int
val_IMSG_EGRESS_TOTALS(const msgpack_object *body)
{
	struct ipc_egress_totals r;

	return ipc_dec_egress_totals(body, &r);
}

static int
val_IMSG_MCP_START(const msgpack_object *body)
{
	struct ipc_mcp_start s;

	return ipc_dec_mcp_start(body, &s);
}

static int
val_IMSG_MCP_CHANNEL(const msgpack_object *body)
{
	struct ipc_mcp_channel ch;

	return ipc_dec_mcp_channel(body, &ch);
}

static int
val_IMSG_MCP_FAILED(const msgpack_object *body)
{
	struct ipc_mcp_failed f;

	return ipc_dec_mcp_failed(body, &f);
}

static int
val_IMSG_MCP_STOP(const msgpack_object *body)
{
	return ipc_dec_mcp_stop(body);
}

static int
val_IMSG_PROXY_MCP(const msgpack_object *body)
{
	struct ipc_proxy_mcp pm;

	return ipc_dec_proxy_mcp(body, &pm);
}

static int
val_IMSG_METRICS_FD(const msgpack_object *body)
{
	char addr[IPC_ADDR_MAX + 1];

	return ipc_dec_listen_fd(body, addr, sizeof(addr));
}

static int
val_IMSG_METRICS_GET(const msgpack_object *body)
{
	return ipc_dec_metrics_get(body);
}

static int
val_IMSG_METRICS(const msgpack_object *body)
{
	uint64_t v[IPC_METRIC__COUNT];

	return ipc_dec_metrics(body, v);
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
