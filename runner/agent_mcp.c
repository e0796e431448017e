/*
 * agent_mcp: the MCP servers of an agent step (DESIGN.md section 4.2).
 *
 * When an attempt of an agent step begins, each server the step requires
 * (requires.mcp_servers, in the template's order) is asked of the
 * supervisor (MCP_START), which starts the version pinned on the run in a
 * sandbox of its own and hands over the server's channel and the read end
 * of its stderr (MCP_CHANNEL).  The MCP client (mcp.c) speaks to it; once
 * every server has listed its tools, or failed, the step's model calls
 * begin with the tools offered as mcp__SERVER__TOOL, at most
 * agent.mcp_tools_max of them and agent.mcp_tool_bytes_max bytes of their
 * definitions over all the step's servers, in order; the rest are left
 * out, named in one agent.mcp_tools_dropped event per server and a log
 * line.
 *
 * A server the run has not pinned (an optional one its project was not
 * granted) is absent.  A required server that is absent or cannot start
 * fails the attempt with why, and the tail of the server's stderr; an
 * optional one is left out with an agent.mcp_server event saying why.
 *
 * A server whose connection breaks after its start is started again once
 * (the call in flight answers with the error, a call made meanwhile waits
 * for the new one); after a second break its tools answer with an error.
 * A server that says its tools changed is listed again, and when the
 * offered set changes the next model call sends the whole conversation
 * with the new tools.
 *
 * The stderr of each server is read as it comes, and only its last
 * AMCP_STDERR_TAIL bytes are kept: a server that floods it costs reads,
 * never memory.  When the attempt ends every server's channel is closed
 * (the server's EOF) and the supervisor stops its sandbox (MCP_STOP).
 *
 * Results never carry a credential of the server here: the server's
 * sandbox redacts its own on the way out, and the supervisor redacts every
 * credential of every server pinned on the run from all this runner
 * stores.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "common/log.h"
#include "common/mcpspec.h"
#include "runner/core.h"
#include "runner/mcp.h"

#define AMCP_SERVERS_MAX MCPSPEC_STEP_SERVERS_MAX /* servers one step may require */
#define AMCP_STDERR_TAIL 2048    /* bytes of a server's stderr kept */
#define AMCP_WHY_MAX 512         /* bytes of a failure's own reason */
#define AMCP_ERROR_MAX (AMCP_WHY_MAX + 640) /* ... with the stderr tail */

enum amcp_state {
	AS_STARTING,  /* MCP_START sent */
	AS_LISTING,   /* connected, tools being listed */
	AS_READY,
	AS_ABSENT,    /* not pinned on the run */
	AS_FAILED,    /* could not start, or broke twice */
};

struct amcp_server {
	char name[IPC_MCP_NAME_MAX + 1];
	int optional;
	enum amcp_state state;
	uint64_t start_id;        /* MCP_START's id, 0 when none is live */
	int restarted;
	struct mcp_client *c;
	uint32_t startup_ms, call_ms;
	int errfd;
	struct event *errev;
	char tail[AMCP_STDERR_TAIL];
	size_t taillen;           /* bytes in tail (a ring once full) */
	size_t tailpos;
	int tailwrapped;
	struct mcp_tools *tools;  /* the last listing */
	int listing;              /* a tools/list is in flight */
	int relist;               /* ... and the tools changed again meanwhile */
	char why[AMCP_ERROR_MAX]; /* why it failed */
	int settled;              /* counted in the first round */
};

static struct amcp {
	int active;
	struct amcp_server s[AMCP_SERVERS_MAX];
	size_t n;
	size_t settled;
	int begun;               /* the first round is over: ready_cb was called */
	amcp_ready_cb ready_cb;
	amcp_changed_cb changed_cb;
	uint32_t result_max, tools_max, bytes_max;
	json_t *offered;         /* [{def, server index, tool name}] offered now */
	/* the call in flight */
	int calling;
	size_t call_server;
	uint64_t call_handle;
	char *call_tool;
	json_t *call_args;
	int call_waiting;        /* waits for the server's restart */
	amcp_result_cb call_cb;
} am;

static void srv_start(struct amcp_server *s);
static void srv_list(struct amcp_server *s);
static void call_issue(void);

/* ---- stderr -------------------------------------------------------------- */

static void
tail_add(struct amcp_server *s, const char *p, size_t n)
{
	size_t k;

	while (n > 0) {
		k = sizeof(s->tail) - s->tailpos;
		if (k > n)
			k = n;
		memcpy(s->tail + s->tailpos, p, k);
		s->tailpos += k;
		p += k;
		n -= k;
		if (s->tailpos == sizeof(s->tail)) {
			s->tailpos = 0;
			s->tailwrapped = 1;
		}
	}
	s->taillen = s->tailwrapped ? sizeof(s->tail) : s->tailpos;
}

/* The kept tail as one line of printable text (new). */
static char *
tail_text(const struct amcp_server *s)
{
	char *out = malloc(sizeof(s->tail) + 1);
	size_t i, n = 0, start = s->tailwrapped ? s->tailpos : 0;
	char ch;

	if (out == NULL)
		fatal("malloc");
	for (i = 0; i < s->taillen; i++) {
		ch = s->tail[(start + i) % sizeof(s->tail)];
		out[n++] = (ch >= 0x20 && ch < 0x7f) ? ch : (ch == '\n' ? ' ' : '?');
	}
	while (n > 0 && out[n - 1] == ' ')
		n--;
	out[n] = '\0';
	return out;
}

static void
err_read(evutil_socket_t fd, short what, void *arg)
{
	struct amcp_server *s = arg;
	char buf[16384];
	ssize_t n;
	int i;

	for (i = 0; i < 16; i++) {
		n = read(fd, buf, sizeof(buf));
		if (n > 0) {
			tail_add(s, buf, (size_t)n);
			continue;
		}
		if (n == -1 && (errno == EAGAIN || errno == EINTR))
			return;
		/* EOF or an error: the server's stderr is over */
		event_free(s->errev);
		s->errev = NULL;
		close(s->errfd);
		s->errfd = -1;
		return;
	}
}

static void
err_close(struct amcp_server *s)
{
	if (s->errev != NULL)
		event_free(s->errev);
	s->errev = NULL;
	if (s->errfd != -1)
		close(s->errfd);
	s->errfd = -1;
}

/* ---- the servers ---------------------------------------------------------- */

static void
am_event(const char *type, json_t *payload)
{
	json_object_set_new(payload, "step_id", json_string(rn.steps[rn.cur].id));
	json_object_set_new(payload, "attempt", json_integer(rn.attempt));
	runner_event(type, payload);
}

static void
srv_event(struct amcp_server *s, const char *status, const char *why)
{
	json_t *p = json_pack("{s:s, s:s, s:b}", "server", s->name, "status", status, "optional",
	                      s->optional);

	if (why != NULL)
		json_object_set_new(p, "error", json_string(why));
	if (s->c != NULL && mcp_version(s->c) != NULL)
		json_object_set_new(p, "protocol_version", json_string(mcp_version(s->c)));
	am_event("agent.mcp_server", p);
}

/* The server's channel is closed and the supervisor told to stop it. */
static void
srv_close(struct amcp_server *s)
{
	struct ipc_wbuf w;

	if (s->c != NULL) {
		mcp_free(s->c);
		s->c = NULL;
	}
	s->listing = s->relist = 0; /* its requests went with it */
	err_close(s);
	if (s->start_id != 0) {
		ipc_wbuf_begin(&w, IMSG_MCP_STOP, s->start_id, 0);
		if (ipc_wbuf_finish(&w, rn.c.max_frame) == -1 ||
		    ipc_chan_send(rn.c.sup, &w, -1) == -1)
			fatalx("cannot reach the supervisor");
		ipc_wbuf_free(&w);
		s->start_id = 0;
	}
}

static void offered_build(void);
static void offered_again(void);

/* The first round: every server has been heard from once. */
static void
srv_settled(struct amcp_server *s)
{
	if (s->settled)
		return;
	s->settled = 1;
	if (++am.settled < am.n || am.begun)
		return;
	am.begun = 1;
	offered_build();
	am.ready_cb();
}

/* s could not start or went: why, with its stderr's tail. */
static void
srv_fail(struct amcp_server *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void
srv_fail(struct amcp_server *s, const char *fmt, ...)
{
	char why[AMCP_WHY_MAX];
	char *tail;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	/* what is still in the pipe is part of why */
	if (s->errfd != -1)
		err_read(s->errfd, EV_READ, s);
	tail = tail_text(s);
	if (tail[0] != '\0')
		snprintf(s->why, sizeof(s->why), "%s; its stderr ends with: %.512s", why,
		         tail + (strlen(tail) > 512 ? strlen(tail) - 512 : 0));
	else
		snprintf(s->why, sizeof(s->why), "%s", why);
	free(tail);
	srv_close(s);
	s->state = AS_FAILED;
	log_warnx("step %s: mcp server %s: %s", rn.steps[rn.cur].id, s->name, s->why);
	srv_event(s, "failed", s->why);
	if (am.calling && am.call_server == (size_t)(s - am.s) && am.call_waiting)
		call_issue(); /* answered with the error */
	srv_settled(s);
}

static void
cl_ready(void *arg, const char *err)
{
	struct amcp_server *s = arg;

	if (err != NULL) {
		srv_fail(s, "it did not start: %s", err);
		return;
	}
	s->state = AS_LISTING;
	srv_list(s);
}

static void
cl_changed(void *arg)
{
	struct amcp_server *s = arg;

	if (s->state == AS_READY)
		srv_list(s);
}

static void
cl_failed(void *arg, const char *err)
{
	struct amcp_server *s = arg;

	if (s->restarted) {
		srv_fail(s, "its connection broke again: %s", err);
		return;
	}
	log_warnx("step %s: mcp server %s: its connection broke (%s); starting it again",
	          rn.steps[rn.cur].id, s->name, err);
	srv_event(s, "restarting", err);
	s->restarted = 1;
	srv_close(s);
	srv_start(s);
}

static void
listed(void *arg, struct mcp_tools *tools, const char *err)
{
	struct amcp_server *s = arg;

	s->listing = 0;
	if (tools == NULL) {
		if (s->state == AS_LISTING)
			srv_fail(s, "its tools could not be listed: %s", err);
		else if (s->relist)
			srv_list(s);
		return; /* a list again after a change: the old one stays */
	}
	mcp_tools_free(s->tools);
	s->tools = tools;
	if (tools->dropped > 0) {
		log_warnx("step %s: mcp server %s: %zu of its %zu tools are left out",
		          rn.steps[rn.cur].id, s->name, tools->dropped, tools->listed);
		am_event("agent.mcp_tools_dropped",
		             json_pack("{s:s, s:I, s:I, s:O}", "server", s->name, "listed",
		                       (json_int_t)tools->listed, "dropped",
		                       (json_int_t)tools->dropped, "tools",
		                       tools->drops != NULL ? tools->drops : json_array()));
	}
	if (s->state == AS_LISTING) {
		s->state = AS_READY;
		log_info("step %s: mcp server %s: %zu tools (protocol %s)", rn.steps[rn.cur].id,
		         s->name, tools->n, mcp_version(s->c));
		srv_event(s, "ready", NULL);
		if (am.calling && am.call_server == (size_t)(s - am.s) && am.call_waiting)
			call_issue();
		if (!s->settled) {
			srv_settled(s);
			return;
		}
	}
	offered_again();
	/* changed again while this one was asked for: taken as it is (a
	 * server that never stops changing still gets its tools offered),
	 * and asked for once more */
	if (s->relist && s->state == AS_READY)
		srv_list(s);
}

/* Lists s's tools; a change notified while a listing is in flight asks for
 * one more once it is answered, however many came: a server cannot keep
 * more than one listing (and its work, and its events) going at a time. */
static void
srv_list(struct amcp_server *s)
{
	if (s->listing) {
		s->relist = 1;
		return;
	}
	s->listing = 1;
	s->relist = 0;
	mcp_list_tools(s->c, listed, s);
}

static void
srv_start(struct amcp_server *s)
{
	struct ipc_wbuf w;

	s->state = AS_STARTING;
	s->start_id = runner_req_id();
	s->taillen = s->tailpos = 0;
	s->tailwrapped = 0;
	ipc_wbuf_begin(&w, IMSG_MCP_START, s->start_id, 2);
	ipc_put_str(&w, s->name);
	ipc_put_str(&w, rn.steps[rn.cur].id);
	if (ipc_wbuf_finish(&w, rn.c.max_frame) == -1 || ipc_chan_send(rn.c.sup, &w, -1) == -1)
		fatalx("cannot reach the supervisor");
	ipc_wbuf_free(&w);
}

static struct amcp_server *
srv_by_start(uint64_t id)
{
	size_t i;

	for (i = 0; i < am.n; i++)
		if (am.s[i].start_id == id && id != 0)
			return &am.s[i];
	return NULL;
}

static void
got_channel(struct amcp_server *s, struct ipc_msg *m, const struct ipc_mcp_channel *ch)
{
	struct mcp_conf conf;
	struct mcp_events evs;

	if (s->state != AS_STARTING || (ch->what == IPC_MCP_FD_CHANNEL && s->c != NULL) ||
	    (ch->what == IPC_MCP_FD_STDERR && s->errfd != -1))
		fatalx("the supervisor sent an MCP server's descriptor twice");
	if (ch->what == IPC_MCP_FD_STDERR) {
		s->errfd = m->fd;
		m->fd = -1;
		if (fcntl(s->errfd, F_SETFL, fcntl(s->errfd, F_GETFL) | O_NONBLOCK) == -1)
			fatal("fcntl");
		if ((s->errev = event_new(rn.c.base, s->errfd, EV_READ | EV_PERSIST, err_read, s)) ==
		        NULL ||
		    event_add(s->errev, NULL) == -1)
			fatalx("event_new");
		return;
	}
	s->startup_ms = ch->startup_ms;
	s->call_ms = ch->call_ms;
	memset(&conf, 0, sizeof(conf));
	conf.server = s->name;
	conf.tools_max = am.tools_max > 0 ? am.tools_max : 1;
	conf.tool_bytes_max = am.bytes_max;
	conf.result_max = am.result_max;
	conf.start_ms = ch->startup_ms;
	conf.call_ms = ch->call_ms;
	conf.call_max_ms = ch->call_ms > MCP_CALL_MAX_MS_DEFAULT ? ch->call_ms
	                                                         : MCP_CALL_MAX_MS_DEFAULT;
	memset(&evs, 0, sizeof(evs));
	evs.ready = cl_ready;
	evs.tools_changed = cl_changed;
	evs.failed = cl_failed;
	s->c = mcp_new(rn.c.base, m->fd, m->fd, &conf, &evs, s);
	m->fd = -1;
	if (s->c == NULL)
		fatalx("mcp_new");
}

int
amcp_sup_msg(struct ipc_msg *m)
{
	struct amcp_server *s;
	struct ipc_mcp_channel ch;
	struct ipc_mcp_failed f;
	char why[IPC_ERRMSG_MAX + 1];

	if (m->type != IMSG_MCP_CHANNEL && m->type != IMSG_MCP_FAILED)
		return 0;
	if ((s = srv_by_start(m->id)) == NULL)
		return 1; /* of a server already given up */
	if (m->type == IMSG_MCP_CHANNEL) {
		if (ipc_dec_mcp_channel(m->body, &ch) == -1 || m->fd < 0)
			fatalx("a bad MCP_CHANNEL");
		got_channel(s, m, &ch);
		return 1;
	}
	if (ipc_dec_mcp_failed(m->body, &f) == -1)
		fatalx("a bad MCP_FAILED");
	snprintf(why, sizeof(why), "%.*s", (int)f.errlen, f.error);
	s->start_id = 0; /* nothing of it runs */
	if (f.absent && !s->restarted) {
		err_close(s);
		s->state = AS_ABSENT;
		snprintf(s->why, sizeof(s->why), "%s", why);
		log_info("step %s: %s", rn.steps[rn.cur].id, why);
		srv_event(s, "absent", why);
		srv_settled(s);
		return 1;
	}
	srv_fail(s, "%s", why);
	return 1;
}

/* ---- what the model is offered -------------------------------------------- */

static json_t *offered_find(const char *name);

/* The offered set, again: every ready server's tools, in order, under the
 * step's caps. */
static void
offered_build(void)
{
	json_t *drops;
	size_t i, j, bytes = 0, count = 0, len;

	json_decref(am.offered);
	am.offered = json_array();
	for (i = 0; i < am.n; i++) {
		struct amcp_server *s = &am.s[i];

		/* a server that broke keeps its tools: they answer with an error */
		if (s->tools == NULL)
			continue;
		drops = NULL;
		for (j = 0; j < s->tools->n; j++) {
			len = s->tools->v[j].def_bytes;
			if (count >= am.tools_max || bytes + len > am.bytes_max) {
				if (drops == NULL)
					drops = json_array();
				if (json_array_size(drops) < 64)
					json_array_append_new(drops, json_pack("{s:s, s:s}", "name",
					    s->tools->v[j].name, "reason", count >= am.tools_max ?
					    "over agent.mcp_tools_max" : "over agent.mcp_tool_bytes_max"));
				continue;
			}
			/* server a__b's tool c and server a's tool b__c are both
			 * mcp__a__b__c: the first offered keeps the name */
			if (offered_find(json_string_value(
			        json_object_get(s->tools->v[j].def, "name"))) != NULL) {
				if (drops == NULL)
					drops = json_array();
				if (json_array_size(drops) < 64)
					json_array_append_new(drops, json_pack("{s:s, s:s}", "name",
					    s->tools->v[j].name, "reason",
					    "another server's tool has the same model name"));
				continue;
			}
			count++;
			bytes += len;
			json_array_append_new(am.offered, json_pack("{s:O, s:I, s:s}", "def",
			    s->tools->v[j].def, "server", (json_int_t)i, "tool", s->tools->v[j].name));
		}
		if (drops != NULL) {
			log_warnx("step %s: mcp server %s: %zu of its tools are left out "
			          "(agent.mcp_tools_dropped)", rn.steps[rn.cur].id, s->name,
			          json_array_size(drops));
			am_event("agent.mcp_tools_dropped",
			             json_pack("{s:s, s:I, s:I, s:o}", "server", s->name, "listed",
			                       (json_int_t)s->tools->n, "dropped",
			                       (json_int_t)json_array_size(drops), "tools", drops));
		}
	}
}

/* After a listing once the step began: the model is told only when what
 * it is offered changed. */
static void
offered_again(void)
{
	json_t *before;

	if (!am.begun || am.changed_cb == NULL)
		return;
	before = json_incref(am.offered);
	offered_build();
	if (!json_equal(before, am.offered)) {
		log_info("step %s: the MCP tools offered changed (%zu now)", rn.steps[rn.cur].id,
		         json_array_size(am.offered));
		am.changed_cb();
	}
	json_decref(before);
}

void
amcp_add_tools(json_t *tools)
{
	json_t *o;
	size_t i;

	json_array_foreach(am.offered, i, o)
		json_array_append(tools, json_object_get(o, "def"));
}

/* The offered entry of model name name, or NULL. */
static json_t *
offered_find(const char *name)
{
	json_t *o;
	size_t i;

	json_array_foreach(am.offered, i, o)
		if (strcmp(json_string_value(json_object_get(json_object_get(o, "def"), "name")),
		           name) == 0)
			return o;
	return NULL;
}

const char *
amcp_server_of(const char *name)
{
	json_t *o;

	if (!am.active || strncmp(name, "mcp__", 5) != 0 || (o = offered_find(name)) == NULL)
		return NULL;
	return am.s[json_integer_value(json_object_get(o, "server"))].name;
}

/* ---- calls ------------------------------------------------------------------ */

/* The images of res the model is given (new), or NULL: those res kept
 * (under MCP_IMAGES_MAX and MCP_IMAGES_BYTES), which its text describes as
 * shown. */
static json_t *
result_images(const struct mcp_result *res)
{
	json_t *out = NULL, *b;
	size_t i;

	if (res->images == 0)
		return NULL;
	json_array_foreach(res->content, i, b)
	{
		if (!json_is_string(json_object_get(b, "type")) ||
		    strcmp(json_string_value(json_object_get(b, "type")), "image") != 0)
			continue;
		if (out == NULL)
			out = json_array();
		json_array_append(out, b);
	}
	return out;
}

static void
call_done(void *arg, uint64_t call, struct mcp_result *res)
{
	amcp_result_cb cb = am.call_cb;
	struct amcp_server *s = &am.s[am.call_server];

	(void)arg;
	if (!am.calling || call != am.call_handle) {
		mcp_result_free(res);
		return;
	}
	am.calling = 0;
	free(am.call_tool);
	am.call_tool = NULL;
	json_decref(am.call_args);
	am.call_args = NULL;
	cb(s->name, res->text, res->text_len, res->is_error, result_images(res));
	mcp_result_free(res);
}

static void
call_issue(void)
{
	struct amcp_server *s = &am.s[am.call_server];
	struct mcp_result *res;
	char why[AMCP_ERROR_MAX + 128];

	if (s->state == AS_STARTING || s->state == AS_LISTING) {
		am.call_waiting = 1;
		return;
	}
	am.call_waiting = 0;
	if (s->state != AS_READY) {
		snprintf(why, sizeof(why), "the MCP server %s is not available: %s", s->name,
		         s->why[0] != '\0' ? s->why : "it is gone");
		res = mcp_result_error(why, am.result_max);
		am.call_handle = 0;
		call_done(NULL, 0, res);
		return;
	}
	am.call_handle = mcp_call(s->c, am.call_tool, am.call_args, call_done, NULL);
}

int
amcp_call(const char *name, json_t *input, amcp_result_cb cb)
{
	json_t *o;

	if (!am.active || (o = offered_find(name)) == NULL)
		return -1;
	am.calling = 1;
	am.call_server = (size_t)json_integer_value(json_object_get(o, "server"));
	if ((am.call_tool = strdup(json_string_value(json_object_get(o, "tool")))) == NULL)
		fatal("strdup");
	am.call_args = json_incref(input);
	am.call_cb = cb;
	call_issue();
	return 0;
}

void
amcp_cancel(void)
{
	struct amcp_server *s;

	if (!am.calling)
		return;
	s = &am.s[am.call_server];
	if (am.call_waiting) {
		struct mcp_result *res = mcp_result_error("cancelled", am.result_max);

		am.call_waiting = 0;
		am.call_handle = 0;
		call_done(NULL, 0, res);
		return;
	}
	if (s->c != NULL)
		mcp_cancel(s->c, am.call_handle);
}

/* ---- the step's servers ------------------------------------------------------ */

int
amcp_begin(json_t *requires, const struct amcp_conf *conf, amcp_ready_cb ready,
           amcp_changed_cb changed, char *err, size_t errsz)
{
	json_t *r;
	size_t i;

	amcp_end();
	memset(&am, 0, sizeof(am));
	am.ready_cb = ready;
	am.changed_cb = changed;
	am.result_max = conf->result_max;
	am.tools_max = conf->tools_max;
	am.bytes_max = conf->bytes_max;
	if (json_array_size(requires) > AMCP_SERVERS_MAX) {
		snprintf(err, errsz, "the step requires %zu MCP servers; at most %d can run for "
		         "one step", json_array_size(requires), AMCP_SERVERS_MAX);
		return -1;
	}
	json_array_foreach(requires, i, r) {
		struct amcp_server *s = &am.s[am.n];
		const char *name = runner_jstr(r, "name", "");
		size_t k;

		if (name[0] == '\0' || strlen(name) > IPC_MCP_NAME_MAX) {
			snprintf(err, errsz, "requires.mcp_servers[%zu] has no usable name", i);
			return -1;
		}
		for (k = 0; k < am.n; k++)
			if (strcmp(am.s[k].name, name) == 0)
				break;
		if (k < am.n)
			continue; /* named twice: once is enough */
		snprintf(s->name, sizeof(s->name), "%s", name);
		s->optional = json_is_true(json_object_get(r, "optional"));
		s->errfd = -1;
		am.n++;
	}
	/* made once requires passed: amcp_end frees it, and only an active am */
	am.offered = json_array();
	am.active = 1;
	if (am.n == 0) {
		am.begun = 1;
		return 0;
	}
	for (i = 0; i < am.n; i++)
		srv_start(&am.s[i]);
	return 1;
}

/* A required server that did not start, or NULL. */
const char *
amcp_missing(void)
{
	static char why[AMCP_ERROR_MAX + 128];
	size_t i;

	for (i = 0; i < am.n; i++)
		if (!am.s[i].optional && (am.s[i].state == AS_ABSENT || am.s[i].state == AS_FAILED)) {
			snprintf(why, sizeof(why), "the required MCP server %s %s: %s", am.s[i].name,
			         am.s[i].state == AS_ABSENT ? "is absent" : "failed", am.s[i].why);
			return why;
		}
	return NULL;
}

void
amcp_end(void)
{
	size_t i;

	if (!am.active)
		return;
	for (i = 0; i < am.n; i++) {
		srv_close(&am.s[i]);
		mcp_tools_free(am.s[i].tools);
		am.s[i].tools = NULL;
	}
	free(am.call_tool);
	json_decref(am.call_args);
	json_decref(am.offered);
	memset(&am, 0, sizeof(am));
}
