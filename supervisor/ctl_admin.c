/*
 * Administration over the control socket: users, API tokens, projects,
 * memberships, templates, repositories, the registry (skills, MCP servers)
 * and grants, for an operator before any HTTP user exists.
 *
 * Each command is one named op in sql/ops/ctl_*.sql (role "ctl"), run the
 * way a child's DB_OP is: its arguments are validated here with errors that
 * name the argument, encoded as an IMSG_DB_OP body, decoded and checked by
 * db_op_check() (the code every child's request goes through), then queued
 * on the pool.  The reply comes back later, from the pool's callback.  Each
 * op writes its change and its audit_log row in one statement, so an error
 * leaves nothing half-done.
 *
 * A request waiting for the database is a struct admin_req on the pending
 * list; when its client hangs up, ctl_admin_cancel() forgets the callback
 * (db_pool_cancel_owner) and frees it, so a late result touches nothing.
 */
#include <sys/queue.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/forge.h"
#include "common/log.h"
#include "common/mcpspec.h"
#include "common/util.h"
#include "supervisor/db.h"
#include "supervisor/secret.h"
#include "supervisor/supervisor.h"
#include "tmpl/tmpl.h"

#define ADMIN_MAXARGS 6
#define ADMIN_MAXPENDING 256           /* admin requests waiting for the database */
#define ADMIN_MSG_MAX (IPC_ERRMSG_MAX * 4) /* CTL_REPLY message limit */
#define ADMIN_TMPL_ERRBUF (64 * 1024)
#define TOKEN_RAW_LEN 32
#define TOKEN_PREFIX_LEN 12
#define TOKEN_STR_MAX 64                /* "agr_" + 43 base64url characters */
#define DISPLAY_MAX 200                 /* users.display_name, in characters */
#define DAYS_MAX 3650
#define URL_MAX 2048                    /* repo_connections.url, in characters */
#define SECRET_ARG_MAX 4096             /* a repo token or MCP credentials */
#define SKILL_MAX (256 * 1024)
#define MCP_SPEC_MAX MCPSPEC_MAX

struct admin_req;

/* Values for the op's parameters, in order; pointers stay valid until the
 * request is submitted.  heap[] is freed after that. */
enum admin_arg_kind { A_STR, A_NIL, A_UINT, A_BIN };
struct admin_arg {
	enum admin_arg_kind kind;
	const void *p;
	size_t len;
	uint64_t u;
};
struct admin_args {
	int n;
	struct admin_arg v[IPC_DB_MAXARGS];
	char *heap[2];
	unsigned char bin[crypto_hash_sha256_BYTES];
	unsigned char nonce[SECRET_NONCE_LEN];
};

/* prep: check r->argv and fill the op's arguments; returns 0, or -1 with a
 * message for the operator in err.  done: answer from a successful result
 * (NULL: the result is a table, sent as it is). */
typedef int (*admin_prep_fn)(struct admin_req *r, struct admin_args *a, char *err, size_t sz);
typedef void (*admin_done_fn)(struct admin_req *r, PGresult *res);

#define ADMIN_F_NEEDS_ROW 0x1 /* a table: no row at all means argv[0] does not exist */
#define ADMIN_F_SKIP_NULL 0x2 /* a table: drop rows whose first column is NULL */
#define ADMIN_F_PROJECT 0x4   /* with NEEDS_ROW: argv[0] is a project, not a user */
#define ADMIN_F_SECRET 0x8    /* argv[minargs], when given, is a secret: it is
                               * wiped wherever the supervisor holds it and never
                               * answered, logged or stored in plain text */

struct admin_cmd {
	const char *name; /* the CTL_REQUEST command */
	const char *op;   /* the named op (sql/ops/OP.sql) */
	int minargs, maxargs;
	admin_prep_fn prep;
	admin_done_fn done;
	int flags;
};

struct admin_req {
	LIST_ENTRY(admin_req) entry;
	int deferred;           /* done() answers later (repo test) */
	struct gitrun *gitrun;  /* repo test: the helper at work */
	struct mirror_wait *mwait; /* repo test: waiting for the mirror's fetch */
	struct mcptest *mcptest;   /* mcp test: the server and its client at work */
	char scratch[PATH_MAX]; /* repo test: its workspace */
	char mirror[PATH_MAX];  /* repo test: the connection's mirror */
	char url[IPC_GIT_URL_MAX + 1];
	struct ipc_chan *ch;
	uint64_t msgid;
	const struct admin_cmd *cmd;
	int argc;
	char argv[ADMIN_MAXARGS][IPC_CTL_ARG_MAX + 1];
	char tname[TMPL_NAME_MAX + 1]; /* template load */
	long long tversion;
	char token[TOKEN_STR_MAX];      /* token create: shown once, then wiped */
	int secret;                     /* ADMIN_F_SECRET: one was given and sealed */
	char api_url[FORGE_API_URL_MAX + 1]; /* repo add: the API URL, normalised */
	char prefix[TOKEN_PREFIX_LEN + 1];
};

LIST_HEAD(admin_reqs, admin_req);
static struct admin_reqs pending = LIST_HEAD_INITIALIZER(pending);
static unsigned npending;

/* ---- replies ------------------------------------------------------------- */

/* Send w (begun by the caller) when it fits; the frame is wiped before it is
 * freed because a token create reply holds a secret. */
static void
admin_send(struct ipc_chan *ch, struct ipc_wbuf *w, uint64_t msgid)
{
	struct ipc_wbuf e;

	if (ipc_wbuf_finish(w, ipc_chan_max_frame(ch)) == 0) {
		ipc_chan_send(ch, w, -1);
	} else {
		ipc_wbuf_begin(&e, IMSG_CTL_REPLY, msgid, 3);
		ipc_put_u64(&e, 1);
		ipc_put_str(&e, "the answer is too large for one reply");
		ipc_put_nil(&e);
		if (ipc_wbuf_finish(&e, ipc_chan_max_frame(ch)) == 0)
			ipc_chan_send(ch, &e, -1);
		ipc_wbuf_free(&e);
	}
	if (w->sb.data != NULL)
		sodium_memzero(w->sb.data, w->sb.size);
	ipc_wbuf_free(w);
}

static void
admin_reply(struct admin_req *r, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A reply without data. */
static void
admin_reply(struct admin_req *r, int code, const char *fmt, ...)
{
	struct ipc_wbuf w;
	char msg[ADMIN_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	ipc_wbuf_begin(&w, IMSG_CTL_REPLY, r->msgid, 3);
	ipc_put_u64(&w, (uint64_t)code);
	ipc_put_str(&w, msg);
	ipc_put_nil(&w);
	admin_send(r->ch, &w, r->msgid);
}

/*
 * Columns the supervisor adds to a list from what it knows itself: their
 * names, and a function that puts a row's cells (str or nil) from the
 * result's last column, which the list does not show.
 */
struct admin_extra {
	const char *const *names;
	int n;
	void (*cells)(struct ipc_wbuf *w, const char *last);
};

/* A list: data { "columns": [...], "rows": [[str|nil, ...], ...] }; with
 * extra, its columns replace the result's last. */
static void
admin_reply_table_ext(struct admin_req *r, PGresult *res, const struct admin_extra *extra)
{
	int nrows = PQntuples(res), ncols = PQnfields(res), i, j, n = 0;
	int skip = (r->cmd->flags & ADMIN_F_SKIP_NULL) && ncols > 0;
	int shown = extra != NULL && ncols > 0 ? ncols - 1 : ncols;
	int nx = extra != NULL ? extra->n : 0;
	struct ipc_wbuf w;
	char msg[32];

	for (i = 0; i < nrows; i++)
		if (!skip || !PQgetisnull(res, i, 0))
			n++;
	snprintf(msg, sizeof(msg), "%d %s", n, n == 1 ? "row" : "rows");
	ipc_wbuf_begin(&w, IMSG_CTL_REPLY, r->msgid, 3);
	ipc_put_u64(&w, 0);
	ipc_put_str(&w, msg);
	ipc_put_map(&w, 2);
	ipc_put_str(&w, "columns");
	ipc_put_array(&w, (uint32_t)(shown + nx));
	for (j = 0; j < shown; j++)
		ipc_put_str(&w, PQfname(res, j));
	for (j = 0; j < nx; j++)
		ipc_put_str(&w, extra->names[j]);
	ipc_put_str(&w, "rows");
	ipc_put_array(&w, (uint32_t)n);
	for (i = 0; i < nrows; i++) {
		if (skip && PQgetisnull(res, i, 0))
			continue;
		ipc_put_array(&w, (uint32_t)(shown + nx));
		for (j = 0; j < shown; j++) {
			if (PQgetisnull(res, i, j))
				ipc_put_nil(&w);
			else
				ipc_put_strn(&w, PQgetvalue(res, i, j), (size_t)PQgetlength(res, i, j));
		}
		if (nx > 0)
			extra->cells(&w, PQgetisnull(res, i, shown) ? "" : PQgetvalue(res, i, shown));
	}
	admin_send(r->ch, &w, r->msgid);
}

static void
admin_reply_table(struct admin_req *r, PGresult *res)
{
	admin_reply_table_ext(r, res, NULL);
}

/*
 * A refused template: message = as many whole error lines as fit, data =
 * { "errors": [every line] }.  errs is consumed (split in place).
 */
static void
admin_reply_errors(struct admin_req *r, char *errs)
{
	struct ipc_wbuf w;
	char msg[ADMIN_MSG_MAX], *line, *save = NULL, *lines[1024];
	size_t n = 0, used = 0, i;

	msg[0] = '\0';
	for (line = strtok_r(errs, "\n", &save); line != NULL && n < 1024;
	     line = strtok_r(NULL, "\n", &save)) {
		lines[n++] = line;
		if (used + strlen(line) + 2 < sizeof(msg)) {
			used += (size_t)snprintf(msg + used, sizeof(msg) - used, "%s%s",
			    used ? "\n" : "", line);
		}
	}
	ipc_wbuf_begin(&w, IMSG_CTL_REPLY, r->msgid, 3);
	ipc_put_u64(&w, 1);
	ipc_put_str(&w, msg);
	ipc_put_map(&w, 1);
	ipc_put_str(&w, "errors");
	ipc_put_array(&w, (uint32_t)n);
	for (i = 0; i < n; i++)
		ipc_put_str(&w, lines[i]);
	admin_send(r->ch, &w, r->msgid);
}

/* ---- argument syntax ------------------------------------------------------- */

/* [a-z0-9][a-z0-9<extra>]{0,63}: user names (extra "._-"), project names ("-"). */
static int
name_ok(const char *s, const char *extra)
{
	size_t i, n = strlen(s);

	if (n < 1 || n > 64)
		return 0;
	for (i = 0; i < n; i++) {
		int alnum = (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9');

		if (!alnum && (i == 0 || strchr(extra, s[i]) == NULL))
			return 0;
	}
	return 1;
}

/* Valid UTF-8, at most max characters, none of them a control character
 * (C0, DEL, C1): what users.display_name's CHECK accepts. */
static int
display_ok(const char *s, size_t max)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t chars = 0;
	unsigned cp;
	int k;

	while (*p != '\0') {
		if (*p < 0x80) {
			cp = *p++;
			k = 0;
		} else if ((*p & 0xe0) == 0xc0) {
			cp = *p++ & 0x1f;
			k = 1;
		} else if ((*p & 0xf0) == 0xe0) {
			cp = *p++ & 0x0f;
			k = 2;
		} else if ((*p & 0xf8) == 0xf0) {
			cp = *p++ & 0x07;
			k = 3;
		} else
			return 0;
		for (; k > 0; k--, p++) {
			if ((*p & 0xc0) != 0x80)
				return 0;
			cp = (cp << 6) | (*p & 0x3f);
		}
		if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp > 0x10ffff ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
		if (++chars > max)
			return 0;
	}
	return 1;
}

static int
role_ok(const char *s)
{
	return strcmp(s, "admin") == 0 || strcmp(s, "member") == 0 || strcmp(s, "viewer") == 0;
}

/* A decimal number lo..hi, digits only; returns it or -1. */
static long
number_in(const char *s, long lo, long hi)
{
	long v = 0;
	size_t i, n = strlen(s);

	if (n < 1 || n > 9)
		return -1;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v >= lo && v <= hi ? v : -1;
}

/* api_tokens.prefix's character set, 1..16 characters. */
static int
prefix_ok(const char *s)
{
	size_t n = strlen(s);

	return n >= 1 && n <= 16 &&
	    strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") == n;
}

#define USER_RE "[a-z0-9][a-z0-9._-]{0,63}"
#define PROJECT_RE "[a-z0-9][a-z0-9-]{0,63}"

static void
arg_str(struct admin_args *a, const char *s)
{
	a->v[a->n].kind = A_STR;
	a->v[a->n].p = s;
	a->v[a->n].len = strlen(s);
	a->n++;
}

static void
arg_bin(struct admin_args *a, const void *p, size_t len)
{
	a->v[a->n].kind = A_BIN;
	a->v[a->n].p = p;
	a->v[a->n].len = len;
	a->n++;
}

static void
arg_uint(struct admin_args *a, uint64_t u)
{
	a->v[a->n].kind = A_UINT;
	a->v[a->n].u = u;
	a->n++;
}

static void
arg_nil(struct admin_args *a)
{
	a->v[a->n++].kind = A_NIL;
}

static int
check_user(struct admin_req *r, int i, const char *argname, char *err, size_t sz)
{
	if (name_ok(r->argv[i], "._-"))
		return 0;
	snprintf(err, sz, "%s: %s must match " USER_RE, r->cmd->name, argname);
	return -1;
}

static int
check_project(struct admin_req *r, int i, char *err, size_t sz)
{
	if (name_ok(r->argv[i], "-"))
		return 0;
	snprintf(err, sz, "%s: PROJECT must match " PROJECT_RE, r->cmd->name);
	return -1;
}

static int
check_role(struct admin_req *r, int i, char *err, size_t sz)
{
	if (role_ok(r->argv[i]))
		return 0;
	snprintf(err, sz, "%s: ROLE must be admin, member or viewer", r->cmd->name);
	return -1;
}

/* ---- per command: arguments ------------------------------------------------ */

static int
prep_none(struct admin_req *r, struct admin_args *a, char *err, size_t sz)
{
	return 0;
}

static int
prep_user_add(struct admin_req *r, struct admin_args *a, char *err, size_t sz)
{
	if (check_user(r, 0, "NAME", err, sz) == -1)
		return -1;
	if (r->argc > 1 && !display_ok(r->argv[1], DISPLAY_MAX)) {
		snprintf(err, sz,
		    "user add: DISPLAY must be UTF-8 text of at most %d characters without "
		    "control characters", DISPLAY_MAX);
		return -1;
	}
	arg_str(a, r->argv[0]);
	arg_str(a, r->argc > 1 ? r->argv[1] : "");
	return 0;
}

static int
prep_user(struct admin_req *r, struct admin_args *a, char *err, size_t sz)
{
	if (check_user(r, 0, strcmp(r->cmd->name, "user disable") == 0 ? "NAME" : "USER", err,
		sz) == -1)
		return -1;
	arg_str(a, r->argv[0]);
	return 0;
}

static int
prep_project_add(struct admin_req *r, struct admin_args *a, char *err, size_t sz)
{
	if (!name_ok(r->argv[0], "-")) {
		snprintf(err, sz, "project add: NAME must match " PROJECT_RE);
		return -1;
	}
	arg_str(a, r->argv[0]);
	return 0;
}

/* member add|role PROJECT USER ROLE, member remove PROJECT USER */
static int
prep_member(struct admin_req *r, struct admin_args *a, char *err, size_t sz)
{
	int i;

	if (check_project(r, 0, err, sz) == -1 || check_user(r, 1, "USER", err, sz) == -1 ||
	    (r->argc > 2 && check_role(r, 2, err, sz) == -1))
		return -1;
	for (i = 0; i < r->argc; i++)
		arg_str(a, r->argv[i]);
	return 0;
}

/*
 * A new token: 32 random bytes, "agr_" + base64url without padding.  Only
 * its SHA-256 and its first TOKEN_PREFIX_LEN characters go to the database;
 * the token itself stays in r->token until the reply is sent.
 */
static int
prep_token_create(struct admin_req *r, struct admin_args *a, char *err, size_t sz)
{
	unsigned char raw[TOKEN_RAW_LEN];
	char b64[sodium_base64_ENCODED_LEN(TOKEN_RAW_LEN, sodium_base64_VARIANT_URLSAFE_NO_PADDING)];
	long days = 0;

	if (check_user(r, 0, "USER", err, sz) == -1)
		return -1;
	if (r->argc > 1 && (days = number_in(r->argv[1], 1, DAYS_MAX)) == -1) {
		snprintf(err, sz, "token create: DAYS must be a number from 1 to %d", DAYS_MAX);
		return -1;
	}
	randombytes_buf(raw, sizeof(raw));
	sodium_bin2base64(b64, sizeof(b64), raw, sizeof(raw),
	    sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	snprintf(r->token, sizeof(r->token), "agr_%s", b64);
	sodium_memzero(raw, sizeof(raw));
	sodium_memzero(b64, sizeof(b64));
	memcpy(r->prefix, r->token, TOKEN_PREFIX_LEN);
	r->prefix[TOKEN_PREFIX_LEN] = '\0';
	crypto_hash_sha256(a->bin, (const unsigned char *)r->token, strlen(r->token));
	arg_str(a, r->argv[0]);
	arg_bin(a, a->bin, sizeof(a->bin));
	arg_str(a, r->prefix);
	if (r->argc > 1)
		arg_uint(a, (uint64_t)days);
	else
		arg_nil(a);
	return 0;
}

static int
prep_token_revoke(struct admin_req *r, struct admin_args *a, char *err, size_t sz)
{
	if (!prefix_ok(r->argv[0])) {
		snprintf(err, sz,
		    "token revoke: PREFIX must be 1 to 16 characters of a token's prefix "
		    "([A-Za-z0-9_.-])");
		return -1;
	}
	arg_str(a, r->argv[0]);
	return 0;
}

/*
 * Read a file the operator named once (so what is stored is exactly what
 * was checked): a regular file, at most max + 1 bytes, so that the caller
 * can report a larger file.  Returns the bytes (caller frees) or NULL with
 * "path: reason" in err.
 */
static unsigned char *
file_slurp(const char *path, size_t max, size_t *len, char *err, size_t sz)
{
	unsigned char *buf;
	struct stat st;
	ssize_t n;
	int fd;

	/* O_NONBLOCK: a FIFO must not hang the supervisor. */
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)) == -1) {
		snprintf(err, sz, "%s: %s", path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) == -1) {
		snprintf(err, sz, "%s: %s", path, strerror(errno));
		close(fd);
		return NULL;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, sz, "%s: not a regular file", path);
		close(fd);
		return NULL;
	}
	if ((buf = malloc(max + 1)) == NULL)
		fatal("malloc");
	*len = 0;
	while (*len < max + 1 && (n = read(fd, buf + *len, max + 1 - *len)) != 0) {
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			snprintf(err, sz, "%s: %s", path, strerror(errno));
			free(buf);
			close(fd);
			return NULL;
		}
		*len += (size_t)n;
	}
	close(fd);
	return buf;
}

/* Compile; on failure the errors are already answered (returns -1 with
 * err empty). */
static int
tmpl_prepare(struct admin_req *r, unsigned char *src, size_t len, json_t **compiled,
    char *err, size_t sz)
{
	char *errs;

	if ((errs = calloc(1, ADMIN_TMPL_ERRBUF)) == NULL)
		fatal("calloc");
	if (tmpl_compile(r->argv[0], src, len, compiled, errs, ADMIN_TMPL_ERRBUF, NULL) == -1) {
		admin_reply_errors(r, errs);
		free(errs);
		err[0] = '\0';
		return -1;
	}
	free(errs);
	if (memchr(src, '\0', len) != NULL) {
		snprintf(err, sz, "template load: %s holds a NUL byte", r->argv[0]);
		return -1;
	}
	snprintf(r->tname, sizeof(r->tname), "%s",
	    json_string_value(json_object_get(*compiled, "name")));
	r->tversion = (long long)json_integer_value(json_object_get(*compiled, "version"));
	return 0;
}

static int
prep_template_load(struct admin_req *r, struct admin_args *a, char *err, size_t sz)
{
	unsigned char *src;
	json_t *compiled = NULL;
	size_t len;

	if (r->argv[0][0] != '/') {
		snprintf(err, sz, "template load: FILE must be an absolute path");
		return -1;
	}
	if ((src = file_slurp(r->argv[0], TMPL_MAX_SIZE, &len, err, sz)) == NULL)
		return -1;
	a->heap[0] = (char *)src;
	if (tmpl_prepare(r, src, len, &compiled, err, sz) == -1)
		return -1;
	a->heap[1] = json_dumps(compiled, JSON_COMPACT);
	json_decref(compiled);
	if (a->heap[1] == NULL)
		fatalx("template load: json_dumps failed");
	crypto_hash_sha256(a->bin, src, len);
	arg_str(a, r->tname);
	arg_uint(a, (uint64_t)r->tversion);
	a->v[a->n].kind = A_STR;
	a->v[a->n].p = src;
	a->v[a->n].len = len;
	a->n++;
	arg_str(a, a->heap[1]);
	arg_bin(a, a->bin, sizeof(a->bin));
	return 0;
}

/* ---- per command: repositories, skills, MCP servers, grants ------------------- */

#define RESOURCE_RE "[a-z0-9][a-z0-9_-]{0,63}"

static int
check_resource(struct admin_req *r, int i, char *err, size_t sz)
{
	if (name_ok(r->argv[i], "_-"))
		return 0;
	snprintf(err, sz, "%s: NAME must match " RESOURCE_RE, r->cmd->name);
	return -1;
}

static int
check_abspath(struct admin_req *r, int i, const char *argname, char *err, size_t sz)
{
	if (r->argv[i][0] == '/')
		return 0;
	snprintf(err, sz, "%s: %s must be an absolute path", r->cmd->name, argname);
	return -1;
}

/*
 * Why url breaks repo_connections_url_check, or NULL when it does not.
 * The URL itself is never quoted back: a refused one may hold credentials.
 */
static const char *
url_problem(const char *url)
{
	const char *host;
	size_t n;

	if (!display_ok(url, URL_MAX) || strchr(url, ' ') != NULL)
		return "must be at most 2048 characters without spaces or control characters";
	if (strncmp(url, "https://", 8) == 0) {
		host = url + 8;
		n = strcspn(host, "/");
		if (memchr(host, '@', n) != NULL)
			return "must not hold credentials (user:password@); give the token on "
			       "standard input instead";
		return n == 0 ? "has no host after https://" : NULL;
	}
	if (strncmp(url, "file:///", 8) == 0 || url[0] == '/')
		return NULL;
	return "must start with https://, file:/// or / (an absolute path)";
}

/* A token or credentials: no control characters (C0 or DEL), but for
 * JSON's white space (tab, newline, return) when ws. */
static int
secret_text_ok(const char *s, int ws)
{
	for (; *s != '\0'; s++)
		if (((unsigned char)*s < 0x20 && !(ws && strchr("\t\n\r", *s) != NULL)) ||
		    *s == 0x7f)
			return 0;
	return 1;
}

/*
 * The secret in argv[i], when given and not empty, sealed for purpose ctx:
 * adds its ciphertext (in a->heap[0]) and nonce as the op's next two
 * arguments, or two NULLs without a secret, and sets r->secret.  The
 * plaintext in r->argv[i] is wiped whatever happens.  Returns 0, or -1 with
 * err set.
 */
static int
arg_secret(struct admin_req *r, struct admin_args *a, int i, const char *ctx, const char *what,
    char *err, size_t sz)
{
	size_t len = i < r->argc ? strlen(r->argv[i]) : 0, ctlen = 0;
	int rc = 0;

	if (len == 0) {
		arg_nil(a);
		arg_nil(a);
	} else if (len > SECRET_ARG_MAX ||
	    !secret_text_ok(r->argv[i], strcmp(ctx, SECRET_CTX_MCP) == 0)) {
		snprintf(err, sz, "%s: the %s must be at most %d bytes without control characters",
		    r->cmd->name, what, SECRET_ARG_MAX);
		rc = -1;
	} else {
		if ((a->heap[0] = malloc(len + SECRET_MAC_LEN)) == NULL)
			fatal("malloc");
		if (secret_seal(sup.master_key, ctx, r->argv[i], len, a->nonce,
			(unsigned char *)a->heap[0], len + SECRET_MAC_LEN, &ctlen) == -1) {
			log_warnx("control: %s: cannot seal the %s", r->cmd->name, what);
			snprintf(err, sz, "%s: internal error", r->cmd->name);
			rc = -1;
		} else {
			arg_bin(a, a->heap[0], ctlen);
			arg_bin(a, a->nonce, sizeof(a->nonce));
			r->secret = 1;
		}
	}
	if (i < r->argc)
		sodium_memzero(r->argv[i], sizeof(r->argv[i]));
	return rc;
}

/* repo add PROJECT NAME URL [TOKEN] */
static int
prep_repo_add(struct admin_req *r, struct admin_args *a, char *err, size_t sz)
{
	const char *why;

	if (check_project(r, 0, err, sz) == -1 || check_resource(r, 1, err, sz) == -1)
		return -1;
	/* PROJECT NAME URL TOKEN [FORGE [API_URL]]: agrippactl puts the token,
	 * read from standard input, right after the URL */
	const char *forge = r->argc >= 5 ? r->argv[4] : NULL;
	const char *api = r->argc >= 6 ? r->argv[5] : NULL;
	const char *field;
	char fwhy[256];

	if ((why = url_problem(r->argv[2])) != NULL) {
		snprintf(err, sz, "repo add: URL %s", why);
		return -1;
	}
	if (forge_connection_check(forge, r->argv[2], api, r->api_url, sizeof(r->api_url), &field,
	                           fwhy, sizeof(fwhy)) == -1) {
		snprintf(err, sz, "repo add: %s", fwhy);
		return -1;
	}
	arg_str(a, r->argv[0]);
	arg_str(a, r->argv[1]);
	arg_str(a, r->argv[2]);
	if (arg_secret(r, a, 3, SECRET_CTX_REPO, "token", err, sz) == -1)
		return -1;
	if (forge != NULL)
		arg_str(a, forge);
	else
		arg_nil(a);
	if (api != NULL)
		arg_str(a, r->api_url);
	else
		arg_nil(a);
	return 0;
}

static void admin_req_free(struct admin_req *r);

/* repo test PROJECT NAME */
static int
prep_repo_test(struct admin_req *r, struct admin_args *a, char *err, size_t sz)
{
	if (check_project(r, 0, err, sz) == -1 || check_resource(r, 1, err, sz) == -1)
		return -1;
	arg_str(a, r->argv[0]);
	arg_str(a, r->argv[1]);
	return 0;
}

/* The helper's word: the scratch checkout goes, the operator hears. */
static void
repo_test_done(void *arg, int ok, const char *error, const char *base, uint64_t size,
               const char *ref)
{
	struct admin_req *r = arg;

	r->gitrun = NULL;
	remove_tree(r->scratch);
	if (ok)
		admin_reply(r, 0, "repo %s: checked out commit %s", r->argv[1], base);
	else
		admin_reply(r, 1, "repo %s: %s", r->argv[1], error);
	admin_req_free(r);
}

/* The mirror is up to date: its default branch is written into the scratch
 * workspace, as a run's would be. */
static void
repo_test_fetched(void *arg, int ok, const char *error)
{
	struct admin_req *r = arg;
	struct gitrun_req gr;
	char err[ADMIN_MSG_MAX];

	r->mwait = NULL;
	if (!ok) {
		repo_test_done(r, 0, error, "", 0, "");
		return;
	}
	memset(&gr, 0, sizeof(gr));
	gr.kind = GITRUN_CHECKOUT;
	gr.url = r->url;
	gr.mirror = r->mirror;
	gr.ref = "";
	gr.workspace = r->scratch;
	if ((r->gitrun = gitrun_start(&gr, repo_test_done, r, err, sizeof(err))) == NULL)
		repo_test_done(r, 0, err, "", 0, "");
}

int
repo_token_open(PGresult *res, int col, unsigned char **tok, size_t *len)
{
	return sealed_open(res, 0, col, SECRET_CTX_REPO, tok, len);
}

int
sealed_open(PGresult *res, int row, int col, const char *ctx, unsigned char **tok, size_t *len)
{
	unsigned char *ct = NULL, *nonce = NULL;
	size_t ctlen = 0, nlen = 0;
	int rv = -1;

	*tok = NULL;
	*len = 0;
	if (PQgetisnull(res, row, col))
		return 0;
	if ((ct = PQunescapeBytea((const unsigned char *)PQgetvalue(res, row, col), &ctlen)) ==
	        NULL ||
	    (nonce = PQunescapeBytea((const unsigned char *)PQgetvalue(res, row, col + 1), &nlen)) ==
	        NULL ||
	    nlen != SECRET_NONCE_LEN || ctlen <= SECRET_MAC_LEN)
		goto out;
	if ((*tok = sodium_malloc(ctlen)) == NULL)
		fatalx("out of memory");
	if (secret_open(sup.master_key, ctx, ct, ctlen, nonce, *tok, ctlen, len) == -1) {
		sodium_free(*tok);
		*tok = NULL;
		goto out;
	}
	rv = 0;
out:
	PQfreemem(ct);
	PQfreemem(nonce);
	return rv;
}

/* A scratch workspace STATE/work/test-XXXXXX the service user owns. */
static int
repo_scratch(struct admin_req *r, char *err, size_t sz)
{
	char work[PATH_MAX];

	if (fmt_ok(work, sizeof(work), "%s/work", sup.conf.state_dir) == -1 ||
	    fmt_ok(r->scratch, sizeof(r->scratch), "%s/test-XXXXXX", work) == -1) {
		snprintf(err, sz, "the state directory's path is too long");
		return -1;
	}
	if ((mkdir(work, 0711) == -1 && errno != EEXIST) || mkdtemp(r->scratch) == NULL ||
	    (!sup.devmode && chown(r->scratch, sup.uid, sup.gid) == -1)) {
		snprintf(err, sz, "a scratch workspace: %s", strerror(errno));
		return -1;
	}
	return 0;
}

static void
done_repo_test(struct admin_req *r, PGresult *res)
{
	unsigned char *tok;
	size_t len;
	char err[ADMIN_MSG_MAX];

	if (PQntuples(res) != 1) {
		admin_reply(r, 1, "repo test: no repository %s in project %s", r->argv[1], r->argv[0]);
		return;
	}
	if (repo_token_open(res, 1, &tok, &len) == -1) {
		admin_reply(r, 1, "repo test: the stored token does not open with this master key");
		return;
	}
	if (repo_scratch(r, err, sizeof(err)) == -1) {
		if (tok != NULL)
			sodium_free(tok);
		admin_reply(r, 1, "repo test: %s", err);
		return;
	}
	snprintf(r->url, sizeof(r->url), "%s", PQgetvalue(res, 0, 0));
	if (mirror_path(PQgetvalue(res, 0, 3), r->mirror, sizeof(r->mirror)) == -1) {
		snprintf(err, sizeof(err), "the mirror's path is too long");
		r->mwait = NULL;
	} else
		r->mwait = mirror_fetch(PQgetvalue(res, 0, 3), r->url, tok, len, repo_test_fetched,
		    r, err, sizeof(err));
	if (tok != NULL)
		sodium_free(tok); /* wipes it: the helper has its own copy */
	if (r->mwait == NULL) {
		remove_tree(r->scratch);
		admin_reply(r, 1, "repo test: %s", err);
		return;
	}
	r->deferred = 1;
}

/*
 * repo list: the mirror of each connection on this host (its size and its
 * last fetch that succeeded), beside what the database holds.  Two cells:
 * "none" and "never" without a mirror, nil and nil for one that records
 * no fetch.
 */
static void
repo_mirror_cells(struct ipc_wbuf *w, const char *id)
{
	struct mirror_info mi;
	char size[32], when[32];
	struct tm tm;

	mirror_info(id, &mi);
	if (!mi.present) {
		ipc_put_str(w, "none");
		ipc_put_str(w, "never");
		return;
	}
	if (!mi.stamped || gmtime_r(&mi.fetched, &tm) == NULL ||
	    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) {
		ipc_put_nil(w);
		ipc_put_nil(w);
		return;
	}
	ipc_put_str(w, fmt_size(mi.bytes, size, sizeof(size)));
	ipc_put_str(w, when);
}

static void
done_repo_list(struct admin_req *r, PGresult *res)
{
	static const char *const names[] = {"mirror", "fetched"};
	static const struct admin_extra extra = {names, 2, repo_mirror_cells};

	if (PQntuples(res) == 0)
		admin_reply(r, 1, "%s: no such project %s", r->cmd->name, r->argv[0]);
	else
		admin_reply_table_ext(r, res, &extra);
}

/* repo list PROJECT, grant list PROJECT */
static int
prep_project(struct admin_req *r, struct admin_args *a, char *err, size_t sz)
{
	if (check_project(r, 0, err, sz) == -1)
		return -1;
	arg_str(a, r->argv[0]);
	return 0;
}

/*
 * UTF-8 text: well-formed (no overlong forms or surrogates), no NUL and no
 * control characters other than tab, newline and carriage return.
 */
static int
utf8_text_ok(const unsigned char *p, size_t len)
{
	static const unsigned min[4] = { 0, 0x80, 0x800, 0x10000 };
	size_t i = 0;
	unsigned cp;
	int k, n;

	while (i < len) {
		cp = p[i++];
		if (cp < 0x80) {
			if ((cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\r') || cp == 0x7f)
				return 0;
			continue;
		}
		if ((cp & 0xe0) == 0xc0)
			cp &= 0x1f, n = 1;
		else if ((cp & 0xf0) == 0xe0)
			cp &= 0x0f, n = 2;
		else if ((cp & 0xf8) == 0xf0)
			cp &= 0x07, n = 3;
		else
			return 0;
		for (k = 0; k < n; k++, i++) {
			if (i >= len || (p[i] & 0xc0) != 0x80)
				return 0;
			cp = (cp << 6) | (p[i] & 0x3f);
		}
		if (cp < min[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
	}
	return 1;
}

/* skill add NAME FILE: the supervisor reads FILE itself. */
static int
prep_skill_add(struct admin_req *r, struct admin_args *a, char *err, size_t sz)
{
	unsigned char *src;
	size_t len;

	if (check_resource(r, 0, err, sz) == -1 || check_abspath(r, 1, "FILE", err, sz) == -1)
		return -1;
	if ((src = file_slurp(r->argv[1], SKILL_MAX, &len, err, sz)) == NULL)
		return -1;
	a->heap[0] = (char *)src;
	if (len > SKILL_MAX) {
		snprintf(err, sz, "skill add: %s: larger than %d bytes", r->argv[1], SKILL_MAX);
		return -1;
	}
	if (len == 0 || !utf8_text_ok(src, len)) {
		snprintf(err, sz,
		    "skill add: %s: %s", r->argv[1], len == 0 ? "empty" :
		    "not UTF-8 text (or holds control characters other than tab and newline)");
		return -1;
	}
	crypto_hash_sha256(a->bin, src, len);
	arg_str(a, r->argv[0]);
	a->v[a->n].kind = A_STR;
	a->v[a->n].p = src;
	a->v[a->n].len = len;
	a->n++;
	arg_bin(a, a->bin, sizeof(a->bin));
	return 0;
}

/* path, and what it resolves to when that differs (a link must not hide
 * an overlap). */
static void
mcp_forbid(struct mcp_forbidden *f, const char *path)
{
	char *real;

	if (path[0] != '/' || f->nreal >= MCP_FORBIDDEN_MAX)
		return;
	f->p[f->n++] = path;
	real = f->real[f->nreal];
	if (realpath(path, real) != NULL && strcmp(real, path) != 0) {
		f->p[f->n++] = real;
		f->nreal++;
	}
}

void
mcp_forbidden_paths(struct mcp_forbidden *f)
{
	size_t i;

	f->n = f->nreal = 0;
	mcp_forbid(f, sup.conf.state_dir);
	mcp_forbid(f, sup.conf.master_key);
	mcp_forbid(f, sup.conf_path);
	mcp_forbid(f, sup.conf.control_socket);
	mcp_forbid(f, sup.conf.pidfile);
	for (i = 0; i < sup.conf.nproviders; i++)
		mcp_forbid(f, sup.conf.providers[i].key_file);
}

/*
 * The spec in file argv[1], checked against the credentials in argv[2]
 * (when given): its normal form in a->heap[1].  The credentials are parsed
 * only to see their keys; what is sealed is the text as given.  Returns 0,
 * or -1 with err set.
 */
static int
mcp_spec_prepare(struct admin_req *r, struct admin_args *a, char *err, size_t sz)
{
	struct mcp_creds *creds = NULL;
	struct mcp_forbidden fb;
	struct mcpspec_ctx ctx;
	struct mcpspec *s = NULL;
	unsigned char *src;
	size_t len;
	char why[ADMIN_MSG_MAX - 16];

	if ((src = file_slurp(r->argv[1], MCP_SPEC_MAX, &len, err, sz)) == NULL)
		return -1;
	if (len > MCP_SPEC_MAX) {
		free(src);
		snprintf(err, sz, "mcp add: %s: larger than %d bytes", r->argv[1], MCP_SPEC_MAX);
		return -1;
	}
	if (r->argc > 2 && r->argv[2][0] != '\0' &&
	    (creds = mcp_creds_parse(r->argv[2], strlen(r->argv[2]), why, sizeof(why))) == NULL) {
		free(src);
		snprintf(err, sz, "mcp add: %s", why);
		return -1;
	}
	mcp_forbidden_paths(&fb);
	ctx = (struct mcpspec_ctx){.flags = MCPSPEC_F_CREDS | MCPSPEC_F_RESOLVE,
	                           .creds = creds, .forbidden = fb.p, .nforbidden = fb.n};
	s = mcpspec_parse((const char *)src, len, &ctx, why, sizeof(why));
	free(src);
	mcp_creds_free(creds);
	if (s == NULL) {
		/* "LINE:COLUMN: ..." is about the file */
		if (why[0] >= '0' && why[0] <= '9')
			snprintf(err, sz, "mcp add: %s:%s", r->argv[1], why);
		else
			snprintf(err, sz, "mcp add: %s", why);
		return -1;
	}
	a->heap[1] = json_dumps(s->json, JSON_COMPACT);
	mcpspec_free(s);
	if (a->heap[1] == NULL)
		fatalx("mcp add: json_dumps failed");
	return 0;
}

/* mcp add NAME SPEC [CREDENTIALS]: the supervisor reads SPEC itself and
 * stores its normal form. */
static int
prep_mcp_add(struct admin_req *r, struct admin_args *a, char *err, size_t sz)
{
	if (check_resource(r, 0, err, sz) == -1 || check_abspath(r, 1, "SPEC", err, sz) == -1 ||
	    mcp_spec_prepare(r, a, err, sz) == -1)
		return -1;
	arg_str(a, r->argv[0]);
	arg_str(a, a->heap[1]);
	return arg_secret(r, a, 2, SECRET_CTX_MCP, "credentials", err, sz);
}

/* mcp show NAME [VERSION] */
static int
prep_mcp_show(struct admin_req *r, struct admin_args *a, char *err, size_t sz)
{
	long v = 0;

	if (check_resource(r, 0, err, sz) == -1)
		return -1;
	if (r->argc > 1 && (v = number_in(r->argv[1], 1, 999999999)) == -1) {
		snprintf(err, sz, "%s: VERSION must be a number from 1 to 999999999", r->cmd->name);
		return -1;
	}
	arg_str(a, r->argv[0]);
	if (r->argc > 1)
		arg_uint(a, (uint64_t)v);
	else
		arg_nil(a);
	return 0;
}

/*
 * mcp test NAME [VERSION [TOOL ARGS COUNT]], as agrippactl sends
 * "mcp test [-c TOOL [-a ARGS] [-n COUNT]] NAME [VERSION]": VERSION "" for
 * the latest.  The call's parts in *call when given (borrowed from r), each
 * checked: 0, or -1 with err naming the option.
 */
static int
mcp_test_call(struct admin_req *r, struct mcptest_call *call, char *err, size_t sz)
{
	json_error_t jerr;
	json_t *args;
	size_t i, n;
	long count;

	if (r->argc != 1 && r->argc != 2 && r->argc != 5) {
		snprintf(err, sz, "mcp test: NAME [VERSION [TOOL ARGS COUNT]] expected");
		return -1;
	}
	if (r->argc > 1 && r->argv[1][0] != '\0' && number_in(r->argv[1], 1, 999999999) == -1) {
		snprintf(err, sz, "mcp test: VERSION must be a number from 1 to 999999999");
		return -1;
	}
	if (r->argc < 5) {
		call->tool = NULL;
		return 0;
	}
	n = strlen(r->argv[2]);
	for (i = 0; i < n && (unsigned char)r->argv[2][i] > 0x20 && r->argv[2][i] != 0x7f; i++)
		;
	if (n == 0 || n > 128 || i < n) {
		snprintf(err, sz, "mcp test: -c: TOOL must be 1 to 128 printable characters "
		    "without spaces");
		return -1;
	}
	if ((args = json_loads(r->argv[3], JSON_REJECT_DUPLICATES, &jerr)) == NULL ||
	    !json_is_object(args)) {
		if (args == NULL)
			snprintf(err, sz, "mcp test: -a: ARGS is not JSON: %.200s (line %d, column %d)",
			    jerr.text, jerr.line, jerr.column);
		else
			snprintf(err, sz, "mcp test: -a: ARGS must be a JSON object");
		json_decref(args);
		return -1;
	}
	json_decref(args);
	if ((count = number_in(r->argv[4], 1, MCPTEST_COUNT_MAX)) == -1) {
		snprintf(err, sz, "mcp test: -n: COUNT must be a number from 1 to %d",
		    MCPTEST_COUNT_MAX);
		return -1;
	}
	*call = (struct mcptest_call){ r->argv[2], r->argv[3], (unsigned)count };
	return 0;
}

static int
prep_mcp_test(struct admin_req *r, struct admin_args *a, char *err, size_t sz)
{
	struct mcptest_call call;

	if (check_resource(r, 0, err, sz) == -1 || mcp_test_call(r, &call, err, sz) == -1)
		return -1;
	arg_str(a, r->argv[0]);
	if (r->argc > 1 && r->argv[1][0] != '\0')
		arg_uint(a, (uint64_t)number_in(r->argv[1], 1, 999999999));
	else
		arg_nil(a);
	return 0;
}

/* grant add|remove PROJECT skill|mcp NAME */
static int
prep_grant(struct admin_req *r, struct admin_args *a, char *err, size_t sz)
{
	const char *kind;

	if (check_project(r, 0, err, sz) == -1)
		return -1;
	if (strcmp(r->argv[1], "skill") == 0)
		kind = "skill";
	else if (strcmp(r->argv[1], "mcp") == 0)
		kind = "mcp_server";
	else {
		snprintf(err, sz, "%s: KIND must be skill or mcp", r->cmd->name);
		return -1;
	}
	if (check_resource(r, 2, err, sz) == -1)
		return -1;
	arg_str(a, r->argv[0]);
	arg_str(a, kind);
	arg_str(a, r->argv[2]);
	return 0;
}

/* ---- per command: results ---------------------------------------------------- */

static int
is_true(PGresult *res, int row, int col)
{
	return !PQgetisnull(res, row, col) && strcmp(PQgetvalue(res, row, col), "t") == 0;
}

static int
is_null(PGresult *res, int row, int col)
{
	return PQgetisnull(res, row, col);
}

static void
done_user_add(struct admin_req *r, PGresult *res)
{
	admin_reply(r, 0, "user %s added", r->argv[0]);
}

static void
done_user_disable(struct admin_req *r, PGresult *res)
{
	if (PQntuples(res) == 0)
		admin_reply(r, 1, "user disable: no such user %s", r->argv[0]);
	else if (!is_true(res, 0, 1))
		admin_reply(r, 0, "user %s was disabled already", r->argv[0]);
	else
		admin_reply(r, 0, "user %s disabled", r->argv[0]);
}

/* The one time the token is shown: in the message and as data.token. */
static void
done_token_create(struct admin_req *r, PGresult *res)
{
	const char *exp;
	struct ipc_wbuf w;
	char msg[512];

	if (PQntuples(res) == 0) {
		admin_reply(r, 1, "token create: no such user %s", r->argv[0]);
		return;
	}
	if (is_true(res, 0, 0)) {
		admin_reply(r, 1, "token create: user %s is disabled", r->argv[0]);
		return;
	}
	exp = is_null(res, 0, 2) ? "never" : PQgetvalue(res, 0, 2);
	snprintf(msg, sizeof(msg),
	    "token %s created for user %.64s (expires: %.64s); it is shown only this once:\n%s",
	    r->prefix, r->argv[0], exp, r->token);
	ipc_wbuf_begin(&w, IMSG_CTL_REPLY, r->msgid, 3);
	ipc_put_u64(&w, 0);
	ipc_put_str(&w, msg);
	ipc_put_map(&w, 4);
	ipc_put_str(&w, "user");
	ipc_put_str(&w, r->argv[0]);
	ipc_put_str(&w, "prefix");
	ipc_put_str(&w, r->prefix);
	ipc_put_str(&w, "expires");
	if (is_null(res, 0, 2))
		ipc_put_nil(&w);
	else
		ipc_put_str(&w, exp);
	ipc_put_str(&w, "token");
	ipc_put_str(&w, r->token);
	sodium_memzero(msg, sizeof(msg));
	admin_send(r->ch, &w, r->msgid);
}

static void
done_token_revoke(struct admin_req *r, PGresult *res)
{
	int n = PQntuples(res);

	if (n == 0)
		admin_reply(r, 1, "token revoke: no token with prefix %s", r->argv[0]);
	else if (n > 1)
		admin_reply(r, 1,
		    "token revoke: prefix %s matches %d tokens: give more of it (nothing revoked)",
		    r->argv[0], n);
	else if (is_true(res, 0, 3))
		admin_reply(r, 0, "token %s of user %s was revoked already",
		    PQgetvalue(res, 0, 1), PQgetvalue(res, 0, 2));
	else
		admin_reply(r, 0, "token %s of user %s revoked", PQgetvalue(res, 0, 1),
		    PQgetvalue(res, 0, 2));
}

static void
done_project_add(struct admin_req *r, PGresult *res)
{
	admin_reply(r, 0, "project %s added", r->argv[0]);
}

/* member commands: column 0 project id, 1 user id. */
static int
member_exists(struct admin_req *r, PGresult *res)
{
	if (PQntuples(res) != 1 || is_null(res, 0, 0)) {
		admin_reply(r, 1, "%s: no such project %s", r->cmd->name, r->argv[0]);
		return 0;
	}
	if (is_null(res, 0, 1)) {
		admin_reply(r, 1, "%s: no such user %s", r->cmd->name, r->argv[1]);
		return 0;
	}
	return 1;
}

static void
done_member_add(struct admin_req *r, PGresult *res)
{
	if (member_exists(r, res))
		admin_reply(r, 0, "user %s is now %s in project %s", r->argv[1], r->argv[2],
		    r->argv[0]);
}

static void
done_member_remove(struct admin_req *r, PGresult *res)
{
	if (!member_exists(r, res))
		return;
	if (is_null(res, 0, 2))
		admin_reply(r, 1, "member remove: user %s is not a member of project %s",
		    r->argv[1], r->argv[0]);
	else
		admin_reply(r, 0, "user %s removed from project %s (was %s)", r->argv[1],
		    r->argv[0], PQgetvalue(res, 0, 2));
}

static void
done_member_role(struct admin_req *r, PGresult *res)
{
	if (!member_exists(r, res))
		return;
	if (is_null(res, 0, 2))
		admin_reply(r, 1, "member role: user %s is not a member of project %s",
		    r->argv[1], r->argv[0]);
	else if (!is_true(res, 0, 3))
		admin_reply(r, 0, "user %s is %s in project %s already", r->argv[1], r->argv[2],
		    r->argv[0]);
	else
		admin_reply(r, 0, "user %s is now %s in project %s (was %s)", r->argv[1],
		    r->argv[2], r->argv[0], PQgetvalue(res, 0, 2));
}

static void
done_template_load(struct admin_req *r, PGresult *res)
{
	if (PQntuples(res) == 1 && !is_null(res, 0, 0))
		admin_reply(r, 0, "template %s version %lld loaded", r->tname, r->tversion);
	else if (PQntuples(res) == 1 && is_true(res, 0, 1))
		admin_reply(r, 0, "template %s version %lld unchanged", r->tname, r->tversion);
	else if (PQntuples(res) == 1 && !is_null(res, 0, 1))
		admin_reply(r, 1,
		    "template %s version %lld exists with other content: raise version", r->tname,
		    r->tversion);
	else
		admin_reply(r, 1,
		    "template %s version %lld was being loaded at the same time: run the command "
		    "again", r->tname, r->tversion);
}

static void
done_repo_add(struct admin_req *r, PGresult *res)
{
	if (PQntuples(res) != 1 || is_null(res, 0, 0))
		admin_reply(r, 1, "repo add: no such project %s", r->argv[0]);
	else
		admin_reply(r, 0, "repo %s added to project %s (%s)", r->argv[1], r->argv[0],
		    r->secret ? "with a token" : "without a token");
}

static void
done_skill_add(struct admin_req *r, PGresult *res)
{
	if (PQntuples(res) == 1 && !is_null(res, 0, 0))
		admin_reply(r, 0, "skill %s version %s added", r->argv[0], PQgetvalue(res, 0, 0));
	else if (PQntuples(res) == 1 && !is_null(res, 0, 1))
		admin_reply(r, 0, "skill %s unchanged: version %s has this content", r->argv[0],
		    PQgetvalue(res, 0, 1));
	else
		admin_reply(r, 1, "skill add: nothing stored for %s", r->argv[0]);
}

static void
done_mcp_add(struct admin_req *r, PGresult *res)
{
	if (PQntuples(res) == 1 && !is_null(res, 0, 0))
		admin_reply(r, 0, "mcp server %s version %s added (%s)", r->argv[0],
		    PQgetvalue(res, 0, 0), r->secret ? "with credentials" : "without credentials");
	else
		admin_reply(r, 1, "mcp add: nothing stored for %s", r->argv[0]);
}

/*
 * mcp show: data { name, version, credentials (bool), created, spec (the
 * stored JSON text), check ("" or why the stored spec does not pass
 * today's checks: a version stored before them) }.  A spec passing them
 * is sent in its normal form, fields in their usual order.
 */
static void
done_mcp_show(struct admin_req *r, PGresult *res)
{
	struct mcpspec *s;
	struct ipc_wbuf w;
	const char *text;
	char why[512], msg[256], *norm = NULL;

	if (PQntuples(res) != 1) {
		if (r->argc > 1)
			admin_reply(r, 1, "mcp show: mcp server %s has no version %s", r->argv[0],
			    r->argv[1]);
		else
			admin_reply(r, 1, "mcp show: no such mcp server %s", r->argv[0]);
		return;
	}
	text = PQgetvalue(res, 0, 1);
	if ((s = mcpspec_parse(text, strlen(text), NULL, why, sizeof(why))) != NULL) {
		why[0] = '\0';
		if ((norm = json_dumps(s->json, JSON_COMPACT)) == NULL)
			fatalx("mcp show: json_dumps failed");
		mcpspec_free(s);
	}
	snprintf(msg, sizeof(msg), "mcp server %.64s version %.16s (%s), added %.32s", r->argv[0],
	    PQgetvalue(res, 0, 0), is_true(res, 0, 2) ? "with credentials" : "without credentials",
	    PQgetvalue(res, 0, 3));
	ipc_wbuf_begin(&w, IMSG_CTL_REPLY, r->msgid, 3);
	ipc_put_u64(&w, 0);
	ipc_put_str(&w, msg);
	ipc_put_map(&w, 6);
	ipc_put_str(&w, "name");
	ipc_put_str(&w, r->argv[0]);
	ipc_put_str(&w, "version");
	ipc_put_u64(&w, strtoull(PQgetvalue(res, 0, 0), NULL, 10));
	ipc_put_str(&w, "credentials");
	ipc_put_bool(&w, is_true(res, 0, 2));
	ipc_put_str(&w, "created");
	ipc_put_str(&w, PQgetvalue(res, 0, 3));
	ipc_put_str(&w, "spec");
	ipc_put_str(&w, norm != NULL ? norm : text);
	ipc_put_str(&w, "check");
	ipc_put_str(&w, why);
	admin_send(r->ch, &w, r->msgid);
	free(norm);
}

/* The MCP client's word (mcptest.c): the tools as its JSON text, which
 * agrippactl decodes, or why the server failed. */
static void
mcp_test_done(void *arg, int ok, const char *text)
{
	struct admin_req *r = arg;
	struct ipc_wbuf w;
	char msg[128];

	r->mcptest = NULL;
	if (!ok) {
		admin_reply(r, 1, "mcp test %s: %.3900s", r->argv[0], text);
	} else {
		snprintf(msg, sizeof(msg), "mcp server %.64s answered", r->argv[0]);
		ipc_wbuf_begin(&w, IMSG_CTL_REPLY, r->msgid, 3);
		ipc_put_u64(&w, 0);
		ipc_put_str(&w, msg);
		ipc_put_map(&w, 2);
		ipc_put_str(&w, "name");
		ipc_put_str(&w, r->argv[0]);
		ipc_put_str(&w, "result");
		ipc_put_str(&w, text);
		admin_send(r->ch, &w, r->msgid);
	}
	admin_req_free(r);
}

/* mcp test: the stored spec and sealed credentials of the version; its
 * server is started and its client asked for its tools (mcptest.c). */
static void
done_mcp_test(struct admin_req *r, PGresult *res)
{
	struct mcp_forbidden fb;
	struct mcpspec_ctx ctx;
	struct mcptest_call call;
	unsigned char *creds = NULL;
	size_t clen = 0;
	char err[ADMIN_MSG_MAX - 128];

	if (PQntuples(res) != 1) {
		if (r->argc > 1 && r->argv[1][0] != '\0')
			admin_reply(r, 1, "mcp test: mcp server %s has no version %s", r->argv[0],
			    r->argv[1]);
		else
			admin_reply(r, 1, "mcp test: no such mcp server %s", r->argv[0]);
		return;
	}
	if (sealed_open(res, 0, 2, SECRET_CTX_MCP, &creds, &clen) == -1) {
		log_warnx("mcp test %s: its credentials do not open with this master key",
		    r->argv[0]);
		admin_reply(r, 1, "mcp test %s: its credentials do not open with this master key",
		    r->argv[0]);
		return;
	}
	mcp_forbidden_paths(&fb);
	ctx = (struct mcpspec_ctx){ .flags = MCPSPEC_F_RESOLVE, .forbidden = fb.p,
		.nforbidden = fb.n };
	if (mcp_test_call(r, &call, err, sizeof(err)) == -1) /* checked at prep */
		fatalx("mcp test: %s", err);
	r->mcptest = mcptest_start(r->argv[0], PQgetvalue(res, 0, 1), (const char *)creds, clen,
	    &ctx, call.tool != NULL ? &call : NULL, mcp_test_done, r, err, sizeof(err));
	if (creds != NULL)
		sodium_free(creds);
	if (r->mcptest == NULL) {
		admin_reply(r, 1, "mcp test %s: %s", r->argv[0], err);
		return;
	}
	r->deferred = 1;
}

/* "skill" or "mcp server", for messages about argv[1] */
static const char *
grant_kind(struct admin_req *r)
{
	return strcmp(r->argv[1], "mcp") == 0 ? "mcp server" : "skill";
}

static void
done_grant_add(struct admin_req *r, PGresult *res)
{
	if (PQntuples(res) != 1 || is_null(res, 0, 0))
		admin_reply(r, 1, "grant add: no such project %s", r->argv[0]);
	else if (!is_true(res, 0, 1))
		admin_reply(r, 1, "grant add: no such %s %s", grant_kind(r), r->argv[2]);
	else if (is_null(res, 0, 2))
		admin_reply(r, 0, "project %s may use %s %s already", r->argv[0], grant_kind(r),
		    r->argv[2]);
	else
		admin_reply(r, 0, "project %s may now use %s %s", r->argv[0], grant_kind(r),
		    r->argv[2]);
}

static void
done_grant_remove(struct admin_req *r, PGresult *res)
{
	if (PQntuples(res) != 1 || is_null(res, 0, 0))
		admin_reply(r, 1, "grant remove: no such project %s", r->argv[0]);
	else if (is_null(res, 0, 1))
		admin_reply(r, 1, "grant remove: project %s has no grant of %s %s", r->argv[0],
		    grant_kind(r), r->argv[2]);
	else
		admin_reply(r, 0, "project %s may no longer use %s %s", r->argv[0], grant_kind(r),
		    r->argv[2]);
}

/* ---- the command table ------------------------------------------------------- */

static const struct admin_cmd admin_cmds[] = {
	{ "user add", "ctl_user_add", 1, 2, prep_user_add, done_user_add, 0 },
	{ "user list", "ctl_user_list", 0, 0, prep_none, NULL, 0 },
	{ "user disable", "ctl_user_disable", 1, 1, prep_user, done_user_disable, 0 },
	{ "token create", "ctl_token_create", 1, 2, prep_token_create, done_token_create, 0 },
	{ "token revoke", "ctl_token_revoke", 1, 1, prep_token_revoke, done_token_revoke, 0 },
	{ "token list", "ctl_token_list", 1, 1, prep_user, NULL,
	    ADMIN_F_NEEDS_ROW | ADMIN_F_SKIP_NULL },
	{ "project add", "ctl_project_add", 1, 1, prep_project_add, done_project_add, 0 },
	{ "project list", "ctl_project_list", 0, 0, prep_none, NULL, 0 },
	{ "member add", "ctl_member_add", 3, 3, prep_member, done_member_add, 0 },
	{ "member remove", "ctl_member_remove", 2, 2, prep_member, done_member_remove, 0 },
	{ "member role", "ctl_member_role", 3, 3, prep_member, done_member_role, 0 },
	{ "template load", "ctl_template_load", 1, 1, prep_template_load, done_template_load, 0 },
	{ "template list", "ctl_template_list", 0, 0, prep_none, NULL, 0 },
	{ "repo add", "ctl_repo_add", 3, 6, prep_repo_add, done_repo_add, ADMIN_F_SECRET },
	{ "repo test", "ctl_repo_secret", 2, 2, prep_repo_test, done_repo_test, 0 },
	{ "repo list", "ctl_repo_list", 1, 1, prep_project, done_repo_list,
	    ADMIN_F_SKIP_NULL },
	{ "skill add", "ctl_skill_add", 2, 2, prep_skill_add, done_skill_add, 0 },
	{ "skill list", "ctl_skill_list", 0, 0, prep_none, NULL, 0 },
	{ "mcp add", "ctl_mcp_add", 2, 3, prep_mcp_add, done_mcp_add, ADMIN_F_SECRET },
	{ "mcp list", "ctl_mcp_list", 0, 0, prep_none, NULL, 0 },
	{ "mcp show", "ctl_mcp_show", 1, 2, prep_mcp_show, done_mcp_show, 0 },
	{ "mcp test", "ctl_mcp_test", 1, 5, prep_mcp_test, done_mcp_test, 0 },
	{ "grant add", "ctl_grant_add", 3, 3, prep_grant, done_grant_add, 0 },
	{ "grant remove", "ctl_grant_remove", 3, 3, prep_grant, done_grant_remove, 0 },
	{ "grant list", "ctl_grant_list", 1, 1, prep_project, NULL,
	    ADMIN_F_NEEDS_ROW | ADMIN_F_SKIP_NULL | ADMIN_F_PROJECT },
};

/* ---- database errors ------------------------------------------------------------ */

/* What a CHECK constraint of the tables these ops write means. */
static const struct {
	const char *constraint, *meaning;
} admin_checks[] = {
	{ "users_name_check", "a user name must match " USER_RE },
	{ "users_display_name_check",
	    "a display name is at most 200 characters without control characters" },
	{ "projects_name_check", "a project name must match " PROJECT_RE },
	{ "memberships_role_check", "a role is admin, member or viewer" },
	{ "api_tokens_prefix_check", "a token prefix is 1 to 16 of [A-Za-z0-9_.-]" },
	{ "api_tokens_expires_at_check", "a token must expire after it is created" },
	{ "templates_name_check", "a template name must match " PROJECT_RE },
	{ "templates_version_check", "a template version is from 1 to 1000000" },
	{ "templates_source_check", "a template is at most 262144 bytes" },
	{ "templates_compiled_check", "a compiled template is a JSON object" },
	{ "repo_connections_name_check", "a repository name must match " RESOURCE_RE },
	{ "repo_connections_url_check",
	    "a URL starts with https:// (without user:password@), file:/// or /" },
	{ "skills_name_check", "a skill name must match " RESOURCE_RE },
	{ "skills_body_check", "a skill is at most 1048576 bytes" },
	{ "mcp_servers_name_check", "an MCP server name must match " RESOURCE_RE },
	{ "mcp_servers_spec_check", "an MCP server spec is a JSON object" },
	{ "grants_resource_name_check", "a resource name must match " RESOURCE_RE },
};

static void
admin_unique_error(struct admin_req *r, const char *cons)
{
	if (strcmp(cons, "users_name_key") == 0)
		admin_reply(r, 1, "%s: user %s exists", r->cmd->name, r->argv[0]);
	else if (strcmp(cons, "projects_name_key") == 0)
		admin_reply(r, 1, "%s: project %s exists", r->cmd->name, r->argv[0]);
	else if (strcmp(cons, "memberships_project_id_user_id_key") == 0)
		admin_reply(r, 1,
		    "%s: user %s is a member of project %s already (change the role with: "
		    "member role)", r->cmd->name, r->argv[1], r->argv[0]);
	else if (strcmp(cons, "repo_connections_project_id_name_key") == 0)
		admin_reply(r, 1, "%s: repo %s exists in project %s", r->cmd->name, r->argv[1],
		    r->argv[0]);
	else if (strcmp(cons, "skills_name_version_key") == 0 ||
	    strcmp(cons, "mcp_servers_name_version_key") == 0)
		admin_reply(r, 1,
		    "%s: %s was being added at the same time: run the command again (nothing "
		    "changed)", r->cmd->name, r->argv[0]);
	else if (strcmp(cons, "templates_name_version_key") == 0)
		admin_reply(r, 1, "%s: template %s version %lld exists: raise version",
		    r->cmd->name, r->tname, r->tversion);
	else
		admin_reply(r, 1, "%s: already exists (%s); nothing changed", r->cmd->name, cons);
}

/* Map a failed statement to the operator's terms; nothing was changed. */
static void
admin_query_error(struct admin_req *r, const char *err, PGresult *res)
{
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	const char *cons = res ? PQresultErrorField(res, PG_DIAG_CONSTRAINT_NAME) : NULL;

	if (state != NULL && cons != NULL && strcmp(state, "23505") == 0) {
		admin_unique_error(r, cons);
		return;
	}
	if (state != NULL && cons != NULL && strcmp(state, "23514") == 0) {
		for (size_t i = 0; i < sizeof(admin_checks) / sizeof(admin_checks[0]); i++)
			if (strcmp(cons, admin_checks[i].constraint) == 0) {
				admin_reply(r, 1, "%s: %s; nothing changed", r->cmd->name,
				    admin_checks[i].meaning);
				return;
			}
	}
	if (state != NULL && strcmp(state, "23503") == 0) {
		admin_reply(r, 1, "%s: %s does not exist (any more); nothing changed",
		    r->cmd->name, r->argc > 0 ? r->argv[0] : "an object");
		return;
	}
	log_warnx("control: %s: %s", r->cmd->name, err);
	admin_reply(r, 1, "%s: the database refused it, nothing changed: %s", r->cmd->name, err);
}

/* ---- requests ----------------------------------------------------------------- */

static void
admin_req_free(struct admin_req *r)
{
	LIST_REMOVE(r, entry);
	npending--;
	sodium_memzero(r->token, sizeof(r->token));
	sodium_memzero(r->argv, sizeof(r->argv));
	free(r);
}

static void
admin_done(uint64_t reqid, int code, const char *err, void *pgres, void *arg)
{
	struct admin_req *r = arg;
	PGresult *res = pgres;

	if (code == DB_ERR_KEY_ROTATED)
		admin_reply(r, 1, "%s: the master key was rotated while this ran; nothing changed: "
		    "run the command again", r->cmd->name);
	else if (code == DB_ERR_QUERY)
		admin_query_error(r, err, res);
	else if (code != DB_OK)
		admin_reply(r, 1, "%s: %s", r->cmd->name, err);
	else if (r->cmd->done != NULL)
		r->cmd->done(r, res);
	else if ((r->cmd->flags & ADMIN_F_NEEDS_ROW) && PQntuples(res) == 0)
		admin_reply(r, 1, "%s: no such %s %s", r->cmd->name,
		    (r->cmd->flags & ADMIN_F_PROJECT) ? "project" : "user", r->argv[0]);
	else
		admin_reply_table(r, res);
	if (!r->deferred)
		admin_req_free(r);
}

/*
 * Encode a as the body of an IMSG_DB_OP for op and decode it again, then
 * check it with db_op_check() as role ctl: the same typing and nullability
 * checks as for any child.  Returns DB_OK with *p filled, or a db_code with
 * err set.
 */
static int
admin_check_args(const struct sql_op *op, const struct admin_args *a, struct db_params *p,
    char *err, size_t sz)
{
	struct ipc_wbuf w;
	struct ipc_msg m;
	struct ipc_db_op req;
	const char *why = NULL;
	int i, code = DB_ERR_ARGS;

	ipc_wbuf_begin(&w, IMSG_DB_OP, 0, 2);
	ipc_put_str(&w, op->name);
	ipc_put_array(&w, (uint32_t)a->n);
	for (i = 0; i < a->n; i++) {
		if (a->v[i].kind == A_STR)
			ipc_put_strn(&w, a->v[i].p, a->v[i].len);
		else if (a->v[i].kind == A_BIN)
			ipc_put_bin(&w, a->v[i].p, a->v[i].len);
		else if (a->v[i].kind == A_UINT)
			ipc_put_u64(&w, a->v[i].u);
		else
			ipc_put_nil(&w);
	}
	if (ipc_wbuf_finish(&w, IPC_MAX_FRAME_DEFAULT) == -1) {
		snprintf(err, sz, "op %s: arguments too large", op->name);
	} else if (ipc_frame_decode((const uint8_t *)w.sb.data + 4, w.sb.size - 4, &m, &why) ==
	    -1) {
		snprintf(err, sz, "op %s: %s", op->name, why);
	} else {
		if (ipc_dec_db_op(m.body, &req) == -1)
			snprintf(err, sz, "op %s: malformed request", op->name);
		else
			code = db_op_check(op, ROLE_CTL, "", NULL, NULL, &req, p, err, sz);
		ipc_msg_free(&m);
	}
	ipc_wbuf_free(&w);
	return code;
}

/* Check and queue r; answers and frees it itself when that fails. */
static void
admin_submit(struct admin_req *r)
{
	const struct sql_op *op = db_op_lookup(r->cmd->op);
	struct admin_args a;
	struct db_params p;
	char err[ADMIN_MSG_MAX];

	memset(&a, 0, sizeof(a));
	if (r->cmd->prep(r, &a, err, sizeof(err)) == -1) {
		if (err[0] != '\0')
			admin_reply(r, 1, "%s", err);
	} else if (op == NULL || admin_check_args(op, &a, &p, err, sizeof(err)) != DB_OK) {
		/* Our own arguments failed our own op's declaration: a bug here. */
		log_warnx("control: %s: %s", r->cmd->name, op ? err : "no such op");
		admin_reply(r, 1, "%s: internal error", r->cmd->name);
	} else if (db_pool_submit(op, &p, admin_done, r) == 0) {
		db_params_free(&p);
		admin_reply(r, 1, "%s: database unavailable", r->cmd->name);
	} else {
		r = NULL; /* admin_done answers and frees it */
	}
	free(a.heap[0]);
	free(a.heap[1]);
	if (r != NULL)
		admin_req_free(r);
}

/* key rotate: answered at once (keyrotate.c works on a connection of its
 * own while the supervisor waits). */
static int
ctl_key_rotate(struct ipc_chan *ch, uint64_t id, const struct ipc_ctl_request *req)
{
	struct admin_req r = { .ch = ch, .msgid = id };
	char msg[ADMIN_MSG_MAX];
	int rc;

	if (req->nargs != 0)
		return -1;
	rc = keyrotate_run(msg, sizeof(msg));
	admin_reply(&r, rc == 0 ? 0 : 1, "%s", msg);
	return 0;
}

int
ctl_admin_run(struct ipc_chan *ch, uint64_t id, struct ipc_ctl_request *req)
{
	const struct admin_cmd *cmd = NULL;
	struct ipc_cur c = req->args;
	struct admin_req *r;
	size_t i;

	if (strcmp(req->cmd, "key rotate") == 0)
		return ctl_key_rotate(ch, id, req);
	for (i = 0; i < sizeof(admin_cmds) / sizeof(admin_cmds[0]); i++)
		if (strcmp(admin_cmds[i].name, req->cmd) == 0)
			cmd = &admin_cmds[i];
	if (cmd == NULL || req->nargs < (uint32_t)cmd->minargs ||
	    req->nargs > (uint32_t)cmd->maxargs)
		return -1;
	if ((r = calloc(1, sizeof(*r))) == NULL)
		fatal("calloc");
	r->ch = ch;
	r->msgid = id;
	r->cmd = cmd;
	for (r->argc = 0; r->argc < (int)req->nargs; r->argc++) {
		const char *s = NULL;
		size_t len = 0;
		struct ipc_cur at = c;
		int bad;

		(void)ipc_get_str(&at, &s, &len, IPC_CTL_ARG_MAX);
		bad = ipc_get_cstr(&c, r->argv[r->argc], sizeof(r->argv[0])) == -1;
		/* The request's copy of a secret is wiped at once (that memory is
		 * the message's own, freed when this handler returns); ours in
		 * r->argv is wiped when it is sealed and again in admin_req_free. */
		if ((cmd->flags & ADMIN_F_SECRET) && r->argc == cmd->minargs && s != NULL)
			sodium_memzero((void *)(uintptr_t)s, len);
		if (bad) {
			sodium_memzero(r->argv, sizeof(r->argv));
			free(r);
			return -1;
		}
	}
	LIST_INSERT_HEAD(&pending, r, entry);
	if (++npending > ADMIN_MAXPENDING) {
		admin_reply(r, 1, "%s: too many requests waiting for the database", cmd->name);
		admin_req_free(r);
		return 0;
	}
	admin_submit(r);
	return 0;
}

void
ctl_admin_cancel(const struct ipc_chan *ch)
{
	struct admin_req *r, *next;

	for (r = LIST_FIRST(&pending); r != NULL; r = next) {
		next = LIST_NEXT(r, entry);
		if (r->ch != ch)
			continue;
		db_pool_cancel_owner(r);
		if (r->mwait != NULL) {
			mirror_wait_cancel(r->mwait);
			remove_tree(r->scratch);
		}
		if (r->gitrun != NULL) {
			gitrun_abandon(r->gitrun);
			remove_tree(r->scratch);
		}
		if (r->mcptest != NULL)
			mcptest_abandon(r->mcptest);
		admin_req_free(r);
	}
}
