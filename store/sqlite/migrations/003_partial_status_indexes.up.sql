-- The active runs of a job (overlap) and the running runs of a node are
-- found in indexes of those runs only: a finished run leaves them, so a run
-- that completes updates two fewer index entries, and the history never
-- grows them. (PostgreSQL has had these as partial indexes from the start.)
DROP INDEX runs_job_status;
CREATE INDEX runs_job_active ON runs (job, status) WHERE status IN ('pending', 'running', 'retrying');
DROP INDEX runs_node_status;
CREATE INDEX runs_node_running ON runs (node) WHERE status = 'running';
