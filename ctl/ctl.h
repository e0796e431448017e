/*
 * agrippactl's shared pieces.
 */
#ifndef AGRIPPA_CTL_H
#define AGRIPPA_CTL_H

#define CTL_DEFAULT_SOCKET "/run/agrippad.sock"
#define CTL_TIMEOUT_MS 30000
#define CTL_BACKUP_TIMEOUT_MS (6 * 3600 * 1000) /* a backup of a large store */
#define CTL_MCP_TEST_TIMEOUT_MS 4320000 /* startup_timeout's and call_timeout's maximum
                                          and the listing */
#define CTL_MAX_FRAME (1024 * 1024)

/* conn.c: connect to the control socket at path; exits 2 when it cannot. */
int ctl_connect(const char *path);

/* sandbox.c: "sandbox run ..." (argv[0] is "sandbox"); returns the exit status. */
int ctl_sandbox_run(const char *sock, int argc, char **argv);

/* template.c: "template check FILE" (argv[0] is "template"), compiled
 * locally; returns the exit status. */
int ctl_template(int argc, char **argv, int json);

#endif
