-- tollgate checkpoint store, schema 2: questions name their tool in a
-- column of their own, so that a reviewers' queue can filter on it with an
-- index instead of parsing every payload.
--
-- Questions written before this schema get the payload's "tool_name" when
-- it is a string (the agent's payloads carried the tool there), '' when it
-- is not. The backfill is no change of the questions: with the triggers
-- off it takes no change_seq (pollers would re-read every question) and
-- sends no notification. ALTER TABLE holds the table's exclusive lock to
-- commit, so no other writer misses the triggers meanwhile.

ALTER TABLE questions ADD COLUMN tool text NOT NULL DEFAULT '';

ALTER TABLE questions DISABLE TRIGGER USER;
UPDATE questions SET tool = payload->>'tool_name'
WHERE json_typeof(payload->'tool_name') = 'string';
ALTER TABLE questions ENABLE TRIGGER USER;
