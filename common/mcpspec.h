/*
 * MCP server definitions (agrippactl mcp add NAME SPEC, agrippactl(8)
 * "MCP SERVER SPECS"): the one reader of a spec and of the credentials
 * given with it.  The supervisor checks both at mcp add and stores the
 * spec in its normal form; whoever later starts or speaks to the server
 * (the supervisor building a stdio server's sandbox, the runner, the
 * proxy) reads the stored form with the same functions, so that a field
 * means the same everywhere.
 *
 * A spec is a JSON object of one of two shapes:
 *   { "transport": "stdio",
 *     "command": [ str, ... ],            argv; [0] absolute, or a bare name
 *     "env": { NAME: str },               values may name ${credentials.KEY}
 *     "paths": [ "/abs/dir", ... ],        host directories mounted read-only
 *     "workspace": "none"|"read"|"write",  default "none"
 *     "network": { "allow": [ str ], "presets": [ str ] } or null,
 *     "startup_timeout": int, "call_timeout": int }     seconds
 *   { "transport": "http",
 *     "url": "https://...",                http:// only to a loopback host
 *     "headers": { NAME: str },            values may name ${credentials.KEY}
 *     "call_timeout": int }
 * Every other key, a key of the other shape, a wrong type or a value out of
 * range is refused with the field named ("spec.env.TOKEN: ...").
 *
 * The credentials, given on agrippactl's standard input, are a JSON object
 * of KEY: value; a value may appear in a spec only through a reference,
 * ${credentials.KEY}, in an env or a header value, never in argv, a URL or
 * anything stored in plain text.
 *
 * Not thread-safe: mcp_creds_parse swaps jansson's allocator for a moment.
 */
#ifndef AGRIPPA_MCPSPEC_H
#define AGRIPPA_MCPSPEC_H

#include <stddef.h>

#include <jansson.h>

#include "egress/policy.h"

#define MCPSPEC_MAX (64 * 1024) /* bytes of a spec file */
#define MCPSPEC_ARGV_MAX 64     /* command: entries */
#define MCPSPEC_ARG_MAX 4096    /* command: bytes of one entry */
#define MCPSPEC_ENV_MAX 64      /* env: entries */
#define MCPSPEC_HEADERS_MAX 32  /* headers: entries */
#define MCPSPEC_NAME_MAX 128    /* bytes of an env or header name */
#define MCPSPEC_VALUE_MAX 4096  /* bytes of an env or header value, as written */
#define MCPSPEC_PATHS_MAX 16    /* paths: entries */
#define MCPSPEC_PATH_MAX 1024   /* bytes of one path */
#define MCPSPEC_ALLOW_MAX 64    /* network.allow: entries, as a template's */
#define MCPSPEC_PRESETS_MAX 16  /* network.presets: names, as a template's */
#define MCPSPEC_PRESET_NAME_MAX 32
#define MCPSPEC_URL_MAX 2048
#define MCPSPEC_STARTUP_DEFAULT 30 /* startup_timeout, seconds: 1 .. 600 */
#define MCPSPEC_STARTUP_MAX 600
#define MCPSPEC_CALL_DEFAULT 60 /* call_timeout, seconds: 1 .. 3600 */
#define MCPSPEC_CALL_MAX 3600
/* MCP servers one agent step may require (a template's requires.mcp_servers),
 * which the runner runs at once and the supervisor lets a run run */
#define MCPSPEC_STEP_SERVERS_MAX 16

#define MCP_CREDS_MAX 4096 /* bytes of the credentials' text */
#define MCP_CREDS_KEYS_MAX 32
#define MCP_CREDS_KEY_MAX 64  /* bytes of a key: [A-Za-z_][A-Za-z0-9_-]* */
#define MCP_CREDS_VALUE_MIN 8 /* bytes of a value: shorter would redact text */

/* ---- credentials ---------------------------------------------------------- */

struct mcp_creds;

/*
 * Parse the credentials text[0..len): a JSON object (whitespace and one
 * line or several alike) of at most MCP_CREDS_KEYS_MAX keys, each matching
 * [A-Za-z_][A-Za-z0-9_-]{0,63}, each value a string of MCP_CREDS_VALUE_MIN
 * to MCP_CREDS_MAX bytes of printable ASCII other than '"' and '\' (a value
 * then reads the same raw and inside JSON text, where redaction finds it).
 * An empty object is refused: no credentials is empty input.
 * Returns the credentials (free with mcp_creds_free), or NULL with the
 * reason in err ("credentials: ...", never quoting a value; err may be
 * NULL).  Every copy jansson made while parsing is wiped before it is
 * freed; the values are kept in sodium_malloc memory.
 */
struct mcp_creds *mcp_creds_parse(const char *text, size_t len, char *err, size_t errsz);

/* Wipe and free (NULL is fine). */
void mcp_creds_free(struct mcp_creds *c);

size_t mcp_creds_count(const struct mcp_creds *c);
/* The i-th key, in the order given, and its value (len bytes, NUL-terminated). */
const char *mcp_creds_key(const struct mcp_creds *c, size_t i);
const char *mcp_creds_value(const struct mcp_creds *c, size_t i, size_t *len);
/* The index of key[0..keylen), or -1. */
int mcp_creds_find(const struct mcp_creds *c, const char *key, size_t keylen);

/*
 * Every byte string to redact for credentials text[0..len) as stored
 * (an MCP server's opened credentials): cb(p, n, arg) for each value of a
 * text mcp_creds_parse accepts, then for the whole text, which is all that
 * versions stored before the credentials were an object can be redacted
 * by.  p is valid only during the call.  Returns how many calls were made.
 */
size_t mcp_creds_secrets(const char *text, size_t len,
                         void (*cb)(const char *p, size_t n, void *arg), void *arg);

/* ---- specs ------------------------------------------------------------------ */

enum mcpspec_transport {
	MCPSPEC_STDIO = 1,
	MCPSPEC_HTTP,
};

enum mcpspec_workspace {
	MCPSPEC_WS_NONE = 0,
	MCPSPEC_WS_READ,
	MCPSPEC_WS_WRITE,
};

/* An env entry or a header: value as written, references unexpanded. */
struct mcpspec_var {
	const char *name;
	const char *value;
	int refs; /* how many ${credentials.KEY} the value names */
};

/*
 * A checked spec.  Every string points into json, the normal form (what
 * mcp add stores), which lives as long as the spec.
 */
struct mcpspec {
	json_t *json;
	enum mcpspec_transport transport;
	unsigned call_timeout; /* seconds */
	/* stdio */
	const char **argv; /* argc entries, then NULL */
	size_t argc;
	struct mcpspec_var *env;
	size_t nenv;
	const char **paths;
	size_t npaths;
	enum mcpspec_workspace workspace;
	struct egress_rule *allow; /* no network when both lists are empty */
	size_t nallow;
	const char **presets; /* names of egress.presets, checked for their form only */
	size_t npresets;
	unsigned startup_timeout; /* seconds */
	/* http */
	const char *url; /* as curl_url writes it back */
	struct mcpspec_var *headers;
	size_t nheaders;
};

#define MCPSPEC_F_CREDS                                                                            \
	0x1 /* check references against creds (NULL: none given),                                  \
	     * and that every credential is referenced */
#define MCPSPEC_F_RESOLVE                                                                          \
	0x2 /* also check what each path that exists resolves to                                   \
	     * (realpath): a link into the daemon's own is refused */

struct mcpspec_ctx {
	int flags;
	const struct mcp_creds *creds;
	/* Host paths no server may mount: a path that is one of them, is
	 * below one or holds one is refused (the daemon's state directory, its
	 * key, configuration and socket). */
	const char *const *forbidden;
	size_t nforbidden;
};

/*
 * Check the spec object and build its normal form: every field present,
 * defaults filled in ("env": {}, "paths": [], "workspace": "none",
 * "network": null, the timeouts), network entries in their canonical text
 * (a network that allows nothing is null),
 * the URL as curl_url writes it.  ctx may be NULL (no credential or path
 * checks: a stored spec read back).  Returns the spec (free with
 * mcpspec_free), or NULL with one error in err naming the field:
 * "spec.FIELD: reason".
 */
struct mcpspec *mcpspec_check(const json_t *spec, const struct mcpspec_ctx *ctx, char *err,
                              size_t errsz);

/* The same from bytes (at most MCPSPEC_MAX): "LINE:COLUMN: reason" when
 * they are not one JSON object without duplicate keys. */
struct mcpspec *mcpspec_parse(const char *buf, size_t len, const struct mcpspec_ctx *ctx, char *err,
                              size_t errsz);

void mcpspec_free(struct mcpspec *s);

/*
 * Whether the absolute, normal path (no "//", ".", ".." or trailing '/')
 * and forbidden (absolute, trailing '/' ignored) overlap: the same, one
 * below the other.
 */
int mcpspec_path_overlaps(const char *path, const char *forbidden);

/*
 * value (an env or header value of a checked spec) with each
 * ${credentials.KEY} replaced by its value from creds.  Returns a
 * NUL-terminated string in sodium_malloc memory (*len bytes; free with
 * sodium_free, which wipes it), or NULL when a key is missing.
 */
char *mcpspec_expand(const char *value, const struct mcp_creds *creds, size_t *len);

#endif
