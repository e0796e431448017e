/*
 * The git helper's checkout (githelper/checkout.c) against real local
 * repositories built here with libgit2: a clean clone records its base
 * commit; what a hostile repository ships to steer the agent or the daemon
 * (.claude/, .mcp.json, .agrippa as a directory or as a link to /) is gone
 * and nothing outside the workspace changed; paths that would escape are
 * refused; bad URLs and workspaces are refused before anything is written;
 * a token never reaches the clone's configuration.  The split layout
 * (gh_checkout_split): a bare trusted copy beside the work tree.
 */
#include <sys/stat.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <git2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "githelper/checkout.h"
#include "tests/unit/gitrepo.h"

struct fx {
	char root[64];   /* a fresh temporary directory */
	char src[128];   /* the source repository */
	char ws[128];    /* the workspace */
	char canary[128]; /* a file outside the workspace that must not change */
};

static void
write_file(const char *path, const char *s)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(s, f);
	fclose(f);
}

static char *
read_file(const char *path)
{
	static char buf[4096];
	FILE *f = fopen(path, "r");
	size_t n;

	if (f == NULL)
		return NULL;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}


static int
setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	strcpy(f->root, "/tmp/agrippa-checkout.XXXXXX");
	assert_non_null(mkdtemp(f->root));
	snprintf(f->src, sizeof(f->src), "%s/src", f->root);
	snprintf(f->ws, sizeof(f->ws), "%s/ws", f->root);
	snprintf(f->canary, sizeof(f->canary), "%s/canary", f->root);
	assert_int_equal(mkdir(f->ws, 0755), 0);
	write_file(f->canary, "untouched\n");
	git_libgit2_init();
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fx *f = *state;
	int fd = open("/tmp", O_RDONLY | O_DIRECTORY);

	gh_remove_tree(fd, f->root + strlen("/tmp/"));
	close(fd);
	git_libgit2_shutdown();
	free(f);
	return 0;
}

static void
assert_canary(const struct fx *f)
{
	assert_string_equal(read_file(f->canary), "untouched\n");
}

/* A clean repository: its files, its base commit, nothing stripped that
 * should stay, and a remote URL without any token. */
static void
t_clean_clone(void **state)
{
	struct fx *f = *state;
	static const struct file files[] = {
	    {"README.md", "hello\n", 0100644, 0},
	    {"src/main.c", "int main(void) { return 0; }\n", 0100644, 0},
	    {"docs/.claude-notes", "not stripped: only top-level names are\n", 0100644, 0},
	};
	char want[GH_OID_HEX_MAX + 1], base[GH_OID_HEX_MAX + 1], err[256], cfg[256];
	char *c;

	make_repo(f->src, files, 3, want);
	assert_int_equal(gh_checkout(f->src, "tok-SECRET", f->ws, base, err, sizeof(err)), 0);
	assert_string_equal(base, want);
	assert_int_equal((int)strlen(base), 40);
	snprintf(cfg, sizeof(cfg), "%s/src/main.c", f->ws);
	assert_string_equal(read_file(cfg), "int main(void) { return 0; }\n");
	snprintf(cfg, sizeof(cfg), "%s/docs/.claude-notes", f->ws);
	assert_non_null(read_file(cfg));
	snprintf(cfg, sizeof(cfg), "%s/.git/config", f->ws);
	assert_non_null(c = read_file(cfg));
	assert_null(strstr(c, "SECRET"));
	assert_non_null(strstr(c, f->src));
}

/* file:// URLs work the same way. */
static void
t_file_url(void **state)
{
	struct fx *f = *state;
	static const struct file files[] = {{"a", "a\n", 0100644, 0}};
	char want[GH_OID_HEX_MAX + 1], base[GH_OID_HEX_MAX + 1], err[256], url[256];

	make_repo(f->src, files, 1, want);
	snprintf(url, sizeof(url), "file://%s", f->src);
	assert_int_equal(gh_checkout(url, NULL, f->ws, base, err, sizeof(err)), 0);
	assert_string_equal(base, want);
}

/* The clone's objects are its own: no hard link into the source. */
static void
t_no_hard_links(void **state)
{
	struct fx *f = *state;
	static const struct file files[] = {{"a", "a\n", 0100644, 0}, {"b", "b\n", 0100644, 0}};
	char want[GH_OID_HEX_MAX + 1], base[GH_OID_HEX_MAX + 1], err[256], p[512];

	make_repo(f->src, files, 2, want);
	assert_int_equal(gh_checkout(f->src, NULL, f->ws, base, err, sizeof(err)), 0);
	/* the clone has objects, and every regular file under .git has one link */
	snprintf(p, sizeof(p), "find %s/.git/objects -type f | grep -q .", f->ws);
	assert_int_equal(system(p), 0);
	snprintf(p, sizeof(p), "find %s/.git -type f -links +1 | grep -q .", f->ws);
	assert_int_not_equal(system(p), 0);
}

/* What a repository may not bring: all gone, whatever form it takes, and
 * the link to / was removed, not followed. */
static void
t_strip(void **state)
{
	struct fx *f = *state;
	static const struct file files[] = {
	    {".claude/settings.json", "{\"hooks\": {\"x\": \"rm -rf /\"}}\n", 0100644, 0},
	    {".claude/agents/a.md", "evil\n", 0100644, 0},
	    {".mcp.json", "{\"mcpServers\": {}}\n", 0100644, 0},
	    {".agrippa", "/", 0120000, 0},
	    {"keep.txt", "kept\n", 0100644, 0},
	};
	char want[GH_OID_HEX_MAX + 1], base[GH_OID_HEX_MAX + 1], err[256], p[256];
	struct stat st;
	const char *gone[] = {".claude", ".mcp.json", ".agrippa"};
	size_t i;

	make_repo(f->src, files, 5, want);
	assert_int_equal(gh_checkout(f->src, NULL, f->ws, base, err, sizeof(err)), 0);
	for (i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s/%s", f->ws, gone[i]);
		assert_int_equal(lstat(p, &st), -1);
	}
	snprintf(p, sizeof(p), "%s/keep.txt", f->ws);
	assert_string_equal(read_file(p), "kept\n");
	/* / is still there (the link was unlinked, not walked) */
	assert_int_equal(stat("/etc/passwd", &st), 0);
	assert_canary(f);
}

/* .agrippa as a link to a directory outside holding a file: the file stays. */
static void
t_strip_link_to_outside(void **state)
{
	struct fx *f = *state;
	char want[GH_OID_HEX_MAX + 1], base[GH_OID_HEX_MAX + 1], err[256], p[256];
	struct file files[] = {{".agrippa", f->root, 0120000, 0}, {"x", "x\n", 0100644, 0}};

	make_repo(f->src, files, 2, want);
	assert_int_equal(gh_checkout(f->src, NULL, f->ws, base, err, sizeof(err)), 0);
	snprintf(p, sizeof(p), "%s/.agrippa", f->ws);
	assert_int_equal(access(p, F_OK), -1);
	assert_canary(f);
	assert_int_equal(access(f->src, F_OK), 0);
}

/* Bad inputs are refused before anything is written. */
static void
t_refusals(void **state)
{
	struct fx *f = *state;
	static const struct file files[] = {{"a", "a\n", 0100644, 0}};
	char want[GH_OID_HEX_MAX + 1], base[GH_OID_HEX_MAX + 1], err[256], p[256];

	make_repo(f->src, files, 1, want);
	assert_int_equal(gh_checkout("ssh://host/repo", NULL, f->ws, base, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "URL"));
	assert_int_equal(gh_checkout("git://host/repo", NULL, f->ws, base, err, sizeof(err)), -1);
	assert_int_equal(gh_checkout("relative/path", NULL, f->ws, base, err, sizeof(err)), -1);
	assert_int_equal(
	    gh_checkout("https://user:pw@host/r.git", NULL, f->ws, base, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "without credentials"));
	assert_null(strstr(err, "pw"));
	assert_int_equal(gh_checkout("https:///r.git", NULL, f->ws, base, err, sizeof(err)), -1);
	assert_int_equal(gh_checkout(f->src, NULL, "relative/ws", base, err, sizeof(err)), -1);
	assert_int_equal(gh_checkout(f->src, NULL, f->canary, base, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not a directory"));
	/* a workspace that is not empty */
	snprintf(p, sizeof(p), "%s/old", f->ws);
	write_file(p, "stale\n");
	assert_int_equal(gh_checkout(f->src, NULL, f->ws, base, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not empty"));
	assert_string_equal(read_file(p), "stale\n");
	unlink(p);
	/* a workspace that is a link to a directory */
	snprintf(p, sizeof(p), "%s/wslink", f->root);
	assert_int_equal(symlink(f->ws, p), 0);
	assert_int_equal(gh_checkout(f->src, NULL, p, base, err, sizeof(err)), -1);
	assert_string_equal(base, "");
	/* a repository that does not exist */
	snprintf(p, sizeof(p), "%s/nope", f->root);
	assert_int_equal(gh_checkout(p, NULL, f->ws, base, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "clone"));
	assert_canary(f);
}

/* A raw tree object of one entry (mode as git writes it, e.g. "40000"),
 * written straight to the object database: no name is checked. */
static void
raw_tree(git_repository *repo, const char *mode, const char *name, const git_oid *id,
         git_oid *out)
{
	unsigned char buf[256];
	size_t n;
	git_odb *odb;

	n = (size_t)snprintf((char *)buf, sizeof(buf), "%s %s", mode, name) + 1;
	memcpy(buf + n, id->id, GIT_OID_RAWSZ);
	n += GIT_OID_RAWSZ;
	assert_int_equal(git_repository_odb(&odb, repo), 0);
	assert_int_equal(git_odb_write(out, odb, buf, n, GIT_OBJECT_TREE), 0);
	git_odb_free(odb);
}

/*
 * A commit whose root tree has one entry named name: a file holding
 * "pwned", or (tree) a directory holding hooks/post-checkout, written as a
 * hostile server would send it.
 */
static void
make_raw_repo(const char *path, const char *name, int tree)
{
	git_repository *repo;
	git_oid blob, root, commit, sub;
	git_tree *t;
	git_signature *sig;

	assert_int_equal(git_repository_init(&repo, path, 0), 0);
	assert_int_equal(git_blob_create_from_buffer(&blob, repo, "pwned\n", 6), 0);
	if (tree) {
		raw_tree(repo, "100755", "post-checkout", &blob, &sub);
		raw_tree(repo, "40000", "hooks", &sub, &sub);
		raw_tree(repo, "40000", name, &sub, &root);
	} else
		raw_tree(repo, "100644", name, &blob, &root);
	assert_int_equal(git_tree_lookup(&t, repo, &root), 0);
	assert_int_equal(git_signature_now(&sig, "test", "test@example.com"), 0);
	assert_int_equal(git_commit_create_v(&commit, repo, "HEAD", sig, sig, NULL, "c", t, 0), 0);
	git_signature_free(sig);
	git_tree_free(t);
	git_repository_free(repo);
}

/* Trees that name ".git", ".." or "." are refused; nothing is written
 * outside the workspace or into its repository. */
static void
t_hostile_names(void **state)
{
	struct fx *f = *state;
	static const struct {
		const char *name;
		int tree;
	} t[] = {
	    {".git", 1}, {".GIT", 1}, {"..", 1}, {"..", 0}, {".", 0},
	};
	char base[GH_OID_HEX_MAX + 1], err[256], src[256], p[512];
	size_t i;
	int fd;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		snprintf(src, sizeof(src), "%s/raw%zu", f->root, i);
		make_raw_repo(src, t[i].name, t[i].tree);
		if (gh_checkout(src, NULL, f->ws, base, err, sizeof(err)) != -1)
			fail_msg("a tree entry \"%s\" (%s) was checked out", t[i].name,
			         t[i].tree ? "tree" : "file");
		assert_string_equal(base, "");
		/* no hook was planted and nothing landed beside the workspace */
		snprintf(p, sizeof(p), "%s/.git/hooks/post-checkout", f->ws);
		assert_true(read_file(p) == NULL || strstr(read_file(p), "pwned") == NULL);
		snprintf(p, sizeof(p), "grep -rqs pwned %s --exclude-dir=raw* --exclude-dir=.git", f->root);
		assert_int_not_equal(system(p), 0);
		assert_canary(f);
		fd = open(f->root, O_RDONLY | O_DIRECTORY);
		assert_int_equal(gh_remove_tree(fd, "ws"), 0);
		close(fd);
		assert_int_equal(mkdir(f->ws, 0755), 0);
	}
}

/*
 * The classic escape: a tree with a link "a" to a directory outside and an
 * entry named "a/b" (a slash inside one name, which git's own tools never
 * write).  Checking out "a/b" through the link would write outside.
 */
static void
t_write_through_link(void **state)
{
	struct fx *f = *state;
	git_repository *repo;
	git_oid blob, link, root, commit;
	git_tree *t;
	git_signature *sig;
	git_odb *odb;
	unsigned char buf[512];
	char base[GH_OID_HEX_MAX + 1], err[256], outside[256], p[512];
	size_t n = 0;
	int rc;

	snprintf(outside, sizeof(outside), "%s/outside", f->root);
	assert_int_equal(mkdir(outside, 0755), 0);
	assert_int_equal(git_repository_init(&repo, f->src, 0), 0);
	assert_int_equal(git_blob_create_from_buffer(&blob, repo, "pwned\n", 6), 0);
	assert_int_equal(git_blob_create_from_buffer(&link, repo, outside, strlen(outside)), 0);
	n += (size_t)snprintf((char *)buf + n, sizeof(buf) - n, "120000 a") + 1;
	memcpy(buf + n, link.id, GIT_OID_RAWSZ);
	n += GIT_OID_RAWSZ;
	n += (size_t)snprintf((char *)buf + n, sizeof(buf) - n, "100644 a/b") + 1;
	memcpy(buf + n, blob.id, GIT_OID_RAWSZ);
	n += GIT_OID_RAWSZ;
	assert_int_equal(git_repository_odb(&odb, repo), 0);
	assert_int_equal(git_odb_write(&root, odb, buf, n, GIT_OBJECT_TREE), 0);
	git_odb_free(odb);
	assert_int_equal(git_tree_lookup(&t, repo, &root), 0);
	assert_int_equal(git_signature_now(&sig, "test", "test@example.com"), 0);
	assert_int_equal(git_commit_create_v(&commit, repo, "HEAD", sig, sig, NULL, "c", t, 0), 0);
	git_signature_free(sig);
	git_tree_free(t);
	git_repository_free(repo);
	rc = gh_checkout(f->src, NULL, f->ws, base, err, sizeof(err));
	snprintf(p, sizeof(p), "%s/b", outside);
	if (access(p, F_OK) == 0)
		fail_msg("the checkout wrote %s through the link", p);
	assert_int_equal(rc, -1);
	assert_string_equal(base, "");
	assert_canary(f);
}

/*
 * The path check itself, which libgit2's own refusals leave unreached in a
 * clone: a directory of the work tree replaced by a link to outside makes
 * the indexed paths below it escape, and the check says so.
 */
static void
t_verify_paths(void **state)
{
	struct fx *f = *state;
	static const struct file files[] = {{"src/main.c", "int x;\n", 0100644, 0}};
	char want[GH_OID_HEX_MAX + 1], base[GH_OID_HEX_MAX + 1], err[256], p[256], o[256];
	int fd;

	make_repo(f->src, files, 1, want);
	assert_int_equal(gh_checkout(f->src, NULL, f->ws, base, err, sizeof(err)), 0);
	assert_int_equal(gh_verify(f->ws, err, sizeof(err)), 0);
	snprintf(o, sizeof(o), "%s/outside", f->root);
	assert_int_equal(mkdir(o, 0755), 0);
	fd = open(f->ws, O_RDONLY | O_DIRECTORY);
	assert_int_equal(gh_remove_tree(fd, "src"), 0);
	close(fd);
	snprintf(p, sizeof(p), "%s/src", f->ws);
	assert_int_equal(symlink(o, p), 0);
	assert_int_equal(gh_verify(f->ws, err, sizeof(err)), -1);
	assert_string_equal(err, "the repository has a path below a link");
	/* a workspace that is no repository */
	assert_int_equal(gh_verify(f->root, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "open"));
}

/* An https remote that cannot be reached fails with libgit2's reason and
 * never echoes the token. */
static void
t_https_unreachable(void **state)
{
	struct fx *f = *state;
	char base[GH_OID_HEX_MAX + 1], err[512];

	assert_int_equal(gh_checkout("https://127.0.0.1:1/r.git", "tok-SECRET", f->ws, base, err,
	                             sizeof(err)),
	                 -1);
	assert_non_null(strstr(err, "clone"));
	assert_null(strstr(err, "SECRET"));
}

/* The split layout: a bare trusted copy in gitdir, never checked out; a
 * work tree in the workspace at the same commit, its own objects (no hard
 * link), origin back to the URL without the token, stripped like
 * gh_checkout's. */
static void
t_split(void **state)
{
	struct fx *f = *state;
	static const struct file files[] = {
	    {"README.md", "hello\n", 0100644, 0},
	    {"src/main.c", "int main(void) { return 0; }\n", 0100644, 0},
	    {".claude/settings.json", "{}\n", 0100644, 0},
	    {".mcp.json", "{}\n", 0100644, 0},
	    {".agrippa", "/", 0120000, 0},
	};
	const char *gone[] = {".claude", ".mcp.json", ".agrippa"};
	char want[GH_OID_HEX_MAX + 1], base[GH_OID_HEX_MAX + 1], err[256], git[128], p[512];
	git_repository *repo;
	git_remote *origin;
	git_oid head;
	struct stat st;
	char *c;
	size_t i;

	make_repo(f->src, files, 5, want);
	snprintf(git, sizeof(git), "%s/git", f->root);
	assert_int_equal(mkdir(git, 0700), 0);
	if (gh_checkout_split(f->src, "tok-SECRET", git, f->ws, base, err, sizeof(err)) != 0)
		fail_msg("gh_checkout_split: %s", err);
	assert_string_equal(base, want);
	/* the trusted copy: bare, at the commit, nothing checked out */
	assert_int_equal(git_repository_open(&repo, git), 0);
	assert_true(git_repository_is_bare(repo));
	assert_int_equal(git_reference_name_to_id(&head, repo, "HEAD"), 0);
	git_oid_tostr(p, GH_OID_HEX_MAX + 1, &head);
	assert_string_equal(p, want);
	git_repository_free(repo);
	snprintf(p, sizeof(p), "%s/README.md", git);
	assert_int_equal(access(p, F_OK), -1);
	snprintf(p, sizeof(p), "%s/config", git);
	assert_non_null(c = read_file(p));
	assert_null(strstr(c, "SECRET"));
	/* the work tree: files, same commit, origin is the URL */
	snprintf(p, sizeof(p), "%s/src/main.c", f->ws);
	assert_string_equal(read_file(p), "int main(void) { return 0; }\n");
	assert_int_equal(git_repository_open(&repo, f->ws), 0);
	assert_false(git_repository_is_bare(repo));
	assert_int_equal(git_reference_name_to_id(&head, repo, "HEAD"), 0);
	git_oid_tostr(p, GH_OID_HEX_MAX + 1, &head);
	assert_string_equal(p, want);
	assert_int_equal(git_remote_lookup(&origin, repo, "origin"), 0);
	assert_string_equal(git_remote_url(origin), f->src);
	git_remote_free(origin);
	git_repository_free(repo);
	snprintf(p, sizeof(p), "%s/.git/config", f->ws);
	assert_non_null(c = read_file(p));
	assert_null(strstr(c, "SECRET"));
	assert_null(strstr(c, git)); /* the trusted copy's path is not handed out */
	snprintf(p, sizeof(p), "grep -rqsF %s %s/.git", git, f->ws);
	assert_int_not_equal(system(p), 0);
	for (i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s/%s", f->ws, gone[i]);
		assert_int_equal(lstat(p, &st), -1);
	}
	/* objects copied, not linked: none between the clones or the source */
	snprintf(p, sizeof(p), "find %s/.git/objects -type f | grep -q .", f->ws);
	assert_int_equal(system(p), 0);
	snprintf(p, sizeof(p), "find %s %s/.git -type f -links +1 | grep -q .", git, f->ws);
	assert_int_not_equal(system(p), 0);
	assert_canary(f);
}

/* file:// URLs: origin keeps the URL as given. */
static void
t_split_file_url(void **state)
{
	struct fx *f = *state;
	static const struct file files[] = {{"a", "a\n", 0100644, 0}};
	char want[GH_OID_HEX_MAX + 1], base[GH_OID_HEX_MAX + 1], err[256], url[256], git[128];
	git_repository *repo;
	git_remote *origin;

	make_repo(f->src, files, 1, want);
	snprintf(url, sizeof(url), "file://%s", f->src);
	snprintf(git, sizeof(git), "%s/git", f->root);
	assert_int_equal(mkdir(git, 0700), 0);
	assert_int_equal(gh_checkout_split(url, NULL, git, f->ws, base, err, sizeof(err)), 0);
	assert_string_equal(base, want);
	assert_int_equal(git_repository_open(&repo, f->ws), 0);
	assert_int_equal(git_remote_lookup(&origin, repo, "origin"), 0);
	assert_string_equal(git_remote_url(origin), url);
	git_remote_free(origin);
	git_repository_free(repo);
}

/* Bad layouts are refused before anything is written; hostile trees are
 * refused as gh_checkout refuses them. */
static void
t_split_refusals(void **state)
{
	struct fx *f = *state;
	static const struct file files[] = {{"a", "a\n", 0100644, 0}};
	char want[GH_OID_HEX_MAX + 1], base[GH_OID_HEX_MAX + 1], err[256], git[128], p[512];
	int fd;

	make_repo(f->src, files, 1, want);
	snprintf(git, sizeof(git), "%s/git", f->root);
	assert_int_equal(mkdir(git, 0700), 0);
	/* one directory for both, directly or through a link */
	assert_int_equal(gh_checkout_split(f->src, NULL, f->ws, f->ws, base, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "one directory"));
	snprintf(p, sizeof(p), "%s/ws/../ws", f->root);
	assert_int_equal(gh_checkout_split(f->src, NULL, p, f->ws, base, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "one directory"));
	assert_int_equal(gh_checkout_split(f->src, NULL, "git", f->ws, base, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "absolute"));
	assert_int_equal(gh_checkout_split("ssh://h/r", NULL, git, f->ws, base, err, sizeof(err)),
	                 -1);
	assert_non_null(strstr(err, "URL"));
	snprintf(p, sizeof(p), "%s/stale", git);
	write_file(p, "stale\n");
	assert_int_equal(gh_checkout_split(f->src, NULL, git, f->ws, base, err, sizeof(err)), -1);
	assert_string_equal(err, "the repository directory is not empty");
	assert_string_equal(read_file(p), "stale\n");
	unlink(p);
	/* a tree entry ".git" holding a hook: refused, nothing planted */
	snprintf(p, sizeof(p), "%s/raw", f->root);
	make_raw_repo(p, ".git", 1);
	assert_int_equal(gh_checkout_split(p, NULL, git, f->ws, base, err, sizeof(err)), -1);
	assert_string_equal(base, "");
	snprintf(p, sizeof(p), "grep -rqs pwned %s/.git/hooks %s/hooks", f->ws, git);
	assert_int_not_equal(system(p), 0);
	fd = open(f->root, O_RDONLY | O_DIRECTORY);
	assert_int_equal(gh_remove_tree(fd, "ws"), 0);
	close(fd);
	assert_canary(f);
}

/* gh_remove_tree: files, nested directories, links (never followed). */
static void
t_remove_tree(void **state)
{
	struct fx *f = *state;
	char p[256];
	int fd;

	snprintf(p, sizeof(p), "%s/t", f->ws);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/t/a", f->ws);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/t/a/file", f->ws);
	write_file(p, "x");
	snprintf(p, sizeof(p), "%s/t/a/up", f->ws);
	assert_int_equal(symlink(f->root, p), 0);
	snprintf(p, sizeof(p), "%s/t/canary-link", f->ws);
	assert_int_equal(symlink(f->canary, p), 0);
	fd = open(f->ws, O_RDONLY | O_DIRECTORY);
	assert_int_equal(gh_remove_tree(fd, "t"), 0);
	assert_int_equal(gh_remove_tree(fd, "t"), 0); /* absent: success */
	close(fd);
	snprintf(p, sizeof(p), "%s/t", f->ws);
	assert_int_equal(access(p, F_OK), -1);
	/* what the links pointed at is still there */
	assert_canary(f);
	assert_int_equal(access(f->root, F_OK), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(t_clean_clone, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_file_url, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_no_hard_links, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_strip, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_strip_link_to_outside, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_refusals, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_hostile_names, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_write_through_link, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_verify_paths, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_https_unreachable, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_remove_tree, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_split, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_split_file_url, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_split_refusals, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
