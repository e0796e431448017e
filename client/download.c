/*
 * artifact get: an artifact's bytes streamed to a file, never held whole in
 * memory.  They go to a temporary file beside the target, are checked
 * against the SHA-256 the server sends as the ETag, and only then take the
 * target's name: with link(2), which never replaces an existing file, or,
 * with -f, rename(2).  An interrupted or refused download leaves nothing.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "client/client.h"

#define DL_ERR_MAX (1u << 20) /* bytes of an error answer */
#define DL_NAME_MAX 128

struct dl {
	struct cli *c;
	CURL *h;
	const char *out; /* -o FILE, "-" or NULL (the server's file name) */
	int force, to_stdout;
	char name[DL_NAME_MAX + 1]; /* Content-Disposition's filename */
	char etag[80];
	char target[PATH_MAX];
	int fd;
	long status;
	char *err; /* an error answer's body */
	size_t errlen;
	unsigned char carry[4]; /* an incomplete UTF-8 sequence, for a terminal */
	size_t ncarry;
	crypto_hash_sha256_state sha;
	unsigned long long size;
	int rv; /* a local failure, said already, or CLI_OK */
};

static char dl_tmp[PATH_MAX]; /* removed on SIGINT, SIGTERM, SIGHUP */

static void
dl_signal(int sig)
{
	if (dl_tmp[0] != '\0')
		(void)unlink(dl_tmp);
	signal(sig, SIG_DFL);
	raise(sig);
}

/* A header line: keep Content-Disposition's file name and the ETag. */
static size_t
dl_header(char *buf, size_t size, size_t n, void *arg)
{
	struct dl *d = arg;
	size_t len = size * n, v;
	const char *q, *e;

	if (len > 20 && strncasecmp(buf, "Content-Disposition:", 20) == 0 &&
	    (q = memmem(buf, len, "filename=\"", 10)) != NULL &&
	    (e = memchr(q + 10, '"', len - (size_t)(q + 10 - buf))) != NULL) {
		v = (size_t)(e - (q + 10));
		if (v > DL_NAME_MAX)
			v = 0; /* too long: no name, said later */
		memcpy(d->name, q + 10, v);
		d->name[v] = '\0';
	} else if (len > 5 && strncasecmp(buf, "ETag:", 5) == 0) {
		for (v = 5; v < len && buf[v] == ' '; v++)
			;
		len -= v;
		while (len > 0 && (buf[v + len - 1] == '\r' || buf[v + len - 1] == '\n'))
			len--;
		if (len < sizeof(d->etag)) {
			memcpy(d->etag, buf + v, len);
			d->etag[len] = '\0';
		}
	}
	return size * n;
}

/* A name the server chose is used only when it is one plain file name. */
static int
dl_name_ok(const char *s)
{
	size_t n = strlen(s);

	return n > 0 && s[0] != '.' &&
	       strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

/* Open the temporary file beside the target (or take standard output).
 * Returns 0, or -1 after saying why (d->rv). */
static int
dl_open(struct dl *d)
{
	const char *slash;
	mode_t mask;
	int n;

	if (d->to_stdout) {
		d->fd = STDOUT_FILENO;
		return 0;
	}
	if (d->out == NULL) {
		if (!dl_name_ok(d->name)) {
			cli_err("the server gave the artifact no plain file name: use -o FILE");
			d->rv = CLI_CONN;
			return -1;
		}
		snprintf(d->target, sizeof(d->target), "%s", d->name);
		if (!d->force && access(d->target, F_OK) == 0) {
			cli_err("%s exists: not overwritten (use -f, or -o FILE)", d->target);
			d->rv = CLI_USAGE;
			return -1;
		}
	}
	slash = strrchr(d->target, '/');
	n = slash == NULL ? snprintf(dl_tmp, sizeof(dl_tmp), ".%s.XXXXXX", d->target)
	                  : snprintf(dl_tmp, sizeof(dl_tmp), "%.*s/.%s.XXXXXX",
	                             (int)(slash - d->target), d->target, slash + 1);
	if (n < 0 || (size_t)n >= sizeof(dl_tmp) || (d->fd = mkostemp(dl_tmp, O_CLOEXEC)) == -1) {
		cli_err("%s: cannot create a file beside it: %s", d->target,
		        n < 0 || (size_t)n >= sizeof(dl_tmp) ? "name too long" : strerror(errno));
		dl_tmp[0] = '\0';
		d->rv = CLI_USAGE;
		return -1;
	}
	mask = umask(0);
	umask(mask);
	(void)fchmod(d->fd, 0666 & ~mask);
	return 0;
}

static int
dl_write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;
	ssize_t w;

	while (n > 0) {
		if ((w = write(fd, p, n)) == -1 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* To a terminal the bytes are text made harmless; a UTF-8 sequence cut by
 * the end of a chunk waits for the next one. */
static void
dl_clean(struct dl *d, const char *buf, size_t n)
{
	unsigned char tmp[8];
	size_t k, need, cut = n;

	while (d->ncarry > 0 && n > 0) {
		d->carry[d->ncarry++] = (unsigned char)*buf++;
		n--;
		need = d->carry[0] >= 0xf0 ? 4 : d->carry[0] >= 0xe0 ? 3 : 2;
		if (d->ncarry == need || (d->carry[d->ncarry - 1] & 0xc0) != 0x80) {
			memcpy(tmp, d->carry, d->ncarry);
			cli_clean(stdout, (char *)tmp, d->ncarry, 1);
			d->ncarry = 0;
		}
	}
	for (k = 1; k <= 3 && k <= n; k++) {
		unsigned char b = (unsigned char)buf[n - k];

		if ((b & 0xc0) == 0x80)
			continue;
		need = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
		if (need > k)
			cut = n - k;
		break;
	}
	cli_clean(stdout, buf, cut, 1);
	memcpy(d->carry, buf + cut, n - cut);
	d->ncarry = n - cut;
}

static size_t
dl_body(char *buf, size_t size, size_t n, void *arg)
{
	struct dl *d = arg;
	size_t len = size * n;
	char *p;

	if (d->status == 0)
		curl_easy_getinfo(d->h, CURLINFO_RESPONSE_CODE, &d->status);
	if (d->status != 200) {
		if (len > DL_ERR_MAX - d->errlen) {
			cli_err("the daemon's error answer (HTTP %ld) is over %u KiB", d->status,
			        DL_ERR_MAX >> 10);
			d->rv = CLI_CONN;
			return 0;
		}
		if ((p = realloc(d->err, d->errlen + len)) == NULL)
			abort();
		d->err = p;
		memcpy(d->err + d->errlen, buf, len);
		d->errlen += len;
		return len;
	}
	if (d->fd == -1 && dl_open(d) == -1)
		return 0;
	crypto_hash_sha256_update(&d->sha, (unsigned char *)buf, len);
	d->size += len;
	if (d->to_stdout && d->c->tty) {
		dl_clean(d, buf, len);
	} else if (dl_write_all(d->fd, buf, len) == -1) {
		cli_err("%s: %s", d->to_stdout ? "standard output" : d->target, strerror(errno));
		d->rv = CLI_USAGE;
		return 0;
	}
	return len;
}

/* The bytes are all there: check them, then give the file its name. */
static int
dl_finish(struct dl *d)
{
	unsigned char dig[crypto_hash_sha256_BYTES];
	char hex[2 * crypto_hash_sha256_BYTES + 3];

	if (d->fd == -1 && dl_open(d) == -1)
		return d->rv;
	if (d->to_stdout && d->c->tty && d->ncarry > 0)
		cli_clean(stdout, (char *)d->carry, d->ncarry, 1);
	crypto_hash_sha256_final(&d->sha, dig);
	hex[0] = '"';
	sodium_bin2hex(hex + 1, sizeof(hex) - 2, dig, sizeof(dig));
	strcat(hex, "\"");
	if (strcmp(hex, d->etag) != 0) {
		cli_err("the artifact's bytes do not match the digest the server gave (%s): "
		        "nothing saved",
		        d->etag[0] ? "its ETag" : "none");
		return CLI_CONN;
	}
	if (d->to_stdout)
		return fflush(stdout) == 0 ? CLI_OK : CLI_USAGE;
	if (fsync(d->fd) == -1 || close(d->fd) == -1) {
		d->fd = -1;
		cli_err("%s: %s", d->target, strerror(errno));
		return CLI_USAGE;
	}
	d->fd = -1;
	if (d->force ? rename(dl_tmp, d->target) : link(dl_tmp, d->target)) {
		cli_err("%s: %s%s", d->target, strerror(errno),
		        errno == EEXIST ? ": not overwritten (use -f)" : "");
		return CLI_USAGE;
	}
	if (!d->force)
		(void)unlink(dl_tmp);
	dl_tmp[0] = '\0';
	return CLI_OK;
}

static void
dl_report(struct dl *d, const char *id)
{
	json_t *j;

	if (d->to_stdout)
		return;
	if (d->c->json) {
		j = json_pack("{s:s,s:s,s:I,s:s%}", "id", id, "file", d->target, "size",
		              (json_int_t)d->size, "sha256", d->etag + 1, (size_t)64);
		if (j != NULL)
			cli_print_json(d->c, j, 0);
		json_decref(j);
		return;
	}
	fputs(d->target, stdout);
	printf(": %llu bytes, sha256 %.64s\n", d->size, d->etag + 1);
}

/* Parse "get ID [-f] [-o FILE]"; returns the id or NULL after saying why. */
static const char *
dl_args(struct dl *d, int argc, char **argv)
{
	const char *id = NULL;
	int ch;

	optind = 0;
	opterr = 0;
	while ((ch = getopt(argc, argv, "-fo:")) != -1) {
		if (ch == 'f') {
			d->force = 1;
		} else if (ch == 'o' && optarg[0] != '\0') {
			d->out = optarg;
		} else if (ch == 1 && id == NULL) {
			id = optarg;
		} else {
			cli_err("usage: agrippa artifact get ARTIFACT [-f] [-o file]");
			return NULL;
		}
	}
	if (id == NULL) {
		cli_err("usage: agrippa artifact get ARTIFACT [-f] [-o file]");
		return NULL;
	}
	if (!cli_is_uuid(id)) {
		fputs("agrippa: not an artifact id (a UUID): ", stderr);
		cli_cleans(stderr, id);
		fputc('\n', stderr);
		return NULL;
	}
	return id;
}

int
cli_artifact_get(struct cli *c, int argc, char **argv)
{
	struct dl d;
	struct curl_slist *hdrs;
	char path[128];
	const char *id;
	json_t *doc;
	CURLcode res;
	CURLU *u;
	int rv;

	memset(&d, 0, sizeof(d));
	d.c = c;
	d.fd = -1;
	if ((id = dl_args(&d, argc, argv)) == NULL)
		return CLI_USAGE;
	d.to_stdout = d.out != NULL && strcmp(d.out, "-") == 0;
	if (d.out != NULL && !d.to_stdout) {
		if (snprintf(d.target, sizeof(d.target), "%s", d.out) >= (int)sizeof(d.target)) {
			cli_err("the file name is too long");
			return CLI_USAGE;
		}
		if (!d.force && access(d.target, F_OK) == 0) {
			cli_err("%s exists: not overwritten (use -f)", d.target);
			return CLI_USAGE;
		}
	}
	snprintf(path, sizeof(path), "/v1/artifacts/%s", id);
	if ((u = cli_url(c, path)) == NULL)
		return CLI_USAGE;
	crypto_hash_sha256_init(&d.sha);
	signal(SIGINT, dl_signal);
	signal(SIGTERM, dl_signal);
	signal(SIGHUP, dl_signal);
	d.h = cli_handle(c, u, &hdrs);
	/* no overall limit: a large artifact takes its time, a stalled one not */
	curl_easy_setopt(d.h, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(d.h, CURLOPT_LOW_SPEED_TIME, 60L);
	curl_easy_setopt(d.h, CURLOPT_HEADERFUNCTION, dl_header);
	curl_easy_setopt(d.h, CURLOPT_HEADERDATA, &d);
	curl_easy_setopt(d.h, CURLOPT_WRITEFUNCTION, dl_body);
	curl_easy_setopt(d.h, CURLOPT_WRITEDATA, &d);
	res = curl_easy_perform(d.h);
	curl_easy_getinfo(d.h, CURLINFO_RESPONSE_CODE, &d.status);
	if (d.rv != CLI_OK) {
		rv = d.rv;
	} else if (res != CURLE_OK) {
		rv = cli_conn_error(c, res);
	} else if (d.status != 200) {
		doc = d.err != NULL ? json_loadb(d.err, d.errlen, JSON_REJECT_DUPLICATES, NULL)
		                    : NULL;
		rv = cli_refused(c, d.status, doc);
		json_decref(doc);
	} else if ((rv = dl_finish(&d)) == CLI_OK) {
		dl_report(&d, id);
	}
	if (d.fd != -1 && !d.to_stdout)
		close(d.fd);
	if (dl_tmp[0] != '\0')
		(void)unlink(dl_tmp);
	free(d.err);
	cli_headers_free(hdrs);
	curl_easy_cleanup(d.h);
	curl_url_cleanup(u);
	return rv;
}
