/*
 * expand: reading the run's template (its compiled JSON) and expanding
 * ${params.NAME} in the text of its steps.
 */
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "runner/core.h"

const char *
runner_jstr(json_t *o, const char *key, const char *def)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s != NULL ? s : def;
}

int
runner_jint(json_t *o, const char *key, int def)
{
	json_t *v = json_object_get(o, key);

	return json_is_integer(v) ? (int)json_integer_value(v) : def;
}

/* A parameter that is not a string, an integer or a boolean expands to
 * nothing. */
char *
runner_expand(const char *s)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	if (f == NULL)
		fatal("open_memstream");
	while (*s != '\0') {
		const char *end;

		if (strncmp(s, "${params.", 9) == 0 && (end = strchr(s + 9, '}')) != NULL) {
			char name[128];
			json_t *v;

			snprintf(name, sizeof(name), "%.*s", (int)(end - s - 9), s + 9);
			v = json_object_get(rn.params, name);
			if (json_is_string(v))
				fputs(json_string_value(v), f);
			else if (json_is_integer(v))
				fprintf(f, "%lld", (long long)json_integer_value(v));
			else if (json_is_boolean(v))
				fputs(json_is_true(v) ? "true" : "false", f);
			s = end + 1;
			continue;
		}
		fputc(*s++, f);
	}
	if (fclose(f) != 0)
		fatal("expand");
	return out;
}
