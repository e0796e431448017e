/*
 * engine: the scheduler.  It holds nothing secret and reaches the database
 * only through named operations answered by the supervisor.  For now it
 * records a heartbeat for its own instance every ENGINE_HEARTBEAT_SECS.
 */
#include <sys/utsname.h>

#include <event2/event.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/child.h"
#include "common/log.h"
#include "engine/engine.h"

static struct child engine;
static char engine_host[256];
static int heartbeat_failures;

static void
engine_heartbeat_done(struct child *c, const struct ipc_db_result *r, void *arg)
{
	if (r->code != DB_OK) {
		if (heartbeat_failures++ == 0)
			log_warnx("heartbeat failed: %.*s", (int)r->errlen, r->error);
		return;
	}
	if (heartbeat_failures > 0)
		log_info("heartbeat recovered after %d failures", heartbeat_failures);
	heartbeat_failures = 0;
}

static void
engine_heartbeat(evutil_socket_t fd, short what, void *arg)
{
	struct ipc_wbuf w;
	uint64_t id;

	id = child_db_begin(&engine, &w, "engine_heartbeat", 3);
	ipc_put_str(&w, engine.hello.instance);
	ipc_put_str(&w, engine_host);
	ipc_put_u64(&w, (uint64_t)getpid());
	if (child_db_send(&engine, &w, id, engine_heartbeat_done, NULL) == -1)
		log_warnx("heartbeat: cannot send");
}

static void
engine_dispatch_supervisor(struct child *c, struct ipc_msg *m)
{
	fatalx("unexpected %s from the supervisor", ipc_msg_name(m->type));
}

void
engine_main(void)
{
	struct utsname u;
	struct event *hb;
	struct timeval tv = { ENGINE_HEARTBEAT_SECS, 0 };

	child_bootstrap(&engine, ROLE_ENGINE);
	if (uname(&u) == 0)
		snprintf(engine_host, sizeof(engine_host), "%s", u.nodename);
	else
		snprintf(engine_host, sizeof(engine_host), "unknown");
	if ((engine.base = event_base_new()) == NULL)
		fatalx("event_base_new");
	child_lockdown(&engine);
	hb = event_new(engine.base, -1, EV_PERSIST, engine_heartbeat, NULL);
	if (hb == NULL || event_add(hb, &tv) == -1)
		fatalx("heartbeat timer");
	event_active(hb, EV_TIMEOUT, 0); /* first beat at once */
	child_run(&engine, engine_dispatch_supervisor);
	log_debug("exiting");
	exit(0);
}
