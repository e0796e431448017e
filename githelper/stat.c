/*
 * The workspace's list (githelper/stat.h, common/wsstat.h).
 *
 * The list is written by the chowner, before the sandbox exists, to a
 * file of the service user's that no sandbox can reach; it is still read
 * strictly (every field, every record, the end's count), and anything
 * short of a whole list for the right commit is no list: the caller then
 * hashes every file, which is slower and never wrong.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "common/wsstat.h"
#include "githelper/stat.h"

/* The next space-ended field of the record [*p, end): its bytes. */
static int
st_field(const char **p, const char *end, const char **f, size_t *n)
{
	const char *sp = memchr(*p, ' ', (size_t)(end - *p));

	if (sp == NULL || sp == *p)
		return -1;
	*f = *p;
	*n = (size_t)(sp - *p);
	*p = sp + 1;
	return 0;
}

static int
st_u64(const char **p, const char *end, uint64_t max, uint64_t *v)
{
	const char *f;
	size_t n;

	return st_field(p, end, &f, &n) == -1 ? -1 : dec_parse(f, n, max, v);
}

/* A decimal that may be negative (a time before 1970). */
static int
st_i64(const char **p, const char *end, int64_t *v)
{
	const char *f;
	size_t n;
	uint64_t u;
	int neg;

	if (st_field(p, end, &f, &n) == -1)
		return -1;
	neg = n > 1 && f[0] == '-';
	if (dec_parse(f + neg, n - (size_t)neg, (uint64_t)INT64_MAX, &u) == -1 || (neg && u == 0))
		return -1;
	*v = neg ? -(int64_t)u : (int64_t)u;
	return 0;
}

static int
st_mode(const char **p, const char *end, uint32_t *mode)
{
	const char *f;
	size_t n, i;
	uint32_t m = 0;

	if (st_field(p, end, &f, &n) == -1 || n > 7)
		return -1;
	for (i = 0; i < n; i++) {
		if (f[i] < '0' || f[i] > '7')
			return -1;
		m = m * 8 + (uint32_t)(f[i] - '0');
	}
	*mode = m;
	return 0;
}

/* One entry record [p, end) into e. */
static int
st_entry(const char *p, const char *end, struct gh_stat_ent *e)
{
	uint64_t v;

	if (end - p < 2 || (p[0] != 'f' && p[0] != 'l') || p[1] != ' ')
		return -1;
	p += 2;
	if (st_mode(&p, end, &e->mode) == -1)
		return -1;
	if (st_u64(&p, end, UINT64_MAX, &e->ino) == -1 || st_u64(&p, end, UINT64_MAX, &e->dev) == -1 ||
	    st_u64(&p, end, UINT32_MAX, &v) == -1)
		return -1;
	e->uid = (uint32_t)v;
	if (st_u64(&p, end, UINT32_MAX, &v) == -1)
		return -1;
	e->gid = (uint32_t)v;
	if (st_i64(&p, end, &e->size) == -1 || e->size < 0 || st_i64(&p, end, &e->ms) == -1 ||
	    st_i64(&p, end, &e->mns) == -1 || st_i64(&p, end, &e->cs) == -1 ||
	    st_i64(&p, end, &e->cns) == -1 || e->mns < 0 || e->mns > 999999999 || e->cns < 0 ||
	    e->cns > 999999999)
		return -1;
	if (p >= end) /* the path: the rest, not empty */
		return -1;
	e->path = p;
	return 0;
}

/* The entry's type letter agrees with its mode. */
static int
st_type_ok(char t, uint32_t mode)
{
	return t == 'f' ? S_ISREG(mode) : S_ISLNK(mode);
}

static int
st_cmp(const void *a, const void *b)
{
	return strcmp(((const struct gh_stat_ent *)a)->path, ((const struct gh_stat_ent *)b)->path);
}

struct gh_stat *
gh_stat_parse(const char *data, size_t len, const char *base, char *err, size_t errsz)
{
	struct gh_stat *s;
	const char *p, *end, *rec, *nul, *q;
	size_t i, nrec = 0, cap = 0, hl = strlen(WSSTAT_MAGIC);
	uint64_t count, ns;
	int ended = 0;

	if (len == 0 || len > WSSTAT_MAX || data[len - 1] != '\0')
		return err_set(err, errsz, "the list is empty or not whole"), NULL;
	if ((s = calloc(1, sizeof(*s))) == NULL || (s->buf = malloc(len)) == NULL) {
		free(s);
		return err_set(err, errsz, "out of memory"), NULL;
	}
	memcpy(s->buf, data, len);
	end = s->buf + len;
	/* the header: the magic and the commit */
	rec = s->buf;
	nul = memchr(rec, '\0', (size_t)(end - rec));
	if ((size_t)(nul - rec) != hl + 1 + strlen(base) || memcmp(rec, WSSTAT_MAGIC, hl) != 0 ||
	    rec[hl] != ' ' || strcmp(rec + hl + 1, base) != 0) {
		err_set(err, errsz, "the list is not one for commit %.12s", base);
		goto bad;
	}
	for (p = nul + 1; p < end; p = nul + 1) {
		nul = memchr(p, '\0', (size_t)(end - p));
		if (ended == 1 && strncmp(p, "seal ", 5) == 0) {
			/* the supervisor's: entries are racy from then on */
			q = p + 5;
			if (st_i64(&q, nul, &s->cs) == -1 ||
			    dec_parse(q, (size_t)(nul - q), 999999999, &ns) == -1) {
				err_set(err, errsz, "a bad seal record");
				goto bad;
			}
			s->cns = (int64_t)ns;
			ended = 2;
			continue;
		}
		if (ended) {
			err_set(err, errsz, "a record after the list's end");
			goto bad;
		}
		if (strncmp(p, "end ", 4) == 0) {
			q = p + 4;
			if (st_u64(&q, nul, UINT64_MAX, &count) == -1 || st_i64(&q, nul, &s->cs) == -1 ||
			    dec_parse(q, (size_t)(nul - q), 999999999, &ns) == -1) {
				err_set(err, errsz, "a bad end record");
				goto bad;
			}
			s->cns = (int64_t)ns;
			if (count != nrec) {
				err_set(err, errsz, "the list's end counts %llu records, not %zu",
				        (unsigned long long)count, nrec);
				goto bad;
			}
			ended = 1;
			continue;
		}
		if (nrec == cap) {
			size_t ncap = cap == 0 ? 1024 : cap * 2;
			struct gh_stat_ent *ne = reallocarray(s->ent, ncap, sizeof(*ne));

			if (ne == NULL) {
				err_set(err, errsz, "out of memory");
				goto bad;
			}
			s->ent = ne;
			cap = ncap;
		}
		memset(&s->ent[nrec], 0, sizeof(s->ent[nrec]));
		if (st_entry(p, nul, &s->ent[nrec]) == -1 || !st_type_ok(p[0], s->ent[nrec].mode)) {
			err_set(err, errsz, "a bad record (#%zu)", nrec + 1);
			goto bad;
		}
		nrec++;
	}
	if (!ended) {
		err_set(err, errsz, "the list has no end (its chowner did not finish)");
		goto bad;
	}
	s->n = nrec;
	if (nrec > 0)
		qsort(s->ent, nrec, sizeof(*s->ent), st_cmp);
	for (i = 1; i < nrec; i++)
		if (strcmp(s->ent[i - 1].path, s->ent[i].path) == 0) {
			err_set(err, errsz, "a path listed twice");
			goto bad;
		}
	return s;
bad:
	gh_stat_free(s);
	return NULL;
}

struct gh_stat *
gh_stat_load(const char *path, const char *base, char *err, size_t errsz)
{
	struct gh_stat *s = NULL;
	struct stat st;
	char *buf;
	size_t got = 0;
	ssize_t n;
	int fd;

	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)) == -1)
		return err_set(err, errsz, "the list: %s", strerror(errno)), NULL;
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 077) != 0 || st.st_size <= 0 || st.st_size > (off_t)WSSTAT_MAX) {
		close(fd);
		return err_set(err, errsz,
		               "the list is not a private file of ours of at most %u bytes",
		               WSSTAT_MAX),
		       NULL;
	}
	if ((buf = malloc((size_t)st.st_size)) == NULL) {
		close(fd);
		return err_set(err, errsz, "out of memory"), NULL;
	}
	while (got < (size_t)st.st_size) {
		n = read(fd, buf + got, (size_t)st.st_size - got);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	if (got == (size_t)st.st_size)
		s = gh_stat_parse(buf, got, base, err, errsz);
	else
		err_set(err, errsz, "the list: short read");
	free(buf);
	return s;
}

void
gh_stat_free(struct gh_stat *s)
{
	if (s == NULL)
		return;
	free(s->ent);
	free(s->buf);
	free(s);
}

struct gh_stat_ent *
gh_stat_find(struct gh_stat *s, const char *path)
{
	struct gh_stat_ent key;

	if (s == NULL || s->n == 0)
		return NULL;
	key.path = path;
	return bsearch(&key, s->ent, s->n, sizeof(*s->ent), st_cmp);
}

int
gh_stat_check(struct gh_stat *s, const char *path, const struct stat *st)
{
	struct gh_stat_ent *e = gh_stat_find(s, path);

	if (e == NULL || e->clean)
		return e != NULL;
	if (e->mode != (uint32_t)st->st_mode || e->ino != (uint64_t)st->st_ino ||
	    e->dev != (uint64_t)st->st_dev || e->uid != (uint32_t)st->st_uid ||
	    e->gid != (uint32_t)st->st_gid || e->size != (int64_t)st->st_size ||
	    e->ms != (int64_t)st->st_mtim.tv_sec || e->mns != (int64_t)st->st_mtim.tv_nsec ||
	    e->cs != (int64_t)st->st_ctim.tv_sec || e->cns != (int64_t)st->st_ctim.tv_nsec)
		return 0;
	/* listed in the tick the list ended in: a change in that tick would
	 * not have moved the ctime */
	if (e->cs > s->cs || (e->cs == s->cs && e->cns >= s->cns))
		return 0;
	e->clean = 1;
	s->nclean++;
	return 1;
}
