/*
 * The template compiler (tmpl.h; DESIGN.md section 5).
 *
 * Two passes.  The first reads libyaml's events into a small tree of our
 * own.  Events rather than libyaml's document loader: the loader resolves
 * aliases silently, while events show every anchor, alias and tag so each
 * can be refused, and no node is ever expanded (no billion laughs).  Nesting
 * is bounded (TMPL_MAX_DEPTH), which bounds the recursion of both passes and
 * libyaml's per-token work on flow nesting; the input is bounded by
 * TMPL_MAX_SIZE, which bounds the tree.
 *
 * The second pass walks the tree with random access, which a template
 * needs: ${params.x} may be used above the params section, and a step's kind
 * decides which of its keys exist wherever kind is written.  It builds the
 * compiled JSON as it goes; the JSON is kept only when no error was found.
 * Errors are collected with their positions and sorted into document order
 * before they are written out, so the order of the checks does not show.
 *
 * After a YAML syntax error (or too deep a nesting) the structure is not
 * known, so only that error and the anchors, aliases and tags met before it
 * are reported: checking half a document would report keys as missing.
 */
#include "tmpl/tmpl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "common/mcpspec.h"
#include "common/util.h"
#include "common/yamlev.h"
#include "egress/policy.h"

#define TMPL_FMT(f, a) __attribute__((format(printf, f, a)))
#define TMPL_MAX_DEPTH 32 /* nesting a template never needs */
#define TMPL_MAX_PARAMS 64
#define TMPL_MAX_PHASES 64
#define TMPL_MAX_STEPS 256              /* per phase */
#define TMPL_MAX_PRODUCES 32            /* per step */
#define TMPL_MAX_RESOURCES 64           /* per list of requires */
#define TMPL_DESC_MAX 4096              /* description, checkpoint message */
#define TMPL_TEXT_MAX 65536             /* run, prompt, body, string default */
#define TMPL_LINE_MAX 256               /* title, workspace.repo, repoRef default */
#define TMPL_FILE_MAX 128               /* produces[].file */
#define TMPL_LABEL_MAX 128              /* "phases[63].steps[255].requires.skills[63]" */
#define TMPL_SHOW_MAX 64                /* longest key or reference echoed back */
#define TMPL_INT_MAX 9007199254740991LL /* 2^53 - 1: exact in every JSON reader */
#define TMPL_NELEM(a) (sizeof(a) / sizeof((a)[0]))

#define TMPL_LOWER "abcdefghijklmnopqrstuvwxyz"
#define TMPL_DIGIT "0123456789"

/* ---- the tree ----------------------------------------------------------- */

enum tn_type { TN_SCALAR, TN_SEQ, TN_MAP, TN_ALIAS };

struct tn {
	enum tn_type type;
	yaml_mark_t mark; /* where the node starts */
	int plain;        /* a scalar written without quotes */
	char *s;          /* scalar: the value, NUL-terminated (may hold NULs) */
	size_t len;
	struct tn **kid; /* sequence: items; mapping: key, value, key, value... */
	size_t nkid, cap;
};

/* ---- the parse ---------------------------------------------------------- */

struct terr {
	size_t line, col, seq; /* 1-based position; order of report */
	char *msg;             /* "LINE:COL: message" goes out as "NAME:" msg */
};

enum { PT_STRING, PT_INT, PT_BOOL, PT_REPOREF, PT_UNKNOWN };
static const char *const tmpl_ptypes[] = {"string", "int", "bool", "repoRef"};

struct tparam {
	char name[TMPL_NAME_MAX + 1];
	int type; /* PT_*; PT_UNKNOWN when its type is missing or wrong */
};

struct tmpl_parse {
	struct yamlev ye; /* the event reader: depth, stop, the parser */
	const char *name; /* for messages */
	const unsigned char *buf;
	size_t len;
	struct terr *err; /* errors found, in order of report */
	size_t nerr, errcap;
	unsigned count; /* errors found, stored or not */
	int oom;
	struct tparam param[TMPL_MAX_PARAMS];
	size_t nparam;
	json_t *ids;    /* step ids seen (a set) */
	json_t *keys;   /* artifact keys seen (a set) */
	json_t *phases; /* phase names seen (a set) */
};

/* ---- errors ------------------------------------------------------------- */

/* Make room for one more error.  Returns 0 or -1 (out of memory). */
static int
tmpl_err_grow(struct tmpl_parse *p)
{
	struct terr *n;
	size_t cap;

	if (p->nerr < p->errcap)
		return 0;
	cap = p->errcap == 0 ? 16 : p->errcap * 2;
	if (cap < p->errcap || (n = reallocarray(p->err, cap, sizeof(*n))) == NULL)
		return -1;
	p->err = n;
	p->errcap = cap;
	return 0;
}

/* Record "line:col: reason" at mark m (libyaml marks are 0-based). */
static void TMPL_FMT(3, 4)
    tmpl_error(struct tmpl_parse *p, const yaml_mark_t *m, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	struct terr *e;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	p->count++;
	if (tmpl_err_grow(p) == -1) {
		p->oom = 1;
		return;
	}
	e = &p->err[p->nerr];
	if ((e->msg = strdup(msg)) == NULL) {
		p->oom = 1;
		return;
	}
	e->line = m->line + 1;
	e->col = m->column + 1;
	e->seq = p->nerr++;
}

/* An error at node n about what label names: "label: reason", or just
 * "reason" when label is empty (the top level). */
static void TMPL_FMT(4, 5)
    tmpl_lerr(struct tmpl_parse *p, const struct tn *n, const char *label, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	tmpl_error(p, &n->mark, "%s%s%s", label, *label != '\0' ? ": " : "", msg);
}

static int
tmpl_err_cmp(const void *a, const void *b)
{
	const struct terr *x = a, *y = b;

	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	if (x->col != y->col)
		return x->col < y->col ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Write the errors in document order into errbuf and free them. */
static void
tmpl_err_flush(struct tmpl_parse *p, char *errbuf, size_t errsz)
{
	size_t i, len = 0;

	if (p->nerr > 1)
		qsort(p->err, p->nerr, sizeof(*p->err), tmpl_err_cmp);
	for (i = 0; i < p->nerr; i++) {
		errbuf_append(errbuf, errsz, &len, "%s:%zu:%zu: %s\n", p->name, p->err[i].line,
		            p->err[i].col, p->err[i].msg);
		free(p->err[i].msg);
	}
	if (p->oom) {
		p->count++;
		errbuf_append(errbuf, errsz, &len, "%s: out of memory\n", p->name);
	}
	free(p->err);
	p->err = NULL;
	p->nerr = p->errcap = 0;
}

/* ---- events ------------------------------------------------------------- */

/* Problems the event reader found (common/yamlev.h); m NULL: out of memory. */
static void
tmpl_yaml_error(void *arg, const yaml_mark_t *m, const char *msg)
{
	struct tmpl_parse *p = arg;

	if (m == NULL)
		p->oom = 1;
	else
		tmpl_error(p, m, "%s", msg);
}

/* The next event: 0, or -1 once the parse stopped (after a syntax error or
 * too deep a nesting, reported once; *ev is then empty). */
static int
tmpl_next(struct tmpl_parse *p, yaml_event_t *ev)
{
	return yamlev_next(&p->ye, ev);
}

/* ---- building the tree -------------------------------------------------- */

static void
tn_free(struct tn *n)
{
	size_t i;

	if (n == NULL)
		return;
	for (i = 0; i < n->nkid; i++)
		tn_free(n->kid[i]);
	free(n->kid);
	free(n->s);
	free(n);
}

/* Append kid to n's children (kid is freed on failure). */
static int
tn_push(struct tmpl_parse *p, struct tn *n, struct tn *kid)
{
	struct tn **k;
	size_t cap;

	if (n->nkid == n->cap) {
		cap = n->cap == 0 ? 4 : n->cap * 2;
		if (cap < n->cap || (k = reallocarray(n->kid, cap, sizeof(*k))) == NULL) {
			tn_free(kid);
			p->oom = p->ye.stop = 1;
			return -1;
		}
		n->kid = k;
		n->cap = cap;
	}
	n->kid[n->nkid++] = kid;
	return 0;
}

static struct tn *tmpl_build(struct tmpl_parse *, yaml_event_t *);

/* Read the children of container n up to its end event. */
static void
tmpl_build_kids(struct tmpl_parse *p, struct tn *n, yaml_event_type_t end)
{
	yaml_event_t ev;
	struct tn *kid;

	while (tmpl_next(p, &ev) == 0) {
		if (ev.type == end) {
			yaml_event_delete(&ev);
			return;
		}
		if ((kid = tmpl_build(p, &ev)) == NULL || tn_push(p, n, kid) == -1)
			return;
	}
}

/*
 * The node that starts with event ev, which is consumed (deleted).  Returns
 * the node (the caller frees it, also when p->ye.stop is set and it is only
 * partly read), or NULL when out of memory (p->oom and p->ye.stop set).
 * Recursion is bounded by TMPL_MAX_DEPTH through tmpl_next.
 */
static struct tn *
tmpl_build(struct tmpl_parse *p, yaml_event_t *ev)
{
	struct tn *n = calloc(1, sizeof(*n));
	yaml_event_type_t type = ev->type;

	if (n == NULL) {
		yaml_event_delete(ev);
		p->oom = p->ye.stop = 1;
		return NULL;
	}
	n->mark = ev->start_mark;
	n->type = type == YAML_SCALAR_EVENT           ? TN_SCALAR
	          : type == YAML_SEQUENCE_START_EVENT ? TN_SEQ
	          : type == YAML_MAPPING_START_EVENT  ? TN_MAP
	                                              : TN_ALIAS;
	if (type == YAML_SCALAR_EVENT) {
		n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
		n->len = ev->data.scalar.length;
		if ((n->s = malloc(n->len + 1)) == NULL) {
			yaml_event_delete(ev);
			free(n);
			p->oom = p->ye.stop = 1;
			return NULL;
		}
		memcpy(n->s, ev->data.scalar.value, n->len);
		n->s[n->len] = '\0';
	}
	yaml_event_delete(ev);
	if (type == YAML_SEQUENCE_START_EVENT)
		tmpl_build_kids(p, n, YAML_SEQUENCE_END_EVENT);
	else if (type == YAML_MAPPING_START_EVENT)
		tmpl_build_kids(p, n, YAML_MAPPING_END_EVENT);
	return n;
}

/*
 * STREAM-START, one DOCUMENT, and nothing after it but STREAM-END.  Returns
 * the root node of the document (the caller frees it) or NULL.  A second
 * document is reported and not read.
 */
static struct tn *
tmpl_stream(struct tmpl_parse *p)
{
	yaml_event_t ev;
	struct tn *root;

	if (tmpl_next(p, &ev) == -1) /* STREAM-START */
		return NULL;
	yaml_event_delete(&ev);
	if (tmpl_next(p, &ev) == -1)
		return NULL;
	if (ev.type == YAML_STREAM_END_EVENT) {
		tmpl_error(p, &ev.start_mark, "empty file: the top level must be a mapping");
		yaml_event_delete(&ev);
		return NULL;
	}
	yaml_event_delete(&ev); /* DOCUMENT-START */
	if (tmpl_next(p, &ev) == -1 || (root = tmpl_build(p, &ev)) == NULL)
		return NULL;
	if (tmpl_next(p, &ev) == -1) /* DOCUMENT-END */
		return root;
	yaml_event_delete(&ev);
	if (tmpl_next(p, &ev) == -1)
		return root;
	if (ev.type == YAML_DOCUMENT_START_EVENT)
		tmpl_error(p, &ev.start_mark, "only one YAML document is allowed");
	yaml_event_delete(&ev);
	return root;
}

/* ---- JSON --------------------------------------------------------------- */

/*
 * Set key of obj to v (stolen).  A NULL v is a value that was refused (and
 * reported: the document will not be kept) or one that could not be
 * allocated; it is the latter when no error was reported yet.
 */
static void
tj_set(struct tmpl_parse *p, json_t *obj, const char *key, json_t *v)
{
	if (v == NULL) {
		if (p->count == 0)
			p->oom = 1;
		return;
	}
	if (json_object_set_new(obj, key, v) != 0)
		p->oom = 1;
}

static void
tj_append(struct tmpl_parse *p, json_t *arr, json_t *v)
{
	if (v == NULL) {
		if (p->count == 0)
			p->oom = 1;
		return;
	}
	if (json_array_append_new(arr, v) != 0)
		p->oom = 1;
}

/* Add name to set; returns 1 when it was there already. */
static int
tj_seen(struct tmpl_parse *p, json_t *set, const char *name)
{
	if (json_object_get(set, name) != NULL)
		return 1;
	tj_set(p, set, name, json_true());
	return 0;
}

/* ---- nodes -------------------------------------------------------------- */

/* Empty, or a plain YAML null ("~", "null"): no value was given. */
static int
tn_null(const struct tn *n)
{
	if (n->type != TN_SCALAR)
		return 0;
	if (n->len == 0)
		return n->plain;
	return n->plain && (strcmp(n->s, "~") == 0 || strcmp(n->s, "null") == 0 ||
	                    strcmp(n->s, "Null") == 0 || strcmp(n->s, "NULL") == 0);
}

static const char *
tn_kind(const struct tn *n)
{
	switch (n->type) {
	case TN_SCALAR:
		return tn_null(n) ? "nothing" : "a scalar";
	case TN_SEQ:
		return "a sequence";
	case TN_MAP:
		return "a mapping";
	default:
		return "an alias";
	}
}

static int
tn_is(const struct tn *n, const char *s)
{
	return n->type == TN_SCALAR && strlen(s) == n->len && memcmp(n->s, s, n->len) == 0;
}

/* n must be a mapping (aliases were reported already).  Returns 0 or -1. */
static int
tmpl_want_map(struct tmpl_parse *p, const struct tn *n, const char *label)
{
	if (n->type == TN_MAP)
		return 0;
	if (n->type != TN_ALIAS)
		tmpl_lerr(p, n, label, "expected a mapping, found %s", tn_kind(n));
	return -1;
}

/* n must be a sequence of at most max items, non-empty when nonempty. */
static int
tmpl_want_seq(struct tmpl_parse *p, const struct tn *n, const char *label, int nonempty)
{
	if (n->type != TN_SEQ) {
		if (n->type != TN_ALIAS)
			tmpl_lerr(p, n, label, "expected a sequence, found %s", tn_kind(n));
		return -1;
	}
	if (nonempty && n->nkid == 0) {
		tmpl_lerr(p, n, label, "empty list");
		return -1;
	}
	return 0;
}

/* A key is named only when it looks like one. */
static int
tmpl_showable(const char *s, size_t n)
{
	size_t i;

	if (n == 0 || n > TMPL_SHOW_MAX)
		return 0;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-' || s[i] == '.'))
			return 0;
	return 1;
}

/*
 * Match the keys of mapping m against names[0..nnames): val[i] gets the
 * value of names[i] and at[i] its key node, both NULL when absent.
 * Unknown, duplicate and non-scalar keys are reported and their values
 * ignored (alias keys were reported already).
 */
static void
tmpl_fields(struct tmpl_parse *p, const struct tn *m, const char *label, const char *const *names,
            size_t nnames, const struct tn **val, const struct tn **at)
{
	const struct tn *k;
	size_t i, j;

	memset(val, 0, nnames * sizeof(*val));
	memset(at, 0, nnames * sizeof(*at));
	for (i = 0; i + 1 < m->nkid; i += 2) {
		k = m->kid[i];
		if (k->type == TN_ALIAS)
			continue;
		if (k->type != TN_SCALAR) {
			tmpl_lerr(p, k, label, "a key must be a scalar, not %s", tn_kind(k));
			continue;
		}
		for (j = 0; j < nnames && !tn_is(k, names[j]); j++)
			;
		if (j == nnames && tmpl_showable(k->s, k->len))
			tmpl_lerr(p, k, label, "unknown key '%s'", k->s);
		else if (j == nnames)
			tmpl_lerr(p, k, label, "unknown key");
		else if (at[j] != NULL)
			tmpl_lerr(p, k, label, "duplicate key '%s'", names[j]);
		else {
			at[j] = k;
			val[j] = m->kid[i + 1];
		}
	}
}

/* Report the required key names[i] missing from mapping m when val[i] is
 * NULL.  Returns 0 when present. */
static int
tmpl_need(struct tmpl_parse *p, const struct tn *m, const char *label, const struct tn *val,
          const char *name)
{
	if (val != NULL)
		return 0;
	tmpl_lerr(p, m, label, "missing key '%s'", name);
	return -1;
}

/* label of a child: "parent.key" (or "key" at the top level). */
static void
tmpl_label(char *dst, size_t dstsz, const char *parent, const char *key)
{
	(void)fmt_ok(dst, dstsz, "%s%s%s", parent, *parent != '\0' ? "." : "", key);
}

static void
tmpl_label_index(char *dst, size_t dstsz, const char *parent, size_t i)
{
	(void)fmt_ok(dst, dstsz, "%s[%zu]", parent, i);
}

/* ---- scalars ------------------------------------------------------------ */

#define TS_EMPTY_OK 1 /* a quoted "" is a value */
#define TS_TEXT 2     /* newlines and tabs allowed */
#define TS_ARTIFACTS 4 /* ${artifacts.KEY} of an earlier step's artifact allowed */

/* n must be a scalar with a value.  Returns 0 or -1 after reporting
 * (aliases were reported already). */
static int
tmpl_scalar(struct tmpl_parse *p, const struct tn *n, const char *label, const char *what)
{
	if (n->type == TN_ALIAS)
		return -1;
	if (n->type != TN_SCALAR) {
		tmpl_lerr(p, n, label, "expected %s, found %s", what, tn_kind(n));
		return -1;
	}
	if (tn_null(n) || n->len == 0) {
		tmpl_lerr(p, n, label, "empty value");
		return -1;
	}
	return 0;
}

/* C0 controls, DEL, and C1 controls (U+0080..U+009F, UTF-8 C2 80..C2 9F);
 * with text, newline and tab are allowed. */
static int
tmpl_has_control(const char *s, size_t n, int text)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i;

	for (i = 0; i < n; i++) {
		if (text && (u[i] == '\n' || u[i] == '\t'))
			continue;
		if (u[i] < 0x20 || u[i] == 0x7f)
			return 1;
		if (u[i] == 0xc2 && i + 1 < n && u[i + 1] >= 0x80 && u[i + 1] <= 0x9f)
			return 1;
	}
	return 0;
}

/*
 * A string value of at most max bytes (flags TS_*).  Returns the JSON
 * string, or NULL after reporting (or when out of memory, noted).
 */
static json_t *
tmpl_str(struct tmpl_parse *p, const struct tn *n, const char *label, int flags, size_t max)
{
	json_t *s;

	if (n->type == TN_SCALAR && n->len == 0 && !n->plain && (flags & TS_EMPTY_OK))
		return json_string("");
	if (tmpl_scalar(p, n, label, "a string") == -1)
		return NULL;
	if (n->len > max) {
		tmpl_lerr(p, n, label, "value too long (at most %zu bytes)", max);
		return NULL;
	}
	if (tmpl_has_control(n->s, n->len, flags & TS_TEXT)) {
		tmpl_lerr(p, n, label, "%s",
		          (flags & TS_TEXT)
		              ? "control characters other than newline and tab are not allowed"
		              : "control characters are not allowed");
		return NULL;
	}
	if ((s = json_stringn(n->s, n->len)) == NULL)
		p->oom = 1;
	return s;
}

/* A name pattern: first character from first, the others from rest, at
 * most max bytes; text is how messages write it. */
struct tmpl_rx {
	const char *first, *rest;
	size_t max;
	const char *text;
};

static const struct tmpl_rx rx_tmpl = {TMPL_LOWER TMPL_DIGIT, TMPL_LOWER TMPL_DIGIT "-", 64,
                                       "[a-z0-9][a-z0-9-]{0,63}"};
static const struct tmpl_rx rx_id = {TMPL_LOWER TMPL_DIGIT, TMPL_LOWER TMPL_DIGIT "_-", 64,
                                     "[a-z0-9][a-z0-9_-]{0,63}"};
static const struct tmpl_rx rx_param = {TMPL_LOWER "_", TMPL_LOWER TMPL_DIGIT "_", 64,
                                        "[a-z_][a-z0-9_]{0,63}"};
static const struct tmpl_rx rx_file = {"ABCDEFGHIJKLMNOPQRSTUVWXYZ" TMPL_LOWER TMPL_DIGIT "._-",
                                       "ABCDEFGHIJKLMNOPQRSTUVWXYZ" TMPL_LOWER TMPL_DIGIT "._-",
                                       TMPL_FILE_MAX, "[A-Za-z0-9._-]{1,128}"};

static int
tmpl_match(const struct tmpl_rx *rx, const char *s, size_t n)
{
	size_t i;

	if (n == 0 || n > rx->max)
		return 0;
	for (i = 0; i < n; i++)
		if (s[i] == '\0' || strchr(i == 0 ? rx->first : rx->rest, s[i]) == NULL)
			return 0;
	return 1;
}

/* A name matching rx.  Returns the node's text (NUL-terminated, matched) or
 * NULL after reporting. */
static const char *
tmpl_name(struct tmpl_parse *p, const struct tn *n, const char *label, const struct tmpl_rx *rx)
{
	if (tmpl_scalar(p, n, label, "a name") == -1)
		return NULL;
	if (!tmpl_match(rx, n->s, n->len)) {
		tmpl_lerr(p, n, label, "must match %s", rx->text);
		return NULL;
	}
	return n->s;
}


/* A plain (unquoted) scalar that is to be a number or bool.  Returns 0 or -1
 * after reporting "expected WHAT, found ...". */
static int
tmpl_plain(struct tmpl_parse *p, const struct tn *n, const char *label, const char *what)
{
	if (tmpl_scalar(p, n, label, what) == -1)
		return -1;
	if (!n->plain) {
		tmpl_lerr(p, n, label, "expected %s, found a quoted string", what);
		return -1;
	}
	return 0;
}

/* An integer in [min, max] (min may be negative).  Returns 0 or -1 after
 * reporting. */
static int
tmpl_int(struct tmpl_parse *p, const struct tn *n, const char *label, long long min, long long max,
         long long *out)
{
	uint64_t v;
	int neg;

	if (tmpl_plain(p, n, label, "an integer") == -1)
		return -1;
	neg = n->s[0] == '-' && min < 0;
	if (dec_parse(n->s + neg, n->len - (size_t)neg, (uint64_t)TMPL_INT_MAX, &v) == -1 ||
	    (neg && v == 0) || (neg ? -(long long)v : (long long)v) < min ||
	    (neg ? -(long long)v : (long long)v) > max) {
		tmpl_lerr(p, n, label, "expected an integer from %lld to %lld", min, max);
		return -1;
	}
	*out = neg ? -(long long)v : (long long)v;
	return 0;
}

static json_t *
tmpl_jint(struct tmpl_parse *p, const struct tn *n, const char *label, long long min, long long max,
          long long def)
{
	long long v = def;

	if (n != NULL && tmpl_int(p, n, label, min, max, &v) == -1)
		return NULL;
	return json_integer(v);
}

/* true or false, unquoted.  Returns 0 or -1 after reporting. */
static int
tmpl_bool(struct tmpl_parse *p, const struct tn *n, const char *label, int *out)
{
	if (tmpl_plain(p, n, label, "true or false") == -1)
		return -1;
	if (strcmp(n->s, "true") == 0 && n->len == 4)
		*out = 1;
	else if (strcmp(n->s, "false") == 0 && n->len == 5)
		*out = 0;
	else {
		tmpl_lerr(p, n, label, "expected true or false");
		return -1;
	}
	return 0;
}

static json_t *
tmpl_jbool(struct tmpl_parse *p, const struct tn *n, const char *label, int def)
{
	int v = def;

	if (n != NULL && tmpl_bool(p, n, label, &v) == -1)
		return NULL;
	return json_boolean(v);
}

/* One of names[] (quoted or not).  Returns its index or -1 after reporting
 * "expected A, B or C". */
static int
tmpl_enum(struct tmpl_parse *p, const struct tn *n, const char *label, const char *const *names,
          size_t nnames)
{
	char want[256] = "";
	size_t i, len = 0;

	if (n->type == TN_SCALAR && !tn_null(n))
		for (i = 0; i < nnames; i++)
			if (tn_is(n, names[i]))
				return (int)i;
	for (i = 0; i < nnames; i++)
		errbuf_append(want, sizeof(want), &len, "%s%s",
		            i == 0            ? ""
		            : i + 1 == nnames ? " or "
		                              : ", ",
		            names[i]);
	if (tmpl_scalar(p, n, label, want) == 0)
		tmpl_lerr(p, n, label, "expected %s", want);
	return -1;
}

/*
 * A duration in seconds from min to max: an integer number of seconds, or
 * digits followed by one of s, m, h, d (quoted or not).  range is how the
 * message writes the bounds ("1s to 7d").  Returns 0 or -1 after reporting.
 */
static int
tmpl_duration(struct tmpl_parse *p, const struct tn *n, const char *label, uint64_t min,
              uint64_t max, const char *range, long long *out)
{
	uint64_t v, mult = 1;
	size_t len;

	if (tmpl_scalar(p, n, label, "a duration") == -1)
		return -1;
	len = n->len;
	switch (n->s[len - 1]) {
	case 's':
		len--;
		break;
	case 'm':
		mult = 60, len--;
		break;
	case 'h':
		mult = 3600, len--;
		break;
	case 'd':
		mult = 86400, len--;
		break;
	}
	if (dec_parse(n->s, len, max / mult, &v) == -1 || v * mult < min) {
		tmpl_lerr(p, n, label,
		          "expected a duration from %s (seconds, or a number "
		          "followed by s, m, h or d)",
		          range);
		return -1;
	}
	*out = (long long)(v * mult);
	return 0;
}

/*
 * A dollar amount: digits (no leading zero), optionally '.' and 1 to 6
 * digits; 0 to USD_MAX (usd_parse).  Returns 0
 * with *micros, or -1 after reporting.
 */
static int
tmpl_usd(struct tmpl_parse *p, const struct tn *n, const char *label, long long *micros)
{
	if (tmpl_plain(p, n, label, "an amount") == -1)
		return -1;
	if (usd_parse(n->s, n->len, micros) == 0)
		return 0;
	tmpl_lerr(p, n, label, "expected an amount from 0 to %d with at most 6 decimals",
	          USD_MAX);
	return -1;
}

/* ---- references --------------------------------------------------------- */

static const struct tparam *
tmpl_param(const struct tmpl_parse *p, const char *name, size_t n)
{
	size_t i;

	for (i = 0; i < p->nparam; i++)
		if (strlen(p->param[i].name) == n && memcmp(p->param[i].name, name, n) == 0)
			return &p->param[i];
	return NULL;
}

/* The text of s[0..n) is printable ASCII short enough to echo. */
static int
tmpl_printable(const char *s, size_t n)
{
	size_t i;

	if (n > TMPL_SHOW_MAX)
		return 0;
	for (i = 0; i < n; i++)
		if (s[i] < 0x20 || s[i] > 0x7e)
			return 0;
	return 1;
}

/*
 * Check every ${...} in the scalar n: each must be ${params.NAME} naming a
 * declared parameter.  "$$" is not special and a '$' without '{' is
 * literal.  Returns the number of errors reported.
 */
static int
tmpl_refs(struct tmpl_parse *p, const struct tn *n, const char *label, int flags)
{
	const char *s = n->s, *in, *end;
	size_t i, len;
	int bad = 0;
	char key[TMPL_NAME_MAX + 1];

	for (i = 0; i + 1 < n->len; i++) {
		if (s[i] != '$' || s[i + 1] != '{')
			continue;
		in = s + i + 2;
		if ((end = memchr(in, '}', n->len - i - 2)) == NULL) {
			tmpl_lerr(p, n, label, "unterminated reference: '${' without '}'");
			return bad + 1;
		}
		len = (size_t)(end - in);
		i = (size_t)(end - s);
		if (len > 7 && memcmp(in, "params.", 7) == 0 &&
		    tmpl_param(p, in + 7, len - 7) != NULL)
			continue;
		if ((flags & TS_ARTIFACTS) && len > 10 && memcmp(in, "artifacts.", 10) == 0) {
			if (len - 10 <= TMPL_NAME_MAX && tmpl_printable(in, len)) {
				memcpy(key, in + 10, len - 10);
				key[len - 10] = '\0';
				if (json_object_get(p->keys, key) != NULL)
					continue;
			}
			bad++;
			if (tmpl_printable(in, len))
				tmpl_lerr(p, n, label,
				          "${%.*s}: no earlier step produces an artifact of that key",
				          (int)len, in);
			else
				tmpl_lerr(p, n, label, "${artifacts...}: no such artifact");
			continue;
		}
		bad++;
		if (len > 7 && memcmp(in, "params.", 7) == 0 && tmpl_printable(in, len))
			tmpl_lerr(p, n, label, "${%.*s}: no such parameter", (int)len, in);
		else if (tmpl_printable(in, len))
			tmpl_lerr(p, n, label,
			          "unknown reference ${%.*s}; only ${params.NAME} exists", (int)len,
			          in);
		else
			tmpl_lerr(p, n, label,
			          "unknown reference ${...}; only ${params.NAME} exists");
	}
	return bad;
}

/*
 * Once tmpl_refs found every reference of the scalar n good: report each
 * one naming a parameter of another type than type (one whose type is
 * unknown was reported already).  Returns the number of errors reported.
 */
static int
tmpl_refs_typed(struct tmpl_parse *p, const struct tn *n, const char *label, int type)
{
	const char *s = n->s, *in, *end;
	const struct tparam *t;
	size_t i, len;
	int bad = 0;

	for (i = 0; i + 1 < n->len; i++) {
		if (s[i] != '$' || s[i + 1] != '{')
			continue;
		in = s + i + 2;
		if ((end = memchr(in, '}', n->len - i - 2)) == NULL)
			break;
		len = (size_t)(end - in);
		i = (size_t)(end - s);
		if (len <= 7 || (t = tmpl_param(p, in + 7, len - 7)) == NULL || t->type == type ||
		    t->type == PT_UNKNOWN)
			continue;
		tmpl_lerr(p, n, label, "${params.%s} is not a %s parameter", t->name,
		          tmpl_ptypes[type]);
		bad++;
	}
	return bad;
}

/* When n is exactly "${params.NAME}" of a declared parameter, that one. */
static const struct tparam *
tmpl_exact_ref(const struct tmpl_parse *p, const struct tn *n)
{
	if (n->type != TN_SCALAR || n->len < 10 || memcmp(n->s, "${params.", 9) != 0 ||
	    n->s[n->len - 1] != '}' || memchr(n->s + 9, '}', n->len - 10) != NULL)
		return NULL;
	return tmpl_param(p, n->s + 9, n->len - 10);
}

/* A string that may hold references (tmpl_str, then tmpl_refs). */
static json_t *
tmpl_text(struct tmpl_parse *p, const struct tn *n, const char *label, int flags, size_t max)
{
	json_t *s = tmpl_str(p, n, label, flags, max);

	if (s != NULL && tmpl_refs(p, n, label, flags) > 0) {
		json_decref(s);
		return NULL;
	}
	return s;
}

/* ---- params ------------------------------------------------------------- */

enum { P_TYPE, P_REQUIRED, P_DEFAULT, P_DESCRIPTION, P_NKEYS };
static const char *const tmpl_param_keys[P_NKEYS] = {"type", "required", "default", "description"};

/* The default value of a parameter of type type. */
static json_t *
tmpl_param_default(struct tmpl_parse *p, const struct tn *n, const char *label, int type)
{
	long long v;
	int b;

	switch (type) {
	case PT_INT:
		return tmpl_int(p, n, label, -TMPL_INT_MAX, TMPL_INT_MAX, &v) == 0 ? json_integer(v)
		                                                                   : NULL;
	case PT_BOOL:
		return tmpl_bool(p, n, label, &b) == 0 ? json_boolean(b) : NULL;
	case PT_STRING:
		return tmpl_str(p, n, label, TS_EMPTY_OK | TS_TEXT, TMPL_TEXT_MAX);
	case PT_REPOREF:
		return tmpl_str(p, n, label, 0, TMPL_LINE_MAX);
	default: /* the type is wrong, reported: nothing to check against */
		return NULL;
	}
}

/* One parameter's mapping m; returns its compiled object and sets *type. */
static json_t *
tmpl_param_def(struct tmpl_parse *p, const struct tn *m, const char *label, int *type)
{
	const struct tn *val[P_NKEYS], *at[P_NKEYS];
	char lab[TMPL_LABEL_MAX];
	json_t *o = json_object();
	int req = 0;

	*type = PT_UNKNOWN;
	if (o == NULL || tmpl_want_map(p, m, label) == -1)
		return o;
	tmpl_fields(p, m, label, tmpl_param_keys, P_NKEYS, val, at);
	tmpl_label(lab, sizeof(lab), label, "type");
	if (tmpl_need(p, m, label, val[P_TYPE], "type") == 0)
		*type = tmpl_enum(p, val[P_TYPE], lab, tmpl_ptypes, TMPL_NELEM(tmpl_ptypes));
	if (*type < 0)
		*type = PT_UNKNOWN;
	tj_set(p, o, "type", *type == PT_UNKNOWN ? json_null() : json_string(tmpl_ptypes[*type]));
	tmpl_label(lab, sizeof(lab), label, "required");
	if (val[P_REQUIRED] != NULL)
		(void)tmpl_bool(p, val[P_REQUIRED], lab, &req);
	tj_set(p, o, "required", json_boolean(req));
	tmpl_label(lab, sizeof(lab), label, "default");
	if (val[P_DEFAULT] != NULL && req)
		tmpl_lerr(p, at[P_DEFAULT], lab, "a required parameter cannot have a default");
	else if (val[P_DEFAULT] != NULL)
		tj_set(p, o, "default", tmpl_param_default(p, val[P_DEFAULT], lab, *type));
	if (json_object_get(o, "default") == NULL)
		tj_set(p, o, "default", json_null());
	tmpl_label(lab, sizeof(lab), label, "description");
	tj_set(p, o, "description",
	       val[P_DESCRIPTION] == NULL
	           ? json_string("")
	           : tmpl_str(p, val[P_DESCRIPTION], lab, TS_EMPTY_OK | TS_TEXT, TMPL_DESC_MAX));
	return o;
}

/* The params mapping: fills p->param and returns the compiled object. */
static json_t *
tmpl_params(struct tmpl_parse *p, const struct tn *m)
{
	char lab[TMPL_LABEL_MAX];
	json_t *o = json_object();
	const struct tn *k;
	size_t i;
	int type;

	if (o == NULL || m == NULL || tmpl_want_map(p, m, "params") == -1)
		return o;
	for (i = 0; i + 1 < m->nkid; i += 2) {
		k = m->kid[i];
		if (k->type == TN_ALIAS)
			continue;
		if (k->type != TN_SCALAR) {
			tmpl_lerr(p, k, "params", "a key must be a scalar, not %s", tn_kind(k));
			continue;
		}
		if (!tmpl_match(&rx_param, k->s, k->len)) {
			tmpl_lerr(p, k, "params", "a parameter name must match %s", rx_param.text);
			continue;
		}
		if (tmpl_param(p, k->s, k->len) != NULL) {
			tmpl_lerr(p, k, "params", "duplicate key '%s'", k->s);
			continue;
		}
		if (p->nparam == TMPL_MAX_PARAMS) {
			tmpl_lerr(p, k, "params", "at most %d parameters", TMPL_MAX_PARAMS);
			break;
		}
		tmpl_label(lab, sizeof(lab), "params", k->s);
		memcpy(p->param[p->nparam].name, k->s, k->len + 1);
		tj_set(p, o, k->s, tmpl_param_def(p, m->kid[i + 1], lab, &type));
		p->param[p->nparam++].type = type;
	}
	return o;
}

/* ---- workspace and budget ----------------------------------------------- */

enum { W_REPO, W_REF, W_ACCESS, W_NKEYS };
static const char *const tmpl_ws_keys[W_NKEYS] = {"repo", "ref", "access"};
static const char *const tmpl_access[] = {"readWrite", "readOnly"};

/* workspace.repo: exactly ${params.NAME} of a repoRef parameter. */
static json_t *
tmpl_ws_repo(struct tmpl_parse *p, const struct tn *n)
{
	const struct tparam *t;
	json_t *s = tmpl_text(p, n, "workspace.repo", 0, TMPL_LINE_MAX);

	if (s == NULL)
		return NULL;
	t = tmpl_exact_ref(p, n);
	if (t == NULL || (t->type != PT_REPOREF && t->type != PT_UNKNOWN)) {
		tmpl_lerr(p, n, "workspace.repo",
		          "must be ${params.NAME} naming a repoRef "
		          "parameter");
		json_decref(s);
		return NULL;
	}
	return s;
}

/*
 * The scalar n (at most TMPL_REF_MAX bytes, its references good) with each
 * ${...} replaced by "x" into buf (TMPL_REF_MAX + 1 bytes); returns the
 * length.  What the ref rules refuse in that text they refuse whatever the
 * references become: "x" neither ends, starts nor joins any sequence they
 * refuse, so what they find is in the text around the references, and the
 * text only shrinks.
 */
static size_t
tmpl_ref_sample(const struct tn *n, char *buf)
{
	const char *end;
	size_t i, len = 0;

	for (i = 0; i < n->len; i++) {
		if (n->s[i] == '$' && i + 1 < n->len && n->s[i + 1] == '{' &&
		    (end = memchr(n->s + i, '}', n->len - i)) != NULL) {
			buf[len++] = 'x';
			i = (size_t)(end - n->s);
		} else {
			buf[len++] = n->s[i];
		}
	}
	return len;
}

/*
 * workspace.ref, optional (null): a literal judged here by the ref rules
 * (tmpl_ref_problem), or text holding references to string parameters,
 * judged by the same rules once expanded at submit (api_submit_run), and
 * here as far as the text around the references goes.  Other types of
 * parameter never make a ref: a repoRef names a connection, and an int or
 * a bool is no branch, tag or commit id.
 */
static json_t *
tmpl_ws_ref(struct tmpl_parse *p, const struct tn *n)
{
	char sample[TMPL_REF_MAX + 1];
	const char *why = NULL;
	json_t *s;

	if (n == NULL)
		return json_null();
	if ((s = tmpl_str(p, n, "workspace.ref", 0, TMPL_REF_MAX)) == NULL)
		return NULL;
	if (memmem(n->s, n->len, "${", 2) == NULL)
		why = tmpl_ref_problem(n->s, n->len);
	else if (tmpl_refs(p, n, "workspace.ref", 0) > 0 ||
	         tmpl_refs_typed(p, n, "workspace.ref", PT_STRING) > 0)
		why = ""; /* reported */
	else
		why = tmpl_ref_problem(sample, tmpl_ref_sample(n, sample));
	if (why == NULL)
		return s;
	if (*why != '\0')
		tmpl_lerr(p, n, "workspace.ref", "%s", why);
	json_decref(s);
	return NULL;
}

static json_t *
tmpl_workspace(struct tmpl_parse *p, const struct tn *m)
{
	const struct tn *val[W_NKEYS], *at[W_NKEYS];
	json_t *o = json_object();
	int access = 0;

	if (o == NULL || tmpl_want_map(p, m, "workspace") == -1)
		return o;
	tmpl_fields(p, m, "workspace", tmpl_ws_keys, W_NKEYS, val, at);
	if (tmpl_need(p, m, "workspace", val[W_REPO], "repo") == 0)
		tj_set(p, o, "repo", tmpl_ws_repo(p, val[W_REPO]));
	tj_set(p, o, "ref", tmpl_ws_ref(p, val[W_REF]));
	if (val[W_ACCESS] != NULL)
		access = tmpl_enum(p, val[W_ACCESS], "workspace.access", tmpl_access,
		                   TMPL_NELEM(tmpl_access));
	if (access >= 0)
		tj_set(p, o, "access", json_string(tmpl_access[access]));
	return o;
}

static const char *const tmpl_budget_keys[] = {"usd"};

/* An optional budget: { usd_micros } or null when n is NULL. */
static json_t *
tmpl_budget(struct tmpl_parse *p, const struct tn *n, const char *label)
{
	const struct tn *val[1], *at[1];
	char lab[TMPL_LABEL_MAX];
	long long micros;

	if (n == NULL)
		return json_null();
	if (tmpl_want_map(p, n, label) == -1)
		return NULL;
	tmpl_fields(p, n, label, tmpl_budget_keys, 1, val, at);
	tmpl_label(lab, sizeof(lab), label, "usd");
	if (tmpl_need(p, n, label, val[0], "usd") == -1 || tmpl_usd(p, val[0], lab, &micros) == -1)
		return NULL;
	return json_pack("{sI}", "usd_micros", (json_int_t)micros);
}

/* ---- requires and produces ---------------------------------------------- */

/* Step kinds, which produces needs too. */
enum { K_COMMAND, K_AGENT, K_PATCH, K_CHECKPOINT, K_PR };
static const char *const tmpl_step_kinds[] = {"command", "agent", "patch", "checkpoint",
                                              "pull_request"};

static const char *const tmpl_res_keys[] = {"name", "optional"};

/* One entry of a requires list: a name or { name, optional }. */
static json_t *
tmpl_resource(struct tmpl_parse *p, const struct tn *n, const char *label, json_t *seen)
{
	const struct tn *val[2], *at[2], *nn = n;
	char lab[TMPL_LABEL_MAX];
	const char *name, *nlab = label;
	int opt = 0;

	if (n->type == TN_MAP) {
		tmpl_fields(p, n, label, tmpl_res_keys, 2, val, at);
		tmpl_label(lab, sizeof(lab), label, "optional");
		if (val[1] != NULL)
			(void)tmpl_bool(p, val[1], lab, &opt);
		if (tmpl_need(p, n, label, val[0], "name") == -1)
			return NULL;
		nn = val[0];
		tmpl_label(lab, sizeof(lab), label, "name");
		nlab = lab;
	}
	if ((name = tmpl_name(p, nn, nlab, &rx_id)) == NULL)
		return NULL;
	if (tj_seen(p, seen, name)) {
		tmpl_lerr(p, nn, nlab, "duplicate entry '%s'", name);
		return NULL;
	}
	return json_pack("{sssb}", "name", name, "optional", opt);
}

/* What judges one item of a list: its node, label, and the set of what the
 * list held so far (for duplicates); returns the compiled item or NULL. */
typedef json_t *tmpl_item_fn(struct tmpl_parse *, const struct tn *, const char *, json_t *);

/* A list of at most max items, each judged by item; NULL n: empty. */
static json_t *
tmpl_list(struct tmpl_parse *p, const struct tn *n, const char *label, size_t max,
          tmpl_item_fn *item)
{
	char lab[TMPL_LABEL_MAX];
	json_t *a = json_array(), *seen = json_object();
	size_t i;

	if (a == NULL || seen == NULL)
		p->oom = 1;
	if (a == NULL || seen == NULL || n == NULL || tmpl_want_seq(p, n, label, 0) == -1)
		goto out;
	for (i = 0; i < n->nkid; i++) {
		if (i == max) {
			tmpl_lerr(p, n->kid[i], label, "at most %zu entries", max);
			break;
		}
		tmpl_label_index(lab, sizeof(lab), label, i);
		if (n->kid[i]->type != TN_ALIAS)
			tj_append(p, a, item(p, n->kid[i], lab, seen));
	}
out:
	json_decref(seen);
	return a;
}

/* A requires list (skills or mcp_servers); NULL n is an empty list. */
static json_t *
tmpl_resources(struct tmpl_parse *p, const struct tn *n, const char *label)
{
	return tmpl_list(p, n, label, TMPL_MAX_RESOURCES, tmpl_resource);
}

static const char *const tmpl_req_keys[] = {"skills", "mcp_servers"};

static json_t *
tmpl_requires(struct tmpl_parse *p, const struct tn *n, const char *step)
{
	const struct tn *val[2] = {NULL, NULL}, *at[2];
	char lab[TMPL_LABEL_MAX], sub[TMPL_LABEL_MAX];
	json_t *o;

	tmpl_label(lab, sizeof(lab), step, "requires");
	if (n != NULL && tmpl_want_map(p, n, lab) == 0)
		tmpl_fields(p, n, lab, tmpl_req_keys, 2, val, at);
	if ((o = json_object()) == NULL)
		return NULL;
	tmpl_label(sub, sizeof(sub), lab, "skills");
	tj_set(p, o, "skills", tmpl_resources(p, val[0], sub));
	tmpl_label(sub, sizeof(sub), lab, "mcp_servers");
	tj_set(p, o, "mcp_servers", tmpl_list(p, val[1], sub, MCPSPEC_STEP_SERVERS_MAX, tmpl_resource));
	return o;
}

enum { A_TEXT, A_MD, A_JSON, A_PATCH };
static const char *const tmpl_art_kinds[] = {"text", "md", "json", "patch"};
static const char *const tmpl_art_ext[] = {".txt", ".md", ".json", ".patch"};
enum { O_KEY, O_KIND, O_REQUIRED, O_FILE, O_NKEYS };
static const char *const tmpl_out_keys[O_NKEYS] = {"key", "kind", "required", "file"};

/* What a step's produces list held, for the patch step's rule. */
struct tmpl_outs {
	size_t n;      /* entries */
	size_t npatch; /* of kind patch */
	int unsure;    /* an entry's kind is unknown: the rule cannot be judged */
};

/* produces[].file: a single file name, default the key with its kind's
 * extension; no two entries of one step share a file. */
static json_t *
tmpl_out_file(struct tmpl_parse *p, const struct tn *n, const char *label, const char *key,
              int kind, json_t *files)
{
	char file[TMPL_FILE_MAX + 1];

	if (n == NULL && (key == NULL || kind < 0))
		return NULL;
	if (n == NULL)
		(void)fmt_ok(file, sizeof(file), "%s%s", key, tmpl_art_ext[kind]);
	else if (tmpl_scalar(p, n, label, "a file name") == -1) {
		return NULL;
	} else if (!tmpl_match(&rx_file, n->s, n->len) || strcmp(n->s, ".") == 0 ||
	           strcmp(n->s, "..") == 0) {
		tmpl_lerr(p, n, label, "must be a file name matching %s, not . or ..",
		          rx_file.text);
		return NULL;
	} else {
		memcpy(file, n->s, n->len + 1);
	}
	if (n != NULL && tj_seen(p, files, file)) {
		tmpl_lerr(p, n, label, "duplicate file '%s' in this step", file);
		return NULL;
	}
	if (n == NULL)
		(void)tj_seen(p, files, file);
	return json_string(file);
}

/* One produces entry of a step of kind skind (-1: unknown). */
static json_t *
tmpl_out(struct tmpl_parse *p, const struct tn *m, const char *label, int skind, json_t *files,
         struct tmpl_outs *outs)
{
	const struct tn *val[O_NKEYS], *at[O_NKEYS];
	char lab[TMPL_LABEL_MAX];
	const char *key = NULL;
	json_t *o;
	int kind = -1;

	outs->n++;
	if (tmpl_want_map(p, m, label) == -1 || (o = json_object()) == NULL) {
		outs->unsure = 1;
		return NULL;
	}
	tmpl_fields(p, m, label, tmpl_out_keys, O_NKEYS, val, at);
	tmpl_label(lab, sizeof(lab), label, "key");
	if (tmpl_need(p, m, label, val[O_KEY], "key") == 0 &&
	    (key = tmpl_name(p, val[O_KEY], lab, &rx_id)) != NULL && tj_seen(p, p->keys, key)) {
		tmpl_lerr(p, val[O_KEY], lab, "duplicate artifact key '%s'", key);
		key = NULL;
	}
	tj_set(p, o, "key", key != NULL ? json_string(key) : NULL);
	tmpl_label(lab, sizeof(lab), label, "kind");
	if (tmpl_need(p, m, label, val[O_KIND], "kind") == 0)
		kind = tmpl_enum(p, val[O_KIND], lab, tmpl_art_kinds, TMPL_NELEM(tmpl_art_kinds));
	if (kind == A_PATCH && skind >= 0 && skind != K_PATCH) {
		tmpl_lerr(p, val[O_KIND], lab, "patch artifacts come only from patch steps");
		kind = -1;
	}
	outs->unsure |= kind < 0;
	outs->npatch += kind == A_PATCH;
	tj_set(p, o, "kind", kind >= 0 ? json_string(tmpl_art_kinds[kind]) : NULL);
	tmpl_label(lab, sizeof(lab), label, "required");
	tj_set(p, o, "required", tmpl_jbool(p, val[O_REQUIRED], lab, 0));
	tmpl_label(lab, sizeof(lab), label, "file");
	tj_set(p, o, "file", tmpl_out_file(p, val[O_FILE], lab, key, kind, files));
	return o;
}

static json_t *
tmpl_produces(struct tmpl_parse *p, const struct tn *n, const char *step, int skind,
              struct tmpl_outs *outs)
{
	char lab[TMPL_LABEL_MAX], item[TMPL_LABEL_MAX];
	json_t *a = json_array(), *files = json_object();
	size_t i;

	memset(outs, 0, sizeof(*outs));
	tmpl_label(lab, sizeof(lab), step, "produces");
	if (a == NULL || files == NULL)
		p->oom = 1;
	if (a == NULL || files == NULL || n == NULL || tmpl_want_seq(p, n, lab, 0) == -1) {
		outs->unsure = n != NULL;
		goto out;
	}
	for (i = 0; i < n->nkid; i++) {
		if (i == TMPL_MAX_PRODUCES) {
			tmpl_lerr(p, n->kid[i], lab, "at most %d entries", TMPL_MAX_PRODUCES);
			break;
		}
		tmpl_label_index(item, sizeof(item), lab, i);
		tj_append(p, a, tmpl_out(p, n->kid[i], item, skind, files, outs));
	}
out:
	json_decref(files);
	return a;
}

/* ---- network ------------------------------------------------------------ */

#define TMPL_MAX_ALLOW 64   /* entries of a network.allow list */
#define TMPL_MAX_PRESETS 16 /* names of a network.presets list */

static const struct tmpl_rx rx_preset = {TMPL_LOWER TMPL_DIGIT, TMPL_LOWER TMPL_DIGIT "_-", 32,
                                         "[a-z0-9][a-z0-9_-]{0,31}"};

/*
 * One network.allow entry (egress_rule_parse), as its canonical text.  A
 * reference is refused before anything else: the network is the
 * template's to give, never a run's parameters.
 */
static json_t *
tmpl_allow_entry(struct tmpl_parse *p, const struct tn *n, const char *label, json_t *seen)
{
	char text[EGRESS_RULE_TEXT_MAX + 1];
	struct egress_rule r;
	const char *why;

	if (tmpl_scalar(p, n, label, "a host name") == -1)
		return NULL;
	if (memmem(n->s, n->len, "${", 2) != NULL) {
		tmpl_lerr(p, n, label, "no ${...} in a network entry: parameters never widen "
		                       "the network");
		return NULL;
	}
	if ((why = egress_rule_parse(n->s, n->len, &r)) != NULL) {
		tmpl_lerr(p, n, label, "%s", why);
		return NULL;
	}
	egress_rule_format(&r, text, sizeof(text));
	if (tj_seen(p, seen, text)) {
		tmpl_lerr(p, n, label, "duplicate entry '%s'", text);
		return NULL;
	}
	return json_string(text);
}

/* One network.presets name: checked here for its form only (tmpl.h). */
static json_t *
tmpl_preset(struct tmpl_parse *p, const struct tn *n, const char *label, json_t *seen)
{
	const char *name;

	if ((name = tmpl_name(p, n, label, &rx_preset)) == NULL)
		return NULL;
	if (tj_seen(p, seen, name)) {
		tmpl_lerr(p, n, label, "duplicate entry '%s'", name);
		return NULL;
	}
	return json_string(name);
}

static const char *const tmpl_net_keys[] = {"allow", "presets"};

/* network: { allow: [...], presets: [...] } at label ("network" or a
 * step's); null when n is NULL (none given). */
static json_t *
tmpl_network(struct tmpl_parse *p, const struct tn *n, const char *label)
{
	const struct tn *val[2], *at[2];
	char lab[TMPL_LABEL_MAX];
	json_t *o;

	if (n == NULL)
		return json_null();
	if (tmpl_want_map(p, n, label) == -1 || (o = json_object()) == NULL)
		return NULL;
	tmpl_fields(p, n, label, tmpl_net_keys, 2, val, at);
	tmpl_label(lab, sizeof(lab), label, "allow");
	tj_set(p, o, "allow", tmpl_list(p, val[0], lab, TMPL_MAX_ALLOW, tmpl_allow_entry));
	tmpl_label(lab, sizeof(lab), label, "presets");
	tj_set(p, o, "presets", tmpl_list(p, val[1], lab, TMPL_MAX_PRESETS, tmpl_preset));
	return o;
}

/* ---- steps -------------------------------------------------------------- */

#define KB(k) (1u << (k))
#define K_ALL (KB(K_COMMAND) | KB(K_AGENT) | KB(K_PATCH) | KB(K_CHECKPOINT) | KB(K_PR))

enum {
	S_ID,
	S_KIND,
	S_RETRY,
	S_TIMEOUT,
	S_ALLOW_FAILURE,
	S_WHEN,
	S_REQUIRES,
	S_PRODUCES,
	S_NETWORK,
	S_RUN,
	S_PROMPT,
	S_MAX_TURNS,
	S_MESSAGE,
	S_EXPIRES_IN,
	S_TITLE,
	S_BODY,
	S_BRANCH,
	S_BASE,
	S_DRAFT,
	S_NKEYS
};
static const char *const tmpl_step_keys[S_NKEYS] = {
    "id",      "kind", "retry",  "timeout",   "allow_failure", "when",       "requires",
    "produces", "network", "run", "prompt", "max_turns",     "message", "expires_in",
    "title",    "body", "branch", "base", "draft"};
/* The kinds of step each key belongs to. */
static const unsigned tmpl_step_key_kinds[S_NKEYS] = {
    [S_ID] = K_ALL,
    [S_KIND] = K_ALL,
    [S_RETRY] = K_ALL & ~KB(K_CHECKPOINT),
    [S_TIMEOUT] = K_ALL,
    [S_ALLOW_FAILURE] = K_ALL,
    [S_WHEN] = K_ALL,
    [S_REQUIRES] = K_ALL & ~KB(K_CHECKPOINT),
    [S_PRODUCES] = KB(K_COMMAND) | KB(K_AGENT) | KB(K_PATCH),
    [S_NETWORK] = KB(K_COMMAND) | KB(K_AGENT), /* the kinds that run in the sandbox */
    [S_RUN] = KB(K_COMMAND),
    [S_PROMPT] = KB(K_AGENT),
    [S_MAX_TURNS] = KB(K_AGENT),
    [S_MESSAGE] = KB(K_CHECKPOINT),
    [S_EXPIRES_IN] = KB(K_CHECKPOINT),
    [S_TITLE] = KB(K_PR),
    [S_BODY] = KB(K_PR),
    [S_BRANCH] = KB(K_PR),
    [S_BASE] = KB(K_PR),
    [S_DRAFT] = KB(K_PR),
};

struct tstep {
	const char *label;             /* "phases[1].steps[0]" */
	const struct tn *m;            /* the step's mapping */
	const struct tn *val[S_NKEYS]; /* values of its keys, NULL when absent */
	const struct tn *at[S_NKEYS];  /* and the keys */
	int kind;                      /* K_*, -1 when missing or wrong */
	json_t *o;                     /* the compiled step */
};

/* The label of key i of the step. */
static const char *
tmpl_step_label(const struct tstep *st, size_t i, char *buf, size_t bufsz)
{
	tmpl_label(buf, bufsz, st->label, tmpl_step_keys[i]);
	return buf;
}

static json_t *
tmpl_when(struct tmpl_parse *p, const struct tn *n, const char *label)
{
	static const char *const conds[] = {"success", "failure", "always"};
	const struct tparam *t;
	size_t i;

	if (n == NULL)
		return json_string("success");
	if (tmpl_scalar(p, n, label, "a condition") == -1)
		return NULL;
	for (i = 0; i < TMPL_NELEM(conds); i++)
		if (tn_is(n, conds[i]))
			return json_string(conds[i]);
	if (memmem(n->s, n->len, "${", 2) != NULL && tmpl_refs(p, n, label, 0) > 0)
		return NULL;
	if ((t = tmpl_exact_ref(p, n)) != NULL && (t->type == PT_BOOL || t->type == PT_UNKNOWN))
		return json_stringn(n->s, n->len);
	if (t != NULL)
		tmpl_lerr(p, n, label, "${params.%s} is not a bool parameter", t->name);
	else
		tmpl_lerr(p, n, label,
		          "expected success, failure, always or ${params.NAME} "
		          "naming a bool parameter");
	return NULL;
}

/* Refuse the keys of the step that its kind does not have. */
static void
tmpl_step_foreign(struct tmpl_parse *p, struct tstep *st)
{
	const char *k;
	size_t i;

	if (st->kind < 0)
		return;
	k = tmpl_step_kinds[st->kind];
	for (i = 0; i < S_NKEYS; i++) {
		if (st->val[i] == NULL || (tmpl_step_key_kinds[i] & KB(st->kind)))
			continue;
		tmpl_lerr(p, st->at[i], st->label, "%s: not a key of a%s %s step",
		          tmpl_step_keys[i], k[0] == 'a' ? "n" : "", k);
		st->val[i] = NULL;
	}
}

/* id, kind and the keys every kind has (retry ... produces). */
static void
tmpl_step_common(struct tmpl_parse *p, struct tstep *st)
{
	char lab[TMPL_LABEL_MAX];
	struct tmpl_outs outs;
	long long timeout =
	    st->kind == K_COMMAND || st->kind == K_AGENT || st->kind < 0 ? 3600 : 600;
	const char *id = NULL;

	if (tmpl_need(p, st->m, st->label, st->val[S_ID], "id") == 0 &&
	    (id = tmpl_name(p, st->val[S_ID], tmpl_step_label(st, S_ID, lab, sizeof(lab)),
	                    &rx_id)) != NULL &&
	    tj_seen(p, p->ids, id)) {
		tmpl_lerr(p, st->val[S_ID], lab, "duplicate step id '%s'", id);
		id = NULL;
	}
	tj_set(p, st->o, "id", id != NULL ? json_string(id) : NULL);
	tj_set(p, st->o, "kind", st->kind >= 0 ? json_string(tmpl_step_kinds[st->kind]) : NULL);
	tj_set(p, st->o, "retry",
	       tmpl_jint(p, st->val[S_RETRY], tmpl_step_label(st, S_RETRY, lab, sizeof(lab)), 0, 10,
	                 0));
	if (st->val[S_TIMEOUT] != NULL) /* on an error the default stands: not kept anyway */
		(void)tmpl_duration(p, st->val[S_TIMEOUT],
		                    tmpl_step_label(st, S_TIMEOUT, lab, sizeof(lab)), 1, 7 * 86400,
		                    "1s to 7d", &timeout);
	tj_set(p, st->o, "timeout_s", json_integer(timeout));
	tj_set(p, st->o, "allow_failure",
	       tmpl_jbool(p, st->val[S_ALLOW_FAILURE],
	                  tmpl_step_label(st, S_ALLOW_FAILURE, lab, sizeof(lab)), 0));
	tj_set(p, st->o, "when",
	       tmpl_when(p, st->val[S_WHEN], tmpl_step_label(st, S_WHEN, lab, sizeof(lab))));
	tj_set(p, st->o, "requires", tmpl_requires(p, st->val[S_REQUIRES], st->label));
	tj_set(p, st->o, "produces",
	       tmpl_produces(p, st->val[S_PRODUCES], st->label, st->kind, &outs));
	if (st->kind == K_PATCH && !outs.unsure && (outs.n != 1 || outs.npatch != 1))
		tmpl_lerr(p, st->val[S_PRODUCES] != NULL ? st->at[S_PRODUCES] : st->m, st->label,
		          "a patch step must declare exactly one produces entry, of kind patch");
}

/*
 * Key i of the step as text (tmpl_text with flags and max) into the compiled
 * step: required ones are reported when missing (only when the kind is
 * known), optional ones default to "".
 */
static void
tmpl_step_text(struct tmpl_parse *p, struct tstep *st, size_t i, int required, int flags,
               size_t max)
{
	char lab[TMPL_LABEL_MAX];
	json_t *s;

	if (st->val[i] == NULL) {
		if (required && st->kind >= 0)
			(void)tmpl_need(p, st->m, st->label, NULL, tmpl_step_keys[i]);
		else if (!required)
			tj_set(p, st->o, tmpl_step_keys[i], json_string(""));
		return;
	}
	s = tmpl_text(p, st->val[i], tmpl_step_label(st, i, lab, sizeof(lab)), flags, max);
	tj_set(p, st->o, tmpl_step_keys[i], s);
}

/* A pull request's branch or base: "" (the default), a branch's short
 * name (tmpl_branch_problem), or text with ${params.NAME}, judged by the
 * runner once expanded. */
static void
tmpl_step_branch(struct tmpl_parse *p, struct tstep *st, size_t i)
{
	char lab[TMPL_LABEL_MAX];
	const struct tn *n = st->val[i];
	const char *why;

	tmpl_step_text(p, st, i, 0, TS_EMPTY_OK, TMPL_REF_MAX);
	if (n == NULL || n->type != TN_SCALAR || n->len == 0 ||
	    memmem(n->s, n->len, "${", 2) != NULL)
		return;
	tmpl_step_label(st, i, lab, sizeof(lab));
	if ((why = tmpl_branch_problem(n->s, n->len)) != NULL)
		tmpl_lerr(p, n, lab, "not a branch name: %s", why);
}

/* The keys of the step's own kind; with an unknown kind, every such key
 * present is checked as its kind would check it. */
static void
tmpl_step_kind(struct tmpl_parse *p, struct tstep *st)
{
	char lab[TMPL_LABEL_MAX];
	unsigned kb = st->kind >= 0 ? KB(st->kind) : K_ALL;
	long long expires = 86400;

	if (kb & (KB(K_COMMAND) | KB(K_AGENT)))
		tj_set(p, st->o, "network",
		       tmpl_network(p, st->val[S_NETWORK],
		                    tmpl_step_label(st, S_NETWORK, lab, sizeof(lab))));
	if (kb & KB(K_COMMAND))
		tmpl_step_text(p, st, S_RUN, 1, TS_TEXT, TMPL_TEXT_MAX);
	if (kb & KB(K_AGENT)) {
		tmpl_step_text(p, st, S_PROMPT, 1, TS_TEXT, TMPL_TEXT_MAX);
		tj_set(p, st->o, "max_turns",
		       tmpl_jint(p, st->val[S_MAX_TURNS],
		                 tmpl_step_label(st, S_MAX_TURNS, lab, sizeof(lab)), 1, 1000, 50));
	}
	if (kb & KB(K_CHECKPOINT)) {
		tmpl_step_text(p, st, S_MESSAGE, 1, TS_TEXT, TMPL_DESC_MAX);
		if (st->val[S_EXPIRES_IN] != NULL)
			(void)tmpl_duration(p, st->val[S_EXPIRES_IN],
			                    tmpl_step_label(st, S_EXPIRES_IN, lab, sizeof(lab)), 60,
			                    30 * 86400, "1m to 30d", &expires);
		tj_set(p, st->o, "expires_s", json_integer(expires));
	}
	if (kb & KB(K_PR)) {
		tmpl_step_text(p, st, S_TITLE, 0, TS_EMPTY_OK, TMPL_LINE_MAX);
		tmpl_step_text(p, st, S_BODY, 0, TS_EMPTY_OK | TS_TEXT | TS_ARTIFACTS,
		               TMPL_TEXT_MAX);
		tmpl_step_branch(p, st, S_BRANCH);
		tmpl_step_branch(p, st, S_BASE);
		tj_set(p, st->o, "draft",
		       tmpl_jbool(p, st->val[S_DRAFT], tmpl_step_label(st, S_DRAFT, lab, sizeof(lab)),
		                  1));
	}
}

static json_t *
tmpl_step(struct tmpl_parse *p, const struct tn *m, const char *label)
{
	struct tstep st;
	char lab[TMPL_LABEL_MAX];

	memset(&st, 0, sizeof(st));
	st.label = label;
	st.m = m;
	st.kind = -1;
	if (tmpl_want_map(p, m, label) == -1 || (st.o = json_object()) == NULL)
		return NULL;
	tmpl_fields(p, m, label, tmpl_step_keys, S_NKEYS, st.val, st.at);
	if (tmpl_need(p, m, label, st.val[S_KIND], "kind") == 0)
		st.kind =
		    tmpl_enum(p, st.val[S_KIND], tmpl_step_label(&st, S_KIND, lab, sizeof(lab)),
		              tmpl_step_kinds, TMPL_NELEM(tmpl_step_kinds));
	tmpl_step_foreign(p, &st);
	tmpl_step_common(p, &st);
	tmpl_step_kind(p, &st);
	if (st.kind < 0) { /* only checked: nothing compiled */
		json_decref(st.o);
		return NULL;
	}
	return st.o;
}

/* ---- phases and the document -------------------------------------------- */

enum { PH_NAME, PH_BUDGET, PH_STEPS, PH_NKEYS };
static const char *const tmpl_phase_keys[PH_NKEYS] = {"name", "budget", "steps"};

static json_t *
tmpl_steps(struct tmpl_parse *p, const struct tn *n, const char *label)
{
	char lab[TMPL_LABEL_MAX];
	json_t *a = json_array();
	size_t i;

	if (a == NULL || tmpl_want_seq(p, n, label, 1) == -1)
		return a;
	for (i = 0; i < n->nkid; i++) {
		if (i == TMPL_MAX_STEPS) {
			tmpl_lerr(p, n->kid[i], label, "at most %d steps", TMPL_MAX_STEPS);
			break;
		}
		tmpl_label_index(lab, sizeof(lab), label, i);
		tj_append(p, a, tmpl_step(p, n->kid[i], lab));
	}
	return a;
}

static json_t *
tmpl_phase(struct tmpl_parse *p, const struct tn *m, const char *label)
{
	const struct tn *val[PH_NKEYS], *at[PH_NKEYS];
	char lab[TMPL_LABEL_MAX];
	const char *name = NULL;
	json_t *o;

	if (tmpl_want_map(p, m, label) == -1 || (o = json_object()) == NULL)
		return NULL;
	tmpl_fields(p, m, label, tmpl_phase_keys, PH_NKEYS, val, at);
	tmpl_label(lab, sizeof(lab), label, "name");
	if (tmpl_need(p, m, label, val[PH_NAME], "name") == 0 &&
	    (name = tmpl_name(p, val[PH_NAME], lab, &rx_id)) != NULL &&
	    tj_seen(p, p->phases, name)) {
		tmpl_lerr(p, val[PH_NAME], lab, "duplicate phase name '%s'", name);
		name = NULL;
	}
	tj_set(p, o, "name", name != NULL ? json_string(name) : NULL);
	tmpl_label(lab, sizeof(lab), label, "budget");
	tj_set(p, o, "budget", tmpl_budget(p, val[PH_BUDGET], lab));
	tmpl_label(lab, sizeof(lab), label, "steps");
	if (tmpl_need(p, m, label, val[PH_STEPS], "steps") == 0)
		tj_set(p, o, "steps", tmpl_steps(p, val[PH_STEPS], lab));
	return o;
}

static json_t *
tmpl_phases(struct tmpl_parse *p, const struct tn *n)
{
	char lab[TMPL_LABEL_MAX];
	json_t *a = json_array();
	size_t i;

	if (a == NULL || tmpl_want_seq(p, n, "phases", 1) == -1)
		return a;
	for (i = 0; i < n->nkid; i++) {
		if (i == TMPL_MAX_PHASES) {
			tmpl_lerr(p, n->kid[i], "phases", "at most %d phases", TMPL_MAX_PHASES);
			break;
		}
		tmpl_label_index(lab, sizeof(lab), "phases", i);
		tj_append(p, a, tmpl_phase(p, n->kid[i], lab));
	}
	return a;
}

enum {
	T_NAME,
	T_VERSION,
	T_DESCRIPTION,
	T_PARAMS,
	T_WORKSPACE,
	T_BUDGET,
	T_NETWORK,
	T_PHASES,
	T_NKEYS
};
static const char *const tmpl_top_keys[T_NKEYS] = {
    "name", "version", "description", "params", "workspace", "budget", "network", "phases"};

/* The document's root.  Returns the compiled document (meaningful only
 * when no error was reported), or NULL. */
static json_t *
tmpl_top(struct tmpl_parse *p, const struct tn *root)
{
	const struct tn *val[T_NKEYS], *at[T_NKEYS];
	const char *name;
	json_t *o;

	if (root->type != TN_MAP) {
		if (root->type != TN_ALIAS)
			tmpl_error(p, &root->mark, "the top level must be a mapping, found %s",
			           tn_kind(root));
		return NULL;
	}
	if ((o = json_object()) == NULL)
		return NULL;
	tmpl_fields(p, root, "", tmpl_top_keys, T_NKEYS, val, at);
	if (tmpl_need(p, root, "", val[T_NAME], "name") == 0 &&
	    (name = tmpl_name(p, val[T_NAME], "name", &rx_tmpl)) != NULL)
		tj_set(p, o, "name", json_string(name));
	if (tmpl_need(p, root, "", val[T_VERSION], "version") == 0)
		tj_set(p, o, "version", tmpl_jint(p, val[T_VERSION], "version", 1, 1000000, 1));
	tj_set(p, o, "description",
	       val[T_DESCRIPTION] == NULL ? json_string("")
	                                  : tmpl_str(p, val[T_DESCRIPTION], "description",
	                                             TS_EMPTY_OK | TS_TEXT, TMPL_DESC_MAX));
	/* params first: everything after refers to them */
	tj_set(p, o, "params", tmpl_params(p, val[T_PARAMS]));
	if (tmpl_need(p, root, "", val[T_WORKSPACE], "workspace") == 0)
		tj_set(p, o, "workspace", tmpl_workspace(p, val[T_WORKSPACE]));
	tj_set(p, o, "budget", tmpl_budget(p, val[T_BUDGET], "budget"));
	tj_set(p, o, "network", tmpl_network(p, val[T_NETWORK], "network"));
	if (tmpl_need(p, root, "", val[T_PHASES], "phases") == 0)
		tj_set(p, o, "phases", tmpl_phases(p, val[T_PHASES]));
	return o;
}

/* ---- public interface --------------------------------------------------- */

/* Run both passes over buf.  Returns the compiled document when no error
 * was found (p->count 0), else NULL. */
static json_t *
tmpl_run(struct tmpl_parse *p)
{
	struct tn *root;
	json_t *doc = NULL;

	if (yamlev_init(&p->ye, p->buf, p->len, TMPL_MAX_DEPTH, tmpl_yaml_error, p) == -1) {
		p->oom = 1;
		return NULL;
	}
	root = tmpl_stream(p);
	yamlev_free(&p->ye);
	if (root != NULL && !p->ye.stop) {
		p->ids = json_object();
		p->keys = json_object();
		p->phases = json_object();
		if (p->ids == NULL || p->keys == NULL || p->phases == NULL)
			p->oom = 1;
		else
			doc = tmpl_top(p, root);
		json_decref(p->ids);
		json_decref(p->keys);
		json_decref(p->phases);
	}
	tn_free(root);
	if (p->count == 0 && !p->oom && doc != NULL)
		return doc;
	json_decref(doc);
	return NULL;
}

int
tmpl_compile(const char *name, const unsigned char *buf, size_t len, json_t **out, char *errbuf,
             size_t errsz, unsigned *nerr)
{
	static const unsigned char empty[1];
	struct tmpl_parse p;
	size_t elen = 0;
	json_t *doc;

	*out = NULL;
	if (errbuf != NULL && errsz > 0)
		errbuf[0] = '\0';
	else
		errbuf = NULL;
	if (nerr != NULL)
		*nerr = 1;
	if (name == NULL)
		name = "(template)";
	if (len > TMPL_MAX_SIZE) {
		errbuf_append(errbuf, errsz, &elen, "%s: larger than %d bytes\n", name,
		            TMPL_MAX_SIZE);
		return -1;
	}
	memset(&p, 0, sizeof(p));
	p.name = name;
	p.buf = buf != NULL ? buf : empty;
	p.len = buf != NULL ? len : 0;
	doc = tmpl_run(&p);
	tmpl_err_flush(&p, errbuf, errsz);
	if (nerr != NULL)
		*nerr = p.count;
	if (doc == NULL)
		return -1;
	*out = doc;
	return 0;
}

/* Read fd into a new buffer of TMPL_MAX_SIZE + 1 bytes (caller frees),
 * stopping one byte past the limit.  Returns the length read, or -1 with
 * errno set. */
static ssize_t
tmpl_read(int fd, unsigned char **out)
{
	unsigned char *buf;
	size_t len = 0;
	ssize_t n;

	if ((buf = malloc(TMPL_MAX_SIZE + 1)) == NULL)
		return -1;
	while (len <= TMPL_MAX_SIZE) {
		n = read(fd, buf + len, TMPL_MAX_SIZE + 1 - len);
		if (n == 0)
			break;
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			free(buf);
			return -1;
		}
		len += (size_t)n;
	}
	*out = buf;
	return (ssize_t)len;
}

/* A whole-file error: "path: reason", the only line of errbuf. */
static int TMPL_FMT(4, 5)
    tmpl_file_error(char *errbuf, size_t errsz, unsigned *nerr, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (nerr != NULL)
		*nerr = 1;
	if (errbuf == NULL || errsz == 0)
		return -1;
	va_start(ap, fmt);
	n = vsnprintf(errbuf, errsz, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= errsz) /* a line that does not fit is dropped */
		errbuf[0] = '\0';
	return -1;
}

int
tmpl_compile_file(const char *path, json_t **out, char *errbuf, size_t errsz, unsigned *nerr)
{
	unsigned char *buf = NULL;
	struct stat st;
	ssize_t n;
	int fd, rc;

	*out = NULL;
	if (errbuf != NULL && errsz > 0)
		errbuf[0] = '\0';
	/* O_NONBLOCK: a FIFO at path must not hang the caller. */
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)) == -1)
		return tmpl_file_error(errbuf, errsz, nerr, "%s: %s\n", path, strerror(errno));
	if (fstat(fd, &st) == -1) {
		rc = tmpl_file_error(errbuf, errsz, nerr, "%s: %s\n", path, strerror(errno));
	} else if (!S_ISREG(st.st_mode)) {
		rc = tmpl_file_error(errbuf, errsz, nerr, "%s: not a regular file\n", path);
	} else if ((n = tmpl_read(fd, &buf)) == -1) {
		rc = tmpl_file_error(errbuf, errsz, nerr, "%s: %s\n", path, strerror(errno));
	} else {
		rc = tmpl_compile(path, buf, (size_t)n, out, errbuf, errsz, nerr);
		free(buf);
	}
	close(fd);
	return rc;
}
