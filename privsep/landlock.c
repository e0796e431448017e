/*
 * Landlock for the processes that talk to the network on behalf of others
 * (DESIGN.md section 1): the proxy, which parses providers' and remote MCP
 * servers' answers, and egress, which parses what sandboxes send.  After
 * privsep_drop each may read only what name resolution and TLS need, so
 * that a bug exploited in either cannot read files its user could
 * otherwise read (another service's, an operator's left world-readable).
 *
 *  - egress loads resolv.conf and hosts before its chroot and opens no file
 *    afterwards: every filesystem access is refused.
 *  - the proxy is not chrooted (libcurl reads the CA bundle for each TLS
 *    connection, the resolver its files, the TLS library its
 *    configuration): it may read, and map as libraries, what is below
 *    /usr, the CA certificates, the resolver's files and /dev/null and
 *    /dev/urandom, and nothing else; it may write nothing.
 *
 * The ruleset handles every filesystem right the kernel's Landlock ABI
 * knows, so a right added by a newer ABI is refused too.  Without Landlock
 * (an older kernel, or one booted without it) the process goes on as before
 * and says so once: the chroot and the seccomp filter still hold.
 */
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "privsep/privsep.h"

#define LL_FS_ABI1                                                                                 \
	(LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE |  \
	 LANDLOCK_ACCESS_FS_READ_DIR | LANDLOCK_ACCESS_FS_REMOVE_DIR |                                \
	 LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_CHAR |                              \
	 LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK |    \
	 LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_MAKE_SYM)
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif

#define LL_READ (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)
#define LL_READ_EXEC (LL_READ | LANDLOCK_ACCESS_FS_EXECUTE)

struct ll_path {
	const char *path;
	uint64_t access; /* of LL_READ_EXEC; a file's are cut to its own */
};

/* What the proxy may read: libraries and the TLS library's data, the CA
 * bundle (and where its links lead), the resolver's files. */
static const struct ll_path proxy_paths[] = {
	{"/usr", LL_READ_EXEC},
	{"/etc/ssl", LL_READ},
	{"/etc/ca-certificates", LL_READ},
	{"/etc/ca-certificates.conf", LL_READ},
	{"/etc/pki", LL_READ},
	{"/etc/resolv.conf", LL_READ},
	{"/etc/hosts", LL_READ},
	{"/etc/nsswitch.conf", LL_READ},
	{"/etc/host.conf", LL_READ},
	{"/etc/gai.conf", LL_READ},
	{"/etc/localtime", LL_READ},
	{"/etc/services", LL_READ},
	{"/run/systemd/resolve", LL_READ}, /* where a resolv.conf link may point */
	{"/dev/null", LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE},
	{"/dev/urandom", LANDLOCK_ACCESS_FS_READ_FILE},
};

static int
ll_abi(void)
{
	return (int)syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
}

static uint64_t
ll_handled(int abi)
{
	uint64_t fs = LL_FS_ABI1;

	if (abi >= 2)
		fs |= LANDLOCK_ACCESS_FS_REFER;
	if (abi >= 3)
		fs |= LANDLOCK_ACCESS_FS_TRUNCATE;
	if (abi >= 5)
		fs |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
	return fs;
}

/* A rule for path (absent paths are skipped). */
static void
ll_allow(int rs, const struct ll_path *p, uint64_t handled)
{
	struct landlock_path_beneath_attr pb;
	struct stat st;
	int fd;

	if ((fd = open(p->path, O_PATH | O_CLOEXEC)) == -1)
		return;
	if (fstat(fd, &st) == -1) {
		close(fd);
		return;
	}
	memset(&pb, 0, sizeof(pb));
	pb.parent_fd = fd;
	pb.allowed_access = p->access & handled;
	if (!S_ISDIR(st.st_mode)) /* a file takes only a file's rights */
		pb.allowed_access &= LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE |
		                     LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_TRUNCATE;
	if (syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) == -1)
		fatal("landlock_add_rule %s", p->path);
	close(fd);
}

int
privsep_landlock(enum ipc_role role)
{
	struct landlock_ruleset_attr attr;
	const struct ll_path *paths = NULL;
	size_t n = 0, i;
	int abi, rs;

	if (role == ROLE_PROXY) {
		paths = proxy_paths;
		n = sizeof(proxy_paths) / sizeof(proxy_paths[0]);
	} else if (role != ROLE_EGRESS)
		return 0;
	if ((abi = ll_abi()) < 1) {
		log_warnx("landlock: not available (%s); going on with the chroot and seccomp only",
		          strerror(errno));
		return -1;
	}
	memset(&attr, 0, sizeof(attr));
	attr.handled_access_fs = ll_handled(abi);
	if ((rs = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0)) == -1)
		fatal("landlock_create_ruleset");
	for (i = 0; i < n; i++)
		ll_allow(rs, &paths[i], attr.handled_access_fs);
	/* no_new_privs is set already (privsep_drop) */
	if (syscall(SYS_landlock_restrict_self, rs, 0) == -1)
		fatal("landlock_restrict_self");
	/* LeakSanitizer reads /proc at exit, which it may no longer: off, as
	 * in a chrooted child (sanitized builds only) */
	privsep_lsan_off();
	close(rs);
	log_debug("landlock: ABI %d, %zu paths readable", abi, n);
	return 0;
}
