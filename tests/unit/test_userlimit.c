/*
 * Unit tests for the per-user request limit (httpd/userlimit.c) with a
 * clock of the test's own: a user's burst, its refill at the rate,
 * Retry-After, users apart from each other, no limit at rate 0, and a
 * table that forgets full buckets and, full of spending users, lets a new
 * one through rather than refuse it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>

#include "httpd/httpd.h"

#define U1 "11111111-1111-4111-8111-111111111111"
#define U2 "22222222-2222-4222-8222-222222222222"

/* n requests of uid at now: how many were let through */
static int
takes(const char *uid, uint64_t now, int n)
{
	unsigned wait;
	int i, allowed = 0;

	for (i = 0; i < n; i++)
		allowed += user_limit_take(uid, now, &wait) == 0;
	return allowed;
}

static void
test_burst_then_rate(void **state)
{
	unsigned wait = 0;

	user_limit_conf(10, 50);
	assert_int_equal(takes(U1, 1000, 60), 50);
	assert_int_equal(user_limit_take(U1, 1000, &wait), -1);
	assert_int_equal(wait, 1); /* 10 a second: the next in 100 ms, said as 1 s */
	/* 10 a second: 1 s later, ten more */
	assert_int_equal(takes(U1, 2000, 20), 10);
	/* never more than the burst, however long it waited */
	assert_int_equal(takes(U1, 1000000, 100), 50);
}

static void
test_retry_after_slow_rate(void **state)
{
	unsigned wait = 0;

	user_limit_conf(1, 1);
	assert_int_equal(takes(U1, 0, 1), 1);
	assert_int_equal(user_limit_take(U1, 0, &wait), -1);
	assert_int_equal(wait, 1);
	user_limit_conf(1, 3);
	assert_int_equal(takes(U1, 0, 3), 3);
	assert_int_equal(user_limit_take(U1, 200, &wait), -1);
	assert_int_equal(wait, 1); /* 800 ms to go */
}

static void
test_users_apart(void **state)
{
	user_limit_conf(5, 20);
	assert_int_equal(takes(U1, 0, 1000), 20);
	/* the flooding user takes nothing of the other's */
	assert_int_equal(takes(U2, 0, 20), 20);
	assert_int_equal(takes(U2, 0, 1), 0);
	assert_int_equal(takes(U1, 0, 1), 0);
}

static void
test_off(void **state)
{
	user_limit_conf(0, 1);
	assert_int_equal(takes(U1, 0, 100000), 100000);
}

static void
test_table(void **state)
{
	char uid[40];
	int i, ok = 1;

	/* 20000 users one request each, over time: full buckets are forgotten,
	 * so the table never fills and each is limited as alone */
	user_limit_conf(1000, 2);
	for (i = 0; i < 20000; i++) {
		snprintf(uid, sizeof(uid), "%08x-0000-4000-8000-000000000000", i);
		ok &= takes(uid, (uint64_t)i * 10, 2) == 2;
		ok &= takes(uid, (uint64_t)i * 10, 1) == 0;
	}
	assert_true(ok);
	/* 10000 users spending at once (no time passes, nothing refills): once
	 * 6144 are kept, a user the table has no room for goes through */
	user_limit_conf(1, 1);
	for (i = 0; i < 10000; i++) {
		snprintf(uid, sizeof(uid), "%08x-1111-4111-8111-111111111111", i);
		takes(uid, 5, 1);
	}
	snprintf(uid, sizeof(uid), "%08x-1111-4111-8111-111111111111", 9999);
	assert_int_equal(takes(uid, 5, 3), 3);
	/* one kept early is still limited */
	snprintf(uid, sizeof(uid), "%08x-1111-4111-8111-111111111111", 0);
	assert_int_equal(takes(uid, 5, 1), 0);
}

static void
test_compaction_rate(void **state)
{
	char uid[40];
	int i;

	/* 6144 users spend their whole burst at 0 ms; a bucket is full again
	 * 1.5 s later.  The table is looked over at most once a second, not for
	 * every user it has no room for. */
	user_limit_conf(2, 3);
	for (i = 0; i < 6144; i++) {
		snprintf(uid, sizeof(uid), "%08x-3333-4333-8333-333333333333", i);
		takes(uid, 0, 3);
	}
	/* 0 ms: looked over, nothing to forget: a new user goes unlimited */
	snprintf(uid, sizeof(uid), "%08x-4444-4444-8444-444444444444", 1);
	assert_int_equal(takes(uid, 0, 5), 5);
	/* 1000 ms: looked over again, nothing full yet */
	snprintf(uid, sizeof(uid), "%08x-4444-4444-8444-444444444444", 2);
	assert_int_equal(takes(uid, 1000, 5), 5);
	/* 1600 ms: every kept bucket is full, but the table is not looked over
	 * before 2000 ms: still unlimited */
	snprintf(uid, sizeof(uid), "%08x-4444-4444-8444-444444444444", 3);
	assert_int_equal(takes(uid, 1600, 5), 5);
	/* 2000 ms: the full buckets are forgotten and the new user is limited */
	assert_int_equal(takes(uid, 2000, 5), 3);
	snprintf(uid, sizeof(uid), "%08x-3333-4333-8333-333333333333", 0);
	assert_int_equal(takes(uid, 2000, 5), 3);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_burst_then_rate),
		cmocka_unit_test(test_retry_after_slow_rate),
		cmocka_unit_test(test_users_apart),
		cmocka_unit_test(test_off),
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_compaction_rate),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
