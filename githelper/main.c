/*
 * agrippa-git: the transient git helper.  The supervisor starts it for one
 * checkout, already as the service user and with no_new_privs, with its end
 * of a socket pair on fd 3 and nothing else open; it reads one
 * IMSG_GIT_CHECKOUT (the repository URL, the token the supervisor
 * decrypted for this checkout only, the workspace), clones
 * (githelper/checkout.c), answers one IMSG_GIT_RESULT and exits.
 *
 * A program of its own so that libgit2, with its TLS and SSH stacks, is
 * never mapped into agrippad's long-lived processes; and so that the only
 * process that ever holds a repository token in the clear, apart from the
 * supervisor, lives for one checkout.  It cannot be traced or dump core;
 * the token is wiped as soon as the clone is done.
 */
#include <sys/prctl.h>
#include <sys/resource.h>

#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "githelper/checkout.h"
#include "ipc/ipc.h"
#include "ipc/ipc_msg.h"

#define GIT_FD 3
#define GIT_REQUEST_TIMEOUT_MS 10000

int
main(int argc, char *argv[])
{
	static struct ipc_git_checkout req;
	struct rlimit core = {0, 0};
	char base[GH_OID_HEX_MAX + 1], err[IPC_ERRMSG_MAX], *token = NULL;
	struct ipc_wbuf w;
	struct ipc_msg m;
	const char *why;
	int rc;

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
	if (m.type != IMSG_GIT_CHECKOUT || ipc_dec_git_checkout(m.body, &req) == -1)
		fatalx("the request is not a checkout");
	if (req.toklen > 0) {
		if ((token = sodium_malloc(req.toklen + 1)) == NULL)
			fatalx("out of memory");
		memcpy(token, req.token, req.toklen);
		token[req.toklen] = '\0';
	}
	ipc_msg_free(&m); /* wipes the frame, token included */
	rc = gh_checkout(req.url, token, req.workspace, base, err, sizeof(err));
	if (token != NULL)
		sodium_free(token); /* wipes it */
	ipc_wbuf_begin(&w, IMSG_GIT_RESULT, 0, 3);
	ipc_put_bool(&w, rc == 0);
	ipc_put_str(&w, rc == 0 ? "" : err);
	ipc_put_str(&w, rc == 0 ? base : "");
	if (ipc_wbuf_finish(&w, IPC_MAX_FRAME_DEFAULT) == -1 || ipc_write_frame(GIT_FD, &w, -1) == -1)
		fatal("answering the supervisor");
	ipc_wbuf_free(&w);
	return 0;
}
