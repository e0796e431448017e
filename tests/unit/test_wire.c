/*
 * proxy/wire.c: the neutral request mapped to each provider's body (golden
 * JSON), whole and streamed responses parsed back to neutral blocks, stop
 * reasons and usage, streams fed whole, a byte at a time, in odd chunks and
 * with \r\n or \r line ends (all must agree with the whole-body parse), cut
 * streams, hostile input, error bodies and costs.
 *
 * Current behaviour these tests pin down (change them only on purpose):
 *  - Unknown members anywhere in the neutral request are refused.
 *  - Empty text blocks are dropped from responses (providers refuse them
 *    when sent back).
 *  - OpenAI arguments that are empty or white space are {}; anything else
 *    that is not an object is input null.
 *  - A stream's last whole line may lack its blank line; a cut line fails.
 *  - An OpenAI stream without a usage chunk fails at finish.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/wire.h"

#define assert_reason(got, want)                                                                   \
	do {                                                                                       \
		const char *g_ = (got);                                                            \
		if (strstr(g_, (want)) == NULL)                                                    \
			fail_msg("reason \"%s\" does not contain \"%s\"", g_, (want));             \
	} while (0)

/* ---- fixtures: realistic bodies after the providers' documented examples -- */

/* clang-format off */
#define ANTH_TEXT_BODY \
	"{\"id\":\"msg_013Zva2CMHLNnXjNJJKqJ2EF\",\"type\":\"message\",\"role\":\"assistant\"," \
	"\"model\":\"claude-sonnet-4-20250514\",\"content\":[{\"type\":\"text\",\"text\":" \
	"\"Hi! My name is Claude.\"}],\"stop_reason\":\"end_turn\",\"stop_sequence\":null," \
	"\"usage\":{\"input_tokens\":2095,\"output_tokens\":503," \
	"\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0}}"

#define ANTH_TEXT_CONTENT "[{\"type\":\"text\",\"text\":\"Hi! My name is Claude.\"}]"

#define ANTH_TEXT_STREAM \
	"event: message_start\n" \
	"data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_013Zva2CMHLNnXjNJJKqJ2EF\"," \
	"\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":" \
	"\"claude-sonnet-4-20250514\",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":" \
	"{\"input_tokens\":2095,\"cache_creation_input_tokens\":0," \
	"\"cache_read_input_tokens\":0,\"output_tokens\":1}}}\n\n" \
	"event: content_block_start\n" \
	"data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":" \
	"{\"type\":\"text\",\"text\":\"\"}}\n\n" \
	"event: ping\n" \
	"data: {\"type\": \"ping\"}\n\n" \
	"event: content_block_delta\n" \
	"data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":" \
	"{\"type\":\"text_delta\",\"text\":\"Hi! My name\"}}\n\n" \
	"event: content_block_delta\n" \
	"data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":" \
	"{\"type\":\"text_delta\",\"text\":\" is Claude.\"}}\n\n" \
	"event: content_block_stop\n" \
	"data: {\"type\":\"content_block_stop\",\"index\":0}\n\n" \
	"event: message_delta\n" \
	"data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"," \
	"\"stop_sequence\":null},\"usage\":{\"output_tokens\":503}}\n\n" \
	"event: message_stop\n" \
	"data: {\"type\":\"message_stop\"}\n\n"

#define ANTH_TOOL_BODY \
	"{\"id\":\"msg_01Aq9w938a90dw8q\",\"type\":\"message\",\"role\":\"assistant\"," \
	"\"model\":\"claude-sonnet-4-20250514\",\"content\":[" \
	"{\"type\":\"thinking\",\"thinking\":\"The user wants two files.\",\"signature\":" \
	"\"EqQBCgIYAhIM1gbcDa9GJwZA2b3h\"}," \
	"{\"type\":\"text\",\"text\":\"I'll read both files.\"}," \
	"{\"type\":\"tool_use\",\"id\":\"toolu_01A09q90qw90lq917835lq9\",\"name\":" \
	"\"read_file\",\"input\":{\"path\":\"a.c\"}}," \
	"{\"type\":\"tool_use\",\"id\":\"toolu_01B3xk2Rw7LmPq4sT8vY6nZ\",\"name\":" \
	"\"read_file\",\"input\":{\"path\":\"b.c\",\"lines\":{\"from\":1,\"to\":40}}}]," \
	"\"stop_reason\":\"tool_use\",\"stop_sequence\":null,\"usage\":{\"input_tokens\":472," \
	"\"cache_creation_input_tokens\":1024,\"cache_read_input_tokens\":2048," \
	"\"output_tokens\":133,\"service_tier\":\"standard\"}}"

/* The neutral content of both tool responses, with their two ids. */
#define TOOL_CONTENT \
	"[{\"type\":\"text\",\"text\":\"I'll read both files.\"}," \
	"{\"type\":\"tool_use\",\"id\":\"%s\",\"name\":\"read_file\",\"input\":" \
	"{\"path\":\"a.c\"}}," \
	"{\"type\":\"tool_use\",\"id\":\"%s\",\"name\":\"read_file\",\"input\":" \
	"{\"path\":\"b.c\",\"lines\":{\"from\":1,\"to\":40}}}]"

#define ANTH_DELTA(i, type, field, s) \
	"event: content_block_delta\n" \
	"data: {\"type\":\"content_block_delta\",\"index\":" #i ",\"delta\":{\"type\":\"" \
	type "\",\"" field "\":\"" s "\"}}\n\n"
#define ANTH_STOP(i) \
	"event: content_block_stop\n" \
	"data: {\"type\":\"content_block_stop\",\"index\":" #i "}\n\n"

#define ANTH_TOOL_STREAM \
	"event: message_start\n" \
	"data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01Aq9w938a90dw8q\"," \
	"\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":" \
	"\"claude-sonnet-4-20250514\",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":" \
	"{\"input_tokens\":472,\"cache_creation_input_tokens\":1024," \
	"\"cache_read_input_tokens\":2048,\"output_tokens\":2}}}\n\n" \
	"event: content_block_start\n" \
	"data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":" \
	"{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n" \
	ANTH_DELTA(0, "thinking_delta", "thinking", "The user wants two files.") \
	ANTH_DELTA(0, "signature_delta", "signature", "EqQBCgIYAhIM1gbcDa9GJwZA2b3h") \
	ANTH_STOP(0) \
	"event: content_block_start\n" \
	"data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":" \
	"{\"type\":\"text\",\"text\":\"\"}}\n\n" \
	ANTH_DELTA(1, "text_delta", "text", "I'll read ") \
	": a comment line, ignored\n" \
	ANTH_DELTA(1, "text_delta", "text", "both files.") \
	ANTH_STOP(1) \
	"event: content_block_start\n" \
	"data: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":" \
	"{\"type\":\"tool_use\",\"id\":\"toolu_01A09q90qw90lq917835lq9\",\"name\":" \
	"\"read_file\",\"input\":{}}}\n\n" \
	ANTH_DELTA(2, "input_json_delta", "partial_json", "") \
	ANTH_DELTA(2, "input_json_delta", "partial_json", "{\\\"pa") \
	ANTH_DELTA(2, "input_json_delta", "partial_json", "th\\\": \\\"a.c\\\"}") \
	ANTH_STOP(2) \
	"event: content_block_start\n" \
	"data: {\"type\":\"content_block_start\",\"index\":3,\"content_block\":" \
	"{\"type\":\"tool_use\",\"id\":\"toolu_01B3xk2Rw7LmPq4sT8vY6nZ\",\"name\":" \
	"\"read_file\",\"input\":{}}}\n\n" \
	ANTH_DELTA(3, "input_json_delta", "partial_json", "{\\\"path\\\":\\\"b.c\\\",") \
	ANTH_DELTA(3, "input_json_delta", "partial_json", "\\\"lines\\\":{\\\"from\\\":1,") \
	ANTH_DELTA(3, "input_json_delta", "partial_json", "\\\"to\\\":40}}") \
	ANTH_STOP(3) \
	"event: message_delta\n" \
	"data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"," \
	"\"stop_sequence\":null},\"usage\":{\"output_tokens\":133}}\n\n" \
	"event: message_stop\n" \
	"data: {\"type\":\"message_stop\"}\n\n"

#define OAI_TEXT_BODY \
	"{\"id\":\"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT\",\"object\":\"chat.completion\"," \
	"\"created\":1741569952,\"model\":\"gpt-4.1-2025-04-14\",\"choices\":[{\"index\":0," \
	"\"message\":{\"role\":\"assistant\",\"content\":" \
	"\"Hello! How can I assist you today?\",\"refusal\":null,\"annotations\":[]}," \
	"\"logprobs\":null,\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":19," \
	"\"completion_tokens\":10,\"total_tokens\":29,\"prompt_tokens_details\":" \
	"{\"cached_tokens\":0,\"audio_tokens\":0},\"completion_tokens_details\":" \
	"{\"reasoning_tokens\":0,\"audio_tokens\":0,\"accepted_prediction_tokens\":0," \
	"\"rejected_prediction_tokens\":0}},\"service_tier\":\"default\"}"

#define OAI_TEXT_CONTENT "[{\"type\":\"text\",\"text\":\"Hello! How can I assist you today?\"}]"

#define OAI_TOOL_BODY \
	"{\"id\":\"chatcmpl-abc123\",\"object\":\"chat.completion\",\"created\":1699896916," \
	"\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"message\":{\"role\":" \
	"\"assistant\",\"content\":\"I'll read both files.\",\"tool_calls\":[" \
	"{\"id\":\"call_abc123\",\"type\":\"function\",\"function\":{\"name\":\"read_file\"," \
	"\"arguments\":\"{\\\"path\\\":\\\"a.c\\\"}\"}}," \
	"{\"id\":\"call_def456\",\"type\":\"function\",\"function\":{\"name\":\"read_file\"," \
	"\"arguments\":\"{\\\"path\\\":\\\"b.c\\\",\\\"lines\\\":{\\\"from\\\":1," \
	"\\\"to\\\":40}}\"}}]},\"logprobs\":null,\"finish_reason\":\"tool_calls\"}]," \
	"\"usage\":{\"prompt_tokens\":3120,\"completion_tokens\":17,\"total_tokens\":3137," \
	"\"prompt_tokens_details\":{\"cached_tokens\":2048}}}"

/* One chunk: data: {the usual head, rest}. */
#define OAI_CHUNK(rest) \
	"data: {\"id\":\"chatcmpl-123\",\"object\":\"chat.completion.chunk\",\"created\":" \
	"1694268190,\"model\":\"gpt-4o-mini\",\"system_fingerprint\":\"fp_44709d6fcb\"," rest \
	"}\n\n"
#define OAI_DELTA(delta, finish) \
	OAI_CHUNK("\"choices\":[{\"index\":0,\"delta\":" delta ",\"logprobs\":null," \
	          "\"finish_reason\":" finish "}],\"usage\":null")
#define OAI_ARGS(i, s) \
	OAI_DELTA("{\"tool_calls\":[{\"index\":" #i ",\"function\":{\"arguments\":\"" s "\"}}]}", \
	          "null")

#define OAI_TEXT_STREAM \
	OAI_DELTA("{\"role\":\"assistant\",\"content\":\"\",\"refusal\":null}", "null") \
	OAI_DELTA("{\"content\":\"Hello!\"}", "null") \
	": OPENROUTER PROCESSING\n\n" \
	OAI_DELTA("{\"content\":\" How can I assist you today?\"}", "null") \
	OAI_DELTA("{}", "\"stop\"") \
	OAI_CHUNK("\"choices\":[],\"usage\":{\"prompt_tokens\":19,\"completion_tokens\":10," \
	          "\"total_tokens\":29,\"prompt_tokens_details\":{\"cached_tokens\":0," \
	          "\"audio_tokens\":0},\"completion_tokens_details\":{\"reasoning_tokens\":0}}") \
	"data: [DONE]\n\n"

#define OAI_TOOL_STREAM \
	OAI_DELTA("{\"role\":\"assistant\",\"content\":\"I'll read \"}", "null") \
	OAI_DELTA("{\"content\":\"both files.\"}", "null") \
	OAI_DELTA("{\"tool_calls\":[{\"index\":0,\"id\":\"call_abc123\",\"type\":\"function\"," \
	          "\"function\":{\"name\":\"read_file\",\"arguments\":\"\"}}]}", "null") \
	OAI_ARGS(0, "{\\\"pa") \
	OAI_ARGS(0, "th\\\":\\\"a.c\\\"}") \
	OAI_DELTA("{\"tool_calls\":[{\"index\":1,\"id\":\"call_def456\",\"type\":\"function\"," \
	          "\"function\":{\"name\":\"read_file\",\"arguments\":\"\"}}]}", "null") \
	OAI_ARGS(1, "{\\\"path\\\":\\\"b.c\\\",\\\"li") \
	OAI_ARGS(1, "nes\\\":{\\\"from\\\":1,\\\"to\\\":40}}") \
	OAI_DELTA("{}", "\"tool_calls\"") \
	OAI_CHUNK("\"choices\":[],\"usage\":{\"prompt_tokens\":3120,\"completion_tokens\":17," \
	          "\"total_tokens\":3137,\"prompt_tokens_details\":{\"cached_tokens\":2048}}") \
	"data: [DONE]\n\n"

/* Pieces for the hostile-stream tests. */
#define ANTH_START \
	"event: message_start\n" \
	"data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5}}}\n\n"
#define ANTH_TEXT0 \
	"data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":" \
	"{\"type\":\"text\",\"text\":\"\"}}\n\n"
#define ANTH_TOOL0 \
	"data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":" \
	"{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"read_file\",\"input\":{}}}\n\n"
#define ANTH_END \
	"data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"}," \
	"\"usage\":{\"output_tokens\":7}}\n\n" \
	"data: {\"type\":\"message_stop\"}\n\n"
#define ANTH_UNKNOWN_STREAM \
	ANTH_START \
	"event: future\ndata: {\"type\":\"future\"}\n\n" \
	ANTH_TEXT0 \
	ANTH_DELTA(0, "text_delta", "text", "ok") \
	ANTH_DELTA(0, "citations_delta", "x", "y") \
	ANTH_STOP(0) \
	ANTH_END
#define OAI_USAGE \
	OAI_CHUNK("\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}")
#define OAI_CALL0 \
	OAI_DELTA("{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\"," \
	          "\"function\":{\"name\":\"read_file\",\"arguments\":\"\"}}]}", "null")
#define OAI_ERROR_STREAM \
	OAI_DELTA("{\"content\":\"Hel\"}", "null") \
	"data: {\"error\":{\"message\":\"The server had an error while processing your " \
	"request. Sorry about that!\",\"type\":\"server_error\",\"param\":null,\"code\":null}}\n\n"
#define OAI_IGNORED_STREAM \
	"id: 1\nretry: 100\nfoo\n" \
	OAI_DELTA("{\"content\":\"x\"}", "\"stop\"") \
	OAI_USAGE \
	"data: [DONE]\n\n"
#define OAI_BAD_ARGS_STREAM \
	OAI_CALL0 \
	OAI_ARGS(0, "{\\\"a\\\":") \
	OAI_ARGS(0, "1") \
	OAI_DELTA("{\"tool_calls\":[{\"index\":1,\"id\":\"call_2\",\"function\":{\"name\":" \
	          "\"list_dir\"}}]}", "null") \
	OAI_DELTA("{\"tool_calls\":[{\"index\":1,\"id\":\"\",\"function\":{\"name\":" \
	          "\"list_dir\",\"arguments\":\" \"}}]}", "\"tool_calls\"") \
	OAI_USAGE \
	"data: [DONE]\n\n"
/* clang-format on */

/* ---- helpers -------------------------------------------------------------- */

static json_t *
jparse(const char *s)
{
	json_error_t je;
	json_t *v = json_loads(s, JSON_DECODE_ANY, &je);

	if (v == NULL)
		fail_msg("bad test JSON (%d:%d %s): %s", je.line, je.column, je.text, s);
	return v;
}

/* got must be the same JSON as want. */
static void
assert_json_is(const json_t *got, const char *want)
{
	json_t *w = jparse(want);
	char *g;

	if (!json_equal(got, w)) {
		g = json_dumps(got, JSON_COMPACT | JSON_ENCODE_ANY);
		print_error("got  %s\nwant %s\n", g != NULL ? g : "(null)", want);
		free(g);
		json_decref(w);
		fail();
	}
	json_decref(w);
}

static void
assert_text_json(const char *got, const char *want)
{
	json_t *g;

	assert_non_null(got);
	g = jparse(got);
	assert_json_is(g, want);
	json_decref(g);
}

static void
assert_usage(const struct wire_usage *u, uint64_t in, uint64_t out, uint64_t cr, uint64_t cw)
{
	assert_int_equal(u->input, in);
	assert_int_equal(u->output, out);
	assert_int_equal(u->cache_read, cr);
	assert_int_equal(u->cache_write, cw);
}

static void
assert_same_resp(const struct wire_resp *a, const struct wire_resp *b)
{
	char *s;

	assert_int_equal(a->stop, b->stop);
	assert_memory_equal(&a->usage, &b->usage, sizeof(a->usage));
	if (!json_equal(a->content, b->content)) {
		s = json_dumps(a->content, JSON_COMPACT);
		print_error("content differs: %s\n", s);
		free(s);
		fail();
	}
}

/* s with each \n turned into eol ("\r\n" or "\r"). */
static char *
with_eol(const char *s, const char *eol)
{
	size_t n = 0, i, o = 0, el = strlen(eol);
	char *p;

	for (i = 0; s[i] != '\0'; i++)
		n += s[i] == '\n' ? el : 1;
	assert_non_null(p = malloc(n + 1));
	for (i = 0; s[i] != '\0'; i++) {
		if (s[i] == '\n') {
			memcpy(p + o, eol, el);
			o += el;
		} else
			p[o++] = s[i];
	}
	p[o] = '\0';
	return p;
}

/* Feed len bytes of s in pieces of chunk bytes (0: all at once), then
 * finish.  Returns what the first failing call returned, or finish's. */
static int
stream_run(enum wire_kind k, const char *s, size_t len, size_t chunk, struct wire_resp *out,
           char *err, size_t errsz)
{
	struct wire_stream *st = wire_stream_new(k);
	size_t off, n;
	int rv = 0;

	assert_non_null(st);
	memset(out, 0, sizeof(*out));
	for (off = 0; rv == 0 && off < len; off += n) {
		n = chunk == 0 || len - off < chunk ? len - off : chunk;
		rv = wire_stream_feed(st, s + off, n, err, errsz);
	}
	if (rv == 0)
		rv = wire_stream_finish(st, out, err, errsz);
	wire_stream_free(st);
	return rv;
}

/* The stream must give the same response as the whole body, whichever way
 * it is cut into pieces and whichever line ends it uses. */
static void
check_stream_modes(enum wire_kind k, const char *stream, const struct wire_resp *want)
{
	static const size_t chunks[] = {0, 1, 7, 64};
	static const char *const eols[] = {"\n", "\r\n", "\r"};
	struct wire_resp got;
	char err[256], *s;
	size_t i, j;

	for (j = 0; j < sizeof(eols) / sizeof(eols[0]); j++) {
		s = with_eol(stream, eols[j]);
		for (i = 0; i < sizeof(chunks) / sizeof(chunks[0]); i++) {
			if (stream_run(k, s, strlen(s), chunks[i], &got, err, sizeof(err)) != 0)
				fail_msg("eol %zu chunk %zu: %s", j, chunks[i], err);
			assert_same_resp(&got, want);
			wire_resp_free(&got);
		}
		free(s);
	}
}

/* Every prefix of the stream that stops before the end of its last event's
 * line must fail at finish; the prefix through that line's end succeeds. */
static void
check_stream_cuts(enum wire_kind k, const char *stream, const char *last)
{
	const char *end = strstr(stream, last);
	struct wire_resp r;
	char err[256];
	size_t cut, whole;

	assert_non_null(end);
	whole = (size_t)(end - stream) + strlen(last);
	for (cut = 0; cut < whole; cut++) {
		err[0] = '\0';
		if (stream_run(k, stream, cut, 0, &r, err, sizeof(err)) != -1)
			fail_msg("a stream cut at %zu of %zu was taken", cut, whole);
		assert_null(r.content);
		assert_true(err[0] != '\0');
	}
	assert_int_equal(stream_run(k, stream, whole, 0, &r, err, sizeof(err)), 0);
	wire_resp_free(&r);
}

/* Feed one whole stream text; expect feed or finish to fail with want. */
static void
assert_stream_fails(enum wire_kind k, const char *s, const char *want)
{
	struct wire_resp r;
	char err[512] = "";

	if (stream_run(k, s, strlen(s), 0, &r, err, sizeof(err)) != -1)
		fail_msg("stream taken, wanted \"%s\": %s", want, s);
	assert_null(r.content);
	assert_reason(err, want);
}

static void
assert_parse_fails(enum wire_kind k, const char *body, const char *want)
{
	struct wire_resp r;
	char err[512] = "";

	if (wire_parse(k, body, strlen(body), &r, err, sizeof(err)) != -1)
		fail_msg("body taken, wanted \"%s\": %s", want, body);
	assert_null(r.content);
	assert_reason(err, want);
}

static void
parse_ok(enum wire_kind k, const char *body, struct wire_resp *r)
{
	char err[256];

	if (wire_parse(k, body, strlen(body), r, err, sizeof(err)) != 0)
		fail_msg("%s: %s", err, body);
}

/* ---- requests ------------------------------------------------------------- */

#define SCHEMA                                                                                     \
	"{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"}},"                    \
	"\"required\":[\"path\"]}"

#define NEUTRAL_MESSAGES                                                                           \
	"[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Read a.c and b.c.\"}]},"   \
	"{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":"                        \
	"\"I'll read both files.\"},{\"type\":\"tool_use\",\"id\":\"toolu_01A\",\"name\":"         \
	"\"read_file\",\"input\":{\"path\":\"a.c\"}},{\"type\":\"tool_use\",\"id\":"               \
	"\"toolu_01B\",\"name\":\"read_file\",\"input\":{\"path\":\"b.c\"}}]},"                    \
	"{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":"               \
	"\"toolu_01A\",\"content\":\"int main(void) { return 0; }\",\"is_error\":false},"          \
	"{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_01B\",\"content\":"                     \
	"\"no such file\",\"is_error\":true},{\"type\":\"text\",\"text\":"                         \
	"\"Also check the Makefile.\"},{\"type\":\"text\",\"text\":\"Then stop.\"}]}]"

#define NEUTRAL_TOOLS                                                                              \
	"[{\"name\":\"read_file\",\"description\":\"Read a file of the workspace.\","              \
	"\"input_schema\":" SCHEMA "},{\"name\":\"list_dir\",\"input_schema\":"                    \
	"{\"type\":\"object\",\"properties\":{}}}]"

#define NEUTRAL_REQ                                                                                \
	"{\"system\":\"You are a careful engineer.\",\"messages\":" NEUTRAL_MESSAGES               \
	",\"tools\":" NEUTRAL_TOOLS "}"

static char *
request(enum wire_kind k, const char *neutral, int stream)
{
	json_t *req = jparse(neutral);
	char err[256], *s;

	s = wire_request(k, req, k == WIRE_OPENAI ? "gpt-4.1" : "claude-sonnet-4-20250514", 8192,
	                 stream, err, sizeof(err));
	json_decref(req);
	if (s == NULL)
		fail_msg("%s", err);
	return s;
}

static void
t_path(void **state)
{
	assert_string_equal(wire_path(WIRE_ANTHROPIC), "/v1/messages");
	assert_string_equal(wire_path(WIRE_OPENAI), "/chat/completions");
}

static void
t_anth_request(void **state)
{
	char *s;

	s = request(WIRE_ANTHROPIC, NEUTRAL_REQ, 0);
	assert_text_json(s,
	                 "{\"model\":\"claude-sonnet-4-20250514\",\"max_tokens\":8192,"
	                 "\"system\":\"You are a careful engineer.\",\"messages\":" NEUTRAL_MESSAGES
	                 ",\"tools\":" NEUTRAL_TOOLS "}");
	free(s);
	s = request(WIRE_ANTHROPIC, NEUTRAL_REQ, 1);
	assert_text_json(s,
	                 "{\"model\":\"claude-sonnet-4-20250514\",\"max_tokens\":8192,"
	                 "\"system\":\"You are a careful engineer.\",\"messages\":" NEUTRAL_MESSAGES
	                 ",\"tools\":" NEUTRAL_TOOLS ",\"stream\":true}");
	free(s);
	/* No system, no tools (an empty list is none). */
	s = request(
	    WIRE_ANTHROPIC,
	    "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}],"
	    "\"tools\":[]}",
	    0);
	assert_text_json(s, "{\"model\":\"claude-sonnet-4-20250514\",\"max_tokens\":8192,"
	                    "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\","
	                    "\"text\":\"hi\"}]}]}");
	free(s);
}

#define OAI_TOOLS                                                                                  \
	"[{\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"description\":"            \
	"\"Read a file of the workspace.\",\"parameters\":" SCHEMA "}},"                           \
	"{\"type\":\"function\",\"function\":{\"name\":\"list_dir\",\"parameters\":"               \
	"{\"type\":\"object\",\"properties\":{}}}}]"

#define OAI_MESSAGES                                                                               \
	"[{\"role\":\"system\",\"content\":\"You are a careful engineer.\"},"                      \
	"{\"role\":\"user\",\"content\":\"Read a.c and b.c.\"},"                                   \
	"{\"role\":\"assistant\",\"content\":\"I'll read both files.\",\"tool_calls\":["           \
	"{\"id\":\"toolu_01A\",\"type\":\"function\",\"function\":{\"name\":\"read_file\","        \
	"\"arguments\":\"{\\\"path\\\":\\\"a.c\\\"}\"}},"                                          \
	"{\"id\":\"toolu_01B\",\"type\":\"function\",\"function\":{\"name\":\"read_file\","        \
	"\"arguments\":\"{\\\"path\\\":\\\"b.c\\\"}\"}}]},"                                        \
	"{\"role\":\"tool\",\"tool_call_id\":\"toolu_01A\",\"content\":"                           \
	"\"int main(void) { return 0; }\"},"                                                       \
	"{\"role\":\"tool\",\"tool_call_id\":\"toolu_01B\",\"content\":"                           \
	"\"error: no such file\"},"                                                                \
	"{\"role\":\"user\",\"content\":\"Also check the Makefile.\\nThen stop.\"}]"

static void
t_oai_request(void **state)
{
	char *s;

	s = request(WIRE_OPENAI, NEUTRAL_REQ, 0);
	assert_text_json(s, "{\"model\":\"gpt-4.1\",\"max_tokens\":8192,\"messages\":" OAI_MESSAGES
	                    ",\"tools\":" OAI_TOOLS "}");
	free(s);
	s = request(WIRE_OPENAI, NEUTRAL_REQ, 1);
	assert_text_json(s, "{\"model\":\"gpt-4.1\",\"max_tokens\":8192,\"messages\":" OAI_MESSAGES
	                    ",\"tools\":" OAI_TOOLS ",\"stream\":true,"
	                    "\"stream_options\":{\"include_usage\":true}}");
	free(s);
}

/* Text before tool results puts the user message first; an assistant
 * message of tool calls only has content null; no system, no tools. */
static void
t_oai_request_order(void **state)
{
	char *s;

	s = request(
	    WIRE_OPENAI,
	    "{\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":"
	    "\"call_1\",\"name\":\"list_dir\",\"input\":{}}]},{\"role\":\"user\",\"content\":["
	    "{\"type\":\"text\",\"text\":\"Here:\"},{\"type\":\"tool_result\",\"tool_use_id\":"
	    "\"call_1\",\"content\":\"a.c b.c\"},{\"type\":\"tool_result\",\"tool_use_id\":"
	    "\"call_1\"}]}]}",
	    0);
	assert_text_json(
	    s, "{\"model\":\"gpt-4.1\",\"max_tokens\":8192,\"messages\":[{\"role\":\"assistant\","
	       "\"content\":null,\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\","
	       "\"function\":{\"name\":\"list_dir\",\"arguments\":\"{}\"}}]},{\"role\":\"user\","
	       "\"content\":\"Here:\"},{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":"
	       "\"a.c b.c\"},{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"\"}]}");
	free(s);
}

/* A tool result of text and an image (an MCP server's): Anthropic takes
 * the blocks as they are; OpenAI's tool message takes text only, so the
 * texts are joined and the image is a note. */
static void
t_result_image(void **state)
{
	static const char req[] =
	    "{\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":"
	    "\"call_1\",\"name\":\"shot\",\"input\":{}}]},{\"role\":\"user\",\"content\":["
	    "{\"type\":\"tool_result\",\"tool_use_id\":\"call_1\",\"content\":[{\"type\":"
	    "\"text\",\"text\":\"a shot:\"},{\"type\":\"image\",\"source\":{\"type\":\"base64\","
	    "\"media_type\":\"image/png\",\"data\":\"iVBORw0KGgo=\"}},{\"type\":\"text\","
	    "\"text\":\"done\"}]}]}]}";
	json_t *got;
	char *s;

	s = request(WIRE_ANTHROPIC, req, 0);
	got = jparse(s);
	assert_json_is(json_object_get(json_array_get(json_object_get(json_array_get(
	                   json_object_get(got, "messages"), 1), "content"), 0), "content"),
	               "[{\"type\":\"text\",\"text\":\"a shot:\"},{\"type\":\"image\",\"source\":"
	               "{\"type\":\"base64\",\"media_type\":\"image/png\",\"data\":"
	               "\"iVBORw0KGgo=\"}},{\"type\":\"text\",\"text\":\"done\"}]");
	json_decref(got);
	free(s);
	s = request(WIRE_OPENAI, req, 0);
	got = jparse(s);
	assert_json_is(json_array_get(json_object_get(got, "messages"), 1),
	               "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"a shot:\\n"
	               "[an image the tool returned is left out: tool results take no images "
	               "here]\\ndone\"}");
	json_decref(got);
	free(s);
}

/* A response's content goes back as the assistant's turn and its tool
 * results follow: the ids and inputs survive the trip both ways. */
static void
roundtrip(enum wire_kind k, const char *body, const char *want_msgs)
{
	json_t *req, *msgs, *results;
	struct wire_resp r;
	char err[256], *s;

	parse_ok(k, body, &r);
	req = jparse("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\","
	             "\"text\":\"Read a.c and b.c.\"}]}]}");
	msgs = json_object_get(req, "messages");
	json_array_append_new(msgs,
	                      json_pack("{s:s, s:O}", "role", "assistant", "content", r.content));
	results = json_pack("[{s:s, s:O, s:s}, {s:s, s:O, s:s, s:b}]", "type", "tool_result",
	                    "tool_use_id", json_object_get(json_array_get(r.content, 1), "id"),
	                    "content", "A", "type", "tool_result", "tool_use_id",
	                    json_object_get(json_array_get(r.content, 2), "id"), "content", "B",
	                    "is_error", 1);
	json_array_append_new(msgs, json_pack("{s:s, s:o}", "role", "user", "content", results));
	s = wire_request(k, req, "m", 100, 0, err, sizeof(err));
	if (s == NULL)
		fail_msg("%s", err);
	msgs = jparse(s);
	assert_json_is(json_object_get(msgs, "messages"), want_msgs);
	json_decref(msgs);
	free(s);
	json_decref(req);
	wire_resp_free(&r);
}

/* A conversation built a message at a time gives, at every length, the body
 * wire_request makes of the whole request; what may not be added (system
 * or tools after the first messages, a bad message) leaves it as it was. */
static void
conv_step(enum wire_kind k)
{
	json_t *all = jparse(NEUTRAL_REQ), *msgs = json_object_get(all, "messages"), *part, *one;
	struct wire_conv *c = wire_conv_new(k);
	char err[256], *got, *want, *before;
	size_t i;

	assert_non_null(c);
	for (i = 0; i < json_array_size(msgs); i++) {
		part = i == 0 ? json_pack("{s:O, s:O, s:[O]}", "system", json_object_get(all, "system"),
		                          "tools", json_object_get(all, "tools"), "messages",
		                          json_array_get(msgs, i))
		              : json_pack("{s:[O]}", "messages", json_array_get(msgs, i));
		assert_int_equal(wire_conv_add(c, part, err, sizeof(err)), 0);
		json_decref(part);
		assert_int_equal(wire_conv_count(c), i + 1);
		/* the whole request up to this message, made at once */
		one = json_deep_copy(all);
		while (json_array_size(json_object_get(one, "messages")) > i + 1)
			json_array_remove(json_object_get(one, "messages"), i + 1);
		want = wire_request(k, one, "m-1", 100, 1, err, sizeof(err));
		json_decref(one);
		got = wire_conv_body(c, "m-1", 100, 1, err, sizeof(err));
		assert_non_null(want);
		assert_non_null(got);
		assert_string_equal(got, want);
		free(want);
		free(got);
	}
	before = wire_conv_body(c, "m-1", 100, 0, err, sizeof(err));
	part = jparse("{\"system\":\"late\",\"messages\":[]}");
	assert_int_equal(wire_conv_add(c, part, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "first messages only"));
	json_decref(part);
	part = jparse("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\","
	              "\"text\":\"ok\"}]},{\"role\":\"robot\",\"content\":[]}]}");
	assert_int_equal(wire_conv_add(c, part, err, sizeof(err)), -1);
	json_decref(part);
	assert_int_equal(wire_conv_count(c), json_array_size(msgs));
	got = wire_conv_body(c, "m-1", 100, 0, err, sizeof(err));
	assert_string_equal(got, before);
	free(got);
	free(before);
	wire_conv_free(c);
	json_decref(all);
}

static void
t_conv(void **state)
{
	struct wire_conv *c = wire_conv_new(WIRE_OPENAI);
	char err[64], *s;

	conv_step(WIRE_ANTHROPIC);
	conv_step(WIRE_OPENAI);
	/* an empty conversation is a body with no messages */
	s = wire_conv_body(c, "m", 1, 1, err, sizeof(err));
	assert_text_json(s, "{\"model\":\"m\",\"max_tokens\":1,\"messages\":[],\"stream\":true,"
	                    "\"stream_options\":{\"include_usage\":true}}");
	free(s);
	assert_null(wire_conv_body(c, "", 1, 1, err, sizeof(err)));
	assert_null(wire_conv_body(c, "m", 0, 1, err, sizeof(err)));
	/* the output limit named max_completion_tokens instead (openai only) */
	s = wire_conv_body(c, "m", 7, WIRE_MAX_COMPLETION, err, sizeof(err));
	assert_text_json(s, "{\"model\":\"m\",\"max_completion_tokens\":7,\"messages\":[]}");
	assert_null(strstr(s, "\"max_tokens\""));
	free(s);
	s = wire_conv_body(c, "m", 7, WIRE_STREAM | WIRE_MAX_COMPLETION, err, sizeof(err));
	assert_text_json(s, "{\"model\":\"m\",\"max_completion_tokens\":7,\"messages\":[],"
	                    "\"stream\":true,\"stream_options\":{\"include_usage\":true}}");
	free(s);
	assert_null(wire_conv_body(c, "m", 7, 0x4, err, sizeof(err)));
	assert_non_null(strstr(err, "unknown flags"));
	wire_conv_free(c);
	c = wire_conv_new(WIRE_ANTHROPIC);
	assert_null(wire_conv_body(c, "m", 7, WIRE_MAX_COMPLETION, err, sizeof(err)));
	assert_non_null(strstr(err, "unknown flags"));
	s = wire_conv_body(c, "m", 7, 0, err, sizeof(err));
	assert_text_json(s, "{\"model\":\"m\",\"max_tokens\":7,\"messages\":[]}");
	free(s);
	wire_conv_free(c);
	assert_null(wire_conv_new((enum wire_kind)7));
}

static void
t_roundtrip(void **state)
{
	roundtrip(
	    WIRE_ANTHROPIC, ANTH_TOOL_BODY,
	    "[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Read a.c and b.c.\"}]},"
	    "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":"
	    "\"I'll read both files.\"},{\"type\":\"tool_use\",\"id\":"
	    "\"toolu_01A09q90qw90lq917835lq9\",\"name\":\"read_file\",\"input\":{\"path\":"
	    "\"a.c\"}},{\"type\":\"tool_use\",\"id\":\"toolu_01B3xk2Rw7LmPq4sT8vY6nZ\",\"name\":"
	    "\"read_file\",\"input\":{\"path\":\"b.c\",\"lines\":{\"from\":1,\"to\":40}}}]},"
	    "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":"
	    "\"toolu_01A09q90qw90lq917835lq9\",\"content\":\"A\"},{\"type\":\"tool_result\","
	    "\"tool_use_id\":\"toolu_01B3xk2Rw7LmPq4sT8vY6nZ\",\"content\":\"B\","
	    "\"is_error\":true}]}]");
	roundtrip(WIRE_OPENAI, OAI_TOOL_BODY,
	          "[{\"role\":\"user\",\"content\":\"Read a.c and b.c.\"},{\"role\":\"assistant\","
	          "\"content\":\"I'll read both files.\",\"tool_calls\":[{\"id\":\"call_abc123\","
	          "\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"arguments\":"
	          "\"{\\\"path\\\":\\\"a.c\\\"}\"}},{\"id\":\"call_def456\",\"type\":\"function\","
	          "\"function\":{\"name\":\"read_file\",\"arguments\":\"{\\\"path\\\":\\\"b.c\\\","
	          "\\\"lines\\\":{\\\"from\\\":1,\\\"to\\\":40}}\"}}]},{\"role\":\"tool\","
	          "\"tool_call_id\":\"call_abc123\",\"content\":\"A\"},{\"role\":\"tool\","
	          "\"tool_call_id\":\"call_def456\",\"content\":\"error: B\"}]");
}

static const struct {
	const char *req, *why;
} bad_requests[] = {
    {"[]", "the request is not an object"},
    {"{}", "messages is missing"},
    {"{\"messages\":{}}", "messages is missing or not an array"},
    {"{\"messages\":[],\"temperature\":1}", "unknown member \"temperature\""},
    {"{\"messages\":[],\"system\":5}", "system is not a string"},
    {"{\"messages\":[5]}", "messages[0]: role"},
    {"{\"messages\":[{\"role\":\"system\",\"content\":[]}]}", "messages[0]: role"},
    {"{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", "content is not a non-empty"},
    {"{\"messages\":[{\"role\":\"user\",\"content\":[]}]}", "content is not a non-empty"},
    {"{\"messages\":[{\"role\":\"user\",\"name\":\"x\",\"content\":[{\"type\":\"text\","
     "\"text\":\"a\"}]}]}",
     "messages[0]: unknown member \"name\""},
    {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\",\"source\":{}}]}]}",
     "messages[0].content[0]: role user cannot send a block of type \"image\""},
    {"{\"messages\":[{\"role\":\"user\",\"content\":[5]}]}", "messages[0].content[0] is not"},
    {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\"}]}]}", "text is missing"},
    {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\","
     "\"cache_control\":{\"type\":\"ephemeral\"}}]}]}",
     "unknown member \"cache_control\""},
    {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_use\",\"id\":\"a\","
     "\"name\":\"b\",\"input\":{}}]}]}",
     "role user cannot send a block of type \"tool_use\""},
    {"{\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_result\","
     "\"tool_use_id\":\"a\"}]}]}",
     "role assistant cannot send a block of type \"tool_result\""},
    {"{\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\","
     "\"name\":\"b\",\"input\":{}}]}]}",
     "messages[0].content[0]: id"},
    {"{\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"\","
     "\"name\":\"b\",\"input\":{}}]}]}",
     "id is missing"},
    {"{\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":"
     "\"a\\n\",\"name\":\"b\",\"input\":{}}]}]}",
     "id is missing"},
    {"{\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"a\","
     "\"input\":{}}]}]}",
     "name is missing"},
    {"{\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"a\","
     "\"name\":\"read file\",\"input\":{}}]}]}",
     "name is missing"},
    {"{\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"a\","
     "\"name\":\"b\",\"input\":[]}]}]}",
     "input is missing or not an object"},
    {"{\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"a\","
     "\"name\":\"b\",\"input\":null}]}]}",
     "input is missing or not an object"},
    {"{\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"a\","
     "\"name\":\"b\"}]}]}",
     "input is missing or not an object"},
    {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\"}]}]}",
     "tool_use_id is missing"},
    {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","
     "\"tool_use_id\":\"a\",\"content\":5}]}]}",
     "content is not a string or an array"},
    {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","
     "\"tool_use_id\":\"a\",\"content\":[]}]}]}",
     "content is not a string or an array of 1 to 16"},
    {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","
     "\"tool_use_id\":\"a\",\"content\":[{\"type\":\"tool_use\",\"id\":\"b\"}]}]}]}",
     "messages[0].content[0].content[0] is not a text or an image block"},
    {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","
     "\"tool_use_id\":\"a\",\"content\":[{\"type\":\"image\",\"source\":{\"type\":"
     "\"url\",\"url\":\"http://x/\"}}]}]}]}",
     "source is not an object of type base64"},
    {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","
     "\"tool_use_id\":\"a\",\"content\":[{\"type\":\"image\",\"source\":{\"type\":"
     "\"base64\",\"media_type\":\"image/svg+xml\",\"data\":\"AAAA\"}}]}]}]}",
     "media_type is not image/png"},
    {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","
     "\"tool_use_id\":\"a\",\"content\":[{\"type\":\"image\",\"source\":{\"type\":"
     "\"base64\",\"media_type\":\"image/png\",\"data\":\"AA=A\"}}]}]}]}",
     "data is not base64"},
    {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","
     "\"tool_use_id\":\"a\",\"content\":[{\"type\":\"image\",\"source\":{\"type\":"
     "\"base64\",\"media_type\":\"image/png\",\"data\":\"AAA\"}}]}]}]}",
     "data is not base64 of 1 to"},
    {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","
     "\"tool_use_id\":\"a\",\"content\":[{\"type\":\"image\",\"source\":{\"type\":"
     "\"base64\",\"media_type\":\"image/png\",\"data\":\"AAAA\",\"url\":\"x\"}}]}]}]}",
     "unknown member \"url\""},
    {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","
     "\"tool_use_id\":\"a\",\"is_error\":\"yes\"}]}]}",
     "is_error is not a boolean"},
    {"{\"messages\":[],\"tools\":{}}", "tools is not an array"},
    {"{\"messages\":[],\"tools\":[{\"name\":\"a b\",\"input_schema\":{}}]}", "tools[0]: name"},
    {"{\"messages\":[],\"tools\":[{\"name\":\"a\"}]}", "tools[0]: input_schema"},
    {"{\"messages\":[],\"tools\":[{\"name\":\"a\",\"input_schema\":{},\"description\":5}]}",
     "tools[0]: description"},
    {"{\"messages\":[],\"tools\":[{\"name\":\"a\",\"input_schema\":{},\"type\":\"custom\"}]}",
     "tools[0]: unknown member \"type\""},
};

static void
t_request_rejects(void **state)
{
	enum wire_kind k;
	char err[256];
	json_t *req;
	size_t i;

	for (k = WIRE_ANTHROPIC; k <= WIRE_OPENAI; k++)
		for (i = 0; i < sizeof(bad_requests) / sizeof(bad_requests[0]); i++) {
			req = jparse(bad_requests[i].req);
			err[0] = '\0';
			if (wire_request(k, req, "m", 100, 0, err, sizeof(err)) != NULL)
				fail_msg("taken: %s", bad_requests[i].req);
			assert_reason(err, bad_requests[i].why);
			json_decref(req);
		}
}

static void
t_request_args(void **state)
{
	json_t *req = jparse("{\"messages\":[]}");
	char err[256], *s;

	assert_null(wire_request(WIRE_OPENAI, NULL, "m", 100, 0, err, sizeof(err)));
	assert_reason(err, "not an object");
	assert_null(wire_request(WIRE_OPENAI, req, NULL, 100, 0, err, sizeof(err)));
	assert_reason(err, "model");
	assert_null(wire_request(WIRE_OPENAI, req, "", 100, 0, err, sizeof(err)));
	assert_reason(err, "model");
	assert_null(wire_request(WIRE_OPENAI, req, "gpt\n4", 100, 0, err, sizeof(err)));
	assert_reason(err, "model");
	assert_null(wire_request(WIRE_ANTHROPIC, req, "m", 0, 0, err, sizeof(err)));
	assert_reason(err, "max_tokens");
	assert_null(
	    wire_request(WIRE_ANTHROPIC, req, "m", (uint64_t)INT64_MAX + 1, 0, err, sizeof(err)));
	assert_reason(err, "max_tokens");
	assert_null(wire_request((enum wire_kind)7, req, "m", 1, 0, err, sizeof(err)));
	assert_reason(err, "unknown provider kind");
	/* NULL err is allowed. */
	assert_null(wire_request(WIRE_ANTHROPIC, req, "m", 0, 0, NULL, 0));
	s = wire_request(WIRE_ANTHROPIC, req, "m", (uint64_t)INT64_MAX, 0, err, sizeof(err));
	assert_text_json(s, "{\"model\":\"m\",\"max_tokens\":9223372036854775807,\"messages\":[]}");
	free(s);
	json_decref(req);
}

/* ---- whole responses ------------------------------------------------------ */

static void
t_anth_parse(void **state)
{
	struct wire_resp r;
	char want[2048];

	parse_ok(WIRE_ANTHROPIC, ANTH_TEXT_BODY, &r);
	assert_json_is(r.content, ANTH_TEXT_CONTENT);
	assert_int_equal(r.stop, WIRE_STOP_END);
	assert_usage(&r.usage, 2095, 503, 0, 0);
	wire_resp_free(&r);
	wire_resp_free(&r); /* twice is harmless */

	parse_ok(WIRE_ANTHROPIC, ANTH_TOOL_BODY, &r);
	snprintf(want, sizeof(want), TOOL_CONTENT, "toolu_01A09q90qw90lq917835lq9",
	         "toolu_01B3xk2Rw7LmPq4sT8vY6nZ");
	assert_json_is(r.content, want);
	assert_int_equal(r.stop, WIRE_STOP_TOOL_USE);
	assert_usage(&r.usage, 472, 133, 2048, 1024);
	wire_resp_free(&r);
}

static void
t_oai_parse(void **state)
{
	struct wire_resp r;
	char want[2048];

	parse_ok(WIRE_OPENAI, OAI_TEXT_BODY, &r);
	assert_json_is(r.content, OAI_TEXT_CONTENT);
	assert_int_equal(r.stop, WIRE_STOP_END);
	assert_usage(&r.usage, 19, 10, 0, 0);
	wire_resp_free(&r);

	parse_ok(WIRE_OPENAI, OAI_TOOL_BODY, &r);
	snprintf(want, sizeof(want), TOOL_CONTENT, "call_abc123", "call_def456");
	assert_json_is(r.content, want);
	assert_int_equal(r.stop, WIRE_STOP_TOOL_USE);
	/* prompt_tokens counts the cached ones: input is the rest. */
	assert_usage(&r.usage, 3120 - 2048, 17, 2048, 0);
	wire_resp_free(&r);
}

static void
anth_stop_is(const char *reason, enum wire_stop want)
{
	struct wire_resp r;
	char body[512];

	snprintf(body, sizeof(body),
	         "{\"content\":[{\"type\":\"text\",\"text\":\"\"}],%s\"usage\":{\"input_tokens\":1,"
	         "\"output_tokens\":2,\"cache_read_input_tokens\":null}}",
	         reason);
	parse_ok(WIRE_ANTHROPIC, body, &r);
	assert_int_equal(r.stop, want);
	assert_json_is(r.content, "[]"); /* the empty text is dropped */
	assert_usage(&r.usage, 1, 2, 0, 0);
	wire_resp_free(&r);
}

static void
oai_stop_is(const char *reason, enum wire_stop want)
{
	struct wire_resp r;
	char body[512];

	snprintf(
	    body, sizeof(body),
	    "{\"choices\":[{\"message\":{\"content\":\"\"},%s}],\"usage\":{\"prompt_tokens\":5,"
	    "\"completion_tokens\":1,\"prompt_tokens_details\":null}}",
	    reason);
	parse_ok(WIRE_OPENAI, body, &r);
	assert_int_equal(r.stop, want);
	assert_json_is(r.content, "[]");
	assert_usage(&r.usage, 5, 1, 0, 0);
	wire_resp_free(&r);
}

static void
t_stop_reasons(void **state)
{
	anth_stop_is("\"stop_reason\":\"end_turn\",", WIRE_STOP_END);
	anth_stop_is("\"stop_reason\":\"stop_sequence\",", WIRE_STOP_END);
	anth_stop_is("\"stop_reason\":\"tool_use\",", WIRE_STOP_TOOL_USE);
	anth_stop_is("\"stop_reason\":\"max_tokens\",", WIRE_STOP_MAX_TOKENS);
	anth_stop_is("\"stop_reason\":\"refusal\",", WIRE_STOP_OTHER);
	anth_stop_is("\"stop_reason\":\"pause_turn\",", WIRE_STOP_OTHER);
	anth_stop_is("\"stop_reason\":\"stop\",", WIRE_STOP_OTHER);
	anth_stop_is("\"stop_reason\":null,", WIRE_STOP_OTHER);
	anth_stop_is("", WIRE_STOP_OTHER);
	oai_stop_is("\"finish_reason\":\"stop\"", WIRE_STOP_END);
	oai_stop_is("\"finish_reason\":\"tool_calls\"", WIRE_STOP_TOOL_USE);
	oai_stop_is("\"finish_reason\":\"length\"", WIRE_STOP_MAX_TOKENS);
	oai_stop_is("\"finish_reason\":\"content_filter\"", WIRE_STOP_OTHER);
	oai_stop_is("\"finish_reason\":\"end_turn\"", WIRE_STOP_OTHER);
	oai_stop_is("\"finish_reason\":null", WIRE_STOP_OTHER);
	oai_stop_is("\"finish_reason\":5", WIRE_STOP_OTHER);
}

#define OAI_ONE_CALL(args)                                                                         \
	"{\"choices\":[{\"message\":{\"content\":null,\"tool_calls\":[{\"id\":\"call_1\","         \
	"\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"arguments\":" args           \
	"}}]},\"finish_reason\":\"tool_calls\"}],\"usage\":{\"prompt_tokens\":5,"                  \
	"\"completion_tokens\":1}}"

static void
oai_input_is(const char *args, const char *want)
{
	struct wire_resp r;

	parse_ok(WIRE_OPENAI, args, &r);
	assert_int_equal(json_array_size(r.content), 1);
	assert_json_is(json_object_get(json_array_get(r.content, 0), "input"), want);
	wire_resp_free(&r);
}

/* Bad arguments are the model's mistake, answered with a tool error. */
static void
t_oai_bad_arguments(void **state)
{
	oai_input_is(OAI_ONE_CALL("\"[1,2]\""), "null");
	oai_input_is(OAI_ONE_CALL("\"not json\""), "null");
	oai_input_is(OAI_ONE_CALL("\"{\\\"path\\\":\""), "null");
	oai_input_is(OAI_ONE_CALL("\"\\\"a.c\\\"\""), "null");
	oai_input_is(OAI_ONE_CALL("\"{\\\"a\\\":1,\\\"a\\\":2}\""), "null");
	oai_input_is(OAI_ONE_CALL("\"\""), "{}");
	oai_input_is(OAI_ONE_CALL("\" \\n\""), "{}");
	oai_input_is(OAI_ONE_CALL("\" {\\\"path\\\":\\\"a.c\\\"} \""), "{\"path\":\"a.c\"}");
	assert_parse_fails(WIRE_OPENAI, OAI_ONE_CALL("{\"path\":\"a.c\"}"),
	                   "arguments is not a string");
	assert_parse_fails(WIRE_OPENAI, OAI_ONE_CALL("null"), "arguments is not a string");
}

#define ANTH_USE(id, name, input)                                                                  \
	"{\"content\":[{\"type\":\"tool_use\",\"id\":" id ",\"name\":" name ",\"input\":" input    \
	"}],\"stop_reason\":\"tool_use\",\"usage\":{\"input_tokens\":1,"                           \
	"\"output_tokens\":1}}"

static void
t_anth_parse_rejects(void **state)
{
	char body[1024], name[300];

	assert_parse_fails(WIRE_ANTHROPIC, "[]", "not a JSON object");
	assert_parse_fails(WIRE_ANTHROPIC, "", "bad JSON");
	assert_parse_fails(WIRE_ANTHROPIC, "{\"content\":[]", "bad JSON");
	assert_parse_fails(WIRE_ANTHROPIC, "{\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}",
	                   "content is missing");
	assert_parse_fails(
	    WIRE_ANTHROPIC,
	    "{\"content\":\"hi\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}",
	    "content is missing or not an array");
	assert_parse_fails(WIRE_ANTHROPIC, "{\"content\":[]}", "usage.input_tokens");
	assert_parse_fails(WIRE_ANTHROPIC, "{\"content\":[],\"usage\":{\"input_tokens\":1}}",
	                   "usage.output_tokens");
	assert_parse_fails(WIRE_ANTHROPIC,
	                   "{\"content\":[],\"usage\":{\"input_tokens\":-1,\"output_tokens\":1}}",
	                   "usage.input_tokens is not a token count");
	assert_parse_fails(
	    WIRE_ANTHROPIC,
	    "{\"content\":[],\"usage\":{\"input_tokens\":\"1\",\"output_tokens\":1}}",
	    "not a token count");
	assert_parse_fails(WIRE_ANTHROPIC,
	                   "{\"content\":[],\"usage\":{\"input_tokens\":1.5,\"output_tokens\":1}}",
	                   "not a token count");
	assert_parse_fails(WIRE_ANTHROPIC,
	                   "{\"content\":[],\"usage\":{\"input_tokens\":1,\"output_tokens\":1,"
	                   "\"cache_read_input_tokens\":true}}",
	                   "usage.cache_read_input_tokens");
	assert_parse_fails(WIRE_ANTHROPIC,
	                   "{\"content\":[],\"usage\":{\"input_tokens\":99999999999999999999,"
	                   "\"output_tokens\":1}}",
	                   "bad JSON");
	assert_parse_fails(WIRE_ANTHROPIC,
	                   "{\"content\":[5],\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}",
	                   "content[0] is not an object");
	assert_parse_fails(WIRE_ANTHROPIC,
	                   "{\"content\":[{\"type\":\"text\"}],\"usage\":{\"input_tokens\":1,"
	                   "\"output_tokens\":1}}",
	                   "content[0].text is not a string");
	assert_parse_fails(WIRE_ANTHROPIC, ANTH_USE("\"toolu_1\"", "\"read_file\"", "[]"),
	                   "content[0].input is not an object");
	assert_parse_fails(WIRE_ANTHROPIC, ANTH_USE("\"toolu_1\"", "\"read_file\"", "null"),
	                   "content[0].input is not an object");
	assert_parse_fails(WIRE_ANTHROPIC, ANTH_USE("\"\"", "\"read_file\"", "{}"), "the id");
	assert_parse_fails(WIRE_ANTHROPIC, ANTH_USE("5", "\"read_file\"", "{}"), "the id");
	assert_parse_fails(WIRE_ANTHROPIC, ANTH_USE("\"toolu\\u001b[2J\"", "\"read_file\"", "{}"),
	                   "the id");
	assert_parse_fails(WIRE_ANTHROPIC, ANTH_USE("\"toolu_\\u00e9\"", "\"read_file\"", "{}"),
	                   "the id");
	assert_parse_fails(WIRE_ANTHROPIC, ANTH_USE("\"toolu_1\"", "\"read file\"", "{}"),
	                   "the name");
	assert_parse_fails(WIRE_ANTHROPIC, ANTH_USE("\"toolu_1\"", "\"../x\"", "{}"), "the name");
	assert_parse_fails(WIRE_ANTHROPIC, ANTH_USE("\"toolu_1\"", "\"\"", "{}"), "the name");
	/* 256 bytes is the longest name. */
	memset(name, 'n', 257);
	snprintf(body, sizeof(body), ANTH_USE("\"toolu_1\"", "\"%.256s\"", "{}"), name);
	{
		struct wire_resp r;

		parse_ok(WIRE_ANTHROPIC, body, &r);
		wire_resp_free(&r);
	}
	snprintf(body, sizeof(body), ANTH_USE("\"toolu_1\"", "\"%.257s\"", "{}"), name);
	assert_parse_fails(WIRE_ANTHROPIC, body, "the name");
	/* Duplicate keys are ambiguous: refused. */
	assert_parse_fails(
	    WIRE_ANTHROPIC,
	    "{\"content\":[],\"content\":[],\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}",
	    "bad JSON");
	/* An error body with a 2xx status. */
	assert_parse_fails(
	    WIRE_ANTHROPIC,
	    "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":"
	    "\"Overloaded\"}}",
	    "provider error: overloaded_error: Overloaded");
}

static void
t_oai_parse_rejects(void **state)
{
	assert_parse_fails(WIRE_OPENAI, "5", "not a JSON object");
	assert_parse_fails(WIRE_OPENAI, "{\"usage\":{}}", "choices[0].message");
	assert_parse_fails(WIRE_OPENAI, "{\"choices\":[]}", "choices[0].message");
	assert_parse_fails(WIRE_OPENAI, "{\"choices\":{}}", "choices[0].message");
	assert_parse_fails(WIRE_OPENAI, "{\"choices\":[{\"message\":\"hi\"}]}",
	                   "choices[0].message");
	assert_parse_fails(WIRE_OPENAI, "{\"choices\":[{\"message\":{\"content\":5}}]}",
	                   "message.content is not a string");
	assert_parse_fails(WIRE_OPENAI, "{\"choices\":[{\"message\":{\"tool_calls\":{}}}]}",
	                   "tool_calls is not an array");
	assert_parse_fails(WIRE_OPENAI, "{\"choices\":[{\"message\":{\"content\":\"hi\"}}]}",
	                   "usage is missing");
	assert_parse_fails(
	    WIRE_OPENAI,
	    "{\"choices\":[{\"message\":{\"content\":\"hi\"}}],\"usage\":{\"prompt_tokens\":1}}",
	    "usage.prompt_tokens or usage.completion_tokens");
	assert_parse_fails(
	    WIRE_OPENAI,
	    "{\"choices\":[{\"message\":{\"content\":\"hi\"}}],\"usage\":{\"prompt_tokens\":1,"
	    "\"completion_tokens\":1,\"prompt_tokens_details\":[]}}",
	    "prompt_tokens_details");
	assert_parse_fails(
	    WIRE_OPENAI,
	    "{\"choices\":[{\"message\":{\"content\":\"hi\"}}],\"usage\":{\"prompt_tokens\":1,"
	    "\"completion_tokens\":1,\"prompt_tokens_details\":{\"cached_tokens\":-3}}}",
	    "usage.cached_tokens");
	assert_parse_fails(
	    WIRE_OPENAI,
	    "{\"choices\":[{\"message\":{\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"custom\","
	    "\"custom\":{\"name\":\"x\",\"input\":\"y\"}}]}}],\"usage\":{\"prompt_tokens\":1,"
	    "\"completion_tokens\":1}}",
	    "tool_calls[0] is not a function call");
	assert_parse_fails(
	    WIRE_OPENAI,
	    "{\"choices\":[{\"message\":{\"tool_calls\":[{\"type\":\"function\",\"function\":"
	    "{\"name\":\"x\",\"arguments\":\"{}\"}}]}}],\"usage\":{\"prompt_tokens\":1,"
	    "\"completion_tokens\":1}}",
	    "tool_calls[0]: the id");
	assert_parse_fails(
	    WIRE_OPENAI,
	    "{\"choices\":[{\"message\":{\"tool_calls\":[{\"id\":\"c\",\"type\":\"function\","
	    "\"function\":{\"name\":\"x;rm\",\"arguments\":\"{}\"}}]}}],\"usage\":"
	    "{\"prompt_tokens\":1,\"completion_tokens\":1}}",
	    "tool_calls[0]: the name");
	assert_parse_fails(
	    WIRE_OPENAI,
	    "{\"error\":{\"message\":\"The server had an error\",\"type\":\"server_error\","
	    "\"param\":null,\"code\":null}}",
	    "provider error: server_error: The server had an error");
}

/* More cached tokens than prompt tokens cannot be, but must not wrap. */
static void
t_oai_usage_clamp(void **state)
{
	struct wire_resp r;

	parse_ok(
	    WIRE_OPENAI,
	    "{\"choices\":[{\"message\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}],"
	    "\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":1,\"prompt_tokens_details\":"
	    "{\"cached_tokens\":20}}}",
	    &r);
	assert_usage(&r.usage, 0, 1, 20, 0);
	wire_resp_free(&r);
}

static void
t_parse_nul_and_size(void **state)
{
	static const char nul[] = "{\"content\":[],\"usage\":{\"input_tokens\":1,"
	                          "\"output_tokens\":1}}\0";
	struct wire_resp r;
	char err[256];
	char *big;

	assert_int_equal(wire_parse(WIRE_ANTHROPIC, nul, sizeof(nul) - 2, &r, err, sizeof(err)), 0);
	wire_resp_free(&r);
	assert_int_equal(wire_parse(WIRE_ANTHROPIC, nul, sizeof(nul) - 1, &r, err, sizeof(err)),
	                 -1);
	assert_reason(err, "NUL byte");
	assert_int_equal(wire_parse(WIRE_OPENAI, NULL, 0, &r, err, sizeof(err)), -1);
	assert_int_equal(wire_parse((enum wire_kind)9, "{}", 2, &r, err, sizeof(err)), -1);
	assert_reason(err, "unknown provider kind");
	assert_non_null(big = malloc(WIRE_BODY_MAX + 1));
	memset(big, ' ', WIRE_BODY_MAX + 1);
	assert_int_equal(wire_parse(WIRE_OPENAI, big, WIRE_BODY_MAX + 1, &r, err, sizeof(err)), -1);
	assert_reason(err, "larger than");
	assert_null(r.content);
	free(big);
}

/* ---- streams -------------------------------------------------------------- */

static void
t_anth_stream(void **state)
{
	struct wire_resp want;

	parse_ok(WIRE_ANTHROPIC, ANTH_TEXT_BODY, &want);
	check_stream_modes(WIRE_ANTHROPIC, ANTH_TEXT_STREAM, &want);
	wire_resp_free(&want);
	parse_ok(WIRE_ANTHROPIC, ANTH_TOOL_BODY, &want);
	check_stream_modes(WIRE_ANTHROPIC, ANTH_TOOL_STREAM, &want);
	wire_resp_free(&want);
}

static void
t_oai_stream(void **state)
{
	struct wire_resp want;

	parse_ok(WIRE_OPENAI, OAI_TEXT_BODY, &want);
	check_stream_modes(WIRE_OPENAI, OAI_TEXT_STREAM, &want);
	wire_resp_free(&want);
	parse_ok(WIRE_OPENAI, OAI_TOOL_BODY, &want);
	check_stream_modes(WIRE_OPENAI, OAI_TOOL_STREAM, &want);
	wire_resp_free(&want);
}

static void
t_stream_cuts(void **state)
{
	check_stream_cuts(WIRE_ANTHROPIC, ANTH_TEXT_STREAM, "{\"type\":\"message_stop\"}\n");
	check_stream_cuts(WIRE_ANTHROPIC, ANTH_TOOL_STREAM, "{\"type\":\"message_stop\"}\n");
	check_stream_cuts(WIRE_OPENAI, OAI_TEXT_STREAM, "data: [DONE]\n");
	check_stream_cuts(WIRE_OPENAI, OAI_TOOL_STREAM, "data: [DONE]\n");
}

/* Bytes after the end: a whole line is an event after the end, a line
 * without its end a stream cut short; either way the stream fails. */
static void
t_stream_after_end(void **state)
{
	static const char *const tails[] = {"data: {\"x\":1}\n", "data: {\"x\":1}", "garbage"};
	struct wire_resp r;
	char err[256], *s;
	size_t i;

	for (i = 0; i < 3; i++) {
		if (asprintf(&s, "%s%s", OAI_TEXT_STREAM, tails[i]) == -1)
			fail();
		assert_int_equal(stream_run(WIRE_OPENAI, s, strlen(s), 0, &r, err, sizeof(err)), -1);
		free(s);
		if (asprintf(&s, "%s%s", ANTH_TEXT_STREAM, tails[i]) == -1)
			fail();
		assert_int_equal(stream_run(WIRE_ANTHROPIC, s, strlen(s), 0, &r, err, sizeof(err)), -1);
		free(s);
	}
}

static void
t_anth_stream_errors(void **state)
{
	struct wire_stream *s;
	struct wire_resp r;
	char err[256];
	static const char ev[] =
	    ANTH_START "event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": "
	               "\"overloaded_error\", \"message\": \"Overloaded\"}}\n\n";

	/* An error event fails the feed that brings it; the stream is dead. */
	assert_non_null(s = wire_stream_new(WIRE_ANTHROPIC));
	assert_int_equal(wire_stream_feed(s, ev, strlen(ev), err, sizeof(err)), -1);
	assert_reason(err, "provider error: overloaded_error: Overloaded");
	assert_int_equal(wire_stream_feed(s, "\n", 1, err, sizeof(err)), -1);
	assert_reason(err, "already failed");
	assert_int_equal(wire_stream_finish(s, &r, err, sizeof(err)), -1);
	assert_null(r.content);
	wire_stream_free(s);
	/* Only the event: line says error: still one. */
	assert_stream_fails(
	    WIRE_ANTHROPIC,
	    "event: error\ndata: {\"error\":{\"type\":\"api_error\",\"message\":\"boom\"}}\n\n",
	    "api_error: boom");
	assert_stream_fails(WIRE_ANTHROPIC, "data: {\"type\":\"error\"}\n\n",
	                    "provider error: (no message)");
	/* Malformed data. */
	assert_stream_fails(WIRE_ANTHROPIC, "event: message_start\ndata: {\"type\":\n\n",
	                    "bad JSON");
	assert_stream_fails(WIRE_ANTHROPIC, "data: [1,2]\n\n", "not a JSON object");
	assert_stream_fails(WIRE_ANTHROPIC, "data: {\"a\":1}\n\n", "without a string type");
	assert_stream_fails(WIRE_ANTHROPIC, "data: {\"type\":5}\n\n", "without a string type");
	assert_stream_fails(WIRE_ANTHROPIC,
	                    ANTH_START "data: {\"type\":\"message_stop\"}\n\n"
	                               "data: {\"type\":\"ping\"}\n\n",
	                    "after the end");
	/* Order of the message events. */
	assert_stream_fails(WIRE_ANTHROPIC, ANTH_TEXT0, "content_block_start before message_start");
	assert_stream_fails(WIRE_ANTHROPIC, ANTH_START ANTH_START, "message_start after");
	assert_stream_fails(WIRE_ANTHROPIC,
	                    "data: {\"type\":\"message_start\",\"message\":{\"usage\":{}}}\n\n",
	                    "usage.input_tokens is missing");
	assert_stream_fails(
	    WIRE_ANTHROPIC,
	    ANTH_START "data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":-1}}\n\n",
	    "usage.output_tokens");
	assert_stream_fails(WIRE_ANTHROPIC,
	                    ANTH_START "data: {\"type\":\"message_delta\",\"usage\":5}\n\n",
	                    "usage is not an object");
	/* Unknown event types are ignored, as the API asks. */
	{
		static const char s2[] = ANTH_UNKNOWN_STREAM;
		assert_int_equal(
		    stream_run(WIRE_ANTHROPIC, s2, strlen(s2), 0, &r, err, sizeof(err)), 0);
		assert_json_is(r.content, "[{\"type\":\"text\",\"text\":\"ok\"}]");
		assert_int_equal(r.stop, WIRE_STOP_END);
		assert_usage(&r.usage, 5, 7, 0, 0);
		wire_resp_free(&r);
	}
}

static void
t_anth_stream_index(void **state)
{
	assert_stream_fails(WIRE_ANTHROPIC,
	                    ANTH_START
	                    "data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":"
	                    "{\"type\":\"text\",\"text\":\"\"}}\n\n",
	                    "index is not 0");
	assert_stream_fails(WIRE_ANTHROPIC, ANTH_START ANTH_TEXT0 ANTH_TEXT0, "index is not 1");
	assert_stream_fails(WIRE_ANTHROPIC,
	                    ANTH_START ANTH_TEXT0 ANTH_DELTA(3, "text_delta", "text", "x"),
	                    "content_block_delta: the index");
	assert_stream_fails(WIRE_ANTHROPIC,
	                    ANTH_START ANTH_TEXT0 ANTH_DELTA(-1, "text_delta", "text", "x"),
	                    "content_block_delta: the index");
	assert_stream_fails(
	    WIRE_ANTHROPIC,
	    ANTH_START ANTH_TEXT0
	    "data: {\"type\":\"content_block_delta\",\"index\":\"0\",\"delta\":{\"type\":"
	    "\"text_delta\",\"text\":\"x\"}}\n\n",
	    "content_block_delta: the index");
	assert_stream_fails(WIRE_ANTHROPIC,
	                    ANTH_START ANTH_TEXT0 ANTH_STOP(0)
	                        ANTH_DELTA(0, "text_delta", "text", "x"),
	                    "content_block_delta: the index");
	assert_stream_fails(WIRE_ANTHROPIC, ANTH_START ANTH_TEXT0 ANTH_STOP(0) ANTH_STOP(0),
	                    "content_block_stop: the index");
	assert_stream_fails(WIRE_ANTHROPIC, ANTH_START ANTH_STOP(0),
	                    "content_block_stop: the index");
	/* A delta of the other kind. */
	assert_stream_fails(
	    WIRE_ANTHROPIC,
	    ANTH_START ANTH_TEXT0 ANTH_DELTA(0, "input_json_delta", "partial_json", "{}"),
	    "a input_json_delta for a block of another type");
	assert_stream_fails(WIRE_ANTHROPIC,
	                    ANTH_START ANTH_TOOL0 ANTH_DELTA(0, "text_delta", "text", "x"),
	                    "a text_delta for a block of another type");
	assert_stream_fails(
	    WIRE_ANTHROPIC,
	    ANTH_START ANTH_TEXT0
	    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":"
	    "\"text_delta\"}}\n\n",
	    "without its string");
	/* Tool input that is not an object, or bad JSON. */
	assert_stream_fails(WIRE_ANTHROPIC,
	                    ANTH_START ANTH_TOOL0 ANTH_DELTA(0, "input_json_delta", "partial_json",
	                                                     "[1]") ANTH_STOP(0),
	                    "input is not a JSON object");
	assert_stream_fails(WIRE_ANTHROPIC,
	                    ANTH_START ANTH_TOOL0 ANTH_DELTA(0, "input_json_delta", "partial_json",
	                                                     "{\\\"a\\\":") ANTH_STOP(0),
	                    "input is bad JSON");
	assert_stream_fails(
	    WIRE_ANTHROPIC,
	    ANTH_START "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":"
	               "{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"read file\"}}\n\n",
	    "the name");
	/* message_stop with a block still open. */
	assert_stream_fails(WIRE_ANTHROPIC, ANTH_START ANTH_TEXT0 ANTH_END,
	                    "content block 0 never stopped");
}

/* A tool_use with no delta keeps the start's input ({} as documented). */
static void
t_anth_stream_empty_input(void **state)
{
	static const char s[] = ANTH_START ANTH_TOOL0 ANTH_STOP(0) ANTH_END;
	struct wire_resp r;
	char err[256];

	assert_int_equal(stream_run(WIRE_ANTHROPIC, s, strlen(s), 0, &r, err, sizeof(err)), 0);
	assert_json_is(r.content, "[{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":"
	                          "\"read_file\",\"input\":{}}]");
	wire_resp_free(&r);
}

static void
t_oai_stream_errors(void **state)
{
	struct wire_resp r;
	char err[256];

	assert_stream_fails(
	    WIRE_OPENAI, OAI_ERROR_STREAM,
	    "provider error: server_error: The server had an error while processing");
	assert_stream_fails(WIRE_OPENAI, "data: {not json}\n\n", "bad JSON");
	assert_stream_fails(WIRE_OPENAI, "data: \"[DONE]\"\n\n", "not a JSON object");
	assert_stream_fails(WIRE_OPENAI, "data: [DONE] \n\n", "bad JSON");
	assert_stream_fails(WIRE_OPENAI, OAI_USAGE "data: [DONE]\n\n" OAI_USAGE, "after the end");
	assert_stream_fails(WIRE_OPENAI,
	                    OAI_DELTA("{\"content\":\"x\"}", "\"stop\"") "data: [DONE]\n\n",
	                    "no usage");
	assert_stream_fails(WIRE_OPENAI, OAI_CHUNK("\"choices\":{}"), "choices is not an array");
	assert_stream_fails(WIRE_OPENAI, OAI_CHUNK("\"choices\":[5]"), "choices[0]");
	assert_stream_fails(WIRE_OPENAI, OAI_DELTA("[]", "null"), "choices[0]");
	assert_stream_fails(WIRE_OPENAI, OAI_DELTA("{\"content\":5}", "null"),
	                    "delta.content is not a string");
	assert_stream_fails(WIRE_OPENAI, OAI_CHUNK("\"choices\":[],\"usage\":5"),
	                    "usage is not an object");
	assert_stream_fails(WIRE_OPENAI, OAI_CHUNK("\"choices\":[],\"usage\":{}"),
	                    "usage.prompt_tokens");
	/* Ignored: id:, retry: and unknown fields; a line without a colon. */
	{
		static const char s[] = OAI_IGNORED_STREAM;
		assert_int_equal(stream_run(WIRE_OPENAI, s, strlen(s), 0, &r, err, sizeof(err)), 0);
		assert_json_is(r.content, "[{\"type\":\"text\",\"text\":\"x\"}]");
		assert_int_equal(r.stop, WIRE_STOP_END);
		assert_usage(&r.usage, 1, 1, 0, 0);
		wire_resp_free(&r);
	}
}

static void
t_oai_stream_index(void **state)
{
	assert_stream_fails(
	    WIRE_OPENAI,
	    OAI_DELTA("{\"tool_calls\":[{\"index\":1,\"id\":\"call_1\",\"type\":\"function\","
	              "\"function\":{\"name\":\"read_file\",\"arguments\":\"\"}}]}",
	              "null"),
	    "index is not 0-0");
	assert_stream_fails(WIRE_OPENAI, OAI_CALL0 OAI_ARGS(2, "{}"), "index is not 0-1");
	assert_stream_fails(WIRE_OPENAI, OAI_CALL0 OAI_ARGS(-1, "{}"), "index is not 0-1");
	assert_stream_fails(
	    WIRE_OPENAI,
	    OAI_DELTA("{\"tool_calls\":[{\"id\":\"call_1\",\"function\":{\"name\":\"x\"}}]}",
	              "null"),
	    "index is not");
	assert_stream_fails(
	    WIRE_OPENAI,
	    OAI_CALL0 OAI_DELTA("{\"tool_calls\":[{\"index\":0,\"id\":\"call_2\"}]}", "null"),
	    "id changed mid-stream");
	assert_stream_fails(
	    WIRE_OPENAI,
	    OAI_DELTA("{\"tool_calls\":[{\"index\":0,\"type\":\"function\",\"function\":{\"name\":"
	              "\"read_file\",\"arguments\":\"{}\"}}]}",
	              "\"tool_calls\"") OAI_USAGE "data: [DONE]\n\n",
	    "tool_calls[0]: the id");
	assert_stream_fails(
	    WIRE_OPENAI,
	    OAI_DELTA("{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"function\":{\"name\":"
	              "\"a.b\"}}]}",
	              "null") OAI_USAGE "data: [DONE]\n\n",
	    "tool_calls[0]: the name");
	assert_stream_fails(
	    WIRE_OPENAI, OAI_DELTA("{\"tool_calls\":[{\"index\":0,\"type\":\"custom\"}]}", "null"),
	    "not a function call");
	assert_stream_fails(WIRE_OPENAI,
	                    OAI_CALL0 OAI_DELTA("{\"tool_calls\":[{\"index\":0,"
	                                        "\"function\":{\"arguments\":{}}}]}",
	                                        "null"),
	                    "arguments is not a string");
	assert_stream_fails(WIRE_OPENAI, OAI_DELTA("{\"tool_calls\":{}}", "null"),
	                    "tool_calls is not an array");
}

/* Arguments that do not make an object are input null, not a failure; a
 * repeated id or name is fine, and "" for one is taken as absent. */
static void
t_oai_stream_bad_arguments(void **state)
{
	static const char s[] = OAI_BAD_ARGS_STREAM;
	struct wire_resp r;
	char err[256];

	assert_int_equal(stream_run(WIRE_OPENAI, s, strlen(s), 0, &r, err, sizeof(err)), 0);
	assert_json_is(
	    r.content,
	    "[{\"type\":\"tool_use\",\"id\":\"call_1\",\"name\":\"read_file\",\"input\":null},"
	    "{\"type\":\"tool_use\",\"id\":\"call_2\",\"name\":\"list_dir\",\"input\":{}}]");
	assert_int_equal(r.stop, WIRE_STOP_TOOL_USE);
	wire_resp_free(&r);
}

static void
t_stream_limits(void **state)
{
	struct wire_stream *s;
	struct wire_resp r;
	char err[256], *big;
	size_t mib = 1024 * 1024, i;

	/* NUL bytes. */
	assert_non_null(s = wire_stream_new(WIRE_OPENAI));
	assert_int_equal(wire_stream_feed(s, "data: {\"a\0\":1}\n\n", 17, err, sizeof(err)), -1);
	assert_reason(err, "NUL byte");
	wire_stream_free(s);
	/* More than WIRE_BODY_MAX in one piece. */
	assert_non_null(big = malloc(WIRE_BODY_MAX + 1));
	memset(big, '\n', WIRE_BODY_MAX + 1);
	assert_non_null(s = wire_stream_new(WIRE_ANTHROPIC));
	assert_int_equal(wire_stream_feed(s, big, WIRE_BODY_MAX + 1, err, sizeof(err)), -1);
	assert_reason(err, "larger than");
	wire_stream_free(s);
	/* Exactly WIRE_BODY_MAX in 1 MiB comment lines is fine; one byte more is not. */
	memset(big, 'x', mib);
	big[0] = ':';
	big[mib - 1] = '\n';
	assert_non_null(s = wire_stream_new(WIRE_OPENAI));
	for (i = 0; i < WIRE_BODY_MAX / mib; i++)
		assert_int_equal(wire_stream_feed(s, big, mib, err, sizeof(err)), 0);
	assert_int_equal(wire_stream_feed(s, "\n", 1, err, sizeof(err)), -1);
	assert_reason(err, "larger than");
	assert_int_equal(wire_stream_finish(s, &r, err, sizeof(err)), -1);
	wire_stream_free(s);
	/* One line longer than 16 MiB, fed in pieces. */
	memset(big, 'a', 17 * mib);
	memcpy(big, "data: ", 6);
	assert_non_null(s = wire_stream_new(WIRE_OPENAI));
	for (i = 0; i < 16; i++)
		assert_int_equal(wire_stream_feed(s, big + i * mib, mib, err, sizeof(err)), 0);
	assert_int_equal(wire_stream_feed(s, big + 16 * mib, mib, err, sizeof(err)), -1);
	assert_reason(err, "line is longer");
	wire_stream_free(s);
	free(big);
	/* An empty stream, and finish twice. */
	assert_non_null(s = wire_stream_new(WIRE_OPENAI));
	assert_int_equal(wire_stream_feed(s, NULL, 0, err, sizeof(err)), 0);
	assert_int_equal(wire_stream_finish(s, &r, err, sizeof(err)), -1);
	assert_reason(err, "before data: [DONE]");
	assert_int_equal(wire_stream_finish(s, &r, err, sizeof(err)), -1);
	assert_reason(err, "already failed or finished");
	wire_stream_free(s);
	wire_stream_free(NULL);
}

/* Many blocks: the bound holds and is an error, not a crash. */
static void
t_stream_block_limit(void **state)
{
	struct wire_stream *s;
	char ev[256], err[256];
	int i, n, rv = 0;

	assert_non_null(s = wire_stream_new(WIRE_ANTHROPIC));
	assert_int_equal(wire_stream_feed(s, ANTH_START, strlen(ANTH_START), err, sizeof(err)), 0);
	for (i = 0; rv == 0 && i < 5000; i++) {
		n = snprintf(
		    ev, sizeof(ev),
		    "data: {\"type\":\"content_block_start\",\"index\":%d,\"content_block\":"
		    "{\"type\":\"text\",\"text\":\"\"}}\n\n",
		    i);
		rv = wire_stream_feed(s, ev, (size_t)n, err, sizeof(err));
	}
	assert_int_equal(rv, -1);
	assert_int_equal(i, 4097);
	assert_reason(err, "more than 4096 content blocks");
	wire_stream_free(s);
}

/* ---- error bodies --------------------------------------------------------- */

static void
error_text_is(const char *body, size_t outsz, const char *want)
{
	char out[512];

	memset(out, 'Z', sizeof(out));
	wire_error_text(body, body != NULL ? strlen(body) : 0, out, outsz);
	assert_string_equal(out, want);
}

static void
t_error_text(void **state)
{
	char out[4] = "ZZZ";

	error_text_is("{\"type\":\"error\",\"error\":{\"type\":\"not_found_error\",\"message\":"
	              "\"The requested resource could not be found.\"},\"request_id\":"
	              "\"req_011CSHoEeqs5C35K2UUqR7Fy\"}",
	              512, "not_found_error: The requested resource could not be found.");
	error_text_is("{\"error\":{\"message\":\"You exceeded your current quota, please check "
	              "your plan and billing details.\",\"type\":\"insufficient_quota\","
	              "\"param\":null,\"code\":\"insufficient_quota\"}}",
	              512,
	              "insufficient_quota: You exceeded your current quota, please check your plan "
	              "and billing details.");
	error_text_is("{\"error\":{\"message\":\"Invalid model\",\"type\":null}}", 512,
	              "Invalid model");
	error_text_is("{\"error\":{\"type\":\"rate_limit_error\"}}", 512, "rate_limit_error");
	error_text_is("{\"error\":\"model 'llama9' not found\"}", 512, "model 'llama9' not found");
	error_text_is("{\"error\":\"line1\\nline2\\u0007\\u00e9\\u001b[2J\"}", 512,
	              "line1?line2????[2J");
	error_text_is("{\"error\":\"0123456789\"}", 5, "0123");
	error_text_is("{\"error\":{\"type\":\"a\",\"message\":\"bcdef\"}}", 6, "a: bc");
	error_text_is("<html><body><h1>502 Bad Gateway</h1></body></html>", 512, "");
	error_text_is("{\"detail\":\"Not Found\"}", 512, "");
	error_text_is("{\"error\":5}", 512, "");
	error_text_is("{\"error\":null}", 512, "");
	error_text_is("[\"error\"]", 512, "");
	error_text_is("", 512, "");
	error_text_is(NULL, 512, "");
	wire_error_text("{\"error\":\"x\"}\0", 14, out, sizeof(out));
	assert_string_equal(out, "");
	memcpy(out, "ZZZ", 4);
	wire_error_text("{\"error\":\"x\"}", 13, out, 0);
	assert_string_equal(out, "ZZZ");
	wire_error_text("{\"error\":\"x\"}", 13, out, 1);
	assert_string_equal(out, "");
}

/* ---- costs ---------------------------------------------------------------- */

static uint64_t
cost(uint64_t in, uint64_t out, uint64_t cr, uint64_t cw, uint64_t pin, uint64_t pout, uint64_t pcr,
     uint64_t pcw)
{
	struct wire_price p = {pin, pout, pcr, pcw};
	struct wire_usage u = {in, out, cr, cw};

	return wire_cost(&p, &u);
}

static void
t_cost(void **state)
{
	assert_int_equal(cost(1000000, 0, 0, 0, 3000000, 0, 0, 0), 3000000);
	assert_int_equal(cost(1, 0, 0, 0, 3000000, 0, 0, 0), 3);
	assert_int_equal(cost(1, 0, 0, 0, 1, 0, 0, 0), 1);
	assert_int_equal(cost(0, 0, 0, 0, 3000000, 15000000, 300000, 3750000), 0);
	assert_int_equal(cost(1000, 500, 2000, 100, 3000000, 15000000, 300000, 3750000),
	                 3000 + 7500 + 600 + 375);
	/* Rounding applies to the sum, not to each part. */
	assert_int_equal(cost(1, 1, 1, 1, 1, 1, 1, 1), 1);
	assert_int_equal(cost(999999, 1, 0, 0, 1, 1, 0, 0), 1);
	assert_int_equal(cost(1000001, 0, 0, 0, 1, 0, 0, 0), 2);
	assert_int_equal(cost(0, 3, 0, 0, 0, 333333, 0, 0), 1);
	assert_int_equal(cost(0, 3, 0, 0, 0, 333334, 0, 0), 2);
	/* Each field reaches its own price. */
	assert_int_equal(cost(0, 0, 1000000, 0, 0, 0, 7, 0), 7);
	assert_int_equal(cost(0, 0, 0, 1000000, 0, 0, 0, 9), 9);
	assert_int_equal(cost(0, 1000000, 0, 0, 0, 11, 0, 0), 11);
	/* Large but exact; then saturation. */
	assert_int_equal(cost(UINT64_MAX, 0, 0, 0, 1, 0, 0, 0), UINT64_MAX / 1000000 + 1);
	assert_int_equal(cost(UINT64_MAX, 0, 0, 0, 1000000, 0, 0, 0), UINT64_MAX);
	assert_int_equal(cost(UINT64_MAX, 0, 0, 0, 1000001, 0, 0, 0), UINT64_MAX);
	assert_int_equal(cost(UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX,
	                      UINT64_MAX, UINT64_MAX, UINT64_MAX),
	                 UINT64_MAX);
	assert_int_equal(cost(UINT64_MAX - 1, 1, 0, 0, 1000000, 1000000, 0, 0), UINT64_MAX);
	assert_int_equal(cost(UINT64_MAX / 2, UINT64_MAX / 2, 0, 0, 1000000, 1000000, 0, 0),
	                 UINT64_MAX - 1);
}

static void
t_worst_cost(void **state)
{
	struct wire_price p = {3000000, 15000000, 300000, 3750000};
	struct wire_price q = {5000000, 25000000, 500000, 1000000};
	struct wire_price one = {1, 1, 1, 1};
	struct wire_price max = {UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX};

	/* The cache-write price is the dearer for p, the input price for q. */
	assert_int_equal(wire_worst_cost(&p, 1000, 1000), 3750 + 15000);
	assert_int_equal(wire_worst_cost(&q, 1000, 1000), 5000 + 25000);
	assert_int_equal(wire_worst_cost(&p, 0, 0), 0);
	assert_int_equal(wire_worst_cost(&one, 1, 0), 1);
	assert_int_equal(wire_worst_cost(&one, 1, 1), 1);
	assert_int_equal(wire_worst_cost(&one, 1000000, 1), 2);
	assert_int_equal(wire_worst_cost(&max, SIZE_MAX, UINT64_MAX), UINT64_MAX);
	assert_int_equal(wire_worst_cost(&p, 0, UINT64_MAX), UINT64_MAX);
	/* Never below what the call can then cost. */
	{
		struct wire_usage u = {1000, 1000, 0, 0};

		assert_true(wire_cost(&p, &u) <= wire_worst_cost(&p, 1000, 1000));
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_path),
	    cmocka_unit_test(t_anth_request),
	    cmocka_unit_test(t_oai_request),
	    cmocka_unit_test(t_oai_request_order),
	    cmocka_unit_test(t_result_image),
	    cmocka_unit_test(t_conv),
	    cmocka_unit_test(t_roundtrip),
	    cmocka_unit_test(t_request_rejects),
	    cmocka_unit_test(t_request_args),
	    cmocka_unit_test(t_anth_parse),
	    cmocka_unit_test(t_oai_parse),
	    cmocka_unit_test(t_stop_reasons),
	    cmocka_unit_test(t_oai_bad_arguments),
	    cmocka_unit_test(t_anth_parse_rejects),
	    cmocka_unit_test(t_oai_parse_rejects),
	    cmocka_unit_test(t_oai_usage_clamp),
	    cmocka_unit_test(t_parse_nul_and_size),
	    cmocka_unit_test(t_anth_stream),
	    cmocka_unit_test(t_oai_stream),
	    cmocka_unit_test(t_stream_cuts),
	    cmocka_unit_test(t_stream_after_end),
	    cmocka_unit_test(t_anth_stream_errors),
	    cmocka_unit_test(t_anth_stream_index),
	    cmocka_unit_test(t_anth_stream_empty_input),
	    cmocka_unit_test(t_oai_stream_errors),
	    cmocka_unit_test(t_oai_stream_index),
	    cmocka_unit_test(t_oai_stream_bad_arguments),
	    cmocka_unit_test(t_stream_limits),
	    cmocka_unit_test(t_stream_block_limit),
	    cmocka_unit_test(t_error_text),
	    cmocka_unit_test(t_cost),
	    cmocka_unit_test(t_worst_cost),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
