/* FUZZ_SOURCES: egress/policy.c egress/host.c */
/*
 * libFuzzer target for the reader of MCP server specs and their
 * credentials (common/mcpspec.c), which take an operator's files and
 * standard input.  Input: CREDENTIALS NUL SPEC, or SPEC alone (no
 * credentials).
 *
 * The contract: refused credentials or a refused spec say why on one
 * line, naming what they refuse ("credentials...", "spec...", or the
 * spec's LINE:COLUMN); accepted credentials hold only what the format
 * allows; an accepted spec's normal form reads back as itself, with and
 * without the checks, and what the struct says agrees with it: a program
 * first, absolute paths none of which overlaps the daemon's own, timeouts
 * in range, a URL curl wrote back, every reference expanding against the
 * credentials it was checked with.  Never a crash, a leak or a hang.
 * Seeds: tests/fuzz/corpus/mcpspec/.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "common/mcpspec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const forbidden[] = {"/var/lib/agrippa", "/etc/agrippad.yaml"};

/* One line, beginning with one of the prefixes. */
static void
err_ok(const char *err, const char *const *prefixes, size_t n)
{
	size_t i;

	if (err[0] == '\0' || strchr(err, '\n') != NULL)
		abort();
	for (i = 0; i < n; i++)
		if (strncmp(err, prefixes[i], strlen(prefixes[i])) == 0)
			return;
	if (err[0] >= '0' && err[0] <= '9') /* LINE:COLUMN */
		return;
	abort();
}

static void
creds_ok(const struct mcp_creds *c)
{
	size_t i, j, len, n = mcp_creds_count(c);
	const char *v, *k;

	if (n == 0 || n > MCP_CREDS_KEYS_MAX)
		abort();
	for (i = 0; i < n; i++) {
		k = mcp_creds_key(c, i);
		v = mcp_creds_value(c, i, &len);
		if (k == NULL || v == NULL || strlen(k) == 0 || strlen(k) > MCP_CREDS_KEY_MAX ||
		    len < MCP_CREDS_VALUE_MIN || strlen(v) != len ||
		    mcp_creds_find(c, k, strlen(k)) != (int)i)
			abort();
		for (j = 0; j < len; j++)
			if (v[j] < 0x20 || v[j] > 0x7e || v[j] == '"' || v[j] == '\\')
				abort();
	}
}

static void
vars_ok(const struct mcpspec_var *v, size_t n, const struct mcp_creds *c)
{
	size_t i, len;
	char *x;

	for (i = 0; i < n; i++) {
		if (v[i].name == NULL || v[i].value == NULL || v[i].refs < 0)
			abort();
		if ((x = mcpspec_expand(v[i].value, c, &len)) == NULL)
			abort(); /* checked against c: every key exists */
		if (strlen(x) != len || (v[i].refs == 0 && strcmp(x, v[i].value) != 0))
			abort();
		sodium_free(x);
	}
}

static void
spec_ok(const struct mcpspec *s, const struct mcpspec_ctx *ctx)
{
	struct mcpspec *back;
	size_t i, f;

	if (s->call_timeout < 1 || s->call_timeout > MCPSPEC_CALL_MAX)
		abort();
	if (s->transport == MCPSPEC_HTTP) {
		if (s->url == NULL ||
		    (strncmp(s->url, "https://", 8) != 0 && strncmp(s->url, "http://", 7) != 0))
			abort();
		vars_ok(s->headers, s->nheaders, ctx->creds);
	} else if (s->transport == MCPSPEC_STDIO) {
		if (s->argc < 1 || s->argv[0][0] == '\0' || s->argv[s->argc] != NULL ||
		    s->startup_timeout < 1 || s->startup_timeout > MCPSPEC_STARTUP_MAX)
			abort();
		for (i = 0; i < s->npaths; i++) {
			if (s->paths[i][0] != '/' || strcmp(s->paths[i], "/") == 0)
				abort();
			for (f = 0; f < ctx->nforbidden; f++)
				if (mcpspec_path_overlaps(s->paths[i], ctx->forbidden[f]))
					abort();
		}
		vars_ok(s->env, s->nenv, ctx->creds);
	} else
		abort();
	/* the normal form reads back as itself, checked or not */
	if ((back = mcpspec_check(s->json, NULL, NULL, 0)) == NULL ||
	    !json_equal(back->json, s->json))
		abort();
	mcpspec_free(back);
	if ((back = mcpspec_check(s->json, ctx, NULL, 0)) == NULL ||
	    !json_equal(back->json, s->json))
		abort();
	mcpspec_free(back);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const cred_prefixes[] = {"credentials"};
	static const char *const spec_prefixes[] = {"spec", "credentials", "larger than"};
	const uint8_t *nul = memchr(data, '\0', size);
	struct mcp_creds *c = NULL;
	struct mcpspec_ctx ctx = {.flags = MCPSPEC_F_CREDS,
	                          .forbidden = forbidden,
	                          .nforbidden = sizeof(forbidden) / sizeof(forbidden[0])};
	struct mcpspec *s;
	const char *spec = (const char *)data;
	size_t speclen = size;
	char err[512];

	if (nul != NULL) {
		err[0] = '\0';
		c = mcp_creds_parse((const char *)data, (size_t)(nul - data), err, sizeof(err));
		if (c == NULL) {
			err_ok(err, cred_prefixes, 1);
			return 0;
		}
		creds_ok(c);
		spec = (const char *)nul + 1;
		speclen = size - (size_t)(nul - data) - 1;
	}
	ctx.creds = c;
	err[0] = '\0';
	if ((s = mcpspec_parse(spec, speclen, &ctx, err, sizeof(err))) == NULL)
		err_ok(err, spec_prefixes, 3);
	else
		spec_ok(s, &ctx);
	mcpspec_free(s);
	mcp_creds_free(c);
	return 0;
}
