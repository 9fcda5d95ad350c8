-- tollgate checkpoint store, schema 7: a resolution of a question exists
-- only with its audit entry. A client that writes this file by hand (the
-- sqlite3 shell, a tool that found the file) cannot approve a call
-- without a trace: an UPDATE that moves a question from pending to
-- answered, timed out or aborted is refused unless the statement just
-- before it, on the same connection, inserted the question_resolved event
-- that records it — its thread, its question id, the status and who
-- resolved it (checkpoint.ResolutionEvent's data). The store's writer
-- does exactly that; "the statement just before" is last_insert_rowid(),
-- the rowid (seq) of the connection's last INSERT. A forger then has to
-- write the event too: the resolution is in the audit log, by the name it
-- claims. (SQLite has no deferred triggers and no transaction id to tie
-- the two rows by: this is the tie.)
--
-- And what the event records stays true: a resolved question is final (no
-- statement changes its status, answer, resolver, reason or time, nor
-- makes it pending again), and a question is created pending.
--
-- Rows written before this schema are as they were; only writes from now
-- on are checked. A later migration that must rewrite resolved questions
-- drops these triggers first and creates them again after.

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

CREATE TRIGGER questions_resolution_final BEFORE UPDATE OF status, answer, answered_by, reason, resolved_at ON questions
WHEN OLD.status <> 'pending' AND (NEW.status IS NOT OLD.status OR NEW.answer IS NOT OLD.answer
	OR NEW.answered_by IS NOT OLD.answered_by OR NEW.reason IS NOT OLD.reason OR NEW.resolved_at IS NOT OLD.resolved_at)
BEGIN
	SELECT RAISE(ABORT, 'tollgate: a resolved question is final');
END;

CREATE TRIGGER questions_created_pending BEFORE INSERT ON questions
WHEN NEW.status <> 'pending'
BEGIN
	SELECT RAISE(ABORT, 'tollgate: a question is created pending');
END;
