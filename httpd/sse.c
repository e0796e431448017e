/*
 * GET /v1/runs/{id}/events/stream: a run's events as Server-Sent Events
 * (DESIGN.md 3.5, docs/api.md).
 *
 * Opening a stream: authentication, then httpd_run_events (with limit 0)
 * decides in SQL whether the user may see the run and tells its last seq
 * and whether it has finished.  The client then joins its run's group
 * (subscribe) and the group replays from the database (replay): so an event
 * committed between the check and the join is still read, and nothing is
 * missed.
 *
 * All the streams of one run share one group, and the group reads each
 * event once for all of them: a replay asks for the events after the
 * lowest seq any of its clients has, and writes each event only to the
 * clients that have not had it (seq > client's after).  Each client's seq
 * only grows, so delivery is ordered and free of duplicates whatever
 * mixture of wake-ups, replays and reconnections leads to it; a client
 * that joined while a replay was in flight (so that replay started above
 * its seq) gets nothing from it and is served by the next one, so it never
 * skips an event either.
 *
 * Replays are started by: a client joining, an IMSG_RUN_WAKE for the run
 * (NOTIFY run_events through the supervisor; a wake-up only, its seq is
 * never trusted), a wake-up for every run (the LISTEN connection came
 * back), a full page (there is more), and a timer every SSE_REPLAY_SECS (a
 * lost notification costs at most that).  One replay per group is in
 * flight at a time; a request meanwhile sets "again".
 *
 * The run's terminal event is marked final by the replay query; a client
 * gets it and then the end of its stream.  A client that already has it
 * (Last-Event-ID = the terminal seq) gets 204, which tells EventSource not
 * to reconnect.  Comments (":") every SSE_HEARTBEAT_SECS keep proxies and
 * clients from timing out.  At most SSE_OUTBUF_MAX bytes wait for a
 * client: one that has that much unwritten gets nothing more until it has
 * drained it (then it catches up from its seq), and one that drains
 * nothing for SSE_STALL_SECS is dropped.
 *
 * All streams together hold at most api.sse_queued_max bytes unwritten
 * (agrippad.conf(5)), counted exactly (an evbuffer callback on each
 * client's output).  A write that would pass it first closes the clients
 * that have gone longest without reading any of what they hold, the
 * longest first, while they have gone longer than the writer: a client
 * that does not read has waited since its socket filled, one that reads
 * drained some of its output a moment ago, however much it holds (a reader
 * catching up holds up to SSE_OUTBUF_MAX, more than thousands of idle
 * clients each hold under the cap).  So readers are served however many
 * clients do not read.  A closed client may reconnect and resume from its
 * Last-Event-ID.  When the writer itself has gone longest, it is full, as
 * above.
 */
#include <sys/queue.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"
#include "httpd/httpd.h"
#include "privsep/child.h"

#define SSE_REPLAY_SECS 5
#define SSE_HEARTBEAT_TICKS 3 /* heartbeat every 3 replay ticks: 15 s */
#define SSE_PAGE 1000
#define SSE_RETRY_MS 2000
#define SSE_OUTBUF_MAX (1024 * 1024)

#define SSE_STALL_SECS 60 /* a full client that drains nothing for this long is dropped */
#define SSE_STREAM_TIMEOUT_SECS (24 * 3600)

struct sse_run;

static size_t sse_queued_max = 64u * 1024 * 1024; /* api.sse_queued_max */
static unsigned sse_streams;                       /* clients of every run */
static size_t sse_queued;    /* bytes unwritten over every client's output */
static size_t sse_evicting;  /* ... of clients being closed for the cap */
static struct event *sse_evict_ev;

void
sse_configure(size_t queued_max)
{
	sse_queued_max = queued_max;
}

unsigned
sse_stream_count(void)
{
	return sse_streams;
}

struct sse_client {
	TAILQ_ENTRY(sse_client) entry;
	struct sse_run *run;
	struct evhttp_request *req;
	uint64_t after; /* the last seq this client has */
	time_t full_since; /* monotonic seconds since its output is full, 0 when not */
	struct evbuffer *out; /* its connection's output */
	struct evbuffer_cb_entry *cbe;
	size_t queued;   /* bytes in out, as its callback last saw */
	uint64_t waiting_ms; /* mono_ms() since out has held bytes of which none were written */
	int evict;       /* to be closed for the cap (sse_evict_ev) */
};
TAILQ_HEAD(sse_clientq, sse_client);

struct sse_run {
	LIST_ENTRY(sse_run) entry;
	char id[HTTPD_UUID_LEN + 1];
	struct sse_clientq clients;
	unsigned nclients;
	uint64_t seen;   /* the highest seq a replay has read */
	uint64_t from;   /* the replay in flight reads events after this seq */
	uint64_t dbid;   /* the replay in flight, 0 when none */
	int again;       /* replay once more when this one ends */
	int hold;        /* a loop over the clients is running: do not free */
	unsigned ticks;
	struct event *timer;
};
LIST_HEAD(sse_runq, sse_run);

static struct sse_runq runs = LIST_HEAD_INITIALIZER(runs);

static void sse_replay(struct sse_run *g);

static struct sse_run *
sse_find(const char *id)
{
	struct sse_run *g;

	LIST_FOREACH(g, &runs, entry)
	if (strcmp(g->id, id) == 0)
		return g;
	return NULL;
}

static void
sse_run_free(struct sse_run *g)
{
	if (g->dbid != 0)
		child_db_forget(httpd_child(), g->dbid);
	LIST_REMOVE(g, entry);
	event_free(g->timer);
	free(g);
}

/* Take c out of its group (and free the group when it was the last). */
static void
sse_client_free(struct sse_client *c)
{
	struct sse_run *g = c->run;

	if (c->cbe != NULL)
		evbuffer_remove_cb_entry(c->out, c->cbe);
	sse_queued -= c->queued;
	if (c->evict)
		sse_evicting -= c->queued;
	TAILQ_REMOVE(&g->clients, c, entry);
	g->nclients--;
	sse_streams--;
	free(c);
	if (g->nclients == 0 && !g->hold)
		sse_run_free(g);
}

/* After a loop that held g: free it when its last client left meanwhile.
 * Returns 0 when g lives on. */
static int
sse_release(struct sse_run *g)
{
	g->hold = 0;
	if (g->nclients > 0)
		return 0;
	sse_run_free(g);
	return -1;
}

/* The client went away. */
static void
sse_client_gone(struct evhttp_connection *conn, void *arg)
{
	struct sse_client *c = arg;

	httpd_request_orphan(c->req);
	sse_client_free(c);
}

/* End c's stream cleanly (after its terminal event) and free it. */
static void
sse_client_end(struct sse_client *c)
{
	evhttp_connection_set_closecb(evhttp_request_get_connection(c->req), NULL, NULL);
	evhttp_send_reply_end(c->req);
	sse_client_free(c);
}

/* Drop a client that does not read: close its connection. */
static void
sse_client_drop(struct sse_client *c)
{
	struct evhttp_connection *conn = evhttp_request_get_connection(c->req);

	log_debug("stream of run %s: a client stopped reading, dropped", c->run->id);
	evhttp_connection_set_closecb(conn, NULL, NULL);
	sse_client_free(c);
	evhttp_connection_free(conn);
}

static time_t
sse_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec;
}

/* Whether SSE_OUTBUF_MAX bytes already wait to be written to c. */
static int
sse_full(struct sse_client *c)
{
	struct bufferevent *bev =
	    evhttp_connection_get_bufferevent(evhttp_request_get_connection(c->req));

	return bev != NULL && evbuffer_get_length(bufferevent_get_output(bev)) > SSE_OUTBUF_MAX;
}

/* c's output changed: the count of all follows. */
static void
sse_out_cb(struct evbuffer *b, const struct evbuffer_cb_info *info, void *arg)
{
	struct sse_client *c = arg;
	size_t now = info->orig_size + info->n_added - info->n_deleted;

	(void)b;
	if (now == 0)
		c->waiting_ms = 0;
	else if (c->queued == 0 || info->n_deleted > 0)
		c->waiting_ms = mono_ms();
	sse_queued = sse_queued - c->queued + now;
	if (c->evict)
		sse_evicting = sse_evicting - c->queued + now;
	c->queued = now;
}

/* The clients marked for the cap are closed (from the loop: they may be
 * next in a loop over their group when they are marked). */
static void
sse_evict_run(evutil_socket_t fd, short what, void *arg)
{
	struct sse_run *g, *gnext;
	struct sse_client *c, *next;
	unsigned n = 0;

	(void)fd;
	(void)what;
	(void)arg;
	for (g = LIST_FIRST(&runs); g != NULL; g = gnext) {
		gnext = LIST_NEXT(g, entry);
		g->hold = 1;
		for (c = TAILQ_FIRST(&g->clients); c != NULL; c = next) {
			next = TAILQ_NEXT(c, entry);
			if (c->evict) {
				sse_client_drop(c);
				n++;
			}
		}
		sse_release(g);
	}
	if (n > 0)
		log_info("event streams: %u clients that read nothing for longest were closed "
		         "(api.sse_queued_max)", n);
}

/* Whether x has gone longer than y without reading what it holds (the
 * larger holding first when both began waiting in the same ms). */
static int
sse_staler(const struct sse_client *x, const struct sse_client *y)
{
	return x->waiting_ms < y->waiting_ms ||
	       (x->waiting_ms == y->waiting_ms && x->queued > y->queued);
}

/* Room for len more bytes for c under api.sse_queued_max: 0, or -1 when c
 * itself has gone longest without reading. */
static int
sse_make_room(struct sse_client *c, size_t len)
{
	struct sse_run *g;
	struct sse_client *x, *stale;

	while (sse_queued - sse_evicting + len > sse_queued_max) {
		stale = NULL;
		LIST_FOREACH(g, &runs, entry)
			TAILQ_FOREACH(x, &g->clients, entry)
				if (x != c && !x->evict && x->queued > 0 &&
				    (stale == NULL || sse_staler(x, stale)))
					stale = x;
		if (stale == NULL || (c->queued > 0 && !sse_staler(stale, c)))
			return -1;
		stale->evict = 1;
		sse_evicting += stale->queued;
		if (sse_evict_ev == NULL &&
		    (sse_evict_ev = event_new(httpd_child()->base, -1, 0, sse_evict_run, NULL)) ==
		        NULL)
			fatalx("event_new");
		event_active(sse_evict_ev, 0, 0);
	}
	return 0;
}

/* Everything queued for c has been written: it may take more. */
static void
sse_client_flushed(struct evhttp_connection *conn, void *arg)
{
	struct sse_client *c = arg;

	if (c->full_since == 0)
		return;
	c->full_since = 0;
	sse_replay(c->run);
}

/*
 * Queue text for c: 0, or 1 when c's output is full (nothing queued; the
 * client catches up from its seq once it has drained what it has, which
 * sse_client_flushed hears).  A replay writes a whole page in one go, far
 * faster than any socket drains, so a full buffer is the usual case for a
 * client that is catching up, not a sign it stopped reading.
 */
static int
sse_write(struct sse_client *c, struct evbuffer *text)
{
	if (c->evict)
		return 1; /* being closed */
	if (sse_full(c) || sse_make_room(c, evbuffer_get_length(text)) == -1) {
		if (c->full_since == 0)
			c->full_since = sse_now();
		return 1;
	}
	evhttp_send_reply_chunk_with_cb(c->req, text, sse_client_flushed, c);
	return 0;
}

static void
sse_heartbeat(struct sse_run *g)
{
	struct sse_client *c, *next;
	struct evbuffer *b;

	g->hold = 1;
	for (c = TAILQ_FIRST(&g->clients); c != NULL; c = next) {
		next = TAILQ_NEXT(c, entry);
		if (c->full_since != 0 && sse_now() - c->full_since >= SSE_STALL_SECS) {
			sse_client_drop(c);
			continue;
		}
		if ((b = evbuffer_new()) == NULL)
			fatalx("out of memory");
		evbuffer_add(b, ":\n\n", 3);
		sse_write(c, b);
		evbuffer_free(b);
	}
}

static void
sse_tick(evutil_socket_t fd, short what, void *arg)
{
	struct sse_run *g = arg;

	if (++g->ticks % SSE_HEARTBEAT_TICKS == 0) {
		sse_heartbeat(g);
		if (sse_release(g) == -1)
			return;
	}
	sse_replay(g);
}

/*
 * One replay's rows: seq, type, payload, final.  Each event goes to the
 * clients that do not have it; a final event ends their streams.
 */
static void
sse_replay_done(struct child *ch, const struct ipc_db_result *r, void *arg)
{
	struct sse_run *g = arg;
	struct sse_client *c, *next;
	struct ipc_cur rows = r != NULL ? r->rows : (struct ipc_cur){0}, row;
	const char *seqs, *type, *payload, *final;
	size_t seqlen, typelen, paylen, finlen;
	char num[24];
	uint64_t seq;
	uint32_t i;
	struct evbuffer *b, *text;
	const unsigned char *line;
	size_t linelen;

	g->dbid = 0;
	if (r == NULL || r->code != DB_OK || (r->nrows > 0 && r->ncols != 4)) {
		if (r != NULL)
			log_warnx("stream of run %s: replay failed: %.*s", g->id, (int)r->errlen,
			          r->error);
		return; /* the next tick tries again */
	}
	if ((text = evbuffer_new()) == NULL)
		fatalx("out of memory");
	g->hold = 1;
	for (i = 0; i < r->nrows; i++) {
		if (ipc_get_array(&rows, &row, 4) == -1 ||
		    ipc_get_str(&row, &seqs, &seqlen, 20) == -1 ||
		    ipc_get_str(&row, &type, &typelen, 64) == -1 ||
		    ipc_get_str(&row, &payload, &paylen, SIZE_MAX) == -1 ||
		    ipc_get_str(&row, &final, &finlen, 5) == -1 || seqlen >= sizeof(num)) {
			log_warnx("stream of run %s: a malformed event row", g->id);
			evbuffer_free(text);
			sse_release(g);
			return;
		}
		memcpy(num, seqs, seqlen);
		num[seqlen] = '\0';
		if (router_uint(num, INT64_MAX, &seq) == -1 ||
		    memchr(payload, '\n', paylen) != NULL || memchr(type, '\n', typelen) != NULL) {
			log_warnx("stream of run %s: a malformed event row", g->id);
			evbuffer_free(text);
			sse_release(g);
			return;
		}
		if (seq > g->seen)
			g->seen = seq;
		/* the event's text once, for every client that needs it */
		evbuffer_drain(text, evbuffer_get_length(text));
		evbuffer_add_printf(text, "id: %s\nevent: %.*s\ndata: %.*s\n\n", num, (int)typelen,
		                    type, (int)paylen, payload);
		line = evbuffer_pullup(text, -1);
		linelen = evbuffer_get_length(text);
		for (c = TAILQ_FIRST(&g->clients); c != NULL; c = next) {
			next = TAILQ_NEXT(c, entry);
			if (seq <= c->after || c->full_since != 0)
				continue; /* has it, or waits for its flush */
			if (c->after < g->from) {
				/* joined after this replay was asked for: the
				 * rows start above its seq, and sending them
				 * would leave a hole.  The next replay starts
				 * from it. */
				g->again = 1;
				continue;
			}
			if ((b = evbuffer_new()) == NULL)
				fatalx("out of memory");
			evbuffer_add(b, line, linelen);
			if (sse_write(c, b) == 0) {
				c->after = seq;
				if (finlen == 4 && memcmp(final, "true", 4) == 0)
					sse_client_end(c);
			}
			evbuffer_free(b);
		}
	}
	evbuffer_free(text);
	if (sse_release(g) == -1)
		return;
	if (r->nrows == SSE_PAGE || g->again) {
		g->again = 0;
		sse_replay(g);
	}
}

static void
sse_replay(struct sse_run *g)
{
	struct child *ch = httpd_child();
	struct sse_client *c;
	struct ipc_wbuf w;
	uint64_t from = UINT64_MAX, id;

	if (g->dbid != 0) {
		g->again = 1;
		return;
	}
	/* full clients wait for their flush; reading again for them now
	 * would only read the same events again */
	TAILQ_FOREACH(c, &g->clients, entry)
	if (c->full_since == 0 && c->after < from)
		from = c->after;
	if (from == UINT64_MAX)
		return;
	id = child_db_begin(ch, &w, "httpd_stream_events", 3);
	ipc_put_str(&w, g->id);
	ipc_put_i64(&w, (int64_t)from);
	ipc_put_i64(&w, SSE_PAGE);
	if (child_db_send(ch, &w, id, sse_replay_done, g) == 0) {
		g->dbid = id;
		g->from = from;
	}
}

void
sse_wake(const char *run, uint64_t seq)
{
	struct sse_run *g;

	if (run[0] == '\0') {
		LIST_FOREACH(g, &runs, entry)
		sse_replay(g);
		return;
	}
	if ((g = sse_find(run)) != NULL && seq > g->seen)
		sse_replay(g);
}

/* Join the group of h's run as a client that has everything up to after. */
static void
sse_join(struct hreq *h, uint64_t after)
{
	struct timeval tick = {SSE_REPLAY_SECS, 0}, forever = {SSE_STREAM_TIMEOUT_SECS, 0};
	struct evhttp_request *req;
	struct evkeyvalq *out;
	struct sse_client *c;
	struct sse_run *g;
	struct evbuffer *b;
	char id[HTTPD_UUID_LEN + 1];

	snprintf(id, sizeof(id), "%.36s", h->param);
	out = evhttp_request_get_output_headers(h->req);
	evhttp_add_header(out, "Content-Type", "text/event-stream");
	evhttp_add_header(out, "Cache-Control", "no-store");
	evhttp_add_header(out, "X-Accel-Buffering", "no");
	req = hreq_detach(h);
	if (req == NULL)
		return;
	if ((g = sse_find(id)) == NULL) {
		if ((g = calloc(1, sizeof(*g))) == NULL)
			fatal("calloc");
		memcpy(g->id, id, sizeof(g->id));
		TAILQ_INIT(&g->clients);
		if ((g->timer = event_new(httpd_child()->base, -1, EV_PERSIST, sse_tick, g)) ==
		        NULL ||
		    event_add(g->timer, &tick) == -1)
			fatalx("event_new");
		LIST_INSERT_HEAD(&runs, g, entry);
	}
	if ((c = calloc(1, sizeof(*c))) == NULL)
		fatal("calloc");
	c->run = g;
	c->req = req;
	c->after = after;
	TAILQ_INSERT_TAIL(&g->clients, c, entry);
	g->nclients++;
	sse_streams++;
	evhttp_connection_set_timeout_tv(evhttp_request_get_connection(req), &forever);
	evhttp_connection_set_closecb(evhttp_request_get_connection(req), sse_client_gone, c);
	evhttp_send_reply_start(req, 200, "OK");
	{
		struct bufferevent *bev =
		    evhttp_connection_get_bufferevent(evhttp_request_get_connection(req));

		if (bev != NULL) {
			c->out = bufferevent_get_output(bev);
			c->queued = evbuffer_get_length(c->out);
			c->waiting_ms = c->queued > 0 ? mono_ms() : 0;
			sse_queued += c->queued;
			if ((c->cbe = evbuffer_add_cb(c->out, sse_out_cb, c)) == NULL)
				fatalx("evbuffer_add_cb");
		}
	}
	if ((b = evbuffer_new()) == NULL)
		fatalx("out of memory");
	evbuffer_add_printf(b, "retry: %d\n\n", SSE_RETRY_MS);
	sse_write(c, b);
	sse_replay(g);
	evbuffer_free(b);
}

/* The check at connect: httpd_run_events with limit 0. */
static void
sse_check_done(struct hreq *h, const struct ipc_db_result *r)
{
	json_t *rows, *env, *body;
	uint64_t after = 0, last;
	const char *lei;

	if (!hreq_db_ok(h, r) || (rows = hreq_db_rows(h, r)) == NULL)
		return;
	env = json_array_get(rows, 0);
	body = json_object_get(env, "body");
	if (body == NULL || json_integer_value(json_object_get(env, "status")) != 200 ||
	    router_role_rank(json_string_value(json_object_get(env, "role"))) < API_ROLE_VIEWER) {
		json_decref(rows);
		api_envelope_done(h, r);
		return;
	}
	last = (uint64_t)json_integer_value(json_object_get(body, "last_seq"));
	lei = evhttp_find_header(evhttp_request_get_input_headers(h->req), "Last-Event-ID");
	if (lei == NULL)
		lei = api_query(h, "after");
	if (lei != NULL)
		(void)router_uint(lei, INT64_MAX, &after); /* checked in api_run_stream */
	if (after > last) {
		json_decref(rows);
		hreq_error(h, 400, "invalid_query", "the run has no event with that seq yet");
		return;
	}
	if (json_is_true(json_object_get(body, "finished")) && after == last) {
		json_decref(rows);
		evhttp_send_reply(h->req, 204, "No Content", NULL);
		hreq_done(h);
		return;
	}
	json_decref(rows);
	sse_join(h, after);
}

/* GET /v1/runs/{id}/events/stream; Last-Event-ID or ?after= resumes. */
void
api_run_stream(struct hreq *h)
{
	const char *lei = evhttp_find_header(evhttp_request_get_input_headers(h->req),
	                                     "Last-Event-ID");
	uint64_t after = 0, id;
	struct ipc_wbuf w;

	if (evhttp_request_get_command(h->req) == EVHTTP_REQ_HEAD) {
		evhttp_add_header(evhttp_request_get_output_headers(h->req), "Allow", "GET");
		hreq_error(h, 405, "method_not_allowed", "a stream is read with GET");
		return;
	}
	if (lei != NULL && router_uint(lei, INT64_MAX, &after) == -1) {
		hreq_error(h, 400, "invalid_header",
		           "Last-Event-ID must be an event's seq (a non-negative integer)");
		return;
	}
	if (lei == NULL && api_query_uint(h, "after", INT64_MAX, 0, &after) == -1)
		return;
	id = api_call_begin(h, &w, "httpd_run_events", 1, 2);
	ipc_put_i64(&w, 0);
	ipc_put_i64(&w, 0);
	hreq_db_send(h, &w, id, sse_check_done);
}
