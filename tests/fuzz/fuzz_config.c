/* FUZZ_SOURCES: supervisor/config.c egress/policy.c egress/host.c egress/addr.c */
/*
 * libFuzzer target for the configuration parser: any byte string must give
 * either a valid config or well-formed "name:line:col: reason" lines, never
 * a crash, a leak or a hang.  Seeds: tests/fuzz/corpus/config/.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct config c;
	static char err[4096];
	int rc;

	rc = config_parse("fuzz.yaml", data, size, &c, err, sizeof(err));
	/* the contract: success says nothing, failure says something, and
	 * errbuf always holds a terminated string */
	if (memchr(err, '\0', sizeof(err)) == NULL || (rc == 0) != (err[0] == '\0'))
		abort();
	if (rc == 0 && (c.nlisten == 0 || c.nlisten > CONF_MAX_LISTEN || c.state_dir[0] != '/'))
		abort();
	return 0;
}
