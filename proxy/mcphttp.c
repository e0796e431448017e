/*
 * mcphttp: the bridge between the MCP client's stdio framing and a remote
 * server's Streamable HTTP transport (proxy/mcphttp.h).
 *
 * A request the client writes is a struct req (its id, method and
 * deadline) carried by one struct xfer at a time: the POST, then the GETs
 * that resume its stream.  Notifications and responses the client writes
 * are xfers of their own without a req; so are the legacy GET stream and
 * the DELETE at the end.  Whatever an xfer reads (a JSON body, SSE events)
 * goes through deliver(): one JSON-RPC message checked and re-encoded
 * (mcphttp_read.c), redacted, written to the client; a response ends the
 * req of its id, wherever it came from.
 *
 * libcurl runs on the caller's loop with a multi handle of the bridge's own
 * (as proxy.c drives its own).  Nothing is freed from inside a libcurl
 * callback: a transfer that must stop returns 0 from its write callback
 * (x->err says why) and is taken down in xfer_done; done() runs from a
 * timer of its own, so the owner may free the bridge from it.
 */
#include <sys/queue.h>
#include <sys/socket.h>

#include <curl/curl.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/mcpspec.h"
#include "common/util.h"
#include "ipc/ipc_msg.h"
#include "proxy/mcphttp.h"
#include "runner/mcp.h"

#ifndef AGRIPPA_VERSION
#define AGRIPPA_VERSION "0"
#endif

#define ERRBODY_MAX 4096 /* bytes of an error answer's body kept */
#define ERRTEXT_MAX 512
#define READ_CHUNK 65536

enum xkind { X_POST, X_RESUME, X_STREAM, X_DELETE };

struct req;

struct xfer {
	TAILQ_ENTRY(xfer) e;
	struct mcphttp *h;
	enum xkind kind;
	struct req *rq;  /* the request carried, or NULL */
	char method[64]; /* the client's message's method ("" for a response) */
	CURL *easy;
	struct curl_slist *hdrs;
	char *body;
	size_t bodylen;
	int started;  /* the body began: ctype and status are known */
	int answered; /* its request's response came: the rest is not read */
	int ctype;    /* mcphttp_ctype */
	long status;
	char *resp; /* a JSON or error body */
	size_t resplen;
	struct mcphttp_sse sse;
	char session[MCPHTTP_SESSION_MAX + 1];
	char err[ERRTEXT_MAX]; /* why the write callback stopped it */
	char curlerr[CURL_ERROR_SIZE];
};

struct req {
	TAILQ_ENTRY(req) e;
	struct mcphttp *h;
	json_t *id;
	char method[64];
	uint64_t deadline; /* mono_ms() */
	struct xfer *x;   /* the transfer carrying it, NULL while it waits */
	struct event *resume_ev;
	char *last_id; /* the last SSE event id of its stream */
	long retry_ms;
	int resumes;
};

struct mcphttp {
	struct event_base *base;
	int fd;
	struct event *rev, *wev, *timer, *done_ev;
	struct event *end_ev; /* bridge_end from the event loop: the client reads not */
	int overflow;         /* ... and what is written to it from then on is dropped */
	CURLM *multi;
	char *url;
	char **headers; /* sodium_malloc'd "Name: value" */
	size_t nheaders;
	struct mcphttp_secret *secrets; /* sodium_malloc'd copies */
	size_t nsecrets;
	struct mcphttp_conf conf;
	void (*done)(void *, const char *);
	void *arg;
	struct mcp_rd rd;
	char *out;
	size_t outlen, outoff, outcap;
	char version[32]; /* from the InitializeResult (legacy) */
	char session[MCPHTTP_SESSION_MAX + 1];
	json_t *params;    /* tool name: [[argument, header name]...] (x-mcp-header) */
	int stream_opened; /* the legacy GET stream was tried */
	int closing;       /* the client is gone: DELETE, then done */
	int finished;      /* done is scheduled */
	char *done_err;
	size_t nreqs, nxfers;
	TAILQ_HEAD(, req) reqs;
	TAILQ_HEAD(, xfer) xfers;
};

static void xfer_start(struct xfer *x);
static void hdrs_wipe(struct curl_slist *l);
static void hdrs_params(struct mcphttp *h, struct curl_slist **l, const json_t *params);
static void bridge_end(struct mcphttp *h, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void write_cb(evutil_socket_t fd, short what, void *arg);

/* A server's text made one printable line of at most max bytes. */
static void
sanitize(const char *p, size_t n, char *out, size_t outsz)
{
	size_t i, o = 0;

	for (i = 0; i < n && o + 1 < outsz; i++)
		out[o++] = (unsigned char)p[i] >= 0x20 && (unsigned char)p[i] < 0x7f ? p[i] : ' ';
	while (o > 0 && out[o - 1] == ' ')
		o--;
	out[o] = '\0';
}

/* ---- writing to the client ------------------------------------------------ */

static void
flush(struct mcphttp *h)
{
	ssize_t n;

	while (h->outoff < h->outlen) {
		n = send(h->fd, h->out + h->outoff, h->outlen - h->outoff, MSG_NOSIGNAL);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			event_add(h->wev, NULL);
			return;
		}
		if (n == -1) {
			/* the client is gone: what it would have read no longer matters */
			h->outlen = h->outoff = 0;
			return;
		}
		h->outoff += (size_t)n;
	}
	h->outlen = h->outoff = 0;
}

static void
write_cb(evutil_socket_t fd, short what, void *arg)
{
	flush(arg);
}

/* Writes line (len bytes, no '\n', already redacted) and its newline. */
static void
put_line(struct mcphttp *h, const char *line, size_t len)
{
	size_t want;
	char *nb;

	struct timeval now = {0, 0};

	if (h->fd == -1 || h->closing || h->overflow)
		return;
	if (h->outlen - h->outoff + len + 1 > h->conf.out_max) {
		/* the end comes from the event loop: a caller may be answering a
		 * request bridge_end would answer and free under it */
		h->overflow = 1;
		evtimer_add(h->end_ev, &now);
		return;
	}
	if (h->outoff > 0 && h->outoff == h->outlen)
		h->outlen = h->outoff = 0;
	if (h->outlen + len + 1 > h->outcap) {
		want = h->outcap == 0 ? 4096 : h->outcap;
		while (want < h->outlen + len + 1)
			want *= 2;
		if ((nb = realloc(h->out, want)) == NULL)
			fatal("mcphttp");
		h->out = nb;
		h->outcap = want;
	}
	memcpy(h->out + h->outlen, line, len);
	h->out[h->outlen + len] = '\n';
	h->outlen += len + 1;
	if (!event_pending(h->wev, EV_WRITE, NULL))
		flush(h);
}

/* Writes msg (consumed) compactly, redacted. */
static void
put_json(struct mcphttp *h, json_t *msg)
{
	char *s = json_dumps(msg, JSON_COMPACT);
	size_t n;

	json_decref(msg);
	if (s == NULL)
		fatalx("json_dumps");
	n = strlen(s);
	mcphttp_redact(s, n, h->secrets, h->nsecrets);
	put_line(h, s, n);
	free(s);
}

/* ---- requests ------------------------------------------------------------- */

static void
req_free(struct req *r)
{
	struct mcphttp *h = r->h;

	if (r->x != NULL)
		r->x->rq = NULL;
	TAILQ_REMOVE(&h->reqs, r, e);
	h->nreqs--;
	if (r->resume_ev != NULL)
		event_free(r->resume_ev);
	json_decref(r->id);
	free(r->last_id);
	free(r);
}

static struct req *
req_by_id(struct mcphttp *h, const json_t *id)
{
	struct req *r;

	TAILQ_FOREACH(r, &h->reqs, e)
	if (json_equal(r->id, id))
		return r;
	return NULL;
}

/* Answers r with the bridge's own error (text redacted) and ends it. */
static void req_fail(struct req *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void
req_fail(struct req *r, const char *fmt, ...)
{
	char text[ERRTEXT_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	mcphttp_redact(text, strlen(text), r->h->secrets,
	               r->h->nsecrets); /* it may quote the server */
	log_debug("mcp http: %s", text);
	put_json(r->h, json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", r->id, "error",
	                         "code", MCPHTTP_ERR_CODE, "message", text));
	req_free(r);
}

/* ---- the end -------------------------------------------------------------- */

static void
xfer_free(struct xfer *x)
{
	struct mcphttp *h = x->h;

	if (x->rq != NULL)
		x->rq->x = NULL;
	if (x->easy != NULL) {
		curl_multi_remove_handle(h->multi, x->easy);
		curl_easy_cleanup(x->easy);
	}
	hdrs_wipe(x->hdrs);
	curl_slist_free_all(x->hdrs);
	free(x->body);
	free(x->resp);
	mcphttp_sse_free(&x->sse);
	TAILQ_REMOVE(&h->xfers, x, e);
	h->nxfers--;
	free(x);
}

static void
end_fire(evutil_socket_t fd, short what, void *arg)
{
	struct mcphttp *h = arg;

	bridge_end(h, "the client does not read what the server sends (over %zu bytes held)",
	           h->conf.out_max);
}

static void
done_fire(evutil_socket_t fd, short what, void *arg)
{
	struct mcphttp *h = arg;

	if (h->done != NULL)
		h->done(h->arg, h->done_err);
}

static void
fd_close(struct mcphttp *h)
{
	if (h->fd == -1)
		return;
	event_del(h->rev);
	event_del(h->wev);
	close(h->fd);
	h->fd = -1;
}

/* Schedules done (err NULL: a clean end). */
static void
finish(struct mcphttp *h, const char *err)
{
	struct timeval tv = {0, 0};

	if (h->finished)
		return;
	h->finished = 1;
	if (err != NULL && (h->done_err = strdup(err)) == NULL)
		fatal("mcphttp");
	fd_close(h);
	evtimer_add(h->done_ev, &tv);
}

/* Something broke for good: every request answered with why, the client's
 * end closed, done(why). */
static void
bridge_end(struct mcphttp *h, const char *fmt, ...)
{
	char text[ERRTEXT_MAX];
	struct req *r;
	va_list ap;

	if (h->finished)
		return;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	mcphttp_redact(text, strlen(text), h->secrets, h->nsecrets);
	while ((r = TAILQ_FIRST(&h->reqs)) != NULL)
		req_fail(r, "%s", text);
	flush(h);
	h->closing = 1;
	/* the transfers stop at their next callback (h->finished); mcphttp_free
	 * takes them down */
	finish(h, text);
}

/* ---- transfers ------------------------------------------------------------- */

static void hdr_add(struct curl_slist **l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void
hdr_add(struct curl_slist **l, const char *fmt, ...)
{
	struct curl_slist *n;
	va_list ap;
	char *s;
	int rc;

	/* whole, however long (a mirrored argument, an event id): a server
	 * that takes no such header says so itself */
	va_start(ap, fmt);
	rc = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (rc == -1 || (n = curl_slist_append(*l, s)) == NULL)
		fatalx("out of memory");
	free(s);
	*l = n;
}

/* Header lines that hold credentials: appended from sodium memory, and the
 * list's copies are wiped before curl frees them (xfer_wipe). */
static void
hdrs_spec(struct mcphttp *h, struct curl_slist **l)
{
	struct curl_slist *n;
	size_t i;

	for (i = 0; i < h->nheaders; i++) {
		if ((n = curl_slist_append(*l, h->headers[i])) == NULL)
			fatalx("out of memory");
		*l = n;
	}
}

static void
hdrs_wipe(struct curl_slist *l)
{
	for (; l != NULL; l = l->next)
		sodium_memzero(l->data, strlen(l->data));
}

/* The MCP-Protocol-Version for a message: its _meta's (modern), else the
 * negotiated one; NULL for none. */
static const char *
msg_version(struct mcphttp *h, const json_t *params)
{
	const char *v = json_string_value(json_object_get(
	    json_object_get(params, "_meta"), "io.modelcontextprotocol/protocolVersion"));
	size_t i;

	if (v != NULL && strlen(v) < 32) {
		for (i = 0; v[i] != '\0'; i++)
			if (!(v[i] == '-' || (v[i] >= '0' && v[i] <= '9') ||
			      (v[i] >= 'A' && v[i] <= 'Z') || (v[i] >= 'a' && v[i] <= 'z')))
				break;
		if (v[i] == '\0' && i > 0)
			return v;
	}
	return h->version[0] != '\0' ? h->version : NULL;
}

static void
hdrs_mcp(struct mcphttp *h, struct curl_slist **l, const json_t *msg)
{
	const char *method = json_string_value(json_object_get(msg, "method"));
	const json_t *params = json_object_get(msg, "params"), *name = NULL;
	const char *v;
	char *hv;

	if (method != NULL) {
		hv = mcphttp_header_value(method, strlen(method));
		hdr_add(l, "Mcp-Method: %s", hv);
		free(hv);
		if (strcmp(method, "tools/call") == 0 || strcmp(method, "prompts/get") == 0)
			name = json_object_get(params, "name");
		else if (strcmp(method, "resources/read") == 0)
			name = json_object_get(params, "uri");
		if (json_is_string(name) && json_string_length(name) <= 4096) {
			hv =
			    mcphttp_header_value(json_string_value(name), json_string_length(name));
			hdr_add(l, "Mcp-Name: %s", hv);
			free(hv);
		}
		if (strcmp(method, "tools/call") == 0)
			hdrs_params(h, l, params);
	}
	if ((v = msg_version(h, params)) != NULL &&
	    (method == NULL || strcmp(method, "initialize") != 0))
		hdr_add(l, "MCP-Protocol-Version: %s", v);
	if (h->session[0] != '\0')
		hdr_add(l, "Mcp-Session-Id: %s", h->session);
}

static size_t
xfer_header(char *data, size_t size, size_t n, void *arg)
{
	struct xfer *x = arg;
	size_t len = size * n, i;
	const char *v;

	if (len >= 5 && strncmp(data, "HTTP/", 5) == 0) {
		x->session[0] = '\0'; /* a new response (after a 1xx) */
		return len;
	}
	if (len > 15 && strncasecmp(data, "mcp-session-id:", 15) == 0) {
		v = data + 15;
		while (v < data + len && (*v == ' ' || *v == '\t'))
			v++;
		for (i = 0;
		     v + i < data + len && (unsigned char)v[i] > 0x20 && (unsigned char)v[i] < 0x7f;
		     i++)
			;
		if (i > 0 && i <= MCPHTTP_SESSION_MAX) {
			memcpy(x->session, v, i);
			x->session[i] = '\0';
		}
	}
	return len;
}

static int deliver(struct xfer *x, const char *text, size_t len);

static int
xfer_event(void *arg, const char *event, const char *data, size_t len)
{
	struct xfer *x = arg;

	if (strcmp(event, "message") != 0)
		return 0; /* another kind (2024-11-05's endpoint): not a message */
	return deliver(x, data, len);
}

/* The body begins: what it is decides how it is read. */
static void
xfer_begin(struct xfer *x)
{
	char *ct = NULL;

	x->started = 1;
	curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &x->status);
	curl_easy_getinfo(x->easy, CURLINFO_CONTENT_TYPE, &ct);
	x->ctype = mcphttp_ctype(ct);
	if (x->status >= 200 && x->status < 300 && x->ctype == 0 && x->rq != NULL) {
		char t[64];

		sanitize(ct != NULL ? ct : "none", ct != NULL ? strlen(ct) : 4, t, sizeof(t));
		snprintf(x->err, sizeof(x->err),
		         "the server answered with content of type %s, "
		         "neither application/json nor text/event-stream",
		         t);
	}
}

static size_t
xfer_write(char *data, size_t size, size_t n, void *arg)
{
	struct xfer *x = arg;
	struct mcphttp *h = x->h;
	size_t len = size * n, cap;
	char *nb;

	if (!x->started)
		xfer_begin(x);
	if (x->err[0] != '\0' || h->finished)
		return 0;
	if (x->status >= 200 && x->status < 300 && x->ctype == 2) {
		if (mcphttp_sse_feed(&x->sse, data, len, xfer_event, x) == -1) {
			if (x->err[0] == '\0')
				snprintf(x->err, sizeof(x->err),
				         "an event of the server's stream is "
				         "over %zu bytes",
				         h->conf.line_max);
			return 0;
		}
		if (x->sse.last_id != NULL && x->rq != NULL) {
			free(x->rq->last_id);
			if ((x->rq->last_id = strdup(x->sse.last_id)) == NULL)
				fatal("mcphttp");
		}
		if (x->rq != NULL && x->sse.retry_ms >= 0)
			x->rq->retry_ms = x->sse.retry_ms;
		/* the stream's response came: nothing more is read from it (in the
		 * modern era, closing it is how the request ends) */
		return h->finished || x->answered ? 0 : len;
	}
	cap = x->status >= 200 && x->status < 300 ? h->conf.line_max : ERRBODY_MAX;
	if (x->resplen + len > cap) {
		if (cap == ERRBODY_MAX)
			len = cap - x->resplen; /* an error's body: its beginning will do */
		else {
			snprintf(x->err, sizeof(x->err), "the server's answer is over %zu bytes",
			         cap);
			return 0;
		}
	}
	if ((nb = realloc(x->resp, x->resplen + len + 1)) == NULL)
		fatal("mcphttp");
	x->resp = nb;
	memcpy(x->resp + x->resplen, data, len);
	x->resplen += len;
	x->resp[x->resplen] = '\0';
	return size * n;
}

static struct xfer *
xfer_new(struct mcphttp *h, enum xkind kind, struct req *rq)
{
	struct xfer *x = calloc(1, sizeof(*x));

	if (x == NULL)
		fatal("mcphttp");
	x->h = h;
	x->kind = kind;
	x->rq = rq;
	if (rq != NULL) {
		rq->x = x;
		snprintf(x->method, sizeof(x->method), "%s", rq->method);
	}
	mcphttp_sse_init(&x->sse, h->conf.line_max);
	TAILQ_INSERT_TAIL(&h->xfers, x, e);
	h->nxfers++;
	return x;
}

static void
xfer_start(struct xfer *x)
{
	struct mcphttp *h = x->h;
	CURL *e;
	long ms = 0;

	if ((e = x->easy = curl_easy_init()) == NULL)
		fatalx("curl_easy_init");
	curl_easy_setopt(e, CURLOPT_URL, h->url);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	/* a redirect could carry the credential away */
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)h->conf.connect_ms);
	if (x->rq != NULL && strcmp(x->rq->method, "subscriptions/listen") != 0) {
		uint64_t now = mono_ms();

		ms = x->rq->deadline > now ? (long)(x->rq->deadline - now) : 0;
		curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, ms < 1 ? 1L : ms);
	} else if (x->kind == X_POST && x->rq == NULL) /* a notification, an answer */
		curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)h->conf.call_ms);
	else if (x->kind == X_DELETE) /* the client is gone: the end is not waited for long */
		curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)h->conf.connect_ms);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->hdrs);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, xfer_write);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, xfer_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->curlerr);
	curl_easy_setopt(e, CURLOPT_PRIVATE, x);
	curl_easy_setopt(e, CURLOPT_USERAGENT, "agrippad/" AGRIPPA_VERSION);
	if (x->kind == X_POST) {
		curl_easy_setopt(e, CURLOPT_POST, 1L);
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, x->body);
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)x->bodylen);
	} else if (x->kind == X_DELETE)
		curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "DELETE");
	if (curl_multi_add_handle(h->multi, e) != CURLM_OK)
		fatalx("curl_multi_add_handle");
}

/* The common headers of every transfer, the message's for a POST. */
static struct curl_slist *
hdrs_for(struct mcphttp *h, enum xkind kind, const json_t *msg, const char *last_id)
{
	struct curl_slist *l = NULL;

	hdrs_spec(h, &l);
	if (kind == X_POST) {
		hdr_add(&l, "Content-Type: application/json");
		hdr_add(&l, "Accept: application/json, text/event-stream");
		hdrs_mcp(h, &l, msg);
	} else {
		if (kind != X_DELETE)
			hdr_add(&l, "Accept: text/event-stream");
		if (h->version[0] != '\0')
			hdr_add(&l, "MCP-Protocol-Version: %s", h->version);
		if (h->session[0] != '\0')
			hdr_add(&l, "Mcp-Session-Id: %s", h->session);
		if (last_id != NULL)
			hdr_add(&l, "Last-Event-ID: %s", last_id);
	}
	hdr_add(&l, "Expect:");
	return l;
}

/* ---- what the server sends ------------------------------------------------- */

/* The version and session an InitializeResult passing through sets. */
static void
learn(struct mcphttp *h, struct xfer *x, const json_t *j)
{
	const char *v =
	    json_string_value(json_object_get(json_object_get(j, "result"), "protocolVersion"));

	if (v != NULL && strlen(v) < sizeof(h->version) && strchr(v, '\r') == NULL &&
	    strchr(v, '\n') == NULL)
		snprintf(h->version, sizeof(h->version), "%s", v);
	if (x->session[0] != '\0')
		memcpy(h->session, x->session, sizeof(h->session));
}

/* An error without id (a server refusing what it could not read) given
 * the id of the request it answers: msg (consumed) is the message as it was
 * parsed, never its redacted text (a value masked in it may not parse). */
static void
put_with_id(struct mcphttp *h, json_t *msg, const json_t *id)
{
	json_object_set(msg, "id", (json_t *)id);
	put_json(h, msg);
}

/* ---- x-mcp-header (SEP-2243): tool arguments mirrored as headers -------- */

/* Whether name is an HTTP token (RFC 9110 tchar), the only names allowed. */
static int
token_ok(const char *name, size_t n)
{
	return n <= 64 && http_token_ok(name, n);
}

/*
 * The x-mcp-header annotations of tool's inputSchema: an array of
 * [argument, header name] (new), or NULL when one is invalid (empty, not a
 * string, not a token, on a property that is not a string, an integer or a
 * boolean, a name twice in any case): the 2026-07-28 transport says such a
 * tool must not be used.
 */
static json_t *
tool_params(const json_t *tool)
{
	const json_t *props = json_object_get(json_object_get(tool, "inputSchema"), "properties");
	const json_t *p, *hn, *seen;
	const char *key, *type;
	json_t *out = json_array();
	size_t i;

	json_object_foreach((json_t *)props, key, p)
	{
		if ((hn = json_object_get(p, "x-mcp-header")) == NULL)
			continue;
		type = json_string_value(json_object_get(p, "type"));
		if (!json_is_string(hn) ||
		    !token_ok(json_string_value(hn), json_string_length(hn)) || type == NULL ||
		    (strcmp(type, "string") != 0 && strcmp(type, "integer") != 0 &&
		     strcmp(type, "boolean") != 0))
			goto bad;
		json_array_foreach(out, i,
		                   seen) if (strcasecmp(json_string_value(json_array_get(seen, 1)),
		                                        json_string_value(hn)) == 0) goto bad;
		json_array_append_new(out, json_pack("[s, O]", key, hn));
	}
	return out;
bad:
	json_decref(out);
	return NULL;
}

/* A tools/list result passing through: the tools whose annotations are
 * invalid taken out (so the client never offers them), the others'
 * mirrored arguments kept for their calls.  Returns the result's message
 * (consumed) as it goes on. */
static json_t *
tools_seen(struct mcphttp *h, json_t *msg)
{
	json_t *tools = json_object_get(json_object_get(msg, "result"), "tools"), *t, *ps;
	const char *name;
	size_t i;

	if (!json_is_array(tools))
		return msg;
	if (h->params == NULL)
		h->params = json_object();
	for (i = 0; i < json_array_size(tools);) {
		t = json_array_get(tools, i);
		name = json_string_value(json_object_get(t, "name"));
		if ((ps = tool_params(t)) == NULL) {
			log_warnx("mcp http: tool %.64s dropped: an invalid x-mcp-header",
			          name != NULL ? name : "?");
			json_array_remove(tools, i);
			continue;
		}
		if (name != NULL && json_array_size(ps) > 0)
			json_object_set_new(h->params, name, ps);
		else {
			if (name != NULL)
				json_object_del(h->params, name);
			json_decref(ps);
		}
		i++;
	}
	return msg;
}

/* Mcp-Param-NAME headers for a tools/call's mirrored arguments (null and
 * missing ones left out). */
static void
hdrs_params(struct mcphttp *h, struct curl_slist **l, const json_t *params)
{
	const char *tool = json_string_value(json_object_get(params, "name"));
	const json_t *args = json_object_get(params, "arguments"), *p, *v;
	char num[32], *hv;
	size_t i;

	if (tool == NULL || h->params == NULL || !json_is_object(args))
		return;
	json_array_foreach(json_object_get(h->params, tool), i, p)
	{
		v = json_object_get(args, json_string_value(json_array_get(p, 0)));
		if (json_is_string(v))
			hv = mcphttp_header_value(json_string_value(v), json_string_length(v));
		else if (json_is_integer(v) || json_is_boolean(v)) {
			if (json_is_integer(v))
				snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT,
				         json_integer_value(v));
			else
				snprintf(num, sizeof(num), "%s",
				         json_is_true(v) ? "true" : "false");
			hv = mcphttp_header_value(num, strlen(num));
		} else
			continue;
		hdr_add(l, "Mcp-Param-%s: %s", json_string_value(json_array_get(p, 1)), hv);
		free(hv);
	}
}

/*
 * One message read from x: checked, redacted, written to the client.  A
 * response ends the request of its id.  Returns -1 when it is no message
 * (x's request is then answered with why, and x stopped).
 */
static int
deliver(struct xfer *x, const char *text, size_t len)
{
	struct mcphttp *h = x->h;
	char err[256], *line;
	size_t n;
	int kind;
	json_t *id, *msg;
	struct req *r;

	if ((line = mcphttp_message(text, len, h->conf.line_max, h->secrets, h->nsecrets, &kind,
	                            &id, &msg, &n, err, sizeof(err))) == NULL) {
		snprintf(x->err, sizeof(x->err),
		         "the server's answer is not a JSON-RPC message: %s", err);
		return -1;
	}
	if (kind == MCP_MSG_RESULT || kind == MCP_MSG_ERROR) {
		r = id != NULL ? req_by_id(h, id) : x->rq;
		if (r == NULL) {
			log_debug("mcp http: an answer to no request in flight, dropped");
		} else {
			if (strcmp(r->method, "initialize") == 0 && kind == MCP_MSG_RESULT)
				learn(h, x, msg);
			if (strcmp(r->method, "tools/list") == 0 && kind == MCP_MSG_RESULT)
				put_json(h, tools_seen(h, json_incref(msg)));
			else if (id == NULL)
				put_with_id(h, json_incref(msg), r->id);
			else
				put_line(h, line, n);
			if (r == x->rq)
				x->answered = 1;
			req_free(r);
		}
	} else
		put_line(h, line, n);
	json_decref(id);
	json_decref(msg);
	free(line);
	return 0;
}

static void
resume_fire(evutil_socket_t fd, short what, void *arg)
{
	struct req *r = arg;
	struct mcphttp *h = r->h;
	struct xfer *x;

	if (mono_ms() >= r->deadline) {
		req_fail(r, "%s: no answer within %u ms", r->method, h->conf.call_ms);
		return;
	}
	x = xfer_new(h, X_RESUME, r);
	x->hdrs = hdrs_for(h, X_RESUME, NULL, r->last_id);
	xfer_start(x);
}

/* r's stream ended before its response: resumed if it can be. */
static void
req_resume(struct req *r)
{
	long ms = r->retry_ms >= 0 ? r->retry_ms : MCPHTTP_RETRY_MS_DEFAULT;
	struct timeval tv;

	if (r->last_id == NULL) {
		req_fail(r,
		         "%s: the server's event stream ended before the response, without an "
		         "event id to resume it from",
		         r->method);
		return;
	}
	if (r->resumes >= MCPHTTP_RESUMES_MAX) {
		req_fail(r, "%s: the server's event stream ended before the response %d times",
		         r->method, r->resumes + 1);
		return;
	}
	if (ms > MCPHTTP_RETRY_MS_MAX)
		ms = MCPHTTP_RETRY_MS_MAX;
	if (mono_ms() + (uint64_t)ms >= r->deadline) {
		req_fail(r, "%s: no answer within %u ms", r->method, r->h->conf.call_ms);
		return;
	}
	r->resumes++;
	if (r->resume_ev == NULL &&
	    (r->resume_ev = evtimer_new(r->h->base, resume_fire, r)) == NULL)
		fatalx("evtimer_new");
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	evtimer_add(r->resume_ev, &tv);
}

/* The legacy era's GET stream, once the session is set up. */
static void
stream_open(struct mcphttp *h)
{
	struct xfer *x;

	if (h->stream_opened || h->version[0] == '\0' || h->closing)
		return;
	h->stream_opened = 1;
	x = xfer_new(h, X_STREAM, NULL);
	x->hdrs = hdrs_for(h, X_STREAM, NULL, NULL);
	xfer_start(x);
}

/* An HTTP error answer to r: the server's JSON-RPC error when it gave one. */
static void
req_http_error(struct req *r, struct xfer *x)
{
	char text[256], *line, err[64];
	int kind;
	json_t *id, *msg;
	size_t n;

	if (x->resp != NULL && x->ctype == 1 &&
	    (line = mcphttp_message(x->resp, x->resplen, r->h->conf.line_max, r->h->secrets,
	                            r->h->nsecrets, &kind, &id, &msg, &n, err, sizeof(err))) != NULL) {
		if (kind == MCP_MSG_ERROR) {
			put_with_id(r->h, json_incref(msg), r->id);
			req_free(r);
		}
		json_decref(id);
		json_decref(msg);
		free(line);
		if (kind == MCP_MSG_ERROR)
			return;
	}
	sanitize(x->resp != NULL ? x->resp : "", x->resplen, text, sizeof(text));
	req_fail(r, "%s: the server answered HTTP %ld%s%s", r->method, x->status,
	         text[0] != '\0' ? ": " : "", text);
}

/* A transfer carrying r is over (r still waits for its answer). */
static void
req_xfer_done(struct req *r, struct xfer *x, CURLcode rc)
{
	const char *m = r->method;

	if (x->err[0] != '\0')
		return req_fail(r, "%s: %s", m, x->err);
	if (rc == CURLE_OPERATION_TIMEDOUT)
		return req_fail(r, "%s: no answer within %u ms", m, x->h->conf.call_ms);
	if (rc != CURLE_OK)
		return req_fail(r, "%s: the request to the server failed: %s", m,
		                x->curlerr[0] != '\0' ? x->curlerr : curl_easy_strerror(rc));
	if (x->status >= 300 && x->status < 400)
		return req_fail(r,
		                "%s: the server answered with a redirect (HTTP %ld), which is "
		                "not followed",
		                m, x->status);
	if (x->status < 200 || x->status >= 300)
		return req_http_error(r, x);
	if (x->ctype == 1 && x->resp != NULL) {
		if (deliver(x, x->resp, x->resplen) == -1)
			return req_fail(r, "%s: %s", m, x->err);
		if (x->rq == NULL)
			return; /* answered */
		return req_fail(r, "%s: the server's answer does not answer the request", m);
	}
	if (x->ctype == 2)
		return req_resume(r);
	req_fail(r, "%s: the server answered HTTP %ld without a message", m, x->status);
}

static void
xfer_done(struct xfer *x, CURLcode rc)
{
	struct mcphttp *h = x->h;
	struct req *r = x->rq;

	if (!x->started && x->easy != NULL)
		curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &x->status);
	if (x->kind == X_DELETE) {
		xfer_free(x);
		if (TAILQ_EMPTY(&h->xfers))
			finish(h, NULL);
		return;
	}
	if (x->status == 404 && h->session[0] != '\0' && !h->closing) {
		xfer_free(x);
		bridge_end(h, "the server ended the session (HTTP 404): it must be started again");
		return;
	}
	if (r != NULL)
		req_xfer_done(r, x, rc);
	else if (x->answered)
		log_debug("mcp http: %s: its stream stopped once the response came", x->method);
	else if (x->kind == X_POST && (rc != CURLE_OK || x->status < 200 || x->status >= 300))
		log_warnx("mcp http: %s: the server refused it (%s)",
		          x->method[0] != '\0' ? x->method : "a response",
		          rc != CURLE_OK ? curl_easy_strerror(rc) : "HTTP error");
	else if (x->kind == X_POST && strcmp(x->method, "notifications/initialized") == 0)
		stream_open(h);
	else if (x->kind == X_STREAM)
		log_debug("mcp http: the server's stream ended (HTTP %ld)", x->status);
	xfer_free(x);
}

/* ---- libcurl on libevent ------------------------------------------------- */

struct sockev {
	struct event *ev;
	struct mcphttp *h;
};

static void
multi_check(struct mcphttp *h)
{
	CURLMsg *msg;
	int left;
	struct xfer *x;

	while (!h->finished && (msg = curl_multi_info_read(h->multi, &left)) != NULL) {
		if (msg->msg != CURLMSG_DONE)
			continue;
		if (curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x) !=
		        CURLE_OK ||
		    x == NULL)
			fatalx("a transfer without its bridge");
		xfer_done(x, msg->data.result);
	}
}

static void
multi_event(evutil_socket_t fd, short what, void *arg)
{
	struct sockev *se = arg;
	struct mcphttp *h = se->h;
	int running, action = (what & EV_READ ? CURL_CSELECT_IN : 0) |
	                      (what & EV_WRITE ? CURL_CSELECT_OUT : 0);

	curl_multi_socket_action(h->multi, fd, action, &running);
	multi_check(h);
}

static void
multi_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct mcphttp *h = arg;
	int running;

	curl_multi_socket_action(h->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	multi_check(h);
}

static int
multi_socket(CURL *e, curl_socket_t s, int what, void *userp, void *socketp)
{
	struct mcphttp *h = userp;
	struct sockev *se = socketp;
	short kind;

	if (what == CURL_POLL_REMOVE) {
		if (se != NULL) {
			event_free(se->ev);
			free(se);
			curl_multi_assign(h->multi, s, NULL);
		}
		return 0;
	}
	kind = (short)(EV_PERSIST | (what & CURL_POLL_IN ? EV_READ : 0) |
	               (what & CURL_POLL_OUT ? EV_WRITE : 0));
	if (se == NULL) {
		if ((se = calloc(1, sizeof(*se))) == NULL)
			fatal("calloc");
		se->h = h;
		curl_multi_assign(h->multi, s, se);
	} else
		event_free(se->ev);
	if ((se->ev = event_new(h->base, s, kind, multi_event, se)) == NULL ||
	    event_add(se->ev, NULL) == -1)
		fatalx("event_new");
	return 0;
}

static int
multi_timer(CURLM *m, long ms, void *userp)
{
	struct mcphttp *h = userp;
	struct timeval tv;

	if (ms < 0) {
		evtimer_del(h->timer);
		return 0;
	}
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	evtimer_add(h->timer, &tv);
	return 0;
}

/* ---- what the client writes ------------------------------------------------ */

/* The client is gone: what is in flight is dropped, the session ended. */
static void
client_gone(struct mcphttp *h)
{
	struct xfer *x, *next;
	struct req *r;

	h->closing = 1;
	fd_close(h);
	while ((r = TAILQ_FIRST(&h->reqs)) != NULL)
		req_free(r);
	for (x = TAILQ_FIRST(&h->xfers); x != NULL; x = next) {
		next = TAILQ_NEXT(x, e);
		xfer_free(x);
	}
	if (h->session[0] == '\0') {
		finish(h, NULL);
		return;
	}
	x = xfer_new(h, X_DELETE, NULL);
	x->hdrs = hdrs_for(h, X_DELETE, NULL, NULL);
	xfer_start(x);
}

/* notifications/cancelled: the request's stream is closed too (cancellation
 * in the modern era; in the legacy one the notification says it). */
static void
on_cancel(struct mcphttp *h, const json_t *params)
{
	struct req *r = req_by_id(h, json_object_get(params, "requestId"));
	struct xfer *x;

	if (r == NULL)
		return;
	if ((x = r->x) != NULL)
		xfer_free(x);
	req_free(r);
}

static void
client_line(struct mcphttp *h, const char *line, size_t len)
{
	struct mcp_msg m;
	char err[256];
	struct req *r;
	struct xfer *x;

	if (mcp_msg_parse(line, len, &m, err, sizeof(err)) == -1) {
		bridge_end(h, "the client wrote what is not a JSON-RPC message: %s", err);
		return;
	}
	r = NULL;
	if (m.kind == MCP_MSG_REQUEST) {
		if (req_by_id(h, m.id) != NULL || h->nreqs >= h->conf.inflight_max) {
			put_json(h, json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id",
			                      m.id, "error", "code", MCPHTTP_ERR_CODE, "message",
			                      req_by_id(h, m.id) != NULL
			                          ? "a request of this id is in flight"
			                          : "too many requests in flight to the server"));
			mcp_msg_clear(&m);
			return;
		}
		if ((r = calloc(1, sizeof(*r))) == NULL)
			fatal("mcphttp");
		r->h = h;
		r->id = json_incref(m.id);
		snprintf(r->method, sizeof(r->method), "%s", m.method);
		/* subscriptions/listen lasts as long as the client wants it */
		r->deadline = strcmp(r->method, "subscriptions/listen") == 0
		                  ? UINT64_MAX
		                  : mono_ms() + h->conf.call_ms;
		r->retry_ms = -1;
		TAILQ_INSERT_TAIL(&h->reqs, r, e);
		h->nreqs++;
	} else if (h->nxfers >= 2 * h->conf.inflight_max + 2) {
		/* notifications and answers of the client's: as many again at most */
		log_warnx("mcp http: %s dropped: %zu transfers in flight",
		          m.method != NULL ? m.method : "an answer", h->nxfers);
		mcp_msg_clear(&m);
		return;
	} else if (m.kind == MCP_MSG_NOTIFICATION &&
	           strcmp(m.method, "notifications/cancelled") == 0)
		on_cancel(h, m.params);
	x = xfer_new(h, X_POST, r);
	if (m.method != NULL)
		snprintf(x->method, sizeof(x->method), "%s", m.method);
	if ((x->body = malloc(len + 1)) == NULL)
		fatal("mcphttp");
	memcpy(x->body, line, len);
	x->body[len] = '\0';
	x->bodylen = len;
	x->hdrs = hdrs_for(h, X_POST, m.j, NULL);
	mcp_msg_clear(&m);
	xfer_start(x);
}

static void
read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct mcphttp *h = arg;
	const char *line;
	size_t len, room;
	ssize_t n;
	char *p;
	int rc;

	room = mcp_rd_space(&h->rd, &p);
	if (room == 0) {
		bridge_end(h, "the client wrote a line over %zu bytes", h->conf.line_max);
		return;
	}
	n = recv(h->fd, p, room, 0);
	if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n <= 0) {
		client_gone(h);
		return;
	}
	mcp_rd_filled(&h->rd, (size_t)n);
	while (!h->finished && !h->closing && (rc = mcp_rd_line(&h->rd, &line, &len)) != 0) {
		if (rc == -1) {
			bridge_end(h, "the client wrote a line over %zu bytes", h->conf.line_max);
			return;
		}
		if (len > 0)
			client_line(h, line, len);
	}
}

/* ---- the bridge ------------------------------------------------------------ */

/* url checked as mcp add checks a spec's (common/mcpspec.c), in its normal form. */
static char *
url_check(const char *url, char *err, size_t errsz)
{
	json_t *spec = json_pack("{s:s, s:s}", "transport", "http", "url", url);
	struct mcpspec *s;
	char *out = NULL;

	if (spec == NULL) {
		snprintf(err, errsz, "the URL is not UTF-8 text");
		return NULL;
	}
	if ((s = mcpspec_check(spec, NULL, err, errsz)) != NULL) {
		if ((out = strdup(s->url)) == NULL)
			fatal("mcphttp");
		mcpspec_free(s);
	}
	json_decref(spec);
	return out;
}

static char *
smem_dup(const char *p, size_t n)
{
	char *d = sodium_malloc(n + 1);

	if (d == NULL)
		fatal("sodium_malloc");
	memcpy(d, p, n);
	d[n] = '\0';
	return d;
}

static int
header_ok(const char *hd)
{
	const char *colon = strchr(hd, ':');

	/* a name as mcp add takes it (an HTTP token), a line as IPC carries it */
	return colon != NULL && http_token_ok(hd, (size_t)(colon - hd)) &&
	       strcspn(hd, "\r\n") == strlen(hd) && strlen(hd) <= IPC_MCP_HEADER_MAX;
}

static void
conf_defaults(struct mcphttp_conf *c)
{
	if (c->line_max == 0)
		c->line_max = MCP_LINE_MAX_DEFAULT;
	if (c->inflight_max == 0)
		c->inflight_max = MCPHTTP_INFLIGHT_DEFAULT;
	if (c->connect_ms == 0)
		c->connect_ms = MCPHTTP_CONNECT_MS_DEFAULT;
	if (c->call_ms == 0)
		c->call_ms = MCPHTTP_CALL_MS_DEFAULT;
	if (c->out_max == 0)
		c->out_max = MCPHTTP_OUT_MAX;
	c->secrets = NULL;
	c->nsecrets = 0;
}

struct mcphttp *
mcphttp_new(struct event_base *base, int fd, const char *url, const char *const *headers,
            size_t nheaders, const struct mcphttp_conf *conf, void (*done)(void *, const char *),
            void *arg, char *err, size_t errsz)
{
	struct mcphttp *h;
	char *u;
	size_t i;
	int fl;

	if (nheaders > MCPSPEC_HEADERS_MAX ||
	    (conf != NULL && conf->nsecrets > MCPHTTP_SECRETS_MAX)) {
		snprintf(err, errsz, "too many headers or secrets");
		close(fd);
		return NULL;
	}
	for (i = 0; i < nheaders; i++)
		if (!header_ok(headers[i])) {
			snprintf(err, errsz,
			         "header %zu is not one \"Name: value\" line of at most %u bytes "
			         "whose name is an HTTP token",
			         i + 1, IPC_MCP_HEADER_MAX);
			close(fd);
			return NULL;
		}
	for (i = 0; conf != NULL && i < conf->nsecrets; i++)
		if (conf->secrets[i].len < MCPHTTP_SECRET_MIN) {
			/* shorter ones would not be redacted (mcphttp_redact) */
			snprintf(err, errsz, "secret %zu is shorter than %d bytes", i + 1,
			         MCPHTTP_SECRET_MIN);
			close(fd);
			return NULL;
		}
	if ((u = url_check(url, err, errsz)) == NULL) {
		close(fd);
		return NULL;
	}
	if ((h = calloc(1, sizeof(*h))) == NULL)
		fatal("mcphttp");
	h->base = base;
	h->fd = fd;
	h->url = u;
	h->done = done;
	h->arg = arg;
	if (conf != NULL)
		h->conf = *conf;
	conf_defaults(&h->conf);
	TAILQ_INIT(&h->reqs);
	TAILQ_INIT(&h->xfers);
	mcp_rd_init(&h->rd, h->conf.line_max);
	if (nheaders > 0 && (h->headers = calloc(nheaders, sizeof(*h->headers))) == NULL)
		fatal("mcphttp");
	for (i = 0; i < nheaders; i++)
		h->headers[i] = smem_dup(headers[i], strlen(headers[i]));
	h->nheaders = nheaders;
	if (conf != NULL && conf->nsecrets > 0) {
		if ((h->secrets = calloc(conf->nsecrets, sizeof(*h->secrets))) == NULL)
			fatal("mcphttp");
		for (i = 0; i < conf->nsecrets; i++) {
			h->secrets[i].p = smem_dup(conf->secrets[i].p, conf->secrets[i].len);
			h->secrets[i].len = conf->secrets[i].len;
		}
		h->nsecrets = conf->nsecrets;
	}
	if ((fl = fcntl(fd, F_GETFL)) == -1 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) == -1)
		fatal("fcntl");
	if ((h->multi = curl_multi_init()) == NULL ||
	    (h->timer = evtimer_new(base, multi_timeout, h)) == NULL ||
	    (h->done_ev = evtimer_new(base, done_fire, h)) == NULL ||
	    (h->end_ev = evtimer_new(base, end_fire, h)) == NULL ||
	    (h->rev = event_new(base, fd, EV_READ | EV_PERSIST, read_cb, h)) == NULL ||
	    (h->wev = event_new(base, fd, EV_WRITE, write_cb, h)) == NULL ||
	    event_add(h->rev, NULL) == -1)
		fatalx("mcphttp_new");
	curl_multi_setopt(h->multi, CURLMOPT_SOCKETFUNCTION, multi_socket);
	curl_multi_setopt(h->multi, CURLMOPT_SOCKETDATA, h);
	curl_multi_setopt(h->multi, CURLMOPT_TIMERFUNCTION, multi_timer);
	curl_multi_setopt(h->multi, CURLMOPT_TIMERDATA, h);
	return h;
}

const char *
mcphttp_session(const struct mcphttp *h)
{
	return h->session[0] != '\0' ? h->session : NULL;
}

void
mcphttp_free(struct mcphttp *h)
{
	struct xfer *x;
	struct req *r;
	size_t i;

	if (h == NULL)
		return;
	while ((r = TAILQ_FIRST(&h->reqs)) != NULL)
		req_free(r);
	while ((x = TAILQ_FIRST(&h->xfers)) != NULL)
		xfer_free(x);
	fd_close(h);
	curl_multi_cleanup(h->multi);
	event_free(h->timer);
	event_free(h->done_ev);
	event_free(h->end_ev);
	event_free(h->rev);
	event_free(h->wev);
	for (i = 0; i < h->nheaders; i++)
		sodium_free(h->headers[i]);
	free(h->headers);
	for (i = 0; i < h->nsecrets; i++)
		sodium_free((void *)h->secrets[i].p);
	free(h->secrets);
	mcp_rd_free(&h->rd);
	sodium_memzero(h->session, sizeof(h->session));
	free(h->out);
	free(h->url);
	free(h->done_err);
	json_decref(h->params);
	free(h);
}
