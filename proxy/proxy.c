/*
 * proxy: will hold provider API keys and talk to model providers.  Until the
 * agent-steps work lands it only completes the common start-up and serves
 * the supervisor channel (shutdown, log level).
 */
#include <event2/event.h>
#include <stdlib.h>

#include "common/child.h"
#include "common/log.h"
#include "proxy/proxy.h"

static struct child proxy;

static void
proxy_dispatch_supervisor(struct child *c, struct ipc_msg *m)
{
	fatalx("unexpected %s from the supervisor", ipc_msg_name(m->type));
}

void
proxy_main(void)
{
	child_bootstrap(&proxy, ROLE_PROXY);
	if ((proxy.base = event_base_new()) == NULL)
		fatalx("event_base_new");
	child_lockdown(&proxy);
	child_run(&proxy, proxy_dispatch_supervisor);
	log_debug("exiting");
	exit(0);
}
