/*
 * bench/egress/sbxexec.c: the egress benchmark's fair peer (run.sh).
 *
 *   sbxexec CMD [ARG...]
 *       CMD under the seccomp filter a sandbox with a network policy runs
 *       under (privsep/seccomp_sandbox.c, network set: the very filter,
 *       built from the same table), no_new_privs first, as the sandbox
 *       sets them up; then execvp.
 *
 * The client inside the sandbox pays for that filter on every call it
 * makes; the direct transfer it is compared with must pay the same, or the
 * comparison charges the proxy for the filter.  Built by run.sh from the
 * project's own files (this one, privsep/seccomp_sandbox.c, common/log.c).
 */
#include <sys/prctl.h>

#include <stdio.h>
#include <unistd.h>

#include "common/log.h"
#include "privsep/privsep.h"

int
main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: sbxexec CMD [ARG...]\n");
		return 2;
	}
	log_init(1, 0, 0);
	log_procinit("sbxexec");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1)
		fatal("no_new_privs");
	privsep_seccomp_sandbox(1);
	execvp(argv[1], argv + 1);
	fatal("%s", argv[1]);
}
