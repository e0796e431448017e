/*
 * Master key rotation (agrippactl key rotate) and the start's check of
 * which key file the database's secrets are under.
 *
 * The files: MASTER_KEY (master_key in the config) is the key in use;
 * MASTER_KEY.new exists only while a rotation runs or after one was
 * interrupted; MASTER_KEY.old only between the renames that end one.  The
 * database says which key its secrets are under: key_state.fingerprint, a
 * keyed BLAKE2b hash of the key (key_fingerprint), changed by the same
 * transaction that seals every secret again.  So whatever moment a crash
 * picks, the secrets are under exactly one of the files, and the next
 * start keeps the file whose fingerprint the database records and removes
 * the others; it never guesses.
 *
 * A rotation, in order (the numbers are the crash points of the test hook):
 *   write MASTER_KEY.new (0600, fsync'ed, its directory fsync'ed)      1
 *   BEGIN; key_state to the new fingerprint (row locked until COMMIT);
 *   every repository token and MCP credentials opened with the old key
 *   and sealed with the new one, fresh nonces; the audit row             2
 *   COMMIT                                                               3
 *   link MASTER_KEY to MASTER_KEY.old                                    4
 *   rename MASTER_KEY.new over MASTER_KEY                                5
 *   unlink MASTER_KEY.old; switch the key in memory
 * A row that does not open with the old key rolls everything back, the
 * new file is removed and the row is named.
 *
 * It runs on a blocking connection of its own: the supervisor seals
 * nothing while it runs, and what was sealed before it but is stored
 * after it is refused by the database (migration 0013: a nonce carries
 * the sealing key's id).  The proxy and the helpers never see the master
 * key; what they are given (a run's token, an MCP server's credentials)
 * is plaintext opened here, so a rotation changes nothing for them.
 */
#include <sys/stat.h>

#include <errno.h>
#include <libpq-fe.h>
#include <limits.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "supervisor/db.h"
#include "supervisor/key.h"
#include "supervisor/secret.h"
#include "supervisor/supervisor.h"

#define KR_LOCK_TIMEOUT "SET lock_timeout = '10s'"
#define KR_STMT_TIMEOUT "SET statement_timeout = '60s'"
#define KR_CONNECT_TIMEOUT "10" /* seconds, libpq's connect_timeout */

struct kr_paths {
	char cur[PATH_MAX], new[PATH_MAX], old[PATH_MAX];
};

static char *kr_conninfo; /* the database's, kept from the start */

#ifdef AGRIPPA_SANITIZE
/* Test builds: AGRIPPA_TEST_ROTATE_CRASH=N kills the supervisor at step N,
 * as kill -9 would. */
static void
kr_crash_point(int n)
{
	const char *s = getenv("AGRIPPA_TEST_ROTATE_CRASH");

	if (s != NULL && atoi(s) == n) {
		log_warnx("key rotate: test hook: killed at step %d", n);
		raise(SIGKILL);
	}
}
#else
#define kr_crash_point(n) ((void)0)
#endif

/* The three file names, from master_key; -1 when one would not fit. */
static int
kr_paths(struct kr_paths *p)
{
	const char *k = sup.conf.master_key;
	int a, b, c;

	memset(p, 0, sizeof(*p));
	a = snprintf(p->cur, sizeof(p->cur), "%s", k);
	b = snprintf(p->new, sizeof(p->new), "%s.new", k);
	c = snprintf(p->old, sizeof(p->old), "%s.old", k);
	return a < 0 || b < 0 || c < 0 || (size_t)c >= sizeof(p->old) ? -1 : 0;
}

static int
kr_exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0 || errno != ENOENT;
}

static void
kr_hex(const unsigned char *fp, char out[KEY_FP_LEN * 2 + 1])
{
	sodium_bin2hex(out, KEY_FP_LEN * 2 + 1, fp, KEY_FP_LEN);
}

/* Run op name with n parameters (binary where fmts[i] is 1); results in
 * binary when binres.  The result is the caller's to PQclear. */
static PGresult *
kr_exec(PGconn *pg, const char *name, int n, const char *const *vals, const int *lens,
        const int *fmts, int binres)
{
	const struct sql_op *op = db_op_lookup(name);

	if (op == NULL)
		fatalx("no op %s", name);
	return PQexecParams(pg, op->sql, n, NULL, vals, lens, fmts, binres);
}

static int
kr_ok(PGresult *res)
{
	ExecStatusType st = PQresultStatus(res);

	return st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
}

static int
kr_simple(PGconn *pg, const char *sql, char *err, size_t sz)
{
	PGresult *res = PQexec(pg, sql);
	int ok = kr_ok(res);

	if (!ok)
		snprintf(err, sz, "%s: %s", sql, PQresultErrorMessage(res));
	PQclear(res);
	return ok ? 0 : -1;
}

static PGconn *
kr_connect(const char *ci, char *err, size_t sz)
{
	/* the supervisor's loop waits for this connect: never without a bound
	 * (a connect_timeout of ci's own, coming after, has the last word) */
	static const char *const keys[] = {"connect_timeout", "dbname", NULL};
	const char *vals[] = {KR_CONNECT_TIMEOUT, ci, NULL};
	PGconn *pg = PQconnectdbParams(keys, vals, 1);

	if (PQstatus(pg) != CONNECTION_OK) {
		snprintf(err, sz, "cannot connect to the database: %s", PQerrorMessage(pg));
		PQfinish(pg);
		return NULL;
	}
	if (kr_simple(pg, KR_LOCK_TIMEOUT, err, sz) == -1 ||
	    kr_simple(pg, KR_STMT_TIMEOUT, err, sz) == -1) {
		PQfinish(pg);
		return NULL;
	}
	return pg;
}

/* The database's fingerprint into fp: 1, 0 when it records none, -1 with
 * err set. */
static int
kr_db_fingerprint(PGconn *pg, unsigned char fp[KEY_FP_LEN], char *err, size_t sz)
{
	PGresult *res = kr_exec(pg, "sup_key_state", 0, NULL, NULL, NULL, 1);
	int rc = -1;

	if (!kr_ok(res))
		snprintf(err, sz, "key_state: %s", PQresultErrorMessage(res));
	else if (PQntuples(res) == 0)
		rc = 0;
	else if (PQgetlength(res, 0, 0) != KEY_FP_LEN)
		snprintf(err, sz, "key_state: a fingerprint of %d bytes", PQgetlength(res, 0, 0));
	else {
		memcpy(fp, PQgetvalue(res, 0, 0), KEY_FP_LEN);
		rc = 1;
	}
	PQclear(res);
	return rc;
}

/* ---- the start ------------------------------------------------------------------ */

void
keyrotate_load(void)
{
	struct kr_paths p;
	char err[512];
	int created = 0, absent;

	if (kr_paths(&p) == -1)
		fatalx("master key: %s: path too long", sup.conf.master_key);
	if (!kr_exists(p.new) && !kr_exists(p.old)) {
		sup.master_key = key_load_or_create(p.cur, &created, err, sizeof(err));
		if (sup.master_key == NULL)
			fatalx("master key: %s", err);
		if (created)
			log_info("created a new master key in %s", p.cur);
		return;
	}
	/* A rotation was interrupted: never make a key now, the database
	 * decides which file is the key (keyrotate_recover). */
	sup.master_key = key_load_file(p.cur, &absent, err, sizeof(err));
	if (sup.master_key == NULL && !absent)
		fatalx("master key: %s", err);
	log_info("master key: %s%s%s found: an interrupted rotation, resolved once the "
	         "database is up",
	         kr_exists(p.new) ? p.new : "", kr_exists(p.new) && kr_exists(p.old) ? " and " : "",
	         kr_exists(p.old) ? p.old : "");
}

/* The key file at path, or NULL when it does not exist (fatal when it
 * cannot be read or fails the checks). */
static unsigned char *
kr_load_opt(const char *path)
{
	unsigned char *k;
	char err[512];
	int absent;

	if ((k = key_load_file(path, &absent, err, sizeof(err))) == NULL && !absent)
		fatalx("master key: %s", err);
	return k;
}

static void
kr_unlink(const char *path, const char *why)
{
	if (unlink(path) == 0)
		log_info("master key: removed %s (%s)", path, why);
	else if (errno != ENOENT)
		fatal("master key: cannot remove %s", path);
}

static int
kr_is(const unsigned char *key, const unsigned char fp[KEY_FP_LEN])
{
	unsigned char kfp[KEY_FP_LEN];

	if (key == NULL)
		return 0;
	key_fingerprint(key, kfp);
	return sodium_memcmp(kfp, fp, KEY_FP_LEN) == 0;
}

/* Make the file at from the key: MASTER_KEY replaced atomically.  The key
 * stays readable under one name or the other throughout. */
static void
kr_promote(const struct kr_paths *p, const char *from)
{
	if (rename(from, p->cur) == -1)
		fatal("master key: cannot rename %s to %s", from, p->cur);
	if (key_dir_sync(p->cur) == -1)
		fatal("master key: fsync of the directory of %s", p->cur);
	log_info("master key: %s is the key the database's secrets are under; renamed to %s", from,
	         p->cur);
}

/* The files against the database's record fp: keep the one it names. */
static void
kr_resolve(const struct kr_paths *p, const unsigned char fp[KEY_FP_LEN])
{
	unsigned char *knew = kr_load_opt(p->new), *kold = kr_load_opt(p->old);
	char hex[KEY_FP_LEN * 2 + 1];

	if (kr_is(sup.master_key, fp)) {
		kr_unlink(p->new, "an interrupted rotation that did not commit: rolled back");
		kr_unlink(p->old, "the key before a rotation that committed: finished");
		key_free(knew);
		key_free(kold);
	} else if (kr_is(knew, fp) || kr_is(kold, fp)) {
		int isnew = kr_is(knew, fp);

		kr_promote(p, isnew ? p->new : p->old);
		kr_unlink(isnew ? p->old : p->new,
		          isnew ? "the key before a rotation that committed: finished"
		                : "not the key the database names");
		key_free(sup.master_key);
		sup.master_key = isnew ? knew : kold;
		key_free(isnew ? kold : knew);
	} else {
		kr_hex(fp, hex);
		fatalx("master key: the database's secrets are under the key with fingerprint %s, "
		       "which is none of %s, %s, %s: put that key back in %s (nothing was changed)",
		       hex, p->cur, p->new, p->old, p->cur);
	}
	if (key_dir_sync(p->cur) == -1)
		fatal("master key: fsync of the directory of %s", p->cur);
	if (sodium_mprotect_readonly(sup.master_key) == -1)
		fatal("master key: mprotect");
}

/* A database no supervisor has started on: it gets our key's
 * fingerprint.  A stray MASTER_KEY.new cannot hold any secret (a rotation
 * records its key before it seals anything); a MASTER_KEY.old is not
 * explained and is refused. */
static void
kr_record(PGconn *pg, const struct kr_paths *p)
{
	unsigned char fp[KEY_FP_LEN];
	const char *vals[1] = {(const char *)fp};
	int lens[1] = {KEY_FP_LEN}, fmts[1] = {1};
	PGresult *res;

	if (sup.master_key == NULL || kr_exists(p->old))
		fatalx("master key: the database records no key, and %s %s: restore the key file "
		       "(nothing was changed)",
		       sup.master_key == NULL ? p->cur : p->old,
		       sup.master_key == NULL ? "is missing" : "exists");
	kr_unlink(p->new, "no rotation is recorded in the database");
	key_fingerprint(sup.master_key, fp);
	res = kr_exec(pg, "sup_key_record", 1, vals, lens, fmts, 0);
	if (!kr_ok(res))
		fatalx("master key: key_state: %s", PQresultErrorMessage(res));
	PQclear(res);
}

void
keyrotate_recover(const char *conninfo)
{
	unsigned char fp[KEY_FP_LEN];
	struct kr_paths p;
	char err[1024];
	PGconn *pg;
	int rc;

	if ((kr_conninfo = strdup(conninfo)) == NULL)
		fatal("strdup");
	if (kr_paths(&p) == -1 || (pg = kr_connect(conninfo, err, sizeof(err))) == NULL)
		fatalx("master key: %s", kr_paths(&p) == -1 ? "path too long" : err);
	if ((rc = kr_db_fingerprint(pg, fp, err, sizeof(err))) == -1)
		fatalx("master key: %s", err);
	if (rc == 0) {
		kr_record(pg, &p);
		rc = kr_db_fingerprint(pg, fp, err, sizeof(err)); /* another host's, maybe */
		if (rc != 1)
			fatalx("master key: %s", rc == -1 ? err : "key_state stays empty");
	}
	PQfinish(pg);
	kr_resolve(&p, fp);
}

/* ---- the rotation ---------------------------------------------------------------- */

struct kr_table {
	const char *rows_op, *reseal_op, *ctx;
	int ncols; /* columns before ciphertext and nonce */
};

static const struct kr_table kr_repo = {"sup_key_repo_rows", "sup_key_repo_reseal", SECRET_CTX_REPO,
                                        3};
static const struct kr_table kr_mcp = {"sup_key_mcp_rows", "sup_key_mcp_reseal", SECRET_CTX_MCP, 3};

/* The row's name for the operator. */
static void
kr_row_name(const struct kr_table *t, PGresult *res, int i, char *out, size_t sz)
{
	if (t == &kr_repo)
		snprintf(out, sz, "repo %s/%s (repo_connections id %s)", PQgetvalue(res, i, 1),
		         PQgetvalue(res, i, 2), PQgetvalue(res, i, 0));
	else
		snprintf(out, sz, "mcp server %s version %s (mcp_servers id %s)",
		         PQgetvalue(res, i, 1), PQgetvalue(res, i, 2), PQgetvalue(res, i, 0));
}

/* Row i of res opened with oldk and sealed with newk into ct/nonce. */
static int
kr_reseal_one(const struct kr_table *t, PGresult *res, int i, const unsigned char *oldk,
              const unsigned char *newk, unsigned char *plain, unsigned char *ct, size_t *ctlen,
              unsigned char nonce[SECRET_NONCE_LEN])
{
	const unsigned char *oct = (const unsigned char *)PQgetvalue(res, i, t->ncols);
	const unsigned char *on = (const unsigned char *)PQgetvalue(res, i, t->ncols + 1);
	size_t octlen = (size_t)PQgetlength(res, i, t->ncols), plen = 0;
	int rc;

	if (PQgetlength(res, i, t->ncols + 1) != SECRET_NONCE_LEN ||
	    secret_open(oldk, t->ctx, oct, octlen, on, plain, SECRET_MAX, &plen) == -1)
		return -1;
	rc = secret_seal(newk, t->ctx, plain, plen, nonce, ct, SECRET_MAX + SECRET_MAC_LEN, ctlen);
	sodium_memzero(plain, SECRET_MAX);
	return rc;
}

/* Every secret of table t sealed again; returns how many, or -1 with err. */
static int
kr_reseal(PGconn *pg, const struct kr_table *t, const unsigned char *oldk,
          const unsigned char *newk, char *err, size_t sz)
{
	PGresult *res = kr_exec(pg, t->rows_op, 0, NULL, NULL, NULL, 1), *up;
	unsigned char *plain = sodium_malloc(SECRET_MAX), nonce[SECRET_NONCE_LEN];
	unsigned char *ct = malloc(SECRET_MAX + SECRET_MAC_LEN);
	char name[512];
	size_t ctlen = 0;
	int i, n = -1;

	if (plain == NULL || ct == NULL)
		fatalx("key rotate: out of memory");
	if (!kr_ok(res)) {
		snprintf(err, sz, "%s: %s", t->rows_op, PQresultErrorMessage(res));
		goto out;
	}
	for (i = 0; i < PQntuples(res); i++) {
		if (kr_reseal_one(t, res, i, oldk, newk, plain, ct, &ctlen, nonce) == -1) {
			kr_row_name(t, res, i, name, sizeof(name));
			snprintf(err, sz,
			         "%s: its secret does not open with the current master key", name);
			goto out;
		}
		const char *vals[3] = {PQgetvalue(res, i, 0), (const char *)ct,
		                       (const char *)nonce};
		int lens[3] = {0, (int)ctlen, SECRET_NONCE_LEN}, fmts[3] = {0, 1, 1};

		up = kr_exec(pg, t->reseal_op, 3, vals, lens, fmts, 0);
		if (!kr_ok(up) || strcmp(PQcmdTuples(up), "1") != 0) {
			kr_row_name(t, res, i, name, sizeof(name));
			snprintf(err, sz, "%s: %s", name, PQresultErrorMessage(up));
			PQclear(up);
			goto out;
		}
		PQclear(up);
	}
	n = PQntuples(res);
out:
	sodium_free(plain);
	free(ct);
	PQclear(res);
	return n;
}

/* Inside the transaction: the record moved, everything sealed again,
 * audited.  0, or -1 with err set (the caller rolls back). */
static int
kr_transaction(PGconn *pg, const unsigned char *oldk, const unsigned char *newk, int *nrepo,
               int *nmcp, char *err, size_t sz)
{
	unsigned char ofp[KEY_FP_LEN], nfp[KEY_FP_LEN];
	char ohex[KEY_FP_LEN * 2 + 1], nhex[KEY_FP_LEN * 2 + 1], nr[16], nm[16];
	const char *vals[4] = {(const char *)ofp, (const char *)nfp, NULL, NULL};
	int lens[4] = {KEY_FP_LEN, KEY_FP_LEN, 0, 0}, fmts[4] = {1, 1, 0, 0};
	PGresult *res;
	int moved;

	key_fingerprint(oldk, ofp);
	key_fingerprint(newk, nfp);
	if (kr_simple(pg, "BEGIN", err, sz) == -1)
		return -1;
	res = kr_exec(pg, "sup_key_rotate_begin", 2, vals, lens, fmts, 0);
	moved = kr_ok(res) ? PQntuples(res) : -1;
	if (moved != 1)
		snprintf(err, sz, "%s",
		         moved == 0 ? "the database's secrets are not under this "
		                      "daemon's master key (key_state names another)"
		                    : PQresultErrorMessage(res));
	PQclear(res);
	if (moved != 1 || (*nrepo = kr_reseal(pg, &kr_repo, oldk, newk, err, sz)) < 0 ||
	    (*nmcp = kr_reseal(pg, &kr_mcp, oldk, newk, err, sz)) < 0)
		return -1;
	kr_hex(ofp, ohex);
	kr_hex(nfp, nhex);
	snprintf(nr, sizeof(nr), "%d", *nrepo);
	snprintf(nm, sizeof(nm), "%d", *nmcp);
	const char *avals[4] = {ohex, nhex, nr, nm};

	res = kr_exec(pg, "sup_key_rotate_audit", 4, avals, NULL, NULL, 0);
	if (!kr_ok(res)) {
		snprintf(err, sz, "audit_log: %s", PQresultErrorMessage(res));
		PQclear(res);
		return -1;
	}
	PQclear(res);
	return 0;
}

/* COMMIT, and when its answer is lost, what the database records: 1 when
 * it committed, 0 when not, -1 when that cannot be told. */
static int
kr_commit(PGconn *pg, const unsigned char *newk, char *err, size_t sz)
{
	unsigned char fp[KEY_FP_LEN];
	PGresult *res = PQexec(pg, "COMMIT");
	int ok = PQresultStatus(res) == PGRES_COMMAND_OK, rc;
	PGconn *again;

	if (!ok)
		snprintf(err, sz, "COMMIT: %s", PQresultErrorMessage(res));
	PQclear(res);
	if (ok)
		return 1;
	if (PQstatus(pg) == CONNECTION_OK)
		return 0; /* the server answered: it rolled back */
	if ((again = kr_connect(kr_conninfo, err, sz)) == NULL)
		return -1;
	rc = kr_db_fingerprint(again, fp, err, sz);
	PQfinish(again);
	return rc != 1 ? -1 : kr_is(newk, fp) ? 1 : 0;
}

/* After the commit: MASTER_KEY.new becomes MASTER_KEY, the old key kept as
 * MASTER_KEY.old until then.  0, or -1 with err (the next start finishes). */
static int
kr_files(const struct kr_paths *p, char *err, size_t sz)
{
	if (link(p->cur, p->old) == -1 || key_dir_sync(p->cur) == -1) {
		snprintf(err, sz, "cannot keep the old key as %s: %s", p->old, strerror(errno));
		return -1;
	}
	kr_crash_point(4);
	if (rename(p->new, p->cur) == -1 || key_dir_sync(p->cur) == -1) {
		snprintf(err, sz, "cannot rename %s to %s: %s", p->new, p->cur, strerror(errno));
		return -1;
	}
	kr_crash_point(5);
	if (unlink(p->old) == -1 || key_dir_sync(p->cur) == -1) {
		snprintf(err, sz, "cannot remove %s: %s", p->old, strerror(errno));
		return -1;
	}
	return 0;
}

/* The database work: 1 committed, 0 nothing changed, -1 outcome unknown. */
static int
kr_database(const unsigned char *newk, int *nrepo, int *nmcp, char *err, size_t sz)
{
	PGconn *pg;
	int rc;

	if ((pg = kr_connect(kr_conninfo, err, sz)) == NULL)
		return 0;
	if (kr_transaction(pg, sup.master_key, newk, nrepo, nmcp, err, sz) == -1) {
		PQfinish(pg); /* rolls back */
		return 0;
	}
	kr_crash_point(2);
	rc = kr_commit(pg, newk, err, sz);
	PQfinish(pg);
	return rc;
}

int
keyrotate_run(char *msg, size_t sz)
{
	unsigned char *newk, fp[KEY_FP_LEN];
	char err[3 * PATH_MAX + 512], hex[KEY_FP_LEN * 2 + 1];
	struct kr_paths p;
	int nrepo = 0, nmcp = 0, rc;

	if (kr_conninfo == NULL || kr_paths(&p) == -1) {
		snprintf(msg, sz, "key rotate: the database is not open");
		return -1;
	}
	if (kr_exists(p.new) || kr_exists(p.old)) {
		snprintf(msg, sz,
		         "key rotate: %s exists: an unfinished rotation, which the next "
		         "start resolves; nothing changed",
		         kr_exists(p.new) ? p.new : p.old);
		return -1;
	}
	if ((newk = key_create_file(p.new, err, sizeof(err))) == NULL) {
		snprintf(msg, sz, "key rotate: %s; nothing changed", err);
		return -1;
	}
	kr_crash_point(1);
	if ((rc = kr_database(newk, &nrepo, &nmcp, err, sizeof(err))) != 1) {
		if (rc == 0)
			unlink(p.new);
		key_free(newk);
		snprintf(msg, sz,
		         rc == 0 ? "key rotate: %s; nothing changed"
		                 : "key rotate: %s: whether the rotation committed is unknown; "
		                   "both key files "
		                   "are kept and the next start uses the one the database names",
		         err);
		log_warnx("%s", msg);
		return -1;
	}
	kr_crash_point(3);
	/* Committed: the secrets are under the new key from here on. */
	key_free(sup.master_key);
	sup.master_key = newk;
	key_fingerprint(newk, fp);
	kr_hex(fp, hex);
	if (kr_files(&p, err, sizeof(err)) == -1) {
		snprintf(msg, sz, "key rotate: committed, but %s; the next start finishes it", err);
		log_warnx("%s", msg);
		return -1;
	}
	log_info("key rotate: %d repository tokens and %d MCP credentials sealed under the new "
	         "master key (fingerprint %.16s)",
	         nrepo, nmcp, hex);
	snprintf(msg, sz,
	         "rotated the master key: %d repository tokens and %d MCP credentials "
	         "sealed again; fingerprint %s",
	         nrepo, nmcp, hex);
	return 0;
}
