/*
 * Unit tests for MCP server specs and their credentials (common/mcpspec.c):
 * every field's good forms and its bad ones, each refused with the field
 * named, the normal form (what mcp add stores) and reading it back, the
 * credentials' format, which never quotes a value, the expansion of
 * ${credentials.KEY}, and what is redacted for stored credentials.
 */
#include <sys/stat.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <sodium.h>

#include "common/mcpspec.h"

#define SECRET "s3cr3t-VALUE-xyz" /* a credential value: never in an error */

static char err[1024];

/* The spec text with ctx: accepted. */
static struct mcpspec *
good_ctx(const char *text, const struct mcpspec_ctx *ctx)
{
	struct mcpspec *s = mcpspec_parse(text, strlen(text), ctx, err, sizeof(err));

	if (s == NULL)
		fail_msg("refused: %s\n  %s", text, err);
	return s;
}

static struct mcpspec *
good(const char *text)
{
	return good_ctx(text, NULL);
}

/* The spec text with ctx: refused, the error starting with want. */
static void
bad_ctx(const char *text, const struct mcpspec_ctx *ctx, const char *want)
{
	struct mcpspec *s = mcpspec_parse(text, strlen(text), ctx, err, sizeof(err));

	if (s != NULL) {
		mcpspec_free(s);
		fail_msg("accepted: %s", text);
	}
	if (strncmp(err, want, strlen(want)) != 0)
		fail_msg("%s\n  error: %s\n  wanted: %s...", text, err, want);
	if (strstr(err, SECRET) != NULL)
		fail_msg("the error quotes a credential: %s", err);
}

static void
bad(const char *text, const char *want)
{
	bad_ctx(text, NULL, want);
}

/* A stdio spec with one more field (JSON text after "command"). */
static char spec_buf[16384];
static const char *
stdio_with(const char *more)
{
	snprintf(spec_buf, sizeof(spec_buf),
	         "{\"transport\": \"stdio\", \"command\": [\"node\"]%s%s}", more[0] ? ", " : "",
	         more);
	return spec_buf;
}

static const char *
http_with(const char *more)
{
	snprintf(spec_buf, sizeof(spec_buf),
	         "{\"transport\": \"http\", \"url\": \"https://mcp.example.com/mcp\"%s%s}",
	         more[0] ? ", " : "", more);
	return spec_buf;
}

/* The normal form as compact JSON; caller frees. */
static char *
normal(const struct mcpspec *s)
{
	return json_dumps(s->json, JSON_COMPACT);
}

static struct mcp_creds *
creds(const char *text)
{
	struct mcp_creds *c = mcp_creds_parse(text, strlen(text), err, sizeof(err));

	if (c == NULL)
		fail_msg("credentials refused: %s", err);
	return c;
}

/* ---- stdio --------------------------------------------------------------------- */

static void
t_stdio_minimal(void **state)
{
	struct mcpspec *s = good("{\"transport\": \"stdio\", \"command\": [\"node\"]}");
	char *n = normal(s);

	assert_string_equal(n, "{\"transport\":\"stdio\",\"command\":[\"node\"],\"env\":{},"
	                       "\"paths\":[],\"workspace\":\"none\",\"network\":null,"
	                       "\"startup_timeout\":30,\"call_timeout\":60}");
	assert_int_equal(s->transport, MCPSPEC_STDIO);
	assert_int_equal(s->argc, 1);
	assert_string_equal(s->argv[0], "node");
	assert_null(s->argv[1]);
	assert_int_equal(s->nenv, 0);
	assert_int_equal(s->npaths, 0);
	assert_int_equal(s->workspace, MCPSPEC_WS_NONE);
	assert_int_equal(s->nallow + s->npresets, 0);
	assert_int_equal(s->startup_timeout, MCPSPEC_STARTUP_DEFAULT);
	assert_int_equal(s->call_timeout, MCPSPEC_CALL_DEFAULT);
	assert_null(s->url);
	free(n);
	mcpspec_free(s);
}

static const char full[] =
    "{\"transport\": \"stdio\","
    " \"command\": [\"/usr/bin/node\", \"/opt/mcp/everything/dist/index.js\", \"\", \"stdio\"],"
    " \"env\": {\"API_TOKEN\": \"${credentials.token}\", \"MODE\": \"a\\tb\","
    "          \"BOTH\": \"${credentials.token}:${credentials.other}\"},"
    " \"paths\": [\"/opt/mcp/everything\", \"/usr/lib/node_modules\"],"
    " \"workspace\": \"read\","
    " \"network\": {\"allow\": [\"api.github.com\", \"*.example.org:8443\"],"
    "               \"presets\": [\"npm\"]},"
    " \"startup_timeout\": 600, \"call_timeout\": 1}";

static void
t_stdio_full(void **state)
{
	struct mcp_creds *c = creds("{\"token\": \"" SECRET "\", \"other\": \"another-one\"}");
	struct mcpspec_ctx ctx = {.flags = MCPSPEC_F_CREDS, .creds = c};
	struct mcpspec *s = good_ctx(full, &ctx), *back;

	assert_int_equal(s->argc, 4);
	assert_string_equal(s->argv[1], "/opt/mcp/everything/dist/index.js");
	assert_string_equal(s->argv[2], "");
	assert_null(s->argv[4]);
	assert_int_equal(s->nenv, 3);
	assert_string_equal(s->env[0].name, "API_TOKEN");
	assert_string_equal(s->env[0].value, "${credentials.token}");
	assert_int_equal(s->env[0].refs, 1);
	assert_string_equal(s->env[1].value, "a\tb");
	assert_int_equal(s->env[1].refs, 0);
	assert_int_equal(s->env[2].refs, 2);
	assert_int_equal(s->npaths, 2);
	assert_string_equal(s->paths[1], "/usr/lib/node_modules");
	assert_int_equal(s->workspace, MCPSPEC_WS_READ);
	assert_int_equal(s->nallow, 2);
	assert_string_equal(s->allow[0].domain, "api.github.com");
	assert_int_equal(s->allow[0].wildcard, 0);
	assert_string_equal(s->allow[1].domain, "example.org");
	assert_int_equal(s->allow[1].wildcard, 1);
	assert_int_equal(s->allow[1].port, 8443);
	assert_int_equal(s->npresets, 1);
	assert_string_equal(s->presets[0], "npm");
	assert_int_equal(s->startup_timeout, 600);
	assert_int_equal(s->call_timeout, 1);
	/* no value of a credential in the normal form: only the references */
	char *n = normal(s);
	assert_null(strstr(n, SECRET));
	assert_non_null(strstr(n, "${credentials.token}"));
	/* the normal form reads back as itself, without the credentials */
	back = mcpspec_check(s->json, NULL, err, sizeof(err));
	assert_non_null(back);
	assert_true(json_equal(back->json, s->json));
	free(n);
	mcpspec_free(back);
	mcpspec_free(s);
	mcp_creds_free(c);
}

static void
t_transport(void **state)
{
	bad("[]", "spec: must be a JSON object");
	bad("{}", "spec.transport: missing");
	bad("{\"transport\": 1, \"command\": [\"x\"]}",
	    "spec.transport: must be \"stdio\" or \"http\"");
	bad("{\"transport\": \"sse\", \"command\": [\"x\"]}", "spec.transport: must be");
	bad("{\"transport\": \"STDIO\", \"command\": [\"x\"]}", "spec.transport: must be");
}

static void
t_keys(void **state)
{
	bad(stdio_with("\"args\": [\"--stdio\"]"), "spec.args: unknown field");
	bad(stdio_with("\"url\": \"https://x.example\""),
	    "spec.url: not a field of a stdio server");
	bad(stdio_with("\"headers\": {}"), "spec.headers: not a field of a stdio server");
	bad(http_with("\"command\": [\"x\"]"), "spec.command: not a field of an http server");
	bad(http_with("\"startup_timeout\": 5"), "spec.startup_timeout: not a field of an http");
	bad(http_with("\"network\": null"), "spec.network: not a field of an http server");
	bad(http_with("\"workspace\": \"read\""), "spec.workspace: not a field of an http server");
	bad(stdio_with("\"a b\\n\": 1"), "spec[\"a b\\x0a\"]: unknown field");
	/* a duplicate key anywhere is refused by the reader */
	bad("{\"transport\": \"stdio\", \"transport\": \"http\", \"command\": [\"x\"]}", "1:");
}

static void
t_command(void **state)
{
	char big[MCPSPEC_ARG_MAX + 64], many[MCPSPEC_ARGV_MAX * 8 + 64];
	struct mcpspec *s;
	size_t i, n;

	bad("{\"transport\": \"stdio\"}", "spec.command: missing");
	bad("{\"transport\": \"stdio\", \"command\": \"node\"}", "spec.command: must be an array");
	bad("{\"transport\": \"stdio\", \"command\": []}", "spec.command: must not be empty");
	bad("{\"transport\": \"stdio\", \"command\": [\"node\", 3]}",
	    "spec.command[1]: must be a string");
	bad("{\"transport\": \"stdio\", \"command\": [\"\"]}",
	    "spec.command[0]: the program must not be empty");
	bad("{\"transport\": \"stdio\", \"command\": [\"./server\"]}",
	    "spec.command[0]: the program is an absolute path or a bare name");
	bad("{\"transport\": \"stdio\", \"command\": [\"bin/server\"]}",
	    "spec.command[0]: the program is");
	bad("{\"transport\": \"stdio\", \"command\": [\"node\", \"a\\nb\"]}",
	    "spec.command[1]: must hold no control characters");
	bad("{\"transport\": \"stdio\", \"command\": [\"node\", \"--token=${credentials.tok}\"]}",
	    "spec.command[1]: credentials go in env, never in the command line");
	n = (size_t)snprintf(big, sizeof(big), "{\"transport\": \"stdio\", \"command\": [\"");
	memset(big + n, 'a', MCPSPEC_ARG_MAX + 1);
	snprintf(big + n + MCPSPEC_ARG_MAX + 1, sizeof(big) - n - MCPSPEC_ARG_MAX - 1, "\"]}");
	bad(big, "spec.command[0]: at most 4096 bytes");
	n = (size_t)snprintf(many, sizeof(many), "{\"transport\": \"stdio\", \"command\": [\"x\"");
	for (i = 0; i < MCPSPEC_ARGV_MAX; i++)
		n += (size_t)snprintf(many + n, sizeof(many) - n, ", \"a\"");
	snprintf(many + n, sizeof(many) - n, "]}");
	bad(many, "spec.command: at most 64 entries");
	/* a bare name, an absolute path; other arguments may be anything printable */
	s = good(
	    "{\"transport\": \"stdio\", \"command\": [\"npx\", \"-y\", \"${HOME}\", \"../x\"]}");
	assert_string_equal(s->argv[2], "${HOME}");
	mcpspec_free(s);
	mcpspec_free(good("{\"transport\": \"stdio\", \"command\": [\"/usr/bin/node\"]}"));
}

static void
t_env(void **state)
{
	struct mcp_creds *c = creds("{\"tok\": \"" SECRET "\"}");
	struct mcpspec_ctx ctx = {.flags = MCPSPEC_F_CREDS, .creds = c};
	struct mcpspec_ctx none = {.flags = MCPSPEC_F_CREDS, .creds = NULL};
	char many[MCPSPEC_ENV_MAX * 24 + 128], val[MCPSPEC_VALUE_MAX + 128];
	struct mcpspec *s;
	size_t i, n;

	bad(stdio_with("\"env\": []"), "spec.env: must be an object of NAME: value");
	bad(stdio_with("\"env\": null"), "spec.env: must be an object");
	bad(stdio_with("\"env\": {\"1X\": \"v\"}"),
	    "spec.env.1X: not an environment variable name");
	bad(stdio_with("\"env\": {\"A-B\": \"v\"}"),
	    "spec.env.A-B: not an environment variable name");
	bad(stdio_with("\"env\": {\"\": \"v\"}"),
	    "spec.env[\"\"]: not an environment variable name");
	bad(stdio_with("\"env\": {\"A=B\": \"v\"}"),
	    "spec.env[\"A=B\"]: not an environment variable name");
	bad(stdio_with("\"env\": {\"PATH\": \"/bin\"}"),
	    "spec.env.PATH: the sandbox sets this variable itself");
	bad(stdio_with("\"env\": {\"HOME\": \"/root\"}"), "spec.env.HOME: the sandbox sets");
	bad(stdio_with("\"env\": {\"HTTPS_PROXY\": \"http://x\"}"),
	    "spec.env.HTTPS_PROXY: the sandbox sets");
	bad(stdio_with("\"env\": {\"TMPDIR\": \"/x\"}"), "spec.env.TMPDIR: the sandbox sets");
	bad(stdio_with("\"env\": {\"AGRIPPA_EGRESS\": \"0\"}"),
	    "spec.env.AGRIPPA_EGRESS: AGRIPPA_* variables");
	bad(stdio_with("\"env\": {\"LD_PRELOAD\": \"/x.so\"}"),
	    "spec.env.LD_PRELOAD: the dynamic loader");
	bad(stdio_with("\"env\": {\"X\": 1}"), "spec.env.X: must be a string");
	bad(stdio_with("\"env\": {\"X\": \"a\\nb\"}"),
	    "spec.env.X: must hold no control characters other than tab");
	bad(stdio_with("\"env\": {\"X\": \"a\\u007fb\"}"), "spec.env.X: must hold no control");
	bad(stdio_with("\"env\": {\"X\": \"${HOME}\"}"),
	    "spec.env.X: only ${credentials.KEY} is expanded");
	bad(stdio_with("\"env\": {\"X\": \"${credentials.tok\"}"),
	    "spec.env.X: an unterminated ${credentials.KEY}");
	bad(stdio_with("\"env\": {\"X\": \"${credentials.a b}\"}"),
	    "spec.env.X: ${credentials.a b}: a key must match");
	bad(stdio_with("\"env\": {\"X\": \"${credentials.}\"}"),
	    "spec.env.X: ${credentials.}: a key must match");
	bad_ctx(stdio_with("\"env\": {\"TOKEN\": \"${credentials.other}\"}"), &ctx,
	        "spec.env.TOKEN: ${credentials.other}: no such credential");
	bad_ctx(stdio_with("\"env\": {\"TOKEN\": \"${credentials.tok}\"}"), &none,
	        "spec.env.TOKEN: ${credentials.tok}: no such credential");
	n = (size_t)snprintf(
	    val, sizeof(val), "%s",
	    "{\"transport\": \"stdio\", \"command\": [\"x\"], \"env\": {\"X\": \"");
	memset(val + n, 'v', MCPSPEC_VALUE_MAX + 1);
	snprintf(val + n + MCPSPEC_VALUE_MAX + 1, sizeof(val) - n - MCPSPEC_VALUE_MAX - 1, "\"}}");
	bad(val, "spec.env.X: at most 4096 bytes");
	n = (size_t)snprintf(many, sizeof(many),
	                     "{\"transport\": \"stdio\", \"command\": [\"x\"], \"env\": {");
	for (i = 0; i <= MCPSPEC_ENV_MAX; i++)
		n += (size_t)snprintf(many + n, sizeof(many) - n, "%s\"V%zu\": \"x\"",
		                      i ? ", " : "", i);
	snprintf(many + n, sizeof(many) - n, "}}");
	bad(many, "spec.env: at most 64 entries");
	/* good: references to given credentials; without the check, any key */
	s = good_ctx(
	    stdio_with("\"env\": {\"TOKEN\": \"Bearer ${credentials.tok}\", \"_x9\": \"\"}"), &ctx);
	assert_int_equal(s->nenv, 2);
	assert_int_equal(s->env[0].refs, 1);
	mcpspec_free(s);
	mcpspec_free(
	    good(stdio_with("\"env\": {\"TOKEN\": \"${credentials.anything}\", \"LC_ALL\": \"C\", "
	                    "\"NODE_OPTIONS\": \"--max-old-space-size=256\"}")));
	mcp_creds_free(c);
}

static void
t_paths(void **state)
{
	static const char *const forbidden[] = {"/var/lib/agrippa", "/etc/agrippad/master.key",
	                                        "/etc/agrippad.yaml"};
	struct mcpspec_ctx ctx = {.forbidden = forbidden, .nforbidden = 3};
	struct mcpspec *s;

	bad(stdio_with("\"paths\": \"/opt\""), "spec.paths: must be an array");
	bad(stdio_with("\"paths\": [1]"), "spec.paths[0]: must be a string");
	bad(stdio_with("\"paths\": [\"opt/mcp\"]"), "spec.paths[0]: must be an absolute path");
	bad(stdio_with("\"paths\": [\"\"]"), "spec.paths[0]: must be an absolute path");
	bad(stdio_with("\"paths\": [\"/opt\", \"/\"]"), "spec.paths[1]: the whole file system");
	bad(stdio_with("\"paths\": [\"/opt/\"]"), "spec.paths[0]: must not end with '/'");
	bad(stdio_with("\"paths\": [\"/opt//mcp\"]"), "spec.paths[0]: must not hold '//'");
	bad(stdio_with("\"paths\": [\"/opt/./mcp\"]"), "spec.paths[0]: must not hold '.' or '..'");
	bad(stdio_with("\"paths\": [\"/opt/../etc\"]"), "spec.paths[0]: must not hold '.' or '..'");
	bad(stdio_with("\"paths\": [\"/opt/..\"]"), "spec.paths[0]: must not hold '.' or '..'");
	bad(stdio_with("\"paths\": [\"/opt/.\"]"), "spec.paths[0]: must not hold '.' or '..'");
	bad(stdio_with("\"paths\": [\"/opt\\tx\"]"), "spec.paths[0]: must hold no control");
	bad(stdio_with("\"paths\": [\"/opt\", \"/opt\"]"), "spec.paths[1]: /opt: duplicate entry");
	bad(stdio_with("\"paths\": [\"/proc\"]"),
	    "spec.paths[0]: /proc: the sandbox mounts its own /proc");
	bad(stdio_with("\"paths\": [\"/tmp/mcp\"]"),
	    "spec.paths[0]: /tmp/mcp: the sandbox mounts its own /tmp");
	bad(stdio_with("\"paths\": [\"/workspace\"]"),
	    "spec.paths[0]: /workspace: the sandbox mounts");
	bad(stdio_with("\"paths\": [\"/dev/shm\"]"), "spec.paths[0]: /dev/shm: the sandbox mounts");
	bad(stdio_with("\"paths\": [\"/sys/fs\"]"), "spec.paths[0]: /sys/fs: the sandbox mounts");
	/* the daemon's own: the same, below, or holding one */
	bad_ctx(stdio_with("\"paths\": [\"/var/lib/agrippa\"]"), &ctx,
	        "spec.paths[0]: /var/lib/agrippa: overlaps /var/lib/agrippa");
	bad_ctx(stdio_with("\"paths\": [\"/var/lib/agrippa/pg\"]"), &ctx,
	        "spec.paths[0]: /var/lib/agrippa/pg: overlaps");
	bad_ctx(stdio_with("\"paths\": [\"/opt\", \"/var\"]"), &ctx,
	        "spec.paths[1]: /var: overlaps /var/lib/agrippa");
	bad_ctx(stdio_with("\"paths\": [\"/etc\"]"), &ctx,
	        "spec.paths[0]: /etc: overlaps /etc/agrippad/master.key");
	bad_ctx(stdio_with("\"paths\": [\"/etc/agrippad\"]"), &ctx,
	        "spec.paths[0]: /etc/agrippad: overlaps");
	s = good_ctx(stdio_with("\"paths\": [\"/var/lib/agrippa2\", \"/workspaces\", "
	                        "\"/etc/agrippad.d\", \"/opt/x/y\"]"),
	             &ctx);
	assert_int_equal(s->npaths, 4);
	assert_string_equal(s->paths[3], "/opt/x/y");
	assert_null(s->paths[4]);
	mcpspec_free(s);
	bad(stdio_with(
	        "\"paths\": [\"/a\",\"/b\",\"/c\",\"/d\",\"/e\",\"/f\",\"/g\",\"/h\",\"/i\",\"/j\","
	        "\"/k\",\"/l\",\"/m\",\"/n\",\"/o\",\"/p\",\"/q\"]"),
	    "spec.paths: at most 16");
}

/* With MCPSPEC_F_RESOLVE, a link is judged by where it leads. */
static void
t_paths_resolved(void **state)
{
	char dir[] = "/var/tmp/mcpspec.XXXXXX", own[64], link[64], root[64], proc[64], text[512];
	const char *forbidden[1] = {own};
	struct mcpspec_ctx ctx = {
	    .flags = MCPSPEC_F_RESOLVE, .forbidden = forbidden, .nforbidden = 1};
	struct mcpspec_ctx plain = {.forbidden = forbidden, .nforbidden = 1};

	assert_non_null(mkdtemp(dir));
	snprintf(own, sizeof(own), "%s/state", dir);
	snprintf(link, sizeof(link), "%s/link", dir);
	snprintf(root, sizeof(root), "%s/root", dir);
	snprintf(proc, sizeof(proc), "%s/proc", dir);
	assert_int_equal(mkdir(own, 0700), 0);
	assert_int_equal(symlink(own, link), 0);
	assert_int_equal(symlink("/", root), 0);
	assert_int_equal(symlink("/proc/self", proc), 0);
	snprintf(text, sizeof(text),
	         "{\"transport\": \"stdio\", \"command\": [\"x\"], \"paths\": [\"%s\"]}", link);
	bad_ctx(text, &ctx, "spec.paths[0]: ");
	assert_non_null(strstr(err, "leads to"));
	assert_non_null(strstr(err, "the daemon's own"));
	mcpspec_free(good_ctx(text, &plain)); /* as written, it is not the daemon's */
	snprintf(text, sizeof(text),
	         "{\"transport\": \"stdio\", \"command\": [\"x\"], \"paths\": [\"%s\"]}", root);
	bad_ctx(text, &ctx, "spec.paths[0]: ");
	assert_non_null(strstr(err, "leads to /: the whole file system"));
	snprintf(text, sizeof(text),
	         "{\"transport\": \"stdio\", \"command\": [\"x\"], \"paths\": [\"%s\"]}", proc);
	bad_ctx(text, &ctx, "spec.paths[0]: ");
	assert_non_null(strstr(err, "the sandbox mounts its own /proc"));
	/* a path that does not exist (yet) is judged as written */
	snprintf(text, sizeof(text),
	         "{\"transport\": \"stdio\", \"command\": [\"x\"], \"paths\": [\"%s/later\"]}",
	         dir);
	mcpspec_free(good_ctx(text, &ctx));
	unlink(link);
	unlink(root);
	unlink(proc);
	rmdir(own);
	rmdir(dir);
}

static void
t_path_overlaps(void **state)
{
	assert_true(mcpspec_path_overlaps("/var/lib/agrippa", "/var/lib/agrippa"));
	assert_true(mcpspec_path_overlaps("/var/lib/agrippa", "/var/lib/agrippa/"));
	assert_true(mcpspec_path_overlaps("/var/lib/agrippa/x", "/var/lib/agrippa"));
	assert_true(mcpspec_path_overlaps("/var", "/var/lib/agrippa"));
	assert_true(mcpspec_path_overlaps("/opt", "/"));
	assert_false(mcpspec_path_overlaps("/var/lib/agrippa2", "/var/lib/agrippa"));
	assert_false(mcpspec_path_overlaps("/var/lib/agr", "/var/lib/agrippa"));
	assert_false(mcpspec_path_overlaps("/opt", "/var"));
	assert_false(mcpspec_path_overlaps("/opt", ""));
}

static void
t_workspace(void **state)
{
	struct mcpspec *s;

	s = good(stdio_with("\"workspace\": \"write\""));
	assert_int_equal(s->workspace, MCPSPEC_WS_WRITE);
	mcpspec_free(s);
	s = good(stdio_with("\"workspace\": \"none\""));
	assert_int_equal(s->workspace, MCPSPEC_WS_NONE);
	mcpspec_free(s);
	bad(stdio_with("\"workspace\": \"readWrite\""),
	    "spec.workspace: must be \"none\", \"read\" or \"write\"");
	bad(stdio_with("\"workspace\": true"), "spec.workspace: must be");
	bad(stdio_with("\"workspace\": null"), "spec.workspace: must be");
}

static void
t_network(void **state)
{
	char many[MCPSPEC_ALLOW_MAX * 24 + 128];
	struct mcpspec *s;
	size_t i, n;
	char *txt;

	s = good(stdio_with("\"network\": null"));
	assert_true(json_is_null(json_object_get(s->json, "network")));
	mcpspec_free(s);
	s = good(stdio_with("\"network\": {}"));
	assert_true(json_is_null(json_object_get(s->json, "network")));
	mcpspec_free(s);
	s = good(stdio_with("\"network\": {\"allow\": [], \"presets\": []}"));
	assert_true(json_is_null(json_object_get(s->json, "network")));
	mcpspec_free(s);
	s = good(
	    stdio_with("\"network\": {\"allow\": [\"registry.npmjs.org:443\", \"*.github.com\"]}"));
	txt = json_dumps(json_object_get(s->json, "network"), JSON_COMPACT);
	assert_string_equal(
	    txt, "{\"allow\":[\"registry.npmjs.org:443\",\"*.github.com\"],\"presets\":[]}");
	assert_int_equal(s->allow[0].port, 443);
	free(txt);
	mcpspec_free(s);
	bad(stdio_with("\"network\": []"), "spec.network: must be an object");
	bad(stdio_with("\"network\": {\"deny\": []}"), "spec.network.deny: unknown field");
	bad(stdio_with("\"network\": {\"allow\": \"github.com\"}"),
	    "spec.network.allow: must be an array");
	bad(stdio_with("\"network\": {\"allow\": [1]}"), "spec.network.allow[0]: must be a string");
	bad(stdio_with("\"network\": {\"allow\": [\"GitHub.com\"]}"),
	    "spec.network.allow[0]: an entry must be in lower case");
	bad(stdio_with("\"network\": {\"allow\": [\"https://github.com/\"]}"),
	    "spec.network.allow[0]: an entry is a host name, not a URL");
	bad(stdio_with("\"network\": {\"allow\": [\"a.com\", \"10.0.0.1\"]}"),
	    "spec.network.allow[1]: ");
	bad(stdio_with("\"network\": {\"allow\": [\"*.com\"]}"),
	    "spec.network.allow[0]: a wildcard over a single label");
	bad(stdio_with("\"network\": {\"allow\": [\"*\"]}"), "spec.network.allow[0]: ");
	bad(stdio_with("\"network\": {\"allow\": [\"a.com:0\"]}"),
	    "spec.network.allow[0]: the port must be");
	bad(stdio_with("\"network\": {\"allow\": [\"${credentials.h}\"]}"),
	    "spec.network.allow[0]: no ${...}");
	bad(stdio_with("\"network\": {\"allow\": [\"a.com\", \"a.com\"]}"),
	    "spec.network.allow[1]: duplicate entry 'a.com'");
	bad(stdio_with("\"network\": {\"presets\": [\"NPM\"]}"),
	    "spec.network.presets[0]: a preset's name must match");
	bad(stdio_with("\"network\": {\"presets\": [\"npm\", \"npm\"]}"),
	    "spec.network.presets[1]: duplicate entry 'npm'");
	bad(stdio_with("\"network\": {\"presets\": [\"-x\"]}"),
	    "spec.network.presets[0]: a preset's name");
	n = (size_t)snprintf(
	    many, sizeof(many),
	    "{\"transport\": \"stdio\", \"command\": [\"x\"], \"network\": {\"allow\": [");
	for (i = 0; i <= MCPSPEC_ALLOW_MAX; i++)
		n += (size_t)snprintf(many + n, sizeof(many) - n, "%s\"h%zu.example.com\"",
		                      i ? ", " : "", i);
	snprintf(many + n, sizeof(many) - n, "]}}");
	bad(many, "spec.network.allow: at most 64 entries");
}

static void
t_timeouts(void **state)
{
	struct mcpspec *s;

	s = good(stdio_with("\"startup_timeout\": 1, \"call_timeout\": 3600"));
	assert_int_equal(s->startup_timeout, 1);
	assert_int_equal(s->call_timeout, 3600);
	mcpspec_free(s);
	bad(stdio_with("\"startup_timeout\": 0"),
	    "spec.startup_timeout: must be from 1 to 600 seconds");
	bad(stdio_with("\"startup_timeout\": 601"), "spec.startup_timeout: must be from 1 to 600");
	bad(stdio_with("\"startup_timeout\": -5"), "spec.startup_timeout: must be from 1");
	bad(stdio_with("\"startup_timeout\": 1.5"),
	    "spec.startup_timeout: must be a whole number of seconds");
	bad(stdio_with("\"startup_timeout\": \"30\""),
	    "spec.startup_timeout: must be a whole number");
	bad(stdio_with("\"call_timeout\": 3601"),
	    "spec.call_timeout: must be from 1 to 3600 seconds");
	bad(stdio_with("\"call_timeout\": true"), "spec.call_timeout: must be a whole number");
	bad(stdio_with("\"call_timeout\": 99999999999999999"), "spec.call_timeout: must be from 1");
	bad(http_with("\"call_timeout\": 0"), "spec.call_timeout: must be from 1 to 3600");
}

/* ---- http ------------------------------------------------------------------------- */

static void
t_http_url(void **state)
{
	struct mcpspec *s;
	char *n;

	s = good("{\"transport\": \"http\", \"url\": \"https://MCP.example.com/mcp?x=1\"}");
	n = normal(s);
	assert_string_equal(n,
	                    "{\"transport\":\"http\",\"url\":\"https://mcp.example.com/mcp?x=1\","
	                    "\"headers\":{},\"call_timeout\":60}");
	assert_int_equal(s->transport, MCPSPEC_HTTP);
	assert_string_equal(s->url, "https://mcp.example.com/mcp?x=1");
	assert_null(s->argv);
	free(n);
	mcpspec_free(s);
	s = good("{\"transport\": \"http\", \"url\": \"https://mcp.example.com\"}");
	assert_string_equal(s->url, "https://mcp.example.com/");
	mcpspec_free(s);
	/* plain http: loopback only */
	mcpspec_free(good("{\"transport\": \"http\", \"url\": \"http://127.0.0.1:3001/mcp\"}"));
	mcpspec_free(good("{\"transport\": \"http\", \"url\": \"http://127.8.9.10/mcp\"}"));
	mcpspec_free(good("{\"transport\": \"http\", \"url\": \"http://[::1]:3001/mcp\"}"));
	mcpspec_free(good("{\"transport\": \"http\", \"url\": \"http://localhost:3001/mcp\"}"));
	bad("{\"transport\": \"http\", \"url\": \"http://mcp.example.com/mcp\"}",
	    "spec.url: http:// only to a loopback host");
	bad("{\"transport\": \"http\", \"url\": \"http://10.0.0.1/mcp\"}",
	    "spec.url: http:// only to a loopback");
	bad("{\"transport\": \"http\", \"url\": \"http://[::ffff:127.0.0.1]/mcp\"}",
	    "spec.url: http:// only to a loopback");
	bad("{\"transport\": \"http\", \"url\": \"http://localhost.example.com/\"}",
	    "spec.url: http:// only");
	bad("{\"transport\": \"http\"}", "spec.url: missing");
	bad("{\"transport\": \"http\", \"url\": 5}", "spec.url: must be a string");
	bad("{\"transport\": \"http\", \"url\": \"\"}", "spec.url: must be 1 to 2048 bytes");
	bad("{\"transport\": \"http\", \"url\": \"ftp://mcp.example.com/\"}",
	    "spec.url: must be an https://HOST/... URL");
	bad("{\"transport\": \"http\", \"url\": \"HTTPS://mcp.example.com/\"}",
	    "spec.url: must be an https://HOST/... URL");
	bad("{\"transport\": \"http\", \"url\": \"https:/mcp.example.com/\"}",
	    "spec.url: must be an https://HOST/... URL");
	bad("{\"transport\": \"http\", \"url\": \"mcp.example.com/mcp\"}",
	    "spec.url: must be an https://HOST/... URL");
	bad("{\"transport\": \"http\", \"url\": \"https://user:pw@mcp.example.com/\"}",
	    "spec.url: must hold no user name or password");
	bad("{\"transport\": \"http\", \"url\": \"https://user@mcp.example.com/\"}",
	    "spec.url: must hold no user name");
	bad("{\"transport\": \"http\", \"url\": \"https://mcp.example.com/#frag\"}",
	    "spec.url: must have no fragment");
	bad("{\"transport\": \"http\", \"url\": \"https://mcp.example.com/ x\"}",
	    "spec.url: may hold only printable ASCII");
	bad("{\"transport\": \"http\", \"url\": \"https://mcp.example.com/?k=${credentials.k}\"}",
	    "spec.url: credentials go in headers");
	bad("{\"transport\": \"http\", \"url\": \"https:///mcp\"}", "spec.url: ");
	/* what is stored is what curl reads: one meaning for the proxy */
	s = good("{\"transport\": \"http\", \"url\": \"http://0x7f.1:8/mcp\"}");
	assert_string_equal(s->url, "http://127.0.0.1:8/mcp");
	mcpspec_free(s);
	s = good("{\"transport\": \"http\", \"url\": \"https://[::1]/a/../mcp\"}");
	assert_string_equal(s->url, "https://[::1]/mcp");
	mcpspec_free(s);
	bad("{\"transport\": \"http\", \"url\": \"https://a_b.example/mcp\"}",
	    "spec.url: the host: ");
}

static void
t_http_headers(void **state)
{
	struct mcp_creds *c = creds("{\"gh\": \"" SECRET "\"}");
	struct mcpspec_ctx ctx = {.flags = MCPSPEC_F_CREDS, .creds = c};
	struct mcpspec *s;

	s = good_ctx(http_with("\"headers\": {\"Authorization\": \"Bearer ${credentials.gh}\", "
	                       "\"X-Team\": \"core\"}, \"call_timeout\": 120"),
	             &ctx);
	assert_int_equal(s->nheaders, 2);
	assert_string_equal(s->headers[0].name, "Authorization");
	assert_string_equal(s->headers[0].value, "Bearer ${credentials.gh}");
	assert_int_equal(s->headers[0].refs, 1);
	assert_int_equal(s->headers[1].refs, 0);
	assert_int_equal(s->call_timeout, 120);
	mcpspec_free(s);
	bad(http_with("\"headers\": [\"Authorization: x\"]"),
	    "spec.headers: must be an object of NAME: value");
	bad(http_with("\"headers\": {\"Host\": \"evil.example\"}"),
	    "spec.headers.Host: the MCP client or HTTP sets this header itself");
	bad(http_with("\"headers\": {\"content-length\": \"0\"}"),
	    "spec.headers.content-length: the MCP client or HTTP sets");
	bad(http_with("\"headers\": {\"Transfer-Encoding\": \"chunked\"}"),
	    "spec.headers.Transfer-Encoding: the MCP client or HTTP sets");
	bad(http_with("\"headers\": {\"Content-Type\": \"text/plain\"}"),
	    "spec.headers.Content-Type: the MCP client");
	bad(http_with("\"headers\": {\"Mcp-Session-Id\": \"x\"}"),
	    "spec.headers.Mcp-Session-Id: Mcp-* headers are the MCP protocol's own");
	bad(http_with("\"headers\": {\"MCP-Protocol-Version\": \"2025-06-18\"}"),
	    "spec.headers.MCP-Protocol-Version: Mcp-*");
	bad(http_with("\"headers\": {\"Bad Name\": \"x\"}"),
	    "spec.headers[\"Bad Name\"]: not an HTTP header name");
	bad(http_with("\"headers\": {\"X:Y\": \"x\"}"),
	    "spec.headers[\"X:Y\"]: not an HTTP header name");
	bad(http_with("\"headers\": {\"\": \"x\"}"), "spec.headers[\"\"]: not an HTTP header name");
	bad(http_with("\"headers\": {\"Authorization\": \"a\", \"authorization\": \"b\"}"),
	    "spec.headers.authorization: the same header as Authorization");
	bad(http_with("\"headers\": {\"X-A\": \"a\\r\\nHost: evil\"}"),
	    "spec.headers.X-A: a header value is printable ASCII");
	bad(http_with("\"headers\": {\"X-A\": \"caf\\u00e9\"}"),
	    "spec.headers.X-A: a header value is printable ASCII");
	bad(http_with("\"headers\": {\"X-A\": \" x\"}"),
	    "spec.headers.X-A: a header value neither starts nor ends");
	bad(http_with("\"headers\": {\"X-A\": \"x\\t\"}"),
	    "spec.headers.X-A: a header value neither");
	bad(http_with("\"headers\": {\"X-A\": 1}"), "spec.headers.X-A: must be a string");
	bad(http_with("\"headers\": {\"X-A\": \"${env.X}\"}"),
	    "spec.headers.X-A: only ${credentials.KEY}");
	bad_ctx(http_with("\"headers\": {\"Authorization\": \"Bearer ${credentials.token}\"}"),
	        &ctx, "spec.headers.Authorization: ${credentials.token}: no such credential");
	mcp_creds_free(c);
}

/* ---- credentials -------------------------------------------------------------------- */

static void
bad_creds(const char *text, const char *want)
{
	struct mcp_creds *c = mcp_creds_parse(text, strlen(text), err, sizeof(err));

	if (c != NULL) {
		mcp_creds_free(c);
		fail_msg("credentials accepted: %s", text);
	}
	if (strncmp(err, want, strlen(want)) != 0)
		fail_msg("%s\n  error: %s\n  wanted: %s...", text, err, want);
	if (strstr(err, SECRET) != NULL || strstr(err, "s3cr3t") != NULL)
		fail_msg("the error quotes a credential: %s", err);
}

static void
t_creds(void **state)
{
	char big[MCP_CREDS_MAX + 64], many[MCP_CREDS_KEYS_MAX * 40 + 64];
	struct mcp_creds *c;
	size_t len, i, n;

	c = creds("{\n  \"token\": \"" SECRET "\",\n\t\"_other-key\": \"Bearer 12345678\"\n}\n");
	assert_int_equal(mcp_creds_count(c), 2);
	assert_string_equal(mcp_creds_key(c, 0), "token");
	assert_string_equal(mcp_creds_value(c, 0, &len), SECRET);
	assert_int_equal(len, strlen(SECRET));
	assert_string_equal(mcp_creds_value(c, 1, &len), "Bearer 12345678");
	assert_int_equal(mcp_creds_find(c, "_other-key", 10), 1);
	assert_int_equal(mcp_creds_find(c, "token", 5), 0);
	assert_int_equal(mcp_creds_find(c, "toke", 4), -1);
	assert_null(mcp_creds_key(c, 2));
	assert_null(mcp_creds_value(c, 2, &len));
	mcp_creds_free(c);
	mcp_creds_free(NULL);
	bad_creds(SECRET, "credentials: not valid JSON (line 1, column");
	bad_creds("{\"token\": \"" SECRET "\"", "credentials: the JSON text ends too soon");
	bad_creds("{\"token\": \"" SECRET "\"} {}", "credentials: more than one JSON value");
	bad_creds("\"" SECRET "\"", "credentials: must be a JSON object of KEY: value");
	bad_creds("[\"" SECRET "\"]", "credentials: must be a JSON object");
	bad_creds("{}", "credentials: an empty object");
	bad_creds("{\"token\": \"" SECRET "\", \"token\": \"" SECRET "\"}",
	          "credentials: a key appears twice");
	bad_creds("{\"" SECRET " x\": \"abcdefgh\"}",
	          "credentials: key 1 (in the order given) must match");
	bad_creds("{\"ok\": \"abcdefgh\", \"9lives\": \"abcdefgh\"}",
	          "credentials: key 2 (in the order given)");
	bad_creds("{\"token\": 12345678}", "credentials.token: must be a string");
	bad_creds("{\"token\": \"short\"}", "credentials.token: must be at least 8 bytes");
	bad_creds("{\"token\": \"s3cr3t\\\"quote\"}",
	          "credentials.token: may hold only printable ASCII");
	bad_creds("{\"token\": \"s3cr3t\\\\back\"}",
	          "credentials.token: may hold only printable ASCII");
	bad_creds("{\"token\": \"s3cr3t\\nline\"}",
	          "credentials.token: may hold only printable ASCII");
	bad_creds("{\"token\": \"s3cr3t-caf\\u00e9\"}",
	          "credentials.token: may hold only printable ASCII");
	bad_creds("{\"token\": \"s3cr3t\\u0000nul\"}", "credentials: not valid JSON");
	bad_creds("{\"token\": \"s3cr3t-\xff\xfe\"}", "credentials: not UTF-8");
	n = (size_t)snprintf(big, sizeof(big), "{\"token\": \"");
	memset(big + n, 'a', MCP_CREDS_MAX);
	snprintf(big + n + MCP_CREDS_MAX, sizeof(big) - n - MCP_CREDS_MAX, "\"}");
	bad_creds(big, "credentials: larger than 4096 bytes");
	n = (size_t)snprintf(many, sizeof(many), "{");
	for (i = 0; i <= MCP_CREDS_KEYS_MAX; i++)
		n += (size_t)snprintf(many + n, sizeof(many) - n, "%s\"k%zu\": \"abcdefgh\"",
		                      i ? ", " : "", i);
	snprintf(many + n, sizeof(many) - n, "}");
	bad_creds(many, "credentials: at most 32 keys");
}

/* With credentials checked, each one given must be referenced. */
static void
t_unused(void **state)
{
	struct mcp_creds *c = creds("{\"tok\": \"" SECRET "\", \"extra\": \"abcdefgh\"}");
	struct mcpspec_ctx ctx = {.flags = MCPSPEC_F_CREDS, .creds = c};

	bad_ctx(stdio_with("\"env\": {\"T\": \"${credentials.tok}\"}"), &ctx,
	        "credentials.extra: not referenced by the spec");
	bad_ctx(stdio_with(""), &ctx, "credentials.tok: not referenced by the spec");
	mcpspec_free(good_ctx(
	    stdio_with(
	        "\"env\": {\"T\": \"${credentials.tok}\", \"E\": \"x${credentials.extra}y\"}"),
	    &ctx));
	/* references count in headers too */
	mcpspec_free(good_ctx(
	    http_with(
	        "\"headers\": {\"A\": \"${credentials.tok}\", \"B\": \"${credentials.extra}\"}"),
	    &ctx));
	mcp_creds_free(c);
}

static void
t_expand(void **state)
{
	struct mcp_creds *c = creds("{\"tok\": \"" SECRET "\", \"u\": \"user-name\"}");
	size_t len;
	char *v;

	v = mcpspec_expand("Bearer ${credentials.tok}", c, &len);
	assert_string_equal(v, "Bearer " SECRET);
	assert_int_equal(len, strlen("Bearer " SECRET));
	sodium_free(v);
	v = mcpspec_expand("${credentials.u}:${credentials.tok}!", c, &len);
	assert_string_equal(v, "user-name:" SECRET "!");
	sodium_free(v);
	v = mcpspec_expand("plain", c, &len);
	assert_string_equal(v, "plain");
	assert_int_equal(len, 5);
	sodium_free(v);
	v = mcpspec_expand("", NULL, &len);
	assert_string_equal(v, "");
	sodium_free(v);
	assert_null(mcpspec_expand("${credentials.nope}", c, &len));
	assert_int_equal(len, 0);
	assert_null(mcpspec_expand("${credentials.tok}", NULL, &len));
	assert_null(mcpspec_expand("${credentials.tok", c, &len));
	assert_null(mcpspec_expand("${HOME}", c, &len));
	mcp_creds_free(c);
}

struct seen {
	char what[8][64];
	int n;
};

static void
seen_cb(const char *p, size_t n, void *arg)
{
	struct seen *s = arg;

	if (s->n < 8)
		snprintf(s->what[s->n++], sizeof(s->what[0]), "%.*s", (int)n, p);
}

/* What is redacted for stored credentials: each value and the whole text
 * (all there is to redact of an opaque one, stored before they were an
 * object). */
static void
t_secrets(void **state)
{
	static const char obj[] = "{\"a\": \"value-one-1\", \"b\": \"value-two-2\"}";
	struct seen s;

	memset(&s, 0, sizeof(s));
	assert_int_equal(mcp_creds_secrets(obj, strlen(obj), seen_cb, &s), 3);
	assert_int_equal(s.n, 3);
	assert_string_equal(s.what[0], "value-one-1");
	assert_string_equal(s.what[1], "value-two-2");
	assert_string_equal(s.what[2], obj);
	memset(&s, 0, sizeof(s));
	assert_int_equal(mcp_creds_secrets("ghp_opaque_token", 16, seen_cb, &s), 1);
	assert_string_equal(s.what[0], "ghp_opaque_token");
	memset(&s, 0, sizeof(s));
	assert_int_equal(mcp_creds_secrets("{\"a\": \"short\"}", 14, seen_cb, &s), 1);
	assert_string_equal(s.what[0], "{\"a\": \"short\"}");
}

static void
t_parse_bytes(void **state)
{
	static char big[MCPSPEC_MAX + 2];
	static const char trailing[] = "{\"transport\": \"stdio\",\n \"command\": [\"x\",]}";
	static const char nul[] = "{\"transport\": \"stdio\", \"command\": [\"x\"]}\0junk";
	struct mcpspec *s;

	s = mcpspec_parse(trailing, sizeof(trailing) - 1, NULL, err, sizeof(err));
	assert_null(s);
	assert_true(strncmp(err, "2:", 2) == 0);
	memset(big, ' ', sizeof(big));
	assert_null(mcpspec_parse(big, sizeof(big), NULL, err, sizeof(err)));
	assert_string_equal(err, "larger than 65536 bytes");
	/* a NUL inside the bytes is refused, not read as the end */
	assert_null(mcpspec_parse(nul, sizeof(nul) - 1, NULL, err, sizeof(err)));
	/* err may be NULL */
	assert_null(mcpspec_parse("{}", 2, NULL, NULL, 0));
	mcpspec_free(NULL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_stdio_minimal), cmocka_unit_test(t_stdio_full),
	    cmocka_unit_test(t_transport),     cmocka_unit_test(t_keys),
	    cmocka_unit_test(t_command),       cmocka_unit_test(t_env),
	    cmocka_unit_test(t_paths),         cmocka_unit_test(t_paths_resolved),
	    cmocka_unit_test(t_path_overlaps), cmocka_unit_test(t_workspace),
	    cmocka_unit_test(t_network),       cmocka_unit_test(t_timeouts),
	    cmocka_unit_test(t_http_url),      cmocka_unit_test(t_http_headers),
	    cmocka_unit_test(t_creds),         cmocka_unit_test(t_unused),
	    cmocka_unit_test(t_expand),        cmocka_unit_test(t_secrets),
	    cmocka_unit_test(t_parse_bytes),
	};

	if (sodium_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
