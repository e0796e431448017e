/*
 * yamlev — strict YAML reading with libyaml's event parser, shared by the
 * configuration (supervisor/config.c) and the template compiler (tmpl/).
 *
 * Events, never libyaml's document loader: the loader resolves aliases
 * silently, while events show every anchor, alias and tag, each of which is
 * refused here (they enable alias bombs, and a tag would change what a value
 * means).  Nesting is bounded: libyaml's scanner does work proportional to
 * the flow nesting for every token, so a megabyte of "[" would cost minutes;
 * tokens are scanned lazily, so stopping at the bound stops that too.
 * Syntax errors are placed at a line and column (reader errors carry only a
 * byte offset, turned into a position here).
 */
#ifndef AGRIPPA_YAMLEV_H
#define AGRIPPA_YAMLEV_H

#include <stddef.h>
#include <yaml.h>

/* One problem at mark m (0-based, as libyaml gives it); m is NULL when
 * libyaml ran out of memory.  msg never quotes the input. */
typedef void (*yamlev_err_fn)(void *arg, const yaml_mark_t *m, const char *msg);

struct yamlev {
	yaml_parser_t yp;
	const unsigned char *buf; /* the input, to place reader errors */
	size_t len;
	size_t depth, maxdepth; /* open sequences and mappings, and their bound */
	int stop;               /* after a syntax error or the depth bound: no more events */
	yamlev_err_fn err;
	void *arg;
};

/* Parse buf[0..len) as UTF-8.  Returns 0, or -1 when out of memory (nothing
 * to free then).  Release with yamlev_free. */
int yamlev_init(struct yamlev *y, const unsigned char *buf, size_t len, size_t maxdepth,
    yamlev_err_fn err, void *arg);
void yamlev_free(struct yamlev *y);

/*
 * Read the next event into *ev (the caller deletes it).  Anchors, aliases
 * and tags are reported (each once, at the event) and the event is still
 * returned, so the caller goes on finding errors.  Returns 0, or -1 after a
 * syntax error or too deep a nesting, which is reported once and stops the
 * parse; *ev is then empty (deleting it is harmless).
 */
int yamlev_next(struct yamlev *y, yaml_event_t *ev);

#endif
