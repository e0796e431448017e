/* FUZZ_SOURCES: proxy/wire.c */
/*
 * libFuzzer target for the providers' wire formats (proxy/wire.c): what a
 * model provider sends back, whole or as an event stream, and the request
 * bodies we build from the runner's neutral requests.
 *
 * Input: byte 0 is the mode, bytes 1-4 are piece sizes, the rest is the
 * body.  Mode bit 0 is the provider kind (0 Anthropic, 1 OpenAI), bit 1 asks
 * wire_request for a streamed body, bits 2-3 pick a small reason buffer for
 * a second wire_parse, bits 4-6 the wire_error_text buffer size, bit 7 odd
 * wire_request arguments (another model name, max_tokens from the input).
 * The last 64 bytes of the input (zero-padded) are also read as eight
 * little-endian u64s: prices and token counts for the cost functions.
 *
 * The contract checked:
 *  - wire_parse fails with a non-empty printable reason and no content, or
 *    gives content that is an array of only text blocks ({type, text}, the
 *    text non-empty) and tool_use blocks ({type, id, name, input}, the id
 *    1-256 printable bytes, the name 1-256 of [A-Za-z0-9_-], the input an
 *    object, or null for OpenAI only), at most 4096 of them, and a stop
 *    within the enum; with a 1-64 byte reason buffer it gives the same
 *    outcome and a reason NUL-terminated inside the buffer;
 *  - content a parse or a stream gave, with non-object inputs made {} as
 *    the runner does, is accepted back as an assistant message by
 *    wire_request;
 *  - the body fed to a stream whole, and again in the given piece sizes,
 *    gives the same outcome: both fail, or both succeed with json_equal
 *    contents of the shape above, equal stop and equal usage; after a feed
 *    fails, another feed fails, and so does finish, leaving no content;
 *  - wire_error_text writes a printable string NUL-terminated inside its
 *    buffer (a heap buffer of the exact size, so ASan sees a byte past it),
 *    and "" for a body wire_parse accepts;
 *  - wire_request on the body parsed as JSON fails with a non-empty
 *    printable reason, or returns a JSON object with our model, max_tokens
 *    (named max_completion_tokens when bit 3 of the first u64 asks, which
 *    only OpenAI takes), a messages array and stream set as asked;
 *  - wire_cost and wire_worst_cost take any values; wire_cost is monotonic
 *    in each token count and each price, exact for 32-bit values, and
 *    wire_worst_cost is wire_cost of its bound at the dearer input price.
 * Everything is freed (LeakSanitizer runs).
 * Seeds: tests/fuzz/corpus/wire/.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "proxy/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_HDR 5   /* the mode byte and four piece sizes */
#define FUZZ_ERR 512 /* the reason buffer of every call */
#define FUZZ_MODEL "claude-sonnet-4"
#define FUZZ_MAX_TOKENS 4096u

/* Fail loudly with what broke: libFuzzer keeps the input. */
#define FUZZ_CHECK(c, why)                                                                         \
	do {                                                                                       \
		if (!(c))                                                                          \
			fuzz_fail(why, __LINE__);                                                  \
	} while (0)

static void __attribute__((noreturn)) fuzz_fail(const char *why, int line)
{
	fprintf(stderr, "fuzz_wire.c:%d: contract broken: %s\n", line, why);
	abort();
}

/* s is printable ASCII and NUL-terminated within max bytes. */
static void
check_printable(const char *s, size_t max)
{
	size_t i;

	for (i = 0; i < max && s[i] != '\0'; i++)
		FUZZ_CHECK(s[i] >= 0x20 && s[i] < 0x7f, "a reason or error text is not printable");
	FUZZ_CHECK(i < max, "a reason or error text is not NUL-terminated in its buffer");
}

/* A failure's reason: non-empty, printable, inside the buffer. */
static void
check_reason(const char *err, size_t errsz)
{
	FUZZ_CHECK(errsz < 2 || err[0] != '\0', "a failure without a reason");
	check_printable(err, errsz);
}

static char *
fuzz_alloc(size_t n)
{
	char *p = malloc(n > 0 ? n : 1);

	if (p == NULL)
		abort();
	return p;
}

static int
id_ok(const json_t *v)
{
	const char *s = json_string_value(v);
	size_t i, n = json_string_length(v);

	if (s == NULL || n == 0 || n > 256)
		return 0;
	for (i = 0; i < n; i++)
		if (s[i] < 0x20 || s[i] >= 0x7f)
			return 0;
	return 1;
}

static int
name_ok(const json_t *v)
{
	const char *s = json_string_value(v);
	size_t n = json_string_length(v);

	return s != NULL && n > 0 && n <= 256 &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == n;
}

/* The neutral content blocks a response gives the runner. */
static void
check_content(enum wire_kind k, const json_t *c)
{
	const char *type;
	json_t *b, *in;
	size_t i;

	FUZZ_CHECK(json_is_array(c), "content is not an array");
	FUZZ_CHECK(json_array_size(c) <= 4096, "more than 4096 content blocks");
	json_array_foreach(c, i, b)
	{
		type = json_string_value(json_object_get(b, "type"));
		FUZZ_CHECK(json_is_object(b) && type != NULL, "a block without a string type");
		if (strcmp(type, "text") == 0) {
			FUZZ_CHECK(json_object_size(b) == 2, "a text block with other members");
			FUZZ_CHECK(json_string_length(json_object_get(b, "text")) > 0,
			           "a text block whose text is empty or not a string");
			continue;
		}
		FUZZ_CHECK(strcmp(type, "tool_use") == 0, "a block neither text nor tool_use");
		FUZZ_CHECK(json_object_size(b) == 4, "a tool_use block with other members");
		FUZZ_CHECK(id_ok(json_object_get(b, "id")), "a tool_use with a bad id");
		FUZZ_CHECK(name_ok(json_object_get(b, "name")), "a tool_use with a bad name");
		in = json_object_get(b, "input");
		FUZZ_CHECK(json_is_object(in) || (k == WIRE_OPENAI && json_is_null(in)),
		           "a tool_use whose input is not an object (or null from OpenAI)");
	}
}

/* Content handed to the runner comes back to us in the next request. */
static void
check_round_trip(enum wire_kind k, const json_t *content)
{
	char err[FUZZ_ERR], *s;
	json_t *c, *req, *b;
	size_t i;

	if (json_array_size(content) == 0)
		return;
	c = json_deep_copy(content);
	json_array_foreach(c, i, b)
	{
		if (json_is_null(json_object_get(b, "input")))
			json_object_set_new(b, "input", json_object());
	}
	req = json_pack("{s:[{s:s, s:o}]}", "messages", "role", "assistant", "content", c);
	FUZZ_CHECK(req != NULL, "out of memory");
	s = wire_request(k, req, FUZZ_MODEL, FUZZ_MAX_TOKENS, 0, err, sizeof(err));
	FUZZ_CHECK(s != NULL, "content we gave the runner is refused when it comes back");
	free(s);
	json_decref(req);
}

static void
check_resp(enum wire_kind k, const struct wire_resp *r)
{
	check_content(k, r->content);
	FUZZ_CHECK(r->stop <= WIRE_STOP_OTHER, "a stop outside the enum");
	check_round_trip(k, r->content);
}

static const size_t small_err[] = {64, 1, 2, 9};

/* wire_parse, and again with a small reason buffer.  0 or -1. */
static int
fuzz_parse(enum wire_kind k, const char *body, size_t len, unsigned mode, struct wire_resp *r)
{
	char err[FUZZ_ERR], *e2;
	struct wire_resp r2;
	size_t n = small_err[(mode >> 2) & 3];
	int rv, rv2;

	rv = wire_parse(k, body, len, r, err, sizeof(err));
	if (rv == 0) {
		check_resp(k, r);
		return 0;
	}
	FUZZ_CHECK(rv == -1 && r->content == NULL, "a failed parse left content");
	check_reason(err, sizeof(err));
	e2 = fuzz_alloc(n);
	rv2 = wire_parse(k, body, len, &r2, e2, n);
	FUZZ_CHECK(rv2 == -1 && r2.content == NULL, "a small reason buffer changed the outcome");
	check_reason(e2, n);
	free(e2);
	return -1;
}

/* Feed body in the given piece sizes (NULL: whole), then finish.  After a
 * failed feed, a further feed and finish must fail too. */
static int
fuzz_stream(enum wire_kind k, const char *body, size_t len, const uint8_t *sizes,
            struct wire_resp *r)
{
	struct wire_stream *s = wire_stream_new(k);
	size_t off = 0, n, i = 0;
	char err[FUZZ_ERR];
	int rv = 0;

	FUZZ_CHECK(s != NULL, "out of memory");
	while (rv == 0 && (off < len || i == 0)) {
		n = sizes == NULL ? len : sizes[i % 4];
		i++;
		if (n > len - off)
			n = len - off;
		rv = wire_stream_feed(s, body + off, n, err, sizeof(err));
		off += n;
		if (sizes != NULL && sizes[0] == 0 && sizes[1] == 0 && sizes[2] == 0 &&
		    sizes[3] == 0 && i >= 4)
			sizes = NULL; /* four empty pieces: the rest goes whole */
	}
	if (rv == -1) {
		check_reason(err, sizeof(err));
		FUZZ_CHECK(wire_stream_feed(s, "\n", 1, err, sizeof(err)) == -1,
		           "a dead stream took more");
		check_reason(err, sizeof(err));
	}
	if (wire_stream_finish(s, r, err, sizeof(err)) == 0) {
		FUZZ_CHECK(rv == 0, "finish succeeded after a feed failed");
		check_resp(k, r);
	} else {
		FUZZ_CHECK(r->content == NULL, "a failed finish left content");
		check_reason(err, sizeof(err));
		rv = -1;
	}
	FUZZ_CHECK(wire_stream_feed(s, "", 0, err, sizeof(err)) == -1,
	           "a finished stream took more");
	wire_stream_free(s);
	return rv;
}

static void
check_streams(enum wire_kind k, const char *body, size_t len, const uint8_t *sizes)
{
	struct wire_resp whole, cut;
	int a, b;

	a = fuzz_stream(k, body, len, NULL, &whole);
	b = fuzz_stream(k, body, len, sizes, &cut);
	FUZZ_CHECK(a == b, "a stream fed whole and in pieces disagree");
	if (a == 0) {
		FUZZ_CHECK(json_equal(whole.content, cut.content),
		           "a stream fed whole and in pieces give other content");
		FUZZ_CHECK(whole.stop == cut.stop,
		           "a stream fed whole and in pieces stop otherwise");
		FUZZ_CHECK(memcmp(&whole.usage, &cut.usage, sizeof(whole.usage)) == 0,
		           "a stream fed whole and in pieces count other usage");
	}
	wire_resp_free(&whole);
	wire_resp_free(&cut);
}

static const size_t text_sizes[] = {512, 0, 1, 2, 3, 8, 17, 64};

static void
check_error_text(const char *body, size_t len, unsigned mode, int parsed)
{
	size_t n = text_sizes[(mode >> 4) & 7];
	char *out = fuzz_alloc(n);

	wire_error_text(len > 0 ? body : NULL, len, out, n);
	if (n > 0) {
		check_printable(out, n);
		FUZZ_CHECK(!parsed || out[0] == '\0', "error text for a body without an error");
	}
	free(out);
}

/* An empty model, a good one, one with a control byte, one of 257 bytes. */
static char long_model[258];
static const char *const odd_models[] = {"", "gpt-4o", "bad\001model", long_model};

static void
check_built(const char *s, const char *model, uint64_t max_tokens, int stream, int completion)
{
	json_t *o = json_loads(s, 0, NULL), *st;
	const char *m, *limit = completion ? "max_completion_tokens" : "max_tokens";

	FUZZ_CHECK(json_is_object(o), "a request body that is not a JSON object");
	m = json_string_value(json_object_get(o, "model"));
	FUZZ_CHECK(m != NULL && strcmp(m, model) == 0, "a request body without our model");
	FUZZ_CHECK(json_integer_value(json_object_get(o, limit)) == (json_int_t)max_tokens,
	           "a request body without our max_tokens, under the name asked for");
	FUZZ_CHECK(json_object_get(o, completion ? "max_tokens" : "max_completion_tokens") == NULL,
	           "a request body with both names of the output limit");
	FUZZ_CHECK(json_is_array(json_object_get(o, "messages")),
	           "a request body without messages");
	st = json_object_get(o, "stream");
	FUZZ_CHECK(stream ? json_is_true(st) : st == NULL, "a request body streams otherwise");
	json_decref(o);
}

static void
check_request(enum wire_kind k, const char *body, size_t len, unsigned mode, uint64_t v)
{
	const char *model = FUZZ_MODEL;
	uint64_t max_tokens = FUZZ_MAX_TOKENS;
	int stream = (mode >> 1) & 1, completion = (v >> 3) & 1;
	char err[FUZZ_ERR], *s;
	json_t *req;

	if ((req = json_loadb(body, len, JSON_DECODE_ANY, NULL)) == NULL)
		return;
	if (mode & 0x80) {
		memset(long_model, 'x', sizeof(long_model) - 1);
		model = odd_models[v % 4];
		max_tokens = v >> 2 & 1 ? v : v % 5;
	}
	s = wire_request(k, req, model, max_tokens,
	    (stream ? WIRE_STREAM : 0) | (completion ? WIRE_MAX_COMPLETION : 0), err, sizeof(err));
	FUZZ_CHECK(s == NULL || !completion || k == WIRE_OPENAI,
	           "max_completion_tokens in a request that is not OpenAI's");
	if (s == NULL)
		check_reason(err, sizeof(err));
	else
		check_built(s, model, max_tokens, stream, completion);
	free(s);
	json_decref(req);
}

/* ---- cost ----------------------------------------------------------------- */

static uint64_t
sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t *
usage_at(struct wire_usage *u, int i)
{
	uint64_t *f[] = {&u->input, &u->output, &u->cache_read, &u->cache_write};

	return f[i];
}

static uint64_t *
price_at(struct wire_price *p, int i)
{
	uint64_t *f[] = {&p->input, &p->output, &p->cache_read, &p->cache_write};

	return f[i];
}

/* More of any one count, or a dearer price, never costs less. */
static void
check_monotonic(const struct wire_price *p, const struct wire_usage *u, uint64_t d)
{
	uint64_t c = wire_cost(p, u);
	struct wire_usage u2;
	struct wire_price p2;
	int i;

	for (i = 0; i < 4; i++) {
		u2 = *u;
		*usage_at(&u2, i) = sat_add(*usage_at(&u2, i), d);
		FUZZ_CHECK(wire_cost(p, &u2) >= c, "more tokens cost less");
		*usage_at(&u2, i) = 0;
		FUZZ_CHECK(wire_cost(p, &u2) <= wire_cost(p, u), "fewer tokens cost more");
		p2 = *p;
		*price_at(&p2, i) = sat_add(*price_at(&p2, i), d);
		FUZZ_CHECK(wire_cost(&p2, u) >= c, "a dearer price costs less");
	}
}

/* For 32-bit values the sum cannot saturate: the cost is exact. */
static void
check_exact(const struct wire_price *p, const struct wire_usage *u)
{
	struct wire_price p32 = *p;
	struct wire_usage u32 = *u;
	unsigned __int128 sum = 0;
	int i;

	for (i = 0; i < 4; i++) {
		*price_at(&p32, i) &= UINT32_MAX;
		*usage_at(&u32, i) &= UINT32_MAX;
		sum += (unsigned __int128)*price_at(&p32, i) * *usage_at(&u32, i);
	}
	FUZZ_CHECK(wire_cost(&p32, &u32) == (uint64_t)((sum + 999999u) / 1000000u),
	           "a cost that is not the sum rounded up");
}

static void
check_worst(const struct wire_price *p, uint64_t body_len, uint64_t max_tokens, uint64_t d)
{
	struct wire_price bound = {0};
	struct wire_usage u = {0};
	uint64_t w = wire_worst_cost(p, (size_t)body_len, max_tokens);

	bound.input = p->input > p->cache_write ? p->input : p->cache_write;
	bound.output = p->output;
	u.input = (size_t)body_len;
	u.output = max_tokens;
	FUZZ_CHECK(w == wire_cost(&bound, &u), "worst cost is not the cost of its bound");
	FUZZ_CHECK(wire_worst_cost(p, (size_t)sat_add(body_len, d), max_tokens) >= w,
	           "a longer body has a smaller worst cost");
	FUZZ_CHECK(wire_worst_cost(p, (size_t)body_len, sat_add(max_tokens, d)) >= w,
	           "more max_tokens have a smaller worst cost");
}

/* The k-th u64 of the input's last 64 bytes (zero-padded in front). */
static uint64_t
tail_u64(const uint8_t *data, size_t size, int k)
{
	uint8_t t[64] = {0};
	uint64_t v = 0;
	int i;

	memcpy(t + 64 - (size < 64 ? size : 64), data + size - (size < 64 ? size : 64),
	       size < 64 ? size : 64);
	for (i = 7; i >= 0; i--)
		v = v << 8 | t[8 * k + i];
	return v;
}

static void
check_cost(const uint64_t v[8], const struct wire_usage *parsed)
{
	struct wire_price p = {v[0], v[1], v[2], v[3]};
	struct wire_usage u = {v[4], v[5], v[6], v[7]};

	check_monotonic(&p, &u, 1);
	check_monotonic(&p, &u, v[(v[0] & 7)]);
	check_exact(&p, &u);
	check_worst(&p, v[4], v[5], 1);
	check_worst(&p, v[6], v[7], v[3]);
	if (parsed != NULL) {
		check_monotonic(&p, parsed, 1);
		check_exact(&p, parsed);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *body = (const char *)data + FUZZ_HDR;
	struct wire_resp r;
	enum wire_kind k;
	uint64_t v[8];
	size_t len;
	unsigned mode;
	int i, parsed;

	if (size < FUZZ_HDR)
		return 0;
	mode = data[0];
	k = (enum wire_kind)(mode & 1);
	len = size - FUZZ_HDR;
	for (i = 0; i < 8; i++)
		v[i] = tail_u64(data, size, i);
	parsed = fuzz_parse(k, body, len, mode, &r) == 0;
	check_cost(v, parsed ? &r.usage : NULL);
	wire_resp_free(&r);
	check_streams(k, body, len, data + 1);
	check_error_text(body, len, mode, parsed);
	check_request(k, body, len, mode, v[0]);
	return 0;
}
