/*
 * agrippactl template check FILE: compile a template locally (no daemon
 * needed) and print every error, or "template OK".  With -j, one JSON
 * object: {"ok": true, "template": COMPILED} or {"ok": false, "errors":
 * ["FILE:LINE:COL: message", ...]}.  Exit status 0 when valid, 1 when not,
 * 2 on a usage error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/ctl.h"
#include "tmpl/tmpl.h"

#define TMPL_ERRBUF (64 * 1024)

/* errs is consumed (split in place). */
static void
template_json(int ok, json_t *compiled, char *errs)
{
	json_t *out = json_object(), *arr, *line;
	char *p, *save = NULL;

	json_object_set_new(out, "ok", json_boolean(ok));
	if (ok) {
		json_object_set(out, "template", compiled);
	} else {
		arr = json_array();
		for (p = strtok_r(errs, "\n", &save); p != NULL; p = strtok_r(NULL, "\n", &save)) {
			if ((line = json_string(p)) == NULL) /* not UTF-8 */
				line = json_string("(an error line that is not UTF-8)");
			json_array_append_new(arr, line);
		}
		json_object_set_new(out, "errors", arr);
	}
	json_dumpf(out, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	putchar('\n');
	json_decref(out);
}

int
ctl_template(int argc, char **argv, int json)
{
	json_t *compiled = NULL;
	char *errs;
	int rc;

	if (argc != 3 || strcmp(argv[1], "check") != 0) {
		fprintf(stderr, "usage: agrippactl [-j] template check FILE\n");
		return 2;
	}
	if ((errs = calloc(1, TMPL_ERRBUF)) == NULL) {
		fprintf(stderr, "agrippactl: out of memory\n");
		return 2;
	}
	rc = tmpl_compile_file(argv[2], &compiled, errs, TMPL_ERRBUF, NULL);
	if (json)
		template_json(rc == 0, compiled, errs);
	else if (rc == 0)
		printf("template OK\n");
	else
		fputs(errs, stderr);
	json_decref(compiled);
	free(errs);
	return rc == 0 ? 0 : 1;
}
