/* FUZZ_SOURCES: runner/mcp_msg.c runner/mcp_tools.c */
/*
 * libFuzzer target for what the MCP client reads from a server
 * (runner/mcp_msg.c, runner/mcp_tools.c).  Input: one byte n, then bytes
 * fed to a line reader with a cap of 64 + n * 16 bytes in pieces whose
 * sizes come from the data, as reads would bring them.
 *
 * The contract:
 *  - the reader's buffer never holds more than cap + 1 bytes; every line it
 *    gives is at most cap bytes, holds no '\n', and the bytes it gives plus
 *    the newlines (and '\r's dropped) are the input's prefix in order;
 *    a line over the cap is reported (-1) and nothing more is read;
 *  - each line either decodes to a message of exactly one kind whose fields
 *    have the types mcp.h promises, or is refused with a non-empty reason;
 *  - a decoded result, read as a tool result and as a tools/list page, gives
 *    a NUL-terminated text of the length it says (cut to the maximum plus
 *    the marker) and definitions whose names are at most 64 characters of
 *    [A-Za-z0-9_-], or a reason.
 * Seeds: tests/fuzz/corpus/mcp_msg/.
 */
#include <sodium.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runner/mcp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_name(const char *s)
{
	size_t i, n = strlen(s);

	if (n == 0 || n > MCP_NAME_MAX)
		abort();
	for (i = 0; i < n; i++) {
		char ch = s[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		        (ch >= '0' && ch <= '9') || ch == '_' || ch == '-'))
			abort();
	}
}

static void
check_result(const json_t *result)
{
	struct mcp_result *r;
	struct mcp_tools t;
	const char *next;
	char err[256];
	size_t i;

	err[0] = '\0';
	if ((r = mcp_result_from(result, 200, err, sizeof(err))) == NULL) {
		if (err[0] == '\0')
			abort();
	} else {
		if (r->text == NULL || strlen(r->text) != r->text_len)
			abort();
		if (r->text_len > 200 + 80 || (r->cut && r->text_len <= 200 - 4))
			abort();
		if (json_array_size(r->content) != 1 + r->images || r->images > MCP_IMAGES_MAX ||
		    r->image_bytes > MCP_IMAGES_BYTES)
			abort();
		mcp_result_free(r);
	}
	memset(&t, 0, sizeof(t));
	err[0] = '\0';
	if (mcp_tools_page(&t, "fuzz", result, 4, 2048, &next, err, sizeof(err)) == -1) {
		if (err[0] == '\0')
			abort();
	}
	if (t.n > 4 || t.bytes > 2048 || t.n + t.dropped != t.listed)
		abort();
	for (i = 0; i < t.n; i++)
		check_name(t.v[i].model_name);
	for (i = 0; i < t.n; i++) {
		free(t.v[i].name);
		free(t.v[i].model_name);
		json_decref(t.v[i].def);
	}
	free(t.v);
	json_decref(t.drops);
}

static void
check_line(const char *line, size_t len)
{
	struct mcp_msg m;
	char err[256];

	err[0] = '\0';
	if (mcp_msg_parse(line, len, &m, err, sizeof(err)) == -1) {
		if (err[0] == '\0' || m.j != NULL)
			abort();
		return;
	}
	switch (m.kind) {
	case MCP_MSG_REQUEST:
		if (m.method == NULL || m.method[0] == '\0' ||
		    !(json_is_string(m.id) || json_is_integer(m.id)))
			abort();
		break;
	case MCP_MSG_NOTIFICATION:
		if (m.method == NULL || m.id != NULL)
			abort();
		break;
	case MCP_MSG_RESULT:
		if (!json_is_object(m.result) || !(json_is_string(m.id) || json_is_integer(m.id)))
			abort();
		check_result(m.result);
		break;
	case MCP_MSG_ERROR:
		if (m.message == NULL || m.method != NULL)
			abort();
		break;
	default:
		abort();
	}
	if (m.params != NULL && !json_is_object(m.params))
		abort();
	mcp_msg_clear(&m);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int inited;
	struct mcp_rd r;
	size_t cap, off = 1, piece, took, seen = 0, len;
	const char *line;
	int k;

	if (!inited) {
		if (sodium_init() == -1)
			abort();
		inited = 1;
	}
	if (size < 1)
		return 0;
	cap = 64 + (size_t)data[0] * 16;
	mcp_rd_init(&r, cap);
	while (off < size) {
		piece = 1 + data[off] % 97;
		if (piece > size - off)
			piece = size - off;
		took = mcp_rd_feed(&r, data + off, piece);
		if (r.cap > cap + 1)
			abort();
		off += took;
		while ((k = mcp_rd_line(&r, &line, &len)) == 1) {
			if (len > cap || memchr(line, '\n', len) != NULL)
				abort();
			/* the line is the input at the place the last one ended */
			if (memcmp(line, data + 1 + seen, len) != 0)
				abort();
			seen += len + 1;
			if (data[1 + seen - 1] != '\n') {
				/* a '\r' was dropped before the newline */
				if (data[1 + seen - 1] != '\r' || data[1 + seen] != '\n')
					abort();
				seen++;
			}
			check_line(line, len);
		}
		if (k == -1)
			break;
		/* no room is only ever for a line over the cap */
		if (took == 0)
			abort();
	}
	mcp_rd_free(&r);
	return 0;
}
