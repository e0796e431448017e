/*
 * Bearer authentication.  "Authorization: Bearer agr_..." is hashed here
 * (SHA-256 of the whole token string, as agrippactl stored it) and only the
 * hash goes to the named operation httpd_auth, which answers with the user
 * when the token exists, is neither revoked nor expired and its user is not
 * disabled (and notes last_used_at).  Every refusal is the same 401, so a
 * client learns nothing about why.  The token is never logged or kept.
 * Answers are cached for a few seconds by the hash (authcache.c), and
 * forgotten as soon as the database says a token, user or membership
 * changed.  Browsers authenticate with a session cookie instead
 * (session.c), looked up the same way by its secret's hash.
 */
#include <sys/queue.h>

#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "common/util.h"
#include "httpd/httpd.h"

#define AUTH_PREFIX "agr_"
#define AUTH_TOKEN_MAX 128 /* base64url characters after the prefix */

static void
auth_refuse(struct hreq *h)
{
	if (h->route->auth == ROUTE_AUTH_OPTIONAL) {
		/* the handler answers for an unauthenticated request itself */
		sodium_memzero(h->authhash, sizeof(h->authhash));
		h->via_session = 0;
		router_continue(h);
		return;
	}
	if (h->req != NULL)
		evhttp_add_header(evhttp_request_get_output_headers(h->req), "WWW-Authenticate",
		                  "Bearer");
	hreq_error(h, 401, "unauthorized", "a valid bearer token is required");
}

int
auth_token_valid(const char *tok)
{
	size_t n;

	if (tok == NULL || strncmp(tok, AUTH_PREFIX, strlen(AUTH_PREFIX)) != 0)
		return 0;
	n = strspn(tok + strlen(AUTH_PREFIX),
	           "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_");
	return n > 0 && n <= AUTH_TOKEN_MAX && tok[strlen(AUTH_PREFIX) + n] == '\0';
}

/* The token in an Authorization header value, or NULL when malformed. */
static const char *
auth_token(const char *hdr)
{
	if (hdr == NULL || strncasecmp(hdr, "Bearer ", 7) != 0)
		return NULL;
	hdr += 7;
	hdr += strspn(hdr, " ");
	return auth_token_valid(hdr) ? hdr : NULL;
}

/* h->user is set: the user's id and roles, then the route. */
static void
auth_accept(struct hreq *h)
{
	json_t *id = json_object_get(h->user, "id");
	unsigned wait;

	h->roles = json_object_get(h->user, "projects");
	if (!json_is_string(id) || !router_is_uuid(json_string_value(id)) ||
	    !json_is_object(h->roles)) {
		log_warnx("httpd_auth answered without a user id or roles");
		hreq_error(h, 500, "internal", "internal error");
		return;
	}
	memcpy(h->uid, json_string_value(id), sizeof(h->uid));
	if (user_limit_take(h->uid, mono_ms(), &wait) == -1) {
		hreq_error_retry(h, 429, wait, "too_many_requests",
		                 "too many requests from this user; retry later");
		return;
	}
	router_continue(h);
}

static void
auth_done(struct hreq *h, const struct ipc_db_result *r)
{
	json_t *rows, *exp;
	int64_t expires_in = -1;

	if (!hreq_db_ok(h, r) || (rows = hreq_db_rows(h, r)) == NULL)
		return;
	if (json_array_size(rows) != 1) {
		json_decref(rows);
		auth_refuse(h);
		return;
	}
	h->user = json_incref(json_array_get(rows, 0));
	json_decref(rows);
	if ((exp = json_object_get(h->user, "expires_in")) != NULL) {
		if (json_is_integer(exp))
			expires_in = json_integer_value(exp) < 0 ? 0 : json_integer_value(exp);
		json_object_del(h->user, "expires_in");
	}
	authcache_put(h->authhash, h->user, h->authgen, expires_in);
	sodium_memzero(h->authhash, sizeof(h->authhash));
	auth_accept(h);
}

static int
auth_state_changing(enum evhttp_cmd_type m)
{
	return m != EVHTTP_REQ_GET && m != EVHTTP_REQ_HEAD && m != EVHTTP_REQ_OPTIONS;
}

/*
 * The session cookie's hash into h->authhash: 0, or -1 with h answered
 * (401 without a good cookie; 403 for a state-changing request without its
 * CSRF token or from another origin, before anything else runs).
 */
static int
auth_session(struct hreq *h)
{
	if (session_hash(h->req, h->authhash) == -1) {
		auth_refuse(h);
		return -1;
	}
	if (auth_state_changing(evhttp_request_get_command(h->req))) {
		if (!session_csrf_ok(h->req)) {
			sodium_memzero(h->authhash, sizeof(h->authhash));
			hreq_error(h, 403, "csrf", "a session's request needs its X-CSRF-Token");
			return -1;
		}
		if (!session_same_origin(h->req, 1)) {
			sodium_memzero(h->authhash, sizeof(h->authhash));
			hreq_error(h, 403, "cross_origin",
			           "this request must come from the dashboard's origin");
			return -1;
		}
	}
	h->via_session = 1;
	return 0;
}

/*
 * A bearer token when the request has an Authorization header (a client
 * that sends one is no browser acting on ambient credentials), else the
 * session cookie.  Tokens and session secrets hash into one cache: they
 * cannot collide, a token starts with agr_ and a secret with ags_.
 */
void
auth_begin(struct hreq *h)
{
	const char *hdr =
	    evhttp_find_header(evhttp_request_get_input_headers(h->req), "Authorization");
	const char *tok = auth_token(hdr);
	struct ipc_wbuf w;
	json_t *user;
	uint64_t id;

	if (hdr == NULL) {
		if (auth_session(h) == -1)
			return;
	} else if (tok == NULL) {
		auth_refuse(h);
		return;
	} else
		crypto_hash_sha256(h->authhash, (const unsigned char *)tok, strlen(tok));
	if ((user = authcache_get(h->authhash)) != NULL) {
		sodium_memzero(h->authhash, sizeof(h->authhash));
		h->user = json_incref(user);
		auth_accept(h);
		return;
	}
	h->authgen = authcache_generation();
	id = hreq_db_begin(&w, h->via_session ? "httpd_session_auth" : "httpd_auth", 1);
	ipc_put_bin(&w, h->authhash, sizeof(h->authhash));
	hreq_db_send(h, &w, id, auth_done);
}
