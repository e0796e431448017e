-- op: engine_release
-- roles: engine
-- args: text uuid
-- scope: instance
-- Give a run's lease up at once, so that it is claimed again (release_lease).
SELECT coalesce(release_lease($2, $1), false)
