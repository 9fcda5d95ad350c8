package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// Schema 13's questions_created_once ignores an INSERT whose seq is a
// seq that is there. In a BEFORE INSERT trigger a generated seq (the
// store never names one) reads -1, so one question a hand writer inserted
// with seq -1 (questions has no CHECK on seq, unlike events since schema
// 11) makes every later creation of the store insert nothing: no
// question is asked again until the row is found.
func TestForgedSeqMinusOneBlocksNoQuestionCreation(t *testing.T) {
	ctx := context.Background()
	s, db := openMigrated(t, filepath.Join(t.TempDir(), "tollgate.db"))
	if _, err := db.ExecContext(ctx, `INSERT INTO questions (seq, thread_id, id, run_id, call_id, kind, payload, digest, status, answered_by, reason, created_at, change_seq)
VALUES (-1, 'x', 'x', 'r', 'c', 'approve', NULL, '', 'pending', '', '', 0, (SELECT coalesce(max(change_seq), 0) + 1 FROM questions))`); err != nil {
		t.Fatalf("a pending question with seq -1 and the next change number: %v", err)
	}
	q, created, err := s.CreateQuestion(ctx, &checkpoint.Question{ThreadID: "t", ID: "q1", RunID: "r", CallID: "c1", Tool: "bash", Kind: "approve",
		Payload: []byte(`{"command":"ls"}`), Digest: "v2:sha256:00"})
	if err != nil || !created || q == nil || q.ID != "q1" {
		t.Errorf("CreateQuestion after a seq -1 row: %+v, created %v, %v; want it created", q, created, err)
	}
}
