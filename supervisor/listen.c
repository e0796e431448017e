/*
 * The supervisor binds httpd's listening sockets (it may need a privileged
 * port, and httpd runs chrooted without privileges) and passes them over.
 */
#include <sys/socket.h>

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "supervisor/supervisor.h"

static int
listen_bind_one(const struct conf_listen *l, char *errbuf, size_t errsz)
{
	struct addrinfo hints, *res = NULL;
	char port[8];
	int fd, on = 1, rv;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV | AI_PASSIVE;
	snprintf(port, sizeof(port), "%u", l->port);
	if ((rv = getaddrinfo(l->host, port, &hints, &res)) != 0) {
		snprintf(errbuf, errsz, "listen %s: %s", l->addr, gai_strerror(rv));
		return -1;
	}
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd == -1)
		goto fail;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
	if (res->ai_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof(on));
	if (bind(fd, res->ai_addr, res->ai_addrlen) == -1 || listen(fd, 511) == -1)
		goto fail;
	freeaddrinfo(res);
	return fd;
fail:
	snprintf(errbuf, errsz, "listen %s: %s", l->addr, strerror(errno));
	if (fd != -1)
		close(fd);
	freeaddrinfo(res);
	return -1;
}

/* The index of addr in conf's listen list, or -1. */
static int
listen_find(const struct config *conf, const char *addr)
{
	size_t i;

	for (i = 0; i < conf->nlisten; i++)
		if (strcmp(conf->listen[i].addr, addr) == 0)
			return (int)i;
	return -1;
}

int
listen_rebind(const struct config *oldc, int *oldfds, const struct config *newc, int *fds,
    size_t *nfds, char *errbuf, size_t errsz)
{
	size_t i;
	int j;

	for (i = 0; i < newc->nlisten; i++) {
		j = listen_find(oldc, newc->listen[i].addr);
		fds[i] = j >= 0 ? oldfds[j] : listen_bind_one(&newc->listen[i], errbuf, errsz);
		if (fds[i] == -1) {
			while (i-- > 0)
				if (listen_find(oldc, newc->listen[i].addr) < 0)
					close(fds[i]);
			return -1;
		}
	}
	for (i = 0; i < oldc->nlisten; i++)
		if (listen_find(newc, oldc->listen[i].addr) < 0)
			close(oldfds[i]);
	*nfds = newc->nlisten;
	return 0;
}

int
listen_bind_all(const struct config *conf, int *fds, size_t *nfds, char *errbuf, size_t errsz)
{
	size_t i;

	*nfds = 0;
	for (i = 0; i < conf->nlisten; i++) {
		fds[i] = listen_bind_one(&conf->listen[i], errbuf, errsz);
		if (fds[i] == -1) {
			while (i-- > 0)
				close(fds[i]);
			return -1;
		}
	}
	*nfds = conf->nlisten;
	return 0;
}

int
listen_metrics_bind(const struct config *conf, char *errbuf, size_t errsz)
{
	if (conf->metrics_listen.addr[0] == '\0')
		return -2;
	return listen_bind_one(&conf->metrics_listen, errbuf, errsz);
}
