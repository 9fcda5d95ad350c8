package postgres

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// dumpQuestions is every column of every question, as text.
func dumpQuestions(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var out string
	if err := pool.QueryRow(t.Context(), `SELECT coalesce(string_agg(q::text, E'\n' ORDER BY seq), '') FROM questions q`).Scan(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// What a question asks is fixed from its creation, and a resolved
// question is final in every column (schema 13): a client with
// tollgate's role may not point bob's approval at a call he never saw
// (SQLite's TestForgedRepointingAResolvedQuestion), nor change what a
// pending question asks. The store's resolution still goes through.
func TestForgedQuestionFixed(t *testing.T) {
	s, pool := currentSchema(t)
	ctx := context.Background()
	for _, id := range []string{"p", "done"} {
		if _, _, err := s.CreateQuestion(ctx, &checkpoint.Question{ThreadID: "t", ID: id, RunID: "r", CallID: "c-" + id, Tool: "bash", Kind: "approve",
			Payload: []byte(`{"command":"ls"}`), Digest: "v2:sha256:00"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.ResolveQuestion(ctx, "t", "done", checkpoint.Resolution{Status: checkpoint.QuestionAnswered, Answer: []byte(`{"decision":"approve"}`), By: "bob"}); err != nil {
		t.Fatal(err)
	}
	before := dumpQuestions(t, pool)
	refused := func(what, stmt string) {
		t.Helper()
		_, err := pool.Exec(ctx, stmt)
		if !auditRefusal(err) {
			t.Errorf("%s: %v, want it refused (TGAUD)", what, err)
		}
	}
	refused("an approved question pointed at another call", `UPDATE questions SET call_id = 'c-other', payload = '{"command":"rm -rf /"}', digest = 'v2:sha256:ff'
WHERE thread_id = 't' AND id = 'done'`)
	refused("a resolved question's change_seq", `UPDATE questions SET change_seq = change_seq + 1 WHERE thread_id = 't' AND id = 'done'`)
	for _, id := range []string{"p", "done"} {
		for _, set := range []string{"seq = seq + 1", "thread_id = 'u'", "id = 'x'", "run_id = 'r2'", "call_id = 'c-other'", "tool = 'rm'",
			"kind = 'edit'", `payload = '{"command":"rm -rf /"}'`, "payload = NULL", "digest = 'v2:sha256:ff'", "created_at = now() - interval '1 day'", "deadline = now()"} {
			refused(fmt.Sprintf("question %s: SET %s", id, set), `UPDATE questions SET `+set+` WHERE thread_id = 't' AND id = '`+id+`'`)
		}
	}
	if after := dumpQuestions(t, pool); after != before {
		t.Errorf("questions after the refusals:\n%s\nwant\n%s", after, before)
	}
	if _, err := s.ResolveQuestion(ctx, "t", "p", checkpoint.Resolution{Status: checkpoint.QuestionAnswered, Answer: []byte(`{"decision":"deny"}`), By: "alice"}); err != nil {
		t.Errorf("the store's resolution of p: %v", err)
	}
}

// SQLite's TestForgedResolutionReusingAnOldEvent, here: a question bob
// denied, deleted and created again pending for another call, cannot be
// resolved "approved by bob" on the strength of bob's old event, which
// is not in the resolution's transaction (schema 7's check).
func TestForgedResolutionReusingAnOldEvent(t *testing.T) {
	s, pool := currentSchema(t)
	ctx := context.Background()
	if _, _, err := s.CreateQuestion(ctx, &checkpoint.Question{ThreadID: "t", ID: "q", RunID: "r", CallID: "c", Tool: "bash", Kind: "approve", Digest: "v2:sha256:00"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ResolveQuestion(ctx, "t", "q", checkpoint.Resolution{Status: checkpoint.QuestionAnswered, Answer: []byte(`{"decision":"deny"}`), By: "bob"}); err != nil {
		t.Fatal(err)
	}
	err := execTx(ctx, pool,
		`DELETE FROM questions WHERE thread_id = 't' AND id = 'q'`,
		`INSERT INTO questions (seq, change_seq, thread_id, id, run_id, call_id, tool, kind, payload, digest, status, answered_by, reason, created_at)
SELECT (pg_current_xact_id()::text::bigint + base) * 65536, (pg_current_xact_id()::text::bigint + base) * 65536,
	't', 'q', 'r', 'c-other', 'bash', 'approve', '{"command":"rm -rf /"}', 'v2:sha256:ff', 'pending', '', '', now() FROM seq_base`,
		`UPDATE questions SET status = 'answered', answer = '{"decision":"approve"}', answered_by = 'bob', resolved_at = now()
WHERE thread_id = 't' AND id = 'q'`,
	)
	if !auditRefusal(err) {
		q, _ := s.GetQuestion(ctx, "t", "q")
		t.Errorf("a resolution approved by bob with only his old deny event: %v, want it refused (TGAUD); the question %+v", err, q)
	}
}
