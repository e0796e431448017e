/*
 * The API's handlers (docs/api.md).  Authorization is never decided here:
 * every operation takes the acting user's id and its SQL returns only what
 * that user may see, so a project the user is not a member of and a project
 * that does not exist are the same empty result, and the same 404.  Each
 * row of an httpd_* operation is one JSON object (first column).
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "httpd/httpd.h"
#include "tmpl/tmpl.h"

#define API_TMPL_ERRBUF (64 * 1024)

/* Call op with the user's id and, when with_param, the path parameter. */
static void
api_call(struct hreq *h, const char *op, int with_param, hreq_db_cb cb)
{
	struct ipc_wbuf w;
	uint64_t id = hreq_db_begin(&w, op, with_param ? 2 : 1);

	ipc_put_str(&w, h->uid);
	if (with_param)
		ipc_put_str(&w, h->param);
	hreq_db_send(h, &w, id, cb);
}

/* Reply {key: rows}. */
static void
api_list_done(struct hreq *h, const struct ipc_db_result *r, const char *key)
{
	json_t *rows;

	if (!hreq_db_ok(h, r) || (rows = hreq_db_rows(h, r)) == NULL)
		return;
	hreq_reply(h, 200, json_pack("{s:o}", key, rows));
}

/* Reply the one row, or 404 with msg when there is none. */
static void
api_one_done(struct hreq *h, const struct ipc_db_result *r, const char *msg)
{
	json_t *rows;

	if (!hreq_db_ok(h, r) || (rows = hreq_db_rows(h, r)) == NULL)
		return;
	if (json_array_size(rows) == 0) {
		json_decref(rows);
		hreq_error(h, 404, "not_found", msg);
		return;
	}
	hreq_reply(h, 200, json_incref(json_array_get(rows, 0)));
	json_decref(rows);
}

/* ---- GET /healthz -------------------------------------------------------- */

static void
healthz_done(struct hreq *h, const struct ipc_db_result *r)
{
	int up = r != NULL && r->code == DB_OK;

	hreq_reply(h, up ? 200 : 503,
	           json_pack("{s:s,s:s,s:s}", "status", up ? "ok" : "unavailable", "version",
	                     AGRIPPA_VERSION, "database", up ? "up" : "down"));
}

void
api_healthz(struct hreq *h)
{
	struct ipc_wbuf w;
	uint64_t id = hreq_db_begin(&w, "health", 0);

	hreq_db_send(h, &w, id, healthz_done);
}

/* ---- GET /v1/me ---------------------------------------------------------- */

static void
me_done(struct hreq *h, const struct ipc_db_result *r)
{
	json_t *rows, *p, *me;
	size_t i;

	if (!hreq_db_ok(h, r) || (rows = hreq_db_rows(h, r)) == NULL)
		return;
	json_array_foreach(rows, i, p)
	{
		json_object_del(p, "created_at");
	}
	me = json_deep_copy(h->user);
	if (me == NULL || json_object_set_new(me, "projects", rows) == -1)
		fatalx("out of memory");
	hreq_reply(h, 200, me);
}

void
api_me(struct hreq *h)
{
	api_call(h, "httpd_project_list", 0, me_done);
}

/* ---- projects ------------------------------------------------------------ */

static void
projects_done(struct hreq *h, const struct ipc_db_result *r)
{
	api_list_done(h, r, "projects");
}

void
api_projects(struct hreq *h)
{
	api_call(h, "httpd_project_list", 0, projects_done);
}

static void
project_done(struct hreq *h, const struct ipc_db_result *r)
{
	api_one_done(h, r, "no such project");
}

void
api_project(struct hreq *h)
{
	api_call(h, "httpd_project_get", 1, project_done);
}

/* Every member sees at least their own row: none means not a member. */
static void
members_done(struct hreq *h, const struct ipc_db_result *r)
{
	json_t *rows;

	if (!hreq_db_ok(h, r) || (rows = hreq_db_rows(h, r)) == NULL)
		return;
	if (json_array_size(rows) == 0) {
		json_decref(rows);
		hreq_error(h, 404, "not_found", "no such project");
		return;
	}
	hreq_reply(h, 200, json_pack("{s:o}", "members", rows));
}

void
api_project_members(struct hreq *h)
{
	api_call(h, "httpd_project_members", 1, members_done);
}

/* ---- templates ----------------------------------------------------------- */

static void
templates_done(struct hreq *h, const struct ipc_db_result *r)
{
	api_list_done(h, r, "templates");
}

void
api_templates(struct hreq *h)
{
	api_call(h, "httpd_template_list", 0, templates_done);
}

static void
template_done(struct hreq *h, const struct ipc_db_result *r)
{
	api_one_done(h, r, "no such template");
}

void
api_template(struct hreq *h)
{
	api_call(h, "httpd_template_get", 1, template_done);
}

/* The compiler's error text, one message per line, as a JSON array. */
static json_t *
validate_details(char *errbuf)
{
	json_t *a = json_array();
	char *line, *save = NULL;

	if (a == NULL)
		fatalx("out of memory");
	for (line = strtok_r(errbuf, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save)) {
		/* The compiler quotes only short printable excerpts, but a
		 * message that is not UTF-8 must not take the process down. */
		if (json_array_append_new(a, json_string(line)) == -1)
			json_array_append_new(a, json_string("template: (unprintable message)"));
	}
	return a;
}

/*
 * POST /v1/templates/validate {"source": "..."}: compiled here, in the
 * unprivileged process, exactly as agrippactl template load would.
 */
void
api_template_validate(struct hreq *h)
{
	json_t *src = json_object_get(h->body, "source"), *out = NULL;
	char *errbuf, msg[64];
	unsigned nerr = 0;

	if ((errbuf = malloc(API_TMPL_ERRBUF)) == NULL)
		fatal("malloc");
	if (tmpl_compile("template", (const unsigned char *)json_string_value(src),
	                 json_string_length(src), &out, errbuf, API_TMPL_ERRBUF, &nerr) == 0) {
		free(errbuf);
		hreq_reply(h, 200, json_pack("{s:b,s:o}", "valid", 1, "template", out));
		return;
	}
	snprintf(msg, sizeof(msg), "the template has %u error%s", nerr, nerr == 1 ? "" : "s");
	hreq_error_ex(h, 422, "invalid_template", msg,
	              json_pack("{s:o}", "details", validate_details(errbuf)));
	free(errbuf);
}
