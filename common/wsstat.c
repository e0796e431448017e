/*
 * The seal of a workspace's list (common/wsstat.h).
 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/wsstat.h"

int
wsstat_seal(int fd)
{
	struct timespec now;
	char rec[64];
	int n;

	/* the clock inode times are taken from: a change after this call gets
	 * a ctime of at least this */
	if (clock_gettime(CLOCK_REALTIME_COARSE, &now) == -1)
		return -1;
	n = snprintf(rec, sizeof(rec), "seal %lld %ld", (long long)now.tv_sec, now.tv_nsec);
	if (n < 0 || (size_t)n >= sizeof(rec))
		return -1;
	return write(fd, rec, (size_t)n + 1) == (ssize_t)n + 1 ? 0 : -1;
}
