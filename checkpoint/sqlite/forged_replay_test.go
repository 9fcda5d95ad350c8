package sqlite_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// A hand writer of the file cannot resolve a question without an event of
// its own (schema 7): it may not reuse the question_resolved event of an
// earlier resolution. Schema 7's trigger finds "the event inserted just
// before" by last_insert_rowid(), which any insert into a rowid table with
// an explicit rowid sets to bob's old "deny" event's seq: a row of
// notify_deliveries (or questions), and since schema 12 of messages or
// tool_calls. A question deleted and created again pending (for another
// call, another digest) is then "approved by bob" with no event of that
// in the log (bob's only event says deny). Pre-existing (schema 7's tie);
// schema 12 adds two more tables that make it.
func TestForgedResolutionReusingAnOldEvent(t *testing.T) {
	ctx := context.Background()
	s, db := openMigrated(t, filepath.Join(t.TempDir(), "tollgate.db"))
	if _, _, err := s.CreateQuestion(ctx, &checkpoint.Question{ThreadID: "t", ID: "q", RunID: "r", CallID: "c", Tool: "bash", Kind: "approve", Digest: "v2:sha256:00"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ResolveQuestion(ctx, "t", "q", checkpoint.Resolution{Status: checkpoint.QuestionAnswered, Answer: []byte(`{"decision":"deny"}`), By: "bob"}); err != nil {
		t.Fatal(err)
	}
	evs, err := s.ListEvents(ctx, "t", 0, 0)
	if err != nil || len(evs) == 0 {
		t.Fatal(evs, err)
	}
	deny := evs[len(evs)-1]
	if deny.Type != checkpoint.EventQuestionResolved {
		t.Fatalf("last event %+v", deny)
	}

	for name, setRowid := range map[string]string{
		"messages": `INSERT INTO messages (rowid, thread_id, position, body) VALUES (?, 'x', 0, '0')`,
		"notify_deliveries": `INSERT INTO notify_deliveries (rowid, id, event, thread_id, question_id, channel, target, state, created_at, updated_at)
VALUES (?, 'x', 'x', 'x', 'x', 'x', 'x', 'dead', 0, 0)`,
	} {
		t.Run(name, func(t *testing.T) {
			conn, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			tx, err := conn.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			// The question again, pending, for another call. Since schema
			// 13 a question is never deleted: the forgery stops here.
			if _, err := tx.ExecContext(ctx, `DELETE FROM questions WHERE thread_id = 't' AND id = 'q';
INSERT INTO questions (thread_id, id, run_id, call_id, kind, payload, digest, status, answered_by, reason, created_at, change_seq)
VALUES ('t', 'q', 'r', 'c-other', 'approve', '{"command":"rm -rf /"}', 'v2:sha256:ff', 'pending', '', '', 0, 999)`); err != nil {
				if !strings.Contains(err.Error(), "tollgate: ") {
					t.Fatal(err)
				}
				return
			}
			if _, err := tx.ExecContext(ctx, setRowid, deny.Seq); err != nil {
				t.Fatal(err)
			}
			_, err = tx.ExecContext(ctx, `UPDATE questions SET status = 'answered', answer = '{"decision":"approve"}', answered_by = 'bob', resolved_at = 1
WHERE thread_id = 't' AND id = 'q'`)
			if err == nil {
				t.Errorf("a resolution approved by bob with no event of its own (bob's event %d says deny): written", deny.Seq)
			}
		})
	}
}

// What a reviewer saw stays what they answered: a hand writer may not
// point a resolved question at another call (call_id, payload, digest,
// tool, kind, run), which would carry bob's approval over to a call he
// never saw. Schema 7's questions_resolution_final covers status, answer,
// answered_by, reason and resolved_at only. Pre-existing.
func TestForgedRepointingAResolvedQuestion(t *testing.T) {
	ctx := context.Background()
	s, db := openMigrated(t, filepath.Join(t.TempDir(), "tollgate.db"))
	if _, _, err := s.CreateQuestion(ctx, &checkpoint.Question{ThreadID: "t", ID: "q", RunID: "r", CallID: "c", Tool: "bash", Kind: "approve",
		Payload: []byte(`{"command":"ls"}`), Digest: "v2:sha256:00"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ResolveQuestion(ctx, "t", "q", checkpoint.Resolution{Status: checkpoint.QuestionAnswered, Answer: []byte(`{"decision":"approve"}`), By: "bob"}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `UPDATE questions SET call_id = 'c-other', payload = '{"command":"rm -rf /"}', digest = 'v2:sha256:ff'
WHERE thread_id = 't' AND id = 'q'`); err == nil {
		q, _ := s.GetQuestion(ctx, "t", "q")
		t.Errorf("an approved question pointed at another call: written (%s %s %s, answered by %s)", q.CallID, q.Payload, q.Digest, q.AnsweredBy)
	}
}
