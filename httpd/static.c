/*
 * The dashboard's files (ui/ in the tree, ui_dir once installed).  httpd
 * reads them all into memory before its chroot, so that nothing of the
 * file system is reachable from the jail, and serves them from there: "/"
 * is index.html, "/ui/NAME" a file of the (flat) directory.
 *
 * Every answer carries the strict Content-Security-Policy (only our own
 * files, no inline script or style, no eval, no framing), nosniff and
 * no-referrer, and a strong ETag (the start of the file's SHA-256) that
 * If-None-Match turns into a 304.
 */
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "httpd/httpd.h"

#define STATIC_MAX_FILES 64
#define STATIC_MAX_SIZE (1024 * 1024)
#define STATIC_NAME_MAX 64

#define STATIC_CSP                                                                           \
	"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "          \
	"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "          \
	"form-action 'self'; frame-ancestors 'none'"

struct static_file {
	char name[STATIC_NAME_MAX + 1];
	const char *type;
	unsigned char *data;
	size_t len;
	char etag[2 + 32 + 1]; /* "hex", quotes included */
};

static struct static_file files[STATIC_MAX_FILES];
static size_t nfiles;

/* The Content-Type for name, or NULL for a kind of file we do not serve. */
static const char *
static_type(const char *name)
{
	static const struct {
		const char *ext, *type;
	} types[] = {
	    {".html", "text/html; charset=utf-8"}, {".js", "text/javascript; charset=utf-8"},
	    {".css", "text/css; charset=utf-8"},   {".svg", "image/svg+xml"},
	    {".png", "image/png"},                 {".ico", "image/x-icon"},
	    {".txt", "text/plain; charset=utf-8"},
	};
	const char *dot = strrchr(name, '.');
	size_t i;

	for (i = 0; dot != NULL && i < sizeof(types) / sizeof(types[0]); i++)
		if (strcmp(dot, types[i].ext) == 0)
			return types[i].type;
	return NULL;
}

/* Names we serve: [a-z0-9][a-z0-9._-]*, at most STATIC_NAME_MAX bytes. */
static int
static_name_ok(const char *n)
{
	size_t len = strlen(n);

	return len > 0 && len <= STATIC_NAME_MAX &&
	       strspn(n, "abcdefghijklmnopqrstuvwxyz0123456789._-") == len && n[0] != '.' &&
	       n[0] != '-' && n[0] != '_';
}

/* Read dirfd/name into f; 0, or -1 (logged) when it is not a regular file
 * of a sane size. */
static int
static_read(int dirfd, const char *name, struct static_file *f)
{
	unsigned char sum[crypto_hash_sha256_BYTES];
	struct stat st;
	ssize_t n;
	size_t got = 0;
	int fd;

	if ((fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) == -1 ||
	    fstat(fd, &st) == -1 || !S_ISREG(st.st_mode) || st.st_size > STATIC_MAX_SIZE) {
		log_warnx("ui: %s: not a regular file of at most 1 MiB; not served", name);
		if (fd != -1)
			close(fd);
		return -1;
	}
	if ((f->data = malloc((size_t)st.st_size + 1)) == NULL)
		fatal("malloc");
	while (got < (size_t)st.st_size &&
	       ((n = read(fd, f->data + got, (size_t)st.st_size - got)) > 0 ||
	        (n == -1 && errno == EINTR)))
		got += n > 0 ? (size_t)n : 0;
	close(fd);
	f->len = got;
	memcpy(f->name, name, strlen(name) + 1); /* static_name_ok: it fits */
	f->type = static_type(name);
	crypto_hash_sha256(sum, f->data, f->len);
	f->etag[0] = '"';
	sodium_bin2hex(f->etag + 1, 33, sum, 16);
	f->etag[33] = '"';
	f->etag[34] = '\0';
	return 0;
}

void
static_load(const char *dir)
{
	struct dirent *de;
	DIR *d;

	if ((d = opendir(dir)) == NULL) {
		log_warn("ui: %s: no dashboard is served", dir);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		if (!static_name_ok(de->d_name) || static_type(de->d_name) == NULL)
			continue;
		if (nfiles == STATIC_MAX_FILES) {
			log_warnx("ui: %s: more than %d files; the rest are not served", dir,
			          STATIC_MAX_FILES);
			break;
		}
		if (static_read(dirfd(d), de->d_name, &files[nfiles]) == 0)
			nfiles++;
	}
	closedir(d);
	log_info("ui: %zu files from %s", nfiles, dir);
}

static const struct static_file *
static_find(const char *name)
{
	size_t i;

	for (i = 0; i < nfiles; i++)
		if (strcmp(files[i].name, name) == 0)
			return &files[i];
	return NULL;
}

/* Whether an If-None-Match value (a list, or "*") names etag. */
static int
static_match(const char *inm, const char *etag)
{
	size_t n = strlen(etag);
	const char *p;

	if (strcmp(inm, "*") == 0)
		return 1;
	for (p = inm; (p = strstr(p, etag)) != NULL; p += n)
		if ((p == inm || p[-1] == ' ' || p[-1] == ',') &&
		    (p[n] == '\0' || p[n] == ',' || p[n] == ' '))
			return 1;
	return 0;
}

static void
static_headers(struct evkeyvalq *out)
{
	evhttp_add_header(out, "Content-Security-Policy", STATIC_CSP);
	evhttp_add_header(out, "X-Content-Type-Options", "nosniff");
	evhttp_add_header(out, "Referrer-Policy", "no-referrer");
	evhttp_add_header(out, "X-Frame-Options", "DENY");
	evhttp_add_header(out, "Cross-Origin-Opener-Policy", "same-origin");
}

int
static_serve(struct evhttp_request *req, const char *path)
{
	struct evkeyvalq *out = evhttp_request_get_output_headers(req);
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	const struct static_file *f;
	const char *inm;
	struct evbuffer *b;

	if (path == NULL || (strcmp(path, "/") != 0 && strncmp(path, "/ui/", 4) != 0))
		return 0;
	static_headers(out);
	if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) {
		evhttp_add_header(out, "Allow", "GET, HEAD");
		httpd_error(req, 405, "method_not_allowed", "method not allowed on this resource");
		return 1;
	}
	f = static_find(strcmp(path, "/") == 0 ? "index.html" : path + 4);
	if (f == NULL) {
		httpd_error(req, 404, "not_found", "no such resource");
		return 1;
	}
	evhttp_add_header(out, "ETag", f->etag);
	evhttp_add_header(out, "Cache-Control", "no-cache");
	inm = evhttp_find_header(evhttp_request_get_input_headers(req), "If-None-Match");
	if (inm != NULL && static_match(inm, f->etag)) {
		evhttp_send_reply(req, 304, "Not Modified", NULL);
		return 1;
	}
	evhttp_add_header(out, "Content-Type", f->type);
	if ((b = evbuffer_new()) == NULL)
		fatalx("out of memory");
	evbuffer_add_reference(b, f->data, f->len, NULL, NULL);
	evhttp_send_reply(req, 200, "OK", b);
	evbuffer_free(b);
	return 1;
}
