/*
 * Child start-up and the supervisor channel, shared by every role (see
 * child.h for where it sits among the library folders).
 */
#include <event2/event.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "privsep/child.h"
#include "privsep/privsep.h"

void
child_bootstrap(struct child *c, enum ipc_role role)
{
	struct ipc_msg m;
	const char *err;

	memset(c, 0, sizeof(*c));
	c->role = role;
	c->max_frame = IPC_MAX_FRAME_DEFAULT;
	log_procinit(ipc_role_name(role));
	privsep_nodump();
	if (ipc_read_frame(CHILD_SUPERVISOR_FD, role, ROLE_SUPERVISOR, c->max_frame,
		CHILD_HELLO_TIMEOUT_MS, &m, &err) == -1)
		fatalx("no hello from the supervisor: %s", err);
	if (m.type != IMSG_HELLO || ipc_dec_hello(m.body, &c->hello) == -1) {
		ipc_msg_free(&m);
		fatalx("first message from the supervisor is not a valid hello");
	}
	ipc_msg_free(&m);
	if (c->hello.proto != IPC_PROTO_VERSION)
		fatalx("protocol version mismatch: supervisor %u, %s %u", c->hello.proto,
		    ipc_role_name(role), IPC_PROTO_VERSION);
	if (c->hello.role != (uint32_t)role)
		fatalx("supervisor started us as %s", ipc_role_name(c->hello.role));
	log_setverbose((int)c->hello.verbose);
}

void
child_lockdown(struct child *c)
{
	privsep_drop(c->hello.chroot, c->hello.uid, c->hello.gid, c->hello.devmode);
	privsep_rlimits(c->role);
	privsep_landlock(c->role);
#ifdef AGRIPPA_SANITIZE
	{
		/* test builds: what this process can open now, for test_landlock */
		const char *probe = getenv("AGRIPPA_TEST_LANDLOCK_PROBE");
		char *list, *p, *save = NULL;
		int fd;

		if (probe != NULL && (c->role == ROLE_PROXY || c->role == ROLE_EGRESS) &&
		    (list = strdup(probe)) != NULL) {
			for (p = strtok_r(list, ":", &save); p != NULL; p = strtok_r(NULL, ":", &save)) {
				fd = open(p, O_RDONLY | O_CLOEXEC);
				log_warnx("landlock probe: %s: %s", p, fd >= 0 ? "opened" : strerror(errno));
				if (fd >= 0)
					close(fd);
			}
			free(list);
		}
	}
#endif
#ifdef AGRIPPA_SECCOMP_DEBUG
	privsep_seccomp(c->role, 1);
#else
	privsep_seccomp(c->role, 0);
#endif
}

static struct child_db_pending *
child_db_find(struct child *c, uint64_t id)
{
	size_t i;

	for (i = 0; i < c->npending; i++)
		if (c->pending[i].id == id)
			return &c->pending[i];
	return NULL;
}

static void
child_db_remove(struct child *c, struct child_db_pending *p)
{
	*p = c->pending[--c->npending];
}

static void
child_db_reply(struct child *c, struct ipc_msg *m)
{
	struct child_db_pending *p = child_db_find(c, m->id), saved;
	struct ipc_db_result r;

	if (p == NULL) {
		log_debug("db reply for forgotten request %llu", (unsigned long long)m->id);
		return;
	}
	saved = *p;
	child_db_remove(c, p);
	if (ipc_dec_db_result(m->body, &r) == -1)
		fatalx("malformed db result"); /* cannot happen: validated */
	saved.cb(c, &r, saved.arg);
}

static void
child_on_msg(struct ipc_chan *ch, struct ipc_msg *m, void *arg)
{
	struct child *c = arg;
	uint32_t level;

	switch (m->type) {
	case IMSG_SHUTDOWN:
		log_debug("shutdown requested");
		c->stopping = 1;
		event_base_loopexit(c->base, NULL);
		return;
	case IMSG_LOG_VERBOSE:
		if (ipc_dec_log_verbose(m->body, &level) == 0)
			log_setverbose((int)level);
		return;
	case IMSG_DB_RESULT:
		child_db_reply(c, m);
		return;
	default:
		if (c->dispatch == NULL)
			fatalx("unexpected %s from the supervisor", ipc_msg_name(m->type));
		c->dispatch(c, m);
	}
}

static void
child_on_err(struct ipc_chan *ch, const char *reason, void *arg)
{
	/* Without the supervisor there is nothing left to do. */
	fatalx("supervisor channel: %s", reason);
}

void
child_run(struct child *c, child_dispatch_fn dispatch)
{
	struct ipc_wbuf w;

	c->dispatch = dispatch;
	c->sup = ipc_chan_new(c->base, CHILD_SUPERVISOR_FD, c->role, ROLE_SUPERVISOR,
	    c->max_frame, child_on_msg, child_on_err, c);
	if (c->sup == NULL)
		fatalx("cannot set up the supervisor channel");
	ipc_wbuf_begin(&w, IMSG_READY, 0, 2);
	ipc_put_u64(&w, IPC_PROTO_VERSION);
	ipc_put_u64(&w, (uint64_t)getpid());
	if (ipc_wbuf_finish(&w, c->max_frame) == -1 || ipc_chan_send(c->sup, &w, -1) == -1)
		fatalx("cannot send ready");
	ipc_wbuf_free(&w);
	event_base_dispatch(c->base);
}

uint64_t
child_db_begin(struct child *c, struct ipc_wbuf *w, const char *op, uint32_t nargs)
{
	uint64_t id = ++c->next_id;

	ipc_wbuf_begin(w, IMSG_DB_OP, id, 2);
	ipc_put_str(w, op);
	ipc_put_array(w, nargs);
	return id;
}

int
child_db_send(struct child *c, struct ipc_wbuf *w, uint64_t id, child_db_cb cb, void *arg)
{
	int rv = -1;

	if (c->npending < CHILD_DB_PENDING_MAX && ipc_wbuf_finish(w, c->max_frame) == 0 &&
	    ipc_chan_send(c->sup, w, -1) == 0) {
		c->pending[c->npending].id = id;
		c->pending[c->npending].cb = cb;
		c->pending[c->npending].arg = arg;
		c->npending++;
		rv = 0;
	}
	ipc_wbuf_free(w);
	return rv;
}

void
child_db_forget(struct child *c, uint64_t id)
{
	struct child_db_pending *p = child_db_find(c, id);

	if (p != NULL)
		child_db_remove(c, p);
}

const char *
child_db_cell_at(const struct ipc_db_result *r, uint32_t rown, uint32_t col, size_t *len)
{
	struct ipc_cur rows = r->rows, row;
	const msgpack_object *o;
	const char *s;
	uint32_t i;

	if (r->code != DB_OK || rown >= r->nrows || col >= r->ncols)
		return NULL;
	for (i = 0; i <= rown; i++)
		if (ipc_get_array(&rows, &row, r->ncols) == -1)
			return NULL;
	for (i = 0; i < col; i++)
		if (ipc_get_any(&row, &o) == -1)
			return NULL;
	if (ipc_is_nil(&row) || ipc_get_str(&row, &s, len, SIZE_MAX) == -1)
		return NULL;
	return s;
}

const char *
child_db_cell(const struct ipc_db_result *r, uint32_t col, size_t *len)
{
	return child_db_cell_at(r, 0, col, len);
}
