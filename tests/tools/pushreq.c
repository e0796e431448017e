/*
 * One push by the git helper's own code (githelper/push.c), for
 * tests/integration/test_push.sh and the push measurement:
 *   pushreq MIRROR WORKSPACE BASE BRANCH LEASE URL <TOKEN
 * The token is read from standard input (none when it is empty; never
 * argv or the environment).  Author "Agrippa <agrippa@test.example>", a
 * fixed time, the message "Agrippa test push", the user x-access-token, a
 * 1 MiB cap.  Prints "ok COMMIT" (with " empty" or " already" when so) and
 * exits 0, or "error: REASON" and exits 1; 2 for a usage error.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "githelper/checkout.h"
#include "githelper/push.h"

#define PUSHREQ_TOKEN_MAX 4096
#define PUSHREQ_WHEN 1700000000

int
main(int argc, char *argv[])
{
	static char token[PUSHREQ_TOKEN_MAX + 1];
	struct gh_push_res res;
	struct gh_push_req q;
	char err[512];
	size_t n;

	if (argc != 7) {
		fprintf(stderr, "usage: pushreq MIRROR WORKSPACE BASE BRANCH LEASE URL <TOKEN\n");
		return 2;
	}
	n = fread(token, 1, PUSHREQ_TOKEN_MAX, stdin);
	while (n > 0 && (token[n - 1] == '\n' || token[n - 1] == '\r'))
		n--;
	token[n] = '\0';
	memset(&q, 0, sizeof(q));
	q.mirror = argv[1];
	q.workdir = argv[2];
	q.base = argv[3];
	q.branch = argv[4];
	q.lease = argv[5];
	q.url = argv[6];
	q.cap = 1 << 20;
	q.author_name = "Agrippa";
	q.author_email = "agrippa@test.example";
	q.when = PUSHREQ_WHEN;
	q.message = "Agrippa test push\n";
	q.token = n > 0 ? token : NULL;
	q.username = GH_TOKEN_USER;
	if (gh_push(&q, &res, err, sizeof(err)) != 0) {
		memset(token, 0, sizeof(token));
		printf("error: %s\n", err);
		return 1;
	}
	memset(token, 0, sizeof(token));
	printf("ok %s%s%s\n", res.empty ? "-" : res.commit, res.empty ? " empty" : "",
	       res.already ? " already" : "");
	return 0;
}
