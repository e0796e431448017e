-- Browser sessions (docs/api.md, "Sessions"): a browser exchanges an API
-- token once for a session cookie, so that the long-lived token never sits
-- in the page, a URL or the browser's storage.  Only the SHA-256 of the
-- session secret is stored, like a token's.  A session lives no longer than
-- its expires_at, ends with DELETE /v1/session (ended_at), and is worth
-- nothing once its token is revoked or expired or its user disabled:
-- httpd_session_auth joins all three on every lookup.
CREATE TABLE browser_sessions (
	id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
	session_hash bytea NOT NULL UNIQUE CHECK (octet_length(session_hash) = 32),
	token_id     uuid NOT NULL REFERENCES api_tokens (id) ON DELETE CASCADE,
	user_id      uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
	created_at   timestamptz NOT NULL DEFAULT now(),
	expires_at   timestamptz NOT NULL CHECK (expires_at > created_at),
	ended_at     timestamptz,
	remote_addr  text CHECK (length(remote_addr) <= 128)
);
CREATE INDEX browser_sessions_token_idx ON browser_sessions (token_id);
CREATE INDEX browser_sessions_expiry_idx ON browser_sessions (expires_at) WHERE ended_at IS NULL;

-- A session ended must not outlive httpd's cache of its lookups
-- (0003_api.sql, "Authentication changes").  Deleting one needs no
-- notification: a token's or user's deletion (the cascade) notifies
-- already, and otherwise only dead sessions are deleted (the clean-up in
-- httpd_session_create), whose lookups already fail.
CREATE TRIGGER browser_sessions_auth_changed
	AFTER UPDATE OF ended_at, expires_at ON browser_sessions
	FOR EACH STATEMENT EXECUTE FUNCTION notify_auth_changed();
