-- tollgate checkpoint store, schema 4: indexes for the reviewers' queue,
-- so that a page of pending questions in any order, and of one tool,
-- reads about a page of index entries however many are pending, instead
-- of scanning and sorting them all. Oldest and newest first use
-- questions_by_status (status, seq) of schema 1.
--
-- The deadline order is two ranges of one index, with a deadline (SQLite
-- sorts NULL first, so it is not one range) and without (deadline IS
-- NULL, in seq order).
--
-- Not partial indexes on the pending questions, although they would stay
-- the size of the queue: without ANALYZE statistics SQLite's planner takes
-- an equality on status for very selective and prefers questions_by_status
-- and a sort of every pending question to an index without the status
-- column.

CREATE INDEX questions_by_status_deadline ON questions (status, deadline, seq);
CREATE INDEX questions_by_status_tool ON questions (status, tool, seq);
CREATE INDEX questions_by_status_tool_deadline ON questions (status, tool, deadline, seq);
