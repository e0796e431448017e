/*
 * The run's commit, pushed under a lease (githelper/push.h).
 *
 * libgit2 1.5 facts this relies on (checked against its source and on this
 * host, see the tests): git_remote_upload returns 0 even when the server
 * refuses an update (a hook, a protected branch): only the
 * push_update_reference callback says so; push_negotiation is called with
 * the remote's current values before any object is packed or sent, and an
 * error from it ends the push there; the credentials callback is called
 * again after every 401, so it must count; a push's source must be a
 * reference (not a commit id), looked up through the repository's
 * reference store.
 */
#include <sys/mman.h>

#include <errno.h>
#include <fnmatch.h>
#include <git2.h>
#include <git2/sys/mempack.h>
#include <git2/sys/odb_backend.h>
#include <git2/sys/refdb_backend.h>
#include <git2/sys/refs.h>
#include <git2/sys/repository.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "githelper/checkout.h"
#include "githelper/diff.h"
#include "githelper/mirror.h"
#include "githelper/push.h"
#include "tmpl/tmpl.h"

#define GH_PUSH_SAID_MAX 512 /* what is kept of the server's messages */
#define GH_PUSH_WHY_MAX 384
#define GH_PUSH_HOST_MAX 300

/* The push's reference store: GH_PUSH_SRC and nothing else, in memory. */
struct gh_memref {
	git_refdb_backend be; /* first: libgit2 hands back &be */
	git_oid id;
};

/* What the callbacks of one push know and found. */
struct gh_pushctx {
	const struct gh_push_req *req;
	git_oid commit;                  /* what is pushed */
	git_oid base;                    /* its parent */
	git_oid lease;                   /* where the remote's branch must be; zero: absent */
	git_remote *remote;              /* the push's, for its advertisement */
	int answers;                     /* credentials given */
	int already;                     /* the remote's branch is at commit */
	int reported;                    /* the server reported on the branch */
	int badcert;                     /* libgit2 refused the server's certificate */
	char why[GH_PUSH_WHY_MAX];       /* our reason for ending the push; "" none */
	char refused[GH_PUSH_WHY_MAX];   /* the server's status for the branch; "" none */
	char said[GH_PUSH_SAID_MAX + 1]; /* the end of the server's messages */
	size_t saidlen;
};

/* ---- the request ----------------------------------------------------------- */

/* s: not empty, printable, none of the bytes in bad. */
static int
gh_push_plain(const char *s, const char *bad)
{
	const unsigned char *p;

	if (s == NULL || s[0] == '\0')
		return 0;
	for (p = (const unsigned char *)s; *p != '\0'; p++)
		if (*p < 0x20 || *p == 0x7f || strchr(bad, *p) != NULL)
			return 0;
	return 1;
}

/* s: a full commit id, lower-case hex (as gh_diff takes base). */
static int
gh_push_is_oid(const char *s)
{
	return strlen(s) == GIT_OID_HEXSZ && strspn(s, "0123456789abcdef") == GIT_OID_HEXSZ;
}

/* The branch: refs/heads/NAME, by the rules refs are held to (tmpl/ref.c). */
static int
gh_push_check_branch(const char *branch, char *err, size_t errsz)
{
	const char *why;

	if (branch == NULL || strncmp(branch, "refs/heads/", 11) != 0 || branch[11] == '\0')
		return gh_fail(err, errsz, "the branch must be refs/heads/NAME");
	if ((why = tmpl_ref_problem(branch, strlen(branch))) != NULL)
		return gh_fail(err, errsz, "branch %.64s%s: %s", branch,
		               strlen(branch) > 64 ? "..." : "", why);
	return 0;
}

/* Everything of req but the base (gh_diff judges it) and the workspace. */
static int
gh_push_check(const struct gh_push_req *q, char *err, size_t errsz)
{
	char host[GH_PUSH_HOST_MAX];

	if (gh_push_check_branch(q->branch, err, errsz) == -1)
		return -1;
	if (q->mirror == NULL || q->workdir == NULL || q->base == NULL || q->mirror[0] != '/' ||
	    q->workdir[0] != '/')
		return gh_fail(err, errsz,
		               "%s: the mirror and the workspace must be absolute paths",
		               q->branch);
	if (q->lease == NULL || (q->lease[0] != '\0' && !gh_push_is_oid(q->lease)))
		return gh_fail(err, errsz, "%s: the lease must be \"\" or a full commit id",
		               q->branch);
	if (!gh_push_plain(q->author_name, "<>") || !gh_push_plain(q->author_email, "<> "))
		return gh_fail(err, errsz, "%s: the author must be a printable name and address",
		               q->branch);
	if (q->when < 0)
		return gh_fail(err, errsz, "%s: the commit's time is before 1970", q->branch);
	if (q->message == NULL || q->message[0] == '\0')
		return gh_fail(err, errsz, "%s: the commit has no message", q->branch);
	if (q->token != NULL && !gh_push_plain(q->username, ":"))
		return gh_fail(err, errsz, "%s: a token needs a user name (no ':')", q->branch);
	if (q->url == NULL || gh_url_host(q->url, host, sizeof(host), err, errsz) == -1)
		return q->url == NULL ? gh_fail(err, errsz, "%s: no URL", q->branch) : -1;
	return 0;
}

/* ---- the patch ------------------------------------------------------------- */

/*
 * gh_diff's patch of the request, in memory: *patch (mapped, *len bytes;
 * munmap it when *len > 0) or *len = 0 for an empty one.  The memory file
 * keeps gh_diff exactly as the patch step runs it, cap included.
 */
static int
gh_push_patch(const struct gh_push_req *q, void **patch, size_t *len, char *err, size_t errsz)
{
	int fd, rv;

	*patch = NULL;
	*len = 0;
	if ((fd = memfd_create("agrippa-patch", MFD_CLOEXEC)) == -1)
		return gh_fail(err, errsz, "%s: the patch: %s", q->branch, strerror(errno));
	rv = gh_diff_listed(q->mirror, q->workdir, q->base, q->stats, fd, q->cap, len, err, errsz);
	if (rv == 0 && *len > 0 &&
	    (*patch = mmap(NULL, *len, PROT_READ, MAP_PRIVATE, fd, 0)) == MAP_FAILED) {
		*patch = NULL;
		*len = 0;
		rv = gh_fail(err, errsz, "%s: the patch: %s", q->branch, strerror(errno));
	}
	close(fd);
	return rv;
}

/* ---- the in-memory reference store ----------------------------------------- */

static int
gh_memref_none(void)
{
	git_error_set_str(GIT_ERROR_REFERENCE, "the push's reference store holds its source only");
	return -1;
}

static int
gh_memref_exists(int *exists, git_refdb_backend *be, const char *name)
{
	(void)be;
	*exists = strcmp(name, GH_PUSH_SRC) == 0;
	return 0;
}

static int
gh_memref_lookup(git_reference **out, git_refdb_backend *be, const char *name)
{
	struct gh_memref *m = (struct gh_memref *)be;

	if (strcmp(name, GH_PUSH_SRC) != 0) {
		git_error_set_str(GIT_ERROR_REFERENCE, "no such reference in the push");
		return GIT_ENOTFOUND;
	}
	*out = git_reference__alloc(name, &m->id, NULL);
	return *out != NULL ? 0 : -1;
}

/* A listing of the store: GH_PUSH_SRC when it matches glob (the
 * packbuilder lists the tags, to pack those that point into the pack). */
struct gh_memref_iter {
	git_reference_iterator it; /* first: libgit2 hands back &it */
	struct gh_memref *m;
	int done;
};

static int
gh_memref_next(git_reference **out, git_reference_iterator *it)
{
	struct gh_memref_iter *i = (struct gh_memref_iter *)it;

	if (i->done)
		return GIT_ITEROVER;
	i->done = 1;
	*out = git_reference__alloc(GH_PUSH_SRC, &i->m->id, NULL);
	return *out != NULL ? 0 : -1;
}

static int
gh_memref_next_name(const char **out, git_reference_iterator *it)
{
	struct gh_memref_iter *i = (struct gh_memref_iter *)it;

	if (i->done)
		return GIT_ITEROVER;
	i->done = 1;
	*out = GH_PUSH_SRC;
	return 0;
}

static void
gh_memref_iter_free(git_reference_iterator *it)
{
	free(it);
}

static int
gh_memref_iterator(git_reference_iterator **out, git_refdb_backend *be, const char *glob)
{
	struct gh_memref_iter *i;

	if ((i = calloc(1, sizeof(*i))) == NULL) {
		git_error_set_oom();
		return -1;
	}
	i->it.next = gh_memref_next;
	i->it.next_name = gh_memref_next_name;
	i->it.free = gh_memref_iter_free;
	i->m = (struct gh_memref *)be;
	i->done = glob != NULL && fnmatch(glob, GH_PUSH_SRC, 0) != 0;
	*out = &i->it;
	return 0;
}

static int
gh_memref_write(git_refdb_backend *be, const git_reference *ref, int force,
                const git_signature *who, const char *message, const git_oid *old,
                const char *old_target)
{
	(void)be, (void)ref, (void)force, (void)who, (void)message, (void)old, (void)old_target;
	return gh_memref_none();
}

static int
gh_memref_rename(git_reference **out, git_refdb_backend *be, const char *old_name,
                 const char *new_name, int force, const git_signature *who, const char *message)
{
	(void)out, (void)be, (void)old_name, (void)new_name, (void)force, (void)who, (void)message;
	return gh_memref_none();
}

static int
gh_memref_del(git_refdb_backend *be, const char *name, const git_oid *old_id,
              const char *old_target)
{
	(void)be, (void)name, (void)old_id, (void)old_target;
	return gh_memref_none();
}

static int
gh_memref_has_log(git_refdb_backend *be, const char *name)
{
	(void)be, (void)name;
	return 0;
}

static int
gh_memref_ensure_log(git_refdb_backend *be, const char *name)
{
	(void)be, (void)name;
	return 0;
}

static void
gh_memref_free(git_refdb_backend *be)
{
	free(be);
}

static int
gh_memref_reflog_read(git_reflog **out, git_refdb_backend *be, const char *name)
{
	(void)out, (void)be, (void)name;
	return gh_memref_none();
}

static int
gh_memref_reflog_write(git_refdb_backend *be, git_reflog *reflog)
{
	(void)be, (void)reflog;
	return gh_memref_none();
}

static int
gh_memref_reflog_rename(git_refdb_backend *be, const char *old_name, const char *new_name)
{
	(void)be, (void)old_name, (void)new_name;
	return gh_memref_none();
}

static int
gh_memref_reflog_delete(git_refdb_backend *be, const char *name)
{
	(void)be, (void)name;
	return gh_memref_none();
}

/* repo's reference store replaced by one that holds GH_PUSH_SRC at id. */
static int
gh_memref_install(git_repository *repo, const git_oid *id)
{
	struct gh_memref *m;
	git_refdb *db;

	if ((m = calloc(1, sizeof(*m))) == NULL) {
		git_error_set_oom();
		return -1;
	}
	git_refdb_init_backend(&m->be, GIT_REFDB_BACKEND_VERSION);
	m->be.exists = gh_memref_exists;
	m->be.lookup = gh_memref_lookup;
	m->be.iterator = gh_memref_iterator;
	m->be.write = gh_memref_write;
	m->be.rename = gh_memref_rename;
	m->be.del = gh_memref_del;
	m->be.has_log = gh_memref_has_log;
	m->be.ensure_log = gh_memref_ensure_log;
	m->be.free = gh_memref_free;
	m->be.reflog_read = gh_memref_reflog_read;
	m->be.reflog_write = gh_memref_reflog_write;
	m->be.reflog_rename = gh_memref_reflog_rename;
	m->be.reflog_delete = gh_memref_reflog_delete;
	git_oid_cpy(&m->id, id);
	if (git_refdb_new(&db, repo) != 0) {
		free(m);
		return -1;
	}
	if (git_refdb_set_backend(db, &m->be) != 0) { /* on success db owns m */
		free(m);
		git_refdb_free(db);
		return -1;
	}
	if (git_repository_set_refdb(repo, db) != 0) {
		git_refdb_free(db);
		return -1;
	}
	git_refdb_free(db);
	return 0;
}

/* ---- the commit ------------------------------------------------------------ */

/* b, a backend of the mirror's objects, added to odb at prio unable to
 * write an object, or to refresh the time of one that is there. */
static int
gh_push_add_ro(git_odb *odb, git_odb_backend *b, int prio)
{
	b->write = NULL;
	b->writestream = NULL;
	b->writepack = NULL;
	b->writemidx = NULL;
	b->freshen = NULL; /* libgit2 then asks exists() */
	if (git_odb_add_backend(odb, b, prio) != 0) {
		b->free(b);
		return -1;
	}
	return 0;
}

/*
 * repo's object store: the mirror's packs and loose objects, read-only,
 * behind an in-memory store (a mempack) that every object written goes
 * to.  An object that is already in the mirror is not written again, and
 * the mirror's files are not even touched (libgit2's own store would
 * refresh a pack's time, as git does).
 */
static int
gh_push_odb(git_repository *repo, const char *mirror)
{
	char objects[PATH_MAX];
	git_odb_backend *b;
	git_odb *odb;
	int rc = -1;

	if (fmt_ok(objects, sizeof(objects), "%s/objects", mirror) == -1) {
		git_error_set_str(GIT_ERROR_ODB, "the mirror's path is too long");
		return -1;
	}
	if (git_odb_new(&odb) != 0)
		return -1;
	if (git_odb_backend_pack(&b, objects) == 0 && gh_push_add_ro(odb, b, 2) == 0 &&
	    git_odb_backend_loose(&b, objects, -1, 0, 0, 0) == 0 &&
	    gh_push_add_ro(odb, b, 1) == 0 && git_mempack_new(&b) == 0) {
		if ((rc = git_odb_add_backend(odb, b, 1000)) != 0)
			b->free(b);
	}
	if (rc == 0)
		rc = git_repository_set_odb(repo, odb);
	git_odb_free(odb);
	return rc;
}

/* The mirror, opened bare (no search, no .git below it), with the object
 * store above. */
static int
gh_push_open(git_repository **out, const struct gh_push_req *q, char *err, size_t errsz)
{
	if (git_repository_open_ext(out, q->mirror,
	                            GIT_REPOSITORY_OPEN_NO_SEARCH | GIT_REPOSITORY_OPEN_NO_DOTGIT |
	                                GIT_REPOSITORY_OPEN_BARE,
	                            NULL) != 0 ||
	    gh_push_odb(*out, q->mirror) != 0)
		return gh_fail(err, errsz, "%s: the mirror: %s", q->branch, gh_git_error());
	return 0;
}

/* The base's tree with the patch applied, written (to memory): *tree. */
static int
gh_push_tree(git_repository *repo, git_commit *base, const void *patch, size_t len, git_tree **tree,
             const char *branch, char *err, size_t errsz)
{
	git_tree *bt = NULL;
	git_diff *diff = NULL;
	git_index *idx = NULL;
	git_oid id;
	int rv = -1;

	*tree = NULL;
	if (git_commit_tree(&bt, base) != 0)
		gh_fail(err, errsz, "%s: the base's tree: %s", branch, gh_git_error());
	else if (git_diff_from_buffer(&diff, (const char *)patch, len) != 0)
		gh_fail(err, errsz, "%s: reading the patch: %s", branch, gh_git_error());
	else if (git_apply_to_tree(&idx, repo, bt, diff, NULL) != 0)
		gh_fail(err, errsz, "%s: applying the patch: %s", branch, gh_git_error());
	else if (git_index_write_tree_to(&id, idx, repo) != 0 ||
	         git_tree_lookup(tree, repo, &id) != 0)
		gh_fail(err, errsz, "%s: the new tree: %s", branch, gh_git_error());
	else
		rv = 0;
	git_index_free(idx);
	git_diff_free(diff);
	git_tree_free(bt);
	return rv;
}

/* The run's commit (parent base, the patch applied to its tree): *id. */
static int
gh_push_commit(git_repository *repo, const struct gh_push_req *q, const void *patch, size_t len,
               git_oid *id, char *err, size_t errsz)
{
	git_commit *base = NULL;
	git_tree *tree = NULL;
	git_signature *sig = NULL;
	git_oid bid;
	int rv = -1;

	if (git_oid_fromstr(&bid, q->base) != 0 || git_commit_lookup(&base, repo, &bid) != 0)
		return gh_fail(err, errsz, "%s: base: %s", q->branch, gh_git_error());
	if (gh_push_tree(repo, base, patch, len, &tree, q->branch, err, errsz) == -1)
		goto out;
	if (git_signature_new(&sig, q->author_name, q->author_email, (git_time_t)q->when, 0) != 0) {
		gh_fail(err, errsz, "%s: the author: %s", q->branch, gh_git_error());
		goto out;
	}
	if (git_commit_create(id, repo, NULL, sig, sig, NULL, q->message, tree, 1,
	                      (const git_commit **)&base) != 0) {
		gh_fail(err, errsz, "%s: the commit: %s", q->branch, gh_git_error());
		goto out;
	}
	rv = 0;
out:
	git_signature_free(sig);
	git_tree_free(tree);
	git_commit_free(base);
	return rv;
}

/* ---- the push's callbacks -------------------------------------------------- */

/* The token, once, for the server that asks; asked again, it was refused. */
static int
gh_push_cred(git_credential **out, const char *url, const char *user_from_url, unsigned int allowed,
             void *payload)
{
	struct gh_pushctx *c = payload;

	(void)url;
	(void)user_from_url;
	if (c->req->token == NULL) {
		snprintf(c->why, sizeof(c->why),
		         "the server asks for credentials and the connection has no token");
		return GIT_EAUTH;
	}
	if (!(allowed & GIT_CREDENTIAL_USERPASS_PLAINTEXT)) {
		snprintf(c->why, sizeof(c->why),
		         "the server asks for credentials other than a token");
		return GIT_EAUTH;
	}
	if (c->answers++ > 0) {
		snprintf(c->why, sizeof(c->why), "the server refused the token");
		return GIT_EAUTH;
	}
	return git_credential_userpass_plaintext_new(out, c->req->username, c->req->token);
}

/* libgit2's verdict on the certificate stands; a refusal is noted. */
static int
gh_push_cert(git_cert *cert, int valid, const char *host, void *payload)
{
	struct gh_pushctx *c = payload;

	(void)cert;
	(void)host;
	c->badcert |= !valid;
	return GIT_PASSTHROUGH;
}

/* Keep the end of what the server says (a hook's words). */
static int
gh_push_said(const char *s, int len, void *payload)
{
	struct gh_pushctx *c = payload;

	gh_tail_keep(c->said, &c->saidlen, GH_PUSH_SAID_MAX, s, len > 0 ? (size_t)len : 0);
	return 0;
}

/*
 * What the pack is computed against, narrowed when the server has the
 * base: libgit2 1.5 hides every commit the server advertises from the walk
 * that decides what to send, and then reads the whole tree of each (a
 * repository's every branch and tag) to mark what the server has.  The
 * run's commit is the base's child, so when the base is one of the
 * advertised tips the base (and the branch's current commit) is all that
 * needs hiding: every other advertised id is made zero, which libgit2's
 * loop skips.  The advertisement is libgit2's (git_remote_ls returns the
 * entries the push reads), used for nothing after the pack.  When the base
 * is not advertised, nothing changes.
 */
static void
gh_push_narrow(struct gh_pushctx *c, const git_oid *branch_now)
{
	const git_remote_head **heads;
	size_t n, i;
	int has_base = 0;

	if (c->remote == NULL || git_remote_ls(&heads, &n, c->remote) != 0)
		return;
	for (i = 0; i < n && !has_base; i++)
		has_base = git_oid_equal(&heads[i]->oid, &c->base);
	if (!has_base)
		return;
	for (i = 0; i < n; i++)
		if (!git_oid_equal(&heads[i]->oid, &c->base) &&
		    !git_oid_equal(&heads[i]->oid, branch_now))
			memset(&((git_remote_head *)heads[i])->oid, 0, sizeof(git_oid));
}

/*
 * The lease, before anything is sent: the remote's branch (src) must be
 * where the lease says, or already at our commit (then nothing is sent
 * and the push ends with c->already).  Anything else ends the push with
 * the reason in c->why.
 */
static int
gh_push_negotiate(const git_push_update **u, size_t n, void *payload)
{
	struct gh_pushctx *c = payload;
	const char *b = c->req->branch;
	char now[GH_OID_HEX_MAX + 1];

	if (n != 1 || strcmp(u[0]->dst_refname, b) != 0) {
		snprintf(c->why, sizeof(c->why), "%s: libgit2 would update other references", b);
		return GIT_EUSER;
	}
	if (git_oid_equal(&u[0]->src, &c->commit)) {
		c->already = 1;
		return GIT_EUSER;
	}
	if (git_oid_equal(&u[0]->src, &c->lease)) {
		gh_push_narrow(c, &u[0]->src);
		return 0;
	}
	git_oid_tostr(now, sizeof(now), &u[0]->src);
	if (git_oid_is_zero(&u[0]->src))
		snprintf(
		    c->why, sizeof(c->why),
		    "the branch %s is no longer on the remote (someone deleted it); not pushed", b);
	else if (git_oid_is_zero(&c->lease))
		snprintf(c->why, sizeof(c->why),
		         "the branch %s already exists on the remote (at %s) and this run did not "
		         "push it; it is left as it is",
		         b, now);
	else
		snprintf(
		    c->why, sizeof(c->why),
		    "the branch %s was moved by someone else (now at %s, not at %s, which this run "
		    "pushed); their commits are left as they are",
		    b, now, c->req->lease);
	return GIT_EUSER;
}

/* The server's word on the branch: NULL status is success. */
static int
gh_push_status(const char *ref, const char *status, void *payload)
{
	struct gh_pushctx *c = payload;

	if (strcmp(ref, c->req->branch) != 0)
		return 0;
	c->reported = 1;
	if (status != NULL)
		snprintf(c->refused, sizeof(c->refused), "%s",
		         status[0] != '\0' ? status : "refused");
	return 0;
}

/* ---- the push -------------------------------------------------------------- */

/* s made one printable line in place, runs of blanks and controls one space. */
static void
gh_push_oneline(char *s)
{
	char *w = s, *r;
	int blank = 1;

	for (r = s; *r != '\0'; r++) {
		unsigned char ch = (unsigned char)*r;

		if (ch <= 0x20 || ch == 0x7f) {
			if (!blank)
				*w++ = ' ';
			blank = 1;
			continue;
		}
		*w++ = (char)ch;
		blank = 0;
	}
	if (w > s && w[-1] == ' ')
		w--;
	*w = '\0';
}

/* The reason of a push that failed (rc from libgit2), into err. */
static void
gh_push_reason(struct gh_pushctx *c, int rc, char *err, size_t errsz)
{
	const char *b = c->req->branch;

	if (c->why[0] != '\0')
		gh_fail(err, errsz, "%s%s%s", strstr(c->why, b) != NULL ? "" : b,
		        strstr(c->why, b) != NULL ? "" : ": ", c->why);
	else if (c->badcert)
		gh_fail(err, errsz, "%s: the server's certificate is not trusted (%s)", b,
		        gh_git_error());
	else if (rc == 0 && c->refused[0] != '\0') {
		gh_push_oneline(c->said);
		gh_fail(err, errsz, "%s: the server refused the update: %s%s%.200s%s", b,
		        c->refused, c->said[0] != '\0' ? " (the server said: " : "", c->said,
		        c->said[0] != '\0' ? ")" : "");
	} else if (rc == 0)
		gh_fail(err, errsz, "%s: the server did not report on the update", b);
	else
		gh_fail(err, errsz, "%s: push: %s", b, gh_git_error());
}

/* The remote for the URL alone: no name, so no configured remote, push URL
 * or refspec applies, and no URL rewriting from the mirror's config. */
static int
gh_push_remote(git_remote **out, git_repository *repo, const struct gh_push_req *q, char *err,
               size_t errsz)
{
	git_remote_create_options co;

	git_remote_create_options_init(&co, GIT_REMOTE_CREATE_OPTIONS_VERSION);
	co.repository = repo;
	co.name = NULL;
	co.flags = GIT_REMOTE_CREATE_SKIP_INSTEADOF | GIT_REMOTE_CREATE_SKIP_DEFAULT_FETCHSPEC;
	if (git_remote_create_with_opts(out, q->url, &co) != 0)
		return gh_fail(err, errsz, "%s: the remote: %s", q->branch, gh_git_error());
	return 0;
}

/* Push c->commit (GH_PUSH_SRC in repo) to the branch under the lease. */
static int
gh_push_send(git_repository *repo, struct gh_pushctx *c, char *err, size_t errsz)
{
	char spec[GH_REF_MAX + 64];
	char *specs[] = {spec};
	git_strarray refspecs = {specs, 1};
	git_push_options po;
	git_remote *remote;
	int rc;

	snprintf(spec, sizeof(spec), "+%s:%s", GH_PUSH_SRC, c->req->branch);
	if (gh_push_remote(&remote, repo, c->req, err, errsz) == -1)
		return -1;
	c->remote = remote;
	git_push_options_init(&po, GIT_PUSH_OPTIONS_VERSION);
	po.callbacks.credentials = gh_push_cred;
	po.callbacks.certificate_check = gh_push_cert;
	po.callbacks.sideband_progress = gh_push_said;
	po.callbacks.push_negotiation = gh_push_negotiate;
	po.callbacks.push_update_reference = gh_push_status;
	po.callbacks.payload = c;
	po.proxy_opts.type = GIT_PROXY_NONE;
	po.follow_redirects = GIT_REMOTE_REDIRECT_NONE;
	rc = git_remote_upload(remote, &refspecs, &po);
	c->remote = NULL;
	git_remote_disconnect(remote);
	git_remote_free(remote);
	if (rc == GIT_EUSER && c->already)
		return 0;
	if (rc == 0 && c->reported && c->refused[0] == '\0')
		return 0;
	gh_push_reason(c, rc, err, errsz);
	return -1;
}

/* err made one printable line, with the token (should a server or libgit2
 * ever echo it) starred out. */
static void
gh_push_scrub(char *err, const char *token)
{
	char *t;
	size_t tl;

	gh_push_oneline(err);
	if (token == NULL || (tl = strlen(token)) == 0)
		return;
	for (t = err; (t = strstr(t, token)) != NULL; t += tl)
		memset(t, '*', tl);
}

/* The commit built in repo, then pushed; res filled in. */
static int
gh_push_build(const struct gh_push_req *q, const void *patch, size_t len, struct gh_push_res *res,
              char *err, size_t errsz)
{
	struct gh_pushctx *c;
	git_repository *repo = NULL;
	int rv = -1;

	if ((c = calloc(1, sizeof(*c))) == NULL)
		return gh_fail(err, errsz, "%s: out of memory", q->branch);
	c->req = q;
	if (git_oid_fromstr(&c->base, q->base) != 0) {
		gh_fail(err, errsz, "%s: the base: %s", q->branch, gh_git_error());
		goto out;
	}
	if (q->lease[0] != '\0' && git_oid_fromstr(&c->lease, q->lease) != 0) {
		gh_fail(err, errsz, "%s: the lease: %s", q->branch, gh_git_error());
		goto out;
	}
	if (gh_push_open(&repo, q, err, errsz) == -1 ||
	    gh_push_commit(repo, q, patch, len, &c->commit, err, errsz) == -1)
		goto out;
	git_oid_tostr(res->commit, sizeof(res->commit), &c->commit);
	if (gh_memref_install(repo, &c->commit) != 0) {
		gh_fail(err, errsz, "%s: the push's reference: %s", q->branch, gh_git_error());
		goto out;
	}
	if (gh_push_send(repo, c, err, errsz) == -1)
		goto out;
	res->already = c->already;
	rv = 0;
out:
	git_repository_free(repo);
	free(c);
	return rv;
}

int
gh_push(const struct gh_push_req *q, struct gh_push_res *res, char *err, size_t errsz)
{
	void *patch = NULL;
	size_t len = 0;
	int rv = -1;

	memset(res, 0, sizeof(*res));
	err[0] = '\0';
	if (gh_push_check(q, err, errsz) == -1)
		goto out;
	if (gh_git_init(err, errsz) == -1)
		goto out;
	if (gh_push_patch(q, &patch, &len, err, errsz) == 0) {
		if (len == 0) {
			res->empty = 1;
			rv = 0;
		} else
			rv = gh_push_build(q, patch, len, res, err, errsz);
	}
	if (patch != NULL)
		munmap(patch, len);
	git_libgit2_shutdown();
out:
	if (rv == -1) {
		res->commit[0] = '\0';
		res->already = 0;
		gh_push_scrub(err, q->token);
	}
	return rv;
}
