/*
 * The master key file: loaded with every check an attacker on the same host
 * would try to slip past (symlink, FIFO, foreign owner, loose mode, wrong
 * size), or created atomically so that a crash or a concurrent start never
 * leaves a partial key and never replaces one that exists: the key encrypts
 * every secret at rest, so losing it loses them.
 */
#include "supervisor/key.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

_Static_assert(KEY_LEN == crypto_kdf_KEYBYTES, "the master key is a crypto_kdf key");
_Static_assert(KEY_CTX_LEN == crypto_kdf_CONTEXTBYTES, "crypto_kdf context length");
_Static_assert(KEY_SUBKEY_MIN == crypto_kdf_BYTES_MIN, "crypto_kdf minimum subkey");
_Static_assert(KEY_FP_LEN >= crypto_generichash_BYTES_MIN && KEY_FP_LEN <= crypto_generichash_BYTES_MAX,
    "fingerprint length");
_Static_assert(KEY_LEN >= crypto_generichash_KEYBYTES_MIN && KEY_LEN <= crypto_generichash_KEYBYTES_MAX,
    "the key keys the fingerprint");
_Static_assert(KEY_SUBKEY_MAX == crypto_kdf_BYTES_MAX, "crypto_kdf maximum subkey");

#define KEY_TRIES 3 /* load/create rounds against concurrent creators */

enum key_status { KEY_OK, KEY_ABSENT, KEY_ERROR, KEY_RACED };

/* "path: reason" into errbuf. */
static void __attribute__((format(printf, 4, 5)))
key_err(char *errbuf, size_t errsz, const char *path, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (errbuf != NULL && errsz > 0)
		snprintf(errbuf, errsz, "%s: %s", path, msg);
}

/* Read exactly len bytes, then insist on end of file (it may have changed
 * since fstat).  Returns 0, -1 on a read error (errno set), -2 when the
 * file does not hold exactly len bytes. */
static int
key_read_exact(int fd, unsigned char *buf, size_t len)
{
	unsigned char extra;
	size_t got = 0;
	ssize_t n;

	while (got < len) {
		n = read(fd, buf + got, len - got);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			return n == 0 ? -2 : -1;
		got += (size_t)n;
	}
	while ((n = read(fd, &extra, 1)) == -1 && errno == EINTR)
		;
	return n == 0 ? 0 : n == -1 ? -1 : -2;
}

/* Refuse anything but a regular file of ours, private, of min..max bytes. */
static int
key_check(const struct stat *st, const char *path, off_t min, off_t max, char *errbuf,
    size_t errsz)
{
	if (!S_ISREG(st->st_mode)) {
		key_err(errbuf, errsz, path, "not a regular file");
	} else if (st->st_uid != geteuid()) {
		key_err(errbuf, errsz, path, "owned by uid %lu, not by uid %lu",
		    (unsigned long)st->st_uid, (unsigned long)geteuid());
	} else if (st->st_mode & (S_IRWXG | S_IRWXO)) {
		key_err(errbuf, errsz, path,
		    "mode %04o gives access to group or others (chmod 600 if it was never exposed, "
		    "otherwise rotate the key)",
		    (unsigned)(st->st_mode & 07777));
	} else if ((st->st_size < min || st->st_size > max) && min == max) {
		key_err(errbuf, errsz, path, "%lld bytes long, a key is %lld",
		    (long long)st->st_size, (long long)min);
	} else if (st->st_size < min || st->st_size > max) {
		key_err(errbuf, errsz, path, "%lld bytes long, a key file holds %lld to %lld",
		    (long long)st->st_size, (long long)min, (long long)max);
	} else {
		return 0;
	}
	return -1;
}

/* Open path for reading without following a final symlink or blocking on a
 * FIFO.  Returns the fd, -1 after reporting an error, or -2 when absent. */
static int
key_open(const char *path, char *errbuf, size_t errsz)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	int saved = errno;

	if (fd != -1)
		return fd;
	if (saved == ENOENT)
		return -2;
	if (saved == ELOOP && lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
		key_err(errbuf, errsz, path, "is a symbolic link; refusing to follow it");
	else
		key_err(errbuf, errsz, path, "%s", strerror(saved));
	return -1;
}

/* Read the checked file open on fd into new read-only sodium memory.
 * Returns the key (caller frees with key_free) or NULL after reporting. */
static unsigned char *
key_read(int fd, const char *path, char *errbuf, size_t errsz)
{
	unsigned char *key;
	int rc;

	if ((key = sodium_malloc(KEY_LEN)) == NULL) {
		key_err(errbuf, errsz, path, "cannot allocate secure memory");
		return NULL;
	}
	if ((rc = key_read_exact(fd, key, KEY_LEN)) != 0) {
		key_err(errbuf, errsz, path, "%s",
		    rc == -1 ? strerror(errno) : "changed size while being read");
		sodium_free(key);
		return NULL;
	}
	if (sodium_mprotect_readonly(key) == -1) {
		key_err(errbuf, errsz, path, "cannot protect the key: %s", strerror(errno));
		sodium_free(key);
		return NULL;
	}
	return key;
}

int
key_file_open(const char *path, off_t min, off_t max, char *errbuf, size_t errsz)
{
	struct stat st;
	int fd;

	if ((fd = key_open(path, errbuf, errsz)) < 0)
		return fd;
	if (fstat(fd, &st) == -1)
		key_err(errbuf, errsz, path, "%s", strerror(errno));
	else if (key_check(&st, path, min, max, errbuf, errsz) == 0)
		return fd;
	close(fd);
	return -1;
}

/* Load the existing key into *out (read-only sodium memory, caller frees). */
static enum key_status
key_load(const char *path, unsigned char **out, char *errbuf, size_t errsz)
{
	int fd;

	*out = NULL;
	if ((fd = key_file_open(path, KEY_LEN, KEY_LEN, errbuf, errsz)) < 0)
		return fd == -2 ? KEY_ABSENT : KEY_ERROR;
	*out = key_read(fd, path, errbuf, errsz);
	close(fd);
	return *out != NULL ? KEY_OK : KEY_ERROR;
}

/* Make dir with mode 0700 unless it exists; its parent must exist. */
static int
key_mkdir(const char *dir, const char *path, char *errbuf, size_t errsz)
{
	if (mkdir(dir, 0700) == 0 || errno == EEXIST)
		return 0;
	key_err(errbuf, errsz, path, "cannot create directory %s: %s", dir, strerror(errno));
	return -1;
}

/* Write key into a new private file tmp in dfd and flush it to disk.
 * Returns 0, or -1 with errno set (tmp is removed again on failure). */
static int
key_write_tmp(int dfd, const char *tmp, const unsigned char *key)
{
	size_t off = 0;
	ssize_t n;
	int fd, saved;

	fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd == -1)
		return -1;
	if (fchmod(fd, 0600) == -1) /* whatever the umask */
		goto fail;
	while (off < KEY_LEN) {
		if ((n = write(fd, key + off, KEY_LEN - off)) == -1 && errno == EINTR)
			continue;
		if (n == -1)
			goto fail;
		off += (size_t)n;
	}
	if (fsync(fd) == -1)
		goto fail;
	if (close(fd) == -1) {
		fd = -1;
		goto fail;
	}
	return 0;
fail:
	saved = errno;
	if (fd != -1)
		close(fd);
	unlinkat(dfd, tmp, 0);
	errno = saved;
	return -1;
}

/*
 * Give tmp the name base, never replacing an existing file: link(2), or
 * renameat2 RENAME_NOREPLACE on filesystems without hard links.  tmp is gone
 * afterwards.  Returns 0, 1 when base already exists, -1 with errno set.
 */
static int
key_publish(int dfd, const char *tmp, const char *base)
{
	int rc = linkat(dfd, tmp, dfd, base, 0), saved;

	if (rc == -1 && (errno == EPERM || errno == EOPNOTSUPP) &&
	    renameat2(dfd, tmp, dfd, base, RENAME_NOREPLACE) == 0)
		return 0;
	saved = errno;
	unlinkat(dfd, tmp, 0);
	if (rc == 0)
		return 0;
	errno = saved;
	return saved == EEXIST ? 1 : -1;
}

/* Split path into its directory (dir, dirsz) and last component (*base). */
static int
key_split(const char *path, char *dir, size_t dirsz, const char **base)
{
	const char *slash = strrchr(path, '/');
	size_t n;

	if (slash == NULL) {
		snprintf(dir, dirsz, ".");
		*base = path;
	} else {
		n = slash == path ? 1 : (size_t)(slash - path);
		if (n >= dirsz)
			return -1;
		memcpy(dir, path, n);
		dir[n] = '\0';
		*base = slash + 1;
	}
	return **base == '\0' || strcmp(*base, ".") == 0 || strcmp(*base, "..") == 0 ? -1 : 0;
}

/* Generate a key and publish it at base in dfd.  Returns KEY_OK with *out
 * set (read-only sodium memory), KEY_RACED when a file appeared first, or
 * KEY_ERROR. */
static enum key_status
key_make(int dfd, const char *base, const char *path, unsigned char **out, char *errbuf,
    size_t errsz)
{
	char tmp[32];
	unsigned char *key;
	int rc = -1;

	if ((key = sodium_malloc(KEY_LEN)) == NULL) {
		key_err(errbuf, errsz, path, "cannot allocate secure memory");
		return KEY_ERROR;
	}
	randombytes_buf(key, KEY_LEN);
	snprintf(tmp, sizeof(tmp), ".agrippa-key.%08x", (unsigned)randombytes_random());
	if (key_write_tmp(dfd, tmp, key) == -1 || (rc = key_publish(dfd, tmp, base)) == -1 ||
	    (rc == 0 && fsync(dfd) == -1)) {
		key_err(errbuf, errsz, path, "cannot create: %s", strerror(errno));
		sodium_free(key);
		return KEY_ERROR;
	}
	if (rc == 1) {
		sodium_free(key);
		return KEY_RACED;
	}
	if (sodium_mprotect_readonly(key) == -1) {
		key_err(errbuf, errsz, path, "cannot protect the key: %s", strerror(errno));
		sodium_free(key);
		return KEY_ERROR;
	}
	*out = key;
	return KEY_OK;
}

/* Create the key file at path (see key.h). */
static enum key_status
key_create(const char *path, unsigned char **out, char *errbuf, size_t errsz)
{
	char dir[PATH_MAX];
	const char *base;
	enum key_status st;
	int dfd;

	if (key_split(path, dir, sizeof(dir), &base) == -1) {
		key_err(errbuf, errsz, path, "not a file name");
		return KEY_ERROR;
	}
	if (key_mkdir(dir, path, errbuf, errsz) == -1)
		return KEY_ERROR;
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1) {
		key_err(errbuf, errsz, path, "%s: %s", dir, strerror(errno));
		return KEY_ERROR;
	}
	st = key_make(dfd, base, path, out, errbuf, errsz);
	close(dfd);
	return st;
}

unsigned char *
key_load_or_create(const char *path, int *created, char *errbuf, size_t errsz)
{
	unsigned char *key = NULL;
	enum key_status st;
	int i;

	if (created != NULL)
		*created = 0;
	if (errbuf != NULL && errsz > 0)
		errbuf[0] = '\0';
	if (sodium_init() < 0) {
		key_err(errbuf, errsz, path, "cannot initialise libsodium");
		return NULL;
	}
	for (i = 0; i < KEY_TRIES; i++) {
		if ((st = key_load(path, &key, errbuf, errsz)) != KEY_ABSENT)
			return st == KEY_OK ? key : NULL;
		if ((st = key_create(path, &key, errbuf, errsz)) != KEY_RACED) {
			if (created != NULL)
				*created = st == KEY_OK;
			return st == KEY_OK ? key : NULL;
		}
	}
	key_err(errbuf, errsz, path, "created and removed by another process, giving up");
	return NULL;
}

unsigned char *
key_load_file(const char *path, int *absent, char *errbuf, size_t errsz)
{
	unsigned char *key = NULL;
	enum key_status st;

	*absent = 0;
	if (errbuf != NULL && errsz > 0)
		errbuf[0] = '\0';
	if (sodium_init() < 0) {
		key_err(errbuf, errsz, path, "cannot initialise libsodium");
		return NULL;
	}
	if ((st = key_load(path, &key, errbuf, errsz)) == KEY_ABSENT)
		*absent = 1;
	return st == KEY_OK ? key : NULL;
}

unsigned char *
key_create_file(const char *path, char *errbuf, size_t errsz)
{
	unsigned char *key = NULL;
	enum key_status st;

	if (errbuf != NULL && errsz > 0)
		errbuf[0] = '\0';
	if (sodium_init() < 0) {
		key_err(errbuf, errsz, path, "cannot initialise libsodium");
		return NULL;
	}
	if ((st = key_create(path, &key, errbuf, errsz)) == KEY_RACED)
		key_err(errbuf, errsz, path, "exists already");
	return st == KEY_OK ? key : NULL;
}

int
key_dir_sync(const char *path)
{
	char dir[PATH_MAX];
	const char *base;
	int dfd, rc, saved;

	if (key_split(path, dir, sizeof(dir), &base) == -1) {
		errno = EINVAL;
		return -1;
	}
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return -1;
	rc = fsync(dfd);
	saved = errno;
	close(dfd);
	errno = saved;
	return rc;
}

void
key_fingerprint(const unsigned char *key, unsigned char out[KEY_FP_LEN])
{
	static const char what[] = "agrippa master key fingerprint";

	crypto_generichash(out, KEY_FP_LEN, (const unsigned char *)what, sizeof(what) - 1, key,
	    KEY_LEN);
}

void
key_free(unsigned char *key)
{
	if (key != NULL)
		sodium_free(key); /* wipes it first */
}

int
key_derive(const unsigned char *master, uint64_t subkey_id, const char ctx[KEY_CTX_LEN],
    unsigned char *out, size_t outlen)
{
	if (outlen < KEY_SUBKEY_MIN || outlen > KEY_SUBKEY_MAX)
		return -1;
	return crypto_kdf_derive_from_key(out, outlen, subkey_id, ctx, master) == 0 ? 0 : -1;
}
