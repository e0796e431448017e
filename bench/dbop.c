/*
 * dbop PORT PGHOST PASSWORDFILE [N]: round trip of a no-op named database
 * operation from httpd through the supervisor to PostgreSQL and back,
 * beside a direct libpq round trip of the same statement, in one run.
 *
 *   healthz  GET /healthz over one keep-alive connection: HTTP parse in
 *            httpd -> IPC to the supervisor -> prepared "SELECT 1" on the
 *            pool -> IPC back -> HTTP reply
 *   http404  GET /nope on the same connection: the same HTTP path without
 *            the database round trip (so healthz - http404 ~ the op's cost)
 *   libpq    PQexecPrepared("SELECT 1") on a direct connection to the same
 *            server over its Unix socket
 * Prints median and p99 in microseconds for each, and the ratios.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void
report(const char *name, double *v, int n, double *median)
{
	qsort(v, (size_t)n, sizeof(double), cmp_double);
	*median = v[n / 2];
	printf("%-8s n=%d  median %8.1f us  p99 %8.1f us  min %8.1f us\n", name, n, v[n / 2],
	    v[(int)(n * 0.99)], v[0]);
}

/* One HTTP/1.1 request and its whole response (Content-Length framed). */
static int
http_once(int fd, const char *path, int want_code)
{
	char req[256], buf[8192];
	size_t have = 0;
	ssize_t r;
	char *hdr_end, *cl;
	long len;
	int code;

	snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: bench\r\n\r\n", path);
	if (write(fd, req, strlen(req)) != (ssize_t)strlen(req))
		return -1;
	for (;;) {
		r = read(fd, buf + have, sizeof(buf) - 1 - have);
		if (r <= 0)
			return -1;
		have += (size_t)r;
		buf[have] = '\0';
		if ((hdr_end = strstr(buf, "\r\n\r\n")) == NULL)
			continue;
		if ((cl = strcasestr(buf, "Content-Length:")) == NULL)
			return -1;
		len = strtol(cl + 15, NULL, 10);
		if ((size_t)(hdr_end + 4 - buf) + (size_t)len > have)
			continue;
		if (sscanf(buf, "HTTP/1.1 %d", &code) != 1 || code != want_code)
			return -1;
		return 0;
	}
}

static int
http_connect(int port)
{
	struct sockaddr_in sin;
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((uint16_t)port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd == -1 || connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == -1) {
		perror("connect");
		exit(1);
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static void
bench_http(int port, const char *path, int code, double *v, int n)
{
	int fd = http_connect(port), i;
	double t;

	for (i = 0; i < 200; i++) /* warm-up */
		if (http_once(fd, path, code) == -1) {
			fprintf(stderr, "bench: %s failed\n", path);
			exit(1);
		}
	for (i = 0; i < n; i++) {
		t = now_us();
		if (http_once(fd, path, code) == -1) {
			fprintf(stderr, "bench: %s failed at %d\n", path, i);
			exit(1);
		}
		v[i] = now_us() - t;
	}
	close(fd);
}

static void
bench_libpq(const char *host, const char *pwfile, double *v, int n)
{
	char pw[128] = "", ci[512];
	FILE *f = fopen(pwfile, "r");
	PGconn *c;
	PGresult *r;
	double t;
	int i;

	if (f == NULL || fgets(pw, sizeof(pw), f) == NULL) {
		perror(pwfile);
		exit(1);
	}
	fclose(f);
	pw[strcspn(pw, "\n")] = '\0';
	snprintf(ci, sizeof(ci), "host=%s dbname=agrippa user=agrippa password=%s", host, pw);
	c = PQconnectdb(ci);
	if (PQstatus(c) != CONNECTION_OK) {
		fprintf(stderr, "bench: %s", PQerrorMessage(c));
		exit(1);
	}
	PQclear(PQprepare(c, "noop", "SELECT 1", 0, NULL));
	for (i = -200; i < n; i++) {
		t = now_us();
		r = PQexecPrepared(c, "noop", 0, NULL, NULL, NULL, 0);
		if (PQresultStatus(r) != PGRES_TUPLES_OK) {
			fprintf(stderr, "bench: %s", PQresultErrorMessage(r));
			exit(1);
		}
		PQclear(r);
		if (i >= 0)
			v[i] = now_us() - t;
	}
	PQfinish(c);
}

int
main(int argc, char *argv[])
{
	int port, n = 10000;
	double *hz, *nf, *pq, mhz, mnf, mpq;

	if (argc < 4) {
		fprintf(stderr, "usage: dbop PORT PGHOST PASSWORDFILE [N]\n");
		return 2;
	}
	port = atoi(argv[1]);
	if (argc > 4)
		n = atoi(argv[4]);
	if (n < 100)
		n = 100;
	hz = calloc((size_t)n, sizeof(double));
	nf = calloc((size_t)n, sizeof(double));
	pq = calloc((size_t)n, sizeof(double));
	if (hz == NULL || nf == NULL || pq == NULL)
		return 1;
	/* Interleave the three so machine noise hits them alike. */
	bench_libpq(argv[2], argv[3], pq, n);
	bench_http(port, "/healthz", 200, hz, n);
	bench_http(port, "/nope", 404, nf, n);
	report("libpq", pq, n, &mpq);
	report("healthz", hz, n, &mhz);
	report("http404", nf, n, &mnf);
	printf("named op via httpd+supervisor (healthz - http404): %.1f us median\n", mhz - mnf);
	printf("ratio healthz/libpq: %.2f   (healthz-http404)/libpq: %.2f\n", mhz / mpq,
	    (mhz - mnf) / mpq);
	free(hz);
	free(nf);
	free(pq);
	return 0;
}
