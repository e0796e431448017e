/*
 * Per-run sandboxes, built by the supervisor (DESIGN.md section 4).
 *
 * clone() with new user, mount, pid, net, ipc and uts namespaces (and a new
 * cgroup namespace once the child sits in its own cgroup); the uid/gid maps
 * put the sandbox user (1000 inside) on an id that owns nothing on the host
 * (sandbox.uid/gid; in development mode the only id an unprivileged user may
 * map, its own).  The child builds a fresh tmpfs root: read-only /usr and
 * the /bin, /sbin, /lib* entries of the host (as the same symlinks on a
 * merged-/usr system), a generated /etc, the workspace at /workspace, a
 * size-capped /tmp, a new /proc, a minimal /dev, and for a run on a
 * repository its mirror's objects, read-only, at /mirror/objects (where the
 * workspace's .git/objects/info/alternates points); pivot_root detaches the
 * old root.  It drops every capability, takes the sandbox user, sets rlimits and
 * no_new_privs and execs agrippa-sandbox (the tool server), whose first act after
 * reading its configuration is the seccomp filter.
 *
 * The supervisor never reads the sandbox's channel: it writes SBX_HELLO and
 * hands the other end to the sandbox's driver.  It keeps a pidfd of the
 * sandbox's pid 1; killing that kills the whole pid namespace, and the child
 * also dies with the supervisor (PR_SET_PDEATHSIG).
 */
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/fsuid.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <grp.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <linux/capability.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "runner/mcp.h"
#include "supervisor/sbx.h"
#include "supervisor/supervisor.h"

#define SBX_MAX_ALL 1024         /* sandbox.max's upper bound */
#define SBX_BUILD_TIMEOUT_MS 10000
#define SBX_INNER_ID 1000        /* the sandbox user's uid and gid inside */
#define SBX_NEWROOT "/tmp"       /* mount point of the new root, in the child's namespace */
#define SBX_EGRESS_PORT 3128     /* where the proxy variables point (sandbox/exec.c) */
#define SBX_MCP_SECRETS_MAX 64   /* an MCP server's values to redact (sandbox/relay.h) */
#define SBX_MCP_SECRET_MAX 8192

struct sbx {
	char id[IPC_SBX_ID_MAX + 1];
	pid_t pid;
	int pidfd;
	int drv;              /* the driver's end of the channel, until handed over */
	int go;               /* write end: the launch, once the workspace is known */
	int errr;             /* read end: the child's failure reason, EOF at exec */
	int lis;              /* the listener it made for egress, until taken; or -1 */
	int mcp;              /* an MCP server's sandbox: no hello on its channel */
	int serr;             /* an MCP server's stderr (read end), until taken; or -1 */
	struct event *stop_ev; /* sbx_stop: SIGTERM, then SIGKILL */
	int stop_stage;
	unsigned grace_ms;
	char fresh[PATH_MAX]; /* a workspace made for this sandbox, removed at the end */
	struct sbx_cgroup cg;
	sbx_done_cb done;
	void *arg;
};

static struct sbx *sbxs[SBX_MAX_ALL];

/* What the child needs, prepared before clone (the child only makes syscalls). */
/*
 * What the child learns at launch, through its go socket.  In root mode the
 * workspace, its .agrippa/artifacts (access: readOnly) and the mirror's
 * objects come as detached mounts the supervisor cloned (open_tree) with
 * their flags set, passed with the launch in that order: the child was
 * prepared before they were known, so a filesystem mounted since (a run's
 * own disk) is not in its copy of the mount table, and it may not walk the
 * service user's 0700 directories.  In development mode, where the child is
 * the daemon's own user and no filesystem is mounted for a run, it gets
 * them by path and identity and reopens them in its own mount namespace.
 */
struct sbx_launch {
	int readonly;
	int has_art; /* readOnly: .agrippa/artifacts is bound writable */
	int has_objs; /* a run's mirror: its objects at /mirror/objects */
	int network;  /* listen for egress on 127.0.0.1:3128, pass the socket back */
	dev_t ws_dev, art_dev, objs_dev;
	ino_t ws_ino, art_ino, objs_ino;
	char ws_path[PATH_MAX];
	char objs_path[PATH_MAX]; /* development mode */
};

struct sbx_child {
	int chan;     /* the sandbox's end of its channel */
	int go;       /* read end: the launch, once the maps are written */
	int errw;     /* write end: a failure reason, or EOF at exec */
	int bin;      /* O_PATH descriptor of our own executable */
	int ws;       /* in the child: O_PATH descriptor of the workspace */
	int art;      /* in the child: of .agrippa/artifacts (readOnly), or -1 */
	int objs;     /* in the child: the mirror's objects (a mount or O_PATH), or -1 */
	int parent[4]; /* the supervisor's ends of the above, closed first (or -1) */
	int serrw;    /* an MCP server: write end of its stderr pipe, or -1 */
	int cg[CG_NCTL]; /* its cgroups' cgroup.procs, opened by the supervisor, or -1 */
	const struct sbx_mcp *mcp; /* an MCP server's sandbox, or NULL */
	char **xargv, **xenv; /* an MCP server: the tool server's argv and environment */
	char linemax[24];     /* an MCP server: its line cap, the relay's argument */
	int devmode;
	const struct conf_sandbox *lim;
	struct sbx_launch l;
};

static void
sbx_close_all(const int *fds, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (fds[i] != -1)
			close(fds[i]);
}

/* ---- the child, between clone and execve --------------------------------- */

/* Report why building failed and exit.  Only async-signal-safe calls. */
__attribute__((noreturn)) static void
sbx_fail(const struct sbx_child *c, const char *what, int err)
{
	char buf[256];
	size_t n = 0;
	const char *s = strerror(err);

	while (*what && n < sizeof(buf) - 64)
		buf[n++] = *what++;
	buf[n++] = ':';
	buf[n++] = ' ';
	while (*s && n < sizeof(buf) - 1)
		buf[n++] = *s++;
	(void)!write(c->errw, buf, n);
	_exit(125);
}

static void
sbx_mkdir(const struct sbx_child *c, const char *path, mode_t mode)
{
	if (mkdir(path, mode) == -1 && errno != EEXIST)
		sbx_fail(c, path, errno);
}

static void
sbx_file(const struct sbx_child *c, const char *path, const char *content, mode_t mode)
{
	size_t len = strlen(content);
	int fd;

	if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)) == -1)
		sbx_fail(c, path, errno);
	if (write(fd, content, len) != (ssize_t)len)
		sbx_fail(c, path, errno);
	close(fd);
}

/*
 * Bind src on dst and remount it with extra flags.  A bind remount must
 * keep the flags the kernel locked on mounts inherited from the host (atime,
 * nosuid, ...), so the current ones are read back and kept.
 */
static void
sbx_bind(const struct sbx_child *c, const char *src, const char *dst, unsigned long extra)
{
	struct statvfs sv;
	unsigned long keep = 0;

	if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) == -1)
		sbx_fail(c, dst, errno);
	if (statvfs(dst, &sv) == -1)
		sbx_fail(c, dst, errno);
	keep |= (sv.f_flag & ST_NOSUID) ? MS_NOSUID : 0;
	keep |= (sv.f_flag & ST_NODEV) ? MS_NODEV : 0;
	keep |= (sv.f_flag & ST_NOEXEC) ? MS_NOEXEC : 0;
	keep |= (sv.f_flag & ST_NOATIME) ? MS_NOATIME : 0;
	keep |= (sv.f_flag & ST_NODIRATIME) ? MS_NODIRATIME : 0;
	keep |= (sv.f_flag & ST_RELATIME) ? MS_RELATIME : 0;
	keep |= (sv.f_flag & ST_RDONLY) ? MS_RDONLY : 0;
	if (mount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | keep | extra, NULL) == -1)
		sbx_fail(c, dst, errno);
}

/* /usr, and /bin, /sbin, /lib* as on the host: a symlink stays a symlink
 * (merged /usr), a directory is bound read-only. */
static void
sbx_mount_system(const struct sbx_child *c)
{
	static const char *const dirs[] = { "usr", "bin", "sbin", "lib", "lib32", "lib64",
		"libx32" };
	char src[64], dst[64], link[256];
	struct stat st;
	ssize_t n;
	size_t i;

	for (i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(src, sizeof(src), "/%s", dirs[i]);
		snprintf(dst, sizeof(dst), SBX_NEWROOT "/%s", dirs[i]);
		if (lstat(src, &st) == -1)
			continue;
		if (S_ISLNK(st.st_mode)) {
			if ((n = readlink(src, link, sizeof(link) - 1)) <= 0)
				sbx_fail(c, src, errno);
			link[n] = '\0';
			if (symlink(link, dst) == -1)
				sbx_fail(c, dst, errno);
		} else if (S_ISDIR(st.st_mode)) {
			sbx_mkdir(c, dst, 0755);
			sbx_bind(c, src, dst, MS_RDONLY | MS_NOSUID | MS_NODEV);
		}
	}
}

/* A minimal /etc: the sandbox user, a host name, no resolver.  The loader
 * cache and Debian's alternatives (cc, awk, editor...) come read-only. */
static void
sbx_mount_etc(const struct sbx_child *c)
{
	char link[256];
	ssize_t n;

	sbx_mkdir(c, SBX_NEWROOT "/etc", 0755);
	sbx_file(c, SBX_NEWROOT "/etc/passwd",
	    "root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n"
	    "sandbox:x:1000:1000:sandbox:/workspace:/bin/sh\n"
	    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n", 0644);
	sbx_file(c, SBX_NEWROOT "/etc/group",
	    "root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n", 0644);
	sbx_file(c, SBX_NEWROOT "/etc/hostname", "sandbox\n", 0644);
	sbx_file(c, SBX_NEWROOT "/etc/hosts", "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost\n",
	    0644);
	sbx_file(c, SBX_NEWROOT "/etc/nsswitch.conf",
	    "passwd: files\ngroup: files\nhosts: files\n", 0644);
	if (access("/etc/ld.so.cache", F_OK) == 0) {
		sbx_file(c, SBX_NEWROOT "/etc/ld.so.cache", "", 0644);
		sbx_bind(c, "/etc/ld.so.cache", SBX_NEWROOT "/etc/ld.so.cache",
		    MS_RDONLY | MS_NOSUID | MS_NODEV);
	}
	if (access("/etc/alternatives", F_OK) == 0) {
		sbx_mkdir(c, SBX_NEWROOT "/etc/alternatives", 0755);
		sbx_bind(c, "/etc/alternatives", SBX_NEWROOT "/etc/alternatives",
		    MS_RDONLY | MS_NOSUID | MS_NODEV);
	}
	if ((n = readlink("/etc/localtime", link, sizeof(link) - 1)) > 0) {
		link[n] = '\0';
		if (symlink(link, SBX_NEWROOT "/etc/localtime") == -1)
			sbx_fail(c, "/etc/localtime", errno);
	}
}

/*
 * A bind source must be a mount of the child's own namespace, so the
 * descriptors the supervisor opened (in its namespace) are reopened here by
 * path, with no symlink allowed anywhere on it, and must be the very same
 * directories (device and inode) the supervisor checked.
 */
static int
sbx_reopen(const struct sbx_child *c, int dirfd, const char *path, dev_t dev, ino_t ino)
{
	struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
	struct stat st;
	int fd;

	if (dirfd != AT_FDCWD)
		how.resolve |= RESOLVE_BENEATH;
	if ((fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how))) == -1)
		sbx_fail(c, "reopen the workspace", errno);
	if (fstat(fd, &st) == -1 || st.st_dev != dev || st.st_ino != ino)
		sbx_fail(c, "the workspace changed while the sandbox was built", ESTALE);
	return fd;
}

static void
sbx_fdpath(char *buf, size_t sz, int fd)
{
	snprintf(buf, sz, "/proc/self/fd/%d", fd);
}

/* Attach the detached mount fd (root mode) at dst. */
static void
sbx_attach(const struct sbx_child *c, int fd, const char *dst)
{
	if (syscall(SYS_move_mount, fd, "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH) == -1)
		sbx_fail(c, dst, errno);
}

/* The workspace (through the descriptor the supervisor opened, never a
 * path), read-only except .agrippa/artifacts for access: readOnly. */
static void
sbx_mount_workspace(const struct sbx_child *c)
{
	char src[64];
	unsigned long fl = MS_NOSUID | MS_NODEV;

	sbx_mkdir(c, SBX_NEWROOT "/workspace", 0755);
	if (!c->devmode) {
		sbx_attach(c, c->ws, SBX_NEWROOT "/workspace");
		if (c->art >= 0)
			sbx_attach(c, c->art, SBX_NEWROOT "/workspace/" ".agrippa/artifacts");
		return;
	}
	sbx_fdpath(src, sizeof(src), c->ws);
	sbx_bind(c, src, SBX_NEWROOT "/workspace", fl | (c->l.readonly ? MS_RDONLY : 0));
	if (c->art >= 0) {
		sbx_fdpath(src, sizeof(src), c->art);
		sbx_bind(c, src, SBX_NEWROOT "/workspace/" ".agrippa/artifacts", fl);
	}
}

/* The mirror's objects at /mirror/objects, read-only: the detached mount
 * the supervisor made is attached (root mode), or the directory reopened
 * here is bound (development mode). */
static void
sbx_mount_objects(const struct sbx_child *c)
{
	static const char dst[] = SBX_NEWROOT "/mirror/objects";
	char src[64];

	if (c->objs < 0)
		return;
	sbx_mkdir(c, SBX_NEWROOT "/mirror", 0755);
	sbx_mkdir(c, dst, 0755);
	if (!c->devmode) {
		sbx_attach(c, c->objs, dst);
		return;
	}
	sbx_fdpath(src, sizeof(src), c->objs);
	sbx_bind(c, src, dst, MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC);
}

static void
sbx_tmpfs(const struct sbx_child *c, const char *dst, const char *opts, unsigned long fl)
{
	sbx_mkdir(c, dst, 0755);
	if (mount("tmpfs", dst, "tmpfs", fl, opts) == -1)
		sbx_fail(c, dst, errno);
}

/* /dev: the harmless character devices bound from the host, a private
 * devpts instance, /dev/shm, and the usual symlinks. */
static void
sbx_mount_dev(const struct sbx_child *c, const char *shmopts)
{
	static const char *const devs[] = { "null", "zero", "full", "random", "urandom", "tty" };
	char src[32], dst[64];
	size_t i;
	int fd;

	sbx_tmpfs(c, SBX_NEWROOT "/dev", "mode=0755,size=64k,nr_inodes=64", MS_NOSUID | MS_NOEXEC);
	for (i = 0; i < sizeof(devs) / sizeof(devs[0]); i++) {
		snprintf(src, sizeof(src), "/dev/%s", devs[i]);
		snprintf(dst, sizeof(dst), SBX_NEWROOT "/dev/%s", devs[i]);
		if ((fd = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666)) == -1)
			sbx_fail(c, dst, errno);
		close(fd);
		if (mount(src, dst, NULL, MS_BIND, NULL) == -1)
			sbx_fail(c, dst, errno);
	}
	sbx_mkdir(c, SBX_NEWROOT "/dev/pts", 0755);
	if (mount("devpts", SBX_NEWROOT "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
		"newinstance,ptmxmode=0666,mode=0620") == -1)
		sbx_fail(c, "/dev/pts", errno);
	if (symlink("pts/ptmx", SBX_NEWROOT "/dev/ptmx") == -1 ||
	    symlink("/proc/self/fd", SBX_NEWROOT "/dev/fd") == -1 ||
	    symlink("/proc/self/fd/0", SBX_NEWROOT "/dev/stdin") == -1 ||
	    symlink("/proc/self/fd/1", SBX_NEWROOT "/dev/stdout") == -1 ||
	    symlink("/proc/self/fd/2", SBX_NEWROOT "/dev/stderr") == -1)
		sbx_fail(c, "/dev symlinks", errno);
	sbx_tmpfs(c, SBX_NEWROOT "/dev/shm", shmopts, MS_NOSUID | MS_NODEV);
	if (mount(NULL, SBX_NEWROOT "/dev", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID |
		MS_NOEXEC, NULL) == -1)
		sbx_fail(c, "/dev read-only", errno);
}

/* Whether path is /usr or one of the host's /bin, /sbin, /lib* (or below),
 * which every sandbox sees read-only already. */
static int
sbx_in_system(const char *path)
{
	static const char *const dirs[] = { "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64",
		"/libx32" };
	size_t i, n;

	for (i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		n = strlen(dirs[i]);
		if (strncmp(path, dirs[i], n) == 0 && (path[n] == '\0' || path[n] == '/'))
			return 1;
	}
	return 0;
}

/* An MCP server's paths, read-only at the same place in the new root (its
 * directories made on the way); one under /usr or /lib* is there already. */
static void
sbx_mount_paths(const struct sbx_child *c)
{
	char dst[PATH_MAX + sizeof(SBX_NEWROOT)], *p;
	size_t i;

	for (i = 0; c->mcp != NULL && i < c->mcp->npaths; i++) {
		if (sbx_in_system(c->mcp->paths[i]))
			continue;
		if ((size_t)snprintf(dst, sizeof(dst), SBX_NEWROOT "%s", c->mcp->paths[i]) >=
		    sizeof(dst))
			sbx_fail(c, "a path of the MCP server", ENAMETOOLONG);
		for (p = dst + sizeof(SBX_NEWROOT); (p = strchr(p, '/')) != NULL; p++) {
			*p = '\0';
			sbx_mkdir(c, dst, 0755);
			*p = '/';
		}
		sbx_mkdir(c, dst, 0755);
		sbx_bind(c, c->mcp->paths[i], dst, MS_RDONLY | MS_NOSUID | MS_NODEV);
	}
}

static void
sbx_pivot(const struct sbx_child *c)
{
	if (chdir(SBX_NEWROOT) == -1)
		sbx_fail(c, "chdir new root", errno);
	/* pivot_root(".", "."): the old root ends up stacked on the new one
	 * and is detached at once; nothing of the host stays reachable. */
	if (syscall(SYS_pivot_root, ".", ".") == -1)
		sbx_fail(c, "pivot_root", errno);
	if (umount2(".", MNT_DETACH) == -1)
		sbx_fail(c, "detach the old root", errno);
	if (chdir("/") == -1)
		sbx_fail(c, "chdir /", errno);
	if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV,
		NULL) == -1)
		sbx_fail(c, "root read-only", errno);
}

static void
sbx_limits(const struct sbx_child *c)
{
	struct {
		int res;
		rlim_t v;
	} l[] = {
		{ RLIMIT_NPROC, (rlim_t)c->lim->pids },
		{ RLIMIT_NOFILE, (rlim_t)c->lim->open_files },
		{ RLIMIT_FSIZE, (rlim_t)c->lim->file_size },
		{ RLIMIT_CORE, 0 },
	};
	struct rlimit rl;
	size_t i;

	for (i = 0; i < sizeof(l) / sizeof(l[0]); i++) {
		rl.rlim_cur = rl.rlim_max = l[i].v;
		if (setrlimit(l[i].res, &rl) == -1)
			sbx_fail(c, "setrlimit", errno);
	}
}

/* Every capability gone: bounding set (while CAP_SETPCAP remains), ambient,
 * then the sandbox user's ids, then the three sets. */
static void
sbx_drop(const struct sbx_child *c)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2];
	unsigned long cap;
	uid_t r, e, s;

	for (cap = 0; prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == -1)
			sbx_fail(c, "drop the bounding set", errno);
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) == -1)
		sbx_fail(c, "clear ambient capabilities", errno);
	/* setgroups is denied in an unprivileged user namespace; there the
	 * supplementary groups are unmapped already. */
	if (!c->devmode && setgroups(0, NULL) == -1)
		sbx_fail(c, "setgroups", errno);
	if (setresgid(SBX_INNER_ID, SBX_INNER_ID, SBX_INNER_ID) == -1)
		sbx_fail(c, "setresgid", errno);
	if (setresuid(SBX_INNER_ID, SBX_INNER_ID, SBX_INNER_ID) == -1)
		sbx_fail(c, "setresuid", errno);
	memset(data, 0, sizeof(data));
	if (syscall(SYS_capset, &hdr, data) == -1)
		sbx_fail(c, "capset", errno);
	if (getresuid(&r, &e, &s) == -1 || r != SBX_INNER_ID || e != SBX_INNER_ID ||
	    s != SBX_INNER_ID || setuid(0) == 0)
		sbx_fail(c, "the sandbox user could not be verified", EPERM);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1)
		sbx_fail(c, "no_new_privs", errno);
}

/* An MCP server's relay learns what to redact from a memfd: each secret
 * as a 4-byte big-endian length and its bytes (sandbox/mcphost.c).
 * Returns it, read from its start, above 9 and close-on-exec. */
static int
sbx_mcp_secrets(struct sbx_child *c)
{
	const struct sbx_mcp *m = c->mcp;
	unsigned char len[4];
	size_t i;
	int fd, hi;

	if ((fd = memfd_create("agrippa-mcp-redact", MFD_CLOEXEC)) == -1)
		sbx_fail(c, "memfd", errno);
	for (i = 0; i < m->nsecrets; i++) {
		if (m->secretlen[i] < 4)
			continue; /* too short to search for */
		len[0] = (unsigned char)(m->secretlen[i] >> 24);
		len[1] = (unsigned char)(m->secretlen[i] >> 16);
		len[2] = (unsigned char)(m->secretlen[i] >> 8);
		len[3] = (unsigned char)m->secretlen[i];
		if (write(fd, len, 4) != 4 ||
		    write(fd, m->secrets[i], m->secretlen[i]) != (ssize_t)m->secretlen[i])
			sbx_fail(c, "the values to redact", errno != 0 ? errno : EIO);
	}
	if (lseek(fd, 0, SEEK_SET) == -1 || (hi = fcntl(fd, F_DUPFD_CLOEXEC, 10)) == -1)
		sbx_fail(c, "the values to redact", errno);
	close(fd);
	return hi;
}

/* fd 0/1 /dev/null, 2 kept (the daemon's stderr or /dev/null), 3 the
 * channel; the executable and the error pipe above, close-on-exec. */
static void
sbx_fds(struct sbx_child *c)
{
	int nul, chan, bin, errw, serrw, red;

	if (c->mcp != NULL) {
		/* an MCP server: 0 and 1 the channel, 2 its stderr pipe, 3 the
		 * values its relay redacts */
		if ((chan = fcntl(c->chan, F_DUPFD_CLOEXEC, 10)) == -1 ||
		    (serrw = fcntl(c->serrw, F_DUPFD_CLOEXEC, 10)) == -1 ||
		    (bin = fcntl(c->bin, F_DUPFD_CLOEXEC, 10)) == -1 ||
		    (errw = fcntl(c->errw, F_DUPFD_CLOEXEC, 10)) == -1)
			sbx_fail(c, "descriptors", errno);
		c->errw = errw;
		red = sbx_mcp_secrets(c);
		if (dup2(chan, 0) == -1 || dup2(chan, 1) == -1 || dup2(serrw, 2) == -1 ||
		    dup2(red, 3) == -1 || dup3(bin, 4, O_CLOEXEC) == -1 ||
		    dup3(errw, 5, O_CLOEXEC) == -1)
			sbx_fail(c, "descriptors", errno);
		c->errw = 5;
		c->bin = 4;
		closefrom(6);
		return;
	}
	if ((chan = fcntl(c->chan, F_DUPFD_CLOEXEC, 10)) == -1 ||
	    (bin = fcntl(c->bin, F_DUPFD_CLOEXEC, 10)) == -1 ||
	    (errw = fcntl(c->errw, F_DUPFD_CLOEXEC, 10)) == -1)
		sbx_fail(c, "descriptors", errno);
	c->errw = errw;
	if ((nul = open("/dev/null", O_RDWR | O_CLOEXEC)) == -1 || dup2(nul, 0) == -1 ||
	    dup2(nul, 1) == -1 || dup2(chan, 3) == -1 || dup3(bin, 4, O_CLOEXEC) == -1 ||
	    dup3(errw, 5, O_CLOEXEC) == -1)
		sbx_fail(c, "descriptors", errno);
	c->errw = 5;
	c->bin = 4;
	closefrom(6);
}

/* Close every descriptor from 3 up but the n in keep (at most 8). */
static void
sbx_keep_only(const int *keep, size_t n)
{
	int k[8], t;
	unsigned int lo = 3;
	size_t i, j;

	for (i = 0; i < n && i < 8; i++) { /* sorted, ascending */
		for (t = keep[i], j = i; j > 0 && k[j - 1] > t; j--)
			k[j] = k[j - 1];
		k[j] = t;
	}
	for (i = 0; i < n && i < 8; i++) {
		if (k[i] < (int)lo)
			continue;
		if ((unsigned int)k[i] > lo)
			close_range(lo, (unsigned int)k[i] - 1, 0);
		lo = (unsigned int)k[i] + 1;
	}
	close_range(lo, ~0U, 0);
}

/* The launch, sent whole by the supervisor in one message, with (root
 * mode) the workspace, the artifacts and the objects as descriptors, those
 * the launch says are there, in that order; -1 when it gave up or sent
 * something else. */
static int
sbx_read_launch(struct sbx_child *c)
{
	char cbuf[CMSG_SPACE(3 * sizeof(int))];
	struct iovec iov = { &c->l, sizeof(c->l) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
		.msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm;
	int fds[3], want, got = 0, i = 0;
	ssize_t n;

	do
		n = recvmsg(c->go, &mh, MSG_CMSG_CLOEXEC);
	while (n == -1 && errno == EINTR);
	if (n != (ssize_t)sizeof(c->l) || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))
		return -1;
	if ((cm = CMSG_FIRSTHDR(&mh)) != NULL && cm->cmsg_level == SOL_SOCKET &&
	    cm->cmsg_type == SCM_RIGHTS && cm->cmsg_len >= CMSG_LEN(sizeof(int)) &&
	    cm->cmsg_len <= CMSG_LEN(sizeof(fds))) {
		got = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		memcpy(fds, CMSG_DATA(cm), (size_t)got * sizeof(int));
	}
	c->l.ws_path[sizeof(c->l.ws_path) - 1] = '\0';
	c->l.objs_path[sizeof(c->l.objs_path) - 1] = '\0';
	c->ws = c->art = c->objs = -1;
	want = c->devmode ? 0 : 1 + (c->l.has_art != 0) + (c->l.has_objs != 0);
	if (got != want)
		return -1;
	if (!c->devmode) {
		c->ws = fds[i++];
		if (c->l.has_art)
			c->art = fds[i++];
		if (c->l.has_objs)
			c->objs = fds[i++];
	}
	return 0;
}

/*
 * The way out, for a run with a network policy (DESIGN.md section 4.1):
 * lo up, a socket listening on 127.0.0.1:3128 in this, the sandbox's own
 * network namespace, and the socket sent back over the go socket.  egress
 * accepts on it from the host's namespace; nothing runs in here for it.
 * Still holding every capability of the new user namespace, which owns
 * the network namespace.
 */
static void
sbx_listen_egress(struct sbx_child *c)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(SBX_EGRESS_PORT) };
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { "L", 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
		.msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm;
	struct ifreq ifr;
	int s, fd;

	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, "lo", 3);
	if ((s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == -1 ||
	    ioctl(s, SIOCGIFFLAGS, &ifr) == -1)
		sbx_fail(c, "the loopback interface", errno);
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) == -1)
		sbx_fail(c, "bring lo up", errno);
	close(s);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1 ||
	    bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == -1 || listen(fd, SOMAXCONN) == -1)
		sbx_fail(c, "listen on 127.0.0.1:3128", errno);
	memset(cbuf, 0, sizeof(cbuf));
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	if (sendmsg(c->go, &mh, MSG_NOSIGNAL) != 1)
		sbx_fail(c, "pass the listener out", errno);
	close(fd);
}

/* Into its cgroups before anything else (cgroup_open_procs): "0" is the
 * writer itself.  The descriptors go with sbx_keep_only. */
static void
sbx_join_cgroups(const struct sbx_child *c)
{
	int i;

	for (i = 0; i < CG_NCTL; i++)
		if (c->cg[i] >= 0 && write(c->cg[i], "0", 1) != 1)
			sbx_fail(c, "joining its cgroup", errno);
}

__attribute__((noreturn)) static void
sbx_child_main(struct sbx_child *c)
{
	char tmpopts[128], shmopts[128];
	char *argv[] = { "agrippa-sandbox", NULL };
	char *envp[12];
	int envc = 0;

	sbx_close_all(c->parent, 4);
	sbx_join_cgroups(c);
	/* Nothing else of the supervisor's stays open here: a prepared child
	 * may wait long for its launch, and a copy of a socket the supervisor
	 * has closed would keep that socket registered in the supervisor's
	 * event loop (epoll forgets a descriptor only once every copy of it is
	 * closed), where a dead peer's end is ready for ever. */
	sbx_keep_only((int[]){ c->chan, c->go, c->errw, c->bin, c->serrw }, c->mcp ? 5 : 4);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) == -1)
		sbx_fail(c, "pdeathsig", errno);
	/*
	 * Development mode: an unprivileged supervisor may write our uid_map
	 * only while we are dumpable (else /proc/PID is root's).  Our memory
	 * is a copy of the supervisor's, but every secret in it is a file the
	 * daemon's user can read anyway; exec ends the copy, and the tool
	 * server makes itself non-dumpable again first thing.
	 */
	if (c->devmode) {
		if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) == -1)
			sbx_fail(c, "dumpable", errno);
		if (write(c->errw, "D", 1) != 1)
			_exit(125);
	}
	if (sbx_read_launch(c) == -1) /* the supervisor gave up on us */
		_exit(125);
	if (c->l.network)
		sbx_listen_egress(c);
	if (unshare(CLONE_NEWCGROUP) == -1)
		sbx_fail(c, "cgroup namespace", errno);
	/* Root mode: we are still host root, an id the namespace does not map,
	 * and the kernel refuses to create files under an unmapped id.  Create
	 * them as the sandbox user; the sources of the binds are descriptors or
	 * world-readable, so nothing needs root's access to files. */
	if (c->devmode) {
		c->ws = sbx_reopen(c, AT_FDCWD, c->l.ws_path, c->l.ws_dev, c->l.ws_ino);
		if (c->l.has_art)
			c->art = sbx_reopen(c, c->ws, ".agrippa/artifacts", c->l.art_dev,
			    c->l.art_ino);
		if (c->l.has_objs)
			c->objs = sbx_reopen(c, AT_FDCWD, c->l.objs_path, c->l.objs_dev,
			    c->l.objs_ino);
	}
	setfsgid(SBX_INNER_ID);
	setfsuid(SBX_INNER_ID);
	if ((uid_t)setfsuid((uid_t)-1) != SBX_INNER_ID)
		sbx_fail(c, "setfsuid", EPERM);
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == -1)
		sbx_fail(c, "private mounts", errno);
	if (mount("tmpfs", SBX_NEWROOT, "tmpfs", MS_NOSUID | MS_NODEV,
		"mode=0755,size=1m,nr_inodes=1024") == -1)
		sbx_fail(c, "root tmpfs", errno);
	sbx_mount_system(c);
	sbx_mount_etc(c);
	sbx_mount_workspace(c);
	sbx_mount_objects(c);
	snprintf(tmpopts, sizeof(tmpopts), "mode=1777,size=%llu,nr_inodes=65536",
	    (unsigned long long)c->lim->tmp_size);
	snprintf(shmopts, sizeof(shmopts), "mode=1777,size=%llu,nr_inodes=4096",
	    (unsigned long long)c->lim->tmp_size);
	sbx_tmpfs(c, SBX_NEWROOT "/tmp", tmpopts, MS_NOSUID | MS_NODEV);
	sbx_mount_paths(c);
	sbx_mkdir(c, SBX_NEWROOT "/proc", 0555);
	if (mount("proc", SBX_NEWROOT "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) ==
	    -1)
		sbx_fail(c, "/proc", errno);
	sbx_mount_dev(c, shmopts);
	sbx_fds(c);
	sbx_pivot(c);
	if (sethostname("sandbox", 7) == -1)
		sbx_fail(c, "sethostname", errno);
	sbx_limits(c);
	sbx_drop(c);
	if (chdir("/workspace") == -1)
		sbx_fail(c, "chdir /workspace", errno);
	envp[envc++] = "PATH=/usr/local/bin:/usr/bin:/bin";
	envp[envc++] = "HOME=/workspace";
	envp[envc++] = "LANG=C.UTF-8";
	envp[envc++] = "AGRIPPA_SANDBOX=1";
	if (c->l.network)
		envp[envc++] = "AGRIPPA_EGRESS=1"; /* the tool server's, read by it */
#ifdef AGRIPPA_SANITIZE
	for (char **e = environ; *e != NULL && envc < 10; e++)
		if (strncmp(*e, "ASAN_OPTIONS=", 13) == 0 || strncmp(*e, "UBSAN_OPTIONS=", 14) == 0)
			envp[envc++] = *e;
#endif
	envp[envc] = NULL;
	if (c->mcp != NULL) /* its environment, made before clone */
		syscall(SYS_execveat, c->bin, "", c->xargv, c->xenv, AT_EMPTY_PATH);
	else
		syscall(SYS_execveat, c->bin, "", argv, envp, AT_EMPTY_PATH);
	sbx_fail(c, "execute agrippa-sandbox", errno);
}

/* ---- the supervisor's side ----------------------------------------------- */

static int
sbx_write_proc(pid_t pid, const char *file, const char *v)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%ld/%s", (long)pid, file);
	return file_write_str(path, v);
}

/* Map the sandbox user (1000 inside) on its host ids. */
static int
sbx_maps(pid_t pid, char *err, size_t errsz)
{
	char map[64];
	unsigned long uid = sup.devmode ? (unsigned long)getuid() : sup.conf.sandbox.uid;
	unsigned long gid = sup.devmode ? (unsigned long)getgid() : sup.conf.sandbox.gid;

	if (sup.devmode && sbx_write_proc(pid, "setgroups", "deny") == -1)
		goto fail;
	snprintf(map, sizeof(map), "%d %lu 1\n", SBX_INNER_ID, uid);
	if (sbx_write_proc(pid, "uid_map", map) == -1)
		goto fail;
	snprintf(map, sizeof(map), "%d %lu 1\n", SBX_INNER_ID, gid);
	if (sbx_write_proc(pid, "gid_map", map) == -1)
		goto fail;
	return 0;
fail:
	snprintf(err, errsz, "user namespace maps: %s", strerror(errno));
	return -1;
}

/* a is b or lies under it. */
static int
path_within(const char *a, const char *b)
{
	size_t n = strlen(b);

	if (strcmp(b, "/") == 0)
		return 1;
	return strncmp(a, b, n) == 0 && (a[n] == '\0' || a[n] == '/');
}

/*
 * An operator's workspace: an existing directory that neither holds nor
 * lies in anything of the daemon's (state, key, config, sockets, pidfile,
 * programs, the children's chroot).
 * Resolves symlinks into real.
 */
static int
sbx_check_workspace(const char *path, char *real, size_t realsz, char *err, size_t errsz)
{
	const char *mine[] = { sup.conf.state_dir, sup.conf.master_key, sup.conf_path,
		sup.conf.control_socket, sup.conf.pidfile, sup.self_exe, sup.sandbox_exe,
		sup.conf.chroot };
	char buf[PATH_MAX], other[PATH_MAX];
	struct stat st;
	size_t i;

	if (path[0] != '/') {
		snprintf(err, errsz, "workspace must be an absolute path");
		return -1;
	}
	if (realpath(path, buf) == NULL || stat(buf, &st) == -1) {
		snprintf(err, errsz, "workspace %s: %s", path, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(err, errsz, "workspace %s: not a directory", path);
		return -1;
	}
	for (i = 0; i < sizeof(mine) / sizeof(mine[0]); i++) {
		/* Compare real paths: a symlink must not hide an overlap. */
		const char *m = realpath(mine[i], other) != NULL ? other : mine[i];

		if (path_within(m, buf) || (i == 0 && path_within(buf, m))) {
			snprintf(err, errsz, "workspace %s: overlaps the daemon's own files (%s)",
			    path, mine[i]);
			return -1;
		}
	}
	if (fmt_ok(real, realsz, "%s", buf) == -1) {
		snprintf(err, errsz, "workspace path too long");
		return -1;
	}
	return 0;
}

/* Opens (making it when missing) dir/name beneath dir with no symlink on
 * the way; a directory made here is given to the sandbox user. */
static int
sbx_subdir(int dir, const char *name, char *err, size_t errsz)
{
	struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
	int fd, made = 0;

	if (mkdirat(dir, name, 0755) == 0)
		made = 1;
	else if (errno != EEXIST)
		goto fail;
	if ((fd = (int)syscall(SYS_openat2, dir, name, &how, sizeof(how))) == -1)
		goto fail;
	if (made && !sup.devmode &&
	    fchownat(fd, "", (uid_t)sup.conf.sandbox.uid, (gid_t)sup.conf.sandbox.gid,
		AT_EMPTY_PATH) == -1) {
		close(fd);
		goto fail;
	}
	return fd;
fail:
	snprintf(err, errsz, "workspace: %s: %s", name, strerror(errno));
	return -1;
}

/* For access: readOnly, the one writable place: .agrippa/artifacts. */
static int
sbx_artifacts_dir(int ws, char *err, size_t errsz)
{
	int dot, art;

	if ((dot = sbx_subdir(ws, ".agrippa", err, errsz)) == -1)
		return -1;
	art = sbx_subdir(dot, "artifacts", err, errsz);
	close(dot);
	return art;
}

/* A fresh, empty workspace under the state directory, owned by the sandbox user. */
static int
sbx_fresh(struct sbx *s, char *err, size_t errsz)
{
	char dir[PATH_MAX];

	if (fmt_ok(dir, sizeof(dir), "%s/sandboxes", sup.conf.state_dir) == -1 ||
	    fmt_ok(s->fresh, sizeof(s->fresh), "%s/%s", dir, s->id) == -1) {
		snprintf(err, errsz, "state directory path too long");
		return -1;
	}
	if ((mkdir(dir, 0700) == -1 && errno != EEXIST) || mkdir(s->fresh, 0700) == -1 ||
	    (!sup.devmode && chown(s->fresh, (uid_t)sup.conf.sandbox.uid,
				 (gid_t)sup.conf.sandbox.gid) == -1)) {
		snprintf(err, errsz, "fresh workspace: %s", strerror(errno));
		if (access(s->fresh, F_OK) == 0)
			rmdir(s->fresh);
		s->fresh[0] = '\0';
		return -1;
	}
	return 0;
}

static void
sbx_send_hello(struct sbx *s, int fd, int readonly)
{
	struct ipc_wbuf w;

	ipc_wbuf_begin(&w, IMSG_SBX_HELLO, 0, 8);
	ipc_put_u64(&w, IPC_PROTO_VERSION);
	ipc_put_u64(&w, (uint64_t)sup.verbose);
	ipc_put_u64(&w, readonly ? 1 : 0);
	ipc_put_u64(&w, sup.conf.sandbox.file_max);
	ipc_put_u64(&w, sup.conf.sandbox.output_max);
	ipc_put_u64(&w, sup.conf.sandbox.exec_timeout * 1000);
	ipc_put_u64(&w, sup.conf.sandbox.artifact_max);
	ipc_put_str(&w, s->id);
	if (ipc_wbuf_finish(&w, sup.conf.ipc_max_frame) == -1 ||
	    ipc_write_frame(fd, &w, -1) == -1)
		fatalx("sandbox: cannot write its hello"); /* a socketpair of our own */
	ipc_wbuf_free(&w);
}

/*
 * Wait for the child's next word on its error pipe: with mark 0, EOF (it
 * executed the tool server); with mark 'D', that one byte (development mode:
 * it made itself dumpable).  Anything else is its failure reason, in err.
 */
static int
sbx_wait_child(int errr, char mark, char *err, size_t errsz)
{
	struct pollfd pfd = { errr, POLLIN, 0 };
	struct timespec t0, now;
	char buf[256];
	ssize_t n, more;
	long left;
	int rc;

	/* A signal (SIGCHLD of another child) interrupts the wait: go on
	 * waiting for what is left of the time, it is no timeout. */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		left = SBX_BUILD_TIMEOUT_MS - ((now.tv_sec - t0.tv_sec) * 1000 +
		    (now.tv_nsec - t0.tv_nsec) / 1000000);
		if (left <= 0 || (rc = poll(&pfd, 1, (int)left)) == 0) {
			snprintf(err, errsz, "sandbox not built within %d ms", SBX_BUILD_TIMEOUT_MS);
			return -1;
		}
		if (rc > 0)
			break;
		if (errno != EINTR) {
			snprintf(err, errsz, "sandbox: poll: %s", strerror(errno));
			return -1;
		}
	}
	do
		n = read(errr, buf, mark != 0 ? 1 : sizeof(buf) - 1);
	while (n == -1 && errno == EINTR);
	if ((n == 0 && mark == 0) || (n == 1 && mark != 0 && buf[0] == mark))
		return 0;
	if (n == 1 && mark != 0) {
		do
			more = read(errr, buf + 1, sizeof(buf) - 2);
		while (more == -1 && errno == EINTR);
		if (more > 0)
			n += more;
	}
	if (n < 0)
		snprintf(err, errsz, "sandbox: %s", strerror(errno));
	else if (n == 0)
		snprintf(err, errsz, "sandbox: the child ended before it was set up");
	else
		snprintf(err, errsz, "sandbox: %.*s", (int)n, buf);
	return -1;
}

static int
sbx_slot(void)
{
	int i, n = 0;

	for (i = 0; i < SBX_MAX_ALL; i++)
		n += sbxs[i] != NULL;
	if ((uint64_t)n >= sup.conf.sandbox.max)
		return -1;
	for (i = 0; i < SBX_MAX_ALL; i++)
		if (sbxs[i] == NULL)
			return i;
	return -1;
}


/* Kill and forget a sandbox that never reached its driver. */
static void
sbx_discard(struct sbx *s, int reaped)
{
	if (s->pidfd >= 0) {
		if (!reaped) {
			syscall(SYS_pidfd_send_signal, s->pidfd, SIGKILL, NULL, 0);
			waitpid(s->pid, NULL, 0);
		}
		close(s->pidfd);
	}
	sbx_close_all((int[]){ s->drv, s->go, s->errr, s->lis, s->serr }, 5);
	cgroup_destroy(&s->cg);
	if (s->fresh[0] != '\0')
		remove_tree(s->fresh);
	free(s);
}

/* Whether the environment entries env[0..n) set name (the part of e before '='). */
static int
sbx_env_has(char *const *env, size_t n, const char *e)
{
	size_t i, k = strcspn(e, "=");

	for (i = 0; i < n; i++)
		if (strncmp(env[i], e, k) == 0 && env[i][k] == '=')
			return 1;
	return 0;
}

/*
 * An MCP server's tool server: argv "agrippa-sandbox mcp LINE_MAX
 * COMMAND...", its values to redact checked (sandbox/relay.h's limits), and
 * an environment of the server's own entries, then PATH, HOME and LANG
 * where the server sets none, the sandbox's markers, with a network the
 * proxy variables where the server sets none, and (sanitized builds) the
 * sanitizers' options.  Pointer arrays only, into mcp's strings and
 * the supervisor's environment, which the child copies with the rest of
 * the supervisor's memory.  0, or -1 with err set.
 */
static int
sbx_mcp_exec(struct sbx_child *c, int network, char *err, size_t errsz)
{
	static char *const dflt[] = { "PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/workspace",
		"LANG=C.UTF-8" };
	/* with a network, the proxy variables a run's commands get (sandbox/exec.c) */
	static char *const proxy[] = { "HTTP_PROXY=http://127.0.0.1:3128",
		"HTTPS_PROXY=http://127.0.0.1:3128", "http_proxy=http://127.0.0.1:3128",
		"https_proxy=http://127.0.0.1:3128", "NO_PROXY=localhost,127.0.0.1,::1",
		"no_proxy=localhost,127.0.0.1,::1", "NODE_USE_ENV_PROXY=1",
		"JAVA_TOOL_OPTIONS=-Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort=3128 "
		"-Dhttps.proxyHost=127.0.0.1 -Dhttps.proxyPort=3128" };
	size_t na = 0, ne = 0, i, n = 0;

	while (c->mcp->argv[na] != NULL)
		na++;
	while (c->mcp->env != NULL && c->mcp->env[ne] != NULL)
		ne++;
	if (na == 0) {
		snprintf(err, errsz, "sandbox: the MCP server has no command");
		return -1;
	}
	if (c->mcp->nsecrets > SBX_MCP_SECRETS_MAX) {
		snprintf(err, errsz, "sandbox: more than %d values to redact", SBX_MCP_SECRETS_MAX);
		return -1;
	}
	for (i = 0; i < c->mcp->nsecrets; i++)
		if (c->mcp->secretlen[i] > SBX_MCP_SECRET_MAX ||
		    memchr(c->mcp->secrets[i], '\n', c->mcp->secretlen[i]) != NULL) {
			snprintf(err, errsz, "sandbox: a value to redact is over %d bytes or "
			    "holds a newline", SBX_MCP_SECRET_MAX);
			return -1;
		}
	snprintf(c->linemax, sizeof(c->linemax), "%zu",
	    c->mcp->line_max != 0 ? c->mcp->line_max : (size_t)MCP_LINE_MAX_DEFAULT);
	if ((c->xargv = calloc(na + 4, sizeof(char *))) == NULL ||
	    (c->xenv = calloc(ne + 24, sizeof(char *))) == NULL) {
		snprintf(err, errsz, "out of memory");
		return -1;
	}
	c->xargv[0] = "agrippa-sandbox";
	c->xargv[1] = "mcp";
	c->xargv[2] = c->linemax;
	for (i = 0; i < na; i++)
		c->xargv[3 + i] = c->mcp->argv[i];
	for (i = 0; i < ne; i++)
		c->xenv[n++] = c->mcp->env[i];
	for (i = 0; i < sizeof(dflt) / sizeof(dflt[0]); i++)
		if (!sbx_env_has(c->mcp->env, ne, dflt[i]))
			c->xenv[n++] = dflt[i];
	c->xenv[n++] = "AGRIPPA_SANDBOX=1";
	if (network)
		c->xenv[n++] = "AGRIPPA_EGRESS=1";
	for (i = 0; network && i < sizeof(proxy) / sizeof(proxy[0]); i++)
		if (!sbx_env_has(c->mcp->env, ne, proxy[i]))
			c->xenv[n++] = proxy[i];
#ifdef AGRIPPA_SANITIZE
	for (char **e = environ; *e != NULL && n < ne + 23; e++)
		if (strncmp(*e, "ASAN_OPTIONS=", 13) == 0 || strncmp(*e, "UBSAN_OPTIONS=", 14) == 0)
			c->xenv[n++] = *e;
#endif
	c->xenv[n] = NULL;
	return 0;
}

/*
 * Clone a sandbox's first process and map its ids; it joins its cgroups
 * itself, first thing (sbx_join_cgroups: the supervisor does not wait for
 * the moves), and then waits for its launch, which it reads only once it
 * is in them.  An MCP server's (mcp not NULL) is made for its request,
 * never ahead: its command and environment are in the child's copy of our
 * memory.  Returns the sandbox or NULL with err set.
 */
static struct sbx *
sbx_prepare(const struct sbx_mcp *mcp, int network, char *err, size_t errsz)
{
	struct sbx_child c = { .ws = -1, .art = -1, .objs = -1, .devmode = sup.devmode,
		.lim = &sup.conf.sandbox, .serrw = -1, .mcp = mcp,
		.parent = { -1, -1, -1, -1 } };
	int sv[2] = { -1, -1 }, go[2] = { -1, -1 }, ep[2] = { -1, -1 }, pidfd = -1;
	int se[2] = { -1, -1 };
	unsigned char rnd[8];
	char rhex[2 * sizeof(rnd) + 1];
	struct sbx *s;
	long pid;
	int i;

	for (i = 0; i < CG_NCTL; i++)
		c.cg[i] = -1;
	if ((s = calloc(1, sizeof(*s))) == NULL) {
		snprintf(err, errsz, "out of memory");
		return NULL;
	}
	s->pidfd = s->drv = s->go = s->errr = s->lis = s->serr = -1;
	s->mcp = mcp != NULL;
	if (mcp != NULL && (sbx_mcp_exec(&c, network, err, errsz) == -1 ||
	    pipe2(se, O_CLOEXEC) == -1)) {
		if (se[0] == -1 && c.xenv != NULL)
			snprintf(err, errsz, "sandbox: %s", strerror(errno));
		free(c.xargv);
		free(c.xenv);
		free(s);
		return NULL;
	}
	c.serrw = se[1];
	c.parent[3] = se[0];
	/* sbx-, this daemon's tag (cgroup_init), 16 random hex digits: with 32
	 * bits, two of a busy host's sandboxes would meet on one cgroup (and
	 * the second fail to start) about once in a few ten million */
	randombytes_buf(rnd, sizeof(rnd));
	sodium_bin2hex(rhex, sizeof(rhex), rnd, sizeof(rnd));
	snprintf(s->id, sizeof(s->id), "sbx-%.*s%s", CG_TAG_LEN, sup.host_id, rhex);
	if (cgroup_create(s->id, &sup.conf.sandbox, &s->cg, err, errsz) == -1 ||
	    cgroup_open_procs(&s->cg, c.cg, err, errsz) == -1)
		goto fail;
	if ((c.bin = open(sup.sandbox_exe, O_PATH | O_CLOEXEC)) == -1 ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == -1 ||
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, go) == -1 ||
	    pipe2(ep, O_CLOEXEC) == -1) {
		snprintf(err, errsz, "sandbox: %s", strerror(errno));
		goto fail;
	}
	c.chan = sv[1];
	c.go = go[0];
	c.errw = ep[1];
	c.parent[0] = sv[0];
	c.parent[1] = go[1];
	c.parent[2] = ep[0];
	pid = syscall(SYS_clone, CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET |
	    CLONE_NEWIPC | CLONE_NEWUTS | CLONE_PIDFD | SIGCHLD, NULL, &pidfd, NULL, 0);
	if (pid == 0)
		sbx_child_main(&c);
	if (pid == -1) {
		snprintf(err, errsz, "sandbox: clone: %s", strerror(errno));
		goto fail;
	}
	s->pid = (pid_t)pid;
	s->pidfd = pidfd;
	s->drv = sv[0];
	s->go = go[1];
	s->errr = ep[0];
	s->serr = se[0];
	se[0] = -1;
	sbx_close_all((int[]){ c.bin, sv[1], go[0], ep[1], se[1] }, 5);
	sbx_close_all(c.cg, CG_NCTL);
	free(c.xargv);
	free(c.xenv);
	if ((c.devmode && sbx_wait_child(s->errr, 'D', err, errsz) == -1) ||
	    sbx_maps(s->pid, err, errsz) == -1) {
		sbx_discard(s, 0);
		return NULL;
	}
	return s;
fail:
	sbx_close_all((int[]){ c.bin, sv[0], sv[1], go[0], go[1], ep[0], ep[1], se[0], se[1] }, 9);
	sbx_close_all(c.cg, CG_NCTL);
	free(c.xargv);
	free(c.xenv);
	sbx_discard(s, 0);
	return NULL;
}

/* The listener the child made (sbx_listen_egress) into s->lis, waiting
 * SBX_BUILD_TIMEOUT_MS at most.  Returns 0 or -1 (it failed or is gone). */
static int
sbx_recv_listener(struct sbx *s)
{
	char cbuf[CMSG_SPACE(sizeof(int))], b;
	struct iovec iov = { &b, 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
		.msg_controllen = sizeof(cbuf) };
	struct pollfd pfd = { s->go, POLLIN, 0 };
	struct cmsghdr *cm;
	ssize_t n;
	int rc;

	do
		rc = poll(&pfd, 1, SBX_BUILD_TIMEOUT_MS);
	while (rc == -1 && errno == EINTR);
	if (rc <= 0)
		return -1;
	do
		n = recvmsg(s->go, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	while (n == -1 && errno == EINTR);
	if (n != 1 || b != 'L' || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
	    (cm = CMSG_FIRSTHDR(&mh)) == NULL || cm->cmsg_level != SOL_SOCKET ||
	    cm->cmsg_type != SCM_RIGHTS || cm->cmsg_len != CMSG_LEN(sizeof(int)))
		return -1;
	memcpy(&s->lis, CMSG_DATA(cm), sizeof(int));
	return 0;
}

/* Hand the prepared sandbox its launch (and in root mode the nfds
 * detached mounts of fds) and wait until it runs the tool server.  Returns
 * 0, or -1 with err set (s is then to be discarded). */
static int
sbx_launch(struct sbx *s, const struct sbx_launch *l, const int *fds, int nfds, char *err,
    size_t errsz)
{
	char cbuf[CMSG_SPACE(3 * sizeof(int))];
	struct iovec iov = { (void *)l, sizeof(*l) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cm;
	ssize_t n;

	if (nfds > 0) {
		memset(cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf;
		mh.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, (size_t)nfds * sizeof(int));
	}
	do
		n = sendmsg(s->go, &mh, MSG_NOSIGNAL);
	while (n == -1 && errno == EINTR);
	if (n != (ssize_t)sizeof(*l)) {
		snprintf(err, errsz, "sandbox: its first process is gone");
		return -1;
	}
	if (l->network && sbx_recv_listener(s) == -1) {
		/* its reason, if it gave one, is on the error pipe */
		if (sbx_wait_child(s->errr, 0, err, errsz) == 0)
			snprintf(err, errsz, "sandbox: no listener for egress");
		return -1;
	}
	close(s->go);
	s->go = -1;
	if (sbx_wait_child(s->errr, 0, err, errsz) == -1)
		return -1;
	close(s->errr);
	s->errr = -1;
	if (!s->mcp) /* an MCP server's channel speaks MCP */
		sbx_send_hello(s, s->drv, l->readonly);
	return 0;
}

/*
 * Root mode keeps one sandbox prepared ahead (cloned, mapped, in its
 * cgroups, waiting for its workspace), so that the slow part of a build,
 * above all the cgroup v1 moves (a kernel RCU grace period each, which the
 * child waits for, not the supervisor), is not on the path of a request.
 * It holds a copy of the supervisor's memory, as every sandbox process
 * does until its exec, and is as private as the supervisor itself (root,
 * not dumpable).  Development mode prepares none:
 * there the child must be dumpable while it is mapped.
 */
static struct sbx *sbx_warm;
static struct event *sbx_warm_ev;

static void
sbx_warm_cb(evutil_socket_t fd, short what, void *arg)
{
	char err[512];

	if (sbx_warm != NULL || sup.stopping || sup.devmode)
		return;
	if ((sbx_warm = sbx_prepare(NULL, 0, err, sizeof(err))) == NULL)
		log_warnx("cannot prepare the next sandbox: %s", err);
}

/* Prepare the next sandbox once the event loop is free again. */
static void
sbx_warm_later(void)
{
	struct timeval now = { 0, 0 };

	if (sup.devmode || sup.base == NULL)
		return;
	if (sbx_warm_ev == NULL && (sbx_warm_ev = evtimer_new(sup.base, sbx_warm_cb, NULL)) == NULL)
		fatalx("evtimer_new");
	evtimer_add(sbx_warm_ev, &now);
}

void
sbx_rewarm(void)
{
	if (sbx_warm != NULL) {
		sbx_discard(sbx_warm, 0);
		sbx_warm = NULL;
	}
	if (!sup.stopping)
		sbx_warm_later();
}

/* What the child needs to find the workspace again; fds are the
 * supervisor's, closed by the caller. */
static int
sbx_identify(struct sbx_launch *l, int ws, int art, const char *path, char *err, size_t errsz)
{
	struct stat st;

	if (fmt_ok(l->ws_path, sizeof(l->ws_path), "%s", path) == -1 || fstat(ws, &st) == -1) {
		snprintf(err, errsz, "workspace: %s", strerror(errno ? errno : ENAMETOOLONG));
		return -1;
	}
	l->ws_dev = st.st_dev;
	l->ws_ino = st.st_ino;
	if (art >= 0) {
		if (fstat(art, &st) == -1) {
			snprintf(err, errsz, "workspace: %s", strerror(errno));
			return -1;
		}
		l->has_art = 1;
		l->art_dev = st.st_dev;
		l->art_ino = st.st_ino;
	}
	return 0;
}

/* A detached copy of the mount at the directory fd, with attrs set: what a
 * root-mode sandbox attaches.  The descriptor, or -1 with err set. */
static int
sbx_clone(int fd, uint64_t attrs, const char *what, char *err, size_t errsz)
{
	struct mount_attr a = { .attr_set = attrs };
	int t;

	if ((t = (int)syscall(SYS_open_tree, fd, "",
	    OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH)) == -1 ||
	    syscall(SYS_mount_setattr, t, "", AT_EMPTY_PATH, &a, sizeof(a)) == -1) {
		snprintf(err, errsz, "%s: %s", what, strerror(errno));
		if (t >= 0)
			close(t);
		return -1;
	}
	return t;
}

/*
 * The workspace of a request: checked (or made), opened, identified; in
 * root mode also cloned as detached mounts into fds (the workspace, then
 * its artifacts for readOnly), *nfds of them, the caller's to close.
 */
static int
sbx_workspace(struct sbx *s, const struct sbx_req *req, struct sbx_launch *l, char *real,
    size_t realsz, int *fds, int *nfds, char *err, size_t errsz)
{
	const uint64_t fl = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
	int ws = -1, art = -1, rv = -1;

	if (req->workspace != NULL && req->trusted) {
		if (fmt_ok(real, realsz, "%s", req->workspace) == -1) {
			snprintf(err, errsz, "workspace path too long");
			return -1;
		}
	} else if (req->workspace != NULL
	    ? sbx_check_workspace(req->workspace, real, realsz, err, errsz)
	    : sbx_fresh(s, err, errsz))
		return -1;
	if (req->workspace == NULL && fmt_ok(real, realsz, "%s", s->fresh) == -1)
		return -1;
	if ((ws = open(real, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) == -1) {
		snprintf(err, errsz, "workspace: %s", strerror(errno));
		return -1;
	}
	l->readonly = req->readonly;
	if ((req->readonly && req->mcp == NULL && (art = sbx_artifacts_dir(ws, err, errsz)) == -1) ||
	    sbx_identify(l, ws, art, real, err, errsz) == -1)
		goto out;
	if (!sup.devmode) {
		if ((fds[(*nfds)++] = sbx_clone(ws, fl | (req->readonly ? MOUNT_ATTR_RDONLY : 0),
		    "workspace", err, errsz)) == -1 ||
		    (art >= 0 && (fds[(*nfds)++] = sbx_clone(art, fl, "workspace artifacts", err,
		    errsz)) == -1)) {
			(*nfds)--;
			goto out;
		}
	}
	rv = 0;
out:
	sbx_close_all((int[]){ ws, art }, 2);
	return rv;
}

/*
 * The mirror's objects for the launch: in root mode *objs gets a detached
 * copy of their mount, read-only, no suid, no devices, no exec; in
 * development mode the launch names them.  A mirror without objects (gone
 * with its connection) mounts nothing.  0, or -1 with err set.
 */
static int
sbx_objects(const char *mirror, struct sbx_launch *l, int *objs, char *err, size_t errsz)
{
	const uint64_t a = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
	    MOUNT_ATTR_NOEXEC;
	char path[PATH_MAX];
	struct stat st;
	int fd, dfd;

	*objs = -1;
	if (mirror == NULL)
		return 0;
	if (fmt_ok(path, sizeof(path), "%s/objects", mirror) == -1) {
		snprintf(err, errsz, "the mirror's path is too long");
		return -1;
	}
	if (lstat(path, &st) == -1 || !S_ISDIR(st.st_mode)) {
		log_warnx("sandbox: no mirror objects at %s; git history is not visible", path);
		return 0;
	}
	if (sup.devmode) {
		l->has_objs = 1;
		l->objs_dev = st.st_dev;
		l->objs_ino = st.st_ino;
		return fmt_ok(l->objs_path, sizeof(l->objs_path), "%s", path);
	}
	if ((dfd = open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) == -1) {
		snprintf(err, errsz, "the mirror's objects: %s", strerror(errno));
		return -1;
	}
	fd = sbx_clone(dfd, a, "the mirror's objects", err, errsz);
	close(dfd);
	if (fd == -1)
		return -1;
	l->has_objs = 1;
	*objs = fd;
	return 0;
}

/*
 * An MCP server's paths go where the sandbox's own mounts are not: "/",
 * /proc, /dev, /sys, /tmp itself, /workspace and /mirror are refused (the
 * daemon's own files were refused at mcp add and are again by the caller).
 */
static int
sbx_mcp_paths_ok(const struct sbx_mcp *m, char *err, size_t errsz)
{
	static const char *const below[] = { "/proc", "/dev", "/sys", "/workspace", "/mirror" };
	const char *p = "";
	size_t i, j, n;

	for (i = 0; i < m->npaths; i++) {
		p = m->paths[i];
		if (p[0] != '/' || strcmp(p, "/") == 0 || strcmp(p, "/tmp") == 0 ||
		    strlen(p) >= PATH_MAX)
			goto bad;
		for (j = 0; j < sizeof(below) / sizeof(below[0]); j++) {
			n = strlen(below[j]);
			if (strncmp(p, below[j], n) == 0 && (p[n] == '\0' || p[n] == '/'))
				goto bad;
		}
	}
	return 0;
bad:
	snprintf(err, errsz, "sandbox: path %.256s: the sandbox's own mounts are there", p);
	return -1;
}

struct sbx *
sbx_create(const struct sbx_req *req, int *driver_fd, char *err, size_t errsz)
{
	struct sbx_launch l;
	char real[PATH_MAX];
	struct sbx *s;
	int slot, objs = -1, fds[3], nfds = 0, i, rc;

	if ((slot = sbx_slot()) == -1) {
		snprintf(err, errsz, "too many sandboxes (sandbox.max is %llu)",
		    (unsigned long long)sup.conf.sandbox.max);
		return NULL;
	}
	if (req->mcp != NULL && sbx_mcp_paths_ok(req->mcp, err, errsz) == -1)
		return NULL;
	if (req->mcp == NULL && (s = sbx_warm) != NULL)
		sbx_warm = NULL;
	else if ((s = sbx_prepare(req->mcp, req->network, err, errsz)) == NULL)
		return NULL;
	memset(&l, 0, sizeof(l));
	l.network = req->network;
	rc = sbx_workspace(s, req, &l, real, sizeof(real), fds, &nfds, err, errsz);
	if (rc == 0 && (rc = sbx_objects(req->mirror, &l, &objs, err, errsz)) == 0 && objs >= 0)
		fds[nfds++] = objs; /* the last of the launch's descriptors */
	if (rc == -1 || sbx_launch(s, &l, fds, nfds, err, errsz) == -1) {
		for (i = 0; i < nfds; i++)
			close(fds[i]);
		sbx_discard(s, 0);
		sbx_warm_later();
		return NULL;
	}
	for (i = 0; i < nfds; i++)
		close(fds[i]);
	*driver_fd = s->drv;
	s->drv = -1;
	s->done = req->done;
	s->arg = req->arg;
	sbxs[slot] = s;
	sbx_warm_later();
	log_info("sandbox %s started (pid %ld, %s, %s%s)", s->id, (long)s->pid,
	    req->workspace ? real : "fresh workspace", req->readonly ? "read-only" : "read-write",
	    req->mcp != NULL ? ", an MCP server" : "");
	metrics_sbx_started();
	return s;
}

int
sbx_take_listener(struct sbx *s)
{
	int fd = s->lis;

	s->lis = -1;
	return fd;
}

int
sbx_take_stderr(struct sbx *s)
{
	int fd = s->serr;

	s->serr = -1;
	return fd;
}

static void
sbx_stop_cb(evutil_socket_t fd, short what, void *arg)
{
	struct sbx *s = arg;
	struct timeval tv = { s->grace_ms / 1000, (s->grace_ms % 1000) * 1000 };

	(void)fd;
	(void)what;
	if (s->pidfd < 0)
		return;
	if (s->stop_stage++ == 0) {
		log_debug("sandbox %s: SIGTERM", s->id);
		syscall(SYS_pidfd_send_signal, s->pidfd, SIGTERM, NULL, 0);
		evtimer_add(s->stop_ev, &tv);
	} else {
		log_info("sandbox %s: still there %u ms after SIGTERM; SIGKILL", s->id,
		    s->grace_ms);
		sbx_kill(s);
	}
}

void
sbx_stop(struct sbx *s, unsigned grace_ms)
{
	struct timeval tv = { grace_ms / 1000, (grace_ms % 1000) * 1000 };

	if (s->stop_ev != NULL)
		return; /* stopping already */
	s->grace_ms = grace_ms;
	if ((s->stop_ev = evtimer_new(sup.base, sbx_stop_cb, s)) == NULL ||
	    evtimer_add(s->stop_ev, &tv) == -1) {
		sbx_kill(s);
		return;
	}
}

const char *
sbx_id(const struct sbx *s)
{
	return s->id;
}

pid_t
sbx_pid(const struct sbx *s)
{
	return s->pid;
}

void
sbx_kill(struct sbx *s)
{
	if (s->pidfd >= 0)
		syscall(SYS_pidfd_send_signal, s->pidfd, SIGKILL, NULL, 0);
}

void
sbx_abandon(struct sbx *s)
{
	s->done = NULL;
	s->arg = NULL;
	sbx_kill(s);
}

void
sbx_kill_all(void)
{
	int i;

	if (sbx_warm != NULL) {
		sbx_discard(sbx_warm, 0);
		sbx_warm = NULL;
	}
	for (i = 0; i < SBX_MAX_ALL; i++)
		if (sbxs[i] != NULL)
			sbx_kill(sbxs[i]);
}

int
sbx_count(void)
{
	int i, n = 0;

	for (i = 0; i < SBX_MAX_ALL; i++)
		n += sbxs[i] != NULL;
	return n;
}

int
sbx_reaped(pid_t pid, int status)
{
	struct sbx *s;
	int i;

	if (sbx_warm != NULL && sbx_warm->pid == pid) {
		log_warnx("the prepared sandbox (pid %ld) ended; preparing another", (long)pid);
		sbx_discard(sbx_warm, 1);
		sbx_warm = NULL;
		sbx_warm_later();
		return 1;
	}
	for (i = 0; i < SBX_MAX_ALL; i++) {
		if ((s = sbxs[i]) == NULL || s->pid != pid)
			continue;
		sbxs[i] = NULL;
		close(s->pidfd);
		/* The kernel reaped the whole pid namespace before its pid 1. */
		cgroup_destroy(&s->cg);
		if (s->fresh[0] != '\0')
			remove_tree(s->fresh);
		log_info("sandbox %s ended (%s %d)", s->id,
		    WIFEXITED(status) ? "status" : "signal",
		    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
		if (s->done != NULL)
			s->done(s, status, s->arg);
		if (s->lis >= 0)
			close(s->lis);
		if (s->serr >= 0)
			close(s->serr);
		if (s->stop_ev != NULL)
			event_free(s->stop_ev);
		free(s);
		return 1;
	}
	return 0;
}

int
sbx_init(char *err, size_t errsz)
{
	struct passwd *pw;
	struct group *gr;

	if (access(sup.sandbox_exe, X_OK) == -1) {
		snprintf(err, errsz, "%s: %s (agrippa-sandbox is installed beside agrippad)",
		    sup.sandbox_exe, strerror(errno));
		return -1;
	}
	if (!sup.devmode) {
		if ((pw = getpwuid((uid_t)sup.conf.sandbox.uid)) != NULL) {
			snprintf(err, errsz, "sandbox.uid %llu belongs to user %s: the sandbox "
			    "user must map to an id that owns nothing",
			    (unsigned long long)sup.conf.sandbox.uid, pw->pw_name);
			return -1;
		}
		if ((gr = getgrgid((gid_t)sup.conf.sandbox.gid)) != NULL) {
			snprintf(err, errsz, "sandbox.gid %llu belongs to group %s: the sandbox "
			    "user must map to an id that owns nothing",
			    (unsigned long long)sup.conf.sandbox.gid, gr->gr_name);
			return -1;
		}
	}
	cgroup_init(sup.devmode, sup.host_id);
	return 0;
}
