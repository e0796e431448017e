#ifndef AGRIPPA_HTTPD_H
#define AGRIPPA_HTTPD_H

/*
 * httpd: the HTTP/JSON API process on sockets the supervisor bound.  Private
 * header of the role, prototypes grouped by file.
 */
#include <sys/queue.h>

#include <stdint.h>

#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>

#include "ipc/ipc.h"
#include "ipc/ipc_msg.h"

#define HTTPD_DB_TIMEOUT_SECS 5
#define HTTPD_MAX_LISTEN 8
#define HTTPD_MAX_BODY (1024 * 1024)
#define HTTPD_UUID_LEN 36
#define HTTPD_PARAM_MAX 64 /* longest {id} or {name} path segment */
#define AUTHCACHE_HASH_LEN 32

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
	json_t *roles;                   /* {project id: role} of the user (in user) */
	char uid[HTTPD_UUID_LEN + 1];    /* the user's id once authenticated */
	struct evkeyvalq query;          /* the decoded query string, checked */
	char remote[64];                 /* the peer's address, for audit rows */
	struct event *timer;
	uint64_t dbid; /* pending database call, 0 when none */
	hreq_db_cb dbcb;
	uint64_t supid;   /* pending request to the supervisor (not the database), 0 when none */
	void (*supcb)(struct hreq *, struct ipc_msg *);
	TAILQ_ENTRY(hreq) supentry; /* on httpd.c's list while supid is set */
	unsigned char authhash[AUTHCACHE_HASH_LEN]; /* the token's SHA-256, while looked up */
	uint64_t authgen;                           /* the auth cache's generation then */
	json_t *art;    /* the artifact being served (api_runs.c) */
	int via_session; /* authenticated by the session cookie, not a bearer token */
	unsigned char sesskey[32]; /* POST /v1/session: the new session's secret, while stored */
	unsigned retry_after;      /* POST /v1/session refused by loginlimit.c: its Retry-After */
	uint64_t *metrics;         /* GET /metrics: the supervisor's numbers (metrics.c) */
};

/* Roles in a project, in order of what they may do; ROLE_NONE: no check. */
enum api_role { API_ROLE_NONE, API_ROLE_VIEWER, API_ROLE_MEMBER, API_ROLE_ADMIN };

/* A route handler: runs after routing, authentication and body checks. */
typedef void (*route_fn)(struct hreq *h);

/* A member of a request body: its name, JSON type and whether it must be there. */
struct body_field {
	const char *name;
	json_type type;
	int required;
};

#define ROUTE_AUTH_OPTIONAL 2

/* One entry of router.c's static route table. */
struct route {
	enum evhttp_cmd_type method; /* a GET route answers HEAD too */
	const char *pattern;         /* "/v1/projects/{id}": {id} or {name} segments */
	route_fn handler;
	int auth;                        /* a bearer token or session is required (1), or
	                                  * optional (ROUTE_AUTH_OPTIONAL: without one the
	                                  * handler runs with no user) */
	const struct body_field *fields; /* for POST/PUT/PATCH: the allowed members */
	size_t nfields;
	enum api_role min_role; /* the least role, in the object's project, that may call it */
	int project;            /* {id} is a project: httpd checks min_role before the call */
	const char *query;      /* the query parameters it takes, space-separated, or NULL */
};

/* Why router_body_decode refused a body. */
enum body_status {
	BODY_OK,
	BODY_BAD_JSON,      /* 400: not JSON, or not an object */
	BODY_UNKNOWN_FIELD, /* 422 */
	BODY_MISSING_FIELD, /* 422 */
	BODY_INVALID_FIELD, /* 422: the member has the wrong JSON type */
};

struct body_error {
	enum body_status status;
	int http;         /* 400 or 422 */
	const char *code; /* "bad_json", "unknown_field", "missing_field", "invalid_field" */
	char message[JSON_ERROR_TEXT_LENGTH + 64]; /* printable ASCII, never empty */
	char field[65]; /* for the 422s: the member's name, printable, cut at 64 */
};

/* httpd.c */
__attribute__((noreturn)) void httpd_main(void);
struct child;
/* For a connection's close callback: free the request the client left
 * unanswered when libevent left it to us. */
void httpd_request_orphan(struct evhttp_request *req);
/* The process's channel to the supervisor (and its event base). */
struct child *httpd_child(void);
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
/* The same with Retry-After: retry_after (seconds), for a 429 or a 503. */
void hreq_error_retry(struct hreq *h, int code, unsigned retry_after, const char *ecode,
                      const char *msg);
/* Free h after its handler answered h->req itself. */
void hreq_done(struct hreq *h);
/* Free h but keep its request, which the caller now owns (a stream); the
 * close callback h set is removed. */
struct evhttp_request *hreq_detach(struct hreq *h);
/* The same with extra members (consumed) in "error". */
void hreq_error_ex(struct hreq *h, int code, const char *ecode, const char *msg, json_t *extra);
/*
 * A request to the supervisor other than a database call (an artifact to
 * open, a secret to seal): hreq_sup_begin gives the message an id; after
 * appending its nfields values, hreq_sup_send sends it and cb gets the
 * reply with that id (m NULL after the usual timeout).  On a send failure h
 * is answered 503 and freed.  cb runs only while the client is there.
 */
typedef void (*hreq_sup_cb)(struct hreq *h, struct ipc_msg *m);
void hreq_sup_begin(struct ipc_wbuf *w, uint32_t type, uint32_t nfields, uint64_t *id);
void hreq_sup_send(struct hreq *h, struct ipc_wbuf *w, uint64_t id, hreq_sup_cb cb);
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
/* The route table (for tests): *n routes. */
const struct route *router_routes(size_t *n);
/* evhttp's callback for every request. */
void router_dispatch(struct evhttp_request *req, void *arg);
/* After authentication: the body checks, then the route's handler. */
void router_continue(struct hreq *h);
/*
 * The route for method cmd on path, its {id} / {name} segment in param (sz
 * bytes, NUL-terminated, "" when the route has none).  NULL when no route
 * answers: *methods is then 0 (a 404) or the EVHTTP_REQ_* bits of the
 * routes on that path (a 405; router_allow_list makes the Allow header) and
 * param is "".  HEAD finds GET routes.  path may be NULL (a 404).
 */
const struct route *router_find(enum evhttp_cmd_type cmd, const char *path, char *param, size_t sz,
                                int *methods);

/* http_check.c: router.c's pure checks (no evhttp request), exposed for tests */
/* Whether s is a canonical UUID (8-4-4-4-12 hex digits, either case). */
int router_is_uuid(const char *s);
/* Whether s is a template name: [a-z0-9][a-z0-9-]{0,63}. */
int router_is_name(const char *s);
/* Whether path matches pattern pat; the parameter segment goes to param
 * (sz bytes, NUL-terminated; a segment that does not fit matches nothing). */
int router_match(const char *pat, const char *path, char *param, size_t sz);
/* The Allow value for methods (EVHTTP_REQ_* bits) into allow (sz >= 1). */
void router_allow_list(int methods, char *allow, size_t sz);
/* Whether s is a month "YYYY-MM" (years 2000-9999). */
int router_is_month(const char *s);
/* s as a decimal integer 0..max without sign, spaces or leading zeros
 * (but "0"); -1 when it is anything else. */
int router_uint(const char *s, uint64_t max, uint64_t *out);
/* The rank of a role name ("viewer" < "member" < "admin"), API_ROLE_NONE
 * for anything else or NULL. */
enum api_role router_role_rank(const char *role);
/*
 * Decode query string qs (NULL or "" for none) into q (initialised here;
 * free with evhttp_clear_headers) and check it: every name in the
 * space-separated list allowed, none twice, each value non-empty.  Returns
 * 0, or -1 with a message in err (printable, names cut at 32 bytes).
 */
int router_query(const char *qs, const char *allowed, struct evkeyvalq *q, char *err,
                 size_t errsz);
/*
 * The value of the first cookie called name in a Cookie header value hdr
 * (pairs separated by ";" and spaces) into out (sz bytes, NUL-terminated):
 * 0, or -1 when there is none or its value does not fit.
 */
int router_cookie(const char *hdr, const char *name, char *out, size_t sz);
/* Whether a Content-Type value (NULL when absent) is application/json. */
int router_is_json(const char *ct);
/*
 * Decode len bytes of buf (NULL when len is 0) as a JSON object whose
 * members are all in fields (nfields), each of its type, the required ones
 * present.  Returns the object (the caller owns the reference) or NULL with
 * *e saying why (for bad_json the message gives jansson's line and column).
 */
json_t *router_body_decode(const void *buf, size_t len, const struct body_field *fields,
                           size_t nfields, struct body_error *e);

/* The route's role check against the user's role in a project (NULL when
 * not a member): 0 when it may go on, else h is answered 404 or 403 and
 * freed. */
int router_role_check(struct hreq *h, const char *role);

/* authcache.c: token lookups, by the token's SHA-256 */
/* The cached user ({id, name, display_name, projects}, borrowed) or NULL. */
json_t *authcache_get(const unsigned char *hash);
/* Cache what a lookup started at generation gen answered; expires_in: the
 * token's seconds left, or -1 when it does not expire. */
void authcache_put(const unsigned char *hash, json_t *user, uint64_t gen, int64_t expires_in);
uint64_t authcache_generation(void);
/* IMSG_AUTH_FLUSH: forget everything. */
void authcache_flush(void);

/* auth.c */
/* Whether tok is an API token's form ("agr_" and base64url characters). */
int auth_token_valid(const char *tok);
/* Authenticate h's bearer token or session cookie; router_continue(h) when it is good,
 * otherwise a 401 (or 503 when the database cannot answer). */
void auth_begin(struct hreq *h);

/* session.c: browser sessions (cookie + CSRF token) */
/* httpd's settings for sessions: public_url ("" or an origin), lifetime s. */
void session_configure(const char *public_url, uint32_t lifetime);
/* The SHA-256 of the request's session secret: 0, or -1 without a good cookie. */
int session_hash(struct evhttp_request *req, unsigned char hash[AUTHCACHE_HASH_LEN]);
/* Whether X-CSRF-Token is the token of the request's session. */
int session_csrf_ok(struct evhttp_request *req);
/* Whether the request comes from our origin: strict, Origin or
 * Sec-Fetch-Site must say so; otherwise only neither may say otherwise. */
int session_same_origin(struct evhttp_request *req, int strict);
void api_session_create(struct hreq *h);
void api_session_get(struct hreq *h);
void api_session_end(struct hreq *h);

/* sse.c: the bytes all event streams may hold unwritten (api.sse_queued_max),
 * and how many streams are open */
void sse_configure(size_t queued_max);
unsigned sse_stream_count(void);

/* userlimit.c: requests per user (api.user_rate, api.user_burst) */
/* The limits (rate 0: none); forgets every bucket. */
void user_limit_conf(unsigned rate, unsigned burst);
/* A request of user uid at now (ms, monotonic): 0 when it may go on, -1
 * and the seconds until it may in *retry_after. */
int user_limit_take(const char *uid, uint64_t now, unsigned *retry_after);

/* loginlimit.c: failed logins per client address and overall (token buckets) */
#define LOGIN_ADDR_BURST 10       /* failures an address may have at once */
#define LOGIN_ADDR_REFILL_MS 6000 /* ... and one more every 6 s */
#define LOGIN_ALL_BURST 100       /* failures of all addresses together */
#define LOGIN_ALL_REFILL_MS 600   /* ... and one more every 0.6 s */
#define LOGIN_AUDIT_MS 60000      /* a bucket's refusals audited at most once a minute */
struct login_refusal {
	const char *scope;     /* "address" or "all" */
	unsigned retry_after;  /* seconds until one more attempt may be made */
	int first;             /* the first refusal of that bucket in LOGIN_AUDIT_MS: audit it */
};
/* A login attempt from addr at now (ms, monotonic): 0 when it may go on (it
 * took a token from both buckets), -1 and why when it is refused. */
int login_limit_take(const char *addr, uint64_t now, struct login_refusal *why);
/* The attempt from addr succeeded: its tokens go back. */
void login_limit_refund(const char *addr, uint64_t now);
/* Forget every bucket (tests). */
void login_limit_reset(void);

/* static.c: the dashboard's files, loaded before the chroot */
/* Load every file of dir (flat; a missing dir: no dashboard, a warning). */
void static_load(const char *dir);
/* Whether path is the dashboard's ("/" or "/ui/..."); then it is answered. */
int static_serve(struct evhttp_request *req, const char *path);

/* metrics.c: GET /metrics on the metrics_listen socket */
/* Serve GET /metrics on fd (IMSG_METRICS_FD; evhttp owns fd from now on). */
void metrics_listen(int fd, const char *addr);
/* Count req's reply when it completes: under route rt, or the dashboard's
 * files (is_static), or no route. */
void metrics_count_reply(struct evhttp_request *req, const struct route *rt, int is_static);
void metrics_shutdown(void);

/* api.c */
/* Call op with the user's id, then the path parameter when with_param, then
 * nmore values the caller appends to *w before hreq_db_send (api_call_send). */
uint64_t api_call_begin(struct hreq *h, struct ipc_wbuf *w, const char *op, int with_param,
                        uint32_t nmore);
/* The reply callback for ops that answer one api_* envelope (0003_api.sql):
 * {status, body | error, role}. */
void api_envelope_done(struct hreq *h, const struct ipc_db_result *r);
/* A query parameter (NULL when absent) */
const char *api_query(struct hreq *h, const char *name);
/* The query parameter name as an integer 0..max, dflt when absent; -1 with
 * h answered 400 and freed when malformed. */
int api_query_uint(struct hreq *h, const char *name, uint64_t max, uint64_t dflt, uint64_t *out);
/* ?limit= as 1..max, dflt when absent; -1 with h answered 400 otherwise. */
int api_query_limit(struct hreq *h, uint64_t max, uint64_t dflt, uint64_t *out);
void api_healthz(struct hreq *h);
void api_me(struct hreq *h);
void api_projects(struct hreq *h);
void api_project(struct hreq *h);
void api_project_members(struct hreq *h);
void api_templates(struct hreq *h);
void api_template(struct hreq *h);
void api_template_validate(struct hreq *h);
void api_member_add(struct hreq *h);
void api_member_update(struct hreq *h);
void api_member_remove(struct hreq *h);
void api_project_grants(struct hreq *h);
void api_project_repos(struct hreq *h);
void api_repo_add(struct hreq *h);
void api_repo_remove(struct hreq *h);
void api_project_usage(struct hreq *h);
void api_project_audit(struct hreq *h);

/* api_runs.c */
void api_runs_submit(struct hreq *h);
void api_runs_list(struct hreq *h);
void api_run(struct hreq *h);
void api_run_cancel(struct hreq *h);
void api_run_budget(struct hreq *h);
void api_run_steps(struct hreq *h);
void api_run_events(struct hreq *h);
void api_run_approvals(struct hreq *h);
void api_approvals_pending(struct hreq *h);
void api_approval_decide(struct hreq *h);
void api_run_artifacts(struct hreq *h);
void api_artifact(struct hreq *h);

/* sse.c: GET /v1/runs/{id}/events/stream (DESIGN.md 3.5) */
void api_run_stream(struct hreq *h);
/* IMSG_RUN_WAKE: run (or "" for every run) may have events up to seq. */
void sse_wake(const char *run, uint64_t seq);

#endif
