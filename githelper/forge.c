/*
 * Pull requests on GitHub and GitLab over their REST APIs
 * (githelper/forge.h).
 */
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common/forge.h"
#include "common/log.h"
#include "common/util.h"
#include "githelper/forge.h"
#include "tmpl/tmpl.h"

#define FG_TOKEN_MAX 4096
#ifndef AGRIPPA_VERSION /* the Makefile defines it; tests/fuzz/run.sh does not */
#define AGRIPPA_VERSION "unknown"
#endif

/* One call of gh_forge_pr. */
struct fg {
	const struct gh_pr_req *req;
	const char *fname;                 /* "GitHub", "GitLab" */
	const char *pr;                    /* "pull request #", "merge request !" */
	const char *noun;                  /* "pull request", "merge request" */
	char api[FORGE_API_URL_MAX + 1];   /* normalised */
	char path[FORGE_PATH_MAX + 1];     /* OWNER/REPO, or the project's path */
	char proj[3 * FORGE_PATH_MAX + 1]; /* that path as one URL segment (GitLab) */
	char owner[FORGE_SEGMENT_MAX + 1]; /* GitHub: OWNER */
	char host[FORGE_API_URL_MAX + 1];  /* repo_url's authority: where links point */
	char *body;                        /* req->body as the forge takes it */
	CURL *easy;
	struct curl_slist *hdrs;         /* holds the token: wiped, then freed */
	uint64_t deadline_ms, waited_ms; /* CLOCK_MONOTONIC */
	/* the last answer */
	long status;
	char *ans;
	size_t anslen;
	int ans_over;
	long retry_after;                 /* seconds, -1 when none */
	long long rl_remaining, rl_reset; /* x-ratelimit-*, -1 when none */
	char curlerr[CURL_ERROR_SIZE];
	char *err;
	size_t errsz;
};

/* ---- reading answers ----------------------------------------------------- */

long
gh_forge_retry_after(const char *value, time_t now)
{
	size_t n = strlen(value);
	uint64_t v;
	time_t when;

	if (n > 0 && isdigit((unsigned char)value[0])) {
		while (n > 1 && value[0] == '0') /* "05" is 5 s, not an octal number */
			value++, n--;
		return dec_parse(value, n, INT32_MAX, &v) == 0 ? (long)v : -1;
	}
	if (n == 0 || !isalpha((unsigned char)value[0]) || (when = curl_getdate(value, NULL)) == -1)
		return -1;
	if (when <= now)
		return 0;
	return when - now > INT32_MAX ? INT32_MAX : (long)(when - now);
}

static json_t *
fg_json(const char *text, size_t len, char *err, size_t errsz)
{
	json_error_t je;
	json_t *j;

	if (text == NULL || len == 0) {
		forge_fail(err, errsz, "the answer is empty");
		return NULL;
	}
	if ((j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je)) == NULL)
		forge_fail(err, errsz, "the answer is not JSON (line %d, column %d)", je.line,
		           je.column);
	return j;
}

/* The string member key of o into out (outsz bytes): 0, or -1 when it is
 * not a string, holds a NUL or does not fit. */
static int
fg_str(json_t *o, const char *key, char *out, size_t outsz)
{
	json_t *v = json_object_get(o, key);
	size_t n;

	if (!json_is_string(v) || (n = json_string_length(v)) >= outsz ||
	    memchr(json_string_value(v), '\0', n) != NULL)
		return -1;
	memcpy(out, json_string_value(v), n + 1);
	return 0;
}

/* GitHub's head or base object: its ref, and (for the head) the owner in
 * its label "OWNER:BRANCH". */
static int
fg_github_side(json_t *o, const char *key, char *ref, size_t refsz, char *owner, size_t ownsz)
{
	json_t *side = json_object_get(o, key);
	char label[sizeof(((struct gh_pr_seen *)0)->owner) + 256];
	size_t n;

	if (!json_is_object(side) || fg_str(side, "ref", ref, refsz) == -1)
		return -1;
	if (owner == NULL)
		return 0;
	if (fg_str(side, "label", label, sizeof(label)) == -1 ||
	    (n = strcspn(label, ":")) >= ownsz || label[n] != ':')
		return -1;
	memcpy(owner, label, n);
	owner[n] = '\0';
	return 0;
}

/* state (and, on GitHub, merged_at) as one of enum gh_pr_state; -1 when
 * it is none of the forge's words. */
static int
fg_state(enum forge_kind kind, json_t *o)
{
	json_t *st = json_object_get(o, "state"), *m;
	const char *s;

	if (!json_is_string(st))
		return -1;
	s = json_string_value(st);
	if (kind == FORGE_GITHUB) {
		if (strcmp(s, "open") == 0)
			return GH_PR_OPEN;
		if (strcmp(s, "closed") != 0)
			return -1;
		m = json_object_get(o, "merged_at");
		return json_is_string(m) || json_is_true(json_object_get(o, "merged"))
		           ? GH_PR_MERGED
		           : GH_PR_CLOSED;
	}
	if (strcmp(s, "opened") == 0)
		return GH_PR_OPEN;
	if (strcmp(s, "merged") == 0)
		return GH_PR_MERGED;
	return strcmp(s, "closed") == 0 || strcmp(s, "locked") == 0 ? GH_PR_CLOSED : -1;
}

/* A draft flag: true or false, or absent (false); -1 for anything else. */
static int
fg_flag(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return v == NULL ? 0 : json_is_boolean(v) ? json_is_true(v) : -1;
}

static int
fg_pr_object(enum forge_kind kind, json_t *o, const char *host, struct gh_pr_seen *pr, char *err,
             size_t errsz)
{
	int gh = kind == FORGE_GITHUB, st;
	const char *nkey = gh ? "number" : "iid", *ukey = gh ? "html_url" : "web_url";
	char auth[FORGE_API_URL_MAX + 1], why[160];
	json_t *n;

	memset(pr, 0, sizeof(*pr));
	if (!json_is_object(o))
		return forge_fail(err, errsz, "it is not an object");
	n = json_object_get(o, nkey);
	if (!json_is_integer(n) || json_integer_value(n) <= 0)
		return forge_fail(err, errsz, "it has no positive integer \"%s\"", nkey);
	pr->number = (uint64_t)json_integer_value(n);
	if (fg_str(o, ukey, pr->url, sizeof(pr->url)) == -1)
		return forge_fail(err, errsz, "it has no \"%s\" of at most %d bytes", ukey,
		                  GH_FORGE_URL_MAX - 1);
	if (forge_url_authority(ukey, pr->url, GH_FORGE_URL_MAX - 1, auth, sizeof(auth), why,
	                        sizeof(why)) == -1)
		return forge_fail(err, errsz, "%s", why);
	if (strncmp(pr->url, "https://", 8) != 0) /* as links are written, for whoever follows it */
		return forge_fail(err, errsz, "its %s is not written https://...", ukey);
	if (strcasecmp(auth, host) != 0)
		return forge_fail(err, errsz, "its %s is not on the repository's host %s", ukey,
		                  host);
	if ((st = fg_state(kind, o)) == -1)
		return forge_fail(err, errsz, "it has no \"state\" the forge would write");
	pr->state = (enum gh_pr_state)st;
	pr->draft = fg_flag(o, "draft");
	if (!gh && pr->draft == 0 && json_object_get(o, "draft") == NULL)
		pr->draft = fg_flag(o, "work_in_progress"); /* before GitLab 13.x */
	if (pr->draft == -1)
		return forge_fail(err, errsz, "its \"draft\" is not a boolean");
	if (gh ? fg_github_side(o, "head", pr->head, sizeof(pr->head), pr->owner,
	                        sizeof(pr->owner)) == -1 ||
	             fg_github_side(o, "base", pr->base, sizeof(pr->base), NULL, 0) == -1
	       : fg_str(o, "source_branch", pr->head, sizeof(pr->head)) == -1 ||
	             fg_str(o, "target_branch", pr->base, sizeof(pr->base)) == -1)
		return forge_fail(err, errsz, "it names no head and base branches");
	return 0;
}

int
gh_forge_answer_pr(enum forge_kind kind, const char *text, size_t len, const char *host,
                   struct gh_pr_seen *pr, char *err, size_t errsz)
{
	json_t *j;
	int rv;

	memset(pr, 0, sizeof(*pr));
	if ((j = fg_json(text, len, err, errsz)) == NULL)
		return -1;
	if ((rv = fg_pr_object(kind, j, host, pr, err, errsz)) == -1)
		memset(pr, 0, sizeof(*pr));
	json_decref(j);
	return rv;
}

int
gh_forge_answer_find(enum forge_kind kind, const char *text, size_t len, const char *host,
                     const char *owner, const char *head, const char *base, struct gh_pr_seen *pr,
                     char *err, size_t errsz)
{
	char why[256];
	json_t *j, *v;
	size_t i;
	int rv = 0;

	memset(pr, 0, sizeof(*pr));
	if ((j = fg_json(text, len, err, errsz)) == NULL)
		return -1;
	if (!json_is_array(j)) {
		json_decref(j);
		return forge_fail(err, errsz, "the answer is not a list");
	}
	json_array_foreach(j, i, v)
	{
		if (fg_pr_object(kind, v, host, pr, why, sizeof(why)) == -1) {
			rv = forge_fail(err, errsz, "entry %zu of the list: %s", i, why);
			break;
		}
		if (pr->state == GH_PR_OPEN && strcmp(pr->head, head) == 0 &&
		    strcmp(pr->base, base) == 0 &&
		    (kind != FORGE_GITHUB || strcasecmp(pr->owner, owner) == 0)) {
			rv = 1;
			break;
		}
	}
	json_decref(j);
	if (rv != 1)
		memset(pr, 0, sizeof(*pr));
	return rv;
}

/* Append s (a field's name before it when field is not NULL) to out,
 * "; " between two, cut when it is full. */
static void
fg_say(char *out, size_t outsz, size_t *n, const char *field, const char *s)
{
	int k;

	if (*n + 1 >= outsz || s[0] == '\0')
		return;
	k = snprintf(out + *n, outsz - *n, "%s%s%s%s", *n > 0 ? "; " : "", field ? field : "",
	             field ? " " : "", s);
	*n = k < 0 ? *n : (size_t)k >= outsz - *n ? outsz - 1 : *n + (size_t)k;
}

/*
 * The words in v: a string; a list of strings or of GitHub's error objects
 * ({message} or {resource, field, code}); at the top, GitLab's object of
 * field: [messages].
 */
static void
fg_words(json_t *v, const char *field, int depth, char *out, size_t outsz, size_t *n)
{
	const char *key;
	json_t *e;
	size_t i;
	char tmp[256];

	if (json_is_string(v)) {
		fg_say(out, outsz, n, field, json_string_value(v));
	} else if (json_is_array(v) && depth < 2) {
		json_array_foreach(v, i, e)
		{
			if (json_is_object(e) && json_is_string(json_object_get(e, "message")))
				fg_say(out, outsz, n, field,
				       json_string_value(json_object_get(e, "message")));
			else if (json_is_object(e) && json_is_string(json_object_get(e, "code"))) {
				const char *res = json_string_value(json_object_get(e, "resource"));
				const char *fld = json_string_value(json_object_get(e, "field"));

				snprintf(tmp, sizeof(tmp), "%s %s: %s", res != NULL ? res : "",
				         fld != NULL ? fld : "",
				         json_string_value(json_object_get(e, "code")));
				fg_say(out, outsz, n, field, tmp);
			} else
				fg_words(e, field, depth + 1, out, outsz, n);
		}
	} else if (json_is_object(v) && depth == 0) {
		json_object_foreach(v, key, e) fg_words(e, key, depth + 1, out, outsz, n);
	}
}

void
gh_forge_answer_message(const char *text, size_t len, char *out, size_t outsz)
{
	static const char *const keys[] = {"message", "errors", "error", "error_description"};
	size_t n = 0, i;
	json_t *j;
	char *p;

	if (outsz == 0)
		return;
	out[0] = '\0';
	if (text == NULL || len == 0)
		return;
	if ((j = json_loadb(text, len, 0, NULL)) != NULL) {
		if (json_is_object(j))
			for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
				fg_words(json_object_get(j, keys[i]), NULL, 0, out, outsz, &n);
		json_decref(j);
	} else if (text[0] != '<') { /* plain text (GitHub's 403 without User-Agent), not HTML */
		while (n < len && text[n] != '\r' && text[n] != '\n' && text[n] != '\0')
			n++;
		snprintf(out, outsz, "%.*s", (int)(n < outsz ? n : outsz - 1), text);
	}
	for (p = out; *p != '\0'; p++)
		if ((unsigned char)*p >= 0x80)
			*p = '?';
		else if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = ' ';
}

/* ---- one request, tried again -------------------------------------------- */

static size_t
fg_write(char *data, size_t size, size_t nmemb, void *arg)
{
	struct fg *f = arg;
	size_t len = size * nmemb;
	char *p;

	if (len > GH_FORGE_ANSWER_MAX - f->anslen) {
		f->ans_over = 1;
		return 0;
	}
	if ((p = realloc(f->ans, f->anslen + len + 1)) == NULL)
		return 0;
	memcpy(p + f->anslen, data, len);
	f->ans = p;
	f->anslen += len;
	f->ans[f->anslen] = '\0';
	return len;
}

/* A decimal header value (x-ratelimit-*), or -1. */
static long long
fg_header_int(const char *v)
{
	uint64_t n;

	return dec_parse(v, strlen(v), (uint64_t)1 << 40, &n) == 0 ? (long long)n : -1;
}

/* Retry-After and GitHub's x-ratelimit-remaining and -reset; a status line
 * (each response of a transfer has one) forgets what came before. */
static size_t
fg_header(char *data, size_t size, size_t nmemb, void *arg)
{
	struct fg *f = arg;
	size_t len = size * nmemb, nl;
	const char *colon = memchr(data, ':', len);
	char v[128];

	if (len >= 5 && strncmp(data, "HTTP/", 5) == 0) {
		f->retry_after = -1;
		f->rl_remaining = f->rl_reset = -1;
		return len;
	}
	if (colon == NULL)
		return len;
	nl = (size_t)(colon - data);
	colon++;
	while (colon < data + len && (*colon == ' ' || *colon == '\t'))
		colon++;
	if ((size_t)(data + len - colon) >= sizeof(v))
		return len;
	memcpy(v, colon, (size_t)(data + len - colon));
	v[data + len - colon] = '\0';
	v[strcspn(v, "\r\n")] = '\0';
	while (v[0] != '\0' && strchr(" \t", v[strlen(v) - 1]) != NULL)
		v[strlen(v) - 1] = '\0';
	if (nl == 11 && strncasecmp(data, "retry-after", nl) == 0)
		f->retry_after = gh_forge_retry_after(v, time(NULL));
	else if (nl == 21 && strncasecmp(data, "x-ratelimit-remaining", nl) == 0)
		f->rl_remaining = fg_header_int(v);
	else if (nl == 17 && strncasecmp(data, "x-ratelimit-reset", nl) == 0)
		f->rl_reset = fg_header_int(v);
	return len;
}

/* Star out the token wherever an answer holds it, before anything reads
 * the answer (a forge that echoes a request back). */
static void
fg_star_token(struct fg *f)
{
	size_t tl = strlen(f->req->token);
	char *p = f->ans, *t;

	while (p != NULL &&
	       (t = memmem(p, f->anslen - (size_t)(p - f->ans), f->req->token, tl)) != NULL) {
		memset(t, '*', tl);
		p = t + tl;
	}
}

static CURLcode
fg_perform(struct fg *f, const char *method, const char *url, const char *data)
{
	CURL *e = f->easy;
	uint64_t now = mono_ms(), left = f->deadline_ms > now ? f->deadline_ms - now : 1;
	CURLcode rc;

	free(f->ans);
	f->ans = NULL;
	f->anslen = 0;
	f->ans_over = 0;
	f->status = 0;
	f->retry_after = -1;
	f->rl_remaining = f->rl_reset = -1;
	f->curlerr[0] = '\0';
	if (left > GH_FORGE_TIMEOUT_S * 1000)
		left = GH_FORGE_TIMEOUT_S * 1000;
	curl_easy_reset(e);
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "https");
	curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "https");
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L); /* a redirect could carry the token away */
	curl_easy_setopt(e, CURLOPT_PROXY, "");          /* whatever https_proxy says */
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)left);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, (long)GH_FORGE_CONNECT_TIMEOUT_S);
	curl_easy_setopt(e, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)GH_FORGE_ANSWER_MAX);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, f->hdrs);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, fg_write);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, f);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, fg_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, f);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, f->curlerr);
	if (data != NULL) {
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, data);
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(data));
		if (strcmp(method, "POST") != 0)
			curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
	}
	rc = curl_easy_perform(e);
	if (rc == CURLE_OK)
		curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &f->status);
	fg_star_token(f);
	return rc;
}

/* A transfer that failed in a way that may not happen again. */
static int
fg_transient(CURLcode rc)
{
	switch (rc) {
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_CONNECT:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
	case CURLE_SSL_CONNECT_ERROR:
		return 1;
	default:
		return 0;
	}
}

/* A status worth another try: 408, 429, 5xx, and GitHub's rate limit as
 * a 403 (Retry-After, or no request remaining). */
static int
fg_retryable(const struct fg *f)
{
	return f->status == 408 || f->status == 429 || (f->status >= 500 && f->status <= 599) ||
	       (f->status == 403 && (f->retry_after >= 0 || f->rl_remaining == 0));
}

/* What went wrong with the last try, for a person. */
static void
fg_trouble(const struct fg *f, CURLcode rc, char *out, size_t outsz)
{
	char msg[GH_FORGE_MESSAGE_MAX + 1];

	if (rc != CURLE_OK) {
		snprintf(out, outsz, "no answer from %s (%s)", f->fname,
		         f->curlerr[0] != '\0' ? f->curlerr : curl_easy_strerror(rc));
		return;
	}
	gh_forge_answer_message(f->ans, f->anslen, msg, sizeof(msg));
	snprintf(out, outsz, "%s answered %ld%s%s", f->fname, f->status, msg[0] != '\0' ? ": " : "",
	         msg);
}

static void
fg_sleep_ms(uint64_t ms)
{
	struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};

	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

/* Wait before try attempt + 1 (what: the request and its trouble), or -1
 * when the forge asks too long or the waits would pass their bounds. */
static int
fg_wait(struct fg *f, int attempt, const char *what)
{
	long long asked = f->retry_after;
	uint64_t ms, base;
	time_t now = time(NULL);

	if (asked < 0 && f->rl_remaining == 0 && f->rl_reset >= 0)
		asked = f->rl_reset <= now ? 0 : f->rl_reset - now + 1;
	if (asked > GH_FORGE_WAIT_MAX_S)
		return forge_fail(
		    f->err, f->errsz,
		    "%s; it asks to wait %lld s before trying again, more than the %d s "
		    "agrippa waits: try later",
		    what, asked, GH_FORGE_WAIT_MAX_S);
	if (asked >= 0) {
		ms = (uint64_t)asked * 1000;
	} else {
		base = (uint64_t)GH_FORGE_BACKOFF_MS << (attempt - 1);
		if (base > GH_FORGE_BACKOFF_MAX_MS)
			base = GH_FORGE_BACKOFF_MAX_MS;
		ms = base / 2 + randombytes_uniform((uint32_t)(base / 2 + 1));
	}
	if (f->waited_ms + ms > (uint64_t)GH_FORGE_WAIT_TOTAL_S * 1000 ||
	    mono_ms() + ms >= f->deadline_ms)
		return forge_fail(
		    f->err, f->errsz,
		    "%s; waiting %llu ms more would pass the %d s agrippa waits for %s", what,
		    (unsigned long long)ms, GH_FORGE_WAIT_TOTAL_S, f->fname);
	f->waited_ms += ms;
	log_info("%s; trying again in %llu ms (attempt %d of %d)", what, (unsigned long long)ms,
	         attempt + 1, GH_FORGE_ATTEMPTS);
	fg_sleep_ms(ms);
	return 0;
}

/*
 * method api_url+tail with body (NULL for GET; consumed), tried again as
 * forge.h says.  Returns the status of the last answer (in f->ans), which
 * the caller judges, or -1 with the reason in f->err.
 */
static long
fg_call(struct fg *f, const char *method, const char *tail, json_t *body)
{
	char url[FORGE_API_URL_MAX + 2048], what[2048 + 512], trouble[512 + GH_FORGE_MESSAGE_MAX];
	char *data = NULL;
	long rv = -1;
	int attempt;
	CURLcode rc;

	if (strcmp(method, "GET") != 0 &&
	    (body == NULL || (data = json_dumps(body, JSON_COMPACT)) == NULL)) {
		json_decref(body);
		return forge_fail(f->err, f->errsz, "%s %s: out of memory", method, tail);
	}
	json_decref(body);
	if (fmt_ok(url, sizeof(url), "%s%s", f->api, tail) == -1) {
		free(data);
		return forge_fail(f->err, f->errsz, "%s %s: the URL is too long", method, tail);
	}
	for (attempt = 1;; attempt++) {
		if (mono_ms() >= f->deadline_ms) {
			forge_fail(f->err, f->errsz, "%s %s: %s took more than %d s", method, tail,
			           f->fname, GH_FORGE_DEADLINE_S);
			break;
		}
		rc = fg_perform(f, method, url, data);
		if (rc == CURLE_OK && !fg_retryable(f)) {
			rv = f->status;
			break;
		}
		fg_trouble(f, rc, trouble, sizeof(trouble));
		snprintf(what, sizeof(what), "%s %s: %s", method, tail, trouble);
		if (rc != CURLE_OK && (f->ans_over || !fg_transient(rc))) {
			if (f->ans_over)
				forge_fail(f->err, f->errsz, "%s %s: %s's answer is over %d bytes",
				           method, tail, f->fname, GH_FORGE_ANSWER_MAX);
			else
				forge_fail(f->err, f->errsz, "%s", what);
			break;
		}
		if (attempt == GH_FORGE_ATTEMPTS) {
			forge_fail(f->err, f->errsz, "%s (%d tries, giving up)", what, attempt);
			break;
		}
		if (fg_wait(f, attempt, what) == -1)
			break;
	}
	free(data);
	return rv;
}

/* An answer that is not what was asked for: the forge's status and words,
 * with what to look at. */
static int
fg_refused(struct fg *f, const char *what)
{
	char msg[GH_FORGE_MESSAGE_MAX + 1];
	const char *hint = "";

	gh_forge_answer_message(f->ans, f->anslen, msg, sizeof(msg));
	if (f->status == 401)
		hint = " (the connection's token is not valid for this forge)";
	else if (f->status == 403)
		hint = " (the token may not do this: check its scopes or the repository's "
		       "permissions)";
	else if (f->status == 404)
		hint = " (no such repository, or the token cannot see it)";
	else if (f->status >= 300 && f->status < 400)
		hint = " (a redirect, not followed: has the repository or the API moved?)";
	return forge_fail(f->err, f->errsz, "%s: %s answered %ld: %s%s", what, f->fname, f->status,
	                  msg[0] != '\0' ? msg : "(no message)", hint);
}

/* The pull request in the last answer into pr and res. */
static int
fg_take(struct fg *f, const char *what, struct gh_pr_seen *pr, struct gh_pr_res *res)
{
	char why[256];

	if (gh_forge_answer_pr(f->req->forge, f->ans, f->anslen, f->host, pr, why, sizeof(why)) ==
	    -1)
		return forge_fail(f->err, f->errsz, "%s: %s's answer is malformed: %s", what,
		                  f->fname, why);
	if (res != NULL) {
		res->number = pr->number;
		memcpy(res->url, pr->url, sizeof(res->url));
		res->draft = pr->draft;
	}
	return 0;
}

/* ---- GitHub and GitLab --------------------------------------------------- */

/* The title as GitLab takes it: "Draft: " in front for a draft. */
static json_t *
fg_gitlab_title(const char *title, int draft)
{
	char buf[4 * FORGE_TITLE_MAX + 16];

	snprintf(buf, sizeof(buf), "%s%s", draft ? "Draft: " : "", title);
	return json_string(buf);
}

/* The recorded pull request (number), open and on our branch, into pr. */
static int
fg_recorded(struct fg *f, struct gh_pr_seen *pr)
{
	unsigned long long n = (unsigned long long)f->req->number;
	char tail[3 * FORGE_PATH_MAX + 64], what[96];
	long st;

	if (f->req->forge == FORGE_GITHUB)
		snprintf(tail, sizeof(tail), "/repos/%s/pulls/%llu", f->path, n);
	else
		snprintf(tail, sizeof(tail), "/projects/%s/merge_requests/%llu", f->proj, n);
	snprintf(what, sizeof(what), "reading %s%llu", f->pr, n);
	if ((st = fg_call(f, "GET", tail, NULL)) == -1)
		return -1;
	if (st != 200)
		return fg_refused(f, what);
	if (fg_take(f, what, pr, NULL) == -1)
		return -1;
	if (pr->number != f->req->number)
		return forge_fail(f->err, f->errsz, "%s: %s answered with %s%llu", what, f->fname,
		                  f->pr, (unsigned long long)pr->number);
	if (pr->state != GH_PR_OPEN)
		return forge_fail(
		    f->err, f->errsz,
		    "%s: it was %s on %s; agrippa neither reopens it nor opens another", what,
		    pr->state == GH_PR_MERGED ? "merged" : "closed", f->fname);
	if (strcmp(pr->head, f->req->head) != 0)
		return forge_fail(f->err, f->errsz, "%s: it is for the branch %s, not %s", what,
		                  pr->head, f->req->head);
	return 0;
}

/* PATCH (GitHub) or PUT (GitLab) the open pull request pr with the title
 * and body; res from the answer. */
static int
fg_update(struct fg *f, const struct gh_pr_seen *pr, struct gh_pr_res *res)
{
	unsigned long long n = (unsigned long long)pr->number;
	char tail[3 * FORGE_PATH_MAX + 64], what[96];
	struct gh_pr_seen now;
	long st;

	snprintf(what, sizeof(what), "updating %s%llu", f->pr, n);
	if (f->req->forge == FORGE_GITHUB) {
		snprintf(tail, sizeof(tail), "/repos/%s/pulls/%llu", f->path, n);
		st = fg_call(f, "PATCH", tail,
		             json_pack("{s:s, s:s}", "title", f->req->title, "body", f->body));
	} else {
		snprintf(tail, sizeof(tail), "/projects/%s/merge_requests/%llu", f->proj, n);
		st = fg_call(f, "PUT", tail,
		             json_pack("{s:o, s:s}", "title",
		                       fg_gitlab_title(f->req->title, pr->draft), "description",
		                       f->body));
	}
	if (st == -1)
		return -1;
	if (st != 200)
		return fg_refused(f, what);
	if (fg_take(f, what, &now, res) == -1)
		return -1;
	res->opened = 0;
	return 0;
}

/* After "already exists": the open pull request of our head and base. */
static int
fg_find(struct fg *f, struct gh_pr_seen *pr)
{
	char tail[3 * FORGE_PATH_MAX + 4 * 3 * 256], what[640], why[256], *h, *b, label[512];
	long st;
	int found;

	snprintf(label, sizeof(label), "%s:%s", f->owner, f->req->head);
	h = curl_easy_escape(f->easy, f->req->forge == FORGE_GITHUB ? label : f->req->head, 0);
	b = curl_easy_escape(f->easy, f->req->base, 0);
	if (h == NULL || b == NULL) {
		curl_free(h);
		curl_free(b);
		return forge_fail(f->err, f->errsz, "out of memory");
	}
	if (f->req->forge == FORGE_GITHUB)
		snprintf(tail, sizeof(tail), "/repos/%s/pulls?head=%s&base=%s&state=open", f->path,
		         h, b);
	else
		snprintf(
		    tail, sizeof(tail),
		    "/projects/%s/merge_requests?source_branch=%s&target_branch=%s&state=opened",
		    f->proj, h, b);
	curl_free(h);
	curl_free(b);
	snprintf(what, sizeof(what), "finding the open %s of %s into %s", f->noun, f->req->head,
	         f->req->base);
	if ((st = fg_call(f, "GET", tail, NULL)) == -1)
		return -1;
	if (st != 200)
		return fg_refused(f, what);
	found = gh_forge_answer_find(f->req->forge, f->ans, f->anslen, f->host, f->owner,
	                             f->req->head, f->req->base, pr, why, sizeof(why));
	if (found == -1)
		return forge_fail(f->err, f->errsz, "%s: %s's answer is malformed: %s", what,
		                  f->fname, why);
	if (found == 0)
		return forge_fail(f->err, f->errsz, "%s: %s says one exists but lists none", what,
		                  f->fname);
	return 0;
}

/* The forge's words about the last answer include s. */
static int
fg_says(const struct fg *f, const char *s)
{
	char msg[GH_FORGE_MESSAGE_MAX + 1];

	gh_forge_answer_message(f->ans, f->anslen, msg, sizeof(msg));
	return strstr(msg, s) != NULL;
}

static int
fg_github_open(struct fg *f, struct gh_pr_res *res)
{
	const struct gh_pr_req *r = f->req;
	char tail[FORGE_PATH_MAX + 32];
	struct gh_pr_seen pr;
	int draft = r->draft != 0;
	long st;

	snprintf(tail, sizeof(tail), "/repos/%s/pulls", f->path);
	for (;;) {
		st = fg_call(f, "POST", tail,
		             json_pack("{s:s, s:s, s:s, s:s, s:b}", "title", r->title, "head",
		                       r->head, "base", r->base, "body", f->body, "draft", draft));
		if (st == -1)
			return -1;
		if (st == 201) {
			res->opened = 1;
			if (draft != (r->draft != 0))
				snprintf(res->note, sizeof(res->note),
				         "drafts are not supported in this "
				         "repository: opened as a normal pull request");
			return fg_take(f, "opening the pull request", &pr, res);
		}
		if (st != 422)
			break;
		if (fg_says(f, "A pull request already exists"))
			return fg_find(f, &pr) == -1 ? -1 : fg_update(f, &pr, res);
		if (!draft || !fg_says(f, "Draft pull requests are not supported"))
			break;
		draft = 0;
	}
	if (st == 422 && fg_says(f, "No commits between"))
		return forge_fail(
		    f->err, f->errsz,
		    "opening the pull request: nothing to propose: %s has no commit that "
		    "%s lacks (GitHub: No commits between, 422)",
		    r->head, r->base);
	return fg_refused(f, "opening the pull request");
}

static int
fg_gitlab_open(struct fg *f, struct gh_pr_res *res)
{
	const struct gh_pr_req *r = f->req;
	char tail[3 * FORGE_PATH_MAX + 32];
	struct gh_pr_seen pr;
	long st;

	snprintf(tail, sizeof(tail), "/projects/%s/merge_requests", f->proj);
	st = fg_call(f, "POST", tail,
	             json_pack("{s:s, s:s, s:o, s:s}", "source_branch", r->head, "target_branch",
	                       r->base, "title", fg_gitlab_title(r->title, r->draft != 0),
	                       "description", f->body));
	if (st == -1)
		return -1;
	if (st == 201) {
		res->opened = 1;
		return fg_take(f, "opening the merge request", &pr, res);
	}
	if (st == 409)
		return fg_find(f, &pr) == -1 ? -1 : fg_update(f, &pr, res);
	return fg_refused(f, "opening the merge request");
}

/* ---- the call ------------------------------------------------------------ */

static int
fg_header_add(struct fg *f, const char *h)
{
	struct curl_slist *l = curl_slist_append(f->hdrs, h);

	if (l == NULL)
		return -1;
	f->hdrs = l;
	return 0;
}

/* The handle and the headers, the token's among them. */
static int
fg_open(struct fg *f)
{
	size_t n = strlen(f->req->token) + 32;
	char *auth;
	int rv;

	if ((f->easy = curl_easy_init()) == NULL || (auth = sodium_malloc(n)) == NULL)
		return forge_fail(f->err, f->errsz, "out of memory");
	snprintf(auth, n, "Authorization: Bearer %s", f->req->token);
	rv = fg_header_add(f, auth);
	sodium_free(auth); /* wipes it */
	if (rv == -1 || fg_header_add(f, "User-Agent: agrippa/" AGRIPPA_VERSION) == -1 ||
	    fg_header_add(f, "Content-Type: application/json") == -1 ||
	    fg_header_add(f, "Expect:") == -1 ||
	    (f->req->forge == FORGE_GITHUB
	         ? fg_header_add(f, "Accept: application/vnd.github+json") == -1 ||
	               fg_header_add(f, "X-GitHub-Api-Version: 2022-11-28") == -1
	         : fg_header_add(f, "Accept: application/json") == -1))
		return forge_fail(f->err, f->errsz, "out of memory");
	return 0;
}

static void
fg_close(struct fg *f)
{
	struct curl_slist *l;

	for (l = f->hdrs; l != NULL; l = l->next)
		sodium_memzero(l->data, strlen(l->data));
	curl_slist_free_all(f->hdrs);
	if (f->easy != NULL)
		curl_easy_cleanup(f->easy);
	free(f->ans);
	free(f->body);
}

/* A branch name: a ref by the templates' rules (tmpl_ref_problem), and a
 * branch's short name, not a commit id or a full ref. */
static int
fg_branch_check(struct fg *f, const char *what, const char *b)
{
	const char *why;

	if (b == NULL || (why = tmpl_ref_problem(b, strlen(b))) != NULL)
		return forge_fail(f->err, f->errsz, "the %s branch %s", what,
		                  b == NULL ? "is missing" : why);
	if (strncmp(b, "refs/", 5) == 0)
		return forge_fail(f->err, f->errsz,
		                  "the %s branch must be a branch's name, not refs/...", what);
	return 0;
}

/* Everything of req checked, and what the calls need derived from it. */
static int
fg_prepare(struct fg *f)
{
	const struct gh_pr_req *r = f->req;
	char why[256];
	size_t i, n, tl;
	int cut;

	if (r->forge != FORGE_GITHUB && r->forge != FORGE_GITLAB)
		return forge_fail(f->err, f->errsz, "the forge %s opens no pull request",
		                  forge_name(r->forge));
	f->fname = r->forge == FORGE_GITHUB ? "GitHub" : "GitLab";
	f->pr = r->forge == FORGE_GITHUB ? "pull request #" : "merge request !";
	f->noun = r->forge == FORGE_GITHUB ? "pull request" : "merge request";
	if (forge_api_url_check(r->forge, r->api_url != NULL ? r->api_url : "", f->api,
	                        sizeof(f->api), why, sizeof(why)) == -1 ||
	    forge_repo_path(r->forge, r->repo_url != NULL ? r->repo_url : "", f->path,
	                    sizeof(f->path), why, sizeof(why)) == -1 ||
	    forge_url_authority("the repository URL", r->repo_url, FORGE_PATH_MAX + 256, f->host,
	                        sizeof(f->host), why, sizeof(why)) == -1 ||
	    forge_title_check(r->title != NULL ? r->title : "", why, sizeof(why)) == -1)
		return forge_fail(f->err, f->errsz, "%s", why);
	if (fg_branch_check(f, "head", r->head) == -1 || fg_branch_check(f, "base", r->base) == -1)
		return -1;
	if (strcmp(r->head, r->base) == 0)
		return forge_fail(f->err, f->errsz, "the head and base branches are both %s",
		                  r->head);
	tl = r->token != NULL ? strlen(r->token) : 0;
	for (i = 0; i < tl && r->token[i] > 0x20 && r->token[i] < 0x7f; i++)
		;
	if (tl == 0 || tl > FG_TOKEN_MAX || i < tl) /* a CR or LF would make another header */
		return forge_fail(f->err, f->errsz,
		                  "the connection's token must be 1 to %d bytes of printable ASCII",
		                  FG_TOKEN_MAX);
	n = strcspn(f->path, "/");
	memcpy(f->owner, f->path, n);
	f->owner[n] = '\0';
	for (i = n = 0; f->path[i] != '\0'; i++)
		n += (size_t)snprintf(f->proj + n, sizeof(f->proj) - n,
		                      f->path[i] == '/' ? "%%2F" : "%c", f->path[i]);
	if ((f->body = forge_body_fit(r->forge, r->body != NULL ? r->body : "", &cut)) == NULL)
		return forge_fail(f->err, f->errsz, "out of memory");
	return 0;
}

int
gh_forge_pr(const struct gh_pr_req *req, struct gh_pr_res *res, char *err, size_t errsz)
{
	struct fg f;
	int rv;

	memset(&f, 0, sizeof(f));
	memset(res, 0, sizeof(*res));
	f.req = req;
	f.err = err;
	f.errsz = errsz;
	f.deadline_ms = mono_ms() + (uint64_t)GH_FORGE_DEADLINE_S * 1000;
	rv = fg_prepare(&f);
	if (rv == 0)
		rv = fg_open(&f);
	if (rv == 0 && req->number != 0) {
		struct gh_pr_seen pr;

		rv = fg_recorded(&f, &pr) == -1 ? -1 : fg_update(&f, &pr, res);
	} else if (rv == 0) {
		rv = req->forge == FORGE_GITHUB ? fg_github_open(&f, res) : fg_gitlab_open(&f, res);
	}
	fg_close(&f);
	if (rv == -1)
		memset(res, 0, sizeof(*res));
	return rv;
}
