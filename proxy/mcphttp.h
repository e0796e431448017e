#ifndef AGRIPPA_PROXY_MCPHTTP_H
#define AGRIPPA_PROXY_MCPHTTP_H

/*
 * mcphttp: the bridge between the MCP client's stdio framing and a remote
 * MCP server's Streamable HTTP transport (DESIGN.md section 4.2: remote
 * servers are called by the proxy, which adds their credentials; the runner
 * never holds them).
 *
 * The runner's client (runner/mcp.h) is given one end of a socketpair and
 * speaks newline-delimited JSON-RPC on it as it would to a stdio server;
 * the bridge holds the other end and, on the caller's libevent loop with a
 * libcurl multi handle of its own:
 *  - POSTs every message the client writes to the server's URL, with the
 *    spec's headers (credentials already expanded by the caller),
 *    Accept: application/json, text/event-stream, Content-Type:
 *    application/json, Mcp-Method (and Mcp-Name for tools/call,
 *    resources/read and prompts/get; =?base64?...?= when the value is not
 *    header-safe), MCP-Protocol-Version (the request's _meta version in the
 *    modern era, else the version the InitializeResult passing through
 *    named), and Mcp-Session-Id once the server assigned one;
 *  - writes back as lines every JSON-RPC message an answer carries: a JSON
 *    body, or each event of an SSE stream (requests and notifications
 *    before the response; events without data, such as priming events,
 *    skipped).  A stream that ends before its response, after an event with
 *    an id, is resumed with GET and Last-Event-ID once the server's retry:
 *    (or MCPHTTP_RETRY_MS_DEFAULT) has passed, up to MCPHTTP_RESUMES_MAX
 *    times.  Notifications and responses the client sends expect 202;
 *  - in the legacy era, opens the optional GET stream for server-initiated
 *    messages once notifications/initialized was accepted (405: none);
 *  - when the client closes its end: DELETE with the session id (if any),
 *    then done(arg, NULL).
 *  - a 404 while a session is held is the session's end: every request in
 *    flight is answered with an error, the client's end is closed, and
 *    done(arg, "the server ended the session ...").
 *
 * Every message written back is re-encoded compactly by jansson (so that a
 * secret cannot hide behind \u escapes) and then has every secret of conf
 * replaced by '*' byte for byte (mem_redact, as the supervisor does);
 * so do the bridge's own error texts (which may quote the server).
 *
 * Bounded: an answer or an SSE event over line_max, more than inflight_max
 * requests at once (the next is answered with an error at once), a
 * connection slower than connect_ms, a request (with its resumptions) longer
 * than call_ms, a redirect (never followed).  Every malformed answer (a
 * content type other than the two, a body that is not one JSON-RPC message,
 * a broken SSE stream, a response to another id, an HTTP error) becomes a
 * JSON-RPC error answer to the request's id (code MCPHTTP_ERR_CODE, the
 * reason in message), never a crash; the server's own JSON-RPC error on a
 * 4xx (e.g. -32022 on a version it does not speak) is passed on with the
 * request's id.
 *
 * http:// is refused unless the URL's host is a loopback address (as
 * common/mcpspec.c refuses it at mcp add); only http and https are spoken.
 *
 * Callbacks: done runs once, from the loop, never from mcphttp_new or
 * mcphttp_free; the bridge may be freed from within it.
 */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/util.h"

struct event_base;

#define MCPHTTP_ERR_CODE (-32603) /* the code of the bridge's own error answers */
#define MCPHTTP_INFLIGHT_DEFAULT 16
#define MCPHTTP_CONNECT_MS_DEFAULT 10000
#define MCPHTTP_CALL_MS_DEFAULT 60000
#define MCPHTTP_RETRY_MS_DEFAULT 1000 /* resumption delay without retry: */
#define MCPHTTP_RETRY_MS_MAX 30000    /* a retry: above is taken as this */
#define MCPHTTP_RESUMES_MAX 5         /* GETs resuming one request's stream */
#define MCPHTTP_SESSION_MAX 256       /* bytes of an Mcp-Session-Id */
#define MCPHTTP_SECRETS_MAX 64
#define MCPHTTP_OUT_MAX (64u * 1024 * 1024) /* bytes written back and not yet read */

/* A value to redact from everything written back (at least
 * MCPHTTP_SECRET_MIN bytes: mcphttp_new refuses shorter ones). */
#define MCPHTTP_SECRET_MIN REDACT_MIN
struct mcphttp_secret {
	const char *p;
	size_t len;
};

/* How the bridge behaves; 0 in a field takes its default. */
struct mcphttp_conf {
	size_t line_max;     /* bytes of a line either way, of an answer, of an SSE
	                      * event (MCP_LINE_MAX_DEFAULT) */
	size_t inflight_max; /* requests at once */
	uint32_t connect_ms;
	uint32_t call_ms;                     /* one request, resumptions included: the spec's
	                                       * call_timeout (subscriptions/listen and the GET
	                                       * stream are not capped) */
	const struct mcphttp_secret *secrets; /* copied (sodium_malloc) */
	size_t nsecrets;
	size_t out_max; /* bytes written back the client has not read, at most
	                 * (MCPHTTP_OUT_MAX): past them the bridge ends */
};

struct mcphttp;

/*
 * A bridge on fd (taken: made non-blocking, closed by the bridge) to url,
 * sending headers ("Name: value" lines, values expanded; copied into
 * sodium_malloc memory and wiped when freed) with every request.  Returns
 * NULL with err (errsz bytes) when the URL is refused (not http or https,
 * http:// to a host that is not loopback, not parsed by curl_url), a header
 * is not one "Name: value" line, or there are too many secrets; fd is
 * closed then too.
 */
struct mcphttp *mcphttp_new(struct event_base *base, int fd, const char *url,
                            const char *const *headers, size_t nheaders,
                            const struct mcphttp_conf *conf,
                            void (*done)(void *arg, const char *err), void *arg, char *err,
                            size_t errsz);

/* Ends every transfer, closes fd, wipes and frees; no callback runs after.
 * (No DELETE is sent: the caller who wants one lets the client close.) */
void mcphttp_free(struct mcphttp *h);

/* The session id the server assigned (borrowed), or NULL. */
const char *mcphttp_session(const struct mcphttp *h);

/* ---- building blocks (mcphttp_read.c), for tests and fuzzing ------------- */

/*
 * An SSE parser (the WHATWG event-stream rules): lines end with CRLF, LF
 * or CR; a leading BOM is dropped; ':' lines are comments; data, event, id
 * (without NUL) and retry (digits only) fields; an empty line dispatches.
 * An event's data, or one line, over max bytes is an error.
 */
struct mcphttp_sse {
	char *line; /* the line being read */
	size_t linelen;
	char *data; /* the event's data so far */
	size_t datalen;
	int has_data;
	char event[64];
	char *last_id; /* the last event id set (persists across events) */
	long retry_ms; /* the last retry: given, or -1 */
	size_t max;
	int cr, started, failed;
};

/* One event dispatched: its type ("message" when none), data (NUL-terminated,
 * datalen bytes; never empty: data-less events are not reported). */
typedef int (*mcphttp_sse_cb)(void *arg, const char *event, const char *data, size_t datalen);

void mcphttp_sse_init(struct mcphttp_sse *s, size_t max);
void mcphttp_sse_free(struct mcphttp_sse *s);
/* Feeds n bytes; returns 0, or -1 when an event or a line is over max or cb
 * returned -1 (then nothing more is taken). */
int mcphttp_sse_feed(struct mcphttp_sse *s, const char *p, size_t n, mcphttp_sse_cb cb, void *arg);

/*
 * Checks one message of an answer (text[0..len)): one JSON-RPC message as
 * mcp_msg_parse takes it, no batch.  Returns it re-encoded compactly in a
 * new string (free), *outlen bytes, at most max, with every secret
 * redacted; *kind its kind (enum mcp_msg_kind), *id a new reference to its
 * id or NULL, and *msg (when msg is not NULL) a new reference to the message
 * as parsed, unredacted (to change and write again through redaction: the
 * redacted text may not parse, a number masked).  NULL with err when it is
 * not one.
 */
char *mcphttp_message(const char *text, size_t len, size_t max,
                      const struct mcphttp_secret *secrets, size_t nsecrets, int *kind, json_t **id,
                      json_t **msg, size_t *outlen, char *err, size_t errsz);

/* Replaces each of the secrets in p[0..len) by '*' (byte for byte). */
void mcphttp_redact(char *p, size_t len, const struct mcphttp_secret *secrets, size_t nsecrets);

/*
 * Whether ctype (a Content-Type header value, or NULL) is JSON (1), an
 * event stream (2) or neither (0); parameters and case are ignored.
 */
int mcphttp_ctype(const char *ctype);

/*
 * A value for an Mcp-Name / Mcp-Method header: as it is when every byte is
 * printable ASCII without leading or trailing space, else =?base64?B64?=.
 * Returns a new string (free).
 */
char *mcphttp_header_value(const char *v, size_t len);

#endif
