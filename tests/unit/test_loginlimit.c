/*
 * Unit tests for the login limit (httpd/loginlimit.c) with a clock of the
 * test's own: an address's burst and refill, Retry-After, a success giving
 * its tokens back, the limit of all addresses, IPv6 /64s and IPv4-mapped
 * addresses, a full table, and a bucket's refusals marked for the audit
 * at most once a minute.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>

#include "httpd/httpd.h"

static int
setup(void **state)
{
	login_limit_reset();
	return 0;
}

/* take n attempts from addr at now: how many were allowed */
static int
takes(const char *addr, uint64_t now, int n)
{
	struct login_refusal why;
	int i, allowed = 0;

	for (i = 0; i < n; i++)
		allowed += login_limit_take(addr, now, &why) == 0;
	return allowed;
}

static void
test_address_burst_and_refill(void **state)
{
	struct login_refusal why;

	assert_int_equal(takes("192.0.2.1", 1000, LOGIN_ADDR_BURST), LOGIN_ADDR_BURST);
	assert_int_equal(login_limit_take("192.0.2.1", 1000, &why), -1);
	assert_string_equal(why.scope, "address");
	assert_int_equal(why.retry_after, LOGIN_ADDR_REFILL_MS / 1000);
	assert_true(why.first);
	/* refused again: not the first of the episode, and it took nothing */
	assert_int_equal(login_limit_take("192.0.2.1", 1000 + LOGIN_ADDR_REFILL_MS - 1500, &why), -1);
	assert_false(why.first);
	assert_int_equal(why.retry_after, 2);
	/* one more once a refill period has passed, only one */
	assert_int_equal(takes("192.0.2.1", 1000 + LOGIN_ADDR_REFILL_MS, 1), 1);
	assert_int_equal(login_limit_take("192.0.2.1", 1000 + LOGIN_ADDR_REFILL_MS, &why), -1);
	assert_false(why.first); /* audited less than a minute ago */
	assert_int_equal(takes("192.0.2.1", 10000 + LOGIN_AUDIT_MS, LOGIN_ADDR_BURST), LOGIN_ADDR_BURST);
	assert_int_equal(login_limit_take("192.0.2.1", 10000 + LOGIN_AUDIT_MS, &why), -1);
	assert_true(why.first); /* a minute later: audited again */
	/* another address is not limited */
	assert_int_equal(takes("192.0.2.2", 1000, 1), 1);
}

static void
test_success_gives_back(void **state)
{
	int i;

	/* a hundred good logins in a row: never limited */
	for (i = 0; i < 100; i++) {
		assert_int_equal(takes("192.0.2.7", 5000, 1), 1);
		login_limit_refund("192.0.2.7", 5000);
	}
	/* the burst is still whole (refunds never pass the burst) */
	assert_int_equal(takes("192.0.2.7", 5000, LOGIN_ADDR_BURST + 5), LOGIN_ADDR_BURST);
}

static void
test_all_addresses(void **state)
{
	struct login_refusal why;
	char a[32];
	int i, allowed = 0;

	/* failures spread over many addresses, each under its own limit */
	for (i = 0; i < LOGIN_ALL_BURST + 20; i++) {
		snprintf(a, sizeof(a), "198.51.100.%d", i % 250);
		allowed += login_limit_take(a, 100, &why) == 0;
	}
	assert_int_equal(allowed, LOGIN_ALL_BURST);
	assert_int_equal(login_limit_take("203.0.113.9", 100, &why), -1);
	assert_string_equal(why.scope, "all");
	assert_int_equal(why.retry_after, 1);
	assert_int_equal(takes("203.0.113.9", 100 + LOGIN_ALL_REFILL_MS, 1), 1);
}

static void
test_ipv6_prefix(void **state)
{
	struct login_refusal why;

	assert_int_equal(takes("2001:db8:1:2::1", 0, LOGIN_ADDR_BURST), LOGIN_ADDR_BURST);
	/* another host of the same /64 is the same client */
	assert_int_equal(login_limit_take("2001:db8:1:2:ffff::9", 0, &why), -1);
	/* another /64 is not */
	assert_int_equal(takes("2001:db8:1:3::1", 0, 1), 1);
	/* an IPv4-mapped address is its IPv4 address */
	assert_int_equal(takes("::ffff:192.0.2.50", 0, LOGIN_ADDR_BURST), LOGIN_ADDR_BURST);
	assert_int_equal(login_limit_take("192.0.2.50", 0, &why), -1);
}

static void
test_full_table(void **state)
{
	struct login_refusal why;
	char a[32];
	int i;

	/* the attacker's address, spent */
	assert_int_equal(takes("192.0.2.99", 0, LOGIN_ADDR_BURST), LOGIN_ADDR_BURST);
	/* then more addresses than the table holds, all at once (the bucket of
	 * all refuses most: their buckets stay full) */
	for (i = 0; i < 5000; i++) {
		snprintf(a, sizeof(a), "10.%d.%d.1", i / 250, i % 250);
		login_limit_take(a, 0, &why);
	}
	/* the fullest buckets made room, not the spent one: still limited as
	 * an address (a forgotten one would be new, and full) */
	assert_int_equal(login_limit_take("192.0.2.99", 0, &why), -1);
	assert_string_equal(why.scope, "address");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_address_burst_and_refill, setup),
	    cmocka_unit_test_setup(test_success_gives_back, setup),
	    cmocka_unit_test_setup(test_all_addresses, setup),
	    cmocka_unit_test_setup(test_ipv6_prefix, setup),
	    cmocka_unit_test_setup(test_full_table, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
