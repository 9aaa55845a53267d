-- Chains: a run made by the end of another run (trigger_kind 'chain')
-- names it in parent_run_id, NULL for every other run. A parent run makes
-- at most one run of each job: the index holds it, whatever path ends the
-- parent, and lists a run's children.
--
-- The checks are added NOT VALID: they hold for every row written from
-- now on, and the rows written before held the narrower check they
-- replace, so the migration does not read the whole history under its
-- lock to prove it.
ALTER TABLE runs ADD COLUMN parent_run_id text;

ALTER TABLE runs DROP CONSTRAINT runs_trigger_kind_check;
ALTER TABLE runs ADD CONSTRAINT runs_trigger_kind_check
	CHECK (trigger_kind IN ('schedule', 'once', 'manual', 'rerun', 'chain')) NOT VALID;
ALTER TABLE runs ADD CONSTRAINT runs_chain_parent
	CHECK ((trigger_kind = 'chain') = (parent_run_id IS NOT NULL)) NOT VALID;

CREATE UNIQUE INDEX runs_parent ON runs (parent_run_id, job) WHERE parent_run_id IS NOT NULL;
