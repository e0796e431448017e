/*
 * Text from the server, made harmless before it is printed.  A run's output,
 * an event's payload, a template's name and the server's error messages may
 * all hold terminal escapes (ESC sequences that retitle the window, move the
 * cursor, rewrite earlier lines or, on some terminals, answer back as
 * keystrokes), C1 controls that some terminals read as ESC, carriage
 * returns that overwrite what a line said, and bidirectional overrides that
 * make text read differently from what it is.  Each of them is printed as
 * visible ASCII instead, as cat -v does; so is every byte that is not part
 * of valid UTF-8.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <wchar.h>

#include "client/client.h"

/* Length of the valid UTF-8 sequence at s (n bytes left) and its code point
 * in *cp, or 0 when the byte at s does not start one. */
static size_t
utf8_seq(const unsigned char *s, size_t n, uint32_t *cp)
{
	unsigned char lo = 0x80, hi = 0xbf;
	size_t len, i;

	if (s[0] < 0x80) {
		*cp = s[0];
		return 1;
	}
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2, *cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3, *cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4, *cp = s[0] & 0x07;
	else
		return 0;
	/* no overlong forms, no surrogates, nothing past U+10FFFF */
	if (s[0] == 0xe0)
		lo = 0xa0;
	else if (s[0] == 0xed)
		hi = 0x9f;
	else if (s[0] == 0xf0)
		lo = 0x90;
	else if (s[0] == 0xf4)
		hi = 0x8f;
	if (n < len || s[1] < lo || s[1] > hi)
		return 0;
	for (i = 1; i < len; i++) {
		if (i > 1 && (s[i] & 0xc0) != 0x80)
			return 0;
		*cp = (*cp << 6) | (s[i] & 0x3f);
	}
	return len;
}

/* Code points that are not ASCII controls but change how a terminal shows
 * what follows: C1 controls, line and paragraph separators, bidi marks,
 * embeddings, overrides and isolates. */
static int
unsafe_cp(uint32_t cp)
{
	return (cp >= 0x80 && cp <= 0x9f) || cp == 0x061c || cp == 0x200e || cp == 0x200f ||
	       (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

void
cli_clean(FILE *f, const char *str, size_t n, int keep_nl)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0, len;
	uint32_t cp;

	while (i < n) {
		if ((s[i] == '\n' || s[i] == '\t') && keep_nl) {
			putc(s[i++], f);
			continue;
		}
		if (s[i] < 0x20 || s[i] == 0x7f) {
			putc('^', f);
			putc(s[i] ^ 0x40, f);
			i++;
			continue;
		}
		if ((len = utf8_seq(s + i, n - i, &cp)) == 0) {
			fprintf(f, "\\x%02x", s[i++]);
			continue;
		}
		if (unsafe_cp(cp))
			fprintf(f, "\\u%04x", (unsigned)cp);
		else
			fwrite(s + i, 1, len, f);
		i += len;
	}
}

void
cli_cleans(FILE *f, const char *s)
{
	if (s == NULL)
		s = "-";
	cli_clean(f, s, strlen(s), 0);
}

char *
cli_cleaned(const char *s, size_t n)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	if (f == NULL)
		abort();
	cli_clean(f, s, n, 0);
	if (fclose(f) != 0 || out == NULL)
		abort();
	return out;
}

/* Columns of one code point: wcwidth's in a UTF-8 locale, 1 otherwise. */
static size_t
cp_width(uint32_t cp)
{
	int w = wcwidth((wchar_t)cp);

	return w < 0 ? 1 : (size_t)w;
}

size_t
cli_width(const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t n = strlen(str), i = 0, w = 0, len;
	uint32_t cp;

	while (i < n) {
		len = utf8_seq(s + i, n - i, &cp);
		w += len == 0 ? 1 : cp_width(cp);
		i += len == 0 ? 1 : len;
	}
	return w;
}

void
cli_cut(char *str, size_t cols)
{
	unsigned char *s = (unsigned char *)str;
	size_t n = strlen(str), i = 0, w = 0, len, cw;
	uint32_t cp;

	while (i < n) {
		len = utf8_seq(s + i, n - i, &cp);
		cw = len == 0 ? 1 : cp_width(cp);
		if (w + cw > cols)
			break;
		w += cw;
		i += len == 0 ? 1 : len;
	}
	s[i] = '\0';
}

const char *
cli_str(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

long long
cli_int(json_t *o, const char *key, long long dflt)
{
	json_t *v = json_object_get(o, key);

	return json_is_integer(v) ? (long long)json_integer_value(v) : dflt;
}

const char *
cli_usd(long long micros, char *buf, size_t bufsz)
{
	const char *sign = micros < 0 ? "-" : "";
	unsigned long long m =
	    micros < 0 ? 0ULL - (unsigned long long)micros : (unsigned long long)micros;

	snprintf(buf, bufsz, "%s$%llu.%04llu", sign, m / 1000000, m % 1000000 / 100);
	return buf;
}

const char *
cli_duration(long long s, char *buf, size_t bufsz)
{
	if (s < 0)
		s = 0;
	if (s >= 86400)
		snprintf(buf, bufsz, "%lldd%02lldh", s / 86400, s % 86400 / 3600);
	else if (s >= 3600)
		snprintf(buf, bufsz, "%lldh%02lldm", s / 3600, s % 3600 / 60);
	else if (s >= 60)
		snprintf(buf, bufsz, "%lldm%02llds", s / 60, s % 60);
	else
		snprintf(buf, bufsz, "%llds", s);
	return buf;
}

long long
cli_time(const char *s)
{
	struct tm tm;
	const char *end;

	if (s == NULL)
		return -1;
	memset(&tm, 0, sizeof(tm));
	end = strptime(s, "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (end == NULL || *end != '\0')
		return -1;
	return (long long)timegm(&tm);
}

void
cli_table_init(struct cli_table *t, size_t ncols, const char *const *heads)
{
	memset(t, 0, sizeof(*t));
	t->ncols = ncols;
	cli_table_row(t, heads);
}

void
cli_table_row(struct cli_table *t, const char *const *cells)
{
	size_t j;

	if (t->nrows == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 16;
		t->cells = realloc(t->cells, t->cap * t->ncols * sizeof(*t->cells));
		if (t->cells == NULL)
			abort();
	}
	for (j = 0; j < t->ncols; j++) {
		const char *v = cells[j] != NULL ? cells[j] : "-";

		t->cells[t->nrows * t->ncols + j] = cli_cleaned(v, strlen(v));
	}
	t->nrows++;
}

void
cli_table_print(struct cli_table *t, FILE *f)
{
	size_t *w = calloc(t->ncols ? t->ncols : 1, sizeof(*w)), i, j, k;

	if (w == NULL)
		abort();
	for (i = 0; i < t->nrows; i++)
		for (j = 0; j < t->ncols; j++)
			if (cli_width(t->cells[i * t->ncols + j]) > w[j])
				w[j] = cli_width(t->cells[i * t->ncols + j]);
	for (i = 0; i < t->nrows; i++) {
		for (j = 0; j < t->ncols; j++) {
			const char *v = t->cells[i * t->ncols + j];

			fputs(v, f);
			for (k = cli_width(v); j + 1 < t->ncols && k < w[j] + 2; k++)
				putc(' ', f);
		}
		putc('\n', f);
	}
	free(w);
}

void
cli_table_free(struct cli_table *t)
{
	size_t i;

	for (i = 0; i < t->nrows * t->ncols; i++)
		free(t->cells[i]);
	free(t->cells);
	memset(t, 0, sizeof(*t));
}

int
cli_is_uuid(const char *s)
{
	size_t i;

	if (strlen(s) != 36)
		return 0;
	for (i = 0; i < 36; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return 0;
		} else if (strchr("0123456789abcdefABCDEF", s[i]) == NULL || s[i] == '\0') {
			return 0;
		}
	}
	return 1;
}

int
cli_is_name(const char *s)
{
	size_t n = strlen(s);

	return n >= 1 && n <= 64 && strchr("abcdefghijklmnopqrstuvwxyz0123456789", s[0]) &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-") == n;
}
