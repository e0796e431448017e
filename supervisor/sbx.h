/*
 * Building and tearing down per-run sandboxes (DESIGN.md section 4), in the
 * supervisor.  The supervisor builds a sandbox and hands the other end of
 * its channel to whoever drives it; it never reads what the sandbox sends.
 */
#ifndef AGRIPPA_SUPERVISOR_SBX_H
#define AGRIPPA_SUPERVISOR_SBX_H

#include <limits.h>
#include <sys/types.h>
#include <time.h>

#include "ipc/ipc_msg.h"
#include "supervisor/config.h"

/* cgroup.c */
enum { CG_MEMORY, CG_PIDS, CG_CPU, CG_NCTL };
struct sbx_cgroup {
	char dir[CG_NCTL][PATH_MAX]; /* v2: dir[0] only; "" when not created */
};
/* A sandbox's id and cgroup: sbx-, the first CG_TAG_LEN digits of the
 * daemon's host id, and random digits. */
#define CG_TAG_LEN 8
/* Detect cgroup v2 or v1 and prepare delegation; logs one line either way.
 * Removes the empty cgroups of sandboxes named after host_id (cg_sweep). */
void cgroup_init(int devmode, const char *host_id);
/* Make the cgroup(s) named name with lim's limits.  Returns 0 (nothing made
 * when no cgroup is available) or -1 with err set (nothing left behind). */
int cgroup_create(const char *name, const struct conf_sandbox *lim, struct sbx_cgroup *out,
    char *err, size_t errsz);
/* c's cgroup.procs files, opened for writing into fds (-1 where c has
 * none): the sandbox's first process joins its cgroups itself by writing
 * "0" to them, so that the supervisor does not wait for the moves (on
 * cgroup v1 a kernel RCU grace period each).  The kernel checks a move
 * against the credentials of the file's opener (root here), not the
 * writer's.  0, or -1 with err set and nothing left open; the caller
 * closes the descriptors. */
int cgroup_open_procs(const struct sbx_cgroup *c, int fds[CG_NCTL], char *err, size_t errsz);
void cgroup_destroy(struct sbx_cgroup *c);

/* sbx.c */
struct sbx;
/* Called once when the sandbox has ended and everything of it is gone. */
typedef void (*sbx_done_cb)(struct sbx *s, int status, void *arg);

/*
 * A stdio MCP server's sandbox instead of a run's (DESIGN.md section 4.2):
 * built the same way, but its first process is "agrippa-sandbox mcp
 * LINE_MAX COMMAND..." (sandbox/mcphost.c), which loads the seccomp
 * filter, starts the server on pipes of its own and relays its stdin and
 * stdout lines to and from the sandbox's end of the channel, the server's
 * output redacted for secrets[] and cut at line_max, and its stderr,
 * redacted too, to a pipe of its own (sbx_take_stderr).  Nothing is written on the
 * channel by the supervisor: its other end speaks MCP, not IPC.  The
 * secrets reach the relay on a memfd (never its environment), made in the
 * sandbox's first process from its copy of the caller's memory.
 */
struct sbx_mcp {
	char *const *argv; /* the command, NULL-terminated */
	char *const *env;  /* NAME=value entries (credentials expanded), NULL-terminated */
	const char *const *paths; /* host directories bound read-only at the same place */
	size_t npaths;
	/* the server's credential values, masked with '*' in its output: at
	 * most 64, each 4 to 8192 bytes without '\n' (shorter ones are not
	 * searched for); valid until sbx_create returns */
	const unsigned char *const *secrets;
	const size_t *secretlen;
	size_t nsecrets;
	size_t line_max; /* bytes of one line of its output; 0: MCP_LINE_MAX_DEFAULT */
};

struct sbx_req {
	const char *workspace; /* absolute directory, or NULL for a fresh empty one */
	int readonly;          /* access: readOnly */
	int trusted;           /* workspace is a run's, made by the supervisor under
	                          the state directory (not an operator's path) */
	const char *mirror;    /* a run's mirror, whose objects the sandbox sees
	                          read-only at /mirror/objects; NULL for none */
	int network;           /* its network policy is not none: the sandbox listens on
	                          127.0.0.1:3128 in its network namespace for egress */
	const struct sbx_mcp *mcp; /* an MCP server's sandbox (readonly: all of the
	                              workspace, no artifacts), or NULL */
	sbx_done_cb done;
	void *arg;
};

/* Ready the sandbox machinery: cgroups, the sandbox uid check. */
int sbx_init(char *err, size_t errsz);

/*
 * Build a sandbox.  On success returns it and sets *driver_fd to the
 * driver's end of its channel (SBX_HELLO already queued on it; the caller
 * passes it on and closes its copy).  On failure returns NULL with err set
 * and nothing left behind.
 */
struct sbx *sbx_create(const struct sbx_req *req, int *driver_fd, char *err, size_t errsz);
const char *sbx_id(const struct sbx *s);
/* The listener a sandbox made for egress (req.network), once: the caller
 * owns it; -1 when there is none. */
int sbx_take_listener(struct sbx *s);
pid_t sbx_pid(const struct sbx *s);
/* An MCP server's sandbox: the read end of the server's stderr, once (the
 * caller owns it); -1 when there is none. */
int sbx_take_stderr(struct sbx *s);
/* End it gently: SIGTERM to its first process after grace_ms (which
 * passes SIGTERM to an MCP server), SIGKILL grace_ms later; done() runs
 * once it is reaped.  The caller closes its end of the channel first, so
 * that an MCP server sees EOF on its stdin before anything else. */
void sbx_stop(struct sbx *s, unsigned grace_ms);
/* Kill every process of the sandbox; done() runs once it is reaped. */
void sbx_kill(struct sbx *s);
/* Forget the done callback (its owner is going away); the sandbox is killed. */
void sbx_abandon(struct sbx *s);
/* SIGCHLD: returns 1 when pid was a sandbox (then cleaned up), 0 otherwise. */
int sbx_reaped(pid_t pid, int status);
void sbx_kill_all(void);
/* (Re)prepare the next sandbox ahead of requests: at start, and after a
 * reload (its limits were fixed when it was made).  Root mode only. */
void sbx_rewarm(void);
int sbx_count(void);

#endif
