-- backfills holds each backfill (schedulerd backfill) of a job's past
-- ticks from from_at to to_at, both included: next_at is the first tick
-- not yet handled, NULL once every tick is. Its runs are keyed by their
-- occurrence as a schedule's are; this row only paces them (max_parallel,
-- 0 for no bound) across restarts.
CREATE TABLE backfills (
	id           TEXT PRIMARY KEY,
	job          TEXT NOT NULL,
	from_at      INTEGER NOT NULL,
	to_at        INTEGER NOT NULL,
	next_at      INTEGER,
	max_parallel INTEGER NOT NULL,
	created      INTEGER NOT NULL DEFAULT 0,
	skipped      INTEGER NOT NULL DEFAULT 0,
	actor        TEXT NOT NULL DEFAULT '',
	node         TEXT NOT NULL DEFAULT '',
	created_at   INTEGER NOT NULL,
	updated_at   INTEGER NOT NULL,
	done_at      INTEGER
) STRICT;

CREATE INDEX backfills_active ON backfills (job, created_at) WHERE next_at IS NOT NULL;
