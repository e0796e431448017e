/*
 * supervisor_main: the parent process.  Order of start-up:
 *   config -> users -> pidfile lock -> master key -> chroot dir -> sockets ->
 *   daemonize -> database (embedded or external) -> migrations -> pool ->
 *   children -> control socket -> event loop.
 * A detaching daemon keeps the operator's stderr until it is ready (see
 * sup_detach), so every start-up error reaches the terminal and the exit
 * status.
 */
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "privsep/privsep.h"
#include "supervisor/db.h"
#include "supervisor/key.h"
#include "supervisor/sbx.h"
#include "supervisor/supervisor.h"

struct sup sup;

static int
pidfile_lock(const char *path)
{
	char buf[32];
	ssize_t n;
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);

	if (fd == -1)
		fatal("pidfile %s", path);
	if (flock(fd, LOCK_EX | LOCK_NB) == -1) {
		n = read(fd, buf, sizeof(buf) - 1);
		buf[n > 0 ? n : 0] = '\0';
		buf[strcspn(buf, "\n")] = '\0';
		fatalx("already running (pid %s, pidfile %s)", n > 0 ? buf : "?", path);
	}
	return fd;
}

static void
pidfile_write(int fd)
{
	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());

	if (ftruncate(fd, 0) == -1 || pwrite(fd, buf, (size_t)n, 0) != n)
		fatal("pidfile write");
}

/* Create the chroot directory when missing; the checks are privsep's own,
 * made here too so a bad directory stops the start on the terminal. */
static void
chroot_dir_ensure(const char *dir)
{
	if (sup.devmode)
		return;
	if (mkdir(dir, 0755) == 0)
		log_info("created chroot directory %s", dir);
	else if (errno != EEXIST)
		fatal("chroot directory %s", dir);
	privsep_check_chroot(dir);
}

static void
sup_self_exe(void)
{
	ssize_t n = readlink("/proc/self/exe", sup.self_exe, sizeof(sup.self_exe) - 1);
	char *slash;

	if (n <= 0 || (size_t)n >= sizeof(sup.self_exe) - 1)
		fatal("cannot find our own executable");
	sup.self_exe[n] = '\0';
	/* The sandbox's tool server is installed beside us. */
	if ((slash = strrchr(sup.self_exe, '/')) == NULL ||
	    fmt_ok(sup.sandbox_exe, sizeof(sup.sandbox_exe), "%.*s/agrippa-sandbox",
		(int)(slash - sup.self_exe), sup.self_exe) == -1)
		fatalx("cannot name agrippa-sandbox beside %s", sup.self_exe);
	if (fmt_ok(sup.git_exe, sizeof(sup.git_exe), "%.*s/agrippa-git",
	        (int)(slash - sup.self_exe), sup.self_exe) == -1)
		fatalx("cannot name agrippa-git beside %s", sup.self_exe);
	if (fmt_ok(sup.tree_exe, sizeof(sup.tree_exe), "%.*s/agrippa-tree",
	        (int)(slash - sup.self_exe), sup.self_exe) == -1)
		fatalx("cannot name agrippa-tree beside %s", sup.self_exe);
	if (fmt_ok(sup.mcpc_exe, sizeof(sup.mcpc_exe), "%.*s/agrippa-mcpc",
	        (int)(slash - sup.self_exe), sup.self_exe) == -1)
		fatalx("cannot name agrippa-mcpc beside %s", sup.self_exe);
}

/* The author of the commits runs push: Agrippa <agrippa@HOSTNAME>. */
static void
sup_git_author(void)
{
	char host[256];
	size_t i;

	if (gethostname(host, sizeof(host)) == -1 || host[0] == '\0')
		snprintf(host, sizeof(host), "localhost");
	host[sizeof(host) - 1] = '\0';
	for (i = 0; host[i] != '\0'; i++)
		if (!((host[i] >= 'a' && host[i] <= 'z') || (host[i] >= 'A' && host[i] <= 'Z') ||
		      (host[i] >= '0' && host[i] <= '9') || host[i] == '.' || host[i] == '-'))
			host[i] = '-';
	snprintf(sup.git_author_name, sizeof(sup.git_author_name), "Agrippa");
	snprintf(sup.git_author_email, sizeof(sup.git_author_email), "agrippa@%s", host);
}

static void
sup_users(void)
{
	sup.devmode = geteuid() != 0;
	if (sup.devmode) {
		sup.uid = getuid();
		sup.gid = getgid();
		log_warnx("development mode: not started as root; children keep uid %lu and are "
			  "not chrooted", (unsigned long)sup.uid);
		return;
	}
	if (privsep_lookup_user(sup.conf.user, &sup.uid, &sup.gid) == -1)
		fatalx("user %s does not exist (run 'make users', or create it with useradd "
		       "--system)", sup.conf.user);
	if (sup.uid == 0)
		fatalx("user %s must not be root", sup.conf.user);
}

/* Start the database and apply migrations; returns the conninfo. */
static const char *
sup_database(void)
{
	char err[512];
	const char *ci;

	sup.pg_embedded = sup.conf.db_embedded;
	if (sup.pg_embedded) {
		if (pg_embed_prepare(&sup.conf, sup.foreground, &sup.pg, err, sizeof(err)) == -1)
			fatalx("embedded database: %s", err);
		if (pg_embed_start(&sup.pg) == -1) {
			pg_embed_stop(&sup.pg, 10);
			fatalx("embedded database did not start");
		}
		ci = pg_embed_conninfo(&sup.pg);
	} else
		ci = sup.conf.db_url;
	if (db_migrate(ci) == -1) {
		if (sup.pg_embedded)
			pg_embed_stop(&sup.pg, 30);
		fatalx("database migrations failed");
	}
	return ci;
}

static void
sup_finish(void)
{
	db_pool_shutdown();
	notify_shutdown();
	if (sup.pg_embedded)
		pg_embed_stop(&sup.pg, 30);
	control_cleanup(sup.conf.control_socket);
	if (sup.master_key != NULL)
		key_free(sup.master_key);
	unlink(sup.conf.pidfile);
	log_info("stopped");
	event_base_loopbreak(sup.base);
}

static void
sup_drain_timeout(evutil_socket_t fd, short what, void *arg)
{
	log_warnx("children did not stop in %d s; killing them", SUP_DRAIN_TIMEOUT_SECS);
	proc_kill_all(SIGKILL);
	sbx_kill_all();
}

void
sup_stop(void)
{
	struct timeval tv = { SUP_DRAIN_TIMEOUT_SECS, 0 };

	if (sup.stopping)
		return;
	sup.stopping = 1;
	log_info("stopping");
	proc_stop_all();
	sbx_kill_all();
	gitrun_spares_stop();
	disk_spare_stop();
	if (proc_all_exited() && sbx_count() == 0) {
		sup_finish();
		return;
	}
	sup.drain_ev = evtimer_new(sup.base, sup_drain_timeout, NULL);
	evtimer_add(sup.drain_ev, &tv);
}

void
sup_set_verbose(int verbose)
{
	sup.verbose = verbose;
	log_setverbose(verbose);
	proc_broadcast_verbose(verbose);
	log_info("log level: %s", verbose ? "verbose" : "brief");
}

static int
listen_equal(const struct config *a, const struct config *b)
{
	size_t i;

	if (a->nlisten != b->nlisten)
		return 0;
	for (i = 0; i < a->nlisten; i++)
		if (strcmp(a->listen[i].addr, b->listen[i].addr) != 0)
			return 0;
	return 1;
}

/*
 * SIGHUP / agrippactl reload.  A broken file changes nothing.  Returns 0, or
 * -1 with the reason in errbuf (errors of the file, one per line).
 */
int
sup_reload(char *errbuf, size_t errsz)
{
	struct config *nc = calloc(1, sizeof(*nc));
	char err[4096];
	int fds[CONF_MAX_LISTEN], rv = -1, restart_httpd = 0, mchange, mfd = -2;
	size_t nfds;

	if (nc == NULL)
		fatal("calloc");
	if (config_load(sup.conf_path, nc, err, sizeof(err)) == -1) {
		log_warnx("reload: configuration not changed:\n%s", err);
		snprintf(errbuf, errsz, "configuration not changed:\n%s", err);
		goto out;
	}
	if (provider_reload(nc, err, sizeof(err)) == -1) {
		log_warnx("reload: configuration not changed: provider key: %s", err);
		snprintf(errbuf, errsz, "configuration not changed: provider key: %s", err);
		goto out;
	}
	if (strcmp(nc->state_dir, sup.conf.state_dir) || strcmp(nc->user, sup.conf.user) ||
	    strcmp(nc->db_user, sup.conf.db_user) || nc->db_embedded != sup.conf.db_embedded ||
	    strcmp(nc->db_url, sup.conf.db_url) || strcmp(nc->master_key, sup.conf.master_key) ||
	    strcmp(nc->control_socket, sup.conf.control_socket) ||
	    strcmp(nc->chroot, sup.conf.chroot) || strcmp(nc->pidfile, sup.conf.pidfile))
		log_warnx("reload: state_dir, user, db_user, database, master_key, chroot, pidfile "
			  "and control_socket take effect only after a restart");
	/* every new socket is bound before any old one is let go: a socket
	 * that cannot be bound leaves both lists as they were */
	mchange = strcmp(nc->metrics_listen.addr, sup.conf.metrics_listen.addr) != 0;
	if (mchange && (mfd = listen_metrics_bind(nc, err, sizeof(err))) == -1) {
		log_warnx("reload: %s; configuration not changed", err);
		snprintf(errbuf, errsz, "%s; configuration not changed", err);
		goto out;
	}
	if (!listen_equal(nc, &sup.conf)) {
		if (listen_rebind(&sup.conf, sup.listen_fds, nc, fds, &nfds, err, sizeof(err)) ==
		    -1) {
			if (mfd >= 0)
				close(mfd);
			log_warnx("reload: %s; configuration not changed", err);
			snprintf(errbuf, errsz, "%s; configuration not changed", err);
			goto out;
		}
		memcpy(sup.listen_fds, fds, sizeof(fds));
		sup.nlisten_fds = nfds;
		memcpy(sup.conf.listen, nc->listen, sizeof(nc->listen));
		sup.conf.nlisten = nc->nlisten;
		restart_httpd = 1;
	}
	if (mchange) {
		if (sup.metrics_fd >= 0)
			close(sup.metrics_fd);
		sup.metrics_fd = mfd; /* -2: metrics_listen is off now */
		sup.conf.metrics_listen = nc->metrics_listen;
		restart_httpd = 1;
	}
	/* httpd's own settings are read once, before its chroot: a change
	 * restarts it (its SSE clients reconnect) */
	if (strcmp(nc->public_url, sup.conf.public_url) != 0 ||
	    strcmp(nc->ui_dir, sup.conf.ui_dir) != 0 ||
	    nc->session_lifetime != sup.conf.session_lifetime ||
	    nc->api.user_rate != sup.conf.api.user_rate ||
	    nc->api.user_burst != sup.conf.api.user_burst ||
	    nc->api.sse_queued_max != sup.conf.api.sse_queued_max) {
		memcpy(sup.conf.public_url, nc->public_url, sizeof(nc->public_url));
		memcpy(sup.conf.ui_dir, nc->ui_dir, sizeof(nc->ui_dir));
		sup.conf.session_lifetime = nc->session_lifetime;
		sup.conf.api = nc->api;
		restart_httpd = 1;
	}
	if (restart_httpd)
		proc_restart(proc_by_role(ROLE_HTTPD));
	sup.conf.ipc_max_frame = nc->ipc_max_frame;
	/* New limits apply to sandboxes built from now on.  The sandbox ids
	 * were checked against the accounts at start and own what sandboxes
	 * wrote: they change only with a restart. */
	if (nc->sandbox.uid != sup.conf.sandbox.uid || nc->sandbox.gid != sup.conf.sandbox.gid)
		log_warnx("reload: sandbox.uid and sandbox.gid take effect only after a restart");
	nc->sandbox.uid = sup.conf.sandbox.uid;
	nc->sandbox.gid = sup.conf.sandbox.gid;
	sup.conf.sandbox = nc->sandbox;
	sbx_rewarm();
	sup.conf.engine = nc->engine;
	runs_send_conf();
	memcpy(sup.conf.providers, nc->providers, sizeof(nc->providers));
	sup.conf.nproviders = nc->nproviders;
	sup.conf.agent = nc->agent;
	provider_send_conf();
	/* runs set up from now on resolve their presets against the new list;
	 * egress judges every connection it accepts from now on by the new
	 * allow_cidrs and limits (egress_runs.c) */
	sup.conf.egress = nc->egress;
	egress_reconfigure();
	log_info("configuration reloaded");
	rv = 0;
out:
	explicit_bzero(nc, sizeof(*nc));
	free(nc);
	return rv;
}

static void
sup_pg_restart(evutil_socket_t fd, short what, void *arg)
{
	if (!sup.stopping && pg_embed_spawn(&sup.pg) == -1)
		log_warn("db: cannot restart postgres");
}

static void
sup_pg_reaped(int status)
{
	struct timeval tv;

	sup.pg.pid = 0;
	if (sup.stopping)
		return;
	if (time(NULL) - sup.pg.started >= SUP_STABLE_SECS)
		sup.pg_backoff = 0; /* it ran well: this is a new failure, not a loop */
	sup.pg_backoff = sup.pg_backoff ? sup.pg_backoff * 2 : 1;
	if (sup.pg_backoff > SUP_BACKOFF_MAX_SECS)
		sup.pg_backoff = SUP_BACKOFF_MAX_SECS;
	sup.pg_restarts++;
	log_warnx("db: postgres exited (status 0x%x); restarting in %u s", status,
	    sup.pg_backoff);
	tv.tv_sec = sup.pg_backoff;
	tv.tv_usec = 0;
	evtimer_add(sup.pg_restart_ev, &tv);
}

static void
sup_signal(evutil_socket_t sig, short what, void *arg)
{
	pid_t pid;
	int status;

	switch (sig) {
	case SIGTERM:
	case SIGINT:
		sup_stop();
		break;
	case SIGHUP:
		log_info("SIGHUP: reloading");
		sup_reload(NULL, 0);
		break;
	case SIGCHLD:
		while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
			if (sup.pg_embedded && pid == sup.pg.pid)
				sup_pg_reaped(status);
			else if (!sbx_reaped(pid, status) && !gitrun_reaped(pid, status) &&
			    !disk_reaped(pid, status) && !transient_reaped(pid, status) &&
			    !runs_reaped(pid, status))
				proc_reaped(pid, status);
		}
		if (sup.stopping && proc_all_exited() && sbx_count() == 0)
			sup_finish();
		break;
	}
}

static void
sup_signals(void)
{
	static const int sigs[] = { SIGTERM, SIGINT, SIGHUP, SIGCHLD };
	struct event *ev;
	size_t i;

	signal(SIGPIPE, SIG_IGN);
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		ev = evsignal_new(sup.base, sigs[i], sup_signal, NULL);
		if (ev == NULL || event_add(ev, NULL) == -1)
			fatalx("signal set-up");
	}
}

static void
sup_config(const char *conf_path, int check_only)
{
	char err[8192];

	snprintf(sup.conf_path, sizeof(sup.conf_path), "%s", conf_path);
	if (config_load(conf_path, &sup.conf, err, sizeof(err)) == -1) {
		fprintf(stderr, "%s", err);
		if (err[0] != '\0' && err[strlen(err) - 1] != '\n')
			fputc('\n', stderr);
		exit(1);
	}
	if (check_only) {
		printf("configuration OK\n");
		exit(0);
	}
}

/*
 * Detach from the terminal, but keep the operator's stderr until start-up is
 * done: the starting process waits for one byte on a pipe and exits 0 when
 * the daemon reports ready, 1 when it died first, so an error found after
 * detaching (the database, migrations) still reaches the terminal and the
 * exit status (systemd Type=forking, rc scripts).
 */
static int sup_ready_fd = -1;

static void
sup_detach(void)
{
	int p[2], status, nul;
	pid_t pid;
	char c;

	if (pipe2(p, O_CLOEXEC) == -1)
		fatal("pipe");
	if ((pid = fork()) == -1)
		fatal("fork");
	if (pid > 0) {
		close(p[1]);
		if (read(p[0], &c, 1) == 1 && c == 'R')
			_exit(0);
		waitpid(pid, &status, 0);
		_exit(1);
	}
	close(p[0]);
	sup_ready_fd = p[1];
	if (setsid() == -1)
		fatal("setsid");
	if (chdir("/") == -1)
		fatal("chdir");
	if ((nul = open("/dev/null", O_RDWR | O_CLOEXEC)) == -1)
		fatal("/dev/null");
	dup2(nul, STDIN_FILENO);
	dup2(nul, STDOUT_FILENO);
	close(nul);
	log_init(0, sup.verbose, LOG_DAEMON);
	log_errors_to_stderr(1);
}

static void
sup_detached_ready(void)
{
	int nul = open("/dev/null", O_RDWR | O_CLOEXEC);

	log_errors_to_stderr(0);
	if (nul != -1) {
		dup2(nul, STDERR_FILENO);
		close(nul);
	}
	if (write(sup_ready_fd, "R", 1) != 1)
		log_warn("cannot tell the starting process we are ready");
	close(sup_ready_fd);
	sup_ready_fd = -1;
}

/*
 * STATE/host-id: 32 hex digits naming the host whose state directory holds
 * the workspaces of the runs it claims (runs.workspace_host), made once at
 * the first start.  Hosts sharing a database each have their own, so a run
 * is taken up again only where its workspace is.
 */
static void
sup_host_id(void)
{
	char path[PATH_MAX], buf[IPC_HOST_ID_LEN + 2];
	unsigned char rnd[IPC_HOST_ID_LEN / 2];
	ssize_t n;
	size_t i;
	int fd;

	if (fmt_ok(path, sizeof(path), "%s/host-id", sup.conf.state_dir) == -1)
		fatalx("state directory %s: path too long", sup.conf.state_dir);
	if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644)) != -1) {
		randombytes_buf(rnd, sizeof(rnd));
		for (i = 0; i < sizeof(rnd); i++)
			snprintf(buf + 2 * i, 3, "%02x", rnd[i]);
		buf[IPC_HOST_ID_LEN] = '\n';
		if (write(fd, buf, IPC_HOST_ID_LEN + 1) != IPC_HOST_ID_LEN + 1 || fsync(fd) == -1)
			fatal("%s", path);
		close(fd);
	} else if (errno != EEXIST)
		fatal("%s", path);
	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) == -1)
		fatal("%s", path);
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n != IPC_HOST_ID_LEN + 1 || buf[IPC_HOST_ID_LEN] != '\n')
		fatalx("%s: not a host id (32 lower-case hex digits and a newline)", path);
	buf[IPC_HOST_ID_LEN] = '\0';
	if (strspn(buf, "0123456789abcdef") != IPC_HOST_ID_LEN)
		fatalx("%s: not a host id (32 lower-case hex digits and a newline)", path);
	memcpy(sup.host_id, buf, IPC_HOST_ID_LEN + 1);
}

void
supervisor_main(const char *conf_path, int foreground, int verbose, int check_only)
{
	char err[512];
	const char *ci;

	log_init(1, verbose, LOG_DAEMON);
	log_procinit("supervisor");
	sup_config(conf_path, check_only);
	privsep_nodump();
	if (sodium_init() == -1)
		fatalx("libsodium initialisation failed");
	sup.foreground = foreground;
	sup.verbose = verbose > 3 ? 3 : verbose; /* the IPC level is 0..3 */
	sup.ctl_fd = -1;
	sup_self_exe();
	sup_git_author();
	sup_users();
	sup.pidfile_fd = pidfile_lock(sup.conf.pidfile);
	keyrotate_load();
	provider_init();
	chroot_dir_ensure(sup.conf.chroot);
	/* Runs, sandboxes and artifacts live under it whatever the database. */
	if (mkdir(sup.conf.state_dir, 0755) == -1 && errno != EEXIST)
		fatal("state directory %s", sup.conf.state_dir);
	sup_host_id();
	if (listen_bind_all(&sup.conf, sup.listen_fds, &sup.nlisten_fds, err, sizeof(err)) == -1)
		fatalx("%s", err);
	if ((sup.metrics_fd = listen_metrics_bind(&sup.conf, err, sizeof(err))) == -1)
		fatalx("%s", err);
	if ((sup.ctl_fd = control_listen(sup.conf.control_socket, err, sizeof(err))) == -1)
		fatalx("%s", err);
	if (!foreground)
		sup_detach();
	/* After detaching: its notices go to the log, its errors still reach
	 * the terminal, and a v2 cgroup move applies to the daemon itself. */
	if (sbx_init(err, sizeof(err)) == -1)
		fatalx("%s", err);
	pidfile_write(sup.pidfile_fd);
	sup.started = time(NULL);
	ci = sup_database();
	keyrotate_recover(ci);
	if ((sup.base = event_base_new()) == NULL)
		fatalx("event_base_new");
	sup_signals();
	sup.pg_restart_ev = evtimer_new(sup.base, sup_pg_restart, NULL);
	if (db_pool_init(sup.base, ci, sup.conf.db_pool) == -1)
		fatalx("database pool");
	notify_init(sup.base, ci);
	remove_sweep();
	proc_start_all();
	control_start(sup.base, sup.ctl_fd);
	sbx_rewarm();
	log_info("started (version %s)", AGRIPPA_VERSION);
	if (!foreground)
		sup_detached_ready();
	event_base_dispatch(sup.base);
	exit(0);
}
