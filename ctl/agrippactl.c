/*
 * agrippactl: the operator's tool.  Sends one request over the control
 * socket and prints the reply, for a person or (-j) as JSON.
 * Exit status: 0 ok, 1 the daemon answered with an error, 2 usage error or
 * no daemon reachable.
 */
#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <sodium.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "ctl/ctl.h"
#include "ipc/ipc.h"
#include "ipc/ipc_msg.h"


struct ctl_cmd {
	const char *name;
	int minargs, maxargs;
	const char *usage;
};

static const struct ctl_cmd cmds[] = {
	{ "status", 0, 0, "status" },
	{ "reload", 0, 0, "reload" },
	{ "stop", 0, 0, "stop" },
	{ "log", 1, 1, "log verbose|brief" },
	{ "sandbox", 1, 1000000, "sandbox run [-r] [-t seconds] [-w dir] [--] command [arg ...]" },
	{ "backup", 1, 1, "backup DIR" },
	{ "template check", 1, 1, "template check FILE" },
	{ "template load", 1, 1, "template load FILE" },
	{ "template list", 0, 0, "template list" },
	{ "user add", 1, 2, "user add NAME [DISPLAY]" },
	{ "user list", 0, 0, "user list" },
	{ "user disable", 1, 1, "user disable NAME" },
	{ "token create", 1, 2, "token create USER [DAYS]" },
	{ "token revoke", 1, 1, "token revoke PREFIX" },
	{ "token list", 1, 1, "token list USER" },
	{ "project add", 1, 1, "project add NAME" },
	{ "project list", 0, 0, "project list" },
	{ "member add", 3, 3, "member add PROJECT USER admin|member|viewer" },
	{ "member remove", 2, 2, "member remove PROJECT USER" },
	{ "member role", 3, 3, "member role PROJECT USER admin|member|viewer" },
	{ "repo add", 3, 5, "repo add PROJECT NAME URL [github|gitlab|none [API_URL]]  (token on standard input)" },
	{ "repo list", 1, 1, "repo list PROJECT" },
	{ "repo test", 2, 2, "repo test PROJECT NAME" },
	{ "skill add", 2, 2, "skill add NAME FILE" },
	{ "skill list", 0, 0, "skill list" },
	{ "mcp add", 2, 2, "mcp add NAME SPEC  (credentials on standard input)" },
	{ "mcp list", 0, 0, "mcp list" },
	{ "mcp show", 1, 2, "mcp show NAME [VERSION]" },
	{ "mcp test", 1, 8, "mcp test [-c TOOL [-a ARGS] [-n COUNT]] NAME [VERSION]" },
	{ "grant add", 3, 3, "grant add PROJECT skill|mcp NAME" },
	{ "grant remove", 3, 3, "grant remove PROJECT skill|mcp NAME" },
	{ "grant list", 1, 1, "grant list PROJECT" },
	{ "key rotate", 0, 0, "key rotate" },
};

#define CTL_SECRET_MAX 4096 /* a repository token or MCP credentials, in bytes */

/*
 * How many words of argv cmd's name takes ("status": 1, "user add": 2), or
 * 0 when it does not match.
 */
static int
cmd_match(const struct ctl_cmd *cmd, int argc, char **argv)
{
	const char *sp = strchr(cmd->name, ' ');
	size_t n;

	if (sp == NULL)
		return strcmp(cmd->name, argv[0]) == 0 ? 1 : 0;
	n = (size_t)(sp - cmd->name);
	if (argc < 2 || strlen(argv[0]) != n || strncmp(cmd->name, argv[0], n) != 0 ||
	    strcmp(sp + 1, argv[1]) != 0)
		return 0;
	return 2;
}

/*
 * Read a secret (what: "token", "credentials") from standard input, never
 * from argv: everything up to end of file, less one trailing newline; empty
 * input is no secret.  Echo is off while a terminal is read.  buf holds
 * CTL_SECRET_MAX + 2 bytes.  Returns the length, or -1 after saying why
 * (without the secret) when it holds a control character (other than
 * JSON's white space, tab, newline and return, when ws) or is too long.
 */
static ssize_t
read_secret(const char *what, int ws, char *buf, size_t bufsz)
{
	struct termios t, quiet;
	int restore = 0, bad = 0;
	size_t len = 0, i;
	ssize_t n;

	if (isatty(STDIN_FILENO)) {
		fprintf(stderr, "agrippactl: reading the %s from standard input (end it with Ctrl-D)\n",
		    what);
		if (tcgetattr(STDIN_FILENO, &t) == 0) {
			quiet = t;
			quiet.c_lflag &= ~(tcflag_t)ECHO;
			restore = tcsetattr(STDIN_FILENO, TCSANOW, &quiet) == 0;
		}
	}
	while (len < bufsz && (n = read(STDIN_FILENO, buf + len, bufsz - len)) != 0) {
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			fprintf(stderr, "agrippactl: standard input: %s\n", strerror(errno));
			bad = 1;
			break;
		}
		len += (size_t)n;
	}
	if (restore) {
		(void)tcsetattr(STDIN_FILENO, TCSANOW, &t);
		fputc('\n', stderr);
	}
	if (len > 0 && buf[len - 1] == '\n')
		len--;
	if (!bad && len > CTL_SECRET_MAX) {
		fprintf(stderr, "agrippactl: refused the %s: more than %d bytes\n", what, CTL_SECRET_MAX);
		bad = 1;
	}
	for (i = 0; i < len && !bad; i++)
		if (((unsigned char)buf[i] < 0x20 && !(ws && strchr("\t\n\r", buf[i]) != NULL)) ||
		    buf[i] == 0x7f) {
			fprintf(stderr, "agrippactl: refused the %s: it has a control character\n", what);
			bad = 1;
		}
	if (bad) {
		sodium_memzero(buf, bufsz);
		return -1;
	}
	return (ssize_t)len;
}

/* The daemon reads a file itself, from its own working directory: make
 * argv[i] absolute in path (PATH_MAX).  Returns 0, or -1 after saying why. */
static int
abs_path(char **argv, int i, char *path)
{
	if (realpath(argv[i], path) == NULL) {
		fprintf(stderr, "agrippactl: %s: %s\n", argv[i], strerror(errno));
		return -1;
	}
	argv[i] = path;
	return 0;
}

__attribute__((noreturn)) static void
usage(void)
{
	size_t i;

	fprintf(stderr, "usage: agrippactl [-j] [-s socket] command [argument ...]\n");
	fprintf(stderr, "commands:\n");
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(stderr, "\t%s\n", cmds[i].usage);
	exit(2);
}

/* msgpack -> jansson, for -j and for formatting.  Caller owns the result. */
static json_t *
mp_to_json(const msgpack_object *o)
{
	json_t *j;
	uint32_t i;

	switch (o->type) {
	case MSGPACK_OBJECT_NIL:
		return json_null();
	case MSGPACK_OBJECT_BOOLEAN:
		return json_boolean(o->via.boolean);
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
		return json_integer((json_int_t)o->via.u64);
	case MSGPACK_OBJECT_NEGATIVE_INTEGER:
		return json_integer((json_int_t)o->via.i64);
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64:
		return json_real(o->via.f64);
	case MSGPACK_OBJECT_STR:
		return json_stringn(o->via.str.ptr, o->via.str.size);
	case MSGPACK_OBJECT_ARRAY:
		j = json_array();
		for (i = 0; i < o->via.array.size; i++)
			json_array_append_new(j, mp_to_json(&o->via.array.ptr[i]));
		return j;
	case MSGPACK_OBJECT_MAP:
		j = json_object();
		for (i = 0; i < o->via.map.size; i++) {
			const msgpack_object *k = &o->via.map.ptr[i].key;
			char key[128];

			if (k->type != MSGPACK_OBJECT_STR)
				continue;
			snprintf(key, sizeof(key), "%.*s", (int)k->via.str.size, k->via.str.ptr);
			json_object_set_new(j, key, mp_to_json(&o->via.map.ptr[i].val));
		}
		return j;
	default:
		return json_null();
	}
}

static void
print_duration(json_int_t s, char *buf, size_t bufsz)
{
	if (s >= 86400)
		snprintf(buf, bufsz, "%lldd%02lldh", (long long)s / 86400,
		    (long long)(s % 86400) / 3600);
	else if (s >= 3600)
		snprintf(buf, bufsz, "%lldh%02lldm", (long long)s / 3600, (long long)(s % 3600) / 60);
	else
		snprintf(buf, bufsz, "%lldm%02llds", (long long)s / 60, (long long)s % 60);
}

static void
print_status(json_t *d)
{
	json_t *db = json_object_get(d, "database"), *procs = json_object_get(d, "processes");
	json_t *mirrors = json_object_get(d, "mirrors"), *egress = json_object_get(d, "egress"), *p;
	size_t i;
	char up[32], size[32];

	printf("agrippad %s%s\n", json_string_value(json_object_get(d, "version")),
	    json_is_true(json_object_get(d, "devmode")) ? " (development mode)" : "");
	printf("database: %s (%s, %lld connections)\n",
	    json_string_value(json_object_get(db, "state")),
	    json_string_value(json_object_get(db, "mode")),
	    (long long)json_integer_value(json_object_get(db, "connections")));
	printf("sandboxes: %lld running\n",
	    (long long)json_integer_value(json_object_get(d, "sandboxes")));
	if (json_is_object(mirrors))
		printf("mirrors: %lld (%s)\n",
		    (long long)json_integer_value(json_object_get(mirrors, "count")),
		    fmt_size((uint64_t)json_integer_value(json_object_get(mirrors, "bytes")), size,
		        sizeof(size)));
	if (json_is_object(egress))
		printf("egress: %lld runs with a network, %lld tunnels open\n",
		    (long long)json_integer_value(json_object_get(egress, "runs")),
		    (long long)json_integer_value(json_object_get(egress, "tunnels")));
	putchar('\n');
	printf("%-12s %8s %-12s %10s %8s  %s\n", "ROLE", "PID", "USER", "UPTIME", "RESTARTS",
	    "STATE");
	json_array_foreach(procs, i, p) {
		print_duration(json_integer_value(json_object_get(p, "uptime")), up, sizeof(up));
		printf("%-12s %8lld %-12s %10s %8lld  %s\n",
		    json_string_value(json_object_get(p, "role")),
		    (long long)json_integer_value(json_object_get(p, "pid")),
		    json_string_value(json_object_get(p, "user")), up,
		    (long long)json_integer_value(json_object_get(p, "restarts")),
		    json_string_value(json_object_get(p, "state")));
	}
}

/* Display width of a UTF-8 string: its code points (good enough for names). */
static size_t
text_width(const char *s)
{
	size_t w = 0;

	for (; *s != '\0'; s++)
		if (((unsigned char)*s & 0xc0) != 0x80)
			w++;
	return w;
}

static const char *
cell(json_t *row, size_t j)
{
	const char *v = json_string_value(json_array_get(row, j));

	return v != NULL ? v : "-";
}

/* A list reply { "columns": [...], "rows": [[...]] } as an aligned table
 * under a header of the upper-cased column names. */
static void
print_table(json_t *cols, json_t *rows)
{
	size_t ncols = json_array_size(cols), i, j, k, *width;
	json_t *row, *col;
	const char *v;

	if (ncols == 0 || (width = calloc(ncols, sizeof(*width))) == NULL)
		return;
	json_array_foreach(cols, j, col)
		width[j] = text_width(json_string_value(col) ? json_string_value(col) : "");
	json_array_foreach(rows, i, row)
		for (j = 0; j < ncols; j++)
			if (text_width(cell(row, j)) > width[j])
				width[j] = text_width(cell(row, j));
	json_array_foreach(cols, j, col) {
		v = json_string_value(col) ? json_string_value(col) : "";
		for (k = 0; v[k] != '\0'; k++)
			putchar(v[k] >= 'a' && v[k] <= 'z' ? v[k] - 'a' + 'A' : v[k]);
		for (k = text_width(v); j + 1 < ncols && k < width[j] + 2; k++)
			putchar(' ');
	}
	putchar('\n');
	json_array_foreach(rows, i, row) {
		for (j = 0; j < ncols; j++) {
			v = cell(row, j);
			fputs(v, stdout);
			for (k = text_width(v); j + 1 < ncols && k < width[j] + 2; k++)
				putchar(' ');
		}
		putchar('\n');
	}
	free(width);
}

/*
 * mcp show: data.spec is the stored JSON text; it becomes an object (for
 * -j) and is printed alone otherwise, so that the output is a spec mcp add
 * takes back.  A spec that does not pass today's checks says why on
 * standard error.
 */
static void
mcp_show_data(json_t *data)
{
	const char *text = json_string_value(json_object_get(data, "spec"));
	json_t *spec;

	if (text != NULL && (spec = json_loads(text, 0, NULL)) != NULL)
		json_object_set_new(data, "spec", spec);
}

static void
print_mcp_show(json_t *data)
{
	const char *check = json_string_value(json_object_get(data, "check"));

	json_dumpf(json_object_get(data, "spec"), stdout, JSON_INDENT(2));
	putchar('\n');
	if (check != NULL && check[0] != '\0')
		fprintf(stderr, "agrippactl: this version predates the spec's checks: %s\n", check);
}

/*
 * mcp test: data.result is the JSON text the daemon's MCP client printed
 * ({protocol, era, listed, kept, dropped, shown, tools: [{name,
 * description}]}); it becomes data's own fields.
 */
static void
mcp_test_data(json_t *data)
{
	const char *text = json_string_value(json_object_get(data, "result"));
	json_t *res;

	if (text != NULL && (res = json_loads(text, 0, NULL)) != NULL && json_is_object(res)) {
		json_object_update(data, res);
		json_object_del(data, "result");
	}
	if (text != NULL && res != NULL)
		json_decref(res);
}

/* mcp test -c: the calls' count and times, then the first result's text
 * (the client made its control characters but newline and tab '?'). */
static void
print_mcp_call(json_t *call)
{
	json_t *us = json_object_get(call, "us");
	json_int_t count = json_integer_value(json_object_get(call, "count"));
	json_int_t errors = json_integer_value(json_object_get(call, "errors"));
	const char *tool = json_string_value(json_object_get(call, "tool"));
	const char *text = json_string_value(json_object_get(call, "text"));
#define US(k) ((double)json_integer_value(json_object_get(us, k)) / 1000.0)

	if (count == 1)
		printf("%s: %s in %.3f ms\n", tool != NULL ? tool : "?",
		    errors > 0 ? "an error" : "a result", US("median"));
	else
		printf("%s: %lld calls, %lld with an error; per call (ms): median %.3f, min %.3f, "
		       "p90 %.3f, p99 %.3f, max %.3f\n",
		    tool != NULL ? tool : "?", (long long)count, (long long)errors, US("median"),
		    US("min"), US("p90"), US("p99"), US("max"));
#undef US
	printf("%s%s\n", json_is_true(json_object_get(call, "is_error")) ? "error: " : "",
	    text != NULL ? text : "");
	if (json_is_true(json_object_get(call, "cut")))
		printf("(the result is cut here)\n");
}

/* One line per tool: its name, then its description's first line (the
 * client made its control characters '?'), then what was left out. */
static void
print_mcp_test(json_t *data)
{
	json_t *tools = json_object_get(data, "tools"), *t;
	json_int_t listed = json_integer_value(json_object_get(data, "listed"));
	json_int_t shown = json_integer_value(json_object_get(data, "shown"));
	json_int_t dropped = json_integer_value(json_object_get(data, "dropped"));
	size_t i, w = 0, n;

	json_array_foreach(tools, i, t)
		if ((n = text_width(json_string_value(json_object_get(t, "name")))) > w)
			w = n;
	printf("%s: protocol %s (%s), %lld tools\n",
	    json_string_value(json_object_get(data, "name")),
	    json_string_value(json_object_get(data, "protocol")),
	    json_string_value(json_object_get(data, "era")), (long long)listed);
	json_array_foreach(tools, i, t) {
		const char *nm = json_string_value(json_object_get(t, "name"));
		const char *d = json_string_value(json_object_get(t, "description"));

		printf("%s%*s  %s\n", nm, (int)(w - text_width(nm)), "", d != NULL ? d : "");
	}
	if (json_is_object(json_object_get(data, "call"))) {
		print_mcp_call(json_object_get(data, "call"));
		return;
	}
	if (dropped > 0)
		printf("(%lld dropped by the client's caps)\n", (long long)dropped);
	if (listed - dropped > shown)
		printf("(%lld more not shown)\n", (long long)(listed - dropped - shown));
}

/*
 * mcp test [-c TOOL [-a ARGS] [-n COUNT]] NAME [VERSION] (argv[0] is
 * "test"): out[] gets what the daemon takes, NAME and VERSION as given, or
 * with -c NAME, VERSION ("" for the latest), TOOL, ARGS ("{}" without -a)
 * and COUNT ("1" without -n); the daemon checks them.  Returns their
 * number; exits 2 with the usage when the words do not fit.
 */
static int
mcp_test_args(int argc, char **argv, char *out[5])
{
	char *tool = NULL, *args = NULL, *count = NULL;
	int ch;

	optind = 1;
	while ((ch = getopt(argc, argv, "+c:a:n:")) != -1) {
		switch (ch) {
		case 'c':
			tool = optarg;
			break;
		case 'a':
			args = optarg;
			break;
		case 'n':
			count = optarg;
			break;
		default:
			usage();
		}
	}
	argc -= optind;
	argv += optind;
	if (tool == NULL && (args != NULL || count != NULL)) {
		fprintf(stderr, "agrippactl: mcp test: -a and -n go with -c\n");
		usage();
	}
	if (argc < 1 || argc > 2)
		usage();
	out[0] = argv[0];
	out[1] = argc > 1 ? argv[1] : "";
	if (tool == NULL)
		return argc;
	out[2] = tool;
	out[3] = args != NULL ? args : "{}";
	out[4] = count != NULL ? count : "1";
	return 5;
}

static int
print_reply(const char *cmd, struct ipc_ctl_reply *r, int json)
{
	json_t *data = mp_to_json(r->data), *out;

	if (strcmp(cmd, "mcp show") == 0 && r->code == 0 && json_is_object(data))
		mcp_show_data(data);
	if (strcmp(cmd, "mcp test") == 0 && r->code == 0 && json_is_object(data))
		mcp_test_data(data);

	if (json) {
		out = json_pack("{s:b,s:s%,s:O}", "ok", r->code == 0, "message", r->message,
		    r->msglen, "data", data);
		json_dumpf(out, stdout, JSON_INDENT(2));
		putchar('\n');
		json_decref(out);
	} else if (r->code != 0) {
		fprintf(stderr, "agrippactl: %.*s\n", (int)r->msglen, r->message);
	} else if (strcmp(cmd, "status") == 0 && json_is_object(data)) {
		print_status(data);
	} else if (strcmp(cmd, "mcp show") == 0 && json_is_object(json_object_get(data, "spec"))) {
		print_mcp_show(data);
	} else if (strcmp(cmd, "mcp test") == 0 && json_is_array(json_object_get(data, "tools"))) {
		print_mcp_test(data);
	} else if (json_is_array(json_object_get(data, "columns")) &&
	    json_is_array(json_object_get(data, "rows"))) {
		print_table(json_object_get(data, "columns"), json_object_get(data, "rows"));
	} else {
		printf("%.*s\n", (int)r->msglen, r->message);
	}
	json_decref(data);
	return r->code == 0 ? 0 : 1;
}

int
main(int argc, char *argv[])
{
	const char *sock = CTL_DEFAULT_SOCKET, *err = NULL;
	const struct ctl_cmd *cmd = NULL;
	struct ipc_ctl_reply r;
	struct ipc_wbuf w;
	struct ipc_msg m;
	char path[PATH_MAX], secret[CTL_SECRET_MAX + 2], *mt[5], **args;
	ssize_t secretlen = -1;
	int ch, json = 0, fd, nargs, i, rv, words = 0;
	size_t k;

	log_init(1, 0, 0);
	log_procinit("agrippactl");
	while ((ch = getopt(argc, argv, "+js:")) != -1) {
		switch (ch) {
		case 'j':
			json = 1;
			break;
		case 's':
			sock = optarg;
			break;
		default:
			usage();
		}
	}
	argc -= optind;
	argv += optind;
	if (argc < 1)
		usage();
	if (strcmp(argv[0], "sandbox") == 0)
		return ctl_sandbox_run(sock, argc, argv);
	if (strcmp(argv[0], "template") == 0 && argc > 1 && strcmp(argv[1], "check") == 0)
		return ctl_template(argc, argv, json);
	for (k = 0; k < sizeof(cmds) / sizeof(cmds[0]) && cmd == NULL; k++)
		if ((words = cmd_match(&cmds[k], argc, argv)) > 0)
			cmd = &cmds[k];
	nargs = argc - words;
	if (cmd == NULL || nargs < cmd->minargs || nargs > cmd->maxargs)
		usage();
	argv += words - 1; /* argv[1 .. nargs] are the arguments */
	args = argv + 1;
	if (strcmp(cmd->name, "mcp test") == 0) {
		nargs = mcp_test_args(nargs + 1, argv, mt);
		args = mt;
	}
	if (strcmp(cmd->name, "template load") == 0 && abs_path(argv, 1, path) == -1)
		return 1;
	/* a backup goes to a new directory: absolute, but not resolved */
	if (strcmp(cmd->name, "backup") == 0 && argv[1][0] != '/') {
		char cwd[PATH_MAX];

		if (getcwd(cwd, sizeof(cwd)) == NULL ||
		    (size_t)snprintf(path, PATH_MAX, "%s/%s", cwd, argv[1]) >= PATH_MAX) {
			fprintf(stderr, "agrippactl: %s: the path is too long\n", argv[1]);
			return 1;
		}
		argv[1] = path;
	}
	if ((strcmp(cmd->name, "skill add") == 0 || strcmp(cmd->name, "mcp add") == 0) &&
	    abs_path(argv, 2, path) == -1)
		return 1;
	/* A secret goes as one more argument, read from standard input. */
	if (strcmp(cmd->name, "repo add") == 0 || strcmp(cmd->name, "mcp add") == 0) {
		int mcp = strcmp(cmd->name, "mcp add") == 0;

		/* MCP credentials are a JSON object, on one line or several */
		secretlen = read_secret(mcp ? "credentials" : "token", mcp, secret, sizeof(secret));
		if (secretlen == -1)
			return 1;
	}
	fd = ctl_connect(sock);
	ipc_wbuf_begin(&w, IMSG_CTL_REQUEST, 1, 2);
	ipc_put_str(&w, cmd->name);
	ipc_put_array(&w, (uint32_t)nargs + (secretlen >= 0));
	/* the secret right after the required arguments, before optional ones */
	for (i = 0; i < nargs; i++) {
		if (i == cmd->minargs && secretlen >= 0)
			ipc_put_strn(&w, secret, (size_t)secretlen);
		ipc_put_str(&w, args[i]);
	}
	if (nargs == cmd->minargs && secretlen >= 0)
		ipc_put_strn(&w, secret, (size_t)secretlen);
	sodium_memzero(secret, sizeof(secret));
	if (ipc_wbuf_finish(&w, CTL_MAX_FRAME) == -1 || ipc_write_frame(fd, &w, -1) == -1) {
		/* EPIPE: the daemon hung up at once, e.g. on a peer it refuses. */
		fprintf(stderr, "agrippactl: cannot send the request: %s\n", strerror(errno));
		if (w.sb.data != NULL)
			sodium_memzero(w.sb.data, w.sb.size);
		ipc_wbuf_free(&w);
		return 2;
	}
	if (w.sb.data != NULL)
		sodium_memzero(w.sb.data, w.sb.size);
	ipc_wbuf_free(&w);
	/* mcp test waits for a server's startup_timeout (at most 600 s) */
	if (ipc_read_frame(fd, ROLE_CTL, ROLE_SUPERVISOR, CTL_MAX_FRAME,
		strcmp(cmd->name, "mcp test") == 0 ? CTL_MCP_TEST_TIMEOUT_MS :
		strcmp(cmd->name, "backup") == 0 ? CTL_BACKUP_TIMEOUT_MS : CTL_TIMEOUT_MS, &m,
		&err) == -1 ||
	    m.type != IMSG_CTL_REPLY || ipc_dec_ctl_reply(m.body, &r) == -1) {
		fprintf(stderr, "agrippactl: no valid reply from the daemon: %s\n",
		    err ? err : "unexpected message");
		return 2;
	}
	rv = print_reply(cmd->name, &r, json);
	ipc_msg_free(&m);
	close(fd);
	return rv;
}
