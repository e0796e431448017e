/*
 * The repository connections' mirrors on this host (DESIGN.md section 3.8):
 * STATE/mirrors/ID (ID the connection's UUID), a bare repository that only
 * the git helper writes, as the service user; the directory STATE/mirrors
 * is the service user's, mode 0700, and no sandbox can reach it but through
 * the read-only mount of one mirror's objects (supervisor/sbx.c).
 *
 * One fetch at a time per mirror: a run that asks while a fetch is in
 * flight waits for that fetch and takes its result, instead of starting one
 * of its own (the helper also holds STATE/mirrors/ID.lock).
 *
 * What agrippactl shows of a mirror (its size, its last fetch) is read from
 * the stamp the helper leaves in it after each fetch that succeeded
 * (GH_STAMP): one small file, so a list never walks a mirror on the event
 * loop, and the figures outlive a restart.  A connection
 * that is gone loses its mirror at the next sweep: at start, after every
 * removal over the API, and hourly (for removals made elsewhere: another
 * host on the same database, a project's deletion).
 */
#include <sys/queue.h>
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "githelper/mirror.h"
#include "supervisor/db.h"
#include "supervisor/supervisor.h"

#define MIRROR_SWEEP_SECS 3600

struct mirror_wait {
	TAILQ_ENTRY(mirror_wait) entry;
	struct mirror *m;
	mirror_cb cb;
	void *arg;
};

struct mirror {
	LIST_ENTRY(mirror) entry;
	char id[IPC_UUID_LEN + 1];
	char dir[PATH_MAX];
	struct gitrun *g;            /* the fetch in flight, or NULL */
	TAILQ_HEAD(, mirror_wait) waiters;
};
static LIST_HEAD(, mirror) mirrors = LIST_HEAD_INITIALIZER(mirrors);
static struct event *mirror_sweep_ev;

int
mirror_path(const char *id, char *path, size_t pathsz)
{
	if (!ipc_is_uuid(id, strlen(id)))
		return -1;
	return fmt_ok(path, pathsz, "%s/mirrors/%s", sup.conf.state_dir, id);
}

/* STATE/mirrors, the service user's, 0700: made when missing. */
static int
mirror_root(char *err, size_t errsz)
{
	char dir[PATH_MAX];

	if (fmt_ok(dir, sizeof(dir), "%s/mirrors", sup.conf.state_dir) == -1) {
		snprintf(err, errsz, "the state directory's path is too long");
		return -1;
	}
	if ((mkdir(dir, 0700) == -1 && errno != EEXIST) ||
	    (!sup.devmode && chown(dir, sup.uid, sup.gid) == -1) || chmod(dir, 0700) == -1) {
		snprintf(err, errsz, "%s: %s", dir, strerror(errno));
		return -1;
	}
	return 0;
}

static struct mirror *
mirror_get(const char *id)
{
	struct mirror *m;

	LIST_FOREACH(m, &mirrors, entry)
		if (strcmp(m->id, id) == 0)
			return m;
	if ((m = calloc(1, sizeof(*m))) == NULL)
		fatal("calloc");
	if (mirror_path(id, m->dir, sizeof(m->dir)) == -1) { /* also checks id is a UUID */
		free(m);
		return NULL;
	}
	memcpy(m->id, id, IPC_UUID_LEN + 1);
	TAILQ_INIT(&m->waiters);
	LIST_INSERT_HEAD(&mirrors, m, entry);
	return m;
}

/* The fetch is over: every run that waited for it hears how it went. */
static void
mirror_fetched(void *arg, int ok, const char *error, const char *base, uint64_t size,
               const char *ref)
{
	struct mirror *m = arg;
	struct mirror_wait *w;

	m->g = NULL;
	if (ok)
		log_info("mirror %s: fetched (%llu bytes)", m->id, (unsigned long long)size);
	else
		log_info("mirror %s: %s", m->id, error);
	while ((w = TAILQ_FIRST(&m->waiters)) != NULL) {
		TAILQ_REMOVE(&m->waiters, w, entry);
		w->cb(w->arg, ok, error);
		free(w);
	}
}

struct mirror_wait *
mirror_fetch(const char *id, const char *url, const unsigned char *tok, size_t toklen,
             mirror_cb cb, void *arg, char *err, size_t errsz)
{
	struct gitrun_req gr;
	struct mirror_wait *w;
	struct mirror *m;

	if ((m = mirror_get(id)) == NULL) {
		snprintf(err, errsz, "the mirror's path is too long");
		return NULL;
	}
	if (m->g == NULL) {
		if (mirror_root(err, errsz) == -1)
			return NULL;
		memset(&gr, 0, sizeof(gr));
		gr.kind = GITRUN_FETCH;
		gr.url = url;
		gr.token = tok;
		gr.toklen = toklen;
		gr.mirror = m->dir;
		if ((m->g = gitrun_start(&gr, mirror_fetched, m, err, errsz)) == NULL)
			return NULL;
	}
	if ((w = calloc(1, sizeof(*w))) == NULL)
		fatal("calloc");
	w->m = m;
	w->cb = cb;
	w->arg = arg;
	TAILQ_INSERT_TAIL(&m->waiters, w, entry);
	return w;
}

void
mirror_wait_cancel(struct mirror_wait *w)
{
	TAILQ_REMOVE(&w->m->waiters, w, entry);
	free(w);
}

/* ---- what is on disk ------------------------------------------------------ */

/*
 * The stamp in the mirror directory dfd: "SECONDS BYTES\n" and nothing
 * else.  The service user writes it, so it is opened without following a
 * link or blocking on anything but a regular file, and parsed strictly.
 * 0 with mi's figures, or -1.
 */
static int
mirror_stamp_read(int dfd, struct mirror_info *mi)
{
	char buf[GH_STAMP_MAX + 1], *sp, *nl;
	uint64_t when, bytes;
	struct stat st;
	ssize_t n;
	int fd;

	if ((fd = openat(dfd, GH_STAMP, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) == -1)
		return -1;
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode) ||
	    (n = read(fd, buf, sizeof(buf) - 1)) <= 0) {
		close(fd);
		return -1;
	}
	close(fd);
	buf[n] = '\0';
	if ((sp = strchr(buf, ' ')) == NULL || (nl = strchr(sp, '\n')) == NULL || nl[1] != '\0' ||
	    dec_parse(buf, (size_t)(sp - buf), INT64_MAX, &when) == -1 ||
	    dec_parse(sp + 1, (size_t)(nl - sp - 1), UINT64_MAX, &bytes) == -1)
		return -1;
	mi->stamped = 1;
	mi->fetched = (time_t)when;
	mi->bytes = bytes;
	return 0;
}

/* The mirror dir (a name in the directory rootfd): mi filled. */
static void
mirror_info_at(int rootfd, const char *name, struct mirror_info *mi)
{
	int dfd;

	memset(mi, 0, sizeof(*mi));
	if ((dfd = openat(rootfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) == -1)
		return;
	mi->present = 1;
	(void)mirror_stamp_read(dfd, mi);
	close(dfd);
}

/* STATE/mirrors, open; -1 when there is none. */
static int
mirror_root_open(void)
{
	char dir[PATH_MAX];

	if (fmt_ok(dir, sizeof(dir), "%s/mirrors", sup.conf.state_dir) == -1)
		return -1;
	return open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

void
mirror_info(const char *id, struct mirror_info *mi)
{
	int rfd;

	memset(mi, 0, sizeof(*mi));
	if (!ipc_is_uuid(id, strlen(id)) || (rfd = mirror_root_open()) == -1)
		return;
	mirror_info_at(rfd, id, mi);
	close(rfd);
}

void
mirror_totals(uint64_t *count, uint64_t *bytes)
{
	struct mirror_info mi;
	struct dirent *de;
	DIR *d;
	int rfd;

	*count = *bytes = 0;
	if ((rfd = mirror_root_open()) == -1)
		return;
	if ((d = fdopendir(rfd)) == NULL) {
		close(rfd);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		if (!ipc_is_uuid(de->d_name, strlen(de->d_name)))
			continue;
		mirror_info_at(dirfd(d), de->d_name, &mi);
		if (!mi.present)
			continue;
		(*count)++;
		if (mi.stamped && *bytes <= UINT64_MAX - mi.bytes)
			*bytes += mi.bytes;
	}
	closedir(d);
}

/* ---- the sweep ----------------------------------------------------------- */

struct msweep {
	char id[IPC_UUID_LEN + 1];
};

/* Remove STATE/mirrors/ID and what the helper keeps beside it. */
static void
mirror_remove(const char *id)
{
	static const char *const suffixes[] = {"", ".lock", ".new"};
	char p[PATH_MAX];
	struct mirror *m;
	size_t i;

	LIST_FOREACH(m, &mirrors, entry)
		if (strcmp(m->id, id) == 0) {
			if (m->g != NULL)
				return; /* a run still fetches it: the next sweep */
			LIST_REMOVE(m, entry);
			free(m);
			break;
		}
	log_info("removing the mirror of removed repository connection %s", id);
	for (i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++)
		if (fmt_ok(p, sizeof(p), "%s/mirrors/%s%s", sup.conf.state_dir, id, suffixes[i]) == 0)
			remove_tree(p);
}

static void
msweep_done(uint64_t reqid, int code, const char *err, void *pgres, void *arg)
{
	struct msweep *x = arg;
	PGresult *res = pgres;

	if (code == DB_OK && PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "f") == 0)
		mirror_remove(x->id);
	free(x);
}

void
mirror_sweep(void)
{
	const struct sql_op *op = db_op_lookup("sup_repo_exists");
	char dir[PATH_MAX];
	struct db_params params;
	struct dirent *de;
	struct msweep *x;
	DIR *d;

	if (op == NULL || fmt_ok(dir, sizeof(dir), "%s/mirrors", sup.conf.state_dir) == -1 ||
	    (d = opendir(dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (!ipc_is_uuid(de->d_name, strlen(de->d_name)))
			continue;
		if ((x = calloc(1, sizeof(*x))) == NULL)
			fatal("calloc");
		memcpy(x->id, de->d_name, IPC_UUID_LEN + 1); /* a UUID: 36 bytes and the NUL */
		memset(&params, 0, sizeof(params));
		params.n = 1;
		if ((params.values[0] = strdup(x->id)) == NULL)
			fatal("strdup");
		if (db_pool_submit(op, &params, msweep_done, x) == 0) {
			db_params_free(&params);
			free(x);
			break;
		}
	}
	closedir(d);
}

static void
mirror_sweep_cb(evutil_socket_t fd, short what, void *arg)
{
	struct timeval tv = {MIRROR_SWEEP_SECS, 0};

	mirror_sweep();
	evtimer_add(mirror_sweep_ev, &tv);
}

void
mirror_init(void)
{
	struct timeval tv = {MIRROR_SWEEP_SECS, 0};

	if (mirror_sweep_ev != NULL)
		return;
	if ((mirror_sweep_ev = evtimer_new(sup.base, mirror_sweep_cb, NULL)) == NULL)
		fatalx("evtimer_new");
	evtimer_add(mirror_sweep_ev, &tv);
}
