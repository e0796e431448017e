/*
 * The git helper's mirror (githelper/mirror.c, with the git program) and
 * the workspace written from it (githelper/checkout.c), against real local
 * repositories built here with libgit2 and git: a clean checkout records
 * its base commit and holds no copy of the history; what a hostile
 * repository ships to steer the agent or the daemon (.claude/, .mcp.json,
 * .agrippa as a directory or as a link to /) is gone and nothing outside
 * the workspace changed; paths that would escape are refused; bad URLs,
 * refs and workspaces are refused before anything is written; a token
 * never reaches the mirror's or the workspace's configuration.  The mirror
 * follows new commits, force-pushes and deleted branches, and one that a
 * crash or a lost pack damaged is repaired or rebuilt; a fetch stopped by a
 * full disk (a small tmpfs) leaves the mirror as it was, gives the space
 * back and is never taken for damage; every fetch that succeeds leaves its
 * stamp (time and size) in the mirror.
 */
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "githelper/checkout.h"
#include "githelper/mirror.h"
#include "tests/unit/gitrepo.h"

struct fx {
	char root[64];   /* a fresh temporary directory */
	char src[128];   /* the source repository */
	char ws[128];    /* the workspace */
	char mirror[128]; /* the connection's mirror */
	char canary[128]; /* a file outside the workspace that must not change */
	char small[96];   /* a small file system (small_fs), or "" */
};

/* Mirror url into f->mirror, then write the workspace at ref from it. */
static int
co_ref(struct fx *f, const char *url, const char *token, const char *ref, char *base,
       char *refname, char *err, size_t errsz)
{
	uint64_t size;

	base[0] = '\0';
	if (gh_fetch(url, token, f->mirror, &size, err, errsz) == -1)
		return -1;
	return gh_workspace(f->mirror, ref, f->ws, url, base, refname, err, errsz);
}

/* The same at the default branch. */
static int
co(struct fx *f, const char *url, const char *token, char *base, char *err, size_t errsz)
{
	char ref[GH_REF_MAX + 1];

	return co_ref(f, url, token, "", base, ref, err, errsz);
}

/* The first line git prints for args in repo, in out. */
static void
git_line(const char *repo, const char *args, char *out, size_t outsz)
{
	char cmd[1024];
	FILE *p;

	snprintf(cmd, sizeof(cmd), "git -C %s %s 2>/dev/null", repo, args);
	assert_non_null(p = popen(cmd, "r"));
	out[0] = '\0';
	if (fgets(out, (int)outsz, p) == NULL)
		out[0] = '\0';
	out[strcspn(out, "\n")] = '\0';
	pclose(p);
}

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
	snprintf(f->mirror, sizeof(f->mirror), "%s/mirror", f->root);
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

	if (f->small[0] != '\0')
		umount2(f->small, MNT_DETACH);
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

/* The mirror carries a fetch's or a damage's mark. */
static int
gh_has_marks(const struct fx *f)
{
	char p[256], q[256];

	snprintf(p, sizeof(p), "%s/" GH_FETCH_MARK, f->mirror);
	snprintf(q, sizeof(q), "%s/" GH_DAMAGED_MARK, f->mirror);
	return access(p, F_OK) == 0 || access(q, F_OK) == 0;
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
	assert_int_equal(co(f, f->src, "tok-SECRET", base, err, sizeof(err)), 0);
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
	snprintf(cfg, sizeof(cfg), "%s/config", f->mirror);
	assert_non_null(c = read_file(cfg));
	assert_null(strstr(c, "SECRET"));
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
	assert_int_equal(co(f, url, NULL, base, err, sizeof(err)), 0);
	assert_string_equal(base, want);
}

/*
 * No copy of the history in the workspace: its .git holds no object, only
 * the alternates entry that names where the sandbox sees the mirror's; the
 * mirror's objects are its own (no hard link into the source); with the
 * mirror's objects added, git reads the whole history from the workspace.
 */
static void
t_no_history(void **state)
{
	struct fx *f = *state;
	static const struct file files[] = {{"a", "a\n", 0100644, 0}, {"b", "b\n", 0100644, 0}};
	char want[GH_OID_HEX_MAX + 1], base[GH_OID_HEX_MAX + 1], err[256], p[512], line[256];
	int i;

	make_repo(f->src, files, 2, want);
	for (i = 0; i < 30; i++)
		assert_int_equal(sh("cd %s && echo %d >>a && git add a && git -c user.name=t "
		                    "-c user.email=t@t commit -qm c%d", f->src, i, i), 0);
	git_line(f->src, "rev-parse HEAD", want, sizeof(want));
	assert_int_equal(co(f, f->src, NULL, base, err, sizeof(err)), 0);
	assert_string_equal(base, want);
	snprintf(p, sizeof(p), "%s/.git/objects/info/alternates", f->ws);
	assert_string_equal(read_file(p), GH_SANDBOX_OBJECTS "\n");
	snprintf(p, sizeof(p), "test -z \"$(find %s/.git/objects -type f ! -name alternates)\"",
	         f->ws);
	assert_int_equal(system(p), 0);
	snprintf(p, sizeof(p), "find %s -type f -links +1 | grep -q .", f->mirror);
	assert_int_not_equal(system(p), 0);
	/* git sees the 31 commits through the mirror's objects, and a clean tree */
	snprintf(p, sizeof(p), "cd %s && test \"$(GIT_ALTERNATE_OBJECT_DIRECTORIES=%s/objects "
	         "git rev-list --count HEAD)\" = 31", f->ws, f->mirror);
	assert_int_equal(system(p), 0);
	snprintf(p, sizeof(p), "cd %s && GIT_ALTERNATE_OBJECT_DIRECTORIES=%s/objects "
	         "git status --porcelain | grep -q .", f->ws, f->mirror);
	assert_int_not_equal(system(p), 0);
	snprintf(line, sizeof(line), "%s/.git/HEAD", f->ws);
	assert_string_equal(read_file(line), "ref: refs/heads/master\n");
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
	assert_int_equal(co(f, f->src, NULL, base, err, sizeof(err)), 0);
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
	assert_int_equal(co(f, f->src, NULL, base, err, sizeof(err)), 0);
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
	assert_int_equal(co(f, "ssh://host/repo", NULL, base, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "URL"));
	assert_int_equal(co(f, "git://host/repo", NULL, base, err, sizeof(err)), -1);
	assert_int_equal(co(f, "ext::sh -c touch% /tmp/agrippa-pwned", NULL, base, err,
	                    sizeof(err)), -1);
	assert_int_equal(co(f, "relative/path", NULL, base, err, sizeof(err)), -1);
	assert_int_equal(co(f, "file://host/r", NULL, base, err, sizeof(err)), -1);
	assert_int_equal(co(f, "https://user:pw@host/r.git", NULL, base, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "without credentials"));
	assert_null(strstr(err, "pw"));
	assert_int_equal(co(f, "https:///r.git", NULL, base, err, sizeof(err)), -1);
	assert_int_equal(access(f->mirror, F_OK), -1); /* nothing was fetched */
	assert_int_equal(gh_fetch(f->src, NULL, "relative/mirror", &(uint64_t){0}, err,
	                          sizeof(err)), -1);
	/* the workspace */
	assert_int_equal(gh_fetch(f->src, NULL, f->mirror, &(uint64_t){0}, err, sizeof(err)), 0);
	assert_int_equal(gh_workspace(f->mirror, "", "relative/ws", f->src, base, p, err,
	                              sizeof(err)), -1);
	assert_int_equal(gh_workspace(f->mirror, "", f->canary, f->src, base, p, err, sizeof(err)),
	                 -1);
	assert_non_null(strstr(err, "not a directory"));
	/* a workspace that is not empty */
	snprintf(p, sizeof(p), "%s/old", f->ws);
	write_file(p, "stale\n");
	assert_int_equal(co(f, f->src, NULL, base, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not empty"));
	assert_string_equal(read_file(p), "stale\n");
	unlink(p);
	/* a workspace that is a link to a directory */
	snprintf(p, sizeof(p), "%s/wslink", f->root);
	assert_int_equal(symlink(f->ws, p), 0);
	assert_int_equal(gh_workspace(f->mirror, "", p, f->src, base, p + 200, err, sizeof(err)),
	                 -1);
	assert_string_equal(base, "");
	/* a repository that does not exist */
	snprintf(p, sizeof(p), "%s/nope", f->root);
	snprintf(f->mirror, sizeof(f->mirror), "%s/mirror2", f->root);
	assert_int_equal(co(f, p, NULL, base, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "clone"));
	assert_int_equal(access(f->mirror, F_OK), -1);
	snprintf(p, sizeof(p), "%s.new", f->mirror);
	assert_int_equal(access(p, F_OK), -1); /* no partial mirror stays */
	assert_int_equal(access("/tmp/agrippa-pwned", F_OK), -1);
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
		snprintf(f->mirror, sizeof(f->mirror), "%s/mirror%zu", f->root, i);
		if (co(f, src, NULL, base, err, sizeof(err)) != -1)
			fail_msg("a tree entry \"%s\" (%s) was checked out", t[i].name,
			         t[i].tree ? "tree" : "file");
		assert_string_equal(base, "");
		/* no hook was planted and nothing landed beside the workspace */
		snprintf(p, sizeof(p), "%s/.git/hooks/post-checkout", f->ws);
		assert_true(read_file(p) == NULL || strstr(read_file(p), "pwned") == NULL);
		snprintf(p, sizeof(p), "grep -rqs pwned %s --exclude-dir=raw* --exclude-dir=mirror* "
		         "--exclude-dir=.git", f->root);
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
	rc = co(f, f->src, NULL, base, err, sizeof(err));
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
	assert_int_equal(co(f, f->src, NULL, base, err, sizeof(err)), 0);
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

/* An https remote that cannot be reached fails with git's reason and
 * never echoes the token. */
static void
t_https_unreachable(void **state)
{
	struct fx *f = *state;
	char base[GH_OID_HEX_MAX + 1], err[512];

	assert_int_equal(co(f, "https://127.0.0.1:1/r.git", "tok-SECRET", base, err, sizeof(err)),
	                 -1);
	assert_non_null(strstr(err, "clone"));
	assert_null(strstr(err, "SECRET"));
}

/* A new empty workspace. */
static void
fresh_ws(struct fx *f)
{
	int fd = open(f->root, O_RDONLY | O_DIRECTORY);

	assert_int_equal(gh_remove_tree(fd, "ws"), 0);
	close(fd);
	assert_int_equal(mkdir(f->ws, 0755), 0);
}

/* ref: a branch, a tag (annotated or not, by short or full name), a full
 * commit id; a missing one is named; a bad one never reaches git. */
static void
t_refs(void **state)
{
	struct fx *f = *state;
	static const struct file files[] = {{"a", "one\n", 0100644, 0}};
	static const char *const bad[] = {"a..b", "x.lock", "-x", "a b", "@{1}", "HEAD~1", "x:y",
	                                  "/x", "x/", "refs/remotes/x"};
	static const struct {
		const char *ref, *name;
		int second;
	} good[] = {
	    {"", "master", 0},
	    {"master", "master", 0},
	    {"topic", "topic", 1},
	    {"refs/heads/topic", "topic", 1},
	    {"light", "light", 0},
	    {"annotated", "annotated", 0},
	    {"refs/tags/annotated", "annotated", 0},
	};
	char c1[GH_OID_HEX_MAX + 1], c2[GH_OID_HEX_MAX + 1], base[GH_OID_HEX_MAX + 1];
	char ref[GH_REF_MAX + 1], err[512], p[256];
	size_t i;

	make_repo(f->src, files, 1, c1);
	assert_int_equal(sh("cd %s && git tag light && git tag -a -m ann annotated && "
	                    "git checkout -qb topic && echo two >a && git -c user.name=t "
	                    "-c user.email=t@t commit -qam two && git checkout -q master",
	                    f->src), 0);
	git_line(f->src, "rev-parse topic", c2, sizeof(c2));
	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		if (co_ref(f, f->src, NULL, good[i].ref, base, ref, err, sizeof(err)) != 0)
			fail_msg("ref \"%s\": %s", good[i].ref, err);
		assert_string_equal(base, good[i].second ? c2 : c1);
		assert_string_equal(ref, good[i].name);
		snprintf(p, sizeof(p), "%s/a", f->ws);
		assert_string_equal(read_file(p), good[i].second ? "two\n" : "one\n");
		fresh_ws(f);
	}
	assert_int_equal(co_ref(f, f->src, NULL, c2, base, ref, err, sizeof(err)), 0);
	assert_string_equal(base, c2);
	assert_string_equal(ref, c2);
	snprintf(p, sizeof(p), "%s/.git/HEAD", f->ws);
	assert_non_null(read_file(p));
	assert_int_equal(strncmp(read_file(p), c2, 40), 0); /* detached */
	fresh_ws(f);
	assert_int_equal(co_ref(f, f->src, NULL, "nosuch", base, ref, err, sizeof(err)), -1);
	assert_string_equal(err, "ref nosuch: no such branch, tag or commit in the repository");
	assert_int_equal(co_ref(f, f->src, NULL, "0123456789012345678901234567890123456789", base,
	                        ref, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "no such commit"));
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (co_ref(f, f->src, NULL, bad[i], base, ref, err, sizeof(err)) != -1)
			fail_msg("ref \"%s\" was taken", bad[i]);
		assert_string_equal(base, "");
	}
	snprintf(p, sizeof(p), "test -z \"$(ls -A %s)\"", f->ws);
	assert_int_equal(system(p), 0);
}

/* The mirror follows upstream: a new commit, a force-push, a deleted
 * branch, a new tag. */
static void
t_follow(void **state)
{
	struct fx *f = *state;
	static const struct file files[] = {{"a", "one\n", 0100644, 0}};
	char c1[GH_OID_HEX_MAX + 1], c[GH_OID_HEX_MAX + 1], line[256], err[512];
	uint64_t size = 0;

	make_repo(f->src, files, 1, c1);
	assert_int_equal(sh("cd %s && git branch doomed", f->src), 0);
	assert_int_equal(gh_fetch(f->src, NULL, f->mirror, &size, err, sizeof(err)), 0);
	assert_true(size > 0);
	git_line(f->mirror, "rev-parse master", line, sizeof(line));
	assert_string_equal(line, c1);
	/* a new commit */
	assert_int_equal(sh("cd %s && echo two >a && git -c user.name=t -c user.email=t@t "
	                    "commit -qam two", f->src), 0);
	git_line(f->src, "rev-parse master", c, sizeof(c));
	assert_int_equal(gh_fetch(f->src, NULL, f->mirror, &size, err, sizeof(err)), 0);
	git_line(f->mirror, "rev-parse master", line, sizeof(line));
	assert_string_equal(line, c);
	/* a force-push: master rewritten, doomed deleted, a tag added */
	assert_int_equal(sh("cd %s && git reset -q --hard %s && echo three >a && git -c "
	                    "user.name=t -c user.email=t@t commit -qam three && git branch -qD "
	                    "doomed && git tag t1", f->src, c1), 0);
	git_line(f->src, "rev-parse master", c, sizeof(c));
	assert_int_equal(gh_fetch(f->src, NULL, f->mirror, &size, err, sizeof(err)), 0);
	git_line(f->mirror, "rev-parse master", line, sizeof(line));
	assert_string_equal(line, c);
	git_line(f->mirror, "rev-parse t1", line, sizeof(line));
	assert_string_equal(line, c);
	assert_int_not_equal(sh("git -C %s rev-parse -q --verify refs/heads/doomed >/dev/null",
	                        f->mirror), 0);
	assert_false(gh_has_marks(f));
}

/*
 * What a crash leaves: a fetch killed half-way (its mark, a stale lock, a
 * temporary pack) is tidied and the fetch goes on; a mirror whose objects
 * are gone is found damaged by the checkout and rebuilt by the next fetch,
 * and the workspace written from it is whole.
 */
static void
t_repair(void **state)
{
	struct fx *f = *state;
	static const struct file files[] = {{"a", "one\n", 0100644, 0}};
	char c1[GH_OID_HEX_MAX + 1], base[GH_OID_HEX_MAX + 1], ref[GH_REF_MAX + 1], err[512];
	char p[512], tmp[512];
	uint64_t size;

	make_repo(f->src, files, 1, c1);
	assert_int_equal(gh_fetch(f->src, NULL, f->mirror, &size, err, sizeof(err)), 0);
	/* a crash mid-fetch */
	snprintf(p, sizeof(p), "%s/" GH_FETCH_MARK, f->mirror);
	write_file(p, "");
	snprintf(p, sizeof(p), "%s/packed-refs.lock", f->mirror);
	write_file(p, "");
	snprintf(tmp, sizeof(tmp), "%s/objects/pack/tmp_pack_XXXX", f->mirror);
	write_file(tmp, "half a pack");
	assert_int_equal(sh("cd %s && echo two >a && git -c user.name=t -c user.email=t@t "
	                    "commit -qam two", f->src), 0);
	git_line(f->src, "rev-parse master", c1, sizeof(c1));
	if (gh_fetch(f->src, NULL, f->mirror, &size, err, sizeof(err)) != 0)
		fail_msg("after a crash: %s", err);
	assert_int_equal(access(p, F_OK), -1);
	assert_int_equal(access(tmp, F_OK), -1);
	assert_false(gh_has_marks(f));
	git_line(f->mirror, "rev-parse master", p, sizeof(p));
	assert_string_equal(p, c1);
	/* the objects lost */
	assert_int_equal(sh("rm -rf %s/objects/pack/* %s/objects/[0-9a-f][0-9a-f]", f->mirror,
	                    f->mirror), 0);
	assert_int_equal(gh_workspace(f->mirror, "", f->ws, f->src, base, ref, err, sizeof(err)),
	                 -1);
	assert_non_null(strstr(err, "the mirror is damaged"));
	snprintf(p, sizeof(p), "%s/" GH_DAMAGED_MARK, f->mirror);
	assert_int_equal(access(p, F_OK), 0);
	fresh_ws(f);
	if (co(f, f->src, NULL, base, err, sizeof(err)) != 0)
		fail_msg("after the loss: %s", err);
	assert_string_equal(base, c1);
	assert_false(gh_has_marks(f));
	snprintf(p, sizeof(p), "ls -d %s.trash-* 2>/dev/null | grep -q .", f->mirror);
	assert_int_not_equal(system(p), 0); /* what was moved aside is gone */
}

/* ---- a full disk ------------------------------------------------------------ */

/*
 * This process in a mount namespace of its own (and, when it is not root,
 * a user namespace where it keeps its uid): once.  0, or -1 when the kernel
 * offers neither.
 */
static int
own_mounts(void)
{
	static int done;
	char map[64];
	uid_t uid = geteuid();
	gid_t gid = getegid();

	if (done)
		return 0;
	if (uid != 0) {
		if (unshare(CLONE_NEWUSER | CLONE_NEWNS) == -1)
			return -1;
		snprintf(map, sizeof(map), "%lu %lu 1", (unsigned long)uid, (unsigned long)uid);
		write_file("/proc/self/uid_map", map);
		write_file("/proc/self/setgroups", "deny");
		snprintf(map, sizeof(map), "%lu %lu 1", (unsigned long)gid, (unsigned long)gid);
		write_file("/proc/self/gid_map", map);
	} else if (unshare(CLONE_NEWNS) == -1) {
		return -1;
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == -1)
		return -1;
	done = 1;
	return 0;
}

/* f->mirror on a tmpfs of opts ("size=..."), mounted at f->small. */
static void
small_fs(struct fx *f, const char *opts)
{
	if (own_mounts() == -1) {
		fprintf(stderr, "skipped: the kernel gives this process no mount namespace (%s)\n",
		        strerror(errno));
		skip();
	}
	snprintf(f->small, sizeof(f->small), "%s/small", f->root);
	assert_int_equal(mkdir(f->small, 0755), 0);
	if (mount("agrippa-test", f->small, "tmpfs", MS_NOSUID | MS_NODEV, opts) == -1)
		fail_msg("mount tmpfs %s: %s", opts, strerror(errno));
	snprintf(f->mirror, sizeof(f->mirror), "%s/mirror", f->small);
}

static void
small_fs_resize(struct fx *f, const char *opts)
{
	if (mount(NULL, f->small, NULL, MS_REMOUNT | MS_NOSUID | MS_NODEV, opts) == -1)
		fail_msg("remount %s: %s", opts, strerror(errno));
}

/* Free bytes of the small file system. */
static unsigned long long
small_free(const struct fx *f)
{
	struct statvfs v;

	assert_int_equal(statvfs(f->small, &v), 0);
	return (unsigned long long)v.f_bavail * v.f_frsize;
}

/* A commit in f->src adding a file of n random bytes. */
static void
big_commit(struct fx *f, unsigned n, char *hex)
{
	assert_int_equal(sh("cd %s && head -c %u /dev/urandom >big && git add big && git -c "
	                    "user.name=t -c user.email=t@t commit -qm big", f->src, n), 0);
	git_line(f->src, "rev-parse master", hex, GH_OID_HEX_MAX + 1);
}

/* The digests of the mirror's refs and packs, in out. */
static void
refs_and_packs(const struct fx *f, const char *out)
{
	assert_int_equal(sh("cd %s && find HEAD config packed-refs refs objects/pack -type f "
	                    "2>/dev/null | sort | xargs sha256sum >%s", f->mirror, out), 0);
}

/* The mirror's stamp: 0 with the time and size, or -1 when it has none. */
static int
stamp(const struct fx *f, unsigned long long *when, unsigned long long *size)
{
	char p[256], nl;
	FILE *fp;
	int n;

	snprintf(p, sizeof(p), "%s/" GH_STAMP, f->mirror);
	if ((fp = fopen(p, "r")) == NULL)
		return -1;
	n = fscanf(fp, "%llu %llu%c", when, size, &nl);
	fclose(fp);
	assert_int_equal(n, 3);
	assert_int_equal(nl, '\n');
	return 0;
}

/* Every fetch that succeeds stamps the mirror with its time and size. */
static void
t_stamp(void **state)
{
	struct fx *f = *state;
	static const struct file files[] = {{"a", "one\n", 0100644, 0}};
	char c1[GH_OID_HEX_MAX + 1], p[256];
	unsigned long long when, sz, when2, sz2;
	time_t t0 = time(NULL);
	uint64_t size;

	make_repo(f->src, files, 1, c1);
	assert_int_equal(gh_fetch("/nonexistent/repo", NULL, f->mirror, &size, p, sizeof(p)), -1);
	assert_int_equal(stamp(f, &when, &sz), -1); /* no mirror, no stamp */
	assert_int_equal(gh_fetch(f->src, NULL, f->mirror, &size, p, sizeof(p)), 0);
	assert_int_equal(stamp(f, &when, &sz), 0);
	assert_true(when >= (unsigned long long)t0 && when <= (unsigned long long)time(NULL));
	assert_true(sz == size && sz > 0);
	big_commit(f, 300000, c1);
	assert_int_equal(gh_fetch(f->src, NULL, f->mirror, &size, p, sizeof(p)), 0);
	assert_int_equal(stamp(f, &when2, &sz2), 0);
	assert_true(when2 >= when && sz2 == size && sz2 > sz + 300000);
	/* a fetch that fails leaves the last one's stamp */
	assert_int_equal(sh("mv %s %s.gone", f->src, f->src), 0);
	assert_int_equal(gh_fetch(f->src, NULL, f->mirror, &size, p, sizeof(p)), -1);
	assert_int_equal(stamp(f, &when, &sz), 0);
	assert_true(when == when2 && sz == sz2);
	snprintf(p, sizeof(p), "%s/" GH_STAMP ".tmp", f->mirror);
	assert_int_equal(access(p, F_OK), -1);
}

/*
 * An upstream commit larger than the space left, of nfiles small files
 * besides its large one: the fetch fails with git's word for it (want),
 * the mirror's refs and packs are as they were, no temporary object or
 * pack holds on to the space, nothing is marked, moved aside or cloned
 * again; with room again the next fetch brings the commit.
 */
static void
full_disk(struct fx *f, unsigned nfiles, const char *want)
{
	static const struct file files[] = {{"a", "one\n", 0100644, 0}};
	char c1[GH_OID_HEX_MAX + 1], c2[GH_OID_HEX_MAX + 1], line[256], err[512];
	char before[256], after[256];
	unsigned long long when, sz, when2, sz2, room;
	uint64_t size;

	small_fs(f, "size=2m");
	make_repo(f->src, files, 1, c1);
	assert_int_equal(gh_fetch(f->src, NULL, f->mirror, &size, err, sizeof(err)), 0);
	assert_int_equal(stamp(f, &when, &sz), 0);
	snprintf(before, sizeof(before), "%s/before", f->root);
	snprintf(after, sizeof(after), "%s/after", f->root);
	refs_and_packs(f, before);
	room = small_free(f);
	assert_int_equal(sh("cd %s && mkdir many && i=0 && while [ $i -lt %u ]; do echo $i "
	                    ">many/$i; i=$((i + 1)); done && git add many", f->src, nfiles), 0);
	big_commit(f, 4 * 1024 * 1024, c2);
	assert_int_equal(gh_fetch(f->src, NULL, f->mirror, &size, err, sizeof(err)), -1);
	assert_string_equal(err, want);
	refs_and_packs(f, after);
	assert_int_equal(sh("cmp -s %s %s", before, after), 0);
	assert_int_equal(sh("test -z \"$(find %s -name 'tmp_*' -o -name '*.lock')\"", f->mirror), 0);
	assert_true(small_free(f) + 64 * 1024 >= room); /* at most the small objects stay */
	assert_false(gh_has_marks(f));
	/* no .new, no .trash-* */
	assert_int_equal(sh("test \"$(ls %s | tr '\\n' ' ')\" = 'mirror mirror.lock '", f->small), 0);
	git_line(f->mirror, "rev-parse master", line, sizeof(line));
	assert_string_equal(line, c1);
	assert_int_equal(stamp(f, &when2, &sz2), 0);
	assert_true(when2 == when && sz2 == sz);
	/* room again */
	small_fs_resize(f, "size=16m");
	if (gh_fetch(f->src, NULL, f->mirror, &size, err, sizeof(err)) != 0)
		fail_msg("with room again: %s", err);
	git_line(f->mirror, "rev-parse master", line, sizeof(line));
	assert_string_equal(line, c2);
	assert_int_equal(stamp(f, &when2, &sz2), 0);
	assert_true(sz2 > 4 * 1024 * 1024);
}

/* Few objects: git unpacks them as loose objects (fetch.unpackLimit). */
static void
t_full_disk(void **state)
{
	full_disk(*state, 0, "fetch: unable to write loose object file: No space left on device");
}

/* Many: git keeps them as a pack (index-pack). */
static void
t_full_disk_pack(void **state)
{
	full_disk(*state, 150, "fetch: write error: No space left on device");
}

/*
 * A full disk meets a mirror that is damaged too: the mirror is not
 * thrown away for a clone that cannot be written (which would lose it for
 * nothing); it keeps its mark, and with room again the next fetch rebuilds
 * it.
 */
static void
t_full_disk_damaged(void **state)
{
	struct fx *f = *state;
	static const struct file files[] = {{"a", "one\n", 0100644, 0}};
	char c1[GH_OID_HEX_MAX + 1], c2[GH_OID_HEX_MAX + 1], blob[GH_OID_HEX_MAX + 1];
	char line[256], err[512], p[256];
	uint64_t size;

	small_fs(f, "size=2m");
	make_repo(f->src, files, 1, c1);
	assert_int_equal(gh_fetch(f->src, NULL, f->mirror, &size, err, sizeof(err)), 0);
	/* an object its history needs is lost: the pack as loose objects, less one */
	git_line(f->src, "rev-parse master:a", blob, sizeof(blob));
	assert_int_equal(sh("cd %s && mv objects/pack/*.pack %s/old.pack && rm -f objects/pack/* && "
	                    "git unpack-objects -q <%s/old.pack && rm -f objects/%.2s/%s", f->mirror,
	                    f->root, f->root, blob, blob + 2), 0);
	big_commit(f, 4 * 1024 * 1024, c2);
	assert_int_equal(gh_fetch(f->src, NULL, f->mirror, &size, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "No space left on device"));
	git_line(f->mirror, "rev-parse master", line, sizeof(line));
	assert_string_equal(line, c1); /* still there, as it was */
	snprintf(p, sizeof(p), "%s/" GH_FETCH_MARK, f->mirror);
	assert_int_equal(access(p, F_OK), 0);
	assert_int_equal(sh("test \"$(ls %s | tr '\\n' ' ')\" = 'mirror mirror.lock '", f->small), 0);
	small_fs_resize(f, "size=16m");
	if (gh_fetch(f->src, NULL, f->mirror, &size, err, sizeof(err)) != 0)
		fail_msg("with room again: %s", err);
	git_line(f->mirror, "rev-parse master", line, sizeof(line));
	assert_string_equal(line, c2);
	assert_false(gh_has_marks(f));
	assert_int_equal(sh("git --git-dir=%s fsck --no-progress --connectivity-only 2>/dev/null", f->mirror), 0);
	assert_int_equal(sh("test \"$(ls %s | tr '\\n' ' ')\" = 'mirror mirror.lock '", f->small), 0);
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
	    cmocka_unit_test_setup_teardown(t_no_history, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_strip, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_strip_link_to_outside, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_refusals, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_hostile_names, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_write_through_link, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_verify_paths, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_https_unreachable, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_remove_tree, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_refs, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_follow, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_repair, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_stamp, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_full_disk, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_full_disk_pack, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_full_disk_damaged, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
