#include <sys/stat.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
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

const char *
fmt_size(uint64_t bytes, char *buf, size_t bufsz)
{
	static const char *const unit[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	uint64_t whole = bytes, rest = 0;
	size_t u = 0;

	if (bytes < 1024) {
		snprintf(buf, bufsz, "%llu B", (unsigned long long)bytes);
		return buf;
	}
	for (;;) { /* whole.rest (in tenths) of unit u */
		rest = (whole % 1024) * 10 / 1024;
		whole /= 1024;
		if (whole < 1024 || u + 1 == sizeof(unit) / sizeof(unit[0]))
			break;
		u++;
	}
	snprintf(buf, bufsz, "%llu.%llu %s", (unsigned long long)whole, (unsigned long long)rest,
	         unit[u]);
	return buf;
}

int
rmtree_at(int dfd, const char *name)
{
	struct stat st;
	struct dirent *de;
	DIR *d;
	int fd, rv = 0;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == -1)
		return errno == ENOENT ? 0 : -1;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(dfd, name, 0) == -1 && errno != ENOENT ? -1 : 0;
	if ((fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) == -1)
		return -1;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return -1;
	}
	while (rv == 0 && (de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		rv = rmtree_at(dirfd(d), de->d_name);
	}
	closedir(d);
	if (rv == 0 && unlinkat(dfd, name, AT_REMOVEDIR) == -1 && errno != ENOENT)
		rv = -1;
	return rv;
}

char *
memdup0(const void *p, size_t len)
{
	char *s;

	if ((s = malloc(len + 1)) == NULL)
		fatal("malloc");
	if (len > 0)
		memcpy(s, p, len);
	s[len] = '\0';
	return s;
}

int
http_token_ok(const char *s, size_t n)
{
	static const char tchar[] = "!#$%&'*+-.^_`|~0123456789"
	                            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
	size_t i;

	if (n == 0)
		return 0;
	for (i = 0; i < n; i++)
		if (s[i] == '\0' || strchr(tchar, s[i]) == NULL)
			return 0;
	return 1;
}

int
dec_parse(const char *s, size_t n, uint64_t max, uint64_t *v)
{
	uint64_t d;
	size_t i;

	*v = 0;
	if (n == 0 || (n > 1 && s[0] == '0'))
		return -1;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		d = (uint64_t)(s[i] - '0');
		if (d > max || *v > (max - d) / 10) /* d > max: max - d would wrap */
			return -1;
		*v = *v * 10 + d;
	}
	return 0;
}

int
usd_parse(const char *s, size_t n, long long *micros)
{
	const char *dot = memchr(s, '.', n);
	size_t nwhole = dot != NULL ? (size_t)(dot - s) : n, nfrac = 0, i;
	uint64_t whole, frac = 0;

	if (dot != NULL)
		nfrac = n - nwhole - 1;
	if (dec_parse(s, nwhole, USD_MAX, &whole) == -1 ||
	    (dot != NULL && (nfrac == 0 || nfrac > 6)))
		return -1;
	for (i = 0; i < 6; i++) { /* "5" -> 500000: pad to 6 digits */
		if (i < nfrac && (dot[1 + i] < '0' || dot[1 + i] > '9'))
			return -1;
		frac = frac * 10 + (i < nfrac ? (uint64_t)(dot[1 + i] - '0') : 0);
	}
	if (whole == USD_MAX && frac != 0)
		return -1;
	*micros = (long long)(whole * 1000000 + frac);
	return 0;
}

uint64_t
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void
mem_redact(char *p, size_t len, const void *s, size_t slen)
{
	char *end = p + len, *hit;

	if (s == NULL || slen < REDACT_MIN)
		return;
	while (p < end && (hit = memmem(p, (size_t)(end - p), s, slen)) != NULL) {
		memset(hit, '*', slen);
		p = hit + slen;
	}
}

int
err_set(char *err, size_t errsz, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errsz, fmt, ap);
	va_end(ap);
	return -1;
}
