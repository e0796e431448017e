/*
 * Play the supervisor for one git helper operation:
 *   gitreq HELPER fetch URL MIRROR <TOKEN     IMSG_GIT_FETCH
 *   gitreq HELPER checkout MIRROR REF WORKSPACE URL   IMSG_GIT_CHECKOUT
 * fetch reads the token from standard input (none when it is empty; never
 * argv).  The request goes to HELPER (agrippa-git) on fd 3 of a socket
 * pair, as supervisor/gitrun.c sends it, with the same environment (PATH,
 * HOME=/nonexistent and the sanitizer variables); then its IMSG_GIT_RESULT
 * is awaited.  Prints "ok BASE REF SIZE" and exits 0, or prints "error:
 * REASON" and exits 1; 2 for a usage or set-up error or a helper that did
 * not answer.
 *
 * For tests/integration/test_git_https.sh, which needs the workspace the
 * helper leaves behind (the daemon's `repo test` removes its own).
 */
#include <sys/socket.h>
#include <sys/wait.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ipc/ipc.h"
#include "ipc/ipc_msg.h"

#define GITREQ_READ_MS 120000

/* The token from standard input, without a trailing newline; *len bytes. */
static size_t
read_token(unsigned char *buf, size_t cap)
{
	size_t n = fread(buf, 1, cap, stdin);

	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
	return n;
}

/* In the child: become the helper with fd 3 the socket.  Never returns. */
static void __attribute__((noreturn))
exec_helper(const char *helper, int fd)
{
	static const char *const pass[] = {"ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"};
	char *env[8], *argv[] = {"agrippa-git", NULL}, buf[3][512];
	size_t i, n = 0;
	const char *v;

	if (dup2(fd, 3) == -1)
		_exit(126);
	closefrom(4);
	env[n++] = "PATH=/usr/bin:/bin";
	env[n++] = "HOME=/nonexistent";
	for (i = 0; i < sizeof(pass) / sizeof(pass[0]); i++)
		if ((v = getenv(pass[i])) != NULL &&
		    snprintf(buf[i], sizeof(buf[i]), "%s=%s", pass[i], v) < (int)sizeof(buf[i]))
			env[n++] = buf[i];
	env[n] = NULL;
	execve(helper, argv, env);
	_exit(127);
}

int
main(int argc, char *argv[])
{
	static unsigned char token[IPC_SECRET_MAX + 1];
	struct ipc_git_result r;
	struct ipc_wbuf w;
	struct ipc_msg m;
	const char *why;
	size_t toklen;
	int sv[2], status, rc;
	pid_t pid;

	if (argc == 5 && strcmp(argv[2], "fetch") == 0) {
		toklen = read_token(token, sizeof(token));
		ipc_wbuf_begin(&w, IMSG_GIT_FETCH, 0, 3);
		ipc_put_str(&w, argv[3]);
		ipc_put_bin(&w, token, toklen);
		ipc_put_str(&w, argv[4]);
		memset(token, 0, sizeof(token));
	} else if (argc == 7 && strcmp(argv[2], "checkout") == 0) {
		ipc_wbuf_begin(&w, IMSG_GIT_CHECKOUT, 0, 4);
		ipc_put_str(&w, argv[3]);
		ipc_put_str(&w, argv[4]);
		ipc_put_str(&w, argv[5]);
		ipc_put_str(&w, argv[6]);
	} else {
		fprintf(stderr, "usage: gitreq HELPER fetch URL MIRROR <TOKEN\n"
		                "       gitreq HELPER checkout MIRROR REF WORKSPACE URL\n");
		return 2;
	}
	if (ipc_wbuf_finish(&w, IPC_MAX_FRAME_DEFAULT) == -1 ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == -1) {
		fprintf(stderr, "gitreq: set-up failed\n");
		return 2;
	}
	fflush(stdout);
	if ((pid = fork()) == -1) {
		perror("gitreq: fork");
		return 2;
	}
	if (pid == 0)
		exec_helper(argv[1], sv[1]);
	close(sv[1]);
	if (ipc_write_frame(sv[0], &w, -1) == -1) {
		fprintf(stderr, "gitreq: sending the request failed\n");
		return 2;
	}
	ipc_wbuf_free(&w); /* wiped: it held the token */
	rc = ipc_read_frame(sv[0], ROLE_SUPERVISOR, ROLE_GITHELPER, IPC_MAX_FRAME_DEFAULT,
	                    GITREQ_READ_MS, &m, &why);
	close(sv[0]);
	if (waitpid(pid, &status, 0) == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fprintf(stderr, "gitreq: the helper did not exit 0 (status %#x)\n", status);
	if (rc == -1) {
		fprintf(stderr, "gitreq: no answer from the helper: %s\n", why);
		return 2;
	}
	if (m.type != IMSG_GIT_RESULT || ipc_dec_git_result(m.body, &r) == -1) {
		fprintf(stderr, "gitreq: the helper sent something else than its result\n");
		ipc_msg_free(&m);
		return 2;
	}
	if (r.ok)
		printf("ok %s %s %llu\n", r.base[0] != '\0' ? r.base : "-", r.ref[0] != '\0' ? r.ref : "-",
		       (unsigned long long)r.size);
	else
		printf("error: %.*s\n", (int)r.errlen, r.error);
	ipc_msg_free(&m);
	return r.ok ? 0 : 1;
}
