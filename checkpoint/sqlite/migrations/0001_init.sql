-- tollgate checkpoint store, schema 1.
-- Times are Unix nanoseconds (UTC); NULL means "none". JSON is TEXT, byte
-- for byte as the caller gave it.

-- The marker that tells a tollgate database from any other SQLite file.
PRAGMA application_id = 1416588396; -- 0x546F6C6C, "Toll"

CREATE TABLE threads (
	id         TEXT PRIMARY KEY,
	version    INTEGER NOT NULL,
	status     TEXT NOT NULL,
	run_id     TEXT NOT NULL,
	messages   TEXT,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL
) STRICT;

CREATE TABLE tool_calls (
	thread_id  TEXT NOT NULL,
	run_id     TEXT NOT NULL,
	call_id    TEXT NOT NULL,
	tool       TEXT NOT NULL,
	args       TEXT,
	state      TEXT NOT NULL,
	result     TEXT,
	updated_at INTEGER NOT NULL,
	PRIMARY KEY (thread_id, run_id, call_id)
) STRICT, WITHOUT ROWID;

-- seq orders questions by creation (the list cursor). change_seq is bumped
-- on every write (creation, resolution) so that a poller in another
-- process finds what changed since its high-water mark; with one writer at
-- a time, commit order is change_seq order.
CREATE TABLE questions (
	seq         INTEGER PRIMARY KEY,
	thread_id   TEXT NOT NULL,
	id          TEXT NOT NULL,
	run_id      TEXT NOT NULL,
	call_id     TEXT NOT NULL,
	kind        TEXT NOT NULL,
	payload     TEXT,
	digest      TEXT NOT NULL,
	status      TEXT NOT NULL,
	answer      TEXT,
	answered_by TEXT NOT NULL,
	reason      TEXT NOT NULL,
	created_at  INTEGER NOT NULL,
	deadline    INTEGER,
	resolved_at INTEGER,
	change_seq  INTEGER NOT NULL,
	UNIQUE (thread_id, id)
) STRICT;
CREATE INDEX questions_by_status ON questions (status, seq);
CREATE INDEX questions_by_change ON questions (change_seq);

-- AUTOINCREMENT: a sequence number is never reused, even if old events are
-- pruned some day.
CREATE TABLE events (
	seq       INTEGER PRIMARY KEY AUTOINCREMENT,
	thread_id TEXT NOT NULL,
	run_id    TEXT NOT NULL,
	type      TEXT NOT NULL,
	data      TEXT,
	at        INTEGER NOT NULL
) STRICT;
CREATE INDEX events_by_thread ON events (thread_id, seq);
