/*
 * agrippactl mcp test [-c TOOL [-a ARGS] [-n COUNT]] NAME [VERSION]
 * (agrippactl(8)): start a stdio MCP server as a run would, list its tools
 * (and call one, COUNT times, timing each call), stop it.
 *
 * The supervisor opens the server's credentials, expands its env with
 * them (mcpspec_expand) and builds its sandbox (sbx.c, a struct sbx_mcp):
 * the server's own environment is the only place the credentials go.  It
 * never speaks to the server: the supervisor is privileged and the server's
 * bytes are hostile, and no more does the client read a credential: the
 * server's sandbox relays its output with every credential value masked
 * (sandbox/mcphost.c), which is why the values go to the sandbox builder
 * too.  The MCP client is agrippa-mcpc (mcpc/main.c), a
 * transient tool (transient.c) running as the service user with no
 * capability and no secret, holding the client's end of the server's
 * stdio socket and the read end of its stderr; what it prints (the tools
 * as JSON, or why the server failed with its stderr's tail) comes back as
 * text, which the supervisor does not parse either: it redacts every
 * credential of the server from it again, byte for byte, and hands it on.
 *
 * When the client is done (it closed its end: the server's EOF), the
 * sandbox is stopped: SIGTERM MCPTEST_GRACE_MS later if the server has not
 * gone, SIGKILL as long again after that (sbx_stop).  Its cgroup and pid
 * namespace go with it.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <event2/event.h>

#include "common/log.h"
#include "common/mcpspec.h"
#include "common/util.h"
#include "runner/mcp.h"
#include "supervisor/sbx.h"
#include "supervisor/supervisor.h"

#define MCPTEST_GRACE_MS 2000    /* EOF to SIGTERM, SIGTERM to SIGKILL */
#define MCPTEST_SLACK_MS 90000   /* beyond startup_timeout (and call_timeout, which
                                    bounds the calls): the client's listing */
#define MCPTEST_SECRETS_MAX (MCP_CREDS_KEYS_MAX + 1)

struct mcptest {
	char name[MCPSPEC_NAME_MAX + 1];
	struct sbx *sbx;      /* until it is reaped */
	char egress[IPC_UUID_LEN + 1]; /* its id in egress, "" for no network */
	pid_t client;         /* agrippa-mcpc, until it has exited; or -1 */
	struct event *limit;  /* the client's time is up */
	/* the server's credentials, masked in the client's answer (the
	 * relay masks them in the server's output before: mcp_sandbox_start) */
	struct secret_set secrets;
	mcptest_cb cb;
	void *arg;
};

static void
mt_secret(const char *p, size_t n, void *arg)
{
	struct mcptest *t = arg;

	if (t->secrets.n < MCPTEST_SECRETS_MAX)
		secret_set_copy(&t->secrets, p, n);
}

static void
mt_forget_secrets(struct mcptest *t)
{
	secret_set_free(&t->secrets);
}

static void
mt_free_if_done(struct mcptest *t)
{
	if (t->sbx != NULL || t->client != -1)
		return;
	if (t->limit != NULL)
		event_free(t->limit);
	mt_forget_secrets(t);
	free(t);
}

static void
mt_sbx_done(struct sbx *s, int status, void *arg)
{
	struct mcptest *t = arg;

	(void)s;
	(void)status;
	t->sbx = NULL;
	if (t->egress[0] != '\0')
		egress_runs_end(t->egress);
	t->egress[0] = '\0';
	mt_free_if_done(t);
}

static void
mt_client_done(void *arg, int status, char *out)
{
	struct mcptest *t = arg;
	size_t len = strlen(out);
	int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;

	t->client = -1;
	secret_set_redact(&t->secrets, out, len);
	mt_forget_secrets(t);
	if (t->sbx != NULL)
		sbx_stop(t->sbx, MCPTEST_GRACE_MS);
	while (len > 0 && out[len - 1] == '\n')
		out[--len] = '\0';
	if (!ok && len == 0)
		out = WIFSIGNALED(status) ? "the MCP client was killed (its time was up)"
		                          : "the MCP client failed";
	if (t->cb != NULL)
		t->cb(t->arg, ok, out);
	t->cb = NULL;
	mt_free_if_done(t);
}

static void
mt_limit(evutil_socket_t fd, short what, void *arg)
{
	struct mcptest *t = arg;

	if (t->client != -1) {
		log_warnx("mcp test %s: the client is still at work; killing it", t->name);
		kill(t->client, SIGKILL);
	}
}

struct mcptest *
mcptest_start(const char *name, const char *spec_text, const char *creds_text, size_t credslen,
              const struct mcpspec_ctx *ctx, const struct mcptest_call *call, mcptest_cb cb,
              void *arg, char *err, size_t errsz)
{
	struct mcptest *t = NULL;
	struct mcp_creds *creds = NULL;
	struct mcpspec *s;
	struct sbx_req req;
	char why[512], ms[16], count[16], callms[16];
	const char *args[7];
	struct timeval tv;
	int io = -1, serr = -1;

	if ((s = mcpspec_parse(spec_text, strlen(spec_text), ctx, why, sizeof(why))) == NULL) {
		snprintf(err, errsz, "its stored spec is refused now: %s", why);
		return NULL;
	}
	if (s->transport != MCPSPEC_STDIO) {
		snprintf(err, errsz, "an http server is called by the proxy; only stdio servers "
		                     "can be tested");
		goto fail;
	}
	if (creds_text != NULL &&
	    (creds = mcp_creds_parse(creds_text, credslen, why, sizeof(why))) == NULL) {
		snprintf(err, errsz, "its stored credentials are unreadable: %s", why);
		goto fail;
	}
	if ((t = calloc(1, sizeof(*t))) == NULL)
		fatal("calloc");
	snprintf(t->name, sizeof(t->name), "%s", name);
	t->client = -1;
	t->cb = cb;
	t->arg = arg;
	if (creds_text != NULL)
		mcp_creds_secrets(creds_text, credslen, mt_secret, t);
	/* built as a run's would be, with a fresh, empty workspace (read-only
	 * for workspace: read); its network events only in the log */
	req = (struct sbx_req){ .readonly = s->workspace == MCPSPEC_WS_READ, .done = mt_sbx_done,
		                .arg = t };
	if ((t->sbx = mcp_sandbox_start(s, creds, creds_text, credslen, "-", name, &req, t->egress,
	                                &io, &serr, err, errsz)) == NULL)
		goto fail;
	snprintf(ms, sizeof(ms), "%u", s->startup_timeout * 1000);
	args[0] = name;
	args[1] = ms;
	args[2] = NULL;
	if (call != NULL) {
		snprintf(count, sizeof(count), "%u", call->count);
		snprintf(callms, sizeof(callms), "%u", s->call_timeout * 1000);
		args[2] = call->tool;
		args[3] = call->args;
		args[4] = count;
		args[5] = callms;
		args[6] = NULL;
	}
	tv.tv_sec = s->startup_timeout + MCPTEST_SLACK_MS / 1000 +
	    (call != NULL ? s->call_timeout : 0);
	tv.tv_usec = 0;
	if ((t->limit = evtimer_new(sup.base, mt_limit, t)) == NULL || evtimer_add(t->limit, &tv))
		fatalx("mcp test: evtimer");
	/* closes io and serr whatever happens */
	if ((t->client = transient_start_exe(sup.mcpc_exe, "agrippa-mcpc", args, io, serr,
	                                     (uid_t)sup.uid, (gid_t)sup.gid, mt_client_done, t)) ==
	    -1) {
		snprintf(err, errsz, "cannot start its MCP client");
		t->cb = NULL;
		sbx_stop(t->sbx, 0);
		mcpspec_free(s);
		mcp_creds_free(creds);
		return NULL; /* t goes when the sandbox is reaped */
	}
	log_info("mcp test %s: sandbox %s, client %ld", name, sbx_id(t->sbx), (long)t->client);
	mcpspec_free(s);
	mcp_creds_free(creds);
	return t;
fail:
	mcpspec_free(s);
	mcp_creds_free(creds);
	if (t != NULL) {
		mt_forget_secrets(t);
		free(t);
	}
	return NULL;
}

void
mcptest_abandon(struct mcptest *t)
{
	t->cb = NULL;
	if (t->client != -1)
		kill(t->client, SIGKILL); /* its end closes: the server's EOF */
}
