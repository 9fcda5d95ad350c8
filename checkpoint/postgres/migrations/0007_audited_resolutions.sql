-- tollgate checkpoint store, schema 7: a resolution of a question exists
-- only with its audit entry, whoever writes the tables.
--
-- Why: a client that reaches the database with tollgate's role (a tool
-- that found a trust/peer socket, a leaked DSN) could approve a pending
-- call with one statement, UPDATE questions SET status = 'answered',
-- answered_by = 'alice', and nothing in the audit log said so. Two ways
-- to close that were weighed:
--
--  - a trigger that writes the event itself on every resolution: the
--    forged UPDATE then succeeds, and its entry can say only what the row
--    says (a trigger cannot tell tollgate's session from another's: any
--    marker tollgate set, a setting or an application_name, a forger can
--    set too), so it would read "answered by alice" like a real answer;
--  - a check that refuses a resolution whose transaction did not insert
--    the question_resolved event that records it: the forged UPDATE
--    fails. A forger who also inserts the event has written the audit
--    entry; the resolution is in the log, under the name it claims.
--
-- The second is what this schema does: tollgate writes its events anyway
-- (checkpoint.ResolutionEvent, in the resolution's transaction), so it
-- costs one index probe per resolution, at commit. A role that owns the
-- schema can still drop the trigger: that is DDL, not an UPDATE, and the
-- role must not be reachable by anything a tool runs (the README: a role
-- with a password, no trust or peer authentication).
--
-- The check is a constraint trigger, deferred to the commit, so that the
-- order of the statements in the transaction does not matter. "The same
-- transaction": an event's seq carries the number of the transaction that
-- inserted it (schema 5: (xid8 + base) * 2^16 + index), so the events of
-- this transaction are one range of seq in the thread's index. The event
-- must name the question (data.question_id), its new status and who
-- resolved it (data.by = answered_by).
--
-- And what the event records stays true: a resolved question is final (no
-- statement changes its status, answer, resolver, reason or time, nor
-- makes it pending again), and a question is created pending. Rows
-- written before this schema are as they were. A later migration that must
-- rewrite resolved questions disables the triggers (ALTER TABLE ...
-- DISABLE TRIGGER USER, as schema 2 does) for its statement.

CREATE FUNCTION questions_resolution_audited() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE
	lo bigint;
BEGIN
	SELECT (pg_current_xact_id()::text::bigint + base) * 65536 INTO lo FROM seq_base;
	IF NOT EXISTS (
		SELECT 1 FROM events e
		WHERE e.thread_id = NEW.thread_id AND e.seq >= lo AND e.seq < lo + 65536
			AND e.type = 'question_resolved'
			AND e.data->>'question_id' IS NOT DISTINCT FROM NEW.id
			AND e.data->>'status' IS NOT DISTINCT FROM NEW.status
			AND e.data->>'by' IS NOT DISTINCT FROM NEW.answered_by
	) THEN
		RAISE EXCEPTION 'tollgate: question % of thread % resolved as % by % with no question_resolved event in its transaction',
			quote_literal(NEW.id), quote_literal(NEW.thread_id), NEW.status, quote_literal(NEW.answered_by)
			USING ERRCODE = 'TGAUD', HINT = 'a resolution commits with the audit event that records it';
	END IF;
	RETURN NULL;
END $$;

CREATE CONSTRAINT TRIGGER questions_resolution_audited AFTER UPDATE ON questions
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
	WHEN (OLD.status = 'pending' AND NEW.status <> 'pending')
	EXECUTE FUNCTION questions_resolution_audited();

CREATE FUNCTION questions_resolution_final() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'INSERT' THEN
		RAISE EXCEPTION 'tollgate: question % of thread % created %: a question is created pending',
			quote_literal(NEW.id), quote_literal(NEW.thread_id), NEW.status USING ERRCODE = 'TGAUD';
	END IF;
	RAISE EXCEPTION 'tollgate: question % of thread % is %: a resolved question is final',
		quote_literal(OLD.id), quote_literal(OLD.thread_id), OLD.status USING ERRCODE = 'TGAUD';
END $$;

CREATE TRIGGER questions_resolution_final BEFORE UPDATE ON questions
	FOR EACH ROW
	WHEN (OLD.status <> 'pending' AND (NEW.status, NEW.answer::text, NEW.answered_by, NEW.reason, NEW.resolved_at)
		IS DISTINCT FROM (OLD.status, OLD.answer::text, OLD.answered_by, OLD.reason, OLD.resolved_at))
	EXECUTE FUNCTION questions_resolution_final();

CREATE TRIGGER questions_created_pending BEFORE INSERT ON questions
	FOR EACH ROW
	WHEN (NEW.status <> 'pending')
	EXECUTE FUNCTION questions_resolution_final();
