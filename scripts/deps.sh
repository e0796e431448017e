#!/bin/sh
# Install the Debian 12 packages that building, testing and running Agrippa
# need.  Idempotent: does nothing when every package is already present.
set -eu
PKGS="build-essential pkg-config clang
libpq-dev libevent-dev libsodium-dev libyaml-dev libmsgpack-dev libseccomp-dev
libcap-dev libjansson-dev libgit2-dev libcurl4-openssl-dev libcmocka-dev
git openssl e2fsprogs util-linux
postgresql-15 postgresql-client-15 curl mandoc procps passwd python3 python3-pip wrk bubblewrap"
missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
		missing="$missing $p"
	fi
done
if [ -z "$missing" ]; then
	echo "deps: all packages present"
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "deps: missing:$missing (run 'make deps' as root)" >&2
	exit 1
fi
echo "deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing
