/*
 * mcpcall: the runner's MCP client (runner/mcp.h) against a real server,
 * for tests/integration/test_mcp_client.sh.  It starts COMMAND with its
 * stdin and stdout on a pipe pair (stderr as it is), runs the steps in the
 * order given, one at a time, then closes the server's stdin and waits for
 * it to exit (SIGTERM after 5 s, then SIGKILL).
 *
 *   mcpcall [-n SERVER] [-s START_MS] [-t CALL_MS] [-T CALL_MAX_MS]
 *           [-m RESULT_MAX] [-k TOOLS_MAX] STEP... -- COMMAND [ARG...]
 *
 * Steps:
 *   -l            list the tools: "tool MODEL_NAME NAME" for each kept, then
 *                 "listed N kept K dropped D"
 *   -w            wait (up to START_MS) for notifications/tools/list_changed:
 *                 "changed N"
 *   -c TOOL=JSON  call TOOL with the arguments JSON (an object): "call TOOL
 *                 error=E images=I cut=C", the text, then "end"; progress
 *                 on the way as "progress P/T"
 *   -x TOOL=JSON  call TOOL and cancel it after CALL_MS / 2: as -c
 * The first line is "version V modern|legacy".  Exits 0 when every step
 * ran (a tool error is a result, not a failure), 1 when the client failed
 * (the error on stderr), 2 on bad usage.
 */
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <event2/event.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "runner/mcp.h"

#define STEPS_MAX 64

struct step {
	char kind;
	char *tool;
	json_t *args;
};

static struct {
	struct event_base *base;
	struct mcp_client *c;
	struct mcp_conf conf;
	struct step steps[STEPS_MAX];
	size_t nsteps, cur;
	int changed, waiting;
	struct event *wait_ev, *cancel_ev;
	uint64_t call;
	int status;
} M;

static void step_next(void);

static void
usage(void)
{
	fprintf(stderr, "usage: mcpcall [-n SERVER] [-s START_MS] [-t CALL_MS] [-T CALL_MAX_MS] "
	    "[-m RESULT_MAX] [-k TOOLS_MAX] {-l | -w | -c TOOL=JSON | -x TOOL=JSON}... -- "
	    "COMMAND [ARG...]\n");
	exit(2);
}

static void
done(int status)
{
	M.status = status;
	event_base_loopbreak(M.base);
}

static void
on_ready(void *arg, const char *err)
{
	if (err != NULL) {
		fprintf(stderr, "mcpcall: %s: %s\n", M.conf.server, err);
		return done(1);
	}
	printf("version %s %s\n", mcp_version(M.c), mcp_modern(M.c) ? "modern" : "legacy");
	step_next();
}

static void
on_changed(void *arg)
{
	M.changed++;
	if (M.waiting) {
		M.waiting = 0;
		evtimer_del(M.wait_ev);
		printf("changed %d\n", M.changed);
		step_next();
	}
}

static void
on_progress(void *arg, uint64_t call, double p, double total, const char *message)
{
	printf("progress %g/%g\n", p, total);
}

static void
on_failed(void *arg, const char *err)
{
	fprintf(stderr, "mcpcall: %s: %s\n", M.conf.server, err);
	done(1);
}

static const struct mcp_events events = {on_ready, on_changed, on_progress, on_failed};

static void
on_list(void *arg, struct mcp_tools *t, const char *err)
{
	size_t i;

	if (t == NULL) {
		fprintf(stderr, "mcpcall: %s\n", err);
		return done(1);
	}
	for (i = 0; i < t->n; i++)
		printf("tool %s %s\n", t->v[i].model_name, t->v[i].name);
	printf("listed %zu kept %zu dropped %zu\n", t->listed, t->n, t->dropped);
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
	step_next();
}

static void
wait_over(evutil_socket_t fd, short what, void *arg)
{
	fprintf(stderr, "mcpcall: no notifications/tools/list_changed\n");
	done(1);
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
		return done(0);
	s = &M.steps[M.cur++];
	switch (s->kind) {
	case 'l':
		mcp_list_tools(M.c, on_list, NULL);
		break;
	case 'w':
		if (M.changed > 0) {
			printf("changed %d\n", M.changed);
			return step_next();
		}
		M.waiting = 1;
		tv.tv_sec = M.conf.start_ms / 1000;
		tv.tv_usec = 0;
		evtimer_add(M.wait_ev, &tv);
		break;
	case 'c':
	case 'x':
		M.call = mcp_call(M.c, s->tool, s->args, on_call, s);
		if (s->kind == 'x') {
			tv.tv_sec = M.conf.call_ms / 2000;
			tv.tv_usec = (M.conf.call_ms / 2 % 1000) * 1000;
			evtimer_add(M.cancel_ev, &tv);
		}
		break;
	}
}

static void
step_add(char kind, const char *arg)
{
	struct step *s;
	json_error_t je;
	const char *eq;

	if (M.nsteps == STEPS_MAX)
		usage();
	s = &M.steps[M.nsteps++];
	s->kind = kind;
	if (arg == NULL)
		return;
	if ((eq = strchr(arg, '=')) == NULL)
		usage();
	if ((s->tool = strndup(arg, (size_t)(eq - arg))) == NULL)
		fatal("strndup");
	if ((s->args = json_loads(eq + 1, 0, &je)) == NULL) {
		fprintf(stderr, "mcpcall: %s: %s\n", arg, je.text);
		exit(2);
	}
}

static unsigned long
num(const char *s)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno != 0 || *end != '\0' || end == s)
		usage();
	return v;
}

/* COMMAND on a pipe pair: *rfd its stdout, *wfd its stdin. */
static pid_t
spawn(char **argv, int *rfd, int *wfd)
{
	int in[2], out[2];
	pid_t pid;

	if (pipe(in) == -1 || pipe(out) == -1)
		fatal("pipe");
	if ((pid = fork()) == -1)
		fatal("fork");
	if (pid == 0) {
		if (dup2(in[0], 0) == -1 || dup2(out[1], 1) == -1)
			_exit(127);
		close(in[0]);
		close(in[1]);
		close(out[0]);
		close(out[1]);
		signal(SIGPIPE, SIG_DFL);
		execvp(argv[0], argv);
		fprintf(stderr, "mcpcall: %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	*rfd = out[0];
	*wfd = in[1];
	return pid;
}

/* The server's exit, once its stdin is closed: SIGTERM after 5 s, SIGKILL
 * after 5 more. */
static void
reap(pid_t pid)
{
	int st, i;

	for (i = 0; i < 200; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			goto out;
		if (i == 100)
			kill(pid, SIGTERM);
		usleep(50000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
out:
	if (WIFEXITED(st))
		printf("exit %d\n", WEXITSTATUS(st));
	else
		printf("signal %d\n", WTERMSIG(st));
}

int
main(int argc, char **argv)
{
	int ch, rfd, wfd;
	size_t i;
	pid_t pid;

	log_init(1, 0, 0);
	log_procinit("mcpcall");
	signal(SIGPIPE, SIG_IGN);
	if (sodium_init() == -1)
		fatalx("sodium_init");
	M.conf.server = "server";
	while ((ch = getopt(argc, argv, "n:s:t:T:m:k:lwc:x:")) != -1) {
		switch (ch) {
		case 'n':
			M.conf.server = optarg;
			break;
		case 's':
			M.conf.start_ms = (uint32_t)num(optarg);
			break;
		case 't':
			M.conf.call_ms = (uint32_t)num(optarg);
			break;
		case 'T':
			M.conf.call_max_ms = (uint32_t)num(optarg);
			break;
		case 'm':
			M.conf.result_max = num(optarg);
			break;
		case 'k':
			M.conf.tools_max = num(optarg);
			break;
		case 'l':
		case 'w':
			step_add((char)ch, NULL);
			break;
		case 'c':
		case 'x':
			step_add((char)ch, optarg);
			break;
		default:
			usage();
		}
	}
	if (optind >= argc)
		usage();
	if (M.conf.start_ms == 0)
		M.conf.start_ms = MCP_START_MS_DEFAULT;
	if (M.conf.call_ms == 0)
		M.conf.call_ms = MCP_CALL_MS_DEFAULT;
	if ((M.base = event_base_new()) == NULL || (M.wait_ev = evtimer_new(M.base, wait_over,
	    NULL)) == NULL || (M.cancel_ev = evtimer_new(M.base, cancel_now, NULL)) == NULL)
		fatalx("libevent");
	pid = spawn(argv + optind, &rfd, &wfd);
	if ((M.c = mcp_new(M.base, rfd, wfd, &M.conf, &events, NULL)) == NULL)
		fatalx("mcp_new");
	M.status = 1;
	event_base_dispatch(M.base);
	mcp_free(M.c); /* the server's stdin closes: it should exit */
	reap(pid);
	for (i = 0; i < M.nsteps; i++) {
		free(M.steps[i].tool);
		json_decref(M.steps[i].args);
	}
	event_free(M.wait_ev);
	event_free(M.cancel_ev);
	event_base_free(M.base);
	return M.status;
}
