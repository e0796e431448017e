/*
 * The supervisor (parent, root): config, master key, database pool, named
 * operations, child processes and the control socket.
 */
#ifndef AGRIPPA_SUPERVISOR_H
#define AGRIPPA_SUPERVISOR_H

#include <sys/types.h>

#include <limits.h>
#include <stdint.h>
#include <time.h>

#include "ipc/ipc.h"
#include "ipc/ipc_msg.h"
#include "supervisor/config.h"
#include "supervisor/pgembed.h"

#define SUP_READY_TIMEOUT_SECS 15
#define SUP_DRAIN_TIMEOUT_SECS 10
#define SUP_BACKOFF_MAX_SECS 60
#define SUP_STABLE_SECS 60 /* a child up this long resets its backoff */

struct event;
struct event_base;

struct proc {
	enum ipc_role role;
	const char *name;
	pid_t pid;
	struct ipc_chan *chan;
	int ready;
	uint64_t gen;              /* bumps at every start; stale DB replies are dropped */
	time_t started;
	unsigned restarts;
	unsigned backoff;          /* seconds before the next start */
	struct event *restart_ev;
	struct event *ready_ev;
	char instance[IPC_INSTANCE_MAX + 1];
	/* runners (supervisor/runs.c): the run and lease owner their database
	 * operations are scoped to; operations in flight, and what to call
	 * when none is left */
	char run[IPC_UUID_LEN + 1];
	char owner[IPC_INSTANCE_MAX + 1];
	unsigned inflight;
	void (*on_idle)(struct proc *);
};

struct sup {
	struct config conf;
	char conf_path[PATH_MAX];
	char self_exe[PATH_MAX];
	char sandbox_exe[PATH_MAX]; /* agrippa-sandbox, beside self_exe */
	char git_exe[PATH_MAX];     /* agrippa-git, beside self_exe */
	char tree_exe[PATH_MAX];    /* agrippa-tree, beside self_exe */
	char mcpc_exe[PATH_MAX];    /* agrippa-mcpc (mcp test's MCP client), beside self_exe */
	char git_author_name[64];   /* the author of a run's commits: "Agrippa" */
	char git_author_email[320]; /* ... agrippa@HOSTNAME */
	int foreground;
	int verbose;
	int devmode;
	uid_t uid;                 /* service user */
	gid_t gid;
	struct event_base *base;
	unsigned char *master_key; /* sodium_malloc, read-only */
	int listen_fds[CONF_MAX_LISTEN];
	size_t nlisten_fds;
	int metrics_fd; /* metrics_listen's socket, -2 when there is none */
	int ctl_fd;
	int pidfile_fd;
	struct pgembed pg;
	int pg_embedded;
	struct event *pg_restart_ev;
	unsigned pg_backoff;
	unsigned pg_restarts;
	time_t started;
	int stopping;
	struct event *drain_ev;
	char host_id[IPC_HOST_ID_LEN + 1]; /* STATE/host-id: whose workspaces STATE holds */
};

extern struct sup sup;

/* sup.c */
__attribute__((noreturn)) void supervisor_main(const char *conf_path, int foreground,
    int verbose, int check_only);
int sup_reload(char *errbuf, size_t errsz);
void sup_stop(void);
void sup_set_verbose(int verbose);

/* provider.c */
/* Read every provider's key file (fatalx naming the file on any problem). */
void provider_init(void);
/* The keys of a new configuration: 0 (they replace the old ones), or -1
 * with the reason in err, nothing changed. */
int provider_reload(const struct config *nc, char *err, size_t errsz);
/* PROXY_CONF to the proxy, when it is ready. */
void provider_send_conf(void);
/* Replace every provider key in p[0..len) by '*', byte for byte. */
void provider_redact(char *p, size_t len);

/* secretset.c: values to redact, each in sodium_malloc memory (zeroed:
 * empty) */
struct secret_set {
	unsigned char **p;
	size_t *len;
	size_t n;
};
/* a copy of p's n bytes (none when n is 0) */
void secret_set_copy(struct secret_set *s, const void *p, size_t n);
/* every value of s in p[0..len) replaced by '*' (mem_redact) */
void secret_set_redact(const struct secret_set *s, char *p, size_t len);
/* every value wiped and freed; s is empty again */
void secret_set_free(struct secret_set *s);
/* A new runner's model channel: the proxy gets one end, tagged with run;
 * *runner_fd is the other (the caller's to pass and close).  0 or -1. */
int provider_channel(const char *run, int *runner_fd);

/* proc.c */
extern struct proc procs[];
extern const size_t nprocs;
void proc_start_all(void);
void proc_reaped(pid_t pid, int status);
void proc_stop_all(void);
int proc_all_exited(void);
void proc_kill_all(int sig);
void proc_broadcast_verbose(int verbose);
void proc_restart(struct proc *p);
/* SIGKILL to p while it has a pid: one already reaped has 0, and kill(0)
 * would be the daemon's own process group. */
void proc_kill(struct proc *p);
struct proc *proc_by_role(enum ipc_role role);
/* Finish w and send it (with fd, or -1) to p; w is freed either way.
 * Returns 0, or -1 when p has no channel or the frame is refused. */
int proc_send(struct proc *p, struct ipc_wbuf *w, int fd);
/* Fork and exec p's role with a new channel (on_msg/on_err/arg) and send
 * HELLO: sets pid, chan, gen, started.  Returns 0 or -1 (logged). */
int proc_spawn(struct proc *p, void (*on_msg)(struct ipc_chan *, struct ipc_msg *, void *),
    void (*on_err)(struct ipc_chan *, const char *, void *), void *arg);
void proc_hello(struct proc *p);
__attribute__((noreturn)) void proc_exec(struct proc *p, int fd);

/* runs.c: runs the engine claimed: setup (checkout), runner and sandbox */
void runs_engine_ready(struct proc *engine);
void runs_proxy_ready(void);
void runs_send_conf(void);
void runs_start(struct proc *engine, struct ipc_msg *m);
void runs_stop(struct proc *engine, struct ipc_msg *m);
void runs_engine_gone(const char *instance);
int runs_reaped(pid_t pid, int status);
void runs_stop_all(void);
int runs_all_exited(void);
void runs_kill_all(int sig);
/* NOTIFY run_queued / run_cancel (notify.c) */
void runs_wake(uint32_t kind, const char *run);

/* egress_runs.c: the runs egress serves (listeners, lists, reports) */
struct pg_result;
/* A run's networks (the rows of op sup_run_network): *want is 1 when it
 * gets a listener.  Returns 0, or -1 with err naming a missing preset. */
int egress_runs_load(const char *run, struct pg_result *res, int *want, char *err,
    size_t errsz);
int egress_runs_wanted(const char *run);
/* The listener the run's sandbox made (fd taken). */
void egress_runs_listener(const char *run, int fd);
/* The run's step starts: its list is put in force. */
void egress_runs_step(const char *run, const char *step);
void egress_runs_end(const char *run);
/* An MCP server's way out (DESIGN.md 4.2): its own list (allow and the
 * presets resolved) under id, a UUID of its own, given as a run's is
 * (egress_runs_listener, egress_runs_end); its events go to run (or, for
 * run "-", agrippactl mcp test's, only to the log) with mcp_server set.
 * 1 when the server gets a listener, 0 when it has no network (none
 * listed, or egress.enabled false), -1 with err naming a missing preset. */
struct egress_rule;
int egress_mcp_add(const char *id, const char *run, const char *server,
                   const struct egress_rule *allow, size_t nallow, const char *const *presets,
                   size_t npresets, char *err, size_t errsz);
void egress_ready(struct proc *p);
void egress_reconfigure(void);
struct sql_op;
struct db_params;
/* runner_step_end of p's run: its extra (params $8) gets the step's
 * network totals when the run has a way out, and loses any "network" the
 * runner put there.  Returns 1 when it took params and submits the op
 * itself once egress answered (or did not, in time), 0 when the caller
 * submits it now. */
int egress_runs_step_end(struct proc *p, uint64_t msgid, const struct sql_op *op,
    struct db_params *params);
/* EGRESS_TOTALS: egress's answer to EGRESS_STEP. */
void egress_totals_in(struct proc *p, struct ipc_msg *m);
void egress_event_in(struct proc *p, struct ipc_msg *m);
/* Runs served and their open tunnels (for status). */
size_t egress_runs_status(unsigned *tunnels);

/* dbop.c: answering DB_OP from children */
void sup_db_op(struct proc *p, struct ipc_msg *m);
/* Submits op, checked already, for p's incarnation gen (the reply goes only
 * to it); takes params. */
void sup_db_submit(struct proc *p, uint64_t gen, uint64_t msgid, const struct sql_op *op,
    struct db_params *params);
/* httpd_req.c: httpd's requests other than database operations */
void sup_artifact_open(struct proc *p, struct ipc_msg *m);
void sup_repo_seal(struct proc *p, struct ipc_msg *m);

/* control.c */
int control_listen(const char *path, char *errbuf, size_t errsz);
void control_start(struct event_base *base, int fd);
void control_cleanup(const char *path);

/*
 * ctl_admin.c: the control socket's administration commands (users, tokens,
 * projects, members, templates), answered from the database.
 * ctl_admin_run answers req later on ch (returns 0), or returns -1 for a
 * wrong number of arguments (the caller sends the usage).  ctl_admin_cancel
 * forgets every request of ch still waiting: call it before freeing ch.
 */
struct ipc_ctl_request;
int ctl_admin_run(struct ipc_chan *ch, uint64_t id, struct ipc_ctl_request *req);
void ctl_admin_cancel(const struct ipc_chan *ch);
/*
 * A sealed repository token in row 0 of res (libpq text-format bytea:
 * ciphertext in column col, nonce in col + 1) opened into a new
 * sodium_malloc buffer; *tok NULL and *len 0 when the ciphertext is NULL.
 * -1 when it does not open (another master key, a changed byte).
 */
struct pg_result;
int repo_token_open(struct pg_result *res, int col, unsigned char **tok, size_t *len);
/* The secret sealed under ctx in columns col (ciphertext) and col + 1
 * (nonce) of row: *tok (sodium_malloc, the caller's to sodium_free) and
 * *len, or NULL and 0 for a null column.  0, or -1 when it does not open. */
int sealed_open(struct pg_result *res, int row, int col, const char *ctx, unsigned char **tok,
    size_t *len);

/* keyrotate.c: the master key's rotation and the start's check of it */
/* Load the master key into sup.master_key (made when missing, unless an
 * interrupted rotation left MASTER_KEY.new or .old: then it may stay NULL
 * until keyrotate_recover).  Fatal on a bad key file. */
void keyrotate_load(void);
/* With the database migrated: its record of the key compared with the key
 * files; an interrupted rotation finished or rolled back; the first start
 * on a database records its key.  Fatal when no file is the recorded key. */
void keyrotate_recover(const char *conninfo);
/* agrippactl key rotate, synchronously: 0 with the operator's message in
 * msg, or -1 with the reason (nothing changed unless it says so). */
int keyrotate_run(char *msg, size_t sz);

/* metrics.c: the supervisor's numbers for GET /metrics (IMSG_METRICS) */
void metrics_sbx_started(void);
/* n egress decisions, allowed or denied */
void metrics_egress(int allowed, uint64_t n);
/* a child of role broke the IPC protocol */
void metrics_ipc_error(enum ipc_role role);
/* IMSG_METRICS_GET from httpd p: the reply */
void metrics_get(struct proc *p, struct ipc_msg *m);

/* listen.c */
int listen_bind_all(const struct config *conf, int *fds, size_t *nfds, char *errbuf,
    size_t errsz);
/*
 * Sockets for newc's listen list: those also in oldc are taken over from
 * oldfds (an address held now cannot be bound twice), the rest are bound.
 * On success the old sockets that are no longer listed are closed; on
 * failure only what was bound here is closed.  Returns 0 or -1.
 */
int listen_rebind(const struct config *oldc, int *oldfds, const struct config *newc, int *fds,
    size_t *nfds, char *errbuf, size_t errsz);
/* The metrics_listen socket: its descriptor, -2 when there is none, -1
 * (errbuf says why) when it cannot be bound. */
int listen_metrics_bind(const struct config *conf, char *errbuf, size_t errsz);

/* notify.c: the LISTEN connection (NOTIFY run_events -> IMSG_RUN_WAKE) */
void notify_init(struct event_base *base, const char *conninfo);
void notify_shutdown(void);

/* gitrun.c: the transient git helper, one operation each */
struct gitrun;
enum gitrun_kind { GITRUN_FETCH, GITRUN_CHECKOUT, GITRUN_DIFF, GITRUN_PUSH, GITRUN_PR };
struct gitrun_req {
	enum gitrun_kind kind;
	const char *url;            /* fetch: the repository; checkout: the origin */
	const unsigned char *token; /* fetch: toklen bytes, may be NULL */
	size_t toklen;
	const char *mirror;         /* the connection's mirror */
	const char *ref;            /* checkout: "" for the default branch */
	const char *workspace;      /* checkout, diff: an existing directory */
	const char *base;           /* diff: the base commit */
	uint64_t cap;               /* diff: the largest patch */
	int outfd;                  /* diff: where the patch goes */
	const char *stats;          /* diff, push: the chowner's list of the
	                             * workspace as checked out; NULL for none */
	/* push (with url, token, mirror, workspace, base, cap) */
	const char *username;       /* the token's user name on the forge */
	const char *author_name, *author_email;
	uint64_t when;              /* the commit's time */
	const char *message;        /* the commit message */
	const char *branch;         /* push: the branch; pr: the head */
	const char *lease;          /* "" or the commit pushed last */
	/* pr (with url, token, branch) */
	uint32_t forge;             /* IPC_FORGE_* */
	const char *api_url;
	const char *pr_base;        /* the branch the pull request goes to */
	const char *title, *body;   /* NUL-terminated */
	int draft;
	uint64_t number;            /* the pull request recorded earlier, 0 for none */
};
/* ok, with error (a line) when not; base (the commit id) and ref (its
 * name) after a checkout, size (the patch's bytes, the mirror's) after a
 * diff or a fetch */
typedef void (*gitrun_cb)(void *arg, int ok, const char *error, const char *base,
                          uint64_t size, const char *ref);
/* Start the helper for req; cb runs once, later.  Returns NULL with err set
 * when it could not start. */
struct gitrun *gitrun_start(const struct gitrun_req *req, gitrun_cb cb, void *arg, char *err,
                            size_t errsz);
/* A push or a pull request (GITRUN_PUSH, GITRUN_PR): res is the helper's
 * PR_RESULT, or a failure of its own (res->ok 0, the reason in error). */
typedef void (*gitrun_pr_cb)(void *arg, const struct ipc_pr_result *res, const char *error);
struct gitrun *gitrun_start_pr(const struct gitrun_req *req, gitrun_pr_cb cb, void *arg,
                               char *err, size_t errsz);
/* The asker is gone: kill the helper; cb is not called. */
void gitrun_abandon(struct gitrun *g);
/* SIGCHLD: 1 when pid was a git helper. */
int gitrun_reaped(pid_t pid, int status);
/* The daemon stops: the spare helpers go. */
void gitrun_spares_stop(void);

/* disk.c: a run's workspace on a filesystem of its own (sandbox.disk) */
struct disk_job;
typedef void (*disk_cb)(void *arg, int ok, const char *error);
/* Whether runs get their own disk here (root mode, loop devices and
 * mkfs.ext4 present; said once when not). */
int disk_enabled(void);
/* img (sparse, sandbox.disk bytes) made an ext4 filesystem whose root is
 * uid:gid's, in a child process, then mounted at mnt (made when missing);
 * cb runs once when that is done.  NULL with err set when it could not
 * start. */
struct disk_job *disk_make(const char *img, const char *mnt, uid_t uid, gid_t gid, disk_cb cb,
                           void *arg, char *err, size_t errsz);
/* The asker is gone: cb will not run (the image stays for the caller to
 * release). */
void disk_abandon(struct disk_job *j);
/* img mounted at mnt again (a resumed run), unless it is: 0, or -1. */
int disk_mount(const char *img, const char *mnt, char *err, size_t errsz);
/* The run's disk given back: unmounted (detached) and its image unlinked. */
void disk_release(const char *mnt, const char *img);
/* SIGCHLD: 1 when pid was a mkfs of ours. */
int disk_reaped(pid_t pid, int status);
/* A spare image made ahead for the next run (at start); the daemon stops:
 * it goes. */
void disk_spare_prepare(void);
void disk_spare_stop(void);

/* transient.c: "agrippa-tree role args..." for one tree (fd, closed here;
 * fd2, -1 or a file it writes to as its fd 4, closed here too), as
 * uid:gid, with CAP_CHOWN alone when chown_cap, else no capability; cb
 * hears once, with the waitpid status and what the tool printed (its
 * first TRANSIENT_OUT_MAX - 1 bytes, NUL-terminated), when it has exited.
 * The pid, or -1 (logged; cb is never called). */
#define TRANSIENT_OUT_MAX 8192
typedef void (*transient_cb)(void *arg, int status, char *out);
pid_t transient_start(const char *role, const char *const args[], int fd, int fd2, uid_t uid,
                      gid_t gid, int chown_cap, transient_cb cb, void *arg);
/* The same for another transient program: exe with argv[0] name and the
 * arguments args (at most 8), fd as its fd 3, fd2 as its fd 4. */
pid_t transient_start_exe(const char *exe, const char *name, const char *const args[], int fd,
                          int fd2, uid_t uid, gid_t gid, transient_cb cb, void *arg);
/* SIGCHLD: 1 when pid was a transient tool. */
int transient_reaped(pid_t pid, int status);

/* mcptest.c: agrippactl mcp test.  cb hears once: ok and the tools (and
 * the call's result) as the client's JSON text, or not ok and why (the
 * server's stderr tail in it), its credentials redacted from either. */
struct mcptest;
struct mcpspec_ctx;
typedef void (*mcptest_cb)(void *arg, int ok, const char *text);
/* mcp test -c: the tool, its arguments (a JSON object's text, checked)
 * and how many calls (1 to MCPTEST_COUNT_MAX), one after the other. */
#define MCPTEST_COUNT_MAX 10000
struct mcptest_call {
	const char *tool;
	const char *args;
	unsigned count;
};
/* Start the server of the stored spec_text (checked again with ctx) with
 * its opened credentials (creds_text[0..credslen), or NULL) and its client,
 * which lists the tools and makes call (or NULL: none).
 * The test, or NULL with err set (nothing left running). */
struct mcptest *mcptest_start(const char *name, const char *spec_text, const char *creds_text,
                              size_t credslen, const struct mcpspec_ctx *ctx,
                              const struct mcptest_call *call, mcptest_cb cb, void *arg,
                              char *err, size_t errsz);
/* Its requester is gone: cb is forgotten, the client killed, the sandbox stopped. */
void mcptest_abandon(struct mcptest *t);

/* backup.c: agrippactl backup DIR.  cb hears once: ok and what was written,
 * or why not. */
struct backup;
typedef void (*backup_cb)(void *arg, int ok, const char *msg);
/* Start a backup into the new directory dir, or NULL with err (nothing
 * made). */
struct backup *backup_start(const char *dir, backup_cb cb, void *arg, char *err, size_t errsz);
/* Its requester is gone: it goes on, and cb is forgotten. */
void backup_abandon(struct backup *b);

/* ctl_admin.c: what no MCP server spec may name or mount: the state
 * directory, the master key, the configuration, the control socket, the
 * pidfile and providers' key files, as configured, and what each resolves
 * to (a link must not hide one).  For struct mcpspec_ctx's forbidden. */
#define MCP_FORBIDDEN_MAX (5 + CONF_MAX_PROVIDERS)
struct mcp_forbidden {
	const char *p[2 * MCP_FORBIDDEN_MAX];
	char real[MCP_FORBIDDEN_MAX][PATH_MAX];
	size_t n, nreal;
};
void mcp_forbidden_paths(struct mcp_forbidden *f);

/* mcp_runs.c: the MCP servers of runs' steps (DESIGN.md section 4.2).
 * MCP_START from a run's runner (ws: its workspace; readonly: the
 * template's access is readOnly); MCP_STOP; the runner is gone (every
 * server of the run is killed and nothing more is sent); how many servers
 * of the run are not yet reaped (its workspace must outlive them). */
struct proc;
struct ipc_msg;
void mcp_runs_start(struct proc *runner, const char *run, const char *ws, int readonly,
                    const char *mirror, struct ipc_msg *m);
void mcp_runs_stop(const char *run, struct ipc_msg *m);
void mcp_runs_end(const char *run);
int mcp_runs_live(const char *run);
/* A fresh id (a version 4 UUID) for an MCP server's sandbox in egress. */
void mcp_egress_id(char id[IPC_UUID_LEN + 1]);
/* The sandbox of stdio server name (spec, checked), as a run's step or
 * agrippactl mcp test has it: its environment with its credentials (creds,
 * or NULL), the values its relay masks (from their text ctext[0..clen), or
 * NULL), its own egress entry under egress ("" when it has no network; its
 * events go to run, "-" for mcp test's log), the rest as where says
 * (workspace, readonly, trusted, mirror, done, arg).  Returns the sandbox
 * with *io, its channel, and *serr, its stderr's read end (or -1), both the
 * caller's; or NULL with err, nothing left. */
struct mcpspec;
struct mcp_creds;
struct sbx;
struct sbx_req;
struct sbx *mcp_sandbox_start(const struct mcpspec *spec, const struct mcp_creds *creds,
                              const char *ctext, size_t clen, const char *run, const char *name,
                              const struct sbx_req *where, char egress[IPC_UUID_LEN + 1], int *io,
                              int *serr, char *err, size_t errsz);
/* runs.c: the last server of an ended run's runner was reaped. */
void runs_mcp_gone(const char *run);

/* remove.c: trees removed off the event loop, by transient removers
 * (agrippa-tree remove) running as each tree's owner */
/* Remove path (a directory tree, or anything else) in the background;
 * logged when done or when it cannot be.  A path already being removed is
 * left to that removal. */
void remove_tree(const char *path);
/* At start: the fresh sandbox workspaces and scratch checkouts an earlier
 * start left (nothing keeps them across starts). */
void remove_sweep(void);

/* mirror.c: the connections' mirrors (STATE/mirrors/ID), one fetch at a
 * time each */
struct mirror_wait;
typedef void (*mirror_cb)(void *arg, int ok, const char *error);
/* STATE/mirrors/ID for the connection id (a UUID): 0, or -1. */
int mirror_path(const char *id, char *path, size_t pathsz);
/*
 * Bring the mirror of connection id up to date from url with the token
 * (toklen bytes, may be NULL; copied), or join the fetch in flight: cb runs
 * once, when that fetch is over.  Returns the wait (for
 * mirror_wait_cancel), or NULL with err set when no fetch could start.
 */
struct mirror_wait *mirror_fetch(const char *id, const char *url, const unsigned char *tok,
                                 size_t toklen, mirror_cb cb, void *arg, char *err,
                                 size_t errsz);
/* The asker is gone: its cb will not run (the fetch goes on). */
void mirror_wait_cancel(struct mirror_wait *w);
/* What this host has of a connection's mirror, from its directory and the
 * stamp the git helper leaves in it (githelper/mirror.h, GH_STAMP). */
struct mirror_info {
	int present;     /* STATE/mirrors/ID is there */
	int stamped;     /* and records a fetch: bytes and fetched hold */
	uint64_t bytes;  /* its size on disk after that fetch */
	time_t fetched;  /* when that fetch ended */
};
/* mi for the connection id (all zero for no mirror or a bad id).  A few
 * system calls on small files: fit for the event loop. */
void mirror_info(const char *id, struct mirror_info *mi);
/* The mirrors on this host, and the bytes their stamps record. */
void mirror_totals(uint64_t *count, uint64_t *bytes);
/* Remove the mirrors of connections that no longer exist. */
void mirror_sweep(void);
/* The hourly sweep (idempotent). */
void mirror_init(void);


#endif
