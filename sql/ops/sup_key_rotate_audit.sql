-- op: sup_key_rotate_audit
-- roles: ctl
-- args: text text int4 int4
-- scope: none
-- The rotation's audit row, in its transaction: the old and the new key's
-- fingerprints (hex; never a key) and how many secrets were sealed again.
INSERT INTO audit_log (actor_kind, action, object_kind, object_id, remote_addr, detail)
VALUES ('operator', 'key.rotate', 'master_key', $2, 'control socket',
        jsonb_build_object('previous', $1::text, 'fingerprint', $2::text,
                           'repo_tokens', $3::int, 'mcp_credentials', $4::int))
