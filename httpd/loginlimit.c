/*
 * loginlimit: how many logins (POST /v1/session) may fail, per client
 * address and for all clients together: two token buckets.
 *
 * Every login attempt takes one token from its address's bucket and one
 * from the bucket of all; a login that succeeds gives both back, so only
 * failures use them up, and attempts still waiting for the database count
 * already (a burst sent at once is limited like one sent in turn).  An
 * address's bucket holds LOGIN_ADDR_BURST and gains one every
 * LOGIN_ADDR_REFILL_MS; the bucket of all holds LOGIN_ALL_BURST and gains
 * one every LOGIN_ALL_REFILL_MS.  An attempt finding either empty is
 * refused (429) without its token being looked at, a right one too:
 * otherwise the limit would still answer guesses.  Refusals take nothing.
 * A bucket's refusals are audited at most once every LOGIN_AUDIT_MS, so
 * that a flood writes a row a minute, not one per request.
 *
 * An address is an IPv4 address or an IPv6 /64 (one host holds a whole
 * /64); IPv4-mapped IPv6 addresses are their IPv4 address.  The table
 * holds LOGIN_ADDRS addresses; when it is full, the one with the most
 * tokens (the least suspect) makes room.  Whatever it forgets, the bucket
 * of all still bounds the failures.
 */
#include <arpa/inet.h>
#include <string.h>

#include "httpd/httpd.h"

#define LOGIN_ADDRS 4096
#define LOGIN_KEY 9 /* family byte + 8 bytes: an IPv4 address or an IPv6 /64 */

struct login_bucket {
	double tokens;
	uint64_t at;         /* ms of the last update */
	uint64_t audited_at; /* ms of the last audited refusal */
	int audited;         /* ... when there was one */
};

struct login_addr {
	unsigned char key[LOGIN_KEY];
	int used;
	struct login_bucket b;
};

static struct login_addr addrs[LOGIN_ADDRS];
static struct login_bucket all;
static int all_init;

/* The address's key: IPv4, or the /64 of IPv6; all zero when unparsable. */
static void
login_key(const char *addr, unsigned char key[LOGIN_KEY])
{
	unsigned char a6[16];
	struct in_addr a4;

	memset(key, 0, LOGIN_KEY);
	if (inet_pton(AF_INET, addr, &a4) == 1) {
		key[0] = 4;
		memcpy(key + 1, &a4, 4);
	} else if (inet_pton(AF_INET6, addr, a6) == 1) {
		static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

		if (memcmp(a6, mapped, sizeof(mapped)) == 0) {
			key[0] = 4;
			memcpy(key + 1, a6 + 12, 4);
		} else {
			key[0] = 6;
			memcpy(key + 1, a6, 8);
		}
	}
}

static void
bucket_refill(struct login_bucket *b, uint64_t now, double cap, uint64_t per_ms)
{
	if (now > b->at)
		b->tokens += (double)(now - b->at) / (double)per_ms;
	if (b->tokens > cap)
		b->tokens = cap;
	b->at = now;
}

/* Seconds until an empty bucket has a whole token again (at least 1). */
static unsigned
bucket_wait(const struct login_bucket *b, uint64_t per_ms)
{
	double ms = (1.0 - b->tokens) * (double)per_ms;
	unsigned s = (unsigned)((ms + 999.0) / 1000.0);

	return s < 1 ? 1 : s;
}

/* The address's bucket, refilled to now; a new one (full) when it is not
 * in the table. */
static struct login_bucket *
login_addr_bucket(const char *addr, uint64_t now)
{
	unsigned char key[LOGIN_KEY];
	struct login_addr *free_slot = NULL, *roomiest = NULL;
	size_t i;

	login_key(addr, key);
	for (i = 0; i < LOGIN_ADDRS; i++) {
		struct login_addr *a = &addrs[i];

		if (!a->used) {
			if (free_slot == NULL)
				free_slot = a;
			continue;
		}
		bucket_refill(&a->b, now, LOGIN_ADDR_BURST, LOGIN_ADDR_REFILL_MS);
		if (memcmp(a->key, key, LOGIN_KEY) == 0)
			return &a->b;
		if (roomiest == NULL || a->b.tokens > roomiest->b.tokens)
			roomiest = a;
	}
	if (free_slot == NULL)
		free_slot = roomiest;
	memcpy(free_slot->key, key, LOGIN_KEY);
	free_slot->used = 1;
	free_slot->b.tokens = LOGIN_ADDR_BURST;
	free_slot->b.at = now;
	free_slot->b.audited = 0;
	return &free_slot->b;
}

static struct login_bucket *
login_all_bucket(uint64_t now)
{
	if (!all_init) {
		all.tokens = LOGIN_ALL_BURST;
		all.at = now;
		all_init = 1;
	}
	bucket_refill(&all, now, LOGIN_ALL_BURST, LOGIN_ALL_REFILL_MS);
	return &all;
}

int
login_limit_take(const char *addr, uint64_t now, struct login_refusal *why)
{
	struct login_bucket *a = login_addr_bucket(addr, now), *g = login_all_bucket(now);

	if (a->tokens < 1.0 || g->tokens < 1.0) {
		struct login_bucket *b = a->tokens < 1.0 ? a : g;

		why->scope = b == a ? "address" : "all";
		why->retry_after = bucket_wait(b, b == a ? LOGIN_ADDR_REFILL_MS : LOGIN_ALL_REFILL_MS);
		why->first = !b->audited || now - b->audited_at >= LOGIN_AUDIT_MS;
		if (why->first) {
			b->audited = 1;
			b->audited_at = now;
		}
		return -1;
	}
	a->tokens -= 1.0;
	g->tokens -= 1.0;
	return 0;
}

void
login_limit_refund(const char *addr, uint64_t now)
{
	struct login_bucket *a = login_addr_bucket(addr, now), *g = login_all_bucket(now);

	a->tokens += 1.0;
	g->tokens += 1.0;
	bucket_refill(a, now, LOGIN_ADDR_BURST, LOGIN_ADDR_REFILL_MS);
	bucket_refill(g, now, LOGIN_ALL_BURST, LOGIN_ALL_REFILL_MS);
}

void
login_limit_reset(void)
{
	memset(addrs, 0, sizeof(addrs));
	memset(&all, 0, sizeof(all));
	all_init = 0;
}
