-- op: engine_renew
-- roles: engine
-- args: text uuid int4
-- scope: instance
-- Renew this engine's lease on a run: still held? (renew_lease).
SELECT coalesce(renew_lease($2, $1, $3), false)
