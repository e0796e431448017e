/*
 * The redacting line relay of a stdio MCP server's output (sandbox/mcphost.c
 * does the reading and writing; this is the part that decides what goes
 * out, as plain functions over buffers, for tests/unit/test_relay.c).
 *
 * Bytes come in as the server writes them and go out for the channel with
 * every secret (the server's credential values) replaced by '*' byte for
 * byte.  The relay's memory is its window, cap bytes, and as much again
 * for a redacted copy, whatever the lines' length:
 *   - complete lines (every byte up to the window's last '\n') go out at
 *     once, redacted as a whole; a secret holds no '\n', so none can span
 *     two lines;
 *   - an unfinished line waits for its end while it fits the window; one
 *     that fills it goes out but for its last hold bytes (the longest
 *     secret less one), which stay for the next round, so that a value the
 *     server wrote across two reads is still found whole.  A secret found
 *     across that boundary masks its first bytes on the way out and its
 *     last ones as the next window's carry;
 *   - at the end of the server's output the rest goes, redacted;
 *   - a line longer than line_max is cut: exactly line_max + 1 of its
 *     bytes go out (a client with the same cap then says the line is too
 *     long), the last hold of them masked whatever they are, since what
 *     follows them is never looked at, and nothing more: relay_cut says so.
 * Secrets are searched in the bytes as the server wrote them, every
 * occurrence, overlapping ones too, and masked in the copy that goes out.
 */
#ifndef AGRIPPA_SANDBOX_RELAY_H
#define AGRIPPA_SANDBOX_RELAY_H

#include <stddef.h>

#define RELAY_CAP (128u * 1024) /* the window's bytes */
#define RELAY_SECRET_MIN 4      /* shorter values are not searched for (as the supervisor's) */
#define RELAY_SECRET_MAX 8192   /* bytes of one secret */
#define RELAY_SECRETS_MAX 64

struct relay_secret {
	const char *p;
	size_t n;
};

struct relay {
	char *buf;  /* the window: what is held of the unfinished line, then new bytes */
	char *copy; /* the window redacted, when a secret was found in it */
	size_t cap, len;
	size_t line_max;
	size_t hold;  /* the longest secret less one */
	size_t sent;  /* bytes of the unfinished line that went out in earlier rounds */
	size_t carry; /* buf[0..carry) goes out masked: a secret begun in bytes already out */
	size_t taken; /* bytes of buf the pending output stands for */
	size_t next_sent, next_carry;  /* sent and carry once it has gone */
	size_t per[RELAY_SECRETS_MAX]; /* each secret's smallest period: where the next
	                                  occurrence may start after one is found */
	int pending;                   /* an output was handed out and is not yet relay_sent */
	int cut;
	const struct relay_secret *sec; /* borrowed; nsec of them */
	size_t nsec;
};

/*
 * A relay of cap bytes (at least 4 times the longest secret) for lines of
 * at most line_max bytes, redacting sec[0..nsec) (borrowed: they must
 * outlive the relay; each of RELAY_SECRET_MIN to RELAY_SECRET_MAX bytes
 * without '\n'; shorter ones are skipped).  Returns 0, or -1 with err set.
 */
int relay_init(struct relay *r, size_t cap, size_t line_max, const struct relay_secret *sec,
               size_t nsec, char *err, size_t errsz);
void relay_free(struct relay *r);

/* Room for the next read: *p and how many bytes it may take; 0 while an
 * output is pending or after a cut. */
size_t relay_space(struct relay *r, char **p);

/*
 * n bytes were read at the place relay_space gave (eof: the server's
 * output ended; n may be 0).  Returns how many bytes are to go out now, at
 * *out (valid until relay_sent); 0 when nothing is ready.  After a
 * non-zero answer the caller writes all of it, then calls relay_sent,
 * before anything else here.
 */
size_t relay_filled(struct relay *r, size_t n, int eof, const char **out);

/*
 * An unfinished line that has waited long enough (a log's): what of it can
 * go now, as relay_filled's answer: all of it but the bytes from the first
 * that could begin a secret (a secret's first bytes up to the end).  0 when
 * nothing can.
 */
size_t relay_flush(struct relay *r, const char **out);

/* The output relay_filled gave has been written. */
void relay_sent(struct relay *r);

/* The last output ended with a line over line_max: nothing more goes. */
int relay_cut(const struct relay *r);

#endif
