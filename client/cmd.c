/*
 * The commands that are one or two requests: runs, run submit, run cancel,
 * approve and reject, usage.  Each prints the answer for a person, or the
 * server's JSON with -j.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/client.h"

/* GET path (with the query of u's caller already set) into *doc. */
static int
get(struct cli *c, CURLU *u, json_t **doc)
{
	long status;
	int rv;

	if (u == NULL)
		return CLI_USAGE;
	rv = cli_call(c, "GET", u, NULL, &status, doc);
	curl_url_cleanup(u);
	return rv;
}

/* The URL of pre + id + post, id a checked UUID or name. */
static CURLU *
url_id(struct cli *c, const char *pre, const char *id, const char *post)
{
	char path[256];

	snprintf(path, sizeof(path), "%s%s%s", pre, id, post);
	return cli_url(c, path);
}

/* An id argument: a UUID, or a usage error naming what it should be. */
static int
id_arg(const char *arg, const char *what)
{
	if (cli_is_uuid(arg))
		return 0;
	fprintf(stderr, "agrippa: not %s id (a UUID such as 0b7e6c2a-...): ", what);
	cli_cleans(stderr, arg);
	fputc('\n', stderr);
	return -1;
}

/* "2026-11-03T12:00:00Z" as "2026-11-03 12:00". */
static const char *
short_time(const char *t, char *buf, size_t bufsz)
{
	if (t == NULL || strlen(t) != 20)
		return t;
	snprintf(buf, bufsz, "%.10s %.5s", t, t + 11);
	return buf;
}

static void
runs_print(json_t *runs)
{
	const char *heads[] = {"ID", "STATUS", "TEMPLATE", "CREATED", "DURATION", "SPENT"};
	char tmpl[160], created[32], dur[32], spent[80], b1[32], b2[32];
	long long start, end;
	struct cli_table t;
	json_t *r, *tj;
	size_t i;

	cli_table_init(&t, 6, heads);
	json_array_foreach(runs, i, r)
	{
		const char *row[6];

		tj = json_object_get(r, "template");
		snprintf(tmpl, sizeof(tmpl), "%.128s %lld",
		         cli_str(tj, "name") ? cli_str(tj, "name") : "-",
		         cli_int(tj, "version", 0));
		start = cli_time(cli_str(r, "started_at"));
		end = cli_time(cli_str(r, "finished_at"));
		if (end < 0)
			end = (long long)time(NULL);
		if (start >= 0)
			cli_duration(end - start, dur, sizeof(dur));
		cli_usd(cli_int(r, "spent_usd_micros", 0), b1, sizeof(b1));
		if (json_is_integer(json_object_get(r, "budget_usd_micros")))
			snprintf(spent, sizeof(spent), "%s of %s", b1,
			         cli_usd(cli_int(r, "budget_usd_micros", 0), b2, sizeof(b2)));
		else
			snprintf(spent, sizeof(spent), "%s", b1);
		row[0] = cli_str(r, "id");
		row[1] = cli_str(r, "status");
		row[2] = tmpl;
		row[3] = short_time(cli_str(r, "created_at"), created, sizeof(created));
		row[4] = start >= 0 ? dur : NULL;
		row[5] = spent;
		cli_table_row(&t, row);
	}
	cli_table_print(&t, stdout);
	cli_table_free(&t);
}

int
cli_runs(struct cli *c, int argc, char **argv)
{
	static const char *const keys[] = {"status", "template", "limit", "cursor"};
	int seen[4] = {0}, i, rv;
	size_t k, n;
	json_t *doc;
	CURLU *u;

	if ((rv = cli_project(c)) != CLI_OK)
		return rv;
	if ((u = url_id(c, "/v1/projects/", c->project_id, "/runs")) == NULL)
		return CLI_USAGE;
	for (i = 1; i < argc; i++) {
		for (k = 0; k < 4; k++) {
			n = strlen(keys[k]);
			if (strncmp(argv[i], keys[k], n) == 0 && argv[i][n] == '=')
				break;
		}
		if (k == 4 || seen[k]++ || cli_url_query(u, keys[k], argv[i] + n + 1) == -1) {
			fputs("agrippa: runs takes status=, template=, limit= and cursor=, each at "
			      "most once, not: ",
			      stderr);
			cli_cleans(stderr, argv[i]);
			fputc('\n', stderr);
			curl_url_cleanup(u);
			return CLI_USAGE;
		}
	}
	if ((rv = get(c, u, &doc)) != CLI_OK)
		return rv;
	if (c->json) {
		cli_print_json(c, doc, 0);
	} else {
		runs_print(json_object_get(doc, "runs"));
		if (cli_str(doc, "next_cursor") != NULL) {
			fputs("more: agrippa runs cursor=", stderr);
			cli_cleans(stderr, cli_str(doc, "next_cursor"));
			fputc('\n', stderr);
		}
	}
	json_decref(doc);
	return CLI_OK;
}

/* name=value as the JSON value of the declared type (string, int, bool,
 * repoRef), or NULL after saying why. */
static json_t *
param_value(const char *name, const char *type, const char *v)
{
	long long n;
	char *end;
	json_t *j;

	if (strcmp(type, "int") == 0) {
		errno = 0;
		n = strtoll(v, &end, 10);
		if (v[0] == '\0' || strchr("-0123456789", v[0]) == NULL || *end != '\0' ||
		    errno != 0 || (v[0] == '0' && v[1] != '\0') ||
		    (v[0] == '-' && (v[1] == '\0' || v[1] == '0'))) {
			fprintf(stderr, "agrippa: parameter %s is an integer, not: ", name);
			cli_cleans(stderr, v);
			fputc('\n', stderr);
			return NULL;
		}
		return json_integer(n);
	}
	if (strcmp(type, "bool") == 0) {
		if (strcmp(v, "true") == 0 || strcmp(v, "false") == 0)
			return json_boolean(v[0] == 't');
		fprintf(stderr, "agrippa: parameter %s is true or false, not: ", name);
		cli_cleans(stderr, v);
		fputc('\n', stderr);
		return NULL;
	}
	if ((j = json_string(v)) == NULL)
		fprintf(stderr, "agrippa: parameter %s: the value is not UTF-8\n", name);
	return j;
}

/* The params object of key=value arguments, typed after the template's
 * declarations (decl, the compiled "params"), or NULL after saying why. */
static json_t *
submit_params(json_t *decl, int argc, char **argv)
{
	json_t *params = json_object(), *d, *v;
	const char *eq, *type, *name;
	char key[65];
	size_t n, k;
	int i;

	for (i = 0; params != NULL && i < argc; i++) {
		eq = strchr(argv[i], '=');
		n = eq != NULL ? (size_t)(eq - argv[i]) : 0;
		if (eq == NULL || n == 0 || n >= sizeof(key) || strchr("0123456789", argv[i][0]) ||
		    strspn(argv[i], "abcdefghijklmnopqrstuvwxyz0123456789_") != n) {
			fputs("agrippa: a parameter is name=value, with a name of a-z, 0-9 and _, "
			      "not: ",
			      stderr);
			cli_cleans(stderr, argv[i]);
			fputc('\n', stderr);
			goto bad;
		}
		memcpy(key, argv[i], n);
		key[n] = '\0';
		if (json_object_get(params, key) != NULL) {
			fprintf(stderr, "agrippa: parameter %s is given twice\n", key);
			goto bad;
		}
		d = json_object_get(decl, key);
		if ((type = cli_str(d, "type")) == NULL) {
			fprintf(stderr, "agrippa: the template has no parameter %s (", key);
			k = 0;
			json_object_foreach(decl, name, d)
			{
				fputs(k++ == 0 ? "its parameters: " : ", ", stderr);
				cli_cleans(stderr, name);
			}
			fputs(k > 0 ? ")\n" : "it has none)\n", stderr);
			goto bad;
		}
		if ((v = param_value(key, type, eq + 1)) == NULL)
			goto bad;
		json_object_set_new(params, key, v);
	}
	return params;
bad:
	json_decref(params);
	return NULL;
}

int
cli_submit(struct cli *c, int argc, char **argv)
{
	json_t *tmpl, *params, *body, *run;
	long status;
	CURLU *u;
	int rv;

	if (!cli_is_name(argv[1])) {
		fputs("agrippa: not a template name (a-z, 0-9 and -): ", stderr);
		cli_cleans(stderr, argv[1]);
		fputc('\n', stderr);
		return CLI_USAGE;
	}
	if ((rv = cli_project(c)) != CLI_OK ||
	    (rv = get(c, url_id(c, "/v1/templates/", argv[1], ""), &tmpl)) != CLI_OK)
		return rv;
	params = submit_params(json_object_get(json_object_get(tmpl, "template"), "params"),
	                       argc - 2, argv + 2);
	json_decref(tmpl);
	if (params == NULL)
		return CLI_USAGE;
	body = json_pack("{s:s,s:o}", "template", argv[1], "params", params);
	if (body == NULL || (u = url_id(c, "/v1/projects/", c->project_id, "/runs")) == NULL) {
		json_decref(body);
		return CLI_USAGE;
	}
	rv = cli_call(c, "POST", u, body, &status, &run);
	curl_url_cleanup(u);
	json_decref(body);
	if (rv != CLI_OK)
		return rv;
	if (c->json) {
		cli_print_json(c, run, 0);
	} else {
		cli_cleans(stdout, cli_str(run, "id"));
		putchar('\n');
	}
	json_decref(run);
	return CLI_OK;
}

int
cli_cancel(struct cli *c, int argc, char **argv)
{
	json_t *run;
	long status;
	CURLU *u;
	int rv;

	if (id_arg(argv[1], "a run") == -1)
		return CLI_USAGE;
	if ((u = url_id(c, "/v1/runs/", argv[1], "/cancel")) == NULL)
		return CLI_USAGE;
	rv = cli_call(c, "POST", u, NULL, &status, &run);
	curl_url_cleanup(u);
	if (rv != CLI_OK)
		return rv;
	if (c->json)
		cli_print_json(c, run, 0);
	else
		printf("%s %s\n", argv[1],
		       status == 202 ? "cancel requested: the run stops at once" : "cancelled");
	json_decref(run);
	return CLI_OK;
}

/*
 * The approval that ID names: the pending approval of the run ID when ID is
 * a run the user may see (*id then holds it), else ID itself.
 */
static int
decide_target(struct cli *c, const char *arg, char *id)
{
	json_t *doc = NULL, *a, *pending = NULL;
	long status;
	size_t i;
	CURLU *u;
	int rv;

	memcpy(id, arg, 37);
	if ((u = url_id(c, "/v1/runs/", arg, "/approvals")) == NULL)
		return CLI_USAGE;
	/* a 404 says ID is no run of ours: then it is an approval's id */
	c->quiet_404 = 1;
	rv = cli_call(c, "GET", u, NULL, &status, &doc);
	c->quiet_404 = 0;
	curl_url_cleanup(u);
	if (rv == CLI_REFUSED && status == 404)
		return CLI_OK;
	if (rv != CLI_OK)
		return rv;
	json_array_foreach(json_object_get(doc, "approvals"), i,
	                   a) if (cli_str(a, "status") != NULL &&
	                          strcmp(cli_str(a, "status"), "pending") == 0) pending = a;
	if (pending == NULL || !cli_is_uuid(cli_str(pending, "id") ? cli_str(pending, "id") : "")) {
		fprintf(stderr, "agrippa: run %s has no pending approval\n", arg);
		rv = CLI_REFUSED;
	} else {
		memcpy(id, cli_str(pending, "id"), 37);
	}
	json_decref(doc);
	return rv;
}

int
cli_decide(struct cli *c, int argc, char **argv)
{
	int approve = strcmp(argv[0], "approve") == 0, rv;
	json_t *body, *a;
	char id[37];
	long status;
	CURLU *u;

	if (id_arg(argv[1], "a run or approval") == -1)
		return CLI_USAGE;
	body = json_pack("{s:s}", "decision", approve ? "approved" : "rejected");
	if (argc > 2 && json_object_set_new(body, "comment", json_string(argv[2])) == -1) {
		cli_err("the comment is not UTF-8");
		json_decref(body);
		return CLI_USAGE;
	}
	if ((rv = decide_target(c, argv[1], id)) != CLI_OK ||
	    (u = url_id(c, "/v1/approvals/", id, "/decide")) == NULL) {
		json_decref(body);
		return rv != CLI_OK ? rv : CLI_USAGE;
	}
	rv = cli_call(c, "POST", u, body, &status, &a);
	curl_url_cleanup(u);
	json_decref(body);
	if (rv != CLI_OK)
		return rv;
	if (c->json) {
		cli_print_json(c, a, 0);
	} else {
		printf("%s approval %s of run ", approve ? "approved" : "rejected", id);
		cli_cleans(stdout, cli_str(a, "run_id"));
		putchar('\n');
	}
	json_decref(a);
	return CLI_OK;
}

int
cli_usage(struct cli *c, int argc, char **argv)
{
	const char *dh[] = {"DAY", "SPENT"}, *ch[] = {"ID", "TEMPLATE", "STATUS", "SPENT"};
	char b1[32], b2[32], b3[32];
	struct cli_table t;
	const char *key;
	json_t *doc, *v;
	size_t i, k = 0;
	CURLU *u;
	int rv;

	if ((rv = cli_project(c)) != CLI_OK)
		return rv;
	if ((u = url_id(c, "/v1/projects/", c->project_id, "/usage")) == NULL)
		return CLI_USAGE;
	if (argc > 1 && cli_url_query(u, "month", argv[1]) == -1) {
		curl_url_cleanup(u);
		cli_err("not a month (YYYY-MM)");
		return CLI_USAGE;
	}
	if ((rv = get(c, u, &doc)) != CLI_OK)
		return rv;
	if (c->json) {
		cli_print_json(c, doc, 0);
		json_decref(doc);
		return CLI_OK;
	}
	fputs("month   ", stdout);
	cli_cleans(stdout, cli_str(doc, "month"));
	printf("\nspent   %s", cli_usd(cli_int(doc, "spent_usd_micros", 0), b1, sizeof(b1)));
	if (json_is_integer(json_object_get(doc, "quota_usd_micros")))
		printf(" of a %s quota",
		       cli_usd(cli_int(doc, "quota_usd_micros", 0), b2, sizeof(b2)));
	printf(", %s reserved\n", cli_usd(cli_int(doc, "reserved_usd_micros", 0), b3, sizeof(b3)));
	printf("tokens  %lld in, %lld out, in %lld model calls\nruns    ",
	       cli_int(doc, "tokens_in", 0), cli_int(doc, "tokens_out", 0),
	       cli_int(doc, "model_calls", 0));
	json_object_foreach(json_object_get(doc, "runs"), key, v)
	{
		fputs(k++ ? ", " : "", stdout);
		cli_cleans(stdout, key);
		printf(" %lld", json_is_integer(v) ? (long long)json_integer_value(v) : 0LL);
	}
	fputs(k ? "\n" : "none\n", stdout);
	if (json_array_size(json_object_get(doc, "days")) > 0) {
		putchar('\n');
		cli_table_init(&t, 2, dh);
		json_array_foreach(json_object_get(doc, "days"), i, v)
		{
			const char *row[2] = {cli_str(v, "day"),
			                      cli_usd(cli_int(v, "usd_micros", 0), b1, sizeof(b1))};
			cli_table_row(&t, row);
		}
		cli_table_print(&t, stdout);
		cli_table_free(&t);
	}
	if (json_array_size(json_object_get(doc, "costliest")) > 0) {
		puts("\ncostliest runs:");
		cli_table_init(&t, 4, ch);
		json_array_foreach(json_object_get(doc, "costliest"), i, v)
		{
			const char *row[4] = {
			    cli_str(v, "id"), cli_str(v, "template"), cli_str(v, "status"),
			    cli_usd(cli_int(v, "spent_usd_micros", 0), b1, sizeof(b1))};
			cli_table_row(&t, row);
		}
		cli_table_print(&t, stdout);
		cli_table_free(&t);
	}
	json_decref(doc);
	return CLI_OK;
}
