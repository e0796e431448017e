/* FUZZ_SOURCES: githelper/forge.c tmpl/ref.c */
/*
 * libFuzzer target for what the forge client reads from outside
 * (githelper/forge.c, common/forge.c).  Input: one byte whose low bit picks
 * the forge (GitHub, GitLab), then the bytes of a forge's answer, which are
 * also read as a Retry-After value, an api_url, a clone URL and a body.
 *
 * The contract:
 *  - a pull request accepted from an answer has a number above 0, a link
 *    that is an https URL on the host asked for, a known state, and
 *    NUL-terminated strings inside their buffers; a refused one leaves it
 *    zeroed with a non-empty printable reason;
 *  - a list search finds only an open entry with the head and base asked for
 *    (and, on GitHub, the owner), else leaves it zeroed;
 *  - the forge's message is printable ASCII shorter than its buffer, for a
 *    large buffer and a tiny one;
 *  - Retry-After is -1 or 0..INT32_MAX;
 *  - an accepted api_url is normalised: https://, no query, fragment, user
 *    or trailing slash, and accepted again as itself; an accepted clone URL
 *    gives a path of the forge's shape;
 *  - a fitted body is UTF-8 of at most the forge's limit in characters.
 * Seeds: tests/fuzz/corpus/forge_answer/.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common/forge.h"
#include "githelper/forge.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define HOST "github.com"
#define PRINTABLE                                                                                  \
	" !\"#$%&'()*+,-./"                                                                        \
	"0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~"

/* s is printable ASCII, at most max bytes before its NUL. */
static void
check_printable(const char *s, size_t max)
{
	size_t n = strnlen(s, max + 1);

	if (n > max || strspn(s, PRINTABLE) != n)
		abort();
}

static void
check_terminated(const char *s, size_t sz)
{
	if (memchr(s, '\0', sz) == NULL)
		abort();
}

static void
check_seen(enum forge_kind kind, const struct gh_pr_seen *pr)
{
	char auth[FORGE_API_URL_MAX + 1], err[160];

	check_terminated(pr->url, sizeof(pr->url));
	check_terminated(pr->head, sizeof(pr->head));
	check_terminated(pr->base, sizeof(pr->base));
	check_terminated(pr->owner, sizeof(pr->owner));
	if (pr->number == 0 || pr->number > INT64_MAX || strncmp(pr->url, "https://", 8) != 0 ||
	    (pr->state != GH_PR_OPEN && pr->state != GH_PR_CLOSED && pr->state != GH_PR_MERGED) ||
	    (pr->draft != 0 && pr->draft != 1))
		abort();
	if (forge_url_authority("u", pr->url, GH_FORGE_URL_MAX - 1, auth, sizeof(auth), err,
	                        sizeof(err)) != 0 ||
	    strcmp(auth, HOST) != 0)
		abort();
	if (kind == FORGE_GITLAB && pr->owner[0] != '\0')
		abort();
}

static int
zeroed(const struct gh_pr_seen *pr)
{
	static const struct gh_pr_seen zero;

	return memcmp(pr, &zero, sizeof(zero)) == 0;
}

static void
check_answers(enum forge_kind kind, const char *text, size_t len)
{
	struct gh_pr_seen *pr = malloc(sizeof(*pr));
	char err[256], msg[GH_FORGE_MESSAGE_MAX + 1], tiny[4];
	int rc;

	if (pr == NULL)
		abort();
	err[0] = '\0';
	if (gh_forge_answer_pr(kind, text, len, HOST, pr, err, sizeof(err)) == 0) {
		check_seen(kind, pr);
	} else {
		if (!zeroed(pr) || err[0] == '\0')
			abort();
		check_printable(err, sizeof(err) - 1);
	}
	err[0] = '\0';
	rc = gh_forge_answer_find(kind, text, len, HOST, "octo", "agrippa/run-1", "main", pr, err,
	                          sizeof(err));
	if (rc == 1) {
		check_seen(kind, pr);
		if (pr->state != GH_PR_OPEN || strcmp(pr->head, "agrippa/run-1") != 0 ||
		    strcmp(pr->base, "main") != 0 ||
		    (kind == FORGE_GITHUB && strcasecmp(pr->owner, "octo") != 0))
			abort();
	} else if (rc == 0) {
		if (!zeroed(pr))
			abort();
	} else if (rc != -1 || !zeroed(pr) || err[0] == '\0') {
		abort();
	}
	free(pr);
	gh_forge_answer_message(text, len, msg, sizeof(msg));
	check_printable(msg, sizeof(msg) - 1);
	gh_forge_answer_message(text, len, tiny, sizeof(tiny));
	check_printable(tiny, sizeof(tiny) - 1);
}

static void
check_urls(enum forge_kind kind, const char *s)
{
	char out[FORGE_API_URL_MAX + 1], again[FORGE_API_URL_MAX + 1], path[FORGE_PATH_MAX + 1];
	char err[256];
	size_t n;
	long ra;

	ra = gh_forge_retry_after(s, (time_t)1700000000);
	if (ra < -1 || ra > INT32_MAX)
		abort();
	if (forge_api_url_check(kind, s, out, sizeof(out), err, sizeof(err)) == 0) {
		n = strlen(out);
		if (strncmp(out, "https://", 8) != 0 || strpbrk(out, "?#@ ") != NULL ||
		    out[n - 1] == '/' || n > FORGE_API_URL_MAX)
			abort();
		if (forge_api_url_check(kind, out, again, sizeof(again), err, sizeof(err)) != 0 ||
		    strcmp(out, again) != 0)
			abort();
	} else {
		check_printable(err, sizeof(err) - 1);
	}
	if (forge_repo_path(kind, s, path, sizeof(path), err, sizeof(err)) == 0) {
		const char *p;

		for (n = 1, p = path; (p = strchr(p, '/')) != NULL; p++)
			n++;
		if (path[0] == '/' || strstr(path, "//") != NULL || strstr(path, "..") != NULL ||
		    (kind == FORGE_GITHUB && n != 2) ||
		    (kind == FORGE_GITLAB && (n < 2 || n > FORGE_GITLAB_DEPTH)))
			abort();
	} else {
		check_printable(err, sizeof(err) - 1);
	}
}

static void
check_body(enum forge_kind kind, const char *s)
{
	const unsigned char *p;
	size_t chars = 0;
	char *out;
	int cut;

	if ((out = forge_body_fit(kind, s, &cut)) == NULL)
		abort();
	for (p = (const unsigned char *)out; *p != '\0'; p++)
		chars += (*p & 0xc0) != 0x80;
	if (chars > forge_body_limit(kind) || (cut && strlen(s) <= forge_body_limit(kind)))
		abort();
	free(out);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	enum forge_kind kind;
	char *s;

	if (size == 0)
		return 0;
	kind = (data[0] & 1) ? FORGE_GITLAB : FORGE_GITHUB;
	data++;
	size--;
	check_answers(kind, (const char *)data, size);
	if ((s = malloc(size + 1)) == NULL)
		abort();
	memcpy(s, data, size);
	s[size] = '\0';
	check_urls(kind, s);
	check_body(kind, s);
	free(s);
	return 0;
}
