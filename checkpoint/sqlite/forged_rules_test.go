package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/sqlite"
)

// A client that writes the file by hand cannot learn a rule, or bring a
// revoked one back, without it showing in the audit log: schema 9's
// triggers refuse a rule inserted, approved or revoked without its event
// just before, any change of what a rule allows or of a revocation, and
// a deletion; schema 10's, an approver or a revoker named without the
// time, and an approval by the rule's author. One that writes the event just before has put it in the log.
func TestForgedRuleRefused(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tollgate.db")
	s, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, id := range []string{"lr_live", "lr_gone"} {
		if err := s.CreateRule(ctx, &checkpoint.LearnedRule{ID: id, Tool: "bash", Spec: []byte(`{}`), Scope: checkpoint.ScopeEveryone,
			ThreadID: "t", QuestionID: "q", Digest: "v2:sha256:00", CreatedBy: "alice"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.ChangeRule(ctx, "lr_gone", checkpoint.RuleChange{By: "bob", Reason: "too broad"}); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	exec := func(stmts ...string) error {
		for _, st := range stmts {
			if _, err := conn.ExecContext(ctx, st); err != nil {
				return err
			}
		}
		return nil
	}
	refused := func(what string, stmts ...string) {
		t.Helper()
		if err := exec(stmts...); err == nil || !strings.Contains(err.Error(), "tollgate: ") {
			t.Errorf("%s: %v, want it refused", what, err)
		}
	}
	event := func(typ, rule, by string) string {
		return `INSERT INTO events (thread_id, run_id, type, data, at) VALUES ('t', '', '` + typ + `', '{"rule_id":"` + rule + `","by":"` + by + `"}', 0)`
	}
	const insert = `INSERT INTO learned_rules (id, tool, spec, scope, scope_key, thread_id, question_id, digest, created_by, created_at)
VALUES ('lr_forged', 'bash', '{}', 'everyone', '', 't', 'q', 'v2:sha256:00', 'alice', 0)`
	refused("a rule inserted without its event", insert)
	refused("with another author's event", event("rule_learned", "lr_forged", "bob"), insert)
	refused("revoked without its event", `UPDATE learned_rules SET revoked_by = 'mallory', revoked_at = 1 WHERE id = 'lr_live'`)
	refused("approved without its event", `UPDATE learned_rules SET approved_by = 'mallory', approved_at = 1 WHERE id = 'lr_live'`)
	refused("approved by a name without its time", `UPDATE learned_rules SET approved_by = 'mallory' WHERE id = 'lr_live'`)
	refused("approved by its author", event("rule_approved", "lr_live", "alice"),
		`UPDATE learned_rules SET approved_by = 'alice', approved_at = 1 WHERE id = 'lr_live'`)
	refused("inserted with an approver's name", event("rule_learned", "lr_forged", "alice"),
		`INSERT INTO learned_rules (id, tool, spec, scope, scope_key, thread_id, question_id, digest, created_by, created_at, approved_by)
VALUES ('lr_forged', 'bash', '{}', 'everyone', '', 't', 'q', 'v2:sha256:00', 'alice', 0, 'bob')`)
	refused("revoked by a name without its time", `UPDATE learned_rules SET revoked_by = 'mallory', revoke_reason = 'x' WHERE id = 'lr_live'`)
	refused("a revoked rule brought back", `UPDATE learned_rules SET revoked_at = NULL, revoked_by = '' WHERE id = 'lr_gone'`)
	refused("what a rule allows changed", `UPDATE learned_rules SET spec = '{"any":true}' WHERE id = 'lr_live'`)
	refused("its scope changed", `UPDATE learned_rules SET scope = 'dir', scope_key = '/' WHERE id = 'lr_live'`)
	refused("its expiry moved", `UPDATE learned_rules SET expires_at = 99999999999999 WHERE id = 'lr_live'`)
	refused("a rule deleted", `DELETE FROM learned_rules WHERE id = 'lr_gone'`)
	if r, err := s.GetRule(ctx, "lr_gone"); err != nil || r.RevokedBy != "bob" {
		t.Fatalf("the revoked rule after the refusals: %+v, %v", r, err)
	}
	if err := exec(event("rule_learned", "lr_forged", "alice"), insert); err != nil {
		t.Fatalf("a rule with its event just before: %v", err)
	}
}
