-- op: sup_key_rotate_begin
-- roles: ctl
-- args: bytea bytea
-- scope: none
-- A rotation's first statement, inside its transaction: the record moves
-- from the key $1 to the new key $2, holding the row until the commit, so
-- that a secret sealed meanwhile waits and is then refused (0013's
-- trigger).  No row when the database is not under $1.
UPDATE key_state SET fingerprint = $2, previous = $1, rotated_at = now()
WHERE fingerprint = $1
RETURNING true AS moved
