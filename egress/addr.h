/*
 * egress addresses: whether the egress proxy may connect to an address an
 * allowed name resolved to (DESIGN.md section 4.1), and the operator's
 * allow_cidrs, the only way to reach a private or reserved one.
 *
 * Pure: no I/O, no allocation.  The proxy runs in the host's network
 * namespace, so 127.0.0.1 there is the host itself (the daemon's API, the
 * database), and 169.254.169.254 a cloud's metadata service: every address
 * of an answer is checked, and the proxy connects to exactly the address
 * checked, never resolving again.
 */
#ifndef AGRIPPA_EGRESS_ADDR_H
#define AGRIPPA_EGRESS_ADDR_H

#include <sys/socket.h>

#include <stddef.h>

#define EGRESS_CIDR_TEXT_MAX 64 /* "ffff:...:255.255.255.255/128" and a NUL fit */

/* One allow_cidrs entry: a network, its host bits zero. */
struct egress_cidr {
	int family;             /* AF_INET or AF_INET6 */
	unsigned char addr[16]; /* AF_INET: the first 4 bytes */
	unsigned prefix;        /* 1..32 or 1..128 */
};

/*
 * Parse "a.b.c.d/N" or "v6/N" (s[0..len), need not be NUL-terminated):
 * the address as inet_pton(3) reads it, a decimal prefix length without
 * leading zeros from 1 to 32 (128), and no host bits set ("10.1.0.0/8" is
 * refused: it reads like a mistake).  /0 is refused (it would allow every
 * address), and so is a network holding a loopback address or the
 * unspecified one (127.0.0.0/8, ::1, ::): through them a sandbox would
 * reach the host's own services.  Returns NULL, or why it was refused (a
 * static string).
 */
const char *egress_cidr_parse(const char *s, size_t len, struct egress_cidr *out);

/* Write c as the text egress_cidr_parse reads back ("10.9.0.0/16") into
 * buf (EGRESS_CIDR_TEXT_MAX bytes suffice). */
void egress_cidr_format(const struct egress_cidr *c, char *buf, size_t bufsz);

/* Whether sa (AF_INET or AF_INET6; an IPv4-mapped IPv6 address is taken
 * as its IPv4 address) lies in c. */
int egress_cidr_contains(const struct egress_cidr *c, const struct sockaddr *sa);

/*
 * Why the proxy must not connect to sa (AF_INET or AF_INET6, salen bytes),
 * or NULL when the address is public or lies in one of cidrs[0..ncidrs).
 * Not public: every entry of the IANA special-purpose address registries
 * that is not globally reachable, multicast, the reserved 240.0.0.0/4,
 * IPv6 outside 2000::/3 (not allocated for global unicast), and the IPv6
 * forms that carry an IPv4 address (IPv4-mapped, NAT64 64:ff9b::/96,
 * 6to4 2002::/16) when that address is not public; IPv4-compatible
 * (::/96, deprecated), local-use NAT64 (64:ff9b:1::/48) and Teredo
 * (2001::/32, within 2001::/23) always.  The reason is a static string
 * naming the range, e.g. "loopback (127.0.0.0/8)".  Any other family, or
 * a length too short for the family, is refused too.
 */
const char *egress_addr_refusal(const struct sockaddr *sa, size_t salen,
    const struct egress_cidr *cidrs, size_t ncidrs);

#endif
