-- op: sup_artifact_stored
-- roles: ctl
-- args: uuid uuid
-- scope: none
-- The supervisor, for httpd's IMSG_ARTIFACT_OPEN: where artifact $2 is in
-- the content-addressed store (its path relative to the store, which the
-- schema derives from the digest), its size and digest, when user $1 is an
-- enabled member of its run's project.  No row otherwise, or when the
-- artifact is kept inline.
SELECT x.store_path, x.size::text AS size, encode(x.sha256, 'hex') AS sha256
FROM artifacts x JOIN runs r ON r.id = x.run_id
JOIN api_members m ON m.project_id = r.project_id AND m.user_id = $1
WHERE x.id = $2 AND x.store_path IS NOT NULL
