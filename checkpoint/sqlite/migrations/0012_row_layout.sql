-- tollgate checkpoint store, schema 12: fewer pages a commit writes.
-- Nothing changes in what is kept: the same columns, values and keys;
-- three tables are laid out again (each copied once, in this migration's
-- transaction: 2 s for 5,500 threads and 22,000 messages here). The pages
-- the old tables held stay in the file as free pages, which later writes
-- take first (VACUUM gives them back to the file system).
--
-- threads becomes a WITHOUT ROWID table: its rows were in a b-tree by a
-- hidden rowid and found by id through a second b-tree (the PRIMARY KEY's
-- index), so a thread's creation wrote four b-trees and every write of it
-- looked it up twice. Keyed by id, the table is its own index on id; its
-- rows are small (the messages column is NULL but for what schema 6 could
-- not split). messages is the last column again, as schema 5 made it (schema
-- 6 added two columns after it).
--
-- messages and tool_calls become rowid tables with their PRIMARY KEY as
-- an index. WITHOUT ROWID, their rows were index entries, and an index
-- entry keeps at most about 1,000 bytes on its page (of 4,096): a message
-- or a call's arguments of 1 KB or more went on to an overflow page of its
-- own, a page for every such row, freed and allocated again when the row
-- was rewritten (a call's result). A rowid table's page keeps rows up to
-- about 4,000 bytes: the rows of a commit share its last page.
-- A cycle of the benchmark (four messages of ~1.2 KB, a call with 1 KB of
-- arguments) wrote ~62 WAL frames (bench/README.md has the count now).
--
-- An insert into a rowid table sets last_insert_rowid(), which the
-- triggers of schemas 7 and 9 read: the store inserts messages and tool
-- calls before a batch's events, never between an event and the write
-- that the event records (commit.go), so that is unchanged.

CREATE TABLE threads_new (
	id            TEXT PRIMARY KEY,
	version       INTEGER NOT NULL,
	status        TEXT NOT NULL,
	run_id        TEXT NOT NULL,
	created_at    INTEGER NOT NULL,
	updated_at    INTEGER NOT NULL,
	message_count INTEGER NOT NULL DEFAULT 0,
	message_bytes INTEGER NOT NULL DEFAULT 0,
	messages      TEXT
) STRICT, WITHOUT ROWID;
INSERT INTO threads_new (id, version, status, run_id, created_at, updated_at, message_count, message_bytes, messages)
	SELECT id, version, status, run_id, created_at, updated_at, message_count, message_bytes, messages FROM threads;
DROP TABLE threads;
ALTER TABLE threads_new RENAME TO threads;
CREATE INDEX threads_by_created ON threads (created_at, id);
CREATE INDEX threads_by_status ON threads (status, created_at, id);

CREATE TABLE messages_new (
	thread_id TEXT NOT NULL,
	position  INTEGER NOT NULL,
	body      TEXT NOT NULL,
	PRIMARY KEY (thread_id, position)
) STRICT;
INSERT INTO messages_new (thread_id, position, body)
	SELECT thread_id, position, body FROM messages ORDER BY thread_id, position;
DROP TABLE messages;
ALTER TABLE messages_new RENAME TO messages;

CREATE TABLE tool_calls_new (
	thread_id  TEXT NOT NULL,
	run_id     TEXT NOT NULL,
	call_id    TEXT NOT NULL,
	tool       TEXT NOT NULL,
	args       TEXT,
	state      TEXT NOT NULL,
	result     TEXT,
	updated_at INTEGER NOT NULL,
	PRIMARY KEY (thread_id, run_id, call_id)
) STRICT;
INSERT INTO tool_calls_new (thread_id, run_id, call_id, tool, args, state, result, updated_at)
	SELECT thread_id, run_id, call_id, tool, args, state, result, updated_at FROM tool_calls ORDER BY thread_id, run_id, call_id;
DROP TABLE tool_calls;
ALTER TABLE tool_calls_new RENAME TO tool_calls;
