/*
 * Frames: building outgoing ones (ipc_wbuf_*, ipc_put_*), the allocation-free
 * msgpack pre-scan, and decoding of the envelope { "t", "id", "b" }.
 */
#include "ipc.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"

/* ---- encoding -------------------------------------------------------- */

/*
 * sbuffer write callback.  The put functions return nothing, so running out
 * of memory while building a frame is fatal for the process, like every
 * other allocation failure on the IPC path.
 */
static int
ipc_wbuf_write(void *data, const char *buf, size_t len)
{
	if (msgpack_sbuffer_write(data, buf, len) != 0)
		fatalx("ipc: out of memory building a frame");
	return 0;
}

/*
 * A value that cannot be encoded (a string or bin longer than msgpack's
 * 32-bit lengths) is replaced by 0xc1, the byte msgpack never uses, so that
 * ipc_wbuf_finish() rejects the frame instead of sending a corrupt one.
 */
static void
ipc_wbuf_poison(struct ipc_wbuf *w)
{
	static const char never_used = (char)0xc1;

	ipc_wbuf_write(&w->sb, &never_used, 1);
}

/* w is initialised here; the caller releases it with ipc_wbuf_free(). */
void
ipc_wbuf_begin(struct ipc_wbuf *w, uint32_t type, uint64_t id, uint32_t nfields)
{
	static const char lenplaceholder[4];

	msgpack_sbuffer_init(&w->sb);
	msgpack_packer_init(&w->pk, &w->sb, ipc_wbuf_write);
	ipc_wbuf_write(&w->sb, lenplaceholder, sizeof(lenplaceholder));
	msgpack_pack_map(&w->pk, 3);
	ipc_put_strn(w, "t", 1);
	ipc_put_u64(w, type);
	ipc_put_strn(w, "id", 2);
	ipc_put_u64(w, id);
	ipc_put_strn(w, "b", 1);
	msgpack_pack_array(&w->pk, nfields);
}

/*
 * Patch the length prefix.  The payload is scanned with ipc_msgpack_check so
 * that a body with more or fewer values than ipc_wbuf_begin() announced, or a
 * poisoned value, never leaves this process.  max_frame 0 means
 * IPC_MAX_FRAME_DEFAULT.
 */
int
ipc_wbuf_finish(struct ipc_wbuf *w, size_t max_frame)
{
	const char *err;
	size_t len;
	uint8_t *p;

	if (max_frame == 0)
		max_frame = IPC_MAX_FRAME_DEFAULT;
	if (w->sb.data == NULL || w->sb.size < 4)
		return -1;
	len = w->sb.size - 4;
	if (len > max_frame || len > UINT32_MAX)
		return -1;
	p = (uint8_t *)w->sb.data;
	if (ipc_msgpack_check(p + 4, len, IPC_MAX_DEPTH, &err) == -1) {
		log_warnx("ipc: refusing to finish a malformed frame: %s", err);
		return -1;
	}
	p[0] = (uint8_t)(len >> 24);
	p[1] = (uint8_t)(len >> 16);
	p[2] = (uint8_t)(len >> 8);
	p[3] = (uint8_t)len;
	return 0;
}

void
ipc_wbuf_free(struct ipc_wbuf *w)
{
	/* a frame may carry a secret (a token being sealed, a new API token) */
	if (w->sb.data != NULL)
		explicit_bzero(w->sb.data, w->sb.alloc);
	msgpack_sbuffer_destroy(&w->sb);
	w->sb.data = NULL;
	w->sb.size = w->sb.alloc = 0;
}

void
ipc_put_nil(struct ipc_wbuf *w)
{
	msgpack_pack_nil(&w->pk);
}

void
ipc_put_bool(struct ipc_wbuf *w, int v)
{
	if (v)
		msgpack_pack_true(&w->pk);
	else
		msgpack_pack_false(&w->pk);
}

void
ipc_put_u64(struct ipc_wbuf *w, uint64_t v)
{
	msgpack_pack_uint64(&w->pk, v);
}

/* Non-negative values are packed as unsigned, as msgpack prescribes. */
void
ipc_put_i64(struct ipc_wbuf *w, int64_t v)
{
	msgpack_pack_int64(&w->pk, v);
}

void
ipc_put_str(struct ipc_wbuf *w, const char *s)
{
	ipc_put_strn(w, s, strlen(s));
}

void
ipc_put_strn(struct ipc_wbuf *w, const char *s, size_t len)
{
	if (len > UINT32_MAX) {
		ipc_wbuf_poison(w);
		return;
	}
	msgpack_pack_str(&w->pk, len);
	if (len > 0)
		msgpack_pack_str_body(&w->pk, s, len);
}

void
ipc_put_bin(struct ipc_wbuf *w, const void *p, size_t len)
{
	if (len > UINT32_MAX) {
		ipc_wbuf_poison(w);
		return;
	}
	msgpack_pack_bin(&w->pk, len);
	if (len > 0)
		msgpack_pack_bin_body(&w->pk, p, len);
}

void
ipc_put_array(struct ipc_wbuf *w, uint32_t n)
{
	msgpack_pack_array(&w->pk, n);
}

void
ipc_put_map(struct ipc_wbuf *w, uint32_t n)
{
	msgpack_pack_map(&w->pk, n);
}

/* ---- pre-scan -------------------------------------------------------- */

/*
 * The scan keeps, per open container, how many values it still owes, and in
 * `need` the total of values owed by all of them.  Every value takes at least
 * one byte, so a container may only open when need plus its element count
 * fits in the bytes left: the sum of all element counts msgpack_unpack will
 * allocate objects for is then bounded by the payload size.  The invariant
 * need <= left holds between values, which keeps every subtraction below
 * from wrapping.
 */
#define SCAN_STACK_MAX 64

struct scan {
	const uint8_t *p;
	size_t left;
	uint64_t need;
	unsigned depth;
	uint64_t owed[SCAN_STACK_MAX + 1];
};

enum scan_kind { K_SCALAR, K_STR, K_BIN, K_ARRAY, K_MAP, K_BAD, K_EXT };

/* What a format byte starts: kind, header size, and the width of its length
 * field (0 when the length is in the byte itself or the value is fixed). */
struct scan_fmt {
	enum scan_kind kind;
	uint8_t hdr, lenw;
	uint32_t inl; /* length or count stored in the format byte */
};

static struct scan_fmt
scan_format(uint8_t b)
{
	static const struct scan_fmt tab[32] = {
		[0x00] = { K_SCALAR, 1, 0, 0 }, /* 0xc0 nil */
		[0x01] = { K_BAD, 1, 0, 0 },    /* 0xc1 never used */
		[0x02] = { K_SCALAR, 1, 0, 0 }, /* 0xc2 false */
		[0x03] = { K_SCALAR, 1, 0, 0 }, /* 0xc3 true */
		[0x04] = { K_BIN, 2, 1, 0 },    /* 0xc4 bin8 */
		[0x05] = { K_BIN, 3, 2, 0 },
		[0x06] = { K_BIN, 5, 4, 0 },
		[0x07] = { K_EXT, 1, 0, 0 },    /* 0xc7..0xc9 ext8/16/32 */
		[0x08] = { K_EXT, 1, 0, 0 },
		[0x09] = { K_EXT, 1, 0, 0 },
		[0x0a] = { K_SCALAR, 5, 0, 0 }, /* 0xca float32 */
		[0x0b] = { K_SCALAR, 9, 0, 0 }, /* 0xcb float64 */
		[0x0c] = { K_SCALAR, 2, 0, 0 }, /* 0xcc..0xcf uint8..64 */
		[0x0d] = { K_SCALAR, 3, 0, 0 },
		[0x0e] = { K_SCALAR, 5, 0, 0 },
		[0x0f] = { K_SCALAR, 9, 0, 0 },
		[0x10] = { K_SCALAR, 2, 0, 0 }, /* 0xd0..0xd3 int8..64 */
		[0x11] = { K_SCALAR, 3, 0, 0 },
		[0x12] = { K_SCALAR, 5, 0, 0 },
		[0x13] = { K_SCALAR, 9, 0, 0 },
		[0x14] = { K_EXT, 1, 0, 0 },    /* 0xd4..0xd8 fixext */
		[0x15] = { K_EXT, 1, 0, 0 },
		[0x16] = { K_EXT, 1, 0, 0 },
		[0x17] = { K_EXT, 1, 0, 0 },
		[0x18] = { K_EXT, 1, 0, 0 },
		[0x19] = { K_STR, 2, 1, 0 },    /* 0xd9 str8 */
		[0x1a] = { K_STR, 3, 2, 0 },
		[0x1b] = { K_STR, 5, 4, 0 },
		[0x1c] = { K_ARRAY, 3, 2, 0 },  /* 0xdc array16 */
		[0x1d] = { K_ARRAY, 5, 4, 0 },
		[0x1e] = { K_MAP, 3, 2, 0 },    /* 0xde map16 */
		[0x1f] = { K_MAP, 5, 4, 0 },
	};
	struct scan_fmt f = { K_SCALAR, 1, 0, 0 };

	if (b <= 0x7f || b >= 0xe0) /* positive / negative fixint */
		return f;
	if (b <= 0x8f) {
		f.kind = K_MAP;
		f.inl = b & 0x0f;
	} else if (b <= 0x9f) {
		f.kind = K_ARRAY;
		f.inl = b & 0x0f;
	} else if (b <= 0xbf) {
		f.kind = K_STR;
		f.inl = b & 0x1f;
	} else
		f = tab[b - 0xc0];
	return f;
}

static uint32_t
scan_be(const uint8_t *p, unsigned w)
{
	uint32_t v = 0;

	while (w-- > 0)
		v = (v << 8) | *p++;
	return v;
}

static int
scan_open(struct scan *s, enum scan_kind kind, uint64_t n, unsigned max_depth, const char **err)
{
	if (kind == K_MAP)
		n *= 2;
	if (n > s->left - s->need) {
		*err = kind == K_MAP ? "msgpack: map length exceeds the remaining bytes"
				     : "msgpack: array length exceeds the remaining bytes";
		return -1;
	}
	if (s->depth >= max_depth) {
		*err = "msgpack: nesting too deep";
		return -1;
	}
	s->owed[++s->depth] = n;
	s->need += n;
	return 0;
}

/* Consume one value's header (and a scalar's payload) at s->p. */
static int
scan_value(struct scan *s, unsigned max_depth, const char **err)
{
	struct scan_fmt f = scan_format(*s->p);
	uint64_t n = f.inl;

	if (f.kind == K_BAD) {
		*err = "msgpack: format byte 0xc1 is never used";
		return -1;
	}
	if (f.kind == K_EXT) {
		*err = "msgpack: ext types are not allowed";
		return -1;
	}
	if (f.hdr > s->left || s->need > s->left - f.hdr) {
		*err = "msgpack: truncated value";
		return -1;
	}
	if (f.lenw > 0)
		n = scan_be(s->p + 1, f.lenw);
	s->p += f.hdr;
	s->left -= f.hdr;
	if (f.kind == K_ARRAY || f.kind == K_MAP)
		return scan_open(s, f.kind, n, max_depth, err);
	if (f.kind == K_STR || f.kind == K_BIN) {
		if (n > s->left - s->need) {
			*err = f.kind == K_STR ? "msgpack: str length exceeds the remaining bytes"
					       : "msgpack: bin length exceeds the remaining bytes";
			return -1;
		}
		s->p += n;
		s->left -= (size_t)n;
	}
	return 0;
}

int
ipc_msgpack_check(const uint8_t *buf, size_t len, unsigned max_depth, const char **err)
{
	struct scan s;
	size_t values = 0;

	if (max_depth > SCAN_STACK_MAX) {
		*err = "msgpack: depth limit above what the scanner supports";
		return -1;
	}
	if (len == 0) {
		*err = "msgpack: empty input";
		return -1;
	}
	s.p = buf;
	s.left = len;
	s.depth = 0;
	s.owed[0] = 1; /* the one top-level value */
	s.need = 1;
	while (s.need > 0) {
		while (s.owed[s.depth] == 0)
			s.depth--;
		s.owed[s.depth]--;
		s.need--;
		/* msgpack-c spends ~24 bytes per decoded value: bound the count so a
		 * frame of one-byte values cannot make the receiver allocate 24x
		 * its size. */
		if (++values > IPC_MAX_VALUES) {
			*err = "msgpack: too many values in one frame";
			return -1;
		}
		if (scan_value(&s, max_depth, err) == -1)
			return -1;
	}
	if (s.left != 0) {
		*err = "msgpack: trailing bytes after the value";
		return -1;
	}
	return 0;
}

/* ---- envelope -------------------------------------------------------- */

enum { KEY_T, KEY_ID, KEY_B, KEY__COUNT };

static int
frame_key(const msgpack_object *k, const char **err)
{
	static const char *names[KEY__COUNT] = { "t", "id", "b" };
	int i;

	if (k->type != MSGPACK_OBJECT_STR) {
		*err = "frame: a key is not a string";
		return -1;
	}
	for (i = 0; i < KEY__COUNT; i++) {
		if (k->via.str.size == strlen(names[i]) &&
		    memcmp(k->via.str.ptr, names[i], k->via.str.size) == 0)
			return i;
	}
	*err = "frame: unexpected key (only \"t\", \"id\" and \"b\" are allowed)";
	return -1;
}

/* Sets vals[KEY_*] to each key's value; every key exactly once. */
static int
frame_keys(const msgpack_object *root, const msgpack_object *vals[KEY__COUNT],
    const char **err)
{
	static const char *dup[KEY__COUNT] = { "frame: duplicate key \"t\"",
		"frame: duplicate key \"id\"", "frame: duplicate key \"b\"" };
	static const char *missing[KEY__COUNT] = { "frame: missing key \"t\"",
		"frame: missing key \"id\"", "frame: missing key \"b\"" };
	uint32_t i;
	int k;

	if (root->type != MSGPACK_OBJECT_MAP) {
		*err = "frame: not a map";
		return -1;
	}
	for (k = 0; k < KEY__COUNT; k++)
		vals[k] = NULL;
	for (i = 0; i < root->via.map.size; i++) {
		if ((k = frame_key(&root->via.map.ptr[i].key, err)) == -1)
			return -1;
		if (vals[k] != NULL) {
			*err = dup[k];
			return -1;
		}
		vals[k] = &root->via.map.ptr[i].val;
	}
	for (k = 0; k < KEY__COUNT; k++) {
		if (vals[k] == NULL) {
			*err = missing[k];
			return -1;
		}
	}
	return 0;
}

static int
frame_envelope(const msgpack_object *root, struct ipc_msg *m, const char **err)
{
	const msgpack_object *v[KEY__COUNT];

	if (frame_keys(root, v, err) == -1)
		return -1;
	if (v[KEY_T]->type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
		*err = "frame: key \"t\" is not an unsigned integer";
		return -1;
	}
	if (v[KEY_T]->via.u64 > UINT32_MAX) {
		*err = "frame: key \"t\" is above 2^32-1";
		return -1;
	}
	if (v[KEY_ID]->type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
		*err = "frame: key \"id\" is not an unsigned integer";
		return -1;
	}
	if (v[KEY_B]->type != MSGPACK_OBJECT_ARRAY) {
		*err = "frame: key \"b\" is not an array";
		return -1;
	}
	m->type = (uint32_t)v[KEY_T]->via.u64;
	m->id = v[KEY_ID]->via.u64;
	m->body = v[KEY_B];
	return 0;
}

/*
 * msgpack_unpack_next() leaves strings and bins pointing into the input, so
 * the payload is first copied into memory the message owns: the zone frees
 * the copy through a finalizer when the message is freed.  msgpack-c only
 * creates the zone when a value needs one (not for a scalar or an empty map),
 * so it may have to be created here.
 */
/* The zone's finalizer for a frame's copy: it may hold a secret. */
static void
frame_copy_free(void *p)
{
	explicit_bzero(p, malloc_usable_size(p));
	free(p);
}

static int
frame_unpack(const uint8_t *buf, size_t len, msgpack_unpacked *up, const char **err)
{
	char *copy;
	size_t off = 0;

	msgpack_unpacked_init(up);
	if ((copy = malloc(len)) == NULL) {
		*err = "frame: out of memory";
		return -1;
	}
	memcpy(copy, buf, len);
	if (msgpack_unpack_next(up, copy, len, &off) != MSGPACK_UNPACK_SUCCESS || off != len) {
		msgpack_unpacked_destroy(up);
		frame_copy_free(copy);
		*err = "frame: msgpack decoding failed";
		return -1;
	}
	if (up->zone == NULL)
		up->zone = msgpack_zone_new(256);
	if (up->zone == NULL || !msgpack_zone_push_finalizer(up->zone, frame_copy_free, copy)) {
		msgpack_unpacked_destroy(up);
		frame_copy_free(copy);
		*err = "frame: out of memory";
		return -1;
	}
	return 0;
}

/* On success the caller owns *m and releases it with ipc_msg_free(). */
int
ipc_frame_decode(const uint8_t *buf, size_t len, struct ipc_msg *m, const char **err)
{
	memset(m, 0, sizeof(*m));
	m->fd = -1;
	if (ipc_msgpack_check(buf, len, IPC_MAX_DEPTH, err) == -1)
		return -1;
	if (frame_unpack(buf, len, &m->up, err) == -1)
		return -1;
	if (frame_envelope(&m->up.data, m, err) == -1) {
		msgpack_unpacked_destroy(&m->up);
		m->body = NULL;
		return -1;
	}
	return 0;
}

/* Safe to call twice, and on a message whose decode failed. */
void
ipc_msg_free(struct ipc_msg *m)
{
	if (m->fd >= 0)
		close(m->fd);
	m->fd = -1;
	msgpack_unpacked_destroy(&m->up);
	m->body = NULL;
}
