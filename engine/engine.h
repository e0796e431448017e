#ifndef AGRIPPA_ENGINE_H
#define AGRIPPA_ENGINE_H

/* engine.c: the scheduler process (runs, leases and sweeps arrive with the
 * engine issue; today it heartbeats as its own instance). */
__attribute__((noreturn)) void engine_main(void);

#define ENGINE_HEARTBEAT_SECS 5

#endif
