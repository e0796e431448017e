/*
 * sandbox CTLSOCK WORKDIR [N]: what a sandbox costs, beside bubblewrap, in
 * one run.
 *
 *   start    a new sandbox per sample, driven like agrippactl does: the
 *            "sandbox rw WORKDIR" control request -> CTL_SANDBOX (+ fd) ->
 *            SBX_READY on that fd ("ready"), then one SBX_EXEC of /bin/true
 *            until its SBX_EXIT ("ready+exec").  Then both fds are closed
 *            and the supervisor's "sandbox ... ended" notice awaited
 *            ("teardown"), so samples never overlap.  R samples,
 *            R = max(20, N/20).
 *   bwrap    fork + exec of bwrap (every namespace, /usr read-only, the
 *            top-level links into /usr recreated, /proc, /dev, a /tmp,
 *            WORKDIR bound at /workspace) running /bin/true, and waitpid.
 *            Interleaved with "start" so machine noise hits both alike.
 *   exec     SBX_EXEC of /bin/true through one running sandbox, N times.
 *   read     SBX_READ of the 4096-byte WORKDIR/bench-4k.bin, N times.
 *
 * Every reply is checked (type, id, code, sizes, bytes); any surprise is
 * fatal with exit status 1.  Missed targets are reported, not fatal.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctl/ctl.h"
#include "ipc/ipc.h"
#include "ipc/ipc_msg.h"

#define BENCH_FILE "bench-4k.bin"
#define BENCH_FILE_SIZE 4096
#define BENCH_TIMEOUT_MS 30000
#define BENCH_WARMUP 100
#define BENCH_CTL_ID 1
#define READ_TARGET_US 100.0

struct stats {
	double median, p99, min;
};

/* The bytes of bench-4k.bin, to check every read against. */
static uint8_t file_bytes[BENCH_FILE_SIZE];
static uint64_t next_id = 1;

__attribute__((noreturn, format(printf, 1, 2))) static void
die(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "bench sandbox: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static double
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Sorts v in place; scale divides the figures (1 for us, 1000 for ms). */
static struct stats
report(const char *name, double *v, int n, double scale, const char *unit)
{
	struct stats s;

	qsort(v, (size_t)n, sizeof(double), cmp_double);
	s.median = v[n / 2];
	s.p99 = v[(int)(n * 0.99)];
	s.min = v[0];
	printf("  %-22s n=%-5d median %8.2f %s  p99 %8.2f %s  min %8.2f %s\n", name, n,
	    s.median / scale, unit, s.p99 / scale, unit, s.min / scale, unit);
	return s;
}

static void
send_frame(int fd, struct ipc_wbuf *w, const char *what)
{
	if (ipc_wbuf_finish(w, IPC_MAX_FRAME_DEFAULT) == -1 || ipc_write_frame(fd, w, -1) == -1)
		die("cannot send %s: %s", what, errno ? strerror(errno) : "too large");
	ipc_wbuf_free(w);
}

/* One frame from the sandbox, checked against the catalog; the caller frees m. */
static void
sbx_recv(int sbx, struct ipc_msg *m, const char *waiting_for)
{
	const char *err = NULL;

	if (ipc_read_frame(sbx, ROLE_CTL, ROLE_SANDBOX, IPC_MAX_FRAME_DEFAULT, BENCH_TIMEOUT_MS, m,
		&err) == -1)
		die("waiting for %s from the sandbox: %s", waiting_for, err);
}

/* Sends "sandbox rw WORKDIR"; returns the sandbox channel or dies. */
static int
ctl_sandbox_request(int ctl, const char *workdir)
{
	char id[IPC_SBX_ID_MAX + 1];
	struct ipc_ctl_reply rep;
	struct ipc_wbuf w;
	struct ipc_msg m;
	const char *err = NULL;
	int fd;

	ipc_wbuf_begin(&w, IMSG_CTL_REQUEST, BENCH_CTL_ID, 2);
	ipc_put_str(&w, "sandbox");
	ipc_put_array(&w, 2);
	ipc_put_str(&w, "rw");
	ipc_put_str(&w, workdir);
	send_frame(ctl, &w, "the control request");
	if (ipc_read_frame(ctl, ROLE_CTL, ROLE_SUPERVISOR, CTL_MAX_FRAME, BENCH_TIMEOUT_MS, &m,
		&err) == -1)
		die("no valid reply from the daemon: %s", err);
	if (m.type == IMSG_CTL_REPLY && ipc_dec_ctl_reply(m.body, &rep) == 0)
		die("the daemon refused the sandbox: %.*s", (int)rep.msglen, rep.message);
	if (m.type != IMSG_CTL_SANDBOX || m.id != BENCH_CTL_ID || m.fd < 0 ||
	    ipc_dec_ctl_sandbox(m.body, id, sizeof(id)) == -1)
		die("unexpected %s (id %llu) from the daemon", ipc_msg_name(m.type),
		    (unsigned long long)m.id);
	fd = m.fd;
	m.fd = -1;
	ipc_msg_free(&m);
	return fd;
}

static void
sbx_wait_ready(int sbx)
{
	struct ipc_ready r;
	struct ipc_msg m;

	sbx_recv(sbx, &m, "SBX_READY");
	if (m.type != IMSG_SBX_READY || m.id != 0 || ipc_dec_ready(m.body, &r) == -1)
		die("expected SBX_READY, got %s (id %llu)", ipc_msg_name(m.type),
		    (unsigned long long)m.id);
	if (r.proto != IPC_PROTO_VERSION || r.pid == 0)
		die("SBX_READY with proto %u pid %u (want proto %u)", r.proto, r.pid,
		    IPC_PROTO_VERSION);
	ipc_msg_free(&m);
}

/* SBX_EXEC of /bin/true; returns when its SBX_EXIT (status 0) arrived. */
static void
sbx_exec_true(int sbx)
{
	uint64_t id = next_id++;
	struct ipc_sbx_output o;
	struct ipc_sbx_exit x;
	struct ipc_wbuf w;
	struct ipc_msg m;

	ipc_wbuf_begin(&w, IMSG_SBX_EXEC, id, 4);
	ipc_put_bool(&w, 0);
	ipc_put_array(&w, 1);
	ipc_put_str(&w, "/bin/true");
	ipc_put_str(&w, "");
	ipc_put_u64(&w, 0);
	send_frame(sbx, &w, "SBX_EXEC");
	sbx_recv(sbx, &m, "SBX_EXIT");
	if (m.id != id)
		die("%s with id %llu, want %llu", ipc_msg_name(m.type), (unsigned long long)m.id,
		    (unsigned long long)id);
	if (m.type == IMSG_SBX_OUTPUT && ipc_dec_sbx_output(m.body, &o) == 0)
		die("/bin/true wrote %zu bytes on stream %u", o.len, o.stream);
	if (m.type != IMSG_SBX_EXIT || ipc_dec_sbx_exit(m.body, &x) == -1)
		die("expected SBX_EXIT, got %s", ipc_msg_name(m.type));
	if (x.code != 0 || x.status != 0 || x.signal != 0 || x.timed_out)
		die("/bin/true: code %u (%.*s) status %lld signal %u timed_out %d", x.code,
		    (int)x.errlen, x.error, (long long)x.status, x.signal, x.timed_out);
	ipc_msg_free(&m);
}

/* The data of a successful read: [bytes bin, size u64], all of the file. */
static void
sbx_check_read_data(const msgpack_object *data)
{
	struct ipc_cur c;
	const uint8_t *p;
	uint64_t size;
	size_t len;

	if (data->type != MSGPACK_OBJECT_ARRAY)
		die("SBX_READ result: data is not an array");
	ipc_cur_init(&c, data);
	if (ipc_get_bin(&c, &p, &len, BENCH_FILE_SIZE) == -1 || ipc_get_u64(&c, &size) == -1 ||
	    ipc_end(&c) == -1)
		die("SBX_READ result: data is not [bytes <= %d, size]", BENCH_FILE_SIZE);
	if (len != BENCH_FILE_SIZE || size != BENCH_FILE_SIZE)
		die("SBX_READ result: %zu bytes of %llu, want %d of %d", len,
		    (unsigned long long)size, BENCH_FILE_SIZE, BENCH_FILE_SIZE);
	if (memcmp(p, file_bytes, BENCH_FILE_SIZE) != 0)
		die("SBX_READ result: the bytes differ from " BENCH_FILE);
}

static void
sbx_read_4k(int sbx)
{
	uint64_t id = next_id++;
	struct ipc_sbx_result r;
	struct ipc_wbuf w;
	struct ipc_msg m;

	ipc_wbuf_begin(&w, IMSG_SBX_READ, id, 3);
	ipc_put_str(&w, BENCH_FILE);
	ipc_put_u64(&w, 0);
	ipc_put_u64(&w, BENCH_FILE_SIZE);
	send_frame(sbx, &w, "SBX_READ");
	sbx_recv(sbx, &m, "SBX_RESULT");
	if (m.type != IMSG_SBX_RESULT || m.id != id || ipc_dec_sbx_result(m.body, &r) == -1)
		die("expected SBX_RESULT id %llu, got %s id %llu", (unsigned long long)id,
		    ipc_msg_name(m.type), (unsigned long long)m.id);
	if (r.code != 0)
		die("SBX_READ " BENCH_FILE ": code %u: %.*s", r.code, (int)r.errlen, r.error);
	sbx_check_read_data(r.data);
	ipc_msg_free(&m);
}

/* After the driver hung up: the supervisor's "sandbox ... ended" notice. */
static void
ctl_wait_ended(int ctl)
{
	struct ipc_ctl_reply rep;
	struct ipc_msg m;
	const char *err = NULL;

	if (ipc_read_frame(ctl, ROLE_CTL, ROLE_SUPERVISOR, CTL_MAX_FRAME, BENCH_TIMEOUT_MS, &m,
		&err) == -1)
		die("waiting for the sandbox's end: %s", err);
	if (m.type != IMSG_CTL_REPLY || m.id != 0 || ipc_dec_ctl_reply(m.body, &rep) == -1 ||
	    rep.code != 0 || rep.msglen < 8 || memcmp(rep.message, "sandbox ", 8) != 0)
		die("expected the \"sandbox ... ended\" notice, got %s (id %llu)",
		    ipc_msg_name(m.type), (unsigned long long)m.id);
	ipc_msg_free(&m);
}

/* One sample of "start": fills ready, first (request -> first exit) and down. */
static void
bench_start_once(const char *sock, const char *workdir, double *ready, double *first,
    double *down)
{
	int ctl = ctl_connect(sock), sbx;
	double t0, t1, t2;

	t0 = now_us();
	sbx = ctl_sandbox_request(ctl, workdir);
	sbx_wait_ready(sbx);
	t1 = now_us();
	sbx_exec_true(sbx);
	t2 = now_us();
	close(sbx);
	ctl_wait_ended(ctl);
	*down = now_us() - t2;
	close(ctl);
	*ready = t1 - t0;
	*first = t2 - t0;
}

/* ---- bwrap ------------------------------------------------------------ */

#define BWRAP_MAXARGS 64
#define BWRAP_TOPDIRS 6

struct bwrap {
	const char *argv[BWRAP_MAXARGS];
	int argc;
	char links[BWRAP_TOPDIRS][PATH_MAX]; /* readlink targets */
	char paths[BWRAP_TOPDIRS][16];       /* "/bin", ... */
	int available;
};

static void
bwrap_add(struct bwrap *b, const char *a)
{
	if (b->argc >= BWRAP_MAXARGS - 1)
		die("bwrap: too many arguments");
	b->argv[b->argc++] = a;
	b->argv[b->argc] = NULL;
}

/*
 * The top-level directories that merged-/usr systems make links into /usr:
 * recreate the links that exist here, bind the ones that are real
 * directories (an unmerged layout), skip the missing.
 */
static void
bwrap_topdirs(struct bwrap *b)
{
	static const char *names[BWRAP_TOPDIRS] = { "bin", "sbin", "lib", "lib32", "lib64",
		"libx32" };
	struct stat st;
	ssize_t n;
	int i;

	for (i = 0; i < BWRAP_TOPDIRS; i++) {
		snprintf(b->paths[i], sizeof(b->paths[i]), "/%s", names[i]);
		if (lstat(b->paths[i], &st) == -1)
			continue;
		if (S_ISLNK(st.st_mode)) {
			n = readlink(b->paths[i], b->links[i], sizeof(b->links[i]) - 1);
			if (n <= 0)
				die("readlink %s: %s", b->paths[i], strerror(errno));
			b->links[i][n] = '\0';
			bwrap_add(b, "--symlink");
			bwrap_add(b, b->links[i]);
		} else if (S_ISDIR(st.st_mode)) {
			bwrap_add(b, "--ro-bind");
			bwrap_add(b, b->paths[i]);
		} else
			continue;
		bwrap_add(b, b->paths[i]);
	}
}

static void
bwrap_init(struct bwrap *b, const char *workdir)
{
	static const char *head[] = { "bwrap", "--unshare-all", "--die-with-parent",
		"--ro-bind", "/usr", "/usr" };
	static const char *tail[] = { "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp" };
	size_t i;

	memset(b, 0, sizeof(*b));
	b->available = 1;
	for (i = 0; i < sizeof(head) / sizeof(head[0]); i++)
		bwrap_add(b, head[i]);
	bwrap_topdirs(b);
	for (i = 0; i < sizeof(tail) / sizeof(tail[0]); i++)
		bwrap_add(b, tail[i]);
	bwrap_add(b, "--bind");
	bwrap_add(b, workdir);
	bwrap_add(b, "/workspace");
	bwrap_add(b, "--chdir");
	bwrap_add(b, "/workspace");
	bwrap_add(b, "/bin/true");
}

/*
 * Runs bwrap once.  Returns its wait status, or -1 with errno set when it
 * could not be executed (the child reports execvp's errno on a CLOEXEC pipe).
 */
static int
bwrap_run(const struct bwrap *b)
{
	int p[2], status, child_errno = 0;
	ssize_t n;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) == -1 || (pid = fork()) == -1)
		die("bwrap: pipe/fork: %s", strerror(errno));
	if (pid == 0) {
		close(p[0]);
		execvp(b->argv[0], (char *const *)(uintptr_t)b->argv);
		child_errno = errno;
		(void)!write(p[1], &child_errno, sizeof(child_errno));
		_exit(127);
	}
	close(p[1]);
	while ((n = read(p[0], &child_errno, sizeof(child_errno))) == -1 && errno == EINTR)
		;
	close(p[0]);
	while (waitpid(pid, &status, 0) == -1)
		if (errno != EINTR)
			die("bwrap: waitpid: %s", strerror(errno));
	if (n == (ssize_t)sizeof(child_errno)) {
		errno = child_errno;
		return -1;
	}
	return status;
}

/* One sample of bwrap; on the first failure, says why and disables it. */
static void
bench_bwrap_once(struct bwrap *b, double *v, int i)
{
	double t = now_us();
	int status = bwrap_run(b);

	v[i] = now_us() - t;
	if (status == 0)
		return;
	if (status == -1 && errno == ENOENT)
		printf("bwrap: not installed (apt-get install bubblewrap)\n");
	else if (status == -1)
		printf("bwrap: cannot run it: %s; comparison skipped\n", strerror(errno));
	else
		printf("bwrap: exited with wait status %d; comparison skipped\n", status);
	if (i > 0)
		die("bwrap failed after %d good runs", i);
	b->available = 0;
}

/* ---- the per-call round trips ------------------------------------------ */

static void
bench_calls(const char *sock, const char *workdir, double *ex, double *rd, int n)
{
	int ctl = ctl_connect(sock), sbx, i;
	double t;

	sbx = ctl_sandbox_request(ctl, workdir);
	sbx_wait_ready(sbx);
	for (i = 0; i < BENCH_WARMUP; i++) {
		sbx_exec_true(sbx);
		sbx_read_4k(sbx);
	}
	for (i = 0; i < n; i++) {
		t = now_us();
		sbx_exec_true(sbx);
		ex[i] = now_us() - t;
	}
	for (i = 0; i < n; i++) {
		t = now_us();
		sbx_read_4k(sbx);
		rd[i] = now_us() - t;
	}
	close(sbx);
	ctl_wait_ended(ctl);
	close(ctl);
}

/* WORKDIR/bench-4k.bin, readable by the sandbox user. */
static void
write_bench_file(const char *workdir)
{
	char path[PATH_MAX];
	size_t i;
	int fd;

	for (i = 0; i < sizeof(file_bytes); i++)
		file_bytes[i] = (uint8_t)(i * 131u + 7u);
	if (snprintf(path, sizeof(path), "%s/%s", workdir, BENCH_FILE) >= (int)sizeof(path))
		die("%s: path too long", workdir);
	if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644)) == -1 ||
	    fchmod(fd, 0644) == -1 ||
	    write(fd, file_bytes, sizeof(file_bytes)) != (ssize_t)sizeof(file_bytes) ||
	    close(fd) == -1)
		die("%s: %s", path, strerror(errno));
}

static void
verdicts(struct stats first, struct stats ready, const struct stats *bw, struct stats rd)
{
	if (bw != NULL) {
		printf("  ratio ready+exec/bwrap: %.2f   ready/bwrap: %.2f (medians)\n",
		    first.median / bw->median, ready.median / bw->median);
		printf("  target \"new sandbox ready no slower than bwrap starting /bin/true\" "
		       "(ready+exec median <= bwrap median): %s\n",
		    first.median <= bw->median ? "holds" : "MISSED");
	} else
		printf("  target \"new sandbox ready no slower than bwrap\": not compared (no "
		       "bwrap)\n");
	printf("  target \"4 KiB read round trip under 100 us\" (median %.1f us, p99 %.1f us): "
	       "%s\n",
	    rd.median, rd.p99, rd.median < READ_TARGET_US ? "holds" : "MISSED");
}

int
main(int argc, char *argv[])
{
	char workdir[PATH_MAX];
	struct stats ready, first, rd, bw = { 0, 0, 0 };
	double *v_ready, *v_first, *v_down, *v_bw, *v_ex, *v_rd;
	struct bwrap b;
	int n = 1000, r, i;

	if (argc < 3 || argc > 4) {
		fprintf(stderr, "usage: sandbox CTLSOCK WORKDIR [N]\n");
		return 2;
	}
	if (argc > 3 && (n = atoi(argv[3])) < 100)
		n = 100;
	r = n / 20 < 20 ? 20 : n / 20;
	if (realpath(argv[2], workdir) == NULL)
		die("%s: %s", argv[2], strerror(errno));
	signal(SIGPIPE, SIG_IGN);
	write_bench_file(workdir);
	bwrap_init(&b, workdir);
	v_ready = calloc((size_t)r, sizeof(double));
	v_first = calloc((size_t)r, sizeof(double));
	v_down = calloc((size_t)r, sizeof(double));
	v_bw = calloc((size_t)r, sizeof(double));
	v_ex = calloc((size_t)n, sizeof(double));
	v_rd = calloc((size_t)n, sizeof(double));
	if (!v_ready || !v_first || !v_down || !v_bw || !v_ex || !v_rd)
		die("out of memory");

	/* One untimed round of each, so page cache and dentries are warm. */
	bench_start_once(argv[1], workdir, &v_ready[0], &v_first[0], &v_down[0]);
	bench_bwrap_once(&b, v_bw, 0);
	for (i = 0; i < r; i++) {
		bench_start_once(argv[1], workdir, &v_ready[i], &v_first[i], &v_down[i]);
		if (b.available)
			bench_bwrap_once(&b, v_bw, i);
	}
	bench_calls(argv[1], workdir, v_ex, v_rd, n);

	printf("  start-up (new sandbox per sample, interleaved with bwrap):\n");
	ready = report("request -> READY", v_ready, r, 1000, "ms");
	first = report("ready + first exec", v_first, r, 1000, "ms");
	report("teardown", v_down, r, 1000, "ms");
	if (b.available)
		bw = report("bwrap /bin/true", v_bw, r, 1000, "ms");
	printf("  per call, one running sandbox:\n");
	report("exec /bin/true", v_ex, n, 1, "us");
	rd = report("read 4 KiB", v_rd, n, 1, "us");
	verdicts(first, ready, b.available ? &bw : NULL, rd);
	free(v_ready);
	free(v_first);
	free(v_down);
	free(v_bw);
	free(v_ex);
	free(v_rd);
	return 0;
}
