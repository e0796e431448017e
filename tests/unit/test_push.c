/*
 * The git helper's push (githelper/push.c) against local bare repositories
 * over file://, built here with libgit2 and git, mirrored (gh_fetch) and
 * written out (gh_workspace) as a run's would be: a new branch gets exactly
 * base + the run's patch (the tree equals what git apply of gh_diff's patch
 * gives in a scratch clone; modified, deleted, executable, binary files and
 * links, committed as links); the same change gives the same commit, so a
 * retry finds its own push; a retry after a change replaces our own commit
 * under the lease; a branch someone else moved, made or deleted is refused
 * and left as it is; what a hostile workspace plants (a .git/config with
 * another push URL, hooks, alternates; a FIFO; a patch over the cap) changes
 * neither what is pushed nor where; bad branches and requests are refused;
 * an empty patch pushes nothing; the mirror is left exactly as it was.
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
#include "githelper/diff.h"
#include "githelper/mirror.h"
#include "githelper/push.h"
#include "tests/unit/gitrepo.h"

#define BRANCH "refs/heads/agrippa/run-1"
#define WHEN 1700000000
#define HANG_SECONDS 30

struct fx {
	char root[64];    /* a fresh temporary directory */
	char src[128];    /* the source repository */
	char remote[128]; /* the bare repository pushed to */
	char url[160];    /* file:// of remote */
	char git[128];    /* the mirror */
	char wd[128];     /* the workspace */
	char base[GH_OID_HEX_MAX + 1];
	size_t cap;
	char err[512];
};

static const char bin_old[] = "\177ELF\0\1\2\3 old binary\0\xff\xfe";
static const char bin_new[] = "\177ELF\0\1\2\3 new binary, longer\0\xff\xfe\0";

static const struct file base_files[] = {
    {"README.md", "hello\nworld\n", 0100644, 0},
    {"src/main.c", "int main(void) { return 0; }\n", 0100644, 0},
    {"del.txt", "delete me\n", 0100644, 0},
    {"run.sh", "#!/bin/sh\necho hi\n", 0100644, 0},
    {"bin.dat", bin_old, 0100644, sizeof(bin_old) - 1},
    {"link", "README.md", 0120000, 0},
    /* stripped from the workspace, kept in the base: the push keeps them */
    {".claude/settings.json", "{}\n", 0100644, 0},
    {".agrippa/x", "x\n", 0100644, 0},
};

/* The first line a shell command prints, into out. */
static void
sh_line(char *out, size_t outsz, const char *cmd)
{
	FILE *p = popen(cmd, "r");

	assert_non_null(p);
	if (fgets(out, (int)outsz, p) == NULL)
		out[0] = '\0';
	out[strcspn(out, "\n")] = '\0';
	pclose(p);
}

static void
put(const struct fx *f, const char *rel, const char *s, size_t n)
{
	char p[256];
	FILE *fp;

	snprintf(p, sizeof(p), "%s/%s", f->wd, rel);
	assert_non_null(fp = fopen(p, "w"));
	assert_int_equal(fwrite(s, 1, n, fp), n);
	fclose(fp);
}

static void
put_str(const struct fx *f, const char *rel, const char *s)
{
	put(f, rel, s, strlen(s));
}

static int
setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	char want[GH_OID_HEX_MAX + 1], ref[GH_REF_MAX + 1];
	uint64_t size;

	assert_non_null(f);
	strcpy(f->root, "/tmp/agrippa-push.XXXXXX");
	assert_non_null(mkdtemp(f->root));
	snprintf(f->src, sizeof(f->src), "%s/src", f->root);
	snprintf(f->remote, sizeof(f->remote), "%s/remote.git", f->root);
	snprintf(f->url, sizeof(f->url), "file://%s", f->remote);
	snprintf(f->git, sizeof(f->git), "%s/git", f->root);
	snprintf(f->wd, sizeof(f->wd), "%s/wd", f->root);
	assert_int_equal(mkdir(f->wd, 0755), 0);
	f->cap = 1 << 20;
	git_libgit2_init();
	make_repo(f->src, base_files, sizeof(base_files) / sizeof(base_files[0]), want);
	assert_int_equal(sh("git clone -q --bare %s %s", f->src, f->remote), 0);
	if (gh_fetch(f->remote, NULL, f->git, &size, f->err, sizeof(f->err)) != 0 ||
	    gh_workspace(f->git, "", f->wd, f->url, f->base, ref, f->err, sizeof(f->err)) != 0)
		fail_msg("the mirror and its workspace: %s", f->err);
	assert_string_equal(f->base, want);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fx *f = *state;
	int fd = open("/tmp", O_RDONLY | O_DIRECTORY);

	alarm(0);
	gh_remove_tree(fd, f->root + strlen("/tmp/"));
	close(fd);
	git_libgit2_shutdown();
	free(f);
	return 0;
}

/* gh_push of the workspace to branch under lease; its result. */
static int
push(struct fx *f, const char *branch, const char *lease, struct gh_push_res *res)
{
	struct gh_push_req q = {
	    .mirror = f->git,
	    .workdir = f->wd,
	    .base = f->base,
	    .cap = f->cap,
	    .author_name = "Agrippa",
	    .author_email = "agrippa@test.example",
	    .when = WHEN,
	    .message = "Agrippa run 1\n\nThe run's change.\n",
	    .url = f->url,
	    .token = NULL,
	    .username = NULL,
	    .branch = branch,
	    .lease = lease,
	};
	int rc;

	alarm(HANG_SECONDS);
	rc = gh_push(&q, res, f->err, sizeof(f->err));
	alarm(0);
	assert_null(strchr(f->err, '\n'));
	return rc;
}

static void
push_ok(struct fx *f, const char *lease, struct gh_push_res *res)
{
	if (push(f, BRANCH, lease, res) != 0)
		fail_msg("gh_push: %s", f->err);
}

/* The remote's branch (full name) in hex into out; "" when absent. */
static void
remote_at(const struct fx *f, const char *branch, char *out)
{
	git_repository *r;
	git_oid id;

	assert_int_equal(git_repository_open_bare(&r, f->remote), 0);
	if (git_reference_name_to_id(&id, r, branch) == 0)
		git_oid_tostr(out, GH_OID_HEX_MAX + 1, &id);
	else
		out[0] = '\0';
	git_repository_free(r);
}

/* The push must fail saying want; the remote's branch is then at was
 * ("" for absent). */
static void
push_fails(struct fx *f, const char *branch, const char *lease, const char *want, const char *was)
{
	struct gh_push_res res;
	char now[GH_OID_HEX_MAX + 1];

	assert_int_equal(push(f, branch, lease, &res), -1);
	if (strstr(f->err, want) == NULL)
		fail_msg("error \"%s\" does not say \"%s\"", f->err, want);
	assert_string_equal(res.commit, "");
	assert_false(res.already);
	if (strncmp(branch, "refs/heads/", 11) == 0 && strchr(branch, ' ') == NULL) {
		remote_at(f, branch, now);
		assert_string_equal(now, was);
	}
}

/* Changes of every kind. */
static void
change_all(const struct fx *f)
{
	char p[256];

	put_str(f, "README.md", "hello\nthere\nand more\n");
	snprintf(p, sizeof(p), "%s/del.txt", f->wd);
	assert_int_equal(unlink(p), 0);
	snprintf(p, sizeof(p), "%s/run.sh", f->wd);
	assert_int_equal(chmod(p, 0755), 0);
	put(f, "bin.dat", bin_new, sizeof(bin_new) - 1);
	put(f, "new.bin", bin_old, sizeof(bin_old) - 1);
	snprintf(p, sizeof(p), "%s/lib", f->wd);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/lib/sub", f->wd);
	assert_int_equal(mkdir(p, 0755), 0);
	put_str(f, "lib/sub/new.c", "int x = 1;\n");
	snprintf(p, sizeof(p), "%s/passwd", f->wd);
	assert_int_equal(symlink("/etc/passwd", p), 0);
	snprintf(p, sizeof(p), "%s/link", f->wd);
	assert_int_equal(unlink(p), 0);
	assert_int_equal(symlink("src/main.c", p), 0);
	put_str(f, "src/main.h", "no newline at the end");
	/* the daemon's artifacts: never pushed */
	snprintf(p, sizeof(p), "%s/.agrippa", f->wd);
	assert_int_equal(mkdir(p, 0755), 0);
	put_str(f, ".agrippa/result.json", "artifact\n");
}

/*
 * The tree git gives: gh_diff's patch applied with git apply --index to a
 * scratch clone of the source at base, then git write-tree.
 */
static void
git_apply_tree(struct fx *f, char *tree)
{
	char patch[160], scratch[160], cmd[512];
	size_t written;
	int fd;

	snprintf(patch, sizeof(patch), "%s/patch", f->root);
	snprintf(scratch, sizeof(scratch), "%s/scratch", f->root);
	assert_true((fd = open(patch, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) >= 0);
	if (gh_diff(f->git, f->wd, f->base, fd, f->cap, &written, f->err, sizeof(f->err)) != 0)
		fail_msg("gh_diff: %s", f->err);
	close(fd);
	assert_int_equal(sh("rm -rf %s && git clone -q %s %s && cd %s && git checkout -q %s && "
	                    "git apply --index %s",
	                    scratch, f->src, scratch, scratch, f->base, patch),
	                 0);
	snprintf(cmd, sizeof(cmd), "cd %s && git write-tree", scratch);
	sh_line(tree, GH_OID_HEX_MAX + 1, cmd);
}

/* The pushed commit in the remote: its tree, parent, author, message. */
static void
check_commit(const struct fx *f, const char *hex, const char *want_tree)
{
	git_repository *r;
	git_commit *c;
	git_oid id;
	const git_signature *a, *cm;
	char tree[GH_OID_HEX_MAX + 1], parent[GH_OID_HEX_MAX + 1];

	assert_int_equal(git_repository_open_bare(&r, f->remote), 0);
	assert_int_equal(git_oid_fromstr(&id, hex), 0);
	assert_int_equal(git_commit_lookup(&c, r, &id), 0);
	git_oid_tostr(tree, sizeof(tree), git_commit_tree_id(c));
	assert_string_equal(tree, want_tree);
	assert_int_equal(git_commit_parentcount(c), 1);
	git_oid_tostr(parent, sizeof(parent), git_commit_parent_id(c, 0));
	assert_string_equal(parent, f->base);
	a = git_commit_author(c);
	cm = git_commit_committer(c);
	assert_string_equal(a->name, "Agrippa");
	assert_string_equal(a->email, "agrippa@test.example");
	assert_int_equal(a->when.time, WHEN);
	assert_int_equal(a->when.offset, 0);
	assert_string_equal(cm->name, "Agrippa");
	assert_int_equal(cm->when.time, WHEN);
	assert_string_equal(git_commit_message(c), "Agrippa run 1\n\nThe run's change.\n");
	git_commit_free(c);
	git_repository_free(r);
}

/* The blob at path in the tree of commit hex of the remote: its mode and
 * content (NUL-terminated, into out). */
static unsigned
remote_blob(const struct fx *f, const char *hex, const char *path, char *out, size_t outsz)
{
	git_repository *r;
	git_commit *c;
	git_tree *t;
	git_tree_entry *e;
	git_blob *b;
	git_oid id;
	unsigned mode;

	assert_int_equal(git_repository_open_bare(&r, f->remote), 0);
	assert_int_equal(git_oid_fromstr(&id, hex), 0);
	assert_int_equal(git_commit_lookup(&c, r, &id), 0);
	assert_int_equal(git_commit_tree(&t, c), 0);
	if (git_tree_entry_bypath(&e, t, path) != 0) {
		out[0] = '\0';
		mode = 0;
	} else {
		mode = git_tree_entry_filemode(e);
		assert_int_equal(git_blob_lookup(&b, r, git_tree_entry_id(e)), 0);
		snprintf(out, outsz, "%.*s", (int)git_blob_rawsize(b),
		         (const char *)git_blob_rawcontent(b));
		git_blob_free(b);
		git_tree_entry_free(e);
	}
	git_tree_free(t);
	git_commit_free(c);
	git_repository_free(r);
	return mode;
}

/* Every file of the mirror, with its size and mtime, listed into path. */
static void
list_mirror(const struct fx *f, const char *name)
{
	assert_int_equal(
	    sh("cd %s && find . -printf '%%p %%s %%T@\\n' | sort > %s/%s", f->git, f->root, name),
	    0);
}

/* A new branch: exactly base + the patch, links as links; nothing of the
 * mirror changed. */
static void
t_new_branch(void **state)
{
	struct fx *f = *state;
	struct gh_push_res res;
	char want[GH_OID_HEX_MAX + 1], now[GH_OID_HEX_MAX + 1], blob[256];

	change_all(f);
	git_apply_tree(f, want);
	assert_int_equal(strlen(want), strlen(f->base));
	list_mirror(f, "before");
	push_ok(f, "", &res);
	list_mirror(f, "after");
	assert_false(res.empty);
	assert_false(res.already);
	remote_at(f, BRANCH, now);
	assert_string_equal(now, res.commit);
	check_commit(f, res.commit, want);
	assert_int_equal(remote_blob(f, res.commit, "passwd", blob, sizeof(blob)), 0120000);
	assert_string_equal(blob, "/etc/passwd");
	assert_int_equal(remote_blob(f, res.commit, "link", blob, sizeof(blob)), 0120000);
	assert_string_equal(blob, "src/main.c");
	assert_int_equal(remote_blob(f, res.commit, "run.sh", blob, sizeof(blob)), 0100755);
	assert_int_equal(remote_blob(f, res.commit, "del.txt", blob, sizeof(blob)), 0);
	assert_int_equal(remote_blob(f, res.commit, "lib/sub/new.c", blob, sizeof(blob)), 0100644);
	assert_string_equal(blob, "int x = 1;\n");
	/* what the checkout stripped stays as the base has it; artifacts never go */
	assert_int_equal(remote_blob(f, res.commit, ".claude/settings.json", blob, sizeof(blob)),
	                 0100644);
	assert_int_equal(remote_blob(f, res.commit, ".agrippa/x", blob, sizeof(blob)), 0100644);
	assert_int_equal(remote_blob(f, res.commit, ".agrippa/result.json", blob, sizeof(blob)), 0);
	/* not an object, not a ref, not an mtime of the mirror changed */
	assert_int_equal(sh("cmp -s %s/before %s/after", f->root, f->root), 0);
	assert_int_not_equal(sh("git --git-dir=%s cat-file -e %s 2>/dev/null", f->git, res.commit),
	                     0);
	assert_int_equal(sh("git --git-dir=%s for-each-ref | grep -q agrippa", f->git), 256);
}

/* The same workspace pushed again: the same commit, found there, nothing
 * sent (whatever the lease says: a retry after a crash that lost the
 * answer). */
static void
t_retry_same(void **state)
{
	struct fx *f = *state;
	struct gh_push_res first, res;
	char now[GH_OID_HEX_MAX + 1];

	change_all(f);
	push_ok(f, "", &first);
	push_ok(f, "", &res);
	assert_true(res.already);
	assert_string_equal(res.commit, first.commit);
	push_ok(f, first.commit, &res);
	assert_true(res.already);
	assert_string_equal(res.commit, first.commit);
	remote_at(f, BRANCH, now);
	assert_string_equal(now, first.commit);
}

/* A retry after a change, with our last commit as the lease: our commit is
 * replaced (it is not a fast-forward: both have the base as parent). */
static void
t_retry_changed(void **state)
{
	struct fx *f = *state;
	struct gh_push_res first, res;
	char now[GH_OID_HEX_MAX + 1], want[GH_OID_HEX_MAX + 1];

	put_str(f, "README.md", "first try\n");
	push_ok(f, "", &first);
	put_str(f, "README.md", "second try\n");
	git_apply_tree(f, want);
	push_ok(f, first.commit, &res);
	assert_false(res.already);
	assert_string_not_equal(res.commit, first.commit);
	remote_at(f, BRANCH, now);
	assert_string_equal(now, res.commit);
	check_commit(f, res.commit, want);
}

/* Someone else's commit on the branch after ours: refused, theirs stays. */
static void
t_someone_else(void **state)
{
	struct fx *f = *state;
	struct gh_push_res first;
	char theirs[GH_OID_HEX_MAX + 1], cmd[512];

	put_str(f, "README.md", "first try\n");
	push_ok(f, "", &first);
	assert_int_equal(sh("cd %s && git clone -q %s other && cd other && "
	                    "git checkout -q agrippa/run-1 && echo theirs > theirs.txt && "
	                    "git add theirs.txt && git -c user.name=o -c user.email=o@example "
	                    "commit -qm theirs && git push -q origin agrippa/run-1",
	                    f->root, f->remote),
	                 0);
	snprintf(cmd, sizeof(cmd), "git --git-dir=%s rev-parse %s", f->remote, BRANCH);
	sh_line(theirs, sizeof(theirs), cmd);
	assert_string_not_equal(theirs, first.commit);
	put_str(f, "README.md", "second try\n");
	push_fails(f, BRANCH, first.commit, "was moved by someone else (now at ", theirs);
	assert_non_null(strstr(f->err, theirs));
	assert_non_null(strstr(f->err, BRANCH));
	/* and as the first push, the same */
	push_fails(f, BRANCH, "", "already exists on the remote", theirs);
}

/* A lease that is not where the branch is; a branch that is there for a
 * first push; a branch that is gone for a retry. */
static void
t_leases(void **state)
{
	struct fx *f = *state;
	struct gh_push_res first;

	assert_int_equal(sh("git --git-dir=%s update-ref refs/heads/taken %s", f->remote, f->base),
	                 0);
	put_str(f, "README.md", "a change\n");
	push_fails(f, "refs/heads/taken", "", "already exists on the remote (at ", f->base);
	push_ok(f, "", &first);
	push_fails(f, "refs/heads/taken", first.commit, "was moved by someone else", f->base);
	push_fails(f, "refs/heads/gone", first.commit, "no longer on the remote", "");
	put_str(f, "README.md", "another change\n");
	push_fails(f, BRANCH, f->base, "was moved by someone else", first.commit);
}

/*
 * The workspace's .git pushes elsewhere, has hooks, and alternates with a
 * planted object: the push goes to the URL given, nothing runs, nothing
 * else is touched, and the commit is the same as from a clean .git.
 */
static void
t_hostile_dotgit(void **state)
{
	struct fx *f = *state;
	struct gh_push_res clean, res;
	char p[256], hook[256], marker[160], other[GH_OID_HEX_MAX + 1];
	static const char *const hooks[] = {"pre-push", "pre-commit", "post-commit",
	                                    "reference-transaction", "post-index-change"};
	size_t i;

	put_str(f, "README.md", "a change\n");
	push_ok(f, "", &clean);
	assert_int_equal(sh("git --git-dir=%s update-ref -d %s", f->remote, BRANCH), 0);
	assert_int_equal(sh("cd %s && git init -q --bare elsewhere.git && git init -q planted && "
	                    "cd planted && echo planted > README.md && git add README.md && "
	                    "git -c user.name=p -c user.email=p@example commit -qm p",
	                    f->root),
	                 0);
	snprintf(marker, sizeof(marker), "%s/hook-ran", f->root);
	snprintf(p, sizeof(p), "%s/.git/config", f->wd);
	assert_int_equal(sh("printf '[remote \"origin\"]\\n\\turl = %s/elsewhere.git\\n"
	                    "\\tpushurl = %s/elsewhere.git\\n[core]\\n\\thooksPath = hooks\\n"
	                    "\\tworktree = /\\n[url \"%s/elsewhere.git\"]\\n\\tinsteadOf = %s\\n' "
	                    "> %s",
	                    f->root, f->root, f->root, f->url, p),
	                 0);
	for (i = 0; i < sizeof(hooks) / sizeof(hooks[0]); i++) {
		snprintf(hook, sizeof(hook), "%s/.git/hooks/%s", f->wd, hooks[i]);
		assert_int_equal(
		    sh("mkdir -p %s/.git/hooks && printf '#!/bin/sh\\ntouch %s\\n' > %s "
		       "&& chmod 755 %s",
		       f->wd, marker, hook, hook),
		    0);
	}
	assert_int_equal(
	    sh("echo %s/planted/.git/objects > %s/.git/objects/info/alternates", f->root, f->wd),
	    0);
	push_ok(f, "", &res);
	assert_string_equal(res.commit, clean.commit);
	assert_false(res.already);
	assert_int_equal(access(marker, F_OK), -1);
	assert_int_equal(sh("test -z \"$(git --git-dir=%s/elsewhere.git for-each-ref)\"", f->root),
	                 0);
	remote_at(f, BRANCH, other);
	assert_string_equal(other, res.commit);
}

/* A FIFO, a patch over the cap: refused with the reason, nothing pushed. */
static void
t_refused_tree(void **state)
{
	struct fx *f = *state;
	char p[256], *big;

	snprintf(p, sizeof(p), "%s/fifo", f->wd);
	assert_int_equal(mkfifo(p, 0644), 0);
	push_fails(f, BRANCH, "", "fifo: a FIFO", "");
	assert_int_equal(unlink(p), 0);
	big = malloc(64 * 1024);
	assert_non_null(big);
	memset(big, 'x', 64 * 1024);
	put(f, "big.txt", big, 64 * 1024);
	free(big);
	f->cap = 4096;
	push_fails(f, BRANCH, "", "patch larger than 4096 bytes", "");
}

/* Branch names git or we would not take: refused before anything. */
static void
t_bad_branch(void **state)
{
	struct fx *f = *state;
	static const char *const bad[] = {
	    "agrippa/run-1",      "refs/heads/",       "refs/tags/v1",   "refs/heads/a..b",
	    "refs/heads/-x",      "refs/heads/x.lock", "refs/heads/a b", "refs/heads/a~1",
	    "refs/heads/.hidden", "refs/heads/a//b",   "refs/heads/@",   "refs/heads/a\nb",
	    "refs/heads/x/",      "refs/heads/a@{1}",  "refs/heads/a:b", "refs/heads/a\\b",
	};
	char longname[400];
	size_t i;

	put_str(f, "README.md", "a change\n");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		push_fails(f, bad[i], "", "branch", "");
	memset(longname, 'a', sizeof(longname) - 1);
	memcpy(longname, "refs/heads/", 11);
	longname[sizeof(longname) - 1] = '\0';
	push_fails(f, longname, "", "branch", "");
	assert_int_equal(
	    sh("test -z \"$(git --git-dir=%s for-each-ref refs/heads/agrippa)\"", f->remote), 0);
}

/* Requests that are wrong in another way: refused, naming the branch. */
static void
t_bad_request(void **state)
{
	struct fx *f = *state;
	struct gh_push_res res;
	struct gh_push_req q = {
	    .mirror = f->git,
	    .workdir = f->wd,
	    .base = f->base,
	    .cap = 1 << 20,
	    .author_name = "Agrippa",
	    .author_email = "agrippa@test.example",
	    .when = WHEN,
	    .message = "m",
	    .url = f->url,
	    .branch = BRANCH,
	    .lease = "",
	};
	struct gh_push_req b;

	put_str(f, "README.md", "a change\n");
#define REFUSED(field, value, want)                                                                \
	do {                                                                                       \
		b = q;                                                                             \
		b.field = value;                                                                   \
		assert_int_equal(gh_push(&b, &res, f->err, sizeof(f->err)), -1);                   \
		if (strstr(f->err, want) == NULL)                                                  \
			fail_msg("error \"%s\" does not say \"%s\"", f->err, want);                \
	} while (0)
	REFUSED(lease, "abc", BRANCH ": the lease must be");
	REFUSED(lease, "0123456789ABCDEF0123456789ABCDEF01234567", "the lease must be");
	REFUSED(mirror, "git", "absolute");
	REFUSED(workdir, "wd", "absolute");
	REFUSED(author_name, "A <b>", "the author");
	REFUSED(author_name, "A\nB", "the author");
	REFUSED(author_email, "", "the author");
	REFUSED(when, -1, "1970");
	REFUSED(message, "", "no message");
	REFUSED(url, "https://x-access-token:secret@example.com/r.git", "without credentials");
	REFUSED(url, "http://example.com/r.git", "https://");
	REFUSED(url, "ssh://example.com/r.git", "https://");
	REFUSED(token, "secret", "user name");
	REFUSED(base, "HEAD", "base is not a full commit id");
	REFUSED(base, "0123456789abcdef0123456789abcdef01234567", "base");
	REFUSED(url, "file:///nonexistent/remote.git", BRANCH);
#undef REFUSED
	assert_int_equal(
	    sh("test -z \"$(git --git-dir=%s for-each-ref refs/heads/agrippa)\"", f->remote), 0);
}

/* Nothing changed (the stripped names and artifacts aside): nothing is
 * committed or pushed. */
static void
t_empty(void **state)
{
	struct fx *f = *state;
	struct gh_push_res res;
	char now[GH_OID_HEX_MAX + 1], p[256];

	snprintf(p, sizeof(p), "%s/.agrippa", f->wd);
	assert_int_equal(mkdir(p, 0755), 0);
	put_str(f, ".agrippa/result.json", "artifact\n");
	push_ok(f, "", &res);
	assert_true(res.empty);
	assert_false(res.already);
	assert_string_equal(res.commit, "");
	remote_at(f, BRANCH, now);
	assert_string_equal(now, "");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(t_new_branch, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_retry_same, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_retry_changed, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_someone_else, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_leases, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_hostile_dotgit, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_refused_tree, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_bad_branch, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_bad_request, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_empty, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
