/*
 * Drive gh_forge_pr (githelper/forge.h) from the command line:
 *   forgereq FORGE API_URL REPO_URL HEAD BASE TITLE BODY_FILE DRAFT NUMBER <TOKEN
 * FORGE is github or gitlab, DRAFT 0 or 1, NUMBER 0 or the pull request to
 * update; the body is read from BODY_FILE ("-" for none), the token from
 * standard input (a trailing newline dropped; never argv), into
 * sodium_malloc'd memory as the git helper holds it.  Prints
 *   ok NUMBER URL opened|updated draft|ready
 * (and "note: NOTE" when there is one) and exits 0, or prints "error:
 * REASON" and exits 1; 2 for a usage or set-up error.
 *
 * For tests/integration/test_forge.sh, until the git helper's request for
 * a pull request (an IMSG of the supervisor's) exists: the same function,
 * called as the helper will call it.
 */
#include <sys/prctl.h>

#include <curl/curl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/forge.h"
#include "common/log.h"
#include "githelper/forge.h"

#define FORGEREQ_TOKEN_MAX 8192
#define FORGEREQ_BODY_MAX (4 * 1024 * 1024)

/* The whole of path, NUL-terminated, or NULL. */
static char *
read_file(const char *path)
{
	FILE *fp;
	char *buf;
	size_t n;

	if ((fp = fopen(path, "rb")) == NULL)
		return NULL;
	if ((buf = malloc(FORGEREQ_BODY_MAX + 1)) == NULL) {
		fclose(fp);
		return NULL;
	}
	n = fread(buf, 1, FORGEREQ_BODY_MAX, fp);
	fclose(fp);
	buf[n] = '\0';
	return buf;
}

int
main(int argc, char *argv[])
{
	struct gh_pr_req req;
	struct gh_pr_res res;
	char err[1024], *token, *body = NULL, *end;
	size_t n;
	int kind, rc;

	if (argc != 10 || (kind = forge_parse(argv[1])) == -1 || kind == FORGE_NONE ||
	    strspn(argv[8], "01") != 1 || argv[8][1] != '\0') {
		fprintf(stderr, "usage: forgereq github|gitlab API_URL REPO_URL HEAD BASE TITLE "
		                "BODY_FILE 0|1 NUMBER <TOKEN\n");
		return 2;
	}
	log_init(1, 0, 0);
	log_procinit("forgereq");
	if (prctl(PR_SET_DUMPABLE, 0) == -1 || sodium_init() < 0 ||
	    curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK ||
	    (token = sodium_malloc(FORGEREQ_TOKEN_MAX + 1)) == NULL) {
		fprintf(stderr, "forgereq: set-up failed\n");
		return 2;
	}
	n = fread(token, 1, FORGEREQ_TOKEN_MAX, stdin);
	while (n > 0 && (token[n - 1] == '\n' || token[n - 1] == '\r'))
		n--;
	token[n] = '\0';
	if (strcmp(argv[7], "-") != 0 && (body = read_file(argv[7])) == NULL) {
		fprintf(stderr, "forgereq: cannot read %s\n", argv[7]);
		return 2;
	}
	memset(&req, 0, sizeof(req));
	req.forge = (enum forge_kind)kind;
	req.api_url = argv[2];
	req.repo_url = argv[3];
	req.token = token;
	req.head = argv[4];
	req.base = argv[5];
	req.title = argv[6];
	req.body = body != NULL ? body : "";
	req.draft = argv[8][0] == '1';
	req.number = strtoull(argv[9], &end, 10);
	if (*end != '\0' || argv[9][0] == '\0') {
		fprintf(stderr, "forgereq: NUMBER must be decimal\n");
		return 2;
	}
	rc = gh_forge_pr(&req, &res, err, sizeof(err));
	sodium_free(token); /* wipes it */
	free(body);
	if (rc == 0) {
		printf("ok %llu %s %s %s\n", (unsigned long long)res.number, res.url,
		       res.opened ? "opened" : "updated", res.draft ? "draft" : "ready");
		if (res.note[0] != '\0')
			printf("note: %s\n", res.note);
	} else {
		printf("error: %s\n", err);
	}
	curl_global_cleanup();
	return rc == 0 ? 0 : 1;
}
