-- op: runner_agent_turn
-- roles: runner
-- args: uuid text text int4 text int4 jsonb? jsonb
-- scope: run
-- One step of an agent conversation and its events (agent_turn).
SELECT agent_turn($1, $2, $3, $4, $5, $6, $7, $8)
