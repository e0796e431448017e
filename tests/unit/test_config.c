/*
 * Unit tests for supervisor/config.c: the values a valid file yields, the
 * defaults, and for each kind of mistake the exact "file:line:col: reason"
 * line, with the promises that matter to an operator: every error of a file
 * is reported, a failed load changes nothing, and a database password never
 * reaches an error message.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include "supervisor/config.h"

#define NAME "t.yaml"

static const char minimal[] = "state_dir: /var/agrippa          # workspaces, artifacts\n"
			      "user: _agrippa\n"
			      "listen: [ \"127.0.0.1:8480\" ]\n"
			      "control_socket: /run/agrippad.sock\n"
			      "database: embedded\n"
			      "master_key: /etc/agrippad/master.key\n";

static char err[16384];
static struct config cfg;

static int
parse_n(const char *yaml, size_t len)
{
	return config_parse(NAME, (const unsigned char *)yaml, len, &cfg, err, sizeof(err));
}

static int
parse(const char *yaml)
{
	return parse_n(yaml, strlen(yaml));
}

static size_t
count_lines(const char *s)
{
	size_t n = 0;

	for (; *s != '\0'; s++)
		n += *s == '\n';
	return n;
}

/* yaml must fail with line (a whole "t.yaml:L:C: reason") among its errors. */
static void
expect_error(const char *yaml, const char *line)
{
	char want[512];

	snprintf(want, sizeof(want), NAME ":%s\n", line);
	if (parse(yaml) != -1)
		fail_msg("accepted: %s", yaml);
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

/* Valid files */

static void
test_minimal(void **state)
{
	assert_int_equal(parse(minimal), 0);
	assert_string_equal(err, "");
	assert_string_equal(cfg.path, NAME);
	assert_string_equal(cfg.state_dir, "/var/agrippa");
	assert_string_equal(cfg.user, "_agrippa");
	assert_int_equal(cfg.nlisten, 1);
	assert_string_equal(cfg.listen[0].addr, "127.0.0.1:8480");
	assert_string_equal(cfg.listen[0].host, "127.0.0.1");
	assert_int_equal(cfg.listen[0].port, 8480);
	assert_string_equal(cfg.control_socket, "/run/agrippad.sock");
	assert_int_equal(cfg.db_embedded, 1);
	assert_string_equal(cfg.db_url, "");
	assert_string_equal(cfg.master_key, "/etc/agrippad/master.key");
	/* and the defaults of what it leaves out */
	assert_string_equal(cfg.db_user, "_agrippadb");
	assert_string_equal(cfg.pidfile, "/run/agrippad.pid");
	assert_string_equal(cfg.chroot, "/var/empty");
	assert_string_equal(cfg.postgres_bin, "");
	assert_int_equal(cfg.db_pool, 4);
	assert_int_equal(cfg.ipc_max_frame, 16 * 1024 * 1024);
}

static void
test_defaults(void **state)
{
	static struct config def;

	config_defaults(&def);
	assert_string_equal(def.path, CONF_DEFAULT_PATH);
	assert_int_equal(def.nlisten, 1);
	assert_int_equal(def.listen[0].port, 8480);
	/* an empty mapping is the defaults, apart from the file name */
	assert_int_equal(parse("{}\n"), 0);
	assert_string_equal(cfg.path, NAME);
	memcpy(def.path, cfg.path, sizeof(def.path));
	assert_memory_equal(&def, &cfg, sizeof(def));
	/* one key changes only that key */
	assert_int_equal(parse("chroot: /var/empty2\n"), 0);
	assert_string_equal(cfg.chroot, "/var/empty2");
	assert_string_equal(cfg.state_dir, "/var/agrippa");
	assert_string_equal(cfg.listen[0].addr, "127.0.0.1:8480");
}

static void
test_every_key(void **state)
{
	const char *yaml = "state_dir: /srv/agrippa\n"
			   "user: agrippa-svc\n"
			   "db_user: _pg\n"
			   "listen:\n"
			   "  - 10.0.0.1:80\n"
			   "  - \"[::1]:8480\"\n"
			   "  - localhost:65535\n"
			   "control_socket: /run/a.sock\n"
			   "master_key: /etc/a/key\n"
			   "pidfile: /run/a.pid\n"
			   "chroot: /var/empty\n"
			   "postgres_bin: /usr/lib/postgresql/15/bin\n"
			   "database: { url: \"postgresql://agrippa:pw@db.example/agrippa\", pool: 64 }\n"
			   "ipc_max_frame: 32M\n";

	assert_int_equal(parse(yaml), 0);
	assert_string_equal(cfg.state_dir, "/srv/agrippa");
	assert_string_equal(cfg.user, "agrippa-svc");
	assert_string_equal(cfg.db_user, "_pg");
	assert_int_equal(cfg.nlisten, 3);
	assert_string_equal(cfg.listen[0].host, "10.0.0.1");
	assert_int_equal(cfg.listen[0].port, 80);
	assert_string_equal(cfg.listen[1].addr, "[::1]:8480");
	assert_string_equal(cfg.listen[1].host, "::1");
	assert_int_equal(cfg.listen[1].port, 8480);
	assert_string_equal(cfg.listen[2].host, "localhost");
	assert_int_equal(cfg.listen[2].port, 65535);
	assert_string_equal(cfg.control_socket, "/run/a.sock");
	assert_string_equal(cfg.master_key, "/etc/a/key");
	assert_string_equal(cfg.pidfile, "/run/a.pid");
	assert_string_equal(cfg.postgres_bin, "/usr/lib/postgresql/15/bin");
	assert_int_equal(cfg.db_embedded, 0);
	assert_string_equal(cfg.db_url, "postgresql://agrippa:pw@db.example/agrippa");
	assert_int_equal(cfg.db_pool, 64);
	assert_int_equal(cfg.ipc_max_frame, 32 * 1024 * 1024);
}

static void
test_database_forms(void **state)
{
	assert_int_equal(parse("database: { pool: 8 }\n"), 0);
	assert_int_equal(cfg.db_embedded, 1);
	assert_int_equal(cfg.db_pool, 8);
	assert_int_equal(parse("database:\n  url: 'postgres://h/db'\n"), 0);
	assert_int_equal(cfg.db_embedded, 0);
	assert_string_equal(cfg.db_url, "postgres://h/db");
	assert_int_equal(cfg.db_pool, 4);
	assert_int_equal(parse("database: \"embedded\"\n"), 0);
	assert_int_equal(cfg.db_embedded, 1);
}

/* sandbox: every limit set, G suffix, no zero or unlimited value, ids
 * bounded, and the section must be a mapping. */
static void
test_sandbox_section(void **state)
{
	assert_int_equal(parse("sandbox: { memory: 512M, pids: 64, cpu: 50, tmp_size: 1G, "
			       "file_size: 2G, open_files: 256, exec_timeout: 30, "
			       "output_max: 64K, file_max: 1M, artifact_max: 1, max: 4, "
			       "uid: 3000000000, gid: 3000000001 }\n"),
	    0);
	assert_int_equal(cfg.sandbox.memory, 512ull << 20);
	assert_int_equal(cfg.sandbox.pids, 64);
	assert_int_equal(cfg.sandbox.cpu, 50);
	assert_int_equal(cfg.sandbox.tmp_size, 1ull << 30);
	assert_int_equal(cfg.sandbox.file_size, 2ull << 30);
	assert_int_equal(cfg.sandbox.open_files, 256);
	assert_int_equal(cfg.sandbox.exec_timeout, 30);
	assert_int_equal(cfg.sandbox.output_max, 65536);
	assert_int_equal(cfg.sandbox.file_max, 1 << 20);
	assert_int_equal(cfg.sandbox.artifact_max, 1);
	assert_int_equal(cfg.sandbox.max, 4);
	assert_int_equal(cfg.sandbox.uid, 3000000000u);
	assert_int_equal(cfg.sandbox.gid, 3000000001u);
	/* Keys left out keep their defaults. */
	assert_int_equal(parse("sandbox: { pids: 100 }\n"), 0);
	assert_int_equal(cfg.sandbox.memory, 2ull << 30);
	assert_int_equal(cfg.sandbox.artifact_max, 16ull << 20);
	assert_true(cfg.sandbox.disk == 10ull << 30);
	assert_int_equal(parse("sandbox: { disk: 64M }\n"), 0);
	assert_true(cfg.sandbox.disk == 64ull << 20);
	/* T, as the ranges are written: the largest disk, memory and file size */
	assert_int_equal(parse("sandbox: { disk: 16T, memory: 1T, file_size: 1T }\n"), 0);
	assert_true(cfg.sandbox.disk == 16ull << 40 && cfg.sandbox.memory == 1ull << 40 &&
	            cfg.sandbox.file_size == 1ull << 40);
	assert_int_equal(parse("sandbox: { disk: 17T }\n"), -1);
	assert_int_equal(parse("sandbox: { disk: 16777216T }\n"), -1); /* past 2^64 */
	assert_int_equal(parse("sandbox: { disk: 2t }\n"), -1);
	assert_int_equal(parse("sandbox: { disk: none }\n"), 0);
	assert_true(cfg.sandbox.disk == 0);
	expect_only("sandbox: { disk: 0 }\n",
	    "1:18: sandbox.disk: expected an integer from 16777216 to 17592186044416 "
	    "(K, M, G and T suffixes allowed)");
	expect_only("sandbox: { disk: 1M }\n",
	    "1:18: sandbox.disk: expected an integer from 16777216 to 17592186044416 "
	    "(K, M, G and T suffixes allowed)");

	expect_only("sandbox: { artifact_max: 0 }\n",
	    "1:26: sandbox.artifact_max: expected an integer from 1 to 1073741824 "
	    "(K, M, G and T suffixes allowed)");
	expect_only("sandbox: { memory: 1M }\n",
	    "1:20: sandbox.memory: expected an integer from 16777216 to 1099511627776 "
	    "(K, M, G and T suffixes allowed)");
	expect_only("sandbox: { pids: 4K }\n",
	    "1:18: sandbox.pids: expected an integer from 16 to 65536");
	expect_only("sandbox: { exec_timeout: 0 }\n",
	    "1:26: sandbox.exec_timeout: expected an integer from 1 to 86400");
	expect_only("sandbox: { uid: 0 }\n",
	    "1:17: sandbox.uid: expected an integer from 1 to 4294967294");
	expect_only("sandbox: { uid: 4294967295 }\n",
	    "1:17: sandbox.uid: expected an integer from 1 to 4294967294");
	expect_only("sandbox: { output_max: unlimited }\n",
	    "1:24: sandbox.output_max: expected an integer from 4096 to 268435456 "
	    "(K, M, G and T suffixes allowed)");
	expect_only("sandbox: { file_max: -1 }\n",
	    "1:22: sandbox.file_max: expected an integer from 4096 to 67108864 "
	    "(K, M, G and T suffixes allowed)");
	expect_only("sandbox: { swap: 1 }\n", "1:12: unknown key 'sandbox.swap'");
	expect_only("sandbox: { pids: 64, pids: 65 }\n", "1:22: duplicate key 'sandbox.pids'");
	expect_only("sandbox: 5\n", "1:10: sandbox: expected a mapping, found a scalar");
	expect_only("sandbox:\n", "1:9: sandbox: expected a mapping, found nothing");
	/* A failed parse leaves the previous values. */
	assert_int_equal(parse("sandbox: { pids: 77 }\n"), 0);
	assert_int_equal(parse("sandbox: { pids: 77, cpu: 0 }\n"), -1);
	assert_int_equal(cfg.sandbox.pids, 77);
	assert_int_equal(cfg.sandbox.cpu, 100);
}

/* engine: defaults, every key set, each bound on both sides (the value
 * just inside is accepted, just outside refused), and the usual key and
 * type errors, each with its exact position. */
static void
test_engine_section(void **state)
{
	static struct config def;

	config_defaults(&def);
	assert_int_equal(def.engine.concurrency, 4);
	assert_int_equal(def.engine.lease, 30);
	assert_int_equal(def.engine.sweep, 5);
	assert_int_equal(parse(minimal), 0);
	assert_int_equal(cfg.engine.concurrency, 4);
	assert_int_equal(cfg.engine.lease, 30);
	assert_int_equal(cfg.engine.sweep, 5);
	/* an empty section is the defaults */
	assert_int_equal(parse("engine: {}\n"), 0);
	assert_int_equal(cfg.engine.concurrency, 4);
	assert_int_equal(cfg.engine.lease, 30);
	assert_int_equal(cfg.engine.sweep, 5);

	assert_int_equal(parse("engine:\n  concurrency: 16\n  lease: 120\n  sweep: 10\n"), 0);
	assert_string_equal(err, "");
	assert_int_equal(cfg.engine.concurrency, 16);
	assert_int_equal(cfg.engine.lease, 120);
	assert_int_equal(cfg.engine.sweep, 10);
	/* keys left out keep their defaults, and the sandbox is untouched */
	assert_int_equal(parse("engine: { lease: 60 }\n"), 0);
	assert_int_equal(cfg.engine.concurrency, 4);
	assert_int_equal(cfg.engine.lease, 60);
	assert_int_equal(cfg.engine.sweep, 5);
	assert_int_equal(cfg.sandbox.max, 32);
	/* the bounds themselves are accepted */
	assert_int_equal(parse("engine: { concurrency: 0, lease: 2, sweep: 1 }\n"), 0);
	assert_int_equal(cfg.engine.concurrency, 0);
	assert_int_equal(cfg.engine.lease, 2);
	assert_int_equal(cfg.engine.sweep, 1);
	assert_int_equal(parse("engine: { concurrency: 1024, lease: 3600, sweep: 3600 }\n"), 0);
	assert_int_equal(cfg.engine.concurrency, 1024);
	assert_int_equal(cfg.engine.lease, 3600);
	assert_int_equal(cfg.engine.sweep, 3600);

	/* one past each bound is refused */
	expect_only("engine: { concurrency: -1 }\n",
	    "1:24: engine.concurrency: expected an integer from 0 to 1024");
	expect_only("engine: { concurrency: 1025 }\n",
	    "1:24: engine.concurrency: expected an integer from 0 to 1024");
	expect_only("engine: { lease: 1 }\n",
	    "1:18: engine.lease: expected an integer from 2 to 3600");
	expect_only("engine: { lease: 3601 }\n",
	    "1:18: engine.lease: expected an integer from 2 to 3600");
	expect_only("engine: { sweep: 0 }\n",
	    "1:18: engine.sweep: expected an integer from 1 to 3600");
	expect_only("engine: { sweep: 3601 }\n",
	    "1:18: engine.sweep: expected an integer from 1 to 3600");
	/* durations are plain seconds, as sandbox.exec_timeout: no suffix */
	expect_only("engine: { lease: 1K }\n",
	    "1:18: engine.lease: expected an integer from 2 to 3600");
	expect_only("engine: { sweep: -1 }\n",
	    "1:18: engine.sweep: expected an integer from 1 to 3600");
	expect_only("engine: { concurrency: 99999999999999999999999 }\n",
	    "1:24: engine.concurrency: expected an integer from 0 to 1024");

	/* keys */
	expect_only("engine: { workers: 4 }\n", "1:11: unknown key 'engine.workers'");
	expect_only("engine:\n  sweep: 5\n  lease: 30\n  sweep: 6\n",
	    "4:3: duplicate key 'engine.sweep'");
	expect_only("engine: { max: 4 }\n", "1:11: unknown key 'engine.max'");
	expect_only("sandbox: { lease: 30 }\n", "1:12: unknown key 'sandbox.lease'");
	expect_only("engine: { lease: 30 }\nengine: { lease: 40 }\n",
	    "2:1: duplicate key 'engine'");

	/* node types */
	expect_only("engine: 4\n", "1:9: engine: expected a mapping, found a scalar");
	expect_only("engine:\n", "1:8: engine: expected a mapping, found nothing");
	expect_only("engine: [ 4 ]\n", "1:9: engine: expected a mapping, found a sequence");
	expect_only("engine: { lease: [ 30 ] }\n",
	    "1:18: engine.lease: expected an integer, found a sequence");
	expect_only("engine: { sweep: { s: 5 } }\n",
	    "1:18: engine.sweep: expected an integer, found a mapping");
	expect_only("engine: { concurrency: \"4\" }\n",
	    "1:24: engine.concurrency: expected an integer, found a quoted string");
	expect_only("engine: { concurrency: }\n", "1:24: engine.concurrency: empty value");

	/* step_budget: dollars as templates write them, more than 0, at most
	 * 100000, in micro-dollars */
	assert_int_equal(def.engine.step_budget, 10000000);
	assert_int_equal(def.engine.host_grace, 86400);
	assert_int_equal(parse("engine: { host_grace: 60 }\n"), 0);
	assert_int_equal(cfg.engine.host_grace, 60);
	assert_int_equal(parse("engine: { host_grace: 31536000 }\n"), 0);
	assert_int_equal(cfg.engine.host_grace, 31536000);
	expect_only("engine: { host_grace: 59 }\n",
	    "1:23: engine.host_grace: expected an integer from 60 to 31536000");
	assert_int_equal(parse("engine: { step_budget: 2.5 }\n"), 0);
	assert_int_equal(cfg.engine.step_budget, 2500000);
	assert_int_equal(parse("engine: { step_budget: 0.000001 }\n"), 0);
	assert_int_equal(cfg.engine.step_budget, 1);
	assert_int_equal(parse("engine: { step_budget: 100000 }\n"), 0);
	assert_int_equal(cfg.engine.step_budget, 100000000000);
	expect_only("engine: { step_budget: 0 }\n",
	    "1:24: engine.step_budget: expected an amount of dollars from 0.000001 to 100000, "
	    "with at most 6 decimals");
	expect_only("engine: { step_budget: 100000.000001 }\n",
	    "1:24: engine.step_budget: expected an amount of dollars from 0.000001 to 100000, "
	    "with at most 6 decimals");
	expect_only("engine: { step_budget: 1.0000001 }\n",
	    "1:24: engine.step_budget: expected an amount of dollars from 0.000001 to 100000, "
	    "with at most 6 decimals");
	expect_only("engine: { step_budget: -1 }\n",
	    "1:24: engine.step_budget: expected an amount of dollars from 0.000001 to 100000, "
	    "with at most 6 decimals");
	expect_only("engine: { step_budget: 1e3 }\n",
	    "1:24: engine.step_budget: expected an amount of dollars from 0.000001 to 100000, "
	    "with at most 6 decimals");
	expect_only("engine: { step_budget: \"10\" }\n",
	    "1:24: engine.step_budget: expected an amount of dollars from 0.000001 to 100000, "
	    "with at most 6 decimals");
	expect_only("engine: { step_budget: [ 1 ] }\n",
	    "1:24: engine.step_budget: expected an amount of dollars from 0.000001 to 100000, "
	    "with at most 6 decimals");
	assert_int_equal(cfg.engine.step_budget, 100000000000); /* left as it was */

	/* every error of the section is reported, in order */
	assert_int_equal(parse("engine:\n  concurrency: 2000\n  bogus: 1\n  lease: 9999\n"), -1);
	assert_string_equal(err, NAME ":2:16: engine.concurrency: expected an integer from 0 to "
				  "1024\n" NAME ":3:3: unknown key 'engine.bogus'\n" NAME
				  ":4:10: engine.lease: expected an integer from 2 to 3600\n");

	/* a failed parse leaves the previous values */
	assert_int_equal(parse("engine: { concurrency: 8, sweep: 2 }\n"), 0);
	assert_int_equal(parse("engine: { concurrency: 9, sweep: 0 }\n"), -1);
	assert_int_equal(cfg.engine.concurrency, 8);
	assert_int_equal(cfg.engine.sweep, 2);
	assert_int_equal(cfg.engine.lease, 30);
}

/* providers and agent */

/* One valid provider; PROV inserts its extra lines (at line 5, indented 4)
 * before the models, and the model line is line 6 + the extra lines. */
#define PROV_HEAD "providers:\n  - name: a\n    kind: openai\n    base_url: http://h\n"
#define PROV_MODELS "    models:\n      - { name: m, input: 1, output: 2 }\n"
#define PROV(extra) PROV_HEAD extra PROV_MODELS
/* A provider whose one model entry is model (a flow mapping's contents). */
#define MODEL(model) PROV_HEAD "    models:\n      - { " model " }\n"
#define PRICE_ERR "expected an amount of dollars from 0 to 100000, with at most 6 decimals"

static const char providers_full[] =
    "providers:\n"
    "  - name: anthropic\n"
    "    kind: anthropic\n"
    "    base_url: \"https://api.anthropic.com/\"\n"
    "    key_file: /etc/agrippad/anthropic.key\n"
    "    timeout: 120\n"
    "    retries: 10\n"
    "    stream: false\n"
    "    models:\n"
    "      - { name: claude-sonnet-4-5, input: 3, output: 15, cache_read: 0.3, "
    "cache_write: 3.75 }\n"
    "      - name: claude-haiku-4-5\n"
    "        output: 5\n"
    "        input: 1\n"
    "  - name: local_llm-2\n"
    "    kind: openai\n"
    "    base_url: http://127.0.0.1:8000/v1//\n"
    "    max_tokens_field: max_completion_tokens\n"
    "    models:\n"
    "      - { name: Qwen/Qwen2.5-Coder:32B@q4.gguf, input: 0, output: 0.000001 }\n"
    "agent:\n"
    "  provider: anthropic\n"
    "  model: claude-sonnet-4-5\n"
    "  max_tokens: 16000\n"
    "  tool_output_max: 64K\n";

static void
test_providers_full(void **state)
{
	const struct conf_provider *a = &cfg.providers[0], *o = &cfg.providers[1];

	assert_int_equal(parse(providers_full), 0);
	assert_string_equal(err, "");
	assert_int_equal(cfg.nproviders, 2);

	assert_string_equal(a->name, "anthropic");
	assert_int_equal(a->kind, CONF_PROVIDER_ANTHROPIC);
	assert_string_equal(a->base_url, "https://api.anthropic.com"); /* without its '/' */
	assert_string_equal(a->key_file, "/etc/agrippad/anthropic.key");
	assert_int_equal(a->timeout, 120);
	assert_int_equal(a->retries, 10);
	assert_int_equal(a->stream, 0);
	assert_int_equal(a->max_completion, 0); /* the default: max_tokens */
	assert_int_equal(a->nmodels, 2);
	assert_string_equal(a->models[0].name, "claude-sonnet-4-5");
	assert_int_equal(a->models[0].input, 3000000);
	assert_int_equal(a->models[0].output, 15000000);
	assert_int_equal(a->models[0].cache_read, 300000);
	assert_int_equal(a->models[0].cache_write, 3750000);
	assert_string_equal(a->models[1].name, "claude-haiku-4-5");
	assert_int_equal(a->models[1].input, 1000000);
	assert_int_equal(a->models[1].output, 5000000);
	assert_int_equal(a->models[1].cache_read, 0); /* left out: 0 */
	assert_int_equal(a->models[1].cache_write, 0);

	assert_string_equal(o->name, "local_llm-2");
	assert_int_equal(o->kind, CONF_PROVIDER_OPENAI);
	assert_string_equal(o->base_url, "http://127.0.0.1:8000/v1"); /* every trailing '/' */
	assert_string_equal(o->key_file, "");                         /* none: a local server */
	assert_int_equal(o->timeout, 300);                            /* the defaults */
	assert_int_equal(o->retries, 3);
	assert_int_equal(o->stream, 1);
	assert_int_equal(o->max_completion, 1);
	assert_int_equal(o->nmodels, 1);
	assert_string_equal(o->models[0].name, "Qwen/Qwen2.5-Coder:32B@q4.gguf");
	assert_int_equal(o->models[0].input, 0);
	assert_int_equal(o->models[0].output, 1);
	assert_int_equal(o->models[0].cache_read, 0);
	assert_int_equal(o->models[0].cache_write, 0);

	assert_string_equal(cfg.agent.provider, "anthropic");
	assert_string_equal(cfg.agent.model, "claude-sonnet-4-5");
	assert_int_equal(cfg.agent.max_tokens, 16000);
	assert_int_equal(cfg.agent.tool_output_max, 65536);
	/* and the rest of the file is the defaults */
	assert_int_equal(cfg.nlisten, 1);
	assert_int_equal(cfg.engine.lease, 30);

	/* the agent may use any provider, stream: true, the bounds of each number */
	assert_int_equal(parse(PROV("    stream: true\n    timeout: 1\n    retries: 0\n")
			       "agent: { provider: a, model: m, max_tokens: 1, "
			       "tool_output_max: 1K }\n"),
	    0);
	assert_int_equal(cfg.providers[0].stream, 1);
	assert_int_equal(cfg.providers[0].timeout, 1);
	assert_int_equal(cfg.providers[0].retries, 0);
	assert_int_equal(cfg.agent.max_tokens, 1);
	assert_int_equal(cfg.agent.tool_output_max, 1024);
	assert_int_equal(parse(PROV("    timeout: 3600\n") "agent: { provider: a, model: m, "
			       "max_tokens: 1000000, tool_output_max: 1M }\n"),
	    0);
	assert_int_equal(cfg.providers[0].timeout, 3600);
	assert_int_equal(cfg.agent.max_tokens, 1000000);
	assert_int_equal(cfg.agent.tool_output_max, 1 << 20);
	/* the per-user request limit */
	assert_int_equal(parse("api: {}\n"), 0);
	assert_int_equal(cfg.api.user_rate, 20);
	assert_int_equal(cfg.api.user_burst, 200);
	assert_int_equal(parse("api: { user_rate: 0, user_burst: 1 }\n"), 0);
	assert_int_equal(cfg.api.user_rate, 0);
	assert_int_equal(cfg.api.user_burst, 1);
	assert_int_equal(parse("api: { user_rate: 100000, user_burst: 1000000 }\n"), 0);
	assert_int_equal(cfg.api.user_burst, 1000000);
	/* the MCP tools a step offers: 0 .. 1024 of them, 1K .. 16M of definitions */
	assert_int_equal(parse("agent: { mcp_tools_max: 0, mcp_tool_bytes_max: 1K }\n"), 0);
	assert_int_equal(cfg.agent.mcp_tools_max, 0);
	assert_int_equal(cfg.agent.mcp_tool_bytes_max, 1024);
	assert_int_equal(parse("agent: { mcp_tools_max: 1024, mcp_tool_bytes_max: 16M }\n"), 0);
	assert_int_equal(cfg.agent.mcp_tools_max, 1024);
	assert_int_equal(cfg.agent.mcp_tool_bytes_max, 16 << 20);
	/* prices: 0 and USD_MAX are allowed */
	assert_int_equal(
	    parse(MODEL("name: m, input: 100000, output: 0, cache_write: 0.000001")), 0);
	assert_int_equal(cfg.providers[0].models[0].input, 100000000000);
	assert_int_equal(cfg.providers[0].models[0].output, 0);
	assert_int_equal(cfg.providers[0].models[0].cache_write, 1);
	/* a '@' in the path is no user information */
	assert_int_equal(parse("providers:\n  - name: a\n    kind: openai\n"
			       "    base_url: https://h/x@y/\n" PROV_MODELS),
	    0);
	assert_string_equal(cfg.providers[0].base_url, "https://h/x@y");
}

static void
test_providers_defaults(void **state)
{
	static struct config def;

	config_defaults(&def);
	assert_int_equal(def.nproviders, 0);
	assert_string_equal(def.agent.provider, "");
	assert_string_equal(def.agent.model, "");
	assert_int_equal(def.agent.max_tokens, 8192);
	assert_int_equal(def.agent.tool_output_max, 32768);
	assert_int_equal(def.agent.mcp_tools_max, 128);
	assert_int_equal(def.agent.mcp_tool_bytes_max, 256 * 1024);
	assert_int_equal(parse(minimal), 0);
	assert_int_equal(cfg.nproviders, 0);
	assert_string_equal(cfg.agent.provider, "");
	assert_string_equal(cfg.agent.model, "");
	assert_int_equal(cfg.agent.max_tokens, 8192);
	assert_int_equal(cfg.agent.tool_output_max, 32768);
	/* an empty agent section is the defaults; providers need no agent */
	assert_int_equal(parse("agent: {}\n"), 0);
	assert_string_equal(cfg.agent.provider, "");
	assert_int_equal(cfg.agent.max_tokens, 8192);
	assert_int_equal(parse(PROV("")), 0);
	assert_int_equal(cfg.nproviders, 1);
	assert_string_equal(cfg.agent.provider, "");
	assert_int_equal(cfg.agent.tool_output_max, 32768);
	/* numbers without a provider */
	assert_int_equal(parse("agent: { max_tokens: 100 }\n"), 0);
	assert_int_equal(cfg.agent.max_tokens, 100);
	assert_int_equal(cfg.agent.tool_output_max, 32768);
}

/* The list itself and the keys of an entry. */
static void
test_providers_list_errors(void **state)
{
	expect_only("providers: {}\n",
	    "1:12: providers: expected a sequence of mappings, found a mapping");
	expect_only("providers:\n",
	    "1:11: providers: expected a sequence of mappings, found nothing");
	expect_only("providers: []\n", "1:12: providers: empty list");
	expect_only("providers: [ a ]\n", "1:14: providers[0]: expected a mapping, found a scalar");
	expect_only("providers: [ [ a ] ]\n",
	    "1:14: providers[0]: expected a mapping, found a sequence");
	expect_only(PROV("") "providers: []\n", "7:1: duplicate key 'providers'");

	/* required keys, reported at the entry */
	expect_only("providers:\n  - kind: openai\n    base_url: http://h\n" PROV_MODELS,
	    "2:5: providers[0]: missing required key 'name'");
	expect_only("providers:\n  - name: a\n    base_url: http://h\n" PROV_MODELS,
	    "2:5: providers[0]: missing required key 'kind'");
	expect_only("providers:\n  - name: a\n    kind: openai\n" PROV_MODELS,
	    "2:5: providers[0]: missing required key 'base_url'");
	expect_only(PROV_HEAD, "2:5: providers[0]: missing required key 'models'");
	expect_error("providers: [ {} ]\n", "1:14: providers[0]: missing required key 'name'");
	expect_error("providers: [ {} ]\n", "1:14: providers[0]: missing required key 'models'");
	assert_int_equal(count_lines(err), 4);

	/* unknown, duplicate and non-scalar keys */
	expect_only(PROV("    api_key: x\n"), "5:5: unknown key 'providers[0].api_key'");
	expect_only(PROV("    kind: anthropic\n"), "5:5: duplicate key 'providers[0].kind'");
	expect_only(PROV("    ? [ k ]\n    : v\n"), "5:7: a key must be a scalar, not a sequence");
	expect_only(PROV("    'sk-ant-secret key': 1\n"), "5:5: unknown key in providers[0]");
	assert_null(strstr(err, "secret"));
}

/* More than CONF_MAX_PROVIDERS entries, and the largest file that fits:
 * 8 providers of 32 models each, where the longest label is still whole. */
static void
test_providers_limits(void **state)
{
	size_t cap = 64 * 1024, i, j, len = 0;
	char *yaml = malloc(cap);

	assert_non_null(yaml);
	len += (size_t)snprintf(yaml + len, cap - len, "providers:\n");
	for (i = 0; i < CONF_MAX_PROVIDERS + 1; i++)
		len += (size_t)snprintf(yaml + len, cap - len,
		    "  - { name: p%zu, kind: openai, base_url: 'http://h', "
		    "models: [ { name: m, input: 1, output: 1 } ] }\n",
		    i);
	expect_only(yaml, "10:5: providers: at most 8 providers");

	len = (size_t)snprintf(yaml, cap, "providers:\n");
	for (i = 0; i < CONF_MAX_PROVIDERS; i++) {
		len += (size_t)snprintf(yaml + len, cap - len,
		    "  - name: p%zu\n    kind: anthropic\n    base_url: https://h\n    models:\n",
		    i);
		for (j = 0; j < CONF_MAX_MODELS; j++)
			len += (size_t)snprintf(yaml + len, cap - len,
			    "      - { name: m%zu, input: 1, output: 2, cache_read: 3, "
			    "cache_write: 4 }\n",
			    j);
	}
	assert_true(len < cap - 100);
	assert_int_equal(parse_n(yaml, len), 0);
	assert_int_equal(cfg.nproviders, CONF_MAX_PROVIDERS);
	assert_int_equal(cfg.providers[7].nmodels, CONF_MAX_MODELS);
	assert_string_equal(cfg.providers[7].name, "p7");
	assert_string_equal(cfg.providers[7].models[31].name, "m31");
	assert_int_equal(cfg.providers[7].models[31].cache_write, 4000000);
	/* the last model of the last provider: line 8 * 36 + 1 */
	memcpy(yaml + len - 4, "x }\n", 4);
	expect_only(yaml, "289:71: providers[7].models[31].cache_write: " PRICE_ERR);
	/* one model more */
	len += (size_t)snprintf(yaml + len, cap - len,
	    "      - { name: m32, input: 1, output: 2 }\n");
	expect_error(yaml, "290:9: providers[7].models: at most 32 models");
	free(yaml);
}

static void
test_providers_name_kind(void **state)
{
	char yaml[512];

	expect_only("providers:\n  - name: Anthropic\n    kind: openai\n    base_url: http://h\n"
		    PROV_MODELS,
	    "2:11: providers[0].name: must be a name matching [a-z0-9][a-z0-9_-]{0,31}");
	expect_only("providers:\n  - name: _a\n    kind: openai\n    base_url: http://h\n"
		    PROV_MODELS,
	    "2:11: providers[0].name: must be a name matching [a-z0-9][a-z0-9_-]{0,31}");
	expect_only("providers:\n  - name: a.b\n    kind: openai\n    base_url: http://h\n"
		    PROV_MODELS,
	    "2:11: providers[0].name: must be a name matching [a-z0-9][a-z0-9_-]{0,31}");
	expect_only("providers:\n  - name:\n    kind: openai\n    base_url: http://h\n"
		    PROV_MODELS,
	    "2:10: providers[0].name: empty value");
	/* 32 bytes fit, 33 do not */
	snprintf(yaml, sizeof(yaml),
	    "providers:\n  - name: %s\n    kind: openai\n    base_url: http://h\n" PROV_MODELS,
	    "0123456789abcdef0123456789abcdef");
	assert_int_equal(parse(yaml), 0);
	assert_string_equal(cfg.providers[0].name, "0123456789abcdef0123456789abcdef");
	snprintf(yaml, sizeof(yaml),
	    "providers:\n  - name: %s\n    kind: openai\n    base_url: http://h\n" PROV_MODELS,
	    "0123456789abcdef0123456789abcdefg");
	expect_only(yaml, "2:11: providers[0].name: value too long (at most 32 bytes)");
	/* unique among providers */
	expect_only(PROV("") "  - { name: b, kind: openai, base_url: 'http://h', "
			     "models: [ { name: m, input: 1, output: 1 } ] }\n"
			     "  - { name: a, kind: openai, base_url: 'http://h', "
			     "models: [ { name: m, input: 1, output: 1 } ] }\n",
	    "8:13: providers[2].name: duplicate provider name (as providers[0])");

	expect_only("providers:\n  - name: a\n    kind: claude\n    base_url: http://h\n"
		    PROV_MODELS,
	    "3:11: providers[0].kind: must be anthropic or openai");
	expect_only("providers:\n  - name: a\n    kind: OpenAI\n    base_url: http://h\n"
		    PROV_MODELS,
	    "3:11: providers[0].kind: must be anthropic or openai");
	expect_only("providers:\n  - name: a\n    kind: [ openai ]\n    base_url: http://h\n"
		    PROV_MODELS,
	    "3:11: providers[0].kind: expected a scalar, found a sequence");
	expect_only("providers:\n  - name: a\n    kind: ~\n    base_url: http://h\n" PROV_MODELS,
	    "3:11: providers[0].kind: empty value");
	assert_int_equal(parse("providers:\n  - name: a\n    kind: \"anthropic\"\n"
			       "    base_url: http://h\n" PROV_MODELS),
	    0);
	assert_int_equal(cfg.providers[0].kind, CONF_PROVIDER_ANTHROPIC);
}

/* base_url: the rules, each at the value, and never a word of the value. */
static void
test_providers_base_url(void **state)
{
	static const struct {
		const char *url, *why;
	} bad[] = {
	    {"ftp://secret.example", "must start with http:// or https://"},
	    {"HTTPS://secret.example", "must start with http:// or https://"},
	    {"secret.example", "must start with http:// or https://"},
	    {"'https://secret example'", "must be printable ASCII without spaces"},
	    {"\"https://secret\\u00e9.example\"", "must be printable ASCII without spaces"},
	    {"https://secret.example/v1?key=x", "must not hold a query or fragment ('?' or '#')"},
	    {"'https://secret.example/#frag'", "must not hold a query or fragment ('?' or '#')"},
	    {"https://user:secret@h.example/v1", "must not hold user information ('@' before the "
						   "path)"},
	    {"https://", "must have a host after the scheme"},
	    {"http:///secret", "must have a host after the scheme"},
	    {"http://:8000/secret", "must have a host after the scheme"},
	    {"\"https://secret\\t.example\"", "control characters are not allowed"},
	    {"[ https://secret.example ]", "expected a scalar, found a sequence"},
	    {"''", "empty value"},
	};
	char yaml[2048], want[256];
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(yaml, sizeof(yaml),
		    "providers:\n  - name: a\n    kind: openai\n    base_url: %s\n" PROV_MODELS,
		    bad[i].url);
		snprintf(want, sizeof(want), "4:15: providers[0].base_url: %s", bad[i].why);
		expect_only(yaml, want);
		if (strstr(err, "secret") != NULL)
			fail_msg("url echoed for %s:\n%s", bad[i].url, err);
	}
	/* CONF_URL_MAX - 1 bytes fit, one more does not */
	memset(yaml, 0, sizeof(yaml));
	strcpy(yaml, "providers:\n  - name: a\n    kind: openai\n    base_url: http://h/");
	memset(yaml + strlen(yaml), 'u', CONF_URL_MAX - 1 - strlen("http://h/"));
	strcat(yaml, "\n" PROV_MODELS);
	assert_int_equal(parse(yaml), 0);
	assert_int_equal(strlen(cfg.providers[0].base_url), CONF_URL_MAX - 1);
	memset(yaml, 0, sizeof(yaml));
	strcpy(yaml, "providers:\n  - name: a\n    kind: openai\n    base_url: http://h/");
	memset(yaml + strlen(yaml), 'u', CONF_URL_MAX - strlen("http://h/"));
	strcat(yaml, "\n" PROV_MODELS);
	expect_only(yaml, "4:15: providers[0].base_url: value too long (at most 1023 bytes)");
	/* a host with a port, an IPv6 literal, a path */
	assert_int_equal(parse("providers:\n  - name: a\n    kind: openai\n"
			       "    base_url: 'http://[::1]:8080/openai/v1/'\n" PROV_MODELS),
	    0);
	assert_string_equal(cfg.providers[0].base_url, "http://[::1]:8080/openai/v1");
}

static void
test_providers_values(void **state)
{
	/* key_file: an absolute path, like every path here */
	expect_only(PROV("    key_file: anthropic.key\n"),
	    "5:15: providers[0].key_file: must be an absolute path");
	expect_only(PROV("    key_file:\n"), "5:14: providers[0].key_file: empty value");
	expect_only(PROV("    key_file: \"/etc/k\\0ey\"\n"),
	    "5:15: providers[0].key_file: control characters are not allowed");
	/* timeout and retries: plain integers in range */
	expect_only(PROV("    timeout: 0\n"),
	    "5:14: providers[0].timeout: expected an integer from 1 to 3600");
	expect_only(PROV("    timeout: 3601\n"),
	    "5:14: providers[0].timeout: expected an integer from 1 to 3600");
	expect_only(PROV("    timeout: 1K\n"),
	    "5:14: providers[0].timeout: expected an integer from 1 to 3600");
	expect_only(PROV("    timeout: \"30\"\n"),
	    "5:14: providers[0].timeout: expected an integer, found a quoted string");
	expect_only(PROV("    retries: 11\n"),
	    "5:14: providers[0].retries: expected an integer from 0 to 10");
	expect_only(PROV("    retries: -1\n"),
	    "5:14: providers[0].retries: expected an integer from 0 to 10");
	expect_only(PROV("    retries:\n"), "5:13: providers[0].retries: empty value");
	/* stream: true or false, nothing else */
	expect_only(PROV("    stream: yes\n"),
	    "5:13: providers[0].stream: expected true or false");
	expect_only(PROV("    stream: 1\n"), "5:13: providers[0].stream: expected true or false");
	expect_only(PROV("    stream: True\n"),
	    "5:13: providers[0].stream: expected true or false");
	expect_only(PROV("    stream: \"true\"\n"),
	    "5:13: providers[0].stream: expected true or false, found a quoted string");
	expect_only(PROV("    stream: [ true ]\n"),
	    "5:13: providers[0].stream: expected true or false, found a sequence");
	expect_only(PROV("    stream:\n"), "5:12: providers[0].stream: empty value");
	/* max_tokens_field: one of two names; max_completion_tokens for openai only */
	assert_int_equal(parse(PROV("    max_tokens_field: max_tokens\n")), 0);
	assert_int_equal(cfg.providers[0].max_completion, 0);
	assert_int_equal(parse(PROV("    max_tokens_field: max_completion_tokens\n")), 0);
	assert_int_equal(cfg.providers[0].max_completion, 1);
	expect_only(PROV("    max_tokens_field: max_completion\n"),
	    "5:23: providers[0].max_tokens_field: must be max_tokens or max_completion_tokens");
	expect_only(PROV("    max_tokens_field: [ max_tokens ]\n"),
	    "5:23: providers[0].max_tokens_field: expected a scalar, found a sequence");
	expect_only(PROV("    max_tokens_field:\n"), "5:22: providers[0].max_tokens_field: empty value");
	expect_only("providers:\n  - name: a\n    max_tokens_field: max_completion_tokens\n"
	    "    kind: anthropic\n    base_url: http://h\n" PROV_MODELS,
	    "3:23: providers[0].max_tokens_field: max_completion_tokens is for kind openai only");
	/* a kind that is wrong is reported alone */
	expect_only("providers:\n  - name: a\n    max_tokens_field: max_completion_tokens\n"
	    "    kind: gemini\n    base_url: http://h\n" PROV_MODELS,
	    "4:11: providers[0].kind: must be anthropic or openai");
}

static void
test_providers_models(void **state)
{
	char yaml[1024], name[CONF_MODEL_MAX + 1];

	expect_only(PROV_HEAD "    models: m\n",
	    "5:13: providers[0].models: expected a sequence of mappings, found a scalar");
	expect_only(PROV_HEAD "    models:\n",
	    "5:12: providers[0].models: expected a sequence of mappings, found nothing");
	expect_only(PROV_HEAD "    models: []\n", "5:13: providers[0].models: empty list");
	expect_only(PROV_HEAD "    models: [ m ]\n",
	    "5:15: providers[0].models[0]: expected a mapping, found a scalar");
	/* required keys */
	expect_only(MODEL("input: 1, output: 2"),
	    "6:9: providers[0].models[0]: missing required key 'name'");
	expect_only(MODEL("name: m, output: 2"),
	    "6:9: providers[0].models[0]: missing required key 'input'");
	expect_only(MODEL("name: m, input: 1"),
	    "6:9: providers[0].models[0]: missing required key 'output'");
	expect_only(MODEL("name: m, input: 1, output: 2, price: 3"),
	    "6:41: unknown key 'providers[0].models[0].price'");
	expect_only(MODEL("name: m, input: 1, output: 2, input: 3"),
	    "6:41: duplicate key 'providers[0].models[0].input'");
	/* names */
	expect_only(MODEL("name: -m, input: 1, output: 2"),
	    "6:17: providers[0].models[0].name: must be a model name matching "
	    "[A-Za-z0-9][A-Za-z0-9._:/@-]{0,127}");
	expect_only(MODEL("name: 'm 1', input: 1, output: 2"),
	    "6:17: providers[0].models[0].name: must be a model name matching "
	    "[A-Za-z0-9][A-Za-z0-9._:/@-]{0,127}");
	expect_only(MODEL("name: 'm+1', input: 1, output: 2"),
	    "6:17: providers[0].models[0].name: must be a model name matching "
	    "[A-Za-z0-9][A-Za-z0-9._:/@-]{0,127}");
	expect_only(MODEL("name: [ m ], input: 1, output: 2"),
	    "6:17: providers[0].models[0].name: expected a scalar, found a sequence");
	expect_only(PROV_HEAD "    models:\n      - { name: m, input: 1, output: 2 }\n"
			      "      - { name: n, input: 1, output: 2 }\n"
			      "      - { name: m, input: 1, output: 2 }\n",
	    "8:17: providers[0].models[2].name: duplicate model name (as models[0])");
	/* the same model under two providers is fine */
	assert_int_equal(parse(PROV("") "  - { name: b, kind: openai, base_url: 'http://h', "
					"models: [ { name: m, input: 1, output: 1 } ] }\n"),
	    0);
	/* 128 bytes fit, 129 do not */
	memset(name, 'M', CONF_MODEL_MAX - 1);
	name[CONF_MODEL_MAX - 1] = '\0';
	snprintf(yaml, sizeof(yaml), MODEL("input: 1, output: 2, name: %s"), name);
	assert_int_equal(parse(yaml), 0);
	assert_string_equal(cfg.providers[0].models[0].name, name);
	strcat(name, "M");
	snprintf(yaml, sizeof(yaml), MODEL("input: 1, output: 2, name: %s"), name);
	expect_only(yaml, "6:38: providers[0].models[0].name: value too long (at most 128 bytes)");
	/* prices: dollars per million tokens, as usd_parse reads them */
	expect_only(MODEL("name: m, input: -1, output: 2"),
	    "6:27: providers[0].models[0].input: " PRICE_ERR);
	expect_only(MODEL("name: m, input: 1e3, output: 2"),
	    "6:27: providers[0].models[0].input: " PRICE_ERR);
	expect_only(MODEL("name: m, input: 1, output: '2'"),
	    "6:38: providers[0].models[0].output: " PRICE_ERR);
	expect_only(MODEL("name: m, input: 1, output: 100000.000001"),
	    "6:38: providers[0].models[0].output: " PRICE_ERR);
	expect_only(MODEL("name: m, input: 1, output: 2, cache_read: 1.0000001"),
	    "6:53: providers[0].models[0].cache_read: " PRICE_ERR);
	expect_only(MODEL("name: m, input: 1, output: 2, cache_write: 03"),
	    "6:54: providers[0].models[0].cache_write: " PRICE_ERR);
	expect_only(MODEL("name: m, input: 1, output: 2, cache_write: "),
	    "6:55: providers[0].models[0].cache_write: " PRICE_ERR);
	expect_only(MODEL("name: m, input: { usd: 1 }, output: 2"),
	    "6:27: providers[0].models[0].input: " PRICE_ERR);
}

static void
test_agent_errors(void **state)
{
	expect_only("agent: x\n", "1:8: agent: expected a mapping, found a scalar");
	expect_only("agent:\n", "1:7: agent: expected a mapping, found nothing");
	expect_only("agent: { temperature: 1 }\n", "1:10: unknown key 'agent.temperature'");
	expect_only("agent: { max_tokens: 1, max_tokens: 2 }\n",
	    "1:25: duplicate key 'agent.max_tokens'");
	expect_only("agent: { max_tokens: 0 }\n",
	    "1:22: agent.max_tokens: expected an integer from 1 to 1000000");
	expect_only("agent: { max_tokens: 1000001 }\n",
	    "1:22: agent.max_tokens: expected an integer from 1 to 1000000");
	expect_only("agent: { max_tokens: 8K }\n",
	    "1:22: agent.max_tokens: expected an integer from 1 to 1000000");
	expect_only("api: { user_rate: 100001 }\n",
	    "1:19: api.user_rate: expected an integer from 0 to 100000");
	expect_only("api: { user_burst: 0 }\n",
	    "1:20: api.user_burst: expected an integer from 1 to 1000000");
	expect_only("api: { rate: 1 }\n", "1:8: unknown key 'api.rate'");
	expect_only("agent: { mcp_tools_max: 1025 }\n",
	    "1:25: agent.mcp_tools_max: expected an integer from 0 to 1024");
	expect_only("agent: { mcp_tools_max: 1K }\n",
	    "1:25: agent.mcp_tools_max: expected an integer from 0 to 1024");
	expect_only("agent: { mcp_tool_bytes_max: 1023 }\n",
	    "1:30: agent.mcp_tool_bytes_max: expected an integer from 1024 to 16777216 "
	    "(K, M, G and T suffixes allowed)");
	expect_only("agent: { mcp_tool_bytes_max: 17M }\n",
	    "1:30: agent.mcp_tool_bytes_max: expected an integer from 1024 to 16777216 "
	    "(K, M, G and T suffixes allowed)");
	expect_only("agent: { tool_output_max: 1023 }\n",
	    "1:27: agent.tool_output_max: expected an integer from 1024 to 1048576 "
	    "(K, M, G and T suffixes allowed)");
	expect_only("agent: { tool_output_max: 1025K }\n",
	    "1:27: agent.tool_output_max: expected an integer from 1024 to 1048576 "
	    "(K, M, G and T suffixes allowed)");
	expect_only("agent: { tool_output_max: 1G }\n",
	    "1:27: agent.tool_output_max: expected an integer from 1024 to 1048576 "
	    "(K, M, G and T suffixes allowed)");
	expect_only("agent: { tool_output_max: \"32K\" }\n",
	    "1:27: agent.tool_output_max: expected an integer, found a quoted string");
	expect_only(PROV("") "agent: { provider: A, model: m }\n",
	    "7:20: agent.provider: must be a name matching [a-z0-9][a-z0-9_-]{0,31}");
	expect_only(PROV("") "agent: { provider: a, model: 'm m' }\n",
	    "7:30: agent.model: must be a model name matching [A-Za-z0-9][A-Za-z0-9._:/@-]{0,127}");
	expect_only(PROV("") "agent: { provider: , model: m }\n",
	    "7:20: agent.provider: empty value");
	expect_only(PROV("") "agent: { provider: a, model: [ m ] }\n",
	    "7:30: agent.model: expected a scalar, found a sequence");
}

/* The agent names a configured provider and one of its models, or nothing. */
static void
test_agent_crosscheck(void **state)
{
	expect_only("agent: { provider: a, model: m }\n",
	    "1:20: agent.provider: names no provider in providers");
	expect_only(PROV("") "agent: { provider: b, model: m }\n",
	    "7:20: agent.provider: names no provider in providers");
	expect_only(PROV("") "agent:\n  max_tokens: 10\n  provider: a\n",
	    "8:3: agent.model: required with agent.provider");
	expect_only(PROV("") "agent: { provider: a, model: n }\n",
	    "7:30: agent.model: not one of the models of providers[0]");
	/* the model of another provider is not this one's */
	expect_only(PROV("") "  - { name: b, kind: openai, base_url: 'http://h', "
			     "models: [ { name: n, input: 1, output: 1 } ] }\n"
			     "agent: { provider: a, model: n }\n",
	    "8:30: agent.model: not one of the models of providers[0]");
	expect_only(PROV("") "agent: { model: m }\n", "7:17: agent.model: needs agent.provider");
	/* order does not matter: agent may come first */
	assert_int_equal(parse("agent: { model: m, provider: a }\n" PROV("")), 0);
	assert_string_equal(cfg.agent.model, "m");
	/* an error in providers or agent is not followed by cross-check noise */
	expect_only(MODEL("name: m, input: 1, output: x") "agent: { provider: a, model: m }\n",
	    "6:38: providers[0].models[0].output: " PRICE_ERR);
	expect_only(MODEL("name: -m, input: 1, output: 1") "agent: { provider: a, model: m }\n",
	    "6:17: providers[0].models[0].name: must be a model name matching "
	    "[A-Za-z0-9][A-Za-z0-9._:/@-]{0,127}");
	expect_only(PROV("") "agent: { provider: a, model: m, max_tokens: 0 }\n",
	    "7:45: agent.max_tokens: expected an integer from 1 to 1000000");
	expect_only("agent: { provider: a, model: m, bogus: 1 }\n",
	    "1:33: unknown key 'agent.bogus'");
	/* but an error elsewhere does not hide it */
	expect_error("agent: { provider: a, model: m }\nsandbox: { cpu: 0 }\n",
	    "1:20: agent.provider: names no provider in providers");
	assert_int_equal(count_lines(err), 2);
}

static void
test_providers_yaml_features(void **state)
{
	expect_error("providers: &p [ ]\n", "1:12: anchors are not allowed");
	expect_only("providers: [ *p ]\n", "1:14: aliases are not allowed");
	expect_only(PROV_HEAD "    models: [ *m ]\n", "5:15: aliases are not allowed");
	expect_only(PROV("    timeout: *t\n"), "5:14: aliases are not allowed");
	expect_only(PROV("    stream: !!bool true\n"), "5:13: tags are not allowed");
	expect_only("agent: { provider: !!str a }\n", "1:20: tags are not allowed");
}

/* A failed parse of providers or agent leaves the running ones as they were. */
static void
test_providers_unchanged_on_failure(void **state)
{
	static struct config before;

	assert_int_equal(parse(providers_full), 0);
	memcpy(&before, &cfg, sizeof(cfg));
	assert_int_equal(parse(PROV("") "agent: { provider: a, model: m }\nbogus: 1\n"), -1);
	assert_memory_equal(&before, &cfg, sizeof(cfg));
	assert_int_equal(parse(PROV("") "agent: { provider: a, model: x }\n"), -1);
	assert_memory_equal(&before, &cfg, sizeof(cfg));
	assert_int_equal(parse(MODEL("name: m, input: 1, output: 2, cache_read: -1")), -1);
	assert_memory_equal(&before, &cfg, sizeof(cfg));
	assert_int_equal(parse("providers: [\n"), -1);
	assert_memory_equal(&before, &cfg, sizeof(cfg));
	/* and a good file replaces them whole: no provider left over */
	assert_int_equal(parse(minimal), 0);
	assert_int_equal(cfg.nproviders, 0);
	assert_string_equal(cfg.agent.provider, "");
}

static void
test_numbers(void **state)
{
	assert_int_equal(parse("ipc_max_frame: 65536\n"), 0);
	assert_int_equal(cfg.ipc_max_frame, 65536);
	assert_int_equal(parse("ipc_max_frame: 64K\n"), 0);
	assert_int_equal(cfg.ipc_max_frame, 65536);
	assert_int_equal(parse("ipc_max_frame: 256M\n"), 0);
	assert_int_equal(cfg.ipc_max_frame, 268435456);
	assert_int_equal(parse("database: { pool: 1 }\n"), 0);
	assert_int_equal(cfg.db_pool, 1);

	expect_only("ipc_max_frame: 65535\n",
	    "1:16: ipc_max_frame: expected an integer from 65536 to 268435456 "
	    "(K, M, G and T suffixes allowed)");
	expect_only("ipc_max_frame: 268435457\n", "1:16: ipc_max_frame: expected an integer "
						  "from 65536 to 268435456 (K, M, G and T suffixes allowed)");
	expect_error("ipc_max_frame: 16m\n", "1:16: ipc_max_frame: expected an integer from 65536 "
					     "to 268435456 (K, M, G and T suffixes allowed)");
	expect_error("ipc_max_frame: 99999999999999999999999M\n",
	    "1:16: ipc_max_frame: expected an integer from 65536 to 268435456 "
	    "(K, M, G and T suffixes allowed)");
	expect_error("ipc_max_frame: 18014398509481984M\n", /* 2^54 M wraps 2^64 */
	    "1:16: ipc_max_frame: expected an integer from 65536 to 268435456 "
	    "(K, M, G and T suffixes allowed)");
	expect_error("ipc_max_frame: -16M\n", "1:16: ipc_max_frame: expected an integer from "
					      "65536 to 268435456 (K, M, G and T suffixes allowed)");
	expect_only("ipc_max_frame: \"16M\"\n",
	    "1:16: ipc_max_frame: expected an integer, found a quoted string");
	expect_only("database: { pool: 0 }\n",
	    "1:19: database.pool: expected an integer from 1 to 64");
	expect_only("database: { pool: 65 }\n",
	    "1:19: database.pool: expected an integer from 1 to 64");
	expect_only("database: { pool: 4K }\n",
	    "1:19: database.pool: expected an integer from 1 to 64");
	expect_only("database: { pool: 0x10 }\n",
	    "1:19: database.pool: expected an integer from 1 to 64");
	expect_only("database: { pool: [4] }\n",
	    "1:19: database.pool: expected an integer, found a sequence");
	expect_only("database: { pool: }\n", "1:19: database.pool: empty value");
}

/* Errors, one kind at a time, with their exact positions */

static void
test_unknown_and_duplicate_keys(void **state)
{
	expect_only("state_dir: /x\nbogus: 1\n", "2:1: unknown key 'bogus'");
	expect_only("user: a\nuser: b\n", "2:1: duplicate key 'user'");
	expect_only("database: { url: 'postgres://h/d', url: 'postgres://h/e' }\n",
	    "1:36: duplicate key 'database.url'");
	expect_only("database:\n  pool: 2\n  size: 3\n", "3:3: unknown key 'database.size'");
	expect_only("? [ a ]\n: b\n", "1:3: a key must be a scalar, not a sequence");
	/* a duplicate is reported even when its value is also wrong, and skipped */
	expect_only("listen: [\"127.0.0.1:1\"]\nlisten: 7\n", "2:1: duplicate key 'listen'");
}

/* metrics_listen: one address, none by default, never one of listen's
 * (whichever key comes first). */
static void
test_metrics_listen(void **state)
{
	assert_int_equal(parse(minimal), 0);
	assert_string_equal(cfg.metrics_listen.addr, "");
	assert_int_equal(parse("metrics_listen: \"[::1]:9100\"\n"), 0);
	assert_string_equal(cfg.metrics_listen.addr, "[::1]:9100");
	assert_string_equal(cfg.metrics_listen.host, "::1");
	assert_int_equal(cfg.metrics_listen.port, 9100);
	assert_int_equal(parse("metrics_listen: 127.0.0.1:8480\nlisten: [ \"127.0.0.2:8480\" ]\n"), 0);
	expect_only("metrics_listen: 127.0.0.1:8480\n",
	    "1:17: metrics_listen: the same address as listen[0]");
	expect_only("listen: [ \"10.0.0.1:1\", \"10.0.0.2:2\" ]\nmetrics_listen: 10.0.0.2:2\n",
	    "2:17: metrics_listen: the same address as listen[1]");
	expect_only("metrics_listen: 10.0.0.2:2\nlisten: [ \"10.0.0.2:2\" ]\n",
	    "1:17: metrics_listen: the same address as listen[0]");
	expect_only("metrics_listen: 127.0.0.1\n", "1:17: metrics_listen: expected \"host:port\"");
	expect_only("metrics_listen: ::1:9100\n",
	    "1:17: metrics_listen: an IPv6 address must be in brackets, as in \"[::1]:8480\"");
	expect_only("metrics_listen: [ \"127.0.0.1:9100\" ]\n",
	    "1:17: metrics_listen: expected a scalar, found a sequence");
	expect_only("metrics_listen: 127.0.0.1:70000\n",
	    "1:17: metrics_listen: port must be a number from 1 to 65535");
}

static void
test_wrong_types(void **state)
{
	expect_only("state_dir: [ /a ]\n", "1:12: state_dir: expected a scalar, found a sequence");
	expect_only("user:\n  name: x\n", "2:3: user: expected a scalar, found a mapping");
	expect_only("listen: 127.0.0.1:8480\n",
	    "1:9: listen: expected a sequence of \"host:port\" strings, found a scalar");
	expect_only("listen: [ [ \"127.0.0.1:1\" ] ]\n",
	    "1:11: listen[0]: expected a scalar, found a sequence");
	expect_only("database: [ embedded ]\n",
	    "1:11: database: expected \"embedded\" or a mapping, found a sequence");
	expect_only("- state_dir\n", "1:1: the top level must be a mapping, found a sequence");
	expect_only("just words\n", "1:1: the top level must be a mapping, found a scalar");
}

static void
test_empty_values(void **state)
{
	expect_only("pidfile:\n", "1:9: pidfile: empty value");
	expect_only("pidfile: ~\n", "1:10: pidfile: empty value");
	expect_only("pidfile: null\n", "1:10: pidfile: empty value");
	expect_only("pidfile: \"\"\n", "1:10: pidfile: empty value");
	expect_only("database:\n", "1:10: database: empty value");
	expect_only("database: {}\n", "1:11: database: empty mapping (write \"embedded\")");
	expect_only("listen: []\n", "1:9: listen: empty list");
	expect_only("listen:\n", "1:8: listen: expected a sequence of \"host:port\" strings, "
				 "found nothing");
	expect_only("", "1:1: empty file: the top level must be a mapping");
	expect_only("# only a comment\n", "2:1: empty file: the top level must be a mapping");
	expect_only("---\n", "2:1: the top level must be a mapping, found nothing");
	/* quoted, "null" is a path like any other: relative */
	expect_only("pidfile: \"null\"\n", "1:10: pidfile: must be an absolute path");
}

static void
test_paths(void **state)
{
	char yaml[8192];

	expect_only("state_dir: var/agrippa\n", "1:12: state_dir: must be an absolute path");
	expect_only("master_key: ./master.key\n", "1:13: master_key: must be an absolute path");
	expect_only("chroot: '~/x'\n", "1:9: chroot: must be an absolute path");
	expect_only("postgres_bin: bin\n", "1:15: postgres_bin: must be an absolute path");
	/* an escaped NUL would silently cut the path short */
	expect_only("state_dir: \"/var/agrippa\\0/x\"\n",
	    "1:12: state_dir: control characters are not allowed");
	expect_only("pidfile: \"/run/a\\npid\"\n",
	    "1:10: pidfile: control characters are not allowed");

	memset(yaml, 0, sizeof(yaml));
	strcpy(yaml, "state_dir: /");
	memset(yaml + strlen(yaml), 'a', PATH_MAX); /* 1 + PATH_MAX bytes */
	strcat(yaml, "\n");
	expect_only(yaml, "1:12: state_dir: value too long (at most 4095 bytes)");

	/* the control socket must fit sockaddr_un */
	memset(yaml, 0, sizeof(yaml));
	strcpy(yaml, "control_socket: /");
	memset(yaml + strlen(yaml), 's', 107);
	strcat(yaml, "\n");
	expect_only(yaml, "1:17: control_socket: value too long (at most 107 bytes)");
	yaml[strlen(yaml) - 2] = '\n';
	yaml[strlen(yaml) - 1] = '\0';
	assert_int_equal(parse(yaml), 0);
	assert_int_equal(strlen(cfg.control_socket), 107);
}

static void
test_user_names(void **state)
{
	assert_int_equal(parse("user: _a-b_9\n"), 0);
	assert_int_equal(parse("user: abcdefghijklmnopqrstuvwxyz0123456\n"), -1); /* 33 */
	assert_int_equal(parse("user: a2345678901234567890123456789012\n"), 0); /* 32 */
	assert_string_equal(cfg.user, "a2345678901234567890123456789012");
	expect_only("user: a23456789012345678901234567890123\n",
	    "1:7: user: value too long (at most 32 bytes)");
	expect_only("user: Agrippa\n",
	    "1:7: user: must be a user name matching [a-z_][a-z0-9_-]{0,31}");
	expect_only("user: 9lives\n",
	    "1:7: user: must be a user name matching [a-z_][a-z0-9_-]{0,31}");
	expect_only("db_user: \"a b\"\n",
	    "1:10: db_user: must be a user name matching [a-z_][a-z0-9_-]{0,31}");
	expect_only("user: -x\n", "1:7: user: must be a user name matching [a-z_][a-z0-9_-]{0,31}");
	expect_only("user: root\n", "1:7: user: must not be root");
	expect_only("db_user: root\n", "1:10: db_user: must not be root");
	expect_only("user: pg\ndb_user: pg\n", "2:10: user and db_user must differ");
	expect_only("user: _agrippadb\n", "1:7: user and db_user must differ");
}

static void
test_listen(void **state)
{
	char yaml[1024];
	size_t i;

	expect_only("listen: [ \"127.0.0.1:0\" ]\n",
	    "1:11: listen[0]: port must be a number from 1 to 65535");
	expect_only("listen: [ \"127.0.0.1:65536\" ]\n",
	    "1:11: listen[0]: port must be a number from 1 to 65535");
	expect_only("listen: [ \"127.0.0.1:+80\" ]\n",
	    "1:11: listen[0]: port must be a number from 1 to 65535");
	expect_only("listen: [ \"127.0.0.1:\" ]\n", "1:11: listen[0]: missing port after ':'");
	expect_only("listen: [ \"127.0.0.1\" ]\n", "1:11: listen[0]: expected \"host:port\"");
	expect_only("listen: [ \"example.com:80\" ]\n",
	    "1:11: listen[0]: host must be a dotted-quad IPv4 address, [IPv6 address] or "
	    "localhost");
	expect_only("listen: [ \"127.1:80\" ]\n",
	    "1:11: listen[0]: host must be a dotted-quad IPv4 address, [IPv6 address] or "
	    "localhost");
	expect_only("listen: [ \":80\" ]\n",
	    "1:11: listen[0]: host must be a dotted-quad IPv4 address, [IPv6 address] or "
	    "localhost");
	expect_only("listen: [ \"::1:80\" ]\n",
	    "1:11: listen[0]: an IPv6 address must be in brackets, as in \"[::1]:8480\"");
	expect_only("listen: [ \"[::g]:80\" ]\n", "1:11: listen[0]: invalid IPv6 address");
	expect_only("listen: [ \"[::1]80\" ]\n",
	    "1:11: listen[0]: expected \"[address]:port\"");
	expect_only("listen: [ \"[::1:80\" ]\n",
	    "1:11: listen[0]: missing ']' after the IPv6 address");
	expect_only("listen:\n  - 127.0.0.1:80\n  - 127.0.0.1:80\n",
	    "3:5: listen[1]: duplicate address");

	strcpy(yaml, "listen:\n");
	for (i = 0; i < CONF_MAX_LISTEN + 2; i++)
		snprintf(yaml + strlen(yaml), sizeof(yaml) - strlen(yaml), "  - 127.0.0.1:%zu\n",
		    i + 1);
	expect_only(yaml, "10:5: listen: at most 8 addresses");
}

static void
test_database_errors(void **state)
{
	expect_only("database: external\n",
	    "1:11: database: must be \"embedded\" or a mapping with url and/or pool");
	expect_only("database: { url: 'mysql://h/db' }\n",
	    "1:18: database.url: must start with postgresql:// or postgres://");
	expect_only("database: { url: 'POSTGRESQL://h/db' }\n",
	    "1:18: database.url: must start with postgresql:// or postgres://");
	expect_only("database: { url: }\n", "1:18: database.url: empty value");
}

/* The database url may carry a password: no error may show any part of it. */
static void
test_url_never_echoed(void **state)
{
	static const char *const bad[] = {
	    "database: { url: 'mysql://admin:hunter2@db/x' }\n",
	    "database: 'postgresql://admin:hunter2@db/x'\n",
	    "database: { url: \"postgresql://admin:hunter2@db/x\\t\" }\n",
	    "database: { uri: 'postgresql://admin:hunter2@db/x' }\n",
	    "database: { url: [ 'postgresql://admin:hunter2@db/x' ] }\n",
	    "postgresql://admin:hunter2@db/x: 1\n",
	    "database: { 'postgresql://admin:hunter2@db/x': 1 }\n",
	};
	char yaml[4096];
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(parse(bad[i]), -1);
		assert_true(err[0] != '\0');
		if (strstr(err, "hunter2") != NULL || strstr(err, "admin") != NULL)
			fail_msg("secret echoed for %s:\n%s", bad[i], err);
	}
	expect_only("postgresql://admin:hunter2@db/x: 1\n", "1:1: unknown key");
	expect_only("database: { 'postgresql://admin:hunter2@db/x': 1 }\n",
	    "1:13: unknown key in database");

	/* too long for its buffer: refused without a word of it */
	memset(yaml, 0, sizeof(yaml));
	strcpy(yaml, "database: { url: 'postgresql://admin:hunter2@db/");
	memset(yaml + strlen(yaml), 'x', CONF_URL_MAX);
	strcat(yaml, "' }\n");
	expect_only(yaml, "1:18: database.url: value too long (at most 1023 bytes)");
	assert_null(strstr(err, "hunter2"));
}

static void
test_anchors_aliases_tags(void **state)
{
	expect_error("state_dir: &a /x\npidfile: *a\n", "1:12: anchors are not allowed");
	expect_error("state_dir: &a /x\npidfile: *a\n", "2:10: aliases are not allowed");
	assert_int_equal(count_lines(err), 2); /* the alias is not also a type error */
	expect_only("listen: [ *a ]\n", "1:11: aliases are not allowed");
	expect_only("*a : x\n", "1:1: aliases are not allowed");
	expect_only("state_dir: !!str /x\n", "1:12: tags are not allowed");
	expect_only("listen: !tag [ \"127.0.0.1:1\" ]\n", "1:9: tags are not allowed");
	expect_only("&k state_dir: /x\n", "1:1: anchors are not allowed");
	/* inside a value that is skipped anyway, still refused */
	expect_error("bogus: [ &a x, *a ]\n", "1:16: aliases are not allowed");
}

/* A billion-laughs file fails fast and reports each alias, expanding none. */
static void
test_alias_bomb(void **state)
{
	const char *bomb = "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n"
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
	/* 9 unknown keys, 9 anchors, 8 x 9 aliases */
	assert_int_equal(count_lines(err), 9 + 9 + 72);
}

static void
test_syntax_errors(void **state)
{
	expect_only("state_dir: /x\n  user: y\n",
	    "2:7: syntax error: mapping values are not allowed in this context");
	/* errors before the syntax error are kept, nothing after it is read */
	assert_int_equal(parse("bogus: 1\nuser: \"unterminated\nstate_dir: x\n"), -1);
	assert_non_null(strstr(err, NAME ":1:1: unknown key 'bogus'\n"));
	assert_non_null(strstr(err, "syntax error"));
	assert_int_equal(count_lines(err), 2);
	/* invalid UTF-8 is placed from its byte offset */
	expect_only("state_dir: /x\nuser: \"\xff\"\n",
	    "2:8: syntax error: invalid leading UTF-8 octet");
	expect_error("a: 1\n---\nb: 2\n", "1:1: unknown key 'a'");
	expect_error("a: 1\n---\nb: 2\n", "2:1: only one YAML document is allowed");
	assert_int_equal(count_lines(err), 2);
	expect_error("state_dir: /x\n---\nstate_dir: /y\n", "2:1: only one YAML document is allowed");
}

/* Nesting is bounded, which also keeps libyaml's scanner (work per token
 * grows with the flow depth) from spending minutes on a file of "[". */
static void
test_deep_nesting(void **state)
{
	char yaml[128];
	char *big;

	memset(yaml, 0, sizeof(yaml));
	strcpy(yaml, "x: ");
	memset(yaml + 3, '[', 31); /* with the top mapping: 32 levels */
	memset(yaml + 34, ']', 31);
	expect_only(yaml, "1:1: unknown key 'x'");
	memset(yaml, 0, sizeof(yaml));
	strcpy(yaml, "x: ");
	memset(yaml + 3, '[', 32);
	memset(yaml + 35, ']', 32);
	expect_error(yaml, "1:35: nested deeper than 32 levels");
	assert_int_equal(count_lines(err), 2);

	big = malloc(CONF_MAX_SIZE);
	assert_non_null(big);
	memset(big, '[', CONF_MAX_SIZE);
	memcpy(big, "x: ", 3);
	assert_int_equal(parse_n(big, CONF_MAX_SIZE), -1);
	free(big);
	assert_string_equal(err, NAME ":1:1: unknown key 'x'\n" NAME
				 ":1:35: nested deeper than 32 levels\n");
}

/* Every error of a file, in order, each where it is. */
static void
test_all_errors_reported(void **state)
{
	const char *yaml = "state_dir: relative\n"
			   "user: Bad\n"
			   "listen:\n"
			   "  - 127.0.0.1:99999\n"
			   "  - 127.0.0.1:80\n"
			   "frobnicate: yes\n"
			   "database: { pool: 100 }\n"
			   "user: again\n";
	const char *want = NAME ":1:12: state_dir: must be an absolute path\n" NAME
				":2:7: user: must be a user name matching [a-z_][a-z0-9_-]{0,31}\n" NAME
				":4:5: listen[0]: port must be a number from 1 to 65535\n" NAME
				":6:1: unknown key 'frobnicate'\n" NAME
				":7:19: database.pool: expected an integer from 1 to 64\n" NAME
				":8:1: duplicate key 'user'\n";

	assert_int_equal(parse(yaml), -1);
	assert_string_equal(err, want);
}

/* A small errbuf holds whole lines only, and the call still fails. */
static void
test_small_errbuf(void **state)
{
	const char *yaml = "a: 1\nb: 2\nc: 3\n";
	char small[60];

	memset(small, 'X', sizeof(small));
	assert_int_equal(config_parse(NAME, (const unsigned char *)yaml, strlen(yaml), &cfg,
			     small, sizeof(small)),
	    -1);
	assert_string_equal(small, NAME ":1:1: unknown key 'a'\n" NAME ":2:1: unknown key 'b'\n");
	assert_int_equal(config_parse(NAME, (const unsigned char *)yaml, strlen(yaml), &cfg,
			     small, 5),
	    -1);
	assert_string_equal(small, "");
	assert_int_equal(config_parse(NAME, (const unsigned char *)yaml, strlen(yaml), &cfg,
			     NULL, 0),
	    -1);
}

/* On any failure the caller's config is exactly as it was. */
static void
test_unchanged_on_failure(void **state)
{
	static struct config before;
	const char *partly = "state_dir: /new/state\nuser: newuser\nlisten: [ \"10.1.1.1:1\" ]\n"
			     "database: { url: 'postgresql://u:pw@h/d' }\nbogus: 1\n";

	memset(&cfg, 0xa5, sizeof(cfg));
	memcpy(&before, &cfg, sizeof(cfg));
	assert_int_equal(parse(partly), -1);
	assert_memory_equal(&before, &cfg, sizeof(cfg));
	assert_int_equal(parse("state_dir: [\n"), -1);
	assert_memory_equal(&before, &cfg, sizeof(cfg));
	assert_int_equal(config_load("/nonexistent/agrippad.yaml", &cfg, err, sizeof(err)), -1);
	assert_memory_equal(&before, &cfg, sizeof(cfg));
	/* and a reload with a good file replaces it whole */
	assert_int_equal(parse(minimal), 0);
	assert_string_equal(cfg.state_dir, "/var/agrippa");
}

/* Files */

static char tmpdir[] = "/tmp/agrippa-test-config-XXXXXX";

static void
write_file(const char *path, const char *data, size_t len, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

static void
test_load(void **state)
{
	char path[256], want[512];

	snprintf(path, sizeof(path), "%s/agrippad.yaml", tmpdir);
	write_file(path, minimal, strlen(minimal), 0644);
	assert_int_equal(config_load(path, &cfg, err, sizeof(err)), 0);
	assert_string_equal(cfg.path, path);
	assert_string_equal(cfg.master_key, "/etc/agrippad/master.key");

	/* positions name the file */
	write_file(path, "user: x\nstate_dir: y\n", 21, 0600);
	assert_int_equal(config_load(path, &cfg, err, sizeof(err)), -1);
	snprintf(want, sizeof(want), "%s:2:12: state_dir: must be an absolute path\n", path);
	assert_string_equal(err, want);

	/* a config others may write is a root shell: refused */
	write_file(path, minimal, strlen(minimal), 0646);
	assert_int_equal(config_load(path, &cfg, err, sizeof(err)), -1);
	snprintf(want, sizeof(want), "%s: writable by others (chmod o-w)\n", path);
	assert_string_equal(err, want);
	unlink(path);
}

/* The preset of c named name, or NULL. */
static const struct conf_preset *
find_preset(const struct config *c, const char *name)
{
	size_t i;

	for (i = 0; i < c->egress.npresets; i++)
		if (strcmp(c->egress.presets[i].name, name) == 0)
			return &c->egress.presets[i];
	return NULL;
}

/* egress: the defaults and the shipped presets, every key set, and each
 * bad value refused at its position with the reason egress/ gives. */
static void
test_egress_section(void **state)
{
	static const char *const shipped[] = {"python", "node", "rust", "go", "debian"};
	struct egress_host h;
	struct sockaddr_in sin;
	const struct conf_preset *pr;
	size_t i;

	assert_int_equal(parse(minimal), 0);
	assert_int_equal(cfg.egress.enabled, 1);
	assert_int_equal(cfg.egress.tunnels_per_run, 32);
	assert_int_equal(cfg.egress.connect_timeout, 10);
	assert_int_equal(cfg.egress.idle_timeout, 300);
	assert_true(cfg.egress.bytes_per_run == 4ull << 30);
	assert_int_equal(cfg.egress.ncidrs, 0);
	assert_int_equal(cfg.egress.npresets, 5);
	for (i = 0; i < 5; i++) {
		pr = find_preset(&cfg, shipped[i]);
		assert_non_null(pr);
		assert_true(pr->nrules >= 2);
	}
	/* what the shipped presets allow */
	assert_null(egress_host_parse("files.pythonhosted.org", 22, &h));
	pr = find_preset(&cfg, "python");
	assert_non_null(egress_policy_match(pr->rules, pr->nrules, &h, 443, EGRESS_FORM_CONNECT));
	assert_null(egress_host_parse("deb.debian.org", 14, &h));
	pr = find_preset(&cfg, "debian");
	assert_non_null(egress_policy_match(pr->rules, pr->nrules, &h, 80, EGRESS_FORM_HTTP));
	pr = find_preset(&cfg, "rust");
	assert_null(egress_host_parse("index.crates.io", 15, &h));
	assert_non_null(egress_policy_match(pr->rules, pr->nrules, &h, 443, EGRESS_FORM_CONNECT));

	assert_int_equal(parse("egress:\n"
	                       "  enabled: false\n"
	                       "  presets:\n"
	                       "    mirror: [ \"*.mirror.example\", \"pkg.example:8443\" ]\n"
	                       "    py_3: [ pypi.org ]\n"
	                       "  allow_cidrs: [ \"10.20.0.0/16\", \"fd00:1::/32\" ]\n"
	                       "  tunnels_per_run: 1024\n"
	                       "  connect_timeout: 300\n"
	                       "  idle_timeout: 86400\n"
	                       "  bytes_per_run: 1M\n"),
	                 0);
	assert_int_equal(cfg.egress.enabled, 0);
	assert_int_equal(cfg.egress.npresets, 2); /* replaced, not added to */
	assert_null(find_preset(&cfg, "python"));
	pr = find_preset(&cfg, "mirror");
	assert_non_null(pr);
	assert_int_equal(pr->nrules, 2);
	assert_true(pr->rules[0].wildcard);
	assert_int_equal(pr->rules[1].port, 8443);
	assert_non_null(find_preset(&cfg, "py_3"));
	assert_int_equal(cfg.egress.ncidrs, 2);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(0x0a140101); /* 10.20.1.1 */
	assert_null(egress_addr_refusal((struct sockaddr *)&sin, sizeof(sin), cfg.egress.cidrs,
	                                cfg.egress.ncidrs));
	assert_non_null(egress_addr_refusal((struct sockaddr *)&sin, sizeof(sin), NULL, 0));
	assert_int_equal(cfg.egress.tunnels_per_run, 1024);
	assert_int_equal(cfg.egress.connect_timeout, 300);
	assert_int_equal(cfg.egress.idle_timeout, 86400);
	assert_int_equal(cfg.egress.bytes_per_run, 1 << 20);
	/* the top of its range, as agrippad.conf(5) writes it */
	assert_int_equal(parse("egress: { bytes_per_run: 1T }\n"), 0);
	assert_true(cfg.egress.bytes_per_run == 1ull << 40);
	/* empty lists: no preset, no network */
	assert_int_equal(parse("egress: { presets: {}, allow_cidrs: [] }\n"), 0);
	assert_int_equal(cfg.egress.npresets, 0);
	assert_int_equal(cfg.egress.ncidrs, 0);
}

static void
test_egress_errors(void **state)
{
	expect_only("egress: { presets: { py: [ \"*.com\" ] } }\n",
	    "1:28: egress.presets.py[0]: a wildcard over a single label (*.tld) would allow a "
	    "whole top-level domain");
	expect_only("egress: { presets: { py: [ pypi.org, \"*\" ] } }\n",
	    "1:38: egress.presets.py[1]: a bare '*' would allow every host");
	expect_only("egress: { presets: { py: [ 10.0.0.1 ] } }\n",
	    "1:28: egress.presets.py[0]: an entry is a host name, not an IP address (see "
	    "egress.allow_cidrs)");
	expect_only("egress: { presets: { py: [ \"https://pypi.org\" ] } }\n",
	    "1:28: egress.presets.py[0]: an entry is a host name, not a URL");
	expect_only("egress: { presets: { py: [ PyPI.org ] } }\n",
	    "1:28: egress.presets.py[0]: an entry must be in lower case");
	expect_only("egress: { presets: { py: [ pypi.org, pypi.org ] } }\n",
	    "1:38: egress.presets.py[1]: duplicate entry");
	expect_only("egress: { presets: { py: [] } }\n", "1:26: egress.presets.py: empty list");
	expect_only("egress: { presets: { py: pypi.org } }\n",
	    "1:26: egress.presets.py: expected a sequence, found a scalar");
	expect_only("egress: { presets: { py: [ [ a.test ] ] } }\n",
	    "1:28: egress.presets.py[0]: expected a scalar, found a sequence");
	expect_only("egress: { presets: { Py: [ a.test ] } }\n",
	    "1:22: egress.presets: a preset name must match [a-z0-9][a-z0-9_-]{0,31}");
	expect_only("egress: { presets: { -py: [ a.test ] } }\n",
	    "1:22: egress.presets: a preset name must match [a-z0-9][a-z0-9_-]{0,31}");
	expect_only("egress: { presets: { py: [ a.test ], py: [ b.test ] } }\n",
	    "1:38: egress.presets: duplicate preset 'py'");
	expect_only("egress: { presets: [ py ] }\n",
	    "1:20: egress.presets: expected a mapping, found a sequence");
	expect_only("egress: { allow_cidrs: [ \"10.20.0.1/16\" ] }\n",
	    "1:26: egress.allow_cidrs[0]: host bits are set after the prefix length");
	expect_only("egress: { allow_cidrs: [ \"127.0.0.0/8\" ] }\n",
	    "1:26: egress.allow_cidrs[0]: holds loopback or unspecified addresses, the host's own");
	expect_only("egress: { allow_cidrs: [ \"0.0.0.0/0\" ] }\n",
	    "1:26: egress.allow_cidrs[0]: a /0 network would allow every address");
	expect_only("egress: { allow_cidrs: [ 10.0.0.0 ] }\n",
	    "1:26: egress.allow_cidrs[0]: expected ADDRESS/PREFIX, as in 10.20.0.0/16");
	expect_only("egress: { allow_cidrs: [ \"10.0.0.0/33\" ] }\n",
	    "1:26: egress.allow_cidrs[0]: the prefix length must be a number from 1 to 32");
	expect_only("egress: { allow_cidrs: [ \"mirror.internal/24\" ] }\n",
	    "1:26: egress.allow_cidrs[0]: not an IPv4 or IPv6 address before '/'");
	expect_only("egress: { allow_cidrs: [ \"10.0.0.0/8\", \"10.0.0.0/8\" ] }\n",
	    "1:40: egress.allow_cidrs[1]: duplicate network");
	expect_only("egress: { allow_cidrs: \"10.0.0.0/8\" }\n",
	    "1:24: egress.allow_cidrs: expected a sequence, found a scalar");
	expect_only("egress: { enabled: yes }\n", "1:20: egress.enabled: expected true or false");
	expect_only("egress: { tunnels_per_run: 0 }\n",
	    "1:28: egress.tunnels_per_run: expected an integer from 1 to 1024");
	expect_only("egress: { connect_timeout: 301 }\n",
	    "1:28: egress.connect_timeout: expected an integer from 1 to 300");
	expect_only("egress: { idle_timeout: 0 }\n",
	    "1:25: egress.idle_timeout: expected an integer from 1 to 86400");
	expect_only("egress: { bytes_per_run: 1K }\n",
	    "1:26: egress.bytes_per_run: expected an integer from 1048576 to 1099511627776 "
	    "(K, M, G and T suffixes allowed)");
	expect_only("egress: { deny: [] }\n", "1:11: unknown key 'egress.deny'");
	expect_only("egress: [ a ]\n", "1:9: egress: expected a mapping, found a sequence");
	/* every error of the section, not only the first */
	assert_int_equal(parse("egress: { presets: { py: [ \"*\", \"*.com\" ] },"
	                       " allow_cidrs: [ \"::1/128\" ], tunnels_per_run: 0 }\n"),
	    -1);
	assert_int_equal(count_lines(err), 4);
}

static void
test_egress_limits(void **state)
{
	static char yaml[65536];
	size_t i, len = 0;

	len += (size_t)snprintf(yaml + len, sizeof(yaml) - len, "egress:\n  presets:\n    big: [");
	for (i = 0; i < 65; i++)
		len += (size_t)snprintf(yaml + len, sizeof(yaml) - len, "%sh%zu.test", i ? ", " : "",
		                        i);
	len += (size_t)snprintf(yaml + len, sizeof(yaml) - len, "]\n");
	for (i = 1; i < 17; i++)
		len += (size_t)snprintf(yaml + len, sizeof(yaml) - len, "    p%zu: [ a.test ]\n", i);
	len += (size_t)snprintf(yaml + len, sizeof(yaml) - len, "  allow_cidrs: [");
	for (i = 0; i < 33; i++)
		len += (size_t)snprintf(yaml + len, sizeof(yaml) - len, "%s\"10.%zu.0.0/16\"",
		                        i ? ", " : "", i);
	snprintf(yaml + len, sizeof(yaml) - len, "]\n");
	assert_int_equal(parse(yaml), -1);
	assert_non_null(strstr(err, "egress.presets.big: at most 64 entries\n"));
	assert_non_null(strstr(err, "egress.presets: at most 16 presets\n"));
	assert_non_null(strstr(err, "egress.allow_cidrs: at most 32 entries\n"));
	assert_int_equal(count_lines(err), 3);
}

/* The shipped sample parses, and is exactly the defaults it claims to list. */
static void
test_sample_is_defaults(void **state)
{
	static struct config def;
	const char *self = __FILE__, *tail = strstr(self, "tests/unit/test_config.c");
	char path[PATH_MAX];

	assert_non_null(tail);
	snprintf(path, sizeof(path), "%.*sdocs/agrippad.yaml.sample", (int)(tail - self), self);
	if (config_load(path, &cfg, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	config_defaults(&def);
	memcpy(def.path, cfg.path, sizeof(def.path));
	assert_memory_equal(&def, &cfg, sizeof(def));
}

static void
test_load_missing(void **state)
{
	assert_int_equal(config_load("/nonexistent/agrippad.yaml", &cfg, err, sizeof(err)), -1);
	assert_string_equal(err, "/nonexistent/agrippad.yaml: No such file or directory\n");
}

static void
test_load_not_regular(void **state)
{
	char path[256], want[512];

	assert_int_equal(config_load(tmpdir, &cfg, err, sizeof(err)), -1);
	snprintf(want, sizeof(want), "%s: not a regular file\n", tmpdir);
	assert_string_equal(err, want);
	/* a FIFO must not hang the daemon */
	snprintf(path, sizeof(path), "%s/fifo.yaml", tmpdir);
	assert_int_equal(mkfifo(path, 0600), 0);
	assert_int_equal(config_load(path, &cfg, err, sizeof(err)), -1);
	snprintf(want, sizeof(want), "%s: not a regular file\n", path);
	assert_string_equal(err, want);
	unlink(path);
}

/* The size limit is exact: CONF_MAX_SIZE bytes pass, one more fails, and a
 * 2 MiB file is refused by both entry points. */
static void
test_size_limit(void **state)
{
	size_t big = 2 * 1024 * 1024;
	char *buf = malloc(big);
	char path[256], want[512];

	assert_non_null(buf);
	memset(buf, '#', big);
	memcpy(buf, "{}\n", 3);
	buf[CONF_MAX_SIZE - 1] = '\n';
	assert_int_equal(parse_n(buf, CONF_MAX_SIZE), 0);
	assert_int_equal(parse_n(buf, CONF_MAX_SIZE + 1), -1);
	assert_string_equal(err, NAME ": too large (more than 1048576 bytes)\n");
	assert_int_equal(parse_n(buf, big), -1);
	assert_string_equal(err, NAME ": too large (more than 1048576 bytes)\n");

	snprintf(path, sizeof(path), "%s/big.yaml", tmpdir);
	write_file(path, buf, big, 0600);
	assert_int_equal(config_load(path, &cfg, err, sizeof(err)), -1);
	snprintf(want, sizeof(want), "%s: too large (more than 1048576 bytes)\n", path);
	assert_string_equal(err, want);
	unlink(path);
	free(buf);
}

static int
setup_dir(void **state)
{
	return mkdtemp(tmpdir) == NULL ? -1 : 0;
}

static int
teardown_dir(void **state)
{
	return rmdir(tmpdir);
}

/* git.author: "Name <address>", or the default (empty here). */
static void
test_git_author(void **state)
{
	assert_int_equal(parse(minimal), 0);
	assert_string_equal(cfg.git.author_name, "");
	assert_int_equal(parse("git: { author: \"Fix Bot <bot@ci.example.com>\" }\n"), 0);
	assert_string_equal(cfg.git.author_name, "Fix Bot");
	assert_string_equal(cfg.git.author_email, "bot@ci.example.com");
	expect_only("git: { author: bot }\n",
	    "1:16: git.author: expected \"Name <address>\" in printable ASCII (a name of 1 to 63 "
	    "bytes, an address with an @)");
	expect_only("git: { author: \"<bot@x.test>\" }\n",
	    "1:16: git.author: expected \"Name <address>\" in printable ASCII (a name of 1 to 63 "
	    "bytes, an address with an @)");
	expect_only("git: { author: \"Bot <bot>\" }\n",
	    "1:16: git.author: expected \"Name <address>\" in printable ASCII (a name of 1 to 63 "
	    "bytes, an address with an @)");
	expect_only("git: { author: \"Bot <b@x> y\" }\n",
	    "1:16: git.author: expected \"Name <address>\" in printable ASCII (a name of 1 to 63 "
	    "bytes, an address with an @)");
	expect_only("git: { author: \"Bot <b o@x>\" }\n",
	    "1:16: git.author: expected \"Name <address>\" in printable ASCII (a name of 1 to 63 "
	    "bytes, an address with an @)");
	expect_only("git: { author: \"B\\tot <b@x>\" }\n",
	    "1:16: git.author: control characters are not allowed");
	expect_only("git: { writer: x }\n", "1:8: unknown key 'git.writer'");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_minimal),
	    cmocka_unit_test(test_defaults),
	    cmocka_unit_test(test_every_key),
	    cmocka_unit_test(test_database_forms),
	    cmocka_unit_test(test_numbers),
	    cmocka_unit_test(test_sandbox_section),
	    cmocka_unit_test(test_engine_section),
	    cmocka_unit_test(test_providers_full),
	    cmocka_unit_test(test_providers_defaults),
	    cmocka_unit_test(test_providers_list_errors),
	    cmocka_unit_test(test_providers_limits),
	    cmocka_unit_test(test_providers_name_kind),
	    cmocka_unit_test(test_providers_base_url),
	    cmocka_unit_test(test_providers_values),
	    cmocka_unit_test(test_providers_models),
	    cmocka_unit_test(test_agent_errors),
	    cmocka_unit_test(test_agent_crosscheck),
	    cmocka_unit_test(test_providers_yaml_features),
	    cmocka_unit_test(test_providers_unchanged_on_failure),
	    cmocka_unit_test(test_unknown_and_duplicate_keys),
	    cmocka_unit_test(test_wrong_types),
	    cmocka_unit_test(test_metrics_listen),
	    cmocka_unit_test(test_empty_values),
	    cmocka_unit_test(test_paths),
	    cmocka_unit_test(test_user_names),
	    cmocka_unit_test(test_listen),
	    cmocka_unit_test(test_database_errors),
	    cmocka_unit_test(test_url_never_echoed),
	    cmocka_unit_test(test_anchors_aliases_tags),
	    cmocka_unit_test(test_alias_bomb),
	    cmocka_unit_test(test_syntax_errors),
	    cmocka_unit_test(test_deep_nesting),
	    cmocka_unit_test(test_all_errors_reported),
	    cmocka_unit_test(test_small_errbuf),
	    cmocka_unit_test(test_unchanged_on_failure),
	    cmocka_unit_test(test_load),
	    cmocka_unit_test(test_egress_section),
	    cmocka_unit_test(test_egress_errors),
	    cmocka_unit_test(test_egress_limits),
	    cmocka_unit_test(test_git_author),
	    cmocka_unit_test(test_sample_is_defaults),
	    cmocka_unit_test(test_load_missing),
	    cmocka_unit_test(test_load_not_regular),
	    cmocka_unit_test(test_size_limit),
	};

	return cmocka_run_group_tests_name("config", tests, setup_dir, teardown_dir);
}
