/*
 * Resource limits per role.  Soft and hard limits are set together, so a
 * compromised child cannot raise them again; a limit is never raised above
 * the hard limit the process was given (it is clamped instead).
 */
#include "privsep/privsep.h"

#include <sys/resource.h>

#include "common/log.h"

#define nitems(a) (sizeof(a) / sizeof((a)[0]))

#ifdef AGRIPPA_SANITIZE
#define RL_NPROC_ENFORCED 0 /* LeakSanitizer's exit-time tracer is a new task */
#else
#define RL_NPROC_ENFORCED 1
#endif

struct rl_policy {
	enum ipc_role role;
	rlim_t nofile; /* RLIMIT_NOFILE, 0: leave as it is */
	int nofork;    /* RLIMIT_NPROC 0: this role never creates a task */
};

/* clang-format off */
static const struct rl_policy rl_policies[] = {
	/* engine: its supervisor channel and a few descriptors in transit. */
	{ ROLE_ENGINE, 1024, 1 },
	/* httpd: one descriptor per client, many of them long-lived SSE streams. */
	{ ROLE_HTTPD, 65536, 1 },
	/* proxy: libcurl's resolver threads count against RLIMIT_NPROC. */
	{ ROLE_PROXY, 1024, 0 },
	/* runner: its supervisor and sandbox channels. */
	{ ROLE_RUNNER, 256, 1 },
	/* egress: two descriptors per tunnel (1024 runs' worth of listeners and
	 * tunnels_per_run at most 1024 each would be more; the per-run limit
	 * keeps one run from taking them all). */
	{ ROLE_EGRESS, 65536, 1 },
	/* Later roles get only RLIMIT_CORE until their own limits are set here. */
};
/* clang-format on */

/* Lowers soft and hard limit of res to value, clamped to the hard limit. */
static void
rl_set(int res, const char *name, rlim_t value)
{
	struct rlimit rl;

	if (getrlimit(res, &rl) == -1)
		fatal("getrlimit(%s)", name);
	if (rl.rlim_max != RLIM_INFINITY && value > rl.rlim_max)
		value = rl.rlim_max;
	rl.rlim_cur = rl.rlim_max = value;
	if (setrlimit(res, &rl) == -1)
		fatal("setrlimit(%s)", name);
}

static const struct rl_policy *
rl_policy_for(enum ipc_role role)
{
	size_t i;

	for (i = 0; i < nitems(rl_policies); i++)
		if (rl_policies[i].role == role)
			return &rl_policies[i];
	return NULL;
}

void
privsep_rlimits(enum ipc_role role)
{
	const struct rl_policy *p = rl_policy_for(role);

	/* No core files: they would hold whatever the process had in memory. */
	rl_set(RLIMIT_CORE, "RLIMIT_CORE", 0);
	if (p == NULL)
		return;
	if (p->nofile != 0)
		rl_set(RLIMIT_NOFILE, "RLIMIT_NOFILE", p->nofile);
	/*
	 * RLIMIT_NPROC 0 makes fork() and clone() fail for a non-root uid even
	 * though the user already runs processes: only new tasks are refused.
	 */
	if (p->nofork && RL_NPROC_ENFORCED)
		rl_set(RLIMIT_NPROC, "RLIMIT_NPROC", 0);
}
