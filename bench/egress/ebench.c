/*
 * bench/egress/ebench.c: the egress benchmark's test server and client
 * (bench/egress/run.sh).  Built static, so that the same program runs
 * inside a sandbox (through the proxy) and outside it (the direct peer).
 *
 *   ebench serve ADDR PORT READY
 *       three listeners on ADDR: PORT sends what a client asks for (it
 *       sends "BYTES\n" and gets that many bytes, then EOF; or an HTTP
 *       request "GET /BYTES", answered 200 with Content-Length BYTES and
 *       Connection: close; each transfer adds "sent BYTES USER SYS" to the
 *       standard output, the CPU seconds the server spent on it, before its
 *       last byte), PORT+1 sends
 *       one byte at once on accept and closes, PORT+2 holds every
 *       connection open, idle, until its client closes it.  READY is
 *       created once they listen.
 *   ebench get  ADDR PORT BYTES [PROXYADDR PROXYPORT NAME]
 *       one transfer of BYTES from the bulk port: "seconds bytes cpu recvs
 *       user sys" on stdout (seconds from the request to the last byte;
 *       cpu: the client's own user + system seconds, also apart; recvs:
 *       how many recv calls it took).
 *   ebench hget ADDR PORT BYTES [PROXYADDR PROXYPORT NAME]
 *       the same transfer as plain HTTP: "GET /BYTES" to the bulk port, or
 *       through the proxy "GET http://NAME:PORT/BYTES" (absolute form, as
 *       apt sends it: no CONNECT); the same line on stdout, of the body.
 *   ebench ping ADDR PORT N [PROXYADDR PROXYPORT NAME]
 *       N new connections to the first-byte port, one after another: the
 *       microseconds from the start of connect() to the server's first
 *       byte, one line each.
 *   ebench hold ADDR PORT N HELD RELEASE PROXYADDR PROXYPORT NAME
 *       N tunnels to the idle port, all open at once; HELD is created
 *       when they are, and they are closed once RELEASE exists (10 minutes
 *       at most).
 * With PROXYADDR PROXYPORT NAME the connection goes through an HTTP proxy
 * (hget aside): "CONNECT NAME:PORT", then its bytes once the proxy answered 200 (ADDR is
 * then unused).  Addresses are numeric IPv4: nothing here resolves names.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* accept4 */
#endif
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BUF_SZ (1024 * 1024)
#define IDLE_MAX 4096
#define HEAD_MAX 16384 /* an HTTP head, either way */

static char buf[BUF_SZ];

__attribute__((noreturn, format(printf, 1, 2))) static void
die(const char *fmt, ...)
{
	va_list ap;
	int e = errno;

	fputs("ebench: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (e != 0)
		fprintf(stderr, ": %s", strerror(e));
	fputc('\n', stderr);
	exit(1);
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static unsigned long
num(const char *s, const char *what)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0')
		die("%s: not a number: %s", what, s);
	return v;
}

static struct sockaddr_in
addr_of(const char *a, const char *port)
{
	struct sockaddr_in sin;
	unsigned long p = num(port, "port");

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((uint16_t)p);
	if (p == 0 || p > 65535 || inet_pton(AF_INET, a, &sin.sin_addr) != 1) {
		errno = 0;
		die("not an IPv4 address and port: %s %s", a, port);
	}
	return sin;
}

static void
send_all(int fd, const char *p, size_t n)
{
	ssize_t w;

	while (n > 0) {
		if ((w = send(fd, p, n, MSG_NOSIGNAL)) < 0) {
			if (errno == EINTR)
				continue;
			die("send");
		}
		p += w;
		n -= (size_t)w;
	}
}

/* ---- the server ------------------------------------------------------------ */

static int
listen_on(struct sockaddr_in sin)
{
	int fd, one = 1;

	if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		die("socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 || listen(fd, 4096) < 0)
		die("listen on port %u", ntohs(sin.sin_port));
	return fd;
}

/* One bulk client, in a child of its own: its "BYTES\n" (or its HTTP
 * request for /BYTES: the head to its end, then the answer's), then the
 * bytes. */
static void
serve_bulk(int fd)
{
	static char head[HEAD_MAX + 1];
	char line[80];
	size_t got = 0;
	unsigned long long want, total;
	struct rusage ru;
	ssize_t r;
	size_t n;
	int k, http;

	for (;;) {
		if (got == HEAD_MAX || (r = recv(fd, head + got, 1, 0)) <= 0)
			_exit(1);
		got++;
		head[got] = '\0';
		http = strncmp(head, "GET /", got < 5 ? got : 5) == 0;
		if (!http && head[got - 1] == '\n')
			break;
		if (http && got >= 4 && memcmp(head + got - 4, "\r\n\r\n", 4) == 0)
			break;
	}
	want = strtoull(http ? head + 5 : head, NULL, 10);
	total = want;
	if (http) {
		k = snprintf(head, sizeof(head),
		    "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
		    "Content-Length: %llu\r\nConnection: close\r\n\r\n", want);
		send_all(fd, head, (size_t)k);
	}
	while (want > 0) {
		n = want < sizeof(buf) ? (size_t)want : sizeof(buf);
		send_all(fd, buf, n);
		want -= n;
	}
	/* the server's own CPU for the transfer: one line on its output,
	 * written before the close, so it is there once the client has its
	 * last byte */
	getrusage(RUSAGE_SELF, &ru);
	k = snprintf(line, sizeof(line), "sent %llu %.3f %.3f\n", total,
	    (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6,
	    (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6);
	if (k > 0 && (size_t)k < sizeof(line))
		(void)write(STDOUT_FILENO, line, (size_t)k);
	close(fd);
	_exit(0);
}

static void
serve(const char *a, const char *port, const char *ready)
{
	struct pollfd pfd[3 + IDLE_MAX];
	struct sockaddr_in sin = addr_of(a, port);
	unsigned p0 = ntohs(sin.sin_port);
	size_t nidle = 0, i;
	int fd, l[3];
	ssize_t r;
	char c;

	memset(buf, 'e', sizeof(buf));
	signal(SIGCHLD, SIG_IGN); /* the bulk children reap themselves */
	for (i = 0; i < 3; i++) {
		sin.sin_port = htons((uint16_t)(p0 + i));
		l[i] = listen_on(sin);
		pfd[i].fd = l[i];
		pfd[i].events = POLLIN;
	}
	if ((fd = open(ready, O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0)
		die("%s", ready);
	close(fd);
	for (;;) {
		if (poll(pfd, 3 + nidle, -1) < 0) {
			if (errno == EINTR)
				continue;
			die("poll");
		}
		for (i = 3; i < 3 + nidle; i++) {
			if (pfd[i].revents == 0)
				continue;
			/* an idle client closed (or sent something: it closes next) */
			r = recv(pfd[i].fd, &c, 1, MSG_DONTWAIT);
			if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
				close(pfd[i].fd);
				pfd[i--] = pfd[3 + --nidle];
			}
		}
		if (pfd[0].revents & POLLIN) {
			if ((fd = accept4(l[0], NULL, NULL, SOCK_CLOEXEC)) >= 0) {
				if (fork() == 0)
					serve_bulk(fd);
				close(fd);
			}
		}
		if (pfd[1].revents & POLLIN) {
			if ((fd = accept4(l[1], NULL, NULL, SOCK_CLOEXEC)) >= 0) {
				(void)send(fd, "x", 1, MSG_NOSIGNAL);
				close(fd);
			}
		}
		if ((pfd[2].revents & POLLIN) && nidle < IDLE_MAX) {
			if ((fd = accept4(l[2], NULL, NULL, SOCK_CLOEXEC)) >= 0) {
				pfd[3 + nidle].fd = fd;
				pfd[3 + nidle].events = POLLIN;
				pfd[3 + nidle].revents = 0;
				nidle++;
			}
		}
	}
}

/* ---- the clients ----------------------------------------------------------- */

struct target {
	struct sockaddr_in direct, proxy;
	const char *name; /* NULL: direct */
	unsigned port;
};

static struct target
target_of(char **argv, int argc, int at)
{
	struct target t;

	memset(&t, 0, sizeof(t));
	t.direct = addr_of(argv[0], argv[1]);
	t.port = ntohs(t.direct.sin_port);
	if (argc == at + 3) {
		t.proxy = addr_of(argv[at], argv[at + 1]);
		t.name = argv[at + 2];
	} else if (argc != at) {
		errno = 0;
		die("a proxy is PROXYADDR PROXYPORT NAME");
	}
	return t;
}

/*
 * An HTTP head from fd into head (size bytes with its NUL): the bytes read,
 * *end at its blank line (what follows is the body's start); what names
 * it in the errors.
 */
static size_t
read_head(int fd, char *head, size_t size, char **end, const char *what)
{
	size_t got = 0;
	ssize_t r;

	for (;;) {
		if (got == size - 1) {
			errno = 0;
			die("%s: its head is too long", what);
		}
		if ((r = recv(fd, head + got, size - 1 - got, 0)) <= 0) {
			errno = r < 0 ? errno : 0;
			die("%s: closed before its head's end", what);
		}
		got += (size_t)r;
		head[got] = '\0';
		if ((*end = strstr(head, "\r\n\r\n")) != NULL)
			return got;
	}
}

/*
 * A new connection to t on port (t.port + off), through the proxy when
 * there is one: returns the socket once it is the server's.  Bytes of the
 * server's that came with the proxy's answer are put in early (*nearly of
 * them, at most sizeof(early)).
 */
static int
dial(const struct target *t, unsigned off, char *early, size_t earlysz, size_t *nearly)
{
	struct sockaddr_in sin = t->name != NULL ? t->proxy : t->direct;
	char head[1024], *end;
	size_t got;
	int fd, one = 1, n;

	*nearly = 0;
	if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		die("socket");
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (t->name == NULL)
		sin.sin_port = htons((uint16_t)(t->port + off));
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
		die("connect");
	if (t->name == NULL)
		return fd;
	n = snprintf(head, sizeof(head), "CONNECT %s:%u HTTP/1.1\r\nHost: %s:%u\r\n\r\n", t->name,
	    t->port + off, t->name, t->port + off);
	send_all(fd, head, (size_t)n);
	got = read_head(fd, head, sizeof(head), &end, "the proxy's answer");
	if (strncmp(head, "HTTP/1.1 200", 12) != 0) {
		errno = 0;
		die("the proxy refused: %.*s", (int)strcspn(head, "\r\n"), head);
	}
	end += 4;
	*nearly = got - (size_t)(end - head);
	if (*nearly > earlysz)
		*nearly = earlysz;
	memcpy(early, end, *nearly);
	return fd;
}

/*
 * The rest of a transfer from fd (have bytes of it came already), to the
 * server's close: "seconds bytes cpu recvs user sys" on stdout, seconds
 * from t0 to the last byte.
 */
static void
receive(int fd, unsigned long long have, unsigned long long want, double t0)
{
	unsigned long long nrecv = 0;
	struct rusage ru;
	double t1;
	ssize_t r;

	while ((r = recv(fd, buf, sizeof(buf), 0)) > 0) {
		have += (unsigned long long)r;
		nrecv++;
	}
	t1 = now_s();
	if (r < 0)
		die("recv");
	if (have != want) {
		errno = 0;
		die("got %llu bytes of %llu", have, want);
	}
	getrusage(RUSAGE_SELF, &ru);
	printf("%.6f %llu %.3f %llu %.3f %.3f\n", t1 - t0, have,
	    (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	        (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6,
	    nrecv, (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6,
	    (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6);
	close(fd);
}

static void
get(int argc, char **argv)
{
	struct target t = target_of(argv, argc, 3);
	unsigned long long want = strtoull(argv[2], NULL, 10);
	char line[32], early[1];
	size_t ne;
	double t0;
	int fd, n;

	fd = dial(&t, 0, early, sizeof(early), &ne);
	n = snprintf(line, sizeof(line), "%llu\n", want);
	t0 = now_s();
	send_all(fd, line, (size_t)n);
	receive(fd, 0, want, t0);
}

/* One plain-HTTP transfer of BYTES: its head read and checked, the body
 * counted to the server's close. */
static void
hget(int argc, char **argv)
{
	static char head[HEAD_MAX + 1];
	struct target t = target_of(argv, argc, 3);
	struct sockaddr_in sin = t.name != NULL ? t.proxy : t.direct;
	unsigned long long want = strtoull(argv[2], NULL, 10);
	size_t got;
	double t0;
	char *end;
	int fd, n, one = 1;

	if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		die("socket");
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
		die("connect");
	t0 = now_s(); /* as get: from the request on */
	if (t.name != NULL)
		n = snprintf(head, sizeof(head),
		    "GET http://%s:%u/%llu HTTP/1.1\r\nHost: %s:%u\r\nConnection: close\r\n\r\n",
		    t.name, t.port, want, t.name, t.port);
	else
		n = snprintf(head, sizeof(head),
		    "GET /%llu HTTP/1.1\r\nHost: %s:%u\r\nConnection: close\r\n\r\n", want,
		    argv[0], t.port);
	send_all(fd, head, (size_t)n);
	got = read_head(fd, head, sizeof(head), &end, "the answer");
	if (strncmp(head, "HTTP/1.1 200", 12) != 0 && strncmp(head, "HTTP/1.0 200", 12) != 0) {
		errno = 0;
		die("refused: %.*s", (int)strcspn(head, "\r\n"), head);
	}
	receive(fd, got - (size_t)(end + 4 - head), want, t0);
}

static void
ping(int argc, char **argv)
{
	struct target t = target_of(argv, argc, 3);
	unsigned long i, n = num(argv[2], "N");
	char early[1];
	size_t ne;
	double t0, t1;
	int fd;

	for (i = 0; i < n; i++) {
		t0 = now_s();
		fd = dial(&t, 1, early, sizeof(early), &ne);
		if (ne == 0 && recv(fd, early, 1, 0) != 1)
			die("no first byte");
		t1 = now_s();
		close(fd);
		printf("%.1f\n", (t1 - t0) * 1e6);
	}
}

static void
hold(int argc, char **argv)
{
	struct target t;
	struct rlimit rl;
	struct stat st;
	unsigned long i, n = num(argv[2], "N");
	int *fds, fd;
	char early[1];
	size_t ne;

	if (argc != 8) {
		errno = 0;
		die("hold ADDR PORT N HELD RELEASE PROXYADDR PROXYPORT NAME");
	}
	t = target_of(argv, argc, 5);
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if ((fds = calloc(n, sizeof(*fds))) == NULL)
		die("calloc");
	for (i = 0; i < n; i++)
		fds[i] = dial(&t, 2, early, sizeof(early), &ne);
	if ((fd = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0)
		die("%s", argv[3]);
	close(fd);
	for (i = 0; i < 6000 && stat(argv[4], &st) != 0; i++)
		usleep(100000);
	for (i = 0; i < n; i++)
		close(fds[i]);
	free(fds);
	printf("held %lu\n", n);
}

int
main(int argc, char **argv)
{
	if (argc >= 5 && strcmp(argv[1], "serve") == 0)
		serve(argv[2], argv[3], argv[4]);
	else if (argc >= 5 && strcmp(argv[1], "get") == 0)
		get(argc - 2, argv + 2);
	else if (argc >= 5 && strcmp(argv[1], "hget") == 0)
		hget(argc - 2, argv + 2);
	else if (argc >= 5 && strcmp(argv[1], "ping") == 0)
		ping(argc - 2, argv + 2);
	else if (argc >= 5 && strcmp(argv[1], "hold") == 0)
		hold(argc - 2, argv + 2);
	else {
		fprintf(stderr, "usage: ebench serve ADDR PORT READY\n"
		                "       ebench get ADDR PORT BYTES [PROXYADDR PROXYPORT NAME]\n"
		                "       ebench hget ADDR PORT BYTES [PROXYADDR PROXYPORT NAME]\n"
		                "       ebench ping ADDR PORT N [PROXYADDR PROXYPORT NAME]\n"
		                "       ebench hold ADDR PORT N HELD RELEASE PROXYADDR PROXYPORT NAME\n");
		return 2;
	}
	return 0;
}
