package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
)

// Schema 13 closes TestForgedResolutionReusingAnOldEvent by never
// deleting a question, but a file tampered before it (schema 12: bob's
// "deny" of question done, then done deleted and created again pending
// for another call) keeps the hole after the migration: the
// last_insert_rowid() of an INSERT that names its rowid in messages still
// points schema 7's trigger at bob's old event, and done is "approved by
// bob" with no event of that in the log. The event the store inserts just
// before a resolution is always the newest one (events are numbered max +
// 1 since schema 11): a check e.seq = (SELECT max(seq) FROM events) would
// refuse it whatever happened to the rows before.
func TestForgedResolutionReusingAnOldEventTamperedBeforeMigration(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tollgate.db")
	schema12 := append(append([]string(nil), schema11...), "0012_row_layout.sql")
	oldSchemaFile(t, path, `
INSERT INTO questions (thread_id, id, run_id, call_id, tool, kind, payload, digest, status, answered_by, reason, created_at, deadline, change_seq) VALUES
	('t', 'done', 'r', 'c2', 'bash', 'approve', '{"command":"ls"}', 'v2:sha256:02', 'pending', '', '', 1100, NULL, 1);
INSERT INTO events (thread_id, run_id, type, data, at) VALUES ('t', 'r', 'question_resolved', '{"question_id":"done","status":"answered","by":"bob"}', 2000);
UPDATE questions SET status = 'answered', answer = '{"decision":"deny"}', answered_by = 'bob', resolved_at = 2000, change_seq = 2
WHERE thread_id = 't' AND id = 'done';
INSERT INTO events (thread_id, run_id, type, data, at) VALUES ('t', 'r', 'run_started', '{}', 3000);
DELETE FROM questions WHERE thread_id = 't' AND id = 'done';
INSERT INTO questions (thread_id, id, run_id, call_id, tool, kind, payload, digest, status, answered_by, reason, created_at, deadline, change_seq) VALUES
	('t', 'done', 'r', 'c-other', 'bash', 'approve', '{"command":"rm -rf /"}', 'v2:sha256:ff', 'pending', '', '', 4000, NULL, 3);`, schema12...)
	_, db := openMigrated(t, path)
	var deny int64
	if err := db.QueryRow(`SELECT seq FROM events WHERE type = 'question_resolved'`).Scan(&deny); err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `INSERT INTO messages (rowid, thread_id, position, body) VALUES (?, 'x', 0, '0')`, deny); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, `UPDATE questions SET status = 'answered', answer = '{"decision":"approve"}', answered_by = 'bob', resolved_at = 5000
WHERE thread_id = 't' AND id = 'done'`); err == nil {
		t.Errorf("after the migration, done (now c-other, rm -rf /) approved by bob with his old deny event %d: written", deny)
	}
}
