/*
 * "agrippa-sandbox mcp COMMAND [ARG...]": the first process of a stdio MCP
 * server's sandbox (DESIGN.md section 4.2, supervisor/sbx.c).
 *
 * The supervisor built the sandbox as a run's and left the server's
 * descriptors in place: 0 and 1 the sandbox's end of the channel, whose
 * other end the MCP client holds, 2 the server's stderr pipe.  This
 * process loads the sandbox's seccomp filter (inherited by the server and
 * everything it starts), starts the server with those three descriptors
 * and no others, and lets go of the channel itself, so that the client
 * sees EOF when the server is gone.  It never reads a byte of the server's.
 *
 * It stays as pid 1 of the namespace because the server cannot: pid 1
 * ignores every signal it has no handler for (a Node.js server would
 * outlive SIGTERM) and must reap orphans.  SIGTERM, SIGINT and SIGHUP are
 * passed to the server; when the server ends, this process ends with its
 * status, and the kernel kills whatever is left of the namespace.
 */
#include <sys/prctl.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "privsep/privsep.h"
#include "sandbox/sandbox.h"

void
sandbox_mcp_main(char **argv)
{
	sigset_t set, old;
	siginfo_t si;
	int network, status, nul;
	pid_t pid, w;

	log_procinit("mcp-host");
	privsep_nodump();
	privsep_lsan_off();
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
	if ((pid = fork()) == -1)
		fatal("fork");
	if (pid == 0) {
		sigprocmask(SIG_SETMASK, &old, NULL);
		execvp(argv[0], argv);
		/* on the server's stderr, where mcp test shows its tail */
		fprintf(stderr, "agrippa-sandbox: cannot execute %s: %s\n", argv[0],
		    strerror(errno));
		_exit(errno == ENOENT ? 127 : 126);
	}
	if ((nul = open("/dev/null", O_RDWR | O_CLOEXEC)) == -1 || dup2(nul, 0) == -1 ||
	    dup2(nul, 1) == -1)
		fatal("/dev/null");
	close(nul);
	for (;;) {
		if (sigwaitinfo(&set, &si) == -1) {
			if (errno == EINTR)
				continue;
			fatal("sigwaitinfo");
		}
		if (si.si_signo != SIGCHLD) {
			kill(pid, si.si_signo);
			continue;
		}
		while ((w = waitpid(-1, &status, WNOHANG)) > 0) {
			if (w != pid)
				continue;
			if (WIFSIGNALED(status))
				_exit(128 + WTERMSIG(status));
			_exit(WEXITSTATUS(status));
		}
	}
}
