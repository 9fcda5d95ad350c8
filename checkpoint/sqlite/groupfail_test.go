package sqlite

import (
	"errors"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

func poison(t *testing.T, s *Store) {
	t.Helper()
	if _, err := s.w.ExecContext(t.Context(), `PRAGMA foreign_keys = ON;
CREATE TABLE parent (id INTEGER PRIMARY KEY);
CREATE TABLE child (p INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED);
CREATE TRIGGER poison AFTER INSERT ON events WHEN new.type = 'poison' BEGIN INSERT INTO child VALUES (42); END;`); err != nil {
		t.Fatal(err)
	}
}

// An answer and a timeout of one question in one group; COMMIT fails.
// The timeout must not be told "someone else resolved it".
func TestPhantomResolutionInFailedGroup(t *testing.T) {
	s := openFile(t, nil)
	q := &checkpoint.Question{ThreadID: "t", ID: "q", RunID: "r", Kind: "approve"}
	if _, _, err := s.CreateQuestion(t.Context(), q); err != nil {
		t.Fatal(err)
	}
	poison(t, s)
	release := holdWriter(t, s)
	answer := checkpoint.ResolveBatch(q, checkpoint.Resolution{Status: checkpoint.QuestionAnswered, Answer: []byte(`{"decision":"approve"}`), By: "alice"})
	answer.Events = append(answer.Events, &checkpoint.Event{ThreadID: "t", Type: "poison"})
	bs := []*checkpoint.Batch{
		answer,
		checkpoint.ResolveBatch(q, checkpoint.Resolution{Status: checkpoint.QuestionTimedOut, By: "timeout"}),
	}
	wait := commitAll(t, s, nil, bs, 0)
	release()
	out := wait()
	got, _ := s.GetQuestion(t.Context(), "t", "q")
	t.Logf("answer: %v; timeout: %v; stored status %s", out[0].err, out[1].err, got.Status)
	if errors.Is(out[1].err, checkpoint.ErrConflict) && got.Status == checkpoint.QuestionPending {
		t.Errorf("the timeout lost to an answer that never committed: question still pending, told ErrConflict")
	}
}

// Two batches creating one question in one group; COMMIT fails. The second
// must not be told the question exists.
func TestPhantomQuestionInFailedGroup(t *testing.T) {
	s := openFile(t, nil)
	poison(t, s)
	release := holdWriter(t, s)
	mk := func(ev string) *checkpoint.Batch {
		return &checkpoint.Batch{Question: &checkpoint.Question{ThreadID: "t", ID: "q", RunID: "r", Kind: "approve"},
			Events: []*checkpoint.Event{{ThreadID: "t", Type: ev}}}
	}
	bs := []*checkpoint.Batch{mk("poison"), mk("question_asked")}
	wait := commitAll(t, s, nil, bs, 0)
	release()
	out := wait()
	_, gerr := s.GetQuestion(t.Context(), "t", "q")
	t.Logf("first: %v; second: err %v committed %+v; stored: %v", out[0].err, out[1].err, out[1].c, gerr)
	if out[1].err == nil && out[1].c != nil && !out[1].c.Created && errors.Is(gerr, checkpoint.ErrNotFound) {
		t.Errorf("told the question exists (Created false, no error) though none was committed")
	}
}
