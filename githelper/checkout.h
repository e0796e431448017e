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

#endif
