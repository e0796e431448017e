/*
 * agrippa-mcp-conformance: the runner's MCP client (runner/mcp.h) against a
 * remote MCP server through the proxy's Streamable HTTP bridge
 * (proxy/mcphttp.h), both in one libevent loop on the two ends of a
 * socketpair: the program the official conformance suite's client
 * scenarios run (`conformance client --command "agrippa-mcp-conformance"`,
 * which appends the server's URL), and tests/integration/test_mcp_http.sh's
 * client.  Built by `make tests`, installed nowhere.
 *
 *   agrippa-mcp-conformance [-H 'Name: value']... [-S SECRET]... [-t MS]
 *           [-T MS] [-i N] [-p] [-l | -c TOOL=JSON | -x TOOL=JSON]... URL
 *
 *   -H   a header sent with every request (as a spec's, expanded)
 *   -S   a value the bridge redacts from everything it writes back
 *   -t   the bridge's cap on one request (the spec's call_timeout), ms
 *   -T   the client's tools/call timeout without progress, ms
 *   -i   the bridge's cap on requests in flight
 *   -p   the calls all at once (each printed when it ends), not in turn
 *   -l, -c, -x   as tests/tools/mcpcall.c: list; call TOOL with the
 *        arguments JSON; call it and cancel it after half of -T
 *
 * Without a step, the scenario MCP_CONFORMANCE_SCENARIO names is done:
 * the handshake, tools/list, then the calls MCP_CONFORMANCE_CONTEXT's
 * toolCalls list ([{name, arguments}]), or else a call of every tool
 * listed (at most 16): add_numbers with {a: 2, b: 3}, the others with {}.
 *
 * Prints "version V modern|legacy", "tool MODEL_NAME NAME"... and "listed
 * N kept K dropped D" for a listing, "call TOOL error=E images=I cut=C",
 * the text and "end" for a call ("progress P/T" on the way), then "session
 * ID" when the server assigned one and "closed" once the bridge is done
 * (after its DELETE).  Exits 0 when every step ran (a tool error is a
 * result), 1 when the client or the bridge failed (why on stderr), 2 on bad
 * usage.
 */
#include <sys/socket.h>

#include <curl/curl.h>
#include <errno.h>
#include <event2/event.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "proxy/mcphttp.h"
#include "runner/mcp.h"

#define STEPS_MAX 64
#define HEADERS_MAX 32
#define AUTO_CALLS_MAX 16

struct step {
	char kind;
	char *tool;
	json_t *args;
};

static struct {
	struct event_base *base;
	struct mcp_client *c;
	struct mcphttp *h;
	struct mcp_conf conf;
	struct mcphttp_conf hconf;
	struct mcphttp_secret secrets[MCPHTTP_SECRETS_MAX];
	const char *headers[HEADERS_MAX];
	size_t nheaders;
	struct step steps[STEPS_MAX];
	size_t nsteps, cur;
	int scenario;   /* no step given: the scenario's calls follow the listing */
	int parallel;   /* -p */
	size_t running; /* -p: calls not yet answered */
	struct event *cancel_ev;
	uint64_t call;
	int status, closed;
	char *session;
} M;

static void step_next(void);

static void
usage(void)
{
	fprintf(stderr, "usage: agrippa-mcp-conformance [-H 'Name: value']... [-S SECRET]... "
	                "[-t MS] [-T MS] [-i N] [-p] [-l | -c TOOL=JSON | -x TOOL=JSON]... URL\n");
	exit(2);
}

/* The client is done with: it closes its end, the bridge ends the session. */
static void
finish(int status)
{
	M.status = status;
	fflush(stdout);
	if (M.h != NULL && mcphttp_session(M.h) != NULL && M.session == NULL &&
	    (M.session = strdup(mcphttp_session(M.h))) == NULL)
		fatal("strdup");
	if (M.c != NULL) {
		mcp_free(M.c);
		M.c = NULL;
	}
}

static void
on_bridge_done(void *arg, const char *err)
{
	if (err != NULL) {
		fprintf(stderr, "agrippa-mcp-conformance: %s\n", err);
		M.status = 1;
	}
	M.closed = 1;
	event_base_loopbreak(M.base);
}

static void
on_ready(void *arg, const char *err)
{
	if (err != NULL) {
		fprintf(stderr, "agrippa-mcp-conformance: %s\n", err);
		return finish(1);
	}
	printf("version %s %s\n", mcp_version(M.c), mcp_modern(M.c) ? "modern" : "legacy");
	step_next();
}

static void
on_progress(void *arg, uint64_t call, double p, double total, const char *message)
{
	printf("progress %g/%g\n", p, total);
}

static void
on_failed(void *arg, const char *err)
{
	fprintf(stderr, "agrippa-mcp-conformance: %s\n", err);
	finish(1);
}

static const struct mcp_events events = {on_ready, NULL, on_progress, on_failed};

static void
step_push(char kind, const char *tool, json_t *args)
{
	struct step *s;

	if (M.nsteps == STEPS_MAX)
		return;
	s = &M.steps[M.nsteps++];
	s->kind = kind;
	if (tool != NULL && (s->tool = strdup(tool)) == NULL)
		fatal("strdup");
	s->args = args;
}

/* The arguments a scenario's tool is called with: add_numbers adds 2 and
 * 3; json_schema_echo is given the inputSchema the client kept for
 * json_schema_2020_12_tool, to show it is the server's as it was; the
 * others get none. */
static json_t *
auto_args(const struct mcp_tools *t, const char *name)
{
	size_t i;

	if (strcmp(name, "add_numbers") == 0)
		return json_pack("{s:i, s:i}", "a", 2, "b", 3);
	if (strcmp(name, "json_schema_echo") == 0)
		for (i = 0; i < t->n; i++)
			if (strcmp(t->v[i].name, "json_schema_2020_12_tool") == 0)
				return json_pack("{s:O}", "schema",
				                 json_object_get(t->v[i].def, "input_schema"));
	return json_object();
}

/* The scenario's calls, once the tools are known. */
static void
scenario_calls(const struct mcp_tools *t)
{
	const char *ctx = getenv("MCP_CONFORMANCE_CONTEXT");
	json_t *c = ctx != NULL ? json_loads(ctx, 0, NULL) : NULL, *calls, *v;
	size_t i;

	calls = json_object_get(c, "toolCalls");
	if (json_is_array(calls) && json_array_size(calls) > 0) {
		json_array_foreach(calls, i, v) if (json_is_string(json_object_get(v, "name")))
		    step_push('c', json_string_value(json_object_get(v, "name")),
		              json_incref(json_object_get(v, "arguments")));
	} else {
		for (i = 0; i < t->n && i < AUTO_CALLS_MAX; i++)
			step_push('c', t->v[i].name, auto_args(t, t->v[i].name));
	}
	json_decref(c);
}

static void
on_list(void *arg, struct mcp_tools *t, const char *err)
{
	size_t i;

	if (t == NULL) {
		fprintf(stderr, "agrippa-mcp-conformance: %s\n", err);
		return finish(1);
	}
	for (i = 0; i < t->n; i++)
		printf("tool %s %s\n", t->v[i].model_name, t->v[i].name);
	printf("listed %zu kept %zu dropped %zu\n", t->listed, t->n, t->dropped);
	if (M.scenario) {
		M.scenario = 0;
		scenario_calls(t);
	}
	mcp_tools_free(t);
	step_next();
}

static void
on_call(void *arg, uint64_t call, struct mcp_result *r)
{
	struct step *s = arg;

	evtimer_del(M.cancel_ev);
	printf("call %s error=%d images=%zu cut=%d\n%s\nend\n", s->tool, r->is_error, r->images,
	       r->cut, r->text);
	mcp_result_free(r);
	if (M.parallel && --M.running > 0)
		return;
	step_next();
}

static void
cancel_now(evutil_socket_t fd, short what, void *arg)
{
	mcp_cancel(M.c, M.call);
}

static void
step_next(void)
{
	struct step *s;
	struct timeval tv;

	fflush(stdout);
	if (M.cur == M.nsteps)
		return finish(0);
	s = &M.steps[M.cur++];
	if (s->kind == 'l') {
		mcp_list_tools(M.c, on_list, NULL);
		return;
	}
	if (M.parallel) {
		/* this call and every one after it, up to the next listing */
		for (;;) {
			M.running++;
			mcp_call(M.c, s->tool, s->args, on_call, s);
			if (M.cur == M.nsteps || M.steps[M.cur].kind == 'l')
				return;
			s = &M.steps[M.cur++];
		}
	}
	M.call = mcp_call(M.c, s->tool, s->args, on_call, s);
	if (s->kind == 'x') {
		tv.tv_sec = M.conf.call_ms / 2000;
		tv.tv_usec = (M.conf.call_ms / 2 % 1000) * 1000;
		evtimer_add(M.cancel_ev, &tv);
	}
}

static void
step_add(char kind, const char *arg)
{
	json_error_t je;
	const char *eq;
	json_t *args;
	char *tool;

	if (M.nsteps == STEPS_MAX)
		usage();
	if (arg == NULL)
		return step_push(kind, NULL, NULL);
	if ((eq = strchr(arg, '=')) == NULL)
		usage();
	if ((args = json_loads(eq + 1, 0, &je)) == NULL) {
		fprintf(stderr, "agrippa-mcp-conformance: %s: %s\n", arg, je.text);
		exit(2);
	}
	if ((tool = strndup(arg, (size_t)(eq - arg))) == NULL)
		fatal("strndup");
	step_push(kind, tool, args);
	free(tool);
}

static unsigned long
num(const char *s)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno != 0 || *end != '\0' || end == s || v > UINT32_MAX)
		usage();
	return v;
}

static void
options(int argc, char **argv)
{
	int ch;

	while ((ch = getopt(argc, argv, "H:S:t:T:i:plc:x:")) != -1) {
		switch (ch) {
		case 'H':
			if (M.nheaders == HEADERS_MAX)
				usage();
			M.headers[M.nheaders++] = optarg;
			break;
		case 'S':
			if (M.hconf.nsecrets == MCPHTTP_SECRETS_MAX)
				usage();
			M.secrets[M.hconf.nsecrets].p = optarg;
			M.secrets[M.hconf.nsecrets++].len = strlen(optarg);
			break;
		case 't':
			M.hconf.call_ms = (uint32_t)num(optarg);
			break;
		case 'T':
			M.conf.call_ms = (uint32_t)num(optarg);
			break;
		case 'i':
			M.hconf.inflight_max = num(optarg);
			break;
		case 'p':
			M.parallel = 1;
			break;
		case 'l':
			step_add('l', NULL);
			break;
		case 'c':
		case 'x':
			step_add((char)ch, optarg);
			break;
		default:
			usage();
		}
	}
	if (optind != argc - 1)
		usage();
	M.hconf.secrets = M.secrets;
}

int
main(int argc, char **argv)
{
	char err[512];
	int sv[2];
	size_t i;

	log_init(1, 0, 0);
	log_procinit("mcp-conformance");
	signal(SIGPIPE, SIG_IGN);
	if (sodium_init() == -1 || curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		fatalx("sodium_init, curl_global_init");
	options(argc, argv);
	if (M.nsteps == 0) {
		M.scenario = 1;
		step_push('l', NULL, NULL);
	}
	M.conf.server = "server";
	if (M.conf.call_ms == 0)
		M.conf.call_ms = MCP_CALL_MS_DEFAULT;
	if ((M.base = event_base_new()) == NULL ||
	    (M.cancel_ev = evtimer_new(M.base, cancel_now, NULL)) == NULL)
		fatalx("libevent");
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == -1)
		fatal("socketpair");
	if ((M.h = mcphttp_new(M.base, sv[0], argv[optind], M.headers, M.nheaders, &M.hconf,
	                       on_bridge_done, NULL, err, sizeof(err))) == NULL) {
		fprintf(stderr, "agrippa-mcp-conformance: %s\n", err);
		close(sv[1]);
		return 2;
	}
	if ((M.c = mcp_new(M.base, sv[1], sv[1], &M.conf, &events, NULL)) == NULL)
		fatalx("mcp_new");
	M.status = 1;
	event_base_dispatch(M.base);
	if (M.session != NULL)
		printf("session %s\n", M.session);
	if (M.closed)
		printf("closed\n");
	mcp_free(M.c);
	mcphttp_free(M.h);
	for (i = 0; i < M.nsteps; i++) {
		free(M.steps[i].tool);
		json_decref(M.steps[i].args);
	}
	free(M.session);
	event_free(M.cancel_ev);
	event_base_free(M.base);
	curl_global_cleanup();
	return M.status;
}
