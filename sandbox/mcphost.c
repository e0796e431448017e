/*
 * "agrippa-sandbox mcp LINE_MAX COMMAND [ARG...]": the first process of a
 * stdio MCP server's sandbox (DESIGN.md section 4.2, supervisor/sbx.c), and
 * the relay between the server and its MCP client.
 *
 * The supervisor built the sandbox as a run's and left four descriptors:
 * 0 and 1 the sandbox's end of the channel (a socket), whose other end the
 * MCP client holds (the runner, or agrippa-mcpc for mcp test); 2 the
 * write end of the pipe of the server's stderr, kept as a capped log on
 * the other side; 3 a
 * memfd holding what the relay redacts, each a 4-byte big-endian length
 * and that many bytes: the values of the server's credentials.  They come
 * on a descriptor rather than in this process's environment because an
 * environment is inherited, shown in /proc/1/environ and copied by every
 * exec: read once from fd 3, closed, the memfd is gone, and the only copy
 * left is this process's memory (not dumpable, as the sandbox's seccomp
 * filter forbids reading another process's memory).  The server has the
 * values anyway, in its own environment, which is where its spec puts them.
 *
 * This process loads the sandbox's seccomp filter (inherited by the server
 * and everything it starts) and starts the server with stdin, stdout and
 * stderr on three pipes of its own.  It then relays, in one poll loop:
 *   - the channel to the server's stdin as it comes, one read and one
 *     write per chunk, the channel's end of input closing the server's;
 *   - the server's stdout to the channel through the redacting line relay
 *     (relay.c): complete lines at once, every credential value replaced by
 *     '*' byte for byte, an unfinished line held while it fits the window
 *     and otherwise sent but for a tail as long as the longest value, so
 *     that a value split across reads is still found; one read and at most
 *     one write per chunk, memchr for the newlines, memmem for the values;
 *   - the server's stderr to fd 2 through a relay of its own, masked the
 *     same way, without a cap (it is a log, not MCP), an unfinished line
 *     sent once it has waited RELAY_LOG_IDLE_MS but for bytes that could
 *     begin a value.  What this process says itself goes to fd 2 too.
 * Credential values are printable ASCII without '"' or '\' (mcpspec), so a
 * value reads the same inside JSON text and the relay finds it there as a
 * server printing its environment writes it.  It is a guard against a
 * server that shows its credential by accident, as server-everything's
 * get-env does; a server bent on leaking it could encode it, and is not
 * what this stops.
 *
 * A line longer than LINE_MAX (the supervisor's cap, the client's too) is
 * cut: the relay sends LINE_MAX + 1 of its bytes, so that the client says
 * the line is too long, closes the channel, says so on stderr, and stops
 * the server (SIGTERM, then RELAY_STOP_MS later this process exits, which
 * ends every process of the namespace).  Memory is bounded whatever the
 * server writes: the relay's window and its redacted copy, one chunk of
 * the client's input (twice the first two, with stderr's).
 *
 * It stays pid 1 of the namespace because the server cannot: pid 1
 * ignores every signal it has no handler for (a Node.js server would
 * outlive SIGTERM) and must reap orphans.  SIGTERM, SIGINT and SIGHUP are
 * passed to the server (a signalfd, so that they wake the loop); when the
 * server ends, what it wrote is flushed to the channel (within
 * RELAY_FLUSH_MS) and this process ends with the server's status.  The
 * server closing its stdout shuts the channel's sending half: the client
 * sees the end of the server's output while it may still write.
 */
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "privsep/privsep.h"
#include "sandbox/relay.h"
#include "sandbox/sandbox.h"

#define HOST_CHAN_IN 0
#define HOST_CHAN_OUT 1
#define HOST_SECRETS_FD 3
#define HOST_SECRETS_BYTES (RELAY_SECRETS_MAX * (RELAY_SECRET_MAX + 4))
#define HOST_IN_CHUNK (64u * 1024)    /* bytes of the client's input read at once */
#define HOST_DRAIN_MAX (1024u * 1024) /* bytes read once the server is gone */
#define RELAY_FLUSH_MS 5000           /* the server is gone: its output to the client within this */
#define RELAY_STOP_MS 2000            /* a cut: SIGTERM to the server, then this process exits */
#define RELAY_LOG_IDLE_MS 100         /* an unfinished stderr line held this long goes */
#define HOST_LOG 2                    /* the server's stderr as its client reads it */

struct host {
	pid_t server;
	int status; /* the server's, once gone */
	int gone;   /* the server has been reaped */
	int sigfd;
	int cin, cout; /* the channel (the same socket), or -1 once closed */
	int to_srv;    /* the server's stdin, or -1 */
	int from_srv;  /* the server's stdout, or -1 */
	char in[HOST_IN_CHUNK];
	size_t inlen, inoff;
	int chan_eof; /* the client's input ended */
	struct relay out;
	const char *optr; /* output being written to the channel */
	size_t olen, ooff;
	int srv_eof;      /* the server's output ended (or is no longer read) */
	size_t drained;   /* bytes read since the server was reaped */
	int64_t deadline; /* monotonic ms after which this process exits; 0 none */
	/* the server's stderr, to fd 2 through a relay of its own (no cap) */
	int from_err; /* or -1 once at its end */
	int log;      /* fd 2, or -1 once its reader is gone (stderr is then dropped) */
	struct relay err;
	const char *eptr;
	size_t elen, eoff;
	int64_t err_idle; /* when an unfinished stderr line is flushed; 0 none */
	size_t err_drained;
	char *secrets; /* fd 3's bytes; the relay's secrets point into them */
	size_t secretslen;
	struct relay_secret sec[RELAY_SECRETS_MAX];
	size_t nsec;
};

static int64_t
host_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* fd 3, to its end (at most HOST_SECRETS_BYTES), then closed: the values
 * the relay masks.  fatalx on a malformed list. */
static void
host_read_secrets(struct host *h)
{
	struct stat st;
	size_t off = 0, n;
	ssize_t k;

	if (fstat(HOST_SECRETS_FD, &st) == -1)
		fatal("fd %d (the values to redact)", HOST_SECRETS_FD);
	if (st.st_size < 0 || (uint64_t)st.st_size > HOST_SECRETS_BYTES)
		fatalx("fd %d: %lld bytes of values to redact", HOST_SECRETS_FD,
		       (long long)st.st_size);
	h->secretslen = (size_t)st.st_size;
	if ((h->secrets = malloc(h->secretslen + 1)) == NULL)
		fatal("malloc");
	while (off < h->secretslen) {
		k = pread(HOST_SECRETS_FD, h->secrets + off, h->secretslen - off, (off_t)off);
		if (k == -1 && errno == EINTR)
			continue;
		if (k <= 0)
			fatal("fd %d: read", HOST_SECRETS_FD);
		off += (size_t)k;
	}
	close(HOST_SECRETS_FD);
	for (off = 0; off < h->secretslen; off += n) {
		if (h->secretslen - off < 4 || h->nsec == RELAY_SECRETS_MAX)
			fatalx("fd %d: a malformed list of values to redact", HOST_SECRETS_FD);
		n = (size_t)(unsigned char)h->secrets[off] << 24 |
		    (size_t)(unsigned char)h->secrets[off + 1] << 16 |
		    (size_t)(unsigned char)h->secrets[off + 2] << 8 |
		    (size_t)(unsigned char)h->secrets[off + 3];
		off += 4;
		if (n > h->secretslen - off)
			fatalx("fd %d: a malformed list of values to redact", HOST_SECRETS_FD);
		h->sec[h->nsec++] = (struct relay_secret){h->secrets + off, n};
	}
}

/* The server, on two pipes; its stderr is ours (fd 2).  Never returns in
 * the child. */
static void
host_spawn(struct host *h, char **argv, const sigset_t *old)
{
	int in[2], out[2], err[2];

	if (pipe2(in, O_CLOEXEC) == -1 || pipe2(out, O_CLOEXEC) == -1 ||
	    pipe2(err, O_CLOEXEC) == -1)
		fatal("pipe2");
	if ((h->server = fork()) == -1)
		fatal("fork");
	if (h->server == 0) {
		/* dup2 over the channel's 0 and 1: the server never holds it */
		if (dup2(in[0], 0) == -1 || dup2(out[1], 1) == -1 || dup2(err[1], 2) == -1)
			_exit(126);
		sigprocmask(SIG_SETMASK, old, NULL);
		execvp(argv[0], argv);
		/* on the server's stderr, where its client shows the tail */
		fprintf(stderr, "agrippa-sandbox: cannot execute %s: %s\n", argv[0],
		        strerror(errno));
		_exit(errno == ENOENT ? 127 : 126);
	}
	close(in[0]);
	close(out[1]);
	close(err[1]);
	h->to_srv = in[1];
	h->from_srv = out[0];
	h->from_err = err[0];
	h->log = HOST_LOG;
	if (fcntl(h->to_srv, F_SETFL, O_NONBLOCK) == -1 ||
	    fcntl(h->from_srv, F_SETFL, O_NONBLOCK) == -1 ||
	    fcntl(h->from_err, F_SETFL, O_NONBLOCK) == -1 ||
	    fcntl(HOST_LOG, F_SETFL, fcntl(HOST_LOG, F_GETFL) | O_NONBLOCK) == -1 ||
	    fcntl(HOST_CHAN_IN, F_SETFL, fcntl(HOST_CHAN_IN, F_GETFL) | O_NONBLOCK) == -1)
		fatal("O_NONBLOCK");
}

static void
host_close(int *fd)
{
	if (*fd != -1)
		close(*fd);
	*fd = -1;
}

/* The channel is closed both ways (the client is gone, or a cut). */
static void
host_close_chan(struct host *h)
{
	if (h->cin != -1)
		shutdown(h->cin, SHUT_RDWR);
	host_close(&h->cin);
	host_close(&h->cout);
	h->inlen = h->inoff = 0;
	h->olen = h->ooff = 0;
	h->chan_eof = 1;
	/* nobody reads the server's output any more: it sees a broken pipe */
	host_close(&h->from_srv);
	h->srv_eof = 1;
	if (h->to_srv != -1)
		host_close(&h->to_srv);
}

/* ---- the client's input, to the server's stdin ----------------------------- */

static void
host_to_server(struct host *h)
{
	ssize_t n;

	while (h->inoff < h->inlen && h->to_srv != -1) {
		n = write(h->to_srv, h->in + h->inoff, h->inlen - h->inoff);
		if (n > 0) {
			h->inoff += (size_t)n;
			continue;
		}
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && errno == EAGAIN)
			return;
		/* the server closed its stdin: what the client sends is dropped */
		host_close(&h->to_srv);
	}
	h->inlen = h->inoff = 0;
	if (h->chan_eof)
		host_close(&h->to_srv); /* the server's end of input */
}

static void
host_from_client(struct host *h)
{
	ssize_t n;

	n = read(h->cin, h->in, sizeof(h->in));
	if (n == -1 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		h->chan_eof = 1;
		if (h->inoff == h->inlen)
			host_close(&h->to_srv);
		return;
	}
	if (h->to_srv == -1)
		return; /* dropped (see host_to_server) */
	h->inlen = (size_t)n;
	h->inoff = 0;
	host_to_server(h);
}

/* ---- the server's output, to the client ------------------------------------ */

/* The line cap was hit: the client has had its line_max + 1 bytes. */
static void
host_cut(struct host *h)
{
	fprintf(stderr,
	        "agrippa-sandbox: the MCP server wrote a line longer than %zu bytes on its "
	        "output; the connection is closed and the server stopped\n",
	        h->out.line_max);
	host_close_chan(h);
	if (!h->gone)
		kill(h->server, SIGTERM);
	h->deadline = host_now_ms() + RELAY_STOP_MS;
}

static void
host_to_client(struct host *h)
{
	ssize_t n;

	while (h->ooff < h->olen) {
		n = send(h->cout, h->optr + h->ooff, h->olen - h->ooff, MSG_NOSIGNAL);
		if (n > 0) {
			h->ooff += (size_t)n;
			continue;
		}
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && errno == EAGAIN)
			return;
		host_close_chan(h); /* the client is gone */
		return;
	}
	h->olen = h->ooff = 0;
	relay_sent(&h->out);
	if (relay_cut(&h->out))
		host_cut(h);
	else if (h->srv_eof && h->from_srv == -1)
		shutdown(h->cout, SHUT_WR); /* all of the server's output is out */
}

/* Hand what the relay has ready to the channel, then ask it again (at the
 * end of the output there may be a second part). */
static void
host_relay(struct host *h, size_t n, int eof)
{
	const char *p;
	size_t len;

	while (h->cout != -1 && h->olen == 0 && (len = relay_filled(&h->out, n, eof, &p)) > 0) {
		h->optr = p;
		h->olen = len;
		h->ooff = 0;
		host_to_client(h);
		n = 0;
		if (!eof)
			break;
	}
}

static void
host_from_server(struct host *h)
{
	char *p;
	size_t room;
	ssize_t n;

	if ((room = relay_space(&h->out, &p)) == 0)
		return;
	n = read(h->from_srv, p, room);
	if (n == -1 && (errno == EINTR || (errno == EAGAIN && !h->gone)))
		return;
	if (n > 0) {
		host_relay(h, (size_t)n, 0);
		/* once the server is gone, whatever still writes here (its
		 * children) is read this much, no more */
		if (!h->gone || (h->drained += (size_t)n) < HOST_DRAIN_MAX)
			return;
	}
	/* the end of its output, or the server is gone and it is all read */
	host_close(&h->from_srv);
	h->srv_eof = 1;
	host_relay(h, 0, 1);
	if (h->cout != -1 && h->olen == 0)
		shutdown(h->cout, SHUT_WR);
}

/* ---- the server's stderr, to the log ------------------------------------------ */

static void
host_to_log(struct host *h)
{
	ssize_t n;

	while (h->eoff < h->elen && h->log != -1) {
		n = write(h->log, h->eptr + h->eoff, h->elen - h->eoff);
		if (n > 0) {
			h->eoff += (size_t)n;
			continue;
		}
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && errno == EAGAIN)
			return;
		h->log = -1; /* nobody reads it: dropped from now on */
	}
	h->elen = h->eoff = 0;
	relay_sent(&h->err);
}

/* What the stderr relay has ready (flush: an unfinished line that waited
 * RELAY_LOG_IDLE_MS), to fd 2. */
static void
host_log_relay(struct host *h, size_t n, int eof, int flush)
{
	const char *p;
	size_t len;

	while (h->elen == 0) {
		len = flush ? relay_flush(&h->err, &p) : relay_filled(&h->err, n, eof, &p);
		if (len == 0)
			break;
		h->eptr = p;
		h->elen = len;
		h->eoff = 0;
		host_to_log(h);
		n = 0;
		if (!eof)
			break;
	}
	/* from the first byte held: a trickle without a newline does not put
	 * its flush off for ever */
	if (h->err.len == 0 || flush)
		h->err_idle = 0;
	else if (h->err_idle == 0)
		h->err_idle = host_now_ms() + RELAY_LOG_IDLE_MS;
}

static void
host_from_err(struct host *h)
{
	char *p;
	size_t room;
	ssize_t n;

	if ((room = relay_space(&h->err, &p)) == 0)
		return;
	n = read(h->from_err, p, room);
	if (n == -1 && (errno == EINTR || (errno == EAGAIN && !h->gone)))
		return;
	if (n > 0) {
		host_log_relay(h, (size_t)n, 0, 0);
		if (!h->gone || (h->err_drained += (size_t)n) < HOST_DRAIN_MAX)
			return;
	}
	host_close(&h->from_err);
	host_log_relay(h, 0, 1, 0);
}

/* ---- signals ----------------------------------------------------------------- */

static void
host_signal(struct host *h)
{
	struct signalfd_siginfo si;
	int status;
	pid_t w;

	while (read(h->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo != SIGCHLD) {
			if (h->gone)
				_exit(128 + (int)si.ssi_signo);
			kill(h->server, (int)si.ssi_signo);
			continue;
		}
		while ((w = waitpid(-1, &status, WNOHANG)) > 0) {
			if (w != h->server)
				continue;
			h->gone = 1;
			h->status =
			    WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
			if (h->deadline == 0)
				h->deadline = host_now_ms() + RELAY_FLUSH_MS;
		}
	}
}

/* ---- the loop ------------------------------------------------------------------ */

enum { P_SIG, P_CIN, P_COUT, P_TOSRV, P_FROMSRV, P_FROMERR, P_LOG, P_N };

__attribute__((noreturn)) static void
host_loop(struct host *h)
{
	struct pollfd pf[P_N];
	int64_t now;
	int timeout;

	for (;;) {
		if (h->gone && (h->cout == -1 || (h->srv_eof && h->olen == 0)) &&
		    ((h->from_err == -1 && h->elen == 0) || h->log == -1))
			_exit(h->status);
		now = host_now_ms();
		if (h->deadline != 0 && h->deadline <= now)
			_exit(h->gone ? h->status : 128 + SIGKILL);
		if (h->err_idle != 0 && h->err_idle <= now && h->elen == 0)
			host_log_relay(h, 0, 0, 1);
		timeout = -1;
		if (h->deadline != 0)
			timeout = (int)(h->deadline - now);
		/* the idle flush waits, as the flush above does, for what the log
		 * holds to be written: no wake-up for it while fd 2 is full (poll
		 * waits for POLLOUT then) */
		if (h->err_idle != 0 && h->elen == 0 &&
		    (timeout == -1 || h->err_idle - now < timeout))
			timeout = h->err_idle > now ? (int)(h->err_idle - now) : 0;
		/* the server is gone: read its output to the end without waiting */
		if (h->gone &&
		    ((h->from_srv != -1 && h->olen == 0) || (h->from_err != -1 && h->elen == 0)))
			timeout = 0;
		memset(pf, 0, sizeof(pf));
		pf[P_SIG] = (struct pollfd){h->sigfd, POLLIN, 0};
		pf[P_CIN].fd = h->cin != -1 && !h->chan_eof && h->inoff == h->inlen ? h->cin : -1;
		pf[P_CIN].events = POLLIN;
		pf[P_COUT].fd = h->olen > h->ooff ? h->cout : -1;
		pf[P_COUT].events = POLLOUT;
		pf[P_TOSRV].fd = h->inoff < h->inlen ? h->to_srv : -1;
		pf[P_TOSRV].events = POLLOUT;
		pf[P_FROMSRV].fd = h->olen == 0 ? h->from_srv : -1;
		pf[P_FROMSRV].events = POLLIN;
		pf[P_FROMERR].fd = h->elen == 0 ? h->from_err : -1;
		pf[P_FROMERR].events = POLLIN;
		pf[P_LOG].fd = h->elen > h->eoff ? h->log : -1;
		pf[P_LOG].events = POLLOUT;
		if (poll(pf, P_N, timeout) == -1) {
			if (errno == EINTR)
				continue;
			fatal("poll");
		}
		if (pf[P_SIG].revents != 0)
			host_signal(h);
		if (pf[P_CIN].fd != -1 && pf[P_CIN].revents != 0 && h->cin != -1)
			host_from_client(h);
		if (pf[P_TOSRV].fd != -1 && pf[P_TOSRV].revents != 0)
			host_to_server(h);
		if (pf[P_COUT].fd != -1 && pf[P_COUT].revents != 0 && h->cout != -1)
			host_to_client(h);
		if (h->from_srv != -1 && h->olen == 0 &&
		    ((pf[P_FROMSRV].fd != -1 && pf[P_FROMSRV].revents != 0) || h->gone))
			host_from_server(h);
		if (pf[P_LOG].fd != -1 && pf[P_LOG].revents != 0)
			host_to_log(h);
		if (h->from_err != -1 && h->elen == 0 &&
		    ((pf[P_FROMERR].fd != -1 && pf[P_FROMERR].revents != 0) || h->gone))
			host_from_err(h);
	}
}

void
sandbox_mcp_main(char **argv)
{
	static struct host h;
	sigset_t set, old;
	char *end, err[256];
	unsigned long long max;
	int network;

	log_procinit("mcp-host");
	privsep_nodump();
	privsep_lsan_off();
	errno = 0;
	max = strtoull(argv[0], &end, 10);
	if (errno != 0 || *end != '\0' || max == 0 || max > SIZE_MAX / 2 || argv[1] == NULL)
		fatalx("usage: agrippa-sandbox mcp LINE_MAX COMMAND [ARG...]");
	argv++;
	h.server = -1;
	h.cin = HOST_CHAN_IN;
	h.cout = HOST_CHAN_OUT;
	host_read_secrets(&h);
	if (relay_init(&h.out, RELAY_CAP, (size_t)max, h.sec, h.nsec, err, sizeof(err)) == -1 ||
	    relay_init(&h.err, RELAY_CAP, SIZE_MAX / 4, h.sec, h.nsec, err, sizeof(err)) == -1)
		fatalx("the relay: %s", err);
	/* set by the supervisor's sandbox builder, whose environment this is */
	network = getenv("AGRIPPA_EGRESS") != NULL;
	unsetenv("AGRIPPA_EGRESS");
	privsep_seccomp_sandbox(network);
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	/* blocked signals are queued even for a namespace's pid 1 */
	if (sigprocmask(SIG_BLOCK, &set, &old) == -1)
		fatal("sigprocmask");
	if ((h.sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC)) == -1)
		fatal("signalfd");
	host_spawn(&h, argv, &old);
	signal(SIGPIPE, SIG_IGN); /* here only: the server starts with the default */
	host_loop(&h);
}
