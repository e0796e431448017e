/*
 * Forges: where a repository connection opens its pull requests (GitHub,
 * GitLab, or none), and the checks of what names one, shared by the roles
 * that validate a connection (supervisor, httpd, agrippactl) and by the git
 * helper that talks to the forge (githelper/forge.h).  Pure: no I/O, no
 * state; URLs are taken apart with libcurl's URL parser (curl_url), never
 * with string prefixes.
 */
#ifndef AGRIPPA_FORGE_H
#define AGRIPPA_FORGE_H

#include <stddef.h>

enum forge_kind { FORGE_NONE, FORGE_GITHUB, FORGE_GITLAB };

#define FORGE_API_URL_MAX 256         /* an api_url, normalised, without its NUL */
#define FORGE_PATH_MAX 512            /* OWNER/REPO, or a GitLab project's full path */
#define FORGE_SEGMENT_MAX 100         /* one segment of it (GitHub's bound for a repository) */
#define FORGE_GITLAB_DEPTH 21         /* 20 nested groups (GitLab's bound) and the project */
#define FORGE_TITLE_MAX 240           /* characters: "Draft: " and it fit GitLab's 255 */
#define FORGE_GITHUB_BODY_MAX 65536   /* characters (GitHub: "body is too long") */
#define FORGE_GITLAB_BODY_MAX 1048576 /* characters (GitLab: description) */
/* Ends a body that was cut; counted within the forge's limit. */
#define FORGE_CUT_MARKER "\n\n---\n[... cut by agrippa: longer than the forge accepts ...]\n"

/* A one-line reason into err (errsz bytes), for this file and the git
 * helper's forge client alike; returns -1. */
int forge_fail(char *err, size_t errsz, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* "github", "gitlab" or "none" (exactly, lower case): its kind, or -1. */
int forge_parse(const char *name);

/* The name forge_parse reads back ("github", "gitlab", "none"). */
const char *forge_name(enum forge_kind kind);

/* The public service's API: https://api.github.com, https://gitlab.com/api/v4;
 * NULL for FORGE_NONE. */
const char *forge_default_api(enum forge_kind kind);

/*
 * Check an api_url for kind (GitHub or GitLab) and write it normalised to
 * out (outsz bytes, at least FORGE_API_URL_MAX + 1): https:// (as
 * written: curl_url would take "https:/h" and "https:///h" too), a host
 * (letters, digits, '.' and '-', lower-cased, or an IPv6 address in
 * brackets), an optional port (443 dropped), no user or password, no query,
 * no fragment, no percent-encoding (curl would decode a host's);
 * a path of unreserved characters (/api/v3, /api/v4), no "." or ".."
 * segment and no empty one but a trailing slash, which is dropped.  At most
 * FORGE_API_URL_MAX bytes of printable ASCII.  Returns 0, or -1 with a
 * one-line reason naming api_url in err.
 */
int forge_api_url_check(enum forge_kind kind, const char *url, char *out, size_t outsz, char *err,
                        size_t errsz);

/*
 * The forge's name for the repository a connection clones from repo_url
 * (https://HOST[:PORT]/PATH, no user, query or fragment), written to out
 * (outsz bytes, at least FORGE_PATH_MAX + 1) with one trailing ".git"
 * stripped:
 *  - GitHub: exactly OWNER/REPO; OWNER of letters, digits, '-' and '_',
 *    REPO of those and '.', not ".";
 *  - GitLab: GROUP[/SUBGROUP...]/PROJECT, 2 to FORGE_GITLAB_DEPTH segments
 *    of letters, digits, '_', '-' and '.', none starting with '-' or '.'
 *    or ending with '.'.
 * No segment holds ".." (as itself or within).
 * Each segment 1 to FORGE_SEGMENT_MAX bytes; no empty segment, no
 * percent-encoding.  Returns 0, or -1 with a one-line reason in err.
 */
int forge_repo_path(enum forge_kind kind, const char *repo_url, char *out, size_t outsz, char *err,
                    size_t errsz);

/*
 * The authority ("host" or "host:port", the host as curl_url gives it,
 * 443 dropped) of url, an https URL of at most max bytes with neither user,
 * query nor fragment, into out (outsz bytes).  For comparing the links a
 * forge answers with the repository's own host.  Returns 0, or -1 with the
 * reason (naming url as what) in err.
 */
int forge_url_authority(const char *what, const char *url, size_t max, char *out, size_t outsz,
                        char *err, size_t errsz);

/*
 * A pull request's title: 1 to FORGE_TITLE_MAX characters of UTF-8 (no
 * overlong form, no surrogate), no control character, not only spaces.
 * Returns 0, or -1 with the reason in err.
 */
int forge_title_check(const char *title, char *err, size_t errsz);

/* The most characters (code points) kind takes in a body; 0 for none. */
size_t forge_body_limit(enum forge_kind kind);

/*
 * body as kind takes it, newly allocated (the caller frees it): bytes that
 * are not UTF-8 become U+FFFD (JSON carries nothing else); a body of more
 * than forge_body_limit(kind) characters is cut on a character boundary so
 * that it and FORGE_CUT_MARKER after it make exactly the limit.  *cut gets
 * 1 when it was cut.  NULL when out of memory.
 */
char *forge_body_fit(enum forge_kind kind, const char *body, int *cut);

/* The user name that goes with a token over https: GitLab's OAuth and
 * personal tokens take "oauth2", GitHub's "x-access-token" (and any name
 * works with a personal token). */
const char *forge_token_user(enum forge_kind kind);

/*
 * A new repository connection's forge settings, as the API and agrippactl
 * take them: forge (NULL when not given: the database takes it from the
 * URL's host) one of forge_parse's names; api (NULL when not given) only
 * with a forge, checked and normalised into api_out (outsz bytes, at least
 * FORGE_API_URL_MAX + 1); and a forge's connection must name a repository
 * the forge can name (forge_repo_path of url).  Returns 0, or -1 with the
 * reason in err and *field the setting it is about ("forge", "api_url" or
 * "url").
 */
int forge_connection_check(const char *forge, const char *url, const char *api, char *api_out,
                           size_t outsz, const char **field, char *err, size_t errsz);

#endif
