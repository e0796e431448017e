#include <stdarg.h>
#include <stdio.h>

#include "common/util.h"

int
fmt_ok(char *dst, size_t dstsz, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(dst, dstsz, fmt, ap);
	va_end(ap);
	return (n < 0 || (size_t)n >= dstsz) ? -1 : 0;
}

void
errbuf_vappend(char *err, size_t errsz, size_t *len, const char *fmt, va_list ap)
{
	int n;

	if (err == NULL || *len >= errsz)
		return;
	n = vsnprintf(err + *len, errsz - *len, fmt, ap);
	if (n < 0 || (size_t)n >= errsz - *len) {
		err[*len] = '\0';
		*len = errsz;
		return;
	}
	*len += (size_t)n;
}

void
errbuf_append(char *err, size_t errsz, size_t *len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	errbuf_vappend(err, errsz, len, fmt, ap);
	va_end(ap);
}
