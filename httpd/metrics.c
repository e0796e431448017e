/*
 * GET /metrics: Prometheus' text exposition format (0.0.4) on the
 * metrics_listen socket, its own evhttp apart from the API's, which serves
 * that one path and answers everything else 404.  It has no
 * authentication, so it shows counts and sums only: template, provider and
 * model names, statuses and route templates as labels, never a user, a
 * project, a run id or a token.
 *
 * A scrape asks the supervisor for its numbers (IMSG_METRICS_GET), then the
 * database for its counts (httpd_metrics.sql), and adds httpd's own: event
 * streams open and the API's replies by route and status code, counted here
 * as each reply completes.
 */
#include <event2/buffer.h>
#include <event2/http.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "httpd/httpd.h"
#include "privsep/child.h"

#define METRICS_CODE_MIN 100
#define METRICS_CODE_MAX 599
#define METRICS_NCODES (METRICS_CODE_MAX - METRICS_CODE_MIN + 1)
#define METRICS_MAX_ROUTES 96 /* router.c's table, the dashboard, no route */
#define METRICS_STEP_NBUCKETS 12
#define METRICS_SQL_COLS 9
#define METRICS_COL_COST 8 /* a model row's cost, in micro-dollars */
/* A string literal, without its NUL. */
#define M_LIT(b, s) evbuffer_add((b), (s), sizeof(s) - 1)

static struct evhttp *mhttp;
static size_t nroutes;                      /* router.c's routes */
static uint64_t (*replies)[METRICS_NCODES]; /* [slot][code - 100] */

/* The slots after the route table's. */
static size_t
metrics_slot_static(void)
{
	return nroutes;
}

static size_t
metrics_slot_none(void)
{
	return nroutes + 1;
}

static void
metrics_init(void)
{
	(void)router_routes(&nroutes);
	if (nroutes + 2 > METRICS_MAX_ROUTES)
		fatalx("metrics: too many routes");
	if ((replies = calloc(nroutes + 2, sizeof(*replies))) == NULL)
		fatal("calloc");
}

static void
metrics_reply_done(struct evhttp_request *req, void *arg)
{
	size_t slot = (size_t)(uintptr_t)arg;
	int code = evhttp_request_get_response_code(req);

	if (replies != NULL && code >= METRICS_CODE_MIN && code <= METRICS_CODE_MAX)
		replies[slot][code - METRICS_CODE_MIN]++;
}

void
metrics_count_reply(struct evhttp_request *req, const struct route *rt, int is_static)
{
	const struct route *routes;
	size_t n, slot;

	if (replies == NULL)
		metrics_init();
	routes = router_routes(&n);
	slot = rt != NULL  ? (size_t)(rt - routes)
	       : is_static ? metrics_slot_static()
	                   : metrics_slot_none();
	evhttp_request_set_on_complete_cb(req, metrics_reply_done, (void *)(uintptr_t)slot);
}

/* ---- the text format ------------------------------------------------------ */

static void
m_head(struct evbuffer *b, const char *name, const char *type, const char *help)
{
	evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value, escaped as the format says (backslash, quote, newline). */
static void
m_label(struct evbuffer *b, const char *s, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++) {
		if (s[i] == '\\' || s[i] == '"')
			evbuffer_add_printf(b, "\\%c", s[i]);
		else if (s[i] == '\n')
			M_LIT(b, "\\n");
		else
			evbuffer_add(b, &s[i], 1);
	}
}

static void
m_u64(struct evbuffer *b, const char *name, uint64_t v)
{
	evbuffer_add_printf(b, "%s %" PRIu64 "\n", name, v);
}

static const char *const child_names[IPC_MCHILD__COUNT] = {
    [IPC_MCHILD_ENGINE] = "engine", [IPC_MCHILD_HTTPD] = "httpd",
    [IPC_MCHILD_PROXY] = "proxy",   [IPC_MCHILD_EGRESS] = "egress",
    [IPC_MCHILD_RUNNER] = "runner", [IPC_MCHILD_POSTGRES] = "postgres",
};

static void
metrics_supervisor(struct evbuffer *b, const uint64_t *v)
{
	static const uint64_t bounds[IPC_METRIC_DB_NBOUNDS] = IPC_METRIC_DB_BOUNDS_US;
	uint64_t cum = 0;
	size_t i;

	m_head(b, "agrippa_sandboxes", "gauge", "Sandboxes alive now.");
	m_u64(b, "agrippa_sandboxes", v[IPC_METRIC_SBX_LIVE]);
	m_head(b, "agrippa_sandboxes_started_total", "counter", "Sandboxes built since the start.");
	m_u64(b, "agrippa_sandboxes_started_total", v[IPC_METRIC_SBX_STARTED]);
	m_head(b, "agrippa_egress_decisions_total", "counter",
	       "Egress connection decisions since the start, by decision.");
	evbuffer_add_printf(b,
	                    "agrippa_egress_decisions_total{decision=\"allowed\"} %" PRIu64 "\n"
	                    "agrippa_egress_decisions_total{decision=\"denied\"} %" PRIu64 "\n",
	                    v[IPC_METRIC_EGRESS_ALLOWED], v[IPC_METRIC_EGRESS_DENIED]);
	m_head(b, "agrippa_egress_tunnels", "gauge", "Egress tunnels open now.");
	m_u64(b, "agrippa_egress_tunnels", v[IPC_METRIC_EGRESS_TUNNELS]);
	m_head(b, "agrippa_db_pool_connections", "gauge",
	       "Database pool connections, by state (configured, ready, busy).");
	evbuffer_add_printf(b,
	                    "agrippa_db_pool_connections{state=\"configured\"} %" PRIu64 "\n"
	                    "agrippa_db_pool_connections{state=\"ready\"} %" PRIu64 "\n"
	                    "agrippa_db_pool_connections{state=\"busy\"} %" PRIu64 "\n",
	                    v[IPC_METRIC_DB_POOL_SIZE], v[IPC_METRIC_DB_POOL_READY],
	                    v[IPC_METRIC_DB_POOL_BUSY]);
	m_head(b, "agrippa_db_queued_operations", "gauge",
	       "Database operations waiting for a connection.");
	m_u64(b, "agrippa_db_queued_operations", v[IPC_METRIC_DB_QUEUED]);
	m_head(b, "agrippa_db_operations_total", "counter", "Database operations, by result.");
	evbuffer_add_printf(b,
	                    "agrippa_db_operations_total{result=\"ok\"} %" PRIu64 "\n"
	                    "agrippa_db_operations_total{result=\"error\"} %" PRIu64 "\n"
	                    "agrippa_db_operations_total{result=\"unavailable\"} %" PRIu64 "\n",
	                    v[IPC_METRIC_DB_OPS_OK], v[IPC_METRIC_DB_OPS_ERROR],
	                    v[IPC_METRIC_DB_OPS_UNAVAILABLE]);
	m_head(b, "agrippa_db_operation_duration_seconds", "histogram",
	       "Database operations' time from submission to result.");
	for (i = 0; i <= IPC_METRIC_DB_NBOUNDS; i++) {
		cum += v[IPC_METRIC_DB_LATENCY_BUCKET + i];
		if (i < IPC_METRIC_DB_NBOUNDS)
			evbuffer_add_printf(
			    b,
			    "agrippa_db_operation_duration_seconds_bucket{le=\"%g\"} "
			    "%" PRIu64 "\n",
			    (double)bounds[i] / 1e6, cum);
		else
			evbuffer_add_printf(
			    b,
			    "agrippa_db_operation_duration_seconds_bucket{le=\"+Inf\"} "
			    "%" PRIu64 "\n",
			    cum);
	}
	evbuffer_add_printf(b, "agrippa_db_operation_duration_seconds_sum %.6f\n",
	                    (double)v[IPC_METRIC_DB_LATENCY_SUM_US] / 1e6);
	m_u64(b, "agrippa_db_operation_duration_seconds_count", cum);
	m_head(b, "agrippa_child_restarts_total", "counter",
	       "Restarts of the daemon's child processes, by child.");
	for (i = 0; i < IPC_MCHILD__COUNT; i++)
		if (i != IPC_MCHILD_RUNNER) /* runners are not restarted: their runs are */
			evbuffer_add_printf(
			    b, "agrippa_child_restarts_total{child=\"%s\"} %" PRIu64 "\n",
			    child_names[i], v[IPC_METRIC_RESTARTS + i]);
	m_head(b, "agrippa_ipc_protocol_errors_total", "counter",
	       "Channels to child processes closed for breaking the IPC protocol, by child.");
	for (i = 0; i < IPC_MCHILD__COUNT; i++)
		if (i != IPC_MCHILD_POSTGRES)
			evbuffer_add_printf(
			    b, "agrippa_ipc_protocol_errors_total{child=\"%s\"} %" PRIu64 "\n",
			    child_names[i], v[IPC_METRIC_IPC_ERRORS + i]);
}

static void
metrics_http(struct evbuffer *b)
{
	static const char *const names[] = {"GET",     "POST",  "HEAD",    "PUT",  "DELETE",
	                                    "OPTIONS", "TRACE", "CONNECT", "PATCH"};
	const struct route *routes;
	size_t n, slot, i, k;
	const char *method, *route;

	m_head(b, "agrippa_sse_clients", "gauge", "Event streams open now.");
	m_u64(b, "agrippa_sse_clients", sse_stream_count());
	m_head(b, "agrippa_http_requests_total", "counter",
	       "API replies sent, by method and route template (the dashboard's files: "
	       "/ui; no route: none) and status code.");
	routes = router_routes(&n);
	for (slot = 0; replies != NULL && slot < n + 2; slot++) {
		method = "any";
		route = slot == n ? "/ui" : "none";
		if (slot < n) {
			for (k = 0; k < sizeof(names) / sizeof(names[0]); k++)
				if ((int)routes[slot].method == 1 << k)
					method = names[k];
			route = routes[slot].pattern;
		} else if (slot == n)
			method = "GET";
		for (i = 0; i < METRICS_NCODES; i++)
			if (replies[slot][i] != 0)
				evbuffer_add_printf(
				    b,
				    "agrippa_http_requests_total{method=\"%s\",route=\"%s\","
				    "code=\"%zu\"} %" PRIu64 "\n",
				    method, route, i + METRICS_CODE_MIN, replies[slot][i]);
	}
}

/* ---- the database's counts -------------------------------------------------- */

struct m_row {
	const char *c[METRICS_SQL_COLS];
	size_t len[METRICS_SQL_COLS];
};

/* The next row of r into row: 0, or -1 when it is not nine strings. */
static int
m_row_next(struct ipc_cur *rows, struct m_row *row)
{
	struct ipc_cur cols;
	size_t i;

	if (ipc_get_array(rows, &cols, METRICS_SQL_COLS) == -1 || cols.n != METRICS_SQL_COLS)
		return -1;
	for (i = 0; i < METRICS_SQL_COLS; i++)
		if (ipc_get_str(&cols, &row->c[i], &row->len[i], 4096) == -1)
			return -1;
	return 0;
}

static int
m_is(const struct m_row *row, const char *kind)
{
	return row->len[0] == strlen(kind) && memcmp(row->c[0], kind, row->len[0]) == 0;
}

/* Column i as a number (the SQL wrote it: digits and a point). */
static void
m_num(struct evbuffer *b, const struct m_row *row, size_t i)
{
	evbuffer_add(b, row->c[i], row->len[i]);
}

/* Column i, an integer count of millionths (metrics_db_check lets only
 * digits through there), as a decimal: its digits split six from the end,
 * exact however large the sum grew. */
static void
m_micros(struct evbuffer *b, const struct m_row *row, size_t i)
{
	const char *d = row->c[i];
	size_t n = row->len[i];

	while (n > 1 && *d == '0') {
		d++;
		n--;
	}
	if (n > 6)
		evbuffer_add(b, d, n - 6);
	else
		M_LIT(b, "0");
	M_LIT(b, ".");
	if (n < 6)
		evbuffer_add(b, "000000", 6 - n);
	evbuffer_add(b, n > 6 ? d + n - 6 : d, n > 6 ? 6 : n);
}

/* One sample: name{l1="row's a",l2="row's b"} row's column vi. */
static void
m_sample(struct evbuffer *b, const char *name, const char *l1, const char *l2,
         const struct m_row *row, size_t vi, const char *extra)
{
	evbuffer_add_printf(b, "%s{%s=\"", name, l1);
	m_label(b, row->c[1], row->len[1]);
	if (l2 != NULL) {
		evbuffer_add_printf(b, "\",%s=\"", l2);
		m_label(b, row->c[2], row->len[2]);
	}
	evbuffer_add_printf(b, "\"%s} ", extra != NULL ? extra : "");
	m_num(b, row, vi);
	M_LIT(b, "\n");
}

/* The runs' families, each over all rows (rows is a copy of the result). */
static void
metrics_db_runs(struct evbuffer *b, struct ipc_cur rows)
{
	struct ipc_cur all = rows;
	struct m_row row;

	m_head(b, "agrippa_runs", "gauge", "Runs in the database, by template and status.");
	while (all.i < all.n && m_row_next(&all, &row) == 0)
		if (m_is(&row, "runs"))
			m_sample(b, "agrippa_runs", "template", "status", &row, 3, NULL);
	all = rows;
	while (all.i < all.n && m_row_next(&all, &row) == 0) {
		if (!m_is(&row, "queue"))
			continue;
		m_head(b, "agrippa_queue_runs", "gauge", "Runs queued, waiting for an engine.");
		M_LIT(b, "agrippa_queue_runs ");
		m_num(b, &row, 3);
		M_LIT(b, "\n");
		m_head(b, "agrippa_queue_oldest_age_seconds", "gauge",
		       "Age of the oldest queued run (0 when none is queued).");
		M_LIT(b, "agrippa_queue_oldest_age_seconds ");
		m_num(b, &row, 4);
		M_LIT(b, "\n");
	}
	all = rows;
	m_head(b, "agrippa_budget_stops_total", "counter",
	       "Runs and phases stopped by their budget (budget.exceeded events).");
	while (all.i < all.n && m_row_next(&all, &row) == 0)
		if (m_is(&row, "budget")) {
			M_LIT(b, "agrippa_budget_stops_total ");
			m_num(b, &row, 3);
			M_LIT(b, "\n");
		}
}

/* Step durations: the buckets of a status cumulated, then its sum and count. */
static void
metrics_db_steps(struct evbuffer *b, struct ipc_cur rows)
{
	static const char *const le[METRICS_STEP_NBUCKETS] = {
	    "1", "5", "10", "30", "60", "120", "300", "600", "1800", "3600", "7200", "14400"};
	struct ipc_cur all = rows, sub;
	struct m_row row, brow;
	uint64_t counts[METRICS_STEP_NBUCKETS + 1], cum, k, n;
	size_t i;

	m_head(b, "agrippa_step_duration_seconds", "histogram",
	       "Finished step attempts' durations, by status.");
	while (all.i < all.n && m_row_next(&all, &row) == 0) {
		if (!m_is(&row, "step_sum"))
			continue;
		memset(counts, 0, sizeof(counts));
		for (sub = rows; sub.i < sub.n && m_row_next(&sub, &brow) == 0;) {
			if (!m_is(&brow, "step") || brow.len[1] != row.len[1] ||
			    memcmp(brow.c[1], row.c[1], row.len[1]) != 0 ||
			    dec_parse(brow.c[2], brow.len[2], METRICS_STEP_NBUCKETS, &k) == -1 ||
			    dec_parse(brow.c[3], brow.len[3], UINT64_MAX, &n) == -1)
				continue;
			counts[k] += n;
		}
		for (i = 0, cum = 0; i <= METRICS_STEP_NBUCKETS; i++) {
			cum += counts[i];
			M_LIT(b, "agrippa_step_duration_seconds_bucket{status=\"");
			m_label(b, row.c[1], row.len[1]);
			evbuffer_add_printf(b, "\",le=\"%s\"} %" PRIu64 "\n",
			                    i < METRICS_STEP_NBUCKETS ? le[i] : "+Inf", cum);
		}
		m_sample(b, "agrippa_step_duration_seconds_sum", "status", NULL, &row, 3, NULL);
		m_sample(b, "agrippa_step_duration_seconds_count", "status", NULL, &row, 4, NULL);
	}
}

static void
metrics_db_models(struct evbuffer *b, struct ipc_cur rows)
{
	static const char *const kinds[4] = {"input", "output", "cache_read", "cache_write"};
	struct ipc_cur all;
	struct m_row row;
	char extra[32];
	size_t i;

	m_head(b, "agrippa_model_calls_total", "counter", "Model calls, by provider and model.");
	for (all = rows; all.i < all.n && m_row_next(&all, &row) == 0;)
		if (m_is(&row, "model"))
			m_sample(b, "agrippa_model_calls_total", "provider", "model", &row, 3,
			         NULL);
	m_head(b, "agrippa_model_tokens_total", "counter",
	       "Model tokens, by provider, model and kind.");
	for (i = 0; i < 4; i++) {
		snprintf(extra, sizeof(extra), ",kind=\"%s\"", kinds[i]);
		for (all = rows; all.i < all.n && m_row_next(&all, &row) == 0;)
			if (m_is(&row, "model"))
				m_sample(b, "agrippa_model_tokens_total", "provider", "model", &row,
				         4 + i, extra);
	}
	m_head(b, "agrippa_model_cost_usd_total", "counter",
	       "Model calls' cost in US dollars, by provider and model.");
	for (all = rows; all.i < all.n && m_row_next(&all, &row) == 0;) {
		if (!m_is(&row, "model"))
			continue;
		M_LIT(b, "agrippa_model_cost_usd_total{provider=\"");
		m_label(b, row.c[1], row.len[1]);
		M_LIT(b, "\",model=\"");
		m_label(b, row.c[2], row.len[2]);
		M_LIT(b, "\"} ");
		m_micros(b, &row, METRICS_COL_COST);
		M_LIT(b, "\n");
	}
}

/* Every row well-formed: 0, or -1. */
static int
metrics_db_check(const struct ipc_db_result *r)
{
	struct ipc_cur all = r->rows;
	struct m_row row;
	size_t i, j;

	if (r->ncols != METRICS_SQL_COLS)
		return -1;
	while (all.i < all.n) {
		if (m_row_next(&all, &row) == -1)
			return -1;
		for (i = 3; i < METRICS_SQL_COLS; i++) {
			if (row.len[i] == 0 || row.len[i] > 40)
				return -1;
			for (j = 0; j < row.len[i]; j++)
				if (strchr(m_is(&row, "model") && i == METRICS_COL_COST ?
				    "0123456789" : "0123456789.", row.c[i][j]) == NULL ||
				    row.c[i][j] == '\0')
					return -1;
		}
	}
	return 0;
}

/* ---- a scrape ------------------------------------------------------------------- */

static void
metrics_db_done(struct hreq *h, const struct ipc_db_result *r)
{
	struct evhttp_request *req;
	struct evbuffer *b;

	if (!hreq_db_ok(h, r))
		return;
	if (metrics_db_check(r) == -1) {
		log_warnx("metrics: the database's counts are not what httpd_metrics gives");
		hreq_error(h, 500, "internal", "internal error");
		return;
	}
	if ((b = evbuffer_new()) == NULL)
		fatalx("out of memory");
	metrics_db_runs(b, r->rows);
	metrics_db_steps(b, r->rows);
	metrics_db_models(b, r->rows);
	metrics_supervisor(b, h->metrics);
	metrics_http(b);
	req = hreq_detach(h);
	if (req != NULL) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
		                  "text/plain; version=0.0.4; charset=utf-8");
		evhttp_add_header(evhttp_request_get_output_headers(req), "Cache-Control",
		                  "no-store");
		evhttp_send_reply(req, 200, "OK", b);
	}
	evbuffer_free(b);
}

static void
metrics_sup_done(struct hreq *h, struct ipc_msg *m)
{
	struct ipc_wbuf w;
	uint64_t id;

	if (m == NULL || m->type != IMSG_METRICS) {
		hreq_error(h, 503, "unavailable", "the supervisor did not answer");
		return;
	}
	if ((h->metrics = calloc(IPC_METRIC__COUNT, sizeof(*h->metrics))) == NULL)
		fatal("calloc");
	if (ipc_dec_metrics(m->body, h->metrics) == -1)
		fatalx("bad metrics message"); /* the catalog checked it */
	id = hreq_db_begin(&w, "httpd_metrics", 0);
	hreq_db_send(h, &w, id, metrics_db_done);
}

static const struct route metrics_route = {EVHTTP_REQ_GET, "/metrics", NULL, 0, NULL, 0,
                                           API_ROLE_NONE,  0,          NULL};

static void
metrics_not_found(struct evhttp_request *req)
{
	struct evbuffer *b = evbuffer_new();

	if (b == NULL)
		fatalx("out of memory");
	M_LIT(b, "not found\n");
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
	                  "text/plain; charset=utf-8");
	evhttp_send_reply(req, 404, "Not Found", b);
	evbuffer_free(b);
}

/* Every request on the metrics socket: GET (or HEAD) /metrics, without a
 * query, or a 404. */
static void
metrics_dispatch(struct evhttp_request *req, void *arg)
{
	const struct evhttp_uri *u = evhttp_request_get_evhttp_uri(req);
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	const char *path = evhttp_uri_get_path(u);
	struct ipc_wbuf w;
	struct hreq *h;
	uint64_t id;

	(void)arg;
	if ((cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) || path == NULL ||
	    strcmp(path, "/metrics") != 0 || evhttp_uri_get_query(u) != NULL) {
		metrics_not_found(req);
		return;
	}
	h = hreq_new(req, &metrics_route);
	hreq_sup_begin(&w, IMSG_METRICS_GET, 0, &id);
	hreq_sup_send(h, &w, id, metrics_sup_done);
}

void
metrics_listen(int fd, const char *addr)
{
	struct child *c = httpd_child();

	if (mhttp != NULL)
		fatalx("a second metrics socket");
	if ((mhttp = evhttp_new(c->base)) == NULL)
		fatalx("libevent set-up failed");
	evhttp_set_max_headers_size(mhttp, 8 * 1024);
	evhttp_set_max_body_size(mhttp, 4096);
	evhttp_set_timeout(mhttp, 30);
	/* every method reaches metrics_dispatch, which answers all but GET 404 */
	evhttp_set_allowed_methods(mhttp, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST |
	                                      EVHTTP_REQ_PUT | EVHTTP_REQ_PATCH |
	                                      EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS);
	evhttp_set_gencb(mhttp, metrics_dispatch, NULL);
	if (evhttp_accept_socket(mhttp, fd) == -1)
		fatalx("cannot accept on %s", addr);
	log_info("metrics on %s", addr);
}

void
metrics_shutdown(void)
{
	if (mhttp != NULL)
		evhttp_free(mhttp);
	mhttp = NULL;
	free(replies);
	replies = NULL;
}
