#!/bin/sh
# Create the unprivileged service users when missing: _agrippa runs every
# child process, _agrippadb runs the embedded PostgreSQL.  Neither can log in.
set -eu
[ "$(id -u)" -eq 0 ] || { echo "mkusers: must run as root" >&2; exit 1; }
for u in _agrippa _agrippadb; do
	if ! getent passwd "$u" >/dev/null; then
		useradd --system --user-group --no-create-home --home-dir /var/empty \
		    --shell /usr/sbin/nologin "$u"
		echo "mkusers: created user $u"
	fi
done
