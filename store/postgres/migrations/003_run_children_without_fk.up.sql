-- events and attempts lose their foreign keys to runs. Each row inserted
-- into them ran a referential-integrity check that took a KEY SHARE lock on
-- its run: two per claim and one per completion of every run, about 40% of
-- the time of a claim of 34 runs. Their rows are written only in the
-- transactions that change their run, and RunsPrune deletes them with it.
ALTER TABLE events DROP CONSTRAINT events_run_id_fkey;
ALTER TABLE attempts DROP CONSTRAINT attempts_run_id_fkey;
