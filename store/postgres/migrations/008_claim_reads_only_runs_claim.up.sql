-- A claim reads each job's due runs (job = $1 AND status IN ('pending',
-- 'retrying') AND not_before <= now, in start order) from runs_claim. But
-- runs_due and runs_active had conditions that such a read implies too, so
-- the planner chose among the three by statistics, and statistics taken
-- while no run waited (a partial index vacuumed empty keeps its pages and
-- reads as holding no rows, however many it holds since) made the wrong
-- ones look as cheap:
--   runs_due, for each job, read every due run of every job: when 10,000
--   cron jobs fired ahead of one tick, a claim of 500 of them took 460 ms
--   instead of 40 (go run ./bench -only lag -stores postgres -lag-variants
--   all-at-once);
--   runs_active read all of the job's active runs and sorted them: a claim
--   of 2,000 runs of a backlog of 200,000 took 165 ms instead of 67.
-- Both get the clause job <> '', which holds for every run (a job has a
-- name) and which a read of one job (job = $1) does not imply, so such a
-- read can use neither; the reads meant for them state it: the first due
-- runs of all jobs (runs_due) and the lock of a job's active runs for its
-- overlap policy (runs_active). Nodes of an earlier version keep working
-- while the indexes are rebuilt and after, but those two reads of theirs
-- no longer use these indexes.
DROP INDEX runs_due;
CREATE INDEX runs_due ON runs (not_before, created_at, id, job)
	WHERE status IN ('pending', 'retrying') AND job <> '';
DROP INDEX runs_active;
CREATE INDEX runs_active ON runs (job)
	WHERE status IN ('pending', 'running', 'retrying') AND job <> '';
