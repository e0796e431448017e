/*
 * The control socket: agrippactl's way in.  A Unix stream socket, mode 0600,
 * owned by root; every connection's peer uid is checked with SO_PEERCRED.
 * Requests are IPC frames (IMSG_CTL_REQUEST) checked against the catalog like
 * any child's; a malformed one gets an error reply and its connection is
 * closed, and nothing else is disturbed.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <errno.h>
#include <event2/event.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "supervisor/db.h"
#include "supervisor/sbx.h"
#include "supervisor/supervisor.h"

#define CTL_MAX_CLIENTS 32
#define CTL_MAX_FRAME (1024 * 1024)

struct ctl_client {
	struct ipc_chan *ch;
	int used;
	struct sbx *sbx; /* the sandbox this connection drives (sandbox run), or NULL */
	struct backup *backup; /* the backup it asked for, until it is done */
	uint64_t backup_id;
};

static struct ctl_client clients[CTL_MAX_CLIENTS];
static struct event *ctl_ev;

typedef int (*ctl_fn)(struct ctl_client *cl, uint64_t id, struct ipc_ctl_request *req);

/* A reply without data; returns 0 with w finished, or -1 (w freed). */
static int
ctl_reply_frame(struct ipc_wbuf *w, uint64_t id, int code, const char *msg)
{
	ipc_wbuf_begin(w, IMSG_CTL_REPLY, id, 3);
	ipc_put_u64(w, (uint64_t)code);
	ipc_put_str(w, msg);
	ipc_put_nil(w);
	if (ipc_wbuf_finish(w, CTL_MAX_FRAME) == 0)
		return 0;
	ipc_wbuf_free(w);
	return -1;
}

static void
ctl_reply(struct ctl_client *cl, uint64_t id, int code, const char *msg)
{
	struct ipc_wbuf w;

	if (ctl_reply_frame(&w, id, code, msg) == 0) {
		ipc_chan_send(cl->ch, &w, -1);
		ipc_wbuf_free(&w);
	}
}

static void
put_kv_str(struct ipc_wbuf *w, const char *k, const char *v)
{
	ipc_put_str(w, k);
	ipc_put_str(w, v);
}

static void
put_kv_u64(struct ipc_wbuf *w, const char *k, uint64_t v)
{
	ipc_put_str(w, k);
	ipc_put_u64(w, v);
}

static void
put_proc(struct ipc_wbuf *w, const char *role, pid_t pid, const char *user, time_t started,
    unsigned restarts, const char *state)
{
	ipc_put_map(w, 6);
	put_kv_str(w, "role", role);
	put_kv_u64(w, "pid", pid > 0 ? (uint64_t)pid : 0);
	put_kv_str(w, "user", user);
	put_kv_u64(w, "uptime", pid > 0 ? (uint64_t)(time(NULL) - started) : 0);
	put_kv_u64(w, "restarts", restarts);
	put_kv_str(w, "state", state);
}

static const char *
ctl_username(uid_t uid, char *buf, size_t bufsz)
{
	struct passwd *pw = getpwuid(uid);

	if (pw != NULL)
		snprintf(buf, bufsz, "%s", pw->pw_name);
	else
		snprintf(buf, bufsz, "%lu", (unsigned long)uid);
	return buf;
}

static int
ctl_status(struct ctl_client *cl, uint64_t id, struct ipc_ctl_request *req)
{
	struct ipc_wbuf w;
	char root[64], user[64], dbuser[64];
	size_t i, n = 1 + nprocs + (sup.pg_embedded ? 1 : 0);
	uint64_t nmirrors, mbytes;
	unsigned tunnels;
	size_t nnet;

	if (req->nargs != 0)
		return -1;
	mirror_totals(&nmirrors, &mbytes);
	nnet = egress_runs_status(&tunnels);
	ctl_username(geteuid(), root, sizeof(root));
	ctl_username(sup.uid, user, sizeof(user));
	ctl_username(sup.pg.uid, dbuser, sizeof(dbuser));
	ipc_wbuf_begin(&w, IMSG_CTL_REPLY, id, 3);
	ipc_put_u64(&w, 0);
	ipc_put_str(&w, "ok");
	ipc_put_map(&w, 7);
	put_kv_str(&w, "version", AGRIPPA_VERSION);
	ipc_put_str(&w, "egress");
	ipc_put_map(&w, 2);
	put_kv_u64(&w, "runs", (uint64_t)nnet);
	put_kv_u64(&w, "tunnels", (uint64_t)tunnels);
	put_kv_u64(&w, "sandboxes", (uint64_t)sbx_count());
	ipc_put_str(&w, "mirrors");
	ipc_put_map(&w, 2);
	put_kv_u64(&w, "count", nmirrors);
	put_kv_u64(&w, "bytes", mbytes);
	ipc_put_str(&w, "devmode");
	ipc_put_bool(&w, sup.devmode);
	ipc_put_str(&w, "database");
	ipc_put_map(&w, 3);
	put_kv_str(&w, "mode", sup.pg_embedded ? "embedded" : "external");
	put_kv_str(&w, "state", db_pool_state());
	put_kv_u64(&w, "connections", db_pool_ready());
	ipc_put_str(&w, "processes");
	ipc_put_array(&w, (uint32_t)n);
	put_proc(&w, "supervisor", getpid(), root, sup.started, 0,
	    sup.stopping ? "stopping" : "running");
	if (sup.pg_embedded)
		put_proc(&w, "postgres", sup.pg.pid, dbuser, sup.pg.started, sup.pg_restarts,
		    sup.pg.pid > 0 ? "running" : "down");
	for (i = 0; i < nprocs; i++) {
		struct proc *p = &procs[i];

		put_proc(&w, p->name, p->pid, user, p->started, p->restarts,
		    p->pid <= 0 ? "down" : p->ready ? "running" : "starting");
	}
	if (ipc_wbuf_finish(&w, CTL_MAX_FRAME) == 0)
		ipc_chan_send(cl->ch, &w, -1);
	ipc_wbuf_free(&w);
	return 0;
}

static int
ctl_reload(struct ctl_client *cl, uint64_t id, struct ipc_ctl_request *req)
{
	char err[4096];

	if (req->nargs != 0)
		return -1;
	if (sup_reload(err, sizeof(err)) == -1)
		ctl_reply(cl, id, 1, err);
	else
		ctl_reply(cl, id, 0, "configuration reloaded");
	return 0;
}

static int
ctl_stop(struct ctl_client *cl, uint64_t id, struct ipc_ctl_request *req)
{
	if (req->nargs != 0)
		return -1;
	ctl_reply(cl, id, 0, "stopping");
	sup_stop();
	return 0;
}

static int
ctl_log(struct ctl_client *cl, uint64_t id, struct ipc_ctl_request *req)
{
	char level[16];

	if (req->nargs != 1 || ipc_get_cstr(&req->args, level, sizeof(level)) == -1)
		return -1;
	if (strcmp(level, "verbose") == 0)
		sup_set_verbose(1);
	else if (strcmp(level, "brief") == 0)
		sup_set_verbose(0);
	else
		return -1;
	ctl_reply(cl, id, 0, level);
	return 0;
}

/* The sandbox of a "sandbox" request ended: tell its operator, who may
 * still be reading the control connection. */
static void
ctl_sandbox_done(struct sbx *s, int status, void *arg)
{
	struct ctl_client *cl = arg;
	char msg[96];

	cl->sbx = NULL;
	snprintf(msg, sizeof(msg), "sandbox %s ended", sbx_id(s));
	ctl_reply(cl, 0, 0, msg);
}

/*
 * sandbox rw|ro WORKSPACE: build a sandbox over WORKSPACE (an absolute
 * directory, or "" for a fresh empty one) and pass the driver's end of its
 * channel back.  The sandbox lives as long as this connection: when the
 * client hangs up, it is killed.
 */
static int
ctl_sandbox(struct ctl_client *cl, uint64_t id, struct ipc_ctl_request *req)
{
	char mode[4], ws[PATH_MAX], err[512];
	struct sbx_req r = { .done = ctl_sandbox_done, .arg = cl };
	struct ipc_wbuf w;
	struct sbx *s;
	int fd;

	if (req->nargs != 2 || ipc_get_cstr(&req->args, mode, sizeof(mode)) == -1 ||
	    ipc_get_cstr(&req->args, ws, sizeof(ws)) == -1 ||
	    (strcmp(mode, "rw") != 0 && strcmp(mode, "ro") != 0))
		return -1;
	if (cl->sbx != NULL) {
		ctl_reply(cl, id, 1, "this connection drives a sandbox already");
		return 0;
	}
	if (sup.stopping) {
		ctl_reply(cl, id, 1, "the daemon is stopping");
		return 0;
	}
	r.readonly = strcmp(mode, "ro") == 0;
	r.workspace = ws[0] != '\0' ? ws : NULL;
	if ((s = sbx_create(&r, &fd, err, sizeof(err))) == NULL) {
		ctl_reply(cl, id, 1, err);
		return 0;
	}
	cl->sbx = s;
	ipc_wbuf_begin(&w, IMSG_CTL_SANDBOX, id, 1);
	ipc_put_str(&w, sbx_id(s));
	if (ipc_wbuf_finish(&w, CTL_MAX_FRAME) == -1 || ipc_chan_send(cl->ch, &w, fd) == -1) {
		sbx_abandon(s);
		cl->sbx = NULL;
	}
	ipc_wbuf_free(&w);
	close(fd);
	return 0;
}

static void
ctl_backup_done(void *arg, int ok, const char *msg)
{
	struct ctl_client *cl = arg;

	cl->backup = NULL;
	ctl_reply(cl, cl->backup_id, ok ? 0 : 1, msg);
}

/* backup DIR: a copy of the database, the artifacts and the
 * configuration (backup.c), answered once it is written. */
static int
ctl_backup(struct ctl_client *cl, uint64_t id, struct ipc_ctl_request *req)
{
	char dir[PATH_MAX], err[1024];

	if (req->nargs != 1 || ipc_get_cstr(&req->args, dir, sizeof(dir)) == -1)
		return -1;
	if (cl->backup != NULL) {
		ctl_reply(cl, id, 1, "this connection has a backup at work already");
		return 0;
	}
	cl->backup_id = id;
	if ((cl->backup = backup_start(dir, ctl_backup_done, cl, err, sizeof(err))) == NULL)
		ctl_reply(cl, id, 1, err);
	return 0;
}

/* Administration (ctl_admin.c): answered later, from the database. */
static int
ctl_admin(struct ctl_client *cl, uint64_t id, struct ipc_ctl_request *req)
{
	return ctl_admin_run(cl->ch, id, req);
}

static const struct {
	const char *name;
	ctl_fn fn;
	const char *usage;
} ctl_cmds[] = {
	{ "status", ctl_status, "status" },
	{ "reload", ctl_reload, "reload" },
	{ "stop", ctl_stop, "stop" },
	{ "log", ctl_log, "log verbose|brief" },
	{ "sandbox", ctl_sandbox, "sandbox rw|ro WORKSPACE" },
	{ "backup", ctl_backup, "backup DIR" },
	{ "user add", ctl_admin, "user add NAME [DISPLAY]" },
	{ "user list", ctl_admin, "user list" },
	{ "user disable", ctl_admin, "user disable NAME" },
	{ "token create", ctl_admin, "token create USER [DAYS]" },
	{ "token revoke", ctl_admin, "token revoke PREFIX" },
	{ "token list", ctl_admin, "token list USER" },
	{ "project add", ctl_admin, "project add NAME" },
	{ "project list", ctl_admin, "project list" },
	{ "member add", ctl_admin, "member add PROJECT USER admin|member|viewer" },
	{ "member remove", ctl_admin, "member remove PROJECT USER" },
	{ "member role", ctl_admin, "member role PROJECT USER admin|member|viewer" },
	{ "template load", ctl_admin, "template load FILE" },
	{ "template list", ctl_admin, "template list" },
	{ "repo add", ctl_admin, "repo add PROJECT NAME URL (token on standard input)" },
	{ "repo list", ctl_admin, "repo list PROJECT" },
	{ "repo test", ctl_admin, "repo test PROJECT NAME" },
	{ "skill add", ctl_admin, "skill add NAME FILE" },
	{ "skill list", ctl_admin, "skill list" },
	{ "mcp add", ctl_admin, "mcp add NAME SPEC (credentials on standard input)" },
	{ "mcp list", ctl_admin, "mcp list" },
	{ "mcp show", ctl_admin, "mcp show NAME [VERSION]" },
	{ "mcp test", ctl_admin, "mcp test [-c TOOL [-a ARGS] [-n COUNT]] NAME [VERSION]" },
	{ "grant add", ctl_admin, "grant add PROJECT skill|mcp NAME" },
	{ "grant remove", ctl_admin, "grant remove PROJECT skill|mcp NAME" },
	{ "grant list", ctl_admin, "grant list PROJECT" },
	{ "key rotate", ctl_admin, "key rotate" },
};

static void
ctl_client_free(struct ctl_client *cl)
{
	if (cl->backup != NULL) {
		backup_abandon(cl->backup);
		cl->backup = NULL;
	}
	if (cl->sbx != NULL) {
		sbx_abandon(cl->sbx);
		cl->sbx = NULL;
	}
	if (cl->ch != NULL) {
		ctl_admin_cancel(cl->ch);
		ipc_chan_free(cl->ch);
	}
	cl->ch = NULL;
	cl->used = 0;
}

static void
ctl_on_msg(struct ipc_chan *ch, struct ipc_msg *m, void *arg)
{
	struct ctl_client *cl = arg;
	struct ipc_ctl_request req;
	char msg[128];
	size_t i;

	if (ipc_dec_ctl_request(m->body, &req) == -1) {
		ctl_reply(cl, m->id, 1, "malformed request");
		return;
	}
	for (i = 0; i < sizeof(ctl_cmds) / sizeof(ctl_cmds[0]); i++) {
		if (strcmp(ctl_cmds[i].name, req.cmd) != 0)
			continue;
		if (ctl_cmds[i].fn(cl, m->id, &req) == -1) {
			snprintf(msg, sizeof(msg), "usage: %s", ctl_cmds[i].usage);
			ctl_reply(cl, m->id, 1, msg);
		}
		return;
	}
	snprintf(msg, sizeof(msg), "unknown command: %.32s", req.cmd);
	ctl_reply(cl, m->id, 1, msg);
}

static void
ctl_on_err(struct ipc_chan *ch, const char *reason, void *arg)
{
	struct ctl_client *cl = arg;
	struct ipc_wbuf w;
	char msg[160];

	if (strcmp(reason, "closed") != 0) {
		/* Best effort: tell the client why before hanging up. */
		snprintf(msg, sizeof(msg), "malformed request: %s", reason);
		log_warnx("control: %s", msg);
		if (ctl_reply_frame(&w, 0, 1, msg) == 0) {
			/* The channel has failed: write the frame directly. */
			(void)send(ipc_chan_fd(ch), w.sb.data, w.sb.size, MSG_NOSIGNAL | MSG_DONTWAIT);
			ipc_wbuf_free(&w);
		}
	}
	ctl_client_free(cl);
}

static int
ctl_peer_ok(int fd)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == -1)
		return 0;
	if (cr.uid == 0 || cr.uid == geteuid())
		return 1;
	log_warnx("control: refused connection from uid %lu", (unsigned long)cr.uid);
	return 0;
}

static void
ctl_accept(evutil_socket_t lfd, short what, void *arg)
{
	struct event_base *base = arg;
	int fd, i;

	if ((fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) == -1) {
		if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
			log_warn("control: accept");
		return;
	}
	if (!ctl_peer_ok(fd)) {
		close(fd);
		return;
	}
	for (i = 0; i < CTL_MAX_CLIENTS && clients[i].used; i++)
		;
	if (i == CTL_MAX_CLIENTS) {
		log_warnx("control: too many clients");
		close(fd);
		return;
	}
	clients[i].used = 1;
	clients[i].ch = ipc_chan_new(base, fd, ROLE_SUPERVISOR, ROLE_CTL, CTL_MAX_FRAME,
	    ctl_on_msg, ctl_on_err, &clients[i]);
	if (clients[i].ch == NULL) {
		close(fd);
		clients[i].used = 0;
	}
}

int
control_listen(const char *path, char *errbuf, size_t errsz)
{
	struct sockaddr_un sun;
	struct stat st;
	mode_t old;
	int fd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun.sun_path)) {
		snprintf(errbuf, errsz, "control socket path too long: %s", path);
		return -1;
	}
	memcpy(sun.sun_path, path, strlen(path) + 1);
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(errbuf, errsz, "%s exists and is not a socket", path);
			return -1;
		}
		/* Stale: the pidfile lock already proved no other daemon runs. */
		unlink(path);
	}
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) == -1) {
		snprintf(errbuf, errsz, "control socket: %s", strerror(errno));
		return -1;
	}
	old = umask(0177);
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1 || listen(fd, 16) == -1) {
		umask(old);
		snprintf(errbuf, errsz, "%s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	umask(old);
	if (chmod(path, 0600) == -1) {
		snprintf(errbuf, errsz, "%s: chmod: %s", path, strerror(errno));
		close(fd);
		unlink(path);
		return -1;
	}
	return fd;
}

void
control_start(struct event_base *base, int fd)
{
	ctl_ev = event_new(base, fd, EV_READ | EV_PERSIST, ctl_accept, base);
	if (ctl_ev == NULL || event_add(ctl_ev, NULL) == -1)
		fatalx("control: event");
}

void
control_cleanup(const char *path)
{
	int i;

	for (i = 0; i < CTL_MAX_CLIENTS; i++)
		if (clients[i].used)
			ctl_client_free(&clients[i]);
	if (ctl_ev != NULL) {
		close(event_get_fd(ctl_ev));
		event_free(ctl_ev);
		ctl_ev = NULL;
	}
	unlink(path);
}
