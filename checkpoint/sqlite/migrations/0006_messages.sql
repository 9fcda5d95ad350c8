-- tollgate checkpoint store, schema 6: a thread's messages are rows, one
-- per message, appended and never rewritten. Until now they were one JSON
-- array in threads.messages, written whole by every save: the thousandth
-- step of a thread wrote all thousand messages again.
--
-- A message keeps its bytes (body is the JSON value as written); position
-- counts from 0 in the thread. message_count and message_bytes (the sum of
-- the bodies' lengths) are kept on the thread row by the same statement
-- that moves its version on, so that an append knows its positions, and a
-- load the size of what it reads, without counting.
--
-- The arrays are split by the Go step of this migration
-- (splitMessagesMigration in messages.go), not by SQL: SQLite's json_each
-- gives a message back as SQLite renders it (spacing, escapes, numbers),
-- not as it was written. It moves every array into rows (JSON null is no
-- messages) and sets threads.messages to NULL, so that nothing is kept
-- twice. A value that is not a JSON array (an older store kept any JSON,
-- and even what is not JSON) stays in threads.messages, as it was:
-- LoadThread returns it, SaveThread replaces it, and an append is refused.

CREATE TABLE messages (
	thread_id TEXT NOT NULL,
	position  INTEGER NOT NULL,
	body      TEXT NOT NULL,
	PRIMARY KEY (thread_id, position)
) STRICT, WITHOUT ROWID;

ALTER TABLE threads ADD COLUMN message_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE threads ADD COLUMN message_bytes INTEGER NOT NULL DEFAULT 0;
