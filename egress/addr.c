/*
 * Address classification for the egress proxy (addr.h).
 *
 * Two tables, from the IANA IPv4 and IPv6 Special-Purpose Address
 * Registries (iana.org/assignments/iana-ipv4-special-registry and
 * iana-ipv6-special-registry, as of 2025) plus the multicast and reserved
 * blocks of the address space registries.  A row is refused unless noted;
 * the most specific row that matches decides, so rows are in order of
 * decreasing prefix length where they nest.
 *
 * Left public on purpose, as the registries mark them globally reachable:
 * 192.31.196.0/24 and 192.175.48.0/24 (AS112), 192.52.193.0/24 (AMT),
 * 64:ff9b::/96 (NAT64, judged by the IPv4 address it carries).  Refused
 * although the registry marks a part of them global: 192.0.0.9/32 and
 * 192.0.0.10/32 inside 192.0.0.0/24, and the anycast, AMT, AS112 and
 * ORCHIDv2 blocks inside 2001::/23, none of which a package registry is
 * reached at; refusing the whole block keeps the table small.
 */
#include "egress/addr.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"

enum addr_act {
	ADDR_REFUSE, /* refused unless inside allow_cidrs */
	ADDR_NEVER,  /* refused even inside allow_cidrs: the host itself */
	ADDR_EMBED,  /* judged by the IPv4 address at byte off */
};

struct addr_row {
	unsigned char net[16];
	unsigned prefix;
	enum addr_act act;
	unsigned off; /* ADDR_EMBED: where the IPv4 address is */
	const char *why;
};

/* IPv4 special-purpose registry (RFC 6890 and updates), multicast, reserved. */
static const struct addr_row addr_v4[] = {
    {{0, 0, 0, 0}, 8, ADDR_NEVER, 0, "this network (0.0.0.0/8)"},
    {{10, 0, 0, 0}, 8, ADDR_REFUSE, 0, "private (10.0.0.0/8)"},
    {{100, 64, 0, 0}, 10, ADDR_REFUSE, 0, "shared address space (100.64.0.0/10)"},
    {{127, 0, 0, 0}, 8, ADDR_NEVER, 0, "loopback (127.0.0.0/8)"},
    {{169, 254, 0, 0}, 16, ADDR_REFUSE, 0, "link local (169.254.0.0/16)"},
    {{172, 16, 0, 0}, 12, ADDR_REFUSE, 0, "private (172.16.0.0/12)"},
    {{192, 0, 0, 0}, 24, ADDR_REFUSE, 0, "IETF protocol assignments (192.0.0.0/24)"},
    {{192, 0, 2, 0}, 24, ADDR_REFUSE, 0, "documentation (192.0.2.0/24)"},
    {{192, 88, 99, 0}, 24, ADDR_REFUSE, 0, "deprecated 6to4 relay anycast (192.88.99.0/24)"},
    {{192, 168, 0, 0}, 16, ADDR_REFUSE, 0, "private (192.168.0.0/16)"},
    {{198, 18, 0, 0}, 15, ADDR_REFUSE, 0, "benchmarking (198.18.0.0/15)"},
    {{198, 51, 100, 0}, 24, ADDR_REFUSE, 0, "documentation (198.51.100.0/24)"},
    {{203, 0, 113, 0}, 24, ADDR_REFUSE, 0, "documentation (203.0.113.0/24)"},
    {{224, 0, 0, 0}, 4, ADDR_REFUSE, 0, "multicast (224.0.0.0/4)"},
    {{255, 255, 255, 255}, 32, ADDR_NEVER, 0, "limited broadcast (255.255.255.255/32)"},
    {{240, 0, 0, 0}, 4, ADDR_REFUSE, 0, "reserved (240.0.0.0/4)"},
};

#define V6(a, b) (unsigned char)((a) >> 8), (unsigned char)(a), (unsigned char)((b) >> 8), \
	         (unsigned char)(b)
/* IPv6 special-purpose registry (RFC 6890 and updates), multicast,
 * deprecated forms; most specific first where rows nest. */
static const struct addr_row addr_v6[] = {
    {{0}, 128, ADDR_NEVER, 0, "unspecified (::/128)"},
    {{[15] = 1}, 128, ADDR_NEVER, 0, "loopback (::1/128)"},
    {{[10] = 0xff, [11] = 0xff}, 96, ADDR_EMBED, 12, "IPv4-mapped (::ffff:0:0/96)"},
    {{0}, 96, ADDR_REFUSE, 0, "deprecated IPv4-compatible (::/96)"},
    {{V6(0x64, 0xff9b)}, 96, ADDR_EMBED, 12, "NAT64 (64:ff9b::/96)"},
    {{V6(0x64, 0xff9b), V6(1, 0)}, 48, ADDR_REFUSE, 0, "local-use NAT64 (64:ff9b:1::/48)"},
    {{V6(0x100, 0), V6(0, 1)}, 64, ADDR_REFUSE, 0, "dummy prefix (100:0:0:1::/64)"},
    {{V6(0x100, 0)}, 64, ADDR_REFUSE, 0, "discard-only (100::/64)"},
    {{V6(0x2001, 0)}, 32, ADDR_REFUSE, 0, "Teredo (2001::/32)"},
    {{V6(0x2001, 0xdb8)}, 32, ADDR_REFUSE, 0, "documentation (2001:db8::/32)"},
    {{V6(0x2001, 0)}, 23, ADDR_REFUSE, 0, "IETF protocol assignments (2001::/23)"},
    {{V6(0x2002, 0)}, 16, ADDR_EMBED, 2, "6to4 (2002::/16)"},
    {{V6(0x3fff, 0)}, 20, ADDR_REFUSE, 0, "documentation (3fff::/20)"},
    {{V6(0x5f00, 0)}, 16, ADDR_REFUSE, 0, "segment routing SIDs (5f00::/16)"},
    {{V6(0xfc00, 0)}, 7, ADDR_REFUSE, 0, "unique local (fc00::/7)"},
    {{V6(0xfe80, 0)}, 10, ADDR_REFUSE, 0, "link local (fe80::/10)"},
    {{V6(0xfec0, 0)}, 10, ADDR_REFUSE, 0, "deprecated site local (fec0::/10)"},
    {{V6(0xff00, 0)}, 8, ADDR_REFUSE, 0, "multicast (ff00::/8)"},
};
#undef V6

#define ADDR_NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* Whether the first prefix bits of a and b are equal. */
static int
addr_prefix_eq(const unsigned char *a, const unsigned char *b, unsigned prefix)
{
	unsigned full = prefix / 8, rest = prefix % 8;
	unsigned char mask;

	if (memcmp(a, b, full) != 0)
		return 0;
	if (rest == 0)
		return 1;
	mask = (unsigned char)(0xff << (8 - rest));
	return (a[full] & mask) == (b[full] & mask);
}

/* The most specific row of rows[0..n) holding a: rows nest in order. */
static const struct addr_row *
addr_lookup(const struct addr_row *rows, size_t n, const unsigned char *a)
{
	const struct addr_row *best = NULL;
	size_t i;

	for (i = 0; i < n; i++)
		if (addr_prefix_eq(rows[i].net, a, rows[i].prefix) &&
		    (best == NULL || rows[i].prefix > best->prefix))
			best = &rows[i];
	return best;
}

/* The 16 bytes of an AF_INET6 sockaddr, or the 4 of an AF_INET one, with
 * its family; 0 when sa is neither or salen too short. */
static int
addr_bytes(const struct sockaddr *sa, size_t salen, const unsigned char **a)
{
	if (sa->sa_family == AF_INET && salen >= sizeof(struct sockaddr_in)) {
		*a = (const unsigned char *)&((const struct sockaddr_in *)(const void *)sa)->sin_addr;
		return AF_INET;
	}
	if (sa->sa_family == AF_INET6 && salen >= sizeof(struct sockaddr_in6)) {
		*a = ((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr.s6_addr;
		return AF_INET6;
	}
	return 0;
}

static int
addr_in_cidrs(const struct sockaddr *sa, const struct egress_cidr *cidrs, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (egress_cidr_contains(&cidrs[i], sa))
			return 1;
	return 0;
}

/* Why the IPv4 address a is refused, NULL when public; *never set when
 * not even allow_cidrs may open it. */
static const char *
addr_v4_why(const unsigned char *a, int *never)
{
	const struct addr_row *r = addr_lookup(addr_v4, ADDR_NELEM(addr_v4), a);

	*never = r != NULL && r->act == ADDR_NEVER;
	return r != NULL ? r->why : NULL;
}

static const char *
addr_v6_why(const unsigned char *a, int *never)
{
	const struct addr_row *r = addr_lookup(addr_v6, ADDR_NELEM(addr_v6), a);
	static const unsigned char unicast[16] = {0x20};

	*never = 0;
	if (r == NULL)
		return addr_prefix_eq(unicast, a, 3) ? NULL
		                                     : "not global unicast (outside 2000::/3)";
	if (r->act == ADDR_EMBED)
		return addr_v4_why(a + r->off, never);
	*never = r->act == ADDR_NEVER;
	return r->why;
}

const char *
egress_addr_refusal(const struct sockaddr *sa, size_t salen, const struct egress_cidr *cidrs,
    size_t ncidrs)
{
	const unsigned char *a;
	const char *why;
	int family, never;

	if (sa == NULL || salen < sizeof(sa->sa_family))
		return "not an IPv4 or IPv6 address";
	if ((family = addr_bytes(sa, salen, &a)) == 0)
		return "not an IPv4 or IPv6 address";
	why = family == AF_INET ? addr_v4_why(a, &never) : addr_v6_why(a, &never);
	if (why == NULL || never)
		return why;
	return addr_in_cidrs(sa, cidrs, ncidrs) ? NULL : why;
}

int
egress_cidr_contains(const struct egress_cidr *c, const struct sockaddr *sa)
{
	static const unsigned char mapped[12] = {[10] = 0xff, [11] = 0xff};
	const unsigned char *a = NULL;
	int family = addr_bytes(sa, sizeof(struct sockaddr_in6), &a);

	/* the length is the caller's: egress_addr_refusal checked it */
	if (family == 0)
		return 0;
	if (family == AF_INET6 && c->family == AF_INET && memcmp(a, mapped, 12) == 0)
		return addr_prefix_eq(c->addr, a + 12, c->prefix);
	return family == c->family && addr_prefix_eq(c->addr, a, c->prefix);
}

/* Networks no allow_cidrs entry may touch: the host itself. */
static const struct egress_cidr addr_host_nets[] = {
    {AF_INET, {127}, 8},
    {AF_INET, {0}, 8},
    {AF_INET6, {[15] = 1}, 128},
    {AF_INET6, {0}, 128},
    {AF_INET6, {[10] = 0xff, [11] = 0xff, [12] = 127}, 104},
    {AF_INET6, {[10] = 0xff, [11] = 0xff}, 104},
};

/* Whether two networks share an address: the shorter holds the other. */
static int
addr_overlap(const struct egress_cidr *a, const struct egress_cidr *b)
{
	return a->family == b->family &&
	       addr_prefix_eq(a->addr, b->addr, a->prefix < b->prefix ? a->prefix : b->prefix);
}

const char *
egress_cidr_parse(const char *s, size_t len, struct egress_cidr *out)
{
	char text[EGRESS_CIDR_TEXT_MAX];
	const char *slash = memchr(s, '/', len);
	uint64_t prefix;
	size_t alen, i;
	unsigned max;

	memset(out, 0, sizeof(*out));
	if (slash == NULL)
		return "expected ADDRESS/PREFIX, as in 10.20.0.0/16";
	if ((alen = (size_t)(slash - s)) == 0 || alen >= sizeof(text))
		return "not an IPv4 or IPv6 address before '/'";
	memcpy(text, s, alen);
	text[alen] = '\0';
	out->family = memchr(text, ':', alen) != NULL ? AF_INET6 : AF_INET;
	max = out->family == AF_INET ? 32 : 128;
	if (inet_pton(out->family, text, out->addr) != 1)
		return "not an IPv4 or IPv6 address before '/'";
	if (dec_parse(slash + 1, len - alen - 1, max, &prefix) == -1)
		return out->family == AF_INET ? "the prefix length must be a number from 1 to 32"
		                               : "the prefix length must be a number from 1 to 128";
	out->prefix = (unsigned)prefix;
	if (out->prefix == 0)
		return "a /0 network would allow every address";
	for (i = out->prefix; i < max; i++)
		if (out->addr[i / 8] & (0x80 >> (i % 8)))
			return "host bits are set after the prefix length";
	for (i = 0; i < ADDR_NELEM(addr_host_nets); i++)
		if (addr_overlap(out, &addr_host_nets[i]))
			return "holds loopback or unspecified addresses, the host's own";
	return NULL;
}

void
egress_cidr_format(const struct egress_cidr *c, char *buf, size_t bufsz)
{
	char t[INET6_ADDRSTRLEN];

	if (inet_ntop(c->family, c->addr, t, sizeof(t)) == NULL)
		t[0] = '\0';
	snprintf(buf, bufsz, "%s/%u", t, c->prefix);
}
