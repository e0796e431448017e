/*
 * agrippa-mcpc NAME START_MS: the MCP client of "agrippactl mcp test"
 * (agrippactl(8)), a transient tool of the supervisor (supervisor/mcptest.c).
 *
 * The supervisor is privileged and never reads an MCP server's bytes, so
 * speaking to a server it started is left to this process, which runs as
 * the service user with no capability, no_new_privs and no secret (not the
 * server's credentials either: it gets none): fd 3 is the client's end of
 * the server's stdin and stdout (a socket), fd 4 the read end of the
 * server's stderr.  It runs the handshake within START_MS (the server's
 * startup_timeout), lists the tools with the runner's client (runner/mcp.c)
 * and prints, on stdout:
 *   - exit 0: one JSON object, {"protocol", "era", "listed", "kept",
 *     "dropped", "shown", "tools": [{"name", "description"}]}: each
 *     description only its first line, control characters made '?', and as
 *     many tools as fit in MCPC_OUT_MAX bytes;
 *   - exit 1: one line of text, why the server failed, then the tail of its
 *     stderr (the last MCPC_TAIL_MAX bytes, control characters made '?').
 * The supervisor redacts the server's credentials from either before the
 * operator sees it.  Closing fd 3 on exit is the server's EOF.
 */
#include <sys/prctl.h>

#include <errno.h>
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

static struct {
	struct event_base *base;
	struct mcp_client *c;
	struct event *err_ev, *drain_ev;
	char tail[MCPC_TAIL_MAX];
	size_t tlen;  /* bytes in tail, the newest last */
	int err_eof;
	char why[1024];
	int status;
} M;

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

static void
on_list(void *arg, struct mcp_tools *t, const char *err)
{
	json_t *out, *tools, *one;
	const char *desc;
	char *name, *d, *text;
	size_t i, bytes = 256, shown = 0;

	if (t == NULL) {
		fail(err);
		return;
	}
	if ((out = json_object()) == NULL || (tools = json_array()) == NULL)
		fatalx("out of memory");
	for (i = 0; i < t->n; i++) {
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
	mcp_tools_free(t);
	if ((text = json_dumps(out, JSON_COMPACT | JSON_ENSURE_ASCII)) == NULL)
		fatalx("json_dumps");
	json_decref(out);
	printf("%s\n", text);
	free(text);
	M.status = 0;
	event_base_loopbreak(M.base);
}

static void
on_ready(void *arg, const char *err)
{
	if (err != NULL) {
		fail(err);
		return;
	}
	mcp_list_tools(M.c, on_list, NULL);
}

static void
on_failed(void *arg, const char *err)
{
	fail(err);
}

static const struct mcp_events events = { on_ready, NULL, NULL, on_failed };

int
main(int argc, char *argv[])
{
	struct mcp_conf conf;
	char *end;
	unsigned long ms;

	log_init(1, 0, 0);
	log_procinit("mcpc");
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	if (argc != 3) {
		fprintf(stderr, "usage: agrippa-mcpc NAME START_MS (started by agrippad only)\n");
		return 2;
	}
	errno = 0;
	ms = strtoul(argv[2], &end, 10);
	if (errno != 0 || *end != '\0' || ms == 0 || ms > 3600000) {
		fprintf(stderr, "agrippa-mcpc: START_MS must be 1 to 3600000\n");
		return 2;
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
	return M.status;
}
