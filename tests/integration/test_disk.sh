#!/bin/sh
# A disk of its own per run (sandbox.disk): a run that writes past its limit
# in many files gets ENOSPC in its own workspace, while another run checks
# out, runs and stores its events and an artifact normally and the database
# never sees a full disk; the run's disk is unmounted, its loop device freed
# and its image removed when the run ends; a run taken up after a restart
# (its disk unmounted meanwhile, as after a reboot) finds its workspace as it
# left it.
. tests/integration/lib.sh
need_root disk
if [ ! -e /dev/loop-control ] || [ ! -x /sbin/mkfs.ext4 ]; then
	echo "# skipped: no loop devices or no mkfs.ext4 on this host"
	finish disk
	exit 0
fi
make_env
trap cleanup_env EXIT
cat >>"$CONF" <<EOC
engine: { concurrency: 4, lease: 5, sweep: 1 }
sandbox: { disk: 64M, file_size: 1G }
EOC
start_daemon_or_finish disk

mkdir -p "$T/repos" "$T/tmpl"
chmod 0755 "$T/repos"
BASE=$("$TOOLS/mkrepo" "$T/repos/clean")
chmod -R a+rX "$T/repos"
tmpl() {
	{
		printf 'name: %s\nversion: 1\n' "$1"
		printf 'params:\n  repo: { type: repoRef, required: true }\n'
		printf 'workspace: { repo: "${params.repo}", access: readWrite }\n'
		printf 'phases:\n'
		cat
	} >"$T/tmpl/$1.yaml"
	ctl template load "$T/tmpl/$1.yaml"
}
tmpl fill <<'EOF'
  - name: one
    steps:
      - id: fill
        kind: command
        allow_failure: true
        run: |
          mkdir -p d; i=0
          while dd if=/dev/zero of=d/f$i bs=1M count=4 2>err; do i=$((i+1)); done
          echo "files $i"; cat err
          echo "kept" > keep.txt
          echo "df $(df -k . | tail -1 | awk '{print $2}')"
      - { id: wait, kind: checkpoint, message: "hold", expires_in: 1h }
      - { id: after, kind: command, run: "cat keep.txt; ls d | wc -l" }
# (the files written whole, and the one cut short by ENOSPC)
EOF
tmpl hold <<'EOF'
  - name: one
    steps:
      - { id: df, kind: command, run: "df -k . | tail -1 | awk '{print \"df \" $2}'" }
      - { id: wait, kind: checkpoint, message: "hold", expires_in: 1h }
EOF
tmpl small <<'EOF'
  - name: one
    steps:
      - id: work
        kind: command
        run: "mkdir -p .agrippa/artifacts && cat README.md > .agrippa/artifacts/r.txt && echo fine"
        produces: [ { key: r, kind: text, required: true } ]
EOF
ctl project add p1 && ctl user add alice && ctl member add p1 alice admin
ctl repo add p1 clean "$T/repos/clean" </dev/null
TA=$(new_token alice)
P1=$(psql_q "select id from projects where name = 'p1'")
J='Content-Type: application/json'
submit() {
	RUN=$(curl -s --max-time 10 -H "Authorization: Bearer $TA" -H "$J" \
		--data-binary "{\"template\": \"$1\", \"params\": {\"repo\": \"clean\"}}" \
		"http://127.0.0.1:$PORT/v1/projects/$P1/runs" |
		python3 -c 'import json,sys; print(json.load(sys.stdin).get("id", ""))' 2>/dev/null)
}
run_status() { psql_q "select status from runs where id = '$1'"; }
is_status() { [ "$(run_status "$1")" = "$2" ]; }
out_of() {
	psql_q "select string_agg(payload->>'text', '' order by seq) from run_events
		where run_id = '$1' and type = 'step.output' and payload->>'step_id' = '$2'"
}
free_kb() { df -k --output=avail "$T/state" | tail -1 | tr -d ' '; }

FREE0=$(free_kb)
submit fill
RA=$RUN
wait_for 90 is_status "$RA" waiting_approval
check "a run filling its workspace reaches its checkpoint ($(run_status "$RA"))" \
	is_status "$RA" waiting_approval
out_of "$RA" fill >"$T/fill"
check "... its writes stopped on ENOSPC in its own workspace" grep -q 'No space left on device' "$T/fill"
FILES=$(sed -n 's/^files //p' "$T/fill")
check "... after many files, under the 64M limit ($FILES of 4M)" [ "${FILES:-0}" -ge 8 -a "${FILES:-99}" -le 16 ]
check "... its workspace is a filesystem of 64M" \
	[ "$(sed -n 's/^df //p' "$T/fill")" -le 65536 ] && [ "$(sed -n 's/^df //p' "$T/fill")" -ge 50000 ]
MNT="$T/state/runs/$RA/disk"
check "the run's disk is mounted from a loop device" \
	eval "awk -v m='$MNT' '\$2 == m && \$1 ~ /^\\/dev\\/loop/' /proc/mounts | grep -q ."
LOOP=$(awk -v m="$MNT" '$2 == m { print $1 }' /proc/mounts)
USED=$(( (FREE0 - $(free_kb)) ))
check "the host's state directory lost no more than the disk's size ($USED kB)" [ "$USED" -lt 80000 ]

# meanwhile another run works normally
submit small
RB=$RUN
wait_for 90 is_status "$RB" succeeded
check "meanwhile another run checks out, runs and succeeds ($(run_status "$RB"))" is_status "$RB" succeeded
check "... its output and events are stored" [ "$(out_of "$RB" work)" = fine ]
check "... its artifact is stored" \
	[ "$(psql_q "select count(*) from artifacts where run_id = '$RB' and key = 'r'")" = 1 ]
check "... it had a disk of its own, gone now with its run" \
	[ -z "$(awk -v m="$T/state/runs/$RB/disk" '$2 == m' /proc/mounts)" -a ! -e "$T/state/runs/$RB" ]
check "the database saw no full disk" \
	[ "$(grep -c 'No space left on device' "$T/state/postgres.log" 2>/dev/null || echo 0)" = 0 ]

# a restart with the disk unmounted (as after a reboot): the run goes on in
# its workspace as it was
stop_daemon
umount "$MNT"
check "(the disk is unmounted while the daemon is down)" [ -z "$(awk -v m="$MNT" '$2 == m' /proc/mounts)" ]
start_daemon_or_finish disk
APPROVAL=$(psql_q "select id from approvals where run_id = '$RA'")
curl -s -o /dev/null --max-time 10 -H "Authorization: Bearer $TA" -H "$J" \
	--data-binary '{"decision": "approved"}' "http://127.0.0.1:$PORT/v1/approvals/$APPROVAL/decide"
wait_for 90 is_status "$RA" succeeded
check "after the restart the run goes on and succeeds ($(run_status "$RA"))" is_status "$RA" succeeded
check "... in its workspace as it left it ($(out_of "$RA" after | tr '\n' ' '))" \
	[ "$(out_of "$RA" after | head -1)" = kept -a "$(out_of "$RA" after | sed -n 2p)" = "$((FILES + 1))" ]
gone() { [ ! -e "$T/state/runs/$RA" ] && [ -z "$(awk -v m="$MNT" '$2 == m' /proc/mounts)" ]; }
wait_for 60 gone
check "when it ends its disk is unmounted and its directory, image included, removed" gone
check "... and no loop device still holds its image" \
	eval "! losetup -a 2>/dev/null | grep -q '$T/state/runs/$RA'"
check "the host's space is given back" [ "$(( FREE0 - $(free_kb) ))" -lt 20000 ]

# The spare: one image made ahead (at start, and after each run takes
# one), which the next run's disk is.
SPARE="$T/state/runs/spare-disk.0.img"
approve() {
	curl -s -o /dev/null --max-time 10 -H "Authorization: Bearer $TA" -H "$J" \
		--data-binary '{"decision": "approved"}' \
		"http://127.0.0.1:$PORT/v1/approvals/$(psql_q "select id from approvals where run_id = '$1'")/decide"
}
spare_ready() { [ -f "$SPARE" ] && [ "$(stat -c %s "$SPARE")" = "$1" ]; }
df_of() { out_of "$1" df | sed -n 's/^df //p'; }
wait_for 10 spare_ready $((64 << 20))
check "a spare image is made ahead: sandbox.disk bytes, root's, mode 0600, sparse" \
	spare_ready $((64 << 20)) && [ "$(stat -c '%U %a' "$SPARE")" = "root 600" ] &&
	[ "$(du -k "$SPARE" | cut -f1)" -lt 16384 ]
SINO=$(stat -c %i "$SPARE" 2>/dev/null)
submit hold
RC2=$RUN
wait_for 90 is_status "$RC2" waiting_approval
check "the next run's disk is that image (inode $SINO), a filesystem of 64M ($(df_of "$RC2") kB)" \
	[ "$(stat -c %i "$T/state/runs/$RC2/disk.img" 2>/dev/null)" = "$SINO" ] &&
	[ "$(df_of "$RC2")" -le 65536 ] && [ "$(df_of "$RC2")" -ge 50000 ]
wait_for 10 spare_ready $((64 << 20))
check "... and another spare is made for the run after" \
	spare_ready $((64 << 20)) && [ "$(stat -c %i "$SPARE")" != "$SINO" ]
approve "$RC2"
wait_for 60 is_status "$RC2" succeeded
check "... that run ends ($(run_status "$RC2"))" is_status "$RC2" succeeded
# a reload that changes sandbox.disk: the spare of the old size is not used
sed -i 's/disk: 64M/disk: 32M/' "$CONF"
kill -HUP "$SUP_PID"
sleep 1
submit hold
RC3=$RUN
wait_for 90 is_status "$RC3" waiting_approval
check "after a reload to 32M, the next run's disk is of 32M, not the 64M spare ($(df_of "$RC3") kB)" \
	[ "$(df_of "$RC3")" -le 32768 ] && [ "$(df_of "$RC3")" -ge 20000 ]
wait_for 10 spare_ready $((32 << 20))
check "... and the spare made next is of 32M" spare_ready $((32 << 20))
approve "$RC3"
wait_for 60 is_status "$RC3" succeeded
check "... that run ends ($(run_status "$RC3"))" is_status "$RC3" succeeded
stop_daemon
check "a daemon that stops removes its spare images" \
	[ -z "$(ls "$T/state/runs" | grep '^spare-disk')" ]
start_daemon_or_finish disk

check "daemon healthy" [ "$(healthz_code)" = 200 ]
check "no sanitizer report" [ "$(grep -c 'runtime error\|AddressSanitizer\|LeakSanitizer' "$LOG")" = 0 ]
finish disk
