package postgres

import (
	"context"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// The audit log is append-only for a client with SQL access as
// tollgate's role (schema 12): an event is never changed, deleted or
// truncated away; the store still appends.
func TestEventsAppendOnly(t *testing.T) {
	s, pool := currentSchema(t)
	ctx := context.Background()
	q := &checkpoint.Question{ThreadID: "t", ID: "q", RunID: "r", CallID: "c", Tool: "bash", Kind: "approve", Digest: "v2:sha256:00"}
	if _, _, err := s.CreateQuestion(ctx, q); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ResolveQuestion(ctx, "t", "q", checkpoint.Resolution{Status: checkpoint.QuestionAnswered, Answer: []byte(`{"decision":"deny"}`), By: "bob"}); err != nil {
		t.Fatal(err)
	}
	for what, stmt := range map[string]string{
		"rewriting an answer's entry": `UPDATE events SET data = jsonb_set(data::jsonb, '{decision}', '"approve"')::json WHERE type = 'question_resolved'`,
		"renumbering an event":        `UPDATE events SET seq = seq + 1`,
		"deleting the newest event":   `DELETE FROM events WHERE seq = (SELECT max(seq) FROM events)`,
		"deleting every event":        `DELETE FROM events`,
		"truncating the log":          `TRUNCATE events`,
	} {
		if _, err := pool.Exec(ctx, stmt); !auditRefusal(err) {
			t.Errorf("%s: %v, want it refused (TGAUD)", what, err)
		}
	}
	evs, err := s.ListEvents(ctx, "t", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Type != checkpoint.EventQuestionResolved {
		t.Fatalf("the log after the refusals: %+v", evs)
	}
	if _, err := s.AppendEvent(ctx, &checkpoint.Event{ThreadID: "t", RunID: "r", Type: "note"}); err != nil {
		t.Fatalf("appending after the refusals: %v", err)
	}
}
