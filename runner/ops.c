/*
 * ops: the run's database operations, one at a time and in order (see
 * core.h), and the events they store.
 *
 * Every operation is scoped: the supervisor refuses one that names another
 * run, and each checks the lease, so a runner that lost its lease changes
 * nothing.  One in flight at a time keeps the events of a run in the order
 * they happened.
 */
#include <stdlib.h>

#include "common/log.h"
#include "runner/core.h"

static struct {
	struct qop *head, *tail;
	int inflight;
} queue;

/* A scoped operation: $1 the run, $2 the lease owner, then nargs more. */
struct qop *
runner_op(const char *op, uint32_t nargs)
{
	struct qop *q;

	if ((q = calloc(1, sizeof(*q))) == NULL)
		fatal("calloc");
	q->id = child_db_begin(&rn.c, &q->w, op, nargs + 2);
	ipc_put_str(&q->w, rn.run);
	ipc_put_str(&q->w, rn.owner);
	return q;
}

static void q_pump(void);

static void
q_done(struct child *c, const struct ipc_db_result *r, void *arg)
{
	struct qop *q = arg;

	queue.inflight = 0;
	if (r == NULL)
		fatalx("the supervisor went away");
	if (rn.exiting) {
		free(q);
		return;
	}
	q->cb(c, r, q->arg);
	free(q);
	q_pump();
}

static void
q_pump(void)
{
	struct qop *q;

	if (queue.inflight || (q = queue.head) == NULL)
		return;
	queue.head = q->next;
	if (queue.head == NULL)
		queue.tail = NULL;
	queue.inflight = 1;
	if (child_db_send(&rn.c, &q->w, q->id, q_done, q) == -1)
		fatalx("cannot send a database operation");
}

void
runner_op_send(struct qop *q, child_db_cb cb, void *arg)
{
	q->cb = cb;
	q->arg = arg;
	if (queue.tail != NULL)
		queue.tail->next = q;
	else
		queue.head = q;
	queue.tail = q;
	q_pump();
}

void
runner_db_check(const struct ipc_db_result *r, const char *what)
{
	if (r->code != DB_OK)
		fatalx("%s: %.*s", what, (int)r->errlen, r->error);
}

/* ---- events -------------------------------------------------------------- */

static void
event_done(struct child *c, const struct ipc_db_result *r, void *arg)
{
	size_t len;

	runner_db_check(r, "an event");
	if (child_db_cell(r, 0, &len) == NULL)
		runner_lease_lost();
}

void
runner_event(const char *type, json_t *payload)
{
	struct qop *q = runner_op("runner_event", 2);
	char *s;

	if ((s = json_dumps(payload, JSON_COMPACT)) == NULL)
		fatalx("out of memory");
	json_decref(payload);
	ipc_put_str(&q->w, type);
	ipc_put_str(&q->w, s);
	free(s);
	runner_op_send(q, event_done, NULL);
}
