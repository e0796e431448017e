/*
 * Control groups for sandboxes: memory, pids and cpu limits per sandbox,
 * on cgroup v2 (unified) or v1 (one hierarchy per controller), whichever
 * the host offers.  Where neither can be used the daemon says so once at
 * start and sandboxes run with their rlimits only.
 *
 * v2: the supervisor's own cgroup must hand controllers to its children,
 * which the kernel allows only when it holds no process itself ("no
 * internal processes"), so the supervisor moves into a "supervisor" leaf
 * beside the sandboxes' cgroups (what a systemd unit with Delegate=yes
 * expects).  v1: a sandbox cgroup is made under the supervisor's own cgroup
 * in each controller's hierarchy.
 */
#include <sys/stat.h>
#include <sys/vfs.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "supervisor/sbx.h"

#define CG_ROOT "/sys/fs/cgroup"

enum cg_mode { CG_NONE, CG_V2, CG_V1 };

static const char *const cg_v1_names[CG_NCTL] = { "memory", "pids", "cpu" };

static struct {
	enum cg_mode mode;
	char base[CG_NCTL][PATH_MAX]; /* v2: base[0] only; v1: per controller, "" if absent */
	int have[CG_NCTL];            /* controller usable */
} cg;

/* Write s to dir/file.  Returns 0 or -1 (errno set). */
static int
cg_write(const char *dir, const char *file, const char *s)
{
	char path[PATH_MAX];

	if (fmt_ok(path, sizeof(path), "%s/%s", dir, file) == -1) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return file_write_str(path, s);
}

static int
cg_exists(const char *dir, const char *file)
{
	char path[PATH_MAX];

	return fmt_ok(path, sizeof(path), "%s/%s", dir, file) == 0 && access(path, F_OK) == 0;
}

/*
 * This process's cgroup path in the hierarchy whose /proc/self/cgroup line
 * has controller list want ("" for the v2 line "0::").  Returns 0 or -1.
 */
static int
cg_self_path(const char *want, char *out, size_t outsz)
{
	char line[1024], *ctl, *path, *tok, *save;
	FILE *f;
	int found = -1;

	if ((f = fopen("/proc/self/cgroup", "re")) == NULL)
		return -1;
	while (found == -1 && fgets(line, sizeof(line), f) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		if ((ctl = strchr(line, ':')) == NULL || (path = strchr(ctl + 1, ':')) == NULL)
			continue;
		*path++ = '\0';
		ctl++;
		if (*want == '\0') {
			if (strcmp(line, "0") == 0 && *ctl == '\0')
				found = fmt_ok(out, outsz, "%s", path);
			continue;
		}
		for (tok = strtok_r(ctl, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save))
			if (strcmp(tok, want) == 0)
				found = fmt_ok(out, outsz, "%s", path);
	}
	fclose(f);
	return found;
}

/* v2: controllers listed in dir/file (cgroup.controllers or subtree_control). */
static int
cg_v2_listed(const char *dir, const char *file, const char *ctl)
{
	char path[PATH_MAX], buf[512], *tok, *save;
	ssize_t n;
	int fd;

	if (fmt_ok(path, sizeof(path), "%s/%s", dir, file) == -1 ||
	    (fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	for (tok = strtok_r(buf, " \n", &save); tok != NULL; tok = strtok_r(NULL, " \n", &save))
		if (strcmp(tok, ctl) == 0)
			return 1;
	return 0;
}

/* v2: leave our own cgroup for a leaf and delegate the controllers. */
static int
cg_v2_setup(void)
{
	char self[PATH_MAX], leaf[PATH_MAX], pid[32], ctl[64];
	int i;

	if (cg_self_path("", self, sizeof(self)) == -1 ||
	    fmt_ok(cg.base[0], sizeof(cg.base[0]), "%s%s", CG_ROOT,
		strcmp(self, "/") == 0 ? "" : self) == -1)
		return -1;
	if (strcmp(self, "/") != 0) {
		/* Not the root cgroup: it may not hold processes and delegate. */
		if (fmt_ok(leaf, sizeof(leaf), "%s/supervisor", cg.base[0]) == -1 ||
		    (mkdir(leaf, 0755) == -1 && errno != EEXIST))
			return -1;
		snprintf(pid, sizeof(pid), "%ld", (long)getpid());
		if (cg_write(leaf, "cgroup.procs", pid) == -1)
			return -1;
	}
	for (i = 0; i < CG_NCTL; i++) {
		if (!cg_v2_listed(cg.base[0], "cgroup.controllers", cg_v1_names[i]))
			continue;
		snprintf(ctl, sizeof(ctl), "+%s", cg_v1_names[i]);
		if (cg_write(cg.base[0], "cgroup.subtree_control", ctl) == 0 ||
		    cg_v2_listed(cg.base[0], "cgroup.subtree_control", cg_v1_names[i]))
			cg.have[i] = 1;
	}
	return cg.have[CG_MEMORY] || cg.have[CG_PIDS] || cg.have[CG_CPU] ? 0 : -1;
}

/* v1: the mount point of the hierarchy carrying controller ctl, into out. */
static int
cg_v1_mount(const char *ctl, char *out, size_t outsz)
{
	char line[2048], mnt[PATH_MAX], type[64], opts[1024], *tok, *save;
	FILE *f;
	int found = -1;

	if ((f = fopen("/proc/self/mountinfo", "re")) == NULL)
		return -1;
	while (found == -1 && fgets(line, sizeof(line), f) != NULL) {
		char *sep = strstr(line, " - ");

		/* id parent dev root MOUNTPOINT opts ... - TYPE source SUPEROPTS */
		if (sep == NULL || sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1 ||
		    sscanf(sep + 3, "%63s %*s %1023s", type, opts) != 2 ||
		    strcmp(type, "cgroup") != 0)
			continue;
		for (tok = strtok_r(opts, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save))
			if (strcmp(tok, ctl) == 0)
				found = fmt_ok(out, outsz, "%s", mnt);
	}
	fclose(f);
	return found;
}

static int
cg_v1_setup(void)
{
	char mnt[PATH_MAX], self[PATH_MAX];
	int i, any = 0;

	for (i = 0; i < CG_NCTL; i++) {
		if (cg_v1_mount(cg_v1_names[i], mnt, sizeof(mnt)) == -1 ||
		    cg_self_path(cg_v1_names[i], self, sizeof(self)) == -1 ||
		    fmt_ok(cg.base[i], sizeof(cg.base[i]), "%s%s", mnt,
			strcmp(self, "/") == 0 ? "" : self) == -1 ||
		    access(cg.base[i], W_OK) == -1)
			continue;
		cg.have[i] = 1;
		any = 1;
	}
	return any ? 0 : -1;
}

/*
 * Remove the empty sandbox cgroups this daemon left behind when it was
 * killed outright (SIGKILL, a crash).  A sandbox's cgroup is named after
 * its id, sbx-TAG..., TAG the first CG_TAG_LEN digits of the daemon's host
 * id (one per state directory), so that those of another daemon on the
 * same host (a second instance, a test's) are left alone: a new sandbox's
 * cgroup is empty until its first process has joined it, and rmdir would
 * remove it under that daemon.
 */
static void
cg_sweep(const char *host_id)
{
	char path[PATH_MAX], prefix[4 + CG_TAG_LEN + 1];
	struct dirent *de;
	int i, n = 0;
	DIR *d;

	snprintf(prefix, sizeof(prefix), "sbx-%.*s", CG_TAG_LEN, host_id);
	for (i = 0; i < CG_NCTL; i++) {
		if (cg.base[i][0] == '\0' || (d = opendir(cg.base[i])) == NULL)
			continue;
		while ((de = readdir(d)) != NULL)
			if (strncmp(de->d_name, prefix, strlen(prefix)) == 0 &&
			    fmt_ok(path, sizeof(path), "%s/%s", cg.base[i], de->d_name) == 0 &&
			    rmdir(path) == 0)
				n++;
		closedir(d);
	}
	if (n > 0)
		log_info("sandbox: removed %d stale cgroup(s)", n);
}

/*
 * devmode: an unprivileged daemon rarely has a cgroup delegated to it, so
 * the missing limits are expected there and said at info level; as root
 * they are a warning.
 */
void
cgroup_init(int devmode, const char *host_id)
{
	void (*say)(const char *, ...) = devmode ? log_info : log_warnx;
	struct statfs sf;

	memset(&cg, 0, sizeof(cg));
	if (statfs(CG_ROOT, &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC) {
		if (cg_v2_setup() == 0)
			cg.mode = CG_V2;
	} else if (cg_v1_setup() == 0) {
		cg.mode = CG_V1;
	}
	if (cg.mode == CG_NONE) {
		memset(&cg, 0, sizeof(cg));
		say("sandbox: no usable cgroup (v2 with delegation, or v1 memory/pids/cpu "
		    "hierarchies we can write): sandboxes run without memory, pids and cpu "
		    "limits beyond their rlimits");
		return;
	}
	cg_sweep(host_id);
	log_info("sandbox: cgroup %s limits:%s%s%s", cg.mode == CG_V2 ? "v2" : "v1",
	    cg.have[CG_MEMORY] ? " memory" : "", cg.have[CG_PIDS] ? " pids" : "",
	    cg.have[CG_CPU] ? " cpu" : "");
	if (!cg.have[CG_MEMORY] || !cg.have[CG_PIDS] || !cg.have[CG_CPU])
		say("sandbox: cgroup controllers missing:%s%s%s (rlimits only for those)",
		    cg.have[CG_MEMORY] ? "" : " memory", cg.have[CG_PIDS] ? "" : " pids",
		    cg.have[CG_CPU] ? "" : " cpu");
}

/* The limit files of controller i, written in dir. */
static int
cg_limit(int i, const char *dir, const struct conf_sandbox *lim)
{
	char v[64];

	switch (i) {
	case CG_MEMORY:
		snprintf(v, sizeof(v), "%llu", (unsigned long long)lim->memory);
		if (cg.mode == CG_V2) {
			if (cg_write(dir, "memory.max", v) == -1)
				return -1;
			/* Swap would let a hog outgrow the limit. */
			return cg_exists(dir, "memory.swap.max") ? cg_write(dir, "memory.swap.max", "0")
							  : 0;
		}
		if (cg_write(dir, "memory.limit_in_bytes", v) == -1)
			return -1;
		return cg_exists(dir, "memory.memsw.limit_in_bytes")
			   ? cg_write(dir, "memory.memsw.limit_in_bytes", v)
			   : 0;
	case CG_PIDS:
		snprintf(v, sizeof(v), "%llu", (unsigned long long)lim->pids);
		return cg_write(dir, "pids.max", v);
	case CG_CPU:
		/* cpu percent of one CPU over a 100 ms period. */
		if (cg.mode == CG_V2) {
			snprintf(v, sizeof(v), "%llu 100000", (unsigned long long)lim->cpu * 1000);
			return cg_write(dir, "cpu.max", v);
		}
		if (cg_write(dir, "cpu.cfs_period_us", "100000") == -1)
			return -1;
		snprintf(v, sizeof(v), "%llu", (unsigned long long)lim->cpu * 1000);
		return cg_write(dir, "cpu.cfs_quota_us", v);
	}
	return -1;
}

int
cgroup_create(const char *name, const struct conf_sandbox *lim, struct sbx_cgroup *out,
    char *err, size_t errsz)
{
	int i, n = cg.mode == CG_V2 ? 1 : CG_NCTL;

	memset(out, 0, sizeof(*out));
	for (i = 0; i < n; i++) {
		if (cg.mode == CG_NONE || (cg.mode == CG_V1 && !cg.have[i]))
			continue;
		if (fmt_ok(out->dir[i], sizeof(out->dir[i]), "%s/%s", cg.base[i], name) == -1 ||
		    mkdir(out->dir[i], 0755) == -1) {
			snprintf(err, errsz, "cgroup %s: %s", name, strerror(errno));
			out->dir[i][0] = '\0';
			cgroup_destroy(out);
			return -1;
		}
	}
	for (i = 0; i < CG_NCTL; i++) {
		const char *dir = out->dir[cg.mode == CG_V2 ? 0 : i];

		if (!cg.have[i] || dir[0] == '\0')
			continue;
		if (cg_limit(i, dir, lim) == -1) {
			snprintf(err, errsz, "cgroup %s: %s limit: %s", name, cg_v1_names[i],
			    strerror(errno));
			cgroup_destroy(out);
			return -1;
		}
	}
	return 0;
}

int
cgroup_open_procs(const struct sbx_cgroup *c, int fds[CG_NCTL], char *err, size_t errsz)
{
	char path[PATH_MAX];
	int i, j;

	for (i = 0; i < CG_NCTL; i++)
		fds[i] = -1;
	for (i = 0; i < CG_NCTL; i++) {
		if (c->dir[i][0] == '\0')
			continue;
		if (fmt_ok(path, sizeof(path), "%s/cgroup.procs", c->dir[i]) == -1)
			errno = ENAMETOOLONG;
		else if ((fds[i] = open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC)) != -1)
			continue;
		snprintf(err, errsz, "cgroup: cannot open %s/cgroup.procs: %s", c->dir[i],
		    strerror(errno));
		for (j = 0; j < i; j++)
			if (fds[j] >= 0)
				close(fds[j]);
		for (j = 0; j < CG_NCTL; j++)
			fds[j] = -1;
		return -1;
	}
	return 0;
}

/*
 * Remove the cgroups.  Called once the sandbox's pid 1 was reaped: the
 * kernel has then killed and reaped everything in its pid namespace, so
 * the cgroups are empty or about to be (v2 also gets cgroup.kill, in case).
 */
void
cgroup_destroy(struct sbx_cgroup *c)
{
	struct timespec ts = { 0, 10 * 1000 * 1000 };
	int i, tries;

	for (i = 0; i < CG_NCTL; i++) {
		if (c->dir[i][0] == '\0')
			continue;
		if (cg.mode == CG_V2 && cg_exists(c->dir[i], "cgroup.kill"))
			(void)cg_write(c->dir[i], "cgroup.kill", "1");
		for (tries = 0; rmdir(c->dir[i]) == -1 && errno == EBUSY && tries < 100; tries++)
			nanosleep(&ts, NULL);
		if (access(c->dir[i], F_OK) == 0)
			log_warn("sandbox: cannot remove cgroup %s", c->dir[i]);
		c->dir[i][0] = '\0';
	}
}
