/*
 * proxy: the model provider calls of every run (see proxy.h).
 *
 * Providers arrive in PROXY_CONF, each with its API key, which lives only
 * here (sodium_malloc'd, inside the header line that carries it) and in the
 * supervisor.  A runner's channel comes in PROXY_CHANNEL with the run it
 * belongs to, so the usage of every call on it is that run's by
 * construction: the runner names its step and attempt, never its run.
 *
 * A call: the neutral request is checked against the provider's model
 * allow-list, turned into the provider's body (wire.c), and its worst cost
 * (every request byte a token, plus max_tokens of output) compared with the
 * runner's limit before anything is sent.  Transport errors, 408, 429, 5xx
 * and answers that cannot be parsed (a stream cut short, a malformed body)
 * are retried up to the provider's "retries" with exponential backoff, a
 * retry-after of the provider's taking precedence; other statuses fail at
 * once.  A call that succeeded is recorded in token_usage (proxy_usage)
 * before the runner hears of it, so spend is in the database whatever the
 * runner does next.
 */
#include <sys/socket.h>
#include <sys/queue.h>

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <event2/event.h>
#include <jansson.h>
#include <limits.h>
#include <netdb.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "privsep/child.h"
#include "proxy/mcphttp.h"
#include "proxy/proxy.h"
#include "proxy/wire.h"

#ifndef MIN
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#endif

struct provider {
	int refs;
	struct ipc_provider c;   /* key pointers are not valid: see auth */
	char *auth;              /* the credential's header line (sodium_malloc), or NULL */
	size_t authsz;
};

struct rchan;

struct call {
	TAILQ_ENTRY(call) entry;
	struct rchan *rc;
	uint64_t id;
	struct provider *pv;
	const struct ipc_model *model;
	char step[65];
	uint32_t attempt;
	char *body;
	size_t bodylen;
	uint64_t worst;
	int tries;
	CURL *easy;
	struct curl_slist *hdrs;
	char url[IPC_URL_MAX + 32];
	char curlerr[CURL_ERROR_SIZE];
	char *resp;              /* a body that is not parsed as a stream */
	size_t resplen;
	struct wire_stream *ws;  /* a 2xx streamed answer, parsed as it comes */
	int stream_bad;
	char stream_err[256];
	long retry_after;        /* seconds, -1 when none */
	struct event *retry_ev;
	uint64_t db_id;          /* the pending proxy_usage */
	struct wire_resp out;
	uint64_t cost;
};

struct rchan {
	TAILQ_ENTRY(rchan) entry;
	struct ipc_chan *ch;
	char run[IPC_UUID_LEN + 1];
	TAILQ_HEAD(, call) calls;
	size_t ncalls;
	/* the conversation of the step attempt its last call was for */
	struct wire_conv *conv;
	int conv_kind;
	char conv_step[65];
	uint32_t conv_attempt;
};

struct sockev {
	struct event *ev;
};

static struct proxy {
	struct child c;
	CURLM *multi;
	struct event *timer;
	struct provider *pv[IPC_PROVIDERS_MAX];
	size_t npv;
	TAILQ_HEAD(, rchan) chans;
	TAILQ_HEAD(, rmcp) mcps;
} px;

/* A remote MCP server's bridge for a run's runner (PROXY_MCP). */
struct rmcp {
	TAILQ_ENTRY(rmcp) entry;
	char run[IPC_UUID_LEN + 1];
	char server[IPC_MCP_NAME_MAX + 1];
	struct mcphttp *h;
};

static void call_start(struct call *k);
static void call_fail(struct call *k, uint32_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- providers ----------------------------------------------------------- */

static void
provider_unref(struct provider *p)
{
	if (p == NULL || --p->refs > 0)
		return;
	if (p->auth != NULL)
		sodium_free(p->auth);
	free(p);
}

/* A provider from the configuration: its key goes straight into its header
 * line, and the copy in the message is wiped. */
static struct provider *
provider_new(struct ipc_provider *ip)
{
	struct provider *p;
	const char *name = ip->kind == WIRE_ANTHROPIC ? "x-api-key: " : "Authorization: Bearer ";

	if ((p = calloc(1, sizeof(*p))) == NULL)
		fatal("calloc");
	p->refs = 1;
	p->c = *ip;
	p->c.key = NULL;
	if (ip->keylen > 0) {
		p->authsz = ip->keylen + 32;
		if ((p->auth = sodium_malloc(p->authsz)) == NULL)
			fatalx("sodium_malloc");
		snprintf(p->auth, p->authsz, "%s%.*s", name, (int)ip->keylen, (const char *)ip->key);
		sodium_memzero((void *)(uintptr_t)ip->key, ip->keylen);
	}
	p->c.keylen = 0;
	return p;
}

static void
proxy_conf(struct ipc_msg *m)
{
	struct ipc_provider *ips;
	size_t n, i;

	if ((ips = calloc(IPC_PROVIDERS_MAX, sizeof(*ips))) == NULL)
		fatal("calloc");
	if (ipc_dec_proxy_conf(m->body, ips, &n) == -1)
		fatalx("a bad provider configuration");
	for (i = 0; i < px.npv; i++)
		provider_unref(px.pv[i]);
	for (i = 0; i < n; i++)
		px.pv[i] = provider_new(&ips[i]);
	px.npv = n;
	free(ips);
	log_info("%zu model provider%s configured", n, n == 1 ? "" : "s");
}

static struct provider *
provider_find(const char *name)
{
	size_t i;

	for (i = 0; i < px.npv; i++)
		if (strcmp(px.pv[i]->c.name, name) == 0)
			return px.pv[i];
	return NULL;
}

static const struct ipc_model *
model_find(const struct provider *p, const char *name)
{
	size_t i;

	for (i = 0; i < p->c.nmodels; i++)
		if (strcmp(p->c.models[i].name, name) == 0)
			return &p->c.models[i];
	return NULL;
}

static struct wire_price
model_price(const struct ipc_model *m)
{
	struct wire_price p = {m->price[0], m->price[1], m->price[2], m->price[3]};

	return p;
}

/* ---- answering the runner ------------------------------------------------ */

static void
call_free(struct call *k)
{
	if (k->easy != NULL) {
		curl_multi_remove_handle(px.multi, k->easy);
		curl_easy_cleanup(k->easy);
	}
	curl_slist_free_all(k->hdrs);
	if (k->retry_ev != NULL)
		event_free(k->retry_ev);
	if (k->db_id != 0)
		child_db_forget(&px.c, k->db_id);
	wire_stream_free(k->ws);
	wire_resp_free(&k->out);
	provider_unref(k->pv);
	free(k->body);
	free(k->resp);
	TAILQ_REMOVE(&k->rc->calls, k, entry);
	k->rc->ncalls--;
	free(k);
}

static void
call_reply(struct call *k, uint32_t code, const char *error, const char *content)
{
	struct ipc_wbuf w;
	const struct wire_usage *u = &k->out.usage;

	ipc_wbuf_begin(&w, IMSG_MODEL_REPLY, k->id, 7);
	ipc_put_u64(&w, code);
	ipc_put_strn(&w, error, strnlen(error, IPC_ERRMSG_MAX));
	/* an absurd worst case (a huge request at a huge price) saturates */
	ipc_put_u64(&w, code == IPC_MODEL_OK ? k->cost : 0);
	ipc_put_u64(&w, MIN(k->worst, IPC_USD_MICROS_MAX));
	ipc_put_array(&w, 4);
	ipc_put_u64(&w, code == IPC_MODEL_OK ? u->input : 0);
	ipc_put_u64(&w, code == IPC_MODEL_OK ? u->output : 0);
	ipc_put_u64(&w, code == IPC_MODEL_OK ? u->cache_read : 0);
	ipc_put_u64(&w, code == IPC_MODEL_OK ? u->cache_write : 0);
	ipc_put_u64(&w, code == IPC_MODEL_OK ? (uint64_t)k->out.stop : 0);
	ipc_put_str(&w, content != NULL ? content : "");
	if (ipc_wbuf_finish(&w, px.c.max_frame) == -1) {
		ipc_wbuf_free(&w);
		call_fail(k, IPC_MODEL_FAILED, "the model's answer is larger than ipc_max_frame");
		return;
	}
	if (ipc_chan_send(k->rc->ch, &w, -1) == -1)
		log_warnx("run %s: cannot answer a model call", k->rc->run);
	ipc_wbuf_free(&w);
	call_free(k);
}

static void
call_fail(struct call *k, uint32_t code, const char *fmt, ...)
{
	char err[IPC_ERRMSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, sizeof(err), fmt, ap);
	va_end(ap);
	log_info("run %s: step %s attempt %u: model call failed: %s", k->rc->run, k->step,
	    k->attempt, err);
	wire_resp_free(&k->out);
	call_reply(k, code, err, NULL);
}

static void
usage_done(struct child *c, const struct ipc_db_result *r, void *arg)
{
	struct call *k = arg;
	char *content;

	k->db_id = 0;
	if (r == NULL || r->code != DB_OK)
		log_warnx("run %s: step %s attempt %u: the usage of a model call (%llu "
		    "micro-dollars) could not be recorded: %.*s", k->rc->run, k->step, k->attempt,
		    (unsigned long long)k->cost, r != NULL ? (int)r->errlen : 4,
		    r != NULL ? r->error : "gone");
	if ((content = json_dumps(k->out.content, JSON_COMPACT)) == NULL)
		fatalx("out of memory");
	call_reply(k, IPC_MODEL_OK, "", content);
	free(content);
}

/* The call succeeded: record its usage for the run, then answer. */
static void
call_succeeded(struct call *k)
{
	struct wire_price price = model_price(k->model);
	const struct wire_usage *u = &k->out.usage;
	struct ipc_wbuf w;
	uint64_t id;

	/* a provider's counts are outside input: an absurd bill saturates */
	k->cost = MIN(wire_cost(&price, u), IPC_USD_MICROS_MAX);
	log_debug("run %s: step %s attempt %u: %s/%s in %llu out %llu cost %llu", k->rc->run,
	    k->step, k->attempt, k->pv->c.name, k->model->name, (unsigned long long)u->input,
	    (unsigned long long)u->output, (unsigned long long)k->cost);
	id = child_db_begin(&px.c, &w, "proxy_usage", 10);
	ipc_put_str(&w, k->rc->run);
	ipc_put_str(&w, k->step);
	ipc_put_u64(&w, k->attempt);
	ipc_put_str(&w, k->pv->c.name);
	ipc_put_str(&w, k->model->name);
	ipc_put_u64(&w, u->input);
	ipc_put_u64(&w, u->output);
	ipc_put_u64(&w, u->cache_read);
	ipc_put_u64(&w, u->cache_write);
	ipc_put_u64(&w, k->cost);
	if (child_db_send(&px.c, &w, id, usage_done, k) == -1)
		fatalx("cannot record a model call's usage");
	k->db_id = id;
}

/* ---- retries ------------------------------------------------------------- */

static void
retry_fire(evutil_socket_t fd, short what, void *arg)
{
	call_start(arg);
}

/* Retry after the provider's retry-after, or the backoff of this try; 0,
 * or -1 when no retry is left. */
static int
call_retry(struct call *k, const char *why)
{
	struct timeval tv;
	uint64_t ms;

	if (k->tries > (int)k->pv->c.retries)
		return -1;
	if (k->retry_after >= 0) {
		ms = (uint64_t)k->retry_after * 1000;
	} else {
		ms = (uint64_t)PROXY_BACKOFF_MS << (k->tries - 1 < 6 ? k->tries - 1 : 6);
		ms += randombytes_uniform((uint32_t)(ms / 4 + 1));
	}
	log_info("run %s: step %s attempt %u: %s; retrying in %llu ms (%d of %u)", k->rc->run,
	    k->step, k->attempt, why, (unsigned long long)ms, k->tries, k->pv->c.retries);
	if (k->retry_ev == NULL && (k->retry_ev = evtimer_new(px.c.base, retry_fire, k)) == NULL)
		fatalx("evtimer_new");
	tv.tv_sec = (time_t)(ms / 1000);
	tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	evtimer_add(k->retry_ev, &tv);
	return 0;
}

/* The transfer is over and did not succeed: retry, or fail with why. */
static void
call_trouble(struct call *k, int retryable, const char *why)
{
	if (retryable && k->retry_after > PROXY_RETRY_AFTER_MAX_S)
		call_fail(k, IPC_MODEL_FAILED, "%s; the provider asks to wait %ld s, over the %d s "
		    "this proxy waits", why, k->retry_after, PROXY_RETRY_AFTER_MAX_S);
	else if (!retryable || call_retry(k, why) == -1)
		call_fail(k, IPC_MODEL_FAILED, "%s%s", why,
		    retryable && k->tries > 1 ? " (after every retry)" : "");
}

/* ---- one transfer -------------------------------------------------------- */

static long
call_status(struct call *k)
{
	long status = 0;

	curl_easy_getinfo(k->easy, CURLINFO_RESPONSE_CODE, &status);
	return status;
}

static size_t
call_write(char *data, size_t size, size_t n, void *arg)
{
	struct call *k = arg;
	long status = call_status(k);
	size_t len = size * n;
	char *p;

	if (k->ws != NULL && status >= 200 && status < 300) {
		if (!k->stream_bad &&
		    wire_stream_feed(k->ws, data, len, k->stream_err, sizeof(k->stream_err)) == -1)
			k->stream_bad = 1;
		return len;
	}
	if (len > WIRE_BODY_MAX - k->resplen)
		return 0; /* CURLE_WRITE_ERROR: far too large */
	if ((p = realloc(k->resp, k->resplen + len + 1)) == NULL)
		fatal("realloc");
	memcpy(p + k->resplen, data, len);
	k->resp = p;
	k->resplen += len;
	k->resp[k->resplen] = '\0';
	return len;
}

/* retry-after (RFC 9110 10.2.3): delay-seconds, the form providers send,
 * or an HTTP date (a day's name first, in any of its three forms), taken
 * as the seconds from now to then (0 when it is past).  Anything else
 * leaves the backoff to apply. */
static size_t
call_header(char *data, size_t size, size_t n, void *arg)
{
	struct call *k = arg;
	size_t len = size * n;
	char buf[64];
	long v;
	char *end;
	time_t when, now;

	if (len > 12 && strncasecmp(data, "retry-after:", 12) == 0 && len - 12 < sizeof(buf)) {
		memcpy(buf, data + 12, len - 12);
		buf[len - 12] = '\0';
		for (end = buf + strlen(buf); end > buf && strchr(" \t\r\n", end[-1]) != NULL; end--)
			end[-1] = '\0';
		errno = 0;
		v = strtol(buf, &end, 10);
		if (*end == '\0' && end != buf && v >= 0 && errno == 0) {
			k->retry_after = v;
		} else if (isalpha((unsigned char)buf[strspn(buf, " \t")]) &&
		    (when = curl_getdate(buf, NULL)) != -1) {
			now = time(NULL);
			k->retry_after = when <= now ? 0 :
			    (when - now > LONG_MAX ? LONG_MAX : (long)(when - now));
		}
	}
	return len;
}

static void
call_setopt(struct call *k)
{
	CURL *e = k->easy;

	curl_easy_setopt(e, CURLOPT_URL, k->url);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L); /* a redirect could carry the key away */
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_POST, 1L);
	curl_easy_setopt(e, CURLOPT_POSTFIELDS, k->body);
	curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)k->bodylen);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, k->hdrs);
	curl_easy_setopt(e, CURLOPT_TIMEOUT, (long)k->pv->c.timeout_s);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, (long)PROXY_CONNECT_TIMEOUT_S);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, call_write);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, k);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, call_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, k);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, k->curlerr);
	curl_easy_setopt(e, CURLOPT_PRIVATE, k);
	curl_easy_setopt(e, CURLOPT_USERAGENT, "agrippad/" AGRIPPA_VERSION);
	curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");
}

static void
call_headers(struct call *k)
{
	struct curl_slist *h = NULL;

	h = curl_slist_append(h, "Content-Type: application/json");
	if (k->pv->c.kind == WIRE_ANTHROPIC)
		h = curl_slist_append(h, "anthropic-version: " PROXY_ANTHROPIC_VERSION);
	if (k->pv->c.stream)
		h = curl_slist_append(h, "Accept: text/event-stream");
	h = curl_slist_append(h, "Expect:");
	if (k->pv->auth != NULL)
		h = curl_slist_append(h, k->pv->auth);
	if (h == NULL)
		fatalx("out of memory");
	k->hdrs = h;
}

/* Start (or restart) the transfer. */
static void
call_start(struct call *k)
{
	k->tries++;
	k->retry_after = -1;
	k->resplen = 0;
	k->stream_bad = 0;
	wire_stream_free(k->ws);
	k->ws = NULL;
	if (k->pv->c.stream && (k->ws = wire_stream_new((enum wire_kind)k->pv->c.kind)) == NULL)
		fatalx("out of memory");
	if (k->easy != NULL) {
		curl_multi_remove_handle(px.multi, k->easy);
		curl_easy_reset(k->easy);
	} else if ((k->easy = curl_easy_init()) == NULL)
		fatalx("curl_easy_init");
	if (k->hdrs == NULL)
		call_headers(k);
	call_setopt(k);
	if (curl_multi_add_handle(px.multi, k->easy) != CURLM_OK)
		fatalx("curl_multi_add_handle");
}

/* What the provider said when it refused, as one line. */
static void
call_http_error(struct call *k, long status)
{
	char text[512];
	int retryable = status == 408 || status == 429 || status >= 500;
	char why[IPC_ERRMSG_MAX];

	wire_error_text(k->resp != NULL ? k->resp : "", k->resplen, text, sizeof(text));
	snprintf(why, sizeof(why), "the provider answered HTTP %ld%s%s", status,
	    text[0] != '\0' ? ": " : "", text);
	call_trouble(k, retryable, why);
}

static void
call_done(struct call *k, CURLcode rc)
{
	long status = call_status(k);
	char err[256], why[IPC_ERRMSG_MAX];
	int ok;

	if (rc != CURLE_OK) {
		if (rc == CURLE_OPERATION_TIMEDOUT)
			snprintf(why, sizeof(why), "the provider did not answer within %u s",
			    k->pv->c.timeout_s);
		else
			snprintf(why, sizeof(why), "the call to the provider failed: %s",
			    k->curlerr[0] != '\0' ? k->curlerr : curl_easy_strerror(rc));
		call_trouble(k, 1, why);
		return;
	}
	if (status < 200 || status >= 300) {
		call_http_error(k, status);
		return;
	}
	err[0] = '\0';
	wire_resp_free(&k->out);
	if (k->ws != NULL)
		ok = !k->stream_bad && wire_stream_finish(k->ws, &k->out, err, sizeof(err)) == 0;
	else
		ok = wire_parse((enum wire_kind)k->pv->c.kind, k->resp != NULL ? k->resp : "",
		    k->resplen, &k->out, err, sizeof(err)) == 0;
	if (!ok) {
		snprintf(why, sizeof(why), "the provider's answer could not be read: %s",
		    k->stream_bad ? k->stream_err : err);
		call_trouble(k, 1, why);
		return;
	}
	call_succeeded(k);
}

static void
multi_check(void)
{
	CURLMsg *msg;
	int left;
	struct call *k;

	while ((msg = curl_multi_info_read(px.multi, &left)) != NULL) {
		if (msg->msg != CURLMSG_DONE)
			continue;
		if (curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&k) != CURLE_OK ||
		    k == NULL)
			fatalx("a transfer without its call");
		curl_multi_remove_handle(px.multi, k->easy);
		call_done(k, msg->data.result);
	}
}

/* ---- libcurl on libevent ------------------------------------------------- */

static void
multi_event(evutil_socket_t fd, short what, void *arg)
{
	int running, action = (what & EV_READ ? CURL_CSELECT_IN : 0) |
	    (what & EV_WRITE ? CURL_CSELECT_OUT : 0);

	curl_multi_socket_action(px.multi, fd, action, &running);
	multi_check();
}

static void
multi_timeout(evutil_socket_t fd, short what, void *arg)
{
	int running;

	curl_multi_socket_action(px.multi, CURL_SOCKET_TIMEOUT, 0, &running);
	multi_check();
}

static int
multi_socket(CURL *e, curl_socket_t s, int what, void *userp, void *socketp)
{
	struct sockev *se = socketp;
	short kind;

	if (what == CURL_POLL_REMOVE) {
		if (se != NULL) {
			event_free(se->ev);
			free(se);
			curl_multi_assign(px.multi, s, NULL);
		}
		return 0;
	}
	kind = (short)(EV_PERSIST | (what & CURL_POLL_IN ? EV_READ : 0) |
	    (what & CURL_POLL_OUT ? EV_WRITE : 0));
	if (se == NULL) {
		if ((se = calloc(1, sizeof(*se))) == NULL)
			fatal("calloc");
		curl_multi_assign(px.multi, s, se);
	} else
		event_free(se->ev);
	if ((se->ev = event_new(px.c.base, s, kind, multi_event, NULL)) == NULL ||
	    event_add(se->ev, NULL) == -1)
		fatalx("event_new");
	return 0;
}

static int
multi_timer(CURLM *m, long ms, void *userp)
{
	struct timeval tv;

	if (ms < 0) {
		evtimer_del(px.timer);
		return 0;
	}
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	evtimer_add(px.timer, &tv);
	return 0;
}

/* ---- runner channels ----------------------------------------------------- */

static void
rchan_free(struct rchan *rc)
{
	struct call *k;

	while ((k = TAILQ_FIRST(&rc->calls)) != NULL)
		call_free(k);
	TAILQ_REMOVE(&px.chans, rc, entry);
	wire_conv_free(rc->conv);
	ipc_chan_free(rc->ch);
	free(rc);
}

/*
 * The provider body of a call: the channel's conversation continued with
 * the request's messages.  "base" in the request says how many messages of
 * the step attempt's conversation earlier calls on this channel sent: 0
 * begins it anew (with its system prompt and tools), any other number must
 * be exactly what this channel holds for that attempt.  So each message
 * crosses IPC and is turned into the provider's text once.  NULL with a
 * reason in err.
 */
static char *
call_body(struct rchan *rc, struct call *k, json_t *req, const struct ipc_model_call *mc,
    char *err, size_t errsz)
{
	json_t *b = json_object_get(req, "base");
	enum wire_kind kind = (enum wire_kind)k->pv->c.kind;
	json_int_t base = json_is_integer(b) ? json_integer_value(b) : -1;

	if (base < 0) {
		snprintf(err, errsz, "base is missing or not a count");
		return NULL;
	}
	json_object_del(req, "base");
	if (base == 0) {
		wire_conv_free(rc->conv);
		if ((rc->conv = wire_conv_new(kind)) == NULL)
			fatalx("out of memory");
		rc->conv_kind = (int)kind;
		snprintf(rc->conv_step, sizeof(rc->conv_step), "%s", mc->step);
		rc->conv_attempt = mc->attempt;
	} else if (rc->conv == NULL || rc->conv_kind != (int)kind ||
	    strcmp(rc->conv_step, mc->step) != 0 || rc->conv_attempt != mc->attempt ||
	    wire_conv_count(rc->conv) != (size_t)base) {
		snprintf(err, errsz, "this channel does not hold the first %lld messages of step "
		    "%s attempt %u", (long long)base, mc->step, mc->attempt);
		return NULL;
	}
	if (wire_conv_add(rc->conv, req, err, errsz) == -1)
		return NULL;
	return wire_conv_body(rc->conv, mc->model, mc->max_tokens,
	    (k->pv->c.stream ? WIRE_STREAM : 0) | (k->pv->c.max_completion ? WIRE_MAX_COMPLETION : 0),
	    err, errsz);
}

/* A MODEL_CALL: checked, priced at its worst, then started. */
static void
model_call(struct rchan *rc, struct ipc_msg *m)
{
	struct ipc_model_call mc;
	struct call *k;
	json_t *req;
	json_error_t jerr;
	struct wire_price price;
	char err[256];

	if (ipc_dec_model_call(m->body, &mc) == -1)
		fatalx("a bad model call"); /* cannot happen: validated */
	if (rc->ncalls >= PROXY_CALLS_MAX) {
		log_warnx("run %s: more than %d model calls at once; closing its channel", rc->run,
		    PROXY_CALLS_MAX);
		rchan_free(rc);
		return;
	}
	if ((k = calloc(1, sizeof(*k))) == NULL)
		fatal("calloc");
	k->rc = rc;
	k->id = m->id;
	memcpy(k->step, mc.step, sizeof(k->step));
	k->attempt = mc.attempt;
	TAILQ_INSERT_TAIL(&rc->calls, k, entry);
	rc->ncalls++;
	if ((k->pv = provider_find(mc.provider)) == NULL) {
		call_fail(k, IPC_MODEL_REFUSED, "no model provider is named %s", mc.provider);
		return;
	}
	k->pv->refs++;
	if ((k->model = model_find(k->pv, mc.model)) == NULL) {
		call_fail(k, IPC_MODEL_REFUSED, "model %s is not in provider %s's models", mc.model,
		    mc.provider);
		return;
	}
	if ((req = json_loadb(mc.request, mc.reqlen, JSON_REJECT_DUPLICATES, &jerr)) == NULL) {
		call_fail(k, IPC_MODEL_REFUSED, "the request is not JSON: %s", jerr.text);
		return;
	}
	k->body = call_body(rc, k, req, &mc, err, sizeof(err));
	json_decref(req);
	if (k->body == NULL) {
		call_fail(k, IPC_MODEL_REFUSED, "the request cannot be sent: %s", err);
		return;
	}
	k->bodylen = strlen(k->body);
	price = model_price(k->model);
	k->worst = wire_worst_cost(&price, k->bodylen, mc.max_tokens);
	if (k->worst > mc.limit) {
		call_fail(k, IPC_MODEL_BUDGET, "the call could cost %llu micro-dollars, more than "
		    "the %llu left", (unsigned long long)k->worst, (unsigned long long)mc.limit);
		return;
	}
	snprintf(k->url, sizeof(k->url), "%s%s", k->pv->c.base_url,
	    wire_path((enum wire_kind)k->pv->c.kind));
	call_start(k);
}

static void
rchan_msg(struct ipc_chan *ch, struct ipc_msg *m, void *arg)
{
	struct rchan *rc = arg;

	if (m->type != IMSG_MODEL_CALL) {
		log_warnx("run %s: unexpected %s; closing its channel", rc->run,
		    ipc_msg_name(m->type));
		rchan_free(rc);
		return;
	}
	model_call(rc, m);
}

static void
rchan_err(struct ipc_chan *ch, const char *reason, void *arg)
{
	struct rchan *rc = arg;

	log_debug("run %s: model channel: %s", rc->run, reason);
	rchan_free(rc);
}

static void
proxy_channel(struct ipc_msg *m)
{
	struct rchan *rc;

	if (m->fd < 0)
		fatalx("a runner channel without its descriptor");
	if ((rc = calloc(1, sizeof(*rc))) == NULL)
		fatal("calloc");
	if (ipc_dec_proxy_channel(m->body, rc->run) == -1)
		fatalx("a bad runner channel");
	TAILQ_INIT(&rc->calls);
	rc->ch = ipc_chan_new(px.c.base, m->fd, ROLE_PROXY, ROLE_RUNNER, px.c.max_frame, rchan_msg,
	    rchan_err, rc);
	if (rc->ch == NULL)
		fatalx("cannot set up a runner channel");
	m->fd = -1;
	TAILQ_INSERT_TAIL(&px.chans, rc, entry);
	log_debug("run %s: model channel open", rc->run);
}

static void
rmcp_done(void *arg, const char *err)
{
	struct rmcp *r = arg;

	if (err != NULL)
		log_info("run %s: mcp server %s: %s", r->run, r->server, err);
	else
		log_debug("run %s: mcp server %s: closed", r->run, r->server);
	TAILQ_REMOVE(&px.mcps, r, entry);
	mcphttp_free(r->h);
	free(r);
}

/*
 * PROXY_MCP: a remote MCP server's channel for a run's runner.  The
 * headers (credentials expanded) and the values to redact go into the
 * bridge's sodium_malloc memory, and their copies in the message are
 * wiped; the bridge speaks Streamable HTTP to the server for the client at
 * the channel's other end, until that end closes.
 */
static void
proxy_mcp(struct ipc_msg *m)
{
	struct mcphttp_secret secrets[IPC_MCP_SECRETS_MAX];
	char *headers[IPC_MCP_HEADERS_MAX];
	struct ipc_proxy_mcp pm;
	struct mcphttp_conf conf;
	struct ipc_cur hc, sc;
	struct rmcp *r;
	const uint8_t *p;
	size_t len, nh = 0, ns = 0, i;
	char err[256];

	if (m->fd < 0 || ipc_dec_proxy_mcp(m->body, &pm) == -1)
		fatalx("a bad PROXY_MCP");
	hc = pm.headers;
	while (ipc_get_bin(&hc, &p, &len, IPC_MCP_HEADER_MAX) == 0) {
		if ((headers[nh] = sodium_malloc(len + 1)) == NULL)
			fatalx("sodium_malloc");
		memcpy(headers[nh], p, len);
		headers[nh++][len] = '\0';
		sodium_memzero((void *)(uintptr_t)p, len);
	}
	sc = pm.secrets;
	while (ipc_get_bin(&sc, &p, &len, IPC_SECRET_MAX) == 0)
		secrets[ns++] = (struct mcphttp_secret){ (const char *)p, len };
	memset(&conf, 0, sizeof(conf));
	conf.call_ms = pm.call_ms;
	conf.secrets = secrets;
	conf.nsecrets = ns;
	if ((r = calloc(1, sizeof(*r))) == NULL)
		fatal("calloc");
	memcpy(r->run, pm.run, sizeof(r->run));
	memcpy(r->server, pm.server, sizeof(r->server));
	r->h = mcphttp_new(px.c.base, m->fd, pm.url, (const char *const *)headers, nh, &conf,
	                   rmcp_done, r, err, sizeof(err));
	m->fd = -1; /* taken, even on failure */
	for (i = 0; i < ns; i++)
		sodium_memzero((void *)(uintptr_t)secrets[i].p, secrets[i].len);
	for (i = 0; i < nh; i++)
		sodium_free(headers[i]);
	if (r->h == NULL) {
		/* the runner's client sees its channel close */
		log_warnx("run %s: mcp server %s: %s", pm.run, pm.server, err);
		free(r);
		return;
	}
	TAILQ_INSERT_TAIL(&px.mcps, r, entry);
	log_debug("run %s: mcp server %s: bridge to %s", r->run, r->server, pm.url);
}

static void
proxy_dispatch_supervisor(struct child *c, struct ipc_msg *m)
{
	switch (m->type) {
	case IMSG_PROXY_MCP:
		proxy_mcp(m);
		return;
	case IMSG_PROXY_CONF:
		proxy_conf(m);
		return;
	case IMSG_PROXY_CHANNEL:
		proxy_channel(m);
		return;
	default:
		fatalx("unexpected %s from the supervisor", ipc_msg_name(m->type));
	}
}

/* Before the sandbox of seccomp: libcurl's and the resolver's one-time
 * set-up (TLS library, name service modules), which may open files or
 * map libraries that the filter would refuse later. */
static void
proxy_warm(void)
{
	struct addrinfo hints, *res = NULL;

	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		fatalx("curl_global_init");
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo("localhost", "443", &hints, &res) == 0)
		freeaddrinfo(res);
}

void
proxy_main(void)
{
	child_bootstrap(&px.c, ROLE_PROXY);
	if (sodium_init() == -1)
		fatalx("sodium_init");
	if ((px.c.base = event_base_new()) == NULL)
		fatalx("event_base_new");
	TAILQ_INIT(&px.chans);
	TAILQ_INIT(&px.mcps);
	proxy_warm();
	if ((px.multi = curl_multi_init()) == NULL ||
	    (px.timer = evtimer_new(px.c.base, multi_timeout, NULL)) == NULL)
		fatalx("curl_multi_init");
	curl_multi_setopt(px.multi, CURLMOPT_SOCKETFUNCTION, multi_socket);
	curl_multi_setopt(px.multi, CURLMOPT_TIMERFUNCTION, multi_timer);
	child_lockdown(&px.c);
	child_run(&px.c, proxy_dispatch_supervisor);
	log_debug("exiting");
	exit(0);
}
