/*
 * Requests to the daemon's API with libcurl: URLs are built with the
 * curl_url API from the checked base URL and paths made of fixed words and
 * checked ids; only http and https, no redirects (the token would follow
 * them), the token only ever in the Authorization header.
 */
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"

#define CLI_CONNECT_MS 10000L
#define CLI_REQUEST_S 120L

static char cli_errbuf[CURL_ERROR_SIZE];

int
cli_base_set(struct cli *c, const char *url)
{
	CURLU *u = curl_url();
	char *scheme = NULL, *user = NULL, *query = NULL, *frag = NULL, *out = NULL;
	int rv = CLI_USAGE;
	size_t n;

	if (u == NULL)
		abort();
	if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK) {
		cli_err("the daemon's URL is not a URL: %s", url);
	} else if (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0) {
		cli_err("the daemon's URL must be http:// or https://, not %s://", scheme);
	} else if (curl_url_get(u, CURLUPART_USER, &user, 0) != CURLUE_NO_USER) {
		cli_err("the daemon's URL must not hold a user or password (the token goes "
		        "in a header)");
	} else if (curl_url_get(u, CURLUPART_QUERY, &query, 0) != CURLUE_NO_QUERY ||
	           curl_url_get(u, CURLUPART_FRAGMENT, &frag, 0) != CURLUE_NO_FRAGMENT) {
		cli_err("the daemon's URL must not have a query or a fragment");
	} else if (curl_url_get(u, CURLUPART_URL, &out, 0) != CURLUE_OK ||
	           (n = strlen(out)) >= sizeof(c->base)) {
		cli_err("the daemon's URL is too long");
	} else {
		while (n > 0 && out[n - 1] == '/')
			n--;
		memcpy(c->base, out, n);
		c->base[n] = '\0';
		rv = CLI_OK;
	}
	curl_free(scheme);
	curl_free(user);
	curl_free(query);
	curl_free(frag);
	curl_free(out);
	curl_url_cleanup(u);
	return rv;
}

CURLU *
cli_url(struct cli *c, const char *path)
{
	CURLU *u = curl_url();
	char *base = NULL, *full = NULL;

	if (u == NULL)
		abort();
	if (curl_url_set(u, CURLUPART_URL, c->base, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_PATH, &base, 0) != CURLUE_OK ||
	    asprintf(&full, "%s%s", strcmp(base, "/") == 0 ? "" : base, path) == -1 ||
	    curl_url_set(u, CURLUPART_PATH, full, 0) != CURLUE_OK) {
		cli_err("cannot make a URL for %s", path);
		curl_url_cleanup(u);
		u = NULL;
	}
	curl_free(base);
	free(full);
	return u;
}

int
cli_url_query(CURLU *u, const char *name, const char *value)
{
	char *q = NULL;
	int rv;

	if (asprintf(&q, "%s=%s", name, value) == -1)
		abort();
	rv = curl_url_set(u, CURLUPART_QUERY, q, CURLU_APPENDQUERY | CURLU_URLENCODE) == CURLUE_OK
	         ? 0
	         : -1;
	free(q);
	return rv;
}

CURL *
cli_handle(struct cli *c, CURLU *u, struct curl_slist **hdrs)
{
	CURL *h = curl_easy_init();
	char *auth = NULL;

	if (h == NULL || asprintf(&auth, "Authorization: Bearer %s", c->token) == -1)
		abort();
	*hdrs = curl_slist_append(NULL, auth);
	sodium_memzero(auth, strlen(auth));
	free(auth);
	if (*hdrs == NULL)
		abort();
	cli_errbuf[0] = '\0';
	curl_easy_setopt(h, CURLOPT_CURLU, u);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, CLI_CONNECT_MS);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "agrippa/" AGRIPPA_VERSION);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cli_errbuf);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, *hdrs);
	return h;
}

/* The Authorization header is wiped before it is freed. */
void
cli_headers_free(struct curl_slist *h)
{
	struct curl_slist *p;

	for (p = h; p != NULL; p = p->next)
		sodium_memzero(p->data, strlen(p->data));
	curl_slist_free_all(h);
}

struct membuf {
	char *data;
	size_t len, max;
	int over;
};

static size_t
membuf_write(char *ptr, size_t size, size_t nmemb, void *arg)
{
	struct membuf *b = arg;
	size_t n = size * nmemb;
	char *p;

	if (n > b->max - b->len) {
		b->over = 1;
		return 0;
	}
	if ((p = realloc(b->data, b->len + n + 1)) == NULL)
		abort();
	b->data = p;
	memcpy(b->data + b->len, ptr, n);
	b->len += n;
	b->data[b->len] = '\0';
	return n;
}

int
cli_conn_error(struct cli *c, CURLcode res)
{
	const char *why = cli_errbuf[0] != '\0' ? cli_errbuf : curl_easy_strerror(res);

	fputs("agrippa: no answer from the daemon at ", stderr);
	cli_cleans(stderr, c->base);
	fputs(": ", stderr);
	cli_cleans(stderr, why);
	fputc('\n', stderr);
	return CLI_CONN;
}

/* One entry of an error's "details": a string, or an object whose
 * param/kind/name and code/message are shown. */
static void
print_detail(json_t *d)
{
	const char *keys[] = {"param", "kind", "name", "code", "message"};
	size_t i;
	int first = 1;

	fputs("  ", stderr);
	if (json_is_string(d))
		cli_cleans(stderr, json_string_value(d));
	for (i = 0; json_is_object(d) && i < sizeof(keys) / sizeof(keys[0]); i++) {
		if (cli_str(d, keys[i]) == NULL)
			continue;
		fputs(first ? "" : ": ", stderr);
		cli_cleans(stderr, cli_str(d, keys[i]));
		first = 0;
	}
	fputc('\n', stderr);
}

int
cli_refused(struct cli *c, long status, json_t *doc)
{
	json_t *e = json_object_get(doc, "error"), *d;
	size_t i;

	if (c->json && json_is_object(doc))
		cli_print_json(c, doc, 0);
	if (!json_is_object(e) || cli_str(e, "code") == NULL) {
		fprintf(stderr, "agrippa: the daemon answered HTTP %ld\n", status);
		return CLI_REFUSED;
	}
	fprintf(stderr, "agrippa: %ld ", status);
	cli_cleans(stderr, cli_str(e, "code"));
	fputs(": ", stderr);
	cli_cleans(stderr, cli_str(e, "message"));
	if (cli_str(e, "field") != NULL) {
		fputs(" (field ", stderr);
		cli_cleans(stderr, cli_str(e, "field"));
		fputs(")", stderr);
	}
	if (status == 401)
		fputs(" (the token is unknown, revoked or expired, or its user is disabled)",
		      stderr);
	fputc('\n', stderr);
	json_array_foreach(json_object_get(e, "details"), i, d) print_detail(d);
	return CLI_REFUSED;
}

int
cli_call(struct cli *c, const char *method, CURLU *u, json_t *body, long *status, json_t **answer)
{
	struct membuf b = {NULL, 0, CLI_ANSWER_MAX, 0};
	struct curl_slist *hdrs;
	CURL *h = cli_handle(c, u, &hdrs);
	char *req = NULL;
	json_t *doc = NULL;
	json_error_t jerr;
	CURLcode res;
	int rv;

	*answer = NULL;
	hdrs = curl_slist_append(hdrs, "Accept: application/json");
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(h, CURLOPT_TIMEOUT, CLI_REQUEST_S);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, membuf_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
	if (strcmp(method, "POST") == 0) {
		if (body != NULL && (req = json_dumps(body, JSON_COMPACT)) == NULL)
			abort();
		hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, req != NULL ? req : "");
	}
	if (hdrs == NULL)
		abort();
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	res = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
	if (b.over) {
		cli_err("the daemon's answer is over %u MiB", CLI_ANSWER_MAX >> 20);
		rv = CLI_CONN;
	} else if (res != CURLE_OK) {
		rv = cli_conn_error(c, res);
	} else {
		if (b.len > 0)
			doc = json_loadb(b.data, b.len, JSON_REJECT_DUPLICATES, &jerr);
		if (*status >= 200 && *status < 300 && !json_is_object(doc)) {
			fputs("agrippa: the answer from ", stderr);
			cli_cleans(stderr, c->base);
			fprintf(stderr, " is not the Agrippa API's (HTTP %ld, %s)\n", *status,
			        b.len == 0 ? "no body" : "not a JSON object");
			rv = CLI_CONN;
		} else if (*status >= 200 && *status < 300) {
			*answer = doc;
			doc = NULL;
			rv = CLI_OK;
		} else if (*status == 404 && c->quiet_404) {
			rv = CLI_REFUSED;
		} else {
			rv = cli_refused(c, *status, doc);
		}
	}
	json_decref(doc);
	free(req);
	free(b.data);
	cli_headers_free(hdrs);
	curl_easy_cleanup(h);
	return rv;
}

void
cli_print_json(struct cli *c, json_t *doc, int compact)
{
	size_t flags = compact ? JSON_COMPACT : JSON_INDENT(2);

	/* jansson escapes C0 controls; on a terminal, C1 controls and bidi
	 * overrides too (every non-ASCII character, as \uXXXX). */
	if (c->tty)
		flags |= JSON_ENSURE_ASCII;
	json_dumpf(doc, stdout, flags);
	putchar('\n');
}

/* The names of the user's projects, for a message. */
static void
print_project_names(json_t *list)
{
	json_t *p;
	size_t i;

	json_array_foreach(list, i, p)
	{
		fputs(i == 0 ? "" : ", ", stderr);
		cli_cleans(stderr, cli_str(p, "name"));
	}
	fputc('\n', stderr);
}

int
cli_project(struct cli *c)
{
	json_t *doc, *list, *p, *found = NULL;
	CURLU *u;
	long status;
	size_t i;
	int rv;

	if (c->project != NULL && cli_is_uuid(c->project)) {
		memcpy(c->project_id, c->project, 37);
		return CLI_OK;
	}
	if ((u = cli_url(c, "/v1/projects")) == NULL)
		return CLI_USAGE;
	rv = cli_call(c, "GET", u, NULL, &status, &doc);
	curl_url_cleanup(u);
	if (rv != CLI_OK)
		return rv;
	list = json_object_get(doc, "projects");
	json_array_foreach(list, i, p) if (c->project == NULL
	                                       ? json_array_size(list) == 1
	                                       : cli_str(p, "name") != NULL &&
	                                             strcmp(cli_str(p, "name"), c->project) == 0)
	    found = p;
	if (found == NULL || !cli_is_uuid(cli_str(found, "id") ? cli_str(found, "id") : "")) {
		if (c->project != NULL) {
			fputs("agrippa: you are a member of no project named ", stderr);
			cli_cleans(stderr, c->project);
			rv = CLI_REFUSED;
		} else {
			fputs("agrippa: choose a project with -p", stderr);
			rv = CLI_USAGE;
		}
		fputs(json_array_size(list) == 0 ? " (you are a member of none)\n" : "; yours: ",
		      stderr);
		if (json_array_size(list) > 0)
			print_project_names(list);
	} else {
		memcpy(c->project_id, cli_str(found, "id"), 37);
	}
	json_decref(doc);
	return rv;
}
