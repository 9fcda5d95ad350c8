-- tollgate checkpoint store, schema 10: a learned rule's approval and
-- revocation are each its name and its time together, and an approval is
-- never its author's. Schema 9 let UPDATE learned_rules SET approved_by
-- = 'x' through without an event (only approved_at was tied to one), and
-- a rule its author approved with an event of their own: rows a store
-- without these triggers read as approved by a second reviewer.

CREATE TRIGGER learned_rules_created_unnamed BEFORE INSERT ON learned_rules
WHEN NEW.approved_by != '' OR NEW.revoked_by != '' OR NEW.revoke_reason != ''
BEGIN
	SELECT RAISE(ABORT, 'tollgate: a learned rule is created neither approved nor revoked, by no one');
END;

CREATE TRIGGER learned_rules_change_whole BEFORE UPDATE ON learned_rules
WHEN OLD.approved_at IS NULL AND NEW.approved_by IS NOT OLD.approved_by
		AND (NEW.approved_at IS NULL OR NEW.approved_by = '' OR NEW.approved_by IS NEW.created_by)
	OR OLD.approved_at IS NULL AND NEW.approved_at IS NOT NULL AND NEW.approved_by IS OLD.approved_by
	OR OLD.revoked_at IS NULL AND NEW.revoked_at IS NULL
		AND (NEW.revoked_by IS NOT OLD.revoked_by OR NEW.revoke_reason IS NOT OLD.revoke_reason)
BEGIN
	SELECT RAISE(ABORT, 'tollgate: a learned rule is approved with the approval''s time, by someone else than its author, and revoked with the revocation''s time');
END;
