/*
 * mcp: the MCP client's connection (runner/mcp.h): the stdio transport on
 * the runner's event loop, the handshake of either era, and the requests in
 * flight.
 *
 * Every request is a struct mcp_req in c->reqs with a timer of its own.  A
 * request is QUEUED until the handshake is over, SENT with its wire id (the
 * answer is matched on it, the timer is its timeout), or ENDING: it is over
 * (cancelled, or refused before it went out) and its timer, set to fire at
 * once, hands the caller its answer from the loop.  Nothing a caller calls
 * runs a callback itself: a broken connection is marked at once (client_fail
 * closes the descriptors) and the requests are answered from fail_ev.
 *
 * Ids are integers counted from 1, so an answer names either a request sent
 * (in flight, or given up: ignored) or an id never sent (the connection is
 * broken).  A call's progressToken is its id.
 */
#include <sys/queue.h>
#include <sys/socket.h>

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "runner/mcp.h"

#ifndef AGRIPPA_VERSION
#define AGRIPPA_VERSION "0"
#endif

#define MCP_READS_PER_WAKE 16 /* reads before the loop gets a turn */
#define MCP_ERR_MAX 512

static const char *const legacy_versions[] = {"2025-11-25", "2025-06-18", "2025-03-26",
    "2024-11-05", NULL};

enum req_kind { RQ_PROBE, RQ_INIT, RQ_LIST, RQ_CALL, RQ_LISTEN };
enum req_state { RS_QUEUED, RS_SENT, RS_ENDING };

struct mcp_req {
	TAILQ_ENTRY(mcp_req) e;
	struct mcp_client *c;
	enum req_kind kind;
	enum req_state state;
	json_int_t id;          /* on the wire while SENT, else 0 */
	struct event *timer;
	char *err;              /* ENDING: what it ends with */
	void *arg;
	/* tools/list */
	mcp_list_cb list_cb;
	struct mcp_tools *tools;
	json_t *cursors;        /* every cursor given so far, as keys */
	char *cursor;           /* the next page's */
	/* tools/call */
	mcp_call_cb call_cb;
	uint64_t handle;
	char *tool;
	json_t *args;
	int64_t max_at;         /* monotonic ms: the call's hard end */
	double progress;
	int has_progress;
};

enum client_state { CS_PROBE, CS_INIT, CS_READY, CS_FAILED };

struct mcp_client {
	struct event_base *base;
	int rfd, wfd, use_send;
	struct event *rev, *wev, *fail_ev;
	struct mcp_conf conf;
	char *server;
	struct mcp_events ev;
	void *arg;
	struct mcp_rd rd;
	char *out;
	size_t outlen, outoff, outcap;
	enum client_state state;
	int modern, told_ready;
	int probe_again;        /* server/discover was sent again after -32022 */
	char version[32];
	char *instructions;
	int64_t start_at;       /* monotonic ms: the handshake's end */
	json_int_t next_id;
	uint64_t next_handle;
	json_int_t listen_id;   /* the subscriptions/listen request, 0 for none */
	TAILQ_HEAD(, mcp_req) reqs;
	char *err;
	int depth, doomed;
};

static void req_send(struct mcp_req *r);
static void client_destroy(struct mcp_client *c);

/* ---- helpers -------------------------------------------------------------- */

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static char *
xstrdup(const char *s)
{
	char *d = strdup(s);

	if (d == NULL)
		fatal("mcp");
	return d;
}

/* A callback of the loop begins and ends: a client freed by its owner meanwhile is freed
 * once the outermost one is over. */
static void
enter(struct mcp_client *c)
{
	c->depth++;
}

static void
leave(struct mcp_client *c)
{
	if (--c->depth == 0 && c->doomed)
		client_destroy(c);
}

/* Whether the client should stop what it is doing (freed, or broken). */
static int
stopped(const struct mcp_client *c)
{
	return c->doomed || c->state == CS_FAILED;
}

/* ms for a person: "200 ms", "60 s". */
static const char *
dur(uint32_t ms, char buf[32])
{
	if (ms % 1000 == 0)
		snprintf(buf, 32, "%u s", ms / 1000);
	else
		snprintf(buf, 32, "%u ms", ms);
	return buf;
}

/* At most 60 bytes of line as a printable quote in buf (for errors). */
static const char *
quote(const char *line, size_t len, char buf[96])
{
	size_t i, n = len > 60 ? 60 : len, o = 0;

	buf[o++] = '"';
	for (i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)line[i];

		buf[o++] = ch >= 0x20 && ch < 0x7f && ch != '"' ? (char)ch : '?';
	}
	if (len > n) {
		memcpy(buf + o, "...", 3);
		o += 3;
	}
	buf[o++] = '"';
	buf[o] = '\0';
	return buf;
}

/* ---- requests ------------------------------------------------------------- */

static void req_timer(evutil_socket_t fd, short what, void *arg);

static struct mcp_req *
req_new(struct mcp_client *c, enum req_kind kind)
{
	struct mcp_req *r = calloc(1, sizeof(*r));

	if (r == NULL || (r->timer = evtimer_new(c->base, req_timer, r)) == NULL)
		fatal("mcp request");
	r->c = c;
	r->kind = kind;
	TAILQ_INSERT_TAIL(&c->reqs, r, e);
	return r;
}

static void
req_free(struct mcp_req *r)
{
	TAILQ_REMOVE(&r->c->reqs, r, e);
	event_free(r->timer);
	free(r->err);
	mcp_tools_free(r->tools);
	json_decref(r->cursors);
	free(r->cursor);
	free(r->tool);
	json_decref(r->args);
	free(r);
}

static void
req_arm(struct mcp_req *r, int64_t ms)
{
	struct timeval tv;

	if (ms < 0)
		ms = 0;
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	evtimer_del(r->timer);
	if (evtimer_add(r->timer, &tv) == -1)
		fatalx("evtimer_add");
}

/* r is over with err: its caller hears it from the loop, at once. */
static void
req_ending(struct mcp_req *r, const char *err)
{
	free(r->err);
	r->err = xstrdup(err);
	r->state = RS_ENDING;
	r->id = 0;
	req_arm(r, 0);
}

static struct mcp_req *
req_by_id(struct mcp_client *c, json_int_t id)
{
	struct mcp_req *r;

	TAILQ_FOREACH(r, &c->reqs, e)
		if (r->state == RS_SENT && r->id == id)
			return r;
	return NULL;
}

/* The end of a call: the caller gets res. */
static void
call_end(struct mcp_req *r, struct mcp_result *res)
{
	mcp_call_cb cb = r->call_cb;
	uint64_t handle = r->handle;
	void *arg = r->arg;

	req_free(r);
	cb(arg, handle, res);
}

static void
call_fail(struct mcp_req *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void
call_fail(struct mcp_req *r, const char *fmt, ...)
{
	char buf[MCP_ERR_MAX + 256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	call_end(r, mcp_result_error(buf, r->c->conf.result_max));
}

/* The end of a listing: tools (taken) or err. */
static void
list_end(struct mcp_req *r, const char *err)
{
	mcp_list_cb cb = r->list_cb;
	struct mcp_tools *t = err == NULL ? r->tools : NULL;
	void *arg = r->arg;
	char buf[MCP_ERR_MAX];

	/* err may be r's own */
	if (err != NULL)
		snprintf(buf, sizeof(buf), "%s", err);
	else
		r->tools = NULL;
	req_free(r);
	cb(arg, t, err != NULL ? buf : NULL);
}

/* r ends with err, whatever its kind. */
static void
req_end_err(struct mcp_req *r, const char *err)
{
	switch (r->kind) {
	case RQ_CALL:
		call_fail(r, "%s", err);
		break;
	case RQ_LIST:
		list_end(r, err);
		break;
	default:
		req_free(r);
	}
}

/* ---- the connection breaks ------------------------------------------------ */

static void
fds_close(struct mcp_client *c)
{
	if (c->rev != NULL)
		event_free(c->rev);
	if (c->wev != NULL)
		event_free(c->wev);
	c->rev = c->wev = NULL;
	if (c->rfd != -1)
		close(c->rfd);
	if (c->wfd != -1 && c->wfd != c->rfd)
		close(c->wfd);
	c->rfd = c->wfd = -1;
}

static void
client_fail(struct mcp_client *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void
client_fail(struct mcp_client *c, const char *fmt, ...)
{
	char buf[MCP_ERR_MAX];
	va_list ap;

	if (c->state == CS_FAILED)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	log_warnx("mcp %s: %s", c->server, buf);
	c->err = xstrdup(buf);
	c->state = CS_FAILED;
	fds_close(c);
	mcp_rd_free(&c->rd);
	free(c->out);
	c->out = NULL;
	c->outlen = c->outoff = c->outcap = 0;
	event_active(c->fail_ev, EV_TIMEOUT, 1);
}

/* From the loop after client_fail: every request is answered, then the
 * owner hears of it. */
static void
fail_cb(evutil_socket_t fd, short what, void *arg)
{
	struct mcp_client *c = arg;
	struct mcp_req *r;

	enter(c);
	while (!c->doomed && (r = TAILQ_FIRST(&c->reqs)) != NULL)
		req_end_err(r, c->err);
	if (!c->doomed) {
		if (!c->told_ready) {
			c->told_ready = 1;
			if (c->ev.ready != NULL)
				c->ev.ready(c->arg, c->err);
		} else if (c->ev.failed != NULL)
			c->ev.failed(c->arg, c->err);
	}
	leave(c);
}

/* ---- writing -------------------------------------------------------------- */

static void
flush(struct mcp_client *c)
{
	ssize_t n;

	while (c->outoff < c->outlen) {
		if (c->use_send) {
			n = send(c->wfd, c->out + c->outoff, c->outlen - c->outoff, MSG_NOSIGNAL);
			if (n == -1 && errno == ENOTSOCK) {
				c->use_send = 0;
				continue;
			}
		} else
			n = write(c->wfd, c->out + c->outoff, c->outlen - c->outoff);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (event_add(c->wev, NULL) == -1)
				fatalx("event_add");
			return;
		}
		if (n == -1 && errno == EPIPE) {
			client_fail(c, "the server closed its input (it exited?)");
			return;
		}
		if (n == -1) {
			client_fail(c, "writing to the server: %s", strerror(errno));
			return;
		}
		c->outoff += (size_t)n;
	}
	c->outoff = c->outlen = 0;
	event_del(c->wev);
}

static void
write_cb(evutil_socket_t fd, short what, void *arg)
{
	struct mcp_client *c = arg;

	enter(c);
	flush(c);
	leave(c);
}

/* msg (consumed) as one line to the server.  Returns 0, or -1 when it is
 * longer than line_max (nothing sent) or the connection is broken. */
static int
send_msg(struct mcp_client *c, json_t *msg)
{
	char *s = json_dumps(msg, JSON_COMPACT);
	size_t n, want;
	char *nb;

	json_decref(msg);
	if (s == NULL)
		fatalx("out of memory");
	n = strlen(s);
	if (c->state == CS_FAILED || n > c->conf.line_max) {
		free(s);
		return -1;
	}
	/* a server that does not read may hold two lines' worth, no more */
	if (c->outlen - c->outoff + n + 1 > 2 * c->conf.line_max + 65536) {
		free(s);
		client_fail(c, "the server does not read its input");
		return -1;
	}
	if (c->outlen + n + 1 > c->outcap) {
		want = c->outcap == 0 ? 4096 : c->outcap;
		while (want < c->outlen + n + 1)
			want *= 2;
		if ((nb = realloc(c->out, want)) == NULL)
			fatal("mcp output");
		c->out = nb;
		c->outcap = want;
	}
	memcpy(c->out + c->outlen, s, n);
	c->out[c->outlen + n] = '\n';
	c->outlen += n + 1;
	free(s);
	if (!event_pending(c->wev, EV_WRITE, NULL))
		flush(c);
	return c->state == CS_FAILED ? -1 : 0;
}

/* params (consumed, or NULL) with the modern era's _meta added. */
static json_t *
with_meta(struct mcp_client *c, json_t *params)
{
	json_t *meta;

	if (params == NULL)
		params = json_object();
	if (!c->modern)
		return params;
	if ((meta = json_object_get(params, "_meta")) == NULL) {
		meta = json_object();
		json_object_set_new(params, "_meta", meta);
	}
	json_object_set_new(meta, "io.modelcontextprotocol/protocolVersion",
	    json_string(MCP_VERSION_MODERN));
	json_object_set_new(meta, "io.modelcontextprotocol/clientCapabilities", json_object());
	json_object_set_new(meta, "io.modelcontextprotocol/clientInfo",
	    json_pack("{s:s, s:s}", "name", "agrippa", "version", AGRIPPA_VERSION));
	return params;
}

/* The id r goes out with (a new one for every send). */
static json_int_t
req_id(struct mcp_req *r)
{
	r->id = ++r->c->next_id;
	return r->id;
}

/* Sends r as method with params (consumed); r->id is set (req_id) when
 * params need it, else here.  Returns 0, or -1 (r not sent). */
static int
rpc_request(struct mcp_req *r, const char *method, json_t *params)
{
	struct mcp_client *c = r->c;

	if (r->id == 0)
		req_id(r);
	r->state = RS_SENT;
	return send_msg(c, json_pack("{s:s, s:I, s:s, s:o}", "jsonrpc", "2.0", "id",
	    (json_int_t)r->id, "method", method, "params", with_meta(c, params)));
}

static void
notify(struct mcp_client *c, const char *method, json_t *params)
{
	json_t *m = json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method", method);

	if (params != NULL)
		json_object_set_new(m, "params", params);
	send_msg(c, m);
}

/* notifications/cancelled for the request on the wire as r. */
static void
send_cancel(struct mcp_req *r, const char *reason)
{
	notify(r->c, "notifications/cancelled", json_pack("{s:I, s:s}", "requestId",
	    (json_int_t)r->id, "reason", reason));
}

/* ---- the handshake -------------------------------------------------------- */

static int
legacy_known(const char *v)
{
	size_t i;

	for (i = 0; legacy_versions[i] != NULL; i++)
		if (strcmp(v, legacy_versions[i]) == 0)
			return 1;
	return 0;
}

/* Whether a (an array) holds the string s. */
static int
strs_have(const json_t *a, const char *s)
{
	const json_t *v;
	size_t i;

	json_array_foreach(a, i, v)
		if (json_is_string(v) && strcmp(json_string_value(v), s) == 0)
			return 1;
	return 0;
}

/* The versions of a (strings) for an error, in buf. */
static const char *
strs_list(const json_t *a, char *buf, size_t bufsz)
{
	const json_t *v;
	size_t i, len = 0;

	buf[0] = '\0';
	json_array_foreach(a, i, v)
		if (json_is_string(v))
			errbuf_append(buf, bufsz, &len, "%s%.40s", len > 0 ? ", " : "",
			    json_string_value(v));
	return len > 0 ? buf : "none";
}

static void
set_instructions(struct mcp_client *c, const json_t *result)
{
	const char *s = json_string_value(json_object_get(result, "instructions"));

	free(c->instructions);
	c->instructions = s != NULL ? xstrdup(s) : NULL;
}

static void
client_ready(struct mcp_client *c, const json_t *caps)
{
	struct mcp_req *r, *next;
	json_t *lc = json_object_get(json_object_get(caps, "tools"), "listChanged");

	c->state = CS_READY;
	log_debug("mcp %s: protocol %s (%s era)", c->server, c->version,
	    c->modern ? "modern" : "legacy");
	/* modern: list_changed comes only on a subscription asked for */
	if (c->modern && json_is_true(lc)) {
		r = req_new(c, RQ_LISTEN);
		if (rpc_request(r, "subscriptions/listen", json_pack("{s:{s:b}}", "notifications",
		        "toolsListChanged", 1)) == 0)
			c->listen_id = r->id;
	}
	for (r = TAILQ_FIRST(&c->reqs); r != NULL && !stopped(c); r = next) {
		next = TAILQ_NEXT(r, e);
		if (r->state == RS_QUEUED)
			req_send(r);
	}
	if (stopped(c))
		return;
	c->told_ready = 1;
	if (c->ev.ready != NULL)
		c->ev.ready(c->arg, NULL);
}

static void
init_start(struct mcp_client *c)
{
	struct mcp_req *r = req_new(c, RQ_INIT);

	c->state = CS_INIT;
	if (rpc_request(r, "initialize", json_pack("{s:s, s:{}, s:{s:s, s:s}}", "protocolVersion",
	        MCP_VERSION_LEGACY, "capabilities", "clientInfo", "name", "agrippa", "version",
	        AGRIPPA_VERSION)) == 0)
		req_arm(r, c->start_at - now_ms());
}

/* server/discover, with the modern era's _meta. */
static void
probe_send(struct mcp_client *c)
{
	struct mcp_req *r = req_new(c, RQ_PROBE);
	int64_t left = c->start_at - now_ms();

	c->modern = 1;
	if (rpc_request(r, "server/discover", NULL) == 0)
		req_arm(r, c->conf.probe_ms < left ? c->conf.probe_ms : left);
	c->modern = 0;
}

static void
probe_answer(struct mcp_client *c, struct mcp_req *r, const struct mcp_msg *m)
{
	const json_t *vs = json_object_get(m->result, "supportedVersions");
	const json_t *sup = json_object_get(m->data, "supported");
	char buf[256];
	size_t i;

	req_free(r);
	if (m->kind == MCP_MSG_ERROR) {
		/* a modern server that names this client's version after all: the
		 * probe once more, as the 2026-07-28 transports say */
		if (m->code == -32022 && strs_have(sup, MCP_VERSION_MODERN) && !c->probe_again) {
			c->probe_again = 1;
			return probe_send(c);
		}
		if (m->code == -32022)
			return client_fail(c, "the server speaks none of this client's versions "
			    "(it supports: %s)", strs_list(sup, buf, sizeof(buf)));
		if (m->code == -32020 || m->code == -32021)
			return client_fail(c, "server/discover: %.200s (%lld)", m->message,
			    (long long)m->code);
		log_debug("mcp %s: server/discover: %s (%lld): a legacy server", c->server,
		    m->message, (long long)m->code);
		return init_start(c);
	}
	/* no DiscoverResult: a legacy server that answers what it does not
	 * know with an empty result (as the conformance suite's do) */
	if (vs == NULL) {
		log_debug("mcp %s: server/discover: a result without supportedVersions: a legacy "
		    "server", c->server);
		return init_start(c);
	}
	if (!json_is_array(vs))
		return client_fail(c, "server/discover: the result's supportedVersions is not "
		    "an array");
	if (strs_have(vs, MCP_VERSION_MODERN)) {
		c->modern = 1;
		snprintf(c->version, sizeof(c->version), "%s", MCP_VERSION_MODERN);
		set_instructions(c, m->result);
		return client_ready(c, json_object_get(m->result, "capabilities"));
	}
	for (i = 0; legacy_versions[i] != NULL; i++)
		if (strs_have(vs, legacy_versions[i]))
			return init_start(c);
	client_fail(c, "the server speaks none of this client's versions (it supports: %s)",
	    strs_list(vs, buf, sizeof(buf)));
}

static void
init_answer(struct mcp_client *c, struct mcp_req *r, const struct mcp_msg *m)
{
	const char *v = json_string_value(json_object_get(m->result, "protocolVersion"));
	const json_t *caps = json_object_get(m->result, "capabilities");

	req_free(r);
	if (m->kind == MCP_MSG_ERROR)
		return client_fail(c, "initialize: %.200s (%lld)", m->message, (long long)m->code);
	if (v == NULL || !json_is_object(caps))
		return client_fail(c, "initialize: the result has no protocolVersion string or "
		    "capabilities object");
	if (!legacy_known(v))
		return client_fail(c, "initialize: the server speaks protocol version %.40s, which "
		    "this client does not", v);
	snprintf(c->version, sizeof(c->version), "%s", v);
	set_instructions(c, m->result);
	notify(c, "notifications/initialized", NULL);
	if (!stopped(c))
		client_ready(c, caps);
}

/* ---- tools/list and tools/call -------------------------------------------- */

static void
list_send(struct mcp_req *r)
{
	json_t *params = r->cursor != NULL ? json_pack("{s:s}", "cursor", r->cursor) : NULL;

	r->id = 0;
	if (rpc_request(r, "tools/list", params) == 0)
		req_arm(r, r->c->conf.request_ms);
	else if (r->c->state != CS_FAILED)
		req_ending(r, "tools/list: the request is longer than a line may be");
}

static void
list_answer(struct mcp_client *c, struct mcp_req *r, const struct mcp_msg *m)
{
	const char *rt = json_string_value(json_object_get(m->result, "resultType")), *next;
	char err[MCP_ERR_MAX];

	if (m->kind == MCP_MSG_ERROR) {
		snprintf(err, sizeof(err), "tools/list: %.200s (%lld)", m->message,
		    (long long)m->code);
		return list_end(r, err);
	}
	if (json_object_get(m->result, "resultType") != NULL && (rt == NULL ||
	    strcmp(rt, "complete") != 0))
		return list_end(r, "tools/list: a result that is not complete (resultType)");
	if (mcp_tools_page(r->tools, c->server, m->result, c->conf.tools_max,
	        c->conf.tool_bytes_max, &next, err, sizeof(err)) == -1)
		return list_end(r, err);
	if (next == NULL)
		return list_end(r, NULL);
	if (json_object_get(r->cursors, next) != NULL) {
		snprintf(err, sizeof(err), "tools/list: the server gave the cursor %.60s twice",
		    next);
		return list_end(r, err);
	}
	if (r->tools->pages >= MCP_LIST_PAGES_MAX) {
		snprintf(err, sizeof(err), "tools/list: more than %d pages", MCP_LIST_PAGES_MAX);
		return list_end(r, err);
	}
	json_object_set_new(r->cursors, next, json_true());
	free(r->cursor);
	r->cursor = xstrdup(next);
	list_send(r);
}

static void
call_send(struct mcp_req *r)
{
	struct mcp_client *c = r->c;
	json_t *params;
	int64_t ms = c->conf.call_ms < c->conf.call_max_ms ? c->conf.call_ms : c->conf.call_max_ms;

	req_id(r);
	params = json_pack("{s:s, s:{s:I}}", "name", r->tool, "_meta", "progressToken",
	    (json_int_t)r->id);
	if (r->args != NULL)
		json_object_set(params, "arguments", r->args);
	r->max_at = now_ms() + c->conf.call_max_ms;
	if (rpc_request(r, "tools/call", params) == 0)
		req_arm(r, ms);
	else if (c->state != CS_FAILED)
		req_ending(r, "the call's arguments are longer than a message line may be");
}

static void
call_answer(struct mcp_client *c, struct mcp_req *r, const struct mcp_msg *m)
{
	struct mcp_result *res;
	char err[MCP_ERR_MAX];

	if (m->kind == MCP_MSG_ERROR)
		return call_fail(r, "the MCP server answered with an error: %.1000s (code %lld)",
		    m->message, (long long)m->code);
	if ((res = mcp_result_from(m->result, c->conf.result_max, err, sizeof(err))) == NULL)
		return call_fail(r, "the MCP server's answer is not a tool result: %s", err);
	call_end(r, res);
}

static void
req_send(struct mcp_req *r)
{
	if (r->kind == RQ_LIST)
		list_send(r);
	else if (r->kind == RQ_CALL)
		call_send(r);
}

/* A request's timer: its end (ENDING), or its timeout. */
static void
req_timer(evutil_socket_t fd, short what, void *arg)
{
	struct mcp_req *r = arg;
	struct mcp_client *c = r->c;
	int64_t t = now_ms();
	char d[32];

	enter(c);
	if (r->state == RS_ENDING)
		req_end_err(r, r->err);
	else if (r->kind == RQ_PROBE) {
		/* no answer: a legacy server that ignores what it does not know */
		log_debug("mcp %s: no answer to server/discover: a legacy server", c->server);
		req_free(r);
		if (c->start_at - t <= 0)
			client_fail(c, "no answer to server/discover within %s",
			    dur(c->conf.start_ms, d));
		else
			init_start(c);
	} else if (r->kind == RQ_INIT)
		client_fail(c, "no answer to initialize within %s", dur(c->conf.start_ms, d));
	else if (r->kind == RQ_LIST) {
		send_cancel(r, "timed out");
		list_end(r, "tools/list: no answer in time");
	} else if (r->kind == RQ_CALL) {
		send_cancel(r, "timed out");
		if (t >= r->max_at)
			call_fail(r, "the tool call was stopped: it ran for the most a call may "
			    "(%s)", dur(c->conf.call_max_ms, d));
		else
			call_fail(r, "the tool call timed out: no answer or progress in %s",
			    dur(c->conf.call_ms, d));
	}
	leave(c);
}

/* ---- what the server sends ------------------------------------------------ */

static void
answer(struct mcp_client *c, const struct mcp_msg *m)
{
	struct mcp_req *r;
	json_int_t id;
	char q[96];

	if (m->id == NULL && c->state == CS_PROBE) {
		/* a legacy server may refuse what comes before initialize without
		 * naming it: any error makes it legacy */
		TAILQ_FOREACH(r, &c->reqs, e)
			if (r->kind == RQ_PROBE && r->state == RS_SENT)
				return probe_answer(c, r, m);
	}
	if (m->id == NULL)
		return client_fail(c, "the server could not read a request: %.200s (%lld)",
		    m->message, (long long)m->code);
	id = json_integer_value(m->id);
	if (json_is_string(m->id))
		return client_fail(c, "an answer to id %s, which this client never sent",
		    quote(json_string_value(m->id), json_string_length(m->id), q));
	if (id <= 0 || id > c->next_id)
		return client_fail(c, "an answer to id %lld, which this client never sent",
		    (long long)id);
	if ((r = req_by_id(c, id)) == NULL) {
		log_debug("mcp %s: a late answer to request %lld, ignored", c->server,
		    (long long)id);
		return;
	}
	switch (r->kind) {
	case RQ_PROBE:
		return probe_answer(c, r, m);
	case RQ_INIT:
		return init_answer(c, r, m);
	case RQ_LIST:
		return list_answer(c, r, m);
	case RQ_CALL:
		return call_answer(c, r, m);
	case RQ_LISTEN:
		log_debug("mcp %s: the server ended the tools subscription", c->server);
		c->listen_id = 0;
		req_free(r);
	}
}

/* A request of the server's: only ping is one this client answers with a
 * result; it declared no capability. */
static void
server_request(struct mcp_client *c, const struct mcp_msg *m)
{
	json_t *a;

	if (c->modern)
		return client_fail(c, "the server sent a request (%.60s), which 2026-07-28 does "
		    "not allow on stdio", m->method);
	if (strcmp(m->method, "ping") == 0)
		a = json_pack("{s:s, s:O, s:{}}", "jsonrpc", "2.0", "id", m->id, "result");
	else
		a = json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", m->id, "error",
		    "code", -32601, "message", "Method not found (this client declares no "
		    "capabilities)");
	send_msg(c, a);
}

static void
progress(struct mcp_client *c, const json_t *params)
{
	const json_t *tok = json_object_get(params, "progressToken"),
	    *p = json_object_get(params, "progress"), *total = json_object_get(params, "total");
	struct mcp_req *r;
	int64_t left;

	if (!json_is_integer(tok) || !json_is_number(p) ||
	    (r = req_by_id(c, json_integer_value(tok))) == NULL || r->kind != RQ_CALL)
		return;
	/* progress must grow: the same figure again is no sign of work */
	if (r->has_progress && json_number_value(p) <= r->progress)
		return;
	r->has_progress = 1;
	r->progress = json_number_value(p);
	left = r->max_at - now_ms();
	if (left > 0)
		req_arm(r, left < (int64_t)c->conf.call_ms ? left : (int64_t)c->conf.call_ms);
	if (c->ev.progress != NULL)
		c->ev.progress(c->arg, r->handle, r->progress,
		    json_is_number(total) ? json_number_value(total) : -1,
		    json_string_value(json_object_get(params, "message")));
}

/* In the modern era, whether params come on the tools subscription. */
static int
on_listen(const struct mcp_client *c, const json_t *params)
{
	const json_t *sid = json_object_get(json_object_get(params, "_meta"),
	    "io.modelcontextprotocol/subscriptionId");

	return c->listen_id != 0 && json_is_integer(sid) && json_integer_value(sid) == c->listen_id;
}

static void
notification(struct mcp_client *c, const struct mcp_msg *m)
{
	const json_t *rid;
	struct mcp_req *r;

	if (strcmp(m->method, "notifications/progress") == 0)
		progress(c, m->params);
	else if (strcmp(m->method, "notifications/tools/list_changed") == 0) {
		if (c->state != CS_READY || (c->modern && !on_listen(c, m->params)))
			return;
		if (c->ev.tools_changed != NULL)
			c->ev.tools_changed(c->arg);
	} else if (strcmp(m->method, "notifications/cancelled") == 0 && c->modern) {
		/* the server ends the subscription */
		rid = json_object_get(m->params, "requestId");
		if (c->listen_id != 0 && json_is_integer(rid) &&
		    json_integer_value(rid) == c->listen_id &&
		    (r = req_by_id(c, c->listen_id)) != NULL) {
			c->listen_id = 0;
			req_free(r);
		}
	} else
		log_debug("mcp %s: %s", c->server, m->method);
}

static void
line_take(struct mcp_client *c, const char *line, size_t len)
{
	struct mcp_msg m;
	char err[256], q[96];

	if (len == 0)
		return;
	if (mcp_msg_parse(line, len, &m, err, sizeof(err)) == -1)
		return client_fail(c, "the server wrote a line that is no MCP message: %s: %s", err,
		    quote(line, len, q));
	switch (m.kind) {
	case MCP_MSG_RESULT:
	case MCP_MSG_ERROR:
		answer(c, &m);
		break;
	case MCP_MSG_REQUEST:
		server_request(c, &m);
		break;
	case MCP_MSG_NOTIFICATION:
		notification(c, &m);
	}
	mcp_msg_clear(&m);
}

static void
read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct mcp_client *c = arg;
	const char *line;
	size_t room, len;
	ssize_t n;
	char *p;
	int i, k;

	enter(c);
	for (i = 0; i < MCP_READS_PER_WAKE && !stopped(c); i++) {
		if ((room = mcp_rd_space(&c->rd, &p)) == 0) {
			client_fail(c, "the server wrote a line longer than %zu bytes",
			    c->conf.line_max);
			break;
		}
		n = read(c->rfd, p, room);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n == -1) {
			client_fail(c, "reading from the server: %s", strerror(errno));
			break;
		}
		if (n == 0) {
			client_fail(c, mcp_rd_pending(&c->rd) > 0 ? "the server closed its output in "
			    "the middle of a line" : "the server closed its output");
			break;
		}
		mcp_rd_filled(&c->rd, (size_t)n);
		while (!stopped(c) && (k = mcp_rd_line(&c->rd, &line, &len)) != 0) {
			if (k == -1)
				client_fail(c, "the server wrote a line longer than %zu bytes",
				    c->conf.line_max);
			else
				line_take(c, line, len);
		}
	}
	leave(c);
}

/* ---- the interface -------------------------------------------------------- */

static void
conf_defaults(struct mcp_conf *k)
{
	if (k->line_max == 0)
		k->line_max = MCP_LINE_MAX_DEFAULT;
	if (k->tools_max == 0)
		k->tools_max = MCP_TOOLS_MAX_DEFAULT;
	if (k->tool_bytes_max == 0)
		k->tool_bytes_max = MCP_TOOL_BYTES_MAX_DEFAULT;
	if (k->result_max == 0)
		k->result_max = MCP_RESULT_MAX_DEFAULT;
	if (k->start_ms == 0)
		k->start_ms = MCP_START_MS_DEFAULT;
	if (k->probe_ms == 0)
		k->probe_ms = MCP_PROBE_MS_DEFAULT;
	if (k->request_ms == 0)
		k->request_ms = MCP_REQUEST_MS_DEFAULT;
	if (k->call_ms == 0)
		k->call_ms = MCP_CALL_MS_DEFAULT;
	if (k->call_max_ms == 0)
		k->call_max_ms = MCP_CALL_MAX_MS_DEFAULT;
}

static void
nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl == -1 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) == -1)
		fatal("mcp: O_NONBLOCK");
}

struct mcp_client *
mcp_new(struct event_base *base, int rfd, int wfd, const struct mcp_conf *conf,
    const struct mcp_events *events, void *arg)
{
	struct mcp_client *c;

	if (conf->server == NULL || conf->server[0] == '\0') {
		close(rfd);
		if (wfd != rfd)
			close(wfd);
		return NULL;
	}
	if ((c = calloc(1, sizeof(*c))) == NULL)
		fatal("mcp");
	c->base = base;
	c->rfd = rfd;
	c->wfd = wfd;
	c->use_send = 1;
	c->conf = *conf;
	conf_defaults(&c->conf);
	c->server = xstrdup(conf->server);
	c->conf.server = c->server;
	if (events != NULL)
		c->ev = *events;
	c->arg = arg;
	TAILQ_INIT(&c->reqs);
	mcp_rd_init(&c->rd, c->conf.line_max);
	nonblock(rfd);
	nonblock(wfd);
	if ((c->rev = event_new(base, rfd, EV_READ | EV_PERSIST, read_cb, c)) == NULL ||
	    (c->wev = event_new(base, wfd, EV_WRITE, write_cb, c)) == NULL ||
	    (c->fail_ev = event_new(base, -1, 0, fail_cb, c)) == NULL ||
	    event_add(c->rev, NULL) == -1)
		fatalx("mcp: events");
	c->start_at = now_ms() + c->conf.start_ms;
	/* the probe of the 2026-07-28 stdio binding, before anything else */
	c->state = CS_PROBE;
	probe_send(c);
	return c;
}

static void
client_destroy(struct mcp_client *c)
{
	while (!TAILQ_EMPTY(&c->reqs))
		req_free(TAILQ_FIRST(&c->reqs));
	fds_close(c);
	event_free(c->fail_ev);
	mcp_rd_free(&c->rd);
	free(c->out);
	free(c->server);
	free(c->instructions);
	free(c->err);
	free(c);
}

void
mcp_free(struct mcp_client *c)
{
	if (c == NULL)
		return;
	if (c->depth > 0) {
		c->doomed = 1;
		return;
	}
	client_destroy(c);
}

const char *
mcp_error(const struct mcp_client *c)
{
	return c->err;
}

const char *
mcp_version(const struct mcp_client *c)
{
	return c->state == CS_READY ? c->version : NULL;
}

int
mcp_modern(const struct mcp_client *c)
{
	return c->state == CS_READY && c->modern;
}

const char *
mcp_instructions(const struct mcp_client *c)
{
	return c->instructions;
}

/* r goes out now, waits for the handshake, or ends with the error. */
static void
req_start(struct mcp_req *r)
{
	struct mcp_client *c = r->c;

	if (c->state == CS_FAILED)
		req_ending(r, c->err);
	else if (c->state == CS_READY)
		req_send(r);
	else
		r->state = RS_QUEUED;
}

void
mcp_list_tools(struct mcp_client *c, mcp_list_cb cb, void *arg)
{
	struct mcp_req *r = req_new(c, RQ_LIST);

	r->list_cb = cb;
	r->arg = arg;
	if ((r->tools = calloc(1, sizeof(*r->tools))) == NULL ||
	    (r->cursors = json_object()) == NULL)
		fatal("mcp");
	req_start(r);
}

uint64_t
mcp_call(struct mcp_client *c, const char *tool, const json_t *args, mcp_call_cb cb, void *arg)
{
	struct mcp_req *r = req_new(c, RQ_CALL);

	r->call_cb = cb;
	r->arg = arg;
	r->handle = ++c->next_handle;
	r->tool = xstrdup(tool != NULL ? tool : "");
	if (r->tool[0] == '\0') {
		req_ending(r, "no tool named");
		return r->handle;
	}
	if (args != NULL && !json_is_object(args)) {
		req_ending(r, "the tool's arguments are not an object");
		return r->handle;
	}
	if (args != NULL && (r->args = json_deep_copy(args)) == NULL)
		fatalx("out of memory");
	req_start(r);
	return r->handle;
}

void
mcp_cancel(struct mcp_client *c, uint64_t call)
{
	struct mcp_req *r;

	TAILQ_FOREACH(r, &c->reqs, e)
		if (r->kind == RQ_CALL && r->handle == call)
			break;
	if (r == NULL || r->state == RS_ENDING)
		return;
	if (r->state == RS_SENT)
		send_cancel(r, "cancelled by the client");
	req_ending(r, "cancelled");
}
