/*
 * Unit tests for sandbox/ws.c: every file tool stays inside the workspace.
 *
 * Layout of each test's temporary directory T:
 *   T/ws            the workspace root
 *   T/outside       a file next to it ("OUTSIDE\n")
 *   T/ws-evil/secret  a sibling whose name shares the root's prefix
 *   T/outdir/odfile   a directory outside, for symlinked parents
 * The attacks (.., absolute paths, sibling prefixes, symlinks out, hard
 * links, /proc magic links, FIFOs, devices, read-only tricks) must fail with
 * the documented errno and leave everything outside ws as it was
 * (outside_intact checks contents and that nothing new appeared).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "sandbox/ws.h"

#include "common/util.h"

#define FILE_MAX (1u << 20)
#define FIFO_GUARD 10 /* seconds: a FIFO that blocks kills the test run */

struct fixture {
	char dir[64];  /* T */
	char root[96]; /* T/ws */
	struct ws ws;
	char err[512];
};

/* ---- fixture and helpers ------------------------------------------------ */

static void
put_abs(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0)
		fail_msg("create %s: %s", path, strerror(errno));
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	assert_int_equal(close(fd), 0);
}

static int
setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char p[PATH_MAX];

	if (f == NULL)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/agrippa-test-ws-XXXXXX");
	if (mkdtemp(f->dir) == NULL) {
		free(f);
		return -1;
	}
	snprintf(f->root, sizeof(f->root), "%s/ws", f->dir);
	assert_int_equal(mkdir(f->root, 0755), 0);
	snprintf(p, sizeof(p), "%s/outside", f->dir);
	put_abs(p, "OUTSIDE\n", 8);
	snprintf(p, sizeof(p), "%s/ws-evil", f->dir);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/ws-evil/secret", f->dir);
	put_abs(p, "SECRET\n", 7);
	snprintf(p, sizeof(p), "%s/outdir", f->dir);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/outdir/odfile", f->dir);
	put_abs(p, "ODFILE\n", 7);
	if (ws_open(&f->ws, f->root, 0, FILE_MAX, f->err, sizeof(f->err)) != 0)
		fail_msg("ws_open: %s", f->err);
	*state = f;
	return 0;
}

static int
rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static int
teardown(void **state)
{
	struct fixture *f = *state;
	int rc;

	ws_close(&f->ws);
	rc = nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return rc;
}

/* T/ws/rel into buf. */
static const char *
in_ws(const struct fixture *f, const char *rel, char *buf, size_t bufsz)
{
	if (fmt_ok(buf, bufsz, "%s/%s", f->root, rel) != 0)
		fail_msg("path too long: %s/%s", f->root, rel);
	return buf;
}

/* T/rel into buf. */
static const char *
in_t(const struct fixture *f, const char *rel, char *buf, size_t bufsz)
{
	if (fmt_ok(buf, bufsz, "%s/%s", f->dir, rel) != 0)
		fail_msg("path too long: %s/%s", f->dir, rel);
	return buf;
}

/* Create T/ws/rel with contents s, making its parents. */
static void
put(const struct fixture *f, const char *rel, const char *s)
{
	char p[PATH_MAX], *slash;

	in_ws(f, rel, p, sizeof(p));
	for (slash = strchr(p + strlen(f->root) + 1, '/'); slash != NULL;
	     slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		if (mkdir(p, 0755) != 0 && errno != EEXIST)
			fail_msg("mkdir %s: %s", p, strerror(errno));
		*slash = '/';
	}
	put_abs(p, s, strlen(s));
}

static void
mkdir_ws(const struct fixture *f, const char *rel)
{
	char p[PATH_MAX];

	if (mkdir(in_ws(f, rel, p, sizeof(p)), 0755) != 0)
		fail_msg("mkdir %s: %s", p, strerror(errno));
}

static void
symlink_ws(const struct fixture *f, const char *target, const char *rel)
{
	char p[PATH_MAX];

	if (symlink(target, in_ws(f, rel, p, sizeof(p))) != 0)
		fail_msg("symlink %s: %s", p, strerror(errno));
}

static void
mkfifo_ws(const struct fixture *f, const char *rel)
{
	char p[PATH_MAX];

	if (mkfifo(in_ws(f, rel, p, sizeof(p)), 0644) != 0)
		fail_msg("mkfifo %s: %s", p, strerror(errno));
}

static int
exists_abs(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

static int
exists_ws(const struct fixture *f, const char *rel)
{
	char p[PATH_MAX];

	return exists_abs(in_ws(f, rel, p, sizeof(p)));
}

/* The file at path holds exactly s. */
static void
assert_file_abs(const char *path, const char *s)
{
	char buf[4096];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		fail_msg("open %s: %s", path, strerror(errno));
	n = read(fd, buf, sizeof(buf));
	close(fd);
	assert_true(n >= 0);
	if ((size_t)n != strlen(s) || memcmp(buf, s, (size_t)n) != 0)
		fail_msg("%s holds \"%.*s\", expected \"%s\"", path, (int)n, buf, s);
}

static void
assert_file(const struct fixture *f, const char *rel, const char *s)
{
	char p[PATH_MAX];

	assert_file_abs(in_ws(f, rel, p, sizeof(p)), s);
}

static size_t
count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	size_t n = 0;

	assert_non_null(d);
	while ((de = readdir(d)) != NULL)
		n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
	closedir(d);
	return n;
}

/* Nothing outside T/ws changed or appeared. */
static void
outside_intact(const struct fixture *f)
{
	char p[PATH_MAX];

	assert_file_abs(in_t(f, "outside", p, sizeof(p)), "OUTSIDE\n");
	assert_file_abs(in_t(f, "ws-evil/secret", p, sizeof(p)), "SECRET\n");
	assert_file_abs(in_t(f, "outdir/odfile", p, sizeof(p)), "ODFILE\n");
	assert_int_equal(count_entries(f->dir), 4);
	assert_int_equal(count_entries(in_t(f, "ws-evil", p, sizeof(p))), 1);
	assert_int_equal(count_entries(in_t(f, "outdir", p, sizeof(p))), 1);
}

/* rc must be want, and err "path: ...reason..." */
#define EXPECT_ERR(f, rc, want, path, reason) expect_err(f, rc, want, path, reason, __LINE__)

static void
expect_err(const struct fixture *f, int rc, int want, const char *path, const char *reason,
           int line)
{
	if (rc != want)
		fail_msg("line %d: %s: got %d (%s) \"%s\", expected %d (%s)", line,
		         path != NULL ? path : "-", rc, strerror(rc), f->err, want, strerror(want));
	if (path != NULL && *path != '\0' && strncmp(f->err, path, strlen(path)) != 0)
		fail_msg("line %d: reason \"%s\" does not name \"%s\"", line, f->err, path);
	if (reason != NULL && strstr(f->err, reason) == NULL)
		fail_msg("line %d: reason \"%s\" lacks \"%s\"", line, f->err, reason);
}

#define EXPECT_OK(f, rc) expect_ok(f, rc, __LINE__)

static void
expect_ok(const struct fixture *f, int rc, int line)
{
	if (rc != 0)
		fail_msg("line %d: failed with %d (%s): %s", line, rc, strerror(rc), f->err);
}

/* Read rel through ws; the caller frees b. */
static int
ws_read_all(struct fixture *f, const struct ws *w, const char *rel, struct ws_buf *b)
{
	uint64_t size;

	return ws_read(w, rel, 0, UINT64_MAX, b, &size, f->err, sizeof(f->err));
}

static int
write_str(struct fixture *f, const struct ws *w, const char *rel, const char *s, int mkdirs)
{
	return ws_write(w, rel, s, strlen(s), mkdirs, f->err, sizeof(f->err));
}

static int
edit_str(struct fixture *f, const struct ws *w, const char *rel, const char *old, const char *new,
         uint32_t count, uint32_t *replaced)
{
	return ws_edit(w, rel, old, strlen(old), new, strlen(new), count, replaced, f->err,
	               sizeof(f->err));
}

static void
open_ws(struct fixture *f, struct ws *w, const char *dir, int readonly, size_t file_max)
{
	if (ws_open(w, dir, readonly, file_max, f->err, sizeof(f->err)) != 0)
		fail_msg("ws_open %s: %s", dir, f->err);
}

/* ---- ws_open, names ---------------------------------------------------- */

static void
test_open(void **state)
{
	struct fixture *f = *state;
	char p[PATH_MAX];
	struct ws w;

	EXPECT_ERR(f, ws_open(&w, in_t(f, "missing", p, sizeof(p)), 0, 1, f->err, sizeof(f->err)),
	           ENOENT, NULL, "missing");
	EXPECT_ERR(f, ws_open(&w, in_t(f, "outside", p, sizeof(p)), 0, 1, f->err, sizeof(f->err)),
	           ENOTDIR, NULL, "outside");
	EXPECT_OK(f, ws_open(&w, f->root, 1, 7, f->err, sizeof(f->err)));
	assert_true(w.root >= 0);
	assert_int_equal(w.readonly, 1);
	assert_int_equal(w.file_max, 7);
	assert_int_equal(fcntl(w.root, F_GETFL) & O_PATH, O_PATH);
	assert_true(fcntl(w.root, F_GETFD) & FD_CLOEXEC);
	ws_close(&w);
	assert_int_equal(w.root, -1);
	ws_close(&w); /* twice is harmless */

	assert_string_equal(ws_type_name(WS_T_FILE), "file");
	assert_string_equal(ws_type_name(WS_T_DIR), "dir");
	assert_string_equal(ws_type_name(WS_T_SYMLINK), "symlink");
	assert_string_equal(ws_type_name(WS_T_OTHER), "other");
}

/* ---- read ---------------------------------------------------------------- */

static void
test_read(void **state)
{
	struct fixture *f = *state;
	struct ws_buf b = {0};
	uint64_t size = 0;
	struct ws small;

	put(f, "a.txt", "hello world\n");
	mkdir_ws(f, "src");
	EXPECT_OK(f, ws_read(&f->ws, "a.txt", 0, 100, &b, &size, f->err, sizeof(f->err)));
	assert_int_equal(size, 12);
	assert_int_equal(b.len, 12);
	assert_memory_equal(b.data, "hello world\n", 12);
	assert_string_equal(f->err, "");

	EXPECT_OK(f, ws_read(&f->ws, "a.txt", 6, 5, &b, &size, f->err, sizeof(f->err)));
	assert_int_equal(b.len, 5);
	assert_memory_equal(b.data, "world", 5);
	EXPECT_OK(f, ws_read(&f->ws, "a.txt", 10, 100, &b, &size, f->err, sizeof(f->err)));
	assert_int_equal(b.len, 2);
	assert_memory_equal(b.data, "d\n", 2);

	/* at and past the end: nothing, but the size */
	EXPECT_OK(f, ws_read(&f->ws, "a.txt", 12, 100, &b, &size, f->err, sizeof(f->err)));
	assert_int_equal(b.len, 0);
	assert_int_equal(size, 12);
	EXPECT_OK(f, ws_read(&f->ws, "a.txt", UINT64_MAX, 100, &b, &size, f->err, sizeof(f->err)));
	assert_int_equal(b.len, 0);
	EXPECT_OK(f, ws_read(&f->ws, "a.txt", 0, 0, &b, &size, f->err, sizeof(f->err)));
	assert_int_equal(b.len, 0);

	/* the same file by other spellings that stay inside */
	const char *same[] = {"/workspace/a.txt", "/workspace//a.txt", "./a.txt",
	                      "src/../a.txt",     "src/./../a.txt",    "/workspace/./a.txt"};
	for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
		EXPECT_OK(f, ws_read(&f->ws, same[i], 0, 100, &b, &size, f->err, sizeof(f->err)));
		assert_int_equal(b.len, 12);
	}

	/* a read never allocates more than file_max; the size says there is more */
	open_ws(f, &small, f->root, 0, 4);
	EXPECT_OK(f, ws_read(&small, "a.txt", 0, UINT64_MAX, &b, &size, f->err, sizeof(f->err)));
	assert_int_equal(b.len, 4);
	assert_int_equal(size, 12);
	ws_close(&small);

	EXPECT_ERR(f, ws_read(&f->ws, "missing", 0, 1, &b, &size, f->err, sizeof(f->err)), ENOENT,
	           "missing", "no such file");
	EXPECT_ERR(f, ws_read(&f->ws, "a.txt/", 0, 1, &b, &size, f->err, sizeof(f->err)), ENOTDIR,
	           "a.txt/", NULL);
	ws_buf_free(&b);
	ws_buf_free(&b);
	assert_null(b.data);
}

/* Paths that name something outside the workspace, whatever their spelling. */
static const char *const escapes[] = {
    "../outside",
    "..",
    "../ws-evil/secret",
    "src/../../outside",
    "/etc/passwd",
    "/",
    "/outside",
    "/workspace-evil/secret",
    "/workspace-evil",
    "/workspacefoo",
    "/workspace/../outside",
    "/workspace/src/../../outside",
    "//workspace/a.txt",
    "/proc/self/root/etc/passwd",
};

static void
test_read_escapes(void **state)
{
	struct fixture *f = *state;
	struct ws_buf b = {0};
	uint64_t size = 99;
	size_t i;

	put(f, "a.txt", "hello\n");
	mkdir_ws(f, "src");
	for (i = 0; i < sizeof(escapes) / sizeof(escapes[0]); i++) {
		int rc = ws_read(&f->ws, escapes[i], 0, 100, &b, &size, f->err, sizeof(f->err));

		EXPECT_ERR(f, rc, EXDEV, escapes[i], "escapes the workspace");
		assert_int_equal(b.len, 0);
		assert_int_equal(size, 0);
	}
	ws_buf_free(&b);
	outside_intact(f);
}

static void
test_write_escapes(void **state)
{
	struct fixture *f = *state;
	uint32_t n = 7;
	size_t i;

	put(f, "a.txt", "hello\n");
	mkdir_ws(f, "src");
	for (i = 0; i < sizeof(escapes) / sizeof(escapes[0]); i++) {
		const char *p = escapes[i];
		int rc = write_str(f, &f->ws, p, "PWNED\n", 1);

		/* "..", "/" and "/workspace-evil" name directories; still escapes */
		EXPECT_ERR(f, rc, EXDEV, p, "escapes the workspace");
		EXPECT_ERR(f, edit_str(f, &f->ws, p, "O", "P", 0, &n), EXDEV, p, "escapes");
		assert_int_equal(n, 0);
	}
	/* mkdirs never creates anything outside */
	EXPECT_ERR(f, write_str(f, &f->ws, "../evil/x", "PWNED", 1), EXDEV, "../evil/x", "escapes");
	EXPECT_ERR(f, write_str(f, &f->ws, "src/../../evil/x", "PWNED", 1), EXDEV, NULL, "escapes");
	EXPECT_ERR(f, write_str(f, &f->ws, "/workspace/../evil/x", "PWNED", 1), EXDEV, NULL,
	           "escapes");
	assert_file(f, "a.txt", "hello\n");
	outside_intact(f);
}

/* Symlinks inside the workspace that lead out: refused everywhere. */
static void
test_symlink_escapes(void **state)
{
	struct fixture *f = *state;
	const char *reads[] = {"abs",         "rel",           "evil",           "deep",
	                       "odir/odfile", "reldir/odfile", "src/up2/outside"};
	const char *writes[] = {"abs",      "rel",        "evil",
	                        "deep",     "dangling",   "odir/odfile",
	                        "odir/new", "reldir/new", "src/up2/outside",
	                        "absdangle"};
	struct ws_entries e = {0};
	struct ws_matches m = {0};
	struct ws_buf b = {0};
	struct ws_stat st;
	char p[PATH_MAX];
	uint32_t n;
	size_t i;
	int fd;

	mkdir_ws(f, "src");
	symlink_ws(f, in_t(f, "outside", p, sizeof(p)), "abs");
	symlink_ws(f, "../outside", "rel");
	symlink_ws(f, "../ws-evil/secret", "evil");
	symlink_ws(f, "src/../../outside", "deep");
	symlink_ws(f, "../newfile", "dangling");
	symlink_ws(f, in_t(f, "absnew", p, sizeof(p)), "absdangle");
	symlink_ws(f, in_t(f, "outdir", p, sizeof(p)), "odir");
	symlink_ws(f, "../outdir", "reldir");
	symlink_ws(f, "../..", "src/up2");

	for (i = 0; i < sizeof(reads) / sizeof(reads[0]); i++)
		EXPECT_ERR(f, ws_read_all(f, &f->ws, reads[i], &b), EXDEV, reads[i],
		           "escapes the workspace");
	for (i = 0; i < sizeof(writes) / sizeof(writes[0]); i++) {
		EXPECT_ERR(f, write_str(f, &f->ws, writes[i], "PWNED\n", 1), EXDEV, writes[i],
		           "escapes the workspace");
		EXPECT_ERR(f, write_str(f, &f->ws, writes[i], "PWNED\n", 0), EXDEV, writes[i],
		           "escapes the workspace");
	}
	for (i = 0; i < sizeof(reads) / sizeof(reads[0]); i++)
		EXPECT_ERR(f, edit_str(f, &f->ws, reads[i], "O", "P", 0, &n), EXDEV, reads[i],
		           "escapes the workspace");
	EXPECT_ERR(f, write_str(f, &f->ws, "odir/sub/x", "PWNED", 1), EXDEV, NULL, "escapes");

	EXPECT_ERR(f, ws_list(&f->ws, "odir", 100, &e, f->err, sizeof(f->err)), EXDEV, "odir",
	           "escapes");
	EXPECT_ERR(f, ws_list(&f->ws, "src/up2", 100, &e, f->err, sizeof(f->err)), EXDEV, NULL,
	           "escapes");
	EXPECT_ERR(f, ws_glob(&f->ws, "*", "reldir", 100, &e, f->err, sizeof(f->err)), EXDEV,
	           "reldir", "escapes");
	EXPECT_ERR(f, ws_grep(&f->ws, "O", "odir", NULL, 0, 100, &m, f->err, sizeof(f->err)), EXDEV,
	           "odir", "escapes");
	EXPECT_ERR(f, ws_grep(&f->ws, "O", "abs", NULL, 0, 100, &m, f->err, sizeof(f->err)), EXDEV,
	           "abs", "escapes");
	EXPECT_ERR(f, ws_open_dir(&f->ws, "odir", &fd, f->err, sizeof(f->err)), EXDEV, "odir",
	           "escapes");
	assert_int_equal(fd, -1);
	EXPECT_ERR(f, ws_stat(&f->ws, "odir/odfile", &st, f->err, sizeof(f->err)), EXDEV, NULL,
	           "escapes");
	/* stat is lstat: the link itself is reported, nothing outside is touched */
	EXPECT_OK(f, ws_stat(&f->ws, "abs", &st, f->err, sizeof(f->err)));
	assert_int_equal(st.type, WS_T_SYMLINK);

	assert_int_equal(e.n, 0);
	assert_int_equal(m.n, 0);
	assert_null(b.data);
	assert_false(exists_abs(in_t(f, "newfile", p, sizeof(p))));
	assert_false(exists_abs(in_t(f, "absnew", p, sizeof(p))));
	outside_intact(f);
}

/* Symlinks that stay inside work, for reading and writing. */
static void
test_symlink_inside(void **state)
{
	struct fixture *f = *state;
	struct ws_buf b = {0};
	char p[PATH_MAX];
	struct stat st;

	put(f, "src/a.c", "int a;\n");
	put(f, "top.txt", "top\n");
	symlink_ws(f, "src/a.c", "in");
	symlink_ws(f, "../top.txt", "src/up");
	symlink_ws(f, "src", "sd");
	symlink_ws(f, "src/created.c", "dl");
	symlink_ws(f, in_ws(f, "src/a.c", p, sizeof(p)), "absin");

	EXPECT_OK(f, ws_read_all(f, &f->ws, "in", &b));
	assert_int_equal(b.len, 7);
	assert_memory_equal(b.data, "int a;\n", 7);
	EXPECT_OK(f, ws_read_all(f, &f->ws, "src/up", &b));
	assert_memory_equal(b.data, "top\n", 4);
	EXPECT_OK(f, ws_read_all(f, &f->ws, "sd/a.c", &b));
	assert_int_equal(b.len, 7);
	ws_buf_free(&b);

	/* a write through a symlink lands on its target, the link stays */
	EXPECT_OK(f, write_str(f, &f->ws, "in", "int b;\n", 0));
	assert_file(f, "src/a.c", "int b;\n");
	assert_int_equal(lstat(in_ws(f, "in", p, sizeof(p)), &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	EXPECT_OK(f, write_str(f, &f->ws, "sd/new.c", "new\n", 0));
	assert_file(f, "src/new.c", "new\n");
	EXPECT_OK(f, write_str(f, &f->ws, "sd/deeper/x.c", "x\n", 1));
	assert_file(f, "src/deeper/x.c", "x\n");
	/* a dangling symlink that stays inside is created through */
	EXPECT_OK(f, write_str(f, &f->ws, "dl", "made\n", 0));
	assert_file(f, "src/created.c", "made\n");

	/* absolute symlinks are refused even when they point back inside: the
	 * host path means nothing in the sandbox */
	EXPECT_ERR(f, ws_read_all(f, &f->ws, "absin", &b), EXDEV, "absin", "escapes");
	assert_file(f, "src/a.c", "int b;\n");
	outside_intact(f);
}

/* /proc magic links never resolve, even from a root that contains them. */
static void
test_magiclinks(void **state)
{
	struct fixture *f = *state;
	struct ws_entries e = {0};
	struct ws_matches m = {0};
	struct ws_buf b = {0};
	char p[PATH_MAX];
	struct ws_stat st;
	struct ws proc;
	int cwd, fd;

	symlink_ws(f, "/proc/self/root", "pr");
	symlink_ws(f, "../../../../../../../../../../../proc/self/root", "prrel");
	symlink_ws(f, "/proc/self/cwd", "pc");
	EXPECT_ERR(f, ws_read_all(f, &f->ws, "pr/etc/passwd", &b), EXDEV, NULL, "escapes");
	EXPECT_ERR(f, ws_read_all(f, &f->ws, "prrel/etc/passwd", &b), EXDEV, NULL, "escapes");
	EXPECT_ERR(f, ws_read_all(f, &f->ws, "/proc/self/root/etc/passwd", &b), EXDEV, NULL,
	           "escapes");
	EXPECT_ERR(f, write_str(f, &f->ws, "pc/pwned", "x", 1), EXDEV, NULL, "escapes");

	/* A workspace whose root is /proc/self: "root", "cwd" and "fd/N" are
	 * magic links right there.  cwd is T/outdir so a broken check would
	 * show up as a new file in it. */
	cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(cwd >= 0);
	assert_int_equal(chdir(in_t(f, "outdir", p, sizeof(p))), 0);
	open_ws(f, &proc, "/proc/self", 0, FILE_MAX);
	EXPECT_ERR(f, ws_read_all(f, &proc, "root/etc/passwd", &b), ELOOP, NULL, "magic link");
	EXPECT_ERR(f, ws_read_all(f, &proc, "cwd/odfile", &b), ELOOP, NULL, "magic link");
	snprintf(p, sizeof(p), "fd/%d", cwd);
	EXPECT_ERR(f, ws_read_all(f, &proc, p, &b), ELOOP, NULL, "magic link");
	EXPECT_ERR(f, write_str(f, &proc, "cwd/pwned", "x", 0), ELOOP, NULL, "magic link");
	EXPECT_ERR(f, write_str(f, &proc, "cwd/pwned/x", "x", 1), ELOOP, NULL, "magic link");
	EXPECT_ERR(f, edit_str(f, &proc, "cwd/odfile", "O", "P", 0, NULL), ELOOP, NULL, "magic");
	EXPECT_ERR(f, ws_list(&proc, "cwd", 10, &e, f->err, sizeof(f->err)), ELOOP, NULL, "magic");
	EXPECT_ERR(f, ws_open_dir(&proc, "root", &fd, f->err, sizeof(f->err)), ELOOP, NULL,
	           "magic");
	EXPECT_ERR(f, ws_grep(&proc, "x", "cwd", NULL, 0, 10, &m, f->err, sizeof(f->err)), ELOOP,
	           NULL, "magic");
	EXPECT_ERR(f, ws_glob(&proc, "*", "root", 10, &e, f->err, sizeof(f->err)), ELOOP, NULL,
	           "magic");
	/* stat reports the link itself, following nothing */
	EXPECT_OK(f, ws_stat(&proc, "cwd", &st, f->err, sizeof(f->err)));
	assert_int_equal(st.type, WS_T_SYMLINK);
	ws_close(&proc);
	assert_int_equal(fchdir(cwd), 0);
	close(cwd);
	assert_null(b.data);
	outside_intact(f);
}

/* FIFOs, devices and directories are never opened as files; nothing blocks. */
static void
test_special_files(void **state)
{
	struct fixture *f = *state;
	struct ws_buf b = {0};
	char p[PATH_MAX], longp[WS_PATH_MAX + 2];
	uint32_t n;

	mkdir_ws(f, "src");
	mkfifo_ws(f, "fifo");
	symlink_ws(f, "fifo", "fifolink");
	alarm(FIFO_GUARD);
	EXPECT_ERR(f, ws_read_all(f, &f->ws, "fifo", &b), EINVAL, "fifo", "FIFO");
	EXPECT_ERR(f, ws_read_all(f, &f->ws, "fifolink", &b), EINVAL, "fifolink", "FIFO");
	EXPECT_ERR(f, write_str(f, &f->ws, "fifo", "x", 0), EINVAL, "fifo", "FIFO");
	EXPECT_ERR(f, write_str(f, &f->ws, "fifolink", "x", 0), EINVAL, "fifolink", "FIFO");
	EXPECT_ERR(f, edit_str(f, &f->ws, "fifo", "a", "b", 0, &n), EINVAL, "fifo", "FIFO");
	alarm(0);

	if (mknod(in_ws(f, "null", p, sizeof(p)), S_IFCHR | 0666, makedev(1, 3)) == 0) {
		EXPECT_ERR(f, ws_read_all(f, &f->ws, "null", &b), EINVAL, "null", "device");
		EXPECT_ERR(f, write_str(f, &f->ws, "null", "x", 0), EINVAL, "null", "device");
	} else
		print_message("mknod not permitted here (%s): device case skipped\n",
		              strerror(errno));

	EXPECT_ERR(f, ws_read_all(f, &f->ws, "src", &b), EISDIR, "src", "is a directory");
	EXPECT_ERR(f, ws_read_all(f, &f->ws, "/workspace", &b), EISDIR, NULL, "is a directory");
	EXPECT_ERR(f, write_str(f, &f->ws, "src", "x", 0), EISDIR, "src", "is a directory");
	EXPECT_ERR(f, write_str(f, &f->ws, "src/", "x", 1), EISDIR, "src/", "is a directory");
	EXPECT_ERR(f, write_str(f, &f->ws, "src/.", "x", 1), EISDIR, NULL, "is a directory");
	EXPECT_ERR(f, write_str(f, &f->ws, "/workspace", "x", 1), EISDIR, NULL, "directory");
	EXPECT_ERR(f, edit_str(f, &f->ws, "src", "a", "b", 0, &n), EISDIR, "src", "directory");
	EXPECT_ERR(f, write_str(f, &f->ws, "newdir/", "x", 1), ENOENT, NULL, NULL);
	assert_false(exists_ws(f, "newdir"));

	EXPECT_ERR(f, ws_read_all(f, &f->ws, "", &b), EINVAL, NULL, "empty path");
	EXPECT_ERR(f, write_str(f, &f->ws, "", "x", 1), EINVAL, NULL, "empty path");
	memset(longp, 'a', sizeof(longp) - 1);
	longp[sizeof(longp) - 1] = '\0';
	EXPECT_ERR(f, ws_read_all(f, &f->ws, longp, &b), ENAMETOOLONG, NULL, "too long");
	EXPECT_ERR(f, write_str(f, &f->ws, longp, "x", 1), ENAMETOOLONG, NULL, "too long");
	assert_null(b.data);
	assert_int_equal(count_entries(f->root), exists_ws(f, "null") ? 4 : 3);
}

/* ---- write ----------------------------------------------------------------- */

static void
test_write(void **state)
{
	struct fixture *f = *state;
	char p[PATH_MAX];
	struct stat st;
	struct ws small;
	mode_t old;

	old = umask(077);
	EXPECT_OK(f, write_str(f, &f->ws, "new.txt", "abcdef", 0));
	umask(old);
	assert_file(f, "new.txt", "abcdef");
	assert_int_equal(stat(in_ws(f, "new.txt", p, sizeof(p)), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0644);
	assert_string_equal(f->err, "");

	/* replacing truncates to the new length; the inode is kept */
	ino_t ino = st.st_ino;
	EXPECT_OK(f, write_str(f, &f->ws, "/workspace/new.txt", "x", 0));
	assert_file(f, "new.txt", "x");
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_ino, ino);
	EXPECT_OK(f, ws_write(&f->ws, "new.txt", NULL, 0, 0, f->err, sizeof(f->err)));
	assert_file(f, "new.txt", "");

	/* missing parents: refused without mkdirs, created 0755 with it */
	EXPECT_ERR(f, write_str(f, &f->ws, "d1/d2/f", "deep", 0), ENOENT, "d1/d2/f", NULL);
	assert_false(exists_ws(f, "d1"));
	old = umask(022);
	EXPECT_OK(f, write_str(f, &f->ws, "d1/d2/f", "deep", 1));
	umask(old);
	assert_file(f, "d1/d2/f", "deep");
	assert_int_equal(stat(in_ws(f, "d1/d2", p, sizeof(p)), &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0755);
	EXPECT_OK(f, write_str(f, &f->ws, "d1/./x/../y/f", "dots", 1));
	assert_file(f, "d1/y/f", "dots");
	assert_true(exists_ws(f, "d1/x"));
	EXPECT_ERR(f, write_str(f, &f->ws, "new.txt/x", "no", 1), ENOTDIR, "new.txt/x", NULL);

	/* a directory symlink that dangles is not created through by mkdirs */
	symlink_ws(f, "../mkhere", "dl");
	EXPECT_ERR(f, write_str(f, &f->ws, "dl/x", "no", 1), EXDEV, "dl/x", "escapes");
	symlink_ws(f, "gone", "dl2");
	EXPECT_ERR(f, write_str(f, &f->ws, "dl2/x", "no", 1), ENOENT, "dl2/x", NULL);
	assert_false(exists_ws(f, "gone"));

	/* over file_max: refused, the old contents stay */
	put(f, "keep.txt", "keep");
	open_ws(f, &small, f->root, 0, 4);
	EXPECT_OK(f, write_str(f, &small, "keep.txt", "four", 0));
	EXPECT_ERR(f, write_str(f, &small, "keep.txt", "fives", 0), EFBIG, "keep.txt", "limit");
	assert_file(f, "keep.txt", "four");
	EXPECT_ERR(f, write_str(f, &small, "nope.txt", "fives", 0), EFBIG, "nope.txt", "limit");
	assert_false(exists_ws(f, "nope.txt"));
	ws_close(&small);
	outside_intact(f);
}

/* A hard link shares its inode with another name: never written. */
static void
test_hardlink(void **state)
{
	struct fixture *f = *state;
	char a[PATH_MAX], b[PATH_MAX];
	uint32_t n = 9;

	assert_int_equal(link(in_t(f, "outside", a, sizeof(a)), in_ws(f, "hl", b, sizeof(b))), 0);
	EXPECT_ERR(f, write_str(f, &f->ws, "hl", "PWNED\n", 0), EMLINK, "hl", "hard links");
	EXPECT_ERR(f, write_str(f, &f->ws, "hl", "", 0), EMLINK, "hl", "hard links");
	EXPECT_ERR(f, edit_str(f, &f->ws, "hl", "OUTSIDE", "PWNED", 0, &n), EMLINK, "hl",
	           "hard links");
	assert_int_equal(n, 0);
	symlink_ws(f, "hl", "hlsym");
	EXPECT_ERR(f, write_str(f, &f->ws, "hlsym", "PWNED\n", 0), EMLINK, "hlsym", "hard links");

	/* two names inside the workspace: just as refused */
	put(f, "one", "1\n");
	assert_int_equal(link(in_ws(f, "one", a, sizeof(a)), in_ws(f, "two", b, sizeof(b))), 0);
	EXPECT_ERR(f, write_str(f, &f->ws, "two", "2\n", 0), EMLINK, "two", "hard links");
	assert_file(f, "one", "1\n");
	unlink(b);
	EXPECT_OK(f, write_str(f, &f->ws, "one", "2\n", 0));
	assert_file(f, "one", "2\n");

	unlink(in_ws(f, "hl", b, sizeof(b)));
	outside_intact(f);
}

/* ---- read-only workspaces ---------------------------------------------------- */

static void
test_readonly(void **state)
{
	struct fixture *f = *state;
	struct ws_buf b = {0};
	char a[PATH_MAX], c[PATH_MAX];
	struct ws ro;
	uint32_t n;
	size_t i;

	put(f, "src/file", "SRC\n");
	put(f, ".agrippa/artifacts/keep", "KEEP\n");
	open_ws(f, &ro, f->root, 1, FILE_MAX);

	const char *refused[] = {"a.txt",      "src/file",
	                         "src/new/x",  "/workspace/src/file",
	                         ".agrippa/x", ".agrippa/artifactsx/y",
	                         ".agrippa",   "./.agrippa/../src/file"};
	for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		EXPECT_ERR(f, write_str(f, &ro, refused[i], "RO\n", 1), EROFS, refused[i],
		           "read-only workspace: only .agrippa/artifacts/ is writable");
		EXPECT_ERR(f, edit_str(f, &ro, refused[i], "SRC", "X", 0, &n), EROFS, refused[i],
		           "read-only");
	}
	assert_false(exists_ws(f, "a.txt"));
	assert_false(exists_ws(f, "src/new"));
	assert_false(exists_ws(f, ".agrippa/x"));
	assert_false(exists_ws(f, ".agrippa/artifactsx"));
	assert_file(f, "src/file", "SRC\n");
	EXPECT_OK(f, ws_read_all(f, &ro, "src/file", &b)); /* reading is fine */
	ws_buf_free(&b);

	/* inside .agrippa/artifacts: allowed, by any spelling */
	EXPECT_OK(f, write_str(f, &ro, ".agrippa/artifacts/out.txt", "OUT\n", 0));
	assert_file(f, ".agrippa/artifacts/out.txt", "OUT\n");
	EXPECT_OK(f, write_str(f, &ro, "./.agrippa//artifacts/o2", "2", 0));
	EXPECT_OK(f, write_str(f, &ro, "/workspace/.agrippa/artifacts/o3", "3", 0));
	EXPECT_OK(f, write_str(f, &ro, ".agrippa/artifacts/sub/deep/o4", "4", 1));
	assert_file(f, ".agrippa/artifacts/sub/deep/o4", "4");
	EXPECT_OK(f, edit_str(f, &ro, ".agrippa/artifacts/out.txt", "OUT", "EDITED", 0, &n));
	assert_file(f, ".agrippa/artifacts/out.txt", "EDITED\n");
	EXPECT_ERR(f, write_str(f, &ro, ".agrippa/artifacts", "x", 0), EISDIR, NULL, "directory");

	/* ".." out of the artifact directory: it is the boundary */
	const char *dotdot[] = {".agrippa/artifacts/../x", ".agrippa/artifacts/../../src/file",
	                        ".agrippa/artifacts/sub/../../y", ".agrippa/artifacts/..",
	                        ".agrippa/artifacts/../z/w"};
	for (i = 0; i < sizeof(dotdot) / sizeof(dotdot[0]); i++)
		EXPECT_ERR(f, write_str(f, &ro, dotdot[i], "RO\n", 1), EROFS, dotdot[i],
		           "read-only");
	assert_false(exists_ws(f, ".agrippa/x"));
	assert_false(exists_ws(f, ".agrippa/y"));
	assert_false(exists_ws(f, ".agrippa/z"));
	assert_file(f, "src/file", "SRC\n");

	/* symlinks in the artifact directory redirect nothing, even to a sibling */
	symlink_ws(f, "../../src/file", ".agrippa/artifacts/ln");
	symlink_ws(f, "out.txt", ".agrippa/artifacts/ln2");
	symlink_ws(f, "../../src", ".agrippa/artifacts/ld");
	symlink_ws(f, "../../src/nothere", ".agrippa/artifacts/dangle");
	const char *links[] = {".agrippa/artifacts/ln", ".agrippa/artifacts/ln2",
	                       ".agrippa/artifacts/ld/file", ".agrippa/artifacts/ld/new",
	                       ".agrippa/artifacts/dangle"};
	for (i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		EXPECT_ERR(f, write_str(f, &ro, links[i], "RO\n", 1), ELOOP, links[i], "symlink");
		EXPECT_ERR(f, edit_str(f, &ro, links[i], "SRC", "X", 0, &n), ELOOP, links[i],
		           "symlink");
	}
	EXPECT_ERR(f, write_str(f, &ro, ".agrippa/artifacts/ld/sub/x", "RO\n", 1), ELOOP, NULL,
	           "symlink");
	assert_file(f, "src/file", "SRC\n");
	assert_file(f, ".agrippa/artifacts/out.txt", "EDITED\n");
	assert_false(exists_ws(f, "src/new"));
	assert_false(exists_ws(f, "src/sub"));
	assert_false(exists_ws(f, "src/nothere"));

	/* a hard link to a workspace file */
	assert_int_equal(link(in_ws(f, "src/file", a, sizeof(a)),
	                      in_ws(f, ".agrippa/artifacts/hl", c, sizeof(c))),
	                 0);
	EXPECT_ERR(f, write_str(f, &ro, ".agrippa/artifacts/hl", "RO\n", 0), EMLINK, NULL, "hard");
	assert_file(f, "src/file", "SRC\n");

	/* .agrippa itself a symlink: refused, whatever it points to */
	put(f, "src/artifacts/victim", "VICTIM\n");
	assert_int_equal(rename(in_ws(f, ".agrippa", a, sizeof(a)), in_ws(f, "real", c, sizeof(c))),
	                 0);
	symlink_ws(f, "src", ".agrippa");
	EXPECT_ERR(f, write_str(f, &ro, ".agrippa/artifacts/victim", "RO\n", 0), ELOOP, NULL,
	           "symlink");
	assert_file(f, "src/artifacts/victim", "VICTIM\n");
	ws_close(&ro);
	outside_intact(f);
}

/* ---- edit -------------------------------------------------------------------- */

static void
test_edit(void **state)
{
	struct fixture *f = *state;
	struct ws small;
	uint32_t n = 99;

	put(f, "e.txt", "one two one three\n");
	EXPECT_OK(f, edit_str(f, &f->ws, "e.txt", "two", "2", 0, &n));
	assert_int_equal(n, 1);
	assert_file(f, "e.txt", "one 2 one three\n");

	/* not unique, count mismatches, not found: refused, unchanged */
	EXPECT_ERR(f, edit_str(f, &f->ws, "e.txt", "one", "1", 0, &n), EINVAL, "e.txt",
	           "occurs 2 times");
	assert_int_equal(n, 0);
	EXPECT_ERR(f, edit_str(f, &f->ws, "e.txt", "one", "1", 3, &n), EINVAL, "e.txt",
	           "expected 3");
	EXPECT_ERR(f, edit_str(f, &f->ws, "e.txt", "one", "1", 1, &n), EINVAL, "e.txt",
	           "expected 1");
	EXPECT_ERR(f, edit_str(f, &f->ws, "e.txt", "zzz", "1", 0, &n), ENODATA, "e.txt",
	           "not found");
	EXPECT_ERR(f, edit_str(f, &f->ws, "e.txt", "zzz", "1", 5, &n), ENODATA, "e.txt",
	           "not found");
	EXPECT_ERR(f, edit_str(f, &f->ws, "e.txt", "", "1", 0, &n), EINVAL, "e.txt", "empty");
	assert_file(f, "e.txt", "one 2 one three\n");

	/* count n replaces all n */
	EXPECT_OK(f, edit_str(f, &f->ws, "e.txt", "one", "1", 2, &n));
	assert_int_equal(n, 2);
	assert_file(f, "e.txt", "1 2 1 three\n");
	/* deleting, growing, occurrences counted without overlap */
	EXPECT_OK(f, edit_str(f, &f->ws, "/workspace/e.txt", " three", "", 0, &n));
	assert_file(f, "e.txt", "1 2 1\n");
	put(f, "aa.txt", "aaaaa");
	EXPECT_OK(f, edit_str(f, &f->ws, "aa.txt", "aa", "bbb", 2, &n));
	assert_file(f, "aa.txt", "bbbbbba");
	/* binary-safe */
	put_abs(in_ws(f, "bin", (char[PATH_MAX]){0}, PATH_MAX), "a\0b\0c", 5);
	EXPECT_OK(f, ws_edit(&f->ws, "bin", "\0", 1, "-", 1, 2, &n, f->err, sizeof(f->err)));
	assert_file(f, "bin", "a-b-c");

	/* a result over file_max is refused and the file left alone */
	put(f, "s.txt", "abcabc");
	open_ws(f, &small, f->root, 0, 16);
	EXPECT_ERR(f, edit_str(f, &small, "s.txt", "abc", "0123456789", 2, &n), EFBIG, "s.txt",
	           "limit");
	assert_file(f, "s.txt", "abcabc");
	EXPECT_OK(f, edit_str(f, &small, "s.txt", "abc", "0123456", 2, &n)); /* 14 bytes: fits */
	put(f, "big.txt", "0123456789abcdefXYZ");
	EXPECT_ERR(f, edit_str(f, &small, "big.txt", "X", "Y", 0, &n), EFBIG, "big.txt", "limit");
	assert_file(f, "big.txt", "0123456789abcdefXYZ");
	ws_close(&small);

	/* edit never creates */
	EXPECT_ERR(f, edit_str(f, &f->ws, "missing.txt", "a", "b", 0, &n), ENOENT, "missing.txt",
	           NULL);
	assert_false(exists_ws(f, "missing.txt"));
	outside_intact(f);
}

/* ---- list -------------------------------------------------------------------- */

static void
test_list(void **state)
{
	struct fixture *f = *state;
	struct ws_entries e = {0};
	const char *names[] = {".hidden", "a", "b", "c", "d", "s"};
	size_t i;

	put(f, "l/b", "bb");
	put(f, "l/a", "a");
	put(f, "l/c", "ccc");
	put(f, "l/.hidden", "");
	put(f, "l/d/inner", "i");
	symlink_ws(f, "d", "l/s");

	EXPECT_OK(f, ws_list(&f->ws, "l", 100, &e, f->err, sizeof(f->err)));
	assert_int_equal(e.n, 6);
	assert_int_equal(e.truncated, 0);
	for (i = 0; i < e.n; i++)
		assert_string_equal(e.v[i].name, names[i]);
	assert_int_equal(e.v[1].type, WS_T_FILE);
	assert_int_equal(e.v[1].size, 1);
	assert_int_equal(e.v[3].size, 3);
	assert_int_equal(e.v[4].type, WS_T_DIR);
	assert_int_equal(e.v[5].type, WS_T_SYMLINK); /* reported, not followed */
	assert_int_equal(e.v[5].size, 1);            /* the link's own size ("d") */
	ws_entries_free(&e);
	assert_null(e.v);

	EXPECT_OK(f, ws_list(&f->ws, "l", 2, &e, f->err, sizeof(f->err)));
	assert_int_equal(e.n, 2);
	assert_int_equal(e.truncated, 1);
	assert_string_equal(e.v[0].name, ".hidden");
	assert_string_equal(e.v[1].name, "a");
	ws_entries_free(&e);
	EXPECT_OK(f, ws_list(&f->ws, "l", 6, &e, f->err, sizeof(f->err)));
	assert_int_equal(e.n, 6);
	assert_int_equal(e.truncated, 0);
	ws_entries_free(&e);
	EXPECT_OK(f, ws_list(&f->ws, "l", 0, &e, f->err, sizeof(f->err)));
	assert_int_equal(e.n, 0);
	assert_int_equal(e.truncated, 1);
	ws_entries_free(&e);

	EXPECT_OK(f, ws_list(&f->ws, "", 100, &e, f->err, sizeof(f->err)));
	assert_int_equal(e.n, 1);
	assert_string_equal(e.v[0].name, "l");
	ws_entries_free(&e);
	EXPECT_OK(f, ws_list(&f->ws, "/workspace/l/s", 100, &e, f->err, sizeof(f->err)));
	assert_int_equal(e.n, 1);
	assert_string_equal(e.v[0].name, "inner");
	ws_entries_free(&e);

	EXPECT_ERR(f, ws_list(&f->ws, "l/a", 100, &e, f->err, sizeof(f->err)), ENOTDIR, "l/a",
	           NULL);
	EXPECT_ERR(f, ws_list(&f->ws, "../", 100, &e, f->err, sizeof(f->err)), EXDEV, "../",
	           "escapes");
	EXPECT_ERR(f, ws_list(&f->ws, "/workspace-evil", 100, &e, f->err, sizeof(f->err)), EXDEV,
	           NULL, "escapes");
	assert_int_equal(e.n, 0);
}

/* ---- glob -------------------------------------------------------------------- */

static void
glob_tree(const struct fixture *f)
{
	put(f, "src/a.c", "a");
	put(f, "src/b.h", "b");
	put(f, "src/sub/c.c", "c");
	put(f, "src/.f.c", "f");
	put(f, "src/.git/h.c", "h");
	put(f, "lib/d.c", "d");
	put(f, ".hidden/e.c", "e");
	put(f, ".git/g.c", "g");
	put(f, "top.c", "top");
	symlink_ws(f, "src", "ln");
	symlink_ws(f, "a.c", "src/lnk.c");
}

/* ws_glob(pattern, base) must give exactly want (NULL-terminated). */
#define EXPECT_GLOB(f, pattern, base, max, ...)                                                    \
	expect_glob(f, pattern, base, max, (const char *[]){__VA_ARGS__, NULL}, __LINE__)

static void
expect_glob(struct fixture *f, const char *pattern, const char *base, size_t max, const char **want,
            int line)
{
	struct ws_entries e = {0};
	size_t i;
	int rc = ws_glob(&f->ws, pattern, base, max, &e, f->err, sizeof(f->err));

	if (rc != 0)
		fail_msg("line %d: glob %s: %s", line, pattern, f->err);
	for (i = 0; want[i] != NULL && i < e.n; i++)
		if (strcmp(e.v[i].name, want[i]) != 0)
			fail_msg("line %d: glob %s: [%zu] is %s, expected %s", line, pattern, i,
			         e.v[i].name, want[i]);
	if (want[i] != NULL || i != e.n)
		fail_msg("line %d: glob %s: %zu results, expected %s at %zu", line, pattern, e.n,
		         want[i] != NULL ? want[i] : "fewer", i);
	ws_entries_free(&e);
}

static void
test_glob(void **state)
{
	struct fixture *f = *state;
	struct ws_entries e = {0};

	glob_tree(f);
	/* "**" crosses directories but neither dot-directories, .git nor symlinks */
	EXPECT_GLOB(f, "**/*.c", "", 100, "lib/d.c", "src/a.c", "src/lnk.c", "src/sub/c.c",
	            "top.c");
	EXPECT_GLOB(f, "src/*.h", "", 100, "src/b.h");
	EXPECT_GLOB(f, "./src//*.h", ".", 100, "src/b.h");
	EXPECT_GLOB(f, "*.c", "", 100, "top.c");
	EXPECT_GLOB(f, "*", "", 100, "lib", "ln", "src", "top.c");
	EXPECT_GLOB(f, "src/**/c.c", "", 100, "src/sub/c.c");
	EXPECT_GLOB(f, "src/**/**/*.c", "", 100, "src/a.c", "src/lnk.c", "src/sub/c.c");
	EXPECT_GLOB(f, "**/sub", "", 100, "src/sub");
	/* dotfiles only when the pattern says "." */
	EXPECT_GLOB(f, "**/.*.c", "", 100, "src/.f.c");
	EXPECT_GLOB(f, ".hidden/*.c", "", 100, ".hidden/e.c");
	EXPECT_GLOB(f, ".*/*.c", "", 100, ".hidden/e.c");
	EXPECT_GLOB(f, ".*", "", 100, ".hidden");
	/* .git is never walked, even by name; a symlinked directory is not entered */
	EXPECT_GLOB(f, ".git/*", "", 100, NULL);
	EXPECT_GLOB(f, "**/.git/*", "", 100, NULL);
	EXPECT_GLOB(f, "ln/*.c", "", 100, NULL);
	EXPECT_GLOB(f, "nothing*", "", 100, NULL);
	/* under a base: matched relative to it, named relative to the root */
	EXPECT_GLOB(f, "*.c", "src", 100, "src/a.c", "src/lnk.c");
	EXPECT_GLOB(f, "*.c", "/workspace/src/", 100, "src/a.c", "src/lnk.c");
	EXPECT_GLOB(f, "**", "src", 100, "src/a.c", "src/b.h", "src/lnk.c", "src/sub",
	            "src/sub/c.c");
	EXPECT_GLOB(f, "*.c", "ln", 100, "ln/a.c", "ln/lnk.c"); /* the base itself may be a link */

	/* types and sizes come from lstat */
	EXPECT_OK(f, ws_glob(&f->ws, "src/*", "", 100, &e, f->err, sizeof(f->err)));
	assert_int_equal(e.n, 4);
	assert_string_equal(e.v[2].name, "src/lnk.c");
	assert_int_equal(e.v[2].type, WS_T_SYMLINK);
	assert_int_equal(e.v[3].type, WS_T_DIR);
	assert_int_equal(e.v[0].type, WS_T_FILE);
	assert_int_equal(e.v[0].size, 1);
	ws_entries_free(&e);

	/* max */
	EXPECT_OK(f, ws_glob(&f->ws, "**/*.c", "", 2, &e, f->err, sizeof(f->err)));
	assert_int_equal(e.n, 2);
	assert_int_equal(e.truncated, 1);
	ws_entries_free(&e);
	EXPECT_OK(f, ws_glob(&f->ws, "**/*.c", "", 5, &e, f->err, sizeof(f->err)));
	assert_int_equal(e.n, 5);
	assert_int_equal(e.truncated, 0);
	ws_entries_free(&e);

	EXPECT_ERR(f, ws_glob(&f->ws, "*", "../", 100, &e, f->err, sizeof(f->err)), EXDEV, "../",
	           "escapes");
	EXPECT_ERR(f, ws_glob(&f->ws, "*", "top.c", 100, &e, f->err, sizeof(f->err)), ENOTDIR,
	           "top.c", "not a directory");
	EXPECT_ERR(f, ws_glob(&f->ws, "", "", 100, &e, f->err, sizeof(f->err)), EINVAL, NULL,
	           "empty");
	EXPECT_ERR(f, ws_glob(&f->ws, "/etc/*", "", 100, &e, f->err, sizeof(f->err)), EINVAL,
	           "/etc/*", "relative");
	EXPECT_ERR(f, ws_glob(&f->ws, "../*", "", 100, &e, f->err, sizeof(f->err)), 0, NULL, NULL);
	assert_int_equal(e.n, 0); /* ".." never matches a name: nothing outside is listed */
	ws_entries_free(&e);
}

/* The walk stops at depth 64 and says so. */
static void
test_glob_depth(void **state)
{
	struct fixture *f = *state;
	struct ws_entries e = {0};
	int fd = dup(f->ws.root), sub, i;

	for (i = 0; i < 70; i++) {
		assert_int_equal(mkdirat(fd, "d", 0755), 0);
		sub = openat(fd, "d", O_PATH | O_DIRECTORY | O_CLOEXEC);
		close(fd);
		fd = sub;
		assert_true(fd >= 0);
	}
	close(fd);
	EXPECT_OK(f, ws_glob(&f->ws, "**", "", 1000, &e, f->err, sizeof(f->err)));
	assert_int_equal(e.n, 64);
	assert_int_equal(e.truncated, 1);
	ws_entries_free(&e);
}

/* ---- grep -------------------------------------------------------------------- */

static void
grep_tree(const struct fixture *f)
{
	char longline[700];

	put(f, "src/a.c", "int main(void)\n{\n\treturn FOO;\n}\n");
	put(f, "src/b.h", "#define FOO 1\n");
	put(f, "notes.txt", "foo bar\nnothing\nFOO again");
	put_abs(in_ws(f, "bin.dat", (char[PATH_MAX]){0}, PATH_MAX), "FOO\0binary\n", 11);
	put(f, ".git/config", "FOO\n");
	memset(longline, 'x', sizeof(longline) - 1);
	memcpy(longline, "FOO", 3);
	memcpy(longline + 511, "\xc3\xa9", 2); /* a 2-byte character across the cut at 512 */
	longline[sizeof(longline) - 1] = '\0';
	put(f, "long.txt", longline);
}

static void
expect_match(const struct ws_matches *m, size_t i, const char *file, uint32_t line,
             const char *text)
{
	assert_true(i < m->n);
	assert_string_equal(m->v[i].file, file);
	assert_int_equal(m->v[i].line, line);
	if (text != NULL)
		assert_string_equal(m->v[i].text, text);
}

static void
test_grep(void **state)
{
	struct fixture *f = *state;
	struct ws_matches m = {0};
	char p[PATH_MAX];
	struct ws small;

	grep_tree(f);
	symlink_ws(f, in_t(f, "outside", p, sizeof(p)), "abs");
	symlink_ws(f, "../ws-evil", "evil");
	mkfifo_ws(f, "pipe");
	alarm(FIFO_GUARD); /* the walk must not open the FIFO */
	EXPECT_OK(f, ws_grep(&f->ws, "FOO", "", NULL, 0, 100, &m, f->err, sizeof(f->err)));
	alarm(0);
	assert_int_equal(m.n, 4); /* not bin.dat, not .git/config */
	expect_match(&m, 0, "long.txt", 1, NULL);
	assert_int_equal(strlen(m.v[0].text), 511); /* cut before the split character */
	expect_match(&m, 1, "notes.txt", 3, "FOO again");
	expect_match(&m, 2, "src/a.c", 3, "\treturn FOO;");
	expect_match(&m, 3, "src/b.h", 1, "#define FOO 1");
	assert_int_equal(m.truncated, 0);
	ws_matches_free(&m);
	assert_null(m.v);

	/* include filter, case, anchors */
	EXPECT_OK(f, ws_grep(&f->ws, "FOO", ".", "*.h", 0, 100, &m, f->err, sizeof(f->err)));
	assert_int_equal(m.n, 1);
	expect_match(&m, 0, "src/b.h", 1, NULL);
	ws_matches_free(&m);
	EXPECT_OK(f, ws_grep(&f->ws, "foo", "", "", 0, 100, &m, f->err, sizeof(f->err)));
	assert_int_equal(m.n, 1);
	expect_match(&m, 0, "notes.txt", 1, "foo bar");
	ws_matches_free(&m);
	EXPECT_OK(f, ws_grep(&f->ws, "foo", "notes.txt", NULL, 1, 100, &m, f->err, sizeof(f->err)));
	assert_int_equal(m.n, 2);
	expect_match(&m, 0, "notes.txt", 1, "foo bar");
	expect_match(&m, 1, "notes.txt", 3, "FOO again");
	ws_matches_free(&m);
	EXPECT_OK(f, ws_grep(&f->ws, "^(FOO|\\{)$|^FOO a", "/workspace", NULL, 0, 100, &m, f->err,
	                     sizeof(f->err)));
	assert_int_equal(m.n, 2);
	expect_match(&m, 0, "notes.txt", 3, NULL);
	expect_match(&m, 1, "src/a.c", 2, "{");
	ws_matches_free(&m);

	/* one file, named: the include filter is for walks only */
	EXPECT_OK(f,
	          ws_grep(&f->ws, "return", "src/a.c", "*.h", 0, 100, &m, f->err, sizeof(f->err)));
	assert_int_equal(m.n, 1);
	expect_match(&m, 0, "src/a.c", 3, NULL);
	ws_matches_free(&m);
	EXPECT_OK(f, ws_grep(&f->ws, "FOO", "src", NULL, 0, 100, &m, f->err, sizeof(f->err)));
	assert_int_equal(m.n, 2);
	expect_match(&m, 0, "src/a.c", 3, NULL);
	ws_matches_free(&m);

	/* max */
	EXPECT_OK(f, ws_grep(&f->ws, "FOO", "", NULL, 0, 2, &m, f->err, sizeof(f->err)));
	assert_int_equal(m.n, 2);
	assert_int_equal(m.truncated, 1);
	ws_matches_free(&m);

	/* files over file_max are skipped */
	open_ws(f, &small, f->root, 0, 14);
	EXPECT_OK(f, ws_grep(&small, "FOO", "", NULL, 0, 100, &m, f->err, sizeof(f->err)));
	assert_int_equal(m.n, 1);
	expect_match(&m, 0, "src/b.h", 1, NULL);
	ws_matches_free(&m);
	ws_close(&small);

	/* nothing outside is read: symlinks are not followed by the walk */
	EXPECT_OK(f,
	          ws_grep(&f->ws, "OUTSIDE|SECRET", "", NULL, 0, 100, &m, f->err, sizeof(f->err)));
	assert_int_equal(m.n, 0);

	EXPECT_ERR(f, ws_grep(&f->ws, "(", "", NULL, 0, 100, &m, f->err, sizeof(f->err)), EINVAL,
	           NULL, "bad regex");
	EXPECT_ERR(f, ws_grep(&f->ws, "x", "../", NULL, 0, 100, &m, f->err, sizeof(f->err)), EXDEV,
	           "../", "escapes");
	EXPECT_ERR(f, ws_grep(&f->ws, "x", "missing", NULL, 0, 100, &m, f->err, sizeof(f->err)),
	           ENOENT, "missing", NULL);
	alarm(FIFO_GUARD);
	EXPECT_ERR(f, ws_grep(&f->ws, "x", "pipe", NULL, 0, 100, &m, f->err, sizeof(f->err)),
	           EINVAL, "pipe", "FIFO");
	alarm(0);
	assert_int_equal(m.n, 0);
	outside_intact(f);
}

/* ---- stat, open_dir ------------------------------------------------------------ */

static void
test_stat(void **state)
{
	struct fixture *f = *state;
	char a[PATH_MAX], b[PATH_MAX];
	struct ws_stat st;
	struct stat sb;

	put(f, "src/a.c", "12345");
	assert_int_equal(chmod(in_ws(f, "src/a.c", a, sizeof(a)), 0640), 0);
	symlink_ws(f, "src/a.c", "sl");

	EXPECT_OK(f, ws_stat(&f->ws, "src/a.c", &st, f->err, sizeof(f->err)));
	assert_int_equal(lstat(a, &sb), 0);
	assert_int_equal(st.type, WS_T_FILE);
	assert_int_equal(st.size, 5);
	assert_int_equal(st.mode, 0640);
	assert_int_equal(st.nlink, 1);
	assert_int_equal(st.mtime, sb.st_mtim.tv_sec);

	EXPECT_OK(f, ws_stat(&f->ws, "src", &st, f->err, sizeof(f->err)));
	assert_int_equal(st.type, WS_T_DIR);
	EXPECT_OK(f, ws_stat(&f->ws, "", &st, f->err, sizeof(f->err)));
	assert_int_equal(st.type, WS_T_DIR);
	EXPECT_OK(f, ws_stat(&f->ws, "sl", &st, f->err, sizeof(f->err)));
	assert_int_equal(st.type, WS_T_SYMLINK);
	assert_int_equal(st.size, strlen("src/a.c"));
	EXPECT_ERR(f, ws_stat(&f->ws, "/workspace/sl/", &st, f->err, sizeof(f->err)), ENOTDIR,
	           "/workspace/sl/", NULL); /* a trailing slash follows, and a.c is no directory */

	assert_int_equal(link(a, in_ws(f, "hl", b, sizeof(b))), 0);
	EXPECT_OK(f, ws_stat(&f->ws, "hl", &st, f->err, sizeof(f->err)));
	assert_int_equal(st.nlink, 2);

	mkfifo_ws(f, "fifo");
	EXPECT_OK(f, ws_stat(&f->ws, "fifo", &st, f->err, sizeof(f->err)));
	assert_int_equal(st.type, WS_T_OTHER);

	EXPECT_ERR(f, ws_stat(&f->ws, "missing", &st, f->err, sizeof(f->err)), ENOENT, "missing",
	           NULL);
	EXPECT_ERR(f, ws_stat(&f->ws, "../outside", &st, f->err, sizeof(f->err)), EXDEV,
	           "../outside", "escapes");
	EXPECT_ERR(f, ws_stat(&f->ws, "/etc", &st, f->err, sizeof(f->err)), EXDEV, "/etc",
	           "escapes");
}

static void
test_open_dir(void **state)
{
	struct fixture *f = *state;
	char p[PATH_MAX];
	struct stat a, b;
	int fd = -2;

	put(f, "src/a.c", "a");
	symlink_ws(f, "src", "sd");
	symlink_ws(f, "../outdir", "odir");
	EXPECT_OK(f, ws_open_dir(&f->ws, "src", &fd, f->err, sizeof(f->err)));
	assert_int_equal(fstat(fd, &a), 0);
	assert_int_equal(stat(in_ws(f, "src", p, sizeof(p)), &b), 0);
	assert_true(S_ISDIR(a.st_mode));
	assert_int_equal(a.st_ino, b.st_ino);
	assert_int_equal(fcntl(fd, F_GETFL) & O_PATH, O_PATH);
	close(fd);
	EXPECT_OK(f, ws_open_dir(&f->ws, "sd", &fd, f->err, sizeof(f->err)));
	assert_int_equal(fstat(fd, &a), 0);
	assert_int_equal(a.st_ino, b.st_ino);
	close(fd);
	EXPECT_OK(f, ws_open_dir(&f->ws, "", &fd, f->err, sizeof(f->err)));
	assert_int_equal(fstat(fd, &a), 0);
	assert_int_equal(stat(f->root, &b), 0);
	assert_int_equal(a.st_ino, b.st_ino);
	close(fd);

	EXPECT_ERR(f, ws_open_dir(&f->ws, "src/a.c", &fd, f->err, sizeof(f->err)), ENOTDIR,
	           "src/a.c", NULL);
	assert_int_equal(fd, -1);
	EXPECT_ERR(f, ws_open_dir(&f->ws, "../", &fd, f->err, sizeof(f->err)), EXDEV, "../",
	           "escapes");
	EXPECT_ERR(f, ws_open_dir(&f->ws, "odir", &fd, f->err, sizeof(f->err)), EXDEV, "odir",
	           "escapes");
	EXPECT_ERR(f, ws_open_dir(&f->ws, "/tmp", &fd, f->err, sizeof(f->err)), EXDEV, "/tmp",
	           "escapes");
	assert_int_equal(fd, -1);
}

/* ---- artifacts ------------------------------------------------------------------ */

static void
test_artifact(void **state)
{
	struct fixture *f = *state;
	char buf[64], name[WS_ARTIFACT_NAME_MAX + 2], a[PATH_MAX], b[PATH_MAX];
	uint64_t size = 9;
	size_t i;
	int fd = -2;

	put(f, ".agrippa/artifacts/good.txt", "artifact-data");
	put(f, ".agrippa/artifacts/empty", "");
	put(f, ".agrippa/artifacts/dir/x", "x");
	symlink_ws(f, "good.txt", ".agrippa/artifacts/ln");
	symlink_ws(f, "../../../outside", ".agrippa/artifacts/out");
	mkfifo_ws(f, ".agrippa/artifacts/fifo");

	EXPECT_OK(f, ws_artifact_open(&f->ws, "good.txt", 100, &fd, &size, f->err, sizeof(f->err)));
	assert_int_equal(size, 13);
	assert_int_equal(lseek(fd, 0, SEEK_CUR), 0);
	assert_int_equal(fcntl(fd, F_GETFL) & (O_ACCMODE | O_NONBLOCK), O_RDONLY);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	assert_int_equal(read(fd, buf, sizeof(buf)), 13);
	assert_memory_equal(buf, "artifact-data", 13);
	close(fd);
	EXPECT_OK(f, ws_artifact_open(&f->ws, "good.txt", 13, &fd, &size, f->err, sizeof(f->err)));
	close(fd);

	memset(name, 'n', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0'; /* 129 bytes */
	const char *bad[] = {"../x", "a/b", ".",           "..",          "",   name,
	                     "a b",  "x\n", "caf\xc3\xa9", "/etc/passwd", "..."};
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]) - 1; i++) {
		EXPECT_ERR(
		    f, ws_artifact_open(&f->ws, bad[i], 100, &fd, &size, f->err, sizeof(f->err)),
		    EINVAL, NULL, "bad artifact name");
		assert_int_equal(fd, -1);
		assert_int_equal(size, 0);
	}
	EXPECT_ERR(f, ws_artifact_open(&f->ws, NULL, 100, &fd, &size, f->err, sizeof(f->err)),
	           EINVAL, NULL, "bad artifact name");
	/* "..." and a name of exactly 128 bytes are valid names, here missing */
	EXPECT_ERR(f, ws_artifact_open(&f->ws, "...", 100, &fd, &size, f->err, sizeof(f->err)),
	           ENOENT, "...", NULL);
	name[WS_ARTIFACT_NAME_MAX] = '\0';
	EXPECT_ERR(f, ws_artifact_open(&f->ws, name, 100, &fd, &size, f->err, sizeof(f->err)),
	           ENOENT, name, NULL);

	/* no symlink at all, even one to a sibling artifact */
	EXPECT_ERR(f, ws_artifact_open(&f->ws, "ln", 100, &fd, &size, f->err, sizeof(f->err)),
	           ELOOP, "ln", "symlink");
	EXPECT_ERR(f, ws_artifact_open(&f->ws, "out", 100, &fd, &size, f->err, sizeof(f->err)),
	           ELOOP, "out", "symlink");
	EXPECT_ERR(f, ws_artifact_open(&f->ws, "dir", 100, &fd, &size, f->err, sizeof(f->err)),
	           EINVAL, "dir", "directory");
	alarm(FIFO_GUARD);
	EXPECT_ERR(f, ws_artifact_open(&f->ws, "fifo", 100, &fd, &size, f->err, sizeof(f->err)),
	           EINVAL, "fifo", "FIFO");
	alarm(0);
	EXPECT_ERR(f, ws_artifact_open(&f->ws, "empty", 100, &fd, &size, f->err, sizeof(f->err)),
	           ENODATA, "empty", "empty");
	EXPECT_ERR(f, ws_artifact_open(&f->ws, "good.txt", 12, &fd, &size, f->err, sizeof(f->err)),
	           EFBIG, "good.txt", "cap");
	EXPECT_ERR(f, ws_artifact_open(&f->ws, "missing", 100, &fd, &size, f->err, sizeof(f->err)),
	           ENOENT, "missing", NULL);
	assert_int_equal(fd, -1);

	/* a symlink on the way (.agrippa, artifacts) is refused too */
	assert_int_equal(rename(in_ws(f, ".agrippa", a, sizeof(a)), in_ws(f, "real", b, sizeof(b))),
	                 0);
	symlink_ws(f, "real", ".agrippa");
	EXPECT_ERR(f, ws_artifact_open(&f->ws, "good.txt", 100, &fd, &size, f->err, sizeof(f->err)),
	           ELOOP, "good.txt", "symlink");
	assert_int_equal(unlink(a), 0);
	mkdir_ws(f, ".agrippa");
	symlink_ws(f, "../real/artifacts", ".agrippa/artifacts");
	EXPECT_ERR(f, ws_artifact_open(&f->ws, "good.txt", 100, &fd, &size, f->err, sizeof(f->err)),
	           ELOOP, "good.txt", "symlink");
	assert_int_equal(fd, -1);
	outside_intact(f);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    T(test_open),
	    T(test_read),
	    T(test_read_escapes),
	    T(test_write_escapes),
	    T(test_symlink_escapes),
	    T(test_symlink_inside),
	    T(test_magiclinks),
	    T(test_special_files),
	    T(test_write),
	    T(test_hardlink),
	    T(test_readonly),
	    T(test_edit),
	    T(test_list),
	    T(test_glob),
	    T(test_glob_depth),
	    T(test_grep),
	    T(test_stat),
	    T(test_open_dir),
	    T(test_artifact),
	};

	return cmocka_run_group_tests_name("ws", tests, NULL, NULL);
}
