/*
 * The TLS ClientHello reader (hello.h), after RFC 8446 sections 4.1.2 and
 * 5.1 and RFC 6066 section 3.
 *
 * Records are taken apart byte by byte (a header of 5, then its fragment),
 * the fragments joined into one handshake message, and the message, once
 * whole, read with a cursor that checks every length against what remains.
 */
#include "egress/hello.h"

#include <stdint.h>
#include <string.h>

enum { HELLO_READ, HELLO_DONE, HELLO_REFUSED };

#define HELLO_RECORD_HANDSHAKE 0x16
#define HELLO_RECORD_MAX 16384 /* 2^14: a plaintext record's fragment */
#define HELLO_CLIENT_HELLO 1
#define HELLO_EXT_SERVER_NAME 0x0000
#define HELLO_EXT_ECH 0xfe0d
#define HELLO_NAME_HOST 0

static enum egress_hello_rc
hello_refuse(struct egress_hello *h, const char *why)
{
	h->state = HELLO_REFUSED;
	h->why = why;
	return EGRESS_HELLO_REFUSED;
}

void
egress_hello_init(struct egress_hello *h)
{
	memset(&h->sni, 0, sizeof(h->sni));
	h->why = NULL;
	h->state = HELLO_READ;
	h->nrec = h->left = h->need = h->nmsg = 0;
}

/* A cursor over the message: every read checks what remains. */
struct hello_cur {
	const unsigned char *p;
	size_t n;
};

static int
hello_u8(struct hello_cur *c, size_t *v)
{
	if (c->n < 1)
		return -1;
	*v = c->p[0];
	c->p++, c->n--;
	return 0;
}

static int
hello_u16(struct hello_cur *c, size_t *v)
{
	if (c->n < 2)
		return -1;
	*v = (size_t)c->p[0] << 8 | c->p[1];
	c->p += 2, c->n -= 2;
	return 0;
}

/* The next len bytes as a cursor of their own. */
static int
hello_sub(struct hello_cur *c, size_t len, struct hello_cur *sub)
{
	if (c->n < len)
		return -1;
	sub->p = c->p;
	sub->n = len;
	c->p += len, c->n -= len;
	return 0;
}

/* A vector with a 1- or 2-byte length, within [min, max] bytes. */
static int
hello_vec(struct hello_cur *c, int wide, size_t min, size_t max, struct hello_cur *sub)
{
	size_t len;

	if ((wide ? hello_u16(c, &len) : hello_u8(c, &len)) == -1 || len < min || len > max)
		return -1;
	return hello_sub(c, len, sub);
}

/* The server_name extension's data: exactly one host_name. */
static const char *
hello_server_name(struct egress_hello *h, struct hello_cur ext)
{
	struct hello_cur list, name;
	const char *why;
	size_t type;

	if (ext.n == 0)
		return "an empty server_name extension";
	if (hello_vec(&ext, 1, 1, 0xffff, &list) == -1 || ext.n != 0)
		return "a malformed server_name extension";
	if (hello_u8(&list, &type) == -1 || hello_vec(&list, 1, 1, 0xffff, &name) == -1)
		return "a malformed server_name extension";
	if (type != HELLO_NAME_HOST)
		return "a server_name of another type than host_name";
	if (list.n != 0)
		return "more than one server name";
	if ((why = egress_host_parse((const char *)name.p, name.n, &h->sni)) != NULL)
		return why;
	if (h->sni.kind != EGRESS_HOST_NAME)
		return "an IP address as server_name";
	return NULL;
}

/* Walk the extensions: each once, no ECH, a server_name. */
static const char *
hello_extensions(struct egress_hello *h, struct hello_cur c)
{
	unsigned char seen[65536 / 8];
	struct hello_cur exts, ext;
	const char *why;
	size_t type;
	int sni = 0;

	if (c.n == 0)
		return "no server_name (SNI) in the ClientHello";
	if (hello_vec(&c, 1, 0, 0xffff, &exts) == -1 || c.n != 0)
		return "a malformed ClientHello: bad extensions length";
	memset(seen, 0, sizeof(seen));
	while (exts.n > 0) {
		if (hello_u16(&exts, &type) == -1 || hello_vec(&exts, 1, 0, 0xffff, &ext) == -1)
			return "a malformed ClientHello: bad extension length";
		if (seen[type / 8] & (1u << (type % 8)))
			return "a ClientHello that repeats an extension";
		seen[type / 8] |= (unsigned char)(1u << (type % 8));
		if (type == HELLO_EXT_ECH)
			return "an Encrypted ClientHello (ECH)";
		if (type != HELLO_EXT_SERVER_NAME)
			continue;
		if ((why = hello_server_name(h, ext)) != NULL)
			return why;
		sni = 1;
	}
	return sni ? NULL : "no server_name (SNI) in the ClientHello";
}

/* The whole ClientHello message body in h->msg[4..need). */
static enum egress_hello_rc
hello_parse(struct egress_hello *h)
{
	struct hello_cur c = {h->msg + 4, h->need - 4}, skip;
	size_t major, minor;
	const char *why;

	if (hello_u8(&c, &major) == -1 || hello_u8(&c, &minor) == -1 || major != 3)
		return hello_refuse(h, "a ClientHello of another protocol than TLS");
	if (hello_sub(&c, 32, &skip) == -1 ||          /* random */
	    hello_vec(&c, 0, 0, 32, &skip) == -1 ||    /* legacy_session_id */
	    hello_vec(&c, 1, 2, 0xfffe, &skip) == -1 || /* cipher_suites */
	    skip.n % 2 != 0 || hello_vec(&c, 0, 1, 0xff, &skip) == -1) /* compression */
		return hello_refuse(h, "a malformed ClientHello");
	if ((why = hello_extensions(h, c)) != NULL)
		return hello_refuse(h, why);
	h->state = HELLO_DONE;
	return EGRESS_HELLO_DONE;
}

/* A complete record header in h->rec. */
static enum egress_hello_rc
hello_record(struct egress_hello *h)
{
	if (h->rec[0] != HELLO_RECORD_HANDSHAKE)
		return hello_refuse(h, h->rec[0] & 0x80 ? "an SSLv2 ClientHello"
		                       : h->nmsg == 0   ? "not a TLS handshake"
		                                        : "a record of another type inside the "
		                                          "ClientHello");
	if (h->rec[1] != 3 || h->rec[2] > 4)
		return hello_refuse(h, "not a TLS record");
	h->left = (size_t)h->rec[3] << 8 | h->rec[4];
	if (h->left == 0 || h->left > HELLO_RECORD_MAX)
		return hello_refuse(h, "a TLS record of a bad length");
	return EGRESS_HELLO_MORE;
}

/* One byte of a record's fragment into the message; the message must end
 * with a record. */
static enum egress_hello_rc
hello_msg_byte(struct egress_hello *h, unsigned char c)
{
	h->msg[h->nmsg++] = c;
	h->left--;
	if (h->nmsg == 4) {
		if (h->msg[0] != HELLO_CLIENT_HELLO)
			return hello_refuse(h, "a handshake message other than ClientHello");
		h->need = 4 + ((size_t)h->msg[1] << 16 | (size_t)h->msg[2] << 8 | h->msg[3]);
		if (h->need > EGRESS_HELLO_MAX)
			return hello_refuse(h, "a ClientHello larger than 16 KiB");
		if (h->need == 4)
			return hello_refuse(h, "a malformed ClientHello");
	}
	if (h->nmsg < 4 || h->nmsg < h->need)
		return EGRESS_HELLO_MORE;
	if (h->left != 0)
		return hello_refuse(h, "data after the ClientHello in its record");
	return hello_parse(h);
}

enum egress_hello_rc
egress_hello_feed(struct egress_hello *h, const void *p, size_t n, size_t *used)
{
	const unsigned char *b = p;
	enum egress_hello_rc rc = EGRESS_HELLO_MORE;
	size_t i;

	if (used != NULL)
		*used = 0;
	if (h->state != HELLO_READ)
		return h->state == HELLO_DONE ? EGRESS_HELLO_DONE : EGRESS_HELLO_REFUSED;
	for (i = 0; i < n && rc == EGRESS_HELLO_MORE; i++) {
		if (h->left > 0) {
			rc = hello_msg_byte(h, b[i]);
			continue;
		}
		h->rec[h->nrec++] = b[i];
		if (h->nrec == 5) {
			h->nrec = 0;
			rc = hello_record(h);
		}
	}
	if (rc == EGRESS_HELLO_REFUSED)
		return rc;
	if (used != NULL)
		*used = i;
	return rc;
}
