/*
 * secretset: values to redact (a run's credentials, an MCP server's), each
 * a copy in sodium_malloc memory, which sodium_free wipes.  One set per
 * holder: a run's MCP credentials (runs.c), those a server's sandbox masks
 * (mcp_runs.c), those `agrippactl mcp test` masks in its answer (mcptest.c).
 */
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "supervisor/supervisor.h"

void
secret_set_copy(struct secret_set *s, const void *p, size_t n)
{
	unsigned char **np;
	size_t *nl;

	if (n == 0)
		return;
	if ((np = reallocarray(s->p, s->n + 1, sizeof(*np))) == NULL)
		fatal("secrets");
	s->p = np;
	if ((nl = reallocarray(s->len, s->n + 1, sizeof(*nl))) == NULL)
		fatal("secrets");
	s->len = nl;
	if ((s->p[s->n] = sodium_malloc(n)) == NULL)
		fatalx("out of memory");
	memcpy(s->p[s->n], p, n);
	s->len[s->n++] = n;
}

void
secret_set_redact(const struct secret_set *s, char *p, size_t len)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		mem_redact(p, len, s->p[i], s->len[i]);
}

void
secret_set_free(struct secret_set *s)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		sodium_free(s->p[i]); /* wipes it */
	free(s->p);
	free(s->len);
	memset(s, 0, sizeof(*s));
}
