-- Claims and the next-due probe read the waiting runs of every job in one
-- start order: with many jobs (10,000 cron jobs due at one second) a probe
-- per job cost more than the claim. The job is the last key, so that the
-- jobs of the first due runs are read from the index alone.
CREATE INDEX runs_due ON runs (not_before, created_at, id, job)
	WHERE status IN ('pending', 'retrying');
