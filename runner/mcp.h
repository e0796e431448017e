#ifndef AGRIPPA_RUNNER_MCP_H
#define AGRIPPA_RUNNER_MCP_H

/*
 * The runner's MCP client (DESIGN.md section 4.2): JSON-RPC 2.0 to one MCP
 * server over the stdio transport, newline-delimited messages on a byte
 * stream (the server's stdout and stdin, or one socket relayed to them).
 *
 * Everything is driven by the caller's libevent loop: nothing here blocks,
 * every answer comes back through a callback.  mcp_new starts the
 * handshake at once:
 *  - era detection as the 2026-07-28 stdio binding says: server/discover
 *    first, with the modern version in _meta.  A DiscoverResult naming
 *    2026-07-28 makes the server modern (stateless: no initialize, _meta on
 *    every request, resultType checked, list_changed through
 *    subscriptions/listen); -32022 (or another error from -32020..-32022) is a
 *    modern server this client cannot speak to; any other error, or no answer
 *    within probe_ms, makes it legacy: initialize, offering 2025-11-25 and
 *    accepting 2025-11-25, 2025-06-18, 2025-03-26 or 2024-11-05, then
 *    notifications/initialized.
 *  - no client capability is declared (no sampling, elicitation or roots):
 *    a server's request other than ping gets -32601.
 *
 * A broken protocol ends the connection, never the process: a line over
 * line_max, a line that is not JSON or not a JSON-RPC message, a batch, an
 * answer to an id never sent, a request in the modern era, EOF or a read
 * error.  The error is kept (mcp_error), the descriptors are closed (the
 * server sees EOF), every request in flight is answered with it, then
 * events->failed runs.  An answer to a request already given up (timed
 * out, cancelled) is ignored.
 *
 * Callbacks may call anything here, mcp_free included (the client is then
 * freed once the callback returns, and nothing more is called).  After
 * mcp_free no callback runs.  Writes to a pipe need SIGPIPE ignored, as
 * every Agrippa process does; sockets are written with MSG_NOSIGNAL.
 */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;

#define MCP_NAME_MAX 64             /* a tool name offered to a model (the providers' limit) */
#define MCP_VERSION_MODERN "2026-07-28"
#define MCP_VERSION_LEGACY "2025-11-25" /* the legacy version initialize offers */

/* Defaults for a zero field of struct mcp_conf. */
#define MCP_LINE_MAX_DEFAULT (8u * 1024 * 1024)
#define MCP_TOOLS_MAX_DEFAULT 128
#define MCP_TOOL_BYTES_MAX_DEFAULT (256u * 1024)
#define MCP_RESULT_MAX_DEFAULT (32u * 1024)
#define MCP_START_MS_DEFAULT 30000
#define MCP_PROBE_MS_DEFAULT 5000
#define MCP_REQUEST_MS_DEFAULT 30000
#define MCP_CALL_MS_DEFAULT 60000
#define MCP_CALL_MAX_MS_DEFAULT 600000

#define MCP_LIST_PAGES_MAX 1000 /* tools/list pages before the listing is an error */
#define MCP_IMAGES_MAX 8        /* images kept from one result; more are described */
#define MCP_IMAGE_MAX (5u * 1024 * 1024) /* bytes of one image's base64 data */
/* base64 bytes of all the images kept from one result: the conversation is
 * stored message by message, each at most IPC_DB_ARG_MAX */
#define MCP_IMAGES_BYTES (256u * 1024)

/* How a client behaves; 0 in a field takes its default. */
struct mcp_conf {
	const char *server;     /* the server's name in mcp__SERVER__TOOL (copied) */
	size_t line_max;        /* bytes of one message line, either way */
	size_t tools_max;       /* tools a listing keeps */
	size_t tool_bytes_max;  /* bytes of the kept definitions (compact JSON) */
	size_t result_max;      /* bytes of a result's text (agent.tool_output_max) */
	uint32_t start_ms;      /* the whole handshake */
	uint32_t probe_ms;      /* server/discover unanswered this long: legacy */
	uint32_t request_ms;    /* each tools/list page */
	uint32_t call_ms;       /* tools/call without news; progress starts it again */
	uint32_t call_max_ms;   /* tools/call whatever the progress */
};

/* What the client tells its owner; any may be NULL. */
struct mcp_events {
	/* The handshake is over: err NULL and the client is ready, or why it
	 * failed (then nothing else is reported: no failed). */
	void (*ready)(void *arg, const char *err);
	/* The server said its tools changed (notifications/tools/list_changed,
	 * on the subscription in the modern era): list them again. */
	void (*tools_changed)(void *arg);
	/* Progress of call (mcp_call's handle); total < 0 when unknown,
	 * message NULL when none (borrowed for the call). */
	void (*progress)(void *arg, uint64_t call, double progress, double total,
	    const char *message);
	/* The connection broke after the handshake (err as mcp_error). */
	void (*failed)(void *arg, const char *err);
};

struct mcp_client;

/*
 * A client on rfd (the server's output) and wfd (its input), which may be
 * the same descriptor; both are taken (made non-blocking, closed by the
 * client).  The handshake starts at once.  conf and events are copied.
 * Returns NULL (the descriptors closed) only when conf->server is empty.
 */
struct mcp_client *mcp_new(struct event_base *base, int rfd, int wfd,
    const struct mcp_conf *conf, const struct mcp_events *events, void *arg);
/* Closes the descriptors and frees everything; no callback runs after. */
void mcp_free(struct mcp_client *c);
/* Why the connection is over, or NULL while it works. */
const char *mcp_error(const struct mcp_client *c);
/* The protocol version in use ("2026-07-28", "2025-11-25", ...), NULL
 * before the handshake ends. */
const char *mcp_version(const struct mcp_client *c);
/* Whether the server is of the modern era (2026-07-28). */
int mcp_modern(const struct mcp_client *c);
/* The server's instructions (borrowed), or NULL. */
const char *mcp_instructions(const struct mcp_client *c);

/* ---- tools/list ---------------------------------------------------------- */

/* A tool kept from a listing. */
struct mcp_tool {
	char *name;        /* the server's name for it */
	char *model_name;  /* mcp__SERVER__TOOL (mcp_tool_name) */
	json_t *def;       /* {name: model_name, description, input_schema}, as agent tools are */
	size_t def_bytes;  /* def as compact JSON */
};

/* A listing: the tools kept, in the server's order, and what was dropped. */
struct mcp_tools {
	struct mcp_tool *v;
	size_t n;
	size_t listed;   /* tools the server listed, over all pages */
	size_t bytes;    /* compact JSON bytes of the kept definitions */
	size_t pages;
	size_t dropped;  /* listed - n */
	json_t *drops;   /* [{name, reason}] for the first 64 dropped */
};
void mcp_tools_free(struct mcp_tools *t);

/* The listing (tools owned by the callee), or NULL and why not. */
typedef void (*mcp_list_cb)(void *arg, struct mcp_tools *tools, const char *err);

/*
 * Lists the server's tools, every page (a cursor seen before, or more than
 * MCP_LIST_PAGES_MAX pages, is an error), each page within request_ms.
 * Tools are taken in order while tools_max and tool_bytes_max allow; a tool
 * over either, without a usable name or inputSchema object, or whose model
 * name another already has, is dropped and named in drops.  cb runs once,
 * from the loop (even when the client is already broken).  Before the
 * handshake ends the request waits for it.
 */
void mcp_list_tools(struct mcp_client *c, mcp_list_cb cb, void *arg);

/* ---- tools/call ---------------------------------------------------------- */

/*
 * A tool's result for the model.  text is every text block in order, each
 * other block described in one line ("[image: image/png, 1234 bytes]"),
 * joined by newlines, and cut at result_max at a UTF-8 boundary with the
 * agent's marker ("[truncated: the first N of M bytes are shown]").
 * content holds the same as neutral blocks: one text block with text,
 * then the images kept ({type: image, source: {type: base64, media_type,
 * data}}: png, jpeg, gif or webp, valid base64, at most MCP_IMAGES_MAX of
 * them and MCP_IMAGES_BYTES of base64 together), for providers that take
 * them; an image not kept is described as "not shown", with why.  is_error for an
 * isError result, a JSON-RPC error (text: the server's message and code),
 * a timeout, a cancel, a broken connection or an answer of the wrong shape:
 * the model sees each as a failed tool.
 */
struct mcp_result {
	int is_error;
	char *text;
	size_t text_len;
	json_t *content;
	size_t images;
	size_t image_bytes; /* their base64 data */
	int cut;          /* text was cut at result_max */
};
void mcp_result_free(struct mcp_result *r);

/* The result (owned by the callee). */
typedef void (*mcp_call_cb)(void *arg, uint64_t call, struct mcp_result *res);

/*
 * Calls tool (the server's name for it) with args (an object, or NULL for
 * none; not kept).  The call may last call_ms, and call_ms again after each
 * notifications/progress that moves forward, never more than call_max_ms;
 * on expiry notifications/cancelled is sent and the call ends timed out.
 * Returns the call's handle (never 0); cb runs once with it, from the loop.
 */
uint64_t mcp_call(struct mcp_client *c, const char *tool, const json_t *args, mcp_call_cb cb,
    void *arg);
/* The caller gives up call: notifications/cancelled goes to the server if
 * it had the request, and the call's cb runs soon after, with an error
 * result "cancelled".  A handle no longer running is ignored. */
void mcp_cancel(struct mcp_client *c, uint64_t call);

/* ---- building blocks (mcp_msg.c, mcp_tools.c), for tests and fuzzing ------ */

/* mcp__SERVER__TOOL for a model: characters outside [A-Za-z0-9_-] become
 * '_'; when one did, or the name is over MCP_NAME_MAX, the name is cut and
 * ends with '_' and 12 hex digits of a BLAKE2b hash (libsodium's
 * generichash) of server and tool as given, so that it stays stable and
 * distinct.  out holds MCP_NAME_MAX + 1 bytes. */
void mcp_tool_name(const char *server, const char *tool, char out[MCP_NAME_MAX + 1]);

/* A line reader with a cap: bytes go in, lines of at most max bytes come
 * out (without the '\n', and without one '\r' before it). */
struct mcp_rd {
	char *buf;
	size_t len, cap, off, scan, max;
};
void mcp_rd_init(struct mcp_rd *r, size_t max);
void mcp_rd_free(struct mcp_rd *r);
/* Room for the next read: *p and the number of bytes it may take (at
 * least 1 unless a line is already over max; mcp_rd_line says so). */
size_t mcp_rd_space(struct mcp_rd *r, char **p);
/* n bytes were written at the place mcp_rd_space gave. */
void mcp_rd_filled(struct mcp_rd *r, size_t n);
/* Copies n bytes in (mcp_rd_space and mcp_rd_filled as often as needed);
 * returns the bytes taken, fewer when a line is over max. */
size_t mcp_rd_feed(struct mcp_rd *r, const void *p, size_t n);
/* 1 and the next line (valid until the reader is used again), 0 when no
 * whole line is there yet, -1 when the line is longer than max. */
int mcp_rd_line(struct mcp_rd *r, const char **line, size_t *len);
/* Bytes of an unfinished line held. */
size_t mcp_rd_pending(const struct mcp_rd *r);

/* One JSON-RPC 2.0 message as MCP allows it. */
enum mcp_msg_kind { MCP_MSG_REQUEST, MCP_MSG_NOTIFICATION, MCP_MSG_RESULT, MCP_MSG_ERROR };
struct mcp_msg {
	enum mcp_msg_kind kind;
	json_t *j;            /* the message (owned; mcp_msg_clear) */
	json_t *id;           /* string or integer; NULL for a notification or an error without id */
	const char *method;   /* requests and notifications */
	json_t *params;       /* an object, or NULL */
	json_t *result;       /* an object */
	json_int_t code;      /* errors */
	const char *message;
	json_t *data;         /* or NULL */
};
/*
 * Decodes one line: an object with jsonrpc "2.0" that is a request
 * (method, id a string or an integer, params an object if any), a
 * notification (method, no id), a result (id, result an object) or an
 * error (error {code integer, message string}, id as a request's or null).
 * Returns 0 and fills m, or -1 with err (errsz bytes) saying what is wrong.
 */
int mcp_msg_parse(const char *line, size_t len, struct mcp_msg *m, char *err, size_t errsz);
void mcp_msg_clear(struct mcp_msg *m);

/*
 * A CallToolResult (or error text) turned into a struct mcp_result (new),
 * cut at max bytes of text.  Returns NULL with err set when result is not
 * of the shape (content not an array, isError not a boolean, an unknown
 * resultType, input asked for).
 */
struct mcp_result *mcp_result_from(const json_t *result, size_t max, char *err, size_t errsz);
/* An error result with text (cut at max). */
struct mcp_result *mcp_result_error(const char *text, size_t max);

/*
 * One page of a tools/list result folded into t: each tool checked and
 * kept or dropped as mcp_list_tools says.  Returns 0, or -1 with err when
 * the page is not a ListToolsResult (tools not an array, nextCursor not a
 * string); *next is the page's nextCursor (borrowed from result) or NULL.
 */
int mcp_tools_page(struct mcp_tools *t, const char *server, const json_t *result, size_t tools_max,
    size_t bytes_max, const char **next, char *err, size_t errsz);

#endif
