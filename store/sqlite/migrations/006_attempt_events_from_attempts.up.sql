-- The claim's event and the end's event of an attempt are read from its
-- attempt row instead of being written as rows of events, as in
-- PostgreSQL since its migration 007. An attempt's row holds all they say
-- but two things: the status its claim took the run from (claimed_from)
-- and the node that ended it (end_node), which differs from the attempt's
-- node when the run was recovered. The end of an attempt then writes two
-- rows (the run's, the attempt's) instead of four.
--
-- An attempt row with claimed_from NULL (ended before this migration, or
-- claimed before migration 004) stands for no event: its events are rows
-- of events. Adding nullable columns rewrites nothing.
ALTER TABLE attempts ADD COLUMN claimed_from TEXT;
ALTER TABLE attempts ADD COLUMN end_node TEXT;
