/*
 * privsep/ unit tests.  Every test that installs a filter, drops privileges
 * or changes limits does it in a forked child; the parent (this process)
 * never does, and judges only the child's exit status and its stderr.
 *
 * Probes that a filter must kill use arguments that stay harmless even if a
 * broken filter let them through: TIOCSTI on a pipe, mount in a private mount
 * namespace onto a throwaway directory, unshare of a user namespace only,
 * signal 0, and so on.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/bpf.h>
#include <linux/keyctl.h>
#include <linux/netlink.h>
#include <linux/perf_event.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>

#include "privsep/privsep.h"

#define nitems(a) (sizeof(a) / sizeof((a)[0]))

#define NOBODY 65534
#define TRAP_EXIT 159  /* privsep_seccomp debug mode */
#define CHECK_EXIT 100 /* a CHECK() in a child failed */
#define CHILD_TIMEOUT 60

/* Inside a child: on failure say what and where on stderr, exit 100. */
#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			dprintf(STDERR_FILENO, "check failed at line %d: %s (errno %d: %s)\n",     \
			        __LINE__, #cond, errno, strerror(errno));                          \
			_exit(CHECK_EXIT);                                                         \
		}                                                                                  \
	} while (0)

/* ---- running a child ------------------------------------------------- */

struct child {
	int status;
	char err[32768]; /* its stderr */
};

typedef void (*child_fn)(const void *arg);

/*
 * cmocka catches fault signals to turn them into test failures; in a child
 * that would resume the test runner under a filter.  Children get back the
 * handlers the process started with (the sanitizer runtime's, if any).
 */
static const int fault_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGSYS};
static struct sigaction fault_actions[nitems(fault_signals)];

static void
fault_handlers_save(void)
{
	size_t i;

	for (i = 0; i < nitems(fault_signals); i++)
		sigaction(fault_signals[i], NULL, &fault_actions[i]);
}

static void
fault_handlers_restore(void)
{
	size_t i;

	for (i = 0; i < nitems(fault_signals); i++)
		sigaction(fault_signals[i], &fault_actions[i], NULL);
}

/* Runs fn(arg) in a child with stderr captured into c; fn returning = exit 0. */
static void
run_child(child_fn fn, const void *arg, struct child *c)
{
	size_t off = 0;
	ssize_t n;
	char drain[512];
	int p[2];
	pid_t pid;

	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	fflush(NULL);
	pid = fork();
	assert_true(pid != -1);
	if (pid == 0) {
		if (dup2(p[1], STDERR_FILENO) == -1)
			_exit(99);
		fault_handlers_restore();
		alarm(CHILD_TIMEOUT); /* a hung child fails its test by SIGALRM */
		fn(arg);
		_exit(0);
	}
	close(p[1]);
	while ((n = read(p[0], c->err + off, sizeof(c->err) - 1 - off)) > 0)
		if ((off += (size_t)n) == sizeof(c->err) - 1)
			while (read(p[0], drain, sizeof(drain)) > 0)
				;
	c->err[off] = '\0';
	close(p[0]);
	assert_int_equal(waitpid(pid, &c->status, 0), pid);
}

static const char *
status_str(int status, char *buf, size_t sz)
{
	if (WIFEXITED(status))
		snprintf(buf, sz, "exited %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, sz, "killed by signal %d (%s)", WTERMSIG(status),
		         strsignal(WTERMSIG(status)));
	else
		snprintf(buf, sz, "status 0x%x", status);
	return buf;
}

static void
expect_exit(const struct child *c, int code)
{
	char s[64];

	if (WIFEXITED(c->status) && WEXITSTATUS(c->status) == code)
		return;
	fail_msg("child %s, expected exit %d; its stderr:\n%s", status_str(c->status, s, sizeof(s)),
	         code, c->err);
}

static void
expect_sigsys(const struct child *c, const char *what)
{
	char s[64];

	if (WIFSIGNALED(c->status) && WTERMSIG(c->status) == SIGSYS)
		return;
	fail_msg("%s: child %s, expected death by SIGSYS; its stderr:\n%s", what,
	         status_str(c->status, s, sizeof(s)), c->err);
}

static void
expect_stderr(const struct child *c, const char *text)
{
	if (strstr(c->err, text) == NULL)
		fail_msg("child stderr lacks \"%s\"; it was:\n%s", text, c->err);
}

static int
need_root(void)
{
	if (geteuid() == 0)
		return 1;
	print_message("skipped: needs root (chroot, setresuid, mount namespaces)\n");
	return 0;
}

/* A fresh directory in /tmp owned by the caller, mode 0755. */
static void
make_tmpdir(char *path, size_t sz)
{
	snprintf(path, sz, "/tmp/agrippa-test-XXXXXX");
	assert_non_null(mkdtemp(path));
	assert_int_equal(chmod(path, 0755), 0);
}

static void
remove_tmpdir(const char *dir, const char *const *files)
{
	char p[PATH_MAX];

	for (; files != NULL && *files != NULL; files++) {
		snprintf(p, sizeof(p), "%s/%s", dir, *files);
		(void)unlink(p);
	}
	assert_int_equal(rmdir(dir), 0);
}

/* ---- lookup, nodump, capabilities ------------------------------------ */

static void
test_lookup_user(void **state)
{
	uid_t uid = 1;
	gid_t gid = 1;

	assert_int_equal(privsep_lookup_user("root", &uid, &gid), 0);
	assert_int_equal(uid, 0);
	assert_int_equal(gid, 0);
	assert_int_equal(privsep_lookup_user("agrippa-no-such-user", &uid, &gid), -1);
}

static void
child_nodump(const void *arg)
{
	privsep_nodump();
	CHECK(prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0);
}

static void
test_nodump(void **state)
{
	static struct child c;

	run_child(child_nodump, NULL, &c);
	expect_exit(&c, 0);
}

static void
child_caps(const void *arg)
{
	CHECK(!privsep_caps_empty()); /* root starts with capabilities */
	privsep_caps_clear();
	CHECK(privsep_caps_empty());
}

static void
test_caps_clear(void **state)
{
	static struct child c;

	if (!need_root())
		skip();
	run_child(child_caps, NULL, &c);
	expect_exit(&c, 0);
}

/* ---- seccomp: workloads that must keep working ------------------------ */

struct wl {
	struct event_base *base;
	int sv[2];
	int got_read, got_signal, got_timer, got_http;
	struct event *tm;
	int listen_fd, client_fd; /* TCP, made before the filter */
	struct sockaddr_in addr;  /* the listener's address */
};

static void
wl_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct wl *w = arg;
	char buf[16];

	CHECK(read(fd, buf, sizeof(buf)) == 5 && memcmp(buf, "hello", 5) == 0);
	w->got_read = 1;
}

static void
wl_signal_cb(evutil_socket_t sig, short what, void *arg)
{
	((struct wl *)arg)->got_signal = 1;
}

static void
wl_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct wl *w = arg;
	struct timeval tv = {0, 20000};

	/* Stop once the other events ran (a loaded machine may be late). */
	w->got_timer++;
	if (!(w->got_read && w->got_signal) && w->got_timer < 250) {
		CHECK(evtimer_add(w->tm, &tv) == 0);
		return;
	}
	event_base_loopbreak(w->base);
}

/* An event loop: a socketpair read, a signal event, a timer. */
static void
wl_event_loop(struct wl *w)
{
	struct timeval tv = {0, 20000};
	struct event *rd, *sig;
	int n = -1;

	CHECK((w->base = event_base_new()) != NULL);
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, w->sv) == 0);
	CHECK((rd = event_new(w->base, w->sv[1], EV_READ, wl_read_cb, w)) != NULL);
	CHECK((sig = evsignal_new(w->base, SIGUSR1, wl_signal_cb, w)) != NULL);
	CHECK((w->tm = evtimer_new(w->base, wl_timer_cb, w)) != NULL);
	CHECK(event_add(rd, NULL) == 0 && event_add(sig, NULL) == 0 && event_add(w->tm, &tv) == 0);
	CHECK(write(w->sv[0], "hello", 5) == 5);
	CHECK(ioctl(w->sv[1], FIONREAD, &n) == 0 && n == 5);
	CHECK(raise(SIGUSR1) == 0);
	CHECK(event_base_dispatch(w->base) == 0);
	CHECK(w->got_read && w->got_signal && w->got_timer);
	event_free(rd);
	event_free(sig);
	event_free(w->tm);
	close(w->sv[0]);
	close(w->sv[1]);
}

/* Memory, time, randomness and the odd glibc call every role makes. */
static void
wl_libc(void)
{
	struct timespec ts, sl = {0, 1000000};
	struct timeval tv;
	struct utsname u;
	struct rlimit rl;
	struct stat st;
	unsigned char rnd[16];
	char *p, *q;
	int fd;

	CHECK(getrandom(rnd, sizeof(rnd), 0) == (ssize_t)sizeof(rnd));
	CHECK(clock_gettime(CLOCK_MONOTONIC, &ts) == 0 && clock_gettime(CLOCK_REALTIME, &ts) == 0);
	CHECK(gettimeofday(&tv, NULL) == 0 && time(NULL) > 0);
	CHECK(nanosleep(&sl, NULL) == 0);
	CHECK((p = malloc(10u << 20)) != NULL);
	memset(p, 0xa5, 10u << 20);
	CHECK((q = realloc(p, 20u << 20)) != NULL);
	free(q);
	CHECK(uname(&u) == 0 && getrlimit(RLIMIT_NOFILE, &rl) == 0);
	CHECK(isatty(STDERR_FILENO) == 0); /* a pipe: TCGETS answers ENOTTY */
	CHECK((fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) != -1);
	CHECK(fstat(fd, &st) == 0 && fcntl(fd, F_GETFD) == FD_CLOEXEC);
	close(fd);
	CHECK(kill(getpid(), 0) == 0);
	CHECK(dprintf(STDERR_FILENO, "%s", "") == 0);
}

/* What syslog does when /dev/log is gone: a Unix datagram socket, connect. */
static void
wl_syslog_socket(void)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX, .sun_path = "/nonexistent/agrippa"};
	int fd;

	CHECK((fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) != -1);
	CHECK(connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1 && errno == ENOENT);
	close(fd);
}

/* A loopback TCP listener; with connect_client, also a connected client. */
static void
wl_tcp_setup(struct wl *w, int connect_client)
{
	socklen_t len = sizeof(w->addr);

	w->addr.sin_family = AF_INET;
	w->addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK((w->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) !=
	      -1);
	CHECK(bind(w->listen_fd, (struct sockaddr *)&w->addr, sizeof(w->addr)) == 0);
	CHECK(listen(w->listen_fd, 8) == 0);
	CHECK(getsockname(w->listen_fd, (struct sockaddr *)&w->addr, &len) == 0);
	if (!connect_client)
		return;
	CHECK((w->client_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) != -1);
	CHECK(connect(w->client_fd, (struct sockaddr *)&w->addr, sizeof(w->addr)) == 0);
}

static void
wl_http_handler(struct evhttp_request *req, void *arg)
{
	struct evbuffer *b = evbuffer_new();

	evbuffer_add_printf(b, "ok\n");
	evhttp_send_reply(req, HTTP_OK, "OK", b);
	evbuffer_free(b);
}

static void
wl_http_client_cb(evutil_socket_t fd, short what, void *arg)
{
	struct wl *w = arg;
	char buf[512];
	ssize_t n;

	CHECK(what & EV_READ);
	CHECK((n = read(fd, buf, sizeof(buf) - 1)) > 0);
	buf[n] = '\0';
	CHECK(strncmp(buf, "HTTP/1.", 7) == 0 && strstr(buf, " 200 ") != NULL);
	w->got_http = 1;
	event_base_loopbreak(w->base);
}

/* httpd: evhttp accepts on a listener it was given and answers a request. */
static void
wl_http(struct wl *w)
{
	static const char req[] = "GET /x HTTP/1.0\r\nHost: t\r\n\r\n";
	struct timeval tv = {5, 0};
	struct evhttp *http;
	struct event *ev;
	int one = 1;

	CHECK((w->base = event_base_new()) != NULL);
	CHECK((http = evhttp_new(w->base)) != NULL);
	evhttp_set_gencb(http, wl_http_handler, w);
	CHECK(evhttp_accept_socket(http, w->listen_fd) == 0);
	CHECK(setsockopt(w->client_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == 0);
	CHECK(write(w->client_fd, req, sizeof(req) - 1) == (ssize_t)sizeof(req) - 1);
	CHECK((ev = event_new(w->base, w->client_fd, EV_READ | EV_TIMEOUT, wl_http_client_cb, w)) !=
	      NULL);
	CHECK(event_add(ev, &tv) == 0);
	CHECK(event_base_dispatch(w->base) == 0);
	CHECK(w->got_http);
	CHECK(shutdown(w->client_fd, SHUT_RDWR) == 0);
	event_free(ev);
	evhttp_free(http);
	event_base_free(w->base);
}

static void *
wl_thread(void *arg)
{
	unsigned char rnd[8];
	void *p = malloc(4096);
	int ok = p != NULL && getrandom(rnd, sizeof(rnd), 0) == (ssize_t)sizeof(rnd);

	free(p);
	return ok ? arg : NULL;
}

/* proxy: TCP and UDP out, name resolution, a resolver thread, locked memory. */
static void
wl_proxy(struct wl *w)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res;
	pthread_t t;
	void *ret = NULL;
	long page = sysconf(_SC_PAGESIZE);
	char *mem;
	int fd;

	CHECK((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) != -1);
	CHECK(connect(fd, (struct sockaddr *)&w->addr, sizeof(w->addr)) == 0);
	close(fd);
	CHECK((fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) != -1);
	CHECK(connect(fd, (struct sockaddr *)&w->addr, sizeof(w->addr)) == 0);
	close(fd);
	fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0); /* may lack IPv6, must not die */
	if (fd != -1)
		close(fd);
	CHECK(getaddrinfo("localhost", "443", &hints, &res) == 0);
	freeaddrinfo(res);
	CHECK(pthread_create(&t, NULL, wl_thread, w) == 0);
	CHECK(pthread_join(t, &ret) == 0 && ret == w);
	CHECK((mem = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
	                  -1, 0)) != MAP_FAILED);
	CHECK(mlock(mem, (size_t)page) == 0 && munlock(mem, (size_t)page) == 0);
	munmap(mem, (size_t)page);
}

static void
child_workload(const void *arg)
{
	enum ipc_role role = *(const enum ipc_role *)arg;
	struct addrinfo *res;
	struct wl w;

	memset(&w, 0, sizeof(w));
	w.listen_fd = w.client_fd = -1;
	if (role == ROLE_HTTPD)
		wl_tcp_setup(&w, 1);
	if (role == ROLE_PROXY) {
		wl_tcp_setup(&w, 0);
		/* As proxy_main must: load NSS modules once before the filter. */
		CHECK(getaddrinfo("localhost", NULL, NULL, &res) == 0);
		freeaddrinfo(res);
	}
	privsep_seccomp(role, 0);
	wl_event_loop(&w);
	event_base_free(w.base);
	wl_libc();
	wl_syslog_socket();
	if (role == ROLE_HTTPD)
		wl_http(&w);
	if (role == ROLE_PROXY)
		wl_proxy(&w);
}

static void
test_workload(void **state)
{
	static struct child c;

	run_child(child_workload, *state, &c);
	expect_exit(&c, 0);
}

static const enum ipc_role role_engine = ROLE_ENGINE, role_httpd = ROLE_HTTPD,
                           role_proxy = ROLE_PROXY;

/* ---- seccomp: probes that must be killed ------------------------------ */

struct probe_ctx {
	const char *dir; /* a throwaway directory the parent removes */
	int fd;          /* made by setup, before the filter */
	void *page;
};

struct probe {
	const char *name;
	unsigned int roles; /* ROLE_BIT()s whose filter must kill it */
	void (*setup)(struct probe_ctx *);
	long (*run)(struct probe_ctx *);
};

#define ALL_ROLES (ROLE_BIT(ROLE_ENGINE) | ROLE_BIT(ROLE_HTTPD) | ROLE_BIT(ROLE_PROXY))
#define NOT_PROXY (ROLE_BIT(ROLE_ENGINE) | ROLE_BIT(ROLE_HTTPD))

static void
setup_pipe(struct probe_ctx *p)
{
	int fds[2];

	CHECK(pipe(fds) == 0);
	p->fd = fds[0];
}

static void
setup_unix_socket(struct probe_ctx *p)
{
	CHECK((p->fd = socket(AF_UNIX, SOCK_STREAM, 0)) != -1);
}

static void
setup_page(struct probe_ctx *p)
{
	p->page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(p->page != MAP_FAILED);
}

/* A private mount namespace: a mount that got through would vanish with us. */
static void
setup_private_mounts(struct probe_ctx *p)
{
	if (unshare(CLONE_NEWNS) == 0)
		CHECK(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0);
}

/* A child created by a probe that got through exits at once. */
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
p_ptrace(struct probe_ctx *p)
{
	return ptrace(PTRACE_TRACEME, 0, NULL, NULL);
}

static long
p_unshare(struct probe_ctx *p)
{
	return unshare(CLONE_NEWUSER);
}

static long
p_socket(int domain, int type, int proto)
{
	int fd = socket(domain, type, proto);

	if (fd != -1)
		close(fd);
	return fd;
}

static long
p_socket_inet(struct probe_ctx *p)
{
	return p_socket(AF_INET, SOCK_STREAM, 0);
}

static long
p_socket_inet6(struct probe_ctx *p)
{
	return p_socket(AF_INET6, SOCK_DGRAM, 0);
}

static long
p_socket_packet(struct probe_ctx *p)
{
	return p_socket(AF_PACKET, SOCK_DGRAM, 0);
}

static long
p_socket_netlink_audit(struct probe_ctx *p)
{
	return p_socket(AF_NETLINK, SOCK_RAW, NETLINK_AUDIT);
}

static long
p_socket_inet_raw(struct probe_ctx *p)
{
	return p_socket(AF_INET, SOCK_RAW, IPPROTO_ICMP);
}

static long
p_tiocsti(struct probe_ctx *p)
{
	char c = 'x';

	return ioctl(p->fd, TIOCSTI, &c);
}

/* The kernel truncates the request to 32 bits: high bits must not sneak by. */
static long
p_tiocsti_high(struct probe_ctx *p)
{
	char c = 'x';

	return ioctl(p->fd, (unsigned long)TIOCSTI | (1ul << 32), &c);
}

static long
p_keyctl(struct probe_ctx *p)
{
	return syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0);
}

static long
p_bpf(struct probe_ctx *p)
{
	union bpf_attr attr;

	memset(&attr, 0, sizeof(attr));
	return syscall(SYS_bpf, BPF_PROG_LOAD, &attr, sizeof(attr));
}

static long
p_perf(struct probe_ctx *p)
{
	struct perf_event_attr attr;
	long fd;

	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_SOFTWARE;
	attr.config = PERF_COUNT_SW_DUMMY;
	fd = syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
	if (fd >= 0)
		close((int)fd);
	return fd;
}

static long
p_userfaultfd(struct probe_ctx *p)
{
	long fd = syscall(SYS_userfaultfd, O_CLOEXEC);

	if (fd >= 0)
		close((int)fd);
	return fd;
}

static long
p_io_uring(struct probe_ctx *p)
{
	unsigned char params[120]; /* struct io_uring_params */
	long fd;

	memset(params, 0, sizeof(params));
	fd = syscall(SYS_io_uring_setup, 1, params);
	if (fd >= 0)
		close((int)fd);
	return fd;
}

static long
p_execve(struct probe_ctx *p)
{
	char *const argv[] = {"true", NULL};
	char *const envp[] = {NULL};

	return execve("/bin/true", argv, envp);
}

static long
p_clone_fork(struct probe_ctx *p)
{
	return reap(syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0));
}

static long
p_fork(struct probe_ctx *p)
{
	return reap(syscall(SYS_fork));
}

static long
p_clone3(struct probe_ctx *p)
{
	uint64_t args[8] = {0, 0, 0, 0, SIGCHLD, 0, 0, 0}; /* struct clone_args */

	return reap(syscall(SYS_clone3, args, sizeof(args)));
}

static long
p_mount(struct probe_ctx *p)
{
	long r = mount("agrippa-test", p->dir, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k");

	if (r == 0)
		umount2(p->dir, MNT_DETACH);
	return r;
}

static long
p_mmap_exec(struct probe_ctx *p)
{
	void *m = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return m == MAP_FAILED ? -1 : 0;
}

static long
p_mprotect_exec(struct probe_ctx *p)
{
	return mprotect(p->page, 4096, PROT_READ | PROT_EXEC);
}

static long
p_open_create(struct probe_ctx *p)
{
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/created", p->dir);
	if ((fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600)) != -1)
		close(fd);
	return fd;
}

static long
p_open_rdwr(struct probe_ctx *p)
{
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);

	if (fd != -1)
		close(fd);
	return fd;
}

static long
p_kill_other(struct probe_ctx *p)
{
	return kill(getppid(), 0);
}

static long
p_tgkill_other(struct probe_ctx *p)
{
	return syscall(SYS_tgkill, getppid(), getppid(), 0);
}

static long
p_setrlimit(struct probe_ctx *p)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_CORE, &rl) == -1)
		return -1;
	return setrlimit(RLIMIT_CORE, &rl);
}

static long
p_setuid(struct probe_ctx *p)
{
	return syscall(SYS_setuid, getuid());
}

static long
p_chroot(struct probe_ctx *p)
{
	return chroot("/");
}

static long
p_setns(struct probe_ctx *p)
{
	return setns(-1, 0);
}

static long
p_init_module(struct probe_ctx *p)
{
	return syscall(SYS_init_module, NULL, 0, "");
}

static long
p_prctl_name(struct probe_ctx *p)
{
	return prctl(PR_SET_NAME, "probe", 0, 0, 0);
}

static long
p_listen(struct probe_ctx *p)
{
	return listen(p->fd, 1);
}

static long
p_bind(struct probe_ctx *p)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};

	return bind(p->fd, (struct sockaddr *)&sun, sizeof(sa_family_t)); /* autobind */
}

static long
p_accept4(struct probe_ctx *p)
{
	return accept4(p->fd, NULL, NULL, SOCK_CLOEXEC);
}

static long
p_x32(struct probe_ctx *p)
{
	return syscall(0x40000000 /* __X32_SYSCALL_BIT */ | SYS_getpid);
}

static const struct probe probes[] = {
    {"ptrace_traceme", ALL_ROLES, NULL, p_ptrace},
    {"unshare_user", ALL_ROLES, NULL, p_unshare},
    {"socket_inet", NOT_PROXY, NULL, p_socket_inet},
    {"socket_inet6", NOT_PROXY, NULL, p_socket_inet6},
    {"socket_inet_raw", ALL_ROLES, NULL, p_socket_inet_raw},
    {"socket_packet", ALL_ROLES, NULL, p_socket_packet},
    {"socket_netlink_audit", ALL_ROLES, NULL, p_socket_netlink_audit},
    {"ioctl_tiocsti", ALL_ROLES, setup_pipe, p_tiocsti},
    {"ioctl_tiocsti_high_bits", ALL_ROLES, setup_pipe, p_tiocsti_high},
    {"keyctl", ALL_ROLES, NULL, p_keyctl},
    {"bpf", ALL_ROLES, NULL, p_bpf},
    {"perf_event_open", ALL_ROLES, NULL, p_perf},
    {"userfaultfd", ALL_ROLES, NULL, p_userfaultfd},
    {"io_uring_setup", ALL_ROLES, NULL, p_io_uring},
    {"execve", ALL_ROLES, NULL, p_execve},
    {"clone_fork", ALL_ROLES, NULL, p_clone_fork},
    {"fork", ALL_ROLES, NULL, p_fork},
    {"clone3", NOT_PROXY, NULL, p_clone3},
    {"mount_tmpfs", ALL_ROLES, setup_private_mounts, p_mount},
    {"mmap_exec", ALL_ROLES, NULL, p_mmap_exec},
    {"mprotect_exec", ALL_ROLES, setup_page, p_mprotect_exec},
    {"open_create", ALL_ROLES, NULL, p_open_create},
    {"open_rdwr", ALL_ROLES, NULL, p_open_rdwr},
    {"kill_other", ALL_ROLES, NULL, p_kill_other},
    {"tgkill_other", ALL_ROLES, NULL, p_tgkill_other},
    {"setrlimit", ALL_ROLES, NULL, p_setrlimit},
    {"setuid", ALL_ROLES, NULL, p_setuid},
    {"chroot", ALL_ROLES, NULL, p_chroot},
    {"setns", ALL_ROLES, NULL, p_setns},
    {"init_module", ALL_ROLES, NULL, p_init_module},
    {"prctl_set_name", ALL_ROLES, NULL, p_prctl_name},
    {"listen", ALL_ROLES, setup_unix_socket, p_listen},
    {"bind", NOT_PROXY, setup_unix_socket, p_bind},
    {"accept4", ROLE_BIT(ROLE_ENGINE) | ROLE_BIT(ROLE_PROXY), setup_unix_socket, p_accept4},
    {"x32_syscall", ALL_ROLES, NULL, p_x32},
};

struct probe_case {
	enum ipc_role role;
	const struct probe *probe;
	char name[64];
	struct probe_ctx ctx;
};

static void
child_probe(const void *arg)
{
	const struct probe_case *pc = arg;
	struct probe_ctx ctx = pc->ctx;
	long r;

	if (pc->probe->setup != NULL)
		pc->probe->setup(&ctx);
	privsep_seccomp(pc->role, 0);
	r = pc->probe->run(&ctx);
	dprintf(STDERR_FILENO, "%s survived the filter: returned %ld (%s)\n", pc->probe->name, r,
	        r == -1 ? strerror(errno) : "no error");
}

static void
test_probe(void **state)
{
	static const char *const files[] = {"created", NULL};
	static struct child c;
	struct probe_case *pc = *state;
	char dir[64];

	make_tmpdir(dir, sizeof(dir));
	pc->ctx.dir = dir;
	pc->ctx.fd = -1;
	run_child(child_probe, pc, &c);
	remove_tmpdir(dir, files);
	expect_sigsys(&c, pc->name);
}

/* proxy: clone3 fails with ENOSYS (glibc then uses clone for threads). */
static void
child_proxy_clone3(const void *arg)
{
	privsep_seccomp(ROLE_PROXY, 0);
	errno = 0;
	CHECK(p_clone3(NULL) == -1 && errno == ENOSYS);
}

static void
test_proxy_clone3_enosys(void **state)
{
	static struct child c;

	run_child(child_proxy_clone3, NULL, &c);
	expect_exit(&c, 0);
}

#if defined(__x86_64__)
/* getpid through the i386 entry point (int $0x80, eax = 20). */
static long
i386_getpid(void)
{
	long ret;

	__asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) : "memory", "r8", "r9", "r10", "r11");
	return ret;
}

static void
child_i386_plain(const void *arg)
{
	CHECK(i386_getpid() == getpid());
}

static void
child_i386_filtered(const void *arg)
{
	long r;

	privsep_seccomp(ROLE_ENGINE, 0);
	r = i386_getpid();
	dprintf(STDERR_FILENO, "i386 getpid survived the filter: %ld\n", r);
}

/* The filter only knows x86_64: an i386 call must die on the arch check. */
static void
test_i386_syscall(void **state)
{
	static struct child c;

	run_child(child_i386_plain, NULL, &c);
	if (!WIFEXITED(c.status) || WEXITSTATUS(c.status) != 0) {
		print_message("skipped: kernel without i386 emulation (int $0x80)\n");
		skip();
	}
	run_child(child_i386_filtered, NULL, &c);
	expect_sigsys(&c, "i386 getpid");
}
#endif

/* ---- seccomp: debug mode, missing policies, sanitizer runtimes -------- */

static void
child_debug_ptrace(const void *arg)
{
	privsep_seccomp(*(const enum ipc_role *)arg, 1);
	ptrace(PTRACE_TRACEME, 0, NULL, NULL);
	dprintf(STDERR_FILENO, "ptrace survived the debug filter\n");
}

static void
test_debug_names_syscall(void **state)
{
	static struct child c;
	char want[80];

	run_child(child_debug_ptrace, &role_httpd, &c);
	expect_exit(&c, TRAP_EXIT);
	snprintf(want, sizeof(want), "seccomp: httpd denied syscall ptrace (%d)", SYS_ptrace);
	expect_stderr(&c, want);
}

static void
child_no_policy(const void *arg)
{
	privsep_seccomp(*(const enum ipc_role *)arg, 0);
}

static void
test_no_policy(void **state)
{
	static const enum ipc_role roles[] = {ROLE_SUPERVISOR, ROLE_SANDBOX, ROLE_GITHELPER};
	static struct child c;
	size_t i;

	for (i = 0; i < nitems(roles); i++) {
		run_child(child_no_policy, &roles[i], &c);
		expect_exit(&c, 1);
		expect_stderr(&c, "no seccomp policy for role");
	}
}

#ifdef AGRIPPA_SANITIZE
static void *volatile sink;

static void
child_asan_overflow(const void *arg)
{
	privsep_seccomp(ROLE_ENGINE, 0);
	sink = malloc(10);
	memset(sink, 0, 10 + (size_t)(uintptr_t)arg);
}

/* An ASan report from a filtered process is a report, not a SIGSYS. */
static void
test_asan_report_survives_filter(void **state)
{
	static struct child c;

	run_child(child_asan_overflow, (const void *)1, &c);
	expect_exit(&c, 1);
	expect_stderr(&c, "AddressSanitizer: heap-buffer-overflow");
}

static void
child_asan_segv(const void *arg)
{
	privsep_seccomp(ROLE_HTTPD, 0);
	*(volatile int *)(uintptr_t)arg = 1;
}

/* So is a SEGV report, made on the alternate signal stack. */
static void
test_asan_segv_survives_filter(void **state)
{
	static struct child c;

	run_child(child_asan_segv, (const void *)16, &c); /* not NULL: UBSan would see it */
	expect_exit(&c, 1);
	expect_stderr(&c, "AddressSanitizer: SEGV");
}

enum lsan_case { LSAN_CLEAN, LSAN_LEAK, LSAN_THREAD };

static void *
lsan_blocked_thread(void *arg)
{
	char c;

	(void)!read(*(const int *)arg, &c, 1); /* never returns: nobody writes */
	return NULL;
}

/* Exits through exit(), so LeakSanitizer's check runs under the filter, in
 * a non-dumpable process (as every child is), maybe with a live thread. */
static void
child_exit_leak_check(const void *arg)
{
	enum lsan_case what = *(const enum lsan_case *)arg;
	static int fds[2];
	pthread_t t;

	privsep_nodump();
	CHECK(pipe(fds) == 0);
	privsep_seccomp(what == LSAN_THREAD ? ROLE_PROXY : ROLE_ENGINE, 0);
	if (what == LSAN_THREAD)
		CHECK(pthread_create(&t, NULL, lsan_blocked_thread, &fds[0]) == 0);
	if (what == LSAN_LEAK) {
		sink = malloc(77);
		sink = NULL;
	}
	exit(0);
}

static int
leak_check_enabled(void)
{
	const char *o = getenv("ASAN_OPTIONS");

	return o == NULL || strstr(o, "detect_leaks=0") == NULL;
}

static void
test_lsan_survives_filter(void **state)
{
	static const enum lsan_case clean = LSAN_CLEAN, leak = LSAN_LEAK, thread = LSAN_THREAD;
	static struct child c;

	run_child(child_exit_leak_check, &clean, &c);
	expect_exit(&c, 0);
	run_child(child_exit_leak_check, &thread, &c);
	expect_exit(&c, 0);
	if (!leak_check_enabled()) {
		print_message("leak detection off in ASAN_OPTIONS: only clean exits checked\n");
		return;
	}
	run_child(child_exit_leak_check, &leak, &c);
	expect_stderr(&c, "LeakSanitizer: detected memory leaks");
	if (WIFSIGNALED(c.status))
		fail_msg("leak report ended by signal %d", WTERMSIG(c.status));
}
#endif

/* ---- privilege drop --------------------------------------------------- */

static void
check_bounding_empty(void)
{
	cap_value_t cap, max = cap_max_bits();

	for (cap = 0; cap < max; cap++)
		CHECK(prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 0);
}

static void
child_drop(const void *arg)
{
	const char *dir = arg;
	char cwd[PATH_MAX], outside[PATH_MAX];
	uid_t r, e, s;
	gid_t rg, eg, sg, groups[4];

	snprintf(outside, sizeof(outside), "%s/marker", dir);
	privsep_drop(dir, NOBODY, NOBODY, 0);
	CHECK(getresuid(&r, &e, &s) == 0 && r == NOBODY && e == NOBODY && s == NOBODY);
	CHECK(getresgid(&rg, &eg, &sg) == 0 && rg == NOBODY && eg == NOBODY && sg == NOBODY);
	CHECK(getgroups(4, groups) == 1 && groups[0] == NOBODY);
	CHECK(getcwd(cwd, sizeof(cwd)) != NULL && strcmp(cwd, "/") == 0);
	CHECK(access("/marker", F_OK) == 0);                   /* "/" is the chroot */
	CHECK(access(outside, F_OK) == -1 && errno == ENOENT); /* the host tree is gone */
	CHECK(setuid(0) == -1 && errno == EPERM);
	CHECK(prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1);
	CHECK(prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0);
	CHECK(privsep_caps_empty());
	check_bounding_empty();
}

/* A root-owned 0755 directory in /tmp with a file "marker" in it. */
static void
make_chroot(char *dir, size_t sz)
{
	char p[PATH_MAX];
	int fd;

	make_tmpdir(dir, sz);
	snprintf(p, sizeof(p), "%s/marker", dir);
	assert_true((fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644)) != -1);
	close(fd);
}

static const char *const chroot_files[] = {"marker", NULL};

static void
test_drop(void **state)
{
	static struct child c;
	char dir[64];

	if (!need_root())
		skip();
	make_chroot(dir, sizeof(dir));
	run_child(child_drop, dir, &c);
	remove_tmpdir(dir, chroot_files);
	expect_exit(&c, 0);
}

static void
child_drop_only(const void *arg)
{
	privsep_drop(arg, NOBODY, NOBODY, 0);
	_exit(0);
}

/* A chroot that is not root's alone is refused before anything changes. */
static void
test_drop_refuses_unsafe_dir(void **state)
{
	static const struct {
		mode_t mode;
		uid_t owner;
		const char *msg;
	} cases[] = {
	    {0757, 0, "writable by group or others"},
	    {0775, 0, "writable by group or others"},
	    {01777, 0, "writable by group or others"},
	    {0755, NOBODY, "not root"},
	};
	static struct child c;
	char dir[64];
	size_t i;

	if (!need_root())
		skip();
	for (i = 0; i < nitems(cases); i++) {
		make_chroot(dir, sizeof(dir));
		assert_int_equal(chmod(dir, cases[i].mode), 0);
		assert_int_equal(chown(dir, cases[i].owner, 0), 0);
		run_child(child_drop_only, dir, &c);
		remove_tmpdir(dir, chroot_files);
		expect_exit(&c, 1);
		expect_stderr(&c, cases[i].msg);
	}
}

/* ... and so is one below a directory others may write to (not sticky). */
static void
test_drop_refuses_unsafe_parent(void **state)
{
	static struct child c;
	char dir[64], sub[80];

	if (!need_root())
		skip();
	make_tmpdir(dir, sizeof(dir));
	snprintf(sub, sizeof(sub), "%s/root", dir);
	assert_int_equal(mkdir(sub, 0755), 0);
	assert_int_equal(chmod(dir, 0777), 0);
	run_child(child_drop_only, sub, &c);
	assert_int_equal(rmdir(sub), 0);
	assert_int_equal(rmdir(dir), 0);
	expect_exit(&c, 1);
	expect_stderr(&c, "writable by group or others");
}

static void
child_drop_to_root(const void *arg)
{
	privsep_drop(arg, 0, 0, 0);
}

static void
test_drop_refuses_root(void **state)
{
	static struct child c;
	char dir[64];

	make_chroot(dir, sizeof(dir));
	run_child(child_drop_to_root, dir, &c);
	remove_tmpdir(dir, chroot_files);
	expect_exit(&c, 1);
	expect_stderr(&c, "refusing to run as uid 0");
}

static void
child_devmode(const void *arg)
{
	char before[PATH_MAX], after[PATH_MAX];
	uid_t uid = getuid();

	CHECK(getcwd(before, sizeof(before)) != NULL);
	privsep_drop(arg, NOBODY, NOBODY, 1);
	privsep_drop(arg, NOBODY, NOBODY, 1); /* warns only once */
	CHECK(getcwd(after, sizeof(after)) != NULL && strcmp(before, after) == 0);
	CHECK(getuid() == uid && geteuid() == uid);
	CHECK(prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1);
	CHECK(prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0);
	CHECK(privsep_caps_empty());
}

static void
test_drop_devmode(void **state)
{
	static struct child c;
	const char *msg = "development mode: not dropping privileges";
	char dir[64];

	make_chroot(dir, sizeof(dir));
	run_child(child_devmode, dir, &c);
	remove_tmpdir(dir, chroot_files);
	expect_exit(&c, 0);
	expect_stderr(&c, msg);
	if (strstr(strstr(c.err, msg) + 1, msg) != NULL)
		fail_msg("the development-mode warning was logged twice:\n%s", c.err);
}

/* The production order end to end: drop, limits, filter, then real work. */
static void
child_full_setup(const void *arg)
{
	struct wl w;

	memset(&w, 0, sizeof(w));
	privsep_drop(arg, NOBODY, NOBODY, 0);
	privsep_rlimits(ROLE_ENGINE);
	privsep_seccomp(ROLE_ENGINE, 0);
	wl_event_loop(&w);
	event_base_free(w.base);
	wl_libc();
}

static void
test_full_setup(void **state)
{
	static struct child c;
	char dir[64];

	if (!need_root())
		skip();
	make_chroot(dir, sizeof(dir));
	run_child(child_full_setup, dir, &c);
	remove_tmpdir(dir, chroot_files);
	expect_exit(&c, 0);
}

/* ---- resource limits -------------------------------------------------- */

static void
check_limit(int res, rlim_t want)
{
	struct rlimit rl;

	CHECK(getrlimit(res, &rl) == 0);
	CHECK(rl.rlim_cur == want && rl.rlim_max == want);
}

static rlim_t
hard_nofile(void)
{
	struct rlimit rl;

	CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
	return rl.rlim_max;
}

static void
child_rlimits_engine(const void *arg)
{
	rlim_t hard = hard_nofile();
	struct rlimit nproc;

	CHECK(getrlimit(RLIMIT_NPROC, &nproc) == 0);
	privsep_rlimits(ROLE_ENGINE);
	check_limit(RLIMIT_CORE, 0);
	check_limit(RLIMIT_NOFILE, hard < 1024 ? hard : 1024);
#ifdef AGRIPPA_SANITIZE
	check_limit(RLIMIT_NPROC, nproc.rlim_max); /* left for LeakSanitizer's tracer */
#else
	check_limit(RLIMIT_NPROC, 0);
#endif
}

/* httpd wants 65536 descriptors but never more than the hard limit. */
static void
child_rlimits_httpd(const void *arg)
{
	rlim_t hard = hard_nofile();
	struct rlimit rl = {4096, 4096};

	privsep_rlimits(ROLE_HTTPD);
	check_limit(RLIMIT_NOFILE, hard < 65536 ? hard : 65536);
	CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
	privsep_rlimits(ROLE_HTTPD);
	check_limit(RLIMIT_NOFILE, 4096);
}

/* proxy keeps RLIMIT_NPROC (threads); the runner gets 256 descriptors and
 * no new task; roles without a policy (the git helper) only RLIMIT_CORE. */
static void
child_rlimits_others(const void *arg)
{
	struct rlimit nproc, nofile;
	rlim_t hard = hard_nofile();

	CHECK(getrlimit(RLIMIT_NPROC, &nproc) == 0 && getrlimit(RLIMIT_NOFILE, &nofile) == 0);
	privsep_rlimits(ROLE_GITHELPER);
	check_limit(RLIMIT_CORE, 0);
	check_limit(RLIMIT_NOFILE, nofile.rlim_max);
	privsep_rlimits(ROLE_PROXY);
	check_limit(RLIMIT_NPROC, nproc.rlim_max);
	privsep_rlimits(ROLE_RUNNER);
	check_limit(RLIMIT_NOFILE, hard < 256 ? hard : 256);
#ifndef AGRIPPA_SANITIZE
	check_limit(RLIMIT_NPROC, 0);
#endif
}

static void
test_rlimits(void **state)
{
	static struct child c;

	run_child(child_rlimits_engine, NULL, &c);
	expect_exit(&c, 0);
	run_child(child_rlimits_httpd, NULL, &c);
	expect_exit(&c, 0);
	run_child(child_rlimits_others, NULL, &c);
	expect_exit(&c, 0);
}

#ifndef AGRIPPA_SANITIZE
/* For a non-root uid, RLIMIT_NPROC 0 really stops fork(). */
static void
child_nofork(const void *arg)
{
	pid_t pid;

	privsep_drop(arg, NOBODY, NOBODY, 0);
	privsep_rlimits(ROLE_ENGINE);
	pid = fork();
	if (pid == 0)
		_exit(0);
	CHECK(pid == -1 && errno == EAGAIN);
}

static void
test_rlimits_nofork(void **state)
{
	static struct child c;
	char dir[64];

	if (!need_root())
		skip();
	make_chroot(dir, sizeof(dir));
	run_child(child_nofork, dir, &c);
	remove_tmpdir(dir, chroot_files);
	expect_exit(&c, 0);
}
#endif

/* ---- main ------------------------------------------------------------- */

#define MAX_TESTS 160

static struct CMUnitTest tests[MAX_TESTS];
static size_t ntests;
static struct probe_case probe_cases[nitems(probes) * 3];

static void
add_test(const char *name, CMUnitTestFunction fn, const void *state)
{
	if (ntests == MAX_TESTS)
		abort();
	tests[ntests].name = name;
	tests[ntests].test_func = fn;
	tests[ntests].initial_state = (void *)(uintptr_t)state;
	ntests++;
}

static void
add_probe_tests(void)
{
	static const struct {
		enum ipc_role role;
		const char *name;
	} roles[] = {{ROLE_ENGINE, "engine"}, {ROLE_HTTPD, "httpd"}, {ROLE_PROXY, "proxy"}};
	size_t r, p, n = 0;

	for (r = 0; r < nitems(roles); r++)
		for (p = 0; p < nitems(probes); p++) {
			if (!(probes[p].roles & ROLE_BIT(roles[r].role)))
				continue;
			probe_cases[n].role = roles[r].role;
			probe_cases[n].probe = &probes[p];
			snprintf(probe_cases[n].name, sizeof(probe_cases[n].name),
			         "seccomp_%s_kills_%s", roles[r].name, probes[p].name);
			add_test(probe_cases[n].name, test_probe, &probe_cases[n]);
			n++;
		}
}

int
main(void)
{
	fault_handlers_save();
	add_test("lookup_user", test_lookup_user, NULL);
	add_test("nodump", test_nodump, NULL);
	add_test("caps_clear", test_caps_clear, NULL);
	add_test("seccomp_engine_workload", test_workload, &role_engine);
	add_test("seccomp_httpd_workload", test_workload, &role_httpd);
	add_test("seccomp_proxy_workload", test_workload, &role_proxy);
	add_probe_tests();
	add_test("seccomp_proxy_clone3_enosys", test_proxy_clone3_enosys, NULL);
#if defined(__x86_64__)
	add_test("seccomp_kills_i386_syscall", test_i386_syscall, NULL);
#endif
	add_test("seccomp_debug_names_syscall", test_debug_names_syscall, NULL);
	add_test("seccomp_no_policy", test_no_policy, NULL);
#ifdef AGRIPPA_SANITIZE
	add_test("seccomp_asan_report", test_asan_report_survives_filter, NULL);
	add_test("seccomp_asan_segv", test_asan_segv_survives_filter, NULL);
	add_test("seccomp_lsan_at_exit", test_lsan_survives_filter, NULL);
#endif
	add_test("drop", test_drop, NULL);
	add_test("drop_refuses_unsafe_dir", test_drop_refuses_unsafe_dir, NULL);
	add_test("drop_refuses_unsafe_parent", test_drop_refuses_unsafe_parent, NULL);
	add_test("drop_refuses_root", test_drop_refuses_root, NULL);
	add_test("drop_devmode", test_drop_devmode, NULL);
	add_test("full_setup", test_full_setup, NULL);
	add_test("rlimits", test_rlimits, NULL);
#ifndef AGRIPPA_SANITIZE
	add_test("rlimits_nofork", test_rlimits_nofork, NULL);
#endif
	return _cmocka_run_group_tests("privsep", tests, ntests, NULL, NULL);
}
