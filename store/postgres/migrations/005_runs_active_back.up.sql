-- runs_active comes back (migration 004 dropped it, with the lock of a
-- job's active runs rewritten to read runs_claim and runs_running). Without
-- it, 10,000 cron jobs due at one second started their runs at p99
-- 1.3-1.9 s instead of 0.73-0.77 s (go run ./bench -only lag -stores
-- postgres -lag-variants all-at-once), while the burn-down's rate did not
-- move. IF NOT EXISTS: the index is the one of 001.
CREATE INDEX IF NOT EXISTS runs_active ON runs (job) WHERE status IN ('pending', 'running', 'retrying');
