/*
 * Model providers on the supervisor's side: their API keys, read from the
 * key files the configuration names (files only the daemon's user may
 * read), kept in sodium memory, handed to the proxy in PROXY_CONF and
 * nowhere else, and used to redact what runners write; and the model
 * channel every runner gets to the proxy (PROXY_CHANNEL, RUNNER_PROXY).
 */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "supervisor/key.h"
#include "supervisor/supervisor.h"

#define PROVIDER_KEY_MAX 4096

struct pkey {
	unsigned char *key; /* sodium_malloc, or NULL for a provider without key_file */
	size_t len;
};

/* The keys of sup.conf.providers, in the same order. */
static struct pkey keys[CONF_MAX_PROVIDERS];

static void
pkeys_free(struct pkey *k)
{
	size_t i;

	for (i = 0; i < CONF_MAX_PROVIDERS; i++) {
		if (k[i].key != NULL)
			sodium_free(k[i].key);
		k[i].key = NULL;
		k[i].len = 0;
	}
}

/* A key file's bytes: printable ASCII without space, '"' or '\\' (it goes
 * into a header line, and redaction must find it byte for byte in JSON),
 * with at most one newline at the end, which is dropped. */
static int
pkey_text(unsigned char *buf, size_t *len)
{
	size_t i;

	if (*len > 0 && buf[*len - 1] == '\n')
		(*len)--;
	if (*len == 0)
		return -1;
	for (i = 0; i < *len; i++)
		if (buf[i] < 0x21 || buf[i] > 0x7e || buf[i] == '"' || buf[i] == '\\')
			return -1;
	return 0;
}


/* Read one key file into k.  Returns 0, or -1 with "path: reason" in err. */
static int
pkey_load(const char *path, struct pkey *k, char *err, size_t errsz)
{
	unsigned char *buf;
	ssize_t n;
	size_t len;
	int fd;

	if ((fd = key_file_open(path, 1, PROVIDER_KEY_MAX + 1, err, errsz)) < 0) {
		if (fd == -2)
			snprintf(err, errsz, "%s: %s", path, strerror(ENOENT));
		return -1;
	}
	if ((buf = sodium_malloc(PROVIDER_KEY_MAX + 2)) == NULL)
		fatalx("sodium_malloc");
	n = read(fd, buf, PROVIDER_KEY_MAX + 2);
	close(fd);
	len = n > 0 ? (size_t)n : 0;
	if (n < 0 || len > PROVIDER_KEY_MAX + 1 || pkey_text(buf, &len) == -1) {
		snprintf(err, errsz, "%s: %s", path, n < 0 ? strerror(errno) :
		    "a key is 1 to 4096 printable characters (no space, '\"' or '\\') and at "
		    "most one newline at the end");
		sodium_free(buf);
		return -1;
	}
	k->key = buf;
	k->len = len;
	return 0;
}

/* Every key of c into out (all or none).  0, or -1 with the reason. */
static int
pkeys_load(const struct config *c, struct pkey *out, char *err, size_t errsz)
{
	size_t i;

	memset(out, 0, sizeof(keys));
	for (i = 0; i < c->nproviders; i++) {
		if (c->providers[i].key_file[0] == '\0')
			continue;
		if (pkey_load(c->providers[i].key_file, &out[i], err, errsz) == -1) {
			pkeys_free(out);
			return -1;
		}
	}
	return 0;
}

/* A key sent over plain http to another host crosses the network in
 * clear: allowed (a provider on a private network may want it), said. */
static int
url_loopback(const char *url)
{
	char host[256];
	struct in_addr a;
	size_t n;

	url += strcspn(url, ":") + 3; /* after "http://" */
	n = url[0] == '[' ? strcspn(url, "]") + 1 : strcspn(url, ":/");
	if (n >= sizeof(host))
		return 0;
	memcpy(host, url, n);
	host[n] = '\0';
	if (strcmp(host, "localhost") == 0 || strcmp(host, "[::1]") == 0)
		return 1;
	return inet_pton(AF_INET, host, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

static void
pkeys_warn(const struct config *c)
{
	size_t i;

	for (i = 0; i < c->nproviders; i++) {
		const struct conf_provider *p = &c->providers[i];

		if (p->key_file[0] == '\0' || strncmp(p->base_url, "http://", 7) != 0)
			continue;
		if (!url_loopback(p->base_url))
			log_warnx("provider %s: base_url is plain http to another host: its key "
			    "crosses the network in clear", p->name);
	}
}

void
provider_init(void)
{
	char err[PATH_MAX + 256];

	if (pkeys_load(&sup.conf, keys, err, sizeof(err)) == -1)
		fatalx("provider key: %s", err);
	pkeys_warn(&sup.conf);
}

int
provider_reload(const struct config *nc, char *err, size_t errsz)
{
	struct pkey fresh[CONF_MAX_PROVIDERS];

	if (pkeys_load(nc, fresh, err, errsz) == -1)
		return -1;
	pkeys_free(keys);
	memcpy(keys, fresh, sizeof(keys));
	pkeys_warn(nc);
	return 0;
}

void
provider_send_conf(void)
{
	struct proc *p = proc_by_role(ROLE_PROXY);
	struct ipc_wbuf w;
	size_t i, j;

	if (p == NULL || !p->ready)
		return;
	ipc_wbuf_begin(&w, IMSG_PROXY_CONF, 0, 1);
	ipc_put_array(&w, (uint32_t)sup.conf.nproviders);
	for (i = 0; i < sup.conf.nproviders; i++) {
		const struct conf_provider *cp = &sup.conf.providers[i];

		ipc_put_array(&w, 9);
		ipc_put_str(&w, cp->name);
		ipc_put_u64(&w, (uint64_t)cp->kind);
		ipc_put_str(&w, cp->base_url);
		ipc_put_bin(&w, keys[i].key, keys[i].len);
		ipc_put_u64(&w, cp->timeout);
		ipc_put_u64(&w, cp->retries);
		ipc_put_bool(&w, cp->stream);
		ipc_put_bool(&w, cp->max_completion);
		ipc_put_array(&w, (uint32_t)cp->nmodels);
		for (j = 0; j < cp->nmodels; j++) {
			const struct conf_model *m = &cp->models[j];

			ipc_put_array(&w, 5);
			ipc_put_str(&w, m->name);
			ipc_put_u64(&w, m->input);
			ipc_put_u64(&w, m->output);
			ipc_put_u64(&w, m->cache_read);
			ipc_put_u64(&w, m->cache_write);
		}
	}
	/* The frame held the keys: proc_send frees it; wipe it first. */
	if (ipc_wbuf_finish(&w, sup.conf.ipc_max_frame) == 0 && p->chan != NULL &&
	    ipc_chan_send(p->chan, &w, -1) == -1)
		log_warnx("proxy: cannot send the providers");
	sodium_memzero(w.sb.data, w.sb.size);
	ipc_wbuf_free(&w);
}

void
provider_redact(char *p, size_t len)
{
	size_t i;

	for (i = 0; i < CONF_MAX_PROVIDERS; i++)
		mem_redact(p, len, keys[i].key, keys[i].len);
}

int
provider_channel(const char *run, int *runner_fd)
{
	struct proc *p = proc_by_role(ROLE_PROXY);
	struct ipc_wbuf w;
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == -1) {
		log_warn("run %s: model channel", run);
		return -1;
	}
	/* Without a proxy, the proxy's end is closed: the runner sees its
	 * model channel hang up when it needs it, and its run is taken up
	 * again once a proxy is back. */
	if (p != NULL && p->ready) {
		ipc_wbuf_begin(&w, IMSG_PROXY_CHANNEL, 0, 1);
		ipc_put_str(&w, run);
		if (proc_send(p, &w, sv[0]) == -1)
			log_warnx("run %s: cannot hand the model channel to the proxy", run);
	}
	close(sv[0]);
	*runner_fd = sv[1];
	return 0;
}
