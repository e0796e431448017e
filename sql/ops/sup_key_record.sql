-- op: sup_key_record
-- roles: ctl
-- args: bytea
-- scope: none
-- The first start on this database records its key's fingerprint $1; a
-- row already there is left as it is (the caller reads it again).
INSERT INTO key_state (fingerprint) VALUES ($1) ON CONFLICT (id) DO NOTHING
