/*
 * egress TLS ClientHello reader: the server name a tunnel to port 443 is
 * for, read from the first bytes the client sends after the proxy's 200
 * (DESIGN.md section 4.1).  The proxy then requires it to equal the
 * CONNECT host, so that "CONNECT allowed.test:443" cannot carry a TLS
 * session to another site behind the same address (curl --connect-to).
 *
 * Read incrementally over TLS records: the ClientHello handshake message
 * may span several records and arrive in pieces of any size; it is
 * reassembled into the fixed state, at most EGRESS_HELLO_MAX bytes.
 * Refused: anything that is not a TLS handshake record (plain bytes, an
 * SSLv2-style hello, an alert), a first handshake message other than
 * ClientHello, malformed or inconsistent lengths anywhere, a record that
 * goes on after the ClientHello, no server_name extension, a server_name
 * list that is empty, holds more than one name or a name type other than
 * host_name, a name that is not an LDH host name (IP literals included:
 * RFC 6066 does not allow them), a repeated extension, and an Encrypted
 * ClientHello (extension 0xfe0d), whose outer server name is only the
 * public name of whoever terminates it.
 *
 * Pure: no I/O, no allocation, no TLS library.
 */
#ifndef AGRIPPA_EGRESS_HELLO_H
#define AGRIPPA_EGRESS_HELLO_H

#include <stddef.h>

#include "egress/host.h"

#define EGRESS_HELLO_MAX 16384 /* bytes of the ClientHello message, its 4-byte header included */

enum egress_hello_rc {
	EGRESS_HELLO_MORE = 0, /* every byte fed was taken; feed more */
	EGRESS_HELLO_DONE,     /* the ClientHello was read: sni holds its name */
	EGRESS_HELLO_REFUSED,  /* why says why; final */
};

struct egress_hello {
	struct egress_host sni; /* once DONE: the server name, normalised */
	const char *why;        /* once REFUSED: a static string */

	/* Private. */
	int state;
	unsigned char rec[5]; /* the record header being read */
	size_t nrec;
	size_t left;          /* bytes of the current record's fragment still to come */
	size_t need;          /* 4 + the message length, once its header is in */
	size_t nmsg;
	unsigned char msg[EGRESS_HELLO_MAX];
};

void egress_hello_init(struct egress_hello *h);

/*
 * Feed the next n bytes the client sent into the tunnel.  MORE: all were
 * taken.  DONE: the ClientHello ended in the record that ended at byte
 * *used of these n; later bytes (more records) are not looked at, here or
 * in later calls, which return DONE again with *used 0.  REFUSED: h->why;
 * later calls return REFUSED too.  The caller keeps every byte: they are
 * relayed upstream as they were once the name is allowed.  *used may be
 * NULL.
 */
enum egress_hello_rc egress_hello_feed(struct egress_hello *h, const void *p, size_t n,
    size_t *used);

#endif
