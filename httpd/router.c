/*
 * The route table and what every request goes through before its handler:
 * path and method matching (404, 405 with Allow), authentication
 * (auth.c), and for methods that carry a body: Content-Type
 * application/json (415), a JSON object (400 bad_json with jansson's line
 * and column), and strict fields (422 unknown_field / missing_field /
 * invalid_field).  Bodies above HTTPD_MAX_BODY never get here: evhttp
 * answers them 413 itself (see docs/api.md).
 *
 * Paths are matched segment by segment, exactly and without percent-
 * decoding.  A {id} segment must be a canonical UUID and a {name} segment a
 * template name; anything else names nothing, so the path is a 404.
 */
#include <sys/queue.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "httpd/httpd.h"

/* A member of a request body: its name, JSON type and whether it must be there. */
struct body_field {
	const char *name;
	json_type type;
	int required;
};

struct route {
	enum evhttp_cmd_type method; /* a GET route answers HEAD too */
	const char *pattern;
	route_fn handler;
	int auth;                        /* a bearer token is required */
	const struct body_field *fields; /* for POST/PUT/PATCH: the allowed members */
	size_t nfields;
};

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

int
router_is_uuid(const char *s)
{
	static const char shape[] = "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx";
	size_t i;

	for (i = 0; shape[i] != '\0'; i++) {
		if (s[i] == '\0')
			return 0;
		if (shape[i] == '-' && s[i] != '-')
			return 0;
		if (shape[i] != '-' && strchr("0123456789abcdefABCDEF", s[i]) == NULL)
			return 0;
	}
	return s[i] == '\0';
}

/* A template name: [a-z0-9][a-z0-9-]{0,63}. */
static int
router_is_name(const char *s)
{
	size_t n = strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-");

	return n >= 1 && n <= 64 && s[n] == '\0' && s[0] != '-';
}

static int
router_param_ok(const char *pat, size_t plen, const char *val)
{
	if (plen == 4 && strncmp(pat, "{id}", 4) == 0)
		return router_is_uuid(val);
	if (plen == 6 && strncmp(pat, "{name}", 6) == 0)
		return router_is_name(val);
	fatalx("route pattern with an unknown parameter");
}

/* Whether path matches pat; the parameter segment, if any, goes to param. */
static int
router_match(const char *pat, const char *path, char *param, size_t sz)
{
	size_t pl, sl;

	param[0] = '\0';
	while (*pat != '\0' && *path != '\0') {
		if (*pat++ != '/' || *path++ != '/')
			return 0;
		pl = strcspn(pat, "/");
		sl = strcspn(path, "/");
		if (*pat == '{') {
			if (sl == 0 || sl >= sz)
				return 0;
			memcpy(param, path, sl);
			param[sl] = '\0';
			if (!router_param_ok(pat, pl, param))
				return 0;
		} else if (pl != sl || strncmp(pat, path, sl) != 0)
			return 0;
		pat += pl;
		path += sl;
	}
	return *pat == '\0' && *path == '\0';
}

static void
router_allow(struct evhttp_request *req, int methods)
{
	static const struct {
		int m;
		const char *name;
	} names[] = {{EVHTTP_REQ_GET, "GET, HEAD"},
	             {EVHTTP_REQ_POST, "POST"},
	             {EVHTTP_REQ_PUT, "PUT"},
	             {EVHTTP_REQ_PATCH, "PATCH"},
	             {EVHTTP_REQ_DELETE, "DELETE"}};
	char allow[64] = "";
	size_t i, n = 0;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if ((methods & names[i].m) == 0)
			continue;
		n += (size_t)snprintf(allow + n, sizeof(allow) - n, "%s%s", n > 0 ? ", " : "",
		                      names[i].name);
	}
	evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", allow);
}

void
router_dispatch(struct evhttp_request *req, void *arg)
{
	const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	char param[HTTPD_PARAM_MAX + 1], found[HTTPD_PARAM_MAX + 1] = "";
	const struct route *rt = NULL;
	struct hreq *h;
	int methods = 0;
	size_t i;

	for (i = 0; path != NULL && i < NROUTES && rt == NULL; i++) {
		if (!router_match(routes[i].pattern, path, param, sizeof(param)))
			continue;
		methods |= (int)routes[i].method;
		if (routes[i].method == cmd ||
		    (cmd == EVHTTP_REQ_HEAD && routes[i].method == EVHTTP_REQ_GET)) {
			rt = &routes[i];
			memcpy(found, param, sizeof(found));
		}
	}
	if (rt == NULL && methods == 0) {
		httpd_error(req, 404, "not_found", "no such resource");
		return;
	}
	if (rt == NULL) {
		router_allow(req, methods);
		httpd_error(req, 405, "method_not_allowed", "method not allowed on this resource");
		return;
	}
	h = hreq_new(req, rt);
	memcpy(h->param, found, sizeof(h->param));
	if (rt->auth)
		auth_begin(h);
	else
		router_continue(h);
}

/* Media type application/json, parameters (charset) allowed. */
static int
router_is_json(const char *ct)
{
	static const char mt[] = "application/json";

	if (ct == NULL || strncasecmp(ct, mt, sizeof(mt) - 1) != 0)
		return 0;
	ct += sizeof(mt) - 1;
	ct += strspn(ct, " \t");
	return *ct == '\0' || *ct == ';';
}

/* Copy s into dst for a message: printable ASCII only, at most dstsz - 1. */
static void
router_printable(char *dst, size_t dstsz, const char *s)
{
	size_t i;

	for (i = 0; i + 1 < dstsz && s[i] != '\0'; i++)
		dst[i] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
	dst[i] = '\0';
}

static const struct body_field *
router_field(const struct route *rt, const char *name)
{
	size_t i;

	for (i = 0; i < rt->nfields; i++)
		if (strcmp(rt->fields[i].name, name) == 0)
			return &rt->fields[i];
	return NULL;
}

/* 422 naming the field: {"error":{"code","message","field"}}; frees h. */
static int
router_field_error(struct hreq *h, const char *ecode, const char *name, const char *what)
{
	char safe[65], msg[160];

	router_printable(safe, sizeof(safe), name);
	snprintf(msg, sizeof(msg), "field \"%s\" %s", safe, what);
	hreq_error_ex(h, 422, ecode, msg, json_pack("{s:s}", "field", safe));
	return -1;
}

/* Members: each known, of its type, the required ones present. */
static int
router_fields(struct hreq *h)
{
	const struct route *rt = h->route;
	const struct body_field *f;
	const char *key;
	json_t *v;
	size_t i;

	json_object_foreach(h->body, key, v)
	{
		if ((f = router_field(rt, key)) == NULL)
			return router_field_error(h, "unknown_field", key, "is unknown");
		if (json_typeof(v) != f->type)
			return router_field_error(h, "invalid_field", key, "has the wrong type");
	}
	for (i = 0; i < rt->nfields; i++)
		if (rt->fields[i].required && json_object_get(h->body, rt->fields[i].name) == NULL)
			return router_field_error(h, "missing_field", rt->fields[i].name,
			                          "is required");
	return 0;
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
	char text[JSON_ERROR_TEXT_LENGTH], msg[JSON_ERROR_TEXT_LENGTH + 64];
	json_error_t err;

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
	h->body = json_loadb((const char *)p, len, JSON_REJECT_DUPLICATES, &err);
	if (h->body == NULL) {
		router_printable(text, sizeof(text), err.text);
		snprintf(msg, sizeof(msg), "line %d, column %d: %s", err.line, err.column, text);
		hreq_error(h, 400, "bad_json", msg);
		return -1;
	}
	if (!json_is_object(h->body)) {
		hreq_error(h, 400, "bad_json", "the body must be a JSON object");
		return -1;
	}
	return router_fields(h);
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
