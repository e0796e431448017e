/*
 * Pull requests on a forge (DESIGN.md section 5, the pull_request step):
 * open one, or update the one a run already has, over the forge's REST API
 * with libcurl.  Only the git helper links this: the token never leaves it.
 *
 * GitHub (api_url https://api.github.com, or https://HOST/api/v3):
 *  - number != 0: GET /repos/O/R/pulls/N; a pull request that is closed or
 *    merged, or whose head is another branch, is an error (never reopened,
 *    never a second one); else PATCH it with the title and body.
 *  - else POST /repos/O/R/pulls {title, head, base, body, draft}; on 422:
 *     "A pull request already exists": GET /repos/O/R/pulls?head=O:HEAD&
 *       base=BASE&state=open, then PATCH the one whose head is O:HEAD
 *       (opened 0): a retried step finishes the same pull request;
 *     "Draft pull requests are not supported": once more with draft false,
 *       and a note that says so;
 *     "No commits between": an error saying there is nothing to propose.
 *   PATCH cannot change a draft (GitHub's REST API has no way to), so an
 *   update leaves it as the forge has it.
 * GitLab (api_url https://gitlab.com/api/v4, or a self-hosted one), the
 * project named by its URL-encoded path everywhere:
 *  - number != 0: GET /projects/P/merge_requests/IID, the same checks,
 *    then PUT it {title, description};
 *  - else POST /projects/P/merge_requests {source_branch, target_branch,
 *    title, description}, a draft as the title's "Draft: " prefix (GitLab
 *    has no draft attribute); on 409 (one is open for the branch) GET
 *    ...?source_branch=HEAD&target_branch=BASE&state=opened and PUT it.
 *    An update keeps the draft state the merge request has (the prefix is
 *    kept, or left off), as on GitHub.
 * Headers: "Authorization: Bearer TOKEN" for both (GitLab documents it for
 * OAuth tokens and, as its OAuth-compliant header, for personal, project
 * and group tokens; PRIVATE-TOKEN would not take OAuth tokens), User-Agent
 * agrippa/VERSION, Content-Type and Accept (application/vnd.github+json
 * and X-GitHub-Api-Version 2022-11-28 for GitHub, application/json for
 * GitLab).  Bodies are built and read with jansson only.
 *
 * Limits: the title is checked (forge_title_check); the body is cut at the
 * forge's limit in characters, on a character boundary, with
 * FORGE_CUT_MARKER (forge_body_fit; not-UTF-8 bytes become U+FFFD).  An
 * answer is at most GH_FORGE_ANSWER_MAX bytes; a pull request in it must
 * have a positive integer number and an https link on the repository's own
 * host (that of repo_url), or the answer is a clear error.
 *
 * Retries: a transport error (no connection, reset, timeout), 408, 429, any
 * 5xx, and a 403 that is GitHub's rate limit (with Retry-After, or
 * x-ratelimit-remaining 0) are tried again, GH_FORGE_ATTEMPTS times in all,
 * after the forge's Retry-After (seconds or an HTTP date), else
 * x-ratelimit-reset when no request remains, else an exponential backoff
 * from GH_FORGE_BACKOFF_MS (doubling, at most GH_FORGE_BACKOFF_MAX_MS) with
 * jitter (half of it random).  A forge that asks to wait more than
 * GH_FORGE_WAIT_MAX_S fails at once, saying so; the waits of one call add
 * up to at most GH_FORGE_WAIT_TOTAL_S, and the whole call, requests
 * included, ends within GH_FORGE_DEADLINE_S.  A POST that timed out may
 * have opened the pull request: its retry then meets "already exists" (409)
 * and updates it.  Any other status fails with the status and the forge's
 * own message (printable, one line, bounded); 401, 403 and 404 say what to
 * look at.
 *
 * libcurl: https only, no redirect followed (a 3xx is an error naming the
 * status), no proxy whatever the environment says (CURLOPT_PROXY ""), TLS
 * 1.2 at least with the system's trust, CURLOPT_NOSIGNAL, timeouts.  The
 * token goes only into the Authorization header, never into a URL, an
 * error or a log line; the header's copies in our memory are wiped
 * (sodium_memzero) when the call ends, and anything in an answer that
 * equals the token is starred out before it is read.  (libcurl's own
 * request buffer is freed unwiped: the helper process is short-lived and
 * cannot be traced or dump core.)  The caller has called curl_global_init
 * and gives the helper a clean environment (no SSLKEYLOGFILE).
 */
#ifndef AGRIPPA_GH_FORGE_H
#define AGRIPPA_GH_FORGE_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "common/forge.h"

#define GH_FORGE_ANSWER_MAX (1024 * 1024)
#define GH_FORGE_ATTEMPTS 5
#define GH_FORGE_BACKOFF_MS 500
#define GH_FORGE_BACKOFF_MAX_MS 8000
#define GH_FORGE_WAIT_MAX_S 60
#define GH_FORGE_WAIT_TOTAL_S 120
#define GH_FORGE_DEADLINE_S 300
#define GH_FORGE_TIMEOUT_S 60 /* one request */
#define GH_FORGE_CONNECT_TIMEOUT_S 15
#define GH_FORGE_URL_MAX 1024    /* a pull request's link, with its NUL */
#define GH_FORGE_MESSAGE_MAX 300 /* the forge's message in an error */

struct gh_pr_req {
	enum forge_kind forge;   /* GITHUB or GITLAB */
	const char *api_url;     /* checked by forge_api_url_check */
	const char *repo_url;    /* the connection's URL */
	const char *token;       /* NUL-terminated, sodium_malloc'd by the caller */
	const char *head, *base; /* branch names */
	const char *title, *body;
	int draft;
	/* a PR/MR recorded earlier for this run (0: none): update that one */
	uint64_t number;
};

struct gh_pr_res {
	uint64_t number;            /* GitHub number / GitLab iid */
	char url[GH_FORGE_URL_MAX]; /* html_url / web_url */
	int opened;                 /* 1 opened now, 0 an existing one updated */
	int draft;                  /* as the forge has it */
	/* e.g. "drafts are not supported in this repository: opened as a normal pull request" */
	char note[256];
};

/*
 * Open or update the pull request (merge request) of req as the comment
 * above says.  Blocks (waits included) for at most GH_FORGE_DEADLINE_S.
 * Returns 0 with res filled, or -1 with a one-line reason in err (never the
 * token) and res zeroed; nothing is left open on the forge that a retry
 * with the same req would not find and update.
 */
int gh_forge_pr(const struct gh_pr_req *req, struct gh_pr_res *res, char *err, size_t errsz);

/* ---- the answers, for tests/unit/test_forge.c and the fuzz target -------- */

enum gh_pr_state { GH_PR_OPEN, GH_PR_CLOSED, GH_PR_MERGED };

/* A pull request (merge request) as an answer describes it. */
struct gh_pr_seen {
	uint64_t number;            /* number / iid, > 0 */
	char url[GH_FORGE_URL_MAX]; /* https, on the host asked for */
	int draft;
	enum gh_pr_state state;
	char head[256];  /* head.ref / source_branch */
	char base[256];  /* base.ref / target_branch */
	char owner[128]; /* GitHub: head.label's owner ("" for GitLab) */
};

/*
 * The pull request in text (len bytes, an answer of kind's API), whose
 * link must be an https URL on host (an authority, forge_url_authority).
 * Returns 0, or -1 with what is wrong with the answer in err.
 */
int gh_forge_answer_pr(enum forge_kind kind, const char *text, size_t len, const char *host,
                       struct gh_pr_seen *pr, char *err, size_t errsz);

/*
 * In text (a JSON array of pull requests), the first open one whose head
 * is head (on GitHub: of owner, compared without case) and whose base is
 * base.  Returns 1 with *pr set, 0 when none is, -1 with the reason in err
 * when the answer is not a list or an entry before the match is malformed.
 */
int gh_forge_answer_find(enum forge_kind kind, const char *text, size_t len, const char *host,
                         const char *owner, const char *head, const char *base,
                         struct gh_pr_seen *pr, char *err, size_t errsz);

/*
 * The forge's own words in an error answer (GitHub's message and its
 * errors' messages; GitLab's message as a string, a list or an object of
 * lists, or its error), joined with "; "; the first line of an answer that
 * is neither JSON nor HTML; printable ASCII on one line (any other byte
 * becomes '?' or a space), at most outsz - 1 bytes; "" when the answer
 * holds none.
 */
void gh_forge_answer_message(const char *text, size_t len, char *out, size_t outsz);

/*
 * A Retry-After value (RFC 9110 10.2.3): delay-seconds, or an HTTP date
 * taken as the seconds from now (0 once it is past).  Returns the seconds
 * (at most INT32_MAX), or -1 when it is neither.
 */
long gh_forge_retry_after(const char *value, time_t now);

#endif
