-- op: runner_step_begin
-- roles: runner
-- args: uuid text text text int4 text
-- scope: run
-- A step attempt starts: 'ok', 'lost' or 'cancelled' (step_begin).
SELECT step_begin($1, $2, $3, $4, $5, $6)
