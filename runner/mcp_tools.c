/*
 * mcp_tools: what the model is offered and what it gets back, as pure
 * functions: the model-facing tool names, the folding of tools/list pages
 * under the caps, and a CallToolResult turned into text and image blocks.
 */
#include <sodium.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "runner/mcp.h"

#define TOOL_NAME_RAW_MAX 256 /* bytes of a server's tool name we take at all */
#define DROPS_MAX 64          /* dropped tools named in a listing */
#define HASH_HEX 12           /* hex digits of the name's hash suffix */

/* ---- names ---------------------------------------------------------------- */

static int
name_char(unsigned char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	    ch == '_' || ch == '-';
}

/* s with characters outside the set as '_', at most cap bytes of it kept
 * in out (NUL-terminated); returns its whole length, *changed set when a
 * character was replaced. */
static size_t
name_clean(const char *s, char *out, size_t cap, int *changed)
{
	size_t n;

	for (n = 0; s[n] != '\0'; n++) {
		unsigned char ch = (unsigned char)s[n];

		if (!name_char(ch))
			*changed = 1;
		if (n < cap)
			out[n] = name_char(ch) ? (char)ch : '_';
	}
	out[n < cap ? n : cap] = '\0';
	return n;
}

/*
 * Over the limit, the name keeps its shape, mcp__S__T_HASH: of the 44
 * bytes left for S and T, T keeps as much as it can and S no less than 8
 * (or all it has), so that a model still reads which tool it is.
 */
void
mcp_tool_name(const char *server, const char *tool, char out[MCP_NAME_MAX + 1])
{
	enum { ROOM = MCP_NAME_MAX - 7 - 1 - HASH_HEX, SERVER_MIN = 8 };
	char s[MCP_NAME_MAX + 1], t[MCP_NAME_MAX + 1];
	unsigned char h[crypto_generichash_BYTES_MIN];
	char hex[2 * sizeof(h) + 1];
	crypto_generichash_state st;
	size_t sl, tl, sk, tk;
	int changed = 0;

	sl = name_clean(server, s, MCP_NAME_MAX, &changed);
	tl = name_clean(tool, t, MCP_NAME_MAX, &changed);
	if (!changed && 7 + sl + tl <= MCP_NAME_MAX) {
		/* it fits: 7 + sl + tl <= MCP_NAME_MAX */
		memcpy(out, "mcp__", 5);
		memcpy(out + 5, s, sl);
		memcpy(out + 5 + sl, "__", 2);
		memcpy(out + 7 + sl, t, tl + 1);
		return;
	}
	/* the hash covers both names as given, with a separator no name holds */
	crypto_generichash_init(&st, NULL, 0, sizeof(h));
	crypto_generichash_update(&st, (const unsigned char *)server, strlen(server));
	crypto_generichash_update(&st, (const unsigned char *)"", 1);
	crypto_generichash_update(&st, (const unsigned char *)tool, strlen(tool));
	crypto_generichash_final(&st, h, sizeof(h));
	sodium_bin2hex(hex, sizeof(hex), h, sizeof(h));
	sk = sl;
	tk = tl;
	if (sk + tk > ROOM) {
		sk = sl < SERVER_MIN ? sl : (tl >= ROOM - SERVER_MIN ? SERVER_MIN : ROOM - tl);
		if (sk > sl)
			sk = sl;
		tk = ROOM - sk < tl ? ROOM - sk : tl;
	}
	snprintf(out, MCP_NAME_MAX + 1, "mcp__%.*s__%.*s_%.*s", (int)sk, s, (int)tk, t, HASH_HEX,
	    hex);
}

/* ---- listings ------------------------------------------------------------- */

void
mcp_tools_free(struct mcp_tools *t)
{
	size_t i;

	if (t == NULL)
		return;
	for (i = 0; i < t->n; i++) {
		free(t->v[i].name);
		free(t->v[i].model_name);
		json_decref(t->v[i].def);
	}
	free(t->v);
	json_decref(t->drops);
	free(t);
}

static void
tools_drop(struct mcp_tools *t, const char *name, const char *reason)
{
	t->dropped++;
	if (t->drops == NULL && (t->drops = json_array()) == NULL)
		fatalx("out of memory");
	if (json_array_size(t->drops) < DROPS_MAX)
		json_array_append_new(t->drops, json_pack("{s:s?, s:s}", "name", name, "reason",
		    reason));
}

/* Whether name is one we take: 1..TOOL_NAME_RAW_MAX bytes, no control
 * character (the name goes into logs and events). */
static int
tool_name_ok(const char *name)
{
	size_t i, n = strlen(name);

	if (n == 0 || n > TOOL_NAME_RAW_MAX)
		return 0;
	for (i = 0; i < n; i++)
		if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f)
			return 0;
	return 1;
}

static int
tools_has_model_name(const struct mcp_tools *t, const char *model_name)
{
	size_t i;

	for (i = 0; i < t->n; i++)
		if (strcmp(t->v[i].model_name, model_name) == 0)
			return 1;
	return 0;
}

/* One listed tool: kept in t, or dropped with the reason. */
static void
tools_take(struct mcp_tools *t, const char *server, const json_t *tool, size_t tools_max,
    size_t bytes_max)
{
	const char *name = json_string_value(json_object_get(tool, "name"));
	json_t *schema = json_object_get(tool, "inputSchema"), *desc, *def;
	char model_name[MCP_NAME_MAX + 1];
	struct mcp_tool *nv;
	size_t bytes;
	char *s;

	t->listed++;
	if (!json_is_object(tool))
		return tools_drop(t, NULL, "not an object");
	if (name == NULL || !tool_name_ok(name))
		return tools_drop(t, NULL, "no name of 1 to 256 printable characters");
	if (!json_is_object(schema))
		return tools_drop(t, name, "inputSchema is not an object");
	desc = json_object_get(tool, "description");
	if (!json_is_string(desc))
		desc = json_object_get(tool, "title");
	mcp_tool_name(server, name, model_name);
	if (tools_has_model_name(t, model_name))
		return tools_drop(t, name, "another tool has the same name");
	if (t->n >= tools_max)
		return tools_drop(t, name, "over the cap on tools");
	def = json_pack("{s:s, s:s, s:O}", "name", model_name, "description",
	    json_is_string(desc) ? json_string_value(desc) : "", "input_schema", schema);
	if (def == NULL || (s = json_dumps(def, JSON_COMPACT)) == NULL)
		fatalx("out of memory");
	bytes = strlen(s);
	free(s);
	if (bytes > bytes_max - t->bytes || t->bytes > bytes_max) {
		json_decref(def);
		return tools_drop(t, name, "over the cap on bytes of tool definitions");
	}
	if ((nv = reallocarray(t->v, t->n + 1, sizeof(*nv))) == NULL)
		fatal("tools");
	t->v = nv;
	nv[t->n].name = strdup(name);
	nv[t->n].model_name = strdup(model_name);
	nv[t->n].def = def;
	nv[t->n].def_bytes = bytes;
	if (nv[t->n].name == NULL || nv[t->n].model_name == NULL)
		fatal("tools");
	t->n++;
	t->bytes += bytes;
}

int
mcp_tools_page(struct mcp_tools *t, const char *server, const json_t *result, size_t tools_max,
    size_t bytes_max, const char **next, char *err, size_t errsz)
{
	const json_t *tools = json_object_get(result, "tools"),
	    *cursor = json_object_get(result, "nextCursor"), *tool;
	size_t i;

	*next = NULL;
	if (!json_is_array(tools)) {
		snprintf(err, errsz, "tools/list: the result's tools is not an array");
		return -1;
	}
	if (cursor != NULL && !json_is_null(cursor) && !json_is_string(cursor)) {
		snprintf(err, errsz, "tools/list: nextCursor is not a string");
		return -1;
	}
	json_array_foreach(tools, i, tool)
		tools_take(t, server, tool, tools_max, bytes_max);
	t->pages++;
	*next = json_string_value(cursor);
	return 0;
}

/* ---- results -------------------------------------------------------------- */

void
mcp_result_free(struct mcp_result *r)
{
	if (r == NULL)
		return;
	free(r->text);
	json_decref(r->content);
	free(r);
}

/* A growing text. */
struct txt {
	char *p;
	size_t len, cap;
};

static void
txt_raw(struct txt *t, const char *s, size_t n)
{
	char *np;
	size_t want;

	if (n > SIZE_MAX / 4 - t->len)
		fatalx("result text too large");
	if (t->len + n + 1 > t->cap) {
		want = t->cap == 0 ? 256 : t->cap;
		while (want < t->len + n + 1)
			want *= 2;
		if ((np = realloc(t->p, want)) == NULL)
			fatal("result text");
		t->p = np;
		t->cap = want;
	}
	memcpy(t->p + t->len, s, n);
	t->len += n;
	t->p[t->len] = '\0';
}

/* One part of the text: parts are joined by newlines. */
static void
txt_part(struct txt *t, const char *s, size_t n)
{
	if (t->len > 0)
		txt_raw(t, "\n", 1);
	txt_raw(t, s, n);
}

static void txt_line(struct txt *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void
txt_line(struct txt *t, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0)
		fatalx("result text");
	txt_part(t, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

/* A server's string for a one-line description: at most 200 bytes (cut at
 * a UTF-8 boundary), control characters as spaces; "?" for none. */
static const char *
one_line(const json_t *v, char buf[256])
{
	const char *s = json_string_value(v);
	size_t i, n;

	if (s == NULL)
		return "?";
	n = strlen(s);
	if (n > 200) {
		n = 200;
		while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
			n--;
	}
	for (i = 0; i < n; i++)
		buf[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? ' ' : s[i];
	buf[n] = '\0';
	return buf;
}

static const char *const image_types[] = {"image/png", "image/jpeg", "image/gif", "image/webp",
    NULL};

/* Why the image block b cannot be shown to a model beside the images r
 * keeps already, or NULL when it can; *bytes its decoded size (0 when the
 * data is no base64). */
static const char *
image_check(const json_t *b, const struct mcp_result *r, size_t *bytes)
{
	const char *data = json_string_value(json_object_get(b, "data")),
	    *mime = json_string_value(json_object_get(b, "mimeType"));
	size_t i, n, cap;
	unsigned char *bin;
	int ok;

	*bytes = 0;
	if (data == NULL || mime == NULL)
		return "no data or mimeType";
	n = strlen(data);
	if (n > MCP_IMAGE_MAX)
		return "too large";
	cap = n / 4 * 3 + 3;
	if ((bin = malloc(cap)) == NULL)
		fatal("image");
	ok = sodium_base642bin(bin, cap, data, n, NULL, bytes, NULL,
	    sodium_base64_VARIANT_ORIGINAL) == 0;
	free(bin);
	if (!ok || *bytes == 0) {
		*bytes = 0;
		return "the data is not base64";
	}
	for (i = 0; image_types[i] != NULL; i++)
		if (strcmp(mime, image_types[i]) == 0)
			break;
	if (image_types[i] == NULL)
		return "a type models do not take";
	if (r->images >= MCP_IMAGES_MAX)
		return "too many images";
	if (n > MCP_IMAGES_BYTES - r->image_bytes)
		return "over the images one result may show";
	return NULL;
}

static void
block_image(struct txt *t, struct mcp_result *r, const json_t *b)
{
	char m[256];
	size_t bytes;
	const char *why = image_check(b, r, &bytes);
	const json_t *mime = json_object_get(b, "mimeType");

	if (why != NULL) {
		txt_line(t, "[image: %s, %zu bytes, not shown: %s]", one_line(mime, m), bytes, why);
		return;
	}
	txt_line(t, "[image: %s, %zu bytes]", json_string_value(mime), bytes);
	json_array_append_new(r->content, json_pack("{s:s, s:{s:s, s:O, s:O}}", "type", "image",
	    "source", "type", "base64", "media_type", mime, "data", json_object_get(b, "data")));
	r->images++;
	r->image_bytes += json_string_length(json_object_get(b, "data"));
}

static void
block_resource(struct txt *t, const json_t *b)
{
	const json_t *r = json_object_get(b, "resource"), *text = json_object_get(r, "text"),
	    *blob = json_object_get(r, "blob");
	char u[256], m[256];

	if (json_is_string(text)) {
		txt_line(t, "[resource %s]", one_line(json_object_get(r, "uri"), u));
		txt_raw(t, "\n", 1);
		txt_raw(t, json_string_value(text), json_string_length(text));
	} else if (json_is_string(blob))
		txt_line(t, "[resource: %s, %s, %zu bytes of base64, not shown]",
		    one_line(json_object_get(r, "uri"), u),
		    one_line(json_object_get(r, "mimeType"), m), json_string_length(blob));
	else
		txt_line(t, "[a resource block without text or blob]");
}

/* One content block: text as it is, an image kept (or described), any
 * other block described in one line. */
static void
block_take(struct txt *t, struct mcp_result *r, const json_t *b)
{
	const char *type = json_string_value(json_object_get(b, "type"));
	const json_t *text = json_object_get(b, "text");
	char a[256], c[256];

	if (type == NULL)
		txt_line(t, "[a content block without a type]");
	else if (strcmp(type, "text") == 0 && json_is_string(text))
		txt_part(t, json_string_value(text), json_string_length(text));
	else if (strcmp(type, "image") == 0)
		block_image(t, r, b);
	else if (strcmp(type, "audio") == 0)
		txt_line(t, "[audio: %s, %zu bytes of base64, not shown]",
		    one_line(json_object_get(b, "mimeType"), a),
		    json_string_length(json_object_get(b, "data")));
	else if (strcmp(type, "resource_link") == 0)
		txt_line(t, "[resource link: %s <%s>]", one_line(json_object_get(b, "name"), a),
		    one_line(json_object_get(b, "uri"), c));
	else if (strcmp(type, "resource") == 0)
		block_resource(t, b);
	else
		txt_line(t, "[a content block of type %s, not shown]",
		    one_line(json_object_get(b, "type"), a));
}

/* r's text from t (taken), cut at max with the marker, and its text block
 * first in r->content. */
static void
result_text(struct mcp_result *r, struct txt *t, size_t max)
{
	size_t len = t->len;
	char *s;

	if (t->len == 0)
		txt_raw(t, "[no content]", 12);
	if (t->len > max) {
		len = max;
		while (len > 0 && ((unsigned char)t->p[len] & 0xc0) == 0x80)
			len--;
		if (asprintf(&s, "%.*s\n[truncated: the first %zu of %zu bytes are shown]",
		        (int)len, t->p, len, t->len) == -1)
			fatalx("out of memory");
		free(t->p);
		t->p = s;
		t->len = strlen(s);
		r->cut = 1;
	}
	r->text = t->p;
	r->text_len = t->len;
	if (json_array_insert_new(r->content, 0, json_pack("{s:s, s:s%}", "type", "text", "text",
	        r->text, r->text_len)) == -1)
		fatalx("out of memory");
}

static struct mcp_result *
result_new(void)
{
	struct mcp_result *r = calloc(1, sizeof(*r));

	if (r == NULL || (r->content = json_array()) == NULL)
		fatal("result");
	return r;
}

struct mcp_result *
mcp_result_error(const char *text, size_t max)
{
	struct mcp_result *r = result_new();
	struct txt t = {0};

	txt_raw(&t, text, strlen(text));
	r->is_error = 1;
	result_text(r, &t, max);
	return r;
}

/* Whether result's resultType lets it be read as complete; err otherwise. */
static int
result_complete(const json_t *result, char *err, size_t errsz)
{
	const json_t *rt = json_object_get(result, "resultType"), *reqs, *req;
	const char *type = json_string_value(rt), *key;

	if (rt == NULL || (type != NULL && strcmp(type, "complete") == 0))
		return 1;
	if (type != NULL && strcmp(type, "input_required") == 0) {
		/* the first thing asked for names the request */
		reqs = json_object_get(result, "inputRequests");
		req = NULL;
		json_object_foreach((json_t *)reqs, key, req)
			break;
		type = json_string_value(json_object_get(req, "method"));
		snprintf(err, errsz, "the server asked for input (%.60s), which this client does not "
		    "give", type != NULL ? type : "no request named");
		return 0;
	}
	snprintf(err, errsz, "an unknown resultType");
	return 0;
}

struct mcp_result *
mcp_result_from(const json_t *result, size_t max, char *err, size_t errsz)
{
	const json_t *content = json_object_get(result, "content"),
	    *is_error = json_object_get(result, "isError"),
	    *structured = json_object_get(result, "structuredContent"), *b;
	struct mcp_result *r;
	struct txt t = {0};
	size_t i;
	char *s;

	if (!result_complete(result, err, errsz))
		return NULL;
	if (!json_is_array(content) && !(content == NULL && structured != NULL)) {
		snprintf(err, errsz, "the result's content is not an array");
		return NULL;
	}
	if (is_error != NULL && !json_is_boolean(is_error)) {
		snprintf(err, errsz, "the result's isError is not a boolean");
		return NULL;
	}
	r = result_new();
	r->is_error = json_is_true(is_error);
	json_array_foreach(content, i, b)
		block_take(&t, r, b);
	if (t.len == 0 && r->images == 0 && structured != NULL) {
		if ((s = json_dumps(structured, JSON_COMPACT | JSON_ENCODE_ANY)) == NULL)
			fatalx("out of memory");
		txt_raw(&t, s, strlen(s));
		free(s);
	}
	result_text(r, &t, max);
	return r;
}
