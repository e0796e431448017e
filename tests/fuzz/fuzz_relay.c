/* FUZZ_SOURCES: sandbox/relay.c */
/*
 * libFuzzer target for the redacting line relay of an MCP server's output
 * (sandbox/relay.c), which reads what a hostile server writes.  Input: one
 * byte for the number of secrets (0 to 3) and the line cap (16 to 4111),
 * each secret as a length byte (4 to 35) and its bytes ('\n' and '*' made
 * other bytes), then the server's bytes, fed in pieces whose sizes come
 * from the data, with a flush (a log's idle line) now and then.
 *
 * The contract:
 *  - no output ever holds a secret;
 *  - while no line is over the cap, the output is the input with every
 *    occurrence of every secret masked, no more and no less, in order;
 *  - a line over the cap ends the output: the lines before it as above,
 *    then exactly cap + 1 bytes of it, and nothing more is taken.
 * Seeds: tests/fuzz/corpus/relay/.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/relay.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CAP 256

static char *
masked(const char *in, size_t n, const struct relay_secret *sec, size_t nsec)
{
	char *o = malloc(n + 1);
	size_t i, at;

	if (o == NULL)
		abort();
	memcpy(o, in, n);
	for (i = 0; i < nsec; i++)
		for (at = 0; at + sec[i].n <= n; at++)
			if (memcmp(in + at, sec[i].p, sec[i].n) == 0)
				memset(o + at, '*', sec[i].n);
	return o;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char secbuf[3][36], out[1 << 16];
	struct relay_secret sec[3];
	struct relay r;
	char err[128], *dst, *want;
	const char *p;
	size_t nsec, line_max, i, j, off, olen = 0, k, o, n, room, nl;
	uint8_t seed;

	if (size < 2)
		return 0;
	nsec = data[0] % 4;
	line_max = 16 + (size_t)data[1] * 16 + data[0] / 16;
	off = 2;
	for (i = 0; i < nsec; i++) {
		if (off >= size)
			return 0;
		n = 4 + data[off++] % 32;
		if (size - off < n)
			return 0;
		for (j = 0; j < n; j++)
			secbuf[i][j] = data[off + j] == '\n' || data[off + j] == '*'
			                   ? 'S'
			                   : (char)data[off + j];
		sec[i] = (struct relay_secret){secbuf[i], n};
		off += n;
	}
	if (off >= size || size - off > sizeof(out) / 2)
		return 0;
	seed = data[off++];
	data += off;
	size -= off;
	if (relay_init(&r, CAP, line_max, sec, nsec, err, sizeof(err)) != 0)
		abort();
	for (off = 0; off < size && !relay_cut(&r);) {
		room = relay_space(&r, &dst);
		if (room == 0)
			abort();
		k = 1 + (seed = (uint8_t)(seed * 33 + 7)) % 97;
		if (k > room)
			k = room;
		if (k > size - off)
			k = size - off;
		memcpy(dst, data + off, k);
		off += k;
		if ((o = relay_filled(&r, k, 0, &p)) == 0 && seed % 5 == 0)
			o = relay_flush(&r, &p);
		if (o > 0) {
			if (olen + o > sizeof(out))
				abort();
			memcpy(out + olen, p, o);
			olen += o;
			relay_sent(&r);
		}
	}
	while (!relay_cut(&r) && (o = relay_filled(&r, 0, 1, &p)) > 0) {
		memcpy(out + olen, p, o);
		olen += o;
		relay_sent(&r);
	}
	for (i = 0; i < nsec; i++)
		if (sec[i].n <= olen && memmem(out, olen, sec[i].p, sec[i].n) != NULL)
			abort();
	want = masked((const char *)data, size, sec, nsec);
	if (!relay_cut(&r)) {
		if (olen != size || memcmp(out, want, size) != 0)
			abort();
	} else {
		/* the first line over the cap */
		for (i = 0; i < size; i = nl + 1) {
			const char *q = memchr(data + i, '\n', size - i);

			nl = q != NULL ? (size_t)(q - (const char *)data) : size;
			if (nl - i > line_max)
				break;
		}
		if (i >= size || olen != i + line_max + 1 || memcmp(out, want, i) != 0)
			abort();
	}
	free(want);
	relay_free(&r);
	return 0;
}
