/*
 * Forges: names, API URLs, repository paths, titles and bodies
 * (common/forge.h).
 */
#include <ctype.h>
#include <curl/curl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/forge.h"

static const char *const forge_names[] = {
    [FORGE_NONE] = "none",
    [FORGE_GITHUB] = "github",
    [FORGE_GITLAB] = "gitlab",
};

int
forge_parse(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(forge_names) / sizeof(forge_names[0]); i++)
		if (strcmp(name, forge_names[i]) == 0)
			return (int)i;
	return -1;
}

const char *
forge_name(enum forge_kind kind)
{
	return (size_t)kind < sizeof(forge_names) / sizeof(forge_names[0]) ? forge_names[kind]
	                                                                   : "?";
}

const char *
forge_default_api(enum forge_kind kind)
{
	switch (kind) {
	case FORGE_GITHUB:
		return "https://api.github.com";
	case FORGE_GITLAB:
		return "https://gitlab.com/api/v4";
	default:
		return NULL;
	}
}

int
forge_fail(char *err, size_t errsz, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errsz, fmt, ap);
	va_end(ap);
	return -1;
}

/* ---- URLs ---------------------------------------------------------------- */

/* len bytes at s, all of them in the set chars. */
static int
forge_only(const char *s, size_t len, const char *chars)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (s[i] == '\0' || strchr(chars, s[i]) == NULL)
			return 0;
	return 1;
}

#define FORGE_ALNUM "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

/* An https URL taken apart by curl_url. */
struct forge_url {
	char host[FORGE_API_URL_MAX + 1];
	char port[8];                   /* "" for 443 */
	char path[FORGE_PATH_MAX + 64]; /* as written: "/" at least */
};

/* Copy a part curl_url gave (and free it); -1 when it does not fit. */
static int
forge_take(char *part, char *dst, size_t dstsz)
{
	int rv = strlen(part) < dstsz ? 0 : -1;

	if (rv == 0)
		memcpy(dst, part, strlen(part) + 1);
	curl_free(part);
	return rv;
}

/* Whether curl_url has that part (one it must not have: user, query...). */
static int
forge_has(CURLU *u, CURLUPart what)
{
	char *s = NULL;
	int has = curl_url_get(u, what, &s, 0) == CURLUE_OK;

	curl_free(s);
	return has;
}

/*
 * url (what names it in errors) as https://HOST[:PORT]/PATH: at most max
 * bytes of printable ASCII, no user, password, query or fragment.  0, or -1
 * with the reason.
 */
static int
forge_url_split(const char *what, const char *url, size_t max, struct forge_url *fu, char *err,
                size_t errsz)
{
	CURLU *u;
	char *s = NULL;
	size_t i, n = strlen(url);
	int rv = -1;

	if (n == 0 || n > max)
		return forge_fail(err, errsz, "%s must be 1 to %zu bytes", what, max);
	for (i = 0; i < n; i++)
		if ((unsigned char)url[i] <= 0x20 || (unsigned char)url[i] >= 0x7f)
			return forge_fail(err, errsz, "%s may hold only printable ASCII, no space",
			                  what);
	if (strpbrk(url, "?#") != NULL) /* even an empty query or fragment */
		return forge_fail(err, errsz, "%s must have no query and no fragment", what);
	if (strchr(url, '%') != NULL) /* nothing here needs it; curl would decode a host's */
		return forge_fail(err, errsz, "%s must hold no percent-encoding", what);
	if ((u = curl_url()) == NULL)
		return forge_fail(err, errsz, "out of memory");
	/* curl_url is lenient ("https:/h", "https:///h" are https://h): the
	 * scheme it found must be followed by "://" and the host, as written;
	 * dot segments are kept for the checks to refuse */
	if (curl_url_set(u, CURLUPART_URL, url, CURLU_PATH_AS_IS) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_SCHEME, &s, 0) != CURLUE_OK || strcmp(s, "https") != 0 ||
	    strncmp(url + 5, "://", 3) != 0 || url[8] == '/') {
		forge_fail(err, errsz, "%s must be an https://HOST/... URL", what);
		goto out;
	}
	if (forge_has(u, CURLUPART_USER) || forge_has(u, CURLUPART_PASSWORD) ||
	    forge_has(u, CURLUPART_OPTIONS)) {
		forge_fail(err, errsz, "%s must not hold a user name or a password", what);
		goto out;
	}
	if (forge_has(u, CURLUPART_QUERY) || forge_has(u, CURLUPART_FRAGMENT)) {
		forge_fail(err, errsz, "%s must have no query and no fragment", what);
		goto out;
	}
	curl_free(s);
	s = NULL;
	if (curl_url_get(u, CURLUPART_HOST, &s, 0) != CURLUE_OK || s[0] == '\0') {
		forge_fail(err, errsz, "%s has no host", what);
		goto out;
	}
	if (forge_take(s, fu->host, sizeof(fu->host)) == -1) {
		s = NULL;
		forge_fail(err, errsz, "%s: the host is too long", what);
		goto out;
	}
	s = NULL;
	/* a name or an address as written: curl decodes "%41" in a host */
	n = strlen(fu->host);
	if (fu->host[0] == '[' ? !forge_only(fu->host, n, "[]:.0123456789abcdefABCDEF")
	                       : !forge_only(fu->host, n, FORGE_ALNUM ".-")) {
		forge_fail(err, errsz, "%s: the host must be a name or an address", what);
		goto out;
	}
	for (i = 0; fu->host[i] != '\0'; i++) /* host names know no case */
		fu->host[i] = (char)tolower((unsigned char)fu->host[i]);
	fu->port[0] = '\0';
	if (curl_url_get(u, CURLUPART_PORT, &s, CURLU_NO_DEFAULT_PORT) == CURLUE_OK &&
	    forge_take(s, fu->port, sizeof(fu->port)) == -1) {
		s = NULL;
		forge_fail(err, errsz, "%s: a bad port", what);
		goto out;
	}
	s = NULL;
	if (curl_url_get(u, CURLUPART_PATH, &s, 0) != CURLUE_OK ||
	    forge_take(s, fu->path, sizeof(fu->path)) == -1) {
		s = NULL;
		forge_fail(err, errsz, "%s: the path is too long", what);
		goto out;
	}
	s = NULL;
	rv = 0;
out:
	curl_free(s);
	curl_url_cleanup(u);
	return rv;
}

int
forge_url_authority(const char *what, const char *url, size_t max, char *out, size_t outsz,
                    char *err, size_t errsz)
{
	struct forge_url fu;

	if (forge_url_split(what, url, max, &fu, err, errsz) == -1)
		return -1;
	if (snprintf(out, outsz, "%s%s%s", fu.host, fu.port[0] != '\0' ? ":" : "", fu.port) >=
	    (int)outsz)
		return forge_fail(err, errsz, "%s: the host is too long", what);
	return 0;
}

int
forge_api_url_check(enum forge_kind kind, const char *url, char *out, size_t outsz, char *err,
                    size_t errsz)
{
	struct forge_url fu;
	const char *seg;
	size_t len, n;

	if (kind != FORGE_GITHUB && kind != FORGE_GITLAB)
		return forge_fail(err, errsz, "api_url: the forge %s has no API", forge_name(kind));
	if (forge_url_split("api_url", url, FORGE_API_URL_MAX, &fu, err, errsz) == -1)
		return -1;
	len = strlen(fu.path);
	if (len > 1 && fu.path[len - 1] == '/') /* one trailing slash is dropped */
		fu.path[--len] = '\0';
	for (seg = fu.path + 1; len > 1; seg += n + 1) {
		n = strcspn(seg, "/");
		if (n == 0 || !forge_only(seg, n, FORGE_ALNUM "._~-"))
			return forge_fail(err, errsz,
			                  "api_url: its path may hold only segments of "
			                  "letters, digits, '.', '_', '~' and '-'");
		if ((n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
			return forge_fail(err, errsz,
			                  "api_url: its path must not hold '.' or '..'");
		if (seg[n] == '\0')
			break;
	}
	if (snprintf(out, outsz, "https://%s%s%s%s", fu.host, fu.port[0] != '\0' ? ":" : "",
	             fu.port, len > 1 ? fu.path : "") >= (int)outsz)
		return forge_fail(err, errsz, "api_url is too long");
	return 0;
}

/* The reason one segment of a repository path is refused for kind, or NULL. */
static const char *
forge_segment_problem(enum forge_kind kind, const char *s, size_t n, int owner)
{
	if (n == 0)
		return "has an empty segment";
	if (n > FORGE_SEGMENT_MAX)
		return "has a segment over 100 bytes";
	if (n == 1 && s[0] == '.')
		return "has a '.' segment";
	if (memmem(s, n, "..", 2) != NULL) /* a segment, or in one: never near a ".." */
		return "has a segment holding '..'";
	if (kind == FORGE_GITHUB) {
		if (owner && (!forge_only(s, n, FORGE_ALNUM "_-") || s[0] == '-'))
			return "has an owner that is not letters, digits, '-' and '_'";
		if (!owner && !forge_only(s, n, FORGE_ALNUM "._-"))
			return "has a repository name that is not letters, digits, '.', '-' and "
			       "'_'";
		return NULL;
	}
	if (!forge_only(s, n, FORGE_ALNUM "._-"))
		return "has a segment that is not letters, digits, '.', '-' and '_'";
	if (s[0] == '-' || s[0] == '.' || s[n - 1] == '.')
		return "has a segment that starts with '-' or '.' or ends with '.'";
	return NULL;
}

int
forge_repo_path(enum forge_kind kind, const char *repo_url, char *out, size_t outsz, char *err,
                size_t errsz)
{
	struct forge_url fu;
	const char *why, *seg;
	size_t len, n, nseg = 0;

	if (kind != FORGE_GITHUB && kind != FORGE_GITLAB)
		return forge_fail(err, errsz, "the forge %s names no repository", forge_name(kind));
	if (forge_url_split("the repository URL", repo_url, FORGE_PATH_MAX + 256, &fu, err,
	                    errsz) == -1)
		return -1;
	len = strlen(fu.path);
	if (len > 5 && strcmp(fu.path + len - 4, ".git") == 0)
		len -= 4;
	if (len - 1 > FORGE_PATH_MAX || len - 1 >= outsz)
		return forge_fail(err, errsz, "the repository URL's path is too long");
	for (seg = fu.path + 1; len > 1 && seg <= fu.path + len; seg += n + 1, nseg++) {
		n = strcspn(seg, "/");
		if (seg + n > fu.path + len)
			n = (size_t)(fu.path + len - seg);
		if ((why = forge_segment_problem(kind, seg, n, nseg == 0)) != NULL)
			return forge_fail(err, errsz, "the repository URL's path %s", why);
	}
	if (kind == FORGE_GITHUB && nseg != 2)
		return forge_fail(err, errsz,
		                  "a GitHub repository URL must be "
		                  "https://HOST/OWNER/REPO (its path has %zu segments)",
		                  nseg);
	if (kind == FORGE_GITLAB && (nseg < 2 || nseg > FORGE_GITLAB_DEPTH))
		return forge_fail(err, errsz,
		                  "a GitLab repository URL must be "
		                  "https://HOST/GROUP[/SUBGROUP...]/PROJECT, 2 to %d segments "
		                  "(its path has %zu)",
		                  FORGE_GITLAB_DEPTH, nseg);
	memcpy(out, fu.path + 1, len - 1);
	out[len - 1] = '\0';
	return 0;
}

/* ---- text ---------------------------------------------------------------- */

/*
 * The character at p (len >= 1 bytes left): its length in bytes, with *cp
 * its code point; 0 when the bytes there are not UTF-8 (a stray
 * continuation byte, a form cut short or overlong, a surrogate, beyond
 * U+10FFFF).
 */
static size_t
forge_utf8(const unsigned char *p, size_t len, uint32_t *cp)
{
	static const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
	size_t need, k;
	uint32_t v;

	if (p[0] < 0x80) {
		*cp = p[0];
		return 1;
	}
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		need = 2, v = p[0] & 0x1fu;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		need = 3, v = p[0] & 0x0fu;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		need = 4, v = p[0] & 0x07u;
	else
		return 0;
	if (need > len)
		return 0;
	for (k = 1; k < need; k++) {
		if ((p[k] & 0xc0) != 0x80)
			return 0;
		v = (v << 6) | (p[k] & 0x3fu);
	}
	if (v < least[need] || (v >= 0xd800 && v <= 0xdfff) || v > 0x10ffff)
		return 0;
	*cp = v;
	return need;
}

int
forge_title_check(const char *title, char *err, size_t errsz)
{
	const unsigned char *p = (const unsigned char *)title;
	size_t len = strlen(title), i = 0, chars = 0, k;
	int visible = 0;
	uint32_t cp;

	while (i < len) {
		if ((k = forge_utf8(p + i, len - i, &cp)) == 0)
			return forge_fail(err, errsz, "the title is not UTF-8");
		if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0))
			return forge_fail(err, errsz,
			                  "the title must be one line without control "
			                  "characters");
		visible |= cp != ' ';
		i += k;
		chars++;
	}
	if (!visible)
		return forge_fail(err, errsz, "the title must not be empty");
	if (chars > FORGE_TITLE_MAX)
		return forge_fail(err, errsz,
		                  "the title must be at most %d characters (it has %zu)",
		                  FORGE_TITLE_MAX, chars);
	return 0;
}

size_t
forge_body_limit(enum forge_kind kind)
{
	return kind == FORGE_GITHUB   ? FORGE_GITHUB_BODY_MAX
	       : kind == FORGE_GITLAB ? FORGE_GITLAB_BODY_MAX
	                              : 0;
}

char *
forge_body_fit(enum forge_kind kind, const char *body, int *cut)
{
	static const char repl[] = "\xef\xbf\xbd"; /* U+FFFD */
	const unsigned char *p = (const unsigned char *)body;
	size_t len = strlen(body), limit = forge_body_limit(kind), chars = 0, keep, i, k, n = 0;
	char *o;
	uint32_t cp;

	for (i = 0; i < len; i += k ? k : 1, chars++)
		k = forge_utf8(p + i, len - i, &cp);
	*cut = chars > limit;
	keep = *cut ? limit - (sizeof(FORGE_CUT_MARKER) - 1) : chars;
	if (len > (SIZE_MAX - sizeof(FORGE_CUT_MARKER)) / 3 ||
	    (o = malloc(len * 3 + sizeof(FORGE_CUT_MARKER))) == NULL)
		return NULL;
	for (i = 0; keep > 0; keep--) {
		if ((k = forge_utf8(p + i, len - i, &cp)) == 0) {
			memcpy(o + n, repl, 3);
			n += 3;
			i++;
			continue;
		}
		memcpy(o + n, p + i, k);
		n += k;
		i += k;
	}
	if (*cut) {
		memcpy(o + n, FORGE_CUT_MARKER, sizeof(FORGE_CUT_MARKER) - 1);
		n += sizeof(FORGE_CUT_MARKER) - 1;
	}
	o[n] = '\0';
	return o;
}

int
forge_connection_check(const char *forge, const char *url, const char *api, char *api_out,
                       size_t outsz, const char **field, char *err, size_t errsz)
{
	char path[FORGE_PATH_MAX + 1];
	int kind = FORGE_NONE;

	*field = "forge";
	if (forge != NULL && (kind = forge_parse(forge)) == -1)
		return forge_fail(err, errsz, "the forge must be github, gitlab or none");
	*field = "api_url";
	if (api != NULL && kind == FORGE_NONE)
		return forge_fail(err, errsz, "API URL needs a forge (github or gitlab)");
	if (api != NULL &&
	    forge_api_url_check((enum forge_kind)kind, api, api_out, outsz, err, errsz) == -1)
		return -1;
	*field = "url";
	if (kind != FORGE_NONE && url != NULL &&
	    forge_repo_path((enum forge_kind)kind, url, path, sizeof(path), err, errsz) == -1)
		return -1;
	return 0;
}

const char *
forge_token_user(enum forge_kind kind)
{
	return kind == FORGE_GITLAB ? "oauth2" : "x-access-token";
}
