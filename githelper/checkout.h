/*
 * The git helper's checkout (DESIGN.md section 1, the engine issue): clone a
 * run's repository into its workspace with libgit2 and make the result safe
 * to hand to a hostile agent and to the daemon's own later steps.
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

/* What a repository may not bring into the top of a work tree: agent
 * settings, MCP servers, the daemon's artifacts (the strip below). */
#define GH_STRIPPED_NAMES ".claude", ".mcp.json", ".agrippa"

/*
 * Clone url into dir, which must be an existing, empty directory given as
 * an absolute path, and check out the remote's default branch.
 *  - url: https://HOST/... (token, when not NULL, is given to the server
 *    through libgit2's credential callback as user GH_TOKEN_USER, once; it
 *    is never written to disk, to .git/config or to the remote URL), or a
 *    local repository as file:///PATH or /PATH (cloned through git's object
 *    transfer, never by hard-linking the source's objects; token ignored).
 *  - The work tree must not reach outside dir: every checked-out path is a
 *    relative path with no "." or ".." component, below no symbolic link,
 *    and not inside ".git".  Otherwise the checkout fails.
 *  - Then ".claude", ".mcp.json" and ".agrippa" at the top of the work tree
 *    are removed whatever they are (a symbolic link is removed, never
 *    followed), so that a repository cannot bring its own agent settings,
 *    MCP servers or artifacts.
 *  - base (GH_OID_HEX_MAX + 1 bytes) gets the checked-out commit's id in
 *    hex.
 * Returns 0, or -1 with a one-line reason in err (never the token); dir may
 * then hold a partial checkout, which the caller removes.
 */
int gh_checkout(const char *url, const char *token, const char *dir, char *base, char *err,
                size_t errsz);

/*
 * gh_checkout split in two, so that the daemon keeps a copy of the
 * repository that the sandbox never sees:
 *  - url (same rules and token handling as gh_checkout) is cloned as a
 *    bare repository into gitdir: the trusted copy, which gh_diff reads.
 *  - workdir becomes a plain clone of gitdir (objects copied, never hard
 *    linked; no token) checked out at the same commit, with its "origin"
 *    set back to url; then the path check and the strip of gh_checkout.
 *    This is the tree the agent gets, .git included.
 * gitdir and workdir: two different existing empty directories, absolute
 * paths.  base (GH_OID_HEX_MAX + 1 bytes) gets the commit's id in hex.
 * Returns 0, or -1 with a one-line reason in err (never the token); both
 * directories may then hold partial clones, which the caller removes.
 */
int gh_checkout_split(const char *url, const char *token, const char *gitdir, const char *workdir,
                      char *base, char *err, size_t errsz);

/*
 * The check gh_checkout makes after cloning, on the work tree at dir as it
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

/* Shared with githelper/diff.c. */

/* Format a one-line reason into err; returns -1. */
int gh_fail(char *err, size_t errsz, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* libgit2's last error message (static storage), or "unknown error". */
const char *gh_git_error(void);

/*
 * git_libgit2_init, then no system, global or XDG configuration and no
 * owner validation for this process.  Pair a success with
 * git_libgit2_shutdown.  0, or -1 with the reason.
 */
int gh_git_init(char *err, size_t errsz);

#endif
