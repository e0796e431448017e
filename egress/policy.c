/*
 * Allow-list entries and matching for the egress proxy (policy.h).
 *
 * Matching is by whole labels: a wildcard matches a host that ends with
 * "." and the domain, compared on normalised text, so case, a trailing dot
 * and a longer label ("evil-example.com") all fail closed.
 */
#include "egress/policy.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"

/* The port after ':' (p[0..len)): 1..65535, decimal, no leading zero. */
static const char *
rule_port(const char *p, size_t len, unsigned *port)
{
	uint64_t v;

	if (len == 0)
		return "a port must follow ':'";
	if (dec_parse(p, len, 65535, &v) == -1 || v == 0)
		return "the port must be a number from 1 to 65535";
	*port = (unsigned)v;
	return NULL;
}

/* URL syntax and the characters no normal-form name holds, named. */
static const char *
rule_syntax(const char *s, size_t len)
{
	size_t i;

	if (len >= 3 && memmem(s, len, "://", 3) != NULL)
		return "an entry is a host name, not a URL";
	for (i = 0; i < len; i++) {
		switch (s[i]) {
		case '/':
		case '?':
		case '#':
			return "an entry is a host name, not a URL (no path, query or fragment)";
		case '@':
			return "an entry holds no user information ('@')";
		case '[':
		case ']':
			return "an entry is a host name, not an IP address";
		case '$':
			return "an entry holds no '$': parameters never widen the network";
		}
		if (s[i] >= 'A' && s[i] <= 'Z')
			return "an entry must be in lower case";
	}
	return NULL;
}

/* The host part h[0..hlen) of an entry, without "*.". */
static const char *
rule_host(const char *h, size_t hlen, int wildcard, struct egress_rule *out)
{
	struct egress_host host;
	const char *why;

	if (hlen == 0)
		return wildcard ? "a domain must follow '*.'" : "an empty host";
	if (memchr(h, '*', hlen) != NULL)
		return "'*' is allowed only as a whole first label, as in *.example.com";
	if (h[hlen - 1] == '.')
		return "an entry has no trailing dot";
	if ((why = egress_host_parse(h, hlen, &host)) != NULL)
		return why;
	if (host.kind != EGRESS_HOST_NAME)
		return "an entry is a host name, not an IP address (see egress.allow_cidrs)";
	if (wildcard && memchr(host.text, '.', hlen) == NULL)
		return "a wildcard over a single label (*.tld) would allow a whole top-level "
		       "domain";
	if (wildcard && hlen > EGRESS_HOST_MAX - 2)
		return "a host name longer than 253 bytes";
	memcpy(out->domain, host.text, hlen + 1);
	return NULL;
}

const char *
egress_rule_parse(const char *s, size_t len, struct egress_rule *out)
{
	const char *colon, *why;
	size_t hlen = len;

	memset(out, 0, sizeof(*out));
	if (len == 0)
		return "an empty entry";
	if (memchr(s, '\0', len) != NULL)
		return "an entry holds a NUL";
	if ((why = rule_syntax(s, len)) != NULL)
		return why;
	if ((colon = memchr(s, ':', len)) != NULL) {
		hlen = (size_t)(colon - s);
		if (memchr(colon + 1, ':', len - hlen - 1) != NULL)
			return "an entry is a host name, not an IP address";
		if ((why = rule_port(colon + 1, len - hlen - 1, &out->port)) != NULL)
			return why;
	}
	if (hlen == 1 && s[0] == '*')
		return "a bare '*' would allow every host";
	if (hlen >= 2 && s[0] == '*' && s[1] == '.') {
		out->wildcard = 1;
		return rule_host(s + 2, hlen - 2, 1, out);
	}
	return rule_host(s, hlen, 0, out);
}

void
egress_rule_format(const struct egress_rule *r, char *buf, size_t bufsz)
{
	char port[12] = "";

	if (r->port != 0)
		(void)fmt_ok(port, sizeof(port), ":%u", r->port);
	snprintf(buf, bufsz, "%s%s%s", r->wildcard ? "*." : "", r->domain, port);
}

int
egress_rule_equal(const struct egress_rule *a, const struct egress_rule *b)
{
	return a->wildcard == b->wildcard && a->port == b->port &&
	       strcmp(a->domain, b->domain) == 0;
}

/* Whether name is r's name, or below r's domain for a wildcard. */
static int
rule_name_match(const struct egress_rule *r, const char *name)
{
	size_t n = strlen(name), d = strlen(r->domain);

	if (!r->wildcard)
		return n == d && memcmp(name, r->domain, n) == 0;
	return n > d + 1 && name[n - d - 1] == '.' && memcmp(name + n - d, r->domain, d) == 0;
}

const struct egress_rule *
egress_policy_match(const struct egress_rule *rules, size_t n, const struct egress_host *host,
    unsigned port, enum egress_form form)
{
	unsigned def = form == EGRESS_FORM_CONNECT ? EGRESS_PORT_TLS : EGRESS_PORT_HTTP;
	size_t i;

	if (host->kind != EGRESS_HOST_NAME || port == 0)
		return NULL;
	for (i = 0; i < n; i++)
		if ((rules[i].port != 0 ? rules[i].port : def) == port &&
		    rule_name_match(&rules[i], host->text))
			return &rules[i];
	return NULL;
}
