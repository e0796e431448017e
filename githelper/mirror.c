/*
 * Mirrors fetched with the git program (githelper/mirror.h).
 */
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "githelper/checkout.h"
#include "githelper/mirror.h"

#define GH_GIT_TIMEOUT_S 570   /* under the supervisor's 600 s for the whole helper */
#define GH_TAIL_MAX 4096       /* what is kept of git's output, for the error */
#define GH_CRED_MAX 4096       /* a credential request or answer */
#define GH_CRED_ANSWERS 3      /* git asks once per connection; a loop is refused */
#define GH_HOST_MAX 300

/* One git process and what it may ask of us. */
struct gh_git {
	const char *token;           /* NULL: no credential is offered */
	char host[GH_HOST_MAX];      /* "host" or "host:port" the token is for */
	int answers;
	char tail[GH_TAIL_MAX + 1];  /* the end of git's output (stdout and stderr) */
	size_t taillen;
};

/* ---- the URL ------------------------------------------------------------- */

/* The URL's check and its host (githelper/mirror.h). */
int
gh_url_host(const char *url, char *host, size_t hostsz, char *err, size_t errsz)
{
	CURLU *u;
	char *scheme = NULL, *h = NULL, *port = NULL, *user = NULL;
	int rv = -1;

	host[0] = '\0';
	if (url[0] == '/')
		return 0;
	if ((u = curl_url()) == NULL)
		return gh_fail(err, errsz, "out of memory");
	if (curl_url_set(u, CURLUPART_URL, url, CURLU_NON_SUPPORT_SCHEME) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK) {
		gh_fail(err, errsz, "the URL must be https://, file:/// or an absolute path");
		goto out;
	}
	if (strcmp(scheme, "file") == 0) {
		rv = strncmp(url, "file:///", 8) == 0
		         ? 0
		         : gh_fail(err, errsz, "a file URL must be file:///PATH");
		goto out;
	}
	if (strcmp(scheme, "https") != 0) {
		gh_fail(err, errsz, "the URL must be https://, file:/// or an absolute path");
		goto out;
	}
	if (curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK) {
		gh_fail(err, errsz, "the URL must be https://HOST/... without credentials");
		goto out;
	}
	if (curl_url_get(u, CURLUPART_HOST, &h, 0) != CURLUE_OK) {
		gh_fail(err, errsz, "the URL has no host");
		goto out;
	}
	curl_url_get(u, CURLUPART_PORT, &port, 0);
	if (port != NULL ? fmt_ok(host, hostsz, "%s:%s", h, port)
	                 : fmt_ok(host, hostsz, "%s", h)) {
		gh_fail(err, errsz, "the URL's host is too long");
		goto out;
	}
	rv = 0;
out:
	curl_free(scheme);
	curl_free(h);
	curl_free(port);
	curl_free(user);
	curl_url_cleanup(u);
	return rv;
}

/* ---- running git --------------------------------------------------------- */

/* Keep the last GH_TAIL_MAX bytes git printed. */
static void
gh_tail_add(struct gh_git *g, const char *p, size_t n)
{
	gh_tail_keep(g->tail, &g->taillen, GH_TAIL_MAX, p, n);
}

/* The first (or last) line of git's output that begins with prefix, or
 * NULL. */
static const char *
gh_find_line(const char *text, const char *prefix, int last)
{
	const char *p, *found = NULL;
	size_t pl = strlen(prefix);

	for (p = text; *p != '\0'; p += strcspn(p, "\n"), p += *p != '\0')
		if (p[0] != '\n' && strncmp(p, prefix, pl) == 0) {
			found = p;
			if (!last)
				break;
		}
	return found;
}

/*
 * git's reason: its first "fatal:" line (the cause; the later ones say
 * what failed because of it), else its last "error:" line, else its last
 * line; printable, with the token (should a server ever echo it) starred
 * out.
 */
static void
gh_git_reason(struct gh_git *g, char *out, size_t outsz)
{
	const char *line;
	char *p, *s, *t;
	size_t tl;

	for (p = g->tail; *p != '\0'; p++)
		if (((unsigned char)*p < 0x20 && *p != '\n') || (unsigned char)*p == 0x7f)
			*p = ' ';
	if (g->token != NULL && (tl = strlen(g->token)) > 0)
		for (s = g->tail; (t = strstr(s, g->token)) != NULL; s = t + tl)
			memset(t, '*', tl);
	if ((line = gh_find_line(g->tail, "fatal: ", 0)) != NULL ||
	    (line = gh_find_line(g->tail, "error: ", 1)) != NULL)
		line += 7;
	else if ((line = gh_find_line(g->tail, "", 1)) == NULL) {
		snprintf(out, outsz, "git failed without a word");
		return;
	}
	snprintf(out, outsz, "%.*s", (int)strcspn(line, "\n"), line);
}

/* A credential request from the helper: answer with the token when it asks
 * for the connection's own host over https, else with nothing. */
static void
gh_git_answer(struct gh_git *g, int fd)
{
	char req[GH_CRED_MAX + 1], want[GH_HOST_MAX + 64], *ans;
	ssize_t n;
	int n2;

	if ((n = recv(fd, req, GH_CRED_MAX, MSG_DONTWAIT)) <= 0)
		return;
	req[n] = '\0';
	snprintf(want, sizeof(want), "protocol=https\nhost=%s\n", g->host);
	if ((ans = sodium_malloc(GH_CRED_MAX)) == NULL)
		return;
	ans[0] = '\0';
	n2 = 0;
	if (g->token != NULL && g->host[0] != '\0' && strcmp(req, want) == 0 &&
	    g->answers < GH_CRED_ANSWERS) {
		g->answers++;
		n2 = snprintf(ans, GH_CRED_MAX, "username=%s\npassword=%s\n", GH_TOKEN_USER,
		              g->token);
		if (n2 < 0 || n2 >= GH_CRED_MAX)
			n2 = 0;
	}
	(void)send(fd, ans, (size_t)n2, MSG_NOSIGNAL);
	sodium_free(ans); /* wipes it */
}

/*
 * git's "global" configuration, in memory (fd GH_CONF_FD in git and its
 * children): git reads no file of ours or anybody's.  It holds only what
 * must reach the git processes a local transport starts (upload-pack in a
 * local source), which are not given our -c options: a local source
 * belongs to whoever made it, and only its objects are read.
 */
#define GH_CONF_FD (GH_CRED_FD + 1)
_Static_assert(GH_CONF_FD == 4, "GIT_CONFIG_GLOBAL below names /dev/fd/4");
static int
gh_git_conf(void)
{
	static const char conf[] = "[safe]\n\tdirectory = *\n";
	int fd;

	if ((fd = memfd_create("agrippa-gitconfig", MFD_CLOEXEC)) == -1)
		return -1;
	if (write(fd, conf, sizeof(conf) - 1) != (ssize_t)(sizeof(conf) - 1)) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * The mirror's lock (flock), passed down to git and every process it starts,
 * so that it is held until the last of them is gone: a helper killed
 * half-way does not let the next fetch in beside its git's children.
 */
#define GH_LOCK_FD (GH_CONF_FD + 1)
static int gh_lock_fd = -1;

/* In the child: become git.  Never returns. */
static void __attribute__((noreturn))
gh_git_exec(char *const argv[], int out, int cred, int conf)
{
	static char *const env[] = {
	    "PATH=/usr/bin:/bin",
	    "HOME=/nonexistent",
	    "XDG_CONFIG_HOME=/nonexistent",
	    "GIT_CONFIG_NOSYSTEM=1",
	    "GIT_CONFIG_GLOBAL=/dev/fd/4",
	    "GIT_TERMINAL_PROMPT=0",
	    "GIT_ALLOW_PROTOCOL=https:file",
	    "GIT_PROTOCOL_FROM_USER=0",
	    "GIT_NO_REPLACE_OBJECTS=1",
	    "LC_ALL=C",
	    NULL,
	};
	int nul;

	setpgid(0, 0);
	/* git dies with the helper (its children see their pipes close) */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) == -1 || getppid() == 1)
		_exit(126);
	if ((nul = open("/dev/null", O_RDONLY)) == -1 || dup2(nul, 0) == -1 || dup2(out, 1) == -1 ||
	    dup2(out, 2) == -1 || (cred >= 0 ? dup2(cred, GH_CRED_FD) : dup2(nul, GH_CRED_FD)) == -1 ||
	    dup2(conf, GH_CONF_FD) == -1 ||
	    (gh_lock_fd >= 0 ? dup2(gh_lock_fd, GH_LOCK_FD) : dup2(nul, GH_LOCK_FD)) == -1)
		_exit(126);
	closefrom(GH_LOCK_FD + 1);
	execve(GH_GIT_PROGRAM, argv, env);
	_exit(127);
}

/* Read what git prints and answer its credential requests until it is
 * done or the deadline passes (then its whole process group is killed). */
static int
gh_git_wait(struct gh_git *g, pid_t pid, int out, int cred)
{
	struct pollfd p[2] = {{out, POLLIN, 0}, {cred, POLLIN, 0}};
	time_t deadline = time(NULL) + GH_GIT_TIMEOUT_S;
	char buf[4096];
	ssize_t n;
	int st, rc;

	for (;;) {
		long left = (long)(deadline - time(NULL));

		if (left <= 0) {
			kill(-pid, SIGKILL);
			gh_tail_add(g, "\nfatal: git took too long\n", 26);
			break;
		}
		if ((rc = poll(p, cred >= 0 ? 2 : 1, (int)(left > 60 ? 60000 : left * 1000))) == -1 &&
		    errno != EINTR)
			break;
		if (rc <= 0)
			continue;
		if (cred >= 0 && (p[1].revents & POLLIN))
			gh_git_answer(g, cred);
		if (p[0].revents & (POLLIN | POLLHUP)) {
			if ((n = read(out, buf, sizeof(buf))) > 0)
				gh_tail_add(g, buf, (size_t)n);
			else if (n == 0 || errno != EINTR)
				break;
		}
	}
	while (waitpid(pid, &st, 0) == -1)
		if (errno != EINTR)
			return -1;
	kill(-pid, SIGKILL); /* nothing of it may linger with fd 3 */
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/*
 * Run git with the locked-down options and then args (NULL-terminated);
 * gitdir, when not NULL, is the repository.  0 when git exited 0; else -1
 * with "what: git's reason" in err.
 */
static int
gh_git_run(struct gh_git *g, const char *gitdir, const char *const args[], const char *what,
           char *err, size_t errsz)
{
	static const char *const fixed[] = {
	    "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false",
	    "-c", "credential.helper=",       "-c", "credential.useHttpPath=false",
	    "-c", "http.followRedirects=false", "-c", "http.sslVerify=true",
	    "-c", "protocol.allow=never",     "-c", "protocol.https.allow=always",
	    "-c", "protocol.file.allow=always", "-c", "gc.auto=0",
	    "-c", "maintenance.auto=false",   "-c", "fetch.recurseSubmodules=false",
	    "-c", "submodule.recurse=false",  "-c", "fetch.writeCommitGraph=false",
	};
	const char *argv[80];
	char gd[PATH_MAX + 16], helper[PATH_MAX + 64], self[PATH_MAX], reason[512];
	size_t n = 0, i;
	int pv[2], cs[2] = {-1, -1}, conf, rv;
	ssize_t sl;
	pid_t pid;

	argv[n++] = "git";
	if (gitdir != NULL) {
		if (fmt_ok(gd, sizeof(gd), "--git-dir=%s", gitdir) == -1)
			return gh_fail(err, errsz, "%s: the mirror's path is too long", what);
		argv[n++] = gd;
	}
	for (i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		argv[n++] = fixed[i];
	if (g->token != NULL) {
		/* git runs the helper through sh: our own path, which must need
		 * no quoting */
		if ((sl = readlink("/proc/self/exe", self, sizeof(self) - 1)) <= 0)
			return gh_fail(err, errsz, "%s: our own path: %s", what, strerror(errno));
		self[sl] = '\0';
		if (strspn(self, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-") !=
		    (size_t)sl)
			return gh_fail(err, errsz, "%s: agrippa-git is installed at a path git's "
			               "credential helper cannot name", what);
		snprintf(helper, sizeof(helper), "credential.helper=%s --credential-fd=%d", self,
		         GH_CRED_FD);
		argv[n++] = "-c";
		argv[n++] = helper;
	}
	for (i = 0; args[i] != NULL && n < sizeof(argv) / sizeof(argv[0]) - 1; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	if ((conf = gh_git_conf()) == -1)
		return gh_fail(err, errsz, "%s: git's configuration: %s", what, strerror(errno));
	if (pipe2(pv, O_CLOEXEC) == -1 ||
	    (g->token != NULL &&
	     socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, cs) == -1)) {
		close(conf);
		return gh_fail(err, errsz, "%s: %s", what, strerror(errno));
	}
	if ((pid = fork()) == -1) {
		close(conf);
		close(pv[0]);
		close(pv[1]);
		if (cs[0] >= 0) {
			close(cs[0]);
			close(cs[1]);
		}
		return gh_fail(err, errsz, "%s: fork: %s", what, strerror(errno));
	}
	if (pid == 0)
		gh_git_exec((char *const *)argv, pv[1], cs[1], conf);
	close(conf);
	close(pv[1]);
	if (cs[1] >= 0)
		close(cs[1]);
	g->taillen = 0;
	g->tail[0] = '\0';
	rv = gh_git_wait(g, pid, pv[0], cs[0]);
	close(pv[0]);
	if (cs[0] >= 0)
		close(cs[0]);
	if (rv == 0)
		return 0;
	gh_git_reason(g, reason, sizeof(reason));
	if (g->token == NULL && g->host[0] != '\0' && strstr(reason, "could not read Username"))
		return gh_fail(err, errsz,
		               "%s: the server asks for credentials and the connection has no token",
		               what);
	if (g->answers > 0 && strstr(reason, "Authentication failed") != NULL)
		return gh_fail(err, errsz, "%s: the server refused the token (%s)", what, reason);
	return gh_fail(err, errsz, "%s: %s", what, reason);
}

/* ---- the mirror on disk -------------------------------------------------- */

uint64_t
gh_tree_size(const char *dir)
{
	struct stat st;
	struct dirent *de;
	char p[PATH_MAX];
	uint64_t sum;
	DIR *d;

	if (lstat(dir, &st) == -1)
		return 0;
	sum = (uint64_t)st.st_blocks * 512;
	if (!S_ISDIR(st.st_mode) || (d = opendir(dir)) == NULL)
		return sum;
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0 &&
		    fmt_ok(p, sizeof(p), "%s/%s", dir, de->d_name) == 0)
			sum += gh_tree_size(p);
	closedir(d);
	return sum;
}

/* name ends in suffix. */
static int
gh_ends(const char *name, const char *suffix)
{
	size_t n = strlen(name), s = strlen(suffix);

	return n >= s && strcmp(name + n - s, suffix) == 0;
}

/* Every "*.lock" below the directory dfd (taken over), recursively. */
static void
gh_unlock_tree(int dfd)
{
	struct dirent *de;
	struct stat st;
	DIR *d;
	int fd;

	if ((d = fdopendir(dfd)) == NULL) {
		close(dfd);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == -1)
			continue;
		if (S_ISDIR(st.st_mode)) {
			if ((fd = openat(dirfd(d), de->d_name,
			                 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) != -1)
				gh_unlock_tree(fd);
		} else if (gh_ends(de->d_name, ".lock")) {
			unlinkat(dirfd(d), de->d_name, 0);
		}
	}
	closedir(d);
}

/* The entries of the directory at path (absolute, or NULL with at an open
 * directory fd, taken over) whose names begin with one of the prefixes
 * (NULL-terminated) are removed, whatever they are. */
static void
gh_remove_prefixed(const char *path, int at, const char *const prefixes[])
{
	struct dirent *de;
	size_t i;
	DIR *d;
	int fd = path != NULL ? open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : at;

	if (fd == -1)
		return;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return;
	}
	while ((de = readdir(d)) != NULL)
		for (i = 0; prefixes[i] != NULL; i++)
			if (strncmp(de->d_name, prefixes[i], strlen(prefixes[i])) == 0) {
				rmtree_at(dirfd(d), de->d_name);
				break;
			}
	closedir(d);
}

/* The loose objects' directories (objects/XX) of the mirror dir: the
 * temporary files of objects being written are removed. */
static void
gh_tidy_loose(const char *dir)
{
	static const char *const tmp[] = {"tmp_obj_", NULL};
	struct dirent *de;
	char p[PATH_MAX];
	DIR *d;
	int fd;

	if (fmt_ok(p, sizeof(p), "%s/objects", dir) == -1 || (d = opendir(p)) == NULL)
		return;
	while ((de = readdir(d)) != NULL)
		if (strlen(de->d_name) == 2 && strspn(de->d_name, "0123456789abcdef") == 2 &&
		    (fd = openat(dirfd(d), de->d_name,
		                 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) != -1)
			gh_remove_prefixed(NULL, fd, tmp);
	closedir(d);
}

/*
 * What a git killed half-way, or stopped by a full disk, leaves in a
 * repository: lock files (which make the next fetch fail), temporary packs
 * and temporary loose objects (which hold on to the space they took).  We
 * hold the mirror's lock, so no git works on it now.
 */
static void
gh_mirror_tidy(const char *dir)
{
	static const char *const top[] = {"HEAD.lock",      "config.lock",     "packed-refs.lock",
	                                  "shallow.lock",   "index.lock",      "FETCH_HEAD.lock",
	                                  GH_STAMP ".tmp"};
	static const char *const packtmp[] = {"tmp_", ".tmp-", NULL};
	char p[PATH_MAX];
	size_t i;
	int fd;

	for (i = 0; i < sizeof(top) / sizeof(top[0]); i++)
		if (fmt_ok(p, sizeof(p), "%s/%s", dir, top[i]) == 0)
			unlink(p);
	if (fmt_ok(p, sizeof(p), "%s/refs", dir) == 0 &&
	    (fd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) != -1)
		gh_unlock_tree(fd);
	if (fmt_ok(p, sizeof(p), "%s/objects/pack", dir) == 0)
		gh_remove_prefixed(p, -1, packtmp);
	gh_tidy_loose(dir);
}

/* dir/name exists. */
static int
gh_has(const char *dir, const char *name)
{
	char p[PATH_MAX];
	struct stat st;

	return fmt_ok(p, sizeof(p), "%s/%s", dir, name) == 0 && lstat(p, &st) == 0;
}

static int
gh_mark(const char *dir, const char *name, int on)
{
	char p[PATH_MAX];
	int fd;

	if (fmt_ok(p, sizeof(p), "%s/%s", dir, name) == -1) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if (!on)
		return unlink(p) == -1 && errno != ENOENT ? -1 : 0;
	/* not synced: it tells of a helper that died, which the page cache
	 * keeps; a crash of the host is git's to survive (it syncs its packs
	 * and refs), and a mark lost with it costs only the check */
	if ((fd = open(p, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600)) == -1)
		return -1;
	return close(fd);
}

/* The mirror holds together: every ref names an object, everything they
 * reach is there. */
static int
gh_mirror_sound(struct gh_git *g, const char *dir)
{
	static const char *const fsck[] = {"fsck", "--connectivity-only", "--no-dangling",
	                                   "--no-progress", NULL};
	const char *tok = g->token;
	char err[256];
	int rv;

	g->token = NULL; /* nothing to fetch: nobody is to be answered */
	rv = gh_git_run(g, dir, fsck, "fsck", err, sizeof(err));
	g->token = tok;
	return rv;
}

/* A bare clone of url into dir.new, renamed to dir once whole. */
static int
gh_mirror_clone(struct gh_git *g, const char *url, const char *dir, char *err, size_t errsz)
{
	char tmp[PATH_MAX];
	const char *args[] = {"clone", "--bare", "--no-local", "--template=", "--quiet", "--",
	                      url,     tmp,      NULL};

	if (fmt_ok(tmp, sizeof(tmp), "%s.new", dir) == -1)
		return gh_fail(err, errsz, "the mirror's path is too long");
	if (rmtree_at(AT_FDCWD, tmp) == -1)
		return gh_fail(err, errsz, "removing a partial mirror: %s", strerror(errno));
	if (gh_git_run(g, NULL, args, "clone", err, errsz) == -1) {
		rmtree_at(AT_FDCWD, tmp);
		return -1;
	}
	if (rename(tmp, dir) == -1)
		return gh_fail(err, errsz, "the new mirror: %s", strerror(errno));
	return 0;
}

/* Move the damaged mirror dir out of the way (it is not served from
 * then on) and remove it. */
static int
gh_mirror_discard(const char *dir, char *err, size_t errsz)
{
	unsigned char r[8];
	char trash[PATH_MAX], hex[17];

	randombytes_buf(r, sizeof(r));
	sodium_bin2hex(hex, sizeof(hex), r, sizeof(r));
	if (fmt_ok(trash, sizeof(trash), "%s.trash-%s", dir, hex) == -1)
		return gh_fail(err, errsz, "the mirror's path is too long");
	if (rename(dir, trash) == -1)
		return gh_fail(err, errsz, "moving the damaged mirror aside: %s", strerror(errno));
	rmtree_at(AT_FDCWD, trash);
	return 0;
}

/* An incremental fetch of every branch and tag into the mirror dir. */
static int
gh_mirror_update(struct gh_git *g, const char *url, const char *dir, char *err, size_t errsz)
{
	const char *args[] = {"fetch",
	                      "--prune",
	                      "--quiet",
	                      "--no-write-fetch-head",
	                      "--no-auto-gc",
	                      "--no-auto-maintenance",
	                      "--no-recurse-submodules",
	                      "--",
	                      url,
	                      "+refs/heads/*:refs/heads/*",
	                      "+refs/tags/*:refs/tags/*",
	                      NULL};

	if (gh_mark(dir, GH_FETCH_MARK, 1) == -1)
		return gh_fail(err, errsz, "the mirror: %s", strerror(errno));
	if (gh_git_run(g, dir, args, "fetch", err, errsz) == -1)
		return -1;
	if (gh_mark(dir, GH_FETCH_MARK, 0) == -1)
		return gh_fail(err, errsz, "the mirror: %s", strerror(errno));
	return 0;
}

/* ---- a local source already mirrored ------------------------------------- */

/* The branches and tags of a repository, sorted by name. */
struct gh_ref {
	char *name;
	git_oid id;
};
struct gh_reflist {
	struct gh_ref *r;
	size_t n, cap;
	int odd; /* a symbolic branch or tag, or out of memory: not compared */
};

static int
gh_ref_cmp(const void *a, const void *b)
{
	return strcmp(((const struct gh_ref *)a)->name, ((const struct gh_ref *)b)->name);
}

/* l filled from repo's refs/heads/ and refs/tags/, then sorted. */
static void
gh_reflist_fill(git_repository *repo, struct gh_reflist *l)
{
	git_reference_iterator *it;
	git_reference *r;
	struct gh_ref *nr;
	const char *name;

	if (git_reference_iterator_new(&it, repo) != 0) {
		l->odd = 1;
		return;
	}
	while (!l->odd && git_reference_next(&r, it) == 0) {
		name = git_reference_name(r);
		if (strncmp(name, "refs/heads/", 11) != 0 && strncmp(name, "refs/tags/", 10) != 0) {
			git_reference_free(r);
			continue;
		}
		if (l->n == l->cap &&
		    (nr = reallocarray(l->r, l->cap == 0 ? 64 : l->cap * 2, sizeof(*nr))) != NULL) {
			l->r = nr;
			l->cap = l->cap == 0 ? 64 : l->cap * 2;
		}
		if (git_reference_type(r) != GIT_REFERENCE_DIRECT || l->n == l->cap ||
		    (l->r[l->n].name = strdup(name)) == NULL)
			l->odd = 1;
		else
			git_oid_cpy(&l->r[l->n++].id, git_reference_target(r));
		git_reference_free(r);
	}
	git_reference_iterator_free(it);
	if (l->n > 1)
		qsort(l->r, l->n, sizeof(*l->r), gh_ref_cmp);
}

static void
gh_reflist_free(struct gh_reflist *l)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		free(l->r[i].name);
	free(l->r);
}

/* The same names at the same ids: one pass over the sorted lists. */
static int
gh_reflist_equal(const struct gh_reflist *a, const struct gh_reflist *b)
{
	size_t i;

	if (a->odd || b->odd || a->n != b->n)
		return 0;
	for (i = 0; i < a->n; i++)
		if (strcmp(a->r[i].name, b->r[i].name) != 0 || !git_oid_equal(&a->r[i].id, &b->r[i].id))
			return 0;
	return 1;
}

/* The path of a local source (file:///PATH or /PATH). */
static const char *
gh_local_path(const char *url)
{
	return strncmp(url, "file://", 7) == 0 ? url + 7 : url;
}

/*
 * A local source whose every branch and tag is already the mirror's, at
 * the same commit: 1 (nothing to fetch), else 0.  Read with libgit2, which
 * runs nothing of the source's, so that a run of a repository on this
 * host does not pay for starting git and its upload-pack to learn that
 * nothing changed; anything unusual (a symbolic branch, a source libgit2
 * cannot read, a difference) is left to git's fetch.
 */
static int
gh_local_current(const char *url, const char *dir)
{
	struct gh_reflist src = {0}, mir = {0};
	git_repository *s = NULL, *m = NULL;
	char err[128];
	int same = 0;

	if (gh_git_init(err, sizeof(err)) == -1)
		return 0;
	if (git_repository_open_ext(&s, gh_local_path(url), GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) ==
	        0 &&
	    git_repository_open_ext(&m, dir,
	                            GIT_REPOSITORY_OPEN_NO_SEARCH | GIT_REPOSITORY_OPEN_NO_DOTGIT |
	                                GIT_REPOSITORY_OPEN_BARE,
	                            NULL) == 0) {
		gh_reflist_fill(s, &src);
		gh_reflist_fill(m, &mir);
		same = gh_reflist_equal(&src, &mir);
	}
	gh_reflist_free(&src);
	gh_reflist_free(&mir);
	git_repository_free(s);
	git_repository_free(m);
	git_libgit2_shutdown();
	return same;
}

/* dir: absent (0), or a directory of ours that is not a link (1); -1 else. */
static int
gh_mirror_exists(const char *dir, char *err, size_t errsz)
{
	struct stat st;

	if (lstat(dir, &st) == -1) {
		if (errno == ENOENT)
			return 0;
		return gh_fail(err, errsz, "the mirror: %s", strerror(errno));
	}
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid())
		return gh_fail(err, errsz, "the mirror is not a directory of ours");
	return 1;
}

/*
 * GH_STAMP in the mirror dir after a fetch that succeeded: the time and
 * size, written beside it and renamed over the old one.  Should that fail
 * (the disk filled up since), the old stamp goes too, so that no stale
 * figure is shown; the fetch itself stands.
 */
static void
gh_mirror_stamp(const char *dir, uint64_t size)
{
	char p[PATH_MAX], tmp[PATH_MAX], line[GH_STAMP_MAX + 1];
	int fd, n, ok = 0;

	if (fmt_ok(p, sizeof(p), "%s/" GH_STAMP, dir) == -1 ||
	    fmt_ok(tmp, sizeof(tmp), "%s/" GH_STAMP ".tmp", dir) == -1)
		return;
	n = snprintf(line, sizeof(line), "%llu %llu\n", (unsigned long long)time(NULL),
	             (unsigned long long)size);
	unlink(tmp);
	if (n > 0 && (size_t)n < sizeof(line) &&
	    (fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644)) != -1) {
		ok = write(fd, line, (size_t)n) == n; /* figures for a person: no sync */
		ok = close(fd) == 0 && ok;
		ok = ok && rename(tmp, p) == 0;
	}
	if (!ok) {
		unlink(tmp);
		unlink(p);
	}
}

/* err is git's word that the disk (or the service user's quota) is full. */
static int
gh_disk_full(const char *err)
{
	return strstr(err, strerror(ENOSPC)) != NULL || strstr(err, strerror(EDQUOT)) != NULL;
}

/* Under the lock: the mirror made, repaired or brought up to date. */
static int
gh_fetch_locked(struct gh_git *g, const char *url, const char *dir, char *err, size_t errsz)
{
	int ex;

	if ((ex = gh_mirror_exists(dir, err, errsz)) == -1)
		return -1;
	if (ex == 0)
		return gh_mirror_clone(g, url, dir, err, errsz);
	if (gh_has(dir, GH_FETCH_MARK) || gh_has(dir, GH_DAMAGED_MARK)) {
		gh_mirror_tidy(dir);
		if (gh_mirror_sound(g, dir) == -1) {
			if (gh_mirror_discard(dir, err, errsz) == -1)
				return -1;
			return gh_mirror_clone(g, url, dir, err, errsz);
		}
		gh_mark(dir, GH_DAMAGED_MARK, 0);
	}
	if (g->host[0] == '\0' && gh_local_current(url, dir))
		return 0;
	if (gh_mirror_update(g, url, dir, err, errsz) == 0)
		return 0;
	/* the network, the server or a full disk (the mirror is as it was),
	 * or the mirror itself: only the last is mended here, and never on a
	 * full disk, where a new clone cannot be written either and the old
	 * mirror would be lost for nothing (its mark stays for the next fetch) */
	gh_mirror_tidy(dir);
	if (gh_mirror_sound(g, dir) == 0) {
		gh_mark(dir, GH_FETCH_MARK, 0);
		return -1;
	}
	if (gh_disk_full(err))
		return -1;
	if (gh_mirror_discard(dir, err, errsz) == -1)
		return -1;
	return gh_mirror_clone(g, url, dir, err, errsz);
}

int
gh_fetch(const char *url, const char *token, const char *dir, uint64_t *size, char *err,
         size_t errsz)
{
	static struct gh_git g; /* its tail is large */
	char lock[PATH_MAX];
	int lfd, rv;

	*size = 0;
	memset(&g, 0, sizeof(g));
	if (dir[0] != '/' || strcmp(dir, "/") == 0)
		return gh_fail(err, errsz, "the mirror must be an absolute path");
	if (access(GH_GIT_PROGRAM, X_OK) == -1)
		return gh_fail(err, errsz, "%s: %s (Debian's git package)", GH_GIT_PROGRAM,
		               strerror(errno));
	if (gh_url_host(url, g.host, sizeof(g.host), err, errsz) == -1)
		return -1;
	g.token = g.host[0] != '\0' ? token : NULL; /* never to a local source */
	if (fmt_ok(lock, sizeof(lock), "%s.lock", dir) == -1)
		return gh_fail(err, errsz, "the mirror's path is too long");
	if ((lfd = open(lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600)) == -1)
		return gh_fail(err, errsz, "the mirror's lock: %s", strerror(errno));
	if (flock(lfd, LOCK_EX) == -1) {
		close(lfd);
		return gh_fail(err, errsz, "the mirror's lock: %s", strerror(errno));
	}
	gh_lock_fd = lfd;
	rv = gh_fetch_locked(&g, url, dir, err, errsz);
	gh_lock_fd = -1;
	*size = gh_tree_size(dir);
	if (rv == 0)
		gh_mirror_stamp(dir, *size);
	close(lfd);
	return rv;
}

/* ---- git's credential helper --------------------------------------------- */

int
gh_credential_helper(int fd, const char *action)
{
	char in[GH_CRED_MAX + 1], req[GH_CRED_MAX + 1], *ans, *line, *save;
	size_t n = 0, rl = 0;
	ssize_t r;

	while (n < GH_CRED_MAX && (r = read(0, in + n, GH_CRED_MAX - n)) != 0) {
		if (r == -1) {
			if (errno == EINTR)
				continue;
			return 1;
		}
		n += (size_t)r;
	}
	in[n] = '\0';
	if (strcmp(action, "get") != 0) {
		sodium_memzero(in, sizeof(in)); /* "store" hands us the password */
		return 0;
	}
	/* only what names the host goes to the helper process */
	req[0] = '\0';
	for (line = strtok_r(in, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save))
		if (strncmp(line, "protocol=", 9) == 0 || strncmp(line, "host=", 5) == 0) {
			int w = snprintf(req + rl, sizeof(req) - rl, "%s\n", line);

			if (w < 0 || (size_t)w >= sizeof(req) - rl)
				return 1;
			rl += (size_t)w;
		}
	if (send(fd, req, rl, MSG_NOSIGNAL) == -1)
		return 1;
	if ((ans = sodium_malloc(GH_CRED_MAX + 1)) == NULL)
		return 1;
	if ((r = recv(fd, ans, GH_CRED_MAX, 0)) > 0 && write(1, ans, (size_t)r) != r) {
		sodium_free(ans);
		return 1;
	}
	sodium_free(ans); /* wipes it */
	return 0;
}

int
gh_mark_damaged(const char *dir)
{
	return gh_mark(dir, GH_DAMAGED_MARK, 1);
}
