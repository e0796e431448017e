/*
 * The runs part of the API (docs/api.md): submit, list, get, cancel,
 * budget, steps, the events page, approvals and artifacts.  Every
 * operation answers one api_* envelope (sql/migrations/0003_api.sql) and
 * decides authorization itself from the acting user; api_envelope_done
 * turns it into the reply.
 * The event stream is in sse.c.
 */
#include <sys/queue.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "httpd/httpd.h"
#include "privsep/child.h"

#define RUNS_PAGE_MAX 200
#define RUNS_PAGE_DEFAULT 50
#define EVENTS_PAGE_MAX 1000
#define EVENTS_PAGE_DEFAULT 100
#define IDEM_MAX 128

/* Call op with the user and the path's {id} and nothing else. */
static void
runs_call(struct hreq *h, const char *op)
{
	struct ipc_wbuf w;
	uint64_t id = api_call_begin(h, &w, op, 1, 0);

	hreq_db_send(h, &w, id, api_envelope_done);
}

/* Idempotency-Key: 1..128 visible ASCII characters. */
static int
runs_idem_ok(const char *k)
{
	size_t i;

	for (i = 0; k[i] != '\0'; i++)
		if (k[i] <= 0x20 || k[i] >= 0x7f || i >= IDEM_MAX)
			return 0;
	return i > 0;
}

/* POST /v1/projects/{id}/runs {"template": NAME, "params": {...}} */
void
api_runs_submit(struct hreq *h)
{
	const char *tmpl = json_string_value(json_object_get(h->body, "template"));
	const char *idem =
	    evhttp_find_header(evhttp_request_get_input_headers(h->req), "Idempotency-Key");
	json_t *params = json_object_get(h->body, "params");
	struct ipc_wbuf w;
	char *ptext;
	uint64_t id;

	if (idem != NULL && !runs_idem_ok(idem)) {
		hreq_error(h, 400, "invalid_header",
		           "Idempotency-Key must be 1 to 128 visible ASCII characters");
		return;
	}
	if (!router_is_name(tmpl)) {
		hreq_error_ex(h, 422, "unknown_template", "no template has that name",
		              json_pack("{s:s}", "field", "template"));
		return;
	}
	if ((ptext = json_dumps(params != NULL ? params : json_object(), JSON_COMPACT)) == NULL)
		fatalx("out of memory");
	id = api_call_begin(h, &w, "httpd_run_submit", 1, 4);
	ipc_put_str(&w, tmpl);
	ipc_put_str(&w, ptext);
	if (idem != NULL)
		ipc_put_str(&w, idem);
	else
		ipc_put_nil(&w);
	ipc_put_str(&w, h->remote);
	free(ptext);
	hreq_db_send(h, &w, id, api_envelope_done);
}

/* GET /v1/projects/{id}/runs?status=&template=&cursor=&limit= */
void
api_runs_list(struct hreq *h)
{
	static const char *const statuses[] = {"queued", "running", "waiting_approval",
	                                       "succeeded", "failed", "cancelled"};
	const char *status = api_query(h, "status"), *tmpl = api_query(h, "template");
	const char *cursor = api_query(h, "cursor");
	struct ipc_wbuf w;
	uint64_t limit, id;
	size_t i;

	if (api_query_limit(h, RUNS_PAGE_MAX, RUNS_PAGE_DEFAULT, &limit) == -1)
		return;
	for (i = 0; status != NULL && i < sizeof(statuses) / sizeof(statuses[0]); i++)
		if (strcmp(status, statuses[i]) == 0)
			break;
	if (status != NULL && i == sizeof(statuses) / sizeof(statuses[0])) {
		hreq_error(h, 400, "invalid_query", "query parameter \"status\" is not a run status");
		return;
	}
	if (tmpl != NULL && !router_is_name(tmpl)) {
		hreq_error(h, 400, "invalid_query", "query parameter \"template\" is not a name");
		return;
	}
	if (cursor != NULL && !router_is_uuid(cursor)) {
		hreq_error(h, 400, "invalid_cursor", "the cursor is not one this API gave");
		return;
	}
	id = api_call_begin(h, &w, "httpd_run_list", 1, 4);
	status != NULL ? ipc_put_str(&w, status) : ipc_put_nil(&w);
	tmpl != NULL ? ipc_put_str(&w, tmpl) : ipc_put_nil(&w);
	cursor != NULL ? ipc_put_str(&w, cursor) : ipc_put_nil(&w);
	ipc_put_i64(&w, (int64_t)limit);
	hreq_db_send(h, &w, id, api_envelope_done);
}

void
api_run(struct hreq *h)
{
	runs_call(h, "httpd_run_get");
}

void
api_run_cancel(struct hreq *h)
{
	struct ipc_wbuf w;
	uint64_t id = api_call_begin(h, &w, "httpd_run_cancel", 1, 1);

	ipc_put_str(&w, h->remote);
	hreq_db_send(h, &w, id, api_envelope_done);
}

/* POST /v1/runs/{id}/budget {"usd_micros": N, "phase": NAME}: the range and
 * the phase are the database's to judge (api_set_budget), against the
 * run's own template. */
void
api_run_budget(struct hreq *h)
{
	json_t *jp = json_object_get(h->body, "phase");
	const char *phase = json_string_value(jp);
	json_int_t usd = json_integer_value(json_object_get(h->body, "usd_micros"));
	struct ipc_wbuf w;
	uint64_t id;

	/* 1 to 64 of [a-z0-9_-], as templates name phases; no NUL inside */
	if (phase != NULL && (json_string_length(jp) < 1 || json_string_length(jp) > 64 ||
	    strspn(phase, "abcdefghijklmnopqrstuvwxyz0123456789_-") != json_string_length(jp))) {
		hreq_error_ex(h, 422, "invalid_field", "phase is not a phase name",
		              json_pack("{s:s}", "field", "phase"));
		return;
	}
	id = api_call_begin(h, &w, "httpd_run_budget", 1, 3);
	phase != NULL ? ipc_put_str(&w, phase) : ipc_put_nil(&w);
	ipc_put_i64(&w, (int64_t)usd);
	ipc_put_str(&w, h->remote);
	hreq_db_send(h, &w, id, api_envelope_done);
}

void
api_run_steps(struct hreq *h)
{
	runs_call(h, "httpd_run_steps");
}

/* GET /v1/runs/{id}/events?after=&limit= */
void
api_run_events(struct hreq *h)
{
	uint64_t after, limit, id;
	struct ipc_wbuf w;

	if (api_query_uint(h, "after", INT64_MAX, 0, &after) == -1 ||
	    api_query_limit(h, EVENTS_PAGE_MAX, EVENTS_PAGE_DEFAULT, &limit) == -1)
		return;
	id = api_call_begin(h, &w, "httpd_run_events", 1, 2);
	ipc_put_i64(&w, (int64_t)after);
	ipc_put_i64(&w, (int64_t)limit);
	hreq_db_send(h, &w, id, api_envelope_done);
}

void
api_run_approvals(struct hreq *h)
{
	runs_call(h, "httpd_run_approvals");
}

/* GET /v1/approvals: the pending approvals the user may decide */
void
api_approvals_pending(struct hreq *h)
{
	struct ipc_wbuf w;
	uint64_t id = api_call_begin(h, &w, "httpd_approvals_pending", 0, 0);

	hreq_db_send(h, &w, id, api_envelope_done);
}

/* POST /v1/approvals/{id}/decide {"decision": "approved"|"rejected", "comment": "..."} */
void
api_approval_decide(struct hreq *h)
{
	const char *decision = json_string_value(json_object_get(h->body, "decision"));
	json_t *comment = json_object_get(h->body, "comment");
	struct ipc_wbuf w;
	uint64_t id;

	if (strcmp(decision, "approved") != 0 && strcmp(decision, "rejected") != 0) {
		hreq_error_ex(h, 422, "invalid_field", "decision must be \"approved\" or \"rejected\"",
		              json_pack("{s:s}", "field", "decision"));
		return;
	}
	if (comment != NULL && (json_string_length(comment) > 4096 ||
	                        memchr(json_string_value(comment), '\0',
	                               json_string_length(comment)) != NULL)) {
		hreq_error_ex(h, 422, "invalid_field",
		              "comment must be at most 4096 bytes, without NUL",
		              json_pack("{s:s}", "field", "comment"));
		return;
	}
	id = api_call_begin(h, &w, "httpd_approval_decide", 1, 3);
	ipc_put_str(&w, decision);
	comment != NULL ? ipc_put_str(&w, json_string_value(comment)) : ipc_put_nil(&w);
	ipc_put_str(&w, h->remote);
	hreq_db_send(h, &w, id, api_envelope_done);
}

void
api_run_artifacts(struct hreq *h)
{
	runs_call(h, "httpd_run_artifacts");
}

/* ---- artifact download ------------------------------------------------------ */

/* A file name for Content-Disposition: KEY plus the kind's extension. */
static const char *
artifact_ext(const char *kind)
{
	if (strcmp(kind, "md") == 0)
		return ".md";
	if (strcmp(kind, "json") == 0)
		return ".json";
	if (strcmp(kind, "patch") == 0)
		return ".patch";
	return ".txt";
}

static const char *
artifact_type(const char *kind)
{
	if (strcmp(kind, "md") == 0)
		return "text/markdown; charset=utf-8";
	if (strcmp(kind, "json") == 0)
		return "application/json";
	if (strcmp(kind, "patch") == 0)
		return "text/x-diff; charset=utf-8";
	return "text/plain; charset=utf-8";
}

/*
 * Answer h with an artifact's bytes (buf, consumed; NULL for a 304 when
 * If-None-Match names its tag), described by h->art {key, kind, sha256}: an
 * attachment, with its sha256 as a strong ETag.
 */
static void
artifact_send(struct hreq *h, struct evbuffer *buf)
{
	const char *kind = json_string_value(json_object_get(h->art, "kind"));
	const char *key = json_string_value(json_object_get(h->art, "key"));
	const char *sha = json_string_value(json_object_get(h->art, "sha256"));
	struct evkeyvalq *out = evhttp_request_get_output_headers(h->req);
	char etag[80], disp[128];
	const char *inm;

	snprintf(etag, sizeof(etag), "\"%s\"", sha);
	snprintf(disp, sizeof(disp), "attachment; filename=\"%s%s\"", key, artifact_ext(kind));
	evhttp_add_header(out, "ETag", etag);
	evhttp_add_header(out, "Cache-Control", "private, no-cache");
	evhttp_add_header(out, "X-Content-Type-Options", "nosniff");
	inm = evhttp_find_header(evhttp_request_get_input_headers(h->req), "If-None-Match");
	if (inm != NULL && strcmp(inm, etag) == 0) {
		evhttp_send_reply(h->req, 304, "Not Modified", NULL);
	} else {
		evhttp_add_header(out, "Content-Type", artifact_type(kind));
		evhttp_add_header(out, "Content-Disposition", disp);
		evhttp_send_reply(h->req, 200, "OK", buf);
	}
	evbuffer_free(buf);
	hreq_done(h);
}

/* The bytes of an inline artifact, checked against its digest. */
static void
artifact_inline(struct hreq *h, const char *b64)
{
	const char *sha = json_string_value(json_object_get(h->art, "sha256"));
	unsigned char *bin, digest[crypto_hash_sha256_BYTES];
	char hex[crypto_hash_sha256_BYTES * 2 + 1];
	size_t b64len = strlen(b64), binlen = 0, cap = b64len / 4 * 3 + 3;
	struct evbuffer *buf;
	int bad;

	if ((bin = malloc(cap)) == NULL)
		fatal("malloc");
	bad = sodium_base642bin(bin, cap, b64, b64len, NULL, &binlen, NULL,
	                        sodium_base64_VARIANT_ORIGINAL) != 0;
	if (!bad) {
		crypto_hash_sha256(digest, bin, binlen);
		sodium_bin2hex(hex, sizeof(hex), digest, sizeof(digest));
		bad = strcmp(hex, sha) != 0;
	}
	if (bad) {
		log_warnx("artifact %s: its bytes do not match its digest", h->param);
		free(bin);
		hreq_error(h, 500, "internal", "internal error");
		return;
	}
	if ((buf = evbuffer_new()) == NULL)
		fatalx("out of memory");
	evbuffer_add(buf, bin, binlen);
	free(bin);
	artifact_send(h, buf);
}

/* The supervisor's answer: the stored file's descriptor, or why not. */
static void
artifact_opened(struct hreq *h, struct ipc_msg *m)
{
	struct evbuffer *buf;
	uint64_t size;
	uint32_t status;

	if (m == NULL) {
		hreq_error(h, 503, "unavailable", "the artifact store did not answer");
		return;
	}
	if (m->type == IMSG_ARTIFACT_ERR) {
		if (ipc_dec_artifact_err(m->body, &status) == -1)
			fatalx("bad artifact reply");
		if (status == 404)
			hreq_error(h, 404, "not_found", "no such artifact");
		else if (status == 503)
			hreq_error(h, 503, "unavailable", "the database is unavailable");
		else
			hreq_error(h, 500, "internal", "internal error");
		return;
	}
	if (m->type != IMSG_ARTIFACT_FD || ipc_dec_artifact_fd(m->body, &size) == -1 ||
	    (json_int_t)size != json_integer_value(json_object_get(h->art, "size")))
		fatalx("bad artifact reply");
	if ((buf = evbuffer_new()) == NULL)
		fatalx("out of memory");
	/* the file is streamed from the descriptor (sendfile where it can be) */
	if (evbuffer_add_file(buf, m->fd, 0, (ev_off_t)size) == -1)
		fatalx("evbuffer_add_file");
	m->fd = -1;
	artifact_send(h, buf);
}

/* Ask the supervisor for the stored file (httpd cannot open the store). */
static void
artifact_stored(struct hreq *h)
{
	struct ipc_wbuf w;
	uint64_t id;

	hreq_sup_begin(&w, IMSG_ARTIFACT_OPEN, 2, &id);
	ipc_put_str(&w, h->uid);
	ipc_put_str(&w, h->param);
	hreq_sup_send(h, &w, id, artifact_opened);
}

/*
 * GET /v1/artifacts/{id}: the metadata (and inline bytes) from
 * httpd_artifact_get, which decides who may read it; then the bytes.
 */
static void
artifact_done(struct hreq *h, const struct ipc_db_result *r)
{
	json_t *rows, *env, *body;
	const char *b64;

	if (!hreq_db_ok(h, r) || (rows = hreq_db_rows(h, r)) == NULL)
		return;
	env = json_array_get(rows, 0);
	body = json_object_get(env, "body");
	if (body == NULL || json_integer_value(json_object_get(env, "status")) != 200) {
		json_decref(rows);
		api_envelope_done(h, r); /* the refusal, through the common path */
		return;
	}
	if (!json_is_string(json_object_get(body, "kind")) ||
	    !json_is_string(json_object_get(body, "key")) ||
	    !json_is_string(json_object_get(body, "sha256")) ||
	    router_role_rank(json_string_value(json_object_get(env, "role"))) < API_ROLE_VIEWER) {
		json_decref(rows);
		hreq_error(h, 500, "internal", "internal error");
		return;
	}
	h->art = json_incref(body);
	b64 = json_string_value(json_object_get(body, "inline"));
	if (b64 != NULL)
		artifact_inline(h, b64);
	else
		artifact_stored(h);
	json_decref(rows);
}

void
api_artifact(struct hreq *h)
{
	struct ipc_wbuf w;
	uint64_t id = api_call_begin(h, &w, "httpd_artifact_get", 1, 0);

	hreq_db_send(h, &w, id, artifact_done);
}
