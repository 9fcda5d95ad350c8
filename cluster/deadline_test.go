package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// Checked sound: a deadline further away than deadlineEarly (its job is
// scheduled, then snoozes in short steps) fires once, on time, on one of
// two replicas.
func TestLongDeadlineFiresOnTime(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	a := w.replica(t, 2*time.Second, 8*time.Second)
	b := w.replica(t, 2*time.Second, 8*time.Second)
	if _, _, err := a.h.Prompt(ctx, "t1", "t1\n$ echo late", nil); err != nil {
		t.Fatal(err)
	}
	q := pending(t, a.store, "t1", 1)[0]
	idle(t, a.store, "t1")
	got, err := a.store.GetQuestion(ctx, "t1", q.ID)
	if err != nil {
		t.Fatal(err)
	}
	late := got.ResolvedAt.Sub(q.Deadline)
	t.Logf("deadline %s, resolved %s (%s late), status %s; fired a=%d b=%d", q.Deadline.Format(time.RFC3339Nano), got.ResolvedAt.Format(time.RFC3339Nano), late, got.Status, a.c.Stats().DeadlinesFired, b.c.Stats().DeadlinesFired)
	if got.Status != checkpoint.QuestionTimedOut || late < 0 || late > time.Second {
		t.Errorf("status %s, %s late", got.Status, late)
	}
	if n := a.c.Stats().DeadlinesFired + b.c.Stats().DeadlinesFired; n != 1 {
		t.Errorf("fired %d times", n)
	}
}
