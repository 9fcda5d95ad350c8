-- tollgate checkpoint store, schema 12: the audit log is append-only for
-- every client of the database, as SQLite's is (its schema 11).
--
-- The resolution and learned-rule triggers (schemas 7, 10, 11) tie a
-- change to the event that records it; nothing kept the event itself
-- from being rewritten or deleted afterwards by a client with tollgate's
-- role (a leaked DSN, a trust or peer socket a tool found): UPDATE events
-- SET data = ... made a reviewer's answer say something else, DELETE or
-- TRUNCATE took it out of the log. Both are refused now. Events are
-- numbered from transaction ids (schema 5), not max(seq) + 1, so numbers
-- were never at risk; what an entry says is.
--
-- Nothing in tollgate deletes events. Dropping the trigger is DDL, which
-- the role's owner can do: as for the other triggers, the role must not be
-- reachable by anything a tool runs.

CREATE FUNCTION events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'tollgate: the audit log is append-only: an event is never %', CASE TG_OP WHEN 'UPDATE' THEN 'changed' ELSE 'deleted' END
		USING ERRCODE = 'TGAUD';
END $$;

CREATE TRIGGER events_fixed BEFORE UPDATE OR DELETE ON events
	FOR EACH ROW EXECUTE FUNCTION events_append_only();

CREATE TRIGGER events_kept BEFORE TRUNCATE ON events
	FOR EACH STATEMENT EXECUTE FUNCTION events_append_only();
