/*
 * Runs the engine claimed (DESIGN.md sections 1 and 3.4): for each
 * RUN_START the supervisor sets the run up and starts its runner.
 *
 *  - Setup: the run's directory STATE/runs/RUN holds "ws", the workspace
 *    (given to the sandbox user).  When the run has no base commit yet, the
 *    repository connection is loaded (scoped to the run's project by
 *    run_setup), its token decrypted here and handed to a transient git
 *    helper only (gitrun.c), which brings the connection's mirror up to
 *    date (mirror.c: one fetch at a time, shared by the runs that wait for
 *    it); a second helper writes the workspace from the mirror at the
 *    template's ref, and the base commit and ref are recorded with the
 *    event workspace.ready.  A fetch or checkout that fails fails the run.
 *    The mirror is the trusted object store: the sandbox sees its objects
 *    read-only, the patch is made against it.
 *  - Runner: a runner process (agrippad -P runner), started as the
 *    checkout begins so that its start overlaps it, whose channel is scoped
 *    to this run and lease owner: its database operations must name both
 *    (SQL_SCOPE_RUN); once the workspace is ready a sandbox on it, and the
 *    runner is given its end of the sandbox channel in RUNNER_START.
 *  - End: when the runner exits, its sandbox is killed and the engine told
 *    (RUN_ENDED) how it ended; a finished run's directory is removed in
 *    the background (supervisor/remove.c) once its runner and its sandbox
 *    are both gone.
 *  - A cancel is forwarded to the runner (RUNNER_CANCEL); a lost lease
 *    kills it.  When the engine dies, its runners are killed: their leases
 *    lapse and the next engine takes the runs up.
 */
#include <sys/queue.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/forge.h"
#include "common/log.h"
#include "common/mcpspec.h"
#include "common/util.h"
#include "common/wsstat.h"
#include "supervisor/db.h"
#include "supervisor/sbx.h"
#include "supervisor/secret.h"
#include "supervisor/supervisor.h"

struct srun {
	LIST_ENTRY(srun) entry;
	struct proc p; /* the runner */
	char previous[IPC_STATUS_MAX + 1];
	char dir[PATH_MAX], ws[PATH_MAX];
	char stats[PATH_MAX]; /* the chowner's list of the workspace as given */
	int listing;          /* 1: the chowner writes it; 2: written, to be sealed */
	/* the set-up's milestones, ms from its start (log_debug at the end) */
	uint64_t t0;
	unsigned t_setup, t_fetch, t_disk, t_checkout, t_chown, t_ready;
	char img[PATH_MAX], mnt[PATH_MAX]; /* its own disk (disk.c): the image, the mount */
	char repo_id[IPC_UUID_LEN + 1];    /* the connection, "" for no repository */
	struct disk_job *djob;             /* its disk being made */
	int fetched;                       /* the mirror is up to date for it */
	int failing;                       /* srun_fail said why: the run fails */
	int ws_made;                       /* its (empty) workspace is there */
	char mirror[PATH_MAX]; /* the connection's mirror, "" for no repository */
	char url[IPC_GIT_URL_MAX + 1];
	char ref[IPC_GIT_REF_MAX + 1]; /* the template's, "" for the default branch */
	int readonly;
	struct gitrun *gitrun;
	struct mirror_wait *mwait; /* waiting for the mirror's fetch */
	struct sbx *sbx;
	int sbx_fd;         /* the runner's end of the sandbox channel, until handed */
	int said;           /* RUNNER_DONE came */
	int handed;         /* RUNNER_START sent: the runner has its run */
	int recording;      /* sup_run_checked_out in flight: not handed before it is done */
	uint32_t outcome;
	int ended;          /* RUN_ENDED sent: the run is over for this supervisor */
	int finished;       /* ... and finished: its directory goes once all has ended */
	int setup_ops;      /* the supervisor's own operations in flight */
	char base[65];      /* the run's base commit, once known */
	char ref_out[IPC_GIT_REF_MAX + 1]; /* ... and the ref it was checked out as */
	int giving;         /* the chowner gives its workspace to the sandbox user */
	unsigned char *secret; /* the repository token (sodium_malloc), for redaction */
	size_t secretlen;
	struct secret_set mcp; /* the credentials of its MCP servers, for redaction */
	int mcp_state;      /* 0 not loaded, 1 loading, 2 loaded */
	int start_waiting;  /* runner_start waits for the credentials */
	uint64_t patch_id;  /* the PATCH_MAKE being answered, 0 for none */
	uint64_t pr_id;     /* the PR_PUSH or PR_OPEN being answered, 0 for none */
	enum forge_kind forge; /* the connection's forge */
	char api_url[IPC_PR_URL_MAX + 1]; /* its API, "" for the forge's public one */
	int patch_fd;       /* its file, until the git helper is done */
	char patch_tmp[PATH_MAX];
	int proxied;        /* RUNNER_PROXY sent: a new proxy sends another */
	int net_state;      /* its networks (egress_runs.c): 0 not loaded, 1 loading, 2 loaded */
};
static LIST_HEAD(, srun) sruns = LIST_HEAD_INITIALIZER(sruns);

static void srun_end(struct srun *r, uint32_t outcome);

static struct srun *
srun_find(const char *run)
{
	struct srun *r;

	LIST_FOREACH(r, &sruns, entry)
		if (!r->ended && strcmp(r->p.run, run) == 0)
			return r;
	return NULL;
}

static struct proc *
engine_proc(void)
{
	struct proc *p = proc_by_role(ROLE_ENGINE);

	return p != NULL && p->chan != NULL && p->ready ? p : NULL;
}

/* ---- the engine ---------------------------------------------------------- */

void
runs_send_conf(void)
{
	struct proc *e = engine_proc();
	struct ipc_wbuf w;

	if (e == NULL)
		return;
	ipc_wbuf_begin(&w, IMSG_ENGINE_CONF, 0, 5);
	ipc_put_u64(&w, sup.conf.engine.concurrency);
	ipc_put_u64(&w, sup.conf.engine.lease);
	ipc_put_u64(&w, sup.conf.engine.sweep);
	ipc_put_str(&w, sup.host_id);
	ipc_put_u64(&w, sup.conf.engine.host_grace);
	proc_send(e, &w, -1);
}

/* ---- left-over run directories ------------------------------------------ */

struct stale {
	char dir[PATH_MAX];
};

static void
stale_done(uint64_t reqid, int code, const char *err, void *pgres, void *arg)
{
	struct stale *x = arg;
	PGresult *res = pgres;
	char mnt[PATH_MAX], img[PATH_MAX];
	const char *st;

	if (code == DB_OK) {
		st = PQntuples(res) == 1 ? PQgetvalue(res, 0, 0) : "";
		if (strcmp(st, "succeeded") == 0 || strcmp(st, "failed") == 0 ||
		    strcmp(st, "cancelled") == 0 || PQntuples(res) == 0) {
			log_info("removing the directory of finished run %s", x->dir);
			if (fmt_ok(mnt, sizeof(mnt), "%s/disk", x->dir) == 0 &&
			    fmt_ok(img, sizeof(img), "%s/disk.img", x->dir) == 0)
				disk_release(mnt, img);
			remove_tree(x->dir);
		}
	}
	free(x);
}

/*
 * Once per start: a run's directory outlives a run that ended without its
 * runner (cancelled while parked, failed by a sweep) or while the daemon
 * was down.  Every directory under STATE/runs whose run is finished (or
 * gone) is removed; live ones are kept for their next runner.
 */
static void
stale_sweep(void)
{
	const struct sql_op *op = db_op_lookup("sup_run_setup");
	char runs[PATH_MAX];
	struct db_params params;
	struct dirent *de;
	struct stale *x;
	DIR *d;

	if (op == NULL || fmt_ok(runs, sizeof(runs), "%s/runs", sup.conf.state_dir) == -1 ||
	    (d = opendir(runs)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (!ipc_is_uuid(de->d_name, strlen(de->d_name)) || srun_find(de->d_name) != NULL)
			continue;
		if ((x = calloc(1, sizeof(*x))) == NULL)
			fatal("calloc");
		if (fmt_ok(x->dir, sizeof(x->dir), "%s/%s", runs, de->d_name) == -1) {
			free(x);
			continue;
		}
		memset(&params, 0, sizeof(params));
		params.n = 1;
		if ((params.values[0] = strdup(de->d_name)) == NULL)
			fatal("strdup");
		if (db_pool_submit(op, &params, stale_done, x) == 0) {
			db_params_free(&params);
			free(x);
			break;
		}
	}
	closedir(d);
}

void
runs_engine_ready(struct proc *engine)
{
	static int swept;

	runs_send_conf();
	if (!swept) {
		swept = 1;
		stale_sweep();
		mirror_init();
		mirror_sweep();
		disk_spare_prepare();
	}
}

void
runs_wake(uint32_t kind, const char *run)
{
	struct proc *e = engine_proc();
	struct ipc_wbuf w;

	if (e == NULL)
		return;
	ipc_wbuf_begin(&w, IMSG_ENGINE_WAKE, 0, 2);
	ipc_put_u64(&w, kind);
	ipc_put_str(&w, run);
	proc_send(e, &w, -1);
}

/* Tell the engine that owns r (if it is still the one running) that r's
 * runner is gone. */
static void
tell_engine(struct srun *r, uint32_t outcome)
{
	struct proc *e = engine_proc();
	struct ipc_wbuf w;

	if (e == NULL || strcmp(e->instance, r->p.owner) != 0)
		return;
	ipc_wbuf_begin(&w, IMSG_RUN_ENDED, 0, 2);
	ipc_put_str(&w, r->p.run);
	ipc_put_u64(&w, outcome);
	proc_send(e, &w, -1);
}

/* ---- freeing ------------------------------------------------------------- */

static void
mcp_free(struct srun *r)
{
	secret_set_free(&r->mcp);
}

/* Everything of the run has ended here (its runner and its sandbox are
 * reaped, nothing is in flight): r goes, and a finished run's directory is
 * removed in the background, with no process left to write in it. */
static void
srun_maybe_free(struct srun *r)
{
	if (!r->ended || r->p.pid > 0 || r->p.inflight > 0 || r->setup_ops > 0 ||
	    r->sbx != NULL || r->gitrun != NULL || r->mwait != NULL || r->djob != NULL ||
	    mcp_runs_live(r->p.run) > 0)
		return;
	LIST_REMOVE(r, entry);
	if (r->finished && r->dir[0] != '\0') {
		disk_release(r->mnt, r->img);
		remove_tree(r->dir);
	}
	if (r->sbx_fd >= 0)
		close(r->sbx_fd);
	if (r->patch_fd >= 0)
		close(r->patch_fd);
	if (r->patch_tmp[0] != '\0')
		unlink(r->patch_tmp);
	if (r->secret != NULL)
		sodium_free(r->secret); /* wipes it */
	mcp_free(r);
	egress_runs_end(r->p.run);
	free(r);
}

void
runs_mcp_gone(const char *run)
{
	struct srun *r;

	LIST_FOREACH(r, &sruns, entry)
		if (strcmp(r->p.run, run) == 0 && r->ended) {
			srun_maybe_free(r);
			return;
		}
}

static void
srun_idle(struct proc *p)
{
	srun_maybe_free((struct srun *)((char *)p - offsetof(struct srun, p)));
}

static void
sbx_done(struct sbx *s, int status, void *arg)
{
	struct srun *r = arg;

	r->sbx = NULL;
	if (!r->ended)
		proc_kill(&r->p); /* a runner without its sandbox cannot go on */
	srun_maybe_free(r);
}

/* The run is over here: outcome to the engine; its directory is removed
 * once everything of it has ended (srun_maybe_free) when it finished. */
static void
srun_end(struct srun *r, uint32_t outcome)
{
	if (r->ended)
		return;
	r->ended = 1;
	if (r->gitrun != NULL) {
		gitrun_abandon(r->gitrun);
		r->gitrun = NULL;
	}
	if (r->mwait != NULL) {
		mirror_wait_cancel(r->mwait);
		r->mwait = NULL;
	}
	if (r->djob != NULL) {
		disk_abandon(r->djob);
		r->djob = NULL;
	}
	if (r->sbx != NULL)
		sbx_kill(r->sbx);
	mcp_runs_end(r->p.run);
	proc_kill(&r->p);
	r->finished = outcome == IPC_RUN_FINISHED;
	log_debug("run %s: over here (outcome %u)", r->p.run, outcome);
	tell_engine(r, outcome);
	srun_maybe_free(r);
}

/* ---- the supervisor's own operations ------------------------------------- */

typedef void (*srun_db_cb)(struct srun *r, int code, const char *err, PGresult *res);
struct sop {
	struct srun *r;
	srun_db_cb cb;
};

static void
sop_done(uint64_t reqid, int code, const char *err, void *pgres, void *arg)
{
	struct sop *o = arg;
	struct srun *r = o->r;

	if (!r->ended)
		o->cb(r, code, err, pgres);
	free(o);
	r->setup_ops--; /* only now: the callback must not free r */
	srun_maybe_free(r);
}

/* Submit op with nargs string arguments. */
static void
sop_submit(struct srun *r, const char *name, srun_db_cb cb, int nargs, ...)
{
	const struct sql_op *op = db_op_lookup(name);
	struct db_params params;
	struct sop *o;
	va_list ap;
	int i;

	if (op == NULL)
		fatalx("no op %s", name);
	memset(&params, 0, sizeof(params));
	va_start(ap, nargs);
	for (i = 0; i < nargs; i++)
		if ((params.values[i] = strdup(va_arg(ap, const char *))) == NULL)
			fatal("strdup");
	va_end(ap);
	params.n = nargs;
	if ((o = calloc(1, sizeof(*o))) == NULL)
		fatal("calloc");
	o->r = r;
	o->cb = cb;
	r->setup_ops++;
	if (db_pool_submit(op, &params, sop_done, o) == 0) {
		db_params_free(&params);
		r->setup_ops--;
		free(o);
		log_warnx("run %s: %s: the database is unavailable", r->p.run, name);
		srun_end(r, IPC_RUN_CRASHED);
	}
}

static void
failed_done(struct srun *r, int code, const char *err, PGresult *res)
{
	if (code != DB_OK) {
		log_warnx("run %s: cannot record its failure: %s", r->p.run, err);
		srun_end(r, IPC_RUN_CRASHED);
		return;
	}
	srun_end(r, IPC_RUN_FINISHED);
}

/* The run cannot be set up: it fails with why (the first reason only: its
 * disk and its fetch go side by side, and both may fail). */
static void
srun_fail(struct srun *r, const char *why)
{
	if (r->failing)
		return;
	r->failing = 1;
	log_warnx("run %s: %s", r->p.run, why);
	sop_submit(r, "sup_run_fail", failed_done, 3, r->p.run, r->p.owner, why);
}


/* ---- the artifact store -------------------------------------------------- */

static void
runner_reply(struct srun *r, uint64_t id, int ok, const char *error, uint64_t size,
    const unsigned char *sha, const void *data, size_t len)
{
	struct ipc_wbuf w;

	ipc_wbuf_begin(&w, IMSG_RUNNER_REPLY, id, 5);
	ipc_put_bool(&w, ok);
	ipc_put_str(&w, error);
	ipc_put_u64(&w, size);
	ipc_put_bin(&w, sha != NULL ? sha : (const unsigned char *)"", sha != NULL ? 32 : 0);
	ipc_put_bin(&w, data != NULL ? data : "", len);
	if (proc_send(&r->p, &w, -1) == -1)
		log_warnx("run %s: cannot answer the runner", r->p.run);
}

static void
hexof(const unsigned char sha[32], char hex[65])
{
	sodium_bin2hex(hex, 65, sha, 32);
}

/* STATE/artifacts, made when missing (only the supervisor writes it). */
static int
store_dir(char *dir, size_t dirsz)
{
	if (fmt_ok(dir, dirsz, "%s/artifacts", sup.conf.state_dir) == -1) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if (mkdir(dir, 0700) == -1 && errno != EEXIST)
		return -1;
	return 0;
}

/* Move the finished file tmp into the store under its digest. */
static int
store_commit(const char *tmp, const char hex[65])
{
	char dir[PATH_MAX], sub[PATH_MAX], path[PATH_MAX];

	if (store_dir(dir, sizeof(dir)) == -1 ||
	    fmt_ok(sub, sizeof(sub), "%s/%.2s", dir, hex) == -1 ||
	    fmt_ok(path, sizeof(path), "%s/%s", sub, hex) == -1)
		return -1;
	if (mkdir(sub, 0700) == -1 && errno != EEXIST)
		return -1;
	return rename(tmp, path);
}

/* A new empty file in the store's directory, for writing (tmp gets its
 * path). */
static int
store_tmp(char *tmp, size_t tmpsz)
{
	char dir[PATH_MAX];
	int fd;

	if (store_dir(dir, sizeof(dir)) == -1 ||
	    fmt_ok(tmp, tmpsz, "%s/.tmp-XXXXXX", dir) == -1)
		return -1;
	if ((fd = mkostemp(tmp, O_CLOEXEC)) == -1)
		return -1;
	return fd;
}

/* ARTIFACT_PUT: the runner's artifact, checked against its digest and kept
 * under it. */
static void
artifact_put(struct srun *r, struct ipc_msg *m)
{
	const uint8_t *sha, *data;
	unsigned char got[32];
	char hex[65], tmp[PATH_MAX];
	size_t len, off = 0;
	ssize_t n;
	int fd;

	if (ipc_dec_artifact_put(m->body, &sha, &data, &len) == -1)
		return; /* the catalog checked it */
	crypto_hash_sha256(got, data, len);
	if (sodium_memcmp(got, sha, 32) != 0) {
		runner_reply(r, m->id, 0, "the artifact does not match its digest", 0, NULL, NULL, 0);
		return;
	}
	hexof(got, hex);
	if ((fd = store_tmp(tmp, sizeof(tmp))) == -1) {
		log_warn("run %s: artifact store", r->p.run);
		runner_reply(r, m->id, 0, "the artifact store cannot be written", 0, NULL, NULL, 0);
		return;
	}
	while (off < len && (n = write(fd, data + off, len - off)) > 0)
		off += (size_t)n;
	if (off != len || fsync(fd) == -1 || close(fd) == -1 || store_commit(tmp, hex) == -1) {
		log_warn("run %s: artifact store", r->p.run);
		if (off != len)
			close(fd);
		unlink(tmp);
		runner_reply(r, m->id, 0, "the artifact store cannot be written", 0, NULL, NULL, 0);
		return;
	}
	runner_reply(r, m->id, 1, "", len, got, NULL, 0);
}

/* The git helper made the patch into r->patch_fd. */
static void
patch_done(void *arg, int ok, const char *error, const char *base, uint64_t size,
           const char *ref)
{
	struct srun *r = arg;
	crypto_hash_sha256_state st;
	unsigned char sha[32], *buf = NULL;
	char hex[65], why[IPC_ERRMSG_MAX];
	uint64_t id = r->patch_id;
	size_t off = 0;
	ssize_t n;

	r->gitrun = NULL;
	r->patch_id = 0;
	if (r->ended || r->p.chan == NULL) {
		srun_maybe_free(r);
		return;
	}
	if (!ok || size == 0) {
		close(r->patch_fd);
		r->patch_fd = -1;
		unlink(r->patch_tmp);
		r->patch_tmp[0] = '\0';
		runner_reply(r, id, ok, ok ? "" : error, 0, NULL, NULL, 0);
		return;
	}
	if ((buf = malloc(size)) == NULL)
		fatal("malloc");
	while (off < size && (n = pread(r->patch_fd, buf + off, size - off, (off_t)off)) > 0)
		off += (size_t)n;
	close(r->patch_fd);
	r->patch_fd = -1;
	crypto_hash_sha256_init(&st);
	crypto_hash_sha256_update(&st, buf, off);
	crypto_hash_sha256_final(&st, sha);
	hexof(sha, hex);
	if (off != size || store_commit(r->patch_tmp, hex) == -1) {
		snprintf(why, sizeof(why), "the patch cannot be stored: %s", strerror(errno));
		unlink(r->patch_tmp);
		r->patch_tmp[0] = '\0';
		free(buf);
		runner_reply(r, id, 0, why, 0, NULL, NULL, 0);
		return;
	}
	r->patch_tmp[0] = '\0';
	runner_reply(r, id, 1, "", size, sha, size <= IPC_INLINE_MAX ? buf : NULL,
	    size <= IPC_INLINE_MAX ? size : 0);
	free(buf);
}

/* PATCH_MAKE: the workspace against the base commit, from the mirror (the
 * trusted object store), by a git helper. */
static void
patch_make(struct srun *r, struct ipc_msg *m)
{
	struct gitrun_req gr;
	char why[512];
	uint64_t cap;

	if (ipc_dec_patch_make(m->body, &cap) == -1)
		return;
	if (r->patch_id != 0 || r->pr_id != 0 || r->gitrun != NULL) {
		runner_reply(r, m->id, 0, "a patch is being made already", 0, NULL, NULL, 0);
		return;
	}
	if (r->base[0] == '\0' || r->mirror[0] == '\0') {
		runner_reply(r, m->id, 0, "the run has no repository to make a patch against", 0,
		    NULL, NULL, 0);
		return;
	}
	if ((r->patch_fd = store_tmp(r->patch_tmp, sizeof(r->patch_tmp))) == -1) {
		r->patch_tmp[0] = '\0';
		runner_reply(r, m->id, 0, "the artifact store cannot be written", 0, NULL, NULL, 0);
		return;
	}
	memset(&gr, 0, sizeof(gr));
	gr.kind = GITRUN_DIFF;
	gr.workspace = r->ws;
	gr.stats = sup.devmode ? NULL : r->stats;
	gr.mirror = r->mirror;
	gr.base = r->base;
	gr.cap = cap;
	gr.outfd = r->patch_fd;
	r->patch_id = m->id;
	if ((r->gitrun = gitrun_start(&gr, patch_done, r, why, sizeof(why))) == NULL) {
		r->patch_id = 0;
		close(r->patch_fd);
		r->patch_fd = -1;
		unlink(r->patch_tmp);
		r->patch_tmp[0] = '\0';
		runner_reply(r, m->id, 0, why, 0, NULL, NULL, 0);
	}
}

/* ---- pull requests ------------------------------------------------------- */

static void redact_span(struct srun *r, char *p, size_t len);

/* The answer to PR_PUSH or PR_OPEN. */
static void
pr_reply(struct srun *r, uint64_t id, const struct ipc_pr_result *res, const char *error)
{
	struct ipc_wbuf w;

	ipc_wbuf_begin(&w, IMSG_PR_RESULT, id, 7);
	ipc_put_bool(&w, res->ok);
	ipc_put_str(&w, res->ok ? "" : error);
	ipc_put_str(&w, res->ok ? res->commit : "");
	ipc_put_u64(&w, res->ok ? res->flags : 0);
	ipc_put_u64(&w, res->ok ? res->number : 0);
	ipc_put_str(&w, res->ok ? res->url : "");
	ipc_put_str(&w, res->note);
	if (proc_send(&r->p, &w, -1) == -1)
		log_warnx("run %s: cannot answer the runner", r->p.run);
}

static void
pr_fail(struct srun *r, uint64_t id, const char *error)
{
	struct ipc_pr_result res;

	memset(&res, 0, sizeof(res));
	pr_reply(r, id, &res, error);
}

static void
pr_done(void *arg, const struct ipc_pr_result *res, const char *error)
{
	struct srun *r = arg;
	uint64_t id = r->pr_id;

	r->gitrun = NULL;
	r->pr_id = 0;
	if (r->ended || r->p.chan == NULL) {
		srun_maybe_free(r);
		return;
	}
	if (!res->ok)
		log_info("run %s: pull request: %s", r->p.run, error);
	pr_reply(r, id, res, error);
}

/* Whether a git operation may start for the runner's message id; else it
 * hears why. */
static int
pr_may_start(struct srun *r, uint64_t id)
{
	if (r->pr_id != 0 || r->patch_id != 0 || r->gitrun != NULL) {
		pr_fail(r, id, "a git operation of the run is under way already");
		return 0;
	}
	if (r->base[0] == '\0' || r->mirror[0] == '\0') {
		pr_fail(r, id, "the run has no repository to push to");
		return 0;
	}
	return 1;
}

/* PR_PUSH: the workspace's change as a commit on the base commit, pushed
 * to the branch by a git helper with the connection's token. */
static void
pr_push(struct srun *r, struct ipc_msg *m)
{
	struct ipc_pr_push req;
	struct gitrun_req gr;
	char why[512], *msg;

	if (ipc_dec_pr_push(m->body, &req) == -1 || !pr_may_start(r, m->id))
		return;
	msg = memdup0(req.message, req.messagelen);
	redact_span(r, msg, req.messagelen);
	memset(&gr, 0, sizeof(gr));
	gr.kind = GITRUN_PUSH;
	gr.url = r->url;
	gr.token = r->secret;
	gr.toklen = r->secretlen;
	gr.username = forge_token_user(r->forge);
	gr.mirror = r->mirror;
	gr.workspace = r->ws;
	gr.stats = sup.devmode ? NULL : r->stats;
	gr.base = r->base;
	gr.cap = sup.conf.sandbox.artifact_max;
	if (sup.conf.git.author_name[0] != '\0') {
		gr.author_name = sup.conf.git.author_name;
		gr.author_email = sup.conf.git.author_email;
	} else {
		gr.author_name = sup.git_author_name;
		gr.author_email = sup.git_author_email;
	}
	gr.when = req.when;
	gr.message = msg;
	gr.branch = req.branch;
	gr.lease = req.lease;
	r->pr_id = m->id;
	if ((r->gitrun = gitrun_start_pr(&gr, pr_done, r, why, sizeof(why))) == NULL) {
		r->pr_id = 0;
		pr_fail(r, m->id, why);
	}
	free(msg);
}

/* PR_OPEN: the pull request of the pushed branch, opened or updated by a
 * git helper on the connection's forge; for a connection without one,
 * an answer with no pull request. */
static void
pr_open(struct srun *r, struct ipc_msg *m)
{
	struct ipc_pr_open req;
	struct ipc_pr_result none;
	struct gitrun_req gr;
	char why[512], *title, *body;

	if (ipc_dec_pr_open(m->body, &req) == -1 || !pr_may_start(r, m->id))
		return;
	if (r->forge == FORGE_NONE) {
		memset(&none, 0, sizeof(none));
		none.ok = 1;
		snprintf(none.note, sizeof(none.note),
		         "the repository connection has no forge: the branch is pushed, no pull "
		         "request is opened");
		pr_reply(r, m->id, &none, "");
		return;
	}
	title = memdup0(req.title, req.titlelen);
	body = memdup0(req.body, req.bodylen);
	redact_span(r, title, req.titlelen);
	redact_span(r, body, req.bodylen);
	memset(&gr, 0, sizeof(gr));
	gr.kind = GITRUN_PR;
	gr.forge = r->forge == FORGE_GITHUB ? IPC_FORGE_GITHUB : IPC_FORGE_GITLAB;
	gr.api_url = r->api_url[0] != '\0' ? r->api_url : forge_default_api(r->forge);
	gr.url = r->url;
	gr.token = r->secret;
	gr.toklen = r->secretlen;
	gr.branch = req.head;
	gr.pr_base = req.base;
	gr.title = title;
	gr.body = body;
	gr.draft = req.draft;
	gr.number = req.number;
	r->pr_id = m->id;
	if ((r->gitrun = gitrun_start_pr(&gr, pr_done, r, why, sizeof(why))) == NULL) {
		r->pr_id = 0;
		pr_fail(r, m->id, why);
	}
	free(title);
	free(body);
}

/* ---- redaction ----------------------------------------------------------- */

/*
 * Every secret value the run could know is replaced, byte for byte, by '*'
 * in what its runner writes to the database (events, errors, its agent
 * conversations), before the operation is checked or run: the repository
 * token and every model provider's key.  The runner
 * never holds it; this covers a token that reached a command's output some
 * other way (a repository that contains it).  The frame's own bytes are
 * overwritten in place, so lengths (and the msgpack) stay valid.
 */
static void
redact_span(struct srun *r, char *p, size_t len)
{
	provider_redact(p, len);
	mem_redact(p, len, r->secret, r->secretlen);
	secret_set_redact(&r->mcp, p, len);
}

static void
redact(struct srun *r, struct ipc_msg *m)
{
	struct ipc_db_op op;
	const msgpack_object *o;
	char *p;
	size_t len;

	if (ipc_dec_db_op(m->body, &op) == -1)
		return;
	while (ipc_get_any(&op.args, &o) == 0) {
		if (o->type == MSGPACK_OBJECT_STR) {
			p = (char *)o->via.str.ptr;
			len = o->via.str.size;
		} else if (o->type == MSGPACK_OBJECT_BIN) {
			p = (char *)o->via.bin.ptr;
			len = o->via.bin.size;
		} else
			continue;
		redact_span(r, p, len);
	}
}

/* ---- the runner ---------------------------------------------------------- */

/* The runner's model channel and what agent steps use (RUNNER_PROXY),
 * right after RUNNER_START, and again whenever a new proxy is ready. */
static void
runner_send_proxy(struct srun *r)
{
	const struct conf_agent *a = &sup.conf.agent;
	struct ipc_wbuf w;
	int fd;

	if (provider_channel(r->p.run, &fd) == -1) {
		proc_kill(&r->p);
		return;
	}
	ipc_wbuf_begin(&w, IMSG_RUNNER_PROXY, 0, 6);
	ipc_put_str(&w, a->provider);
	ipc_put_str(&w, a->model);
	ipc_put_u64(&w, a->max_tokens);
	ipc_put_u64(&w, a->tool_output_max);
	ipc_put_u64(&w, a->mcp_tools_max);
	ipc_put_u64(&w, a->mcp_tool_bytes_max);
	if (proc_send(&r->p, &w, fd) == -1)
		proc_kill(&r->p);
	close(fd);
	r->proxied = 1;
}

/* A new proxy is ready (the old one died, or was not there when these
 * runners started): every live runner gets a channel to it, and makes
 * again the call the old one had not answered. */
void
runs_proxy_ready(void)
{
	struct srun *r;

	LIST_FOREACH(r, &sruns, entry)
		if (r->proxied && r->p.chan != NULL && r->p.pid > 0)
			runner_send_proxy(r);
}

/* The runner is ready and its sandbox is there: its run, its end of the
 * sandbox's channel, its model channel. */
static void
runner_hand(struct srun *r)
{
	struct ipc_wbuf w;

	if (r->handed || r->recording || !r->p.ready || r->sbx == NULL || r->sbx_fd < 0)
		return;
	r->handed = 1;
	ipc_wbuf_begin(&w, IMSG_RUNNER_START, 0, 5);
	ipc_put_str(&w, r->p.run);
	ipc_put_str(&w, r->p.owner);
	ipc_put_str(&w, r->previous);
	ipc_put_u64(&w, sup.conf.sandbox.exec_timeout * 1000);
	ipc_put_u64(&w, sup.conf.engine.step_budget);
	if (proc_send(&r->p, &w, r->sbx_fd) == -1)
		proc_kill(&r->p);
	close(r->sbx_fd);
	r->sbx_fd = -1;
	runner_send_proxy(r);
}

static void
runner_on_msg(struct ipc_chan *ch, struct ipc_msg *m, void *arg)
{
	struct srun *r = arg;
	struct ipc_ready rd;
	uint32_t outcome;

	if (!r->p.ready && m->type != IMSG_READY) {
		log_warnx("run %s: runner sent a message before ready", r->p.run);
		proc_kill(&r->p);
		return;
	}
	switch (m->type) {
	case IMSG_READY:
		if (r->p.ready || ipc_dec_ready(m->body, &rd) == -1 ||
		    rd.proto != IPC_PROTO_VERSION || rd.pid != (uint32_t)r->p.pid) {
			proc_kill(&r->p);
			return;
		}
		r->p.ready = 1;
		runner_hand(r); /* or once its sandbox is there */
		return;
	case IMSG_DB_OP:
		redact(r, m);
		sup_db_op(&r->p, m);
		return;
	case IMSG_ARTIFACT_PUT:
		artifact_put(r, m);
		return;
	case IMSG_PATCH_MAKE:
		patch_make(r, m);
		return;
	case IMSG_PR_PUSH:
		pr_push(r, m);
		return;
	case IMSG_PR_OPEN:
		pr_open(r, m);
		return;
	case IMSG_MCP_START:
		mcp_runs_start(&r->p, r->p.run, r->ws, r->readonly,
		               r->mirror[0] != '\0' ? r->mirror : NULL, m);
		return;
	case IMSG_MCP_STOP:
		mcp_runs_stop(r->p.run, m);
		return;
	case IMSG_RUNNER_DONE:
		if (ipc_dec_runner_done(m->body, &outcome) == 0 && !r->said) {
			r->said = 1;
			r->outcome = outcome;
		}
		return;
	default:
		log_warnx("run %s: runner sent %s", r->p.run, ipc_msg_name(m->type));
		proc_kill(&r->p);
	}
}

static void
runner_on_err(struct ipc_chan *ch, const char *reason, void *arg)
{
	struct srun *r = arg;

	if (strcmp(reason, "closed") != 0) {
		log_warnx("run %s: runner channel: %s", r->p.run, reason);
		metrics_ipc_error(ROLE_RUNNER);
	}
	ipc_chan_free(r->p.chan);
	r->p.chan = NULL;
	proc_kill(&r->p);
}

/* ms since the run's set-up began. */
static unsigned
srun_ms(const struct srun *r)
{
	return (unsigned)(mono_ms() - r->t0);
}

/* The workspace's list sealed (common/wsstat.h): from now on a sandbox
 * may change the workspace.  Without the seal the list still holds, with
 * more of its entries racy. */
static void
seal_list(struct srun *r)
{
	int fd;

	r->listing = 0;
	if ((fd = open(r->stats, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC)) == -1 ||
	    wsstat_seal(fd) == -1)
		log_warn("run %s: sealing %s", r->p.run, r->stats);
	if (fd != -1)
		close(fd);
}

/*
 * The run's runner process, started as its checkout begins so that its
 * exec, dynamic linking and lockdown (~12 ms) overlap the checkout: it
 * waits, holding nothing, for RUNNER_START (runner_hand), sent once its
 * sandbox is built.  Its channel is the run's from the start.  0, or -1
 * when it could not be started.
 */
static int
runner_spawn(struct srun *r)
{
	if (r->p.pid > 0 || r->p.chan != NULL)
		return 0;
	return proc_spawn(&r->p, runner_on_msg, runner_on_err, r);
}

static void
runner_start(struct srun *r)
{
	struct sbx_req req;
	char err[512];

	if (sup.stopping) {
		srun_end(r, IPC_RUN_STOPPED);
		return;
	}
	/* not before what it must redact is known, nor its networks */
	if (r->mcp_state != 2 || r->net_state != 2) {
		r->start_waiting = 1;
		return;
	}
	if (r->listing == 2)
		seal_list(r);
	if (r->t_checkout != 0) {
		r->t_ready = srun_ms(r);
		log_debug("run %s: ready for its sandbox in %u ms (set-up read %u, mirror fetched %u, "
		          "disk made %u, checked out %u, given %u)",
		          r->p.run, r->t_ready, r->t_setup, r->t_fetch, r->t_disk, r->t_checkout,
		          r->t_chown);
	}
	memset(&req, 0, sizeof(req));
	req.workspace = r->ws;
	req.readonly = r->readonly;
	req.trusted = 1;
	req.mirror = r->mirror[0] != '\0' ? r->mirror : NULL;
	req.done = sbx_done;
	req.arg = r;
	req.network = egress_runs_wanted(r->p.run);
	if ((r->sbx = sbx_create(&req, &r->sbx_fd, err, sizeof(err))) == NULL) {
		log_warnx("run %s: no sandbox: %s", r->p.run, err);
		srun_end(r, IPC_RUN_CRASHED); /* taken up again once resources allow */
		return;
	}
	if (req.network)
		egress_runs_listener(r->p.run, sbx_take_listener(r->sbx));
	if (runner_spawn(r) == -1) {
		srun_end(r, IPC_RUN_CRASHED);
		return;
	}
	runner_hand(r); /* or at its READY */
	log_info("run %s: runner started (pid %ld, sandbox %s)", r->p.run, (long)r->p.pid,
	    sbx_id(r->sbx));
}

int
runs_reaped(pid_t pid, int status)
{
	struct srun *r;

	LIST_FOREACH(r, &sruns, entry) {
		if (r->p.pid != pid)
			continue;
		r->p.pid = 0;
		/* what it wrote before it exited is read first: the read event
		 * takes one buffer a wakeup, so when more was waiting (the loop
		 * was busy) the SIGCHLD of the same wakeup came before its
		 * RUNNER_DONE, sent 2 ms before its exit, and a run that finished
		 * was taken for a crash, its directory kept */
		ipc_chan_drain(r->p.chan);
		if (r->p.chan != NULL) {
			ipc_chan_free(r->p.chan);
			r->p.chan = NULL;
		}
		if (!r->said && !r->ended) {
			if (WIFSIGNALED(status))
				log_warnx("run %s: runner killed by signal %d", r->p.run,
				    WTERMSIG(status));
			else
				log_warnx("run %s: runner exited with status %d", r->p.run,
				    WEXITSTATUS(status));
		}
		if (r->sbx != NULL)
			sbx_kill(r->sbx);
		mcp_runs_end(r->p.run); /* a new runner's servers are fresh ones */
		/* either frees r (srun_end ends with srun_maybe_free): r is not
		 * touched after */
		if (r->ended)
			srun_maybe_free(r);
		else
			srun_end(r, r->said ? r->outcome : IPC_RUN_CRASHED);
		return 1;
	}
	return 0;
}

/* ---- setup --------------------------------------------------------------- */

static void
checked_out_done(struct srun *r, int code, const char *err, PGresult *res)
{
	if (code != DB_OK || PQntuples(res) != 1 || strcmp(PQgetvalue(res, 0, 0), "t") != 0) {
		log_warnx("run %s: cannot record the base commit: %s", r->p.run,
		    code != DB_OK ? err : "the lease is gone");
		srun_end(r, IPC_RUN_CRASHED);
		return;
	}
	r->recording = 0;
	runner_hand(r);
}

/*
 * The workspace is checked out and given: its base commit is recorded
 * (workspace.ready) while its sandbox is built, and the runner gets its run
 * once both are done (runner_hand), so that no event of the runner's comes
 * before workspace.ready.
 */
static void
ws_ready(struct srun *r)
{
	r->recording = 1;
	r->setup_ops++; /* r stays while both are under way */
	sop_submit(r, "sup_run_checked_out", checked_out_done, 4, r->p.run, r->p.owner, r->base,
	           r->ref_out);
	if (!r->ended)
		runner_start(r);
	r->setup_ops--;
	srun_maybe_free(r);
}

/* The chowner has given the workspace to the sandbox user (or could not). */
static void
given_done(void *arg, int status, char *out)
{
	struct srun *r = arg;
	char why[IPC_ERRMSG_MAX + 64], *nl;

	r->giving = 0;
	if (r->ended) {
		srun_maybe_free(r);
		return;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		if ((nl = strchr(out, '\n')) != NULL)
			*nl = '\0';
		if (out[0] != '\0')
			log_warnx("run %s: chowner: %s", r->p.run, out);
		snprintf(why, sizeof(why), "the workspace cannot be given to the sandbox: %s",
		         out[0] != '\0' ? out : "the chowner failed");
		srun_fail(r, why);
		return;
	}
	log_debug("run %s: workspace given to the sandbox user (%s entries)", r->p.run,
	          strtok(out, "\n") != NULL ? out : "?");
	if (r->listing == 1)
		r->listing = 2;
	r->t_chown = srun_ms(r);
	ws_ready(r);
}

/* The workspace to the sandbox user (after a checkout by the service user),
 * by a chowner off the loop: a tree of many files takes a while.  0 (under
 * way, or nothing to do in development mode: *now set), or -1. */
static int
give_to_sandbox(struct srun *r, int *now, char *err, size_t errsz)
{
	char uid[16], gid[16];
	const char *args[] = {uid, gid, r->base, NULL};
	int fd, list;

	*now = sup.devmode;
	if (sup.devmode)
		return 0;
	if ((fd = open(r->ws, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) == -1) {
		snprintf(err, errsz, "the workspace cannot be given to the sandbox: %s",
		         strerror(errno));
		return -1;
	}
	/* The list of what is given, which lets the patch and the push hash
	 * only what changed since (githelper/stat.h).  Without it (it cannot
	 * be made) they hash every file, as before: slower, not wrong. */
	(void)unlink(r->stats);
	if ((list = open(r->stats, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) !=
	        -1 &&
	    fchown(list, sup.uid, sup.gid) == -1) {
		close(list);
		list = -1;
	}
	if (list == -1) {
		log_warn("run %s: %s (every file will be hashed)", r->p.run, r->stats);
		args[2] = NULL;
	}
	r->listing = list != -1;
	snprintf(uid, sizeof(uid), "%lu", (unsigned long)sup.conf.sandbox.uid);
	snprintf(gid, sizeof(gid), "%lu", (unsigned long)sup.conf.sandbox.gid);
	if (transient_start("chown", args, fd, list, sup.uid, sup.gid,
	                    1, given_done, r) == -1) {
		snprintf(err, errsz, "the workspace cannot be given to the sandbox: no chowner");
		return -1;
	}
	r->giving = 1;
	return 0;
}

static void
checkout_done(void *arg, int ok, const char *error, const char *base, uint64_t size,
              const char *ref)
{
	struct srun *r = arg;
	char why[IPC_ERRMSG_MAX + 64];
	int now;

	r->gitrun = NULL;
	if (r->ended) {
		srun_maybe_free(r);
		return;
	}
	if (!ok || base[0] == '\0' || ref[0] == '\0') {
		snprintf(why, sizeof(why), "checkout failed: %s",
		    ok ? "the git helper named no commit" : error);
		srun_fail(r, why);
		return;
	}
	r->t_checkout = srun_ms(r);
	log_info("run %s: checked out %s (%s)", r->p.run, base, ref);
	snprintf(r->base, sizeof(r->base), "%s", base);
	snprintf(r->ref_out, sizeof(r->ref_out), "%s", ref);
	if (give_to_sandbox(r, &now, why, sizeof(why)) == -1) {
		srun_fail(r, why);
		return;
	}
	if (now)
		ws_ready(r);
}

/* The mirror is up to date (or could not be brought so): the workspace is
 * written from it by a second helper, which holds no token. */
/* Once the mirror is up to date and the empty workspace is there (the two
 * are made side by side), the workspace is written from the mirror by a
 * second helper, which holds no token. */
static void
ws_checkout(struct srun *r)
{
	struct gitrun_req gr;
	char why[512];

	if (!r->fetched || !r->ws_made || r->gitrun != NULL)
		return;
	memset(&gr, 0, sizeof(gr));
	gr.kind = GITRUN_CHECKOUT;
	gr.url = r->url;
	gr.mirror = r->mirror;
	gr.ref = r->ref;
	gr.workspace = r->ws;
	if ((r->gitrun = gitrun_start(&gr, checkout_done, r, why, sizeof(why))) == NULL)
		srun_fail(r, why);
}

/* The mirror is up to date (or could not be brought so). */
static void
fetched_done(void *arg, int ok, const char *error)
{
	struct srun *r = arg;
	char why[IPC_ERRMSG_MAX + 64];

	r->mwait = NULL;
	if (r->ended) {
		srun_maybe_free(r);
		return;
	}
	if (!ok) {
		snprintf(why, sizeof(why), "checkout failed: %s", error);
		srun_fail(r, why);
		return;
	}
	r->fetched = 1;
	r->t_fetch = srun_ms(r);
	if (!r->failing)
		ws_checkout(r);
}

/* dir, made when missing, owned by uid:gid with mode. */
static int
mkdir_owned(const char *dir, mode_t mode, uid_t uid, gid_t gid)
{
	if (mkdir(dir, mode) == -1 && errno != EEXIST)
		return -1;
	if (!sup.devmode && chown(dir, uid, gid) == -1)
		return -1;
	return chmod(dir, mode);
}

static int
run_paths(struct srun *r)
{
	char runs[PATH_MAX];

	if (fmt_ok(runs, sizeof(runs), "%s/runs", sup.conf.state_dir) == -1 ||
	    fmt_ok(r->dir, sizeof(r->dir), "%s/%s", runs, r->p.run) == -1 ||
	    fmt_ok(r->ws, sizeof(r->ws), "%s/ws", r->dir) == -1 ||
	    fmt_ok(r->stats, sizeof(r->stats), "%s/ws.stat", r->dir) == -1 ||
	    fmt_ok(r->img, sizeof(r->img), "%s/disk.img", r->dir) == -1 ||
	    fmt_ok(r->mnt, sizeof(r->mnt), "%s/disk", r->dir) == -1)
		return -1;
	if (mkdir_owned(runs, 0711, 0, 0) == -1 || mkdir_owned(r->dir, 0711, 0, 0) == -1)
		return -1;
	return 0;
}

/* mcp_creds_secrets' callback: a copy of one value to redact. */
static void
mcp_add_copy(const char *p, size_t n, void *arg)
{
	struct srun *r = arg;

	secret_set_copy(&r->mcp, p, n);
}

static void
mcp_done(struct srun *r, int code, const char *err, PGresult *res)
{
	unsigned char *cred;
	size_t len;
	int i;

	if (code != DB_OK) {
		log_warnx("run %s: its MCP credentials: %s", r->p.run, err);
		srun_end(r, IPC_RUN_CRASHED);
		return;
	}
	for (i = 0; i < PQntuples(res); i++) {
		if (sealed_open(res, i, 0, SECRET_CTX_MCP, &cred, &len) == -1) {
			srun_fail(r, "an MCP server's credentials do not open with this master key");
			return;
		}
		/* each value of the credentials' object, and the whole text: all
		 * there is of those stored before they were an object */
		if (cred != NULL && len > 0)
			mcp_creds_secrets((const char *)cred, len, mcp_add_copy, r);
		if (cred != NULL)
			sodium_free(cred);
	}
	r->mcp_state = 2;
	if (r->start_waiting) {
		r->start_waiting = 0;
		runner_start(r);
	}
}

/* Its networks (egress_runs.c): a preset the configuration lacks fails it. */
static void
network_done(struct srun *r, int code, const char *err, PGresult *res)
{
	char why[256];
	int want;

	if (code != DB_OK) {
		log_warnx("run %s: its networks: %s", r->p.run, err);
		srun_end(r, IPC_RUN_CRASHED);
		return;
	}
	if (egress_runs_load(r->p.run, res, &want, why, sizeof(why)) == -1) {
		srun_fail(r, why);
		return;
	}
	r->net_state = 2;
	if (r->start_waiting) {
		r->start_waiting = 0;
		runner_start(r);
	}
}

/*
 * An old workspace in the way of a checkout is renamed aside in the run's
 * directory (ws.old-XXXXXXXXXXXXXXXX) and removed in the background, so
 * that the checkout need not wait for it.  0, or -1 with errno set.
 */
#define WS_OLD "ws.old-"
static int
ws_set_aside(struct srun *r)
{
	char old[PATH_MAX];
	unsigned char rnd[8];
	struct stat st;
	int tries;

	if (lstat(r->ws, &st) == -1)
		return errno == ENOENT ? 0 : -1; /* no old workspace */
	/* beside it, on its filesystem (a run's own disk is a fresh one: its
	 * workspace is never set aside) */
	for (tries = 0; tries < 8; tries++) {
		randombytes_buf(rnd, sizeof(rnd));
		if (fmt_ok(old, sizeof(old), "%s/" WS_OLD "%02x%02x%02x%02x%02x%02x%02x%02x",
		    r->dir, rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]) == -1) {
			errno = ENAMETOOLONG;
			return -1;
		}
		if (renameat2(AT_FDCWD, r->ws, AT_FDCWD, old, RENAME_NOREPLACE) == 0) {
			remove_tree(old);
			return 0;
		}
		if (errno == ENOENT)
			return 0; /* no old workspace */
		if (errno != EEXIST)
			return -1;
	}
	return -1;
}

/* Old workspaces an earlier start set aside and could not finish removing
 * (the run's directory is the supervisor's and holds a few entries). */
static void
ws_old_sweep(struct srun *r)
{
	char old[PATH_MAX];
	struct dirent *de;
	DIR *d;

	if ((d = opendir(r->dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL)
		if (strncmp(de->d_name, WS_OLD, strlen(WS_OLD)) == 0 &&
		    fmt_ok(old, sizeof(old), "%s/%s", r->dir, de->d_name) == 0)
			remove_tree(old);
	closedir(d);
}

/* The mirror fetched for the run (or its fetch in flight joined):
 * fetched_done. */
static void
ws_fetch(struct srun *r)
{
	char why[512];

	r->mwait = mirror_fetch(r->repo_id, r->url, r->secret, r->secretlen, fetched_done, r, why,
	    sizeof(why));
	if (r->mwait == NULL)
		srun_fail(r, why);
}

/*
 * The workspace's place is ready: an empty workspace for a template without
 * a repository, else an empty one for the checkout, which starts once the
 * mirror is fetched too (ws_checkout).
 */
static void
ws_fill(struct srun *r)
{
	char why[512];

	if (r->mirror[0] == '\0') {
		if (mkdir_owned(r->ws, 0755, (uid_t)sup.conf.sandbox.uid,
		    (gid_t)sup.conf.sandbox.gid) == -1) {
			snprintf(why, sizeof(why), "the workspace: %s", strerror(errno));
			srun_fail(r, why);
			return;
		}
		runner_start(r);
		return;
	}
	/* what an earlier setup cut short left goes aside */
	if (ws_set_aside(r) == -1 || mkdir_owned(r->ws, 0755, sup.uid, sup.gid) == -1) {
		snprintf(why, sizeof(why), "the workspace: %s", strerror(errno));
		srun_fail(r, why);
		return;
	}
	r->ws_made = 1;
	if (!r->failing)
		ws_checkout(r);
}

/* The run's disk is made and mounted (or could not be). */
static void
disk_done(void *arg, int ok, const char *error)
{
	struct srun *r = arg;

	r->djob = NULL;
	if (r->ended) {
		disk_release(r->mnt, r->img);
		srun_maybe_free(r);
		return;
	}
	if (!ok) {
		srun_fail(r, error);
		return;
	}
	r->t_disk = srun_ms(r);
	ws_fill(r);
}

/* A run checked out before: its workspace, on its disk (mounted again
 * after a restart) when it has one.  0, or -1 with why set. */
static int
ws_resume(struct srun *r, char *why, size_t whysz)
{
	struct stat st;

	if (lstat(r->img, &st) == 0) {
		if (disk_mount(r->img, r->mnt, why, whysz) == -1)
			return -1;
		if (fmt_ok(r->ws, sizeof(r->ws), "%s/ws", r->mnt) == -1) {
			snprintf(why, whysz, "the run's directory's path is too long");
			return -1;
		}
	}
	if (lstat(r->ws, &st) == -1 || !S_ISDIR(st.st_mode)) {
		snprintf(why, whysz, "the run's workspace is gone");
		return -1;
	}
	return 0;
}

/* A workspace from scratch: on a disk of its own where the host can give
 * one (the workspace is then that disk's directory ws), else a directory. */
static void
ws_begin(struct srun *r)
{
	char why[512];
	struct stat st;

	if (!disk_enabled()) {
		if (r->mirror[0] != '\0')
			ws_fetch(r);
		if (!r->failing)
			ws_fill(r);
		return;
	}
	if (r->mirror[0] == '\0' && lstat(r->img, &st) == 0) {
		/* a run without a repository taken up again: its workspace as
		 * it was */
		if (ws_resume(r, why, sizeof(why)) == -1)
			srun_fail(r, why);
		else
			runner_start(r);
		return;
	}
	disk_release(r->mnt, r->img); /* one an earlier checkout cut short */
	if (fmt_ok(r->ws, sizeof(r->ws), "%s/ws", r->mnt) == -1) {
		srun_fail(r, "the run's directory's path is too long");
		return;
	}
	/* the disk is made while the mirror is fetched */
	if ((r->djob = disk_make(r->img, r->mnt, 0, 0, disk_done, r, why, sizeof(why))) == NULL) {
		srun_fail(r, why);
		return;
	}
	if (r->mirror[0] != '\0')
		ws_fetch(r);
}

/* Columns of sup_run_setup. */
enum { SETUP_STATUS, SETUP_URL, SETUP_TOKEN, SETUP_NONCE, SETUP_ACCESS, SETUP_BASE,
       SETUP_MISSING, SETUP_REPO_ID, SETUP_REF, SETUP_FORGE, SETUP_API_URL };

/* The run's repository: its URL, the template's ref, the mirror's path. */
static int
setup_repo(struct srun *r, PGresult *res, char *why, size_t whysz)
{
	const char *ref = PQgetisnull(res, 0, SETUP_REF) ? "" : PQgetvalue(res, 0, SETUP_REF);
	int kind;

	if (PQgetisnull(res, 0, SETUP_URL))
		return 0;
	if (fmt_ok(r->url, sizeof(r->url), "%s", PQgetvalue(res, 0, SETUP_URL)) == -1 ||
	    fmt_ok(r->ref, sizeof(r->ref), "%s", ref) == -1 ||

	    fmt_ok(r->api_url, sizeof(r->api_url), "%s", PQgetvalue(res, 0, SETUP_API_URL)) == -1 ||
	    mirror_path(PQgetvalue(res, 0, SETUP_REPO_ID), r->mirror, sizeof(r->mirror)) == -1) {
		snprintf(why, whysz, "the run's repository cannot be named");
		return -1;
	}
	memcpy(r->repo_id, PQgetvalue(res, 0, SETUP_REPO_ID), IPC_UUID_LEN + 1);
	/* the table's CHECK: one of forge_parse's names */
	kind = forge_parse(PQgetvalue(res, 0, SETUP_FORGE));
	r->forge = kind == -1 ? FORGE_NONE : (enum forge_kind)kind;
	return 0;
}

static void
setup_done(struct srun *r, int code, const char *err, PGresult *res)
{
	unsigned char *tok = NULL;
	size_t toklen = 0;
	char why[512];

	r->t_setup = srun_ms(r);
	if (code != DB_OK) {
		log_warnx("run %s: setup: %s", r->p.run, err);
		srun_end(r, IPC_RUN_CRASHED);
		return;
	}
	if (PQntuples(res) != 1 || PQnfields(res) <= SETUP_API_URL ||
	    strcmp(PQgetvalue(res, 0, SETUP_STATUS), "running") != 0) {
		srun_end(r, IPC_RUN_FINISHED); /* ended meanwhile (a cancel) */
		return;
	}
	if (strcmp(PQgetvalue(res, 0, SETUP_MISSING), "t") == 0) {
		srun_fail(r, "the workspace's repository connection no longer exists");
		return;
	}
	r->readonly = strcmp(PQgetvalue(res, 0, SETUP_ACCESS), "readOnly") == 0;
	if (run_paths(r) == -1) {
		snprintf(why, sizeof(why), "the run's directory: %s", strerror(errno));
		srun_fail(r, why);
		return;
	}
	ws_old_sweep(r);
	if (setup_repo(r, res, why, sizeof(why)) == -1) {
		srun_fail(r, why);
		return;
	}
	if (repo_token_open(res, SETUP_TOKEN, &tok, &toklen) == -1) {
		srun_fail(r, "the repository token does not open with this master key");
		return;
	}
	r->secret = tok; /* kept for redaction while the run is here */
	r->secretlen = toklen;
	if (!PQgetisnull(res, 0, SETUP_BASE)) { /* checked out before: resume in it */
		snprintf(r->base, sizeof(r->base), "%s", PQgetvalue(res, 0, SETUP_BASE));
		if (ws_resume(r, why, sizeof(why)) == -1) {
			srun_fail(r, why);
			return;
		}
		runner_start(r);
		return;
	}
	ws_begin(r);
	if (!r->failing && !r->ended && runner_spawn(r) == -1)
		srun_end(r, IPC_RUN_CRASHED);
}

void
runs_start(struct proc *engine, struct ipc_msg *m)
{
	char run[IPC_UUID_LEN + 1], prev[IPC_STATUS_MAX + 1];
	struct ipc_wbuf w;
	struct srun *r;
	int dup = 0;

	if (ipc_dec_run_start(m->body, run, prev) == -1)
		return; /* the catalog checked it */
	if ((r = srun_find(run)) != NULL) {
		dup = 1;
		/* still running here under a lease that lapsed (the claim that
		 * just succeeded proves it): that runner must go first; the
		 * engine hands the run back and takes it up again later */
		log_warnx("run %s: claimed again while its old runner lives; stopping that one",
		    run);
		srun_end(r, IPC_RUN_STOPPED); /* may free r */
	}
	if (dup || sup.stopping) {
		ipc_wbuf_begin(&w, IMSG_RUN_ENDED, 0, 2);
		ipc_put_str(&w, run);
		ipc_put_u64(&w, IPC_RUN_STOPPED);
		proc_send(engine, &w, -1);
		return;
	}
	if ((r = calloc(1, sizeof(*r))) == NULL)
		fatal("calloc");
	r->p.role = ROLE_RUNNER;
	r->p.name = "runner";
	r->p.on_idle = srun_idle;
	r->sbx_fd = -1;
	r->patch_fd = -1;
	memcpy(r->p.run, run, sizeof(r->p.run));
	snprintf(r->p.owner, sizeof(r->p.owner), "%s", engine->instance);
	snprintf(r->p.instance, sizeof(r->p.instance), "runner-%.8s", run);
	memcpy(r->previous, prev, sizeof(r->previous));
	LIST_INSERT_HEAD(&sruns, r, entry);
	r->t0 = mono_ms();
	sop_submit(r, "sup_run_setup", setup_done, 1, r->p.run);
	r->mcp_state = 1;
	sop_submit(r, "sup_run_mcp_secrets", mcp_done, 1, r->p.run);
	r->net_state = 1;
	sop_submit(r, "sup_run_network", network_done, 1, r->p.run);
}

void
runs_stop(struct proc *engine, struct ipc_msg *m)
{
	char run[IPC_UUID_LEN + 1];
	struct ipc_wbuf w;
	uint32_t reason;
	struct srun *r;

	if (ipc_dec_run_stop(m->body, run, &reason) == -1 || (r = srun_find(run)) == NULL ||
	    strcmp(r->p.owner, engine->instance) != 0)
		return;
	if (reason == IPC_STOP_LEASE) {
		srun_end(r, IPC_RUN_STOPPED);
		return;
	}
	/* a cancel: the runner ends the run (one still in setup reads the
	 * cancel when it loads the run) */
	if (r->p.chan != NULL && r->p.ready && r->handed) {
		ipc_wbuf_begin(&w, IMSG_RUNNER_CANCEL, 0, 0);
		proc_send(&r->p, &w, -1);
	}
}

void
runs_engine_gone(const char *instance)
{
	struct srun *r, *next;

	for (r = LIST_FIRST(&sruns); r != NULL; r = next) {
		next = LIST_NEXT(r, entry);
		if (!r->ended && strcmp(r->p.owner, instance) == 0) {
			log_warnx("run %s: its engine is gone; stopping its runner", r->p.run);
			srun_end(r, IPC_RUN_STOPPED);
		}
	}
}

void
runs_stop_all(void)
{
	struct srun *r;
	struct ipc_wbuf w;

	LIST_FOREACH(r, &sruns, entry) {
		if (r->gitrun != NULL) {
			gitrun_abandon(r->gitrun);
			r->gitrun = NULL;
		}
		if (r->p.pid <= 0)
			continue;
		if (!r->p.ready) {
			kill(r->p.pid, SIGTERM);
			continue;
		}
		ipc_wbuf_begin(&w, IMSG_SHUTDOWN, 0, 0);
		if (proc_send(&r->p, &w, -1) == -1)
			kill(r->p.pid, SIGTERM);
	}
}

int
runs_all_exited(void)
{
	struct srun *r;

	LIST_FOREACH(r, &sruns, entry)
		if (r->p.pid > 0)
			return 0;
	return 1;
}

void
runs_kill_all(int sig)
{
	struct srun *r;

	LIST_FOREACH(r, &sruns, entry)
		if (r->p.pid > 0)
			kill(r->p.pid, sig);
}
