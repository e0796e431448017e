/*
 * Child processes: every role is this same binary re-executed with -P role
 * (fork + execve, so no child inherits the supervisor's memory), with fixed
 * descriptors: 0/1 /dev/null, 2 stderr (foreground) or /dev/null, 3 its end
 * of the socketpair.  A child that exits or breaks the protocol is restarted
 * with exponential backoff.
 */
#include <sys/socket.h>
#include <sys/wait.h>

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "privsep/child.h"
#include "supervisor/supervisor.h"

struct proc procs[] = {
	{ .role = ROLE_ENGINE, .name = "engine" },
	{ .role = ROLE_HTTPD, .name = "httpd" },
	{ .role = ROLE_PROXY, .name = "proxy" },
	{ .role = ROLE_EGRESS, .name = "egress" },
};
const size_t nprocs = sizeof(procs) / sizeof(procs[0]);

static void proc_start(struct proc *p);

static void
proc_schedule(struct proc *p)
{
	struct timeval tv = { (time_t)p->backoff, 0 };

	evtimer_add(p->restart_ev, &tv);
}

struct proc *
proc_by_role(enum ipc_role role)
{
	size_t i;

	for (i = 0; i < nprocs; i++)
		if (procs[i].role == role)
			return &procs[i];
	return NULL;
}

int
proc_send(struct proc *p, struct ipc_wbuf *w, int fd)
{
	int rv = -1;

	if (p->chan != NULL && ipc_wbuf_finish(w, sup.conf.ipc_max_frame) == 0)
		rv = ipc_chan_send(p->chan, w, fd);
	ipc_wbuf_free(w);
	return rv;
}

static void
proc_send_listen(struct proc *p)
{
	struct ipc_wbuf w;
	size_t i;

	for (i = 0; i < sup.nlisten_fds; i++) {
		ipc_wbuf_begin(&w, IMSG_LISTEN_FD, 0, 1);
		ipc_put_str(&w, sup.conf.listen[i].addr);
		if (proc_send(p, &w, sup.listen_fds[i]) == -1)
			log_warnx("%s: cannot pass listening socket", p->name);
	}
	if (sup.metrics_fd < 0)
		return;
	ipc_wbuf_begin(&w, IMSG_METRICS_FD, 0, 1);
	ipc_put_str(&w, sup.conf.metrics_listen.addr);
	if (proc_send(p, &w, sup.metrics_fd) == -1)
		log_warnx("%s: cannot pass the metrics socket", p->name);
}

void
proc_kill(struct proc *p)
{
	if (p->pid > 0)
		kill(p->pid, SIGKILL);
}

/* Kill a misbehaving child; proc_reaped() restarts it. */
static void
proc_abort(struct proc *p, const char *why)
{
	log_warnx("%s (pid %ld): %s; restarting it", p->name, (long)p->pid, why);
	if (p->chan != NULL) {
		ipc_chan_free(p->chan);
		p->chan = NULL;
	}
	proc_kill(p);
}

static void
proc_on_msg(struct ipc_chan *ch, struct ipc_msg *m, void *arg)
{
	struct proc *p = arg;
	struct ipc_ready r;

	if (!p->ready && m->type != IMSG_READY) {
		proc_abort(p, "sent a message before ready");
		return;
	}
	switch (m->type) {
	case IMSG_READY:
		if (p->ready || ipc_dec_ready(m->body, &r) == -1 ||
		    r.proto != IPC_PROTO_VERSION || r.pid != (uint32_t)p->pid) {
			proc_abort(p, "bad ready message");
			return;
		}
		p->ready = 1;
		evtimer_del(p->ready_ev);
		log_info("%s ready (pid %ld)", p->name, (long)p->pid);
		if (p->role == ROLE_HTTPD)
			proc_send_listen(p);
		if (p->role == ROLE_ENGINE)
			runs_engine_ready(p);
		if (p->role == ROLE_PROXY) {
			provider_send_conf();
			runs_proxy_ready();
		}
		if (p->role == ROLE_EGRESS)
			egress_ready(p);
		return;
	case IMSG_DB_OP:
		sup_db_op(p, m);
		return;
	case IMSG_ARTIFACT_OPEN:
		sup_artifact_open(p, m);
		return;
	case IMSG_REPO_SEAL:
		sup_repo_seal(p, m);
		return;
	case IMSG_RUN_START:
		runs_start(p, m);
		return;
	case IMSG_RUN_STOP:
		runs_stop(p, m);
		return;
	case IMSG_EGRESS_EVENT:
		egress_event_in(p, m);
		return;
	case IMSG_EGRESS_TOTALS:
		egress_totals_in(p, m);
		return;
	case IMSG_METRICS_GET:
		metrics_get(p, m);
		return;
	default:
		/* The catalog let it through, but this peer has no use for it here. */
		metrics_ipc_error(p->role);
		proc_abort(p, "sent a message the supervisor does not accept from it");
	}
}

static void
proc_on_err(struct ipc_chan *ch, const char *reason, void *arg)
{
	struct proc *p = arg;

	if (strcmp(reason, "closed") == 0) {
		/* Normally it is exiting and SIGCHLD tells the rest; a child that
		 * hangs up and lingers is of no use, so make sure it goes. */
		ipc_chan_free(p->chan);
		p->chan = NULL;
		proc_kill(p);
		return;
	}
	metrics_ipc_error(p->role);
	proc_abort(p, reason);
}

static void
proc_ready_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct proc *p = arg;

	proc_abort(p, "not ready in time");
}

static void
proc_restart_cb(evutil_socket_t fd, short what, void *arg)
{
	proc_start(arg);
}

void
proc_hello(struct proc *p)
{
	struct ipc_wbuf w;

	ipc_wbuf_begin(&w, IMSG_HELLO, 0, 8);
	ipc_put_u64(&w, IPC_PROTO_VERSION);
	ipc_put_u64(&w, p->role);
	ipc_put_u64(&w, (uint64_t)sup.verbose);
	ipc_put_bool(&w, sup.devmode);
	ipc_put_u64(&w, sup.uid);
	ipc_put_u64(&w, sup.gid);
	/* The proxy resolves provider names and reads CA certificates: it runs
	 * unchrooted (DESIGN 1), as the service user, under its own filter. */
	ipc_put_str(&w, p->role == ROLE_PROXY ? "" : sup.conf.chroot);
	ipc_put_str(&w, p->instance);
	if (proc_send(p, &w, -1) == -1) {
		proc_abort(p, "cannot send hello");
		return;
	}
	if (p->role != ROLE_HTTPD)
		return;
	/* httpd reads its dashboard's files before its chroot: it needs to
	 * know where they are before it is ready. */
	ipc_wbuf_begin(&w, IMSG_HTTPD_CONF, 0, 6);
	ipc_put_str(&w, sup.conf.public_url);
	ipc_put_str(&w, sup.conf.ui_dir);
	ipc_put_u64(&w, sup.conf.session_lifetime);
	ipc_put_u64(&w, sup.conf.api.user_rate);
	ipc_put_u64(&w, sup.conf.api.user_burst);
	ipc_put_u64(&w, sup.conf.api.sse_queued_max);
	if (proc_send(p, &w, -1) == -1)
		proc_abort(p, "cannot send httpd's configuration");
}

/* In the forked child: fixed descriptors, then exec ourselves as the role. */
__attribute__((noreturn)) void
proc_exec(struct proc *p, int fd)
{
	char *argv[6];
	char *envp[5];
	int argc = 0, envc = 0, nul;

	/* Own process group: a terminal's Ctrl-C reaches only the supervisor,
	 * which then stops its children in order. */
	setpgid(0, 0);
	if ((nul = open("/dev/null", O_RDWR)) == -1)
		_exit(126);
	if (dup2(fd, CHILD_SUPERVISOR_FD) == -1 || dup2(nul, STDIN_FILENO) == -1 ||
	    dup2(nul, STDOUT_FILENO) == -1 || (!sup.foreground && dup2(nul, STDERR_FILENO) == -1))
		_exit(126);
	closefrom(CHILD_SUPERVISOR_FD + 1);
	argv[argc++] = "agrippad";
	argv[argc++] = "-P";
	argv[argc++] = (char *)p->name;
	if (sup.foreground)
		argv[argc++] = "-d";
	argv[argc] = NULL;
	/* A child's environment is built, never inherited. */
	envp[envc++] = "PATH=/usr/bin:/bin";
#ifdef AGRIPPA_SANITIZE
	/* Sanitizer settings only, so a test run's options reach every child. */
	for (char **e = environ; *e != NULL && envc < 4; e++)
		if (strncmp(*e, "ASAN_OPTIONS=", 13) == 0 || strncmp(*e, "UBSAN_OPTIONS=", 14) == 0 ||
		    strncmp(*e, "AGRIPPA_TEST_LANDLOCK_PROBE=", 28) == 0)
			envp[envc++] = *e;
#endif
	envp[envc] = NULL;
	execve(sup.self_exe, argv, envp);
	_exit(127);
}

int
proc_spawn(struct proc *p, void (*on_msg)(struct ipc_chan *, struct ipc_msg *, void *),
    void (*on_err)(struct ipc_chan *, const char *, void *), void *arg)
{
	int sv[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == -1) {
		log_warn("%s: socketpair", p->name);
		return -1;
	}
	if ((pid = fork()) == -1) {
		log_warn("%s: fork", p->name);
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	if (pid == 0) {
		close(sv[0]);
		proc_exec(p, sv[1]);
	}
	close(sv[1]);
	p->pid = pid;
	p->ready = 0;
	p->gen++;
	p->started = time(NULL);
	p->chan = ipc_chan_new(sup.base, sv[0], ROLE_SUPERVISOR, p->role, sup.conf.ipc_max_frame,
	    on_msg, on_err, arg);
	if (p->chan == NULL)
		fatalx("%s: cannot create channel", p->name);
	proc_hello(p);
	log_debug("%s started (pid %ld)", p->name, (long)pid);
	return 0;
}

static void
proc_start(struct proc *p)
{
	struct timeval tv = { SUP_READY_TIMEOUT_SECS, 0 };

	if (sup.stopping)
		return;
	if (proc_spawn(p, proc_on_msg, proc_on_err, p) == -1) {
		p->backoff = p->backoff ? p->backoff : 1;
		proc_schedule(p);
		return;
	}
	evtimer_add(p->ready_ev, &tv);
}

void
proc_start_all(void)
{
	unsigned char rnd[8];
	size_t i;

	for (i = 0; i < nprocs; i++) {
		struct proc *p = &procs[i];

		p->restart_ev = evtimer_new(sup.base, proc_restart_cb, p);
		p->ready_ev = evtimer_new(sup.base, proc_ready_timeout, p);
		if (p->restart_ev == NULL || p->ready_ev == NULL)
			fatalx("evtimer_new");
		randombytes_buf(rnd, sizeof(rnd));
		snprintf(p->instance, sizeof(p->instance), "%s-%02x%02x%02x%02x%02x%02x%02x%02x",
		    p->name, rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
		proc_start(p);
	}
}

static void
proc_describe_exit(struct proc *p, int status, char *buf, size_t bufsz)
{
	if (WIFEXITED(status))
		snprintf(buf, bufsz, "exited with status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, bufsz, "killed by signal %d%s", WTERMSIG(status),
		    WTERMSIG(status) == SIGSYS ? " (seccomp: forbidden system call)" : "");
	else
		snprintf(buf, bufsz, "ended (status 0x%x)", status);
}

/* SIGCHLD: returns after handling pid if it is one of ours. */
void
proc_reaped(pid_t pid, int status)
{
	char why[96];
	size_t i;

	for (i = 0; i < nprocs; i++) {
		struct proc *p = &procs[i];

		if (p->pid != pid)
			continue;
		proc_describe_exit(p, status, why, sizeof(why));
		if (p->role == ROLE_ENGINE)
			runs_engine_gone(p->instance);
		if (p->chan != NULL) {
			ipc_chan_free(p->chan);
			p->chan = NULL;
		}
		evtimer_del(p->ready_ev);
		p->pid = 0;
		p->ready = 0;
		if (sup.stopping) {
			log_debug("%s %s", p->name, why);
			return;
		}
		if (time(NULL) - p->started >= SUP_STABLE_SECS)
			p->backoff = 0;
		p->backoff = p->backoff ? p->backoff * 2 : 1;
		if (p->backoff > SUP_BACKOFF_MAX_SECS)
			p->backoff = SUP_BACKOFF_MAX_SECS;
		p->restarts++;
		log_warnx("%s (pid %ld) %s; restarting in %u s", p->name, (long)pid, why,
		    p->backoff);
		proc_schedule(p);
		return;
	}
}

void
proc_stop_all(void)
{
	struct ipc_wbuf w;
	size_t i;

	runs_stop_all();
	for (i = 0; i < nprocs; i++) {
		struct proc *p = &procs[i];

		evtimer_del(p->restart_ev);
		if (p->pid <= 0)
			continue;
		if (!p->ready) { /* not listening yet: a signal is all it understands */
			kill(p->pid, SIGTERM);
			continue;
		}
		ipc_wbuf_begin(&w, IMSG_SHUTDOWN, 0, 0);
		if (proc_send(p, &w, -1) == -1) /* frees w either way */
			kill(p->pid, SIGTERM);
	}
}

int
proc_all_exited(void)
{
	size_t i;

	for (i = 0; i < nprocs; i++)
		if (procs[i].pid > 0)
			return 0;
	return runs_all_exited();
}

void
proc_kill_all(int sig)
{
	size_t i;

	for (i = 0; i < nprocs; i++)
		if (procs[i].pid > 0)
			kill(procs[i].pid, sig);
	runs_kill_all(sig);
}

void
proc_broadcast_verbose(int verbose)
{
	struct ipc_wbuf w;
	size_t i;

	for (i = 0; i < nprocs; i++) {
		if (!procs[i].ready)
			continue;
		ipc_wbuf_begin(&w, IMSG_LOG_VERBOSE, 0, 1);
		ipc_put_u64(&w, (uint64_t)verbose);
		proc_send(&procs[i], &w, -1);
	}
}

/* Restart one child now (e.g. httpd after its listening sockets changed). */
void
proc_restart(struct proc *p)
{
	if (p->pid > 0) {
		log_info("restarting %s", p->name);
		kill(p->pid, SIGTERM);
	}
}
