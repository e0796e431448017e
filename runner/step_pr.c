/*
 * step_pr: a pull_request step.  The run's change becomes one commit on
 * the base commit, pushed to a branch, and the pull request of that branch
 * is opened or updated on the connection's forge.
 *
 * Both are done by the supervisor's git helper, which alone holds the
 * token: PR_PUSH (the commit, built from the mirror and the workspace's
 * patch, pushed under a lease) and PR_OPEN (libcurl against the forge's
 * API).  What each did is recorded before the next begins (runner_pr_pushed,
 * runner_pr_opened, with their events), and every attempt starts from what
 * is recorded (runner_pr_state): the lease of a push is the commit the run
 * pushed last, and the pull request to update is the one it opened, so a
 * retried step, or one a crashed runner left running (run again: there is
 * no resume hook), finishes the same pull request.  A push whose record was
 * lost is recognised too: the commit's time is the run's creation, so the
 * same change is the same commit, and the branch found at it is no
 * conflict.
 */
#include <sodium.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "runner/core.h"
#include "tmpl/tmpl.h"

#define PR_CUT_MARKER "\n\n[... cut: the text was longer than a pull request's body may be]\n"

/* The attempt under way. */
static struct {
	uint64_t id;               /* the PR_PUSH or PR_OPEN in flight, 0 for none */
	int opening;               /* ... which is a PR_OPEN */
	char branch[IPC_GIT_REF_MAX + 1], base[IPC_GIT_REF_MAX + 1];
	char lease[65], commit[65];
	uint64_t number;           /* recorded earlier, 0 for none */
	uint64_t when;             /* the commit's time: the run's creation */
	char *title, *body;
	int draft;
	json_t *arts;              /* key -> text of the run's artifacts (inline ones) */
} pr;

static void
pr_reset(void)
{
	free(pr.title);
	free(pr.body);
	json_decref(pr.arts);
	memset(&pr, 0, sizeof(pr));
}

static void
pr_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The attempt fails with a reason. */
static void
pr_fail(const char *fmt, ...)
{
	char err[IPC_ERRMSG_MAX + 128];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, sizeof(err), fmt, ap);
	va_end(ap);
	pr_reset();
	runner_attempt_over_bare("failed", -1, err, NULL);
}

/* s with ${params.NAME} and ${artifacts.KEY} expanded, at most max bytes
 * (cut with PR_CUT_MARKER); the caller frees. */
static char *
pr_expand(const char *tmpl, size_t max)
{
	char *p = runner_expand(tmpl), *out = NULL, key[TMPL_NAME_MAX + 1];
	const char *s = p, *end;
	size_t len = 0, keep;
	FILE *f = open_memstream(&out, &len);
	json_t *v;

	if (f == NULL)
		fatal("open_memstream");
	while (*s != '\0') {
		if (strncmp(s, "${artifacts.", 12) == 0 && (end = strchr(s + 12, '}')) != NULL &&
		    (size_t)(end - s - 12) <= TMPL_NAME_MAX) {
			snprintf(key, sizeof(key), "%.*s", (int)(end - s - 12), s + 12);
			v = json_object_get(pr.arts, key);
			if (json_is_string(v))
				fwrite(json_string_value(v), 1, json_string_length(v), f);
			else
				fprintf(f, "[the artifact %s is not there, or too large to include]",
				        key);
			s = end + 1;
			continue;
		}
		fputc(*s++, f);
	}
	if (fclose(f) != 0)
		fatal("expand");
	free(p);
	if (len <= max)
		return out;
	/* cut on a character's boundary, the marker after it */
	keep = max - strlen(PR_CUT_MARKER);
	while (keep > 0 && ((unsigned char)out[keep] & 0xc0) == 0x80)
		keep--;
	memcpy(out + keep, PR_CUT_MARKER, strlen(PR_CUT_MARKER) + 1);
	return out;
}

/* Cell col of row of r, NUL-terminated (the caller frees), or NULL for a
 * NULL (or no such cell). */
static char *
pr_cell(const struct ipc_db_result *r, uint32_t row, uint32_t col)
{
	const char *v;
	size_t len;

	return (v = child_db_cell_at(r, row, col, &len)) != NULL ? memdup0(v, len) : NULL;
}

/* Whether the single cell of a recording op is true (false: the lease is
 * gone). */
static int
pr_recorded(const struct ipc_db_result *r)
{
	char *v = pr_cell(r, 0, 0);
	int yes = v != NULL && strcmp(v, "t") == 0;

	free(v);
	return yes;
}

/* Send PR_PUSH or PR_OPEN (w begun), keeping its id. */
static void
pr_send(struct ipc_wbuf *w, uint64_t id, int opening)
{
	pr.id = id;
	pr.opening = opening;
	if (ipc_wbuf_finish(w, rn.c.max_frame) == -1 || ipc_chan_send(rn.c.sup, w, -1) == -1)
		fatalx("cannot ask the supervisor for a pull request");
	ipc_wbuf_free(w);
}

static void
pr_open(void)
{
	struct ipc_wbuf w;
	uint64_t id = runner_req_id();

	ipc_wbuf_begin(&w, IMSG_PR_OPEN, id, 6);
	ipc_put_str(&w, pr.branch);
	ipc_put_str(&w, pr.base);
	ipc_put_str(&w, pr.title);
	ipc_put_str(&w, pr.body);
	ipc_put_bool(&w, pr.draft);
	ipc_put_u64(&w, pr.number);
	pr_send(&w, id, 1);
}

static void
pr_pushed_done(struct child *c, const struct ipc_db_result *r, void *arg)
{
	runner_db_check(r, "recording the push");
	if (!pr_recorded(r)) {
		pr_reset();
		runner_lease_lost();
		return;
	}
	pr_open();
}

static void
pr_opened_done(struct child *c, const struct ipc_db_result *r, void *arg)
{
	json_t *extra = arg;

	runner_db_check(r, "recording the pull request");
	if (!pr_recorded(r)) {
		json_decref(extra);
		pr_reset();
		runner_lease_lost();
		return;
	}
	pr_reset();
	runner_attempt_over_bare("succeeded", -1, NULL, extra);
}

/* The push's answer: record it, then open the pull request. */
static void
pr_push_result(const struct ipc_pr_result *res)
{
	struct rstep *s = &rn.steps[rn.cur];
	struct qop *q;

	if (res->flags & IPC_PR_F_EMPTY) {
		runner_event("pull_request.skipped",
		             json_pack("{s:s,s:i,s:s}", "step_id", s->id, "attempt", rn.attempt,
		                       "reason", "no changes"));
		pr_reset();
		runner_attempt_over_bare("succeeded", -1, NULL,
		                         json_pack("{s:b}", "pull_request_skipped", 1));
		return;
	}
	snprintf(pr.commit, sizeof(pr.commit), "%s", res->commit);
	log_info("run %s: step %s pushed %s to %s%s", rn.run, s->id, pr.commit, pr.branch,
	         (res->flags & IPC_PR_F_ALREADY) ? " (it was there already)" : "");
	q = runner_op("runner_pr_pushed", 5);
	ipc_put_str(&q->w, s->id);
	ipc_put_u64(&q->w, (uint64_t)rn.attempt);
	ipc_put_str(&q->w, pr.branch);
	ipc_put_str(&q->w, pr.commit);
	ipc_put_bool(&q->w, (res->flags & IPC_PR_F_ALREADY) != 0);
	runner_op_send(q, pr_pushed_done, NULL);
}

/* The pull request's answer: record it, and the attempt succeeded. */
static void
pr_open_result(const struct ipc_pr_result *res)
{
	struct rstep *s = &rn.steps[rn.cur];
	json_t *extra = json_pack("{s:s,s:s}", "branch", pr.branch, "commit", pr.commit);
	struct qop *q;

	if (res->number == 0) { /* a connection without a forge */
		log_info("run %s: step %s: %s", rn.run, s->id, res->note);
		json_object_set_new(extra, "note", json_string(res->note));
		pr_reset();
		runner_attempt_over_bare("succeeded", -1, NULL, extra);
		return;
	}
	log_info("run %s: step %s %s pull request %llu: %s", rn.run, s->id,
	         (res->flags & IPC_PR_F_OPENED) ? "opened" : "updated",
	         (unsigned long long)res->number, res->url);
	json_object_set_new(extra, "number", json_integer((json_int_t)res->number));
	json_object_set_new(extra, "url", json_string(res->url));
	q = runner_op("runner_pr_opened", 7);
	ipc_put_str(&q->w, s->id);
	ipc_put_u64(&q->w, (uint64_t)rn.attempt);
	ipc_put_u64(&q->w, res->number);
	ipc_put_str(&q->w, res->url);
	ipc_put_bool(&q->w, (res->flags & IPC_PR_F_OPENED) != 0);
	ipc_put_bool(&q->w, (res->flags & IPC_PR_F_DRAFT) != 0);
	if (res->note[0] != '\0')
		ipc_put_str(&q->w, res->note);
	else
		ipc_put_nil(&q->w);
	runner_op_send(q, pr_opened_done, extra);
}

static int
pr_sup_msg(struct ipc_msg *m)
{
	static struct ipc_pr_result res;
	int opening = pr.opening;

	if (m->type != IMSG_PR_RESULT || m->id == 0 || m->id != pr.id)
		return 0;
	pr.id = 0;
	if (ipc_dec_pr_result(m->body, &res) == -1)
		fatalx("a malformed pull request result");
	if (!res.ok) {
		pr_fail("%s: %.*s", opening ? "the pull request" : "the push", (int)res.errlen,
		        res.error);
		return 1;
	}
	if (opening)
		pr_open_result(&res);
	else
		pr_push_result(&res);
	return 1;
}

/* What the run recorded and its artifacts' texts are known: push. */
static void
pr_push(struct rstep *s)
{
	struct ipc_wbuf w;
	char *tmpl_title, msg[IPC_PR_MESSAGE_MAX];
	uint64_t id = runner_req_id();
	const char *why;

	tmpl_title = runner_expand(runner_jstr(s->j, "title", ""));
	if (tmpl_title[0] == '\0') {
		free(tmpl_title);
		if (asprintf(&tmpl_title, "Changes of run %.8s", rn.run) == -1)
			fatal("asprintf");
	}
	pr.title = pr_expand(tmpl_title, IPC_PR_TITLE_MAX);
	free(tmpl_title);
	pr.body = pr_expand(runner_jstr(s->j, "body", ""), IPC_PR_BODY_MAX);
	pr.draft = json_is_true(json_object_get(s->j, "draft")) ||
	           json_object_get(s->j, "draft") == NULL;
	if ((why = tmpl_branch_problem(pr.branch, strlen(pr.branch))) != NULL) {
		pr_fail("branch \"%.64s\": not a branch name: %s", pr.branch, why);
		return;
	}
	if (pr.base[0] == '\0') {
		pr_fail("no base branch: the run checked out no branch (a tag or a commit); name "
		        "one with base");
		return;
	}
	if ((why = tmpl_branch_problem(pr.base, strlen(pr.base))) != NULL) {
		pr_fail("base \"%.64s\": not a branch name: %s", pr.base, why);
		return;
	}
	snprintf(msg, sizeof(msg), "%.1024s\n\nMade by run %s of template %s.\n", pr.title, rn.run,
	         runner_jstr(rn.tmpl, "name", "?"));
	ipc_wbuf_begin(&w, IMSG_PR_PUSH, id, 4);
	ipc_put_str(&w, pr.branch);
	ipc_put_str(&w, pr.lease);
	ipc_put_u64(&w, pr.when);
	ipc_put_str(&w, msg);
	pr_send(&w, id, 0);
}

/* The texts of the run's artifacts held in the database (base64), by key,
 * the latest attempt of each. */
static void
pr_arts_done(struct child *c, const struct ipc_db_result *r, void *arg)
{
	unsigned char *bin;
	size_t binlen, used;
	char *k, *v;
	uint32_t i;

	runner_db_check(r, "reading the run's artifacts");
	pr.arts = json_object();
	for (i = 0; i < r->nrows; i++) {
		k = pr_cell(r, i, 0);
		v = pr_cell(r, i, 1);
		if (k != NULL && v != NULL) {
			if ((bin = malloc(strlen(v) + 1)) == NULL)
				fatal("malloc");
			if (sodium_base642bin(bin, strlen(v) + 1, v, strlen(v), "\n", &binlen, NULL,
			                      sodium_base64_VARIANT_ORIGINAL) == 0)
				json_object_set_new(pr.arts, k, runner_utf8_text(bin, binlen, 1, &used));
			free(bin);
		}
		free(k);
		free(v);
	}
	pr_push(&rn.steps[rn.cur]);
}

/* What the run pushed and opened before, the ref it checked out, when it
 * was made. */
static void
pr_state_done(struct child *c, const struct ipc_db_result *r, void *arg)
{
	struct rstep *s = arg;
	char *branch, *commit, *number, *ref, *created, *want;

	runner_db_check(r, "reading the run's pull request");
	if ((created = pr_cell(r, 0, 4)) == NULL) {
		pr_fail("the run's record is gone");
		return;
	}
	branch = pr_cell(r, 0, 0);
	commit = pr_cell(r, 0, 1);
	number = pr_cell(r, 0, 2);
	ref = pr_cell(r, 0, 3);
	want = runner_expand(runner_jstr(s->j, "branch", ""));
	if (want[0] != '\0')
		snprintf(pr.branch, sizeof(pr.branch), "%.*s", IPC_GIT_REF_MAX, want);
	else
		snprintf(pr.branch, sizeof(pr.branch), "agrippa/%.8s", rn.run);
	free(want);
	want = runner_expand(runner_jstr(s->j, "base", ""));
	snprintf(pr.base, sizeof(pr.base), "%.*s", IPC_GIT_REF_MAX,
	         want[0] != '\0' ? want : ref != NULL ? ref : "");
	free(want);
	pr.number = number != NULL ? strtoull(number, NULL, 10) : 0;
	pr.when = strtoull(created, NULL, 10);
	if (branch != NULL && strcmp(branch, pr.branch) != 0) {
		pr_fail("the run pushed branch %.64s before; a pull request step cannot push "
		        "another (%.64s)",
		        branch, pr.branch);
	} else {
		if (commit != NULL)
			snprintf(pr.lease, sizeof(pr.lease), "%s", commit);
		runner_op_send(runner_op("runner_pr_artifacts", 0), pr_arts_done, NULL);
	}
	free(branch);
	free(commit);
	free(number);
	free(ref);
	free(created);
}

static void
pr_start(struct rstep *s)
{
	pr_reset();
	runner_op_send(runner_op("runner_pr_state", 0), pr_state_done, s);
}

const struct step_kind step_pull_request = {
	.name = "pull_request",
	.start = pr_start,
	.sup_msg = pr_sup_msg,
};
