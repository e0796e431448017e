/*
 * The git helper's push (DESIGN.md section 5, the pull_request step): the
 * run's commit, built from the mirror and the run's patch, pushed to
 * refs/heads/BRANCH of the connection's repository under a lease.
 *
 * The commit is base + patch by construction: the patch is gh_diff's, with
 * all of its checks on the hostile workspace (githelper/diff.h), parsed
 * back (git_diff_from_buffer) and applied to the base commit's tree from
 * the mirror (git_apply_to_tree).  Nothing of the workspace's .git (config,
 * hooks, remotes, refs, alternates) is read; the remote is the URL given,
 * never a remote of any repository.
 *
 * Nothing is written to the mirror: the new objects are kept in memory (a
 * mempack in front of the mirror's object store), and so is the one
 * reference that libgit2 1.5 needs as the source of a push (it cannot push
 * a bare commit id): the mirror's repository is given a reference store of
 * its own, in memory, that holds only GH_PUSH_SRC.  So a push never moves
 * the mirror's refs, two runs pushing from one mirror at once cannot
 * collide on a name, a helper that dies leaves nothing behind (no ref that
 * would name a missing object and make the next fetch judge the mirror
 * damaged), and a run's objects never become readable by the later runs
 * whose sandboxes see the mirror's objects, unless the push succeeded (the
 * next fetch then brings the branch in anyway).
 *
 * The lease.  The refspec is forced (+GH_PUSH_SRC:refs/heads/BRANCH): a
 * retry's commit has the base for its parent, like the commit it replaces,
 * so it is never a fast-forward of it, and a plain push would be refused
 * (and, since libgit2 refuses a non-fast-forward only when it holds the
 * remote's commit, not even always).  What the force may overwrite is
 * decided in libgit2's push_negotiation callback, which sees the remote's
 * current value of the branch before anything is sent: it must be exactly
 * the lease (absent for "").  The server then applies the update only if
 * the branch is still at that value (git's receive-pack compares the old
 * value the client sent), so a branch moved between the two is refused
 * there too: never a commit that is not ours is overwritten.
 */
#ifndef AGRIPPA_GH_PUSH_H
#define AGRIPPA_GH_PUSH_H

#include <stddef.h>
#include <stdint.h>

#include "githelper/checkout.h"

/* The push's source, in the in-memory reference store only. */
#define GH_PUSH_SRC "refs/agrippa/push"
#define GH_TOKEN_USER_GITLAB "oauth2"

struct gh_push_req {
	const char *mirror;  /* the bare mirror (absolute): objects are read, nothing written */
	const char *workdir; /* the hostile workspace (absolute) */
	const char *base;    /* the base commit (full hex id), in the mirror */
	const char *stats;   /* NULL, or the workspace's list (gh_diff_listed) */
	size_t cap;          /* the patch size cap, as gh_diff's */
	const char *author_name, *author_email; /* author and committer */
	int64_t when;         /* author and committer time (seconds since the epoch, UTC) */
	const char *message;  /* the commit message */
	const char *url;      /* https://HOST/... without credentials, or file:///PATH */
	const char *token;    /* NULL, or NUL-terminated: given only to the credentials callback */
	const char *username; /* with the token: GH_TOKEN_USER, GH_TOKEN_USER_GITLAB */
	const char *branch;   /* "refs/heads/NAME", NAME by tmpl_ref_problem's rules */
	const char *lease;    /* "": the branch must be absent; else a full hex id: the remote's
	                       * branch must still be there (the commit we pushed last) */
};

struct gh_push_res {
	char commit[GH_OID_HEX_MAX + 1]; /* the commit pushed or found there; "" when empty */
	int empty;                       /* the patch is empty: nothing committed, nothing pushed */
	int already; /* the remote's branch was already at exactly this commit: nothing sent */
};

/*
 * Build the run's commit and push it:
 *  - the patch of workdir against base, as gh_diff makes it (at most cap
 *    bytes; a FIFO, a socket, a device, a link where git reads settings,
 *    refused with its path); an empty patch: res->empty, and nothing more;
 *  - the commit: the base's tree with the patch applied, parent base,
 *    author and committer author_name <author_email> at when (so that the
 *    same change gives the same commit id, and a retry after a crash
 *    recognises its own earlier push), and message;
 *  - the push of it to branch at url, under the lease (above).  The remote
 *    already at this very commit: res->already, nothing sent.  Otherwise
 *    the remote's branch must be at the lease: a branch someone else moved
 *    (or made, when the lease is "", or deleted) fails naming its commit
 *    and is left as it is.  An update the server refuses (a protected
 *    branch, a hook) fails with the server's reason.
 * The token is offered once, through libgit2's credentials callback with
 * username, only when the server asks; a server that asks again has
 * refused it.  The server's certificate is libgit2's to judge; no proxy, no
 * redirect, no URL rewriting from any configuration.
 * Returns 0 with res filled in, or -1 with one printable line in err that
 * names the branch or the path (never the token); the remote's branch is
 * then as it was, unless the server applied the update and the answer was
 * lost (a retry with the same lease recognises it: res->already).
 */
int gh_push(const struct gh_push_req *req, struct gh_push_res *res, char *err, size_t errsz);

#endif
