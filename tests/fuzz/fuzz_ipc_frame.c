/* FUZZ_SOURCES: */
/*
 * IPC frame payloads (the bytes after the length prefix) as a hostile peer
 * could send them: the msgpack pre-scan, the envelope, the catalog check for
 * every role pair with and without a descriptor, and every typed decoder on
 * whatever body arrived (including chunk reassembly).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ipc/ipc_msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
fuzz_rows(struct ipc_db_result *r)
{
	struct ipc_cur row;
	const char *s;
	size_t len;

	while (ipc_get_array(&r->rows, &row, r->ncols) == 0) {
		while (ipc_get_nil(&row) == 0 || ipc_get_str(&row, &s, &len, SIZE_MAX) == 0)
			;
		if (ipc_end(&row) == -1)
			__builtin_trap(); /* the validator promised nil|str only */
	}
}

static void
fuzz_chunk(const msgpack_object *body)
{
	struct ipc_chunk ck;
	struct ipc_asm a;
	const char *err;

	if (ipc_dec_chunk(body, &ck) == -1)
		return;
	ipc_asm_init(&a, ck.stream, 1024);
	a.next_seq = ck.seq;
	if (ipc_asm_feed(&a, body, &err) == 1 && a.len != ck.len)
		__builtin_trap();
	ipc_asm_free(&a);
}

/* Every decoder on the body; a decoder must agree with the catalog's
 * validator for its own type. */
static void
fuzz_decoders(const struct ipc_msg *m)
{
	const struct ipc_msg_info *mi = ipc_msg_lookup(m->type);
	struct ipc_hello h;
	struct ipc_ready rd;
	struct ipc_db_op op;
	struct ipc_db_result res;
	struct ipc_ctl_request rq;
	struct ipc_ctl_reply rp;
	struct ipc_chunk ck;
	const msgpack_object *o;
	char addr[IPC_ADDR_MAX + 1];
	uint32_t level;
	int ok[IMSG__MAX] = { 0 };
	static struct ipc_sbx_hello sh;
	static struct ipc_sbx_read srd;
	static struct ipc_sbx_write swr;
	static struct ipc_sbx_edit sed;
	static struct ipc_sbx_list sls;
	static struct ipc_sbx_glob sgl;
	static struct ipc_sbx_grep sgr;
	static struct ipc_sbx_exec sex;
	static struct ipc_sbx_artifact sar;
	static char path[IPC_SBX_PATH_MAX + 1], id[IPC_SBX_ID_MAX + 1];
	struct ipc_sbx_output sout;
	struct ipc_sbx_exit sexit;
	struct ipc_sbx_result sres;
	const char *s;
	size_t len;
	char run[IPC_UUID_LEN + 1], user[IPC_UUID_LEN + 1];
	uint64_t u64;
	uint32_t u32;
	const uint8_t *b1, *b2;
	static struct ipc_git_checkout gco;
	static struct ipc_git_fetch gfe;
	struct ipc_git_result gres;
	static struct ipc_git_diff gdiff;
	struct ipc_runner_start rst;
	struct ipc_engine_conf econf;
	struct ipc_runner_reply rrep;
	char status[IPC_STATUS_MAX + 1];

	ok[IMSG_HELLO] = ipc_dec_hello(m->body, &h) == 0;
	ok[IMSG_READY] = ipc_dec_ready(m->body, &rd) == 0;
	ok[IMSG_LOG_VERBOSE] = ipc_dec_log_verbose(m->body, &level) == 0;
	if ((ok[IMSG_DB_OP] = ipc_dec_db_op(m->body, &op) == 0)) {
		while (ipc_get_any(&op.args, &o) == 0)
			;
	}
	if ((ok[IMSG_DB_RESULT] = ipc_dec_db_result(m->body, &res) == 0))
		fuzz_rows(&res);
	ok[IMSG_LISTEN_FD] = ipc_dec_listen_fd(m->body, addr, sizeof(addr)) == 0;
	ok[IMSG_CTL_REQUEST] = ipc_dec_ctl_request(m->body, &rq) == 0;
	ok[IMSG_CTL_REPLY] = ipc_dec_ctl_reply(m->body, &rp) == 0;
	ok[IMSG_CHUNK] = ipc_dec_chunk(m->body, &ck) == 0;
	fuzz_chunk(m->body);
	ok[IMSG_CTL_SANDBOX] = ipc_dec_ctl_sandbox(m->body, id, sizeof(id)) == 0;
	ok[IMSG_SBX_HELLO] = ipc_dec_sbx_hello(m->body, &sh) == 0;
	ok[IMSG_SBX_READY] = ok[IMSG_READY];
	ok[IMSG_SBX_READ] = ipc_dec_sbx_read(m->body, &srd) == 0;
	ok[IMSG_SBX_WRITE] = ipc_dec_sbx_write(m->body, &swr) == 0;
	ok[IMSG_SBX_EDIT] = ipc_dec_sbx_edit(m->body, &sed) == 0;
	ok[IMSG_SBX_LIST] = ipc_dec_sbx_list(m->body, &sls) == 0;
	ok[IMSG_SBX_GLOB] = ipc_dec_sbx_glob(m->body, &sgl) == 0;
	ok[IMSG_SBX_GREP] = ipc_dec_sbx_grep(m->body, &sgr) == 0;
	ok[IMSG_SBX_STAT] = ipc_dec_sbx_stat(m->body, path, sizeof(path)) == 0;
	if ((ok[IMSG_SBX_EXEC] = ipc_dec_sbx_exec(m->body, &sex) == 0)) {
		while (ipc_get_str(&sex.argv, &s, &len, IPC_SBX_ARG_MAX) == 0)
			;
		if (ipc_end(&sex.argv) == -1)
			__builtin_trap(); /* the validator promised strings only */
	}
	ok[IMSG_SBX_ARTIFACT] = ipc_dec_sbx_artifact(m->body, &sar) == 0;
	ok[IMSG_SBX_OUTPUT] = ipc_dec_sbx_output(m->body, &sout) == 0;
	ok[IMSG_SBX_EXIT] = ipc_dec_sbx_exit(m->body, &sexit) == 0;
	ok[IMSG_SBX_RESULT] = ipc_dec_sbx_result(m->body, &sres) == 0;
	ok[IMSG_RUN_WAKE] = ipc_dec_run_wake(m->body, run, &u64) == 0;
	if (ok[IMSG_RUN_WAKE] && run[0] != '\0' && !ipc_is_uuid(run, strlen(run)))
		__builtin_trap();
	ok[IMSG_ARTIFACT_OPEN] = ipc_dec_artifact_open(m->body, user, run) == 0;
	if (ok[IMSG_ARTIFACT_OPEN] &&
	    (!ipc_is_uuid(user, strlen(user)) || !ipc_is_uuid(run, strlen(run))))
		__builtin_trap();
	ok[IMSG_ARTIFACT_FD] = ipc_dec_artifact_fd(m->body, &u64) == 0;
	ok[IMSG_ARTIFACT_ERR] = ipc_dec_artifact_err(m->body, &u32) == 0;
	ok[IMSG_AUTH_FLUSH] = ipc_dec_auth_flush(m->body) == 0;
	ok[IMSG_REPO_SEAL] = ipc_dec_repo_seal(m->body, &b1, &len) == 0;
	ok[IMSG_REPO_SEALED] = ipc_dec_repo_sealed(m->body, &b1, &b2, &len) == 0;
	if ((ok[IMSG_GIT_FETCH] = ipc_dec_git_fetch(m->body, &gfe) == 0) &&
	    (gfe.url[0] == '\0' || gfe.mirror[0] != '/'))
		__builtin_trap();
	if ((ok[IMSG_GIT_CHECKOUT] = ipc_dec_git_checkout(m->body, &gco) == 0) &&
	    (gco.url[0] == '\0' || gco.workspace[0] != '/' || gco.mirror[0] != '/' ||
	     gco.ref[0] == '-' || strpbrk(gco.ref, " \t\n") != NULL))
		__builtin_trap();
	if ((ok[IMSG_GIT_RESULT] = ipc_dec_git_result(m->body, &gres) == 0) &&
	    (gres.ok ? (gres.base[0] != '\0' && strlen(gres.base) < 40)
	             : (gres.base[0] != '\0' || gres.ref[0] != '\0')))
		__builtin_trap();
	if ((ok[IMSG_GIT_DIFF] = ipc_dec_git_diff(m->body, &gdiff) == 0) &&
	    (gdiff.gitdir[0] != '/' || gdiff.workspace[0] != '/' || gdiff.cap == 0 ||
		strlen(gdiff.base) < 40))
		__builtin_trap();
	if ((ok[IMSG_ENGINE_WAKE] = ipc_dec_engine_wake(m->body, &u32, run) == 0) &&
	    (u32 > IPC_WAKE_CANCEL || (run[0] != '\0' && !ipc_is_uuid(run, strlen(run)))))
		__builtin_trap();
	if ((ok[IMSG_RUN_START] = ipc_dec_run_start(m->body, run, status) == 0) &&
	    (!ipc_is_uuid(run, strlen(run)) || status[0] == '\0'))
		__builtin_trap();
	ok[IMSG_RUN_STOP] = ipc_dec_run_stop(m->body, run, &u32) == 0;
	ok[IMSG_RUN_ENDED] = ipc_dec_run_ended(m->body, run, &u32) == 0;
	if ((ok[IMSG_RUNNER_START] = ipc_dec_runner_start(m->body, &rst) == 0) &&
	    (rst.owner[0] == '\0' || rst.exec_max_ms == 0))
		__builtin_trap();
	ok[IMSG_RUNNER_CANCEL] = ipc_dec_runner_cancel(m->body) == 0;
	ok[IMSG_RUNNER_DONE] = ipc_dec_runner_done(m->body, &u32) == 0;
	if ((ok[IMSG_ENGINE_CONF] = ipc_dec_engine_conf(m->body, &econf) == 0) &&
	    (econf.concurrency > 1024 || econf.lease < 2 || econf.sweep < 1))
		__builtin_trap();
	if ((ok[IMSG_ARTIFACT_PUT] = ipc_dec_artifact_put(m->body, &b1, &b2, &len) == 0) && len == 0)
		__builtin_trap();
	ok[IMSG_PATCH_MAKE] = ipc_dec_patch_make(m->body, &u64) == 0;
	if ((ok[IMSG_RUNNER_REPLY] = ipc_dec_runner_reply(m->body, &rrep) == 0) &&
	    rrep.len > rrep.size)
		__builtin_trap();
	{
		static struct ipc_provider pcs[IPC_PROVIDERS_MAX];
		struct ipc_runner_proxy rpx;
		struct ipc_model_call mcall;
		struct ipc_model_reply mrep;
		size_t i, np;

		if ((ok[IMSG_PROXY_CONF] = ipc_dec_proxy_conf(m->body, pcs, &np) == 0)) {
			if (np > IPC_PROVIDERS_MAX)
				__builtin_trap();
			for (i = 0; i < np; i++)
				if (!ipc_is_provider_name(pcs[i].name, strlen(pcs[i].name)) ||
				    pcs[i].nmodels == 0 || pcs[i].nmodels > IPC_MODELS_MAX ||
				    pcs[i].kind > 1 || (pcs[i].max_completion && pcs[i].kind != 1) ||
				    strncmp(pcs[i].base_url, "http", 4) != 0 ||
				    !ipc_is_model_name(pcs[i].models[0].name,
					strlen(pcs[i].models[0].name)))
					__builtin_trap();
		}
		if ((ok[IMSG_PROXY_CHANNEL] = ipc_dec_proxy_channel(m->body, run) == 0) &&
		    !ipc_is_uuid(run, strlen(run)))
			__builtin_trap();
		if ((ok[IMSG_RUNNER_PROXY] = ipc_dec_runner_proxy(m->body, &rpx) == 0) &&
		    ((rpx.provider[0] == '\0') != (rpx.model[0] == '\0') || rpx.max_tokens == 0 ||
			rpx.mcp_tools_max > IPC_MCP_TOOLS_MAX || rpx.mcp_tool_bytes_max < 1024))
			__builtin_trap();
		if ((ok[IMSG_MODEL_CALL] = ipc_dec_model_call(m->body, &mcall) == 0) &&
		    (mcall.step[0] == '\0' || mcall.reqlen == 0 || mcall.attempt == 0 ||
			mcall.limit > IPC_USD_MICROS_MAX ||
			!ipc_is_provider_name(mcall.provider, strlen(mcall.provider))))
			__builtin_trap();
		if ((ok[IMSG_MODEL_REPLY] = ipc_dec_model_reply(m->body, &mrep) == 0) &&
		    (mrep.code >= IPC_MODEL__MAX || mrep.stop > 3 ||
			(mrep.code == IPC_MODEL_OK) != (mrep.contentlen > 0)))
			__builtin_trap();
	}
	{
		struct ipc_egress_conf ecf;
		struct ipc_egress_run erun;
		struct ipc_egress_event eev;

		if ((ok[IMSG_EGRESS_CONF] = ipc_dec_egress_conf(m->body, &ecf) == 0) &&
		    (ecf.tunnels == 0 || ecf.tunnels > 1024 || ecf.connect_timeout == 0 ||
			ecf.idle_timeout == 0 || ecf.bytes == 0))
			__builtin_trap();
		ok[IMSG_EGRESS_RUN] = ipc_dec_egress_run(m->body, &erun) == 0;
		ok[IMSG_EGRESS_POLICY] = ok[IMSG_EGRESS_RUN];
		if (ok[IMSG_EGRESS_RUN] && !ipc_is_uuid(erun.run, strlen(erun.run)))
			__builtin_trap();
		ok[IMSG_EGRESS_END] = ipc_dec_egress_end(m->body, run) == 0;
		if ((ok[IMSG_EGRESS_EVENT] = ipc_dec_egress_event(m->body, &eev) == 0) &&
		    (eev.kind >= IPC_EGRESS_EV__COUNT || eev.port > 65535 ||
			eev.suppressed_denied > eev.suppressed ||
			(eev.suppressed > 0 && eev.kind != IPC_EGRESS_EV_ALLOWED &&
			    eev.kind != IPC_EGRESS_EV_DENIED)))
			__builtin_trap();
		ok[IMSG_EGRESS_STEP] = ipc_dec_egress_step(m->body, run) == 0;
		{
			struct ipc_egress_totals et;

			ok[IMSG_EGRESS_TOTALS] = ipc_dec_egress_totals(m->body, &et) == 0;
		}
	}
	{
		struct ipc_mcp_start ms;
		struct ipc_mcp_channel mc;
		struct ipc_mcp_failed mf;

		if ((ok[IMSG_MCP_START] = ipc_dec_mcp_start(m->body, &ms) == 0) &&
		    (ms.server[0] == '\0' || ms.step[0] == '\0'))
			__builtin_trap();
		if ((ok[IMSG_MCP_CHANNEL] = ipc_dec_mcp_channel(m->body, &mc) == 0) &&
		    (mc.what > IPC_MCP_FD_STDERR || mc.startup_ms < 1000 || mc.call_ms < 1000))
			__builtin_trap();
		if ((ok[IMSG_MCP_FAILED] = ipc_dec_mcp_failed(m->body, &mf) == 0) &&
		    (mf.errlen == 0 || mf.errlen > IPC_ERRMSG_MAX))
			__builtin_trap();
		ok[IMSG_MCP_STOP] = ipc_dec_mcp_stop(m->body) == 0;
		{
			static struct ipc_proxy_mcp pm;

			if ((ok[IMSG_PROXY_MCP] = ipc_dec_proxy_mcp(m->body, &pm) == 0) &&
			    (pm.call_ms < 1000 || strncmp(pm.url, "http", 4) != 0))
				__builtin_trap();
		}
	}
	{
		static struct ipc_httpd_conf hc;

		if ((ok[IMSG_HTTPD_CONF] = ipc_dec_httpd_conf(m->body, &hc) == 0) &&
		    (hc.ui_dir[0] != '/' || hc.user_burst == 0 || hc.user_rate > 100000))
			__builtin_trap();
	}
	if (mi != NULL && m->type != IMSG_SHUTDOWN && m->type != IMSG_SBX_KILL &&
	    ok[m->type] != (mi->validate(m->body) == 0))
		__builtin_trap();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ipc_msg m;
	const char *err;
	unsigned from, to;
	int fd, scanned;

	scanned = ipc_msgpack_check(data, size, IPC_MAX_DEPTH, &err) == 0;
	if (ipc_frame_decode(data, size, &m, &err) == -1)
		return 0;
	if (!scanned)
		__builtin_trap(); /* decoding must never get past a failed scan */
	for (from = 0; from < ROLE__COUNT; from++)
		for (to = 0; to < ROLE__COUNT; to++)
			for (fd = 0; fd <= 1; fd++)
				(void)ipc_msg_check(&m, (enum ipc_role)from, (enum ipc_role)to,
				    fd, &err);
	fuzz_decoders(&m);
	ipc_msg_free(&m);
	return 0;
}
