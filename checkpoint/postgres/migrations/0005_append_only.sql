-- tollgate checkpoint store, schema 5: the write path of a run costs what
-- it adds.
--
-- Messages are rows, appended, never rewritten: a thread's messages were
-- one json array in threads.messages, rewritten by every save (a step cost
-- what the thread held). Each element of the stored arrays becomes a row;
-- json_array_elements of a json (not jsonb) value returns each element's
-- own text, so a message keeps its bytes (only the spacing between
-- messages goes). A NULL or JSON null column is no message; a value that is
-- not an array (never written by the agent; a caller of SaveThread could)
-- becomes the thread's one message. message_count is where the next
-- append goes; message_bytes, the messages' length, lets a load size its
-- buffer once.

CREATE TABLE messages (
	thread_id text NOT NULL,
	position  integer NOT NULL,
	body      json NOT NULL,
	PRIMARY KEY (thread_id, position)
);

ALTER TABLE threads ADD COLUMN message_count integer NOT NULL DEFAULT 0;
ALTER TABLE threads ADD COLUMN message_bytes bigint NOT NULL DEFAULT 0;

INSERT INTO messages (thread_id, position, body)
SELECT t.id, e.n - 1, e.body
FROM threads t, json_array_elements(CASE WHEN json_typeof(t.messages) = 'array' THEN t.messages ELSE '[]' END) WITH ORDINALITY AS e(body, n);
INSERT INTO messages (thread_id, position, body)
SELECT id, 0, messages FROM threads WHERE json_typeof(messages) NOT IN ('array', 'null');
-- NULLed first, so that the old arrays' TOAST goes with the old row
-- versions; then dropped.
UPDATE threads SET messages = NULL,
	message_count = (SELECT count(*) FROM messages m WHERE m.thread_id = threads.id),
	message_bytes = coalesce((SELECT sum(octet_length(body::text)) FROM messages m WHERE m.thread_id = threads.id), 0)
WHERE messages IS NOT NULL;
ALTER TABLE threads DROP COLUMN messages;

-- A batch's compare-and-set that loses raises, so that the whole batch,
-- sent as one pipeline in one implicit transaction, is rolled back by the
-- server without a round trip to decide it. rows is the number of rows the
-- write changed (zero: it lost); what names the write.
CREATE FUNCTION cas(rows bigint, what text) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
	IF rows = 0 THEN
		RAISE EXCEPTION 'tollgate: % lost its compare-and-set', what USING ERRCODE = 'TGCAS';
	END IF;
	RETURN rows;
END $$;

-- Events and question changes are numbered without a lock held to commit
-- (schema 1's events_order and questions_order serialized every commit
-- that carried an event or wrote a question, so that none shared a WAL
-- flush). A row's number is
--
--	(writing transaction's xid8 + base) * 2^16 + its index in the batch
--
-- so number order is transaction id order, and readers return only the
-- numbers below the oldest transaction still running (the store's
-- events.go says why that never skips one). base puts the first new number
-- above every old one (and keeps the numbers small: they count
-- transactions since now); Open raises it should the store's numbers ever
-- be ahead of the cluster's transaction ids (a dump restored into a new
-- cluster). The statements number the rows: events.seq; questions.seq
-- (creation order) and questions.change_seq (every write, for pollers).
DROP TRIGGER events_order ON events;
DROP FUNCTION events_order();
DROP SEQUENCE events_seq;
DROP TRIGGER questions_order ON questions;
DROP FUNCTION questions_order();
DROP SEQUENCE questions_seq;
DROP SEQUENCE questions_change_seq;
CREATE TABLE seq_base (base bigint NOT NULL);
INSERT INTO seq_base (base)
SELECT greatest(coalesce((SELECT max(seq) FROM events), 0), coalesce((SELECT max(seq) FROM questions), 0),
		coalesce((SELECT max(change_seq) FROM questions), 0)) / 65536
	+ 1 - pg_snapshot_xmax(pg_current_snapshot())::text::bigint;

-- Notifications leave the writing transaction too: PostgreSQL serializes
-- the commits of the transactions that NOTIFY (a lock held across the
-- commit's WAL flush, so that the queue is in commit order). The store
-- sends them, in the same round trip, in a transaction of their own right
-- after the commit (which writes no WAL of its own to wait for): the
-- questions_notify trigger goes.
DROP TRIGGER questions_notify ON questions;
DROP FUNCTION questions_notify();
