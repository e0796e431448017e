/*
 * run watch: a run's events from GET /v1/runs/{id}/events/stream, from its
 * first event (a replay) and then live, until its terminal event.
 *
 * On a terminal, the run's steps and their states are a block at the bottom
 * that is redrawn in place (cursor up, clear to the end of the screen, each
 * line cut to the terminal's width so that none wraps), with the commands'
 * output and notes (approvals, artifacts, errors) scrolling above it.
 * Otherwise each change is a plain line.  A dropped stream is resumed with
 * Last-Event-ID; an event whose seq the client has already had is never
 * shown twice.  The exit status is the run's outcome.
 */
#include <sys/ioctl.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/client.h"

#define W_LINE_MAX (4u << 20)  /* bytes of one line of the stream */
#define W_PART_MAX (64u << 10) /* bytes of output held waiting for its newline */
#define W_STEPS_MAX 4096       /* steps shown; more are a hostile server's */
#define W_NAME_MAX 200         /* bytes kept of a phase's or step's name */
#define W_RESUME_S 60          /* give up after so long without a stream */

struct wstep {
	char *phase, *id; /* as the server sent them (cut to W_NAME_MAX) */
	char state[24];   /* pending, running, succeeded, failed, waiting, ... */
	long long attempt;
	long long dur_ms; /* -1: unknown */
	double started;   /* when seen starting live, or 0 */
	char *note;       /* why it failed, what it waits for, or NULL */
};

struct watch {
	struct cli *c;
	const char *run;
	char tmpl[W_NAME_MAX + 1];
	long long version, started_at, finished_at;
	char status[24];
	uint64_t last_seq, live_after; /* events after live_after happen now */
	int done, outcome;
	char *error; /* run.failed's */
	struct wstep *steps;
	size_t nsteps;
	/* the stream being read */
	CURL *h;
	long http;
	char *line, *data; /* a line in the making, the event's data lines */
	size_t linelen, datalen;
	char type[129];
	uint64_t id;
	int has_id;
	long retry_ms;
	char *err; /* an error answer's body */
	size_t errlen;
	int proto; /* the stream is not the API's: said already */
	/* output waiting for its newline, and whose it is */
	char *part;
	size_t partlen;
	char *part_step;
	/* the terminal */
	FILE *above; /* lines to print above the block */
	char *abovebuf;
	size_t abovelen;
	int block_lines, dirty;
	double last_draw;
};

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static char *
xstrndup(const char *s, size_t max)
{
	char *p = strndup(s != NULL ? s : "", max);

	if (p == NULL)
		abort();
	return p;
}

/* ---- output ------------------------------------------------------------ */

/* Where a line goes: straight to standard output, or above the block. */
static FILE *
w_out(struct watch *w)
{
	w->dirty = 1;
	return w->c->redraw ? w->above : stdout;
}

/* A note: prefix and a text from the server, cleaned, on one line. */
static void
w_note(struct watch *w, const char *prefix, const char *text)
{
	FILE *f = w_out(w);

	fputs(prefix, f);
	if (text != NULL)
		cli_cleans(f, text);
	putc('\n', f);
}

/* One line of a step's output (without its newline), after "[step] ". */
static void
w_out_line(struct watch *w, const char *step, const char *s, size_t n)
{
	FILE *f = w_out(w);

	if (n > 0 && s[n - 1] == '\r')
		n--; /* a CRLF line ends as a line */
	putc('[', f);
	cli_cleans(f, step);
	fputs("] ", f);
	cli_clean(f, s, n, 0);
	putc('\n', f);
}

static void
w_flush_part(struct watch *w)
{
	if (w->part_step != NULL && w->partlen > 0)
		w_out_line(w, w->part_step, w->part, w->partlen);
	w->partlen = 0;
	free(w->part_step);
	w->part_step = NULL;
}

/* Text of step's output: whole lines are shown, the rest waits for its
 * newline (or for another step's output, or the step's end). */
static void
w_output(struct watch *w, const char *step, const char *text)
{
	const char *nl;
	size_t n;

	if (w->part_step != NULL && strcmp(w->part_step, step) != 0)
		w_flush_part(w);
	while ((nl = strchr(text, '\n')) != NULL) {
		n = (size_t)(nl - text);
		if (w->partlen > 0) {
			if (n > W_PART_MAX - w->partlen)
				n = W_PART_MAX - w->partlen;
			memcpy(w->part + w->partlen, text, n);
			w->partlen += n;
			w_out_line(w, step, w->part, w->partlen);
			w->partlen = 0;
		} else {
			w_out_line(w, step, text, n);
		}
		text = nl + 1;
	}
	if (*text == '\0')
		return;
	if (w->part == NULL && (w->part = malloc(W_PART_MAX)) == NULL)
		abort();
	if (w->part_step == NULL)
		w->part_step = xstrndup(step, W_NAME_MAX);
	while (*text != '\0') {
		n = strlen(text);
		if (n > W_PART_MAX - w->partlen)
			n = W_PART_MAX - w->partlen;
		memcpy(w->part + w->partlen, text, n);
		w->partlen += n;
		text += n;
		if (w->partlen == W_PART_MAX) {
			w_out_line(w, step, w->part, w->partlen);
			w->partlen = 0;
		}
	}
}

/* ---- the steps --------------------------------------------------------- */

static struct wstep *
w_step(struct watch *w, const char *id, const char *phase)
{
	struct wstep *s;
	size_t i;

	if (id == NULL)
		return NULL;
	for (i = 0; i < w->nsteps; i++)
		if (strncmp(w->steps[i].id, id, W_NAME_MAX) == 0)
			return &w->steps[i];
	if (w->nsteps == W_STEPS_MAX)
		return NULL;
	if ((s = realloc(w->steps, (w->nsteps + 1) * sizeof(*s))) == NULL)
		abort();
	w->steps = s;
	s = &w->steps[w->nsteps++];
	memset(s, 0, sizeof(*s));
	s->id = xstrndup(id, W_NAME_MAX);
	s->phase = xstrndup(phase, W_NAME_MAX);
	snprintf(s->state, sizeof(s->state), "pending");
	s->dur_ms = -1;
	return s;
}

static void
w_set_state(struct wstep *s, const char *state)
{
	snprintf(s->state, sizeof(s->state), "%.20s", state != NULL ? state : "?");
}

static void
w_set_note(struct wstep *s, const char *note)
{
	free(s->note);
	s->note = note != NULL ? xstrndup(note, 4096) : NULL;
}

/* "2.3s", "4m05s" */
static const char *
w_dur(long long ms, char *buf, size_t bufsz)
{
	if (ms < 60000)
		snprintf(buf, bufsz, "%lld.%llds", ms / 1000, ms % 1000 / 100);
	else
		cli_duration(ms / 1000, buf, bufsz);
	return buf;
}

/* A step's line of text: state, phase/step, attempt, time, note; cleaned. */
static char *
w_step_text(struct watch *w, struct wstep *s)
{
	char *out = NULL, d[32];
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	long long ms = s->dur_ms;

	if (f == NULL)
		abort();
	cli_cleans(f, s->state);
	fprintf(f, "%*s", (int)(strlen(s->state) < 10 ? 11 - strlen(s->state) : 1), "");
	cli_cleans(f, s->phase[0] ? s->phase : "-");
	putc('/', f);
	cli_cleans(f, s->id);
	if (s->attempt > 1)
		fprintf(f, " (attempt %lld)", s->attempt);
	if (ms < 0 && s->started > 0 && strcmp(s->state, "running") == 0)
		ms = (long long)((now_s() - s->started) * 1000);
	if (ms >= 0)
		fprintf(f, "  %s", w_dur(ms, d, sizeof(d)));
	if (s->note != NULL) {
		fputs("  ", f);
		cli_cleans(f, s->note);
	}
	if (fclose(f) != 0)
		abort();
	return out;
}

/* A step changed: a line when not on a terminal (the block shows it),
 * "step work/verify: failed in 0.8s: exited with status 2". */
static void
w_step_changed(struct watch *w, struct wstep *s)
{
	char d[32];

	w->dirty = 1;
	if (w->c->redraw || s == NULL)
		return;
	fputs("step ", stdout);
	cli_cleans(stdout, s->phase[0] ? s->phase : "-");
	putchar('/');
	cli_cleans(stdout, s->id);
	fputs(": ", stdout);
	cli_cleans(stdout, s->state);
	if (s->attempt > 1 || (s->attempt == 1 && strcmp(s->state, "running") == 0))
		printf(" (attempt %lld)", s->attempt);
	if (s->dur_ms >= 0)
		printf(" in %s", w_dur(s->dur_ms, d, sizeof(d)));
	if (s->note != NULL) {
		fputs(": ", stdout);
		cli_cleans(stdout, s->note);
	}
	putchar('\n');
}

/* ---- the block, on a terminal ------------------------------------------ */

static void
w_block_line(const char *text, size_t cols)
{
	char *s = xstrndup(text, strlen(text));

	cli_cut(s, cols);
	fputs(s, stdout);
	fputs("\033[K\n", stdout);
	free(s);
}

/* Redraw: erase the block, print what waits above it, draw it again. */
static void
w_draw(struct watch *w, int final)
{
	struct winsize ws;
	size_t cols = 80, rows = 24, avail, first = 0, i, active = 0;
	char *head = NULL, d[32], *t;
	size_t headlen = 0;
	FILE *hf;

	if (!w->c->redraw || w->c->json)
		return;
	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 10 && ws.ws_row > 4) {
		cols = ws.ws_col;
		rows = ws.ws_row;
	}
	if (w->block_lines > 0)
		printf("\r\033[%dA\033[J", w->block_lines);
	fflush(w->above);
	fwrite(w->abovebuf, 1, w->abovelen, stdout);
	rewind(w->above);
	fflush(w->above);
	/* the header, then as many steps as fit, the running ones in view */
	if ((hf = open_memstream(&head, &headlen)) == NULL)
		abort();
	fprintf(hf, "run %.8s  ", w->run);
	cli_cleans(hf, w->tmpl);
	fprintf(hf, " v%lld  ", w->version);
	cli_cleans(hf, w->status);
	if (w->started_at > 0)
		fprintf(hf, "  %s",
		        cli_duration((w->finished_at > 0 ? w->finished_at : (long long)time(NULL)) -
		                         w->started_at,
		                     d, sizeof(d)));
	if (fclose(hf) != 0)
		abort();
	w_block_line(head, cols - 1);
	free(head);
	avail = rows - 2;
	for (i = 0; i < w->nsteps; i++)
		if (strcmp(w->steps[i].state, "pending") != 0)
			active = i;
	if (w->nsteps > avail)
		first = active + 1 > avail / 2 ? active + 1 - avail / 2 : 0;
	if (first + avail > w->nsteps && w->nsteps > avail)
		first = w->nsteps - avail;
	for (i = first; i < w->nsteps && i < first + avail; i++) {
		t = w_step_text(w, &w->steps[i]);
		fputs("  ", stdout);
		w_block_line(t, cols - 3);
		free(t);
	}
	w->block_lines = (int)(i - first) + 1;
	if (final)
		w->block_lines = 0;
	fflush(stdout);
	w->dirty = 0;
	w->last_draw = now_s();
}

/* ---- events ------------------------------------------------------------ */

static void
w_approval(struct watch *w, const char *type, json_t *p)
{
	char pre[160];
	const char *verb = type + strlen("approval.");

	if (strcmp(type, "approval.requested") == 0) {
		snprintf(pre, sizeof(pre), "approval %.36s requested by step ",
		         cli_str(p, "approval_id") && cli_is_uuid(cli_str(p, "approval_id"))
		             ? cli_str(p, "approval_id")
		             : "?");
		w_note(w, pre, cli_str(p, "step_id"));
		if (cli_str(p, "message") != NULL)
			w_note(w, "  ", cli_str(p, "message"));
		w_note(w, "  decide with: agrippa approve|reject ", w->run);
		return;
	}
	snprintf(pre, sizeof(pre), "approval %.36s %s",
	         cli_str(p, "approval_id") && cli_is_uuid(cli_str(p, "approval_id"))
	             ? cli_str(p, "approval_id")
	             : "?",
	         strcmp(verb, "approved") == 0 || strcmp(verb, "rejected") == 0 ||
	                 strcmp(verb, "expired") == 0
	             ? verb
	             : "decided");
	if (cli_str(p, "comment") != NULL) {
		strcat(pre, ": ");
		w_note(w, pre, cli_str(p, "comment"));
	} else {
		w_note(w, pre, NULL);
	}
}

static void
w_step_event(struct watch *w, const char *type, json_t *p, int live)
{
	struct wstep *s = w_step(w, cli_str(p, "step_id"), cli_str(p, "phase"));
	const char *st = cli_str(p, "status");

	if (s == NULL)
		return;
	if (s->phase[0] == '\0' && cli_str(p, "phase") != NULL) {
		free(s->phase);
		s->phase = xstrndup(cli_str(p, "phase"), W_NAME_MAX);
	}
	if (strcmp(type, "step.started") == 0) {
		w_set_state(s, "running");
		s->attempt = cli_int(p, "attempt", 1);
		s->dur_ms = -1;
		s->started = live ? now_s() : 0;
		w_set_note(s, NULL);
	} else if (strcmp(type, "step.finished") == 0) {
		if (w->part_step != NULL && strcmp(w->part_step, s->id) == 0)
			w_flush_part(w);
		w_set_state(s, json_is_true(json_object_get(p, "retrying")) ? "retrying" : st);
		s->dur_ms = cli_int(p, "duration_ms", -1);
		if (s->dur_ms < 0 && s->started > 0)
			s->dur_ms = (long long)((now_s() - s->started) * 1000);
		w_set_note(s,
		           st != NULL && strcmp(st, "succeeded") == 0 ? NULL : cli_str(p, "error"));
	} else if (strcmp(type, "step.crashed") == 0) {
		w_set_state(s, "crashed");
	} else if (strcmp(type, "step.skipped") == 0) {
		w_set_state(s, "skipped");
	} else {
		return;
	}
	w_step_changed(w, s);
}

static void
w_event(struct watch *w, const char *type, json_t *p, int live)
{
	struct wstep *s;
	char pre[200];

	if (strncmp(type, "step.", 5) == 0 && strcmp(type, "step.output") != 0) {
		w_step_event(w, type, p, live);
	} else if (strcmp(type, "step.output") == 0 && cli_str(p, "text") != NULL &&
	           cli_str(p, "step_id") != NULL) {
		w_output(w, cli_str(p, "step_id"), cli_str(p, "text"));
	} else if (strcmp(type, "agent.message") == 0 && cli_str(p, "text") != NULL &&
	           cli_str(p, "step_id") != NULL) {
		w_output(w, cli_str(p, "step_id"), cli_str(p, "text"));
		w_flush_part(w);
	} else if (strcmp(type, "agent.tool_call") == 0 && cli_str(p, "step_id") != NULL) {
		w_flush_part(w);
		snprintf(pre, sizeof(pre), "tool ");
		w_output(w, cli_str(p, "step_id"), pre);
		w_output(w, cli_str(p, "step_id"), cli_str(p, "name") ? cli_str(p, "name") : "?");
		w_flush_part(w);
	} else if (strcmp(type, "run.started") == 0 || strcmp(type, "run.resumed") == 0) {
		snprintf(w->status, sizeof(w->status), "running");
		if (w->started_at <= 0)
			w->started_at = (long long)time(NULL);
		w->dirty = 1;
	} else if (strcmp(type, "run.waiting_approval") == 0) {
		snprintf(w->status, sizeof(w->status), "waiting_approval");
		if ((s = w_step(w, cli_str(p, "step_id"), NULL)) != NULL) {
			w_set_state(s, "waiting");
			w_step_changed(w, s);
		}
		w->dirty = 1;
	} else if (strncmp(type, "approval.", 9) == 0) {
		w_approval(w, type, p);
	} else if (strcmp(type, "artifact.stored") == 0) {
		snprintf(pre, sizeof(pre), "artifact %.36s (%lld bytes) of step ",
		         cli_str(p, "artifact_id") && cli_is_uuid(cli_str(p, "artifact_id"))
		             ? cli_str(p, "artifact_id")
		             : "?",
		         cli_int(p, "size", 0));
		w_note(w, pre, cli_str(p, "step_id"));
		w_note(w, "  key: ", cli_str(p, "key"));
	} else if (strcmp(type, "artifact.rejected") == 0) {
		w_note(w, "artifact refused: ", cli_str(p, "reason"));
	} else if (strcmp(type, "budget.exceeded") == 0) {
		w_note(w, "budget: ", cli_str(p, "message"));
	} else if (strcmp(type, "pull_request.opened") == 0 ||
	           strcmp(type, "pull_request.updated") == 0) {
		w_note(w, "pull request: ", cli_str(p, "url"));
	} else if (strcmp(type, "run.cancel_requested") == 0) {
		w_note(w, "cancel requested", NULL);
	} else if (strcmp(type, "run.succeeded") == 0 || strcmp(type, "run.failed") == 0 ||
	           strcmp(type, "run.cancelled") == 0) {
		w_flush_part(w);
		snprintf(w->status, sizeof(w->status), "%s", type + 4);
		if (cli_str(p, "error") != NULL && w->error == NULL)
			w->error = xstrndup(cli_str(p, "error"), 4096);
		if (w->finished_at <= 0)
			w->finished_at = (long long)time(NULL);
		w->done = 1;
		w->outcome = strcmp(type, "run.succeeded") == 0 ? CLI_OK : CLI_RUN_FAILED;
		w->dirty = 1;
	}
}

/* A whole event (id, type, data) arrived. */
static int
w_dispatch(struct watch *w)
{
	json_t *p, *ev;
	json_error_t jerr;

	if (!w->has_id || w->data == NULL) {
		cli_err("the event stream is not the API's: an event without %s",
		        w->has_id ? "data" : "an id");
		return -1;
	}
	if (w->id <= w->last_seq)
		return 0; /* had it already: never shown twice */
	p = json_loadb(w->data, w->datalen, JSON_REJECT_DUPLICATES, &jerr);
	if (!json_is_object(p)) {
		cli_err("the event stream is not the API's: event %llu's data is not a JSON "
		        "object",
		        (unsigned long long)w->id);
		json_decref(p);
		return -1;
	}
	if (w->id != w->last_seq + 1 && !w->c->json)
		fprintf(w_out(w), "(events %llu to %llu are missing)\n",
		        (unsigned long long)w->last_seq + 1, (unsigned long long)w->id - 1);
	w->last_seq = w->id;
	if (w->c->json) {
		ev = json_pack("{s:I,s:s,s:O}", "seq", (json_int_t)w->id, "type", w->type,
		               "payload", p);
		if (ev != NULL)
			cli_print_json(w->c, ev, 1);
		json_decref(ev);
		if (strcmp(w->type, "run.succeeded") == 0 || strcmp(w->type, "run.failed") == 0 ||
		    strcmp(w->type, "run.cancelled") == 0) {
			w->done = 1;
			w->outcome = w->type[4] == 's' ? CLI_OK : CLI_RUN_FAILED;
		}
	} else {
		w_event(w, w->type, p, w->id > w->live_after);
	}
	json_decref(p);
	return 0;
}

/* One line of the stream (without its end of line).  Returns -1 when the
 * stream is not the API's. */
static int
w_sse_line(struct watch *w, char *s, size_t n)
{
	char *v, *end;
	size_t vn;

	if (n == 0) {
		int rv = w->data != NULL || w->has_id ? w_dispatch(w) : 0;

		free(w->data);
		w->data = NULL;
		w->datalen = 0;
		w->has_id = 0;
		w->type[0] = '\0';
		return rv;
	}
	if (s[0] == ':')
		return 0;
	if ((v = memchr(s, ':', n)) == NULL)
		v = s + n;
	vn = v < s + n ? n - (size_t)(v - s) - 1 : 0;
	*v = '\0';
	if (vn > 0 && v[1] == ' ')
		v++, vn--;
	v = vn > 0 ? v + 1 : v;
	v[vn] = '\0';
	if (strcmp(s, "data") == 0) {
		if (vn + 1 > W_LINE_MAX - w->datalen) {
			cli_err("the event stream is not the API's: an event over %u MiB",
			        W_LINE_MAX >> 20);
			return -1;
		}
		if ((w->data = realloc(w->data, w->datalen + vn + 2)) == NULL)
			abort();
		if (w->datalen > 0)
			w->data[w->datalen++] = '\n';
		memcpy(w->data + w->datalen, v, vn);
		w->datalen += vn;
		w->data[w->datalen] = '\0';
	} else if (strcmp(s, "event") == 0) {
		snprintf(w->type, sizeof(w->type), "%s", v);
	} else if (strcmp(s, "id") == 0) {
		errno = 0;
		w->id = strtoull(v, &end, 10);
		if (vn == 0 || *end != '\0' || errno != 0 || v[0] < '0' || v[0] > '9') {
			cli_err("the event stream is not the API's: an id that is no seq");
			return -1;
		}
		w->has_id = 1;
	} else if (strcmp(s, "retry") == 0) {
		w->retry_ms = strtol(v, &end, 10);
		if (*end != '\0' || w->retry_ms < 100 || w->retry_ms > 30000)
			w->retry_ms = 2000;
	}
	return 0;
}

static size_t
w_body(char *buf, size_t size, size_t nmemb, void *arg)
{
	struct watch *w = arg;
	size_t n = size * nmemb, i;
	char *ct = NULL, *p;

	if (w->http == 0) {
		curl_easy_getinfo(w->h, CURLINFO_RESPONSE_CODE, &w->http);
		curl_easy_getinfo(w->h, CURLINFO_CONTENT_TYPE, &ct);
		if (w->http == 200 && (ct == NULL || strncmp(ct, "text/event-stream", 17) != 0)) {
			cli_err("the daemon's event stream is not text/event-stream");
			w->proto = 1;
			return 0;
		}
	}
	if (w->http != 200) {
		if (n > (1u << 20) - w->errlen)
			return 0;
		if ((p = realloc(w->err, w->errlen + n)) == NULL)
			abort();
		w->err = p;
		memcpy(w->err + w->errlen, buf, n);
		w->errlen += n;
		return n;
	}
	for (i = 0; i < n && !w->done; i++) {
		if (buf[i] != '\n') {
			if (w->linelen == W_LINE_MAX) {
				cli_err("the event stream is not the API's: a line over %u MiB",
				        W_LINE_MAX >> 20);
				w->proto = 1;
				return 0;
			}
			w->line[w->linelen++] = buf[i];
			continue;
		}
		if (w->linelen > 0 && w->line[w->linelen - 1] == '\r')
			w->linelen--;
		w->line[w->linelen] = '\0';
		if (w_sse_line(w, w->line, w->linelen) == -1) {
			w->proto = 1;
			return 0;
		}
		w->linelen = 0;
	}
	if (w->dirty)
		w_draw(w, 0);
	if (!w->c->redraw)
		fflush(stdout);
	/* after the terminal event, the stream has nothing more to say */
	return w->done ? 0 : n;
}

/* About once a second while the stream is idle: the clocks move on. */
static int
w_tick(void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	struct watch *w = arg;

	if (w->c->redraw && !w->c->json && now_s() - w->last_draw >= 1.0)
		w_draw(w, 0);
	return 0;
}

/* One connection to the stream.  Returns CLI_OK when the caller should
 * reconnect or is done (w->done), else an exit status; *up says whether the
 * stream was opened. */
static int
w_stream(struct watch *w, int *up)
{
	struct curl_slist *hdrs;
	char path[128], hdr[64], msg[256];
	json_t *doc;
	CURLcode res;
	CURLU *u;
	int rv = CLI_OK;

	snprintf(path, sizeof(path), "/v1/runs/%s/events/stream", w->run);
	if ((u = cli_url(w->c, path)) == NULL)
		return CLI_USAGE;
	w->h = cli_handle(w->c, u, &hdrs);
	hdrs = curl_slist_append(hdrs, "Accept: text/event-stream");
	if (w->last_seq > 0) {
		snprintf(hdr, sizeof(hdr), "Last-Event-ID: %llu", (unsigned long long)w->last_seq);
		hdrs = curl_slist_append(hdrs, hdr);
	}
	if (hdrs == NULL)
		abort();
	curl_easy_setopt(w->h, CURLOPT_HTTPHEADER, hdrs);
	/* heartbeats come every 15 s: 45 s of nothing is a dead connection */
	curl_easy_setopt(w->h, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(w->h, CURLOPT_LOW_SPEED_TIME, 45L);
	curl_easy_setopt(w->h, CURLOPT_WRITEFUNCTION, w_body);
	curl_easy_setopt(w->h, CURLOPT_WRITEDATA, w);
	curl_easy_setopt(w->h, CURLOPT_XFERINFOFUNCTION, w_tick);
	curl_easy_setopt(w->h, CURLOPT_XFERINFODATA, w);
	curl_easy_setopt(w->h, CURLOPT_NOPROGRESS, 0L);
	w->http = 0;
	w->linelen = 0;
	free(w->data);
	w->data = NULL;
	w->datalen = w->has_id = 0;
	w->errlen = 0;
	res = curl_easy_perform(w->h);
	if (w->http == 0)
		curl_easy_getinfo(w->h, CURLINFO_RESPONSE_CODE, &w->http);
	*up = w->http == 200;
	if (w->proto) {
		rv = CLI_CONN;
	} else if (w->done || w->http == 204) {
		rv = CLI_OK;
	} else if (w->http != 0 && w->http != 200 && w->http != 429 && w->http != 502 &&
	           w->http != 503 && w->http != 504) {
		doc = w->err != NULL ? json_loadb(w->err, w->errlen, JSON_REJECT_DUPLICATES, NULL)
		                     : NULL;
		w_draw(w, 1);
		rv = cli_refused(w->c, w->http, doc);
		json_decref(doc);
	} else {
		snprintf(msg, sizeof(msg), "the stream dropped (%s); resuming after event %llu\n",
		         res != CURLE_OK ? curl_easy_strerror(res) : "closed",
		         (unsigned long long)w->last_seq);
		if (w->c->redraw && !w->c->json)
			fputs(msg, w_out(w));
		else
			fprintf(stderr, "agrippa: %s", msg);
	}
	cli_headers_free(hdrs);
	curl_easy_cleanup(w->h);
	w->h = NULL;
	curl_url_cleanup(u);
	return rv;
}

/* The run as it is before the stream: its template, status and how many
 * events it has (those are a replay); the template's steps when its
 * version is the run's, so that steps not started yet show as pending. */
static int
w_prepare(struct watch *w)
{
	json_t *run, *t, *tmpl, *ph, *st;
	char path[sizeof(w->tmpl) + 64];
	long status;
	size_t i, j;
	CURLU *u;
	int rv;

	snprintf(path, sizeof(path), "/v1/runs/%s", w->run);
	if ((u = cli_url(w->c, path)) == NULL)
		return CLI_USAGE;
	rv = cli_call(w->c, "GET", u, NULL, &status, &run);
	curl_url_cleanup(u);
	if (rv != CLI_OK)
		return rv;
	t = json_object_get(run, "template");
	snprintf(w->tmpl, sizeof(w->tmpl), "%s", cli_str(t, "name") ? cli_str(t, "name") : "?");
	w->version = cli_int(t, "version", 0);
	snprintf(w->status, sizeof(w->status), "%.20s",
	         cli_str(run, "status") ? cli_str(run, "status") : "?");
	w->started_at = cli_time(cli_str(run, "started_at"));
	w->finished_at = cli_time(cli_str(run, "finished_at"));
	w->live_after = (uint64_t)cli_int(run, "last_event_seq", 0);
	json_decref(run);
	if (!cli_is_name(w->tmpl) || w->c->json)
		return CLI_OK;
	snprintf(path, sizeof(path), "/v1/templates/%s", w->tmpl);
	if ((u = cli_url(w->c, path)) == NULL)
		return CLI_USAGE;
	w->c->quiet_404 = 1;
	rv = cli_call(w->c, "GET", u, NULL, &status, &tmpl);
	w->c->quiet_404 = 0;
	curl_url_cleanup(u);
	if (rv == CLI_REFUSED && status == 404)
		return CLI_OK; /* a template removed since: steps show as they start */
	if (rv != CLI_OK)
		return rv;
	if (cli_int(tmpl, "version", -1) == w->version)
		json_array_foreach(json_object_get(json_object_get(tmpl, "template"), "phases"), i,
		                   ph) json_array_foreach(json_object_get(ph, "steps"), j, st)(void)
		    w_step(w, cli_str(st, "id"), cli_str(ph, "name"));
	json_decref(tmpl);
	return CLI_OK;
}

static void
w_free(struct watch *w)
{
	size_t i;

	for (i = 0; i < w->nsteps; i++) {
		free(w->steps[i].id);
		free(w->steps[i].phase);
		free(w->steps[i].note);
	}
	free(w->steps);
	free(w->error);
	free(w->line);
	free(w->data);
	free(w->err);
	free(w->part);
	free(w->part_step);
	if (w->above != NULL)
		fclose(w->above);
	free(w->abovebuf);
}

int
cli_watch(struct cli *c, int argc, char **argv)
{
	struct watch w;
	double since;
	int rv, up;

	if (!cli_is_uuid(argv[1])) {
		fputs("agrippa: not a run id (a UUID): ", stderr);
		cli_cleans(stderr, argv[1]);
		fputc('\n', stderr);
		return CLI_USAGE;
	}
	memset(&w, 0, sizeof(w));
	w.c = c;
	w.run = argv[1];
	w.retry_ms = 2000;
	if ((w.line = malloc(W_LINE_MAX + 1)) == NULL ||
	    (w.above = open_memstream(&w.abovebuf, &w.abovelen)) == NULL)
		abort();
	if ((rv = w_prepare(&w)) != CLI_OK) {
		w_free(&w);
		return rv;
	}
	if (!c->redraw && !c->json) {
		printf("run %s: ", w.run);
		cli_cleans(stdout, w.tmpl);
		printf(" %lld, ", w.version);
		cli_cleans(stdout, w.status);
		putchar('\n');
	}
	since = now_s();
	for (;;) {
		rv = w_stream(&w, &up);
		if (rv != CLI_OK || w.done)
			break;
		if (w.http == 204) {
			/* the run ended and every event was had: its status says how */
			w_prepare(&w);
			w.done = 1;
			w.outcome = strcmp(w.status, "succeeded") == 0 ? CLI_OK : CLI_RUN_FAILED;
			break;
		}
		if (up)
			since = now_s();
		if (now_s() - since > W_RESUME_S) {
			w_draw(&w, 1);
			cli_err("gave up: no stream from the daemon for %d seconds", W_RESUME_S);
			rv = CLI_CONN;
			break;
		}
		if (c->redraw)
			w_draw(&w, 0);
		usleep((useconds_t)w.retry_ms * 1000);
	}
	w_flush_part(&w);
	w_draw(&w, 1);
	if (w.done && !c->json) {
		fputs("run ", stdout);
		cli_cleans(stdout, w.status);
		if (w.error != NULL) {
			fputs(": ", stdout);
			cli_cleans(stdout, w.error);
		}
		putchar('\n');
	}
	fflush(stdout);
	if (w.done && rv == CLI_OK)
		rv = w.outcome;
	w_free(&w);
	return rv;
}
