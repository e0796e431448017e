/*
 * agrippa: the users' command-line client.  Runs one command over the
 * daemon's HTTP/JSON API (docs/api.md) with an API token, and prints the
 * answer for a person or (-j) as JSON.  Exit status: see client.h and
 * agrippa(1).
 */
#include <locale.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/client.h"

struct cli_cmd {
	const char *name;
	int minargs, maxargs;
	const char *usage;
	int (*run)(struct cli *, int, char **);
};

static const struct cli_cmd cmds[] = {
    {"runs", 0, 4, "runs [status=STATUS] [template=NAME] [limit=N] [cursor=ID]", cli_runs},
    {"run submit", 1, 65, "run submit TEMPLATE [name=value ...]", cli_submit},
    {"run watch", 1, 1, "run watch RUN", cli_watch},
    {"run cancel", 1, 1, "run cancel RUN", cli_cancel},
    {"approve", 1, 2, "approve RUN|APPROVAL [comment]", cli_decide},
    {"reject", 1, 2, "reject RUN|APPROVAL [comment]", cli_decide},
    {"artifact get", 1, 4, "artifact get ARTIFACT [-f] [-o file]", cli_artifact_get},
    {"usage", 0, 1, "usage [YYYY-MM]", cli_usage},
};

void
cli_err(const char *fmt, ...)
{
	va_list ap;

	fputs("agrippa: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

__attribute__((noreturn)) static void
usage(void)
{
	size_t i;

	fprintf(stderr, "usage: agrippa [-j] [-p project] [-t tokenfile] [-u url] command "
	                "[argument ...]\n");
	fprintf(stderr, "commands:\n");
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(stderr, "\t%s\n", cmds[i].usage);
	exit(CLI_USAGE);
}

/* How many words of argv cmd's name takes ("runs": 1, "run watch": 2), or
 * 0 when it does not match. */
static int
cmd_match(const struct cli_cmd *cmd, int argc, char **argv)
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

static const struct cli_cmd *
cmd_find(int argc, char **argv, int *words)
{
	size_t k;

	for (k = 0; k < sizeof(cmds) / sizeof(cmds[0]); k++)
		if ((*words = cmd_match(&cmds[k], argc, argv)) > 0)
			return &cmds[k];
	fputs("agrippa: unknown command: ", stderr);
	cli_cleans(stderr, argv[0]);
	if (argc > 1 && (strcmp(argv[0], "run") == 0 || strcmp(argv[0], "artifact") == 0)) {
		fputc(' ', stderr);
		cli_cleans(stderr, argv[1]);
	}
	fputc('\n', stderr);
	usage();
}

int
main(int argc, char *argv[])
{
	const char *url = getenv("AGRIPPA_URL"), *tokfile = NULL, *term = getenv("TERM");
	const struct cli_cmd *cmd;
	static struct cli c;
	int ch, words, nargs, rv;

	setlocale(LC_CTYPE, "");
	c.project = getenv("AGRIPPA_PROJECT");
	while ((ch = getopt(argc, argv, "+jp:t:u:")) != -1) {
		switch (ch) {
		case 'j':
			c.json = 1;
			break;
		case 'p':
			c.project = optarg;
			break;
		case 't':
			tokfile = optarg;
			break;
		case 'u':
			url = optarg;
			break;
		default:
			usage();
		}
	}
	argc -= optind;
	argv += optind;
	if (argc < 1)
		usage();
	cmd = cmd_find(argc, argv, &words);
	nargs = argc - words;
	if (nargs < cmd->minargs || nargs > cmd->maxargs) {
		cli_err("usage: agrippa %s", cmd->usage);
		return CLI_USAGE;
	}
	if (c.project != NULL && c.project[0] == '\0')
		c.project = NULL;
	c.tty = isatty(STDOUT_FILENO);
	c.redraw = c.tty && term != NULL && term[0] != '\0' && strcmp(term, "dumb") != 0;
	if (sodium_init() == -1 || curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		cli_err("cannot initialise libsodium or libcurl");
		return CLI_CONN;
	}
	if ((rv = cli_base_set(&c, url != NULL && url[0] != '\0' ? url : CLI_DEFAULT_URL)) ==
	        CLI_OK &&
	    (rv = cli_token_load(&c, tokfile)) == CLI_OK)
		rv = cmd->run(&c, nargs + 1, argv + words - 1);
	sodium_memzero(c.token, sizeof(c.token));
	curl_global_cleanup();
	if (fflush(stdout) != 0 && rv == CLI_OK) {
		cli_err("standard output: cannot write");
		rv = CLI_USAGE;
	}
	return rv;
}
