-- tollgate checkpoint store, schema 13: a question is one row for good,
-- and what it asks never changes. Two holes of schema 7 a hand writer of
-- the file (the sqlite3 shell, a tool that found the file) could use to
-- carry an answer over to a call nobody answered:
--
--  - Schema 7's questions_resolution_final guarded the resolution's
--    columns only: an UPDATE of call_id, payload and digest pointed a
--    question bob approved at another call. Now a resolved question is
--    final in every column: its resolution and change_seq
--    (questions_resolution_final, replaced), and what a question asks
--    (its thread, id, seq, run, call, tool, kind, payload, digest,
--    creation and deadline) is fixed from its creation
--    on (questions_asked_fixed). The store writes a question twice:
--    qCreateQuestion's INSERT, and qResolveQuestion's UPDATE of status,
--    answer, answered_by, reason, resolved_at and change_seq of a pending
--    one; nothing else (no deadline is extended, no payload rewritten).
--
--  - Schema 7's questions_resolution_audited finds the event that records
--    a resolution by last_insert_rowid(), which an INSERT that names its
--    rowid in another table (messages, notify_deliveries, ...) sets to any
--    number: the seq of bob's old question_resolved event, say. The event
--    matches a question of the same thread and id only, so a question
--    deleted and created again pending (for another call) could be
--    resolved "by bob" with bob's earlier event. Now a question is never
--    deleted (questions_kept) and never created again: an INSERT of a
--    thread and id, or a seq, that is there inserts nothing
--    (questions_created_once, RAISE(IGNORE); so an INSERT OR REPLACE, which
--    deletes without firing a DELETE trigger unless the writer turned
--    recursive_triggers on, cannot take the old row out either). With the
--    row fixed, the only question_resolved events of a pending question's
--    thread and id are ones a writer added for it since, in the log.
--    Nothing in tollgate deletes a question (no retention or prune of
--    questions; a later one would have to keep this in mind), and the
--    store's own INSERT ... ON CONFLICT DO NOTHING inserted nothing for a
--    question that exists before, as it does now (RAISE(IGNORE) in a
--    BEFORE trigger skips the row: no row returned, as DO NOTHING).
--
-- Why not match the event's data (call_id, digest, decision) to the
-- question instead: the audit entry's contract (checkpoint.ResolutionEvent,
-- ResolutionEventIndex) is its question id, status and resolver, and
-- writers whose events carry no more are accepted (TestForgedResolutionRefused);
-- the decision is read from the answer by Go's JSON rules (keys matched
-- without regard to case), which SQL's json_extract does not follow, so a
-- trigger comparing them would refuse answers the store writes.
--
-- A question deleted and created again before this schema (a file
-- tampered with earlier) would still leave bob's old event to match, and
-- last_insert_rowid() is any number a writer names: so the event that
-- records a resolution must also be the log's newest (the store inserts it
-- just before the UPDATE, under the write lock, and events are numbered
-- upwards: schema 11), which no earlier event is. The learned rules'
-- three triggers (schema 11) matched their events the same way — a rule
-- deleted and created again could be approved with bob's old
-- rule_approved — and get the same requirement.
--
-- A generated seq reads -1 in a BEFORE INSERT trigger, so the seq test of
-- questions_created_once skips -1 (else one row a writer inserted with seq
-- -1 made every question the store creates be ignored). A pending
-- question changes only by its resolution (questions_pending_untouched):
-- its resolution columns and change_seq were free to write while pending,
-- and a change_seq at the top of the integers made nextChange overflow,
-- so that every later create and resolve failed. So a question's
-- change_seq, at its creation and its resolution, is also the next one
-- (max + 1, what the store's nextChange writes): no row can jump ahead.
--
-- Only triggers: no row is read or rewritten, so the migration costs the
-- same on any file (a few schema rows): 19 ms for Open to migrate a file
-- of 208 MB with 300,000 questions here, against 4 ms for the next Open.
-- A question's creation probes the two keys once more (the trigger's
-- EXISTS, before the insert's own probe). Rows deleted or repointed by
-- hand before this schema are as they were.

DROP TRIGGER questions_resolution_final;
CREATE TRIGGER questions_resolution_final BEFORE UPDATE ON questions
WHEN OLD.status <> 'pending' AND (NEW.status IS NOT OLD.status OR NEW.answer IS NOT OLD.answer
	OR NEW.answered_by IS NOT OLD.answered_by OR NEW.reason IS NOT OLD.reason OR NEW.resolved_at IS NOT OLD.resolved_at
	OR NEW.change_seq IS NOT OLD.change_seq)
BEGIN
	SELECT RAISE(ABORT, 'tollgate: a resolved question is final');
END;

CREATE TRIGGER questions_asked_fixed BEFORE UPDATE ON questions
WHEN NEW.seq IS NOT OLD.seq OR NEW.thread_id IS NOT OLD.thread_id OR NEW.id IS NOT OLD.id OR NEW.run_id IS NOT OLD.run_id
	OR NEW.call_id IS NOT OLD.call_id OR NEW.tool IS NOT OLD.tool OR NEW.kind IS NOT OLD.kind
	OR NEW.payload IS NOT OLD.payload OR NEW.digest IS NOT OLD.digest
	OR NEW.created_at IS NOT OLD.created_at OR NEW.deadline IS NOT OLD.deadline
BEGIN
	SELECT RAISE(ABORT, 'tollgate: what a question asks is fixed at its creation');
END;

CREATE TRIGGER questions_kept BEFORE DELETE ON questions
BEGIN
	SELECT RAISE(ABORT, 'tollgate: a question is never deleted');
END;

CREATE TRIGGER questions_created_once BEFORE INSERT ON questions
WHEN EXISTS (SELECT 1 FROM questions WHERE thread_id = NEW.thread_id AND id = NEW.id)
	OR NEW.seq <> -1 AND EXISTS (SELECT 1 FROM questions WHERE seq = NEW.seq)
BEGIN
	SELECT RAISE(IGNORE);
END;

CREATE TRIGGER questions_pending_untouched BEFORE UPDATE ON questions
WHEN OLD.status = 'pending' AND NEW.status = 'pending'
BEGIN
	SELECT RAISE(ABORT, 'tollgate: a pending question changes only by its resolution');
END;

CREATE TRIGGER questions_change_seq_next BEFORE INSERT ON questions
WHEN NEW.change_seq IS NOT (SELECT coalesce(max(change_seq), 0) + 1 FROM questions)
BEGIN
	SELECT RAISE(ABORT, 'tollgate: a question''s change number is the next one');
END;

CREATE TRIGGER questions_change_seq_next_resolved BEFORE UPDATE OF change_seq ON questions
WHEN NEW.change_seq IS NOT OLD.change_seq AND NEW.change_seq IS NOT (SELECT coalesce(max(change_seq), 0) + 1 FROM questions)
BEGIN
	SELECT RAISE(ABORT, 'tollgate: a question''s change number is the next one');
END;

DROP TRIGGER questions_resolution_audited;
CREATE TRIGGER questions_resolution_audited BEFORE UPDATE OF status ON questions
WHEN OLD.status = 'pending' AND NEW.status <> 'pending' AND NOT EXISTS (
	SELECT 1 FROM events e
	WHERE e.seq = last_insert_rowid() AND e.seq = (SELECT max(seq) FROM events)
		AND e.type = 'question_resolved' AND e.thread_id = NEW.thread_id
		AND json_valid(e.data)
		AND json_extract(e.data, '$.question_id') IS NEW.id
		AND json_extract(e.data, '$.status') IS NEW.status
		AND json_extract(e.data, '$.by') IS NEW.answered_by)
BEGIN
	SELECT RAISE(ABORT, 'tollgate: a question is resolved only with its question_resolved event, inserted just before');
END;

DROP TRIGGER learned_rules_created_audited;
CREATE TRIGGER learned_rules_created_audited BEFORE INSERT ON learned_rules
WHEN NOT EXISTS (
	SELECT 1 FROM events e
	WHERE e.seq = last_insert_rowid() AND e.seq = (SELECT max(seq) FROM events)
		AND e.type = 'rule_learned' AND e.thread_id = NEW.thread_id
		AND json_valid(e.data)
		AND json_extract(e.data, '$.rule_id') IS NEW.id
		AND json_extract(e.data, '$.by') IS NEW.created_by)
	OR NEW.approved_at IS NOT NULL OR NEW.revoked_at IS NOT NULL
BEGIN
	SELECT RAISE(ABORT, 'tollgate: a learned rule is created only with its rule_learned event, inserted just before, neither approved nor revoked');
END;

DROP TRIGGER learned_rules_change_audited;
CREATE TRIGGER learned_rules_change_audited BEFORE UPDATE ON learned_rules
WHEN OLD.approved_at IS NULL AND NEW.approved_at IS NOT NULL AND NOT EXISTS (
	SELECT 1 FROM events e
	WHERE e.seq = last_insert_rowid() AND e.seq = (SELECT max(seq) FROM events)
		AND e.type = 'rule_approved' AND json_valid(e.data)
		AND json_extract(e.data, '$.rule_id') IS NEW.id AND json_extract(e.data, '$.by') IS NEW.approved_by)
	OR OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL AND NOT EXISTS (
	SELECT 1 FROM events e
	WHERE e.seq = last_insert_rowid() AND e.seq = (SELECT max(seq) FROM events)
		AND e.type = 'rule_revoked' AND json_valid(e.data)
		AND json_extract(e.data, '$.rule_id') IS NEW.id AND json_extract(e.data, '$.by') IS NEW.revoked_by)
BEGIN
	SELECT RAISE(ABORT, 'tollgate: a learned rule is approved or revoked only with its event, inserted just before');
END;
