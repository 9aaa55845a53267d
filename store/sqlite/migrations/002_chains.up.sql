-- Chains: a run made by the end of another run (trigger_kind 'chain')
-- names it in parent_run_id, NULL for every other run. A parent run makes
-- at most one run of each job: the index holds it, whatever path ends the
-- parent, and lists a run's children.
ALTER TABLE runs ADD COLUMN parent_run_id TEXT;

CREATE UNIQUE INDEX runs_parent ON runs (parent_run_id, job) WHERE parent_run_id IS NOT NULL;
