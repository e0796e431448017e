/*
 * ipc — framing, msgpack codecs, channels and fd passing between Agrippa's
 * processes (DESIGN.md section 2).
 *
 * Frame on the wire: 4-byte big-endian payload length, then one msgpack map
 * with exactly three keys: "t" (uint32 message type), "id" (uint64 request
 * id; replies echo it, 0 for unsolicited messages) and "b" (the body, always
 * a msgpack array decoded positionally with the ipc_get_* cursor).
 */
#ifndef AGRIPPA_IPC_H
#define AGRIPPA_IPC_H

#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

struct event_base;

/* Bumped whenever the message catalog (ipc_msg.h) changes. */
#define IPC_PROTO_VERSION 16

#define IPC_MAX_FRAME_DEFAULT (16u * 1024 * 1024)
#define IPC_MAX_FRAME_MIN 64u
#define IPC_CHUNK_SIZE (64u * 1024)  /* payload bytes per chunk frame */
#define IPC_MAX_DEPTH 16               /* msgpack nesting limit */
#define IPC_MAX_VALUES (1u << 21)      /* msgpack values in one frame (~48 MiB decoded) */
#define IPC_MAX_FDS_QUEUED 16          /* received but unclaimed fds */

enum ipc_role {
	ROLE_SUPERVISOR = 0,
	ROLE_ENGINE,
	ROLE_HTTPD,
	ROLE_PROXY,
	ROLE_RUNNER,
	ROLE_SANDBOX,
	ROLE_GITHELPER,
	ROLE_CTL,
	ROLE_EGRESS,
	ROLE__COUNT
};
#define ROLE_BIT(r) (1u << (r))

const char *ipc_role_name(enum ipc_role role);
/* Returns 0 and sets *out for a known name, -1 otherwise. */
int ipc_role_from_name(const char *name, enum ipc_role *out);

/* ---- encoding -------------------------------------------------------- */

/*
 * An outgoing frame under construction.  ipc_wbuf_begin() writes the length
 * placeholder and the envelope, leaving the body array of nfields open;
 * ipc_put_*() append body values; ipc_wbuf_finish() patches the length and
 * returns 0, or -1 if the frame exceeds max_frame.  The caller owns w and
 * releases it with ipc_wbuf_free().  w->sb.data/w->sb.size is the whole
 * frame, length prefix included.  ipc_wbuf_finish() also scans the payload,
 * so a body with more or fewer values than nfields is refused there.
 */
struct ipc_wbuf {
	msgpack_sbuffer sb;
	msgpack_packer pk;
};
void ipc_wbuf_begin(struct ipc_wbuf *w, uint32_t type, uint64_t id, uint32_t nfields);
int ipc_wbuf_finish(struct ipc_wbuf *w, size_t max_frame);
void ipc_wbuf_free(struct ipc_wbuf *w);
void ipc_put_nil(struct ipc_wbuf *w);
void ipc_put_bool(struct ipc_wbuf *w, int v);
void ipc_put_u64(struct ipc_wbuf *w, uint64_t v);
void ipc_put_i64(struct ipc_wbuf *w, int64_t v);
void ipc_put_str(struct ipc_wbuf *w, const char *s);          /* NUL-terminated */
void ipc_put_strn(struct ipc_wbuf *w, const char *s, size_t len);
void ipc_put_bin(struct ipc_wbuf *w, const void *p, size_t len);
void ipc_put_array(struct ipc_wbuf *w, uint32_t n);           /* then n values */
void ipc_put_map(struct ipc_wbuf *w, uint32_t n);             /* then n key/value pairs */

/* ---- decoding -------------------------------------------------------- */

/*
 * A decoded frame.  body points into storage owned by the message; fd is a
 * descriptor that arrived with it (or -1), owned by whoever holds the
 * message: ipc_msg_free() closes it unless the handler took it (set to -1).
 */
struct ipc_msg {
	uint32_t type;
	uint64_t id;
	const msgpack_object *body; /* always MSGPACK_OBJECT_ARRAY */
	int fd;
	msgpack_unpacked up;        /* private */
};

/*
 * Check that buf[0..len) is exactly one well-formed msgpack value: every
 * declared string/bin/container length fits in what remains (a container of
 * n elements needs at least n bytes), nesting is at most max_depth, there
 * are at most IPC_MAX_VALUES values, and no byte follows.  Runs before any
 * allocation.  Returns 0 or -1 with *err set to a static description.
 */
int ipc_msgpack_check(const uint8_t *buf, size_t len, unsigned max_depth, const char **err);

/*
 * Decode one frame payload (the bytes after the 4-byte length).  Checks the
 * payload with ipc_msgpack_check, then the envelope: a map of exactly the keys
 * "t", "id", "b" (each once), t an unsigned integer <= UINT32_MAX, id an
 * unsigned integer, b an array.  Returns 0 and fills *m (fd = -1), or -1 with
 * *err set; on failure nothing needs freeing.
 */
int ipc_frame_decode(const uint8_t *buf, size_t len, struct ipc_msg *m, const char **err);
void ipc_msg_free(struct ipc_msg *m);

/*
 * Positional cursor over a body array.  Every getter checks the type (and a
 * length bound where it has one), advances on success and returns 0, or
 * returns -1 leaving the cursor where it was.  ipc_end() returns -1 when
 * fields remain (trailing data is an error).
 */
struct ipc_cur {
	const msgpack_object *o;
	uint32_t n, i;
};
void ipc_cur_init(struct ipc_cur *c, const msgpack_object *array);
int ipc_get_nil(struct ipc_cur *c);
int ipc_is_nil(const struct ipc_cur *c); /* next value is nil (does not advance) */
int ipc_get_bool(struct ipc_cur *c, int *v);
int ipc_get_u64(struct ipc_cur *c, uint64_t *v);
int ipc_get_u32(struct ipc_cur *c, uint32_t *v);
int ipc_get_i64(struct ipc_cur *c, int64_t *v);
/* A string of at most maxlen bytes; *s is NOT NUL-terminated. */
int ipc_get_str(struct ipc_cur *c, const char **s, size_t *len, size_t maxlen);
/* Copy a string into dst (size dstsz, NUL-terminated); rejects embedded NUL
 * and strings that do not fit. */
int ipc_get_cstr(struct ipc_cur *c, char *dst, size_t dstsz);
int ipc_get_bin(struct ipc_cur *c, const uint8_t **p, size_t *len, size_t maxlen);
/* Enter a nested array of at most maxn elements. */
int ipc_get_array(struct ipc_cur *c, struct ipc_cur *sub, uint32_t maxn);
/* Any value, unchecked (the caller inspects it). */
int ipc_get_any(struct ipc_cur *c, const msgpack_object **o);
int ipc_end(const struct ipc_cur *c);

/* ---- channels ---------------------------------------------------------- */

struct ipc_chan;

/*
 * Called for every frame that passed the catalog checks (known type, sender
 * and receiver roles allowed, fd present exactly when the type carries one,
 * body validator accepted it).  The callee may keep m->fd by setting it to -1;
 * the channel frees m after the callback returns.
 */
typedef void (*ipc_msg_cb)(struct ipc_chan *ch, struct ipc_msg *m, void *arg);
/*
 * Called once when the channel fails: peer closed (reason "closed"), read or
 * write error, oversized frame, malformed frame, a type the peer may not send,
 * a failed validation, or a protocol version mismatch.  After it returns the
 * channel is disabled; the owner calls ipc_chan_free() (which may be done from
 * inside this callback).
 */
typedef void (*ipc_err_cb)(struct ipc_chan *ch, const char *reason, void *arg);

/*
 * Wrap a connected SOCK_STREAM Unix socket (made non-blocking here) in a
 * libevent-driven channel.  self/peer are the roles at each end; max_frame
 * bounds frames in both directions (IPC_MAX_FRAME_DEFAULT if 0; values below
 * IPC_MAX_FRAME_MIN or above UINT32_MAX fail with EINVAL).  The channel owns
 * fd and closes it in ipc_chan_free(); on failure (NULL) fd stays the caller's.
 */
struct ipc_chan *ipc_chan_new(struct event_base *base, int fd, enum ipc_role self,
    enum ipc_role peer, size_t max_frame, ipc_msg_cb on_msg, ipc_err_cb on_err, void *arg);
void ipc_chan_free(struct ipc_chan *ch);
enum ipc_role ipc_chan_peer(const struct ipc_chan *ch);
int ipc_chan_fd(const struct ipc_chan *ch);
/* The channel's frame limit (payload bytes), after defaulting. */
size_t ipc_chan_max_frame(const struct ipc_chan *ch);

/*
 * Queue a finished frame (w after ipc_wbuf_finish) for sending; fd >= 0 is
 * sent with it by SCM_RIGHTS (the caller keeps its own copy; close it when
 * you like after this call returns, the channel dups it).  Returns 0, or -1
 * if the frame's type may not be sent by self to peer, carries an fd when the
 * type does not (or vice versa), its body fails the type's validator (the
 * peer would close the channel for it), it exceeds max_frame, or the channel
 * has failed.  The frame is copied: w stays the caller's.
 */
int ipc_chan_send(struct ipc_chan *ch, struct ipc_wbuf *w, int fd);

/* Bytes queued and not yet written (for tests and back-pressure). */
size_t ipc_chan_pending(const struct ipc_chan *ch);

/*
 * Deliver now, without waiting, every frame the peer has already written,
 * as the read event would: for an owner that learned the peer is gone (its
 * exit reaped) before the channel was read, so that what it said last is
 * not lost.  A peer that has exited ends it with its "closed".  The
 * callbacks may free the channel, as from the read event.  Does nothing
 * from inside one of the channel's own callbacks or once it has failed.
 */
void ipc_chan_drain(struct ipc_chan *ch);

/* ---- blocking helpers (agrippactl, tests, child start-up) -------------- */

/*
 * Write a whole finished frame (and fd, if >= 0) to a blocking socket.
 * Returns 0 or -1 (errno set).
 */
int ipc_write_frame(int sock, const struct ipc_wbuf *w, int fd);
/*
 * Read one whole frame from a blocking socket, decode it into *m (with an fd
 * if one arrived), and check it against the catalog as a message from peer
 * to self.  timeout_ms < 0 waits forever.  Returns 0, or -1 with *err set.
 */
int ipc_read_frame(int sock, enum ipc_role self, enum ipc_role peer, size_t max_frame,
    int timeout_ms, struct ipc_msg *m, const char **err);

/* ---- chunking ---------------------------------------------------------- */

/*
 * Large payloads travel as IMSG_CHUNK frames: body [stream u64, seq u32,
 * last bool, data bin(<= IPC_CHUNK_SIZE)].  ipc_send_chunked() splits
 * data into frames on ch (an empty payload is one empty last chunk), each
 * carrying at most IPC_CHUNK_SIZE bytes and less when the channel's max_frame
 * requires it.  Returns 0 or -1; after -1 part of the stream may already be
 * queued, so the stream is unusable (the channel has usually failed).
 */
int ipc_send_chunked(struct ipc_chan *ch, uint64_t id, uint64_t stream, const void *data,
    size_t len);

/*
 * Reassembly of one stream with a hard cap on its total size.  Feed every
 * IMSG_CHUNK body of that stream in order; returns 1 when the last chunk
 * arrived (data/len complete, owned by the assembler until free), 0 when
 * more is expected, -1 on error (malformed body, wrong stream, seq out of
 * order, over cap, chunk after last) with *err set.  After an error every
 * later feed fails too.  A complete empty stream has len 0 and data non-NULL.
 */
struct ipc_asm {
	uint64_t stream;
	uint32_t next_seq;
	int done;
	size_t cap, len, alloc;
	uint8_t *data;
};
void ipc_asm_init(struct ipc_asm *a, uint64_t stream, size_t cap);
int ipc_asm_feed(struct ipc_asm *a, const msgpack_object *body, const char **err);
void ipc_asm_free(struct ipc_asm *a);

#endif
