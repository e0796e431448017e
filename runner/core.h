#ifndef AGRIPPA_RUNNER_CORE_H
#define AGRIPPA_RUNNER_CORE_H

/*
 * The runner's private header, prototypes grouped by file.
 *
 * The core (runner.c, ops.c, output.c, expand.c, artifact.c) walks the
 * run's steps; each step kind is a file of its own (step_command.c,
 * agent.c, step_patch.c, step_checkpoint.c, step_pr.c) that fills one struct
 * step_kind, listed in kinds.c.  The core reaches a kind only through that
 * table; a kind uses the core through what this header declares.
 */
#include <jansson.h>
#include <stdint.h>

#include "ipc/ipc.h"
#include "ipc/ipc_msg.h"
#include "privsep/child.h"

#define RUNNER_OUTPUT_FLUSH_MS 100      /* output is sent as events at least this often */
#define RUNNER_OUTPUT_EVENT_MAX 16384   /* bytes of output per step.output event */
#define RUNNER_CRASH_MAX 3              /* crashed attempts of one step before it fails */
#define RUNNER_INLINE_MAX (256 * 1024)  /* artifacts up to this size live in the database */

struct step_kind;

/* ---- runner.c: the walk of the steps ------------------------------------- */

/* A step of the template, and what its history says of it. */
struct rstep {
	json_t *j;           /* borrowed from the template */
	const char *id, *kind, *phase, *when;
	const struct step_kind *k; /* never NULL (kinds.c) */
	int retry, timeout_s, allow_failure, last_in_phase, first_in_phase;
	/* from the history */
	int last_attempt;    /* highest attempt number so far, 0 for none */
	int fails;           /* attempts failed or timed out */
	int crashes;         /* attempts crashed */
	int running;         /* attempt left running, 0 for none */
	const char *session; /* agent: the session a new attempt takes over, or NULL */
	const char *final;   /* "succeeded", "skipped", "failed", "timed_out", "cancelled" or NULL */
};

/* The run this process drives.  One per process, as smtpd's env: the core
 * writes it; kinds read it, and set no_retry (and attempt, in resume). */
struct runner {
	struct child c;
	char run[IPC_UUID_LEN + 1];
	char owner[IPC_INSTANCE_MAX + 1];
	char previous[IPC_STATUS_MAX + 1];
	uint32_t exec_max_ms;
	uint64_t step_budget;  /* engine.step_budget, micro-dollars */
	int started;
	struct ipc_chan *sbx;
	int sbx_ready;
	json_t *tmpl, *params, *hist, *approvals;
	struct rstep *steps;
	size_t nsteps, cur;    /* steps[cur] is the current step */
	int failing;
	char fail_error[1024];
	int cancel;          /* a cancel was requested */
	int exiting;         /* RUNNER_DONE sent: nothing more happens */
	int finishing;       /* run_finish sent: nothing else starts */
	/* the current attempt */
	int attempt;
	int64_t reserved;    /* its reservation (kinds that spend), micro-dollars */
	int refused;         /* more spend was refused: the attempt fails */
	int no_retry;        /* the attempt's failure ends the step (a kind sets it) */
};
extern struct runner rn;

/* Finish and send w to the sandbox (fatalx when it cannot be sent). */
void runner_sbx_send(struct ipc_wbuf *w);
/* Say how this runner ends (IPC_RUN_*), then exit once that is written;
 * nothing else happens meanwhile. */
void runner_exit(uint32_t outcome);
/* The lease is gone: stop at once.  The caller returns. */
void runner_lease_lost(void);
/* End the run with status (error NULL when none); once only. */
void runner_finish(const char *status, const char *error);
/* The run fails (unless s allows failure) with this reason, the first one
 * only. */
void runner_note_failure(const struct rstep *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* End attempt rn.attempt of the current step with status (exit_status -1
 * and error NULL when none; extra and arts owned by the callee, NULL for
 * none); final: no retry follows.  The walk goes on once it is stored. */
void runner_step_end(const char *status, int exit_status, const char *error, json_t *extra,
    int final, json_t *arts);
/* The current step fails for good at its start with error (the run with it,
 * unless it allows failure). */
void runner_step_fail(const struct rstep *s, const char *error);

/* ---- ops.c: the operation queue and events ------------------------------- */

/* A scoped operation, queued: one at a time, in order, so events are stored
 * in the order they happened.  $1 the run and $2 the lease owner are put by
 * runner_op; the caller appends nargs more to w. */
struct qop {
	struct qop *next;
	struct ipc_wbuf w;
	uint64_t id;
	child_db_cb cb;
	void *arg;
};
struct qop *runner_op(const char *op, uint32_t nargs);
/* Queue q (freed by the queue); cb runs with its reply, unless the runner
 * is exiting by then. */
void runner_op_send(struct qop *q, child_db_cb cb, void *arg);
/* A database error ends this runner (fatalx naming what failed); the lease
 * expires and another takes the run up where it stopped. */
void runner_db_check(const struct ipc_db_result *r, const char *what);
/* Store an event of type with payload (consumed). */
void runner_event(const char *type, json_t *payload);

/* ---- output.c: a command's output as step.output events ------------------ */

void runner_output_init(void);
/* Bytes of stream 1 (stdout) or 2 (stderr) of the current attempt's
 * command; others are ignored.  They go out within RUNNER_OUTPUT_FLUSH_MS. */
void runner_output(uint32_t stream, const uint8_t *data, size_t len);
/* The command ended: what is left goes out now. */
void runner_output_end(void);
/* Bytes as a JSON string (new): valid UTF-8 passes, anything else (and
 * NUL) becomes U+FFFD.  An incomplete sequence at the end of bytes that are
 * not the last is kept for the next ones: *used says how much was taken. */
json_t *runner_utf8_text(const unsigned char *p, size_t len, int last, size_t *used);

/* ---- expand.c: reading the template -------------------------------------- */

/* o's string member key (borrowed), or def. */
const char *runner_jstr(json_t *o, const char *key, const char *def);
/* o's integer member key, or def. */
int runner_jint(json_t *o, const char *key, int def);
/* s with ${params.NAME} expanded (other text as it is); the caller frees. */
char *runner_expand(const char *s);

/* ---- artifact.c: an attempt's end and its artifacts ---------------------- */

/* An artifact the step's contract names, and what became of it. */
struct art {
	const char *key, *kind, *file;
	int required;
	unsigned char *data;     /* read from the sandbox (owned) */
	size_t len, cap;
	unsigned char sha[32];
	int ok;                  /* read and checked */
	int stored;              /* in the store (too large for the database) */
	char why[IPC_ERRMSG_MAX + 64]; /* why it was not taken, when not */
};

/* The attempt ended with status (error NULL when none; extra owned by the
 * callee): its artifacts are read from the sandbox when it keeps them
 * (succeeded, or failed for good where failure is allowed), then it is
 * retried or the step ends. */
void runner_attempt_over(const char *status, int exit_status, const char *error, json_t *extra);
/* The same for an attempt that keeps no artifact. */
void runner_attempt_over_bare(const char *status, int exit_status, const char *error,
    json_t *extra);
/* The attempt succeeded with one artifact of kind that was made for it, not
 * read from the sandbox (extra owned by the callee).  Returns the contract's
 * artifact for it (its first of that kind, or an optional one keyed by the
 * kind) for the caller to fill, then to pass to runner_art_made_end. */
struct art *runner_art_made(const char *kind, json_t *extra);
/* Only a is taken (the contract's other keys are not made); the contract is
 * checked and the step goes on. */
void runner_art_made_end(const struct art *a);
/* The largest artifact a frame to the supervisor can carry. */
uint64_t runner_art_cap(void);
/* An id for a request to the supervisor that no other in flight has. */
uint64_t runner_req_id(void);
/* Whether id is that of the artifact being read from the sandbox. */
int runner_art_reading(uint64_t id);
/* SBX_OUTPUT (data) and SBX_RESULT (m) of the artifact being read. */
void runner_art_output(const uint8_t *data, size_t len);
void runner_art_result(const struct ipc_msg *m);
/* A RUNNER_REPLY to the artifact sent to the store: 1 when id was it. */
int runner_art_put_reply(uint64_t id, const struct ipc_runner_reply *rr);

/* ---- agent_mcp.c: the MCP servers of an agent step ---------------------- */

struct amcp_conf {
	uint32_t result_max; /* agent.tool_output_max */
	uint32_t tools_max;  /* agent.mcp_tools_max */
	uint32_t bytes_max;  /* agent.mcp_tool_bytes_max */
};
/* Every server of the step has listed its tools or failed. */
typedef void (*amcp_ready_cb)(void);
/* The tools offered changed after that (a server's list_changed, or a
 * restart): the model must be sent them again. */
typedef void (*amcp_changed_cb)(void);
/* A call's answer, text[0..len) already cut at result_max, and the image
 * blocks the model is given with it (owned by the callee), or NULL. */
typedef void (*amcp_result_cb)(const char *server, const char *text, size_t len, int is_error,
    json_t *images);
/* Start the servers requires names (the step's requires.mcp_servers).
 * Returns 1 (ready comes later), 0 when there are none (ready does not
 * come), or -1 with err. */
int amcp_begin(json_t *requires, const struct amcp_conf *conf, amcp_ready_cb ready,
    amcp_changed_cb changed, char *err, size_t errsz);
/* Once ready: why a required server is not there, or NULL. */
const char *amcp_missing(void);
/* Append the offered tools' definitions to tools. */
void amcp_add_tools(json_t *tools);
/* The server of offered tool name, or NULL when name is not one. */
const char *amcp_server_of(const char *name);
/* Call offered tool name; cb answers once.  -1 when name is not offered. */
int amcp_call(const char *name, json_t *input, amcp_result_cb cb);
/* Give up the call in flight: it answers "cancelled" soon. */
void amcp_cancel(void);
/* Close every server (each gets EOF, the supervisor stops it). */
void amcp_end(void);
/* MCP_CHANNEL and MCP_FAILED: 1 when m was one. */
int amcp_sup_msg(struct ipc_msg *m);

/* ---- kinds.c: the table of step kinds ------------------------------------ */

/*
 * A step kind.  start begins attempt rn.attempt of s once its row is
 * written; the attempt ends through runner_attempt_over*, runner_art_made
 * or runner_step_end (or runner_exit, when the run is parked).  The other
 * hooks may be NULL.  Those that claim a message are offered, for every
 * kind in the table's order, each message the core does not take, and
 * claim only what answers a request of their own or is of a type of their
 * own.
 */
struct step_kind {
	const char *name;   /* the template's "kind" */
	int spends;         /* an attempt first reserves what it may spend (rn.reserved) */
	void (*start)(struct rstep *s);
	/* An attempt of s left running by an earlier runner (s->running):
	 * the hook makes it rn.attempt and ends it.  NULL: it is marked
	 * crashed and run again. */
	void (*resume)(struct rstep *s);
	/* A sandbox message: 1 when it was this kind's (and handled). */
	int (*sbx_msg)(struct ipc_msg *m);
	/* A RUNNER_REPLY from the supervisor: 1 when it answers this kind. */
	int (*reply)(uint64_t id, const struct ipc_runner_reply *rr);
	/* Another supervisor message: 1 when its type is this kind's. */
	int (*sup_msg)(struct ipc_msg *m);
	/* A cancel (rn.cancel is set): stop what runs; the attempt ends
	 * cancelled at its next boundary. */
	void (*cancel)(void);
};

/* Every kind, NULL-terminated. */
extern const struct step_kind *const step_kinds[];
/* The kind named name; a kind no entry names fails at its start. */
const struct step_kind *step_kind_find(const char *name);

/* The kinds' entries, each in its own file. */
extern const struct step_kind step_agent;      /* agent.c */
extern const struct step_kind step_command;    /* step_command.c */
extern const struct step_kind step_patch;      /* step_patch.c */
extern const struct step_kind step_checkpoint; /* step_checkpoint.c */
extern const struct step_kind step_pull_request; /* step_pr.c */

#endif
