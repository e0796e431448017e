/*
 * kinds: the table of step kinds (core.h), one file per kind, as an
 * OpenBSD daemon gives each peer its own handler.  A new kind is a new
 * file and a line here.
 */
#include <stdio.h>
#include <string.h>

#include "runner/core.h"

/* A kind with no file of its own yet: its steps fail at their start. */
static void
unsupported_start(struct rstep *s)
{
	char err[128];

	snprintf(err, sizeof(err), "%s steps are not supported yet", s->kind);
	runner_step_fail(s, err);
}

/* A kind no entry names (the template compiler lets none through). */
static const struct step_kind step_unknown = {
	.name = "?",
	.start = unsupported_start,
};

const struct step_kind *const step_kinds[] = {
	&step_agent,
	&step_command,
	&step_patch,
	&step_checkpoint,
	&step_pull_request,
	NULL,
};

const struct step_kind *
step_kind_find(const char *name)
{
	const struct step_kind *const *k;

	for (k = step_kinds; *k != NULL; k++)
		if (strcmp((*k)->name, name) == 0)
			return *k;
	return &step_unknown;
}
