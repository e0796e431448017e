/*
 * The workspace's list as the chowner wrote it (common/wsstat.h): which of
 * the files checked out are still exactly as they were given, so that the
 * patch and the push hash only the others.
 */
#ifndef AGRIPPA_GH_STAT_H
#define AGRIPPA_GH_STAT_H

#include <sys/stat.h>

#include <stddef.h>
#include <stdint.h>

struct gh_stat_ent {
	const char *path; /* into the list's buffer */
	uint32_t mode, uid, gid;
	uint64_t ino, dev;
	int64_t size, ms, mns, cs, cns;
	int clean; /* gh_stat_check found it unchanged */
};

struct gh_stat {
	char *buf; /* the file, NUL-terminated records */
	struct gh_stat_ent *ent;
	size_t n;      /* entries, sorted by path */
	size_t nclean; /* of which gh_stat_check found unchanged */
	int64_t cs, cns; /* the seal's time, else the end's: an entry not before it
	                  * is racy */
};

/*
 * Read the list at path (a private regular file of ours) for the commit
 * base: NULL (with a one-line reason in err) when there is none, it is not
 * whole, or it is about another commit.  Never an error to act on: the
 * caller hashes every file instead.
 */
struct gh_stat *gh_stat_load(const char *path, const char *base, char *err, size_t errsz);
/* The same from a buffer of len bytes (the fuzz target's door). */
struct gh_stat *gh_stat_parse(const char *data, size_t len, const char *base, char *err,
                              size_t errsz);
void gh_stat_free(struct gh_stat *s);

/* The entry listed for path (relative to the workspace), or NULL. */
struct gh_stat_ent *gh_stat_find(struct gh_stat *s, const char *path);

/*
 * path, now as st (its lstat), is exactly as it was listed (type, mode,
 * inode, device, owner, size, mtime and ctime to the nanosecond) and was
 * not listed in the tick the list ended in: marked clean, 1.  Else 0.
 */
int gh_stat_check(struct gh_stat *s, const char *path, const struct stat *st);

#endif
