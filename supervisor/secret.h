/*
 * Secrets at rest (DESIGN.md 3.2): crypto_secretbox under a subkey derived
 * from the master key per purpose, with a fresh random nonce per record.
 * The master key is a parameter so that this is testable without the
 * daemon; in the supervisor it is sup.master_key.
 */
#ifndef AGRIPPA_SECRET_H
#define AGRIPPA_SECRET_H

#include <stddef.h>

#define SECRET_MAX (64 * 1024) /* largest plaintext, in bytes */
#define SECRET_NONCE_LEN 24    /* == crypto_secretbox_NONCEBYTES */
#define SECRET_MAC_LEN 16      /* == crypto_secretbox_MACBYTES */
/* A nonce begins with the first SECRET_NONCE_KEYID_LEN bytes of the master
 * key's fingerprint (key_fingerprint), the rest is random: the database
 * refuses to store a secret sealed under a key it no longer records
 * (migration 0013, key_state), so nothing sealed before a rotation can be
 * stored after it.  128 random bits keep nonces from repeating. */
#define SECRET_NONCE_KEYID_LEN 8

#define SECRET_CTX_REPO "reposecr" /* repo_connections.token_ciphertext */
#define SECRET_CTX_MCP "mcpcreds"  /* mcp_servers.credentials_ciphertext */

/*
 * Seal plen bytes of plain (at most SECRET_MAX) for purpose ctx (exactly
 * KEY_CTX_LEN characters).  Writes a new nonce (the key's id, then random
 * bytes) to nonce and the
 * ciphertext, plen + SECRET_MAC_LEN bytes, to ct (capacity ctcap), and its
 * length to *ctlen.  plain is left as it is; wiping it is the caller's.
 * Returns 0, or -1 (bad ctx, plaintext too large, ct too small).
 */
int secret_seal(const unsigned char *master, const char *ctx, const void *plain, size_t plen,
                unsigned char nonce[SECRET_NONCE_LEN], unsigned char *ct, size_t ctcap,
                size_t *ctlen);

/*
 * Open what secret_seal made for the same ctx into plain (capacity
 * plaincap, which the caller should hold in sodium_malloc memory) and set
 * *plen.  Returns 0, or -1 when it does not authenticate (other key,
 * purpose, nonce or a changed byte) or does not fit; then all of plain is
 * wiped, so no partial plaintext is ever left behind.
 */
int secret_open(const unsigned char *master, const char *ctx, const unsigned char *ct, size_t ctlen,
                const unsigned char nonce[SECRET_NONCE_LEN], unsigned char *plain, size_t plaincap,
                size_t *plen);

#endif
