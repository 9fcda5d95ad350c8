package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// dumpQuestions is every column of every question, typed and in hex.
func dumpQuestions(t *testing.T, db *sql.DB) string {
	t.Helper()
	return dumpQueries(t, db, `SELECT seq, hex(thread_id), hex(id), hex(run_id), hex(call_id), hex(tool), hex(kind),
	typeof(payload)||':'||hex(payload), hex(digest), status, typeof(answer)||':'||hex(answer), hex(answered_by), hex(reason),
	created_at, typeof(deadline)||':'||coalesce(deadline, ''), typeof(resolved_at)||':'||coalesce(resolved_at, ''), change_seq
FROM questions ORDER BY seq`)
}

// Schema 13: what a question asks is fixed from its creation, a resolved
// question is final in every column, and a question is never deleted nor
// created again (an INSERT OR REPLACE, which deletes without a DELETE
// trigger, inserts nothing). The store's own writes go through: a
// question created again is the one there, a pending one is resolved.
func TestForgedQuestionFixed(t *testing.T) {
	ctx := context.Background()
	s, db := openMigrated(t, filepath.Join(t.TempDir(), "tollgate.db"))
	for _, id := range []string{"p", "done"} {
		if _, _, err := s.CreateQuestion(ctx, &checkpoint.Question{ThreadID: "t", ID: id, RunID: "r", CallID: "c-" + id, Tool: "bash", Kind: "approve",
			Payload: []byte(`{"command":"ls"}`), Digest: "v2:sha256:00"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.ResolveQuestion(ctx, "t", "done", checkpoint.Resolution{Status: checkpoint.QuestionAnswered, Answer: []byte(`{"decision":"approve"}`), By: "bob"}); err != nil {
		t.Fatal(err)
	}
	before := dumpQuestions(t, db)

	for _, id := range []string{"p", "done"} {
		for _, set := range []string{"seq = 99", "thread_id = 'u'", "id = 'x'", "run_id = 'r2'", "call_id = 'c-other'", "tool = 'rm'",
			"kind = 'edit'", `payload = '{"command":"rm -rf /"}'`, "payload = NULL", "digest = 'v2:sha256:ff'", "created_at = 1", "deadline = 1"} {
			if _, err := db.ExecContext(ctx, `UPDATE questions SET `+set+` WHERE thread_id = 't' AND id = ?`, id); err == nil || !strings.Contains(err.Error(), "tollgate: ") {
				t.Errorf("question %s: SET %s: %v, want it refused", id, set, err)
			}
		}
		if _, err := db.ExecContext(ctx, `DELETE FROM questions WHERE thread_id = 't' AND id = ?`, id); err == nil || !strings.Contains(err.Error(), "tollgate: ") {
			t.Errorf("question %s deleted: %v, want it refused", id, err)
		}
	}
	if _, err := db.ExecContext(ctx, `UPDATE questions SET change_seq = change_seq + 100 WHERE thread_id = 't' AND id = 'done'`); err == nil {
		t.Error("a resolved question's change_seq changed: written")
	}
	// REPLACE by key and by seq: nothing inserted, nothing deleted (each
	// is ignored, or refused for its change number, which is not the next).
	for _, stmt := range []string{
		`INSERT OR REPLACE INTO questions (thread_id, id, run_id, call_id, kind, payload, digest, status, answered_by, reason, created_at, change_seq)
VALUES ('t', 'done', 'r', 'c-other', 'approve', '{"command":"rm -rf /"}', 'v2:sha256:ff', 'pending', '', '', 0, (SELECT max(change_seq) + 1 FROM questions))`,
		`REPLACE INTO questions (seq, thread_id, id, run_id, call_id, kind, payload, digest, status, answered_by, reason, created_at, change_seq)
SELECT seq, 't', 'other', 'r', 'c-other', 'approve', NULL, 'v2:sha256:ff', 'pending', '', '', 0, (SELECT max(change_seq) + 1 FROM questions) FROM questions WHERE id = 'done'`,
		`INSERT INTO questions (thread_id, id, run_id, call_id, kind, payload, digest, status, answered_by, reason, created_at, change_seq)
VALUES ('t', 'p', 'r', 'c-other', 'approve', NULL, 'v2:sha256:ff', 'pending', '', '', 0, 999) ON CONFLICT DO NOTHING`,
		`INSERT INTO questions (thread_id, id, run_id, call_id, kind, payload, digest, status, answered_by, reason, created_at, change_seq)
VALUES ('t', 'p', 'r', 'c-other', 'approve', NULL, 'v2:sha256:ff', 'pending', '', '', 0, (SELECT max(change_seq) + 1 FROM questions)) ON CONFLICT DO NOTHING`,
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil && !strings.Contains(err.Error(), "tollgate: ") {
			t.Errorf("%.40s: %v", stmt, err)
		}
	}
	if after := dumpQuestions(t, db); after != before {
		t.Errorf("questions after the refusals:\n%s\nwant\n%s", after, before)
	}

	// The store's writes.
	q, created, err := s.CreateQuestion(ctx, &checkpoint.Question{ThreadID: "t", ID: "p", RunID: "r", CallID: "c-other", Tool: "bash", Kind: "approve", Digest: "v2:sha256:ff"})
	if err != nil || created || q.CallID != "c-p" {
		t.Errorf("question p created again: %+v, created %v, %v; want the one there", q, created, err)
	}
	if _, err := s.ResolveQuestion(ctx, "t", "p", checkpoint.Resolution{Status: checkpoint.QuestionAnswered, Answer: []byte(`{"decision":"deny"}`), By: "alice"}); err != nil {
		t.Errorf("the store's resolution of p: %v", err)
	}
	if q, err := s.GetQuestion(ctx, "t", "p"); err != nil || q.AnsweredBy != "alice" || q.CallID != "c-p" {
		t.Errorf("p after its resolution: %+v, %v", q, err)
	}
}
