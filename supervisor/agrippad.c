/*
 * agrippad: one binary for every role.  Without -P it is the supervisor;
 * the supervisor re-executes itself as "agrippad -P role" for each child.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "common/log.h"
#include "egress/egress.h"
#include "engine/engine.h"
#include "runner/runner.h"
#include "httpd/httpd.h"
#include "proxy/proxy.h"
#include "supervisor/config.h"
#include "supervisor/supervisor.h"

__attribute__((noreturn)) static void
usage(void)
{
	fprintf(stderr, "usage: %s [-dnv] [-f file]\n", "agrippad");
	exit(2);
}

__attribute__((noreturn)) static void
child_main(const char *role, int foreground, int argc)
{
	if (argc != optind)
		usage();
	/* Log before anything else can fail; HELLO sets the level later. */
	log_init(foreground, 0, LOG_DAEMON);
	if (strcmp(role, "engine") == 0)
		engine_main();
	if (strcmp(role, "httpd") == 0)
		httpd_main();
	if (strcmp(role, "proxy") == 0)
		proxy_main();
	if (strcmp(role, "egress") == 0)
		egress_main();
	if (strcmp(role, "runner") == 0)
		runner_main();
	fatalx("unknown role %s", role);
}

int
main(int argc, char *argv[])
{
	const char *conf = CONF_DEFAULT_PATH, *role = NULL;
	int ch, foreground = 0, check = 0, verbose = 0;

	while ((ch = getopt(argc, argv, "df:nvP:")) != -1) {
		switch (ch) {
		case 'd':
			foreground = 1;
			break;
		case 'f':
			conf = optarg;
			break;
		case 'n':
			check = 1;
			break;
		case 'v':
			verbose++;
			break;
		case 'P':
			role = optarg;
			break;
		default:
			usage();
		}
	}
	if (role != NULL)
		child_main(role, foreground, argc);
	if (argc != optind)
		usage();
	supervisor_main(conf, foreground, verbose, check);
}
