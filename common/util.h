#ifndef AGRIPPA_UTIL_H
#define AGRIPPA_UTIL_H

#include <sys/types.h>

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/*
 * snprintf that reports truncation: returns 0 when the whole string fit in
 * dst (size dstsz), -1 otherwise (dst then holds a truncated string that
 * must not be used as a path).
 */
int fmt_ok(char *dst, size_t dstsz, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/*
 * Write the string s to the existing file at path in one write(2), as
 * control files under /proc and /sys want.  Returns 0, or -1 with errno set
 * (a short write is EIO).
 */
int file_write_str(const char *path, const char *s);

/*
 * Append one formatted line to err (size errsz, used length *len) only if it
 * fits whole; once one does not, *len becomes errsz and nothing more is
 * appended (err stays NUL-terminated).  For "all errors of a file" buffers.
 */
void errbuf_append(char *err, size_t errsz, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void errbuf_vappend(char *err, size_t errsz, size_t *len, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

/*
 * An allocator that wipes memory when it is freed or moved by realloc, for
 * libraries whose buffers may hold secrets (jansson, libevent in httpd):
 * plug it in with json_set_alloc_funcs / event_set_mem_functions before
 * the library allocates anything.
 */
void *wipe_malloc(size_t n);
void *wipe_realloc(void *p, size_t n);
void wipe_free(void *p);

/*
 * Remove name (one path component) from directory dfd whatever it is: a
 * file or a symbolic link is unlinked, a directory emptied recursively
 * without following any link, then removed.  A name that does not exist is
 * success.  Returns 0, or -1 with errno set.
 */
int rmtree_at(int dfd, const char *name);

/*
 * bytes for a person, in binary units with one decimal: "512 B", "4.0 KiB",
 * "12.3 MiB", "1.5 GiB", up to EiB.  buf holds at least 16 bytes.
 * Returns buf.
 */
const char *fmt_size(uint64_t bytes, char *buf, size_t bufsz);

/*
 * An amount of US dollars as templates and the configuration write it
 * (s, n bytes): digits without a leading zero, optionally a point and one
 * to six more digits ("2", "2.50", "0.000001"); no sign, exponent or
 * space; 0 to USD_MAX.  Parsed as text, never as a float.  Returns 0 with
 * *micros set (micro-dollars), or -1.
 */
#define USD_MAX 100000
int usd_parse(const char *s, size_t n, long long *micros);
/* Decimal digits s (n bytes) into *v, at most max; no sign, no leading
 * zero (YAML 1.1 reads 010 as octal).  Returns 0, or -1. */
int dec_parse(const char *s, size_t n, uint64_t max, uint64_t *v);
/* Whether s (n bytes) is an HTTP token (RFC 9110 tchar: letters, digits and
 * !#$%&'*+-.^_`|~), as a header's name is; the empty string is not. */
int http_token_ok(const char *s, size_t n);
/* len bytes of p (not NUL-terminated, e.g. a string in a frame) as a new
 * NUL-terminated string; fatal when out of memory. */
char *memdup0(const void *p, size_t len);

/* CLOCK_MONOTONIC in milliseconds. */
uint64_t mono_ms(void);

/* Every occurrence of the slen bytes s in the len bytes at p replaced by
 * '*', byte for byte (the text keeps its length, and a secret inside a
 * JSON string leaves a JSON string).  One shorter than REDACT_MIN is left
 * alone: it would match too much. */
#define REDACT_MIN 4
void mem_redact(char *p, size_t len, const void *s, size_t slen);

/* A one-line reason formatted into err (size errsz); returns -1, for
 * "return err_set(err, errsz, ...)". */
int err_set(char *err, size_t errsz, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
