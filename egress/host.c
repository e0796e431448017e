/*
 * Host normalisation for the egress proxy (host.h).
 *
 * Literals are judged by a round trip through inet_pton and inet_ntop:
 * the only text accepted for an address is the one inet_ntop writes, so
 * two spellings of one address never reach the policy as two hosts.
 */
#include "egress/host.h"

#include <arpa/inet.h>
#include <string.h>

/* The last label of s[0..len) (no trailing dot): all digits, or a 0x hex
 * prefix, as inet_aton(3) would read a part of an address. */
static int
host_numeric_tail(const char *s, size_t len)
{
	const char *dot = memrchr(s, '.', len);
	const char *last = dot != NULL ? dot + 1 : s;
	size_t n = len - (size_t)(last - s), i;

	if (n >= 2 && last[0] == '0' && (last[1] == 'x' || last[1] == 'X'))
		return 1;
	for (i = 0; i < n; i++)
		if (last[i] < '0' || last[i] > '9')
			return 0;
	return n > 0;
}

/* "[v6]": canonical text only. */
static const char *
host_ipv6(const char *s, size_t len, struct egress_host *out)
{
	char in[INET6_ADDRSTRLEN + 1], back[INET6_ADDRSTRLEN];
	size_t n = len - 2;

	if (s[len - 1] != ']')
		return "an IPv6 address must be closed by ']'";
	if (n == 0 || n >= sizeof(in))
		return "not an IPv6 address";
	memcpy(in, s + 1, n);
	in[n] = '\0';
	if (inet_pton(AF_INET6, in, out->addr) != 1)
		return "not an IPv6 address";
	if (inet_ntop(AF_INET6, out->addr, back, sizeof(back)) == NULL || strcmp(in, back) != 0)
		return "an IPv6 address not in its canonical form (RFC 5952)";
	memcpy(out->text, in, n + 1);
	out->kind = EGRESS_HOST_IPV6;
	return NULL;
}

/* A dotted quad, canonical only; anything else numeric is refused. */
static const char *
host_ipv4(const char *s, size_t len, struct egress_host *out)
{
	char in[INET_ADDRSTRLEN + 1], back[INET_ADDRSTRLEN];

	if (len < sizeof(in)) {
		memcpy(in, s, len);
		in[len] = '\0';
		if (inet_pton(AF_INET, in, out->addr) == 1 &&
		    inet_ntop(AF_INET, out->addr, back, sizeof(back)) != NULL &&
		    strcmp(in, back) == 0) {
			memcpy(out->text, in, len + 1);
			out->kind = EGRESS_HOST_IPV4;
			return NULL;
		}
	}
	return "a numeric host that is not a canonical dotted-quad IPv4 address";
}

static int
host_ldh(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

/* Lower-cased LDH labels into out->text (len fits, no trailing dot). */
static const char *
host_name(const char *s, size_t len, struct egress_host *out)
{
	size_t i, label = 0;
	char c;

	for (i = 0; i < len; i++) {
		c = s[i];
		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		if (c == '.') {
			if (label == 0)
				return "an empty label in the host name";
			if (out->text[i - 1] == '-')
				return "a label of the host name ends with '-'";
			label = 0;
		} else if (!host_ldh(c)) {
			return c == ':' ? "an IPv6 address must be in brackets"
			                : "the host name holds a character other than a letter, "
			                  "digit, '-' or '.'";
		} else if (c == '-' && label == 0) {
			return "a label of the host name starts with '-'";
		} else if (++label > EGRESS_LABEL_MAX) {
			return "a label of the host name is longer than 63 bytes";
		}
		out->text[i] = c;
	}
	if (label == 0)
		return "an empty label in the host name";
	if (out->text[len - 1] == '-')
		return "a label of the host name ends with '-'";
	out->text[len] = '\0';
	out->kind = EGRESS_HOST_NAME;
	return NULL;
}

const char *
egress_host_parse(const char *s, size_t len, struct egress_host *out)
{
	memset(out, 0, sizeof(*out));
	if (len == 0)
		return "an empty host";
	if (s[0] == '[')
		return len < 2 ? "not an IPv6 address" : host_ipv6(s, len, out);
	if (s[len - 1] == '.')
		len--; /* exactly one: "a.." keeps an empty label */
	if (len == 0)
		return "an empty host";
	if (len > EGRESS_HOST_MAX)
		return "a host name longer than 253 bytes";
	if (memchr(s, '\0', len) != NULL)
		return "the host name holds a NUL";
	if (host_numeric_tail(s, len))
		return host_ipv4(s, len, out);
	return host_name(s, len, out);
}

int
egress_host_equal(const struct egress_host *a, const struct egress_host *b)
{
	return a->kind == b->kind && strcmp(a->text, b->text) == 0;
}
