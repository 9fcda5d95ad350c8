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

// A client that writes the file by hand (issue 21's attack B: one sqlite3
// command) cannot resolve a question without its audit entry: the forged
// UPDATE is refused, and so are rewriting a resolved question and
// creating one resolved. One that writes the event just before has put
// the resolution in the audit log. The same on a database that had data
// before the triggers (the migration applied to an existing file).
func TestForgedResolutionRefused(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tollgate.db")
	s, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"q", "old", "done"} {
		if _, _, err := s.CreateQuestion(ctx, &checkpoint.Question{ThreadID: "t", ID: id, RunID: "r", CallID: "c-" + id, Tool: "bash", Kind: "approve", Digest: "v2:sha256:00"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.ResolveQuestion(ctx, "t", "done", checkpoint.Resolution{Status: checkpoint.QuestionAnswered, Answer: []byte(`{"decision":"deny"}`), By: "bob"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// As a database of schema 6 with these rows: the migration runs on it.
	// (Its events table is schema 11's, which the migration rebuilds again.)
	execSQL(t, path, `DROP TRIGGER questions_resolution_audited; DROP TRIGGER questions_resolution_final; DROP TRIGGER questions_created_pending;
DROP TRIGGER events_numbered; DROP TRIGGER events_kept; DROP TRIGGER events_fixed;
DROP TRIGGER questions_asked_fixed; DROP TRIGGER questions_kept; DROP TRIGGER questions_created_once;
DROP TRIGGER questions_pending_untouched; DROP TRIGGER questions_change_seq_next; DROP TRIGGER questions_change_seq_next_resolved;
DROP TABLE learned_rules; DROP TABLE notify_deliveries; DROP TABLE notify_cursor;
DELETE FROM schema_version WHERE version >= 7;`)
	s, err = sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

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
	refused := func(what, stmt string) {
		t.Helper()
		if _, err := conn.ExecContext(ctx, stmt); err == nil || !strings.Contains(err.Error(), "tollgate: ") {
			t.Errorf("%s: %v, want it refused", what, err)
		}
	}
	forge := `UPDATE questions SET status = 'answered', answered_by = 'alice', answer = '{"decision":"approve"}' WHERE thread_id = 't' AND id = 'q'`
	refused("the forged UPDATE", forge)
	// An event of another question, or that names another resolver, is
	// not the audit entry of this resolution.
	refused("with another question's event", `INSERT INTO events (thread_id, run_id, type, data, at) VALUES ('t', 'r', 'question_resolved', '{"question_id":"old","status":"answered","by":"alice"}', 0); `+forge)
	refused("with another resolver's event", `INSERT INTO events (thread_id, run_id, type, data, at) VALUES ('t', 'r', 'question_resolved', '{"question_id":"q","status":"answered","by":"tollgate"}', 0); `+forge)
	refused("rewriting a resolved question", `UPDATE questions SET answer = '{"decision":"approve"}', answered_by = 'alice' WHERE thread_id = 't' AND id = 'done'`)
	refused("a resolved question made pending", `UPDATE questions SET status = 'pending' WHERE thread_id = 't' AND id = 'done'`)
	refused("a question created answered", `INSERT INTO questions (seq, thread_id, id, run_id, call_id, kind, payload, digest, status, answer, answered_by, reason, created_at, change_seq)
VALUES (100, 't', 'new', 'r', 'c', 'approve', NULL, '', 'answered', '{"decision":"approve"}', 'alice', '', 0, 100)`)
	for _, id := range []string{"q", "old"} {
		if q, err := s.GetQuestion(ctx, "t", id); err != nil || q.Status != checkpoint.QuestionPending {
			t.Fatalf("question %s after the refusals: %+v, %v", id, q, err)
		}
	}
	if q, err := s.GetQuestion(ctx, "t", "done"); err != nil || q.AnsweredBy != "bob" || string(q.Answer) != `{"decision":"deny"}` {
		t.Fatalf("the resolved question after the refusals: %+v, %v", q, err)
	}

	// The event, then the resolution: written, and in the log.
	if _, err := conn.ExecContext(ctx, `INSERT INTO events (thread_id, run_id, type, data, at) VALUES ('t', 'r', 'question_resolved', '{"question_id":"q","status":"answered","by":"alice"}', 0)`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, forge); err != nil {
		t.Fatalf("resolution after its event: %v", err)
	}
	evs, err := s.ListEvents(ctx, "t", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var audited []string
	for _, e := range evs {
		if e.Type == checkpoint.EventQuestionResolved {
			audited = append(audited, string(e.Data))
		}
	}
	if len(audited) == 0 || !strings.Contains(audited[len(audited)-1], `"question_id":"q"`) {
		t.Errorf("question_resolved events %v: the resolution is not in the log", audited)
	}
}
