/*
 * The egress request head parser (head.h).
 *
 * Two stages.  While bytes arrive, each is checked for what is wrong
 * wherever it stands (NUL, a bare CR or LF, obs-fold, the size bound) and
 * copied into the connection's buffer, until the empty line ends the head.
 * Then the whole head is judged at once: the request line, each header,
 * and the target, an authority for CONNECT and, for plain HTTP, a URL
 * parsed by libcurl's URL API, so that what the proxy decides on and what
 * it forwards come from one parse and never from string prefixes.
 */
#include "egress/head.h"

#include <curl/curl.h>
#include <string.h>
#include <strings.h>

#include "common/util.h"

enum { HEAD_READ, HEAD_BODY, HEAD_REFUSED };

/* A header line of the head, for the judging stage. */
struct head_line {
	const char *s;
	size_t len; /* without the CRLF */
};

/* What the headers said. */
struct head_fields {
	struct head_line host;
	int has_host, has_length, has_te;
	uint64_t length;
};

static enum egress_head_rc
head_refuse(struct egress_head *h, int status, const char *why)
{
	h->state = HEAD_REFUSED;
	h->status = status;
	h->why = why;
	return EGRESS_HEAD_REFUSED;
}

void
egress_head_init(struct egress_head *h)
{
	h->form = 0;
	h->port = h->minor = 0;
	h->method[0] = '\0';
	h->body = h->body_seen = 0;
	h->len = h->line = 0;
	h->why = NULL;
	h->status = 0;
	h->state = HEAD_READ;
	h->prev = 0;
	h->origin[0] = '\0';
	memset(&h->host, 0, sizeof(h->host));
}

/* RFC 9110 tchar. */
static int
head_tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/*
 * "host:port" (need_port) or "host[:port]" s[0..len) into *host and *port
 * (0 when absent); host is a name, a dotted quad or "[v6]".  Returns NULL
 * or why not.
 */
static const char *
head_authority(const char *s, size_t len, int need_port, struct egress_host *host,
    unsigned *port)
{
	const char *colon, *end = s + len;
	uint64_t v;

	*port = 0;
	if (len > 0 && s[0] == '[') {
		if ((colon = memchr(s, ']', len)) == NULL)
			return "an IPv6 address must be closed by ']'";
		colon++;
		if (colon < end && *colon != ':')
			return "expected ':' and a port after ']'";
	} else {
		colon = memchr(s, ':', len);
		if (colon != NULL && memchr(colon + 1, ':', (size_t)(end - colon - 1)) != NULL)
			return "an IPv6 address must be in brackets";
		if (colon == NULL)
			colon = end;
	}
	if (colon == end && need_port)
		return "the CONNECT target must be host:port";
	if (colon < end && (dec_parse(colon + 1, (size_t)(end - colon - 1), 65535, &v) == -1 ||
	                    v == 0))
		return "the port must be a number from 1 to 65535";
	if (colon < end)
		*port = (unsigned)v;
	return egress_host_parse(s, (size_t)(colon - s), host);
}

/* The next line of the head at *off (CRLF-terminated: the read stage made
 * sure); advances *off past its CRLF. */
static struct head_line
head_next_line(const struct egress_head *h, size_t *off)
{
	const char *s = (const char *)h->buf + *off;
	const char *cr = memchr(s, '\r', h->len - *off);
	struct head_line l = {s, (size_t)(cr - s)};

	*off += l.len + 2;
	return l;
}

/* The methods plain HTTP may use; CONNECT is the other form. */
static int
head_method_ok(const char *m)
{
	static const char *const methods[] = {"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS",
	                                      "PATCH"};
	size_t i;

	for (i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
		if (strcmp(m, methods[i]) == 0)
			return 1;
	return 0;
}

/* "METHOD SP target SP HTTP/1.x": the method and version into h, the
 * target into *target. */
static enum egress_head_rc
head_request_line(struct egress_head *h, struct head_line l, struct head_line *target)
{
	const char *sp1 = memchr(l.s, ' ', l.len), *sp2, *ver;
	size_t mlen, i;

	if (sp1 == NULL || (mlen = (size_t)(sp1 - l.s)) == 0)
		return head_refuse(h, 400, "a malformed request line");
	for (i = 0; i < mlen; i++)
		if (l.s[i] < 'A' || l.s[i] > 'Z')
			return head_refuse(h, 400, "a malformed request method");
	if (mlen > EGRESS_METHOD_MAX)
		return head_refuse(h, 501, "a request method the proxy does not support");
	memcpy(h->method, l.s, mlen);
	h->method[mlen] = '\0';
	target->s = sp1 + 1;
	sp2 = memchr(target->s, ' ', l.len - mlen - 1);
	if (sp2 == NULL || (target->len = (size_t)(sp2 - target->s)) == 0)
		return head_refuse(h, 400, "a malformed request line");
	for (i = 0; i < target->len; i++)
		if ((unsigned char)target->s[i] <= 0x20 || (unsigned char)target->s[i] >= 0x7f)
			return head_refuse(h, 400, "the request target holds a byte that is not "
			                           "visible ASCII");
	ver = sp2 + 1;
	if ((size_t)(l.s + l.len - ver) != 8 || memcmp(ver, "HTTP/", 5) != 0)
		return head_refuse(h, 400, "a malformed HTTP version");
	if (memcmp(ver + 5, "1.0", 3) != 0 && memcmp(ver + 5, "1.1", 3) != 0)
		return head_refuse(h, 505, "an HTTP version other than 1.0 and 1.1");
	h->minor = (unsigned)(ver[7] - '0');
	return EGRESS_HEAD_MORE;
}

/* Whether header line l is named name (case-insensitively); *value is
 * then its value without surrounding whitespace. */
static int
head_is(struct head_line l, const char *name, struct head_line *value)
{
	size_t n = strlen(name);

	if (l.len <= n || l.s[n] != ':' || strncasecmp(l.s, name, n) != 0)
		return 0;
	value->s = l.s + n + 1;
	value->len = l.len - n - 1;
	while (value->len > 0 && (value->s[0] == ' ' || value->s[0] == '\t'))
		value->s++, value->len--;
	while (value->len > 0 && (value->s[value->len - 1] == ' ' ||
	                          value->s[value->len - 1] == '\t'))
		value->len--;
	return 1;
}

/* The shape every header line must have: a token, ':', then a value of
 * visible characters, spaces, tabs and obs-text. */
static const char *
head_field_shape(struct head_line l)
{
	const char *colon = memchr(l.s, ':', l.len);
	size_t i, n;

	if (colon == NULL)
		return "a header line without ':'";
	if ((n = (size_t)(colon - l.s)) == 0)
		return "a header with an empty name";
	if (l.s[n - 1] == ' ' || l.s[n - 1] == '\t')
		return "whitespace between a header name and ':'";
	for (i = 0; i < n; i++)
		if (!head_tchar((unsigned char)l.s[i]))
			return "a header name that is not a token";
	for (i = n + 1; i < l.len; i++)
		if (((unsigned char)l.s[i] < 0x20 && l.s[i] != '\t') || l.s[i] == 0x7f)
			return "a control character in a header value";
	return NULL;
}

/* One header line into f. */
static enum egress_head_rc
head_field(struct egress_head *h, struct head_line l, struct head_fields *f)
{
	struct head_line v;
	const char *why;

	if ((why = head_field_shape(l)) != NULL)
		return head_refuse(h, 400, why);
	if (head_is(l, "Host", &v)) {
		if (f->has_host++)
			return head_refuse(h, 400, "two Host headers");
		f->host = v;
	} else if (head_is(l, "Content-Length", &v)) {
		if (f->has_length++)
			return head_refuse(h, 400, "two Content-Length headers");
		if (dec_parse(v.s, v.len, UINT64_C(1) << 53, &f->length) == -1)
			return head_refuse(h, 400, "a Content-Length that is not a decimal number");
	} else if (head_is(l, "Transfer-Encoding", &v)) {
		f->has_te = 1;
	}
	return EGRESS_HEAD_MORE;
}

/* The target of a CONNECT: host:port. */
static enum egress_head_rc
head_connect(struct egress_head *h, struct head_line target, const struct head_fields *f)
{
	const char *why;

	if (f->has_length)
		return head_refuse(h, 400, "a CONNECT request has no body");
	if ((why = head_authority(target.s, target.len, 1, &h->host, &h->port)) != NULL)
		return head_refuse(h, 400, why);
	h->form = EGRESS_FORM_CONNECT;
	return EGRESS_HEAD_MORE;
}

/* Why curl_url_set refused an absolute URL. */
static const char *
head_curl_why(CURLUcode rc)
{
	switch (rc) {
	case CURLUE_USER_NOT_ALLOWED:
		return "user information in the URL";
	case CURLUE_UNSUPPORTED_SCHEME:
		return "only http:// URLs are proxied (https goes through CONNECT)";
	case CURLUE_BAD_PORT_NUMBER:
		return "the port must be a number from 1 to 65535";
	case CURLUE_OUT_OF_MEMORY:
		return "out of memory";
	default:
		return "not a valid absolute http:// URL";
	}
}

/* Whether part of u is present (and so refused). */
static int
head_has_part(CURLU *u, CURLUPart part)
{
	char *v = NULL;
	CURLUcode rc = curl_url_get(u, part, &v, 0);

	curl_free(v);
	return rc == CURLUE_OK;
}

/* Part part of u into dst (dstsz bytes, NUL-terminated); "" when absent.
 * Returns 0, or -1 when it does not fit or libcurl failed. */
static int
head_get_part(CURLU *u, CURLUPart part, unsigned flags, char *dst, size_t dstsz)
{
	char *v = NULL;
	CURLUcode rc = curl_url_get(u, part, &v, flags);
	size_t n;

	dst[0] = '\0';
	if (rc != CURLUE_OK) {
		curl_free(v);
		return rc == CURLUE_NO_QUERY || rc == CURLUE_NO_PORT ? 0 : -1;
	}
	n = strlen(v);
	if (n >= dstsz) {
		curl_free(v);
		return -1;
	}
	memcpy(dst, v, n + 1);
	curl_free(v);
	return 0;
}

/* The parts of a parsed http:// URL into h: host, port, origin form. */
static const char *
head_url_parts(struct egress_head *h, CURLU *u)
{
	char scheme[8], host[EGRESS_HOST_MAX + 3], port[8], query[EGRESS_HEAD_MAX];
	uint64_t v;
	size_t plen;

	if (head_get_part(u, CURLUPART_SCHEME, 0, scheme, sizeof(scheme)) == -1 ||
	    strcmp(scheme, "http") != 0)
		return "only http:// URLs are proxied (https goes through CONNECT)";
	if (head_has_part(u, CURLUPART_USER) || head_has_part(u, CURLUPART_PASSWORD) ||
	    head_has_part(u, CURLUPART_OPTIONS))
		return "user information in the URL";
	if (head_has_part(u, CURLUPART_FRAGMENT))
		return "a fragment ('#') in the URL";
	if (head_has_part(u, CURLUPART_ZONEID))
		return "a zone in an IPv6 address";
	if (head_get_part(u, CURLUPART_HOST, 0, host, sizeof(host)) == -1 || host[0] == '\0')
		return "a URL without a valid host";
	if (head_get_part(u, CURLUPART_PORT, CURLU_DEFAULT_PORT, port, sizeof(port)) == -1 ||
	    dec_parse(port, strlen(port), 65535, &v) == -1 || v == 0)
		return "the port must be a number from 1 to 65535";
	h->port = (unsigned)v;
	if (head_get_part(u, CURLUPART_PATH, 0, h->origin, sizeof(h->origin)) == -1 ||
	    head_get_part(u, CURLUPART_QUERY, 0, query, sizeof(query)) == -1)
		return "the URL is too long";
	if (h->origin[0] != '/')
		return "not a valid absolute http:// URL";
	plen = strlen(h->origin);
	if (query[0] != '\0' && fmt_ok(h->origin + plen, sizeof(h->origin) - plen, "?%s",
	                               query) == -1)
		return "the URL is too long";
	return egress_host_parse(host, strlen(host), &h->host);
}

/* The target of plain HTTP: an absolute http:// URL, through curl_url. */
static enum egress_head_rc
head_absolute(struct egress_head *h, struct head_line target, const struct head_fields *f)
{
	const char *why;
	CURLUcode rc;
	CURLU *u;

	if (target.s[0] == '/')
		return head_refuse(h, 400, "an origin-form target: a proxy request needs an "
		                           "absolute http:// URL");
	if (target.len == 1 && target.s[0] == '*')
		return head_refuse(h, 400, "an asterisk-form target");
	if (!head_method_ok(h->method))
		return head_refuse(h, 501, "a request method the proxy does not support");
	if ((u = curl_url()) == NULL)
		return head_refuse(h, 500, "out of memory");
	memcpy(h->origin, target.s, target.len); /* NUL-terminated for libcurl */
	h->origin[target.len] = '\0';
	rc = curl_url_set(u, CURLUPART_URL, h->origin, CURLU_PATH_AS_IS | CURLU_DISALLOW_USER);
	why = rc != CURLUE_OK ? head_curl_why(rc) : head_url_parts(h, u);
	curl_url_cleanup(u);
	if (why != NULL)
		return head_refuse(h, 400, why);
	h->form = EGRESS_FORM_HTTP;
	h->body = f->length;
	return EGRESS_HEAD_MORE;
}

/* Host, when given (HTTP/1.1 must), names the target's host and port. */
static enum egress_head_rc
head_host_check(struct egress_head *h, const struct head_fields *f)
{
	struct egress_host host;
	unsigned port;

	if (!f->has_host)
		return h->minor == 1 ? head_refuse(h, 400, "an HTTP/1.1 request without Host")
		                     : EGRESS_HEAD_MORE;
	if (head_authority(f->host.s, f->host.len, 0, &host, &port) != NULL)
		return head_refuse(h, 400, "a malformed Host header");
	if (!egress_host_equal(&host, &h->host) || (port != 0 && port != h->port))
		return head_refuse(h, 400, "the Host header names another host or port than the "
		                           "request target");
	return EGRESS_HEAD_MORE;
}

/* Judge the complete head in h->buf[0..h->len). */
static enum egress_head_rc
head_judge(struct egress_head *h)
{
	struct head_fields f;
	struct head_line target, l;
	size_t off = 0;

	memset(&f, 0, sizeof(f));
	if (head_request_line(h, head_next_line(h, &off), &target) != EGRESS_HEAD_MORE)
		return EGRESS_HEAD_REFUSED;
	while ((l = head_next_line(h, &off)).len > 0)
		if (head_field(h, l, &f) != EGRESS_HEAD_MORE)
			return EGRESS_HEAD_REFUSED;
	if (f.has_te)
		return f.has_length ? head_refuse(h, 400, "Transfer-Encoding together with "
		                                          "Content-Length")
		                    : head_refuse(h, 501, "Transfer-Encoding is not supported "
		                                          "(send Content-Length)");
	if (strcmp(h->method, "CONNECT") == 0 ? head_connect(h, target, &f) != EGRESS_HEAD_MORE
	                                      : head_absolute(h, target, &f) != EGRESS_HEAD_MORE)
		return EGRESS_HEAD_REFUSED;
	if (head_host_check(h, &f) != EGRESS_HEAD_MORE)
		return EGRESS_HEAD_REFUSED;
	h->state = HEAD_BODY;
	return EGRESS_HEAD_DONE;
}

/* Take byte c of the head; DONE once it ended the head (and was judged). */
static enum egress_head_rc
head_byte(struct egress_head *h, unsigned char c)
{
	if (h->len == EGRESS_HEAD_MAX)
		return head_refuse(h, 431, "a request head larger than 16 KiB");
	if (c == '\0')
		return head_refuse(h, 400, "a NUL in the request head");
	if (h->prev == '\r' && c != '\n')
		return head_refuse(h, 400, "a CR not followed by LF");
	if (c == '\n' && h->prev != '\r')
		return head_refuse(h, 400, "an LF not preceded by CR");
	if (h->line == 0 && (c == ' ' || c == '\t'))
		return head_refuse(h, 400, h->len == 0 ? "whitespace before the request line"
		                                       : "a folded header line (obs-fold)");
	h->buf[h->len++] = c;
	h->prev = c;
	if (c != '\n') {
		h->line++;
		return EGRESS_HEAD_MORE;
	}
	if (h->line == 1 && h->len == 2)
		return head_refuse(h, 400, "an empty line before the request line");
	if (h->line == 1)
		return head_judge(h);
	h->line = 0;
	return EGRESS_HEAD_MORE;
}

/* n bytes after the head: body of a plain request, up to its length. */
static enum egress_head_rc
head_body(struct egress_head *h, size_t n)
{
	if (n == 0)
		return EGRESS_HEAD_DONE;
	if (h->form == EGRESS_FORM_CONNECT)
		return head_refuse(h, 400, "bytes after the CONNECT request before the tunnel "
		                           "was set up (pipelining)");
	if (n > h->body - h->body_seen)
		return head_refuse(h, 400, h->body == 0
		                               ? "bytes after the request head: one request per "
		                                 "connection (pipelining)"
		                               : "bytes after the request body: one request per "
		                                 "connection (pipelining)");
	h->body_seen += n;
	return EGRESS_HEAD_DONE;
}

enum egress_head_rc
egress_head_feed(struct egress_head *h, const void *p, size_t n, size_t *used)
{
	const unsigned char *b = p;
	enum egress_head_rc rc;
	size_t i;

	if (used != NULL)
		*used = 0;
	if (h->state == HEAD_REFUSED)
		return EGRESS_HEAD_REFUSED;
	if (h->state == HEAD_BODY)
		return head_body(h, n);
	for (i = 0; i < n; i++) {
		if ((rc = head_byte(h, b[i])) == EGRESS_HEAD_MORE)
			continue;
		if (rc == EGRESS_HEAD_REFUSED)
			return rc;
		if (used != NULL)
			*used = i + 1;
		return head_body(h, n - i - 1);
	}
	if (used != NULL)
		*used = n;
	return EGRESS_HEAD_MORE;
}

/* Whether header line l is one the proxy writes itself or a hop-by-hop
 * one, not forwarded. */
static int
head_dropped(struct head_line l)
{
	static const char *const names[] = {"Host", "Connection", "Proxy-Connection",
	                                    "Keep-Alive", "Proxy-Authorization", "TE",
	                                    "Trailer", "Upgrade"};
	struct head_line v;
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (head_is(l, names[i], &v))
			return 1;
	return 0;
}

ssize_t
egress_head_upstream(const struct egress_head *h, char *out, size_t outsz)
{
	const char *open = h->host.kind == EGRESS_HOST_IPV6 ? "[" : "";
	const char *close = h->host.kind == EGRESS_HOST_IPV6 ? "]" : "";
	char port[12] = "";
	struct head_line l;
	size_t off = 0, len = 0;

	if (h->state != HEAD_BODY || h->form != EGRESS_FORM_HTTP)
		return -1;
	if (h->port != EGRESS_PORT_HTTP)
		(void)fmt_ok(port, sizeof(port), ":%u", h->port);
	errbuf_append(out, outsz, &len, "%s %s HTTP/1.%u\r\nHost: %s%s%s%s\r\n", h->method,
	              h->origin, h->minor, open, h->host.text, close, port);
	(void)head_next_line(h, &off); /* the request line */
	while ((l = head_next_line(h, &off)).len > 0)
		if (!head_dropped(l))
			errbuf_append(out, outsz, &len, "%.*s\r\n", (int)l.len, l.s);
	errbuf_append(out, outsz, &len, "Connection: close\r\n\r\n");
	return len < outsz ? (ssize_t)len : -1;
}
