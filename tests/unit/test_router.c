/*
 * Unit tests for the router's pure checks (httpd/http_check.c) and the real
 * route table through router_find (httpd/router.c): what reaches which
 * handler, what is a 404 or a 405 with which Allow, which Content-Types are
 * JSON, and what a request body must be to reach a handler; and that
 * docs/api.md and docs/openapi.yaml describe exactly the table's routes
 * (the spec also their query parameters, body members and authentication).
 *
 * Current behaviour these tests pin down (change them only on purpose):
 *  - Content-Type: the media type is compared case-insensitively, so
 *    "Application/JSON" is accepted; any parameters after ';' are accepted
 *    unread (even charset=latin1: the body is decoded as UTF-8 regardless
 *    and non-UTF-8 is a bad_json).  Leading whitespace is not skipped.
 *  - Members are checked in body order before the required ones, so a body
 *    with an unknown member and a missing one reports unknown_field.
 *  - jansson types true and false apart (JSON_TRUE / JSON_FALSE): a field
 *    declared JSON_TRUE refuses false.  No route declares a boolean yet.
 */
#include <sys/queue.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/yamlev.h"
#include "httpd/httpd.h"

#define UUID "0f8fad5b-d9cb-469f-a165-70867728950e"
#define UUID_UPPER "0F8FAD5B-D9CB-469F-A165-70867728950E"
#define NAME64 "a123456789012345678901234567890123456789012345678901234567890123"
#define NAME65 NAME64 "4"

/* ---- helpers ------------------------------------------------------------ */

static const char *
method_name(enum evhttp_cmd_type m)
{
	switch (m) {
	case EVHTTP_REQ_GET:
		return "GET";
	case EVHTTP_REQ_HEAD:
		return "HEAD";
	case EVHTTP_REQ_POST:
		return "POST";
	case EVHTTP_REQ_PUT:
		return "PUT";
	case EVHTTP_REQ_PATCH:
		return "PATCH";
	case EVHTTP_REQ_DELETE:
		return "DELETE";
	case EVHTTP_REQ_OPTIONS:
		return "OPTIONS";
	default:
		return "other";
	}
}

/* router_find must answer path with a route for m, handler fn, param want. */
static const struct route *
expect_route(enum evhttp_cmd_type m, const char *path, route_fn fn, const char *want)
{
	char param[HTTPD_PARAM_MAX + 1];
	const struct route *rt;
	int methods = -1;

	memset(param, 'Z', sizeof(param));
	rt = router_find(m, path, param, sizeof(param), &methods);
	if (rt == NULL)
		fail_msg("%s %s: no route (methods %#x)", method_name(m), path, methods);
	if (rt->handler != fn)
		fail_msg("%s %s: reached %s, the wrong handler", method_name(m), path, rt->pattern);
	if (strcmp(param, want) != 0)
		fail_msg("%s %s: param \"%s\", want \"%s\"", method_name(m), path, param, want);
	return rt;
}

/* router_find must answer m on path with a 404. */
static void
expect_404(enum evhttp_cmd_type m, const char *path)
{
	char param[HTTPD_PARAM_MAX + 1];
	const struct route *rt;
	int methods = -1;

	memset(param, 'Z', sizeof(param));
	rt = router_find(m, path, param, sizeof(param), &methods);
	if (rt != NULL)
		fail_msg("%s \"%s\": reached %s, want a 404", method_name(m),
		         path ? path : "(null)", rt->pattern);
	if (methods != 0)
		fail_msg("%s \"%s\": a 405 (methods %#x), want a 404", method_name(m),
		         path ? path : "(null)", methods);
	if (param[0] != '\0')
		fail_msg("%s \"%s\": param \"%.*s\" left behind", method_name(m),
		         path ? path : "(null)", (int)sizeof(param), param);
}

/* router_find must answer m on path with a 405 whose Allow is allow. */
static void
expect_405(enum evhttp_cmd_type m, const char *path, const char *allow)
{
	char param[HTTPD_PARAM_MAX + 1], got[64];
	const struct route *rt;
	int methods = -1;

	rt = router_find(m, path, param, sizeof(param), &methods);
	if (rt != NULL)
		fail_msg("%s %s: reached %s, want a 405", method_name(m), path, rt->pattern);
	if (methods == 0)
		fail_msg("%s %s: a 404, want a 405", method_name(m), path);
	assert_string_equal(param, "");
	router_allow_list(methods, got, sizeof(got));
	if (strcmp(got, allow) != 0)
		fail_msg("%s %s: Allow \"%s\", want \"%s\"", method_name(m), path, got, allow);
}

/* The contract of a refusal: a known code, a printable non-empty message. */
static void
check_error_shape(const struct body_error *e)
{
	size_t i;

	assert_non_null(e->code);
	assert_true(e->message[0] != '\0');
	for (i = 0; e->message[i] != '\0'; i++)
		if (e->message[i] < 0x20 || e->message[i] >= 0x7f)
			fail_msg("message byte %zu is 0x%02x: %s", i, (unsigned char)e->message[i],
			         e->message);
	switch (e->status) {
	case BODY_BAD_JSON:
		assert_int_equal(e->http, 400);
		assert_string_equal(e->code, "bad_json");
		assert_string_equal(e->field, "");
		break;
	case BODY_UNKNOWN_FIELD:
		assert_int_equal(e->http, 422);
		assert_string_equal(e->code, "unknown_field");
		break;
	case BODY_MISSING_FIELD:
		assert_int_equal(e->http, 422);
		assert_string_equal(e->code, "missing_field");
		break;
	case BODY_INVALID_FIELD:
		assert_int_equal(e->http, 422);
		assert_string_equal(e->code, "invalid_field");
		break;
	default:
		fail_msg("status %d is not a refusal", (int)e->status);
	}
}

static const struct body_field validate_fields[] = {
    {"source", JSON_STRING, 1},
};

/* Decode len bytes against the validate route's fields; must be refused. */
static struct body_error
refused_n(const char *body, size_t len, enum body_status want)
{
	struct body_error e;
	json_t *o;

	o = router_body_decode(body, len, validate_fields, 1, &e);
	if (o != NULL) {
		json_decref(o);
		fail_msg("accepted: %.*s", (int)len, body);
	}
	check_error_shape(&e);
	if (e.status != want)
		fail_msg("for %.*s: %s (%s), want status %d", (int)len, body, e.code, e.message,
		         (int)want);
	return e;
}

static struct body_error
refused(const char *body, enum body_status want)
{
	return refused_n(body, strlen(body), want);
}

static void
expect_bad_json(const char *body, size_t len, const char *want)
{
	struct body_error e = refused_n(body, len, BODY_BAD_JSON);

	if (strstr(e.message, want) == NULL)
		fail_msg("message \"%s\" does not contain \"%s\"", e.message, want);
}

/* ---- routes ------------------------------------------------------------- */

/* Every route of the table, reached by its method and a concrete path. */
static void
test_every_route(void **state)
{
	const struct route *rt;

	(void)state;
	rt = expect_route(EVHTTP_REQ_GET, "/healthz", api_healthz, "");
	assert_int_equal(rt->auth, 0);
	rt = expect_route(EVHTTP_REQ_GET, "/v1/me", api_me, "");
	assert_int_equal(rt->auth, 1);
	rt = expect_route(EVHTTP_REQ_GET, "/v1/projects", api_projects, "");
	assert_int_equal(rt->auth, 1);
	rt = expect_route(EVHTTP_REQ_GET, "/v1/projects/" UUID, api_project, UUID);
	assert_int_equal(rt->auth, 1);
	expect_route(EVHTTP_REQ_GET, "/v1/projects/" UUID_UPPER, api_project, UUID_UPPER);
	rt = expect_route(EVHTTP_REQ_GET, "/v1/projects/" UUID "/members", api_project_members,
	                  UUID);
	assert_int_equal(rt->auth, 1);
	rt = expect_route(EVHTTP_REQ_GET, "/v1/templates", api_templates, "");
	assert_int_equal(rt->auth, 1);
	rt = expect_route(EVHTTP_REQ_POST, "/v1/templates/validate", api_template_validate, "");
	assert_int_equal(rt->auth, 1);
	assert_int_equal(rt->nfields, 1);
	assert_string_equal(rt->fields[0].name, "source");
	assert_int_equal(rt->fields[0].type, JSON_STRING);
	assert_int_equal(rt->fields[0].required, 1);
	rt = expect_route(EVHTTP_REQ_GET, "/v1/templates/fix-failing-test", api_template,
	                  "fix-failing-test");
	assert_int_equal(rt->auth, 1);
	assert_int_equal(rt->nfields, 0);
	expect_route(EVHTTP_REQ_GET, "/v1/templates/" NAME64, api_template, NAME64);
	expect_route(EVHTTP_REQ_GET, "/v1/templates/0", api_template, "0");
	expect_route(EVHTTP_REQ_GET, "/v1/templates/a-", api_template, "a-");
	/* "validate" is a valid name: GET passes the POST route and reaches {name} */
	expect_route(EVHTTP_REQ_GET, "/v1/templates/validate", api_template, "validate");
}

/* The session routes: POST takes the token in its body, GET is optional. */
static void
test_session_routes(void **state)
{
	const struct route *rt;

	(void)state;
	rt = expect_route(EVHTTP_REQ_POST, "/v1/session", api_session_create, "");
	assert_int_equal(rt->auth, 0);
	assert_int_equal(rt->nfields, 1);
	assert_string_equal(rt->fields[0].name, "token");
	assert_int_equal(rt->fields[0].required, 1);
	rt = expect_route(EVHTTP_REQ_GET, "/v1/session", api_session_get, "");
	assert_int_equal(rt->auth, ROUTE_AUTH_OPTIONAL);
	rt = expect_route(EVHTTP_REQ_DELETE, "/v1/session", api_session_end, "");
	assert_int_equal(rt->auth, 1);
}

/* Cookie headers as browsers and others send them. */
static void
test_cookie(void **state)
{
	char v[8];

	(void)state;
	assert_int_equal(router_cookie("s=abc", "s", v, sizeof(v)), 0);
	assert_string_equal(v, "abc");
	assert_int_equal(router_cookie("a=1; s=abc; b=2", "s", v, sizeof(v)), 0);
	assert_string_equal(v, "abc");
	assert_int_equal(router_cookie("a=1;s=x y ;b", "s", v, sizeof(v)), 0);
	assert_string_equal(v, "x y");
	assert_int_equal(router_cookie("s=first; s=second", "s", v, sizeof(v)), 0);
	assert_string_equal(v, "first");
	assert_int_equal(router_cookie("ss=1; xs=2; s", "s", v, sizeof(v)), -1);
	assert_int_equal(router_cookie("s=", "s", v, sizeof(v)), 0);
	assert_string_equal(v, "");
	assert_int_equal(router_cookie("", "s", v, sizeof(v)), -1);
	assert_int_equal(router_cookie(";;; ;", "s", v, sizeof(v)), -1);
	assert_int_equal(router_cookie("s=1234567", "s", v, sizeof(v)), 0);
	assert_int_equal(router_cookie("s=12345678", "s", v, sizeof(v)), -1);
	assert_int_equal(router_cookie("x=a; __Host-s=b", "__Host-s", v, sizeof(v)), 0);
	assert_string_equal(v, "b");
}

/* The routes of the runs API, their least role, and project flag. */
static void
test_runs_routes(void **state)
{
	static const struct {
		enum evhttp_cmd_type m;
		const char *path;
		route_fn fn;
		enum api_role role;
		int project;
		size_t nfields;
		const char *query;
	} t[] = {
	    {EVHTTP_REQ_GET, "/v1/projects/" UUID, api_project, API_ROLE_VIEWER, 1, 0, NULL},
	    {EVHTTP_REQ_POST, "/v1/projects/" UUID "/members", api_member_add, API_ROLE_ADMIN, 1, 2,
	     NULL},
	    {EVHTTP_REQ_PATCH, "/v1/memberships/" UUID, api_member_update, API_ROLE_ADMIN, 0, 1,
	     NULL},
	    {EVHTTP_REQ_DELETE, "/v1/memberships/" UUID, api_member_remove, API_ROLE_ADMIN, 0, 0,
	     NULL},
	    {EVHTTP_REQ_GET, "/v1/projects/" UUID "/grants", api_project_grants, API_ROLE_VIEWER, 1,
	     0, NULL},
	    {EVHTTP_REQ_GET, "/v1/projects/" UUID "/repos", api_project_repos, API_ROLE_VIEWER, 1, 0,
	     NULL},
	    {EVHTTP_REQ_POST, "/v1/projects/" UUID "/repos", api_repo_add, API_ROLE_ADMIN, 1, 5,
	     NULL},
	    {EVHTTP_REQ_DELETE, "/v1/repos/" UUID, api_repo_remove, API_ROLE_ADMIN, 0, 0, NULL},
	    {EVHTTP_REQ_GET, "/v1/projects/" UUID "/usage", api_project_usage, API_ROLE_VIEWER, 1, 0,
	     "month"},
	    {EVHTTP_REQ_GET, "/v1/projects/" UUID "/audit", api_project_audit, API_ROLE_ADMIN, 1, 0,
	     "after limit"},
	    {EVHTTP_REQ_GET, "/v1/projects/" UUID "/runs", api_runs_list, API_ROLE_VIEWER, 1, 0,
	     "status template cursor limit"},
	    {EVHTTP_REQ_POST, "/v1/projects/" UUID "/runs", api_runs_submit, API_ROLE_MEMBER, 1, 2,
	     NULL},
	    {EVHTTP_REQ_GET, "/v1/runs/" UUID, api_run, API_ROLE_VIEWER, 0, 0, NULL},
	    {EVHTTP_REQ_POST, "/v1/runs/" UUID "/cancel", api_run_cancel, API_ROLE_MEMBER, 0, 0,
	     NULL},
	    {EVHTTP_REQ_GET, "/v1/runs/" UUID "/steps", api_run_steps, API_ROLE_VIEWER, 0, 0, NULL},
	    {EVHTTP_REQ_GET, "/v1/runs/" UUID "/events", api_run_events, API_ROLE_VIEWER, 0, 0,
	     "after limit"},
	    {EVHTTP_REQ_GET, "/v1/runs/" UUID "/events/stream", api_run_stream, API_ROLE_VIEWER, 0, 0,
	     "after"},
	    {EVHTTP_REQ_GET, "/v1/runs/" UUID "/approvals", api_run_approvals, API_ROLE_VIEWER, 0, 0,
	     NULL},
	    {EVHTTP_REQ_POST, "/v1/approvals/" UUID "/decide", api_approval_decide, API_ROLE_MEMBER,
	     0, 2, NULL},
	    {EVHTTP_REQ_GET, "/v1/runs/" UUID "/artifacts", api_run_artifacts, API_ROLE_VIEWER, 0, 0,
	     NULL},
	    {EVHTTP_REQ_GET, "/v1/artifacts/" UUID, api_artifact, API_ROLE_VIEWER, 0, 0, NULL},
	};
	const struct route *rt;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		rt = expect_route(t[i].m, t[i].path, t[i].fn, UUID);
		assert_int_equal(rt->auth, 1);
		assert_int_equal(rt->min_role, t[i].role);
		assert_int_equal(rt->project, t[i].project);
		assert_int_equal(rt->nfields, t[i].nfields);
		if (t[i].query == NULL)
			assert_null(rt->query);
		else
			assert_string_equal(rt->query, t[i].query);
	}
	/* the routes every user may call name no project role */
	rt = expect_route(EVHTTP_REQ_GET, "/v1/templates", api_templates, "");
	assert_int_equal(rt->min_role, API_ROLE_NONE);
	rt = expect_route(EVHTTP_REQ_GET, "/v1/me", api_me, "");
	assert_int_equal(rt->min_role, API_ROLE_NONE);
	expect_405(EVHTTP_REQ_GET, "/v1/runs/" UUID "/cancel", "POST");
	expect_405(EVHTTP_REQ_PUT, "/v1/memberships/" UUID, "PATCH, DELETE");
	expect_405(EVHTTP_REQ_DELETE, "/v1/projects/" UUID "/runs", "GET, HEAD, POST");
	expect_405(EVHTTP_REQ_GET, "/v1/approvals/" UUID "/decide", "POST");
	expect_404(EVHTTP_REQ_GET, "/v1/runs/not-a-uuid");
	expect_404(EVHTTP_REQ_GET, "/v1/runs/" UUID "/events/stream/x");
	expect_404(EVHTTP_REQ_GET, "/v1/approvals/" UUID);
}

/* router_query: only the route's names, once each, never empty. */
static void
test_query(void **state)
{
	struct evkeyvalq q;
	char err[160];

	(void)state;
	assert_int_equal(router_query(NULL, NULL, &q, err, sizeof(err)), 0);
	assert_true(TAILQ_EMPTY(&q));
	assert_int_equal(router_query("", "after", &q, err, sizeof(err)), 0);
	assert_int_equal(router_query("after=3&limit=10", "after limit", &q, err, sizeof(err)), 0);
	assert_string_equal(evhttp_find_header(&q, "after"), "3");
	assert_string_equal(evhttp_find_header(&q, "limit"), "10");
	evhttp_clear_headers(&q);
	/* percent-decoded values */
	assert_int_equal(router_query("template=run%2Dtests", "template", &q, err, sizeof(err)), 0);
	assert_string_equal(evhttp_find_header(&q, "template"), "run-tests");
	evhttp_clear_headers(&q);
	assert_int_equal(router_query("x=1", "after limit", &q, err, sizeof(err)), -1);
	assert_string_equal(err, "unknown query parameter \"x\"");
	assert_true(TAILQ_EMPTY(&q));
	assert_int_equal(router_query("after=1", NULL, &q, err, sizeof(err)), -1);
	/* a prefix or a longer name of an allowed one is not it */
	assert_int_equal(router_query("afte=1", "after", &q, err, sizeof(err)), -1);
	assert_int_equal(router_query("afterx=1", "after", &q, err, sizeof(err)), -1);
	assert_int_equal(router_query("limit=1", "after limitx", &q, err, sizeof(err)), -1);
	assert_int_equal(router_query("after=1&after=2", "after", &q, err, sizeof(err)), -1);
	assert_string_equal(err, "query parameter \"after\" is given twice");
	assert_int_equal(router_query("after=", "after", &q, err, sizeof(err)), -1);
	assert_string_equal(err, "query parameter \"after\" is empty");
	assert_int_equal(router_query("after", "after", &q, err, sizeof(err)), -1);
	/* %00 would cut a value short: refused, in either case */
	assert_int_equal(router_query("template=run-tests%00x", "template", &q, err, sizeof(err)),
	                 -1);
	assert_string_equal(err, "the query string contains a NUL byte");
	assert_int_equal(router_query("%00template=a", "template", &q, err, sizeof(err)), -1);
	/* control characters in a value */
	assert_int_equal(router_query("template=a%0Ab", "template", &q, err, sizeof(err)), -1);
	assert_string_equal(err, "query parameter \"template\" has a control character");
	assert_int_equal(router_query("template=a%7Fb", "template", &q, err, sizeof(err)), -1);
	/* UTF-8 is fine here (the route's own check decides) */
	assert_int_equal(router_query("template=%C3%A9", "template", &q, err, sizeof(err)), 0);
	evhttp_clear_headers(&q);
	/* names are compared as sent: percent-encoding does not reach a name */
	assert_int_equal(router_query("%61fter=1", "after", &q, err, sizeof(err)), -1);
	assert_string_equal(err, "unknown query parameter \"%61fter\"");
}

static void
test_uint(void **state)
{
	uint64_t v = 7;

	(void)state;
	assert_int_equal(router_uint("0", 10, &v), 0);
	assert_true(v == 0);
	assert_int_equal(router_uint("10", 10, &v), 0);
	assert_true(v == 10);
	assert_int_equal(router_uint("9223372036854775807", INT64_MAX, &v), 0);
	assert_true(v == INT64_MAX);
	v = 7;
	assert_int_equal(router_uint("11", 10, &v), -1);
	assert_int_equal(router_uint("9223372036854775808", INT64_MAX, &v), -1);
	assert_int_equal(router_uint("99999999999999999999", UINT64_MAX, &v), -1);
	assert_int_equal(router_uint("-1", 10, &v), -1);
	assert_int_equal(router_uint("+1", 10, &v), -1);
	assert_int_equal(router_uint(" 1", 10, &v), -1);
	assert_int_equal(router_uint("1 ", 10, &v), -1);
	assert_int_equal(router_uint("01", 10, &v), -1);
	assert_int_equal(router_uint("", 10, &v), -1);
	assert_int_equal(router_uint("0x1", 10, &v), -1);
	assert_int_equal(router_uint("1e3", 10000, &v), -1);
	assert_true(v == 7); /* untouched on failure */
}

static void
test_month_and_role(void **state)
{
	(void)state;
	assert_true(router_is_month("2026-01"));
	assert_true(router_is_month("2026-12"));
	assert_true(router_is_month("9999-10"));
	assert_false(router_is_month("2026-00"));
	assert_false(router_is_month("2026-13"));
	assert_false(router_is_month("2026-1"));
	assert_false(router_is_month("2026-011"));
	assert_false(router_is_month("1999-12"));
	assert_false(router_is_month("2026/01"));
	assert_false(router_is_month("２026-01"));
	assert_false(router_is_month(""));
	assert_int_equal(router_role_rank("viewer"), API_ROLE_VIEWER);
	assert_int_equal(router_role_rank("member"), API_ROLE_MEMBER);
	assert_int_equal(router_role_rank("admin"), API_ROLE_ADMIN);
	assert_true(API_ROLE_VIEWER < API_ROLE_MEMBER && API_ROLE_MEMBER < API_ROLE_ADMIN);
	assert_int_equal(router_role_rank(NULL), API_ROLE_NONE);
	assert_int_equal(router_role_rank("Admin"), API_ROLE_NONE);
	assert_int_equal(router_role_rank("owner"), API_ROLE_NONE);
	assert_int_equal(router_role_rank(""), API_ROLE_NONE);
}

/*
 * docs/api.md describes every route as a heading "### `METHOD PATTERN`",
 * and describes no route the table does not have.
 */
static void
test_routes_documented(void **state)
{
	size_t n, i, len = 0;
	const struct route *rt = router_routes(&n);
	char *doc = NULL, want[160], *p, *end;
	FILE *f = fopen("docs/api.md", "r");
	size_t cap = 0;
	int found;

	(void)state;
	if (f == NULL)
		fail_msg("docs/api.md: cannot open (run from the source tree)");
	assert_true(getdelim(&doc, &cap, '\0', f) > 0);
	fclose(f);
	len = strlen(doc);
	for (i = 0; i < n; i++) {
		snprintf(want, sizeof(want), "### `%s %s`", method_name(rt[i].method),
		         rt[i].pattern);
		if (strstr(doc, want) == NULL)
			fail_msg("docs/api.md does not document %s", want + 4);
	}
	/* every documented route exists */
	for (p = doc; (p = strstr(p, "\n### `")) != NULL; p = end) {
		p += 6;
		if ((end = strchr(p, '`')) == NULL || (size_t)(end - p) >= sizeof(want))
			fail_msg("docs/api.md: a malformed route heading");
		memcpy(want, p, (size_t)(end - p));
		want[end - p] = '\0';
		found = 0;
		for (i = 0; i < n && !found; i++) {
			char route[160];

			snprintf(route, sizeof(route), "%s %s", method_name(rt[i].method),
			         rt[i].pattern);
			found = strcmp(route, want) == 0;
		}
		if (!found)
			fail_msg("docs/api.md documents %s, which is not a route", want);
	}
	assert_true(len > 0);
	free(doc);
}

/* ---- docs/openapi.yaml and the route table -------------------------------- */

/* The spec's YAML as JSON: mappings as objects, sequences as arrays, every
 * scalar as a string.  A parse problem, an anchor, alias or tag, or a
 * duplicate key is reported through spec_yaml_err, into err. */
struct spec_read {
	char err[256];
};

static void
spec_yaml_err(void *arg, const yaml_mark_t *m, const char *msg)
{
	struct spec_read *r = arg;

	if (r->err[0] == '\0')
		snprintf(r->err, sizeof(r->err), "%zu:%zu: %s", m ? m->line + 1 : 0,
		         m ? m->column + 1 : 0, msg);
}

/* The node that starts with *ev (deleted here), or NULL with r->err set. */
static json_t *
spec_node(struct yamlev *y, yaml_event_t *ev, struct spec_read *r)
{
	json_t *v = NULL, *c;
	yaml_event_t e, k;
	int end = ev->type == YAML_SEQUENCE_START_EVENT ? YAML_SEQUENCE_END_EVENT
	                                                : YAML_MAPPING_END_EVENT;

	if (ev->type == YAML_SCALAR_EVENT)
		v = json_stringn((const char *)ev->data.scalar.value, ev->data.scalar.length);
	else if (ev->type == YAML_SEQUENCE_START_EVENT || ev->type == YAML_MAPPING_START_EVENT) {
		v = end == YAML_SEQUENCE_END_EVENT ? json_array() : json_object();
		for (;;) {
			if (yamlev_next(y, &e) == -1)
				goto fail;
			if ((int)e.type == end) {
				yaml_event_delete(&e);
				break;
			}
			if (end == YAML_SEQUENCE_END_EVENT) {
				if ((c = spec_node(y, &e, r)) == NULL)
					goto fail;
				json_array_append_new(v, c);
				continue;
			}
			k = e;
			if (k.type != YAML_SCALAR_EVENT || yamlev_next(y, &e) == -1) {
				spec_yaml_err(r, &k.start_mark, "a key is not a scalar");
				yaml_event_delete(&k);
				goto fail;
			}
			if (json_object_get(v, (const char *)k.data.scalar.value) != NULL)
				spec_yaml_err(r, &k.start_mark, "duplicate key");
			if ((c = spec_node(y, &e, r)) == NULL) {
				yaml_event_delete(&k);
				goto fail;
			}
			json_object_set_new(v, (const char *)k.data.scalar.value, c);
			yaml_event_delete(&k);
		}
	} else
		spec_yaml_err(r, &ev->start_mark, "unexpected event");
	yaml_event_delete(ev);
	if (r->err[0] != '\0') {
		json_decref(v);
		return NULL;
	}
	return v;
fail:
	if (r->err[0] == '\0')
		snprintf(r->err, sizeof(r->err), "the YAML ends early");
	yaml_event_delete(ev);
	json_decref(v);
	return NULL;
}

/* docs/openapi.yaml as JSON, or a failed test. */
static json_t *
spec_load(const char *path)
{
	struct spec_read r = {""};
	struct yamlev y;
	yaml_event_t ev;
	json_t *doc = NULL;
	char *buf = NULL;
	size_t cap = 0;
	ssize_t len;
	FILE *f = fopen(path, "r");
	int i;

	if (f == NULL)
		fail_msg("%s: cannot open (run from the source tree)", path);
	len = getdelim(&buf, &cap, '\0', f);
	fclose(f);
	assert_true(len > 0);
	assert_int_equal(yamlev_init(&y, (unsigned char *)buf, (size_t)len, 64, spec_yaml_err, &r),
	                 0);
	/* stream start, document start, the root */
	for (i = 0; i < 3 && r.err[0] == '\0'; i++) {
		if (yamlev_next(&y, &ev) == -1)
			break;
		if (i == 2)
			doc = spec_node(&y, &ev, &r);
		else
			yaml_event_delete(&ev);
	}
	yamlev_free(&y);
	free(buf);
	if (doc == NULL || !json_is_object(doc))
		fail_msg("%s: %s", path, r.err[0] ? r.err : "not a mapping");
	return doc;
}

/* A local $ref ("#/components/...") followed, or o itself. */
static json_t *
spec_deref(json_t *doc, json_t *o)
{
	const char *ref;
	char buf[256], *p, *save = NULL;
	int n;

	for (n = 0; n < 8 && (ref = json_string_value(json_object_get(o, "$ref"))) != NULL; n++) {
		if (strncmp(ref, "#/", 2) != 0 || strlen(ref) >= sizeof(buf))
			return NULL;
		snprintf(buf, sizeof(buf), "%s", ref + 2);
		o = doc;
		for (p = strtok_r(buf, "/", &save); p != NULL && o != NULL;
		     p = strtok_r(NULL, "/", &save))
			o = json_object_get(o, p);
	}
	return o;
}

/* Problems, one a line, for one failure message at the end. */
struct spec_problems {
	char text[8192];
	size_t len;
	int n;
};

static void spec_problem(struct spec_problems *sp, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
spec_problem(struct spec_problems *sp, const char *fmt, ...)
{
	va_list ap;
	int w;

	sp->n++;
	if (sp->len + 2 >= sizeof(sp->text))
		return;
	va_start(ap, fmt);
	w = vsnprintf(sp->text + sp->len, sizeof(sp->text) - sp->len - 1, fmt, ap);
	va_end(ap);
	if (w > 0)
		sp->len = strlen(sp->text);
	sp->text[sp->len++] = '\n';
	sp->text[sp->len] = '\0';
}

static const char *
spec_method(enum evhttp_cmd_type m)
{
	switch (m) {
	case EVHTTP_REQ_GET:
		return "get";
	case EVHTTP_REQ_POST:
		return "post";
	case EVHTTP_REQ_PUT:
		return "put";
	case EVHTTP_REQ_PATCH:
		return "patch";
	case EVHTTP_REQ_DELETE:
		return "delete";
	default:
		return "other";
	}
}

/* The query parameters of an operation (its path's and its own) against
 * those the route takes, both ways. */
static void
spec_query(json_t *doc, json_t *item, json_t *op, const struct route *rt, struct spec_problems *sp)
{
	json_t *lists[2] = {json_object_get(item, "parameters"), json_object_get(op, "parameters")};
	char want[128], word[33];
	const char *q, *in, *name;
	json_t *p;
	size_t i, j, k, x;
	int found;

	snprintf(want, sizeof(want), " %s ", rt->query ? rt->query : "");
	for (i = 0; i < 2; i++)
		json_array_foreach(lists[i], j, p)
		{
			p = spec_deref(doc, p);
			in = json_string_value(json_object_get(p, "in"));
			name = json_string_value(json_object_get(p, "name"));
			if (in == NULL || name == NULL) {
				spec_problem(sp, "%s %s: a parameter without in or name",
				             method_name(rt->method), rt->pattern);
				continue;
			}
			if (strcmp(in, "query") != 0)
				continue;
			snprintf(word, sizeof(word), " %s ", name);
			if (strstr(want, word) == NULL)
				spec_problem(sp,
				             "%s %s: docs/openapi.yaml has query parameter \"%s\", "
				             "which the route does not take",
				             method_name(rt->method), rt->pattern, name);
		}
	/* each of the route's, in the spec */
	for (q = rt->query ? rt->query : ""; *q != '\0'; q += k) {
		q += strspn(q, " ");
		k = strcspn(q, " ");
		if (k == 0)
			break;
		snprintf(word, sizeof(word), "%.*s", (int)k, q);
		for (i = 0, found = 0; i < 2 && !found; i++)
			json_array_foreach(lists[i], x, p)
			{
				p = spec_deref(doc, p);
				if (strcmp(json_string_value(json_object_get(p, "in")) ?: "",
				           "query") == 0 &&
				    strcmp(json_string_value(json_object_get(p, "name")) ?: "",
				           word) == 0)
					found = 1;
			}
		if (!found)
			spec_problem(sp, "%s %s: docs/openapi.yaml lacks query parameter \"%s\"",
			             method_name(rt->method), rt->pattern, word);
	}
}

static const char *
spec_json_type(json_type t)
{
	return t == JSON_STRING    ? "string"
	       : t == JSON_INTEGER ? "integer"
	       : t == JSON_OBJECT  ? "object"
	                           : "other";
}

/* The request body schema against the route's fields: the same members,
 * the same required ones, each of its JSON type; no body for no fields. */
static void
spec_body(json_t *doc, json_t *op, const struct route *rt, struct spec_problems *sp)
{
	json_t *rb = spec_deref(doc, json_object_get(op, "requestBody"));
	json_t *schema, *props, *req, *ps, *x;
	const char *M = method_name(rt->method), *key, *type;
	size_t i, j;
	int found;

	if (rt->nfields == 0) {
		if (rb != NULL)
			spec_problem(
			    sp, "%s %s: docs/openapi.yaml has a request body, the route takes none",
			    M, rt->pattern);
		return;
	}
	schema = spec_deref(doc, json_object_get(json_object_get(json_object_get(rb, "content"),
	                                                         "application/json"),
	                                         "schema"));
	if (schema == NULL) {
		spec_problem(sp, "%s %s: docs/openapi.yaml has no application/json request body", M,
		             rt->pattern);
		return;
	}
	props = json_object_get(schema, "properties");
	req = json_object_get(schema, "required");
	if (strcmp(json_string_value(json_object_get(schema, "additionalProperties")) ?: "",
	           "false"))
		spec_problem(sp,
		             "%s %s: the request body schema allows members the route refuses "
		             "(additionalProperties is not false)",
		             M, rt->pattern);
	for (i = 0; i < rt->nfields; i++) {
		ps = spec_deref(doc, json_object_get(props, rt->fields[i].name));
		type = json_string_value(json_object_get(ps, "type"));
		if (ps == NULL)
			spec_problem(sp, "%s %s: the request body lacks member \"%s\"", M,
			             rt->pattern, rt->fields[i].name);
		else if (type == NULL || strcmp(type, spec_json_type(rt->fields[i].type)) != 0)
			spec_problem(sp, "%s %s: member \"%s\" is %s, the route takes %s", M,
			             rt->pattern, rt->fields[i].name, type ? type : "untyped",
			             spec_json_type(rt->fields[i].type));
		found = 0;
		json_array_foreach(req, j, x) found |=
		    strcmp(json_string_value(x) ?: "", rt->fields[i].name) == 0;
		if (found != (rt->fields[i].required != 0))
			spec_problem(
			    sp, "%s %s: member \"%s\" is %s in docs/openapi.yaml, %s in the route",
			    M, rt->pattern, rt->fields[i].name, found ? "required" : "optional",
			    rt->fields[i].required ? "required" : "optional");
	}
	json_object_foreach(props, key, x)
	{
		for (i = 0; i < rt->nfields && strcmp(rt->fields[i].name, key) != 0; i++)
			;
		if (i == rt->nfields)
			spec_problem(
			    sp, "%s %s: the request body has member \"%s\", the route does not", M,
			    rt->pattern, key);
	}
}

/* Security: none for a route without authentication; an empty (anonymous)
 * alternative exactly for optional authentication; and with a state-changing
 * method, the cookie only together with the CSRF header. */
static void
spec_security(json_t *doc, json_t *op, const struct route *rt, struct spec_problems *sp)
{
	json_t *sec = json_object_get(op, "security"), *req;
	const char *M = method_name(rt->method);
	int anon = 0, changing = rt->method != EVHTTP_REQ_GET;
	size_t i;

	if (sec == NULL)
		sec = json_object_get(doc, "security");
	if (!json_is_array(sec)) {
		spec_problem(sp, "%s %s: no security in docs/openapi.yaml", M, rt->pattern);
		return;
	}
	json_array_foreach(sec, i, req)
	{
		if (json_object_size(req) == 0)
			anon = 1;
		if (changing && rt->auth && json_object_get(req, "sessionCookie") != NULL &&
		    json_object_get(req, "csrfToken") == NULL)
			spec_problem(
			    sp,
			    "%s %s: the session cookie without csrfToken, on a state-changing "
			    "route",
			    M, rt->pattern);
	}
	if (rt->auth == 0 && json_array_size(sec) != 0)
		spec_problem(sp,
		             "%s %s: takes no authentication, docs/openapi.yaml says security "
		             "is needed",
		             M, rt->pattern);
	if (rt->auth != 0 && json_array_size(sec) == 0)
		spec_problem(sp, "%s %s: needs authentication, docs/openapi.yaml says none", M,
		             rt->pattern);
	if (rt->auth != 0 && anon != (rt->auth == ROUTE_AUTH_OPTIONAL))
		spec_problem(sp, "%s %s: authentication is %s, docs/openapi.yaml says %s", M,
		             rt->pattern, rt->auth == ROUTE_AUTH_OPTIONAL ? "optional" : "required",
		             anon ? "optional" : "required");
}

/*
 * docs/openapi.yaml describes every route of the table with its method and
 * path template, and no path or method that is not a route; for each, the
 * query parameters the route takes, its body's members (names, types,
 * which are required) and whether it needs authentication.  Every problem
 * is named (the route, and what differs), all of them at once.
 */
static void
test_routes_in_openapi(void **state)
{
	static const char *const methods[] = {"get",     "put",  "post",  "delete",
	                                      "options", "head", "patch", "trace"};
	size_t n, i, j;
	const struct route *rt = router_routes(&n);
	json_t *doc = spec_load("docs/openapi.yaml"), *paths, *item, *op;
	struct spec_problems sp = {"", 0, 0};
	const char *path;
	int found;

	(void)state;
	paths = json_object_get(doc, "paths");
	assert_true(json_is_object(paths));
	for (i = 0; i < n; i++) {
		item = json_object_get(paths, rt[i].pattern);
		op = json_object_get(item, spec_method(rt[i].method));
		if (op == NULL) {
			spec_problem(&sp,
			             "docs/openapi.yaml does not describe %s %s (a route of "
			             "httpd/router.c)",
			             method_name(rt[i].method), rt[i].pattern);
			continue;
		}
		spec_query(doc, item, op, &rt[i], &sp);
		spec_body(doc, op, &rt[i], &sp);
		spec_security(doc, op, &rt[i], &sp);
	}
	json_object_foreach(paths, path, item)
	{
		for (j = 0; j < sizeof(methods) / sizeof(methods[0]); j++) {
			if (json_object_get(item, methods[j]) == NULL)
				continue;
			for (i = 0, found = 0; i < n && !found; i++)
				found = strcmp(rt[i].pattern, path) == 0 &&
				        strcmp(spec_method(rt[i].method), methods[j]) == 0;
			if (!found) {
				char up[8];
				size_t k;

				for (k = 0; methods[j][k] != '\0' && k < sizeof(up) - 1; k++)
					up[k] = (char)(methods[j][k] - 'a' + 'A');
				up[k] = '\0';
				spec_problem(
				    &sp,
				    "docs/openapi.yaml describes %s %s, which is not a route "
				    "of httpd/router.c",
				    up, path);
			}
		}
	}
	json_decref(doc);
	if (sp.n > 0)
		fail_msg("%d problem%s:\n%s", sp.n, sp.n == 1 ? "" : "s", sp.text);
}

/* HEAD reaches every GET route (with the GET route's method). */
static void
test_head_reaches_get(void **state)
{
	const struct route *rt;

	(void)state;
	rt = expect_route(EVHTTP_REQ_HEAD, "/healthz", api_healthz, "");
	assert_int_equal(rt->method, EVHTTP_REQ_GET);
	expect_route(EVHTTP_REQ_HEAD, "/v1/me", api_me, "");
	expect_route(EVHTTP_REQ_HEAD, "/v1/projects", api_projects, "");
	expect_route(EVHTTP_REQ_HEAD, "/v1/projects/" UUID, api_project, UUID);
	expect_route(EVHTTP_REQ_HEAD, "/v1/projects/" UUID "/members", api_project_members, UUID);
	expect_route(EVHTTP_REQ_HEAD, "/v1/templates", api_templates, "");
	expect_route(EVHTTP_REQ_HEAD, "/v1/templates/foo", api_template, "foo");
	expect_route(EVHTTP_REQ_HEAD, "/v1/templates/validate", api_template, "validate");
}

static void
test_405_allow(void **state)
{
	(void)state;
	expect_405(EVHTTP_REQ_POST, "/healthz", "GET, HEAD");
	expect_405(EVHTTP_REQ_DELETE, "/v1/me", "GET, HEAD");
	expect_405(EVHTTP_REQ_PUT, "/v1/projects", "GET, HEAD");
	expect_405(EVHTTP_REQ_PATCH, "/v1/projects/" UUID, "GET, HEAD");
	expect_405(EVHTTP_REQ_OPTIONS, "/v1/projects/" UUID "/members", "GET, HEAD, POST");
	expect_405(EVHTTP_REQ_POST, "/v1/templates", "GET, HEAD");
	expect_405(EVHTTP_REQ_POST, "/v1/templates/foo", "GET, HEAD");
	/* both the POST route and {name} match this path */
	expect_405(EVHTTP_REQ_PUT, "/v1/templates/validate", "GET, HEAD, POST");
	expect_405(EVHTTP_REQ_DELETE, "/v1/templates/validate", "GET, HEAD, POST");
	expect_405(EVHTTP_REQ_TRACE, "/v1/templates/validate", "GET, HEAD, POST");
}

static void
test_allow_list(void **state)
{
	char b[64];

	(void)state;
	router_allow_list(0, b, sizeof(b));
	assert_string_equal(b, "");
	router_allow_list(EVHTTP_REQ_POST, b, sizeof(b));
	assert_string_equal(b, "POST");
	router_allow_list(EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_PUT | EVHTTP_REQ_PATCH |
	                      EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS,
	                  b, sizeof(b));
	assert_string_equal(b, "GET, HEAD, POST, PUT, PATCH, DELETE");
	/* a list that does not fit is cut at a method, never overflows */
	memset(b, 'Z', sizeof(b));
	router_allow_list(EVHTTP_REQ_GET | EVHTTP_REQ_POST, b, 12);
	assert_string_equal(b, "GET, HEAD");
	assert_int_equal(b[12], 'Z');
	router_allow_list(EVHTTP_REQ_GET, b, 9);
	assert_string_equal(b, "");
	router_allow_list(EVHTTP_REQ_GET, b, 1);
	assert_string_equal(b, "");
}

static void
test_404_paths(void **state)
{
	static const char *const paths[] = {
	    "",
	    "/",
	    "healthz",
	    "/healthz2",
	    "/HEALTHZ",
	    "/health",
	    "/v1",
	    "/v1/",
	    "/v2/me",
	    "/v1/me/x",
	    "/v1/projects/{id}",
	    "/v1/templates/{name}",
	    "/v1/projectsx",
	    /* trailing slash */
	    "/healthz/",
	    "/v1/me/",
	    "/v1/projects/",
	    "/v1/projects/" UUID "/",
	    "/v1/projects/" UUID "/members/",
	    "/v1/templates/",
	    "/v1/templates/validate/",
	    "/v1/templates/foo/",
	    /* double slash */
	    "//healthz",
	    "/v1//me",
	    "//v1/me",
	    "/v1/projects//members",
	    "/v1/projects/" UUID "//members",
	    "/v1//templates/foo",
	    /* percent-encoded, matched without decoding */
	    "/%68ealthz",
	    "/v1/%6de",
	    "/v1/templates%2fvalidate",
	    "/v1/templates/f%6fo",
	    "/v1/projects/0f8fad5b%2dd9cb-469f-a165-70867728950e",
	    "/healthz%00",
	    /* query or fragment text reaching the matcher is part of the path */
	    "/healthz?x=1",
	    "/healthz#x",
	    /* traversal-looking segments */
	    "/v1/templates/..",
	    "/v1/templates/.",
	    "/v1/templates/%2e%2e",
	    "/v1/templates/%2E%2E",
	    "/v1/templates/../me",
	    "/v1/../v1/me",
	    "/v1/projects/../me",
	    "/healthz/..",
	    "/v1/templates/..%2f..%2fetc%2fpasswd",
	    "/v1/projects/" UUID "/../members",
	    "/./healthz",
	    "/v1/./me",
	    /* other members of the ASCII zoo */
	    "/v1/me ",
	    " /v1/me",
	    "/v1/me\t",
	    "\\v1\\me",
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		expect_404(EVHTTP_REQ_GET, paths[i]);
		expect_404(EVHTTP_REQ_POST, paths[i]);
	}
	expect_404(EVHTTP_REQ_GET, NULL);
}

static void
test_404_bad_uuids(void **state)
{
	static const char *const ids[] = {
	    "0f8fad5b-d9cb-469f-a165-70867728950",    /* 35 */
	    "0f8fad5b-d9cb-469f-a165-70867728950e0",  /* 37 */
	    "0f8fad5bd9cb469fa16570867728950e",       /* no dashes */
	    "0f8fad5bd-9cb-469f-a165-70867728950e",   /* dash moved */
	    "0f8fad5b-d9cb-469f-a16570867728950e-",   /* dash moved to the end */
	    "0f8fad5b-d9cb-469f-a165-70867728950g",   /* non-hex */
	    "0f8fad5b-d9cb-469f-a165-7086772895 e",   /* a space */
	    "0f8fad5b_d9cb_469f_a165_70867728950e",   /* underscores */
	    "{0f8fad5b-d9cb-469f-a165-70867728950e}", /* braces */
	    "{0f8fad5b-d9cb-469f-a165-70867728950}",
	    "urn:uuid:0f8fad5b-d9cb-469f-a165-70867728950e",
	    UUID "x",
	    UUID ";x",
	    UUID "%00",
	    UUID ".json", /* trailing data */
	    "-0f8fad5b-d9cb-469f-a165-70867728950e",
	    "------------------------------------",
	    "",
	    "x",
	    "..",
	    "%2e%2e",
	    "0x0f8fad5b-d9cb-469f-a165-70867728950",
	};
	char path[256];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
		assert_false(router_is_uuid(ids[i]));
		snprintf(path, sizeof(path), "/v1/projects/%s", ids[i]);
		expect_404(EVHTTP_REQ_GET, path);
		snprintf(path, sizeof(path), "/v1/projects/%s/members", ids[i]);
		expect_404(EVHTTP_REQ_GET, path);
	}
	assert_true(router_is_uuid(UUID));
	assert_true(router_is_uuid(UUID_UPPER));
	assert_true(router_is_uuid("00000000-0000-0000-0000-000000000000"));
	assert_true(router_is_uuid("0F8fad5b-D9cb-469F-a165-70867728950E"));
}

static void
test_404_bad_names(void **state)
{
	static const char *const names[] = {
	    "Foo",
	    "FOO",
	    "foO",
	    "-foo",
	    "-",
	    NAME65,
	    "a.b",
	    ".",
	    "..",
	    "a_b",
	    "_",
	    "%2e%2e",
	    "a%2db",
	    "a b",
	    "a+b",
	    "a~b",
	    "\xc3\xa9t\xc3\xa9",
	    "a\x01",
	    "",
	};
	char path[256];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		assert_false(router_is_name(names[i]));
		snprintf(path, sizeof(path), "/v1/templates/%s", names[i]);
		expect_404(EVHTTP_REQ_GET, path);
	}
	assert_true(router_is_name("a"));
	assert_true(router_is_name("0"));
	assert_true(router_is_name("a-"));
	assert_true(router_is_name("a--b"));
	assert_true(router_is_name(NAME64));
}

/* param is NUL-terminated inside its buffer, never written past it. */
static void
test_param_small_buffer(void **state)
{
	char buf[80];
	const struct route *rt;
	int methods;
	size_t i;

	(void)state;
	/* a segment that does not fit matches nothing: a 404, buffer intact */
	memset(buf, 'Z', sizeof(buf));
	rt = router_find(EVHTTP_REQ_GET, "/v1/projects/" UUID, buf, 8, &methods);
	assert_null(rt);
	assert_int_equal(methods, 0);
	assert_int_equal(buf[0], '\0');
	for (i = 8; i < sizeof(buf); i++)
		assert_int_equal(buf[i], 'Z');

	/* exactly the UUID and its NUL fit */
	memset(buf, 'Z', sizeof(buf));
	rt = router_find(EVHTTP_REQ_GET, "/v1/projects/" UUID, buf, HTTPD_UUID_LEN + 1, &methods);
	assert_non_null(rt);
	assert_string_equal(buf, UUID);
	for (i = HTTPD_UUID_LEN + 1; i < sizeof(buf); i++)
		assert_int_equal(buf[i], 'Z');
	memset(buf, 'Z', sizeof(buf));
	assert_null(
	    router_find(EVHTTP_REQ_GET, "/v1/projects/" UUID, buf, HTTPD_UUID_LEN, &methods));
	assert_int_equal(buf[0], '\0');
	assert_int_equal(buf[HTTPD_UUID_LEN], 'Z');

	/* the daemon's buffer holds the longest name; one byte less does not */
	memset(buf, 'Z', sizeof(buf));
	assert_non_null(router_find(EVHTTP_REQ_GET, "/v1/templates/" NAME64, buf,
	                            HTTPD_PARAM_MAX + 1, &methods));
	assert_string_equal(buf, NAME64);
	memset(buf, 'Z', sizeof(buf));
	assert_null(
	    router_find(EVHTTP_REQ_GET, "/v1/templates/" NAME64, buf, HTTPD_PARAM_MAX, &methods));
	assert_int_equal(buf[HTTPD_PARAM_MAX], 'Z');

	/* routes without a parameter need one byte; none at all matches nothing */
	memset(buf, 'Z', sizeof(buf));
	assert_non_null(router_find(EVHTTP_REQ_GET, "/healthz", buf, 1, &methods));
	assert_int_equal(buf[0], '\0');
	assert_int_equal(buf[1], 'Z');
	memset(buf, 'Z', sizeof(buf));
	assert_null(router_find(EVHTTP_REQ_GET, "/healthz", buf, 0, &methods));
	assert_int_equal(methods, 0);
	assert_int_equal(buf[0], 'Z');

	/* a 405 clears what the matching left */
	memset(buf, 'Z', sizeof(buf));
	assert_null(router_find(EVHTTP_REQ_PUT, "/v1/templates/foo", buf, sizeof(buf), &methods));
	assert_int_equal(methods, EVHTTP_REQ_GET);
	assert_int_equal(buf[0], '\0');
}

/* router_match with patterns outside the table. */
static void
test_match(void **state)
{
	char p[HTTPD_PARAM_MAX + 1];

	(void)state;
	assert_true(router_match("/a/{id}/b", "/a/" UUID "/b", p, sizeof(p)));
	assert_string_equal(p, UUID);
	assert_false(router_match("/a/{id}/b", "/a/" UUID "/c", p, sizeof(p)));
	assert_true(router_match("/{name}", "/x", p, sizeof(p)));
	assert_string_equal(p, "x");
	assert_true(router_match("/a", "/a", p, sizeof(p)));
	assert_string_equal(p, "");
	assert_false(router_match("/a", "/a/", p, sizeof(p)));
	assert_false(router_match("/a/", "/a", p, sizeof(p)));
	assert_false(router_match("/a", "", p, sizeof(p)));
	assert_false(router_match("/a", "a", p, sizeof(p)));
	assert_false(router_match("/ab", "/a", p, sizeof(p)));
	assert_false(router_match("/a", "/ab", p, sizeof(p)));
}

/* ---- Content-Type -------------------------------------------------------- */

static void
test_content_type(void **state)
{
	static const char *const yes[] = {
	    "application/json",
	    "application/json; charset=utf-8",
	    "application/json;charset=UTF-8",
	    "application/json ; charset=utf-8",
	    "application/json\t;x",
	    "application/json;",
	    "application/json ",
	    "Application/JSON",
	    "APPLICATION/JSON; CHARSET=UTF-8",
	    "application/json; charset=latin1", /* parameters are not read */
	};
	static const char *const no[] = {
	    "application/jsonx",
	    "application/json+x",
	    "application/json-patch+json",
	    "application/json x",
	    "application/json,text/plain",
	    "application/js",
	    "application/",
	    "application/xml",
	    "text/json",
	    "text/plain",
	    "text/plain; x=application/json",
	    " application/json", /* leading whitespace is not skipped */
	    "",
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		if (!router_is_json(yes[i]))
			fail_msg("refused Content-Type \"%s\"", yes[i]);
	for (i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		if (router_is_json(no[i]))
			fail_msg("accepted Content-Type \"%s\"", no[i]);
	assert_false(router_is_json(NULL)); /* no Content-Type header */
}

/* ---- bodies ------------------------------------------------------------- */

static void
test_body_valid(void **state)
{
	static const char body[] = "{\"source\": \"name: x\\n\"}";
	struct body_error e;
	json_t *o;

	(void)state;
	o = router_body_decode(body, strlen(body), validate_fields, 1, &e);
	assert_non_null(o);
	assert_true(json_is_object(o));
	assert_string_equal(json_string_value(json_object_get(o, "source")), "name: x\n");
	assert_int_equal(e.status, BODY_OK);
	json_decref(o);

	/* not NUL-terminated: only len bytes are read */
	o = router_body_decode("{\"source\":\"a\"}garbage", 14, validate_fields, 1, &e);
	assert_non_null(o);
	json_decref(o);

	/* a route without fields takes only {} */
	o = router_body_decode(" {} \n", 5, NULL, 0, &e);
	assert_non_null(o);
	assert_int_equal(json_object_size(o), 0);
	json_decref(o);
}

/*
 * Without JSON_DECODE_ANY jansson itself refuses a scalar at the top level
 * (with line and column); an array parses and is refused afterwards.
 */
static void
test_body_not_object(void **state)
{
	static const char *const scalars[] = {
	    "\"source\"", "1", "-1.5e3", "null", "true", "false",
	};
	static const char *const arrays[] = {"[]", "[{\"source\":\"x\"}]", " [1,2] "};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(scalars) / sizeof(scalars[0]); i++)
		expect_bad_json(scalars[i], strlen(scalars[i]), "line 1, column ");
	expect_bad_json("null", 4, "'[' or '{' expected near 'null'");
	for (i = 0; i < sizeof(arrays) / sizeof(arrays[0]); i++)
		expect_bad_json(arrays[i], strlen(arrays[i]), "the body must be a JSON object");
}

static void
test_body_malformed(void **state)
{
	struct body_error e;
	static const char deep_prefix[] = "{\"source\":";
	char *deep;
	size_t n = 100000;

	(void)state;
	e = refused("{\"source\": }", BODY_BAD_JSON);
	assert_true(strncmp(e.message, "line 1, column 12: ", 19) == 0);
	e = refused("{\n  \"source\": \"x\",\n}", BODY_BAD_JSON);
	assert_true(strncmp(e.message, "line 3, column 1: ", 18) == 0);
	expect_bad_json("{\"source\":\"x\"", 13, "line 1, column 13: ");
	expect_bad_json("{\"source\":\"x\"} {}", 17, "end of file expected");
	expect_bad_json("{'source':'x'}", 14, "line 1, column 2: ");
	expect_bad_json("{\"source\":\"x\",}", 15, "line 1, column 15: ");
	expect_bad_json("{\"source\":\"\x01\"}", 14, "control character 0x1");

	/* nesting beyond jansson's limit is refused, not a stack overflow */
	deep = malloc(sizeof(deep_prefix) + n);
	assert_non_null(deep);
	memcpy(deep, deep_prefix, sizeof(deep_prefix) - 1);
	memset(deep + sizeof(deep_prefix) - 1, '[', n);
	expect_bad_json(deep, sizeof(deep_prefix) - 1 + n, "maximum parsing depth reached");
	free(deep);
}

static void
test_body_empty(void **state)
{
	struct body_error e;

	(void)state;
	e = refused_n("", 0, BODY_BAD_JSON);
	assert_string_equal(e.message, "line 1, column 0: '[' or '{' expected near end of file");
	assert_null(router_body_decode(NULL, 0, validate_fields, 1, &e));
	check_error_shape(&e);
	assert_int_equal(e.status, BODY_BAD_JSON);
	expect_bad_json(" \r\n\t", 4, "expected near end of file");
}

static void
test_body_duplicate_keys(void **state)
{
	(void)state;
	expect_bad_json("{\"source\":\"a\",\"source\":\"b\"}", 27, "duplicate object key");
	expect_bad_json("{\"source\":\"a\",\"sourc\\u0065\":\"b\"}", 32, "duplicate object key");
}

static void
test_body_nul(void **state)
{
	(void)state;
	/* raw NUL bytes in a string, between tokens, after the object */
	expect_bad_json("{\"source\":\"a\0b\"}", 16, "control character 0x0");
	expect_bad_json("{\"source\":\0\"ab\"}", 16, "line 1, column 11: ");
	expect_bad_json("{\"source\":\"ab\"}\0", 16, "end of file expected");
	expect_bad_json("\0{\"source\":\"ab\"}", 16, "line 1, column 1: ");
	/* escaped NULs, in a value and in a key */
	expect_bad_json("{\"source\":\"a\\u0000b\"}", 21, "\\u0000 is not allowed");
	expect_bad_json("{\"sou\\u0000rce\":\"ab\"}", 21, "NUL byte in object key not supported");
}

static void
test_body_not_utf8(void **state)
{
	static const char *const bodies[] = {
	    "{\"source\":\"\xff\"}",             /* never valid */
	    "{\"source\":\"\xc3\"}",             /* cut sequence */
	    "{\"source\":\"\xc0\xaf\"}",         /* overlong '/' */
	    "{\"source\":\"\xe0\x80\xaf\"}",     /* overlong '/' */
	    "{\"source\":\"\xed\xa0\x80\"}",     /* a surrogate */
	    "{\"source\":\"\xf4\x90\x80\x80\"}", /* above U+10FFFF */
	    "{\"sour\xe9\":\"x\"}",              /* latin-1 in a key */
	    "{\"source\":\"\\ud800\"}",          /* escaped lone surrogate */
	    "{\"source\":\"\\udc00\\ud800\"}",   /* escaped pair in the wrong order */
	    "\xef\xbb\xbf{\"source\":\"x\"}",    /* a byte order mark */
	};
	struct body_error e;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		e = refused(bodies[i], BODY_BAD_JSON);
		assert_true(strncmp(e.message, "line ", 5) == 0);
	}
}

static void
test_body_unknown_field(void **state)
{
	struct body_error e;
	char big[256];

	(void)state;
	e = refused("{\"source\":\"x\",\"extra\":1}", BODY_UNKNOWN_FIELD);
	assert_string_equal(e.field, "extra");
	assert_string_equal(e.message, "field \"extra\" is unknown");
	/* members are checked before the required ones */
	e = refused("{\"Source\":\"x\"}", BODY_UNKNOWN_FIELD);
	assert_string_equal(e.field, "Source");
	/* a name is made printable and cut at 64 for the reply */
	e = refused("{\"a\\u0001b\\u00e9\":1}", BODY_UNKNOWN_FIELD);
	assert_string_equal(e.field, "a?b??");
	assert_string_equal(e.message, "field \"a?b??\" is unknown");
	snprintf(big, sizeof(big), "{\"%s%s\":1}", NAME64, NAME64);
	e = refused(big, BODY_UNKNOWN_FIELD);
	assert_string_equal(e.field, NAME64);
	/* the empty name is a member like any other */
	e = refused("{\"\":1}", BODY_UNKNOWN_FIELD);
	assert_string_equal(e.field, "");
	assert_string_equal(e.message, "field \"\" is unknown");
}

static void
test_body_missing_field(void **state)
{
	struct body_error e;

	(void)state;
	e = refused("{}", BODY_MISSING_FIELD);
	assert_string_equal(e.field, "source");
	assert_string_equal(e.message, "field \"source\" is required");
	e = refused(" { } ", BODY_MISSING_FIELD);
	assert_string_equal(e.field, "source");
}

static void
test_body_invalid_field(void **state)
{
	static const char *const bodies[] = {
	    "{\"source\":1}",     "{\"source\":1.5}",     "{\"source\":null}", "{\"source\":true}",
	    "{\"source\":false}", "{\"source\":[\"x\"]}", "{\"source\":{}}",
	};
	struct body_error e;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		e = refused(bodies[i], BODY_INVALID_FIELD);
		assert_string_equal(e.field, "source");
		assert_string_equal(e.message, "field \"source\" has the wrong type");
	}
}

/* A table with optional members and other types (none in the real table yet). */
static void
test_body_optional_fields(void **state)
{
	static const struct body_field f[] = {
	    {"n", JSON_INTEGER, 0},
	    {"o", JSON_OBJECT, 1},
	    {"t", JSON_TRUE, 0},
	};
	struct body_error e;
	json_t *o;

	(void)state;
	o = router_body_decode("{\"o\":{}}", 8, f, 3, &e);
	assert_non_null(o);
	json_decref(o);
	o = router_body_decode("{\"o\":{\"x\":1},\"n\":3,\"t\":true}", 28, f, 3, &e);
	assert_non_null(o);
	json_decref(o);
	/* JSON_INTEGER refuses a real, and JSON_TRUE refuses false */
	assert_null(router_body_decode("{\"o\":{},\"n\":3.0}", 16, f, 3, &e));
	assert_int_equal(e.status, BODY_INVALID_FIELD);
	assert_string_equal(e.field, "n");
	assert_null(router_body_decode("{\"o\":{},\"t\":false}", 18, f, 3, &e));
	assert_int_equal(e.status, BODY_INVALID_FIELD);
	assert_string_equal(e.field, "t");
	assert_null(router_body_decode("{\"n\":1}", 7, f, 3, &e));
	assert_int_equal(e.status, BODY_MISSING_FIELD);
	assert_string_equal(e.field, "o");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_every_route),
	    cmocka_unit_test(test_runs_routes),
	    cmocka_unit_test(test_query),
	    cmocka_unit_test(test_uint),
	    cmocka_unit_test(test_month_and_role),
	    cmocka_unit_test(test_routes_documented),
	    cmocka_unit_test(test_head_reaches_get),
	    cmocka_unit_test(test_405_allow),
	    cmocka_unit_test(test_allow_list),
	    cmocka_unit_test(test_404_paths),
	    cmocka_unit_test(test_404_bad_uuids),
	    cmocka_unit_test(test_404_bad_names),
	    cmocka_unit_test(test_param_small_buffer),
	    cmocka_unit_test(test_match),
	    cmocka_unit_test(test_content_type),
	    cmocka_unit_test(test_body_valid),
	    cmocka_unit_test(test_body_not_object),
	    cmocka_unit_test(test_body_malformed),
	    cmocka_unit_test(test_body_empty),
	    cmocka_unit_test(test_body_duplicate_keys),
	    cmocka_unit_test(test_body_nul),
	    cmocka_unit_test(test_body_not_utf8),
	    cmocka_unit_test(test_body_unknown_field),
	    cmocka_unit_test(test_session_routes),
	    cmocka_unit_test(test_routes_in_openapi),
	    cmocka_unit_test(test_cookie),
	    cmocka_unit_test(test_body_missing_field),
	    cmocka_unit_test(test_body_invalid_field),
	    cmocka_unit_test(test_body_optional_fields),
	};

	return cmocka_run_group_tests_name("router", tests, NULL, NULL);
}
