/* FUZZ_SOURCES: httpd/http_check.c */
/*
 * libFuzzer target for the router's checks of outside input
 * (httpd/http_check.c).  Input: one byte n, then a path of n bytes (fewer
 * when the input is shorter), then the rest as a request body.
 *
 * The contract:
 *  - a body decodes to a JSON object whose members are all in the field
 *    table, each of its type, the required ones present; or it is refused
 *    with one of bad_json / unknown_field / missing_field / invalid_field,
 *    the matching HTTP status and a non-empty printable message;
 *  - a path matches a pattern only as the pattern with its {id} or {name}
 *    segment replaced by a UUID or a template name, and the parameter is
 *    NUL-terminated inside its buffer (heap buffers, so ASan sees a byte
 *    written past them);
 *  - an accepted Content-Type starts with application/json;
 *  - the path bytes as a query string: accepted only when every name is an
 *    allowed one, none twice, no value empty; refused with a printable
 *    message and nothing left to free;
 *  - the path as an integer: accepted only as plain decimal digits whose
 *    value is the one strtoull reads and at most the maximum; as a month
 *    only as YYYY-MM.
 * Seeds: tests/fuzz/corpus/http_body/.
 */
#include <sys/queue.h>

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "httpd/httpd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The real validate route's fields, and a table with every other shape. */
static const struct body_field validate_fields[] = {
    {"source", JSON_STRING, 1},
};
static const struct body_field wide_fields[] = {
    {"s", JSON_STRING, 0}, {"n", JSON_INTEGER, 1}, {"r", JSON_REAL, 0},  {"o", JSON_OBJECT, 0},
    {"a", JSON_ARRAY, 0},  {"t", JSON_TRUE, 0},    {"f", JSON_FALSE, 0}, {"z", JSON_NULL, 0},
};

/* The shapes of router.c's patterns, and a few it does not have yet. */
static const char *const patterns[] = {
    "/healthz",
    "/v1/me",
    "/v1/projects/{id}",
    "/v1/projects/{id}/members",
    "/v1/templates/{name}",
    "/v1/templates/validate",
    "/{name}",
    "/{id}/x",
};

static void
check_printable(const char *s, size_t max)
{
	size_t i;

	for (i = 0; s[i] != '\0'; i++)
		if (i >= max || s[i] < 0x20 || s[i] >= 0x7f)
			abort();
}

static void
check_body(const uint8_t *b, size_t len, const struct body_field *f, size_t nf)
{
	struct body_error e;
	const char *key;
	json_t *o, *v;
	size_t i, j;

	o = router_body_decode(len == 0 ? NULL : b, len, f, nf, &e);
	if (o != NULL) {
		if (!json_is_object(o) || e.status != BODY_OK)
			abort();
		json_object_foreach(o, key, v)
		{
			for (j = 0; j < nf && strcmp(f[j].name, key) != 0; j++)
				;
			if (j == nf || json_typeof(v) != f[j].type)
				abort();
		}
		for (i = 0; i < nf; i++)
			if (f[i].required && json_object_get(o, f[i].name) == NULL)
				abort();
		json_decref(o);
		return;
	}
	if (e.code == NULL || e.message[0] == '\0')
		abort();
	check_printable(e.message, sizeof(e.message) - 1);
	check_printable(e.field, 64);
	switch (e.status) {
	case BODY_BAD_JSON:
		if (e.http != 400 || strcmp(e.code, "bad_json") != 0 || e.field[0] != '\0')
			abort();
		break;
	case BODY_UNKNOWN_FIELD:
		if (e.http != 422 || strcmp(e.code, "unknown_field") != 0)
			abort();
		break;
	case BODY_MISSING_FIELD:
		if (e.http != 422 || strcmp(e.code, "missing_field") != 0 || e.field[0] == '\0')
			abort();
		break;
	case BODY_INVALID_FIELD:
		if (e.http != 422 || strcmp(e.code, "invalid_field") != 0 || e.field[0] == '\0')
			abort();
		break;
	default:
		abort();
	}
}

/* pat with its {...} segment (if any) replaced by param equals path. */
static void
check_match(const char *pat, const char *path, const char *param)
{
	const char *open = strchr(pat, '{'), *close;
	size_t pre, plen = strlen(param);

	if (open == NULL) {
		if (param[0] != '\0' || strcmp(pat, path) != 0)
			abort();
		return;
	}
	close = strchr(open, '}');
	pre = (size_t)(open - pat);
	if (strncmp(open, "{id}", 4) == 0 ? !router_is_uuid(param) : !router_is_name(param))
		abort();
	if (strncmp(path, pat, pre) != 0 || strncmp(path + pre, param, plen) != 0 ||
	    strcmp(path + pre + plen, close + 1) != 0)
		abort();
}

static void
check_path(const char *path)
{
	static const size_t sizes[] = {HTTPD_PARAM_MAX + 1, HTTPD_UUID_LEN + 1, 9, 1};
	char *param;
	size_t i, k;

	for (i = 0; i < sizeof(patterns) / sizeof(patterns[0]); i++) {
		for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
			if ((param = malloc(sizes[k])) == NULL)
				abort();
			if (router_match(patterns[i], path, param, sizes[k])) {
				if (memchr(param, '\0', sizes[k]) == NULL)
					abort();
				check_match(patterns[i], path, param);
			}
			free(param);
		}
	}
	if (router_is_uuid(path) && strlen(path) != HTTPD_UUID_LEN)
		abort();
	if (router_is_name(path) && (strlen(path) > 64 || path[0] == '-'))
		abort();
	if (router_is_json(path) && strncasecmp(path, "application/json", 16) != 0)
		abort();
}

static void
check_query(const char *qs)
{
	static const char *const names[] = {"after", "limit", "status"};
	struct evkeyvalq q;
	struct evkeyval *kv, *o;
	char err[160];
	uint64_t v;
	size_t i;

	if (router_query(qs, "after limit status", &q, err, sizeof(err)) == -1) {
		if (!TAILQ_EMPTY(&q) || err[0] == '\0')
			abort();
		check_printable(err, sizeof(err) - 1);
	} else {
		TAILQ_FOREACH(kv, &q, next) {
			for (i = 0; i < 3 && strcmp(kv->key, names[i]) != 0; i++)
				;
			if (i == 3 || kv->value[0] == '\0')
				abort();
			for (o = TAILQ_FIRST(&q); o != kv; o = TAILQ_NEXT(o, next))
				if (strcmp(o->key, kv->key) == 0)
					abort();
		}
		evhttp_clear_headers(&q);
	}
	if (router_uint(qs, 1000, &v) == 0) {
		if (v > 1000 || strspn(qs, "0123456789") != strlen(qs) ||
		    strtoull(qs, NULL, 10) != v || (qs[0] == '0' && qs[1] != '\0'))
			abort();
	}
	if (router_is_month(qs) && (strlen(qs) != 7 || qs[4] != '-'))
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[256];
	size_t n;

	if (size == 0)
		return 0;
	n = data[0];
	if (n > size - 1)
		n = size - 1;
	memcpy(path, data + 1, n);
	path[n] = '\0';
	check_path(path);
	check_query(path);
	check_body(data + 1 + n, size - 1 - n, validate_fields, 1);
	check_body(data + 1 + n, size - 1 - n, wide_fields,
	           sizeof(wide_fields) / sizeof(wide_fields[0]));
	return 0;
}
