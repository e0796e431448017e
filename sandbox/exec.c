/*
 * exec: one command at a time, in its own session, with stdout and stderr
 * streamed to the driver as SBX_OUTPUT frames up to sandbox.output_max
 * bytes in total (the rest is read and dropped, and the exit reports
 * truncated), then one SBX_EXIT.
 *
 * The tool server is pid 1 of the sandbox's pid namespace, so every
 * process a command leaves behind (daemonised, in another session, an
 * orphan) is a child of ours or of one of its descendants; kill(-1, ...)
 * from pid 1 reaches all of them and none of them can escape it.  That is
 * how a timeout or SBX_KILL ends the whole tree (SIGTERM, then SIGKILL
 * SBX_KILL_GRACE_MS later, for commands that ignore SIGTERM), and how a
 * finished command's leftovers are cleared before the next one.
 */
#include <sys/wait.h>

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "sandbox/sandbox.h"

#define EXEC_READ_MAX IPC_CHUNK_SIZE

struct exec_state {
	int busy;
	uint64_t id;
	pid_t pid;
	int out[3];            /* [1] stdout, [2] stderr read ends; -1 once at EOF */
	struct event *ev[3];
	struct event *timer;   /* the timeout, then the SIGKILL grace */
	int status, reaped;
	int timed_out, killing, killed;
	int truncated;
	uint64_t bytes, sent;
	struct timespec start;
};

static struct exec_state ex = { .out = { -1, -1, -1 } };

/* The environment of every command: built, never inherited (DESIGN.md 4). */
#define EXEC_ENV_BASE                                                                       \
	"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/workspace", "LANG=C.UTF-8", "TERM=dumb",   \
	    "USER=sandbox", "LOGNAME=sandbox", "SHELL=/bin/sh", "TMPDIR=/tmp",                 \
	    "AGRIPPA_SANDBOX=1"
static char *const exec_env[] = { EXEC_ENV_BASE, NULL };

/* ... and of every command of a run with a network policy: the proxy
 * variables point every tool that honours them at egress (DESIGN.md 4.1);
 * a tool that ignores them finds no route. */
#define EXEC_PROXY "http://127.0.0.1:3128"
static char *const exec_env_net[] = {
	EXEC_ENV_BASE,
	"HTTP_PROXY=" EXEC_PROXY,
	"HTTPS_PROXY=" EXEC_PROXY,
	"http_proxy=" EXEC_PROXY,
	"https_proxy=" EXEC_PROXY,
	"NO_PROXY=localhost,127.0.0.1,::1",
	"no_proxy=localhost,127.0.0.1,::1",
	"NODE_USE_ENV_PROXY=1",
	"JAVA_TOOL_OPTIONS=-Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort=3128 "
	"-Dhttps.proxyHost=127.0.0.1 -Dhttps.proxyPort=3128",
	NULL,
};

static uint64_t
exec_elapsed_ms(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)(now.tv_sec - ex.start.tv_sec) * 1000 +
	       (uint64_t)((now.tv_nsec - ex.start.tv_nsec) / 1000000);
}

static void
exec_reply_exit(struct tools *t, uint64_t id, int code, const char *msg, int64_t status,
    uint32_t sig, uint64_t ms)
{
	struct ipc_wbuf w;

	ipc_wbuf_begin(&w, IMSG_SBX_EXIT, id, 8);
	ipc_put_u64(&w, (uint64_t)code);
	ipc_put_strn(&w, msg, strnlen(msg, IPC_ERRMSG_MAX));
	ipc_put_i64(&w, status);
	ipc_put_u64(&w, sig);
	ipc_put_bool(&w, ex.busy && ex.timed_out);
	ipc_put_bool(&w, ex.busy && ex.truncated);
	ipc_put_u64(&w, ms);
	ipc_put_u64(&w, ex.busy ? ex.bytes : 0);
	tools_send(t, &w);
}

/* Everything but us, in the whole namespace. */
static void
exec_signal_all(int sig)
{
	if (kill(-1, sig) == -1 && errno != ESRCH)
		log_warn("kill(-1, %d)", sig);
}

/* Done when the command was reaped and both pipes reached EOF. */
static void
exec_maybe_finish(struct tools *t)
{
	int64_t status = -1;
	uint32_t sig = 0;

	if (!ex.busy || !ex.reaped || ex.out[1] != -1 || ex.out[2] != -1)
		return;
	if (ex.timer != NULL) {
		event_free(ex.timer);
		ex.timer = NULL;
	}
	if (WIFEXITED(ex.status))
		status = WEXITSTATUS(ex.status);
	else if (WIFSIGNALED(ex.status))
		sig = (uint32_t)WTERMSIG(ex.status);
	exec_reply_exit(t, ex.id, 0, ex.timed_out ? "timed out" : ex.killed ? "killed" : "", status,
	    sig, exec_elapsed_ms());
	ex.busy = 0;
}

static void
exec_close_stream(int s)
{
	if (ex.ev[s] != NULL) {
		event_free(ex.ev[s]);
		ex.ev[s] = NULL;
	}
	if (ex.out[s] != -1) {
		close(ex.out[s]);
		ex.out[s] = -1;
	}
}

static void
exec_on_output(evutil_socket_t fd, short what, void *arg)
{
	struct tools *t = arg;
	int s = fd == ex.out[1] ? 1 : 2;
	uint8_t buf[EXEC_READ_MAX];
	struct ipc_wbuf w;
	uint64_t room;
	ssize_t n;

	if ((n = read(fd, buf, sizeof(buf))) <= 0) {
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		exec_close_stream(s);
		exec_maybe_finish(t);
		return;
	}
	ex.bytes += (uint64_t)n;
	room = t->hello.output_max - ex.sent;
	if ((uint64_t)n > room)
		ex.truncated = 1;
	if (room == 0)
		return;
	ipc_wbuf_begin(&w, IMSG_SBX_OUTPUT, ex.id, 2);
	ipc_put_u64(&w, (uint64_t)s);
	ipc_put_bin(&w, buf, (size_t)((uint64_t)n < room ? (uint64_t)n : room));
	tools_send(t, &w);
	ex.sent += (uint64_t)n < room ? (uint64_t)n : room;
}

static void
exec_on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct timeval grace = { SBX_KILL_GRACE_MS / 1000, (SBX_KILL_GRACE_MS % 1000) * 1000 };

	if (!ex.killing) {
		/* Timed out: ask everything to stop, then insist. */
		ex.timed_out = 1;
		ex.killing = 1;
		exec_signal_all(SIGTERM);
		evtimer_add(ex.timer, &grace);
		return;
	}
	exec_signal_all(SIGKILL);
}

void
exec_kill(struct tools *t, uint64_t id)
{
	if (!ex.busy || ex.id != id)
		return; /* finished already, or never ours: nothing to stop */
	ex.killed = 1;
	ex.killing = 1;
	exec_signal_all(SIGKILL);
}

static void
exec_close_pair(const int *p)
{
	if (p[0] != -1)
		close(p[0]);
	if (p[1] != -1)
		close(p[1]);
}

/* argv from the request: NUL-terminated copies (freed by the caller). */
static char **
exec_argv(const struct ipc_sbx_exec *req)
{
	struct ipc_cur a = req->argv;
	const char *s;
	size_t len, i = 0, n = req->shell ? 3 : req->argc;
	char **argv = calloc(n + 1, sizeof(*argv));

	if (argv == NULL)
		fatal("calloc");
	if (req->shell) {
		argv[i++] = strdup("/bin/sh");
		argv[i++] = strdup("-c");
	}
	/* Not strndup: a msgpack string has no NUL after it to stop at. */
	while (a.i < a.n && ipc_get_str(&a, &s, &len, IPC_SBX_ARG_MAX) == 0) {
		if ((argv[i] = malloc(len + 1)) != NULL) {
			memcpy(argv[i], s, len);
			argv[i][len] = '\0';
		}
		i++;
	}
	for (i = 0; i < n; i++)
		if (argv[i] == NULL)
			fatal("strdup");
	return argv;
}

static void
exec_argv_free(char **argv)
{
	size_t i;

	for (i = 0; argv[i] != NULL; i++)
		free(argv[i]);
	free(argv);
}

/*
 * posix_spawn (vfork-like: no copy of our address space, and exec errors
 * come back as its result): a new session, default signal dispositions and
 * an empty mask, stdin /dev/null, stdout/stderr the pipes, cwd, and no
 * other descriptor.  Returns 0 or an errno value.
 */
static int
exec_spawn(struct tools *t, const struct ipc_sbx_exec *req, int cwd)
{
	int out[2] = { -1, -1 }, err[2] = { -1, -1 }, e;
	char **argv = exec_argv(req);
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, all;
	pid_t pid;

	if (pipe2(out, O_CLOEXEC) == -1 || pipe2(err, O_CLOEXEC) == -1) {
		e = errno;
		exec_close_pair(out);
		exec_close_pair(err);
		exec_argv_free(argv);
		return e;
	}
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawnattr_init(&at);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK |
	    POSIX_SPAWN_SETSIGDEF);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &all);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	posix_spawn_file_actions_adddup2(&fa, err[1], 2);
	posix_spawn_file_actions_addfchdir_np(&fa, cwd);
	posix_spawn_file_actions_addclosefrom_np(&fa, 3);
	e = posix_spawnp(&pid, argv[0], &fa, &at, argv, t->network ? exec_env_net : exec_env);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	exec_argv_free(argv);
	close(out[1]);
	close(err[1]);
	if (e != 0) {
		close(out[0]);
		close(err[0]);
		return e;
	}
	ex.pid = pid;
	ex.out[1] = out[0];
	ex.out[2] = err[0];
	return 0;
}

void
exec_start(struct tools *t, uint64_t id, const struct ipc_sbx_exec *req)
{
	uint32_t ms = req->timeout_ms != 0 ? req->timeout_ms : t->hello.timeout_max_ms;
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	char msg[IPC_ERRMSG_MAX];
	int cwd, rc, s;

	if (ex.busy) {
		exec_reply_exit(t, id, EBUSY, "another command is running", -1, 0, 0);
		return;
	}
	if (t->ws.readonly) {
		exec_reply_exit(t, id, EROFS, "read-only workspace: commands are not run", -1, 0, 0);
		return;
	}
	if (ms > t->hello.timeout_max_ms) {
		snprintf(msg, sizeof(msg), "timeout %u ms is above sandbox.exec_timeout (%u ms)",
		    req->timeout_ms, t->hello.timeout_max_ms);
		exec_reply_exit(t, id, EINVAL, msg, -1, 0, 0);
		return;
	}
	if ((rc = ws_open_dir(&t->ws, req->cwd, &cwd, msg, sizeof(msg))) != 0) {
		exec_reply_exit(t, id, rc, msg, -1, 0, 0);
		return;
	}
	/* Leftovers of an earlier command (background jobs) go first. */
	exec_signal_all(SIGKILL);
	memset(&ex, 0, sizeof(ex));
	ex.out[0] = ex.out[1] = ex.out[2] = -1;
	clock_gettime(CLOCK_MONOTONIC, &ex.start);
	ex.id = id;
	if ((rc = exec_spawn(t, req, cwd)) != 0) {
		close(cwd);
		snprintf(msg, sizeof(msg), "cannot start the command: %s", strerror(rc));
		exec_reply_exit(t, id, rc, msg, -1, 0, 0);
		return;
	}
	close(cwd);
	ex.busy = 1;
	for (s = 1; s <= 2; s++) {
		ex.ev[s] = event_new(t->base, ex.out[s], EV_READ | EV_PERSIST, exec_on_output, t);
		if (ex.ev[s] == NULL || event_add(ex.ev[s], NULL) == -1)
			fatalx("exec: event");
	}
	if ((ex.timer = evtimer_new(t->base, exec_on_timer, t)) == NULL ||
	    evtimer_add(ex.timer, &tv) == -1)
		fatalx("exec: timer");
	exec_reap(t); /* a very short command may be gone already */
}

void
exec_reap(struct tools *t)
{
	pid_t pid;
	int status;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		if (!ex.busy || pid != ex.pid || ex.reaped)
			continue;
		ex.status = status;
		ex.reaped = 1;
		/* The command is done: whatever it left behind goes now, which
		 * also closes the pipes a background job still held. */
		exec_signal_all(SIGKILL);
	}
	exec_maybe_finish(t);
}
