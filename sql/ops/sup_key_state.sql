-- op: sup_key_state
-- roles: ctl
-- args:
-- scope: none
-- The fingerprint of the master key the secrets are under (no row before
-- the first start on this database), for the start's check and a
-- rotation (supervisor/keyrotate.c, over its own connection).
SELECT fingerprint FROM key_state
