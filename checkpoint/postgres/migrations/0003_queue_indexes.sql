-- tollgate checkpoint store, schema 3: indexes for the reviewers' queue,
-- so that a page of pending questions in any order, and of one tool,
-- reads about a page of index entries however many are pending, instead
-- of scanning and sorting them all. Oldest and newest first use
-- questions_pending (seq) of schema 1.
--
-- Partial, as questions_pending: they hold the queue, not the answered
-- questions that pile up, and a resolution leaves them. Statements say
-- status = 'pending' as a literal, so that every plan can use them. The
-- deadline order is two ranges of one index: with a deadline, and
-- without (deadline IS NULL, in seq order).

CREATE INDEX questions_pending_deadline ON questions (deadline, seq) WHERE status = 'pending';
CREATE INDEX questions_pending_tool ON questions (tool, seq) WHERE status = 'pending';
CREATE INDEX questions_pending_tool_deadline ON questions (tool, deadline, seq) WHERE status = 'pending';
