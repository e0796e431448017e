/*
 * mcphttp_read: what the MCP bridge (proxy/mcphttp.h) reads from a remote
 * server, as pure functions over bytes: the SSE parser, the check of one
 * JSON-RPC message of an answer, redaction and header values.  The fuzz
 * target is tests/fuzz/fuzz_mcphttp.c.
 */
#include <ctype.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "proxy/mcphttp.h"
#include "runner/mcp.h"

/* ---- SSE ------------------------------------------------------------------ */

void
mcphttp_sse_init(struct mcphttp_sse *s, size_t max)
{
	memset(s, 0, sizeof(*s));
	s->max = max;
	s->retry_ms = -1;
}

void
mcphttp_sse_free(struct mcphttp_sse *s)
{
	free(s->line);
	free(s->data);
	free(s->last_id);
	memset(s, 0, sizeof(*s));
}

/* Appends n bytes to *buf (*len, capped at max + 1 so the caller sees it
 * is over); returns -1 past max. */
static int
sse_append(char **buf, size_t *len, const char *p, size_t n, size_t max)
{
	char *nb;

	if (n > max || *len > max - n)
		return -1;
	if ((nb = realloc(*buf, *len + n + 1)) == NULL)
		fatal("sse");
	memcpy(nb + *len, p, n);
	*len += n;
	nb[*len] = '\0';
	*buf = nb;
	return 0;
}

static int
sse_dispatch(struct mcphttp_sse *s, mcphttp_sse_cb cb, void *arg)
{
	int rc = 0;

	if (s->has_data && s->datalen > 0) {
		/* the data's last '\n' is not part of it */
		s->data[--s->datalen] = '\0';
		if (s->datalen > 0)
			rc = cb(arg, s->event[0] != '\0' ? s->event : "message", s->data,
			        s->datalen);
	}
	s->datalen = 0;
	s->has_data = 0;
	s->event[0] = '\0';
	return rc;
}

static void
sse_field_id(struct mcphttp_sse *s, const char *v, size_t n)
{
	if (memchr(v, '\0', n) != NULL)
		return;
	free(s->last_id);
	if ((s->last_id = strndup(v, n)) == NULL)
		fatal("sse");
}

static void
sse_field_retry(struct mcphttp_sse *s, const char *v, size_t n)
{
	long ms = 0;
	size_t i;

	if (n == 0)
		return;
	for (i = 0; i < n; i++) {
		if (v[i] < '0' || v[i] > '9')
			return;
		if (ms < 100000000)
			ms = ms * 10 + (v[i] - '0');
	}
	s->retry_ms = ms;
}

/* One line (without its end). */
static int
sse_line(struct mcphttp_sse *s, const char *l, size_t n, mcphttp_sse_cb cb, void *arg)
{
	const char *colon, *v;
	size_t fl, vl;

	if (n == 0)
		return sse_dispatch(s, cb, arg);
	if (l[0] == ':')
		return 0;
	colon = memchr(l, ':', n);
	fl = colon != NULL ? (size_t)(colon - l) : n;
	v = colon != NULL ? colon + 1 : l + n;
	vl = colon != NULL ? n - fl - 1 : 0;
	if (vl > 0 && v[0] == ' ') {
		v++;
		vl--;
	}
	if (fl == 4 && memcmp(l, "data", 4) == 0) {
		s->has_data = 1;
		if (sse_append(&s->data, &s->datalen, v, vl, s->max) == -1 ||
		    sse_append(&s->data, &s->datalen, "\n", 1, s->max + 1) == -1)
			return -1;
	} else if (fl == 5 && memcmp(l, "event", 5) == 0) {
		if (vl >= sizeof(s->event))
			vl = sizeof(s->event) - 1;
		memcpy(s->event, v, vl);
		s->event[vl] = '\0';
		if (memchr(s->event, '\0', vl) != NULL)
			s->event[0] = '\0';
	} else if (fl == 2 && memcmp(l, "id", 2) == 0) {
		sse_field_id(s, v, vl);
	} else if (fl == 5 && memcmp(l, "retry", 5) == 0) {
		sse_field_retry(s, v, vl);
	}
	return 0;
}

/* Ends the line held: parses it, then empties it. */
static int
sse_end_line(struct mcphttp_sse *s, mcphttp_sse_cb cb, void *arg)
{
	int rc = sse_line(s, s->line != NULL ? s->line : "", s->linelen, cb, arg);

	s->linelen = 0;
	return rc;
}

int
mcphttp_sse_feed(struct mcphttp_sse *s, const char *p, size_t n, mcphttp_sse_cb cb, void *arg)
{
	size_t i = 0, j;

	if (s->failed)
		return -1;
	if (!s->started && n > 0) {
		/* a BOM may come in pieces: wait for three bytes or a mismatch */
		static const char bom[] = "\xef\xbb\xbf";
		size_t have = s->linelen, k;

		for (k = 0; k < n && have + k < 3; k++)
			if (p[k] != bom[have + k])
				break;
		if (have + k < 3 && k == n) {
			if (sse_append(&s->line, &s->linelen, p, n, s->max) == -1)
				goto fail;
			return 0;
		}
		s->started = 1;
		if (have + k == 3) {
			s->linelen = 0;
			i = k;
		}
	}
	while (i < n) {
		if (s->cr && p[i] == '\n') {
			s->cr = 0;
			i++;
			continue;
		}
		s->cr = 0;
		for (j = i; j < n && p[j] != '\n' && p[j] != '\r'; j++)
			;
		if (sse_append(&s->line, &s->linelen, p + i, j - i, s->max) == -1)
			goto fail;
		if (j == n)
			break;
		s->cr = p[j] == '\r';
		if (sse_end_line(s, cb, arg) == -1)
			goto fail;
		i = j + 1;
	}
	return 0;
fail:
	s->failed = 1;
	return -1;
}

/* ---- messages -------------------------------------------------------------- */

void
mcphttp_redact(char *p, size_t len, const struct mcphttp_secret *secrets, size_t nsecrets)
{
	size_t i;

	for (i = 0; i < nsecrets; i++)
		mem_redact(p, len, secrets[i].p, secrets[i].len);
}

char *
mcphttp_message(const char *text, size_t len, size_t max, const struct mcphttp_secret *secrets,
                size_t nsecrets, int *kind, json_t **id, json_t **msg, size_t *outlen, char *err,
                size_t errsz)
{
	struct mcp_msg m;
	char *out;
	size_t n;

	*id = NULL;
	if (msg != NULL)
		*msg = NULL;
	if (len > max) {
		snprintf(err, errsz, "a message of more than %zu bytes", max);
		return NULL;
	}
	if (mcp_msg_parse(text, len, &m, err, errsz) == -1)
		return NULL;
	if ((out = json_dumps(m.j, JSON_COMPACT)) == NULL)
		fatalx("json_dumps");
	n = strlen(out);
	if (n > max) {
		free(out);
		mcp_msg_clear(&m);
		snprintf(err, errsz, "a message of more than %zu bytes", max);
		return NULL;
	}
	mcphttp_redact(out, n, secrets, nsecrets);
	*kind = (int)m.kind;
	if (m.id != NULL)
		*id = json_incref(m.id);
	if (msg != NULL)
		*msg = json_incref(m.j);
	*outlen = n;
	mcp_msg_clear(&m);
	return out;
}

int
mcphttp_ctype(const char *ctype)
{
	size_t n;

	if (ctype == NULL)
		return 0;
	while (*ctype == ' ' || *ctype == '\t')
		ctype++;
	n = strcspn(ctype, "; \t\r\n");
	if (n == 16 && strncasecmp(ctype, "application/json", 16) == 0)
		return 1;
	if (n == 17 && strncasecmp(ctype, "text/event-stream", 17) == 0)
		return 2;
	return 0;
}

char *
mcphttp_header_value(const char *v, size_t len)
{
	size_t i, b64len;
	int plain = len > 0 && v[0] != ' ' && v[len - 1] != ' ';
	char *out;

	for (i = 0; i < len && plain; i++)
		if ((unsigned char)v[i] < 0x20 || (unsigned char)v[i] > 0x7e)
			plain = 0;
	if (plain) {
		if ((out = strndup(v, len)) == NULL)
			fatal("header");
		return out;
	}
	b64len = sodium_base64_ENCODED_LEN(len, sodium_base64_VARIANT_ORIGINAL);
	if ((out = malloc(b64len + 12)) == NULL)
		fatal("header");
	memcpy(out, "=?base64?", 9);
	sodium_bin2base64(out + 9, b64len, (const unsigned char *)v, len,
	                  sodium_base64_VARIANT_ORIGINAL);
	strcat(out, "?=");
	return out;
}
