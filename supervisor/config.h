/*
 * agrippad configuration (YAML, libyaml).  See agrippad.conf.5.
 */
#ifndef AGRIPPA_CONFIG_H
#define AGRIPPA_CONFIG_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "egress/addr.h"
#include "egress/policy.h"

#define CONF_DEFAULT_PATH "/etc/agrippad.yaml"
#define CONF_MAX_LISTEN 8
#define CONF_ADDR_MAX 256
#define CONF_URL_MAX 1024
#define CONF_NAME_MAX 33 /* a user name: [a-z_][a-z0-9_-]{0,31}, plus the NUL */
#define CONF_MAX_SIZE (1024 * 1024) /* larger config files are refused */
#define CONF_MAX_PROVIDERS 8
#define CONF_MAX_MODELS 32
#define CONF_PROVIDER_NAME_MAX 33 /* [a-z0-9][a-z0-9_-]{0,31} plus the NUL */
#define CONF_MODEL_MAX 129        /* [A-Za-z0-9][A-Za-z0-9._:/@-]{0,127} plus the NUL */
#define CONF_MAX_PRESETS 16
#define CONF_PRESET_RULES 64      /* entries of one preset */
#define CONF_PRESET_NAME_MAX 33   /* [a-z0-9][a-z0-9_-]{0,31} plus the NUL */
#define CONF_MAX_CIDRS 32

struct conf_listen {
	char addr[CONF_ADDR_MAX]; /* as written, e.g. "127.0.0.1:8480", "[::1]:8480" */
	char host[CONF_ADDR_MAX]; /* "127.0.0.1", "::1" */
	unsigned port;            /* 1..65535 */
};

/* sandbox: limits of every per-run sandbox (agrippad.conf.5). */
struct conf_sandbox {
	uint64_t uid, gid;      /* uid/gid: the host ids the sandbox user maps to (root mode) */
	uint64_t max;           /* max: sandboxes at once, 1..1024, default 32 */
	uint64_t memory;        /* memory: cgroup memory limit, bytes, default 2G */
	uint64_t pids;          /* pids: cgroup pids limit and RLIMIT_NPROC, default 512 */
	uint64_t cpu;           /* cpu: percent of one CPU (cgroup quota), 1..100000, default 100 */
	uint64_t tmp_size;      /* tmp_size: size of the private /tmp, default 256M */
	uint64_t file_size;     /* file_size: RLIMIT_FSIZE, largest file a command writes, 1G */
	uint64_t open_files;    /* open_files: RLIMIT_NOFILE, default 1024 */
	uint64_t exec_timeout;  /* exec_timeout: longest command, seconds, default 600 */
	uint64_t output_max;    /* output_max: command output kept (stdout+stderr), 1M */
	uint64_t file_max;      /* file_max: largest file the file tools read whole or write, 8M */
	uint64_t artifact_max;  /* artifact_max: largest artifact, default 16M */
	uint64_t disk;          /* disk: a run's workspace filesystem, bytes, default 10G; 0: none */
};

/* engine: how this host's engine schedules runs (agrippad.conf.5). */
struct conf_engine {
	uint64_t concurrency; /* concurrency: runs this host executes at once, 1..1024, default 4 */
	uint64_t lease;       /* lease: a run's lease, seconds, 2..3600, default 30 */
	uint64_t sweep;       /* sweep: seconds between sweeps (expired approvals,
	                       * stranded runs), 1..3600, default 5 */
	uint64_t step_budget; /* step_budget: what an agent step attempt reserves when
	                       * neither its run nor its phase has a budget,
	                       * micro-dollars, default 10 USD */
	uint64_t host_grace;  /* host_grace: seconds without an engine of a run's host
	                       * before its runs fail, 60..31536000, default 86400 */
};

enum conf_provider_kind { CONF_PROVIDER_ANTHROPIC = 0, CONF_PROVIDER_OPENAI = 1 };

/* One model a provider may be asked for, with its prices in micro-dollars
 * per million tokens (what a price of "3.00" USD per million becomes: 3000000). */
struct conf_model {
	char name[CONF_MODEL_MAX];
	uint64_t input, output, cache_read, cache_write;
};

/* providers[]: a model provider the proxy talks to (agrippad.conf.5). */
struct conf_provider {
	char name[CONF_PROVIDER_NAME_MAX]; /* providers.name: unique */
	int kind;                      /* providers.kind: enum conf_provider_kind */
	char base_url[CONF_URL_MAX];   /* providers.base_url: http(s)://, no trailing '/' */
	char key_file[PATH_MAX];       /* providers.key_file: absolute, or "" for none */
	uint64_t timeout;              /* providers.timeout: seconds, 1..3600, default 300 */
	uint64_t retries;              /* providers.retries: 0..10, default 3 */
	int stream;                    /* providers.stream: a streamed response, default 1 */
	int max_completion;            /* providers.max_tokens_field: max_completion_tokens
	                                  (1; openai only) or max_tokens (0, the default) */
	struct conf_model models[CONF_MAX_MODELS];
	size_t nmodels;                /* providers.models: >= 1, the allow-list */
};

/* api: what one user may ask of the HTTP API (a token bucket per user). */
struct conf_api {
	uint64_t user_rate;  /* api.user_rate: requests per second, 0..100000 (0: no limit), default 20 */
	uint64_t user_burst; /* api.user_burst: requests at once, 1..1000000, default 200 */
	uint64_t sse_queued_max; /* api.sse_queued_max: bytes all event streams may hold
	                          * unwritten, 1M..16G, default 64M */
};

/* agent: what agent steps use. */
struct conf_agent {
	char provider[CONF_PROVIDER_NAME_MAX]; /* agent.provider: "" (default): agent steps fail */
	char model[CONF_MODEL_MAX];               /* agent.model: one of its models */
	uint64_t max_tokens;       /* agent.max_tokens: per call, 1..1000000, default 8192 */
	uint64_t tool_output_max;  /* agent.tool_output_max: 1K..1M, default 32K */
	uint64_t mcp_tools_max;    /* agent.mcp_tools_max: 0..1024, default 128 */
	uint64_t mcp_tool_bytes_max; /* agent.mcp_tool_bytes_max: 1K..16M, default 256K */
};

/* One named allow list templates may use (network.presets). */
struct conf_preset {
	char name[CONF_PRESET_NAME_MAX];
	struct egress_rule rules[CONF_PRESET_RULES];
	size_t nrules;
};

/* egress: the sandboxes' only way out, the egress proxy (agrippad.conf.5). */
struct conf_egress {
	int enabled;               /* enabled: false: no run gets any network, default true */
	struct conf_preset presets[CONF_MAX_PRESETS];
	size_t npresets;           /* presets: default python, node, rust, go and debian */
	struct egress_cidr cidrs[CONF_MAX_CIDRS];
	size_t ncidrs;             /* allow_cidrs: the only way to private or reserved
	                            * addresses, none by default */
	uint64_t tunnels_per_run;  /* tunnels_per_run: connections at once, 1..1024, default 32 */
	uint64_t connect_timeout;  /* connect_timeout: seconds, 1..300, default 10 */
	uint64_t idle_timeout;     /* idle_timeout: seconds, 1..86400, default 300 */
	uint64_t bytes_per_run;    /* bytes_per_run: both ways, in all, 1M..1T, default 4G */
};

/* git: the commits runs push */
#define CONF_AUTHOR_NAME_MAX 64
#define CONF_AUTHOR_EMAIL_MAX 254
struct conf_git {
	char author_name[CONF_AUTHOR_NAME_MAX];   /* git.author "Name <email>": "" for the default, */
	char author_email[CONF_AUTHOR_EMAIL_MAX]; /* Agrippa <agrippa@HOSTNAME> */
};

#define CONF_PUBLIC_URL_MAX 256
struct config {
	char path[PATH_MAX];           /* file it was read from */
	char state_dir[PATH_MAX];      /* state_dir: /var/agrippa */
	char user[CONF_NAME_MAX];      /* user: _agrippa */
	char db_user[CONF_NAME_MAX];   /* db_user: _agrippadb (runs the embedded postgres) */
	char control_socket[PATH_MAX]; /* control_socket: /run/agrippad.sock */
	char master_key[PATH_MAX];     /* master_key: /etc/agrippad/master.key */
	char pidfile[PATH_MAX];        /* pidfile: /run/agrippad.pid */
	char chroot[PATH_MAX];         /* chroot: /var/empty */
	char postgres_bin[PATH_MAX];   /* postgres_bin: "" = first of /usr/lib/postgresql/N/bin */
	struct conf_listen listen[CONF_MAX_LISTEN];
	size_t nlisten;                /* listen: [ "127.0.0.1:8480" ] */
	struct conf_listen metrics_listen; /* metrics_listen: "host:port" for GET /metrics;
	                                * addr "" (the default): none */
	int db_embedded;               /* database: embedded | { url: ..., pool: N } */
	char db_url[CONF_URL_MAX];     /* database.url: secret, may hold a password; never logged */
	unsigned db_pool;              /* database.pool: 1..64, default 4 */
	size_t ipc_max_frame;          /* ipc_max_frame: 65536..268435456 (or 64K..256M), default 16M */
	struct conf_sandbox sandbox;
	struct conf_engine engine;
	struct conf_provider providers[CONF_MAX_PROVIDERS];
	size_t nproviders;             /* providers: none by default */
	struct conf_agent agent;
	struct conf_git git;
	struct conf_egress egress;
	char public_url[CONF_PUBLIC_URL_MAX]; /* public_url: "" = http://, as listen says; the
	                                * origin browsers see (scheme://host[:port]);
	                                * https:// makes the session cookie Secure */
	char ui_dir[PATH_MAX];         /* ui_dir: PREFIX/share/agrippa/ui, the dashboard's files */
	uint64_t session_lifetime;     /* session_lifetime: seconds, 60..2592000, default 43200 */
	struct conf_api api;           /* api: the per-user request limit */
};

/*
 * Fill c with every default (path is set to CONF_DEFAULT_PATH).  Every key
 * has one: the values shown above, listen 127.0.0.1:8480, embedded database.
 */
void config_defaults(struct config *c);

/*
 * Parse the file at path over the defaults (not over the old contents of *c)
 * and, only when the whole file is valid, copy the result into *c: on failure
 * *c is left exactly as it was, so a SIGHUP reload with a broken file keeps
 * the running configuration.
 *
 * Every problem found is reported as a "path:line:col: reason\n" line
 * (1-based, at the offending key or value) in errbuf (size errsz; cleared
 * first, always NUL-terminated; once a line does not fit, it and every later
 * one are dropped whole, but still make the call fail).  All
 * errors of the file are collected, not just the first; after a YAML syntax
 * error parsing stops with that error.  Whole-file problems have no position:
 * "path: strerror" when it cannot be opened or read, "path: reason" when it
 * is not a regular file, is writable by others, or exceeds CONF_MAX_SIZE.
 * Values are never echoed (database.url may hold a password); a key name is
 * echoed only when it is a plain identifier.
 *
 * Errors: unknown keys, duplicate keys, wrong node types, empty or null
 * values, values too long for their buffers or holding control characters,
 * relative paths (a daemon has no useful cwd), bad user names, user or
 * db_user "root" or both equal, out-of-range numbers, a provider or model
 * missing a required key, bad or duplicate provider and model names, an
 * agent naming a provider or model not configured, an egress preset
 * entry or allow_cidrs network egress/policy.h or egress/addr.h refuses
 * (with its reason), a bad or duplicate preset name, anchors, aliases,
 * tags, more than one document, nesting deeper than 32 levels, and a top
 * level that is not a mapping.
 * Returns 0 when the file is valid, -1 otherwise.
 */
int config_load(const char *path, struct config *c, char *errbuf, size_t errsz);
/* The file at path as config_load reads it (a regular file others cannot
 * write, at most CONF_MAX_SIZE bytes): *out a new buffer of *len bytes (the
 * caller wipes and frees it: it may hold database.url's password), or -1
 * with the reason in errbuf. */
int config_read_file(const char *path, unsigned char **out, size_t *len, char *errbuf,
                     size_t errsz);

/*
 * Same, parsing buf (len bytes, need not be NUL-terminated; name is used in
 * messages and stored in c->path).  Same contract: *c changes only on
 * success.  For config_load, tests and fuzzing.
 */
int config_parse(const char *name, const unsigned char *buf, size_t len, struct config *c,
    char *errbuf, size_t errsz);

#endif
