#!/bin/sh
# agrippactl template check: every shipped template is valid; a broken one
# gets every error with its position and exit status 1; -j gives the same
# as JSON; bad usage exits 2.  No daemon is needed.
. tests/integration/lib.sh
T=$(mktemp -d /tmp/agrippa-test.XXXXXX)
trap 'rm -rf "$T"' EXIT

for t in templates/*.yaml; do
	out=$("$AGRIPPACTL" template check "$t" 2>&1)
	check "shipped template $t is valid" [ "$out" = "template OK" ]
done

cat >"$T/bad.yaml" <<'EOY'
name: Bad
version: 0
workspace: { repo: "${params.nope}" }
phases:
  - name: p
    steps:
      - { id: a, kind: command, run: "echo ${env.HOME}", prompt: "x" }
      - { id: a, kind: teleport }
EOY
"$AGRIPPACTL" template check "$T/bad.yaml" >"$T/out" 2>"$T/err"
rc=$?
check "a broken template exits 1" [ "$rc" = 1 ]
check "... and prints nothing on stdout" [ ! -s "$T/out" ]
n=$(wc -l <"$T/err")
check "... and reports every error, not only the first ($n)" [ "$n" -ge 6 ]
check "... each as FILE:LINE:COL: message" \
	sh -c "! grep -v '^$T/bad.yaml:[0-9]*:[0-9]*: ' '$T/err'"
for want in "1:7: name:" "2:10: version:" '${params.nope}' '${env.HOME}' \
	"prompt: not a key of a command step" "duplicate step id" "kind: expected command, agent"; do
	if grep -qF -- "$want" "$T/err"; then ok "the errors name: $want"; else
		notok "the errors name: $want" "$(cat "$T/err")"; fi
done

"$AGRIPPACTL" -j template check "$T/bad.yaml" >"$T/json"
check "-j: exit 1 and ok false" sh -c "grep -q '\"ok\": false' '$T/json'"
check "-j: the same errors" [ "$(grep -c "\"$T/bad.yaml:" "$T/json")" = "$n" ]
"$AGRIPPACTL" -j template check templates/run-tests.yaml >"$T/json"
check "-j: a valid template is compiled, with its defaults" \
	sh -c "grep -q '\"ok\": true' '$T/json' && grep -q '\"timeout_s\": 3600' '$T/json'"

"$AGRIPPACTL" template check "$T/missing.yaml" 2>"$T/err"
check "a missing file exits 1 and says why" \
	sh -c "[ $? = 1 ] && grep -q 'No such file' '$T/err'"
"$AGRIPPACTL" template check >/dev/null 2>&1
check "no file is a usage error (exit 2)" [ $? = 2 ]
"$AGRIPPACTL" template lint "$T/bad.yaml" >/dev/null 2>&1
check "an unknown subcommand is a usage error (exit 2)" [ $? = 2 ]
finish template_check
