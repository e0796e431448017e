/*
 * Unit tests for egress/, the pure layers of the egress proxy: host
 * normalisation, address classification and allow_cidrs, allow entries and
 * matching, the request head parser and the TLS ClientHello reader.  Real
 * request heads (curl, pip, npm, git, cargo, apt, captured from each tool
 * pointed at a listener on loopback) and real ClientHellos
 * (egress_hellos.h) must pass, fed whole, byte by byte and in every split;
 * each attack of the "denied" list that these layers decide must
 * fail, with its reason.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h> /* after the headers it needs */

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egress/addr.h"
#include "egress/head.h"
#include "egress/hello.h"
#include "egress/host.h"
#include "egress/policy.h"
#include "tests/unit/egress_hellos.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* ---- hosts -------------------------------------------------------------- */

static void
t_host_names(void **state)
{
	static const struct {
		const char *in, *text;
		enum egress_host_kind kind;
	} ok[] = {
	    {"pypi.org", "pypi.org", EGRESS_HOST_NAME},
	    {"PyPI.Org", "pypi.org", EGRESS_HOST_NAME},
	    {"github.com.", "github.com", EGRESS_HOST_NAME},
	    {"xn--bcher-kva.example", "xn--bcher-kva.example", EGRESS_HOST_NAME},
	    {"a-b.c1", "a-b.c1", EGRESS_HOST_NAME},
	    {"localhost", "localhost", EGRESS_HOST_NAME},
	    {"127.0.0.1", "127.0.0.1", EGRESS_HOST_IPV4},
	    {"8.8.8.8", "8.8.8.8", EGRESS_HOST_IPV4},
	    {"[::1]", "::1", EGRESS_HOST_IPV6},
	    {"[::ffff:127.0.0.1]", "::ffff:127.0.0.1", EGRESS_HOST_IPV6},
	    {"[2001:db8::1]", "2001:db8::1", EGRESS_HOST_IPV6},
	};
	struct egress_host h;
	const char *why;
	size_t i;

	for (i = 0; i < NELEM(ok); i++) {
		why = egress_host_parse(ok[i].in, strlen(ok[i].in), &h);
		if (why != NULL)
			fail_msg("%s: refused: %s", ok[i].in, why);
		assert_string_equal(h.text, ok[i].text);
		assert_int_equal(h.kind, ok[i].kind);
	}
	assert_null(egress_host_parse("[::1]", 5, &h));
	assert_int_equal(h.addr[15], 1);
}

static void
t_host_refused(void **state)
{
	static const struct {
		const char *in, *why;
	} bad[] = {
	    {"2130706433", "canonical dotted-quad"},
	    {"0x7f.1", "canonical dotted-quad"},
	    {"0177.0.0.1", "canonical dotted-quad"},
	    {"127.1", "canonical dotted-quad"},
	    {"127.0.0.01", "canonical dotted-quad"},
	    {"1.2.3.4.5", "canonical dotted-quad"},
	    {"a.0x10", "canonical dotted-quad"},
	    {"[::FFFF:7f00:1]", "canonical form"},
	    {"[0:0::1]", "canonical form"},
	    {"[::ffff:7f00:1]", "canonical form"},
	    {"[fe80::1%25eth0]", "not an IPv6"},
	    {"[::1", "closed by ']'"},
	    {"[]", "not an IPv6"},
	    {"::1", "in brackets"},
	    {"", "empty host"},
	    {".", "empty host"},
	    {"a..b", "empty label"},
	    {"a..", "empty label"},
	    {".a", "empty label"},
	    {"-a.test", "starts with '-'"},
	    {"a-.test", "ends with '-'"},
	    {"a_b.test", "character other than"},
	    {"a b.test", "character other than"},
	    {"b\xc3\xbc" "cher.example", "character other than"},
	    {"user@evil.test", "character other than"},
	};
	char longlabel[80], longname[300];
	struct egress_host h;
	const char *why;
	size_t i;

	for (i = 0; i < NELEM(bad); i++) {
		why = egress_host_parse(bad[i].in, strlen(bad[i].in), &h);
		if (why == NULL || strstr(why, bad[i].why) == NULL)
			fail_msg("%s: %s, expected '%s'", bad[i].in, why ? why : "accepted",
			         bad[i].why);
	}
	assert_non_null(egress_host_parse("a\0b", 3, &h));
	memset(longlabel, 'a', 64);
	memcpy(longlabel + 64, ".test", 6);
	assert_non_null(strstr(egress_host_parse(longlabel, strlen(longlabel), &h), "63"));
	longlabel[1] = '.'; /* 62 and 1 */
	assert_null(egress_host_parse(longlabel, strlen(longlabel), &h));
	/* 253 bytes pass, with or without the dot; 254 do not */
	for (i = 0; i < 253; i++)
		longname[i] = i % 4 == 3 ? '.' : 'a';
	longname[253] = '\0';
	assert_null(egress_host_parse(longname, 253, &h));
	longname[253] = '.';
	assert_null(egress_host_parse(longname, 254, &h));
	longname[253] = 'a';
	assert_non_null(strstr(egress_host_parse(longname, 254, &h), "253"));
}

/* ---- addresses ---------------------------------------------------------- */

/* text as a sockaddr of its family into ss. */
static size_t
mkaddr(const char *text, struct sockaddr_storage *ss)
{
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, text, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		return sizeof(*s4);
	}
	if (inet_pton(AF_INET6, text, &s6->sin6_addr) != 1)
		fail_msg("test address %s", text);
	s6->sin6_family = AF_INET6;
	return sizeof(*s6);
}

static const char *
refusal(const char *text, const struct egress_cidr *cidrs, size_t n)
{
	struct sockaddr_storage ss;
	size_t len = mkaddr(text, &ss);

	return egress_addr_refusal((struct sockaddr *)&ss, len, cidrs, n);
}

static void
t_addr_public(void **state)
{
	static const char *const pub[] = {
	    "8.8.8.8", "1.1.1.1", "151.101.0.223", "192.31.196.1", "192.52.193.1",
	    "192.175.48.1", "100.63.255.255", "100.128.0.0", "172.15.255.255", "172.32.0.0",
	    "2606:4700::1111", "2a00:1450:4001::1", "64:ff9b::808:808", "2002:808:808::1",
	    "::ffff:8.8.8.8", "2001:200::1",
	};
	const char *why;
	size_t i;

	for (i = 0; i < NELEM(pub); i++)
		if ((why = refusal(pub[i], NULL, 0)) != NULL)
			fail_msg("%s refused: %s", pub[i], why);
}

static void
t_addr_refused(void **state)
{
	static const struct {
		const char *addr, *why;
	} bad[] = {
	    {"127.0.0.1", "loopback (127.0.0.0/8)"},
	    {"127.255.255.254", "loopback"},
	    {"169.254.169.254", "link local"},
	    {"10.1.2.3", "private (10.0.0.0/8)"},
	    {"172.16.0.1", "private (172.16.0.0/12)"},
	    {"192.168.1.1", "private (192.168.0.0/16)"},
	    {"100.64.0.1", "shared address space"},
	    {"100.100.100.200", "shared address space"},
	    {"0.0.0.0", "this network"},
	    {"0.1.2.3", "this network"},
	    {"192.0.0.9", "IETF protocol assignments"},
	    {"192.0.2.1", "documentation"},
	    {"198.51.100.1", "documentation"},
	    {"203.0.113.1", "documentation"},
	    {"192.88.99.1", "6to4 relay"},
	    {"198.19.255.255", "benchmarking"},
	    {"224.0.0.1", "multicast"},
	    {"239.255.255.255", "multicast"},
	    {"240.0.0.1", "reserved"},
	    {"255.255.255.255", "limited broadcast"},
	    {"::1", "loopback (::1/128)"},
	    {"::", "unspecified"},
	    {"::ffff:127.0.0.1", "loopback (127.0.0.0/8)"},
	    {"::ffff:169.254.169.254", "link local"},
	    {"::ffff:10.0.0.1", "private"},
	    {"::a9fe:a9fe", "IPv4-compatible"},
	    {"::127.0.0.1", "IPv4-compatible"},
	    {"64:ff9b::a9fe:a9fe", "link local"},
	    {"64:ff9b::7f00:1", "loopback"},
	    {"64:ff9b:1::a00:1", "local-use NAT64"},
	    {"2002:a9fe:a9fe::", "link local"},
	    {"2002:7f00:1::", "loopback"},
	    {"2002:c0a8:101::1", "private"},
	    {"2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"},
	    {"2001:2::1", "IETF protocol assignments"},
	    {"2001:db8::1", "documentation (2001:db8::/32)"},
	    {"3fff::1", "documentation (3fff::/20)"},
	    {"100::1", "discard-only"},
	    {"fc00::1", "unique local"},
	    {"fd12:3456::1", "unique local"},
	    {"fe80::1", "link local"},
	    {"fec0::1", "site local"},
	    {"ff02::1", "multicast"},
	    {"5f00::1", "segment routing"},
	    {"4000::1", "outside 2000::/3"},
	    {"::2", "IPv4-compatible"},
	};
	const char *why;
	size_t i;

	for (i = 0; i < NELEM(bad); i++) {
		why = refusal(bad[i].addr, NULL, 0);
		if (why == NULL || strstr(why, bad[i].why) == NULL)
			fail_msg("%s: %s, expected '%s'", bad[i].addr, why ? why : "public",
			         bad[i].why);
	}
}

static void
t_addr_family(void **state)
{
	struct sockaddr_storage ss;
	size_t len = mkaddr("8.8.8.8", &ss);

	assert_null(egress_addr_refusal((struct sockaddr *)&ss, len, NULL, 0));
	assert_non_null(egress_addr_refusal((struct sockaddr *)&ss, len - 1, NULL, 0));
	ss.ss_family = AF_UNIX;
	assert_non_null(egress_addr_refusal((struct sockaddr *)&ss, sizeof(ss), NULL, 0));
	assert_non_null(egress_addr_refusal(NULL, 0, NULL, 0));
}

static void
t_cidr(void **state)
{
	static const struct {
		const char *in, *why;
	} bad[] = {
	    {"10.20.0.1/16", "host bits"},
	    {"10.0.0.0/0", "every address"},
	    {"::/0", "every address"},
	    {"10.0.0.0/33", "from 1 to 32"},
	    {"fd00::/129", "from 1 to 128"},
	    {"10.0.0.0/08", "from 1 to 32"},
	    {"10.0.0.0/", "from 1 to 32"},
	    {"10.0.0.0", "ADDRESS/PREFIX"},
	    {"10.0.0/8", "not an IPv4 or IPv6"},
	    {"/8", "not an IPv4 or IPv6"},
	    {"mirror.internal/24", "not an IPv4 or IPv6"},
	    {"127.0.0.0/8", "loopback"},
	    {"127.0.0.1/32", "loopback"},
	    {"64.0.0.0/2", "loopback"},
	    {"0.0.0.0/8", "loopback or unspecified"},
	    {"::1/128", "loopback"},
	    {"::/8", "loopback"},
	    {"::ffff:127.0.0.0/104", "loopback"},
	    {"::ffff:0:0/96", "loopback"},
	};
	struct egress_cidr c[3];
	const char *why;
	size_t i;

	for (i = 0; i < NELEM(bad); i++) {
		why = egress_cidr_parse(bad[i].in, strlen(bad[i].in), &c[0]);
		if (why == NULL || strstr(why, bad[i].why) == NULL)
			fail_msg("%s: %s, expected '%s'", bad[i].in, why ? why : "accepted",
			         bad[i].why);
	}
	assert_null(egress_cidr_parse("10.20.0.0/16", 12, &c[0]));
	assert_null(egress_cidr_parse("fd00:1::/32", 11, &c[1]));
	assert_null(egress_cidr_parse("169.254.169.254/32", 18, &c[2]));
	/* inside the list: allowed; beside it: refused, with the range's reason */
	assert_null(refusal("10.20.1.1", c, 3));
	assert_null(refusal("10.20.255.255", c, 3));
	assert_null(refusal("::ffff:10.20.1.1", c, 3)); /* mapped: its IPv4 address */
	assert_non_null(strstr(refusal("10.21.0.1", c, 3), "private"));
	assert_non_null(strstr(refusal("10.20.1.1", c + 1, 2), "private"));
	assert_null(refusal("fd00:1:ffff::1", c, 3));
	assert_non_null(strstr(refusal("fd00:2::1", c, 3), "unique local"));
	assert_null(refusal("169.254.169.254", c, 3));
	assert_non_null(refusal("169.254.169.253", c, 3));
	/* public stays public, whatever the list */
	assert_null(refusal("8.8.8.8", c, 3));
	/* loopback is never opened by a list */
	assert_non_null(strstr(refusal("127.0.0.1", c, 3), "loopback"));
}

/* ---- policy ------------------------------------------------------------- */

static void
t_rule_parse(void **state)
{
	static const struct {
		const char *in, *canon;
		int wildcard;
		unsigned port;
	} ok[] = {
	    {"pypi.org", "pypi.org", 0, 0},
	    {"*.example.com", "*.example.com", 1, 0},
	    {"example.com:8443", "example.com:8443", 0, 8443},
	    {"*.example.com:80", "*.example.com:80", 1, 80},
	    {"localhost", "localhost", 0, 0},
	    {"a.b.c.example.com:65535", "a.b.c.example.com:65535", 0, 65535},
	};
	static const struct {
		const char *in, *why;
	} bad[] = {
	    {"", "empty entry"},
	    {"*", "bare '*'"},
	    {"*:443", "bare '*'"},
	    {"*.com", "single label"},
	    {"*.", "must follow '*.'"},
	    {"*foo.com", "only as a whole first label"},
	    {"a.*.com", "only as a whole first label"},
	    {"*.*.com", "only as a whole first label"},
	    {"Pypi.org", "lower case"},
	    {"pypi.org.", "trailing dot"},
	    {"10.0.0.1", "not an IP address"},
	    {"8.8.8.8:53", "not an IP address"},
	    {"2130706433", "canonical dotted-quad"},
	    {"[::1]", "not an IP address"},
	    {"::1", "not an IP address"},
	    {"https://pypi.org", "not a URL"},
	    {"pypi.org/simple", "not a URL"},
	    {"pypi.org?x", "not a URL"},
	    {"pypi.org#x", "not a URL"},
	    {"user@pypi.org", "user information"},
	    {"pypi.org:0", "from 1 to 65535"},
	    {"pypi.org:65536", "from 1 to 65535"},
	    {"pypi.org:0443", "from 1 to 65535"},
	    {"pypi.org:", "must follow ':'"},
	    {"pypi.org:443:1", "not an IP address"},
	    {"${params.host}", "parameters never widen"},
	    {"a_b.test", "character other than"},
	    {"-a.test", "starts with '-'"},
	};
	char text[EGRESS_RULE_TEXT_MAX + 1];
	struct egress_rule r, r2;
	const char *why;
	size_t i;

	for (i = 0; i < NELEM(ok); i++) {
		if ((why = egress_rule_parse(ok[i].in, strlen(ok[i].in), &r)) != NULL)
			fail_msg("%s: refused: %s", ok[i].in, why);
		assert_int_equal(r.wildcard, ok[i].wildcard);
		assert_int_equal(r.port, ok[i].port);
		egress_rule_format(&r, text, sizeof(text));
		assert_string_equal(text, ok[i].canon);
		assert_null(egress_rule_parse(text, strlen(text), &r2));
		assert_true(egress_rule_equal(&r, &r2));
	}
	for (i = 0; i < NELEM(bad); i++) {
		why = egress_rule_parse(bad[i].in, strlen(bad[i].in), &r);
		if (why == NULL || strstr(why, bad[i].why) == NULL)
			fail_msg("%s: %s, expected '%s'", bad[i].in, why ? why : "accepted",
			         bad[i].why);
	}
	assert_non_null(egress_rule_parse("a\0.test", 7, &r));
}

/* The allow list of the match tests. */
static struct egress_rule rules[3];

static int
allowed(const char *host, unsigned port, enum egress_form form)
{
	struct egress_host h;

	if (egress_host_parse(host, strlen(host), &h) != NULL)
		return 0;
	return egress_policy_match(rules, NELEM(rules), &h, port, form) != NULL;
}

static void
t_policy_match(void **state)
{
	assert_null(egress_rule_parse("allowed.test", 12, &rules[0]));
	assert_null(egress_rule_parse("*.example.com", 13, &rules[1]));
	assert_null(egress_rule_parse("git.test:9418", 13, &rules[2]));

	assert_true(allowed("allowed.test", 443, EGRESS_FORM_CONNECT));
	assert_true(allowed("ALLOWED.test.", 443, EGRESS_FORM_CONNECT));
	assert_true(allowed("allowed.test", 80, EGRESS_FORM_HTTP));
	/* an allowed name on another port */
	assert_false(allowed("allowed.test", 80, EGRESS_FORM_CONNECT));
	assert_false(allowed("allowed.test", 22, EGRESS_FORM_CONNECT));
	assert_false(allowed("allowed.test", 443, EGRESS_FORM_HTTP));
	assert_false(allowed("allowed.test", 8080, EGRESS_FORM_HTTP));
	/* names that only look alike */
	assert_false(allowed("evil-allowed.test", 443, EGRESS_FORM_CONNECT));
	assert_false(allowed("allowed.test.evil.test", 443, EGRESS_FORM_CONNECT));
	assert_false(allowed("xallowed.test", 443, EGRESS_FORM_CONNECT));
	assert_false(allowed("a.allowed.test", 443, EGRESS_FORM_CONNECT));
	assert_false(allowed("allowed", 443, EGRESS_FORM_CONNECT));
	assert_false(allowed("other.test", 443, EGRESS_FORM_CONNECT));
	/* wildcards: subdomains only, at a label boundary */
	assert_true(allowed("a.example.com", 443, EGRESS_FORM_CONNECT));
	assert_true(allowed("a.b.example.com", 443, EGRESS_FORM_CONNECT));
	assert_true(allowed("a.example.com", 80, EGRESS_FORM_HTTP));
	assert_false(allowed("example.com", 443, EGRESS_FORM_CONNECT));
	assert_false(allowed("evil-example.com", 443, EGRESS_FORM_CONNECT));
	assert_false(allowed("xexample.com", 443, EGRESS_FORM_CONNECT));
	assert_false(allowed("a.example.com.evil.test", 443, EGRESS_FORM_CONNECT));
	assert_false(allowed(".example.com", 443, EGRESS_FORM_CONNECT));
	/* an explicit port: that port only, either form */
	assert_true(allowed("git.test", 9418, EGRESS_FORM_CONNECT));
	assert_true(allowed("git.test", 9418, EGRESS_FORM_HTTP));
	assert_false(allowed("git.test", 443, EGRESS_FORM_CONNECT));
	assert_false(allowed("git.test", 80, EGRESS_FORM_HTTP));
	/* IP literals never match, whatever they are */
	assert_false(allowed("127.0.0.1", 443, EGRESS_FORM_CONNECT));
	assert_false(allowed("[::1]", 443, EGRESS_FORM_CONNECT));
	assert_false(allowed("allowed.test", 0, EGRESS_FORM_CONNECT));
	/* an empty list allows nothing */
	{
		struct egress_host h;

		assert_null(egress_host_parse("allowed.test", 12, &h));
		assert_null(egress_policy_match(rules, 0, &h, 443, EGRESS_FORM_CONNECT));
	}
}

/* ---- request heads ------------------------------------------------------ */

static struct egress_head head;

/* Real heads, as each tool sent it to a proxy on loopback (2026). */
static const struct {
	const char *tool, *text, *host;
	enum egress_form form;
	unsigned port, minor;
} real_heads[] = {
    {"curl 7.88.1 (HTTPS_PROXY)",
     "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\nUser-Agent: curl/7.88.1\r\n"
     "Proxy-Connection: Keep-Alive\r\n\r\n",
     "example.com", EGRESS_FORM_CONNECT, 443, 1},
    {"pip 23 (HTTPS_PROXY)", "CONNECT pypi.org:443 HTTP/1.0\r\n\r\n", "pypi.org",
     EGRESS_FORM_CONNECT, 443, 0},
    {"npm 11", "CONNECT registry.npmjs.org:443 HTTP/1.1\r\nHost: registry.npmjs.org:443\r\n"
               "Proxy-Connection: Keep-Alive\r\n\r\n",
     "registry.npmjs.org", EGRESS_FORM_CONNECT, 443, 1},
    {"git 2.39", "CONNECT github.com:443 HTTP/1.1\r\nHost: github.com:443\r\n"
                 "User-Agent: git/2.39.5\r\nProxy-Connection: Keep-Alive\r\n\r\n",
     "github.com", EGRESS_FORM_CONNECT, 443, 1},
    {"cargo 1.95", "CONNECT index.crates.io:443 HTTP/1.1\r\nHost: index.crates.io:443\r\n"
                   "User-Agent: cargo/1.95.0 (f2d3ce0bd 2026-03-21)\r\n"
                   "Proxy-Connection: Keep-Alive\r\n\r\n",
     "index.crates.io", EGRESS_FORM_CONNECT, 443, 1},
    {"apt 2.6.1 (http_proxy)",
     "GET http://deb.debian.org/debian/dists/bookworm/InRelease HTTP/1.1\r\n"
     "Host: deb.debian.org\r\nAccept: text/*\r\nUser-Agent: Debian APT-HTTP/1.3 (2.6.1)\r\n\r\n",
     "deb.debian.org", EGRESS_FORM_HTTP, 80, 1},
    {"curl 7.88.1 (http_proxy)",
     "GET http://deb.debian.org/debian/ HTTP/1.1\r\nHost: deb.debian.org\r\n"
     "User-Agent: curl/7.88.1\r\nAccept: */*\r\nProxy-Connection: Keep-Alive\r\n\r\n",
     "deb.debian.org", EGRESS_FORM_HTTP, 80, 1},
    {"curl --connect-to an IPv6 target",
     "CONNECT [2001:db8::1]:8443 HTTP/1.1\r\nHost: [2001:db8::1]:8443\r\n\r\n", "2001:db8::1",
     EGRESS_FORM_CONNECT, 8443, 1},
};

static enum egress_head_rc
feed_all(const char *s, size_t n, size_t *used)
{
	egress_head_init(&head);
	return egress_head_feed(&head, s, n, used);
}

static void
t_head_real(void **state)
{
	enum egress_head_rc rc;
	size_t i, j, k, n, used, total;

	for (i = 0; i < NELEM(real_heads); i++) {
		n = strlen(real_heads[i].text);
		/* whole, then in two pieces at every point, then byte by byte */
		for (j = 0; j <= n + 1; j++) {
			egress_head_init(&head);
			if (j <= n) {
				rc = egress_head_feed(&head, real_heads[i].text, j, &used);
				total = used;
				if (j < n) {
					assert_int_equal(rc, EGRESS_HEAD_MORE);
					rc = egress_head_feed(&head, real_heads[i].text + j, n - j,
					                      &used);
					total += used;
				}
			} else {
				for (k = 0, total = 0, rc = EGRESS_HEAD_MORE; k < n; k++) {
					assert_int_equal(rc, EGRESS_HEAD_MORE);
					rc = egress_head_feed(&head, real_heads[i].text + k, 1,
					                      &used);
					total += used;
				}
			}
			if (rc != EGRESS_HEAD_DONE)
				fail_msg("%s (split %zu): %s", real_heads[i].tool, j,
				         head.why ? head.why : "not done");
			assert_int_equal(total, n);
			assert_int_equal(head.len, n);
			assert_string_equal(head.host.text, real_heads[i].host);
			assert_int_equal(head.form, real_heads[i].form);
			assert_int_equal(head.port, real_heads[i].port);
			assert_int_equal(head.minor, real_heads[i].minor);
		}
	}
}

static void
t_head_upstream(void **state)
{
	static const char post[] = "POST http://Mirror.Test:8080/a/../b?q=1&r=%20 HTTP/1.0\r\n"
	                           "Content-Length: 5\r\nProxy-Authorization: Basic eDp5\r\n"
	                           "Connection: keep-alive\r\nKeep-Alive: 300\r\n"
	                           "Upgrade: h2c\r\nX-Thing:  v \r\n\r\nhel";
	char out[EGRESS_UPSTREAM_MAX], small[64];
	ssize_t n;
	size_t used;

	assert_int_equal(feed_all(real_heads[5].text, strlen(real_heads[5].text), &used),
	                 EGRESS_HEAD_DONE);
	assert_string_equal(head.method, "GET");
	assert_string_equal(head.origin, "/debian/dists/bookworm/InRelease");
	n = egress_head_upstream(&head, out, sizeof(out));
	assert_true(n > 0);
	out[n] = '\0';
	assert_string_equal(out, "GET /debian/dists/bookworm/InRelease HTTP/1.1\r\n"
	                         "Host: deb.debian.org\r\nAccept: text/*\r\n"
	                         "User-Agent: Debian APT-HTTP/1.3 (2.6.1)\r\n"
	                         "Connection: close\r\n\r\n");
	assert_int_equal(egress_head_upstream(&head, small, sizeof(small)), -1);

	/* a body within Content-Length, hop-by-hop headers dropped, the host
	 * as checked, the path as sent */
	assert_int_equal(feed_all(post, sizeof(post) - 1, &used), EGRESS_HEAD_DONE);
	assert_int_equal(used, sizeof(post) - 1 - 3);
	assert_int_equal(head.body, 5);
	n = egress_head_upstream(&head, out, sizeof(out));
	assert_true(n > 0);
	out[n] = '\0';
	assert_string_equal(out, "POST /a/../b?q=1&r=%20 HTTP/1.0\r\nHost: mirror.test:8080\r\n"
	                         "Content-Length: 5\r\nX-Thing:  v \r\nConnection: close\r\n\r\n");
	assert_int_equal(egress_head_feed(&head, "lo", 2, &used), EGRESS_HEAD_DONE);
	assert_int_equal(used, 0);
	/* one byte past the body: a second request */
	assert_int_equal(egress_head_feed(&head, "G", 1, &used), EGRESS_HEAD_REFUSED);
	assert_non_null(strstr(head.why, "pipelining"));

	/* a CONNECT has no upstream head */
	assert_int_equal(feed_all(real_heads[0].text, strlen(real_heads[0].text), NULL),
	                 EGRESS_HEAD_DONE);
	assert_int_equal(egress_head_upstream(&head, out, sizeof(out)), -1);
}

/* head must be refused with status and a reason holding why. */
static void
expect_head_refused(const char *text, size_t n, int status, const char *why)
{
	enum egress_head_rc rc = feed_all(text, n, NULL);

	if (rc != EGRESS_HEAD_REFUSED)
		fail_msg("accepted: %.*s", (int)n, text);
	if (head.status != status || strstr(head.why, why) == NULL)
		fail_msg("%.*s: %d %s, expected %d '%s'", (int)n, text, head.status, head.why,
		         status, why);
	/* and stays refused */
	assert_int_equal(egress_head_feed(&head, "\r\n\r\n", 4, NULL), EGRESS_HEAD_REFUSED);
}

#define REFUSED(text, status, why) expect_head_refused(text, sizeof(text) - 1, status, why)

static void
t_head_refused(void **state)
{
	/* numeric hosts that are not canonical addresses */
	REFUSED("CONNECT 2130706433:443 HTTP/1.1\r\nHost: 2130706433:443\r\n\r\n", 400,
	        "canonical dotted-quad");
	REFUSED("CONNECT 0x7f.1:443 HTTP/1.1\r\nHost: 0x7f.1:443\r\n\r\n", 400,
	        "canonical dotted-quad");
	REFUSED("CONNECT 0177.0.0.1:443 HTTP/1.0\r\n\r\n", 400, "canonical dotted-quad");
	REFUSED("CONNECT 127.1:443 HTTP/1.0\r\n\r\n", 400, "canonical dotted-quad");
	REFUSED("CONNECT [::FFFF:7f00:1]:443 HTTP/1.0\r\n\r\n", 400, "canonical form");
	REFUSED("CONNECT ::1:443 HTTP/1.0\r\n\r\n", 400, "in brackets");
	/* the CONNECT target */
	REFUSED("CONNECT allowed.test HTTP/1.0\r\n\r\n", 400, "host:port");
	REFUSED("CONNECT allowed.test:0 HTTP/1.0\r\n\r\n", 400, "from 1 to 65535");
	REFUSED("CONNECT allowed.test:65536 HTTP/1.0\r\n\r\n", 400, "from 1 to 65535");
	REFUSED("CONNECT allowed.test:0443 HTTP/1.0\r\n\r\n", 400, "from 1 to 65535");
	REFUSED("CONNECT allowed.test: HTTP/1.0\r\n\r\n", 400, "from 1 to 65535");
	REFUSED("CONNECT http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n", 400,
	        "from 1 to 65535");
	REFUSED("CONNECT a:b:443 HTTP/1.0\r\n\r\n", 400, "IPv6 address must be in brackets");
	REFUSED("CONNECT [::1]x:443 HTTP/1.0\r\n\r\n", 400, "after ']'");
	REFUSED("CONNECT user@evil.test:443 HTTP/1.0\r\n\r\n", 400, "character other than");
	/* absolute form */
	REFUSED("GET http://user@evil.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n", 400,
	        "user information");
	REFUSED("GET http://user:pw@evil.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n", 400,
	        "user information");
	REFUSED("GET http://allowed.test@evil.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n", 400,
	        "user information");
	REFUSED("GET https://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n", 400,
	        "only http://");
	REFUSED("GET ftp://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n", 400,
	        "only http://");
	REFUSED("GET gopher://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n", 400, "");
	REFUSED("GET http://allowed.test/#x HTTP/1.1\r\nHost: allowed.test\r\n\r\n", 400,
	        "fragment");
	REFUSED("GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n", 400, "origin-form");
	REFUSED("OPTIONS * HTTP/1.1\r\nHost: allowed.test\r\n\r\n", 400, "asterisk-form");
	REFUSED("GET http:///x HTTP/1.1\r\n\r\n", 400, "");
	REFUSED("GET http://a_b.test/ HTTP/1.0\r\n\r\n", 400, "");
	REFUSED("GET http://allowed.test:99999/ HTTP/1.0\r\n\r\n", 400, "");
	REFUSED("TRACE http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n", 501,
	        "does not support");
	REFUSED("BREW http://allowed.test/ HTTP/1.0\r\n\r\n", 501, "does not support");
	REFUSED("ABCDEFGHIJKLMNOP http://allowed.test/ HTTP/1.0\r\n\r\n", 501,
	        "does not support");
	/* the request line */
	REFUSED("get http://allowed.test/ HTTP/1.0\r\n\r\n", 400, "request method");
	REFUSED("GET  http://allowed.test/ HTTP/1.0\r\n\r\n", 400, "request line");
	REFUSED("GET http://allowed.test/ HTTP/1.0 \r\n\r\n", 400, "HTTP version");
	REFUSED("GET http://allowed.test/\r\n\r\n", 400, "request line");
	REFUSED("CONNECT allowed.test:443 HTTP/2.0\r\n\r\n", 505, "1.0 and 1.1");
	REFUSED("CONNECT allowed.test:443 HTTP/1.2\r\n\r\n", 505, "1.0 and 1.1");
	REFUSED("CONNECT allowed.test:443 http/1.1\r\n\r\n", 400, "HTTP version");
	REFUSED("GET http://allowed.test/\x7f HTTP/1.0\r\n\r\n", 400, "visible ASCII");
	REFUSED("GET http://allowed.test/\xc3\xa9 HTTP/1.0\r\n\r\n", 400, "visible ASCII");
	REFUSED("\r\nCONNECT allowed.test:443 HTTP/1.0\r\n\r\n", 400, "empty line before");
	REFUSED(" CONNECT allowed.test:443 HTTP/1.0\r\n\r\n", 400, "whitespace before");
	/* bytes anywhere */
	REFUSED("CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test\rX: y\r\n\r\n", 400,
	        "CR not followed by LF");
	REFUSED("CONNECT allowed.test:443 HTTP/1.1\nHost: allowed.test\r\n\r\n", 400,
	        "LF not preceded by CR");
	REFUSED("CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test\r\n\n", 400,
	        "LF not preceded by CR");
	REFUSED("CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test\r\nX: a\0b\r\n\r\n",
	        400, "NUL");
	/* headers */
	REFUSED("CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test\r\nX: a\r\n b\r\n\r\n",
	        400, "obs-fold");
	REFUSED("CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test\r\nX: a\r\n\tb\r\n\r\n",
	        400, "obs-fold");
	REFUSED("CONNECT allowed.test:443 HTTP/1.1\r\nHost : allowed.test\r\n\r\n", 400,
	        "between a header name and ':'");
	REFUSED("CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test\r\nNoColon\r\n\r\n",
	        400, "without ':'");
	REFUSED("CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test\r\n: v\r\n\r\n", 400,
	        "empty name");
	REFUSED("CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test\r\nA(b): v\r\n\r\n",
	        400, "not a token");
	REFUSED("CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test\r\nX: a\x01\r\n\r\n",
	        400, "control character");
	REFUSED("CONNECT allowed.test:443 HTTP/1.1\r\n\r\n", 400, "without Host");
	REFUSED("CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test\r\nHost: allowed.test"
	        "\r\n\r\n",
	        400, "two Host");
	REFUSED("CONNECT allowed.test:443 HTTP/1.1\r\nHost: evil.test:443\r\n\r\n", 400,
	        "another host");
	REFUSED("CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:444\r\n\r\n", 400,
	        "another host");
	REFUSED("GET http://allowed.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n", 400,
	        "another host");
	REFUSED("GET http://allowed.test/ HTTP/1.0\r\nHost: a b\r\n\r\n", 400, "malformed Host");
	REFUSED("CONNECT allowed.test:443 HTTP/1.0\r\nContent-Length: 0\r\n\r\n", 400,
	        "has no body");
	REFUSED("POST http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n"
	        "Content-Length: 3\r\nContent-Length: 3\r\n\r\n",
	        400, "two Content-Length");
	REFUSED("POST http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n"
	        "Content-Length: -1\r\n\r\n",
	        400, "decimal");
	REFUSED("POST http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n"
	        "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
	        400, "together with Content-Length");
	REFUSED("POST http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n"
	        "Transfer-Encoding: chunked\r\n\r\n",
	        501, "Transfer-Encoding");
	REFUSED("CONNECT allowed.test:443 HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 501,
	        "Transfer-Encoding");
	/* pipelining: a second request, or bytes before the tunnel */
	REFUSED("GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n"
	        "GET http://evil.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n",
	        400, "one request per connection");
	REFUSED("CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test\r\n\r\n\x16\x03\x01", 400,
	        "before the tunnel");
}

static void
t_head_limits(void **state)
{
	static char big[EGRESS_HEAD_MAX + 64];
	const char *line = "CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test\r\nX: ";
	size_t n = strlen(line), used;

	/* exactly EGRESS_HEAD_MAX bytes pass, one more does not */
	memcpy(big, line, n);
	memset(big + n, 'a', EGRESS_HEAD_MAX - n - 4);
	memcpy(big + EGRESS_HEAD_MAX - 4, "\r\n\r\n", 4);
	assert_int_equal(feed_all(big, EGRESS_HEAD_MAX, &used), EGRESS_HEAD_DONE);
	assert_int_equal(used, EGRESS_HEAD_MAX);
	memset(big + n, 'a', EGRESS_HEAD_MAX - n - 3);
	memcpy(big + EGRESS_HEAD_MAX - 3, "\r\n\r\n", 4);
	expect_head_refused(big, EGRESS_HEAD_MAX + 1, 431, "larger than 16 KiB");
	/* never ending, fed in pieces */
	egress_head_init(&head);
	memset(big, 'a', sizeof(big));
	memcpy(big, line, n);
	assert_int_equal(egress_head_feed(&head, big, 10000, NULL), EGRESS_HEAD_MORE);
	assert_int_equal(egress_head_feed(&head, big, 10000, NULL), EGRESS_HEAD_REFUSED);
	assert_int_equal(head.status, 431);

	/* after the head of a CONNECT, any byte before the 200 */
	assert_int_equal(feed_all(real_heads[1].text, strlen(real_heads[1].text), NULL),
	                 EGRESS_HEAD_DONE);
	assert_int_equal(egress_head_feed(&head, "", 0, &used), EGRESS_HEAD_DONE);
	assert_int_equal(egress_head_feed(&head, "x", 1, &used), EGRESS_HEAD_REFUSED);
	assert_non_null(strstr(head.why, "pipelining"));
	/* a GET has no body: the next byte is a second request */
	assert_int_equal(feed_all(real_heads[5].text, strlen(real_heads[5].text), NULL),
	                 EGRESS_HEAD_DONE);
	assert_int_equal(egress_head_feed(&head, "G", 1, &used), EGRESS_HEAD_REFUSED);
}

/* What the parser leaves to the policy: literals reach it as addresses,
 * and no list allows them. */
static void
t_head_literals_to_policy(void **state)
{
	static const char *const heads[] = {
	    "CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\n\r\n",
	    "CONNECT [::1]:443 HTTP/1.1\r\nHost: [::1]:443\r\n\r\n",
	    "CONNECT [::ffff:127.0.0.1]:443 HTTP/1.1\r\nHost: [::ffff:127.0.0.1]:443\r\n\r\n",
	    "GET http://127.0.0.1/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
	    "GET http://[::1]:8080/ HTTP/1.0\r\n\r\n",
	    /* libcurl's URL parser turns these into 127.0.0.1: a literal all the same */
	    "GET http://2130706433/ HTTP/1.0\r\n\r\n",
	    "GET http://0x7f.1/ HTTP/1.0\r\n\r\n",
	};
	struct egress_rule any[2];
	size_t i;

	assert_null(egress_rule_parse("localhost", 9, &any[0]));
	assert_null(egress_rule_parse("*.allowed.test", 14, &any[1]));
	for (i = 0; i < NELEM(heads); i++) {
		if (feed_all(heads[i], strlen(heads[i]), NULL) != EGRESS_HEAD_DONE)
			fail_msg("%s: %s", heads[i], head.why);
		assert_int_not_equal(head.host.kind, EGRESS_HOST_NAME);
		assert_null(egress_policy_match(any, 2, &head.host, head.port, head.form));
	}
	/* and names do reach it */
	assert_int_equal(feed_all(real_heads[0].text, strlen(real_heads[0].text), NULL),
	                 EGRESS_HEAD_DONE);
	assert_null(egress_rule_parse("example.com", 11, &any[0]));
	assert_non_null(egress_policy_match(any, 1, &head.host, head.port, head.form));
}

/* ---- ClientHellos ------------------------------------------------------- */

static struct egress_hello hello;

static enum egress_hello_rc
hello_all(const unsigned char *b, size_t n, size_t *used)
{
	egress_hello_init(&hello);
	return egress_hello_feed(&hello, b, n, used);
}

/* The ClientHello message of a one-record capture, re-cut into records of
 * sizes[0..nsizes) (the last one takes the rest) into out. */
static size_t
resplit(const unsigned char *rec, size_t len, const size_t *sizes, size_t nsizes,
        unsigned char *out)
{
	const unsigned char *msg = rec + 5;
	size_t mlen = len - 5, off = 0, o = 0, i, k;

	for (i = 0; off < mlen; i++) {
		k = i + 1 < nsizes ? sizes[i] : mlen - off;
		if (k > mlen - off)
			k = mlen - off;
		memcpy(out + o, rec, 3);
		out[o + 3] = (unsigned char)(k >> 8);
		out[o + 4] = (unsigned char)k;
		memcpy(out + o + 5, msg + off, k);
		o += 5 + k;
		off += k;
	}
	return o;
}

static void
t_hello_real(void **state)
{
	static const struct {
		const char *what, *sni;
		const unsigned char *b;
		size_t n;
	} real[] = {
	    {"openssl TLS 1.3", "allowed.test", hello_openssl13, sizeof(hello_openssl13)},
	    {"openssl TLS 1.2", "allowed.test", hello_openssl12, sizeof(hello_openssl12)},
	    {"curl", "allowed.test", hello_curl, sizeof(hello_curl)},
	    {"python", "x.test", hello_python, sizeof(hello_python)},
	};
	/* record sizes; the last record takes the rest */
	static const size_t cuts[][3] = {{1, 1, 1}, {4, 9999, 1}, {5, 50, 1}, {100, 1, 1}};
	unsigned char buf[2048];
	enum egress_hello_rc rc;
	size_t i, j, n, used, total;

	for (i = 0; i < NELEM(real); i++) {
		assert_int_equal(hello_all(real[i].b, real[i].n, &used), EGRESS_HELLO_DONE);
		assert_int_equal(used, real[i].n);
		assert_string_equal(hello.sni.text, real[i].sni);
		/* byte by byte */
		egress_hello_init(&hello);
		for (j = 0, total = 0, rc = EGRESS_HELLO_MORE; j < real[i].n; j++) {
			assert_int_equal(rc, EGRESS_HELLO_MORE);
			rc = egress_hello_feed(&hello, real[i].b + j, 1, &used);
			total += used;
		}
		assert_int_equal(rc, EGRESS_HELLO_DONE);
		assert_int_equal(total, real[i].n);
		assert_string_equal(hello.sni.text, real[i].sni);
		/* the same message across several records */
		for (j = 0; j < NELEM(cuts); j++) {
			n = resplit(real[i].b, real[i].n, cuts[j], 3, buf);
			assert_true(n > real[i].n);
			if (hello_all(buf, n, &used) != EGRESS_HELLO_DONE)
				fail_msg("%s cut %zu: %s", real[i].what, j, hello.why);
			assert_int_equal(used, n);
			assert_string_equal(hello.sni.text, real[i].sni);
		}
		/* what follows the ClientHello is not read */
		memcpy(buf, real[i].b, real[i].n);
		memcpy(buf + real[i].n, "\x17\x03\x03\x00\x01x", 6);
		assert_int_equal(hello_all(buf, real[i].n + 6, &used), EGRESS_HELLO_DONE);
		assert_int_equal(used, real[i].n);
		assert_int_equal(egress_hello_feed(&hello, "zz", 2, &used), EGRESS_HELLO_DONE);
		assert_int_equal(used, 0);
	}
}

/* A ClientHello of our own, one record: TLS 1.2, one cipher suite, null
 * compression, and the extensions exts[0..n). */
static size_t
mkhello(const unsigned char *exts, size_t n, unsigned char *out)
{
	size_t body = 2 + 32 + 1 + 4 + 2 + 2 + n, o = 0;

	out[o++] = 0x16, out[o++] = 3, out[o++] = 1;
	out[o++] = (unsigned char)((body + 4) >> 8), out[o++] = (unsigned char)(body + 4);
	out[o++] = 1, out[o++] = 0;
	out[o++] = (unsigned char)(body >> 8), out[o++] = (unsigned char)body;
	out[o++] = 3, out[o++] = 3;
	memset(out + o, 0x42, 32), o += 32;
	out[o++] = 0;                                              /* session id */
	out[o++] = 0, out[o++] = 2, out[o++] = 0x13, out[o++] = 1; /* suites */
	out[o++] = 1, out[o++] = 0;                                /* compression */
	out[o++] = (unsigned char)(n >> 8), out[o++] = (unsigned char)n;
	memcpy(out + o, exts, n);
	return o + n;
}

/* A server_name extension holding names[0..nn) as host_name entries. */
static size_t
mksni(const char *const *names, size_t nn, unsigned char *out)
{
	size_t list = 0, o = 6, i, l;

	for (i = 0; i < nn; i++) {
		l = strlen(names[i]);
		out[o++] = 0;
		out[o++] = (unsigned char)(l >> 8), out[o++] = (unsigned char)l;
		memcpy(out + o, names[i], l), o += l;
		list += 3 + l;
	}
	out[0] = 0, out[1] = 0;
	out[2] = (unsigned char)((list + 2) >> 8), out[3] = (unsigned char)(list + 2);
	out[4] = (unsigned char)(list >> 8), out[5] = (unsigned char)list;
	return o;
}

static void
expect_hello_refused(const unsigned char *b, size_t n, const char *why)
{
	if (hello_all(b, n, NULL) != EGRESS_HELLO_REFUSED)
		fail_msg("accepted (%zu bytes), expected '%s'", n, why);
	if (strstr(hello.why, why) == NULL)
		fail_msg("%s, expected '%s'", hello.why, why);
	assert_int_equal(egress_hello_feed(&hello, b, n, NULL), EGRESS_HELLO_REFUSED);
}

static void
t_hello_built(void **state)
{
	static const char *const one[] = {"allowed.test"}, *const two[] = {"allowed.test",
	                                                                    "evil.test"};
	static const char *const ip[] = {"127.0.0.1"}, *const bad[] = {"a_b.test"};
	unsigned char ext[512], msg[1024];
	size_t e, n;

	/* our builder makes what the reader reads */
	e = mksni(one, 1, ext);
	n = mkhello(ext, e, msg);
	assert_int_equal(hello_all(msg, n, NULL), EGRESS_HELLO_DONE);
	assert_string_equal(hello.sni.text, "allowed.test");
	/* an Encrypted ClientHello beside the outer name */
	memcpy(ext + e, "\xfe\x0d\x00\x04\x00\x01\x02\x03", 8);
	expect_hello_refused(msg, mkhello(ext, e + 8, msg), "Encrypted ClientHello");
	/* two names, an IP name, a bad name, another name type, empty ones */
	expect_hello_refused(msg, mkhello(ext, mksni(two, 2, ext), msg), "more than one");
	expect_hello_refused(msg, mkhello(ext, mksni(ip, 1, ext), msg), "IP address");
	expect_hello_refused(msg, mkhello(ext, mksni(bad, 1, ext), msg), "character other");
	e = mksni(one, 1, ext);
	ext[6] = 1; /* name_type */
	expect_hello_refused(msg, mkhello(ext, e, msg), "another type than host_name");
	expect_hello_refused(msg, mkhello((const unsigned char *)"\0\0\0\0", 4, msg),
	                     "empty server_name");
	expect_hello_refused(msg, mkhello((const unsigned char *)"\0\0\0\2\0\0", 6, msg),
	                     "malformed server_name");
	/* no extensions at all, or none of them a server_name */
	expect_hello_refused(msg, mkhello(ext, 0, msg), "no server_name");
	expect_hello_refused(msg, mkhello((const unsigned char *)"\0\x0b\0\2\1\0", 6, msg),
	                     "no server_name");
	/* a repeated extension */
	e = mksni(one, 1, ext);
	memcpy(ext + e, "\0\x0b\0\2\1\0\0\x0b\0\2\1\0", 12);
	expect_hello_refused(msg, mkhello(ext, e + 12, msg), "repeats an extension");
	/* an extension longer than what is left */
	memcpy(ext + e, "\0\x0b\0\x09\1\0", 6);
	expect_hello_refused(msg, mkhello(ext, e + 6, msg), "bad extension length");
	/* an extensions block that is not its length */
	n = mkhello(ext, e, msg);
	msg[n - e - 1]++;
	expect_hello_refused(msg, n, "bad extensions length");
	/* session id longer than 32 */
	n = mkhello(ext, e, msg);
	msg[5 + 4 + 2 + 32] = 33;
	expect_hello_refused(msg, n, "malformed ClientHello");
	/* an odd cipher suites length */
	n = mkhello(ext, e, msg);
	msg[5 + 4 + 2 + 32 + 1 + 1] = 3;
	expect_hello_refused(msg, n, "malformed ClientHello");
	/* legacy_version not 3.x */
	n = mkhello(ext, e, msg);
	msg[9] = 2;
	expect_hello_refused(msg, n, "another protocol than TLS");
}

static void
t_hello_records(void **state)
{
	static const char *const one[] = {"allowed.test"};
	unsigned char ext[256], msg[1024], big[EGRESS_HELLO_MAX + 64];
	size_t e = mksni(one, 1, ext), n = mkhello(ext, e, msg);

	/* plain bytes after CONNECT :443 */
	expect_hello_refused((const unsigned char *)"GET / HTTP/1.1\r\n", 16, "not a TLS handshake");
	expect_hello_refused((const unsigned char *)"SSH-2.0-OpenSSH_9.2\r\n", 21,
	                     "not a TLS handshake");
	/* an SSLv2-style hello */
	expect_hello_refused((const unsigned char *)"\x80\x2e\x01\x03\x01", 5, "SSLv2");
	/* an alert first */
	expect_hello_refused((const unsigned char *)"\x15\x03\x01\x00\x02\x02\x28", 7,
	                     "not a TLS handshake");
	/* record versions and lengths */
	memcpy(big, msg, n);
	big[1] = 2;
	expect_hello_refused(big, n, "not a TLS record");
	memcpy(big, msg, n);
	big[2] = 5;
	expect_hello_refused(big, n, "not a TLS record");
	expect_hello_refused((const unsigned char *)"\x16\x03\x01\x00\x00", 5, "bad length");
	expect_hello_refused((const unsigned char *)"\x16\x03\x01\x40\x01", 5, "bad length");
	/* another handshake message first */
	memcpy(big, msg, n);
	big[5] = 2;
	expect_hello_refused(big, n, "other than ClientHello");
	/* a message longer than the bound, or of length 0 */
	expect_hello_refused((const unsigned char *)"\x16\x03\x01\x00\x04\x01\x00\x40\x00", 9,
	                     "larger than 16 KiB");
	expect_hello_refused((const unsigned char *)"\x16\x03\x01\x00\x04\x01\x00\x00\x00", 9,
	                     "malformed");
	/* the record goes on after the ClientHello */
	memcpy(big, msg, n);
	big[4]++;
	big[n] = 0x16;
	expect_hello_refused(big, n + 1, "data after the ClientHello");
	/* a record of another type inside the message */
	n = resplit(msg, mkhello(ext, e, msg), (const size_t[]){10, 0}, 2, big);
	big[15] = 0x17;
	expect_hello_refused(big, n, "another type inside");
	/* MORE until the last byte, even split */
	n = mkhello(ext, e, msg);
	assert_int_equal(hello_all(msg, n - 1, NULL), EGRESS_HELLO_MORE);
	assert_int_equal(egress_hello_feed(&hello, msg + n - 1, 1, NULL), EGRESS_HELLO_DONE);
}

/* The check the proxy makes with the two: a name other than CONNECT's. */
static void
t_hello_sni_mismatch(void **state)
{
	static const char *const evil[] = {"evil.test"}, *const upper[] = {"Allowed.Test"};
	unsigned char ext[256], msg[1024];
	const char *connect = "CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test\r\n\r\n";

	assert_int_equal(feed_all(connect, strlen(connect), NULL), EGRESS_HEAD_DONE);
	assert_int_equal(hello_all(hello_curl, sizeof(hello_curl), NULL), EGRESS_HELLO_DONE);
	assert_true(egress_host_equal(&hello.sni, &head.host));
	assert_int_equal(hello_all(hello_python, sizeof(hello_python), NULL), EGRESS_HELLO_DONE);
	assert_false(egress_host_equal(&hello.sni, &head.host)); /* x.test */
	assert_int_equal(hello_all(msg, mkhello(ext, mksni(evil, 1, ext), msg), NULL),
	                 EGRESS_HELLO_DONE);
	assert_false(egress_host_equal(&hello.sni, &head.host));
	assert_int_equal(hello_all(msg, mkhello(ext, mksni(upper, 1, ext), msg), NULL),
	                 EGRESS_HELLO_DONE);
	assert_true(egress_host_equal(&hello.sni, &head.host));
	/* and a ClientHello without SNI never gets that far */
	assert_int_equal(hello_all(hello_nosni, sizeof(hello_nosni), NULL), EGRESS_HELLO_REFUSED);
	assert_non_null(strstr(hello.why, "no server_name"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_host_names),
	    cmocka_unit_test(t_host_refused),
	    cmocka_unit_test(t_addr_public),
	    cmocka_unit_test(t_addr_refused),
	    cmocka_unit_test(t_addr_family),
	    cmocka_unit_test(t_cidr),
	    cmocka_unit_test(t_rule_parse),
	    cmocka_unit_test(t_policy_match),
	    cmocka_unit_test(t_head_real),
	    cmocka_unit_test(t_head_upstream),
	    cmocka_unit_test(t_head_refused),
	    cmocka_unit_test(t_head_limits),
	    cmocka_unit_test(t_head_literals_to_policy),
	    cmocka_unit_test(t_hello_real),
	    cmocka_unit_test(t_hello_built),
	    cmocka_unit_test(t_hello_records),
	    cmocka_unit_test(t_hello_sni_mismatch),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
