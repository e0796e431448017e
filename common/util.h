#ifndef AGRIPPA_UTIL_H
#define AGRIPPA_UTIL_H

#include <stddef.h>

/*
 * snprintf that reports truncation: returns 0 when the whole string fit in
 * dst (size dstsz), -1 otherwise (dst then holds a truncated string that
 * must not be used as a path).
 */
int fmt_ok(char *dst, size_t dstsz, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
