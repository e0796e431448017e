/*
 * output: a command's stdout and stderr as step.output events.
 *
 * Output is buffered per stream and sent at least every
 * RUNNER_OUTPUT_FLUSH_MS, in events of at most RUNNER_OUTPUT_EVENT_MAX
 * bytes, as text: a UTF-8 character cut between two chunks of output waits
 * for the rest, and bytes that are not UTF-8 become U+FFFD.
 */
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "runner/core.h"

struct outbuf {
	char *buf;
	size_t len, cap;
};

static struct outbuf out[3]; /* [1] stdout, [2] stderr */
static struct event *flush_ev;

json_t *
runner_utf8_text(const unsigned char *p, size_t len, int last, size_t *used)
{
	char *o;
	size_t i = 0, n = 0;
	json_t *j;

	if ((o = malloc(len * 3 + 1)) == NULL)
		fatal("malloc");
	while (i < len) {
		unsigned char b = p[i];
		size_t k, need;

		if (b >= 0x01 && b < 0x80) {
			o[n++] = (char)b;
			i++;
			continue;
		}
		need = (b & 0xe0) == 0xc0 ? 2 : (b & 0xf0) == 0xe0 ? 3 : (b & 0xf8) == 0xf0 ? 4 : 0;
		if (need != 0 && i + need > len && !last) {
			for (k = 1; i + k < len && (p[i + k] & 0xc0) == 0x80; k++)
				;
			if (i + k == len)
				break; /* maybe completed by the next chunk */
		}
		if (need >= 2 && i + need <= len) {
			uint32_t cp = b & (need == 2 ? 0x1f : need == 3 ? 0x0f : 0x07);
			int ok = 1;

			for (k = 1; k < need; k++) {
				if ((p[i + k] & 0xc0) != 0x80) {
					ok = 0;
					break;
				}
				cp = (cp << 6) | (p[i + k] & 0x3f);
			}
			if (ok && ((need == 2 && cp >= 0x80) || (need == 3 && cp >= 0x800 &&
			    (cp < 0xd800 || cp > 0xdfff)) || (need == 4 && cp >= 0x10000 &&
			    cp <= 0x10ffff))) {
				memcpy(o + n, p + i, need);
				n += need;
				i += need;
				continue;
			}
		}
		memcpy(o + n, "\xef\xbf\xbd", 3);
		n += 3;
		i++;
	}
	*used = i;
	j = json_stringn(o, n);
	free(o);
	if (j == NULL)
		fatalx("output text");
	return j;
}

static void
flush_stream(int stream, int last)
{
	struct outbuf *b = &out[stream];
	size_t used;

	while (b->len > 0) {
		size_t take = b->len < RUNNER_OUTPUT_EVENT_MAX ? b->len : RUNNER_OUTPUT_EVENT_MAX;
		int end = last && take == b->len;
		/* a character cut at the end of this piece waits for the next
		 * one (it is in the buffer already, or still to come) unless
		 * this is the command's last output */
		json_t *text = runner_utf8_text((unsigned char *)b->buf, take, end, &used);

		if (used == 0) {
			json_decref(text);
			break; /* only the start of a character: wait for the rest */
		}
		runner_event("step.output", json_pack("{s:s, s:i, s:s, s:o}",
		    "step_id", rn.steps[rn.cur].id, "attempt", rn.attempt,
		    "stream", stream == 1 ? "stdout" : "stderr", "text", text));
		memmove(b->buf, b->buf + used, b->len - used);
		b->len -= used;
	}
}

static void
flush_output(int last)
{
	flush_stream(1, last);
	flush_stream(2, last);
	if (last)
		out[1].len = out[2].len = 0;
}

static void
flush_timer(evutil_socket_t fd, short what, void *arg)
{
	if (!rn.exiting)
		flush_output(0);
}

void
runner_output(uint32_t stream, const uint8_t *data, size_t len)
{
	struct outbuf *b;
	struct timeval tv = {0, RUNNER_OUTPUT_FLUSH_MS * 1000};

	if (stream < 1 || stream > 2)
		return;
	b = &out[stream];
	if (b->len + len > b->cap) {
		size_t cap = (b->len + len) * 2;

		if ((b->buf = realloc(b->buf, cap)) == NULL)
			fatal("realloc");
		b->cap = cap;
	}
	memcpy(b->buf + b->len, data, len);
	b->len += len;
	if (b->len >= RUNNER_OUTPUT_EVENT_MAX)
		flush_stream((int)stream, 0);
	if (!evtimer_pending(flush_ev, NULL))
		evtimer_add(flush_ev, &tv);
}

void
runner_output_end(void)
{
	evtimer_del(flush_ev);
	flush_output(1);
}

void
runner_output_init(void)
{
	if ((flush_ev = evtimer_new(rn.c.base, flush_timer, NULL)) == NULL)
		fatalx("evtimer_new");
}
