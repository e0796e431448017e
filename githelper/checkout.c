/*
 * Clone and sanitize a run's repository (githelper/checkout.h).
 */
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/util.h"
#include "githelper/checkout.h"

/* What the repository may not bring into the work tree's top level. */
static const char *const gh_stripped[] = {GH_STRIPPED_NAMES};

struct gh_cred {
	const char *token;
	int used;
};

int
gh_fail(char *err, size_t errsz, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errsz, fmt, ap);
	va_end(ap);
	return -1;
}

/* libgit2's last error, for a message (it never holds the token: the token
 * is only ever in the credential object). */
const char *
gh_git_error(void)
{
	const git_error *e = git_error_last();

	return e != NULL && e->message != NULL ? e->message : "unknown error";
}

/* The token, once, as user/password; a second ask means it was refused. */
static int
gh_credentials(git_credential **out, const char *url, const char *user, unsigned int allowed,
               void *payload)
{
	struct gh_cred *c = payload;

	(void)url;
	(void)user;
	if (c->token == NULL || c->used || !(allowed & GIT_CREDENTIAL_USERPASS_PLAINTEXT))
		return GIT_PASSTHROUGH;
	c->used = 1;
	return git_credential_userpass_plaintext_new(out, GH_TOKEN_USER, c->token);
}

int
gh_remove_tree(int dfd, const char *name)
{
	return rmtree_at(dfd, name);
}

/* dir (named what in messages): absolute, an existing empty directory (not a
 * link to one). */
static int
gh_check_dir(const char *dir, const char *what, char *err, size_t errsz)
{
	struct stat st;
	struct dirent *de;
	DIR *d;
	int n = 0;

	if (dir[0] != '/')
		return gh_fail(err, errsz, "%s must be an absolute path", what);
	if (lstat(dir, &st) == -1)
		return gh_fail(err, errsz, "%s: %s", what, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return gh_fail(err, errsz, "%s is not a directory", what);
	if ((d = opendir(dir)) == NULL)
		return gh_fail(err, errsz, "%s: %s", what, strerror(errno));
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			n++;
	closedir(d);
	if (n > 0)
		return gh_fail(err, errsz, "%s is not empty", what);
	return 0;
}

/* https://..., file:///..., or /...; nothing else (no ssh, no git://). */
static int
gh_check_url(const char *url, char *err, size_t errsz)
{
	const char *host;
	size_t hl;

	if (strncmp(url, "https://", 8) == 0) {
		host = url + 8;
		hl = strcspn(host, "/");
		if (hl == 0 || memchr(host, '@', hl) != NULL)
			return gh_fail(err, errsz,
			               "the URL must be https://HOST/... without credentials");
		return 0;
	}
	if (strncmp(url, "file:///", 8) == 0 || url[0] == '/')
		return 0;
	return gh_fail(err, errsz, "the URL must be https://, file:/// or an absolute path");
}

/*
 * Every path of the index: relative, no "."/".." or empty component, not
 * under ".git", and no existing proper prefix of it in the work tree a
 * symbolic link.
 */
static int
gh_check_paths(git_repository *repo, const char *dir, char *err, size_t errsz)
{
	git_index *idx;
	const git_index_entry *e;
	char prefix[4096];
	const char *p, *c;
	struct stat st;
	size_t i, n, len;
	int dfd, rv = 0;

	if (git_repository_index(&idx, repo) != 0)
		return gh_fail(err, errsz, "index: %s", gh_git_error());
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) == -1) {
		git_index_free(idx);
		return gh_fail(err, errsz, "the workspace: %s", strerror(errno));
	}
	n = git_index_entrycount(idx);
	for (i = 0; rv == 0 && i < n; i++) {
		e = git_index_get_byindex(idx, i);
		p = e->path;
		if (p[0] == '/' || strlen(p) >= sizeof(prefix)) {
			rv = gh_fail(err, errsz, "the repository has a path that escapes");
			break;
		}
		for (c = p;; c += len + 1) {
			len = strcspn(c, "/");
			if (len == 0 || (len == 1 && c[0] == '.') ||
			    (len == 2 && c[0] == '.' && c[1] == '.') ||
			    (c == p && len == 4 && strncasecmp(c, ".git", 4) == 0)) {
				rv = gh_fail(err, errsz, "the repository has a path that escapes");
				break;
			}
			if (c[len] == '\0')
				break;
			/* a directory on the way must be a directory, not a link */
			memcpy(prefix, p, (size_t)(c - p) + len);
			prefix[(c - p) + len] = '\0';
			if (fstatat(dfd, prefix, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			    !S_ISDIR(st.st_mode)) {
				rv = gh_fail(err, errsz, "the repository has a path below a link");
				break;
			}
		}
	}
	close(dfd);
	git_index_free(idx);
	return rv;
}

int
gh_verify(const char *dir, char *err, size_t errsz)
{
	git_repository *repo;
	int rv;

	if (git_libgit2_init() < 0)
		return gh_fail(err, errsz, "libgit2: %s", gh_git_error());
	if (git_repository_open_ext(&repo, dir, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) != 0) {
		rv = gh_fail(err, errsz, "open: %s", gh_git_error());
	} else {
		rv = gh_check_paths(repo, dir, err, errsz);
		git_repository_free(repo);
	}
	git_libgit2_shutdown();
	return rv;
}

static int
gh_strip(const char *dir, char *err, size_t errsz)
{
	size_t i;
	int dfd;

	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) == -1)
		return gh_fail(err, errsz, "the workspace: %s", strerror(errno));
	for (i = 0; i < sizeof(gh_stripped) / sizeof(gh_stripped[0]); i++)
		if (gh_remove_tree(dfd, gh_stripped[i]) == -1) {
			close(dfd);
			return gh_fail(err, errsz, "removing %s: %s", gh_stripped[i],
			               strerror(errno));
		}
	close(dfd);
	return 0;
}

static void
gh_no_config(void)
{
	static const git_config_level_t levels[] = {GIT_CONFIG_LEVEL_PROGRAMDATA,
	                                            GIT_CONFIG_LEVEL_SYSTEM, GIT_CONFIG_LEVEL_XDG,
	                                            GIT_CONFIG_LEVEL_GLOBAL};
	size_t i;

	for (i = 0; i < sizeof(levels) / sizeof(levels[0]); i++)
		git_libgit2_opts(GIT_OPT_SET_SEARCH_PATH, levels[i], "");
}

int
gh_git_init(char *err, size_t errsz)
{
	if (git_libgit2_init() < 0)
		return gh_fail(err, errsz, "libgit2: %s", gh_git_error());
	/* no system, global or XDG configuration (proxies, URL rewrites,
	 * credential helpers): only what this call says */
	gh_no_config();
	/*
	 * A local source belongs to whoever made it, not to the helper's
	 * user.  git's owner check guards against running a stranger's
	 * configured programs (hooks, fsmonitor); libgit2 runs none, and only
	 * objects are read from the source.
	 */
	git_libgit2_opts(GIT_OPT_SET_OWNER_VALIDATION, 0);
	return 0;
}

/*
 * Clone url into dir (checked by the caller), bare or with its default
 * branch checked out.  The token goes to an https server only, through the
 * credential callback.  *out is the caller's to free.
 */
static int
gh_clone(git_repository **out, const char *url, const char *token, const char *dir, int bare,
         char *err, size_t errsz)
{
	git_clone_options opts;
	struct gh_cred cred = {NULL, 0};

	*out = NULL;
	git_clone_options_init(&opts, GIT_CLONE_OPTIONS_VERSION);
	opts.bare = bare;
	/* git's own transfer, not hard links into the source's objects */
	opts.local = GIT_CLONE_NO_LOCAL;
	opts.checkout_opts.checkout_strategy = GIT_CHECKOUT_SAFE;
	if (strncmp(url, "https://", 8) == 0) {
		cred.token = token;
		opts.fetch_opts.callbacks.credentials = gh_credentials;
		opts.fetch_opts.callbacks.payload = &cred;
	}
	if (git_clone(out, url, dir, &opts) != 0) {
		/* asked again after the token was given: the server refused it
		 * (libgit2's own message would say no callback is set) */
		if (cred.used && git_error_last() != NULL &&
		    git_error_last()->klass == GIT_ERROR_HTTP)
			return gh_fail(err, errsz, "clone: the server refused the token (%s)",
			    gh_git_error());
		if (cred.token == NULL && strncmp(url, "https://", 8) == 0 &&
		    git_error_last() != NULL && git_error_last()->klass == GIT_ERROR_HTTP)
			return gh_fail(err, errsz,
			    "clone: the server asks for credentials and the connection has no token");
		return gh_fail(err, errsz, "clone: %s", gh_git_error());
	}
	return 0;
}

/* The commit HEAD of repo names, in *id. */
static int
gh_head(git_repository *repo, git_oid *id, char *err, size_t errsz)
{
	if (git_reference_name_to_id(id, repo, "HEAD") != 0)
		return gh_fail(err, errsz, "HEAD: %s", gh_git_error());
	return 0;
}

int
gh_checkout(const char *url, const char *token, const char *dir, char *base, char *err,
            size_t errsz)
{
	git_repository *repo = NULL;
	git_oid head;
	int rv = -1;

	base[0] = '\0';
	if (gh_check_url(url, err, errsz) == -1 ||
	    gh_check_dir(dir, "the workspace", err, errsz) == -1)
		return -1;
	if (gh_git_init(err, errsz) == -1)
		return -1;
	if (gh_clone(&repo, url, token, dir, 0, err, errsz) == -1)
		goto out;
	if (gh_check_paths(repo, dir, err, errsz) == -1 || gh_strip(dir, err, errsz) == -1 ||
	    gh_head(repo, &head, err, errsz) == -1)
		goto out;
	git_oid_tostr(base, GH_OID_HEX_MAX + 1, &head);
	rv = 0;
out:
	git_repository_free(repo);
	git_libgit2_shutdown();
	return rv;
}

/* gitdir and workdir: two different directories (a link, or one path
 * written two ways, must not make them one). */
static int
gh_check_apart(const char *gitdir, const char *workdir, char *err, size_t errsz)
{
	struct stat a, b;

	if (lstat(gitdir, &a) == -1 || lstat(workdir, &b) == -1)
		return gh_fail(err, errsz, "lstat: %s", strerror(errno));
	if (a.st_dev == b.st_dev && a.st_ino == b.st_ino)
		return gh_fail(err, errsz, "the repository and the workspace are one directory");
	return 0;
}

/* Drop one reference's reflog ("clone: from GITDIR" would tell the sandbox
 * where the trusted copy lives). */
static int
gh_drop_reflog(const char *name, void *payload)
{
	return git_reflog_delete(payload, name);
}

/*
 * The work tree: a plain clone of the trusted bare copy at gitdir (objects
 * copied, no token), which must stand at the commit head; its origin is set
 * back to url; then the checks and the strip that gh_checkout makes.
 */
static int
gh_checkout_workdir(const char *gitdir, const char *workdir, const char *url, const git_oid *head,
                    char *err, size_t errsz)
{
	git_repository *repo;
	git_oid id;
	int rv = -1;

	if (gh_clone(&repo, gitdir, NULL, workdir, 0, err, errsz) == -1)
		return -1;
	if (gh_head(repo, &id, err, errsz) == -1)
		goto out;
	if (!git_oid_equal(&id, head)) {
		gh_fail(err, errsz, "the workspace is not at the repository's commit");
		goto out;
	}
	if (git_remote_set_url(repo, "origin", url) != 0) {
		gh_fail(err, errsz, "origin: %s", gh_git_error());
		goto out;
	}
	if (git_reference_foreach_name(repo, gh_drop_reflog, repo) != 0 ||
	    git_reflog_delete(repo, "HEAD") != 0) {
		gh_fail(err, errsz, "reflog: %s", gh_git_error());
		goto out;
	}
	if (gh_check_paths(repo, workdir, err, errsz) == -1 || gh_strip(workdir, err, errsz) == -1)
		goto out;
	rv = 0;
out:
	git_repository_free(repo);
	return rv;
}

int
gh_checkout_split(const char *url, const char *token, const char *gitdir, const char *workdir,
                  char *base, char *err, size_t errsz)
{
	git_repository *repo = NULL;
	git_oid head;
	int rv = -1;

	base[0] = '\0';
	if (gh_check_url(url, err, errsz) == -1 ||
	    gh_check_dir(gitdir, "the repository directory", err, errsz) == -1 ||
	    gh_check_dir(workdir, "the workspace", err, errsz) == -1 ||
	    gh_check_apart(gitdir, workdir, err, errsz) == -1)
		return -1;
	if (gh_git_init(err, errsz) == -1)
		return -1;
	if (gh_clone(&repo, url, token, gitdir, 1, err, errsz) == -1 ||
	    gh_head(repo, &head, err, errsz) == -1 ||
	    gh_checkout_workdir(gitdir, workdir, url, &head, err, errsz) == -1)
		goto out;
	git_oid_tostr(base, GH_OID_HEX_MAX + 1, &head);
	rv = 0;
out:
	git_repository_free(repo);
	git_libgit2_shutdown();
	return rv;
}
