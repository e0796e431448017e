-- op: sup_run_network
-- roles: ctl
-- args: uuid
-- scope: none
-- The supervisor, setting a run up: the networks of its pinned template,
-- one row per entry (step: '' for the template's own, else the step's id;
-- kind 'allow' or 'preset'; value the entry or the preset's name), and one
-- row of kind 'none' for each network that is there at all (an empty one
-- is none, but still replaces the template's for its step).
WITH t AS (
	SELECT tp.compiled AS c FROM runs r JOIN templates tp ON tp.id = r.template_id
	WHERE r.id = $1
), nets AS (
	SELECT '' AS step, t.c->'network' AS net FROM t
	UNION ALL
	SELECT s->>'id', s->'network'
	FROM t, jsonb_array_elements(t.c->'phases') ph, jsonb_array_elements(ph->'steps') s
	WHERE s ? 'network'
), objs AS (
	SELECT step, net FROM nets WHERE jsonb_typeof(net) = 'object'
)
SELECT step, 'none' AS kind, '' AS value FROM objs
UNION ALL
SELECT step, 'allow', a FROM objs, jsonb_array_elements_text(objs.net->'allow') a
UNION ALL
SELECT step, 'preset', p FROM objs, jsonb_array_elements_text(objs.net->'presets') p
