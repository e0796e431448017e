/*
 * The router's checks that need no evhttp request: path matching, the
 * {id} / {name} segment shapes, the Content-Type, the Allow list, and body
 * decoding with strict fields.  router.c calls them on what evhttp hands it;
 * they live apart so that the unit tests and the fuzz target
 * (tests/fuzz/fuzz_http_body.c) link them without libevent's request
 * machinery or the API handlers the route table names.
 *
 * Paths are matched segment by segment, exactly and without percent-
 * decoding.  A {id} segment must be a canonical UUID and a {name} segment a
 * template name; anything else names nothing, so the path is a 404.
 */
#include <sys/queue.h>

#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "httpd/httpd.h"

int
router_is_uuid(const char *s)
{
	static const char shape[] = "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx";
	size_t i;

	for (i = 0; shape[i] != '\0'; i++) {
		if (s[i] == '\0')
			return 0;
		if (shape[i] == '-' && s[i] != '-')
			return 0;
		if (shape[i] != '-' && strchr("0123456789abcdefABCDEF", s[i]) == NULL)
			return 0;
	}
	return s[i] == '\0';
}

/* A template name: [a-z0-9][a-z0-9-]{0,63}. */
int
router_is_name(const char *s)
{
	size_t n = strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-");

	return n >= 1 && n <= 64 && s[n] == '\0' && s[0] != '-';
}

static int
router_param_ok(const char *pat, size_t plen, const char *val)
{
	if (plen == 4 && strncmp(pat, "{id}", 4) == 0)
		return router_is_uuid(val);
	if (plen == 6 && strncmp(pat, "{name}", 6) == 0)
		return router_is_name(val);
	fatalx("route pattern with an unknown parameter");
}

/*
 * Whether path matches pat.  The parameter segment, if any, goes to param
 * (sz bytes, NUL-terminated; a segment that does not fit matches nothing).
 * param is "" when pat has no parameter; after a failed match it may hold
 * a segment that was checked before the mismatch.  sz 0 matches nothing.
 */
int
router_match(const char *pat, const char *path, char *param, size_t sz)
{
	size_t pl, sl;

	if (sz == 0)
		return 0;
	param[0] = '\0';
	while (*pat != '\0' && *path != '\0') {
		if (*pat++ != '/' || *path++ != '/')
			return 0;
		pl = strcspn(pat, "/");
		sl = strcspn(path, "/");
		if (*pat == '{') {
			if (sl == 0 || sl >= sz)
				return 0;
			memcpy(param, path, sl);
			param[sl] = '\0';
			if (!router_param_ok(pat, pl, param))
				return 0;
		} else if (pl != sl || strncmp(pat, path, sl) != 0)
			return 0;
		pat += pl;
		path += sl;
	}
	return *pat == '\0' && *path == '\0';
}

/*
 * The Allow header's value for methods (EVHTTP_REQ_* bits) into allow (sz
 * bytes, at least 1): "GET, HEAD, POST", ...  A list that does not fit is
 * cut before the method that does not fit.
 */
void
router_allow_list(int methods, char *allow, size_t sz)
{
	static const struct {
		int m;
		const char *name;
	} names[] = {{EVHTTP_REQ_GET, "GET, HEAD"},
	             {EVHTTP_REQ_POST, "POST"},
	             {EVHTTP_REQ_PUT, "PUT"},
	             {EVHTTP_REQ_PATCH, "PATCH"},
	             {EVHTTP_REQ_DELETE, "DELETE"}};
	size_t i, n = 0;
	int w;

	allow[0] = '\0';
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if ((methods & names[i].m) == 0)
			continue;
		w = snprintf(allow + n, sz - n, "%s%s", n > 0 ? ", " : "", names[i].name);
		if (w < 0 || (size_t)w >= sz - n) {
			allow[n] = '\0';
			return;
		}
		n += (size_t)w;
	}
}

/* Copy s into dst for a message: printable ASCII only, at most dstsz - 1. */
static void
router_printable(char *dst, size_t dstsz, const char *s)
{
	size_t i;

	for (i = 0; i + 1 < dstsz && s[i] != '\0'; i++)
		dst[i] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
	dst[i] = '\0';
}

int
router_is_month(const char *s)
{
	if (strlen(s) != 7 || s[4] != '-' || strspn(s, "0123456789") != 4 ||
	    strspn(s + 5, "0123456789") != 2 || s[0] < '2')
		return 0;
	return (s[5] == '0' && s[6] >= '1') || (s[5] == '1' && s[6] <= '2');
}

int
router_uint(const char *s, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	size_t i, n = strspn(s, "0123456789");

	if (n == 0 || n > 19 || s[n] != '\0' || (s[0] == '0' && n > 1))
		return -1;
	for (i = 0; i < n; i++)
		v = v * 10 + (uint64_t)(s[i] - '0');
	if (v > max)
		return -1;
	*out = v;
	return 0;
}

enum api_role
router_role_rank(const char *role)
{
	if (role == NULL)
		return API_ROLE_NONE;
	if (strcmp(role, "viewer") == 0)
		return API_ROLE_VIEWER;
	if (strcmp(role, "member") == 0)
		return API_ROLE_MEMBER;
	if (strcmp(role, "admin") == 0)
		return API_ROLE_ADMIN;
	return API_ROLE_NONE;
}

/* No control characters (UTF-8 above them is fine). */
static int
router_text_ok(const char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return 0;
	return 1;
}

/* Whether name is one of the space-separated words of list. */
static int
router_word_in(const char *name, const char *list)
{
	size_t n = strlen(name), w;

	while (list != NULL && *list != '\0') {
		w = strcspn(list, " ");
		if (w == n && strncmp(list, name, n) == 0)
			return 1;
		list += w;
		list += strspn(list, " ");
	}
	return 0;
}

int
router_query(const char *qs, const char *allowed, struct evkeyvalq *q, char *err, size_t errsz)
{
	struct evkeyval *kv, *o;
	char name[33];

	TAILQ_INIT(q);
	if (qs == NULL || *qs == '\0')
		return 0;
	/* decoding %00 would cut a name or value short without a trace */
	if (strcasestr(qs, "%00") != NULL) {
		snprintf(err, errsz, "the query string contains a NUL byte");
		return -1;
	}
	if (evhttp_parse_query_str(qs, q) == -1) {
		snprintf(err, errsz, "the query string is malformed");
		return -1;
	}
	TAILQ_FOREACH(kv, q, next) {
		router_printable(name, sizeof(name), kv->key);
		if (!router_word_in(kv->key, allowed)) {
			snprintf(err, errsz, "unknown query parameter \"%s\"", name);
			goto fail;
		}
		if (kv->value[0] == '\0') {
			snprintf(err, errsz, "query parameter \"%s\" is empty", name);
			goto fail;
		}
		if (!router_text_ok(kv->value)) {
			snprintf(err, errsz, "query parameter \"%s\" has a control character", name);
			goto fail;
		}
		for (o = TAILQ_FIRST(q); o != kv; o = TAILQ_NEXT(o, next))
			if (strcmp(o->key, kv->key) == 0) {
				snprintf(err, errsz, "query parameter \"%s\" is given twice", name);
				goto fail;
			}
	}
	return 0;
fail:
	evhttp_clear_headers(q);
	return -1;
}

/* Media type application/json (any case), parameters (charset) allowed. */
int
router_is_json(const char *ct)
{
	static const char mt[] = "application/json";

	if (ct == NULL || strncasecmp(ct, mt, sizeof(mt) - 1) != 0)
		return 0;
	ct += sizeof(mt) - 1;
	ct += strspn(ct, " \t");
	return *ct == '\0' || *ct == ';';
}

static void
router_bad_json(struct body_error *e, const char *msg)
{
	e->status = BODY_BAD_JSON;
	e->http = 400;
	e->code = "bad_json";
	snprintf(e->message, sizeof(e->message), "%s", msg);
}

/* A 422 naming the field: "field \"NAME\" what", NAME made printable. */
static int
router_field_error(struct body_error *e, enum body_status st, const char *name, const char *what)
{
	static const char *const codes[] = {
	    [BODY_UNKNOWN_FIELD] = "unknown_field",
	    [BODY_MISSING_FIELD] = "missing_field",
	    [BODY_INVALID_FIELD] = "invalid_field",
	};

	e->status = st;
	e->http = 422;
	e->code = codes[st];
	router_printable(e->field, sizeof(e->field), name);
	snprintf(e->message, sizeof(e->message), "field \"%s\" %s", e->field, what);
	return -1;
}

static const struct body_field *
router_field(const struct body_field *fields, size_t nfields, const char *name)
{
	size_t i;

	for (i = 0; i < nfields; i++)
		if (strcmp(fields[i].name, name) == 0)
			return &fields[i];
	return NULL;
}

/* Members: each known, of its type, the required ones present. */
static int
router_fields(json_t *body, const struct body_field *fields, size_t nfields, struct body_error *e)
{
	const struct body_field *f;
	const char *key;
	json_t *v;
	size_t i;

	json_object_foreach(body, key, v)
	{
		if ((f = router_field(fields, nfields, key)) == NULL)
			return router_field_error(e, BODY_UNKNOWN_FIELD, key, "is unknown");
		if (json_typeof(v) != f->type)
			return router_field_error(e, BODY_INVALID_FIELD, key, "has the wrong type");
	}
	for (i = 0; i < nfields; i++)
		if (fields[i].required && json_object_get(body, fields[i].name) == NULL)
			return router_field_error(e, BODY_MISSING_FIELD, fields[i].name,
			                          "is required");
	return 0;
}

json_t *
router_body_decode(const void *buf, size_t len, const struct body_field *fields, size_t nfields,
                   struct body_error *e)
{
	char text[JSON_ERROR_TEXT_LENGTH];
	json_error_t err;
	json_t *body;

	memset(e, 0, sizeof(*e));
	if (buf == NULL && len == 0)
		buf = "";
	body = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &err);
	if (body == NULL) {
		router_printable(text, sizeof(text), err.text);
		e->status = BODY_BAD_JSON;
		e->http = 400;
		e->code = "bad_json";
		snprintf(e->message, sizeof(e->message), "line %d, column %d: %s", err.line,
		         err.column, text);
		return NULL;
	}
	if (!json_is_object(body)) {
		json_decref(body);
		router_bad_json(e, "the body must be a JSON object");
		return NULL;
	}
	if (router_fields(body, fields, nfields, e) == -1) {
		json_decref(body);
		return NULL;
	}
	return body;
}

int
router_cookie(const char *hdr, const char *name, char *out, size_t sz)
{
	size_t nlen = strlen(name), vlen;
	const char *p = hdr;

	while (*p != '\0') {
		p += strspn(p, " ;");
		vlen = strcspn(p, ";");
		if (vlen > nlen && strncmp(p, name, nlen) == 0 && p[nlen] == '=') {
			while (vlen > nlen + 1 && p[vlen - 1] == ' ')
				vlen--; /* "a=b ; c=d" */
			if (vlen - nlen - 1 >= sz)
				return -1;
			memcpy(out, p + nlen + 1, vlen - nlen - 1);
			out[vlen - nlen - 1] = '\0';
			return 0;
		}
		p += vlen;
	}
	return -1;
}
