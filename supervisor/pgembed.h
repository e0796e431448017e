/*
 * The embedded PostgreSQL (database: embedded): a private cluster under the
 * state directory, run as db_user, listening only on a Unix socket in a 0700
 * directory, with password authentication.  Supervised by the supervisor.
 */
#ifndef AGRIPPA_PGEMBED_H
#define AGRIPPA_PGEMBED_H

#include <limits.h>
#include <sys/types.h>

#include <time.h>

#include "supervisor/config.h"

#define PG_PASSWORD_HEX 64

struct pgembed {
	char bindir[PATH_MAX];
	char datadir[PATH_MAX];
	char rundir[PATH_MAX];
	char logfile[PATH_MAX];
	char pwfile[PATH_MAX];
	uid_t uid;
	gid_t gid;
	int as_root;
	int foreground; /* postgres logs to our stderr instead of logfile */
	pid_t pid;
	time_t started; /* when pid was started */
	char password[PG_PASSWORD_HEX + 1];
};

/* Find the binaries, create the directories, initdb on first start and load
 * the password.  Returns 0 or -1 with errbuf set. */
int pg_embed_prepare(const struct config *conf, int foreground, struct pgembed *pg,
    char *errbuf, size_t errsz);
/* Start postgres and wait (bounded) until it accepts connections and the
 * agrippa database exists.  Returns 0 or -1 (logged). */
int pg_embed_start(struct pgembed *pg);
/* Start postgres without waiting (used to restart it after it died). */
int pg_embed_spawn(struct pgembed *pg);
/* Fast shutdown, waiting up to timeout seconds, then immediate. */
void pg_embed_stop(struct pgembed *pg, int timeout);
/* The libpq connection string (static buffer; holds the password). */
const char *pg_embed_conninfo(const struct pgembed *pg);

#endif
