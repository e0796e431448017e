/*
 * agent: the agent step kind, a tool-use loop.  The model is reached over
 * the model channel to the proxy (RUNNER_PROXY), the tools through the
 * run's sandbox; the conversation is stored after every model answer and
 * every round of tool results, so that a runner killed mid-step resumes it.
 *
 * One turn: the conversation so far goes to the proxy (MODEL_CALL) with the
 * most the call may cost, what is left of the attempt's reservation; the
 * proxy refuses a call whose worst case exceeds it, and the step then
 * stops with budget.exceeded.  The answer is stored (agent_turn) with its
 * events; its tool calls run one after another in the sandbox, and their
 * results, truncated with a marker, make the next user message, stored
 * again (grown by one) after each result.  An answer without tool calls
 * ends the step.
 *
 * The session is named STEP.ATTEMPT after the attempt that began it.  An
 * attempt that takes over a crashed one loads its messages and goes on
 * from the last: model answers already paid for are not asked again, and
 * tool calls already answered are not run again.  The call that was
 * running when the runner died is run again, except bash, whose effects
 * may be half done: the model is told it was interrupted instead.
 */
#include <errno.h>
#include <event2/event.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "runner/core.h"

#define AGENT_ID_BASE (1ull << 45)   /* ids of the agent's sandbox requests */
#define AGENT_EVENT_TEXT_MAX 16384    /* bytes of model text in one agent.message */
#define AGENT_EVENT_RESULT_MAX 4096   /* bytes of a tool result in agent.tool_result */
#define AGENT_LIST_MAX 1000           /* entries list_dir and glob return */
#define AGENT_GREP_MAX 500            /* lines grep returns */
#define AGENT_STORES_AHEAD 4          /* stores the loop runs ahead of */
#define AGENT_PROXY_WAIT_SECS 60      /* for a new model channel once the proxy is gone */
#define AGENT_ROUND_SLACK 16384       /* room kept in a round's message for its framing */

struct agent_step {
	const char *step, *phase;
	int attempt;
	const char *prompt;     /* ${params} expanded */
	int max_turns;
	int readonly;           /* access: readOnly (no bash) */
	json_t *produces;       /* the step's contract (borrowed) */
	json_t *skills;         /* names of the step's skills (borrowed) */
	json_t *mcp;            /* the step's requires.mcp_servers (borrowed), or NULL */
	int64_t reserved;       /* the attempt's reservation, micro-dollars */
	const char *resume;     /* the session of the attempt this one takes over, or NULL */
};

enum agent_state { AG_IDLE, AG_LOADING, AG_CALLING, AG_TOOLS, AG_STORING, AG_DONE };

static struct agent {
	struct ipc_chan *proxy;
	int proxy_gone;
	int proxy_waiting;      /* the call waits for a new model channel */
	int mcp_starting;       /* the step's MCP servers are starting (amcp_begin) */
	struct event *proxy_wait_ev;
	struct ipc_runner_proxy conf;
	int have_conf;
	/* the step */
	struct agent_step a;
	char session[96];
	char *prompt;           /* the step's prompt (owned) */
	int resume;             /* take over the session of a crashed attempt */
	json_t *messages;       /* the conversation (neutral format) */
	json_t *system;         /* the system prompt (string) */
	json_t *tools;
	int tools_stale;        /* the MCP tools changed: the next call sends all again */
	char *skills_text;
	int turns;              /* model answers so far */
	int stores;             /* agent_turn operations in flight */
	size_t proxy_has;       /* messages of the conversation the proxy holds */
	size_t sent;            /* messages the call in flight brings it to */
	int64_t spent;          /* by this attempt, micro-dollars */
	enum agent_state state;
	uint64_t call_id;
	/* the tool round */
	json_t *calls;          /* the answer's tool_use blocks */
	json_t *results;        /* tool_result blocks so far */
	json_t *badargs;        /* ids of this answer's calls whose arguments were no object */
	size_t tool_cur;
	size_t round_seq;       /* the seq of the round's results message */
	size_t round_len;       /* its bytes as last stored */
	int resuming;           /* the next call may have been interrupted: no bash */
	uint64_t sbx_id;
	int exec_running;
	char *out;              /* bash output */
	size_t outlen, outtotal;
} ag;

static void agent_turn(void);
static void tool_next(void);
static void tools_build(void);

/* ---- helpers ------------------------------------------------------------- */

/* The attempt ended with status (error NULL when none; extra consumed);
 * no_retry: the step is over even if it has retries left (its budget is
 * spent). */
static void
agent_end(const char *status, const char *error, json_t *extra, int no_retry)
{
	rn.no_retry = no_retry;
	if (strcmp(status, "cancelled") == 0) {
		json_decref(extra);
		runner_attempt_over("cancelled", -1, "cancelled", NULL);
		return;
	}
	runner_attempt_over(status, -1, error, extra);
}

static void
agent_over(const char *status, const char *error, json_t *extra, int no_retry)
{
	ag.state = AG_DONE;
	amcp_end();
	json_decref(ag.messages);
	json_decref(ag.calls);
	json_decref(ag.results);
	json_decref(ag.system);
	json_decref(ag.tools);
	json_decref(ag.badargs);
	ag.badargs = NULL;
	free(ag.skills_text);
	free(ag.out);
	free(ag.prompt);
	ag.prompt = NULL;
	ag.messages = ag.calls = ag.results = ag.system = ag.tools = NULL;
	ag.skills_text = ag.out = NULL;
	if (extra == NULL)
		extra = json_object();
	json_object_set_new(extra, "turns", json_integer(ag.turns));
	json_object_set_new(extra, "spent_usd_micros", json_integer(ag.spent));
	json_object_set_new(extra, "session", json_string(ag.session));
	agent_end(status, error, extra, no_retry);
}

/* A string of at most max bytes of p (cut at a UTF-8 boundary), and
 * whether it was cut; bytes that are not UTF-8 become U+FFFD, as in a
 * command's output events. */
static json_t *
text_cut(const char *p, size_t len, size_t max, int *cut)
{
	size_t used;

	*cut = len > max;
	if (len > max) {
		len = max;
		while (len > 0 && ((unsigned char)p[len] & 0xc0) == 0x80)
			len--;
	}
	return runner_utf8_text((const unsigned char *)p, len, 1, &used);
}

/* A tool result's text for the model: at most tool_output_max bytes, and
 * no more than leaves its round's message room to be stored (one message is
 * at most IPC_DB_ARG_MAX bytes; escaping may double a text), with a marker
 * saying how much was left out. */
static json_t *
result_text(const char *p, size_t len, size_t total)
{
	size_t max = ag.conf.tool_output_max, room = 0;
	json_t *s;
	int cut;
	char *buf;

	if (ag.round_len + AGENT_ROUND_SLACK < IPC_DB_ARG_MAX)
		room = (IPC_DB_ARG_MAX - ag.round_len - AGENT_ROUND_SLACK) / 2;
	if (max > room)
		max = room;
	s = text_cut(p, len, max, &cut);
	if (!cut && total <= len)
		return s;
	if (asprintf(&buf, "%s\n[truncated: the first %zu of %zu bytes are shown]",
	        json_string_value(s), strlen(json_string_value(s)), total > len ? total : len) == -1)
		fatalx("out of memory");
	json_decref(s);
	s = json_string(buf);
	free(buf);
	return s;
}

static json_t *
ev(const char *type, json_t *payload)
{
	json_object_set_new(payload, "step_id", json_string(ag.a.step));
	json_object_set_new(payload, "attempt", json_integer(ag.a.attempt));
	json_object_set_new(payload, "turn", json_integer(ag.turns));
	return json_pack("{s:s, s:o}", "type", type, "payload", payload);
}

/* Whether a (an array, or NULL) holds v. */
static int
ids_has(json_t *a, json_t *v)
{
	json_t *e;
	size_t i;

	json_array_foreach(a, i, e)
		if (json_equal(e, v))
			return 1;
	return 0;
}

static int
is_role(json_t *msg, const char *role)
{
	const char *r = json_string_value(json_object_get(msg, "role"));

	return r != NULL && strcmp(r, role) == 0;
}

static int
is_type(json_t *block, const char *type)
{
	const char *t = json_string_value(json_object_get(block, "type"));

	return t != NULL && strcmp(t, type) == 0;
}

/* ---- storing ------------------------------------------------------------- */

typedef void (*stored_fn)(void);

static void
stored(struct child *c, const struct ipc_db_result *r, void *arg)
{
	size_t len;
	const char *v;
	stored_fn next = (stored_fn)(uintptr_t)arg;

	ag.stores--;
	if (r->code != DB_OK)
		fatalx("storing an agent turn: %.*s", (int)r->errlen, r->error);
	if ((v = child_db_cell(r, 0, &len)) == NULL || len != 1 || v[0] != 't') {
		runner_lease_lost();
		return;
	}
	if (next != NULL && ag.state != AG_DONE) /* a continuation of an attempt still on */
		next();
}

static void
stored_nothing(void)
{
}

/* Store message (NULL for none) as number seq of the session (the next
 * one, or the round of tool results it replaces, grown by one), with
 * events; both are consumed.  next runs at once while fewer than
 * AGENT_STORES_AHEAD stores are in flight, or once this one is stored:
 * the loop does not wait for the database, whose operations go in order
 * (a later one is never stored before an earlier one), and a store that
 * finds the lease lost still stops the runner. */
static void
store_at(size_t seq, json_t *message, json_t *events, stored_fn next)
{
	struct qop *q;
	char *ms = NULL, *es, err[256];

	if ((message != NULL && (ms = json_dumps(message, JSON_COMPACT)) == NULL) ||
	    (es = json_dumps(events, JSON_COMPACT)) == NULL)
		fatalx("out of memory");
	json_decref(events);
	if ((ms != NULL && strlen(ms) > IPC_DB_ARG_MAX) || strlen(es) > IPC_DB_ARG_MAX) {
		/* what the database operation would refuse (and the supervisor
		 * with it, closing this runner's channel): the attempt fails */
		snprintf(err, sizeof(err), "message %zu of the conversation is %zu bytes, more than "
		    "the %d one message may be (agent.max_tokens or agent.tool_output_max is too "
		    "large for it)", seq, ms != NULL ? strlen(ms) : strlen(es), IPC_DB_ARG_MAX);
		json_decref(message);
		free(ms);
		free(es);
		agent_over("failed", err, NULL, 0);
		return;
	}
	ag.state = AG_STORING;
	q = runner_op("runner_agent_turn", 6);
	ipc_put_str(&q->w, ag.a.step);
	ipc_put_u64(&q->w, (uint64_t)ag.a.attempt);
	ipc_put_str(&q->w, ag.session);
	ipc_put_u64(&q->w, seq);
	if (message != NULL) {
		ipc_put_str(&q->w, ms);
		if (seq == ag.round_seq)
			ag.round_len = strlen(ms);
		free(ms);
		if (seq < json_array_size(ag.messages))
			json_array_set_new(ag.messages, seq, message);
		else
			json_array_append_new(ag.messages, message);
	} else
		ipc_put_nil(&q->w);
	ipc_put_str(&q->w, es);
	free(es);
	if (++ag.stores <= AGENT_STORES_AHEAD) {
		runner_op_send(q, stored, NULL);
		next();
	} else
		runner_op_send(q, stored, (void *)(uintptr_t)next);
}

static void
store(json_t *message, json_t *events, stored_fn next)
{
	store_at(json_array_size(ag.messages), message, events, next);
}

/* ---- the prompt ---------------------------------------------------------- */

static const char agent_rules[] =
    "You are an autonomous software engineering agent doing one step of a job that "
    "Agrippa runs on a git repository.\n\n"
    "Your workspace is the repository's working tree. Every path you give a tool is "
    "relative to its root; absolute paths and paths that leave it (\"..\", symbolic "
    "links out) are refused. The sandbox you work in has no network and holds no "
    "secret: do not look for either.\n\n"
    "Work with the tools, one step at a time, checking what you change. Do only what "
    "the task asks. When the task is done, answer with a short summary of what you did "
    "and call no tool: that ends the step.\n";

static void
prompt_access(FILE *f)
{
	if (ag.a.readonly)
		fputs("\nThis step is read-only: the workspace cannot be changed and there is no "
		      "shell. Only files under .agrippa/artifacts/ can be written.\n", f);
	else
		fputs("\nThe bash tool runs a /bin/sh command line at the workspace root; each "
		      "command has a time limit, and its output is cut when it is long.\n", f);
}

static void
prompt_artifacts(FILE *f)
{
	json_t *p;
	size_t i;

	if (json_array_size(ag.a.produces) == 0)
		return;
	fputs("\nThis step must leave these files, with exactly these names (create the "
	      "directory if needed):\n", f);
	json_array_foreach(ag.a.produces, i, p)
		fprintf(f, "- .agrippa/artifacts/%s (%s, %s)\n",
		    json_string_value(json_object_get(p, "file")),
		    json_string_value(json_object_get(p, "kind")),
		    json_is_true(json_object_get(p, "required")) ? "required" : "optional");
}

static void
prompt_build(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (f == NULL)
		fatal("open_memstream");
	fputs(agent_rules, f);
	prompt_access(f);
	prompt_artifacts(f);
	if (ag.skills_text != NULL && ag.skills_text[0] != '\0')
		fprintf(f, "\nSkills (instructions this project gives you):\n%s", ag.skills_text);
	if (fclose(f) != 0)
		fatal("prompt");
	ag.system = text_cut(buf, len, len, &(int){0});
	free(buf);
}

/* ---- tools --------------------------------------------------------------- */

static json_t *
schema(const char *props, const char *required)
{
	json_t *p = json_loads(props, 0, NULL), *r = json_loads(required, 0, NULL);

	if (p == NULL || r == NULL)
		fatalx("a tool schema");
	return json_pack("{s:s, s:o, s:o}", "type", "object", "properties", p, "required", r);
}

static void
tool_add(const char *name, const char *desc, const char *props, const char *required)
{
	json_array_append_new(ag.tools, json_pack("{s:s, s:s, s:o}", "name", name, "description",
	    desc, "input_schema", schema(props, required)));
}

static void
tools_build(void)
{
	ag.tools = json_array();
	tool_add("read_file", "Read a file of the workspace (text). Long files are cut; use "
	    "offset and limit (bytes) to read further.",
	    "{\"path\":{\"type\":\"string\"},\"offset\":{\"type\":\"integer\"},"
	    "\"limit\":{\"type\":\"integer\"}}", "[\"path\"]");
	tool_add("write_file", "Create or replace a file with the given content (parent "
	    "directories are created).",
	    "{\"path\":{\"type\":\"string\"},\"content\":{\"type\":\"string\"}}",
	    "[\"path\",\"content\"]");
	tool_add("edit_file", "Replace old_string by new_string in a file. old_string must occur "
	    "exactly once, or exactly count times when count is given (all are replaced).",
	    "{\"path\":{\"type\":\"string\"},\"old_string\":{\"type\":\"string\"},"
	    "\"new_string\":{\"type\":\"string\"},\"count\":{\"type\":\"integer\"}}",
	    "[\"path\",\"old_string\",\"new_string\"]");
	tool_add("list_dir", "List a directory of the workspace (\".\" for its root).",
	    "{\"path\":{\"type\":\"string\"}}", "[]");
	tool_add("glob", "Find files whose path matches a glob pattern (** matches any depth).",
	    "{\"pattern\":{\"type\":\"string\"},\"path\":{\"type\":\"string\"}}", "[\"pattern\"]");
	tool_add("grep", "Search files for lines matching a POSIX extended regular expression.",
	    "{\"pattern\":{\"type\":\"string\"},\"path\":{\"type\":\"string\"},"
	    "\"include\":{\"type\":\"string\"},\"ignore_case\":{\"type\":\"boolean\"}}",
	    "[\"pattern\"]");
	if (!ag.a.readonly)
		tool_add("bash", "Run a /bin/sh command line at the workspace root. Output "
		    "(stdout and stderr) is cut when long.",
		    "{\"command\":{\"type\":\"string\"},\"timeout_s\":{\"type\":\"integer\"}}",
		    "[\"command\"]");
}

/* The tool round's current call is answered: content for the model (a
 * string, or for an MCP result with images text and image blocks). */
static void
tool_answer(json_t *content, int is_error)
{
	json_t *call = json_array_get(ag.calls, ag.tool_cur);
	/* a string, or blocks whose first is the text (an MCP result with images) */
	const char *text = json_is_string(content) ? json_string_value(content) :
	    json_string_value(json_object_get(json_array_get(content, 0), "text"));
	const char *server = amcp_server_of(json_string_value(json_object_get(call, "name")));
	int cut;
	json_t *shown = text_cut(text, strlen(text), AGENT_EVENT_RESULT_MAX, &cut);
	json_t *events = json_array(), *p;

	json_array_append_new(ag.results, json_pack("{s:s, s:O, s:O, s:b}", "type", "tool_result",
	    "tool_use_id", json_object_get(call, "id"), "content", content, "is_error", is_error));
	p = json_pack("{s:O, s:O, s:b, s:o, s:b, s:I}", "id", json_object_get(call, "id"), "name",
	    json_object_get(call, "name"), "is_error", is_error, "content", shown,
	    "content_truncated", cut, "bytes", (json_int_t)strlen(text));
	if (server != NULL)
		json_object_set_new(p, "server", json_string(server));
	json_array_append_new(events, ev("agent.tool_result", p));
	json_decref(content);
	ag.tool_cur++;
	/* every result is stored as it comes: the round's message grows */
	store_at(ag.round_seq, json_pack("{s:s, s:O}", "role", "user", "content", ag.results),
	    events, tool_next);
}

static void
tool_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void
tool_error(const char *fmt, ...)
{
	char buf[IPC_ERRMSG_MAX + 256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	tool_answer(text_cut(buf, strlen(buf), sizeof(buf), &(int){0}), 1);
}

/* A string argument of the call, or NULL (and a tool error) when missing. */
static const char *
targ(json_t *input, const char *key, const char *def)
{
	json_t *v = json_object_get(input, key);

	if (json_is_string(v))
		return json_string_value(v);
	return def;
}

static uint64_t
tnum(json_t *input, const char *key, uint64_t def)
{
	json_t *v = json_object_get(input, key);

	return json_is_integer(v) && json_integer_value(v) >= 0 ?
	    (uint64_t)json_integer_value(v) : def;
}

/* Path arguments are checked by the sandbox (RESOLVE_BENEATH); here only
 * that they fit the protocol. */
static int
tpath_ok(const char *p)
{
	return p != NULL && strlen(p) <= IPC_SBX_PATH_MAX;
}

static void
sbx_begin(struct ipc_wbuf *w, uint32_t type, uint32_t n)
{
	ag.sbx_id = AGENT_ID_BASE + ((ag.sbx_id + 1) & ((1ull << 44) - 1));
	ipc_wbuf_begin(w, type, ag.sbx_id, n);
}

static int
tool_file(const char *name, json_t *in)
{
	struct ipc_wbuf w;
	const char *path = targ(in, "path", NULL), *s1, *s2;

	if (strcmp(name, "read_file") == 0) {
		if (!tpath_ok(path))
			return -1;
		sbx_begin(&w, IMSG_SBX_READ, 3);
		ipc_put_str(&w, path);
		ipc_put_u64(&w, tnum(in, "offset", 0));
		ipc_put_u64(&w, tnum(in, "limit", ag.conf.tool_output_max + 1));
	} else if (strcmp(name, "write_file") == 0) {
		if (!tpath_ok(path) || (s1 = targ(in, "content", NULL)) == NULL)
			return -1;
		sbx_begin(&w, IMSG_SBX_WRITE, 3);
		ipc_put_str(&w, path);
		ipc_put_bin(&w, s1, strlen(s1));
		ipc_put_bool(&w, 1);
	} else if (strcmp(name, "edit_file") == 0) {
		if (!tpath_ok(path) || (s1 = targ(in, "old_string", NULL)) == NULL ||
		    (s2 = targ(in, "new_string", NULL)) == NULL || s1[0] == '\0')
			return -1;
		sbx_begin(&w, IMSG_SBX_EDIT, 4);
		ipc_put_str(&w, path);
		ipc_put_str(&w, s1);
		ipc_put_str(&w, s2);
		if (tnum(in, "count", 0) > UINT32_MAX)
			return -1;
		/* count: that many occurrences exactly (the sandbox checks) */
		ipc_put_u64(&w, tnum(in, "count", 0));
	} else
		return -2;
	runner_sbx_send(&w);
	return 0;
}

static int
tool_search(const char *name, json_t *in)
{
	struct ipc_wbuf w;
	const char *path = targ(in, "path", "."), *pat = targ(in, "pattern", NULL);

	if (strcmp(name, "list_dir") == 0) {
		if (!tpath_ok(path))
			return -1;
		sbx_begin(&w, IMSG_SBX_LIST, 2);
		ipc_put_str(&w, path);
		ipc_put_u64(&w, AGENT_LIST_MAX);
	} else if (strcmp(name, "glob") == 0) {
		if (!tpath_ok(path) || pat == NULL || strlen(pat) > IPC_SBX_PATTERN_MAX)
			return -1;
		sbx_begin(&w, IMSG_SBX_GLOB, 3);
		ipc_put_str(&w, pat);
		ipc_put_str(&w, strcmp(path, ".") == 0 ? "" : path);
		ipc_put_u64(&w, AGENT_LIST_MAX);
	} else if (strcmp(name, "grep") == 0) {
		const char *inc = targ(in, "include", "");

		if (!tpath_ok(path) || pat == NULL || strlen(pat) > IPC_SBX_PATTERN_MAX ||
		    strlen(inc) > IPC_SBX_NAME_MAX)
			return -1;
		sbx_begin(&w, IMSG_SBX_GREP, 5);
		ipc_put_str(&w, pat);
		ipc_put_str(&w, path);
		ipc_put_str(&w, inc);
		ipc_put_bool(&w, json_is_true(json_object_get(in, "ignore_case")));
		ipc_put_u64(&w, AGENT_GREP_MAX);
	} else
		return -2;
	runner_sbx_send(&w);
	return 0;
}

static int
tool_bash(json_t *in)
{
	struct ipc_wbuf w;
	const char *cmd = targ(in, "command", NULL);
	uint64_t t = tnum(in, "timeout_s", 0);

	if (cmd == NULL || cmd[0] == '\0' || strlen(cmd) > IPC_SBX_ARG_MAX)
		return -1;
	free(ag.out);
	ag.out = NULL;
	ag.outlen = ag.outtotal = 0;
	sbx_begin(&w, IMSG_SBX_EXEC, 4);
	ipc_put_bool(&w, 1);
	ipc_put_array(&w, 1);
	ipc_put_str(&w, cmd);
	ipc_put_str(&w, "");
	ipc_put_u64(&w, t > 0 && t < UINT32_MAX / 1000 ? t * 1000 : 0);
	ag.exec_running = 1;
	runner_sbx_send(&w);
	return 0;
}

/* An MCP tool's answer (already cut at tool_output_max, with the marker). */
static void
mcp_answered(const char *server, const char *text, size_t len, int is_error, json_t *images)
{
	json_t *content;

	(void)server;
	if (ag.state != AG_TOOLS) {
		json_decref(images);
		return;
	}
	if ((content = json_stringn(text, len)) == NULL)
		content = json_string("(the MCP server's answer is not valid UTF-8)");
	if (images != NULL) {
		/* the text first, then the images, for providers that take them */
		json_array_insert_new(images, 0, json_pack("{s:s, s:o}", "type", "text", "text",
		    content));
		content = images;
	}
	tool_answer(content, is_error);
}

/* Start the round's next tool call, or, when all are answered (each
 * result was stored as it came), the next model call. */
static void
tool_next(void)
{
	json_t *call, *in;
	const char *name;
	int rv;

	int interrupted = ag.resuming;

	if (ag.tool_cur >= json_array_size(ag.calls)) {
		json_decref(ag.calls);
		json_decref(ag.results);
		ag.calls = ag.results = NULL;
		ag.resuming = 0;
		agent_turn();
		return;
	}
	call = json_array_get(ag.calls, ag.tool_cur);
	name = json_string_value(json_object_get(call, "name"));
	in = json_object_get(call, "input");
	ag.state = AG_TOOLS;
	ag.resuming = 0; /* only the first call of a resumed round may have been running */
	if (!json_is_object(in) || ids_has(ag.badargs, json_object_get(call, "id"))) {
		tool_error("the arguments of %s must be a JSON object", name);
		return;
	}
	if (strcmp(name, "bash") == 0 && ag.a.readonly) {
		tool_error("bash is not available in a read-only step");
		return;
	}
	if (strcmp(name, "bash") == 0 && interrupted) {
		tool_error("this command was interrupted when the runner stopped; whether it ran, "
		    "and what it changed, is unknown: check before running it again");
		return;
	}
	if (amcp_server_of(name) != NULL) {
		/* a tool of an MCP server may act outside: it is not made twice */
		if (interrupted) {
			tool_error("this call to the MCP server %s was interrupted when the runner "
			    "stopped; whether it was carried out is unknown: check before making it "
			    "again", amcp_server_of(name));
			return;
		}
		amcp_call(name, in, mcp_answered);
		return;
	}
	if (strcmp(name, "bash") == 0)
		rv = tool_bash(in);
	else if ((rv = tool_file(name, in)) == -2)
		rv = tool_search(name, in);
	if (rv == -1)
		tool_error("%s: a required argument is missing, empty, of the wrong type or too long",
		    name);
	else if (rv == -2)
		tool_error("there is no tool named %s", name);
}

/* ---- tool results -------------------------------------------------------- */

static void
answer_read(const msgpack_object *d)
{
	struct ipc_cur c;
	const uint8_t *p;
	size_t len;
	uint64_t size;

	ipc_cur_init(&c, d);
	if (d->type != MSGPACK_OBJECT_ARRAY || ipc_get_bin(&c, &p, &len, SIZE_MAX) == -1 ||
	    ipc_get_u64(&c, &size) == -1) {
		tool_error("the sandbox's answer was not understood");
		return;
	}
	if (memchr(p, '\0', len) != NULL) {
		tool_error("the file is binary (%llu bytes)", (unsigned long long)size);
		return;
	}
	tool_answer(result_text((const char *)p, len, (size_t)size), 0);
}

/* Entries of a list, glob or grep answer ([truncated, [[a, b, c]...]]) as
 * lines. */
static void
answer_entries(const char *name, const msgpack_object *d)
{
	struct ipc_cur c, list, e;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	int trunc, grep = strcmp(name, "grep") == 0;
	const char *a, *b;
	size_t alen, blen;
	uint64_t n;

	if (f == NULL)
		fatal("open_memstream");
	ipc_cur_init(&c, d);
	if (d->type == MSGPACK_OBJECT_ARRAY && ipc_get_bool(&c, &trunc) == 0 &&
	    ipc_get_array(&c, &list, UINT32_MAX) == 0) {
		while (ipc_get_array(&list, &e, 3) == 0) {
			if (ipc_get_str(&e, &a, &alen, SIZE_MAX) == -1)
				break;
			if (grep && ipc_get_u64(&e, &n) == 0 &&
			    ipc_get_str(&e, &b, &blen, SIZE_MAX) == 0)
				fprintf(f, "%.*s:%llu: %.*s\n", (int)alen, a, (unsigned long long)n,
				    (int)blen, b);
			else if (!grep && ipc_get_str(&e, &b, &blen, SIZE_MAX) == 0 &&
			    ipc_get_u64(&e, &n) == 0)
				fprintf(f, "%.*s%s\t%llu\n", (int)alen, a,
				    blen == 3 && memcmp(b, "dir", 3) == 0 ? "/" : "",
				    (unsigned long long)n);
		}
		if (ftell(f) == 0)
			fputs(grep ? "(no match)\n" : "(nothing)\n", f);
		if (trunc)
			fputs("[truncated: more entries exist; narrow the search]\n", f);
	}
	if (fclose(f) != 0)
		fatal("entries");
	tool_answer(result_text(buf, len, len), 0);
	free(buf);
}

static void
answer_result(struct ipc_msg *m)
{
	struct ipc_sbx_result r;
	json_t *call = json_array_get(ag.calls, ag.tool_cur);
	const char *name = json_string_value(json_object_get(call, "name"));
	char buf[256];

	if (ipc_dec_sbx_result(m->body, &r) == -1)
		fatalx("the sandbox sent a bad result");
	if (r.code != 0) {
		tool_error("%.*s (%s)", (int)r.errlen, r.error, strerror((int)r.code));
		return;
	}
	if (strcmp(name, "read_file") == 0)
		answer_read(r.data);
	else if (strcmp(name, "write_file") == 0) {
		snprintf(buf, sizeof(buf), "wrote %s",
		    targ(json_object_get(call, "input"), "path", ""));
		tool_answer(text_cut(buf, strlen(buf), sizeof(buf), &(int){0}), 0);
	} else if (strcmp(name, "edit_file") == 0) {
		snprintf(buf, sizeof(buf), "edited %s",
		    targ(json_object_get(call, "input"), "path", ""));
		tool_answer(text_cut(buf, strlen(buf), sizeof(buf), &(int){0}), 0);
	} else
		answer_entries(name, r.data);
}

static void
answer_output(struct ipc_msg *m)
{
	struct ipc_sbx_output o;
	size_t keep, max = ag.conf.tool_output_max;

	if (ipc_dec_sbx_output(m->body, &o) == -1 || o.stream == 0)
		return;
	ag.outtotal += o.len;
	keep = ag.outlen < max ? max - ag.outlen : 0;
	if (keep > o.len)
		keep = o.len;
	if (keep == 0)
		return;
	if ((ag.out = realloc(ag.out, ag.outlen + keep + 1)) == NULL)
		fatal("realloc");
	memcpy(ag.out + ag.outlen, o.data, keep);
	ag.outlen += keep;
}

static void
answer_exit(struct ipc_msg *m)
{
	struct ipc_sbx_exit x;
	char head[IPC_ERRMSG_MAX + 128], *buf;
	json_t *body;

	ag.exec_running = 0;
	if (ipc_dec_sbx_exit(m->body, &x) == -1)
		fatalx("the sandbox sent a bad exit");
	if (x.code != 0) {
		tool_error("the command could not run: %.*s", (int)x.errlen, x.error);
		return;
	}
	if (x.timed_out)
		snprintf(head, sizeof(head), "timed out after %llu ms",
		    (unsigned long long)x.duration_ms);
	else if (x.status < 0)
		snprintf(head, sizeof(head), "killed by signal %u", x.signal);
	else
		snprintf(head, sizeof(head), "exit status %lld", (long long)x.status);
	body = result_text(ag.out != NULL ? ag.out : "", ag.outlen,
	    x.truncated && x.output_bytes > ag.outtotal ? x.output_bytes : ag.outtotal);
	if (asprintf(&buf, "%s\n%s", head, json_string_value(body)) == -1)
		fatalx("out of memory");
	json_decref(body);
	tool_answer(text_cut(buf, strlen(buf), strlen(buf), &(int){0}), x.timed_out || x.status < 0);
	free(buf);
}

static int
agent_sbx_msg(struct ipc_msg *m)
{
	if (m->id < AGENT_ID_BASE || m->id >= AGENT_ID_BASE + (1ull << 44))
		return 0;
	if (ag.state != AG_TOOLS || m->id != ag.sbx_id)
		return 1; /* an answer to a call that is no longer waited for */
	switch (m->type) {
	case IMSG_SBX_RESULT:
		answer_result(m);
		break;
	case IMSG_SBX_OUTPUT:
		if (ag.exec_running)
			answer_output(m);
		break;
	case IMSG_SBX_EXIT:
		if (ag.exec_running)
			answer_exit(m);
		break;
	default:
		fatalx("unexpected %s from the sandbox", ipc_msg_name(m->type));
	}
	return 1;
}

/* ---- model answers ------------------------------------------------------- */


/* A call whose arguments were not a JSON object (the proxy gives null) is
 * kept with {} so that the conversation can be sent again, and answered
 * with a tool error. */
static void
fix_args(json_t *content)
{
	json_t *b;
	size_t i;

	json_decref(ag.badargs);
	ag.badargs = json_array();
	json_array_foreach(content, i, b)
		if (json_is_string(json_object_get(b, "id")) && json_object_get(b, "input") != NULL &&
		    !json_is_object(json_object_get(b, "input"))) {
			json_array_append(ag.badargs, json_object_get(b, "id"));
			json_object_set_new(b, "input", json_object());
		}
}

/* The payload of agent.tool_call for tool_use block b: its input as it is,
 * or, past AGENT_EVENT_TEXT_MAX bytes of JSON, that much of its text. */
static json_t *
call_event(json_t *b)
{
	char *s = json_dumps(json_object_get(b, "input"), JSON_COMPACT);
	const char *server;
	json_t *o;
	int cut;

	if (s == NULL)
		fatalx("out of memory");
	if (strlen(s) <= AGENT_EVENT_TEXT_MAX)
		o = json_pack("{s:O, s:O, s:O}", "id", json_object_get(b, "id"), "name",
		    json_object_get(b, "name"), "input", json_object_get(b, "input"));
	else
		o = json_pack("{s:O, s:O, s:o, s:b, s:I}", "id", json_object_get(b, "id"), "name",
		    json_object_get(b, "name"), "input", text_cut(s, strlen(s), AGENT_EVENT_TEXT_MAX,
		    &cut), "input_truncated", 1, "input_bytes", (json_int_t)strlen(s));
	free(s);
	if (json_is_string(json_object_get(b, "name")) &&
	    (server = amcp_server_of(json_string_value(json_object_get(b, "name")))) != NULL)
		json_object_set_new(o, "server", json_string(server));
	return o;
}

/* The answer's events: its text, each tool call, its usage. */
static json_t *
answer_events(json_t *content, const struct ipc_model_reply *r)
{
	json_t *events = json_array(), *b;
	size_t i;
	char *text = NULL;
	size_t tlen = 0;
	FILE *f = open_memstream(&text, &tlen);
	int cut;

	if (f == NULL)
		fatal("open_memstream");
	json_array_foreach(content, i, b)
		if (is_type(b, "text"))
			fputs(json_string_value(json_object_get(b, "text")), f);
	if (fclose(f) != 0)
		fatal("answer");
	if (tlen > 0) {
		json_t *shown = text_cut(text, tlen, AGENT_EVENT_TEXT_MAX, &cut);

		json_array_append_new(events, ev("agent.message", json_pack("{s:o, s:b}", "text",
		    shown, "truncated", cut)));
	}
	free(text);
	json_array_foreach(content, i, b)
		if (is_type(b, "tool_use"))
			json_array_append_new(events, ev("agent.tool_call", call_event(b)));
	json_array_append_new(events, ev("agent.usage", json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, "
	    "s:I, s:I, s:I}", "provider", ag.conf.provider, "model", ag.conf.model,
	    "input_tokens", (json_int_t)r->usage[0], "output_tokens", (json_int_t)r->usage[1],
	    "cache_read_tokens", (json_int_t)r->usage[2], "cache_write_tokens",
	    (json_int_t)r->usage[3], "cost_usd_micros", (json_int_t)r->cost,
	    "spent_usd_micros", (json_int_t)ag.spent, "reserved_usd_micros",
	    (json_int_t)ag.a.reserved)));
	return events;
}

/* Whether msg is a (part of a) round of tool results. */
static int
is_results(json_t *msg)
{
	json_t *b;
	size_t i;

	if (!is_role(msg, "user") || json_array_size(json_object_get(msg, "content")) == 0)
		return 0;
	json_array_foreach(json_object_get(msg, "content"), i, b)
		if (!is_type(b, "tool_result"))
			return 0;
	return 1;
}

/* The tool_use blocks of msg when it is the model's (new array). */
static json_t *
calls_of(json_t *msg)
{
	json_t *b, *calls = json_array();
	size_t i;

	if (is_role(msg, "assistant"))
		json_array_foreach(json_object_get(msg, "content"), i, b)
			if (is_type(b, "tool_use"))
				json_array_append(calls, b);
	return calls;
}

static json_t *
pending_calls(void)
{
	return calls_of(json_array_get(ag.messages, json_array_size(ag.messages) - 1));
}

/* After the model's answer is stored: its tool calls, or the end. */
static void
answer_stored(void)
{
	if (rn.cancel) {
		agent_over("cancelled", "cancelled", NULL, 1);
		return;
	}
	ag.calls = pending_calls();
	if (json_array_size(ag.calls) == 0) {
		log_info("step %s attempt %d: the agent finished after %d turn%s", ag.a.step,
		    ag.a.attempt, ag.turns, ag.turns == 1 ? "" : "s");
		agent_over("succeeded", NULL, NULL, 0);
		return;
	}
	ag.results = json_array();
	ag.tool_cur = 0;
	ag.round_seq = json_array_size(ag.messages);
	ag.round_len = 0;
	tool_next();
}

static void
budget_stop(const struct ipc_model_reply *r)
{
	char err[512];
	json_t *events = json_array();

	snprintf(err, sizeof(err), "its budget would be exceeded by the next model call: it could "
	    "cost %llu micro-dollars and %lld of %lld are left", (unsigned long long)r->worst,
	    (long long)(ag.a.reserved - ag.spent), (long long)ag.a.reserved);
	json_array_append_new(events, ev("budget.exceeded", json_pack("{s:s, s:I, s:I, s:I, s:s}",
	    "scope", "step", "reserved_usd_micros", (json_int_t)ag.a.reserved,
	    "spent_usd_micros", (json_int_t)ag.spent, "next_call_usd_micros", (json_int_t)r->worst,
	    "message", err)));
	log_info("step %s attempt %d: %s", ag.a.step, ag.a.attempt, err);
	/* stored with no message: the conversation stays as it was */
	store(NULL, events, stored_nothing);
	agent_over("failed", err, json_pack("{s:b}", "budget_exceeded", 1), 1);
}

static void
model_reply(struct ipc_msg *m)
{
	struct ipc_model_reply r;
	json_t *content, *msg;
	char err[IPC_ERRMSG_MAX + 64];

	if (ag.state != AG_CALLING || m->id != ag.call_id)
		fatalx("a model answer to nothing asked");
	if (ipc_dec_model_reply(m->body, &r) == -1)
		fatalx("a bad model answer");
	/* what the proxy holds now: a failed call ends the attempt, and the
	 * next one begins its conversation anew */
	ag.proxy_has = r.code == IPC_MODEL_OK ? ag.sent : 0;
	if (r.code == IPC_MODEL_BUDGET) {
		budget_stop(&r);
		return;
	}
	if (r.code != IPC_MODEL_OK) {
		snprintf(err, sizeof(err), "the model call failed: %.*s", (int)r.errlen, r.error);
		agent_over("failed", err, NULL, r.code == IPC_MODEL_REFUSED);
		return;
	}
	if ((content = json_loadb(r.content, r.contentlen, 0, NULL)) == NULL ||
	    !json_is_array(content))
		fatalx("the proxy sent an answer that is not a JSON array");
	ag.turns++;
	ag.spent += (int64_t)r.cost;
	fix_args(content);
	msg = json_pack("{s:s, s:o}", "role", "assistant", "content", content);
	store(msg, answer_events(content, &r), answer_stored);
}

static void
proxy_msg(struct ipc_chan *ch, struct ipc_msg *m, void *arg)
{
	if (m->type != IMSG_MODEL_REPLY)
		fatalx("unexpected %s from the proxy", ipc_msg_name(m->type));
	model_reply(m);
}

static void
proxy_wait_over(evutil_socket_t fd, short what, void *arg)
{
	/* this runner ends; its lease lapses, and the next one resumes the
	 * conversation */
	fatalx("the model channel is gone, and no proxy came back within %d s",
	    AGENT_PROXY_WAIT_SECS);
}

/* The proxy is gone (it died, or was not there when this runner
 * started): the call, in flight or the next one, waits for the channel the
 * supervisor makes once a proxy is ready again (agent_proxy). */
static void
proxy_wait(void)
{
	struct timeval tv = { AGENT_PROXY_WAIT_SECS, 0 };

	if (ag.proxy_waiting)
		return;
	if (ag.proxy_wait_ev == NULL &&
	    (ag.proxy_wait_ev = evtimer_new(rn.c.base, proxy_wait_over, NULL)) == NULL)
		fatalx("evtimer_new");
	if (evtimer_add(ag.proxy_wait_ev, &tv) == -1)
		fatalx("evtimer_add");
	ag.proxy_waiting = 1;
	ag.state = AG_CALLING;
	log_info("step %s: the model channel is gone; waiting for the proxy", ag.a.step);
}

static void
proxy_err(struct ipc_chan *ch, const char *reason, void *arg)
{
	log_info("model channel: %s", reason);
	ipc_chan_free(ag.proxy);
	ag.proxy = NULL;
	ag.proxy_gone = 1;
	ag.proxy_has = 0;
	if (ag.state == AG_CALLING)
		proxy_wait(); /* the call in flight is lost: it is made again */
}

/* ---- turns --------------------------------------------------------------- */

/* What a call sends: the messages the proxy does not hold yet for this
 * attempt (all of them, with the system prompt and the tools, on the
 * first call of this runner), and how many it holds ("base"). */
static json_t *
call_request(void)
{
	json_t *req, *msgs = json_array();
	size_t i;

	for (i = ag.proxy_has; i < json_array_size(ag.messages); i++)
		json_array_append(msgs, json_array_get(ag.messages, i));
	if (ag.proxy_has == 0)
		req = json_pack("{s:I, s:O, s:o, s:O}", "base", (json_int_t)0, "system", ag.system,
		    "messages", msgs, "tools", ag.tools);
	else
		req = json_pack("{s:I, s:o}", "base", (json_int_t)ag.proxy_has, "messages", msgs);
	return req;
}

static void
agent_turn(void)
{
	struct ipc_wbuf w;
	json_t *req;
	char *s;
	int64_t left = ag.a.reserved - ag.spent;

	if (rn.cancel) {
		agent_over("cancelled", "cancelled", NULL, 1);
		return;
	}
	if (ag.turns >= ag.a.max_turns) {
		char err[128];

		snprintf(err, sizeof(err), "the agent reached its max_turns (%d) without finishing",
		    ag.a.max_turns);
		agent_over("failed", err, NULL, 0);
		return;
	}
	if (ag.proxy_gone) {
		proxy_wait();
		return;
	}
	if (ag.tools_stale) {
		/* the proxy holds the conversation with the old tools */
		ag.tools_stale = 0;
		ag.proxy_has = 0;
	}
	req = call_request();
	if (req == NULL || (s = json_dumps(req, JSON_COMPACT)) == NULL)
		fatalx("out of memory");
	json_decref(req);
	ag.sent = json_array_size(ag.messages);
	ag.call_id++;
	ipc_wbuf_begin(&w, IMSG_MODEL_CALL, ag.call_id, 7);
	ipc_put_str(&w, ag.a.step);
	ipc_put_u64(&w, (uint64_t)ag.a.attempt);
	ipc_put_str(&w, ag.conf.provider);
	ipc_put_str(&w, ag.conf.model);
	ipc_put_u64(&w, ag.conf.max_tokens);
	ipc_put_u64(&w, left > 0 ? (uint64_t)left : 0);
	ipc_put_str(&w, s);
	free(s);
	if (ipc_wbuf_finish(&w, rn.c.max_frame) == -1) {
		ipc_wbuf_free(&w);
		agent_over("failed", "the conversation has grown larger than ipc_max_frame", NULL, 1);
		return;
	}
	if (ipc_chan_send(ag.proxy, &w, -1) == -1)
		fatalx("cannot reach the proxy");
	ipc_wbuf_free(&w);
	ag.state = AG_CALLING;
}

/* Go on from where the conversation stands: after the model's answer,
 * with its tool calls; within a round of results, with the calls it had
 * not answered; otherwise with the next model call. */
static void
agent_continue(void)
{
	size_t n = json_array_size(ag.messages);
	json_t *last = json_array_get(ag.messages, n - 1), *calls;

	ag.resuming = 1;
	if (is_role(last, "assistant")) {
		answer_stored();
		return;
	}
	if (n >= 2 && is_role(json_array_get(ag.messages, n - 2), "assistant") &&
	    is_results(last)) {
		calls = calls_of(json_array_get(ag.messages, n - 2));
		if (json_array_size(json_object_get(last, "content")) < json_array_size(calls)) {
			ag.calls = calls;
			ag.results = json_deep_copy(json_object_get(last, "content"));
			ag.tool_cur = json_array_size(ag.results);
			ag.round_seq = n - 1;
			ag.round_len = 0; /* the next store says; the slack covers one result */
			tool_next();
			return;
		}
		json_decref(calls);
	}
	ag.resuming = 0;
	agent_turn();
}

static void
session_loaded(struct child *c, const struct ipc_db_result *r, void *arg)
{
	struct ipc_cur rows = r->rows, row;
	const char *s;
	size_t len;
	json_t *msg;
	uint32_t i;

	if (r->code != DB_OK)
		fatalx("loading the agent's session: %.*s", (int)r->errlen, r->error);
	for (i = 0; i < r->nrows; i++) {
		if (ipc_get_array(&rows, &row, 2) == -1 || ipc_get_any(&row, &(const msgpack_object *){0}) == -1 ||
		    ipc_get_str(&row, &s, &len, SIZE_MAX) == -1 ||
		    (msg = json_loadb(s, len, 0, NULL)) == NULL)
			fatalx("the agent's session has a bad message");
		json_array_append_new(ag.messages, msg);
		if (strcmp(json_string_value(json_object_get(msg, "role")), "assistant") == 0)
			ag.turns++;
	}
	if (r->nrows == 0) {
		/* nothing stored: begin as a fresh session would */
		store(json_pack("{s:s, s:[{s:s, s:s}]}", "role", "user", "content", "type", "text",
		    "text", ag.a.prompt), json_array(), agent_turn);
		return;
	}
	log_info("step %s attempt %d: resuming session %s at message %u (%d turns)", ag.a.step,
	    ag.a.attempt, ag.session, r->nrows, ag.turns);
	agent_continue();
}

static void mcp_begin(void);

static void
skills_loaded(struct child *c, const struct ipc_db_result *r, void *arg)
{
	struct ipc_cur rows = r->rows, row;
	const char *n, *v, *b;
	size_t nl, vl, bl;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;
	uint32_t i;

	if (r->code != DB_OK)
		fatalx("loading the step's skills: %.*s", (int)r->errlen, r->error);
	if ((f = open_memstream(&buf, &len)) == NULL)
		fatal("open_memstream");
	for (i = 0; i < r->nrows; i++)
		if (ipc_get_array(&rows, &row, 3) == 0 && ipc_get_str(&row, &n, &nl, SIZE_MAX) == 0 &&
		    ipc_get_str(&row, &v, &vl, SIZE_MAX) == 0 &&
		    ipc_get_str(&row, &b, &bl, SIZE_MAX) == 0)
			fprintf(f, "\n## %.*s (version %.*s)\n\n%.*s\n", (int)nl, n, (int)vl, v,
			    (int)bl, b);
	if (fclose(f) != 0)
		fatal("skills");
	ag.skills_text = buf;
	prompt_build();
	mcp_begin();
}

/* The conversation begins, or goes on from where a crashed attempt left it. */
static void
conversation_begin(void)
{
	if (ag.resume) {
		struct qop *q = runner_op("runner_agent_session", 1);

		ipc_put_str(&q->w, ag.session);
		runner_op_send(q, session_loaded, NULL);
		return;
	}
	store(json_pack("{s:s, s:[{s:s, s:s}]}", "role", "user", "content", "type", "text", "text",
	    ag.a.prompt), json_array(), agent_turn);
}

/* Every MCP server of the step has listed its tools, or failed. */
static void
mcp_ready(void)
{
	const char *why;

	ag.mcp_starting = 0;
	if (rn.cancel) {
		agent_over("cancelled", "cancelled", NULL, 1);
		return;
	}
	if ((why = amcp_missing()) != NULL) {
		agent_over("failed", why, NULL, 0);
		return;
	}
	amcp_add_tools(ag.tools);
	conversation_begin();
}

/* The MCP tools offered changed: the next model call has the new ones. */
static void
mcp_changed(void)
{
	if (ag.state == AG_DONE || ag.state == AG_LOADING)
		return;
	json_decref(ag.tools);
	tools_build();
	amcp_add_tools(ag.tools);
	ag.tools_stale = 1;
}

/* The step's MCP servers start before its first model call. */
static void
mcp_begin(void)
{
	struct amcp_conf mc;
	char err[512];
	int rv;

	if (rn.cancel) {
		/* came while the skills were loading: no server is started */
		agent_over("cancelled", "cancelled", NULL, 1);
		return;
	}
	mc.result_max = ag.conf.tool_output_max;
	mc.tools_max = ag.conf.mcp_tools_max;
	mc.bytes_max = ag.conf.mcp_tool_bytes_max;
	if ((rv = amcp_begin(ag.a.mcp, &mc, mcp_ready, mcp_changed, err, sizeof(err))) == -1) {
		agent_over("failed", err, NULL, 1);
		return;
	}
	if (rv == 0)
		conversation_begin();
	else
		ag.mcp_starting = 1;
}

static void
agent_start(const struct agent_step *a)
{
	struct qop *q;
	char *s;

	if (!ag.have_conf || ag.conf.provider[0] == '\0') {
		agent_end("failed", "no model provider is configured for agent steps "
		    "(agent.provider in agrippad.conf)", NULL, 1);
		return;
	}
	ag.a = *a;
	if ((ag.prompt = strdup(a->prompt)) == NULL)
		fatal("strdup");
	ag.a.prompt = ag.prompt;
	ag.a.skills = NULL;
	ag.a.resume = NULL;
	ag.tools_stale = 0;
	ag.mcp_starting = 0;
	ag.turns = 0;
	ag.spent = 0;
	ag.proxy_has = 0;
	ag.resuming = 0;
	ag.resume = a->resume != NULL;
	if (a->resume != NULL)
		snprintf(ag.session, sizeof(ag.session), "%s", a->resume);
	else
		snprintf(ag.session, sizeof(ag.session), "%s.%d", a->step, a->attempt);
	ag.messages = json_array();
	tools_build();
	ag.state = AG_LOADING;
	q = runner_op("runner_skills", 1);
	if ((s = a->skills != NULL ? json_dumps(a->skills, JSON_COMPACT) : strdup("[]")) == NULL)
		fatalx("out of memory");
	ipc_put_str(&q->w, s);
	free(s);
	runner_op_send(q, skills_loaded, NULL);
}

static void
agent_cancel(void)
{
	struct ipc_wbuf w;

	if (ag.proxy_waiting) {
		evtimer_del(ag.proxy_wait_ev);
		ag.proxy_waiting = 0;
		agent_over("cancelled", "cancelled", NULL, 1);
		return;
	}
	if (ag.mcp_starting) {
		/* not waiting for servers that may take their startup_timeout:
		 * those that came up are stopped, the others never start */
		ag.mcp_starting = 0;
		agent_over("cancelled", "cancelled", NULL, 1);
		return;
	}
	if (ag.state == AG_TOOLS && ag.exec_running) {
		ipc_wbuf_begin(&w, IMSG_SBX_KILL, ag.sbx_id, 0);
		runner_sbx_send(&w);
	}
	if (ag.state == AG_TOOLS)
		amcp_cancel();
}

/* RUNNER_PROXY: the model channel and what agent steps use.  It comes
 * again each time a new proxy is ready (the old one died): this runner
 * then takes the new channel, keeps the values of the first, and makes
 * again the call the old proxy had not answered, with the whole
 * conversation (the new proxy holds none of it). */
static int
agent_proxy(struct ipc_msg *m)
{
	struct ipc_runner_proxy conf;

	if (amcp_sup_msg(m))
		return 1;
	if (m->type != IMSG_RUNNER_PROXY)
		return 0;
	if (m->fd < 0 || ipc_dec_runner_proxy(m->body, &conf) == -1)
		fatalx("a bad model channel");
	if (ag.proxy != NULL)
		ipc_chan_free(ag.proxy);
	ag.proxy = ipc_chan_new(rn.c.base, m->fd, ROLE_RUNNER, ROLE_PROXY, rn.c.max_frame,
	    proxy_msg, proxy_err, NULL);
	if (ag.proxy == NULL)
		fatalx("cannot set up the model channel");
	m->fd = -1;
	ag.proxy_gone = 0;
	ag.proxy_has = 0;
	if (!ag.have_conf) {
		ag.conf = conf;
		ag.have_conf = 1;
		return 1;
	}
	log_info("a new model channel%s", ag.state == AG_CALLING ? ": the call is made again" : "");
	if (ag.proxy_waiting) {
		evtimer_del(ag.proxy_wait_ev);
		ag.proxy_waiting = 0;
	}
	if (ag.state == AG_CALLING)
		agent_turn();
	return 1;
}

/* The names of the skills step s requires, as a JSON array (new). */
static json_t *
step_skills(const struct rstep *s)
{
	json_t *names = json_array(), *r;
	size_t i;

	json_array_foreach(json_object_get(json_object_get(s->j, "requires"), "skills"), i, r)
		json_array_append_new(names, json_string(runner_jstr(r, "name", "")));
	return names;
}

static void
agent_begin(struct rstep *s)
{
	struct agent_step a;
	json_t *ws = json_object_get(rn.tmpl, "workspace");
	char *prompt = runner_expand(runner_jstr(s->j, "prompt", ""));
	json_t *skills = step_skills(s);

	memset(&a, 0, sizeof(a));
	a.step = s->id;
	a.phase = s->phase;
	a.attempt = rn.attempt;
	a.prompt = prompt;
	a.max_turns = runner_jint(s->j, "max_turns", 50);
	a.readonly = strcmp(runner_jstr(ws, "access", "readWrite"), "readOnly") == 0;
	a.produces = json_object_get(s->j, "produces");
	a.skills = skills;
	a.mcp = json_object_get(json_object_get(s->j, "requires"), "mcp_servers");
	a.reserved = rn.reserved;
	a.resume = s->session;
	s->session = NULL;
	agent_start(&a);
	free(prompt);
	json_decref(skills);
}

const struct step_kind step_agent = {
	.name = "agent",
	.spends = 1,
	.start = agent_begin,
	.sbx_msg = agent_sbx_msg,
	.sup_msg = agent_proxy,
	.cancel = agent_cancel,
};
