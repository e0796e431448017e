-- op: ctl_repo_add
-- roles: ctl
-- args: text text text bytea? bytea? text? text?
-- scope: none
-- agrippactl repo add PROJECT NAME URL [FORGE [API_URL]]: $4 and $5 are the token's
-- ciphertext and nonce (sealed by the supervisor under "reposecr"), both
-- NULL without a token; the token itself never reaches the database, and
-- the audit row says only whether there is one.  Always one row:
-- project_id NULL when there is no such project (nothing is written then).
-- A taken name in the project is a unique violation
-- (repo_connections_project_id_name_key).  $6 is the forge (NULL: the
-- URL's host's, forge_of_url) and $7 its API URL (NULL: the public one);
-- the supervisor has checked both, the table's CHECKs are the last line.
WITH p AS (
	SELECT id, name FROM projects WHERE name = $1
), r AS (
	INSERT INTO repo_connections (project_id, name, url, token_ciphertext, token_nonce, forge,
	                              api_url)
	SELECT p.id, $2, $3, $4, $5, coalesce($6, forge_of_url($3)), $7 FROM p
	RETURNING id, project_id, name, url, token_ciphertext IS NOT NULL AS has_token, forge, api_url
), a AS (
	INSERT INTO audit_log (actor_kind, action, object_kind, object_id, project_id,
	                       remote_addr, detail)
	SELECT 'operator', 'repo.add', 'repo_connection', r.id::text, r.project_id,
	       'control socket', jsonb_build_object('project', p.name, 'name', r.name,
	                                            'url', r.url, 'token', r.has_token,
	                                            'forge', r.forge, 'api_url', r.api_url)
	FROM r, p
)
SELECT (SELECT id::text FROM p) AS project_id, (SELECT id::text FROM r) AS repo_id
