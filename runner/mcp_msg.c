/*
 * mcp_msg: the MCP stdio framing and the JSON-RPC 2.0 envelope, as pure
 * functions over bytes (the fuzz target is tests/fuzz/fuzz_mcp_msg.c).
 *
 * A line is at most max bytes: the reader's buffer never holds more than
 * max + 1, so a server writing an endless line costs that much and no
 * more.  A message is one JSON object with jsonrpc "2.0" of one of the four
 * shapes; anything else (a batch, a bare value, a result that is no object)
 * is refused with the reason.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "runner/mcp.h"

#define RD_CHUNK (64u * 1024) /* the least room a read is offered */

void
mcp_rd_init(struct mcp_rd *r, size_t max)
{
	memset(r, 0, sizeof(*r));
	r->max = max;
}

void
mcp_rd_free(struct mcp_rd *r)
{
	free(r->buf);
	memset(r, 0, sizeof(*r));
}

size_t
mcp_rd_pending(const struct mcp_rd *r)
{
	return r->len - r->off;
}

/* Moves what is left to the front, then grows the buffer (doubling, never
 * past max + 1 bytes) until RD_CHUNK bytes are free or the cap is hit. */
size_t
mcp_rd_space(struct mcp_rd *r, char **p)
{
	size_t limit = r->max + 1, want;
	char *nb;

	if (r->off > 0) {
		memmove(r->buf, r->buf + r->off, r->len - r->off);
		r->len -= r->off;
		r->scan -= r->off;
		r->off = 0;
	}
	if (r->len >= limit) {
		*p = NULL;
		return 0;
	}
	if (r->cap - r->len < RD_CHUNK && r->cap < limit) {
		want = r->cap == 0 ? RD_CHUNK : r->cap * 2;
		while (want - r->len < RD_CHUNK && want < limit)
			want *= 2;
		if (want > limit)
			want = limit;
		if ((nb = realloc(r->buf, want)) == NULL)
			fatal("mcp line buffer");
		r->buf = nb;
		r->cap = want;
	}
	*p = r->buf + r->len;
	want = r->cap - r->len;
	return want < limit - r->len ? want : limit - r->len;
}

void
mcp_rd_filled(struct mcp_rd *r, size_t n)
{
	r->len += n;
}

size_t
mcp_rd_feed(struct mcp_rd *r, const void *p, size_t n)
{
	size_t done = 0, room;
	char *dst;

	while (done < n) {
		if ((room = mcp_rd_space(r, &dst)) == 0)
			break;
		if (room > n - done)
			room = n - done;
		memcpy(dst, (const char *)p + done, room);
		mcp_rd_filled(r, room);
		done += room;
	}
	return done;
}

int
mcp_rd_line(struct mcp_rd *r, const char **line, size_t *len)
{
	char *nl;
	size_t n;

	nl = r->scan < r->len ? memchr(r->buf + r->scan, '\n', r->len - r->scan) : NULL;
	if (nl == NULL) {
		r->scan = r->len;
		return r->len - r->off > r->max ? -1 : 0;
	}
	n = (size_t)(nl - (r->buf + r->off));
	if (n > r->max)
		return -1;
	*line = r->buf + r->off;
	r->off += n + 1;
	r->scan = r->off;
	if (n > 0 && (*line)[n - 1] == '\r')
		n--;
	*len = n;
	return 1;
}

/* ---- the envelope --------------------------------------------------------- */

static int
msg_fail(struct mcp_msg *m, char *err, size_t errsz, const char *why)
{
	snprintf(err, errsz, "%s", why);
	json_decref(m->j);
	memset(m, 0, sizeof(*m));
	return -1;
}

static int
id_ok(const json_t *id)
{
	return json_is_string(id) || json_is_integer(id);
}

int
mcp_msg_parse(const char *line, size_t len, struct mcp_msg *m, char *err, size_t errsz)
{
	json_error_t je;
	json_t *v, *id, *method, *params, *result, *error, *code, *message;

	memset(m, 0, sizeof(*m));
	/* no JSON_DECODE_ANY: a bare value is no message; a batch is seen below */
	if ((m->j = json_loadb(line, len, JSON_REJECT_DUPLICATES, &je)) == NULL) {
		snprintf(err, errsz, "not JSON (%s at byte %d)", je.text, je.position);
		return -1;
	}
	if (json_is_array(m->j))
		return msg_fail(m, err, errsz, "a JSON-RPC batch, which MCP does not allow");
	v = json_object_get(m->j, "jsonrpc");
	if (!json_is_string(v) || strcmp(json_string_value(v), "2.0") != 0)
		return msg_fail(m, err, errsz, "not JSON-RPC 2.0 (jsonrpc is not \"2.0\")");
	id = json_object_get(m->j, "id");
	method = json_object_get(m->j, "method");
	params = json_object_get(m->j, "params");
	result = json_object_get(m->j, "result");
	error = json_object_get(m->j, "error");
	if (method != NULL) {
		if (!json_is_string(method) || json_string_length(method) == 0)
			return msg_fail(m, err, errsz, "method is not a non-empty string");
		if (result != NULL || error != NULL)
			return msg_fail(m, err, errsz, "a message with both method and result or error");
		if (params != NULL && !json_is_object(params))
			return msg_fail(m, err, errsz, "params is not an object");
		if (id != NULL && !id_ok(id))
			return msg_fail(m, err, errsz, "a request id that is not a string or an integer");
		m->kind = id != NULL ? MCP_MSG_REQUEST : MCP_MSG_NOTIFICATION;
		m->id = id;
		m->method = json_string_value(method);
		m->params = params;
		return 0;
	}
	if (result != NULL && error != NULL)
		return msg_fail(m, err, errsz, "an answer with both result and error");
	if (result != NULL) {
		if (!id_ok(id))
			return msg_fail(m, err, errsz, "a result whose id is not a string or an integer");
		if (!json_is_object(result))
			return msg_fail(m, err, errsz, "a result that is not an object");
		m->kind = MCP_MSG_RESULT;
		m->id = id;
		m->result = result;
		return 0;
	}
	if (error != NULL) {
		if (id != NULL && !json_is_null(id) && !id_ok(id))
			return msg_fail(m, err, errsz, "an error whose id is not a string or an integer");
		code = json_object_get(error, "code");
		message = json_object_get(error, "message");
		if (!json_is_object(error) || !json_is_integer(code) || !json_is_string(message))
			return msg_fail(m, err, errsz,
			    "an error that is not {code: integer, message: string}");
		m->kind = MCP_MSG_ERROR;
		m->id = json_is_null(id) ? NULL : id;
		m->code = json_integer_value(code);
		m->message = json_string_value(message);
		m->data = json_object_get(error, "data");
		return 0;
	}
	return msg_fail(m, err, errsz, "a JSON-RPC message with neither method, result nor error");
}

void
mcp_msg_clear(struct mcp_msg *m)
{
	json_decref(m->j);
	memset(m, 0, sizeof(*m));
}
