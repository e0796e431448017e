/*
 * agrippa-tree remove: the supervisor's remover (supervisor/remove.c starts
 * it).  It is started for one tree, already as the tree's owner (never
 * root), with no_new_privs, PR_SET_PDEATHSIG and fd 3 a read-only
 * descriptor of the directory to empty; its stdout and stderr go back to
 * the supervisor.  It needs no handshake: what it may do is decided by the
 * descriptor and the identity it was given.
 *
 * The tree is hostile (a sandbox wrote it), so the walk follows no link,
 * never leaves fd 3's mount, and keeps at most REMOVER_DEPTH directories
 * open however deep the tree is: a directory that would be deeper is moved
 * up into fd 3 under a name of its own and emptied from there later.  It
 * is iterative, so no tree can exhaust the stack either.
 */
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "remover/remover.h"

/* One open directory of the walk.  A pass reads it to its end; it is
 * emptied once a pass sees nothing, and given up once a pass removes
 * nothing. */
struct rm_dir {
	DIR *d;
	char name[NAME_MAX + 1]; /* its name in the directory below it */
	unsigned removed;        /* entries gone from it in this pass */
	unsigned left;           /* entries seen and still there */
};

struct rm_walk {
	struct rm_dir stack[REMOVER_DEPTH];
	size_t depth;
	int top;        /* dirfd: where deep directories are moved up */
	dev_t dev;      /* its file system, never left */
	uid_t uid;      /* ours: what we may chmod */
	uint64_t count; /* entries removed */
	uint64_t moved; /* names handed out to moved directories */
	char *err;      /* the first failure, one line */
	size_t errsz;
	uint64_t failures; /* failures met (one entry may fail in several passes) */
};

/* Note a failure: the first one is kept as the reason, with the entry's
 * name made printable (it is the tree's, so anything). */
static void
rm_fail(struct rm_walk *w, const char *name, const char *what, int e)
{
	char safe[NAME_MAX + 1];
	size_t i;

	if (w->failures++ > 0)
		return;
	for (i = 0; i < sizeof(safe) - 1 && name[i] != '\0'; i++)
		safe[i] = isprint((unsigned char)name[i]) ? name[i] : '?';
	safe[i] = '\0';
	snprintf(w->err, w->errsz, "%s: %s%s%s", safe, what, e ? ": " : "", e ? strerror(e) : "");
}

/* Give a directory we own u+rwx, so that it can be read, searched and
 * written (made mode 000 or 0500 by its owner). */
static int
rm_chmod(struct rm_walk *w, int dfd, const char *name, const struct statx *sx)
{
	if ((sx->stx_mode & 0700) == 0700 || sx->stx_uid != w->uid)
		return 0;
	return fchmodat(dfd, name, (sx->stx_mode & 07777) | 0700, AT_SYMLINK_NOFOLLOW);
}

/* Move the directory name (in dfd) up into the top directory under a new
 * name: the walk meets it there again, REMOVER_DEPTH levels higher. */
static int
rm_move_up(struct rm_walk *w, int dfd, const char *name)
{
	char to[64];

	for (;;) {
		snprintf(to, sizeof(to), ".agrippa-rm-%llu", (unsigned long long)++w->moved);
		if (renameat2(dfd, name, w->top, to, RENAME_NOREPLACE) == 0)
			return 0;
		if (errno != EEXIST)
			return -1;
	}
}

/* Open the subdirectory name of dfd, checked to be the directory statx saw
 * (nothing swapped in meanwhile), and push it.  0, or -1 with errno. */
static int
rm_push(struct rm_walk *w, int dfd, const char *name, const struct statx *sx)
{
	struct rm_dir *top = &w->stack[w->depth];
	struct stat st;
	int fd;

	if ((fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) == -1)
		return -1;
	if (fstat(fd, &st) == -1 || st.st_dev != w->dev || st.st_ino != sx->stx_ino) {
		close(fd);
		errno = ESTALE;
		return -1;
	}
	if ((top->d = fdopendir(fd)) == NULL) {
		close(fd);
		return -1;
	}
	snprintf(top->name, sizeof(top->name), "%s", name);
	top->removed = top->left = 0;
	w->depth++;
	return 0;
}

/* A directory entry: emptied later (pushed), moved up, or removed at once
 * when empty. */
static void
rm_subdir(struct rm_walk *w, struct rm_dir *cur, const char *name, const struct statx *sx)
{
	int dfd = dirfd(cur->d);

	if (sx->stx_dev_major != major(w->dev) || sx->stx_dev_minor != minor(w->dev) ||
	    (sx->stx_attributes_mask & STATX_ATTR_MOUNT_ROOT &&
	     sx->stx_attributes & STATX_ATTR_MOUNT_ROOT)) {
		rm_fail(w, name, "a mount point, not crossed", 0);
		cur->left++;
		return;
	}
	if (unlinkat(dfd, name, AT_REMOVEDIR) == 0) {
		w->count++;
		cur->removed++;
		return;
	}
	if (errno == ENOENT)
		return;
	if (rm_chmod(w, dfd, name, sx) == -1) {
		rm_fail(w, name, "chmod", errno);
		cur->left++;
		return;
	}
	if (w->depth == REMOVER_DEPTH) {
		if (rm_move_up(w, dfd, name) == 0) {
			/* gone from here, and something new for the top's
			 * next pass: progress for both */
			cur->removed++;
			w->stack[0].removed++;
			return;
		}
	} else if (rm_push(w, dfd, name, sx) == 0)
		return;
	if (errno == ENOENT)
		return;
	rm_fail(w, name, w->depth == REMOVER_DEPTH ? "moving it up" : "open", errno);
	cur->left++;
}

/* One entry of the directory on top of the stack. */
static void
rm_entry(struct rm_walk *w, struct rm_dir *cur, const struct dirent *de)
{
	int dfd = dirfd(cur->d);
	struct statx sx;

	if (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN) {
		if (unlinkat(dfd, de->d_name, 0) == 0) {
			w->count++;
			cur->removed++;
			return;
		}
		if (errno == ENOENT)
			return;
		if (errno != EISDIR) { /* no: d_type may lie only as a directory */
			rm_fail(w, de->d_name, "unlink", errno);
			cur->left++;
			return;
		}
	}
	if (statx(dfd, de->d_name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT,
	          STATX_TYPE | STATX_MODE | STATX_UID | STATX_INO, &sx) == -1) {
		if (errno != ENOENT) {
			rm_fail(w, de->d_name, "stat", errno);
			cur->left++;
		}
		return;
	}
	if (S_ISDIR(sx.stx_mode)) {
		rm_subdir(w, cur, de->d_name, &sx);
		return;
	}
	if (unlinkat(dfd, de->d_name, 0) == 0) {
		w->count++;
		cur->removed++;
	} else if (errno != ENOENT) {
		rm_fail(w, de->d_name, "unlink", errno);
		cur->left++;
	}
}

/* The directory on top is read to its end: pass again, or pop it (removed
 * from its parent when it is empty, given up when the pass did nothing). */
static void
rm_pass_done(struct rm_walk *w)
{
	struct rm_dir *cur = &w->stack[w->depth - 1], *parent;
	int empty = cur->removed == 0 && cur->left == 0;

	if (cur->removed > 0) {
		rewinddir(cur->d);
		cur->removed = cur->left = 0;
		return;
	}
	w->depth--;
	if (w->depth == 0) {
		closedir(cur->d);
		return;
	}
	parent = &w->stack[w->depth - 1];
	closedir(cur->d);
	if (!empty) {
		parent->left++;
		return;
	}
	if (unlinkat(dirfd(parent->d), cur->name, AT_REMOVEDIR) == 0) {
		w->count++;
		parent->removed++;
	} else if (errno != ENOENT) {
		rm_fail(w, cur->name, "rmdir", errno);
		parent->left++;
	}
}

int
remover_empty(int dirfd, uint64_t *count, char *err, size_t errsz)
{
	struct rm_walk *w;
	struct dirent *de;
	struct stat st;
	int fd, rv = -1;

	*count = 0;
	snprintf(err, errsz, "out of memory");
	if ((w = calloc(1, sizeof(*w))) == NULL)
		return -1;
	w->err = err;
	w->errsz = errsz;
	w->top = dirfd;
	w->uid = geteuid();
	if (fstat(dirfd, &st) == -1 || (fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0)) == -1) {
		snprintf(err, errsz, "the directory: %s", strerror(errno));
		goto out;
	}
	w->dev = st.st_dev;
	if ((st.st_mode & 0700) != 0700 && fchmod(dirfd, (st.st_mode & 07777) | 0700) == -1) {
		snprintf(err, errsz, "the directory: chmod: %s", strerror(errno));
		close(fd);
		goto out;
	}
	if ((w->stack[0].d = fdopendir(fd)) == NULL) {
		snprintf(err, errsz, "the directory: %s", strerror(errno));
		close(fd);
		goto out;
	}
	w->depth = 1;
	while (w->depth > 0) {
		errno = 0;
		if ((de = readdir(w->stack[w->depth - 1].d)) == NULL) {
			if (errno != 0) {
				rm_fail(w, w->depth > 1 ? w->stack[w->depth - 1].name : ".", "read",
				        errno);
				w->stack[w->depth - 1].left++;
				w->stack[w->depth - 1].removed = 0; /* no endless passes */
			}
			rm_pass_done(w);
			continue;
		}
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			rm_entry(w, &w->stack[w->depth - 1], de);
	}
	*count = w->count;
	if (w->failures == 0)
		rv = 0;
	else if (w->failures > 1) {
		size_t n = strlen(err);

		snprintf(err + n, errsz - n, ", and more");
	}
out:
	free(w);
	return rv;
}

/* The descriptor the supervisor gave: a directory we own, open for
 * reading.  By hand (nothing on fd 3, a file) the remover refuses. */
static void
remover_check(void)
{
	struct stat st;
	int fl;

	if ((fl = fcntl(REMOVER_FD, F_GETFL)) == -1 || fstat(REMOVER_FD, &st) == -1)
		fatalx("no directory on fd %d (the remover is started by agrippad only)",
		       REMOVER_FD);
	if (!S_ISDIR(st.st_mode) || (fl & O_PATH) || (fl & O_ACCMODE) != O_RDONLY)
		fatalx("fd %d is not a directory open for reading (the remover is started by "
		       "agrippad only)",
		       REMOVER_FD);
	if (st.st_uid != geteuid())
		fatalx("the directory on fd %d is not ours (uid %lu): the remover runs as the "
		       "tree's owner",
		       REMOVER_FD, (unsigned long)st.st_uid);
}

void
remover_main(void)
{
	struct rlimit core = {0, 0};
	char err[512];
	uint64_t n;

	/* Our stderr is the supervisor's pipe: one line, no syslog. */
	log_init(1, 0, 0);
	log_procinit("remove");
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == -1 || setrlimit(RLIMIT_CORE, &core) == -1)
		fatal("set-up");
	if (geteuid() == 0 || getuid() == 0)
		fatalx("refusing to run as root (the remover is started by agrippad only, as "
		       "the tree's owner)");
	remover_check();
	if (remover_empty(REMOVER_FD, &n, err, sizeof(err)) == -1)
		fatalx("%s (%llu entries removed)", err, (unsigned long long)n);
	printf("%llu\n", (unsigned long long)n);
	if (fflush(stdout) == EOF)
		exit(1);
	exit(0);
}
