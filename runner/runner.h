#ifndef AGRIPPA_RUNNER_H
#define AGRIPPA_RUNNER_H

/*
 * runner.c: one process per run (DESIGN.md section 1).  It walks the run's
 * phases and steps under the lease its engine holds, drives the run's
 * sandbox, and writes everything it does as events through the supervisor.
 * It holds nothing secret; its channel to the supervisor is scoped to its
 * own run.
 */
__attribute__((noreturn)) void runner_main(void);

#define RUNNER_OUTPUT_FLUSH_MS 100      /* output is sent as events at least this often */
#define RUNNER_OUTPUT_EVENT_MAX 16384   /* bytes of output per step.output event */
#define RUNNER_CRASH_MAX 3              /* crashed attempts of one step before it fails */
#define RUNNER_INLINE_MAX (256 * 1024)  /* artifacts up to this size live in the database */

#endif
