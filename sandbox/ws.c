/*
 * ws - the sandbox's file tools over one workspace (contract in ws.h).
 *
 * How the promises are kept:
 *
 *  - Every lookup from the root goes through openat2(2) with RESOLVE_BENEATH
 *    | RESOLVE_NO_MAGICLINKS, so "..", absolute symlinks, symlinks that climb
 *    out and /proc magic links fail in the kernel (EXDEV / ELOOP), whatever
 *    races happen in userland.  Caller paths are only normalised here: a
 *    leading "/workspace" component is stripped, any other absolute path is
 *    refused (EXDEV), "." and empty components are dropped, ".." is left for
 *    the kernel.
 *  - A file is opened for I/O only after an O_PATH look at it said "regular
 *    file", and with O_NONBLOCK, so a FIFO or device never blocks or gets
 *    opened for reading or writing; the descriptor itself is then checked
 *    again (regular, and for writes st_nlink == 1), which is the check that
 *    counts.  Writes never use O_TRUNC: a refused file is never modified.
 *  - Read-only workspaces resolve writes beneath a descriptor of
 *    .agrippa/artifacts (itself opened with no symlink on the way) and with
 *    RESOLVE_NO_SYMLINKS, so neither ".." nor a symlink in it reaches the
 *    rest of the workspace.
 *  - The glob/grep walk opens each directory by name with O_NOFOLLOW from
 *    its parent's descriptor: it never follows a symlink, never sees "..".
 *
 * Error codes: EXDEV escapes (absolute path, "..", symlink out); ELOOP magic
 * link, symlink loop, or any symlink where none is allowed; EISDIR a
 * directory where a file is needed; EINVAL other non-regular files, bad
 * arguments, bad regex, edit count mismatch; EMLINK a file with other hard
 * links; EROFS a write outside .agrippa/artifacts of a read-only workspace;
 * EFBIG over file_max; ENODATA edit's old text not found; ENAMETOOLONG.
 *
 * Glob's dotfile rule is the shell's: "*", "?" and "**" never match a name
 * that starts with "." unless the pattern component itself starts with "."
 * (".*", ".github"); the walk also never enters ".git".
 */
#include "sandbox/ws.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/util.h"

#define WS_MOUNT "/workspace" /* the root as the sandbox's processes see it */
#define WS_DEPTH_MAX 64       /* walk depth below the base */
#define WS_EAGAIN_TRIES 8     /* openat2 returns EAGAIN on concurrent renames */
#define WS_BINARY_PROBE 8192  /* a NUL in this many first bytes: binary */
#define WS_BENEATH (RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)
#define WS_RO_REASON "read-only workspace: only " WS_ARTIFACT_DIR "/ is writable"

#define WS_O_CREATE 0x1 /* ws_open_reg: create a missing file */
#define WS_O_SINGLE 0x2 /* ws_open_reg: refuse a file with other hard links */

/* A caller's path, normalised: relative to the root, "." for the root. */
struct ws_rel {
	char p[WS_PATH_MAX + 1];
	int dir; /* it can only name a directory: "", trailing "/", last "." or ".." */
};

/* Where a path is resolved: rel beneath dfd with the given RESOLVE_ flags. */
struct ws_at {
	int dfd;
	int owned; /* dfd is ours to close (the artifact directory) */
	int ro;    /* read-only workspace: resolved beneath .agrippa/artifacts */
	const char *rel;
	uint64_t resolve;
};

/* Sorted names of one directory (ws_names_read), freed by ws_names_free. */
struct ws_names {
	char **v;
	size_t n, alloc;
	int more; /* stopped at the cap */
};

/* A walk below a base directory, for glob and grep. */
struct ws_walk {
	/* Called for each entry; sets *descend to enter a directory. 0 or errno. */
	int (*visit)(struct ws_walk *w, int dfd, const char *name, const struct stat *st,
	             int *descend);
	void *arg;
	char path[WS_PATH_MAX + 1]; /* the entry, relative to the root */
	size_t plen;
	size_t depth;   /* of the entry being visited: 1 for the base's children */
	size_t visited; /* names read so far */
	int truncated;  /* the walk limit, depth limit or path length cut it short */
	int stop;       /* a visitor asked to stop */
};

/* ---- errors ------------------------------------------------------------ */

static int ws_failf(char *err, size_t errsz, int e, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Write the reason into err (if any) and return e. */
static int
ws_failf(char *err, size_t errsz, int e, const char *fmt, ...)
{
	va_list ap;

	if (err != NULL && errsz > 0) {
		va_start(ap, fmt);
		vsnprintf(err, errsz, fmt, ap);
		va_end(ap);
	}
	return e;
}

/* "path: reason", the path as the caller gave it. */
static int
ws_fail(char *err, size_t errsz, int e, const char *path, const char *reason)
{
	return ws_failf(err, errsz, e, "%s: %s", *path != '\0' ? path : "\"\"", reason);
}

static void
ws_err_clear(char *err, size_t errsz)
{
	if (err != NULL && errsz > 0)
		err[0] = '\0';
}

/* The reason for an openat2 failure under the given RESOLVE_ flags. */
static const char *
ws_resolve_reason(int e, uint64_t resolve)
{
	switch (e) {
	case EXDEV:
		return "escapes the workspace";
	case ELOOP:
		if (resolve & RESOLVE_NO_SYMLINKS)
			return "a symlink is on the way (no symlinks are followed here)";
		return "escapes the workspace (a /proc magic link) or a symlink loop";
	case EAGAIN:
		return "changed during lookup (concurrent rename), try again";
	case ENOENT:
		return "no such file or directory";
	default:
		return strerror(e);
	}
}

/* Report an openat2 failure for path resolved as at says. */
static int
ws_at_fail(const char *path, const struct ws_at *at, int e, char *err, size_t errsz)
{
	if (at->ro && e == EXDEV)
		return ws_fail(err, errsz, EROFS, path, WS_RO_REASON " (the path leaves it)");
	return ws_fail(err, errsz, e, path, ws_resolve_reason(e, at->resolve));
}

static const char *
ws_notreg_reason(mode_t mode)
{
	if (S_ISDIR(mode))
		return "is a directory";
	if (S_ISFIFO(mode))
		return "is a FIFO, not a regular file";
	if (S_ISCHR(mode) || S_ISBLK(mode))
		return "is a device, not a regular file";
	if (S_ISSOCK(mode))
		return "is a socket, not a regular file";
	if (S_ISLNK(mode))
		return "is a symlink, not a regular file";
	return "is not a regular file";
}

/* ---- small helpers ----------------------------------------------------- */

/*
 * openat2 from dfd; returns a descriptor or -1 with errno set.  EAGAIN
 * (a rename raced the lookup) is retried a few times.
 */
static int
ws_openat2(int dfd, const char *path, int flags, mode_t mode, uint64_t resolve)
{
	struct open_how how = {
	    .flags = (uint64_t)(unsigned int)flags,
	    .mode = (flags & O_CREAT) ? mode : 0,
	    .resolve = resolve,
	};
	long fd = -1;
	int i;

	for (i = 0; i < WS_EAGAIN_TRIES; i++) {
		fd = syscall(SYS_openat2, dfd, path, &how, sizeof(how));
		if (fd >= 0 || errno != EAGAIN)
			break;
	}
	return (int)fd;
}

/* Close fd keeping errno (for error paths that report errno afterwards). */
static void
ws_close_keep(int fd)
{
	int e = errno;

	if (fd >= 0)
		close(fd);
	errno = e;
}

/*
 * Room for one more element of size sz in v (n used, *alloc allocated).
 * Returns v or its replacement, NULL when out of memory (v is then intact).
 */
static void *
ws_grow(void *v, size_t n, size_t *alloc, size_t sz)
{
	size_t na = *alloc != 0 ? *alloc : 16;
	void *p;

	if (n < *alloc)
		return v;
	if (*alloc != 0) {
		if (na > SIZE_MAX / 2 / sz)
			return NULL;
		na *= 2;
	}
	if ((p = realloc(v, na * sz)) == NULL)
		return NULL;
	*alloc = na;
	return p;
}

static enum ws_type
ws_type_of(mode_t mode)
{
	if (S_ISREG(mode))
		return WS_T_FILE;
	if (S_ISDIR(mode))
		return WS_T_DIR;
	if (S_ISLNK(mode))
		return WS_T_SYMLINK;
	return WS_T_OTHER;
}

const char *
ws_type_name(enum ws_type t)
{
	switch (t) {
	case WS_T_FILE:
		return "file";
	case WS_T_DIR:
		return "dir";
	case WS_T_SYMLINK:
		return "symlink";
	default:
		return "other";
	}
}

static int
ws_cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* ---- paths ------------------------------------------------------------- */

/* path starts with the component "/workspace" ("/workspace-evil" does not). */
static int
ws_is_mount_path(const char *path)
{
	size_t n = sizeof(WS_MOUNT) - 1;

	return strncmp(path, WS_MOUNT, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* Append component s[0..n) to r->p at *o. */
static void
ws_rel_push(struct ws_rel *r, size_t *o, const char *s, size_t n)
{
	if (*o > 0)
		r->p[(*o)++] = '/';
	memcpy(r->p + *o, s, n);
	*o += n;
}

/*
 * Normalise path into r (see the top of this file).  The result is never
 * longer than path, so it fits.  allow_empty: "" means the root (directory
 * operations); otherwise it is EINVAL.  Returns 0 or errno with err set.
 */
static int
ws_rel_make(const char *path, int allow_empty, struct ws_rel *r, char *err, size_t errsz)
{
	const char *s = path;
	size_t o = 0, n;
	int slash = 0;

	if (path == NULL)
		return ws_failf(err, errsz, EINVAL, "missing path");
	if (strnlen(path, WS_PATH_MAX + 1) > WS_PATH_MAX)
		return ws_failf(err, errsz, ENAMETOOLONG, "%.64s...: path too long (over %d bytes)",
		                path, WS_PATH_MAX);
	if (*path == '\0' && !allow_empty)
		return ws_fail(err, errsz, EINVAL, path, "empty path");
	if (*s == '/') {
		if (!ws_is_mount_path(s))
			return ws_fail(err, errsz, EXDEV, path,
			               "absolute path outside " WS_MOUNT ": escapes the workspace");
		s += sizeof(WS_MOUNT) - 1;
	}
	r->dir = 1;
	for (;;) {
		s += strspn(s, "/");
		if ((n = strcspn(s, "/")) == 0)
			break;
		slash = s[n] == '/' || (n == 1 && s[0] == '.');
		r->dir = slash || (n == 2 && s[0] == '.' && s[1] == '.');
		if (n != 1 || s[0] != '.')
			ws_rel_push(r, &o, s, n);
		s += n;
	}
	if (o == 0)
		r->p[o++] = '.';
	else if (slash)
		r->p[o++] = '/'; /* "a.txt/" must stay ENOTDIR; the "/" dropped above makes room */
	r->p[o] = '\0';
	return 0;
}

/* The part of normalised p below .agrippa/artifacts ("." for the dir itself), or NULL. */
static const char *
ws_rel_artifact_rest(const char *p)
{
	size_t n = sizeof(WS_ARTIFACT_DIR) - 1;

	if (strncmp(p, WS_ARTIFACT_DIR, n) != 0)
		return NULL;
	if (p[n] == '\0' || strcmp(p + n, "/") == 0)
		return ".";
	return p[n] == '/' ? p + n + 1 : NULL;
}

/* Where reads resolve: beneath the root. */
static void
ws_at_root(const struct ws *ws, const struct ws_rel *r, struct ws_at *at)
{
	at->dfd = ws->root;
	at->owned = 0;
	at->ro = 0;
	at->rel = r->p;
	at->resolve = WS_BENEATH;
}

/*
 * Where writes resolve: beneath the root, or in a read-only workspace
 * beneath .agrippa/artifacts (EROFS for any other path).  Release with
 * ws_at_close.  Returns 0 or errno with err set.
 */
static int
ws_at_writable(const struct ws *ws, const char *path, const struct ws_rel *r, struct ws_at *at,
               char *err, size_t errsz)
{
	int e;

	ws_at_root(ws, r, at);
	if (!ws->readonly)
		return 0;
	if ((at->rel = ws_rel_artifact_rest(r->p)) == NULL)
		return ws_fail(err, errsz, EROFS, path, WS_RO_REASON);
	at->ro = 1;
	at->resolve |= RESOLVE_NO_SYMLINKS;
	at->dfd =
	    ws_openat2(ws->root, WS_ARTIFACT_DIR, O_PATH | O_DIRECTORY | O_CLOEXEC, 0, at->resolve);
	if (at->dfd < 0) {
		e = errno;
		return ws_failf(err, errsz, e, "%s: %s: %s", path, WS_ARTIFACT_DIR,
		                ws_resolve_reason(e, at->resolve));
	}
	at->owned = 1;
	return 0;
}

static void
ws_at_close(struct ws_at *at)
{
	if (at->owned)
		close(at->dfd);
	at->owned = 0;
}

/* ---- opening files ----------------------------------------------------- */

/* st must be a regular file (with one link when opts has WS_O_SINGLE). */
static int
ws_check_reg(const char *path, const struct stat *st, int opts, char *err, size_t errsz)
{
	if (S_ISDIR(st->st_mode))
		return ws_fail(err, errsz, EISDIR, path, "is a directory");
	if (!S_ISREG(st->st_mode))
		return ws_fail(err, errsz, EINVAL, path, ws_notreg_reason(st->st_mode));
	if ((opts & WS_O_SINGLE) && st->st_nlink != 1)
		return ws_fail(err, errsz, EMLINK, path,
		               "has other hard links (refused; the file was not modified)");
	return 0;
}

static int
ws_fstat_reg(const char *path, int fd, int opts, struct stat *st, char *err, size_t errsz)
{
	int e;

	if (fstat(fd, st) != 0) {
		e = errno;
		return ws_fail(err, errsz, e, path, strerror(e));
	}
	return ws_check_reg(path, st, opts, err, errsz);
}

static int
ws_clear_nonblock(const char *path, int fd, char *err, size_t errsz)
{
	int fl = fcntl(fd, F_GETFL), e;

	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
		e = errno;
		return ws_fail(err, errsz, e, path, strerror(e));
	}
	return 0;
}

/*
 * Create at->rel (acc | O_CREAT, mode 0644 whatever the umask when we made
 * it).  If it appeared meanwhile, or is a dangling symlink, open it with
 * O_CREAT but without O_EXCL: the kernel then follows the symlink only
 * beneath at->dfd.  Returns a descriptor or -1 with errno set.
 */
static int
ws_create(const struct ws_at *at, int acc)
{
	int fl = acc | O_CREAT | O_NONBLOCK | O_CLOEXEC;
	int fd = ws_openat2(at->dfd, at->rel, fl | O_EXCL, 0644, at->resolve);

	if (fd >= 0) {
		(void)fchmod(fd, 0644); /* only undoes the umask of a file we just made */
		return fd;
	}
	if (errno != EEXIST)
		return -1;
	return ws_openat2(at->dfd, at->rel, fl, 0644, at->resolve);
}

/*
 * Open the regular file at->rel for acc (O_RDONLY, O_WRONLY or O_RDWR).  An
 * O_PATH look first makes sure no FIFO or device is opened for I/O; the
 * open uses O_NONBLOCK (cleared before returning) and its descriptor is
 * checked again.  opts: WS_O_CREATE, WS_O_SINGLE.  On success *fdp (the
 * caller closes it) and *st describe the file.  Returns 0 or errno with err
 * set, naming path.
 */
static int
ws_open_reg(const char *path, const struct ws_at *at, int acc, int opts, int *fdp, struct stat *st,
            char *err, size_t errsz)
{
	int fd, rc;

	*fdp = -1;
	fd = ws_openat2(at->dfd, at->rel, O_PATH | O_CLOEXEC, 0, at->resolve);
	if (fd < 0 && (errno != ENOENT || !(opts & WS_O_CREATE)))
		return ws_at_fail(path, at, errno, err, errsz);
	if (fd >= 0) {
		rc = ws_fstat_reg(path, fd, opts, st, err, errsz);
		close(fd);
		if (rc != 0)
			return rc;
		fd = ws_openat2(at->dfd, at->rel, acc | O_NONBLOCK | O_CLOEXEC, 0, at->resolve);
	} else
		fd = ws_create(at, acc);
	if (fd < 0)
		return ws_at_fail(path, at, errno, err, errsz);
	if ((rc = ws_fstat_reg(path, fd, opts, st, err, errsz)) != 0 ||
	    (rc = ws_clear_nonblock(path, fd, err, errsz)) != 0) {
		close(fd);
		return rc;
	}
	*fdp = fd;
	return 0;
}

/*
 * A write or edit named a directory ("src/", "a/..", the artifact dir):
 * report why it cannot be written, resolution errors first.
 */
static int
ws_dir_target_fail(const char *path, const struct ws_at *at, char *err, size_t errsz)
{
	int fd = ws_openat2(at->dfd, at->rel, O_PATH | O_CLOEXEC, 0, at->resolve);

	if (fd < 0)
		return ws_at_fail(path, at, errno, err, errsz);
	close(fd);
	return ws_fail(err, errsz, EISDIR, path, "is a directory");
}

/* ---- reading and writing descriptors ----------------------------------- */

/* Read up to want bytes at off into buf; *got is how many (less at EOF). */
static int
ws_pread_all(int fd, void *buf, size_t want, uint64_t off, size_t *got)
{
	ssize_t n;

	*got = 0;
	while (*got < want) {
		n = pread(fd, (char *)buf + *got, want - *got, (off_t)(off + *got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno;
		if (n == 0)
			break;
		*got += (size_t)n;
	}
	return 0;
}

static int
ws_pwrite_all(int fd, const void *buf, size_t len)
{
	size_t done = 0;
	ssize_t n;

	while (done < len) {
		n = pwrite(fd, (const char *)buf + done, len - done, (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno;
		if (n == 0)
			return EIO;
		done += (size_t)n;
	}
	return 0;
}

/* Replace the contents of the open regular file fd with data[0..len). */
static int
ws_replace(const char *path, int fd, const void *data, size_t len, char *err, size_t errsz)
{
	int e;

	if (ftruncate(fd, 0) != 0) {
		e = errno;
		return ws_fail(err, errsz, e, path, strerror(e));
	}
	if ((e = ws_pwrite_all(fd, data, len)) != 0)
		return ws_fail(err, errsz, e, path, strerror(e));
	return 0;
}

/*
 * The whole file fd (size bytes by fstat) into a malloc'd *buf (the caller
 * frees; one spare byte) and *len.  Returns 0 or errno with err set.
 */
static int
ws_slurp(const char *path, int fd, off_t size, char **buf, size_t *len, char *err, size_t errsz)
{
	size_t want = (size_t)size;
	int e;

	*len = 0;
	if ((*buf = malloc(want + 1)) == NULL)
		return ws_fail(err, errsz, ENOMEM, path, strerror(ENOMEM));
	if ((e = ws_pread_all(fd, *buf, want, 0, len)) != 0) {
		free(*buf);
		*buf = NULL;
		return ws_fail(err, errsz, e, path, strerror(e));
	}
	return 0;
}

void
ws_buf_free(struct ws_buf *b)
{
	if (b == NULL)
		return;
	free(b->data);
	b->data = NULL;
	b->len = b->alloc = 0;
}

/* At least n bytes allocated in b. */
static int
ws_buf_reserve(struct ws_buf *b, size_t n)
{
	uint8_t *p;

	if (b->data != NULL && b->alloc >= n)
		return 0;
	if ((p = realloc(b->data, n != 0 ? n : 1)) == NULL)
		return ENOMEM;
	b->data = p;
	b->alloc = n != 0 ? n : 1;
	return 0;
}

/* ---- workspace ---------------------------------------------------------- */

int
ws_open(struct ws *ws, const char *dir, int readonly, size_t file_max, char *err, size_t errsz)
{
	int e;

	ws_err_clear(err, errsz);
	ws->root = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (ws->root < 0) {
		e = errno;
		return ws_failf(err, errsz, e, "workspace %s: %s", dir, strerror(e));
	}
	ws->readonly = readonly != 0;
	ws->file_max = file_max;
	return 0;
}

void
ws_close(struct ws *ws)
{
	if (ws->root >= 0)
		close(ws->root);
	ws->root = -1;
}

/* ---- read ---------------------------------------------------------------- */

/*
 * How many bytes a read of [offset, offset+limit) returns from a file of
 * size bytes.  Also capped at file_max: ws_read never allocates more than a
 * whole-file read would; the caller sees *size and pages on.
 */
static size_t
ws_read_span(off_t size, uint64_t offset, uint64_t limit, size_t file_max)
{
	uint64_t left;

	if (size <= 0 || offset >= (uint64_t)size)
		return 0;
	left = (uint64_t)size - offset;
	if (limit < left)
		left = limit;
	if (left > file_max)
		left = file_max;
	return left > SIZE_MAX - 1 ? SIZE_MAX - 1 : (size_t)left;
}

/*
 * On error out holds nothing to free (callers may skip ws_buf_free then);
 * on success the caller frees it.
 */
int
ws_read(const struct ws *ws, const char *path, uint64_t offset, uint64_t limit, struct ws_buf *out,
        uint64_t *size, char *err, size_t errsz)
{
	struct ws_rel r;
	struct ws_at at;
	struct stat st;
	size_t want;
	int fd, rc;

	ws_err_clear(err, errsz);
	out->len = 0;
	*size = 0;
	if ((rc = ws_rel_make(path, 0, &r, err, errsz)) != 0)
		return rc;
	ws_at_root(ws, &r, &at);
	if ((rc = ws_open_reg(path, &at, O_RDONLY, 0, &fd, &st, err, errsz)) != 0)
		return rc;
	*size = (uint64_t)st.st_size;
	want = ws_read_span(st.st_size, offset, limit, ws->file_max);
	if ((rc = ws_buf_reserve(out, want)) != 0 ||
	    (rc = ws_pread_all(fd, out->data, want, offset, &out->len)) != 0) {
		ws_buf_free(out);
		rc = ws_fail(err, errsz, rc, path, strerror(rc));
	}
	close(fd);
	return rc;
}

/* ---- write --------------------------------------------------------------- */

/*
 * Make (0755) or open directory prefix buf beneath at, comp its last
 * component and cur the descriptor of its parent (-1: at->dfd).  Returns an
 * O_PATH descriptor or -1 with errno set.
 */
static int
ws_mkdir_one(const struct ws_at *at, const char *buf, const char *comp, int cur)
{
	int fd = ws_openat2(at->dfd, buf, O_PATH | O_DIRECTORY | O_CLOEXEC, 0, at->resolve);

	if (fd >= 0 || errno != ENOENT)
		return fd;
	/* mkdirat never follows a final symlink: a dangling one stays EEXIST */
	if (mkdirat(cur >= 0 ? cur : at->dfd, comp, 0755) != 0 && errno != EEXIST)
		return -1;
	return ws_openat2(at->dfd, buf, O_PATH | O_DIRECTORY | O_CLOEXEC, 0, at->resolve);
}

/* Create the directories of buf[0..plen) one component at a time, each beneath at. */
static int
ws_mkpath(const char *path, const struct ws_at *at, char *buf, size_t plen, char *err, size_t errsz)
{
	size_t i = 0, n;
	int cur = -1, fd;
	char c;

	while (i < plen) {
		n = strcspn(buf + i, "/");
		c = buf[i + n];
		buf[i + n] = '\0';
		fd = ws_mkdir_one(at, buf, buf + i, cur);
		buf[i + n] = c;
		ws_close_keep(cur);
		if (fd < 0)
			return ws_at_fail(path, at, errno, err, errsz);
		cur = fd;
		i += n + 1;
	}
	ws_close_keep(cur);
	return 0;
}

/* mkdirs: the missing parents of at->rel, created 0755 beneath at->dfd. */
static int
ws_mkparents(const char *path, const struct ws_at *at, char *err, size_t errsz)
{
	char buf[WS_PATH_MAX + 1];
	const char *slash = strrchr(at->rel, '/');
	size_t plen;
	int fd;

	if (slash == NULL)
		return 0;
	plen = (size_t)(slash - at->rel);
	memcpy(buf, at->rel, plen);
	buf[plen] = '\0';
	fd = ws_openat2(at->dfd, buf, O_PATH | O_DIRECTORY | O_CLOEXEC, 0, at->resolve);
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	if (errno != ENOENT)
		return ws_at_fail(path, at, errno, err, errsz);
	return ws_mkpath(path, at, buf, plen, err, errsz);
}

static int
ws_write_at(const char *path, const struct ws_at *at, int isdir, const void *data, size_t len,
            int mkdirs, char *err, size_t errsz)
{
	struct stat st;
	int fd, rc;

	if (isdir)
		return ws_dir_target_fail(path, at, err, errsz);
	if (mkdirs && (rc = ws_mkparents(path, at, err, errsz)) != 0)
		return rc;
	rc = ws_open_reg(path, at, O_WRONLY, WS_O_CREATE | WS_O_SINGLE, &fd, &st, err, errsz);
	if (rc != 0)
		return rc;
	rc = ws_replace(path, fd, data, len, err, errsz);
	close(fd);
	return rc;
}

int
ws_write(const struct ws *ws, const char *path, const void *data, size_t len, int mkdirs, char *err,
         size_t errsz)
{
	struct ws_rel r;
	struct ws_at at;
	int rc;

	ws_err_clear(err, errsz);
	if ((rc = ws_rel_make(path, 0, &r, err, errsz)) != 0)
		return rc;
	if (len > ws->file_max)
		return ws_failf(err, errsz, EFBIG, "%s: %zu bytes is over the %zu-byte file limit",
		                path, len, ws->file_max);
	if (len > 0 && data == NULL)
		return ws_fail(err, errsz, EINVAL, path, "no data");
	if ((rc = ws_at_writable(ws, path, &r, &at, err, errsz)) != 0)
		return rc;
	rc = ws_write_at(path, &at, r.dir || strcmp(at.rel, ".") == 0, data, len, mkdirs, err,
	                 errsz);
	ws_at_close(&at);
	return rc;
}

/* ---- edit ---------------------------------------------------------------- */

struct ws_edit_spec {
	const char *old, *new;
	size_t oldlen, newlen;
	uint32_t count;
};

/* Non-overlapping occurrences of s->old in buf[0..len). */
static size_t
ws_edit_count(const char *buf, size_t len, const struct ws_edit_spec *s)
{
	const char *p = buf, *end = buf + len, *q;
	size_t n = 0;

	while ((q = memmem(p, (size_t)(end - p), s->old, s->oldlen)) != NULL) {
		n++;
		p = q + s->oldlen;
	}
	return n;
}

static int
ws_edit_check(const char *path, size_t found, uint32_t count, char *err, size_t errsz)
{
	if (found == 0)
		return ws_fail(err, errsz, ENODATA, path, "old text not found");
	if (count == 0 && found != 1)
		return ws_failf(
		    err, errsz, EINVAL,
		    "%s: old text occurs %zu times, must be unique (or give the count to "
		    "replace all)",
		    path, found);
	if (count != 0 && found != count)
		return ws_failf(err, errsz, EINVAL,
		                "%s: old text occurs %zu times, expected %" PRIu32, path, found,
		                count);
	return 0;
}

/*
 * The edited contents of buf[0..len) (found occurrences) in a malloc'd *out
 * of *outlen bytes (the caller frees).  EFBIG over file_max.
 */
static int
ws_edit_build(const char *path, const char *buf, size_t len, size_t found,
              const struct ws_edit_spec *s, size_t file_max, char **out, size_t *outlen, char *err,
              size_t errsz)
{
	const char *p = buf, *q;
	size_t grow, n, o = 0;

	if (__builtin_mul_overflow(found, s->newlen, &grow) ||
	    __builtin_add_overflow(len - found * s->oldlen, grow, &n) || n > file_max)
		return ws_failf(err, errsz, EFBIG,
		                "%s: the result would be over the %zu-byte file limit (unchanged)",
		                path, file_max);
	if ((*out = malloc(n != 0 ? n : 1)) == NULL)
		return ws_fail(err, errsz, ENOMEM, path, strerror(ENOMEM));
	while ((q = memmem(p, (size_t)(buf + len - p), s->old, s->oldlen)) != NULL) {
		memcpy(*out + o, p, (size_t)(q - p));
		o += (size_t)(q - p);
		if (s->newlen != 0)
			memcpy(*out + o, s->new, s->newlen);
		o += s->newlen;
		p = q + s->oldlen;
	}
	memcpy(*out + o, p, (size_t)(buf + len - p));
	*outlen = n;
	return 0;
}

/* Edit the open regular file fd (size from st) in place. */
static int
ws_edit_fd(const struct ws *ws, const char *path, int fd, const struct stat *st,
           const struct ws_edit_spec *s, uint32_t *replaced, char *err, size_t errsz)
{
	char *buf = NULL, *res = NULL;
	size_t len, reslen = 0, found;
	int rc;

	if ((uint64_t)st->st_size > ws->file_max)
		return ws_failf(err, errsz, EFBIG, "%s: larger than the %zu-byte file limit", path,
		                ws->file_max);
	if ((rc = ws_slurp(path, fd, st->st_size, &buf, &len, err, errsz)) != 0)
		return rc;
	found = ws_edit_count(buf, len, s);
	if ((rc = ws_edit_check(path, found, s->count, err, errsz)) == 0 &&
	    (rc = ws_edit_build(path, buf, len, found, s, ws->file_max, &res, &reslen, err,
	                        errsz)) == 0 &&
	    (rc = ws_replace(path, fd, res, reslen, err, errsz)) == 0)
		*replaced = (uint32_t)found;
	free(res);
	free(buf);
	return rc;
}

static int
ws_edit_at(const struct ws *ws, const char *path, const struct ws_at *at, int isdir,
           const struct ws_edit_spec *s, uint32_t *replaced, char *err, size_t errsz)
{
	struct stat st;
	int fd, rc;

	if (isdir)
		return ws_dir_target_fail(path, at, err, errsz);
	if ((rc = ws_open_reg(path, at, O_RDWR, WS_O_SINGLE, &fd, &st, err, errsz)) != 0)
		return rc;
	rc = ws_edit_fd(ws, path, fd, &st, s, replaced, err, errsz);
	close(fd);
	return rc;
}

int
ws_edit(const struct ws *ws, const char *path, const char *old, size_t oldlen, const char *new,
        size_t newlen, uint32_t count, uint32_t *replaced, char *err, size_t errsz)
{
	struct ws_edit_spec s = {old, new, oldlen, newlen, count};
	struct ws_rel r;
	struct ws_at at;
	uint32_t dummy;
	int rc;

	ws_err_clear(err, errsz);
	if (replaced == NULL)
		replaced = &dummy;
	*replaced = 0;
	if ((rc = ws_rel_make(path, 0, &r, err, errsz)) != 0)
		return rc;
	if (old == NULL || oldlen == 0)
		return ws_fail(err, errsz, EINVAL, path, "old text is empty");
	if (new == NULL && newlen > 0)
		return ws_fail(err, errsz, EINVAL, path, "no new text");
	if ((rc = ws_at_writable(ws, path, &r, &at, err, errsz)) != 0)
		return rc;
	rc = ws_edit_at(ws, path, &at, r.dir || strcmp(at.rel, ".") == 0, &s, replaced, err, errsz);
	ws_at_close(&at);
	return rc;
}

/* ---- directory listings ------------------------------------------------- */

static void
ws_names_free(struct ws_names *nm)
{
	size_t i;

	for (i = 0; i < nm->n; i++)
		free(nm->v[i]);
	free(nm->v);
	nm->v = NULL;
	nm->n = nm->alloc = 0;
}

static int
ws_names_add(struct ws_names *nm, const char *name)
{
	char **v = ws_grow(nm->v, nm->n, &nm->alloc, sizeof(*nm->v));

	if (v == NULL)
		return ENOMEM;
	nm->v = v;
	if ((nm->v[nm->n] = strdup(name)) == NULL)
		return ENOMEM;
	nm->n++;
	return 0;
}

/* Append the names of d (not "." or "..") to nm, at most cap in all. */
static int
ws_names_fill(DIR *d, size_t cap, struct ws_names *nm)
{
	struct dirent *de;
	int rc;

	for (;;) {
		errno = 0;
		if ((de = readdir(d)) == NULL)
			return errno;
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (nm->n >= cap) {
			nm->more = 1;
			return 0;
		}
		if ((rc = ws_names_add(nm, de->d_name)) != 0)
			return rc;
	}
}

/*
 * The sorted names in directory dfd (any descriptor of it, O_PATH too), at
 * most cap (nm->more set when there were more).  nm is ws_names_free'd by
 * the caller; on error it is already empty.  Returns 0 or errno.
 */
static int
ws_names_read(int dfd, size_t cap, struct ws_names *nm)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc;
	DIR *d;

	memset(nm, 0, sizeof(*nm));
	if (fd < 0)
		return errno;
	if ((d = fdopendir(fd)) == NULL) {
		rc = errno;
		close(fd);
		return rc;
	}
	rc = ws_names_fill(d, cap, nm);
	closedir(d);
	if (rc != 0)
		ws_names_free(nm);
	else if (nm->n > 1)
		qsort(nm->v, nm->n, sizeof(*nm->v), ws_cmp_str);
	return rc;
}

void
ws_entries_free(struct ws_entries *e)
{
	size_t i;

	if (e == NULL)
		return;
	for (i = 0; i < e->n; i++)
		free(e->v[i].name);
	free(e->v);
	memset(e, 0, sizeof(*e));
}

static int
ws_entries_add(struct ws_entries *e, const char *name, const struct stat *st)
{
	struct ws_entry *v = ws_grow(e->v, e->n, &e->alloc, sizeof(*e->v));

	if (v == NULL)
		return ENOMEM;
	e->v = v;
	if ((v[e->n].name = strdup(name)) == NULL)
		return ENOMEM;
	v[e->n].type = ws_type_of(st->st_mode);
	v[e->n].size = st->st_size > 0 ? (uint64_t)st->st_size : 0;
	e->n++;
	return 0;
}

/* Entries for the first max names of nm that still exist (lstat-like). */
static int
ws_list_fill(int dfd, const struct ws_names *nm, size_t max, struct ws_entries *out)
{
	struct stat st;
	size_t i;
	int rc;

	for (i = 0; i < nm->n; i++) {
		if (fstatat(dfd, nm->v[i], &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue; /* gone since readdir */
		if (out->n >= max) {
			out->truncated = 1;
			break;
		}
		if ((rc = ws_entries_add(out, nm->v[i], &st)) != 0)
			return rc;
	}
	if (nm->more)
		out->truncated = 1;
	return 0;
}

/* out is overwritten (pass it empty); on error it is left empty, nothing to free. */
int
ws_list(const struct ws *ws, const char *path, size_t max, struct ws_entries *out, char *err,
        size_t errsz)
{
	struct ws_names nm;
	struct ws_rel r;
	struct ws_at at;
	int dfd, rc;

	ws_err_clear(err, errsz);
	memset(out, 0, sizeof(*out));
	if ((rc = ws_rel_make(path, 1, &r, err, errsz)) != 0)
		return rc;
	ws_at_root(ws, &r, &at);
	dfd = ws_openat2(at.dfd, at.rel, O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC, 0,
	                 at.resolve);
	if (dfd < 0)
		return ws_at_fail(path, &at, errno, err, errsz);
	if ((rc = ws_names_read(dfd, WS_WALK_MAX, &nm)) == 0) {
		rc = ws_list_fill(dfd, &nm, max, out);
		ws_names_free(&nm);
	}
	close(dfd);
	if (rc != 0) {
		ws_entries_free(out);
		return ws_fail(err, errsz, rc, path, strerror(rc));
	}
	return 0;
}

/* ---- the walk (glob, grep) ------------------------------------------------ */

static int ws_walk_dir(struct ws_walk *w, int dfd);

/* Append "/name" to w->path; -1 when it would be too long. */
static int
ws_walk_push(struct ws_walk *w, const char *name)
{
	size_t n = strlen(name), sep = w->plen > 0;

	if (w->plen + sep + n > WS_PATH_MAX)
		return -1;
	if (sep)
		w->path[w->plen++] = '/';
	memcpy(w->path + w->plen, name, n + 1);
	w->plen += n;
	return 0;
}

/* Enter directory name of dfd, never through a symlink. */
static int
ws_walk_sub(struct ws_walk *w, int dfd, const char *name)
{
	int sub, rc;

	if (w->depth >= WS_DEPTH_MAX) {
		w->truncated = 1;
		return 0;
	}
	sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (sub < 0)
		return 0; /* replaced by a symlink meanwhile, or unreadable: skipped */
	rc = ws_walk_dir(w, sub);
	close(sub);
	return rc;
}

static int
ws_walk_entry(struct ws_walk *w, int dfd, const char *name)
{
	size_t saved = w->plen;
	struct stat st;
	int descend = 0, rc;

	if (strcmp(name, ".git") == 0)
		return 0;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return 0; /* gone since readdir */
	if (ws_walk_push(w, name) != 0) {
		w->truncated = 1;
		return 0;
	}
	rc = w->visit(w, dfd, name, &st, &descend);
	if (rc == 0 && descend && !w->stop && S_ISDIR(st.st_mode))
		rc = ws_walk_sub(w, dfd, name);
	w->plen = saved;
	w->path[saved] = '\0';
	return rc;
}

/*
 * Visit the entries of directory dfd in name order, depth first.  Names
 * read count against WS_WALK_MAX.  Unreadable directories are skipped.
 * Returns 0 or errno (out of memory, or what a visitor returned).
 */
static int
ws_walk_dir(struct ws_walk *w, int dfd)
{
	struct ws_names nm;
	size_t i;
	int rc;

	rc = ws_names_read(dfd, WS_WALK_MAX - w->visited, &nm);
	if (rc != 0)
		return rc == ENOMEM ? rc : 0;
	w->visited += nm.n;
	if (nm.more)
		w->truncated = 1;
	w->depth++;
	for (i = 0; i < nm.n && rc == 0 && !w->stop; i++)
		rc = ws_walk_entry(w, dfd, nm.v[i]);
	w->depth--;
	ws_names_free(&nm);
	return rc;
}

/* Start a walk whose results are named under the normalised base r. */
static void
ws_walk_init(struct ws_walk *w, const struct ws_rel *r)
{
	memset(w, 0, sizeof(*w));
	if (strcmp(r->p, ".") != 0) {
		w->plen = strlen(r->p);
		memcpy(w->path, r->p, w->plen + 1);
		if (w->path[w->plen - 1] == '/')
			w->path[--w->plen] = '\0';
	}
}

/* ---- glob ------------------------------------------------------------------ */

/* A glob pattern split into components, consecutive "**" collapsed. */
struct ws_pat {
	char *buf;     /* the pattern, '/' replaced by NULs */
	char **comp;   /* m components */
	uint8_t *star; /* comp[i] is "**" */
	size_t m;
};

struct ws_globber {
	struct ws_pat pat;
	uint8_t *states; /* (WS_DEPTH_MAX + 1) rows of m + 1 active-position flags */
	size_t max;
	struct ws_entries *out;
};

static void
ws_pat_free(struct ws_pat *p)
{
	free(p->buf);
	free(p->comp);
	free(p->star);
	memset(p, 0, sizeof(*p));
}

/* Split buf in place into p->comp (room for len / 2 + 1 components). */
static void
ws_pat_split(struct ws_pat *p, size_t len)
{
	char *s = p->buf, *end = p->buf + len;
	size_t n;

	while (s < end) {
		n = strcspn(s, "/");
		s[n] = '\0';
		if (n == 0 || strcmp(s, ".") == 0) {
			s += n + 1;
			continue;
		}
		p->star[p->m] = strcmp(s, "**") == 0;
		if (!(p->star[p->m] && p->m > 0 && p->star[p->m - 1]))
			p->comp[p->m++] = s;
		s += n + 1;
	}
}

static int
ws_pat_make(const char *pattern, struct ws_pat *p, char *err, size_t errsz)
{
	size_t len;

	memset(p, 0, sizeof(*p));
	if (pattern == NULL || *pattern == '\0')
		return ws_failf(err, errsz, EINVAL, "empty glob pattern");
	if ((len = strnlen(pattern, WS_PATH_MAX + 1)) > WS_PATH_MAX)
		return ws_failf(err, errsz, ENAMETOOLONG, "glob pattern longer than %d bytes",
		                WS_PATH_MAX);
	if (*pattern == '/')
		return ws_failf(err, errsz, EINVAL, "%s: glob pattern must be relative to base",
		                pattern);
	p->buf = strdup(pattern);
	p->comp = calloc(len / 2 + 1, sizeof(*p->comp));
	p->star = calloc(len / 2 + 1, sizeof(*p->star));
	if (p->buf == NULL || p->comp == NULL || p->star == NULL) {
		ws_pat_free(p);
		return ws_failf(err, errsz, ENOMEM, "glob: %s", strerror(ENOMEM));
	}
	ws_pat_split(p, len);
	if (p->m == 0) {
		ws_pat_free(p);
		return ws_failf(err, errsz, EINVAL, "%s: empty glob pattern", pattern);
	}
	return 0;
}

/* Positions after a "**" are reachable without consuming anything. */
static void
ws_pat_close(const struct ws_pat *p, uint8_t *s)
{
	size_t i;

	for (i = 0; i < p->m; i++)
		if (s[i] && p->star[i])
			s[i + 1] = 1;
}

/*
 * One step of the pattern automaton: t = the positions reached from the
 * positions in s by consuming the component name.  "**" consumes any name
 * not starting with "."; other components match with fnmatch(FNM_PERIOD).
 */
static void
ws_pat_step(const struct ws_pat *p, const uint8_t *s, const char *name, uint8_t *t)
{
	size_t i;

	memset(t, 0, p->m + 1);
	for (i = 0; i < p->m; i++) {
		if (!s[i])
			continue;
		if (p->star[i]) {
			if (name[0] != '.')
				t[i] = 1;
		} else if (fnmatch(p->comp[i], name, FNM_PERIOD) == 0)
			t[i + 1] = 1;
	}
	ws_pat_close(p, t);
}

/* Some position before the end is active: a deeper path could still match. */
static int
ws_pat_open(const struct ws_pat *p, const uint8_t *s)
{
	size_t i;

	for (i = 0; i < p->m; i++)
		if (s[i])
			return 1;
	return 0;
}

static int
ws_glob_visit(struct ws_walk *w, int dfd, const char *name, const struct stat *st, int *descend)
{
	struct ws_globber *g = w->arg;
	size_t row = g->pat.m + 1;

	(void)dfd;
	const uint8_t *s = g->states + (w->depth - 1) * row;
	uint8_t *t = g->states + w->depth * row;

	ws_pat_step(&g->pat, s, name, t);
	if (t[g->pat.m]) {
		if (g->out->n >= g->max) {
			g->out->truncated = 1;
			w->stop = 1;
			return 0;
		}
		if (ws_entries_add(g->out, w->path, st) != 0)
			return ENOMEM;
	}
	*descend = ws_pat_open(&g->pat, t);
	return 0;
}

/*
 * Open the walk base r (a directory beneath the root) as an O_PATH
 * descriptor in *dfd and its mode in *st.  Returns 0 or errno with err set.
 */
static int
ws_walk_base(const struct ws *ws, const char *path, const struct ws_rel *r, int *dfd,
             struct stat *st, char *err, size_t errsz)
{
	struct ws_at at;
	int e;

	ws_at_root(ws, r, &at);
	*dfd = ws_openat2(at.dfd, at.rel, O_PATH | O_CLOEXEC, 0, at.resolve);
	if (*dfd < 0)
		return ws_at_fail(path, &at, errno, err, errsz);
	if (fstat(*dfd, st) != 0) {
		e = errno;
		close(*dfd);
		*dfd = -1;
		return ws_fail(err, errsz, e, path, strerror(e));
	}
	return 0;
}

static int
ws_glob_run(const struct ws *ws, struct ws_globber *g, const char *base, char *err, size_t errsz)
{
	struct ws_walk w;
	struct ws_rel r;
	struct stat st;
	int dfd, rc;

	if ((rc = ws_rel_make(base != NULL ? base : "", 1, &r, err, errsz)) != 0)
		return rc;
	if ((rc = ws_walk_base(ws, base != NULL ? base : "", &r, &dfd, &st, err, errsz)) != 0)
		return rc;
	ws_walk_init(&w, &r);
	w.visit = ws_glob_visit;
	w.arg = g;
	if (!S_ISDIR(st.st_mode))
		rc = ws_fail(err, errsz, ENOTDIR, base != NULL ? base : "", "not a directory");
	else if ((rc = ws_walk_dir(&w, dfd)) != 0)
		rc = ws_failf(err, errsz, rc, "glob %s: %s", g->pat.buf, strerror(rc));
	close(dfd);
	if (w.truncated)
		g->out->truncated = 1;
	return rc;
}

static int
ws_cmp_entry(const void *a, const void *b)
{
	return strcmp(((const struct ws_entry *)a)->name, ((const struct ws_entry *)b)->name);
}

/* out is overwritten (pass it empty); on error it is left empty, nothing to free. */
int
ws_glob(const struct ws *ws, const char *pattern, const char *base, size_t max,
        struct ws_entries *out, char *err, size_t errsz)
{
	struct ws_globber g = {.max = max, .out = out};
	int rc;

	ws_err_clear(err, errsz);
	memset(out, 0, sizeof(*out));
	if ((rc = ws_pat_make(pattern, &g.pat, err, errsz)) != 0)
		return rc;
	g.states = calloc((size_t)(WS_DEPTH_MAX + 1) * (g.pat.m + 1), 1);
	if (g.states == NULL)
		rc = ws_failf(err, errsz, ENOMEM, "glob: %s", strerror(ENOMEM));
	else {
		g.states[0] = 1;
		ws_pat_close(&g.pat, g.states);
		rc = ws_glob_run(ws, &g, base, err, errsz);
	}
	free(g.states);
	ws_pat_free(&g.pat);
	if (rc != 0)
		ws_entries_free(out);
	else if (out->n > 1)
		qsort(out->v, out->n, sizeof(*out->v), ws_cmp_entry);
	return rc;
}

/* ---- grep ------------------------------------------------------------------ */

struct ws_grepper {
	regex_t re;
	const char *include;
	size_t max, file_max;
	struct ws_matches *out;
	int stop; /* max reached */
};

void
ws_matches_free(struct ws_matches *m)
{
	size_t i;

	if (m == NULL)
		return;
	for (i = 0; i < m->n; i++) {
		free(m->v[i].file);
		free(m->v[i].text);
	}
	free(m->v);
	memset(m, 0, sizeof(*m));
}

/* Bytes of a line of len bytes to keep: WS_GREP_LINE_MAX, not splitting a UTF-8 character. */
static size_t
ws_grep_cut(const char *line, size_t len)
{
	size_t n = len, back = 0;

	if (n <= WS_GREP_LINE_MAX)
		return n;
	n = WS_GREP_LINE_MAX;
	while (n > 0 && back < 3 && ((unsigned char)line[n] & 0xc0) == 0x80) {
		n--;
		back++;
	}
	return n;
}

static int
ws_grep_add(struct ws_matches *m, const char *file, uint32_t line, const char *text, size_t len)
{
	struct ws_match *v = ws_grow(m->v, m->n, &m->alloc, sizeof(*m->v));

	if (v == NULL)
		return ENOMEM;
	m->v = v;
	v[m->n].line = line;
	v[m->n].file = strdup(file);
	v[m->n].text = strndup(text, ws_grep_cut(text, len));
	if (v[m->n].file == NULL || v[m->n].text == NULL) {
		free(v[m->n].file);
		free(v[m->n].text);
		return ENOMEM;
	}
	m->n++;
	return 0;
}

/*
 * Match each line of buf[0..len) (buf[len] is a NUL).  Each line is
 * NUL-terminated in place for regexec and restored: glibc's REG_STARTEND
 * was seen reading past the end of the string it was given, so it is not
 * used.  A NUL inside a line ends what is matched of it.
 */
static int
ws_grep_scan(struct ws_grepper *g, char *buf, size_t len, const char *file)
{
	char *p = buf, *end = buf + len, *nl, *le;
	uint32_t line = 0;
	int hit;

	while (p < end && line < UINT32_MAX) {
		nl = memchr(p, '\n', (size_t)(end - p));
		le = nl != NULL ? nl : end;
		line++;
		*le = '\0';
		hit = regexec(&g->re, p, 0, NULL, 0) == 0;
		if (nl != NULL)
			*nl = '\n';
		if (hit) {
			if (g->out->n >= g->max) {
				g->out->truncated = 1;
				g->stop = 1;
				return 0;
			}
			if (ws_grep_add(g->out, file, line, p, (size_t)(le - p)) != 0)
				return ENOMEM;
		}
		p = nl != NULL ? nl + 1 : end;
	}
	return 0;
}

/* Grep the open file fd as file; non-regular, too large and binary files are skipped. */
static int
ws_grep_fd(struct ws_grepper *g, int fd, const char *file)
{
	struct stat st;
	size_t len;
	char *buf;
	int rc;

	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > g->file_max)
		return 0;
	if ((buf = malloc((size_t)st.st_size + 1)) == NULL)
		return ENOMEM;
	rc = ws_pread_all(fd, buf, (size_t)st.st_size, 0, &len);
	buf[len] = '\0';
	if (rc == 0 && memchr(buf, '\0', len < WS_BINARY_PROBE ? len : WS_BINARY_PROBE) == NULL)
		rc = ws_grep_scan(g, buf, len, file);
	else
		rc = rc == ENOMEM ? rc : 0; /* an unreadable file is skipped like a binary one */
	free(buf);
	return rc;
}

static int
ws_grep_visit(struct ws_walk *w, int dfd, const char *name, const struct stat *st, int *descend)
{
	struct ws_grepper *g = w->arg;
	int fd, rc;

	if (S_ISDIR(st->st_mode)) {
		*descend = 1;
		return 0;
	}
	if (!S_ISREG(st->st_mode) || (uint64_t)st->st_size > g->file_max)
		return 0;
	if (g->include != NULL && *g->include != '\0' && fnmatch(g->include, name, FNM_PERIOD) != 0)
		return 0;
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return 0; /* replaced by a symlink meanwhile, or unreadable */
	rc = ws_grep_fd(g, fd, w->path);
	close(fd);
	w->stop = g->stop;
	return rc;
}

/* Grep one file named by the caller (the include filter does not apply). */
static int
ws_grep_file(const struct ws *ws, struct ws_grepper *g, const char *path, const struct ws_rel *r,
             char *err, size_t errsz)
{
	struct ws_at at;
	struct stat st;
	int fd, rc;

	ws_at_root(ws, r, &at);
	if ((rc = ws_open_reg(path, &at, O_RDONLY, 0, &fd, &st, err, errsz)) != 0)
		return rc;
	if ((rc = ws_grep_fd(g, fd, r->p)) != 0)
		rc = ws_fail(err, errsz, rc, path, strerror(rc));
	close(fd);
	return rc;
}

static int
ws_grep_dir(struct ws_grepper *g, const char *path, const struct ws_rel *r, int dfd, char *err,
            size_t errsz)
{
	struct ws_walk w;
	int rc;

	ws_walk_init(&w, r);
	w.visit = ws_grep_visit;
	w.arg = g;
	if ((rc = ws_walk_dir(&w, dfd)) != 0)
		rc = ws_fail(err, errsz, rc, path, strerror(rc));
	if (w.truncated)
		g->out->truncated = 1;
	return rc;
}

static int
ws_grep_path(const struct ws *ws, struct ws_grepper *g, const char *path, char *err, size_t errsz)
{
	struct ws_rel r;
	struct stat st;
	int dfd, rc;

	if ((rc = ws_rel_make(path, 1, &r, err, errsz)) != 0)
		return rc;
	if ((rc = ws_walk_base(ws, path, &r, &dfd, &st, err, errsz)) != 0)
		return rc;
	if (S_ISDIR(st.st_mode))
		rc = ws_grep_dir(g, path, &r, dfd, err, errsz);
	else if (S_ISREG(st.st_mode))
		rc = ws_grep_file(ws, g, path, &r, err, errsz);
	else
		rc = ws_fail(err, errsz, EINVAL, path, ws_notreg_reason(st.st_mode));
	close(dfd);
	return rc;
}

/* out is overwritten (pass it empty); on error it is left empty, nothing to free. */
int
ws_grep(const struct ws *ws, const char *re, const char *path, const char *include, int icase,
        size_t max, struct ws_matches *out, char *err, size_t errsz)
{
	struct ws_grepper g = {
	    .include = include, .max = max, .file_max = ws->file_max, .out = out};
	char msg[256];
	int rc;

	ws_err_clear(err, errsz);
	memset(out, 0, sizeof(*out));
	if (re == NULL)
		return ws_failf(err, errsz, EINVAL, "missing regex");
	rc = regcomp(&g.re, re, REG_EXTENDED | REG_NEWLINE | (icase ? REG_ICASE : 0));
	if (rc != 0) {
		regerror(rc, &g.re, msg, sizeof(msg));
		return ws_failf(err, errsz, EINVAL, "bad regex \"%s\": %s", re, msg);
	}
	rc = ws_grep_path(ws, &g, path != NULL ? path : "", err, errsz);
	regfree(&g.re);
	if (rc != 0)
		ws_matches_free(out);
	return rc;
}

/* ---- stat, open_dir ---------------------------------------------------------- */

int
ws_stat(const struct ws *ws, const char *path, struct ws_stat *st, char *err, size_t errsz)
{
	struct ws_rel r;
	struct ws_at at;
	struct stat sb;
	int fd, rc, e;

	ws_err_clear(err, errsz);
	memset(st, 0, sizeof(*st));
	if ((rc = ws_rel_make(path, 1, &r, err, errsz)) != 0)
		return rc;
	ws_at_root(ws, &r, &at);
	fd = ws_openat2(at.dfd, at.rel, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0, at.resolve);
	if (fd < 0)
		return ws_at_fail(path, &at, errno, err, errsz);
	if (fstatat(fd, "", &sb, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0) {
		e = errno;
		close(fd);
		return ws_fail(err, errsz, e, path, strerror(e));
	}
	close(fd);
	st->type = ws_type_of(sb.st_mode);
	st->size = sb.st_size > 0 ? (uint64_t)sb.st_size : 0;
	st->mode = (uint32_t)(sb.st_mode & 07777);
	st->mtime = (int64_t)sb.st_mtim.tv_sec;
	st->nlink = (uint32_t)sb.st_nlink;
	return 0;
}

int
ws_open_dir(const struct ws *ws, const char *path, int *fd, char *err, size_t errsz)
{
	struct ws_rel r;
	struct ws_at at;
	int rc;

	ws_err_clear(err, errsz);
	*fd = -1;
	if ((rc = ws_rel_make(path, 1, &r, err, errsz)) != 0)
		return rc;
	ws_at_root(ws, &r, &at);
	*fd = ws_openat2(at.dfd, at.rel, O_PATH | O_DIRECTORY | O_CLOEXEC, 0, at.resolve);
	if (*fd < 0)
		return ws_at_fail(path, &at, errno, err, errsz);
	return 0;
}

/* ---- artifacts ---------------------------------------------------------------- */

static int
ws_artifact_name_ok(const char *name)
{
	static const char ok[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-";
	size_t n;

	if (name == NULL)
		return 0;
	n = strnlen(name, WS_ARTIFACT_NAME_MAX + 1);
	if (n == 0 || n > WS_ARTIFACT_NAME_MAX)
		return 0;
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return 0;
	return strspn(name, ok) == n;
}

/* Size checks on the open artifact: ENODATA empty, EFBIG over cap. */
static int
ws_artifact_size(const char *name, const struct stat *st, uint64_t cap, char *err, size_t errsz)
{
	if (st->st_size <= 0)
		return ws_fail(err, errsz, ENODATA, name, "artifact is empty");
	if ((uint64_t)st->st_size > cap)
		return ws_failf(err, errsz, EFBIG,
		                "%s: artifact of %jd bytes is over the %" PRIu64 "-byte cap", name,
		                (intmax_t)st->st_size, cap);
	return 0;
}

int
ws_artifact_open(const struct ws *ws, const char *name, uint64_t cap, int *fd, uint64_t *size,
                 char *err, size_t errsz)
{
	char rel[sizeof(WS_ARTIFACT_DIR) + 1 + WS_ARTIFACT_NAME_MAX + 1];
	struct ws_at at = {
	    .dfd = ws->root, .rel = rel, .resolve = WS_BENEATH | RESOLVE_NO_SYMLINKS};
	struct stat st;
	int f, rc;

	ws_err_clear(err, errsz);
	*fd = -1;
	*size = 0;
	if (!ws_artifact_name_ok(name) || fmt_ok(rel, sizeof(rel), "%s/%s", WS_ARTIFACT_DIR, name))
		return ws_failf(
		    err, errsz, EINVAL,
		    "%.*s: bad artifact name (1 to %d of [A-Za-z0-9._-], not \".\" or \"..\")",
		    WS_ARTIFACT_NAME_MAX + 8, name != NULL ? name : "(null)", WS_ARTIFACT_NAME_MAX);
	rc = ws_open_reg(name, &at, O_RDONLY, 0, &f, &st, err, errsz);
	if (rc == EISDIR)
		return EINVAL; /* not a regular file; the reason says it is a directory */
	if (rc != 0)
		return rc;
	if ((rc = ws_artifact_size(name, &st, cap, err, errsz)) != 0) {
		close(f);
		return rc;
	}
	*fd = f;
	*size = (uint64_t)st.st_size;
	return 0;
}
