/*
 * wire: the model providers' wire formats (Anthropic Messages, OpenAI Chat
 * Completions) as pure functions: a neutral request (the Anthropic shape)
 * becomes a provider's request body; a provider's response, whole or as a
 * server-sent event stream fed in pieces, becomes neutral content blocks, a
 * stop reason and token usage; and usage is priced.
 *
 * The neutral request comes from the runner, the response from a provider:
 * neither is trusted.  Every member is type-checked before use, sizes are
 * bounded (WIRE_BODY_MAX in all, WIRE_LINE_MAX a stream line,
 * WIRE_BLOCKS_MAX blocks), and anything out of shape is -1 with a printable
 * reason, never a crash.  The response we hand back is rebuilt from checked
 * fields only, so nothing a provider adds reaches the runner.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/wire.h"

#define WIRE_LINE_MAX (16u * 1024 * 1024) /* longest event-stream line */
#define WIRE_ID_MAX 256                   /* longest tool-use id or tool name */
#define WIRE_BLOCKS_MAX 4096              /* most content blocks or tool calls in a response */
#define WIRE_RESULT_BLOCKS_MAX 16         /* blocks of one tool result's content */
#define WIRE_IMAGE_MAX (8u * 1024 * 1024) /* base64 bytes of one image in a tool result */
#define WIRE_JSON_FLAGS (JSON_REJECT_DUPLICATES | JSON_DECODE_ANY)
#define WIRE_NITEMS(a) (sizeof(a) / sizeof((a)[0]))

/* A growable byte buffer, always NUL-terminated once anything was added. */
struct wire_buf {
	char *p;
	size_t len, cap;
};

/* One Anthropic content block of a stream, by index. */
struct anth_block {
	enum { ANTH_TEXT, ANTH_TOOL, ANTH_OTHER } kind;
	int closed;          /* content_block_stop seen */
	struct wire_buf buf; /* the text, or a tool_use's partial JSON */
	json_t *tool;        /* a tool_use's neutral block; input set at its stop */
};

/* One OpenAI tool call of a stream, by index. */
struct oai_call {
	json_t *id, *name;    /* strings, from whichever chunk carried them */
	struct wire_buf args; /* the arguments pieces, concatenated */
};

struct wire_stream {
	enum wire_kind kind;
	int dead;      /* a feed failed or finish ran: nothing more is taken */
	int done;      /* message_stop or data: [DONE] seen */
	int started;   /* Anthropic: message_start seen */
	int has_usage; /* OpenAI: the usage chunk seen */
	size_t total;  /* bytes fed so far */
	/* The event-stream parser. */
	struct wire_buf line; /* the line being read, without its end */
	struct wire_buf data; /* the event's data lines, joined by \n */
	char event[64];       /* the event's "event:" field */
	int has_data;         /* the event has a data field */
	int skip_lf;          /* the last line ended with \r: a \n next is part of that end */
	/* The response being assembled. */
	enum wire_stop stop;
	struct wire_usage usage;
	struct anth_block *blocks;
	size_t nblocks, capblocks;
	struct oai_call *calls;
	size_t ncalls, capcalls;
	struct wire_buf text; /* OpenAI: the content deltas */
};

/* ---- common helpers ------------------------------------------------------ */

/* Replace every byte that is not printable ASCII in s: reasons and error
 * texts quote provider and runner text, and end up in logs. */
static void
wire_printable(char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
			*s = '?';
}

/* Format a reason into err (may be NULL), made printable.  Returns -1. */
static int wire_fail(char *err, size_t errsz, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int
wire_fail(char *err, size_t errsz, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errsz == 0)
		return -1;
	va_start(ap, fmt);
	vsnprintf(err, errsz, fmt, ap);
	va_end(ap);
	wire_printable(err);
	return -1;
}

/* Append n bytes at s to b.  0, or -1 when out of memory.  Every caller's
 * input is bounded by WIRE_BODY_MAX, so doubling cannot overflow. */
static int
wire_buf_add(struct wire_buf *b, const char *s, size_t n)
{
	size_t cap;
	char *p;

	if (n > WIRE_BODY_MAX || b->len > WIRE_BODY_MAX)
		return -1;
	if (b->len + n + 1 > b->cap) {
		for (cap = b->cap ? b->cap : 64; cap < b->len + n + 1; cap *= 2)
			;
		if ((p = realloc(b->p, cap)) == NULL)
			return -1;
		b->p = p;
		b->cap = cap;
	}
	if (n > 0)
		memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
	return 0;
}

static void
wire_buf_free(struct wire_buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

/* Room for element n of arr (elements of size sz, *cap allocated), zeroed.
 * Returns the array, maybe moved, or NULL (arr untouched) when out of
 * memory. n stays below WIRE_BLOCKS_MAX, so sizes cannot overflow. */
static void *
wire_grow(void *arr, size_t n, size_t *cap, size_t sz)
{
	size_t ncap;
	char *p;

	if (n < *cap)
		return arr;
	ncap = *cap ? *cap * 2 : 8;
	if ((p = realloc(arr, ncap * sz)) == NULL)
		return NULL;
	memset(p + *cap * sz, 0, (ncap - *cap) * sz);
	*cap = ncap;
	return p;
}

static int
wire_str_is(const json_t *v, const char *s)
{
	return json_is_string(v) && strcmp(json_string_value(v), s) == 0;
}

/* 1 to WIRE_ID_MAX bytes of printable ASCII: what a tool-use id, which we
 * log and send back, may hold. */
static int
wire_id_chars(const char *s, size_t n)
{
	size_t i;

	if (n == 0 || n > WIRE_ID_MAX)
		return 0;
	for (i = 0; i < n; i++)
		if (s[i] < 0x20 || s[i] >= 0x7f)
			return 0;
	return 1;
}

/* 1 to WIRE_ID_MAX bytes of [A-Za-z0-9_-]: what both providers accept as a
 * tool name. */
static int
wire_name_chars(const char *s, size_t n)
{
	size_t i;
	char c;

	if (n == 0 || n > WIRE_ID_MAX)
		return 0;
	for (i = 0; i < n; i++) {
		c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

static int
wire_id_ok(const json_t *v)
{
	return json_is_string(v) && wire_id_chars(json_string_value(v), json_string_length(v));
}

static int
wire_name_ok(const json_t *v)
{
	return json_is_string(v) && wire_name_chars(json_string_value(v), json_string_length(v));
}

/* Check a tool use's id and name (block i of what).  0 or -1. */
static int
wire_use_ok(const json_t *id, const json_t *name, const char *what, size_t i, char *err,
            size_t errsz)
{
	if (!wire_id_ok(id))
		return wire_fail(err, errsz,
		                 "%s[%zu]: the id is missing or not 1-%d printable bytes", what, i,
		                 WIRE_ID_MAX);
	if (!wire_name_ok(name))
		return wire_fail(err, errsz,
		                 "%s[%zu]: the name is missing or not 1-%d of [A-Za-z0-9_-]", what,
		                 i, WIRE_ID_MAX);
	return 0;
}

/* Parse len bytes of untrusted JSON (what names it in a reason) that must be
 * an object.  Returns a new reference, or NULL with a reason: a NUL byte, a
 * syntax error, a duplicate key, another type. */
static json_t *
wire_load(const char *what, const char *s, size_t len, char *err, size_t errsz)
{
	json_error_t je;
	json_t *v;

	if (len == 0)
		s = "";
	if (memchr(s, '\0', len) != NULL) {
		wire_fail(err, errsz, "%s has a NUL byte", what);
		return NULL;
	}
	if ((v = json_loadb(s, len, WIRE_JSON_FLAGS, &je)) == NULL) {
		wire_fail(err, errsz, "%s is bad JSON (line %d, column %d): %s", what, je.line,
		          je.column, je.text);
		return NULL;
	}
	if (!json_is_object(v)) {
		json_decref(v);
		wire_fail(err, errsz, "%s is not a JSON object", what);
		return NULL;
	}
	return v;
}

/* Read o's member key as a token count into *v: absent or null leaves *v
 * alone; anything but a non-negative integer is -1. */
static int
wire_count(const json_t *o, const char *key, uint64_t *v, char *err, size_t errsz)
{
	json_t *n = json_object_get(o, key);

	if (n == NULL || json_is_null(n))
		return 0;
	if (!json_is_integer(n) || json_integer_value(n) < 0)
		return wire_fail(err, errsz, "usage.%s is not a token count", key);
	*v = (uint64_t)json_integer_value(n);
	return 0;
}

static const struct {
	const char *name;
	enum wire_kind kind;
	enum wire_stop stop;
} wire_stops[] = {
    {"end_turn", WIRE_ANTHROPIC, WIRE_STOP_END},
    {"stop_sequence", WIRE_ANTHROPIC, WIRE_STOP_END},
    {"tool_use", WIRE_ANTHROPIC, WIRE_STOP_TOOL_USE},
    {"max_tokens", WIRE_ANTHROPIC, WIRE_STOP_MAX_TOKENS},
    {"stop", WIRE_OPENAI, WIRE_STOP_END},
    {"tool_calls", WIRE_OPENAI, WIRE_STOP_TOOL_USE},
    {"length", WIRE_OPENAI, WIRE_STOP_MAX_TOKENS},
};

/* A provider's stop reason v; anything unknown or missing (refusal,
 * pause_turn, content_filter, ...) is OTHER, for the caller to end on. */
static enum wire_stop
wire_stop_of(enum wire_kind k, const json_t *v)
{
	size_t i;

	for (i = 0; i < WIRE_NITEMS(wire_stops); i++)
		if (wire_stops[i].kind == k && wire_str_is(v, wire_stops[i].name))
			return wire_stops[i].stop;
	return WIRE_STOP_OTHER;
}

/* An error member e ({"type","message"} or a string) as "type: message" in
 * out, printable; "" when e is neither. */
static void
wire_error_of(const json_t *e, char *out, size_t outsz)
{
	const char *type, *msg;

	out[0] = '\0';
	if (json_is_string(e))
		snprintf(out, outsz, "%s", json_string_value(e));
	else if (json_is_object(e)) {
		type = json_string_value(json_object_get(e, "type"));
		msg = json_string_value(json_object_get(e, "message"));
		if (type != NULL && msg != NULL)
			snprintf(out, outsz, "%s: %s", type, msg);
		else if (msg != NULL || type != NULL)
			snprintf(out, outsz, "%s", msg != NULL ? msg : type);
	}
	wire_printable(out);
}

/* The -1 for a body or event carrying an "error" member, its text in err. */
static int
wire_error_event(const json_t *ev, char *err, size_t errsz)
{
	char msg[512];

	wire_error_of(json_object_get(ev, "error"), msg, sizeof(msg));
	return wire_fail(err, errsz, "provider error: %s", msg[0] != '\0' ? msg : "(no message)");
}

/* A neutral text block (NULL when out of memory). */
static json_t *
wire_text_block(const char *s, size_t n)
{
	return json_pack("{s:s, s:s%}", "type", "text", "text", s, n);
}

/* A neutral tool_use block; input is stolen.  NULL when out of memory. */
static json_t *
wire_tool_block(json_t *id, json_t *name, json_t *input)
{
	json_t *b;

	b = json_pack("{s:s, s:O, s:O}", "type", "tool_use", "id", id, "name", name);
	if (json_object_set_new(b, "input", input) == -1) {
		json_decref(b);
		return NULL;
	}
	return b;
}

/* Append block b (stolen; NULL means out of memory) to the response's
 * content array. */
static int
wire_append(json_t *content, json_t *b, char *err, size_t errsz)
{
	if (json_array_size(content) >= WIRE_BLOCKS_MAX) {
		json_decref(b);
		return wire_fail(err, errsz, "more than %d content blocks", WIRE_BLOCKS_MAX);
	}
	if (json_array_append_new(content, b) == -1)
		return wire_fail(err, errsz, "out of memory");
	return 0;
}

/* ---- the neutral request ------------------------------------------------- */

/* Refuse any member of o not in allowed (NULL-terminated): an unknown member
 * is a runner bug or an attempt to smuggle options to the provider. */
static int
req_members(const json_t *o, const char *const *allowed, const char *where, char *err, size_t errsz)
{
	const char *key;
	size_t i;
	void *it;

	for (it = json_object_iter((json_t *)o); it != NULL;
	     it = json_object_iter_next((json_t *)o, it)) {
		key = json_object_iter_key(it);
		for (i = 0; allowed[i] != NULL && strcmp(allowed[i], key) != 0; i++)
			;
		if (allowed[i] == NULL)
			return wire_fail(err, errsz, "%s: unknown member \"%s\"", where, key);
	}
	return 0;
}

static int
req_check_text(const json_t *b, const char *where, char *err, size_t errsz)
{
	static const char *const members[] = {"type", "text", NULL};

	if (!json_is_string(json_object_get(b, "text")))
		return wire_fail(err, errsz, "%s: text is missing or not a string", where);
	return req_members(b, members, where, err, errsz);
}

static int
req_check_use(const json_t *b, const char *where, char *err, size_t errsz)
{
	static const char *const members[] = {"type", "id", "name", "input", NULL};

	if (!wire_id_ok(json_object_get(b, "id")))
		return wire_fail(err, errsz, "%s: id is missing or not 1-%d printable bytes", where,
		                 WIRE_ID_MAX);
	if (!wire_name_ok(json_object_get(b, "name")))
		return wire_fail(err, errsz, "%s: name is missing or not 1-%d of [A-Za-z0-9_-]",
		                 where, WIRE_ID_MAX);
	if (!json_is_object(json_object_get(b, "input")))
		return wire_fail(err, errsz, "%s: input is missing or not an object", where);
	return req_members(b, members, where, err, errsz);
}

/* An image of a tool result: {type: image, source: {type: base64, media_type, data}},
 * png, jpeg, gif or webp, data base64 of at most WIRE_IMAGE_MAX bytes. */
static int
req_check_image(const json_t *b, const char *where, char *err, size_t errsz)
{
	static const char *const members[] = {"type", "source", NULL};
	static const char *const smembers[] = {"type", "media_type", "data", NULL};
	static const char *const media[] = {"image/png", "image/jpeg", "image/gif", "image/webp"};
	json_t *src = json_object_get(b, "source"), *data = json_object_get(src, "data");
	const char *d;
	size_t i, n;

	if (!json_is_object(src) || !wire_str_is(json_object_get(src, "type"), "base64"))
		return wire_fail(err, errsz, "%s: source is not an object of type base64", where);
	for (i = 0; i < WIRE_NITEMS(media); i++)
		if (wire_str_is(json_object_get(src, "media_type"), media[i]))
			break;
	if (i == WIRE_NITEMS(media))
		return wire_fail(err, errsz, "%s: media_type is not image/png, image/jpeg, "
		                 "image/gif or image/webp", where);
	if (!json_is_string(data) || (n = json_string_length(data)) == 0 || n % 4 != 0 ||
	    n > WIRE_IMAGE_MAX)
		return wire_fail(err, errsz, "%s: data is not base64 of 1 to %u bytes", where,
		                 WIRE_IMAGE_MAX);
	d = json_string_value(data);
	/* padding: at most two '=', at the end only */
	for (i = 0; i < n && d[i] != '='; i++)
		if (!((d[i] >= 'A' && d[i] <= 'Z') || (d[i] >= 'a' && d[i] <= 'z') ||
		      (d[i] >= '0' && d[i] <= '9') || d[i] == '+' || d[i] == '/'))
			return wire_fail(err, errsz, "%s: data is not base64", where);
	if (i < n - 2 || (i < n && strspn(d + i, "=") != n - i))
		return wire_fail(err, errsz, "%s: data is not base64", where);
	if (req_members(src, smembers, where, err, errsz) == -1)
		return -1;
	return req_members(b, members, where, err, errsz);
}

/* A tool result's content: a string, or text and image blocks. */
static int
req_check_result_content(const json_t *content, const char *where, char *err, size_t errsz)
{
	char sub[96];
	json_t *b;
	size_t i;

	if (json_is_string(content))
		return 0;
	if (!json_is_array(content) || json_array_size(content) == 0 ||
	    json_array_size(content) > WIRE_RESULT_BLOCKS_MAX)
		return wire_fail(err, errsz, "%s: content is not a string or an array of 1 to %d "
		                 "text and image blocks", where, WIRE_RESULT_BLOCKS_MAX);
	json_array_foreach(content, i, b)
	{
		snprintf(sub, sizeof(sub), "%.60s.content[%zu]", where, i);
		if (wire_str_is(json_object_get(b, "type"), "text")) {
			if (req_check_text(b, sub, err, errsz) == -1)
				return -1;
		} else if (wire_str_is(json_object_get(b, "type"), "image")) {
			if (req_check_image(b, sub, err, errsz) == -1)
				return -1;
		} else
			return wire_fail(err, errsz, "%s is not a text or an image block", sub);
	}
	return 0;
}

static int
req_check_result(const json_t *b, const char *where, char *err, size_t errsz)
{
	static const char *const members[] = {"type", "tool_use_id", "content", "is_error", NULL};
	json_t *content = json_object_get(b, "content"), *is_error = json_object_get(b, "is_error");

	if (!wire_id_ok(json_object_get(b, "tool_use_id")))
		return wire_fail(err, errsz,
		                 "%s: tool_use_id is missing or not 1-%d printable bytes", where,
		                 WIRE_ID_MAX);
	if (content != NULL && req_check_result_content(content, where, err, errsz) == -1)
		return -1;
	if (is_error != NULL && !json_is_boolean(is_error))
		return wire_fail(err, errsz, "%s: is_error is not a boolean", where);
	return req_members(b, members, where, err, errsz);
}

/* Block b of a message from role: text for both, tool_use only from the
 * assistant, tool_result only from the user. */
static int
req_check_block(const json_t *b, const char *role, const char *where, char *err, size_t errsz)
{
	const char *type;

	if ((type = json_string_value(json_object_get(b, "type"))) == NULL)
		return wire_fail(err, errsz, "%s is not an object with a string type", where);
	if (strcmp(type, "text") == 0)
		return req_check_text(b, where, err, errsz);
	if (strcmp(type, "tool_use") == 0 && strcmp(role, "assistant") == 0)
		return req_check_use(b, where, err, errsz);
	if (strcmp(type, "tool_result") == 0 && strcmp(role, "user") == 0)
		return req_check_result(b, where, err, errsz);
	return wire_fail(err, errsz, "%s: role %s cannot send a block of type \"%s\"", where, role,
	                 type);
}

static int
req_check_message(const json_t *m, size_t i, char *err, size_t errsz)
{
	static const char *const members[] = {"role", "content", NULL};
	const char *role = json_string_value(json_object_get(m, "role"));
	json_t *content = json_object_get(m, "content"), *b;
	char where[64];
	size_t j;

	snprintf(where, sizeof(where), "messages[%zu]", i);
	if (role == NULL || (strcmp(role, "user") != 0 && strcmp(role, "assistant") != 0))
		return wire_fail(err, errsz, "%s: role is not \"user\" or \"assistant\"", where);
	if (!json_is_array(content) || json_array_size(content) == 0)
		return wire_fail(err, errsz, "%s: content is not a non-empty array", where);
	if (req_members(m, members, where, err, errsz) == -1)
		return -1;
	json_array_foreach(content, j, b)
	{
		snprintf(where, sizeof(where), "messages[%zu].content[%zu]", i, j);
		if (req_check_block(b, role, where, err, errsz) == -1)
			return -1;
	}
	return 0;
}

static int
req_check_tool(const json_t *t, size_t i, char *err, size_t errsz)
{
	static const char *const members[] = {"name", "description", "input_schema", NULL};
	json_t *desc = json_object_get(t, "description");
	char where[32];

	snprintf(where, sizeof(where), "tools[%zu]", i);
	if (!wire_name_ok(json_object_get(t, "name")))
		return wire_fail(err, errsz, "%s: name is missing or not 1-%d of [A-Za-z0-9_-]",
		                 where, WIRE_ID_MAX);
	if (desc != NULL && !json_is_string(desc))
		return wire_fail(err, errsz, "%s: description is not a string", where);
	if (!json_is_object(json_object_get(t, "input_schema")))
		return wire_fail(err, errsz, "%s: input_schema is missing or not an object", where);
	return req_members(t, members, where, err, errsz);
}

/* The whole neutral request, so that the builders below may trust it. */
static int
req_check(const json_t *req, char *err, size_t errsz)
{
	static const char *const members[] = {"system", "messages", "tools", NULL};
	json_t *system = json_object_get(req, "system"), *msgs = json_object_get(req, "messages");
	json_t *tools = json_object_get(req, "tools"), *v;
	size_t i;

	if (!json_is_object(req))
		return wire_fail(err, errsz, "the request is not an object");
	if (req_members(req, members, "the request", err, errsz) == -1)
		return -1;
	if (system != NULL && !json_is_string(system))
		return wire_fail(err, errsz, "system is not a string");
	if (!json_is_array(msgs))
		return wire_fail(err, errsz, "messages is missing or not an array");
	json_array_foreach(msgs, i, v)
	{
		if (req_check_message(v, i, err, errsz) == -1)
			return -1;
	}
	if (tools != NULL && !json_is_array(tools))
		return wire_fail(err, errsz, "tools is not an array");
	json_array_foreach(tools, i, v)
	{
		if (req_check_tool(v, i, err, errsz) == -1)
			return -1;
	}
	return 0;
}

/* ---- Anthropic request ---------------------------------------------------- */

/* The neutral shape is Anthropic's, and req_check let through only the
 * members we know: messages and tools go as they are (conv_add_msgs). */

/* ---- OpenAI request ------------------------------------------------------- */

#define OAI_IMAGE_NOTE "[an image the tool returned is left out: tool results take no images here]"

/* A tool_result block as a tool message; is_error has no field there, so
 * the content says it.  A tool message takes text only: the text blocks of
 * a content array are joined by newlines, each image is a note. */
static json_t *
oai_tool_msg(const json_t *b)
{
	json_t *c = json_object_get(b, "content"), *x, *m;
	struct wire_buf t = {0};
	const char *s = "";
	size_t n = 0, i;

	if (json_is_string(c)) {
		s = json_string_value(c);
		n = json_string_length(c);
	} else if (json_is_array(c)) {
		json_array_foreach(c, i, x)
		{
			if ((t.p != NULL && wire_buf_add(&t, "\n", 1) == -1) ||
			    (wire_str_is(json_object_get(x, "type"), "text")
			         ? wire_buf_add(&t, json_string_value(json_object_get(x, "text")),
			                        json_string_length(json_object_get(x, "text")))
			         : wire_buf_add(&t, OAI_IMAGE_NOTE, strlen(OAI_IMAGE_NOTE))) == -1) {
				wire_buf_free(&t);
				return NULL;
			}
		}
		s = t.p != NULL ? t.p : "";
		n = t.len;
	}
	m = json_pack("{s:s, s:O, s:s+%}", "role", "tool", "tool_call_id",
	              json_object_get(b, "tool_use_id"), "content",
	              json_is_true(json_object_get(b, "is_error")) ? "error: " : "", s, n);
	free(t.p);
	return m;
}

/* Append text block b's text to t, after a newline when t has one already
 * (t->p is set from the first text on, even an empty one). */
static int
oai_join(struct wire_buf *t, const json_t *b)
{
	json_t *s = json_object_get(b, "text");

	if (t->p != NULL && wire_buf_add(t, "\n", 1) == -1)
		return -1;
	return wire_buf_add(t, json_string_value(s), json_string_length(s));
}

/* A user message: its text blocks joined into one user message, put where
 * the first of them stands; each tool_result a tool message, in block order. */
static int
oai_user(json_t *out, const json_t *content)
{
	struct wire_buf text = {0};
	size_t i, at = 0;
	json_t *b;
	int rc = 0;

	json_array_foreach(content, i, b)
	{
		if (wire_str_is(json_object_get(b, "type"), "text")) {
			if (text.p == NULL)
				at = json_array_size(out);
			rc |= oai_join(&text, b);
		} else
			rc |= json_array_append_new(out, oai_tool_msg(b));
	}
	if (text.p != NULL && rc == 0)
		rc |= json_array_insert_new(
		    out, at, json_pack("{s:s, s:s%}", "role", "user", "content", text.p, text.len));
	free(text.p);
	return rc;
}

/* A tool_use block as a tool call: arguments are the input, serialised. */
static json_t *
oai_call(const json_t *b)
{
	char *args = json_dumps(json_object_get(b, "input"), JSON_COMPACT);
	json_t *c;

	c = json_pack("{s:O, s:s, s:{s:O, s:s}}", "id", json_object_get(b, "id"), "type",
	              "function", "function", "name", json_object_get(b, "name"), "arguments",
	              args);
	free(args);
	return c;
}

/* An assistant message: text blocks joined as content (null when none),
 * tool_use blocks as tool_calls (absent when none). */
static int
oai_assistant(json_t *out, const json_t *content)
{
	struct wire_buf text = {0};
	json_t *calls = json_array(), *msg, *b;
	int rc = 0;
	size_t i;

	json_array_foreach(content, i, b)
	{
		if (wire_str_is(json_object_get(b, "type"), "text"))
			rc |= oai_join(&text, b);
		else
			rc |= json_array_append_new(calls, oai_call(b));
	}
	msg = json_pack("{s:s}", "role", "assistant");
	rc |= json_object_set_new(msg, "content",
	                          text.p != NULL ? json_stringn(text.p, text.len) : json_null());
	if (json_array_size(calls) > 0)
		rc |= json_object_set_new(msg, "tool_calls", json_incref(calls));
	rc |= json_array_append_new(out, msg);
	json_decref(calls);
	free(text.p);
	return rc;
}

/* A neutral tool as a function tool (NULL when out of memory). */
static json_t *
oai_tool(const json_t *t)
{
	json_t *desc = json_object_get(t, "description"), *tool;

	tool =
	    json_pack("{s:s, s:{s:O, s:O}}", "type", "function", "function", "name",
	              json_object_get(t, "name"), "parameters", json_object_get(t, "input_schema"));
	if (desc != NULL &&
	    json_object_set(json_object_get(tool, "function"), "description", desc) == -1) {
		json_decref(tool);
		return NULL;
	}
	return tool;
}

static json_t *
oai_tools(const json_t *tools)
{
	json_t *out = json_array(), *t;
	int rc = 0;
	size_t i;

	json_array_foreach(tools, i, t)
	{
		rc |= json_array_append_new(out, oai_tool(t));
	}
	if (rc != 0) {
		json_decref(out);
		return NULL;
	}
	return out;
}

static int
wire_kind_ok(enum wire_kind k)
{
	return k == WIRE_ANTHROPIC || k == WIRE_OPENAI;
}

/* ---- a conversation kept across calls ------------------------------------- */

/*
 * The provider text of everything sent so far: the system prompt and the
 * tools (fixed for a conversation) and each message, serialised once.  A
 * call adds only its new messages and the body is put together from the
 * texts, so a call's cost no longer grows with the whole conversation's
 * JSON work, only with copying its bytes.
 */
struct wire_conv {
	enum wire_kind kind;
	size_t count;           /* neutral messages held */
	char *system;           /* the system prompt as a JSON string, or NULL */
	char *tools;            /* the provider's tools array, or NULL */
	struct wire_buf msgs;   /* provider messages, each followed by ',' */
};

struct wire_conv *
wire_conv_new(enum wire_kind k)
{
	struct wire_conv *c;

	if (!wire_kind_ok(k) || (c = calloc(1, sizeof(*c))) == NULL)
		return NULL;
	c->kind = k;
	return c;
}

void
wire_conv_free(struct wire_conv *c)
{
	if (c == NULL)
		return;
	free(c->system);
	free(c->tools);
	wire_buf_free(&c->msgs);
	free(c);
}

size_t
wire_conv_count(const struct wire_conv *c)
{
	return c->count;
}

/* Each element of array a, serialised and followed by ',', onto b. */
static int
conv_add_all(struct wire_buf *b, const json_t *a)
{
	json_t *v;
	size_t i;
	char *s;
	int rc = 0;

	json_array_foreach(a, i, v)
	{
		if ((s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY)) == NULL)
			return -1;
		rc |= wire_buf_add(b, s, strlen(s));
		rc |= wire_buf_add(b, ",", 1);
		free(s);
	}
	return rc;
}

/* The provider messages of neutral messages msgs onto b. */
static int
conv_add_msgs(enum wire_kind k, struct wire_buf *b, const json_t *msgs)
{
	json_t *out, *m;
	size_t i;
	int rc = 0;

	if (k == WIRE_ANTHROPIC)
		return conv_add_all(b, msgs);
	if ((out = json_array()) == NULL)
		return -1;
	json_array_foreach(msgs, i, m)
	{
		if (wire_str_is(json_object_get(m, "role"), "user"))
			rc |= oai_user(out, json_object_get(m, "content"));
		else
			rc |= oai_assistant(out, json_object_get(m, "content"));
	}
	rc |= conv_add_all(b, out);
	json_decref(out);
	return rc;
}

/* The conversation's fixed head, from its first request. */
static int
conv_head(struct wire_conv *c, const json_t *req)
{
	json_t *system = json_object_get(req, "system"), *tools = json_object_get(req, "tools");
	json_t *t = NULL;

	if (json_string_length(system) > 0 &&
	    (c->system = json_dumps(system, JSON_COMPACT | JSON_ENCODE_ANY)) == NULL)
		return -1;
	if (json_array_size(tools) == 0)
		return 0;
	if (c->kind == WIRE_OPENAI && (t = oai_tools(tools)) == NULL)
		return -1;
	c->tools = json_dumps(t != NULL ? t : tools, JSON_COMPACT);
	json_decref(t);
	return c->tools != NULL ? 0 : -1;
}

int
wire_conv_add(struct wire_conv *c, const json_t *req, char *err, size_t errsz)
{
	size_t len = c->msgs.len;

	if (req_check(req, err, errsz) == -1)
		return -1;
	if (c->count > 0 && (json_object_get(req, "system") != NULL ||
	                     json_object_get(req, "tools") != NULL))
		return wire_fail(err, errsz, "system and tools come with the first messages only");
	if (c->count == 0 && conv_head(c, req) == -1) {
		free(c->system);
		free(c->tools);
		c->system = c->tools = NULL;
		return wire_fail(err, errsz, "out of memory");
	}
	if (conv_add_msgs(c->kind, &c->msgs, json_object_get(req, "messages")) == -1) {
		c->msgs.len = len; /* as it was */
		if (c->msgs.p != NULL)
			c->msgs.p[len] = '\0';
		return wire_fail(err, errsz, "out of memory, or the conversation is too large");
	}
	c->count += json_array_size(json_object_get(req, "messages"));
	return 0;
}

/* Append a string literal. */
#define BUF_LIT(b, lit) wire_buf_add((b), (lit), sizeof(lit) - 1)

/* What a body is made with, for a provider of kind k: 0, or -1 with a
 * reason. */
static int
wire_body_args(enum wire_kind k, const char *model, uint64_t max_tokens, unsigned flags,
               char *err, size_t errsz)
{
	if ((flags & ~(WIRE_STREAM | WIRE_MAX_COMPLETION)) != 0 ||
	    ((flags & WIRE_MAX_COMPLETION) && k != WIRE_OPENAI)) {
		wire_fail(err, errsz, "unknown flags %#x for this provider kind", flags);
		return -1;
	}
	if (model == NULL || !wire_id_chars(model, strlen(model))) {
		wire_fail(err, errsz, "the model is not 1-%d printable bytes", WIRE_ID_MAX);
		return -1;
	}
	if (max_tokens == 0 || max_tokens > INT64_MAX) {
		wire_fail(err, errsz, "max_tokens is 0 or too large");
		return -1;
	}
	return 0;
}

char *
wire_conv_body(const struct wire_conv *c, const char *model, uint64_t max_tokens, unsigned flags,
               char *err, size_t errsz)
{
	struct wire_buf b = {0};
	json_t *mj;
	char *m, num[24];
	int rc = 0, stream = (flags & WIRE_STREAM) != 0;

	if (wire_body_args(c->kind, model, max_tokens, flags, err, errsz) == -1)
		return NULL;
	if ((mj = json_string(model)) == NULL)
		return NULL;
	m = json_dumps(mj, JSON_COMPACT | JSON_ENCODE_ANY);
	json_decref(mj);
	if (m == NULL)
		return NULL;
	snprintf(num, sizeof(num), "%llu", (unsigned long long)max_tokens);
	rc |= BUF_LIT(&b, "{\"model\":");
	rc |= wire_buf_add(&b, m, strlen(m));
	free(m);
	if (flags & WIRE_MAX_COMPLETION)
		rc |= BUF_LIT(&b, ",\"max_completion_tokens\":");
	else
		rc |= BUF_LIT(&b, ",\"max_tokens\":");
	rc |= wire_buf_add(&b, num, strlen(num));
	if (c->system != NULL && c->kind == WIRE_ANTHROPIC) {
		rc |= BUF_LIT(&b, ",\"system\":");
		rc |= wire_buf_add(&b, c->system, strlen(c->system));
	}
	rc |= BUF_LIT(&b, ",\"messages\":[");
	if (c->system != NULL && c->kind == WIRE_OPENAI) {
		rc |= BUF_LIT(&b, "{\"role\":\"system\",\"content\":");
		rc |= wire_buf_add(&b, c->system, strlen(c->system));
		rc |= c->msgs.len > 0 ? BUF_LIT(&b, "},") : BUF_LIT(&b, "}");
	}
	/* the messages' texts end with ',': all but the last byte */
	if (c->msgs.len > 0)
		rc |= wire_buf_add(&b, c->msgs.p, c->msgs.len - 1);
	rc |= BUF_LIT(&b, "]");
	if (c->tools != NULL) {
		rc |= BUF_LIT(&b, ",\"tools\":");
		rc |= wire_buf_add(&b, c->tools, strlen(c->tools));
	}
	if (stream)
		rc |= BUF_LIT(&b, ",\"stream\":true");
	/* without include_usage a stream carries no usage, and we could not
	 * account for what the call cost */
	if (stream && c->kind == WIRE_OPENAI)
		rc |= BUF_LIT(&b, ",\"stream_options\":{\"include_usage\":true}");
	rc |= BUF_LIT(&b, "}");
	if (rc != 0) {
		wire_buf_free(&b);
		wire_fail(err, errsz, "out of memory, or the request is too large");
		return NULL;
	}
	return b.p;
}

char *
wire_request(enum wire_kind k, const json_t *req, const char *model, uint64_t max_tokens,
             unsigned flags, char *err, size_t errsz)
{
	struct wire_conv *c;
	char *s;

	if (!wire_kind_ok(k)) {
		wire_fail(err, errsz, "unknown provider kind %d", (int)k);
		return NULL;
	}
	/* checked before the request, so that a bad argument is the reason */
	if (wire_body_args(k, model, max_tokens, flags, err, errsz) == -1)
		return NULL;
	/* one way to make a body: a conversation of this request alone */
	if ((c = wire_conv_new(k)) == NULL) {
		wire_fail(err, errsz, "out of memory");
		return NULL;
	}
	s = wire_conv_add(c, req, err, errsz) == 0 ?
	    wire_conv_body(c, model, max_tokens, flags, err, errsz) : NULL;
	wire_conv_free(c);
	return s;
}

const char *
wire_path(enum wire_kind k)
{
	switch (k) {
	case WIRE_ANTHROPIC:
		return "/v1/messages";
	case WIRE_OPENAI:
		return "/chat/completions";
	}
	return NULL;
}

/* ---- whole responses ------------------------------------------------------ */

/* Anthropic's four counts, each optional here; callers require theirs. */
static int
anth_counts(const json_t *u, struct wire_usage *usage, char *err, size_t errsz)
{
	if (wire_count(u, "input_tokens", &usage->input, err, errsz) == -1 ||
	    wire_count(u, "output_tokens", &usage->output, err, errsz) == -1 ||
	    wire_count(u, "cache_read_input_tokens", &usage->cache_read, err, errsz) == -1 ||
	    wire_count(u, "cache_creation_input_tokens", &usage->cache_write, err, errsz) == -1)
		return -1;
	return 0;
}

/* Block b (content[i]) to out when it is text or tool_use; other types
 * (thinking, server tools) are the provider's business and dropped.  An
 * empty text is dropped too: the provider refuses it when sent back. */
static int
anth_block(json_t *out, json_t *b, size_t i, char *err, size_t errsz)
{
	const char *type = json_string_value(json_object_get(b, "type"));
	json_t *t = json_object_get(b, "text"), *id, *name, *input;

	if (type == NULL)
		return wire_fail(err, errsz, "content[%zu] is not an object with a string type", i);
	if (strcmp(type, "text") == 0) {
		if (!json_is_string(t))
			return wire_fail(err, errsz, "content[%zu].text is not a string", i);
		if (json_string_length(t) == 0)
			return 0;
		return wire_append(
		    out, wire_text_block(json_string_value(t), json_string_length(t)), err, errsz);
	}
	if (strcmp(type, "tool_use") != 0)
		return 0;
	id = json_object_get(b, "id");
	name = json_object_get(b, "name");
	if (wire_use_ok(id, name, "content", i, err, errsz) == -1)
		return -1;
	if (!json_is_object(input = json_object_get(b, "input")))
		return wire_fail(err, errsz, "content[%zu].input is not an object", i);
	return wire_append(out, wire_tool_block(id, name, json_incref(input)), err, errsz);
}

static int
anth_parse(json_t *root, struct wire_resp *out, char *err, size_t errsz)
{
	json_t *content = json_object_get(root, "content"), *u = json_object_get(root, "usage"), *b;
	size_t i;

	if (!json_is_array(content))
		return wire_fail(err, errsz, "content is missing or not an array");
	json_array_foreach(content, i, b)
	{
		if (anth_block(out->content, b, i, err, errsz) == -1)
			return -1;
	}
	out->stop = wire_stop_of(WIRE_ANTHROPIC, json_object_get(root, "stop_reason"));
	if (json_object_get(u, "input_tokens") == NULL ||
	    json_object_get(u, "output_tokens") == NULL)
		return wire_fail(err, errsz,
		                 "usage.input_tokens or usage.output_tokens is missing");
	return anth_counts(u, &out->usage, err, errsz);
}

/* prompt_tokens counts the cached tokens too; ours does not. */
static int
oai_usage(const json_t *u, struct wire_usage *usage, char *err, size_t errsz)
{
	json_t *d = json_object_get(u, "prompt_tokens_details");
	uint64_t prompt = 0, cached = 0;

	if (json_object_get(u, "prompt_tokens") == NULL ||
	    json_object_get(u, "completion_tokens") == NULL)
		return wire_fail(err, errsz,
		                 "usage.prompt_tokens or usage.completion_tokens is missing");
	if (d != NULL && !json_is_null(d) && !json_is_object(d))
		return wire_fail(err, errsz, "usage.prompt_tokens_details is not an object");
	if (wire_count(u, "prompt_tokens", &prompt, err, errsz) == -1 ||
	    wire_count(u, "completion_tokens", &usage->output, err, errsz) == -1 ||
	    wire_count(d, "cached_tokens", &cached, err, errsz) == -1)
		return -1;
	usage->input = prompt > cached ? prompt - cached : 0;
	usage->cache_read = cached;
	usage->cache_write = 0;
	return 0;
}

/* A tool call's input from its arguments (n bytes at s): the object they
 * hold, {} for nothing but white space (some servers send "" for a call
 * without parameters), null for anything else: the model wrote bad
 * arguments, which the runner answers with a tool error.  NULL only when
 * out of memory. */
static json_t *
oai_args(const char *s, size_t n)
{
	json_t *v;
	size_t i;

	for (i = 0; i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n'); i++)
		;
	if (i == n)
		return json_object();
	v = json_loadb(s, n, WIRE_JSON_FLAGS, NULL);
	if (json_is_object(v))
		return v;
	json_decref(v);
	return json_null();
}

static int
oai_parse_call(json_t *out, const json_t *tc, size_t i, char *err, size_t errsz)
{
	json_t *type = json_object_get(tc, "type"), *f = json_object_get(tc, "function");
	json_t *id = json_object_get(tc, "id"), *name = json_object_get(f, "name");
	json_t *args = json_object_get(f, "arguments"), *input;

	if (!json_is_object(tc) ||
	    (type != NULL && !json_is_null(type) && !wire_str_is(type, "function")))
		return wire_fail(err, errsz, "tool_calls[%zu] is not a function call", i);
	if (wire_use_ok(id, name, "tool_calls", i, err, errsz) == -1)
		return -1;
	if (!json_is_string(args))
		return wire_fail(err, errsz, "tool_calls[%zu]: arguments is not a string", i);
	if ((input = oai_args(json_string_value(args), json_string_length(args))) == NULL)
		return wire_fail(err, errsz, "out of memory");
	return wire_append(out, wire_tool_block(id, name, input), err, errsz);
}

static int
oai_parse(json_t *root, struct wire_resp *out, char *err, size_t errsz)
{
	json_t *c = json_array_get(json_object_get(root, "choices"), 0);
	json_t *msg = json_object_get(c, "message"), *text = json_object_get(msg, "content");
	json_t *calls = json_object_get(msg, "tool_calls"), *tc;
	size_t i;

	if (!json_is_object(msg))
		return wire_fail(err, errsz, "choices[0].message is missing or not an object");
	if (text != NULL && !json_is_null(text) && !json_is_string(text))
		return wire_fail(err, errsz, "choices[0].message.content is not a string");
	if (json_string_length(text) > 0 &&
	    wire_append(out->content,
	                wire_text_block(json_string_value(text), json_string_length(text)), err,
	                errsz) == -1)
		return -1;
	if (calls != NULL && !json_is_null(calls) && !json_is_array(calls))
		return wire_fail(err, errsz, "choices[0].message.tool_calls is not an array");
	json_array_foreach(calls, i, tc)
	{
		if (oai_parse_call(out->content, tc, i, err, errsz) == -1)
			return -1;
	}
	out->stop = wire_stop_of(WIRE_OPENAI, json_object_get(c, "finish_reason"));
	if (!json_is_object(json_object_get(root, "usage")))
		return wire_fail(err, errsz, "usage is missing or not an object");
	return oai_usage(json_object_get(root, "usage"), &out->usage, err, errsz);
}

int
wire_parse(enum wire_kind k, const char *body, size_t len, struct wire_resp *out, char *err,
           size_t errsz)
{
	json_t *root, *e;
	int rv;

	memset(out, 0, sizeof(*out));
	if (!wire_kind_ok(k))
		return wire_fail(err, errsz, "unknown provider kind %d", (int)k);
	if (len > WIRE_BODY_MAX)
		return wire_fail(err, errsz, "the response is larger than %u bytes", WIRE_BODY_MAX);
	if ((root = wire_load("the response", body, len, err, errsz)) == NULL)
		return -1;
	if ((e = json_object_get(root, "error")) != NULL && !json_is_null(e))
		rv = wire_error_event(root, err, errsz);
	else if ((out->content = json_array()) == NULL)
		rv = wire_fail(err, errsz, "out of memory");
	else if (k == WIRE_OPENAI)
		rv = oai_parse(root, out, err, errsz);
	else
		rv = anth_parse(root, out, err, errsz);
	json_decref(root);
	if (rv == -1)
		wire_resp_free(out);
	return rv;
}

void
wire_resp_free(struct wire_resp *r)
{
	json_decref(r->content);
	r->content = NULL;
}

/* ---- Anthropic stream ----------------------------------------------------- */

/* The block an event's index names: one that started and has not stopped.
 * NULL with a reason otherwise. */
static struct anth_block *
anth_block_at(struct wire_stream *s, const json_t *ev, const char *what, char *err, size_t errsz)
{
	json_t *idx = json_object_get(ev, "index");
	json_int_t i;

	if (!json_is_integer(idx) || (i = json_integer_value(idx)) < 0 ||
	    (uint64_t)i >= s->nblocks || s->blocks[i].closed) {
		wire_fail(err, errsz, "%s: the index is not that of an open block", what);
		return NULL;
	}
	return &s->blocks[i];
}

static int
anth_start_text(struct anth_block *b, const json_t *cb, char *err, size_t errsz)
{
	json_t *t = json_object_get(cb, "text");

	b->kind = ANTH_TEXT;
	if (t != NULL && !json_is_string(t))
		return wire_fail(err, errsz, "content_block_start: text is not a string");
	if (wire_buf_add(&b->buf, json_string_value(t), json_string_length(t)) == -1)
		return wire_fail(err, errsz, "out of memory");
	return 0;
}

/* The input here is {} and the deltas bring the real one; a start that
 * carries all of it and no delta is taken as it is. */
static int
anth_start_tool(struct anth_block *b, size_t i, const json_t *cb, char *err, size_t errsz)
{
	json_t *id = json_object_get(cb, "id"), *name = json_object_get(cb, "name");
	json_t *input = json_object_get(cb, "input");

	b->kind = ANTH_TOOL;
	if (wire_use_ok(id, name, "content_block_start", i, err, errsz) == -1)
		return -1;
	if (input != NULL && !json_is_object(input))
		return wire_fail(err, errsz, "content_block_start[%zu]: input is not an object", i);
	b->tool = wire_tool_block(id, name, input != NULL ? json_deep_copy(input) : json_object());
	if (b->tool == NULL)
		return wire_fail(err, errsz, "out of memory");
	return 0;
}

/* Blocks come in index order, each index once. */
static int
anth_block_start(struct wire_stream *s, json_t *ev, char *err, size_t errsz)
{
	json_t *idx = json_object_get(ev, "index"), *cb = json_object_get(ev, "content_block");
	const char *type = json_string_value(json_object_get(cb, "type"));
	struct anth_block *b;
	void *p;

	if (!json_is_integer(idx) || json_integer_value(idx) != (json_int_t)s->nblocks)
		return wire_fail(err, errsz, "content_block_start: index is not %zu", s->nblocks);
	if (type == NULL)
		return wire_fail(err, errsz, "content_block_start: content_block.type is missing");
	if (s->nblocks >= WIRE_BLOCKS_MAX)
		return wire_fail(err, errsz, "more than %d content blocks", WIRE_BLOCKS_MAX);
	if ((p = wire_grow(s->blocks, s->nblocks, &s->capblocks, sizeof(*s->blocks))) == NULL)
		return wire_fail(err, errsz, "out of memory");
	s->blocks = p;
	b = &s->blocks[s->nblocks++];
	if (strcmp(type, "text") == 0)
		return anth_start_text(b, cb, err, errsz);
	if (strcmp(type, "tool_use") == 0)
		return anth_start_tool(b, s->nblocks - 1, cb, err, errsz);
	b->kind = ANTH_OTHER;
	return 0;
}

/* Add a delta's string v to b, which must be of the delta's kind; blocks we
 * drop take any delta. */
static int
anth_append(struct anth_block *b, int kind, const json_t *v, const char *what, char *err,
            size_t errsz)
{
	if (b->kind == ANTH_OTHER)
		return 0;
	if ((int)b->kind != kind)
		return wire_fail(err, errsz, "a %s for a block of another type", what);
	if (!json_is_string(v))
		return wire_fail(err, errsz, "a %s without its string", what);
	if (wire_buf_add(&b->buf, json_string_value(v), json_string_length(v)) == -1)
		return wire_fail(err, errsz, "out of memory");
	return 0;
}

/* Deltas we do not keep (thinking, signature, citations) are ignored. */
static int
anth_block_delta(struct wire_stream *s, json_t *ev, char *err, size_t errsz)
{
	json_t *d = json_object_get(ev, "delta");
	const char *type = json_string_value(json_object_get(d, "type"));
	struct anth_block *b;

	if ((b = anth_block_at(s, ev, "content_block_delta", err, errsz)) == NULL)
		return -1;
	if (type == NULL)
		return wire_fail(err, errsz, "content_block_delta: delta.type is missing");
	if (strcmp(type, "text_delta") == 0)
		return anth_append(b, ANTH_TEXT, json_object_get(d, "text"), type, err, errsz);
	if (strcmp(type, "input_json_delta") == 0)
		return anth_append(b, ANTH_TOOL, json_object_get(d, "partial_json"), type, err,
		                   errsz);
	return 0;
}

/* A tool_use's input is whole only now. */
static int
anth_block_stop(struct wire_stream *s, json_t *ev, char *err, size_t errsz)
{
	struct anth_block *b;
	json_t *input;

	if ((b = anth_block_at(s, ev, "content_block_stop", err, errsz)) == NULL)
		return -1;
	b->closed = 1;
	if (b->kind != ANTH_TOOL || b->buf.len == 0)
		return 0;
	if ((input = wire_load("a tool_use's input", b->buf.p, b->buf.len, err, errsz)) == NULL)
		return -1;
	wire_buf_free(&b->buf);
	if (json_object_set_new(b->tool, "input", input) == -1)
		return wire_fail(err, errsz, "out of memory");
	return 0;
}

static int
anth_message_start(struct wire_stream *s, json_t *ev, char *err, size_t errsz)
{
	json_t *u = json_object_get(json_object_get(ev, "message"), "usage");

	if (json_object_get(u, "input_tokens") == NULL)
		return wire_fail(err, errsz,
		                 "message_start: message.usage.input_tokens is missing");
	s->started = 1;
	return anth_counts(u, &s->usage, err, errsz);
}

/* Its usage counts are cumulative: the latest replace what came before. */
static int
anth_message_delta(struct wire_stream *s, json_t *ev, char *err, size_t errsz)
{
	json_t *r = json_object_get(json_object_get(ev, "delta"), "stop_reason");
	json_t *u = json_object_get(ev, "usage");

	if (r != NULL && !json_is_null(r))
		s->stop = wire_stop_of(WIRE_ANTHROPIC, r);
	if (u != NULL && !json_is_null(u) && !json_is_object(u))
		return wire_fail(err, errsz, "message_delta: usage is not an object");
	return anth_counts(u, &s->usage, err, errsz);
}

static int
anth_message_stop(struct wire_stream *s, json_t *ev, char *err, size_t errsz)
{
	s->done = 1;
	return 0;
}

static int
anth_ping(struct wire_stream *s, json_t *ev, char *err, size_t errsz)
{
	return 0;
}

static int
anth_error(struct wire_stream *s, json_t *ev, char *err, size_t errsz)
{
	return wire_error_event(ev, err, errsz);
}

static const struct {
	const char *type;
	int started; /* 1: only after message_start, 0: only before, -1: any time */
	int (*fn)(struct wire_stream *, json_t *, char *, size_t);
} anth_events[] = {
    {"message_start", 0, anth_message_start},
    {"content_block_start", 1, anth_block_start},
    {"content_block_delta", 1, anth_block_delta},
    {"content_block_stop", 1, anth_block_stop},
    {"message_delta", 1, anth_message_delta},
    {"message_stop", 1, anth_message_stop},
    {"ping", -1, anth_ping},
    {"error", -1, anth_error},
};

/* Unknown types are ignored, as the API asks of clients: new ones may
 * come.  Known ones must come in their place around message_start. */
static int
anth_dispatch(struct wire_stream *s, const char *type, json_t *ev, char *err, size_t errsz)
{
	size_t i;

	for (i = 0; i < WIRE_NITEMS(anth_events); i++)
		if (strcmp(type, anth_events[i].type) == 0)
			break;
	if (i == WIRE_NITEMS(anth_events))
		return 0;
	if (anth_events[i].started != -1 && anth_events[i].started != s->started)
		return wire_fail(err, errsz, "%s %s message_start", type,
		                 s->started ? "after" : "before");
	return anth_events[i].fn(s, ev, err, errsz);
}

/* The type inside data wins over the event: line (they agree when both are
 * sent). */
static int
anth_event(struct wire_stream *s, const char *data, size_t len, char *err, size_t errsz)
{
	json_t *ev, *t;
	const char *type;
	int rv;

	if ((ev = wire_load("an event", data, len, err, errsz)) == NULL)
		return -1;
	t = json_object_get(ev, "type");
	type = t != NULL ? json_string_value(t) : s->event[0] != '\0' ? s->event : NULL;
	if (type == NULL)
		rv = wire_fail(err, errsz, "an event without a string type");
	else
		rv = anth_dispatch(s, type, ev, err, errsz);
	json_decref(ev);
	return rv;
}

static int
anth_finish(struct wire_stream *s, struct wire_resp *out, char *err, size_t errsz)
{
	struct anth_block *b;
	size_t i;
	int rv = 0;

	if (!s->done)
		return wire_fail(err, errsz, "the stream ended before message_stop");
	for (i = 0; rv == 0 && i < s->nblocks; i++) {
		b = &s->blocks[i];
		if (!b->closed)
			rv = wire_fail(err, errsz, "content block %zu never stopped", i);
		else if (b->kind == ANTH_TOOL)
			rv = wire_append(out->content, json_incref(b->tool), err, errsz);
		else if (b->kind == ANTH_TEXT && b->buf.len > 0)
			rv = wire_append(out->content, wire_text_block(b->buf.p, b->buf.len), err,
			                 errsz);
	}
	return rv;
}

/* ---- OpenAI stream -------------------------------------------------------- */

/* Keep a tool call's id or name v from whichever chunk carries it; a repeat
 * must agree.  "" is taken as absent (some servers send it on later chunks). */
static int
oai_set_once(json_t **slot, json_t *v, const char *what, char *err, size_t errsz)
{
	if (v == NULL || json_is_null(v) || (json_is_string(v) && json_string_length(v) == 0))
		return 0;
	if (!json_is_string(v))
		return wire_fail(err, errsz, "a tool call's %s is not a string", what);
	if (*slot == NULL)
		*slot = json_incref(v);
	else if (!json_equal(*slot, v))
		return wire_fail(err, errsz, "a tool call's %s changed mid-stream", what);
	return 0;
}

static int
oai_call_new(struct wire_stream *s, char *err, size_t errsz)
{
	void *p;

	if (s->ncalls >= WIRE_BLOCKS_MAX)
		return wire_fail(err, errsz, "more than %d tool calls", WIRE_BLOCKS_MAX);
	if ((p = wire_grow(s->calls, s->ncalls, &s->capcalls, sizeof(*s->calls))) == NULL)
		return wire_fail(err, errsz, "out of memory");
	s->calls = p;
	s->ncalls++;
	return 0;
}

/* One tool_calls entry of a delta: its index continues a call, or is the
 * next one and starts it. */
static int
oai_call_delta(struct wire_stream *s, const json_t *tc, char *err, size_t errsz)
{
	json_t *idx = json_object_get(tc, "index"), *type = json_object_get(tc, "type");
	json_t *f = json_object_get(tc, "function"), *args = json_object_get(f, "arguments");
	struct oai_call *c;
	json_int_t i;

	if (!json_is_integer(idx) || (i = json_integer_value(idx)) < 0 || (uint64_t)i > s->ncalls)
		return wire_fail(err, errsz, "a tool call's index is not 0-%zu", s->ncalls);
	if (type != NULL && !json_is_null(type) && !wire_str_is(type, "function"))
		return wire_fail(err, errsz, "tool call %lld is not a function call", (long long)i);
	if (f != NULL && !json_is_null(f) && !json_is_object(f))
		return wire_fail(err, errsz, "tool call %lld: function is not an object",
		                 (long long)i);
	if (args != NULL && !json_is_null(args) && !json_is_string(args))
		return wire_fail(err, errsz, "tool call %lld: arguments is not a string",
		                 (long long)i);
	if ((uint64_t)i == s->ncalls && oai_call_new(s, err, errsz) == -1)
		return -1;
	c = &s->calls[i];
	if (oai_set_once(&c->id, json_object_get(tc, "id"), "id", err, errsz) == -1 ||
	    oai_set_once(&c->name, json_object_get(f, "name"), "name", err, errsz) == -1)
		return -1;
	if (wire_buf_add(&c->args, json_string_value(args), json_string_length(args)) == -1)
		return wire_fail(err, errsz, "out of memory");
	return 0;
}

static int
oai_choice(struct wire_stream *s, const json_t *c, char *err, size_t errsz)
{
	json_t *d = json_object_get(c, "delta"), *r = json_object_get(c, "finish_reason");
	json_t *text = json_object_get(d, "content"), *calls = json_object_get(d, "tool_calls"),
	       *tc;
	size_t i;

	if (!json_is_object(c) || (d != NULL && !json_is_null(d) && !json_is_object(d)))
		return wire_fail(err, errsz, "choices[0] or its delta is not an object");
	if (r != NULL && !json_is_null(r))
		s->stop = wire_stop_of(WIRE_OPENAI, r);
	if (text != NULL && !json_is_null(text) && !json_is_string(text))
		return wire_fail(err, errsz, "delta.content is not a string");
	if (wire_buf_add(&s->text, json_string_value(text), json_string_length(text)) == -1)
		return wire_fail(err, errsz, "out of memory");
	if (calls != NULL && !json_is_null(calls) && !json_is_array(calls))
		return wire_fail(err, errsz, "delta.tool_calls is not an array");
	json_array_foreach(calls, i, tc)
	{
		if (oai_call_delta(s, tc, err, errsz) == -1)
			return -1;
	}
	return 0;
}

/* Only choices[0]: we never ask for more than one. */
static int
oai_chunk(struct wire_stream *s, const json_t *ev, char *err, size_t errsz)
{
	json_t *e = json_object_get(ev, "error"), *u = json_object_get(ev, "usage");
	json_t *choices = json_object_get(ev, "choices");

	if (e != NULL && !json_is_null(e))
		return wire_error_event(ev, err, errsz);
	if (u != NULL && !json_is_null(u)) {
		if (!json_is_object(u))
			return wire_fail(err, errsz, "usage is not an object");
		if (oai_usage(u, &s->usage, err, errsz) == -1)
			return -1;
		s->has_usage = 1;
	}
	if (choices != NULL && !json_is_null(choices) && !json_is_array(choices))
		return wire_fail(err, errsz, "choices is not an array");
	if (json_array_size(choices) == 0)
		return 0;
	return oai_choice(s, json_array_get(choices, 0), err, errsz);
}

static int
oai_event(struct wire_stream *s, const char *data, size_t len, char *err, size_t errsz)
{
	json_t *ev;
	int rv;

	if (len == 6 && memcmp(data, "[DONE]", 6) == 0) {
		s->done = 1;
		return 0;
	}
	if ((ev = wire_load("a chunk", data, len, err, errsz)) == NULL)
		return -1;
	rv = oai_chunk(s, ev, err, errsz);
	json_decref(ev);
	return rv;
}

/* Without usage we could not account for the call: a stream that lacks it
 * is as bad as a cut one. */
static int
oai_finish(struct wire_stream *s, struct wire_resp *out, char *err, size_t errsz)
{
	struct oai_call *c;
	json_t *input;
	size_t i;

	if (!s->done)
		return wire_fail(err, errsz, "the stream ended before data: [DONE]");
	if (!s->has_usage)
		return wire_fail(err, errsz, "the stream carried no usage");
	if (s->text.len > 0 &&
	    wire_append(out->content, wire_text_block(s->text.p, s->text.len), err, errsz) == -1)
		return -1;
	for (i = 0; i < s->ncalls; i++) {
		c = &s->calls[i];
		if (wire_use_ok(c->id, c->name, "tool_calls", i, err, errsz) == -1)
			return -1;
		if ((input = oai_args(c->args.p, c->args.len)) == NULL)
			return wire_fail(err, errsz, "out of memory");
		if (wire_append(out->content, wire_tool_block(c->id, c->name, input), err, errsz) ==
		    -1)
			return -1;
	}
	return 0;
}

/* ---- the event stream ----------------------------------------------------- */

/* A blank line ends an event: hand it on if it had data (one without is
 * not dispatched, as the event-stream format says), then start afresh. */
static int
sse_dispatch(struct wire_stream *s, char *err, size_t errsz)
{
	int rv = 0;

	if (s->has_data && s->done)
		rv = wire_fail(err, errsz, "an event after the end of the stream");
	else if (s->has_data && s->kind == WIRE_OPENAI)
		rv = oai_event(s, s->data.p, s->data.len, err, errsz);
	else if (s->has_data)
		rv = anth_event(s, s->data.p, s->data.len, err, errsz);
	s->event[0] = '\0';
	s->data.len = 0;
	s->has_data = 0;
	return rv;
}

/* Keep an event: name; one too long for any we know is kept as "?". */
static void
sse_event_name(struct wire_stream *s, const char *v, size_t vlen)
{
	if (vlen >= sizeof(s->event)) {
		v = "?";
		vlen = 1;
	}
	memcpy(s->event, v, vlen);
	s->event[vlen] = '\0';
}

/* One whole line (in s->line): "field: value" or "field:value", a comment
 * (":..."), or blank.  Fields other than data and event (id, retry) mean
 * nothing to us and are ignored, as the format asks. */
static int
sse_line(struct wire_stream *s, char *err, size_t errsz)
{
	const char *line = s->line.p, *v;
	size_t len = s->line.len, flen, vlen;

	s->line.len = 0;
	if (len == 0)
		return sse_dispatch(s, err, errsz);
	if (line[0] == ':')
		return 0;
	v = memchr(line, ':', len);
	flen = v != NULL ? (size_t)(v - line) : len;
	v = v != NULL ? v + 1 : line + len;
	if (v < line + len && *v == ' ')
		v++;
	vlen = (size_t)(line + len - v);
	if (flen == 5 && memcmp(line, "event", 5) == 0)
		sse_event_name(s, v, vlen);
	if (flen != 4 || memcmp(line, "data", 4) != 0)
		return 0;
	if ((s->has_data && wire_buf_add(&s->data, "\n", 1) == -1) ||
	    wire_buf_add(&s->data, v, vlen) == -1)
		return wire_fail(err, errsz, "out of memory");
	s->has_data = 1;
	return 0;
}

/* Split p into lines ended by \n, \r\n or \r (all three are line ends in
 * an event stream) and handle each whole line; keep the unfinished rest. */
static int
sse_feed(struct wire_stream *s, const char *p, size_t len, char *err, size_t errsz)
{
	size_t n;

	while (len > 0) {
		if (s->skip_lf && *p == '\n') {
			p++;
			len--;
		}
		s->skip_lf = 0;
		for (n = 0; n < len && p[n] != '\n' && p[n] != '\r'; n++)
			;
		if (s->line.len + n > WIRE_LINE_MAX)
			return wire_fail(err, errsz, "an event-stream line is longer than %u bytes",
			                 WIRE_LINE_MAX);
		if (wire_buf_add(&s->line, p, n) == -1)
			return wire_fail(err, errsz, "out of memory");
		if (n == len)
			return 0;
		s->skip_lf = p[n] == '\r';
		p += n + 1;
		len -= n + 1;
		if (sse_line(s, err, errsz) == -1)
			return -1;
	}
	return 0;
}

struct wire_stream *
wire_stream_new(enum wire_kind k)
{
	struct wire_stream *s;

	if ((s = calloc(1, sizeof(*s))) == NULL)
		return NULL;
	s->kind = k;
	s->stop = WIRE_STOP_OTHER;
	return s;
}

int
wire_stream_feed(struct wire_stream *s, const char *data, size_t len, char *err, size_t errsz)
{
	if (s->dead)
		return wire_fail(err, errsz, "the stream already failed or finished");
	if (!wire_kind_ok(s->kind)) {
		s->dead = 1;
		return wire_fail(err, errsz, "unknown provider kind %d", (int)s->kind);
	}
	if (len > WIRE_BODY_MAX - s->total) {
		s->dead = 1;
		return wire_fail(err, errsz, "the stream is larger than %u bytes", WIRE_BODY_MAX);
	}
	s->total += len;
	if (len > 0 && memchr(data, '\0', len) != NULL) {
		s->dead = 1;
		return wire_fail(err, errsz, "the stream has a NUL byte");
	}
	if (sse_feed(s, data, len, err, errsz) == -1) {
		s->dead = 1;
		return -1;
	}
	return 0;
}

/* A last line cut short is refused; a whole last line lacking only its
 * blank line is taken, since some servers end the body without one. */
int
wire_stream_finish(struct wire_stream *s, struct wire_resp *out, char *err, size_t errsz)
{
	int rv;

	memset(out, 0, sizeof(*out));
	if (s->dead)
		return wire_fail(err, errsz, "the stream already failed or finished");
	s->dead = 1;
	if (!wire_kind_ok(s->kind))
		return wire_fail(err, errsz, "unknown provider kind %d", (int)s->kind);
	/* a line without its end is a stream cut short, even after the end */
	if (s->line.len > 0)
		return wire_fail(err, errsz, "the stream ends inside a line");
	if (sse_dispatch(s, err, errsz) == -1)
		return -1;
	if ((out->content = json_array()) == NULL)
		return wire_fail(err, errsz, "out of memory");
	if (s->kind == WIRE_OPENAI)
		rv = oai_finish(s, out, err, errsz);
	else
		rv = anth_finish(s, out, err, errsz);
	if (rv == -1) {
		wire_resp_free(out);
		return -1;
	}
	out->stop = s->stop;
	out->usage = s->usage;
	return 0;
}

void
wire_stream_free(struct wire_stream *s)
{
	size_t i;

	if (s == NULL)
		return;
	for (i = 0; i < s->nblocks; i++) {
		free(s->blocks[i].buf.p);
		json_decref(s->blocks[i].tool);
	}
	for (i = 0; i < s->ncalls; i++) {
		json_decref(s->calls[i].id);
		json_decref(s->calls[i].name);
		free(s->calls[i].args.p);
	}
	free(s->blocks);
	free(s->calls);
	free(s->line.p);
	free(s->data.p);
	free(s->text.p);
	free(s);
}

/* ---- error bodies --------------------------------------------------------- */

void
wire_error_text(const char *body, size_t len, char *out, size_t outsz)
{
	json_t *root;

	if (outsz == 0)
		return;
	out[0] = '\0';
	if (body == NULL || len > WIRE_BODY_MAX || memchr(body, '\0', len) != NULL)
		return;
	root = json_loadb(body, len, WIRE_JSON_FLAGS, NULL);
	if (json_is_object(root))
		wire_error_of(json_object_get(root, "error"), out, outsz);
	json_decref(root);
}

/* ---- cost ----------------------------------------------------------------- */

/* The sum, in micro-dollars times a million, at which the cost reaches
 * UINT64_MAX micro-dollars: where we stop adding. */
#define WIRE_COST_CAP ((unsigned __int128)UINT64_MAX * 1000000u)

/* Add tokens * price to *sum, saturating at WIRE_COST_CAP: the product of
 * two 64-bit numbers fits in 128 bits, but a sum of two such may not. */
static void
wire_cost_add(unsigned __int128 *sum, uint64_t tokens, uint64_t price)
{
	unsigned __int128 x = (unsigned __int128)tokens * price;

	*sum = x > WIRE_COST_CAP - *sum ? WIRE_COST_CAP : *sum + x;
}

/* sum / 1e6 rounded up: a partial micro-dollar is charged whole, so that
 * many small calls cannot slip under a budget.  At most UINT64_MAX. */
static uint64_t
wire_cost_round(unsigned __int128 sum)
{
	return (uint64_t)((sum + 999999u) / 1000000u);
}

uint64_t
wire_cost(const struct wire_price *p, const struct wire_usage *u)
{
	unsigned __int128 sum = 0;

	wire_cost_add(&sum, u->input, p->input);
	wire_cost_add(&sum, u->output, p->output);
	wire_cost_add(&sum, u->cache_read, p->cache_read);
	wire_cost_add(&sum, u->cache_write, p->cache_write);
	return wire_cost_round(sum);
}

/* A token is never shorter than a byte, so body_len bounds the input tokens
 * whatever the tokenizer; whether the provider bills them as plain input or
 * as a cache write is its choice, so take the dearer. */
uint64_t
wire_worst_cost(const struct wire_price *p, size_t body_len, uint64_t max_tokens)
{
	unsigned __int128 sum = 0;

	wire_cost_add(&sum, body_len, p->input > p->cache_write ? p->input : p->cache_write);
	wire_cost_add(&sum, max_tokens, p->output);
	return wire_cost_round(sum);
}
