-- op: runner_agent_session
-- roles: runner
-- args: uuid text text
-- scope: run
-- A conversation's messages, to resume it (agent_session).
SELECT seq, message FROM agent_session($1, $2, $3)
