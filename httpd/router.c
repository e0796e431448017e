/*
 * The route table and what every request goes through before its handler:
 * path and method matching (404, 405 with Allow), authentication
 * (auth.c), and for methods that carry a body: Content-Type
 * application/json (415), a JSON object (400 bad_json with jansson's line
 * and column), and strict fields (422 unknown_field / missing_field /
 * invalid_field).  Bodies above HTTPD_MAX_BODY never get here: evhttp
 * answers them 413 itself (see docs/api.md).
 *
 * The checks themselves take plain data and live in http_check.c; this file
 * feeds them what evhttp hands it and turns their verdicts into replies.
 */
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <ctype.h>
#include <jansson.h>
#include <string.h>

#include "httpd/httpd.h"

/* clang-format off */
static const struct body_field validate_fields[] = {
	{ "source", JSON_STRING, 1 },
};
static const struct body_field member_add_fields[] = {
	{ "user", JSON_STRING, 1 },
	{ "role", JSON_STRING, 1 },
};
static const struct body_field member_update_fields[] = {
	{ "role", JSON_STRING, 1 },
};
static const struct body_field repo_fields[] = {
	{ "name",  JSON_STRING, 1 },
	{ "url",   JSON_STRING, 1 },
	{ "token",   JSON_STRING, 0 },
	{ "forge",   JSON_STRING, 0 },
	{ "api_url", JSON_STRING, 0 },
};
static const struct body_field submit_fields[] = {
	{ "template", JSON_STRING, 1 },
	{ "params",   JSON_OBJECT, 0 },
};
static const struct body_field budget_fields[] = {
	{ "usd_micros", JSON_INTEGER, 1 },
	{ "phase",      JSON_STRING,  0 },
};
static const struct body_field session_fields[] = {
	{ "token", JSON_STRING, 1 },
};
static const struct body_field decide_fields[] = {
	{ "decision", JSON_STRING, 1 },
	{ "comment",  JSON_STRING, 0 },
};
#define F(a) a, sizeof(a) / sizeof(a[0])
#define V API_ROLE_VIEWER
#define M API_ROLE_MEMBER
#define A API_ROLE_ADMIN

/* method, pattern, handler, auth, body fields, least role, {id} is a project, query */
static const struct route routes[] = {
	{ EVHTTP_REQ_GET,    "/healthz",                     api_healthz,           0, NULL, 0, 0, 0, NULL },
	{ EVHTTP_REQ_POST,   "/v1/session",                  api_session_create,    0, F(session_fields), 0, 0, NULL },
	{ EVHTTP_REQ_GET,    "/v1/session",                  api_session_get,       2, NULL, 0, 0, 0, NULL },
	{ EVHTTP_REQ_DELETE, "/v1/session",                  api_session_end,       1, NULL, 0, 0, 0, NULL },
	{ EVHTTP_REQ_GET,    "/v1/me",                       api_me,                1, NULL, 0, 0, 0, NULL },
	{ EVHTTP_REQ_GET,    "/v1/projects",                 api_projects,          1, NULL, 0, 0, 0, NULL },
	{ EVHTTP_REQ_GET,    "/v1/projects/{id}",            api_project,           1, NULL, 0, V, 1, NULL },
	{ EVHTTP_REQ_GET,    "/v1/projects/{id}/members",    api_project_members,   1, NULL, 0, V, 1, NULL },
	{ EVHTTP_REQ_POST,   "/v1/projects/{id}/members",    api_member_add,        1, F(member_add_fields), A, 1, NULL },
	{ EVHTTP_REQ_PATCH,  "/v1/memberships/{id}",         api_member_update,     1, F(member_update_fields), A, 0, NULL },
	{ EVHTTP_REQ_DELETE, "/v1/memberships/{id}",         api_member_remove,     1, NULL, 0, A, 0, NULL },
	{ EVHTTP_REQ_GET,    "/v1/projects/{id}/grants",     api_project_grants,    1, NULL, 0, V, 1, NULL },
	{ EVHTTP_REQ_GET,    "/v1/projects/{id}/repos",      api_project_repos,     1, NULL, 0, V, 1, NULL },
	{ EVHTTP_REQ_POST,   "/v1/projects/{id}/repos",      api_repo_add,          1, F(repo_fields), A, 1, NULL },
	{ EVHTTP_REQ_DELETE, "/v1/repos/{id}",               api_repo_remove,       1, NULL, 0, A, 0, NULL },
	{ EVHTTP_REQ_GET,    "/v1/projects/{id}/usage",      api_project_usage,     1, NULL, 0, V, 1, "month" },
	{ EVHTTP_REQ_GET,    "/v1/projects/{id}/audit",      api_project_audit,     1, NULL, 0, A, 1, "after limit" },
	{ EVHTTP_REQ_GET,    "/v1/projects/{id}/runs",       api_runs_list,         1, NULL, 0, V, 1,
	  "status template cursor limit" },
	{ EVHTTP_REQ_POST,   "/v1/projects/{id}/runs",       api_runs_submit,       1, F(submit_fields), M, 1, NULL },
	{ EVHTTP_REQ_GET,    "/v1/runs/{id}",                api_run,               1, NULL, 0, V, 0, NULL },
	{ EVHTTP_REQ_POST,   "/v1/runs/{id}/cancel",         api_run_cancel,        1, NULL, 0, M, 0, NULL },
	{ EVHTTP_REQ_POST,   "/v1/runs/{id}/budget",         api_run_budget,        1, F(budget_fields), A, 0, NULL },
	{ EVHTTP_REQ_GET,    "/v1/runs/{id}/steps",          api_run_steps,         1, NULL, 0, V, 0, NULL },
	{ EVHTTP_REQ_GET,    "/v1/runs/{id}/events",         api_run_events,        1, NULL, 0, V, 0, "after limit" },
	{ EVHTTP_REQ_GET,    "/v1/runs/{id}/events/stream",  api_run_stream,        1, NULL, 0, V, 0, "after" },
	{ EVHTTP_REQ_GET,    "/v1/runs/{id}/approvals",      api_run_approvals,     1, NULL, 0, V, 0, NULL },
	{ EVHTTP_REQ_GET,    "/v1/approvals",                api_approvals_pending, 1, NULL, 0, 0, 0, NULL },
	{ EVHTTP_REQ_POST,   "/v1/approvals/{id}/decide",    api_approval_decide,   1, F(decide_fields), M, 0, NULL },
	{ EVHTTP_REQ_GET,    "/v1/runs/{id}/artifacts",      api_run_artifacts,     1, NULL, 0, V, 0, NULL },
	{ EVHTTP_REQ_GET,    "/v1/artifacts/{id}",           api_artifact,          1, NULL, 0, V, 0, NULL },
	{ EVHTTP_REQ_GET,    "/v1/templates",                api_templates,         1, NULL, 0, 0, 0, NULL },
	{ EVHTTP_REQ_POST,   "/v1/templates/validate",       api_template_validate, 1, F(validate_fields), 0, 0, NULL },
	{ EVHTTP_REQ_GET,    "/v1/templates/{name}",         api_template,          1, NULL, 0, 0, 0, NULL },
};
#undef F
#undef V
#undef M
#undef A
/* clang-format on */
#define NROUTES (sizeof(routes) / sizeof(routes[0]))

const struct route *
router_routes(size_t *n)
{
	*n = NROUTES;
	return routes;
}

/*
 * The first route in table order whose pattern matches and whose method is
 * cmd (HEAD finds GET routes): GET /v1/templates/validate passes the POST
 * route and reaches {name}.
 */
const struct route *
router_find(enum evhttp_cmd_type cmd, const char *path, char *param, size_t sz, int *methods)
{
	size_t i;

	*methods = 0;
	for (i = 0; path != NULL && i < NROUTES; i++) {
		if (!router_match(routes[i].pattern, path, param, sz))
			continue;
		*methods |= (int)routes[i].method;
		if (routes[i].method == cmd ||
		    (cmd == EVHTTP_REQ_HEAD && routes[i].method == EVHTTP_REQ_GET))
			return &routes[i];
	}
	if (sz > 0)
		param[0] = '\0';
	return NULL;
}

void
router_dispatch(struct evhttp_request *req, void *arg)
{
	const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
	char param[HTTPD_PARAM_MAX + 1], allow[64];
	const struct route *rt;
	struct hreq *h;
	int methods;
	size_t i;

	(void)arg;
	metrics_count_reply(req, NULL, 1);
	if (static_serve(req, path))
		return;
	rt = router_find(evhttp_request_get_command(req), path, param, sizeof(param), &methods);
	metrics_count_reply(req, rt, 0);
	if (rt == NULL && methods == 0) {
		httpd_error(req, 404, "not_found", "no such resource");
		return;
	}
	if (rt == NULL) {
		router_allow_list(methods, allow, sizeof(allow));
		evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", allow);
		httpd_error(req, 405, "method_not_allowed", "method not allowed on this resource");
		return;
	}
	h = hreq_new(req, rt);
	/* ids are answered in lower case; so are they looked up */
	for (i = 0; param[i] != '\0'; i++)
		param[i] = (char)tolower((unsigned char)param[i]);
	memcpy(h->param, param, sizeof(h->param));
	if (rt->auth)
		auth_begin(h);
	else
		router_continue(h);
}

/* Content type, JSON object, fields; on failure h is answered and freed.
 * A route that takes no fields also takes no body at all. */
static int
router_body(struct hreq *h)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(h->req);
	const char *ct =
	    evhttp_find_header(evhttp_request_get_input_headers(h->req), "Content-Type");
	size_t len = evbuffer_get_length(in);
	const unsigned char *p;
	struct body_error e;

	if (h->route->nfields == 0 && len == 0)
		return 0;
	if (!router_is_json(ct)) {
		hreq_error(h, 415, "unsupported_media_type", "the body must be application/json");
		return -1;
	}
	if (len > HTTPD_MAX_BODY) {
		hreq_error(h, 413, "too_large", "the body is larger than 1 MiB");
		return -1;
	}
	if ((p = evbuffer_pullup(in, -1)) == NULL)
		p = (const unsigned char *)"";
	h->body = router_body_decode(p, len, h->route->fields, h->route->nfields, &e);
	if (h->body == NULL) {
		/* the 422s name the field, even an empty name; bad_json names none */
		hreq_error_ex(h, e.http, e.code, e.message,
		              e.status == BODY_BAD_JSON ? NULL
		                                        : json_pack("{s:s}", "field", e.field));
		return -1;
	}
	return 0;
}

static int
router_has_body(enum evhttp_cmd_type m)
{
	return m == EVHTTP_REQ_POST || m == EVHTTP_REQ_PUT || m == EVHTTP_REQ_PATCH;
}

int
router_role_check(struct hreq *h, const char *role)
{
	enum api_role have = router_role_rank(role);

	if (have == API_ROLE_NONE) {
		hreq_error(h, 404, "not_found", "no such project");
		return -1;
	}
	if (have < h->route->min_role) {
		hreq_error(h, 403, "forbidden", "your role in this project does not allow this");
		return -1;
	}
	return 0;
}

/*
 * httpd's own share of authorization, before any operation runs: for a
 * route under /v1/projects/{id}, the user's role in that project, from the
 * token's lookup.  Routes that address an object by its own id (a run, an
 * approval, a membership, an artifact) cannot know its project before the
 * operation has run: there the operation's SQL decides, and httpd checks
 * the role it reports before it answers (api_envelope_done).
 */
static int
router_authorize(struct hreq *h)
{
	if (h->route->min_role == API_ROLE_NONE || !h->route->project)
		return 0;
	return router_role_check(h, json_string_value(json_object_get(h->roles, h->param)));
}

void
router_continue(struct hreq *h)
{
	const char *qs = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(h->req));
	char err[160];

	if (router_query(qs, h->route->query, &h->query, err, sizeof(err)) == -1) {
		hreq_error(h, 400, "invalid_query", err);
		return;
	}
	if (h->route->auth && router_authorize(h) == -1)
		return;
	if (router_has_body(h->route->method) && router_body(h) == -1)
		return;
	h->route->handler(h);
}
