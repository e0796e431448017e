/*
 * Removing trees without blocking the event loop.  A tree of a hundred
 * thousand files takes seconds to remove, and the supervisor's loop answers
 * every child's database operations, so the loop never walks a tree: it
 * opens the directory (O_NOFOLLOW) and hands the descriptor, as fd 3, to a
 * transient remover (agrippa-tree remove, remover/remover.c; started by
 * transient.c) that runs as the directory's owner (the sandbox user for a
 * workspace, the service user for a mirror or a scratch checkout; in
 * development mode the daemon's own user), with no capability, and empties
 * it.  When it has exited and its output is read, the supervisor removes
 * the empty directory with one rmdir.
 *
 * A directory owned by root (in root mode: a run's STATE/runs/RUN, made by
 * the supervisor and holding only what it put there) is never given to a
 * remover: the supervisor lists its few entries, removes each as above,
 * and then the directory.
 *
 * At most RM_PARALLEL removers run at once (removing is bound by the disk,
 * not the processor); more trees wait their turn in order.
 *
 * A remover that fails leaves its tree for the sweep at the next start;
 * nothing is ever removed recursively on the loop.  A supervisor that
 * exits kills its removers (PR_SET_PDEATHSIG); the sweeps take up what
 * they left.
 */
#include <sys/queue.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "remover/remover.h"
#include "supervisor/supervisor.h"

#define RM_TRIES 3      /* removers per tree when something reappears */
#define RM_NEST_MAX 2   /* root-owned directories inside each other */
#define RM_PARALLEL 4   /* removers at once */

struct rmjob {
	LIST_ENTRY(rmjob) entry;
	TAILQ_ENTRY(rmjob) wait; /* in rmwaiting while queued */
	int queued;
	char path[PATH_MAX];
	struct rmjob *parent; /* the root-owned directory this is an entry of */
	unsigned children;    /* a root-owned directory: entries still going */
	int listed;           /* ... all of them listed */
	int failed;           /* ... one of them stays */
	unsigned nest;
	pid_t pid; /* the remover at work, 0 for none */
	unsigned tries;
	struct timespec t0;
};
static LIST_HEAD(, rmjob) rmjobs = LIST_HEAD_INITIALIZER(rmjobs);
static TAILQ_HEAD(, rmjob) rmwaiting = TAILQ_HEAD_INITIALIZER(rmwaiting);
static unsigned rmrunning; /* removers started and not yet finished */

static int rm_start(const char *path, struct rmjob *parent);
static void rm_child_done(struct rmjob *parent, int ok);

static long
rm_ms(const struct rmjob *j)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - j->t0.tv_sec) * 1000 + (now.tv_nsec - j->t0.tv_nsec) / 1000000;
}

/* The job is over (ok or not): forget it and tell its parent. */
static void
rm_done(struct rmjob *j, int ok)
{
	struct rmjob *parent = j->parent;

	if (j->queued)
		TAILQ_REMOVE(&rmwaiting, j, wait);
	LIST_REMOVE(j, entry);
	free(j);
	if (parent != NULL)
		rm_child_done(parent, ok);
}

/* The emptied directory itself, with one rmdir. */
static int
rm_rmdir(struct rmjob *j, const char *what)
{
	if (rmdir(j->path) == -1 && errno != ENOENT)
		return -1;
	log_info("removed %s%s in %ld ms", j->path, what, rm_ms(j));
	return 0;
}

static void rm_exited(void *arg, int status, char *out);

/* Start a remover on the open directory fd (owned by st's owner); fd is
 * closed.  0, or -1 (logged). */
static int
rm_spawn(struct rmjob *j, int fd, const struct stat *st)
{
	if ((j->pid = transient_start("remove", NULL, fd, -1, st->st_uid, st->st_gid, 0, rm_exited,
	                              j)) == -1) {
		j->pid = 0;
		log_warnx("cannot remove %s: no remover", j->path);
		return -1;
	}
	j->tries++;
	rmrunning++;
	log_debug("remover %ld started for %s (uid %lu)", (long)j->pid, j->path,
	          (unsigned long)st->st_uid);
	return 0;
}

static int rm_list(struct rmjob *j, int fd);

/* Open j's directory and start a remover on it, or queue j when enough
 * run; a directory owned by root is listed here instead.  0 (under way),
 * 1 (the directory is gone already), or -1 (logged). */
static int
rm_open(struct rmjob *j)
{
	struct stat st;
	int fd;

	if ((fd = open(j->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) == -1 &&
	    errno == ENOENT)
		return 1;
	if (fd == -1 || fstat(fd, &st) == -1) {
		log_warn("cannot remove %s", j->path);
		if (fd != -1)
			close(fd);
		return -1;
	}
	if (!sup.devmode && st.st_uid == 0)
		return rm_list(j, fd);
	if (rmrunning >= RM_PARALLEL) {
		close(fd); /* opened again when its turn comes */
		j->queued = 1;
		TAILQ_INSERT_TAIL(&rmwaiting, j, wait);
		return 0;
	}
	return rm_spawn(j, fd, &st);
}

/* A remover is done: the next trees in line get theirs. */
static void
rm_next(void)
{
	struct rmjob *j;

	while (rmrunning < RM_PARALLEL && (j = TAILQ_FIRST(&rmwaiting)) != NULL) {
		TAILQ_REMOVE(&rmwaiting, j, wait);
		j->queued = 0;
		switch (rm_open(j)) {
		case 1:
			rm_done(j, 1);
			break;
		case -1:
			rm_done(j, 0);
			break;
		}
	}
}

/* A root-owned directory: each entry removed on its own, then itself. */
static int
rm_list(struct rmjob *j, int fd)
{
	char sub[PATH_MAX];
	struct dirent *de;
	DIR *d;

	if (j->nest >= RM_NEST_MAX) {
		log_warnx("cannot remove %s: root's directories nest too deep", j->path);
		close(fd);
		return -1;
	}
	if ((d = fdopendir(fd)) == NULL) {
		log_warn("cannot remove %s", j->path);
		close(fd);
		return -1;
	}
	j->children++; /* held until every entry is listed */
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (fmt_ok(sub, sizeof(sub), "%s/%s", j->path, de->d_name) == -1) {
			j->failed = 1;
			continue;
		}
		switch (rm_start(sub, j)) {
		case 0:
			j->children++;
			break;
		case -1:
			j->failed = 1;
			break;
		}
	}
	closedir(d);
	j->listed = 1;
	return 0;
}

/* Every entry of a root-owned directory is over: itself now.  0, or -1
 * (logged). */
static int
rm_list_end(struct rmjob *j)
{
	if (j->failed) {
		log_warnx("cannot remove %s: an entry of it stays (the sweep at the next start "
		          "tries again)",
		          j->path);
		return -1;
	}
	if (rm_rmdir(j, "") == -1) {
		log_warn("cannot remove %s", j->path);
		return -1;
	}
	return 0;
}

static void
rm_child_done(struct rmjob *parent, int ok)
{
	if (!ok)
		parent->failed = 1;
	if (--parent->children > 0)
		return;
	rm_done(parent, rm_list_end(parent) == 0);
}

/* Log what a remover printed but its count: its failure, or a sanitizer's
 * report. */
static void
rm_log_output(struct rmjob *j, char *from)
{
	char *line, *save = NULL;

	for (line = strtok_r(from, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save))
		log_warnx("remover %ld: %s", (long)j->pid, line);
}

/* The remover has exited and its output is read: the tree is empty (then
 * the directory goes), or it could not be emptied. */
static void
rm_finish(struct rmjob *j, int status, char *out)
{
	unsigned long long n = 0;
	char what[64], *end;
	int rv, ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;

	rmrunning--;
	if (ok) {
		n = strtoull(out, &end, 10);
		if (end == out || (*end != '\n' && *end != '\0'))
			rm_log_output(j, out);
		else if (end[0] != '\0' && end[1] != '\0')
			rm_log_output(j, end + 1);
		snprintf(what, sizeof(what), " (%llu entries)", n);
		if (rm_rmdir(j, what) == 0) {
			rm_done(j, 1);
			return;
		}
		/* something was written meanwhile (a helper that was still
		 * dying when the removal began): another pass */
		if ((errno == ENOTEMPTY || errno == EEXIST) && j->tries < RM_TRIES) {
			log_debug("%s: written to during its removal; again", j->path);
			j->pid = 0;
			if ((rv = rm_open(j)) != 0)
				rm_done(j, rv == 1);
			return;
		}
		log_warn("cannot remove %s", j->path);
		rm_done(j, 0);
		return;
	}
	rm_log_output(j, out);
	if (WIFSIGNALED(status))
		log_warnx("cannot remove %s: the remover was killed by signal %d (the sweep at "
		          "the next start tries again)",
		          j->path, WTERMSIG(status));
	else
		log_warnx("cannot remove %s: the remover failed (status %d; the sweep at the next "
		          "start tries again)",
		          j->path, WEXITSTATUS(status));
	rm_done(j, 0);
}

static void
rm_exited(void *arg, int status, char *out)
{
	struct rmjob *j = arg;

	rm_finish(j, status, out);
	rm_next();
}

/*
 * Remove path: 1 when that is done now (it did not exist, or it was no
 * directory and is unlinked), 0 when a job is under way (parent, when not
 * NULL, hears of it when it is over), -1 when it cannot be removed (logged).
 */
static int
rm_start(const char *path, struct rmjob *parent)
{
	struct rmjob *j;
	struct stat st;
	int rv;

	LIST_FOREACH(j, &rmjobs, entry) {
		if (strcmp(j->path, path) != 0)
			continue;
		/* already going (a sweep's twin): a root-owned directory
		 * listing it waits for that removal */
		if (parent == NULL)
			return 0;
		if (j->parent != NULL)
			return -1;
		j->parent = parent;
		return 0;
	}
	if (lstat(path, &st) == -1) {
		if (errno == ENOENT)
			return 1;
		log_warn("cannot remove %s", path);
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		if (unlink(path) == -1 && errno != ENOENT) {
			log_warn("cannot remove %s", path);
			return -1;
		}
		return 1;
	}
	if (rmdir(path) == 0 || errno == ENOENT)
		return 1; /* it was empty: one call, no remover */
	if ((j = calloc(1, sizeof(*j))) == NULL)
		fatal("calloc");
	if (fmt_ok(j->path, sizeof(j->path), "%s", path) == -1) {
		free(j);
		log_warnx("cannot remove %s: path too long", path);
		return -1;
	}
	j->parent = parent;
	j->nest = parent != NULL ? parent->nest + 1 : 0;
	clock_gettime(CLOCK_MONOTONIC, &j->t0);
	LIST_INSERT_HEAD(&rmjobs, j, entry);
	if ((rv = rm_open(j)) != 0) {
		LIST_REMOVE(j, entry);
		free(j);
		return rv;
	}
	if (!j->listed)
		return 0;
	/* a root-owned directory, listed: its hold on itself goes */
	if (j->children > 1) {
		j->children--;
		return 0;
	}
	rv = rm_list_end(j) == 0 ? 1 : -1; /* every entry went at once */
	LIST_REMOVE(j, entry);
	free(j);
	return rv;
}

void
remove_tree(const char *path)
{
	(void)rm_start(path, NULL);
}

/* Every entry of STATE/sub whose name starts with prefix. */
static void
rm_sweep_dir(const char *sub, const char *prefix)
{
	char dir[PATH_MAX], path[PATH_MAX];
	struct dirent *de;
	DIR *d;

	if (fmt_ok(dir, sizeof(dir), "%s/%s", sup.conf.state_dir, sub) == -1 ||
	    (d = opendir(dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL)
		if (strncmp(de->d_name, prefix, strlen(prefix)) == 0 &&
		    fmt_ok(path, sizeof(path), "%s/%s", dir, de->d_name) == 0) {
			log_info("removing %s, left by an earlier start", path);
			remove_tree(path);
		}
	closedir(d);
}

void
remove_sweep(void)
{
	rm_sweep_dir("sandboxes", "sbx-");
	rm_sweep_dir("work", "test-");
}
