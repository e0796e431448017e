#ifndef AGRIPPA_HTTPD_H
#define AGRIPPA_HTTPD_H

/* httpd.c: the HTTP/JSON API process on sockets the supervisor bound. */
__attribute__((noreturn)) void httpd_main(void);

#define HTTPD_DB_TIMEOUT_SECS 5
#define HTTPD_MAX_LISTEN 8

#endif
