/*
 * agrippa-tree chown UID GID [BASE]: the supervisor's chowner (supervisor/runs.c
 * starts it through transient.c).  A workspace is written by the git
 * helper as the service user and then given to the sandbox user; giving a
 * tree of a hundred thousand files is O(files), so it is done here, off
 * the supervisor's loop.  The chowner runs as the tree's owner with
 * CAP_CHOWN as its only capability (permitted, effective, ambient; the
 * bounding set holds nothing else), no_new_privs and PR_SET_PDEATHSIG, and
 * fd 3 a read-only descriptor of the directory to give.  With BASE (the
 * commit checked out there), fd 4 is a private file of its own to which it
 * writes the list of what it gave, as it was right after
 * (common/wsstat.h).
 *
 * The tree's content comes from a hostile repository, but nobody writes
 * it while the chowner runs (the git helper has exited, the sandbox is
 * not started).  The walk follows no link (a symbolic link is given
 * itself, never its target), never leaves fd 3's file system, and gives
 * only what is its own: an entry of another owner is an error, so that
 * no path, however the tree was made, lets CAP_CHOWN reach anything else.
 */
#include <sys/capability.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "common/wsstat.h"
#include "remover/remover.h"

#define CHOWN_OPEN_DIRS 16 /* directories nftw holds open at once */

static struct {
	uid_t self, uid;
	gid_t gid;
	dev_t dev;
	uint64_t count;
	FILE *list;      /* the list of what was given (common/wsstat.h), or NULL */
	uint64_t listed; /* its records */
	int spoilt;      /* a write failed or it outgrew WSSTAT_MAX: no list */
	char err[512];
} cw;

/* One record of the list: the entry at path (as nftw names it, "./a/b"),
 * as it is now. */
static void
cw_list(const char *path)
{
	struct stat st;
	int n;

	if (cw.list == NULL || cw.spoilt)
		return;
	if (fstatat(AT_FDCWD, path, &st, AT_SYMLINK_NOFOLLOW) == -1 ||
	    !(S_ISREG(st.st_mode) || S_ISLNK(st.st_mode))) {
		cw.spoilt = 1;
		return;
	}
	if (path[0] == '.' && path[1] == '/')
		path += 2;
	n = fprintf(cw.list, "%c %o %ju %ju %ju %ju %jd %jd %ld %jd %ld %s%c",
	            S_ISREG(st.st_mode) ? 'f' : 'l', (unsigned)st.st_mode, (uintmax_t)st.st_ino,
	            (uintmax_t)st.st_dev, (uintmax_t)st.st_uid, (uintmax_t)st.st_gid,
	            (intmax_t)st.st_size, (intmax_t)st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
	            (intmax_t)st.st_ctim.tv_sec, st.st_ctim.tv_nsec, path, '\0');
	if (n < 0 || ftell(cw.list) > (long)WSSTAT_MAX)
		cw.spoilt = 1;
	else
		cw.listed++;
}

/* The list ended (the top directory, given last, stamps it), or emptied
 * when it is spoilt: a file without its end record is no list. */
static void
cw_list_end(int dirfd, int listfd)
{
	struct stat st;

	if (cw.list == NULL)
		return;
	if (cw.spoilt || fstat(dirfd, &st) == -1 ||
	    fprintf(cw.list, "end %ju %jd %ld%c", (uintmax_t)cw.listed,
	            (intmax_t)st.st_ctim.tv_sec, st.st_ctim.tv_nsec, '\0') < 0)
		cw.spoilt = 1;
	/* written out (or not) before it is emptied: nothing comes after */
	if (fclose(cw.list) == EOF)
		cw.spoilt = 1;
	cw.list = NULL;
	if (cw.spoilt && ftruncate(listfd, 0) == -1)
		log_warn("emptying the list"); /* its end is missing: still no list */
}

/* Note the failure (the entry's name made printable: it is the tree's). */
static int
cw_fail(const char *path, const char *what, int e)
{
	char safe[256];
	size_t i;

	for (i = 0; i < sizeof(safe) - 1 && path[i] != '\0'; i++)
		safe[i] = (path[i] >= 0x20 && path[i] < 0x7f) ? path[i] : '?';
	safe[i] = '\0';
	snprintf(cw.err, sizeof(cw.err), "%s: %s%s%s", safe, what, e ? ": " : "",
	         e ? strerror(e) : "");
	return 1; /* stops the walk */
}

/* One entry, after everything in it (FTW_DEPTH: a directory is still ours,
 * whatever its mode, while it is walked).  Its path is relative to the
 * tree and made of directories only (FTW_PHYS enters no link), and nobody
 * else writes in the tree. */
static int
cw_entry(const char *path, const struct stat *st, int type, struct FTW *f)
{
	if (type == FTW_NS || type == FTW_DNR || type == FTW_SLN)
		return cw_fail(path, type == FTW_NS ? "stat" : "cannot be read", errno);
	if (st->st_dev != cw.dev)
		return cw_fail(path, "on another file system", 0);
	if (st->st_uid != cw.self)
		return cw_fail(path, "not the service user's", 0);
	if (fchownat(AT_FDCWD, path, cw.uid, cw.gid, AT_SYMLINK_NOFOLLOW) == -1)
		return cw_fail(path, "chown", errno);
	cw.count++;
	if (type == FTW_F || type == FTW_SL)
		cw_list(path);
	return 0;
}

int
chowner_give(int dirfd, uid_t uid, gid_t gid, int listfd, const char *base, uint64_t *count,
             char *err, size_t errsz)
{
	struct stat st;
	int rv, fd;

	*count = 0;
	memset(&cw, 0, sizeof(cw));
	cw.self = geteuid();
	cw.uid = uid;
	cw.gid = gid;
	if (fstat(dirfd, &st) == -1 || fchdir(dirfd) == -1) {
		snprintf(err, errsz, "the directory: %s", strerror(errno));
		return -1;
	}
	cw.dev = st.st_dev;
	/* the list is a help, not a duty: without it every file is hashed */
	if (listfd != -1 && base != NULL && ftruncate(listfd, 0) == 0 &&
	    lseek(listfd, 0, SEEK_SET) == 0 && (fd = dup(listfd)) != -1) {
		if ((cw.list = fdopen(fd, "w")) == NULL)
			close(fd);
		else if (fprintf(cw.list, "%s %s%c", WSSTAT_MAGIC, base, '\0') < 0)
			cw.spoilt = 1;
	}
	/* FTW_PHYS: no link followed; FTW_MOUNT: no other file system;
	 * FTW_DEPTH: a directory after its entries.  The git helper writes
	 * no path longer than PATH_MAX, so each is named from the tree's top
	 * (a longer one is an error, ENAMETOOLONG). */
	rv = nftw(".", cw_entry, CHOWN_OPEN_DIRS, FTW_PHYS | FTW_MOUNT | FTW_DEPTH);
	*count = cw.count;
	cw.spoilt |= rv != 0;
	cw_list_end(dirfd, listfd);
	if (rv == 0)
		return 0;
	if (cw.err[0] == '\0')
		snprintf(cw.err, sizeof(cw.err), "the walk: %s", strerror(errno));
	snprintf(err, errsz, "%s", cw.err);
	return -1;
}

/* Our capabilities are CAP_CHOWN and nothing else, in every set. */
static int
chowner_caps_ok(void)
{
	cap_value_t chown_cap = CAP_CHOWN, cap, max = cap_max_bits();
	cap_t cur, want;
	int ok;

	if ((cur = cap_get_proc()) == NULL || (want = cap_init()) == NULL)
		fatal("cap_get_proc");
	if (cap_set_flag(want, CAP_PERMITTED, 1, &chown_cap, CAP_SET) == -1 ||
	    cap_set_flag(want, CAP_EFFECTIVE, 1, &chown_cap, CAP_SET) == -1 ||
	    cap_set_flag(want, CAP_INHERITABLE, 1, &chown_cap, CAP_SET) == -1)
		fatal("cap_set_flag");
	ok = cap_compare(cur, want) == 0;
	for (cap = 0; ok && cap < max; cap++)
		if (cap != CAP_CHOWN && (cap_get_bound(cap) > 0 || cap_get_ambient(cap) > 0))
			ok = 0;
	cap_free(cur);
	cap_free(want);
	return ok;
}

/* base: a full commit id in lower-case hex (SHA-1 or SHA-256). */
static int
chowner_is_base(const char *base)
{
	size_t len = strlen(base);

	return (len == 40 || len == 64) && strspn(base, "0123456789abcdef") == len;
}

/* fd: open for writing, a regular file of ours that nobody else may read. */
static int
chowner_list_ok(int fd)
{
	struct stat st;
	int fl;

	return (fl = fcntl(fd, F_GETFL)) != -1 && (fl & O_ACCMODE) != O_RDONLY &&
	       !(fl & O_PATH) && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	       st.st_uid == geteuid() && (st.st_mode & 077) == 0;
}

void
chowner_main(const char *uid_s, const char *gid_s, const char *base)
{
	struct rlimit core = {0, 0};
	uint64_t uid, gid, n;
	struct stat st;
	char err[600];
	int fl, listfd = -1;

	log_init(1, 0, 0); /* our stderr is the supervisor's pipe */
	log_procinit("chown");
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == -1 || setrlimit(RLIMIT_CORE, &core) == -1)
		fatal("set-up");
	if (dec_parse(uid_s, strlen(uid_s), UINT32_MAX - 1, &uid) == -1 ||
	    dec_parse(gid_s, strlen(gid_s), UINT32_MAX - 1, &gid) == -1 || uid == 0 || gid == 0)
		fatalx("bad user or group \"%s:%s\" (the chowner is started by agrippad only)",
		       uid_s, gid_s);
	if (geteuid() == 0 || getuid() == 0)
		fatalx("refusing to run as root (the chowner is started by agrippad only, as the "
		       "tree's owner)");
	if (!chowner_caps_ok())
		fatalx("refusing to run without CAP_CHOWN or with another capability (the chowner "
		       "is started by agrippad only)");
	if ((fl = fcntl(REMOVER_FD, F_GETFL)) == -1 || fstat(REMOVER_FD, &st) == -1 ||
	    !S_ISDIR(st.st_mode) || (fl & O_PATH) || (fl & O_ACCMODE) != O_RDONLY)
		fatalx("no directory open for reading on fd %d (the chowner is started by agrippad "
		       "only)",
		       REMOVER_FD);
	if (st.st_uid != geteuid())
		fatalx("the directory on fd %d is not ours (uid %lu)", REMOVER_FD,
		       (unsigned long)st.st_uid);
	if (base != NULL) {
		if (!chowner_is_base(base))
			fatalx("bad commit \"%.80s\" (the chowner is started by agrippad only)", base);
		if (!chowner_list_ok(WSSTAT_FD))
			fatalx("no file of ours, open for writing and private, on fd %d for the list "
			       "(the chowner is started by agrippad only)",
			       WSSTAT_FD);
		listfd = WSSTAT_FD;
	}
	if (chowner_give(REMOVER_FD, (uid_t)uid, (gid_t)gid, listfd, base, &n, err,
	                 sizeof(err)) == -1)
		fatalx("%s (%llu entries given)", err, (unsigned long long)n);
	printf("%llu\n", (unsigned long long)n);
	if (fflush(stdout) == EOF)
		exit(1);
	exit(0);
}
