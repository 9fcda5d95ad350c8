package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/internal/cursor"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
)

func q(thread, id string) *checkpoint.Question {
	return &checkpoint.Question{ThreadID: thread, ID: id, RunID: "run", Tool: "bash", Kind: "approve", Payload: json.RawMessage(`{}`)}
}

// A resolution commits but its notification is never sent (the writer
// killed between COMMIT and the notify transaction, the notify cancelled
// or failing): meanwhile a later-numbered resolution was notified, so the
// hub's mark is above the lost one and the safety poll never finds it.
func TestLostNotificationFoundByPoll(t *testing.T) {
	s, _ := openTest(t, &Options{PollInterval: 200 * time.Millisecond})
	ctx := t.Context()
	for _, id := range []string{"qa", "qb"} {
		if _, _, err := s.CreateQuestion(ctx, q("t", id)); err != nil {
			t.Fatal(err)
		}
	}
	ch, err := s.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A: the batch's statements up to and including COMMIT, no notify.
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, writersLock, int32(lockClass), s.writersKey); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, resolveQuestion, "t", "qa", "answered", `{"ok":true}`, "alice", "", time.Now()); err != nil {
		t.Fatal(err)
	}
	// With its audit entry, as every resolution (schema 7).
	if _, err := tx.Exec(ctx, `INSERT INTO events (seq, thread_id, run_id, type, data, at)
SELECT (pg_current_xact_id()::text::bigint + base) * 65536, 't', 'r', 'question_resolved', '{"question_id":"qa","status":"answered","by":"alice"}', now() FROM seq_base`); err != nil {
		t.Fatal(err)
	}
	// B: a normal resolution, numbered above A, committed and notified.
	if _, err := s.ResolveQuestion(ctx, "t", "qb", checkpoint.Resolution{Status: checkpoint.QuestionAnswered, Answer: json.RawMessage(`{}`), By: "bob"}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil { // A committed; its process dies here
		t.Fatal(err)
	}
	got := map[string]bool{}
	deadline := time.After(5 * time.Second) // 25 polls
	for !got["qa"] {
		select {
		case n := <-ch:
			t.Logf("notification %+v", n)
			if n.Kind == checkpoint.Resync {
				return
			}
			got[n.QuestionID] = true
		case <-deadline:
			t.Fatalf("qa's resolution committed but never reached subscribers in 5s (25 safety polls); got %v", got)
		}
	}
}

// ListQuestions oldest first returns a page with an unsettled question
// after eventWait, and its cursor moves past a lower-numbered question
// that commits later: that question is never listed.
func TestOldestFirstNeverSkipsASlowWriter(t *testing.T) {
	s, _ := openTest(t, &Options{MaxConns: 8})
	ctx := t.Context()
	slowDone := make(chan error, 1)
	numbered := make(chan struct{})
	go func() {
		slowDone <- pgx.BeginFunc(context.Background(), s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, writersLock, int32(lockClass), s.writersKey); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, createQuestion, "t", "late", "run", "", "bash", "approve", nil, "", time.Now(), nil); err != nil {
				return err
			}
			close(numbered)
			time.Sleep(2500 * time.Millisecond) // a slow commit: a standby's ack, a row lock, a big batch
			return nil
		})
	}()
	<-numbered
	if _, _, err := s.CreateQuestion(ctx, q("t", "early")); err != nil {
		t.Fatal(err)
	}
	// The list cannot go past "late" (numbered lower, still writing) for
	// more than a moment: with nothing before it, it says so rather than
	// return a page a cursor would take past it.
	f := checkpoint.QuestionFilter{Status: checkpoint.QuestionPending, Order: checkpoint.OldestFirst}
	qs, _, err := s.ListQuestions(ctx, f)
	if err != nil && !strings.Contains(err.Error(), "held the list back") {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var last int64
	for _, x := range qs {
		seen[x.ID] = true
		if err := s.pool.QueryRow(ctx, `SELECT seq FROM questions WHERE thread_id = 't' AND id = $1`, x.ID).Scan(&last); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("first page: %d questions", len(qs))
	if err := <-slowDone; err != nil {
		t.Fatal(err)
	}
	if last > 0 {
		f.After = cursor.Question{Order: checkpoint.OldestFirst, Seq: last}.Encode()
	}
	qs, _, err = s.ListQuestions(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range qs {
		seen[x.ID] = true
	}
	if !seen["late"] || !seen["early"] {
		t.Fatalf("paging oldest first saw %v; want both late and early", seen)
	}
}

// Batch with an existing question and a resolution that loses: the
// interface (and the memory store) answer with the resolution's error;
// PostgreSQL runs the question's statement first and returns no error.
func TestLostResolutionBeforeExistingQuestion(t *testing.T) {
	s, _ := openTest(t, nil)
	ctx := t.Context()
	for _, st := range []checkpoint.Store{memory.New(), s} {
		if _, _, err := st.CreateQuestion(ctx, q("t", "exists")); err != nil {
			t.Fatal(err)
		}
		if _, _, err := st.CreateQuestion(ctx, q("t", "done")); err != nil {
			t.Fatal(err)
		}
		if _, err := st.ResolveQuestion(ctx, "t", "done", checkpoint.Resolution{Status: checkpoint.QuestionAborted, By: "x"}); err != nil {
			t.Fatal(err)
		}
		b := checkpoint.ResolveBatch(q("t", "done"), checkpoint.Resolution{Status: checkpoint.QuestionAnswered, By: "y"})
		b.Question = q("t", "exists")
		_, err := st.Commit(ctx, b)
		t.Logf("%T: Commit = %v", st, err)
		if !errors.Is(err, checkpoint.ErrConflict) {
			t.Errorf("%T: Commit = %v, want ErrConflict (the lost compare-and-set is the answer, also when the question exists)", st, err)
		}
	}
}
