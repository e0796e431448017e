/*
 * The API's handlers (docs/api.md).  Authorization is decided by the SQL of
 * each operation, which takes the acting user's id and returns only what
 * that user may see, so a project the user is not a member of and a project
 * that does not exist are the same empty result, and the same 404; httpd's
 * own checks (router.c before the call, api_envelope_done after it) come on
 * top.  Each row of an httpd_* operation is one JSON object (first column);
 * the newer ones answer one api_* envelope (sql/migrations/0003_api.sql).
 */
#include <event2/buffer.h>
#include <event2/http.h>
#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/forge.h"
#include "httpd/httpd.h"
#include "tmpl/tmpl.h"

#define API_TMPL_ERRBUF (64 * 1024)

uint64_t
api_call_begin(struct hreq *h, struct ipc_wbuf *w, const char *op, int with_param,
               uint32_t nmore)
{
	uint64_t id = hreq_db_begin(w, op, (with_param ? 2 : 1) + nmore);

	ipc_put_str(w, h->uid);
	if (with_param)
		ipc_put_str(w, h->param);
	return id;
}

/* Call op with the user's id and, when with_param, the path parameter. */
static void
api_call(struct hreq *h, const char *op, int with_param, hreq_db_cb cb)
{
	struct ipc_wbuf w;
	uint64_t id = api_call_begin(h, &w, op, with_param, 0);

	hreq_db_send(h, &w, id, cb);
}

const char *
api_query(struct hreq *h, const char *name)
{
	return evhttp_find_header(&h->query, name);
}

int
api_query_uint(struct hreq *h, const char *name, uint64_t max, uint64_t dflt, uint64_t *out)
{
	const char *v = api_query(h, name);
	char msg[96];

	*out = dflt;
	if (v == NULL || router_uint(v, max, out) == 0)
		return 0;
	snprintf(msg, sizeof(msg), "query parameter \"%s\" must be an integer from 0 to %llu", name,
	         (unsigned long long)max);
	hreq_error(h, 400, "invalid_query", msg);
	return -1;
}

int
api_query_limit(struct hreq *h, uint64_t max, uint64_t dflt, uint64_t *out)
{
	if (api_query_uint(h, "limit", max, dflt, out) == -1)
		return -1;
	if (*out == 0) {
		hreq_error(h, 400, "invalid_query", "query parameter \"limit\" must be at least 1");
		return -1;
	}
	return 0;
}

/*
 * An api_* envelope: {"status": N, "body": ...} or {"status": N, "error":
 * {"code", "message", ...}}, with "role", the user's role in the object's
 * project (null when not a member).  A success must also pass httpd's own
 * check of that role against the route's least role: if the database
 * allowed what httpd would not, the answer is 403 and the disagreement is
 * logged.
 */
void
api_envelope_done(struct hreq *h, const struct ipc_db_result *r)
{
	json_t *rows, *env, *err, *extra;
	json_int_t status;
	const char *role, *code, *msg;

	if (!hreq_db_ok(h, r) || (rows = hreq_db_rows(h, r)) == NULL)
		return;
	env = json_array_get(rows, 0);
	status = json_integer_value(json_object_get(env, "status"));
	role = json_string_value(json_object_get(env, "role"));
	if (json_array_size(rows) != 1 || status < 200 || status > 499) {
		log_warnx("%s: the database's answer is not an envelope", h->route->pattern);
		json_decref(rows);
		hreq_error(h, 500, "internal", "internal error");
		return;
	}
	if ((err = json_object_get(env, "error")) != NULL) {
		code = json_string_value(json_object_get(err, "code"));
		msg = json_string_value(json_object_get(err, "message"));
		if (code == NULL || msg == NULL || (extra = json_deep_copy(err)) == NULL) {
			json_decref(rows);
			hreq_error(h, 500, "internal", "internal error");
			return;
		}
		json_object_del(extra, "code");
		json_object_del(extra, "message");
		hreq_error_ex(h, (int)status, code, msg, extra);
		json_decref(rows);
		return;
	}
	if (h->route->min_role != API_ROLE_NONE &&
	    router_role_rank(role) < h->route->min_role) {
		log_warnx("%s: the database allowed a %s what httpd does not", h->route->pattern,
		          role != NULL ? role : "non-member");
		json_decref(rows);
		hreq_error(h, 403, "forbidden", "your role in this project does not allow this");
		return;
	}
	if (json_object_get(env, "body") == NULL) {
		log_warnx("%s: the database's answer has no body", h->route->pattern);
		json_decref(rows);
		hreq_error(h, 500, "internal", "internal error");
		return;
	}
	hreq_reply(h, (int)status, json_incref(json_object_get(env, "body")));
	json_decref(rows);
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

/* ---- members --------------------------------------------------------------- */

void
api_member_add(struct hreq *h)
{
	struct ipc_wbuf w;
	uint64_t id = api_call_begin(h, &w, "httpd_member_add", 1, 3);

	ipc_put_str(&w, json_string_value(json_object_get(h->body, "user")));
	ipc_put_str(&w, json_string_value(json_object_get(h->body, "role")));
	ipc_put_str(&w, h->remote);
	hreq_db_send(h, &w, id, api_envelope_done);
}

void
api_member_update(struct hreq *h)
{
	struct ipc_wbuf w;
	uint64_t id = api_call_begin(h, &w, "httpd_member_update", 1, 2);

	ipc_put_str(&w, json_string_value(json_object_get(h->body, "role")));
	ipc_put_str(&w, h->remote);
	hreq_db_send(h, &w, id, api_envelope_done);
}

void
api_member_remove(struct hreq *h)
{
	struct ipc_wbuf w;
	uint64_t id = api_call_begin(h, &w, "httpd_member_remove", 1, 1);

	ipc_put_str(&w, h->remote);
	hreq_db_send(h, &w, id, api_envelope_done);
}

/* ---- grants, repositories, usage, audit ----------------------------------- */

void
api_project_grants(struct hreq *h)
{
	api_call(h, "httpd_project_grants", 1, api_envelope_done);
}

void
api_project_repos(struct hreq *h)
{
	api_call(h, "httpd_project_repos", 1, api_envelope_done);
}

/* POST /v1/projects/{id}/repos {"name", "url", "token", "forge",
 * "api_url"}: a token is sealed by the supervisor first; httpd forgets it
 * as soon as it is sent. */
static void
repo_add_call(struct hreq *h, const uint8_t *nonce, const uint8_t *ct, size_t ctlen)
{
	struct ipc_wbuf w;
	uint64_t id = api_call_begin(h, &w, "httpd_repo_add", 1, 7);
	const char *forge = json_string_value(json_object_get(h->body, "forge"));
	const char *api = json_string_value(json_object_get(h->body, "api_url"));

	ipc_put_str(&w, json_string_value(json_object_get(h->body, "name")));
	ipc_put_str(&w, json_string_value(json_object_get(h->body, "url")));
	if (ct != NULL) {
		ipc_put_bin(&w, ct, ctlen);
		ipc_put_bin(&w, nonce, 24);
	} else {
		ipc_put_nil(&w);
		ipc_put_nil(&w);
	}
	ipc_put_str(&w, h->remote);
	if (forge != NULL)
		ipc_put_str(&w, forge);
	else
		ipc_put_nil(&w);
	if (api != NULL)
		ipc_put_str(&w, api);
	else
		ipc_put_nil(&w);
	hreq_db_send(h, &w, id, api_envelope_done);
}

static void
repo_sealed(struct hreq *h, struct ipc_msg *m)
{
	const uint8_t *nonce, *ct;
	size_t ctlen;

	if (m == NULL) {
		hreq_error(h, 503, "unavailable", "the supervisor did not answer");
		return;
	}
	if (m->type != IMSG_REPO_SEALED || ipc_dec_repo_sealed(m->body, &nonce, &ct, &ctlen) == -1)
		fatalx("bad seal reply");
	repo_add_call(h, nonce, ct, ctlen);
}

/* Overwrite a JSON string's bytes in place (the body's copy of a secret). */
static void
api_wipe_string(json_t *s)
{
	if (json_is_string(s))
		sodium_memzero((void *)json_string_value(s), json_string_length(s));
}

/* The forge and its API URL of a new connection, when given
 * (forge_connection_check); the API URL normalised in the body.  0, or -1
 * with the 422 sent: the reply frees h and its body, so the body's token is
 * wiped before it. */
static int
repo_forge_check(struct hreq *h)
{
	const char *api = json_string_value(json_object_get(h->body, "api_url"));
	char norm[FORGE_API_URL_MAX + 1], err[256];
	const char *field;

	if (forge_connection_check(json_string_value(json_object_get(h->body, "forge")),
	                           json_string_value(json_object_get(h->body, "url")), api, norm,
	                           sizeof(norm), &field, err, sizeof(err)) == -1) {
		api_wipe_string(json_object_get(h->body, "token"));
		hreq_error_ex(h, 422, "invalid_field", err, json_pack("{s:s}", "field", field));
		return -1;
	}
	if (api != NULL)
		json_object_set_new(h->body, "api_url", json_string(norm));
	return 0;
}

void
api_repo_add(struct hreq *h)
{
	json_t *tok = json_object_get(h->body, "token");
	size_t len = json_string_length(tok);
	struct evbuffer *in;
	struct ipc_wbuf w;
	uint64_t id;

	/* the raw body holds the token too: wipe it, only the JSON is needed */
	in = evhttp_request_get_input_buffer(h->req);
	if (evbuffer_get_length(in) > 0)
		sodium_memzero(evbuffer_pullup(in, -1), evbuffer_get_length(in));
	if (repo_forge_check(h) == -1)
		return;
	if (tok == NULL) {
		repo_add_call(h, NULL, NULL, 0);
		return;
	}
	if (len == 0 || len > IPC_SECRET_MAX ||
	    memchr(json_string_value(tok), '\0', len) != NULL) {
		api_wipe_string(tok);
		hreq_error_ex(h, 422, "invalid_field", "token must be 1 to 4096 bytes, without NUL",
		              json_pack("{s:s}", "field", "token"));
		return;
	}
	hreq_sup_begin(&w, IMSG_REPO_SEAL, 1, &id);
	ipc_put_bin(&w, json_string_value(tok), len);
	api_wipe_string(tok);
	hreq_sup_send(h, &w, id, repo_sealed);
	/* w is freed: the channel wipes what it sends */
}

void
api_repo_remove(struct hreq *h)
{
	struct ipc_wbuf w;
	uint64_t id = api_call_begin(h, &w, "httpd_repo_remove", 1, 1);

	ipc_put_str(&w, h->remote);
	hreq_db_send(h, &w, id, api_envelope_done);
}

void
api_project_usage(struct hreq *h)
{
	const char *month = api_query(h, "month");
	char now[8];
	struct ipc_wbuf w;
	struct tm tm;
	time_t t = time(NULL);
	uint64_t id;

	if (month == NULL) {
		if (gmtime_r(&t, &tm) == NULL || strftime(now, sizeof(now), "%Y-%m", &tm) != 7)
			fatalx("gmtime");
		month = now;
	} else if (!router_is_month(month)) {
		hreq_error(h, 400, "invalid_query", "query parameter \"month\" must be YYYY-MM");
		return;
	}
	id = api_call_begin(h, &w, "httpd_project_usage", 1, 1);
	ipc_put_str(&w, month);
	hreq_db_send(h, &w, id, api_envelope_done);
}

#define API_PAGE_MAX 1000
#define API_PAGE_DEFAULT 100

void
api_project_audit(struct hreq *h)
{
	uint64_t after, limit, id;
	struct ipc_wbuf w;

	if (api_query_uint(h, "after", INT64_MAX, 0, &after) == -1 ||
	    api_query_limit(h, API_PAGE_MAX, API_PAGE_DEFAULT, &limit) == -1)
		return;
	id = api_call_begin(h, &w, "httpd_project_audit", 1, 2);
	ipc_put_i64(&w, (int64_t)after);
	ipc_put_i64(&w, (int64_t)limit);
	hreq_db_send(h, &w, id, api_envelope_done);
}
