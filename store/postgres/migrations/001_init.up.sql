-- The initial schema of the PostgreSQL store. Times are timestamptz
-- (microseconds); NULL stands for a zero time. The tables and their
-- guarantees are those of the SQLite store.
--
-- A claim and a completion each rewrite their run's row, and neither is a
-- HOT update: both change the status, which the conditions of the partial
-- indexes of runs read. PostgreSQL then adds an entry for the new version
-- of the row to every index of runs whose condition it meets, whether or
-- not that index's columns changed. So runs has only the indexes that its
-- reads need, most of them partial, and what never changes once a run is
-- made (its id, job and creation time, which listings read) is kept apart
-- in run_order.

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
	-- claimed_from is, while the run is running, the status its claim took
	-- it from. A claim writes only the run's row: the attempt's row, which
	-- stands for the claim's event and the end's, is written when the
	-- attempt ends, in the transaction that ends it; until then the run's
	-- row stands for them. Read only while the run is running.
	claimed_from     text,
	-- actor is who made the run through the control API ("api:TOKEN",
	-- "socket:USER"), '' for a run the engine made; cancelled_by is who
	-- asked to cancel it, '' when no one did.
	actor            text NOT NULL DEFAULT '',
	cancelled_by     text NOT NULL DEFAULT '',
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

-- The first due runs of all jobs in one start order: the heads of a claim
-- and the next due run, which stop after a few hundred entries. With many
-- jobs, a probe per job would cost more than the claim. The job is the last
-- key, so that the jobs of the first due runs are read from the index
-- alone. The condition is on the status concatenated with the empty
-- string, which those reads state and no other read does: they can use no
-- other index on waiting runs, and no other read can use this one, whatever
-- the statistics say (with statistics taken while few runs waited, the
-- planner read every waiting run through the other indexes and sorted
-- them).
CREATE INDEX runs_due ON runs (not_before, created_at, id, job)
	WHERE (status || '') IN ('pending', 'retrying');

-- Running runs: per job (claim limits), and of a node, at its start, at
-- its stop and when it is recovered (all running runs of the cluster are at
-- most the nodes' concurrency, so a node's are read from them).
CREATE INDEX runs_running ON runs (job) WHERE status = 'running';

-- Cancel requests, per incarnation.
CREATE INDEX runs_cancel_requested ON runs (incarnation) WHERE cancel_requested;

-- Active runs per job, locked for its overlap policy. The clause job <> ''
-- holds for every run (a job has a name), and the lock states it, but a
-- read of one job's due runs (job = $1) does not imply it: a claim reads
-- runs_claim, never this index, whatever the statistics say (taken while no
-- run waited, they made this index look as cheap, and a claim then read and
-- sorted all of the job's active runs).
CREATE INDEX runs_active ON runs (job)
	WHERE status IN ('pending', 'running', 'retrying') AND job <> '';

-- Expiry looks only at waiting runs that have a deadline.
CREATE INDEX runs_expire ON runs (not_after)
	WHERE status IN ('pending', 'retrying') AND not_after IS NOT NULL;

-- Listings by status, newest first, of the statuses a listing could not
-- find among the rest: running runs are few (runs_running), and completed
-- runs are most of the history (run_order, newest first, filtered). So a
-- claim and a completion add no entry to it.
CREATE INDEX runs_status_created ON runs (status, created_at, id)
	WHERE status NOT IN ('running', 'completed');

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

-- events is the history of each run, in insertion order, but for the
-- claim's and the end's event of each attempt, which its row of attempts
-- stands for.
--
-- Neither events nor attempts has a foreign key to runs: each row inserted
-- would run a referential-integrity check that takes a KEY SHARE lock on
-- its run, on the path of every claim and completion. Their rows are
-- written only in the transactions that change their run, and RunsPrune
-- deletes them with it. actor is who asked for the change through the
-- control API, '' for a change the engine made.
CREATE TABLE events (
	id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	run_id      text NOT NULL,
	time        timestamptz NOT NULL,
	node        text NOT NULL DEFAULT '',
	attempt     integer NOT NULL DEFAULT 0,
	from_status text,
	to_status   text NOT NULL,
	reason      text NOT NULL DEFAULT '',
	message     text NOT NULL DEFAULT '',
	actor       text NOT NULL DEFAULT ''
);

CREATE INDEX events_run ON events (run_id, id);

-- attempts holds one row per ended attempt of a run, with its bounded
-- output, written when the attempt ends. The row also stands for two
-- events: the claim's, from the status claimed_from at started_at by node,
-- and the end's, at finished_at by end_node, which differs from node when
-- another node recovered the run.
CREATE TABLE attempts (
	run_id       text NOT NULL,
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
	claimed_from text,
	end_node     text,
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

-- job_results holds, for each job a run of which ever ended completed or
-- dead_letter, when the newest such run finished: written in the
-- transaction that ends the run, and kept when RunsPrune deletes the runs.
-- Each node reads it at start and is told of later changes by the
-- notifications that those transactions send (store.ResultFeed).
CREATE TABLE job_results (
	job             text PRIMARY KEY,
	last_success_at timestamptz,
	last_failure_at timestamptz
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

-- run_order holds each run's id, job and creation time, which never
-- change. Listings read runs newest first, of all jobs or of one, and each
-- job's newest run, from it (then each run by its id) rather than from two
-- indexes on runs, which every claim and completion would add entries to.
-- A row is written once, when its run is made, and its indexes are never
-- touched again.
CREATE TABLE run_order (
	id         text PRIMARY KEY,
	job        text NOT NULL,
	created_at timestamptz NOT NULL
);

CREATE INDEX run_order_created ON run_order (created_at, id);
CREATE INDEX run_order_job_created ON run_order (job, created_at, id);

-- Triggers keep run_order whole, whoever writes runs: one statement per
-- statement that inserts, deletes or truncates runs, over the rows it
-- inserted or deleted, finding run_order by the search_path this migration
-- ran with.
CREATE FUNCTION run_order_insert() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
	INSERT INTO run_order (id, job, created_at) SELECT id, job, created_at FROM made;
	RETURN NULL;
END
$$;

CREATE FUNCTION run_order_delete() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
	DELETE FROM run_order WHERE id = ANY(ARRAY(SELECT id FROM gone));
	RETURN NULL;
END
$$;

CREATE FUNCTION run_order_truncate() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
	TRUNCATE run_order;
	RETURN NULL;
END
$$;

CREATE TRIGGER runs_order_insert AFTER INSERT ON runs
	REFERENCING NEW TABLE AS made FOR EACH STATEMENT EXECUTE FUNCTION run_order_insert();
CREATE TRIGGER runs_order_delete AFTER DELETE ON runs
	REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION run_order_delete();
CREATE TRIGGER runs_order_truncate AFTER TRUNCATE ON runs
	FOR EACH STATEMENT EXECUTE FUNCTION run_order_truncate();

-- notifications is the outbox of notifications, one row per event and
-- notifier, written in the transaction of the change that causes it. A
-- pending row is due at next_attempt_at once its lease (of the node
-- delivering it) has run out; nodes claim due rows with FOR UPDATE SKIP
-- LOCKED. Delivered and failed rows stay for `schedulerd notifications`
-- until they are pruned with the history.
CREATE TABLE notifications (
	id                text PRIMARY KEY,
	notifier          text NOT NULL,
	job               text NOT NULL,
	event             text NOT NULL,
	run_id            text NOT NULL DEFAULT '',
	payload           bytea NOT NULL,
	state             text NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
	attempts          integer NOT NULL DEFAULT 0,
	next_attempt_at   timestamptz NOT NULL,
	lease_node        text NOT NULL DEFAULT '',
	lease_incarnation text NOT NULL DEFAULT '',
	lease_until       timestamptz,
	last_error        text NOT NULL DEFAULT '',
	created_at        timestamptz NOT NULL,
	delivered_at      timestamptz
);

-- Deliveries read only the pending rows; listings and pruning go by age.
CREATE INDEX notifications_due ON notifications (next_attempt_at) WHERE state = 'pending';
CREATE INDEX notifications_created ON notifications (created_at, id);

-- job_notify is each job's notification state: since when it fails or is
-- overdue, and which notifiers were told of that (told: notifier name to
-- time), so that a job failing every minute notifies once, and once more
-- when it recovers. Its row is locked by the transaction that decides.
CREATE TABLE job_notify (
	job           text PRIMARY KEY,
	failing_since timestamptz,
	overdue_since timestamptz,
	told          jsonb NOT NULL DEFAULT '{}'
);

-- job_expect is each job's expect_success_within as the cluster keeps it:
-- written by the nodes that declare the job with the key (notify: a JSON
-- array of notifier names), with since, when the cluster first expected
-- it (by the database clock), kept while the row lives. A node whose
-- config no longer declares the job keeps the row (the job is retired but
-- still expected); `schedulerd forget` deletes it.
CREATE TABLE job_expect (
	job       text PRIMARY KEY,
	within_us bigint NOT NULL,
	notify    jsonb NOT NULL DEFAULT '[]',
	since     timestamptz NOT NULL
);
