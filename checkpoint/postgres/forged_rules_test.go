package postgres

import (
	"context"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// A client with SQL access as tollgate's role cannot learn a rule, or
// bring a revoked one back, without it showing in the audit log: a rule
// inserted, approved or revoked without its event in the transaction
// fails at COMMIT; what a rule allows, and a revocation, never change;
// a rule is never deleted; an approver or a revoker is never named
// without the time, nor an approval its author's (schema 11). One that
// writes the event too has put it in the log.
func TestForgedRuleRefused(t *testing.T) {
	s, pool := currentSchema(t)
	ctx := context.Background()
	rule := func(id string) *checkpoint.LearnedRule {
		return &checkpoint.LearnedRule{ID: id, Tool: "bash", Spec: []byte(`{}`), Scope: checkpoint.ScopeEveryone,
			ThreadID: "t", QuestionID: "q", Digest: "v2:sha256:00", CreatedBy: "alice"}
	}
	for _, id := range []string{"lr_live", "lr_gone"} {
		if err := s.CreateRule(ctx, rule(id)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.ChangeRule(ctx, "lr_gone", checkpoint.RuleChange{By: "bob", Reason: "too broad"}); err != nil {
		t.Fatal(err)
	}
	event := func(typ, rule, by string) string {
		return `INSERT INTO events (seq, thread_id, run_id, type, data, at)
SELECT (pg_current_xact_id()::text::bigint + base) * 65536 + 9, 't', '', '` + typ + `', '{"rule_id":"` + rule + `","by":"` + by + `"}', now() FROM seq_base`
	}
	refused := func(what string, stmts ...string) {
		t.Helper()
		if err := execTx(ctx, pool, stmts...); !auditRefusal(err) {
			t.Errorf("%s: %v, want it refused (TGAUD)", what, err)
		}
	}
	const insert = `INSERT INTO learned_rules (id, tool, spec, scope, scope_key, thread_id, question_id, digest, created_by, created_at)
VALUES ('lr_forged', 'bash', '{}', 'everyone', '', 't', 'q', 'v2:sha256:00', 'alice', now())`
	refused("a rule inserted without its event", insert)
	refused("with another author's event", event("rule_learned", "lr_forged", "bob"), insert)
	refused("revoked without its event", `UPDATE learned_rules SET revoked_by = 'mallory', revoked_at = now() WHERE id = 'lr_live'`)
	refused("approved without its event", `UPDATE learned_rules SET approved_by = 'mallory', approved_at = now() WHERE id = 'lr_live'`)
	refused("approved by a name without its time", `UPDATE learned_rules SET approved_by = 'mallory' WHERE id = 'lr_live'`)
	refused("approved by its author", event("rule_approved", "lr_live", "alice"),
		`UPDATE learned_rules SET approved_by = 'alice', approved_at = now() WHERE id = 'lr_live'`)
	refused("inserted with an approver's name", event("rule_learned", "lr_forged", "alice"),
		`INSERT INTO learned_rules (id, tool, spec, scope, scope_key, thread_id, question_id, digest, created_by, created_at, approved_by)
VALUES ('lr_forged', 'bash', '{}', 'everyone', '', 't', 'q', 'v2:sha256:00', 'alice', now(), 'bob')`)
	refused("revoked by a name without its time", `UPDATE learned_rules SET revoked_by = 'mallory', revoke_reason = 'x' WHERE id = 'lr_live'`)
	refused("a revoked rule brought back", `UPDATE learned_rules SET revoked_at = NULL, revoked_by = '' WHERE id = 'lr_gone'`)
	refused("what a rule allows changed", `UPDATE learned_rules SET spec = '{"any":true}' WHERE id = 'lr_live'`)
	refused("its scope changed", `UPDATE learned_rules SET scope = 'dir', scope_key = '/' WHERE id = 'lr_live'`)
	refused("its expiry moved", `UPDATE learned_rules SET expires_at = now() + interval '1 year' WHERE id = 'lr_live'`)
	refused("a rule deleted", `DELETE FROM learned_rules WHERE id = 'lr_gone'`)
	if r, err := s.GetRule(ctx, "lr_gone"); err != nil || r.RevokedBy != "bob" {
		t.Fatalf("the revoked rule after the refusals: %+v, %v", r, err)
	}
	if err := execTx(ctx, pool, insert, event("rule_learned", "lr_forged", "alice")); err != nil {
		t.Fatalf("a rule with its event: %v", err)
	}
}
