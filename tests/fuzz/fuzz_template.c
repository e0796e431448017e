/* FUZZ_SOURCES: tmpl/tmpl.c tmpl/ref.c egress/policy.c egress/host.c */
/*
 * libFuzzer target for the template compiler: any byte string must give
 * either a compiled JSON object whose "name" is a string and no error, or
 * -1 with one or more "fuzz.yaml:..." lines, never a crash, a leak or a
 * hang.  Seeds: tests/fuzz/corpus/template/.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tmpl/tmpl.h"

#define FUZZ_NAME "fuzz.yaml"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Every line of err is a whole "fuzz.yaml:..." line; returns their number. */
static size_t
fuzz_lines(const char *err)
{
	const char *nl;
	size_t n = 0;

	while (*err != '\0') {
		if (strncmp(err, FUZZ_NAME ":", sizeof(FUZZ_NAME)) != 0)
			abort();
		if ((nl = strchr(err, '\n')) == NULL)
			abort();
		err = nl + 1;
		n++;
	}
	return n;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char err[4096];
	json_t *doc = (json_t *)1;
	unsigned nerr = 12345;
	char *dump;
	size_t lines;
	int rc;

	memset(err, 'X', sizeof(err));
	rc = tmpl_compile(FUZZ_NAME, data, size, &doc, err, sizeof(err), &nerr);
	if (memchr(err, '\0', sizeof(err)) == NULL)
		abort();
	if (rc == 0) {
		if (err[0] != '\0' || nerr != 0 || !json_is_object(doc) ||
		    !json_is_string(json_object_get(doc, "name")) ||
		    !json_is_array(json_object_get(doc, "phases")))
			abort();
		/* the document serialises (valid UTF-8 throughout) */
		if ((dump = json_dumps(doc, JSON_COMPACT)) == NULL)
			abort();
		free(dump);
		json_decref(doc);
		return 0;
	}
	if (rc != -1 || doc != NULL || err[0] == '\0')
		abort();
	lines = fuzz_lines(err);
	if (nerr < lines || nerr == 0)
		abort();
	return 0;
}
