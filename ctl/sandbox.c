/*
 * agrippactl sandbox run [-r] [-t seconds] [-w dir] [--] command [argument ...]
 *
 * Asks the daemon for a sandbox, receives the driver's end of its channel
 * over the control socket (SCM_RIGHTS) and drives it like a runner would:
 * one SBX_EXEC, its output copied to our stdout and stderr, its status as
 * ours.  The sandbox lives as long as the control connection: whatever
 * ends agrippactl ends the sandbox.
 *
 * Exit status: the command's; 128+N when a signal N ended it; 124 when it
 * timed out; 126 when it could not be run, 127 when it was not found; 125
 * when the sandbox could not be built or failed; 2 for a usage error.
 */
#include <sys/socket.h>

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl/ctl.h"
#include "ipc/ipc.h"
#include "ipc/ipc_msg.h"

#define SBXRUN_READY_TIMEOUT_MS 30000
#define SBXRUN_EXEC_ID 1

struct sbxrun {
	int readonly;
	const char *workspace; /* NULL: a fresh one */
	char real[PATH_MAX];
	uint32_t timeout_ms;   /* 0: the sandbox's maximum */
	char **argv;
	int argc;
};

__attribute__((noreturn)) static void
sbxrun_usage(void)
{
	fprintf(stderr, "usage: agrippactl sandbox run [-r] [-t seconds] [-w dir] [--] command "
			"[argument ...]\n");
	exit(2);
}

static void
sbxrun_args(int argc, char **argv, struct sbxrun *r)
{
	char *end;
	long v;
	int ch;

	optind = 1;
	while ((ch = getopt(argc, argv, "+rt:w:")) != -1) {
		switch (ch) {
		case 'r':
			r->readonly = 1;
			break;
		case 't':
			errno = 0;
			v = strtol(optarg, &end, 10);
			if (errno != 0 || *end != '\0' || v < 1 || v > 86400) {
				fprintf(stderr, "agrippactl: -t: seconds from 1 to 86400\n");
				exit(2);
			}
			r->timeout_ms = (uint32_t)v * 1000;
			break;
		case 'w':
			if (realpath(optarg, r->real) == NULL) {
				fprintf(stderr, "agrippactl: %s: %s\n", optarg, strerror(errno));
				exit(2);
			}
			r->workspace = r->real;
			break;
		default:
			sbxrun_usage();
		}
	}
	if (optind >= argc || argv[optind][0] == '\0')
		sbxrun_usage();
	r->argv = argv + optind;
	r->argc = argc - optind;
}

/* Ask for the sandbox; returns the driver's descriptor or exits 125. */
static int
sbxrun_request(int ctl, const struct sbxrun *r)
{
	struct ipc_ctl_reply rep;
	struct ipc_wbuf w;
	struct ipc_msg m;
	const char *err = NULL;
	int fd;

	ipc_wbuf_begin(&w, IMSG_CTL_REQUEST, 1, 2);
	ipc_put_str(&w, "sandbox");
	ipc_put_array(&w, 2);
	ipc_put_str(&w, r->readonly ? "ro" : "rw");
	ipc_put_str(&w, r->workspace != NULL ? r->workspace : "");
	if (ipc_wbuf_finish(&w, CTL_MAX_FRAME) == -1 || ipc_write_frame(ctl, &w, -1) == -1) {
		fprintf(stderr, "agrippactl: cannot send the request: %s\n", strerror(errno));
		exit(125);
	}
	ipc_wbuf_free(&w);
	if (ipc_read_frame(ctl, ROLE_CTL, ROLE_SUPERVISOR, CTL_MAX_FRAME, CTL_TIMEOUT_MS, &m,
		&err) == -1) {
		fprintf(stderr, "agrippactl: no valid reply from the daemon: %s\n", err);
		exit(125);
	}
	if (m.type == IMSG_CTL_REPLY && ipc_dec_ctl_reply(m.body, &rep) == 0) {
		fprintf(stderr, "agrippactl: %.*s\n", (int)rep.msglen, rep.message);
		ipc_msg_free(&m);
		exit(125);
	}
	if (m.type != IMSG_CTL_SANDBOX || m.fd < 0) {
		fprintf(stderr, "agrippactl: unexpected reply from the daemon\n");
		exit(125);
	}
	fd = m.fd;
	m.fd = -1;
	ipc_msg_free(&m);
	return fd;
}

static void
sbxrun_exec(int sbx, const struct sbxrun *r)
{
	struct ipc_wbuf w;
	int i;

	ipc_wbuf_begin(&w, IMSG_SBX_EXEC, SBXRUN_EXEC_ID, 4);
	ipc_put_bool(&w, 0);
	ipc_put_array(&w, (uint32_t)r->argc);
	for (i = 0; i < r->argc; i++)
		ipc_put_str(&w, r->argv[i]);
	ipc_put_str(&w, "");
	ipc_put_u64(&w, r->timeout_ms);
	if (ipc_wbuf_finish(&w, IPC_MAX_FRAME_DEFAULT) == -1 || ipc_write_frame(sbx, &w, -1) == -1) {
		fprintf(stderr, "agrippactl: cannot send the command to the sandbox: %s\n",
		    errno ? strerror(errno) : "too large");
		exit(125);
	}
	ipc_wbuf_free(&w);
}

static void
sbxrun_write(int fd, const uint8_t *p, size_t len)
{
	ssize_t n;

	while (len > 0) {
		if ((n = write(fd, p, len)) == -1) {
			if (errno == EINTR)
				continue;
			return; /* a closed terminal or pipe: keep draining the sandbox */
		}
		p += n;
		len -= (size_t)n;
	}
}

/* The exit status agrippactl takes from SBX_EXIT. */
static int
sbxrun_status(const struct ipc_sbx_exit *x, const struct sbxrun *r)
{
	if (x->truncated)
		fprintf(stderr, "agrippactl: output truncated (%llu bytes in all)\n",
		    (unsigned long long)x->output_bytes);
	if (x->code != 0) {
		fprintf(stderr, "agrippactl: %s: %.*s\n", r->argv[0], (int)x->errlen, x->error);
		return x->code == ENOENT ? 127 : x->code == EACCES || x->code == ENOEXEC ? 126 : 125;
	}
	if (x->timed_out) {
		fprintf(stderr, "agrippactl: %s timed out after %llu ms\n", r->argv[0],
		    (unsigned long long)x->duration_ms);
		return 124;
	}
	if (x->signal != 0)
		return 128 + (int)x->signal;
	return (int)x->status;
}

/* Copy output until SBX_EXIT; returns the exit status. */
static int
sbxrun_loop(int sbx, const struct sbxrun *r)
{
	struct ipc_sbx_output o;
	struct ipc_sbx_exit x;
	struct ipc_msg m;
	const char *err = NULL;
	int rv;

	for (;;) {
		if (ipc_read_frame(sbx, ROLE_CTL, ROLE_SANDBOX, IPC_MAX_FRAME_DEFAULT, -1, &m,
			&err) == -1) {
			fprintf(stderr, "agrippactl: the sandbox failed: %s\n", err);
			return 125;
		}
		if (m.type == IMSG_SBX_OUTPUT && m.id == SBXRUN_EXEC_ID &&
		    ipc_dec_sbx_output(m.body, &o) == 0 && o.stream != 0) {
			sbxrun_write(o.stream, o.data, o.len);
		} else if (m.type == IMSG_SBX_EXIT && m.id == SBXRUN_EXEC_ID &&
		    ipc_dec_sbx_exit(m.body, &x) == 0) {
			rv = sbxrun_status(&x, r);
			ipc_msg_free(&m);
			return rv;
		} else {
			fprintf(stderr, "agrippactl: unexpected %s from the sandbox\n",
			    ipc_msg_name(m.type));
			ipc_msg_free(&m);
			return 125;
		}
		ipc_msg_free(&m);
	}
}

int
ctl_sandbox_run(const char *sock, int argc, char **argv)
{
	struct sbxrun r = { 0 };
	struct ipc_msg m;
	const char *err = NULL;
	int ctl, sbx, rv;

	if (argc < 2 || strcmp(argv[1], "run") != 0)
		sbxrun_usage();
	sbxrun_args(argc - 1, argv + 1, &r);
	signal(SIGPIPE, SIG_IGN);
	ctl = ctl_connect(sock);
	sbx = sbxrun_request(ctl, &r);
	if (ipc_read_frame(sbx, ROLE_CTL, ROLE_SANDBOX, IPC_MAX_FRAME_DEFAULT,
		SBXRUN_READY_TIMEOUT_MS, &m, &err) == -1 || m.type != IMSG_SBX_READY) {
		fprintf(stderr, "agrippactl: the sandbox did not start: %s\n",
		    err ? err : "unexpected message");
		return 125;
	}
	ipc_msg_free(&m);
	sbxrun_exec(sbx, &r);
	rv = sbxrun_loop(sbx, &r);
	close(sbx);
	close(ctl);
	return rv;
}
