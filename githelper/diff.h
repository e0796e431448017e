/*
 * The git helper's diff: what an agent changed in its work tree, as a
 * patch, computed against the trusted bare copy that gh_checkout_split
 * keeps apart from the sandbox (githelper/checkout.h).
 *
 * The work tree is hostile: the agent controls every file in it, its .git
 * included.  Only the bare copy is read as a repository.
 */
#ifndef AGRIPPA_GH_DIFF_H
#define AGRIPPA_GH_DIFF_H

#include <stddef.h>

/*
 * Write to outfd a unified patch in git's format (git apply takes it;
 * binary files in git's binary patch form) that turns the tree of the
 * commit base into workdir as it is now.
 *  - gitdir: the bare repository, the only repository opened; workdir/.git
 *    is never read.  base: a commit's full id in hex, looked up there.
 *  - Untracked files are included with their content, recursively; files
 *    ignored by the work tree's .gitignore files are left out, as git add
 *    would.  ".git" (at any depth) and GH_STRIPPED_NAMES at the top are
 *    left out on both sides: the daemon's artifacts and what the checkout
 *    stripped are never part of the change.
 *  - Symbolic links are diffed as links (their target text), never
 *    followed.  A FIFO, socket or device anywhere in the tree, or a
 *    .gitignore, .gitattributes or .gitmodules that is a link, is refused
 *    (libgit2 would block opening one or read through it).
 *  - At most cap bytes: a bigger patch fails with "patch larger than N
 *    bytes".  An empty diff writes nothing.
 * *written gets the bytes written to outfd.  Returns 0, or -1 with a
 * one-line reason in err; outfd may then hold a prefix of the patch, which
 * the caller throws away.
 *
 * The caller must make sure nothing can change workdir meanwhile (the
 * sandbox's processes are gone): the tree is checked, then read.
 */
int gh_diff(const char *gitdir, const char *workdir, const char *base, int outfd, size_t cap,
            size_t *written, char *err, size_t errsz);
/*
 * gh_diff with the workspace's list at stats (NULL or "" for none;
 * githelper/stat.h): the files whose lstat is still exactly what the
 * chowner listed for base are taken as the base's, unread; every other
 * file is hashed.  The same patch as gh_diff's, in O(changed files) of
 * reading instead of O(all files).  A list that is missing, not whole, or
 * about another commit is no list (said in the log), never an error.
 */
int gh_diff_listed(const char *gitdir, const char *workdir, const char *base, const char *stats,
                   int outfd, size_t cap, size_t *written, char *err, size_t errsz);

#endif
