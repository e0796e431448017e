/*
 * Channels: a non-blocking Unix stream socket driven by two libevent events
 * on the raw descriptor (a bufferevent cannot carry SCM_RIGHTS), with frame
 * reassembly, descriptor passing and catalog checks in both directions; and
 * the blocking helpers used before an event loop exists.
 *
 * Descriptors and bytes.  The sender attaches a descriptor to the sendmsg()
 * that starts at the first byte of its frame.  Linux hands it out with the
 * first recvmsg() that returns any byte of that sendmsg, possibly glued after
 * earlier bytes; so a received descriptor is remembered with the stream
 * range [begin, end) its recvmsg() returned, and it belongs to the frame
 * starting inside that range.  A descriptor whose range ends at or before the
 * start of the frame being processed was not claimed by the frame it came
 * with: a protocol error.
 */
#include "ipc_msg.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "common/log.h"

#define CHAN_INBUF_INIT (64u * 1024)
#define CHAN_IOV_MAX 64

/* Room for as many descriptors as one recvmsg() may legitimately deliver. */
union chan_cmsg {
	struct cmsghdr hdr;
	char buf[CMSG_SPACE(sizeof(int) * IPC_MAX_FDS_QUEUED)];
};

struct chan_fd {
	int fd;
	uint64_t begin, end; /* stream range of the recvmsg() it came with */
};

struct chan_out {
	struct chan_out *next;
	int fd;        /* our dup, sent with the first byte, then closed */
	size_t len, off;
	uint8_t data[]; /* the whole frame, length prefix included */
};

struct ipc_chan {
	struct event *rev, *wev;
	int fd;
	enum ipc_role self, peer;
	size_t max_frame;
	ipc_msg_cb on_msg;
	ipc_err_cb on_err;
	void *arg;

	uint8_t *in;         /* received bytes not yet consumed as frames */
	size_t inlen, inalloc;
	uint64_t rx;         /* stream offset just past in[inlen - 1] */
	struct chan_fd fds[IPC_MAX_FDS_QUEUED];
	unsigned fdhead, nfds;

	struct chan_out *outq, **outq_tail; /* frames to write, oldest first */
	size_t pending;

	int failed;          /* on_err was called: no more I/O */
	int busy;            /* inside an event callback */
	int dead;            /* ipc_chan_free() was called while busy */
	char errbuf[192];
};

static uint32_t
be32_get(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* A frame from ipc_wbuf_finish(): prefix present and matching. */
static int
wbuf_finished(const struct ipc_wbuf *w)
{
	if (w->sb.data == NULL || w->sb.size <= 4)
		return 0;
	return be32_get((const uint8_t *)w->sb.data) == w->sb.size - 4;
}

/* The hellos and readies carry the protocol version; both ends must agree. */
static int
ipc_proto_ok(const struct ipc_msg *m)
{
	struct ipc_hello h;
	struct ipc_sbx_hello sh;
	struct ipc_ready r;

	if (m->type == IMSG_HELLO)
		return ipc_dec_hello(m->body, &h) == 0 && h.proto == IPC_PROTO_VERSION;
	if (m->type == IMSG_SBX_HELLO)
		return ipc_dec_sbx_hello(m->body, &sh) == 0 && sh.proto == IPC_PROTO_VERSION;
	if (m->type == IMSG_READY || m->type == IMSG_SBX_READY)
		return ipc_dec_ready(m->body, &r) == 0 && r.proto == IPC_PROTO_VERSION;
	return 1;
}

/*
 * One sendmsg() of iov[0..n), with fd (if >= 0) attached by SCM_RIGHTS.
 * Returns what sendmsg() returns.
 */
static ssize_t
ipc_sendv(int sock, struct iovec *iov, int n, int fd)
{
	union chan_cmsg cm;
	struct msghdr msg;

	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = iov;
	msg.msg_iovlen = (size_t)n;
	if (fd >= 0) {
		struct cmsghdr *c;

		memset(&cm, 0, sizeof(cm));
		msg.msg_control = cm.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int));
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	return sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/*
 * Collect the descriptors of one received message with add(ctx, fd); add
 * returns -1 when it cannot keep one (the descriptor is then closed here).
 * Returns NULL, or a static reason after closing whatever was not kept.
 */
static const char *
ipc_take_fds(struct msghdr *msg, int (*add)(void *, int), void *ctx)
{
	struct cmsghdr *c;
	const char *bad = NULL;
	size_t i, n;
	int fd;

	for (c = CMSG_FIRSTHDR(msg); c != NULL; c = CMSG_NXTHDR(msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
			bad = "unexpected control message";
			continue;
		}
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < n; i++) {
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (add(ctx, fd) == -1) {
				close(fd);
				bad = "too many descriptors received";
			}
		}
	}
	if (msg->msg_flags & MSG_CTRUNC)
		bad = "control message truncated (too many descriptors)";
	return bad;
}

/* ---- received descriptors ------------------------------------------- */

struct fd_ctx {
	struct ipc_chan *ch;
	uint64_t begin, end;
};

static int
fifo_add(void *arg, int fd)
{
	struct fd_ctx *x = arg;
	struct ipc_chan *ch = x->ch;
	struct chan_fd *f;

	if (ch->nfds == IPC_MAX_FDS_QUEUED)
		return -1;
	f = &ch->fds[(ch->fdhead + ch->nfds) % IPC_MAX_FDS_QUEUED];
	f->fd = fd;
	f->begin = x->begin;
	f->end = x->end;
	ch->nfds++;
	return 0;
}

/* The caller owns the returned descriptor. */
static int
fifo_pop(struct ipc_chan *ch)
{
	int fd = ch->fds[ch->fdhead].fd;

	ch->fdhead = (ch->fdhead + 1) % IPC_MAX_FDS_QUEUED;
	ch->nfds--;
	return fd;
}

static void
fifo_close_all(struct ipc_chan *ch)
{
	while (ch->nfds > 0)
		close(fifo_pop(ch));
}

/*
 * Decide whether the frame starting at stream offset start owns the oldest
 * queued descriptor.  Returns 0 with *has_fd set, or -1 with *err.
 */
static int
fifo_claim(struct ipc_chan *ch, int wants, uint64_t start, int *has_fd, const char **err)
{
	const struct chan_fd *f = ch->nfds > 0 ? &ch->fds[ch->fdhead] : NULL;

	*has_fd = 0;
	if (f != NULL && f->end <= start) {
		*err = "descriptor left over from an earlier frame";
		return -1;
	}
	if (wants && f != NULL && f->begin <= start)
		*has_fd = 1;
	return 0;
}

/* ---- output queue ---------------------------------------------------- */

static void
outq_push(struct ipc_chan *ch, struct chan_out *o)
{
	o->next = NULL;
	*ch->outq_tail = o;
	ch->outq_tail = &o->next;
	ch->pending += o->len - o->off;
}

/* Unlink and free the head of the queue (closing its descriptor, if any). */
static void
outq_pop(struct ipc_chan *ch)
{
	struct chan_out *o = ch->outq;

	if ((ch->outq = o->next) == NULL)
		ch->outq_tail = &ch->outq;
	ch->pending -= o->len - o->off;
	if (o->fd >= 0)
		close(o->fd);
	explicit_bzero(o->data, o->len); /* a reply may carry a secret (a new API token) */
	free(o);
}

static void
outq_clear(struct ipc_chan *ch)
{
	while (ch->outq != NULL)
		outq_pop(ch);
}

/* Account for w bytes written from the head of the queue. */
static void
outq_advance(struct ipc_chan *ch, size_t w)
{
	struct chan_out *o;

	while (w > 0 && (o = ch->outq) != NULL) {
		size_t take;

		if (o->fd >= 0) {
			close(o->fd);
			o->fd = -1;
		}
		take = o->len - o->off < w ? o->len - o->off : w;
		o->off += take;
		ch->pending -= take;
		w -= take;
		if (o->off == o->len)
			outq_pop(ch);
	}
}

/*
 * Gather the head of the queue into iov.  A frame with a descriptor is only
 * ever first (so its first byte starts the sendmsg() the descriptor rides
 * on), and gathering stops before the next one.  Returns the iov count and
 * sets *fd to the descriptor to attach, or -1.
 */
static int
outq_gather(struct ipc_chan *ch, struct iovec *iov, int *fd)
{
	struct chan_out *o = ch->outq;
	int n = 0;

	*fd = o->fd;
	for (; o != NULL && n < CHAN_IOV_MAX; o = o->next) {
		if (n > 0 && o->fd >= 0)
			break;
		iov[n].iov_base = o->data + o->off;
		iov[n].iov_len = o->len - o->off;
		n++;
	}
	return n;
}

/* ---- failure and teardown ------------------------------------------- */

static void
chan_destroy(struct ipc_chan *ch)
{
	if (ch->rev != NULL)
		event_free(ch->rev);
	if (ch->wev != NULL)
		event_free(ch->wev);
	fifo_close_all(ch);
	outq_clear(ch);
	if (ch->fd >= 0)
		close(ch->fd);
	if (ch->in != NULL)
		explicit_bzero(ch->in, ch->inalloc);
	free(ch->in);
	free(ch);
}

/*
 * Disable the channel, release what it holds, and tell the owner once.  The
 * callback may free the channel: callers return right after (every caller
 * runs inside an event callback that holds ch->busy, so the memory survives
 * until that callback unwinds).
 */
static void
chan_fail(struct ipc_chan *ch, const char *reason)
{
	if (ch->failed || ch->dead)
		return;
	ch->failed = 1;
	event_del(ch->rev);
	event_del(ch->wev);
	fifo_close_all(ch);
	outq_clear(ch);
	ch->on_err(ch, reason, ch->arg);
}

static void
chan_failf(struct ipc_chan *ch, const char *what, const char *detail)
{
	snprintf(ch->errbuf, sizeof(ch->errbuf), "%s: %s", what, detail);
	chan_fail(ch, ch->errbuf);
}

static void
chan_fail_type(struct ipc_chan *ch, uint32_t type, const char *detail)
{
	snprintf(ch->errbuf, sizeof(ch->errbuf), "message type %u (%s) from %s: %s", type,
	    ipc_msg_name(type), ipc_role_name(ch->peer), detail);
	chan_fail(ch, ch->errbuf);
}

/* ---- reading --------------------------------------------------------- */

/* Make room for a buffered frame of total size need (<= 4 + max_frame). */
static int
chan_reserve(struct ipc_chan *ch, size_t need)
{
	size_t nalloc;
	uint8_t *p;

	if (need <= ch->inalloc)
		return 0;
	nalloc = ch->inalloc * 2 > need ? ch->inalloc * 2 : need;
	if (nalloc > 4 + ch->max_frame)
		nalloc = 4 + ch->max_frame;
	/* Not realloc: the old buffer may hold a secret (a repository token on
	 * the control socket) and must be wiped before it is freed. */
	if ((p = malloc(nalloc)) == NULL)
		return -1;
	if (ch->in != NULL) {
		memcpy(p, ch->in, ch->inlen);
		explicit_bzero(ch->in, ch->inalloc);
		free(ch->in);
	}
	ch->in = p;
	ch->inalloc = nalloc;
	return 0;
}

/* One recvmsg().  Returns 1 when bytes arrived, 0 to wait, -1 on failure. */
static int
chan_recv(struct ipc_chan *ch)
{
	union chan_cmsg cm;
	struct msghdr msg;
	struct iovec iov;
	struct fd_ctx x;
	const char *bad;
	ssize_t n;

	iov.iov_base = ch->in + ch->inlen;
	iov.iov_len = ch->inalloc - ch->inlen;
	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = cm.buf;
	msg.msg_controllen = sizeof(cm.buf);
	if ((n = recvmsg(ch->fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT)) == -1) {
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
			return 0;
		if (errno == ECONNRESET)
			chan_fail(ch, "closed");
		else
			chan_failf(ch, "read", strerror(errno));
		return -1;
	}
	x.ch = ch;
	x.begin = ch->rx;
	ch->rx += (size_t)n;
	x.end = ch->rx;
	ch->inlen += (size_t)n;
	if ((bad = ipc_take_fds(&msg, fifo_add, &x)) != NULL) {
		chan_fail(ch, bad);
		return -1;
	}
	if (n == 0) {
		chan_fail(ch, "closed");
		return -1;
	}
	return 1;
}

/* Check, deliver and free one frame whose length prefix starts at start. */
static void
chan_frame(struct ipc_chan *ch, const uint8_t *p, size_t len, uint64_t start)
{
	const struct ipc_msg_info *mi;
	struct ipc_msg m;
	const char *err;
	int has_fd;

	if (ipc_frame_decode(p, len, &m, &err) == -1) {
		chan_failf(ch, "malformed frame", err);
		return;
	}
	mi = ipc_msg_lookup(m.type);
	if (fifo_claim(ch, mi != NULL && (mi->flags & IPC_F_FD), start, &has_fd, &err) == -1 ||
	    ipc_msg_check(&m, ch->peer, ch->self, has_fd, &err) == -1) {
		chan_fail_type(ch, m.type, err);
		ipc_msg_free(&m);
		return;
	}
	if (has_fd)
		m.fd = fifo_pop(ch);
	if (!ipc_proto_ok(&m))
		chan_fail_type(ch, m.type, "protocol version mismatch");
	else
		ch->on_msg(ch, &m, ch->arg);
	ipc_msg_free(&m);
}

/*
 * Deliver every whole frame in the input buffer, then keep the partial one
 * at its start with room for all of it.  A length prefix is checked as soon
 * as its 4 bytes are in, before any of its payload is waited for.
 */
static void
chan_parse(struct ipc_chan *ch)
{
	size_t pos = 0, flen = 0;

	while (ch->inlen - pos >= 4) {
		uint32_t len = be32_get(ch->in + pos);

		if (len == 0 || len > ch->max_frame) {
			chan_fail(ch, len == 0 ? "empty frame" : "frame too large");
			return;
		}
		flen = 4 + (size_t)len;
		if (ch->inlen - pos < flen)
			break;
		chan_frame(ch, ch->in + pos + 4, len, ch->rx - ch->inlen + pos);
		if (ch->failed || ch->dead)
			return;
		pos += flen;
		flen = 0;
	}
	memmove(ch->in, ch->in + pos, ch->inlen - pos);
	ch->inlen -= pos;
	/* Frames handled are wiped: what a peer sent (a token on the control
	 * socket) stays in memory no longer than its handling. */
	if (pos > 0)
		explicit_bzero(ch->in + ch->inlen, pos);
	if (flen > 0 && chan_reserve(ch, flen) == -1)
		chan_fail(ch, "out of memory");
}

/* One read and the frames it completed (the read event: a peer that
 * floods is read a buffer at a time between the loop's other events), or
 * every read until the socket is empty (ipc_chan_drain). */
static void
chan_read(struct ipc_chan *ch, int all)
{
	if (ch->busy) /* re-entered from a loop run inside a callback */
		return;
	ch->busy = 1;
	while (chan_recv(ch) == 1) {
		chan_parse(ch);
		if (!all || ch->failed || ch->dead)
			break;
	}
	ch->busy = 0;
	if (ch->dead)
		chan_destroy(ch);
}

static void
chan_read_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	chan_read(arg, 0);
}

void
ipc_chan_drain(struct ipc_chan *ch)
{
	if (ch != NULL && !ch->failed && !ch->dead)
		chan_read(ch, 1);
}

/* ---- writing --------------------------------------------------------- */

static void
chan_write(struct ipc_chan *ch)
{
	struct iovec iov[CHAN_IOV_MAX];

	while (ch->outq != NULL) {
		ssize_t w;
		int n, fd;

		n = outq_gather(ch, iov, &fd);
		if ((w = ipc_sendv(ch->fd, iov, n, fd)) == -1) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				return;
			if (errno == EPIPE || errno == ECONNRESET)
				chan_fail(ch, "closed");
			else
				chan_failf(ch, "write", strerror(errno));
			return;
		}
		outq_advance(ch, (size_t)w);
	}
	event_del(ch->wev);
}

static void
chan_write_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ipc_chan *ch = arg;

	(void)fd;
	(void)what;
	if (ch->busy)
		return;
	ch->busy = 1;
	chan_write(ch);
	ch->busy = 0;
	if (ch->dead)
		chan_destroy(ch);
}

/* ---- public ---------------------------------------------------------- */

static int
chan_setup(struct ipc_chan *ch, struct event_base *base)
{
	int fl;

	if ((fl = fcntl(ch->fd, F_GETFL)) == -1 || fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK) == -1)
		return -1;
	ch->inalloc = 4 + ch->max_frame < CHAN_INBUF_INIT ? 4 + ch->max_frame : CHAN_INBUF_INIT;
	if ((ch->in = malloc(ch->inalloc)) == NULL)
		return -1;
	ch->rev = event_new(base, ch->fd, EV_READ | EV_PERSIST, chan_read_cb, ch);
	ch->wev = event_new(base, ch->fd, EV_WRITE | EV_PERSIST, chan_write_cb, ch);
	if (ch->rev == NULL || ch->wev == NULL || event_add(ch->rev, NULL) == -1)
		return -1;
	return 0;
}

/* The caller frees the channel with ipc_chan_free(). */
struct ipc_chan *
ipc_chan_new(struct event_base *base, int fd, enum ipc_role self, enum ipc_role peer,
    size_t max_frame, ipc_msg_cb on_msg, ipc_err_cb on_err, void *arg)
{
	struct ipc_chan *ch;

	if (max_frame == 0)
		max_frame = IPC_MAX_FRAME_DEFAULT;
	if (max_frame < IPC_MAX_FRAME_MIN || max_frame > UINT32_MAX ||
	    (unsigned)self >= ROLE__COUNT || (unsigned)peer >= ROLE__COUNT || on_msg == NULL ||
	    on_err == NULL || fd < 0) {
		errno = EINVAL;
		return NULL;
	}
	if ((ch = calloc(1, sizeof(*ch))) == NULL)
		return NULL;
	ch->fd = fd;
	ch->self = self;
	ch->peer = peer;
	ch->max_frame = max_frame;
	ch->on_msg = on_msg;
	ch->on_err = on_err;
	ch->arg = arg;
	ch->outq_tail = &ch->outq;
	if (chan_setup(ch, base) == -1) {
		ch->fd = -1; /* still the caller's */
		chan_destroy(ch);
		return NULL;
	}
	return ch;
}

/* Safe from inside the channel's own callbacks: the free is then deferred
 * until the callback unwinds, and no further callback is made. */
void
ipc_chan_free(struct ipc_chan *ch)
{
	if (ch == NULL)
		return;
	if (ch->busy) {
		ch->dead = 1;
		event_del(ch->rev);
		event_del(ch->wev);
		return;
	}
	chan_destroy(ch);
}

enum ipc_role
ipc_chan_peer(const struct ipc_chan *ch)
{
	return ch->peer;
}

int
ipc_chan_fd(const struct ipc_chan *ch)
{
	return ch->fd;
}

size_t
ipc_chan_max_frame(const struct ipc_chan *ch)
{
	return ch->max_frame;
}

size_t
ipc_chan_pending(const struct ipc_chan *ch)
{
	return ch->pending;
}

/*
 * An outgoing frame passes the same checks the peer will apply (decoding,
 * catalog, body validator), so a bug here is caught at the sender.
 */
static int
chan_out_check(const struct ipc_chan *ch, const struct ipc_wbuf *w, int fd, const char **err)
{
	struct ipc_msg m;
	int rc;

	if (!wbuf_finished(w)) {
		*err = "frame not finished";
		return -1;
	}
	if (w->sb.size - 4 > ch->max_frame) {
		*err = "frame larger than the channel's limit";
		return -1;
	}
	if (ipc_frame_decode((const uint8_t *)w->sb.data + 4, w->sb.size - 4, &m, err) == -1)
		return -1;
	rc = ipc_msg_check(&m, ch->self, ch->peer, fd >= 0, err);
	if (rc == -1)
		log_warnx("ipc: not sending %s to %s: %s", ipc_msg_name(m.type),
		    ipc_role_name(ch->peer), *err);
	ipc_msg_free(&m);
	return rc;
}

/* The queued copy (and the dup of fd) belong to the channel. */
int
ipc_chan_send(struct ipc_chan *ch, struct ipc_wbuf *w, int fd)
{
	struct chan_out *o;
	const char *err;

	if (ch->failed || ch->dead || chan_out_check(ch, w, fd, &err) == -1)
		return -1;
	if ((o = malloc(sizeof(*o) + w->sb.size)) == NULL)
		return -1;
	o->fd = -1;
	if (fd >= 0 && (o->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) == -1) {
		free(o);
		return -1;
	}
	if (event_add(ch->wev, NULL) == -1) {
		if (o->fd >= 0)
			close(o->fd);
		free(o);
		return -1;
	}
	memcpy(o->data, w->sb.data, w->sb.size);
	o->len = w->sb.size;
	o->off = 0;
	outq_push(ch, o);
	return 0;
}

/* ---- blocking helpers ------------------------------------------------ */

/* Wait for events on sock until deadline_ms (CLOCK_MONOTONIC, < 0 = none). */
static int
ipc_wait(int sock, short events, int64_t deadline_ms)
{
	struct pollfd pfd = { .fd = sock, .events = events };
	struct timespec ts;
	int64_t left = -1;
	int rc;

	if (deadline_ms >= 0) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		left = deadline_ms - ((int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
		if (left < 0)
			left = 0;
		if (left > INT32_MAX)
			left = INT32_MAX;
	}
	while ((rc = poll(&pfd, 1, (int)left)) == -1 && errno == EINTR)
		;
	if (rc == 0)
		errno = ETIMEDOUT;
	return rc > 0 ? 0 : -1;
}

int
ipc_write_frame(int sock, const struct ipc_wbuf *w, int fd)
{
	struct iovec iov;
	size_t off = 0;

	if (!wbuf_finished(w)) {
		errno = EINVAL;
		return -1;
	}
	while (off < w->sb.size) {
		ssize_t n;

		iov.iov_base = w->sb.data + off;
		iov.iov_len = w->sb.size - off;
		if ((n = ipc_sendv(sock, &iov, 1, fd)) == -1) {
			if (errno == EINTR)
				continue;
			if ((errno == EAGAIN || errno == EWOULDBLOCK) &&
			    ipc_wait(sock, POLLOUT, -1) == 0)
				continue;
			return -1;
		}
		fd = -1; /* sent with the first byte */
		off += (size_t)n;
	}
	return 0;
}

/* Descriptors received while reading one frame: an honest peer sends one. */
struct rd {
	int sock;
	int64_t deadline_ms;
	int fds[2];
	unsigned nfds;
};

static int
rd_add(void *arg, int fd)
{
	struct rd *r = arg;

	if (r->nfds == sizeof(r->fds) / sizeof(r->fds[0]))
		return -1;
	r->fds[r->nfds++] = fd;
	return 0;
}

/* One recvmsg() into buf[0..len) after waiting for input.  Returns the byte
 * count (0 at EOF), or -1 with *err set, or -2 to try again. */
static ssize_t
rd_recv(struct rd *r, uint8_t *buf, size_t len, const char **err)
{
	union chan_cmsg cm;
	struct msghdr msg;
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	ssize_t n;

	if (ipc_wait(r->sock, POLLIN, r->deadline_ms) == -1) {
		*err = errno == ETIMEDOUT ? "timeout" : "poll failed";
		return -1;
	}
	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = cm.buf;
	msg.msg_controllen = sizeof(cm.buf);
	n = recvmsg(r->sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (n == -1 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
		return -2;
	if (n == -1) {
		*err = errno == ECONNRESET ? "closed" : "read error";
		return -1;
	}
	if ((*err = ipc_take_fds(&msg, rd_add, r)) != NULL)
		return -1;
	return n;
}

static int
rd_exact(struct rd *r, uint8_t *buf, size_t len, const char **err)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = rd_recv(r, buf + got, len - got, err);

		if (n == -2)
			continue;
		if (n == -1)
			return -1;
		if (n == 0) {
			*err = "closed";
			return -1;
		}
		got += (size_t)n;
	}
	return 0;
}

static int64_t
rd_deadline(int timeout_ms)
{
	struct timespec ts;

	if (timeout_ms < 0)
		return -1;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + timeout_ms;
}

/* Read the payload of one frame into *payload (freed by the caller). */
static int
rd_payload(struct rd *r, size_t max_frame, uint8_t **payload, size_t *len, const char **err)
{
	uint8_t hdr[4];

	if (rd_exact(r, hdr, sizeof(hdr), err) == -1)
		return -1;
	*len = be32_get(hdr);
	if (*len == 0 || *len > max_frame) {
		*err = *len == 0 ? "empty frame" : "frame too large";
		return -1;
	}
	if ((*payload = malloc(*len)) == NULL) {
		*err = "out of memory";
		return -1;
	}
	if (rd_exact(r, *payload, *len, err) == -1)
		return -1;
	if (r->nfds > 1) {
		*err = "more than one descriptor with a frame";
		return -1;
	}
	return 0;
}

/* On success the caller owns *m (and m->fd) and frees it with ipc_msg_free(). */
int
ipc_read_frame(int sock, enum ipc_role self, enum ipc_role peer, size_t max_frame,
    int timeout_ms, struct ipc_msg *m, const char **err)
{
	struct rd r = { .sock = sock, .deadline_ms = rd_deadline(timeout_ms) };
	uint8_t *payload = NULL;
	size_t len;
	int rc = -1;

	memset(m, 0, sizeof(*m));
	m->fd = -1;
	if (max_frame == 0)
		max_frame = IPC_MAX_FRAME_DEFAULT;
	if (rd_payload(&r, max_frame, &payload, &len, err) == 0 &&
	    ipc_frame_decode(payload, len, m, err) == 0) {
		if (ipc_msg_check(m, peer, self, r.nfds == 1, err) == -1)
			ipc_msg_free(m);
		else if (!ipc_proto_ok(m)) {
			*err = "protocol version mismatch";
			ipc_msg_free(m);
		} else {
			if (r.nfds == 1)
				m->fd = r.fds[--r.nfds];
			rc = 0;
		}
	}
	free(payload);
	while (r.nfds > 0)
		close(r.fds[--r.nfds]);
	return rc;
}
