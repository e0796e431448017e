-- Foundation schema: engine heartbeats.  schema_migrations itself is created
-- by the migration runner before any migration is applied.
CREATE TABLE engine_heartbeats (
	instance_id text PRIMARY KEY CHECK (instance_id ~ '^[a-z0-9-]{1,64}$'),
	hostname    text NOT NULL CHECK (length(hostname) BETWEEN 1 AND 255),
	pid         integer NOT NULL CHECK (pid > 0),
	started_at  timestamptz NOT NULL DEFAULT now(),
	last_seen   timestamptz NOT NULL DEFAULT now()
);
