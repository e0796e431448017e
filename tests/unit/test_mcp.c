/*
 * Unit tests for runner/mcp*.c, the runner's MCP client.  The pure parts
 * (names, the line reader, the envelope, results, listings) are tested
 * alone; the client is driven over a socketpair against a fake MCP server
 * on the same event loop that speaks the stdio wire format (one JSON-RPC
 * message a line) of either era, and hostile answers: garbage, a 20 MiB
 * line, a server that never answers initialize, that exits at once, that
 * lists 10,000 tools or repeats a cursor, an answer to an id never sent, a
 * result of the wrong shape.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <sys/socket.h>

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runner/mcp.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
#define LATER_MAX 256

/* ---- the fake server ------------------------------------------------------ */

enum { DISC_LEGACY, DISC_MODERN, DISC_SILENT, DISC_UNSUPPORTED };
enum { INIT_OK, INIT_SILENT, INIT_ERROR };

struct later {
	struct event *ev;
	json_t *msg;     /* sent when it fires, or NULL */
	int close;       /* the server closes then */
};

struct fake {
	struct event_base *base;
	int fd;
	struct event *rev, *wev;
	char *in;
	size_t inlen, incap;
	char *out;
	size_t outlen, outoff, outcap;
	json_t *got;            /* every message received, in order */
	int disc, init;
	const char *init_version;
	int list_changed;       /* the initialize result says tools.listChanged */
	int late_tool;          /* a tool appears after notifications/initialized */
	json_t *tools;
	size_t page;            /* tools per page, 0 for one page */
	int repeat_cursor;
	int modern_meta_missing; /* modern: requests without the required _meta */
	json_int_t listen_id;
	int progress_n, progress_ms; /* "slow" and "stall" */
	json_t *pending_call;   /* "ask": the call waiting for the client's answers */
	int answers_seen;
	struct later later[LATER_MAX];
	size_t nlater;
};

static struct fake F;

static void
fake_flush(struct fake *f)
{
	ssize_t n;

	while (f->outoff < f->outlen) {
		n = send(f->fd, f->out + f->outoff, f->outlen - f->outoff, MSG_NOSIGNAL);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && errno == EAGAIN) {
			event_add(f->wev, NULL);
			return;
		}
		if (n == -1) {
			/* the client hung up: what is left is dropped */
			f->outoff = f->outlen = 0;
			return;
		}
		f->outoff += (size_t)n;
	}
	f->outoff = f->outlen = 0;
}

static void
fake_raw(struct fake *f, const char *p, size_t n)
{
	if (f->fd == -1)
		return;
	if (f->outlen + n > f->outcap) {
		f->outcap = (f->outlen + n) * 2;
		f->out = realloc(f->out, f->outcap);
		assert_non_null(f->out);
	}
	memcpy(f->out + f->outlen, p, n);
	f->outlen += n;
	fake_flush(f);
}

/* msg (consumed) as a line. */
static void
fake_send(struct fake *f, json_t *msg)
{
	char *s = json_dumps(msg, JSON_COMPACT);

	assert_non_null(s);
	fake_raw(f, s, strlen(s));
	fake_raw(f, "\n", 1);
	free(s);
	json_decref(msg);
}

static void
fake_result(struct fake *f, json_t *id, json_t *result)
{
	fake_send(f, json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result));
}

static void
fake_error(struct fake *f, json_t *id, int code, const char *message, json_t *data)
{
	json_t *e = json_pack("{s:i, s:s}", "code", code, "message", message);

	if (data != NULL)
		json_object_set_new(e, "data", data);
	fake_send(f, json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "error", e));
}

static void
fake_close(struct fake *f)
{
	if (f->fd == -1)
		return;
	event_free(f->rev);
	event_free(f->wev);
	close(f->fd);
	f->fd = -1;
}

static void
later_cb(evutil_socket_t fd, short what, void *arg)
{
	struct later *l = arg;

	if (l->msg != NULL) {
		fake_send(&F, l->msg);
		l->msg = NULL;
	}
	if (l->close)
		fake_close(&F);
}

/* msg (consumed; NULL for none) sent ms from now; close: then hang up. */
static void
fake_later(struct fake *f, int ms, json_t *msg, int close_after)
{
	struct later *l;
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};

	assert_true(f->nlater < LATER_MAX);
	l = &f->later[f->nlater++];
	l->msg = msg;
	l->close = close_after;
	l->ev = evtimer_new(f->base, later_cb, l);
	evtimer_add(l->ev, &tv);
}

static json_t *
text_result(const char *text)
{
	return json_pack("{s:[{s:s, s:s}]}", "content", "type", "text", "text", text);
}

static json_t *
progress_msg(json_t *token, int i, int total)
{
	return json_pack("{s:s, s:s, s:{s:O, s:i, s:i, s:s}}", "jsonrpc", "2.0", "method",
	    "notifications/progress", "params", "progressToken", token, "progress", i, "total",
	    total, "message", "working");
}

static void
fake_list(struct fake *f, json_t *id, json_t *params)
{
	const char *cursor = json_string_value(json_object_get(params, "cursor"));
	size_t off = cursor != NULL ? strtoul(cursor + 1, NULL, 10) : 0, n, i;
	json_t *page = json_array(), *res;
	char next[32];

	n = f->page == 0 ? json_array_size(f->tools) : f->page;
	for (i = off; i < off + n && i < json_array_size(f->tools); i++)
		json_array_append(page, json_array_get(f->tools, i));
	res = json_pack("{s:o}", "tools", page);
	if (f->repeat_cursor)
		json_object_set_new(res, "nextCursor", json_string("same"));
	else if (off + n < json_array_size(f->tools)) {
		snprintf(next, sizeof(next), "c%zu", off + n);
		json_object_set_new(res, "nextCursor", json_string(next));
	}
	if (f->disc == DISC_MODERN)
		json_object_set_new(res, "resultType", json_string("complete"));
	fake_result(f, id, res);
}

static const char png_b64[] = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    "YPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

static void
fake_call(struct fake *f, json_t *id, json_t *params)
{
	const char *name = json_string_value(json_object_get(params, "name"));
	json_t *args = json_object_get(params, "arguments");
	json_t *token = json_object_get(json_object_get(params, "_meta"), "progressToken");
	char *big;
	int i;

	if (strcmp(name, "echo") == 0)
		fake_result(f, id, text_result(json_string_value(json_object_get(args, "message"))));
	else if (strcmp(name, "image") == 0)
		fake_result(f, id, json_pack("{s:[{s:s, s:s}, {s:s, s:s, s:s}, {s:s, s:s, s:s}, "
		    "{s:s, s:s, s:s}]}", "content", "type", "text", "text", "a picture", "type",
		    "image", "data", png_b64, "mimeType", "image/png", "type", "image", "data",
		    "!!not base64!!", "mimeType", "image/png", "type", "image", "data", png_b64,
		    "mimeType", "image/tiff"));
	else if (strcmp(name, "bigimages") == 0) {
		/* two images of 200 KiB of base64 each: one fits MCP_IMAGES_BYTES */
		if ((big = malloc(204801)) == NULL)
			abort();
		for (i = 0; i < 204800; i++)
			big[i] = 'A';
		big[204800] = '\0';
		fake_result(f, id, json_pack("{s:[{s:s, s:s, s:s}, {s:s, s:s, s:s}]}", "content",
		    "type", "image", "data", big, "mimeType", "image/png", "type", "image", "data", big,
		    "mimeType", "image/gif"));
		free(big);
	} else if (strcmp(name, "blocks") == 0)
		fake_result(f, id, json_pack("{s:[{s:s, s:s, s:s}, {s:s, s:s, s:s}, "
		    "{s:s, s:{s:s, s:s}}, {s:s, s:{s:s, s:s, s:s}}, {s:s}, {s:i}]}", "content",
		    "type", "audio", "data", "AAAA", "mimeType", "audio/wav",
		    "type", "resource_link", "uri", "file:///a.txt", "name", "a.txt",
		    "type", "resource", "resource", "uri", "file:///b.txt", "text", "bee",
		    "type", "resource", "resource", "uri", "file:///c.bin", "blob", "AAAA",
		    "mimeType", "application/octet-stream", "type", "hologram", "x", 1));
	else if (strcmp(name, "fail") == 0)
		fake_result(f, id, json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text",
		    "text", "it broke", "isError", 1));
	else if (strcmp(name, "rpcerr") == 0)
		fake_error(f, id, -32602, "Unknown tool: rpcerr", NULL);
	else if (strcmp(name, "wrongshape") == 0)
		fake_result(f, id, json_pack("{s:s}", "content", "not an array"));
	else if (strcmp(name, "structured") == 0)
		fake_result(f, id, json_pack("{s:[], s:{s:i}}", "content", "structuredContent",
		    "a", 1));
	else if (strcmp(name, "input") == 0)
		fake_result(f, id, json_pack("{s:s, s:{s:{s:s}}, s:s}", "resultType",
		    "input_required", "inputRequests", "k", "method", "elicitation/create",
		    "requestState", "x"));
	else if (strcmp(name, "rtbad") == 0)
		fake_result(f, id, json_pack("{s:s, s:[]}", "resultType", "weird", "content"));
	else if (strcmp(name, "big") == 0) {
		big = malloc(100001);
		memset(big, 'x', 100000);
		/* a 2-byte character across the cut at 1000 */
		memcpy(big + 999, "\xc3\xa9", 2);
		big[100000] = '\0';
		fake_result(f, id, text_result(big));
		free(big);
	} else if (strcmp(name, "slow") == 0 || strcmp(name, "stall") == 0) {
		for (i = 1; i <= f->progress_n; i++)
			fake_later(f, i * f->progress_ms, progress_msg(token, i, f->progress_n), 0);
		if (strcmp(name, "slow") == 0)
			fake_later(f, (f->progress_n + 1) * f->progress_ms, json_pack("{s:s, s:O, s:o}",
			    "jsonrpc", "2.0", "id", id, "result", text_result("done")), 0);
	} else if (strcmp(name, "ask") == 0) {
		/* requests of a server that the client declared no capability for */
		fake_send(f, json_pack("{s:s, s:s, s:s, s:{}}", "jsonrpc", "2.0", "id", "s1",
		    "method", "sampling/createMessage", "params"));
		fake_send(f, json_pack("{s:s, s:s, s:s, s:{}}", "jsonrpc", "2.0", "id", "s2",
		    "method", "elicitation/create", "params"));
		fake_send(f, json_pack("{s:s, s:i, s:s}", "jsonrpc", "2.0", "id", 3, "method",
		    "roots/list"));
		fake_send(f, json_pack("{s:s, s:i, s:s}", "jsonrpc", "2.0", "id", 4, "method",
		    "ping"));
		f->pending_call = json_incref(id);
	} else if (strcmp(name, "badid") == 0)
		fake_send(f, json_pack("{s:s, s:i, s:o}", "jsonrpc", "2.0", "id", 999999, "result",
		    text_result("?")));
	else if (strcmp(name, "strid") == 0)
		fake_send(f, json_pack("{s:s, s:s, s:o}", "jsonrpc", "2.0", "id", "1", "result",
		    text_result("?")));
	/* "never" and anything else: no answer */
}

static int
has_modern_meta(json_t *params)
{
	json_t *meta = json_object_get(params, "_meta");

	return json_is_string(json_object_get(meta, "io.modelcontextprotocol/protocolVersion")) &&
	    json_is_object(json_object_get(meta, "io.modelcontextprotocol/clientCapabilities")) &&
	    json_is_object(json_object_get(meta, "io.modelcontextprotocol/clientInfo"));
}

static void
fake_request(struct fake *f, json_t *msg, const char *method, json_t *id, json_t *params)
{
	if (f->disc == DISC_MODERN && !has_modern_meta(params))
		f->modern_meta_missing++;
	if (strcmp(method, "server/discover") == 0) {
		if (f->disc == DISC_LEGACY)
			fake_error(f, id, -32601, "Method not found", NULL);
		else if (f->disc == DISC_MODERN)
			fake_result(f, id, json_pack("{s:s, s:[s], s:{s:{s:b}}, s:s, s:{s:{s:s, s:s}}}",
			    "resultType", "complete", "supportedVersions", "2026-07-28",
			    "capabilities", "tools", "listChanged", 1, "instructions", "be kind",
			    "_meta", "io.modelcontextprotocol/serverInfo", "name", "fake", "version",
			    "1"));
		else if (f->disc == DISC_UNSUPPORTED)
			fake_error(f, id, -32022, "Unsupported protocol version",
			    json_pack("{s:[s], s:s}", "supported", "2027-01-01", "requested",
			    "2026-07-28"));
	} else if (strcmp(method, "initialize") == 0) {
		if (f->init == INIT_OK)
			fake_result(f, id, json_pack("{s:s, s:{s:{s:b}}, s:{s:s, s:s}}",
			    "protocolVersion", f->init_version != NULL ? f->init_version :
			    "2025-11-25", "capabilities", "tools", "listChanged", f->list_changed,
			    "serverInfo", "name", "fake", "version", "1"));
		else if (f->init == INIT_ERROR)
			fake_error(f, id, -32600, "no thanks", NULL);
	} else if (strcmp(method, "tools/list") == 0)
		fake_list(f, id, params);
	else if (strcmp(method, "tools/call") == 0)
		fake_call(f, id, params);
	else if (strcmp(method, "subscriptions/listen") == 0) {
		f->listen_id = json_integer_value(id);
		fake_send(f, json_pack("{s:s, s:s, s:{s:{s:O}, s:{s:b}}}", "jsonrpc", "2.0", "method",
		    "notifications/subscriptions/acknowledged", "params", "_meta",
		    "io.modelcontextprotocol/subscriptionId", id, "notifications",
		    "toolsListChanged", 1));
	}
	(void)msg;
}

static void
fake_msg(struct fake *f, json_t *msg)
{
	const char *method = json_string_value(json_object_get(msg, "method"));
	json_t *id = json_object_get(msg, "id");

	json_array_append(f->got, msg);
	if (method == NULL) {
		/* an answer of the client's to one of ours */
		if (++f->answers_seen == 4 && f->pending_call != NULL) {
			fake_result(f, f->pending_call, text_result("asked"));
			json_decref(f->pending_call);
			f->pending_call = NULL;
		}
		return;
	}
	if (id != NULL)
		fake_request(f, msg, method, id, json_object_get(msg, "params"));
	else if (strcmp(method, "notifications/initialized") == 0 && f->late_tool) {
		json_array_append_new(f->tools, json_pack("{s:s, s:s, s:{s:s}}", "name", "late",
		    "description", "listed only after initialization", "inputSchema", "type",
		    "object"));
		fake_send(f, json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method",
		    "notifications/tools/list_changed"));
	}
}

static void
fake_read(evutil_socket_t fd, short what, void *arg)
{
	struct fake *f = arg;
	char *nl;
	ssize_t n;
	json_t *msg;
	size_t len;

	if (f->incap - f->inlen < 65536) {
		f->incap = f->incap * 2 + 65536;
		f->in = realloc(f->in, f->incap);
	}
	n = read(f->fd, f->in + f->inlen, f->incap - f->inlen);
	if (n <= 0) {
		if (n == 0 || errno != EAGAIN)
			fake_close(f);
		return;
	}
	f->inlen += (size_t)n;
	while (f->fd != -1 && (nl = memchr(f->in, '\n', f->inlen)) != NULL) {
		len = (size_t)(nl - f->in);
		msg = json_loadb(f->in, len, 0, NULL);
		assert_non_null(msg); /* the client writes only JSON, one message a line */
		memmove(f->in, nl + 1, f->inlen - len - 1);
		f->inlen -= len + 1;
		fake_msg(f, msg);
		json_decref(msg);
	}
}

static void
fake_write(evutil_socket_t fd, short what, void *arg)
{
	fake_flush(arg);
}

/* ---- the client under test ------------------------------------------------ */

static struct {
	struct event_base *base;
	struct mcp_client *c;
	struct mcp_conf conf;
	int ready;
	char ready_err[600];
	int failed;
	char failed_err[600];
	int changed;
	int progress;
	int listed;
	struct mcp_tools *tools;
	char list_err[600];
	int called;
	struct mcp_result *res;
	uint64_t res_call;
	int free_in_cb;
} T;

static void
on_ready(void *arg, const char *err)
{
	T.ready = 1;
	snprintf(T.ready_err, sizeof(T.ready_err), "%s", err != NULL ? err : "");
}

static void
on_changed(void *arg)
{
	T.changed++;
}

static void
on_progress(void *arg, uint64_t call, double p, double total, const char *message)
{
	T.progress++;
	assert_true(total == 5 || total == 30);
	assert_string_equal(message, "working");
}

static void
on_failed(void *arg, const char *err)
{
	T.failed = 1;
	snprintf(T.failed_err, sizeof(T.failed_err), "%s", err);
}

static const struct mcp_events events = {on_ready, on_changed, on_progress, on_failed};

static void
on_list(void *arg, struct mcp_tools *tools, const char *err)
{
	T.listed = 1;
	mcp_tools_free(T.tools);
	T.tools = tools;
	snprintf(T.list_err, sizeof(T.list_err), "%s", err != NULL ? err : "");
	assert_true((tools == NULL) != (err == NULL));
}

static void
on_call(void *arg, uint64_t call, struct mcp_result *res)
{
	T.called = 1;
	mcp_result_free(T.res);
	T.res = res;
	T.res_call = call;
	if (T.free_in_cb) {
		mcp_free(T.c);
		T.c = NULL;
	}
}

static int timed_out;

static void
watchdog(evutil_socket_t fd, short what, void *arg)
{
	timed_out = 1;
}

/* Runs the loop until *flag is set; fails after ms. */
static void
run_until(int *flag, int ms)
{
	struct event *w = evtimer_new(T.base, watchdog, NULL);
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};

	timed_out = 0;
	evtimer_add(w, &tv);
	while (!*flag && !timed_out)
		event_base_loop(T.base, EVLOOP_ONCE);
	event_free(w);
	if (!*flag)
		fail_msg("nothing happened within %d ms", ms);
}

/* Runs the loop for ms. */
static void
run_for(int ms)
{
	int never = 0;
	struct event *w = evtimer_new(T.base, watchdog, NULL);
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};

	timed_out = 0;
	evtimer_add(w, &tv);
	while (!never && !timed_out)
		event_base_loop(T.base, EVLOOP_ONCE);
	event_free(w);
}

static int
setup(void **state)
{
	int sv[2];

	memset(&T, 0, sizeof(T));
	memset(&F, 0, sizeof(F));
	assert_non_null(T.base = event_base_new());
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	F.base = T.base;
	F.fd = sv[1];
	fcntl(F.fd, F_SETFL, O_NONBLOCK);
	F.rev = event_new(T.base, F.fd, EV_READ | EV_PERSIST, fake_read, &F);
	F.wev = event_new(T.base, F.fd, EV_WRITE, fake_write, &F);
	event_add(F.rev, NULL);
	F.got = json_array();
	F.tools = json_array();
	F.list_changed = 1;
	F.progress_ms = 100;
	json_array_append_new(F.tools, json_pack("{s:s, s:s, s:{s:s, s:{s:{s:s}}}}", "name", "echo",
	    "description", "echoes", "inputSchema", "type", "object", "properties", "message",
	    "type", "string"));
	T.conf.server = "fake";
	*state = (void *)(intptr_t)sv[0];
	return 0;
}

static int
teardown(void **state)
{
	size_t i;

	mcp_free(T.c);
	mcp_tools_free(T.tools);
	mcp_result_free(T.res);
	for (i = 0; i < F.nlater; i++) {
		event_free(F.later[i].ev);
		json_decref(F.later[i].msg);
	}
	fake_close(&F);
	free(F.in);
	free(F.out);
	json_decref(F.got);
	json_decref(F.tools);
	json_decref(F.pending_call);
	event_base_free(T.base);
	return 0;
}

static void
start(void **state)
{
	int fd = (int)(intptr_t)*state;

	T.c = mcp_new(T.base, fd, fd, &T.conf, &events, NULL);
	assert_non_null(T.c);
}

static void
start_ready(void **state)
{
	start(state);
	run_until(&T.ready, 5000);
	assert_string_equal(T.ready_err, "");
}

/* The i-th message the fake got whose method is method, or NULL. */
static json_t *
got(const char *method, size_t nth)
{
	json_t *m;
	size_t i;

	json_array_foreach(F.got, i, m)
		if (json_is_string(json_object_get(m, "method")) &&
		    strcmp(json_string_value(json_object_get(m, "method")), method) == 0 && nth-- == 0)
			return m;
	return NULL;
}

static void
call(const char *tool, json_t *args)
{
	T.called = 0;
	mcp_call(T.c, tool, args, on_call, NULL);
	json_decref(args);
	run_until(&T.called, 5000);
	assert_non_null(T.res);
}

static void
list(void)
{
	T.listed = 0;
	mcp_list_tools(T.c, on_list, NULL);
	run_until(&T.listed, 10000);
}

/* ---- names ---------------------------------------------------------------- */

static void
t_names(void **state)
{
	char a[MCP_NAME_MAX + 1], b[MCP_NAME_MAX + 1], longtool[200];

	mcp_tool_name("github", "create_issue", a);
	assert_string_equal(a, "mcp__github__create_issue");
	mcp_tool_name("my-srv", "get-sum", a);
	assert_string_equal(a, "mcp__my-srv__get-sum");
	/* a dot is no character providers take: replaced, and a hash keeps it apart
	 * from the tool really named read_file */
	mcp_tool_name("fs", "read.file", a);
	mcp_tool_name("fs", "read_file", b);
	assert_string_equal(b, "mcp__fs__read_file");
	assert_true(strncmp(a, "mcp__fs__read_file_", 19) == 0);
	assert_int_equal(strlen(a), 19 + 12);
	assert_string_not_equal(a, b);
	/* over 64: cut, with a stable suffix that tells names apart */
	memset(longtool, 'a', sizeof(longtool) - 1);
	longtool[sizeof(longtool) - 1] = '\0';
	mcp_tool_name("server", longtool, a);
	assert_int_equal(strlen(a), MCP_NAME_MAX);
	mcp_tool_name("server", longtool, b);
	assert_string_equal(a, b);
	longtool[150] = 'b';
	mcp_tool_name("server", longtool, b);
	assert_int_equal(strlen(b), MCP_NAME_MAX);
	assert_string_not_equal(a, b);
	assert_memory_equal(a, b, MCP_NAME_MAX - 13);
	assert_int_equal(a[MCP_NAME_MAX - 13], '_');
	/* exactly 64 stays as it is; 65 is cut */
	memset(longtool, 't', 64 - 13);
	longtool[64 - 13] = '\0';
	mcp_tool_name("server", longtool, a);
	assert_int_equal(strlen(a), 64);
	assert_null(strchr(a + 13, '_'));
	strcat(longtool, "u");
	mcp_tool_name("server", longtool, a);
	assert_int_equal(strlen(a), 64);
	assert_int_equal(a[64 - 13], '_');
	/* a long server's name is cut before the tool's */
	mcp_tool_name("a-server-with-a-name-that-is-long-enough-to-push-tools-over", "echo", a);
	assert_int_equal(strlen(a), MCP_NAME_MAX);
	assert_true(strncmp(a, "mcp__a-server-with-a-name-that-is-long-enough__echo_", 52) == 0);
	mcp_tool_name("a-server-with-a-name-that-is-long-enough-to-push-tools-over",
	    "trigger-long-running-operation", a);
	assert_true(strncmp(a, "mcp__a-server-with-__trigger-long-running-operation_", 52) == 0);
	/* the server's name is cleaned too; control bytes never reach a model */
	mcp_tool_name("a b", "x\ny", a);
	assert_true(strncmp(a, "mcp__a_b__x_y_", 14) == 0);
	/* the hash covers server and tool apart: "a"+"b_c" is not "a_b"+"c" */
	mcp_tool_name("a.", "b", a);
	mcp_tool_name("a", ".b", b);
	assert_string_not_equal(a, b);
}

/* ---- the line reader ------------------------------------------------------ */

static void
t_reader(void **state)
{
	struct mcp_rd r;
	const char *line;
	size_t len, i;
	char *big;

	mcp_rd_init(&r, 10);
	assert_int_equal(mcp_rd_feed(&r, "ab", 2), 2);
	assert_int_equal(mcp_rd_line(&r, &line, &len), 0);
	assert_int_equal(mcp_rd_feed(&r, "c\r\nde\n\nfg", 9), 9);
	assert_int_equal(mcp_rd_line(&r, &line, &len), 1);
	assert_int_equal(len, 3);
	assert_memory_equal(line, "abc", 3);
	assert_int_equal(mcp_rd_line(&r, &line, &len), 1);
	assert_int_equal(len, 2);
	assert_int_equal(mcp_rd_line(&r, &line, &len), 1);
	assert_int_equal(len, 0);
	assert_int_equal(mcp_rd_line(&r, &line, &len), 0);
	assert_int_equal(mcp_rd_pending(&r), 2);
	/* exactly max bytes, then one more */
	assert_int_equal(mcp_rd_feed(&r, "34567890\n", 9), 9);
	assert_int_equal(mcp_rd_line(&r, &line, &len), 1);
	assert_int_equal(len, 10);
	assert_int_equal(mcp_rd_feed(&r, "12345678901\n", 12), 11);
	assert_int_equal(mcp_rd_line(&r, &line, &len), -1);
	mcp_rd_free(&r);

	/* a 20 MiB line against a 1 MiB cap: refused once the cap is passed, and the
	 * buffer never grew past it */
	mcp_rd_init(&r, 1u << 20);
	big = malloc(1u << 16);
	memset(big, 'x', 1u << 16);
	for (i = 0; i < 320; i++)
		if (mcp_rd_feed(&r, big, 1u << 16) < (1u << 16))
			break;
	assert_true(i < 320);
	assert_true(r.cap <= (1u << 20) + 1);
	assert_int_equal(mcp_rd_line(&r, &line, &len), -1);
	free(big);
	mcp_rd_free(&r);
}

/* ---- the envelope --------------------------------------------------------- */

static void
t_envelope(void **state)
{
	static const struct {
		const char *line;
		int kind; /* -1: refused */
		const char *why;
	} cases[] = {
	    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", MCP_MSG_REQUEST, NULL},
	    {"{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"x\",\"params\":{}}", MCP_MSG_REQUEST,
	        NULL},
	    {"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"}", MCP_MSG_NOTIFICATION, NULL},
	    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}", MCP_MSG_RESULT, NULL},
	    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-1,\"message\":\"m\"}}",
	        MCP_MSG_ERROR, NULL},
	    {"{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"m\"}}",
	        MCP_MSG_ERROR, NULL},
	    {"hello world", -1, "not JSON"},
	    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}} trailing", -1, "not JSON"},
	    {"[{\"jsonrpc\":\"2.0\",\"method\":\"x\"}]", -1, "batch"},
	    {"\"a string\"", -1, "not JSON"},
	    {"{\"id\":1,\"result\":{}}", -1, "not JSON-RPC 2.0"},
	    {"{\"jsonrpc\":\"1.0\",\"id\":1,\"result\":{}}", -1, "not JSON-RPC 2.0"},
	    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":5}", -1, "not an object"},
	    {"{\"jsonrpc\":\"2.0\",\"id\":null,\"result\":{}}", -1, "id"},
	    {"{\"jsonrpc\":\"2.0\",\"id\":1.5,\"result\":{}}", -1, "id"},
	    {"{\"jsonrpc\":\"2.0\",\"id\":true,\"method\":\"x\"}", -1, "id"},
	    {"{\"jsonrpc\":\"2.0\",\"method\":\"\"}", -1, "method"},
	    {"{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":[1]}", -1, "params"},
	    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"message\":\"m\"}}", -1, "code"},
	    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{},\"error\":{}}", -1, "both"},
	    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"result\":{}}", -1, "both"},
	    {"{\"jsonrpc\":\"2.0\",\"id\":1}", -1, "neither"},
	    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"id\":2,\"result\":{}}", -1, "not JSON"},
	    {"{\"jsonrpc\":\"2.0\",\"method\":\"\xff\"}", -1, "not JSON"},
	};
	struct mcp_msg m;
	char err[256];
	size_t i;

	for (i = 0; i < NELEM(cases); i++) {
		int rc = mcp_msg_parse(cases[i].line, strlen(cases[i].line), &m, err, sizeof(err));

		if (cases[i].kind < 0) {
			if (rc != -1)
				fail_msg("accepted: %s", cases[i].line);
			if (strstr(err, cases[i].why) == NULL)
				fail_msg("%s: %s (wanted %s)", cases[i].line, err, cases[i].why);
			assert_null(m.j);
			continue;
		}
		if (rc != 0)
			fail_msg("refused: %s: %s", cases[i].line, err);
		assert_int_equal(m.kind, cases[i].kind);
		mcp_msg_clear(&m);
	}
}

/* ---- results -------------------------------------------------------------- */

static struct mcp_result *
result_of(const char *json, size_t max, char *err)
{
	json_t *j = json_loads(json, 0, NULL);
	struct mcp_result *r;

	assert_non_null(j);
	r = mcp_result_from(j, max, err, 256);
	json_decref(j);
	return r;
}

static void
t_results(void **state)
{
	struct mcp_result *r;
	char err[256];

	r = result_of("{\"content\":[{\"type\":\"text\",\"text\":\"one\"},"
	    "{\"type\":\"text\",\"text\":\"two\"}]}", 100, err);
	assert_non_null(r);
	assert_false(r->is_error);
	assert_string_equal(r->text, "one\ntwo");
	assert_int_equal(json_array_size(r->content), 1);
	assert_string_equal(json_string_value(json_object_get(json_array_get(r->content, 0),
	    "text")), "one\ntwo");
	mcp_result_free(r);

	/* isError is a tool error whose text the model sees */
	r = result_of("{\"content\":[{\"type\":\"text\",\"text\":\"bad\"}],\"isError\":true}", 100,
	    err);
	assert_true(r->is_error);
	assert_string_equal(r->text, "bad");
	mcp_result_free(r);

	/* only structured content: its JSON */
	r = result_of("{\"content\":[],\"structuredContent\":{\"a\":1}}", 100, err);
	assert_string_equal(r->text, "{\"a\":1}");
	mcp_result_free(r);
	r = result_of("{\"content\":[]}", 100, err);
	assert_string_equal(r->text, "[no content]");
	mcp_result_free(r);
	r = result_of("{\"resultType\":\"complete\",\"content\":[]}", 100, err);
	assert_non_null(r);
	mcp_result_free(r);

	/* the wrong shape */
	assert_null(result_of("{\"content\":{}}", 100, err));
	assert_non_null(strstr(err, "content is not an array"));
	assert_null(result_of("{}", 100, err));
	assert_null(result_of("{\"content\":[],\"isError\":\"yes\"}", 100, err));
	assert_non_null(strstr(err, "isError"));
	assert_null(result_of("{\"resultType\":\"later\",\"content\":[]}", 100, err));
	assert_non_null(strstr(err, "unknown resultType"));
	assert_null(result_of("{\"resultType\":\"input_required\",\"inputRequests\":{\"a\":"
	    "{\"method\":\"sampling/createMessage\"}}}", 100, err));
	assert_non_null(strstr(err, "sampling/createMessage"));

	/* the cut: at a character boundary, with the agent's marker */
	r = result_of("{\"content\":[{\"type\":\"text\",\"text\":\"abcd\xc3\xa9" "fgh\"}]}", 5,
	    err);
	assert_true(r->cut);
	assert_string_equal(r->text, "abcd\n[truncated: the first 4 of 9 bytes are shown]");
	mcp_result_free(r);

	r = mcp_result_error("the server broke", 100);
	assert_true(r->is_error);
	assert_string_equal(r->text, "the server broke");
	mcp_result_free(r);
}

/* ---- listings ------------------------------------------------------------- */

static void
t_pages(void **state)
{
	struct mcp_tools *t = calloc(1, sizeof(*t));
	json_t *page = json_loads("{\"tools\":["
	    "{\"name\":\"a\",\"inputSchema\":{\"type\":\"object\"},\"description\":\"A\"},"
	    "{\"name\":\"b\"},"
	    "{\"name\":\"\",\"inputSchema\":{}},"
	    "\"c\","
	    "{\"name\":\"a\",\"inputSchema\":{}},"
	    "{\"name\":\"d\",\"inputSchema\":{},\"title\":\"Dee\"},"
	    "{\"name\":\"e\",\"inputSchema\":{}}"
	    "],\"nextCursor\":\"n\"}", 0, NULL);
	const char *next;
	char err[256];

	assert_int_equal(mcp_tools_page(t, "s", page, 2, 100000, &next, err, sizeof(err)), 0);
	assert_string_equal(next, "n");
	assert_int_equal(t->listed, 7);
	assert_int_equal(t->n, 2);
	assert_int_equal(t->dropped, 5);
	assert_string_equal(t->v[0].model_name, "mcp__s__a");
	assert_string_equal(t->v[0].name, "a");
	assert_string_equal(json_string_value(json_object_get(t->v[0].def, "description")), "A");
	assert_string_equal(json_string_value(json_object_get(t->v[1].def, "description")), "Dee");
	assert_string_equal(json_string_value(json_object_get(t->v[1].def, "name")), "mcp__s__d");
	assert_non_null(json_object_get(t->v[1].def, "input_schema"));
	assert_string_equal(json_string_value(json_object_get(json_array_get(t->drops, 0),
	    "reason")), "inputSchema is not an object");
	assert_string_equal(json_string_value(json_object_get(json_array_get(t->drops, 3),
	    "reason")), "another tool has the same name");
	assert_string_equal(json_string_value(json_object_get(json_array_get(t->drops, 4),
	    "reason")), "over the cap on tools");
	json_decref(page);
	mcp_tools_free(t);

	/* the bytes cap: a tool that does not fit is dropped, a smaller one after it
	 * may still fit */
	t = calloc(1, sizeof(*t));
	page = json_loads("{\"tools\":["
	    "{\"name\":\"a\",\"inputSchema\":{}},"
	    "{\"name\":\"b\",\"inputSchema\":{},\"description\":\"a long description indeed\"},"
	    "{\"name\":\"c\",\"inputSchema\":{}}]}", 0, NULL);
	assert_int_equal(mcp_tools_page(t, "s", page, 10, 120, &next, err, sizeof(err)), 0);
	assert_null(next);
	assert_int_equal(t->n, 2);
	assert_string_equal(t->v[1].name, "c");
	assert_true(t->bytes <= 120);
	assert_string_equal(json_string_value(json_object_get(json_array_get(t->drops, 0),
	    "reason")), "over the cap on bytes of tool definitions");
	json_decref(page);

	page = json_loads("{\"tools\":{}}", 0, NULL);
	assert_int_equal(mcp_tools_page(t, "s", page, 10, 120, &next, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not an array"));
	json_decref(page);
	page = json_loads("{\"tools\":[],\"nextCursor\":5}", 0, NULL);
	assert_int_equal(mcp_tools_page(t, "s", page, 10, 120, &next, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "nextCursor"));
	json_decref(page);
	mcp_tools_free(t);
}

/* ---- the client: handshakes ----------------------------------------------- */

static void
t_legacy(void **state)
{
	json_t *m, *caps;

	start_ready(state);
	assert_string_equal(mcp_version(T.c), "2025-11-25");
	assert_false(mcp_modern(T.c));
	/* the probe first, with the modern version in _meta; then initialize
	 * declaring no capability; then initialized */
	m = json_array_get(F.got, 0);
	assert_string_equal(json_string_value(json_object_get(m, "method")), "server/discover");
	assert_string_equal(json_string_value(json_object_get(json_object_get(json_object_get(m,
	    "params"), "_meta"), "io.modelcontextprotocol/protocolVersion")), "2026-07-28");
	m = json_array_get(F.got, 1);
	assert_string_equal(json_string_value(json_object_get(m, "method")), "initialize");
	assert_string_equal(json_string_value(json_object_get(json_object_get(m, "params"),
	    "protocolVersion")), "2025-11-25");
	caps = json_object_get(json_object_get(m, "params"), "capabilities");
	assert_true(json_is_object(caps));
	assert_int_equal(json_object_size(caps), 0);
	assert_string_equal(json_string_value(json_object_get(json_object_get(json_object_get(m,
	    "params"), "clientInfo"), "name")), "agrippa");
	run_for(50);
	assert_non_null(got("notifications/initialized", 0));
	list();
	assert_string_equal(T.list_err, "");
	assert_int_equal(T.tools->n, 1);
	assert_string_equal(T.tools->v[0].model_name, "mcp__fake__echo");
	/* legacy requests carry no modern _meta */
	assert_null(json_object_get(json_object_get(got("tools/list", 0), "params"), "_meta"));
	call("echo", json_pack("{s:s}", "message", "hello"));
	assert_false(T.res->is_error);
	assert_string_equal(T.res->text, "hello");
	m = json_object_get(got("tools/call", 0), "params");
	assert_string_equal(json_string_value(json_object_get(m, "name")), "echo");
	assert_string_equal(json_string_value(json_object_get(json_object_get(m, "arguments"),
	    "message")), "hello");
	assert_true(json_integer_value(json_object_get(json_object_get(m, "_meta"),
	    "progressToken")) == json_integer_value(json_object_get(got("tools/call", 0), "id")));
}

static void
t_legacy_versions(void **state)
{
	static const char *const ok[] = {"2025-06-18", "2025-03-26", "2024-11-05"};
	size_t i;

	for (i = 0; i < NELEM(ok); i++) {
		teardown(state);
		setup(state);
		F.init_version = ok[i];
		start_ready(state);
		assert_string_equal(mcp_version(T.c), ok[i]);
		call("echo", json_pack("{s:s}", "message", ok[i]));
		assert_string_equal(T.res->text, ok[i]);
	}
	teardown(state);
	setup(state);
	F.init_version = "1999-01-01";
	start(state);
	run_until(&T.ready, 5000);
	assert_non_null(strstr(T.ready_err, "protocol version 1999-01-01"));
	assert_null(mcp_version(T.c));
	assert_false(T.failed); /* a failed handshake is told once, through ready */
}

static void
t_probe_null_id(void **state)
{
	/* a legacy server that refuses the probe without naming its id */
	F.disc = DISC_SILENT;
	fake_raw(&F, "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,"
	    "\"message\":\"Server not initialized\"}}\n", 87);
	start_ready(state);
	assert_string_equal(mcp_version(T.c), "2025-11-25");
	/* after the handshake, the same is a broken connection */
	fake_raw(&F, "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,"
	    "\"message\":\"Parse error\"}}\n", 76);
	run_until(&T.failed, 2000);
	assert_string_equal(T.failed_err, "the server could not read a request: Parse error (-32700)");
}

static void
t_probe_silent(void **state)
{
	F.disc = DISC_SILENT;
	T.conf.probe_ms = 200;
	start_ready(state);
	assert_string_equal(mcp_version(T.c), "2025-11-25");
	assert_non_null(got("initialize", 0));
}

static void
t_modern(void **state)
{
	json_t *m;

	F.disc = DISC_MODERN;
	start_ready(state);
	assert_true(mcp_modern(T.c));
	assert_string_equal(mcp_version(T.c), "2026-07-28");
	assert_string_equal(mcp_instructions(T.c), "be kind");
	assert_null(got("initialize", 0));
	assert_null(got("notifications/initialized", 0));
	/* listChanged: a subscription for it */
	run_for(50);
	m = got("subscriptions/listen", 0);
	assert_non_null(m);
	assert_true(json_is_true(json_object_get(json_object_get(json_object_get(m, "params"),
	    "notifications"), "toolsListChanged")));
	list();
	assert_int_equal(T.tools->n, 1);
	call("echo", json_pack("{s:s}", "message", "now"));
	assert_string_equal(T.res->text, "now");
	assert_int_equal(F.modern_meta_missing, 0);
	m = json_object_get(json_object_get(got("tools/call", 0), "params"), "_meta");
	assert_true(json_is_integer(json_object_get(m, "progressToken")));
	/* list_changed counts only on the subscription */
	fake_send(&F, json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method",
	    "notifications/tools/list_changed"));
	fake_send(&F, json_pack("{s:s, s:s, s:{s:{s:I}}}", "jsonrpc", "2.0", "method",
	    "notifications/tools/list_changed", "params", "_meta",
	    "io.modelcontextprotocol/subscriptionId", (json_int_t)F.listen_id));
	run_until(&T.changed, 2000);
	run_for(100);
	assert_int_equal(T.changed, 1);
	/* a server's request is no longer allowed on stdio */
	call("input", NULL);
	assert_true(T.res->is_error);
	assert_non_null(strstr(T.res->text, "elicitation/create"));
	call("rtbad", NULL);
	assert_true(T.res->is_error);
	assert_non_null(strstr(T.res->text, "resultType"));
	fake_send(&F, json_pack("{s:s, s:i, s:s}", "jsonrpc", "2.0", "id", 9, "method", "ping"));
	run_until(&T.failed, 2000);
	assert_non_null(strstr(T.failed_err, "2026-07-28 does not allow"));
}

static void
t_modern_unsupported(void **state)
{
	F.disc = DISC_UNSUPPORTED;
	start(state);
	run_until(&T.ready, 5000);
	assert_non_null(strstr(T.ready_err, "2027-01-01"));
	run_for(100);
	/* a modern server: no fallback to initialize */
	assert_null(got("initialize", 0));
}

static void
t_init_timeout(void **state)
{
	struct timespec a, b;
	long ms;

	F.init = INIT_SILENT;
	T.conf.start_ms = 400;
	clock_gettime(CLOCK_MONOTONIC, &a);
	start(state);
	mcp_list_tools(T.c, on_list, NULL); /* waits for the handshake, then fails with it */
	run_until(&T.ready, 5000);
	clock_gettime(CLOCK_MONOTONIC, &b);
	ms = (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
	assert_string_equal(T.ready_err, "no answer to initialize within 400 ms");
	assert_true(ms >= 380 && ms < 2000);
	assert_true(T.listed);
	assert_string_equal(T.list_err, "no answer to initialize within 400 ms");
	assert_string_equal(mcp_error(T.c), T.ready_err);
	/* never cancelled: initialize may not be */
	assert_null(got("notifications/cancelled", 0));
}

static void
t_init_error(void **state)
{
	F.init = INIT_ERROR;
	start(state);
	run_until(&T.ready, 5000);
	assert_string_equal(T.ready_err, "initialize: no thanks (-32600)");
}

static void
t_exits_at_once(void **state)
{
	/* gone before the client writes: its input is closed */
	fake_close(&F);
	start(state);
	run_until(&T.ready, 5000);
	assert_string_equal(T.ready_err, "the server closed its input (it exited?)");
	/* gone once it read the probe: its output is closed */
	teardown(state);
	setup(state);
	F.disc = DISC_SILENT;
	start(state);
	fake_later(&F, 20, NULL, 1);
	run_until(&T.ready, 5000);
	assert_string_equal(T.ready_err, "the server closed its output");
}

static void
t_garbage(void **state)
{
	static const char *const lines[] = {
	    "Server started on stdio!\n",
	    "{\"jsonrpc\":\"2.0\",\"foo\":1}\n",
	    "[{\"jsonrpc\":\"2.0\",\"method\":\"x\"}]\n",
	    "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"yes\"}\n",
	    "\x01\x02\x03\xff\n",
	};
	static const char *const why[] = {"not JSON", "neither method", "batch", "not an object",
	    "not JSON"};
	size_t i;

	for (i = 0; i < NELEM(lines); i++) {
		if (i > 0) {
			teardown(state);
			setup(state);
		}
		F.disc = DISC_SILENT; /* the line below is the answer */
		fake_raw(&F, lines[i], strlen(lines[i]));
		start(state);
		run_until(&T.ready, 5000);
		if (strstr(T.ready_err, why[i]) == NULL ||
		    strstr(T.ready_err, "no MCP message") == NULL)
			fail_msg("%s: %s", lines[i], T.ready_err);
	}
	/* after the handshake: a failure told through failed, pending calls
	 * answered with it, calls after it too */
	teardown(state);
	setup(state);
	start_ready(state);
	T.called = 0;
	mcp_call(T.c, "never", NULL, on_call, NULL);
	run_for(50);
	fake_raw(&F, "garbage\n", 8);
	run_until(&T.failed, 2000);
	assert_true(T.called);
	assert_true(T.res->is_error);
	assert_non_null(strstr(T.res->text, "not JSON"));
	call("echo", NULL);
	assert_true(T.res->is_error);
	assert_non_null(strstr(T.res->text, "not JSON"));
	T.listed = 0;
	list();
	assert_non_null(strstr(T.list_err, "not JSON"));
}

static void
t_huge_line(void **state)
{
	size_t n = 20u << 20, i;
	char *line = malloc(n + 64);

	start_ready(state);
	T.called = 0;
	mcp_call(T.c, "never", NULL, on_call, NULL);
	run_for(50);
	i = (size_t)snprintf(line, 64, "{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":{\"p\":\"");
	memset(line + i, 'a', n - i);
	memcpy(line + n, "\"}}\n", 4);
	fake_raw(&F, line, n + 4);
	free(line);
	run_until(&T.failed, 10000);
	assert_string_equal(T.failed_err, "the server wrote a line longer than 8388608 bytes");
	assert_true(T.called);
	assert_true(T.res->is_error);
	/* a smaller cap the caller sets */
	teardown(state);
	setup(state);
	T.conf.line_max = 1000;
	start_ready(state);
	call("big", NULL);
	assert_true(T.res->is_error);
	assert_non_null(strstr(T.res->text, "longer than 1000 bytes"));
}

static void
t_unknown_id(void **state)
{
	start_ready(state);
	call("badid", NULL);
	assert_true(T.res->is_error);
	assert_non_null(strstr(T.res->text, "an answer to id 999999, which this client never sent"));
	if (!T.failed)
		run_until(&T.failed, 1000);
	teardown(state);
	setup(state);
	start_ready(state);
	call("strid", NULL);
	assert_non_null(strstr(T.res->text, "an answer to id \"1\", which this client never "
	    "sent"));
}

/* ---- the client: listings ------------------------------------------------- */

static void
many_tools(size_t n)
{
	char name[32];
	size_t i;

	json_array_clear(F.tools);
	for (i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "tool_%05zu", i);
		json_array_append_new(F.tools, json_pack("{s:s, s:s, s:{s:s}}", "name", name,
		    "description", "one of many", "inputSchema", "type", "object"));
	}
}

static void
t_many_tools(void **state)
{
	many_tools(10000);
	start_ready(state);
	list();
	assert_string_equal(T.list_err, "");
	assert_int_equal(T.tools->listed, 10000);
	assert_int_equal(T.tools->n, MCP_TOOLS_MAX_DEFAULT);
	assert_int_equal(T.tools->dropped, 10000 - MCP_TOOLS_MAX_DEFAULT);
	assert_int_equal(json_array_size(T.tools->drops), 64);
	assert_string_equal(T.tools->v[0].name, "tool_00000");
	/* paged, with caps the caller sets */
	teardown(state);
	setup(state);
	many_tools(10000);
	F.page = 100;
	T.conf.tools_max = 500;
	T.conf.tool_bytes_max = 20000;
	start_ready(state);
	list();
	assert_string_equal(T.list_err, "");
	assert_int_equal(T.tools->pages, 100);
	assert_int_equal(T.tools->listed, 10000);
	assert_true(T.tools->n < 500 && T.tools->n > 100);
	assert_true(T.tools->bytes <= 20000);
	assert_string_equal(json_string_value(json_object_get(json_array_get(T.tools->drops, 0),
	    "reason")), "over the cap on bytes of tool definitions");
	assert_string_equal(json_string_value(json_object_get(got("tools/list", 1), "params") ?
	    json_object_get(json_object_get(got("tools/list", 1), "params"), "cursor") : NULL),
	    "c100");
}

static void
t_repeat_cursor(void **state)
{
	F.repeat_cursor = 1;
	start_ready(state);
	list();
	assert_null(T.tools);
	assert_string_equal(T.list_err, "tools/list: the server gave the cursor same twice");
	/* two pages asked, no third */
	assert_non_null(got("tools/list", 1));
	assert_null(got("tools/list", 2));
}

static void
t_list_changed(void **state)
{
	F.late_tool = 1;
	start_ready(state);
	run_until(&T.changed, 2000);
	list();
	assert_int_equal(T.tools->n, 2);
	assert_string_equal(T.tools->v[1].model_name, "mcp__fake__late");
}

static void
t_list_wrong_shape(void **state)
{
	start_ready(state);
	T.listed = 0;
	mcp_list_tools(T.c, on_list, NULL);
	json_array_clear(F.tools);
	json_decref(F.tools);
	F.tools = json_pack("[s]", "x"); /* a tool that is not an object: dropped */
	run_until(&T.listed, 2000);
	assert_int_equal(T.tools->n, 0);
	assert_int_equal(T.tools->dropped, 1);
}

/* ---- the client: calls ---------------------------------------------------- */

static json_int_t
call_id(size_t nth)
{
	return json_integer_value(json_object_get(got("tools/call", nth), "id"));
}

static void
t_call_timeout(void **state)
{
	json_t *c;

	T.conf.call_ms = 200;
	start_ready(state);
	call("never", NULL);
	assert_true(T.res->is_error);
	assert_string_equal(T.res->text, "the tool call timed out: no answer or progress in 200 ms");
	run_for(50);
	c = got("notifications/cancelled", 0);
	assert_non_null(c);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(c, "params"),
	    "requestId")), call_id(0));
	/* the late answer is ignored: the connection still works */
	fake_result(&F, json_object_get(got("tools/call", 0), "id"), text_result("late"));
	call("echo", json_pack("{s:s}", "message", "still here"));
	assert_string_equal(T.res->text, "still here");
	assert_false(T.failed);
}

static void
t_progress(void **state)
{
	struct timespec a, b;
	long ms;

	T.conf.call_ms = 300;
	T.conf.call_max_ms = 5000;
	F.progress_n = 5;
	F.progress_ms = 150;
	start_ready(state);
	clock_gettime(CLOCK_MONOTONIC, &a);
	call("slow", NULL);
	clock_gettime(CLOCK_MONOTONIC, &b);
	ms = (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
	/* 900 ms, three times the timeout: progress kept it alive */
	assert_false(T.res->is_error);
	assert_string_equal(T.res->text, "done");
	assert_true(ms >= 850);
	assert_int_equal(T.progress, 5);
	assert_null(got("notifications/cancelled", 0));
}

static void
t_progress_max(void **state)
{
	struct timespec a, b;
	long ms;

	T.conf.call_ms = 300;
	T.conf.call_max_ms = 1000;
	F.progress_n = 30; /* for 3 s, every 100 ms */
	start_ready(state);
	clock_gettime(CLOCK_MONOTONIC, &a);
	call("stall", NULL);
	clock_gettime(CLOCK_MONOTONIC, &b);
	ms = (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
	assert_true(T.res->is_error);
	assert_non_null(strstr(T.res->text, "the most a call may (1 s)"));
	assert_true(ms >= 950 && ms < 2000);
	assert_true(T.progress >= 8);
	run_for(50);
	assert_non_null(got("notifications/cancelled", 0));
}

static void
t_cancel(void **state)
{
	uint64_t h;
	json_t *c;

	start_ready(state);
	T.called = 0;
	h = mcp_call(T.c, "never", NULL, on_call, NULL);
	run_for(50);
	assert_false(T.called);
	mcp_cancel(T.c, h);
	assert_false(T.called); /* not from inside mcp_cancel */
	run_until(&T.called, 1000);
	assert_int_equal(T.res_call, h);
	assert_true(T.res->is_error);
	assert_string_equal(T.res->text, "cancelled");
	run_for(50);
	c = got("notifications/cancelled", 0);
	assert_non_null(c);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(c, "params"),
	    "requestId")), call_id(0));
	mcp_cancel(T.c, h); /* no longer running: nothing */
	mcp_cancel(T.c, 12345);
	run_for(50);
	assert_null(got("notifications/cancelled", 1));
}

static void
t_server_requests(void **state)
{
	json_t *m;
	size_t i, answers = 0;

	start_ready(state);
	call("ask", NULL);
	assert_string_equal(T.res->text, "asked");
	json_array_foreach(F.got, i, m) {
		json_t *id = json_object_get(m, "id");

		if (json_object_get(m, "method") != NULL)
			continue;
		answers++;
		if (json_is_integer(id) && json_integer_value(id) == 4) {
			/* ping is answered */
			assert_true(json_is_object(json_object_get(m, "result")));
		} else {
			assert_int_equal(json_integer_value(json_object_get(json_object_get(m,
			    "error"), "code")), -32601);
		}
	}
	assert_int_equal(answers, 4);
}

static void
t_results_live(void **state)
{
	json_t *img;

	T.conf.result_max = 1000;
	start_ready(state);
	call("fail", NULL);
	assert_true(T.res->is_error);
	assert_string_equal(T.res->text, "it broke");
	call("rpcerr", NULL);
	assert_true(T.res->is_error);
	assert_string_equal(T.res->text,
	    "the MCP server answered with an error: Unknown tool: rpcerr (code -32602)");
	call("wrongshape", NULL);
	assert_true(T.res->is_error);
	assert_non_null(strstr(T.res->text, "not a tool result: the result's content is not an "
	    "array"));
	call("structured", NULL);
	assert_string_equal(T.res->text, "{\"a\":1}");
	call("image", NULL);
	assert_false(T.res->is_error);
	assert_int_equal(T.res->images, 1);
	assert_int_equal(json_array_size(T.res->content), 2);
	img = json_array_get(T.res->content, 1);
	assert_string_equal(json_string_value(json_object_get(img, "type")), "image");
	assert_string_equal(json_string_value(json_object_get(json_object_get(img, "source"),
	    "media_type")), "image/png");
	assert_string_equal(json_string_value(json_object_get(json_object_get(img, "source"),
	    "data")), png_b64);
	assert_string_equal(T.res->text, "a picture\n[image: image/png, 70 bytes]\n"
	    "[image: image/png, 0 bytes, not shown: the data is not base64]\n"
	    "[image: image/tiff, 70 bytes, not shown: a type models do not take]");
	call("bigimages", NULL);
	assert_int_equal(T.res->images, 1);
	assert_int_equal(T.res->image_bytes, 204800);
	assert_int_equal(json_array_size(T.res->content), 2);
	assert_string_equal(T.res->text, "[image: image/png, 153600 bytes]\n"
	    "[image: image/gif, 153600 bytes, not shown: over the images one result may show]");
	call("blocks", NULL);
	assert_string_equal(T.res->text,
	    "[audio: audio/wav, 4 bytes of base64, not shown]\n"
	    "[resource link: a.txt <file:///a.txt>]\n"
	    "[resource file:///b.txt]\nbee\n"
	    "[resource: file:///c.bin, application/octet-stream, 4 bytes of base64, not shown]\n"
	    "[a content block of type hologram, not shown]\n"
	    "[a content block without a type]");
	call("big", NULL);
	assert_true(T.res->cut);
	assert_string_equal(T.res->text + 999,
	    "\n[truncated: the first 999 of 100000 bytes are shown]");
	call("echo", json_pack("[]"));
	assert_true(T.res->is_error);
	assert_string_equal(T.res->text, "the tool's arguments are not an object");
	call("", NULL);
	assert_string_equal(T.res->text, "no tool named");
	assert_false(T.failed);
}

static void
t_free_in_callback(void **state)
{
	start_ready(state);
	T.free_in_cb = 1;
	call("echo", json_pack("{s:s}", "message", "bye"));
	assert_null(T.c);
	/* the server sees EOF */
	run_for(100);
	assert_int_equal(F.fd, -1);
}

static void
t_queued(void **state)
{
	json_t *args = json_pack("{s:s}", "message", "early");

	start(state);
	mcp_list_tools(T.c, on_list, NULL);
	T.called = 0;
	mcp_call(T.c, "echo", args, on_call, NULL);
	/* args are copied */
	json_object_set_new(args, "message", json_string("changed"));
	json_decref(args);
	run_until(&T.called, 5000);
	assert_true(T.ready);
	assert_true(T.listed);
	assert_int_equal(T.tools->n, 1);
	assert_string_equal(T.res->text, "early");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_names),
	    cmocka_unit_test(t_reader),
	    cmocka_unit_test(t_envelope),
	    cmocka_unit_test(t_results),
	    cmocka_unit_test(t_pages),
	    cmocka_unit_test_setup_teardown(t_legacy, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_legacy_versions, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_probe_silent, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_probe_null_id, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_modern, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_modern_unsupported, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_init_timeout, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_init_error, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_exits_at_once, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_garbage, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_huge_line, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_unknown_id, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_many_tools, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_repeat_cursor, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_list_changed, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_list_wrong_shape, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_call_timeout, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_progress, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_progress_max, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_cancel, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_server_requests, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_results_live, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_free_in_callback, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_queued, setup, teardown),
	};

	signal(SIGPIPE, SIG_IGN);
	if (sodium_init() == -1)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
