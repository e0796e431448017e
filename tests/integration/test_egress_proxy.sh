#!/bin/sh
# The egress proxy end to end: a real run's command steps, in a real
# sandbox, reach an allowed test host only through egress, and everything
# else is refused with its reason and nothing reaching the target.
#
# The whole test runs in a network and mount namespace of its own (it
# re-executes itself under unshare): the daemon, its database, the test
# host (a dummy interface on 10.77.0.0/24, opened with allow_cidrs) and the
# test's own clients; test names resolve through a hosts file bound over
# /etc/hosts in that mount namespace.  No traffic leaves it.
if [ -z "$AGRIPPA_EGRESS_NS" ]; then
	[ "$(id -u)" = 0 ] || { echo "1..0 # SKIP egress_proxy: needs root"; exit 0; }
	AGRIPPA_EGRESS_NS=1 exec unshare -n -m --propagation private sh "$0" "$@"
fi
. tests/integration/lib.sh
need_root egress_proxy
ip link set lo up
# the test host's private range: on a dummy interface, or where the kernel
# has no dummy driver on this namespace's own loopback (still private to it)
if ip link add dummy0 type dummy 2>/dev/null; then
	ip addr add 10.77.0.1/24 dev dummy0 && ip link set dummy0 up
else
	ip addr add 10.77.0.1/24 dev lo
fi
make_env
trap 'kill $SRV 2>/dev/null; cleanup_env' EXIT
cat >"$T/hosts" <<EOH
127.0.0.1 localhost
10.77.0.1 allowed.test evil-allowed.test
127.0.0.1 loop.test
169.254.169.254 meta.test
EOH
chmod 0644 "$T/hosts"
mount --bind "$T/hosts" /etc/hosts
cat >>"$CONF" <<EOC
engine: { concurrency: 4, lease: 5, sweep: 1 }
egress: { allow_cidrs: [ 10.77.0.0/24 ], tunnels_per_run: 8 }
EOC

# the test host: plain HTTP on 10.77.0.1:8080, logging every request line
mkdir -p "$T/www" && echo "hello from allowed.test" >"$T/www/hello"
(cd "$T/www" && exec python3 -m http.server --bind 10.77.0.1 8080) >"$T/www.log" 2>&1 &
SRV=$!
wait_for 10 sh -c "curl -s --noproxy '*' http://10.77.0.1:8080/hello | grep -q hello"
check "the test host answers inside the test's namespace" [ $? -eq 0 ]

start_daemon_or_finish egress_proxy
check "egress is running" [ -n "$(child_pid egress)" ]
check "egress is chrooted" [ "$(readlink "/proc/$(child_pid egress)/root")" = "$T/empty" ]

MKREPO="$TOOLS/mkrepo"
mkdir -p "$T/repos" "$T/tmpl" && chmod 0755 "$T/repos"
"$MKREPO" "$T/repos/clean" >/dev/null && chmod -R a+rX "$T/repos"
tmpl() {
	{
		printf 'name: %s\nversion: 1\n' "$1"
		printf 'params:\n  repo: { type: repoRef, required: true }\n'
		printf 'workspace: { repo: "${params.repo}", access: readWrite }\n'
		cat
	} >"$T/tmpl/$1.yaml"
	ctl template load "$T/tmpl/$1.yaml"
}
tmpl net <<'EOF'
network: { allow: [ "allowed.test:8080", "loop.test:8080", "meta.test:8080" ] }
phases:
  - name: one
    steps:
      - { id: get, kind: command, run: "curl -sS --max-time 10 http://allowed.test:8080/hello" }
      - { id: env, kind: command, run: "env | grep -i _proxy | sort; echo $JAVA_TOOL_OPTIONS" }
      - { id: notlisted, kind: command, allow_failure: true, run: "curl -sS --max-time 10 http://other.test:8080/x; curl -sS --max-time 10 http://allowed.test:9090/x" }
      - { id: loop, kind: command, allow_failure: true, run: "curl -sS --max-time 10 http://loop.test:8080/x; curl -sS --max-time 10 http://meta.test:8080/x" }
      - { id: direct, kind: command, allow_failure: true, run: "curl -sS --noproxy '*' --max-time 5 http://10.77.0.1:8080/hello; echo rc=$?" }
      - { id: override, kind: command, network: { allow: [] }, allow_failure: true, run: "curl -sS --max-time 10 http://allowed.test:8080/hello; echo rc=$?" }
      - { id: py, kind: command, run: "python3 -c 'import urllib.request; print(urllib.request.urlopen(\"http://allowed.test:8080/hello\").read().decode())'" }
EOF
tmpl nonet <<'EOF'
phases:
  - name: one
    steps:
      - { id: look, kind: command, run: "cat /proc/net/tcp; env | grep -ci proxy; true" }
EOF
ctl project add p1 && ctl user add alice && ctl member add p1 alice admin
ctl repo add p1 clean "$T/repos/clean" </dev/null
TA=$(new_token alice)
P1=$(psql_q "select id from projects where name = 'p1'")
J='Content-Type: application/json'
submit() {
	RUN=$(curl -s --max-time 10 -H "Authorization: Bearer $TA" -H "$J" \
		--data-binary "{\"template\": \"$1\", \"params\": {\"repo\": \"clean\"}}" \
		"http://127.0.0.1:$PORT/v1/projects/$P1/runs" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
}
run_status() { psql_q "select status from runs where id = '$1'"; }
is_done() { case "$(run_status "$1")" in succeeded|failed|cancelled) return 0;; esac; return 1; }
# out RUN STEP: the step's output
out() { psql_q "select string_agg(payload->>'text', '' order by seq) from run_events where run_id = '$1' and type = 'step.output' and payload->>'step_id' = '$2'"; }
net() { psql_q "select type || ' ' || (payload->>'host') || ':' || (payload->>'port') || ' ' || coalesce(payload->>'reason', payload->>'address') from run_events where run_id = '$1' and type like 'network.%' order by seq"; }

submit net
R=$RUN
wait_for 90 is_done "$R"
check "the networked run succeeds ($(run_status "$R"))" [ "$(run_status "$R")" = succeeded ]
net "$R" >"$T/net"
cat "$T/net" | sed 's/^/# /'
check "curl got the test host's page" sh -c "printf '%s' \"\$1\" | grep -q 'hello from allowed.test'" _ "$(out "$R" get)"
check "python urllib got the page through the proxy" sh -c "printf '%s' \"\$1\" | grep -q 'hello from allowed.test'" _ "$(out "$R" py)"
check "the proxy variables are set" sh -c "printf '%s' \"\$1\" | grep -q 'HTTPS_PROXY=http://127.0.0.1:3128' && printf '%s' \"\$1\" | grep -q 'NODE_USE_ENV_PROXY=1' && printf '%s' \"\$1\" | grep -q 'no_proxy=localhost,127.0.0.1,::1' && printf '%s' \"\$1\" | grep -q 'https.proxyPort=3128'" _ "$(out "$R" env)"
check "network.allowed names the host and the address" grep -q '^network.allowed allowed.test:8080 10.77.0.1:8080$' "$T/net"
check "network.closed is recorded" grep -q '^network.closed allowed.test:8080 10.77.0.1:8080$' "$T/net"
check "a name not on the list: denied, not on the list" grep -q '^network.denied other.test:8080 not on the list$' "$T/net"
check "an allowed name on another port: denied" grep -q '^network.denied allowed.test:9090 not on the list$' "$T/net"
check "an allowed name resolving to 127.0.0.1: denied as loopback" grep -q '^network.denied loop.test:8080 resolves to 127.0.0.1:8080: loopback' "$T/net"
check "an allowed name resolving to 169.254.169.254: denied" grep -q '^network.denied meta.test:8080 resolves to 169.254.169.254:8080' "$T/net"
check "a direct connection fails (no route)" sh -c "printf '%s' \"\$1\" | grep -q 'rc=7'" _ "$(out "$R" direct)"
check "a step's empty network replaces the template's: denied" sh -c "printf '%s' \"\$1\" | grep -q 'egress: not on the list'" _ "$(out "$R" override)"
# the test's own readiness probe, curl's and urllib's requests
check "the test host saw the allowed requests" [ "$(grep -c 'GET /hello' "$T/www.log")" = 3 ]
check "the test host saw none of the denied ones" sh -c "! grep -q 'GET /x' '$T/www.log'"

submit nonet
R2=$RUN
wait_for 60 is_done "$R2"
check "the run without network succeeds" [ "$(run_status "$R2")" = succeeded ]
check "without network: no listener in its sandbox, no proxy variable" \
	sh -c "printf '%s' \"\$1\" | grep -vq ':0C38 ' && printf '%s' \"\$1\" | tail -1 | grep -qx 0" _ "$(out "$R2" look)"
check "without network: no network event" [ "$(psql_q "select count(*) from run_events where run_id = '$R2' and type like 'network.%'")" = 0 ]
st=$("$AGRIPPACTL" -s "$CTL" status)
check "agrippactl status lists egress running" sh -c "echo '$st' | grep -q '^egress .* running'"
check "agrippactl status shows the egress line" sh -c "echo '$st' | grep -q '^egress: [0-9]* runs with a network, [0-9]* tunnels open'"

stop_daemon
check "the daemon stops cleanly" [ "$DAEMON_STATUS" -eq 0 ]
finish egress_proxy
