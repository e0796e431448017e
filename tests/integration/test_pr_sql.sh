#!/bin/sh
# The pull-request SQL (sql/migrations/0010_pull_request.sql) against a
# throwaway PostgreSQL:
#  - connections made before 0010 get the forge of their URL's host
#    (github.com, gitlab.com, else none);
#  - api_repo_add takes a forge (NULL: from the URL) and an API URL, and
#    refuses a bad one of each with a 422 naming the field, storing
#    nothing; repo_json shows both; run_setup gives them to the supervisor;
#  - run_checked_out keeps the ref the checkout resolved (not '');
#  - pr_state, pr_pushed, pr_opened: under the lease only; the branch and
#    commit recorded with pull_request.pushed, a second push moves the
#    commit, another branch is refused; pr_opened needs a push first and
#    writes pull_request.opened, then .updated, with its note; the table's
#    CHECKs refuse a bad branch, commit or URL; run_json shows the pull
#    request; a runner may write pull_request.skipped itself.
. tests/integration/lib.sh
need_root pr_sql
make_env
SQDB=prtest
. tests/integration/pg_lib.sh

psql_db postgres -c "CREATE DATABASE prtest" >/dev/null
# every migration before 0010, then connections as an older daemon made them
rc=0
for f in $(ls "$ROOT"/sql/migrations/*.sql | sort); do
	case $f in *0010_*|*001[1-9]_*|*00[2-9]?_*) continue ;; esac
	sq -f "$f" >/dev/null || rc=1
done
check "the migrations before 0010 apply" [ $rc -eq 0 ]
U1=00000000-0000-0000-0000-0000000000a1
P1=00000000-0000-0000-0000-0000000000b1
TPL=00000000-0000-0000-0000-0000000000c1
sq -c "INSERT INTO users (id, name) VALUES ('$U1', 'alice')" \
	-c "INSERT INTO projects (id, name) VALUES ('$P1', 'alpha')" \
	-c "INSERT INTO memberships (project_id, user_id, role) VALUES ('$P1', '$U1', 'admin')" \
	-c "INSERT INTO templates (id, name, version, source, compiled, sha256)
	    VALUES ('$TPL', 'bare', 1, 'x', '{\"workspace\": {\"repo\": \"gh\"}}',
	            decode(repeat('00', 32), 'hex'))" \
	-c "INSERT INTO repo_connections (project_id, name, url) VALUES
	    ('$P1', 'gh', 'https://github.com/o/r.git'), ('$P1', 'gl', 'https://GitLab.com/g/s/p'),
	    ('$P1', 'own', 'https://git.example.test/o/r'), ('$P1', 'local', '/srv/r')" >/dev/null
sq -f "$ROOT/sql/migrations/0010_pull_request.sql" >/dev/null
check "0010 applies over them" [ $? -eq 0 ]
is "connections made before get their host's forge" \
	"SELECT string_agg(name || '=' || forge || ':' || coalesce(api_url, '-'), ' ' ORDER BY name)
	 FROM repo_connections" "gh=github:- gl=gitlab:- local=none:- own=none:-"

### api_repo_add
# add NAME URL FORGE API: the envelope's status and body, one line
add() {
	val "SELECT (j->>'status') || ' ' || coalesce(j->'body', j->'error')::text FROM
	     (SELECT api_repo_add('$U1', '$P1', '$1', '$2', NULL, NULL, 'test', $3, $4) AS j) x"
}
count() { val "SELECT count(*) FROM repo_connections"; }
N0=$(count)
out=$(add ghe https://ghe.example.test/o/r "'github'" "'https://ghe.example.test/api/v3'")
check "a forge and its API are stored and shown ($out)" \
	sh -c "echo '$out' | grep -q '^201 .*\"forge\": \"github\".*\"api_url\": \"https://ghe.example.test/api/v3\"'"
out=$(add gh2 https://github.com/o/r2 NULL NULL)
check "no forge: github.com's ($out)" sh -c "echo '$out' | grep -q '^201 .*\"forge\": \"github\", \"api_url\": null'"
out=$(add mine https://git.example.test/o/r "'gitlab'" NULL)
check "a self-hosted GitLab without api_url is taken ($out)" sh -c "echo '$out' | grep -q '^201 .*\"forge\": \"gitlab\"'"
N1=$(count)
for bad in "'GitHub'" "'bitbucket'" "''"; do
	out=$(add b1 https://x.test/o/r "$bad" NULL)
	check "forge $bad is refused naming the field ($out)" \
		sh -c "echo '$out' | grep -q '^422 .*\"field\": \"forge\"'"
done
for bad in "'http://ghe.test/api/v3'" "'https://u:p@ghe.test/api'" "'https://ghe.test/api?x=1'" \
	"'https://ghe.test/api#f'" "'https://ghe.test/api/'" "'https://'" "'https://ghe.test/a b'" \
	"''" "'https://ghe.test/' || repeat('a', 600)"; do
	out=$(add b2 https://x.test/o/r "'github'" "$bad")
	check "api_url $bad is refused naming the field" \
		sh -c "echo '$out' | grep -q '^422 .*\"field\": \"api_url\"'"
done
out=$(add b3 https://x.test/o/r "'none'" "'https://x.test/api'")
check "an api_url without a forge is refused ($out)" sh -c "echo '$out' | grep -q '^422 .*api_url'"
check "... and none of them stored anything" [ "$(count)" = "$N1" ]
check "three were added" [ "$(count)" = $((N0 + 3)) ]
refused "the table refuses a forge it does not know" repo_connections_forge_check \
	"UPDATE repo_connections SET forge = 'x' WHERE name = 'gh'"
refused "... and a bad api_url" repo_connections_api_url_check \
	"UPDATE repo_connections SET api_url = 'http://x' WHERE name = 'gh'"

### run_setup, run_checked_out
RUN=$(val "INSERT INTO runs (project_id, template_id, template_name, template_version, submitted_by,
                             status, started_at, lease_owner, lease_expires_at)
           VALUES ('$P1', '$TPL', 'bare', 1, '$U1', 'running', now(), 'e1', now() + interval '1 hour')
           RETURNING id" | head -1)
setup_op() {
	sql=$(grep -v '^--' sql/ops/sup_run_setup.sql)
	val "PREPARE s(uuid) AS $sql; EXECUTE s('$1')" | tr '|' ','
}
GH=$(val "SELECT id FROM repo_connections WHERE name = 'gh'")
check "sup_run_setup ends with the forge and the API URL" \
	[ "$(setup_op "$RUN")" = "running,https://github.com/o/r.git,,,readWrite,,f,$GH,,github," ]
BASE=0123456789abcdef0123456789abcdef01234567
is "run_checked_out records the checkout" "SELECT run_checked_out('$RUN', 'e1', '$BASE', 'main')" t
is "... and keeps the ref it resolved" "SELECT checked_out_ref FROM runs WHERE id = '$RUN'" main

### pr_state, pr_pushed, pr_opened
state() {
	sql=$(grep -v '^--' sql/ops/runner_pr_state.sql)
	val "PREPARE p(uuid, text) AS $sql; EXECUTE p('$1', '${2:-e1}')" | tr '|' ','
}
CREATED=$(val "SELECT extract(epoch FROM date_trunc('second', created_at))::bigint FROM runs WHERE id = '$RUN'")
check "pr_state before anything: nothing recorded, the ref and the run's time ($(state "$RUN"))" \
	[ "$(state "$RUN")" = ",,,main,$CREATED" ]
check "... nothing for another owner" [ "$(state "$RUN" e2)" = "" ]
C1=1111111111111111111111111111111111111111
C2=2222222222222222222222222222222222222222
pushed() { val "SELECT pr_pushed('$RUN', '$1', 'open-pr', $2, '$3', '$4', $5)"; }
opened() { val "SELECT pr_opened('$RUN', '$1', 'open-pr', 1, $2, '$3', $4, $5, $6)"; }
events() {
	val "SELECT coalesce(string_agg(type || payload::text, ' ' ORDER BY seq), 'none') FROM run_events
	     WHERE run_id = '$RUN' AND type LIKE 'pull_request.%'"
}
check "pr_pushed by another owner: not recorded" [ "$(pushed e2 1 agrippa/abc $C1 false)" = f ]
check "... nothing written" [ "$(events)" = none ]
out=$(opened e1 7 https://github.com/o/r/pull/7 true true NULL 2>&1)
check "pr_opened before any push: refused" sh -c "echo '$out' | grep -q 'the run pushed nothing'"
check "pr_pushed under the lease: recorded" [ "$(pushed e1 1 agrippa/abc $C1 false)" = t ]
check "... pr_state has the branch and the commit" [ "$(state "$RUN")" = "agrippa/abc,$C1,,main,$CREATED" ]
check "... and pull_request.pushed" [ "$(events)" = 'pull_request.pushed{"branch": "agrippa/abc", "commit": "'$C1'", "already": false, "attempt": 1, "step_id": "open-pr"}' ]
check "a second push of the branch moves the commit" [ "$(pushed e1 2 agrippa/abc $C2 true)" = t ]
check "... pr_state has it" [ "$(state "$RUN")" = "agrippa/abc,$C2,,main,$CREATED" ]
out=$(pushed e1 3 agrippa/other $C1 false 2>&1)
check "another branch for the run is refused ($out)" \
	sh -c "echo '$out' | grep -q 'the run pushed branch agrippa/abc, not agrippa/other'"
check "pr_opened by another owner: not recorded" \
	[ "$(opened e2 7 https://github.com/o/r/pull/7 true true NULL)" = f ]
check "pr_opened: recorded" [ "$(opened e1 7 https://github.com/o/r/pull/7 true false "'drafts are not supported'")" = t ]
is "... pull_request.opened with the note" \
	"SELECT payload::text FROM run_events WHERE run_id = '$RUN' AND type = 'pull_request.opened'" \
	'{"url": "https://github.com/o/r/pull/7", "note": "drafts are not supported", "draft": false, "number": 7, "attempt": 1, "step_id": "open-pr"}'
check "pr_opened again, not opened now: pull_request.updated" \
	[ "$(opened e1 7 https://github.com/o/r/pull/7 false false "''")" = t ]
is "... without a note" \
	"SELECT payload ? 'note' FROM run_events WHERE run_id = '$RUN' AND type = 'pull_request.updated'" f
check "pr_state has the number" [ "$(state "$RUN")" = "agrippa/abc,$C2,7,main,$CREATED" ]
is "run_json shows the pull request" \
	"SELECT concat_ws(' ', j->'pull_request'->>'branch', j->'pull_request'->>'commit', j->'pull_request'->>'number',
	        j->'pull_request'->>'url', j->'pull_request'->>'draft', j->>'checked_out_ref')
	 FROM (SELECT run_json(r) AS j FROM runs r WHERE id = '$RUN') x" \
	"agrippa/abc $C2 7 https://github.com/o/r/pull/7 false main"
refused "the table refuses a bad branch" run_pull_requests_branch_check \
	"UPDATE run_pull_requests SET branch = 'a..b' WHERE run_id = '$RUN'"
refused "... a refs/ one" run_pull_requests_branch_check \
	"UPDATE run_pull_requests SET branch = 'refs/heads/x' WHERE run_id = '$RUN'"
refused "... a bad commit" run_pull_requests_pushed_commit_check \
	"UPDATE run_pull_requests SET pushed_commit = 'abc' WHERE run_id = '$RUN'"
refused "... a URL that is not https" run_pull_requests_url_check \
	"UPDATE run_pull_requests SET url = 'http://x/1' WHERE run_id = '$RUN'"
refused "... a number without a URL" run_pull_requests_check \
	"UPDATE run_pull_requests SET url = NULL WHERE run_id = '$RUN'"
# the artifacts a body may include: text, md, json held in the database, the latest attempt
sq -c "INSERT INTO run_steps (run_id, phase_name, step_id, attempt, status, finished_at) VALUES ('$RUN', 'p', 'a', 1, 'failed', now()), ('$RUN', 'p', 'a', 2, 'succeeded', now())" \
	-c "INSERT INTO artifacts (run_id, step_id, attempt, key, kind, size, sha256, inline) VALUES
	    ('$RUN', 'a', 1, 'log', 'text', 3, decode(repeat('00', 32), 'hex'), 'old'),
	    ('$RUN', 'a', 2, 'log', 'text', 3, decode(repeat('00', 32), 'hex'), 'new'),
	    ('$RUN', 'a', 1, 'diag', 'md', 2, decode(repeat('00', 32), 'hex'), '# '),
	    ('$RUN', 'a', 1, 'p', 'patch', 1, decode(repeat('00', 32), 'hex'), 'x')" >/dev/null
arts() {
	sql=$(grep -v '^--' sql/ops/runner_pr_artifacts.sql)
	val "PREPARE a(uuid, text) AS $sql; EXECUTE a('$RUN', '$1')" | tr '\n|' ' ,'
}
check "runner_pr_artifacts: the latest attempt of each text, base64, no patch ($(arts e1))" \
	[ "$(arts e1)" = "diag,IyA= log,bmV3 " ]
check "... nothing for another owner" [ "$(arts e2)" = "" ]
is "a runner may write pull_request.skipped" \
	"SELECT runner_event('$RUN', 'e1', 'pull_request.skipped', '{\"reason\": \"no changes\"}') > 0" t

finish pr_sql
