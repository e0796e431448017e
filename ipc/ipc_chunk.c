/*
 * Large payloads as a stream of IMSG_CHUNK frames, and their reassembly
 * under a hard size cap (DESIGN.md 2: "chunked, never one unbounded frame").
 */
#include "ipc_msg.h"

#include <stdlib.h>
#include <string.h>

/*
 * Upper bound of a CHUNK frame's payload besides the data: map header, the
 * three keys, t, a 64-bit id, the body array header, a 64-bit stream, a
 * 32-bit seq, the bool and a bin32 header come to 39 bytes.
 */
#define CHUNK_OVERHEAD 48

/* Data bytes per chunk on ch: IPC_CHUNK_SIZE unless max_frame is smaller
 * (max_frame >= IPC_MAX_FRAME_MIN leaves at least 16). */
static size_t
chunk_size(const struct ipc_chan *ch)
{
	size_t room = ipc_chan_max_frame(ch) - CHUNK_OVERHEAD;

	return room < IPC_CHUNK_SIZE ? room : IPC_CHUNK_SIZE;
}

static int
chunk_send(struct ipc_chan *ch, uint64_t id, uint64_t stream, uint32_t seq, int last,
    const void *p, size_t n)
{
	struct ipc_wbuf w;
	int rc = -1;

	ipc_wbuf_begin(&w, IMSG_CHUNK, id, 4);
	ipc_put_u64(&w, stream);
	ipc_put_u64(&w, seq);
	ipc_put_bool(&w, last);
	ipc_put_bin(&w, p, n);
	if (ipc_wbuf_finish(&w, ipc_chan_max_frame(ch)) == 0)
		rc = ipc_chan_send(ch, &w, -1);
	ipc_wbuf_free(&w);
	return rc;
}

/* Queues copies of data; the caller keeps ownership of it. */
int
ipc_send_chunked(struct ipc_chan *ch, uint64_t id, uint64_t stream, const void *data,
    size_t len)
{
	const uint8_t *p = data;
	size_t csize = chunk_size(ch);
	uint32_t seq;

	if (len / csize > UINT32_MAX)
		return -1;
	for (seq = 0;; seq++) {
		size_t n = len < csize ? len : csize;
		int last = n == len;

		if (chunk_send(ch, id, stream, seq, last, p, n) == -1)
			return -1;
		if (last)
			return 0;
		p += n;
		len -= n;
	}
}

void
ipc_asm_init(struct ipc_asm *a, uint64_t stream, size_t cap)
{
	memset(a, 0, sizeof(*a));
	a->stream = stream;
	a->cap = cap;
}

static int
asm_check(const struct ipc_asm *a, const msgpack_object *body, struct ipc_chunk *ck,
    const char **err)
{
	if (ipc_dec_chunk(body, ck) == -1) {
		*err = "chunk: malformed body";
		return -1;
	}
	if (ck->stream != a->stream) {
		*err = "chunk: wrong stream";
		return -1;
	}
	if (ck->seq != a->next_seq) {
		*err = "chunk: sequence number out of order";
		return -1;
	}
	if (!ck->last && ck->seq == UINT32_MAX) {
		*err = "chunk: sequence number overflow";
		return -1;
	}
	if (ck->len > a->cap - a->len) {
		*err = "chunk: stream exceeds its size cap";
		return -1;
	}
	return 0;
}

/* Grow a->data to hold need bytes (need <= cap, checked by the caller). */
static int
asm_reserve(struct ipc_asm *a, size_t need)
{
	size_t nalloc;
	uint8_t *p;

	if (need <= a->alloc && a->data != NULL)
		return 0;
	nalloc = a->alloc <= SIZE_MAX / 2 ? a->alloc * 2 : SIZE_MAX;
	if (nalloc < need)
		nalloc = need;
	if (nalloc > a->cap)
		nalloc = a->cap;
	if (nalloc == 0)
		nalloc = 1; /* a complete empty stream still has non-NULL data */
	if ((p = realloc(a->data, nalloc)) == NULL)
		return -1;
	a->data = p;
	a->alloc = nalloc;
	return 0;
}

/* The assembled data stays owned by a until ipc_asm_free(). */
int
ipc_asm_feed(struct ipc_asm *a, const msgpack_object *body, const char **err)
{
	struct ipc_chunk ck;

	if (a->done != 0) {
		*err = a->done > 0 ? "chunk: after the last chunk" : "chunk: stream already failed";
		return -1;
	}
	if (asm_check(a, body, &ck, err) == -1) {
		a->done = -1;
		return -1;
	}
	if ((ck.len > 0 || ck.last) && asm_reserve(a, a->len + ck.len) == -1) {
		*err = "chunk: out of memory";
		a->done = -1;
		return -1;
	}
	if (ck.len > 0)
		memcpy(a->data + a->len, ck.data, ck.len);
	a->len += ck.len;
	a->next_seq++;
	if (!ck.last)
		return 0;
	a->done = 1;
	return 1;
}

void
ipc_asm_free(struct ipc_asm *a)
{
	free(a->data);
	a->data = NULL;
	a->len = a->alloc = 0;
}
