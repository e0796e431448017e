/*
 * ipc/: msgpack pre-scan, envelope decoding, cursor, message catalog and
 * validators, channels over real socketpairs with a real event_base,
 * descriptor passing, chunking and the blocking helpers.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <sys/socket.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "ipc/ipc_msg.h"

static const char *last_err;

#define assert_reason(got, want)                                                            \
	do {                                                                                \
		const char *g_ = (got);                                                     \
		if (g_ == NULL || strstr(g_, (want)) == NULL)                               \
			fail_msg("reason \"%s\" does not contain \"%s\"", g_ ? g_ : "(null)", \
			    (want));                                                        \
	} while (0)

/* ---- helpers ---------------------------------------------------------- */

static int
mp_check(const uint8_t *b, size_t n)
{
	last_err = NULL;
	return ipc_msgpack_check(b, n, IPC_MAX_DEPTH, &last_err);
}

#define MP_REJECT(want, ...)                                                                \
	do {                                                                                \
		static const uint8_t b_[] = { __VA_ARGS__ };                                \
		assert_int_equal(mp_check(b_, sizeof(b_)), -1);                             \
		assert_reason(last_err, (want));                                            \
	} while (0)

#define MP_ACCEPT(...)                                                                      \
	do {                                                                                \
		static const uint8_t b_[] = { __VA_ARGS__ };                                \
		assert_int_equal(mp_check(b_, sizeof(b_)), 0);                              \
	} while (0)

/* A malloc'd NUL-terminated string of n copies of c; the caller frees it. */
static char *
strfill(size_t n, char c)
{
	char *s = malloc(n + 1);

	assert_non_null(s);
	memset(s, c, n);
	s[n] = '\0';
	return s;
}

/*
 * Append the value of one letter of a fmt, taking its arguments from *ap
 * (w NULL: only take them): n nil, b bool(int), u uint(unsigned), U uint64_t,
 * i int, I int64_t, s str(const char *), S (const char *, size_t),
 * B bin(const void *, size_t), a array(unsigned), m map(unsigned), f double.
 * An array or map letter writes the header only: its values follow in fmt.
 */
static void
put_one(struct ipc_wbuf *w, char c, va_list *ap)
{
	const char *s;
	uint64_t u;
	int64_t i;
	size_t n;
	double d;

	switch (c) {
	case 'n':
		if (w != NULL)
			ipc_put_nil(w);
		break;
	case 'b':
		i = va_arg(*ap, int);
		if (w != NULL)
			ipc_put_bool(w, i != 0);
		break;
	case 'i':
		i = va_arg(*ap, int);
		if (w != NULL)
			ipc_put_i64(w, i);
		break;
	case 'u':
	case 'a':
	case 'm':
		u = va_arg(*ap, unsigned);
		if (w != NULL && c == 'u')
			ipc_put_u64(w, u);
		else if (w != NULL && c == 'a')
			ipc_put_array(w, (uint32_t)u);
		else if (w != NULL)
			ipc_put_map(w, (uint32_t)u);
		break;
	case 'U':
		u = va_arg(*ap, uint64_t);
		if (w != NULL)
			ipc_put_u64(w, u);
		break;
	case 'I':
		i = va_arg(*ap, int64_t);
		if (w != NULL)
			ipc_put_i64(w, i);
		break;
	case 's':
		s = va_arg(*ap, const char *);
		if (w != NULL)
			ipc_put_str(w, s);
		break;
	case 'S':
	case 'B':
		s = va_arg(*ap, const void *);
		n = va_arg(*ap, size_t);
		if (w != NULL && c == 'S')
			ipc_put_strn(w, s, n);
		else if (w != NULL)
			ipc_put_bin(w, s, n);
		break;
	case 'f':
		d = va_arg(*ap, double);
		if (w != NULL)
			msgpack_pack_double(&w->pk, d);
		break;
	default: fail_msg("bad fmt char %c", c);
	}
}

/* Take the arguments of the value at fmt[*i], with every value inside it
 * when it is an array or a map, and move *i past it. */
static void
skip_value(const char *fmt, size_t *i, va_list *ap)
{
	char c = fmt[(*i)++];
	unsigned n;

	if (c != 'a' && c != 'm') {
		put_one(NULL, c, ap);
		return;
	}
	n = va_arg(*ap, unsigned);
	for (n *= c == 'm' ? 2 : 1; n > 0; n--)
		skip_value(fmt, i, ap);
}

/* The msgpack types a value can be sent as (what put_wt writes). */
enum wt { WT_NIL, WT_BOOL, WT_UINT, WT_NINT, WT_STR, WT_BIN, WT_ARRAY, WT_MAP, WT_FLOAT, WT__N };

static void
put_wt(struct ipc_wbuf *w, int wt)
{
	switch (wt) {
	case WT_NIL: ipc_put_nil(w); break;
	case WT_BOOL: ipc_put_bool(w, 1); break;
	case WT_UINT: ipc_put_u64(w, 1); break;
	case WT_NINT: ipc_put_i64(w, -1); break;
	case WT_STR: ipc_put_str(w, "1"); break;
	case WT_BIN: ipc_put_bin(w, "1", 1); break;
	case WT_ARRAY: ipc_put_array(w, 0); break;
	case WT_MAP: ipc_put_map(w, 0); break;
	default: msgpack_pack_double(&w->pk, 1.0); break;
	}
}

/* Whether wt is the type fmt letter c puts. */
static int
wt_same(int wt, char c)
{
	switch (c) {
	case 'n': return wt == WT_NIL;
	case 'b': return wt == WT_BOOL;
	case 'u': case 'U': return wt == WT_UINT;
	case 'i': case 'I': return wt == WT_NINT || wt == WT_UINT;
	case 's': case 'S': return wt == WT_STR;
	case 'B': return wt == WT_BIN;
	case 'a': return wt == WT_ARRAY;
	case 'm': return wt == WT_MAP;
	default: return wt == WT_FLOAT;
	}
}

/*
 * Append values following fmt (letters as for put_one), except that the
 * value at fmt[swap] (with everything inside it) is replaced by one value
 * of type wt; swap SIZE_MAX replaces nothing.
 */
static void
vput_swap(struct ipc_wbuf *w, const char *fmt, va_list ap, size_t swap, int wt)
{
	va_list aq;
	size_t i = 0;

	va_copy(aq, ap);
	while (fmt[i] != '\0') {
		if (i == swap) {
			skip_value(fmt, &i, &aq);
			put_wt(w, wt);
		} else
			put_one(w, fmt[i++], &aq);
	}
	va_end(aq);
}

static void
vput(struct ipc_wbuf *w, const char *fmt, va_list ap)
{
	vput_swap(w, fmt, ap, SIZE_MAX, 0);
}

/* A finished frame in w (the caller frees w). */
static void
wbuild(struct ipc_wbuf *w, uint32_t type, uint64_t id, uint32_t nfields, const char *fmt, ...)
{
	va_list ap;

	ipc_wbuf_begin(w, type, id, nfields);
	va_start(ap, fmt);
	vput(w, fmt, ap);
	va_end(ap);
	assert_int_equal(ipc_wbuf_finish(w, 0), 0);
}

/* Decode the frame in w into m (the caller frees m) and free w. */
static void
wdecode(struct ipc_wbuf *w, struct ipc_msg *m)
{
	assert_int_equal(ipc_wbuf_finish(w, 0), 0);
	assert_int_equal(ipc_frame_decode((const uint8_t *)w->sb.data + 4, w->sb.size - 4, m,
			     &last_err),
	    0);
	ipc_wbuf_free(w);
}

static void
vbuild(struct ipc_msg *m, uint32_t type, uint32_t nfields, const char *fmt, va_list ap)
{
	struct ipc_wbuf w;

	ipc_wbuf_begin(&w, type, 1, nfields);
	vput(&w, fmt, ap);
	wdecode(&w, m);
}

static void
build(struct ipc_msg *m, uint32_t type, uint32_t nfields, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vbuild(m, type, nfields, fmt, ap);
	va_end(ap);
}

/* Result of type's catalog validator on the body built from fmt. */
static int
valid(uint32_t type, uint32_t nfields, const char *fmt, ...)
{
	struct ipc_msg m;
	va_list ap;
	int rc;

	va_start(ap, fmt);
	vbuild(&m, type, nfields, fmt, ap);
	va_end(ap);
	rc = ipc_msg_lookup(type)->validate(m.body);
	ipc_msg_free(&m);
	return rc;
}

/* Raw msgpack for hand-made envelopes. */
struct raw {
	msgpack_sbuffer sb;
	msgpack_packer pk;
};

static void
raw_init(struct raw *r)
{
	msgpack_sbuffer_init(&r->sb);
	msgpack_packer_init(&r->pk, &r->sb, msgpack_sbuffer_write);
}

static void
raw_str(struct raw *r, const char *s)
{
	msgpack_pack_str_with_body(&r->pk, s, strlen(s));
}

static int
raw_decode(struct raw *r, struct ipc_msg *m)
{
	int rc;

	last_err = NULL;
	rc = ipc_frame_decode((const uint8_t *)r->sb.data, r->sb.size, m, &last_err);
	msgpack_sbuffer_destroy(&r->sb);
	return rc;
}

/* ---- ipc_msgpack_check ------------------------------------------------ */

static void
t_mp_accepts_every_format(void **state)
{
	static const uint8_t b[] = {
		0xdc, 0x00, 29,                          /* array16 of 29 */
		0x05, 0xff, 0xc0, 0xc2, 0xc3,            /* fixint, neg fixint, nil, bools */
		0xc4, 1, 'x', 0xc5, 0, 1, 'x', 0xc6, 0, 0, 0, 1, 'x', /* bin8/16/32 */
		0xca, 0, 0, 0, 0, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0,       /* float32/64 */
		0xcc, 1, 0xcd, 0, 1, 0xce, 0, 0, 0, 1, 0xcf, 0, 0, 0, 0, 0, 0, 0, 1,
		0xd0, 0xff, 0xd1, 0xff, 0xff, 0xd2, 0xff, 0xff, 0xff, 0xff,
		0xd3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xa1, 'a', 0xd9, 1, 'a', 0xda, 0, 1, 'a', 0xdb, 0, 0, 0, 1, 'a',
		0xdc, 0, 0, 0xdd, 0, 0, 0, 0, 0xde, 0, 0, 0xdf, 0, 0, 0, 0,
		0x81, 0x01, 0x02, 0x90, 0x80,
	};
	msgpack_unpacked up;
	size_t off = 0;

	assert_int_equal(mp_check(b, sizeof(b)), 0);
	/* msgpack-c agrees that this is exactly one value */
	msgpack_unpacked_init(&up);
	assert_int_equal(msgpack_unpack_next(&up, (const char *)b, sizeof(b), &off),
	    MSGPACK_UNPACK_SUCCESS);
	assert_int_equal(off, sizeof(b));
	assert_int_equal(up.data.via.array.size, 29);
	msgpack_unpacked_destroy(&up);
}

static void
t_mp_empty(void **state)
{
	assert_int_equal(mp_check((const uint8_t *)"", 0), -1);
	assert_reason(last_err, "empty");
}

static void
t_mp_huge_array32(void **state)
{
	/* 5 bytes claiming 2^32-1 elements: rejected before msgpack allocates */
	MP_REJECT("array length", 0xdd, 0xff, 0xff, 0xff, 0xff);
}

static void
t_mp_array16_short(void **state)
{
	MP_REJECT("array length", 0xdc, 0x00, 0x05, 1, 2, 3, 4);
	MP_ACCEPT(0xdc, 0x00, 0x04, 1, 2, 3, 4);
}

static void
t_mp_huge_map32(void **state)
{
	MP_REJECT("map length", 0xdf, 0xff, 0xff, 0xff, 0xff);
}

static void
t_mp_map_two_bytes_per_entry(void **state)
{
	/* two entries need four bytes; three bytes would do for an array */
	MP_REJECT("map length", 0x82, 1, 2, 3);
	MP_REJECT("map length", 0xde, 0x00, 0x02, 1, 2, 3);
	MP_ACCEPT(0x82, 1, 2, 3, 4);
}

static void
t_mp_outer_elements_counted(void **state)
{
	/* the inner array fits the bytes left only if the outer array's second
	 * element is forgotten */
	MP_REJECT("array length", 0x92, 0xdc, 0x00, 0x03, 1, 2, 3);
	MP_ACCEPT(0x92, 0xdc, 0x00, 0x02, 1, 2, 3);
}

static void
t_mp_huge_str32(void **state)
{
	MP_REJECT("str length", 0xdb, 0xff, 0xff, 0xff, 0xff, 'a');
}

static void
t_mp_str_short(void **state)
{
	MP_REJECT("str length", 0xd9, 5, 'a', 'b');
	MP_REJECT("str length", 0xa3, 'a', 'b');
	MP_REJECT("str length", 0x92, 0xa2, 'a', 'b'); /* leaves nothing for the 2nd */
}

static void
t_mp_huge_bin32(void **state)
{
	MP_REJECT("bin length", 0xc6, 0xff, 0xff, 0xff, 0xff);
}

static void
t_mp_bin_short(void **state)
{
	MP_REJECT("bin length", 0xc5, 0x00, 0x03, 'a', 'b');
}

static void
t_mp_depth(void **state)
{
	static const uint8_t m[] = { 0x81, 0x01, 0x81, 0x01, 0x91, 0x01 };
	uint8_t b[IPC_MAX_DEPTH + 1];

	/* IPC_MAX_DEPTH nested arrays: accepted */
	memset(b, 0x91, sizeof(b));
	b[IPC_MAX_DEPTH - 1] = 0x90;
	assert_int_equal(mp_check(b, IPC_MAX_DEPTH), 0);
	/* one more: rejected */
	b[IPC_MAX_DEPTH - 1] = 0x91;
	b[IPC_MAX_DEPTH] = 0x90;
	assert_int_equal(mp_check(b, IPC_MAX_DEPTH + 1), -1);
	assert_reason(last_err, "nesting too deep");
	/* maps count as nesting too, and the caller's limit is honoured */
	assert_int_equal(ipc_msgpack_check(m, sizeof(m), 2, &last_err), -1);
	assert_reason(last_err, "nesting too deep");
	assert_int_equal(ipc_msgpack_check(m, sizeof(m), 3, &last_err), 0);
}

static void
t_mp_depth_limit_unsupported(void **state)
{
	static const uint8_t b[] = { 0x01 };

	assert_int_equal(ipc_msgpack_check(b, sizeof(b), 1000, &last_err), -1);
	assert_reason(last_err, "depth limit");
}

static void
t_mp_truncated_scalars(void **state)
{
	static const uint8_t heads[] = { 0xcc, 0xcd, 0xce, 0xcf, 0xd0, 0xd1, 0xd2, 0xd3,
		0xca, 0xcb };
	static const size_t sizes[] = { 2, 3, 5, 9, 2, 3, 5, 9, 5, 9 };
	uint8_t b[9] = { 0 };
	size_t i;

	for (i = 0; i < sizeof(heads); i++) {
		b[0] = heads[i];
		assert_int_equal(mp_check(b, sizes[i]), 0);
		assert_int_equal(mp_check(b, sizes[i] - 1), -1);
		assert_reason(last_err, "truncated");
	}
}

static void
t_mp_truncated_headers(void **state)
{
	MP_REJECT("truncated", 0xda, 0x00);
	MP_REJECT("truncated", 0xdd, 0x00, 0x00);
	MP_REJECT("truncated", 0xc6, 0x00);
	MP_REJECT("truncated", 0x91, 0xcd, 0x00); /* inside a container */
	/* a missing element is caught when its container opens */
	MP_REJECT("array length", 0x92, 0x01);
	MP_REJECT("array length", 0x91, 0x91);
}

static void
t_mp_trailing_byte(void **state)
{
	MP_REJECT("trailing", 0xc0, 0xc0);
	MP_REJECT("trailing", 0x90, 0x00);
	MP_REJECT("trailing", 0xa1, 'a', 'b');
}

static void
t_mp_never_used(void **state)
{
	MP_REJECT("0xc1", 0xc1);
	MP_REJECT("0xc1", 0x92, 0x01, 0xc1);
}

static void
t_mp_ext(void **state)
{
	MP_REJECT("ext", 0xc7, 0x01, 0x01, 0x00);
	MP_REJECT("ext", 0xc8, 0x00, 0x01, 0x01, 0x00);
	MP_REJECT("ext", 0xc9, 0x00, 0x00, 0x00, 0x01, 0x01, 0x00);
	MP_REJECT("ext", 0xd4, 0x01, 0x00);
	MP_REJECT("ext", 0xd5, 0x01, 0x00, 0x00);
	MP_REJECT("ext", 0xd6, 0x01, 0, 0, 0, 0);
	MP_REJECT("ext", 0xd7, 0x01, 0, 0, 0, 0, 0, 0, 0, 0);
	MP_REJECT("ext", 0xd8, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
}

/* ---- encoding ------------------------------------------------------------ */

static void
t_wb_prefix_and_limit(void **state)
{
	struct ipc_wbuf w;
	const uint8_t *p;

	ipc_wbuf_begin(&w, IMSG_LOG_VERBOSE, 9, 1);
	ipc_put_u64(&w, 2);
	assert_int_equal(ipc_wbuf_finish(&w, 4), -1); /* payload is larger than 4 */
	assert_int_equal(ipc_wbuf_finish(&w, 64), 0);
	p = (const uint8_t *)w.sb.data;
	assert_int_equal(p[0] << 24 | p[1] << 16 | p[2] << 8 | p[3], w.sb.size - 4);
	ipc_wbuf_free(&w);
	ipc_wbuf_free(&w); /* idempotent */
}

static void
t_wb_field_count_mismatch(void **state)
{
	struct ipc_wbuf w;

	ipc_wbuf_begin(&w, IMSG_READY, 1, 2);
	ipc_put_u64(&w, 1);
	assert_int_equal(ipc_wbuf_finish(&w, 0), -1); /* one value missing */
	ipc_put_u64(&w, 2);
	assert_int_equal(ipc_wbuf_finish(&w, 0), 0);
	ipc_put_u64(&w, 3);
	assert_int_equal(ipc_wbuf_finish(&w, 0), -1); /* one value too many */
	ipc_wbuf_free(&w);
}

static void
t_wb_int_encoding(void **state)
{
	struct ipc_msg m;

	build(&m, IMSG_CTL_REPLY, 3, "iII", 5, (int64_t)-5, INT64_MIN);
	assert_int_equal(m.body->via.array.ptr[0].type, MSGPACK_OBJECT_POSITIVE_INTEGER);
	assert_int_equal(m.body->via.array.ptr[1].type, MSGPACK_OBJECT_NEGATIVE_INTEGER);
	assert_true(m.body->via.array.ptr[2].via.i64 == INT64_MIN);
	ipc_msg_free(&m);
}

/* ---- ipc_frame_decode ---------------------------------------------------- */

static void
t_fr_ok_any_key_order(void **state)
{
	struct raw r;
	struct ipc_msg m;

	raw_init(&r);
	msgpack_pack_map(&r.pk, 3);
	raw_str(&r, "b");
	msgpack_pack_array(&r.pk, 1);
	raw_str(&r, "hello");
	raw_str(&r, "id");
	msgpack_pack_uint64(&r.pk, UINT64_MAX);
	raw_str(&r, "t");
	msgpack_pack_uint64(&r.pk, UINT32_MAX);
	assert_int_equal(raw_decode(&r, &m), 0);
	assert_true(m.type == UINT32_MAX);
	assert_true(m.id == UINT64_MAX);
	assert_int_equal(m.fd, -1);
	assert_int_equal(m.body->type, MSGPACK_OBJECT_ARRAY);
	assert_int_equal(m.body->via.array.size, 1);
	ipc_msg_free(&m);
	ipc_msg_free(&m); /* idempotent */
}

static void
t_fr_body_owned_by_message(void **state)
{
	struct ipc_wbuf w;
	struct ipc_msg m;
	const msgpack_object *s;

	wbuild(&w, IMSG_LISTEN_FD, 1, 1, "s", "127.0.0.1:8480");
	assert_int_equal(ipc_frame_decode((const uint8_t *)w.sb.data + 4, w.sb.size - 4, &m,
			     &last_err),
	    0);
	memset(w.sb.data, 0xee, w.sb.size); /* the input is gone */
	ipc_wbuf_free(&w);
	s = &m.body->via.array.ptr[0];
	assert_int_equal(s->type, MSGPACK_OBJECT_STR);
	assert_memory_equal(s->via.str.ptr, "127.0.0.1:8480", 14);
	ipc_msg_free(&m);
}

/* Envelope with keys from the list; value kinds: 'u' uint, 'i' -1, 's' str,
 * 'a' empty array, 'm' empty map, 'n' nil, 'f' float, 'B' uint 2^32. */
static int
env_decode(const char *keys[], const char *kinds, struct ipc_msg *m)
{
	struct raw r;
	size_t i, n = strlen(kinds);

	raw_init(&r);
	msgpack_pack_map(&r.pk, n);
	for (i = 0; i < n; i++) {
		if (keys[i] != NULL)
			raw_str(&r, keys[i]);
		else
			msgpack_pack_uint64(&r.pk, 1); /* a non-string key */
		switch (kinds[i]) {
		case 'u': msgpack_pack_uint64(&r.pk, 1); break;
		case 'i': msgpack_pack_int64(&r.pk, -1); break;
		case 's': raw_str(&r, "1"); break;
		case 'a': msgpack_pack_array(&r.pk, 0); break;
		case 'm': msgpack_pack_map(&r.pk, 0); break;
		case 'n': msgpack_pack_nil(&r.pk); break;
		case 'f': msgpack_pack_double(&r.pk, 1.0); break;
		case 'B': msgpack_pack_uint64(&r.pk, (uint64_t)UINT32_MAX + 1); break;
		}
	}
	return raw_decode(&r, m);
}

#define ENV_REJECT(want, kinds, ...)                                                        \
	do {                                                                                \
		const char *k_[] = { __VA_ARGS__ };                                         \
		struct ipc_msg m_;                                                          \
		assert_int_equal(env_decode(k_, (kinds), &m_), -1);                         \
		assert_reason(last_err, (want));                                            \
		ipc_msg_free(&m_); /* harmless after a failed decode */                   \
	} while (0)

static void
t_fr_ok_helper_baseline(void **state)
{
	const char *k[] = { "t", "id", "b" };
	struct ipc_msg m;

	/* the helper builds a valid frame when nothing is wrong */
	assert_int_equal(env_decode(k, "uua", &m), 0);
	ipc_msg_free(&m);
}

static void
t_fr_not_a_map(void **state)
{
	static const uint8_t b[] = { 0x93, 0x01, 0x01, 0x90 };
	struct ipc_msg m;

	assert_int_equal(ipc_frame_decode(b, sizeof(b), &m, &last_err), -1);
	assert_reason(last_err, "not a map");
}

/* A frame of one-byte values must not make the receiver allocate ~24x its
 * size: the value count is bounded before msgpack-c sees it. */
static void
t_ms_too_many_values(void **state)
{
	size_t n = IPC_MAX_VALUES, len = 5 + n, i;
	uint8_t *b = malloc(len + 1);

	assert_non_null(b);
	b[0] = 0xdd; /* array32 of n - 1 nils: n values in all, accepted */
	b[1] = (uint8_t)((n - 1) >> 24);
	b[2] = (uint8_t)((n - 1) >> 16);
	b[3] = (uint8_t)((n - 1) >> 8);
	b[4] = (uint8_t)(n - 1);
	for (i = 5; i < len + 1; i++)
		b[i] = 0xc0;
	assert_int_equal(ipc_msgpack_check(b, len - 1, IPC_MAX_DEPTH, &last_err), 0);
	b[1] = (uint8_t)(n >> 24); /* one more: refused */
	b[2] = (uint8_t)(n >> 16);
	b[3] = (uint8_t)(n >> 8);
	b[4] = (uint8_t)n;
	assert_int_equal(ipc_msgpack_check(b, len, IPC_MAX_DEPTH, &last_err), -1);
	assert_reason(last_err, "too many values");
	free(b);
}

static void
t_fr_scalar_and_empty_map(void **state)
{
	static const uint8_t scalar[] = { 0x64 };
	static const uint8_t empty[] = { 0x80 };
	struct ipc_msg m;

	/* values msgpack-c decodes without allocating anything */
	assert_int_equal(ipc_frame_decode(scalar, sizeof(scalar), &m, &last_err), -1);
	assert_reason(last_err, "not a map");
	assert_int_equal(ipc_frame_decode(empty, sizeof(empty), &m, &last_err), -1);
	assert_reason(last_err, "missing key \"t\"");
}

static void
t_fr_missing_t(void **state)
{
	ENV_REJECT("missing key \"t\"", "ua", "id", "b");
}

static void
t_fr_missing_id(void **state)
{
	ENV_REJECT("missing key \"id\"", "ua", "t", "b");
}

static void
t_fr_missing_b(void **state)
{
	ENV_REJECT("missing key \"b\"", "uu", "t", "id");
}

static void
t_fr_duplicate_key(void **state)
{
	ENV_REJECT("duplicate key \"t\"", "uua", "t", "t", "b");
	ENV_REJECT("duplicate key \"b\"", "uuaa", "t", "b", "id", "b");
}

static void
t_fr_extra_key(void **state)
{
	ENV_REJECT("unexpected key", "uuau", "t", "id", "b", "x");
	ENV_REJECT("unexpected key", "uua", "t", "ID", "b");
}

static void
t_fr_non_string_key(void **state)
{
	ENV_REJECT("not a string", "uua", "t", NULL, "b");
}

static void
t_fr_t_wrong_types(void **state)
{
	ENV_REJECT("\"t\" is not an unsigned integer", "iua", "t", "id", "b");
	ENV_REJECT("\"t\" is not an unsigned integer", "sua", "t", "id", "b");
	ENV_REJECT("\"t\" is not an unsigned integer", "fua", "t", "id", "b");
	ENV_REJECT("\"t\" is not an unsigned integer", "nua", "t", "id", "b");
}

static void
t_fr_t_too_big(void **state)
{
	ENV_REJECT("\"t\" is above", "Bua", "t", "id", "b");
}

static void
t_fr_id_wrong_types(void **state)
{
	ENV_REJECT("\"id\" is not an unsigned integer", "uia", "t", "id", "b");
	ENV_REJECT("\"id\" is not an unsigned integer", "usa", "t", "id", "b");
}

static void
t_fr_b_not_array(void **state)
{
	ENV_REJECT("\"b\" is not an array", "uum", "t", "id", "b");
	ENV_REJECT("\"b\" is not an array", "uun", "t", "id", "b");
	ENV_REJECT("\"b\" is not an array", "uus", "t", "id", "b");
}

static void
t_fr_prescan_first(void **state)
{
	static const uint8_t b[] = { 0xdf, 0xff, 0xff, 0xff, 0xff };
	struct ipc_msg m;

	assert_int_equal(ipc_frame_decode(b, sizeof(b), &m, &last_err), -1);
	assert_reason(last_err, "msgpack: map length");
}

/* ---- cursor --------------------------------------------------------------- */

static void
t_cur_exact_types(void **state)
{
	struct ipc_msg m;
	struct ipc_cur c;
	uint64_t u;
	int64_t i;
	int b;
	const char *s;
	size_t len;
	const uint8_t *p;

	build(&m, IMSG_CTL_REPLY, 6, "uisBbn", 7u, -7, "x", "y", (size_t)1, 1);
	ipc_cur_init(&c, m.body);
	/* a positive int is not a bool, a string or nil; failures do not advance */
	assert_int_equal(ipc_get_bool(&c, &b), -1);
	assert_int_equal(ipc_get_str(&c, &s, &len, 10), -1);
	assert_int_equal(ipc_get_nil(&c), -1);
	assert_int_equal(ipc_get_u64(&c, &u), 0);
	assert_int_equal(u, 7);
	/* a negative int is not unsigned */
	assert_int_equal(ipc_get_u64(&c, &u), -1);
	assert_int_equal(ipc_get_i64(&c, &i), 0);
	assert_true(i == -7);
	/* a str is not a bin and vice versa */
	assert_int_equal(ipc_get_bin(&c, &p, &len, 10), -1);
	assert_int_equal(ipc_get_str(&c, &s, &len, 10), 0);
	assert_int_equal(ipc_get_str(&c, &s, &len, 10), -1);
	assert_int_equal(ipc_get_bin(&c, &p, &len, 10), 0);
	assert_int_equal(len, 1);
	assert_int_equal(p[0], 'y');
	/* a bool is not an int */
	assert_int_equal(ipc_get_u64(&c, &u), -1);
	assert_int_equal(ipc_get_bool(&c, &b), 0);
	assert_int_equal(b, 1);
	assert_true(ipc_is_nil(&c));
	assert_int_equal(ipc_end(&c), -1);
	assert_int_equal(ipc_get_nil(&c), 0);
	assert_false(ipc_is_nil(&c));
	assert_int_equal(ipc_end(&c), 0);
	assert_int_equal(ipc_get_nil(&c), -1); /* nothing left */
	ipc_msg_free(&m);
}

static void
t_cur_int_ranges(void **state)
{
	struct ipc_msg m;
	struct ipc_cur c;
	uint64_t u;
	uint32_t u32;
	int64_t i;

	build(&m, IMSG_CTL_REPLY, 4, "UUUI", (uint64_t)UINT32_MAX, (uint64_t)UINT32_MAX + 1,
	    (uint64_t)INT64_MAX + 1, INT64_MIN);
	ipc_cur_init(&c, m.body);
	assert_int_equal(ipc_get_u32(&c, &u32), 0);
	assert_true(u32 == UINT32_MAX);
	assert_int_equal(ipc_get_u32(&c, &u32), -1);
	assert_int_equal(ipc_get_i64(&c, &i), 0);
	assert_true(i == (int64_t)UINT32_MAX + 1);
	assert_int_equal(ipc_get_i64(&c, &i), -1); /* 2^63 does not fit */
	assert_int_equal(ipc_get_u64(&c, &u), 0);
	assert_true(u == (uint64_t)INT64_MAX + 1);
	assert_int_equal(ipc_get_u32(&c, &u32), -1);
	assert_int_equal(ipc_get_i64(&c, &i), 0);
	assert_true(i == INT64_MIN);
	assert_int_equal(ipc_end(&c), 0);
	ipc_msg_free(&m);
}

static void
t_cur_str_bounds(void **state)
{
	struct ipc_msg m;
	struct ipc_cur c;
	const char *s;
	size_t len;
	char dst[4];

	build(&m, IMSG_CTL_REPLY, 4, "sSss", "abcd", "a\0b", (size_t)3, "abc", "");
	ipc_cur_init(&c, m.body);
	assert_int_equal(ipc_get_str(&c, &s, &len, 3), -1);
	assert_int_equal(ipc_get_cstr(&c, dst, sizeof(dst)), -1); /* 4 bytes + NUL */
	assert_int_equal(ipc_get_str(&c, &s, &len, 4), 0);
	assert_int_equal(ipc_get_cstr(&c, dst, sizeof(dst)), -1); /* embedded NUL */
	assert_int_equal(ipc_get_str(&c, &s, &len, 3), 0);
	assert_int_equal(ipc_get_cstr(&c, dst, 0), -1);
	assert_int_equal(ipc_get_cstr(&c, dst, sizeof(dst)), 0); /* exactly fits */
	assert_string_equal(dst, "abc");
	assert_int_equal(ipc_get_cstr(&c, dst, 1), 0);
	assert_string_equal(dst, "");
	assert_int_equal(ipc_end(&c), 0);
	ipc_msg_free(&m);
}

static void
t_cur_bin_and_array_bounds(void **state)
{
	struct ipc_msg m;
	struct ipc_cur c, sub;
	const uint8_t *p;
	size_t len;
	uint64_t u;
	const msgpack_object *o;

	build(&m, IMSG_CTL_REPLY, 2, "Bauu", "abc", (size_t)3, 2u, 1u, 2u);
	ipc_cur_init(&c, m.body);
	assert_int_equal(ipc_get_bin(&c, &p, &len, 2), -1);
	assert_int_equal(ipc_get_bin(&c, &p, &len, 3), 0);
	assert_int_equal(ipc_get_array(&c, &sub, 1), -1);
	assert_int_equal(ipc_get_array(&c, &sub, 2), 0);
	assert_int_equal(ipc_end(&c), 0);
	assert_int_equal(ipc_end(&sub), -1); /* trailing fields */
	assert_int_equal(ipc_get_any(&sub, &o), 0);
	assert_int_equal(o->type, MSGPACK_OBJECT_POSITIVE_INTEGER);
	assert_int_equal(ipc_get_u64(&sub, &u), 0);
	assert_int_equal(u, 2);
	assert_int_equal(ipc_get_any(&sub, &o), -1);
	assert_int_equal(ipc_end(&sub), 0);
	ipc_msg_free(&m);
}

static void
t_cur_not_an_array(void **state)
{
	msgpack_object o = { .type = MSGPACK_OBJECT_NIL };
	struct ipc_cur c;
	const msgpack_object *any;

	ipc_cur_init(&c, &o);
	assert_int_equal(ipc_get_any(&c, &any), -1);
	assert_int_equal(ipc_end(&c), -1);
	ipc_cur_init(&c, NULL);
	assert_int_equal(ipc_get_nil(&c), -1);
	assert_int_equal(ipc_end(&c), -1);
}

/* ---- validators -------------------------------------------------------- */

#define HELLO_FMT "uuubuuss"
#define HELLO_OK IPC_PROTO_VERSION, (unsigned)ROLE_ENGINE, 1u, 0, 1000u, 1000u

static void
t_v_hello(void **state)
{
	char *longp = strfill(PATH_MAX, 'a');

	assert_int_equal(valid(IMSG_HELLO, 8, HELLO_FMT, HELLO_OK, "/var/empty", "main"), 0);
	/* too few, too many */
	assert_int_equal(valid(IMSG_HELLO, 7, "uuubuus", HELLO_OK, "/var/empty"), -1);
	assert_int_equal(
	    valid(IMSG_HELLO, 9, HELLO_FMT "n", HELLO_OK, "/var/empty", "main"), -1);
	/* role out of range */
	assert_int_equal(valid(IMSG_HELLO, 8, HELLO_FMT, 1u, (unsigned)ROLE__COUNT, 1u, 0, 1u,
			     1u, "/var/empty", "main"),
	    -1);
	assert_int_equal(valid(IMSG_HELLO, 8, HELLO_FMT, 1u, (unsigned)ROLE__COUNT - 1, 1u, 0,
			     1u, 1u, "/var/empty", "main"),
	    0);
	/* chroot not absolute, empty, too long, with a NUL */
	assert_int_equal(valid(IMSG_HELLO, 8, HELLO_FMT, HELLO_OK, "var/empty", "main"), -1);
	assert_int_equal(valid(IMSG_HELLO, 8, HELLO_FMT, HELLO_OK, "", "main"), -1);
	longp[0] = '/';
	assert_int_equal(valid(IMSG_HELLO, 8, HELLO_FMT, HELLO_OK, longp, "main"), -1);
	longp[PATH_MAX - 1] = '\0';
	assert_int_equal(valid(IMSG_HELLO, 8, HELLO_FMT, HELLO_OK, longp, "main"), 0);
	assert_int_equal(valid(IMSG_HELLO, 8, "uuubuuSs", HELLO_OK, "/a\0b", (size_t)4, "main"),
	    -1);
	free(longp);
}

static void
t_v_hello_fields(void **state)
{
	char *inst = strfill(IPC_INSTANCE_MAX + 1, 'i');

	/* instance too long */
	assert_int_equal(valid(IMSG_HELLO, 8, HELLO_FMT, HELLO_OK, "/", inst), -1);
	inst[IPC_INSTANCE_MAX] = '\0';
	assert_int_equal(valid(IMSG_HELLO, 8, HELLO_FMT, HELLO_OK, "/", inst), 0);
	/* devmode is a bool, not an int */
	assert_int_equal(valid(IMSG_HELLO, 8, "uuuuuuss", 1u, 1u, 1u, 0u, 1u, 1u, "/", "m"), -1);
	/* uid negative, proto above 32 bits */
	assert_int_equal(valid(IMSG_HELLO, 8, "uuubiuss", 1u, 1u, 1u, 0, -1, 1u, "/", "m"), -1);
	assert_int_equal(valid(IMSG_HELLO, 8, "Uuubuuss", (uint64_t)1 << 32, 1u, 1u, 0, 1u, 1u,
			     "/", "m"),
	    -1);
	free(inst);
}

static void
t_v_ready(void **state)
{
	assert_int_equal(valid(IMSG_READY, 2, "uu", 1u, 42u), 0);
	assert_int_equal(valid(IMSG_READY, 1, "u", 1u), -1);
	assert_int_equal(valid(IMSG_READY, 3, "uuu", 1u, 42u, 0u), -1);
	assert_int_equal(valid(IMSG_READY, 2, "us", 1u, "42"), -1);
	assert_int_equal(valid(IMSG_READY, 2, "uU", 1u, (uint64_t)1 << 32), -1);
}

static void
t_v_shutdown(void **state)
{
	assert_int_equal(valid(IMSG_SHUTDOWN, 0, ""), 0);
	assert_int_equal(valid(IMSG_SHUTDOWN, 1, "n"), -1);
}

static void
t_v_log_verbose(void **state)
{
	unsigned l;

	for (l = 0; l <= 3; l++)
		assert_int_equal(valid(IMSG_LOG_VERBOSE, 1, "u", l), 0);
	assert_int_equal(valid(IMSG_LOG_VERBOSE, 1, "u", 4u), -1);
	assert_int_equal(valid(IMSG_LOG_VERBOSE, 1, "i", -1), -1);
	assert_int_equal(valid(IMSG_LOG_VERBOSE, 1, "s", "1"), -1);
	assert_int_equal(valid(IMSG_LOG_VERBOSE, 0, ""), -1);
	assert_int_equal(valid(IMSG_LOG_VERBOSE, 2, "uu", 1u, 1u), -1);
}

static void
t_v_db_op_ok(void **state)
{
	assert_int_equal(valid(IMSG_DB_OP, 2, "sanbiIsB", "run_get_2", 6u, 1, -1, (int64_t)7,
			     "text", "\0\1", (size_t)2),
	    0);
	assert_int_equal(valid(IMSG_DB_OP, 2, "sa", "x", 0u), 0);
}

static void
t_v_db_op_names(void **state)
{
	char *name = strfill(IPC_OPNAME_MAX + 1, 'a');

	assert_int_equal(valid(IMSG_DB_OP, 2, "sa", "", 0u), -1);
	assert_int_equal(valid(IMSG_DB_OP, 2, "sa", "Run_get", 0u), -1);
	assert_int_equal(valid(IMSG_DB_OP, 2, "sa", "run-get", 0u), -1);
	assert_int_equal(valid(IMSG_DB_OP, 2, "sa", "run get", 0u), -1);
	assert_int_equal(valid(IMSG_DB_OP, 2, "sa", "run;drop", 0u), -1);
	assert_int_equal(valid(IMSG_DB_OP, 2, "Sa", "a\0b", (size_t)3, 0u), -1);
	assert_int_equal(valid(IMSG_DB_OP, 2, "sa", name, 0u), -1);
	name[IPC_OPNAME_MAX] = '\0';
	assert_int_equal(valid(IMSG_DB_OP, 2, "sa", name, 0u), 0);
	assert_int_equal(valid(IMSG_DB_OP, 2, "Ba", "op", (size_t)2, 0u), -1);
	free(name);
}

static void
t_v_db_op_args(void **state)
{
	char fmt[IPC_DB_MAXARGS + 4] = "sa";
	char *big = strfill(IPC_DB_ARG_MAX + 1, 'x');

	memset(fmt + 2, 'n', IPC_DB_MAXARGS);
	assert_int_equal(valid(IMSG_DB_OP, 2, fmt, "op", (unsigned)IPC_DB_MAXARGS), 0);
	fmt[2 + IPC_DB_MAXARGS] = 'n';
	assert_int_equal(valid(IMSG_DB_OP, 2, fmt, "op", (unsigned)IPC_DB_MAXARGS + 1), -1);
	/* args must be an array; floats, maps and arrays are not arguments */
	assert_int_equal(valid(IMSG_DB_OP, 2, "sn", "op"), -1);
	assert_int_equal(valid(IMSG_DB_OP, 2, "saf", "op", 1u, 1.5), -1);
	assert_int_equal(valid(IMSG_DB_OP, 2, "sam", "op", 1u, 0u), -1);
	assert_int_equal(valid(IMSG_DB_OP, 2, "saa", "op", 1u, 0u), -1);
	/* size limits of str and bin arguments */
	assert_int_equal(valid(IMSG_DB_OP, 2, "sas", "op", 1u, big), -1);
	assert_int_equal(valid(IMSG_DB_OP, 2, "saB", "op", 1u, big, (size_t)IPC_DB_ARG_MAX + 1),
	    -1);
	big[IPC_DB_ARG_MAX] = '\0';
	assert_int_equal(valid(IMSG_DB_OP, 2, "sas", "op", 1u, big), 0);
	assert_int_equal(valid(IMSG_DB_OP, 2, "saB", "op", 1u, big, (size_t)IPC_DB_ARG_MAX), 0);
	/* field count */
	assert_int_equal(valid(IMSG_DB_OP, 1, "s", "op"), -1);
	assert_int_equal(valid(IMSG_DB_OP, 3, "san", "op", 0u), -1);
	free(big);
}

static void
t_v_db_result_ok(void **state)
{
	assert_int_equal(valid(IMSG_DB_RESULT, 4, "usuaasnasn", 0u, "", 2u, 2u, 2u, "a", 2u,
			     "b"),
	    0);
	assert_int_equal(valid(IMSG_DB_RESULT, 4, "usua", 5u, "duplicate key", 0u, 0u), 0);
}

static void
t_v_db_result_rows(void **state)
{
	/* a row one short, one long, a non-string cell, a row that is not an array */
	assert_int_equal(valid(IMSG_DB_RESULT, 4, "usuaas", 0u, "", 2u, 1u, 1u, "a"), -1);
	assert_int_equal(valid(IMSG_DB_RESULT, 4, "usuaasss", 0u, "", 2u, 1u, 3u, "a", "b", "c"),
	    -1);
	assert_int_equal(valid(IMSG_DB_RESULT, 4, "usuaasi", 0u, "", 2u, 1u, 2u, "a", 1), -1);
	assert_int_equal(valid(IMSG_DB_RESULT, 4, "usuaasB", 0u, "", 2u, 1u, 2u, "a", "b",
			     (size_t)1),
	    -1);
	assert_int_equal(valid(IMSG_DB_RESULT, 4, "usuas", 0u, "", 1u, 1u, "a"), -1);
	/* the second row is the bad one */
	assert_int_equal(valid(IMSG_DB_RESULT, 4, "usuaasass", 0u, "", 1u, 2u, 1u, "a", 2u, "b",
			     "c"),
	    -1);
	assert_int_equal(valid(IMSG_DB_RESULT, 4, "usun", 0u, "", 1u), -1);
}

static void
t_v_db_result_limits(void **state)
{
	char *err = strfill(IPC_ERRMSG_MAX + 1, 'e');
	struct ipc_wbuf w;
	struct ipc_msg m;
	unsigned i;

	assert_int_equal(valid(IMSG_DB_RESULT, 4, "usua", 0u, "", IPC_DB_MAXCOLS + 1, 0u), -1);
	assert_int_equal(valid(IMSG_DB_RESULT, 4, "usua", 0u, "", IPC_DB_MAXCOLS, 0u), 0);
	assert_int_equal(valid(IMSG_DB_RESULT, 4, "usua", 3u, err, 0u, 0u), -1);
	err[IPC_ERRMSG_MAX] = '\0';
	assert_int_equal(valid(IMSG_DB_RESULT, 4, "usua", 3u, err, 0u, 0u), 0);
	assert_int_equal(valid(IMSG_DB_RESULT, 4, "isua", -1, "", 0u, 0u), -1);
	assert_int_equal(valid(IMSG_DB_RESULT, 3, "usu", 0u, "", 0u), -1);
	assert_int_equal(valid(IMSG_DB_RESULT, 5, "usuan", 0u, "", 0u, 0u), -1);
	/* IPC_DB_MAXROWS + 1 empty rows */
	ipc_wbuf_begin(&w, IMSG_DB_RESULT, 1, 4);
	ipc_put_u64(&w, 0);
	ipc_put_str(&w, "");
	ipc_put_u64(&w, 0);
	ipc_put_array(&w, IPC_DB_MAXROWS + 1);
	for (i = 0; i < IPC_DB_MAXROWS + 1; i++)
		ipc_put_array(&w, 0);
	wdecode(&w, &m);
	assert_int_equal(ipc_msg_lookup(IMSG_DB_RESULT)->validate(m.body), -1);
	ipc_msg_free(&m);
	free(err);
}

static void
t_v_listen_fd(void **state)
{
	char *addr = strfill(IPC_ADDR_MAX + 1, '1');
	struct ipc_msg m;
	char small[4];

	assert_int_equal(valid(IMSG_LISTEN_FD, 1, "s", "127.0.0.1:8480"), 0);
	assert_int_equal(valid(IMSG_LISTEN_FD, 1, "s", addr), -1);
	addr[IPC_ADDR_MAX] = '\0';
	assert_int_equal(valid(IMSG_LISTEN_FD, 1, "s", addr), 0);
	assert_int_equal(valid(IMSG_LISTEN_FD, 1, "u", 8480u), -1);
	assert_int_equal(valid(IMSG_LISTEN_FD, 2, "sn", "[::1]:8480"), -1);
	assert_int_equal(valid(IMSG_LISTEN_FD, 0, ""), -1);
	/* a caller buffer too small for the address fails cleanly */
	build(&m, IMSG_LISTEN_FD, 1, "s", "[::1]:8480");
	assert_int_equal(ipc_dec_listen_fd(m.body, small, sizeof(small)), -1);
	ipc_msg_free(&m);
	free(addr);
}

static void
t_v_run_wake(void **state)
{
	static const char run[] = "0b6a4a8e-1c2d-4e5f-8a9b-0c1d2e3f4a5b";
	char out[IPC_UUID_LEN + 1];
	struct ipc_msg m;
	uint64_t seq;

	assert_int_equal(valid(IMSG_RUN_WAKE, 2, "sU", run, (uint64_t)7), 0);
	assert_int_equal(valid(IMSG_RUN_WAKE, 2, "sU", "", (uint64_t)0), 0);
	/* "every run" carries no seq; a named run always has one */
	assert_int_equal(valid(IMSG_RUN_WAKE, 2, "sU", "", (uint64_t)3), -1);
	assert_int_equal(valid(IMSG_RUN_WAKE, 2, "sU", run, (uint64_t)0), -1);
	/* only canonical lower-case UUIDs */
	assert_int_equal(valid(IMSG_RUN_WAKE, 2, "sU", "0B6A4A8E-1C2D-4E5F-8A9B-0C1D2E3F4A5B",
	    (uint64_t)1), -1);
	assert_int_equal(valid(IMSG_RUN_WAKE, 2, "sU", "0b6a4a8e-1c2d-4e5f-8a9b-0c1d2e3f4a5", (uint64_t)1),
	    -1);
	assert_int_equal(valid(IMSG_RUN_WAKE, 2, "sU", "0b6a4a8e-1c2d-4e5f-8a9b-0c1d2e3f4a5b0",
	    (uint64_t)1), -1);
	assert_int_equal(valid(IMSG_RUN_WAKE, 2, "sU", "0b6a4a8e+1c2d-4e5f-8a9b-0c1d2e3f4a5b",
	    (uint64_t)1), -1);
	assert_int_equal(valid(IMSG_RUN_WAKE, 1, "s", run), -1);
	assert_int_equal(valid(IMSG_RUN_WAKE, 3, "sUu", run, (uint64_t)1, 1u), -1);
	build(&m, IMSG_RUN_WAKE, 2, "sU", run, (uint64_t)42);
	assert_int_equal(ipc_dec_run_wake(m.body, out, &seq), 0);
	assert_string_equal(out, run);
	assert_true(seq == 42);
	ipc_msg_free(&m);
}

/* Whether a GIT_DIFF body with these fields decodes. */
static int
ipc_dec_git_diff_list(const char *g, const char *w, const char *base, uint64_t cap,
                      const char *list)
{
	struct ipc_git_diff d;
	struct ipc_msg m;
	int rv;

	build(&m, IMSG_GIT_DIFF, 5, "sssUs", g, w, base, cap, list);
	rv = ipc_dec_git_diff(m.body, &d);
	ipc_msg_free(&m);
	return rv;
}

static int
ipc_dec_git_diff_ok(const char *g, const char *w, const char *base, uint64_t cap)
{
	return ipc_dec_git_diff_list(g, w, base, cap, "");
}

/* The same without its list: no longer a GIT_DIFF. */
static int
ipc_dec_git_diff_old(const char *g, const char *w, const char *base, uint64_t cap)
{
	struct ipc_git_diff d;
	struct ipc_msg m;
	int rv;

	build(&m, IMSG_GIT_DIFF, 4, "sssU", g, w, base, cap);
	rv = ipc_dec_git_diff(m.body, &d);
	ipc_msg_free(&m);
	return rv;
}

/* The engine's and runners' messages. */
static void
t_v_engine(void **state)
{
	static const char run[] = "0b6a4a8e-1c2d-4e5f-8a9b-0c1d2e3f4a5b";
	struct ipc_runner_start rs;
	struct ipc_engine_conf ec;
	char r[IPC_UUID_LEN + 1], prev[IPC_STATUS_MAX + 1];
	struct ipc_msg m;
	uint32_t k;

	/* ENGINE_WAKE: kind 0 or 1, a run or "" */
	assert_int_equal(valid(IMSG_ENGINE_WAKE, 2, "us", 0u, ""), 0);
	assert_int_equal(valid(IMSG_ENGINE_WAKE, 2, "us", 1u, run), 0);
	assert_int_equal(valid(IMSG_ENGINE_WAKE, 2, "us", 2u, run), -1);
	assert_int_equal(valid(IMSG_ENGINE_WAKE, 2, "us", 1u, "x"), -1);
	build(&m, IMSG_ENGINE_WAKE, 2, "us", 1u, run);
	assert_int_equal(ipc_dec_engine_wake(m.body, &k, r), 0);
	assert_int_equal(k, IPC_WAKE_CANCEL);
	assert_string_equal(r, run);
	ipc_msg_free(&m);
	/* RUN_START: a run and a status name */
	assert_int_equal(valid(IMSG_RUN_START, 2, "ss", run, "queued"), 0);
	assert_int_equal(valid(IMSG_RUN_START, 2, "ss", run, ""), -1);
	assert_int_equal(valid(IMSG_RUN_START, 2, "ss", run, "Queued"), -1);
	assert_int_equal(valid(IMSG_RUN_START, 2, "ss", run, "waiting_approval_and_much_longer_than_32"), -1);
	assert_int_equal(valid(IMSG_RUN_START, 2, "ss", "", "queued"), -1);
	build(&m, IMSG_RUN_START, 2, "ss", run, "waiting_approval");
	assert_int_equal(ipc_dec_run_start(m.body, r, prev), 0);
	assert_string_equal(prev, "waiting_approval");
	ipc_msg_free(&m);
	/* RUN_STOP: reason 0..1; RUN_ENDED: outcome 0..3 */
	assert_int_equal(valid(IMSG_RUN_STOP, 2, "su", run, 1u), 0);
	assert_int_equal(valid(IMSG_RUN_STOP, 2, "su", run, 2u), -1);
	assert_int_equal(valid(IMSG_RUN_ENDED, 2, "su", run, 3u), 0);
	assert_int_equal(valid(IMSG_RUN_ENDED, 2, "su", run, 4u), -1);
	assert_int_equal(valid(IMSG_RUN_ENDED, 1, "s", run), -1);
	/* RUNNER_START: run, a printable owner, a status, a timeout > 0, a step
	 * budget in 1..IPC_USD_MICROS_MAX, a descriptor */
	assert_int_equal(valid(IMSG_RUNNER_START, 5, "sssuU", run, "engine-01", "queued", 600000u,
	    (uint64_t)10000000), 0);
	assert_int_equal(valid(IMSG_RUNNER_START, 5, "sssuU", run, "", "queued", 600000u,
	    (uint64_t)1), -1);
	assert_int_equal(valid(IMSG_RUNNER_START, 5, "sssuU", run, "a b", "queued", 600000u,
	    (uint64_t)1), -1);
	assert_int_equal(valid(IMSG_RUNNER_START, 5, "sssuU", run, "e", "queued", 0u, (uint64_t)1),
	    -1);
	assert_int_equal(valid(IMSG_RUNNER_START, 5, "sssuU", run, "e", "queued", 1u, (uint64_t)0),
	    -1);
	assert_int_equal(valid(IMSG_RUNNER_START, 5, "sssuU", run, "e", "queued", 1u,
	    (uint64_t)IPC_USD_MICROS_MAX), 0);
	assert_int_equal(valid(IMSG_RUNNER_START, 5, "sssuU", run, "e", "queued", 1u,
	    (uint64_t)IPC_USD_MICROS_MAX + 1), -1);
	assert_int_equal(valid(IMSG_RUNNER_START, 4, "sssu", run, "e", "queued", 1u), -1);
	build(&m, IMSG_RUNNER_START, 5, "sssuU", run, "engine-01", "running", 5000u,
	    (uint64_t)2500000);
	assert_int_equal(ipc_dec_runner_start(m.body, &rs), 0);
	assert_string_equal(rs.owner, "engine-01");
	assert_int_equal(rs.exec_max_ms, 5000);
	assert_int_equal(rs.step_budget, 2500000);
	ipc_msg_free(&m);
	/* RUNNER_CANCEL carries nothing; RUNNER_DONE an outcome */
	assert_int_equal(valid(IMSG_RUNNER_CANCEL, 0, ""), 0);
	assert_int_equal(valid(IMSG_RUNNER_CANCEL, 1, "u", 1u), -1);
	assert_int_equal(valid(IMSG_RUNNER_DONE, 1, "u", 2u), 0);
	assert_int_equal(valid(IMSG_RUNNER_DONE, 1, "u", 9u), -1);
	/* ENGINE_CONF: concurrency 0..1024, lease 2..3600, sweep 1..3600, a
	 * host id of 32 lower-case hex digits */
#define HID "0123456789abcdef0123456789abcdef"
	assert_int_equal(valid(IMSG_ENGINE_CONF, 5, "uuusu", 0u, 2u, 1u, HID, 86400u), 0);
	assert_int_equal(valid(IMSG_ENGINE_CONF, 5, "uuusu", 1024u, 3600u, 3600u, HID, 86400u), 0);
	assert_int_equal(valid(IMSG_ENGINE_CONF, 5, "uuusu", 1025u, 30u, 5u, HID, 86400u), -1);
	assert_int_equal(valid(IMSG_ENGINE_CONF, 5, "uuusu", 4u, 1u, 5u, HID, 86400u), -1);
	assert_int_equal(valid(IMSG_ENGINE_CONF, 5, "uuusu", 4u, 30u, 0u, HID, 86400u), -1);
	assert_int_equal(valid(IMSG_ENGINE_CONF, 3, "uuu", 4u, 30u, 5u), -1);
	/* host_grace 60..31536000 */
	assert_int_equal(valid(IMSG_ENGINE_CONF, 4, "uuus", 4u, 30u, 5u, HID), -1);
	assert_int_equal(valid(IMSG_ENGINE_CONF, 5, "uuusu", 4u, 30u, 5u, HID, 60u), 0);
	assert_int_equal(valid(IMSG_ENGINE_CONF, 5, "uuusu", 4u, 30u, 5u, HID, 59u), -1);
	assert_int_equal(valid(IMSG_ENGINE_CONF, 5, "uuusu", 4u, 30u, 5u, HID, 31536000u), 0);
	assert_int_equal(valid(IMSG_ENGINE_CONF, 5, "uuusu", 4u, 30u, 5u, HID, 31536001u), -1);
	assert_int_equal(valid(IMSG_ENGINE_CONF, 5, "uuusu", 4u, 30u, 5u,
	    "0123456789abcdef0123456789abcde", 86400u), -1);                     /* 31 */
	assert_int_equal(valid(IMSG_ENGINE_CONF, 5, "uuusu", 4u, 30u, 5u, HID "0", 86400u), -1); /* 33 */
	assert_int_equal(valid(IMSG_ENGINE_CONF, 5, "uuusu", 4u, 30u, 5u,
	    "0123456789ABCDEF0123456789abcdef", 86400u), -1);                    /* upper case */
	assert_int_equal(valid(IMSG_ENGINE_CONF, 5, "uuusu", 4u, 30u, 5u,
	    "0123456789abcdef0123456789abcde/", 86400u), -1);
	build(&m, IMSG_ENGINE_CONF, 5, "uuusu", 8u, 30u, 5u, HID, 86400u);
	assert_int_equal(ipc_dec_engine_conf(m.body, &ec), 0);
	assert_string_equal(ec.host, HID);
	assert_int_equal(ec.host_grace, 86400);
#undef HID
	assert_int_equal(ec.concurrency, 8);
	ipc_msg_free(&m);
}

/* ---- model calls: the proxy and the runner's model channel -------------- */

/* Result of type's validator on the body built from fmt, with the value at
 * fmt[swap] sent as type wt instead (SIZE_MAX: as given). */
static int
vvalid_swap(uint32_t type, uint32_t nfields, size_t swap, int wt, const char *fmt, va_list ap)
{
	struct ipc_wbuf w;
	struct ipc_msg m;
	int rc;

	ipc_wbuf_begin(&w, type, 1, nfields);
	vput_swap(&w, fmt, ap, swap, wt);
	wdecode(&w, &m);
	rc = ipc_msg_lookup(type)->validate(m.body);
	ipc_msg_free(&m);
	return rc;
}

/* The body fmt describes is valid; sent with any one of its values (an
 * array or map with all it holds) of another msgpack type, it is not. */
static void
types_refused(uint32_t type, uint32_t nfields, const char *fmt, ...)
{
	va_list ap;
	size_t k;
	int wt;

	va_start(ap, fmt);
	if (vvalid_swap(type, nfields, SIZE_MAX, 0, fmt, ap) != 0)
		fail_msg("%s: the baseline \"%s\" is refused", ipc_msg_name(type), fmt);
	for (k = 0; fmt[k] != '\0'; k++) {
		for (wt = 0; wt < WT__N; wt++) {
			if (wt_same(wt, fmt[k]) || vvalid_swap(type, nfields, k, wt, fmt, ap) == -1)
				continue;
			fail_msg("%s: \"%s\" with value %zu ('%c') sent as type %d accepted",
			    ipc_msg_name(type), fmt, k, fmt[k], wt);
		}
	}
	va_end(ap);
}

/* ipc_msg_check of m from -> to, with or without a descriptor: 0, or -1 with
 * the reason containing want. */
static void
check_is(const struct ipc_msg *m, enum ipc_role from, enum ipc_role to, int fd, const char *want)
{
	int rc = ipc_msg_check(m, from, to, fd, &last_err);

	if (want == NULL && rc != 0)
		fail_msg("%s %s -> %s (fd %d): %s", ipc_msg_name(m->type), ipc_role_name(from),
		    ipc_role_name(to), fd, last_err);
	if (want != NULL) {
		if (rc != -1)
			fail_msg("%s %s -> %s (fd %d) accepted", ipc_msg_name(m->type),
			    ipc_role_name(from), ipc_role_name(to), fd);
		assert_reason(last_err, want);
	}
}

/* One PROXY_CONF provider as a test varies it (pv_ok() is valid).  A length
 * of 0 means strlen.  Model i > 0 is named "<model>-<i>", provider i > 0 of
 * a body "<name>-<i>", so that names never repeat. */
struct pv {
	const char *name;
	uint32_t kind;
	const char *url;
	size_t urllen;
	const char *key;
	size_t keylen;
	uint32_t timeout, retries;
	int stream, max_completion;
	uint32_t nmodels;
	const char *model;
	uint64_t price[4];
};

static struct pv
pv_ok(void)
{
	struct pv p = { "anthropic", 0, "https://api.anthropic.com", 0, "sk-ant-x", 0, 60, 2, 1, 0, 1,
		"claude-sonnet-4-5", { 3000000, 15000000, 300000, 3750000 } };

	return p;
}

static void
pv_put(struct ipc_wbuf *w, const struct pv *p, unsigned idx)
{
	char name[2 * IPC_MODEL_NAME_MAX + 16];
	uint32_t i;
	int j;

	ipc_put_array(w, 9);
	snprintf(name, sizeof(name), idx == 0 ? "%s" : "%s-%u", p->name, idx);
	ipc_put_str(w, name);
	ipc_put_u64(w, p->kind);
	ipc_put_strn(w, p->url, p->urllen != 0 ? p->urllen : strlen(p->url));
	ipc_put_bin(w, p->key, p->keylen != 0 ? p->keylen : strlen(p->key));
	ipc_put_u64(w, p->timeout);
	ipc_put_u64(w, p->retries);
	ipc_put_bool(w, p->stream);
	ipc_put_bool(w, p->max_completion);
	ipc_put_array(w, p->nmodels);
	for (i = 0; i < p->nmodels; i++) {
		ipc_put_array(w, 5);
		snprintf(name, sizeof(name), i == 0 ? "%s" : "%s-%u", p->model, i);
		ipc_put_str(w, name);
		for (j = 0; j < 4; j++)
			ipc_put_u64(w, p->price[j]);
	}
}

/* A PROXY_CONF of nprov providers like p into m (the caller frees m). */
static void
pv_build(struct ipc_msg *m, const struct pv *p, unsigned nprov)
{
	struct ipc_wbuf w;
	unsigned i;

	ipc_wbuf_begin(&w, IMSG_PROXY_CONF, 1, 1);
	ipc_put_array(&w, nprov);
	for (i = 0; i < nprov; i++)
		pv_put(&w, p, i);
	wdecode(&w, m);
}

/* The validator's verdict on a PROXY_CONF of nprov providers like p; the
 * typed decoder must agree, and report how many it decoded. */
static int
pv_valid(const struct pv *p, unsigned nprov)
{
	static struct ipc_provider out[IPC_PROVIDERS_MAX];
	struct ipc_msg m;
	size_t n = SIZE_MAX;
	int rc;

	pv_build(&m, p, nprov);
	rc = ipc_msg_lookup(IMSG_PROXY_CONF)->validate(m.body);
	if (nprov <= IPC_PROVIDERS_MAX) {
		assert_int_equal(ipc_dec_proxy_conf(m.body, out, &n), rc);
		if (rc == 0)
			assert_int_equal(n, nprov);
	}
	ipc_msg_free(&m);
	return rc;
}

#define PRICE(a, b, c, d) (uint64_t)(a), (uint64_t)(b), (uint64_t)(c), (uint64_t)(d)
/* one provider with one model, as vput letters */
#define PV_FMT "asusBuubbaasUUUU"
#define PV_ARGS                                                                             \
	9u, "anthropic", 0u, "https://api.anthropic.com", "sk-ant-x", (size_t)8, 60u, 2u, 1, 0, 1u, \
	    5u, "claude-sonnet-4-5", PRICE(1, 2, 3, 4)

/* PROXY_CONF: the providers decoded field by field; none at all is a
 * configuration too (the proxy then refuses every call). */
static void
t_v_proxy_conf(void **state)
{
	static struct ipc_provider pv[IPC_PROVIDERS_MAX];
	struct ipc_msg m;
	size_t n = 99;

	build(&m, IMSG_PROXY_CONF, 1, "a" "asusBuubba" "asUUUU" "asUUUU" "asusBuubba" "asUUUU", 2u,
	    9u, "anthropic", 0u, "https://api.anthropic.com", "sk-ant-1", (size_t)8, 60u, 2u, 1, 0,
	    2u, 5u, "claude-sonnet-4-5", PRICE(3000000, 15000000, 300000, 3750000),
	    5u, "claude-haiku-4-5", PRICE(1000000, 5000000, 0, 0),
	    9u, "local_llm-2", 1u, "http://127.0.0.1:8000/v1", "", (size_t)0, 3600u, 10u, 0, 1,
	    1u, 5u, "org/Llama-3.1:8b@q4", PRICE(0, 0, 0, IPC_PRICE_MAX));
	check_is(&m, ROLE_SUPERVISOR, ROLE_PROXY, 0, NULL);
	assert_int_equal(ipc_dec_proxy_conf(m.body, pv, &n), 0);
	assert_int_equal(n, 2);
	assert_string_equal(pv[0].name, "anthropic");
	assert_int_equal(pv[0].kind, 0);
	assert_string_equal(pv[0].base_url, "https://api.anthropic.com");
	assert_int_equal(pv[0].keylen, 8);
	assert_memory_equal(pv[0].key, "sk-ant-1", 8);
	assert_int_equal(pv[0].timeout_s, 60);
	assert_int_equal(pv[0].retries, 2);
	assert_int_equal(pv[0].stream, 1);
	assert_int_equal(pv[0].max_completion, 0);
	assert_int_equal(pv[0].nmodels, 2);
	assert_string_equal(pv[0].models[0].name, "claude-sonnet-4-5");
	assert_true(pv[0].models[0].price[0] == 3000000 && pv[0].models[0].price[1] == 15000000 &&
	    pv[0].models[0].price[2] == 300000 && pv[0].models[0].price[3] == 3750000);
	assert_string_equal(pv[0].models[1].name, "claude-haiku-4-5");
	assert_true(pv[0].models[1].price[0] == 1000000 && pv[0].models[1].price[1] == 5000000);
	assert_string_equal(pv[1].name, "local_llm-2");
	assert_int_equal(pv[1].kind, 1);
	assert_string_equal(pv[1].base_url, "http://127.0.0.1:8000/v1");
	assert_int_equal(pv[1].keylen, 0);
	assert_int_equal(pv[1].timeout_s, 3600);
	assert_int_equal(pv[1].retries, 10);
	assert_int_equal(pv[1].stream, 0);
	assert_int_equal(pv[1].max_completion, 1);
	assert_int_equal(pv[1].nmodels, 1);
	assert_string_equal(pv[1].models[0].name, "org/Llama-3.1:8b@q4");
	assert_true(pv[1].models[0].price[0] == 0 && pv[1].models[0].price[3] == IPC_PRICE_MAX);
	ipc_msg_free(&m);
	/* no two providers of one name, no model twice in one provider */
	assert_int_equal(valid(IMSG_PROXY_CONF, 1, "a" "asusBuubba" "asUUUU" "asusBuubba" "asUUUU", 2u,
	    9u, "same", 0u, "https://a.example", "", (size_t)0, 60u, 2u, 1, 0, 1u, 5u, "m",
	    PRICE(1, 1, 1, 1), 9u, "same", 1u, "https://b.example", "", (size_t)0, 60u, 2u, 1, 0, 1u,
	    5u, "n", PRICE(1, 1, 1, 1)), -1);
	assert_int_equal(valid(IMSG_PROXY_CONF, 1, "a" "asusBuubba" "asUUUU" "asUUUU", 1u, 9u, "one",
	    0u, "https://a.example", "", (size_t)0, 60u, 2u, 1, 0, 2u, 5u, "m", PRICE(1, 1, 1, 1), 5u,
	    "m", PRICE(2, 2, 2, 2)), -1);
	assert_int_equal(valid(IMSG_PROXY_CONF, 1, "a" "asusBuubba" "asUUUU" "asUUUU", 1u, 9u, "one",
	    0u, "https://a.example", "", (size_t)0, 60u, 2u, 1, 0, 2u, 5u, "m", PRICE(1, 1, 1, 1), 5u,
	    "M", PRICE(2, 2, 2, 2)), 0);
	/* no providers */
	build(&m, IMSG_PROXY_CONF, 1, "a", 0u);
	check_is(&m, ROLE_SUPERVISOR, ROLE_PROXY, 0, NULL);
	assert_int_equal(ipc_dec_proxy_conf(m.body, pv, &n), 0);
	assert_int_equal(n, 0);
	ipc_msg_free(&m);
	/* only the supervisor sends it, only to the proxy, without a descriptor */
	build(&m, IMSG_PROXY_CONF, 1, "a" PV_FMT, 1u, PV_ARGS);
	check_is(&m, ROLE_SUPERVISOR, ROLE_PROXY, 0, NULL);
	check_is(&m, ROLE_SUPERVISOR, ROLE_PROXY, 1, "unexpected descriptor");
	check_is(&m, ROLE_RUNNER, ROLE_PROXY, 0, "sender");
	check_is(&m, ROLE_ENGINE, ROLE_PROXY, 0, "sender");
	check_is(&m, ROLE_SUPERVISOR, ROLE_RUNNER, 0, "receiver");
	check_is(&m, ROLE_SUPERVISOR, ROLE_ENGINE, 0, "receiver");
	ipc_msg_free(&m);
}

/* PROXY_CONF's shape: every value's type, the number of values at every level. */
static void
t_v_proxy_conf_types(void **state)
{
	types_refused(IMSG_PROXY_CONF, 1, "a" PV_FMT, 1u, PV_ARGS);
	/* a body of 0 or 2 values; trailing data in a provider or a model */
	assert_int_equal(valid(IMSG_PROXY_CONF, 0, ""), -1);
	assert_int_equal(valid(IMSG_PROXY_CONF, 2, "a" PV_FMT "a", 1u, PV_ARGS, 0u), -1);
	assert_int_equal(valid(IMSG_PROXY_CONF, 1, "a" "asusBuubbaasUUUUn",
	    1u, 10u, "anthropic", 0u, "https://h", "k", (size_t)1, 60u, 2u, 1, 0, 1u, 5u, "m",
	    PRICE(1, 2, 3, 4)), -1);
	assert_int_equal(valid(IMSG_PROXY_CONF, 1, "a" "asusBuubbaasUUUUn",
	    1u, 9u, "anthropic", 0u, "https://h", "k", (size_t)1, 60u, 2u, 1, 0, 1u, 6u, "m",
	    PRICE(1, 2, 3, 4)), -1);
	/* a provider without its models, a model without its last price */
	assert_int_equal(valid(IMSG_PROXY_CONF, 1, "a" "asusBuubb",
	    1u, 8u, "anthropic", 0u, "https://h", "k", (size_t)1, 60u, 2u, 1, 0), -1);
	assert_int_equal(valid(IMSG_PROXY_CONF, 1, "a" "asusBuubbaasUUU",
	    1u, 9u, "anthropic", 0u, "https://h", "k", (size_t)1, 60u, 2u, 1, 0, 1u, 4u, "m",
	    (uint64_t)1, (uint64_t)2, (uint64_t)3), -1);
	/* a number above 32 bits is not cut to one that fits */
	assert_int_equal(valid(IMSG_PROXY_CONF, 1, "a" "asUsBuubbaasUUUU",
	    1u, 9u, "anthropic", ((uint64_t)1 << 32), "https://h", "k", (size_t)1, 60u, 2u, 1, 0, 1u,
	    5u, "m", PRICE(1, 2, 3, 4)), -1);
	assert_int_equal(valid(IMSG_PROXY_CONF, 1, "a" "asusBUubba" "asUUUU",
	    1u, 9u, "anthropic", 0u, "https://h", "k", (size_t)1, ((uint64_t)1 << 32) + 60, 2u, 1, 0,
	    1u, 5u, "m", PRICE(1, 2, 3, 4)), -1);
	assert_int_equal(valid(IMSG_PROXY_CONF, 1, "a" "asusBuUbba" "asUUUU",
	    1u, 9u, "anthropic", 0u, "https://h", "k", (size_t)1, 60u, ((uint64_t)1 << 32) + 2, 1, 0,
	    1u, 5u, "m", PRICE(1, 2, 3, 4)), -1);
}

/* Provider names [a-z0-9][a-z0-9_-]{0,31}, model names
 * [A-Za-z0-9][A-Za-z0-9._:/@-]{0,127}, byte by byte. */
static void
t_v_proxy_names(void **state)
{
	static const char pfirst[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	static const char prest[] = "abcdefghijklmnopqrstuvwxyz0123456789_-";
	static const char mfirst[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
	static const char mrest[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:/@-";
	char *pmax = strfill(IPC_PROVIDER_NAME_MAX + 1, 'p');
	char *mmax = strfill(IPC_MODEL_NAME_MAX + 1, 'M');
	struct pv p = pv_ok();
	char s[3];
	int b;

	for (b = 0; b < 256; b++) {
		s[0] = (char)b;
		s[1] = 'a';
		assert_int_equal(ipc_is_provider_name(s, 1), b != 0 && strchr(pfirst, b) != NULL);
		assert_int_equal(ipc_is_model_name(s, 1), b != 0 && strchr(mfirst, b) != NULL);
		assert_int_equal(ipc_is_provider_name(s, 2), b != 0 && strchr(pfirst, b) != NULL);
		s[0] = 'a';
		s[1] = (char)b;
		assert_int_equal(ipc_is_provider_name(s, 2), b != 0 && strchr(prest, b) != NULL);
		assert_int_equal(ipc_is_model_name(s, 2), b != 0 && strchr(mrest, b) != NULL);
	}
	assert_int_equal(ipc_is_provider_name("", 0), 0);
	assert_int_equal(ipc_is_model_name("", 0), 0);
	assert_int_equal(ipc_is_provider_name("a\0b", 3), 0);
	assert_int_equal(ipc_is_model_name("a\0b", 3), 0);
	assert_int_equal(ipc_is_provider_name(pmax, IPC_PROVIDER_NAME_MAX), 1);
	assert_int_equal(ipc_is_provider_name(pmax, IPC_PROVIDER_NAME_MAX + 1), 0);
	assert_int_equal(ipc_is_model_name(mmax, IPC_MODEL_NAME_MAX), 1);
	assert_int_equal(ipc_is_model_name(mmax, IPC_MODEL_NAME_MAX + 1), 0);
	/* in a PROXY_CONF */
	p.name = pmax;
	assert_int_equal(pv_valid(&p, 1), -1);
	pmax[IPC_PROVIDER_NAME_MAX] = '\0';
	assert_int_equal(pv_valid(&p, 1), 0);
	p.name = "";
	assert_int_equal(pv_valid(&p, 1), -1);
	p.name = "Anthropic";
	assert_int_equal(pv_valid(&p, 1), -1);
	p.name = "-a";
	assert_int_equal(pv_valid(&p, 1), -1);
	p.name = "a.b";
	assert_int_equal(pv_valid(&p, 1), -1);
	p.name = "0_a-";
	assert_int_equal(pv_valid(&p, 1), 0);
	p = pv_ok();
	p.model = mmax;
	assert_int_equal(pv_valid(&p, 1), -1);
	mmax[IPC_MODEL_NAME_MAX] = '\0';
	assert_int_equal(pv_valid(&p, 1), 0);
	p.model = "";
	assert_int_equal(pv_valid(&p, 1), -1);
	p.model = "_m";
	assert_int_equal(pv_valid(&p, 1), -1);
	p.model = "a b";
	assert_int_equal(pv_valid(&p, 1), -1);
	p.model = "a,b";
	assert_int_equal(pv_valid(&p, 1), -1);
	p.model = "9:a/b@c.d-e_f";
	assert_int_equal(pv_valid(&p, 1), 0);
	/* a NUL inside a name, where the name travels as a str */
	assert_int_equal(valid(IMSG_RUNNER_PROXY, 6, "Ssuuuu", "ab\0c", (size_t)4, "m", 1u, 1024u, 128u, 262144u),
	    -1);
	assert_int_equal(valid(IMSG_RUNNER_PROXY, 6, "sSuuuu", "ab", "m\0", (size_t)2, 1u, 1024u, 128u, 262144u),
	    -1);
	free(pmax);
	free(mmax);
}

/* PROXY_CONF's bounds, one field at a time. */
static void
t_v_proxy_conf_bounds(void **state)
{
	static char url[IPC_URL_MAX + 2];
	char *key = strfill(IPC_SECRET_MAX + 1, 'k');
	struct pv p = pv_ok();
	char one[16];
	int b, j, ok;

	assert_int_equal(pv_valid(&p, 1), 0);
	/* kind 0..1 */
	p.kind = 1;
	assert_int_equal(pv_valid(&p, 1), 0);
	p.kind = 2;
	assert_int_equal(pv_valid(&p, 1), -1);
	p.kind = UINT32_MAX;
	assert_int_equal(pv_valid(&p, 1), -1);
	/* max_completion_tokens: openai only */
	p.kind = 0;
	p.max_completion = 1;
	assert_int_equal(pv_valid(&p, 1), -1);
	p.kind = 1;
	assert_int_equal(pv_valid(&p, 1), 0);
	p = pv_ok();
	/* base_url: http:// or https:// and something more, <= IPC_URL_MAX */
	p.url = "http://h";
	assert_int_equal(pv_valid(&p, 1), 0);
	p.url = "https://h";
	assert_int_equal(pv_valid(&p, 1), 0);
	p.url = "http://";
	assert_int_equal(pv_valid(&p, 1), -1);
	p.url = "https://";
	assert_int_equal(pv_valid(&p, 1), -1);
	p.url = "";
	assert_int_equal(pv_valid(&p, 1), -1);
	p.url = "https:/h";
	assert_int_equal(pv_valid(&p, 1), -1);
	p.url = "ftp://h";
	assert_int_equal(pv_valid(&p, 1), -1);
	p.url = "HTTPS://h";
	assert_int_equal(pv_valid(&p, 1), -1);
	p.url = "file:///etc/passwd";
	assert_int_equal(pv_valid(&p, 1), -1);
	p.url = " https://h";
	assert_int_equal(pv_valid(&p, 1), -1);
	memcpy(url, "https://", 8);
	memset(url + 8, 'a', sizeof(url) - 9);
	p.url = url; /* IPC_URL_MAX + 1 bytes */
	assert_int_equal(pv_valid(&p, 1), -1);
	url[IPC_URL_MAX] = '\0';
	assert_int_equal(pv_valid(&p, 1), 0);
	/* every byte after the scheme: printable ASCII but space, '"', '\\' */
	for (b = 0; b < 256; b++) {
		ok = b > 0x20 && b < 0x7f && b != '"' && b != '\\';
		memcpy(one, "http://h?", 9);
		one[9] = (char)b;
		p.url = one;
		p.urllen = 10;
		if (pv_valid(&p, 1) != (ok ? 0 : -1))
			fail_msg("base_url with byte 0x%02x: %s", b, ok ? "refused" : "accepted");
	}
	p = pv_ok();
	/* key: 0..IPC_SECRET_MAX bytes of printable ASCII but space, '"', '\\' */
	p.key = "";
	assert_int_equal(pv_valid(&p, 1), 0);
	p.key = key; /* IPC_SECRET_MAX + 1 */
	assert_int_equal(pv_valid(&p, 1), -1);
	key[IPC_SECRET_MAX] = '\0';
	assert_int_equal(pv_valid(&p, 1), 0);
	for (b = 0; b < 256; b++) {
		ok = b > 0x20 && b < 0x7f && b != '"' && b != '\\';
		one[0] = 's';
		one[1] = (char)b;
		one[2] = 'k';
		p.key = one;
		p.keylen = 3;
		if (pv_valid(&p, 1) != (ok ? 0 : -1))
			fail_msg("key with byte 0x%02x: %s", b, ok ? "refused" : "accepted");
	}
	p = pv_ok();
	/* timeout 1..3600, retries 0..10 */
	p.timeout = 0;
	assert_int_equal(pv_valid(&p, 1), -1);
	p.timeout = 1;
	assert_int_equal(pv_valid(&p, 1), 0);
	p.timeout = 3600;
	assert_int_equal(pv_valid(&p, 1), 0);
	p.timeout = 3601;
	assert_int_equal(pv_valid(&p, 1), -1);
	p = pv_ok();
	p.retries = 0;
	assert_int_equal(pv_valid(&p, 1), 0);
	p.retries = 10;
	assert_int_equal(pv_valid(&p, 1), 0);
	p.retries = 11;
	assert_int_equal(pv_valid(&p, 1), -1);
	p = pv_ok();
	/* 1..IPC_MODELS_MAX models, each price <= IPC_PRICE_MAX */
	p.nmodels = 0;
	assert_int_equal(pv_valid(&p, 1), -1);
	p.nmodels = IPC_MODELS_MAX;
	assert_int_equal(pv_valid(&p, 1), 0);
	p.nmodels = IPC_MODELS_MAX + 1;
	assert_int_equal(pv_valid(&p, 1), -1);
	p = pv_ok();
	for (j = 0; j < 4; j++) {
		p.price[j] = IPC_PRICE_MAX;
		assert_int_equal(pv_valid(&p, 1), 0);
		p.price[j] = IPC_PRICE_MAX + 1;
		assert_int_equal(pv_valid(&p, 1), -1);
		p.price[j] = UINT64_MAX;
		assert_int_equal(pv_valid(&p, 1), -1);
		p.price[j] = 0;
		assert_int_equal(pv_valid(&p, 1), 0);
	}
	/* at most IPC_PROVIDERS_MAX providers, each full */
	p = pv_ok();
	p.name = "p";
	p.model = "m";
	p.nmodels = IPC_MODELS_MAX;
	assert_int_equal(pv_valid(&p, IPC_PROVIDERS_MAX), 0);
	assert_int_equal(pv_valid(&p, IPC_PROVIDERS_MAX + 1), -1);
	/* one bad provider spoils the lot */
	{
		struct ipc_wbuf w;
		struct ipc_msg m;
		struct pv bad = pv_ok();

		bad.name = "second";
		bad.retries = 11;
		ipc_wbuf_begin(&w, IMSG_PROXY_CONF, 1, 1);
		ipc_put_array(&w, 2);
		pv_put(&w, &p, 0);
		pv_put(&w, &bad, 0);
		wdecode(&w, &m);
		check_is(&m, ROLE_SUPERVISOR, ROLE_PROXY, 0, "body failed validation");
		ipc_msg_free(&m);
	}
	free(key);
}

/* PROXY_CHANNEL: a run, and the proxy's end of the run's model channel. */
static void
t_v_proxy_channel(void **state)
{
	static const char run[] = "0b6a4a8e-1c2d-4e5f-8a9b-0c1d2e3f4a5b";
	char r[IPC_UUID_LEN + 1];
	struct ipc_msg m;

	types_refused(IMSG_PROXY_CHANNEL, 1, "s", run);
	build(&m, IMSG_PROXY_CHANNEL, 1, "s", run);
	check_is(&m, ROLE_SUPERVISOR, ROLE_PROXY, 1, NULL);
	assert_int_equal(ipc_dec_proxy_channel(m.body, r), 0);
	assert_string_equal(r, run);
	check_is(&m, ROLE_SUPERVISOR, ROLE_PROXY, 0, "descriptor missing");
	check_is(&m, ROLE_RUNNER, ROLE_PROXY, 1, "sender");
	check_is(&m, ROLE_PROXY, ROLE_SUPERVISOR, 1, "sender");
	check_is(&m, ROLE_SUPERVISOR, ROLE_RUNNER, 1, "receiver");
	ipc_msg_free(&m);
	assert_int_equal(valid(IMSG_PROXY_CHANNEL, 1, "s", ""), -1); /* no run for everyone */
	assert_int_equal(valid(IMSG_PROXY_CHANNEL, 1, "s", "0B6A4A8E-1C2D-4E5F-8A9B-0C1D2E3F4A5B"),
	    -1);
	assert_int_equal(valid(IMSG_PROXY_CHANNEL, 1, "s", "0b6a4a8e-1c2d-4e5f-8a9b-0c1d2e3f4a5"),
	    -1);
	assert_int_equal(valid(IMSG_PROXY_CHANNEL, 1, "s", "0b6a4a8e-1c2d-4e5f-8a9b-0c1d2e3f4a5bb"),
	    -1);
	assert_int_equal(valid(IMSG_PROXY_CHANNEL, 1, "s", "0b6a4a8e11c2d-4e5f-8a9b-0c1d2e3f4a5b"),
	    -1);
	assert_int_equal(valid(IMSG_PROXY_CHANNEL, 0, ""), -1);
	assert_int_equal(valid(IMSG_PROXY_CHANNEL, 2, "ss", run, run), -1);
}

/* RUNNER_PROXY: the runner's model settings and its end of the channel. */
static void
t_v_runner_proxy(void **state)
{
	char *pname = strfill(IPC_PROVIDER_NAME_MAX + 1, 'p');
	char *mname = strfill(IPC_MODEL_NAME_MAX + 1, 'm');
	struct ipc_runner_proxy rp;
	struct ipc_msg m;

	types_refused(IMSG_RUNNER_PROXY, 6, "ssuuuu", "anthropic", "claude-sonnet-4-5", 4096u,
	    65536u, 128u, 262144u);
	build(&m, IMSG_RUNNER_PROXY, 6, "ssuuuu", "openai-2", "gpt-4o", 8192u, 1048576u, 128u, 262144u);
	check_is(&m, ROLE_SUPERVISOR, ROLE_RUNNER, 1, NULL);
	assert_int_equal(ipc_dec_runner_proxy(m.body, &rp), 0);
	assert_string_equal(rp.provider, "openai-2");
	assert_string_equal(rp.model, "gpt-4o");
	assert_int_equal(rp.max_tokens, 8192);
	assert_int_equal(rp.tool_output_max, 1048576);
	check_is(&m, ROLE_SUPERVISOR, ROLE_RUNNER, 0, "descriptor missing");
	check_is(&m, ROLE_ENGINE, ROLE_RUNNER, 1, "sender");
	check_is(&m, ROLE_PROXY, ROLE_RUNNER, 1, "sender");
	check_is(&m, ROLE_SUPERVISOR, ROLE_PROXY, 1, "receiver");
	ipc_msg_free(&m);
	/* no default model: both empty, never one alone */
	build(&m, IMSG_RUNNER_PROXY, 6, "ssuuuu", "", "", 1u, 1024u, 128u, 262144u);
	check_is(&m, ROLE_SUPERVISOR, ROLE_RUNNER, 1, NULL);
	assert_int_equal(ipc_dec_runner_proxy(m.body, &rp), 0);
	assert_string_equal(rp.provider, "");
	assert_string_equal(rp.model, "");
	ipc_msg_free(&m);
	assert_int_equal(valid(IMSG_RUNNER_PROXY, 6, "ssuuuu", "anthropic", "", 1u, 1024u, 128u, 262144u), -1);
	assert_int_equal(valid(IMSG_RUNNER_PROXY, 6, "ssuuuu", "", "gpt-4o", 1u, 1024u, 128u, 262144u), -1);
	/* names */
	assert_int_equal(valid(IMSG_RUNNER_PROXY, 6, "ssuuuu", pname, "m", 1u, 1024u, 128u, 262144u), -1);
	pname[IPC_PROVIDER_NAME_MAX] = '\0';
	assert_int_equal(valid(IMSG_RUNNER_PROXY, 6, "ssuuuu", pname, "m", 1u, 1024u, 128u, 262144u), 0);
	assert_int_equal(valid(IMSG_RUNNER_PROXY, 6, "ssuuuu", "p", mname, 1u, 1024u, 128u, 262144u), -1);
	mname[IPC_MODEL_NAME_MAX] = '\0';
	assert_int_equal(valid(IMSG_RUNNER_PROXY, 6, "ssuuuu", "p", mname, 1u, 1024u, 128u, 262144u), 0);
	assert_int_equal(valid(IMSG_RUNNER_PROXY, 6, "ssuuuu", "Anthropic", "m", 1u, 1024u, 128u, 262144u), -1);
	assert_int_equal(valid(IMSG_RUNNER_PROXY, 6, "ssuuuu", "p", "-m", 1u, 1024u, 128u, 262144u), -1);
	/* max_tokens >= 1; tool_output_max 1024..1048576 */
	assert_int_equal(valid(IMSG_RUNNER_PROXY, 6, "ssuuuu", "p", "m", 0u, 1024u, 128u, 262144u), -1);
	assert_int_equal(valid(IMSG_RUNNER_PROXY, 6, "ssuuuu", "p", "m", UINT32_MAX, 1024u, 128u, 262144u), 0);
	assert_int_equal(valid(IMSG_RUNNER_PROXY, 6, "ssuuuu", "p", "m", 1u, 1023u, 128u, 262144u), -1);
	assert_int_equal(valid(IMSG_RUNNER_PROXY, 6, "ssuuuu", "p", "m", 1u, 1048577u, 128u, 262144u), -1);
	assert_int_equal(valid(IMSG_RUNNER_PROXY, 6, "ssuuuu", "", "", 0u, 1024u, 128u, 262144u), -1);
	assert_int_equal(valid(IMSG_RUNNER_PROXY, 6, "ssuUuu", "p", "m", 1u,
	    ((uint64_t)1 << 32) + 1024, 128u, 262144u), -1);
	/* too few, trailing */
	assert_int_equal(valid(IMSG_RUNNER_PROXY, 3, "ssu", "p", "m", 1u), -1);
	assert_int_equal(valid(IMSG_RUNNER_PROXY, 4, "ssuu", "p", "m", 1u, 1024u), -1);
	assert_int_equal(valid(IMSG_RUNNER_PROXY, 7, "ssuuuun", "p", "m", 1u, 1024u, 1u, 1024u),
	    -1);
	/* mcp_tools_max 0..IPC_MCP_TOOLS_MAX; mcp_tool_bytes_max 1024..IPC_MCP_TOOL_BYTES_MAX */
	assert_int_equal(valid(IMSG_RUNNER_PROXY, 6, "ssuuuu", "p", "m", 1u, 1024u, 0u, 1024u), 0);
	assert_int_equal(valid(IMSG_RUNNER_PROXY, 6, "ssuuuu", "p", "m", 1u, 1024u,
	    (unsigned)IPC_MCP_TOOLS_MAX, (unsigned)IPC_MCP_TOOL_BYTES_MAX), 0);
	assert_int_equal(valid(IMSG_RUNNER_PROXY, 6, "ssuuuu", "p", "m", 1u, 1024u,
	    (unsigned)IPC_MCP_TOOLS_MAX + 1, 1024u), -1);
	assert_int_equal(valid(IMSG_RUNNER_PROXY, 6, "ssuuuu", "p", "m", 1u, 1024u, 1u, 1023u), -1);
	assert_int_equal(valid(IMSG_RUNNER_PROXY, 6, "ssuuuu", "p", "m", 1u, 1024u, 1u,
	    (unsigned)IPC_MCP_TOOL_BYTES_MAX + 1), -1);
	free(pname);
	free(mname);
}

/* HTTPD_CONF: httpd's settings, with the per-user request limit. */
static void
t_v_httpd_conf(void **state)
{
	struct ipc_httpd_conf hc;
	struct ipc_msg m;

	types_refused(IMSG_HTTPD_CONF, 6, "ssuuuU", "", "/usr/share/agrippa/ui", 43200u, 20u, 200u,
	    (uint64_t)64 << 20);
	build(&m, IMSG_HTTPD_CONF, 6, "ssuuuU", "https://agrippa.example", "/ui", 60u, 0u, 1u,
	    (uint64_t)1 << 20);
	check_is(&m, ROLE_SUPERVISOR, ROLE_HTTPD, 0, NULL);
	check_is(&m, ROLE_SUPERVISOR, ROLE_ENGINE, 0, "receiver");
	assert_int_equal(ipc_dec_httpd_conf(m.body, &hc), 0);
	assert_string_equal(hc.public_url, "https://agrippa.example");
	assert_int_equal(hc.user_rate, 0);
	assert_int_equal(hc.user_burst, 1);
	ipc_msg_free(&m);
#define HC_MIB ((uint64_t)1 << 20)
	assert_int_equal(valid(IMSG_HTTPD_CONF, 6, "ssuuuU", "", "/ui", 60u, 100000u, 1000000u,
	    (uint64_t)16 << 30), 0);
	assert_int_equal(valid(IMSG_HTTPD_CONF, 6, "ssuuuU", "", "/ui", 60u, 100001u, 1u, HC_MIB), -1);
	assert_int_equal(valid(IMSG_HTTPD_CONF, 6, "ssuuuU", "", "/ui", 60u, 1u, 0u, HC_MIB), -1);
	assert_int_equal(valid(IMSG_HTTPD_CONF, 6, "ssuuuU", "", "/ui", 60u, 1u, 1000001u, HC_MIB), -1);
	assert_int_equal(valid(IMSG_HTTPD_CONF, 6, "ssuuuU", "", "ui", 60u, 1u, 1u, HC_MIB), -1);
	assert_int_equal(valid(IMSG_HTTPD_CONF, 6, "ssuuuU", "", "/ui", 59u, 1u, 1u, HC_MIB), -1);
	assert_int_equal(valid(IMSG_HTTPD_CONF, 6, "ssuuuU", "", "/ui", 60u, 1u, 1u, HC_MIB - 1), -1);
	assert_int_equal(valid(IMSG_HTTPD_CONF, 6, "ssuuuU", "", "/ui", 60u, 1u, 1u,
	    ((uint64_t)16 << 30) + 1), -1);
	assert_int_equal(valid(IMSG_HTTPD_CONF, 5, "ssuuu", "", "/ui", 60u, 1u, 1u), -1);
}

/* MCP_START, MCP_CHANNEL, MCP_FAILED, MCP_STOP: the MCP servers of a run's
 * steps between its runner and the supervisor. */
static void
t_v_mcp(void **state)
{
	char *name = strfill(IPC_MCP_NAME_MAX + 1, 'n');
	char *err = strfill(IPC_ERRMSG_MAX + 1, 'e');
	struct ipc_mcp_start st;
	struct ipc_mcp_channel ch;
	struct ipc_mcp_failed f;
	struct ipc_msg m;

	types_refused(IMSG_MCP_START, 2, "ss", "everything", "think");
	build(&m, IMSG_MCP_START, 2, "ss", "git-hub_2", "step-1");
	check_is(&m, ROLE_RUNNER, ROLE_SUPERVISOR, 0, NULL);
	check_is(&m, ROLE_ENGINE, ROLE_SUPERVISOR, 0, "sender");
	check_is(&m, ROLE_RUNNER, ROLE_SUPERVISOR, 1, "descriptor");
	assert_int_equal(ipc_dec_mcp_start(m.body, &st), 0);
	assert_string_equal(st.server, "git-hub_2");
	assert_string_equal(st.step, "step-1");
	ipc_msg_free(&m);
	/* the name as mcp add takes it, at most IPC_MCP_NAME_MAX bytes */
	assert_int_equal(valid(IMSG_MCP_START, 2, "ss", name, "s"), -1);
	name[IPC_MCP_NAME_MAX] = '\0';
	assert_int_equal(valid(IMSG_MCP_START, 2, "ss", name, "s"), 0);
	assert_int_equal(valid(IMSG_MCP_START, 2, "ss", "", "s"), -1);
	assert_int_equal(valid(IMSG_MCP_START, 2, "ss", "Everything", "s"), -1);
	assert_int_equal(valid(IMSG_MCP_START, 2, "ss", "-x", "s"), -1);
	assert_int_equal(valid(IMSG_MCP_START, 2, "ss", "a/../b", "s"), -1);
	assert_int_equal(valid(IMSG_MCP_START, 2, "Ss", "ab\0c", (size_t)4, "s"), -1);
	assert_int_equal(valid(IMSG_MCP_START, 2, "ss", "a", ""), -1);
	assert_int_equal(valid(IMSG_MCP_START, 2, "ss", "a", "Step"), -1);
	assert_int_equal(valid(IMSG_MCP_START, 1, "s", "a"), -1);
	assert_int_equal(valid(IMSG_MCP_START, 3, "ssn", "a", "s"), -1);

	types_refused(IMSG_MCP_CHANNEL, 4, "uuuu", 0u, 1u, 30000u, 60000u);
	build(&m, IMSG_MCP_CHANNEL, 4, "uuuu", 1u, 1u, 1000u, 3600000u);
	check_is(&m, ROLE_SUPERVISOR, ROLE_RUNNER, 1, NULL);
	check_is(&m, ROLE_SUPERVISOR, ROLE_RUNNER, 0, "descriptor missing");
	check_is(&m, ROLE_PROXY, ROLE_RUNNER, 1, "sender");
	check_is(&m, ROLE_SUPERVISOR, ROLE_ENGINE, 1, "receiver");
	assert_int_equal(ipc_dec_mcp_channel(m.body, &ch), 0);
	assert_int_equal(ch.what, IPC_MCP_FD_STDERR);
	assert_int_equal(ch.call_ms, 3600000);
	ipc_msg_free(&m);
	assert_int_equal(valid(IMSG_MCP_CHANNEL, 4, "uuuu", 2u, 1u, 1000u, 1000u), -1);
	assert_int_equal(valid(IMSG_MCP_CHANNEL, 4, "uuuu", 0u, 0u, 1000u, 1000u), -1);
	assert_int_equal(valid(IMSG_MCP_CHANNEL, 4, "uuuu", 0u, 3u, 1000u, 1000u), -1);
	assert_int_equal(valid(IMSG_MCP_CHANNEL, 4, "uuuu", 0u, 2u, 1000u, 1000u), 0);
	/* an http server has no stderr */
	assert_int_equal(valid(IMSG_MCP_CHANNEL, 4, "uuuu", 1u, 2u, 1000u, 1000u), -1);
	assert_int_equal(valid(IMSG_MCP_CHANNEL, 4, "uuuu", 0u, 1u, 999u, 1000u), -1);
	assert_int_equal(valid(IMSG_MCP_CHANNEL, 4, "uuuu", 0u, 1u, 600001u, 1000u), -1);
	assert_int_equal(valid(IMSG_MCP_CHANNEL, 4, "uuuu", 0u, 1u, 600000u, 999u), -1);
	assert_int_equal(valid(IMSG_MCP_CHANNEL, 4, "uuuu", 0u, 1u, 1000u, 3600001u), -1);
	assert_int_equal(valid(IMSG_MCP_CHANNEL, 3, "uuu", 0u, 1u, 1000u), -1);

	types_refused(IMSG_MCP_FAILED, 2, "sb", "no sandbox", 0);
	build(&m, IMSG_MCP_FAILED, 2, "sb", "not pinned", 1);
	check_is(&m, ROLE_SUPERVISOR, ROLE_RUNNER, 0, NULL);
	check_is(&m, ROLE_SUPERVISOR, ROLE_RUNNER, 1, "descriptor");
	assert_int_equal(ipc_dec_mcp_failed(m.body, &f), 0);
	assert_int_equal(f.absent, 1);
	assert_int_equal(f.errlen, strlen("not pinned"));
	ipc_msg_free(&m);
	assert_int_equal(valid(IMSG_MCP_FAILED, 2, "sb", "", 0), -1);
	assert_int_equal(valid(IMSG_MCP_FAILED, 2, "sb", err, 0), -1);
	err[IPC_ERRMSG_MAX] = '\0';
	assert_int_equal(valid(IMSG_MCP_FAILED, 2, "sb", err, 0), 0);

	build(&m, IMSG_MCP_STOP, 0, "");
	check_is(&m, ROLE_RUNNER, ROLE_SUPERVISOR, 0, NULL);
	check_is(&m, ROLE_SUPERVISOR, ROLE_RUNNER, 0, "sender");
	ipc_msg_free(&m);
	assert_int_equal(valid(IMSG_MCP_STOP, 1, "u", 1u), -1);
	free(name);
	free(err);
}

#define EV_RUN "0d1f6a8e-3b1c-4c55-9d6e-2f0a1b2c3d4e"
/* EGRESS_EVENT: a decision carries what the rate limit left out since the
 * last one sent (and how many of those were refusals); nothing else does. */
static void
t_v_egress_event(void **state)
{
	struct ipc_egress_event ev;
	struct ipc_msg m;

	(void)state;
	types_refused(IMSG_EGRESS_EVENT, 11, "susussUUUUU", EV_RUN, (unsigned)IPC_EGRESS_EV_DENIED,
	    "a.test", 443u, "", "not on the list", (uint64_t)0, (uint64_t)0, (uint64_t)0,
	    (uint64_t)5, (uint64_t)3);
	build(&m, IMSG_EGRESS_EVENT, 11, "susussUUUUU", EV_RUN, (unsigned)IPC_EGRESS_EV_ALLOWED,
	    "a.test", 443u, "10.0.0.1:443", "", (uint64_t)0, (uint64_t)0, (uint64_t)0, (uint64_t)7,
	    (uint64_t)7);
	check_is(&m, ROLE_EGRESS, ROLE_SUPERVISOR, 0, NULL);
	check_is(&m, ROLE_RUNNER, ROLE_SUPERVISOR, 1, "sender");
	assert_int_equal(ipc_dec_egress_event(m.body, &ev), 0);
	assert_int_equal(ev.suppressed, 7);
	assert_int_equal(ev.suppressed_denied, 7);
	ipc_msg_free(&m);
	/* more refusals left out than decisions */
	assert_int_equal(valid(IMSG_EGRESS_EVENT, 11, "susussUUUUU", EV_RUN,
	                     (unsigned)IPC_EGRESS_EV_DENIED, "a.test", 443u, "", "x", (uint64_t)0,
	                     (uint64_t)0, (uint64_t)0, (uint64_t)2, (uint64_t)3),
	    -1);
	/* a close (or an UP/DOWN count) carries none */
	assert_int_equal(valid(IMSG_EGRESS_EVENT, 11, "susussUUUUU", EV_RUN,
	                     (unsigned)IPC_EGRESS_EV_CLOSED, "a.test", 443u, "10.0.0.1:443", "",
	                     (uint64_t)10, (uint64_t)20, (uint64_t)30, (uint64_t)1, (uint64_t)0),
	    -1);
	assert_int_equal(valid(IMSG_EGRESS_EVENT, 11, "susussUUUUU", EV_RUN,
	                     (unsigned)IPC_EGRESS_EV_UP, "a.test", 443u, "10.0.0.1:443", "",
	                     (uint64_t)0, (uint64_t)0, (uint64_t)0, (uint64_t)1, (uint64_t)1),
	    -1);
	assert_int_equal(valid(IMSG_EGRESS_EVENT, 11, "susussUUUUU", EV_RUN,
	                     (unsigned)IPC_EGRESS_EV_CLOSED, "a.test", 443u, "10.0.0.1:443", "",
	                     (uint64_t)10, (uint64_t)20, (uint64_t)30, (uint64_t)0, (uint64_t)0),
	    0);
	/* the kind and the port in range; the old body without suppressed_denied */
	assert_int_equal(valid(IMSG_EGRESS_EVENT, 11, "susussUUUUU", EV_RUN,
	                     (unsigned)IPC_EGRESS_EV__COUNT, "a.test", 443u, "", "", (uint64_t)0,
	                     (uint64_t)0, (uint64_t)0, (uint64_t)0, (uint64_t)0),
	    -1);
	assert_int_equal(valid(IMSG_EGRESS_EVENT, 11, "susussUUUUU", EV_RUN,
	                     (unsigned)IPC_EGRESS_EV_DENIED, "a.test", 65536u, "", "", (uint64_t)0,
	                     (uint64_t)0, (uint64_t)0, (uint64_t)0, (uint64_t)0),
	    -1);
	assert_int_equal(valid(IMSG_EGRESS_EVENT, 10, "susussUUUU", EV_RUN,
	                     (unsigned)IPC_EGRESS_EV_DENIED, "a.test", 443u, "", "", (uint64_t)0,
	                     (uint64_t)0, (uint64_t)0, (uint64_t)0),
	    -1);
}

#define PM_RUN "0d1f6a8e-3b1c-4c55-9d6e-2f0a1b2c3d4e"
#define PM_H "Authorization: Bearer sk-remote-0123456789"
#define PM_S "sk-remote-0123456789"
/* PROXY_MCP: a remote MCP server's channel for the proxy, with its
 * expanded headers and the secrets to redact. */
static void
t_v_proxy_mcp(void **state)
{
	struct ipc_proxy_mcp pm;
	struct ipc_msg m;
	const uint8_t *p;
	size_t len;

	build(&m, IMSG_PROXY_MCP, 6, "sssaBaBu", PM_RUN, "remote", "https://mcp.example/mcp", 1u,
	    PM_H, strlen(PM_H), 1u, PM_S, strlen(PM_S), 60000u);
	check_is(&m, ROLE_SUPERVISOR, ROLE_PROXY, 1, NULL);
	check_is(&m, ROLE_SUPERVISOR, ROLE_PROXY, 0, "descriptor missing");
	check_is(&m, ROLE_SUPERVISOR, ROLE_RUNNER, 1, "receiver");
	check_is(&m, ROLE_RUNNER, ROLE_PROXY, 1, "sender");
	assert_int_equal(ipc_dec_proxy_mcp(m.body, &pm), 0);
	assert_string_equal(pm.url, "https://mcp.example/mcp");
	assert_int_equal(ipc_get_bin(&pm.headers, &p, &len, SIZE_MAX), 0);
	assert_int_equal(len, strlen(PM_H));
	assert_int_equal(pm.call_ms, 60000);
	ipc_msg_free(&m);
	/* none of either */
	assert_int_equal(valid(IMSG_PROXY_MCP, 6, "sssaau", PM_RUN, "r", "http://127.0.0.1:9/", 0u,
	    0u, 1000u), 0);
	assert_int_equal(valid(IMSG_PROXY_MCP, 6, "sssaau", "not-a-uuid", "r", "https://x/", 0u, 0u,
	    1000u), -1);
	assert_int_equal(valid(IMSG_PROXY_MCP, 6, "sssaau", PM_RUN, "R", "https://x/", 0u, 0u,
	    1000u), -1);
	assert_int_equal(valid(IMSG_PROXY_MCP, 6, "sssaau", PM_RUN, "r", "ftp://x/", 0u, 0u, 1000u),
	    -1);
	assert_int_equal(valid(IMSG_PROXY_MCP, 6, "sssaau", PM_RUN, "r", "", 0u, 0u, 1000u), -1);
	assert_int_equal(valid(IMSG_PROXY_MCP, 6, "sssaau", PM_RUN, "r", "https://x/", 0u, 0u, 999u),
	    -1);
	assert_int_equal(valid(IMSG_PROXY_MCP, 6, "sssaau", PM_RUN, "r", "https://x/", 0u, 0u,
	    3600001u), -1);
	/* a header with a newline (a second header smuggled), a short secret */
	assert_int_equal(valid(IMSG_PROXY_MCP, 6, "sssaBau", PM_RUN, "r", "https://x/", 1u,
	    "A: b\r\nC: d", (size_t)10, 0u, 1000u), -1);
	assert_int_equal(valid(IMSG_PROXY_MCP, 6, "sssaaBu", PM_RUN, "r", "https://x/", 0u, 1u,
	    "short", (size_t)5, 1000u), -1);
	/* headers as strings, not bins */
	assert_int_equal(valid(IMSG_PROXY_MCP, 6, "sssasau", PM_RUN, "r", "https://x/", 1u, PM_H, 0u,
	    1000u), -1);
}

#define MC_FMT "suss" "uUs"
/* MODEL_CALL: one call of a run's step, runner -> proxy. */
static void
t_v_model_call(void **state)
{
	static const char req[] = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
	char *step = strfill(65, 's');
	struct ipc_model_call mc;
	struct ipc_msg m;
	char one[2];
	int b, ok;

	types_refused(IMSG_MODEL_CALL, 7, MC_FMT, "plan", 1u, "anthropic", "claude-sonnet-4-5",
	    1024u, (uint64_t)2500000, req);
	build(&m, IMSG_MODEL_CALL, 7, MC_FMT, "fix-tests_2", 3u, "openai", "gpt-4o", 4096u,
	    (uint64_t)IPC_USD_MICROS_MAX, req);
	check_is(&m, ROLE_RUNNER, ROLE_PROXY, 0, NULL);
	assert_int_equal(ipc_dec_model_call(m.body, &mc), 0);
	assert_string_equal(mc.step, "fix-tests_2");
	assert_int_equal(mc.attempt, 3);
	assert_string_equal(mc.provider, "openai");
	assert_string_equal(mc.model, "gpt-4o");
	assert_int_equal(mc.max_tokens, 4096);
	assert_true(mc.limit == IPC_USD_MICROS_MAX);
	assert_int_equal(mc.reqlen, sizeof(req) - 1);
	assert_memory_equal(mc.request, req, sizeof(req) - 1);
	check_is(&m, ROLE_RUNNER, ROLE_PROXY, 1, "unexpected descriptor");
	check_is(&m, ROLE_PROXY, ROLE_RUNNER, 0, "sender");
	check_is(&m, ROLE_SUPERVISOR, ROLE_PROXY, 0, "sender");
	check_is(&m, ROLE_ENGINE, ROLE_PROXY, 0, "sender");
	check_is(&m, ROLE_RUNNER, ROLE_SUPERVISOR, 0, "receiver");
	check_is(&m, ROLE_RUNNER, ROLE_SANDBOX, 0, "receiver");
	ipc_msg_free(&m);
	/* step id [a-z0-9_-]{1,64}, byte by byte */
	assert_int_equal(valid(IMSG_MODEL_CALL, 7, MC_FMT, step, 1u, "p", "m", 1u, (uint64_t)0,
	    "{}"), -1);
	step[64] = '\0';
	assert_int_equal(valid(IMSG_MODEL_CALL, 7, MC_FMT, step, 1u, "p", "m", 1u, (uint64_t)0,
	    "{}"), 0);
	assert_int_equal(valid(IMSG_MODEL_CALL, 7, MC_FMT, "", 1u, "p", "m", 1u, (uint64_t)0,
	    "{}"), -1);
	assert_int_equal(valid(IMSG_MODEL_CALL, 7, "Sussuus", "a\0", (size_t)2, 1u, "p", "m", 1u,
	    0u, "{}"), -1);
	for (b = 0; b < 256; b++) {
		ok = b != 0 && strchr("abcdefghijklmnopqrstuvwxyz0123456789_-", b) != NULL;
		one[0] = (char)b;
		one[1] = '\0';
		if (valid(IMSG_MODEL_CALL, 7, "Sussuus", one, (size_t)1, 1u, "p", "m", 1u, 0u,
		    "{}") != (ok ? 0 : -1))
			fail_msg("step id 0x%02x: %s", b, ok ? "refused" : "accepted");
	}
	/* attempt >= 1 */
	assert_int_equal(valid(IMSG_MODEL_CALL, 7, MC_FMT, "s", 0u, "p", "m", 1u, (uint64_t)0,
	    "{}"), -1);
	assert_int_equal(valid(IMSG_MODEL_CALL, 7, MC_FMT, "s", UINT32_MAX, "p", "m", 1u,
	    (uint64_t)0, "{}"), 0);
	assert_int_equal(valid(IMSG_MODEL_CALL, 7, "sUssuUs", "s", (uint64_t)1 << 32, "p", "m",
	    1u, (uint64_t)0, "{}"), -1);
	/* a provider and a model, always */
	assert_int_equal(valid(IMSG_MODEL_CALL, 7, MC_FMT, "s", 1u, "", "m", 1u, (uint64_t)0,
	    "{}"), -1);
	assert_int_equal(valid(IMSG_MODEL_CALL, 7, MC_FMT, "s", 1u, "p", "", 1u, (uint64_t)0,
	    "{}"), -1);
	assert_int_equal(valid(IMSG_MODEL_CALL, 7, MC_FMT, "s", 1u, "P", "m", 1u, (uint64_t)0,
	    "{}"), -1);
	assert_int_equal(valid(IMSG_MODEL_CALL, 7, MC_FMT, "s", 1u, "p", "m m", 1u, (uint64_t)0,
	    "{}"), -1);
	/* max_tokens >= 1 */
	assert_int_equal(valid(IMSG_MODEL_CALL, 7, MC_FMT, "s", 1u, "p", "m", 0u, (uint64_t)0,
	    "{}"), -1);
	/* limit <= IPC_USD_MICROS_MAX */
	assert_int_equal(valid(IMSG_MODEL_CALL, 7, MC_FMT, "s", 1u, "p", "m", 1u,
	    (uint64_t)IPC_USD_MICROS_MAX + 1, "{}"), -1);
	assert_int_equal(valid(IMSG_MODEL_CALL, 7, MC_FMT, "s", 1u, "p", "m", 1u, UINT64_MAX,
	    "{}"), -1);
	/* a request, never empty */
	assert_int_equal(valid(IMSG_MODEL_CALL, 7, MC_FMT, "s", 1u, "p", "m", 1u, (uint64_t)0, ""),
	    -1);
	/* too few, trailing */
	assert_int_equal(valid(IMSG_MODEL_CALL, 6, "sussuU", "s", 1u, "p", "m", 1u, (uint64_t)0),
	    -1);
	assert_int_equal(valid(IMSG_MODEL_CALL, 8, MC_FMT "n", "s", 1u, "p", "m", 1u, (uint64_t)0,
	    "{}"), -1);
	free(step);
}

#define MR_FMT "usUU" "aUUUU" "us"
#define MR_USAGE(a, b, c, d) 4u, (uint64_t)(a), (uint64_t)(b), (uint64_t)(c), (uint64_t)(d)
/* MODEL_REPLY: the proxy's answer to a MODEL_CALL (same id). */
static void
t_v_model_reply(void **state)
{
	static const char content[] = "[{\"type\":\"text\",\"text\":\"hello\"}]";
	char *err = strfill(IPC_ERRMSG_MAX + 1, 'e');
	struct ipc_model_reply r;
	struct ipc_msg m;
	unsigned code, stop;

	types_refused(IMSG_MODEL_REPLY, 7, MR_FMT, 0u, "", (uint64_t)1200, (uint64_t)90000,
	    MR_USAGE(100, 20, 3, 4), 0u, content);
	build(&m, IMSG_MODEL_REPLY, 7, MR_FMT, 0u, "", (uint64_t)1234, (uint64_t)56789,
	    MR_USAGE(1000, 200, UINT64_MAX, 0), 1u, content);
	check_is(&m, ROLE_PROXY, ROLE_RUNNER, 0, NULL);
	assert_int_equal(ipc_dec_model_reply(m.body, &r), 0);
	assert_int_equal(r.code, IPC_MODEL_OK);
	assert_int_equal(r.errlen, 0);
	assert_true(r.cost == 1234 && r.worst == 56789);
	assert_true(r.usage[0] == 1000 && r.usage[1] == 200 && r.usage[2] == UINT64_MAX &&
	    r.usage[3] == 0);
	assert_int_equal(r.stop, 1);
	assert_int_equal(r.contentlen, sizeof(content) - 1);
	assert_memory_equal(r.content, content, sizeof(content) - 1);
	check_is(&m, ROLE_PROXY, ROLE_RUNNER, 1, "unexpected descriptor");
	check_is(&m, ROLE_RUNNER, ROLE_PROXY, 0, "sender");
	check_is(&m, ROLE_SUPERVISOR, ROLE_RUNNER, 0, "sender");
	check_is(&m, ROLE_PROXY, ROLE_SUPERVISOR, 0, "receiver");
	check_is(&m, ROLE_PROXY, ROLE_ENGINE, 0, "receiver");
	ipc_msg_free(&m);
	/* a failure: an error, no content */
	build(&m, IMSG_MODEL_REPLY, 7, MR_FMT, (unsigned)IPC_MODEL_FAILED, "HTTP 529 overloaded",
	    (uint64_t)0, (uint64_t)90000, MR_USAGE(0, 0, 0, 0), 3u, "");
	check_is(&m, ROLE_PROXY, ROLE_RUNNER, 0, NULL);
	assert_int_equal(ipc_dec_model_reply(m.body, &r), 0);
	assert_int_equal(r.code, IPC_MODEL_FAILED);
	assert_int_equal(r.errlen, strlen("HTTP 529 overloaded"));
	assert_memory_equal(r.error, "HTTP 529 overloaded", r.errlen);
	assert_int_equal(r.contentlen, 0);
	ipc_msg_free(&m);
	/* code < IPC_MODEL__MAX; content iff the code is IPC_MODEL_OK */
	for (code = 0; code <= IPC_MODEL__MAX; code++) {
		assert_int_equal(valid(IMSG_MODEL_REPLY, 7, MR_FMT, code, "", (uint64_t)0,
		    (uint64_t)0, MR_USAGE(0, 0, 0, 0), 0u, "[]"),
		    code == IPC_MODEL_OK ? 0 : -1);
		assert_int_equal(valid(IMSG_MODEL_REPLY, 7, MR_FMT, code, "x", (uint64_t)0,
		    (uint64_t)0, MR_USAGE(0, 0, 0, 0), 0u, ""),
		    code == IPC_MODEL_OK || code == IPC_MODEL__MAX ? -1 : 0);
	}
	assert_int_equal(valid(IMSG_MODEL_REPLY, 7, MR_FMT, UINT32_MAX, "", (uint64_t)0,
	    (uint64_t)0, MR_USAGE(0, 0, 0, 0), 0u, ""), -1);
	/* stop 0..3 */
	for (stop = 0; stop <= 4; stop++)
		assert_int_equal(valid(IMSG_MODEL_REPLY, 7, MR_FMT, 0u, "", (uint64_t)0,
		    (uint64_t)0, MR_USAGE(0, 0, 0, 0), stop, "[]"), stop <= 3 ? 0 : -1);
	/* usage: exactly 4 counts */
	assert_int_equal(valid(IMSG_MODEL_REPLY, 7, "usUUaUUUus", 0u, "", (uint64_t)0, (uint64_t)0,
	    3u, (uint64_t)0, (uint64_t)0, (uint64_t)0, 0u, "[]"), -1);
	assert_int_equal(valid(IMSG_MODEL_REPLY, 7, "usUUaUUUUUus", 0u, "", (uint64_t)0,
	    (uint64_t)0, 5u, (uint64_t)0, (uint64_t)0, (uint64_t)0, (uint64_t)0, (uint64_t)0, 0u,
	    "[]"), -1);
	assert_int_equal(valid(IMSG_MODEL_REPLY, 7, "usUUaus", 0u, "", (uint64_t)0, (uint64_t)0,
	    0u, 0u, "[]"), -1);
	assert_int_equal(valid(IMSG_MODEL_REPLY, 7, "usUUaUUUIus", 0u, "", (uint64_t)0,
	    (uint64_t)0, 4u, (uint64_t)0, (uint64_t)0, (uint64_t)0, (int64_t)-1, 0u, "[]"), -1);
	/* error <= IPC_ERRMSG_MAX */
	assert_int_equal(valid(IMSG_MODEL_REPLY, 7, MR_FMT, 2u, err, (uint64_t)0, (uint64_t)0,
	    MR_USAGE(0, 0, 0, 0), 0u, ""), -1);
	err[IPC_ERRMSG_MAX] = '\0';
	assert_int_equal(valid(IMSG_MODEL_REPLY, 7, MR_FMT, 2u, err, (uint64_t)0, (uint64_t)0,
	    MR_USAGE(0, 0, 0, 0), 0u, ""), 0);
	/* too few, trailing */
	assert_int_equal(valid(IMSG_MODEL_REPLY, 6, "usUUaUUUUu", 0u, "", (uint64_t)0,
	    (uint64_t)0, MR_USAGE(0, 0, 0, 0), 0u), -1);
	assert_int_equal(valid(IMSG_MODEL_REPLY, 8, MR_FMT "n", 0u, "", (uint64_t)0, (uint64_t)0,
	    MR_USAGE(0, 0, 0, 0), 0u, "[]"), -1);
	free(err);
}

/* MODEL_REPLY: cost and worst are money, bounded like every amount on the
 * wire; an OK reply carries no error. */
static void
t_v_model_reply_cost_bound(void **state)
{
	assert_int_equal(valid(IMSG_MODEL_REPLY, 7, MR_FMT, 0u, "", (uint64_t)IPC_USD_MICROS_MAX,
	    (uint64_t)IPC_USD_MICROS_MAX, MR_USAGE(0, 0, 0, 0), 0u, "[]"), 0);
	assert_int_equal(valid(IMSG_MODEL_REPLY, 7, MR_FMT, 0u, "", UINT64_MAX, (uint64_t)0,
	    MR_USAGE(0, 0, 0, 0), 0u, "[]"), -1);
	assert_int_equal(valid(IMSG_MODEL_REPLY, 7, MR_FMT, 0u, "",
	    (uint64_t)IPC_USD_MICROS_MAX + 1, (uint64_t)0, MR_USAGE(0, 0, 0, 0), 0u, "[]"), -1);
	assert_int_equal(valid(IMSG_MODEL_REPLY, 7, MR_FMT, 1u, "budget", (uint64_t)0,
	    UINT64_MAX, MR_USAGE(0, 0, 0, 0), 0u, ""), -1);
	assert_int_equal(valid(IMSG_MODEL_REPLY, 7, MR_FMT, 0u, "oops", (uint64_t)0, (uint64_t)0,
	    MR_USAGE(0, 0, 0, 0), 0u, "[]"), -1);
}

/* HELLO: an empty chroot only for the proxy, which is not chrooted. */
static void
t_v_hello_proxy_chroot(void **state)
{
	static const enum ipc_role others[] = { ROLE_SUPERVISOR, ROLE_ENGINE, ROLE_HTTPD,
		ROLE_RUNNER, ROLE_SANDBOX, ROLE_GITHELPER, ROLE_CTL };
	struct ipc_hello h;
	struct ipc_msg m;
	size_t i;

	build(&m, IMSG_HELLO, 8, HELLO_FMT, IPC_PROTO_VERSION, (unsigned)ROLE_PROXY, 1u, 0, 1000u,
	    1000u, "", "main");
	check_is(&m, ROLE_SUPERVISOR, ROLE_PROXY, 0, NULL);
	assert_int_equal(ipc_dec_hello(m.body, &h), 0);
	assert_int_equal(h.role, ROLE_PROXY);
	assert_string_equal(h.chroot, "");
	assert_string_equal(h.instance, "main");
	ipc_msg_free(&m);
	/* the proxy may still be given an absolute one, never a relative one */
	assert_int_equal(valid(IMSG_HELLO, 8, HELLO_FMT, 1u, (unsigned)ROLE_PROXY, 1u, 0, 1u, 1u,
	    "/var/empty", "m"), 0);
	assert_int_equal(valid(IMSG_HELLO, 8, HELLO_FMT, 1u, (unsigned)ROLE_PROXY, 1u, 0, 1u, 1u,
	    "var/empty", "m"), -1);
	assert_int_equal(valid(IMSG_HELLO, 8, HELLO_FMT, 1u, (unsigned)ROLE_PROXY, 1u, 0, 1u, 1u,
	    ".", "m"), -1);
	assert_int_equal(valid(IMSG_HELLO, 8, "uuubuuSs", 1u, (unsigned)ROLE_PROXY, 1u, 0, 1u, 1u,
	    "\0/", (size_t)2, "m"), -1);
	for (i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
		if (valid(IMSG_HELLO, 8, HELLO_FMT, 1u, (unsigned)others[i], 1u, 0, 1u, 1u, "",
		    "m") != -1)
			fail_msg("HELLO for %s with an empty chroot accepted",
			    ipc_role_name(others[i]));
		assert_int_equal(valid(IMSG_HELLO, 8, HELLO_FMT, 1u, (unsigned)others[i], 1u, 0, 1u,
		    1u, "/var/empty", "m"), 0);
	}
	/* what counts is the role the body names */
	build(&m, IMSG_HELLO, 8, HELLO_FMT, IPC_PROTO_VERSION, (unsigned)ROLE_ENGINE, 1u, 0, 1u,
	    1u, "", "main");
	check_is(&m, ROLE_SUPERVISOR, ROLE_PROXY, 0, "body failed validation");
	ipc_msg_free(&m);
}

static void
t_v_artifact(void **state)
{
	static const char a[] = "0b6a4a8e-1c2d-4e5f-8a9b-0c1d2e3f4a5b";
	static const char b[] = "11111111-2222-4333-8444-555555555555";
	char user[IPC_UUID_LEN + 1], art[IPC_UUID_LEN + 1];
	struct ipc_msg m;
	uint64_t size;
	uint32_t st;

	/* REPO_SEAL: a token of 1..IPC_SECRET_MAX bytes; REPO_SEALED: nonce and box */
	{
		static uint8_t big[IPC_SECRET_MAX + 17];

		assert_int_equal(valid(IMSG_REPO_SEAL, 1, "B", big, (size_t)1), 0);
		assert_int_equal(valid(IMSG_REPO_SEAL, 1, "B", big, (size_t)IPC_SECRET_MAX), 0);
		assert_int_equal(valid(IMSG_REPO_SEAL, 1, "B", big, (size_t)IPC_SECRET_MAX + 1), -1);
		assert_int_equal(valid(IMSG_REPO_SEAL, 1, "B", big, (size_t)0), -1);
		assert_int_equal(valid(IMSG_REPO_SEAL, 1, "s", "token"), -1);
		assert_int_equal(valid(IMSG_REPO_SEALED, 2, "BB", big, (size_t)24, big, (size_t)17), 0);
		assert_int_equal(valid(IMSG_REPO_SEALED, 2, "BB", big, (size_t)24, big,
		                       (size_t)IPC_SECRET_MAX + 16), 0);
		assert_int_equal(valid(IMSG_REPO_SEALED, 2, "BB", big, (size_t)23, big, (size_t)17), -1);
		assert_int_equal(valid(IMSG_REPO_SEALED, 2, "BB", big, (size_t)24, big, (size_t)16), -1);
		assert_int_equal(valid(IMSG_REPO_SEALED, 2, "BB", big, (size_t)24, big,
		                       (size_t)IPC_SECRET_MAX + 17), -1);
	}
	/* GIT_FETCH: a URL, a token (maybe empty), an absolute mirror;
	 * GIT_CHECKOUT: an absolute mirror, a ref ("" or printable, no
	 * leading '-'), an absolute workspace, a URL */
	{
		struct ipc_git_fetch gf;
		struct ipc_git_checkout g;
		struct ipc_git_result gr;
		struct ipc_git_diff gd;
		static const char oid[] = "0123456789abcdef0123456789abcdef01234567";
		char longref[IPC_GIT_REF_MAX + 2];

		assert_int_equal(valid(IMSG_GIT_FETCH, 3, "sBs", "https://h/r.git", "tok", (size_t)3,
		                       "/var/agrippa/mirrors/x"), 0);
		assert_int_equal(valid(IMSG_GIT_FETCH, 3, "sBs", "/srv/r", "", (size_t)0, "/m"), 0);
		assert_int_equal(valid(IMSG_GIT_FETCH, 3, "sBs", "/srv/r", "", (size_t)0, "m"), -1);
		assert_int_equal(valid(IMSG_GIT_FETCH, 3, "sBs", "", "", (size_t)0, "/m"), -1);
		assert_int_equal(valid(IMSG_GIT_FETCH, 3, "sBs", "/srv/r", "", (size_t)0, ""), -1);
		assert_int_equal(valid(IMSG_GIT_FETCH, 3, "sss", "/srv/r", "tok", "/m"), -1);
		assert_int_equal(valid(IMSG_GIT_FETCH, 2, "sB", "/srv/r", "", (size_t)0), -1);
		build(&m, IMSG_GIT_FETCH, 3, "sBs", "file:///srv/r", "secret", (size_t)6, "/m/x");
		assert_int_equal(ipc_dec_git_fetch(m.body, &gf), 0);
		assert_string_equal(gf.url, "file:///srv/r");
		assert_int_equal(gf.toklen, 6);
		assert_memory_equal(gf.token, "secret", 6);
		assert_string_equal(gf.mirror, "/m/x");
		ipc_msg_free(&m);
		assert_int_equal(valid(IMSG_GIT_CHECKOUT, 4, "ssss", "/m", "", "/w", "https://h/r"), 0);
		assert_int_equal(valid(IMSG_GIT_CHECKOUT, 4, "ssss", "/m", "release/1.x", "/w", "/r"),
		                 0);
		assert_int_equal(valid(IMSG_GIT_CHECKOUT, 4, "ssss", "/m", oid, "/w", "/r"), 0);
		assert_int_equal(valid(IMSG_GIT_CHECKOUT, 4, "ssss", "m", "", "/w", "/r"), -1);
		assert_int_equal(valid(IMSG_GIT_CHECKOUT, 4, "ssss", "/m", "", "w", "/r"), -1);
		assert_int_equal(valid(IMSG_GIT_CHECKOUT, 4, "ssss", "/m", "", "/w", ""), -1);
		assert_int_equal(valid(IMSG_GIT_CHECKOUT, 4, "ssss", "/m", "-x", "/w", "/r"), -1);
		assert_int_equal(valid(IMSG_GIT_CHECKOUT, 4, "ssss", "/m", "a b", "/w", "/r"), -1);
		assert_int_equal(valid(IMSG_GIT_CHECKOUT, 4, "ssss", "/m", "a\nb", "/w", "/r"), -1);
		memset(longref, 'a', sizeof(longref) - 1);
		longref[sizeof(longref) - 1] = '\0';
		assert_int_equal(valid(IMSG_GIT_CHECKOUT, 4, "ssss", "/m", longref, "/w", "/r"), -1);
		longref[IPC_GIT_REF_MAX] = '\0';
		assert_int_equal(valid(IMSG_GIT_CHECKOUT, 4, "ssss", "/m", longref, "/w", "/r"), 0);
		assert_int_equal(valid(IMSG_GIT_CHECKOUT, 3, "sss", "/m", "", "/w"), -1);
		build(&m, IMSG_GIT_CHECKOUT, 4, "ssss", "/m/y", "v1.0", "/w/x", "https://h/r");
		assert_int_equal(ipc_dec_git_checkout(m.body, &g), 0);
		assert_string_equal(g.mirror, "/m/y");
		assert_string_equal(g.ref, "v1.0");
		assert_string_equal(g.workspace, "/w/x");
		assert_string_equal(g.url, "https://h/r");
		ipc_msg_free(&m);
		/* GIT_RESULT: ok with no id (a fetch, a diff) or a 40 or 64 hex id,
		 * a size and a ref; not ok with neither */
		assert_int_equal(valid(IMSG_GIT_RESULT, 5, "bssUs", 1, "", oid, (uint64_t)0, "main"), 0);
		assert_int_equal(valid(IMSG_GIT_RESULT, 5, "bssUs", 1, "", "", (uint64_t)9, ""), 0);
		assert_int_equal(valid(IMSG_GIT_RESULT, 5, "bssUs", 0, "clone: refused", "",
		                       (uint64_t)0, ""), 0);
		assert_int_equal(valid(IMSG_GIT_RESULT, 5, "bssUs", 1, "", "0123", (uint64_t)0, ""), -1);
		assert_int_equal(valid(IMSG_GIT_RESULT, 5, "bssUs", 0, "x", oid, (uint64_t)0, ""), -1);
		assert_int_equal(valid(IMSG_GIT_RESULT, 5, "bssUs", 0, "x", "", (uint64_t)0, "main"),
		                 -1);
		assert_int_equal(valid(IMSG_GIT_RESULT, 5, "bssUs", 1, "", oid, (uint64_t)0, "-x"), -1);
		assert_int_equal(valid(IMSG_GIT_RESULT, 5, "bssUs", 1, "",
		                       "0123456789ABCDEF0123456789abcdef01234567", (uint64_t)0, ""),
		                 -1);
		assert_int_equal(valid(IMSG_GIT_RESULT, 4, "bssU", 1, "", oid, (uint64_t)0), -1);
		build(&m, IMSG_GIT_RESULT, 5, "bssUs", 1, "", oid, (uint64_t)1234, "v1");
		assert_int_equal(ipc_dec_git_result(m.body, &gr), 0);
		assert_true(gr.ok);
		assert_string_equal(gr.base, oid);
		assert_string_equal(gr.ref, "v1");
		assert_true(gr.size == 1234);
		ipc_msg_free(&m);
		/* GIT_DIFF: two absolute paths, a commit id, a cap > 0, the
		 * workspace's list ("" or absolute) (and a file) */
		assert_int_equal(ipc_dec_git_diff_ok("/g", "/w", oid, 100), 0);
		build(&m, IMSG_GIT_DIFF, 5, "sssUs", "/g", "/w", oid, (uint64_t)100, "/r/ws.stat");
		assert_int_equal(ipc_dec_git_diff(m.body, &gd), 0);
		assert_string_equal(gd.gitdir, "/g");
		assert_string_equal(gd.workspace, "/w");
		assert_string_equal(gd.base, oid);
		assert_string_equal(gd.stats, "/r/ws.stat");
		assert_true(gd.cap == 100);
		ipc_msg_free(&m);
		assert_int_equal(ipc_dec_git_diff_list("/g", "/w", oid, 100, "ws.stat"), -1);
		assert_int_equal(ipc_dec_git_diff_old("/g", "/w", oid, 100), -1);
		/* GIT_PUSH: the push's fields, the workspace's list last */
		{
			static struct ipc_git_push gp;
			const char *lists[] = {"", "/r/ws.stat", "ws.stat"};
			size_t k;

			for (k = 0; k < 3; k++) {
				build(&m, IMSG_GIT_PUSH, 14, "sBssssUssUssss", "https://h/r", "tok",
				      (size_t)3, "x-access-token", "/m", "/w", oid, (uint64_t)100, "A",
				      "a@h", (uint64_t)1700000000, "msg", "refs/heads/agrippa/x", "",
				      lists[k]);
				assert_int_equal(ipc_dec_git_push(m.body, &gp), k < 2 ? 0 : -1);
				if (k < 2)
					assert_string_equal(gp.stats, lists[k]);
				ipc_msg_free(&m);
			}
			build(&m, IMSG_GIT_PUSH, 13, "sBssssUssUsss", "https://h/r", "tok", (size_t)3,
			      "x-access-token", "/m", "/w", oid, (uint64_t)100, "A", "a@h",
			      (uint64_t)1700000000, "msg", "refs/heads/agrippa/x", "");
			assert_int_equal(ipc_dec_git_push(m.body, &gp), -1);
			ipc_msg_free(&m);
		}
		assert_int_equal(ipc_dec_git_diff_ok("g", "/w", oid, 100), -1);
		assert_int_equal(ipc_dec_git_diff_ok("/g", "", oid, 100), -1);
		assert_int_equal(ipc_dec_git_diff_ok("/g", "/w", "0123", 100), -1);
		assert_int_equal(ipc_dec_git_diff_ok("/g", "/w", "0123456789abcdef0123456789abcdef0123456G", 100), -1);
		assert_int_equal(ipc_dec_git_diff_ok("/g", "/w", oid, 0), -1);
	}
	/* AUTH_FLUSH carries nothing */
	assert_int_equal(valid(IMSG_AUTH_FLUSH, 0, ""), 0);
	assert_int_equal(valid(IMSG_AUTH_FLUSH, 1, "u", 1u), -1);
	assert_int_equal(valid(IMSG_ARTIFACT_OPEN, 2, "ss", a, b), 0);
	assert_int_equal(valid(IMSG_ARTIFACT_OPEN, 2, "ss", a, "../../etc/passwd"), -1);
	assert_int_equal(valid(IMSG_ARTIFACT_OPEN, 2, "ss", "", b), -1);
	assert_int_equal(valid(IMSG_ARTIFACT_OPEN, 1, "s", a), -1);
	assert_int_equal(valid(IMSG_ARTIFACT_OPEN, 3, "sss", a, b, b), -1);
	build(&m, IMSG_ARTIFACT_OPEN, 2, "ss", a, b);
	assert_int_equal(ipc_dec_artifact_open(m.body, user, art), 0);
	assert_string_equal(user, a);
	assert_string_equal(art, b);
	ipc_msg_free(&m);
	/* a size is 1 .. INT64_MAX */
	assert_int_equal(valid(IMSG_ARTIFACT_FD, 1, "U", (uint64_t)1), 0);
	assert_int_equal(valid(IMSG_ARTIFACT_FD, 1, "U", (uint64_t)INT64_MAX), 0);
	assert_int_equal(valid(IMSG_ARTIFACT_FD, 1, "U", (uint64_t)0), -1);
	assert_int_equal(valid(IMSG_ARTIFACT_FD, 1, "U", (uint64_t)INT64_MAX + 1), -1);
	build(&m, IMSG_ARTIFACT_FD, 1, "U", (uint64_t)3000000);
	assert_int_equal(ipc_dec_artifact_fd(m.body, &size), 0);
	assert_true(size == 3000000);
	ipc_msg_free(&m);
	/* only the statuses httpd maps */
	assert_int_equal(valid(IMSG_ARTIFACT_ERR, 1, "u", 404u), 0);
	assert_int_equal(valid(IMSG_ARTIFACT_ERR, 1, "u", 500u), 0);
	assert_int_equal(valid(IMSG_ARTIFACT_ERR, 1, "u", 503u), 0);
	assert_int_equal(valid(IMSG_ARTIFACT_ERR, 1, "u", 200u), -1);
	assert_int_equal(valid(IMSG_ARTIFACT_ERR, 1, "u", 403u), -1);
	build(&m, IMSG_ARTIFACT_ERR, 1, "u", 503u);
	assert_int_equal(ipc_dec_artifact_err(m.body, &st), 0);
	assert_int_equal(st, 503);
	ipc_msg_free(&m);
}

static void
t_v_chunk(void **state)
{
	static uint8_t data[IPC_CHUNK_SIZE + 1];

	assert_int_equal(valid(IMSG_CHUNK, 4, "UubB", (uint64_t)1, 0u, 1, data, sizeof(data) - 1),
	    0);
	assert_int_equal(valid(IMSG_CHUNK, 4, "UubB", (uint64_t)1, 0u, 1, data, sizeof(data)),
	    -1);
	assert_int_equal(valid(IMSG_CHUNK, 4, "UUbB", (uint64_t)1, (uint64_t)1 << 32, 0, data,
			     (size_t)1),
	    -1);
	assert_int_equal(valid(IMSG_CHUNK, 4, "UuuB", (uint64_t)1, 0u, 1u, data, (size_t)1), -1);
	assert_int_equal(valid(IMSG_CHUNK, 4, "iubB", -1, 0u, 1, data, (size_t)1), -1);
	assert_int_equal(valid(IMSG_CHUNK, 4, "Uubs", (uint64_t)1, 0u, 1, "data"), -1);
	assert_int_equal(valid(IMSG_CHUNK, 3, "Uub", (uint64_t)1, 0u, 1), -1);
	assert_int_equal(valid(IMSG_CHUNK, 5, "UubBn", (uint64_t)1, 0u, 1, data, (size_t)1), -1);
}

static void
t_v_ctl_request(void **state)
{
	char *cmd = strfill(IPC_CTL_CMD_MAX + 1, 'c');
	char *arg = strfill(IPC_CTL_ARG_MAX + 1, 'a');
	char fmt[IPC_CTL_MAXARGS + 4] = "sa";

	assert_int_equal(valid(IMSG_CTL_REQUEST, 2, "sass", "run", 2u, "list", "--all"), 0);
	assert_int_equal(valid(IMSG_CTL_REQUEST, 2, "sa", cmd, 0u), -1);
	cmd[IPC_CTL_CMD_MAX] = '\0';
	assert_int_equal(valid(IMSG_CTL_REQUEST, 2, "sa", cmd, 0u), 0);
	assert_int_equal(valid(IMSG_CTL_REQUEST, 2, "sasi", "run", 2u, "x", 1), -1);
	assert_int_equal(valid(IMSG_CTL_REQUEST, 2, "sas", "run", 1u, arg), -1);
	arg[IPC_CTL_ARG_MAX] = '\0';
	assert_int_equal(valid(IMSG_CTL_REQUEST, 2, "sas", "run", 1u, arg), 0);
	memset(fmt + 2, 'n', IPC_CTL_MAXARGS + 1);
	assert_int_equal(valid(IMSG_CTL_REQUEST, 2, fmt, "run", IPC_CTL_MAXARGS + 1), -1);
	assert_int_equal(valid(IMSG_CTL_REQUEST, 2, "ss", "run", "x"), -1);
	assert_int_equal(valid(IMSG_CTL_REQUEST, 1, "s", "run"), -1);
	assert_int_equal(valid(IMSG_CTL_REQUEST, 3, "saa", "run", 0u, 0u), -1);
	free(cmd);
	free(arg);
}

static void
t_v_ctl_reply(void **state)
{
	char *msg = strfill(IPC_ERRMSG_MAX * 4 + 1, 'm');

	assert_int_equal(valid(IMSG_CTL_REPLY, 3, "usmsu", 0u, "ok", 1u, "k", 1u), 0);
	assert_int_equal(valid(IMSG_CTL_REPLY, 3, "usn", 1u, "bad"), 0);
	assert_int_equal(valid(IMSG_CTL_REPLY, 3, "usn", 1u, msg), -1);
	msg[IPC_ERRMSG_MAX * 4] = '\0';
	assert_int_equal(valid(IMSG_CTL_REPLY, 3, "usn", 1u, msg), 0);
	assert_int_equal(valid(IMSG_CTL_REPLY, 2, "us", 0u, "ok"), -1);
	assert_int_equal(valid(IMSG_CTL_REPLY, 3, "ssn", "0", "ok"), -1);
	assert_int_equal(valid(IMSG_CTL_REPLY, 4, "usnn", 0u, "ok"), -1);
	free(msg);
}

/* ---- the sandbox channel ---------------------------------------------- */

static void
t_v_sbx_hello(void **state)
{
	assert_int_equal(valid(IMSG_SBX_HELLO, 8, "uuuUUuUs", IPC_PROTO_VERSION, 1u, 1u,
			     (uint64_t)4096, (uint64_t)4096, 1000u, (uint64_t)1, "sbx-1"),
	    0);
	/* access beyond readOnly, a zero cap, verbose > 3, an empty id */
	assert_int_equal(valid(IMSG_SBX_HELLO, 8, "uuuUUuUs", IPC_PROTO_VERSION, 1u, 2u,
			     (uint64_t)4096, (uint64_t)4096, 1000u, (uint64_t)1, "sbx-1"),
	    -1);
	assert_int_equal(valid(IMSG_SBX_HELLO, 8, "uuuUUuUs", IPC_PROTO_VERSION, 1u, 0u,
			     (uint64_t)0, (uint64_t)4096, 1000u, (uint64_t)1, "sbx-1"),
	    -1);
	assert_int_equal(valid(IMSG_SBX_HELLO, 8, "uuuUUuUs", IPC_PROTO_VERSION, 4u, 0u,
			     (uint64_t)1, (uint64_t)4096, 1000u, (uint64_t)1, "sbx-1"),
	    -1);
	assert_int_equal(valid(IMSG_SBX_HELLO, 8, "uuuUUuUs", IPC_PROTO_VERSION, 0u, 0u,
			     (uint64_t)1, (uint64_t)4096, 1000u, (uint64_t)1, ""),
	    -1);
	assert_int_equal(valid(IMSG_SBX_HELLO, 8, "uuuUUuUs", IPC_PROTO_VERSION, 0u, 0u,
			     (uint64_t)1, (uint64_t)4096, 0u, (uint64_t)1, "x"),
	    -1);
}

static void
t_v_sbx_requests(void **state)
{
	char *path = strfill(IPC_SBX_PATH_MAX + 1, 'p');
	char *name = strfill(IPC_SBX_NAME_MAX + 1, 'n');

	assert_int_equal(valid(IMSG_SBX_READ, 3, "sUU", "a.c", (uint64_t)0, (uint64_t)4096), 0);
	assert_int_equal(valid(IMSG_SBX_READ, 3, "sUU", path, (uint64_t)0, (uint64_t)1), -1);
	path[IPC_SBX_PATH_MAX] = '\0';
	assert_int_equal(valid(IMSG_SBX_READ, 3, "sUU", path, (uint64_t)0, (uint64_t)1), 0);
	assert_int_equal(valid(IMSG_SBX_READ, 3, "SUU", "a\0b", (size_t)3, (uint64_t)0,
			     (uint64_t)1),
	    -1); /* a NUL inside a path */
	assert_int_equal(valid(IMSG_SBX_READ, 2, "sU", "a.c", (uint64_t)0), -1);
	assert_int_equal(valid(IMSG_SBX_WRITE, 3, "sBb", "a.c", "x", (size_t)1, 1), 0);
	assert_int_equal(valid(IMSG_SBX_WRITE, 3, "ssb", "a.c", "x", 1), -1); /* data is bin */
	assert_int_equal(valid(IMSG_SBX_EDIT, 4, "sssu", "a.c", "old", "new", 0u), 0);
	assert_int_equal(valid(IMSG_SBX_EDIT, 4, "sssi", "a.c", "old", "new", -1), -1);
	assert_int_equal(valid(IMSG_SBX_LIST, 2, "su", ".", 10u), 0);
	assert_int_equal(valid(IMSG_SBX_GLOB, 3, "ssu", "**/*.c", "", 0u), 0);
	assert_int_equal(valid(IMSG_SBX_GLOB, 3, "ssu", "", "", 0u), -1); /* empty pattern */
	assert_int_equal(valid(IMSG_SBX_GREP, 5, "sssbu", "ma.n", "", "*.c", 1, 0u), 0);
	assert_int_equal(valid(IMSG_SBX_GREP, 5, "sssbu", "", "", "", 0, 0u), -1);
	assert_int_equal(valid(IMSG_SBX_STAT, 1, "s", "a.c"), 0);
	assert_int_equal(valid(IMSG_SBX_STAT, 1, "n"), -1);
	assert_int_equal(valid(IMSG_SBX_KILL, 0, ""), 0);
	assert_int_equal(valid(IMSG_SBX_KILL, 1, "n"), -1);
	assert_int_equal(valid(IMSG_SBX_ARTIFACT, 4, "sssU", "k", "markdown", "r.md", (uint64_t)1), 0);
	assert_int_equal(valid(IMSG_SBX_ARTIFACT, 4, "sssU", "k", "markdown", "r.md", (uint64_t)0), -1);
	assert_int_equal(valid(IMSG_SBX_ARTIFACT, 4, "sssU", "k", "markdown", name, (uint64_t)1), -1);
	assert_int_equal(valid(IMSG_SBX_ARTIFACT, 4, "sssU", "", "markdown", "r.md", (uint64_t)1), -1);
	free(path);
	free(name);
}

static void
t_v_sbx_exec(void **state)
{
	struct ipc_wbuf w;
	struct ipc_msg m;
	size_t i;

	assert_int_equal(valid(IMSG_SBX_EXEC, 4, "basssu", 0, 2u, "make", "check", "", 1000u), 0);
	assert_int_equal(valid(IMSG_SBX_EXEC, 4, "bassu", 1, 1u, "make check", "src", 0u), 0);
	/* a shell command is exactly one string */
	assert_int_equal(valid(IMSG_SBX_EXEC, 4, "basssu", 1, 2u, "a", "b", "", 0u), -1);
	/* no program, an empty program name, a NUL in an argument */
	assert_int_equal(valid(IMSG_SBX_EXEC, 4, "basu", 0, 0u, "", 0u), -1);
	assert_int_equal(valid(IMSG_SBX_EXEC, 4, "bassu", 0, 1u, "", "", 0u), -1);
	assert_int_equal(valid(IMSG_SBX_EXEC, 4, "baSsu", 0, 1u, "a\0b", (size_t)3, "", 0u), -1);
	/* more than IPC_SBX_MAXARGV arguments */
	ipc_wbuf_begin(&w, IMSG_SBX_EXEC, 1, 4);
	ipc_put_bool(&w, 0);
	ipc_put_array(&w, IPC_SBX_MAXARGV + 1);
	for (i = 0; i < IPC_SBX_MAXARGV + 1; i++)
		ipc_put_str(&w, "x");
	ipc_put_str(&w, "");
	ipc_put_u64(&w, 0);
	wdecode(&w, &m);
	assert_int_equal(ipc_msg_lookup(IMSG_SBX_EXEC)->validate(m.body), -1);
	ipc_msg_free(&m);
}

static void
t_v_sbx_replies(void **state)
{
	static uint8_t data[IPC_CHUNK_SIZE + 1];

	assert_int_equal(valid(IMSG_SBX_OUTPUT, 2, "uB", 1u, data, sizeof(data) - 1), 0);
	assert_int_equal(valid(IMSG_SBX_OUTPUT, 2, "uB", 1u, data, sizeof(data)), -1);
	assert_int_equal(valid(IMSG_SBX_OUTPUT, 2, "uB", 3u, data, (size_t)1), -1);
	assert_int_equal(valid(IMSG_SBX_EXIT, 8, "usiubbUU", 0u, "", 0, 0u, 0, 0, (uint64_t)1,
			     (uint64_t)0),
	    0);
	assert_int_equal(valid(IMSG_SBX_EXIT, 8, "usiubbUU", 0u, "", -1, 9u, 1, 1, (uint64_t)1,
			     (uint64_t)0),
	    0);
	/* an exit status or a signal number no process can have */
	assert_int_equal(valid(IMSG_SBX_EXIT, 8, "usiubbUU", 0u, "", 256, 0u, 0, 0, (uint64_t)1,
			     (uint64_t)0),
	    -1);
	assert_int_equal(valid(IMSG_SBX_EXIT, 8, "usiubbUU", 0u, "", -2, 0u, 0, 0, (uint64_t)1,
			     (uint64_t)0),
	    -1);
	assert_int_equal(valid(IMSG_SBX_EXIT, 8, "usiubbUU", 0u, "", -1, 65u, 0, 0, (uint64_t)1,
			     (uint64_t)0),
	    -1);
	assert_int_equal(valid(IMSG_SBX_RESULT, 3, "usn", 2u, "no such file"), 0);
	assert_int_equal(valid(IMSG_SBX_RESULT, 3, "usau", 0u, "", 1u, 5u), 0);
	assert_int_equal(valid(IMSG_SBX_RESULT, 2, "us", 0u, ""), -1);
	assert_int_equal(valid(IMSG_CTL_SANDBOX, 1, "s", "sbx-1"), 0);
	assert_int_equal(valid(IMSG_CTL_SANDBOX, 1, "s", ""), -1);
}

/* Who may say what on a sandbox channel: the sandbox never takes requests
 * from itself or the supervisor's hello from its driver. */
static void
t_check_sbx_roles(void **state)
{
	struct ipc_msg m;

	build(&m, IMSG_SBX_STAT, 1, "s", "a");
	assert_int_equal(ipc_msg_check(&m, ROLE_RUNNER, ROLE_SANDBOX, 0, &last_err), 0);
	assert_int_equal(ipc_msg_check(&m, ROLE_CTL, ROLE_SANDBOX, 0, &last_err), 0);
	assert_int_equal(ipc_msg_check(&m, ROLE_SANDBOX, ROLE_RUNNER, 0, &last_err), -1);
	assert_int_equal(ipc_msg_check(&m, ROLE_ENGINE, ROLE_SANDBOX, 0, &last_err), -1);
	ipc_msg_free(&m);
	build(&m, IMSG_SBX_HELLO, 8, "uuuUUuUs", IPC_PROTO_VERSION, 1u, 1u, (uint64_t)4096,
	    (uint64_t)4096, 1000u, (uint64_t)1, "sbx-1");
	assert_int_equal(ipc_msg_check(&m, ROLE_SUPERVISOR, ROLE_SANDBOX, 0, &last_err), 0);
	assert_int_equal(ipc_msg_check(&m, ROLE_RUNNER, ROLE_SANDBOX, 0, &last_err), -1);
	ipc_msg_free(&m);
	build(&m, IMSG_SBX_RESULT, 3, "usn", 0u, "");
	assert_int_equal(ipc_msg_check(&m, ROLE_SANDBOX, ROLE_RUNNER, 0, &last_err), 0);
	assert_int_equal(ipc_msg_check(&m, ROLE_SANDBOX, ROLE_SUPERVISOR, 0, &last_err), -1);
	ipc_msg_free(&m);
	build(&m, IMSG_CTL_SANDBOX, 1, "s", "sbx-1");
	assert_int_equal(ipc_msg_check(&m, ROLE_SUPERVISOR, ROLE_CTL, 0, &last_err), -1); /* no fd */
	assert_int_equal(ipc_msg_check(&m, ROLE_SUPERVISOR, ROLE_CTL, 1, &last_err), 0);
	ipc_msg_free(&m);
}

/* ---- catalog ------------------------------------------------------------ */

static void
t_catalog_complete(void **state)
{
	uint32_t t;
	unsigned r;
	enum ipc_role role;

	for (t = IMSG_HELLO; t < IMSG__MAX; t++) {
		assert_non_null(ipc_msg_lookup(t));
		assert_true(ipc_msg_lookup(t)->type == t);
		assert_non_null(ipc_msg_lookup(t)->validate);
	}
	assert_null(ipc_msg_lookup(0));
	assert_null(ipc_msg_lookup(IMSG__MAX));
	assert_null(ipc_msg_lookup(UINT32_MAX));
	assert_string_equal(ipc_msg_name(IMSG_DB_OP), "IMSG_DB_OP");
	assert_string_equal(ipc_msg_name(999), "unknown");
	for (r = 0; r < ROLE__COUNT; r++) {
		assert_int_equal(ipc_role_from_name(ipc_role_name((enum ipc_role)r), &role), 0);
		assert_int_equal(role, r);
	}
	assert_int_equal(ipc_role_from_name("root", &role), -1);
	assert_string_equal(ipc_role_name(ROLE__COUNT), "unknown");
}

/* IMSG_METRICS: exactly IPC_METRIC__COUNT unsigned values, from the
 * supervisor to httpd only; METRICS_GET empty, from httpd only. */
static void
metrics_frame(struct ipc_msg *m, uint32_t n, int bad_at)
{
	struct ipc_wbuf w;
	uint32_t i;

	ipc_wbuf_begin(&w, IMSG_METRICS, 7, 1);
	ipc_put_array(&w, n);
	for (i = 0; i < n; i++) {
		if ((int)i == bad_at)
			ipc_put_str(&w, "1");
		else
			ipc_put_u64(&w, i == 0 ? UINT64_MAX : i * 1000u);
	}
	wdecode(&w, m);
}

static void
t_metrics(void **state)
{
	uint64_t v[IPC_METRIC__COUNT];
	struct ipc_wbuf w;
	struct ipc_msg m;

	metrics_frame(&m, IPC_METRIC__COUNT, -1);
	assert_int_equal(ipc_msg_check(&m, ROLE_SUPERVISOR, ROLE_HTTPD, 0, &last_err), 0);
	assert_int_equal(ipc_dec_metrics(m.body, v), 0);
	assert_true(v[0] == UINT64_MAX);
	assert_true(v[IPC_METRIC__COUNT - 1] == (IPC_METRIC__COUNT - 1) * 1000u);
	assert_int_equal(ipc_msg_check(&m, ROLE_HTTPD, ROLE_SUPERVISOR, 0, &last_err), -1);
	assert_int_equal(ipc_msg_check(&m, ROLE_SUPERVISOR, ROLE_ENGINE, 0, &last_err), -1);
	ipc_msg_free(&m);
	metrics_frame(&m, IPC_METRIC__COUNT - 1, -1);
	assert_int_equal(ipc_msg_check(&m, ROLE_SUPERVISOR, ROLE_HTTPD, 0, &last_err), -1);
	ipc_msg_free(&m);
	metrics_frame(&m, IPC_METRIC__COUNT + 1, -1);
	assert_int_equal(ipc_msg_check(&m, ROLE_SUPERVISOR, ROLE_HTTPD, 0, &last_err), -1);
	ipc_msg_free(&m);
	metrics_frame(&m, IPC_METRIC__COUNT, IPC_METRIC__COUNT / 2);
	assert_int_equal(ipc_msg_check(&m, ROLE_SUPERVISOR, ROLE_HTTPD, 0, &last_err), -1);
	ipc_msg_free(&m);

	ipc_wbuf_begin(&w, IMSG_METRICS_GET, 8, 0);
	wdecode(&w, &m);
	assert_int_equal(ipc_msg_check(&m, ROLE_HTTPD, ROLE_SUPERVISOR, 0, &last_err), 0);
	assert_int_equal(ipc_msg_check(&m, ROLE_ENGINE, ROLE_SUPERVISOR, 0, &last_err), -1);
	assert_int_equal(ipc_msg_check(&m, ROLE_RUNNER, ROLE_SUPERVISOR, 0, &last_err), -1);
	ipc_msg_free(&m);
	ipc_wbuf_begin(&w, IMSG_METRICS_GET, 8, 1);
	ipc_put_u64(&w, 1);
	wdecode(&w, &m);
	assert_int_equal(ipc_msg_check(&m, ROLE_HTTPD, ROLE_SUPERVISOR, 0, &last_err), -1);
	ipc_msg_free(&m);

	ipc_wbuf_begin(&w, IMSG_METRICS_FD, 0, 1);
	ipc_put_str(&w, "127.0.0.1:9100");
	wdecode(&w, &m);
	assert_int_equal(ipc_msg_check(&m, ROLE_SUPERVISOR, ROLE_HTTPD, 1, &last_err), 0);
	assert_int_equal(ipc_msg_check(&m, ROLE_SUPERVISOR, ROLE_HTTPD, 0, &last_err), -1);
	assert_int_equal(ipc_msg_check(&m, ROLE_SUPERVISOR, ROLE_PROXY, 1, &last_err), -1);
	ipc_msg_free(&m);
}

static void
t_check_ok(void **state)
{
	struct ipc_msg m;

	build(&m, IMSG_DB_OP, 2, "sa", "run_get", 0u);
	assert_int_equal(ipc_msg_check(&m, ROLE_RUNNER, ROLE_SUPERVISOR, 0, &last_err), 0);
	ipc_msg_free(&m);
}

static void
t_check_unknown_type(void **state)
{
	struct ipc_msg m;

	build(&m, 99, 0, "");
	assert_int_equal(ipc_msg_check(&m, ROLE_SUPERVISOR, ROLE_ENGINE, 0, &last_err), -1);
	assert_reason(last_err, "unknown message type");
	ipc_msg_free(&m);
	build(&m, 0, 0, "");
	assert_int_equal(ipc_msg_check(&m, ROLE_SUPERVISOR, ROLE_ENGINE, 0, &last_err), -1);
	assert_reason(last_err, "unknown message type");
	ipc_msg_free(&m);
}

static void
t_check_wrong_sender(void **state)
{
	struct ipc_msg m;

	build(&m, IMSG_SHUTDOWN, 0, "");
	assert_int_equal(ipc_msg_check(&m, ROLE_ENGINE, ROLE_HTTPD, 0, &last_err), -1);
	assert_reason(last_err, "sender");
	assert_int_equal(ipc_msg_check(&m, ROLE__COUNT, ROLE_HTTPD, 0, &last_err), -1);
	assert_reason(last_err, "sender");
	ipc_msg_free(&m);
	build(&m, IMSG_DB_OP, 2, "sa", "run_get", 0u);
	assert_int_equal(ipc_msg_check(&m, ROLE_SANDBOX, ROLE_SUPERVISOR, 0, &last_err), -1);
	assert_reason(last_err, "sender");
	ipc_msg_free(&m);
}

static void
t_check_wrong_receiver(void **state)
{
	struct ipc_msg m;

	build(&m, IMSG_SHUTDOWN, 0, "");
	assert_int_equal(ipc_msg_check(&m, ROLE_SUPERVISOR, ROLE_CTL, 0, &last_err), -1);
	assert_reason(last_err, "receiver");
	assert_int_equal(ipc_msg_check(&m, ROLE_SUPERVISOR, ROLE_SUPERVISOR, 0, &last_err), -1);
	assert_reason(last_err, "receiver");
	ipc_msg_free(&m);
	build(&m, IMSG_DB_OP, 2, "sa", "run_get", 0u);
	assert_int_equal(ipc_msg_check(&m, ROLE_ENGINE, ROLE_HTTPD, 0, &last_err), -1);
	assert_reason(last_err, "receiver");
	ipc_msg_free(&m);
}

static void
t_check_fd_missing(void **state)
{
	struct ipc_msg m;

	build(&m, IMSG_LISTEN_FD, 1, "s", "127.0.0.1:80");
	assert_int_equal(ipc_msg_check(&m, ROLE_SUPERVISOR, ROLE_HTTPD, 1, &last_err), 0);
	assert_int_equal(ipc_msg_check(&m, ROLE_SUPERVISOR, ROLE_HTTPD, 0, &last_err), -1);
	assert_reason(last_err, "descriptor missing");
	ipc_msg_free(&m);
}

static void
t_check_fd_unexpected(void **state)
{
	struct ipc_msg m;

	build(&m, IMSG_READY, 2, "uu", 1u, 2u);
	assert_int_equal(ipc_msg_check(&m, ROLE_ENGINE, ROLE_SUPERVISOR, 1, &last_err), -1);
	assert_reason(last_err, "unexpected descriptor");
	ipc_msg_free(&m);
}

static void
t_check_bad_body(void **state)
{
	struct ipc_msg m;

	build(&m, IMSG_LOG_VERBOSE, 1, "u", 9u);
	assert_int_equal(ipc_msg_check(&m, ROLE_SUPERVISOR, ROLE_ENGINE, 0, &last_err), -1);
	assert_reason(last_err, "body failed validation");
	ipc_msg_free(&m);
}

/* ---- round trips of every type ------------------------------------------ */

/* Encode, decode, catalog-check from -> to, return the message in *m. */
static void
rt_decode(struct ipc_wbuf *w, enum ipc_role from, enum ipc_role to, int has_fd,
    struct ipc_msg *m)
{
	wdecode(w, m);
	if (ipc_msg_check(m, from, to, has_fd, &last_err) == -1)
		fail_msg("round trip of %s: %s", ipc_msg_name(m->type), last_err);
}

static void
t_rt_hello_ready_shutdown_verbose(void **state)
{
	struct ipc_wbuf w;
	struct ipc_msg m;
	struct ipc_hello h;
	struct ipc_ready r;
	uint32_t level;

	wbuild(&w, IMSG_HELLO, 0, 8, HELLO_FMT, IPC_PROTO_VERSION, (unsigned)ROLE_RUNNER, 2u, 1,
	    4294967294u, 77u, "/var/empty", "host-a");
	rt_decode(&w, ROLE_SUPERVISOR, ROLE_RUNNER, 0, &m);
	assert_int_equal(ipc_dec_hello(m.body, &h), 0);
	assert_int_equal(h.proto, IPC_PROTO_VERSION);
	assert_int_equal(h.role, ROLE_RUNNER);
	assert_int_equal(h.verbose, 2);
	assert_int_equal(h.devmode, 1);
	assert_true(h.uid == 4294967294u);
	assert_int_equal(h.gid, 77);
	assert_string_equal(h.chroot, "/var/empty");
	assert_string_equal(h.instance, "host-a");
	ipc_msg_free(&m);

	wbuild(&w, IMSG_READY, 0, 2, "uu", IPC_PROTO_VERSION, 4242u);
	rt_decode(&w, ROLE_PROXY, ROLE_SUPERVISOR, 0, &m);
	assert_int_equal(ipc_dec_ready(m.body, &r), 0);
	assert_int_equal(r.pid, 4242);
	ipc_msg_free(&m);

	wbuild(&w, IMSG_SHUTDOWN, 0, 0, "");
	rt_decode(&w, ROLE_SUPERVISOR, ROLE_GITHELPER, 0, &m);
	assert_int_equal(m.type, IMSG_SHUTDOWN);
	ipc_msg_free(&m);

	wbuild(&w, IMSG_LOG_VERBOSE, 0, 1, "u", 3u);
	rt_decode(&w, ROLE_SUPERVISOR, ROLE_SANDBOX, 0, &m);
	assert_int_equal(ipc_dec_log_verbose(m.body, &level), 0);
	assert_int_equal(level, 3);
	ipc_msg_free(&m);
}

static void
t_rt_db_op_result(void **state)
{
	struct ipc_wbuf w;
	struct ipc_msg m;
	struct ipc_db_op op;
	struct ipc_db_result res;
	struct ipc_cur row;
	const msgpack_object *o;
	const char *s;
	size_t len;
	int64_t i;

	wbuild(&w, IMSG_DB_OP, 77, 2, "saIsn", "event_append", 3u, (int64_t)-12, "payload");
	rt_decode(&w, ROLE_RUNNER, ROLE_SUPERVISOR, 0, &m);
	assert_true(m.id == 77);
	assert_int_equal(ipc_dec_db_op(m.body, &op), 0);
	assert_string_equal(op.op, "event_append");
	assert_int_equal(op.nargs, 3);
	assert_int_equal(ipc_get_i64(&op.args, &i), 0);
	assert_true(i == -12);
	assert_int_equal(ipc_get_str(&op.args, &s, &len, 100), 0);
	assert_memory_equal(s, "payload", len);
	assert_int_equal(ipc_get_any(&op.args, &o), 0);
	assert_int_equal(o->type, MSGPACK_OBJECT_NIL);
	assert_int_equal(ipc_end(&op.args), 0);
	ipc_msg_free(&m);

	wbuild(&w, IMSG_DB_RESULT, 77, 4, "usuaassasn", 0u, "", 2u, 2u, 2u, "a", "b", 2u, "c");
	rt_decode(&w, ROLE_SUPERVISOR, ROLE_RUNNER, 0, &m);
	assert_int_equal(ipc_dec_db_result(m.body, &res), 0);
	assert_int_equal(res.code, DB_OK);
	assert_int_equal(res.ncols, 2);
	assert_int_equal(res.nrows, 2);
	assert_int_equal(res.errlen, 0);
	assert_int_equal(ipc_get_array(&res.rows, &row, res.ncols), 0);
	assert_int_equal(ipc_get_str(&row, &s, &len, 10), 0);
	assert_memory_equal(s, "a", 1);
	assert_int_equal(ipc_get_array(&res.rows, &row, res.ncols), 0);
	assert_int_equal(ipc_get_str(&row, &s, &len, 10), 0);
	assert_memory_equal(s, "c", 1);
	assert_int_equal(ipc_get_nil(&row), 0);
	assert_int_equal(ipc_end(&res.rows), 0);
	ipc_msg_free(&m);
}

static void
t_rt_listen_chunk_ctl(void **state)
{
	struct ipc_wbuf w;
	struct ipc_msg m;
	struct ipc_chunk ck;
	struct ipc_ctl_request rq;
	struct ipc_ctl_reply rp;
	char addr[IPC_ADDR_MAX + 1];
	const char *s;
	size_t len;

	wbuild(&w, IMSG_LISTEN_FD, 0, 1, "s", "[::1]:8480");
	rt_decode(&w, ROLE_SUPERVISOR, ROLE_HTTPD, 1, &m);
	assert_int_equal(ipc_dec_listen_fd(m.body, addr, sizeof(addr)), 0);
	assert_string_equal(addr, "[::1]:8480");
	ipc_msg_free(&m);

	wbuild(&w, IMSG_CHUNK, 5, 4, "UubB", UINT64_MAX, 3u, 1, "\0\1\2", (size_t)3);
	rt_decode(&w, ROLE_SANDBOX, ROLE_RUNNER, 0, &m);
	assert_int_equal(ipc_dec_chunk(m.body, &ck), 0);
	assert_true(ck.stream == UINT64_MAX);
	assert_int_equal(ck.seq, 3);
	assert_int_equal(ck.last, 1);
	assert_int_equal(ck.len, 3);
	assert_memory_equal(ck.data, "\0\1\2", 3);
	ipc_msg_free(&m);

	wbuild(&w, IMSG_CTL_REQUEST, 9, 2, "sas", "reload", 1u, "templates");
	rt_decode(&w, ROLE_CTL, ROLE_SUPERVISOR, 0, &m);
	assert_int_equal(ipc_dec_ctl_request(m.body, &rq), 0);
	assert_string_equal(rq.cmd, "reload");
	assert_int_equal(rq.nargs, 1);
	assert_int_equal(ipc_get_str(&rq.args, &s, &len, 100), 0);
	assert_memory_equal(s, "templates", len);
	ipc_msg_free(&m);

	wbuild(&w, IMSG_CTL_REPLY, 9, 3, "usau", 0u, "done", 1u, 5u);
	rt_decode(&w, ROLE_SUPERVISOR, ROLE_CTL, 0, &m);
	assert_int_equal(ipc_dec_ctl_reply(m.body, &rp), 0);
	assert_int_equal(rp.code, 0);
	assert_memory_equal(rp.message, "done", rp.msglen);
	assert_int_equal(rp.data->type, MSGPACK_OBJECT_ARRAY);
	ipc_msg_free(&m);
}

/* ---- chunk reassembly --------------------------------------------------- */

static int
feed(struct ipc_asm *a, uint64_t stream, uint32_t seq, int last, const void *p, size_t n)
{
	struct ipc_msg m;
	int rc;

	build(&m, IMSG_CHUNK, 4, "UubB", stream, seq, last, p, n);
	last_err = NULL;
	rc = ipc_asm_feed(a, m.body, &last_err);
	ipc_msg_free(&m);
	return rc;
}

static void
t_asm_in_order(void **state)
{
	struct ipc_asm a;

	ipc_asm_init(&a, 3, 10);
	assert_int_equal(feed(&a, 3, 0, 0, "abc", 3), 0);
	assert_int_equal(feed(&a, 3, 1, 0, "", 0), 0);
	assert_int_equal(feed(&a, 3, 2, 1, "defghij", 7), 1);
	assert_int_equal(a.len, 10);
	assert_memory_equal(a.data, "abcdefghij", 10);
	ipc_asm_free(&a);
}

static void
t_asm_empty_stream(void **state)
{
	struct ipc_asm a;

	ipc_asm_init(&a, 1, 0);
	assert_int_equal(feed(&a, 1, 0, 1, "", 0), 1);
	assert_int_equal(a.len, 0);
	assert_non_null(a.data);
	ipc_asm_free(&a);
}

static void
t_asm_out_of_order(void **state)
{
	struct ipc_asm a;

	ipc_asm_init(&a, 1, 100);
	assert_int_equal(feed(&a, 1, 1, 0, "x", 1), -1);
	assert_reason(last_err, "out of order");
	ipc_asm_free(&a);
	ipc_asm_init(&a, 1, 100);
	assert_int_equal(feed(&a, 1, 0, 0, "x", 1), 0);
	assert_int_equal(feed(&a, 1, 0, 0, "x", 1), -1); /* replayed */
	assert_reason(last_err, "out of order");
	assert_int_equal(feed(&a, 1, 1, 1, "x", 1), -1); /* no recovery */
	assert_reason(last_err, "already failed");
	ipc_asm_free(&a);
}

static void
t_asm_over_cap(void **state)
{
	struct ipc_asm a;

	ipc_asm_init(&a, 1, 4);
	assert_int_equal(feed(&a, 1, 0, 0, "abc", 3), 0);
	assert_int_equal(feed(&a, 1, 1, 1, "de", 2), -1);
	assert_reason(last_err, "cap");
	ipc_asm_free(&a);
	ipc_asm_init(&a, 1, 4);
	assert_int_equal(feed(&a, 1, 0, 0, "abc", 3), 0);
	assert_int_equal(feed(&a, 1, 1, 1, "d", 1), 1); /* exactly the cap */
	ipc_asm_free(&a);
}

static void
t_asm_after_last(void **state)
{
	struct ipc_asm a;

	ipc_asm_init(&a, 1, 100);
	assert_int_equal(feed(&a, 1, 0, 1, "ab", 2), 1);
	assert_int_equal(feed(&a, 1, 1, 1, "cd", 2), -1);
	assert_reason(last_err, "after the last");
	/* the completed data is untouched */
	assert_int_equal(a.len, 2);
	assert_memory_equal(a.data, "ab", 2);
	ipc_asm_free(&a);
}

static void
t_asm_wrong_stream_and_body(void **state)
{
	struct ipc_asm a;
	struct ipc_msg m;

	ipc_asm_init(&a, 1, 100);
	assert_int_equal(feed(&a, 2, 0, 1, "ab", 2), -1);
	assert_reason(last_err, "wrong stream");
	ipc_asm_free(&a);
	ipc_asm_init(&a, 1, 100);
	build(&m, IMSG_CHUNK, 3, "Uub", (uint64_t)1, 0u, 1);
	assert_int_equal(ipc_asm_feed(&a, m.body, &last_err), -1);
	assert_reason(last_err, "malformed");
	ipc_msg_free(&m);
	ipc_asm_free(&a);
}

/* ---- channels ----------------------------------------------------------- */

struct rec {
	int nmsg, nerr, done, want;
	uint64_t next_id; /* id the next message must carry; 0 = unchecked */
	int order_ok;
	uint32_t last_type;
	char reason[256];
	int fd;           /* the last descriptor the handler kept */
	int kept[8];      /* every descriptor kept, in arrival order */
	int nkept;
	int free_on_msg, free_on_err;
	struct ipc_chan **chp;
	struct ipc_asm *as;
	int asm_rc;
	char asm_err[128];
	int burst, burst_bad;
	size_t burst_len;
};

static void
rec_burst(struct rec *r, const struct ipc_msg *m)
{
	struct ipc_chunk ck;
	size_t j;

	if (ipc_dec_chunk(m->body, &ck) == -1 || ck.seq != (uint32_t)(r->nmsg - 1) ||
	    ck.len != r->burst_len) {
		r->burst_bad++;
		return;
	}
	for (j = 0; j < ck.len; j++) {
		if (ck.data[j] != (uint8_t)(ck.seq * 31 + j)) {
			r->burst_bad++;
			return;
		}
	}
}

static void
rec_chunk(struct rec *r, const struct ipc_msg *m)
{
	const char *err = NULL;

	if (r->asm_rc != 0)
		return;
	r->asm_rc = ipc_asm_feed(r->as, m->body, &err);
	if (r->asm_rc == -1)
		snprintf(r->asm_err, sizeof(r->asm_err), "%s", err);
	if (r->asm_rc != 0)
		r->done = 1;
}

static void
rec_msg(struct ipc_chan *ch, struct ipc_msg *m, void *arg)
{
	struct rec *r = arg;

	r->nmsg++;
	r->last_type = m->type;
	if (r->next_id != 0) {
		if (m->id != r->next_id)
			r->order_ok = 0;
		r->next_id++;
	}
	if (m->fd >= 0) {
		r->fd = m->fd;
		if (r->nkept < 8)
			r->kept[r->nkept++] = m->fd;
		m->fd = -1;
	}
	if (r->as != NULL)
		rec_chunk(r, m);
	if (r->burst)
		rec_burst(r, m);
	if (r->free_on_msg) {
		ipc_chan_free(ch);
		*r->chp = NULL;
		r->done = 1;
	}
	if (r->want > 0 && r->nmsg >= r->want)
		r->done = 1;
}

static void
rec_err(struct ipc_chan *ch, const char *reason, void *arg)
{
	struct rec *r = arg;

	r->nerr++;
	snprintf(r->reason, sizeof(r->reason), "%s", reason);
	r->done = 1;
	if (r->free_on_err) {
		ipc_chan_free(ch);
		*r->chp = NULL;
	}
}

struct env {
	struct event_base *base;
	int sv[2];
	struct ipc_chan *a, *b; /* a on sv[0]; b on sv[1] when both ends are channels */
	struct rec ra, rb;
};

static void
rec_init(struct rec *r, struct ipc_chan **chp)
{
	memset(r, 0, sizeof(*r));
	r->order_ok = 1;
	r->fd = -1;
	r->chp = chp;
}

/* a plays arole talking to brole; b is a channel too when with_b, otherwise
 * sv[1] stays a raw blocking socket the test writes to.  Both ends use max. */
static void
env_open(struct env *e, enum ipc_role arole, enum ipc_role brole, size_t max, int with_b)
{
	memset(e, 0, sizeof(*e));
	rec_init(&e->ra, &e->a);
	rec_init(&e->rb, &e->b);
	assert_non_null(e->base = event_base_new());
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, e->sv), 0);
	e->a = ipc_chan_new(e->base, e->sv[0], arole, brole, max, rec_msg, rec_err, &e->ra);
	assert_non_null(e->a);
	if (with_b) {
		e->b = ipc_chan_new(e->base, e->sv[1], brole, arole, max, rec_msg, rec_err, &e->rb);
		assert_non_null(e->b);
	}
}

static void
env_close(struct env *e)
{
	ipc_chan_free(e->a);
	if (e->b != NULL)
		ipc_chan_free(e->b);
	else if (e->sv[1] >= 0)
		close(e->sv[1]);
	if (e->ra.fd >= 0)
		close(e->ra.fd);
	if (e->rb.fd >= 0)
		close(e->rb.fd);
	event_base_free(e->base);
}

static void
expire_cb(evutil_socket_t fd, short what, void *arg)
{
	*(int *)arg = 1;
}

/* Run the loop until *done or 20 seconds; returns *done. */
static int
run_until(struct event_base *base, const int *done)
{
	struct timeval tv = { 20, 0 };
	struct event *t;
	int expired = 0;

	assert_non_null(t = evtimer_new(base, expire_cb, &expired));
	evtimer_add(t, &tv);
	while (!*done && !expired)
		event_base_loop(base, EVLOOP_ONCE);
	event_free(t);
	return *done;
}

/* Let the loop run briefly (to see that nothing else happens). */
static void
run_briefly(struct event_base *base)
{
	struct timeval tv = { 0, 50000 };

	event_base_loopexit(base, &tv);
	event_base_dispatch(base);
}

/* Every write end of the pipe is closed (a leaked copy fails, not hangs). */
static void
assert_pipe_eof(int rfd)
{
	char c;

	assert_int_equal(fcntl(rfd, F_SETFL, O_NONBLOCK), 0);
	assert_int_equal(read(rfd, &c, 1), 0);
}

static void
raw_write(int fd, const void *p, size_t n)
{
	assert_int_equal(write(fd, p, n), (ssize_t)n);
}

/* Send a frame on a raw socket with an optional descriptor, as a peer that
 * does not follow the rules might. */
static void
raw_frame(int sock, uint32_t type, int fd)
{
	struct ipc_wbuf w;

	wbuild(&w, type, 1, 0, "");
	assert_int_equal(ipc_write_frame(sock, &w, fd), 0);
	ipc_wbuf_free(&w);
}

static void
t_chan_in_order_with_ids(void **state)
{
	struct env e;
	struct ipc_wbuf w;
	uint64_t id;

	env_open(&e, ROLE_SUPERVISOR, ROLE_ENGINE, 0, 1);
	for (id = 1; id <= 100; id++) {
		wbuild(&w, IMSG_DB_OP, id, 2, "sau", "lease_renew", 1u, (unsigned)id);
		assert_int_equal(ipc_chan_send(e.b, &w, -1), 0);
		ipc_wbuf_free(&w);
	}
	assert_true(ipc_chan_pending(e.b) > 0);
	e.ra.next_id = 1;
	e.ra.want = 100;
	assert_true(run_until(e.base, &e.ra.done));
	assert_int_equal(e.ra.nmsg, 100);
	assert_int_equal(e.ra.nerr, 0);
	assert_true(e.ra.order_ok);
	assert_int_equal(e.ra.last_type, IMSG_DB_OP);
	assert_int_equal(ipc_chan_pending(e.b), 0);
	assert_int_equal(ipc_chan_peer(e.a), ROLE_ENGINE);
	assert_int_equal(ipc_chan_fd(e.a), e.sv[0]);
	env_close(&e);
}

/* A peer that wrote and exited before its channel was read: drain gives
 * every frame it wrote, in order, however many reads they take (more than
 * the 64 KiB one read event takes), then its "closed"; and nothing at all
 * from a channel freed by a callback on the way. */
static void
t_chan_drain(void **state)
{
	struct env e;
	struct ipc_wbuf w;
	uint64_t id;
	size_t bytes = 0;
	char *arg = strfill(8192, 'a');

	/* 12 frames of 8 KiB: more than one read, well within the socket's
	 * buffer (nobody reads while they are written) */
	env_open(&e, ROLE_SUPERVISOR, ROLE_ENGINE, 0, 0);
	for (id = 1; id <= 12; id++) {
		wbuild(&w, IMSG_DB_OP, id, 2, "sas", "lease_renew", 1u, arg);
		assert_int_equal(ipc_write_frame(e.sv[1], &w, -1), 0);
		bytes += w.sb.size;
		ipc_wbuf_free(&w);
	}
	assert_true(bytes > 64 * 1024);
	close(e.sv[1]);
	e.sv[1] = -1;
	e.ra.next_id = 1;
	e.ra.free_on_err = 1;
	free(arg);
	ipc_chan_drain(e.a); /* no loop runs */
	assert_int_equal(e.ra.nmsg, 12);
	assert_true(e.ra.order_ok);
	assert_int_equal(e.ra.nerr, 1);
	assert_string_equal(e.ra.reason, "closed");
	assert_null(e.a); /* freed by its err callback inside the drain */
	env_close(&e);

	/* a peer still there: what it wrote so far, and the channel stays */
	env_open(&e, ROLE_SUPERVISOR, ROLE_ENGINE, 0, 0);
	wbuild(&w, IMSG_DB_OP, 1, 2, "sau", "lease_renew", 1u, 1u);
	assert_int_equal(ipc_write_frame(e.sv[1], &w, -1), 0);
	assert_int_equal(ipc_write_frame(e.sv[1], &w, -1), 0);
	ipc_wbuf_free(&w);
	e.ra.free_on_msg = 1; /* the first message frees it: the second is not given */
	ipc_chan_drain(e.a);
	assert_int_equal(e.ra.nmsg, 1);
	assert_int_equal(e.ra.nerr, 0);
	assert_null(e.a);
	env_close(&e);

	env_open(&e, ROLE_SUPERVISOR, ROLE_ENGINE, 0, 0);
	ipc_chan_drain(e.a); /* nothing written: nothing delivered, no error */
	assert_int_equal(e.ra.nmsg, 0);
	assert_int_equal(e.ra.nerr, 0);
	wbuild(&w, IMSG_DB_OP, 7, 2, "sau", "lease_renew", 1u, 7u);
	assert_int_equal(ipc_write_frame(e.sv[1], &w, -1), 0);
	ipc_wbuf_free(&w);
	e.ra.want = 1;
	assert_true(run_until(e.base, &e.ra.done)); /* and the read event still works */
	assert_int_equal(e.ra.nmsg, 1);
	env_close(&e);
}

static void
t_chan_wrong_sender(void **state)
{
	struct env e;
	struct ipc_wbuf w;

	/* an engine sending HELLO, which only the supervisor may send */
	env_open(&e, ROLE_SUPERVISOR, ROLE_ENGINE, 0, 0);
	wbuild(&w, IMSG_HELLO, 0, 8, HELLO_FMT, HELLO_OK, "/", "x");
	assert_int_equal(ipc_write_frame(e.sv[1], &w, -1), 0);
	ipc_wbuf_free(&w);
	assert_true(run_until(e.base, &e.ra.done));
	assert_int_equal(e.ra.nerr, 1);
	assert_int_equal(e.ra.nmsg, 0);
	assert_reason(e.ra.reason, "IMSG_HELLO");
	assert_reason(e.ra.reason, "sender");
	/* the channel is disabled: sending fails */
	wbuild(&w, IMSG_SHUTDOWN, 0, 0, "");
	assert_int_equal(ipc_chan_send(e.a, &w, -1), -1);
	ipc_wbuf_free(&w);
	env_close(&e);
}

static void
t_chan_frame_too_large(void **state)
{
	static const uint8_t hdr[] = { 0, 0, 4, 1 }; /* 1025 */
	struct env e;

	env_open(&e, ROLE_SUPERVISOR, ROLE_ENGINE, 1024, 0);
	raw_write(e.sv[1], hdr, sizeof(hdr)); /* no payload follows */
	assert_true(run_until(e.base, &e.ra.done));
	assert_int_equal(e.ra.nerr, 1);
	assert_string_equal(e.ra.reason, "frame too large");
	env_close(&e);
}

static void
t_chan_max_frame_accepted(void **state)
{
	struct env e;
	struct ipc_wbuf w;
	static char pad[1024];

	/* a frame of exactly max_frame bytes passes */
	env_open(&e, ROLE_SUPERVISOR, ROLE_CTL, 1024, 0);
	memset(pad, 'p', sizeof(pad));
	ipc_wbuf_begin(&w, IMSG_CTL_REQUEST, 1, 2);
	ipc_put_strn(&w, "x", 1);
	ipc_put_array(&w, 1);
	ipc_put_strn(&w, pad, 1024 - (w.sb.size - 4) - 3); /* str16 header: 3 bytes */
	assert_int_equal(ipc_wbuf_finish(&w, 1024), 0);
	assert_int_equal(w.sb.size - 4, 1024);
	assert_int_equal(ipc_write_frame(e.sv[1], &w, -1), 0);
	ipc_wbuf_free(&w);
	e.ra.want = 1;
	assert_true(run_until(e.base, &e.ra.done));
	assert_int_equal(e.ra.nmsg, 1);
	assert_int_equal(e.ra.nerr, 0);
	env_close(&e);
}

static void
t_chan_garbage(void **state)
{
	static const uint8_t junk[] = { 0, 0, 0, 3, 0xc1, 0xc1, 0xc1 };
	struct env e;

	env_open(&e, ROLE_SUPERVISOR, ROLE_ENGINE, 0, 0);
	raw_write(e.sv[1], junk, sizeof(junk));
	assert_true(run_until(e.base, &e.ra.done));
	assert_int_equal(e.ra.nerr, 1);
	assert_reason(e.ra.reason, "malformed frame");
	assert_reason(e.ra.reason, "0xc1");
	env_close(&e);
}

static void
t_chan_empty_frame(void **state)
{
	static const uint8_t zero[] = { 0, 0, 0, 0 };
	struct env e;

	env_open(&e, ROLE_SUPERVISOR, ROLE_ENGINE, 0, 0);
	raw_write(e.sv[1], zero, sizeof(zero));
	assert_true(run_until(e.base, &e.ra.done));
	assert_string_equal(e.ra.reason, "empty frame");
	env_close(&e);
}

static void
t_chan_peer_close(void **state)
{
	static const uint8_t partial[] = { 0, 0, 0, 9, 0x83 };
	struct env e;

	env_open(&e, ROLE_SUPERVISOR, ROLE_ENGINE, 0, 0);
	raw_write(e.sv[1], partial, sizeof(partial)); /* half a frame, then EOF */
	close(e.sv[1]);
	e.sv[1] = -1;
	assert_true(run_until(e.base, &e.ra.done));
	assert_int_equal(e.ra.nerr, 1);
	assert_string_equal(e.ra.reason, "closed");
	env_close(&e);
}

static void
t_chan_write_to_closed_peer(void **state)
{
	struct env e;
	struct ipc_wbuf w;

	env_open(&e, ROLE_SUPERVISOR, ROLE_ENGINE, 0, 0);
	shutdown(e.sv[1], SHUT_RD);
	wbuild(&w, IMSG_SHUTDOWN, 0, 0, "");
	assert_int_equal(ipc_chan_send(e.a, &w, -1), 0);
	ipc_wbuf_free(&w);
	close(e.sv[1]);
	e.sv[1] = -1;
	assert_true(run_until(e.base, &e.ra.done));
	assert_int_equal(e.ra.nerr, 1);
	assert_string_equal(e.ra.reason, "closed");
	env_close(&e);
}

static void
t_chan_version_mismatch(void **state)
{
	struct env e;
	struct ipc_wbuf w;

	env_open(&e, ROLE_ENGINE, ROLE_SUPERVISOR, 0, 0);
	wbuild(&w, IMSG_HELLO, 0, 8, HELLO_FMT, IPC_PROTO_VERSION + 1, (unsigned)ROLE_ENGINE, 0u,
	    0, 1u, 1u, "/var/empty", "x");
	assert_int_equal(ipc_write_frame(e.sv[1], &w, -1), 0);
	ipc_wbuf_free(&w);
	assert_true(run_until(e.base, &e.ra.done));
	assert_int_equal(e.ra.nmsg, 0);
	assert_reason(e.ra.reason, "protocol version mismatch");
	env_close(&e);
}

static void
t_chan_pass_fd(void **state)
{
	struct env e;
	struct ipc_wbuf w;
	int p[2];
	char buf[8];

	env_open(&e, ROLE_HTTPD, ROLE_SUPERVISOR, 0, 1);
	assert_int_equal(pipe(p), 0);
	wbuild(&w, IMSG_LISTEN_FD, 0, 1, "s", "127.0.0.1:8480");
	assert_int_equal(ipc_chan_send(e.b, &w, p[1]), 0);
	ipc_wbuf_free(&w);
	close(p[1]); /* the channel holds its own copy */
	e.ra.want = 1;
	assert_true(run_until(e.base, &e.ra.done));
	assert_int_equal(e.ra.nerr, 0);
	assert_int_equal(e.ra.last_type, IMSG_LISTEN_FD);
	assert_true(e.ra.fd >= 0);
	assert_true(fcntl(e.ra.fd, F_GETFD) & FD_CLOEXEC);
	assert_int_equal(write(e.ra.fd, "ping", 4), 4);
	assert_int_equal(read(p[0], buf, sizeof(buf)), 4);
	assert_memory_equal(buf, "ping", 4);
	/* the received copy was the last write end: nothing else leaked */
	close(e.ra.fd);
	e.ra.fd = -1;
	assert_pipe_eof(p[0]);
	close(p[0]);
	env_close(&e);
}

static void
t_chan_pass_fds_back_to_back(void **state)
{
	struct env e;
	struct ipc_wbuf w;
	int p[3][2], i;
	char buf[8];

	/* fd-carrying frames queued behind each other and behind a plain one
	 * each get their own descriptor */
	env_open(&e, ROLE_HTTPD, ROLE_SUPERVISOR, 0, 1);
	wbuild(&w, IMSG_LOG_VERBOSE, 0, 1, "u", 1u);
	assert_int_equal(ipc_chan_send(e.b, &w, -1), 0);
	ipc_wbuf_free(&w);
	wbuild(&w, IMSG_LISTEN_FD, 0, 1, "s", "127.0.0.1:8480");
	for (i = 0; i < 3; i++) {
		assert_int_equal(pipe(p[i]), 0);
		assert_int_equal(ipc_chan_send(e.b, &w, p[i][1]), 0);
		close(p[i][1]);
	}
	ipc_wbuf_free(&w);
	e.ra.want = 4;
	assert_true(run_until(e.base, &e.ra.done));
	assert_int_equal(e.ra.nerr, 0);
	assert_int_equal(e.ra.nkept, 3);
	for (i = 0; i < 3; i++) {
		assert_int_equal(write(e.ra.kept[i], "abc", 3), 3);
		assert_int_equal(read(p[i][0], buf, sizeof(buf)), 3);
		close(e.ra.kept[i]);
		assert_pipe_eof(p[i][0]);
		close(p[i][0]);
	}
	e.ra.fd = -1;
	env_close(&e);
}

static void
t_chan_send_refusals(void **state)
{
	struct env e;
	struct ipc_wbuf w;
	int p[2];

	env_open(&e, ROLE_HTTPD, ROLE_SUPERVISOR, 0, 1);
	assert_int_equal(pipe(p), 0);
	wbuild(&w, IMSG_LISTEN_FD, 0, 1, "s", "127.0.0.1:8480");
	assert_int_equal(ipc_chan_send(e.b, &w, -1), -1); /* LISTEN_FD needs an fd */
	assert_int_equal(ipc_chan_send(e.a, &w, p[1]), -1); /* httpd may not send it */
	ipc_wbuf_free(&w);
	wbuild(&w, IMSG_SHUTDOWN, 0, 0, "");
	assert_int_equal(ipc_chan_send(e.b, &w, p[1]), -1); /* SHUTDOWN carries none */
	ipc_wbuf_free(&w);
	wbuild(&w, IMSG_LOG_VERBOSE, 0, 1, "u", 7u);
	assert_int_equal(ipc_chan_send(e.b, &w, -1), -1); /* body fails validation */
	ipc_wbuf_free(&w);
	ipc_wbuf_begin(&w, IMSG_SHUTDOWN, 0, 0);
	assert_int_equal(ipc_chan_send(e.b, &w, -1), -1); /* not finished */
	ipc_wbuf_free(&w);
	assert_int_equal(ipc_chan_pending(e.b), 0);
	assert_int_equal(ipc_chan_pending(e.a), 0);
	close(p[0]);
	close(p[1]);
	env_close(&e);
}

static void
t_chan_send_over_limit(void **state)
{
	struct event_base *base = event_base_new();
	struct ipc_chan *ch;
	struct ipc_wbuf w;
	static char big[200];
	struct rec r;
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	rec_init(&r, &ch);
	assert_null(ipc_chan_new(base, sv[0], ROLE_CTL, ROLE_SUPERVISOR, IPC_MAX_FRAME_MIN - 1,
	    rec_msg, rec_err, &r));
	assert_int_equal(errno, EINVAL);
	ch = ipc_chan_new(base, sv[0], ROLE_CTL, ROLE_SUPERVISOR, IPC_MAX_FRAME_MIN, rec_msg,
	    rec_err, &r);
	assert_non_null(ch);
	assert_int_equal(ipc_chan_max_frame(ch), IPC_MAX_FRAME_MIN);
	memset(big, 'b', sizeof(big) - 1);
	wbuild(&w, IMSG_CTL_REQUEST, 0, 2, "sas", "x", 1u, big);
	assert_int_equal(ipc_chan_send(ch, &w, -1), -1);
	ipc_wbuf_free(&w);
	ipc_chan_free(ch);
	close(sv[1]);
	event_base_free(base);
}

static void
t_chan_missing_fd(void **state)
{
	struct env e;
	struct ipc_wbuf w;

	env_open(&e, ROLE_HTTPD, ROLE_SUPERVISOR, 0, 0);
	wbuild(&w, IMSG_LISTEN_FD, 0, 1, "s", "127.0.0.1:8480");
	assert_int_equal(ipc_write_frame(e.sv[1], &w, -1), 0);
	ipc_wbuf_free(&w);
	assert_true(run_until(e.base, &e.ra.done));
	assert_int_equal(e.ra.nmsg, 0);
	assert_reason(e.ra.reason, "descriptor missing");
	env_close(&e);
}

static void
t_chan_fd_left_over(void **state)
{
	struct env e;
	int p[2];

	/* a descriptor riding on a SHUTDOWN is only noticed when the next
	 * frame shows that nobody claimed it */
	env_open(&e, ROLE_HTTPD, ROLE_SUPERVISOR, 0, 0);
	assert_int_equal(pipe(p), 0);
	raw_frame(e.sv[1], IMSG_SHUTDOWN, p[1]);
	e.ra.want = 1;
	assert_true(run_until(e.base, &e.ra.done));
	assert_int_equal(e.ra.nmsg, 1);
	assert_int_equal(e.ra.fd, -1);
	e.ra.done = 0;
	e.ra.want = 0;
	raw_frame(e.sv[1], IMSG_SHUTDOWN, -1);
	assert_true(run_until(e.base, &e.ra.done));
	assert_int_equal(e.ra.nmsg, 1);
	assert_int_equal(e.ra.nerr, 1);
	assert_reason(e.ra.reason, "left over");
	/* the channel closed it: the write end is gone once ours is */
	close(p[1]);
	assert_pipe_eof(p[0]);
	close(p[0]);
	env_close(&e);
}

static void
t_chan_too_many_fds(void **state)
{
	struct env e;
	struct ipc_wbuf w;
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int) * (IPC_MAX_FDS_QUEUED + 1))];
	} cm;
	int fds[IPC_MAX_FDS_QUEUED + 1], p[2], i;
	struct msghdr msg;
	struct iovec iov;
	struct cmsghdr *c;

	env_open(&e, ROLE_HTTPD, ROLE_SUPERVISOR, 0, 0);
	assert_int_equal(pipe(p), 0);
	for (i = 0; i <= IPC_MAX_FDS_QUEUED; i++)
		fds[i] = p[1];
	wbuild(&w, IMSG_LISTEN_FD, 0, 1, "s", "x");
	memset(&msg, 0, sizeof(msg));
	memset(&cm, 0, sizeof(cm));
	iov.iov_base = w.sb.data;
	iov.iov_len = w.sb.size;
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = cm.buf;
	msg.msg_controllen = sizeof(cm.buf);
	c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(c), fds, sizeof(fds));
	assert_int_equal(sendmsg(e.sv[1], &msg, 0), (ssize_t)w.sb.size);
	ipc_wbuf_free(&w);
	close(p[1]);
	assert_true(run_until(e.base, &e.ra.done));
	assert_int_equal(e.ra.nmsg, 0);
	assert_reason(e.ra.reason, "truncated");
	/* every copy that did arrive was closed */
	assert_pipe_eof(p[0]);
	close(p[0]);
	env_close(&e);
}

static void
t_chan_free_in_msg_callback(void **state)
{
	struct env e;
	struct ipc_wbuf w;
	int i;

	env_open(&e, ROLE_HTTPD, ROLE_SUPERVISOR, 0, 1);
	for (i = 0; i < 3; i++) {
		wbuild(&w, IMSG_SHUTDOWN, 0, 0, "");
		assert_int_equal(ipc_chan_send(e.b, &w, -1), 0);
		ipc_wbuf_free(&w);
	}
	/* all three frames arrive in one read; the first handler frees a */
	e.ra.free_on_msg = 1;
	assert_true(run_until(e.base, &e.ra.done));
	run_briefly(e.base);
	assert_null(e.a);
	assert_int_equal(e.ra.nmsg, 1);
	assert_int_equal(e.ra.nerr, 0);
	env_close(&e);
}

static void
t_chan_free_in_err_callback(void **state)
{
	struct env e;

	env_open(&e, ROLE_HTTPD, ROLE_SUPERVISOR, 0, 0);
	e.ra.free_on_err = 1;
	close(e.sv[1]);
	e.sv[1] = -1;
	assert_true(run_until(e.base, &e.ra.done));
	run_briefly(e.base);
	assert_null(e.a);
	assert_int_equal(e.ra.nerr, 1);
	env_close(&e);
}

#define BURST_N 2000
#define BURST_LEN (10 * 1024)

static void
t_chan_burst(void **state)
{
	struct env e;
	struct ipc_wbuf w;
	uint8_t *data = malloc(BURST_LEN);
	size_t j, total = 0;
	uint32_t i;
	int sz = 4096;

	assert_non_null(data);
	env_open(&e, ROLE_RUNNER, ROLE_SANDBOX, 0, 1);
	/* a small send buffer forces partial writes in the middle of frames */
	assert_int_equal(setsockopt(e.sv[1], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz)), 0);
	for (i = 0; i < BURST_N; i++) {
		for (j = 0; j < BURST_LEN; j++)
			data[j] = (uint8_t)(i * 31 + j);
		wbuild(&w, IMSG_CHUNK, i + 1, 4, "UubB", (uint64_t)9, i, i == BURST_N - 1, data,
		    (size_t)BURST_LEN);
		assert_int_equal(ipc_chan_send(e.b, &w, -1), 0);
		total += w.sb.size;
		ipc_wbuf_free(&w);
	}
	assert_int_equal(ipc_chan_pending(e.b), total);
	e.ra.burst = 1;
	e.ra.burst_len = BURST_LEN;
	e.ra.next_id = 1;
	e.ra.want = BURST_N;
	assert_true(run_until(e.base, &e.ra.done));
	assert_int_equal(e.ra.nmsg, BURST_N);
	assert_int_equal(e.ra.burst_bad, 0);
	assert_int_equal(e.ra.nerr, 0);
	assert_true(e.ra.order_ok);
	assert_int_equal(ipc_chan_pending(e.b), 0);
	free(data);
	env_close(&e);
}

static void
chunk_round_trip(size_t max, size_t len)
{
	struct env e;
	struct ipc_asm as;
	uint8_t *data = malloc(len);
	uint32_t x = 12345;
	size_t j, csize;

	assert_non_null(data);
	for (j = 0; j < len; j++) {
		x = x * 1103515245u + 12345u;
		data[j] = (uint8_t)(x >> 16);
	}
	env_open(&e, ROLE_RUNNER, ROLE_SANDBOX, max, 1);
	ipc_asm_init(&as, 42, len);
	e.ra.as = &as;
	assert_int_equal(ipc_send_chunked(e.b, 5, 42, data, len), 0);
	assert_true(run_until(e.base, &e.ra.done));
	if (e.ra.asm_rc != 1)
		fail_msg("reassembly: %s", e.ra.asm_err);
	assert_int_equal(as.len, len);
	assert_true(memcmp(as.data, data, len) == 0);
	csize = ipc_chan_max_frame(e.b) - 48 < IPC_CHUNK_SIZE ? ipc_chan_max_frame(e.b) - 48
							       : IPC_CHUNK_SIZE;
	assert_int_equal(e.ra.nmsg, len == 0 ? 1 : (len + csize - 1) / csize);
	assert_int_equal(e.ra.nerr, 0);
	ipc_asm_free(&as);
	free(data);
	env_close(&e);
}

static void
t_chunk_round_trip_1mib(void **state)
{
	chunk_round_trip(0, 1024 * 1024 + 1);
}

static void
t_chunk_round_trip_small_frames(void **state)
{
	/* the smallest limit the config allows: chunks shrink to fit */
	chunk_round_trip(65536, 1024 * 1024 + 1);
	chunk_round_trip(IPC_MAX_FRAME_MIN, 1000);
}

static void
t_chunk_round_trip_empty(void **state)
{
	chunk_round_trip(0, 0);
}

/* ---- blocking helpers ---------------------------------------------------- */

static void
t_read_frame_timeout(void **state)
{
	struct ipc_msg m;
	struct timespec t0, t1;
	long ms;
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(ipc_read_frame(sv[0], ROLE_ENGINE, ROLE_SUPERVISOR, 0, 100, &m,
			     &last_err),
	    -1);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_string_equal(last_err, "timeout");
	ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
	assert_true(ms >= 90 && ms < 5000);
	/* a timeout half-way through a frame too */
	raw_write(sv[1], "\0\0\0\x05\x93", 5);
	assert_int_equal(ipc_read_frame(sv[0], ROLE_ENGINE, ROLE_SUPERVISOR, 0, 50, &m,
			     &last_err),
	    -1);
	assert_string_equal(last_err, "timeout");
	close(sv[0]);
	close(sv[1]);
}

static void
t_read_frame_ok(void **state)
{
	struct ipc_wbuf w;
	struct ipc_msg m;
	struct ipc_hello h;
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	wbuild(&w, IMSG_HELLO, 0, 8, HELLO_FMT, HELLO_OK, "/var/empty", "main");
	assert_int_equal(ipc_write_frame(sv[1], &w, -1), 0);
	ipc_wbuf_free(&w);
	assert_int_equal(ipc_read_frame(sv[0], ROLE_ENGINE, ROLE_SUPERVISOR, 0, 1000, &m,
			     &last_err),
	    0);
	assert_int_equal(m.type, IMSG_HELLO);
	assert_int_equal(m.fd, -1);
	assert_int_equal(ipc_dec_hello(m.body, &h), 0);
	assert_string_equal(h.chroot, "/var/empty");
	ipc_msg_free(&m);
	close(sv[0]);
	close(sv[1]);
}

static void
t_read_frame_fd(void **state)
{
	struct ipc_wbuf w;
	struct ipc_msg m;
	int sv[2], p[2];
	char buf[4];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(pipe(p), 0);
	wbuild(&w, IMSG_LISTEN_FD, 3, 1, "s", "0.0.0.0:443");
	assert_int_equal(ipc_write_frame(sv[1], &w, p[1]), 0);
	ipc_wbuf_free(&w);
	close(p[1]);
	assert_int_equal(ipc_read_frame(sv[0], ROLE_HTTPD, ROLE_SUPERVISOR, 0, -1, &m,
			     &last_err),
	    0);
	assert_true(m.fd >= 0);
	assert_int_equal(write(m.fd, "pong", 4), 4);
	assert_int_equal(read(p[0], buf, 4), 4);
	assert_memory_equal(buf, "pong", 4);
	ipc_msg_free(&m); /* closes the descriptor */
	assert_pipe_eof(p[0]);
	close(p[0]);
	close(sv[0]);
	close(sv[1]);
}

static void
t_read_frame_rejects(void **state)
{
	static const uint8_t big[] = { 0, 0, 0x10, 0x00 };
	struct ipc_wbuf w;
	struct ipc_msg m;
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	/* too large: refused from the length alone */
	raw_write(sv[1], big, sizeof(big));
	assert_int_equal(ipc_read_frame(sv[0], ROLE_ENGINE, ROLE_SUPERVISOR, 1024, 1000, &m,
			     &last_err),
	    -1);
	assert_string_equal(last_err, "frame too large");
	close(sv[0]);
	close(sv[1]);
	/* a type the peer may not send */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	wbuild(&w, IMSG_READY, 0, 2, "uu", 1u, 2u);
	assert_int_equal(ipc_write_frame(sv[1], &w, -1), 0);
	ipc_wbuf_free(&w);
	assert_int_equal(ipc_read_frame(sv[0], ROLE_ENGINE, ROLE_SUPERVISOR, 0, 1000, &m,
			     &last_err),
	    -1);
	assert_reason(last_err, "sender");
	/* the peer goes away */
	close(sv[1]);
	assert_int_equal(ipc_read_frame(sv[0], ROLE_ENGINE, ROLE_SUPERVISOR, 0, 1000, &m,
			     &last_err),
	    -1);
	assert_string_equal(last_err, "closed");
	close(sv[0]);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_mp_accepts_every_format),
		cmocka_unit_test(t_mp_empty),
		cmocka_unit_test(t_mp_huge_array32),
		cmocka_unit_test(t_mp_array16_short),
		cmocka_unit_test(t_mp_huge_map32),
		cmocka_unit_test(t_mp_map_two_bytes_per_entry),
		cmocka_unit_test(t_mp_outer_elements_counted),
		cmocka_unit_test(t_mp_huge_str32),
		cmocka_unit_test(t_mp_str_short),
		cmocka_unit_test(t_mp_huge_bin32),
		cmocka_unit_test(t_mp_bin_short),
		cmocka_unit_test(t_mp_depth),
		cmocka_unit_test(t_mp_depth_limit_unsupported),
		cmocka_unit_test(t_mp_truncated_scalars),
		cmocka_unit_test(t_mp_truncated_headers),
		cmocka_unit_test(t_mp_trailing_byte),
		cmocka_unit_test(t_mp_never_used),
		cmocka_unit_test(t_mp_ext),
		cmocka_unit_test(t_wb_prefix_and_limit),
		cmocka_unit_test(t_wb_field_count_mismatch),
		cmocka_unit_test(t_wb_int_encoding),
		cmocka_unit_test(t_fr_ok_any_key_order),
		cmocka_unit_test(t_fr_body_owned_by_message),
		cmocka_unit_test(t_fr_ok_helper_baseline),
		cmocka_unit_test(t_fr_not_a_map),
		cmocka_unit_test(t_fr_scalar_and_empty_map),
		cmocka_unit_test(t_ms_too_many_values),
		cmocka_unit_test(t_fr_missing_t),
		cmocka_unit_test(t_fr_missing_id),
		cmocka_unit_test(t_fr_missing_b),
		cmocka_unit_test(t_fr_duplicate_key),
		cmocka_unit_test(t_fr_extra_key),
		cmocka_unit_test(t_fr_non_string_key),
		cmocka_unit_test(t_fr_t_wrong_types),
		cmocka_unit_test(t_fr_t_too_big),
		cmocka_unit_test(t_fr_id_wrong_types),
		cmocka_unit_test(t_fr_b_not_array),
		cmocka_unit_test(t_fr_prescan_first),
		cmocka_unit_test(t_cur_exact_types),
		cmocka_unit_test(t_cur_int_ranges),
		cmocka_unit_test(t_cur_str_bounds),
		cmocka_unit_test(t_cur_bin_and_array_bounds),
		cmocka_unit_test(t_cur_not_an_array),
		cmocka_unit_test(t_v_hello),
		cmocka_unit_test(t_v_hello_fields),
		cmocka_unit_test(t_v_ready),
		cmocka_unit_test(t_v_shutdown),
		cmocka_unit_test(t_v_log_verbose),
		cmocka_unit_test(t_v_db_op_ok),
		cmocka_unit_test(t_v_db_op_names),
		cmocka_unit_test(t_v_db_op_args),
		cmocka_unit_test(t_v_db_result_ok),
		cmocka_unit_test(t_v_db_result_rows),
		cmocka_unit_test(t_v_db_result_limits),
		cmocka_unit_test(t_v_listen_fd),
		cmocka_unit_test(t_v_run_wake),
		cmocka_unit_test(t_v_artifact),
		cmocka_unit_test(t_v_engine),
		cmocka_unit_test(t_v_proxy_conf),
		cmocka_unit_test(t_v_proxy_conf_types),
		cmocka_unit_test(t_v_proxy_names),
		cmocka_unit_test(t_v_proxy_conf_bounds),
		cmocka_unit_test(t_v_proxy_channel),
		cmocka_unit_test(t_v_runner_proxy),
		cmocka_unit_test(t_v_mcp),
		cmocka_unit_test(t_v_httpd_conf),
		cmocka_unit_test(t_v_proxy_mcp),
		cmocka_unit_test(t_v_egress_event),
		cmocka_unit_test(t_v_model_call),
		cmocka_unit_test(t_v_model_reply),
		cmocka_unit_test(t_v_model_reply_cost_bound),
		cmocka_unit_test(t_v_hello_proxy_chroot),
		cmocka_unit_test(t_v_chunk),
		cmocka_unit_test(t_v_ctl_request),
		cmocka_unit_test(t_v_ctl_reply),
		cmocka_unit_test(t_v_sbx_hello),
		cmocka_unit_test(t_v_sbx_requests),
		cmocka_unit_test(t_v_sbx_exec),
		cmocka_unit_test(t_v_sbx_replies),
		cmocka_unit_test(t_check_sbx_roles),
		cmocka_unit_test(t_catalog_complete),
		cmocka_unit_test(t_metrics),
		cmocka_unit_test(t_check_ok),
		cmocka_unit_test(t_check_unknown_type),
		cmocka_unit_test(t_check_wrong_sender),
		cmocka_unit_test(t_check_wrong_receiver),
		cmocka_unit_test(t_check_fd_missing),
		cmocka_unit_test(t_check_fd_unexpected),
		cmocka_unit_test(t_check_bad_body),
		cmocka_unit_test(t_rt_hello_ready_shutdown_verbose),
		cmocka_unit_test(t_rt_db_op_result),
		cmocka_unit_test(t_rt_listen_chunk_ctl),
		cmocka_unit_test(t_asm_in_order),
		cmocka_unit_test(t_asm_empty_stream),
		cmocka_unit_test(t_asm_out_of_order),
		cmocka_unit_test(t_asm_over_cap),
		cmocka_unit_test(t_asm_after_last),
		cmocka_unit_test(t_asm_wrong_stream_and_body),
		cmocka_unit_test(t_chan_in_order_with_ids),
		cmocka_unit_test(t_chan_drain),
		cmocka_unit_test(t_chan_wrong_sender),
		cmocka_unit_test(t_chan_frame_too_large),
		cmocka_unit_test(t_chan_max_frame_accepted),
		cmocka_unit_test(t_chan_garbage),
		cmocka_unit_test(t_chan_empty_frame),
		cmocka_unit_test(t_chan_peer_close),
		cmocka_unit_test(t_chan_write_to_closed_peer),
		cmocka_unit_test(t_chan_version_mismatch),
		cmocka_unit_test(t_chan_pass_fd),
		cmocka_unit_test(t_chan_pass_fds_back_to_back),
		cmocka_unit_test(t_chan_send_refusals),
		cmocka_unit_test(t_chan_send_over_limit),
		cmocka_unit_test(t_chan_missing_fd),
		cmocka_unit_test(t_chan_fd_left_over),
		cmocka_unit_test(t_chan_too_many_fds),
		cmocka_unit_test(t_chan_free_in_msg_callback),
		cmocka_unit_test(t_chan_free_in_err_callback),
		cmocka_unit_test(t_chan_burst),
		cmocka_unit_test(t_chunk_round_trip_1mib),
		cmocka_unit_test(t_chunk_round_trip_small_frames),
		cmocka_unit_test(t_chunk_round_trip_empty),
		cmocka_unit_test(t_read_frame_timeout),
		cmocka_unit_test(t_read_frame_ok),
		cmocka_unit_test(t_read_frame_fd),
		cmocka_unit_test(t_read_frame_rejects),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
