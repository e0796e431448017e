/*
 * Embedded PostgreSQL: initdb on first start, postgres as a supervised child
 * (as db_user when root) on a Unix socket only, scram password from
 * STATE_DIR/db.password (root, 0600).
 */
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <libpq-fe.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "privsep/privsep.h"
#include "supervisor/pgembed.h"

#define PG_DBNAME "agrippa"
#define PG_USER "agrippa"
#define PG_START_TIMEOUT 60

static int
pg_find_bindir(const struct config *conf, char *out, size_t outsz)
{
	DIR *d;
	struct dirent *de;
	long best = -1, v;
	char *end, path[PATH_MAX];

	if (conf->postgres_bin[0] != '\0') {
		if (fmt_ok(out, outsz, "%s", conf->postgres_bin) == -1 ||
		    fmt_ok(path, sizeof(path), "%s/postgres", out) == -1)
			return -1;
		return access(path, X_OK);
	}
	if ((d = opendir("/usr/lib/postgresql")) == NULL)
		return -1;
	while ((de = readdir(d)) != NULL) {
		v = strtol(de->d_name, &end, 10);
		if (*end != '\0' || v <= 0 || v <= best)
			continue;
		if (fmt_ok(path, sizeof(path), "/usr/lib/postgresql/%ld/bin/postgres", v) == 0 &&
		    access(path, X_OK) == 0)
			best = v;
	}
	closedir(d);
	if (best < 0)
		return -1;
	snprintf(out, outsz, "/usr/lib/postgresql/%ld/bin", best);
	return 0;
}

/*
 * mkdir (if missing) owned by uid:gid with mode.  An existing directory with
 * another owner or mode is refused, never changed: a failed start must leave
 * the state directory as it found it.
 */
static int
pg_mkdir(const char *path, uid_t uid, gid_t gid, mode_t mode, char *errbuf, size_t errsz)
{
	struct stat st;
	int created = 1;

	if (mkdir(path, mode) == -1) {
		if (errno != EEXIST) {
			snprintf(errbuf, errsz, "%s: %s", path, strerror(errno));
			return -1;
		}
		created = 0;
	}
	if (lstat(path, &st) == -1 || !S_ISDIR(st.st_mode)) {
		snprintf(errbuf, errsz, "%s: not a directory", path);
		return -1;
	}
	if (created && ((st.st_uid != uid && chown(path, uid, gid) == -1) ||
			   chmod(path, mode) == -1)) {
		snprintf(errbuf, errsz, "%s: %s", path, strerror(errno));
		rmdir(path);
		return -1;
	}
	/* The state directory may be stricter than 0755; the database's own
	 * directories must be exactly 0700. */
	if (!created && (st.st_uid != uid ||
			    (mode == 0700 ? (st.st_mode & 07777) != mode : (st.st_mode & 022) != 0))) {
		snprintf(errbuf, errsz, "%s: must be a directory owned by uid %lu with mode %04o%s",
		    path, (unsigned long)uid, (unsigned)mode, mode == 0700 ? "" : " or stricter");
		return -1;
	}
	return 0;
}

/* Become db_user (when root) in a freshly forked child. */
static void
pg_child_become(const struct pgembed *pg)
{
	if (pg->as_root) {
		if (setgroups(1, &pg->gid) == -1 || setresgid(pg->gid, pg->gid, pg->gid) == -1 ||
		    setresuid(pg->uid, pg->uid, pg->uid) == -1)
			_exit(126);
	}
}

static void
pg_child_stdio(const struct pgembed *pg)
{
	int nul = open("/dev/null", O_RDWR), logfd;

	if (nul == -1)
		_exit(126);
	dup2(nul, STDIN_FILENO);
	dup2(nul, STDOUT_FILENO);
	{
		logfd = open(pg->logfile, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW, 0600);
		if (logfd == -1)
			_exit(126);
		dup2(logfd, STDERR_FILENO);
	}
	closefrom(STDERR_FILENO + 1);
}

static char *const pg_env[] = { "LANG=C", "LC_ALL=C", "PATH=/usr/bin:/bin", NULL };

static int
pg_run_initdb(struct pgembed *pg)
{
	char prog[PATH_MAX], pwarg[PATH_MAX + 16], darg[PATH_MAX + 8];
	pid_t pid;
	int status;

	if (fmt_ok(prog, sizeof(prog), "%s/initdb", pg->bindir) == -1 ||
	    fmt_ok(pwarg, sizeof(pwarg), "--pwfile=%s", pg->pwfile) == -1 ||
	    fmt_ok(darg, sizeof(darg), "--pgdata=%s", pg->datadir) == -1)
		return -1;
	char *const argv[] = { prog, darg, "--username=" PG_USER, pwarg,
		"--auth-local=scram-sha-256", "--auth-host=reject", "--encoding=UTF8",
		"--no-locale", "--no-instructions", NULL };
	log_info("db: creating the embedded database cluster in %s", pg->datadir);
	if ((pid = fork()) == -1)
		return -1;
	if (pid == 0) {
		pg_child_become(pg);
		pg_child_stdio(pg);
		execve(prog, argv, pg_env);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		log_warnx("db: initdb failed (see %s)", pg->logfile);
		return -1;
	}
	return 0;
}

/* Write the password where initdb (as db_user) can read it once. */
static int
pg_write_pwfile(struct pgembed *pg)
{
	int fd = open(pg->pwfile, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	int rv = 0;

	if (fd == -1)
		return -1;
	if (write(fd, pg->password, strlen(pg->password)) != (ssize_t)strlen(pg->password) ||
	    write(fd, "\n", 1) != 1 || (pg->as_root && fchown(fd, pg->uid, pg->gid) == -1))
		rv = -1;
	close(fd);
	return rv;
}

static int
pg_password_load(struct pgembed *pg, const char *path, int create, char *errbuf, size_t errsz)
{
	unsigned char raw[PG_PASSWORD_HEX / 2];
	struct stat st;
	ssize_t n;
	int fd;

	if (create) {
		randombytes_buf(raw, sizeof(raw));
		sodium_bin2hex(pg->password, sizeof(pg->password), raw, sizeof(raw));
		sodium_memzero(raw, sizeof(raw));
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd == -1 || write(fd, pg->password, PG_PASSWORD_HEX) != PG_PASSWORD_HEX) {
			snprintf(errbuf, errsz, "%s: %s", path, strerror(errno));
			if (fd != -1)
				close(fd);
			return -1;
		}
		close(fd);
		return 0;
	}
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd == -1) {
		snprintf(errbuf, errsz, "%s: %s (the database exists but its password is lost)",
		    path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) == -1 || (st.st_mode & 077) != 0 || st.st_uid != geteuid()) {
		snprintf(errbuf, errsz, "%s: must be mode 0600 and owned by the daemon", path);
		close(fd);
		return -1;
	}
	n = read(fd, pg->password, PG_PASSWORD_HEX);
	close(fd);
	if (n != PG_PASSWORD_HEX) {
		snprintf(errbuf, errsz, "%s: malformed", path);
		return -1;
	}
	pg->password[PG_PASSWORD_HEX] = '\0';
	return 0;
}

int
pg_embed_prepare(const struct config *conf, int foreground, struct pgembed *pg, char *errbuf,
    size_t errsz)
{
	char path[PATH_MAX], verfile[PATH_MAX];
	int fresh;

	memset(pg, 0, sizeof(*pg));
	pg->foreground = foreground;
	pg->as_root = (geteuid() == 0);
	if (pg_find_bindir(conf, pg->bindir, sizeof(pg->bindir)) == -1) {
		snprintf(errbuf, errsz, "no PostgreSQL server binaries found%s%s",
		    conf->postgres_bin[0] ? " in " : " under /usr/lib/postgresql",
		    conf->postgres_bin);
		return -1;
	}
	if (pg->as_root) {
		if (privsep_lookup_user(conf->db_user, &pg->uid, &pg->gid) == -1) {
			snprintf(errbuf, errsz, "db_user %s does not exist (run 'make users')",
			    conf->db_user);
			return -1;
		}
	} else {
		pg->uid = getuid();
		pg->gid = getgid();
	}
	if (fmt_ok(pg->datadir, sizeof(pg->datadir), "%s/pg", conf->state_dir) == -1 ||
	    fmt_ok(pg->rundir, sizeof(pg->rundir), "%s/pgrun", conf->state_dir) == -1 ||
	    fmt_ok(pg->logfile, sizeof(pg->logfile), "%s/pgrun/postgres.log", conf->state_dir) ==
		-1 ||
	    fmt_ok(pg->pwfile, sizeof(pg->pwfile), "%s/pgrun/initdb.pw", conf->state_dir) == -1 ||
	    fmt_ok(path, sizeof(path), "%s/db.password", conf->state_dir) == -1) {
		snprintf(errbuf, errsz, "state_dir too long");
		return -1;
	}
	if (pg_mkdir(conf->state_dir, geteuid(), getegid(), 0755, errbuf, errsz) == -1 ||
	    pg_mkdir(pg->datadir, pg->uid, pg->gid, 0700, errbuf, errsz) == -1 ||
	    pg_mkdir(pg->rundir, pg->uid, pg->gid, 0700, errbuf, errsz) == -1)
		return -1;
	if (fmt_ok(verfile, sizeof(verfile), "%s/PG_VERSION", pg->datadir) == -1) {
		snprintf(errbuf, errsz, "state_dir too long");
		return -1;
	}
	fresh = access(verfile, F_OK) == -1;
	if (pg_password_load(pg, path, fresh, errbuf, errsz) == -1)
		return -1;
	if (!fresh)
		return 0;
	unlink(pg->pwfile);
	if (pg_write_pwfile(pg) == -1) {
		snprintf(errbuf, errsz, "%s: %s", pg->pwfile, strerror(errno));
		return -1;
	}
	if (pg_run_initdb(pg) == -1) {
		unlink(pg->pwfile);
		snprintf(errbuf, errsz, "initdb failed");
		return -1;
	}
	unlink(pg->pwfile);
	return 0;
}

int
pg_embed_spawn(struct pgembed *pg)
{
	char prog[PATH_MAX], sockarg[PATH_MAX + 32];
	pid_t ppid = getpid(), pid;

	if (fmt_ok(prog, sizeof(prog), "%s/postgres", pg->bindir) == -1 ||
	    fmt_ok(sockarg, sizeof(sockarg), "unix_socket_directories=%s", pg->rundir) == -1)
		return -1;
	char *const argv[] = { prog, "-D", pg->datadir, "-c", "listen_addresses=",
		"-c", sockarg, "-c", "unix_socket_permissions=0700", "-c",
		"logging_collector=off", NULL };
	if ((pid = fork()) == -1)
		return -1;
	if (pid == 0) {
		setpgid(0, 0); /* see proc_exec(): Ctrl-C goes to the supervisor only */
		pg_child_become(pg);
		/* After the id change (which clears it): die with the supervisor. */
		prctl(PR_SET_PDEATHSIG, SIGINT);
		if (getppid() != ppid)
			_exit(0);
		pg_child_stdio(pg);
		execve(prog, argv, pg_env);
		_exit(127);
	}
	pg->pid = pid;
	pg->started = time(NULL);
	log_info("db: postgres started (pid %ld, log %s)", (long)pid, pg->logfile);
	return 0;
}

const char *
pg_embed_conninfo(const struct pgembed *pg)
{
	static char ci[PATH_MAX + 256];

	snprintf(ci, sizeof(ci), "host=%s dbname=%s user=%s password=%s connect_timeout=10",
	    pg->rundir, PG_DBNAME, PG_USER, pg->password);
	return ci;
}

static int
pg_create_database(const struct pgembed *pg)
{
	char ci[PATH_MAX + 256];
	PGconn *c;
	PGresult *r;
	int rv = -1;

	snprintf(ci, sizeof(ci), "host=%s dbname=postgres user=%s password=%s", pg->rundir,
	    PG_USER, pg->password);
	c = PQconnectdb(ci);
	explicit_bzero(ci, sizeof(ci));
	if (PQstatus(c) != CONNECTION_OK)
		goto out;
	r = PQexec(c, "SELECT 1 FROM pg_database WHERE datname = '" PG_DBNAME "'");
	if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
		rv = 0;
	PQclear(r);
	if (rv == 0)
		goto out;
	r = PQexec(c, "CREATE DATABASE " PG_DBNAME);
	if (PQresultStatus(r) == PGRES_COMMAND_OK)
		rv = 0;
	else
		log_warnx("db: create database: %s", PQresultErrorMessage(r));
	PQclear(r);
out:
	PQfinish(c);
	return rv;
}

int
pg_embed_start(struct pgembed *pg)
{
	char ci[PATH_MAX + 64];
	struct timespec ts = { 0, 50 * 1000 * 1000 };
	int i, status;

	if (pg_embed_spawn(pg) == -1)
		return -1;
	snprintf(ci, sizeof(ci), "host=%s dbname=postgres user=%s", pg->rundir, PG_USER);
	for (i = 0; i < PG_START_TIMEOUT * 20; i++) {
		if (PQping(ci) == PQPING_OK)
			return pg_create_database(pg);
		if (waitpid(pg->pid, &status, WNOHANG) == pg->pid) {
			log_warnx("db: postgres exited during start-up (see %s)", pg->logfile);
			pg->pid = 0;
			return -1;
		}
		nanosleep(&ts, NULL);
	}
	log_warnx("db: postgres did not accept connections within %d s", PG_START_TIMEOUT);
	return -1;
}

void
pg_embed_stop(struct pgembed *pg, int timeout)
{
	struct timespec ts = { 0, 50 * 1000 * 1000 };
	int i, status;

	if (pg->pid <= 0)
		return;
	kill(pg->pid, SIGINT); /* fast shutdown */
	for (i = 0; i < timeout * 20; i++) {
		if (waitpid(pg->pid, &status, WNOHANG) == pg->pid) {
			pg->pid = 0;
			log_info("db: postgres stopped");
			return;
		}
		nanosleep(&ts, NULL);
	}
	log_warnx("db: postgres did not stop in %d s; sending SIGQUIT", timeout);
	kill(pg->pid, SIGQUIT);
	waitpid(pg->pid, &status, 0);
	pg->pid = 0;
}
