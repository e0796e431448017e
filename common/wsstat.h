/*
 * The workspace's list: what the chowner (remover/chown.c) gave to the
 * sandbox user, as it was right after, written to a file of the service
 * user's beside the workspace (never in it) before any sandbox process
 * exists; read by the git helper (githelper/stat.c) so that the patch and
 * the push hash only the files whose lstat changed since, as git's index
 * lets git do, instead of every file of the tree.
 *
 * The file is a sequence of NUL-terminated records:
 *   "agrippa-stat 1 BASE"    first; BASE the commit checked out (40 or 64
 *                            lower-case hex): the list is about it only
 *   "T MODE INO DEV UID GID SIZE MS MNS CS CNS PATH"
 *                            one per regular file (T 'f') or symbolic link
 *                            ('l'), after its chown: st_mode in octal, the
 *                            rest in decimal, times as seconds and
 *                            nanoseconds (mtime, then ctime), PATH relative
 *                            to the workspace (any bytes but NUL)
 *   "end N CS CNS"           N the records above, and the ctime of the
 *                            workspace's top directory, given last
 *   "seal S NS"              optional, last: the (coarse) time at which
 *                            the supervisor let the first process other
 *                            than its own helpers at the workspace
 *                            (wsstat_seal), before which nothing changed it
 * A file without its end record (a chowner that died, a list over
 * WSSTAT_MAX) is no list.  An entry whose ctime is not before the seal's
 * time (or, without a seal, the end's) may have been changed in the same
 * clock tick as it was listed (git's "racily clean" entries): it is
 * hashed.  Nothing but a change of the entry moves its ctime, and no
 * process in the sandbox can set the clock.
 */
#ifndef AGRIPPA_WSSTAT_H
#define AGRIPPA_WSSTAT_H

#define WSSTAT_MAGIC "agrippa-stat 1"
#define WSSTAT_MAX (64u << 20) /* the largest list written or read */
#define WSSTAT_FD 4            /* where the chowner finds the list's file */

/* Append the seal, now, to the list open at fd (O_APPEND): 0, or -1. */
int wsstat_seal(int fd);

#endif
