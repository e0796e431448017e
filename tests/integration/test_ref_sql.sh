#!/bin/sh
# The workspace.ref SQL (sql/migrations/0009_ref.sql) against a throwaway
# PostgreSQL:
#  - ref_problem gives every case of tests/ref_cases.txt the reason the C
#    rules give it (tests/unit/test_tmpl.c reads the same file), and
#    runs.ref's CHECK takes exactly the refs ref_problem takes; control
#    characters and lengths too;
#  - tmpl_expand expands ${params.NAME} as the runner does, tmpl_ref_names
#    lists the parameters a text uses;
#  - api_submit_run, with templates compiled by agrippactl: the ref
#    expanded from the params as stored (defaults applied) is stored and
#    shown; an empty one or none is NULL; a bad one is a 422 invalid_ref
#    naming workspace.ref and its parameters that stores nothing, also on
#    a retry with an Idempotency-Key;
#  - run_setup's columns, in order, with repo_id and ref (and 0010's forge
#    and api_url after them) (through
#    the op file the supervisor prepares);
#  - run_checked_out(run, owner, base, ref) in place of the 3-argument one:
#    under the lease only, once, workspace.ready {base_commit, ref} with
#    the ref as given ('' too), runs.ref untouched.
. tests/integration/lib.sh
need_root ref_sql
make_env
SQDB=reftest
. tests/integration/pg_lib.sh

psql_db postgres -c "CREATE DATABASE reftest" >/dev/null
migrate "migrations apply"

### ref_problem and the CHECK against tests/ref_cases.txt
U1=00000000-0000-0000-0000-0000000000a1
P1=00000000-0000-0000-0000-0000000000b1
TPL=00000000-0000-0000-0000-0000000000c1
sq -c "INSERT INTO users (id, name) VALUES ('$U1', 'alice')" \
	-c "INSERT INTO projects (id, name) VALUES ('$P1', 'alpha')" \
	-c "INSERT INTO memberships (project_id, user_id, role) VALUES ('$P1', '$U1', 'member')" \
	-c "INSERT INTO templates (id, name, version, source, compiled, sha256)
	    VALUES ('$TPL', 'bare', 1, 'x', '{}', decode(repeat('00', 32), 'hex'))" >/dev/null
R0=$(val "INSERT INTO runs (project_id, template_id, template_name, template_version, submitted_by)
          VALUES ('$P1', '$TPL', 'bare', 1, '$U1') RETURNING id" | head -1)
# the cases as VALUES ('want', 'ref'), ...
values=$(grep -v '^#' tests/ref_cases.txt | grep . | sed "s/'/''/g; s/^\([^	]*\)	\(.*\)$/('\1', '\2'),/")
ncases=$(printf '%s\n' "$values" | wc -l)
cat >"$T/cases.sql" <<EOF
CREATE TEMP TABLE cases (want text, ref text);
INSERT INTO cases VALUES ${values%,};
-- whether runs.ref takes p: the CHECK, through a real UPDATE
CREATE FUNCTION pg_temp.takes(p text) RETURNS boolean LANGUAGE plpgsql AS \$\$
BEGIN
	UPDATE runs SET ref = p WHERE id = '$R0';
	RETURN true;
EXCEPTION WHEN check_violation THEN
	RETURN false;
END
\$\$;
SELECT count(*) FROM cases;
SELECT 'reason: ' || ref || ': expected ' || want || ', got ' || coalesce(ref_problem(ref), 'ok')
FROM cases WHERE coalesce(ref_problem(ref), 'ok') <> want;
SELECT 'check: ' || ref || ': ' || CASE WHEN want = 'ok' THEN 'refused' ELSE 'taken' END
FROM cases WHERE pg_temp.takes(ref) <> (want = 'ok');
EOF
out=$(sq -f "$T/cases.sql" 2>&1)
read1=$(printf '%s\n' "$out" | head -1)
check "all $ncases cases of tests/ref_cases.txt are read ($read1)" \
	sh -c "[ '$read1' = '$ncases' ] && [ '$ncases' -ge 60 ]"
check "ref_problem gives each case its reason, the CHECK takes exactly the good ones" \
	[ "$(printf '%s\n' "$out" | sed 1d)" = "" ]
printf '%s\n' "$out" | sed 1d | sed 's/^/# /'
is "ref_problem: control characters, DEL, lengths, NULL" \
	"SELECT concat_ws('|', ref_problem(E'a\\x01b'), ref_problem(E'a\\tb'), ref_problem('a' || chr(127)),
	        ref_problem(E'-a\\x1f'), coalesce(ref_problem(repeat('a', 255)), 'ok'),
	        ref_problem(repeat('a', 256)), ref_problem(''), coalesce(ref_problem(NULL), 'null'))" \
	"must not contain control characters|must not contain control characters|must not contain control characters|must not contain control characters|ok|must be at most 255 bytes|must not be empty|null"
is "ref_problem: a 256-byte ref of two-byte characters is too long" \
	"SELECT ref_problem(repeat('é', 128))" "must be at most 255 bytes"
refused "runs.ref refuses a control character" runs_ref_check \
	"UPDATE runs SET ref = E'a\\x01b' WHERE id = '$R0'"
refused "... and DEL" runs_ref_check "UPDATE runs SET ref = 'a' || chr(127) WHERE id = '$R0'"
refused "... and 256 bytes" runs_ref_check "UPDATE runs SET ref = repeat('a', 256) WHERE id = '$R0'"
refused "... and ''" runs_ref_check "UPDATE runs SET ref = '' WHERE id = '$R0'"
accepted "... takes 255 bytes" "UPDATE runs SET ref = repeat('a', 255) WHERE id = '$R0'"
accepted "... and NULL" "UPDATE runs SET ref = NULL WHERE id = '$R0'"

### tmpl_expand, tmpl_ref_names
is "tmpl_expand: strings, numbers and bools as the runner writes them, a missing one as nothing" \
	"SELECT tmpl_expand('refs/heads/\${params.a}-\${params.n}-\${params.b}-\${params.x}/\${params.a}',
	        '{\"a\": \"main\", \"n\": 3, \"b\": true}')" "refs/heads/main-3-true-/main"
is "tmpl_expand: text without references, an unterminated one, \$\$ and \${env.X} as they are" \
	"SELECT tmpl_expand('v1 \$\$ \${env.X} \${params.a', '{\"a\": \"z\"}')" 'v1 $$ ${env.X} ${params.a'
is "tmpl_expand of NULL is NULL" "SELECT coalesce(tmpl_expand(NULL, '{}'), 'null')" null
is "tmpl_ref_names: each parameter once, in order of first use" \
	"SELECT tmpl_ref_names('\${params.b}/\${params.a}-\${params.b}') || tmpl_ref_names('main') ||
	        tmpl_ref_names(NULL)" '["b", "a"]'

### api_submit_run
RC1=00000000-0000-0000-0000-0000000000d1
sq -c "INSERT INTO repo_connections (id, project_id, name, url) VALUES ('$RC1', '$P1', 'myrepo', '/tmp/x')" >/dev/null
# tmpl NAME WORKSPACE: a template compiled by agrippactl, loaded as version 1
tmpl() {
	cat >"$T/$1.yaml" <<EOF
name: $1
version: 1
params:
  repo: { type: repoRef, required: true }
  branch: { type: string, default: main }
  tag: { type: string }
workspace: $2
phases: [ { name: p, steps: [ { id: a, kind: command, run: "true" } ] } ]
EOF
	"$AGRIPPACTL" -j template check "$T/$1.yaml" >"$T/$1.json" || { echo "# $(cat "$T/$1.json")"; return 1; }
	"$PY" -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["template"]))' \
		"$T/$1.json" >"$T/$1.compiled"
	# psql quotes the compiled JSON (:'c'), which only its input interpolates
	echo "INSERT INTO templates (name, version, source, compiled, sha256)
	      VALUES ('$1', 1, 'x', :'c', decode(repeat('00', 32), 'hex'))" |
		sq -v c="$(cat "$T/$1.compiled")" >/dev/null
}
PY=$(command -v python3)
tmpl byparam '{ repo: "${params.repo}", ref: "${params.branch}" }' &&
	tmpl prefixed '{ repo: "${params.repo}", ref: "refs/tags/${params.tag}" }' &&
	tmpl two '{ repo: "${params.repo}", ref: "${params.branch}/${params.tag}" }' &&
	tmpl literal '{ repo: "${params.repo}", ref: v1.0 }' &&
	tmpl noref '{ repo: "${params.repo}" }'
check "templates compiled by agrippactl and loaded" [ $? -eq 0 ]
# submit TEMPLATE PARAMS [KEY]: the envelope's status and body
submit() {
	val "SELECT api_submit_run('$U1', '$P1', '$1', '$2', $( [ -n "${3:-}" ] && echo "'$3'" || echo NULL), '127.0.0.1')"
}
# jq_is DESC JSON PYEXPR: the expression holds for d, the JSON
jq_is() {
	if printf '%s' "$2" | "$PY" -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if ($3) else 1)" 2>/dev/null; then
		ok "$1"
	else
		notok "$1: $(printf '%s' "$2" | head -c 400)"
	fi
}
stored() { val "SELECT coalesce(ref, 'NULL') FROM runs WHERE id = '$1'"; }
fingerprint() {
	val "SELECT (SELECT count(*) FROM runs) || ' ' || (SELECT count(*) FROM run_events) || ' ' ||
	        (SELECT count(*) FROM audit_log)"
}

J=$(submit byparam '{"repo": "myrepo"}')
RUN=$(printf '%s' "$J" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["body"]["id"])')
jq_is "ref \${params.branch}, branch not given: the default is stored and shown" "$J" \
	"d['status'] == 201 and d['body']['ref'] == 'main' and d['body']['params']['branch'] == 'main'"
check "... runs.ref is main" [ "$(stored "$RUN")" = main ]
J=$(submit byparam '{"repo": "myrepo", "branch": "feature/x-1"}')
jq_is "a given branch: feature/x-1 stored" "$J" "d['status'] == 201 and d['body']['ref'] == 'feature/x-1'"
J=$(submit byparam '{"repo": "myrepo", "branch": ""}')
jq_is "an empty branch: the default branch, ref null" "$J" "d['status'] == 201 and d['body']['ref'] is None"
check "... runs.ref NULL" [ "$(stored "$(printf '%s' "$J" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["body"]["id"])')")" = NULL ]
J=$(submit literal '{"repo": "myrepo"}')
jq_is "a literal ref: v1.0" "$J" "d['status'] == 201 and d['body']['ref'] == 'v1.0'"
J=$(submit noref '{"repo": "myrepo"}')
jq_is "no ref at all: null" "$J" "d['status'] == 201 and d['body']['ref'] is None"
J=$(submit prefixed '{"repo": "myrepo", "tag": "v2"}')
jq_is "refs/tags/\${params.tag}: refs/tags/v2" "$J" "d['status'] == 201 and d['body']['ref'] == 'refs/tags/v2'"

BEFORE=$(fingerprint)
J=$(submit byparam '{"repo": "myrepo", "branch": "a..b"}')
jq_is "branch a..b: 422 invalid_ref naming workspace.ref and the parameter" "$J" \
	"d['status'] == 422 and d['error'] == {'code': 'invalid_ref', 'field': 'workspace.ref',
	 'param': 'branch', 'params': ['branch'],
	 'message': \"workspace.ref: must not contain '..' (made from parameter branch)\"}"
J=$(submit byparam '{"repo": "myrepo", "branch": "--upload-pack=x"}')
jq_is "branch --upload-pack=x: 422, must not start with '-'" "$J" \
	"d['status'] == 422 and d['error']['code'] == 'invalid_ref' and d['error']['param'] == 'branch' and
	 d['error']['message'].startswith(\"workspace.ref: must not start with '-'\")"
J=$(submit byparam '{"repo": "myrepo", "branch": "x.lock"}')
jq_is "branch x.lock: 422" "$J" "d['status'] == 422 and 'lock' in d['error']['message']"
J=$(submit prefixed '{"repo": "myrepo"}')
jq_is "refs/tags/\${params.tag} without a tag: refs/tags/ refused" "$J" \
	"d['status'] == 422 and d['error']['param'] == 'tag' and
	 d['error']['message'] == \"workspace.ref: must not end with '/' (made from parameter tag)\""
J=$(submit two '{"repo": "myrepo", "tag": "x", "branch": "-b"}')
jq_is "two parameters: both named, the first as param" "$J" \
	"d['status'] == 422 and d['error']['params'] == ['branch', 'tag'] and d['error']['param'] == 'branch' and
	 d['error']['message'] == \"workspace.ref: must not start with '-' (made from parameters branch, tag)\""
J=$(submit byparam "{\"repo\": \"myrepo\", \"branch\": \"$(printf 'a%.0s' $(seq 256))\"}")
jq_is "a 256-byte branch: 422 at most 255 bytes" "$J" \
	"d['status'] == 422 and 'at most 255 bytes' in d['error']['message']"
check "the refused submits stored nothing (runs, events, audit)" [ "$(fingerprint)" = "$BEFORE" ]
J=$(submit byparam '{"repo": "myrepo", "branch": "dev"}' key-1)
jq_is "with an Idempotency-Key: 201, ref dev" "$J" "d['status'] == 201 and d['body']['ref'] == 'dev'"
J=$(submit byparam '{"repo": "myrepo", "branch": "dev"}' key-1)
jq_is "... the same again: 200, the same run" "$J" "d['status'] == 200 and d['body']['ref'] == 'dev'"
BEFORE=$(fingerprint)
J=$(submit byparam '{"repo": "myrepo", "branch": "a b"}' key-1)
jq_is "... the key with a bad ref: 422 invalid_ref like a first submit" "$J" \
	"d['status'] == 422 and d['error']['code'] == 'invalid_ref'"
check "... which stored nothing" [ "$(fingerprint)" = "$BEFORE" ]

### run_setup
is "run_setup's columns, in order" \
	"SELECT array_to_string(proargnames, ',') FROM pg_proc WHERE proname = 'run_setup'" \
	"p_run,status,url,token_ciphertext,token_nonce,access,base_commit,repo_missing,repo_id,ref,forge,api_url"
# the supervisor's op, prepared as the supervisor prepares it
setup_op() {
	sql=$(grep -v '^--' sql/ops/sup_run_setup.sql)
	val "PREPARE s(uuid) AS $sql; EXECUTE s('$1')" | tr '|' ','
}
check "sup_run_setup: ..., repo_missing, then repo_id and ref (and 0010's forge, api_url)" \
	[ "$(setup_op "$RUN")" = "queued,/tmp/x,,,readWrite,,f,$RC1,main,none," ]
RN=$(printf '%s' "$(submit noref '{"repo": "myrepo"}')" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["body"]["id"])')
check "... a run without a ref: ref NULL, repo_id the connection" \
	[ "$(setup_op "$RN")" = "queued,/tmp/x,,,readWrite,,f,$RC1,,none," ]
RB=$(val "INSERT INTO runs (project_id, template_id, template_name, template_version, submitted_by, ref)
          VALUES ('$P1', '$TPL', 'bare', 1, '$U1', 'v9') RETURNING id" | head -1)
check "... a template without a repository: no url, repo_id NULL" \
	[ "$(setup_op "$RB")" = "queued,,,,readWrite,,f,,v9,," ]
sq -c "UPDATE runs SET manifest = jsonb_set(manifest, '{repos,repo,id}', '\"$U1\"') WHERE id = '$RN'" >/dev/null
check "... a connection that is gone: repo_missing, repo_id NULL" \
	[ "$(setup_op "$RN")" = "queued,,,,readWrite,,t,,,," ]

### run_checked_out
is "run_checked_out has one form, (uuid, text, text, text)" \
	"SELECT string_agg(pg_get_function_identity_arguments(oid), ';') FROM pg_proc WHERE proname = 'run_checked_out'" \
	"p_run uuid, p_owner text, p_base text, p_ref text"
BASE=0123456789abcdef0123456789abcdef01234567
sq -c "UPDATE runs SET status = 'running', started_at = now(), lease_owner = 'e1',
       lease_expires_at = now() + interval '1 hour' WHERE id IN ('$RUN', '$RN')" >/dev/null
checked_out() {
	sql=$(grep -v '^--' sql/ops/sup_run_checked_out.sql)
	val "PREPARE c(uuid, text, text, text) AS $sql; EXECUTE c('$1', '$2', '$3', '$4')"
}
ready() {
	val "SELECT coalesce(string_agg(payload::text, ' ' ORDER BY seq), 'none') FROM run_events
	     WHERE run_id = '$1' AND type = 'workspace.ready'"
}
check "another owner: not recorded" [ "$(checked_out "$RUN" e2 "$BASE" main)" = f ]
check "... no event, no base commit" [ "$(ready "$RUN") $(val "SELECT coalesce(base_commit, '-') FROM runs WHERE id = '$RUN'")" = "none -" ]
check "the owner, through sup_run_checked_out: recorded" [ "$(checked_out "$RUN" e1 "$BASE" main)" = t ]
check "... workspace.ready {base_commit, ref}" \
	[ "$(ready "$RUN")" = "{\"ref\": \"main\", \"base_commit\": \"$BASE\"}" ]
check "... base_commit stored, runs.ref untouched" \
	[ "$(val "SELECT base_commit || ' ' || ref FROM runs WHERE id = '$RUN'")" = "$BASE main" ]
check "a second time: not recorded" [ "$(checked_out "$RUN" e1 "$BASE" other)" = f ]
check "... still one event" [ "$(ready "$RUN")" = "{\"ref\": \"main\", \"base_commit\": \"$BASE\"}" ]
check "p_ref '' is taken and emitted as it is" [ "$(checked_out "$RN" e1 "$BASE" "")" = t ]
check "... workspace.ready {base_commit, ref: \"\"}" \
	[ "$(ready "$RN")" = "{\"ref\": \"\", \"base_commit\": \"$BASE\"}" ]
check "... and runs.ref stays NULL" [ "$(stored "$RN")" = NULL ]

finish ref_sql
