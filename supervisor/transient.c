/*
 * Transient tools: "agrippa-tree ROLE ARGS" (remover/main.c) started for
 * one tree and gone when it is done (the remover, remove.c; the chowner,
 * runs.c), so that the supervisor's loop never walks a tree; and, the same
 * way, "agrippa-mcpc" (mcp test's MCP client, mcptest.c).  A tool gets
 * the tree as fd 3, optionally a file to write to as fd 4 (the chowner's
 * list of what it gave), no other descriptor but /dev/null and a pipe for
 * its stdout and stderr, an environment of PATH and the sanitizers'
 * options, its own process group,
 * no_new_privs and PR_SET_PDEATHSIG.  It runs as uid:gid with no
 * supplementary groups and no capability, or with CAP_CHOWN alone (in the
 * permitted, effective and ambient sets, the bounding set cut down to it,
 * so that it survives the execve and nothing else does) when it is to give
 * a tree to another user.  In development mode it stays the daemon's own
 * user, with nothing raised.
 *
 * The caller hears once, when the tool has exited and its output (the
 * first TRANSIENT_OUT_MAX - 1 bytes) is read to its end.
 */
#include <sys/capability.h>
#include <sys/prctl.h>
#include <sys/queue.h>
#include <sys/wait.h>

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "supervisor/supervisor.h"

#define TRANSIENT_FD 3
#define TRANSIENT_ARGS 8

struct transient {
	LIST_ENTRY(transient) entry;
	pid_t pid;
	int out; /* its stdout and stderr, -1 once at EOF */
	struct event *ev;
	int reaped, status;
	char buf[TRANSIENT_OUT_MAX];
	size_t len;
	transient_cb cb;
	void *arg;
};
static LIST_HEAD(, transient) transients = LIST_HEAD_INITIALIZER(transients);

/* In the child: only CAP_CHOWN may outlive the uid change and the execve.
 * The bounding set is cut while CAP_SETPCAP is still ours. */
static int
tr_keep_chown(void)
{
	cap_value_t cap, max = cap_max_bits();

	for (cap = 0; cap < max; cap++)
		if (cap != CAP_CHOWN && CAP_IS_SUPPORTED(cap) && cap_drop_bound(cap) == -1)
			return -1;
	return prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0);
}

/* ... and after the uid change, raised again as the one capability. */
static int
tr_raise_chown(void)
{
	cap_value_t chown_cap = CAP_CHOWN;
	cap_t c;
	int rv;

	if ((c = cap_init()) == NULL)
		return -1;
	rv = cap_set_flag(c, CAP_PERMITTED, 1, &chown_cap, CAP_SET) == -1 ||
	             cap_set_flag(c, CAP_EFFECTIVE, 1, &chown_cap, CAP_SET) == -1 ||
	             cap_set_flag(c, CAP_INHERITABLE, 1, &chown_cap, CAP_SET) == -1 ||
	             cap_set_proc(c) == -1
	         ? -1
	         : 0;
	cap_free(c);
	if (rv == -1 || cap_set_ambient(CAP_CHOWN, CAP_SET) == -1 ||
	    prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) == -1)
		return -1;
	return 0;
}

/* In the child: become the tool.  Never returns. */
__attribute__((noreturn)) static void
tr_exec(const char *exe, const char *name, const char *role, const char *const args[], int fd,
        int fd2, int out, uid_t uid, gid_t gid, int chown_cap, pid_t parent)
{
	static const char *const pass[] = {"ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"};
	char *env[8], *argv[TRANSIENT_ARGS + 3], buf[3][512];
	size_t i, n = 0, k = 0;
	const char *v;
	int nul;

	/* above 4 first, so that no dup2 below lands on another */
	if ((fd = fcntl(fd, F_DUPFD, 10)) == -1 || (out = fcntl(out, F_DUPFD, 10)) == -1 ||
	    (fd2 != -1 && (fd2 = fcntl(fd2, F_DUPFD, 10)) == -1) ||
	    (nul = open("/dev/null", O_RDONLY)) == -1 || dup2(nul, 0) == -1 || dup2(out, 1) == -1 ||
	    dup2(out, 2) == -1 || dup2(fd, TRANSIENT_FD) == -1 ||
	    (fd2 != -1 && dup2(fd2, TRANSIENT_FD + 1) == -1))
		_exit(126);
	closefrom(fd2 != -1 ? TRANSIENT_FD + 2 : TRANSIENT_FD + 1);
	setpgid(0, 0); /* a terminal's Ctrl-C is for the supervisor alone */
	if (!sup.devmode) {
		if ((chown_cap && tr_keep_chown() == -1) || setgroups(0, NULL) == -1 ||
		    setresgid(gid, gid, gid) == -1 || setresuid(uid, uid, uid) == -1 ||
		    (chown_cap && tr_raise_chown() == -1))
			_exit(126);
	}
	/* after the id change, which clears the parent-death signal */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1 ||
	    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) == -1 || getppid() != parent)
		_exit(126);
	env[n++] = "PATH=/usr/bin:/bin";
	for (i = 0; i < sizeof(pass) / sizeof(pass[0]); i++)
		if ((v = getenv(pass[i])) != NULL &&
		    snprintf(buf[i], sizeof(buf[i]), "%s=%s", pass[i], v) < (int)sizeof(buf[i]))
			env[n++] = buf[i];
	env[n] = NULL;
	argv[k++] = (char *)name;
	if (role != NULL)
		argv[k++] = (char *)role;
	for (i = 0; args != NULL && args[i] != NULL && i < TRANSIENT_ARGS; i++)
		argv[k++] = (char *)args[i];
	argv[k] = NULL;
	execve(exe, argv, env);
	_exit(127);
}

/* Exited and read to the end: the caller hears, and t goes. */
static void
tr_finish(struct transient *t)
{
	LIST_REMOVE(t, entry);
	t->buf[t->len] = '\0';
	t->cb(t->arg, t->status, t->buf);
	free(t);
}

static void
tr_readable(evutil_socket_t fd, short what, void *arg)
{
	struct transient *t = arg;
	char drop[512];
	ssize_t n;

	(void)what;
	for (;;) {
		if (t->len < sizeof(t->buf) - 1)
			n = read(fd, t->buf + t->len, sizeof(t->buf) - 1 - t->len);
		else
			n = read(fd, drop, sizeof(drop)); /* beyond what is kept */
		if (n > 0) {
			if (t->len < sizeof(t->buf) - 1)
				t->len += (size_t)n;
			continue;
		}
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		break; /* EOF: the tool is gone (or going) */
	}
	event_free(t->ev);
	t->ev = NULL;
	close(t->out);
	t->out = -1;
	if (t->reaped)
		tr_finish(t);
}

static pid_t
tr_start(const char *exe, const char *name, const char *role, const char *const args[], int fd,
         int fd2, uid_t uid, gid_t gid, int chown_cap, transient_cb cb, void *arg)
{
	struct transient *t;
	int p[2];
	pid_t pid, self = getpid();

	if (pipe2(p, O_CLOEXEC) == -1) {
		log_warn("%s %s: pipe", name, role ? role : "");
		close(fd);
		if (fd2 != -1)
			close(fd2);
		return -1;
	}
	if ((pid = fork()) == -1) {
		log_warn("%s %s: fork", name, role ? role : "");
		close(fd);
		if (fd2 != -1)
			close(fd2);
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0)
		tr_exec(exe, name, role, args, fd, fd2, p[1], uid, gid, chown_cap, self);
	close(fd);
	if (fd2 != -1)
		close(fd2);
	close(p[1]);
	if ((t = calloc(1, sizeof(*t))) == NULL)
		fatal("calloc");
	if (evutil_make_socket_nonblocking(p[0]) == -1 ||
	    (t->ev = event_new(sup.base, p[0], EV_READ | EV_PERSIST, tr_readable, t)) == NULL ||
	    event_add(t->ev, NULL) == -1)
		fatalx("%s %s: event set-up", name, role ? role : "");
	t->pid = pid;
	t->out = p[0];
	t->cb = cb;
	t->arg = arg;
	LIST_INSERT_HEAD(&transients, t, entry);
	log_debug("%s %s: %ld started (uid %lu%s)", name, role ? role : "", (long)pid, (unsigned long)uid,
	          chown_cap ? ", CAP_CHOWN" : "");
	return pid;
}

pid_t
transient_start(const char *role, const char *const args[], int fd, int fd2, uid_t uid,
                gid_t gid, int chown_cap, transient_cb cb, void *arg)
{
	return tr_start(sup.tree_exe, "agrippa-tree", role, args, fd, fd2, uid, gid, chown_cap, cb,
	                arg);
}

pid_t
transient_start_exe(const char *exe, const char *name, const char *const args[], int fd,
                    int fd2, uid_t uid, gid_t gid, transient_cb cb, void *arg)
{
	return tr_start(exe, name, NULL, args, fd, fd2, uid, gid, 0, cb, arg);
}

int
transient_reaped(pid_t pid, int status)
{
	struct transient *t;

	LIST_FOREACH(t, &transients, entry) {
		if (t->pid != pid)
			continue;
		t->reaped = 1;
		t->status = status;
		if (t->out == -1)
			tr_finish(t);
		return 1;
	}
	return 0;
}
