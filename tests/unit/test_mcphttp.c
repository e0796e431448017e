/*
 * Unit tests for what the MCP bridge reads from a remote server
 * (proxy/mcphttp_read.c): the SSE parser (line ends, a BOM, comments,
 * fields, data over several lines, events without data, the cap), the check
 * of one message (re-encoded on one line, the secret redacted even when
 * the server spells it with escapes, batches and oversized messages
 * refused), content types and header values; and the bridge's refusals of
 * URLs and headers, and its end when its client reads nothing
 * (proxy/mcphttp.c).
 */
#include <sys/socket.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>
#include <sodium.h>

#include "proxy/mcphttp.h"
#include "runner/mcp.h"

#define SECRET "s3cr3t-VALUE-42"

struct events {
	int n;
	char type[8][64];
	char data[8][256];
};

static int
on_event(void *arg, const char *event, const char *data, size_t len)
{
	struct events *e = arg;

	if (e->n < 8) {
		snprintf(e->type[e->n], sizeof(e->type[0]), "%s", event);
		snprintf(e->data[e->n], sizeof(e->data[0]), "%.*s", (int)len, data);
	}
	e->n++;
	return 0;
}

/* text fed one byte at a time and whole: the same events. */
static void
feed_both(const char *text, size_t max, struct events *e, struct mcphttp_sse *keep)
{
	struct mcphttp_sse a, b;
	struct events eb;
	size_t i, n = strlen(text);

	memset(e, 0, sizeof(*e));
	memset(&eb, 0, sizeof(eb));
	mcphttp_sse_init(&a, max);
	mcphttp_sse_init(&b, max);
	assert_int_equal(mcphttp_sse_feed(&a, text, n, on_event, e), 0);
	for (i = 0; i < n; i++)
		assert_int_equal(mcphttp_sse_feed(&b, text + i, 1, on_event, &eb), 0);
	assert_int_equal(e->n, eb.n);
	for (i = 0; i < (size_t)e->n && i < 8; i++) {
		assert_string_equal(e->type[i], eb.type[i]);
		assert_string_equal(e->data[i], eb.data[i]);
	}
	mcphttp_sse_free(&b);
	if (keep != NULL)
		*keep = a;
	else
		mcphttp_sse_free(&a);
}

static void
t_sse_fields(void **state)
{
	struct events e;
	struct mcphttp_sse s;

	feed_both("\xef\xbb\xbfid: e1\nretry: 500\ndata: \n\n: a comment\n"
	          "event: message\ndata: {\"a\":\ndata: 1}\nid: e2\n\n"
	          "event: endpoint\r\ndata: /messages\r\n\r\n"
	          "data:no space\r\rdata: unended",
	          1024, &e, &s);
	/* the priming event has no data: not reported */
	assert_int_equal(e.n, 3);
	assert_string_equal(e.type[0], "message");
	assert_string_equal(e.data[0], "{\"a\":\n1}");
	assert_string_equal(e.type[1], "endpoint");
	assert_string_equal(e.data[1], "/messages");
	assert_string_equal(e.data[2], "no space");
	assert_string_equal(s.last_id, "e2");
	assert_int_equal(s.retry_ms, 500);
	mcphttp_sse_free(&s);
}

static void
t_sse_odd_fields(void **state)
{
	struct events e;
	struct mcphttp_sse s;

	/* retry that is not digits, an unknown field, a field without colon */
	feed_both("retry: 5x\nretry: 70\nfoo: bar\ndata\n\nid: e9\n\n", 1024, &e, &s);
	assert_int_equal(e.n, 0);
	assert_int_equal(s.retry_ms, 70);
	assert_string_equal(s.last_id, "e9");
	mcphttp_sse_free(&s);
}

static void
t_sse_cap(void **state)
{
	struct mcphttp_sse s;
	struct events e;
	char big[300];

	memset(&e, 0, sizeof(e));
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	/* one line over the cap */
	mcphttp_sse_init(&s, 128);
	assert_int_equal(mcphttp_sse_feed(&s, "data: ", 6, on_event, &e), 0);
	assert_int_equal(mcphttp_sse_feed(&s, big, strlen(big), on_event, &e), -1);
	assert_int_equal(mcphttp_sse_feed(&s, "\n\n", 2, on_event, &e), -1);
	assert_int_equal(e.n, 0);
	mcphttp_sse_free(&s);
	/* an event's data over the cap in lines under it */
	mcphttp_sse_init(&s, 100);
	assert_int_equal(mcphttp_sse_feed(&s,
	                                  "data: 0123456789012345678901234567890123456789\n"
	                                  "data: 0123456789012345678901234567890123456789\n",
	                                  94, on_event, &e),
	                 0);
	assert_int_equal(mcphttp_sse_feed(&s, "data: 0123456789012345678901234567890123456789\n",
	                                  47, on_event, &e),
	                 -1);
	assert_int_equal(e.n, 0);
	mcphttp_sse_free(&s);
}

static const struct mcphttp_secret secrets[] = {{SECRET, sizeof(SECRET) - 1}};

static void
t_message(void **state)
{
	char err[256], *out;
	size_t n;
	int kind;
	json_t *id;
	const char *in = "{ \"jsonrpc\": \"2.0\", \"id\": 7, \"result\": {\"content\": [{\"type\": "
	                 "\"text\", \"text\": \"token \\u0073\\u0033cr3t-VALUE-42 and "
	                 "s3cr3t-VALUE-42\\nnext line\"}]}}";

	out = mcphttp_message(in, strlen(in), 1024, secrets, 1, &kind, &id, NULL, &n, err, sizeof(err));
	assert_non_null(out);
	assert_int_equal(kind, MCP_MSG_RESULT);
	assert_int_equal(json_integer_value(id), 7);
	assert_null(strstr(out, SECRET));
	assert_non_null(strstr(out, "token *************** and ***************"));
	assert_null(strchr(out, '\n'));
	assert_int_equal(strlen(out), n);
	json_decref(id);
	free(out);
}

/* A secret outside a string (all digits, echoed as a number): its mask
 * leaves text that is no JSON; the message as parsed is what the bridge
 * changes and writes again (through redaction), never a parse of that. */
static void
t_message_masked_number(void **state)
{
	static const struct mcphttp_secret digits[] = {{"12345678", 8}};
	const char *in = "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32000,\"message\":\"no\","
	                 "\"data\":12345678}}";
	char err[256], *out;
	json_t *id, *msg;
	size_t n;
	int kind;

	out = mcphttp_message(in, strlen(in), 1024, digits, 1, &kind, &id, &msg, &n, err,
	                      sizeof(err));
	assert_non_null(out);
	assert_int_equal(kind, MCP_MSG_ERROR);
	assert_null(id);
	assert_non_null(strstr(out, "\"data\":********"));
	assert_null(json_loadb(out, n, 0, NULL)); /* what a re-parse would have met */
	assert_non_null(msg);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(msg, "error"), "data")),
	                 12345678);
	json_decref(msg);
	free(out);
}

static void
t_message_refused(void **state)
{
	char err[256], big[2048];
	size_t n;
	int kind;
	json_t *id;
	const char *batch = "[{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}]";

	assert_null(mcphttp_message(batch, strlen(batch), 1024, secrets, 1, &kind, &id, NULL, &n, err,
	                            sizeof(err)));
	assert_non_null(strstr(err, "batch"));
	assert_null(
	    mcphttp_message("{nope", 5, 1024, secrets, 1, &kind, &id, NULL, &n, err, sizeof(err)));
	assert_non_null(strstr(err, "not JSON"));
	snprintf(big, sizeof(big), "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"t\":\"%01500d\"}}",
	         0);
	assert_null(
	    mcphttp_message(big, strlen(big), 1024, secrets, 1, &kind, &id, NULL, &n, err, sizeof(err)));
	assert_non_null(strstr(err, "more than 1024 bytes"));
	assert_null(id);
}

static void
t_ctype_and_headers(void **state)
{
	char *v;

	assert_int_equal(mcphttp_ctype("application/json"), 1);
	assert_int_equal(mcphttp_ctype(" Application/JSON; charset=utf-8"), 1);
	assert_int_equal(mcphttp_ctype("text/event-stream"), 2);
	assert_int_equal(mcphttp_ctype("text/event-streams"), 0);
	assert_int_equal(mcphttp_ctype("text/html"), 0);
	assert_int_equal(mcphttp_ctype(NULL), 0);
	v = mcphttp_header_value("tools/call", 10);
	assert_string_equal(v, "tools/call");
	free(v);
	v = mcphttp_header_value("Hello, \xe4\xb8\x96", 10);
	assert_string_equal(v, "=?base64?SGVsbG8sIOS4lg==?=");
	free(v);
	v = mcphttp_header_value(" padded", 7);
	assert_string_equal(v, "=?base64?IHBhZGRlZA==?=");
	free(v);
	v = mcphttp_header_value("a\r\nX-Evil: 1", 12);
	assert_null(strchr(v, '\r'));
	assert_null(strchr(v, '\n'));
	free(v);
}

static void
done_cb(void *arg, const char *err)
{
	(void)arg;
	(void)err;
}

/* mcphttp_new on a socketpair's end refuses url with headers: err holds
 * want, and the end was closed (the peer reads EOF). */
static void
refused(struct event_base *base, const char *url, const char *const *hdrs, size_t n,
        const char *want)
{
	char err[512], c;
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_null(mcphttp_new(base, sv[0], url, hdrs, n, NULL, done_cb, NULL, err, sizeof(err)));
	assert_non_null(strstr(err, want));
	assert_int_equal(read(sv[1], &c, 1), 0);
	close(sv[1]);
}

static void
t_new_refusals(void **state)
{
	struct event_base *base = event_base_new();
	const char *bad_hdr[] = {"X-Ok: 1", "Injected\r\nX-Evil: 1"};
	const char *no_colon[] = {"Authorization Bearer x"};
	const char *token_hdr[] = {"X.Api~Key: 1"};
	static const struct mcphttp_secret shortsec[] = {{"abc", 3}};
	const struct mcphttp_conf short_conf = {.secrets = shortsec, .nsecrets = 1};
	char err[512];
	int sv[2];
	struct mcphttp *h;

	assert_non_null(base);
	refused(base, "http://192.0.2.1/mcp", NULL, 0, "loopback");
	refused(base, "file:///etc/passwd", NULL, 0, "spec.url");
	refused(base, "https://user:pw@example.com/mcp", NULL, 0, "user name or password");
	refused(base, "https://example.com/mcp", bad_hdr, 2, "header 2");
	refused(base, "https://example.com/mcp", no_colon, 1, "header 1");
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	h = mcphttp_new(base, sv[0], "http://127.0.0.1:9/mcp", bad_hdr, 1, NULL, done_cb, NULL, err,
	                sizeof(err));
	assert_non_null(h);
	assert_null(mcphttp_session(h));
	mcphttp_free(h);
	close(sv[1]);
	/* a name mcp add takes (any HTTP token) is taken here too */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	h = mcphttp_new(base, sv[0], "http://127.0.0.1:9/mcp", token_hdr, 1, NULL, done_cb, NULL,
	                err, sizeof(err));
	assert_non_null(h);
	mcphttp_free(h);
	close(sv[1]);
	/* a secret too short to be redacted is refused, not ignored */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_null(mcphttp_new(base, sv[0], "http://127.0.0.1:9/mcp", NULL, 0, &short_conf, done_cb,
	                        NULL, err, sizeof(err)));
	assert_non_null(strstr(err, "secret 1 is shorter than 4 bytes"));
	close(sv[1]);
	event_base_free(base);
}

static int ended;
static char ended_err[512];

static void
ended_cb(void *arg, const char *err)
{
	ended = 1;
	snprintf(ended_err, sizeof(ended_err), "%s", err != NULL ? err : "");
	event_base_loopbreak(arg);
}

/*
 * A client that sends requests and reads none of the answers: each request
 * fails at once (nothing listens on the port) and its error answer piles
 * up.  Past out_max the bridge ends with why, every request still in
 * flight answered (or dropped) once: no answer written into the bridge's
 * own end (which once freed a request twice, or recursed without end).
 */
static void
t_client_not_reading(void **state)
{
	struct event_base *base = event_base_new();
	struct mcphttp_conf conf = {.out_max = 2048, .connect_ms = 2000};
	struct timeval tmo = {20, 0};
	char err[512], line[600], id[400];
	struct mcphttp *h;
	int sv[2], i, small = 1024, n;

	assert_non_null(base);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	/* the bridge's writes block soon: a small send buffer, nothing read */
	assert_int_equal(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
	memset(id, 'i', sizeof(id) - 1);
	id[sizeof(id) - 1] = '\0';
	for (i = 0; i < 12; i++) {
		n = snprintf(line, sizeof(line),
		             "{\"jsonrpc\":\"2.0\",\"id\":\"%02d%s\",\"method\":\"tools/list\"}\n", i,
		             id);
		assert_int_equal(write(sv[1], line, (size_t)n), n);
	}
	ended = 0;
	h = mcphttp_new(base, sv[0], "http://127.0.0.1:9/mcp", NULL, 0, &conf, ended_cb, base, err,
	                sizeof(err));
	assert_non_null(h);
	event_base_loopexit(base, &tmo);
	event_base_dispatch(base);
	assert_true(ended);
	assert_non_null(strstr(ended_err, "does not read what the server sends (over 2048 bytes"));
	mcphttp_free(h);
	close(sv[1]);
	event_base_free(base);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_sse_fields),      cmocka_unit_test(t_sse_odd_fields),
	    cmocka_unit_test(t_sse_cap),         cmocka_unit_test(t_message),
		cmocka_unit_test(t_message_masked_number),
		cmocka_unit_test(t_client_not_reading),
	    cmocka_unit_test(t_message_refused), cmocka_unit_test(t_ctype_and_headers),
	    cmocka_unit_test(t_new_refusals),
	};

	if (sodium_init() == -1)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
