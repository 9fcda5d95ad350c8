-- tollgate checkpoint store, schema 3: questions name their tool in a
-- column of their own, so that a reviewers' queue can filter on it with an
-- index instead of parsing every payload.
--
-- Questions written before this schema get the payload's "tool_name" when
-- it is a string (the agent's payloads carried the tool there), '' when it
-- is not. json_valid first: a payload the store kept although it is not
-- JSON must not make json_extract fail, and with it every Open.

ALTER TABLE questions ADD COLUMN tool TEXT NOT NULL DEFAULT '';

UPDATE questions SET tool = json_extract(payload, '$.tool_name')
WHERE json_valid(payload) AND json_type(payload, '$.tool_name') = 'text';
