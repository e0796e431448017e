#ifndef AGRIPPA_WIRE_H
#define AGRIPPA_WIRE_H

/*
 * wire.c: the model providers' wire formats, as pure functions.  The runner
 * speaks one neutral format (the Anthropic Messages shape: system, messages
 * of text / tool_use / tool_result blocks, tools); these turn a neutral
 * request into a provider's request body, and a provider's response, whole
 * or streamed as server-sent events, back into neutral content blocks, a
 * stop reason and token usage.  Everything a provider sends is untrusted:
 * types are checked, sizes bounded, and a violation is -1 with a reason in
 * err, never a crash.  Reasons are printable ASCII.
 */
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

enum wire_kind { WIRE_ANTHROPIC = 0, WIRE_OPENAI = 1 };
enum wire_stop { WIRE_STOP_END = 0, WIRE_STOP_TOOL_USE, WIRE_STOP_MAX_TOKENS, WIRE_STOP_OTHER };

struct wire_price { /* micro-dollars per million tokens */
	uint64_t input, output, cache_read, cache_write;
};
struct wire_usage {
	uint64_t input, output, cache_read,
	    cache_write; /* tokens; input excludes cache reads/writes */
};
struct wire_resp {
	json_t *content; /* neutral content blocks (owned; wire_resp_free) */
	enum wire_stop stop;
	struct wire_usage usage;
};

#define WIRE_BODY_MAX (64u * 1024 * 1024) /* largest provider response body or stream we take */

/* How a body is asked for (flags): WIRE_STREAM asks for a streamed answer; WIRE_MAX_COMPLETION
 * names the output limit "max_completion_tokens" instead of "max_tokens" (OpenAI only: its newer
 * models refuse max_tokens, which many OpenAI-compatible servers still want). */
#define WIRE_STREAM 0x1u
#define WIRE_MAX_COMPLETION 0x2u

/* The provider's request body for a neutral request: model and max_tokens set, as flags ask.
 * Returns a malloc'd NUL-terminated string (caller frees) or NULL with a reason in err (a
 * request that is not the neutral shape: messages missing or not an array, a block of unknown type,
 * a tool_use without id/name/object input, an unknown member, etc.). */
/*
 * A conversation kept across calls (the proxy keeps one per runner): each
 * message is turned into the provider's text once, when added, and a
 * call's body is put together from those texts.
 *  - wire_conv_new: NULL when out of memory or k is unknown.
 *  - wire_conv_add: a neutral request of only the messages that are new
 *    (with system and tools only while the conversation is empty: they are
 *    fixed for it), checked as wire_request checks one.  0, or -1 with a
 *    reason; on -1 the conversation is as it was.
 *  - wire_conv_body: the provider body for the whole conversation, as
 *    wire_request would make it (the caller frees), or NULL with a reason.
 */
struct wire_conv;
struct wire_conv *wire_conv_new(enum wire_kind k);
void wire_conv_free(struct wire_conv *c);
size_t wire_conv_count(const struct wire_conv *c);
int wire_conv_add(struct wire_conv *c, const json_t *req, char *err, size_t errsz);
char *wire_conv_body(const struct wire_conv *c, const char *model, uint64_t max_tokens,
    unsigned flags, char *err, size_t errsz);

char *wire_request(enum wire_kind k, const json_t *req, const char *model, uint64_t max_tokens,
                   unsigned flags, char *err, size_t errsz);
/* The path appended to the provider's base URL: "/v1/messages" or "/chat/completions". */
const char *wire_path(enum wire_kind k);

/* A whole (non-streamed) 2xx response body.  0, or -1 with a reason (malformed JSON, missing
 * fields, a bad tool-use id or name).  out is always initialised: wire_resp_free is safe on
 * either outcome.  An OpenAI tool call whose arguments are not a JSON object gets input null
 * (the caller answers the model with a tool error; it is not a protocol error). */
int wire_parse(enum wire_kind k, const char *body, size_t len, struct wire_resp *out, char *err,
               size_t errsz);

/* A streamed response (text/event-stream), fed as it arrives in pieces of any size. */
struct wire_stream;
struct wire_stream *wire_stream_new(enum wire_kind k); /* NULL only when out of memory */
/* 0, or -1 with a reason: a malformed event, an "error" event (its message in err), more than
 * WIRE_BODY_MAX bytes in all.  After -1 the stream is dead. */
int wire_stream_feed(struct wire_stream *s, const char *data, size_t len, char *err, size_t errsz);
/* The assembled response once the body ended: -1 with a reason when the stream did not finish
 * (no message_stop for Anthropic; no "data: [DONE]" for OpenAI, or no usage — a response cut
 * mid-stream).  A last line must be whole; the blank line after it may be missing.  Call once;
 * out is always initialised as for wire_parse. */
int wire_stream_finish(struct wire_stream *s, struct wire_resp *out, char *err, size_t errsz);
void wire_stream_free(struct wire_stream *s);
void wire_resp_free(struct wire_resp *r);

/* A provider's error body ({"error":{"type","message"}} for both, also {"error":"text"}) as one
 * printable line in out ("type: message"; control characters and non-ASCII bytes replaced by
 * '?', truncated to outsz-1); "" when none. */
void wire_error_text(const char *body, size_t len, char *out, size_t outsz);

/* What usage costs at price, in micro-dollars, rounded up: sum(tokens_i * price_i) / 1e6,
 * computed without overflow; saturates at UINT64_MAX. */
uint64_t wire_cost(const struct wire_price *p, const struct wire_usage *u);
/* The most a call can cost: a request body of body_len bytes (every byte a token at the dearer
 * of input and cache_write prices) plus max_tokens output tokens.  Rounded up, saturating. */
uint64_t wire_worst_cost(const struct wire_price *p, size_t body_len, uint64_t max_tokens);

#endif
