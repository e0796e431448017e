/*
 * What every child role shares: start-up (HELLO from the supervisor on fd 3,
 * protocol version check, privilege drop, seccomp, READY), the channel to
 * the supervisor, and named database calls.
 *
 * It is the child's side of privilege separation, so it lives in privsep/.
 * The library folders read bottom up: common/ (logging, utilities) uses
 * nothing of ours; ipc/ (frames, the message catalog, channels) uses
 * common/; privsep/ (privilege drop, rlimits, seccomp, and this start-up)
 * uses ipc/ and common/; the roles (engine/, httpd/, proxy/, runner/,
 * supervisor/) use all three.  No folder includes from one above it.
 */
#ifndef AGRIPPA_CHILD_H
#define AGRIPPA_CHILD_H

#include <stdint.h>

#include "ipc/ipc.h"
#include "ipc/ipc_msg.h"

#define CHILD_SUPERVISOR_FD 3
#define CHILD_HELLO_TIMEOUT_MS 10000
#define CHILD_DB_PENDING_MAX 4096

struct event_base;
struct child;

/* A role's handler for supervisor messages not handled in common code. */
typedef void (*child_dispatch_fn)(struct child *c, struct ipc_msg *m);
/* Reply to a named database call: r is NULL when the channel is going away. */
typedef void (*child_db_cb)(struct child *c, const struct ipc_db_result *r, void *arg);

struct child_db_pending {
	uint64_t id;
	child_db_cb cb;
	void *arg;
};

struct child {
	enum ipc_role role;
	struct event_base *base;
	struct ipc_chan *sup;
	struct ipc_hello hello;
	size_t max_frame;
	child_dispatch_fn dispatch;
	uint64_t next_id;
	struct child_db_pending pending[CHILD_DB_PENDING_MAX];
	size_t npending;
	int stopping;
};

/*
 * Read HELLO (blocking, bounded) from the supervisor fd and check the
 * protocol version.  fatalx() on any problem.  Call first in every role.
 */
void child_bootstrap(struct child *c, enum ipc_role role);
/* Drop privileges, set rlimits, install seccomp: the last setup step. */
void child_lockdown(struct child *c);
/* Create the supervisor channel on c->base, send READY, run the loop.
 * Returns when the supervisor asked us to stop. */
void child_run(struct child *c, child_dispatch_fn dispatch);

/*
 * Start a named database call: fills w with the DB_OP envelope and the op
 * name, opening an args array of nargs values that the caller appends with
 * ipc_put_*, then calls child_db_send.  Returns the request id.
 */
uint64_t child_db_begin(struct child *c, struct ipc_wbuf *w, const char *op, uint32_t nargs);
/* Finish and send; cb runs with the reply.  Returns 0 or -1 (too many
 * pending, frame too large, channel failed); w is freed either way. */
int child_db_send(struct child *c, struct ipc_wbuf *w, uint64_t id, child_db_cb cb, void *arg);
/* Row 0, column col of a reply as a string (*len its length), or NULL when
 * the reply failed, has no row or column col, or the value is null. */
const char *child_db_cell(const struct ipc_db_result *r, uint32_t col, size_t *len);
/* The same for row rown; not NUL-terminated (it points into the reply). */
const char *child_db_cell_at(const struct ipc_db_result *r, uint32_t rown, uint32_t col,
                             size_t *len);
/* Forget a pending call (its reply will be dropped). */
void child_db_forget(struct child *c, uint64_t id);

#endif
