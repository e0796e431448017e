#!/bin/sh
# Artifact downloads (GET /v1/artifacts/{id}) against the real daemon: inline
# bytes from the database and files of the content-addressed store, which
# httpd cannot open itself: the supervisor checks in the database that the
# user may read the artifact, opens the file beneath STATE/artifacts without
# following links, checks its size and passes the descriptor.  Attacks on
# the store (a symlink, a directory, a file of the wrong size, a symlinked
# store) are refused without serving a byte; a non-member gets 404; a digest
# that does not match inline bytes is a 500, not the bytes.
. tests/integration/lib.sh
. tests/integration/ctl_lib.sh
need_root artifact_store
make_env
# runs stay as the API leaves them: this host executes none
# and none changes under the checks: no sweep (expiring approvals, ending
# cancelled runs) runs during the test
echo "engine: { concurrency: 0, sweep: 3600 }" >>"$CONF"
trap cleanup_env EXIT

start_daemon_or_finish artifact_store

# get TOKEN PATH [curl args]: CODE, the body in $T/body, headers in $T/hdrs
get() {
	tok=$1 p=$2
	rm -f "$T/body"
	shift 2
	CODE=$(curl -s -o "$T/body" -D "$T/hdrs" -w '%{http_code}' --max-time 10 \
		-H "Authorization: Bearer $tok" "$@" "http://127.0.0.1:$PORT$p")
}
sha() { sha256sum "$1" | cut -c1-64; }
# all CMD1 -- CMD2 ...: every command (separated by --) succeeds
all() {
	cmd=""
	for a in "$@"; do
		if [ "$a" = -- ]; then
			eval "$cmd" || return 1
			cmd=""
		else
			cmd="$cmd '$(printf '%s' "$a" | sed "s/'/'\\\\''/g")'"
		fi
	done
	eval "$cmd"
}

ctl user add alice && ctl user add nora && TA=$(new_token alice) && TN=$(new_token nora) &&
	ctl project add p1 && ctl project add p2 && ctl member add p1 alice admin &&
	ctl member add p2 nora admin && ctl template load templates/run-tests.yaml &&
	ctl repo add p1 myrepo /tmp/x </dev/null
check "set-up" [ $? -eq 0 ]
P1=$(psql_q "select id from projects where name = 'p1'")
RUN=$(curl -s -H "Authorization: Bearer $TA" -H 'Content-Type: application/json' \
	-d '{"template":"run-tests","params":{"repo":"myrepo"}}' \
	"http://127.0.0.1:$PORT/v1/projects/$P1/runs" |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
check "a run to hang artifacts on" [ -n "$RUN" ]
psql_q "insert into run_steps (run_id, phase_name, step_id, attempt) values ('$RUN','fix','s1',1)" >/dev/null

# stored ART KEY SIZEFILE: an artifact row for file $1 in the store (the row's
# size is that of $3, the same file unless a test lies); prints its id.
stored() {
	h=$(sha "$1")
	d=$(printf '%s' "$h" | cut -c1-2)
	psql_q "insert into artifacts (run_id, step_id, attempt, key, kind, size, sha256, store_path)
	        values ('$RUN', 's1', 1, '$2', 'patch', $(wc -c <"$3"), decode('$h', 'hex'), '$d/$h')
	        returning id" | head -1
}
store_file() { # store_file FILE: copy FILE into the store under its digest
	h=$(sha "$1")
	d=$(printf '%s' "$h" | cut -c1-2)
	mkdir -p "$T/state/artifacts/$d"
	cp "$1" "$T/state/artifacts/$d/$h"
}

# --- a stored file of 3 MB ----------------------------------------------------------
head -c 3000000 /dev/urandom >"$T/big.bin"
store_file "$T/big.bin"
A1=$(stored "$T/big.bin" big "$T/big.bin")
get "$TA" "/v1/artifacts/$A1"
check "stored artifact: 200" [ "$CODE" = 200 ]
check "... exactly its bytes" [ "$(sha "$T/body")" = "$(sha "$T/big.bin")" ]
check "... ETag is the quoted sha256" [ "$(header ETag)" = "\"$(sha "$T/big.bin")\"" ]
check "... as an attachment named after key and kind" \
	[ "$(header Content-Disposition)" = 'attachment; filename="big.patch"' ]
check "... Content-Length" [ "$(header Content-Length)" = 3000000 ]
check "... nosniff" [ "$(header X-Content-Type-Options)" = nosniff ]
get "$TA" "/v1/artifacts/$A1" -H "If-None-Match: \"$(sha "$T/big.bin")\""
check "If-None-Match with its ETag: 304, no body" [ "$CODE" = 304 -a ! -s "$T/body" ]
get "$TA" "/v1/artifacts/$A1" -H 'If-None-Match: "0000"'
check "another ETag: 200 with the bytes" [ "$CODE" = 200 -a "$(sha "$T/body")" = "$(sha "$T/big.bin")" ]
get "$TN" "/v1/artifacts/$A1"
check "a non-member: 404" all [ "$CODE" = 404 ] -- grep -q '"not_found"' "$T/body"
get "$TA" "/v1/artifacts/00000000-0000-4000-8000-000000000000"
check "an unknown artifact: 404" [ "$CODE" = 404 ]

# --- attacks on the store -------------------------------------------------------------
secret_check() { # the reply is an error envelope and none of the target's bytes
	grep -q '"internal"' "$T/body" && ! grep -q root "$T/body"
}
printf 'x' >"$T/s.bin"
h=$(sha "$T/s.bin")
A2=$(stored "$T/s.bin" link "$T/s.bin")
mkdir -p "$T/state/artifacts/$(printf '%s' "$h" | cut -c1-2)"
ln -s /etc/passwd "$T/state/artifacts/$(printf '%s' "$h" | cut -c1-2)/$h"
get "$TA" "/v1/artifacts/$A2"
check "a symlink in the store: 500, nothing of its target" all [ "$CODE" = 500 ] -- secret_check
check "... the supervisor says why" grep -q "artifact $A2: .* symbolic links" "$LOG"

printf 'dir' >"$T/d.bin"
h=$(sha "$T/d.bin")
A3=$(stored "$T/d.bin" dir "$T/d.bin")
mkdir -p "$T/state/artifacts/$(printf '%s' "$h" | cut -c1-2)/$h"
get "$TA" "/v1/artifacts/$A3"
check "a directory in the store: 500" [ "$CODE" = 500 ]

head -c 100 /dev/urandom >"$T/w.bin"
head -c 99 /dev/urandom >"$T/w99.bin"
store_file "$T/w.bin"
A4=$(stored "$T/w.bin" size "$T/w99.bin")
get "$TA" "/v1/artifacts/$A4"
check "a file of another size than recorded: 500" all [ "$CODE" = 500 ] -- \
	grep -q "artifact $A4: .* not a regular file of 99 bytes" "$LOG"

head -c 10 /dev/urandom >"$T/m.bin"
A5=$(stored "$T/m.bin" missing "$T/m.bin")
get "$TA" "/v1/artifacts/$A5"
check "a file missing from the store: 500" [ "$CODE" = 500 ]

# the store itself replaced by a symlink to a directory with the same file
mv "$T/state/artifacts" "$T/elsewhere"
ln -s "$T/elsewhere" "$T/state/artifacts"
get "$TA" "/v1/artifacts/$A1"
check "a symlinked store: 500" [ "$CODE" = 500 ]
rm "$T/state/artifacts"
mv "$T/elsewhere" "$T/state/artifacts"
get "$TA" "/v1/artifacts/$A1"
check "... and served again once it is back" [ "$CODE" = 200 -a "$(sha "$T/body")" = "$(sha "$T/big.bin")" ]

# --- inline artifacts --------------------------------------------------------------------
printf 'diff --git a/x b/x\n+fixed\n' >"$T/p.patch"
A6=$(psql_q "insert into artifacts (run_id, step_id, attempt, key, kind, size, sha256, inline)
             values ('$RUN', 's1', 1, 'patch', 'patch', $(wc -c <"$T/p.patch"),
                     decode('$(sha "$T/p.patch")', 'hex'), pg_read_binary_file('$T/p.patch'))
             returning id" 2>/dev/null | head -1)
if [ -z "$A6" ]; then # pg_read_binary_file needs a superuser; go through hex
	A6=$(psql_q "insert into artifacts (run_id, step_id, attempt, key, kind, size, sha256, inline)
	             values ('$RUN', 's1', 1, 'patch', 'patch', $(wc -c <"$T/p.patch"),
	                     decode('$(sha "$T/p.patch")', 'hex'), decode('$(od -An -tx1 -v "$T/p.patch" | tr -d ' \n')', 'hex'))
	             returning id" | head -1)
fi
get "$TA" "/v1/artifacts/$A6"
check "inline artifact: 200 with exactly its bytes" all [ "$CODE" = 200 ] -- cmp -s "$T/body" "$T/p.patch"
check "... text/x-diff" [ "$(header Content-Type)" = "text/x-diff; charset=utf-8" ]
A7=$(psql_q "insert into artifacts (run_id, step_id, attempt, key, kind, size, sha256, inline)
             values ('$RUN', 's1', 1, 'notes', 'md', 5, decode(repeat('ab', 32), 'hex'), 'hello')
             returning id" | head -1)
get "$TA" "/v1/artifacts/$A7"
check "inline bytes that do not match their digest: 500, not the bytes" \
	all [ "$CODE" = 500 ] -- [ "$(grep -c hello "$T/body")" = 0 ]
get "$TA" "/v1/runs/$RUN/artifacts"
check "the run's list has all of them with their sizes" all [ "$CODE" = 200 ] -- \
	python3 -c "import json,sys; a=json.load(open('$T/body'))['artifacts']; \
sys.exit(0 if len(a)==7 and any(x['key']=='big' and x['size']==3000000 for x in a) else 1)"

check "daemon still healthy" [ "$(healthz_code)" = 200 ]
check "no sanitizer report" [ "$(grep -c 'runtime error\|AddressSanitizer\|LeakSanitizer' "$LOG")" = 0 ]
finish artifact_store
