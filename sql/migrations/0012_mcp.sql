-- MCP servers in agent steps (DESIGN 4.2): the events a runner writes of
-- them, agent.mcp_server (a server started, absent, failed or restarted)
-- and agent.mcp_tools_dropped (tools left out by the caps).
CREATE OR REPLACE FUNCTION runner_event_type_ok(p_type text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
	SELECT p_type IN ('step.output', 'artifact.rejected', 'agent.message', 'agent.tool_call',
	                  'agent.tool_result', 'agent.usage', 'budget.exceeded',
	                  'pull_request.skipped', 'agent.mcp_server', 'agent.mcp_tools_dropped')
$$;
