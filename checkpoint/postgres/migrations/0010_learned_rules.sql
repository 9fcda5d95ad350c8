-- tollgate checkpoint store, schema 10: rules learned from reviewers'
-- answers ("approve, and allow calls like this", package policy/learn).
--
-- A learned rule lets the policy allow calls it would have asked about,
-- so it is bound and audited as an answer is (schema 7): a row is
-- created only in a transaction that inserted its rule_learned event,
-- and approved by a second reviewer or revoked only in one that inserted
-- the rule_approved or rule_revoked event (constraint triggers deferred to
-- the commit, the event found by the transaction's range of seq, as for
-- resolutions); what was learned (tool, spec, scope, source, author,
-- times) never changes; an approval and a revocation are made once; and a
-- rule is revoked, never deleted, so the audit log can always be read
-- against it.

CREATE TABLE learned_rules (
	seq           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id            text COLLATE "C" NOT NULL UNIQUE,
	tool          text COLLATE "C" NOT NULL,
	spec          json NOT NULL,
	scope         text NOT NULL,
	scope_key     text COLLATE "C" NOT NULL,
	thread_id     text COLLATE "C" NOT NULL,
	question_id   text NOT NULL,
	digest        text NOT NULL,
	created_by    text NOT NULL,
	created_at    timestamptz NOT NULL,
	expires_at    timestamptz,
	approved_by   text NOT NULL DEFAULT '',
	approved_at   timestamptz,
	revoked_by    text NOT NULL DEFAULT '',
	revoked_at    timestamptz,
	revoke_reason text NOT NULL DEFAULT ''
);

CREATE INDEX learned_rules_by_tool ON learned_rules (tool, seq);

CREATE FUNCTION learned_rules_audited() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE
	lo bigint;
	typ text;
	who text;
BEGIN
	IF TG_OP = 'INSERT' THEN
		typ := 'rule_learned';
		who := NEW.created_by;
	ELSIF OLD.approved_at IS NULL AND NEW.approved_at IS NOT NULL THEN
		typ := 'rule_approved';
		who := NEW.approved_by;
	ELSE
		typ := 'rule_revoked';
		who := NEW.revoked_by;
	END IF;
	SELECT (pg_current_xact_id()::text::bigint + base) * 65536 INTO lo FROM seq_base;
	IF NOT EXISTS (
		SELECT 1 FROM events e
		WHERE e.thread_id = NEW.thread_id AND e.seq >= lo AND e.seq < lo + 65536
			AND e.type = typ
			AND e.data->>'rule_id' IS NOT DISTINCT FROM NEW.id
			AND e.data->>'by' IS NOT DISTINCT FROM who
	) THEN
		RAISE EXCEPTION 'tollgate: learned rule % written (%) by % with no % event in its transaction',
			quote_literal(NEW.id), TG_OP, quote_literal(who), typ
			USING ERRCODE = 'TGAUD', HINT = 'a learned rule is created, approved and revoked with the audit event that records it';
	END IF;
	RETURN NULL;
END $$;

CREATE CONSTRAINT TRIGGER learned_rules_created_audited AFTER INSERT ON learned_rules
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
	EXECUTE FUNCTION learned_rules_audited();

CREATE CONSTRAINT TRIGGER learned_rules_change_audited AFTER UPDATE ON learned_rules
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
	WHEN (OLD.approved_at IS NULL AND NEW.approved_at IS NOT NULL OR OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL)
	EXECUTE FUNCTION learned_rules_audited();

CREATE FUNCTION learned_rules_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'DELETE' THEN
		RAISE EXCEPTION 'tollgate: learned rule % is revoked, never deleted', quote_literal(OLD.id) USING ERRCODE = 'TGAUD';
	ELSIF TG_OP = 'INSERT' THEN
		RAISE EXCEPTION 'tollgate: learned rule % is created neither approved nor revoked', quote_literal(NEW.id) USING ERRCODE = 'TGAUD';
	END IF;
	RAISE EXCEPTION 'tollgate: what learned rule % allows does not change; it is approved once and revoked once',
		quote_literal(OLD.id) USING ERRCODE = 'TGAUD';
END $$;

CREATE TRIGGER learned_rules_fixed BEFORE UPDATE ON learned_rules
	FOR EACH ROW
	WHEN ((NEW.id, NEW.tool, NEW.spec::text, NEW.scope, NEW.scope_key, NEW.thread_id, NEW.question_id, NEW.digest,
			NEW.created_by, NEW.created_at, NEW.expires_at)
		IS DISTINCT FROM (OLD.id, OLD.tool, OLD.spec::text, OLD.scope, OLD.scope_key, OLD.thread_id, OLD.question_id, OLD.digest,
			OLD.created_by, OLD.created_at, OLD.expires_at)
		OR OLD.approved_at IS NOT NULL AND (NEW.approved_at, NEW.approved_by) IS DISTINCT FROM (OLD.approved_at, OLD.approved_by)
		OR OLD.revoked_at IS NOT NULL AND (NEW.revoked_at, NEW.revoked_by, NEW.revoke_reason, NEW.approved_at)
			IS DISTINCT FROM (OLD.revoked_at, OLD.revoked_by, OLD.revoke_reason, OLD.approved_at))
	EXECUTE FUNCTION learned_rules_fixed();

CREATE TRIGGER learned_rules_created_clean BEFORE INSERT ON learned_rules
	FOR EACH ROW
	WHEN (NEW.approved_at IS NOT NULL OR NEW.revoked_at IS NOT NULL)
	EXECUTE FUNCTION learned_rules_fixed();

CREATE TRIGGER learned_rules_kept BEFORE DELETE ON learned_rules
	FOR EACH ROW
	EXECUTE FUNCTION learned_rules_fixed();
