/*
 * agrippad.yaml, read with libyaml's event API.
 *
 * Events rather than the document API: the document loader resolves aliases
 * silently, while events show every anchor, alias and tag so each can be
 * refused, and no node is ever expanded (no billion laughs).  The walker
 * follows the fixed shape of the file (a mapping of scalars, a few lists,
 * small mappings) and skips anything unexpected iteratively, so hostile
 * nesting costs no stack.  Everything is parsed into a heap temporary that
 * is copied to the caller's config only when the whole file is valid.
 */
#include "supervisor/config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <yaml.h>

#include "common/util.h"
#include "common/yamlev.h"
#include "ipc/ipc_msg.h"

#define CONF_FMT(f, a) __attribute__((format(printf, f, a)))
#define CONF_KEY_SHOW_MAX 64 /* longest unknown key name echoed back */
#define CONF_LABEL_MAX 64    /* "listen[7]", "providers[7].models[31].cache_write" */
#define CONF_MAX_DEPTH 32    /* nesting a config never needs; see conf_next */
#define CONF_SUN_PATH_MAX (sizeof(((struct sockaddr_un *)0)->sun_path))

struct conf_parse {
	struct yamlev ye;         /* the event reader: depth, stop, the parser */
	const char *name;         /* file name for messages */
	struct config *c;         /* the temporary being filled */
	char *err;                /* caller's errbuf */
	size_t errsz;
	size_t errlen;            /* errsz once a line was dropped */
	unsigned nerr;
	yaml_mark_t name_mark;    /* last user/db_user value, for the cross-check */
	yaml_mark_t metrics_mark; /* metrics_listen, checked against listen */
	struct conf_provider *prov; /* the providers[] entry being read, or NULL */
	struct conf_model *model;   /* the models[] entry of prov being read, or NULL */
	yaml_mark_t field_mark;     /* prov's max_tokens_field, checked against its kind */
	yaml_mark_t agent_mark;     /* the agent mapping, */
	yaml_mark_t agent_provider_mark; /* agent.provider and */
	yaml_mark_t agent_model_mark;    /* agent.model, for conf_check_agent */
	int agent_unchecked;        /* providers or agent had errors: no cross-check */
};

struct conf_key;
typedef void conf_setter(struct conf_parse *, const struct conf_key *, yaml_event_t *);

struct conf_key {
	const char *name;  /* as written in the file */
	const char *label; /* as named in messages; NULL in a list entry: prefix + name */
	conf_setter *set;  /* consumes the value node whose first event it gets */
	size_t off;        /* destination in struct config */
	size_t size;       /* its capacity, NUL included */
};

/* Errors */

/* A whole-file error: "name: reason", the first line of err. */
static void CONF_FMT(3, 4)
conf_ferror(char *err, size_t errsz, const char *fmt, ...)
{
	va_list ap;
	size_t len = 0;

	va_start(ap, fmt);
	errbuf_vappend(err, errsz, &len, fmt, ap);
	va_end(ap);
}

/* Report "name:line:col: reason" at mark m (libyaml marks are 0-based). */
static void CONF_FMT(3, 4)
conf_error(struct conf_parse *p, const yaml_mark_t *m, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	p->nerr++;
	errbuf_append(p->err, p->errsz, &p->errlen, "%s:%lu:%lu: %s\n", p->name,
	    (unsigned long)m->line + 1, (unsigned long)m->column + 1, msg);
}

/* Events */

static const char *
conf_kind(const yaml_event_t *ev)
{
	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		return "a scalar";
	case YAML_SEQUENCE_START_EVENT:
		return "a sequence";
	case YAML_MAPPING_START_EVENT:
		return "a mapping";
	case YAML_ALIAS_EVENT:
		return "an alias";
	default:
		return "nothing";
	}
}

/* Problems yamlev found; out of memory is placed where the parser stopped. */
static void
conf_yaml_error(void *arg, const yaml_mark_t *m, const char *msg)
{
	struct conf_parse *p = arg;

	conf_error(p, m != NULL ? m : &p->ye.yp.mark, "%s", msg);
}

/* The next event (common/yamlev.h): 0, or -1 once the parse stopped. */
static int
conf_next(struct conf_parse *p, yaml_event_t *ev)
{
	return yamlev_next(&p->ye, ev);
}

/* Consume the rest of the node that start opened (nothing for a scalar). */
static void
conf_skip(struct conf_parse *p, const yaml_event_t *start)
{
	yaml_event_t ev;
	size_t depth = 1;

	if (start->type != YAML_SEQUENCE_START_EVENT && start->type != YAML_MAPPING_START_EVENT)
		return;
	while (depth > 0 && conf_next(p, &ev) == 0) {
		if (ev.type == YAML_SEQUENCE_START_EVENT || ev.type == YAML_MAPPING_START_EVENT)
			depth++;
		else if (ev.type == YAML_SEQUENCE_END_EVENT || ev.type == YAML_MAPPING_END_EVENT)
			depth--;
		yaml_event_delete(&ev);
	}
}

/* Empty, or a plain YAML null ("~", "null"): no value was given. */
static int
conf_is_null(const yaml_event_t *ev)
{
	static const char *const nulls[] = {"~", "null", "Null", "NULL"};
	const char *v = (const char *)ev->data.scalar.value;
	size_t i;

	if (ev->data.scalar.length == 0)
		return 1;
	if (ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return 0;
	for (i = 0; i < sizeof(nulls) / sizeof(nulls[0]); i++)
		if (strcmp(v, nulls[i]) == 0)
			return 1;
	return 0;
}

/* What ev is, for "expected ..., found X": a null scalar is "nothing". */
static const char *
conf_found(const yaml_event_t *ev)
{
	return ev->type == YAML_SCALAR_EVENT && conf_is_null(ev) ? "nothing" : conf_kind(ev);
}

/*
 * Copy the scalar value of ev into out (outsz bytes, NUL-terminated).
 * Returns 0, or -1 after reporting a node that is not a scalar (consumed), an
 * empty value, one too long for out, or one holding control characters (an
 * escaped "\0" would silently cut a path).  Never echoes the value.
 */
static int
conf_scalar(struct conf_parse *p, const char *label, yaml_event_t *ev, char *out, size_t outsz)
{
	const unsigned char *v = ev->data.scalar.value;
	size_t n = ev->data.scalar.length, i;

	if (ev->type != YAML_SCALAR_EVENT) {
		conf_error(p, &ev->start_mark, "%s: expected a scalar, found %s", label,
		    conf_kind(ev));
		conf_skip(p, ev);
		return -1;
	}
	if (conf_is_null(ev)) {
		conf_error(p, &ev->start_mark, "%s: empty value", label);
		return -1;
	}
	if (n >= outsz) {
		conf_error(p, &ev->start_mark, "%s: value too long (at most %zu bytes)", label,
		    outsz - 1);
		return -1;
	}
	for (i = 0; i < n; i++) {
		if (v[i] < 0x20 || v[i] == 0x7f) {
			conf_error(p, &ev->start_mark, "%s: control characters are not allowed",
			    label);
			return -1;
		}
	}
	memset(out, 0, outsz); /* no tail of the default left behind the NUL */
	memcpy(out, v, n);
	return 0;
}

/* Numbers */

/* Parse decimal digits s[0..n) into *v.  Returns 0, or -1 when empty, not
 * all digits, or above max. */
static int
conf_digits(const char *s, size_t n, uint64_t max, uint64_t *v)
{
	size_t i;

	*v = 0;
	if (n == 0)
		return -1;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		if (*v > (max - (uint64_t)(s[i] - '0')) / 10)
			return -1;
		*v = *v * 10 + (uint64_t)(s[i] - '0');
	}
	return 0;
}

/* A number with an optional K (1024), M (2^20), G (2^30) or T (2^40)
 * suffix when allowed. */
static int
conf_number(const char *s, size_t n, int suffixes, uint64_t *v)
{
	uint64_t mult = 1;

	if (suffixes && n > 0 && s[n - 1] == 'K')
		mult = 1024;
	else if (suffixes && n > 0 && s[n - 1] == 'M')
		mult = 1024 * 1024;
	else if (suffixes && n > 0 && s[n - 1] == 'G')
		mult = 1024 * 1024 * 1024;
	else if (suffixes && n > 0 && s[n - 1] == 'T')
		mult = 1024ull * 1024 * 1024 * 1024;
	if (mult != 1)
		n--;
	if (conf_digits(s, n, UINT64_MAX / mult, v) == -1)
		return -1;
	*v *= mult;
	return 0;
}

/*
 * An integer scalar in [min, max] into *out.  Quoted scalars are strings in
 * YAML and are refused.  Returns 0, or -1 after reporting.
 */
static int
conf_int(struct conf_parse *p, const char *label, yaml_event_t *ev, uint64_t min, uint64_t max,
    int suffixes, uint64_t *out)
{
	const char *v = (const char *)ev->data.scalar.value;

	if (ev->type != YAML_SCALAR_EVENT || conf_is_null(ev) ||
	    ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) {
		if (ev->type == YAML_SCALAR_EVENT && conf_is_null(ev))
			conf_error(p, &ev->start_mark, "%s: empty value", label);
		else
			conf_error(p, &ev->start_mark, "%s: expected an integer, found %s",
			    label, ev->type == YAML_SCALAR_EVENT ? "a quoted string" : conf_kind(ev));
		conf_skip(p, ev);
		return -1;
	}
	if (conf_number(v, ev->data.scalar.length, suffixes, out) == -1 || *out < min ||
	    *out > max) {
		conf_error(p, &ev->start_mark, "%s: expected an integer from %llu to %llu%s", label,
		    (unsigned long long)min, (unsigned long long)max,
		    suffixes ? " (K, M, G and T suffixes allowed)" : "");
		return -1;
	}
	return 0;
}

/* Setters: each consumes the value node that starts with ev. */

static char *
conf_field(struct conf_parse *p, const struct conf_key *k)
{
	return (char *)p->c + k->off;
}

/* An absolute path into dst (size bytes).  Returns 0, or -1 after reporting. */
static int
conf_path(struct conf_parse *p, const char *label, yaml_event_t *ev, char *dst, size_t size)
{
	if (conf_scalar(p, label, ev, dst, size) == -1)
		return -1;
	if (dst[0] != '/') {
		conf_error(p, &ev->start_mark, "%s: must be an absolute path", label);
		return -1;
	}
	return 0;
}

static void
conf_set_path(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev)
{
	conf_path(p, k->label, ev, conf_field(p, k), k->size);
}

/* [a-z_][a-z0-9_-]{0,31}: the portable user name set, as useradd wants. */
static int
conf_valid_user(const char *s)
{
	size_t i;

	if (!((s[0] >= 'a' && s[0] <= 'z') || s[0] == '_'))
		return 0;
	for (i = 1; s[i] != '\0'; i++) {
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') ||
			s[i] == '_' || s[i] == '-'))
			return 0;
	}
	return i <= CONF_NAME_MAX - 1;
}

static void
conf_set_user(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev)
{
	char *dst = conf_field(p, k);

	if (conf_scalar(p, k->label, ev, dst, k->size) == -1)
		return;
	p->name_mark = ev->start_mark;
	if (!conf_valid_user(dst))
		conf_error(p, &ev->start_mark, "%s: must be a user name matching "
		    "[a-z_][a-z0-9_-]{0,31}", k->label);
	else if (strcmp(dst, "root") == 0)
		conf_error(p, &ev->start_mark, "%s: must not be root", k->label);
}

static void
conf_set_frame(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev)
{
	uint64_t v;

	if (conf_int(p, k->label, ev, 65536, 268435456, 1, &v) == 0)
		p->c->ipc_max_frame = (size_t)v;
}

static void
conf_set_pool(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev)
{
	uint64_t v;

	if (conf_int(p, k->label, ev, 1, 64, 0, &v) == 0)
		p->c->db_pool = (unsigned)v;
}

/* database.url: the value may carry a password, so it is never quoted. */
static void
conf_set_url(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev)
{
	char *dst = p->c->db_url;

	if (conf_scalar(p, k->label, ev, dst, sizeof(p->c->db_url)) == -1)
		return;
	if (strncmp(dst, "postgresql://", 13) != 0 && strncmp(dst, "postgres://", 11) != 0)
		conf_error(p, &ev->start_mark,
		    "%s: must start with postgresql:// or postgres://", k->label);
}

/* Listen addresses */

/* Port: decimal 1..65535.  Returns NULL or the reason. */
static const char *
conf_port(const char *s, unsigned *port)
{
	uint64_t v;

	if (*s == '\0')
		return "missing port after ':'";
	if (conf_digits(s, strlen(s), 65535, &v) == -1 || v == 0)
		return "port must be a number from 1 to 65535";
	*port = (unsigned)v;
	return NULL;
}

/*
 * Split "a.b.c.d:port", "[v6]:port" or "localhost:port" into l->host and
 * l->port (s fits in l->host: it came through a buffer of the same size).
 * Returns NULL or the reason it is not an address.
 */
static const char *
conf_hostport(const char *s, struct conf_listen *l)
{
	unsigned char bin[sizeof(struct in6_addr)];
	const char *host = s, *colon;
	size_t hlen;

	if (s[0] == '[') {
		host = s + 1;
		if ((colon = strchr(host, ']')) == NULL)
			return "missing ']' after the IPv6 address";
		hlen = (size_t)(colon++ - host);
		if (*colon != ':')
			return "expected \"[address]:port\"";
	} else {
		if ((colon = strrchr(s, ':')) == NULL)
			return "expected \"host:port\"";
		hlen = (size_t)(colon - s);
		if (memchr(s, ':', hlen) != NULL)
			return "an IPv6 address must be in brackets, as in \"[::1]:8480\"";
	}
	memcpy(l->host, host, hlen);
	l->host[hlen] = '\0';
	if (s[0] == '[' && inet_pton(AF_INET6, l->host, bin) != 1)
		return "invalid IPv6 address";
	if (s[0] != '[' && strcmp(l->host, "localhost") != 0 &&
	    inet_pton(AF_INET, l->host, bin) != 1)
		return "host must be a dotted-quad IPv4 address, [IPv6 address] or localhost";
	return conf_port(colon + 1, &l->port);
}

/* The index-th entry of listen; entries past CONF_MAX_LISTEN are reported once. */
static void
conf_listen_item(struct conf_parse *p, size_t index, yaml_event_t *ev)
{
	struct config *c = p->c;
	struct conf_listen l;
	char label[CONF_LABEL_MAX];
	const char *why;
	size_t i;

	memset(&l, 0, sizeof(l)); /* copied whole into the config: no stack bytes */
	snprintf(label, sizeof(label), "listen[%zu]", index);
	if (ev->type == YAML_ALIAS_EVENT) /* reported already */
		return;
	if (index >= CONF_MAX_LISTEN) {
		if (index == CONF_MAX_LISTEN)
			conf_error(p, &ev->start_mark, "listen: at most %d addresses",
			    CONF_MAX_LISTEN);
		conf_skip(p, ev);
		return;
	}
	if (conf_scalar(p, label, ev, l.addr, sizeof(l.addr)) == -1)
		return;
	if ((why = conf_hostport(l.addr, &l)) != NULL) {
		conf_error(p, &ev->start_mark, "%s: %s", label, why);
		return;
	}
	for (i = 0; i < c->nlisten; i++) {
		if (c->listen[i].port == l.port && strcmp(c->listen[i].host, l.host) == 0) {
			conf_error(p, &ev->start_mark, "%s: duplicate address", label);
			return;
		}
	}
	c->listen[c->nlisten++] = l;
}

static void
conf_set_listen(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev)
{
	yaml_event_t item;
	size_t n;

	if (ev->type != YAML_SEQUENCE_START_EVENT) {
		conf_error(p, &ev->start_mark,
		    "%s: expected a sequence of \"host:port\" strings, found %s", k->label,
		    conf_found(ev));
		conf_skip(p, ev);
		return;
	}
	p->c->nlisten = 0;
	for (n = 0; conf_next(p, &item) == 0; n++) {
		if (item.type == YAML_SEQUENCE_END_EVENT) {
			yaml_event_delete(&item);
			if (n == 0)
				conf_error(p, &ev->start_mark, "%s: empty list", k->label);
			return;
		}
		conf_listen_item(p, n, &item);
		yaml_event_delete(&item);
	}
}

/* metrics_listen: one address as listen's entries, for GET /metrics only. */
static void
conf_set_metrics_listen(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev)
{
	struct conf_listen l;
	const char *why;

	memset(&l, 0, sizeof(l));
	p->metrics_mark = ev->start_mark;
	if (conf_scalar(p, k->label, ev, l.addr, sizeof(l.addr)) == -1)
		return;
	if ((why = conf_hostport(l.addr, &l)) != NULL) {
		conf_error(p, &ev->start_mark, "%s: %s", k->label, why);
		return;
	}
	p->c->metrics_listen = l;
}

/* Mappings */

static void conf_set_database(struct conf_parse *, const struct conf_key *, yaml_event_t *);
static void conf_set_sandbox(struct conf_parse *, const struct conf_key *, yaml_event_t *);
static void conf_set_engine(struct conf_parse *, const struct conf_key *, yaml_event_t *);
static void conf_set_providers(struct conf_parse *, const struct conf_key *, yaml_event_t *);
static void conf_set_agent(struct conf_parse *, const struct conf_key *, yaml_event_t *);
static void conf_set_egress(struct conf_parse *, const struct conf_key *, yaml_event_t *);
static void conf_set_git(struct conf_parse *, const struct conf_key *, yaml_event_t *);
static void conf_set_api(struct conf_parse *, const struct conf_key *, yaml_event_t *);
static void conf_set_public_url(struct conf_parse *, const struct conf_key *, yaml_event_t *);
static void conf_set_session_lifetime(struct conf_parse *, const struct conf_key *,
    yaml_event_t *);

#define CONF_FIELD_SIZE(field) sizeof(((struct config *)0)->field)
#define CONF_STRING(field, setter)                                                                 \
	{ #field, #field, setter, offsetof(struct config, field), CONF_FIELD_SIZE(field) }

static const struct conf_key conf_top_keys[] = {
    CONF_STRING(state_dir, conf_set_path),
    CONF_STRING(user, conf_set_user),
    CONF_STRING(db_user, conf_set_user),
    {"listen", "listen", conf_set_listen, 0, 0},
    {"metrics_listen", "metrics_listen", conf_set_metrics_listen, 0, 0},
    /* bind(2) needs the whole path in sun_path */
    {"control_socket", "control_socket", conf_set_path, offsetof(struct config, control_socket),
	CONF_SUN_PATH_MAX},
    CONF_STRING(master_key, conf_set_path),
    CONF_STRING(pidfile, conf_set_path),
    CONF_STRING(chroot, conf_set_path),
    CONF_STRING(postgres_bin, conf_set_path),
    {"database", "database", conf_set_database, 0, 0},
    {"ipc_max_frame", "ipc_max_frame", conf_set_frame, 0, 0},
    {"sandbox", "sandbox", conf_set_sandbox, 0, 0},
    {"engine", "engine", conf_set_engine, 0, 0},
    {"providers", "providers", conf_set_providers, 0, 0},
    {"agent", "agent", conf_set_agent, 0, 0},
    {"egress", "egress", conf_set_egress, 0, 0},
    {"git", "git", conf_set_git, 0, 0},
    {"api", "api", conf_set_api, 0, 0},
    CONF_STRING(public_url, conf_set_public_url),
    CONF_STRING(ui_dir, conf_set_path),
    {"session_lifetime", "session_lifetime", conf_set_session_lifetime,
	offsetof(struct config, session_lifetime), 0},
};

enum { CONF_DB_URL, CONF_DB_POOL };
static const struct conf_key conf_db_keys[] = {
    [CONF_DB_URL] = {"url", "database.url", conf_set_url, 0, 0},
    [CONF_DB_POOL] = {"pool", "database.pool", conf_set_pool, 0, 0},
};

#define CONF_NKEYS(a) (sizeof(a) / sizeof((a)[0]))

/* The range of a numeric key of a section: min, max, suffixes allowed. */
struct conf_range {
	uint64_t min, max;
	int suffixes;
};

/* Store the uint64_t value of ev at k->off when it is within r (else the
 * error is reported and the default stays). */
static void
conf_set_ranged(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev,
    const struct conf_range *r)
{
	uint64_t v;

	if (conf_int(p, k->label, ev, r->min, r->max, r->suffixes, &v) == 0)
		memcpy((char *)p->c + k->off, &v, sizeof(v));
}

/*
 * Why u is not an origin: "http://" or "https://", a host of letters,
 * digits, dots and dashes (or a bracketed IPv6 literal), an optional port
 * 1..65535, nothing after but one optional "/".  NULL when it is one.
 */
static const char *
conf_origin_why(const char *u)
{
	const char *h, *e;
	unsigned port;
	char num[8];

	if (strncmp(u, "https://", 8) == 0)
		h = u + 8;
	else if (strncmp(u, "http://", 7) == 0)
		h = u + 7;
	else
		return "must start with http:// or https://";
	if (*h == '[')
		e = h + 1 + strspn(h + 1, "0123456789abcdefABCDEF:.") + 1;
	else
		e = h + strspn(h, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-");
	if (e == h || (*h == '[' && e[-1] != ']') || e - h > 253)
		return "must name a host";
	if (*e == ':') {
		size_t n = strspn(e + 1, "0123456789");

		if (n == 0 || n >= sizeof(num))
			return "has a bad port";
		memcpy(num, e + 1, n);
		num[n] = '\0';
		if (conf_port(num, &port) != NULL)
			return "has a bad port";
		e += 1 + n;
	}
	if (*e == '/')
		e++;
	if (*e != '\0')
		return "must be an origin: no path, query or user name";
	return NULL;
}

/* public_url: kept without its trailing "/" and in lower case, as browsers
 * send Origin. */
static void
conf_set_public_url(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev)
{
	char *dst = p->c->public_url, *c;
	const char *why;
	size_t n;

	if (conf_scalar(p, k->label, ev, dst, sizeof(p->c->public_url)) == -1)
		return;
	if ((why = conf_origin_why(dst)) != NULL) {
		conf_error(p, &ev->start_mark, "%s: %s", k->label, why);
		dst[0] = '\0';
		return;
	}
	if ((n = strlen(dst)) > 0 && dst[n - 1] == '/')
		dst[n - 1] = '\0';
	for (c = dst; *c != '\0'; c++)
		*c = (char)tolower((unsigned char)*c);
}

static void
conf_set_session_lifetime(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev)
{
	static const struct conf_range r = {60, 2592000, 0};

	conf_set_ranged(p, k, ev, &r);
}

/*
 * sandbox.*: every value is a number in a range, none may be 0 or
 * "unlimited" (a cap that is not a cap is a configuration error).  The uid
 * and gid must leave room for nothing else: 1..4294967294, and the daemon
 * checks at start that no account owns them.
 */
static void conf_set_sbx_num(struct conf_parse *, const struct conf_key *, yaml_event_t *);
#define CONF_SBX(field, lab)                                                                       \
	{ #field, "sandbox." lab, conf_set_sbx_num, offsetof(struct config, sandbox.field), 0 }
static const struct conf_key conf_sbx_keys[] = {
    CONF_SBX(uid, "uid"),
    CONF_SBX(gid, "gid"),
    CONF_SBX(max, "max"),
    CONF_SBX(memory, "memory"),
    CONF_SBX(pids, "pids"),
    CONF_SBX(cpu, "cpu"),
    CONF_SBX(tmp_size, "tmp_size"),
    CONF_SBX(file_size, "file_size"),
    CONF_SBX(open_files, "open_files"),
    CONF_SBX(exec_timeout, "exec_timeout"),
    CONF_SBX(output_max, "output_max"),
    CONF_SBX(file_max, "file_max"),
    CONF_SBX(artifact_max, "artifact_max"),
    CONF_SBX(disk, "disk"),
};
/* Ranges, in the order of conf_sbx_keys. */
static const struct conf_range conf_sbx_ranges[] = {
    {1, 4294967294ull, 0},                      /* uid */
    {1, 4294967294ull, 0},                      /* gid */
    {1, 1024, 0},                               /* max */
    {16ull << 20, 1ull << 40, 1},               /* memory: 16M..1T */
    {16, 65536, 0},                             /* pids */
    {1, 100000, 0},                             /* cpu: percent of one CPU */
    {1ull << 20, 64ull << 30, 1},               /* tmp_size: 1M..64G */
    {1ull << 20, 1ull << 40, 1},                /* file_size: 1M..1T */
    {64, 65536, 0},                             /* open_files */
    {1, 86400, 0},                              /* exec_timeout: seconds */
    {4096, 256ull << 20, 1},                    /* output_max: 4K..256M */
    {4096, 64ull << 20, 1},                     /* file_max: 4K..64M */
    {1, 1ull << 30, 1},                         /* artifact_max: 1..1G */
    {16ull << 20, 16ull << 40, 1},              /* disk: 16M..16T */
};
_Static_assert(CONF_NKEYS(conf_sbx_keys) == CONF_NKEYS(conf_sbx_ranges), "one range per key");

static void
conf_set_sbx_num(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev)
{
	/* sandbox.disk: none is the one word: workspaces on the state
	 * directory's filesystem, said in so many words, not a 0 */
	if (k->off == offsetof(struct config, sandbox.disk) && ev->type == YAML_SCALAR_EVENT &&
	    ev->data.scalar.length == 4 && memcmp(ev->data.scalar.value, "none", 4) == 0) {
		p->c->sandbox.disk = 0;
		return;
	}
	conf_set_ranged(p, k, ev, &conf_sbx_ranges[k - conf_sbx_keys]);
}

/*
 * engine.*: numbers in a range, like sandbox.*.  Durations are whole
 * seconds, as sandbox.exec_timeout takes them (no suffixes).
 */
static void conf_set_eng_num(struct conf_parse *, const struct conf_key *, yaml_event_t *);
#define CONF_ENG(field)                                                                            \
	{ #field, "engine." #field, conf_set_eng_num, offsetof(struct config, engine.field), 0 }
static void conf_set_usd(struct conf_parse *, const struct conf_key *, yaml_event_t *);
static const struct conf_key conf_eng_keys[] = {
    CONF_ENG(concurrency),
    CONF_ENG(lease),
    CONF_ENG(sweep),
    {"step_budget", "engine.step_budget", conf_set_usd, offsetof(struct config, engine.step_budget),
     0},
    CONF_ENG(host_grace),
};
/* Ranges, in the order of conf_eng_keys. */
static const struct conf_range conf_eng_ranges[] = {
    {0, 1024, 0}, /* concurrency: runs at once (0: none, an API-only host) */
    {2, 3600, 0}, /* lease: seconds */
    {1, 3600, 0}, /* sweep: seconds */
    {0, 0, 0},    /* step_budget: an amount (conf_set_usd) */
    {60, 31536000, 0}, /* host_grace: seconds */
};
_Static_assert(CONF_NKEYS(conf_eng_keys) == CONF_NKEYS(conf_eng_ranges), "one range per key");

static void
conf_set_eng_num(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev)
{
	conf_set_ranged(p, k, ev, &conf_eng_ranges[k - conf_eng_keys]);
}

/*
 * An amount of US dollars as templates write one (usd_parse), unquoted, into
 * *out in micro-dollars; 0 only when zero_ok (a price may be 0, a budget may
 * not).  Returns 0, or -1 after reporting (the node consumed).
 */
static int
conf_usd(struct conf_parse *p, const char *label, yaml_event_t *ev, int zero_ok, uint64_t *out)
{
	long long micros;

	if (ev->type != YAML_SCALAR_EVENT || conf_is_null(ev) ||
	    ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE ||
	    usd_parse((const char *)ev->data.scalar.value, ev->data.scalar.length, &micros) == -1 ||
	    (micros == 0 && !zero_ok)) {
		conf_error(p, &ev->start_mark,
		    "%s: expected an amount of dollars from %s to %d, with at most 6 decimals",
		    label, zero_ok ? "0" : "0.000001", USD_MAX);
		conf_skip(p, ev);
		return -1;
	}
	*out = (uint64_t)micros;
	return 0;
}

/* engine.step_budget: more than 0, in micro-dollars. */
static void
conf_set_usd(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev)
{
	uint64_t v;

	if (conf_usd(p, k->label, ev, 0, &v) == 0)
		memcpy(conf_field(p, k), &v, sizeof(v));
}

_Static_assert(CONF_NKEYS(conf_top_keys) <= 32, "seen is a 32-bit mask");
_Static_assert(CONF_NKEYS(conf_sbx_keys) <= 32, "seen is a 32-bit mask");
_Static_assert(CONF_NKEYS(conf_eng_keys) <= 32, "seen is a 32-bit mask");

/* Index of the key named by scalar ev in keys, or -1. */
static int
conf_lookup(const struct conf_key *keys, size_t nkeys, const yaml_event_t *ev)
{
	size_t i;

	for (i = 0; i < nkeys; i++) {
		if (strlen(keys[i].name) == ev->data.scalar.length &&
		    memcmp(keys[i].name, ev->data.scalar.value, ev->data.scalar.length) == 0)
			return (int)i;
	}
	return -1;
}

/* An unknown key is named only when it looks like one: a mistyped line could
 * hold a secret in its key. */
static void
conf_unknown(struct conf_parse *p, const char *prefix, const yaml_event_t *kev)
{
	const unsigned char *v = kev->data.scalar.value;
	size_t n = kev->data.scalar.length, i;
	int plain = n > 0 && n <= CONF_KEY_SHOW_MAX;

	for (i = 0; plain && i < n; i++) {
		if (!((v[i] >= 'a' && v[i] <= 'z') || (v[i] >= 'A' && v[i] <= 'Z') ||
			(v[i] >= '0' && v[i] <= '9') || v[i] == '_' || v[i] == '-' || v[i] == '.'))
			plain = 0;
	}
	if (plain)
		conf_error(p, &kev->start_mark, "unknown key '%s%.*s'", prefix, (int)n,
		    (const char *)v);
	else
		conf_error(p, &kev->start_mark, "unknown key%s%.*s", *prefix ? " in " : "",
		    *prefix ? (int)strlen(prefix) - 1 : 0, prefix); /* without the '.' */
}

/* Check the key kev of a mapping.  Returns its index in keys, or -1 when the
 * value is to be skipped (not a scalar, unknown, or a duplicate: reported). */
static int
conf_key(struct conf_parse *p, const struct conf_key *keys, size_t nkeys, const char *prefix,
    uint32_t *seen, yaml_event_t *kev)
{
	int i;

	if (kev->type == YAML_ALIAS_EVENT) /* reported already */
		return -1;
	if (kev->type != YAML_SCALAR_EVENT) {
		conf_error(p, &kev->start_mark, "a key must be a scalar, not %s", conf_kind(kev));
		conf_skip(p, kev);
		return -1;
	}
	if ((i = conf_lookup(keys, nkeys, kev)) == -1) {
		conf_unknown(p, prefix, kev);
		return -1;
	}
	if (*seen & (UINT32_C(1) << i)) {
		conf_error(p, &kev->start_mark, "duplicate key '%s%s'", prefix, keys[i].name);
		return -1;
	}
	*seen |= UINT32_C(1) << i;
	return i;
}

/*
 * Hand the value ev to the setter of k.  A key of a list entry has no fixed
 * label, since its label holds the entry's index ("providers[1].kind"): it
 * gets prefix and its name, built here for the setter's one call.
 */
static void
conf_set(struct conf_parse *p, const struct conf_key *k, const char *prefix, yaml_event_t *ev)
{
	char label[CONF_LABEL_MAX];
	struct conf_key entry;

	if (k->label != NULL) {
		k->set(p, k, ev);
		return;
	}
	snprintf(label, sizeof(label), "%s%s", prefix, k->name);
	entry = *k;
	entry.label = label;
	entry.set(p, &entry, ev);
}

/*
 * Walk the mapping whose start event was just read, handing each known value
 * to its setter.  prefix names the mapping in messages ("" or "database.");
 * *seen gets bit i for each keys[i] present.  Returns the number of entries,
 * known or not.
 */
static size_t
conf_mapping(struct conf_parse *p, const struct conf_key *keys, size_t nkeys, const char *prefix,
    uint32_t *seen)
{
	yaml_event_t kev, vev;
	size_t n = 0;
	int i;

	while (conf_next(p, &kev) == 0 && kev.type != YAML_MAPPING_END_EVENT) {
		n++;
		i = conf_key(p, keys, nkeys, prefix, seen, &kev);
		yaml_event_delete(&kev);
		if (conf_next(p, &vev) == -1)
			return n;
		if (i >= 0 && vev.type != YAML_ALIAS_EVENT) /* an alias is reported already */
			conf_set(p, &keys[i], prefix, &vev);
		else
			conf_skip(p, &vev);
		yaml_event_delete(&vev);
	}
	yaml_event_delete(&kev);
	return n;
}

/* database: embedded | { url: ..., pool: N }; a mapping without url is the
 * embedded server with that pool size. */
static void
conf_set_database(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev)
{
	struct config *c = p->c;
	uint32_t seen = 0;

	if (ev->type == YAML_SCALAR_EVENT) {
		if (conf_is_null(ev))
			conf_error(p, &ev->start_mark, "%s: empty value", k->label);
		else if (ev->data.scalar.length != 8 ||
		    memcmp(ev->data.scalar.value, "embedded", 8) != 0)
			conf_error(p, &ev->start_mark,
			    "%s: must be \"embedded\" or a mapping with url and/or pool", k->label);
		return;
	}
	if (ev->type != YAML_MAPPING_START_EVENT) {
		conf_error(p, &ev->start_mark, "%s: expected \"embedded\" or a mapping, found %s",
		    k->label, conf_kind(ev));
		conf_skip(p, ev);
		return;
	}
	if (conf_mapping(p, conf_db_keys, CONF_NKEYS(conf_db_keys), "database.", &seen) == 0 &&
	    !p->ye.stop)
		conf_error(p, &ev->start_mark, "%s: empty mapping (write \"embedded\")", k->label);
	c->db_embedded = (seen & (UINT32_C(1) << CONF_DB_URL)) == 0;
}

/* Returns 0 when ev opens a mapping, else -1 after reporting it (as label)
 * and consuming the node. */
static int
conf_want_mapping(struct conf_parse *p, const char *label, yaml_event_t *ev)
{
	if (ev->type == YAML_MAPPING_START_EVENT)
		return 0;
	conf_error(p, &ev->start_mark, "%s: expected a mapping, found %s", label, conf_found(ev));
	conf_skip(p, ev);
	return -1;
}

/* A section that must be a mapping of keys (prefix "sandbox.", ...); an
 * empty one is allowed and keeps every default. */
static void
conf_section(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev,
    const struct conf_key *keys, size_t nkeys, const char *prefix)
{
	uint32_t seen = 0;

	if (conf_want_mapping(p, k->label, ev) == 0)
		conf_mapping(p, keys, nkeys, prefix, &seen);
}

static void
conf_set_sandbox(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev)
{
	conf_section(p, k, ev, conf_sbx_keys, CONF_NKEYS(conf_sbx_keys), "sandbox.");
}

static void
conf_set_engine(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev)
{
	conf_section(p, k, ev, conf_eng_keys, CONF_NKEYS(conf_eng_keys), "engine.");
}

/* api: the per-user request limit */
static void conf_set_api_num(struct conf_parse *, const struct conf_key *, yaml_event_t *);
#define CONF_API(field)                                                                            \
	{ #field, "api." #field, conf_set_api_num, offsetof(struct config, api.field), 0 }
static const struct conf_key conf_api_keys[] = {
    CONF_API(user_rate),
    CONF_API(user_burst),
    CONF_API(sse_queued_max),
};
/* Ranges, in the order of conf_api_keys. */
static const struct conf_range conf_api_ranges[] = {
    {0, 100000, 0},  /* user_rate: requests per second (0: no limit) */
    {1, 1000000, 0}, /* user_burst: requests */
    {1024 * 1024, 16ull << 30, 1}, /* sse_queued_max: bytes */
};
_Static_assert(CONF_NKEYS(conf_api_keys) == CONF_NKEYS(conf_api_ranges), "one range per key");

static void
conf_set_api_num(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev)
{
	conf_set_ranged(p, k, ev, &conf_api_ranges[k - conf_api_keys]);
}

static void
conf_set_api(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev)
{
	conf_section(p, k, ev, conf_api_keys, CONF_NKEYS(conf_api_keys), "api.");
}

/* Providers and the agent */

#define CONF_PROVIDER_NAME_RE "[a-z0-9][a-z0-9_-]{0,31}"
#define CONF_MODEL_RE "[A-Za-z0-9][A-Za-z0-9._:/@-]{0,127}"
#define CONF_PROVIDER_TIMEOUT 300 /* seconds; a long answer streams for minutes */
#define CONF_PROVIDER_RETRIES 3

/*
 * true or false, unquoted, into *out (1 or 0).  YAML 1.1's yes, no, on and
 * off are refused, as the template compiler refuses them, so that a word
 * means the same in every file the daemon reads.  Returns 0, or -1 after
 * reporting.
 */
static int
conf_bool(struct conf_parse *p, const char *label, yaml_event_t *ev, int *out)
{
	if (ev->type == YAML_SCALAR_EVENT && conf_is_null(ev)) {
		conf_error(p, &ev->start_mark, "%s: empty value", label);
		return -1;
	}
	if (ev->type != YAML_SCALAR_EVENT || ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) {
		conf_error(p, &ev->start_mark, "%s: expected true or false, found %s", label,
		    ev->type == YAML_SCALAR_EVENT ? "a quoted string" : conf_kind(ev));
		conf_skip(p, ev);
		return -1;
	}
	if (ev->data.scalar.length == 4 && memcmp(ev->data.scalar.value, "true", 4) == 0) {
		*out = 1;
	} else if (ev->data.scalar.length == 5 && memcmp(ev->data.scalar.value, "false", 5) == 0) {
		*out = 0;
	} else {
		conf_error(p, &ev->start_mark, "%s: expected true or false", label);
		return -1;
	}
	return 0;
}

/* A provider name into dst (CONF_PROVIDER_NAME_MAX bytes), "" when invalid.
 * Returns 0, or -1 after reporting. */
static int
conf_provider_name(struct conf_parse *p, const char *label, yaml_event_t *ev, char *dst)
{
	if (conf_scalar(p, label, ev, dst, CONF_PROVIDER_NAME_MAX) == -1)
		return -1;
	if (!ipc_is_provider_name(dst, strlen(dst))) {
		conf_error(p, &ev->start_mark, "%s: must be a name matching " CONF_PROVIDER_NAME_RE,
		    label);
		memset(dst, 0, CONF_PROVIDER_NAME_MAX);
		return -1;
	}
	return 0;
}

/* A model name into dst (CONF_MODEL_MAX bytes), "" when invalid.  Returns 0,
 * or -1 after reporting. */
static int
conf_model_name(struct conf_parse *p, const char *label, yaml_event_t *ev, char *dst)
{
	if (conf_scalar(p, label, ev, dst, CONF_MODEL_MAX) == -1)
		return -1;
	if (!ipc_is_model_name(dst, strlen(dst))) {
		conf_error(p, &ev->start_mark, "%s: must be a model name matching " CONF_MODEL_RE,
		    label);
		memset(dst, 0, CONF_MODEL_MAX);
		return -1;
	}
	return 0;
}

/*
 * Why url cannot be a provider's base URL, or NULL.  The proxy appends API
 * paths to it, so a query or fragment would land in the wrong place; the
 * key belongs in key_file, never in user information of a URL that may be
 * logged; and the request line must not be split by a space.
 */
static const char *
conf_base_url_why(const char *url)
{
	const char *host, *end;
	size_t i;

	if (strncmp(url, "https://", 8) == 0)
		host = url + 8;
	else if (strncmp(url, "http://", 7) == 0)
		host = url + 7;
	else
		return "must start with http:// or https://";
	for (i = 0; url[i] != '\0'; i++) {
		if ((unsigned char)url[i] <= ' ' || (unsigned char)url[i] >= 0x7f)
			return "must be printable ASCII without spaces";
	}
	if (strpbrk(url, "?#") != NULL)
		return "must not hold a query or fragment ('?' or '#')";
	end = host + strcspn(host, "/");
	if (memchr(host, '@', (size_t)(end - host)) != NULL)
		return "must not hold user information ('@' before the path)";
	if (end == host || host[0] == ':')
		return "must have a host after the scheme";
	return NULL;
}

/* Setters of providers[i].*: each fills p->prov. */

static void
conf_set_prov_name(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev)
{
	struct conf_provider *pr = p->prov;
	size_t i;

	if (conf_provider_name(p, k->label, ev, pr->name) == -1)
		return;
	for (i = 0; &p->c->providers[i] < pr; i++) {
		if (strcmp(p->c->providers[i].name, pr->name) == 0) {
			conf_error(p, &ev->start_mark,
			    "%s: duplicate provider name (as providers[%zu])", k->label, i);
			return;
		}
	}
}

/* A scalar that must be one of names (n of them, at least 2): its index,
 * or -1 once the problem is reported ("must be a, b or c"). */
static int
conf_choice(struct conf_parse *p, const char *label, yaml_event_t *ev,
    const char *const *names, size_t n)
{
	char list[256];
	size_t i, len = 0;

	if (ev->type != YAML_SCALAR_EVENT || conf_is_null(ev)) {
		/* only reports (and consumes) here: no value is copied */
		conf_scalar(p, label, ev, NULL, 0);
		return -1;
	}
	for (i = 0; i < n; i++)
		if (ev->data.scalar.length == strlen(names[i]) &&
		    memcmp(ev->data.scalar.value, names[i], ev->data.scalar.length) == 0)
			return (int)i;
	list[0] = '\0';
	for (i = 0; i < n && len < sizeof(list); i++)
		len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s",
		    i == 0 ? "" : i + 1 == n ? " or " : ", ", names[i]);
	conf_error(p, &ev->start_mark, "%s: must be %s", label, list);
	return -1;
}

static void
conf_set_prov_kind(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev)
{
	static const char *const kinds[] = {
	    [CONF_PROVIDER_ANTHROPIC] = "anthropic",
	    [CONF_PROVIDER_OPENAI] = "openai",
	};
	int i = conf_choice(p, k->label, ev, kinds, sizeof(kinds) / sizeof(kinds[0]));

	if (i >= 0)
		p->prov->kind = i;
}

/* base_url: never echoed, like database.url (it could carry a token). */
static void
conf_set_prov_url(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev)
{
	char *url = p->prov->base_url;
	const char *why;
	size_t n;

	if (conf_scalar(p, k->label, ev, url, sizeof(p->prov->base_url)) == -1)
		return;
	if ((why = conf_base_url_why(url)) != NULL) {
		conf_error(p, &ev->start_mark, "%s: %s", k->label, why);
		return;
	}
	/* The proxy joins "/v1/..." to it: one slash, whatever was written. */
	for (n = strlen(url); url[n - 1] == '/'; n--)
		url[n - 1] = '\0';
}

static void
conf_set_prov_key(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev)
{
	conf_path(p, k->label, ev, p->prov->key_file, sizeof(p->prov->key_file));
}

static void
conf_set_prov_timeout(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev)
{
	conf_int(p, k->label, ev, 1, 3600, 0, &p->prov->timeout);
}

static void
conf_set_prov_retries(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev)
{
	conf_int(p, k->label, ev, 0, 10, 0, &p->prov->retries);
}

static void
conf_set_prov_stream(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev)
{
	conf_bool(p, k->label, ev, &p->prov->stream);
}

/* max_tokens_field: the name the output limit goes by in a request;
 * whether the kind allows it is checked with the whole entry read. */
static void
conf_set_prov_field(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev)
{
	static const char *const fields[] = {"max_tokens", "max_completion_tokens"};
	int i;

	p->field_mark = ev->start_mark;
	if ((i = conf_choice(p, k->label, ev, fields, sizeof(fields) / sizeof(fields[0]))) >= 0)
		p->prov->max_completion = i;
}

/* Setters of providers[i].models[j].*: each fills p->model. */

static void
conf_set_model_name(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev)
{
	struct conf_model *m = p->model;
	size_t i;

	if (conf_model_name(p, k->label, ev, m->name) == -1)
		return;
	for (i = 0; &p->prov->models[i] < m; i++) {
		if (strcmp(p->prov->models[i].name, m->name) == 0) {
			conf_error(p, &ev->start_mark, "%s: duplicate model name (as models[%zu])",
			    k->label, i);
			return;
		}
	}
}

/* A price, US dollars per million tokens: 0 is allowed (a local model). */
static void
conf_set_model_price(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev)
{
	uint64_t v;

	if (conf_usd(p, k->label, ev, 1, &v) == 0)
		memcpy((char *)p->model + k->off, &v, sizeof(v));
}

enum { CONF_MODEL_NAME, CONF_MODEL_INPUT, CONF_MODEL_OUTPUT, CONF_MODEL_CREAD, CONF_MODEL_CWRITE };
#define CONF_PRICE(field)                                                                          \
	{ #field, NULL, conf_set_model_price, offsetof(struct conf_model, field), 0 }
static const struct conf_key conf_model_keys[] = {
    [CONF_MODEL_NAME] = {"name", NULL, conf_set_model_name, 0, 0},
    [CONF_MODEL_INPUT] = CONF_PRICE(input),
    [CONF_MODEL_OUTPUT] = CONF_PRICE(output),
    [CONF_MODEL_CREAD] = CONF_PRICE(cache_read),
    [CONF_MODEL_CWRITE] = CONF_PRICE(cache_write),
};
#define CONF_MODEL_REQUIRED                                                                        \
	((UINT32_C(1) << CONF_MODEL_NAME) | (UINT32_C(1) << CONF_MODEL_INPUT) |                    \
	    (UINT32_C(1) << CONF_MODEL_OUTPUT))

static void conf_set_prov_models(struct conf_parse *, const struct conf_key *, yaml_event_t *);
enum {
	CONF_PROV_NAME,
	CONF_PROV_KIND,
	CONF_PROV_URL,
	CONF_PROV_KEY,
	CONF_PROV_TIMEOUT,
	CONF_PROV_RETRIES,
	CONF_PROV_STREAM,
	CONF_PROV_FIELD,
	CONF_PROV_MODELS,
};
static const struct conf_key conf_prov_keys[] = {
    [CONF_PROV_NAME] = {"name", NULL, conf_set_prov_name, 0, 0},
    [CONF_PROV_KIND] = {"kind", NULL, conf_set_prov_kind, 0, 0},
    [CONF_PROV_URL] = {"base_url", NULL, conf_set_prov_url, 0, 0},
    [CONF_PROV_KEY] = {"key_file", NULL, conf_set_prov_key, 0, 0},
    [CONF_PROV_TIMEOUT] = {"timeout", NULL, conf_set_prov_timeout, 0, 0},
    [CONF_PROV_RETRIES] = {"retries", NULL, conf_set_prov_retries, 0, 0},
    [CONF_PROV_STREAM] = {"stream", NULL, conf_set_prov_stream, 0, 0},
    [CONF_PROV_FIELD] = {"max_tokens_field", NULL, conf_set_prov_field, 0, 0},
    [CONF_PROV_MODELS] = {"models", NULL, conf_set_prov_models, 0, 0},
};
#define CONF_PROV_REQUIRED                                                                         \
	((UINT32_C(1) << CONF_PROV_NAME) | (UINT32_C(1) << CONF_PROV_KIND) |                       \
	    (UINT32_C(1) << CONF_PROV_URL) | (UINT32_C(1) << CONF_PROV_MODELS))

_Static_assert(CONF_NKEYS(conf_prov_keys) <= 32, "seen is a 32-bit mask");
_Static_assert(CONF_NKEYS(conf_model_keys) <= 32, "seen is a 32-bit mask");

/* Report each of the required keys that the mapping at m (label) lacks,
 * unless a syntax error cut the mapping short. */
static void
conf_require(struct conf_parse *p, const yaml_mark_t *m, const char *label,
    const struct conf_key *keys, size_t nkeys, uint32_t missing)
{
	size_t i;

	for (i = 0; i < nkeys && !p->ye.stop; i++) {
		if (missing & (UINT32_C(1) << i))
			conf_error(p, m, "%s: missing required key '%s'", label, keys[i].name);
	}
}

typedef void conf_entry_fn(struct conf_parse *, size_t, yaml_event_t *);

/*
 * A list of mappings (label names it) with 1 to max entries, each handed to
 * entry with its index.  Not a sequence, an empty one, and the first entry
 * past max (the rest are skipped: what names them in that message) are
 * reported.
 */
static void
conf_list(struct conf_parse *p, const char *label, yaml_event_t *ev, size_t max,
    const char *what, conf_entry_fn *entry)
{
	yaml_event_t item;
	size_t n;

	if (ev->type != YAML_SEQUENCE_START_EVENT) {
		conf_error(p, &ev->start_mark, "%s: expected a sequence of mappings, found %s",
		    label, conf_found(ev));
		conf_skip(p, ev);
		return;
	}
	for (n = 0; conf_next(p, &item) == 0; n++) {
		if (item.type == YAML_SEQUENCE_END_EVENT) {
			yaml_event_delete(&item);
			if (n == 0)
				conf_error(p, &ev->start_mark, "%s: empty list", label);
			return;
		}
		if (n == max)
			conf_error(p, &item.start_mark, "%s: at most %zu %s", label, max, what);
		if (n >= max)
			conf_skip(p, &item);
		else if (item.type != YAML_ALIAS_EVENT) /* reported already */
			entry(p, n, &item);
		yaml_event_delete(&item);
	}
}

/* models[index] of p->prov. */
static void
conf_model_entry(struct conf_parse *p, size_t index, yaml_event_t *ev)
{
	size_t pi = (size_t)(p->prov - p->c->providers);
	char label[CONF_LABEL_MAX], prefix[CONF_LABEL_MAX];
	uint32_t seen = 0;

	snprintf(label, sizeof(label), "providers[%zu].models[%zu]", pi, index);
	snprintf(prefix, sizeof(prefix), "providers[%zu].models[%zu].", pi, index);
	if (conf_want_mapping(p, label, ev) == -1)
		return;
	p->model = &p->prov->models[index];
	p->prov->nmodels = index + 1;
	conf_mapping(p, conf_model_keys, CONF_NKEYS(conf_model_keys), prefix, &seen);
	p->model = NULL;
	conf_require(p, &ev->start_mark, label, conf_model_keys, CONF_NKEYS(conf_model_keys),
	    CONF_MODEL_REQUIRED & ~seen);
}

static void
conf_set_prov_models(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev)
{
	conf_list(p, k->label, ev, CONF_MAX_MODELS, "models", conf_model_entry);
}

/* providers[index], over its defaults. */
static void
conf_provider_entry(struct conf_parse *p, size_t index, yaml_event_t *ev)
{
	char label[CONF_LABEL_MAX], prefix[CONF_LABEL_MAX];
	uint32_t seen = 0;
	unsigned nerr;

	snprintf(label, sizeof(label), "providers[%zu]", index);
	snprintf(prefix, sizeof(prefix), "providers[%zu].", index);
	if (conf_want_mapping(p, label, ev) == -1)
		return;
	p->prov = &p->c->providers[index];
	p->prov->timeout = CONF_PROVIDER_TIMEOUT;
	p->prov->retries = CONF_PROVIDER_RETRIES;
	p->prov->stream = 1;
	p->c->nproviders = index + 1;
	nerr = p->nerr;
	conf_mapping(p, conf_prov_keys, CONF_NKEYS(conf_prov_keys), prefix, &seen);
	/* (a kind missing or wrong was reported already) */
	if (p->nerr == nerr && p->prov->max_completion && p->prov->kind != CONF_PROVIDER_OPENAI)
		conf_error(p, &p->field_mark, "%smax_tokens_field: max_completion_tokens is for "
		    "kind openai only", prefix);
	p->prov = NULL;
	conf_require(p, &ev->start_mark, label, conf_prov_keys, CONF_NKEYS(conf_prov_keys),
	    CONF_PROV_REQUIRED & ~seen);
}

/* An error inside providers or agent leaves names half set: the agent
 * cross-check would only add confusing follow-up errors, so it is skipped. */
static void
conf_set_providers(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev)
{
	unsigned nerr = p->nerr;

	conf_list(p, k->label, ev, CONF_MAX_PROVIDERS, "providers", conf_provider_entry);
	if (p->nerr != nerr)
		p->agent_unchecked = 1;
}

/* agent.*: a provider and model, checked against providers once the whole
 * file is read (conf_check_agent), and two numbers. */
static void
conf_set_agent_provider(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev)
{
	p->agent_provider_mark = ev->start_mark;
	conf_provider_name(p, k->label, ev, p->c->agent.provider);
}

static void
conf_set_agent_model(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev)
{
	p->agent_model_mark = ev->start_mark;
	conf_model_name(p, k->label, ev, p->c->agent.model);
}

static void conf_set_agent_num(struct conf_parse *, const struct conf_key *, yaml_event_t *);
#define CONF_AGENT(field)                                                                          \
	{ #field, "agent." #field, conf_set_agent_num, offsetof(struct config, agent.field), 0 }
static const struct conf_key conf_agent_keys[] = {
    {"provider", "agent.provider", conf_set_agent_provider, 0, 0},
    {"model", "agent.model", conf_set_agent_model, 0, 0},
    CONF_AGENT(max_tokens),
    CONF_AGENT(tool_output_max),
    CONF_AGENT(mcp_tools_max),
    CONF_AGENT(mcp_tool_bytes_max),
};
/* Ranges, in the order of conf_agent_keys. */
static const struct conf_range conf_agent_ranges[] = {
    {0, 0, 0},                /* provider: a name */
    {0, 0, 0},                /* model: a name */
    {1, 1000000, 0},          /* max_tokens: a count, not bytes: no suffix */
    {1024, 1024 * 1024, 1},   /* tool_output_max: 1K..1M */
    {0, 1024, 0},             /* mcp_tools_max: a count */
    {1024, 16 * 1024 * 1024, 1}, /* mcp_tool_bytes_max: 1K..16M */
};
_Static_assert(CONF_NKEYS(conf_agent_keys) == CONF_NKEYS(conf_agent_ranges), "one range per key");

static void
conf_set_agent_num(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev)
{
	conf_set_ranged(p, k, ev, &conf_agent_ranges[k - conf_agent_keys]);
}

static void
conf_set_agent(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev)
{
	unsigned nerr = p->nerr;

	p->agent_mark = ev->start_mark;
	conf_section(p, k, ev, conf_agent_keys, CONF_NKEYS(conf_agent_keys), "agent.");
	if (p->nerr != nerr)
		p->agent_unchecked = 1;
}

/* The index of the provider named name in c, or -1. */
static int
conf_find_provider(const struct config *c, const char *name)
{
	size_t i;

	for (i = 0; i < c->nproviders; i++) {
		if (strcmp(c->providers[i].name, name) == 0)
			return (int)i;
	}
	return -1;
}

/* Whether pr allows model. */
static int
conf_has_model(const struct conf_provider *pr, const char *model)
{
	size_t i;

	for (i = 0; i < pr->nmodels; i++) {
		if (strcmp(pr->models[i].name, model) == 0)
			return 1;
	}
	return 0;
}

/* An agent needs both a provider and one of its models, or neither: a
 * half-set agent would only fail at the first agent step of some run. */
static void
conf_check_agent(struct conf_parse *p)
{
	const struct conf_agent *a = &p->c->agent;
	int i;

	if (p->agent_unchecked)
		return;
	if (a->provider[0] == '\0') {
		if (a->model[0] != '\0')
			conf_error(p, &p->agent_model_mark, "agent.model: needs agent.provider");
		return;
	}
	if ((i = conf_find_provider(p->c, a->provider)) == -1)
		conf_error(p, &p->agent_provider_mark,
		    "agent.provider: names no provider in providers");
	else if (a->model[0] == '\0')
		conf_error(p, &p->agent_mark, "agent.model: required with agent.provider");
	else if (!conf_has_model(&p->c->providers[i], a->model))
		conf_error(p, &p->agent_model_mark,
		    "agent.model: not one of the models of providers[%d]", i);
}

/* git */

/* git.author: "Name <address>", as git writes an identity: a name of
 * printable ASCII without '<' or '>', and an address with an '@' and no
 * space, '<' or '>'. */
static void
conf_set_git_author(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev)
{
	char v[CONF_AUTHOR_NAME_MAX + CONF_AUTHOR_EMAIL_MAX + 4], *lt, *gt, *end;
	size_t i, nlen;

	if (conf_scalar(p, k->label, ev, v, sizeof(v)) == -1)
		return;
	lt = strchr(v, '<');
	gt = strchr(v, '>');
	end = lt != NULL ? lt : v;
	while (end > v && end[-1] == ' ')
		end--;
	nlen = (size_t)(end - v);
	for (i = 0; v[i] != '\0'; i++)
		if ((unsigned char)v[i] < 0x20 || (unsigned char)v[i] >= 0x7f)
			break;
	if (v[i] != '\0' || lt == NULL || gt == NULL || gt[1] != '\0' || gt < lt ||
	    strchr(lt + 1, '<') != NULL || nlen == 0 || nlen >= CONF_AUTHOR_NAME_MAX ||
	    memchr(v, '>', nlen) != NULL || (size_t)(gt - lt - 1) >= CONF_AUTHOR_EMAIL_MAX ||
	    gt - lt - 1 < 3 || memchr(lt + 1, '@', (size_t)(gt - lt - 1)) == NULL ||
	    memchr(lt + 1, ' ', (size_t)(gt - lt - 1)) != NULL) {
		conf_error(p, &ev->start_mark,
		           "%s: expected \"Name <address>\" in printable ASCII (a name of 1 to %d "
		           "bytes, an address with an @)",
		           k->label, CONF_AUTHOR_NAME_MAX - 1);
		return;
	}
	memcpy(p->c->git.author_name, v, nlen);
	p->c->git.author_name[nlen] = '\0';
	memcpy(p->c->git.author_email, lt + 1, (size_t)(gt - lt - 1));
	p->c->git.author_email[gt - lt - 1] = '\0';
}

static const struct conf_key conf_git_keys[] = {
    {"author", "git.author", conf_set_git_author, 0, 0},
};

static void
conf_set_git(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev)
{
	conf_section(p, k, ev, conf_git_keys, CONF_NKEYS(conf_git_keys), "git.");
}

/* Egress */

#define CONF_PRESET_NAME_RE "[a-z0-9][a-z0-9_-]{0,31}"

/* Whether s[0..n) is a preset name, as templates' network.presets write one. */
static int
conf_preset_name_ok(const unsigned char *s, size_t n)
{
	size_t i;

	if (n == 0 || n >= CONF_PRESET_NAME_MAX)
		return 0;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') ||
		      (i > 0 && (s[i] == '_' || s[i] == '-'))))
			return 0;
	return 1;
}

/* One entry of a preset's list into pr (label names it). */
static void
conf_preset_rule(struct conf_parse *p, struct conf_preset *pr, const char *label,
    yaml_event_t *ev)
{
	char text[EGRESS_RULE_TEXT_MAX + 1];
	struct egress_rule r;
	const char *why;
	size_t i;

	if (conf_scalar(p, label, ev, text, sizeof(text)) == -1)
		return;
	if ((why = egress_rule_parse(text, strlen(text), &r)) != NULL) {
		conf_error(p, &ev->start_mark, "%s: %s", label, why);
		return;
	}
	for (i = 0; i < pr->nrules; i++) {
		if (egress_rule_equal(&pr->rules[i], &r)) {
			conf_error(p, &ev->start_mark, "%s: duplicate entry", label);
			return;
		}
	}
	pr->rules[pr->nrules++] = r;
}

/*
 * A list of scalars (label names it), each handed to item with its label
 * "label[i]"; at most max, the first one past it reported and the rest
 * skipped.  Returns the number of items; an empty list is reported when
 * !empty_ok.
 */
typedef void conf_scalar_item_fn(struct conf_parse *, void *, const char *, yaml_event_t *);

static size_t
conf_scalar_list(struct conf_parse *p, const char *label, yaml_event_t *ev, size_t max,
    int empty_ok, conf_scalar_item_fn *item, void *arg)
{
	char lab[CONF_LABEL_MAX];
	yaml_event_t it;
	size_t n;

	if (ev->type != YAML_SEQUENCE_START_EVENT) {
		conf_error(p, &ev->start_mark, "%s: expected a sequence, found %s", label,
		    conf_found(ev));
		conf_skip(p, ev);
		return 0;
	}
	for (n = 0; conf_next(p, &it) == 0; n++) {
		if (it.type == YAML_SEQUENCE_END_EVENT) {
			yaml_event_delete(&it);
			if (n == 0 && !empty_ok)
				conf_error(p, &ev->start_mark, "%s: empty list", label);
			return n;
		}
		snprintf(lab, sizeof(lab), "%s[%zu]", label, n);
		if (n == max)
			conf_error(p, &it.start_mark, "%s: at most %zu entries", label, max);
		if (n >= max)
			conf_skip(p, &it);
		else if (it.type != YAML_ALIAS_EVENT) /* reported already */
			item(p, arg, lab, &it);
		yaml_event_delete(&it);
	}
	return n;
}

static void
conf_preset_item(struct conf_parse *p, void *arg, const char *label, yaml_event_t *ev)
{
	conf_preset_rule(p, arg, label, ev);
}

/* The preset whose name is the scalar kev, or NULL after reporting. */
static struct conf_preset *
conf_preset_new(struct conf_parse *p, yaml_event_t *kev)
{
	struct conf_egress *e = &p->c->egress;
	const unsigned char *v = kev->data.scalar.value;
	size_t n = kev->data.scalar.length, i;

	if (!conf_preset_name_ok(v, n)) {
		conf_error(p, &kev->start_mark, "egress.presets: a preset name must match "
		    CONF_PRESET_NAME_RE);
		return NULL;
	}
	for (i = 0; i < e->npresets; i++) {
		if (strlen(e->presets[i].name) == n && memcmp(e->presets[i].name, v, n) == 0) {
			conf_error(p, &kev->start_mark, "egress.presets: duplicate preset '%.*s'",
			    (int)n, (const char *)v);
			return NULL;
		}
	}
	if (e->npresets == CONF_MAX_PRESETS) {
		conf_error(p, &kev->start_mark, "egress.presets: at most %d presets",
		    CONF_MAX_PRESETS);
		return NULL;
	}
	memset(&e->presets[e->npresets], 0, sizeof(e->presets[0]));
	memcpy(e->presets[e->npresets].name, v, n);
	return &e->presets[e->npresets++];
}

/* egress.presets: { NAME: [ ENTRY, ... ], ... }, replacing the defaults. */
static void
conf_set_egress_presets(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev)
{
	char label[CONF_LABEL_MAX];
	struct conf_preset *pr;
	yaml_event_t kev, vev;

	if (conf_want_mapping(p, k->label, ev) == -1)
		return;
	p->c->egress.npresets = 0;
	while (conf_next(p, &kev) == 0 && kev.type != YAML_MAPPING_END_EVENT) {
		pr = NULL;
		if (kev.type == YAML_SCALAR_EVENT)
			pr = conf_preset_new(p, &kev);
		else if (kev.type != YAML_ALIAS_EVENT) {
			conf_error(p, &kev.start_mark, "a key must be a scalar, not %s",
			    conf_kind(&kev));
			conf_skip(p, &kev);
		}
		if (pr != NULL)
			snprintf(label, sizeof(label), "%s.%s", k->label, pr->name);
		yaml_event_delete(&kev);
		if (conf_next(p, &vev) == -1)
			return;
		if (pr != NULL && vev.type != YAML_ALIAS_EVENT)
			conf_scalar_list(p, label, &vev, CONF_PRESET_RULES, 0, conf_preset_item, pr);
		else
			conf_skip(p, &vev);
		yaml_event_delete(&vev);
	}
	yaml_event_delete(&kev);
}

static void
conf_cidr_item(struct conf_parse *p, void *arg, const char *label, yaml_event_t *ev)
{
	struct conf_egress *e = arg;
	char text[EGRESS_CIDR_TEXT_MAX];
	struct egress_cidr c;
	const char *why;
	size_t i;

	if (conf_scalar(p, label, ev, text, sizeof(text)) == -1)
		return;
	if ((why = egress_cidr_parse(text, strlen(text), &c)) != NULL) {
		conf_error(p, &ev->start_mark, "%s: %s", label, why);
		return;
	}
	for (i = 0; i < e->ncidrs; i++) {
		if (memcmp(&e->cidrs[i], &c, sizeof(c)) == 0) {
			conf_error(p, &ev->start_mark, "%s: duplicate network", label);
			return;
		}
	}
	e->cidrs[e->ncidrs++] = c;
}

/* egress.allow_cidrs: [ "10.20.0.0/16", ... ]; [] is none. */
static void
conf_set_egress_cidrs(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev)
{
	p->c->egress.ncidrs = 0;
	conf_scalar_list(p, k->label, ev, CONF_MAX_CIDRS, 1, conf_cidr_item, &p->c->egress);
}

static void
conf_set_egress_enabled(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev)
{
	conf_bool(p, k->label, ev, &p->c->egress.enabled);
}

/* egress.* limits: numbers in a range; durations in whole seconds, sizes
 * with K, M and G, as sandbox.* takes them. */
static void conf_set_egress_num(struct conf_parse *, const struct conf_key *, yaml_event_t *);
#define CONF_EGRESS(field)                                                                         \
	{ #field, "egress." #field, conf_set_egress_num, offsetof(struct config, egress.field), 0 }
static const struct conf_key conf_egress_keys[] = {
    {"enabled", "egress.enabled", conf_set_egress_enabled, 0, 0},
    {"presets", "egress.presets", conf_set_egress_presets, 0, 0},
    {"allow_cidrs", "egress.allow_cidrs", conf_set_egress_cidrs, 0, 0},
    CONF_EGRESS(tunnels_per_run),
    CONF_EGRESS(connect_timeout),
    CONF_EGRESS(idle_timeout),
    CONF_EGRESS(bytes_per_run),
};
/* Ranges, in the order of conf_egress_keys. */
static const struct conf_range conf_egress_ranges[] = {
    {0, 0, 0},                    /* enabled: a bool */
    {0, 0, 0},                    /* presets: a mapping */
    {0, 0, 0},                    /* allow_cidrs: a list */
    {1, 1024, 0},                 /* tunnels_per_run */
    {1, 300, 0},                  /* connect_timeout: seconds */
    {1, 86400, 0},                /* idle_timeout: seconds */
    {1ull << 20, 1ull << 40, 1},  /* bytes_per_run: 1M..1T */
};
_Static_assert(CONF_NKEYS(conf_egress_keys) == CONF_NKEYS(conf_egress_ranges),
    "one range per key");

static void
conf_set_egress_num(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev)
{
	conf_set_ranged(p, k, ev, &conf_egress_ranges[k - conf_egress_keys]);
}

static void
conf_set_egress(struct conf_parse *p, const struct conf_key *k, yaml_event_t *ev)
{
	conf_section(p, k, ev, conf_egress_keys, CONF_NKEYS(conf_egress_keys), "egress.");
}

/* The presets that ship (agrippad.yaml.sample lists them): the public
 * registries of each ecosystem's package tool, and no more. */
static const struct {
	const char *name;
	const char *entries[6];
} conf_default_presets[] = {
    {"python", {"pypi.org", "files.pythonhosted.org"}},
    {"node", {"registry.npmjs.org", "registry.yarnpkg.com"}},
    {"rust", {"crates.io", "index.crates.io", "static.crates.io", "static.rust-lang.org"}},
    {"go", {"proxy.golang.org", "sum.golang.org"}},
    {"debian", {"deb.debian.org", "security.debian.org"}},
};

static void conf_strlcpy(char *, const char *, size_t);

static void
conf_egress_defaults(struct conf_egress *e)
{
	struct conf_preset *pr;
	const char *s;
	size_t i, j;

	e->enabled = 1;
	e->tunnels_per_run = 32;
	e->connect_timeout = 10;
	e->idle_timeout = 300;
	e->bytes_per_run = 4ull << 30;
	for (i = 0; i < CONF_NKEYS(conf_default_presets); i++) {
		pr = &e->presets[e->npresets++];
		conf_strlcpy(pr->name, conf_default_presets[i].name, sizeof(pr->name));
		for (j = 0; j < 6 && (s = conf_default_presets[i].entries[j]) != NULL; j++)
			if (egress_rule_parse(s, strlen(s), &pr->rules[pr->nrules]) == NULL)
				pr->nrules++;
	}
}

/* The stream */

/* The one document: its root must be a mapping. */
static void
conf_document(struct conf_parse *p)
{
	yaml_event_t ev;
	uint32_t seen = 0;

	if (conf_next(p, &ev) == -1)
		return;
	if (ev.type == YAML_MAPPING_START_EVENT) {
		conf_mapping(p, conf_top_keys, CONF_NKEYS(conf_top_keys), "", &seen);
	} else {
		conf_error(p, &ev.start_mark, "the top level must be a mapping, found %s",
		    conf_found(&ev));
		conf_skip(p, &ev);
	}
	yaml_event_delete(&ev);
}

/* STREAM-START, one DOCUMENT, and nothing after it but STREAM-END. */
static void
conf_stream(struct conf_parse *p)
{
	yaml_event_t ev;

	if (conf_next(p, &ev) == -1) /* STREAM-START */
		return;
	yaml_event_delete(&ev);
	if (conf_next(p, &ev) == -1)
		return;
	if (ev.type == YAML_STREAM_END_EVENT) {
		conf_error(p, &ev.start_mark, "empty file: the top level must be a mapping");
		yaml_event_delete(&ev);
		return;
	}
	yaml_event_delete(&ev); /* DOCUMENT-START */
	conf_document(p);
	if (conf_next(p, &ev) == -1) /* DOCUMENT-END */
		return;
	yaml_event_delete(&ev);
	if (conf_next(p, &ev) == -1)
		return;
	if (ev.type == YAML_DOCUMENT_START_EVENT)
		conf_error(p, &ev.start_mark, "only one YAML document is allowed");
	yaml_event_delete(&ev);
}

/* metrics_listen serves what the API must not (it has no authentication):
 * it may not share an address with listen. */
static void
conf_check_metrics(struct conf_parse *p)
{
	const struct conf_listen *m = &p->c->metrics_listen;
	size_t i;

	if (m->addr[0] == '\0')
		return;
	for (i = 0; i < p->c->nlisten; i++)
		if (p->c->listen[i].port == m->port && strcmp(p->c->listen[i].host, m->host) == 0)
			conf_error(p, &p->metrics_mark,
			    "metrics_listen: the same address as listen[%zu]", i);
}

/* Rules that span keys.  The embedded server runs as db_user so that the
 * service user cannot read the database files: the two must differ.  The
 * agent must name a configured provider and one of its models. */
static void
conf_crosscheck(struct conf_parse *p)
{
	if (strcmp(p->c->user, p->c->db_user) == 0)
		conf_error(p, &p->name_mark, "user and db_user must differ");
	conf_check_agent(p);
	conf_check_metrics(p);
}

/* Public interface */

static void
conf_strlcpy(char *dst, const char *src, size_t size)
{
	size_t n = strnlen(src, size - 1);

	memcpy(dst, src, n);
	dst[n] = '\0';
}

void
config_defaults(struct config *c)
{
	memset(c, 0, sizeof(*c));
	conf_strlcpy(c->path, CONF_DEFAULT_PATH, sizeof(c->path));
	conf_strlcpy(c->state_dir, "/var/agrippa", sizeof(c->state_dir));
	conf_strlcpy(c->user, "_agrippa", sizeof(c->user));
	conf_strlcpy(c->db_user, "_agrippadb", sizeof(c->db_user));
	conf_strlcpy(c->control_socket, "/run/agrippad.sock", sizeof(c->control_socket));
	conf_strlcpy(c->master_key, "/etc/agrippad/master.key", sizeof(c->master_key));
	conf_strlcpy(c->pidfile, "/run/agrippad.pid", sizeof(c->pidfile));
	conf_strlcpy(c->chroot, "/var/empty", sizeof(c->chroot));
	conf_strlcpy(c->listen[0].addr, "127.0.0.1:8480", sizeof(c->listen[0].addr));
	conf_strlcpy(c->listen[0].host, "127.0.0.1", sizeof(c->listen[0].host));
	c->listen[0].port = 8480;
	c->nlisten = 1;
	c->db_embedded = 1;
	c->db_pool = 4;
	c->ipc_max_frame = 16 * 1024 * 1024;
	c->sandbox.uid = 2000000000;
	c->sandbox.gid = 2000000000;
	c->sandbox.max = 32;
	c->sandbox.memory = 2ull << 30;
	c->sandbox.pids = 512;
	c->sandbox.cpu = 100;
	c->sandbox.tmp_size = 256ull << 20;
	c->sandbox.file_size = 1ull << 30;
	c->sandbox.disk = 10ull << 30;
	c->sandbox.open_files = 1024;
	c->sandbox.exec_timeout = 600;
	c->sandbox.output_max = 1ull << 20;
	c->sandbox.file_max = 8ull << 20;
	c->sandbox.artifact_max = 16ull << 20;
	c->engine.concurrency = 4;
	c->engine.lease = 30;
	c->engine.sweep = 5;
	c->engine.step_budget = 10000000; /* 10 USD */
	c->engine.host_grace = 86400;
	c->agent.max_tokens = 8192;
	c->agent.tool_output_max = 32 * 1024;
	c->agent.mcp_tools_max = 128;
	c->agent.mcp_tool_bytes_max = 256 * 1024;
	conf_egress_defaults(&c->egress);
	conf_strlcpy(c->ui_dir, AGRIPPA_DATADIR "/ui", sizeof(c->ui_dir));
	c->session_lifetime = 43200;
	c->api.user_rate = 20;
	c->api.user_burst = 200;
	c->api.sse_queued_max = 64u * 1024 * 1024;
}

/* Run the walker over buf into tmp.  Returns the number of errors. */
static unsigned
conf_run(const char *name, const unsigned char *buf, size_t len, struct config *tmp, char *errbuf,
    size_t errsz)
{
	struct conf_parse p;

	memset(&p, 0, sizeof(p));
	p.name = name;
	p.c = tmp;
	p.err = errbuf;
	p.errsz = errsz;
	if (yamlev_init(&p.ye, buf, len, CONF_MAX_DEPTH, conf_yaml_error, &p) == -1) {
		conf_ferror(errbuf, errsz, "%s: out of memory\n", name);
		return 1;
	}
	conf_stream(&p);
	if (!p.ye.stop)
		conf_crosscheck(&p);
	yamlev_free(&p.ye);
	return p.nerr;
}

int
config_parse(const char *name, const unsigned char *buf, size_t len, struct config *c,
    char *errbuf, size_t errsz)
{
	static const unsigned char empty[1];
	struct config *tmp;
	unsigned nerr;

	if (errbuf != NULL && errsz > 0)
		errbuf[0] = '\0';
	if (name == NULL)
		name = "(config)";
	if (len > CONF_MAX_SIZE) {
		conf_ferror(errbuf, errsz, "%s: too large (more than %d bytes)\n", name,
		    CONF_MAX_SIZE);
		return -1;
	}
	if ((tmp = malloc(sizeof(*tmp))) == NULL) {
		conf_ferror(errbuf, errsz, "%s: out of memory\n", name);
		return -1;
	}
	config_defaults(tmp);
	conf_strlcpy(tmp->path, name, sizeof(tmp->path));
	nerr = conf_run(name, buf != NULL ? buf : empty, buf != NULL ? len : 0, tmp, errbuf, errsz);
	if (nerr == 0)
		*c = *tmp;
	explicit_bzero(tmp, sizeof(*tmp)); /* db_url may hold a password */
	free(tmp);
	return nerr == 0 ? 0 : -1;
}

/* Read fd into a new buffer of CONF_MAX_SIZE + 1 bytes (caller wipes and
 * frees), stopping one byte past the limit.  Returns the length read, or -1
 * with errno set. */
static ssize_t
conf_read(int fd, unsigned char **out)
{
	unsigned char *buf;
	size_t len = 0;
	ssize_t n;

	if ((buf = malloc(CONF_MAX_SIZE + 1)) == NULL)
		return -1;
	while (len <= CONF_MAX_SIZE) {
		n = read(fd, buf + len, CONF_MAX_SIZE + 1 - len);
		if (n == 0)
			break;
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			explicit_bzero(buf, len);
			free(buf);
			return -1;
		}
		len += (size_t)n;
	}
	*out = buf;
	return (ssize_t)len;
}

/* Open path as a regular file that others cannot write (the supervisor runs
 * as root: a world-writable config is a root shell).  Returns the fd or -1. */
static int
conf_open(const char *path, char *errbuf, size_t errsz)
{
	struct stat st;
	int fd;

	/* O_NONBLOCK: a FIFO planted at path must not hang the daemon. */
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)) == -1) {
		conf_ferror(errbuf, errsz, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) == -1) {
		conf_ferror(errbuf, errsz, "%s: %s\n", path, strerror(errno));
	} else if (!S_ISREG(st.st_mode)) {
		conf_ferror(errbuf, errsz, "%s: not a regular file\n", path);
	} else if (st.st_mode & S_IWOTH) {
		conf_ferror(errbuf, errsz, "%s: writable by others (chmod o-w)\n", path);
	} else {
		return fd;
	}
	close(fd);
	return -1;
}

int
config_read_file(const char *path, unsigned char **out, size_t *len, char *errbuf, size_t errsz)
{
	ssize_t n;
	int fd;

	if (errbuf != NULL && errsz > 0)
		errbuf[0] = '\0';
	if ((fd = conf_open(path, errbuf, errsz)) == -1)
		return -1;
	n = conf_read(fd, out);
	close(fd);
	if (n == -1) {
		conf_ferror(errbuf, errsz, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	if ((size_t)n > CONF_MAX_SIZE) {
		explicit_bzero(*out, (size_t)n);
		free(*out);
		conf_ferror(errbuf, errsz, "%s: too large (more than %d bytes)\n", path,
		    CONF_MAX_SIZE);
		return -1;
	}
	*len = (size_t)n;
	return 0;
}

int
config_load(const char *path, struct config *c, char *errbuf, size_t errsz)
{
	unsigned char *buf = NULL;
	size_t n;
	int rc;

	if (config_read_file(path, &buf, &n, errbuf, errsz) == -1)
		return -1;
	rc = config_parse(path, buf, n, c, errbuf, errsz);
	explicit_bzero(buf, n);
	free(buf);
	return rc;
}
