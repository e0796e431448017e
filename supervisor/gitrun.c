/*
 * Starting the transient git helper (agrippa-git, beside agrippad) for one
 * fetch, checkout or patch.  The supervisor is the only process that can
 * decrypt a repository token; it hands the token to the helper over a socket
 * pair created for this fetch alone (never argv, never the environment),
 * wipes its own copies, and waits for one IMSG_GIT_RESULT.
 *
 * The helper runs as the service user (or, in development mode, as the
 * daemon's own user) with no supplementary groups, no_new_privs and
 * PR_SET_PDEATHSIG, with fd 3 its only descriptor and an environment that
 * names no home and no configuration.  It is killed after
 * GITRUN_TIMEOUT_SECS.  Up to GITRUN_SPARES helpers are started ahead of
 * the next requests while the daemon is busy (spares, below): each is the
 * same process as one started for its request, only earlier.
 */
#include <sys/prctl.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <errno.h>
#include <event2/event.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "supervisor/supervisor.h"

#define GITRUN_TIMEOUT_SECS 600
#define GITRUN_READ_MS 2000
/* Spares: helpers started ahead, waiting for their request, so that a
 * fetch or a checkout does not wait for the exec and the dynamic linking
 * of agrippa-git (about 8 ms of each run's set-up).  A spare holds nothing
 * until its request comes; one that waited longer than GITRUN_SPARE_MS is
 * not used (the helper gives up on a request after 10 s). */
#define GITRUN_SPARES 4 /* a run takes two (fetch, checkout); the next finds two more */
#define GITRUN_SPARE_MS 7000
#define GITRUN_SPARE_DELAY_MS 50

struct gitrun {
	LIST_ENTRY(gitrun) entry;
	pid_t pid;
	int fd;
	struct event *ev, *timer;
	gitrun_cb cb; /* NULL once called or abandoned */
	gitrun_pr_cb prcb; /* ... for a push or a pull request */
	enum gitrun_kind kind;
	void *arg;
	int exited;
};
static LIST_HEAD(, gitrun) gitruns = LIST_HEAD_INITIALIZER(gitruns);

static struct spare {
	pid_t pid; /* 0: none */
	int fd;
	uint64_t born; /* CLOCK_MONOTONIC ms */
} spares[GITRUN_SPARES];
static struct event *spare_ev; /* drops the spares that waited too long */
static struct event *fill_ev;  /* makes spares, a little after one was taken */

static void
gitrun_free_if_done(struct gitrun *g)
{
	if (g->cb != NULL || g->prcb != NULL || !g->exited)
		return;
	LIST_REMOVE(g, entry);
	free(g);
}

/* Call back once, then stop listening (the process may still be exiting). */
static void
gitrun_finish(struct gitrun *g, int ok, const char *error, const char *base, uint64_t size,
              const char *ref)
{
	gitrun_cb cb = g->cb;
	gitrun_pr_cb prcb = g->prcb;
	struct ipc_pr_result failed;

	g->cb = NULL;
	g->prcb = NULL;
	if (g->ev != NULL)
		event_free(g->ev);
	if (g->timer != NULL)
		event_free(g->timer);
	g->ev = g->timer = NULL;
	if (g->fd >= 0)
		close(g->fd);
	g->fd = -1;
	if (!g->exited)
		kill(g->pid, SIGKILL);
	if (cb != NULL)
		cb(g->arg, ok, error, base, size, ref);
	if (prcb != NULL) {
		memset(&failed, 0, sizeof(failed));
		prcb(g->arg, &failed, error);
	}
	gitrun_free_if_done(g);
}

/* A push's or a pull request's answer. */
static void
gitrun_pr_answer(struct gitrun *g, struct ipc_msg *m)
{
	static struct ipc_pr_result r;
	char error[IPC_ERRMSG_MAX + 1];
	gitrun_pr_cb prcb = g->prcb;
	void *arg = g->arg; /* g may be gone after gitrun_finish */

	if (m->type != IMSG_PR_RESULT || ipc_dec_pr_result(m->body, &r) == -1) {
		ipc_msg_free(m);
		gitrun_finish(g, 0, "the git helper sent something else than its result", "", 0, "");
		return;
	}
	snprintf(error, sizeof(error), "%.*s", (int)r.errlen, r.error);
	r.error = error;
	r.errlen = strlen(error);
	ipc_msg_free(m);
	g->prcb = NULL; /* called here, not by gitrun_finish */
	gitrun_finish(g, r.ok, error, "", 0, "");
	prcb(arg, &r, error);
}

static void
gitrun_readable(evutil_socket_t fd, short what, void *arg)
{
	struct gitrun *g = arg;
	struct ipc_git_result r;
	struct ipc_msg m;
	const char *why;
	char error[IPC_ERRMSG_MAX + 1];

	if (ipc_read_frame(fd, ROLE_SUPERVISOR, ROLE_GITHELPER, IPC_MAX_FRAME_DEFAULT,
	                   GITRUN_READ_MS, &m, &why) == -1) {
		gitrun_finish(g, 0, "the git helper ended without an answer", "", 0, "");
		return;
	}
	if (g->kind == GITRUN_PUSH || g->kind == GITRUN_PR) {
		gitrun_pr_answer(g, &m);
		return;
	}
	if (m.type != IMSG_GIT_RESULT || ipc_dec_git_result(m.body, &r) == -1) {
		ipc_msg_free(&m);
		gitrun_finish(g, 0, "the git helper sent something else than its result", "", 0, "");
		return;
	}
	snprintf(error, sizeof(error), "%.*s", (int)r.errlen, r.error);
	ipc_msg_free(&m);
	gitrun_finish(g, r.ok, error, r.base, g->kind != GITRUN_CHECKOUT ? r.size : 0, r.ref);
}

static void
gitrun_timeout(evutil_socket_t fd, short what, void *arg)
{
	gitrun_finish(arg, 0, "the git helper took too long", "", 0, "");
}

/* In the child: become the helper.  Never returns. */
static void __attribute__((noreturn))
gitrun_exec(int fd)
{
	static const char *const pass[] = {"ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"};
	char *env[8], *argv[] = {"agrippa-git", NULL}, buf[3][512];
	size_t i, n = 0;
	const char *v;

	if (dup2(fd, 3) == -1)
		_exit(126);
	closefrom(4);
	if (!sup.devmode && (setgroups(0, NULL) == -1 ||
	                     setresgid(sup.gid, sup.gid, sup.gid) == -1 ||
	                     setresuid(sup.uid, sup.uid, sup.uid) == -1))
		_exit(126);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1 ||
	    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) == -1)
		_exit(126);
	env[n++] = "PATH=/usr/bin:/bin";
	env[n++] = "HOME=/nonexistent";
	for (i = 0; i < sizeof(pass) / sizeof(pass[0]); i++)
		if ((v = getenv(pass[i])) != NULL &&
		    snprintf(buf[i], sizeof(buf[i]), "%s=%s", pass[i], v) < (int)sizeof(buf[i]))
			env[n++] = buf[i];
	env[n] = NULL;
	execve(sup.git_exe, argv, env);
	_exit(127);
}

/* The request for req in w (a token in it is wiped with w). */
static void
gitrun_request(const struct gitrun_req *req, struct ipc_wbuf *w)
{
	const unsigned char *tok = req->token != NULL ? req->token : (const unsigned char *)"";

	switch (req->kind) {
	case GITRUN_DIFF:
		ipc_wbuf_begin(w, IMSG_GIT_DIFF, 0, 5);
		ipc_put_str(w, req->mirror);
		ipc_put_str(w, req->workspace);
		ipc_put_str(w, req->base);
		ipc_put_u64(w, req->cap);
		ipc_put_str(w, req->stats != NULL ? req->stats : "");
		break;
	case GITRUN_CHECKOUT:
		ipc_wbuf_begin(w, IMSG_GIT_CHECKOUT, 0, 4);
		ipc_put_str(w, req->mirror);
		ipc_put_str(w, req->ref != NULL ? req->ref : "");
		ipc_put_str(w, req->workspace);
		ipc_put_str(w, req->url);
		break;
	case GITRUN_PUSH:
		ipc_wbuf_begin(w, IMSG_GIT_PUSH, 0, 14);
		ipc_put_str(w, req->url);
		ipc_put_bin(w, tok, req->toklen);
		ipc_put_str(w, req->username);
		ipc_put_str(w, req->mirror);
		ipc_put_str(w, req->workspace);
		ipc_put_str(w, req->base);
		ipc_put_u64(w, req->cap);
		ipc_put_str(w, req->author_name);
		ipc_put_str(w, req->author_email);
		ipc_put_u64(w, req->when);
		ipc_put_str(w, req->message);
		ipc_put_str(w, req->branch);
		ipc_put_str(w, req->lease);
		ipc_put_str(w, req->stats != NULL ? req->stats : "");
		break;
	case GITRUN_PR:
		ipc_wbuf_begin(w, IMSG_GIT_PR, 0, 10);
		ipc_put_u64(w, req->forge);
		ipc_put_str(w, req->api_url);
		ipc_put_str(w, req->url);
		ipc_put_bin(w, tok, req->toklen);
		ipc_put_str(w, req->branch);
		ipc_put_str(w, req->pr_base);
		ipc_put_str(w, req->title);
		ipc_put_str(w, req->body);
		ipc_put_bool(w, req->draft);
		ipc_put_u64(w, req->number);
		break;
	default:
		ipc_wbuf_begin(w, IMSG_GIT_FETCH, 0, 3);
		ipc_put_str(w, req->url);
		ipc_put_bin(w, tok, req->toklen);
		ipc_put_str(w, req->mirror);
		break;
	}
}

/* A new helper, waiting for its request on *fd: its pid, or -1. */
static pid_t
gitrun_fork(int *fd, char *err, size_t errsz)
{
	int sv[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == -1) {
		snprintf(err, errsz, "socketpair: %s", strerror(errno));
		return -1;
	}
	if ((pid = fork()) == -1) {
		close(sv[0]);
		close(sv[1]);
		snprintf(err, errsz, "fork: %s", strerror(errno));
		return -1;
	}
	if (pid == 0)
		gitrun_exec(sv[1]);
	close(sv[1]);
	*fd = sv[0];
	return pid;
}

static void
spare_drop(struct spare *sp)
{
	kill(sp->pid, SIGKILL); /* reaped as any child; gitrun_reaped knows it */
	close(sp->fd);
	sp->pid = 0;
	sp->fd = -1;
}

/* A spare young enough to take a request: its pid (and *fd), or 0. */
static pid_t
spare_take(int *fd)
{
	uint64_t now = mono_ms();
	pid_t pid;
	size_t i;

	for (i = 0; i < GITRUN_SPARES; i++) {
		if (spares[i].pid == 0)
			continue;
		if (now - spares[i].born > GITRUN_SPARE_MS) {
			spare_drop(&spares[i]);
			continue;
		}
		pid = spares[i].pid;
		*fd = spares[i].fd;
		spares[i].pid = 0;
		spares[i].fd = -1;
		return pid;
	}
	return 0;
}

/* The spares that waited GITRUN_SPARE_MS go, before the helper gives up
 * (and logs it); none come back until a helper is asked for again, so an
 * idle daemon has none. */
static void
spare_expire(evutil_socket_t fd, short what, void *arg)
{
	struct timeval tv;
	uint64_t now = mono_ms(), next = 0, left;
	size_t i;

	(void)fd, (void)what, (void)arg;
	for (i = 0; i < GITRUN_SPARES; i++) {
		if (spares[i].pid == 0)
			continue;
		if (now - spares[i].born + 20 >= GITRUN_SPARE_MS)
			spare_drop(&spares[i]);
		else if (next == 0 || spares[i].born < next)
			next = spares[i].born;
	}
	if (next != 0) {
		left = next + GITRUN_SPARE_MS - now;
		tv.tv_sec = (time_t)(left / 1000);
		tv.tv_usec = (suseconds_t)(left % 1000) * 1000;
		evtimer_add(spare_ev, &tv);
	}
}

/* Spares for the next requests, unless the daemon stops. */
static void
spare_fill_now(evutil_socket_t fd, short what, void *arg)
{
	struct timeval tv = {GITRUN_SPARE_MS / 1000, (GITRUN_SPARE_MS % 1000) * 1000};
	char err[128];
	size_t i;

	(void)fd, (void)what, (void)arg;
	if (sup.stopping)
		return;
	for (i = 0; i < GITRUN_SPARES; i++) {
		if (spares[i].pid != 0)
			continue;
		if ((spares[i].pid = gitrun_fork(&spares[i].fd, err, sizeof(err))) == -1) {
			spares[i].pid = 0;
			spares[i].fd = -1;
			break;
		}
		spares[i].born = mono_ms();
	}
	if (spare_ev == NULL && (spare_ev = evtimer_new(sup.base, spare_expire, NULL)) == NULL)
		fatalx("git helper: event set-up");
	if (!evtimer_pending(spare_ev, NULL))
		evtimer_add(spare_ev, &tv);
}

/* ... a little later: a spare starting takes a core for some 15 ms (the
 * exec, the libraries, libgit2's certificates), which the run that took
 * one should not share during its set-up. */
static void
spare_fill(void)
{
	struct timeval tv = {0, GITRUN_SPARE_DELAY_MS * 1000};

	if (sup.stopping)
		return;
	if (fill_ev == NULL && (fill_ev = evtimer_new(sup.base, spare_fill_now, NULL)) == NULL)
		fatalx("git helper: event set-up");
	if (!evtimer_pending(fill_ev, NULL))
		evtimer_add(fill_ev, &tv);
}

void
gitrun_spares_stop(void)
{
	size_t i;

	for (i = 0; i < GITRUN_SPARES; i++)
		if (spares[i].pid != 0)
			spare_drop(&spares[i]);
	if (spare_ev != NULL)
		evtimer_del(spare_ev);
	if (fill_ev != NULL)
		evtimer_del(fill_ev);
}

static struct gitrun *
gitrun_spawn(const struct gitrun_req *req, gitrun_cb cb, gitrun_pr_cb prcb, void *arg,
             char *err, size_t errsz)
{
	struct timeval tv = {GITRUN_TIMEOUT_SECS, 0};
	struct ipc_wbuf w;
	struct gitrun *g;
	int fd;
	pid_t pid;

	if (access(sup.git_exe, X_OK) == -1) {
		snprintf(err, errsz, "the git helper %s: %s", sup.git_exe, strerror(errno));
		return NULL;
	}
	gitrun_request(req, &w);
	if (ipc_wbuf_finish(&w, IPC_MAX_FRAME_DEFAULT) == -1) {
		ipc_wbuf_free(&w);
		snprintf(err, errsz, "the git helper's request does not fit a frame");
		return NULL;
	}
	if ((pid = spare_take(&fd)) == 0 && (pid = gitrun_fork(&fd, err, errsz)) == -1) {
		ipc_wbuf_free(&w);
		return NULL;
	}
	/* a small frame into an empty socket buffer: this does not block */
	if (ipc_write_frame(fd, &w, req->kind == GITRUN_DIFF ? req->outfd : -1) == -1)
		log_warn("git helper %ld: sending the request", (long)pid);
	ipc_wbuf_free(&w); /* wiped: it held the token */
	spare_fill();
	if ((g = calloc(1, sizeof(*g))) == NULL)
		fatal("calloc");
	g->pid = pid;
	g->fd = fd;
	g->cb = cb;
	g->prcb = prcb;
	g->arg = arg;
	g->kind = req->kind;
	if ((g->ev = event_new(sup.base, g->fd, EV_READ, gitrun_readable, g)) == NULL ||
	    (g->timer = evtimer_new(sup.base, gitrun_timeout, g)) == NULL ||
	    event_add(g->ev, NULL) == -1 || evtimer_add(g->timer, &tv) == -1)
		fatalx("git helper: event set-up");
	LIST_INSERT_HEAD(&gitruns, g, entry);
	log_debug("git helper %ld started for %s", (long)pid,
	    req->kind == GITRUN_FETCH ? req->mirror
	    : req->kind == GITRUN_PR  ? req->api_url
	                              : req->workspace);
	return g;
}

struct gitrun *
gitrun_start(const struct gitrun_req *req, gitrun_cb cb, void *arg, char *err, size_t errsz)
{
	return gitrun_spawn(req, cb, NULL, arg, err, errsz);
}

struct gitrun *
gitrun_start_pr(const struct gitrun_req *req, gitrun_pr_cb cb, void *arg, char *err,
                size_t errsz)
{
	return gitrun_spawn(req, NULL, cb, arg, err, errsz);
}

void
gitrun_abandon(struct gitrun *g)
{
	g->cb = NULL;
	g->prcb = NULL; /* neither kind of asker hears: it is gone */
	gitrun_finish(g, 0, "", "", 0, "");
}

int
gitrun_reaped(pid_t pid, int status)
{
	struct gitrun *g;
	size_t i;

	for (i = 0; i < GITRUN_SPARES; i++)
		if (spares[i].pid == pid) { /* it gave up waiting, or was killed */
			close(spares[i].fd);
			spares[i].pid = 0;
			spares[i].fd = -1;
			(void)status;
			return 1;
		}
	LIST_FOREACH(g, &gitruns, entry)
	if (g->pid == pid) {
		g->exited = 1;
		if (WIFSIGNALED(status) && WTERMSIG(status) != SIGKILL)
			log_warnx("git helper %ld killed by signal %d", (long)pid, WTERMSIG(status));
		gitrun_free_if_done(g);
		return 1;
	}
	return 0;
}
