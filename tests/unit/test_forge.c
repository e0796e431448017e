/*
 * Unit tests for the forges' pure parts: names, api_url and repository URL
 * checks, titles and bodies (common/forge.c), and the git helper's readers
 * of the forges' answers and of Retry-After (githelper/forge.c), without a
 * network.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "common/forge.h"
#include "githelper/forge.h"

/* Characters (code points) of valid UTF-8 s. */
static size_t
chars(const char *s)
{
	size_t n = 0;

	for (; *s != '\0'; s++)
		n += ((unsigned char)*s & 0xc0) != 0x80;
	return n;
}

/* s (len bytes) has no byte of 0x80 and up that is not part of valid
 * UTF-8: a rough check, enough for bodies made of known pieces. */
static int
utf8_ok(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i, k, need;

	for (i = 0; p[i] != '\0'; i += need) {
		need = p[i] < 0x80             ? 1
		       : (p[i] & 0xe0) == 0xc0 ? 2
		       : (p[i] & 0xf0) == 0xe0 ? 3
		       : (p[i] & 0xf8) == 0xf0 ? 4
		                               : 0;
		if (need == 0)
			return 0;
		for (k = 1; k < need; k++)
			if ((p[i + k] & 0xc0) != 0x80)
				return 0;
	}
	return 1;
}

static void
t_names(void **state)
{
	assert_int_equal(forge_parse("github"), FORGE_GITHUB);
	assert_int_equal(forge_parse("gitlab"), FORGE_GITLAB);
	assert_int_equal(forge_parse("none"), FORGE_NONE);
	assert_int_equal(forge_parse("GitHub"), -1);
	assert_int_equal(forge_parse(""), -1);
	assert_int_equal(forge_parse("github "), -1);
	assert_string_equal(forge_name(FORGE_GITLAB), "gitlab");
	assert_int_equal(forge_parse(forge_name(FORGE_GITHUB)), FORGE_GITHUB);
	assert_string_equal(forge_default_api(FORGE_GITHUB), "https://api.github.com");
	assert_string_equal(forge_default_api(FORGE_GITLAB), "https://gitlab.com/api/v4");
	assert_null(forge_default_api(FORGE_NONE));
	assert_int_equal(forge_body_limit(FORGE_GITHUB), 65536);
	assert_int_equal(forge_body_limit(FORGE_GITLAB), 1048576);
}

static void
t_api_url(void **state)
{
	static const struct {
		const char *in, *out;
	} good[] = {
	    {"https://api.github.com", "https://api.github.com"},
	    {"https://api.github.com/", "https://api.github.com"},
	    {"https://ghe.example.com/api/v3", "https://ghe.example.com/api/v3"},
	    {"https://ghe.example.com/api/v3/", "https://ghe.example.com/api/v3"},
	    {"https://gitlab.example:8443/api/v4", "https://gitlab.example:8443/api/v4"},
	    {"https://gitlab.com:443/api/v4", "https://gitlab.com/api/v4"},
	    {"HTTPS://GitLab.COM/api/v4", "https://gitlab.com/api/v4"},
	    {"https://127.0.0.1:9999/api/v3", "https://127.0.0.1:9999/api/v3"},
	    {"https://[::1]:8443/api/v3", "https://[::1]:8443/api/v3"},
	    {"https://h.example/a-b/c_d/e.f~g", "https://h.example/a-b/c_d/e.f~g"},
	};
	static const char *const bad[] = {
	    "",
	    "http://api.github.com",
	    "api.github.com",
	    "//api.github.com",
	    "https://",
	    "https:///api/v3",
	    "https:/api.github.com",
	    "https:api.github.com",
	    "https://user:pw@api.github.com",
	    "https://user@api.github.com",
	    "https://:pw@api.github.com",
	    "https://api.github.com/?x=1",
	    "https://api.github.com/api?",
	    "https://api.github.com/#frag",
	    "https://api.github.com#",
	    "https://h.example//api",
	    "https://h.example/api//v3",
	    "https://h.example/api/v3//",
	    "https://h.example/a/../b",
	    "https://h.example/a/./b",
	    "https://h.example/..",
	    "https://h.example/%2e%2e/x",
	    "https://h.example/a b",
	    "https://h.example/api/v3\n",
	    "https://h.example/\xc3\xa9",
	    "https://h.example/a;b",
	    "https://h.example/a@b",
	    "https://h.example:99999/api",
	    "https://g.example.com%8443/api/v3/",
	    "https://h%41.example/api",
	    "https://h_x.example/api",
	    "https://[fe80::1%25eth0]/api",
	    "https://h.example:x/api",
	    "ftp://h.example/api",
	    "file:///etc/passwd",
	    "javascript:alert(1)",
	};
	char out[FORGE_API_URL_MAX + 1], err[256], longurl[400];
	size_t i;

	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		err[0] = '\0';
		if (forge_api_url_check(FORGE_GITHUB, good[i].in, out, sizeof(out), err,
		                        sizeof(err)) != 0)
			fail_msg("%s: %s", good[i].in, err);
		assert_string_equal(out, good[i].out);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		if (forge_api_url_check(FORGE_GITLAB, bad[i], out, sizeof(out), err, sizeof(err)) ==
		    0)
			fail_msg("accepted %s as %s", bad[i], out);
		assert_non_null(strstr(err, "api_url"));
	}
	memset(longurl, 'a', sizeof(longurl) - 1);
	longurl[sizeof(longurl) - 1] = '\0';
	memcpy(longurl, "https://h.example/", 18);
	assert_int_equal(
	    forge_api_url_check(FORGE_GITHUB, longurl, out, sizeof(out), err, sizeof(err)), -1);
	assert_int_equal(forge_api_url_check(FORGE_NONE, "https://api.github.com", out, sizeof(out),
	                                     err, sizeof(err)),
	                 -1);
	assert_non_null(strstr(err, "none"));
	/* an out buffer too small is an error, never a cut URL */
	assert_int_equal(
	    forge_api_url_check(FORGE_GITHUB, "https://api.github.com", out, 10, err, sizeof(err)),
	    -1);
}

static void
t_repo_path(void **state)
{
	static const struct {
		enum forge_kind kind;
		const char *in, *out;
	} good[] = {
	    {FORGE_GITHUB, "https://github.com/octo/hello.git", "octo/hello"},
	    {FORGE_GITHUB, "https://github.com/octo/hello", "octo/hello"},
	    {FORGE_GITHUB, "https://ghe.example:8443/Org-1/repo.name_x.git", "Org-1/repo.name_x"},
	    {FORGE_GITHUB, "https://github.com/o_emu/.github", "o_emu/.github"},
	    {FORGE_GITHUB, "https://github.com/octo/r.git.git", "octo/r.git"},
	    {FORGE_GITLAB, "https://gitlab.example/group/sub/project.git", "group/sub/project"},
	    {FORGE_GITLAB, "https://gitlab.com/g/p", "g/p"},
	    {FORGE_GITLAB, "https://gitlab.com/_g/p-1.x", "_g/p-1.x"},
	    {FORGE_GITLAB, "https://127.0.0.1:9000/a/b/c/d/e/f", "a/b/c/d/e/f"},
	};
	static const struct {
		enum forge_kind kind;
		const char *in;
	} bad[] = {
	    {FORGE_GITHUB, "https://github.com/octo"},
	    {FORGE_GITHUB, "https://github.com/octo/"},
	    {FORGE_GITHUB, "https://github.com/"},
	    {FORGE_GITHUB, "https://github.com"},
	    {FORGE_GITHUB, "https://github.com/a/b/c"},
	    {FORGE_GITHUB, "https://github.com/octo/hello/"},
	    {FORGE_GITHUB, "https://github.com/octo//hello"},
	    {FORGE_GITHUB, "https://github.com/../hello"},
	    {FORGE_GITHUB, "https://github.com/octo/.."},
	    {FORGE_GITHUB, "https://github.com/octo/..cf7"},
	    {FORGE_GITHUB, "https://github.com/octo/a..b"},
	    {FORGE_GITHUB, "https://github.com/octo/."},
	    {FORGE_GITHUB, "https://github.com/-octo/hello"},
	    {FORGE_GITHUB, "https://github.com/oc.to/hello"},
	    {FORGE_GITHUB, "https://github.com/octo/hel%20lo"},
	    {FORGE_GITHUB, "https://github.com/octo/hel lo"},
	    {FORGE_GITHUB, "https://github.com/octo/h\xc3\xa9llo"},
	    {FORGE_GITHUB, "http://github.com/octo/hello"},
	    {FORGE_GITHUB, "https://x-access-token:tok@github.com/octo/hello"},
	    {FORGE_GITHUB, "https://github.com/octo/hello?x"},
	    {FORGE_GITHUB, "https://github.com/octo/hello#x"},
	    {FORGE_GITHUB, "git@github.com:octo/hello.git"},
	    {FORGE_GITHUB, "/srv/git/hello.git"},
	    {FORGE_GITHUB, "file:///srv/git/octo/hello.git"},
	    {FORGE_GITHUB, "https://github.com/octo/.git"},
	    {FORGE_GITLAB, "https://gitlab.com/project"},
	    {FORGE_GITLAB, "https://gitlab.com/g/.p"},
	    {FORGE_GITLAB, "https://gitlab.com/g/-p"},
	    {FORGE_GITLAB, "https://gitlab.com/g/p."},
	    {FORGE_GITLAB, "https://gitlab.com/g/a..b"},
	    {FORGE_GITLAB, "https://gitlab.com/g//p"},
	    {FORGE_GITLAB, "https://gitlab.com/g/p~1"},
	    {FORGE_GITLAB, "https://gitlab.com/g/p/"},
	    {FORGE_NONE, "https://gitlab.com/g/p"},
	};
	char out[FORGE_PATH_MAX + 1], err[256], url[2048];
	size_t i, n;

	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		err[0] = '\0';
		if (forge_repo_path(good[i].kind, good[i].in, out, sizeof(out), err, sizeof(err)) !=
		    0)
			fail_msg("%s: %s", good[i].in, err);
		assert_string_equal(out, good[i].out);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		if (forge_repo_path(bad[i].kind, bad[i].in, out, sizeof(out), err, sizeof(err)) ==
		    0)
			fail_msg("accepted %s as %s", bad[i].in, out);
		assert_true(err[0] != '\0');
	}
	/* GitLab: 21 segments, not 22; a segment of 100 bytes, not 101 */
	n = (size_t)snprintf(url, sizeof(url), "https://gitlab.com");
	for (i = 0; i < 21; i++)
		n += (size_t)snprintf(url + n, sizeof(url) - n, "/g%zu", i);
	assert_int_equal(forge_repo_path(FORGE_GITLAB, url, out, sizeof(out), err, sizeof(err)), 0);
	snprintf(url + n, sizeof(url) - n, "/g21");
	assert_int_equal(forge_repo_path(FORGE_GITLAB, url, out, sizeof(out), err, sizeof(err)),
	                 -1);
	n = (size_t)snprintf(url, sizeof(url), "https://github.com/o/");
	memset(url + n, 'r', 100);
	url[n + 100] = '\0';
	assert_int_equal(forge_repo_path(FORGE_GITHUB, url, out, sizeof(out), err, sizeof(err)), 0);
	strcat(url, "r");
	assert_int_equal(forge_repo_path(FORGE_GITHUB, url, out, sizeof(out), err, sizeof(err)),
	                 -1);
	/* too small an out buffer fails */
	assert_int_equal(forge_repo_path(FORGE_GITHUB, "https://github.com/octo/hello", out, 5, err,
	                                 sizeof(err)),
	                 -1);
}

static void
t_authority(void **state)
{
	char out[64], err[128];

	assert_int_equal(forge_url_authority("u", "https://GitHub.COM/o/r", 100, out, sizeof(out),
	                                     err, sizeof(err)),
	                 0);
	assert_string_equal(out, "github.com");
	assert_int_equal(
	    forge_url_authority("u", "https://h:8443/o", 100, out, sizeof(out), err, sizeof(err)),
	    0);
	assert_string_equal(out, "h:8443");
	assert_int_equal(
	    forge_url_authority("u", "https://h:443/o", 100, out, sizeof(out), err, sizeof(err)),
	    0);
	assert_string_equal(out, "h");
	assert_int_equal(
	    forge_url_authority("u", "http://h/o", 100, out, sizeof(out), err, sizeof(err)), -1);
}

static void
t_title(void **state)
{
	static const char *const good[] = {"Fix the test", "R\xc3\xa9parer \xe2\x9c\x93", "x",
	                                   "\xf0\x9f\x9a\x80 launch", " padded "};
	static const char *const bad[] = {
	    "",          "   ",          "a\nb",           "a\rb",
	    "tab\there", "del\x7f",      "\xc2\x85 (NEL)", "\xc3",
	    "\xc0\xaf",  "\xe0\x80\xaf", "\xed\xa0\x80",   "\xf4\x90\x80\x80",
	    "\xff",      "\x80",
	};
	char err[128], t[4 * FORGE_TITLE_MAX + 8];
	size_t i;

	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		if (forge_title_check(good[i], err, sizeof(err)) != 0)
			fail_msg("%s: %s", good[i], err);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (forge_title_check(bad[i], err, sizeof(err)) == 0)
			fail_msg("accepted bad title %zu", i);
	for (i = 0; i < FORGE_TITLE_MAX; i++)
		memcpy(t + 2 * i, "\xc3\xa9", 2);
	t[2 * FORGE_TITLE_MAX] = '\0';
	assert_int_equal(forge_title_check(t, err, sizeof(err)), 0); /* characters, not bytes */
	strcat(t, "e");
	assert_int_equal(forge_title_check(t, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "240"));
}

static void
t_body_fit(void **state)
{
	const size_t limit = FORGE_GITHUB_BODY_MAX, mlen = sizeof(FORGE_CUT_MARKER) - 1;
	char *in, *out;
	size_t i;
	int cut;

	out = forge_body_fit(FORGE_GITHUB, "short body", &cut);
	assert_string_equal(out, "short body");
	assert_int_equal(cut, 0);
	free(out);
	out = forge_body_fit(FORGE_GITHUB, "bad \xff byte \xc3 and \xed\xa0\x80.", &cut);
	assert_string_equal(out, "bad \xef\xbf\xbd byte \xef\xbf\xbd and "
	                         "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd.");
	free(out);
	/* exactly the limit: kept whole */
	in = malloc(3 * 70000 + 16);
	memset(in, 'a', limit);
	in[limit] = '\0';
	out = forge_body_fit(FORGE_GITHUB, in, &cut);
	assert_int_equal(cut, 0);
	assert_int_equal(strlen(out), limit);
	free(out);
	/* one more: cut to the limit, the marker last */
	strcat(in, "b");
	out = forge_body_fit(FORGE_GITHUB, in, &cut);
	assert_int_equal(cut, 1);
	assert_int_equal(chars(out), limit);
	assert_string_equal(out + strlen(out) - mlen, FORGE_CUT_MARKER);
	free(out);
	/* characters, not bytes: 70000 two-byte and three-byte characters */
	for (i = 0; i < 70000; i++)
		memcpy(in + 2 * i, "\xc3\xa9", 2);
	in[2 * 70000] = '\0';
	out = forge_body_fit(FORGE_GITHUB, in, &cut);
	assert_int_equal(cut, 1);
	assert_int_equal(chars(out), limit);
	assert_true(utf8_ok(out));
	assert_int_equal(strlen(out), 2 * (limit - mlen) + mlen);
	free(out);
	out = forge_body_fit(FORGE_GITLAB, in, &cut); /* 70000 < 1048576 */
	assert_int_equal(cut, 0);
	assert_string_equal(out, in);
	free(out);
	for (i = 0; i < 70000; i++)
		memcpy(in + 3 * i, "\xe2\x9c\x93", 3);
	in[3 * 70000] = '\0';
	out = forge_body_fit(FORGE_GITHUB, in, &cut);
	assert_int_equal(chars(out), limit);
	assert_true(utf8_ok(out));
	free(out);
	free(in);
}

static void
t_retry_after(void **state)
{
	time_t when = curl_getdate("Wed, 21 Oct 2015 07:28:00 GMT", NULL);

	assert_int_equal(gh_forge_retry_after("1", 0), 1);
	assert_int_equal(gh_forge_retry_after("0", 0), 0);
	assert_int_equal(gh_forge_retry_after("05", 0), 5);
	assert_int_equal(gh_forge_retry_after("3600", 0), 3600);
	assert_int_equal(gh_forge_retry_after("2147483647", 0), 2147483647L);
	assert_int_equal(gh_forge_retry_after("99999999999", 0), -1);
	assert_int_equal(gh_forge_retry_after("-1", 0), -1);
	assert_int_equal(gh_forge_retry_after("1.5", 0), -1);
	assert_int_equal(gh_forge_retry_after("1 s", 0), -1);
	assert_int_equal(gh_forge_retry_after("", 0), -1);
	assert_int_equal(gh_forge_retry_after("soon", 0), -1);
	assert_true(when > 0);
	assert_int_equal(gh_forge_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", when - 10), 10);
	assert_int_equal(gh_forge_retry_after("Wednesday, 21-Oct-15 07:28:00 GMT", when - 7), 7);
	assert_int_equal(gh_forge_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", when + 99), 0);
}

#define GH_PR(num, url, state, extra)                                                              \
	"{\"number\":" num ",\"html_url\":\"" url "\",\"state\":\"" state "\"" extra               \
	",\"head\":{\"ref\":\"agrippa/run-1\",\"label\":\"octo:agrippa/run-1\"},"                  \
	"\"base\":{\"ref\":\"main\",\"label\":\"octo:main\"}}"

static void
t_answer_pr(void **state)
{
	static const char *const bad[] = {
	    GH_PR("0", "https://github.com/octo/hello/pull/1", "open", ""),
	    GH_PR("-4", "https://github.com/octo/hello/pull/1", "open", ""),
	    GH_PR("\"4\"", "https://github.com/octo/hello/pull/1", "open", ""),
	    GH_PR("4.0", "https://github.com/octo/hello/pull/1", "open", ""),
	    GH_PR("99999999999999999999", "https://github.com/octo/hello/pull/1", "open", ""),
	    GH_PR("4", "http://github.com/octo/hello/pull/4", "open", ""),
	    GH_PR("4", "https://evil.example/octo/hello/pull/4", "open", ""),
	    GH_PR("4", "javascript:alert(1)", "open", ""),
	    GH_PR("4", "https://user:pw@github.com/x", "open", ""),
	    GH_PR("4", "https://github.com/octo/hello/pull/4", "weird", ""),
	    GH_PR("4", "https://github.com/octo/hello/pull/4", "open", ",\"draft\":\"yes\""),
	    "{\"number\":4,\"html_url\":\"https://github.com/o/r/pull/4\",\"state\":\"open\"}",
	    "[]",
	    "null",
	    "{\"number\":4",
	    "",
	    "{\"number\":4,\"number\":5}",
	};
	const char *good =
	    GH_PR("4", "https://github.com/octo/hello/pull/4", "open", ",\"draft\":true");
	const char *merged = GH_PR("4", "https://github.com/octo/hello/pull/4", "closed",
	                           ",\"merged_at\":\"2026-01-01T00:00:00Z\"");
	const char *closed =
	    GH_PR("4", "https://github.com/octo/hello/pull/4", "closed", ",\"merged_at\":null");
	const char *gl =
	    "{\"iid\":7,\"web_url\":\"https://gitlab.example:8443/g/p/-/merge_requests/7\","
	    "\"state\":\"opened\",\"draft\":true,\"source_branch\":\"feature\","
	    "\"target_branch\":\"main\"}";
	const char *glold =
	    "{\"iid\":7,\"web_url\":\"https://gitlab.example:8443/g/p/-/merge_requests/7\","
	    "\"state\":\"locked\",\"work_in_progress\":true,\"source_branch\":\"f\","
	    "\"target_branch\":\"main\"}";
	struct gh_pr_seen pr;
	char err[256];
	size_t i;

	assert_int_equal(gh_forge_answer_pr(FORGE_GITHUB, good, strlen(good), "github.com", &pr,
	                                    err, sizeof(err)),
	                 0);
	assert_int_equal(pr.number, 4);
	assert_string_equal(pr.url, "https://github.com/octo/hello/pull/4");
	assert_int_equal(pr.draft, 1);
	assert_int_equal(pr.state, GH_PR_OPEN);
	assert_string_equal(pr.head, "agrippa/run-1");
	assert_string_equal(pr.base, "main");
	assert_string_equal(pr.owner, "octo");
	assert_int_equal(gh_forge_answer_pr(FORGE_GITHUB, good, strlen(good), "GitHub.com", &pr,
	                                    err, sizeof(err)),
	                 0);
	assert_int_equal(gh_forge_answer_pr(FORGE_GITHUB, merged, strlen(merged), "github.com", &pr,
	                                    err, sizeof(err)),
	                 0);
	assert_int_equal(pr.state, GH_PR_MERGED);
	assert_int_equal(gh_forge_answer_pr(FORGE_GITHUB, closed, strlen(closed), "github.com", &pr,
	                                    err, sizeof(err)),
	                 0);
	assert_int_equal(pr.state, GH_PR_CLOSED);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		if (gh_forge_answer_pr(FORGE_GITHUB, bad[i], strlen(bad[i]), "github.com", &pr, err,
		                       sizeof(err)) == 0)
			fail_msg("accepted %s", bad[i]);
		assert_true(err[0] != '\0');
		assert_int_equal(pr.number, 0);
	}
	/* the same answer on another host than the repository's */
	assert_int_equal(gh_forge_answer_pr(FORGE_GITHUB, good, strlen(good), "github.com:8443",
	                                    &pr, err, sizeof(err)),
	                 -1);
	assert_int_equal(gh_forge_answer_pr(FORGE_GITLAB, gl, strlen(gl), "gitlab.example:8443",
	                                    &pr, err, sizeof(err)),
	                 0);
	assert_int_equal(pr.number, 7);
	assert_int_equal(pr.draft, 1);
	assert_string_equal(pr.head, "feature");
	assert_int_equal(gh_forge_answer_pr(FORGE_GITLAB, glold, strlen(glold),
	                                    "gitlab.example:8443", &pr, err, sizeof(err)),
	                 0);
	assert_int_equal(pr.state, GH_PR_CLOSED);
	assert_int_equal(pr.draft, 1);
	/* a GitHub answer is no GitLab answer */
	assert_int_equal(gh_forge_answer_pr(FORGE_GITLAB, good, strlen(good), "github.com", &pr,
	                                    err, sizeof(err)),
	                 -1);
}

static void
t_answer_find(void **state)
{
	const char *list =
	    "[{\"number\":1,\"html_url\":\"https://github.com/octo/hello/pull/"
	    "1\",\"state\":\"open\","
	    "\"head\":{\"ref\":\"other\",\"label\":\"octo:other\"},\"base\":{\"ref\":\"main\"}},"
	    "{\"number\":2,\"html_url\":\"https://github.com/octo/hello/pull/"
	    "2\",\"state\":\"open\","
	    "\"head\":{\"ref\":\"agrippa/run-1\",\"label\":\"fork:agrippa/run-1\"},"
	    "\"base\":{\"ref\":\"main\"}},"
	    "{\"number\":3,\"html_url\":\"https://github.com/octo/hello/pull/"
	    "3\",\"state\":\"open\","
	    "\"head\":{\"ref\":\"agrippa/run-1\",\"label\":\"Octo:agrippa/run-1\"},"
	    "\"base\":{\"ref\":\"main\"}}]";
	const char *broken = "[{\"number\":1}]";
	const char *closed =
	    "[{\"number\":5,\"html_url\":\"https://github.com/octo/hello/pull/5\",\"state\":"
	    "\"closed\",\"head\":{\"ref\":\"x\",\"label\":\"octo:x\"},\"base\":{\"ref\":\"main\"}}"
	    "]";
	struct gh_pr_seen pr;
	char err[256];

	assert_int_equal(gh_forge_answer_find(FORGE_GITHUB, list, strlen(list), "github.com",
	                                      "octo", "agrippa/run-1", "main", &pr, err,
	                                      sizeof(err)),
	                 1);
	assert_int_equal(pr.number, 3); /* not #2, a fork's branch of the same name */
	assert_int_equal(gh_forge_answer_find(FORGE_GITHUB, list, strlen(list), "github.com",
	                                      "octo", "agrippa/run-1", "dev", &pr, err,
	                                      sizeof(err)),
	                 0);
	assert_int_equal(pr.number, 0);
	assert_int_equal(gh_forge_answer_find(FORGE_GITHUB, "[]", 2, "github.com", "octo", "x",
	                                      "main", &pr, err, sizeof(err)),
	                 0);
	assert_int_equal(gh_forge_answer_find(FORGE_GITHUB, "{}", 2, "github.com", "octo", "x",
	                                      "main", &pr, err, sizeof(err)),
	                 -1);
	assert_int_equal(gh_forge_answer_find(FORGE_GITHUB, broken, strlen(broken), "github.com",
	                                      "octo", "x", "main", &pr, err, sizeof(err)),
	                 -1);
	assert_non_null(strstr(err, "entry 0"));
	assert_int_equal(gh_forge_answer_find(FORGE_GITHUB, closed, strlen(closed), "github.com",
	                                      "octo", "x", "main", &pr, err, sizeof(err)),
	                 0); /* a closed one is never adopted */
}

static void
t_answer_message(void **state)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
	    {"{\"message\":\"Bad "
	     "credentials\",\"documentation_url\":\"https://docs.github.com/rest\"}",
	     "Bad credentials"},
	    {"{\"message\":\"Validation "
	     "Failed\",\"errors\":[{\"resource\":\"PullRequest\",\"code\":"
	     "\"custom\",\"message\":\"A pull request already exists for octo:b.\"}]}",
	     "Validation Failed; A pull request already exists for octo:b."},
	    {"{\"message\":\"Validation "
	     "Failed\",\"errors\":[{\"resource\":\"PullRequest\",\"code\":"
	     "\"missing_field\",\"field\":\"head\"}]}",
	     "Validation Failed; PullRequest head: missing_field"},
	    {"{\"message\":[\"Another open merge request already exists for this source branch: "
	     "!38\"]}",
	     "Another open merge request already exists for this source branch: !38"},
	    {"{\"message\":{\"title\":[\"can't be blank\"],\"description\":[\"is too long\"]}}",
	     "title can't be blank; description is too long"},
	    {"{\"error\":\"title is missing\"}", "title is missing"},
	    {"{\"message\":\"two\\nlines\\u0007 and \\u00e9\"}", "two lines  and ??"},
	    {"Request forbidden by administrative rules. Please make sure\r\nsecond line",
	     "Request forbidden by administrative rules. Please make sure"},
	    {"<html><body>502 Bad Gateway</body></html>", ""},
	    {"{\"message\":42}", ""},
	    {"[\"message\"]", ""},
	    {"", ""},
	};
	char out[GH_FORGE_MESSAGE_MAX + 1], small[8], big[4000];
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		gh_forge_answer_message(cases[i].in, strlen(cases[i].in), out, sizeof(out));
		assert_string_equal(out, cases[i].out);
	}
	gh_forge_answer_message(cases[0].in, strlen(cases[0].in), small, sizeof(small));
	assert_string_equal(small, "Bad cre");
	snprintf(big, sizeof(big), "{\"message\":\"%03000d\"}", 0);
	gh_forge_answer_message(big, strlen(big), out, sizeof(out));
	assert_int_equal(strlen(out), sizeof(out) - 1);
}

/* What gh_forge_pr refuses before it sends anything (no network here). */
static void
t_pr_refused(void **state)
{
	struct gh_pr_req ok = {
	    .forge = FORGE_GITHUB,
	    .api_url = "https://127.0.0.1:1/api/v3",
	    .repo_url = "https://127.0.0.1:1/octo/hello.git",
	    .token = "tok",
	    .head = "agrippa/x",
	    .base = "main",
	    .title = "T",
	    .body = "B",
	    .draft = 1,
	};
	struct {
		const char *field, *value, *says;
	} cases[] = {
	    {"api_url", "http://127.0.0.1:1/api/v3", "api_url"},
	    {"repo_url", "https://127.0.0.1:1/octo", "OWNER/REPO"},
	    {"head", "-x", "head branch"},
	    {"head", "refs/heads/x", "head branch"},
	    {"base", "a..b", "base branch"},
	    {"base", "agrippa/x", "both"},
	    {"title", "", "title"},
	    {"token", "tok\r\nX-Evil: 1", "token"},
	    {"token", "", "token"},
	};
	struct gh_pr_res res;
	struct gh_pr_req r;
	char err[512];
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		r = ok;
		if (strcmp(cases[i].field, "api_url") == 0)
			r.api_url = cases[i].value;
		else if (strcmp(cases[i].field, "repo_url") == 0)
			r.repo_url = cases[i].value;
		else if (strcmp(cases[i].field, "head") == 0)
			r.head = cases[i].value;
		else if (strcmp(cases[i].field, "base") == 0)
			r.base = cases[i].value;
		else if (strcmp(cases[i].field, "title") == 0)
			r.title = cases[i].value;
		else
			r.token = cases[i].value;
		err[0] = '\0';
		assert_int_equal(gh_forge_pr(&r, &res, err, sizeof(err)), -1);
		if (strstr(err, cases[i].says) == NULL)
			fail_msg("case %zu: %s", i, err);
		assert_null(strstr(err, "X-Evil"));
		assert_int_equal(res.number, 0);
	}
	r = ok;
	r.forge = FORGE_NONE;
	assert_int_equal(gh_forge_pr(&r, &res, err, sizeof(err)), -1);
}

/* A new connection's settings: each bad one names its field. */
static void
t_connection(void **state)
{
	char out[FORGE_API_URL_MAX + 1], err[256];
	const char *field;

	(void)state;
	assert_int_equal(forge_connection_check(NULL, "/srv/x", NULL, out, sizeof(out), &field, err,
	                                        sizeof(err)), 0);
	assert_int_equal(forge_connection_check("gitlab", "https://g.test/a/b.git",
	                                        "https://G.test:443/api/v4/", out, sizeof(out), &field,
	                                        err, sizeof(err)), 0);
	assert_string_equal(out, "https://g.test/api/v4");
	assert_int_equal(forge_connection_check("GitHub", "https://g.test/a/b", NULL, out,
	                                        sizeof(out), &field, err, sizeof(err)), -1);
	assert_string_equal(field, "forge");
	assert_int_equal(forge_connection_check("none", "/srv/x", "https://g.test/api", out,
	                                        sizeof(out), &field, err, sizeof(err)), -1);
	assert_string_equal(field, "api_url");
	assert_int_equal(forge_connection_check("github", "https://g.test/a/b", "http://g.test/api",
	                                        out, sizeof(out), &field, err, sizeof(err)), -1);
	assert_string_equal(field, "api_url");
	assert_int_equal(forge_connection_check("github", "/srv/x", NULL, out, sizeof(out), &field,
	                                        err, sizeof(err)), -1);
	assert_string_equal(field, "url");
	assert_string_equal(forge_token_user(FORGE_GITLAB), "oauth2");
	assert_string_equal(forge_token_user(FORGE_GITHUB), "x-access-token");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_names),       cmocka_unit_test(t_api_url), cmocka_unit_test(t_connection),
	    cmocka_unit_test(t_repo_path),   cmocka_unit_test(t_authority),
	    cmocka_unit_test(t_title),       cmocka_unit_test(t_body_fit),
	    cmocka_unit_test(t_retry_after), cmocka_unit_test(t_answer_pr),
	    cmocka_unit_test(t_answer_find), cmocka_unit_test(t_answer_message),
	    cmocka_unit_test(t_pr_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
