/*
 * What httpd asks of the supervisor other than database operations: the
 * files of the artifact store, and sealing a repository token.
 *
 * Serving the content-addressed artifact store to httpd.  The store lives
 * under the state directory ("STATE/artifacts/ab/abcdef..."), written only
 * by the supervisor; httpd, chrooted and unprivileged, cannot open it.  For
 * IMSG_ARTIFACT_OPEN the supervisor asks the database itself whether the
 * user may read the artifact (sup_artifact_stored), opens the file beneath
 * the store without following any link, checks that it is a regular file of
 * the recorded size, and passes the descriptor (read-only) back.  httpd
 * never names a path: only the artifact's id.
 */
#include <sys/stat.h>
#include <sys/syscall.h>

#include <errno.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "supervisor/db.h"
#include "supervisor/secret.h"
#include "supervisor/supervisor.h"

struct art_ctx {
	struct proc *p;
	uint64_t gen;
	uint64_t msgid;
	char art[IPC_UUID_LEN + 1];
};

static void
art_reply_err(struct proc *p, uint64_t msgid, uint32_t status)
{
	struct ipc_wbuf w;

	ipc_wbuf_begin(&w, IMSG_ARTIFACT_ERR, msgid, 1);
	ipc_put_u64(&w, status);
	proc_send(p, &w, -1);
}

/*
 * Open rel ("ab/<64 hex>") beneath STATE/artifacts: no symlink, no magic
 * link, nothing outside; a regular file of exactly size bytes.  Returns the
 * descriptor or -1 (logged).
 */
static int
art_open(const char *art, const char *rel, long long size)
{
	struct open_how how = {.flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK,
	                       .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
	                                  RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV};
	char dir[PATH_MAX];
	struct stat st;
	int dfd, fd;

	if (fmt_ok(dir, sizeof(dir), "%s/artifacts", sup.conf.state_dir) == -1)
		return -1;
	if ((dfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) == -1) {
		log_warnx("artifact %s: the store %s: %s", art, dir, strerror(errno));
		return -1;
	}
	fd = (int)syscall(SYS_openat2, dfd, rel, &how, sizeof(how));
	close(dfd);
	if (fd == -1) {
		log_warnx("artifact %s: %s in the store: %s", art, rel, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode) || st.st_size != size) {
		log_warnx("artifact %s: %s in the store is not a regular file of %lld bytes", art,
		          rel, size);
		close(fd);
		return -1;
	}
	return fd;
}

static void
art_done(uint64_t reqid, int code, const char *err, void *pgres, void *arg)
{
	struct art_ctx *x = arg;
	PGresult *res = pgres;
	struct ipc_wbuf w;
	const char *rel;
	char *end;
	long long size;
	int fd;

	if (x->p->gen != x->gen || x->p->chan == NULL)
		goto out; /* the httpd that asked is gone */
	if (code != DB_OK) {
		log_warnx("artifact %s: %s", x->art, err);
		art_reply_err(x->p, x->msgid, 503);
		goto out;
	}
	if (PQntuples(res) != 1) {
		art_reply_err(x->p, x->msgid, 404);
		goto out;
	}
	rel = PQgetvalue(res, 0, 0);
	size = strtoll(PQgetvalue(res, 0, 1), &end, 10);
	if (*end != '\0' || size <= 0 || (fd = art_open(x->art, rel, size)) == -1) {
		art_reply_err(x->p, x->msgid, 500);
		goto out;
	}
	ipc_wbuf_begin(&w, IMSG_ARTIFACT_FD, x->msgid, 1);
	ipc_put_u64(&w, (uint64_t)size);
	proc_send(x->p, &w, fd); /* the channel sends a duplicate of fd */
	close(fd);
out:
	free(x);
}

void
sup_artifact_open(struct proc *p, struct ipc_msg *m)
{
	const struct sql_op *op = db_op_lookup("sup_artifact_stored");
	char user[IPC_UUID_LEN + 1];
	struct db_params params;
	struct art_ctx *x;

	if (op == NULL)
		fatalx("no op sup_artifact_stored");
	if ((x = calloc(1, sizeof(*x))) == NULL)
		fatal("calloc");
	if (ipc_dec_artifact_open(m->body, user, x->art) == -1) {
		free(x); /* the catalog checked it: not reached */
		return;
	}
	x->p = p;
	x->gen = p->gen;
	x->msgid = m->id;
	memset(&params, 0, sizeof(params));
	params.n = 2;
	if ((params.values[0] = strdup(user)) == NULL || (params.values[1] = strdup(x->art)) == NULL)
		fatal("strdup");
	if (db_pool_submit(op, &params, art_done, x) == 0) {
		db_params_free(&params);
		art_reply_err(p, m->id, 503);
		free(x);
	}
}

/*
 * IMSG_REPO_SEAL: a repository token given over the API, sealed under the
 * "reposecr" key as agrippactl repo add does, so that httpd can store it
 * without ever holding a key.  httpd learns only the ciphertext and nonce
 * of what it sent; nothing here decrypts.
 */
void
sup_repo_seal(struct proc *p, struct ipc_msg *m)
{
	unsigned char nonce[SECRET_NONCE_LEN], ct[IPC_SECRET_MAX + SECRET_MAC_LEN];
	const uint8_t *plain;
	struct ipc_wbuf w;
	size_t plen, ctlen;

	if (ipc_dec_repo_seal(m->body, &plain, &plen) == -1)
		return; /* the catalog checked it: not reached */
	if (secret_seal(sup.master_key, SECRET_CTX_REPO, plain, plen, nonce, ct, sizeof(ct),
	                &ctlen) == -1)
		fatalx("cannot seal a repository token");
	ipc_wbuf_begin(&w, IMSG_REPO_SEALED, m->id, 2);
	ipc_put_bin(&w, nonce, sizeof(nonce));
	ipc_put_bin(&w, ct, ctlen);
	proc_send(p, &w, -1);
	/* the channel wipes what it handled; the token passed through here */
	sodium_memzero((void *)plain, plen);
}
