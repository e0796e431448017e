/*
 * A short-lived cache of bearer-token lookups (auth.c), keyed by the
 * token's SHA-256, so that a client's every request does not cost a
 * database round trip for the token alone.  What it holds is what
 * httpd_auth answered: the user and their roles; never a token.
 *
 * An entry is trusted for at most AUTHCACHE_TTL seconds and never past its
 * token's expiry.  Any change that could make an answer stale (a token
 * revoked or its expiry changed, a user disabled or renamed, a membership
 * added, changed or removed) NOTIFYs auth_changed in the same transaction;
 * the supervisor's LISTEN connection turns that into IMSG_AUTH_FLUSH, which
 * empties the cache.  So does the LISTEN connection coming back (what was
 * notified meanwhile is lost).  A lookup that started before a flush is not
 * cached when it answers after it (the generation changed), so a flush is
 * never undone by a reply that was already on its way.
 *
 * Authorization does not depend on the cache: every operation checks the
 * user's membership and role in SQL.  The roles cached here only feed
 * httpd's own first check.
 */
#include <jansson.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "httpd/httpd.h"

#define AUTHCACHE_TTL 10        /* seconds */
#define AUTHCACHE_MAX 8192      /* entries; a full cache starts afresh */
#define AUTHCACHE_BUCKETS 1024  /* a power of two */

struct ac_entry {
	struct ac_entry *next;
	unsigned char hash[AUTHCACHE_HASH_LEN];
	json_t *user;
	time_t until; /* monotonic seconds */
};

static struct ac_entry *buckets[AUTHCACHE_BUCKETS];
static unsigned nentries;
static uint64_t generation = 1;

static time_t
ac_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec;
}

static struct ac_entry **
ac_bucket(const unsigned char *hash)
{
	uint32_t b;

	memcpy(&b, hash, sizeof(b)); /* a digest: its bytes are uniform */
	return &buckets[b & (AUTHCACHE_BUCKETS - 1)];
}

static void
ac_free(struct ac_entry *e)
{
	json_decref(e->user);
	sodium_memzero(e->hash, sizeof(e->hash));
	free(e);
	nentries--;
}

uint64_t
authcache_generation(void)
{
	return generation;
}

void
authcache_flush(void)
{
	struct ac_entry *e;
	size_t i;

	for (i = 0; i < AUTHCACHE_BUCKETS; i++)
		while ((e = buckets[i]) != NULL) {
			buckets[i] = e->next;
			ac_free(e);
		}
	generation++;
}

json_t *
authcache_get(const unsigned char *hash)
{
	struct ac_entry **pp = ac_bucket(hash), *e;
	time_t now = ac_now();

	for (; (e = *pp) != NULL; pp = &e->next) {
		if (sodium_memcmp(e->hash, hash, AUTHCACHE_HASH_LEN) != 0)
			continue;
		if (now < e->until)
			return e->user;
		*pp = e->next;
		ac_free(e);
		return NULL;
	}
	return NULL;
}

void
authcache_put(const unsigned char *hash, json_t *user, uint64_t gen, int64_t expires_in)
{
	struct ac_entry **pp = ac_bucket(hash), *e;
	time_t ttl = AUTHCACHE_TTL;

	if (gen != generation)
		return; /* answered from before a flush */
	if (expires_in >= 0 && expires_in < ttl)
		ttl = (time_t)expires_in;
	if (ttl <= 0)
		return;
	for (e = *pp; e != NULL; e = e->next)
		if (sodium_memcmp(e->hash, hash, AUTHCACHE_HASH_LEN) == 0)
			return; /* a concurrent lookup cached it first */
	if (nentries >= AUTHCACHE_MAX) {
		log_debug("auth cache full: starting afresh");
		authcache_flush();
	}
	if ((e = calloc(1, sizeof(*e))) == NULL)
		fatal("calloc");
	memcpy(e->hash, hash, AUTHCACHE_HASH_LEN);
	e->user = json_incref(user);
	e->until = ac_now() + ttl;
	e->next = *pp;
	*pp = e;
	nentries++;
}
