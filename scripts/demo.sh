#!/bin/sh
# make demo: install what is missing, build, start agrippad in the foreground
# on the embedded database in a local state directory, show it working, and
# stop cleanly on Ctrl-C (or after $DEMO_SECONDS seconds when set).
set -eu
ROOT=$(pwd)
if [ "$(id -u)" -eq 0 ]; then
	sh scripts/deps.sh
	sh scripts/mkusers.sh
else
	echo "demo: not root: development mode (no chroot, no user switch)"
fi
make -s all

DEMO="$ROOT/demo"
# The embedded PostgreSQL runs as _agrippadb and must reach its directory.
if [ "$(id -u)" -eq 0 ] && ! setpriv --reuid=_agrippadb --regid=_agrippadb --clear-groups \
    test -x "$ROOT" 2>/dev/null; then
	DEMO=/var/tmp/agrippa-demo
	echo "demo: $ROOT is not reachable by _agrippadb; using $DEMO"
fi
mkdir -p "$DEMO/empty"
chmod 0755 "$DEMO" "$DEMO/empty"
PORT=${DEMO_PORT:-8480}
CONF="$DEMO/agrippad.yaml"
cat >"$CONF" <<EOC
# Written by scripts/demo.sh
state_dir: $DEMO/state
user: _agrippa
listen: [ "127.0.0.1:$PORT" ]
control_socket: $DEMO/agrippad.sock
database: embedded
master_key: $DEMO/keys/master.key
pidfile: $DEMO/agrippad.pid
chroot: $DEMO/empty
EOC
./build/agrippad -n -f "$CONF"
./build/agrippad -d -f "$CONF" &
PID=$!
stop() {
	trap - INT TERM
	echo
	echo "demo: stopping agrippad"
	kill -TERM "$PID" 2>/dev/null || true
	wait "$PID" || true
	echo "demo: stopped cleanly"
	exit 0
}
trap stop INT TERM
i=0
until curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1; do
	i=$((i + 1))
	if [ $i -gt 600 ] || ! kill -0 "$PID" 2>/dev/null; then
		echo "demo: agrippad did not come up" >&2
		kill -TERM "$PID" 2>/dev/null || true
		exit 1
	fi
	sleep 0.1
done
echo
echo "demo: \$ curl http://127.0.0.1:$PORT/healthz"
curl -s "http://127.0.0.1:$PORT/healthz"
echo "demo: \$ agrippactl -s $DEMO/agrippad.sock status"
./build/agrippactl -s "$DEMO/agrippad.sock" status
echo
echo "demo: what an agent's command sees: a sandbox with its own user, no network, a fresh root"
echo "demo: \$ agrippactl sandbox run -- sh -c 'id; ls /; ...'"
./build/agrippactl -s "$DEMO/agrippad.sock" sandbox run -- sh -c \
	'id; echo "root: $(ls / | tr "\n" " ")"; echo "network: $(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " ")";
	 echo "processes: $(ls /proc | grep -c "^[0-9]")"; touch /etc/x 2>&1 | sed "s/^/refused: /"' || true
echo
echo "demo: the API: an operator sets up a user, a project and a repository, then the user"
echo "demo: submits a run of templates/run-tests.yaml, approves it and reads its events"
CTLS="./build/agrippactl -s $DEMO/agrippad.sock"
# The state directory outlives a demo: what exists already is kept.
$CTLS user add demo "Demo User" >/dev/null 2>&1 || true
$CTLS project add demo >/dev/null 2>&1 || true
$CTLS member add demo demo admin >/dev/null 2>&1 || true
$CTLS repo add demo self "$ROOT" </dev/null >/dev/null 2>&1 || true
$CTLS template list 2>/dev/null | grep -q '^run-tests ' || $CTLS template load templates/run-tests.yaml
TOKEN=$($CTLS token create demo 1 | tail -n 1)
API="http://127.0.0.1:$PORT"
AUTH="Authorization: Bearer $TOKEN"
PROJ=$(curl -s -H "$AUTH" "$API/v1/me" | sed -n 's/.*"projects":\[{"id":"\([0-9a-f-]*\)".*/\1/p')
BODY='{"template":"run-tests","params":{"repo":"self","test_command":"ls && grep -c . README.md"}}'
echo "demo: \$ curl -H 'Authorization: Bearer agr_...' -d '$BODY' $API/v1/projects/$PROJ/runs"
RUN_JSON=$(curl -s -H "$AUTH" -H 'Content-Type: application/json' -d "$BODY" "$API/v1/projects/$PROJ/runs")
echo "$RUN_JSON" | head -c 300
echo " ..."
RUN=$(echo "$RUN_JSON" | sed -n 's/^{"id":"\([0-9a-f-]*\)".*/\1/p')
# run_status: the run's status from the API
run_status() { curl -s -H "$AUTH" "$API/v1/runs/$RUN" | sed -n 's/.*"status":"\([a-z_]*\)".*/\1/p'; }
# wait_status STATUS...: up to 60 s for the run to reach one of them
wait_status() {
	i=0
	while [ $i -lt 600 ]; do
		st=$(run_status)
		for want in "$@"; do [ "$st" = "$want" ] && return 0; done
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}
if [ -n "$RUN" ]; then
	echo "demo: the engine claims it, the git helper clones the repository, the runner runs"
	echo "demo: the test command in the run's sandbox, makes the patch and waits for an approval"
	if wait_status waiting_approval succeeded failed; then
		APPROVAL=$(curl -s -H "$AUTH" "$API/v1/runs/$RUN/approvals" |
			sed -n 's/.*"id":"\([0-9a-f-]*\)".*"status":"pending".*/\1/p')
		if [ -n "$APPROVAL" ]; then
			echo "demo: \$ curl -d '{\"decision\":\"approved\"}' $API/v1/approvals/$APPROVAL/decide"
			curl -s -o /dev/null -H "$AUTH" -H 'Content-Type: application/json' \
				-d '{"decision":"approved"}' "$API/v1/approvals/$APPROVAL/decide"
			wait_status succeeded failed cancelled || true
		fi
	fi
	echo "demo: the run is $(run_status); its events:"
	echo "demo: \$ curl -N $API/v1/runs/$RUN/events/stream"
	curl -s -N --max-time 5 -H "$AUTH" "$API/v1/runs/$RUN/events/stream" | grep '^event:\|^data:' |
		cut -c1-160 || true
	echo "demo: \$ curl $API/v1/runs/$RUN/artifacts"
	curl -s -H "$AUTH" "$API/v1/runs/$RUN/artifacts" | head -c 400
	echo
fi
$CTLS token revoke "$(printf '%s' "$TOKEN" | cut -c1-12)" >/dev/null 2>&1 || true
echo
echo "demo: agrippad is running (state in $DEMO/state). Press Ctrl-C to stop."
if [ -n "${DEMO_SECONDS:-}" ]; then
	sleep "$DEMO_SECONDS"
	stop
fi
wait "$PID" || true
