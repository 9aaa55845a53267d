-- The reads of all jobs' first due runs (the heads of a claim, the next
-- due run) want runs_due: its order is theirs, and they stop after a few
-- hundred entries. Migration 008 left them able to use runs_active,
-- runs_claim and runs_status_created too, whose conditions they implied,
-- and with statistics taken while 100 runs waited for a later time, then
-- 200,000 due runs inserted, they read all 200,000 through runs_active and
-- runs_status_created and sorted them: 142 ms for the heads instead of
-- 3 ms, 94 ms for the next due run instead of 0.1 (EXPLAIN ANALYZE in a
-- test database). runs_due's condition is now on the status concatenated
-- with the empty string, which those reads state and no other read does:
-- they can use only runs_due among the indexes on waiting runs, and no
-- other read can use it (so migration 008's clause is no longer needed
-- here). Nodes of an earlier version keep working, but their reads of all
-- jobs no longer use this index.
DROP INDEX runs_due;
CREATE INDEX runs_due ON runs (not_before, created_at, id, job)
	WHERE (status || '') IN ('pending', 'retrying');
