/*
 * Unit tests for common/util.c's sizes for a person (fmt_size): each unit
 * from its first byte, tenths that round down, the largest value.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/util.h"

static void
t_fmt_size(void **state)
{
	static const struct {
		uint64_t bytes;
		const char *text;
	} cases[] = {
	    {0, "0 B"},
	    {1, "1 B"},
	    {1023, "1023 B"},
	    {1024, "1.0 KiB"},
	    {1536, "1.5 KiB"},
	    {1024 * 1024 - 1, "1023.9 KiB"},
	    {1024 * 1024, "1.0 MiB"},
	    {12900000, "12.3 MiB"},
	    {5ULL * 1024 * 1024 * 1024, "5.0 GiB"},
	    {3ULL << 40, "3.0 TiB"},
	    {UINT64_MAX, "15.9 EiB"},
	};
	char buf[32];
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_string_equal(fmt_size(cases[i].bytes, buf, sizeof(buf)), cases[i].text);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_fmt_size),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
