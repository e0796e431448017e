/*
 * The sandbox's seccomp policy: every entry with its reason, in this one
 * file (DESIGN.md section 4).
 *
 * The daemon's own roles run allow-lists (seccomp.c) because we know every
 * call they make.  A sandbox runs whatever a repository's build and tests
 * need (compilers, interpreters, test runners, shells), so its filter
 * allows by default and fails, with an errno the program can report, every
 * call that could reach outside the sandbox, change what the kernel
 * enforces, or widen the kernel attack surface without a use in building or
 * testing code.  It is the last layer, not the only one: the namespaces,
 * the mounts, the unmapped uid, no capabilities and no_new_privs already
 * refuse most of these on their own; the filter makes the refusal
 * independent of each of those being right.
 *
 * The architecture is checked: only the native one is in the filter, so on
 * x86_64 both i386 ("int $0x80") and x32 calls kill the process, since they
 * would reach the same kernel functions under numbers this table does not
 * name.  The filter is inherited by everything the tool server starts and
 * cannot be removed (no_new_privs is set before it is loaded).
 */
#include "privsep/privsep.h"

#include <errno.h>
#include <linux/sched.h>
#include <sched.h>
#include <seccomp.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/socket.h>

#include "common/log.h"

#define nitems(a) (sizeof(a) / sizeof((a)[0]))

struct sbx_rule {
	int nr;           /* SCMP_SYS(name) */
	int err;          /* errno returned */
	int argc;         /* 0 or 1 argument comparison */
	struct scmp_arg_cmp arg;
	const char *why;
};

/* clang-format off */
#define DENY(sys, e, why) { SCMP_SYS(sys), (e), 0, { 0, 0, 0, 0 }, why }
#define DENY_IF(sys, e, a, why) { SCMP_SYS(sys), (e), 1, a, why }
#define ARG_NE(i, v) { .arg = (i), .op = SCMP_CMP_NE, .datum_a = (v) }
#define ARG_MASKED(i, m, v) { .arg = (i), .op = SCMP_CMP_MASKED_EQ, .datum_a = (m), .datum_b = (v) }
#define ARG_BIT(i, b) ARG_MASKED(i, (b), (b))
#define ARG_PERS(f) ARG_MASKED(0, (f) | 0x80000000u, (f))
/* The ioctl request is an unsigned int: compare its low 32 bits only, so a
 * value with garbage in the upper half cannot slip past. */
#define ARG_CMD(v) ARG_MASKED(1, 0xffffffffu, (v))

static const struct sbx_rule sbx_rules[] = {
	/* Reaching other processes' memory or control. */
	DENY(ptrace, EPERM, "debugging another process reads and writes its memory"),
	DENY(process_vm_readv, EPERM, "reads another process's memory"),
	DENY(process_vm_writev, EPERM, "writes another process's memory"),
	DENY(process_madvise, EPERM, "acts on another process's memory"),
	DENY(pidfd_getfd, EPERM, "steals a descriptor from another process"),
	DENY(kcmp, EPERM, "compares kernel objects of other processes (an address oracle)"),

	/* Changing what the filesystem shows. */
	DENY(mount, EPERM, "the mount table is fixed when the sandbox is built"),
	DENY(umount2, EPERM, "unmounting could uncover what a mount hides"),
	DENY(pivot_root, EPERM, "the root is fixed when the sandbox is built"),
	DENY(chroot, EPERM, "no root changes inside the sandbox"),
	DENY(open_tree, EPERM, "new mount API: clones mounts"),
	DENY(move_mount, EPERM, "new mount API: attaches mounts"),
	DENY(fsopen, EPERM, "new mount API: creates filesystems"),
	DENY(fsconfig, EPERM, "new mount API: configures filesystems"),
	DENY(fsmount, EPERM, "new mount API: creates mounts"),
	DENY(fspick, EPERM, "new mount API: reconfigures mounts"),
	DENY(mount_setattr, EPERM, "changes mount flags (read-only, idmaps)"),
	DENY(open_by_handle_at, EPERM, "opens files by handle, bypassing the path walk "
	    "(the classic container escape)"),
	DENY(name_to_handle_at, EPERM, "only useful with open_by_handle_at"),

	/* New namespaces: each would give the process root-like powers over
	 * fresh kernel objects and a path around the policies above. */
	DENY(unshare, EPERM, "creates namespaces"),
	DENY(setns, EPERM, "joins namespaces"),
	/* clone with any CLONE_NEW* flag: one rule per flag, as "any of these
	 * bits" is written in libseccomp; threads and fork stay allowed. */
	DENY_IF(clone, EPERM, ARG_BIT(0, CLONE_NEWNS), "clone into a new mount namespace"),
	DENY_IF(clone, EPERM, ARG_BIT(0, CLONE_NEWCGROUP), "clone into a new cgroup namespace"),
	DENY_IF(clone, EPERM, ARG_BIT(0, CLONE_NEWUTS), "clone into a new uts namespace"),
	DENY_IF(clone, EPERM, ARG_BIT(0, CLONE_NEWIPC), "clone into a new ipc namespace"),
	DENY_IF(clone, EPERM, ARG_BIT(0, CLONE_NEWUSER), "clone into a new user namespace"),
	DENY_IF(clone, EPERM, ARG_BIT(0, CLONE_NEWPID), "clone into a new pid namespace"),
	DENY_IF(clone, EPERM, ARG_BIT(0, CLONE_NEWNET), "clone into a new network namespace"),
	DENY_IF(clone, EPERM, ARG_BIT(0, CLONE_NEWTIME), "clone into a new time namespace"),
	DENY(clone3, ENOSYS, "its flags are behind a pointer the filter cannot read; ENOSYS "
	    "makes glibc fall back to clone, whose flags are checked"),

	/* Kernel attack surface with no use in building or testing code. */
	DENY(bpf, EPERM, "eBPF programs run in the kernel"),
	DENY(perf_event_open, EPERM, "performance counters leak kernel addresses and timing"),
	DENY(userfaultfd, EPERM, "stalls kernel accesses at will (a race-exploit primitive)"),
	DENY(io_uring_setup, EPERM, "io_uring bypasses this filter for the calls it performs"),
	DENY(io_uring_enter, EPERM, "io_uring bypasses this filter for the calls it performs"),
	DENY(io_uring_register, EPERM, "io_uring bypasses this filter for the calls it performs"),
	DENY(keyctl, EPERM, "kernel keyrings are not namespaced"),
	DENY(add_key, EPERM, "kernel keyrings are not namespaced"),
	DENY(request_key, EPERM, "kernel keyrings are not namespaced"),
	DENY(kexec_load, EPERM, "loads a new kernel"),
	DENY(kexec_file_load, EPERM, "loads a new kernel"),
	DENY(init_module, EPERM, "loads kernel modules"),
	DENY(finit_module, EPERM, "loads kernel modules"),
	DENY(delete_module, EPERM, "unloads kernel modules"),
	DENY(modify_ldt, EPERM, "16-bit segments: old attack surface, no modern use"),
	DENY(uselib, EPERM, "obsolete loader call"),
	DENY(iopl, EPERM, "raw port I/O"),
	DENY(ioperm, EPERM, "raw port I/O"),
	DENY(lookup_dcookie, EPERM, "profiling interface"),
	DENY(fanotify_init, EPERM, "filesystem-wide event monitoring"),
	DENY(quotactl, EPERM, "filesystem quotas belong to the host"),
	DENY(quotactl_fd, EPERM, "filesystem quotas belong to the host"),
	/* personality flags that weaken exploit mitigations.  Bit 31 is no
	 * flag but is set in the 0xffffffff query, which stays allowed. */
	DENY_IF(personality, EPERM, ARG_PERS(ADDR_NO_RANDOMIZE), "turns off ASLR"),
	DENY_IF(personality, EPERM, ARG_PERS(READ_IMPLIES_EXEC), "makes readable memory executable"),
	DENY_IF(personality, EPERM, ARG_PERS(MMAP_PAGE_ZERO), "maps page zero (NULL dereferences)"),
	DENY_IF(personality, EPERM, ARG_PERS(ADDR_COMPAT_LAYOUT), "legacy, predictable layout"),
	DENY_IF(personality, EPERM, ARG_PERS(ADDR_LIMIT_3GB), "legacy, predictable layout"),
	DENY_IF(personality, EPERM, ARG_PERS(ADDR_LIMIT_32BIT), "legacy, predictable layout"),

	/* Host-wide state. */
	DENY(reboot, EPERM, "host power state"),
	DENY(swapon, EPERM, "host swap"),
	DENY(swapoff, EPERM, "host swap"),
	DENY(acct, EPERM, "host process accounting"),
	DENY(syslog, EPERM, "the kernel log can leak addresses"),
	DENY(settimeofday, EPERM, "the host clock"),
	DENY(clock_settime, EPERM, "the host clock"),
	DENY(clock_adjtime, EPERM, "the host clock"),
	DENY(vhangup, EPERM, "hangs up the terminal"),

	/* Terminals: typing into another session's input queue. */
	DENY_IF(ioctl, EPERM, ARG_CMD(TIOCSTI), "pushes characters into a terminal's input"),
	DENY_IF(ioctl, EPERM, ARG_CMD(TIOCLINUX), "console selection can also inject input"),
	DENY_IF(ioctl, EPERM, ARG_CMD(TIOCSETD), "line disciplines (n_gsm, n_hdlc...) are kernel "
	    "attack surface a pty from /dev/ptmx would reach"),

	/* The network: the namespace has none; Unix sockets stay for the
	 * programs (build tools, test suites) that talk to themselves. */
	/* socket: sbx_add_socket_rules */
	DENY_IF(socketpair, EAFNOSUPPORT, ARG_NE(0, AF_UNIX), "only Unix-domain sockets"),
};
/* clang-format on */

static void
sbx_add(scmp_filter_ctx ctx, int nr, int err, int argc, const struct scmp_arg_cmp *arg,
    const char *why)
{
	int rc = seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO((uint32_t)err), nr, (unsigned)argc,
	    argc ? arg : NULL);

	if (rc < 0) {
		errno = -rc;
		fatal("sandbox seccomp rule for syscall %d (%s)", nr, why);
	}
}


/*
 * A run with a network policy: AF_INET and AF_INET6 sockets too (the
 * namespace's loopback, where egress listens, is all they reach), every
 * other family still refused.  One rule per family: a rule compares an
 * argument once.
 */
static void
sbx_add_socket_rules(scmp_filter_ctx ctx, int network)
{
	struct scmp_arg_cmp a;
	int fam;

	if (!network) {
		a = (struct scmp_arg_cmp)ARG_NE(0, AF_UNIX);
		sbx_add(ctx, SCMP_SYS(socket), EAFNOSUPPORT, 1, &a, "only Unix-domain sockets");
		return;
	}
	for (fam = 0; fam <= AF_MAX; fam++) {
		if (fam == AF_UNIX || fam == AF_INET || fam == AF_INET6)
			continue;
		a = SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)fam);
		sbx_add(ctx, SCMP_SYS(socket), EAFNOSUPPORT, 1, &a,
		    "only Unix-domain and TCP/IP sockets");
	}
	a = SCMP_A0(SCMP_CMP_GT, (scmp_datum_t)AF_MAX);
	sbx_add(ctx, SCMP_SYS(socket), EAFNOSUPPORT, 1, &a, "only Unix-domain and TCP/IP sockets");
}

void
privsep_seccomp_sandbox(int network)
{
	scmp_filter_ctx ctx;
	size_t i;
	int rc;

	if (seccomp_api_get() < 3)
		fatalx("seccomp: kernel or libseccomp too old for SECCOMP_RET_KILL_PROCESS");
	if ((ctx = seccomp_init(SCMP_ACT_ALLOW)) == NULL)
		fatalx("seccomp_init failed");
	if (seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS) < 0)
		fatalx("seccomp: cannot set the bad-architecture action");
	for (i = 0; i < nitems(sbx_rules); i++) {
		const struct sbx_rule *r = &sbx_rules[i];

		sbx_add(ctx, r->nr, r->err, r->argc, &r->arg, r->why);
	}
	sbx_add_socket_rules(ctx, network);
	if ((rc = seccomp_load(ctx)) < 0) {
		errno = -rc;
		fatal("seccomp_load (sandbox)");
	}
	seccomp_release(ctx);
}
