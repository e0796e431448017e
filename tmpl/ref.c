/*
 * The revision a run checks out (workspace.ref; tmpl.h).
 *
 * The rules are git check-ref-format's, plus "no leading '-'" so that a ref
 * can never be taken for an option of a git command, with refs/heads/ and
 * refs/tags/ allowed in front of a name.  The same rules, in the same
 * order with the same reasons, are ref_problem() in
 * sql/migrations/0009_ref.sql, which judges a ref expanded at submit; the
 * cases in tests/ref_cases.txt are checked against both.
 */
#include <string.h>

#include "tmpl/tmpl.h"

/* The bytes refused anywhere, each with its reason (control characters
 * and the space are judged before these). */
static const char ref_bad_chars[] = "~^:?*[\\";
static const char *const ref_bad_why[] = {
    "must not contain '~'", "must not contain '^'", "must not contain ':'",  "must not contain '?'",
    "must not contain '*'", "must not contain '['", "must not contain '\\'",
};

/* Exactly 40 or 64 lower-case hex digits: a full commit id. */
static int
ref_is_commit(const char *s, size_t len)
{
	size_t i;

	if (len != 40 && len != 64)
		return 0;
	for (i = 0; i < len; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

/* The reason for a byte that no ref may hold, or NULL. */
static const char *
ref_bad_byte(const char *s, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return "must not contain control characters";
	if (memchr(s, ' ', len) != NULL)
		return "must not contain a space";
	for (i = 0; i < sizeof(ref_bad_chars) - 1; i++)
		if (memchr(s, ref_bad_chars[i], len) != NULL)
			return ref_bad_why[i];
	return NULL;
}

/* The length of the refs/heads/ or refs/tags/ in front of s, or 0. */
static size_t
ref_prefix(const char *s, size_t len)
{
	if (len >= 11 && memcmp(s, "refs/heads/", 11) == 0)
		return 11;
	if (len >= 10 && memcmp(s, "refs/tags/", 10) == 0)
		return 10;
	return 0;
}

static int
ref_has(const char *s, size_t len, const char *what)
{
	return memmem(s, len, what, strlen(what)) != NULL;
}

/* A component (between slashes, or at either end) that ends with ".lock". */
static int
ref_has_lock(const char *s, size_t len)
{
	return (len >= 5 && memcmp(s + len - 5, ".lock", 5) == 0) || ref_has(s, len, ".lock/");
}

const char *
tmpl_ref_problem(const char *s, size_t len)
{
	const char *why;
	size_t pre;

	if (len == 0)
		return "must not be empty";
	if (len > TMPL_REF_MAX)
		return "must be at most 255 bytes";
	if (ref_is_commit(s, len))
		return NULL;
	if ((why = ref_bad_byte(s, len)) != NULL)
		return why;
	pre = ref_prefix(s, len);
	if (s[0] == '-' || (pre < len && s[pre] == '-'))
		return "must not start with '-'";
	if (s[0] == '/')
		return "must not start with '/'";
	if (s[len - 1] == '/')
		return "must not end with '/'";
	if (s[len - 1] == '.')
		return "must not end with '.'";
	if (ref_has(s, len, "//"))
		return "must not contain '//'";
	if (ref_has(s, len, ".."))
		return "must not contain '..'";
	if (ref_has(s, len, "@{"))
		return "must not contain '@{'";
	if (len - pre == 1 && s[pre] == '@')
		return "must not be '@'";
	if (s[0] == '.' || ref_has(s, len, "/."))
		return "must not have a component starting with '.'";
	if (ref_has_lock(s, len))
		return "must not have a component ending with '.lock'";
	return NULL;
}

const char *
tmpl_branch_problem(const char *s, size_t len)
{
	const char *why;

	if ((why = tmpl_ref_problem(s, len)) != NULL)
		return why;
	if (ref_is_commit(s, len))
		return "a commit id";
	if (len >= 5 && memcmp(s, "refs/", 5) == 0)
		return "name the branch without refs/heads/";
	if (len == 4 && memcmp(s, "HEAD", 4) == 0)
		return "HEAD names no branch";
	return NULL;
}
