/*
 * The redacting line relay of an MCP server's output: see relay.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "sandbox/relay.h"

/* The smallest period of s[0..n) (n less its longest border, by the
 * prefix function): two occurrences of s in a text are never closer. */
static size_t
relay_period(const char *s, size_t n)
{
	size_t *pi, i, k = 0, per;

	if ((pi = calloc(n, sizeof(*pi))) == NULL)
		fatal("relay: calloc");
	for (i = 1; i < n; i++) {
		while (k > 0 && s[i] != s[k])
			k = pi[k - 1];
		if (s[i] == s[k])
			k++;
		pi[i] = k;
	}
	per = n - pi[n - 1];
	free(pi);
	return per;
}

int
relay_init(struct relay *r, size_t cap, size_t line_max, const struct relay_secret *sec,
           size_t nsec, char *err, size_t errsz)
{
	size_t i, longest = 0;

	memset(r, 0, sizeof(*r));
	if (line_max == 0 || nsec > RELAY_SECRETS_MAX) {
		snprintf(err, errsz, line_max == 0 ? "the line cap is 0" : "more than %d secrets",
		         RELAY_SECRETS_MAX);
		return -1;
	}
	for (i = 0; i < nsec; i++) {
		if (sec[i].n > RELAY_SECRET_MAX || memchr(sec[i].p, '\n', sec[i].n) != NULL) {
			snprintf(err, errsz, "secret %zu: %s", i + 1,
			         sec[i].n > RELAY_SECRET_MAX ? "too long" : "it holds a newline");
			return -1;
		}
		if (sec[i].n >= RELAY_SECRET_MIN) {
			r->per[i] = relay_period(sec[i].p, sec[i].n);
			if (sec[i].n > longest)
				longest = sec[i].n;
		}
	}
	if (cap < 64 || cap / 4 < longest) {
		snprintf(err, errsz, "a window of %zu bytes is too small", cap);
		return -1;
	}
	if ((r->buf = malloc(cap)) == NULL || (r->copy = malloc(cap)) == NULL)
		fatal("relay: malloc");
	r->cap = cap;
	r->line_max = line_max;
	r->hold = longest > 0 ? longest - 1 : 0;
	r->sec = sec;
	r->nsec = nsec;
	return 0;
}

void
relay_free(struct relay *r)
{
	free(r->buf);
	free(r->copy);
	memset(r, 0, sizeof(*r));
}

size_t
relay_space(struct relay *r, char **p)
{
	if (r->pending || r->cut) {
		*p = NULL;
		return 0;
	}
	*p = r->buf + r->len;
	return r->cap - r->len;
}

/* Make r->copy the first n bytes of the window, once; returns it. */
static char *
relay_copy(struct relay *r, char **dst, size_t n)
{
	if (*dst == NULL) {
		memcpy(r->copy, r->buf, n);
		*dst = r->copy;
	}
	return *dst;
}

/*
 * buf[0..n) as it is to go out: [0, carry) and every occurrence of every
 * secret masked, in r->copy (made at the first mask), or buf itself when
 * nothing is.  *tail: for a boundary at e, how many bytes from e on the
 * masks of occurrences that begin before e cover (the next round's carry).
 */
static const char *
relay_redact(struct relay *r, size_t n, size_t e, size_t *tail)
{
	const struct relay_secret *s;
	const char *h;
	char *dst = NULL;
	size_t i, at, hs, he, masked;

	*tail = r->carry > e ? r->carry - e : 0;
	if (r->carry > 0)
		memset(relay_copy(r, &dst, n), '*', r->carry < n ? r->carry : n);
	for (i = 0; i < r->nsec; i++) {
		s = &r->sec[i];
		if (s->n < RELAY_SECRET_MIN)
			continue;
		at = masked = 0;
		while (at + s->n <= n && (h = memmem(r->buf + at, n - at, s->p, s->n)) != NULL) {
			hs = (size_t)(h - r->buf);
			he = hs + s->n;
			if (masked < hs)
				masked = hs;
			memset(relay_copy(r, &dst, n) + masked, '*', he - masked);
			masked = he;
			if (hs < e && he > e && he - e > *tail)
				*tail = he - e;
			at = hs + r->per[i];
		}
	}
	return dst != NULL ? dst : r->buf;
}

/* The line that starts at lstart (0: it began in an earlier round) is over
 * line_max: its first line_max + 1 bytes go, and whatever comes before it. */
static size_t
relay_cut_at(struct relay *r, size_t lstart, const char **out)
{
	size_t before = lstart == 0 ? r->sent : 0, tail, from;
	size_t cutpos = lstart + (r->line_max + 1 - before);
	const char *o = relay_redact(r, r->len, r->len, &tail);
	char *dst = o == r->buf ? NULL : r->copy;

	/* what follows cutpos is never searched: a secret that would begin
	 * in the last hold bytes is masked unseen */
	from = cutpos - lstart > r->hold ? cutpos - r->hold : lstart;
	if (from < cutpos && r->hold > 0)
		memset(relay_copy(r, &dst, cutpos) + from, '*', cutpos - from);
	r->cut = r->pending = 1;
	r->taken = r->len;
	*out = dst != NULL ? dst : r->buf;
	return cutpos;
}

/* buf[0..e) goes (redacted), the rest of the unfinished line stays. */
static size_t
relay_emit(struct relay *r, size_t e, const char **out)
{
	size_t tail;

	*out = relay_redact(r, r->len, e, &tail);
	r->taken = e;
	r->next_sent = r->sent + e;
	r->next_carry = tail;
	r->pending = 1;
	return e;
}

size_t
relay_filled(struct relay *r, size_t n, int eof, const char **out)
{
	const char *nl;
	size_t p = r->len, lstart = 0, end = 0, tail;

	*out = NULL;
	if (r->pending || r->cut)
		return 0;
	r->len += n;
	/* the held bytes hold no '\n': only the new ones are searched */
	while (p < r->len && (nl = memchr(r->buf + p, '\n', r->len - p)) != NULL) {
		if ((lstart == 0 ? r->sent : 0) + (size_t)(nl - r->buf) - lstart > r->line_max)
			return relay_cut_at(r, lstart, out);
		end = lstart = p = (size_t)(nl - r->buf) + 1;
	}
	if ((lstart == 0 ? r->sent : 0) + r->len - lstart > r->line_max)
		return relay_cut_at(r, lstart, out);
	if (eof && r->len > 0)
		end = r->len;
	if (end > 0) {
		/* whole lines (at the end, the rest too): what is left begins a line */
		*out = relay_redact(r, end, end, &tail);
		r->taken = end;
		r->next_sent = r->next_carry = 0;
		r->pending = 1;
		return end;
	}
	if (r->len < r->cap)
		return 0; /* an unfinished line that fits: wait for its end */
	/* the window is one unfinished line: all but its last hold bytes go */
	return relay_emit(r, r->len - r->hold, out);
}

size_t
relay_flush(struct relay *r, const char **out)
{
	const struct relay_secret *s;
	size_t q, i;

	*out = NULL;
	if (r->pending || r->cut || r->len == 0)
		return 0;
	/* the first byte from which what is held could begin a secret */
	for (q = r->len > r->hold ? r->len - r->hold : 0; q < r->len; q++)
		for (i = 0; i < r->nsec; i++) {
			s = &r->sec[i];
			if (s->n >= RELAY_SECRET_MIN && r->len - q < s->n &&
			    memcmp(r->buf + q, s->p, r->len - q) == 0)
				return q > 0 ? relay_emit(r, q, out) : 0;
		}
	return relay_emit(r, r->len, out);
}

void
relay_sent(struct relay *r)
{
	if (!r->pending)
		return;
	r->pending = 0;
	if (r->cut)
		return;
	memmove(r->buf, r->buf + r->taken, r->len - r->taken);
	r->len -= r->taken;
	r->taken = 0;
	r->sent = r->next_sent;
	r->carry = r->next_carry;
}

int
relay_cut(const struct relay *r)
{
	return r->cut;
}
