-- tollgate checkpoint store, schema 9: rules learned from reviewers'
-- answers ("approve, and allow calls like this", package policy/learn).
--
-- A learned rule lets the policy allow calls it would have asked about,
-- so it is bound as an answer is, and audited as one: a row is created
-- only with its rule_learned event, inserted just before it on the same
-- connection (as schema 7 ties a resolution to its event); a second
-- reviewer's approval and a revocation are made once each, with their
-- events; what was learned (tool, spec, scope, source, author, times)
-- never changes, and a rule is revoked, never deleted, so the audit log
-- can always be read against it.

CREATE TABLE learned_rules (
	seq           INTEGER PRIMARY KEY AUTOINCREMENT,
	id            TEXT NOT NULL UNIQUE,
	tool          TEXT NOT NULL,
	spec          TEXT NOT NULL,
	scope         TEXT NOT NULL,
	scope_key     TEXT NOT NULL,
	thread_id     TEXT NOT NULL,
	question_id   TEXT NOT NULL,
	digest        TEXT NOT NULL,
	created_by    TEXT NOT NULL,
	created_at    INTEGER NOT NULL,
	expires_at    INTEGER,
	approved_by   TEXT NOT NULL DEFAULT '',
	approved_at   INTEGER,
	revoked_by    TEXT NOT NULL DEFAULT '',
	revoked_at    INTEGER,
	revoke_reason TEXT NOT NULL DEFAULT ''
);

CREATE INDEX learned_rules_by_tool ON learned_rules (tool, seq);

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

CREATE TRIGGER learned_rules_fixed BEFORE UPDATE ON learned_rules
WHEN NEW.seq IS NOT OLD.seq OR NEW.id IS NOT OLD.id OR NEW.tool IS NOT OLD.tool OR NEW.spec IS NOT OLD.spec
	OR NEW.scope IS NOT OLD.scope OR NEW.scope_key IS NOT OLD.scope_key OR NEW.thread_id IS NOT OLD.thread_id
	OR NEW.question_id IS NOT OLD.question_id OR NEW.digest IS NOT OLD.digest OR NEW.created_by IS NOT OLD.created_by
	OR NEW.created_at IS NOT OLD.created_at OR NEW.expires_at IS NOT OLD.expires_at
	OR OLD.approved_at IS NOT NULL AND (NEW.approved_at IS NOT OLD.approved_at OR NEW.approved_by IS NOT OLD.approved_by)
	OR OLD.revoked_at IS NOT NULL AND (NEW.revoked_at IS NOT OLD.revoked_at OR NEW.revoked_by IS NOT OLD.revoked_by
		OR NEW.revoke_reason IS NOT OLD.revoke_reason OR NEW.approved_at IS NOT OLD.approved_at)
BEGIN
	SELECT RAISE(ABORT, 'tollgate: what a learned rule allows does not change; it is approved once and revoked once');
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

CREATE TRIGGER learned_rules_kept BEFORE DELETE ON learned_rules
BEGIN
	SELECT RAISE(ABORT, 'tollgate: a learned rule is revoked, never deleted');
END;
