/* FUZZ_SOURCES: githelper/stat.c */
/*
 * libFuzzer target for the reader of a workspace's list (githelper/stat.c,
 * common/wsstat.h).  The list is written by the chowner, but its paths are
 * a hostile repository's names, and the reader must never read past what
 * it was given whatever the bytes.  Input: the list's bytes, read for the
 * commit BASE.
 *
 * The contract: a list refused says why on one line; an accepted one has
 * its entries sorted by path with no path twice, each path non-empty and
 * inside its buffer, each found again by gh_stat_find, nanoseconds in
 * 0..999999999, no negative size, and a type that is a file or a link.
 * Seeds: tests/fuzz/corpus/wsstat/.
 */
#include <sys/stat.h>

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "githelper/stat.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define BASE "0123456789abcdef0123456789abcdef01234567"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gh_stat *l;
	char err[256];
	size_t i;

	err[0] = '\0';
	if ((l = gh_stat_parse((const char *)data, size, BASE, err, sizeof(err))) == NULL) {
		if (err[0] == '\0' || strchr(err, '\n') != NULL)
			abort();
		return 0;
	}
	if (l->cns < 0 || l->cns > 999999999)
		abort();
	for (i = 0; i < l->n; i++) {
		const struct gh_stat_ent *e = &l->ent[i];

		if (e->path[0] == '\0' || e->size < 0 || e->mns < 0 || e->mns > 999999999 ||
		    e->cns < 0 || e->cns > 999999999 || !(S_ISREG(e->mode) || S_ISLNK(e->mode)))
			abort();
		if (e->path < l->buf || e->path + strlen(e->path) >= l->buf + size)
			abort();
		if (i > 0 && strcmp(l->ent[i - 1].path, e->path) >= 0)
			abort();
		if (gh_stat_find(l, e->path) != e)
			abort();
	}
	gh_stat_free(l);
	return 0;
}
