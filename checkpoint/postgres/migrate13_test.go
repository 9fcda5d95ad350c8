package postgres

import (
	"context"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// A schema of version 12 with questions pending and resolved (one by
// hand, with its event) migrates to schema 13 and keeps every question as
// it was, column for column; the store then resolves the pending one, and
// what a question asks is fixed.
func TestMigrateQuestionsFixed(t *testing.T) {
	dsn, schema, pool := oldSchema(t, 12)
	ctx := context.Background()
	err := execTx(ctx, pool,
		`INSERT INTO questions (seq, change_seq, thread_id, id, run_id, call_id, tool, kind, payload, digest, status, answered_by, reason, created_at, deadline)
SELECT (pg_current_xact_id()::text::bigint + base) * 65536 + i, (pg_current_xact_id()::text::bigint + base) * 65536 + i,
	't', 'q' || i, 'r', 'c' || i, 'bash', 'approve', '{"command":"ls"}', 'v2:sha256:0' || i, 'pending', '', '', now(),
	CASE WHEN i = 1 THEN now() + interval '1 day' END
FROM seq_base, generate_series(1, 3) i`,
		`INSERT INTO events (seq, thread_id, run_id, type, data, at)
SELECT (pg_current_xact_id()::text::bigint + base) * 65536 + 7, 't', 'r', 'question_resolved', '{"question_id":"q2","status":"answered","by":"bob"}', now() FROM seq_base`,
		`UPDATE questions SET status = 'answered', answer = '{"decision":"deny"}', answered_by = 'bob', resolved_at = now() WHERE thread_id = 't' AND id = 'q2'`,
	)
	if err != nil {
		t.Fatal(err)
	}
	before := dumpQuestions(t, pool)
	s, err := Open(ctx, dsn, &Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	migs, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	var version int
	if err := pool.QueryRow(ctx, `SELECT max(version) FROM schema_version`).Scan(&version); err != nil || version != len(migs) {
		t.Fatalf("schema version %d, %v; want %d", version, err, len(migs))
	}
	if after := dumpQuestions(t, pool); after != before || strings.Count(after, "\n") != 2 {
		t.Errorf("questions after the migration:\n%s\nwant\n%s", after, before)
	}
	if _, err := s.ResolveQuestion(ctx, "t", "q1", checkpoint.Resolution{Status: checkpoint.QuestionAnswered, Answer: []byte(`{"decision":"approve"}`), By: "alice"}); err != nil {
		t.Fatal(err)
	}
	if q, err := s.GetQuestion(ctx, "t", "q1"); err != nil || q.AnsweredBy != "alice" || q.CallID != "c1" || string(q.Payload) != `{"command":"ls"}` {
		t.Errorf("q1 after its resolution: %+v, %v", q, err)
	}
	if _, err := pool.Exec(ctx, `UPDATE questions SET call_id = 'c-other' WHERE thread_id = 't' AND id = 'q2'`); err == nil {
		t.Error("a resolved question pointed at another call after the migration: written")
	}
}
