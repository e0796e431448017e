/*
 * agrippa-tree: the supervisor's transient tools for one tree
 * (supervisor/transient.c starts them), a program of its own so that
 * starting one costs an exec of a small binary, not of agrippad and the
 * forty libraries it links:
 *  - "agrippa-tree remove": empties the directory on fd 3, as its owner
 *    (remover/remover.c);
 *  - "agrippa-tree chown UID GID [BASE]": gives the directory on fd 3 to
 *    uid:gid, as its owner with CAP_CHOWN alone, and with BASE lists what
 *    it gave to the file on fd 4 (remover/chown.c).
 * Each refuses to run otherwise (by hand, as root, without its descriptor).
 */
#include <stdio.h>
#include <string.h>

#include "remover/remover.h"

int
main(int argc, char *argv[])
{
	if (argc == 2 && strcmp(argv[1], "remove") == 0)
		remover_main();
	if ((argc == 4 || argc == 5) && strcmp(argv[1], "chown") == 0)
		chowner_main(argv[2], argv[3], argc == 5 ? argv[4] : NULL);
	fprintf(stderr, "usage: agrippa-tree remove | agrippa-tree chown uid gid [base] (started "
	                "by agrippad only)\n");
	return 2;
}
