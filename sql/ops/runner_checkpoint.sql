-- op: runner_checkpoint
-- roles: runner
-- args: uuid text text int4 text int4
-- scope: run
-- A checkpoint: an approval, and the run parked until it is decided (checkpoint_wait).
SELECT checkpoint_wait($1, $2, $3, $4, $5, $6)
