/*
 * memgrep PID HEX...: search a live process's memory (every readable mapping,
 * through /proc/PID/mem) and its environment for each byte pattern given in
 * hex.  Prints "found HEX at ADDR (MAPPING)" per hit.  Exit 0 when any
 * pattern was found, 1 when none was, 2 on error.  Used by the tests that
 * prove a child never holds the master key or the database password.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAXPAT 8
#define CHUNK (1u << 20)
#define MAXREGION (1ull << 32)

struct pat {
	unsigned char b[256];
	size_t len;
	const char *hex;
};

static int
unhex(const char *s, struct pat *p)
{
	size_t n = strlen(s), i;
	unsigned v;

	if (n == 0 || n % 2 || n / 2 > sizeof(p->b))
		return -1;
	for (i = 0; i < n / 2; i++) {
		if (sscanf(s + 2 * i, "%2x", &v) != 1)
			return -1;
		p->b[i] = (unsigned char)v;
	}
	p->len = n / 2;
	p->hex = s;
	return 0;
}

static int
scan(const unsigned char *buf, size_t len, uint64_t base, const char *what, struct pat *pats,
    int npat)
{
	int i, hits = 0;
	const unsigned char *q;

	for (i = 0; i < npat; i++) {
		const unsigned char *p = buf;
		size_t left = len;

		while (left >= pats[i].len &&
		    (q = memmem(p, left, pats[i].b, pats[i].len)) != NULL) {
			printf("found %s at 0x%" PRIx64 " (%s)\n", pats[i].hex,
			    base + (uint64_t)(q - buf), what);
			hits++;
			left -= (size_t)(q - p) + 1;
			p = q + 1;
		}
	}
	return hits;
}

static int
scan_region(int memfd, uint64_t lo, uint64_t hi, const char *name, struct pat *pats, int npat)
{
	unsigned char *buf = malloc(CHUNK + 256);
	uint64_t off;
	ssize_t n;
	int hits = 0;

	if (buf == NULL)
		return 0;
	/* Overlap chunks by 255 bytes so a pattern across a boundary is seen. */
	for (off = lo; off < hi; off += CHUNK) {
		size_t want = (size_t)((hi - off) < CHUNK + 255 ? (hi - off) : CHUNK + 255);

		n = pread(memfd, buf, want, (off_t)off);
		if (n <= 0)
			break; /* unreadable (guard page, vsyscall): skip the rest */
		hits += scan(buf, (size_t)n, off, name, pats, npat);
	}
	free(buf);
	return hits;
}

int
main(int argc, char *argv[])
{
	struct pat pats[MAXPAT];
	char path[64], line[4096], perms[8], name[4096];
	unsigned char env[1 << 16];
	uint64_t lo, hi;
	int npat = 0, memfd, envfd, hits = 0, i;
	ssize_t n;
	FILE *maps;

	if (argc < 3 || argc - 2 > MAXPAT) {
		fprintf(stderr, "usage: memgrep PID HEX...\n");
		return 2;
	}
	for (i = 2; i < argc; i++)
		if (unhex(argv[i], &pats[npat++]) == -1) {
			fprintf(stderr, "memgrep: bad pattern %s\n", argv[i]);
			return 2;
		}
	snprintf(path, sizeof(path), "/proc/%s/maps", argv[1]);
	if ((maps = fopen(path, "r")) == NULL) {
		fprintf(stderr, "memgrep: %s: %s\n", path, strerror(errno));
		return 2;
	}
	snprintf(path, sizeof(path), "/proc/%s/mem", argv[1]);
	if ((memfd = open(path, O_RDONLY)) == -1) {
		fprintf(stderr, "memgrep: %s: %s\n", path, strerror(errno));
		return 2;
	}
	while (fgets(line, sizeof(line), maps) != NULL) {
		name[0] = '\0';
		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %4s %*s %*s %*s %4095[^\n]", &lo, &hi,
			perms, name) < 3)
			continue;
		if (perms[0] != 'r')
			continue;
		/* Sanitizer shadow memory is terabytes of untouched reservation; no
		 * secret lives there, and reading it would take forever. */
		if (hi - lo > MAXREGION)
			continue;
		hits += scan_region(memfd, lo, hi, name[0] ? name : "[anon]", pats, npat);
	}
	fclose(maps);
	close(memfd);
	snprintf(path, sizeof(path), "/proc/%s/environ", argv[1]);
	if ((envfd = open(path, O_RDONLY)) != -1) {
		n = read(envfd, env, sizeof(env));
		if (n > 0)
			hits += scan(env, (size_t)n, 0, "environ", pats, npat);
		close(envfd);
	}
	return hits > 0 ? 0 : 1;
}
