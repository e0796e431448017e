-- op: httpd_approvals_pending
-- roles: httpd
-- args: uuid
-- scope: none
-- GET /v1/approvals: the dashboard's inbox, every pending, unexpired
-- approval that user $1 may decide (a member or admin of its run's
-- project), across projects, soonest expiry first, at most 200.  Each is
-- approval_json with the project {id, name}, the run's template name and
-- the message of its approval.requested event (null when it has none).
-- One row: the api_* envelope, body {approvals: [...]}.
SELECT api_ok(200, jsonb_build_object('approvals', coalesce(
    (SELECT jsonb_agg(x.j ORDER BY x.expires_at, x.id) FROM (
        SELECT a.id, a.expires_at, approval_json(a) || jsonb_build_object(
               'project', jsonb_build_object('id', p.id, 'name', p.name),
               'template', r.template_name,
               'message', (SELECT e.payload->>'message' FROM run_events e
                           WHERE e.run_id = r.id AND e.type = 'approval.requested'
                             AND e.payload->>'approval_id' = a.id::text
                           ORDER BY e.seq DESC LIMIT 1)) AS j
        FROM approvals a
        JOIN runs r ON r.id = a.run_id
        JOIN projects p ON p.id = r.project_id
        JOIN api_members m ON m.project_id = r.project_id AND m.user_id = $1
        WHERE a.status = 'pending' AND a.expires_at > now()
          AND m.role IN ('member', 'admin')
          AND r.status NOT IN ('succeeded', 'failed', 'cancelled')
        ORDER BY a.expires_at, a.id
        LIMIT 200) x), '[]')))::text AS j
