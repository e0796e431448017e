/*
 * Migrations: sql/migrations/NNNN_name.sql, built into the binary, applied
 * in order at start under an advisory lock so several hosts sharing one
 * database never apply the same migration twice.  Each migration and its
 * schema_migrations row commit in one transaction.
 *
 * A database that has a migration this binary does not have (a newer
 * release migrated it, or another build whose migration of the same
 * number differs) is refused before anything is applied: this binary's
 * queries would run against a schema it does not know.
 */
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "supervisor/db.h"

#define MIGRATE_LOCK_KEY "7242361"  /* arbitrary, fixed: pg_advisory_lock key */

static int
exec_ok(PGconn *pg, const char *sql, const char *what)
{
	PGresult *res = PQexec(pg, sql);
	ExecStatusType st = PQresultStatus(res);
	int ok = (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK);

	if (!ok)
		log_warnx("db: %s: %s", what, PQresultErrorMessage(res));
	PQclear(res);
	return ok ? 0 : -1;
}

static int
migration_applied(PGconn *pg, int version, int *applied)
{
	char v[16];
	const char *params[1] = { v };
	PGresult *res;

	snprintf(v, sizeof(v), "%d", version);
	res = PQexecParams(pg, "SELECT 1 FROM schema_migrations WHERE version = $1", 1, NULL,
	    params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		log_warnx("db: schema_migrations: %s", PQresultErrorMessage(res));
		PQclear(res);
		return -1;
	}
	*applied = PQntuples(res) > 0;
	PQclear(res);
	return 0;
}

static int
migration_apply(PGconn *pg, const struct sql_migration *m)
{
	char v[16];
	const char *params[2] = { v, m->name };
	PGresult *res;

	snprintf(v, sizeof(v), "%d", m->version);
	if (exec_ok(pg, "BEGIN", "begin") == -1)
		return -1;
	if (exec_ok(pg, m->sql, m->name) == -1)
		goto fail;
	res = PQexecParams(pg, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
	    2, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		log_warnx("db: recording %s: %s", m->name, PQresultErrorMessage(res));
		PQclear(res);
		goto fail;
	}
	PQclear(res);
	if (exec_ok(pg, "COMMIT", "commit") == -1)
		return -1;
	log_info("db: applied migration %s", m->name);
	return 0;
fail:
	exec_ok(pg, "ROLLBACK", "rollback");
	return -1;
}

/* Every migration the database has must be one of this binary's, by
 * number and name.  0, or -1 (logged, saying which and what to do). */
static int
migrations_known(PGconn *pg)
{
	PGresult *res;
	const char *v, *name;
	size_t j;
	int i, rv = 0;

	res = PQexec(pg, "SELECT version::text, name FROM schema_migrations ORDER BY version");
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		log_warnx("db: schema_migrations: %s", PQresultErrorMessage(res));
		PQclear(res);
		return -1;
	}
	for (i = 0; i < PQntuples(res) && rv == 0; i++) {
		v = PQgetvalue(res, i, 0);
		name = PQgetvalue(res, i, 1);
		for (j = 0; j < sql_nmigrations; j++)
			if (sql_migrations[j].version == atoi(v))
				break;
		if (j == sql_nmigrations) {
			log_warnx("db: the database has migration %s, which this agrippad (%s, "
			          "migrations up to %s) does not know: a newer release migrated it. "
			          "Run that release, or restore a backup made for this one; nothing "
			          "was changed", name, AGRIPPA_VERSION,
			          sql_nmigrations > 0 ? sql_migrations[sql_nmigrations - 1].name : "none");
			rv = -1;
		} else if (strcmp(sql_migrations[j].name, name) != 0) {
			log_warnx("db: the database's migration %s is %s here: another build migrated "
			          "it; nothing was changed", name, sql_migrations[j].name);
			rv = -1;
		}
	}
	PQclear(res);
	return rv;
}

static int
migrate_locked(PGconn *pg)
{
	size_t i;
	int applied;

	if (exec_ok(pg,
		"CREATE TABLE IF NOT EXISTS schema_migrations ("
		" version integer PRIMARY KEY, name text NOT NULL,"
		" applied_at timestamptz NOT NULL DEFAULT now())",
		"schema_migrations") == -1)
		return -1;
	if (migrations_known(pg) == -1)
		return -1;
	for (i = 0; i < sql_nmigrations; i++) {
		if (i > 0 && sql_migrations[i].version <= sql_migrations[i - 1].version) {
			log_warnx("db: migrations out of order at %s", sql_migrations[i].name);
			return -1;
		}
		if (migration_applied(pg, sql_migrations[i].version, &applied) == -1)
			return -1;
		if (!applied && migration_apply(pg, &sql_migrations[i]) == -1)
			return -1;
	}
	return 0;
}

int
db_migrate(const char *conninfo)
{
	PGconn *pg = PQconnectdb(conninfo);
	int rv = -1;

	if (PQstatus(pg) != CONNECTION_OK) {
		log_warnx("db: cannot connect: %s", PQerrorMessage(pg));
		PQfinish(pg);
		return -1;
	}
	if (exec_ok(pg, "SET client_min_messages = warning", "settings") == 0 &&
	    exec_ok(pg, "SELECT pg_advisory_lock(" MIGRATE_LOCK_KEY ")", "lock") == 0) {
		rv = migrate_locked(pg);
		exec_ok(pg, "SELECT pg_advisory_unlock(" MIGRATE_LOCK_KEY ")", "unlock");
	}
	PQfinish(pg);
	return rv;
}
