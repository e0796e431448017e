/*
 * The remover (agrippa-tree remove): a transient role that empties one
 * directory tree off the supervisor's event loop, as the tree's owner.
 */
#ifndef AGRIPPA_REMOVER_H
#define AGRIPPA_REMOVER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define REMOVER_FD 3     /* the directory to empty, opened by the supervisor */
#define REMOVER_DEPTH 32 /* directories held open at once below it */

/* The role: empties the directory on fd 3, prints the number of entries
 * it removed and exits 0, or prints one line saying why not and exits 1. */
__attribute__((noreturn)) void remover_main(void);

/*
 * Remove everything inside the directory dirfd (read-only, owned by the
 * caller) without following any link and without leaving dirfd's mount:
 * directories the caller owns but may not search or write are given u+rwx
 * first, and a directory deeper than REMOVER_DEPTH below dirfd is moved up
 * into dirfd under a new name, so neither descriptors nor the stack grow
 * with the tree's depth.  dirfd is left open and in place.  Returns 0 with
 * *count the entries removed, or -1 with a one-line reason in err (what
 * could be removed is removed either way).
 */
int remover_empty(int dirfd, uint64_t *count, char *err, size_t errsz);

/* agrippa-tree chown UID GID [BASE]: gives the directory on fd 3 (ours)
 * and everything in it to uid:gid, prints the number of entries given and
 * exits 0, or prints one line saying why not and exits 1.  With BASE (the
 * commit checked out there) it writes the list of what it gave
 * (common/wsstat.h) to the private file of its own on fd 4.  Started with
 * CAP_CHOWN alone; refuses to run as root or with any other capability. */
__attribute__((noreturn)) void chowner_main(const char *uid, const char *gid, const char *base);

/*
 * Give the directory dirfd (ours) and everything in it to uid:gid without
 * following any link and without leaving dirfd's file system; an entry
 * that is not ours is an error.  Changes the working directory.  With
 * listfd (else -1) and base, the list of the files and links given, as
 * they are after, is written there from its start (common/wsstat.h); a
 * list that cannot be written whole is left empty, which is no list.
 * Returns 0 with *count the entries given, or -1 with a one-line reason in
 * err.
 */
int chowner_give(int dirfd, uid_t uid, gid_t gid, int listfd, const char *base,
                 uint64_t *count, char *err, size_t errsz);

#endif
