/*
 * Unit tests for supervisor/key.c: the master key is created private and
 * atomically, reloaded unchanged, held read-only, and every file an
 * attacker could plant or loosen in its place is refused.
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
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "supervisor/key.h"

struct fixture {
	char dir[64];
	char path[128]; /* dir/master.key */
	char err[512];
};

static int
setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/agrippa-test-key-XXXXXX");
	if (mkdtemp(f->dir) == NULL) {
		free(f);
		return -1;
	}
	snprintf(f->path, sizeof(f->path), "%s/master.key", f->dir);
	*state = f;
	return 0;
}

static int
rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static int
teardown(void **state)
{
	struct fixture *f = *state;
	int rc = nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);

	free(f);
	return rc;
}

/* Write len bytes of data to path with mode. */
static void
write_file(const char *path, const void *data, size_t len, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	assert_int_equal(fchmod(fd, mode), 0);
	assert_int_equal(close(fd), 0);
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

/* path must be refused with reason in the message, and left as it was. */
static void
expect_refused(struct fixture *f, const char *path, const char *reason)
{
	struct stat before, after;
	int created = -1, have = lstat(path, &before) == 0;
	unsigned char *key = key_load_or_create(path, &created, f->err, sizeof(f->err));

	if (key != NULL)
		fail_msg("%s accepted, expected: %s", path, reason);
	assert_int_equal(created, 0);
	if (strncmp(f->err, path, strlen(path)) != 0 || strstr(f->err, reason) == NULL)
		fail_msg("expected \"%s: ...%s...\", got \"%s\"", path, reason, f->err);
	if (have) {
		assert_int_equal(lstat(path, &after), 0);
		assert_int_equal(after.st_ino, before.st_ino);
		assert_int_equal(after.st_size, before.st_size);
		assert_int_equal(after.st_mode, before.st_mode);
	}
}

static void
test_create(void **state)
{
	struct fixture *f = *state;
	unsigned char disk[KEY_LEN + 1];
	char sub[128], path[160];
	struct stat st;
	unsigned char *key;
	int created = -1, fd;

	/* the missing parent directory is created too, private */
	snprintf(sub, sizeof(sub), "%s/agrippad", f->dir);
	snprintf(path, sizeof(path), "%s/master.key", sub);
	key = key_load_or_create(path, &created, f->err, sizeof(f->err));
	if (key == NULL)
		fail_msg("%s", f->err);
	assert_int_equal(created, 1);
	assert_string_equal(f->err, "");

	assert_int_equal(lstat(path, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(st.st_size, KEY_LEN);
	assert_int_equal(st.st_uid, geteuid());
	assert_int_equal(stat(sub, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
	assert_int_equal(count_entries(sub), 1); /* no temporary left behind */

	/* the bytes returned are the bytes stored, and look random */
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(read(fd, disk, sizeof(disk)), KEY_LEN);
	close(fd);
	assert_memory_equal(disk, key, KEY_LEN);
	assert_false(sodium_is_zero(key, KEY_LEN));
	key_free(key);
}

static void
test_reload_same_key(void **state)
{
	struct fixture *f = *state;
	unsigned char first[KEY_LEN];
	unsigned char *key;
	int created = -1;

	key = key_load_or_create(f->path, &created, f->err, sizeof(f->err));
	assert_non_null(key);
	assert_int_equal(created, 1);
	memcpy(first, key, KEY_LEN);
	key_free(key);

	created = -1;
	key = key_load_or_create(f->path, &created, f->err, sizeof(f->err));
	if (key == NULL)
		fail_msg("%s", f->err);
	assert_int_equal(created, 0);
	assert_memory_equal(first, key, KEY_LEN);
	key_free(key);
	key_free(NULL);
}

/* The mode is 0600 whatever the umask: a umask of 0277 would give 0400. */
static void
test_create_ignores_umask(void **state)
{
	struct fixture *f = *state;
	mode_t old = umask(0277);
	unsigned char *key;
	struct stat st;
	int created;

	key = key_load_or_create(f->path, &created, f->err, sizeof(f->err));
	umask(old);
	assert_non_null(key);
	assert_int_equal(stat(f->path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	key_free(key);
}

static void
sigsegv_exit(int sig)
{
	_exit(42);
}

/* The key pages are read-only: a stray write faults instead of changing it. */
static void
test_key_memory_readonly(void **state)
{
	struct fixture *f = *state;
	struct sigaction sa;
	unsigned char *key;
	int created, status;
	pid_t pid;

	key = key_load_or_create(f->path, &created, f->err, sizeof(f->err));
	assert_non_null(key);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = sigsegv_exit;
		sigaction(SIGSEGV, &sa, NULL);
		sigaction(SIGBUS, &sa, NULL);
		((volatile unsigned char *)key)[0] ^= 1;
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 42);
	key_free(key);
}

static void
test_group_readable_refused(void **state)
{
	struct fixture *f = *state;
	unsigned char k[KEY_LEN] = {1};

	write_file(f->path, k, sizeof(k), 0640);
	expect_refused(f, f->path, "mode 0640 gives access to group or others");
	assert_int_equal(chmod(f->path, 0620), 0);
	expect_refused(f, f->path, "mode 0620 gives access to group or others");
}

static void
test_world_accessible_refused(void **state)
{
	struct fixture *f = *state;
	unsigned char k[KEY_LEN] = {1};

	write_file(f->path, k, sizeof(k), 0604);
	expect_refused(f, f->path, "mode 0604 gives access to group or others");
	assert_int_equal(chmod(f->path, 0602), 0);
	expect_refused(f, f->path, "mode 0602 gives access to group or others");
	assert_int_equal(chmod(f->path, 0644), 0);
	expect_refused(f, f->path, "mode 0644 gives access to group or others");
}

static void
test_symlink_refused(void **state)
{
	struct fixture *f = *state;
	unsigned char k[KEY_LEN] = {1};
	char real[160], dangling[160];
	struct stat st;

	/* a link to a perfectly good key */
	snprintf(real, sizeof(real), "%s/real.key", f->dir);
	write_file(real, k, sizeof(k), 0600);
	assert_int_equal(symlink(real, f->path), 0);
	expect_refused(f, f->path, "is a symbolic link");

	/* a dangling link must not make the key be created at its target */
	snprintf(dangling, sizeof(dangling), "%s/dangling.key", f->dir);
	snprintf(real, sizeof(real), "%s/target.key", f->dir);
	assert_int_equal(symlink(real, dangling), 0);
	expect_refused(f, dangling, "is a symbolic link");
	assert_int_equal(lstat(real, &st), -1);
	assert_int_equal(errno, ENOENT);
}

static void
test_wrong_size_refused(void **state)
{
	struct fixture *f = *state;
	unsigned char k[KEY_LEN + 1] = {1};

	write_file(f->path, k, KEY_LEN - 1, 0600);
	expect_refused(f, f->path, "31 bytes long, a key is 32");
	write_file(f->path, k, KEY_LEN + 1, 0600);
	expect_refused(f, f->path, "33 bytes long, a key is 32");
	/* an empty file is refused, not silently refilled */
	write_file(f->path, k, 0, 0600);
	expect_refused(f, f->path, "0 bytes long, a key is 32");
}

static void
test_not_regular_refused(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(mkdir(f->path, 0700), 0);
	expect_refused(f, f->path, "not a regular file");
	assert_int_equal(rmdir(f->path), 0);
	/* a FIFO is refused without blocking in open */
	assert_int_equal(mkfifo(f->path, 0600), 0);
	expect_refused(f, f->path, "not a regular file");
}

static void
test_foreign_owner_refused(void **state)
{
	struct fixture *f = *state;
	unsigned char k[KEY_LEN] = {1};

	if (geteuid() != 0)
		skip(); /* only root can give a file away */
	write_file(f->path, k, sizeof(k), 0600);
	assert_int_equal(chown(f->path, 65534, 65534), 0);
	expect_refused(f, f->path, "owned by uid 65534, not by uid 0");
}

static void
test_missing_grandparent(void **state)
{
	struct fixture *f = *state;
	char path[160];

	snprintf(path, sizeof(path), "%s/no/such/master.key", f->dir);
	expect_refused(f, path, "cannot create directory");
	assert_int_equal(count_entries(f->dir), 0);
}

/*
 * Several processes starting at once on a fresh path: exactly one creates
 * the key, and every one of them ends up with the same bytes.
 */
static void
test_concurrent_create(void **state)
{
	enum { N = 8 };
	struct fixture *f = *state;
	unsigned char got[N][KEY_LEN + 1];
	int fds[N][2], i, status, ncreated = 0;
	pid_t pids[N];

	for (i = 0; i < N; i++) {
		assert_int_equal(pipe(fds[i]), 0);
		pids[i] = fork();
		assert_true(pids[i] >= 0);
		if (pids[i] == 0) {
			unsigned char out[KEY_LEN + 1];
			unsigned char *key;
			char err[512];
			int created;

			key = key_load_or_create(f->path, &created, err, sizeof(err));
			if (key == NULL)
				_exit(1);
			out[0] = (unsigned char)created;
			memcpy(out + 1, key, KEY_LEN);
			_exit(write(fds[i][1], out, sizeof(out)) == (ssize_t)sizeof(out) ? 0 : 2);
		}
		close(fds[i][1]);
	}
	for (i = 0; i < N; i++) {
		assert_int_equal(read(fds[i][0], got[i], sizeof(got[i])), (ssize_t)sizeof(got[i]));
		close(fds[i][0]);
		assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		ncreated += got[i][0];
		assert_memory_equal(got[i] + 1, got[0] + 1, KEY_LEN);
	}
	assert_int_equal(ncreated, 1);
	assert_int_equal(count_entries(f->dir), 1);
}

static void
test_derive(void **state)
{
	unsigned char master[KEY_LEN], a[32], b[32], c[32], d[32], e[64];
	size_t i;

	for (i = 0; i < KEY_LEN; i++)
		master[i] = (unsigned char)i;
	assert_int_equal(key_derive(master, 1, "reposecr", a, sizeof(a)), 0);
	assert_int_equal(key_derive(master, 1, "reposecr", b, sizeof(b)), 0);
	assert_memory_equal(a, b, sizeof(a)); /* deterministic */
	assert_int_equal(key_derive(master, 2, "reposecr", c, sizeof(c)), 0);
	assert_memory_not_equal(a, c, sizeof(a)); /* another id */
	assert_int_equal(key_derive(master, 1, "mcpsecrt", d, sizeof(d)), 0);
	assert_memory_not_equal(a, d, sizeof(a)); /* another purpose */
	assert_memory_not_equal(c, d, sizeof(c));
	assert_memory_not_equal(a, master, sizeof(a)); /* not the master itself */
	master[0] ^= 1;
	assert_int_equal(key_derive(master, 1, "reposecr", b, sizeof(b)), 0);
	assert_memory_not_equal(a, b, sizeof(a)); /* another master */

	assert_int_equal(key_derive(master, 1, "reposecr", e, KEY_SUBKEY_MIN), 0);
	assert_int_equal(key_derive(master, 1, "reposecr", e, KEY_SUBKEY_MAX), 0);
	assert_int_equal(key_derive(master, 1, "reposecr", e, KEY_SUBKEY_MIN - 1), -1);
	assert_int_equal(key_derive(master, 1, "reposecr", e, KEY_SUBKEY_MAX + 1), -1);
}

/* Subkeys of a loaded key work straight from its read-only memory. */
static void
test_derive_from_loaded(void **state)
{
	struct fixture *f = *state;
	unsigned char a[32], b[32];
	unsigned char *key;
	int created;

	key = key_load_or_create(f->path, &created, f->err, sizeof(f->err));
	assert_non_null(key);
	assert_int_equal(key_derive(key, 7, "apitoken", a, sizeof(a)), 0);
	key_free(key);
	key = key_load_or_create(f->path, &created, f->err, sizeof(f->err));
	assert_non_null(key);
	assert_int_equal(key_derive(key, 7, "apitoken", b, sizeof(b)), 0);
	assert_memory_equal(a, b, sizeof(a));
	key_free(key);
}

/* The fingerprint: the same for the same key, another for another key, a
 * keyed BLAKE2b of a fixed message (what the database records), never the
 * key itself. */
static void
test_fingerprint(void **state)
{
	static const char msg[] = "agrippa master key fingerprint";
	unsigned char k1[KEY_LEN], k2[KEY_LEN], a[KEY_FP_LEN], b[KEY_FP_LEN], want[KEY_FP_LEN];

	randombytes_buf(k1, sizeof(k1));
	memcpy(k2, k1, sizeof(k2));
	k2[31] ^= 1;
	key_fingerprint(k1, a);
	key_fingerprint(k1, b);
	assert_memory_equal(a, b, KEY_FP_LEN);
	key_fingerprint(k2, b);
	assert_memory_not_equal(a, b, KEY_FP_LEN);
	crypto_generichash(want, sizeof(want), (const unsigned char *)msg, sizeof(msg) - 1, k1,
	    sizeof(k1));
	assert_memory_equal(a, want, KEY_FP_LEN);
	assert_memory_not_equal(a, k1, KEY_LEN);
}

/* key_create_file makes a new private key and never replaces a file;
 * key_load_file loads it back, says "absent" for a missing file and
 * never creates one. */
static void
test_create_and_load_file(void **state)
{
	struct fixture *f = *state;
	unsigned char *a, *b;
	struct stat st;
	int absent = -1;

	assert_null(key_load_file(f->path, &absent, f->err, sizeof(f->err)));
	assert_int_equal(absent, 1);
	assert_int_equal(lstat(f->path, &st), -1);
	a = key_create_file(f->path, f->err, sizeof(f->err));
	assert_non_null(a);
	assert_int_equal(stat(f->path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(st.st_size, KEY_LEN);
	assert_null(key_create_file(f->path, f->err, sizeof(f->err)));
	assert_non_null(strstr(f->err, "exists already"));
	b = key_load_file(f->path, &absent, f->err, sizeof(f->err));
	assert_non_null(b);
	assert_int_equal(absent, 0);
	assert_memory_equal(a, b, KEY_LEN);
	assert_int_equal(key_dir_sync(f->path), 0);
	key_free(a);
	key_free(b);
	/* the checks of key_load_or_create apply */
	assert_int_equal(chmod(f->path, 0640), 0);
	assert_null(key_load_file(f->path, &absent, f->err, sizeof(f->err)));
	assert_int_equal(absent, 0);
	assert_non_null(strstr(f->err, "group or others"));
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    T(test_create),
	    T(test_reload_same_key),
	    T(test_create_ignores_umask),
	    T(test_key_memory_readonly),
	    T(test_group_readable_refused),
	    T(test_world_accessible_refused),
	    T(test_symlink_refused),
	    T(test_wrong_size_refused),
	    T(test_not_regular_refused),
	    T(test_foreign_owner_refused),
	    T(test_missing_grandparent),
	    T(test_concurrent_create),
	    cmocka_unit_test(test_derive),
	    T(test_derive_from_loaded),
	    cmocka_unit_test(test_fingerprint),
	    T(test_create_and_load_file),
	};

	return cmocka_run_group_tests_name("key", tests, NULL, NULL);
}
