-- node_jobs holds each node's job list, in parts of a few KiB (the rows of
-- a node in the order of part). In the node's row, a list of 100,000 names
-- made every write of that row, each heartbeat's included, build a record
-- of 1.5 MiB, and the allocator under SQLite kept the room it took.
CREATE TABLE node_jobs (
	node_id   TEXT NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
	part      INTEGER NOT NULL,
	jobs_json TEXT NOT NULL,
	PRIMARY KEY (node_id, part)
) STRICT;

INSERT INTO node_jobs (node_id, part, jobs_json) SELECT id, 0, jobs_json FROM nodes WHERE jobs_json <> '[]';

ALTER TABLE nodes DROP COLUMN jobs_json;
