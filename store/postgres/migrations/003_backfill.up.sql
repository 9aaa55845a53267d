-- A backfill's runs (schedulerd backfill) have trigger_kind 'backfill'.
-- The old check holds for every row, so the new one is not validated
-- against them (no scan of the runs).
ALTER TABLE runs DROP CONSTRAINT runs_trigger_kind_check;
ALTER TABLE runs ADD CONSTRAINT runs_trigger_kind_check
	CHECK (trigger_kind IN ('schedule', 'once', 'manual', 'rerun', 'chain', 'backfill')) NOT VALID;

-- backfills holds each backfill of a job's past ticks from from_at to
-- to_at, both included: next_at is the first tick not yet handled, NULL
-- once every tick is. Its runs are keyed by their occurrence as a
-- schedule's are; this row only paces them (max_parallel, 0 for no bound)
-- across restarts.
CREATE TABLE backfills (
	id           text PRIMARY KEY,
	job          text NOT NULL,
	from_at      timestamptz NOT NULL,
	to_at        timestamptz NOT NULL,
	next_at      timestamptz,
	max_parallel integer NOT NULL,
	created      bigint NOT NULL DEFAULT 0,
	skipped      bigint NOT NULL DEFAULT 0,
	actor        text NOT NULL DEFAULT '',
	node         text NOT NULL DEFAULT '',
	created_at   timestamptz NOT NULL,
	updated_at   timestamptz NOT NULL,
	done_at      timestamptz
);

CREATE INDEX backfills_active ON backfills (job, created_at) WHERE next_at IS NOT NULL;
