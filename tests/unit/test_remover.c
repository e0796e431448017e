/*
 * Unit tests for remover/remover.c and remover/chown.c: remover_empty
 * empties a hostile tree and nothing else; chowner_give gives a tree to
 * another user and nothing else.
 *
 * Each test's directory T holds T/tree (what is emptied) and T/outside (a
 * directory and a file the tree links to).  Run as root, the tree and the
 * outside are given to an unprivileged uid and the removal runs as that
 * uid in a child process, as the supervisor runs it: following any link
 * would then destroy the outside, which that uid may write.  The child
 * also runs with few descriptors, so that a deep tree must not hold one
 * per level.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "githelper/stat.h"
#include "remover/remover.h"

#define OWNER 65534 /* the tree's owner when the tests run as root */
#define TAKER 65533 /* whom chowner_give gives it to */
#define FEW_FDS 40  /* the child's RLIMIT_NOFILE */
#define DEEP 5000   /* a directory chain deeper than PATH_MAX allows by path */
#define DEEP_GIT 1000 /* ... and one as deep as a checkout can be (its paths fit) */

struct fixture {
	char dir[64];     /* T */
	char tree[96];    /* T/tree */
	char outside[96]; /* T/outside */
};

struct result {
	int rv;
	uint64_t count;
	char err[512];
};

static void
path_of(char *buf, size_t sz, const struct fixture *f, const char *rel)
{
	assert_int_equal(fmt_ok(buf, sz, "%s/%s", f->dir, rel), 0);
}

static void
put(const struct fixture *f, const char *rel, const char *data)
{
	char p[PATH_MAX];
	int fd;

	path_of(p, sizeof(p), f, rel);
	if ((fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
		fail_msg("create %s: %s", p, strerror(errno));
	assert_int_equal(write(fd, data, strlen(data)), (ssize_t)strlen(data));
	assert_int_equal(close(fd), 0);
}

static void
mkd(const struct fixture *f, const char *rel, mode_t mode)
{
	char p[PATH_MAX];

	path_of(p, sizeof(p), f, rel);
	if (mkdir(p, mode) == -1)
		fail_msg("mkdir %s: %s", p, strerror(errno));
	assert_int_equal(chmod(p, mode), 0);
}

static void
lnk(const struct fixture *f, const char *target, const char *rel)
{
	char p[PATH_MAX];

	path_of(p, sizeof(p), f, rel);
	assert_int_equal(symlink(target, p), 0);
}

static int
setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/agrippa-test-rm-XXXXXX");
	if (mkdtemp(f->dir) == NULL) {
		free(f);
		return -1;
	}
	chmod(f->dir, 0755);
	snprintf(f->tree, sizeof(f->tree), "%s/tree", f->dir);
	snprintf(f->outside, sizeof(f->outside), "%s/outside", f->dir);
	mkd(f, "tree", 0755);
	mkd(f, "outside", 0755);
	put(f, "outside/keep", "KEEP\n");
	mkd(f, "outside/sub", 0755);
	put(f, "outside/sub/keep2", "KEEP2\n");
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[256];

	/* the tree may still hold what a failed test left, mode 000 included */
	snprintf(cmd, sizeof(cmd), "chmod -R u+rwx %s 2>/dev/null; rm -rf %s", f->dir, f->dir);
	if (system(cmd) != 0)
		return -1;
	free(f);
	return 0;
}

/* A chain of n directories "d" below T/rel, by descriptor (its path is far
 * longer than PATH_MAX), with a file at the bottom. */
static void
deep_chain(const struct fixture *f, const char *rel, int n)
{
	char p[PATH_MAX];
	int fd, next, i;

	path_of(p, sizeof(p), f, rel);
	assert_true((fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0);
	for (i = 0; i < n; i++) {
		assert_int_equal(mkdirat(fd, "d", 0755), 0);
		assert_true((next = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0);
		close(fd);
		fd = next;
	}
	assert_true((next = openat(fd, "bottom", O_WRONLY | O_CREAT | O_CLOEXEC, 0644)) >= 0);
	close(next);
	close(fd);
}

/* In the child, as root: become OWNER, keeping CAP_CHOWN alone when
 * chown_cap (as the supervisor starts the chowner). */
static int
become_owner(int chown_cap)
{
	cap_value_t c = CAP_CHOWN;
	cap_t caps;

	if (chown_cap && prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) == -1)
		return -1;
	if (setgroups(0, NULL) == -1 || setresgid(OWNER, OWNER, OWNER) ||
	    setresuid(OWNER, OWNER, OWNER))
		return -1;
	if (!chown_cap)
		return 0;
	if ((caps = cap_init()) == NULL || cap_set_flag(caps, CAP_PERMITTED, 1, &c, CAP_SET) ||
	    cap_set_flag(caps, CAP_EFFECTIVE, 1, &c, CAP_SET) || cap_set_proc(caps))
		return -1;
	cap_free(caps);
	return 0;
}

/* The list the chowner writes (walk_as), -1 for none, and its commit. */
static int walk_list = -1;
#define LIST_BASE "0123456789abcdef0123456789abcdef01234567"

/* Run remover_empty (or, chown, chowner_give to TAKER) on T/tree in a
 * child, as OWNER when we are root (the tree and the outside given to
 * OWNER first), with FEW_FDS descriptors. */
static struct result
walk_as(const struct fixture *f, int give, int chown)
{
	struct rlimit nofile = {FEW_FDS, FEW_FDS};
	struct result r;
	char cmd[256];
	int p[2], fd, status;
	pid_t pid;

	memset(&r, 0, sizeof(r));
	if (give && geteuid() == 0) {
		snprintf(cmd, sizeof(cmd), "chown -R -h %d:%d %s/tree %s/outside", OWNER, OWNER,
		         f->dir, f->dir);
		assert_int_equal(system(cmd), 0);
	}
	assert_int_equal(pipe(p), 0);
	assert_true((pid = fork()) >= 0);
	if (pid == 0) {
		close(p[0]);
		if ((geteuid() == 0 && become_owner(chown) == -1) ||
		    setrlimit(RLIMIT_NOFILE, &nofile) == -1 ||
		    (fd = open(f->tree, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) == -1)
			_exit(3);
		if (chown)
			r.rv = chowner_give(fd, TAKER, TAKER, walk_list, walk_list != -1 ? LIST_BASE : NULL,
			                    &r.count, r.err, sizeof(r.err));
		else
			r.rv = remover_empty(fd, &r.count, r.err, sizeof(r.err));
		_exit(write(p[1], &r, sizeof(r)) == (ssize_t)sizeof(r) ? 0 : 4);
	}
	close(p[1]);
	assert_int_equal(read(p[0], &r, sizeof(r)), (ssize_t)sizeof(r));
	close(p[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	return r;
}

static struct result
remove_as(const struct fixture *f, int give)
{
	return walk_as(f, give, 0);
}

static struct result
remove_tree_as_owner(const struct fixture *f)
{
	return remove_as(f, 1);
}

/* Entries of T/rel but . and .. */
static int
entries(const struct fixture *f, const char *rel)
{
	char p[PATH_MAX];
	struct dirent *de;
	DIR *d;
	int n = 0;

	path_of(p, sizeof(p), f, rel);
	assert_non_null(d = opendir(p));
	while ((de = readdir(d)) != NULL)
		n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
	closedir(d);
	return n;
}

static void
outside_intact(const struct fixture *f)
{
	char p[PATH_MAX], buf[16];
	ssize_t n;
	int fd;

	path_of(p, sizeof(p), f, "outside/keep");
	assert_true((fd = open(p, O_RDONLY | O_CLOEXEC)) >= 0);
	n = read(fd, buf, sizeof(buf));
	close(fd);
	assert_int_equal(n, 5);
	assert_memory_equal(buf, "KEEP\n", 5);
	path_of(p, sizeof(p), f, "outside/sub/keep2");
	assert_int_equal(access(p, F_OK), 0);
	assert_int_equal(entries(f, "outside"), 2);
	assert_int_equal(access("/etc/passwd", F_OK), 0);
}

/* ---- tests ------------------------------------------------------------------- */

static void
test_plain(void **state)
{
	struct fixture *f = *state;
	struct result r;

	mkd(f, "tree/a", 0755);
	mkd(f, "tree/a/b", 0755);
	put(f, "tree/a/b/c", "c");
	put(f, "tree/top", "t");
	r = remove_tree_as_owner(f);
	assert_int_equal(r.rv, 0);
	assert_int_equal(r.count, 4);
	assert_int_equal(entries(f, ""), 2); /* tree itself stays, empty */
	assert_int_equal(entries(f, "tree"), 0);
}

static void
test_links_out(void **state)
{
	struct fixture *f = *state;
	char p[PATH_MAX], q[PATH_MAX];
	struct result r;

	lnk(f, f->outside, "tree/todir");
	lnk(f, "../outside/keep", "tree/tofile");
	lnk(f, "/etc", "tree/etc");
	lnk(f, "/proc/self/cwd", "tree/magic");
	lnk(f, "nowhere", "tree/dangling");
	mkd(f, "tree/inner", 0755);
	lnk(f, "../../outside/sub", "tree/inner/up");
	path_of(p, sizeof(p), f, "outside/keep");
	path_of(q, sizeof(q), f, "tree/hard");
	assert_int_equal(link(p, q), 0);
	r = remove_tree_as_owner(f);
	assert_int_equal(r.rv, 0);
	assert_int_equal(r.count, 8);
	assert_int_equal(entries(f, "tree"), 0);
	outside_intact(f);
}

static void
test_special_files(void **state)
{
	struct fixture *f = *state;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char p[PATH_MAX];
	struct result r;
	int s;

	path_of(p, sizeof(p), f, "tree/fifo");
	assert_int_equal(mkfifo(p, 0600), 0);
	path_of(p, sizeof(p), f, "tree/sock");
	assert_int_equal(fmt_ok(sa.sun_path, sizeof(sa.sun_path), "%s", p), 0);
	assert_true((s = socket(AF_UNIX, SOCK_STREAM, 0)) >= 0);
	assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(s);
	put(f, "tree/line\nbreak", "x"); /* a name the error line must not carry raw */
	r = remove_tree_as_owner(f);
	assert_int_equal(r.rv, 0);
	assert_int_equal(r.count, 3);
	assert_int_equal(entries(f, "tree"), 0);
}

/* Directories the owner closed to itself: mode 000 (with content), 0500
 * (no write), 0100 (search only), and the tree itself 0500. */
static void
test_unreadable(void **state)
{
	struct fixture *f = *state;
	char p[PATH_MAX];
	struct result r;

	mkd(f, "tree/closed", 0755);
	mkd(f, "tree/closed/inner", 0755);
	put(f, "tree/closed/inner/f", "f");
	put(f, "tree/closed/g", "g");
	path_of(p, sizeof(p), f, "tree/closed/inner");
	assert_int_equal(chmod(p, 0), 0);
	path_of(p, sizeof(p), f, "tree/closed");
	assert_int_equal(chmod(p, 0), 0);
	mkd(f, "tree/ro", 0755);
	put(f, "tree/ro/h", "h");
	path_of(p, sizeof(p), f, "tree/ro");
	assert_int_equal(chmod(p, 0500), 0);
	mkd(f, "tree/xonly", 0755);
	put(f, "tree/xonly/i", "i");
	path_of(p, sizeof(p), f, "tree/xonly");
	assert_int_equal(chmod(p, 0100), 0);
	assert_int_equal(chmod(f->tree, 0500), 0);
	r = remove_tree_as_owner(f);
	assert_int_equal(r.rv, 0);
	assert_int_equal(r.count, 8);
	assert_int_equal(entries(f, "tree"), 0);
}

/* A sticky directory, world-writable, with files in it (and one more
 * sticky directory in it). */
static void
test_sticky(void **state)
{
	struct fixture *f = *state;
	struct result r;

	mkd(f, "tree/tmp", 01777);
	put(f, "tree/tmp/a", "a");
	mkd(f, "tree/tmp/more", 01777);
	put(f, "tree/tmp/more/b", "b");
	r = remove_tree_as_owner(f);
	assert_int_equal(r.rv, 0);
	assert_int_equal(r.count, 4);
	assert_int_equal(entries(f, "tree"), 0);
}

/* DEEP levels, removed with FEW_FDS descriptors; links out at the bottom;
 * names the walk uses for what it moves up are there already. */
static void
test_deep(void **state)
{
	struct fixture *f = *state;
	struct result r;
	int fd, next, i;

	mkd(f, "tree/.agrippa-rm-1", 0755);
	put(f, "tree/.agrippa-rm-2", "taken");
	deep_chain(f, "tree", DEEP);
	/* a link out at depth 100, in a mode-000 directory at depth 200 */
	assert_true((fd = open(f->tree, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0);
	for (i = 0; i < 200; i++) {
		assert_true((next = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0);
		close(fd);
		fd = next;
		if (i == 99)
			assert_int_equal(symlinkat(f->outside, fd, "out"), 0);
	}
	assert_int_equal(mkdirat(fd, "shut", 0755), 0);
	assert_int_equal(fchmodat(fd, "shut", 0, 0), 0);
	close(fd);
	r = remove_tree_as_owner(f);
	assert_int_equal(r.rv, 0);
	assert_int_equal(r.count, DEEP + 1 + 2 + 2);
	assert_int_equal(entries(f, "tree"), 0);
	outside_intact(f);
}

/* A mount point in the tree (root only): not crossed, what it holds stays,
 * the rest goes, and the removal fails saying so. */
static void
test_mount_point(void **state)
{
	struct fixture *f = *state;
	char p[PATH_MAX];
	struct result r;

	if (geteuid() != 0)
		skip();
	mkd(f, "tree/mnt", 0755);
	put(f, "tree/other", "o");
	path_of(p, sizeof(p), f, "tree/mnt");
	if (mount("tmpfs", p, "tmpfs", 0, "size=64k") == -1)
		skip(); /* no mount here: nothing to test */
	put(f, "tree/mnt/inside", "i");
	r = remove_tree_as_owner(f);
	path_of(p, sizeof(p), f, "tree/mnt/inside");
	assert_int_equal(access(p, F_OK), 0);
	path_of(p, sizeof(p), f, "tree/mnt");
	assert_int_equal(umount(p), 0);
	assert_int_equal(r.rv, -1);
	assert_non_null(strstr(r.err, "mnt: a mount point, not crossed"));
	assert_int_equal(r.count, 1);
	assert_int_equal(entries(f, "tree"), 1);
}

/* A file the owner may not remove (in a directory of root's): the removal
 * fails, naming it on one printable line, and removes the rest. */
static void
test_failure_line(void **state)
{
	struct fixture *f = *state;
	char cmd[256];
	struct result r;

	if (geteuid() != 0)
		skip(); /* needs a directory of another owner */
	put(f, "tree/other", "o");
	snprintf(cmd, sizeof(cmd), "chown -R -h %d:%d %s/tree %s/outside", OWNER, OWNER, f->dir,
	         f->dir);
	assert_int_equal(system(cmd), 0);
	mkd(f, "tree/roots", 0755);
	put(f, "tree/roots/bad\nname", "x");
	r = remove_as(f, 0);
	assert_int_equal(r.rv, -1);
	assert_null(strchr(r.err, '\n'));
	assert_non_null(strstr(r.err, "bad?name: unlink: Permission denied"));
	assert_int_equal(r.count, 1);
	assert_int_equal(entries(f, "tree"), 1);
	assert_int_equal(entries(f, "tree/roots"), 1);
}

/* The owner of T/rel (not followed). */
static uid_t
owner_of(const struct fixture *f, const char *rel)
{
	char p[PATH_MAX];
	struct stat st;

	path_of(p, sizeof(p), f, rel);
	assert_int_equal(lstat(p, &st), 0);
	return st.st_uid;
}

/* The chowner gives every entry, a directory of mode 0700 and a chain of
 * DEEP_GIT directories (more than it holds open) included, and a link is given itself: what it points to
 * (outside the tree, or /etc/passwd) keeps its owner. */
static void
test_chown_tree(void **state)
{
	struct fixture *f = *state;
	struct result r;
	struct stat st;

	if (geteuid() != 0)
		skip(); /* giving to another user needs CAP_CHOWN */
	mkd(f, "tree/a", 0755);
	mkd(f, "tree/a/private", 0700);
	put(f, "tree/a/private/f", "f");
	lnk(f, "../outside/keep", "tree/tofile");
	lnk(f, f->outside, "tree/todir");
	lnk(f, "/etc/passwd", "tree/a/passwd");
	deep_chain(f, "tree", DEEP_GIT);
	r = walk_as(f, 1, 1);
	if (r.rv != 0)
		fail_msg("%s", r.err);
	/* a, private, f, 3 links, DEEP directories and their bottom file, and
	 * the tree itself */
	assert_int_equal(r.count, 6 + DEEP_GIT + 1 + 1);
	assert_int_equal(owner_of(f, "tree"), TAKER);
	assert_int_equal(owner_of(f, "tree/a/private/f"), TAKER);
	assert_int_equal(owner_of(f, "tree/a/private"), TAKER);
	assert_int_equal(owner_of(f, "tree/tofile"), TAKER);
	assert_int_equal(owner_of(f, "tree/d/d/d"), TAKER);
	assert_int_equal(owner_of(f, "outside/keep"), OWNER);
	assert_int_equal(owner_of(f, "outside"), OWNER);
	assert_int_equal(stat("/etc/passwd", &st), 0);
	assert_int_equal(st.st_uid, 0);
	outside_intact(f);
}

/* An entry that is not the owner's stops the chowner, named on one
 * printable line: CAP_CHOWN reaches nothing it was not given. */
static void
test_chown_not_ours(void **state)
{
	struct fixture *f = *state;
	char p[PATH_MAX], cmd[256];
	struct result r;

	if (geteuid() != 0)
		skip();
	mkd(f, "tree/sub", 0755);
	put(f, "tree/sub/theirs\nx", "x");
	snprintf(cmd, sizeof(cmd), "chown -R -h %d:%d %s/tree %s/outside", OWNER, OWNER, f->dir,
	         f->dir);
	assert_int_equal(system(cmd), 0);
	path_of(p, sizeof(p), f, "tree/sub/theirs\nx");
	assert_int_equal(lchown(p, 0, 0), 0);
	r = walk_as(f, 0, 1);
	assert_int_equal(r.rv, -1);
	assert_null(strchr(r.err, '\n'));
	assert_non_null(strstr(r.err, "theirs?x: not the service user's"));
	assert_int_equal(owner_of(f, "tree/sub/theirs\nx"), 0);
}

/* T/list opened as the supervisor opens the chowner's list. */
static int
open_list(const struct fixture *f)
{
	char p[PATH_MAX];
	int fd;

	path_of(p, sizeof(p), f, "list");
	assert_true((fd = open(p, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) >= 0);
	return fd;
}

/* With a list: every file and link given is listed once, as it is after
 * (the new owner, its inode and times to the nanosecond), under its path
 * from the top, odd bytes and all; directories are not; the end counts
 * them.  Read back by the git helper's reader. */
static void
test_chown_list(void **state)
{
	static const char *const files[] = {"tree/a/f", "tree/a/private/g", "tree/odd\nname x",
	                                    "tree/tofile", "tree/a/passwd"};
	struct fixture *f = *state;
	struct gh_stat_ent *e;
	struct gh_stat *l;
	struct result r;
	struct stat st;
	char p[PATH_MAX], err[256], *buf;
	size_t i, n;
	ssize_t got;

	if (geteuid() != 0)
		skip();
	mkd(f, "tree/a", 0755);
	mkd(f, "tree/a/private", 0700);
	put(f, "tree/a/f", "f");
	put(f, "tree/a/private/g", "gg");
	put(f, "tree/odd\nname x", "odd");
	lnk(f, "../outside/keep", "tree/tofile");
	lnk(f, "/etc/passwd", "tree/a/passwd");
	walk_list = open_list(f);
	r = walk_as(f, 1, 1);
	if (r.rv != 0)
		fail_msg("%s", r.err);
	assert_int_equal(fstat(walk_list, &st), 0);
	n = (size_t)st.st_size;
	assert_non_null(buf = malloc(n + 1));
	assert_int_equal(got = pread(walk_list, buf, n, 0), (ssize_t)n);
	close(walk_list);
	walk_list = -1;
	l = gh_stat_parse(buf, n, LIST_BASE, err, sizeof(err));
	if (l == NULL)
		fail_msg("the list: %s", err);
	assert_int_equal(l->n, sizeof(files) / sizeof(files[0]));
	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		path_of(p, sizeof(p), f, files[i]);
		assert_int_equal(lstat(p, &st), 0);
		if ((e = gh_stat_find(l, files[i] + strlen("tree/"))) == NULL)
			fail_msg("%s is not listed", files[i]);
		assert_int_equal(e->uid, TAKER);
		assert_int_equal(e->mode, st.st_mode);
		assert_int_equal(e->ino, st.st_ino);
		assert_int_equal(e->size, st.st_size);
		assert_true(e->cs == st.st_ctim.tv_sec && e->cns == st.st_ctim.tv_nsec);
		assert_true(e->ms == st.st_mtim.tv_sec && e->mns == st.st_mtim.tv_nsec);
	}
	assert_null(gh_stat_find(l, "a"));
	assert_null(gh_stat_find(l, "a/private"));
	/* another commit's list is none */
	gh_stat_free(l);
	assert_null(gh_stat_parse(buf, n, "1123456789abcdef0123456789abcdef01234567", err,
	                          sizeof(err)));
	free(buf);
}

/* A chowner stopped half-way leaves no list: an empty file. */
static void
test_chown_list_cut(void **state)
{
	struct fixture *f = *state;
	char p[PATH_MAX], cmd[256];
	struct result r;
	struct stat st;

	if (geteuid() != 0)
		skip();
	mkd(f, "tree/sub", 0755);
	put(f, "tree/a", "a");
	put(f, "tree/sub/theirs", "x");
	snprintf(cmd, sizeof(cmd), "chown -R -h %d:%d %s/tree %s/outside", OWNER, OWNER, f->dir,
	         f->dir);
	assert_int_equal(system(cmd), 0);
	path_of(p, sizeof(p), f, "tree/sub/theirs");
	assert_int_equal(lchown(p, 0, 0), 0);
	walk_list = open_list(f);
	r = walk_as(f, 0, 1);
	assert_int_equal(r.rv, -1);
	assert_int_equal(fstat(walk_list, &st), 0);
	assert_int_equal(st.st_size, 0);
	close(walk_list);
	walk_list = -1;
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    T(test_plain),  T(test_links_out), T(test_special_files), T(test_unreadable),
	    T(test_sticky), T(test_deep),      T(test_mount_point),   T(test_failure_line),
	    T(test_chown_tree), T(test_chown_not_ours), T(test_chown_list), T(test_chown_list_cut),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
