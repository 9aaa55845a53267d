-- The initial schema of the SQLite store. Times are INTEGER unix microseconds
-- in UTC; NULL stands for a zero time.

-- runs holds every run, active and finished, until RunsPrune deletes it.
CREATE TABLE runs (
	id               TEXT PRIMARY KEY,
	job              TEXT NOT NULL,
	status           TEXT NOT NULL CHECK (status IN ('pending', 'running', 'retrying', 'completed', 'cancelled', 'dead_letter')),
	attempt          INTEGER NOT NULL DEFAULT 0,
	max_attempts     INTEGER NOT NULL,
	trigger_kind     TEXT NOT NULL,
	scheduled_at     INTEGER NOT NULL,
	not_before       INTEGER NOT NULL,
	not_after        INTEGER,
	created_at       INTEGER NOT NULL,
	started_at       INTEGER,
	finished_at      INTEGER,
	updated_at       INTEGER NOT NULL,
	node             TEXT NOT NULL DEFAULT '',
	incarnation      TEXT NOT NULL DEFAULT '',
	exit_code        INTEGER,
	error            TEXT NOT NULL DEFAULT '',
	reason           TEXT NOT NULL DEFAULT '',
	dedup_id         TEXT,
	rerun_of         TEXT,
	payload          TEXT NOT NULL DEFAULT '',
	retry_json       TEXT NOT NULL,
	cancel_requested INTEGER NOT NULL DEFAULT 0,
	progress         INTEGER NOT NULL DEFAULT 0,
	progress_message TEXT NOT NULL DEFAULT ''
) STRICT;

-- One non-terminal run per (job, dedup id): concurrent triggers with one id
-- make one run, and the id is free again once that run is terminal.
CREATE UNIQUE INDEX runs_dedup ON runs (job, dedup_id)
	WHERE dedup_id IS NOT NULL AND status IN ('pending', 'running', 'retrying');

-- Claims read, per job, its due runs in start order; the index holds only
-- waiting runs, so a long history never slows a claim.
CREATE INDEX runs_claim ON runs (job, not_before, created_at, id)
	WHERE status IN ('pending', 'retrying');

-- Expiry looks only at waiting runs that have a deadline.
CREATE INDEX runs_expire ON runs (not_after)
	WHERE status IN ('pending', 'retrying') AND not_after IS NOT NULL;

-- Running and active counts per job (claim limits, overlap).
CREATE INDEX runs_job_status ON runs (job, status);

-- Listings, newest first, and the last run of each job.
CREATE INDEX runs_job_created ON runs (job, created_at, id);
CREATE INDEX runs_created ON runs (created_at, id);
CREATE INDEX runs_status_created ON runs (status, created_at, id);

-- The running runs of a node.
CREATE INDEX runs_node_status ON runs (node, status);

-- Pending cancel requests, per incarnation; tiny.
CREATE INDEX runs_cancel_requested ON runs (incarnation) WHERE cancel_requested = 1;

-- Pruning of finished runs.
CREATE INDEX runs_finished ON runs (finished_at) WHERE finished_at IS NOT NULL;

-- occurrences is the permanent occurrence key of schedule and once runs: a
-- row outlives its run, so a tick whose run has finished or been pruned can
-- never fire again. RunsPrune removes only rows of schedule ticks that are
-- older than the prune horizon and than the job's cursor, whose run is gone.
CREATE TABLE occurrences (
	job          TEXT NOT NULL,
	scheduled_at INTEGER NOT NULL,
	run_id       TEXT NOT NULL,
	kind         TEXT NOT NULL,
	PRIMARY KEY (job, scheduled_at)
) STRICT;

-- events is the history of each run, in insertion order.
CREATE TABLE events (
	id          INTEGER PRIMARY KEY,
	run_id      TEXT NOT NULL REFERENCES runs (id),
	time        INTEGER NOT NULL,
	node        TEXT NOT NULL DEFAULT '',
	attempt     INTEGER NOT NULL DEFAULT 0,
	from_status TEXT,
	to_status   TEXT NOT NULL,
	reason      TEXT NOT NULL DEFAULT '',
	message     TEXT NOT NULL DEFAULT ''
) STRICT;

CREATE INDEX events_run ON events (run_id, id);

-- attempts holds one row per execution of a run, with its bounded output.
CREATE TABLE attempts (
	run_id       TEXT NOT NULL REFERENCES runs (id),
	number       INTEGER NOT NULL,
	node         TEXT NOT NULL,
	incarnation  TEXT NOT NULL,
	started_at   INTEGER NOT NULL,
	finished_at  INTEGER,
	status       TEXT NOT NULL,
	exit_code    INTEGER,
	error        TEXT NOT NULL DEFAULT '',
	reason       TEXT NOT NULL DEFAULT '',
	output       BLOB NOT NULL DEFAULT x'',
	output_bytes INTEGER NOT NULL DEFAULT 0,
	truncated    INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (run_id, number)
) STRICT;

-- cursors is the durable schedule state of each cron job.
CREATE TABLE cursors (
	job             TEXT PRIMARY KEY,
	last            INTEGER NOT NULL,
	paused          INTEGER NOT NULL DEFAULT 0,
	skipped         INTEGER NOT NULL DEFAULT 0,
	last_skipped_at INTEGER,
	updated_at      INTEGER NOT NULL
) STRICT;

-- nodes holds the current incarnation of each registered node.
CREATE TABLE nodes (
	id           TEXT PRIMARY KEY,
	incarnation  TEXT NOT NULL,
	host         TEXT NOT NULL DEFAULT '',
	pid          INTEGER NOT NULL DEFAULT 0,
	version      TEXT NOT NULL DEFAULT '',
	started_at   INTEGER NOT NULL,
	heartbeat_at INTEGER NOT NULL,
	jobs_json    TEXT NOT NULL DEFAULT '[]'
) STRICT;
