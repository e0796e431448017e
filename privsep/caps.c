/*
 * Capabilities (libcap): a child keeps none.  The bounding set can only be
 * lowered while CAP_SETPCAP is effective, i.e. before the uid change; the
 * other sets are cleared after it.
 */
#include "privsep/privsep.h"

#include <errno.h>
#include <sys/capability.h>

#include "common/log.h"

/* Returns nonzero when flag of cap is set in the current process. */
static int
caps_have(cap_value_t cap, cap_flag_t flag)
{
	cap_flag_value_t v = CAP_CLEAR;
	cap_t c;

	if ((c = cap_get_proc()) == NULL)
		fatal("cap_get_proc");
	if (cap_get_flag(c, cap, flag, &v) == -1)
		fatal("cap_get_flag");
	cap_free(c);
	return v == CAP_SET;
}

void
privsep_caps_drop_bounding(void)
{
	cap_value_t cap, max = cap_max_bits();

	if (!caps_have(CAP_SETPCAP, CAP_EFFECTIVE)) {
		log_debug("no CAP_SETPCAP: bounding set left as it is");
		return;
	}
	for (cap = 0; cap < max; cap++)
		if (CAP_IS_SUPPORTED(cap) && cap_drop_bound(cap) == -1)
			fatal("cap_drop_bound(%d)", (int)cap);
}

void
privsep_caps_clear(void)
{
	cap_t c;

	/* EINVAL: a kernel without ambient capabilities has none to clear. */
	if (cap_reset_ambient() == -1 && errno != EINVAL)
		fatal("cap_reset_ambient");
	if ((c = cap_init()) == NULL)
		fatal("cap_init");
	if (cap_clear(c) == -1 || cap_set_proc(c) == -1)
		fatal("cap_set_proc");
	cap_free(c);
}

/* Returns nonzero when no capability is raised in the ambient set. */
static int
caps_ambient_empty(void)
{
	cap_value_t cap, max = cap_max_bits();

	for (cap = 0; cap < max; cap++)
		if (cap_get_ambient(cap) > 0)
			return 0;
	return 1;
}

int
privsep_caps_empty(void)
{
	cap_t cur, none;
	int empty;

	if ((cur = cap_get_proc()) == NULL || (none = cap_init()) == NULL)
		fatal("cap_get_proc");
	empty = cap_compare(cur, none) == 0 && caps_ambient_empty();
	cap_free(cur);
	cap_free(none);
	return empty;
}
