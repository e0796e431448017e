/*
 * The git helper's diff (githelper/diff.c) against real repositories built
 * here with libgit2, mirrored (gh_fetch) and written out (gh_workspace) as
 * a run's would be: each kind of change
 * shows in git's patch format (modified, new in a new directory, deleted,
 * made executable, binary, a link); a patch applies with git_apply to a
 * fresh clone and gives the same files; what the hostile work tree plants
 * (a link to /etc/passwd, FIFOs, sockets, a tampered .git, files under
 * .agrippa) cannot make the diff read outside, hang, or change; the cap and
 * the base id are enforced.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

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

#include <time.h>

#include "common/wsstat.h"
#include "githelper/checkout.h"
#include "githelper/diff.h"
#include "githelper/mirror.h"
#include "githelper/stat.h"
#include "remover/remover.h"
#include "tests/unit/gitrepo.h"

/* Every test that could block gets this long, then SIGALRM kills it. */
#define HANG_SECONDS 20

struct fx {
	char root[64]; /* a fresh temporary directory */
	char src[128]; /* the source repository */
	char git[128]; /* the mirror (the trusted store) */
	char wd[128];  /* the work tree the agent changes */
	char out[128]; /* the patch file */
	char list[128]; /* the workspace's list, as the chowner writes it */
	char base[GH_OID_HEX_MAX + 1];
	char *patch; /* the last patch read back, NUL-terminated */
	size_t len;
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
    /* stripped by the checkout: never a deletion in the patch */
    {".claude/settings.json", "{}\n", 0100644, 0},
    {".mcp.json", "{}\n", 0100644, 0},
    {".agrippa/x", "x\n", 0100644, 0},
};

static void
write_bytes(const char *path, const char *s, size_t n)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fwrite(s, 1, n, f), n);
	fclose(f);
}

static void
write_file(const char *path, const char *s)
{
	write_bytes(path, s, strlen(s));
}

/* The whole file at path, malloc'ed and NUL-terminated; *n its size. */
static char *
slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "r");
	char *buf;
	long sz;

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	sz = ftell(f);
	assert_true(sz >= 0);
	rewind(f);
	buf = malloc((size_t)sz + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)sz, f), (size_t)sz);
	buf[sz] = '\0';
	fclose(f);
	*n = (size_t)sz;
	return buf;
}

static int
setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	char want[GH_OID_HEX_MAX + 1], err[256], ref[GH_REF_MAX + 1];
	uint64_t size;

	assert_non_null(f);
	strcpy(f->root, "/tmp/agrippa-diff.XXXXXX");
	assert_non_null(mkdtemp(f->root));
	snprintf(f->src, sizeof(f->src), "%s/src", f->root);
	snprintf(f->git, sizeof(f->git), "%s/git", f->root);
	snprintf(f->wd, sizeof(f->wd), "%s/wd", f->root);
	snprintf(f->out, sizeof(f->out), "%s/patch", f->root);
	assert_int_equal(mkdir(f->wd, 0755), 0);
	git_libgit2_init();
	make_repo(f->src, base_files, sizeof(base_files) / sizeof(base_files[0]), want);
	if (gh_fetch(f->src, NULL, f->git, &size, err, sizeof(err)) != 0 ||
	    gh_workspace(f->git, "", f->wd, f->src, f->base, ref, err, sizeof(err)) != 0)
		fail_msg("the mirror and its workspace: %s", err);
	assert_string_equal(f->base, want);
	snprintf(f->list, sizeof(f->list), "%s/ws.stat", f->root);
	*state = f;
	return 0;
}

static void make_list(struct fx *f);

/* The fixture with its workspace's list, as a run's is after the chown:
 * every diff of a test is made both ways and must agree (run_diff). */
static int
setup_listed(void **state)
{
	setup(state);
	make_list(*state);
	return 0;
}

/* Let the clock tick past the list's end: what is changed from now on is
 * changed after the list, as a sandbox's changes are. */
static void
next_tick(void)
{
	struct timespec ts = {0, 20 * 1000 * 1000};

	nanosleep(&ts, NULL);
}

/* The workspace's list made as the supervisor has it made, by
 * chowner_give (to ourselves: no capability needed) for base, and sealed
 * when seal (wsstat_seal, as the supervisor seals it before the sandbox
 * starts) a clock tick later; mode its file's mode. */
static void
list_for(struct fx *f, const char *base, mode_t mode, int seal)
{
	char err[256];
	uint64_t count;
	int here, wd, fd;

	assert_true((here = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0);
	assert_true((wd = open(f->wd, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0);
	(void)unlink(f->list);
	assert_true((fd = open(f->list, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) >= 0);
	if (chowner_give(wd, geteuid(), getegid(), fd, base, &count, err, sizeof(err)) != 0)
		fail_msg("chowner_give: %s", err);
	assert_true(count > 5);
	assert_int_equal(fchmod(fd, mode), 0);
	assert_int_equal(fchdir(here), 0);
	close(here);
	close(wd);
	close(fd);
	if (seal) {
		next_tick();
		assert_true((fd = open(f->list, O_WRONLY | O_APPEND | O_CLOEXEC)) >= 0);
		assert_int_equal(wsstat_seal(fd), 0);
		close(fd);
	}
}

static void
make_list_for(struct fx *f, const char *base, mode_t mode)
{
	list_for(f, base, mode, 1);
}

static void
make_list(struct fx *f)
{
	make_list_for(f, f->base, 0600);
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
	free(f->patch);
	free(f);
	return 0;
}

/* gh_diff (list NULL) or gh_diff_listed of the fixture into f->out with
 * cap; the patch read back into f->patch. */
static int
run_one(struct fx *f, const char *base, const char *list, size_t cap, size_t *written, char *err,
        size_t errsz)
{
	int fd, rc;

	fd = open(f->out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	alarm(HANG_SECONDS);
	rc = list == NULL ? gh_diff(f->git, f->wd, base, fd, cap, written, err, errsz)
	                  : gh_diff_listed(f->git, f->wd, base, list, fd, cap, written, err, errsz);
	alarm(0);
	close(fd);
	free(f->patch);
	f->patch = slurp(f->out, &f->len);
	assert_int_equal(f->len, *written);
	return rc;
}

/*
 * gh_diff of the fixture, and again through the workspace's list made at
 * set-up (before the test changed anything): both must give the same
 * result, the same patch byte for byte and the same error.  The patch is
 * left in f->patch.  Returns gh_diff's result; *written and err as it
 * left them.
 */
static int
run_diff(struct fx *f, const char *base, size_t cap, size_t *written, char *err, size_t errsz)
{
	char err2[256];
	char *plain;
	size_t plainlen, written2;
	int rc, rc2;

	rc = run_one(f, base, NULL, cap, written, err, errsz);
	if (access(f->list, F_OK) != 0)
		return rc;
	plain = f->patch;
	plainlen = f->len;
	f->patch = NULL;
	rc2 = run_one(f, base, f->list, cap, &written2, err2, sizeof(err2));
	if (rc2 != rc || written2 != *written || f->len != plainlen ||
	    memcmp(f->patch, plain, plainlen) != 0)
		fail_msg("through the list: %d (%zu bytes, %s), plainly: %d (%zu bytes, %s)\n"
		         "listed:\n%s\nplain:\n%s",
		         rc2, written2, rc2 == 0 ? "" : err2, rc, *written, rc == 0 ? "" : err, f->patch,
		         plain);
	if (rc != 0 && strcmp(err, err2) != 0)
		fail_msg("through the list: \"%s\", plainly: \"%s\"", err2, err);
	free(plain);
	return rc;
}

/* The diff must succeed; returns the patch. */
static const char *
diff_ok(struct fx *f)
{
	char err[256];
	size_t written;

	if (run_diff(f, f->base, 1 << 20, &written, err, sizeof(err)) != 0)
		fail_msg("gh_diff: %s", err);
	return f->patch;
}

/* The diff must fail with a reason containing want. */
static void
diff_fails(struct fx *f, const char *want)
{
	char err[256];
	size_t written;

	assert_int_equal(run_diff(f, f->base, 1 << 20, &written, err, sizeof(err)), -1);
	if (strstr(err, want) == NULL)
		fail_msg("error \"%s\" does not say \"%s\"", err, want);
	assert_null(strchr(err, '\n'));
}

static void
wpath(const struct fx *f, char *p, size_t psz, const char *rel)
{
	snprintf(p, psz, "%s/%s", f->wd, rel);
}

static void
assert_has(const char *patch, const char *s)
{
	if (strstr(patch, s) == NULL)
		fail_msg("the patch lacks \"%s\":\n%s", s, patch);
}

static void
assert_lacks(const char *patch, const char *s)
{
	if (strstr(patch, s) != NULL)
		fail_msg("the patch has \"%s\":\n%s", s, patch);
}

/* A fresh checkout: nothing to say, nothing written (the stripped
 * .claude, .mcp.json and .agrippa are not deletions). */
static void
t_empty(void **state)
{
	struct fx *f = *state;
	char err[256];
	size_t written = 99;

	assert_int_equal(run_diff(f, f->base, 1 << 20, &written, err, sizeof(err)), 0);
	assert_int_equal(written, 0);
	assert_int_equal(f->len, 0);
}

static void
t_modified(void **state)
{
	struct fx *f = *state;
	char p[256];
	const char *d;

	wpath(f, p, sizeof(p), "README.md");
	write_file(p, "hello\nthere\n");
	d = diff_ok(f);
	assert_has(d, "diff --git a/README.md b/README.md\n");
	assert_has(d, "--- a/README.md\n+++ b/README.md\n");
	assert_has(d, "\n-world\n+there\n");
	assert_lacks(d, "src/main.c");
}

/* An untracked file in a new directory tree, with its content. */
static void
t_untracked(void **state)
{
	struct fx *f = *state;
	char p[256];
	const char *d;

	wpath(f, p, sizeof(p), "lib");
	assert_int_equal(mkdir(p, 0755), 0);
	wpath(f, p, sizeof(p), "lib/sub");
	assert_int_equal(mkdir(p, 0755), 0);
	wpath(f, p, sizeof(p), "lib/sub/new.c");
	write_file(p, "int x = 1;\n");
	d = diff_ok(f);
	assert_has(d, "diff --git a/lib/sub/new.c b/lib/sub/new.c\nnew file mode 100644\n");
	assert_has(d, "--- /dev/null\n+++ b/lib/sub/new.c\n");
	assert_has(d, "+int x = 1;\n");
}

static void
t_deleted(void **state)
{
	struct fx *f = *state;
	char p[256];
	const char *d;

	wpath(f, p, sizeof(p), "del.txt");
	assert_int_equal(unlink(p), 0);
	d = diff_ok(f);
	assert_has(d, "diff --git a/del.txt b/del.txt\ndeleted file mode 100644\n");
	assert_has(d, "--- a/del.txt\n+++ /dev/null\n");
	assert_has(d, "-delete me\n");
}

static void
t_executable(void **state)
{
	struct fx *f = *state;
	char p[256];
	const char *d;

	wpath(f, p, sizeof(p), "run.sh");
	assert_int_equal(chmod(p, 0755), 0);
	d = diff_ok(f);
	assert_has(d, "diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n");
}

/* Binary files, changed and new, in git's binary patch form. */
static void
t_binary(void **state)
{
	struct fx *f = *state;
	char p[256];
	const char *d;

	wpath(f, p, sizeof(p), "bin.dat");
	write_bytes(p, bin_new, sizeof(bin_new) - 1);
	wpath(f, p, sizeof(p), "new.bin");
	write_bytes(p, bin_old, sizeof(bin_old) - 1);
	d = diff_ok(f);
	assert_has(d, "diff --git a/bin.dat b/bin.dat\n");
	assert_has(d, "diff --git a/new.bin b/new.bin\nnew file mode 100644\n");
	assert_has(d, "GIT binary patch\n");
	assert_lacks(d, "Binary files");
}

/* Links to /etc/passwd and to /etc are diffed as links: their target text,
 * never what they point at. */
static void
t_symlink(void **state)
{
	struct fx *f = *state;
	char p[256];
	const char *d;
	size_t n;
	char *pw;

	pw = slurp("/etc/passwd", &n);
	assert_non_null(strstr(pw, "root:"));
	free(pw);
	wpath(f, p, sizeof(p), "passwd");
	assert_int_equal(symlink("/etc/passwd", p), 0);
	wpath(f, p, sizeof(p), "etc");
	assert_int_equal(symlink("/etc", p), 0);
	d = diff_ok(f);
	assert_has(d, "diff --git a/passwd b/passwd\nnew file mode 120000\n");
	assert_has(d, "+/etc/passwd\n\\ No newline at end of file\n");
	assert_has(d, "diff --git a/etc b/etc\nnew file mode 120000\n");
	assert_lacks(d, "root:");
	assert_lacks(d, "b/etc/");
}

/*
 * What libgit2 itself does with FIFOs, the premise of diff.c's scan: its
 * work-directory iterator skips them without opening them, so an untracked
 * one is not seen at all and a tracked file replaced by one looks deleted.
 */
static void
t_libgit2_fifo(void **state)
{
	struct fx *f = *state;
	git_repository *repo;
	git_object *tree;
	git_diff *diff;
	git_diff_options opts;
	const git_diff_delta *dd;
	char p[256];
	size_t i;
	int deleted = 0;

	wpath(f, p, sizeof(p), "fifodir");
	assert_int_equal(mkdir(p, 0755), 0);
	wpath(f, p, sizeof(p), "fifodir/fifo");
	assert_int_equal(mkfifo(p, 0644), 0);
	wpath(f, p, sizeof(p), "README.md");
	assert_int_equal(unlink(p), 0);
	assert_int_equal(mkfifo(p, 0644), 0);
	assert_int_equal(git_repository_open_bare(&repo, f->git), 0);
	assert_int_equal(git_repository_set_workdir(repo, f->wd, 0), 0);
	assert_int_equal(git_revparse_single(&tree, repo, "HEAD^{tree}"), 0);
	git_diff_options_init(&opts, GIT_DIFF_OPTIONS_VERSION);
	opts.flags = GIT_DIFF_INCLUDE_UNTRACKED | GIT_DIFF_RECURSE_UNTRACKED_DIRS |
	             GIT_DIFF_SHOW_UNTRACKED_CONTENT;
	alarm(HANG_SECONDS);
	assert_int_equal(git_diff_tree_to_workdir(&diff, repo, (git_tree *)tree, &opts), 0);
	alarm(0);
	for (i = 0; i < git_diff_num_deltas(diff); i++) {
		dd = git_diff_get_delta(diff, i);
		assert_null(strstr(dd->new_file.path, "fifo"));
		if (strcmp(dd->old_file.path, "README.md") == 0) {
			assert_int_equal(dd->status, GIT_DELTA_DELETED);
			deleted = 1;
		}
	}
	assert_true(deleted);
	git_diff_free(diff);
	git_object_free(tree);
	git_repository_free(repo);
}

/* gh_diff refuses a FIFO in an untracked directory, with its path, and
 * does not block. */
static void
t_fifo_untracked(void **state)
{
	struct fx *f = *state;
	char p[256];

	wpath(f, p, sizeof(p), "newdir");
	assert_int_equal(mkdir(p, 0755), 0);
	wpath(f, p, sizeof(p), "newdir/fifo");
	assert_int_equal(mkfifo(p, 0644), 0);
	diff_fails(f, "newdir/fifo: a FIFO");
}

/* ... in place of a tracked file: refused, not passed off as a deletion. */
static void
t_fifo_tracked(void **state)
{
	struct fx *f = *state;
	char p[256];

	wpath(f, p, sizeof(p), "src/main.c");
	assert_int_equal(unlink(p), 0);
	assert_int_equal(mkfifo(p, 0644), 0);
	diff_fails(f, "src/main.c: a FIFO");
}

/*
 * Where libgit2 would block: a .gitignore or .gitattributes that is a FIFO
 * or a link to one (libgit2 opens them following links).  A socket, too.
 */
static void
t_fifo_settings(void **state)
{
	struct fx *f = *state;
	struct sockaddr_un sun;
	char p[256], q[256];
	int s;

	wpath(f, p, sizeof(p), "src/.gitignore");
	assert_int_equal(mkfifo(p, 0644), 0);
	diff_fails(f, "src/.gitignore: a FIFO");
	assert_int_equal(unlink(p), 0);
	snprintf(q, sizeof(q), "%s/outside-fifo", f->root);
	assert_int_equal(mkfifo(q, 0644), 0);
	wpath(f, p, sizeof(p), ".gitattributes");
	assert_int_equal(symlink(q, p), 0);
	diff_fails(f, ".gitattributes: a link where git reads settings");
	assert_int_equal(unlink(p), 0);
	wpath(f, p, sizeof(p), "sock");
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	assert_true(strlen(p) < sizeof(sun.sun_path));
	strcpy(sun.sun_path, p);
	assert_true((s = socket(AF_UNIX, SOCK_STREAM, 0)) >= 0);
	assert_int_equal(bind(s, (struct sockaddr *)&sun, sizeof(sun)), 0);
	diff_fails(f, "sock: a socket");
	close(s);
	assert_int_equal(unlink(p), 0);
	diff_ok(f);
}

/* A control character in a refused path does not break err's one line. */
static void
t_fifo_name(void **state)
{
	struct fx *f = *state;
	char p[256];

	wpath(f, p, sizeof(p), "a\nb");
	assert_int_equal(mkfifo(p, 0644), 0);
	diff_fails(f, "a?b: a FIFO");
}

/*
 * The agent owns workdir/.git: a config that moves the work tree to /, a
 * bogus alternates file, a broken HEAD, then .git as a link to / — the
 * patch stays the same, since only the bare copy is read.
 */
static void
t_tampered_dotgit(void **state)
{
	struct fx *f = *state;
	char p[256], *want;
	int fd;

	wpath(f, p, sizeof(p), "README.md");
	write_file(p, "hello\nthere\n");
	want = strdup(diff_ok(f));
	assert_non_null(want);
	wpath(f, p, sizeof(p), ".git/config");
	write_file(p, "[core]\n\tworktree = /\n\tbare = false\n\tsymlinks = false\n"
	              "\tfilemode = false\n[include]\n\tpath = /etc/passwd\n");
	wpath(f, p, sizeof(p), ".git/objects/info/alternates");
	write_file(p, "/nonexistent/objects\n/etc\n");
	wpath(f, p, sizeof(p), ".git/HEAD");
	write_file(p, "ref: refs/heads/nowhere\n");
	assert_string_equal(diff_ok(f), want);
	fd = open(f->wd, O_RDONLY | O_DIRECTORY);
	assert_int_equal(gh_remove_tree(fd, ".git"), 0);
	close(fd);
	wpath(f, p, sizeof(p), ".git");
	assert_int_equal(symlink("/", p), 0);
	assert_string_equal(diff_ok(f), want);
	free(want);
}

/*
 * .agrippa (the daemon's artifacts), .claude and .mcp.json are never part
 * of the patch, even when a .gitignore tries to bring .agrippa back in, and
 * a FIFO under .agrippa is not even looked at.  The base tree holds all
 * three; nothing is written to the trusted copy to leave them out.
 */
static void
t_excluded(void **state)
{
	struct fx *f = *state;
	char p[256], cmd[512], *before, *after;
	const char *d;
	size_t n;

	snprintf(cmd, sizeof(cmd), "cd %s && find . | sort > %s/before", f->git, f->root);
	assert_int_equal(system(cmd), 0);
	wpath(f, p, sizeof(p), ".agrippa");
	assert_int_equal(mkdir(p, 0755), 0);
	wpath(f, p, sizeof(p), ".agrippa/sub");
	assert_int_equal(mkdir(p, 0755), 0);
	wpath(f, p, sizeof(p), ".agrippa/sub/.gitignore");
	assert_int_equal(mkfifo(p, 0644), 0);
	wpath(f, p, sizeof(p), ".agrippa/result.json");
	write_file(p, "artifact\n");
	wpath(f, p, sizeof(p), ".claude");
	assert_int_equal(mkdir(p, 0755), 0);
	wpath(f, p, sizeof(p), ".claude/settings.json");
	write_file(p, "{\"planted\": 1}\n");
	wpath(f, p, sizeof(p), ".mcp.json");
	write_file(p, "{\"planted\": 1}\n");
	wpath(f, p, sizeof(p), ".gitignore");
	write_file(p, "!/.agrippa\n!/.agrippa/**\n!.claude\n");
	wpath(f, p, sizeof(p), "kept.txt");
	write_file(p, "kept\n");
	d = diff_ok(f);
	assert_has(d, "diff --git a/kept.txt b/kept.txt\n");
	assert_has(d, "diff --git a/.gitignore b/.gitignore\n");
	assert_lacks(d, "a/.agrippa");
	assert_lacks(d, "b/.agrippa");
	assert_lacks(d, "artifact");
	assert_lacks(d, "planted");
	assert_lacks(d, ".claude/settings.json");
	assert_lacks(d, "a/.mcp.json");
	snprintf(cmd, sizeof(cmd), "cd %s && find . | sort > %s/after", f->git, f->root);
	assert_int_equal(system(cmd), 0);
	snprintf(p, sizeof(p), "%s/before", f->root);
	before = slurp(p, &n);
	snprintf(p, sizeof(p), "%s/after", f->root);
	after = slurp(p, &n);
	assert_string_equal(before, after);
	free(before);
	free(after);
}

/* Files the work tree's .gitignore names are left out, as git add would. */
static void
t_ignored(void **state)
{
	struct fx *f = *state;
	char p[256];
	const char *d;

	wpath(f, p, sizeof(p), ".gitignore");
	write_file(p, "*.o\n");
	wpath(f, p, sizeof(p), "src/main.o");
	write_file(p, "object\n");
	d = diff_ok(f);
	assert_has(d, "+*.o\n");
	assert_lacks(d, "main.o");
}

/* Past the cap: failure with the cap in the reason, never more than cap
 * bytes written; at exactly the patch's size: success. */
static void
t_cap(void **state)
{
	struct fx *f = *state;
	char p[256], err[256], *big;
	size_t written, full;

	big = malloc(64 * 1024 + 1);
	assert_non_null(big);
	memset(big, 'x', 64 * 1024);
	big[64 * 1024] = '\0';
	wpath(f, p, sizeof(p), "big.txt");
	write_file(p, big);
	free(big);
	full = strlen(diff_ok(f));
	assert_true(full > 64 * 1024);
	assert_int_equal(run_diff(f, f->base, 1000, &written, err, sizeof(err)), -1);
	assert_string_equal(err, "patch larger than 1000 bytes");
	assert_true(written <= 1000);
	assert_int_equal(run_diff(f, f->base, full - 1, &written, err, sizeof(err)), -1);
	assert_true(written < full);
	assert_int_equal(run_diff(f, f->base, full, &written, err, sizeof(err)), 0);
	assert_int_equal(written, full);
}

/* base: a full, lower-case commit id, present in the trusted copy. */
static void
t_bad_base(void **state)
{
	struct fx *f = *state;
	git_repository *repo;
	git_object *o;
	char err[256], hex[GH_OID_HEX_MAX + 1], up[GH_OID_HEX_MAX + 1];
	size_t written, i;

	assert_int_equal(run_diff(f, "", 1 << 20, &written, err, sizeof(err)), -1);
	assert_string_equal(err, "base is not a full commit id");
	memcpy(hex, f->base, 7);
	hex[7] = '\0';
	assert_int_equal(run_diff(f, hex, 1 << 20, &written, err, sizeof(err)), -1);
	assert_string_equal(err, "base is not a full commit id");
	for (i = 0; f->base[i] != '\0'; i++)
		up[i] =
		    (char)(f->base[i] >= 'a' && f->base[i] <= 'f' ? f->base[i] - 32 : f->base[i]);
	up[i] = '\0';
	if (strcmp(up, f->base) != 0) {
		assert_int_equal(run_diff(f, up, 1 << 20, &written, err, sizeof(err)), -1);
		assert_string_equal(err, "base is not a full commit id");
	}
	assert_int_equal(run_diff(f, "HEAD", 1 << 20, &written, err, sizeof(err)), -1);
	assert_int_equal(run_diff(f, "0123456789abcdef0123456789abcdef01234567", 1 << 20, &written,
	                          err, sizeof(err)),
	                 -1);
	assert_non_null(strstr(err, "base: "));
	/* the base's tree and a blob: objects, not commits */
	assert_int_equal(git_repository_open_bare(&repo, f->git), 0);
	assert_int_equal(git_revparse_single(&o, repo, "HEAD^{tree}"), 0);
	git_oid_tostr(hex, sizeof(hex), git_object_id(o));
	git_object_free(o);
	assert_int_equal(run_diff(f, hex, 1 << 20, &written, err, sizeof(err)), -1);
	assert_string_equal(err, "base is not a commit");
	assert_int_equal(git_revparse_single(&o, repo, "HEAD:README.md"), 0);
	git_oid_tostr(hex, sizeof(hex), git_object_id(o));
	git_object_free(o);
	git_repository_free(repo);
	assert_int_equal(run_diff(f, hex, 1 << 20, &written, err, sizeof(err)), -1);
	assert_string_equal(err, "base is not a commit");
	assert_int_equal(written, 0);
}

/* Relative paths and a gitdir that is no repository are refused. */
static void
t_bad_paths(void **state)
{
	struct fx *f = *state;
	char err[256];
	size_t written;

	assert_int_equal(gh_diff("git", f->wd, f->base, 1, 100, &written, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "absolute"));
	assert_int_equal(gh_diff(f->git, "wd", f->base, 1, 100, &written, err, sizeof(err)), -1);
	/* the work tree is not a repository gh_diff opens, even if asked */
	assert_int_equal(gh_diff(f->wd, f->wd, f->base, 1, 100, &written, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "open"));
}

/* Two files compared: same type, executable bit, content or link text. */
static void
assert_same(const char *a, const char *b, const char *rel)
{
	char pa[256], pb[256], la[256], lb[256];
	struct stat sa, sb;
	ssize_t na, nb;
	char *ca, *cb;
	size_t za, zb;

	snprintf(pa, sizeof(pa), "%s/%s", a, rel);
	snprintf(pb, sizeof(pb), "%s/%s", b, rel);
	if (lstat(pa, &sa) == -1) {
		if (lstat(pb, &sb) == 0)
			fail_msg("%s: only in %s", rel, b);
		return;
	}
	if (lstat(pb, &sb) == -1)
		fail_msg("%s: only in %s", rel, a);
	assert_int_equal(sa.st_mode & S_IFMT, sb.st_mode & S_IFMT);
	if (S_ISLNK(sa.st_mode)) {
		assert_true((na = readlink(pa, la, sizeof(la) - 1)) >= 0);
		assert_true((nb = readlink(pb, lb, sizeof(lb) - 1)) >= 0);
		la[na] = lb[nb] = '\0';
		assert_string_equal(la, lb);
		return;
	}
	assert_int_equal(sa.st_mode & 0100, sb.st_mode & 0100);
	ca = slurp(pa, &za);
	cb = slurp(pb, &zb);
	if (za != zb || memcmp(ca, cb, za) != 0)
		fail_msg("%s differs", rel);
	free(ca);
	free(cb);
}

/* Changes of every kind but one to an existing link (see t_apply). */
static void
change_all(const struct fx *f)
{
	char p[256];

	wpath(f, p, sizeof(p), "README.md");
	write_file(p, "hello\nthere\nand more\n");
	wpath(f, p, sizeof(p), "del.txt");
	assert_int_equal(unlink(p), 0);
	wpath(f, p, sizeof(p), "run.sh");
	assert_int_equal(chmod(p, 0755), 0);
	wpath(f, p, sizeof(p), "bin.dat");
	write_bytes(p, bin_new, sizeof(bin_new) - 1);
	wpath(f, p, sizeof(p), "new.bin");
	write_bytes(p, bin_old, sizeof(bin_old) - 1);
	wpath(f, p, sizeof(p), "lib");
	assert_int_equal(mkdir(p, 0755), 0);
	wpath(f, p, sizeof(p), "lib/sub");
	assert_int_equal(mkdir(p, 0755), 0);
	wpath(f, p, sizeof(p), "lib/sub/new.c");
	write_file(p, "int x = 1;\n");
	wpath(f, p, sizeof(p), "passwd");
	assert_int_equal(symlink("/etc/passwd", p), 0);
	wpath(f, p, sizeof(p), "src/main.h");
	write_file(p, "no newline at the end");
}

/*
 * The patch of the work tree, parsed by git_diff_from_buffer and applied
 * with git_apply at loc to a fresh clone of the source at base (then
 * checked out, for GIT_APPLY_LOCATION_INDEX): every file is as in the work
 * tree.
 */
static void
apply_fresh(struct fx *f, git_apply_location_t loc)
{
	static const char *const paths[] = {
	    "README.md", "src/main.c", "del.txt",       "run.sh", "bin.dat",
	    "new.bin",   "link",       "lib/sub/new.c", "passwd", "src/main.h",
	};
	git_repository *repo;
	git_diff *diff;
	git_checkout_options co;
	char err[256], base[GH_OID_HEX_MAX + 1], ws[128], cmd[512];
	const char *d;
	size_t i;

	d = diff_ok(f);
	snprintf(ws, sizeof(ws), "%s/fresh", f->root);
	snprintf(cmd, sizeof(cmd), "git clone -q %s %s/fresh", f->src, f->root);
	if (system(cmd) != 0)
		fail_msg("%s failed", cmd);
	(void)err;
	(void)base;
	assert_int_equal(git_repository_open(&repo, ws), 0);
	if (git_diff_from_buffer(&diff, d, f->len) != 0)
		fail_msg("parse: %s", git_error_last()->message);
	if (git_apply(repo, diff, loc, NULL) != 0)
		fail_msg("apply: %s", git_error_last()->message);
	if (loc == GIT_APPLY_LOCATION_INDEX) {
		git_checkout_options_init(&co, GIT_CHECKOUT_OPTIONS_VERSION);
		co.checkout_strategy = GIT_CHECKOUT_FORCE;
		assert_int_equal(git_checkout_index(repo, NULL, &co), 0);
	}
	git_diff_free(diff);
	git_repository_free(repo);
	for (i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		assert_same(f->wd, ws, paths[i]);
}

/* Every kind of change at once, applied to the work tree of a fresh
 * clone. */
static void
t_apply_workdir(void **state)
{
	struct fx *f = *state;

	change_all(f);
	apply_fresh(f, GIT_APPLY_LOCATION_WORKDIR);
}

/*
 * The same and a link retargeted.  libgit2 1.5's git_apply reads a
 * preimage in the work tree through the link (the link's target's content,
 * not its text), so this one goes through the index, then a checkout.
 * (git apply takes the same patch as it is.)
 */
static void
t_apply(void **state)
{
	struct fx *f = *state;
	char p[256];

	change_all(f);
	wpath(f, p, sizeof(p), "link");
	assert_int_equal(unlink(p), 0);
	assert_int_equal(symlink("src/main.c", p), 0);
	apply_fresh(f, GIT_APPLY_LOCATION_INDEX);
}

/* ---- the workspace's list ------------------------------------------------ */

/* The patch of f through the list at f->list alone (no plain run). */
static const char *
listed_ok(struct fx *f)
{
	char err[256];
	size_t written;

	if (run_one(f, f->base, f->list, 1 << 20, &written, err, sizeof(err)) != 0)
		fail_msg("gh_diff_listed: %s", err);
	return f->patch;
}

/* A change made before the list was taken is, for the list, how the file
 * was checked out: through the list, the file is not read at all (which
 * is the point of the list), while a plain diff sees the change.  A list
 * is therefore taken only before any sandbox exists. */
static void
t_list_spares_reading(void **state)
{
	struct fx *f = *state;
	char p[256], err[256];
	size_t written;

	wpath(f, p, sizeof(p), "README.md");
	write_file(p, "hello\nthere\n");
	next_tick();
	make_list(f);
	assert_int_equal(strlen(listed_ok(f)), 0);
	assert_int_equal(run_one(f, f->base, NULL, 1 << 20, &written, err, sizeof(err)), 0);
	assert_has(f->patch, "+there\n");
}

/* An attack on the list: the file rewritten in place with the same size,
 * its mtime put back as it was listed.  Its ctime moved: it is hashed, and
 * the change is in the patch. */
static void
t_list_same_size_mtime_restored(void **state)
{
	struct fx *f = *state;
	struct timespec times[2];
	struct stat before, after;
	char p[256];

	wpath(f, p, sizeof(p), "README.md");
	assert_int_equal(lstat(p, &before), 0);
	write_file(p, "HELLO\nWORLD\n");
	times[0] = before.st_atim;
	times[1] = before.st_mtim;
	assert_int_equal(utimensat(AT_FDCWD, p, times, AT_SYMLINK_NOFOLLOW), 0);
	assert_int_equal(lstat(p, &after), 0);
	assert_int_equal(after.st_size, before.st_size);
	assert_int_equal(after.st_ino, before.st_ino);
	assert_true(after.st_mtim.tv_sec == before.st_mtim.tv_sec &&
	            after.st_mtim.tv_nsec == before.st_mtim.tv_nsec);
	assert_has(listed_ok(f), "+HELLO\n+WORLD\n");
	assert_has(diff_ok(f), "+HELLO\n+WORLD\n");
}

/* Another: a file of the same size and mtime renamed over a listed one (a
 * new inode, a new ctime); and a link retargeted to a target of the same
 * length. */
static void
t_list_replaced(void **state)
{
	struct fx *f = *state;
	struct timespec times[2];
	struct stat before;
	char p[256], q[256];

	wpath(f, p, sizeof(p), "src/main.c");
	wpath(f, q, sizeof(q), "src/.new");
	assert_int_equal(lstat(p, &before), 0);
	write_file(q, "int main(void) { return 7; }\n");
	times[0] = before.st_atim;
	times[1] = before.st_mtim;
	assert_int_equal(utimensat(AT_FDCWD, q, times, 0), 0);
	assert_int_equal(rename(q, p), 0);
	wpath(f, p, sizeof(p), "link");
	wpath(f, q, sizeof(q), ".lnk");
	assert_int_equal(symlink("READ_E.md", q), 0);
	assert_int_equal(rename(q, p), 0);
	listed_ok(f);
	assert_has(f->patch, "+int main(void) { return 7; }\n");
	assert_has(f->patch, "+READ_E.md\n");
	diff_ok(f);
}

/* A change in the tick the list ended in cannot be told from the listing
 * by its ctime: such entries are hashed (git's racily clean entries).
 * Made racy here by a list whose end is stamped later than the change. */
static void
t_list_racy(void **state)
{
	struct fx *f = *state;
	char p[256];

	wpath(f, p, sizeof(p), "README.md");
	write_file(p, "hello\nthere\n");
	/* no seal: the list ends (the top directory is given last) in the
	 * same tick as, or a later one than, README.md's listing, which is
	 * all the rule needs to hash it whenever its ctime is not before the
	 * end's */
	list_for(f, f->base, 0600, 0);
	/* the same bytes' size, at once: a change in the list's last tick */
	write_file(p, "HELLO\nTHERE\n");
	{
		struct gh_stat *l;
		struct stat st;
		char err[256];

		assert_non_null(l = gh_stat_load(f->list, f->base, err, sizeof(err)));
		assert_int_equal(lstat(p, &st), 0);
		/* whatever the ticks were: either the ctime moved, or the
		 * entry is racy; it is never taken as clean */
		assert_int_equal(gh_stat_check(l, "README.md", &st), 0);
		gh_stat_free(l);
	}
	assert_has(listed_ok(f), "+HELLO\n+THERE\n");
}

/* A list that is not for this commit, not whole, readable by others, or
 * not a list: no list (every file hashed), never an error. */
static void
t_list_refused(void **state)
{
	struct fx *f = *state;
	char p[256], other[GH_OID_HEX_MAX + 1], err[256];
	size_t n, written;
	char *buf;
	int fd;

	wpath(f, p, sizeof(p), "README.md");
	write_file(p, "hello\nthere\n");
	next_tick();
	/* another commit's */
	snprintf(other, sizeof(other), "%s", f->base);
	other[0] = other[0] == 'a' ? 'b' : 'a';
	make_list_for(f, other, 0600);
	assert_null(gh_stat_load(f->list, f->base, err, sizeof(err)));
	assert_non_null(strstr(err, "not one for commit"));
	assert_has(listed_ok(f), "+there\n");
	/* readable by the group */
	make_list_for(f, f->base, 0640);
	assert_null(gh_stat_load(f->list, f->base, err, sizeof(err)));
	assert_has(listed_ok(f), "+there\n");
	/* cut before its end */
	make_list(f);
	buf = slurp(f->list, &n);
	assert_true(n > 30);
	assert_int_equal(truncate(f->list, (off_t)(n - 3)), 0);
	assert_null(gh_stat_load(f->list, f->base, err, sizeof(err)));
	assert_has(listed_ok(f), "+there\n");
	/* a record dropped from the middle: the end's count is wrong */
	{
		char *a = buf + strlen(buf) + 1, *b = a + strlen(a) + 1;

		assert_true((fd = open(f->list, O_WRONLY | O_TRUNC)) >= 0);
		assert_int_equal(write(fd, buf, (size_t)(a - buf)), a - buf);
		assert_int_equal(write(fd, b, n - (size_t)(b - buf)), (ssize_t)(n - (size_t)(b - buf)));
		close(fd);
		assert_null(gh_stat_load(f->list, f->base, err, sizeof(err)));
		assert_non_null(strstr(err, "counts"));
	}
	free(buf);
	/* missing */
	assert_int_equal(unlink(f->list), 0);
	assert_int_equal(run_one(f, f->base, f->list, 1 << 20, &written, err, sizeof(err)), 0);
	assert_has(f->patch, "+there\n");
}

/* The parser on records it must refuse, each alone after a good header. */
static void
t_list_parse(void **state)
{
	static const char *const bad[] = {
	    "x 100644 1 2 3 4 5 6 7 8 9 a",         /* type */
	    "f 100644 1 2 3 4 5 6 7 8 9 ",          /* no path */
	    "f 100644 1 2 3 4 5 6 7 8 9",           /* no path, no space */
	    "f 120777 1 2 3 4 5 6 7 8 9 a",         /* 'f' with a link's mode */
	    "l 100644 1 2 3 4 5 6 7 8 9 a",         /* 'l' with a file's mode */
	    "f 100648 1 2 3 4 5 6 7 8 9 a",         /* not octal */
	    "f 100644 01 2 3 4 5 6 7 8 9 a",        /* a leading zero */
	    "f 100644 1 2 4294967296 4 5 6 7 8 9 a", /* uid too big */
	    "f 100644 1 2 3 4 -5 6 7 8 9 a",        /* a negative size */
	    "f 100644 1 2 3 4 5 6 1000000000 8 9 a", /* nanoseconds */
	    "f 100644 1 2 3 4 5 6 7 8 -9 a",        /* negative nanoseconds */
	    "f 100644 1 2 3 4 5 6 7 8 9 a",         /* twice (below) */
	};
	struct fx *f = *state;
	char buf[512], err[256];
	struct gh_stat *l;
	size_t i, n;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int twice = i == sizeof(bad) / sizeof(bad[0]) - 1;

		n = (size_t)snprintf(buf, sizeof(buf), "%s %s%c%s%c%s%cend %d 9 9%c", WSSTAT_MAGIC,
		                     f->base, 0, bad[i], 0, twice ? bad[i] : "f 100644 1 2 3 4 5 6 7 8 9 z",
		                     0, 2, 0);
		err[0] = '\0';
		l = gh_stat_parse(buf, n, f->base, err, sizeof(err));
		if (l != NULL)
			fail_msg("record \"%s\" accepted", bad[i]);
		assert_true(err[0] != '\0');
	}
	/* the good one, and its lookups */
	n = (size_t)snprintf(buf, sizeof(buf),
	                     "%s %s%cf 100644 1 2 3 4 5 -6 7 8 9 a b%cl 120777 1 2 3 4 5 6 7 8 9 "
	                     "a%cend 2 8 10%c",
	                     WSSTAT_MAGIC, f->base, 0, 0, 0, 0);
	assert_non_null(l = gh_stat_parse(buf, n, f->base, err, sizeof(err)));
	assert_int_equal(l->n, 2);
	assert_non_null(gh_stat_find(l, "a b"));
	assert_int_equal(gh_stat_find(l, "a b")->ms, -6);
	assert_non_null(gh_stat_find(l, "a"));
	assert_null(gh_stat_find(l, "b"));
	gh_stat_free(l);
	/* nothing after the end; not NUL-terminated */
	n = (size_t)snprintf(buf, sizeof(buf), "%s %s%cend 0 8 10%cf 100644 1 2 3 4 5 6 7 8 9 a%c",
	                     WSSTAT_MAGIC, f->base, 0, 0, 0);
	assert_null(gh_stat_parse(buf, n, f->base, err, sizeof(err)));
	n = (size_t)snprintf(buf, sizeof(buf), "%s %s%cend 0 8 10", WSSTAT_MAGIC, f->base, 0);
	assert_null(gh_stat_parse(buf, n, f->base, err, sizeof(err)));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(t_empty, setup_listed, teardown),
	    cmocka_unit_test_setup_teardown(t_modified, setup_listed, teardown),
	    cmocka_unit_test_setup_teardown(t_untracked, setup_listed, teardown),
	    cmocka_unit_test_setup_teardown(t_deleted, setup_listed, teardown),
	    cmocka_unit_test_setup_teardown(t_executable, setup_listed, teardown),
	    cmocka_unit_test_setup_teardown(t_binary, setup_listed, teardown),
	    cmocka_unit_test_setup_teardown(t_symlink, setup_listed, teardown),
	    cmocka_unit_test_setup_teardown(t_libgit2_fifo, setup_listed, teardown),
	    cmocka_unit_test_setup_teardown(t_fifo_untracked, setup_listed, teardown),
	    cmocka_unit_test_setup_teardown(t_fifo_tracked, setup_listed, teardown),
	    cmocka_unit_test_setup_teardown(t_fifo_settings, setup_listed, teardown),
	    cmocka_unit_test_setup_teardown(t_fifo_name, setup_listed, teardown),
	    cmocka_unit_test_setup_teardown(t_tampered_dotgit, setup_listed, teardown),
	    cmocka_unit_test_setup_teardown(t_excluded, setup_listed, teardown),
	    cmocka_unit_test_setup_teardown(t_ignored, setup_listed, teardown),
	    cmocka_unit_test_setup_teardown(t_cap, setup_listed, teardown),
	    cmocka_unit_test_setup_teardown(t_bad_base, setup_listed, teardown),
	    cmocka_unit_test_setup_teardown(t_bad_paths, setup_listed, teardown),
	    cmocka_unit_test_setup_teardown(t_apply_workdir, setup_listed, teardown),
	    cmocka_unit_test_setup_teardown(t_apply, setup_listed, teardown),
	    cmocka_unit_test_setup_teardown(t_list_spares_reading, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_list_same_size_mtime_restored, setup_listed, teardown),
	    cmocka_unit_test_setup_teardown(t_list_replaced, setup_listed, teardown),
	    cmocka_unit_test_setup_teardown(t_list_racy, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_list_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_list_parse, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
