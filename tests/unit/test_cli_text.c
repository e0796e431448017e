/*
 * agrippa(1)'s handling of text from the server (client/text.c): every
 * terminal control, C1 control, bidi override and invalid UTF-8 byte comes
 * out as visible ASCII; ordinary text, UTF-8 included, comes out as it was.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client/client.h"

static char *
clean(const char *s, size_t n, int keep_nl)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	assert_non_null(f);
	cli_clean(f, s, n, keep_nl);
	assert_int_equal(fclose(f), 0);
	return out;
}

/* No byte below 0x20 but those allowed, no DEL, no C1 in UTF-8 form. */
static void
assert_harmless(const char *s, int keep_nl)
{
	const unsigned char *p = (const unsigned char *)s;

	for (; *p != '\0'; p++) {
		if (keep_nl && (*p == '\n' || *p == '\t'))
			continue;
		assert_true(*p >= 0x20 && *p != 0x7f);
		if (*p == 0xc2)
			assert_false(p[1] >= 0x80 && p[1] <= 0x9f);
	}
}

static void
test_escapes(void **state)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
	    {"plain text", "plain text"},
	    {"\x1b]0;pwned\x07", "^[]0;pwned^G"},
	    {"\x1b[2J\x1b[H", "^[[2J^[[H"},
	    {"over\rwrite", "over^Mwrite"},
	    {"del\x7f", "del^?"},
	    {"a\nb\tc", "a^Jb^Ic"},
	    {"csi \xc2\x9b"
	     "31m",
	     "csi \\u009b31m"}, /* C1 CSI in UTF-8 */
	    {"nel \xc2\x85", "nel \\u0085"},
	    {"rlo \xe2\x80\xae"
	     "txt.exe",
	     "rlo \\u202etxt.exe"},
	    {"iso \xe2\x81\xa6x\xe2\x81\xa9", "iso \\u2066x\\u2069"},
	    {"ls \xe2\x80\xa8", "ls \\u2028"},
	    {"raw \x9b", "raw \\x9b"}, /* 8-bit CSI, not UTF-8 */
	    {"bad \xff\xfe", "bad \\xff\\xfe"},
	    {"overlong \xc0\xaf", "overlong \\xc0\\xaf"},
	    {"surrogate \xed\xa0\x80", "surrogate \\xed\\xa0\\x80"},
	    {"cut \xe2\x82", "cut \\xe2\\x82"},
	    {"caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x99\x82",
	     "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x99\x82"},
	    {"\xef\xbf\xbd", "\xef\xbf\xbd"}, /* U+FFFD, as the server writes bad bytes */
	};
	size_t i;
	char *out;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		out = clean(cases[i].in, strlen(cases[i].in), 0);
		assert_string_equal(out, cases[i].out);
		assert_harmless(out, 0);
		free(out);
	}
}

static void
test_nul_and_keep_nl(void **state)
{
	char *out;

	(void)state;
	out = clean("a\0b", 3, 0);
	assert_string_equal(out, "a^@b");
	free(out);
	out = clean("line 1\n\tline 2\r\n\x1b[1A", 20, 1);
	assert_string_equal(out, "line 1\n\tline 2^M\n^[[1A");
	assert_harmless(out, 1);
	free(out);
	out = cli_cleaned("x\x1b"
	                  "y",
	                  3);
	assert_string_equal(out, "x^[y");
	free(out);
}

/* Every byte string of length 1 to 3: the result is always harmless. */
static void
test_all_short_strings(void **state)
{
	unsigned char s[3];
	unsigned a, b;
	char *out;

	(void)state;
	for (a = 0; a < 256; a++)
		for (b = 0; b < 256; b++) {
			s[0] = (unsigned char)a;
			s[1] = (unsigned char)b;
			s[2] = 0x9b;
			out = clean((char *)s, 3, 0);
			assert_harmless(out, 0);
			free(out);
		}
}

static void
test_width_cut(void **state)
{
	char s[64];

	(void)state;
	assert_int_equal(cli_width("abc"), 3);
	assert_int_equal(cli_width("caf\xc3\xa9"), 4);
	strcpy(s, "caf\xc3\xa9 au lait");
	cli_cut(s, 4);
	assert_string_equal(s, "caf\xc3\xa9");
	strcpy(s, "short");
	cli_cut(s, 80);
	assert_string_equal(s, "short");
}

static void
test_formats(void **state)
{
	char b[32];

	(void)state;
	assert_string_equal(cli_usd(0, b, sizeof(b)), "$0.0000");
	assert_string_equal(cli_usd(1234, b, sizeof(b)), "$0.0012");
	assert_string_equal(cli_usd(2000000, b, sizeof(b)), "$2.0000");
	assert_string_equal(cli_usd(50123400, b, sizeof(b)), "$50.1234");
	assert_string_equal(cli_duration(5, b, sizeof(b)), "5s");
	assert_string_equal(cli_duration(245, b, sizeof(b)), "4m05s");
	assert_string_equal(cli_duration(7620, b, sizeof(b)), "2h07m");
	assert_string_equal(cli_duration(273600, b, sizeof(b)), "3d04h");
	assert_int_equal(cli_time("1970-01-02T00:00:01Z"), 86401);
	assert_int_equal(cli_time("1970-01-02T00:00:01"), -1);
	assert_int_equal(cli_time("1970-01-02T00:00:01Zx"), -1);
	assert_int_equal(cli_time(NULL), -1);
}

static void
test_ids(void **state)
{
	(void)state;
	assert_true(cli_is_uuid("0b7e6c2a-1d2e-4f00-9abc-DEF012345678"));
	assert_false(cli_is_uuid("0b7e6c2a-1d2e-4f00-9abc-def01234567"));
	assert_false(cli_is_uuid("0b7e6c2a-1d2e-4f00-9abc-def0123456789"));
	assert_false(cli_is_uuid("0b7e6c2a_1d2e-4f00-9abc-def012345678"));
	assert_false(cli_is_uuid("0b7e6c2a-1d2e-4f00-9abc-def01234567g"));
	assert_false(cli_is_uuid("../../../v1/projects/x/runs?a=b&c=dd"));
	assert_true(cli_is_name("run-tests"));
	assert_false(cli_is_name("-run"));
	assert_false(cli_is_name("Run"));
	assert_false(cli_is_name("a/b"));
	assert_false(cli_is_name(""));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_escapes),           cmocka_unit_test(test_nul_and_keep_nl),
	    cmocka_unit_test(test_all_short_strings), cmocka_unit_test(test_width_cut),
	    cmocka_unit_test(test_formats),           cmocka_unit_test(test_ids),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
