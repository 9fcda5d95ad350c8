package sqlite_test

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// A file of schema 12 with questions pending and resolved (one by hand,
// with its event) opens, migrates to schema 13, and keeps every question
// as it was, column for column; the store then resolves the pending one
// and finds the resolved one there when asked to create it again, and a
// DELETE by hand is refused.
func TestMigrateQuestionsFixed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tollgate.db")
	schema12 := append(append([]string(nil), schema11...), "0012_row_layout.sql")
	oldSchemaFile(t, path, `
INSERT INTO questions (thread_id, id, run_id, call_id, tool, kind, payload, digest, status, answered_by, reason, created_at, deadline, change_seq) VALUES
	('t', 'p', 'r', 'c1', 'bash', 'approve', '{"command":"ls"}', 'v2:sha256:01', 'pending', '', '', 1000, 4102444800000000, 1),
	('t', 'done', 'r', 'c2', 'bash', 'approve', NULL, 'v2:sha256:02', 'pending', '', '', 1100, NULL, 2),
	('u', 'p', 'r2', 'c1', '', 'input', '{}', '', 'pending', '', '', 1200, NULL, 3);
INSERT INTO events (thread_id, run_id, type, data, at) VALUES ('t', 'r', 'question_resolved', '{"question_id":"done","status":"answered","by":"bob"}', 2000);
UPDATE questions SET status = 'answered', answer = '{"decision":"deny"}', answered_by = 'bob', resolved_at = 2000, change_seq = 4
WHERE thread_id = 't' AND id = 'done';`, schema12...)
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	before := dumpQuestions(t, raw)
	raw.Close()

	s, db := openMigrated(t, path)
	var version int
	if err := db.QueryRow(`SELECT max(version) FROM schema_version`).Scan(&version); err != nil || version != latestSchema(t) {
		t.Fatalf("schema version %d, %v; want %d", version, err, latestSchema(t))
	}
	if after := dumpQuestions(t, db); after != before || strings.Count(after, "\n") != 4 {
		t.Errorf("questions after the migration:\n%s\nwant\n%s", after, before)
	}

	if q, created, err := s.CreateQuestion(t.Context(), &checkpoint.Question{ThreadID: "t", ID: "done", RunID: "r", CallID: "c9", Kind: "approve", Digest: "v2:sha256:ff"}); err != nil || created ||
		q.CallID != "c2" || q.AnsweredBy != "bob" {
		t.Errorf("done created again after the migration: %+v, created %v, %v; want the one there", q, created, err)
	}
	if _, err := s.ResolveQuestion(t.Context(), "t", "p", checkpoint.Resolution{Status: checkpoint.QuestionAnswered, Answer: []byte(`{"decision":"approve"}`), By: "alice"}); err != nil {
		t.Fatal(err)
	}
	if q, err := s.GetQuestion(t.Context(), "t", "p"); err != nil || q.AnsweredBy != "alice" || q.CallID != "c1" || string(q.Payload) != `{"command":"ls"}` || q.Deadline.UnixMicro() != 4102444800000000 {
		t.Errorf("p after its resolution: %+v, %v", q, err)
	}
	if _, err := db.Exec(`DELETE FROM questions WHERE thread_id = 'u'`); err == nil || !strings.Contains(err.Error(), "tollgate: ") {
		t.Errorf("a question deleted after the migration: %v, want it refused", err)
	}
}
