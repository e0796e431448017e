/*
 * egress host names: one normal form for every host the egress proxy
 * judges (DESIGN.md section 4.1), whether it came from a CONNECT target, an
 * absolute-form URL, a TLS server_name or an allow-list entry.
 *
 * Pure: no I/O, no allocation, no resolver.  A name is never handed to
 * getaddrinfo here, and must not be before the allow-list matched it:
 * glibc's resolver reads "2130706433" and "0x7f.1" as 127.0.0.1, which is
 * why every numeric form but the canonical one is refused here instead.
 */
#ifndef AGRIPPA_EGRESS_HOST_H
#define AGRIPPA_EGRESS_HOST_H

#include <stddef.h>

#define EGRESS_HOST_MAX 253  /* a name without its trailing dot (RFC 1035) */
#define EGRESS_LABEL_MAX 63

enum egress_host_kind {
	EGRESS_HOST_NAME = 1, /* LDH labels, lower case */
	EGRESS_HOST_IPV4,     /* canonical dotted quad */
	EGRESS_HOST_IPV6,     /* canonical (RFC 5952) text, written in brackets */
};

struct egress_host {
	enum egress_host_kind kind;
	/* NUL-terminated: the lower-case name without a trailing dot, the
	 * dotted quad, or the IPv6 text without its brackets */
	char text[EGRESS_HOST_MAX + 1];
	unsigned char addr[16]; /* IPv4: the first 4 bytes; IPv6: all 16 */
};

/*
 * Normalise the host s[0..len) (need not be NUL-terminated) into *out.
 *   - "[v6]": an IPv6 address in exactly the text inet_ntop(3) writes for
 *     it (lower case, "::" for the longest run of zero groups, a mapped
 *     IPv4 address as a dotted quad), no zone: EGRESS_HOST_IPV6.
 *   - a dotted quad inet_pton(3) reads (four decimal parts without leading
 *     zeros) and inet_ntop writes back the same: EGRESS_HOST_IPV4.
 *   - any other host whose last label is all digits or starts with 0x is
 *     refused: "2130706433", "0x7f.1", "0177.0.0.1" and "127.1" are the
 *     inet_aton forms a resolver would take for an address.
 *   - otherwise a name: upper case is lowered, exactly one trailing dot is
 *     stripped, and what remains must be labels of 1 to 63 letters, digits
 *     and '-' (not first nor last in a label), 253 bytes at most:
 *     EGRESS_HOST_NAME.
 * Returns NULL, or why the host was refused (a static string that never
 * quotes the input); *out is then unspecified.
 */
const char *egress_host_parse(const char *s, size_t len, struct egress_host *out);

/* Whether two normalised hosts are the same host. */
int egress_host_equal(const struct egress_host *a, const struct egress_host *b);

#endif
