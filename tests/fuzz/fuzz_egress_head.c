/* FUZZ_SOURCES: egress/head.c egress/host.c */
/*
 * libFuzzer target for the egress request head parser (egress/head.c).
 *
 * Input: byte 0 is a piece size (1..256; 0 means byte by byte), the rest is
 * what a client sends.  The contract checked:
 *  - fed whole, and again in pieces of that size, the parse gives the same
 *    outcome: both refused with the same reason and status, or both done
 *    with the same form, host, port, version, method, body length and head
 *    length; a refusal has a reason and one of the statuses head.h names;
 *  - once refused, a parse stays refused; MORE takes every byte fed;
 *  - a head that is done is at most EGRESS_HEAD_MAX bytes, ends with CRLF
 *    CRLF, and its host is in normal form (egress_host_parse gives it back
 *    unchanged, as a name, a dotted quad or bracketed IPv6 text);
 *  - for plain HTTP, egress_head_upstream writes at most
 *    EGRESS_UPSTREAM_MAX bytes: an origin-form request line starting with
 *    the method and '/', Host as checked, "Connection: close" and the end
 *    of the head, and no byte below 0x20 but CR, LF and tab.
 * Seeds: tests/fuzz/corpus/egress_head/ (real heads of curl, pip, npm,
 * git, cargo and apt, and refused ones).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "egress/head.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct egress_head whole, split;

static enum egress_head_rc
fuzz_feed_pieces(struct egress_head *h, const uint8_t *p, size_t n, size_t piece)
{
	enum egress_head_rc rc = EGRESS_HEAD_MORE;
	size_t off = 0, k, used;

	egress_head_init(h);
	while (off < n) {
		k = n - off < piece ? n - off : piece;
		rc = egress_head_feed(h, p + off, k, &used);
		if (rc == EGRESS_HEAD_MORE && used != k)
			abort();
		if (rc == EGRESS_HEAD_REFUSED &&
		    egress_head_feed(h, p, n, NULL) != EGRESS_HEAD_REFUSED)
			abort();
		if (rc == EGRESS_HEAD_REFUSED)
			return rc;
		off += k;
	}
	return rc;
}

static void
fuzz_check_host(const struct egress_head *h)
{
	struct egress_host again;
	char text[EGRESS_HOST_MAX + 3];
	size_t n = strlen(h->host.text);

	if (h->host.kind == EGRESS_HOST_IPV6) {
		text[0] = '[';
		memcpy(text + 1, h->host.text, n);
		text[n + 1] = ']';
		n += 2;
	} else {
		memcpy(text, h->host.text, n);
	}
	if (egress_host_parse(text, n, &again) != NULL || !egress_host_equal(&again, &h->host))
		abort();
}

static void
fuzz_check_upstream(const struct egress_head *h)
{
	static char out[EGRESS_UPSTREAM_MAX];
	ssize_t n = egress_head_upstream(h, out, sizeof(out));
	size_t m = strlen(h->method), i;

	if (h->form != EGRESS_FORM_HTTP) {
		if (n != -1)
			abort();
		return;
	}
	if (n < 0 || (size_t)n > sizeof(out) || (size_t)n < m + 2 ||
	    memcmp(out, h->method, m) != 0 || out[m] != ' ' || out[m + 1] != '/' ||
	    memmem(out, (size_t)n, "\r\nHost: ", 8) == NULL ||
	    n < 23 || memcmp(out + n - 23, "\r\nConnection: close\r\n\r\n", 23) != 0)
		abort();
	for (i = 0; i < (size_t)n; i++)
		if ((unsigned char)out[i] < 0x20 && out[i] != '\r' && out[i] != '\n' &&
		    out[i] != '\t')
			abort();
}

static int
fuzz_same(const struct egress_head *a, const struct egress_head *b)
{
	return a->form == b->form && egress_host_equal(&a->host, &b->host) &&
	       a->port == b->port && a->minor == b->minor &&
	       strcmp(a->method, b->method) == 0 && a->body == b->body && a->len == b->len;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	enum egress_head_rc a, b;
	size_t piece;

	if (size < 1)
		return 0;
	piece = data[0] == 0 ? 1 : data[0];
	data++, size--;
	a = fuzz_feed_pieces(&whole, data, size, size == 0 ? 1 : size);
	b = fuzz_feed_pieces(&split, data, size, piece);
	if (a != b)
		abort();
	if (a == EGRESS_HEAD_REFUSED) {
		if (whole.why == NULL || whole.why[0] == '\0' || strcmp(whole.why, split.why) != 0 ||
		    whole.status != split.status ||
		    (whole.status != 400 && whole.status != 405 && whole.status != 431 &&
		     whole.status != 500 && whole.status != 501 && whole.status != 505))
			abort();
		return 0;
	}
	if (a != EGRESS_HEAD_DONE)
		return 0;
	if (!fuzz_same(&whole, &split) || whole.len > EGRESS_HEAD_MAX || whole.len < 4 ||
	    memcmp(whole.buf + whole.len - 4, "\r\n\r\n", 4) != 0 || whole.port == 0 ||
	    whole.port > 65535)
		abort();
	fuzz_check_host(&whole);
	fuzz_check_upstream(&whole);
	return 0;
}
