/*
 * A repository connection's mirror (DESIGN.md section 3.8): a bare
 * repository under STATE/mirrors that only the git helper writes, brought up
 * to date by an incremental fetch at every run's start.
 *
 * Transfer is Debian's git program, not libgit2: libgit2 1.5 has no shallow
 * fetch and builds packs for local transports with a slow packbuilder (a
 * curl-sized history took minutes where git takes seconds).  git runs
 * locked down: no system, global or XDG configuration, no hooks, no
 * fsmonitor, no credential helper but ours, no redirects, and no protocol
 * but https and file (ext:: and fd:: included).  The token never reaches
 * git's argv, environment or any file: git's credential helper is this
 * program again (gh_credential_helper), which asks the helper process that
 * holds the token over a socket pair inherited as fd 3, and that process
 * answers only for the connection's own https host.
 */
#ifndef AGRIPPA_GH_MIRROR_H
#define AGRIPPA_GH_MIRROR_H

#include <stddef.h>
#include <stdint.h>

#define GH_GIT_PROGRAM "/usr/bin/git"
/* Beside the mirror while a fetch works on it: a crash leaves it behind. */
#define GH_FETCH_MARK "agrippa-fetching"
/* Left by a checkout that could not read the mirror's objects. */
#define GH_DAMAGED_MARK "agrippa-damaged"
/*
 * In the mirror after every fetch that succeeded: one line "SECONDS BYTES"
 * (decimal, one space, a newline), the time of that fetch (seconds since
 * the epoch) and the mirror's bytes on disk then.  The supervisor reads it
 * for agrippactl repo list and status, so that neither needs to walk the
 * mirror, and so that the figures outlive a restart.  Replaced whole
 * (rename); a mirror without one has no recorded fetch.
 */
#define GH_STAMP "agrippa-fetched"
#define GH_STAMP_MAX 48 /* two 20-digit numbers, a space and a newline */
#define GH_CRED_FD 3

/*
 * Bring the mirror dir (absolute; its parent directory exists and is the
 * caller's) up to date from url (https://HOST/..., file:///PATH or /PATH):
 *  - no mirror yet: a bare clone into dir.new, renamed to dir when whole;
 *  - else a fetch of every branch and tag (forced, pruned: a force-push or
 *    a deleted branch upstream is followed);
 *  - a mirror that an earlier fetch left half done (GH_FETCH_MARK), that a
 *    checkout found damaged (GH_DAMAGED_MARK), or whose fetch failed, is
 *    tidied (stale locks and temporary packs) and checked (git fsck
 *    --connectivity-only); one that fails the check is moved aside and
 *    cloned again, and what was moved aside removed;
 *  - a fetch that failed because the disk is full (ENOSPC, EDQUOT) is never
 *    taken for damage: a rebuild could only make it worse.  Its temporary
 *    files are removed, so the space it took is given back; should the
 *    check then fail, the mirror keeps GH_FETCH_MARK for the next fetch.
 * On success GH_STAMP is written in the mirror.
 * One fetch at a time per mirror: dir.lock is held (flock) throughout.
 * token (NUL-terminated, or NULL) is offered to the url's https host only.
 * *size gets the mirror's bytes on disk afterwards.  Returns 0, or -1 with
 * a one-line reason in err (never the token); the mirror is then as it
 * was, or absent.
 */
int gh_fetch(const char *url, const char *token, const char *dir, uint64_t *size, char *err,
             size_t errsz);

/*
 * agrippa-git --credential-fd=3 ACTION: git's credential helper.  For
 * "get", the request on standard input (protocol and host) is passed to the
 * helper process over fd, and its answer printed; "store" and "erase" are
 * read and ignored.  Returns the exit status.
 */
int gh_credential_helper(int fd, const char *action);

/*
 * url: https://HOST[:PORT]/... without credentials (host, hostsz bytes,
 * gets "HOST" or "HOST:PORT", as git names it to credential helpers),
 * file:///PATH, or an absolute path (host ""); anything else is refused.
 * 0, or -1 with the reason in err.  Shared with githelper/push.c.
 */
int gh_url_host(const char *url, char *host, size_t hostsz, char *err, size_t errsz);

/* Leave GH_DAMAGED_MARK in the mirror dir: 0, or -1 with errno set. */
int gh_mark_damaged(const char *dir);

/* Bytes on disk of the tree at dir (not following links); 0 when absent. */
uint64_t gh_tree_size(const char *dir);

#endif
