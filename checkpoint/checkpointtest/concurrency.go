package checkpointtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

const racers = 16

// race runs f(i) for i in [0, racers) at once and returns the errors.
func race(f func(i int) error) []error {
	errs := make([]error, racers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range racers {
		wg.Go(func() {
			<-start
			errs[i] = f(i)
		})
	}
	close(start)
	wg.Wait()
	return errs
}

// oneWinner checks that exactly one error is nil and every other is
// ErrConflict, and returns the winner.
func oneWinner(t *testing.T, what string, errs []error) int {
	t.Helper()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Errorf("%s: racers %d and %d both won", what, winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, checkpoint.ErrConflict):
			t.Errorf("%s: racer %d: %v, want ErrConflict", what, i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("%s: nobody won", what)
	}
	return winner
}

func testConcurrency(t *testing.T, setup setupFunc) {
	t.Run("AnswerRace", func(t *testing.T) {
		s := setup(t)
		thread := id("thread")
		mustCreateQuestion(t, s, newQuestion(thread, "q"))
		errs := race(func(i int) error {
			_, err := s.ResolveQuestion(ctx(t), thread, "q", answer(fmt.Sprint("reviewer-", i), time.Time{}))
			return err
		})
		w := oneWinner(t, "16 answers", errs)
		got := mustGetQuestion(t, s, thread, "q")
		if got.AnsweredBy != fmt.Sprint("reviewer-", w) {
			t.Errorf("stored answer by %q, but reviewer-%d won", got.AnsweredBy, w)
		}
		checkJSON(t, "Answer", got.Answer, answer(fmt.Sprint("reviewer-", w), time.Time{}).Answer)
	})

	t.Run("MixedResolutionRace", func(t *testing.T) {
		s := setup(t)
		thread := id("thread")
		q := newQuestion(thread, "q")
		q.CreatedAt, q.Deadline = t0, t0.Add(time.Hour)
		mustCreateQuestion(t, s, q)
		kinds := []checkpoint.Resolution{
			answer("alice", t0.Add(time.Minute)),
			{Status: checkpoint.QuestionAborted, By: "abort", At: t0.Add(time.Minute)},
			{Status: checkpoint.QuestionTimedOut, By: "timeout", At: t0.Add(time.Hour)},
		}
		errs := race(func(i int) error {
			_, err := s.ResolveQuestion(ctx(t), thread, "q", kinds[i%len(kinds)])
			return err
		})
		w := oneWinner(t, "answers, aborts and timeouts", errs)
		if got := mustGetQuestion(t, s, thread, "q"); got.Status != kinds[w%len(kinds)].Status {
			t.Errorf("stored status %q, but a %q won", got.Status, kinds[w%len(kinds)].Status)
		}
	})

	t.Run("SaveThreadRace", func(t *testing.T) {
		s := setup(t)
		th := mustCreateThread(t, s, &checkpoint.Thread{ID: id("thread"), Messages: json.RawMessage(`[]`)})
		errs := race(func(i int) error {
			c := *th
			c.Messages = json.RawMessage(fmt.Sprintf(`[%d]`, i))
			return s.SaveThread(ctx(t), &c)
		})
		w := oneWinner(t, "16 saves of version 1", errs)
		got, err := s.LoadThread(ctx(t), th.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Version != 2 {
			t.Errorf("Version = %d, want 2", got.Version)
		}
		checkJSON(t, "Messages", got.Messages, json.RawMessage(fmt.Sprintf(`[%d]`, w)))
	})

	t.Run("CreateQuestionRace", func(t *testing.T) {
		s := setup(t)
		thread := id("thread")
		stored := make([]*checkpoint.Question, racers)
		created := make([]bool, racers)
		errs := race(func(i int) error {
			q := newQuestion(thread, "q")
			q.Payload = json.RawMessage(fmt.Sprintf(`{"racer":%d}`, i))
			var err error
			stored[i], created[i], err = s.CreateQuestion(ctx(t), q)
			return err
		})
		winner := -1
		for i := range racers {
			if errs[i] != nil {
				t.Fatalf("racer %d: %v", i, errs[i])
			}
			if created[i] {
				if winner >= 0 {
					t.Errorf("racers %d and %d both created the question", winner, i)
				}
				winner = i
			}
		}
		if winner < 0 {
			t.Fatalf("nobody created the question")
		}
		for i := range racers {
			checkJSON(t, fmt.Sprint("racer ", i, " sees payload"), stored[i].Payload, json.RawMessage(fmt.Sprintf(`{"racer":%d}`, winner)))
		}
	})

	t.Run("ClaimToolCallRace", func(t *testing.T) {
		s := setup(t)
		testClaimRace(t, []checkpoint.Store{s})
	})

	t.Run("TailingReaderMissesNothing", func(t *testing.T) {
		s := setup(t)
		testTail(t, []checkpoint.Store{s}, s)
	})
}

// testTail appends events from several goroutines (spread over the given
// stores) while a reader follows the log with ListEvents(after = last seen).
// The reader must end with exactly the full log: an event that becomes
// visible after a later one was read would be lost to every follower
// resuming from a position (an SSE client with Last-Event-ID).
func testTail(t *testing.T, writers []checkpoint.Store, reader checkpoint.Store) {
	const appenders, each = 4, 25
	thread := id("thread")
	var wg sync.WaitGroup
	done := make(chan struct{})
	for i := range appenders {
		w := writers[i%len(writers)]
		wg.Go(func() {
			for j := range each {
				if _, err := w.AppendEvent(ctx(t), &checkpoint.Event{ThreadID: thread, Type: fmt.Sprintf("w%d-%d", i, j)}); err != nil {
					t.Errorf("AppendEvent: %v", err)
					return
				}
			}
		})
	}
	go func() { wg.Wait(); close(done) }()

	var seen []int64
	var last int64
	follow := func() {
		es, err := reader.ListEvents(ctx(t), thread, last, 7)
		if err != nil {
			t.Fatalf("ListEvents: %v", err)
		}
		for _, e := range es {
			if e.Seq <= last {
				t.Fatalf("ListEvents after %d returned %d", last, e.Seq)
			}
			last = e.Seq
			seen = append(seen, e.Seq)
		}
	}
	limit := time.After(waitLimit * 3)
loop:
	for {
		select {
		case <-done:
			break loop
		case <-limit:
			t.Fatalf("appenders still busy after %v", waitLimit*3)
		default:
			follow()
		}
	}
	for {
		n := len(seen)
		follow()
		if len(seen) == n {
			break
		}
	}
	all, err := reader.ListEvents(ctx(t), thread, 0, 10*appenders*each)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != appenders*each {
		t.Fatalf("the log holds %d events, want %d", len(all), appenders*each)
	}
	var want []int64
	for _, e := range all {
		want = append(want, e.Seq)
	}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("a follower saw %d events, the log holds %d: an event became visible behind a later one\nseen %v\nlog  %v", len(seen), len(want), seen, want)
	}
}

// testClaimRace has racers (spread over the given stores) claim one tool
// call as executing, each with its own arguments: exactly one claim wins,
// and the stored record is the winner's.
func testClaimRace(t *testing.T, stores []checkpoint.Store) {
	thread := id("thread")
	args := func(i int) json.RawMessage { return json.RawMessage(fmt.Sprintf(`{"racer":%d}`, i)) }
	errs := race(func(i int) error {
		return stores[i%len(stores)].PutToolCall(ctx(t), &checkpoint.ToolCall{
			ThreadID: thread, RunID: "run-1", CallID: "call-1", Tool: "transfer",
			Args: args(i), State: checkpoint.ToolCallExecuting,
		})
	})
	w := oneWinner(t, fmt.Sprintf("%d claims of one call through %d handle(s)", racers, len(stores)), errs)
	for _, s := range stores {
		got := mustToolCall(t, s, thread, "run-1", "call-1")
		if got.State != checkpoint.ToolCallExecuting {
			t.Errorf("State = %q, want executing", got.State)
		}
		checkJSON(t, "Args (the winner's)", got.Args, args(w))
	}
}
