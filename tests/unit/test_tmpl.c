/*
 * Unit tests for tmpl/tmpl.c, the template compiler: every shipped template
 * compiles, the compiled JSON has the documented shape with every default
 * filled in, and each rule of the format fails with its exact
 * "t.yaml:LINE:COL: message" line.  Positions are checked two ways: some
 * written out, most computed from a marker, a substring of the test input
 * that must occur exactly once and start where the error is to point.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h> /* after the headers it needs */

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tmpl/tmpl.h"

#define NAME "t.yaml"

/* A valid template in parts: NAMEVER, then BODY (params, workspace, one
 * phase "p") and its steps from line 11 at an indent of 6; ONE is one step. */
#define NAMEVER "name: t\nversion: 1\n"
#define BODY                                                                                       \
	"params:\n"                                                                                \
	"  repo: { type: repoRef, required: true }\n"                                              \
	"  flag: { type: bool, default: false }\n"                                                 \
	"  cmd: { type: string, default: make }\n"                                                 \
	"workspace: { repo: \"${params.repo}\" }\n"                                                \
	"phases:\n"                                                                                \
	"  - name: p\n"                                                                            \
	"    steps:\n"
#define HEAD NAMEVER BODY
#define STEP(s) HEAD "      - " s "\n"
#define ONE "      - { id: a, kind: command, run: x }\n"

static char err[65536];
static json_t *doc;
static unsigned nerr;

static int
compile_n(const char *yaml, size_t len)
{
	json_decref(doc);
	doc = NULL;
	return tmpl_compile(NAME, (const unsigned char *)yaml, len, &doc, err, sizeof(err), &nerr);
}

static int
compile(const char *yaml)
{
	return compile_n(yaml, strlen(yaml));
}

static size_t
count_lines(const char *s)
{
	size_t n = 0;

	for (; *s != '\0'; s++)
		n += *s == '\n';
	return n;
}

/* yaml must compile; returns the document (owned by doc). */
static json_t *
expect_ok(const char *yaml)
{
	if (compile(yaml) != 0)
		fail_msg("refused:\n%s\nwith:\n%s", yaml, err);
	assert_string_equal(err, "");
	assert_int_equal(nerr, 0);
	assert_non_null(doc);
	return doc;
}

/* yaml must fail with line (a whole "L:C: reason") among its errors. */
static void
expect_error(const char *yaml, const char *line)
{
	char want[1024];

	snprintf(want, sizeof(want), NAME ":%s\n", line);
	if (compile(yaml) != -1)
		fail_msg("accepted: %s", yaml);
	assert_null(doc);
	assert_int_equal(nerr, count_lines(err));
	if (strstr(err, want) == NULL)
		fail_msg("for %s\nexpected: %swithin:\n%s", yaml, want, err);
}

/* yaml must fail with exactly one error, line. */
static void
expect_only(const char *yaml, const char *line)
{
	expect_error(yaml, line);
	if (count_lines(err) != 1)
		fail_msg("for %s\nexpected one error, got:\n%s", yaml, err);
}

/* "L:C: msg" where marker (which must occur once in yaml) starts, or where
 * its '^' is when it has one (the '^' itself is not part of the text). */
static void
at(char *buf, size_t bufsz, const char *yaml, const char *marker, const char *msg)
{
	char text[256];
	const char *m, *s, *caret = strchr(marker, '^');
	size_t line = 1, col = 1, off = caret != NULL ? (size_t)(caret - marker) : 0;

	assert_true(strlen(marker) < sizeof(text));
	memset(text, 0, sizeof(text));
	memcpy(text, marker, off);
	strcpy(text + off, marker + off + (caret != NULL));
	m = strstr(yaml, text);
	if (m == NULL || strstr(m + 1, text) != NULL)
		fail_msg("marker '%s' must occur once in:\n%s", text, yaml);
	for (s = yaml; s < m + off; s++) {
		if (*s == '\n')
			line++, col = 1;
		else
			col++;
	}
	snprintf(buf, bufsz, "%zu:%zu: %s", line, col, msg);
}

static void
expect_error_at(const char *yaml, const char *marker, const char *msg)
{
	char line[1024];

	at(line, sizeof(line), yaml, marker, msg);
	expect_error(yaml, line);
}

static void
expect_only_at(const char *yaml, const char *marker, const char *msg)
{
	char line[1024];

	at(line, sizeof(line), yaml, marker, msg);
	expect_only(yaml, line);
}

/* The n-th step of the first phase. */
static json_t *
step0(json_t *d, size_t n)
{
	json_t *s = json_array_get(
	    json_object_get(json_array_get(json_object_get(d, "phases"), 0), "steps"), n);

	assert_non_null(s);
	return s;
}

static long long
geti(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	if (!json_is_integer(v))
		fail_msg("%s: not an integer", key);
	return json_integer_value(v);
}

static const char *
gets(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	if (!json_is_string(v))
		fail_msg("%s: not a string", key);
	return json_string_value(v);
}

/* Shipped templates */

static int
compile_path(const char *path)
{
	json_decref(doc);
	doc = NULL;
	return tmpl_compile_file(path, &doc, err, sizeof(err), &nerr);
}

/* Every .yaml file in templates/ compiles: a new template is covered by being there. */
static void
test_shipped_templates(void **state)
{
	char path[PATH_MAX];
	struct dirent *de;
	DIR *d = opendir("templates");
	size_t n = 0, len;

	if (d == NULL)
		fail_msg("templates/: not found (run the tests from the repository root)");
	while ((de = readdir(d)) != NULL) {
		len = strlen(de->d_name);
		if (len < 6 || strcmp(de->d_name + len - 5, ".yaml") != 0)
			continue;
		snprintf(path, sizeof(path), "templates/%s", de->d_name);
		if (compile_path(path) != 0)
			fail_msg("%s:\n%s", path, err);
		/* the file is named after its template */
		assert_int_equal(strncmp(gets(doc, "name"), de->d_name, len - 5), 0);
		assert_int_equal(strlen(gets(doc, "name")), len - 5);
		n++;
	}
	closedir(d);
	assert_true(n >= 2);
}

static void
test_fix_failing_test(void **state)
{
	json_t *p, *s, *r;

	if (compile_path("templates/fix-failing-test.yaml") != 0)
		fail_msg("%s", err);
	assert_string_equal(gets(doc, "name"), "fix-failing-test");
	assert_int_equal(geti(doc, "version"), 1);
	p = json_object_get(json_object_get(doc, "params"), "repo");
	assert_string_equal(gets(p, "type"), "repoRef");
	assert_true(json_is_true(json_object_get(p, "required")));
	assert_true(json_is_null(json_object_get(p, "default")));
	p = json_object_get(json_object_get(doc, "params"), "test_command");
	assert_string_equal(gets(p, "default"), "make test");
	assert_true(json_is_false(json_object_get(p, "required")));
	assert_string_equal(gets(json_object_get(doc, "workspace"), "repo"), "${params.repo}");
	assert_string_equal(gets(json_object_get(doc, "workspace"), "access"), "readWrite");
	assert_int_equal(geti(json_object_get(doc, "budget"), "usd_micros"), 2000000);
	p = json_array_get(json_object_get(doc, "phases"), 0);
	assert_int_equal(geti(json_object_get(p, "budget"), "usd_micros"), 500000);
	p = json_array_get(json_object_get(doc, "phases"), 1);
	assert_true(json_is_null(json_object_get(p, "budget")));

	s = step0(doc, 0); /* run-tests */
	assert_string_equal(gets(s, "kind"), "command");
	assert_int_equal(geti(s, "retry"), 0);
	assert_int_equal(geti(s, "timeout_s"), 3600);
	assert_true(json_is_true(json_object_get(s, "allow_failure")));
	assert_string_equal(gets(s, "when"), "success");
	r = json_array_get(json_object_get(s, "produces"), 0);
	assert_string_equal(gets(r, "key"), "test-log");
	assert_string_equal(gets(r, "kind"), "text");
	assert_true(json_is_false(json_object_get(r, "required")));
	assert_string_equal(gets(r, "file"), "test-log.txt");
	assert_int_equal(json_array_size(json_object_get(json_object_get(s, "requires"), "skills")),
	                 0);

	s = json_array_get(json_object_get(p, "steps"), 0); /* implement */
	assert_string_equal(gets(s, "id"), "implement");
	assert_int_equal(geti(s, "retry"), 2);
	assert_int_equal(geti(s, "max_turns"), 50);
	r = json_object_get(s, "requires");
	assert_string_equal(gets(json_array_get(json_object_get(r, "skills"), 0), "name"),
	                    "c-style");
	assert_true(json_is_false(
	    json_object_get(json_array_get(json_object_get(r, "skills"), 0), "optional")));
	assert_true(json_is_true(
	    json_object_get(json_array_get(json_object_get(r, "mcp_servers"), 0), "optional")));
	s = json_array_get(json_object_get(p, "steps"), 2); /* patch */
	assert_string_equal(gets(s, "kind"), "patch");
	assert_int_equal(geti(s, "timeout_s"), 600);
	assert_null(json_object_get(s, "run"));
	r = json_array_get(json_object_get(s, "produces"), 0);
	assert_string_equal(gets(r, "file"), "patch.patch");
	assert_true(json_is_true(json_object_get(r, "required")));
	s = json_array_get(json_object_get(p, "steps"), 3); /* review */
	assert_int_equal(geti(s, "expires_s"), 86400);
	assert_string_equal(gets(s, "message"), "Approve to open a PR");
	s = json_array_get(json_object_get(p, "steps"), 4); /* open-pr */
	assert_string_equal(gets(s, "kind"), "pull_request");
	assert_string_equal(gets(s, "title"), "Fix the failing tests");
	assert_int_equal(json_array_size(json_object_get(s, "produces")), 0);
}

static void
test_run_tests(void **state)
{
	json_t *s;

	if (compile_path("templates/run-tests.yaml") != 0)
		fail_msg("%s", err);
	assert_string_equal(
	    gets(json_object_get(json_object_get(doc, "params"), "test_command"), "default"),
	    "make test");
	assert_int_equal(geti(json_object_get(doc, "budget"), "usd_micros"), 0);
	s = step0(doc, 0);
	assert_int_equal(geti(s, "timeout_s"), 3600);
	assert_true(json_is_true(json_object_get(s, "allow_failure")));
	assert_non_null(strstr(gets(s, "run"), "> .agrippa/artifacts/test-log.txt 2>&1"));
	assert_string_equal(gets(json_array_get(json_object_get(s, "produces"), 0), "file"),
	                    "test-log.txt");
	s = step0(doc, 1);
	assert_string_equal(gets(s, "kind"), "patch");
	assert_string_equal(gets(s, "when"), "always");
	s = step0(doc, 2);
	assert_string_equal(gets(s, "kind"), "checkpoint");
	assert_int_equal(geti(s, "expires_s"), 7 * 86400);
	assert_int_equal(geti(s, "timeout_s"), 600);
}

/* The whole compiled form of a small template, byte for byte: key order and
 * every default. */
static void
test_compiled_form(void **state)
{
	const char *yaml = "name: mini\nversion: 3\n"
	                   "params:\n  repo: { type: repoRef, required: true }\n"
	                   "workspace: { repo: \"${params.repo}\" }\n"
	                   "phases:\n  - name: only\n    steps:\n"
	                   "      - { id: s1, kind: command, run: \"true\" }\n";
	const char *want =
	    "{\"name\":\"mini\",\"version\":3,\"description\":\"\","
	    "\"params\":{\"repo\":{\"type\":\"repoRef\",\"required\":true,\"default\":null,"
	    "\"description\":\"\"}},"
	    "\"workspace\":{\"repo\":\"${params.repo}\",\"ref\":null,\"access\":\"readWrite\"},"
	    "\"budget\":null,\"network\":null,"
	    "\"phases\":[{\"name\":\"only\",\"budget\":null,\"steps\":[{\"id\":\"s1\","
	    "\"kind\":\"command\",\"retry\":0,\"timeout_s\":3600,\"allow_failure\":false,"
	    "\"when\":\"success\",\"requires\":{\"skills\":[],\"mcp_servers\":[]},"
	    "\"produces\":[],\"network\":null,\"run\":\"true\"}]}]}";
	char *got;

	expect_ok(yaml);
	got = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
	assert_non_null(got);
	assert_string_equal(got, want);
	free(got);
}

/* Each kind's own keys and defaults. */
static void
test_kind_defaults(void **state)
{
	json_t *s;
	const char *yaml =
	    HEAD "      - { id: c, kind: command, run: x }\n"
	         "      - { id: a, kind: agent, prompt: y }\n"
	         "      - { id: pa, kind: patch, produces: [ { key: d, kind: patch } ] }\n"
	         "      - { id: ck, kind: checkpoint, message: m }\n"
	         "      - { id: pr, kind: pull_request }\n";

	expect_ok(yaml);
	s = step0(doc, 0);
	assert_int_equal(geti(s, "timeout_s"), 3600);
	assert_true(json_is_null(json_object_get(s, "network")));
	assert_int_equal(json_object_size(s), 10);
	s = step0(doc, 1);
	assert_int_equal(geti(s, "timeout_s"), 3600);
	assert_int_equal(geti(s, "max_turns"), 50);
	assert_string_equal(gets(s, "prompt"), "y");
	assert_true(json_is_null(json_object_get(s, "network")));
	assert_int_equal(json_object_size(s), 11);
	s = step0(doc, 2);
	assert_int_equal(geti(s, "timeout_s"), 600);
	assert_int_equal(json_object_size(s), 8);
	assert_string_equal(gets(json_array_get(json_object_get(s, "produces"), 0), "file"),
	                    "d.patch");
	s = step0(doc, 3);
	assert_int_equal(geti(s, "timeout_s"), 600);
	assert_int_equal(geti(s, "expires_s"), 86400);
	assert_int_equal(geti(s, "retry"), 0);
	assert_int_equal(json_object_size(s), 10);
	s = step0(doc, 4);
	assert_int_equal(geti(s, "timeout_s"), 600);
	assert_string_equal(gets(s, "title"), "");
	assert_string_equal(gets(s, "body"), "");
	assert_string_equal(gets(s, "branch"), "");
	assert_string_equal(gets(s, "base"), "");
	assert_true(json_is_true(json_object_get(s, "draft")));
	assert_int_equal(json_object_size(s), 13);
}

/* Flow and block style are the same template. */
static void
test_flow_and_block(void **state)
{
	const char *flow =
	    "{ name: f, version: 2, params: { r: { type: repoRef } },"
	    " workspace: { repo: '${params.r}', access: readOnly },"
	    " phases: [ { name: x, steps: [ { id: a, kind: agent, prompt: hi,"
	    " max_turns: 7, requires: { skills: [ s1, { name: s2, optional: true } ] } }"
	    " ] } ] }\n";
	const char *block = "name: f\nversion: 2\nparams:\n  r:\n    type: repoRef\n"
	                    "workspace:\n  repo: ${params.r}\n  access: readOnly\n"
	                    "phases:\n  - name: x\n    steps:\n      - id: a\n        kind: agent\n"
	                    "        prompt: hi\n        max_turns: 7\n        requires:\n"
	                    "          skills:\n            - s1\n            - name: s2\n"
	                    "              optional: true\n";
	json_t *a;

	a = json_incref(expect_ok(flow));
	expect_ok(block);
	assert_true(json_equal(a, doc));
	assert_string_equal(gets(json_object_get(doc, "workspace"), "access"), "readOnly");
	assert_int_equal(geti(step0(doc, 0), "max_turns"), 7);
	json_decref(a);
}

/* A buffer for generated inputs, and appending to it. */
static char big[TMPL_MAX_SIZE + 4096];

static void __attribute__((format(printf, 1, 2))) bigcat(const char *fmt, ...)
{
	size_t len = strlen(big);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(big + len, sizeof(big) - len, fmt, ap);
	va_end(ap);
}

/* The top level */

static void
test_top_level(void **state)
{
	expect_error("version: 1\n", "1:1: missing key 'name'");
	expect_error("version: 1\n", "1:1: missing key 'workspace'");
	expect_error("version: 1\n", "1:1: missing key 'phases'");
	assert_int_equal(count_lines(err), 3);
	expect_only("name: t\n" BODY ONE, "1:1: missing key 'version'");
	expect_only(NAMEVER
	            "phases: [ { name: p, steps: [ { id: a, kind: command, run: x } ] } ]\n",
	            "1:1: missing key 'workspace'");
	expect_only(NAMEVER
	            "params: { r: { type: repoRef } }\nworkspace: { repo: '${params.r}' }\n",
	            "1:1: missing key 'phases'");
	expect_only_at(HEAD ONE "bogus: 1\n", "bogus", "unknown key 'bogus'");
	expect_only_at(HEAD ONE "\"a b\": 1\n", "\"a b\"", "unknown key");
	expect_only_at(HEAD ONE "version: 2\n", "version: 2", "duplicate key 'version'");
	expect_only_at(HEAD ONE "? [ k ]\n: v\n", "[ k ]",
	               "a key must be a scalar, not a sequence");
	expect_only("- a\n", "1:1: the top level must be a mapping, found a sequence");
	expect_only("words\n", "1:1: the top level must be a mapping, found a scalar");
	expect_only("", "1:1: empty file: the top level must be a mapping");
	expect_only("# nothing\n", "2:1: empty file: the top level must be a mapping");
	expect_only("---\n", "2:1: the top level must be a mapping, found nothing");
}

static void
test_name_version_description(void **state)
{
	static const char *const bad[] = {"Fix", "-x", "a_b", "a.b", "\"a b\"", "\"a\\tb\""};
	char yaml[8192], name[80];
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(yaml, sizeof(yaml), "name: %s\nversion: 1\n" BODY ONE, bad[i]);
		expect_only(yaml, "1:7: name: must match [a-z0-9][a-z0-9-]{0,63}");
	}
	memset(name, 0, sizeof(name));
	memset(name, 'n', 64);
	name[0] = '9';
	snprintf(yaml, sizeof(yaml), "name: %s\nversion: 1\n" BODY ONE, name);
	expect_ok(yaml);
	assert_string_equal(gets(doc, "name"), name);
	name[64] = 'n'; /* 65 bytes */
	snprintf(yaml, sizeof(yaml), "name: %s\nversion: 1\n" BODY ONE, name);
	expect_only(yaml, "1:7: name: must match [a-z0-9][a-z0-9-]{0,63}");
	expect_only("name:\nversion: 1\n" BODY ONE, "1:6: name: empty value");
	expect_only("name: ~\nversion: 1\n" BODY ONE, "1:7: name: empty value");
	expect_only("name: [ t ]\nversion: 1\n" BODY ONE,
	            "1:7: name: expected a name, found a sequence");

	expect_ok("name: t\nversion: 1000000\n" BODY ONE);
	assert_int_equal(geti(doc, "version"), 1000000);
	expect_only("name: t\nversion: 0\n" BODY ONE,
	            "2:10: version: expected an integer from 1 to 1000000");
	expect_only("name: t\nversion: 1000001\n" BODY ONE,
	            "2:10: version: expected an integer from 1 to 1000000");
	expect_only("name: t\nversion: 1.5\n" BODY ONE,
	            "2:10: version: expected an integer from 1 to 1000000");
	expect_only("name: t\nversion: 010\n" BODY ONE, /* octal in YAML 1.1 */
	            "2:10: version: expected an integer from 1 to 1000000");
	expect_only("name: t\nversion: 99999999999999999999999\n" BODY ONE,
	            "2:10: version: expected an integer from 1 to 1000000");
	expect_only("name: t\nversion: \"1\"\n" BODY ONE,
	            "2:10: version: expected an integer, found a quoted string");
	expect_only("name: t\nversion: [1]\n" BODY ONE,
	            "2:10: version: expected an integer, found a sequence");
	expect_only("name: t\nversion:\n" BODY ONE, "2:9: version: empty value");

	expect_ok("description: \"\"\n" HEAD ONE);
	assert_string_equal(gets(doc, "description"), "");
	expect_ok("description: |\n  two\n  lines\n" HEAD ONE);
	assert_string_equal(gets(doc, "description"), "two\nlines\n");
	expect_only(
	    "description: \"a\\x01b\"\n" HEAD ONE,
	    "1:14: description: control characters other than newline and tab are not allowed");
	memset(big, 0, sizeof(big));
	strcpy(big, "description: ");
	memset(big + 13, 'd', 4097);
	strcat(big, "\n" HEAD ONE);
	expect_only(big, "1:14: description: value too long (at most 4096 bytes)");
	big[13 + 4096] = ' '; /* 4096 bytes and a trailing blank */
	expect_ok(big);
}

/* Parameters */

#define PR "  repo: { type: repoRef }\n"
#define TAIL                                                                                       \
	"workspace: { repo: \"${params.repo}\" }\n"                                                \
	"phases: [ { name: p, steps: [ { id: a, kind: command, run: x } ] } ]\n"
#define PARAM(s) NAMEVER "params:\n" PR s TAIL

static void
test_params(void **state)
{
	json_t *p;

	expect_ok(PARAM("  _n9: { type: int, default: -5, description: \"a\\tb\" }\n"
	                "  s: { type: string, default: 123 }\n"
	                "  e: { type: string, default: \"\" }\n"
	                "  b: { type: bool, default: true, required: false }\n"
	                "  r: { type: repoRef, default: other }\n"));
	p = json_object_get(doc, "params");
	assert_int_equal(json_object_size(p), 6);
	assert_int_equal(geti(json_object_get(p, "_n9"), "default"), -5);
	assert_string_equal(gets(json_object_get(p, "_n9"), "description"), "a\tb");
	assert_string_equal(gets(json_object_get(p, "s"), "default"), "123");
	assert_string_equal(gets(json_object_get(p, "e"), "default"), "");
	assert_true(json_is_true(json_object_get(json_object_get(p, "b"), "default")));
	assert_string_equal(gets(json_object_get(p, "r"), "default"), "other");
	assert_string_equal(gets(json_object_get(p, "r"), "type"), "repoRef");
	assert_true(json_is_null(json_object_get(json_object_get(p, "repo"), "default")));

	expect_only(PARAM("  Bad: { type: int }\n"),
	            "5:3: params: a parameter name must match [a-z_][a-z0-9_]{0,63}");
	expect_only(PARAM("  9x: { type: int }\n"),
	            "5:3: params: a parameter name must match [a-z_][a-z0-9_]{0,63}");
	expect_only(PARAM("  a-b: { type: int }\n"),
	            "5:3: params: a parameter name must match [a-z_][a-z0-9_]{0,63}");
	expect_only(PARAM("  repo: { type: repoRef }\n"), "5:3: params: duplicate key 'repo'");
	expect_only(PARAM("  n: { required: true }\n"), "5:6: params.n: missing key 'type'");
	expect_only(PARAM("  n: { type: float }\n"),
	            "5:14: params.n.type: expected string, int, bool or repoRef");
	expect_only(PARAM("  n: int\n"), "5:6: params.n: expected a mapping, found a scalar");
	expect_only(PARAM("  n:\n"), "5:5: params.n: expected a mapping, found nothing");
	expect_only_at(PARAM("  n: { type: int, frob: 1 }\n"), "frob",
	               "params.n: unknown key 'frob'");
	expect_only_at(PARAM("  n: { type: int, required: true, default: 3 }\n"), "default",
	               "params.n.default: a required parameter cannot have a default");
	expect_only_at(PARAM("  n: { type: int, default: \"3\" }\n"), "\"3\"",
	               "params.n.default: expected an integer, found a quoted string");
	expect_only_at(
	    PARAM("  n: { type: int, default: 9007199254740992 }\n"), "9007",
	    "params.n.default: expected an integer from -9007199254740991 to 9007199254740991");
	expect_only_at(
	    PARAM("  n: { type: int, default: -0 }\n"), "-0",
	    "params.n.default: expected an integer from -9007199254740991 to 9007199254740991");
	expect_only_at(PARAM("  n: { type: bool, default: yes }\n"), "yes",
	               "params.n.default: expected true or false");
	expect_only_at(PARAM("  n: { type: bool, default: \"true\" }\n"), "\"true\"",
	               "params.n.default: expected true or false, found a quoted string");
	expect_only_at(PARAM("  n: { type: string, default: }\n"), "default: ^}",
	               "params.n.default: empty value");
	expect_only_at(PARAM("  n: { type: string, default: [ x ] }\n"), "[ x ]",
	               "params.n.default: expected a string, found a sequence");
	expect_only_at(PARAM("  n: { type: repoRef, default: \"\" }\n"), "\"\"",
	               "params.n.default: empty value");
	expect_only_at(PARAM("  n: { type: int, required: 1 }\n"), "1 }",
	               "params.n.required: expected true or false");
	expect_only_at(PARAM("  n: { type: int, description: [x] }\n"), "[x]",
	               "params.n.description: expected a string, found a sequence");
	/* a wrong type is one error, not one more for the default */
	expect_only_at(PARAM("  n: { type: number, default: 3 }\n"), "number",
	               "params.n.type: expected string, int, bool or repoRef");
	expect_error_at(NAMEVER "params: [ repo ]\n" TAIL, "[ repo ]",
	                "params: expected a mapping, found a sequence");
}

static void
test_params_limit(void **state)
{
	int i;

	memset(big, 0, sizeof(big));
	bigcat(NAMEVER "params:\n" PR);
	for (i = 1; i < 64; i++)
		bigcat("  p%d: { type: int }\n", i);
	bigcat(TAIL);
	expect_ok(big);
	assert_int_equal(json_object_size(json_object_get(doc, "params")), 64);
	memset(big, 0, sizeof(big));
	bigcat(NAMEVER "params:\n" PR);
	for (i = 1; i < 66; i++)
		bigcat("  p%d: { type: int }\n", i);
	bigcat(TAIL);
	expect_only_at(big, "p64:", "params: at most 64 parameters");
}

/* Workspace and budgets */

#define WS(s)                                                                                      \
	NAMEVER "params:\n" PR "  s: { type: string }\n"                                           \
	        "workspace: " s "\n"                                                               \
	        "phases: [ { name: p, steps: [ { id: a, kind: command, run: x } ] } ]\n"

static void
test_workspace(void **state)
{
	const char *must = "workspace.repo: must be ${params.NAME} naming a repoRef parameter";

	expect_ok(WS("{ repo: '${params.repo}', access: readOnly }"));
	assert_string_equal(gets(json_object_get(doc, "workspace"), "access"), "readOnly");
	expect_only_at(WS("{ repo: 'https://example.com/x.git' }"), "'https", must);
	expect_only_at(WS("{ repo: '${params.s}' }"), "'${", must);
	expect_only_at(WS("{ repo: 'x${params.repo}' }"), "'x$", must);
	expect_only_at(WS("{ repo: '${params.repo}${params.repo}' }"), "'${", must);
	expect_only_at(WS("{ repo: '${params.nope}' }"), "'${",
	               "workspace.repo: ${params.nope}: no such parameter");
	expect_only_at(WS("{ access: readOnly }"), "{ access", "workspace: missing key 'repo'");
	expect_only_at(WS("{ repo: '${params.repo}', access: rw }"), "rw",
	               "workspace.access: expected readWrite or readOnly");
	expect_only_at(WS("{ repo: '${params.repo}', bogus: 1 }"), "bogus",
	               "workspace: unknown key 'bogus'");
	expect_only_at(WS("x"), "x\n", "workspace: expected a mapping, found a scalar");
}

/* workspace.ref: a literal ref, or ${params.NAME} of string parameters in text */

#define WSR(s)                                                                                     \
	NAMEVER "params:\n" PR "  s: { type: string }\n  t: { type: string, default: x }\n"        \
	        "  n: { type: int }\n  f: { type: bool }\n"                                        \
	        "workspace: { repo: '${params.repo}', ref: " s " }\n"                              \
	        "phases: [ { name: p, steps: [ { id: a, kind: command, run: x } ] } ]\n"

static const char *
ws_ref(void)
{
	json_t *r = json_object_get(json_object_get(doc, "workspace"), "ref");

	if (json_is_null(r))
		return NULL;
	if (!json_is_string(r))
		fail_msg("workspace.ref: neither a string nor null");
	return json_string_value(r);
}

static void
test_workspace_ref(void **state)
{
	static const struct {
		const char *ref, *why;
	} bad[] = {
	    {"'--upload-pack=x'", "must not start with '-'"},
	    {"'refs/heads/-x'", "must not start with '-'"},
	    {"a..b", "must not contain '..'"},
	    {"x.lock", "must not have a component ending with '.lock'"},
	    {"a/.b", "must not have a component starting with '.'"},
	    {"'a b'", "must not contain a space"},
	    {"'main~1'", "must not contain '~'"},
	    {"'main^'", "must not contain '^'"},
	    {"'a:b'", "must not contain ':'"},
	    {"'a?'", "must not contain '?'"},
	    {"'a*'", "must not contain '*'"},
	    {"'a[b'", "must not contain '['"},
	    {"'a\\b'", "must not contain '\\'"},
	    {"'@'", "must not be '@'"},
	    {"'main@{1}'", "must not contain '@{'"},
	    {"/main", "must not start with '/'"},
	    {"main/", "must not end with '/'"},
	    {"refs/heads/", "must not end with '/'"},
	    {"main.", "must not end with '.'"},
	    {"a//b", "must not contain '//'"},
	};
	char yaml[1024], want[256], marker[64], lref[300];
	size_t i;

	expect_ok(WSR("main"));
	assert_string_equal(ws_ref(), "main");
	expect_ok(WSR("refs/tags/v1.0"));
	assert_string_equal(ws_ref(), "refs/tags/v1.0");
	expect_ok(WSR("0123456789abcdef0123456789abcdef01234567"));
	assert_string_equal(ws_ref(), "0123456789abcdef0123456789abcdef01234567");
	expect_ok(WSR("'${params.s}'"));
	assert_string_equal(ws_ref(), "${params.s}");
	expect_ok(WSR("'refs/heads/${params.s}'"));
	assert_string_equal(ws_ref(), "refs/heads/${params.s}");
	expect_ok(WSR("'release-${params.t}/${params.s}'"));
	assert_string_equal(ws_ref(), "release-${params.t}/${params.s}");
	/* what the parameters make is judged at submit; here only what the
	 * text around them breaks whatever they are */
	expect_ok(WSR("'${params.s}.${params.t}'"));
	expect_ok(WSR("'@${params.s}'"));
	expect_ok(WSR("'x.lock${params.s}'"));
	expect_ok(WSR("'refs/heads${params.s}'"));
	expect_ok(WSR("'${params.s}@${params.t}'"));
	expect_only_at(WSR("'${params.s}..x'"), "ref: ^'$", "workspace.ref: must not contain '..'");
	expect_only_at(WSR("'-${params.s}'"), "'-", "workspace.ref: must not start with '-'");
	expect_only_at(WSR("'refs/tags/-${params.s}'"), "'refs",
	               "workspace.ref: must not start with '-'");
	expect_only_at(WSR("'${params.s}/'"), "ref: ^'$", "workspace.ref: must not end with '/'");
	expect_only_at(WSR("'${params.s}.'"), "ref: ^'$", "workspace.ref: must not end with '.'");
	expect_only_at(WSR("'.${params.s}'"), "'.",
	               "workspace.ref: must not have a component starting with '.'");
	expect_only_at(WSR("'${params.s}.lock/${params.t}'"), "ref: ^'$",
	               "workspace.ref: must not have a component ending with '.lock'");
	expect_only_at(WSR("'a b${params.s}'"), "'a b", "workspace.ref: must not contain a space");
	expect_only_at(WSR("'${params.s}@{1}'"), "ref: ^'$",
	               "workspace.ref: must not contain '@{'");
	expect_ok(WS("{ repo: '${params.repo}' }"));
	assert_null(ws_ref());
	memset(lref, 'a', 255);
	lref[255] = '\0';
	snprintf(yaml, sizeof(yaml), WSR("%s"), lref);
	expect_ok(yaml);
	assert_int_equal(strlen(ws_ref()), 255);

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(yaml, sizeof(yaml), WSR("%s"), bad[i].ref);
		snprintf(want, sizeof(want), "workspace.ref: %s", bad[i].why);
		snprintf(marker, sizeof(marker), "^%s", bad[i].ref); /* '^' marks the spot */
		expect_only_at(yaml, marker, want);
	}
	snprintf(yaml, sizeof(yaml), WSR("%sa"), lref);
	expect_only_at(yaml, "ref: ^a", "workspace.ref: value too long (at most 255 bytes)");
	expect_only_at(WSR("\"a\\tb\""), "\"a",
	               "workspace.ref: control characters are not allowed");
	expect_only_at(WSR("\"a\\x7fb\""), "\"a",
	               "workspace.ref: control characters are not allowed");
	expect_only_at(WSR("''"), "''", "workspace.ref: empty value");
	expect_only_at(WSR("~"), "~ }", "workspace.ref: empty value");
	expect_only_at(WSR("[ main ]"), "[ main",
	               "workspace.ref: expected a string, found a sequence");
	expect_only_at(WSR("'${params.nope}'"), "'${params.nope",
	               "workspace.ref: ${params.nope}: no such parameter");
	expect_only_at(WSR("'${env.HOME}'"), "'${env",
	               "workspace.ref: unknown reference ${env.HOME}; only ${params.NAME} exists");
	expect_only_at(WSR("'${params.s'"), "'${params.s'",
	               "workspace.ref: unterminated reference: '${' without '}'");
	expect_only_at(WSR("'${params.repo}'"), "ref: ^'${params.repo}'",
	               "workspace.ref: ${params.repo} is not a string parameter");
	expect_only_at(WSR("'v${params.n}'"), "'v$",
	               "workspace.ref: ${params.n} is not a string parameter");
	expect_only_at(WSR("'${params.f}'"), "'${params.f",
	               "workspace.ref: ${params.f} is not a string parameter");
	/* each wrong one is named, the string ones are not */
	expect_error_at(WSR("'${params.s}-${params.n}-${params.f}'"), "'${params.s}-",
	                "workspace.ref: ${params.n} is not a string parameter");
	expect_error_at(WSR("'${params.s}-${params.n}-${params.f}'"), "'${params.s}-",
	                "workspace.ref: ${params.f} is not a string parameter");
	assert_int_equal(count_lines(err), 2);
	/* a parameter whose type is wrong is reported once, at its type */
	expect_only_at(NAMEVER
	               "params:\n" PR "  w: { type: text }\n"
	               "workspace: { repo: '${params.repo}', ref: '${params.w}' }\n"
	               "phases: [ { name: p, steps: [ { id: a, kind: command, run: x } ] } ]\n",
	               "text", "params.w.type: expected string, int, bool or repoRef");
}

/* The ref rules themselves: tests/ref_cases.txt (which the SQL rules are
 * checked against too), then what that file cannot hold. */
static void
test_ref_rules(void **state)
{
	static const struct {
		const char *ref;
		size_t len;
		const char *why;
	} more[] = {
	    {"", 0, "must not be empty"},
	    {"a\x01b", 3, "must not contain control characters"},
	    {"a\x1f", 2, "must not contain control characters"},
	    {"a\tb", 3, "must not contain control characters"},
	    {"a\nb", 3, "must not contain control characters"},
	    {"a\x7f", 2, "must not contain control characters"},
	    {"a\0b", 3, "must not contain control characters"},
	    {"-a\x01", 3, "must not contain control characters"}, /* bytes come first */
	    {"mainXXX", 4, NULL},                                 /* only len bytes count */
	    {"main..", 4, NULL},
	    {"main/", 4, NULL},
	};
	char line[1024], lref[300], *tab;
	const char *why;
	size_t i, n = 0, len;
	FILE *f = fopen("tests/ref_cases.txt", "r");

	assert_non_null(f);
	while (fgets(line, sizeof(line), f) != NULL) {
		if ((len = strcspn(line, "\n")) == strlen(line))
			fail_msg("tests/ref_cases.txt: a line without its newline, or too long");
		line[len] = '\0';
		if (len == 0 || line[0] == '#')
			continue;
		if ((tab = strchr(line, '\t')) == NULL)
			fail_msg("tests/ref_cases.txt: no tab in '%s'", line);
		*tab = '\0';
		why = tmpl_ref_problem(tab + 1, strlen(tab + 1));
		if (strcmp(line, "ok") == 0 ? why != NULL : why == NULL || strcmp(why, line) != 0)
			fail_msg("'%s': expected %s, got %s", tab + 1, line,
			         why != NULL ? why : "ok");
		n++;
	}
	fclose(f);
	assert_true(n >= 60);
	for (i = 0; i < sizeof(more) / sizeof(more[0]); i++) {
		why = tmpl_ref_problem(more[i].ref, more[i].len);
		if (more[i].why == NULL ? why != NULL
		                        : why == NULL || strcmp(why, more[i].why) != 0)
			fail_msg("case %zu: expected %s, got %s", i,
			         more[i].why != NULL ? more[i].why : "ok",
			         why != NULL ? why : "ok");
	}
	memset(lref, 'a', sizeof(lref));
	assert_null(tmpl_ref_problem(lref, 255));
	assert_string_equal(tmpl_ref_problem(lref, 256), "must be at most 255 bytes");
	memcpy(lref + 200, "..", 2);
	assert_string_equal(tmpl_ref_problem(lref, 255), "must not contain '..'");
	assert_string_equal(tmpl_ref_problem(lref, 256), "must be at most 255 bytes");
}

static void
test_budget(void **state)
{
	static const struct {
		const char *text;
		long long micros;
	} good[] = {{"0", 0},
	            {"2", 2000000},
	            {"2.00", 2000000},
	            {"2.5", 2500000},
	            {"0.5", 500000},
	            {"0.000001", 1},
	            {"12.345678", 12345678},
	            {"100000", 100000000000LL},
	            {"100000.000000", 100000000000LL}};
	static const char *const bad[] = {
	    ".5",    "5.",    "1e3",           "-1",     "+1",   "2.1234567",
	    "nan",   ".inf",  "100000.000001", "100001", "01.5", "0x10",
	    "1_000", "2.5.1", "2..5",          "1 000"};
	const char *msg = "budget.usd: expected an amount from 0 to 100000 with at most 6 decimals";
	char yaml[4096], marker[64];
	size_t i;

	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		snprintf(yaml, sizeof(yaml), HEAD ONE "budget: { usd: %s }\n", good[i].text);
		expect_ok(yaml);
		assert_int_equal(geti(json_object_get(doc, "budget"), "usd_micros"),
		                 good[i].micros);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(yaml, sizeof(yaml), HEAD ONE "budget: { usd: %s }\n", bad[i]);
		snprintf(marker, sizeof(marker), "usd: ^%s", bad[i]);
		expect_only_at(yaml, marker, msg);
	}
	expect_only_at(HEAD ONE "budget: { usd: \"2\" }\n", "\"2\"",
	               "budget.usd: expected an amount, found a quoted string");
	expect_only_at(HEAD ONE "budget: {}\n", "{}", "budget: missing key 'usd'");
	expect_only_at(HEAD ONE "budget: { usd: 1, eur: 2 }\n", "eur", "budget: unknown key 'eur'");
	expect_only_at(HEAD ONE "budget: 2\n", "2\n", "budget: expected a mapping, found a scalar");
	expect_only_at(HEAD ONE "budget:\n", "budget:^\n" /* the empty value */,
	               "budget: expected a mapping, found nothing");
	assert_non_null(strstr(err, NAME ":12:8: "));
	expect_only_at(NAMEVER "params:\n" PR "workspace: { repo: '${params.repo}' }\n"
	                       "phases:\n  - name: p\n    budget: { usd: 0.0000001 }\n"
	                       "    steps: [ { id: a, kind: command, run: x } ]\n",
	               "0.0000001",
	               "phases[0].budget.usd: expected an amount from 0 to 100000 with at most "
	               "6 decimals");
}

/* Phases */

#define PRE NAMEVER "params:\n" PR "workspace: { repo: \"${params.repo}\" }\n"
#define S1 "[ { id: a, kind: command, run: x } ]"

static void
test_phases(void **state)
{
	expect_only_at(PRE "phases: {}\n", "{}", "phases: expected a sequence, found a mapping");
	expect_only(PRE "phases:\n", "6:8: phases: expected a sequence, found nothing");
	expect_only_at(PRE "phases: []\n", "[]", "phases: empty list");
	expect_only_at(PRE "phases: [ p ]\n", "p ]",
	               "phases[0]: expected a mapping, found a scalar");
	expect_only_at(PRE "phases:\n  - { name: p, steps: " S1 " }\n"
	                   "  - { name: p, steps: [ { id: b, kind: command, run: x } ] }\n",
	               "p, steps: [ { id: b", "phases[1].name: duplicate phase name 'p'");
	expect_only_at(PRE "phases: [ { name: P, steps: " S1 " } ]\n", "P,",
	               "phases[0].name: must match [a-z0-9][a-z0-9_-]{0,63}");
	expect_only_at(PRE "phases: [ { steps: " S1 " } ]\n", "{ steps",
	               "phases[0]: missing key 'name'");
	expect_only_at(PRE "phases: [ { name: p } ]\n", "{ name", "phases[0]: missing key 'steps'");
	expect_only_at(PRE "phases: [ { name: p, steps: [] } ]\n", "[] ",
	               "phases[0].steps: empty list");
	expect_only_at(PRE "phases: [ { name: p, steps: x } ]\n", "x }",
	               "phases[0].steps: expected a sequence, found a scalar");
	expect_error_at(PRE "phases: [ { name: p, stepz: " S1 " } ]\n", "stepz",
	                "phases[0]: unknown key 'stepz'");
	assert_int_equal(count_lines(err), 2); /* and steps is missing */
	/* names may use _ and digits, as step ids */
	expect_ok(PRE "phases: [ { name: 0_a-b, steps: " S1 " } ]\n");
}

static void
test_phase_and_step_limits(void **state)
{
	int i;

	memset(big, 0, sizeof(big));
	bigcat(PRE "phases:\n");
	for (i = 0; i < 65; i++)
		bigcat("  - { name: p%d, steps: [ { id: s%d, kind: command, run: x } ] }\n", i, i);
	expect_only_at(big, "{ name: p64", "phases: at most 64 phases");
	*strstr(big, "  - { name: p64") = '\0';
	expect_ok(big);
	assert_int_equal(json_array_size(json_object_get(doc, "phases")), 64);

	memset(big, 0, sizeof(big));
	bigcat(PRE "phases:\n  - name: p\n    steps:\n");
	for (i = 0; i < 257; i++)
		bigcat("      - { id: s%d, kind: command, run: x }\n", i);
	expect_only_at(big, "{ id: s256", "phases[0].steps: at most 256 steps");
	*strstr(big, "      - { id: s256") = '\0';
	expect_ok(big);
	assert_int_equal(json_array_size(json_object_get(
	                     json_array_get(json_object_get(doc, "phases"), 0), "steps")),
	                 256);
}

/* Steps */

static void
test_step_common(void **state)
{
	static const struct {
		const char *text;
		long long s;
	} good[] = {{"1", 1},       {"30s", 30},     {"10m", 600},    {"2h", 7200},
	            {"1d", 86400},  {"\"90\"", 90},  {"'45m'", 2700}, {"604800", 604800},
	            {"7d", 604800}, {"168h", 604800}};
	static const char *const bad[] = {"0", "0s", "8d",  "604801", "1w",   "-1",  "1.5h",
	                                  "h", "1H", "01m", "10 m",   "169h", "\"\""};
	const char *tmsg = "phases[0].steps[0].timeout: expected a duration from 1s to 7d "
	                   "(seconds, or a number followed by s, m, h or d)";
	char yaml[4096], marker[64];
	size_t i;

	expect_only(STEP("{ kind: command, run: x }"),
	            "11:9: phases[0].steps[0]: missing key 'id'");
	expect_only(STEP("{ id: a, run: x }"), "11:9: phases[0].steps[0]: missing key 'kind'");
	expect_only_at(
	    STEP("{ id: a, kind: shell, run: x }"), "shell",
	    "phases[0].steps[0].kind: expected command, agent, patch, checkpoint or pull_request");
	expect_only_at(STEP("{ id: A, kind: command, run: x }"), "A,",
	               "phases[0].steps[0].id: must match [a-z0-9][a-z0-9_-]{0,63}");
	expect_only_at(PRE "phases:\n  - { name: p, steps: " S1 " }\n"
	                   "  - { name: q, steps: [ { id: a, kind: command, run: y } ] }\n",
	               "a, kind: command, run: y", "phases[1].steps[0].id: duplicate step id 'a'");
	expect_only(STEP("x"), "11:9: phases[0].steps[0]: expected a mapping, found a scalar");

	expect_ok(STEP("{ id: a, kind: command, run: x, retry: 10 }"));
	assert_int_equal(geti(step0(doc, 0), "retry"), 10);
	expect_only_at(STEP("{ id: a, kind: command, run: x, retry: 11 }"), "11 }",
	               "phases[0].steps[0].retry: expected an integer from 0 to 10");
	expect_only_at(STEP("{ id: a, kind: command, run: x, retry: -1 }"), "-1",
	               "phases[0].steps[0].retry: expected an integer from 0 to 10");

	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		snprintf(yaml, sizeof(yaml), STEP("{ id: a, kind: command, run: x, timeout: %s }"),
		         good[i].text);
		expect_ok(yaml);
		assert_int_equal(geti(step0(doc, 0), "timeout_s"), good[i].s);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(yaml, sizeof(yaml), STEP("{ id: a, kind: command, run: x, timeout: %s }"),
		         bad[i]);
		snprintf(marker, sizeof(marker), "timeout: ^%s", bad[i]);
		if (strcmp(bad[i], "\"\"") == 0)
			expect_only_at(yaml, marker, "phases[0].steps[0].timeout: empty value");
		else
			expect_only_at(yaml, marker, tmsg);
	}

	expect_only_at(STEP("{ id: a, kind: command, run: x, allow_failure: yes }"), "yes",
	               "phases[0].steps[0].allow_failure: expected true or false");
	expect_only_at(
	    STEP("{ id: a, kind: command, run: x, allow_failure: 'true' }"), "'true'",
	    "phases[0].steps[0].allow_failure: expected true or false, found a quoted string");

	expect_ok(STEP("{ id: a, kind: command, run: x, when: always }"));
	assert_string_equal(gets(step0(doc, 0), "when"), "always");
	expect_ok(STEP("{ id: a, kind: command, run: x, when: \"failure\" }"));
	assert_string_equal(gets(step0(doc, 0), "when"), "failure");
	expect_ok(STEP("{ id: a, kind: command, run: x, when: '${params.flag}' }"));
	assert_string_equal(gets(step0(doc, 0), "when"), "${params.flag}");
	expect_only_at(STEP("{ id: a, kind: command, run: x, when: '${params.cmd}' }"), "'${",
	               "phases[0].steps[0].when: ${params.cmd} is not a bool parameter");
	expect_only_at(STEP("{ id: a, kind: command, run: x, when: '${params.nope}' }"), "'${",
	               "phases[0].steps[0].when: ${params.nope}: no such parameter");
	expect_only_at(
	    STEP("{ id: a, kind: command, run: x, when: yes }"), "yes",
	    "phases[0].steps[0].when: expected success, failure, always or ${params.NAME} naming "
	    "a bool parameter");
	expect_only_at(
	    STEP("{ id: a, kind: command, run: x, when: '${params.flag} ' }"), "'${",
	    "phases[0].steps[0].when: expected success, failure, always or ${params.NAME} naming "
	    "a bool parameter");
	expect_only_at(STEP("{ id: a, kind: command, run: x, when: }"), "when: ^}",
	               "phases[0].steps[0].when: empty value");
}

/* Keys by kind: another kind's key, unknown keys, required keys. */
static void
test_step_kind_keys(void **state)
{
	char *run;

	expect_only_at(STEP("{ id: a, kind: command, run: x, prompt: y }"), "prompt",
	               "phases[0].steps[0]: prompt: not a key of a command step");
	expect_only_at(STEP("{ run: x, id: a, kind: agent, prompt: p }"), "run",
	               "phases[0].steps[0]: run: not a key of an agent step");
	expect_only_at(STEP("{ id: a, kind: checkpoint, message: m, retry: 1 }"), "retry",
	               "phases[0].steps[0]: retry: not a key of a checkpoint step");
	expect_only_at(STEP("{ id: a, kind: checkpoint, message: m, requires: {} }"), "requires",
	               "phases[0].steps[0]: requires: not a key of a checkpoint step");
	expect_only_at(STEP("{ id: a, kind: checkpoint, message: m, produces: [] }"), "produces",
	               "phases[0].steps[0]: produces: not a key of a checkpoint step");
	expect_only_at(STEP("{ id: a, kind: pull_request, produces: [] }"), "produces",
	               "phases[0].steps[0]: produces: not a key of a pull_request step");
	expect_only_at(STEP("{ id: a, kind: patch, max_turns: 3, "
	                    "produces: [ { key: d, kind: patch } ] }"),
	               "max_turns", "phases[0].steps[0]: max_turns: not a key of a patch step");
	expect_only_at(STEP("{ id: a, kind: agent, prompt: p, expires_in: 1h }"), "expires_in",
	               "phases[0].steps[0]: expires_in: not a key of an agent step");
	expect_only_at(STEP("{ id: a, kind: command, run: x, title: t }"), "title",
	               "phases[0].steps[0]: title: not a key of a command step");
	expect_only_at(STEP("{ id: a, kind: command, run: x, frob: 1 }"), "frob",
	               "phases[0].steps[0]: unknown key 'frob'");
	expect_only_at(STEP("{ id: a, kind: command, run: x, run: y }"), "run: y",
	               "phases[0].steps[0]: duplicate key 'run'");
	/* another kind's key is refused, not checked */
	expect_only_at(STEP("{ id: a, kind: command, run: x, max_turns: [] }"), "max_turns",
	               "phases[0].steps[0]: max_turns: not a key of a command step");

	expect_only(STEP("{ id: a, kind: command }"),
	            "11:9: phases[0].steps[0]: missing key 'run'");
	expect_only(STEP("{ id: a, kind: agent }"),
	            "11:9: phases[0].steps[0]: missing key 'prompt'");
	expect_only(STEP("{ id: a, kind: checkpoint }"),
	            "11:9: phases[0].steps[0]: missing key 'message'");
	expect_only_at(STEP("{ id: a, kind: command, run: \"\" }"), "\"\"",
	               "phases[0].steps[0].run: empty value");
	expect_only_at(STEP("{ id: a, kind: command, run: }"), "run: ^}",
	               "phases[0].steps[0].run: empty value");
	expect_only_at(STEP("{ id: a, kind: agent, prompt: p, max_turns: 0 }"), "0 }",
	               "phases[0].steps[0].max_turns: expected an integer from 1 to 1000");
	expect_only_at(STEP("{ id: a, kind: agent, prompt: p, max_turns: 1001 }"), "1001",
	               "phases[0].steps[0].max_turns: expected an integer from 1 to 1000");
	expect_ok(STEP("{ id: a, kind: agent, prompt: p, max_turns: 1000 }"));
	assert_int_equal(geti(step0(doc, 0), "max_turns"), 1000);

	expect_ok(STEP("{ id: a, kind: checkpoint, message: m, expires_in: 1m }"));
	assert_int_equal(geti(step0(doc, 0), "expires_s"), 60);
	expect_ok(STEP("{ id: a, kind: checkpoint, message: m, expires_in: 30d }"));
	assert_int_equal(geti(step0(doc, 0), "expires_s"), 2592000);
	expect_only_at(
	    STEP("{ id: a, kind: checkpoint, message: m, expires_in: 59s }"), "59s",
	    "phases[0].steps[0].expires_in: expected a duration from 1m to 30d (seconds, or a "
	    "number followed by s, m, h or d)");
	expect_only_at(
	    STEP("{ id: a, kind: checkpoint, message: m, expires_in: 31d }"), "31d",
	    "phases[0].steps[0].expires_in: expected a duration from 1m to 30d (seconds, or a "
	    "number followed by s, m, h or d)");

	expect_ok(STEP("{ id: a, kind: pull_request, title: \"\", body: \"b\\n\" }"));
	assert_string_equal(gets(step0(doc, 0), "title"), "");
	assert_string_equal(gets(step0(doc, 0), "body"), "b\n");
	expect_only_at(STEP("{ id: a, kind: pull_request, title: \"a\\nb\" }"), "\"a",
	               "phases[0].steps[0].title: control characters are not allowed");
	/* a pull request's branch, base and draft */
	expect_ok(STEP("{ id: a, kind: pull_request }"));
	assert_string_equal(gets(step0(doc, 0), "branch"), "");
	assert_string_equal(gets(step0(doc, 0), "base"), "");
	assert_true(json_is_true(json_object_get(step0(doc, 0), "draft")));
	expect_ok(STEP("{ id: a, kind: pull_request, branch: fix/x-1, base: main, draft: false }"));
	assert_string_equal(gets(step0(doc, 0), "branch"), "fix/x-1");
	assert_string_equal(gets(step0(doc, 0), "base"), "main");
	assert_true(json_is_false(json_object_get(step0(doc, 0), "draft")));
	expect_ok(STEP("{ id: a, kind: pull_request, branch: 'fix/${params.cmd}' }"));
	expect_only_at(STEP("{ id: a, kind: pull_request, branch: 'a..b' }"), "'a..b'",
	               "phases[0].steps[0].branch: not a branch name: must not contain '..'");
	expect_only_at(STEP("{ id: a, kind: pull_request, base: refs/heads/main }"), "refs/heads",
	               "phases[0].steps[0].base: not a branch name: name the branch without "
	               "refs/heads/");
	expect_only_at(STEP("{ id: a, kind: pull_request, base: "
	                    "0123456789abcdef0123456789abcdef01234567 }"),
	               "0123456789abcdef0123456789abcdef01234567",
	               "phases[0].steps[0].base: not a branch name: a commit id");
	expect_only_at(STEP("{ id: a, kind: pull_request, base: HEAD }"), "HEAD",
	               "phases[0].steps[0].base: not a branch name: HEAD names no branch");
	expect_only_at(STEP("{ id: a, kind: pull_request, draft: maybe }"), "maybe",
	               "phases[0].steps[0].draft: expected true or false");
	expect_only_at(STEP("{ id: a, kind: command, run: x, branch: b }"), "branch",
	               "phases[0].steps[0]: branch: not a key of a command step");
	/* ${artifacts.KEY}: only in a pull request's body, of an earlier step */
	expect_ok(HEAD "      - { id: a, kind: command, run: x, produces: [ { key: log, kind: "
	               "text } ] }\n"
	               "      - { id: b, kind: pull_request, body: 'see ${artifacts.log}' }\n");
	expect_only_at(STEP("{ id: b, kind: pull_request, body: '${artifacts.log}' }"),
	               "'${artifacts",
	               "phases[0].steps[0].body: ${artifacts.log}: no earlier step produces an "
	               "artifact of that key");
	expect_only_at(HEAD "      - { id: a, kind: command, run: x, produces: [ { key: log, "
	                    "kind: text } ] }\n"
	                    "      - { id: b, kind: pull_request, title: '${artifacts.log}' }\n",
	               "'${artifacts",
	               "phases[0].steps[1].title: unknown reference ${artifacts.log}; only "
	               "${params.NAME} exists");

	/* the size caps of text */
	run = malloc(70000);
	assert_non_null(run);
	memset(run, 'r', 65537);
	run[65537] = '\0';
	memset(big, 0, sizeof(big));
	bigcat(STEP("{ id: a, kind: command, run: %s }"), run);
	expect_only_at(big, "run: ^r",
	               "phases[0].steps[0].run: value too long (at most 65536 bytes)");
	run[65536] = '\0';
	memset(big, 0, sizeof(big));
	bigcat(STEP("{ id: a, kind: command, run: %s }"), run);
	expect_ok(big);
	run[257] = '\0';
	memset(big, 0, sizeof(big));
	bigcat(STEP("{ id: a, kind: pull_request, title: %s }"), run);
	expect_only_at(big, "title: ^r",
	               "phases[0].steps[0].title: value too long (at most 256 bytes)");
	free(run);
}

static void
test_requires(void **state)
{
	json_t *r;

	expect_ok(STEP("{ id: a, kind: agent, prompt: p, requires: { skills: [ sk, { name: t } ],"
	               " mcp_servers: [ { name: gh, optional: true }, sk ] } }"));
	r = json_object_get(step0(doc, 0), "requires");
	assert_string_equal(gets(json_array_get(json_object_get(r, "skills"), 0), "name"), "sk");
	assert_true(json_is_false(
	    json_object_get(json_array_get(json_object_get(r, "skills"), 1), "optional")));
	assert_true(json_is_true(
	    json_object_get(json_array_get(json_object_get(r, "mcp_servers"), 0), "optional")));
	assert_int_equal(json_array_size(json_object_get(r, "mcp_servers")), 2);
	expect_ok(STEP("{ id: a, kind: pull_request, requires: {} }"));
	r = json_object_get(step0(doc, 0), "requires");
	assert_int_equal(json_array_size(json_object_get(r, "skills")), 0);
	assert_int_equal(json_array_size(json_object_get(r, "mcp_servers")), 0);

	expect_only_at(STEP("{ id: a, kind: agent, prompt: p, requires: { skills: [ sk, sk ] } }"),
	               "sk ]", "phases[0].steps[0].requires.skills[1]: duplicate entry 'sk'");
	expect_only_at(STEP("{ id: a, kind: agent, prompt: p, "
	                    "requires: { skills: [ sk, { name: sk } ] } }"),
	               "sk }", "phases[0].steps[0].requires.skills[1].name: duplicate entry 'sk'");
	expect_only_at(
	    STEP("{ id: a, kind: agent, prompt: p, requires: { skills: [ Bad ] } }"), "Bad",
	    "phases[0].steps[0].requires.skills[0]: must match [a-z0-9][a-z0-9_-]{0,63}");
	expect_only_at(
	    STEP("{ id: a, kind: agent, prompt: p, "
	         "requires: { mcp_servers: [ { name: g, optional: 1 } ] } }"),
	    "1 }", "phases[0].steps[0].requires.mcp_servers[0].optional: expected true or false");
	expect_only_at(STEP("{ id: a, kind: agent, prompt: p, "
	                    "requires: { skills: [ { optional: true } ] } }"),
	               "{ optional", "phases[0].steps[0].requires.skills[0]: missing key 'name'");
	expect_only_at(STEP("{ id: a, kind: agent, prompt: p, "
	                    "requires: { skills: [ { name: s, version: 2 } ] } }"),
	               "version: 2",
	               "phases[0].steps[0].requires.skills[0]: unknown key 'version'");
	expect_only_at(STEP("{ id: a, kind: agent, prompt: p, requires: { skills: s } }"), "s }",
	               "phases[0].steps[0].requires.skills: expected a sequence, found a scalar");
	expect_only_at(STEP("{ id: a, kind: agent, prompt: p, requires: { tools: [] } }"), "tools",
	               "phases[0].steps[0].requires: unknown key 'tools'");
	expect_only_at(STEP("{ id: a, kind: agent, prompt: p, requires: [] }"), "[] ",
	               "phases[0].steps[0].requires: expected a mapping, found a sequence");
	expect_only_at(STEP("{ id: a, kind: agent, prompt: p, requires: { skills: [ [ s ] ] } }"),
	               "[ s ]",
	               "phases[0].steps[0].requires.skills[0]: expected a name, found a sequence");
}

static void
test_requires_limit(void **state)
{
	int i;

	memset(big, 0, sizeof(big));
	bigcat(HEAD "      - { id: a, kind: agent, prompt: p, requires: { skills: [ ");
	for (i = 0; i < 65; i++)
		bigcat("s%d, ", i);
	bigcat("] } }\n");
	expect_only_at(big, "s64", "phases[0].steps[0].requires.skills: at most 64 entries");
	/* MCP servers: as many as one step can run, refused here, not at run time */
	memset(big, 0, sizeof(big));
	bigcat(HEAD "      - { id: a, kind: agent, prompt: p, requires: { mcp_servers: [ ");
	for (i = 0; i < 17; i++)
		bigcat("m%d, ", i);
	bigcat("] } }\n");
	expect_only_at(big, "m16", "phases[0].steps[0].requires.mcp_servers: at most 16 entries");
}

static void
test_produces(void **state)
{
	json_t *a;

	expect_ok(STEP("{ id: a, kind: agent, prompt: p, produces: [ { key: a1, kind: text },"
	               " { key: a2, kind: md, required: true }, { key: a3, kind: json },"
	               " { key: a4, kind: json, file: Report-1.v2.JSON } ] }"));
	a = json_object_get(step0(doc, 0), "produces");
	assert_string_equal(gets(json_array_get(a, 0), "file"), "a1.txt");
	assert_string_equal(gets(json_array_get(a, 1), "file"), "a2.md");
	assert_true(json_is_true(json_object_get(json_array_get(a, 1), "required")));
	assert_string_equal(gets(json_array_get(a, 2), "file"), "a3.json");
	assert_true(json_is_false(json_object_get(json_array_get(a, 2), "required")));
	assert_string_equal(gets(json_array_get(a, 3), "file"), "Report-1.v2.JSON");

	expect_only_at(STEP("{ id: a, kind: command, run: x, "
	                    "produces: [ { key: r, kind: text, file: a/b } ] }"),
	               "a/b",
	               "phases[0].steps[0].produces[0].file: must be a file name matching "
	               "[A-Za-z0-9._-]{1,128}, not . or ..");
	expect_only_at(STEP("{ id: a, kind: command, run: x, "
	                    "produces: [ { key: r, kind: text, file: '..' } ] }"),
	               "'..'",
	               "phases[0].steps[0].produces[0].file: must be a file name matching "
	               "[A-Za-z0-9._-]{1,128}, not . or ..");
	expect_only_at(STEP("{ id: a, kind: command, run: x, "
	                    "produces: [ { key: r, kind: text, file: . } ] }"),
	               ". }",
	               "phases[0].steps[0].produces[0].file: must be a file name matching "
	               "[A-Za-z0-9._-]{1,128}, not . or ..");
	expect_only_at(STEP("{ id: a, kind: command, run: x, produces: [ { key: log, kind: text } "
	                    "] }") "      - { id: b, kind: command, run: x, produces: [ { key: "
	                           "log, kind: md } ] }\n",
	               "log, kind: md",
	               "phases[0].steps[1].produces[0].key: duplicate artifact key 'log'");
	expect_only_at(STEP("{ id: a, kind: command, run: x, produces: [ { key: a, kind: text },"
	                    " { key: b, kind: text, file: a.txt } ] }"),
	               "a.txt",
	               "phases[0].steps[0].produces[1].file: duplicate file 'a.txt' in this step");
	expect_only_at(STEP("{ id: a, kind: command, run: x, produces: [ { kind: text } ] }"),
	               "{ kind", "phases[0].steps[0].produces[0]: missing key 'key'");
	expect_only_at(STEP("{ id: a, kind: command, run: x, produces: [ { key: k } ] }"), "{ key",
	               "phases[0].steps[0].produces[0]: missing key 'kind'");
	expect_only_at(
	    STEP("{ id: a, kind: command, run: x, produces: [ { key: k, kind: html } ] }"), "html",
	    "phases[0].steps[0].produces[0].kind: expected text, md, json or patch");
	expect_only_at(STEP("{ id: a, kind: command, run: x, "
	                    "produces: [ { key: k, kind: text, required: 'yes' } ] }"),
	               "'yes'",
	               "phases[0].steps[0].produces[0].required: expected true or false, found a "
	               "quoted string");
	expect_only_at(STEP("{ id: a, kind: command, run: x, "
	                    "produces: [ { key: k, kind: text, size: 1 } ] }"),
	               "size", "phases[0].steps[0].produces[0]: unknown key 'size'");
	expect_only_at(STEP("{ id: a, kind: command, run: x, produces: { key: k } }"), "{ key",
	               "phases[0].steps[0].produces: expected a sequence, found a mapping");
	/* the patch is the runner's: no other step may claim one */
	expect_only_at(
	    STEP("{ id: a, kind: agent, prompt: p, produces: [ { key: k, kind: patch } ] }"),
	    "patch }",
	    "phases[0].steps[0].produces[0].kind: patch artifacts come only from patch "
	    "steps");
	expect_only(STEP("{ id: a, kind: patch }"),
	            "11:9: phases[0].steps[0]: a patch step must "
	            "declare exactly one produces entry, of kind patch");
	expect_only_at(STEP("{ id: a, kind: patch, produces: [ { key: d, kind: text } ] }"),
	               "produces",
	               "phases[0].steps[0]: a patch step must declare exactly one produces "
	               "entry, of kind patch");
	expect_only_at(STEP("{ id: a, kind: patch, produces: [ { key: d, kind: patch },"
	                    " { key: e, kind: patch } ] }"),
	               "produces",
	               "phases[0].steps[0]: a patch step must declare exactly one produces "
	               "entry, of kind patch");
	/* a wrong entry is one error, not also the patch rule */
	expect_only_at(STEP("{ id: a, kind: patch, produces: [ { key: d, kind: diff } ] }"), "diff",
	               "phases[0].steps[0].produces[0].kind: expected text, md, json or patch");
}

/* ${...} references */

/* network: top level and per step, each entry judged where it is written. */
static void
test_network(void **state)
{
	const char *top = NAMEVER "network: { allow: [ pypi.org, \"*.Example.com\" ] }\n" BODY ONE;
	char *got;
	json_t *n;

	/* the template's list, canonical; steps without one inherit (null) */
	expect_ok(NAMEVER "network:\n  allow: [ pypi.org, \"*.example.com:8443\", localhost ]\n"
	                  "  presets: [ python, node ]\n" BODY ONE);
	n = json_object_get(doc, "network");
	got = json_dumps(n, JSON_COMPACT | JSON_PRESERVE_ORDER);
	assert_string_equal(got, "{\"allow\":[\"pypi.org\",\"*.example.com:8443\",\"localhost\"],"
	                         "\"presets\":[\"python\",\"node\"]}");
	free(got);
	assert_true(json_is_null(json_object_get(step0(doc, 0), "network")));
	/* none at all: null; an empty mapping or lists: the empty policy */
	expect_ok(HEAD ONE);
	assert_true(json_is_null(json_object_get(doc, "network")));
	expect_ok(NAMEVER "network: {}\n" BODY ONE);
	n = json_object_get(doc, "network");
	assert_int_equal(json_array_size(json_object_get(n, "allow")), 0);
	assert_int_equal(json_array_size(json_object_get(n, "presets")), 0);
	/* a step's list replaces the template's: compiled apart */
	expect_ok(NAMEVER "network: { allow: [ a.test ] }\n" BODY
	          "      - { id: a, kind: command, run: x, network: { allow: [ b.test:22 ] } }\n"
	          "      - { id: b, kind: agent, prompt: y, network: { allow: [] } }\n"
	          "      - { id: c, kind: command, run: z }\n");
	assert_string_equal(json_string_value(json_array_get(
	                        json_object_get(json_object_get(step0(doc, 0), "network"), "allow"),
	                        0)),
	                    "b.test:22");
	assert_int_equal(json_array_size(json_object_get(
	                     json_object_get(step0(doc, 1), "network"), "allow")),
	                 0);
	assert_true(json_is_null(json_object_get(step0(doc, 2), "network")));

	/* every entry at its own position, with the rule it breaks */
	expect_only_at(top, "\"*.Example", "network.allow[1]: an entry must be in lower case");
	expect_only_at(NAMEVER "network: { allow: [ \"*\" ] }\n" BODY ONE, "\"*\"",
	               "network.allow[0]: a bare '*' would allow every host");
	expect_only_at(NAMEVER "network: { allow: [ \"*.com\" ] }\n" BODY ONE, "\"*.com",
	               "network.allow[0]: a wildcard over a single label (*.tld) would allow a "
	               "whole top-level domain");
	expect_only_at(NAMEVER "network: { allow: [ 10.0.0.1 ] }\n" BODY ONE, "10.0",
	               "network.allow[0]: an entry is a host name, not an IP address (see "
	               "egress.allow_cidrs)");
	expect_only_at(NAMEVER "network: { allow: [ \"[::1]\" ] }\n" BODY ONE, "\"[::1]",
	               "network.allow[0]: an entry is a host name, not an IP address");
	expect_only_at(NAMEVER "network: { allow: [ \"https://pypi.org/\" ] }\n" BODY ONE, "\"https",
	               "network.allow[0]: an entry is a host name, not a URL");
	expect_only_at(NAMEVER "network: { allow: [ \"u@pypi.org\" ] }\n" BODY ONE, "\"u@",
	               "network.allow[0]: an entry holds no user information ('@')");
	expect_only_at(NAMEVER "network: { allow: [ \"pypi.org:99999\" ] }\n" BODY ONE, "\"pypi",
	               "network.allow[0]: the port must be a number from 1 to 65535");
	expect_only_at(NAMEVER "network: { allow: [ \"${params.cmd}\" ] }\n" BODY ONE, "\"${params.cmd",
	               "network.allow[0]: no ${...} in a network entry: parameters never widen "
	               "the network");
	expect_only_at(NAMEVER "network: { allow: [ \"${params.cmd}.evil.test\" ] }\n" BODY ONE,
	               "\"${params.cmd", "network.allow[0]: no ${...} in a network entry: "
	               "parameters never "
	                       "widen the network");
	expect_only_at(NAMEVER "network: { allow: [ a.test, a.test ] }\n" BODY ONE, "a.test ]",
	               "network.allow[1]: duplicate entry 'a.test'");
	expect_only_at(NAMEVER "network: { allow: [ \"\" ] }\n" BODY ONE, "\"\"",
	               "network.allow[0]: empty value");
	expect_only_at(NAMEVER "network: { allow: [ [ a.test ] ] }\n" BODY ONE, "[ a.test",
	               "network.allow[0]: expected a host name, found a sequence");
	expect_only_at(NAMEVER "network: { allow: a.test }\n" BODY ONE, "a.test }",
	               "network.allow: expected a sequence, found a scalar");
	expect_only_at(NAMEVER "network: { presets: [ Python ] }\n" BODY ONE, "Python",
	               "network.presets[0]: must match [a-z0-9][a-z0-9_-]{0,31}");
	expect_only_at(NAMEVER "network: { presets: [ go, go ] }\n" BODY ONE, "go ]",
	               "network.presets[1]: duplicate entry 'go'");
	expect_only_at(NAMEVER "network: { deny: [ a.test ] }\n" BODY ONE, "deny",
	               "network: unknown key 'deny'");
	expect_only_at(NAMEVER "network: [ a.test ]\n" BODY ONE, "[ a.test",
	               "network: expected a mapping, found a sequence");
	expect_only_at(NAMEVER "network: all\n" BODY ONE, "all",
	               "network: expected a mapping, found a scalar");
	/* in a step, labelled as the step's */
	expect_only_at(STEP("{ id: a, kind: command, run: x, network: { allow: [ \"*.com\" ] } }"),
	               "\"*.com", "phases[0].steps[0].network.allow[0]: a wildcard over a single "
	                          "label (*.tld) would allow a whole top-level domain");
	/* only the kinds that run in the sandbox have one */
	expect_only_at(STEP("{ id: a, kind: checkpoint, message: m, network: {} }"), "network",
	               "phases[0].steps[0]: network: not a key of a checkpoint step");
	expect_only_at(STEP("{ id: a, kind: pull_request, network: {} }"), "network",
	               "phases[0].steps[0]: network: not a key of a pull_request step");
}

static void
test_network_limits(void **state)
{
	size_t i;

	big[0] = '\0';
	bigcat(NAMEVER "network:\n  allow:\n");
	for (i = 0; i < 65; i++)
		bigcat("    - h%zu.test\n", i);
	bigcat("  presets: [");
	for (i = 0; i < 17; i++)
		bigcat("%sp%zu", i ? ", " : "", i);
	bigcat("]\n" BODY ONE);
	expect_error_at(big, "h64.test", "network.allow: at most 64 entries");
	expect_error_at(big, "p16", "network.presets: at most 16 entries");
	assert_int_equal(nerr, 2);
}

static void
test_references(void **state)
{
	expect_ok(STEP("{ id: a, kind: command, run: 'echo ${params.cmd} $HOME $$ $5 $ {x} "
	               "$${params.flag} $' }"));
	assert_string_equal(gets(step0(doc, 0), "run"),
	                    "echo ${params.cmd} $HOME $$ $5 $ {x} $${params.flag} $");
	/* not checked where nothing is substituted */
	expect_ok("description: '${anything}'\n" HEAD ONE);
	/* a parameter may be declared below its use */
	expect_ok(NAMEVER
	          "workspace: { repo: '${params.r}' }\n"
	          "phases: [ { name: p, steps: [ { id: a, kind: command, "
	          "run: '${params.c}', when: '${params.b}' } ] } ]\n"
	          "params: { r: { type: repoRef }, c: { type: string }, b: { type: bool } }\n");

	expect_only_at(STEP("{ id: a, kind: command, run: 'x ${params.nope}' }"), "'x",
	               "phases[0].steps[0].run: ${params.nope}: no such parameter");
	expect_only_at(
	    STEP("{ id: a, kind: agent, prompt: 'see ${env.HOME}' }"), "'see",
	    "phases[0].steps[0].prompt: unknown reference ${env.HOME}; only ${params.NAME} exists");
	expect_only_at(STEP("{ id: a, kind: checkpoint, message: 'ok ${params' }"), "'ok",
	               "phases[0].steps[0].message: unterminated reference: '${' without '}'");
	expect_only_at(STEP("{ id: a, kind: pull_request, title: '${params.Repo}' }"), "'${",
	               "phases[0].steps[0].title: ${params.Repo}: no such parameter");
	expect_only_at(
	    STEP("{ id: a, kind: pull_request, body: 'x ${}' }"), "'x",
	    "phases[0].steps[0].body: unknown reference ${}; only ${params.NAME} exists");
	expect_only_at(
	    STEP("{ id: a, kind: pull_request, body: \"x ${\\u00e9}\" }"), "\"x",
	    "phases[0].steps[0].body: unknown reference ${...}; only ${params.NAME} exists");
	/* every bad reference of a value */
	expect_error_at(STEP("{ id: a, kind: command, run: '${params.a} ${params.b}' }"), "'${",
	                "phases[0].steps[0].run: ${params.a}: no such parameter");
	expect_error_at(STEP("{ id: a, kind: command, run: '${params.a} ${params.b}' }"), "'${",
	                "phases[0].steps[0].run: ${params.b}: no such parameter");
	assert_int_equal(count_lines(err), 2);
}

static void
test_control_chars(void **state)
{
	expect_ok(STEP("{ id: a, kind: command, run: \"a\\tb\\nc\" }"));
	assert_string_equal(gets(step0(doc, 0), "run"), "a\tb\nc");
	expect_only_at(
	    STEP("{ id: a, kind: command, run: \"a\\x01\" }"), "\"a",
	    "phases[0].steps[0].run: control characters other than newline and tab are not "
	    "allowed");
	expect_only_at(
	    STEP("{ id: a, kind: command, run: \"a\\rb\" }"), "\"a",
	    "phases[0].steps[0].run: control characters other than newline and tab are not "
	    "allowed");
	expect_only_at(
	    STEP("{ id: a, kind: agent, prompt: \"a\\x85\" }"), "\"a",
	    "phases[0].steps[0].prompt: control characters other than newline and tab are not "
	    "allowed");
	expect_only_at(
	    STEP("{ id: a, kind: checkpoint, message: \"a\\0b\" }"), "\"a",
	    "phases[0].steps[0].message: control characters other than newline and tab are not "
	    "allowed");
	expect_only_at(STEP("{ id: \"a\\tb\", kind: command, run: x }"), "\"a",
	               "phases[0].steps[0].id: must match [a-z0-9][a-z0-9_-]{0,63}");
	expect_only_at(STEP("{ id: \"a\\0\", kind: command, run: x }"), "\"a",
	               "phases[0].steps[0].id: must match [a-z0-9][a-z0-9_-]{0,63}");
	/* non-ASCII text is fine */
	expect_ok(STEP("{ id: a, kind: agent, prompt: \"caf\\u00e9 \\u2713\" }"));
	assert_string_equal(gets(step0(doc, 0), "prompt"), "caf\xc3\xa9 \xe2\x9c\x93");
}

/* Every error of a file, in document order; an error in one step does not
 * hide the structural errors of later ones. */
static void
test_all_errors_reported(void **state)
{
	const char *yaml =
	    "name: Bad_Name\n"
	    "version: 0\n" BODY "      - { id: a, kind: command, run: x, retry: 99 }\n"
	    "      - { id: b, kind: agent, prompt: y, max_turns: 0 }\n"
	    "      - { id: c, kind: checkpoint }\n";
	const char *want =
	    NAME ":1:7: name: must match [a-z0-9][a-z0-9-]{0,63}\n" NAME
	         ":2:10: version: expected an integer from 1 to 1000000\n" NAME
	         ":11:48: phases[0].steps[0].retry: expected an integer from 0 to 10\n" NAME
	         ":12:53: phases[0].steps[1].max_turns: expected an integer from 1 to "
	         "1000\n" NAME ":13:9: phases[0].steps[2]: missing key 'message'\n";

	assert_int_equal(compile(yaml), -1);
	assert_string_equal(err, want);
	assert_int_equal(nerr, 5);
	assert_null(doc);
}

/* YAML features that are refused */

static void
test_anchors_aliases_tags(void **state)
{
	expect_only_at(STEP("{ id: &i a, kind: command, run: x }"), "&i",
	               "anchors are not allowed");
	expect_only_at(STEP("{ id: a, kind: command, run: *r }"), "*r", "aliases are not allowed");
	expect_only_at(STEP("{ id: a, kind: command, run: !!str x }"), "!!str",
	               "tags are not allowed");
	expect_only_at(STEP("!step { id: a, kind: command, run: x }"), "!step",
	               "tags are not allowed");
	expect_only_at(HEAD ONE "*k : 1\n", "*k", "aliases are not allowed");
	expect_error_at(HEAD ONE "&k x: 1\n", "&k", "anchors are not allowed");
	expect_error_at(HEAD ONE "&k x: 1\n", "&k", "unknown key 'x'");
	assert_int_equal(count_lines(err), 2);
	/* the value of an unknown key is not looked at, but refused all the same */
	expect_error_at(HEAD ONE "bogus: [ &a x, *a ]\n", "*a", "aliases are not allowed");
	assert_int_equal(count_lines(err), 3);
}

/* A billion-laughs file fails fast and reports each alias, expanding none. */
static void
test_alias_bomb(void **state)
{
	const char *bomb =
	    "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n"
	    "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
	    "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
	    "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
	    "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
	    "f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
	    "g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n"
	    "h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\n"
	    "i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]\n";

	expect_error(bomb, "2:4: anchors are not allowed");
	expect_error(bomb, "9:8: aliases are not allowed");
	/* 9 unknown keys, 9 anchors, 8 x 9 aliases, 4 missing keys */
	assert_int_equal(count_lines(err), 9 + 9 + 72 + 4);
	assert_int_equal(nerr, 94);
}

static void
test_syntax_errors(void **state)
{
	expect_only("name: t\n  version: 1\n",
	            "2:10: syntax error: mapping values are not allowed in this context");
	/* the structure is unknown after it: only it (and anchors before it) */
	expect_only(
	    "bogus: 1\nname: \"unterminated\nversion: x\n",
	    "4:1: syntax error: found unexpected end of stream (while scanning a quoted scalar)");
	expect_error("x: &a 1\nname: \"open\n", "1:4: anchors are not allowed");
	assert_int_equal(count_lines(err), 2);
	expect_only("name: \"\xff\"\n", "1:8: syntax error: invalid leading UTF-8 octet");
	/* a second document is refused and not read; the first is checked */
	expect_only(HEAD ONE "---\nname: u\n", "12:1: only one YAML document is allowed");
	expect_error("bogus: 1\n---\n[[[\n", "1:1: unknown key 'bogus'");
	expect_error("bogus: 1\n---\n[[[\n", "2:1: only one YAML document is allowed");
	assert_int_equal(count_lines(err), 6);
}

static void
test_deep_nesting(void **state)
{
	char yaml[4096];
	size_t len;

	snprintf(yaml, sizeof(yaml), HEAD ONE "x: ");
	len = strlen(yaml);
	memset(yaml + len, '[', 31); /* with the top mapping: 32 levels */
	memset(yaml + len + 31, ']', 31);
	strcpy(yaml + len + 62, "\n");
	expect_only(yaml, "12:1: unknown key 'x'");
	memset(yaml + len, '[', 32);
	memset(yaml + len + 32, ']', 32);
	strcpy(yaml + len + 64, "\n");
	expect_only(yaml, "12:35: nested deeper than 32 levels");

	memset(big, '[', TMPL_MAX_SIZE);
	memcpy(big, "x: ", 3);
	assert_int_equal(compile_n(big, TMPL_MAX_SIZE), -1);
	assert_string_equal(err, NAME ":1:35: nested deeper than 32 levels\n");
}

static void
test_size_limit(void **state)
{
	size_t n = strlen(HEAD ONE);

	memset(big, '#', TMPL_MAX_SIZE + 1);
	memcpy(big, HEAD ONE, n);
	big[TMPL_MAX_SIZE - 1] = '\n';
	assert_int_equal(compile_n(big, TMPL_MAX_SIZE), 0);
	assert_int_equal(compile_n(big, TMPL_MAX_SIZE + 1), -1);
	assert_string_equal(err, NAME ": larger than 262144 bytes\n");
	assert_int_equal(nerr, 1);
}

/* A small errbuf holds whole lines only, and the call still fails. */
static void
test_small_errbuf(void **state)
{
	const char *yaml = HEAD ONE "a: 1\nb: 2\nc: 3\n";
	char small[60];
	json_t *out = NULL;
	unsigned n = 0;

	memset(small, 'X', sizeof(small));
	assert_int_equal(tmpl_compile(NAME, (const unsigned char *)yaml, strlen(yaml), &out, small,
	                              sizeof(small), &n),
	                 -1);
	assert_string_equal(small, NAME ":12:1: unknown key 'a'\n" NAME ":13:1: unknown key 'b'\n");
	assert_int_equal(n, 3);
	assert_null(out);
	assert_int_equal(
	    tmpl_compile(NAME, (const unsigned char *)yaml, strlen(yaml), &out, small, 5, &n), -1);
	assert_string_equal(small, "");
	assert_int_equal(
	    tmpl_compile(NAME, (const unsigned char *)yaml, strlen(yaml), &out, NULL, 0, NULL), -1);
	assert_int_equal(tmpl_compile(NULL, (const unsigned char *)"x: 1\n", 5, &out, small,
	                              sizeof(small), NULL),
	                 -1);
	assert_string_equal(small, "(template):1:1: unknown key 'x'\n");
}

/* Files */

static char tmpdir[] = "/tmp/agrippa-test-tmpl-XXXXXX";

static void
write_file(const char *path, const char *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	close(fd);
}

static void
test_compile_file(void **state)
{
	char path[256], want[512];

	snprintf(path, sizeof(path), "%s/t.yaml", tmpdir);
	write_file(path, HEAD ONE, strlen(HEAD ONE));
	assert_int_equal(compile_path(path), 0);
	assert_string_equal(gets(doc, "name"), "t");
	/* positions name the file */
	write_file(path, "name: T\nversion: 1\n" BODY ONE,
	           strlen("name: T\nversion: 1\n" BODY ONE));
	assert_int_equal(compile_path(path), -1);
	snprintf(want, sizeof(want), "%s:1:7: name: must match [a-z0-9][a-z0-9-]{0,63}\n", path);
	assert_string_equal(err, want);
	/* exactly the limit passes, one byte more does not */
	memset(big, '#', TMPL_MAX_SIZE + 1);
	memcpy(big, HEAD ONE, strlen(HEAD ONE));
	big[TMPL_MAX_SIZE - 1] = '\n';
	write_file(path, big, TMPL_MAX_SIZE);
	assert_int_equal(compile_path(path), 0);
	write_file(path, big, TMPL_MAX_SIZE + 1);
	assert_int_equal(compile_path(path), -1);
	snprintf(want, sizeof(want), "%s: larger than 262144 bytes\n", path);
	assert_string_equal(err, want);
	assert_int_equal(nerr, 1);
	assert_null(doc);
	unlink(path);

	assert_int_equal(compile_path("/nonexistent/t.yaml"), -1);
	assert_string_equal(err, "/nonexistent/t.yaml: No such file or directory\n");
	assert_int_equal(nerr, 1);
	assert_int_equal(compile_path(tmpdir), -1);
	snprintf(want, sizeof(want), "%s: not a regular file\n", tmpdir);
	assert_string_equal(err, want);
	/* a FIFO must not hang the caller */
	snprintf(path, sizeof(path), "%s/fifo.yaml", tmpdir);
	assert_int_equal(mkfifo(path, 0600), 0);
	assert_int_equal(compile_path(path), -1);
	snprintf(want, sizeof(want), "%s: not a regular file\n", path);
	assert_string_equal(err, want);
	unlink(path);
}

static int
setup_dir(void **state)
{
	return mkdtemp(tmpdir) == NULL ? -1 : 0;
}

static int
teardown_dir(void **state)
{
	json_decref(doc);
	doc = NULL;
	return rmdir(tmpdir);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_shipped_templates),
	    cmocka_unit_test(test_fix_failing_test),
	    cmocka_unit_test(test_run_tests),
	    cmocka_unit_test(test_compiled_form),
	    cmocka_unit_test(test_kind_defaults),
	    cmocka_unit_test(test_flow_and_block),
	    cmocka_unit_test(test_top_level),
	    cmocka_unit_test(test_name_version_description),
	    cmocka_unit_test(test_params),
	    cmocka_unit_test(test_params_limit),
	    cmocka_unit_test(test_workspace),
	    cmocka_unit_test(test_workspace_ref),
	    cmocka_unit_test(test_ref_rules),
	    cmocka_unit_test(test_budget),
	    cmocka_unit_test(test_phases),
	    cmocka_unit_test(test_phase_and_step_limits),
	    cmocka_unit_test(test_step_common),
	    cmocka_unit_test(test_step_kind_keys),
	    cmocka_unit_test(test_requires),
	    cmocka_unit_test(test_requires_limit),
	    cmocka_unit_test(test_produces),
	    cmocka_unit_test(test_network),
	    cmocka_unit_test(test_network_limits),
	    cmocka_unit_test(test_references),
	    cmocka_unit_test(test_control_chars),
	    cmocka_unit_test(test_all_errors_reported),
	    cmocka_unit_test(test_anchors_aliases_tags),
	    cmocka_unit_test(test_alias_bomb),
	    cmocka_unit_test(test_syntax_errors),
	    cmocka_unit_test(test_deep_nesting),
	    cmocka_unit_test(test_size_limit),
	    cmocka_unit_test(test_small_errbuf),
	    cmocka_unit_test(test_compile_file),
	};

	return cmocka_run_group_tests_name("tmpl", tests, setup_dir, teardown_dir);
}
