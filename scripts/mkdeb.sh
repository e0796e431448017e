#!/bin/sh
# Build the Debian package from a tree built with PREFIX=/usr, with the
# dpkg-dev tools alone (no debhelper):
#
#   sh scripts/mkdeb.sh BUILD VERSION OUTDIR     (what "make deb" runs)
#
# The staging tree is what "make install DESTDIR=... PREFIX=/usr" puts, with
# Debian's places: the configuration as a conffile in /etc/agrippa, the
# systemd unit in /lib/systemd/system, the SysV script in /etc/init.d (both
# made from rc.d/ with the package's paths), compressed manual pages,
# stripped binaries, the copyright and changelog in /usr/share/doc/agrippa.
# debian/control, changelog, copyright, the maintainer scripts and the
# lintian overrides are in debian/; dpkg-shlibdeps computes the libraries'
# dependencies from the binaries and dpkg-gencontrol writes DEBIAN/control.
# Prints the path of the package.
set -eu
[ $# -eq 3 ] || { echo "usage: mkdeb.sh BUILD VERSION OUTDIR" >&2; exit 2; }
B=$1 V=$2 OUT=$3
cd "$(dirname "$0")/.."
die() { echo "mkdeb: $*" >&2; exit 1; }

for t in dpkg-deb dpkg-shlibdeps dpkg-gencontrol dpkg-parsechangelog strip; do
	command -v "$t" >/dev/null 2>&1 || die "$t is missing (make deps installs dpkg-dev)"
done
cv=$(dpkg-parsechangelog -S Version)
[ "$cv" = "$V" ] || die "debian/changelog is at $cv, the Makefile at $V: add a changelog entry"
ARCH=$(dpkg --print-architecture)

umask 022
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
S=$W/agrippa
mkdir -m 0755 "$S"
${MAKE:-make} -s BUILD="$B" PREFIX=/usr DESTDIR="$S" install >/dev/null

# sub FILE SED-EXPR...: edit FILE in place; each expression must change it.
sub() {
	f=$1
	shift
	for e in "$@"; do
		cp "$f" "$W/before"
		sed -i "$e" "$f"
		! cmp -s "$f" "$W/before" || die "$f: '$e' matched nothing (rc.d/ changed?)"
	done
}
# none FILE PATTERN: FILE must not contain PATTERN any more.
none() { ! grep -n "$2" "$1" || die "$1: still names $2"; }

CONF=/etc/agrippa/agrippad.yaml
STATE=/var/lib/agrippa

# The configuration, with Debian's directories (FHS: state in /var/lib).
install -d "$S/etc/agrippa"
mv "$S/etc/agrippad.yaml" "$S$CONF"
sub "$S$CONF" \
    "s|^state_dir: /var/agrippa\$|state_dir: $STATE|" \
    "s|^master_key: /etc/agrippad/master.key\$|master_key: /etc/agrippa/master.key|" \
    "s|^chroot: /var/empty\$|chroot: $STATE/empty|" \
    "s|agrippad -n -f /etc/agrippad.yaml|agrippad -n -f $CONF|" \
    "s|/usr/local/share/agrippa/ui|/usr/share/agrippa/ui|" \
    "s|/etc/agrippad/anthropic.key|/etc/agrippa/anthropic.key|" \
    "1i # As packaged for Debian: agrippad reads this file because the systemd\\
# unit and the init script pass -f $CONF, and state_dir,\\
# master_key and chroot below are Debian's places, not the built-in\\
# defaults.  See agrippad(8), Debian package.\\
#"
none "$S$CONF" "/var/agrippa\b\|/etc/agrippad/\|/usr/local"

# The systemd unit: the package's paths, and a header for the package.
install -d "$S/lib/systemd/system"
U=$S/lib/systemd/system/agrippad.service
{
	echo "# systemd unit for agrippad(8), installed by the agrippa package: neither"
	echo "# enabled nor started.  After editing $CONF:"
	echo "#	systemctl enable --now agrippad"
	echo "#"
	sed -n '/^# Extra flags/,$p' rc.d/agrippad.service
} >"$U"
sub "$U" \
    "s|/usr/local/sbin/agrippad|/usr/sbin/agrippad -f $CONF|g" \
    "s|^ReadWritePaths=-/var/agrippa /run /etc/agrippad\$|ReadWritePaths=-$STATE /run /etc/agrippa|" \
    "s|^ConfigurationDirectory=agrippad\$|ConfigurationDirectory=agrippa|" \
    "s|^# Create /etc/agrippad |# Create /etc/agrippa |" \
    "s|AGRIPPAD_OPTS=\"-f /etc/agrippa.yaml\"|AGRIPPAD_OPTS=\"-v\"|"
none "$U" "/usr/local\|/var/agrippa\b\|/etc/agrippad\b"
grep -q "^ExecStart=/usr/sbin/agrippad -f $CONF \$AGRIPPAD_OPTS\$" "$U" || die "$U: no ExecStart"
chmod 0644 "$U"

# The SysV script (a conffile, as everything in /etc).
install -d "$S/etc/init.d"
I=$S/etc/init.d/agrippad
cp rc.d/agrippad.init "$I"
sub "$I" \
    "s|^DAEMON=/usr/local/sbin/agrippad\$|DAEMON=/usr/sbin/agrippad|" \
    "s|-n \$AGRIPPAD_OPTS|-n -f $CONF \$AGRIPPAD_OPTS|" \
    "s|-- \$AGRIPPAD_OPTS|-- -f $CONF \$AGRIPPAD_OPTS|" \
    "s|^# Install as /etc/init.d/agrippad, then:|# Installed by the agrippa package, disabled; to use it:|" \
    "s|^#\tupdate-rc.d agrippad defaults\$|#\tupdate-rc.d agrippad enable|" \
    "s|e.g. \"-f /etc/agrippa.yaml\"|e.g. \"-v\"|"
none "$I" "/usr/local"
chmod 0755 "$I"

# make install's copies of rc.d/ carry /usr/local paths: the two above
# replace them.
rm -r "$S/usr/share/agrippa/rc.d"

# Debian policy: manual pages compressed, binaries stripped.
find "$S/usr/share/man" -type f -exec gzip -9n {} +
for f in "$S"/usr/sbin/* "$S"/usr/bin/*; do
	strip --remove-section=.comment --remove-section=.note --strip-unneeded "$f"
done

# A native package (no upstream tarball of its own): changelog.gz.
D=$S/usr/share/doc/agrippa
install -d "$D" "$S/usr/share/lintian/overrides"
install -m 0644 debian/copyright "$D/copyright"
gzip -9nc debian/changelog >"$D/changelog.gz"
chmod 0644 "$D/changelog.gz"
install -m 0644 debian/agrippa.lintian-overrides "$S/usr/share/lintian/overrides/agrippa"

# The control area.
install -d -m 0755 "$S/DEBIAN"
for m in postinst prerm postrm; do
	install -m 0755 "debian/$m" "$S/DEBIAN/$m"
done
(cd "$S" && find etc -type f | sort | sed 's|^|/|') >"$S/DEBIAN/conffiles"
(cd "$S" && find . -path ./DEBIAN -prune -o -path ./etc -prune -o -type f -print |
    sed 's|^\./||' | LC_ALL=C sort | xargs md5sum) >"$S/DEBIAN/md5sums"
chmod 0644 "$S/DEBIAN/conffiles" "$S/DEBIAN/md5sums"
echo "misc:Depends=" >"$W/substvars"
dpkg-shlibdeps -T"$W/substvars" "$S"/usr/sbin/* "$S"/usr/bin/*
dpkg-gencontrol -pagrippa -P"$S" -T"$W/substvars" -f"$W/files"

mkdir -p "$OUT"
DEB=$OUT/agrippa_${V}_$ARCH.deb
dpkg-deb --root-owner-group -Zxz --build "$S" "$DEB" >/dev/null
echo "$DEB"
