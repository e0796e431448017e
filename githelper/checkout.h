/*
 * The git helper's checkout (DESIGN.md section 3.8): write a run's workspace
 * from its connection's mirror with libgit2 and make the result safe to
 * hand to a hostile agent and to the daemon's own later steps.
 *
 * This code runs only in the transient git helper process (its own small
 * program, like agrippa-sandbox), never in agrippad's long-lived processes:
 * libgit2 and its TLS and SSH stacks stay out of them.
 */
#ifndef AGRIPPA_GH_CHECKOUT_H
#define AGRIPPA_GH_CHECKOUT_H

#include <stddef.h>

#define GH_OID_HEX_MAX 64 /* SHA-1 repositories have 40, SHA-256 ones 64 */
#define GH_TOKEN_USER "x-access-token"
#define GH_REF_MAX 255 /* a template's workspace.ref */
/* Where a sandbox sees the mirror's objects (supervisor/sbx.c mounts them). */
#define GH_SANDBOX_OBJECTS "/mirror/objects"

/* What a repository may not bring into the top of a work tree: agent
 * settings, MCP servers, the daemon's artifacts (the strip below). */
#define GH_STRIPPED_NAMES ".claude", ".mcp.json", ".agrippa"

/*
 * The workspace of a run, written from the connection's mirror (a bare
 * repository, gh_fetch) in time proportional to the files of one commit,
 * not to the history:
 *  - ref: "" for the mirror's default branch (its HEAD), a full commit id
 *    (40 or 64 lower-case hex digits), or a branch or tag by its short name
 *    (branches first) or as refs/heads/NAME or refs/tags/NAME; a tag is
 *    peeled to its commit.  A ref that is not there fails, naming it.
 *  - workdir (an existing, empty directory, absolute) gets the commit's
 *    work tree and a .git that holds no object: its
 *    objects/info/alternates names GH_SANDBOX_OBJECTS, where the sandbox
 *    sees the mirror's objects (read-only), so that git log, show, diff
 *    and status work there.  HEAD is the branch for a branch, else
 *    detached at the commit; the remote "origin" is url (no token).
 *  - Then the checks and the strip below: no path of the work tree
 *    escapes it, and ".claude", ".mcp.json" and ".agrippa" at its top are
 *    removed whatever they are (a link is removed, never followed).
 *  - base (GH_OID_HEX_MAX + 1 bytes) gets the commit's id in hex, refname
 *    (GH_REF_MAX + 1 bytes) the ref's short name (the branch or tag, or the
 *    commit id).
 * A mirror whose objects cannot be read is marked damaged (the next
 * gh_fetch checks and rebuilds it).  Returns 0, or -1 with a one-line
 * reason in err; workdir may then hold a partial tree, which the caller
 * removes.
 */
int gh_workspace(const char *mirror, const char *ref, const char *workdir, const char *url,
                 char *base, char *refname, char *err, size_t errsz);

/*
 * The check gh_workspace makes after writing the tree, on the work tree at dir as it
 * is now: every path of its index relative, without "." or ".." components,
 * not in ".git", and below no symbolic link.  0, or -1 with the reason.
 */
int gh_verify(const char *dir, char *err, size_t errsz);

/*
 * Remove name (a single path component) from the directory dirfd whatever
 * it is: a file or a symbolic link is unlinked, a directory emptied
 * recursively without following any link and removed.  A name that does
 * not exist is success.  Returns 0, or -1 with errno set.
 */
int gh_remove_tree(int dirfd, const char *name);

/* Shared with githelper/diff.c, mirror.c and push.c. */

/* Format a one-line reason into err; returns -1. */
int gh_fail(char *err, size_t errsz, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/*
 * Append n bytes of p to the text buf (*len bytes, room for max and a NUL),
 * keeping only its last max bytes: the end of what a program or a server
 * said.  buf stays NUL-terminated.
 */
void gh_tail_keep(char *buf, size_t *len, size_t max, const char *p, size_t n);

/* libgit2's last error message (static storage), or "unknown error". */
const char *gh_git_error(void);

/*
 * git_libgit2_init, then no system, global or XDG configuration and no
 * owner validation for this process.  Pair a success with
 * git_libgit2_shutdown.  0, or -1 with the reason.
 */
int gh_git_init(char *err, size_t errsz);

#endif
