#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

int
file_write_str(const char *path, const char *s)
{
	size_t len = strlen(s);
	ssize_t n;
	int fd, saved;

	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) == -1)
		return -1;
	n = write(fd, s, len);
	saved = n == -1 ? errno : EIO;
	close(fd);
	if (n == (ssize_t)len)
		return 0;
	errno = saved;
	return -1;
}

void *
wipe_malloc(size_t n)
{
	return malloc(n);
}

void
wipe_free(void *p)
{
	if (p == NULL)
		return;
	explicit_bzero(p, malloc_usable_size(p));
	free(p);
}

/* Never realloc: it could move the block and free the old copy unwiped. */
void *
wipe_realloc(void *p, size_t n)
{
	size_t old;
	void *q;

	if (p == NULL)
		return malloc(n);
	if (n == 0) {
		wipe_free(p);
		return NULL;
	}
	old = malloc_usable_size(p);
	if (n <= old)
		return p;
	if ((q = malloc(n)) == NULL)
		return NULL;
	memcpy(q, p, old);
	wipe_free(p);
	return q;
}
