/*
 * The master key: KEY_LEN random bytes in a file only the daemon's user can
 * read.  Every secret at rest is encrypted under a subkey derived from it
 * per purpose (DESIGN.md 3.2).  Only the supervisor ever loads it.
 */
#ifndef AGRIPPA_KEY_H
#define AGRIPPA_KEY_H

#include <sys/types.h>

#include <stddef.h>
#include <stdint.h>

#define KEY_LEN 32        /* == crypto_kdf_KEYBYTES */
#define KEY_CTX_LEN 8     /* == crypto_kdf_CONTEXTBYTES: e.g. "reposecr" */
#define KEY_SUBKEY_MIN 16 /* crypto_kdf_BYTES_MIN */
#define KEY_SUBKEY_MAX 64 /* crypto_kdf_BYTES_MAX */

/*
 * Load the key at path, or create it when the file does not exist.
 *
 * An existing file is refused unless it is a regular file (not a symlink:
 * it is opened O_NOFOLLOW), owned by the effective uid, with no permission
 * bits for group or others, and exactly KEY_LEN bytes long.
 *
 * A missing file is created from randombytes_buf: the parent directory is
 * made 0700 if missing (its own parent must exist), the key is written to a
 * temporary file (O_EXCL, 0600) in that directory, fsync'ed, and linked into
 * place without ever replacing an existing file; when another process
 * created the key first, that key is loaded instead.
 *
 * Returns the key in sodium_malloc memory (guarded, mlock'ed, read-only),
 * which the caller frees with key_free(), or NULL with "path: reason" in
 * errbuf (size errsz, always NUL-terminated).  *created (when created is
 * not NULL) is set to 1 when the file was made by this call (the caller
 * logs it), 0 otherwise.  Calls
 * sodium_init() itself.
 */
unsigned char *key_load_or_create(const char *path, int *created, char *errbuf, size_t errsz);

/*
 * Open a file that holds a secret (the master key, a provider's API key)
 * for reading, with the checks key_load_or_create makes: not followed when
 * a symbolic link, no blocking on a FIFO, a regular file owned by the
 * effective uid, no permission bits for group or others, min..max bytes.
 * Returns the descriptor, -2 when the file does not exist, or -1 with
 * "path: reason" in errbuf.
 */
int key_file_open(const char *path, off_t min, off_t max, char *errbuf, size_t errsz);

/* Wipe and free a key from key_load_or_create (NULL is allowed). */
void key_free(unsigned char *key);

/*
 * Derive subkey number subkey_id for the purpose named by ctx (exactly
 * KEY_CTX_LEN characters, e.g. "reposecr") into out, outlen bytes from
 * KEY_SUBKEY_MIN to KEY_SUBKEY_MAX (crypto_kdf_derive_from_key).  The same
 * inputs always give the same subkey.  out belongs to the caller, who should
 * hold it in sodium_malloc memory.  Returns 0, or -1 when outlen is out of
 * range.
 */
int key_derive(const unsigned char *master, uint64_t subkey_id, const char ctx[KEY_CTX_LEN],
    unsigned char *out, size_t outlen);

/*
 * The key's fingerprint: a BLAKE2b hash keyed with the key itself of a
 * fixed message, KEY_FP_LEN bytes.  It names the key (the database records
 * which key its secrets are under) without revealing it.
 */
#define KEY_FP_LEN 32
void key_fingerprint(const unsigned char *key, unsigned char out[KEY_FP_LEN]);

/*
 * Load the key at path with the checks of key_load_or_create, never
 * creating it.  Returns the key (key_free), or NULL with *absent set to 1
 * when the file does not exist, or to 0 with "path: reason" in errbuf.
 */
unsigned char *key_load_file(const char *path, int *absent, char *errbuf, size_t errsz);

/*
 * Create a new random key at path, which must not exist: written to a
 * temporary file (0600) in its directory, fsync'ed, linked into place and
 * the directory fsync'ed.  Returns the key (key_free), or NULL with
 * "path: reason" in errbuf (also when path exists).
 */
unsigned char *key_create_file(const char *path, char *errbuf, size_t errsz);

/* fsync the directory holding path: 0, or -1 with errno set. */
int key_dir_sync(const char *path);

#endif
