/*
 * userlimit: how many requests one user may make (api.user_rate and
 * api.user_burst in agrippad.conf(5)): a token bucket per user, beside
 * the limit of all (the requests httpd lets wait for the database), so
 * that one user cannot take every waiting slot from the others.
 *
 * Every authenticated request takes a token from its user's bucket; the
 * bucket holds user_burst and gains user_rate a second.  A request finding
 * it empty is refused (429 too_many_requests, with Retry-After: the
 * seconds until a token is there) before anything else runs.  A bucket
 * that is full is the same as none, so the table forgets full buckets
 * whenever it is three quarters used: it holds only users who are
 * spending, at most USERLIMIT_SLOTS of them.  Should every slot belong to
 * a spending user, a user the table has no room for is let through (the
 * limit of all still holds) and that is logged once a minute; the table is
 * then looked over again at most every USERLIMIT_COMPACT_MS, not on every
 * request of a user it has no room for.
 */
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "httpd/httpd.h"

#define USERLIMIT_SLOTS 8192       /* a power of two */
#define USERLIMIT_FULL_LOG_MS 60000
#define USERLIMIT_COMPACT_MS 1000

struct ul_slot {
	char uid[HTTPD_UUID_LEN + 1]; /* "" when free */
	double tokens;
	uint64_t at; /* ms of the last refill */
};

static struct ul_slot slots[USERLIMIT_SLOTS];
static size_t nused;
static double rate_per_ms, burst;
static int enabled;
static uint64_t full_logged;
static uint64_t compacted_at; /* ms of the last compaction */
static int compacted;         /* ... when there was one */

void
user_limit_conf(unsigned rate, unsigned burst_)
{
	memset(slots, 0, sizeof(slots));
	nused = 0;
	compacted = 0;
	enabled = rate > 0;
	rate_per_ms = (double)rate / 1000.0;
	burst = (double)burst_;
}

static size_t
ul_hash(const char *uid)
{
	size_t h = 1469598103934665603ull; /* FNV-1a */

	for (; *uid != '\0'; uid++) {
		h ^= (unsigned char)*uid;
		h *= 1099511628211ull;
	}
	return h & (USERLIMIT_SLOTS - 1);
}

static void
ul_refill(struct ul_slot *s, uint64_t now)
{
	if (now > s->at)
		s->tokens += (double)(now - s->at) * rate_per_ms;
	if (s->tokens > burst)
		s->tokens = burst;
	s->at = now;
}

/* The table again, without the buckets that are full by now. */
static void
ul_compact(uint64_t now)
{
	static struct ul_slot keep[USERLIMIT_SLOTS];
	size_t i, n = 0, j;

	for (i = 0; i < USERLIMIT_SLOTS; i++) {
		if (slots[i].uid[0] == '\0')
			continue;
		ul_refill(&slots[i], now);
		if (slots[i].tokens < burst)
			keep[n++] = slots[i];
	}
	memset(slots, 0, sizeof(slots));
	nused = 0;
	for (i = 0; i < n; i++) {
		for (j = ul_hash(keep[i].uid); slots[j].uid[0] != '\0'; j = (j + 1) & (USERLIMIT_SLOTS - 1))
			;
		slots[j] = keep[i];
		nused++;
	}
}

/* uid's slot, or the free one where it would go. */
static struct ul_slot *
ul_probe(const char *uid)
{
	size_t i;

	for (i = ul_hash(uid);; i = (i + 1) & (USERLIMIT_SLOTS - 1))
		if (slots[i].uid[0] == '\0' || strcmp(slots[i].uid, uid) == 0)
			return &slots[i];
}

#define USERLIMIT_KEPT_MAX (USERLIMIT_SLOTS / 4 * 3)

int
user_limit_take(const char *uid, uint64_t now, unsigned *retry_after)
{
	struct ul_slot *s;
	double ms;

	if (!enabled)
		return 0;
	s = ul_probe(uid);
	if (s->uid[0] == '\0' && nused >= USERLIMIT_KEPT_MAX &&
	    (!compacted || now - compacted_at >= USERLIMIT_COMPACT_MS)) {
		ul_compact(now);
		/* when it found no room, not again for a while */
		compacted = nused >= USERLIMIT_KEPT_MAX;
		compacted_at = now;
		s = ul_probe(uid);
	}
	if (s->uid[0] == '\0') {
		if (nused >= USERLIMIT_KEPT_MAX) {
			/* every kept bucket is spending: let this one through */
			if (full_logged == 0 || now - full_logged >= USERLIMIT_FULL_LOG_MS) {
				log_warnx("api: %zu users are being limited at once; others go "
				          "unlimited until some stop", nused);
				full_logged = now;
			}
			return 0;
		}
		snprintf(s->uid, sizeof(s->uid), "%s", uid);
		s->tokens = burst;
		s->at = now;
		nused++;
	}
	ul_refill(s, now);
	if (s->tokens < 1.0) {
		ms = (1.0 - s->tokens) / rate_per_ms;
		*retry_after = (unsigned)((ms + 999.0) / 1000.0);
		if (*retry_after < 1)
			*retry_after = 1;
		return -1;
	}
	s->tokens -= 1.0;
	return 0;
}
