#!/bin/sh
#
# Documentation and init script consistency.
#
#   sh tests/integration/test_docs.sh
#
# Checks that the manual pages lint clean and document what the code has
# (every configuration key in supervisor/config.h, every agrippad flag in its
# usage string, every agrippactl and agrippa command in its command table,
# every agrippa option and environment variable), that the
# init scripts parse, and that each of them checks the configuration with
# "agrippad -n" before starting the daemon; that docs/openapi.yaml passes the
# standard OpenAPI validator and names every error code the daemon answers.  The scripts are run against
# stubs of agrippad, start-stop-daemon and rc.subr that record the calls.
#
# Prints "ok - ..." or "not ok - ..." per check (details of a failure follow
# as "# " lines), then "docs: N passed, M failed"; exits 1 if any failed.

set -u
cd "$(dirname "$0")/../.." || exit 1

pass=0
fail=0
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM

ok() {
	pass=$((pass + 1))
	echo "ok - $1"
}

# notok description [details...]: details are printed as "# " lines.
notok() {
	fail=$((fail + 1))
	echo "not ok - $1"
	shift
	for d in "$@"; do
		printf '%s\n' "$d" | sed 's/^/#   /'
	done
}

# has_item page macro name: the page has ".It <macro> <name>" (name followed
# by the end of the line or by more arguments).
has_item() {
	grep -Fqx ".It $2 $3" "$1" || grep -Fq ".It $2 $3 " "$1"
}

# ---- manual pages lint clean ------------------------------------------
#
# -Wwarning: STYLE messages are not failures, because the only ones these
# pages produce are "referenced manual not found" for the Xr links between
# agrippad(8), agrippactl(8) and agrippad.conf(5), which are not installed
# where the test runs.

PAGES="docs/agrippad.8 docs/agrippactl.8 docs/agrippad.conf.5 docs/agrippa-template.5 docs/agrippa.1"
if command -v mandoc >/dev/null 2>&1; then
	for p in $PAGES; do
		if [ ! -f "$p" ]; then
			notok "$p passes mandoc -Tlint" "missing"
			continue
		fi
		if out=$(mandoc -Tlint -Wwarning "$p" 2>&1) && [ -z "$out" ]; then
			ok "$p passes mandoc -Tlint -Wwarning"
		else
			notok "$p passes mandoc -Tlint -Wwarning" "$out"
		fi
	done
else
	notok "manual pages lint clean" "mandoc is not installed (make deps)"
fi

# ---- every configuration key is documented -----------------------------
#
# Keys are the "name:" (or "parent.child:") at the start of field comments
# in supervisor/config.h, e.g. "/* state_dir: /var/agrippa */".  Some
# comments use the same shape for a label rather than a key; those words are
# listed here.

CONF_H=supervisor/config.h
CONF_5=docs/agrippad.conf.5
NOT_KEYS="secret"

if [ -f "$CONF_H" ]; then
	keys=$(sed -En 's|.*/\* ([a-z_]+(\.[a-z_]+)?):.*|\1|p' "$CONF_H")
	if [ -z "$keys" ]; then
		notok "configuration keys found in $CONF_H" "no field comment matched"
	fi
	for k in $keys; do
		case " $NOT_KEYS " in *" $k "*) continue ;; esac
		missing=""
		# database.pool: both "database" and, in its list, "pool".
		for part in $(printf '%s\n' "$k" | tr '.' ' '); do
			has_item "$CONF_5" Ic "$part" || missing="$missing $part"
		done
		if [ -z "$missing" ]; then
			ok "$CONF_5 documents key $k"
		else
			notok "$CONF_5 documents key $k" "no '.It Ic' entry for:$missing"
		fi
	done
else
	notok "configuration keys found" "$CONF_H does not exist"
fi

# ---- every agrippad flag is documented ----------------------------------

AGRIPPAD_C=supervisor/agrippad.c
flags=""
if [ -f "$AGRIPPAD_C" ]; then
	usage=$(grep -F 'usage: %s [-' "$AGRIPPAD_C" | head -n 1)
	# "[-dnv] [-f file]" -> "dnvf"
	flags=$(printf '%s\n' "$usage" | grep -o '\[-[A-Za-z]*' | sed 's/^\[-//' | tr -d '\n')
	[ -n "$flags" ] || notok "usage string found in $AGRIPPAD_C" \
	    "no line containing 'usage: %s [-'"
fi
[ -n "$flags" ] || flags=dnvf
for f in $(printf '%s\n' "$flags" | sed 's/./& /g'); do
	if has_item docs/agrippad.8 Fl "$f"; then
		ok "docs/agrippad.8 documents -$f"
	else
		notok "docs/agrippad.8 documents -$f" "no '.It Fl $f' entry"
	fi
done

# ---- every agrippactl command is documented ------------------------------

CTL_C=ctl/agrippactl.c
cmds=""
if [ -f "$CTL_C" ]; then
	cmds=$(awk '
		/static const struct ctl_cmd cmds\[\]/ { intable = 1; next }
		intable && /^[ \t]*};/ { exit }
		intable && match($0, /\{[ \t]*"[^"]+"/) {
			s = substr($0, RSTART, RLENGTH)
			sub(/^\{[ \t]*"/, "", s); sub(/"$/, "", s)
			print s
		}' "$CTL_C")
	[ -n "$cmds" ] || notok "command table found in $CTL_C" \
	    "no entries in 'static const struct ctl_cmd cmds[]'"
fi
[ -n "$cmds" ] || cmds="status
reload
stop
log"
# One command per line; a command may be several words ("log verbose").
printf '%s\n' "$cmds" > "$tmp/cmds"
while IFS= read -r c; do
	if has_item docs/agrippactl.8 Cm "$c"; then
		ok "docs/agrippactl.8 documents command '$c'"
	else
		notok "docs/agrippactl.8 documents command '$c'" "no '.It Cm $c' entry"
	fi
done < "$tmp/cmds"

# ---- every agrippa command, option and environment variable is documented --
#
# Commands from the table in client/agrippa.c, as for agrippactl; options
# from its usage string ("usage: agrippa [-j] [-p project] ..."); the
# environment variables it reads (getenv("AGRIPPA_...") in client/).

CLI_C=client/agrippa.c
CLI_1=docs/agrippa.1
if [ -f "$CLI_C" ]; then
	awk '
		/static const struct cli_cmd cmds\[\]/ { intable = 1; next }
		intable && /^[ \t]*};/ { exit }
		intable && match($0, /\{[ \t]*"[^"]+"/) {
			s = substr($0, RSTART, RLENGTH)
			sub(/^\{[ \t]*"/, "", s); sub(/"$/, "", s)
			print s
		}' "$CLI_C" > "$tmp/cli_cmds"
	[ -s "$tmp/cli_cmds" ] || notok "command table found in $CLI_C" \
	    "no entries in 'static const struct cli_cmd cmds[]'"
	while IFS= read -r c; do
		if has_item "$CLI_1" Cm "$c"; then
			ok "$CLI_1 documents command '$c'"
		else
			notok "$CLI_1 documents command '$c'" "no '.It Cm $c' entry"
		fi
	done < "$tmp/cli_cmds"
	flags=$(grep -F '"usage: agrippa [-' "$CLI_C" | head -n 1 | grep -o '\[-[A-Za-z]' | sed 's/^\[-//')
	[ -n "$flags" ] || notok "usage string found in $CLI_C" "no line containing 'usage: agrippa [-'"
	for f in $flags; do
		if has_item "$CLI_1" Fl "$f"; then
			ok "$CLI_1 documents -$f"
		else
			notok "$CLI_1 documents -$f" "no '.It Fl $f' entry"
		fi
	done
	envs=$(cat client/*.c | grep -o 'getenv("[A-Z_]*")' | sed 's/getenv("\(.*\)")/\1/' | sort -u)
	[ -n "$envs" ] || notok "environment variables found in client/" "no getenv(\"...\")"
	for e in $envs; do
		if has_item "$CLI_1" Ev "$e"; then
			ok "$CLI_1 documents environment variable $e"
		else
			notok "$CLI_1 documents environment variable $e" "no '.It Ev $e' entry"
		fi
	done
else
	notok "$CLI_C exists"
fi

# ---- init scripts parse --------------------------------------------------

for s in rc.d/agrippad.openbsd rc.d/agrippad.init; do
	if [ ! -f "$s" ]; then
		notok "$s passes sh -n" "missing"
	elif out=$(sh -n "$s" 2>&1); then
		ok "$s passes sh -n"
	else
		notok "$s passes sh -n" "$out"
	fi
done

# Stubs shared by the checks below.  agrippad records its arguments and, when
# $tmp/broken exists, fails "-n" the way the real one reports a bad file.
mkdir -p "$tmp/bin" "$tmp/default"
LOG=$tmp/calls
cat > "$tmp/bin/agrippad" <<EOF
#!/bin/sh
echo "agrippad \$*" >> "$LOG"
for a in "\$@"; do
	if [ "\$a" = -n ]; then
		if [ -e "$tmp/broken" ]; then
			echo "/etc/agrippad.yaml:3:1: unknown key 'lisen'" >&2
			exit 1
		fi
		echo "configuration OK"
	fi
done
exit 0
EOF
cat > "$tmp/bin/start-stop-daemon" <<EOF
#!/bin/sh
echo "start-stop-daemon \$*" >> "$LOG"
exit 0
EOF
chmod 755 "$tmp/bin/agrippad" "$tmp/bin/start-stop-daemon"

# first_line pattern: line number of the first call in $LOG matching the
# extended regular expression, or nothing.
first_line() {
	grep -En "$1" "$LOG" | grep -v -- '--test' | head -n 1 | cut -d: -f1
}

# check_order description status: the configuration check came before the
# start, and with the same flags.  $start_re matches the start call.
check_order() {
	n=$(first_line '^agrippad -n')
	st=$(first_line "$start_re")
	if [ "$2" -ne 0 ]; then
		notok "$1" "exit status $2" "$(cat "$LOG" 2>/dev/null)"
	elif [ -z "$n" ] || [ -z "$st" ] || [ "$n" -ge "$st" ]; then
		notok "$1" "calls were:" "$(cat "$LOG" 2>/dev/null)"
	elif ! grep -q '^agrippad -n -f /etc/agrippad.yaml$' "$LOG"; then
		notok "$1" "the check did not get the daemon's flags:" "$(cat "$LOG")"
	else
		ok "$1"
	fi
}

# check_refused description status: with a broken file, nothing started.
check_refused() {
	if [ "$2" -eq 0 ]; then
		notok "$1" "exit status 0" "$(cat "$LOG" 2>/dev/null)"
	elif [ -n "$(first_line "$start_re")" ]; then
		notok "$1" "the daemon was started:" "$(cat "$LOG")"
	else
		ok "$1"
	fi
}

# ---- OpenBSD rc.d: rc_pre runs agrippad -n ------------------------------
#
# A minimal rc.subr: rc_cmd start runs rc_pre and starts the daemon only
# when it succeeds, as OpenBSD's does.

if [ -f rc.d/agrippad.openbsd ]; then
	cat > "$tmp/rc.subr" <<'EOF'
daemon_flags="-f /etc/agrippad.yaml"
rc_cmd() {
	case $1 in
	start)
		if command -v rc_pre >/dev/null 2>&1; then
			rc_pre || return 1
		fi
		${daemon} ${daemon_flags}
		;;
	*)
		return 1
		;;
	esac
}
EOF
	sed -e "s|/etc/rc.d/rc.subr|$tmp/rc.subr|" \
	    -e "s|^daemon=.*agrippad\"*$|daemon=\"$tmp/bin/agrippad\"|" \
	    rc.d/agrippad.openbsd > "$tmp/rc.agrippad"
	start_re="^agrippad -f"
	if ! grep -q "^daemon=\"$tmp/bin/agrippad\"" "$tmp/rc.agrippad"; then
		notok "rc.d/agrippad.openbsd runs agrippad -n before starting" \
		    "no daemon=\".../agrippad\" line"
	else
		: > "$LOG"
		sh "$tmp/rc.agrippad" start > "$tmp/out" 2>&1
		check_order "rc.d/agrippad.openbsd runs agrippad -n before starting" $?
		: > "$LOG"
		touch "$tmp/broken"
		sh "$tmp/rc.agrippad" start > "$tmp/out" 2>&1
		check_refused "rc.d/agrippad.openbsd does not start with a broken file" $?
		rm -f "$tmp/broken"
	fi
fi

# ---- SysV init script: start runs agrippad -n ---------------------------

if [ -f rc.d/agrippad.init ]; then
	cat > "$tmp/init-functions" <<'EOF'
log_daemon_msg() { :; }
log_end_msg() { return "$1"; }
log_failure_msg() { echo "$*" >&2; }
log_success_msg() { :; }
status_of_proc() { return 0; }
EOF
	echo 'AGRIPPAD_OPTS="-f /etc/agrippad.yaml"' > "$tmp/default/agrippad"
	sed -e "s|/usr/local/sbin/agrippad|$tmp/bin/agrippad|g" \
	    -e "s|/lib/lsb/init-functions|$tmp/init-functions|g" \
	    -e "s|/etc/default/|$tmp/default/|g" \
	    -e "s|^PATH=|PATH=$tmp/bin:|" \
	    rc.d/agrippad.init > "$tmp/agrippad.init"
	if ! grep -q "^DAEMON=$tmp/bin/agrippad" "$tmp/agrippad.init"; then
		notok "rc.d/agrippad.init runs agrippad -n before starting" \
		    "no DAEMON=/usr/local/sbin/agrippad line"
	else
		start_re="^start-stop-daemon.* --start"
		: > "$LOG"
		sh "$tmp/agrippad.init" start > "$tmp/out" 2>&1
		check_order "rc.d/agrippad.init runs agrippad -n before starting" $?
		: > "$LOG"
		sh "$tmp/agrippad.init" restart > "$tmp/out" 2>&1
		check_order "rc.d/agrippad.init restart runs agrippad -n first" $?
		start_re="^start-stop-daemon.* --signal HUP"
		: > "$LOG"
		sh "$tmp/agrippad.init" reload > "$tmp/out" 2>&1
		check_order "rc.d/agrippad.init reload runs agrippad -n first" $?
		start_re="^start-stop-daemon.* --start"
		: > "$LOG"
		touch "$tmp/broken"
		sh "$tmp/agrippad.init" start > "$tmp/out" 2>&1
		check_refused "rc.d/agrippad.init does not start with a broken file" $?
		: > "$LOG"
		sh "$tmp/agrippad.init" restart > "$tmp/out" 2>&1
		st=$?
		if grep -q -- '--stop' "$LOG"; then
			notok "rc.d/agrippad.init restart keeps the daemon on a broken file" \
			    "the daemon was stopped:" "$(cat "$LOG")"
		else
			check_refused "rc.d/agrippad.init restart keeps the daemon on a broken file" "$st"
		fi
		rm -f "$tmp/broken"
	fi
fi

# ---- systemd unit ---------------------------------------------------------

UNIT=rc.d/agrippad.service
if [ -f "$UNIT" ]; then
	exe=$(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' "$UNIT" | head -n 1)
	case $exe in
	*/agrippad)
		if grep -q "^ExecStartPre=$exe -n\( \|$\)" "$UNIT"; then
			ok "$UNIT runs agrippad -n before starting (ExecStartPre)"
		else
			notok "$UNIT runs agrippad -n before starting (ExecStartPre)" \
			    "no 'ExecStartPre=$exe -n' line"
		fi
		;;
	*)
		notok "$UNIT runs agrippad -n before starting (ExecStartPre)" \
		    "ExecStart= does not run agrippad"
		;;
	esac

	# The daemon is not installed where the tests run, and verify refuses
	# a unit whose programs do not exist, so the copy names the stub.
	# verify only warns (exit 0) about unknown keys and unparsable values,
	# so any message about this unit is a failure too; messages about other
	# units of the host are not this unit's fault.
	if command -v systemd-analyze >/dev/null 2>&1; then
		mkdir -p "$tmp/unit"
		sed "s|$exe|$tmp/bin/agrippad|g" "$UNIT" > "$tmp/unit/agrippad.service"
		if out=$(systemd-analyze verify --man=no \
		    "$tmp/unit/agrippad.service" 2>&1) &&
		    ! printf '%s\n' "$out" | grep -q 'agrippad\.service'; then
			ok "$UNIT passes systemd-analyze verify"
		else
			notok "$UNIT passes systemd-analyze verify" \
			    "$(printf '%s\n' "$out" | sed "s|$tmp/unit/|rc.d/|")"
		fi
	else
		ok "$UNIT passes systemd-analyze verify # SKIP no systemd-analyze"
	fi
else
	notok "$UNIT exists"
fi

# ---- every event type the SQL writes is documented -----------------------
#
# The types passed as literals to append_run_event and finalize_run in
# sql/, and those a runner may append itself (the last definition of
# runner_event_type_ok); approval.approved and approval.rejected are built
# from the decision, so they are named here.

own=$(cat sql/migrations/*.sql | awk '/FUNCTION runner_event_type_ok/ { buf = ""; on = 1 }
	on { buf = buf $0 "\n" } on && /^\$\$;/ { on = 0; last = buf } END { printf "%s", last }' |
	grep -oE "'[a-z_]+(\.[a-z_]+)+'")
types=$( { grep -hE "(append_run_event|finalize_run)\(.*'[a-z_]+(\.[a-z_]+)+'" sql/migrations/*.sql sql/ops/*.sql |
	grep -oE "'[a-z_]+(\.[a-z_]+)+'"; echo "$own"; } | tr -d "'" | sort -u)
missing=""
for t in $types approval.approved approval.rejected; do
	grep -Fqx "### \`$t\`" docs/events.md || missing="$missing $t"
done
if [ -n "$types" ] && [ -z "$missing" ]; then
	ok "docs/events.md documents every event type the SQL writes ($(echo $types | wc -w) found)"
else
	notok "docs/events.md documents every event type the SQL writes" "missing:$missing"
fi

# ---- docs/openapi.yaml is valid OpenAPI 3.1 ---------------------------------
#
# The standard validator (tests/browser/package-lock.json pins it; make deps
# installs it) must accept the file, every $ref must resolve and every schema
# compile strictly (tests/browser/openapi.mjs validate).  That its routes are
# the router's is test_router's check; that its schemas hold what the daemon
# answers, test_openapi's.

SPEC=docs/openapi.yaml
if [ ! -f tests/browser/node_modules/@seriousme/openapi-schema-validator/package.json ] ||
	! command -v node >/dev/null 2>&1; then
	notok "$SPEC passes the OpenAPI validator" \
	    "node or tests/browser's npm packages are not installed (make deps)"
else
	out=$(node tests/browser/openapi.mjs validate "$SPEC" 2>&1)
	st=$?
	printf '%s\n' "$out" | grep '^ok - '
	pass=$((pass + $(printf '%s\n' "$out" | grep -c '^ok - ')))
	if [ "$st" -ne 0 ]; then
		notok "$SPEC passes the OpenAPI validator (exit $st)" \
		    "$(printf '%s\n' "$out" | grep -v '^ok - ')"
	fi
fi

# ---- every error code is in the spec's Error schema ---------------------------
#
# The codes httpd answers (hreq_error, hreq_error_ex, hreq_error_retry,
# httpd_error), the SQL answers (api_err) and the body checks name
# (http_check.c), against the enum of Error.error.code in docs/openapi.yaml,
# both ways.

codes=$( { grep -ohE '(hreq_error(_ex)?|httpd_error)\((h|req), [0-9]+, "[a-z_]+"' httpd/*.c |
	sed -E 's/.*"([a-z_]+)"$/\1/'
	grep -ohE 'hreq_error_retry\(h, [0-9]+, [^,]+, "[a-z_]+"' httpd/*.c | sed -E 's/.*"([a-z_]+)"$/\1/'
	grep -ohE "api_err\([0-9]+, '[a-z_]+'" sql/migrations/*.sql sql/ops/*.sql | sed -E "s/.*'([a-z_]+)'$/\1/"
	grep -ohE "'code', 'resource_[a-z_]+'" sql/migrations/*.sql | sed -E "s/.*'(resource_[a-z_]+)'$/\1/"
	grep -ohE '\[BODY_[A-Z_]+\] = "[a-z_]+"' httpd/http_check.c | sed -E 's/.*"([a-z_]+)"$/\1/'
	grep -ohE '"bad_json"' httpd/http_check.c | tr -d '"'; } | sort -u)
enum=$(awk '/^    Error:/ { on = 1 } on && /code:/ { c = 1 } c && /enum:/ { e = 1 }
	e { print } e && /\]/ { exit }' "$SPEC" | tr -d '[],' | sed 's/enum://' | tr -s ' \n' '\n' |
	sed '/^$/d' | sort -u)
missing=$(printf '%s\n' "$codes" | grep -vxF "$enum" | tr '\n' ' ')
extra=$(printf '%s\n' "$enum" | grep -vxF "$codes" | tr '\n' ' ')
if [ -n "$codes" ] && [ -n "$enum" ] && [ -z "$missing" ] && [ -z "$extra" ]; then
	ok "$SPEC's Error codes are the codes httpd and the SQL answer ($(echo $codes | wc -w))"
else
	notok "$SPEC's Error codes are the codes httpd and the SQL answer" \
	    "answered but not in the enum: ${missing:-none}" "in the enum but never answered: ${extra:-none}"
fi

echo "docs: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
