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
#include <jansson.h>
#include <string.h>

#include "httpd/httpd.h"

/* clang-format off */
static const struct body_field validate_fields[] = {
	{ "source", JSON_STRING, 1 },
};

static const struct route routes[] = {
	{ EVHTTP_REQ_GET,  "/healthz",                  api_healthz,           0, NULL, 0 },
	{ EVHTTP_REQ_GET,  "/v1/me",                    api_me,                1, NULL, 0 },
	{ EVHTTP_REQ_GET,  "/v1/projects",              api_projects,          1, NULL, 0 },
	{ EVHTTP_REQ_GET,  "/v1/projects/{id}",         api_project,           1, NULL, 0 },
	{ EVHTTP_REQ_GET,  "/v1/projects/{id}/members", api_project_members,   1, NULL, 0 },
	{ EVHTTP_REQ_GET,  "/v1/templates",             api_templates,         1, NULL, 0 },
	{ EVHTTP_REQ_POST, "/v1/templates/validate",    api_template_validate, 1,
	  validate_fields, sizeof(validate_fields) / sizeof(validate_fields[0]) },
	{ EVHTTP_REQ_GET,  "/v1/templates/{name}",      api_template,          1, NULL, 0 },
};
/* clang-format on */
#define NROUTES (sizeof(routes) / sizeof(routes[0]))

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

	(void)arg;
	rt = router_find(evhttp_request_get_command(req), path, param, sizeof(param), &methods);
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
	memcpy(h->param, param, sizeof(h->param));
	if (rt->auth)
		auth_begin(h);
	else
		router_continue(h);
}

/* Content type, JSON object, fields; on failure h is answered and freed. */
static int
router_body(struct hreq *h)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(h->req);
	const char *ct =
	    evhttp_find_header(evhttp_request_get_input_headers(h->req), "Content-Type");
	size_t len = evbuffer_get_length(in);
	const unsigned char *p;
	struct body_error e;

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

void
router_continue(struct hreq *h)
{
	if (router_has_body(h->route->method) && router_body(h) == -1)
		return;
	h->route->handler(h);
}
