/* Logging: stderr in the foreground, syslog otherwise; every line names its process. */
#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

static int log_to_stderr = 1;
static int log_verbose;
static int log_errors_stderr;
static const char *log_procname = "agrippad";

void
log_init(int to_stderr, int verbose, int facility)
{
	log_to_stderr = to_stderr;
	log_verbose = verbose;
	if (!to_stderr)
		openlog("agrippad", LOG_PID | LOG_NDELAY, facility);
	tzset();
}

void
log_procinit(const char *procname)
{
	if (procname != NULL)
		log_procname = procname;
}

void
log_errors_to_stderr(int on)
{
	log_errors_stderr = on;
}

void
log_setverbose(int verbose)
{
	log_verbose = verbose;
}

int
log_getverbose(void)
{
	return log_verbose;
}

static void vlog(int pri, const char *fmt, va_list ap, const char *suffix)
    __attribute__((format(printf, 2, 0)));

static void
vlog(int pri, const char *fmt, va_list ap, const char *suffix)
{
	char msg[2048];
	int saved = errno;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (log_to_stderr) {
		dprintf(STDERR_FILENO, "%s[%ld]: %s%s%s\n", log_procname, (long)getpid(), msg,
		    suffix ? ": " : "", suffix ? suffix : "");
	} else {
		syslog(pri, "%s: %s%s%s", log_procname, msg, suffix ? ": " : "",
		    suffix ? suffix : "");
		if (log_errors_stderr && pri <= LOG_ERR)
			dprintf(STDERR_FILENO, "%s: %s%s%s\n", log_procname, msg,
			    suffix ? ": " : "", suffix ? suffix : "");
	}
	errno = saved;
}

void
log_warn(const char *fmt, ...)
{
	va_list ap;
	const char *e = strerror(errno);

	va_start(ap, fmt);
	vlog(LOG_ERR, fmt, ap, e);
	va_end(ap);
}

void
log_warnx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(LOG_ERR, fmt, ap, NULL);
	va_end(ap);
}

void
log_info(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(LOG_INFO, fmt, ap, NULL);
	va_end(ap);
}

void
log_debug(const char *fmt, ...)
{
	va_list ap;

	if (!log_verbose)
		return;
	va_start(ap, fmt);
	vlog(LOG_DEBUG, fmt, ap, NULL);
	va_end(ap);
}

void
fatal(const char *fmt, ...)
{
	va_list ap;
	const char *e = strerror(errno);

	va_start(ap, fmt);
	vlog(LOG_CRIT, fmt, ap, e);
	va_end(ap);
	exit(1);
}

void
fatalx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(LOG_CRIT, fmt, ap, NULL);
	va_end(ap);
	exit(1);
}
