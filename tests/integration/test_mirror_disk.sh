#!/bin/sh
# A full disk during a mirror's fetch, for real: STATE/mirrors is a small
# tmpfs (mounted by this test in a mount namespace of its own, before the
# daemon starts), and upstream gets a commit larger than the space left.
#  - the run fails with git's reason, "No space left on device";
#  - the mirror's refs and packs are byte for byte as they were, no
#    temporary object or pack is left, the space is given back, nothing is
#    marked, moved aside or cloned again, and repo list still shows the
#    last successful fetch;
#  - with room again (the tmpfs remounted larger) the next run succeeds at
#    the new commit, and repo list shows that fetch.
. tests/integration/lib.sh
need_root mirror_disk
for prog in git python3 unshare curl findmnt; do
	if ! command -v "$prog" >/dev/null 2>&1; then
		notok "$prog is installed (scripts/deps.sh)"
		finish mirror_disk
		exit 1
	fi
done
# The whole test in a mount namespace of its own: its tmpfs is no one
# else's, and goes with it whatever happens.
if [ -z "${AGRIPPA_MIRROR_DISK_NS:-}" ]; then
	AGRIPPA_MIRROR_DISK_NS=1 exec unshare -m --propagation private sh "$0" "$@"
fi
. tests/integration/ctl_lib.sh
make_env
MIRRORS="$T/state/mirrors"
trap 'umount "$MIRRORS" 2>/dev/null; cleanup_env' EXIT
mkdir -p "$MIRRORS"
mount -t tmpfs -o size=2m,mode=0700 agrippa-mirrors "$MIRRORS"
check "STATE/mirrors is a tmpfs of 2 MiB" [ "$(findmnt -n -o FSTYPE,SIZE "$MIRRORS" | tr -s ' ')" = "tmpfs 2M" ]
start_daemon_or_finish mirror_disk

G="git -c user.name=t -c user.email=t@example.com"
mkdir -p "$T/up" "$T/tmpl"
(
	cd "$T/up" && git init -q -b main src && cd src &&
	echo hello >README.md && $G add README.md && $G commit -q -m one &&
	echo world >>README.md && $G commit -q -am two
) >"$T/up.log" 2>&1
UP="$T/up/src"
HEAD0=$(git -C "$UP" rev-parse HEAD)
chmod -R a+rX "$T/up"

cat >"$T/tmpl/quick.yaml" <<'EOF'
name: quick
version: 1
params:
  repo: { type: repoRef, required: true }
workspace: { repo: "${params.repo}", access: readWrite }
phases:
  - name: one
    steps:
      - { id: base, kind: command, run: "git rev-parse HEAD" }
EOF
ctl template load "$T/tmpl/quick.yaml"
ctl project add p1 && ctl user add alice && ctl member add p1 alice admin
ctl repo add p1 local "$UP" </dev/null
TA=$(new_token alice)
P1=$(psql_q "select id from projects where name = 'p1'")
ID=$(psql_q "select id from repo_connections where name = 'local'")
M="$MIRRORS/$ID"
check "set-up: a project, a user, a connection" [ -n "$TA" -a -n "$ID" ]

J='Content-Type: application/json'
submit() {
	RUN=$(curl -s --max-time 10 -H "Authorization: Bearer $TA" -H "$J" \
		--data-binary "{\"template\": \"quick\", \"params\": {\"repo\": \"local\"}}" \
		"http://127.0.0.1:$PORT/v1/projects/$P1/runs" |
		python3 -c 'import json,sys; print(json.load(sys.stdin).get("id", ""))' 2>/dev/null)
}
run_status() { psql_q "select status from runs where id = '$1'"; }
run_error() { psql_q "select coalesce(error, '') from runs where id = '$1'"; }
ended() { case "$(run_status "$1")" in succeeded|failed|cancelled) return 0 ;; esac; return 1; }
ready_of() {
	psql_q "select (payload->>'base_commit') || ' ' || (payload->>'ref') from run_events
		where run_id = '$1' and type = 'workspace.ready'"
}
# the mirror's refs and packs, each with its digest
refs_packs() { (cd "$M" && find HEAD config packed-refs refs objects/pack -type f 2>/dev/null | sort | xargs sha256sum); }
free_kib() { df -k --output=avail "$MIRRORS" | tail -1 | tr -d ' '; }
listed() { "$AGRIPPACTL" -s "$CTL" repo list p1 | grep '^local '; }

# --- a first run: the mirror on the small file system ------------------------
submit
R1=$RUN
wait_for 60 ended "$R1"
check "a first run succeeds, its mirror on the tmpfs ($(run_error "$R1"))" \
	[ "$(run_status "$R1")" = succeeded -a "$(ready_of "$R1")" = "$HEAD0 main" ]
check "... the mirror is there" [ "$(git --git-dir="$M" rev-parse HEAD 2>/dev/null)" = "$HEAD0" ]
refs_packs >"$T/before"
FREE0=$(free_kib)
LIST0=$(listed)
check "repo list shows the mirror's size and fetch ($LIST0)" \
	sh -c "printf '%s\n' \"\$0\" | grep -q '  [0-9.]* KiB  *20[0-9-]*T[0-9:]*Z$'" "$LIST0"

# --- an upstream commit larger than the space left -------------------------------
head -c 4194304 /dev/urandom >"$UP/big"
(cd "$UP" && $G add big && $G commit -q -m "four MiB of noise") >/dev/null
HEAD1=$(git -C "$UP" rev-parse HEAD)
chmod -R a+rX "$T/up"
check "the upstream commit (4096 KiB) is larger than the space left ($FREE0 KiB)" [ "$FREE0" -lt 4096 ]
sleep 1 # a later fetch has a later time
submit
R2=$RUN
wait_for 60 ended "$R2"
check "the run fails ($(run_status "$R2"))" [ "$(run_status "$R2")" = failed ]
check "... with git's reason: no space left on device ($(run_error "$R2"))" \
	[ "$(run_error "$R2")" = "checkout failed: fetch: unable to write loose object file: No space left on device" ]
refs_packs >"$T/after"
check "the mirror's refs and packs are byte for byte as they were" cmp -s "$T/before" "$T/after"
check "... it is still at the old commit" [ "$(git --git-dir="$M" rev-parse HEAD)" = "$HEAD0" ]
check "... no temporary object or pack is left ($(find "$M" -name 'tmp_*' | tr '\n' ' '))" \
	[ -z "$(find "$M" -name 'tmp_*')" ]
check "... nor a lock, a fetch mark or a damage mark" \
	[ -z "$(find "$M" -name '*.lock' -o -name agrippa-fetching -o -name agrippa-damaged)" ]
check "... nothing was moved aside or cloned again ($(ls "$MIRRORS" | tr '\n' ' '))" \
	[ "$(ls "$MIRRORS" | tr '\n' ' ')" = "$ID $ID.lock " ]
check "... the space is given back ($(free_kib) KiB free, $FREE0 before)" [ "$(($(free_kib) + 64))" -ge "$FREE0" ]
check "... the mirror is whole (git fsck)" git --git-dir="$M" fsck --no-progress --connectivity-only --no-dangling
check "repo list still shows the last successful fetch ($(listed))" [ "$(listed)" = "$LIST0" ]
check "the daemon logged the fetch's failure" grep -q "mirror $ID: fetch: unable to write loose object file: No space left on device" "$LOG"

# --- room again --------------------------------------------------------------------
mount -o remount,size=32m "$MIRRORS"
check "the tmpfs is remounted at 32 MiB" [ "$(findmnt -n -o SIZE "$MIRRORS" | tr -d " ")" = 32M ]
submit
R3=$RUN
wait_for 60 ended "$R3"
check "with room again the next run succeeds at the new commit ($(run_error "$R3"))" \
	[ "$(run_status "$R3")" = succeeded -a "$(ready_of "$R3")" = "$HEAD1 main" ]
check "... the mirror holds it" [ "$(git --git-dir="$M" rev-parse HEAD)" = "$HEAD1" ]
LIST1=$(listed)
check "repo list shows the new fetch: a size in MiB and a later time ($LIST1)" \
	sh -c "printf '%s\n' \"\$0\" | grep -q '  4\.[0-9] MiB  *20[0-9-]*T[0-9:]*Z$' && [ \"\$(printf '%s' \"\$0\" | awk '{print \$NF}')\" \\> \"\$(printf '%s' \"\$1\" | awk '{print \$NF}')\" ]" \
	"$LIST1" "$LIST0"

check "daemon healthy" [ "$(healthz_code)" = 200 ]
check "no sanitizer report" [ "$(grep -c 'runtime error\|AddressSanitizer\|LeakSanitizer' "$LOG")" = 0 ]
stop_daemon
finish mirror_disk
