#ifndef AGRIPPA_RUNNER_H
#define AGRIPPA_RUNNER_H

/*
 * runner.c: one process per run (DESIGN.md section 1).  It walks the run's
 * phases and steps under the lease its engine holds, drives the run's
 * sandbox, and writes everything it does as events through the supervisor.
 * It holds nothing secret; its channel to the supervisor is scoped to its
 * own run.  What the runner's files share is in core.h.
 */
__attribute__((noreturn)) void runner_main(void);

#endif
