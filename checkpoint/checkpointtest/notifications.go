package checkpointtest

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// waitNotification reads ch until a notification of kind for (thread, qid)
// arrives. Anything else on the way (other questions, Resync) is skipped:
// delivery is best effort and subscribers re-read the store.
func waitNotification(t *testing.T, ch <-chan checkpoint.Notification, kind checkpoint.NotificationKind, thread, qid string) {
	t.Helper()
	limit := time.After(waitLimit)
	for {
		select {
		case n, ok := <-ch:
			if !ok {
				t.Fatalf("subscription closed while waiting for %s of %s/%s", kind, thread, qid)
			}
			if n.Kind == kind && n.ThreadID == thread && n.QuestionID == qid {
				return
			}
			if n.Kind == checkpoint.Resync && (n.ThreadID != "" || n.QuestionID != "") {
				t.Errorf("Resync carries keys: %+v", n)
			}
		case <-limit:
			t.Fatalf("no %s notification for %s/%s within %v", kind, thread, qid, waitLimit)
		}
	}
}

// waitClosed drains ch until it is closed.
func waitClosed(t *testing.T, ch <-chan checkpoint.Notification, why string) {
	t.Helper()
	limit := time.After(waitLimit)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-limit:
			t.Fatalf("subscription not closed within %v after %s", waitLimit, why)
		}
	}
}

func testNotifications(t *testing.T, setup setupFunc) {
	t.Run("CreatedAndResolved", func(t *testing.T) {
		s := setup(t)
		ch, err := s.Subscribe(ctx(t))
		if err != nil {
			t.Fatalf("Subscribe: %v", err)
		}
		thread := id("thread")
		q := mustCreateQuestion(t, s, newQuestion(thread, "q1"))
		waitNotification(t, ch, checkpoint.QuestionCreated, thread, q.ID)
		if _, err := s.ResolveQuestion(ctx(t), thread, q.ID, answer("alice", time.Time{})); err != nil {
			t.Fatalf("ResolveQuestion: %v", err)
		}
		waitNotification(t, ch, checkpoint.QuestionResolved, thread, q.ID)

		// Timeouts and aborts are resolutions too.
		q2 := newQuestion(thread, "q2")
		q2.CreatedAt, q2.Deadline = t0, t0.Add(time.Second)
		mustCreateQuestion(t, s, q2)
		waitNotification(t, ch, checkpoint.QuestionCreated, thread, q2.ID)
		if _, err := s.ResolveQuestion(ctx(t), thread, q2.ID, checkpoint.Resolution{Status: checkpoint.QuestionTimedOut, By: "timeout", At: q2.Deadline}); err != nil {
			t.Fatalf("timeout: %v", err)
		}
		waitNotification(t, ch, checkpoint.QuestionResolved, thread, q2.ID)
		mustCreateQuestion(t, s, newQuestion(thread, "q3"))
		if _, err := s.ResolveQuestion(ctx(t), thread, "q3", checkpoint.Resolution{Status: checkpoint.QuestionAborted, By: "abort"}); err != nil {
			t.Fatalf("abort: %v", err)
		}
		waitNotification(t, ch, checkpoint.QuestionResolved, thread, "q3")
	})

	t.Run("EverySubscriber", func(t *testing.T) {
		s := setup(t)
		var chans []<-chan checkpoint.Notification
		for range 3 {
			ch, err := s.Subscribe(ctx(t))
			if err != nil {
				t.Fatalf("Subscribe: %v", err)
			}
			chans = append(chans, ch)
		}
		thread := id("thread")
		mustCreateQuestion(t, s, newQuestion(thread, "q"))
		for _, ch := range chans {
			waitNotification(t, ch, checkpoint.QuestionCreated, thread, "q")
		}
	})

	t.Run("ClosedWhenContextEnds", func(t *testing.T) {
		s := setup(t)
		sctx, cancel := context.WithCancel(ctx(t))
		ch, err := s.Subscribe(sctx)
		if err != nil {
			t.Fatalf("Subscribe: %v", err)
		}
		other, err := s.Subscribe(ctx(t))
		if err != nil {
			t.Fatalf("Subscribe: %v", err)
		}
		cancel()
		waitClosed(t, ch, "its context ended")
		// The other subscription lives on.
		thread := id("thread")
		mustCreateQuestion(t, s, newQuestion(thread, "q"))
		waitNotification(t, other, checkpoint.QuestionCreated, thread, "q")
	})

	t.Run("ClosedWhenStoreCloses", func(t *testing.T) {
		s := setup(t)
		ch, err := s.Subscribe(ctx(t))
		if err != nil {
			t.Fatalf("Subscribe: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		waitClosed(t, ch, "the store closed")
	})
}
