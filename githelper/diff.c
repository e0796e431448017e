/*
 * The run's change as a patch (githelper/diff.h).
 *
 * libgit2 reads the work tree through its work-directory iterator, which
 * lstat()s every entry, skips what is neither a file, a directory nor a
 * link, never descends into a link, and skips every entry named ".git".
 * What it does not guard: it opens each directory's .gitignore and
 * .gitattributes with open(2), following links, so one that is a FIFO (or
 * a link to one) blocks the diff forever.  gh_diff_scan walks the tree
 * first and refuses those, and every FIFO, socket or device besides,
 * with its path: a patch cannot carry one, and libgit2 would silently show
 * a tracked file replaced by one as deleted.
 */
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <git2/sys/mempack.h>
#include <git2/sys/odb_backend.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/log.h"
#include "githelper/checkout.h"
#include "githelper/diff.h"
#include "githelper/stat.h"

#define GH_DIFF_MAX_DEPTH 128

/* Left out of the patch at the top of the tree, on both sides. */
static const char *const gh_diff_excluded[] = {GH_STRIPPED_NAMES};

/* Files git reads its own settings from, in any directory of the tree. */
static const char *const gh_diff_settings[] = {".gitignore", ".gitattributes", ".gitmodules"};

struct gh_out {
	int fd;
	size_t cap;
	size_t n;   /* bytes written */
	int over;   /* the patch would exceed cap */
	int werrno; /* write(2) failed with this */
};

/* "PATH: why", the path made printable so that err stays one line. */
static int
gh_diff_fail_path(char *err, size_t errsz, const char *path, const char *why)
{
	char p[256];
	size_t i;

	for (i = 0; i < sizeof(p) - 1 && path[i] != '\0'; i++)
		p[i] = (unsigned char)path[i] < 0x20 || path[i] == 0x7f ? '?' : path[i];
	p[i] = '\0';
	return gh_fail(err, errsz, "%s%s: %s", i > 0 ? p : ".", path[i] != '\0' ? "..." : "", why);
}

static int
gh_diff_is_dot_git(const char *name)
{
	return strcasecmp(name, ".git") == 0;
}

/* name: one of the top-level names left out of the patch. */
static int
gh_diff_is_excluded(const char *name, size_t len)
{
	size_t i;

	if (len == 4 && strncasecmp(name, ".git", 4) == 0)
		return 1;
	for (i = 0; i < sizeof(gh_diff_excluded) / sizeof(gh_diff_excluded[0]); i++)
		if (strlen(gh_diff_excluded[i]) == len &&
		    memcmp(name, gh_diff_excluded[i], len) == 0)
			return 1;
	return 0;
}

static int
gh_diff_is_settings(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(gh_diff_settings) / sizeof(gh_diff_settings[0]); i++)
		if (strcmp(name, gh_diff_settings[i]) == 0)
			return 1;
	return 0;
}

static int gh_diff_scan_dir(int dfd, char *path, size_t plen, int depth, struct gh_stat *list,
                            char *err, size_t errsz);

/* One entry of the directory dfd (whose path is path[0..plen)). */
static int
gh_diff_scan_entry(int dfd, const char *name, char *path, size_t plen, int depth,
                   struct gh_stat *list, char *err, size_t errsz)
{
	struct stat st;
	size_t nlen = strlen(name);
	int fd;

	if (plen + nlen + 2 > PATH_MAX)
		return gh_diff_fail_path(err, errsz, path, "path too long");
	if (plen > 0)
		path[plen++] = '/';
	memcpy(path + plen, name, nlen + 1);
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == -1)
		return gh_diff_fail_path(err, errsz, path, strerror(errno));
	if (S_ISREG(st.st_mode)) {
		(void)gh_stat_check(list, path, &st);
		return 0;
	}
	if (S_ISLNK(st.st_mode)) {
		if (gh_diff_is_settings(name))
			return gh_diff_fail_path(err, errsz, path, "a link where git reads settings");
		(void)gh_stat_check(list, path, &st);
		return 0;
	}
	if (!S_ISDIR(st.st_mode))
		return gh_diff_fail_path(err, errsz, path,
		                         S_ISFIFO(st.st_mode) ? "a FIFO, which a patch cannot carry"
		                         : S_ISSOCK(st.st_mode)
		                             ? "a socket, which a patch cannot carry"
		                             : "a device, which a patch cannot carry");
	if (depth >= GH_DIFF_MAX_DEPTH)
		return gh_diff_fail_path(err, errsz, path, "too deep");
	if ((fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) == -1)
		return gh_diff_fail_path(err, errsz, path, strerror(errno));
	return gh_diff_scan_dir(fd, path, plen + nlen, depth + 1, list, err, errsz);
}

/*
 * Walk the directory fd (taken over and closed), never following a link:
 * every entry a file, a directory or a link, and no link named like a
 * settings file.  Entries named ".git" are not entered (libgit2 skips them
 * too), nor the excluded names at the top (libgit2 is told to ignore them).
 */
static int
gh_diff_scan_dir(int fd, char *path, size_t plen, int depth, struct gh_stat *list, char *err,
                 size_t errsz)
{
	struct dirent *de;
	DIR *d;
	int rv = 0;

	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return gh_diff_fail_path(err, errsz, path, strerror(errno));
	}
	while (rv == 0 && (de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
		    gh_diff_is_dot_git(de->d_name) ||
		    (depth == 0 && gh_diff_is_excluded(de->d_name, strlen(de->d_name))))
			continue;
		rv = gh_diff_scan_entry(dirfd(d), de->d_name, path, plen, depth, list, err, errsz);
		path[plen] = '\0';
	}
	closedir(d);
	return rv;
}

static int
gh_diff_scan(const char *workdir, struct gh_stat *list, char *err, size_t errsz)
{
	char path[PATH_MAX];
	int fd;

	if ((fd = open(workdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) == -1)
		return gh_fail(err, errsz, "the workspace: %s", strerror(errno));
	path[0] = '\0';
	return gh_diff_scan_dir(fd, path, 0, 0, list, err, errsz);
}

/*
 * The tree of the commit base (full hex id) in *out, without the excluded
 * top-level entries.  A tree that had some is written to an in-memory
 * object store put in front of the repository's: nothing is written to
 * gitdir.  *out is the caller's to free.
 */
static int
gh_diff_base_tree(git_repository *repo, const char *base, git_tree **out, char *err, size_t errsz)
{
	git_object *obj;
	git_oid id;
	git_tree *tree;
	git_treebuilder *tb;
	git_odb_backend *mem;
	git_odb *odb;
	size_t i, n;
	int rv = -1, cut = 0;

	*out = NULL;
	if (strlen(base) != GIT_OID_HEXSZ || strspn(base, "0123456789abcdef") != GIT_OID_HEXSZ ||
	    git_oid_fromstr(&id, base) != 0)
		return gh_fail(err, errsz, "base is not a full commit id");
	if (git_object_lookup(&obj, repo, &id, GIT_OBJECT_ANY) != 0)
		return gh_fail(err, errsz, "base: %s", gh_git_error());
	if (git_object_type(obj) != GIT_OBJECT_COMMIT) {
		git_object_free(obj);
		return gh_fail(err, errsz, "base is not a commit");
	}
	if (git_commit_tree(&tree, (git_commit *)obj) != 0) {
		git_object_free(obj);
		return gh_fail(err, errsz, "base tree: %s", gh_git_error());
	}
	git_object_free(obj);
	n = git_tree_entrycount(tree);
	for (i = 0; i < n; i++) {
		const char *name = git_tree_entry_name(git_tree_entry_byindex(tree, i));

		cut += gh_diff_is_excluded(name, strlen(name));
	}
	if (cut == 0) {
		*out = tree;
		return 0;
	}
	if (git_repository_odb(&odb, repo) != 0) {
		git_tree_free(tree);
		return gh_fail(err, errsz, "odb: %s", gh_git_error());
	}
	if (git_mempack_new(&mem) != 0) {
		gh_fail(err, errsz, "odb: %s", gh_git_error());
		goto out;
	}
	if (git_odb_add_backend(odb, mem, 1000) != 0) {
		mem->free(mem);
		gh_fail(err, errsz, "odb: %s", gh_git_error());
		goto out;
	}
	if (git_treebuilder_new(&tb, repo, tree) != 0) {
		gh_fail(err, errsz, "base tree: %s", gh_git_error());
		goto out;
	}
	for (i = 0; i < n; i++) {
		const char *name = git_tree_entry_name(git_tree_entry_byindex(tree, i));

		if (gh_diff_is_excluded(name, strlen(name)))
			git_treebuilder_remove(tb, name);
	}
	if (git_treebuilder_write(&id, tb) == 0 && git_tree_lookup(out, repo, &id) == 0)
		rv = 0;
	else
		gh_fail(err, errsz, "base tree: %s", gh_git_error());
	git_treebuilder_free(tb);
out:
	git_odb_free(odb);
	git_tree_free(tree);
	return rv;
}

/* Drop a delta under an excluded name (none should reach here: the base
 * tree has none and the work tree's are ignored; this makes sure). */
static int
gh_diff_notify(const git_diff *diff, const git_diff_delta *d, const char *spec, void *payload)
{
	const char *o = d->old_file.path, *n = d->new_file.path;

	(void)diff;
	(void)spec;
	(void)payload;
	return (o != NULL && gh_diff_is_excluded(o, strcspn(o, "/"))) ||
	       (n != NULL && gh_diff_is_excluded(n, strcspn(n, "/")));
}

/* Write len bytes of p, or note that the patch outgrew the cap. */
static int
gh_out_write(struct gh_out *o, const char *p, size_t len)
{
	if (len > o->cap - o->n) {
		o->over = 1;
		return -1;
	}
	while (len > 0) {
		ssize_t w = write(o->fd, p, len);

		if (w == -1) {
			if (errno == EINTR)
				continue;
			o->werrno = errno;
			return -1;
		}
		p += w;
		len -= (size_t)w;
		o->n += (size_t)w;
	}
	return 0;
}

/* One line of the patch, as git_diff_to_buf would print it. */
static int
gh_diff_line(const git_diff_delta *d, const git_diff_hunk *h, const git_diff_line *l, void *payload)
{
	struct gh_out *o = payload;
	char c = l->origin;

	(void)d;
	(void)h;
	if ((c == GIT_DIFF_LINE_CONTEXT || c == GIT_DIFF_LINE_ADDITION ||
	     c == GIT_DIFF_LINE_DELETION) &&
	    gh_out_write(o, &c, 1) == -1)
		return -1;
	return gh_out_write(o, l->content, l->content_len);
}

/*
 * An index of the tree in memory, whose entries found clean in the list
 * carry the lstat they were listed with: git's stat cache, made from what
 * the chowner saw before the sandbox existed, never from the workspace's
 * own .git/index.  libgit2 then hashes only the entries whose lstat
 * differs; the others keep the tree's id.  The rest of the entries carry
 * no stat (zeros), which never matches a file: they are hashed.
 */
static int
gh_diff_index(git_tree *tree, struct gh_stat *list, git_index **out, char *err, size_t errsz)
{
	const git_index_entry *e;
	git_index_entry ne;
	struct gh_stat_ent *r;
	git_index *idx;
	size_t i, n;

	*out = NULL;
	if (git_index_new(&idx) != 0 || git_index_read_tree(idx, tree) != 0) {
		git_index_free(idx);
		return gh_fail(err, errsz, "the base's index: %s", gh_git_error());
	}
	n = git_index_entrycount(idx);
	for (i = 0; i < n; i++) {
		if ((e = git_index_get_byindex(idx, i)) == NULL ||
		    (r = gh_stat_find(list, e->path)) == NULL || !r->clean)
			continue;
		/* the same truncations as libgit2's own entries from lstat */
		ne = *e;
		ne.ctime.seconds = (int32_t)r->cs;
		ne.ctime.nanoseconds = (uint32_t)r->cns;
		ne.mtime.seconds = (int32_t)r->ms;
		ne.mtime.nanoseconds = (uint32_t)r->mns;
		ne.dev = (uint32_t)r->dev;
		ne.ino = (uint32_t)r->ino;
		ne.uid = r->uid;
		ne.gid = r->gid;
		ne.file_size = (uint32_t)r->size;
		if (git_index_add(idx, &ne) != 0) {
			git_index_free(idx);
			return gh_fail(err, errsz, "the base's index: %s", gh_git_error());
		}
	}
	*out = idx;
	return 0;
}

/* Diff the tree against the work tree of repo and print it to o: through
 * an index of the tree when the list knows files unchanged. */
static int
gh_diff_print(git_repository *repo, git_tree *tree, struct gh_stat *list, struct gh_out *o,
              char *err, size_t errsz)
{
	git_diff_options opts;
	git_diff *diff;
	git_index *idx = NULL;
	int rc;

	git_diff_options_init(&opts, GIT_DIFF_OPTIONS_VERSION);
	opts.flags = GIT_DIFF_INCLUDE_UNTRACKED | GIT_DIFF_RECURSE_UNTRACKED_DIRS |
	             GIT_DIFF_SHOW_UNTRACKED_CONTENT | GIT_DIFF_SHOW_BINARY;
	/* a gitlink would make libgit2 read .gitmodules and open the
	 * submodule's repository in the work tree */
	opts.ignore_submodules = GIT_SUBMODULE_IGNORE_ALL;
	opts.id_abbrev = GIT_OID_HEXSZ;
	opts.notify_cb = gh_diff_notify;
	if (list != NULL && list->nclean > 0 && gh_diff_index(tree, list, &idx, err, errsz) == -1)
		return -1;
	rc = idx != NULL ? git_diff_index_to_workdir(&diff, repo, idx, &opts)
	                 : git_diff_tree_to_workdir(&diff, repo, tree, &opts);
	git_index_free(idx);
	if (rc != 0)
		return gh_fail(err, errsz, "diff: %s", gh_git_error());
	rc = git_diff_print(diff, GIT_DIFF_FORMAT_PATCH, gh_diff_line, o);
	git_diff_free(diff);
	if (o->over)
		return gh_fail(err, errsz, "patch larger than %zu bytes", o->cap);
	if (o->werrno != 0)
		return gh_fail(err, errsz, "writing the patch: %s", strerror(o->werrno));
	if (rc != 0)
		return gh_fail(err, errsz, "diff: %s", gh_git_error());
	return 0;
}

/*
 * gitdir, opened as a bare repository (never a ".git" below it, no
 * search), with workdir as its work tree in memory only and the excluded
 * names ignored in memory (so libgit2 does not even enter them).
 */
static int
gh_diff_open(git_repository **out, const char *gitdir, const char *workdir, char *err, size_t errsz)
{
	char rules[128];
	size_t i, len = 0;

	for (i = 0; i < sizeof(gh_diff_excluded) / sizeof(gh_diff_excluded[0]); i++) {
		int n = snprintf(rules + len, sizeof(rules) - len, "/%s\n", gh_diff_excluded[i]);
		if (n < 0 || (size_t)n >= sizeof(rules) - len)
			return gh_fail(err, errsz, "ignore rules too long");
		len += (size_t)n;
	}
	if (git_repository_open_ext(out, gitdir,
	                            GIT_REPOSITORY_OPEN_NO_SEARCH | GIT_REPOSITORY_OPEN_NO_DOTGIT |
	                                GIT_REPOSITORY_OPEN_BARE,
	                            NULL) != 0)
		return gh_fail(err, errsz, "open: %s", gh_git_error());
	if (git_repository_set_workdir(*out, workdir, 0) != 0 ||
	    git_ignore_add_rule(*out, rules) != 0) {
		git_repository_free(*out);
		*out = NULL;
		return gh_fail(err, errsz, "open: %s", gh_git_error());
	}
	return 0;
}

int
gh_diff_listed(const char *gitdir, const char *workdir, const char *base, const char *stats,
               int outfd, size_t cap, size_t *written, char *err, size_t errsz)
{
	struct gh_out o = {outfd, cap, 0, 0, 0};
	git_repository *repo = NULL;
	git_tree *tree = NULL;
	struct gh_stat *list = NULL;
	char why[256];
	int rv = -1;

	*written = 0;
	if (gitdir[0] != '/' || workdir[0] != '/')
		return gh_fail(err, errsz,
		               "the repository and the workspace must be absolute paths");
	if (stats != NULL && stats[0] != '\0' &&
	    (list = gh_stat_load(stats, base, why, sizeof(why))) == NULL)
		log_info("the workspace's list: %s (every file is hashed)", why);
	if (gh_diff_scan(workdir, list, err, errsz) == -1)
		goto out;
	if (list != NULL)
		log_debug("the workspace's list: %zu of %zu listed entries unchanged", list->nclean,
		          list->n);
	if (gh_git_init(err, errsz) == -1)
		goto out;
	if (gh_diff_open(&repo, gitdir, workdir, err, errsz) == 0 &&
	    gh_diff_base_tree(repo, base, &tree, err, errsz) == 0 &&
	    gh_diff_print(repo, tree, list, &o, err, errsz) == 0)
		rv = 0;
	*written = o.n;
	git_tree_free(tree);
	git_repository_free(repo);
	git_libgit2_shutdown();
out:
	gh_stat_free(list);
	return rv;
}

int
gh_diff(const char *gitdir, const char *workdir, const char *base, int outfd, size_t cap,
        size_t *written, char *err, size_t errsz)
{
	return gh_diff_listed(gitdir, workdir, base, NULL, outfd, cap, written, err, errsz);
}
