/*
 * sse_fanout: many Server-Sent Events clients in one process (epoll), for
 * bench/api/run.sh.  Not part of the daemon; built by run.sh with plain cc.
 *
 *   sse_fanout PORT PATH TOKEN NCONN NEED TICKS TIMEOUT_S
 *
 * Opens NCONN HTTP/1.1 connections to 127.0.0.1:PORT, each a GET of PATH
 * with "Authorization: Bearer TOKEN", at most INFLIGHT not yet answered at
 * a time (the listen backlog is 511).  A stream is ready once it has had
 * a 200, the "retry:" line and NEED "data:" lines (the replayed events).
 * When all are ready it prints one line
 *
 *   ready CONNS SECONDS
 *
 * and then:
 *   TICKS = 0: holds the streams (reading what comes) until stdin reaches
 *   EOF, SIGTERM or TIMEOUT_S, then exits;
 *   TICKS > 0: each "data:" line of an event "bench.tick" whose payload has
 *   "t": <epoch seconds> (the append time) counts as one delivery, delay =
 *   receive time - t; once every stream has had TICKS of them (or
 *   TIMEOUT_S) it prints
 *
 *   delay N p50_ms p99_ms max_ms missing CPU%
 *
 * (CPU% is this process's own user+system time over the wall time since
 * ready: near 100 means the client, not the server, was the limit).
 * Exit 1 when a stream fails or not all get ready in TIMEOUT_S.
 */
#define _GNU_SOURCE
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define INFLIGHT 256
#define LINEMAX 200

enum { C_CONNECTING, C_WAITING, C_READY, C_DONE };

struct conn {
	int fd;
	int state;
	int status;     /* HTTP status, 0 until the status line */
	int retry;      /* had the "retry:" line */
	int tick;       /* the current event is a bench.tick */
	unsigned ndata; /* "data:" lines */
	unsigned nticks;
	unsigned llen;
	double last; /* monotonic time of the last bytes read */
	char line[LINEMAX + 1];
};

static struct conn *conns;
static int nconn, need, ticks, ep, nready, nopen, nfailed;
static char req[4096];
static size_t reqlen;
static struct sockaddr_in sa;
static double *delays;
static size_t ndelays, maxdelays;
static volatile sig_atomic_t stop;

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double
mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void
onterm(int sig)
{
	(void)sig;
	stop = 1;
}

static void
fail(struct conn *c, const char *why)
{
	static int reported;

	if (reported++ < 5)
		fprintf(stderr, "sse_fanout: stream %d: %s\n", (int)(c - conns), why);
	if (c->fd != -1)
		close(c->fd);
	c->fd = -1;
	if (c->state == C_CONNECTING || c->state == C_WAITING)
		nopen--;
	c->state = C_DONE;
	nfailed++;
}

static void
open_one(int i)
{
	struct conn *c = &conns[i];
	struct epoll_event ev;
	struct linger lg = {1, 0}; /* RST on close: no TIME_WAIT left behind */
	int one = 1;

	memset(c, 0, sizeof(*c));
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd == -1) {
		perror("sse_fanout: socket");
		exit(1);
	}
	setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) == -1 && errno != EINPROGRESS) {
		perror("sse_fanout: connect");
		exit(1);
	}
	c->state = C_CONNECTING;
	nopen++;
	ev.events = EPOLLOUT | EPOLLIN;
	ev.data.u32 = (uint32_t)i;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) == -1) {
		perror("sse_fanout: epoll_ctl");
		exit(1);
	}
}

/* One complete line of the response (chunk framing lines are ignored). */
static void
on_line(struct conn *c, char *l, size_t n, double t)
{
	char *p;

	if (n > 0 && l[n - 1] == '\r')
		l[--n] = '\0';
	if (c->status == 0) {
		if (strncmp(l, "HTTP/1.", 7) == 0 && n > 12)
			c->status = atoi(l + 9);
		if (c->status != 200)
			fail(c, l);
		return;
	}
	if (strncmp(l, "retry:", 6) == 0) {
		c->retry = 1;
	} else if (strncmp(l, "event:", 6) == 0) {
		c->tick = strcmp(l + 6 + (l[6] == ' '), "bench.tick") == 0;
	} else if (strncmp(l, "data:", 5) == 0) {
		c->ndata++;
		if (c->state == C_READY && c->tick && (p = strstr(l, "\"t\":")) != NULL) {
			if (ndelays < maxdelays)
				delays[ndelays++] = t - strtod(p + 4, NULL);
			c->nticks++;
		}
		c->tick = 0;
	}
}

static void
on_read(struct conn *c)
{
	static char buf[65536];
	ssize_t r;
	double t;
	size_t i;

	for (;;) {
		r = read(c->fd, buf, sizeof(buf));
		if (r == -1 && (errno == EAGAIN || errno == EINTR))
			return;
		if (r <= 0) {
			fail(c, r == 0 ? "closed by the server" : strerror(errno));
			return;
		}
		t = now();
		c->last = mono();
		for (i = 0; i < (size_t)r && c->state != C_DONE; i++) {
			if (buf[i] != '\n') {
				if (c->llen < LINEMAX)
					c->line[c->llen++] = buf[i];
				continue;
			}
			c->line[c->llen] = '\0';
			on_line(c, c->line, c->llen, t);
			c->llen = 0;
		}
		if (c->state == C_DONE)
			return;
		if (c->state == C_WAITING && c->retry && c->ndata >= (unsigned)need) {
			c->state = C_READY;
			nopen--;
			nready++;
		}
	}
}

static int
cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double
pct(double p)
{
	size_t i = (size_t)(p / 100.0 * (double)ndelays);

	if (i >= ndelays)
		i = ndelays - 1;
	return delays[i] * 1000.0;
}

static double
cpu(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec / 1e6;
}

int
main(int argc, char **argv)
{
	struct epoll_event evs[512];
	struct rlimit rl;
	double t0, deadline, tready = 0, cpu0 = 0;
	int i, n, next = 0, timeout, announced = 0, allticks;
	unsigned k, done;

	if (argc != 8) {
		fprintf(stderr, "usage: sse_fanout PORT PATH TOKEN NCONN NEED TICKS TIMEOUT_S\n");
		return 2;
	}
	nconn = atoi(argv[4]);
	need = atoi(argv[5]);
	ticks = atoi(argv[6]);
	timeout = atoi(argv[7]);
	if (nconn <= 0 || need < 0 || ticks < 0 || timeout <= 0)
		return 2;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)nconn + 64) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		if (rl.rlim_cur < (rlim_t)nconn + 64) {
			fprintf(stderr, "sse_fanout: RLIMIT_NOFILE %lu is too low for %d streams\n",
			        (unsigned long)rl.rlim_cur, nconn);
			return 1;
		}
	}
	signal(SIGPIPE, SIG_IGN);
	signal(SIGTERM, onterm);
	signal(SIGINT, onterm);
	reqlen = (size_t)snprintf(req, sizeof(req),
	                          "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%s\r\n"
	                          "Authorization: Bearer %s\r\nAccept: text/event-stream\r\n\r\n",
	                          argv[2], argv[1], argv[3]);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)atoi(argv[1]));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((conns = calloc((size_t)nconn, sizeof(*conns))) == NULL)
		return 1;
	maxdelays = (size_t)nconn * (size_t)ticks;
	if (ticks > 0 && (delays = malloc(maxdelays * sizeof(*delays))) == NULL)
		return 1;
	if ((ep = epoll_create1(EPOLL_CLOEXEC)) == -1)
		return 1;
	if (ticks == 0)
		fcntl(0, F_SETFL, O_NONBLOCK);

	t0 = mono();
	deadline = t0 + timeout;
	while (!stop) {
		while (next < nconn && nopen < INFLIGHT)
			open_one(next++);
		if (nfailed > 0)
			return 1;
		if (!announced && nready == nconn) {
			announced = 1;
			tready = mono();
			cpu0 = cpu();
			printf("ready %d %.2f\n", nready, tready - t0);
			fflush(stdout);
			if (ticks == 0) { /* watch stdin for EOF */
				struct epoll_event ev = {.events = EPOLLIN, .data.u32 = UINT32_MAX};
				if (epoll_ctl(ep, EPOLL_CTL_ADD, 0, &ev) == -1)
					ev.events = 0; /* not pollable (a file): timeout or SIGTERM */
			}
		}
		if (announced && ticks > 0) {
			allticks = 1;
			for (i = 0; i < nconn && allticks; i++)
				if (conns[i].nticks < (unsigned)ticks)
					allticks = 0;
			if (allticks)
				break;
		}
		if (mono() > deadline)
			break;
		n = epoll_wait(ep, evs, 512, 100);
		for (i = 0; i < n; i++) {
			struct conn *c;

			if (evs[i].data.u32 == UINT32_MAX) {
				char b[64];
				if (read(0, b, sizeof(b)) == 0)
					stop = 1;
				continue;
			}
			c = &conns[evs[i].data.u32];
			if (c->state == C_DONE)
				continue;
			if (c->state == C_CONNECTING && (evs[i].events & (EPOLLOUT | EPOLLERR))) {
				int err = 0;
				socklen_t len = sizeof(err);
				struct epoll_event ev = {.events = EPOLLIN, .data.u32 = evs[i].data.u32};

				getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
				if (err != 0) {
					fail(c, strerror(err));
					continue;
				}
				/* The request is small: one write on a fresh socket. */
				if (write(c->fd, req, reqlen) != (ssize_t)reqlen) {
					fail(c, "short write");
					continue;
				}
				c->state = C_WAITING;
				epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
				continue;
			}
			if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
				on_read(c);
		}
	}
	if (!announced) {
		int connecting = 0, nostatus = 0, noretry = 0, short_ = 0;

		for (i = 0; i < next; i++) {
			if (conns[i].state == C_CONNECTING)
				connecting++;
			else if (conns[i].state == C_WAITING && conns[i].status == 0)
				nostatus++;
			else if (conns[i].state == C_WAITING && !conns[i].retry)
				noretry++;
			else if (conns[i].state == C_WAITING)
				short_++;
		}
		fprintf(stderr,
		        "sse_fanout: %d of %d streams ready after %d s (%d not opened; waiting: "
		        "%d to connect, %d for a status line, %d for retry:, %d for events)\n",
		        nready, nconn, timeout, nconn - next, connecting, nostatus, noretry, short_);
		return 1;
	}
	if (ticks > 0) {
		double wall = mono() - tready, used = cpu() - cpu0;

		for (done = 0, k = 0; k < (unsigned)nconn; k++)
			done += conns[k].nticks >= (unsigned)ticks;
		if (ndelays == 0) {
			fprintf(stderr, "sse_fanout: no deliveries\n");
			return 1;
		}
		qsort(delays, ndelays, sizeof(*delays), cmpd);
		printf("delay %zu %.2f %.2f %.2f %zu %.0f\n", ndelays, pct(50), pct(99),
		       delays[ndelays - 1] * 1000.0, maxdelays - ndelays,
		       wall > 0 ? 100.0 * used / wall : 0.0);
		fflush(stdout);
		if (done < (unsigned)nconn) {
			unsigned short_ = 0, alive = 0, least = (unsigned)ticks;
			double tend = mono();

			for (k = 0; k < (unsigned)nconn; k++) {
				if (conns[k].nticks >= (unsigned)ticks)
					continue;
				short_++;
				if (conns[k].nticks < least)
					least = conns[k].nticks;
				if (tend - conns[k].last < 20)
					alive++;
			}
			fprintf(stderr,
			        "sse_fanout: %u streams short of %d events (the fewest: %u); %u of "
			        "them had bytes in the last 20 s\n",
			        short_, ticks, least, alive);
		}
	}
	return nfailed > 0;
}
