/*
 * agrippactl backup DIR (agrippactl(8), agrippad(8) BACKUPS): a copy of
 * what a host needs to be made again, in a new directory DIR (root, 0700):
 *
 *   agrippa.dump   the embedded database, by pg_dump in its custom format
 *                  (one transaction: a consistent snapshot; pg_restore
 *                  takes it)
 *   artifacts/     the artifact store (STATE/artifacts), copied after the
 *                  dump: artifacts are written before the rows that name
 *                  them and never changed, so every artifact the dump
 *                  names is there
 *   agrippad.yaml  the configuration file
 *   MANIFEST       what the backup holds, its version and when it was made
 *
 * The master key is not in it: a backup that holds the key holds every
 * secret.  The operator keeps the key's copy apart (agrippad(8), "Master
 * key") and puts it back to restore.
 *
 * Nothing here blocks the supervisor: pg_dump and cp are transient tools
 * (transient.c).  pg_dump runs as the database's user, the only one who
 * may reach its socket; its password reaches it through a memfd given as
 * its passfile, never an argument or the environment; it writes the dump
 * to a file the supervisor made, given for the dump and taken back after.
 * cp copies the store (the supervisor's, root's) as root, in its own
 * process.  The supervisor itself copies only the configuration.
 */
#include <sys/mman.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

#include "common/log.h"
#include "supervisor/db.h"
#include "supervisor/supervisor.h"


struct backup {
	char dir[PATH_MAX];
	int dump_fd;        /* DIR/agrippa.dump, until pg_dump is done */
	off_t dump_size;
	backup_cb cb;
	void *arg;
	pid_t pid;          /* the transient at work, or -1 */
};

static void
bk_finish(struct backup *b, int ok, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void
bk_finish(struct backup *b, int ok, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (ok)
		log_info("backup %s: %s", b->dir, msg);
	else
		log_warnx("backup %s: %s", b->dir, msg);
	if (b->cb != NULL)
		b->cb(b->arg, ok, msg);
	if (b->dump_fd != -1)
		close(b->dump_fd);
	free(b);
}

/* DIR/NAME written with text[0..len), 0600, synced. */
static int
bk_write(struct backup *b, const char *name, const char *text, size_t len)
{
	char path[PATH_MAX];
	ssize_t n;
	int fd;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", b->dir, name) >= sizeof(path) ||
	    (fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) == -1)
		return -1;
	while (len > 0) {
		if ((n = write(fd, text, len)) <= 0) {
			close(fd);
			return -1;
		}
		text += n;
		len -= (size_t)n;
	}
	if (fsync(fd) == -1) {
		close(fd);
		return -1;
	}
	return close(fd);
}

/* The configuration, and what the backup holds. */
static void
bk_rest(struct backup *b, const char *artifacts)
{
	char manifest[3 * PATH_MAX + 1024], when[64], err[PATH_MAX + 128];
	unsigned char *conf = NULL;
	size_t len = 0;
	time_t now = time(NULL);
	struct tm tm;
	int rv;

	/* read as the daemon reads it: whole, or an error (never a cut copy) */
	if (config_read_file(sup.conf_path, &conf, &len, err, sizeof(err)) == -1) {
		err[strcspn(err, "\n")] = '\0';
		bk_finish(b, 0, "cannot read the configuration: %s", err);
		return;
	}
	rv = bk_write(b, "agrippad.yaml", (const char *)conf, len);
	explicit_bzero(conf, len); /* database.url may hold a password */
	free(conf);
	if (rv == -1) {
		bk_finish(b, 0, "cannot write agrippad.yaml: %s", strerror(errno));
		return;
	}
	gmtime_r(&now, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	snprintf(manifest, sizeof(manifest),
	         "agrippa backup\n"
	         "version: %s\n"
	         "made: %s\n"
	         "schema: %s\n"
	         "agrippa.dump: the database, pg_dump custom format (%lld bytes)\n"
	         "artifacts: the artifact store (%s)\n"
	         "agrippad.yaml: the configuration (%s)\n"
	         "not here: the master key (%s); restoring needs your copy of it\n",
	         AGRIPPA_VERSION, when,
	         sql_nmigrations > 0 ? sql_migrations[sql_nmigrations - 1].name : "none",
	         (long long)b->dump_size, artifacts, sup.conf_path, sup.conf.master_key);
	if (bk_write(b, "MANIFEST", manifest, strlen(manifest)) == -1) {
		bk_finish(b, 0, "cannot write MANIFEST: %s", strerror(errno));
		return;
	}
	bk_finish(b, 1, "the database (%lld bytes), the artifacts and the configuration are in "
	          "%s; the master key is not: keep your copy of %s with it",
	          (long long)b->dump_size, b->dir, sup.conf.master_key);
}

static void
bk_copied(void *arg, int status, char *out)
{
	struct backup *b = arg;

	b->pid = -1;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		bk_finish(b, 0, "copying the artifacts failed: %.400s", out);
		return;
	}
	bk_rest(b, "copied");
}

/* The artifact store (root's: only the supervisor writes it), by cp. */
static void
bk_artifacts(struct backup *b)
{
	char src[PATH_MAX], dst[PATH_MAX];
	const char *args[5];
	struct stat st;
	int nul;

	if ((size_t)snprintf(src, sizeof(src), "%s/artifacts", sup.conf.state_dir) >= sizeof(src) ||
	    (size_t)snprintf(dst, sizeof(dst), "%s/artifacts", b->dir) >= sizeof(dst)) {
		bk_finish(b, 0, "a path is too long");
		return;
	}
	if (lstat(src, &st) == -1 && errno == ENOENT) {
		if (mkdir(dst, 0700) == -1) {
			bk_finish(b, 0, "mkdir %s: %s", dst, strerror(errno));
			return;
		}
		bk_rest(b, "none yet");
		return;
	}
	if (mkdir(dst, 0700) == -1) {
		bk_finish(b, 0, "mkdir %s: %s", dst, strerror(errno));
		return;
	}
	if ((size_t)snprintf(src, sizeof(src), "%s/artifacts/.", sup.conf.state_dir) >= sizeof(src) ||
	    (nul = open("/dev/null", O_RDONLY | O_CLOEXEC)) == -1) {
		bk_finish(b, 0, "cannot start cp");
		return;
	}
	args[0] = "-R";
	args[1] = "-p";
	args[2] = src;
	args[3] = dst;
	args[4] = NULL;
	if ((b->pid = transient_start_exe("/bin/cp", "cp", args, nul, -1, getuid(), getgid(),
	                                  bk_copied, b)) == -1)
		bk_finish(b, 0, "cannot start cp");
}

static void
bk_dumped(void *arg, int status, char *out)
{
	struct backup *b = arg;
	struct stat st;

	b->pid = -1;
	/* the dump is root's again, and whole on disk */
	if (fchown(b->dump_fd, 0, 0) == -1 || fsync(b->dump_fd) == -1 || fstat(b->dump_fd, &st) == -1) {
		bk_finish(b, 0, "agrippa.dump: %s", strerror(errno));
		return;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		bk_finish(b, 0, "pg_dump failed: %.400s", out);
		return;
	}
	b->dump_size = st.st_size;
	close(b->dump_fd);
	b->dump_fd = -1;
	bk_artifacts(b);
}

/* A passfile for pg_dump (libpq's format, every field a wildcard but the
 * password), in a memfd the database's user owns, 0600. */
static int
bk_passfile(void)
{
	char line[PG_PASSWORD_HEX + 16];
	int fd, n;

	if ((fd = memfd_create("agrippa-pgpass", MFD_CLOEXEC)) == -1)
		return -1;
	n = snprintf(line, sizeof(line), "*:*:*:*:%s\n", sup.pg.password);
	if (write(fd, line, (size_t)n) != n || fchmod(fd, 0600) == -1 ||
	    (!sup.devmode && fchown(fd, sup.pg.uid, sup.pg.gid) == -1) ||
	    lseek(fd, 0, SEEK_SET) == -1) {
		explicit_bzero(line, sizeof(line));
		close(fd);
		return -1;
	}
	explicit_bzero(line, sizeof(line));
	return fd;
}

struct backup *
backup_start(const char *dir, backup_cb cb, void *arg, char *err, size_t errsz)
{
	char exe[PATH_MAX], path[PATH_MAX], ci[PATH_MAX + 160];
	const char *args[8];
	struct backup *b;
	int pass, dfd;

	if (!sup.pg_embedded) {
		snprintf(err, errsz, "the database is external: back it up with its own tools "
		         "(pg_dump); this copies the embedded database only");
		return NULL;
	}
	if (dir[0] != '/' || strlen(dir) >= PATH_MAX - 64) {
		snprintf(err, errsz, "DIR must be an absolute path");
		return NULL;
	}
	if (strncmp(dir, sup.conf.state_dir, strlen(sup.conf.state_dir)) == 0 &&
	    (dir[strlen(sup.conf.state_dir)] == '/' || dir[strlen(sup.conf.state_dir)] == '\0')) {
		snprintf(err, errsz, "DIR must not be inside the state directory");
		return NULL;
	}
	if (mkdir(dir, 0700) == -1) {
		snprintf(err, errsz, "%s: %s%s", dir, strerror(errno),
		         errno == EEXIST ? " (a backup goes to a new directory)" : "");
		return NULL;
	}
	if ((size_t)snprintf(exe, sizeof(exe), "%s/pg_dump", sup.pg.bindir) >= sizeof(exe) ||
	    (size_t)snprintf(path, sizeof(path), "%s/agrippa.dump", dir) >= sizeof(path) ||
	    (size_t)snprintf(ci, sizeof(ci), "host=%s dbname=agrippa user=agrippa "
	                     "passfile=/proc/self/fd/3 connect_timeout=10", sup.pg.rundir) >=
	        sizeof(ci)) {
		snprintf(err, errsz, "a path is too long");
		rmdir(dir);
		return NULL;
	}
	if ((dfd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) == -1 ||
	    (!sup.devmode && fchown(dfd, sup.pg.uid, sup.pg.gid) == -1)) {
		snprintf(err, errsz, "%s: %s", path, strerror(errno));
		if (dfd != -1)
			close(dfd);
		unlink(path);
		rmdir(dir);
		return NULL;
	}
	if ((pass = bk_passfile()) == -1) {
		snprintf(err, errsz, "the passfile: %s", strerror(errno));
		close(dfd);
		unlink(path);
		rmdir(dir);
		return NULL;
	}
	if ((b = calloc(1, sizeof(*b))) == NULL)
		fatal("calloc");
	snprintf(b->dir, sizeof(b->dir), "%s", dir);
	b->cb = cb;
	b->arg = arg;
	if ((b->dump_fd = dup(dfd)) == -1)
		fatal("dup");
	args[0] = "--format=custom";
	args[1] = "--no-password";
	args[2] = "--file=/proc/self/fd/4";
	args[3] = "--dbname";
	args[4] = ci;
	args[5] = NULL;
	/* takes pass and dfd, whatever happens */
	if ((b->pid = transient_start_exe(exe, "pg_dump", args, pass, dfd, sup.pg.uid, sup.pg.gid,
	                                  bk_dumped, b)) == -1) {
		snprintf(err, errsz, "cannot start %s", exe);
		close(b->dump_fd);
		free(b);
		return NULL;
	}
	log_info("backup %s: pg_dump started", dir);
	return b;
}

void
backup_abandon(struct backup *b)
{
	b->cb = NULL; /* it goes on; its operator is gone */
}
