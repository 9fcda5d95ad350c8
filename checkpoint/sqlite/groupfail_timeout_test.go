package sqlite

import (
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
)

// agent.TimeOut, losing in a group to an answer whose COMMIT fails,
// returns the still-pending question as the resolution (no error).
func TestTimeOutReturnsPendingAfterFailedGroup(t *testing.T) {
	s := openFile(t, nil)
	now := time.Now()
	q := &checkpoint.Question{ThreadID: "t", ID: "q", RunID: "r", Kind: "approve", CreatedAt: now.Add(-time.Hour), Deadline: now.Add(time.Minute)}
	stored, _, err := s.CreateQuestion(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	poison(t, s)
	release := holdWriter(t, s)
	done := make(chan error, 1)
	go func() {
		b := checkpoint.ResolveBatch(stored, checkpoint.Resolution{Status: checkpoint.QuestionAnswered, Answer: []byte(`{"decision":"approve"}`), By: "alice", At: now})
		b.Events = append(b.Events, &checkpoint.Event{ThreadID: "t", Type: "poison"})
		_, err := s.Commit(t.Context(), b)
		done <- err
	}()
	waitQueued(t, s, 1)
	type res struct {
		q   *checkpoint.Question
		won bool
		err error
	}
	tout := make(chan res, 1)
	go func() {
		r, won, err := agent.TimeOut(t.Context(), s, stored, now.Add(2*time.Minute))
		tout <- res{r, won, err}
	}()
	waitQueued(t, s, 2)
	release()
	t.Logf("answer: %v", <-done)
	r := <-tout
	if r.err == nil && r.q != nil && r.q.Status == checkpoint.QuestionPending {
		t.Errorf("TimeOut returned (status %s, won %v, err nil): a pending question handed to the run as its resolution", r.q.Status, r.won)
	}
}
