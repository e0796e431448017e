/*
 * privsep — how every Agrippa child gives up what it does not need.
 *
 * Order (CONVENTIONS.md "Privileges"): chroot -> chdir("/") -> setgroups ->
 * setresgid -> setresuid, verified; capabilities dropped (libcap); rlimits;
 * PR_SET_NO_NEW_PRIVS; seccomp allow-list last.  PR_SET_DUMPABLE 0 early.
 */
#ifndef AGRIPPA_PRIVSEP_H
#define AGRIPPA_PRIVSEP_H

#include <sys/types.h>

#include "ipc/ipc.h"

/* PR_SET_DUMPABLE 0: no core dumps, no ptrace by same-uid processes, and
 * /proc/PID/{mem,environ} unreadable by them.  Every process calls it first. */
void privsep_nodump(void);

/* Look up a user by name.  Returns 0 or -1 (no such user). */
int privsep_lookup_user(const char *name, uid_t *uid, gid_t *gid);

/*
 * Drop to uid/gid inside chroot_dir.  When devmode is set (started by a
 * non-root user) chroot and the id change are skipped with one warning.
 * Then verifies that neither root nor the old ids can be regained, drops every
 * capability (effective, permitted, inheritable, ambient, bounding where
 * permitted) and sets PR_SET_NO_NEW_PRIVS.  fatal() on any failure.
 */
void privsep_drop(const char *chroot_dir, uid_t uid, gid_t gid, int devmode);

/* The checks privsep_drop() makes of a chroot directory (it and every
 * ancestor owned by root, not writable by others); fatalx() when unsafe.
 * The supervisor calls it at start so the error reaches the operator. */
void privsep_check_chroot(const char *dir);

/* Resource limits for a role (core 0, and per-role NOFILE/NPROC/...). */
void privsep_rlimits(enum ipc_role role);
/* Landlock for the proxy and egress (privsep/landlock.c): 0, or -1 when the
 * kernel has none (logged; the process goes on).  Other roles: nothing. */
int privsep_landlock(enum ipc_role role);

/*
 * Install the libseccomp allow-list for role: architecture checked, default
 * action kill the process; with debug set, default action SIGSYS trap with a
 * handler that logs the offending syscall by name and exits.  fatal() on
 * failure.  Must be the last step of setup, taken before any thread exists
 * (the filter covers the calling thread and every task it creates later).
 */
void privsep_seccomp(enum ipc_role role, int debug);

/*
 * The sandbox's policy (privsep/seccomp_sandbox.c): allow by default, fail
 * with an errno every call on its deny list, kill on a foreign
 * architecture.  With network set (the run has a network policy) TCP/IP
 * sockets are allowed too: in the empty network namespace they reach only
 * its loopback, where egress listens.  Needs no_new_privs set first.  fatal() on failure.
 */
void privsep_seccomp_sandbox(int network);

/* Sanitizer builds: skip LeakSanitizer's exit-time check in this process
 * (it needs ptrace, which the sandbox denies).  A no-op otherwise. */
void privsep_lsan_off(void);

/* Nonzero when the effective, permitted, inheritable and ambient capability
 * sets are all empty (for self-checks). */
int privsep_caps_empty(void);

/* Lower the whole capability bounding set.  Needs CAP_SETPCAP, so it runs
 * before the uid change; without that capability it changes nothing (the
 * bounding set of an unprivileged process cannot be lowered).  fatal() on
 * failure.  Called by privsep_drop(). */
void privsep_caps_drop_bounding(void);

/* Clear the ambient set, then the effective, permitted and inheritable sets.
 * fatal() on failure.  Called by privsep_drop(). */
void privsep_caps_clear(void);

#endif
