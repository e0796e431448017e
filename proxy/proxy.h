#ifndef AGRIPPA_PROXY_H
#define AGRIPPA_PROXY_H

/* proxy.c: the only process that will talk to model providers (agent-steps
 * issue).  Today it starts, drops privileges and waits. */
__attribute__((noreturn)) void proxy_main(void);

#endif
