/*
 * egress request heads: the first bytes a sandbox sends to the egress
 * proxy, parsed strictly and incrementally (DESIGN.md section 4.1).
 *
 * Two forms, one request per connection:
 *   CONNECT host:port HTTP/1.x     a tunnel (Host optional for HTTP/1.0,
 *                                  which pip sends without one)
 *   METHOD http://host[:port]/path HTTP/1.x   plain HTTP, as apt sends it,
 *                                  forwarded in origin form with the Host
 *                                  and Connection: close the proxy writes
 * Anything else is refused: origin-form and asterisk-form targets, https://
 * and other schemes in absolute form, user information or a fragment in the
 * URL, HTTP other than 1.0 and 1.1, a head over EGRESS_HEAD_MAX bytes, NUL,
 * a CR not followed by LF or an LF not preceded by CR, obs-fold (a header
 * line starting with a space or tab), a space before a header's ':', a
 * header name that is not a token, control characters in a value, two
 * Host or Content-Length headers, a Host naming another host or port than
 * the target, Transfer-Encoding (the proxy counts a body by Content-Length
 * only), a body on CONNECT, and any byte after the head of a CONNECT before
 * the tunnel is set up, or after the body of a plain request (pipelining).
 *
 * Pure: no I/O, no allocation but libcurl's URL handle while an absolute
 * URL is parsed (curl_url(3), once per request, freed before returning).
 * The state is one fixed struct per connection; bytes are fed as they
 * arrive, in chunks of any size, and are copied once into it.
 */
#ifndef AGRIPPA_EGRESS_HEAD_H
#define AGRIPPA_EGRESS_HEAD_H

#include <sys/types.h>

#include <stddef.h>
#include <stdint.h>

#include "egress/host.h"
#include "egress/policy.h"

#define EGRESS_HEAD_MAX 16384   /* bytes of a request head, CRLF CRLF included */
#define EGRESS_METHOD_MAX 15
#define EGRESS_UPSTREAM_MAX (EGRESS_HEAD_MAX + 512) /* egress_head_upstream's output */

enum egress_head_rc {
	EGRESS_HEAD_MORE = 0, /* every byte fed was taken; the head is not complete */
	EGRESS_HEAD_DONE,     /* the head is complete (see egress_head_feed) */
	EGRESS_HEAD_REFUSED,  /* refused: why and status say why; final */
};

struct egress_head {
	/* Set once EGRESS_HEAD_DONE was returned. */
	enum egress_form form;
	struct egress_host host; /* the target's host, normalised */
	unsigned port;           /* the target's port (80 when an http:// URL has none) */
	unsigned minor;          /* HTTP/1.minor: 0 or 1 */
	char method[EGRESS_METHOD_MAX + 1];
	uint64_t body;           /* EGRESS_FORM_HTTP: Content-Length (0 when absent) */
	size_t len;              /* bytes of the head, its final CRLF CRLF included */

	/* Set once EGRESS_HEAD_REFUSED was returned: a static string that
	 * never quotes the input, and the HTTP status to answer with (400,
	 * 405, 431, 501 or 505). */
	const char *why;
	int status;

	/* Private. */
	int state;
	unsigned char prev;      /* the byte before the next one */
	size_t line;             /* bytes of the line being read */
	uint64_t body_seen;      /* body bytes fed after the head */
	unsigned char buf[EGRESS_HEAD_MAX];
	char origin[EGRESS_HEAD_MAX]; /* EGRESS_FORM_HTTP: path and query, NUL-terminated */
};

/* Start a connection's parse (h is all the state there is). */
void egress_head_init(struct egress_head *h);

/*
 * Feed the next n bytes the client sent.
 *   EGRESS_HEAD_MORE      all n were taken; feed more when they arrive.
 *   EGRESS_HEAD_DONE      the head is complete and judged well formed (the
 *                         policy is not asked here); *used is the number of
 *                         these n bytes that were head.  The n - *used after
 *                         it, and every byte fed later, are body: allowed
 *                         only for EGRESS_FORM_HTTP and up to h->body bytes
 *                         in all; DONE is returned again for them with
 *                         *used 0.  A caller feeds every byte it reads from
 *                         the client until it has sent the 200 of a CONNECT
 *                         (or, for plain HTTP, until the connection ends).
 *   EGRESS_HEAD_REFUSED   h->why and h->status say why; every later call
 *                         returns REFUSED too.
 * *used may be NULL.
 */
enum egress_head_rc egress_head_feed(struct egress_head *h, const void *p, size_t n,
    size_t *used);

/*
 * For an EGRESS_FORM_HTTP head that was DONE: the head to send upstream
 * into out (outsz bytes; EGRESS_UPSTREAM_MAX always suffice): the request
 * line in origin form, Host as the proxy checked it, the client's headers
 * but Host and the hop-by-hop ones (Connection, Proxy-Connection,
 * Keep-Alive, Proxy-Authorization, TE, Trailer, Upgrade), and
 * "Connection: close".  Returns its length (not NUL-terminated), or -1
 * when h is not such a head or outsz is too small.
 */
ssize_t egress_head_upstream(const struct egress_head *h, char *out, size_t outsz);

#endif
