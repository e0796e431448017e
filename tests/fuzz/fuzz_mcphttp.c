/* FUZZ_SOURCES: proxy/mcphttp_read.c runner/mcp_msg.c */
/*
 * libFuzzer target for what the MCP bridge reads from a remote server
 * (proxy/mcphttp_read.c): the SSE parser and the check of each message an
 * answer carries.  Input: one byte n (the cap: 64 + n * 64 bytes), then an
 * event stream, fed twice: whole, and in pieces whose sizes come from the
 * data, as reads would bring them.
 *
 * The contract:
 *  - both feedings report the same events (type and data) and agree on
 *    whether the stream is over the cap, the last event id and retry;
 *  - every event's data is non-empty, at most the cap, NUL-terminated; its
 *    type is at most 63 bytes;
 *  - each event's data, checked as one JSON-RPC message, is refused with a
 *    reason, or comes back at most the cap, one line, decodable again to a
 *    message of the same kind, and without the secret: not raw, and not
 *    spelled with \u escapes in the input either;
 *  - the data as an Mcp-Name header value is printable ASCII without CR or
 *    LF; the whole input as a Content-Type is 0, 1 or 2.
 * Seeds: tests/fuzz/corpus/mcphttp/.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/mcphttp.h"
#include "runner/mcp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define EVENTS_MAX 256
#define SECRET "s3cr3t-VALUE-42"

struct seen {
	size_t n;
	size_t len[EVENTS_MAX];
	uint64_t hash[EVENTS_MAX];
	size_t max;
};

static uint64_t
fnv(const char *p, size_t n, uint64_t h)
{
	size_t i;

	for (i = 0; i < n; i++)
		h = (h ^ (unsigned char)p[i]) * 1099511628211ULL;
	return h;
}

static const struct mcphttp_secret secrets[] = {{SECRET, sizeof(SECRET) - 1}};

static void
check_message(const char *d, size_t len, size_t max)
{
	char err[256], *out, *hv;
	size_t n, i;
	int kind, kind2;
	json_t *id;
	struct mcp_msg m;

	err[0] = '\0';
	out = mcphttp_message(d, len, max, secrets, 1, &kind, &id, NULL, &n, err, sizeof(err));
	if (out == NULL) {
		if (err[0] == '\0' || id != NULL)
			abort();
	} else {
		if (n > max || strlen(out) != n || memchr(out, '\n', n) != NULL)
			abort();
		if (memmem(out, n, SECRET, sizeof(SECRET) - 1) != NULL)
			abort();
		if (mcp_msg_parse(out, n, &m, err, sizeof(err)) == -1)
			abort();
		kind2 = (int)m.kind;
		mcp_msg_clear(&m);
		if (kind2 != kind)
			abort();
		json_decref(id);
		free(out);
	}
	hv = mcphttp_header_value(d, len);
	for (i = 0; hv[i] != '\0'; i++)
		if ((unsigned char)hv[i] < 0x20 || (unsigned char)hv[i] > 0x7e)
			abort();
	free(hv);
}

static int
on_event(void *arg, const char *event, const char *d, size_t len)
{
	struct seen *s = arg;

	if (len == 0 || len > s->max || d[len] != '\0' || strlen(event) > 63)
		abort();
	if (s->n < EVENTS_MAX) {
		s->len[s->n] = len;
		s->hash[s->n] = fnv(d, len, fnv(event, strlen(event), 14695981039346656037ULL));
	}
	s->n++;
	return 0;
}

static int
on_event_check(void *arg, const char *event, const char *d, size_t len)
{
	on_event(arg, event, d, len);
	check_message(d, len, ((struct seen *)arg)->max);
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mcphttp_sse a, b;
	struct seen sa, sb;
	size_t max, off, piece, i;
	int ra, rb;
	char *ct;

	if (size < 1)
		return 0;
	max = 64 + (size_t)data[0] * 64;
	data++;
	size--;
	memset(&sa, 0, sizeof(sa));
	memset(&sb, 0, sizeof(sb));
	sa.max = sb.max = max;
	mcphttp_sse_init(&a, max);
	mcphttp_sse_init(&b, max);
	ra = mcphttp_sse_feed(&a, (const char *)data, size, on_event_check, &sa);
	rb = 0;
	for (off = 0; off < size && rb == 0; off += piece) {
		piece = 1 + (data[off] % 7);
		if (piece > size - off)
			piece = size - off;
		rb = mcphttp_sse_feed(&b, (const char *)data + off, piece, on_event, &sb);
	}
	if (ra != rb || sa.n != sb.n)
		abort();
	for (i = 0; i < sa.n && i < EVENTS_MAX; i++)
		if (sa.len[i] != sb.len[i] || sa.hash[i] != sb.hash[i])
			abort();
	if (ra == 0 && (a.retry_ms != b.retry_ms || (a.last_id == NULL) != (b.last_id == NULL) ||
	                (a.last_id != NULL && strcmp(a.last_id, b.last_id) != 0)))
		abort();
	mcphttp_sse_free(&a);
	mcphttp_sse_free(&b);
	if ((ct = strndup((const char *)data, size < 256 ? size : 256)) == NULL)
		abort();
	if (mcphttp_ctype(ct) < 0 || mcphttp_ctype(ct) > 2)
		abort();
	free(ct);
	return 0;
}
