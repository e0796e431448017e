-- op: runner_skills
-- roles: runner
-- args: uuid text jsonb
-- scope: run
-- The step's skills, through the run's manifest (runner_skills).
SELECT name, version, body FROM runner_skills($1, $2, $3)
