-- The initial schema of the SQLite store. Times are INTEGER unix microseconds
-- in UTC; NULL stands for a zero time.
--
-- SQLite keeps the text of each CREATE statement as written, comments and
-- line breaks included (sqlite_master). The comments here are outside the
-- statements, and each statement's text is byte for byte that of the
-- schema which the migrations folded into this one made: hence the last
-- columns of runs and attempts, written as ALTER TABLE ADD COLUMN writes
-- them.

-- runs holds every run, active and finished, until RunsPrune deletes it.
--
-- claimed_from is, while the run is running, the status its claim took it
-- from. A claim writes only the run's row: the attempt's row, which stands
-- for the claim's event and the end's, is written when the attempt ends, in
-- the transaction that ends it; until then the run's row stands for them.
-- NULL while the run is not running.
--
-- actor is who made the run through the control API ("api:TOKEN",
-- "socket:USER"), '' for a run the engine made; cancelled_by is who asked
-- to cancel it, '' when no one did.
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
, claimed_from TEXT, actor TEXT NOT NULL DEFAULT '', cancelled_by TEXT NOT NULL DEFAULT '') STRICT;

-- One non-terminal run per (job, dedup id): concurrent triggers with one id
-- make one run, and the id is free again once that run is terminal.
CREATE UNIQUE INDEX runs_dedup ON runs (job, dedup_id)
	WHERE dedup_id IS NOT NULL AND status IN ('pending', 'running', 'retrying');

-- Claims read, per job, its due runs in start order; the index holds only
-- waiting runs, so a long history never slows a claim.
CREATE INDEX runs_claim ON runs (job, not_before, created_at, id)
	WHERE status IN ('pending', 'retrying');

-- Claims and the next-due probe read the waiting runs of every job in one
-- start order: with many jobs, a probe per job would cost more than the
-- claim. The job is the last key, so that the jobs of the first due runs
-- are read from the index alone.
CREATE INDEX runs_due ON runs (not_before, created_at, id, job)
	WHERE status IN ('pending', 'retrying');

-- Expiry looks only at waiting runs that have a deadline.
CREATE INDEX runs_expire ON runs (not_after)
	WHERE status IN ('pending', 'retrying') AND not_after IS NOT NULL;

-- The active runs of a job (overlap) and the running runs (of a node, and
-- per job for claim limits) are found in indexes of those runs only: a
-- finished run leaves them, so the history never grows them, and a run
-- that completes updates fewer index entries.
CREATE INDEX runs_job_active ON runs (job, status) WHERE status IN ('pending', 'running', 'retrying');
CREATE INDEX runs_node_running ON runs (node) WHERE status = 'running';

-- Listings, newest first, and the last run of each job.
CREATE INDEX runs_job_created ON runs (job, created_at, id);
CREATE INDEX runs_created ON runs (created_at, id);

-- Listings by status keep only the statuses a listing could not find among
-- the rest: running runs are few (runs_node_running holds them), and
-- completed runs are most of the history (runs_created, newest first,
-- filtered). A claim then deletes its run's entry instead of moving it,
-- and a completion leaves the index alone.
CREATE INDEX runs_status_created ON runs (status, created_at, id)
	WHERE status NOT IN ('running', 'completed');

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

-- events is the history of each run, in insertion order, but for the
-- claim's and the end's event of each attempt, which its row of attempts
-- stands for. actor is who asked for the change through the control API,
-- '' for a change the engine made.
CREATE TABLE events (
	id          INTEGER PRIMARY KEY,
	run_id      TEXT NOT NULL REFERENCES runs (id),
	time        INTEGER NOT NULL,
	node        TEXT NOT NULL DEFAULT '',
	attempt     INTEGER NOT NULL DEFAULT 0,
	from_status TEXT,
	to_status   TEXT NOT NULL,
	reason      TEXT NOT NULL DEFAULT '',
	message     TEXT NOT NULL DEFAULT '',
	actor       TEXT NOT NULL DEFAULT ''
) STRICT;

CREATE INDEX events_run ON events (run_id, id);

-- attempts holds one row per ended attempt of a run, with its bounded
-- output, written when the attempt ends: the end of an attempt writes two
-- rows (the run's, the attempt's). The row also stands for two events: the
-- claim's, from the status claimed_from at started_at by node, and the
-- end's, at finished_at by end_node, which differs from node when the run
-- was recovered.
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
	truncated    INTEGER NOT NULL DEFAULT 0, claimed_from TEXT, end_node TEXT,
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

-- job_results holds, for each job a run of which ever ended completed or
-- dead_letter, when the newest such run finished: written in the
-- transaction that ends the run, and kept when RunsPrune deletes the runs.
-- The daemon reads it at start and learns of later changes from its own
-- commits (store.ResultFeed).
CREATE TABLE job_results (
	job             TEXT PRIMARY KEY,
	last_success_at INTEGER,
	last_failure_at INTEGER
) STRICT;

-- nodes holds the current incarnation of each registered node.
CREATE TABLE nodes (
	id           TEXT PRIMARY KEY,
	incarnation  TEXT NOT NULL,
	host         TEXT NOT NULL DEFAULT '',
	pid          INTEGER NOT NULL DEFAULT 0,
	version      TEXT NOT NULL DEFAULT '',
	started_at   INTEGER NOT NULL,
	heartbeat_at INTEGER NOT NULL
) STRICT;

-- node_jobs holds each node's job list, in parts of a few KiB (the rows of
-- a node in the order of part). In the node's row, a list of 100,000 names
-- made every write of that row, each heartbeat's included, build a record
-- of 1.5 MiB, and the allocator under SQLite kept the room it took.
CREATE TABLE node_jobs (
	node_id   TEXT NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
	part      INTEGER NOT NULL,
	jobs_json TEXT NOT NULL,
	PRIMARY KEY (node_id, part)
) STRICT;

-- notifications is the outbox of notifications, one row per event and
-- notifier, written in the transaction of the change that causes it. A
-- pending row is due at next_attempt_at once its lease (of the node
-- delivering it) has run out; delivered and failed rows stay for
-- `schedulerd notifications` until they are pruned with the history.
CREATE TABLE notifications (
	id                TEXT PRIMARY KEY,
	notifier          TEXT NOT NULL,
	job               TEXT NOT NULL,
	event             TEXT NOT NULL,
	run_id            TEXT NOT NULL DEFAULT '',
	payload           BLOB NOT NULL,
	state             TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
	attempts          INTEGER NOT NULL DEFAULT 0,
	next_attempt_at   INTEGER NOT NULL,
	lease_node        TEXT NOT NULL DEFAULT '',
	lease_incarnation TEXT NOT NULL DEFAULT '',
	lease_until       INTEGER,
	last_error        TEXT NOT NULL DEFAULT '',
	created_at        INTEGER NOT NULL,
	delivered_at      INTEGER
) STRICT;

-- Deliveries read only the pending rows; listings and pruning go by age.
CREATE INDEX notifications_due ON notifications (next_attempt_at) WHERE state = 'pending';
CREATE INDEX notifications_created ON notifications (created_at, id);

-- job_notify is each job's notification state: since when it fails or is
-- overdue, and which notifiers were told of that (told: a JSON object of
-- notifier name to unix microseconds), so that a job failing every minute
-- notifies once, and once more when it recovers.
CREATE TABLE job_notify (
	job           TEXT PRIMARY KEY,
	failing_since INTEGER,
	overdue_since INTEGER,
	told          TEXT NOT NULL DEFAULT '{}'
) STRICT;

-- job_expect is each job's expect_success_within as the cluster keeps it:
-- written by the nodes that declare the job with the key (within in
-- microseconds, notify a JSON array of notifier names), with since, when
-- the cluster first expected it, kept while the row lives. A node whose
-- config no longer declares the job keeps the row (the job is retired but
-- still expected); `schedulerd forget` deletes it.
CREATE TABLE job_expect (
	job       TEXT PRIMARY KEY,
	within_us INTEGER NOT NULL,
	notify    TEXT NOT NULL DEFAULT '[]',
	since     INTEGER NOT NULL
) STRICT;
