/*
 * Logging shared by every role.  Every line names the process that wrote it
 * (log_procinit).  In foreground mode lines go to stderr, otherwise to syslog.
 */
#ifndef AGRIPPA_LOG_H
#define AGRIPPA_LOG_H

#include <stdarg.h>

#define LOG_PRINTF(f, a) __attribute__((format(printf, f, a)))

/* dest: 1 = stderr, 0 = syslog (opened with LOG_NDELAY so it survives chroot). */
void log_init(int to_stderr, int verbose, int facility);
/* Name the process in every later line, e.g. "engine". */
void log_procinit(const char *procname);
void log_setverbose(int verbose);
/* With syslog logging: also copy errors to stderr (a detaching daemon's
 * start-up, while the operator's terminal still listens). */
void log_errors_to_stderr(int on);
int log_getverbose(void);

void log_warn(const char *fmt, ...) LOG_PRINTF(1, 2);   /* appends strerror(errno) */
void log_warnx(const char *fmt, ...) LOG_PRINTF(1, 2);
void log_info(const char *fmt, ...) LOG_PRINTF(1, 2);
void log_debug(const char *fmt, ...) LOG_PRINTF(1, 2);
__attribute__((noreturn)) void fatal(const char *fmt, ...) LOG_PRINTF(1, 2);
__attribute__((noreturn)) void fatalx(const char *fmt, ...) LOG_PRINTF(1, 2);

#endif
