/*
 * Browser sessions (docs/api.md, "Sessions").  A browser trades an API
 * token once (POST /v1/session) for a session cookie, HttpOnly so that no
 * script of the page can read it, SameSite=Strict so that no other site's
 * page sends it, and Secure (with the __Host- prefix) when public_url says
 * the daemon is served over https.  The session secret is 32 random bytes;
 * only its SHA-256 goes to the database, as for tokens (auth.c caches its
 * lookups under that hash too, and the auth cache's flush covers sessions).
 *
 * CSRF: the token the page sends in X-CSRF-Token is BLAKE2b keyed with the
 * session secret, so it is bound to that session, needs no storage, and
 * gives nothing of the secret away.  With the cookie, every state-changing
 * request needs it, and a same-origin Origin (or, without Origin,
 * Sec-Fetch-Site: same-origin); else 403 before anything runs.  A request
 * with a bearer token is no browser's ambient credential and needs neither.
 */
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"
#include "httpd/httpd.h"

#define SESSION_PREFIX "ags_"
#define SESSION_RAW 32
#define SESSION_B64 (sizeof(SESSION_PREFIX) - 1 + 43) /* 43: 32 bytes, base64url unpadded */
#define CSRF_B64 43
#define CSRF_CONTEXT "agrippa csrf token"

static char public_url[IPC_PUBLIC_URL_MAX + 1]; /* "" or the configured origin */
static uint32_t lifetime = 43200;

void
session_configure(const char *url, uint32_t secs)
{
	snprintf(public_url, sizeof(public_url), "%s", url);
	lifetime = secs;
}

static int
session_secure(void)
{
	return strncmp(public_url, "https://", 8) == 0;
}

static const char *
session_cookie_name(void)
{
	return session_secure() ? "__Host-agrippa_session" : "agrippa_session";
}

/*
 * The raw session secret from the request's cookie into raw; 0, or -1 when
 * there is no cookie of ours or it is malformed.
 */
static int
session_secret(struct evhttp_request *req, unsigned char raw[SESSION_RAW])
{
	const char *hdr = evhttp_find_header(evhttp_request_get_input_headers(req), "Cookie");
	char val[SESSION_B64 + 2];
	size_t len;

	if (hdr == NULL || router_cookie(hdr, session_cookie_name(), val, sizeof(val)) == -1 ||
	    strlen(val) != SESSION_B64 || strncmp(val, SESSION_PREFIX, 4) != 0)
		return -1;
	if (sodium_base642bin(raw, SESSION_RAW, val + 4, SESSION_B64 - 4, NULL, &len, NULL,
	                      sodium_base64_VARIANT_URLSAFE_NO_PADDING) != 0 ||
	    len != SESSION_RAW) {
		sodium_memzero(raw, SESSION_RAW);
		return -1;
	}
	return 0;
}

/* The CSRF token of a session, base64url, NUL-terminated in out. */
static void
session_csrf(const unsigned char raw[SESSION_RAW], char out[CSRF_B64 + 1])
{
	unsigned char mac[32];

	crypto_generichash(mac, sizeof(mac), (const unsigned char *)CSRF_CONTEXT,
	                   strlen(CSRF_CONTEXT), raw, SESSION_RAW);
	sodium_bin2base64(out, CSRF_B64 + 1, mac, sizeof(mac),
	                  sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	sodium_memzero(mac, sizeof(mac));
}

int
session_hash(struct evhttp_request *req, unsigned char hash[AUTHCACHE_HASH_LEN])
{
	unsigned char raw[SESSION_RAW];

	if (session_secret(req, raw) == -1)
		return -1;
	crypto_hash_sha256(hash, raw, sizeof(raw));
	sodium_memzero(raw, sizeof(raw));
	return 0;
}

/* Whether Origin is ours: public_url when set, else http://Host. */
static int
session_origin_ok(struct evkeyvalq *in, const char *origin)
{
	const char *host = evhttp_find_header(in, "Host");
	char want[IPC_PUBLIC_URL_MAX + 16];

	if (public_url[0] != '\0')
		return strcasecmp(origin, public_url) == 0;
	if (host == NULL || strlen(host) > 255)
		return 0;
	snprintf(want, sizeof(want), "http://%s", host);
	return strcasecmp(origin, want) == 0;
}

int
session_same_origin(struct evhttp_request *req, int strict)
{
	struct evkeyvalq *in = evhttp_request_get_input_headers(req);
	const char *origin = evhttp_find_header(in, "Origin");
	const char *site = evhttp_find_header(in, "Sec-Fetch-Site");

	if (site != NULL && strcmp(site, "same-origin") != 0 &&
	    (strict || strcmp(site, "none") != 0))
		return 0;
	if (origin != NULL)
		return session_origin_ok(in, origin);
	return !strict || site != NULL;
}

int
session_csrf_ok(struct evhttp_request *req)
{
	const char *got = evhttp_find_header(evhttp_request_get_input_headers(req), "X-CSRF-Token");
	unsigned char raw[SESSION_RAW];
	char want[CSRF_B64 + 1];
	int ok;

	if (got == NULL || strlen(got) != CSRF_B64 || session_secret(req, raw) == -1)
		return 0;
	session_csrf(raw, want);
	sodium_memzero(raw, sizeof(raw));
	ok = sodium_memcmp(got, want, CSRF_B64) == 0;
	sodium_memzero(want, sizeof(want));
	return ok;
}

/* Set-Cookie for value ("" clears it) living max_age seconds. */
static void
session_set_cookie(struct hreq *h, const char *value, long long max_age)
{
	char c[256];

	if (h->req == NULL)
		return;
	snprintf(c, sizeof(c), "%s=%s; Path=/; Max-Age=%lld; HttpOnly; SameSite=Strict%s",
	         session_cookie_name(), value, max_age, session_secure() ? "; Secure" : "");
	evhttp_add_header(evhttp_request_get_output_headers(h->req), "Set-Cookie", c);
	sodium_memzero(c, sizeof(c));
}

/* ---- POST /v1/session ------------------------------------------------------ */

static void
session_too_many(struct hreq *h)
{
	hreq_error_retry(h, 429, h->retry_after, "too_many_logins",
	                 "too many failed logins; retry later");
}

/* The refusal's audit row is written (or the database failed: the answer
 * is the same). */
static void
session_limited_done(struct hreq *h, const struct ipc_db_result *r)
{
	session_too_many(h);
}

/* Refused by the login limit: 429; a bucket's refusals are audited
 * (session.rate_limited) at most once a minute, the others only answered,
 * so that a flood costs the database next to nothing. */
static void
session_limited(struct hreq *h, const struct login_refusal *why)
{
	struct ipc_wbuf w;
	uint64_t id;

	h->retry_after = why->retry_after;
	log_info("login limit (%s) reached by %s: retry after %u s", why->scope,
	         h->remote[0] != '\0' ? h->remote : "?", why->retry_after);
	if (!why->first) {
		session_too_many(h);
		return;
	}
	id = hreq_db_begin(&w, "httpd_login_limited", 3);
	ipc_put_str(&w, why->scope);
	ipc_put_str(&w, h->remote);
	ipc_put_u64(&w, why->retry_after);
	hreq_db_send(h, &w, id, session_limited_done);
}

static void
session_create_done(struct hreq *h, const struct ipc_db_result *r)
{
	json_t *rows, *s;
	char cookie[SESSION_B64 + 1], csrf[CSRF_B64 + 1];
	json_int_t expires;

	sodium_memzero(h->authhash, sizeof(h->authhash));
	if (!hreq_db_ok(h, r) || (rows = hreq_db_rows(h, r)) == NULL) {
		/* not a failed login: the database did not answer */
		login_limit_refund(h->remote, mono_ms());
		sodium_memzero(h->sesskey, sizeof(h->sesskey));
		return;
	}
	s = json_array_get(rows, 0);
	if (json_array_size(rows) != 1 || !json_is_integer(json_object_get(s, "expires_in"))) {
		json_decref(rows);
		sodium_memzero(h->sesskey, sizeof(h->sesskey));
		hreq_error(h, 401, "unauthorized", "a valid token is required");
		return;
	}
	login_limit_refund(h->remote, mono_ms());
	expires = json_integer_value(json_object_get(s, "expires_in"));
	memcpy(cookie, SESSION_PREFIX, 4);
	sodium_bin2base64(cookie + 4, sizeof(cookie) - 4, h->sesskey, SESSION_RAW,
	                  sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	session_csrf(h->sesskey, csrf);
	sodium_memzero(h->sesskey, sizeof(h->sesskey));
	session_set_cookie(h, cookie, expires < 0 ? 0 : (long long)expires);
	sodium_memzero(cookie, sizeof(cookie));
	hreq_reply(h, 200, json_pack("{s:s,s:O,s:I}", "csrf_token", csrf, "user",
	                             json_object_get(s, "user"), "expires_in", expires));
	sodium_memzero(csrf, sizeof(csrf));
	json_decref(rows);
}

void
api_session_create(struct hreq *h)
{
	const char *tok = json_string_value(json_object_get(h->body, "token"));
	unsigned char shash[AUTHCACHE_HASH_LEN];
	struct login_refusal why;
	struct ipc_wbuf w;
	uint64_t id;

	if (!session_same_origin(h->req, 0)) {
		hreq_error(h, 403, "cross_origin", "this request must come from the dashboard's origin");
		return;
	}
	/* before the token is looked at: a limited client learns nothing of it */
	if (login_limit_take(h->remote, mono_ms(), &why) == -1) {
		session_limited(h, &why);
		return;
	}
	if (!auth_token_valid(tok)) {
		hreq_error(h, 401, "unauthorized", "a valid token is required");
		return;
	}
	crypto_hash_sha256(h->authhash, (const unsigned char *)tok, strlen(tok));
	randombytes_buf(h->sesskey, SESSION_RAW);
	crypto_hash_sha256(shash, h->sesskey, SESSION_RAW);
	id = hreq_db_begin(&w, "httpd_session_create", 4);
	ipc_put_bin(&w, h->authhash, sizeof(h->authhash));
	ipc_put_bin(&w, shash, sizeof(shash));
	ipc_put_u64(&w, lifetime);
	ipc_put_str(&w, h->remote);
	sodium_memzero(shash, sizeof(shash));
	hreq_db_send(h, &w, id, session_create_done);
}

/* ---- GET and DELETE /v1/session -------------------------------------------- */

void
api_session_get(struct hreq *h)
{
	unsigned char raw[SESSION_RAW];
	char csrf[CSRF_B64 + 1];

	/* a page asks before it knows whether it is signed in: a 200 either
	 * way, so that a first visit logs no failed request */
	if (!h->via_session || h->user == NULL || session_secret(h->req, raw) == -1) {
		hreq_reply(h, 200, json_pack("{s:b}", "session", 0));
		return;
	}
	session_csrf(raw, csrf);
	sodium_memzero(raw, sizeof(raw));
	hreq_reply(h, 200, json_pack("{s:b,s:s,s:O}", "session", 1, "csrf_token", csrf, "user",
	                             json_object_get(h->user, "name")));
	sodium_memzero(csrf, sizeof(csrf));
}

static void
session_end_done(struct hreq *h, const struct ipc_db_result *r)
{
	json_t *rows;

	if (!hreq_db_ok(h, r) || (rows = hreq_db_rows(h, r)) == NULL)
		return;
	session_set_cookie(h, "", 0);
	hreq_reply(h, 200, json_incref(json_array_get(rows, 0)));
	json_decref(rows);
}

void
api_session_end(struct hreq *h)
{
	unsigned char hash[AUTHCACHE_HASH_LEN];
	struct ipc_wbuf w;
	uint64_t id;

	if (!h->via_session || session_hash(h->req, hash) == -1) {
		hreq_error(h, 404, "not_found", "this request has no session cookie");
		return;
	}
	id = api_call_begin(h, &w, "httpd_session_end", 0, 2);
	ipc_put_bin(&w, hash, sizeof(hash));
	ipc_put_str(&w, h->remote);
	sodium_memzero(hash, sizeof(hash));
	hreq_db_send(h, &w, id, session_end_done);
}
