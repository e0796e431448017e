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
