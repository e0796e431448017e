/*
 * httpd: the HTTP/JSON API.  It never binds: the supervisor passes it bound
 * listening sockets (IMSG_LISTEN_FD).  It holds nothing secret; everything it
 * knows of the database comes from named operations.
 *
 * This file: the process (set-up, the supervisor's messages), replies in
 * the one error envelope, and the life of an API request (struct hreq)
 * across its asynchronous database calls.  Routes are in router.c, bearer
 * authentication in auth.c, the handlers in api.c; docs/api.md is the
 * reference.
 */
#include <sys/queue.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "httpd/httpd.h"
#include "privsep/child.h"

static struct child httpd;
static struct evhttp *http;
static int nlisten;

static const char *
httpd_reason(int code)
{
	switch (code) {
	case 200:
		return "OK";
	case 201:
		return "Created";
	case 202:
		return "Accepted";
	case 204:
		return "No Content";
	case 403:
		return "Forbidden";
	case 409:
		return "Conflict";
	case 429:
		return "Too Many Requests";
	case 400:
		return "Bad Request";
	case 401:
		return "Unauthorized";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 413:
		return "Payload Too Large";
	case 415:
		return "Unsupported Media Type";
	case 422:
		return "Unprocessable Entity";
	case 503:
		return "Service Unavailable";
	default:
		return "Internal Server Error";
	}
}

void
httpd_send_json(struct evhttp_request *req, int code, json_t *body)
{
	struct evbuffer *buf = evbuffer_new();
	char *s = json_dumps(body, JSON_COMPACT);

	if (buf == NULL || s == NULL)
		fatalx("out of memory");
	evbuffer_add(buf, s, strlen(s));
	evbuffer_add(buf, "\n", 1);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
	                  "application/json");
	evhttp_add_header(evhttp_request_get_output_headers(req), "Cache-Control", "no-store");
	evhttp_send_reply(req, code, httpd_reason(code), buf);
	evbuffer_free(buf);
	free(s);
	json_decref(body);
}

void
httpd_error_ex(struct evhttp_request *req, int code, const char *ecode, const char *msg,
               json_t *extra)
{
	json_t *e = json_pack("{s:s,s:s}", "code", ecode, "message", msg);

	if (e == NULL)
		fatalx("out of memory");
	if (extra != NULL && json_object_update(e, extra) == -1)
		fatalx("out of memory");
	json_decref(extra);
	httpd_send_json(req, code, json_pack("{s:o}", "error", e));
}

void
httpd_error(struct evhttp_request *req, int code, const char *ecode, const char *msg)
{
	httpd_error_ex(req, code, ecode, msg, NULL);
}

/* ---- requests ------------------------------------------------------------ */

/* The client's address as "host" (no port), or "" when unknown. */
static void
httpd_peer(struct evhttp_request *req, char *buf, size_t sz)
{
	struct evhttp_connection *conn = evhttp_request_get_connection(req);
	const char *addr = NULL;
	ev_uint16_t port;

	buf[0] = '\0';
	if (conn != NULL)
		evhttp_connection_get_peer(conn, (char **)&addr, &port);
	if (addr != NULL)
		snprintf(buf, sz, "%s", addr);
}

void
httpd_request_orphan(struct evhttp_request *req)
{
	/*
	 * When a client goes away before its reply is complete, libevent
	 * (2.1) detaches the request from the connection and leaves it to
	 * the program, which would answer it: free it here.  When the whole
	 * server is being freed the request is still attached, and libevent
	 * frees it itself after this callback.
	 */
	if (evhttp_request_get_connection(req) == NULL)
		evhttp_request_free(req);
}

static void hreq_sup_forget(struct hreq *h);

static void
hreq_client_gone(struct evhttp_connection *conn, void *arg)
{
	struct hreq *h = arg;

	httpd_request_orphan(h->req);
	h->req = NULL;
}

static void
hreq_free(struct hreq *h)
{
	if (h->req != NULL)
		evhttp_connection_set_closecb(evhttp_request_get_connection(h->req), NULL, NULL);
	if (h->dbid != 0)
		child_db_forget(&httpd, h->dbid);
	if (h->supid != 0)
		hreq_sup_forget(h);
	json_decref(h->art);
	free(h->metrics);
	event_free(h->timer);
	evhttp_clear_headers(&h->query);
	json_decref(h->body);
	json_decref(h->user);
	free(h);
}

static void
hreq_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct hreq *h = arg;
	hreq_db_cb cb = h->dbcb;

	child_db_forget(&httpd, h->dbid);
	h->dbid = 0;
	if (h->req == NULL) {
		hreq_free(h);
		return;
	}
	cb(h, NULL);
}

/*
 * A new request for route rt; the caller hands it to auth_begin or
 * router_continue.  Watches for the client going away so that late database
 * replies never touch a freed evhttp request.
 */
struct hreq *
hreq_new(struct evhttp_request *req, const struct route *rt)
{
	struct hreq *h;

	if ((h = calloc(1, sizeof(*h))) == NULL)
		fatal("calloc");
	h->req = req;
	h->route = rt;
	TAILQ_INIT(&h->query);
	httpd_peer(req, h->remote, sizeof(h->remote));
	if ((h->timer = evtimer_new(httpd.base, hreq_timeout, h)) == NULL)
		fatalx("evtimer");
	evhttp_connection_set_closecb(evhttp_request_get_connection(req), hreq_client_gone, h);
	return h;
}

void
hreq_reply(struct hreq *h, int code, json_t *body)
{
	if (h->req != NULL) {
		evhttp_connection_set_closecb(evhttp_request_get_connection(h->req), NULL, NULL);
		httpd_send_json(h->req, code, body);
		h->req = NULL;
	} else
		json_decref(body);
	hreq_free(h);
}

struct evhttp_request *
hreq_detach(struct hreq *h)
{
	struct evhttp_request *req = h->req;

	if (req != NULL)
		evhttp_connection_set_closecb(evhttp_request_get_connection(req), NULL, NULL);
	h->req = NULL;
	hreq_free(h);
	return req;
}

void
hreq_done(struct hreq *h)
{
	(void)hreq_detach(h);
}

void
hreq_error_ex(struct hreq *h, int code, const char *ecode, const char *msg, json_t *extra)
{
	if (h->req != NULL) {
		evhttp_connection_set_closecb(evhttp_request_get_connection(h->req), NULL, NULL);
		httpd_error_ex(h->req, code, ecode, msg, extra);
		h->req = NULL;
	} else
		json_decref(extra);
	hreq_free(h);
}

void
hreq_error(struct hreq *h, int code, const char *ecode, const char *msg)
{
	hreq_error_ex(h, code, ecode, msg, NULL);
}

void
hreq_error_retry(struct hreq *h, int code, unsigned retry_after, const char *ecode,
                 const char *msg)
{
	char secs[16];

	if (h->req != NULL) {
		snprintf(secs, sizeof(secs), "%u", retry_after);
		evhttp_add_header(evhttp_request_get_output_headers(h->req), "Retry-After", secs);
	}
	hreq_error_ex(h, code, ecode, msg, NULL);
}

uint64_t
hreq_db_begin(struct ipc_wbuf *w, const char *op, uint32_t nargs)
{
	return child_db_begin(&httpd, w, op, nargs);
}

static void
hreq_db_done(struct child *c, const struct ipc_db_result *r, void *arg)
{
	struct hreq *h = arg;

	evtimer_del(h->timer);
	h->dbid = 0;
	if (h->req == NULL) {
		hreq_free(h);
		return;
	}
	h->dbcb(h, r);
}

void
hreq_db_send(struct hreq *h, struct ipc_wbuf *w, uint64_t id, hreq_db_cb cb)
{
	struct timeval tv = {HTTPD_DB_TIMEOUT_SECS, 0};

	h->dbcb = cb;
	if (httpd.npending >= CHILD_DB_PENDING_MAX) {
		/* as many requests wait for the database as httpd will let wait */
		ipc_wbuf_free(w);
		hreq_error_retry(h, 429, 1, "too_many_requests",
		                 "too many requests in progress; retry later");
		return;
	}
	if (child_db_send(&httpd, w, id, hreq_db_done, h) == -1) {
		hreq_error(h, 503, "unavailable", "the database is unavailable");
		return;
	}
	h->dbid = id;
	if (evtimer_add(h->timer, &tv) == -1)
		fatalx("evtimer_add");
}

/* Requests waiting for a supervisor reply other than a database result. */
static TAILQ_HEAD(, hreq) sup_waits = TAILQ_HEAD_INITIALIZER(sup_waits);

static void
hreq_sup_forget(struct hreq *h)
{
	if (h->supid != 0)
		TAILQ_REMOVE(&sup_waits, h, supentry);
	h->supid = 0;
}

static void
hreq_sup_timeout(struct hreq *h, const struct ipc_db_result *r)
{
	hreq_sup_cb cb = h->supcb;

	hreq_sup_forget(h);
	cb(h, NULL);
}

void
hreq_sup_begin(struct ipc_wbuf *w, uint32_t type, uint32_t nfields, uint64_t *id)
{
	*id = ++httpd.next_id; /* one id space with database calls */
	ipc_wbuf_begin(w, type, *id, nfields);
}

void
hreq_sup_send(struct hreq *h, struct ipc_wbuf *w, uint64_t id, hreq_sup_cb cb)
{
	struct timeval tv = {HTTPD_DB_TIMEOUT_SECS, 0};

	if (ipc_wbuf_finish(w, httpd.max_frame) == -1 || ipc_chan_send(httpd.sup, w, -1) == -1) {
		ipc_wbuf_free(w);
		hreq_error(h, 503, "unavailable", "the supervisor is unavailable");
		return;
	}
	ipc_wbuf_free(w);
	TAILQ_INSERT_TAIL(&sup_waits, h, supentry);
	h->supid = id;
	h->supcb = cb;
	h->dbcb = hreq_sup_timeout; /* what hreq_timeout calls */
	if (evtimer_add(h->timer, &tv) == -1)
		fatalx("evtimer_add");
}

/* A supervisor reply to hreq_sup_send; an unknown id timed out already
 * (a descriptor it carries is closed with m). */
static void
hreq_sup_reply(struct ipc_msg *m)
{
	struct hreq *h;

	TAILQ_FOREACH(h, &sup_waits, supentry)
	if (h->supid == m->id)
		break;
	if (h == NULL)
		return;
	hreq_sup_forget(h);
	evtimer_del(h->timer);
	if (h->req == NULL) {
		hreq_done(h);
		return;
	}
	h->supcb(h, m);
}

int
hreq_db_ok(struct hreq *h, const struct ipc_db_result *r)
{
	if (r != NULL && r->code == DB_OK)
		return 1;
	if (r == NULL || r->code == DB_ERR_UNAVAILABLE)
		hreq_error(h, 503, "unavailable", "the database is unavailable");
	else if (r->code == DB_ERR_KEY_ROTATED) {
		/* nothing was stored; the same request sent again is sealed under
		 * the new key */
		hreq_error_retry(h, 503, 1, "key_rotated",
		                 "the master key was rotated while this was stored; nothing "
		                 "changed: send it again");
	} else {
		log_warnx("database call failed: %.*s", (int)r->errlen, r->error);
		hreq_error(h, 500, "internal", "internal error");
	}
	return 0;
}

json_t *
hreq_db_rows(struct hreq *h, const struct ipc_db_result *r)
{
	struct ipc_cur rows = r->rows, row;
	json_t *a = json_array(), *v;
	const char *s;
	size_t len;
	uint32_t i;

	if (a == NULL)
		fatalx("out of memory");
	for (i = 0; i < r->nrows; i++) {
		if (r->ncols < 1 || ipc_get_array(&rows, &row, r->ncols) == -1 ||
		    ipc_get_str(&row, &s, &len, SIZE_MAX) == -1 ||
		    (v = json_loadb(s, len, 0, NULL)) == NULL) {
			log_warnx("a database row is not JSON");
			json_decref(a);
			hreq_error(h, 500, "internal", "internal error");
			return NULL;
		}
		json_array_append_new(a, v);
	}
	return a;
}

/* ---- the process --------------------------------------------------------- */

struct child *
httpd_child(void)
{
	return &httpd;
}


static void
httpd_dispatch_supervisor(struct child *c, struct ipc_msg *m)
{
	char addr[IPC_ADDR_MAX + 1];

	switch (m->type) {
	case IMSG_LISTEN_FD:
		if (ipc_dec_listen_fd(m->body, addr, sizeof(addr)) == -1)
			fatalx("bad listen message");
		if (nlisten >= HTTPD_MAX_LISTEN)
			fatalx("too many listening sockets");
		if (evhttp_accept_socket(http, m->fd) == -1)
			fatalx("cannot accept on %s", addr);
		m->fd = -1; /* evhttp owns it now */
		nlisten++;
		log_info("listening on %s", addr);
		return;
	case IMSG_AUTH_FLUSH:
		if (ipc_dec_auth_flush(m->body) == -1)
			fatalx("bad auth flush message");
		authcache_flush();
		return;
	case IMSG_ARTIFACT_FD:
	case IMSG_ARTIFACT_ERR:
	case IMSG_REPO_SEALED:
	case IMSG_METRICS:
		hreq_sup_reply(m);
		return;
	case IMSG_METRICS_FD:
		if (ipc_dec_listen_fd(m->body, addr, sizeof(addr)) == -1)
			fatalx("bad metrics listen message");
		metrics_listen(m->fd, addr);
		m->fd = -1; /* evhttp owns it now */
		return;
	case IMSG_RUN_WAKE: {
		char run[IPC_UUID_LEN + 1];
		uint64_t seq;

		if (ipc_dec_run_wake(m->body, run, &seq) == -1)
			fatalx("bad run wake-up message");
		sse_wake(run, seq);
		return;
	}
	default:
		fatalx("unexpected %s from the supervisor", ipc_msg_name(m->type));
	}
}

/*
 * HTTPD_CONF follows HELLO: the session settings, and where the dashboard's
 * files are, which are read now, before child_lockdown's chroot.
 */
static void
httpd_conf(void)
{
	struct ipc_httpd_conf hc;
	struct ipc_msg m;
	const char *err;

	if (ipc_read_frame(CHILD_SUPERVISOR_FD, ROLE_HTTPD, ROLE_SUPERVISOR, httpd.max_frame,
	                   CHILD_HELLO_TIMEOUT_MS, &m, &err) == -1)
		fatalx("no configuration from the supervisor: %s", err);
	if (m.type != IMSG_HTTPD_CONF || ipc_dec_httpd_conf(m.body, &hc) == -1) {
		ipc_msg_free(&m);
		fatalx("the supervisor's second message is not a valid HTTPD_CONF");
	}
	ipc_msg_free(&m);
	session_configure(hc.public_url, hc.session_lifetime);
	user_limit_conf(hc.user_rate, hc.user_burst);
	sse_configure((size_t)hc.sse_queued_max);
	static_load(hc.ui_dir);
}

void
httpd_main(void)
{
	/*
	 * What jansson and libevent free is wiped first: request bodies carry
	 * secrets (a repository token), and the parser's and the buffers'
	 * own copies of them would otherwise outlive the request.
	 */
	json_set_alloc_funcs(wipe_malloc, wipe_free);
	event_set_mem_functions(wipe_malloc, wipe_realloc, wipe_free);
	child_bootstrap(&httpd, ROLE_HTTPD);
	httpd_conf();
	if ((httpd.base = event_base_new()) == NULL || (http = evhttp_new(httpd.base)) == NULL)
		fatalx("libevent set-up failed");
	evhttp_set_max_headers_size(http, 16 * 1024);
	evhttp_set_max_body_size(http, HTTPD_MAX_BODY);
	evhttp_set_timeout(http, 60);
	evhttp_set_allowed_methods(http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST |
	                                     EVHTTP_REQ_PUT | EVHTTP_REQ_PATCH | EVHTTP_REQ_DELETE |
	                                     EVHTTP_REQ_OPTIONS);
	evhttp_set_gencb(http, router_dispatch, NULL);
	child_lockdown(&httpd);
	child_run(&httpd, httpd_dispatch_supervisor);
	log_debug("exiting");
	metrics_shutdown();
	evhttp_free(http);
	exit(0);
}
