/*
 * egress policy: the allow-list entries of templates (network.allow) and of
 * the configuration's presets (egress.presets), and matching a request
 * against them (DESIGN.md section 4.1).
 *
 * Pure: no I/O, no allocation.  Entries are parsed where they are written
 * (the template compiler, the configuration) so that a bad one is an error
 * at its file:line:col, and again, by the same function, wherever a
 * compiled list is read: one parser, one meaning.
 */
#ifndef AGRIPPA_EGRESS_POLICY_H
#define AGRIPPA_EGRESS_POLICY_H

#include <stddef.h>

#include "egress/host.h"

#define EGRESS_RULE_TEXT_MAX (2 + EGRESS_HOST_MAX + 6) /* "*." host ":65535" */
#define EGRESS_PORT_TLS 443  /* a CONNECT entry without a port */
#define EGRESS_PORT_HTTP 80  /* a plain-HTTP entry without a port */

/* How a request reached the proxy: it decides the default port. */
enum egress_form {
	EGRESS_FORM_CONNECT = 1, /* CONNECT host:port, a tunnel */
	EGRESS_FORM_HTTP,        /* GET http://host[:port]/..., plain HTTP */
};

/* One allow entry. */
struct egress_rule {
	char domain[EGRESS_HOST_MAX + 1]; /* the name, or the domain after "*." */
	unsigned port;                    /* 1..65535, or 0: the form's default */
	int wildcard;                     /* "*.domain": its subdomains only */
};

/*
 * Parse one entry s[0..len) (need not be NUL-terminated):
 *   host          exactly that name
 *   *.domain      any name below domain (a.domain, a.b.domain), never
 *                 domain itself nor evil-domain
 *   either:port   with an explicit port, 1..65535, no leading zero
 * The name must already be in normal form: lower-case LDH labels of 1 to
 * 63 bytes, 253 at most, no trailing dot.  Refused: an empty entry, a bare
 * "*", a wildcard over a single label ("*.com": a whole top-level domain),
 * '*' anywhere but a leading "*.", IP literals (an address is reached
 * through egress.allow_cidrs, never a template), and URL syntax (a scheme,
 * a path, user information, a query or fragment).  Returns NULL, or why
 * the entry was refused (a static string that never quotes the input).
 */
const char *egress_rule_parse(const char *s, size_t len, struct egress_rule *out);

/* Write r as its canonical text (what egress_rule_parse reads back) into
 * buf (EGRESS_RULE_TEXT_MAX + 1 bytes). */
void egress_rule_format(const struct egress_rule *r, char *buf, size_t bufsz);

/* Whether two entries allow the same requests. */
int egress_rule_equal(const struct egress_rule *a, const struct egress_rule *b);

/*
 * Whether a request for host (normalised: egress_host_parse) on port,
 * which reached the proxy as form, is allowed by one of rules[0..n).  An
 * IP literal never is.  An entry without a port allows EGRESS_PORT_TLS
 * for EGRESS_FORM_CONNECT and EGRESS_PORT_HTTP for EGRESS_FORM_HTTP; an
 * entry with one allows that port only, for either form.  Returns the
 * matching rule, or NULL.
 */
const struct egress_rule *egress_policy_match(const struct egress_rule *rules, size_t n,
    const struct egress_host *host, unsigned port, enum egress_form form);

#endif
