/*
 * httpd: the HTTP/JSON API.  It never binds: the supervisor passes it bound
 * listening sockets (IMSG_LISTEN_FD).  It holds nothing secret; everything it
 * knows of the database comes from named operations.
 *
 * Routes today: GET /healthz -> 200 {"status","version","database"} when a
 * no-op named operation round-trips, 503 otherwise.
 */
#include <sys/queue.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/child.h"
#include "common/log.h"
#include "httpd/httpd.h"

static struct child httpd;
static struct evhttp *http;
static int nlisten;

/* A /healthz request waiting for its database round trip. */
struct hz {
	struct evhttp_request *req; /* NULL once the client went away */
	uint64_t id;
	struct event *timer;
};

static void
httpd_send_json(struct evhttp_request *req, int code, const char *reason, json_t *body)
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
	evhttp_send_reply(req, code, reason, buf);
	evbuffer_free(buf);
	free(s);
	json_decref(body);
}

static void
httpd_error(struct evhttp_request *req, int code, const char *reason, const char *ecode,
    const char *msg)
{
	httpd_send_json(req, code, reason,
	    json_pack("{s:{s:s,s:s}}", "error", "code", ecode, "message", msg));
}

static void
hz_finish(struct hz *h, int up)
{
	if (h->req != NULL) {
		evhttp_connection_set_closecb(evhttp_request_get_connection(h->req), NULL, NULL);
		httpd_send_json(h->req, up ? 200 : 503, up ? "OK" : "Service Unavailable",
		    json_pack("{s:s,s:s,s:s}", "status", up ? "ok" : "unavailable", "version",
			AGRIPPA_VERSION, "database", up ? "up" : "down"));
	}
	event_free(h->timer);
	free(h);
}

static void
hz_db_done(struct child *c, const struct ipc_db_result *r, void *arg)
{
	hz_finish(arg, r->code == DB_OK);
}

static void
hz_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct hz *h = arg;

	child_db_forget(&httpd, h->id);
	hz_finish(h, 0);
}

static void
hz_client_gone(struct evhttp_connection *conn, void *arg)
{
	struct hz *h = arg;

	h->req = NULL;
}

static void
httpd_healthz(struct evhttp_request *req)
{
	struct timeval tv = { HTTPD_DB_TIMEOUT_SECS, 0 };
	struct ipc_wbuf w;
	struct hz *h;

	if ((h = calloc(1, sizeof(*h))) == NULL)
		fatal("calloc");
	h->req = req;
	h->timer = evtimer_new(httpd.base, hz_timeout, h);
	if (h->timer == NULL || evtimer_add(h->timer, &tv) == -1)
		fatalx("evtimer");
	evhttp_connection_set_closecb(evhttp_request_get_connection(req), hz_client_gone, h);
	h->id = child_db_begin(&httpd, &w, "health", 0);
	if (child_db_send(&httpd, &w, h->id, hz_db_done, h) == -1)
		hz_finish(h, 0);
}

static void
httpd_route(struct evhttp_request *req, void *arg)
{
	const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);

	if (path != NULL && strcmp(path, "/healthz") == 0) {
		if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) {
			evhttp_add_header(evhttp_request_get_output_headers(req), "Allow",
			    "GET, HEAD");
			httpd_error(req, 405, "Method Not Allowed", "method_not_allowed",
			    "use GET");
			return;
		}
		httpd_healthz(req);
		return;
	}
	httpd_error(req, 404, "Not Found", "not_found", "no such route");
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
	default:
		fatalx("unexpected %s from the supervisor", ipc_msg_name(m->type));
	}
}

void
httpd_main(void)
{
	child_bootstrap(&httpd, ROLE_HTTPD);
	if ((httpd.base = event_base_new()) == NULL || (http = evhttp_new(httpd.base)) == NULL)
		fatalx("libevent set-up failed");
	evhttp_set_max_headers_size(http, 16 * 1024);
	evhttp_set_max_body_size(http, 1024 * 1024);
	evhttp_set_timeout(http, 60);
	evhttp_set_allowed_methods(http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST |
	    EVHTTP_REQ_PUT | EVHTTP_REQ_PATCH | EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS);
	evhttp_set_gencb(http, httpd_route, NULL);
	child_lockdown(&httpd);
	child_run(&httpd, httpd_dispatch_supervisor);
	log_debug("exiting");
	evhttp_free(http);
	exit(0);
}
