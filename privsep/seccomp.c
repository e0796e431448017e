/*
 * Seccomp allow-lists, one table per role, every entry with its reason.
 *
 * The filter checks the architecture (only the native one is added, so on
 * x86_64 both i386 "int $0x80" calls and x32 calls hit the default action),
 * allows exactly the calls below (with argument checks where an argument
 * decides whether the call is harmless) and kills the process on anything
 * else.  Syscalls missing from a table are denied on purpose: clone/fork,
 * execve, ptrace, mount, unshare, setns, bpf, keyctl, perf_event_open,
 * userfaultfd, io_uring_*, kexec_*, init_module, chroot, set*id, ...
 *
 * Debug mode traps instead of killing: a SIGSYS handler prints
 * "seccomp: <role> denied syscall <name> (<nr>)" and exits with 159.
 */
#include "privsep/privsep.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <unistd.h>

#ifdef AGRIPPA_SANITIZE
#include <sanitizer/common_interface_defs.h>
#endif

#include "common/log.h"

#define nitems(a) (sizeof(a) / sizeof((a)[0]))

/* Stands for the filtered process's own pid in a rule; resolved at install. */
#define SC_SELF_PID UINT64_MAX

/* Exit status of a process killed by the debug-mode SIGSYS handler. */
#define SC_TRAP_EXIT 159

/* The flags glibc's pthread_create passes to clone, all required. */
#define SC_THREAD_FLAGS                                                                            \
	(CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM)
#define SC_NS_FLAGS                                                                                \
	(CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER |             \
	 CLONE_NEWPID | CLONE_NEWNET)

/* socket(2) masks the type argument with this (SOCK_TYPE_MASK in the kernel). */
#define SC_SOCK_TYPE_MASK 0xf

struct sc_rule {
	int nr;            /* SCMP_SYS(name) */
	int errno_ret;     /* 0: allow; otherwise fail with this errno */
	unsigned int argc; /* argument comparisons in arg[], all must hold */
	struct scmp_arg_cmp arg[2];
	const char *why;
};

/* Tables below are kept one rule per line, by hand. */
/* clang-format off */
#define ARG_EQ(i, v) { .arg = (i), .op = SCMP_CMP_EQ, .datum_a = (v) }
#define ARG_MASKED(i, m, v) { .arg = (i), .op = SCMP_CMP_MASKED_EQ, .datum_a = (m), .datum_b = (v) }
#define ALLOW(sys, why) { SCMP_SYS(sys), 0, 0, { { 0 } }, why }
#define ALLOW_IF(sys, a0, why) { SCMP_SYS(sys), 0, 1, { a0 }, why }
#define ALLOW_IF2(sys, a0, a1, why) { SCMP_SYS(sys), 0, 2, { a0, a1 }, why }
#define FAIL(sys, e, why) { SCMP_SYS(sys), (e), 0, { { 0 } }, why }

/* What every libevent + msgpack child needs (engine, httpd, proxy). */
static const struct sc_rule sc_base[] = {
	ALLOW(read, "IPC socket, pipes"),
	ALLOW(write, "IPC socket, stderr logging"),
	ALLOW(readv, "libevent evbuffer reads"),
	ALLOW(writev, "libevent evbuffer writes"),
	ALLOW(recvmsg, "IPC frames with SCM_RIGHTS descriptors"),
	ALLOW(sendmsg, "IPC frames with SCM_RIGHTS descriptors"),
	ALLOW(recvfrom, "recv() on sockets"),
	ALLOW(sendto, "send() on sockets, syslog datagrams"),
	ALLOW(close, "descriptors"),
	ALLOW(shutdown, "half-close of IPC and client sockets"),
	ALLOW(getsockopt, "SO_ERROR and friends"),
	ALLOW(setsockopt, "buffer sizes, TCP_NODELAY"),
	ALLOW(getsockname, "libevent and logging of peers"),
	ALLOW(getpeername, "libevent and logging of peers"),
	ALLOW(connect, "syslog reconnect to /dev/log (the family is behind a pointer; "
	    "socket() below decides which families exist)"),
	ALLOW_IF(socketpair, ARG_EQ(0, AF_UNIX), "libevent's internal notification pipe"),
	ALLOW(pipe2, "libevent's signal pipe"),
	ALLOW(eventfd2, "libevent's notification fd"),
	ALLOW(timerfd_create, "libevent epoll backend with precise timers"),
	ALLOW(timerfd_settime, "libevent epoll backend with precise timers"),
	ALLOW(timerfd_gettime, "libevent epoll backend with precise timers"),
	ALLOW(epoll_create1, "libevent epoll backend"),
	ALLOW(epoll_ctl, "libevent epoll backend"),
	ALLOW(epoll_wait, "libevent epoll backend"),
	ALLOW(epoll_pwait, "libevent epoll backend"),
	ALLOW(poll, "glibc and libevent poll fallbacks"),
	ALLOW(ppoll, "glibc and libevent poll fallbacks"),
	ALLOW(clock_gettime, "timers, timestamps (when the vDSO is not used)"),
	ALLOW(clock_getres, "libevent probes the monotonic clock"),
	ALLOW(clock_nanosleep, "sleeps"),
	ALLOW(nanosleep, "sleeps"),
	ALLOW(gettimeofday, "timestamps"),
	ALLOW(time, "timestamps"),
	ALLOW(brk, "malloc"),
	ALLOW_IF(mmap, ARG_MASKED(2, PROT_EXEC, 0), "malloc; never executable memory"),
	ALLOW_IF(mprotect, ARG_MASKED(2, PROT_EXEC, 0), "guard pages; never executable memory"),
	ALLOW(munmap, "free"),
	ALLOW(mremap, "realloc of large blocks"),
	ALLOW(madvise, "free returns pages, MADV_DONTDUMP"),
	ALLOW(rt_sigaction, "libevent signal events"),
	ALLOW(rt_sigprocmask, "libevent signal events, abort()"),
	ALLOW(rt_sigreturn, "return from signal handlers"),
	ALLOW(restart_syscall, "interrupted sleeps resume"),
	ALLOW(getpid, "log lines name their pid"),
	ALLOW(gettid, "raise(), abort()"),
	ALLOW(getuid, "glibc"),
	ALLOW(geteuid, "glibc"),
	ALLOW(getgid, "glibc"),
	ALLOW(getegid, "glibc"),
	ALLOW(uname, "glibc and library version checks"),
	ALLOW(exit, "thread exit"),
	ALLOW(exit_group, "process exit"),
	ALLOW(futex, "glibc locks"),
	ALLOW(sched_yield, "glibc lock back-off"),
	ALLOW(getrandom, "request ids, hash seeds"),
	ALLOW(fstat, "stdio buffering, descriptors received over IPC"),
	ALLOW(newfstatat, "fstat() in recent glibc"),
	ALLOW(statx, "fstat() in recent glibc"),
	ALLOW(lseek, "files received over IPC"),
	ALLOW_IF(openat, ARG_MASKED(2, O_ACCMODE | O_CREAT | O_TRUNC, O_RDONLY),
	    "read-only opens (tz data, CA files); nothing is written by name"),
	ALLOW(dup, "descriptor juggling"),
	ALLOW(dup2, "descriptor juggling"),
	ALLOW(dup3, "descriptor juggling"),
	ALLOW(fcntl, "O_NONBLOCK, FD_CLOEXEC"),
	ALLOW_IF(ioctl, ARG_EQ(1, FIONREAD), "libevent sizes its reads"),
	ALLOW_IF(ioctl, ARG_EQ(1, FIONBIO), "non-blocking sockets"),
	ALLOW_IF(ioctl, ARG_EQ(1, TCGETS), "isatty() on stderr; TIOCSTI and the rest stay denied"),
	ALLOW_IF2(prlimit64, ARG_EQ(0, 0), ARG_EQ(2, 0), "getrlimit() on itself; never set"),
	ALLOW_IF(kill, ARG_EQ(0, SC_SELF_PID), "signals to itself only"),
	ALLOW_IF(tgkill, ARG_EQ(0, SC_SELF_PID), "raise() and abort() on itself only"),
};

/* engine and httpd create only Unix sockets (syslog); httpd's TCP listeners come bound. */
static const struct sc_rule sc_unix_socket[] = {
	ALLOW_IF(socket, ARG_EQ(0, AF_UNIX), "syslog's /dev/log socket"),
};

static const struct sc_rule sc_httpd[] = {
	ALLOW(accept4, "clients on the listening sockets the supervisor bound"),
	ALLOW(accept, "clients on the listening sockets the supervisor bound"),
};

/* proxy: libcurl to model providers, with its threaded resolver and libsodium. */
static const struct sc_rule sc_proxy[] = {
	ALLOW_IF(socket, ARG_EQ(0, AF_UNIX), "syslog, libcurl's wakeup socketpair fallback"),
	ALLOW_IF2(socket, ARG_EQ(0, AF_INET), ARG_MASKED(1, SC_SOCK_TYPE_MASK, SOCK_STREAM),
	    "HTTPS to providers"),
	ALLOW_IF2(socket, ARG_EQ(0, AF_INET6), ARG_MASKED(1, SC_SOCK_TYPE_MASK, SOCK_STREAM),
	    "HTTPS to providers"),
	ALLOW_IF2(socket, ARG_EQ(0, AF_INET), ARG_MASKED(1, SC_SOCK_TYPE_MASK, SOCK_DGRAM),
	    "DNS queries; getaddrinfo's source-address sort"),
	ALLOW_IF2(socket, ARG_EQ(0, AF_INET6), ARG_MASKED(1, SC_SOCK_TYPE_MASK, SOCK_DGRAM),
	    "DNS queries; getaddrinfo's source-address sort"),
	ALLOW_IF2(socket, ARG_EQ(0, AF_NETLINK), ARG_EQ(2, NETLINK_ROUTE),
	    "getaddrinfo reads the local addresses (AI_ADDRCONFIG, sorting)"),
	ALLOW(bind, "getaddrinfo binds its NETLINK_ROUTE socket; listen() stays denied"),
	ALLOW(sendmmsg, "glibc's resolver sends the A and AAAA queries together"),
	ALLOW_IF(clone, ARG_MASKED(0, SC_THREAD_FLAGS | SC_NS_FLAGS, SC_THREAD_FLAGS),
	    "threads only (libcurl's resolver); never a new process or namespace"),
	FAIL(clone3, ENOSYS, "its flags are behind a pointer: make glibc fall back to clone"),
	ALLOW(set_robust_list, "every new thread"),
	ALLOW(rseq, "every new thread (glibc 2.35+)"),
	ALLOW(mlock, "libsodium keeps API keys out of swap"),
	ALLOW(munlock, "libsodium keeps API keys out of swap"),
};

/* egress: accepts on the sandboxes' listeners, connects out to checked
 * addresses, and asks name servers (evdns) itself. */
static const struct sc_rule sc_egress[] = {
	ALLOW(accept4, "connections on the listeners the sandboxes made"),
	ALLOW(accept, "connections on the listeners the sandboxes made"),
	ALLOW_IF2(socket, ARG_EQ(0, AF_INET), ARG_MASKED(1, SC_SOCK_TYPE_MASK, SOCK_STREAM),
	    "tunnels to checked addresses"),
	ALLOW_IF2(socket, ARG_EQ(0, AF_INET6), ARG_MASKED(1, SC_SOCK_TYPE_MASK, SOCK_STREAM),
	    "tunnels to checked addresses"),
	ALLOW_IF2(socket, ARG_EQ(0, AF_INET), ARG_MASKED(1, SC_SOCK_TYPE_MASK, SOCK_DGRAM),
	    "evdns queries, after a name matched the run's list"),
	ALLOW_IF2(socket, ARG_EQ(0, AF_INET6), ARG_MASKED(1, SC_SOCK_TYPE_MASK, SOCK_DGRAM),
	    "evdns queries, after a name matched the run's list"),
	ALLOW(splice, "a CONNECT tunnel's bytes, socket to pipe to socket (pipe2 and fcntl "
	    "F_SETPIPE_SZ are in the base list)"),
};

#ifdef AGRIPPA_SANITIZE
/*
 * Sanitizer builds (make check) only: what the ASan/UBSan/LSan runtimes of
 * gcc and clang do at report and exit time, so that their reports are not
 * replaced by SIGSYS.  Every entry is needed by a test of test_privsep.c
 * (ASan reports, LSan's exit-time check with a live thread).  None of this
 * is in a production filter.
 */
static const struct sc_rule sc_sanitizer[] = {
	ALLOW(sigaltstack, "ASan gives signal handlers and new threads an alternate stack"),
	ALLOW(sched_getaffinity, "new threads and LSan's tracer count CPUs"),
	ALLOW_IF(open, ARG_MASKED(1, O_ACCMODE | O_CREAT | O_TRUNC, O_RDONLY),
	    "reports read /proc/self/maps, LSan /proc/self/task, read-only"),
	ALLOW(readlink, "gcc's runtime names the binary from /proc/self/exe in reports"),
	FAIL(stat, ENOENT, "clang's runtime looks for llvm-symbolizer to fork it: not found, "
	    "so reports stay unsymbolized instead of dying on fork"),
	ALLOW(getdents, "LSan lists /proc/self/task to find the threads to stop"),
	ALLOW(getppid, "LSan's tracer checks that its parent is alive"),
	ALLOW(wait4, "LSan's tracer waits for a thread it attached to stop"),
	ALLOW_IF(prctl, ARG_EQ(0, PR_GET_DUMPABLE), "LSan checks whether it may ptrace itself"),
	ALLOW_IF(prctl, ARG_EQ(0, PR_SET_DUMPABLE), "LSan makes itself dumpable for its tracer"),
	ALLOW_IF(prctl, ARG_EQ(0, PR_SET_PTRACER), "LSan lets its tracer attach under Yama"),
	ALLOW_IF(prctl, ARG_EQ(0, PR_SET_PDEATHSIG), "LSan's tracer dies with its parent"),
	ALLOW_IF(clone, ARG_EQ(0, CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_UNTRACED),
	    "LSan's tracer task (the exact flags it uses; fork stays denied)"),
	ALLOW_IF(ptrace, ARG_EQ(0, PTRACE_ATTACH), "LSan's tracer stops the threads"),
	ALLOW_IF(ptrace, ARG_EQ(0, PTRACE_GETREGSET), "LSan scans their registers for pointers"),
	ALLOW_IF(ptrace, ARG_EQ(0, PTRACE_DETACH), "LSan's tracer resumes them"),
};
#endif
/* clang-format on */

struct sc_list {
	const struct sc_rule *rules;
	size_t n;
};
/* clang-format off */
#define SC_LIST(a) { (a), nitems(a) }
/* clang-format on */

struct sc_policy {
	enum ipc_role role;
	const char *name;
	struct sc_list lists[3];
};

/* clang-format off */
static const struct sc_policy sc_policies[] = {
	{ ROLE_ENGINE, "engine", { SC_LIST(sc_base), SC_LIST(sc_unix_socket) } },
	{ ROLE_HTTPD, "httpd", { SC_LIST(sc_base), SC_LIST(sc_unix_socket), SC_LIST(sc_httpd) } },
	{ ROLE_PROXY, "proxy", { SC_LIST(sc_base), SC_LIST(sc_proxy) } },
	{ ROLE_RUNNER, "runner", { SC_LIST(sc_base), SC_LIST(sc_unix_socket) } },
	{ ROLE_EGRESS, "egress", { SC_LIST(sc_base), SC_LIST(sc_unix_socket), SC_LIST(sc_egress) } },
};
/* clang-format on */

/* ---- debug mode: trap, name the call, exit --------------------------- */

/* Names of the native syscalls, resolved before the filter exists so that
 * the SIGSYS handler only indexes an array.  Kept for the process lifetime. */
#define SC_NAMES_MAX 1024
static char *sc_names[SC_NAMES_MAX];
static const char *sc_trap_role = "?";
static uint32_t sc_native_arch;

/* Appends s to buf (of size sz) at offset off; returns the new offset.
 * Async-signal-safe. */
static size_t
sc_cat(char *buf, size_t off, size_t sz, const char *s)
{
	while (*s != '\0' && off + 1 < sz)
		buf[off++] = *s++;
	return off;
}

/* Appends the decimal form of v.  Async-signal-safe. */
static size_t
sc_cat_num(char *buf, size_t off, size_t sz, unsigned long v)
{
	char tmp[24];
	size_t i = sizeof(tmp) - 1;

	tmp[i] = '\0';
	do {
		tmp[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0 && i > 0);
	return sc_cat(buf, off, sz, tmp + i);
}

/* SIGSYS handler of the debug filter: one line on stderr, then _exit(159). */
static void
sc_sigsys(int sig, siginfo_t *si, void *uctx)
{
	char buf[256];
	size_t n = 0;
	unsigned int nr = (unsigned int)si->si_syscall;
	const char *name = "?";

	if (si->si_arch != sc_native_arch)
		name = "(foreign architecture)";
	else if (nr < SC_NAMES_MAX && sc_names[nr] != NULL)
		name = sc_names[nr];
	n = sc_cat(buf, n, sizeof(buf), "seccomp: ");
	n = sc_cat(buf, n, sizeof(buf), sc_trap_role);
	n = sc_cat(buf, n, sizeof(buf), " denied syscall ");
	n = sc_cat(buf, n, sizeof(buf), name);
	n = sc_cat(buf, n, sizeof(buf), " (");
	n = sc_cat_num(buf, n, sizeof(buf), nr);
	n = sc_cat(buf, n, sizeof(buf), ")\n");
	(void)!write(STDERR_FILENO, buf, n);
	_exit(SC_TRAP_EXIT);
}

/* Resolves every native syscall name and installs the SIGSYS handler. */
static void
sc_trap_install(const char *role)
{
	struct sigaction sa;
	sigset_t set;
	int nr;

	sc_native_arch = seccomp_arch_native();
	for (nr = 0; nr < SC_NAMES_MAX; nr++)
		if (sc_names[nr] == NULL)
			sc_names[nr] = seccomp_syscall_resolve_num_arch(sc_native_arch, nr);
	sc_trap_role = role;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = sc_sigsys;
	sa.sa_flags = SA_SIGINFO;
	sigfillset(&sa.sa_mask);
	if (sigaction(SIGSYS, &sa, NULL) == -1)
		fatal("sigaction(SIGSYS)");
	sigemptyset(&set);
	sigaddset(&set, SIGSYS);
	if (sigprocmask(SIG_UNBLOCK, &set, NULL) == -1)
		fatal("sigprocmask(SIGSYS)");
}

/* ---- building the filter --------------------------------------------- */

/* Returns the policy of role, or NULL when the role has none (yet). */
static const struct sc_policy *
sc_policy_for(enum ipc_role role)
{
	size_t i;

	for (i = 0; i < nitems(sc_policies); i++)
		if (sc_policies[i].role == role)
			return &sc_policies[i];
	return NULL;
}

/* Adds one rule; fatal on failure.  SC_SELF_PID becomes the caller's pid. */
static void
sc_add_rule(scmp_filter_ctx ctx, const struct sc_rule *r)
{
	struct scmp_arg_cmp arg[2];
	uint32_t action = r->errno_ret ? SCMP_ACT_ERRNO((uint32_t)r->errno_ret) : SCMP_ACT_ALLOW;
	unsigned int i;
	int rc;

	for (i = 0; i < r->argc; i++) {
		arg[i] = r->arg[i];
		if (arg[i].datum_a == SC_SELF_PID)
			arg[i].datum_a = (scmp_datum_t)getpid();
	}
	rc = seccomp_rule_add_array(ctx, action, r->nr, r->argc, r->argc ? arg : NULL);
	if (rc < 0) {
		errno = -rc;
		fatal("seccomp rule for syscall %d (%s)", r->nr, r->why);
	}
}

static void
sc_add_list(scmp_filter_ctx ctx, const struct sc_list *l)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		sc_add_rule(ctx, &l->rules[i]);
}

/* Sanitizer builds: lets the runtimes cache what they cannot read once
 * sandboxed, and adds their allow-list.  A no-op in production builds. */
static void
sc_add_sanitizer(scmp_filter_ctx ctx)
{
#ifdef AGRIPPA_SANITIZE
	__sanitizer_sandbox_arguments args = {.coverage_sandboxed = 0, .coverage_fd = -1};
	const struct sc_list l = SC_LIST(sc_sanitizer);

	__sanitizer_sandbox_on_notify(&args);
	sc_add_list(ctx, &l);
#endif
}

/* Returns a filter context with default and bad-architecture action act. */
static scmp_filter_ctx
sc_ctx_new(uint32_t act)
{
	scmp_filter_ctx ctx;

	if (seccomp_api_get() < 3)
		fatalx("seccomp: kernel or libseccomp too old for SECCOMP_RET_KILL_PROCESS");
	if ((ctx = seccomp_init(act)) == NULL)
		fatalx("seccomp_init failed");
	if (seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, act) < 0)
		fatalx("seccomp: cannot set the bad-architecture action");
	if (seccomp_arch_exist(ctx, SCMP_ARCH_NATIVE) != 0)
		fatalx("seccomp: native architecture missing from the filter");
	return ctx;
}

void
privsep_seccomp(enum ipc_role role, int debug)
{
	const struct sc_policy *p = sc_policy_for(role);
	uint32_t act = debug ? SCMP_ACT_TRAP : SCMP_ACT_KILL_PROCESS;
	scmp_filter_ctx ctx;
	size_t i;
	int rc;

	if (p == NULL)
		fatalx("no seccomp policy for role %d", (int)role);
	if (debug)
		sc_trap_install(p->name);
	ctx = sc_ctx_new(act);
	for (i = 0; i < nitems(p->lists); i++)
		sc_add_list(ctx, &p->lists[i]);
	sc_add_sanitizer(ctx);
	if ((rc = seccomp_load(ctx)) < 0) {
		errno = -rc;
		fatal("seccomp_load (%s)", p->name);
	}
	seccomp_release(ctx);
	log_debug("seccomp: %s filter installed%s", p->name, debug ? " (debug: trap)" : "");
}
