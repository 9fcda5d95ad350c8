package checkpointtest

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

func testTimes(t *testing.T, setup setupFunc) {
	// A deadline centuries away (a timeout of the largest time.Duration, or
	// later) is kept as given: the question can be answered now, and does
	// not time out now.
	t.Run("FarFutureDeadline", func(t *testing.T) {
		s := setup(t) // one store for all the cases: each has a thread of its own
		now := time.Now()
		for name, deadline := range map[string]time.Time{
			"MaxDuration":  now.Add(time.Duration(math.MaxInt64)),
			"300Years":     now.AddDate(300, 0, 0),
			"Year9999":     time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC),
			"Year10000":    time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
			"Year200000AD": time.Date(200000, 6, 1, 12, 0, 0, 0, time.UTC),
		} {
			t.Run(name, func(t *testing.T) {
				q := newQuestion(id("thread"), "far")
				q.CreatedAt = now
				q.Deadline = deadline
				stored := mustCreateQuestion(t, s, q)
				listed, _, err := s.ListQuestions(ctx(t), checkpoint.QuestionFilter{ThreadID: q.ThreadID})
				if err != nil || len(listed) != 1 {
					t.Fatalf("ListQuestions = %d questions, %v; want 1", len(listed), err)
				}
				for _, got := range []*checkpoint.Question{stored, mustGetQuestion(t, s, q.ThreadID, q.ID), listed[0]} {
					checkTime(t, "Deadline", got.Deadline, deadline)
					checkTime(t, "CreatedAt", got.CreatedAt, now)
				}
				if _, err := s.ResolveQuestion(ctx(t), q.ThreadID, q.ID, checkpoint.Resolution{Status: checkpoint.QuestionTimedOut, By: "timeout"}); err == nil {
					t.Fatalf("a timeout now of a question due in %d was accepted", deadline.Year())
				}
				got, err := s.ResolveQuestion(ctx(t), q.ThreadID, q.ID, answer("alice", time.Time{}))
				if err != nil {
					t.Fatalf("answer now of a question due in %d: %v", deadline.Year(), err)
				}
				checkTime(t, "Deadline of the answered question", got.Deadline, deadline)
				if got := mustGetQuestion(t, s, q.ThreadID, q.ID); got.Status != checkpoint.QuestionAnswered {
					t.Errorf("status %q after the answer, want answered", got.Status)
				}
			})
		}
	})

	// A store may be unable to keep some times (PostgreSQL keeps 4713 BC to
	// AD 294276): it refuses them with an error, and never stores another
	// time instead. The memory store keeps them all.
	t.Run("ExtremeTimesKeptOrRefused", func(t *testing.T) {
		s := setup(t)
		for name, tm := range map[string]time.Time{
			"Year1":            time.Date(1, 1, 1, 0, 0, 0, 1000, time.UTC),
			"Year1000":         time.Date(1000, 2, 3, 4, 5, 6, 7000, time.UTC),
			"Year1500":         time.Date(1500, 2, 3, 4, 5, 6, 7000, time.UTC),
			"Year-300000":      time.Date(-300000, 1, 1, 0, 0, 0, 0, time.UTC),
			"Year300000":       time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC),
			"UnixSeconds2^62":  time.Unix(1<<62, 0),
			"UnixSeconds-2^62": time.Unix(-1<<62, 0),
		} {
			t.Run(name, func(t *testing.T) {
				thread := id("thread")

				th := &checkpoint.Thread{ID: thread, Status: checkpoint.ThreadIdle, RunID: "run-1", Messages: []byte("[]"), CreatedAt: tm}
				if err := s.CreateThread(ctx(t), th); err == nil {
					got, err := s.LoadThread(ctx(t), thread)
					if err != nil {
						t.Fatalf("LoadThread: %v", err)
					}
					checkTime(t, "Thread.CreatedAt", got.CreatedAt, tm)
				} else if _, lerr := s.LoadThread(ctx(t), thread); !errors.Is(lerr, checkpoint.ErrNotFound) {
					t.Errorf("CreateThread refused (%v), yet LoadThread = %v", err, lerr)
				}

				for field, q := range map[string]*checkpoint.Question{
					"Deadline":  {ThreadID: thread, ID: "deadline", Kind: "approve", CreatedAt: t0, Deadline: tm},
					"CreatedAt": {ThreadID: thread, ID: "created", Kind: "approve", CreatedAt: tm},
				} {
					if _, _, err := s.CreateQuestion(ctx(t), q); err != nil {
						if _, gerr := s.GetQuestion(ctx(t), thread, q.ID); !errors.Is(gerr, checkpoint.ErrNotFound) {
							t.Errorf("CreateQuestion(%s %v) refused (%v), yet GetQuestion = %v", field, tm, err, gerr)
						}
						continue
					}
					got := mustGetQuestion(t, s, thread, q.ID)
					checkTime(t, "Question."+field, got.Deadline, q.Deadline)
					checkTime(t, "Question."+field, got.CreatedAt, q.CreatedAt)
				}

				mustCreateQuestion(t, s, &checkpoint.Question{ThreadID: thread, ID: "resolved", Kind: "approve", CreatedAt: t0})
				if got, err := s.ResolveQuestion(ctx(t), thread, "resolved", checkpoint.Resolution{Status: checkpoint.QuestionAborted, By: "abort", At: tm}); err == nil {
					checkTime(t, "ResolvedAt (returned)", got.ResolvedAt, tm)
					checkTime(t, "ResolvedAt", mustGetQuestion(t, s, thread, "resolved").ResolvedAt, tm)
				} else if got := mustGetQuestion(t, s, thread, "resolved"); got.Status != checkpoint.QuestionPending {
					t.Errorf("ResolveQuestion(At %v) refused (%v), yet the question is %s", tm, err, got.Status)
				}

				e := &checkpoint.Event{ThreadID: thread, RunID: "run-1", Type: "x", At: tm}
				if _, err := s.AppendEvent(ctx(t), e); err == nil {
					evs, err := eventsOfType(t, s, thread, "x")
					if err != nil || len(evs) != 1 {
						t.Fatalf("ListEvents = %d events, %v; want 1", len(evs), err)
					}
					checkTime(t, "Event.At", evs[0].At, tm)
				} else if evs, lerr := eventsOfType(t, s, thread, "x"); lerr != nil || len(evs) != 0 {
					t.Errorf("AppendEvent refused (%v), yet ListEvents = %d events, %v", err, len(evs), lerr)
				}
			})
		}
	})
}

// eventsOfType lists the thread's events of one type.
func eventsOfType(t *testing.T, s checkpoint.Store, thread, typ string) ([]*checkpoint.Event, error) {
	t.Helper()
	evs, err := s.ListEvents(ctx(t), thread, 0, 0)
	var out []*checkpoint.Event
	for _, e := range evs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out, err
}
