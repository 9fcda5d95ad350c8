-- tollgate checkpoint store, schema 13: what a question asks never
-- changes, and a resolved question is final in every column, as SQLite's
-- schema 13 makes them.
--
-- Schema 7's questions_resolution_final guarded the resolution's columns
-- only (status, answer, answered_by, reason, resolved_at): a client with
-- tollgate's role (a leaked DSN, a trust or peer socket a tool found)
-- could UPDATE call_id, payload and digest of a question bob approved and
-- so point his approval at a call he never saw. Now what a question asks
-- (its thread, id, seq, run, call, tool, kind, payload, digest, creation
-- and deadline) is fixed from its creation on (questions_asked_fixed), and
-- a resolved question's change_seq joins its resolution's columns in
-- questions_resolution_final. The store writes a question twice:
-- createQuestion's INSERT, and resolveQuestion's UPDATE of status,
-- answer, answered_by, reason, resolved_at and change_seq of a pending
-- one; nothing else (no deadline is extended, no payload rewritten).
--
-- SQLite's second hole (a resolution matched to an earlier event through
-- last_insert_rowid(), after the question was deleted and created again)
-- is not one here: the event must be inserted in the resolution's own
-- transaction (schema 7's seq range), so an old one never counts. But a
-- DELETE and an INSERT of the same id in one transaction did what the
-- UPDATE above may not (a pending question pointed at another call, which
-- bob then answers), and a DELETE or TRUNCATE took a resolved question
-- out (its id free to be asked again about another call): a question is
-- never deleted now (questions_kept), as events are not (schema 12).
-- Nothing in tollgate deletes a question.
--
-- Only triggers: no row is read or rewritten, so the migration costs the
-- same on any database (it takes the table's lock for the DDL, briefly).

CREATE FUNCTION questions_asked_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'tollgate: question % of thread %: what a question asks is fixed at its creation',
		quote_literal(OLD.id), quote_literal(OLD.thread_id) USING ERRCODE = 'TGAUD';
END $$;

CREATE TRIGGER questions_asked_fixed BEFORE UPDATE ON questions
	FOR EACH ROW
	WHEN ((NEW.seq, NEW.thread_id, NEW.id, NEW.run_id, NEW.call_id, NEW.tool, NEW.kind, NEW.payload::text, NEW.digest,
		NEW.created_at, NEW.deadline)
		IS DISTINCT FROM (OLD.seq, OLD.thread_id, OLD.id, OLD.run_id, OLD.call_id, OLD.tool, OLD.kind, OLD.payload::text, OLD.digest,
		OLD.created_at, OLD.deadline))
	EXECUTE FUNCTION questions_asked_fixed();

DROP TRIGGER questions_resolution_final ON questions;
CREATE TRIGGER questions_resolution_final BEFORE UPDATE ON questions
	FOR EACH ROW
	WHEN (OLD.status <> 'pending' AND (NEW.status, NEW.answer::text, NEW.answered_by, NEW.reason, NEW.resolved_at, NEW.change_seq)
		IS DISTINCT FROM (OLD.status, OLD.answer::text, OLD.answered_by, OLD.reason, OLD.resolved_at, OLD.change_seq))
	EXECUTE FUNCTION questions_resolution_final();

CREATE FUNCTION questions_kept() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'tollgate: a question is never deleted' USING ERRCODE = 'TGAUD';
END $$;

CREATE TRIGGER questions_kept BEFORE DELETE ON questions
	FOR EACH ROW EXECUTE FUNCTION questions_kept();

CREATE TRIGGER questions_kept_whole BEFORE TRUNCATE ON questions
	FOR EACH STATEMENT EXECUTE FUNCTION questions_kept();
