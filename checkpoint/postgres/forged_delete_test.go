package postgres

import (
	"context"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// Schema 13 refuses an UPDATE of what a pending question asks
// (TestForgedQuestionFixed), but a client with tollgate's role reaches the
// same row by DELETE and INSERT, in one transaction: question p, pending
// for call c-p (what bob is shown), now asks about c-other, same id, and
// bob's answer to p is recorded against it (the question_resolved event
// carries the stored question's digest). The store never deletes a
// question (writtenTables: INSERT and UPDATE only).
func TestForgedPendingQuestionRepointedByDeleteAndInsert(t *testing.T) {
	s, pool := currentSchema(t)
	ctx := context.Background()
	if _, _, err := s.CreateQuestion(ctx, &checkpoint.Question{ThreadID: "t", ID: "p", RunID: "r", CallID: "c-p", Tool: "bash", Kind: "approve",
		Payload: []byte(`{"command":"ls"}`), Digest: "v2:sha256:00"}); err != nil {
		t.Fatal(err)
	}
	err := execTx(ctx, pool,
		`DELETE FROM questions WHERE thread_id = 't' AND id = 'p'`,
		`INSERT INTO questions (seq, change_seq, thread_id, id, run_id, call_id, tool, kind, payload, digest, status, answered_by, reason, created_at)
SELECT (pg_current_xact_id()::text::bigint + base) * 65536, (pg_current_xact_id()::text::bigint + base) * 65536,
	't', 'p', 'r', 'c-other', 'bash', 'approve', '{"command":"rm -rf /"}', 'v2:sha256:ff', 'pending', '', '', now() FROM seq_base`,
	)
	if !auditRefusal(err) {
		q, _ := s.GetQuestion(ctx, "t", "p")
		t.Errorf("pending question p deleted and created again for another call: %v, want it refused (TGAUD); p is now %s %s", err, q.CallID, q.Payload)
	}
}

// A resolved question taken out by DELETE or TRUNCATE: bob's approval
// is gone from the store (events keep it, as schema 12 refuses their
// DELETE and TRUNCATE), and the id can be asked again, pending, about
// another call.
func TestForgedResolvedQuestionDeletedOrTruncated(t *testing.T) {
	s, pool := currentSchema(t)
	ctx := context.Background()
	for _, id := range []string{"a", "b"} {
		if _, _, err := s.CreateQuestion(ctx, &checkpoint.Question{ThreadID: "t", ID: id, RunID: "r", CallID: "c-" + id, Tool: "bash", Kind: "approve", Digest: "v2:sha256:00"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ResolveQuestion(ctx, "t", id, checkpoint.Resolution{Status: checkpoint.QuestionAnswered, Answer: []byte(`{"decision":"approve"}`), By: "bob"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, stmt := range []string{`DELETE FROM questions WHERE thread_id = 't' AND id = 'a'`, `TRUNCATE questions`} {
		_, err := pool.Exec(ctx, stmt)
		if !auditRefusal(err) {
			t.Errorf("%s: %v, want it refused (TGAUD)", stmt, err)
		}
	}
	if q, err := s.GetQuestion(ctx, "t", "b"); err != nil || q.AnsweredBy != "bob" {
		t.Errorf("bob's approval of b after the refusals: %+v, %v", q, err)
	}
}
