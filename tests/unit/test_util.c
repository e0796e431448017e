/*
 * Unit tests for common/util.c: sizes for a person (fmt_size): each unit
 * from its first byte, tenths that round down, the largest value; and
 * redaction (mem_redact): every occurrence, overlapping ones, the text's
 * length kept, nothing outside it touched, short secrets left alone.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

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

static void
t_mem_redact(void **state)
{
	char buf[64];

	/* every occurrence, at the start, inside, at the end */
	strcpy(buf, "k3yZk3yZ {\"a\":\"xk3yZx\"} k3yZ");
	mem_redact(buf, strlen(buf), "k3yZ", 4);
	assert_string_equal(buf, "******** {\"a\":\"x****x\"} ****");
	/* overlapping occurrences: the first, then the rest after it */
	strcpy(buf, "aaaaaaaaa");
	mem_redact(buf, strlen(buf), "aaaa", 4);
	assert_string_equal(buf, "********a");
	/* only len bytes are looked at: a match across the end is left */
	strcpy(buf, "xxsecretxx");
	mem_redact(buf, 5, "secret", 6);
	assert_string_equal(buf, "xxsecretxx");
	mem_redact(buf, 8, "secret", 6);
	assert_string_equal(buf, "xx******xx");
	/* binary secrets, NULs included */
	memcpy(buf, "a\0b\0c\0d", 7);
	mem_redact(buf, 7, "\0b\0c", 4);
	assert_memory_equal(buf, "a****\0d", 7);
	/* under REDACT_MIN bytes, or none: nothing is changed */
	strcpy(buf, "abcabc");
	mem_redact(buf, strlen(buf), "abc", 3);
	mem_redact(buf, strlen(buf), NULL, 8);
	mem_redact(buf, 0, "abca", 4);
	assert_string_equal(buf, "abcabc");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_fmt_size),
	    cmocka_unit_test(t_mem_redact),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
