-- GET /metrics counts budget stops (run_events of type budget.exceeded) at
-- every scrape.  run_events holds every event of every run, hundreds per
-- agent run, so a count by type would read the whole table; the stops are
-- few, and a partial index holds only them.
CREATE INDEX run_events_budget_idx ON run_events (run_id) WHERE type = 'budget.exceeded';
