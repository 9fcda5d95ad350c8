package checkpointtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

func testShared(t *testing.T, setup func(t *testing.T) (checkpoint.Store, checkpoint.Store)) {
	t.Run("ReadOthersWrites", func(t *testing.T) { testSharedReadOthersWrites(t, setup) })

	t.Run("NotifyAcross", func(t *testing.T) { testSharedNotifyAcross(t, setup) })

	t.Run("AnswerRaceAcross", func(t *testing.T) { testSharedAnswerRaceAcross(t, setup) })

	t.Run("SaveRaceAcross", func(t *testing.T) { testSharedSaveRaceAcross(t, setup) })

	t.Run("ClaimAcross", func(t *testing.T) { testSharedClaimAcross(t, setup) })

	// A cursor is no state of the handle that made it.
	t.Run("CursorAcross", func(t *testing.T) { testSharedCursorAcross(t, setup) })

	t.Run("ClaimRaceAcross", func(t *testing.T) { testSharedClaimRaceAcross(t, setup) })

	t.Run("TailAcross", func(t *testing.T) { testSharedTailAcross(t, setup) })
}

func testSharedReadOthersWrites(t *testing.T, setup func(t *testing.T) (checkpoint.Store, checkpoint.Store)) {
	a, b := setup(t)
	th := mustCreateThread(t, a, &checkpoint.Thread{ID: id("thread"), Messages: json.RawMessage(`["a"]`)})
	got, err := b.LoadThread(ctx(t), th.ID)
	if err != nil {
		t.Fatalf("b.LoadThread: %v", err)
	}
	got.Messages = json.RawMessage(`["b"]`)
	if err := b.SaveThread(ctx(t), got); err != nil {
		t.Fatalf("b.SaveThread: %v", err)
	}
	if err := a.SaveThread(ctx(t), th); !errors.Is(err, checkpoint.ErrConflict) {
		t.Fatalf("a.SaveThread(stale) = %v, want ErrConflict", err)
	}
	q := mustCreateQuestion(t, a, newQuestion(th.ID, "q"))
	if _, created, err := b.CreateQuestion(ctx(t), newQuestion(th.ID, "q")); err != nil || created {
		t.Fatalf("b.CreateQuestion(same) = created %v, %v; want the stored one", created, err)
	}
	if _, err := b.ResolveQuestion(ctx(t), q.ThreadID, q.ID, answer("bob", time.Time{})); err != nil {
		t.Fatalf("b.ResolveQuestion: %v", err)
	}
	if _, err := a.ResolveQuestion(ctx(t), q.ThreadID, q.ID, answer("alice", time.Time{})); !errors.Is(err, checkpoint.ErrConflict) {
		t.Fatalf("a.ResolveQuestion after b's answer = %v, want ErrConflict", err)
	}
	if got := mustGetQuestion(t, a, q.ThreadID, q.ID); got.AnsweredBy != "bob" {
		t.Errorf("answered by %q, want bob", got.AnsweredBy)
	}
}

func testSharedNotifyAcross(t *testing.T, setup func(t *testing.T) (checkpoint.Store, checkpoint.Store)) {
	a, b := setup(t)
	cha, err := a.Subscribe(ctx(t))
	if err != nil {
		t.Fatalf("a.Subscribe: %v", err)
	}
	chb, err := b.Subscribe(ctx(t))
	if err != nil {
		t.Fatalf("b.Subscribe: %v", err)
	}
	thread := id("thread")
	mustCreateQuestion(t, a, newQuestion(thread, "q"))
	waitNotification(t, chb, checkpoint.QuestionCreated, thread, "q")
	if _, err := b.ResolveQuestion(ctx(t), thread, "q", answer("bob", time.Time{})); err != nil {
		t.Fatalf("b.ResolveQuestion: %v", err)
	}
	waitNotification(t, cha, checkpoint.QuestionResolved, thread, "q")
}

func testSharedAnswerRaceAcross(t *testing.T, setup func(t *testing.T) (checkpoint.Store, checkpoint.Store)) {
	a, b := setup(t)
	thread := id("thread")
	mustCreateQuestion(t, a, newQuestion(thread, "q"))
	errs := race(func(i int) error {
		s := a
		if i%2 == 1 {
			s = b
		}
		_, err := s.ResolveQuestion(ctx(t), thread, "q", answer(fmt.Sprint("reviewer-", i), time.Time{}))
		return err
	})
	w := oneWinner(t, "16 answers through two handles", errs)
	if got := mustGetQuestion(t, b, thread, "q"); got.AnsweredBy != fmt.Sprint("reviewer-", w) {
		t.Errorf("answered by %q, but reviewer-%d won", got.AnsweredBy, w)
	}
}

func testSharedSaveRaceAcross(t *testing.T, setup func(t *testing.T) (checkpoint.Store, checkpoint.Store)) {
	a, b := setup(t)
	th := mustCreateThread(t, a, &checkpoint.Thread{ID: id("thread")})
	errs := race(func(i int) error {
		s := a
		if i%2 == 1 {
			s = b
		}
		c := *th
		return s.SaveThread(ctx(t), &c)
	})
	oneWinner(t, "16 saves through two handles", errs)
}

func testSharedClaimAcross(t *testing.T, setup func(t *testing.T) (checkpoint.Store, checkpoint.Store)) {
	a, b := setup(t)
	thread := id("thread")
	tc := &checkpoint.ToolCall{
		ThreadID: thread, RunID: "run-1", CallID: "call-1", Tool: "transfer",
		Args: json.RawMessage(`{"amount":100}`), State: checkpoint.ToolCallExecuting,
	}
	if err := a.PutToolCall(ctx(t), tc); err != nil {
		t.Fatalf("a.PutToolCall(executing): %v", err)
	}
	stored := mustToolCall(t, b, thread, "run-1", "call-1")
	other := *tc
	other.Args = json.RawMessage(`{"amount":999}`)
	if err := b.PutToolCall(ctx(t), &other); !errors.Is(err, checkpoint.ErrConflict) {
		t.Fatalf("b.PutToolCall(executing) after a's claim = %v, want ErrConflict", err)
	}
	checkToolCall(t, "after b's refused claim", mustToolCall(t, a, thread, "run-1", "call-1"), stored)
	done := *tc
	done.State, done.Result = checkpoint.ToolCallDone, json.RawMessage(`{"content":"transferred"}`)
	if err := b.PutToolCall(ctx(t), &done); err != nil {
		t.Fatalf("b.PutToolCall(done): %v", err)
	}
	if got := mustToolCall(t, a, thread, "run-1", "call-1"); got.State != checkpoint.ToolCallDone {
		t.Errorf("a sees state %q after b's done, want done", got.State)
	}
}

func testSharedCursorAcross(t *testing.T, setup func(t *testing.T) (checkpoint.Store, checkpoint.Store)) {
	a, b := setup(t)
	thread := id("thread")
	for i := range 5 {
		q := newQuestion(thread, fmt.Sprint("q", i))
		if i%2 == 0 {
			q.CreatedAt, q.Deadline = t0, t0.Add(time.Duration(5-i)*time.Minute)
		}
		mustCreateQuestion(t, a, q)
	}
	for _, o := range orders {
		f := checkpoint.QuestionFilter{ThreadID: thread, Order: o, Limit: 2}
		var got []string
		for i := 0; ; i++ {
			qs, next, err := []checkpoint.Store{a, b}[i%2].ListQuestions(ctx(t), f)
			if err != nil {
				t.Fatalf("%s, page %d: %v", o, i, err)
			}
			for _, q := range qs {
				got = append(got, q.ID)
			}
			if next == "" {
				break
			}
			f.After = next
		}
		all, _, err := b.ListQuestions(ctx(t), checkpoint.QuestionFilter{ThreadID: thread, Order: o})
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, q := range all {
			want = append(want, q.ID)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) || len(want) != 5 {
			t.Errorf("%s, pages from both handles in turn: %v, want %v", o, got, want)
		}
	}
}

func testSharedClaimRaceAcross(t *testing.T, setup func(t *testing.T) (checkpoint.Store, checkpoint.Store)) {
	a, b := setup(t)
	testClaimRace(t, []checkpoint.Store{a, b})
}

func testSharedTailAcross(t *testing.T, setup func(t *testing.T) (checkpoint.Store, checkpoint.Store)) {
	a, b := setup(t)
	testTail(t, []checkpoint.Store{a, b}, b)
}
