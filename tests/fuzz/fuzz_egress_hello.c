/* FUZZ_SOURCES: egress/hello.c egress/host.c */
/*
 * libFuzzer target for the egress TLS ClientHello reader (egress/hello.c).
 *
 * Input: byte 0 is a piece size (1..256; 0 means byte by byte), the rest is
 * what a client sends into a tunnel to port 443.  The contract checked:
 *  - fed whole, and again in pieces of that size, the reader gives the same
 *    outcome: both refused with the same reason, or both done with the same
 *    server name and the same count of bytes read (the end of the record
 *    that ended the ClientHello), or both wanting more;
 *  - MORE takes every byte fed; after DONE or REFUSED, more input changes
 *    nothing;
 *  - a name that was read is an LDH host name in normal form (parsing it
 *    again gives it back unchanged).
 * Seeds: tests/fuzz/corpus/egress_hello/ (ClientHellos of OpenSSL 3.0 with
 * TLS 1.3 and 1.2, curl 7.88, Python's ssl, one without SNI, one split
 * across records).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "egress/hello.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct egress_hello whole, split;

/* Feed p[0..n) in pieces; *read gets the bytes read up to DONE. */
static enum egress_hello_rc
fuzz_feed_pieces(struct egress_hello *h, const uint8_t *p, size_t n, size_t piece, size_t *read)
{
	enum egress_hello_rc rc = EGRESS_HELLO_MORE;
	size_t off = 0, k, used;

	egress_hello_init(h);
	*read = 0;
	while (off < n) {
		k = n - off < piece ? n - off : piece;
		rc = egress_hello_feed(h, p + off, k, &used);
		if (rc == EGRESS_HELLO_MORE && used != k)
			abort();
		if (rc == EGRESS_HELLO_DONE && (used == 0 || used > k))
			abort();
		*read += rc == EGRESS_HELLO_REFUSED ? 0 : used;
		if (rc != EGRESS_HELLO_MORE) {
			if (egress_hello_feed(h, p, n, &used) != rc || used != 0)
				abort();
			return rc;
		}
		off += k;
	}
	return rc;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct egress_host again;
	enum egress_hello_rc a, b;
	size_t piece, ra, rb;

	if (size < 1)
		return 0;
	piece = data[0] == 0 ? 1 : data[0];
	data++, size--;
	a = fuzz_feed_pieces(&whole, data, size, size == 0 ? 1 : size, &ra);
	b = fuzz_feed_pieces(&split, data, size, piece, &rb);
	if (a != b)
		abort();
	if (a == EGRESS_HELLO_REFUSED &&
	    (whole.why == NULL || whole.why[0] == '\0' || strcmp(whole.why, split.why) != 0))
		abort();
	if (a != EGRESS_HELLO_DONE)
		return 0;
	if (ra != rb || ra > size || !egress_host_equal(&whole.sni, &split.sni) ||
	    whole.sni.kind != EGRESS_HOST_NAME)
		abort();
	if (egress_host_parse(whole.sni.text, strlen(whole.sni.text), &again) != NULL ||
	    !egress_host_equal(&again, &whole.sni))
		abort();
	return 0;
}
