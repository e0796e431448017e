/*
 * agrippa(1): the users' command-line client over the HTTP/JSON API
 * (docs/api.md).  One request per command, or one event stream for "run
 * watch"; nothing is kept between runs of the program.
 *
 * Everything the server sends is hostile: no text of it reaches a terminal
 * before text.c made its control characters visible.
 */
#ifndef AGRIPPA_CLIENT_H
#define AGRIPPA_CLIENT_H

#include <curl/curl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

/* Exit status (agrippa(1), EXIT STATUS). */
#define CLI_OK 0
#define CLI_RUN_FAILED 1 /* run watch: the run failed or was cancelled */
#define CLI_USAGE 2      /* a usage error or bad input: nothing was sent */
#define CLI_REFUSED 3    /* the daemon answered with an error */
#define CLI_CONN 4       /* no daemon reached, or no API answer from it */

#define CLI_DEFAULT_URL "http://127.0.0.1:8480"
#define CLI_TOKEN_MAX 132          /* "agr_" + at most 128 base64url characters */
#define CLI_ANSWER_MAX (32u << 20) /* bytes of one JSON answer */

struct cli {
	char base[2048]; /* the daemon's URL, checked, without a trailing / */
	char token[CLI_TOKEN_MAX + 1];
	const char *project; /* -p or AGRIPPA_PROJECT: a name or an id, or NULL */
	char project_id[37]; /* resolved by cli_project */
	int json;            /* -j */
	int tty;             /* standard output is a terminal */
	int redraw;          /* ... that can move its cursor (TERM not dumb) */
	int quiet_404;       /* cli_call says nothing of a 404 */
};

/* agrippa.c */
void cli_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* token.c: the token from AGRIPPA_TOKEN or a file only its owner may read
 * (path NULL: the default file).  Returns CLI_OK, or CLI_USAGE after saying
 * why (never with the token in the message). */
int cli_token_load(struct cli *c, const char *path);
int cli_token_valid(const char *s, size_t n);

/* http.c */
int cli_base_set(struct cli *c, const char *url);
/* A request's URL: the daemon's plus path ("/v1/..."); NULL after saying
 * why.  The caller frees it with curl_url_cleanup. */
CURLU *cli_url(struct cli *c, const char *path);
/* Append name=value (value URL-encoded) to u's query.  Returns 0 or -1. */
int cli_url_query(CURLU *u, const char *name, const char *value);
/* A handle with the daemon's options (timeouts, protocols, no redirects);
 * *hdrs holds the headers the caller adds to and frees with
 * cli_headers_free. */
CURL *cli_handle(struct cli *c, CURLU *u, struct curl_slist **hdrs);
void cli_headers_free(struct curl_slist *h);
/* One request with an optional JSON body.  A 2xx answer's JSON document
 * goes to *answer (the caller's), its status to *status; any other answer
 * is printed (the server's code and message, made harmless) and its exit
 * status returned.  Returns CLI_OK, CLI_REFUSED or CLI_CONN. */
int cli_call(struct cli *c, const char *method, CURLU *u, json_t *body, long *status,
             json_t **answer);
/* Print an error answer (status, its JSON document or NULL) as the others
 * are; returns CLI_REFUSED. */
int cli_refused(struct cli *c, long status, json_t *doc);
/* The transfer failed (res): say so and return CLI_CONN. */
int cli_conn_error(struct cli *c, CURLcode res);
/* Print doc as JSON on standard output (-j). */
void cli_print_json(struct cli *c, json_t *doc, int compact);
/* Resolve c->project (or the user's only project) into c->project_id. */
int cli_project(struct cli *c);

/* text.c: made-harmless output of text from the server. */
/* Write s (n bytes) to f with every control character, C1 control, bidi
 * override and invalid UTF-8 byte shown as visible text ("^[", "\u009b",
 * "\xff"); a newline stays one when keep_nl, a tab stays one when keep_nl. */
void cli_clean(FILE *f, const char *s, size_t n, int keep_nl);
/* The same for a NUL-terminated string, NULL printed as "-". */
void cli_cleans(FILE *f, const char *s);
/* A cleaned copy of s (n bytes) as a NUL-terminated string; caller frees. */
char *cli_cleaned(const char *s, size_t n);
/* Columns a cleaned string takes on a terminal. */
size_t cli_width(const char *s);
/* Cut a cleaned string to at most cols columns, in place. */
void cli_cut(char *s, size_t cols);
/* A string member of o, or NULL. */
const char *cli_str(json_t *o, const char *key);
/* An integer member of o, or dflt. */
long long cli_int(json_t *o, const char *key, long long dflt);
/* usd_micros as "$1.2345"; buf holds 32 bytes. */
const char *cli_usd(long long micros, char *buf, size_t bufsz);
/* Seconds as "59s", "4m05s", "2h07m", "3d04h"; buf holds 32 bytes. */
const char *cli_duration(long long secs, char *buf, size_t bufsz);
/* "2026-11-03T12:00:00Z" as seconds since the epoch, or -1. */
long long cli_time(const char *s);

/* A table of cleaned cells printed with aligned columns. */
struct cli_table {
	size_t ncols, nrows, cap;
	char **cells; /* nrows * ncols, each owned */
};
void cli_table_init(struct cli_table *t, size_t ncols, const char *const *heads);
/* Add a row of ncols raw strings (NULL: "-"), cleaned here. */
void cli_table_row(struct cli_table *t, const char *const *cells);
void cli_table_print(struct cli_table *t, FILE *f);
void cli_table_free(struct cli_table *t);

/* Arguments: a UUID in canonical form, a template name. */
int cli_is_uuid(const char *s);
int cli_is_name(const char *s);

/* cmd.c: the commands but "run watch".  argv[0] is the command's last word. */
int cli_runs(struct cli *c, int argc, char **argv);
int cli_submit(struct cli *c, int argc, char **argv);
int cli_cancel(struct cli *c, int argc, char **argv);
int cli_decide(struct cli *c, int argc, char **argv);
int cli_usage(struct cli *c, int argc, char **argv);
/* download.c */
int cli_artifact_get(struct cli *c, int argc, char **argv);
/* watch.c */
int cli_watch(struct cli *c, int argc, char **argv);

#endif
