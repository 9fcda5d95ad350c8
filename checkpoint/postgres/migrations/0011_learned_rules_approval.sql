-- tollgate checkpoint store, schema 11: a learned rule's approval and
-- revocation are each its name and its time together, and an approval is
-- never its author's. Schema 10 let UPDATE learned_rules SET approved_by
-- = 'x' through without an event (only approved_at was tied to one), and
-- a rule its author approved with an event of their own: rows a store
-- without these triggers read as approved by a second reviewer.

CREATE FUNCTION learned_rules_whole() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'tollgate: learned rule % is approved with the approval''s time, by someone else than its author, and revoked with the revocation''s time',
		quote_literal(NEW.id) USING ERRCODE = 'TGAUD';
END $$;

CREATE TRIGGER learned_rules_created_unnamed BEFORE INSERT ON learned_rules
	FOR EACH ROW
	WHEN (NEW.approved_by <> '' OR NEW.revoked_by <> '' OR NEW.revoke_reason <> '')
	EXECUTE FUNCTION learned_rules_whole();

CREATE TRIGGER learned_rules_change_whole BEFORE UPDATE ON learned_rules
	FOR EACH ROW
	WHEN (OLD.approved_at IS NULL AND NEW.approved_by IS DISTINCT FROM OLD.approved_by
			AND (NEW.approved_at IS NULL OR NEW.approved_by = '' OR NEW.approved_by IS NOT DISTINCT FROM NEW.created_by)
		OR OLD.approved_at IS NULL AND NEW.approved_at IS NOT NULL AND NEW.approved_by IS NOT DISTINCT FROM OLD.approved_by
		OR OLD.revoked_at IS NULL AND NEW.revoked_at IS NULL
			AND (NEW.revoked_by, NEW.revoke_reason) IS DISTINCT FROM (OLD.revoked_by, OLD.revoke_reason))
	EXECUTE FUNCTION learned_rules_whole();
