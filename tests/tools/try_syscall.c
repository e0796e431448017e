/*
 * try_syscall — a syscall probe for security tests (after bubblewrap's
 * tests/try-syscall.c).
 *
 *   try_syscall NAME...                 inside an Agrippa sandbox only
 *   try_syscall --seccomp ROLE NAME...  under ROLE's seccomp filter
 *
 * Each probe runs in its own forked child with harmless arguments and prints
 * one line: "NAME: ok", "NAME: errno=E (text)", or, when the child dies,
 * "NAME: killed by signal S (name)".  Exit status 0; 1 for a usage error;
 * 2 when it refuses to run.
 *
 * It refuses to run on the host: the plain mode needs AGRIPPA_SANDBOX=1, a
 * pid namespace that is not the initial one (and a pid 1 that is not init or
 * systemd), and not to be root with the initial uid map.  --seccomp mode
 * runs anywhere, but only the probes marked harmless; the others (mount,
 * writing a file, ...) still need the sandbox.
 *
 * Built twice: against libagrippa with the sanitizers (tests/tools/ of a build,
 * --seccomp mode), and with -DPROBE_STATIC as a static program without the
 * sanitizers or --seccomp (tests/probe/ of a build), which the security tests copy
 * into a sandbox's workspace: it needs nothing from the sandbox's /usr.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/bpf.h>
#include <linux/keyctl.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef PROBE_STATIC
#include "privsep/privsep.h"
#else
enum ipc_role { ROLE_ENGINE };
#endif

#define nitems(a) (sizeof(a) / sizeof((a)[0]))

/* Inode numbers the kernel gives the initial namespaces (PROC_*_INIT_INO). */
#define INIT_PIDNS "pid:[4026531836]"

/* ---- probes: each returns the syscall's result, errno set on -1 ------- */

/* A child made by a probe that got through exits at once. */
static long
reap(long pid)
{
	if (pid == 0)
		_exit(0);
	if (pid > 0)
		waitpid((pid_t)pid, NULL, 0);
	return pid;
}

static long
closed(long fd)
{
	if (fd >= 0)
		close((int)fd);
	return fd < 0 ? -1 : 0;
}

static long
pr_getpid(void)
{
	return getpid() > 0 ? 0 : -1;
}

static long
pr_getrandom(void)
{
	char b[8];

	return getrandom(b, sizeof(b), 0) == (ssize_t)sizeof(b) ? 0 : -1;
}

static long
pr_ptrace(void)
{
	return ptrace(PTRACE_TRACEME, 0, NULL, NULL);
}

static long
pr_unshare(void)
{
	return unshare(CLONE_NEWUSER);
}

static long
pr_socket_unix(void)
{
	return closed(socket(AF_UNIX, SOCK_STREAM, 0));
}

static long
pr_socket_inet(void)
{
	return closed(socket(AF_INET, SOCK_STREAM, 0));
}

static long
pr_socket_inet6(void)
{
	return closed(socket(AF_INET6, SOCK_STREAM, 0));
}

static long
pr_socket_packet(void)
{
	return closed(socket(AF_PACKET, SOCK_DGRAM, 0));
}

static long
pr_socket_netlink(void)
{
	return closed(socket(AF_NETLINK, SOCK_RAW, 0 /* NETLINK_ROUTE */));
}

/* TIOCSTI on a pipe, never on a terminal. */
/* On a pipe: the filter answers first (EPERM); unfiltered, ENOTTY. */
static long
pr_tiocsetd(void)
{
	int ldisc = 0, p[2];
	long r;

	if (pipe(p) == -1)
		return -1;
	r = ioctl(p[0], TIOCSETD, &ldisc);
	close(p[0]);
	close(p[1]);
	return r;
}

static long
pr_tiocsti(void)
{
	char c = 'x';
	int p[2];
	long r;

	if (pipe(p) == -1)
		return -1;
	r = ioctl(p[0], TIOCSTI, &c);
	close(p[0]);
	close(p[1]);
	return r;
}

static long
pr_keyctl(void)
{
	long r = syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0);

	return r < 0 ? -1 : 0;
}

static long
pr_bpf(void)
{
	union bpf_attr attr;

	memset(&attr, 0, sizeof(attr));
	return closed(syscall(SYS_bpf, BPF_PROG_LOAD, &attr, sizeof(attr)));
}

static long
pr_perf(void)
{
	struct perf_event_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_SOFTWARE;
	attr.config = PERF_COUNT_SW_DUMMY;
	return closed(syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0));
}

static long
pr_userfaultfd(void)
{
	return closed(syscall(SYS_userfaultfd, O_CLOEXEC));
}

static long
pr_io_uring(void)
{
	unsigned char params[120]; /* struct io_uring_params */

	memset(params, 0, sizeof(params));
	return closed(syscall(SYS_io_uring_setup, 1, params));
}

static long
pr_execve(void)
{
	char *const argv[] = {"true", NULL};
	char *const envp[] = {NULL};

	return execve("/bin/true", argv, envp);
}

static long
pr_clone(void)
{
	return reap(syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0)) < 0 ? -1 : 0;
}

static long
pr_clone3(void)
{
	unsigned long long args[8] = {0, 0, 0, 0, SIGCHLD, 0, 0, 0}; /* struct clone_args */

	return reap(syscall(SYS_clone3, args, sizeof(args))) < 0 ? -1 : 0;
}

static long
pr_mmap_exec(void)
{
	void *m = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return m == MAP_FAILED ? -1 : 0;
}

static long
pr_open_read(void)
{
	return closed(open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
}

static long
pr_chroot(void)
{
	return chroot("/");
}

static long
pr_setuid(void)
{
	return syscall(SYS_setuid, getuid());
}

static long
pr_kill_parent(void)
{
	return kill(getppid(), 0);
}

static long
pr_x32(void)
{
	return syscall(0x40000000 /* __X32_SYSCALL_BIT */ | SYS_getpid) < 0 ? -1 : 0;
}

/* Dangerous outside a sandbox: creates and removes a file in /tmp. */
static long
pr_open_write(void)
{
	char path[] = "/tmp/try_syscall-XXXXXX";
	int fd = mkstemp(path);

	if (fd != -1) {
		unlink(path);
		close(fd);
	}
	return fd == -1 ? -1 : 0;
}

/* Dangerous outside a sandbox: mounts a tmpfs on a fresh directory. */
static long
pr_mount(void)
{
	char dir[] = "/tmp/try_syscall-XXXXXX";
	long r;
	int saved;

	if (mkdtemp(dir) == NULL)
		return -1;
	r = mount("try_syscall", dir, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k");
	saved = errno;
	if (r == 0)
		umount2(dir, MNT_DETACH);
	rmdir(dir);
	errno = saved;
	return r;
}

/* Dangerous outside a sandbox: sets the host name (to what it already is). */
static long
pr_sethostname(void)
{
	char name[HOST_NAME_MAX + 1];

	if (gethostname(name, sizeof(name)) == -1)
		return -1;
	return sethostname(name, strlen(name));
}

struct probe {
	const char *name;
	int harmless; /* may run under --seccomp outside a sandbox */
	long (*fn)(void);
};

static const struct probe probes[] = {
    {"getpid", 1, pr_getpid},
    {"getrandom", 1, pr_getrandom},
    {"ptrace", 1, pr_ptrace},
    {"unshare", 1, pr_unshare},
    {"socket_unix", 1, pr_socket_unix},
    {"socket_inet", 1, pr_socket_inet},
    {"socket_inet6", 1, pr_socket_inet6},
    {"socket_packet", 1, pr_socket_packet},
    {"socket_netlink", 1, pr_socket_netlink},
    {"ioctl_tiocsti", 1, pr_tiocsti},
    {"ioctl_tiocsetd", 1, pr_tiocsetd},
    {"keyctl", 1, pr_keyctl},
    {"bpf", 1, pr_bpf},
    {"perf_event_open", 1, pr_perf},
    {"userfaultfd", 1, pr_userfaultfd},
    {"io_uring_setup", 1, pr_io_uring},
    {"execve", 1, pr_execve},
    {"clone", 1, pr_clone},
    {"clone3", 1, pr_clone3},
    {"mmap_exec", 1, pr_mmap_exec},
    {"open_read", 1, pr_open_read},
    {"chroot", 1, pr_chroot},
    {"setuid", 1, pr_setuid},
    {"kill_parent", 1, pr_kill_parent},
    {"x32", 1, pr_x32},
    {"open_write", 0, pr_open_write},
    {"mount", 0, pr_mount},
    {"sethostname", 0, pr_sethostname},
};

static const struct probe *
probe_find(const char *name)
{
	size_t i;

	for (i = 0; i < nitems(probes); i++)
		if (strcmp(probes[i].name, name) == 0)
			return &probes[i];
	return NULL;
}

/* ---- am I in a sandbox? ---------------------------------------------- */

/* Reads up to sz-1 bytes of path into buf; returns the length or -1. */
static ssize_t
read_small(const char *path, char *buf, size_t sz)
{
	ssize_t n;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	n = read(fd, buf, sz - 1);
	close(fd);
	if (n >= 0)
		buf[n] = '\0';
	return n;
}

/* Nonzero when this is the host's pid namespace or its pid 1 is an init. */
static int
host_pid_namespace(void)
{
	char buf[256], *base;
	ssize_t n;

	if ((n = readlink("/proc/self/ns/pid", buf, sizeof(buf) - 1)) == -1)
		return getpid() > 100; /* no /proc: a new pid namespace has small pids */
	buf[n] = '\0';
	if (strcmp(buf, INIT_PIDNS) == 0)
		return 1;
	if (read_small("/proc/1/cmdline", buf, sizeof(buf)) <= 0)
		return 0;
	base = strrchr(buf, '/') != NULL ? strrchr(buf, '/') + 1 : buf;
	return strcmp(base, "init") == 0 || strcmp(base, "systemd") == 0;
}

/* Nonzero when running as uid 0 of the initial user namespace. */
static int
host_root(void)
{
	char buf[256];
	unsigned long inside, outside, count;

	if (getuid() != 0)
		return 0;
	if (read_small("/proc/self/uid_map", buf, sizeof(buf)) <= 0)
		return 1; /* cannot tell: assume the worst */
	return sscanf(buf, "%lu %lu %lu", &inside, &outside, &count) == 3 && inside == 0 &&
	       outside == 0 && count == 4294967295ul;
}

static int
in_sandbox(void)
{
	const char *env = getenv("AGRIPPA_SANDBOX");

	return env != NULL && strcmp(env, "1") == 0 && !host_pid_namespace() && !host_root();
}

/* ---- running the probes ---------------------------------------------- */

#ifndef PROBE_STATIC
static const struct {
	const char *name;
	enum ipc_role role;
} roles[] = {{"engine", ROLE_ENGINE}, {"httpd", ROLE_HTTPD}, {"proxy", ROLE_PROXY}};
#endif

/* Runs one probe in a child (under role's filter if filtered); prints its line. */
static void
run_probe(const struct probe *p, int filtered, enum ipc_role role)
{
	int status;
	pid_t pid;

	fflush(stdout);
	if ((pid = fork()) == -1) {
		perror("try_syscall: fork");
		exit(1);
	}
	if (pid == 0) {
#ifndef PROBE_STATIC
		if (filtered)
			privsep_seccomp(role, 0);
#endif
		errno = 0;
		if (p->fn() >= 0)
			printf("%s: ok\n", p->name);
		else
			printf("%s: errno=%d (%s)\n", p->name, errno, strerror(errno));
		fflush(stdout);
		_exit(0);
	}
	if (waitpid(pid, &status, 0) == -1) {
		perror("try_syscall: waitpid");
		exit(1);
	}
	if (WIFSIGNALED(status))
		printf("%s: killed by signal %d (%s)\n", p->name, WTERMSIG(status),
		       sigabbrev_np(WTERMSIG(status)) ? sigabbrev_np(WTERMSIG(status)) : "?");
	else if (strcmp(p->name, "execve") == 0 && WEXITSTATUS(status) == 0)
		printf("%s: ok\n", p->name); /* the child became /bin/true */
}

__attribute__((noreturn)) static void
usage(void)
{
	fprintf(stderr, "usage: try_syscall [--seccomp engine|httpd|proxy] NAME...\nprobes:");
	for (size_t i = 0; i < nitems(probes); i++)
		fprintf(stderr, " %s%s", probes[i].name, probes[i].harmless ? "" : "*");
	fprintf(stderr, "\n(* only inside a sandbox)\n");
	exit(1);
}

static int
parse_role(const char *name, enum ipc_role *role)
{
#ifndef PROBE_STATIC
	size_t i;

	for (i = 0; i < nitems(roles); i++)
		if (strcmp(roles[i].name, name) == 0) {
			*role = roles[i].role;
			return 0;
		}
#endif
	return -1;
}

int
main(int argc, char **argv)
{
	enum ipc_role role = ROLE_ENGINE;
	int i, first = 1, filtered = 0, sandboxed = in_sandbox();

	if (argc > 2 && strcmp(argv[1], "--seccomp") == 0) {
		if (parse_role(argv[2], &role) == -1)
			usage();
		filtered = 1;
		first = 3;
	}
	if (first >= argc)
		usage();
	for (i = first; i < argc; i++) {
		const struct probe *p = probe_find(argv[i]);

		if (p == NULL)
			usage();
		if (!sandboxed && !(filtered && p->harmless)) {
			if (filtered)
				fprintf(stderr,
				        "try_syscall: refusing to run %s outside a sandbox\n",
				        p->name);
			else
				fprintf(stderr, "try_syscall: refusing to run outside a sandbox\n");
			return 2;
		}
	}
	for (i = first; i < argc; i++)
		run_probe(probe_find(argv[i]), filtered, role);
	return 0;
}
