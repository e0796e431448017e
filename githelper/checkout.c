/*
 * Clone and sanitize a run's repository (githelper/checkout.h).
 */
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/util.h"
#include "githelper/checkout.h"
#include "githelper/mirror.h"
#include "tmpl/tmpl.h"

/* What the repository may not bring into the work tree's top level. */
static const char *const gh_stripped[] = {GH_STRIPPED_NAMES};

int
gh_fail(char *err, size_t errsz, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errsz, fmt, ap);
	va_end(ap);
	return -1;
}

void
gh_tail_keep(char *buf, size_t *len, size_t max, const char *p, size_t n)
{
	if (n >= max) {
		p += n - max;
		n = max;
	}
	if (*len + n > max) {
		size_t drop = *len + n - max;

		memmove(buf, buf + drop, *len - drop);
		*len -= drop;
	}
	memcpy(buf + *len, p, n);
	*len += n;
	buf[*len] = '\0';
}

/* libgit2's last error, for a message (it never holds the token: the token
 * is only ever in the credential object). */
const char *
gh_git_error(void)
{
	const git_error *e = git_error_last();

	return e != NULL && e->message != NULL ? e->message : "unknown error";
}

int
gh_remove_tree(int dfd, const char *name)
{
	return rmtree_at(dfd, name);
}

/* dir (named what in messages): absolute, an existing empty directory (not a
 * link to one). */
static int
gh_check_dir(const char *dir, const char *what, char *err, size_t errsz)
{
	struct stat st;
	struct dirent *de;
	DIR *d;
	int n = 0;

	if (dir[0] != '/')
		return gh_fail(err, errsz, "%s must be an absolute path", what);
	if (lstat(dir, &st) == -1)
		return gh_fail(err, errsz, "%s: %s", what, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return gh_fail(err, errsz, "%s is not a directory", what);
	if ((d = opendir(dir)) == NULL)
		return gh_fail(err, errsz, "%s: %s", what, strerror(errno));
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			n++;
	closedir(d);
	if (n > 0)
		return gh_fail(err, errsz, "%s is not empty", what);
	return 0;
}

/*
 * Every path of the index: relative, no "."/".." or empty component, not
 * under ".git", and no existing proper prefix of it in the work tree a
 * symbolic link.
 */
static int
gh_check_paths(git_repository *repo, const char *dir, char *err, size_t errsz)
{
	git_index *idx;
	const git_index_entry *e;
	char prefix[4096];
	const char *p, *c;
	struct stat st;
	size_t i, n, len;
	int dfd, rv = 0;

	if (git_repository_index(&idx, repo) != 0)
		return gh_fail(err, errsz, "index: %s", gh_git_error());
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) == -1) {
		git_index_free(idx);
		return gh_fail(err, errsz, "the workspace: %s", strerror(errno));
	}
	n = git_index_entrycount(idx);
	for (i = 0; rv == 0 && i < n; i++) {
		e = git_index_get_byindex(idx, i);
		p = e->path;
		if (p[0] == '/' || strlen(p) >= sizeof(prefix)) {
			rv = gh_fail(err, errsz, "the repository has a path that escapes");
			break;
		}
		for (c = p;; c += len + 1) {
			len = strcspn(c, "/");
			if (len == 0 || (len == 1 && c[0] == '.') ||
			    (len == 2 && c[0] == '.' && c[1] == '.') ||
			    (c == p && len == 4 && strncasecmp(c, ".git", 4) == 0)) {
				rv = gh_fail(err, errsz, "the repository has a path that escapes");
				break;
			}
			if (c[len] == '\0')
				break;
			/* a directory on the way must be a directory, not a link */
			memcpy(prefix, p, (size_t)(c - p) + len);
			prefix[(c - p) + len] = '\0';
			if (fstatat(dfd, prefix, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			    !S_ISDIR(st.st_mode)) {
				rv = gh_fail(err, errsz, "the repository has a path below a link");
				break;
			}
		}
	}
	close(dfd);
	git_index_free(idx);
	return rv;
}

int
gh_verify(const char *dir, char *err, size_t errsz)
{
	git_repository *repo;
	int rv;

	if (git_libgit2_init() < 0)
		return gh_fail(err, errsz, "libgit2: %s", gh_git_error());
	if (git_repository_open_ext(&repo, dir, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) != 0) {
		rv = gh_fail(err, errsz, "open: %s", gh_git_error());
	} else {
		rv = gh_check_paths(repo, dir, err, errsz);
		git_repository_free(repo);
	}
	git_libgit2_shutdown();
	return rv;
}

static int
gh_strip(const char *dir, char *err, size_t errsz)
{
	size_t i;
	int dfd;

	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) == -1)
		return gh_fail(err, errsz, "the workspace: %s", strerror(errno));
	for (i = 0; i < sizeof(gh_stripped) / sizeof(gh_stripped[0]); i++)
		if (gh_remove_tree(dfd, gh_stripped[i]) == -1) {
			close(dfd);
			return gh_fail(err, errsz, "removing %s: %s", gh_stripped[i],
			               strerror(errno));
		}
	close(dfd);
	return 0;
}

static void
gh_no_config(void)
{
	static const git_config_level_t levels[] = {GIT_CONFIG_LEVEL_PROGRAMDATA,
	                                            GIT_CONFIG_LEVEL_SYSTEM, GIT_CONFIG_LEVEL_XDG,
	                                            GIT_CONFIG_LEVEL_GLOBAL};
	size_t i;

	for (i = 0; i < sizeof(levels) / sizeof(levels[0]); i++)
		git_libgit2_opts(GIT_OPT_SET_SEARCH_PATH, levels[i], "");
}

int
gh_git_init(char *err, size_t errsz)
{
	if (git_libgit2_init() < 0)
		return gh_fail(err, errsz, "libgit2: %s", gh_git_error());
	/* no system, global or XDG configuration (proxies, URL rewrites,
	 * credential helpers): only what this call says */
	gh_no_config();
	/*
	 * A local source belongs to whoever made it, not to the helper's
	 * user.  git's owner check guards against running a stranger's
	 * configured programs (hooks, fsmonitor); libgit2 runs none, and only
	 * objects are read from the source.
	 */
	git_libgit2_opts(GIT_OPT_SET_OWNER_VALIDATION, 0);
	return 0;
}


/* ---- the workspace from the mirror --------------------------------------- */

/* ref: a full commit id in hex (40 or 64 lower-case digits). */
static int
gh_is_oid(const char *ref)
{
	size_t n = strlen(ref);

	return (n == 40 || n == 64) && strspn(ref, "0123456789abcdef") == n;
}

#define GH_MISSING (-2) /* a reference to an object the mirror does not hold */

/*
 * The reference full (a branch or a tag, annotated or not) as a commit:
 * 0, GIT_ENOTFOUND (no such reference), GH_MISSING (it names an object that
 * is not there: the mirror is damaged), or -1 (it is no commit).
 */
static int
gh_peel(git_repository *m, const char *full, git_oid *id)
{
	git_reference *r, *d = NULL;
	git_object *o;
	git_odb *odb;
	int rc, there = 1;

	if (git_reference_lookup(&r, m, full) != 0)
		return GIT_ENOTFOUND;
	rc = git_reference_peel(&o, r, GIT_OBJECT_COMMIT);
	if (rc != 0 && git_reference_resolve(&d, r) == 0 && git_repository_odb(&odb, m) == 0) {
		there = git_odb_exists(odb, git_reference_target(d));
		git_odb_free(odb);
	}
	git_reference_free(d);
	git_reference_free(r);
	if (rc != 0)
		return there ? -1 : GH_MISSING;
	git_oid_cpy(id, git_object_id(o));
	git_object_free(o);
	return 0;
}

/* The mirror's HEAD: its branch's short name and commit. */
static int
gh_resolve_head(git_repository *m, git_oid *id, char *name, size_t namesz, char *err,
                size_t errsz)
{
	char target[GH_REF_MAX + 32];
	git_reference *h;
	const char *t;
	int rc;

	if (git_reference_lookup(&h, m, "HEAD") != 0)
		return gh_fail(err, errsz, "the repository has no default branch");
	t = git_reference_type(h) == GIT_REFERENCE_SYMBOLIC ? git_reference_symbolic_target(h) : "";
	if (strncmp(t, "refs/heads/", 11) != 0 || fmt_ok(target, sizeof(target), "%s", t) == -1) {
		git_reference_free(h);
		return gh_fail(err, errsz, "the repository's HEAD is not a branch");
	}
	git_reference_free(h);
	if (fmt_ok(name, namesz, "%s", target + 11) == -1)
		return gh_fail(err, errsz, "the repository's default branch has too long a name");
	if ((rc = gh_peel(m, target, id)) == GH_MISSING) {
		gh_fail(err, errsz, "the default branch %s names a commit the mirror lacks", name);
		return GH_MISSING;
	}
	if (rc != 0)
		return gh_fail(err, errsz, "the repository's default branch %s has no commit",
		               name);
	return 0;
}

/*
 * ref in the mirror: "" for its default branch, a full commit id, a branch
 * or a tag (by its short name, branches first, or as refs/heads/... or
 * refs/tags/...).  *id gets the commit, name its short name (the commit id
 * for a commit), *branch whether it is a branch.  0, or -1 with err set, or
 * GH_MISSING when the mirror lacks what a reference names.
 */
static int
gh_resolve(git_repository *m, const char *ref, git_oid *id, char *name, size_t namesz,
           int *branch, char *err, size_t errsz)
{
	static const char *const prefixes[] = {"refs/heads/", "refs/tags/"};
	char full[GH_REF_MAX + 32];
	const char *why;
	git_commit *c;
	size_t i;
	int rc;

	*branch = 0;
	if (ref[0] == '\0') {
		*branch = 1;
		return gh_resolve_head(m, id, name, namesz, err, errsz);
	}
	if (gh_is_oid(ref)) {
		if (git_oid_fromstr(id, ref) != 0 || git_commit_lookup(&c, m, id) != 0)
			return gh_fail(err, errsz, "ref %s: no such commit in the repository", ref);
		git_commit_free(c);
		snprintf(name, namesz, "%s", ref);
		return 0;
	}
	/* the rules templates and submits are held to (tmpl/ref.c) */
	if ((why = tmpl_ref_problem(ref, strlen(ref))) != NULL)
		return gh_fail(err, errsz, "ref %.64s%s: %s", ref, strlen(ref) > 64 ? "..." : "",
		               why);
	for (i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
		if (strncmp(ref, "refs/", 5) == 0 && strncmp(ref, prefixes[i], strlen(prefixes[i])))
			continue;
		snprintf(full, sizeof(full), "%s%s", strncmp(ref, "refs/", 5) == 0 ? "" : prefixes[i],
		         ref);
		if ((rc = gh_peel(m, full, id)) == GIT_ENOTFOUND)
			continue;
		if (rc == GH_MISSING) {
			gh_fail(err, errsz, "ref %s names a commit the mirror lacks", ref);
			return GH_MISSING;
		}
		if (rc != 0)
			return gh_fail(err, errsz, "ref %s does not name a commit", ref);
		*branch = i == 0;
		snprintf(name, namesz, "%s", full + strlen(prefixes[i]));
		return 0;
	}
	return gh_fail(err, errsz, "ref %s: no such branch, tag or commit in the repository", ref);
}

/* A libgit2 error that says the mirror's objects cannot be read. */
static int
gh_objects_broken(void)
{
	const git_error *e = git_error_last();

	return e != NULL && (e->klass == GIT_ERROR_ODB || e->klass == GIT_ERROR_ZLIB);
}

/* workdir/.git/objects/info/alternates: the mirror's objects, where the
 * sandbox sees them. */
static int
gh_write_alternates(const char *workdir, char *err, size_t errsz)
{
	static const char line[] = GH_SANDBOX_OBJECTS "\n";
	char p[4096];
	int fd;

	if (fmt_ok(p, sizeof(p), "%s/.git/objects/info", workdir) == -1)
		return gh_fail(err, errsz, "the workspace's path is too long");
	if (mkdir(p, 0755) == -1 && errno != EEXIST)
		return gh_fail(err, errsz, "the workspace's .git: %s", strerror(errno));
	if (fmt_ok(p, sizeof(p), "%s/.git/objects/info/alternates", workdir) == -1)
		return gh_fail(err, errsz, "the workspace's path is too long");
	if ((fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644)) == -1)
		return gh_fail(err, errsz, "the workspace's alternates: %s", strerror(errno));
	if (write(fd, line, sizeof(line) - 1) != (ssize_t)(sizeof(line) - 1)) {
		close(fd);
		return gh_fail(err, errsz, "the workspace's alternates: %s", strerror(errno));
	}
	return close(fd);
}

/*
 * The work tree of commit id written into the new repository ws (whose
 * objects are read from the mirror's, mobjects, in memory only), its index
 * and its HEAD: the branch name when branch, else detached at id.
 */
static int
gh_write_tree(git_repository *ws, const char *mobjects, const git_oid *id, const char *name,
              int branch, char *err, size_t errsz)
{
	git_checkout_options co;
	git_reference *r = NULL;
	git_commit *c = NULL;
	git_tree *t = NULL;
	git_odb *odb = NULL;
	char full[GH_REF_MAX + 32];
	int rv = -1;

	if (git_repository_odb(&odb, ws) != 0 || git_odb_add_disk_alternate(odb, mobjects) != 0) {
		gh_fail(err, errsz, "the mirror's objects: %s", gh_git_error());
		goto out;
	}
	if (git_commit_lookup(&c, ws, id) != 0 || git_commit_tree(&t, c) != 0) {
		gh_fail(err, errsz, "the base commit: %s", gh_git_error());
		goto out;
	}
	snprintf(full, sizeof(full), "refs/heads/%s", name);
	if (branch ? git_reference_create(&r, ws, full, id, 0, "checkout") != 0
	           : git_repository_set_head_detached(ws, id) != 0) {
		gh_fail(err, errsz, "HEAD: %s", gh_git_error());
		goto out;
	}
	git_checkout_options_init(&co, GIT_CHECKOUT_OPTIONS_VERSION);
	co.checkout_strategy = GIT_CHECKOUT_FORCE;
	if (git_checkout_tree(ws, (const git_object *)t, &co) != 0) {
		gh_fail(err, errsz, "checkout: %s", gh_git_error());
		goto out;
	}
	rv = 0;
out:
	git_reference_free(r);
	git_tree_free(t);
	git_commit_free(c);
	git_odb_free(odb);
	return rv;
}

int
gh_workspace(const char *mirror, const char *ref, const char *workdir, const char *url,
             char *base, char *refname, char *err, size_t errsz)
{
	git_repository_init_options io;
	git_repository *m = NULL, *ws = NULL;
	char mobjects[4096], name[GH_REF_MAX + 1];
	git_oid id;
	int branch, rc, rv = -1, broken = 0;

	base[0] = refname[0] = '\0';
	if (mirror[0] != '/')
		return gh_fail(err, errsz, "the mirror must be an absolute path");
	if (gh_check_dir(workdir, "the workspace", err, errsz) == -1)
		return -1;
	if (fmt_ok(mobjects, sizeof(mobjects), "%s/objects", mirror) == -1)
		return gh_fail(err, errsz, "the mirror's path is too long");
	if (gh_git_init(err, errsz) == -1)
		return -1;
	if (git_repository_open_ext(&m, mirror,
	                            GIT_REPOSITORY_OPEN_NO_SEARCH | GIT_REPOSITORY_OPEN_NO_DOTGIT |
	                                GIT_REPOSITORY_OPEN_BARE,
	                            NULL) != 0) {
		gh_fail(err, errsz, "the mirror: %s", gh_git_error());
		goto out;
	}
	if ((rc = gh_resolve(m, ref, &id, name, sizeof(name), &branch, err, errsz)) != 0) {
		broken = rc == GH_MISSING || gh_objects_broken();
		goto out;
	}
	git_repository_init_options_init(&io, GIT_REPOSITORY_INIT_OPTIONS_VERSION);
	io.flags = GIT_REPOSITORY_INIT_NO_REINIT;
	io.initial_head = branch ? name : NULL;
	io.origin_url = url;
	if (git_repository_init_ext(&ws, workdir, &io) != 0) {
		gh_fail(err, errsz, "the workspace's repository: %s", gh_git_error());
		goto out;
	}
	if (gh_write_tree(ws, mobjects, &id, name, branch, err, errsz) == -1) {
		broken = gh_objects_broken();
		goto out;
	}
	if (gh_check_paths(ws, workdir, err, errsz) == -1 || gh_strip(workdir, err, errsz) == -1 ||
	    gh_write_alternates(workdir, err, errsz) == -1)
		goto out;
	git_oid_tostr(base, GH_OID_HEX_MAX + 1, &id);
	snprintf(refname, GH_REF_MAX + 1, "%s", name);
	rv = 0;
out:
	if (broken && gh_mark_damaged(mirror) == 0)
		snprintf(err + strlen(err), errsz - strlen(err),
		         " (the mirror is damaged; the next fetch rebuilds it)");
	git_repository_free(ws);
	git_repository_free(m);
	git_libgit2_shutdown();
	return rv;
}
