/*
 * Secrets at rest: see secret.h.  The subkey lives in sodium_malloc memory
 * (guarded, mlock'ed) only for the duration of one call and is wiped by
 * sodium_free.
 */
#include <sodium.h>
#include <string.h>

#include "supervisor/key.h"
#include "supervisor/secret.h"

#define SECRET_SUBKEY_ID 1

_Static_assert(SECRET_NONCE_LEN == crypto_secretbox_NONCEBYTES, "nonce size");
_Static_assert(SECRET_MAC_LEN == crypto_secretbox_MACBYTES, "MAC size");
_Static_assert(crypto_secretbox_KEYBYTES >= KEY_SUBKEY_MIN &&
                   crypto_secretbox_KEYBYTES <= KEY_SUBKEY_MAX,
               "subkey size");

/* The subkey for ctx in sodium_malloc memory (caller sodium_free's it), or
 * NULL when ctx is not KEY_CTX_LEN characters or memory is short. */
static unsigned char *
secret_subkey(const unsigned char *master, const char *ctx)
{
	unsigned char *k;

	if (sodium_init() < 0 || ctx == NULL || strlen(ctx) != KEY_CTX_LEN)
		return NULL;
	if ((k = sodium_malloc(crypto_secretbox_KEYBYTES)) == NULL)
		return NULL;
	if (key_derive(master, SECRET_SUBKEY_ID, ctx, k, crypto_secretbox_KEYBYTES) == -1) {
		sodium_free(k);
		return NULL;
	}
	return k;
}

int
secret_seal(const unsigned char *master, const char *ctx, const void *plain, size_t plen,
            unsigned char nonce[SECRET_NONCE_LEN], unsigned char *ct, size_t ctcap, size_t *ctlen)
{
	unsigned char *k, fp[KEY_FP_LEN];
	int rc;

	if (plen > SECRET_MAX || ctcap < plen + SECRET_MAC_LEN)
		return -1;
	if ((k = secret_subkey(master, ctx)) == NULL)
		return -1;
	key_fingerprint(master, fp);
	memcpy(nonce, fp, SECRET_NONCE_KEYID_LEN);
	randombytes_buf(nonce + SECRET_NONCE_KEYID_LEN, SECRET_NONCE_LEN - SECRET_NONCE_KEYID_LEN);
	rc = crypto_secretbox_easy(ct, plain, plen, nonce, k);
	sodium_free(k);
	if (rc != 0)
		return -1;
	*ctlen = plen + SECRET_MAC_LEN;
	return 0;
}

int
secret_open(const unsigned char *master, const char *ctx, const unsigned char *ct, size_t ctlen,
            const unsigned char nonce[SECRET_NONCE_LEN], unsigned char *plain, size_t plaincap,
            size_t *plen)
{
	unsigned char *k;
	int rc = -1;

	if (ctlen >= SECRET_MAC_LEN && ctlen - SECRET_MAC_LEN <= plaincap &&
	    ctlen - SECRET_MAC_LEN <= SECRET_MAX && (k = secret_subkey(master, ctx)) != NULL) {
		rc = crypto_secretbox_open_easy(plain, ct, ctlen, nonce, k);
		sodium_free(k);
	}
	if (rc != 0) {
		sodium_memzero(plain, plaincap);
		return -1;
	}
	*plen = ctlen - SECRET_MAC_LEN;
	return 0;
}
