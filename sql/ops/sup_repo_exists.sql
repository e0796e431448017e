-- op: sup_repo_exists
-- roles: ctl
-- args: uuid
-- scope: none
-- The supervisor's mirror sweep: whether the repository connection still exists.
SELECT EXISTS (SELECT 1 FROM repo_connections WHERE id = $1)
