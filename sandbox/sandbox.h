/*
 * The sandbox process (agrippa-sandbox): the tool server inside one
 * run's sandbox.  It is pid 1 of the sandbox's pid namespace, serves its
 * driver (the run's runner, or agrippactl) over fd 3, and ends when the
 * driver hangs up, which ends every process of the sandbox with it.
 */
#ifndef AGRIPPA_SANDBOX_H
#define AGRIPPA_SANDBOX_H

#include <stdint.h>

#include "ipc/ipc.h"
#include "ipc/ipc_msg.h"
#include "sandbox/ws.h"

#define SBX_FD 3
#define SBX_KILL_GRACE_MS 2000 /* SIGTERM, then SIGKILL this much later */

struct event_base;

struct tools {
	struct event_base *base;
	struct ipc_chan *chan;
	struct ws ws;
	struct ipc_sbx_hello hello;
	int network; /* the run has a network policy: egress listens on 127.0.0.1:3128 */
};

/* sandbox.c */
__attribute__((noreturn)) void sandbox_main(void);
/* mcphost.c: "agrippa-sandbox mcp LINE_MAX COMMAND..." (an MCP server's sandbox) */
__attribute__((noreturn)) void sandbox_mcp_main(char **argv);
/* Send a terminal SBX_RESULT without data.  The channel's failure is fatal. */
void tools_reply_error(struct tools *t, uint64_t id, int code, const char *msg);
/* Queue a finished frame; a failure to queue ends the process (the driver is gone). */
void tools_send(struct tools *t, struct ipc_wbuf *w);

/* exec.c: one command at a time */
void exec_start(struct tools *t, uint64_t id, const struct ipc_sbx_exec *req);
void exec_kill(struct tools *t, uint64_t id);
/* SIGCHLD: reap everything (orphans of the namespace come to pid 1). */
void exec_reap(struct tools *t);

#endif
