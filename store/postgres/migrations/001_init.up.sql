-- The initial schema of the PostgreSQL store. Times are timestamptz
-- (microseconds); NULL stands for a zero time. The tables and their
-- guarantees are those of the SQLite store.

-- runs holds every run, active and finished, until RunsPrune deletes it.
CREATE TABLE runs (
	id               text PRIMARY KEY,
	job              text NOT NULL,
	status           text NOT NULL CHECK (status IN ('pending', 'running', 'retrying', 'completed', 'cancelled', 'dead_letter')),
	attempt          integer NOT NULL DEFAULT 0,
	max_attempts     integer NOT NULL,
	trigger_kind     text NOT NULL CHECK (trigger_kind IN ('schedule', 'once', 'manual', 'rerun')),
	scheduled_at     timestamptz NOT NULL,
	not_before       timestamptz NOT NULL,
	not_after        timestamptz,
	created_at       timestamptz NOT NULL,
	started_at       timestamptz,
	finished_at      timestamptz,
	updated_at       timestamptz NOT NULL,
	node             text NOT NULL DEFAULT '',
	incarnation      text NOT NULL DEFAULT '',
	exit_code        integer,
	error            text NOT NULL DEFAULT '',
	reason           text NOT NULL DEFAULT '',
	dedup_id         text,
	rerun_of         text,
	-- bytea: a payload is whatever the trigger carried, NUL bytes included.
	payload          bytea NOT NULL DEFAULT '',
	retry            jsonb NOT NULL,
	cancel_requested boolean NOT NULL DEFAULT false,
	progress         integer NOT NULL DEFAULT 0,
	progress_message text NOT NULL DEFAULT '',
	-- A window whose not_after is not after its not_before is refused, also
	-- when not_before came from the database clock.
	CONSTRAINT runs_window CHECK (not_after IS NULL OR not_after > not_before)
);

-- One non-terminal run per (job, dedup id): concurrent triggers with one id
-- make one run, and the id is free again once that run is terminal.
CREATE UNIQUE INDEX runs_dedup ON runs (job, dedup_id)
	WHERE dedup_id IS NOT NULL AND status IN ('pending', 'running', 'retrying');

-- Claims read, per job, its due runs in start order; the index holds only
-- waiting runs, so a long history never slows a claim.
CREATE INDEX runs_claim ON runs (job, not_before, created_at, id)
	WHERE status IN ('pending', 'retrying');

-- Running runs per job (claim limits), per node, and cancel requests.
CREATE INDEX runs_running ON runs (job) WHERE status = 'running';
CREATE INDEX runs_node_running ON runs (node) WHERE status = 'running';
CREATE INDEX runs_cancel_requested ON runs (incarnation) WHERE cancel_requested;

-- Active runs per job (overlap).
CREATE INDEX runs_active ON runs (job) WHERE status IN ('pending', 'running', 'retrying');

-- Expiry looks only at waiting runs that have a deadline.
CREATE INDEX runs_expire ON runs (not_after)
	WHERE status IN ('pending', 'retrying') AND not_after IS NOT NULL;

-- Listings, newest first, and the last run of each job.
CREATE INDEX runs_job_created ON runs (job, created_at, id);
CREATE INDEX runs_created ON runs (created_at, id);
CREATE INDEX runs_status_created ON runs (status, created_at, id);

-- Pruning of finished runs.
CREATE INDEX runs_finished ON runs (finished_at) WHERE finished_at IS NOT NULL;

-- occurrences is the permanent occurrence key of schedule and once runs: a
-- row outlives its run, so a tick whose run has finished or been pruned can
-- never fire again. RunsPrune removes only rows of schedule ticks that are
-- older than the prune horizon and than the job's cursor, whose run is gone.
CREATE TABLE occurrences (
	job          text NOT NULL,
	scheduled_at timestamptz NOT NULL,
	run_id       text NOT NULL,
	kind         text NOT NULL,
	PRIMARY KEY (job, scheduled_at)
);

-- events is the history of each run, in insertion order.
CREATE TABLE events (
	id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	run_id      text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
	time        timestamptz NOT NULL,
	node        text NOT NULL DEFAULT '',
	attempt     integer NOT NULL DEFAULT 0,
	from_status text,
	to_status   text NOT NULL,
	reason      text NOT NULL DEFAULT '',
	message     text NOT NULL DEFAULT ''
);

CREATE INDEX events_run ON events (run_id, id);

-- attempts holds one row per execution of a run, with its bounded output.
CREATE TABLE attempts (
	run_id       text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
	number       integer NOT NULL,
	node         text NOT NULL,
	incarnation  text NOT NULL,
	started_at   timestamptz NOT NULL,
	finished_at  timestamptz,
	status       text NOT NULL,
	exit_code    integer,
	error        text NOT NULL DEFAULT '',
	reason       text NOT NULL DEFAULT '',
	-- bytea: a job may write any bytes.
	output       bytea NOT NULL DEFAULT '',
	output_bytes bigint NOT NULL DEFAULT 0,
	truncated    boolean NOT NULL DEFAULT false,
	PRIMARY KEY (run_id, number)
);

-- cursors is the durable schedule state of each cron job.
CREATE TABLE cursors (
	job             text PRIMARY KEY,
	last            timestamptz NOT NULL,
	paused          boolean NOT NULL DEFAULT false,
	skipped         bigint NOT NULL DEFAULT 0,
	last_skipped_at timestamptz,
	updated_at      timestamptz NOT NULL
);

-- nodes holds the current incarnation of each registered node.
CREATE TABLE nodes (
	id           text PRIMARY KEY,
	incarnation  text NOT NULL,
	host         text NOT NULL DEFAULT '',
	pid          integer NOT NULL DEFAULT 0,
	version      text NOT NULL DEFAULT '',
	started_at   timestamptz NOT NULL,
	heartbeat_at timestamptz NOT NULL,
	jobs         text[] NOT NULL DEFAULT '{}'
);
