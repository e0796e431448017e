/*
 * agrippa-git: the transient git helper.  The supervisor starts it for one
 * operation, already as the service user and with no_new_privs, with its
 * end of a socket pair on fd 3 and nothing else open; it reads one request,
 * answers one IMSG_GIT_RESULT and exits:
 *  - IMSG_GIT_CHECKOUT (the repository URL, the token the supervisor
 *    decrypted for this checkout only, the workspace, and for a run the
 *    directory of the daemon's trusted bare copy): githelper/checkout.c;
 *  - IMSG_GIT_DIFF (the trusted copy, the workspace, the base commit, a
 *    size cap, and the file to write to): the workspace's patch against the
 *    base commit, githelper/diff.c.
 *
 * A program of its own so that libgit2, with its TLS and SSH stacks, is
 * never mapped into agrippad's long-lived processes; and so that the only
 * process that ever holds a repository token in the clear, apart from the
 * supervisor, lives for one checkout.  It cannot be traced or dump core;
 * the token is wiped as soon as the clone is done.
 */
#include <sys/prctl.h>
#include <sys/resource.h>

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "githelper/checkout.h"
#include "githelper/diff.h"
#include "ipc/ipc.h"
#include "ipc/ipc_msg.h"

#define GIT_FD 3
#define GIT_REQUEST_TIMEOUT_MS 10000

static void
answer(int ok, const char *err, const char *base, uint64_t size)
{
	struct ipc_wbuf w;

	ipc_wbuf_begin(&w, IMSG_GIT_RESULT, 0, 4);
	ipc_put_bool(&w, ok);
	ipc_put_str(&w, ok ? "" : err);
	ipc_put_str(&w, ok ? base : "");
	ipc_put_u64(&w, size);
	if (ipc_wbuf_finish(&w, IPC_MAX_FRAME_DEFAULT) == -1 || ipc_write_frame(GIT_FD, &w, -1) == -1)
		fatal("answering the supervisor");
	ipc_wbuf_free(&w);
}

static void
do_checkout(struct ipc_msg *m)
{
	static struct ipc_git_checkout req;
	char base[GH_OID_HEX_MAX + 1], err[IPC_ERRMSG_MAX], *token = NULL;
	int rc;

	if (ipc_dec_git_checkout(m->body, &req) == -1)
		fatalx("a malformed checkout request");
	if (req.toklen > 0) {
		if ((token = sodium_malloc(req.toklen + 1)) == NULL)
			fatalx("out of memory");
		memcpy(token, req.token, req.toklen);
		token[req.toklen] = '\0';
	}
	ipc_msg_free(m); /* wipes the frame, token included */
	if (req.gitdir[0] != '\0')
		rc = gh_checkout_split(req.url, token, req.gitdir, req.workspace, base, err,
		    sizeof(err));
	else
		rc = gh_checkout(req.url, token, req.workspace, base, err, sizeof(err));
	if (token != NULL)
		sodium_free(token); /* wipes it */
	answer(rc == 0, err, base, 0);
}

static void
do_diff(struct ipc_msg *m)
{
	static struct ipc_git_diff req;
	char err[IPC_ERRMSG_MAX];
	size_t written = 0;
	int rc, fd = m->fd;

	if (ipc_dec_git_diff(m->body, &req) == -1 || fd < 0)
		fatalx("a malformed diff request");
	m->fd = -1;
	ipc_msg_free(m);
	rc = gh_diff(req.gitdir, req.workspace, req.base, fd, (size_t)req.cap, &written, err,
	    sizeof(err));
	if (rc == 0 && fsync(fd) == -1 && errno != EINVAL) {
		snprintf(err, sizeof(err), "writing the patch: %s", strerror(errno));
		rc = -1;
	}
	close(fd);
	answer(rc == 0, err, req.base, rc == 0 ? (uint64_t)written : 0);
}

int
main(int argc, char *argv[])
{
	struct rlimit core = {0, 0};
	struct ipc_msg m;
	const char *why;

	log_init(1, 0, 0);
	if (argc != 1) {
		fprintf(stderr, "usage: agrippa-git (started by agrippad only)\n");
		return 2;
	}
	if (prctl(PR_SET_DUMPABLE, 0) == -1 || setrlimit(RLIMIT_CORE, &core) == -1 ||
	    sodium_init() < 0)
		fatal("set-up");
	if (ipc_read_frame(GIT_FD, ROLE_GITHELPER, ROLE_SUPERVISOR, IPC_MAX_FRAME_DEFAULT,
	                   GIT_REQUEST_TIMEOUT_MS, &m, &why) == -1)
		fatalx("no request from the supervisor: %s", why);
	if (m.type == IMSG_GIT_CHECKOUT)
		do_checkout(&m);
	else if (m.type == IMSG_GIT_DIFF)
		do_diff(&m);
	else
		fatalx("the request is neither a checkout nor a diff");
	return 0;
}
