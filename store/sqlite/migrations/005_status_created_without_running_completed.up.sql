-- runs_status_created keeps only the statuses a listing could not find
-- among the rest, as in PostgreSQL since its migration 004: running runs
-- are few (runs_node_running holds them), and completed runs are most of
-- the history (runs_created, newest first, filtered). A claim then
-- deletes its run's entry instead of moving it, and a completion leaves
-- the index alone: three of the twelve index changes of a run's claim and
-- completion.
DROP INDEX runs_status_created;
CREATE INDEX runs_status_created ON runs (status, created_at, id)
	WHERE status NOT IN ('running', 'completed');
