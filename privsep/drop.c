/*
 * Dropping privileges, in the order of CONVENTIONS.md "Privileges":
 * chroot -> chdir("/") -> setgroups -> setresgid -> setresuid, then verify
 * that root cannot come back (OpenSSH's permanently_set_uid), clear every
 * capability, set no_new_privs and re-assert non-dumpable.
 */
#include "privsep/privsep.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef AGRIPPA_SANITIZE
#include <sanitizer/common_interface_defs.h>
#include <sanitizer/lsan_interface.h>
#endif

#include "common/log.h"

#ifdef AGRIPPA_SANITIZE
/*
 * Sanitizer builds: LeakSanitizer finds the threads to stop through
 * /proc/PID/task, which the chroot hides, and would end every chrooted
 * process with "LeakSanitizer has encountered a fatal error".  The runtime
 * asks this hook at exit; chrooted processes skip the leak check.
 */
static volatile int drop_chrooted;

int
__lsan_is_turned_off(void)
{
	return drop_chrooted;
}
#endif

void
privsep_lsan_off(void)
{
#ifdef AGRIPPA_SANITIZE
	drop_chrooted = 1;
#endif
}

void
privsep_nodump(void)
{
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == -1)
		fatal("prctl(PR_SET_DUMPABLE)");
}

int
privsep_lookup_user(const char *name, uid_t *uid, gid_t *gid)
{
	struct passwd *pw;

	errno = 0;
	if ((pw = getpwnam(name)) == NULL) {
		if (errno != 0 && errno != ENOENT && errno != ESRCH)
			log_warn("getpwnam(%s)", name);
		return -1;
	}
	*uid = pw->pw_uid;
	*gid = pw->pw_gid;
	return 0;
}

/*
 * Checks one component of the chroot path: a directory owned by root that
 * nobody else can change.  An ancestor may be writable by others if it is
 * sticky (/tmp): nobody but root can then rename or remove the root-owned
 * entry below it.  The chroot directory itself gets no such exception.
 */
static void
drop_check_component(const char *path, int is_target)
{
	struct stat st;
	mode_t wr;

	if (lstat(path, &st) == -1)
		fatal("chroot directory %s", path);
	if (!S_ISDIR(st.st_mode))
		fatalx("chroot directory %s: not a directory", path);
	if (st.st_uid != 0)
		fatalx("chroot directory %s: owned by uid %u, not root", path, (unsigned)st.st_uid);
	wr = st.st_mode & (S_IWGRP | S_IWOTH);
	if (wr != 0 && (is_target || !(st.st_mode & S_ISVTX)))
		fatalx("chroot directory %s: writable by group or others (mode %04o)", path,
		       (unsigned)(st.st_mode & 07777));
}

/*
 * Resolves dir and checks it and every ancestor (drop_check_component).
 * Returns the resolved path; the caller frees it.  fatal() when unsafe.
 */
static char *
drop_check_dir(const char *dir)
{
	char *real, *p;

	if (dir == NULL || dir[0] != '/')
		fatalx("chroot directory must be an absolute path");
	if ((real = realpath(dir, NULL)) == NULL)
		fatal("chroot directory %s", dir);
	drop_check_component("/", real[1] == '\0');
	for (p = strchr(real + 1, '/'); p != NULL; p = strchr(p + 1, '/')) {
		*p = '\0';
		drop_check_component(real, 0);
		*p = '/';
	}
	if (real[1] != '\0')
		drop_check_component(real, 1);
	return real;
}

void
privsep_check_chroot(const char *dir)
{
	free(drop_check_dir(dir));
}

static void
drop_chroot(const char *dir)
{
	char *real = drop_check_dir(dir);

	if (chroot(real) == -1)
		fatal("chroot(%s)", real);
	if (chdir("/") == -1)
		fatal("chdir(\"/\")");
#ifdef AGRIPPA_SANITIZE
	drop_chrooted = 1;
#endif
	free(real);
}

static void
drop_ids(uid_t uid, gid_t gid)
{
	if (setgroups(1, &gid) == -1)
		fatal("setgroups");
	if (setresgid(gid, gid, gid) == -1)
		fatal("setresgid");
	if (setresuid(uid, uid, uid) == -1)
		fatal("setresuid");
}

/* fatalx() unless every id is the target and root cannot be regained. */
static void
drop_verify_ids(uid_t uid, gid_t gid)
{
	uid_t ru, eu, su;
	gid_t rg, eg, sg, groups[2];

	if (getresuid(&ru, &eu, &su) == -1 || ru != uid || eu != uid || su != uid)
		fatalx("uid not dropped to %u", (unsigned)uid);
	if (getresgid(&rg, &eg, &sg) == -1 || rg != gid || eg != gid || sg != gid)
		fatalx("gid not dropped to %u", (unsigned)gid);
	if (getgroups(2, groups) != 1 || groups[0] != gid)
		fatalx("supplementary groups not dropped");
	if (setuid(0) != -1 || setresuid(0, 0, 0) != -1 || seteuid(0) != -1)
		fatalx("uid 0 could be regained after the drop");
	if (setgid(0) != -1 || setresgid(0, 0, 0) != -1 || setegid(0) != -1)
		fatalx("gid 0 could be regained after the drop");
}

/* no_new_privs, non-dumpable (a credential change resets dumpable to
 * fs.suid_dumpable), and a final check that no capability is left. */
static void
drop_finish(void)
{
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1)
		fatal("prctl(PR_SET_NO_NEW_PRIVS)");
	privsep_nodump();
	if (!privsep_caps_empty())
		fatalx("capabilities left after the drop");
}

/* Sanitizer builds: let the runtimes cache /proc data before the chroot. */
static void
drop_sanitizer_notify(void)
{
#ifdef AGRIPPA_SANITIZE
	__sanitizer_sandbox_arguments args = {.coverage_sandboxed = 0, .coverage_fd = -1};

	__sanitizer_sandbox_on_notify(&args);
#endif
}

/* Development mode (not started as root): no chroot, no id change. */
static void
drop_devmode(void)
{
	static int warned;

	if (!warned) {
		log_warnx("development mode: not dropping privileges (not started as root)");
		warned = 1;
	}
	privsep_caps_drop_bounding();
	privsep_caps_clear();
	drop_finish();
}

void
privsep_drop(const char *chroot_dir, uid_t uid, gid_t gid, int devmode)
{
	if (devmode) {
		drop_devmode();
		return;
	}
	if (uid == 0 || gid == 0)
		fatalx("refusing to run as uid %u gid %u", (unsigned)uid, (unsigned)gid);
	drop_sanitizer_notify();
	if (chroot_dir[0] != '\0')
		drop_chroot(chroot_dir);
	else if (chdir("/") == -1) /* not chrooted (the proxy): nowhere in particular */
		fatal("chdir(\"/\")");
	privsep_caps_drop_bounding();
	drop_ids(uid, gid);
	privsep_caps_clear();
	drop_verify_ids(uid, gid);
	drop_finish();
}
