/*
 * agrippa-sandbox: the tool server, the first process of every sandbox.
 *
 * A program of its own rather than "agrippad -P sandbox": it is the one
 * process that shares its namespaces with hostile code, so it maps only what
 * it uses (libc, libevent, msgpack, libsodium, libseccomp, libcap) and none
 * of the database, TLS, LDAP and Kerberos libraries the daemon links, and it
 * starts in a fraction of the time.  The supervisor executes it from the
 * directory agrippad runs from.  It takes no arguments: everything comes in
 * SBX_HELLO on fd 3.  In a stdio MCP server's sandbox it is started as
 * "agrippa-sandbox mcp LINE_MAX COMMAND..." instead, and hosts that
 * server and relays its output (sandbox/mcphost.c).
 */
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "sandbox/sandbox.h"

int
main(int argc, char *argv[])
{
	/* No syslog socket in a sandbox: stderr is the daemon's (-d) or
	 * /dev/null, and the driver hears of failures by the channel. */
	log_init(1, 0, 0);
	if (argc >= 3 && strcmp(argv[1], "mcp") == 0)
		sandbox_mcp_main(argv + 2);
	if (argc != 1) {
		fprintf(stderr, "usage: agrippa-sandbox (started by agrippad only)\n");
		return 2;
	}
	sandbox_main();
}
