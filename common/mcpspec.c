/*
 * MCP server definitions and their credentials (mcpspec.h).
 *
 * Checking builds the normal form as it goes, field by field, and stops at
 * the first error; the struct is then filled from the normal form alone, so
 * that a stored spec read back and a spec just checked give the same
 * struct.
 */
#include "common/mcpspec.h"

#include <ctype.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>
#include <sodium.h>

#include "common/log.h"
#include "common/util.h"
#include "egress/host.h"

#define LABEL_MAX 256
#define REF_OPEN "${credentials."
#define REF_OPEN_LEN (sizeof(REF_OPEN) - 1)

/* ---- small checks ------------------------------------------------------------ */

/* A credential's key: [A-Za-z_][A-Za-z0-9_-]{0,63}. */
static int
key_ok(const char *s, size_t n)
{
	size_t i;

	if (n < 1 || n > MCP_CREDS_KEY_MAX || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
		return 0;
	for (i = 1; i < n; i++)
		if (!(isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == '-'))
			return 0;
	return 1;
}

/* Why s[0..n) is not text for a spec, or NULL: no NUL, no C0 control
 * character (tab only when tab), no DEL. */
static const char *
text_problem(const char *s, size_t n, int tab)
{
	size_t i;

	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == 0)
			return "must hold no NUL";
		if ((c < 0x20 && !(tab && c == '\t')) || c == 0x7f)
			return tab ? "must hold no control characters other than tab"
			           : "must hold no control characters";
	}
	return NULL;
}

/* parent + ".key", or parent + "[\"...\"]" with odd bytes as \xNN (at most
 * 64 of them) when key is not a plain name. */
static void
lab_key(char *buf, size_t sz, const char *parent, const char *key)
{
	size_t n = strlen(key), i, used;

	if (n >= 1 && n <= 64 &&
	    strspn(key, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") == n) {
		snprintf(buf, sz, "%s.%s", parent, key);
		return;
	}
	used = (size_t)snprintf(buf, sz, "%s[\"", parent);
	if (used >= sz)
		return;
	for (i = 0; i < n && i < 64 && used + 8 < sz; i++) {
		unsigned char c = (unsigned char)key[i];

		if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\')
			used += (size_t)snprintf(buf + used, sz - used, "\\x%02x", c);
		else
			buf[used++] = (char)c;
	}
	snprintf(buf + used, sz - used, "%s\"]", i < n ? "..." : "");
}

static void
lab_index(char *buf, size_t sz, const char *parent, size_t i)
{
	if (fmt_ok(buf, sz, "%s[%zu]", parent, i) == -1)
		snprintf(buf, sz, "spec");
}

/* ---- credentials --------------------------------------------------------------- */

struct mcp_creds {
	size_t n;
	char **keys; /* malloc: names are no secret */
	char *vals;  /* sodium_malloc: every value, each NUL-terminated */
	size_t valsz;
	size_t *off, *len;
};

static void cfail(char *err, size_t errsz, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
cfail(char *err, size_t errsz, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errsz == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errsz, fmt, ap);
	va_end(ap);
}

void
mcp_creds_free(struct mcp_creds *c)
{
	size_t i;

	if (c == NULL)
		return;
	for (i = 0; i < c->n; i++)
		free(c->keys[i]);
	free(c->keys);
	free(c->off);
	free(c->len);
	if (c->vals != NULL)
		sodium_free(c->vals); /* wipes them */
	free(c);
}

/* A value: printable ASCII without '"' and '\'. */
static int
cred_value_ok(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e || s[i] == '"' ||
		    s[i] == '\\')
			return 0;
	return 1;
}

/* Why a decode failed, without the text jansson quotes from the input. */
static const char *
creds_syntax(const json_error_t *je)
{
	switch (json_error_code(je)) {
	case json_error_invalid_utf8:
		return "not UTF-8";
	case json_error_duplicate_key:
		return "a key appears twice";
	case json_error_premature_end_of_input:
		return "the JSON text ends too soon";
	case json_error_end_of_input_expected:
		return "more than one JSON value";
	default:
		return "not valid JSON";
	}
}

/* Copy the checked object root into c; 0, or -1 with err set. */
static int
creds_take(struct mcp_creds *c, json_t *root, size_t textlen, char *err, size_t errsz)
{
	const char *key;
	json_t *v;
	size_t i = 0, used = 0;

	c->n = json_object_size(root);
	c->valsz = textlen + 1;
	if ((c->keys = calloc(c->n, sizeof(*c->keys))) == NULL ||
	    (c->off = calloc(c->n, sizeof(*c->off))) == NULL ||
	    (c->len = calloc(c->n, sizeof(*c->len))) == NULL ||
	    (c->vals = sodium_malloc(c->valsz)) == NULL)
		fatalx("out of memory");
	json_object_foreach(root, key, v) {
		const char *s = json_string_value(v);
		size_t n = json_string_length(v);

		if (!key_ok(key, strlen(key))) {
			cfail(err, errsz,
			      "credentials: key %zu (in the order given) must match "
			      "[A-Za-z_][A-Za-z0-9_-]{0,63}",
			      i + 1);
			return -1;
		}
		if ((c->keys[i] = strdup(key)) == NULL)
			fatal("strdup");
		if (s == NULL) {
			cfail(err, errsz, "credentials.%s: must be a string", key);
			return -1;
		}
		if (n < MCP_CREDS_VALUE_MIN) {
			cfail(err, errsz,
			      "credentials.%s: must be at least %d bytes (every occurrence of a "
			      "value is redacted: a shorter one would mask ordinary text)",
			      key, MCP_CREDS_VALUE_MIN);
			return -1;
		}
		if (!cred_value_ok(s, n)) {
			cfail(err, errsz,
			      "credentials.%s: may hold only printable ASCII other than '\"' and '\\' "
			      "(so that it reads the same inside JSON text, where it is redacted)",
			      key);
			return -1;
		}
		if (used + n + 1 > c->valsz) { /* a value is shorter than the text it is in */
			cfail(err, errsz, "credentials: internal error");
			return -1;
		}
		memcpy(c->vals + used, s, n + 1);
		c->off[i] = used;
		c->len[i] = n;
		used += n + 1;
		i++;
	}
	return 0;
}

/*
 * The values jansson copies while parsing (its lexer's buffer, the string
 * objects) would be left in freed memory: for this one parse its allocator
 * wipes on free, and every allocation made under it is freed before the
 * old allocator comes back.
 */
struct mcp_creds *
mcp_creds_parse(const char *text, size_t len, char *err, size_t errsz)
{
	json_malloc_t om;
	json_free_t of;
	json_error_t je;
	struct mcp_creds *c;
	json_t *root;
	int rc = -1;

	if (len > MCP_CREDS_MAX) {
		cfail(err, errsz, "credentials: larger than %d bytes", MCP_CREDS_MAX);
		return NULL;
	}
	if (sodium_init() < 0) /* for sodium_malloc; once is enough, again is cheap */
		fatalx("sodium_init failed");
	if ((c = calloc(1, sizeof(*c))) == NULL)
		fatal("calloc");
	json_get_alloc_funcs(&om, &of);
	json_set_alloc_funcs(wipe_malloc, wipe_free);
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
	if (root == NULL)
		cfail(err, errsz,
		      "credentials: %s (line %d, column %d): they are a JSON object of KEY: value",
		      creds_syntax(&je), je.line, je.column);
	else if (!json_is_object(root))
		cfail(err, errsz, "credentials: must be a JSON object of KEY: value");
	else if (json_object_size(root) == 0)
		cfail(err, errsz,
		      "credentials: an empty object (a server without credentials is given none: "
		      "empty input)");
	else if (json_object_size(root) > MCP_CREDS_KEYS_MAX)
		cfail(err, errsz, "credentials: at most %d keys", MCP_CREDS_KEYS_MAX);
	else
		rc = creds_take(c, root, len, err, errsz);
	json_decref(root);
	json_set_alloc_funcs(om, of);
	sodium_memzero(&je, sizeof(je)); /* its text may quote the input */
	if (rc == -1) {
		mcp_creds_free(c);
		return NULL;
	}
	return c;
}

size_t
mcp_creds_count(const struct mcp_creds *c)
{
	return c != NULL ? c->n : 0;
}

const char *
mcp_creds_key(const struct mcp_creds *c, size_t i)
{
	return c != NULL && i < c->n ? c->keys[i] : NULL;
}

const char *
mcp_creds_value(const struct mcp_creds *c, size_t i, size_t *len)
{
	if (c == NULL || i >= c->n) {
		*len = 0;
		return NULL;
	}
	*len = c->len[i];
	return c->vals + c->off[i];
}

int
mcp_creds_find(const struct mcp_creds *c, const char *key, size_t keylen)
{
	size_t i;

	for (i = 0; c != NULL && i < c->n; i++)
		if (strlen(c->keys[i]) == keylen && memcmp(c->keys[i], key, keylen) == 0)
			return (int)i;
	return -1;
}

size_t
mcp_creds_secrets(const char *text, size_t len, void (*cb)(const char *p, size_t n, void *arg),
                  void *arg)
{
	struct mcp_creds *c = mcp_creds_parse(text, len, NULL, 0);
	size_t i, n = 0;

	for (i = 0; c != NULL && i < c->n; i++, n++)
		cb(c->vals + c->off[i], c->len[i], arg);
	mcp_creds_free(c);
	cb(text, len, arg);
	return n + 1;
}

/* ---- checking a spec ---------------------------------------------------------- */

struct chk {
	const struct mcpspec_ctx *ctx;
	char *err;
	size_t errsz;
	unsigned char used[MCP_CREDS_KEYS_MAX]; /* a reference names credential i */
};

static int fail(struct chk *k, const char *label, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* "label: reason" in k->err; returns -1. */
static int
fail(struct chk *k, const char *label, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (k->err == NULL || k->errsz == 0)
		return -1;
	n = snprintf(k->err, k->errsz, "%s: ", label);
	if (n >= 0 && (size_t)n < k->errsz) {
		va_start(ap, fmt);
		vsnprintf(k->err + n, k->errsz - (size_t)n, fmt, ap);
		va_end(ap);
	}
	return -1;
}

static int
creds_checked(const struct chk *k)
{
	return k->ctx != NULL && (k->ctx->flags & MCPSPEC_F_CREDS);
}

/*
 * The references in s[0..n): every "${" must open ${credentials.KEY};
 * with credentials checked, KEY must be one of them.  Returns how many, or
 * -1.
 */
static int
chk_refs(struct chk *k, const char *label, const char *s, size_t n)
{
	const char *p = s, *end = s + n, *q, *key, *close;
	int refs = 0, idx;

	while ((q = memmem(p, (size_t)(end - p), "${", 2)) != NULL) {
		if ((size_t)(end - q) < REF_OPEN_LEN || memcmp(q, REF_OPEN, REF_OPEN_LEN) != 0)
			return fail(k, label,
			            "only ${credentials.KEY} is expanded (no other ${...})");
		key = q + REF_OPEN_LEN;
		if ((close = memchr(key, '}', (size_t)(end - key))) == NULL)
			return fail(k, label, "an unterminated ${credentials.KEY}");
		if (!key_ok(key, (size_t)(close - key)))
			return fail(
			    k, label,
			    "${credentials.%.*s}: a key must match [A-Za-z_][A-Za-z0-9_-]{0,63}",
			    (int)((close - key) > 64 ? 64 : (close - key)), key);
		if (creds_checked(k)) {
			if ((idx = mcp_creds_find(k->ctx->creds, key, (size_t)(close - key))) < 0)
				return fail(k, label, "${credentials.%.*s}: no such credential",
				            (int)(close - key), key);
			k->used[idx] = 1;
		}
		refs++;
		p = close + 1;
	}
	return refs;
}

static int
chk_timeout(struct chk *k, json_t *out, const json_t *v, const char *field, unsigned dflt,
            unsigned max)
{
	char label[LABEL_MAX];
	json_int_t t;

	snprintf(label, sizeof(label), "spec.%s", field);
	if (v == NULL)
		t = dflt;
	else if (!json_is_integer(v))
		return fail(k, label, "must be a whole number of seconds");
	else if ((t = json_integer_value(v)) < 1 || t > (json_int_t)max)
		return fail(k, label, "must be from 1 to %u seconds", max);
	json_object_set_new(out, field, json_integer(t));
	return 0;
}

/* command: [program, args...]. */
static int
chk_command(struct chk *k, json_t *out, const json_t *v)
{
	char label[LABEL_MAX];
	const char *why;
	json_t *a, *e;
	size_t i;

	if (v == NULL)
		return fail(k, "spec.command", "missing: the server's program and its arguments");
	if (!json_is_array(v))
		return fail(k, "spec.command", "must be an array of strings");
	if (json_array_size(v) == 0)
		return fail(k, "spec.command",
		            "must not be empty: the server's program comes first");
	if (json_array_size(v) > MCPSPEC_ARGV_MAX)
		return fail(k, "spec.command", "at most %d entries", MCPSPEC_ARGV_MAX);
	a = json_array();
	json_object_set_new(out, "command", a);
	json_array_foreach(v, i, e) {
		const char *s = json_string_value(e);
		size_t n = json_string_length(e);

		lab_index(label, sizeof(label), "spec.command", i);
		if (s == NULL)
			return fail(k, label, "must be a string");
		if (n > MCPSPEC_ARG_MAX)
			return fail(k, label, "at most %d bytes", MCPSPEC_ARG_MAX);
		if ((why = text_problem(s, n, 0)) != NULL)
			return fail(k, label, "%s", why);
		if (memmem(s, n, REF_OPEN, REF_OPEN_LEN) != NULL)
			return fail(k, label,
			            "credentials go in env, never in the command line (which other "
			            "processes can read in /proc)");
		if (i == 0 && n == 0)
			return fail(k, label, "the program must not be empty");
		if (i == 0 && s[0] != '/' && memchr(s, '/', n) != NULL)
			return fail(
			    k, label,
			    "the program is an absolute path or a bare name looked up in the "
			    "sandbox's PATH, never a relative path");
		json_array_append_new(a, json_stringn(s, n));
	}
	return 0;
}

/* Environment names the sandbox sets itself, or that change how any
 * program in it starts. */
static const char *const env_reserved[] = {
    "PATH",
    "HOME",
    "LANG",
    "TERM",
    "USER",
    "LOGNAME",
    "SHELL",
    "TMPDIR",
    "PWD",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "http_proxy",
    "https_proxy",
    "NO_PROXY",
    "no_proxy",
    "ALL_PROXY",
    "all_proxy",
    "NODE_USE_ENV_PROXY",
    "JAVA_TOOL_OPTIONS",
};

static const char *
env_name_problem(const char *s, size_t n)
{
	size_t i;

	if (n < 1 || n > MCPSPEC_NAME_MAX || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
		return "not an environment variable name ([A-Za-z_][A-Za-z0-9_]*, at most 128 "
		       "bytes)";
	for (i = 1; i < n; i++)
		if (!(isalnum((unsigned char)s[i]) || s[i] == '_'))
			return "not an environment variable name ([A-Za-z_][A-Za-z0-9_]*, at most "
			       "128 bytes)";
	for (i = 0; i < sizeof(env_reserved) / sizeof(env_reserved[0]); i++)
		if (strcmp(s, env_reserved[i]) == 0)
			return "the sandbox sets this variable itself";
	if (strncmp(s, "AGRIPPA_", 8) == 0)
		return "AGRIPPA_* variables are the daemon's own";
	if (strncmp(s, "LD_", 3) == 0)
		return "the dynamic loader's LD_* variables are not set for a server";
	return NULL;
}

/* Header names the MCP client or HTTP itself sets (lower case). */
static const char *const header_reserved[] = {
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "te",
    "trailer",
    "upgrade",
    "expect",
    "proxy-authorization",
    "proxy-connection",
    "content-type",
    "accept",
    "last-event-id",
};

static const char *
header_name_problem(const char *s, size_t n)
{
	size_t i;

	if (n > MCPSPEC_NAME_MAX || !http_token_ok(s, n))
		return "not an HTTP header name (a token: letters, digits and !#$%&'*+-.^_`|~, at "
		       "most 128 bytes)";
	for (i = 0; i < sizeof(header_reserved) / sizeof(header_reserved[0]); i++)
		if (strcasecmp(s, header_reserved[i]) == 0)
			return "the MCP client or HTTP sets this header itself";
	if (strncasecmp(s, "mcp-", 4) == 0)
		return "Mcp-* headers are the MCP protocol's own";
	return NULL;
}

/* An env value may hold tabs; a header's is printable ASCII (or tab)
 * without leading or trailing white space. */
static const char *
value_problem(const char *s, size_t n, int header)
{
	size_t i;

	if (n > MCPSPEC_VALUE_MAX)
		return "at most 4096 bytes";
	if (!header)
		return text_problem(s, n, 1);
	for (i = 0; i < n; i++)
		if (((unsigned char)s[i] < 0x20 && s[i] != '\t') || (unsigned char)s[i] > 0x7e)
			return "a header value is printable ASCII (or tab)";
	if (n > 0 && (s[0] == ' ' || s[0] == '\t' || s[n - 1] == ' ' || s[n - 1] == '\t'))
		return "a header value neither starts nor ends with white space";
	return NULL;
}

/* env or headers: { NAME: value }. */
static int
chk_vars(struct chk *k, json_t *out, const json_t *v, const char *field, int header)
{
	char parent[LABEL_MAX], label[LABEL_MAX];
	const char *key, *why, *k2;
	json_t *o, *val, *v2;
	size_t max = header ? MCPSPEC_HEADERS_MAX : MCPSPEC_ENV_MAX;

	snprintf(parent, sizeof(parent), "spec.%s", field);
	o = json_object();
	json_object_set_new(out, field, o);
	if (v == NULL)
		return 0;
	if (!json_is_object(v))
		return fail(k, parent, "must be an object of NAME: value");
	if (json_object_size(v) > max)
		return fail(k, parent, "at most %zu entries", max);
	json_object_foreach((json_t *)v, key, val) {
		const char *s = json_string_value(val);
		size_t n = json_string_length(val);

		lab_key(label, sizeof(label), parent, key);
		why = header ? header_name_problem(key, strlen(key))
		             : env_name_problem(key, strlen(key));
		if (why != NULL)
			return fail(k, label, "%s", why);
		json_object_foreach(o, k2, v2) {
			if (header && strcasecmp(k2, key) == 0)
				return fail(k, label, "the same header as %s (names know no case)",
				            k2);
		}
		if (s == NULL)
			return fail(k, label, "must be a string");
		if ((why = value_problem(s, n, header)) != NULL)
			return fail(k, label, "%s", why);
		if (chk_refs(k, label, s, n) == -1)
			return -1;
		json_object_set_new(o, key, json_stringn(s, n));
	}
	return 0;
}

/* Where the sandbox mounts its own: never a server's path. */
static const char *const sandbox_own[] = {"/proc", "/dev", "/sys", "/tmp", "/workspace"};

int
mcpspec_path_overlaps(const char *path, const char *forbidden)
{
	size_t pn = strlen(path), fn = strlen(forbidden), m;

	while (fn > 1 && forbidden[fn - 1] == '/')
		fn--;
	m = pn < fn ? pn : fn;
	if (m == 1) /* "/" holds everything */
		return 1;
	if (m == 0 || memcmp(path, forbidden, m) != 0)
		return 0;
	if (pn == fn)
		return 1;
	return (pn > fn ? path[m] : forbidden[m]) == '/';
}

/* Why s[0..n) is not an absolute path in normal form, or NULL. */
static const char *
path_problem(const char *s, size_t n)
{
	const char *why;

	if (n == 0 || s[0] != '/')
		return "must be an absolute path";
	if (n > MCPSPEC_PATH_MAX)
		return "at most 1024 bytes";
	if ((why = text_problem(s, n, 0)) != NULL)
		return why;
	if (n == 1)
		return "the whole file system is never mounted";
	if (s[n - 1] == '/')
		return "must not end with '/'";
	if (memmem(s, n, "//", 2) != NULL)
		return "must not hold '//'";
	if (memmem(s, n, "/./", 3) != NULL || memmem(s, n, "/../", 4) != NULL ||
	    (n >= 2 && memcmp(s + n - 2, "/.", 2) == 0) ||
	    (n >= 3 && memcmp(s + n - 3, "/..", 3) == 0))
		return "must not hold '.' or '..' components";
	return NULL;
}

/* With MCPSPEC_F_RESOLVE: where path s leads, when it exists, checked too. */
static int
chk_resolved(struct chk *k, const char *label, const char *s)
{
	char real[PATH_MAX];
	size_t f;

	if (k->ctx == NULL || !(k->ctx->flags & MCPSPEC_F_RESOLVE) || realpath(s, real) == NULL ||
	    strcmp(real, s) == 0)
		return 0;
	if (strcmp(real, "/") == 0)
		return fail(k, label, "%s: leads to /: the whole file system is never mounted", s);
	for (f = 0; f < k->ctx->nforbidden; f++)
		if (mcpspec_path_overlaps(real, k->ctx->forbidden[f]))
			return fail(k, label,
			            "%s: leads to %s, which overlaps %s, the daemon's own: never "
			            "mounted for a server",
			            s, real, k->ctx->forbidden[f]);
	for (f = 0; f < sizeof(sandbox_own) / sizeof(sandbox_own[0]); f++)
		if (mcpspec_path_overlaps(real, sandbox_own[f]) &&
		    strlen(real) >= strlen(sandbox_own[f]))
			return fail(k, label, "%s: leads to %s: the sandbox mounts its own %s", s,
			            real, sandbox_own[f]);
	return 0;
}

static int
chk_paths(struct chk *k, json_t *out, const json_t *v)
{
	char label[LABEL_MAX];
	const char *why;
	json_t *a, *e, *prev;
	size_t i, j, f;

	a = json_array();
	json_object_set_new(out, "paths", a);
	if (v == NULL)
		return 0;
	if (!json_is_array(v))
		return fail(k, "spec.paths", "must be an array of absolute directory paths");
	if (json_array_size(v) > MCPSPEC_PATHS_MAX)
		return fail(k, "spec.paths", "at most %d entries", MCPSPEC_PATHS_MAX);
	json_array_foreach(v, i, e) {
		const char *s = json_string_value(e);
		size_t n = json_string_length(e);

		lab_index(label, sizeof(label), "spec.paths", i);
		if (s == NULL)
			return fail(k, label, "must be a string");
		if ((why = path_problem(s, n)) != NULL)
			return fail(k, label, "%s", why);
		for (f = 0; k->ctx != NULL && f < k->ctx->nforbidden; f++)
			if (mcpspec_path_overlaps(s, k->ctx->forbidden[f]))
				return fail(k, label,
				            "%s: overlaps %s, the daemon's own (state, keys, "
				            "configuration): never mounted for a server",
				            s, k->ctx->forbidden[f]);
		for (f = 0; f < sizeof(sandbox_own) / sizeof(sandbox_own[0]); f++)
			if (mcpspec_path_overlaps(s, sandbox_own[f]) &&
			    strlen(s) >= strlen(sandbox_own[f]))
				return fail(k, label, "%s: the sandbox mounts its own %s", s,
				            sandbox_own[f]);
		if (chk_resolved(k, label, s) == -1)
			return -1;
		json_array_foreach(a, j, prev) {
			if (strcmp(json_string_value(prev), s) == 0)
				return fail(k, label, "%s: duplicate entry", s);
		}
		json_array_append_new(a, json_stringn(s, n));
	}
	return 0;
}

static int
chk_workspace(struct chk *k, json_t *out, const json_t *v)
{
	const char *s = v != NULL ? json_string_value(v) : "none";

	if (s == NULL ||
	    (strcmp(s, "none") != 0 && strcmp(s, "read") != 0 && strcmp(s, "write") != 0))
		return fail(k, "spec.workspace", "must be \"none\", \"read\" or \"write\"");
	json_object_set_new(out, "workspace", json_string(s));
	return 0;
}

/* A preset's name: [a-z0-9][a-z0-9_-]{0,31}, as a template's. */
static int
preset_ok(const char *s, size_t n)
{
	size_t i;

	if (n < 1 || n > MCPSPEC_PRESET_NAME_MAX)
		return 0;
	for (i = 0; i < n; i++) {
		int alnum = (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9');

		if (!alnum && (i == 0 || (s[i] != '_' && s[i] != '-')))
			return 0;
	}
	return 1;
}

/* One network list (allow: egress rules in canonical text; presets: names). */
static int
chk_netlist(struct chk *k, json_t *out, const json_t *v, int allow)
{
	const char *field = allow ? "allow" : "presets";
	char parent[LABEL_MAX], label[LABEL_MAX], text[EGRESS_RULE_TEXT_MAX + 1];
	size_t max = allow ? MCPSPEC_ALLOW_MAX : MCPSPEC_PRESETS_MAX, i, j;
	struct egress_rule r;
	const char *why;
	json_t *a, *e, *prev;

	snprintf(parent, sizeof(parent), "spec.network.%s", field);
	a = json_array();
	json_object_set_new(out, field, a);
	if (v == NULL)
		return 0;
	if (!json_is_array(v))
		return fail(k, parent, "must be an array of strings");
	if (json_array_size(v) > max)
		return fail(k, parent, "at most %zu entries", max);
	json_array_foreach(v, i, e) {
		const char *s = json_string_value(e);
		size_t n = json_string_length(e);

		lab_index(label, sizeof(label), parent, i);
		if (s == NULL)
			return fail(k, label, "must be a string");
		if (allow && memmem(s, n, "${", 2) != NULL)
			return fail(k, label, "no ${...} in a network entry");
		if (allow && (why = egress_rule_parse(s, n, &r)) != NULL)
			return fail(k, label, "%s", why);
		if (allow)
			egress_rule_format(&r, text, sizeof(text));
		else if (!preset_ok(s, n))
			return fail(k, label,
			            "a preset's name must match [a-z0-9][a-z0-9_-]{0,31}");
		else
			snprintf(text, sizeof(text), "%s", s);
		json_array_foreach(a, j, prev) {
			if (strcmp(json_string_value(prev), text) == 0)
				return fail(k, label, "duplicate entry '%s'", text);
		}
		json_array_append_new(a, json_string(text));
	}
	return 0;
}

static int
chk_network(struct chk *k, json_t *out, const json_t *v)
{
	char label[LABEL_MAX];
	const char *key;
	json_t *o, *val;

	if (v == NULL || json_is_null(v)) {
		json_object_set_new(out, "network", json_null());
		return 0;
	}
	if (!json_is_object(v))
		return fail(k, "spec.network",
		            "must be an object { \"allow\": [...], \"presets\": [...] } or null");
	json_object_foreach((json_t *)v, key, val) {
		if (strcmp(key, "allow") != 0 && strcmp(key, "presets") != 0) {
			lab_key(label, sizeof(label), "spec.network", key);
			return fail(k, label, "unknown field (allow and presets are)");
		}
	}
	o = json_object();
	json_object_set_new(out, "network", o);
	if (chk_netlist(k, o, json_object_get(v, "allow"), 1) == -1 ||
	    chk_netlist(k, o, json_object_get(v, "presets"), 0) == -1)
		return -1;
	if (json_array_size(json_object_get(o, "allow")) == 0 &&
	    json_array_size(json_object_get(o, "presets")) == 0)
		json_object_set_new(out, "network", json_null());
	return 0;
}

/* Whether host (as curl_url gives it) is a loopback host. */
static int
host_loopback(const struct egress_host *h)
{
	static const unsigned char v6one[16] = {[15] = 1};

	if (h->kind == EGRESS_HOST_IPV4)
		return h->addr[0] == 127;
	if (h->kind == EGRESS_HOST_IPV6)
		return memcmp(h->addr, v6one, 16) == 0;
	return strcmp(h->text, "localhost") == 0;
}

static int
url_has(CURLU *u, CURLUPart what)
{
	char *s = NULL;
	int has = curl_url_get(u, what, &s, 0) == CURLUE_OK && s != NULL;

	curl_free(s);
	return has;
}

/* url: https://, or http:// to a loopback host; written back by curl. */
static int
chk_url_parts(struct chk *k, CURLU *u, int https, json_t *out)
{
	struct egress_host h;
	char *host = NULL, *norm = NULL;
	const char *why;
	int rv = -1;

	if (url_has(u, CURLUPART_USER) || url_has(u, CURLUPART_PASSWORD) ||
	    url_has(u, CURLUPART_OPTIONS))
		return fail(k, "spec.url",
		            "must hold no user name or password: credentials go in headers");
	if (url_has(u, CURLUPART_FRAGMENT))
		return fail(k, "spec.url", "must have no fragment");
	if (curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || host == NULL ||
	    host[0] == '\0')
		fail(k, "spec.url", "has no host");
	else if ((why = egress_host_parse(host, strlen(host), &h)) != NULL)
		fail(k, "spec.url", "the host: %s", why);
	else if (!https && !host_loopback(&h))
		fail(
		    k, "spec.url",
		    "http:// only to a loopback host (127.0.0.0/8, [::1], localhost): elsewhere "
		    "the "
		    "headers and their credentials would cross the network in clear; use https://");
	else if (h.kind == EGRESS_HOST_NAME &&
	         curl_url_set(u, CURLUPART_HOST, h.text, 0) != CURLUE_OK) /* in lower case */
		fail(k, "spec.url", "curl cannot write the host back");
	else if (curl_url_get(u, CURLUPART_URL, &norm, 0) != CURLUE_OK || norm == NULL ||
	         strlen(norm) > MCPSPEC_URL_MAX)
		fail(k, "spec.url", "curl cannot write it back");
	else {
		json_object_set_new(out, "url", json_string(norm));
		rv = 0;
	}
	curl_free(host);
	curl_free(norm);
	return rv;
}

static int
chk_url(struct chk *k, json_t *out, const json_t *v)
{
	const char *s = json_string_value(v);
	size_t n = json_string_length(v), i;
	int https, rv;
	CURLU *u;

	if (v == NULL)
		return fail(k, "spec.url", "missing: the server's https:// URL");
	if (s == NULL)
		return fail(k, "spec.url", "must be a string");
	if (n == 0 || n > MCPSPEC_URL_MAX)
		return fail(k, "spec.url", "must be 1 to %d bytes", MCPSPEC_URL_MAX);
	for (i = 0; i < n; i++)
		if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
			return fail(k, "spec.url", "may hold only printable ASCII, no space");
	if (memmem(s, n, "${", 2) != NULL)
		return fail(k, "spec.url",
		            "credentials go in headers, never in the URL (which is logged)");
	https = strncmp(s, "https://", 8) == 0;
	/* curl_url is lenient ("https:/h"): the scheme as written */
	if ((!https && strncmp(s, "http://", 7) != 0) || s[https ? 8 : 7] == '/')
		return fail(k, "spec.url",
		            "must be an https://HOST/... URL (http:// only to a loopback host)");
	if ((u = curl_url()) == NULL)
		fatalx("out of memory");
	if (curl_url_set(u, CURLUPART_URL, s, 0) != CURLUE_OK)
		rv = fail(k, "spec.url", "not a URL curl can read");
	else
		rv = chk_url_parts(k, u, https, out);
	curl_url_cleanup(u);
	return rv;
}

/* The fields of each transport, and the transport's check. */
static const char *const stdio_keys[] = {"transport",       "command",     "env",
                                         "paths",           "workspace",   "network",
                                         "startup_timeout", "call_timeout"};
static const char *const http_keys[] = {"transport", "url", "headers", "call_timeout"};

static int
key_in(const char *key, const char *const *keys, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(key, keys[i]) == 0)
			return 1;
	return 0;
}

#define NKEYS(a) (sizeof(a) / sizeof((a)[0]))

static int
chk_keys(struct chk *k, const json_t *spec, int stdio)
{
	char label[LABEL_MAX];
	const char *key;
	json_t *v;

	json_object_foreach((json_t *)spec, key, v) {
		int mine = stdio ? key_in(key, stdio_keys, NKEYS(stdio_keys))
		                 : key_in(key, http_keys, NKEYS(http_keys));
		int other = stdio ? key_in(key, http_keys, NKEYS(http_keys))
		                  : key_in(key, stdio_keys, NKEYS(stdio_keys));

		if (mine)
			continue;
		lab_key(label, sizeof(label), "spec", key);
		if (other)
			return fail(k, label, "not a field of %s server",
			            stdio ? "a stdio" : "an http");
		return fail(k, label, "unknown field");
	}
	return 0;
}

static int
chk_stdio(struct chk *k, json_t *out, const json_t *spec)
{
	if (chk_command(k, out, json_object_get(spec, "command")) == -1 ||
	    chk_vars(k, out, json_object_get(spec, "env"), "env", 0) == -1 ||
	    chk_paths(k, out, json_object_get(spec, "paths")) == -1 ||
	    chk_workspace(k, out, json_object_get(spec, "workspace")) == -1 ||
	    chk_network(k, out, json_object_get(spec, "network")) == -1 ||
	    chk_timeout(k, out, json_object_get(spec, "startup_timeout"), "startup_timeout",
	                MCPSPEC_STARTUP_DEFAULT, MCPSPEC_STARTUP_MAX) == -1 ||
	    chk_timeout(k, out, json_object_get(spec, "call_timeout"), "call_timeout",
	                MCPSPEC_CALL_DEFAULT, MCPSPEC_CALL_MAX) == -1)
		return -1;
	return 0;
}

static int
chk_http(struct chk *k, json_t *out, const json_t *spec)
{
	if (chk_url(k, out, json_object_get(spec, "url")) == -1 ||
	    chk_vars(k, out, json_object_get(spec, "headers"), "headers", 1) == -1 ||
	    chk_timeout(k, out, json_object_get(spec, "call_timeout"), "call_timeout",
	                MCPSPEC_CALL_DEFAULT, MCPSPEC_CALL_MAX) == -1)
		return -1;
	return 0;
}

/* With credentials checked: every one given is referenced. */
static int
chk_unused(struct chk *k)
{
	char label[LABEL_MAX];
	size_t i, n;

	if (!creds_checked(k))
		return 0;
	n = mcp_creds_count(k->ctx->creds);
	for (i = 0; i < n; i++)
		if (!k->used[i]) {
			snprintf(label, sizeof(label), "credentials.%s",
			         mcp_creds_key(k->ctx->creds, i));
			return fail(k, label,
			            "not referenced by the spec (as ${credentials.%s} in %s)",
			            mcp_creds_key(k->ctx->creds, i), "an env or header value");
		}
	return 0;
}

/* ---- the struct, from the normal form ------------------------------------------- */

static void *
xcalloc(size_t n, size_t sz)
{
	void *p = calloc(n == 0 ? 1 : n, sz);

	if (p == NULL)
		fatal("calloc");
	return p;
}

static void
fill_vars(const json_t *o, struct mcpspec_var **out, size_t *n)
{
	const char *key;
	json_t *v;
	size_t i = 0;

	*n = json_object_size(o);
	*out = xcalloc(*n, sizeof(**out));
	json_object_foreach((json_t *)o, key, v) {
		(*out)[i].name = key;
		(*out)[i].value = json_string_value(v);
		(*out)[i].refs =
		    chk_refs(&(struct chk){0}, "", json_string_value(v), json_string_length(v));
		i++;
	}
}

static const char **
fill_strings(const json_t *a, size_t *n)
{
	const char **out;
	json_t *e;
	size_t i;

	*n = json_array_size(a);
	out = xcalloc(*n + 1, sizeof(*out));
	json_array_foreach(a, i, e) {
		out[i] = json_string_value(e);
	}
	return out;
}

static void
fill(struct mcpspec *s)
{
	const json_t *j = s->json, *net = json_object_get(j, "network"), *allow;
	const char *ws;
	size_t i;

	s->transport = strcmp(json_string_value(json_object_get(j, "transport")), "stdio") == 0
	                   ? MCPSPEC_STDIO
	                   : MCPSPEC_HTTP;
	s->call_timeout = (unsigned)json_integer_value(json_object_get(j, "call_timeout"));
	if (s->transport == MCPSPEC_HTTP) {
		s->url = json_string_value(json_object_get(j, "url"));
		fill_vars(json_object_get(j, "headers"), &s->headers, &s->nheaders);
		return;
	}
	s->argv = fill_strings(json_object_get(j, "command"), &s->argc);
	fill_vars(json_object_get(j, "env"), &s->env, &s->nenv);
	s->paths = fill_strings(json_object_get(j, "paths"), &s->npaths);
	ws = json_string_value(json_object_get(j, "workspace"));
	s->workspace = strcmp(ws, "read") == 0    ? MCPSPEC_WS_READ
	               : strcmp(ws, "write") == 0 ? MCPSPEC_WS_WRITE
	                                          : MCPSPEC_WS_NONE;
	allow = json_object_get(net, "allow");
	s->nallow = json_array_size(allow);
	s->allow = xcalloc(s->nallow, sizeof(*s->allow));
	for (i = 0; i < s->nallow; i++) {
		const json_t *e = json_array_get(allow, i);

		if (egress_rule_parse(json_string_value(e), json_string_length(e), &s->allow[i]) !=
		    NULL)
			fatalx("mcpspec: a checked allow entry does not parse");
	}
	s->presets = fill_strings(json_object_get(net, "presets"), &s->npresets);
	s->startup_timeout = (unsigned)json_integer_value(json_object_get(j, "startup_timeout"));
}

/* ---- entry points ------------------------------------------------------------------ */

struct mcpspec *
mcpspec_check(const json_t *spec, const struct mcpspec_ctx *ctx, char *err, size_t errsz)
{
	struct chk k = {.ctx = ctx, .err = err, .errsz = errsz};
	const json_t *t;
	const char *ts;
	struct mcpspec *s;
	json_t *out;
	int stdio, rc;

	if (err != NULL && errsz > 0)
		err[0] = '\0';
	if (!json_is_object(spec)) {
		fail(&k, "spec", "must be a JSON object");
		return NULL;
	}
	t = json_object_get(spec, "transport");
	if (t == NULL) {
		fail(&k, "spec.transport", "missing: \"stdio\" or \"http\"");
		return NULL;
	}
	ts = json_string_value(t);
	if (ts == NULL || (strcmp(ts, "stdio") != 0 && strcmp(ts, "http") != 0)) {
		fail(&k, "spec.transport", "must be \"stdio\" or \"http\"");
		return NULL;
	}
	stdio = strcmp(ts, "stdio") == 0;
	if (chk_keys(&k, spec, stdio) == -1)
		return NULL;
	out = json_object();
	json_object_set_new(out, "transport", json_string(ts));
	rc = stdio ? chk_stdio(&k, out, spec) : chk_http(&k, out, spec);
	if (rc == -1 || chk_unused(&k) == -1) {
		json_decref(out);
		return NULL;
	}
	s = xcalloc(1, sizeof(*s));
	s->json = out;
	fill(s);
	return s;
}

struct mcpspec *
mcpspec_parse(const char *buf, size_t len, const struct mcpspec_ctx *ctx, char *err, size_t errsz)
{
	struct mcpspec *s;
	json_error_t je;
	json_t *j;

	if (len > MCPSPEC_MAX) {
		cfail(err, errsz, "larger than %d bytes", MCPSPEC_MAX);
		return NULL;
	}
	if ((j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je)) == NULL) {
		for (char *p = je.text; *p != '\0'; p++) /* it may quote the input's bytes */
			if ((unsigned char)*p < 0x20 || *p == 0x7f)
				*p = '?';
		if (je.line > 0)
			cfail(err, errsz, "%d:%d: %s", je.line, je.column, je.text);
		else
			cfail(err, errsz, "spec: %s", je.text);
		return NULL;
	}
	s = mcpspec_check(j, ctx, err, errsz);
	json_decref(j);
	return s;
}

void
mcpspec_free(struct mcpspec *s)
{
	if (s == NULL)
		return;
	free(s->argv);
	free(s->env);
	free(s->paths);
	free(s->allow);
	free(s->presets);
	free(s->headers);
	json_decref(s->json);
	free(s);
}

char *
mcpspec_expand(const char *value, const struct mcp_creds *creds, size_t *len)
{
	const char *p, *q, *key, *close, *v;
	size_t total = 0, vlen, pass;
	char *out = NULL;
	int idx;

	if (sodium_init() < 0)
		fatalx("sodium_init failed");
	/* pass 0 measures, pass 1 writes */
	for (pass = 0; pass < 2; pass++) {
		total = 0;
		for (p = value; (q = strstr(p, "${")) != NULL; p = close + 1) {
			if (strncmp(q, REF_OPEN, REF_OPEN_LEN) != 0 ||
			    (close = strchr(q + REF_OPEN_LEN, '}')) == NULL)
				goto bad;
			key = q + REF_OPEN_LEN;
			if ((idx = mcp_creds_find(creds, key, (size_t)(close - key))) < 0)
				goto bad;
			v = mcp_creds_value(creds, (size_t)idx, &vlen);
			if (pass == 1) {
				memcpy(out + total, p, (size_t)(q - p));
				memcpy(out + total + (q - p), v, vlen);
			}
			total += (size_t)(q - p) + vlen;
		}
		if (pass == 1)
			memcpy(out + total, p, strlen(p) + 1);
		total += strlen(p);
		if (pass == 0 && (out = sodium_malloc(total + 1)) == NULL)
			fatalx("out of memory");
	}
	*len = total;
	return out;
bad:
	if (out != NULL)
		sodium_free(out);
	*len = 0;
	return NULL;
}
