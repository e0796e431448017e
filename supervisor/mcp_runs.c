/*
 * The MCP servers of runs' steps (DESIGN.md section 4.2).
 *
 * A runner asks for a server by name (MCP_START) when an agent step that
 * requires it begins.  The supervisor loads the version pinned in the
 * run's manifest (sup_run_mcp_server: never the registry's latest, never
 * one the run was not granted), opens its credentials, checks its spec
 * again as mcp add did, and builds a sandbox of the server's own
 * (sbx.c, a struct sbx_mcp) with them in its environment only.  The
 * runner gets the read end of the server's stderr and its end of the
 * server's channel (MCP_CHANNEL, twice); the supervisor never reads a
 * byte of either: it is privileged and the server's bytes are hostile.
 *
 * The server sees a workspace only when its spec says so: "none" is a
 * fresh empty directory, "read" the run's workspace read-only, "write" the
 * run's workspace as the run's sandbox has it (read-only still when the
 * template's access is readOnly).  It never shares a namespace with the
 * run's sandbox.  A server whose spec lists a network reaches it through
 * egress with its own list, under an id of its own (egress_mcp_add): its
 * network events are the run's, naming the server.
 *
 * MCP_STOP (the runner closed its ends, so the server has seen EOF on its
 * stdin) stops the sandbox: SIGTERM MCP_RUNS_GRACE_MS later if the server
 * has not gone, SIGKILL as long after that.  When the runner goes, every
 * other server of its run is killed at once, and a server still being
 * loaded is never started.  The run's directory and disk are released only after
 * its servers are reaped (mcp_runs_live).
 */
#include <sys/queue.h>

#include <sys/socket.h>

#include <errno.h>
#include <signal.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "common/log.h"
#include "common/mcpspec.h"
#include "ipc/ipc.h"
#include "ipc/ipc_msg.h"
#include "runner/mcp.h"
#include "supervisor/db.h"
#include "supervisor/sbx.h"
#include "supervisor/secret.h"
#include "supervisor/supervisor.h"

#define MCP_RUNS_GRACE_MS 2000 /* EOF to SIGTERM, SIGTERM to SIGKILL */
#define MCP_RUNS_PER_RUN MCPSPEC_STEP_SERVERS_MAX /* servers of one run not being stopped */
/* ... and with those being stopped (their grace lasts up to
 * 2 * MCP_RUNS_GRACE_MS), so that the next step's servers, or a server
 * started again, need not wait for the last ones to go */
#define MCP_RUNS_ALL_PER_RUN (2 * MCP_RUNS_PER_RUN)

struct mserver {
	LIST_ENTRY(mserver) entry;
	char run[IPC_UUID_LEN + 1];
	uint64_t id;               /* the runner's, from MCP_START */
	char name[IPC_MCP_NAME_MAX + 1];
	char step[65];
	struct proc *runner;       /* NULL once the runner is gone or the answer is given */
	char ws[PATH_MAX];         /* the run's workspace */
	char mirror[PATH_MAX];     /* its mirror, "" for none */
	int readonly;              /* the template's access is readOnly */
	int loading;               /* its row is being read */
	int stopping;              /* MCP_STOP came, or the runner went */
	struct sbx *sbx;           /* until it is reaped */
	char egress[IPC_UUID_LEN + 1]; /* its id in egress, "" when it has no network */
};
static LIST_HEAD(, mserver) mservers = LIST_HEAD_INITIALIZER(mservers);

void
mcp_egress_id(char id[IPC_UUID_LEN + 1])
{
	unsigned char b[16];

	randombytes_buf(b, sizeof(b));
	b[6] = (b[6] & 0x0f) | 0x40; /* version 4 */
	b[8] = (b[8] & 0x3f) | 0x80; /* the RFC 4122 variant */
	snprintf(id, IPC_UUID_LEN + 1,
	         "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
	         b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
	         b[14], b[15]);
}

static struct mserver *
ms_find(const char *run, uint64_t id)
{
	struct mserver *s;

	LIST_FOREACH(s, &mservers, entry)
		if (s->id == id && strcmp(s->run, run) == 0)
			return s;
	return NULL;
}

int
mcp_runs_live(const char *run)
{
	struct mserver *s;
	int n = 0;

	LIST_FOREACH(s, &mservers, entry)
		if (strcmp(s->run, run) == 0)
			n++;
	return n;
}

/* The run's servers that are not being stopped. */
static int
ms_running(const char *run)
{
	struct mserver *s;
	int n = 0;

	LIST_FOREACH(s, &mservers, entry)
		if (!s->stopping && strcmp(s->run, run) == 0)
			n++;
	return n;
}

/* s is done with (nothing loading, no sandbox): it goes, and the run hears
 * when it was the last of a runner that is gone. */
static void
ms_free_if_done(struct mserver *s)
{
	char run[IPC_UUID_LEN + 1];
	int orphan;

	if (s->loading || s->sbx != NULL)
		return;
	orphan = s->stopping && s->runner == NULL;
	memcpy(run, s->run, sizeof(run));
	LIST_REMOVE(s, entry);
	free(s);
	if (orphan && mcp_runs_live(run) == 0)
		runs_mcp_gone(run);
}

static void
ms_failed(struct proc *runner, uint64_t id, int absent, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void
ms_failed(struct proc *runner, uint64_t id, int absent, const char *fmt, ...)
{
	struct ipc_wbuf w;
	char err[IPC_ERRMSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, sizeof(err), fmt, ap);
	va_end(ap);
	if (runner == NULL)
		return;
	ipc_wbuf_begin(&w, IMSG_MCP_FAILED, id, 2);
	ipc_put_str(&w, err);
	ipc_put_bool(&w, absent);
	proc_send(runner, &w, -1);
}

static void
ms_sbx_done(struct sbx *sbx, int status, void *arg)
{
	struct mserver *s = arg;

	(void)sbx;
	log_debug("run %s: mcp server %s (step %s) ended with status %d", s->run, s->name,
	          s->step, status);
	s->sbx = NULL;
	if (s->egress[0] != '\0')
		egress_runs_end(s->egress);
	s->egress[0] = '\0';
	s->stopping = 1;
	ms_free_if_done(s);
}

/* The values the server's sandbox masks in what the server writes
 * (sandbox/relay.h), freed after the sandbox is made: the relay masks
 * line by line, so a value holding a newline is not one it can match. */
#define MS_SECRETS_MAX (MCP_CREDS_KEYS_MAX + 1)

static void
ms_secret(const char *p, size_t n, void *arg)
{
	struct secret_set *sec = arg;

	if (sec->n < MS_SECRETS_MAX && memchr(p, '\n', n) == NULL)
		secret_set_copy(sec, p, n);
}

/* The server's env, NAME=value with its credentials: sodium_malloc'd
 * entries, NULL-terminated, in *out (free with mcp_server_env_free).  0, or -1
 * with err set. */
static int
mcp_server_env(const struct mcpspec *s, const struct mcp_creds *creds, char ***out, char *err,
               size_t errsz)
{
	char **env, *v;
	size_t i, len, nl;

	if ((env = calloc(s->nenv + 1, sizeof(char *))) == NULL)
		fatal("calloc");
	for (i = 0; i < s->nenv; i++) {
		v = NULL;
		if ((s->env[i].refs > 0 && creds == NULL) ||
		    (v = mcpspec_expand(s->env[i].value, creds, &len)) == NULL) {
			snprintf(err, errsz, "spec.env.%s names a credential it was not given",
			         s->env[i].name);
			goto fail;
		}
		nl = strlen(s->env[i].name);
		if ((env[i] = sodium_malloc(nl + len + 2)) == NULL)
			fatalx("out of memory");
		memcpy(env[i], s->env[i].name, nl);
		env[i][nl] = '=';
		memcpy(env[i] + nl + 1, v, len + 1);
		sodium_free(v);
	}
	*out = env;
	return 0;
fail:
	for (i = 0; env[i] != NULL; i++)
		sodium_free(env[i]);
	free(env);
	return -1;
}

static void
mcp_server_env_free(char **env)
{
	size_t i;

	for (i = 0; env != NULL && env[i] != NULL; i++)
		sodium_free(env[i]);
	free(env);
}

struct sbx *
mcp_sandbox_start(const struct mcpspec *spec, const struct mcp_creds *creds, const char *ctext,
                  size_t clen, const char *run, const char *name, const struct sbx_req *where,
                  char egress[IPC_UUID_LEN + 1], int *io, int *serr, char *err, size_t errsz)
{
	struct secret_set sec = { .n = 0 };
	struct sbx_mcp m;
	struct sbx_req req = *where;
	struct sbx *sbx;
	char **env = NULL;

	egress[0] = '\0';
	if (mcp_server_env(spec, creds, &env, err, errsz) == -1)
		return NULL;
	mcp_egress_id(egress);
	switch (egress_mcp_add(egress, run, name, spec->allow, spec->nallow, spec->presets,
	                       spec->npresets, err, errsz)) {
	case -1:
		egress[0] = '\0';
		mcp_server_env_free(env);
		return NULL;
	case 0:
		if (spec->nallow > 0 || spec->npresets > 0)
			log_warnx("%s%s: mcp server %s: egress is disabled (egress.enabled); the "
			          "server runs without a network", strcmp(run, "-") == 0 ? "mcp test" :
			          "run ", strcmp(run, "-") == 0 ? "" : run, name);
		egress[0] = '\0';
		break;
	default:
		req.network = 1;
	}
	if (ctext != NULL)
		mcp_creds_secrets(ctext, clen, ms_secret, &sec);
	m = (struct sbx_mcp){ .argv = (char *const *)spec->argv, .env = env,
		              .paths = spec->paths, .npaths = spec->npaths,
		              .secrets = (const unsigned char *const *)sec.p, .secretlen = sec.len,
		              .nsecrets = sec.n, .line_max = MCP_LINE_MAX_DEFAULT };
	req.mcp = &m;
	sbx = sbx_create(&req, io, err, errsz);
	mcp_server_env_free(env);
	secret_set_free(&sec);
	if (sbx == NULL) {
		if (egress[0] != '\0')
			egress_runs_end(egress);
		egress[0] = '\0';
		return NULL;
	}
	*serr = sbx_take_stderr(sbx);
	if (req.network)
		egress_runs_listener(egress, sbx_take_listener(sbx));
	return sbx;
}

/* One of a server's descriptors to the runner (MCP_CHANNEL; fd closed). */
static void
ms_send_fd(struct mserver *s, uint32_t what, uint32_t transport, uint32_t startup_ms,
           uint32_t call_ms, int fd)
{
	struct ipc_wbuf w;

	ipc_wbuf_begin(&w, IMSG_MCP_CHANNEL, s->id, 4);
	ipc_put_u64(&w, what);
	ipc_put_u64(&w, transport);
	ipc_put_u64(&w, startup_ms);
	ipc_put_u64(&w, call_ms);
	proc_send(s->runner, &w, fd);
	close(fd);
}

/*
 * A remote (http) server: nothing runs here.  The proxy, which holds the
 * credentials of remote servers (DESIGN.md section 1), gets one end of a
 * socketpair with the server's URL, its headers with their credentials
 * expanded and the values to redact (PROXY_MCP), and speaks Streamable
 * HTTP to it (proxy/mcphttp.c); the runner's client gets the other end,
 * on which it speaks as to a stdio server.  Closing it ends the bridge.
 */
static void
ms_http(struct mserver *s, const struct mcpspec *spec, const struct mcp_creds *creds,
        const char *ctext, size_t clen)
{
	struct proc *px = proc_by_role(ROLE_PROXY);
	struct secret_set sec = { .n = 0 };
	struct ipc_wbuf w;
	char *v, *line;
	size_t i, len, nl;
	int sp[2], rv;

	if (px == NULL || px->chan == NULL || !px->ready) {
		ms_failed(s->runner, s->id, 0, "mcp server %s: the proxy, which calls remote MCP "
		          "servers, is not running", s->name);
		return;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == -1) {
		ms_failed(s->runner, s->id, 0, "mcp server %s: socketpair: %s", s->name,
		          strerror(errno));
		return;
	}
	ipc_wbuf_begin(&w, IMSG_PROXY_MCP, s->id, 6);
	ipc_put_str(&w, s->run);
	ipc_put_str(&w, s->name);
	ipc_put_str(&w, spec->url);
	ipc_put_array(&w, (uint32_t)spec->nheaders);
	for (i = 0; i < spec->nheaders; i++) {
		if ((spec->headers[i].refs > 0 && creds == NULL) ||
		    (v = mcpspec_expand(spec->headers[i].value, creds, &len)) == NULL) {
			sodium_memzero(w.sb.data, w.sb.size); /* the headers put so far */
			ipc_wbuf_free(&w);
			close(sp[0]);
			close(sp[1]);
			ms_failed(s->runner, s->id, 0, "mcp server %s: spec.headers.%s names a "
			          "credential it was not given", s->name, spec->headers[i].name);
			return;
		}
		nl = strlen(spec->headers[i].name);
		if (nl + 2 + len > IPC_MCP_HEADER_MAX) {
			/* the proxy would refuse the frame whole */
			sodium_free(v);
			sodium_memzero(w.sb.data, w.sb.size);
			ipc_wbuf_free(&w);
			close(sp[0]);
			close(sp[1]);
			ms_failed(s->runner, s->id, 0, "mcp server %s: spec.headers.%s is over %u "
			          "bytes once its credentials are put in", s->name,
			          spec->headers[i].name, IPC_MCP_HEADER_MAX);
			return;
		}
		if ((line = sodium_malloc(nl + len + 3)) == NULL)
			fatalx("out of memory");
		memcpy(line, spec->headers[i].name, nl);
		memcpy(line + nl, ": ", 2);
		memcpy(line + nl + 2, v, len + 1);
		ipc_put_bin(&w, line, nl + 2 + len);
		sodium_free(line);
		sodium_free(v);
	}
	if (ctext != NULL)
		mcp_creds_secrets(ctext, clen, ms_secret, &sec);
	ipc_put_array(&w, (uint32_t)sec.n);
	for (i = 0; i < sec.n; i++)
		ipc_put_bin(&w, sec.p[i], sec.len[i]);
	secret_set_free(&sec);
	ipc_put_u64(&w, (uint64_t)spec->call_timeout * 1000);
	/* the frame held the credentials: wiped as provider.c wipes the keys */
	rv = ipc_wbuf_finish(&w, sup.conf.ipc_max_frame) == 0 ? ipc_chan_send(px->chan, &w, sp[0])
	                                                      : -1;
	sodium_memzero(w.sb.data, w.sb.size);
	ipc_wbuf_free(&w);
	if (rv == -1) {
		close(sp[0]);
		close(sp[1]);
		ms_failed(s->runner, s->id, 0, "mcp server %s: cannot reach the proxy", s->name);
		return;
	}
	close(sp[0]);
	log_info("run %s: mcp server %s (remote) for step %s through the proxy", s->run, s->name,
	         s->step);
	ms_send_fd(s, IPC_MCP_FD_CHANNEL, IPC_MCP_HTTP, 30000, spec->call_timeout * 1000, sp[1]);
}

/* The pinned row is here: the server's sandbox, and its descriptors to
 * the runner. */
static void
ms_build(struct mserver *s, PGresult *res)
{
	struct mcp_forbidden fb;
	struct mcpspec_ctx ctx;
	struct mcpspec *spec;
	struct mcp_creds *creds = NULL;
	struct sbx_req req;
	unsigned char *ctext = NULL;
	size_t clen = 0;
	char why[512], err[IPC_ERRMSG_MAX - 128];
	const char *text;
	int io = -1, serr = -1;

	text = PQgetvalue(res, 0, 0);
	mcp_forbidden_paths(&fb);
	ctx = (struct mcpspec_ctx){ .flags = MCPSPEC_F_RESOLVE, .forbidden = fb.p,
		                    .nforbidden = fb.n };
	if ((spec = mcpspec_parse(text, strlen(text), &ctx, why, sizeof(why))) == NULL) {
		log_warnx("run %s: mcp server %s: its stored spec is refused now: %s", s->run,
		          s->name, why);
		ms_failed(s->runner, s->id, 0, "mcp server %s: its stored spec is refused now: %s",
		          s->name, why);
		return;
	}
	if (sealed_open(res, 0, 1, SECRET_CTX_MCP, &ctext, &clen) == -1) {
		log_warnx("run %s: mcp server %s: its credentials do not open with this master "
		          "key", s->run, s->name);
		ms_failed(s->runner, s->id, 0, "mcp server %s: its credentials do not open with "
		          "this master key", s->name);
		mcpspec_free(spec);
		return;
	}
	if (ctext != NULL &&
	    (creds = mcp_creds_parse((const char *)ctext, clen, why, sizeof(why))) == NULL) {
		ms_failed(s->runner, s->id, 0, "mcp server %s: its stored credentials are "
		          "unreadable: %s", s->name, why);
		goto out;
	}
	if (spec->transport == MCPSPEC_HTTP) {
		ms_http(s, spec, creds, (const char *)ctext, clen);
		goto out;
	}
	memset(&req, 0, sizeof(req));
	if (spec->workspace != MCPSPEC_WS_NONE) {
		req.workspace = s->ws;
		req.trusted = 1;
		req.mirror = s->mirror[0] != '\0' ? s->mirror : NULL;
		req.readonly = spec->workspace == MCPSPEC_WS_READ || s->readonly;
	}
	req.done = ms_sbx_done;
	req.arg = s;
	if ((s->sbx = mcp_sandbox_start(spec, creds, (const char *)ctext, clen, s->run, s->name,
	                                &req, s->egress, &io, &serr, err, sizeof(err))) == NULL) {
		log_warnx("run %s: mcp server %s: %s", s->run, s->name, err);
		ms_failed(s->runner, s->id, 0, "mcp server %s: %s", s->name, err);
		goto out;
	}
	log_info("run %s: mcp server %s version %s for step %s in sandbox %s", s->run, s->name,
	         PQgetvalue(res, 0, 3), s->step, sbx_id(s->sbx));
	if (serr != -1)
		ms_send_fd(s, IPC_MCP_FD_STDERR, IPC_MCP_STDIO, spec->startup_timeout * 1000,
		           spec->call_timeout * 1000, serr);
	ms_send_fd(s, IPC_MCP_FD_CHANNEL, IPC_MCP_STDIO, spec->startup_timeout * 1000,
	           spec->call_timeout * 1000, io);
out:
	mcp_creds_free(creds);
	if (ctext != NULL)
		sodium_free(ctext);
	mcpspec_free(spec);
}

static void
ms_loaded(uint64_t reqid, int code, const char *err, void *pgres, void *arg)
{
	struct mserver *s = arg;
	PGresult *res = pgres;

	(void)reqid;
	s->loading = 0;
	if (s->stopping || s->runner == NULL) {
		ms_free_if_done(s);
		return;
	}
	if (code != DB_OK)
		ms_failed(s->runner, s->id, 0, "mcp server %s: the database failed: %s", s->name,
		          err);
	else if (PQntuples(res) != 1)
		ms_failed(s->runner, s->id, 1, "mcp server %s is not pinned on this run (it was "
		          "not granted to its project, or not registered, when the run was "
		          "submitted)", s->name);
	else
		ms_build(s, res);
	if (s->sbx == NULL)
		s->stopping = 1;
	ms_free_if_done(s);
}

void
mcp_runs_start(struct proc *runner, const char *run, const char *ws, int readonly,
               const char *mirror, struct ipc_msg *m)
{
	const struct sql_op *op = db_op_lookup("sup_run_mcp_server");
	struct ipc_mcp_start st;
	struct db_params params;
	struct mserver *s;

	if (ipc_dec_mcp_start(m->body, &st) == -1) {
		log_warnx("run %s: runner sent a bad MCP_START", run);
		proc_kill(runner);
		return;
	}
	if (ms_find(run, m->id) != NULL) {
		ms_failed(runner, m->id, 0, "mcp server %s: request %llu is in use", st.server,
		          (unsigned long long)m->id);
		return;
	}
	if (ms_running(run) >= MCP_RUNS_PER_RUN) {
		ms_failed(runner, m->id, 0, "mcp server %s: the run has %d servers already",
		          st.server, MCP_RUNS_PER_RUN);
		return;
	}
	if (mcp_runs_live(run) >= MCP_RUNS_ALL_PER_RUN) {
		ms_failed(runner, m->id, 0,
		          "mcp server %s: the run has %d servers already, with those still "
		          "being stopped", st.server, MCP_RUNS_ALL_PER_RUN);
		return;
	}
	if (op == NULL)
		fatalx("no op sup_run_mcp_server");
	if ((s = calloc(1, sizeof(*s))) == NULL)
		fatal("calloc");
	snprintf(s->run, sizeof(s->run), "%s", run);
	s->id = m->id;
	memcpy(s->name, st.server, sizeof(s->name));
	memcpy(s->step, st.step, sizeof(s->step));
	s->runner = runner;
	snprintf(s->ws, sizeof(s->ws), "%s", ws);
	snprintf(s->mirror, sizeof(s->mirror), "%s", mirror != NULL ? mirror : "");
	s->readonly = readonly;
	memset(&params, 0, sizeof(params));
	if ((params.values[0] = strdup(run)) == NULL || (params.values[1] = strdup(s->name)) == NULL)
		fatal("strdup");
	params.n = 2;
	s->loading = 1;
	LIST_INSERT_HEAD(&mservers, s, entry);
	if (db_pool_submit(op, &params, ms_loaded, s) == 0) {
		db_params_free(&params);
		s->loading = 0;
		ms_failed(runner, s->id, 0, "mcp server %s: the database is unavailable", s->name);
		s->stopping = 1;
		s->runner = NULL;
		ms_free_if_done(s);
	}
}

void
mcp_runs_stop(const char *run, struct ipc_msg *m)
{
	struct mserver *s;

	if (ipc_dec_mcp_stop(m->body) == -1 || (s = ms_find(run, m->id)) == NULL)
		return; /* nothing of that id runs (it failed, or ended): nothing to do */
	s->stopping = 1;
	s->runner = NULL; /* nothing more is said of it */
	if (s->sbx != NULL)
		sbx_stop(s->sbx, MCP_RUNS_GRACE_MS);
	else
		ms_free_if_done(s);
}

void
mcp_runs_end(const char *run)
{
	struct mserver *s, *next;

	for (s = LIST_FIRST(&mservers); s != NULL; s = next) {
		next = LIST_NEXT(s, entry);
		if (strcmp(s->run, run) != 0)
			continue;
		if (s->stopping && s->sbx != NULL)
			continue; /* being stopped already: SIGKILL comes in its time */
		s->stopping = 1;
		s->runner = NULL;
		if (s->sbx != NULL)
			sbx_kill(s->sbx); /* done() comes once it is reaped */
		else
			ms_free_if_done(s);
	}
}
