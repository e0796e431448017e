/*
 * Unit tests for supervisor/secret.c: secrets sealed under a per-purpose
 * subkey open only with the same master key, purpose and nonce, untouched;
 * every record gets its own nonce; sizes from empty to SECRET_MAX; a failed
 * open leaves no plaintext behind.
 */
/* cmocka.h needs these first. */
// clang-format off
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/key.h"
#include "supervisor/secret.h"

struct sealed {
	unsigned char nonce[SECRET_NONCE_LEN];
	unsigned char *ct;
	size_t ctlen;
};

static unsigned char master[KEY_LEN], other_master[KEY_LEN];

static int
setup(void **state)
{
	if (sodium_init() < 0)
		return -1;
	randombytes_buf(master, sizeof(master));
	randombytes_buf(other_master, sizeof(other_master));
	return 0;
}

static void
seal(const unsigned char *key, const char *ctx, const void *p, size_t len, struct sealed *s)
{
	s->ct = malloc(len + SECRET_MAC_LEN);
	assert_non_null(s->ct);
	assert_int_equal(
	    secret_seal(key, ctx, p, len, s->nonce, s->ct, len + SECRET_MAC_LEN, &s->ctlen), 0);
	assert_int_equal(s->ctlen, len + SECRET_MAC_LEN);
}

/* Open s; returns secret_open's result, the plaintext in a sodium_malloc
 * buffer of cap bytes (*out, caller sodium_free's it). */
static int
open_s(const unsigned char *key, const char *ctx, const struct sealed *s, size_t cap,
       unsigned char **out, size_t *len)
{
	*out = sodium_malloc(cap > 0 ? cap : 1);
	assert_non_null(*out);
	return secret_open(key, ctx, s->ct, s->ctlen, s->nonce, *out, cap, len);
}

static void
test_round_trip(void **state)
{
	const char *tok = "ghp_0123456789abcdefghijklmnopqrstuvwxyz";
	struct sealed s;
	unsigned char *out;
	size_t len = 0;

	seal(master, SECRET_CTX_REPO, tok, strlen(tok), &s);
	assert_null(memmem(s.ct, s.ctlen, tok, strlen(tok)));
	assert_int_equal(open_s(master, SECRET_CTX_REPO, &s, 4096, &out, &len), 0);
	assert_int_equal(len, strlen(tok));
	assert_memory_equal(out, tok, len);
	sodium_free(out);
	free(s.ct);
}

/* A nonce begins with the sealing key's id (the fingerprint's first
 * SECRET_NONCE_KEYID_LEN bytes: what the database checks against key_state)
 * and is random after it; another key gives another id. */
static void
test_nonce_key_id(void **state)
{
	unsigned char fp[KEY_FP_LEN], fp2[KEY_FP_LEN], other[KEY_LEN];
	struct sealed a, b, c;

	key_fingerprint(master, fp);
	seal(master, SECRET_CTX_REPO, "a secret", 8, &a);
	seal(master, SECRET_CTX_REPO, "a secret", 8, &b);
	assert_memory_equal(a.nonce, fp, SECRET_NONCE_KEYID_LEN);
	assert_memory_equal(b.nonce, fp, SECRET_NONCE_KEYID_LEN);
	assert_memory_not_equal(a.nonce + SECRET_NONCE_KEYID_LEN, b.nonce + SECRET_NONCE_KEYID_LEN,
	    SECRET_NONCE_LEN - SECRET_NONCE_KEYID_LEN);
	randombytes_buf(other, sizeof(other));
	key_fingerprint(other, fp2);
	seal(other, SECRET_CTX_REPO, "a secret", 8, &c);
	assert_memory_equal(c.nonce, fp2, SECRET_NONCE_KEYID_LEN);
	assert_memory_not_equal(c.nonce, a.nonce, SECRET_NONCE_KEYID_LEN);
	free(a.ct);
	free(b.ct);
	free(c.ct);
}

static void
test_fresh_nonce(void **state)
{
	struct sealed a, b;

	seal(master, SECRET_CTX_MCP, "same secret", 11, &a);
	seal(master, SECRET_CTX_MCP, "same secret", 11, &b);
	assert_memory_not_equal(a.nonce, b.nonce, SECRET_NONCE_LEN);
	assert_memory_not_equal(a.ct, b.ct, a.ctlen);
	free(a.ct);
	free(b.ct);
}

static void
test_other_purpose_or_key(void **state)
{
	struct sealed s;
	unsigned char *out;
	size_t len = 0;

	seal(master, SECRET_CTX_REPO, "token", 5, &s);
	assert_int_equal(open_s(master, SECRET_CTX_MCP, &s, 64, &out, &len), -1);
	sodium_free(out);
	assert_int_equal(open_s(other_master, SECRET_CTX_REPO, &s, 64, &out, &len), -1);
	sodium_free(out);
	/* A purpose must be exactly KEY_CTX_LEN characters. */
	assert_int_equal(open_s(master, "reposec", &s, 64, &out, &len), -1);
	sodium_free(out);
	assert_int_equal(open_s(master, "reposecrx", &s, 64, &out, &len), -1);
	sodium_free(out);
	free(s.ct);
}

/* Every single flipped bit of the ciphertext, MAC or nonce is refused. */
static void
test_flipped_bit(void **state)
{
	struct sealed s;
	unsigned char *out;
	size_t i, len = 0;
	int b;

	seal(master, SECRET_CTX_REPO, "a token", 7, &s);
	for (i = 0; i < s.ctlen; i++)
		for (b = 0; b < 8; b++) {
			s.ct[i] ^= (unsigned char)(1u << b);
			assert_int_equal(open_s(master, SECRET_CTX_REPO, &s, 64, &out, &len), -1);
			sodium_free(out);
			s.ct[i] ^= (unsigned char)(1u << b);
		}
	for (i = 0; i < SECRET_NONCE_LEN; i++)
		for (b = 0; b < 8; b++) {
			s.nonce[i] ^= (unsigned char)(1u << b);
			assert_int_equal(open_s(master, SECRET_CTX_REPO, &s, 64, &out, &len), -1);
			sodium_free(out);
			s.nonce[i] ^= (unsigned char)(1u << b);
		}
	assert_int_equal(open_s(master, SECRET_CTX_REPO, &s, 64, &out, &len), 0);
	sodium_free(out);
	/* Truncated: one byte short, and shorter than the MAC. */
	s.ctlen--;
	assert_int_equal(open_s(master, SECRET_CTX_REPO, &s, 64, &out, &len), -1);
	sodium_free(out);
	s.ctlen = SECRET_MAC_LEN - 1;
	assert_int_equal(open_s(master, SECRET_CTX_REPO, &s, 64, &out, &len), -1);
	sodium_free(out);
	free(s.ct);
}

static void
test_sizes(void **state)
{
	unsigned char *big, *out, nonce[SECRET_NONCE_LEN], ct[SECRET_MAC_LEN + 8];
	struct sealed s;
	size_t len = 1, ctlen;

	seal(master, SECRET_CTX_MCP, "", 0, &s);
	assert_int_equal(open_s(master, SECRET_CTX_MCP, &s, 0, &out, &len), 0);
	assert_int_equal(len, 0);
	sodium_free(out);
	free(s.ct);

	big = malloc(SECRET_MAX + 1);
	assert_non_null(big);
	randombytes_buf(big, SECRET_MAX + 1);
	seal(master, SECRET_CTX_MCP, big, SECRET_MAX, &s);
	assert_int_equal(open_s(master, SECRET_CTX_MCP, &s, SECRET_MAX, &out, &len), 0);
	assert_int_equal(len, SECRET_MAX);
	assert_memory_equal(out, big, SECRET_MAX);
	sodium_free(out);
	/* The output must fit. */
	assert_int_equal(open_s(master, SECRET_CTX_MCP, &s, SECRET_MAX - 1, &out, &len), -1);
	sodium_free(out);
	free(s.ct);

	/* One byte over the cap, and a ciphertext buffer too small, are refused. */
	s.ct = malloc(SECRET_MAX + 1 + SECRET_MAC_LEN);
	assert_non_null(s.ct);
	assert_int_equal(secret_seal(master, SECRET_CTX_MCP, big, SECRET_MAX + 1, s.nonce, s.ct,
	                             SECRET_MAX + 1 + SECRET_MAC_LEN, &ctlen),
	                 -1);
	free(s.ct);
	assert_int_equal(
	    secret_seal(master, SECRET_CTX_MCP, "123456789", 9, nonce, ct, sizeof(ct), &ctlen), -1);
	assert_int_equal(secret_seal(master, "short", "x", 1, nonce, ct, sizeof(ct), &ctlen), -1);
	free(big);
}

/* A failed open wipes the whole output buffer: nothing that was there
 * before and no partial plaintext remains. */
static void
test_plaintext_wiped(void **state)
{
	const unsigned char zero[64] = {0};
	struct sealed s;
	unsigned char *out;
	size_t len = 0;

	seal(master, SECRET_CTX_REPO, "secret-to-wipe", 14, &s);
	out = sodium_malloc(64);
	assert_non_null(out);
	memset(out, 0xa5, 64);
	s.ct[0] ^= 1;
	assert_int_equal(
	    secret_open(master, SECRET_CTX_REPO, s.ct, s.ctlen, s.nonce, out, 64, &len), -1);
	assert_memory_equal(out, zero, 64);
	s.ct[0] ^= 1;
	memset(out, 0xa5, 64);
	assert_int_equal(secret_open(master, SECRET_CTX_MCP, s.ct, s.ctlen, s.nonce, out, 64, &len),
	                 -1);
	assert_memory_equal(out, zero, 64);
	/* Too small an output buffer: wiped too, nothing written past it. */
	memset(out, 0xa5, 64);
	assert_int_equal(
	    secret_open(master, SECRET_CTX_REPO, s.ct, s.ctlen, s.nonce, out, 13, &len), -1);
	assert_memory_equal(out, zero, 13);
	assert_int_equal(out[13], 0xa5);
	sodium_free(out);
	free(s.ct);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trip),
	    cmocka_unit_test(test_fresh_nonce),
	    cmocka_unit_test(test_nonce_key_id),
	    cmocka_unit_test(test_other_purpose_or_key),
	    cmocka_unit_test(test_flipped_bit),
	    cmocka_unit_test(test_sizes),
	    cmocka_unit_test(test_plaintext_wiped),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
