/*
 * Unit tests for sandbox/relay.c, the redacting line relay of an MCP
 * server's output: lines pass whole and unchanged; every occurrence of a
 * secret is masked byte for byte, also when the server wrote it across
 * reads, across the window's boundary of a line longer than the window,
 * overlapping itself, or at the very end; a line over the cap goes out as
 * exactly cap + 1 bytes with no secret's beginning in its tail, and nothing
 * after it; bad secrets are refused.  The streams are compared with a
 * reference that masks the whole stream at once, under random chunking.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/relay.h"

struct sink {
	char *p;
	size_t len, cap;
	size_t writes;
};

static void
sink_add(struct sink *s, const char *p, size_t n)
{
	if (s->len + n + 1 > s->cap) {
		s->cap = (s->len + n + 1) * 2;
		s->p = realloc(s->p, s->cap);
		assert_non_null(s->p);
	}
	memcpy(s->p + s->len, p, n);
	s->len += n;
	s->p[s->len] = '\0';
	s->writes++;
}

static unsigned rng = 12345;

static unsigned
rnd(unsigned n)
{
	rng = rng * 1103515245u + 12345u;
	return (rng >> 8) % n;
}

/* Feed in[0..n) in chunks of at most chunk bytes (random sizes when
 * random), take every output, then the end of input.  Returns what went
 * out (in *out, to free). */
static void
feed(struct relay *r, const char *in, size_t n, size_t chunk, int random, int eof, struct sink *out)
{
	size_t off = 0, room, k, o;
	const char *p;
	char *dst;

	while (off < n && !relay_cut(r)) {
		room = relay_space(r, &dst);
		assert_true(room > 0);
		k = random ? 1 + rnd((unsigned)chunk) : chunk;
		if (k > room)
			k = room;
		if (k > n - off)
			k = n - off;
		memcpy(dst, in + off, k);
		off += k;
		if ((o = relay_filled(r, k, 0, &p)) > 0) {
			sink_add(out, p, o);
			relay_sent(r);
		}
	}
	while (eof && !relay_cut(r) && (o = relay_filled(r, 0, 1, &p)) > 0) {
		sink_add(out, p, o);
		relay_sent(r);
	}
}

/* in with every occurrence (overlapping ones too) of each secret masked. */
static char *
reference(const char *in, size_t n, const struct relay_secret *sec, size_t nsec)
{
	char *o = malloc(n + 1);
	size_t i, at;

	assert_non_null(o);
	memcpy(o, in, n);
	o[n] = '\0';
	for (i = 0; i < nsec; i++)
		for (at = 0; at + sec[i].n <= n; at++)
			if (memcmp(in + at, sec[i].p, sec[i].n) == 0)
				memset(o + at, '*', sec[i].n);
	return o;
}

static void
test_lines_unchanged(void **state)
{
	struct relay r;
	struct sink out = {0};
	char err[128];
	const char *in = "{\"a\":1}\n{\"b\":2}\npartial";

	(void)state;
	assert_int_equal(relay_init(&r, 4096, 1000, NULL, 0, err, sizeof(err)), 0);
	feed(&r, in, strlen(in), 5, 0, 0, &out);
	/* the unfinished line waits for its end */
	assert_int_equal(out.len, 16);
	assert_memory_equal(out.p, in, 16);
	feed(&r, " line\n", 6, 6, 0, 1, &out);
	assert_string_equal(out.p, "{\"a\":1}\n{\"b\":2}\npartial line\n");
	relay_free(&r);
	free(out.p);
}

static void
test_secret_masked(void **state)
{
	static const struct relay_secret sec[] = {{"tok_SECRET_1234", 15}, {"xyz9", 4}};
	const char *in = "{\"env\":\"API=tok_SECRET_1234 B=xyz9xyz9\"}\n";
	struct relay r;
	struct sink out = {0};
	char err[128];

	(void)state;
	assert_int_equal(relay_init(&r, 4096, 1 << 20, sec, 2, err, sizeof(err)), 0);
	feed(&r, in, strlen(in), 4096, 0, 1, &out);
	assert_string_equal(out.p, "{\"env\":\"API=*************** B=********\"}\n");
	relay_free(&r);
	free(out.p);
}

/* A value split across two reads of a short line, at every position. */
static void
test_split_across_reads(void **state)
{
	static const struct relay_secret sec[] = {{"ghp_0123456789abcdef", 20}};
	const char *in = "{\"text\":\"token is ghp_0123456789abcdef here\"}\n";
	size_t n = strlen(in), cut;
	char *want = reference(in, n, sec, 1);
	struct relay r;
	char err[128];

	(void)state;
	for (cut = 1; cut < n; cut++) {
		struct sink out = {0};

		assert_int_equal(relay_init(&r, 4096, 1 << 20, sec, 1, err, sizeof(err)), 0);
		feed(&r, in, cut, cut, 0, 0, &out);
		feed(&r, in + cut, n - cut, n, 0, 1, &out);
		assert_string_equal(out.p, want);
		assert_null(strstr(out.p, "ghp_0123"));
		relay_free(&r);
		free(out.p);
	}
	free(want);
}

/*
 * Lines longer than the window, with values at every offset around the
 * window's boundaries, fed in random chunks: the output is the stream with
 * every value masked, no more and no less.
 */
static void
test_long_lines_random(void **state)
{
	static const struct relay_secret sec[] = {
	    {"S3CR3T-VALUE-0123456789", 23}, {"k3y!", 4}, {"abcabcab", 8}};
	const size_t cap = 512, n = 6000;
	char *in = malloc(n), *want;
	struct relay r;
	char err[128];
	size_t i, round, pos;

	(void)state;
	assert_non_null(in);
	for (round = 0; round < 400; round++) {
		struct sink out = {0};

		for (i = 0; i < n; i++)
			in[i] = (char)('a' + rnd(3)); /* a, b, c: overlapping abcab.. appear */
		for (i = 0; i < 12; i++) {
			const struct relay_secret *s = &sec[rnd(3)];

			pos = rnd((unsigned)(n - s->n));
			memcpy(in + pos, s->p, s->n);
		}
		if (round % 3 == 0) /* some lines, some of them long */
			for (i = 0; i < 4; i++)
				in[rnd((unsigned)n)] = '\n';
		want = reference(in, n, sec, 3);
		assert_int_equal(relay_init(&r, cap, 1 << 20, sec, 3, err, sizeof(err)), 0);
		feed(&r, in, n, 1 + rnd(700), 1, 1, &out);
		assert_int_equal(out.len, n);
		assert_memory_equal(out.p, want, n);
		relay_free(&r);
		free(out.p);
		free(want);
	}
	free(in);
}

/* A value cut in two by the window's boundary is masked on both sides. */
static void
test_boundary_carry(void **state)
{
	static const struct relay_secret sec[] = {{"0123456789ABCDEFGHIJ", 20}};
	const size_t cap = 256, n = 1024;
	char in[1024], *want;
	struct relay r;
	char err[128];
	size_t pos;

	(void)state;
	for (pos = cap - 40; pos < cap + 20; pos++) {
		struct sink out = {0};

		memset(in, 'x', n);
		memcpy(in + pos, sec[0].p, sec[0].n);
		want = reference(in, n, sec, 1);
		assert_int_equal(relay_init(&r, cap, 1 << 20, sec, 1, err, sizeof(err)), 0);
		feed(&r, in, n, cap, 0, 1, &out);
		assert_int_equal(out.len, n);
		assert_memory_equal(out.p, want, n);
		/* the window went out in pieces, never all at the end */
		assert_true(out.writes >= 4);
		relay_free(&r);
		free(out.p);
		free(want);
	}
}

/* A line over the cap: the lines before it whole, then exactly cap + 1 of
 * its bytes, the last ones masked, and nothing more. */
static void
test_line_cap(void **state)
{
	static const struct relay_secret sec[] = {{"CAPSECRET1", 10}};
	const size_t max = 3000;
	char in[8000];
	struct relay r;
	struct sink out = {0};
	char err[128];
	const char *first = "{\"ok\":1}\n";
	size_t i, fl = strlen(first);

	(void)state;
	memcpy(in, first, fl);
	memset(in + fl, 'y', sizeof(in) - fl);
	/* a value that begins just before the cut: its first bytes must not go */
	memcpy(in + fl + max + 1 - 4, sec[0].p, sec[0].n);
	assert_int_equal(relay_init(&r, 1024, max, sec, 1, err, sizeof(err)), 0);
	feed(&r, in, sizeof(in), 100, 0, 1, &out);
	assert_true(relay_cut(&r));
	assert_int_equal(out.len, fl + max + 1);
	assert_memory_equal(out.p, first, fl);
	assert_null(strstr(out.p, "CAPS"));
	for (i = 0; i < 9; i++)
		assert_int_equal(out.p[out.len - 1 - i], '*');
	assert_int_equal(out.p[out.len - 10 - 1], 'y');
	/* nothing more is taken */
	{
		char *p;

		assert_int_equal(relay_space(&r, &p), 0);
	}
	relay_free(&r);
	free(out.p);
}

/* A line of exactly the cap passes, one byte more is cut; also when the
 * whole line is in one read, and at the end of the output. */
static void
test_line_cap_exact(void **state)
{
	const size_t max = 700;
	char in[1403];
	struct relay r;
	char err[128];
	int eof;

	(void)state;
	for (eof = 0; eof < 2; eof++) {
		struct sink out = {0};

		memset(in, 'z', sizeof(in));
		in[max] = '\n';
		in[sizeof(in) - 1] = '\n'; /* the second line: 701 bytes */
		assert_int_equal(relay_init(&r, 4096, max, NULL, 0, err, sizeof(err)), 0);
		feed(&r, in, sizeof(in), sizeof(in), 0, eof, &out);
		assert_true(relay_cut(&r));
		assert_int_equal(out.len, max + 1 + max + 1);
		assert_int_equal(out.p[max], '\n');
		assert_int_equal(out.p[out.len - 1], 'z');
		relay_free(&r);
		free(out.p);
	}
}

/* A log's unfinished line goes when flushed, but for what could begin a
 * secret, which waits for the next bytes. */
static void
test_flush(void **state)
{
	static const struct relay_secret sec[] = {{"SECRET12", 8}};
	struct relay r;
	struct sink out = {0};
	char err[128], *dst;
	const char *p;
	size_t o;

	(void)state;
	assert_int_equal(relay_init(&r, 4096, (size_t)-1 / 4, sec, 1, err, sizeof(err)), 0);
	feed(&r, "starting up", 11, 11, 0, 0, &out);
	assert_int_equal(out.len, 0);
	o = relay_flush(&r, &p);
	assert_int_equal(o, 11);
	sink_add(&out, p, o);
	relay_sent(&r);
	feed(&r, "; token SEC", 11, 11, 0, 0, &out);
	o = relay_flush(&r, &p);
	assert_int_equal(o, 8); /* "SEC" waits */
	sink_add(&out, p, o);
	relay_sent(&r);
	assert_int_equal(relay_flush(&r, &p), 0);
	feed(&r, "RET12 done\n", 11, 11, 0, 0, &out);
	assert_string_equal(out.p, "starting up; token ******** done\n");
	/* held bytes that begin the secret stay held, and are masked once
	 * the rest comes */
	assert_true(relay_space(&r, &dst) >= 9);
	memcpy(dst, "x SECRET1", 9);
	assert_int_equal(relay_filled(&r, 9, 0, &p), 0);
	o = relay_flush(&r, &p);
	assert_int_equal(o, 2);
	sink_add(&out, p, o);
	relay_sent(&r);
	feed(&r, "2\n", 2, 2, 0, 1, &out);
	assert_string_equal(out.p, "starting up; token ******** done\nx ********\n");
	relay_free(&r);
	free(out.p);
}

static void
test_bad_secrets(void **state)
{
	static const struct relay_secret nl[] = {{"abc\ndef", 7}};
	static const struct relay_secret shortone[] = {{"ab", 2}};
	static char big[RELAY_SECRET_MAX + 1];
	struct relay_secret huge[] = {{big, sizeof(big)}};
	struct relay r;
	struct sink out = {0};
	char err[128];
	const char *p;

	(void)state;
	memset(big, 'q', sizeof(big));
	assert_int_equal(relay_init(&r, 4096, 100, nl, 1, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "newline"));
	assert_int_equal(relay_init(&r, 1 << 20, 100, huge, 1, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "too long"));
	assert_int_equal(relay_init(&r, 4096, 0, NULL, 0, err, sizeof(err)), -1);
	huge[0].n = 2000;
	assert_int_equal(relay_init(&r, 4096, 100, huge, 1, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "too small"));
	/* a value shorter than RELAY_SECRET_MIN is not searched for */
	assert_int_equal(relay_init(&r, 4096, 100, shortone, 1, err, sizeof(err)), 0);
	feed(&r, "ab ab\n", 6, 6, 0, 1, &out);
	assert_string_equal(out.p, "ab ab\n");
	assert_int_equal(relay_filled(&r, 0, 1, &p), 0);
	relay_free(&r);
	free(out.p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_lines_unchanged),    cmocka_unit_test(test_secret_masked),
	    cmocka_unit_test(test_split_across_reads), cmocka_unit_test(test_long_lines_random),
	    cmocka_unit_test(test_boundary_carry),     cmocka_unit_test(test_line_cap),
	    cmocka_unit_test(test_line_cap_exact),     cmocka_unit_test(test_flush),
	    cmocka_unit_test(test_bad_secrets),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
