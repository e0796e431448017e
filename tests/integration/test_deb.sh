#!/bin/sh
#
# The Debian package and make uninstall.
#
#   sh tests/integration/test_deb.sh          (as root; DEB=FILE uses a built package)
#
# Builds the package (make deb) unless DEB names one, lints it, and installs
# it with dpkg -i into this machine's real system: checks the files, the
# conffiles, the users and the state directory, and that nothing was enabled
# or started; starts the service with the installed unit's own ExecStartPre
# and ExecStart command lines, as systemd would (its User=, its environment),
# and asks /healthz; installs the package again over the running daemon (an
# upgrade: the daemon is stopped, configuration and state kept); starts it
# again, then removes the package with the daemon running (dpkg -r: prerm
# stops it; configuration, state, key and users kept) and purges it (dpkg -P:
# state, key and the users the package made gone).  The maintainer scripts'
# handling of the users is also run in a private mount and pid namespace
# whose /etc and /var/lib are throwaway overlays, where the service users do
# not exist yet: made on configure, kept on remove, removed on purge; a user
# that was there before is kept.  Last, make install into a DESTDIR and make
# uninstall there.
#
# Refuses to run when an agrippa package is installed (or its configuration
# is left), or /var/lib/agrippa or /etc/agrippa exists, or another daemon
# holds /run/agrippad.pid: the machine is left as it was found, the package
# purged even when a check fails.

set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/integration/lib.sh
need_root deb

NAME=deb
MARK="Agrippa service (package agrippa)"
UNIT=/lib/systemd/system/agrippad.service
ETC=/etc/agrippa
STATE=/var/lib/agrippa
PIDF=/run/agrippad.pid
USERS="_agrippa _agrippadb"

refuse() {
	echo "not ok - $NAME: refusing to run: $*"
	echo "$NAME: 0 passed, 1 failed"
	exit 1
}

pkg_status() { dpkg-query -W -f '${Status}' agrippa 2>/dev/null; }
# dpkg knows the package (installed, or its configuration files left)
pkg_known() { pkg_status | grep -qv 'not-installed'; }

! pkg_known || refuse "the agrippa package is installed ($(pkg_status))"
for p in "$STATE" "$ETC"; do
	[ ! -e "$p" ] || refuse "$p exists"
done
if [ -e "$PIDF" ] && ! flock -n "$PIDF" true; then
	refuse "another agrippad holds $PIDF"
fi
for t in dpkg-deb lintian unshare flock; do
	command -v "$t" >/dev/null 2>&1 || refuse "$t is missing (make deps)"
done

make_env
DAEMON_PID=""
INSTALLED=0

# Everything the test made, whatever failed: the daemon, the package.
cleanup() {
	if [ -n "$DAEMON_PID" ] && kill -0 "$DAEMON_PID" 2>/dev/null; then
		kids=$(children_of "$DAEMON_PID")
		kill -TERM "$DAEMON_PID" 2>/dev/null
		# shellcheck disable=SC2086
		wait_for 60 sh -c "! kill -0 $DAEMON_PID 2>/dev/null" ||
		    kill -KILL "$DAEMON_PID" $kids 2>/dev/null
	fi
	if [ "$INSTALLED" = 1 ] && pkg_known; then
		echo "# purging the agrippa package left by a failed check"
		dpkg -P agrippa >/dev/null 2>&1
	fi
	# Only ours: both were refused above when they existed.
	rm -rf "$STATE" "$ETC"
	cleanup_env
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# ---- the package ------------------------------------------------------------

if [ -z "${DEB:-}" ]; then
	if nice make -s deb >"$T/mkdeb.out" 2>&1; then
		DEB=$(tail -n 1 "$T/mkdeb.out")
		ok "make deb builds $DEB"
	else
		notok "make deb"
		cat "$T/mkdeb.out"
		finish "$NAME"
		exit 1
	fi
fi
V=$(sed -n 's/^VERSION *:= *//p' Makefile)
# A version the changelog does not have: refused, saying why, nothing built.
if sh scripts/mkdeb.sh build-deb 9.9.9 "$T/out" >"$T/bad.out" 2>&1; then
	notok "mkdeb.sh refuses a version debian/changelog lacks"
else
	check "mkdeb.sh refuses a version debian/changelog lacks, saying so, building nothing" \
	    sh -c "grep -q 'debian/changelog is at $V, the Makefile at 9.9.9' '$T/bad.out' && [ ! -e '$T/out' ]"
fi
ARCH=$(dpkg --print-architecture)
check "the package is named agrippa_${V}_$ARCH.deb" \
    test "$(basename "$DEB")" = "agrippa_${V}_$ARCH.deb"
check "its control names package agrippa $V" \
    test "$(dpkg-deb -f "$DEB" Package Version | tr '\n' ' ')" = "Package: agrippa Version: $V "
deps=$(dpkg-deb -f "$DEB" Depends)
miss=""
for d in libc6 libpq5 libevent-2.1-7 libsodium23 libyaml-0-2 libmsgpackc2 libjansson4 \
    libcurl4 libgit2-1.5 libseccomp2 libcap2 postgresql-15 git e2fsprogs adduser; do
	echo "$deps" | tr ',' '\n' | grep -q "^ *$d\( \|$\)" || miss="$miss $d"
done
if [ -z "$miss" ]; then ok "Depends names the libraries, postgresql-15, git, e2fsprogs, adduser"; else
	notok "Depends lacks$miss: $deps"; fi

lintian --show-overrides "$DEB" >"$T/lintian.out" 2>&1
if grep -q '^[EW]: ' "$T/lintian.out"; then
	notok "lintian: no error and no warning that is not overridden"
	grep '^[EW]: ' "$T/lintian.out"
else
	ok "lintian: no error and no warning that is not overridden"
fi
# Each override carries its reason (lintian prints it as N: before the O:).
if awk '/^O: / && prev !~ /^N: / { bad = 1 } { prev = $0 } END { exit bad }' "$T/lintian.out"; then
	ok "every lintian override says why"
else
	notok "every lintian override says why"
	cat "$T/lintian.out"
fi

# ---- dpkg -i ----------------------------------------------------------------

# dpkg_run ARGS: dpkg, where invoke-rc.d may act.  A container's
# /usr/sbin/policy-rc.d forbids every service action (exit 101), stop
# included, which would keep prerm from stopping the daemon: then dpkg runs
# in a mount namespace of its own where a policy allowing them is bound over
# that file (the host's stays as it is, for everyone else).
printf '#!/bin/sh\nexit 0\n' >"$T/policy-rc.d"
chmod 0755 "$T/policy-rc.d"
dpkg_run() {
	if [ -x /usr/sbin/policy-rc.d ] && ! /usr/sbin/policy-rc.d agrippad stop >/dev/null 2>&1; then
		# shellcheck disable=SC2016
		unshare --mount --propagation private sh -c \
		    'mount --bind "$0" /usr/sbin/policy-rc.d && exec dpkg "$@"' "$T/policy-rc.d" "$@"
	else
		dpkg "$@"
	fi
}

before_users=""
for u in $USERS; do
	before_users="$before_users$(getent passwd "$u")
"
done
made_users=0
[ -n "$(echo "$before_users" | tr -d '\n')" ] || made_users=1

INSTALLED=1
if dpkg_run -i "$DEB" >"$T/dpkg-i.out" 2>&1; then
	ok "dpkg -i installs the package"
else
	notok "dpkg -i installs the package"
	cat "$T/dpkg-i.out"
	finish "$NAME"
	exit 1
fi
check "dpkg says it is installed" test "$(pkg_status)" = "install ok installed"
miss=""
for f in /usr/sbin/agrippad /usr/sbin/agrippactl /usr/sbin/agrippa-sandbox /usr/sbin/agrippa-git \
    /usr/sbin/agrippa-tree /usr/sbin/agrippa-mcpc /usr/bin/agrippa; do
	[ -x "$f" ] || miss="$miss $f"
done
for f in man8/agrippad.8 man8/agrippactl.8 man5/agrippad.conf.5 man5/agrippa-template.5 man1/agrippa.1; do
	[ -f "/usr/share/man/$f.gz" ] || miss="$miss $f.gz"
done
for f in "$UNIT" /etc/init.d/agrippad $ETC/agrippad.yaml /usr/share/doc/agrippa/copyright \
    /usr/share/doc/agrippa/changelog.gz /usr/share/agrippa/ui/index.html \
    /usr/share/agrippa/templates/run-tests.yaml; do
	[ -f "$f" ] || miss="$miss $f"
done
if [ -z "$miss" ]; then ok "binaries, manual pages, unit, init script, config, doc in place"; else
	notok "missing:$miss"; fi
conff=$(dpkg-query -W -f '${Conffiles}' agrippa)
check "the configuration and the init script are conffiles" \
    sh -c "echo '$conff' | grep -q '^ $ETC/agrippad.yaml ' && echo '$conff' | grep -q '^ /etc/init.d/agrippad '"
check "the installed configuration is valid" sh -c "/usr/sbin/agrippad -n -f $ETC/agrippad.yaml 2>&1 | grep -qx 'configuration OK'"
check "the configuration names Debian's directories" \
    sh -c "grep -qx 'state_dir: $STATE' $ETC/agrippad.yaml && grep -qx 'master_key: $ETC/master.key' $ETC/agrippad.yaml"

# users: made with the package's mark, or the ones that were there, unchanged
for u in $USERS; do
	ent=$(getent passwd "$u")
	if [ $made_users = 1 ]; then
		check "postinst made user $u (system, no login, marked)" \
		    sh -c "[ \$(echo '$ent' | cut -d: -f3) -lt 1000 ] && [ \"\$(echo '$ent' | cut -d: -f5 | cut -d, -f1)\" = '$MARK' ] && [ \"\$(echo '$ent' | cut -d: -f7)\" = /usr/sbin/nologin ]"
	else
		check "postinst keeps the existing user $u as it was" \
		    sh -c "echo '$before_users' | grep -qxF '$ent'"
	fi
done
check "$STATE is root's, mode 0755, empty" \
    sh -c "[ \"\$(stat -c '%U %a' $STATE)\" = 'root 755' ] && [ -z \"\$(ls -A $STATE)\" ]"

# nothing started, nothing enabled
started=""
for d in /proc/[0-9]*; do
	[ "$(readlink "$d/exe" 2>/dev/null)" = /usr/sbin/agrippad ] && started="$started ${d#/proc/}"
done
check "nothing was started (no agrippad process, no pidfile, no key made)" \
    sh -c "[ -z '$started' ] && [ ! -s $PIDF ] && [ ! -e $ETC/master.key ]"
check "the systemd unit is not enabled" \
    sh -c "! ls /etc/systemd/system/*.wants/agrippad.service >/dev/null 2>&1"
check "the SysV script is registered disabled (K links only)" \
    sh -c "ls /etc/rc2.d/K*agrippad >/dev/null 2>&1 && ! ls /etc/rc[2345].d/S*agrippad >/dev/null 2>&1"

# ---- the unit's own command line ----------------------------------------------

# unit_key KEY: the values of KEY= in the unit, one a line.
unit_key() { sed -n "s/^$1=//p" "$UNIT"; }
# unit_env NAME: the value systemd would give $NAME (Environment=, then
# EnvironmentFile=, which a "-" makes optional).
unit_env() {
	v=$(unit_key Environment | tr ' ' '\n' | sed -n "s/^\"*$1=\(.*\)\"*\$/\1/p" | tail -n 1)
	for f in $(unit_key EnvironmentFile); do
		f=${f#-}
		[ -r "$f" ] || continue
		w=$(sed -n "s/^$1=//p" "$f" | tail -n 1 | sed 's/^"\(.*\)"$/\1/')
		[ -z "$w" ] || v=$w
	done
	printf '%s' "$v"
}
# unit_cmd KEY: that command line as systemd runs it: a bare $NAME or
# ${NAME} becomes the variable's words (none when unset or empty).
unit_cmd() {
	set -f
	out=""
	for w in $(unit_key "$1"); do
		# shellcheck disable=SC2016
		case $w in
		'$'[A-Za-z_]* | '${'*'}')
			n=${w#\$}
			n=${n#\{}
			n=${n%\}}
			out="$out $(unit_env "$n")"
			;;
		*)
			# systemd's prefixes of the executable (-@+!:) are not used
			# by this unit; refuse them rather than run something else.
			case "$out$w" in
			[-@+!:]*) echo "unsupported prefix in $1: $w" >&2; return 1 ;;
			esac
			out="$out $w"
			;;
		esac
	done
	# shellcheck disable=SC2086
	set -- $out
	set +f
	echo "$*"
}
# as_unit CMD...: run CMD in the clean environment systemd gives a service,
# as its User= when it has one.
as_unit() {
	u=$(unit_key User)
	if [ -n "$u" ]; then
		env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		    setpriv --reuid="$u" --regid="$u" --init-groups "$@"
	else
		env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"
	fi
}

check "the unit is Type=forking with PIDFile=$PIDF" \
    sh -c "[ \"\$(sed -n 's/^Type=//p' $UNIT)\" = forking ] && [ \"\$(sed -n 's/^PIDFile=//p' $UNIT)\" = $PIDF ]"
PRE=$(unit_cmd ExecStartPre)
START=$(unit_cmd ExecStart)
check "ExecStart runs the installed agrippad on the package's configuration" \
    test "$START" = "/usr/sbin/agrippad -f $ETC/agrippad.yaml"

# start_unit: ExecStartPre, then ExecStart, whose first process exits once
# the daemon is ready (Type=forking); the main pid from PIDFile=.
start_unit() {
	# shellcheck disable=SC2086
	as_unit $PRE >"$T/pre.out" 2>&1 || { cat "$T/pre.out"; return 1; }
	# shellcheck disable=SC2086
	as_unit $START >"$T/start.out" 2>&1 || { cat "$T/start.out"; return 1; }
	DAEMON_PID=$(cat "$PIDF" 2>/dev/null)
	[ -n "$DAEMON_PID" ] && kill -0 "$DAEMON_PID" 2>/dev/null
}
healthz_ok() {
	curl -s --max-time 8 "http://127.0.0.1:$PORT/healthz" >"$T/healthz" 2>/dev/null &&
	    grep -q "\"version\":\"$V\"" "$T/healthz" && grep -q '"database":"up"' "$T/healthz" &&
	    [ "$(healthz_code)" = 200 ]
}
gone() { ! kill -0 "$1" 2>/dev/null; }

# The operator's edit of the conffile: a free loopback port.
sed -i "s|^listen: \[ \"127.0.0.1:8480\" \]\$|listen: [ \"127.0.0.1:$PORT\" ]|" $ETC/agrippad.yaml
check "the test's configuration listens on 127.0.0.1:$PORT" grep -q "127.0.0.1:$PORT" $ETC/agrippad.yaml
cp $ETC/agrippad.yaml "$T/conf.edited"

if start_unit; then ok "ExecStartPre and ExecStart start the daemon (pid $DAEMON_PID)"; else
	notok "ExecStartPre and ExecStart start the daemon"
	tail -n 20 $STATE/postgres.log 2>/dev/null
	finish "$NAME"
	exit 1
fi
check "GET /healthz answers 200 with the version and the database up" wait_for 60 healthz_ok
check "the supervisor is /usr/sbin/agrippad, as root" \
    sh -c "[ \"\$(readlink /proc/$DAEMON_PID/exe)\" = /usr/sbin/agrippad ] && [ \"\$(awk '/^Uid:/ { print \$2 }' /proc/$DAEMON_PID/status)\" = 0 ]"
uid=$(id -u _agrippa)
kids_as_user() {
	n=0
	for k in $(children_of "$DAEMON_PID"); do
		tr '\0' ' ' <"/proc/$k/cmdline" 2>/dev/null | grep -q '^agrippad -P httpd ' || continue
		[ "$(awk '/^Uid:/ { print $2 }' "/proc/$k/status")" = "$uid" ] && n=1
	done
	[ $n = 1 ]
}
check "its httpd runs as _agrippa" kids_as_user
check "the first start made the master key (0600) and the database in $STATE" \
    sh -c "[ \"\$(stat -c '%U %a' $ETC/master.key)\" = 'root 600' ] && [ \"\$(stat -c %U $STATE/pg)\" = _agrippadb ]"
host_id=$(cat $STATE/host-id 2>/dev/null)

# ---- an upgrade over the running daemon -----------------------------------------

old=$DAEMON_PID
if dpkg_run -i "$DEB" >"$T/dpkg-u.out" 2>&1; then ok "dpkg -i again (an upgrade) over the running daemon"; else
	notok "dpkg -i again (an upgrade) over the running daemon"
	cat "$T/dpkg-u.out"
fi
check "the upgrade stopped the daemon (prerm upgrade)" wait_for 30 gone "$old"
check "and did not start it again" sh -c "! curl -s --max-time 2 -o /dev/null http://127.0.0.1:$PORT/healthz"
check "the edited configuration, the key and the state are kept" \
    sh -c "cmp -s $ETC/agrippad.yaml '$T/conf.edited' && [ -s $ETC/master.key ] && [ \"\$(cat $STATE/host-id)\" = '$host_id' ]"
if start_unit && wait_for 60 healthz_ok; then ok "the upgraded daemon starts on the kept state"; else
	notok "the upgraded daemon starts on the kept state"
fi

# ---- dpkg -r with the daemon running ----------------------------------------------

old=$DAEMON_PID
if dpkg_run -r agrippa >"$T/dpkg-r.out" 2>&1; then ok "dpkg -r removes the package"; else
	notok "dpkg -r removes the package"
	cat "$T/dpkg-r.out"
fi
check "prerm stopped the daemon and its PostgreSQL" sh -c "! kill -0 $old 2>/dev/null && ! pgrep -u _agrippadb -f '$STATE/pg' >/dev/null"
check "dpkg keeps its configuration files" test "$(pkg_status)" = "deinstall ok config-files"
check "the programs and the unit are gone" sh -c "[ ! -e /usr/sbin/agrippad ] && [ ! -e $UNIT ] && [ ! -e /usr/bin/agrippa ]"
check "the edited configuration, the key and the state are kept" \
    sh -c "cmp -s $ETC/agrippad.yaml '$T/conf.edited' && [ -s $ETC/master.key ] && [ -d $STATE/pg ] && [ \"\$(cat $STATE/host-id)\" = '$host_id' ]"
kept=1
for u in $USERS; do getent passwd "$u" >/dev/null || kept=0; done
check "the users are kept" test $kept = 1

# ---- dpkg -P -------------------------------------------------------------------------

if dpkg_run -P agrippa >"$T/dpkg-p.out" 2>&1; then ok "dpkg -P purges the package"; else
	notok "dpkg -P purges the package"
	cat "$T/dpkg-p.out"
fi
check "dpkg knows it no more" sh -c "! dpkg-query -W -f '\${Status}' agrippa 2>/dev/null | grep -qv not-installed"
check "the state directory and $ETC (key and configuration) are gone" sh -c "[ ! -e $STATE ] && [ ! -e $ETC ]"
check "no rc.d link is left" sh -c "! ls /etc/rc?.d/*agrippad >/dev/null 2>&1 && [ ! -e /etc/init.d/agrippad ]"
for u in $USERS; do
	ent=$(getent passwd "$u")
	if [ $made_users = 1 ]; then
		check "purge removed user $u and its group" sh -c "[ -z '$ent' ] && ! getent group $u >/dev/null"
	else
		check "purge keeps user $u, which the package did not make" \
		    sh -c "[ -n '$ent' ] && echo '$before_users' | grep -qxF '$ent'"
	fi
done
INSTALLED=0

# ---- the users' life, in throwaway /etc and /var/lib ----------------------------------

# In new mount and pid namespaces (no process of the host's service users is
# visible, so userdel may remove them there), /etc and /var/lib are overlays
# whose changes go to $T: the host keeps its users.  The maintainer scripts
# are the package's own.
mkdir -p "$T/ctrl" "$T/ov/etc" "$T/ov/etc.w" "$T/ov/lib" "$T/ov/lib.w"
dpkg-deb -e "$DEB" "$T/ctrl"
cat >"$T/users.sh" <<EOF
set -u
C=$T/ctrl
# deb-systemd-helper, which the scripts call, runs only under dpkg.
export DPKG_MAINTSCRIPT_PACKAGE=agrippa DPKG_MAINTSCRIPT_ARCH=$ARCH
MARK="$MARK"
mount -t overlay overlay -o lowerdir=/etc,upperdir=$T/ov/etc,workdir=$T/ov/etc.w /etc || exit 1
mount -t overlay overlay -o lowerdir=/var/lib,upperdir=$T/ov/lib,workdir=$T/ov/lib.w /var/lib || exit 1
for u in $USERS; do
	if getent passwd \$u >/dev/null; then userdel \$u || exit 1; fi
	if getent group \$u >/dev/null; then groupdel \$u || exit 1; fi
done
t() { d=\$1; shift; if "\$@"; then echo "ok - \$d"; else echo "not ok - \$d"; fi; }
t "users: postinst configure succeeds on a host without them" sh \$C/postinst configure
t "users: _agrippa and _agrippadb made, marked, in groups of their own" \
    sh -c 'for u in $USERS; do [ "\$(getent passwd \$u | cut -d: -f5 | cut -d, -f1)" = "\$0" ] && getent group \$u >/dev/null || exit 1; done' "\$MARK"
a=\$(getent passwd _agrippa)
t "users: the two users differ" test "\$(id -u _agrippa)" != "\$(id -u _agrippadb)"
t "users: $STATE made, root's, 0755" test "\$(stat -c '%U %a' $STATE)" = "root 755"
t "users: a second configure changes nothing" sh -c "sh \$C/postinst configure && [ \"\\\$(getent passwd _agrippa)\" = '\$a' ]"
t "users: postrm remove keeps them and the state" sh -c "sh \$C/postrm remove && getent passwd _agrippa >/dev/null && getent passwd _agrippadb >/dev/null && [ -d $STATE ]"
t "users: postrm purge succeeds" sh \$C/postrm purge
t "users: purge removed both users and groups, and $STATE" sh -c "! getent passwd _agrippa && ! getent group _agrippa && ! getent passwd _agrippadb && ! getent group _agrippadb && [ ! -e $STATE ]"
useradd --system --user-group --no-create-home --home-dir /var/empty --shell /usr/sbin/nologin _agrippa
b=\$(getent passwd _agrippa)
t "users: with _agrippa made by make install, configure makes only _agrippadb" \
    sh -c "sh \$C/postinst configure && [ \"\\\$(getent passwd _agrippa)\" = '\$b' ] && getent passwd _agrippadb >/dev/null"
t "users: purge keeps the _agrippa it did not make, removes _agrippadb" \
    sh -c "sh \$C/postrm purge 2>/dev/null && [ \"\\\$(getent passwd _agrippa)\" = '\$b' ] && ! getent passwd _agrippadb >/dev/null"
EOF
unshare --mount --pid --fork --mount-proc --propagation private sh "$T/users.sh" >"$T/users.out" 2>&1
cat "$T/users.out"
T_PASS=$((T_PASS + $(grep -c '^ok - ' "$T/users.out")))
T_FAIL=$((T_FAIL + $(grep -c '^not ok - ' "$T/users.out")))
[ "$(grep -c 'ok - ' "$T/users.out")" -eq 10 ] || notok "users: all 10 checks ran"
for u in $USERS; do
	ent=$(getent passwd "$u")
	[ -n "$ent" ] && [ $made_users = 1 ] && notok "users: the host has no $u after the namespace"
	[ $made_users = 0 ] && ! echo "$before_users" | grep -qxF "$ent" && notok "users: the host's $u is unchanged"
done

# ---- make install and make uninstall in a DESTDIR ------------------------------------

D=$T/destdir
mkdir -p "$D/usr/sbin"
echo keep >"$D/usr/sbin/someone-else"
mk() { nice make -s BUILD="$BUILD" PREFIX=/usr DESTDIR="$D" "$@" >>"$T/make.out" 2>&1; }
files() { (cd "$D" && find . \( -type f -o -type l \) ! -path ./usr/sbin/someone-else | sort); }
if mk install; then ok "make install DESTDIR=... PREFIX=/usr"; else notok "make install"; cat "$T/make.out"; fi
n=$(files | wc -l)
check "it installed files ($n) and no user (DESTDIR)" sh -c "[ $n -gt 20 ] && [ -x '$D/usr/sbin/agrippad' ] && [ -f '$D/etc/agrippad.yaml' ]"
if mk uninstall; then ok "make uninstall"; else notok "make uninstall"; cat "$T/make.out"; fi
check "make uninstall removed every file install put" test -z "$(files)"
check "and its directories under share/agrippa" test ! -e "$D/usr/share/agrippa"
check "and nothing else" test "$(cat "$D/usr/sbin/someone-else")" = keep
check "make uninstall again succeeds (nothing left to remove)" mk uninstall
mk install
echo "# the operator's" >>"$D/etc/agrippad.yaml"
mk uninstall
check "an edited configuration file is kept, the rest removed" \
    sh -c "[ \"\$(cd '$D' && find . -type f ! -path ./usr/sbin/someone-else)\" = ./etc/agrippad.yaml ] && grep -q 'keeping.*agrippad.yaml' '$T/make.out'"

finish "$NAME"
