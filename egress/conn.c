/*
 * One connection from a sandbox, from its first byte to its close, in the
 * order DESIGN.md section 4.1 gives (egress.h):
 *
 *   HEAD     the request head is read and judged (head.c); a CONNECT may
 *            send nothing after it before the tunnel is set up
 *   RESOLVE  the host was on the run's list for its port (policy.c), and
 *            only now it is resolved; every address must pass addr.c
 *   HELLO    CONNECT to 443: answered 200, the ClientHello is read (and
 *            held) until its server name is known and equal to the host
 *   CONNECT  connecting to exactly an address checked: the first, and when
 *            that fails (refused, unreachable, no answer in connect_timeout)
 *            the next, in the resolver's order, never resolving again
 *   RELAY    bytes both ways; plain HTTP gets the head egress_head_upstream
 *            writes, then the body up to its Content-Length, nothing after.
 *            A CONNECT tunnel is spliced once what the bufferevents held
 *            (the 200, a ClientHello) is through: each direction moves
 *            socket -> pipe -> socket with splice(2), never through this
 *            process's memory, in as few calls as the pipe allows.  Plain
 *            HTTP splices its answer the same way (nothing in it is judged)
 *            while the request's side stays on the bufferevents, which
 *            judge its body and refuse what follows it
 *   CLOSING  an answer is being flushed before the close
 *
 * Nothing is freed from inside a callback of evdns or of a connect that
 * failed at once: a refusal writes its answer and the close follows from
 * the event loop (conn_deny), so no caller touches a freed connection.
 */
#include <sys/socket.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>

#include <errno.h>
#include <stdarg.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/util.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "egress/egress.h"
#include "egress/head.h"
#include "egress/hello.h"

enum { CS_HEAD, CS_RESOLVE, CS_HELLO, CS_CONNECT, CS_RELAY, CS_CLOSING };

#define CONN_WHY_MAX 200
#define CONN_ADDR_MAX (INET6_ADDRSTRLEN + 8) /* "[v6]:65535" */
#define CONN_FEED_CHUNK 4096
#define CONN_ADDRS_MAX 8 /* checked addresses tried in turn, at most */
#define CONN_PIPE_SZ (1024 * 1024) /* a spliced direction's pipe, asked for; the
                                      kernel may give less (pipe-max-size, the
                                      user's pipe pages) */
#define CONN_BEV_IO (256 * 1024)   /* a bufferevent's largest read and write */
#define SPL_FILLS_MAX 8            /* splices into a pipe per wakeup, at most */
/* The sandbox's side of every tunnel is a loopback connection inside the
 * sandbox's own network namespace: no link, no loss, no queue to share.
 * A namespace starts with the host's default congestion control, and a
 * pacing one there (BBR: the kernel's internal pacing when the qdisc is
 * not fq) holds each segment for an hrtimer and sends it from softirq on
 * whichever CPU the timer fires, so the segments of one connection leave
 * from two CPUs, arrive out of order and are retransmitted: at loopback
 * speeds that is most of what a spliced tunnel costs, in egress and in the
 * sandbox's own receiving process.  Reno is built into every kernel and
 * allowed without privilege (net.ipv4.tcp_allowed_congestion_control) and
 * never paces.  The target's side keeps the host's choice: it is the real
 * network. */
#define CONN_SANDBOX_CC "reno"

struct econn;

/* One direction of a spliced tunnel: from -> pipe -> to. */
struct espl {
	struct econn *c;
	int from, to;      /* the tunnel's sockets, owned by the econn */
	int p[2];          /* the pipe: -1 until the direction's first byte */
	size_t inpipe, cap;
	int eof, shut;     /* from's end was read; to was half-closed after it */
	struct event *rd, *wr;
	uint64_t *count;   /* the econn's nup or ndown */
	uint64_t *st_count; /* its run's st_up or st_down */
};

struct econn {
	TAILQ_ENTRY(econn) entry;
	struct erun *r;
	int state;
	struct bufferevent *cli, *up;
	struct egress_head *head;   /* until the tunnel is up; plain HTTP: to the end */
	struct egress_hello *hello; /* CONNECT to 443, until the name is read */
	size_t hello_fed;           /* client bytes held and fed to it */
	struct evdns_getaddrinfo_request *dns;
	struct event *timer;        /* head, hello, resolve + connect, then idle */
	struct sockaddr_storage *ss; /* the checked addresses, port set, until connected */
	socklen_t *sslen;
	size_t nss, iss;            /* how many; the one tried now */
	struct egress_host target;  /* the request's host, normalised */
	char host[EGRESS_HOST_MAX + 1];
	unsigned port;
	size_t prefed;              /* plain HTTP: body bytes at the input's start the
	                               parser saw with the head */
	enum egress_form form;
	char addr[CONN_ADDR_MAX];
	char why[CONN_WHY_MAX];
	int allowed;                /* network.allowed sent: network.closed follows */
	int open;                   /* counted as an open tunnel by the supervisor */
	int cli_eof, up_eof, cli_shut, up_shut;
	uint64_t nup, ndown;        /* bytes to the target, bytes to the sandbox */
	struct espl *spl;           /* spliced directions: [0] sandbox to target, [1]
	                               back.  A CONNECT tunnel: both, cli and up are
	                               NULL; plain HTTP: [1] only (its [0].rd is NULL),
	                               cli and up still own the sockets and write
	                               the request's side */
	int cfd, ufd;               /* a CONNECT tunnel's sockets, closed with it */
	struct timespec t0;
	uint64_t last;              /* the last byte relayed (mono_ms) */
};

static void conn_free(struct econn *c);
static void conn_relay(struct econn *c, struct bufferevent *from);
static void spl_stop(struct econn *c);
static void conn_try_splice(struct econn *c);
static void conn_try_splice_answer(struct econn *c);
static void conn_connect_failed(struct econn *c, int status);

static void
conn_arm_ms(struct econn *c, uint64_t ms)
{
	struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };

	evtimer_add(c->timer, &tv);
}

static void
conn_arm(struct econn *c, unsigned secs)
{
	conn_arm_ms(c, (uint64_t)secs * 1000);
}

static const char *
conn_reason_phrase(int status)
{
	switch (status) {
	case 400: return "Bad Request";
	case 403: return "Forbidden";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 429: return "Too Many Requests";
	case 431: return "Request Header Fields Too Large";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	case 504: return "Gateway Timeout";
	case 505: return "HTTP Version Not Supported";
	default: return "Error";
	}
}

/*
 * Refuse: report network.denied with why, answer status (0: no answer, the
 * tunnel's 200 went out already) and close once it is flushed.  The close
 * always comes from the event loop, never from here.
 */
static void
conn_deny(struct econn *c, int status, const char *why)
{
	struct evbuffer *out;

	if (c->state == CS_CLOSING)
		return;
	egress_event(c->r, IPC_EGRESS_EV_DENIED, c->host, c->port, "", why, 0, 0, 0);
	log_debug("run %s: denied %s:%u: %s", c->r->run, c->host, c->port, why);
	c->state = CS_CLOSING;
	if (c->spl != NULL) {
		/* a spliced tunnel: nothing to answer, its bytes stop now */
		spl_stop(c);
		conn_arm(c, 0);
		return;
	}
	if (c->dns != NULL) {
		evdns_getaddrinfo_cancel(c->dns);
		c->dns = NULL;
	}
	if (c->up != NULL) {
		bufferevent_free(c->up);
		c->up = NULL;
	}
	bufferevent_disable(c->cli, EV_READ);
	out = bufferevent_get_output(c->cli);
	if (status != 0)
		evbuffer_add_printf(out,
		    "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
		    "Connection: close\r\n\r\negress: %s\n",
		    status, conn_reason_phrase(status), strlen(why) + 9, why);
	bufferevent_setwatermark(c->cli, EV_WRITE, 0, 0);
	if (status != 0)
		bufferevent_enable(c->cli, EV_WRITE);
	/* a second at most to flush the answer; at once when there is none */
	conn_arm(c, status != 0 ? 1 : 0);
}

/* A refusal whose reason is built (c->why holds it until the close). */
__attribute__((format(printf, 3, 4))) static void
conn_denyf(struct econn *c, int status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->why, sizeof(c->why), fmt, ap);
	va_end(ap);
	conn_deny(c, status, c->why);
}

static uint64_t
conn_ms(const struct econn *c)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)(now.tv_sec - c->t0.tv_sec) * 1000 +
	       (uint64_t)((now.tv_nsec - c->t0.tv_nsec) / 1000000);
}

static void
conn_free(struct econn *c)
{
	struct erun *r = c->r;

	if (c->allowed)
		egress_event(r, IPC_EGRESS_EV_CLOSED, c->host, c->port, c->addr, "", c->nup,
		    c->ndown, conn_ms(c));
	else if (c->open)
		egress_event(r, IPC_EGRESS_EV_DOWN, c->host, c->port, c->addr, "", 0, 0, 0);
	if (c->dns != NULL)
		evdns_getaddrinfo_cancel(c->dns); /* its callback sees the cancel only */
	if (c->spl != NULL) {
		spl_stop(c);
		for (int i = 0; i < 2; i++) {
			if (c->spl[i].rd == NULL)
				continue;
			event_free(c->spl[i].rd);
			event_free(c->spl[i].wr);
			if (c->spl[i].p[0] != -1) {
				close(c->spl[i].p[0]);
				close(c->spl[i].p[1]);
			}
		}
		free(c->spl);
		if (c->cli == NULL) {
			close(c->cfd);
			close(c->ufd);
		}
	}
	if (c->up != NULL)
		bufferevent_free(c->up);
	if (c->cli != NULL)
		bufferevent_free(c->cli);
	event_free(c->timer);
	free(c->head);
	free(c->hello);
	free(c->ss);
	free(c->sslen);
	TAILQ_REMOVE(&r->conns, c, entry);
	r->tunnels--;
	free(c);
}

/* Both directions done once each side's end was seen and what it sent was
 * flushed to the other: half-close each side after its last byte.
 * Returns 1 when c was freed. */
static int
conn_maybe_done(struct econn *c)
{
	if (c->up_eof && !c->cli_shut && evbuffer_get_length(bufferevent_get_output(c->cli)) == 0) {
		shutdown(bufferevent_getfd(c->cli), SHUT_WR);
		c->cli_shut = 1;
	}
	if (c->cli_eof && !c->up_shut && evbuffer_get_length(bufferevent_get_output(c->up)) == 0) {
		shutdown(bufferevent_getfd(c->up), SHUT_WR);
		c->up_shut = 1;
	}
	if (c->cli_shut && c->up_shut) {
		conn_free(c);
		return 1;
	}
	return 0;
}

/* ---- relaying ------------------------------------------------------------ */

/* Plain HTTP: the client's bytes after the head are its body, judged by the
 * head parser (Content-Length, nothing after).  Returns 0, or -1 (denied). */
static int
conn_body_check(struct econn *c, struct evbuffer *in)
{
	unsigned char buf[CONN_FEED_CHUNK];
	struct evbuffer_ptr pos;
	size_t len = evbuffer_get_length(in), off = c->prefed, n;

	c->prefed = 0;
	while (off < len) {
		n = len - off < sizeof(buf) ? len - off : sizeof(buf);
		evbuffer_ptr_set(in, &pos, off, EVBUFFER_PTR_SET);
		if (evbuffer_copyout_from(in, &pos, buf, n) != (ev_ssize_t)n ||
		    egress_head_feed(c->head, buf, n, NULL) != EGRESS_HEAD_DONE) {
			conn_deny(c, 0, c->head->why != NULL ? c->head->why : "a bad body");
			return -1;
		}
		off += n;
	}
	return 0;
}

static void
conn_relay(struct econn *c, struct bufferevent *from)
{
	struct bufferevent *to = from == c->cli ? c->up : c->cli;
	struct evbuffer *in = bufferevent_get_input(from), *out = bufferevent_get_output(to);
	size_t n = evbuffer_get_length(in);

	if (n == 0)
		return;
	if (from == c->cli && c->form == EGRESS_FORM_HTTP && conn_body_check(c, in) == -1)
		return;
	if (c->r->bytes + n > eg.bytes) {
		conn_deny(c, 0, "the run's byte limit (egress.bytes_per_run) is spent");
		return;
	}
	c->r->bytes += n;
	if (from == c->cli) {
		c->nup += n;
		c->r->st_up += n;
	} else {
		c->ndown += n;
		c->r->st_down += n;
	}
	c->last = mono_ms();
	evbuffer_add_buffer(out, in);
	if (evbuffer_get_length(out) >= EGRESS_BUF_MAX) {
		/* the other side is slower: stop reading until it caught up */
		bufferevent_disable(from, EV_READ);
		bufferevent_setwatermark(to, EV_WRITE, EGRESS_BUF_MAX / 2, 0);
	}
}

static void
conn_write_cb(struct bufferevent *bev, void *arg)
{
	struct econn *c = arg;
	struct bufferevent *other = bev == c->cli ? c->up : c->cli;

	if (c->state == CS_CLOSING) {
		if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
			conn_free(c);
		return;
	}
	if (c->state != CS_RELAY)
		return;
	if (conn_maybe_done(c))
		return;
	/* caught up: read the other side again (a spliced answer's side is
	 * read by its splice) */
	if (!(other == c->cli ? c->cli_eof : c->up_eof) && !(other == c->up && c->spl != NULL))
		bufferevent_enable(other, EV_READ);
	bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
	conn_try_splice(c);
	conn_try_splice_answer(c);
}

static void
conn_relay_event(struct econn *c, struct bufferevent *bev, short what)
{
	if (what & BEV_EVENT_EOF) {
		conn_relay(c, bev);
		if (c->state != CS_RELAY)
			return;
		if (bev == c->cli)
			c->cli_eof = 1;
		else
			c->up_eof = 1;
		conn_maybe_done(c);
		return;
	}
	/* an error on either side ends both: the sandbox sees a broken tunnel */
	conn_free(c);
}

/* ---- splicing a CONNECT tunnel ----------------------------------------------- */

/* Every event of a spliced tunnel off (it is being closed). */
static void
spl_stop(struct econn *c)
{
	for (int i = 0; i < 2; i++) {
		if (c->spl[i].rd == NULL)
			continue;
		event_del(c->spl[i].rd);
		event_del(c->spl[i].wr);
	}
}

/* A direction was half-closed after its last byte: a tunnel is done once
 * both were; plain HTTP's answer is, and its request's side ends as the
 * bufferevents' do.  Returns 1 when c was freed. */
static int
spl_done(struct econn *c)
{
	if (c->cli != NULL) {
		c->up_eof = c->cli_shut = 1;
		return conn_maybe_done(c);
	}
	if (c->spl[0].shut && c->spl[1].shut) {
		conn_free(c);
		return 1;
	}
	return 0;
}

/*
 * What the pipe holds, to d->to; then reading d->from again while the pipe
 * has room, waiting for d->to while it holds bytes, and the half-close once
 * from's end is through.  Returns -1 when the connection was freed.
 */
static int
spl_flush(struct espl *d)
{
	ssize_t n;

	while (d->inpipe > 0) {
		n = splice(d->p[0], NULL, d->to, NULL, d->inpipe, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (n > 0) {
			d->inpipe -= (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		/* the other side is gone: the sandbox sees a broken tunnel */
		conn_free(d->c);
		return -1;
	}
	if (d->inpipe > 0)
		event_add(d->wr, NULL);
	else
		event_del(d->wr);
	if (!d->eof && d->inpipe < d->cap)
		event_add(d->rd, NULL);
	else
		event_del(d->rd);
	if (d->eof && d->inpipe == 0 && !d->shut) {
		shutdown(d->to, SHUT_WR);
		d->shut = 1;
		if (spl_done(d->c))
			return -1;
	}
	return 0;
}

/* The direction's pipe, made with its first byte (an idle tunnel holds
 * none).  Returns 0, or -1 (out of descriptors). */
static int
spl_pipe(struct espl *d)
{
	int sz;

	if (pipe2(d->p, O_CLOEXEC | O_NONBLOCK) == -1)
		return -1;
	(void)fcntl(d->p[1], F_SETPIPE_SZ, CONN_PIPE_SZ); /* less is fine */
	if ((sz = fcntl(d->p[1], F_GETPIPE_SZ)) <= 0) {
		close(d->p[0]);
		close(d->p[1]);
		d->p[0] = d->p[1] = -1;
		return -1;
	}
	d->cap = (size_t)sz;
	return 0;
}

/* d->from is readable: into the pipe, as much as it has room for and the
 * run's byte limit leaves, then on to d->to. */
static void
spl_fill(struct espl *d)
{
	struct econn *c = d->c;
	size_t room;
	uint64_t left, moved = 0;
	ssize_t n;
	int i;

	if (d->p[0] == -1 && spl_pipe(d) == -1) {
		log_warn("run %s: %s:%u: a pipe", c->r->run, c->host, c->port);
		conn_free(c);
		return;
	}
	left = eg.bytes > c->r->bytes ? eg.bytes - c->r->bytes : 0;
	if (left == 0) {
		conn_deny(c, 0, "the run's byte limit (egress.bytes_per_run) is spent");
		return;
	}
	/* what the socket holds, as far as the pipe has room, then one flush:
	 * fewer wakeups of the other side */
	for (i = 0; i < SPL_FILLS_MAX && !d->eof; i++) {
		room = d->cap - d->inpipe;
		if ((uint64_t)room > left - moved)
			room = (size_t)(left - moved);
		if (room == 0)
			break;
		n = splice(d->from, NULL, d->p[1], NULL, room, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n < 0) {
			conn_free(c); /* a reset: both ends go */
			return;
		}
		if (n == 0)
			d->eof = 1;
		d->inpipe += (size_t)n;
		moved += (uint64_t)n;
	}
	if (moved == 0 && !d->eof) {
		if (d->inpipe == d->cap)
			event_del(d->rd);
		return;
	}
	*d->count += moved;
	*d->st_count += moved;
	c->r->bytes += moved;
	c->last = mono_ms();
	(void)spl_flush(d);
}

static void
spl_read_cb(evutil_socket_t fd, short what, void *arg)
{
	spl_fill(arg);
}

static void
spl_write_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)spl_flush(arg);
}

static void
spl_init(struct econn *c, struct espl *d, int from, int to, uint64_t *count, uint64_t *st_count)
{
	d->c = c;
	d->from = from;
	d->to = to;
	d->p[0] = d->p[1] = -1;
	d->count = count;
	d->st_count = st_count;
	d->rd = event_new(eg.c.base, from, EV_READ | EV_PERSIST, spl_read_cb, d);
	d->wr = event_new(eg.c.base, to, EV_WRITE | EV_PERSIST, spl_write_cb, d);
	if (d->rd == NULL || d->wr == NULL)
		fatalx("out of memory for a tunnel");
	event_add(d->rd, NULL);
}

/*
 * A CONNECT tunnel moves to splice(2) once its bufferevents hold nothing
 * (the 200 and the ClientHello went through them) and neither side has
 * ended: their sockets are taken from them and the bufferevents freed.
 * Plain HTTP stays on bufferevents: its body is judged as it passes.
 */
static void
conn_try_splice(struct econn *c)
{
	if (c->form != EGRESS_FORM_CONNECT || c->state != CS_RELAY || c->spl != NULL ||
	    c->cli_eof || c->up_eof || evbuffer_get_length(bufferevent_get_output(c->cli)) > 0 ||
	    evbuffer_get_length(bufferevent_get_output(c->up)) > 0 ||
	    evbuffer_get_length(bufferevent_get_input(c->cli)) > 0 ||
	    evbuffer_get_length(bufferevent_get_input(c->up)) > 0)
		return;
	if ((c->spl = calloc(2, sizeof(*c->spl))) == NULL)
		return; /* stays on its bufferevents */
	c->cfd = bufferevent_getfd(c->cli);
	c->ufd = bufferevent_getfd(c->up);
	/* the bufferevents let go of the sockets without closing them */
	bufferevent_setfd(c->cli, -1);
	bufferevent_setfd(c->up, -1);
	bufferevent_free(c->cli);
	bufferevent_free(c->up);
	c->cli = c->up = NULL;
	spl_init(c, &c->spl[0], c->cfd, c->ufd, &c->nup, &c->r->st_up);
	spl_init(c, &c->spl[1], c->ufd, c->cfd, &c->ndown, &c->r->st_down);
}

/*
 * Plain HTTP: the answer moves to splice(2) once the bufferevents hold none
 * of it (at once, as the connection is made): nothing in it is judged, and
 * through a bufferevent it would cost a read per 4 KiB (libevent 2.1's most
 * at a time).  The upstream's bufferevent stops reading and keeps writing
 * the request's body; the client's keeps reading it (judged, conn_relay).
 */
static void
conn_try_splice_answer(struct econn *c)
{
	if (c->form != EGRESS_FORM_HTTP || c->state != CS_RELAY || c->spl != NULL ||
	    c->up_eof || c->cli_shut || evbuffer_get_length(bufferevent_get_output(c->cli)) > 0 ||
	    evbuffer_get_length(bufferevent_get_input(c->up)) > 0)
		return;
	if ((c->spl = calloc(2, sizeof(*c->spl))) == NULL)
		return; /* stays on its bufferevents */
	bufferevent_disable(c->up, EV_READ);
	spl_init(c, &c->spl[1], bufferevent_getfd(c->up), bufferevent_getfd(c->cli), &c->ndown,
	    &c->r->st_down);
}

/* ---- setting up ------------------------------------------------------------ */

static void conn_cli_read(struct bufferevent *bev, void *arg);

static void
conn_established(struct econn *c)
{
	char buf[EGRESS_UPSTREAM_MAX];
	ssize_t n;

	c->state = CS_RELAY;
	c->last = mono_ms();
	/* a network.closed only for a network.allowed that was reported: one
	 * the rate limit suppressed would leave its close without an opening
	 * (and the supervisor's count of open tunnels off) */
	c->allowed = egress_event(c->r, IPC_EGRESS_EV_ALLOWED, c->host, c->port, c->addr, "",
	    0, 0, 0);
	/* the supervisor counts the open tunnels all the same */
	if (!c->allowed)
		egress_event(c->r, IPC_EGRESS_EV_UP, c->host, c->port, c->addr, "", 0, 0, 0);
	c->open = 1;
	c->r->st_allowed++;
	log_debug("run %s: %s:%u via %s", c->r->run, c->host, c->port, c->addr);
	free(c->ss);
	free(c->sslen);
	c->ss = NULL;
	c->sslen = NULL;
	bufferevent_set_timeouts(c->up, NULL, NULL);
	conn_arm(c, eg.idle_timeout);
	if (c->form == EGRESS_FORM_HTTP) {
		if ((n = egress_head_upstream(c->head, buf, sizeof(buf))) < 0) {
			conn_deny(c, 0, "the request could not be written upstream");
			return;
		}
		/* the head counts as the run's bytes too, as a tunnel's do */
		if (c->r->bytes + (uint64_t)n > eg.bytes) {
			conn_deny(c, 403, "the run's byte limit (egress.bytes_per_run) is spent");
			return;
		}
		bufferevent_write(c->up, buf, (size_t)n);
		c->r->bytes += (uint64_t)n;
		c->nup += (uint64_t)n;
		c->r->st_up += (uint64_t)n;
	} else {
		if (c->hello == NULL)
			evbuffer_add_printf(bufferevent_get_output(c->cli),
			    "HTTP/1.1 200 Connection established\r\n\r\n");
		free(c->head);
		c->head = NULL;
		free(c->hello);
		c->hello = NULL;
	}
	bufferevent_enable(c->up, EV_READ | EV_WRITE);
	bufferevent_enable(c->cli, EV_READ | EV_WRITE);
	conn_relay(c, c->cli); /* what the client sent meanwhile (a ClientHello, a body) */
	conn_try_splice(c);
	conn_try_splice_answer(c);
}

static void
conn_up_read(struct bufferevent *bev, void *arg)
{
	struct econn *c = arg;

	if (c->state == CS_RELAY)
		conn_relay(c, bev);
}

static void
conn_up_event(struct bufferevent *bev, short what, void *arg)
{
	struct econn *c = arg;
	int e = EVUTIL_SOCKET_ERROR();

	if (c->state == CS_CONNECT) {
		if (what & BEV_EVENT_CONNECTED) {
			conn_established(c);
			return;
		}
		if (what & BEV_EVENT_TIMEOUT)
			snprintf(c->why, sizeof(c->why), "%s did not answer in time", c->addr);
		else
			snprintf(c->why, sizeof(c->why), "connect to %s: %s", c->addr, strerror(e));
		conn_connect_failed(c, (what & BEV_EVENT_TIMEOUT) ? 504 : 502);
		return;
	}
	if (c->state == CS_RELAY)
		conn_relay_event(c, bev, what);
}

static void conn_format_addr(const struct sockaddr *sa, unsigned port, char *buf, size_t sz);

/* Connect to exactly the address checked now (c->iss); never by name. */
static void
conn_connect(struct econn *c)
{
	struct timeval tv = { (time_t)eg.connect_timeout, 0 };

	c->state = CS_CONNECT;
	conn_format_addr((struct sockaddr *)&c->ss[c->iss], c->port, c->addr, sizeof(c->addr));
	/* a body or what follows a ClientHello waits; a CONNECT's early bytes
	 * are still read, and refused */
	if (c->form == EGRESS_FORM_HTTP || c->hello != NULL)
		bufferevent_disable(c->cli, EV_READ);
	c->up = bufferevent_socket_new(eg.c.base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (c->up == NULL) {
		conn_deny(c, 502, "out of resources");
		return;
	}
	bufferevent_setcb(c->up, conn_up_read, conn_write_cb, conn_up_event, c);
	bufferevent_set_max_single_read(c->up, CONN_BEV_IO);
	bufferevent_set_max_single_write(c->up, CONN_BEV_IO);
	bufferevent_set_timeouts(c->up, NULL, &tv); /* a connect's timeout is its write's */
	if (bufferevent_socket_connect(c->up, (struct sockaddr *)&c->ss[c->iss],
		(int)c->sslen[c->iss]) == -1) {
		snprintf(c->why, sizeof(c->why), "connect to %s: %s", c->addr, strerror(errno));
		conn_connect_failed(c, 502);
	}
}

/*
 * The connect to c->ss[c->iss] failed (c->why says how): the next checked
 * address, or, after the last, the refusal (status for a CONNECT not yet
 * answered).  The failed bufferevent is freed; this may run inside its own
 * callback, which libevent allows.
 */
static void
conn_connect_failed(struct econn *c, int status)
{
	if (c->iss + 1 < c->nss) {
		log_debug("run %s: %s:%u: %s; trying the next address", c->r->run, c->host, c->port,
		    c->why);
		bufferevent_free(c->up);
		c->up = NULL;
		c->iss++;
		conn_connect(c);
		return;
	}
	if (c->nss > 1) {
		size_t n = strlen(c->why);

		snprintf(c->why + n, sizeof(c->why) - n, " (the last of %zu addresses)", c->nss);
	}
	conn_deny(c, c->hello != NULL ? 0 : status, c->why);
}

static void
conn_format_addr(const struct sockaddr *sa, unsigned port, char *buf, size_t sz)
{
	char t[INET6_ADDRSTRLEN];

	if (sa->sa_family == AF_INET6) {
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, t, sizeof(t));
		snprintf(buf, sz, "[%s]:%u", t, port);
	} else {
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, t, sizeof(t));
		snprintf(buf, sz, "%s:%u", t, port);
	}
}

/* The tunnel to 443 is answered before it is connected: its ClientHello
 * names the server, and a name other than the host is refused before a
 * byte reaches the address. */
static void
conn_start_hello(struct econn *c)
{
	if ((c->hello = calloc(1, sizeof(*c->hello))) == NULL) {
		conn_deny(c, 502, "out of memory");
		return;
	}
	egress_hello_init(c->hello);
	free(c->head);
	c->head = NULL;
	c->state = CS_HELLO;
	evbuffer_add_printf(bufferevent_get_output(c->cli),
	    "HTTP/1.1 200 Connection established\r\n\r\n");
	conn_arm(c, EGRESS_HEAD_TIMEOUT_S);
	bufferevent_enable(c->cli, EV_READ);
}

/* The checked addresses of res (CONN_ADDRS_MAX at most, the resolver's
 * order) into c->ss with the request's port: the only ones connected to.
 * Returns 0, or -1 (none, or out of memory). */
static int
conn_keep_addrs(struct econn *c, const struct evutil_addrinfo *res)
{
	const struct evutil_addrinfo *ai;
	size_t n = 0;

	for (ai = res; ai != NULL; ai = ai->ai_next)
		if (ai->ai_addrlen <= sizeof(struct sockaddr_storage) &&
		    (ai->ai_addr->sa_family == AF_INET || ai->ai_addr->sa_family == AF_INET6))
			n++;
	if (n == 0)
		return -1;
	if (n > CONN_ADDRS_MAX)
		n = CONN_ADDRS_MAX;
	if ((c->ss = calloc(n, sizeof(*c->ss))) == NULL ||
	    (c->sslen = calloc(n, sizeof(*c->sslen))) == NULL)
		return -1;
	for (ai = res; ai != NULL && c->nss < n; ai = ai->ai_next) {
		if (ai->ai_addrlen > sizeof(struct sockaddr_storage) ||
		    (ai->ai_addr->sa_family != AF_INET && ai->ai_addr->sa_family != AF_INET6))
			continue;
		memcpy(&c->ss[c->nss], ai->ai_addr, ai->ai_addrlen);
		c->sslen[c->nss] = (socklen_t)ai->ai_addrlen;
		if (ai->ai_addr->sa_family == AF_INET6)
			((struct sockaddr_in6 *)&c->ss[c->nss])->sin6_port = htons((uint16_t)c->port);
		else
			((struct sockaddr_in *)&c->ss[c->nss])->sin_port = htons((uint16_t)c->port);
		c->nss++;
	}
	return 0;
}

static void
conn_dns_cb(int result, struct evutil_addrinfo *res, void *arg)
{
	struct econn *c = arg;
	struct evutil_addrinfo *ai;
	const char *why;
	char a[CONN_ADDR_MAX];

	if (result == EVUTIL_EAI_CANCEL)
		return; /* c is being freed or refused */
	c->dns = NULL;
	if (result != 0) {
		conn_denyf(c, 502, "the name does not resolve (%s)", evutil_gai_strerror(result));
		return;
	}
	/* every address must pass, not only the one used */
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		if ((why = egress_addr_refusal(ai->ai_addr, ai->ai_addrlen, eg.cidrs,
			 eg.ncidrs)) != NULL) {
			conn_format_addr(ai->ai_addr, c->port, a, sizeof(a));
			conn_denyf(c, 403, "resolves to %s: %s", a, why);
			evutil_freeaddrinfo(res);
			return;
		}
	}
	if (conn_keep_addrs(c, res) == -1) {
		conn_deny(c, 502, res == NULL ? "the name has no address" : "out of memory");
		if (res != NULL)
			evutil_freeaddrinfo(res);
		return;
	}
	evutil_freeaddrinfo(res);
	c->iss = 0;
	conn_format_addr((struct sockaddr *)&c->ss[0], c->port, c->addr, sizeof(c->addr));
	if (c->form == EGRESS_FORM_CONNECT && c->port == EGRESS_PORT_TLS)
		conn_start_hello(c);
	else
		conn_connect(c);
}

/* The head is complete: decide, then resolve (never before the match). */
static void
conn_decide(struct econn *c)
{
	struct evutil_addrinfo hints;
	struct egress_head *h = c->head;

	c->target = h->host;
	memcpy(c->host, h->host.text, sizeof(c->host));
	c->port = h->port;
	c->form = h->form;
	if (egress_policy_match(c->r->rules, c->r->nrules, &h->host, h->port, h->form) == NULL) {
		conn_deny(c, 403, "not on the list");
		return;
	}
	if (c->r->bytes >= eg.bytes) {
		conn_deny(c, 403, "the run's byte limit (egress.bytes_per_run) is spent");
		return;
	}
	c->state = CS_RESOLVE;
	if (c->form == EGRESS_FORM_HTTP)
		bufferevent_disable(c->cli, EV_READ); /* the body waits for the connection */
	conn_arm(c, eg.connect_timeout);
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_protocol = IPPROTO_TCP;
	/* may answer at once (the hosts file), from inside this call */
	c->dns = evdns_getaddrinfo(eg.dns, c->host, NULL, &hints, conn_dns_cb, c);
}

/* HEAD: feed what came; on the end of the head, decide.  A CONNECT may not
 * send more before its tunnel is answered: the parser refuses those bytes
 * (pipelining), here and in RESOLVE and CONNECT. */
static void
conn_read_head(struct econn *c, struct evbuffer *in)
{
	unsigned char buf[CONN_FEED_CHUNK];
	enum egress_head_rc rc;
	size_t n, used;
	ev_ssize_t got;

	while ((n = evbuffer_get_length(in)) > 0) {
		if ((got = evbuffer_copyout(in, buf, sizeof(buf))) <= 0)
			return;
		n = (size_t)got;
		rc = egress_head_feed(c->head, buf, n, &used);
		if (rc == EGRESS_HEAD_REFUSED) {
			conn_deny(c, c->head->status, c->head->why);
			return;
		}
		if (rc == EGRESS_HEAD_MORE) {
			evbuffer_drain(in, n);
			continue;
		}
		evbuffer_drain(in, used);
		c->prefed = n - used; /* plain HTTP only: a CONNECT's were refused */
		conn_decide(c);
		return;
	}
}

/* HELLO: the ClientHello is held in the input buffer (relayed as it came
 * once allowed) and fed to the reader as it grows. */
static void
conn_read_hello(struct econn *c, struct evbuffer *in)
{
	unsigned char buf[CONN_FEED_CHUNK];
	struct evbuffer_ptr pos;
	enum egress_hello_rc rc = EGRESS_HELLO_MORE;
	size_t len = evbuffer_get_length(in), n;

	while (c->hello_fed < len && rc == EGRESS_HELLO_MORE) {
		n = len - c->hello_fed < sizeof(buf) ? len - c->hello_fed : sizeof(buf);
		evbuffer_ptr_set(in, &pos, c->hello_fed, EVBUFFER_PTR_SET);
		if (evbuffer_copyout_from(in, &pos, buf, n) != (ev_ssize_t)n)
			return;
		rc = egress_hello_feed(c->hello, buf, n, NULL);
		c->hello_fed += n;
	}
	if (rc == EGRESS_HELLO_REFUSED) {
		conn_deny(c, 0, c->hello->why);
		return;
	}
	if (rc == EGRESS_HELLO_MORE)
		return;
	if (!egress_host_equal(&c->hello->sni, &c->target)) {
		conn_deny(c, 0, "the TLS server name is not the CONNECT host");
		return;
	}
	conn_connect(c);
}

static void
conn_cli_read(struct bufferevent *bev, void *arg)
{
	struct econn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	switch (c->state) {
	case CS_HEAD:
	case CS_RESOLVE:
	case CS_CONNECT:
		if (c->head != NULL)
			conn_read_head(c, in);
		return;
	case CS_HELLO:
		conn_read_hello(c, in);
		return;
	case CS_RELAY:
		conn_relay(c, bev);
		return;
	default:
		evbuffer_drain(in, evbuffer_get_length(in));
	}
}

static void
conn_cli_event(struct bufferevent *bev, short what, void *arg)
{
	struct econn *c = arg;

	if (c->state == CS_RELAY) {
		conn_relay_event(c, bev, what);
		return;
	}
	/* gone before its tunnel was set up (or while an answer was flushed) */
	conn_free(c);
}

static void
conn_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct econn *c = arg;
	uint64_t now = mono_ms(), idle_ms = (uint64_t)eg.idle_timeout * 1000;

	switch (c->state) {
	case CS_CLOSING:
		conn_free(c);
		return;
	case CS_HEAD:
		conn_deny(c, 408, "the request head did not come in time");
		return;
	case CS_HELLO:
		conn_deny(c, 0, "the TLS ClientHello did not come in time");
		return;
	case CS_RESOLVE:
		conn_deny(c, 504, "the name did not resolve in time");
		return;
	case CS_CONNECT:
		return; /* the upstream's own timeout answers */
	case CS_RELAY:
		/* to the millisecond: a clock in seconds closed a tunnel idle
		 * for a little over idle_timeout - 1 */
		if (now - c->last >= idle_ms) {
			log_debug("run %s: %s:%u idle, closed", c->r->run, c->host, c->port);
			conn_free(c);
			return;
		}
		conn_arm_ms(c, idle_ms - (now - c->last));
	}
}

/* A connection the run may not have: refused at once, without reading. */
static void
conn_refuse_fd(struct erun *r, int fd, int status, const char *why)
{
	char buf[256];
	int n;

	egress_event(r, IPC_EGRESS_EV_DENIED, "", 0, "", why, 0, 0, 0);
	n = snprintf(buf, sizeof(buf),
	    "HTTP/1.1 %d %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\negress: %s\n",
	    status, conn_reason_phrase(status), strlen(why) + 9, why);
	if (n > 0 && (size_t)n < sizeof(buf))
		(void)send(fd, buf, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
	close(fd);
}

void
conn_accept(struct erun *r, int fd)
{
	struct econn *c;

	if (r->tunnels >= eg.tunnels) {
		conn_refuse_fd(r, fd, 429, "the run's tunnel limit (egress.tunnels_per_run) is reached");
		return;
	}
	if ((c = calloc(1, sizeof(*c))) == NULL || (c->head = malloc(sizeof(*c->head))) == NULL) {
		free(c);
		conn_refuse_fd(r, fd, 502, "out of memory");
		return;
	}
	c->r = r;
	/* only a cost if it fails: the tunnel then works as before */
	(void)setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, CONN_SANDBOX_CC,
	    sizeof(CONN_SANDBOX_CC) - 1);
	clock_gettime(CLOCK_MONOTONIC, &c->t0);
	egress_head_init(c->head);
	c->cli = bufferevent_socket_new(eg.c.base, fd, BEV_OPT_CLOSE_ON_FREE);
	c->timer = evtimer_new(eg.c.base, conn_timer_cb, c);
	if (c->cli == NULL || c->timer == NULL)
		fatalx("out of memory for a connection");
	bufferevent_setcb(c->cli, conn_cli_read, conn_write_cb, conn_cli_event, c);
	bufferevent_set_max_single_read(c->cli, CONN_BEV_IO);
	bufferevent_set_max_single_write(c->cli, CONN_BEV_IO);
	bufferevent_enable(c->cli, EV_READ | EV_WRITE);
	TAILQ_INSERT_TAIL(&r->conns, c, entry);
	r->tunnels++;
	conn_arm(c, EGRESS_HEAD_TIMEOUT_S);
}

void
conn_close_all(struct erun *r)
{
	while (!TAILQ_EMPTY(&r->conns))
		conn_free(TAILQ_FIRST(&r->conns));
}
