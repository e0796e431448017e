/*
 * Strict YAML events (yamlev.h).
 */
#include "common/yamlev.h"

#include <stdio.h>
#include <string.h>

int
yamlev_init(struct yamlev *y, const unsigned char *buf, size_t len, size_t maxdepth,
    yamlev_err_fn err, void *arg)
{
	memset(y, 0, sizeof(*y));
	if (!yaml_parser_initialize(&y->yp))
		return -1;
	yaml_parser_set_encoding(&y->yp, YAML_UTF8_ENCODING);
	yaml_parser_set_input_string(&y->yp, buf, len);
	y->buf = buf;
	y->len = len;
	y->maxdepth = maxdepth;
	y->err = err;
	y->arg = arg;
	return 0;
}

void
yamlev_free(struct yamlev *y)
{
	yaml_parser_delete(&y->yp);
}

/* The mark of byte offset off in the input: reader errors carry only an
 * offset.  Columns count UTF-8 characters, as libyaml's marks do. */
static yaml_mark_t
yamlev_offset_mark(const struct yamlev *y, size_t off)
{
	yaml_mark_t m = { 0, 0, 0 };
	size_t i;

	for (i = 0; i < off && i < y->len; i++) {
		if (y->buf[i] == '\n') {
			m.line++;
			m.column = 0;
		} else if ((y->buf[i] & 0xc0) != 0x80) {
			m.column++;
		}
	}
	m.index = i;
	return m;
}

/* Report the parser's error; libyaml's problem texts never quote input. */
static void
yamlev_syntax(struct yamlev *y)
{
	const yaml_parser_t *yp = &y->yp;
	const char *problem = yp->problem != NULL ? yp->problem : "invalid YAML";
	yaml_mark_t m = yp->problem_mark;
	char msg[512];

	if (yp->error == YAML_MEMORY_ERROR) {
		y->err(y->arg, NULL, "out of memory");
		return;
	}
	if (yp->error == YAML_READER_ERROR)
		m = yamlev_offset_mark(y, yp->problem_offset);
	if (yp->context != NULL)
		snprintf(msg, sizeof(msg), "syntax error: %s (%s)", problem, yp->context);
	else
		snprintf(msg, sizeof(msg), "syntax error: %s", problem);
	y->err(y->arg, &m, msg);
}

static void
yamlev_check(struct yamlev *y, const yaml_event_t *ev)
{
	const yaml_char_t *anchor = NULL, *tag = NULL;

	if (ev->type == YAML_ALIAS_EVENT) {
		y->err(y->arg, &ev->start_mark, "aliases are not allowed");
		return;
	}
	if (ev->type == YAML_SCALAR_EVENT) {
		anchor = ev->data.scalar.anchor;
		tag = ev->data.scalar.tag;
	} else if (ev->type == YAML_SEQUENCE_START_EVENT) {
		anchor = ev->data.sequence_start.anchor;
		tag = ev->data.sequence_start.tag;
	} else if (ev->type == YAML_MAPPING_START_EVENT) {
		anchor = ev->data.mapping_start.anchor;
		tag = ev->data.mapping_start.tag;
	}
	if (anchor != NULL)
		y->err(y->arg, &ev->start_mark, "anchors are not allowed");
	if (tag != NULL)
		y->err(y->arg, &ev->start_mark, "tags are not allowed");
}

int
yamlev_next(struct yamlev *y, yaml_event_t *ev)
{
	char msg[64];

	memset(ev, 0, sizeof(*ev));
	if (y->stop)
		return -1;
	if (!yaml_parser_parse(&y->yp, ev)) {
		yamlev_syntax(y);
		y->stop = 1;
		memset(ev, 0, sizeof(*ev));
		return -1;
	}
	if (ev->type == YAML_SEQUENCE_START_EVENT || ev->type == YAML_MAPPING_START_EVENT) {
		if (++y->depth > y->maxdepth) {
			snprintf(msg, sizeof(msg), "nested deeper than %zu levels", y->maxdepth);
			y->err(y->arg, &ev->start_mark, msg);
			y->stop = 1;
			yaml_event_delete(ev);
			memset(ev, 0, sizeof(*ev));
			return -1;
		}
	} else if (ev->type == YAML_SEQUENCE_END_EVENT || ev->type == YAML_MAPPING_END_EVENT) {
		y->depth--;
	}
	yamlev_check(y, ev);
	return 0;
}
