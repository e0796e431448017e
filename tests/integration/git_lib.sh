# What the tests of the git helper over https share (sourced after lib.sh):
# a throwaway CA, the fake git server (tests/fakes/git_https.py) on
# loopback, and the daemon started where that CA is trusted.
#
# Trust: the git program (libcurl) reads Debian's bundle
# /etc/ssl/certs/ca-certificates.crt; the test CA is made trusted without
# touching the host: each trusting process runs in its own mount namespace
# (unshare -m, private propagation) where the CA file is bind-mounted over
# that bundle.
BUNDLE=/etc/ssl/certs/ca-certificates.crt

# make_ca [SAN]: $T/tls/ca.crt and a server certificate for 127.0.0.1, or
# for the subjectAltName list SAN ($T/tls/srv.crt, srv.key); 0 when they
# were made.
make_ca() {
	san=${1:-DNS:127.0.0.1,IP:127.0.0.1}
	mkdir -p "$T/tls"
	(
		cd "$T/tls" || exit 1
		openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 1 \
			-subj /CN=agrippa-test-ca -addext basicConstraints=critical,CA:TRUE \
			-addext keyUsage=critical,keyCertSign,cRLSign &&
		openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr -subj /CN=127.0.0.1 &&
		printf '%s\n' "subjectAltName=$san" \
			'basicConstraints=CA:FALSE' 'extendedKeyUsage=serverAuth' >ext &&
		openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 \
			-extfile ext -out srv.crt
	) >"$T/tls/log" 2>&1 && [ -s "$T/tls/srv.crt" ]
}

# start_git_server: the fake git server for the repositories under $T/srv
# and the token in $T/srv/token; logs to $T/requests.log, holds pack
# requests while $T/hold exists, pushes while $T/hold-push exists.  Sets
# SRV_PID, PORT_TLS and PORT_PLAIN; 0 when it listens.
start_git_server() {
	python3 "$ROOT/tests/fakes/git_https.py" --root "$T/srv" --cert "$T/tls/srv.crt" \
		--key "$T/tls/srv.key" --token-file "$T/srv/token" --log "$T/requests.log" \
		--ports "$T/ports" --hold "$T/hold" --hold-push "$T/hold-push" >"$T/server.out" 2>&1 &
	SRV_PID=$!
	touch "$T/requests.log"
	wait_for 10 test -s "$T/ports" || return 1
	read -r PORT_TLS PORT_PLAIN <"$T/ports"
}
stop_git_server() { [ -z "${SRV_PID:-}" ] || kill "$SRV_PID" 2>/dev/null; SRV_PID=""; }

# start_trusting_daemon NAME: start_daemon_or_finish, with agrippad in a
# mount namespace that trusts the CA (exec keeps the pid, so SUP_PID and the
# helpers of lib.sh see agrippad).
start_trusting_daemon() {
	cat >"$T/agrippad-ns" <<EOS
#!/bin/sh
exec unshare -m --propagation private sh -c 'mount --bind "\$0" "\$1" && shift && exec "\$@"' \\
	"$T/tls/ca.crt" "$BUNDLE" "$AGRIPPAD" "\$@"
EOS
	chmod 0755 "$T/agrippad-ns"
	real_agrippad=$AGRIPPAD
	AGRIPPAD="$T/agrippad-ns"
	start_daemon_or_finish "$1"
	AGRIPPAD=$real_agrippad
}

# need_progs NAME PROG...: every PROG is installed, or the test NAME fails
# here, saying which is not.
need_progs() {
	np_name=$1
	shift
	for np_prog in "$@"; do
		command -v "$np_prog" >/dev/null 2>&1 && continue
		notok "$np_prog is installed (scripts/deps.sh)"
		finish "$np_name"
		exit 1
	done
}
