package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// A client with SQL access as tollgate's role (issue 21's attack A: a
// tool that reached a trust/peer socket) cannot resolve a question
// without its audit entry: the forged UPDATE fails at its COMMIT, and so
// do one whose event came in another transaction or names another
// question or resolver, a rewrite of a resolved question and a question
// created resolved. One that inserts the event in the same transaction
// has written the resolution into the audit log. On a schema that had
// rows before schema 7 (the migration applied to an existing database).
func TestForgedResolutionRefused(t *testing.T) {
	dsn, schema, pool := oldSchema(t, 6)
	ctx := context.Background()
	for _, stmt := range []string{
		`INSERT INTO questions (seq, change_seq, thread_id, id, run_id, call_id, tool, kind, payload, digest, status, answered_by, reason, created_at)
SELECT (pg_current_xact_id()::text::bigint + base) * 65536 + i, (pg_current_xact_id()::text::bigint + base) * 65536 + i,
	't', 'q' || i, 'r', 'c' || i, 'bash', 'approve', '{}', 'v2:sha256:00', 'pending', '', '', now()
FROM seq_base, generate_series(1, 3) i`,
	} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Open(ctx, dsn, &Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.ResolveQuestion(ctx, "t", "q3", checkpoint.Resolution{Status: checkpoint.QuestionAnswered, Answer: []byte(`{"decision":"deny"}`), By: "bob"}); err != nil {
		t.Fatal(err)
	}

	const forge = `UPDATE questions SET status = 'answered', answered_by = 'alice', answer = '{"decision":"approve"}' WHERE thread_id = 't' AND id = 'q1'`
	event := func(question, by string) string {
		return `INSERT INTO events (seq, thread_id, run_id, type, data, at)
SELECT (pg_current_xact_id()::text::bigint + base) * 65536 + 7, 't', 'r', 'question_resolved', '{"question_id":"` + question + `","status":"answered","by":"` + by + `"}', now() FROM seq_base`
	}
	refused := func(what string, stmts ...string) {
		t.Helper()
		if err := execTx(ctx, pool, stmts...); !auditRefusal(err) {
			t.Errorf("%s: %v, want it refused (TGAUD)", what, err)
		}
	}
	refused("the forged UPDATE", forge)
	if _, err := pool.Exec(ctx, event("q1", "alice")); err != nil { // a transaction of its own
		t.Fatal(err)
	}
	refused("with the event in an earlier transaction", forge)
	refused("with another question's event", event("q2", "alice"), forge)
	refused("with another resolver's event", event("q1", "tollgate"), forge)
	refused("rewriting a resolved question", `UPDATE questions SET answer = '{"decision":"approve"}', answered_by = 'alice' WHERE thread_id = 't' AND id = 'q3'`)
	refused("a resolved question made pending", `UPDATE questions SET status = 'pending' WHERE thread_id = 't' AND id = 'q3'`)
	refused("a question created answered", `INSERT INTO questions (seq, change_seq, thread_id, id, run_id, call_id, tool, kind, payload, digest, status, answered_by, reason, created_at)
SELECT (pg_current_xact_id()::text::bigint + base) * 65536, (pg_current_xact_id()::text::bigint + base) * 65536,
	't', 'new', 'r', 'c', 'bash', 'approve', '{}', '', 'answered', 'alice', '', now() FROM seq_base`)
	for _, id := range []string{"q1", "q2"} {
		if q, err := s.GetQuestion(ctx, "t", id); err != nil || q.Status != checkpoint.QuestionPending {
			t.Fatalf("question %s after the refusals: %+v, %v", id, q, err)
		}
	}
	if q, err := s.GetQuestion(ctx, "t", "q3"); err != nil || q.AnsweredBy != "bob" || string(q.Answer) != `{"decision":"deny"}` {
		t.Fatalf("the resolved question after the refusals: %+v, %v", q, err)
	}

	// The event and the resolution in one transaction: written, and the
	// resolution is in the log.
	if err := execTx(ctx, pool, forge, event("q1", "alice")); err != nil {
		t.Fatalf("resolution with its event: %v", err)
	}
	evs, err := s.ListEvents(ctx, "t", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Type == checkpoint.EventQuestionResolved && strings.Contains(string(e.Data), `"question_id":"q1"`) {
			n++
		}
	}
	if n != 2 { // the stray one, and the one that came with the resolution
		t.Errorf("%d question_resolved events of q1, want 2", n)
	}
	// And the store's own resolutions pass the check.
	if _, err := s.ResolveQuestion(ctx, "t", "q2", checkpoint.Resolution{Status: checkpoint.QuestionAborted, By: "abort", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
}

// execTx runs stmts in one transaction on pool, as a client with
// tollgate's role writing by hand would.
func execTx(ctx context.Context, pool *pgxpool.Pool, stmts ...string) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, st := range stmts {
			if _, err := tx.Exec(ctx, st); err != nil {
				return err
			}
		}
		return nil
	})
}

// auditRefusal reports whether err is the audit triggers' refusal
// (SQLSTATE TGAUD).
func auditRefusal(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "TGAUD"
}
