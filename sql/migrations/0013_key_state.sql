-- The master key the secrets at rest are under (agrippactl key rotate):
-- one row, the key's fingerprint (a BLAKE2b hash keyed with the key, never
-- the key), written by the supervisor at its first start on this database
-- and changed by a rotation in the same transaction that re-encrypts every
-- secret.  At start the supervisor compares it with its key files
-- (MASTER_KEY, MASTER_KEY.new, MASTER_KEY.old) to finish or roll back a
-- rotation a crash interrupted.
CREATE TABLE key_state (
	id          boolean PRIMARY KEY DEFAULT true CHECK (id),
	fingerprint bytea NOT NULL CHECK (octet_length(fingerprint) = 32),
	previous    bytea CHECK (octet_length(previous) = 32),
	rotated_at  timestamptz,
	recorded_at timestamptz NOT NULL DEFAULT now()
);

-- A secret's nonce begins with the first 8 bytes of the fingerprint of
-- the key that sealed it (supervisor/secret.h).  A sealed value stored
-- after a rotation committed but sealed before it (an API request or an
-- agrippactl command in flight) is refused here rather than stored under a
-- key that is gone.  FOR SHARE waits for a rotation at work and then reads
-- its key; a rotation in turn waits for every store that read the old key.
-- Without a row (a database no supervisor has started on yet) nothing is
-- checked; a nonce of the wrong length is the table's CHECK's to refuse.
CREATE FUNCTION key_sealed_current(p_nonce bytea) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
	fp bytea;
BEGIN
	IF p_nonce IS NULL OR octet_length(p_nonce) <> 24 THEN
		RETURN;
	END IF;
	SELECT k.fingerprint INTO fp FROM key_state k FOR SHARE;
	IF NOT FOUND THEN
		RETURN;
	END IF;
	IF substring(p_nonce FROM 1 FOR 8) <> substring(fp FROM 1 FOR 8) THEN
		RAISE EXCEPTION 'the secret was sealed under a master key that has been rotated since: '
		                'give it again'
		      USING ERRCODE = 'AGK01';
	END IF;
END
$$;

CREATE FUNCTION repo_connections_key_check() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'INSERT' OR NEW.token_nonce IS DISTINCT FROM OLD.token_nonce THEN
		PERFORM key_sealed_current(NEW.token_nonce);
	END IF;
	RETURN NEW;
END
$$;
CREATE TRIGGER repo_connections_key_check BEFORE INSERT OR UPDATE OF token_nonce
	ON repo_connections FOR EACH ROW EXECUTE FUNCTION repo_connections_key_check();

CREATE FUNCTION mcp_servers_key_check() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'INSERT' OR NEW.credentials_nonce IS DISTINCT FROM OLD.credentials_nonce THEN
		PERFORM key_sealed_current(NEW.credentials_nonce);
	END IF;
	RETURN NEW;
END
$$;
CREATE TRIGGER mcp_servers_key_check BEFORE INSERT OR UPDATE OF credentials_nonce
	ON mcp_servers FOR EACH ROW EXECUTE FUNCTION mcp_servers_key_check();
