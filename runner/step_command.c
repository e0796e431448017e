/*
 * step_command: a command step, /bin/sh -c in the sandbox.
 *
 * Its output goes out as step.output events (output.c); it is killed after
 * its "timeout" (cut to the sandbox's longest), and on a cancel.  Before a
 * command whose step produces artifacts, the contracted files are removed,
 * so that a file an earlier attempt left is never taken for this one's.
 */
#include <stdio.h>
#include <stdlib.h>

#include "common/log.h"
#include "runner/core.h"

#define CLEAN_ID (1ull << 50)      /* the stale-artifact removal */

static struct {
	int exec_running;
	uint64_t exec_id;
	int cleaning;               /* the stale-artifact removal is running */
} cmd;

/* The step's timeout, cut to the sandbox's longest (0: no timeout of its
 * own, the sandbox's). */
static uint64_t
step_timeout_ms(const struct rstep *s)
{
	uint64_t ms = (uint64_t)s->timeout_s * 1000;

	return ms == 0 || ms > rn.exec_max_ms ? rn.exec_max_ms : ms;
}

static void
command_run(void)
{
	struct rstep *s = &rn.steps[rn.cur];
	struct ipc_wbuf w;
	char *cmdline = runner_expand(runner_jstr(s->j, "run", ""));

	cmd.exec_id++;
	cmd.exec_running = 1;
	ipc_wbuf_begin(&w, IMSG_SBX_EXEC, cmd.exec_id, 4);
	ipc_put_bool(&w, 1);
	ipc_put_array(&w, 1);
	ipc_put_str(&w, cmdline);
	ipc_put_str(&w, "");
	ipc_put_u64(&w, step_timeout_ms(s));
	free(cmdline);
	runner_sbx_send(&w);
}

static void
command_exited(const struct ipc_sbx_exit *x)
{
	struct rstep *s = &rn.steps[rn.cur];
	const char *status;
	char err[IPC_ERRMSG_MAX + 64];
	json_t *extra;

	cmd.exec_running = 0;
	runner_output_end();
	extra = json_pack("{s:I, s:b}", "duration_ms", (json_int_t)x->duration_ms,
	    "output_truncated", x->truncated);
	err[0] = '\0';
	if (rn.cancel) {
		status = "cancelled";
		snprintf(err, sizeof(err), "cancelled");
	} else if (x->code != 0) {
		status = "failed";
		snprintf(err, sizeof(err), "the command could not run: %.*s", (int)x->errlen,
		    x->error);
	} else if (x->timed_out) {
		status = "timed_out";
		snprintf(err, sizeof(err), "timed out after %llu ms",
		    (unsigned long long)step_timeout_ms(s));
	} else if (x->status != 0) {
		status = "failed";
		if (x->status < 0)
			snprintf(err, sizeof(err), "killed by signal %u", x->signal);
		else
			snprintf(err, sizeof(err), "exited with status %lld", (long long)x->status);
	} else
		status = "succeeded";
	runner_attempt_over(status,
	    x->status >= 0 && x->status <= 255 && x->code == 0 ? (int)x->status : -1,
	    err[0] != '\0' ? err : NULL, extra);
}

/* The contracted files go first when the step produces artifacts. */
static void
command_start(struct rstep *s)
{
	json_t *prod = json_object_get(s->j, "produces"), *p;
	struct ipc_wbuf w;
	size_t i, n = json_array_size(prod);
	char path[IPC_SBX_NAME_MAX + 32];

	if (n == 0) {
		command_run();
		return;
	}
	cmd.cleaning = 1;
	ipc_wbuf_begin(&w, IMSG_SBX_EXEC, CLEAN_ID, 4);
	ipc_put_bool(&w, 0);
	ipc_put_array(&w, (uint32_t)(n + 3));
	ipc_put_str(&w, "rm");
	ipc_put_str(&w, "-f");
	ipc_put_str(&w, "--");
	json_array_foreach(prod, i, p) {
		snprintf(path, sizeof(path), ".agrippa/artifacts/%s", runner_jstr(p, "file", ""));
		ipc_put_str(&w, path);
	}
	ipc_put_str(&w, "");
	ipc_put_u64(&w, 60000);
	runner_sbx_send(&w);
}

/* The stale artifacts are gone (or could not be removed): the command. */
static void
command_cleaned(const struct ipc_sbx_exit *x)
{
	cmd.cleaning = 0;
	if (x->code != 0 || x->status != 0)
		log_warnx("run %s: removing stale artifacts failed", rn.run);
	if (rn.cancel) {
		runner_attempt_over("cancelled", -1, "cancelled", NULL);
		return;
	}
	command_run();
}

/* The output and the exit of the running command, and the exit of the
 * removal before it. */
static int
command_sbx_msg(struct ipc_msg *m)
{
	struct ipc_sbx_output o;
	struct ipc_sbx_exit x;
	int running = m->id == cmd.exec_id && cmd.exec_running;
	int clean = m->id == CLEAN_ID && cmd.cleaning;

	if (m->type == IMSG_SBX_OUTPUT && running) {
		if (ipc_dec_sbx_output(m->body, &o) == 0)
			runner_output(o.stream, o.data, o.len);
		return 1;
	}
	if (m->type != IMSG_SBX_EXIT || (!running && !clean))
		return 0;
	if (ipc_dec_sbx_exit(m->body, &x) == -1)
		fatalx("the sandbox sent a bad exit");
	if (clean)
		command_cleaned(&x);
	else
		command_exited(&x);
	return 1;
}

static void
command_cancel(void)
{
	struct ipc_wbuf w;

	if (!cmd.exec_running)
		return;
	ipc_wbuf_begin(&w, IMSG_SBX_KILL, cmd.exec_id, 0);
	runner_sbx_send(&w);
}

const struct step_kind step_command = {
	.name = "command",
	.start = command_start,
	.sbx_msg = command_sbx_msg,
	.cancel = command_cancel,
};
