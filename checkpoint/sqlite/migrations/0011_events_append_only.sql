-- tollgate checkpoint store, schema 11: events are append-only, enforced,
-- and numbered without AUTOINCREMENT.
--
-- AUTOINCREMENT kept the highest seq ever given in sqlite_sequence, a row
-- every commit with an event rewrote: one more b-tree page, in the WAL,
-- per commit (a cycle's six commits each wrote it). Without it SQLite
-- numbers a row one above the highest seq in the table, which is the
-- same number as long as no row is ever taken out of the log and no row
-- is numbered by hand. Both are refused from now on, for every writer of
-- the file (the store, the sqlite3 shell, a tool that found the file):
--
--  - events_kept: no DELETE (so the highest seq never goes down, and a
--    number, once given, is never given again);
--  - events_fixed: no UPDATE (an audit entry says what it said; also an
--    UPSERT's update);
--  - events_numbered: no INSERT that names its seq (so no REPLACE of a
--    row, which would delete it without the DELETE trigger: SQLite fires
--    delete triggers for REPLACE only under recursive_triggers; no jump to
--    the largest rowid, where SQLite would pick random free numbers). In
--    a BEFORE INSERT trigger a generated seq reads -1, and so does a
--    given -1: the CHECK refuses that one (and every seq below 1).
--
-- docs/ARCHITECTURE.md ("Event numbers") has the argument in full; the
-- followers that depend on it are the server's event stream and the
-- notifier (notify_cursor), which read the log after the last seq they
-- saw. Deleting events (a retention policy) would have to keep the newest
-- row; nothing in tollgate deletes events.
--
-- The table is rebuilt (SQLite cannot drop AUTOINCREMENT in place); every
-- row keeps its seq. A log a hand took rows off the end of before this
-- schema (sqlite_sequence, or the notifier's cursor, above the highest
-- seq left) gets one events_missing row at the highest number given, so
-- that the next event is numbered above every number a follower may have
-- seen. The triggers of schemas 7 and 9 read events: they are dropped
-- before the rebuild (SQLite refuses to rename a table while a trigger
-- names a table that is missing) and created again, unchanged, after it.

DROP TRIGGER questions_resolution_audited;
DROP TRIGGER learned_rules_created_audited;
DROP TRIGGER learned_rules_change_audited;

CREATE TABLE events_new (
	seq       INTEGER PRIMARY KEY CONSTRAINT events_numbered_from_1 CHECK (seq > 0),
	thread_id TEXT NOT NULL,
	run_id    TEXT NOT NULL,
	type      TEXT NOT NULL,
	data      TEXT,
	at        INTEGER NOT NULL
) STRICT;
INSERT INTO events_new (seq, thread_id, run_id, type, data, at)
	SELECT seq, thread_id, run_id, type, data, at FROM events ORDER BY seq;
INSERT INTO events_new (seq, thread_id, run_id, type, data, at)
	SELECT given, '', '', 'events_missing', json_object('after', kept, 'through', given), strftime('%s', 'now') * 1000000
	FROM (SELECT coalesce((SELECT max(seq) FROM events), 0) AS kept,
		max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0),
			coalesce((SELECT seq FROM notify_cursor), 0)) AS given)
	WHERE given > kept;
DROP TABLE events;
ALTER TABLE events_new RENAME TO events;
CREATE INDEX events_by_thread ON events (thread_id, seq);

CREATE TRIGGER events_numbered BEFORE INSERT ON events
WHEN NEW.seq IS NOT -1
BEGIN
	SELECT RAISE(ABORT, 'tollgate: an event is numbered by the store: insert it without seq');
END;

CREATE TRIGGER events_kept BEFORE DELETE ON events
BEGIN
	SELECT RAISE(ABORT, 'tollgate: the audit log is append-only: an event is never deleted');
END;

CREATE TRIGGER events_fixed BEFORE UPDATE ON events
BEGIN
	SELECT RAISE(ABORT, 'tollgate: the audit log is append-only: an event is never changed');
END;

-- Schema 7's and schema 9's, as they were.
CREATE TRIGGER questions_resolution_audited BEFORE UPDATE OF status ON questions
WHEN OLD.status = 'pending' AND NEW.status <> 'pending' AND NOT EXISTS (
	SELECT 1 FROM events e
	WHERE e.seq = last_insert_rowid() AND e.type = 'question_resolved' AND e.thread_id = NEW.thread_id
		AND json_valid(e.data)
		AND json_extract(e.data, '$.question_id') IS NEW.id
		AND json_extract(e.data, '$.status') IS NEW.status
		AND json_extract(e.data, '$.by') IS NEW.answered_by)
BEGIN
	SELECT RAISE(ABORT, 'tollgate: a question is resolved only with its question_resolved event, inserted just before');
END;

CREATE TRIGGER learned_rules_created_audited BEFORE INSERT ON learned_rules
WHEN NOT EXISTS (
	SELECT 1 FROM events e
	WHERE e.seq = last_insert_rowid() AND e.type = 'rule_learned' AND e.thread_id = NEW.thread_id
		AND json_valid(e.data)
		AND json_extract(e.data, '$.rule_id') IS NEW.id
		AND json_extract(e.data, '$.by') IS NEW.created_by)
	OR NEW.approved_at IS NOT NULL OR NEW.revoked_at IS NOT NULL
BEGIN
	SELECT RAISE(ABORT, 'tollgate: a learned rule is created only with its rule_learned event, inserted just before, neither approved nor revoked');
END;

CREATE TRIGGER learned_rules_change_audited BEFORE UPDATE ON learned_rules
WHEN OLD.approved_at IS NULL AND NEW.approved_at IS NOT NULL AND NOT EXISTS (
	SELECT 1 FROM events e
	WHERE e.seq = last_insert_rowid() AND e.type = 'rule_approved' AND json_valid(e.data)
		AND json_extract(e.data, '$.rule_id') IS NEW.id AND json_extract(e.data, '$.by') IS NEW.approved_by)
	OR OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL AND NOT EXISTS (
	SELECT 1 FROM events e
	WHERE e.seq = last_insert_rowid() AND e.type = 'rule_revoked' AND json_valid(e.data)
		AND json_extract(e.data, '$.rule_id') IS NEW.id AND json_extract(e.data, '$.by') IS NEW.revoked_by)
BEGIN
	SELECT RAISE(ABORT, 'tollgate: a learned rule is approved or revoked only with its event, inserted just before');
END;
