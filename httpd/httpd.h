#ifndef AGRIPPA_HTTPD_H
#define AGRIPPA_HTTPD_H

/*
 * httpd: the HTTP/JSON API process on sockets the supervisor bound.  Private
 * header of the role, prototypes grouped by file.
 */
#include <stdint.h>

#include <jansson.h>

#include "ipc/ipc.h"
#include "ipc/ipc_msg.h"

#define HTTPD_DB_TIMEOUT_SECS 5
#define HTTPD_MAX_LISTEN 8
#define HTTPD_MAX_BODY (1024 * 1024)
#define HTTPD_UUID_LEN 36
#define HTTPD_PARAM_MAX 64 /* longest {id} or {name} path segment */

struct evhttp_request;
struct event;
struct route;
struct hreq;

/*
 * Reply to a named database call made with hreq_db_send.  r is NULL when
 * the call timed out or the channel went away; never called once the client
 * is gone (the request is freed instead).
 */
typedef void (*hreq_db_cb)(struct hreq *h, const struct ipc_db_result *r);

/*
 * One API request from routing to reply.  Owned by the event loop between
 * callbacks; hreq_reply / hreq_error / a client that went away free it.
 */
struct hreq {
	struct evhttp_request *req; /* NULL once the client went away */
	const struct route *route;
	char param[HTTPD_PARAM_MAX + 1]; /* the validated {id} / {name} segment, or "" */
	json_t *body;                    /* the request's JSON object, or NULL */
	json_t *user;                    /* {id, name, display_name} once authenticated */
	char uid[HTTPD_UUID_LEN + 1];    /* the user's id once authenticated */
	struct event *timer;
	uint64_t dbid; /* pending database call, 0 when none */
	hreq_db_cb dbcb;
};

/* A route handler: runs after routing, authentication and body checks. */
typedef void (*route_fn)(struct hreq *h);

/* httpd.c */
__attribute__((noreturn)) void httpd_main(void);
/* Send body (consumed) as the reply with status code. */
void httpd_send_json(struct evhttp_request *req, int code, json_t *body);
/* The one error envelope: {"error":{"code":ecode,"message":msg}}. */
void httpd_error(struct evhttp_request *req, int code, const char *ecode, const char *msg);
/* The same with extra members (consumed) merged into "error". */
void httpd_error_ex(struct evhttp_request *req, int code, const char *ecode, const char *msg,
                    json_t *extra);
struct hreq *hreq_new(struct evhttp_request *req, const struct route *rt);
/* Reply (body consumed) and free h; when the client is gone only free. */
void hreq_reply(struct hreq *h, int code, json_t *body);
void hreq_error(struct hreq *h, int code, const char *ecode, const char *msg);
/* The same with extra members (consumed) in "error". */
void hreq_error_ex(struct hreq *h, int code, const char *ecode, const char *msg, json_t *extra);
/* Start a named call (then append nargs values with ipc_put_*). */
uint64_t hreq_db_begin(struct ipc_wbuf *w, const char *op, uint32_t nargs);
/* Send it with a timeout; cb gets the reply.  On a send failure h is
 * answered 503 and freed. */
void hreq_db_send(struct hreq *h, struct ipc_wbuf *w, uint64_t id, hreq_db_cb cb);
/* 1 when r is a successful reply; otherwise answers h (503 or 500), frees
 * it and returns 0. */
int hreq_db_ok(struct hreq *h, const struct ipc_db_result *r);
/* Every row's first column parsed as JSON, as a new array; NULL (and h
 * answered 500 and freed) when a row is not JSON. */
json_t *hreq_db_rows(struct hreq *h, const struct ipc_db_result *r);

/* router.c */
/* evhttp's callback for every request. */
void router_dispatch(struct evhttp_request *req, void *arg);
/* After authentication: the body checks, then the route's handler. */
void router_continue(struct hreq *h);
/* Whether s is a canonical UUID (8-4-4-4-12 hex digits, either case). */
int router_is_uuid(const char *s);

/* auth.c */
/* Authenticate h's bearer token; router_continue(h) when it is good,
 * otherwise a 401 (or 503 when the database cannot answer). */
void auth_begin(struct hreq *h);

/* api.c */
void api_healthz(struct hreq *h);
void api_me(struct hreq *h);
void api_projects(struct hreq *h);
void api_project(struct hreq *h);
void api_project_members(struct hreq *h);
void api_templates(struct hreq *h);
void api_template(struct hreq *h);
void api_template_validate(struct hreq *h);

#endif
