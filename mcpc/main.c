/*
 * agrippa-mcpc NAME START_MS [TOOL ARGS COUNT CALL_MS]: the MCP client of
 * "agrippactl mcp test" (agrippactl(8)), a transient tool of the supervisor
 * (supervisor/mcptest.c).
 *
 * The supervisor is privileged and never reads an MCP server's bytes, so
 * speaking to a server it started is left to this process, which runs as
 * the service user with no capability, no_new_privs and no secret (not the
 * server's credentials either: it gets none, and the server's sandbox
 * relays its output with every value of them masked, sandbox/mcphost.c):
 * fd 3 is the client's end of the server's stdin and stdout (a socket),
 * fd 4 the read end of the server's stderr.  It runs the handshake within START_MS (the server's
 * startup_timeout), lists the tools with the runner's client (runner/mcp.c)
 * and, given TOOL, calls it COUNT times one after the other with ARGS (a
 * JSON object's text), each call within CALL_MS (the server's
 * call_timeout) and all of them too, then prints, on stdout:
 *   - exit 0: one JSON object, {"protocol", "era", "listed", "kept",
 *     "dropped", "shown", "tools": [{"name", "description"}], "ready_us",
 *     "listed_us"}: each description only its first line, control
 *     characters made '?', and as many tools as fit in MCPC_OUT_MAX bytes
 *     (none with TOOL); ready_us and listed_us the microseconds from this
 *     process's start to the end of the handshake and of the listing.
 *     With TOOL also "call": {"tool", "count", "errors" (calls whose result
 *     was an error), "is_error", "text" and "cut" (the first call's result
 *     as the model would see it, control characters but newline and tab
 *     made '?', cut to fit), "us": {"min", "median", "p90", "p99", "max"}}:
 *     each call's time, from mcp_call to its result, in microseconds;
 *   - exit 1: one line of text, why the server failed, then the tail of its
 *     stderr (the last MCPC_TAIL_MAX bytes, control characters made '?').
 * The supervisor redacts the server's credentials from either again before
 * the operator sees it (the relay masked them in the server's stdout and
 * stderr already).  Closing fd 3 on exit is the server's EOF.
 */
#include <sys/prctl.h>

#include <errno.h>
#include <stdint.h>
#include <time.h>
#include <event2/event.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "common/log.h"
#include "runner/mcp.h"

#define MCPC_IO_FD 3
#define MCPC_ERR_FD 4
#define MCPC_OUT_MAX 7000   /* bytes of the JSON printed (the supervisor keeps 8191) */
#define MCPC_TAIL_MAX 1536  /* bytes of the server's stderr kept */
#define MCPC_DESC_MAX 160   /* bytes of a description's first line */
#define MCPC_DRAIN_MS 500   /* after a failure, how long the stderr tail may still grow */
#define MCPC_RESULT_MAX 3000 /* bytes of a result's text the client keeps */
#define MCPC_TEXT_MAX 4000   /* bytes of it, JSON-escaped, printed */
#define MCPC_COUNT_MAX 10000

static struct {
	struct event_base *base;
	struct mcp_client *c;
	struct event *err_ev, *drain_ev;
	char tail[MCPC_TAIL_MAX];
	size_t tlen;  /* bytes in tail, the newest last */
	int err_eof;
	char why[1024];
	int status;
	uint64_t t0;          /* this process's start, monotonic microseconds */
	uint64_t ready_us, listed_us;
	json_t *out;          /* the answer being made (the listing done) */
	/* the calls (TOOL given) */
	const char *tool;
	json_t *args;
	unsigned count, done, errors;
	uint32_t call_ms;
	uint64_t call_t0, calls_t0;
	uint64_t *us;         /* each call's time */
	json_t *first;        /* the first result: {is_error, text, cut} */
} M;

static uint64_t
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* Keep the last MCPC_TAIL_MAX bytes of what the server wrote on stderr. */
static void
tail_add(const char *p, size_t n)
{
	if (n >= sizeof(M.tail)) {
		memcpy(M.tail, p + n - sizeof(M.tail), sizeof(M.tail));
		M.tlen = sizeof(M.tail);
		return;
	}
	if (M.tlen + n > sizeof(M.tail)) {
		size_t drop = M.tlen + n - sizeof(M.tail);

		memmove(M.tail, M.tail + drop, M.tlen - drop);
		M.tlen -= drop;
	}
	memcpy(M.tail + M.tlen, p, n);
	M.tlen += n;
}

static void
finish_failure(void)
{
	size_t i;

	for (i = 0; i < M.tlen; i++)
		if (((unsigned char)M.tail[i] < 0x20 && M.tail[i] != '\n' && M.tail[i] != '\t') ||
		    (unsigned char)M.tail[i] == 0x7f)
			M.tail[i] = '?';
	while (M.tlen > 0 && (M.tail[M.tlen - 1] == '\n' || M.tail[M.tlen - 1] == ' '))
		M.tlen--;
	if (M.tlen > 0)
		printf("%s; its stderr ends:\n%.*s\n", M.why, (int)M.tlen, M.tail);
	else
		printf("%s; it wrote nothing on stderr\n", M.why);
	M.status = 1;
	event_base_loopbreak(M.base);
}

static void
on_stderr(evutil_socket_t fd, short what, void *arg)
{
	char buf[16384];
	ssize_t n;

	(void)what;
	(void)arg;
	for (;;) {
		n = read(fd, buf, sizeof(buf));
		if (n > 0) {
			tail_add(buf, (size_t)n);
			continue;
		}
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		break;
	}
	event_del(M.err_ev);
	M.err_eof = 1;
	if (M.why[0] != '\0') /* failed already, waiting for this */
		finish_failure();
}

static void
on_drain(evutil_socket_t fd, short what, void *arg)
{
	finish_failure();
}

/* The server failed: its stderr may still say why, for a moment. */
static void
fail(const char *why)
{
	struct timeval tv = { MCPC_DRAIN_MS / 1000, (MCPC_DRAIN_MS % 1000) * 1000 };

	if (M.why[0] != '\0')
		return;
	snprintf(M.why, sizeof(M.why), "%s", why != NULL && why[0] != '\0' ? why : "failed");
	if (M.c != NULL) {
		mcp_free(M.c); /* the server's EOF */
		M.c = NULL;
	}
	if (M.err_eof) {
		finish_failure();
		return;
	}
	if ((M.drain_ev = evtimer_new(M.base, on_drain, NULL)) == NULL ||
	    evtimer_add(M.drain_ev, &tv) == -1)
		finish_failure();
}

/* s, its first line only, at most max bytes (not cutting a UTF-8
 * sequence), control characters made '?'.  A new string. */
static char *
first_line(const char *s, size_t max)
{
	size_t n = strcspn(s, "\r\n"), i;
	char *o;

	if (n > max) {
		n = max;
		while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
			n--;
	}
	if ((o = strndup(s, n)) == NULL)
		fatal("strndup");
	for (i = 0; i < n; i++)
		if ((unsigned char)o[i] < 0x20 || (unsigned char)o[i] == 0x7f)
			o[i] = '?';
	return o;
}

/* Print M.out (consumed) and stop. */
static void
finish_ok(void)
{
	char *text;

	if ((text = json_dumps(M.out, JSON_COMPACT | JSON_ENSURE_ASCII)) == NULL)
		fatalx("json_dumps");
	json_decref(M.out);
	M.out = NULL;
	printf("%s\n", text);
	free(text);
	M.status = 0;
	event_base_loopbreak(M.base);
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The nearest-rank p-th percentile of the sorted v[0..n). */
static json_t *
pct(const uint64_t *v, size_t n, unsigned p)
{
	size_t k = (n * p + 99) / 100;

	return json_integer((json_int_t)v[k > 0 ? k - 1 : 0]);
}

/* A result's text as printed: control characters but newline and tab made
 * '?', cut (at a UTF-8 boundary) where its JSON form could pass
 * MCPC_TEXT_MAX bytes.  A new string; *cut says whether it was cut. */
static char *
shown_text(const char *t, size_t len, int *cut)
{
	size_t i, cost = 0, step;
	unsigned char ch;
	char *o;

	for (i = 0; i < len; i += step) {
		ch = (unsigned char)t[i];
		step = 1;
		if (ch >= 0xc0)
			while (i + step < len && ((unsigned char)t[i + step] & 0xc0) == 0x80)
				step++;
		cost += ch >= 0x80 ? 12 : ch == '"' || ch == '\\' || ch == '\n' || ch == '\t' ? 2 : 1;
		if (cost > MCPC_TEXT_MAX)
			break;
	}
	*cut = i < len;
	if ((o = strndup(t, i)) == NULL)
		fatal("strndup");
	for (i = 0; o[i] != '\0'; i++)
		if (((unsigned char)o[i] < 0x20 && o[i] != '\n' && o[i] != '\t') ||
		    (unsigned char)o[i] == 0x7f)
			o[i] = '?';
	return o;
}

static void call_next(void);

static void
on_call(void *arg, uint64_t call, struct mcp_result *res)
{
	char *text;
	int cut;

	M.us[M.done++] = now_us() - M.call_t0;
	if (res->is_error)
		M.errors++;
	if (M.first == NULL) {
		text = shown_text(res->text != NULL ? res->text : "", res->text_len, &cut);
		M.first = json_pack("{s:b, s:s, s:b}", "is_error", res->is_error, "text", text,
		    "cut", cut || res->cut);
		free(text);
		if (M.first == NULL)
			fatalx("out of memory");
	}
	mcp_result_free(res);
	call_next();
}

/* The next call, or the answer when they are all done. */
static void
call_next(void)
{
	json_t *call, *us;
	char why[160];

	if (M.done < M.count) {
		if (M.done > 0 && now_us() - M.calls_t0 > (uint64_t)M.call_ms * 1000) {
			snprintf(why, sizeof(why), "the calls took longer than the server's "
			    "call_timeout (%u s) together: %u of %u done", M.call_ms / 1000, M.done,
			    M.count);
			fail(why);
			return;
		}
		M.call_t0 = now_us();
		mcp_call(M.c, M.tool, M.args, on_call, NULL);
		return;
	}
	qsort(M.us, M.done, sizeof(*M.us), cmp_u64);
	us = json_pack("{s:o, s:o, s:o, s:o, s:o}", "min", pct(M.us, M.done, 0), "median",
	    pct(M.us, M.done, 50), "p90", pct(M.us, M.done, 90), "p99", pct(M.us, M.done, 99),
	    "max", pct(M.us, M.done, 100));
	call = json_pack("{s:s, s:I, s:I, s:O, s:O, s:O, s:o}", "tool", M.tool, "count",
	    (json_int_t)M.done, "errors", (json_int_t)M.errors, "is_error",
	    json_object_get(M.first, "is_error"), "text", json_object_get(M.first, "text"),
	    "cut", json_object_get(M.first, "cut"), "us", us);
	if (us == NULL || call == NULL || json_object_set_new(M.out, "call", call) == -1)
		fatalx("out of memory");
	finish_ok();
}

static void
on_list(void *arg, struct mcp_tools *t, const char *err)
{
	json_t *out, *tools, *one;
	const char *desc;
	char *name, *d;
	size_t i, bytes = 256, shown = 0;

	if (t == NULL) {
		fail(err);
		return;
	}
	M.listed_us = now_us() - M.t0;
	if ((out = json_object()) == NULL || (tools = json_array()) == NULL)
		fatalx("out of memory");
	for (i = 0; i < t->n && M.tool == NULL; i++) {
		desc = json_string_value(json_object_get(t->v[i].def, "description"));
		name = first_line(t->v[i].name, 128);
		d = first_line(desc != NULL ? desc : "", MCPC_DESC_MAX);
		bytes += strlen(name) + strlen(d) * 2 + 40; /* JSON may escape a byte as 6 */
		if (bytes <= MCPC_OUT_MAX) {
			one = json_pack("{s:s, s:s}", "name", name, "description", d);
			if (one == NULL || json_array_append_new(tools, one) == -1)
				fatalx("out of memory");
			shown++;
		}
		free(name);
		free(d);
	}
	json_object_set_new(out, "protocol", json_string(mcp_version(M.c)));
	json_object_set_new(out, "era", json_string(mcp_modern(M.c) ? "modern" : "legacy"));
	json_object_set_new(out, "listed", json_integer((json_int_t)t->listed));
	json_object_set_new(out, "kept", json_integer((json_int_t)t->n));
	json_object_set_new(out, "dropped", json_integer((json_int_t)t->dropped));
	json_object_set_new(out, "shown", json_integer((json_int_t)shown));
	json_object_set_new(out, "tools", tools);
	json_object_set_new(out, "ready_us", json_integer((json_int_t)M.ready_us));
	json_object_set_new(out, "listed_us", json_integer((json_int_t)M.listed_us));
	mcp_tools_free(t);
	M.out = out;
	if (M.tool == NULL) {
		finish_ok();
		return;
	}
	M.calls_t0 = now_us();
	call_next();
}

static void
on_ready(void *arg, const char *err)
{
	if (err != NULL) {
		fail(err);
		return;
	}
	M.ready_us = now_us() - M.t0;
	mcp_list_tools(M.c, on_list, NULL);
}

static void
on_failed(void *arg, const char *err)
{
	fail(err);
}

static const struct mcp_events events = { on_ready, NULL, NULL, on_failed };

#ifdef AGRIPPA_SANITIZE
/* LeakSanitizer cannot check a process another one traces (it fails the
 * process at exit instead): a sanitized client under strace, as
 * test_mcp_sandbox.sh has it, skips the check (the runtime asks this hook
 * at exit; privsep/drop.c has the daemon's, which this program does not
 * link). */
static volatile int lsan_traced;

int __lsan_is_turned_off(void);
int
__lsan_is_turned_off(void)
{
	return lsan_traced;
}

static void
lsan_skip_if_traced(void)
{
	char line[128];
	FILE *f;

	if ((f = fopen("/proc/self/status", "r")) == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, "TracerPid:", 10) == 0 && strtol(line + 10, NULL, 10) != 0)
			lsan_traced = 1;
	fclose(f);
}
#endif

/* s as a number from 1 to max, or 0. */
static unsigned long
number(const char *s, unsigned long max)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || v == 0 || v > max)
		return 0;
	return v;
}

int
main(int argc, char *argv[])
{
	struct mcp_conf conf;
	json_error_t jerr;
	unsigned long ms;

	M.t0 = now_us();
#ifdef AGRIPPA_SANITIZE
	lsan_skip_if_traced(); /* (a tracer attaches at the fork, before this) */
#endif
	log_init(1, 0, 0);
	log_procinit("mcpc");
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	if (argc != 3 && argc != 7) {
		fprintf(stderr, "usage: agrippa-mcpc NAME START_MS [TOOL ARGS COUNT CALL_MS] "
		                "(started by agrippad only)\n");
		return 2;
	}
	if ((ms = number(argv[2], 3600000)) == 0) {
		fprintf(stderr, "agrippa-mcpc: START_MS must be 1 to 3600000\n");
		return 2;
	}
	if (argc == 7) {
		M.tool = argv[3];
		M.args = json_loads(argv[4], JSON_REJECT_DUPLICATES, &jerr);
		M.count = (unsigned)number(argv[5], MCPC_COUNT_MAX);
		M.call_ms = (uint32_t)number(argv[6], 3600000);
		if (M.tool[0] == '\0' || !json_is_object(M.args) || M.count == 0 || M.call_ms == 0) {
			fprintf(stderr, "agrippa-mcpc: TOOL a name, ARGS a JSON object, COUNT 1 to "
			                "%d, CALL_MS 1 to 3600000\n", MCPC_COUNT_MAX);
			return 2;
		}
		if ((M.us = calloc(M.count, sizeof(*M.us))) == NULL)
			fatal("calloc");
	}
	if (fcntl(MCPC_IO_FD, F_GETFD) == -1 || fcntl(MCPC_ERR_FD, F_GETFD) == -1) {
		fprintf(stderr, "agrippa-mcpc: fd 3 and 4 are the server's\n");
		return 2;
	}
	/* stdout and stderr are one pipe: the answer alone goes there (a
	 * sanitized build keeps its reports, which fail a test that reads it) */
#ifndef AGRIPPA_SANITIZE
	{
		int nul = open("/dev/null", O_WRONLY | O_CLOEXEC);

		if (nul == -1 || dup2(nul, 2) == -1)
			return 1;
		close(nul);
	}
#endif
	signal(SIGPIPE, SIG_IGN);
	if ((M.base = event_base_new()) == NULL)
		fatalx("event_base_new");
	if (evutil_make_socket_nonblocking(MCPC_ERR_FD) == -1 ||
	    (M.err_ev = event_new(M.base, MCPC_ERR_FD, EV_READ | EV_PERSIST, on_stderr, NULL)) ==
	        NULL ||
	    event_add(M.err_ev, NULL) == -1)
		fatalx("event set-up");
	memset(&conf, 0, sizeof(conf));
	conf.server = argv[1];
	conf.start_ms = (uint32_t)ms;
	conf.result_max = MCPC_RESULT_MAX;
	conf.call_ms = M.call_ms;
	conf.call_max_ms = M.call_ms > MCP_CALL_MAX_MS_DEFAULT ? M.call_ms : 0;
	M.status = 1;
	if ((M.c = mcp_new(M.base, MCPC_IO_FD, MCPC_IO_FD, &conf, &events, NULL)) == NULL) {
		printf("the MCP client could not start\n");
		return 1;
	}
	event_base_dispatch(M.base);
	fflush(stdout);
	if (M.c != NULL)
		mcp_free(M.c);
	if (M.drain_ev != NULL)
		event_free(M.drain_ev);
	event_free(M.err_ev);
	event_base_free(M.base);
	json_decref(M.out);
	json_decref(M.args);
	json_decref(M.first);
	free(M.us);
	return M.status;
}
