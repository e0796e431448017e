#ifndef AGRIPPA_RUNNER_H
#define AGRIPPA_RUNNER_H

/*
 * runner.c: one process per run (DESIGN.md section 1).  It walks the run's
 * phases and steps under the lease its engine holds, drives the run's
 * sandbox, and writes everything it does as events through the supervisor.
 * It holds nothing secret; its channel to the supervisor is scoped to its
 * own run.
 */
__attribute__((noreturn)) void runner_main(void);

#define RUNNER_OUTPUT_FLUSH_MS 100      /* output is sent as events at least this often */
#define RUNNER_OUTPUT_EVENT_MAX 16384   /* bytes of output per step.output event */
#define RUNNER_CRASH_MAX 3              /* crashed attempts of one step before it fails */
#define RUNNER_INLINE_MAX (256 * 1024)  /* artifacts up to this size live in the database */

#include <jansson.h>
#include <stdint.h>

#include "privsep/child.h"

/* runner.c, for agent.c: the run's operation queue (one at a time, in
 * order; $1 the run and $2 the lease owner are put by runner_op), the
 * sandbox channel, and the end of an attempt. */
struct qop {
	struct qop *next;
	struct ipc_wbuf w;
	uint64_t id;
	child_db_cb cb;
	void *arg;
};
struct qop *runner_op(const char *op, uint32_t nargs);
void runner_op_send(struct qop *q, child_db_cb cb, void *arg);
/* Finish and send w to the sandbox (fatalx when it cannot be sent). */
void runner_sbx_send(struct ipc_wbuf *w);
/* The lease is gone: stop at once.  The caller returns. */
void runner_lease_lost(void);
/* The agent step's attempt ended with status (error NULL when none; extra
 * owned by the callee); no_retry: the step is over even if it has retries
 * left (its budget is spent). */
void runner_agent_over(const char *status, const char *error, json_t *extra, int no_retry);
/* Bytes as a JSON string (new): valid UTF-8 passes, anything else (and
 * NUL) becomes U+FFFD.  An incomplete sequence at the end of bytes that are
 * not the last is kept for the next ones: *used says how much was taken. */
json_t *runner_utf8_text(const unsigned char *p, size_t len, int last, size_t *used);
/* Whether a cancel was requested. */
int runner_cancelled(void);

/*
 * agent.c: the tool-use loop of an agent step.  The model is reached over
 * the model channel to the proxy (RUNNER_PROXY), the tools through the
 * run's sandbox; the conversation is stored after every model answer and
 * every round of tool results, so that a runner killed mid-step resumes it.
 */
#define AGENT_ID_BASE (1ull << 45)   /* ids of the agent's sandbox requests */
#define AGENT_EVENT_TEXT_MAX 16384    /* bytes of model text in one agent.message */
#define AGENT_EVENT_RESULT_MAX 4096   /* bytes of a tool result in agent.tool_result */
#define AGENT_LIST_MAX 1000           /* entries list_dir and glob return */
#define AGENT_GREP_MAX 500            /* lines grep returns */
#define AGENT_STORES_AHEAD 4          /* stores the loop runs ahead of */
#define AGENT_PROXY_WAIT_SECS 60      /* for a new model channel once the proxy is gone */
#define AGENT_ROUND_SLACK 16384       /* room kept in a round's message for its framing */

struct agent_step {
	const char *step, *phase;
	int attempt;
	const char *prompt;     /* ${params} expanded */
	int max_turns;
	int readonly;           /* access: readOnly (no bash) */
	json_t *produces;       /* the step's contract (borrowed) */
	json_t *skills;         /* names of the step's skills (borrowed) */
	int64_t reserved;       /* the attempt's reservation, micro-dollars */
	const char *resume;     /* the session of the attempt this one takes over, or NULL */
};
void agent_init(struct child *c);
/* RUNNER_PROXY: the model channel and the agent settings. */
void agent_proxy(struct ipc_msg *m);
void agent_start(const struct agent_step *a);
/* A sandbox message: 1 when it was the agent's (and handled), 0 if not. */
int agent_sbx_msg(struct ipc_msg *m);
/* A cancel: the running command is killed; the attempt ends cancelled at
 * its next boundary. */
void agent_cancel(void);

#endif
