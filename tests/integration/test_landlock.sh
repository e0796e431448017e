#!/bin/sh
# Landlock on the proxy and egress (privsep/landlock.c): after they drop
# their privileges, a file their user could read but that name resolution
# and TLS do not need is refused to them (EACCES), while what they need
# (the CA bundle, /etc/hosts) still opens for the proxy.  The probe is a
# test build's own (AGRIPPA_TEST_LANDLOCK_PROBE: each path is opened once,
# after Landlock and before the seccomp filter, and the outcome logged);
# the control is the same files opened by the same user without Landlock.
. tests/integration/lib.sh
need_root landlock
make_env
trap cleanup_env EXIT
mkdir -p "$T/secret"
echo "not for the proxy" >"$T/secret/secret.txt"
echo "not for egress" >"$T/empty/probe.txt"
chmod 0755 "$T/secret"
chmod 0644 "$T/secret/secret.txt" "$T/empty/probe.txt"
CA=/etc/ssl/certs/ca-certificates.crt
check "the control: the service user can read the files without Landlock" \
	setpriv --reuid=_agrippa --regid=_agrippa --clear-groups sh -c "cat '$T/secret/secret.txt' '$T/empty/probe.txt' >/dev/null"
AGRIPPA_TEST_LANDLOCK_PROBE="$T/secret/secret.txt:$T/empty/probe.txt:$T/agrippad.yaml:$CA:/etc/hosts:/probe.txt"
export AGRIPPA_TEST_LANDLOCK_PROBE
start_daemon_or_finish landlock
unset AGRIPPA_TEST_LANDLOCK_PROBE
probe() { grep -E "^$1\[[0-9]+\]: landlock probe: $2: " "$LOG" | tail -1 | sed 's/.*: landlock probe: [^:]*: //'; }
check "the proxy may not open a file its user can read ($(probe proxy "$T/secret/secret.txt"))" \
	[ "$(probe proxy "$T/secret/secret.txt")" = "Permission denied" ]
check "... nor the daemon's configuration ($(probe proxy "$T/agrippad.yaml"))" \
	[ "$(probe proxy "$T/agrippad.yaml")" = "Permission denied" ]
check "... nor the chroot's file ($(probe proxy "$T/empty/probe.txt"))" \
	[ "$(probe proxy "$T/empty/probe.txt")" = "Permission denied" ]
check "the proxy still opens the CA bundle TLS needs" [ "$(probe proxy "$CA")" = opened ]
check "... and /etc/hosts, which name resolution reads" [ "$(probe proxy /etc/hosts)" = opened ]
# egress is chrooted into $T/empty: /probe.txt is $T/empty/probe.txt there
check "egress may open nothing, not even a readable file in its chroot ($(probe egress /probe.txt))" \
	[ "$(probe egress /probe.txt)" = "Permission denied" ]
check "the proxy still answers: the daemon is healthy" [ "$(healthz_code)" = 200 ]
finish landlock
