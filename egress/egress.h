/*
 * egress: the sandboxes' only way out (DESIGN.md section 4.1).  Private
 * header of the role, prototypes grouped by file.
 *
 * The process holds nothing secret: it parses bytes a hostile sandbox
 * writes.  It serves, for each run the supervisor hands it (EGRESS_RUN), a
 * listening socket the run's sandbox made on 127.0.0.1:3128 inside its own
 * network namespace: a connection accepted there belongs to that run and to
 * no other.  Per connection (conn.c), in this order: the head parsed
 * strictly (head.c), the host matched against the run's list and port
 * (policy.c), only then resolved (evdns, set up before the chroot), every
 * address checked (addr.c), a CONNECT to port 443 answered 200 and its
 * ClientHello's server name required to equal the host (hello.c), the
 * checked address connected to, and bytes relayed both ways.
 */
#ifndef AGRIPPA_EGRESS_H
#define AGRIPPA_EGRESS_H

#include <sys/queue.h>
#include <sys/socket.h>

#include <stdint.h>
#include <time.h>

#include "egress/addr.h"
#include "egress/policy.h"
#include "ipc/ipc_msg.h"
#include "privsep/child.h"

#define EGRESS_HEAD_TIMEOUT_S 10  /* the whole head, and a ClientHello (slow-loris) */
#define EGRESS_EVENTS_PER_S 20    /* decisions reported per run and second */
#define EGRESS_BUF_MAX (256 * 1024) /* bytes queued towards one side before reading stops */

struct econn;

/* One run the supervisor handed over. */
struct erun {
	TAILQ_ENTRY(erun) entry;
	char run[IPC_UUID_LEN + 1];
	struct evconnlistener *lis;
	struct egress_rule *rules; /* the list in force (the running step's) */
	size_t nrules;
	unsigned tunnels;          /* connections open now */
	uint64_t bytes;            /* relayed both ways, in all */
	TAILQ_HEAD(, econn) conns;
	time_t ev_sec;             /* the second ev_count counts */
	unsigned ev_count;
	uint64_t suppressed;       /* decisions not reported since the last that was */
	uint64_t suppressed_denied; /* ... of them refusals */
	/* the running step's (since its EGRESS_POLICY), for its step.finished */
	uint64_t st_allowed, st_denied, st_up, st_down;
};

struct egress {
	struct child c;
	struct evdns_base *dns;
	TAILQ_HEAD(, erun) runs;
	struct egress_cidr cidrs[IPC_EGRESS_CIDRS_MAX];
	size_t ncidrs;
	unsigned tunnels;
	unsigned connect_timeout, idle_timeout;
	uint64_t bytes;
	int configured;
};
extern struct egress eg;

/* egress.c */
__attribute__((noreturn)) void egress_main(void);
/* Report a decision or a closed tunnel of r to the supervisor (rate-limited
 * per run for decisions; the close of a tunnel whose network.allowed was
 * reported is always reported).  Returns 1 when it was sent, 0 when it was
 * suppressed (counted, and reported with the next decision sent). */
int egress_event(struct erun *r, uint32_t kind, const char *host, unsigned port,
    const char *address, const char *reason, uint64_t up, uint64_t down, uint64_t ms);

/* conn.c */
/* A connection accepted on r's listener: takes fd. */
void conn_accept(struct erun *r, int fd);
/* Close every connection of r (its run ended). */
void conn_close_all(struct erun *r);

#endif
