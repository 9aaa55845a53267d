-- Listings read runs newest first, of all jobs or of one, from an
-- insert-only table of each run's id, job and creation time, instead of two
-- indexes on runs. A claim and a completion change a run's status, which the
-- conditions of runs' partial indexes read, so neither is a HOT update: each
-- adds the run's new row version to every index of runs whose condition it
-- meets, and runs_created and runs_job_created, which had none, took four of
-- the nine index entries that a run's claim and completion wrote. Without
-- them the 1-node burn-down of 200,000 runs went from 58-64 to 42-51 µs of
-- server CPU per run and from about 23,000 to 27,000-31,000 runs per second. A
-- run's id, job and creation time never change, so run_order is written
-- once per run, when it is made, and its indexes are never touched again.
--
-- Triggers keep run_order whole, whoever writes runs (nodes of an earlier
-- version during a rolling upgrade among them): one statement per statement
-- that inserts, deletes or truncates runs, over the rows it inserted or deleted,
-- finding run_order by the search_path this migration ran with. They
-- are created before run_order is filled: their lock on runs waits for the
-- transactions that are writing runs and holds new writes back until this
-- migration commits, so the fill reads every run and no insert is missed.
CREATE TABLE run_order (
	id         text PRIMARY KEY,
	job        text NOT NULL,
	created_at timestamptz NOT NULL
);

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

INSERT INTO run_order (id, job, created_at) SELECT id, job, created_at FROM runs;
CREATE INDEX run_order_created ON run_order (created_at, id);
CREATE INDEX run_order_job_created ON run_order (job, created_at, id);
ANALYZE run_order;

DROP INDEX runs_created;
DROP INDEX runs_job_created;
