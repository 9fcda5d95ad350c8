package sqlite_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// A pending question changes only by its resolution, and a question's
// change number is always the next one: a hand writer set a pending
// question's change_seq to the top of the integers, after which the
// store's next number overflowed and every create and resolve failed.
func TestForgedChangeNumberRefused(t *testing.T) {
	ctx := context.Background()
	s, db := openMigrated(t, filepath.Join(t.TempDir(), "tollgate.db"))
	if _, _, err := s.CreateQuestion(ctx, &checkpoint.Question{ThreadID: "t", ID: "p", RunID: "r", CallID: "c", Tool: "bash", Kind: "approve", Digest: "v2:sha256:00"}); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`UPDATE questions SET change_seq = 9223372036854775807 WHERE id = 'p'`,
		`UPDATE questions SET answered_by = 'bob', reason = 'fine' WHERE id = 'p'`,
		`INSERT INTO questions (thread_id, id, run_id, call_id, kind, payload, digest, status, answered_by, reason, created_at, change_seq)
VALUES ('t', 'big', 'r', 'c2', 'approve', NULL, '', 'pending', '', '', 0, 9223372036854775807)`,
	} {
		if _, err := db.ExecContext(ctx, stmt); err == nil || !strings.Contains(err.Error(), "tollgate: ") {
			t.Errorf("%.50s: %v, want it refused", stmt, err)
		}
	}
	if _, _, err := s.CreateQuestion(ctx, &checkpoint.Question{ThreadID: "t", ID: "q", RunID: "r", CallID: "c3", Tool: "bash", Kind: "approve", Digest: "v2:sha256:00"}); err != nil {
		t.Errorf("a question after the refusals: %v", err)
	}
	if _, err := s.ResolveQuestion(ctx, "t", "p", checkpoint.Resolution{Status: checkpoint.QuestionAnswered, Answer: []byte(`{"decision":"approve"}`), By: "bob"}); err != nil {
		t.Errorf("resolving after the refusals: %v", err)
	}
}
