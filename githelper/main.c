/*
 * agrippa-git: the transient git helper.  The supervisor starts it for one
 * operation, already as the service user and with no_new_privs, with its
 * end of a socket pair on fd 3 and nothing else open; it reads one request,
 * answers one IMSG_GIT_RESULT and exits:
 *  - IMSG_GIT_FETCH (the repository URL, the token the supervisor decrypted
 *    for this fetch only, the connection's mirror): githelper/mirror.c;
 *  - IMSG_GIT_CHECKOUT (the mirror, a ref, the workspace): the run's work
 *    tree written from the mirror, githelper/checkout.c;
 *  - IMSG_GIT_DIFF (the mirror, the workspace, the base commit, a size cap,
 *    the workspace's list, and the file to write to): the workspace's patch
 *    against the base commit, githelper/diff.c (the list, githelper/stat.c,
 *    spares hashing the files unchanged since the checkout);
 *  - IMSG_GIT_PUSH (the URL, the token, the mirror, the workspace, the base
 *    commit, the commit's author, time and message, the branch and its
 *    lease): the run's commit pushed, githelper/push.c, answered with
 *    IMSG_PR_RESULT;
 *  - IMSG_GIT_PR (the forge, its API, the connection's URL, the token, the
 *    head and base branches, the title, body and draft flag, the pull
 *    request recorded earlier): opened or updated with libcurl,
 *    githelper/forge.c, answered with IMSG_PR_RESULT.
 * Run by git as its credential helper (--credential-fd=3 ACTION), it asks
 * the helper process above it for the token (githelper/mirror.h).
 *
 * A program of its own so that libgit2 and the git program, with their TLS
 * stacks, are never mapped into agrippad's long-lived processes; and so
 * that the only process that ever holds a repository token in the clear,
 * apart from the supervisor, lives for one fetch.  It cannot be traced or
 * dump core; the token is wiped as soon as the fetch is done.
 */
#include <sys/prctl.h>
#include <sys/resource.h>

#include <curl/curl.h>
#include <errno.h>
#include <git2.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "githelper/checkout.h"
#include "githelper/diff.h"
#include "githelper/forge.h"
#include "githelper/mirror.h"
#include "githelper/push.h"
#include "ipc/ipc.h"
#include "ipc/ipc_msg.h"
#include "tmpl/tmpl.h"

_Static_assert(GH_REF_MAX == IPC_GIT_REF_MAX && GH_REF_MAX == TMPL_REF_MAX,
               "one bound for a ref, wherever it is checked");

#define GIT_FD 3
#define GIT_REQUEST_TIMEOUT_MS 10000

static void
answer(int ok, const char *err, const char *base, uint64_t size, const char *ref)
{
	struct ipc_wbuf w;

	ipc_wbuf_begin(&w, IMSG_GIT_RESULT, 0, 5);
	ipc_put_bool(&w, ok);
	ipc_put_str(&w, ok ? "" : err);
	ipc_put_str(&w, ok ? base : "");
	ipc_put_u64(&w, size);
	ipc_put_str(&w, ok ? ref : "");
	if (ipc_wbuf_finish(&w, IPC_MAX_FRAME_DEFAULT) == -1 || ipc_write_frame(GIT_FD, &w, -1) == -1)
		fatal("answering the supervisor");
	ipc_wbuf_free(&w);
}

/* The request's token, NUL-terminated in locked memory (NULL for none);
 * the message, token included, is wiped. */
static char *
take_token(struct ipc_msg *m, const uint8_t *tok, size_t len)
{
	char *token = NULL;

	if (len > 0) {
		if ((token = sodium_malloc(len + 1)) == NULL)
			fatalx("out of memory");
		memcpy(token, tok, len);
		token[len] = '\0';
	}
	ipc_msg_free(m);
	return token;
}

static void
do_fetch(struct ipc_msg *m)
{
	static struct ipc_git_fetch req;
	char err[IPC_ERRMSG_MAX], *token;
	uint64_t size = 0;
	int rc;

	if (ipc_dec_git_fetch(m->body, &req) == -1)
		fatalx("a malformed fetch request");
	token = take_token(m, req.token, req.toklen); /* the frame is wiped */
	rc = gh_fetch(req.url, token, req.mirror, &size, err, sizeof(err));
	if (token != NULL)
		sodium_free(token); /* wipes it */
	answer(rc == 0, err, "", size, "");
}

static void
do_checkout(struct ipc_msg *m)
{
	static struct ipc_git_checkout req;
	char base[GH_OID_HEX_MAX + 1], ref[GH_REF_MAX + 1], err[IPC_ERRMSG_MAX];
	int rc;

	if (ipc_dec_git_checkout(m->body, &req) == -1)
		fatalx("a malformed checkout request");
	ipc_msg_free(m);
	rc = gh_workspace(req.mirror, req.ref, req.workspace, req.url, base, ref, err, sizeof(err));
	answer(rc == 0, err, base, 0, ref);
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
	rc = gh_diff_listed(req.gitdir, req.workspace, req.base, req.stats, fd, (size_t)req.cap,
	                    &written, err, sizeof(err));
	if (rc == 0 && fsync(fd) == -1 && errno != EINVAL) {
		snprintf(err, sizeof(err), "writing the patch: %s", strerror(errno));
		rc = -1;
	}
	close(fd);
	answer(rc == 0, err, req.base, rc == 0 ? (uint64_t)written : 0, "");
}

/* A push's or a pull request's answer. */
static void
answer_pr(int ok, const char *err, const char *commit, uint32_t flags, uint64_t number,
          const char *url, const char *note)
{
	struct ipc_wbuf w;

	ipc_wbuf_begin(&w, IMSG_PR_RESULT, 0, 7);
	ipc_put_bool(&w, ok);
	ipc_put_str(&w, ok ? "" : err);
	ipc_put_str(&w, ok ? commit : "");
	ipc_put_u64(&w, ok ? flags : 0);
	ipc_put_u64(&w, ok ? number : 0);
	ipc_put_str(&w, ok ? url : "");
	ipc_put_str(&w, note);
	if (ipc_wbuf_finish(&w, IPC_MAX_FRAME_DEFAULT) == -1 || ipc_write_frame(GIT_FD, &w, -1) == -1)
		fatal("answering the supervisor");
	ipc_wbuf_free(&w);
}

static void
do_push(struct ipc_msg *m)
{
	static struct ipc_git_push req;
	struct gh_push_req pr;
	struct gh_push_res res;
	char err[IPC_ERRMSG_MAX], branch[IPC_GIT_REF_MAX + 16], *token, *message;
	int rc;

	if (ipc_dec_git_push(m->body, &req) == -1)
		fatalx("a malformed push request");
	message = memdup0(req.message, req.messagelen);
	token = take_token(m, req.token, req.toklen);
	snprintf(branch, sizeof(branch), "refs/heads/%s", req.branch);
	memset(&pr, 0, sizeof(pr));
	pr.mirror = req.mirror;
	pr.workdir = req.workspace;
	pr.base = req.base;
	pr.stats = req.stats;
	pr.cap = (size_t)req.cap;
	pr.author_name = req.author_name;
	pr.author_email = req.author_email;
	pr.when = (int64_t)req.when;
	pr.message = message;
	pr.url = req.url;
	pr.token = token;
	pr.username = req.username;
	pr.branch = branch;
	pr.lease = req.lease;
	memset(&res, 0, sizeof(res));
	rc = gh_push(&pr, &res, err, sizeof(err));
	if (token != NULL)
		sodium_free(token); /* wipes it */
	free(message);
	answer_pr(rc == 0, err, res.commit,
	          (res.empty ? IPC_PR_F_EMPTY : 0) | (res.already ? IPC_PR_F_ALREADY : 0), 0, "", "");
}

static void
do_pr(struct ipc_msg *m)
{
	static struct ipc_git_pr req;
	struct gh_pr_req pr;
	struct gh_pr_res res;
	char err[IPC_ERRMSG_MAX], *token, *title, *body;
	int rc;

	if (ipc_dec_git_pr(m->body, &req) == -1)
		fatalx("a malformed pull request request");
	title = memdup0(req.title, req.titlelen);
	body = memdup0(req.body, req.bodylen);
	token = take_token(m, req.token, req.toklen);
	memset(&pr, 0, sizeof(pr));
	pr.forge = req.forge == IPC_FORGE_GITLAB ? FORGE_GITLAB : FORGE_GITHUB;
	pr.api_url = req.api_url;
	pr.repo_url = req.url;
	pr.token = token != NULL ? token : "";
	pr.head = req.head;
	pr.base = req.base;
	pr.title = title;
	pr.body = body;
	pr.draft = req.draft;
	pr.number = req.number;
	memset(&res, 0, sizeof(res));
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		snprintf(err, sizeof(err), "libcurl cannot start");
		rc = -1;
	} else
		rc = gh_forge_pr(&pr, &res, err, sizeof(err));
	if (token != NULL)
		sodium_free(token); /* wipes it */
	free(title);
	free(body);
	answer_pr(rc == 0, err, "",
	          (res.opened ? IPC_PR_F_OPENED : 0) | (res.draft ? IPC_PR_F_DRAFT : 0), res.number,
	          res.url, rc == 0 ? res.note : "");
}

int
main(int argc, char *argv[])
{
	struct rlimit core = {0, 0};
	struct ipc_msg m;
	const char *why;
	char credfd[32];

	log_init(1, 0, 0);
	if (prctl(PR_SET_DUMPABLE, 0) == -1 || setrlimit(RLIMIT_CORE, &core) == -1 ||
	    sodium_init() < 0)
		fatal("set-up");
	snprintf(credfd, sizeof(credfd), "--credential-fd=%d", GH_CRED_FD);
	if (argc == 3 && strcmp(argv[1], credfd) == 0)
		return gh_credential_helper(GH_CRED_FD, argv[2]);
	if (argc != 1) {
		fprintf(stderr, "usage: agrippa-git (started by agrippad only)\n");
		return 2;
	}
	/*
	 * libgit2 set up before the request: its TLS back end (Debian's is
	 * mbedTLS) parses every certificate of the system's bundle as it
	 * starts, which a spare helper (supervisor/gitrun.c) does while it
	 * waits instead of while a run waits for its checkout or patch.  Every
	 * operation's own init and shutdown only count above this one.
	 */
	if (git_libgit2_init() < 0)
		fatalx("libgit2: %s", gh_git_error());
	if (ipc_read_frame(GIT_FD, ROLE_GITHELPER, ROLE_SUPERVISOR, IPC_MAX_FRAME_DEFAULT,
	                   GIT_REQUEST_TIMEOUT_MS, &m, &why) == -1) {
		git_libgit2_shutdown();
		fatalx("no request from the supervisor: %s", why);
	}
	if (m.type == IMSG_GIT_FETCH)
		do_fetch(&m);
	else if (m.type == IMSG_GIT_CHECKOUT)
		do_checkout(&m);
	else if (m.type == IMSG_GIT_DIFF)
		do_diff(&m);
	else if (m.type == IMSG_GIT_PUSH)
		do_push(&m);
	else if (m.type == IMSG_GIT_PR)
		do_pr(&m);
	else
		fatalx("the request is neither a fetch, a checkout, a diff, a push nor a pull "
		       "request");
	git_libgit2_shutdown();
	return 0;
}
