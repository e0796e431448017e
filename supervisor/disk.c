/*
 * A run's workspace on a filesystem of its own (sandbox.disk in
 * agrippad.conf(5)), so that a run that fills its workspace gets ENOSPC
 * there and nothing else on the host notices: not the embedded database,
 * not the mirrors, not the other runs.
 *
 * STATE/runs/RUN/disk.img is a sparse file of sandbox.disk bytes, made an
 * ext4 filesystem by Debian's mkfs.ext4 in a child process (never on the
 * supervisor's loop), attached to a free loop device with autoclear and
 * mounted (nosuid, nodev) at STATE/runs/RUN/disk; the workspace is its
 * directory ws (lost+found stays beside it).  The image grows only as the
 * run writes, up to its size; its space is given back when the run ends
 * (the mount detached, which frees the loop device, and the image
 * unlinked).  A run resumed after a restart of the daemon finds its disk
 * still mounted, or mounts its image again.
 *
 * Root mode only; where the host has no loop devices or no mkfs.ext4 the
 * daemon says so once at start and runs without the limit.  One image is
 * made ahead while runs come (the spares, below), so that a run's set-up
 * rarely waits for mkfs.
 */
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "supervisor/supervisor.h"

#define DISK_MKFS "/sbin/mkfs.ext4"
#define DISK_LOOP_CONTROL "/dev/loop-control"

struct disk_job {
	LIST_ENTRY(disk_job) entry;
	pid_t pid;         /* its mkfs; 0 when it took the spare */
	struct event *ev;  /* ... then: the mount, just after disk_make returns */
	char img[PATH_MAX], mnt[PATH_MAX];
	disk_cb cb; /* NULL once abandoned */
	void *arg;
};
static LIST_HEAD(, disk_job) disk_jobs = LIST_HEAD_INITIALIZER(disk_jobs);
static int disk_ok = -1; /* -1 not checked yet, 0 no, 1 yes */

/*
 * The spares: DISK_SPARES images made ahead (STATE/runs/spare-disk.N.img,
 * sandbox.disk bytes, mkfs done), one of which the next run's disk_make renames to its own
 * instead of waiting for mkfs.ext4 (about 20 ms of each run's set-up).  A
 * new one is made DISK_SPARE_DELAY_MS after one is taken, when the run
 * that took it is past its set-up; a sparse image with lazy
 * initialisation holds about 4 MiB.  One whose size is no longer
 * sandbox.disk (a reload) is thrown away.
 */
#define DISK_SPARE_DELAY_MS 50
#define DISK_SPARES 2 /* a run that comes before the one taken is made again finds one */
static struct spare {
	pid_t pid; /* its mkfs, 0 none */
	int ready;
	uint64_t size;
	char path[PATH_MAX];
} spares[DISK_SPARES];
static struct event *spare_ev; /* the making, later */

int
disk_enabled(void)
{
	if (sup.devmode || sup.conf.sandbox.disk == 0)
		return 0; /* not asked for here: nothing to say */
	if (disk_ok == -1) {
		if (access(DISK_LOOP_CONTROL, R_OK | W_OK) == -1)
			log_warnx("sandbox.disk is not enforced: %s: %s", DISK_LOOP_CONTROL,
			    strerror(errno));
		else if (access(DISK_MKFS, X_OK) == -1)
			log_warnx("sandbox.disk is not enforced: %s: %s (Debian's e2fsprogs)",
			    DISK_MKFS, strerror(errno));
		else
			disk_ok = 1;
		if (disk_ok == -1)
			disk_ok = 0;
	}
	return disk_ok;
}

/* In the child: mkfs.ext4 on img, its root directory owned by uid:gid.
 * Never returns. */
static void __attribute__((noreturn))
disk_mkfs_exec(const char *img, uid_t uid, gid_t gid)
{
	char *env[] = {"PATH=/usr/sbin:/sbin:/usr/bin:/bin", "LC_ALL=C", NULL};
	char ext[128];
	int nul;

	snprintf(ext, sizeof(ext), "lazy_itable_init=1,lazy_journal_init=1,nodiscard,root_owner=%lu:%lu",
	    (unsigned long)uid, (unsigned long)gid);
	if ((nul = open("/dev/null", O_RDWR)) == -1 || dup2(nul, 0) == -1 || dup2(nul, 1) == -1)
		_exit(126);
	closefrom(3);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1 ||
	    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) == -1)
		_exit(126);
	execle(DISK_MKFS, "mkfs.ext4", "-q", "-F", "-m", "0", "-E", ext, "-L", "agrippa-ws", img,
	    (char *)NULL, env);
	_exit(127);
}

/* The spares are made now (or are there, or being made). */
static void
spare_make(evutil_socket_t fd, short what, void *arg)
{
	char runs[PATH_MAX];
	struct spare *sp;
	pid_t pid;
	size_t i;
	int ifd;

	(void)fd, (void)what, (void)arg;
	if (sup.stopping || !disk_enabled() ||
	    fmt_ok(runs, sizeof(runs), "%s/runs", sup.conf.state_dir) == -1 ||
	    (mkdir(runs, 0711) == -1 && errno != EEXIST))
		return;
	for (i = 0; i < DISK_SPARES; i++) {
		sp = &spares[i];
		if (sp->pid != 0 || sp->ready)
			continue;
		if (fmt_ok(sp->path, sizeof(sp->path), "%s/spare-disk.%zu.img", runs, i) == -1)
			return;
		if ((ifd = open(sp->path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
		                0600)) == -1 ||
		    ftruncate(ifd, (off_t)sup.conf.sandbox.disk) == -1 || (pid = fork()) == -1) {
			log_warn("the spare disk %s", sp->path);
			if (ifd != -1)
				close(ifd);
			unlink(sp->path);
			return;
		}
		close(ifd);
		if (pid == 0)
			disk_mkfs_exec(sp->path, 0, 0);
		sp->pid = pid;
		sp->size = sup.conf.sandbox.disk;
	}
}

/* A spare made in a while. */
static void
spare_later(void)
{
	struct timeval tv = {0, DISK_SPARE_DELAY_MS * 1000};

	if (spare_ev == NULL && (spare_ev = evtimer_new(sup.base, spare_make, NULL)) == NULL)
		fatalx("the spare disk: event set-up");
	if (!evtimer_pending(spare_ev, NULL))
		evtimer_add(spare_ev, &tv);
}

void
disk_spare_prepare(void)
{
	if (disk_enabled())
		spare_later();
}

void
disk_spare_stop(void)
{
	size_t i;

	if (spare_ev != NULL)
		evtimer_del(spare_ev);
	for (i = 0; i < DISK_SPARES; i++) {
		if (spares[i].pid != 0)
			kill(spares[i].pid, SIGKILL);
		if (spares[i].pid != 0 || spares[i].ready)
			unlink(spares[i].path);
		spares[i].ready = 0;
	}
}

/* A job that took the spare: its disk is mounted now, off disk_make's
 * stack, and its asker hears. */
static void
disk_spare_mount(evutil_socket_t fd, short what, void *arg)
{
	struct disk_job *j = arg;
	char err[512];
	int ok;

	(void)fd, (void)what;
	LIST_REMOVE(j, entry);
	event_free(j->ev);
	if (j->cb == NULL) { /* abandoned */
		unlink(j->img);
		free(j);
		return;
	}
	ok = disk_mount(j->img, j->mnt, err, sizeof(err)) == 0;
	if (!ok)
		unlink(j->img);
	j->cb(j->arg, ok, ok ? "" : err);
	free(j);
}

/* The spare, renamed to img, for a job: the job, or NULL (none fits). */
static struct disk_job *
spare_take(const char *img, const char *mnt, uid_t uid, gid_t gid, disk_cb cb, void *arg)
{
	struct timeval now = {0, 0};
	struct disk_job *j;

	struct spare *sp = NULL;
	size_t i;

	for (i = 0; i < DISK_SPARES; i++) {
		if (!spares[i].ready)
			continue;
		if (spares[i].size != sup.conf.sandbox.disk) { /* sandbox.disk changed */
			unlink(spares[i].path);
			spares[i].ready = 0;
			continue;
		}
		if (sp == NULL)
			sp = &spares[i];
	}
	if (sp == NULL || uid != 0 || gid != 0 || (mkdir(mnt, 0700) == -1 && errno != EEXIST) ||
	    rename(sp->path, img) == -1)
		return NULL;
	sp->ready = 0;
	if ((j = calloc(1, sizeof(*j))) == NULL)
		fatal("calloc");
	snprintf(j->img, sizeof(j->img), "%s", img);
	snprintf(j->mnt, sizeof(j->mnt), "%s", mnt);
	j->cb = cb;
	j->arg = arg;
	if ((j->ev = evtimer_new(sup.base, disk_spare_mount, j)) == NULL ||
	    evtimer_add(j->ev, &now) == -1)
		fatalx("the run's disk: event set-up");
	LIST_INSERT_HEAD(&disk_jobs, j, entry);
	return j;
}

struct disk_job *
disk_make(const char *img, const char *mnt, uid_t uid, gid_t gid, disk_cb cb, void *arg,
          char *err, size_t errsz)
{
	struct disk_job *j;
	pid_t pid;
	int fd;

	if ((j = spare_take(img, mnt, uid, gid, cb, arg)) != NULL) {
		spare_later();
		return j;
	}
	spare_later();
	if ((fd = open(img, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600)) == -1 ||
	    ftruncate(fd, (off_t)sup.conf.sandbox.disk) == -1) {
		snprintf(err, errsz, "the run's disk: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		unlink(img);
		return NULL;
	}
	close(fd);
	if ((mkdir(mnt, 0700) == -1 && errno != EEXIST) || (pid = fork()) == -1) {
		snprintf(err, errsz, "the run's disk: %s", strerror(errno));
		unlink(img);
		return NULL;
	}
	if (pid == 0)
		disk_mkfs_exec(img, uid, gid);
	if ((j = calloc(1, sizeof(*j))) == NULL)
		fatal("calloc");
	j->pid = pid;
	snprintf(j->img, sizeof(j->img), "%s", img);
	snprintf(j->mnt, sizeof(j->mnt), "%s", mnt);
	j->cb = cb;
	j->arg = arg;
	LIST_INSERT_HEAD(&disk_jobs, j, entry);
	return j;
}

void
disk_abandon(struct disk_job *j)
{
	j->cb = NULL;
	if (j->pid != 0)
		kill(j->pid, SIGKILL);
}

/* mnt is a mount point: a different device from its parent's. */
static int
disk_mounted(const char *mnt)
{
	char parent[PATH_MAX];
	struct stat a, b;

	if (fmt_ok(parent, sizeof(parent), "%s/..", mnt) == -1 || lstat(mnt, &a) == -1 ||
	    stat(parent, &b) == -1)
		return 0;
	return S_ISDIR(a.st_mode) && a.st_dev != b.st_dev;
}

/* img on a free loop device (autoclear: freed when unmounted); the
 * device's descriptor, or -1 with errno set. */
static int
disk_loop(const char *img, char *dev, size_t devsz)
{
	struct loop_config lc;
	int ctl, n, lfd = -1, ifd, tries, e;

	if ((ifd = open(img, O_RDWR | O_NOFOLLOW | O_CLOEXEC)) == -1)
		return -1;
	if ((ctl = open(DISK_LOOP_CONTROL, O_RDWR | O_CLOEXEC)) == -1) {
		e = errno;
		close(ifd);
		errno = e;
		return -1;
	}
	for (tries = 0; tries < 8; tries++) {
		if ((n = ioctl(ctl, LOOP_CTL_GET_FREE)) < 0)
			break;
		snprintf(dev, devsz, "/dev/loop%d", n);
		if ((lfd = open(dev, O_RDWR | O_CLOEXEC)) == -1)
			break;
		memset(&lc, 0, sizeof(lc));
		lc.fd = (unsigned int)ifd;
		lc.info.lo_flags = LO_FLAGS_AUTOCLEAR;
		snprintf((char *)lc.info.lo_file_name, sizeof(lc.info.lo_file_name), "%s", img);
		if (ioctl(lfd, LOOP_CONFIGURE, &lc) == 0)
			break;
		e = errno;
		close(lfd);
		lfd = -1;
		errno = e;
		if (e != EBUSY) /* another took that device meanwhile: the next */
			break;
	}
	e = errno;
	close(ctl);
	close(ifd);
	errno = e;
	return lfd;
}

int
disk_mount(const char *img, const char *mnt, char *err, size_t errsz)
{
	char dev[64];
	int lfd;

	if (disk_mounted(mnt))
		return 0;
	if ((lfd = disk_loop(img, dev, sizeof(dev))) == -1) {
		snprintf(err, errsz, "the run's disk: a loop device: %s", strerror(errno));
		return -1;
	}
	if (mount(dev, mnt, "ext4", MS_NOSUID | MS_NODEV | MS_NOATIME, "") == -1) {
		snprintf(err, errsz, "the run's disk: mount: %s", strerror(errno));
		close(lfd); /* autoclear frees the device with its last reference */
		return -1;
	}
	close(lfd);
	return 0;
}

void
disk_release(const char *mnt, const char *img)
{
	if (disk_mounted(mnt) && umount2(mnt, MNT_DETACH) == -1)
		log_warn("the run's disk %s", mnt);
	if (unlink(img) == -1 && errno != ENOENT)
		log_warn("the run's disk %s", img);
}

int
disk_reaped(pid_t pid, int status)
{
	struct disk_job *j;
	char err[512];
	int ok;

	size_t i;

	for (i = 0; i < DISK_SPARES; i++) {
		struct spare *sp = &spares[i];

		if (sp->pid == 0 || pid != sp->pid)
			continue;
		sp->pid = 0;
		sp->ready = WIFEXITED(status) && WEXITSTATUS(status) == 0;
		if (!sp->ready) {
			if (!sup.stopping)
				log_warnx("the spare disk: mkfs.ext4 failed (%s %d)",
				          WIFEXITED(status) ? "status" : "signal",
				          WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
			unlink(sp->path);
		}
		return 1;
	}
	LIST_FOREACH(j, &disk_jobs, entry) {
		if (j->pid == 0 || j->pid != pid)
			continue;
		LIST_REMOVE(j, entry);
		ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
		if (j->cb == NULL) { /* abandoned: its run is over here */
			unlink(j->img);
			free(j);
			return 1;
		}
		if (!ok)
			snprintf(err, sizeof(err), "the run's disk: mkfs.ext4 failed (%s %d)",
			    WIFEXITED(status) ? "status" : "signal",
			    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
		else if (disk_mount(j->img, j->mnt, err, sizeof(err)) == -1)
			ok = 0;
		if (!ok)
			unlink(j->img);
		j->cb(j->arg, ok, ok ? "" : err);
		free(j);
		return 1;
	}
	return 0;
}
