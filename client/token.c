/*
 * The API token: AGRIPPA_TOKEN, or a file that only its owner may read.
 * Like ssh with a private key, a token file that its group or others could
 * read is refused rather than used: the token is as good as a password.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/client.h"

int
cli_token_valid(const char *s, size_t n)
{
	size_t k;

	if (n < 5 || n > CLI_TOKEN_MAX || strncmp(s, "agr_", 4) != 0)
		return 0;
	for (k = 4; k < n; k++)
		if (s[k] == '\0' || strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		                           "0123456789-_",
		                           s[k]) == NULL)
			return 0;
	return 1;
}

/* The default file: $XDG_CONFIG_HOME/agrippa/token, else
 * $HOME/.config/agrippa/token.  Returns 0, or -1 when neither is set. */
static int
token_default(char *path, size_t pathsz)
{
	const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
	int n;

	if (xdg != NULL && xdg[0] == '/')
		n = snprintf(path, pathsz, "%s/agrippa/token", xdg);
	else if (home != NULL && home[0] == '/')
		n = snprintf(path, pathsz, "%s/.config/agrippa/token", home);
	else
		return -1;
	return n > 0 && (size_t)n < pathsz ? 0 : -1;
}

/* Read the token from the open file fd (named path in messages). */
static int
token_read(struct cli *c, int fd, const char *path)
{
	char buf[CLI_TOKEN_MAX + 3];
	struct stat st;
	size_t len = 0;
	ssize_t n;

	if (fstat(fd, &st) == -1) {
		cli_err("%s: %s", path, strerror(errno));
		return CLI_USAGE;
	}
	if (!S_ISREG(st.st_mode)) {
		cli_err("%s: the token file is not a regular file", path);
		return CLI_USAGE;
	}
	if (st.st_uid != geteuid()) {
		cli_err("%s: the token file is owned by uid %lu, not by you (uid %lu)", path,
		        (unsigned long)st.st_uid, (unsigned long)geteuid());
		return CLI_USAGE;
	}
	if ((st.st_mode & 077) != 0) {
		cli_err("%s: permissions %04o are too open: a token file must be readable by "
		        "its owner only (chmod 600 %s)",
		        path, (unsigned)(st.st_mode & 07777), path);
		return CLI_USAGE;
	}
	while (len < sizeof(buf) && (n = read(fd, buf + len, sizeof(buf) - len)) != 0) {
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			cli_err("%s: %s", path, strerror(errno));
			sodium_memzero(buf, sizeof(buf));
			return CLI_USAGE;
		}
		len += (size_t)n;
	}
	if (len > 0 && buf[len - 1] == '\n')
		len--;
	if (!cli_token_valid(buf, len)) {
		sodium_memzero(buf, sizeof(buf));
		cli_err("%s: not an agrippa token (one line: agr_ and up to 128 base64url "
		        "characters)",
		        path);
		return CLI_USAGE;
	}
	memcpy(c->token, buf, len);
	c->token[len] = '\0';
	sodium_memzero(buf, sizeof(buf));
	return CLI_OK;
}

int
cli_token_load(struct cli *c, const char *path)
{
	const char *env = getenv("AGRIPPA_TOKEN");
	char dflt[4096];
	int fd, rv, given = path != NULL;

	if (path == NULL && env != NULL) {
		if (!cli_token_valid(env, strlen(env))) {
			cli_err("AGRIPPA_TOKEN is not an agrippa token (agr_ and up to 128 "
			        "base64url characters)");
			return CLI_USAGE;
		}
		memcpy(c->token, env, strlen(env) + 1);
		return CLI_OK;
	}
	if (path == NULL && token_default(dflt, sizeof(dflt)) == 0)
		path = dflt;
	if (path == NULL || (fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)) == -1) {
		if (!given && (path == NULL || errno == ENOENT))
			cli_err("no token: set AGRIPPA_TOKEN, write it to %s (mode 0600), or "
			        "name a file with -t",
			        path != NULL ? path : "~/.config/agrippa/token");
		else
			cli_err("%s: %s", path, strerror(errno));
		return CLI_USAGE;
	}
	rv = token_read(c, fd, path);
	close(fd);
	return rv;
}
