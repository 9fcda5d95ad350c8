package cluster_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/host"
)

// failingModel fails its first n calls, then is the counting model.
type failingModel struct {
	w     *world
	calls *atomic.Int32
	n     int32
}

func (m failingModel) Complete(ctx context.Context, req *agent.Request, onText func(string)) (*agent.Message, error) {
	if m.calls.Add(1) <= m.n {
		return nil, errors.New("the model is down")
	}
	return countingModel{m.w}.Complete(ctx, req, onText)
}

func status(t *testing.T, r *reviewReplica, thread string) host.RunStatus {
	t.Helper()
	th, err := r.pg.LoadThread(context.Background(), thread)
	if err != nil {
		t.Fatal(err)
	}
	return r.h.States(context.Background(), []*checkpoint.Thread{th})[0]
}

// Issue 22 item 8: a run that stops with an error reads failed, with why,
// how many times and when it is tried again, from every replica — it read
// failed on the replica that drove it and parked or active on the others
// — and is tried again by itself, with backoff, not only by the reconcile
// ten minutes later (off here).
func TestFailedRunSameEverywhereAndRetried(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	var calls atomic.Int32
	// Tried again 2 s after it fails: long enough to look at it failed.
	a := w.reviewReplica(t, reviewOpts{provider: failingModel{w, &calls, 1}, retryAfter: 2 * time.Second})
	b := w.reviewReplica(t, reviewOpts{provider: failingModel{w, &calls, 1}, retryAfter: 2 * time.Second})
	if _, _, err := a.h.Prompt(ctx, "t1", "t1\n$ echo one", nil); err != nil {
		t.Logf("prompt: %v", err)
	}
	eventually(t, "the run to stop on a", 10*time.Second, func() (bool, error) {
		return calls.Load() >= 1 && a.h.Stats().Active == 0, nil
	})
	for _, r := range []*reviewReplica{a, b} {
		if st := status(t, r, "t1"); st.State != host.RunFailed || st.Err == nil || st.Attempts != 1 || st.RetryAt.IsZero() {
			t.Errorf("a replica reports %+v: want failed, with the model's error, 1 attempt and a retry time", st)
		}
	}
	// Tried again by itself: it asks, and waits.
	pending(t, a.pg, "t1", 1)
	eventually(t, "both replicas to report the run waiting", 10*time.Second, func() (bool, error) {
		return status(t, a, "t1").State == host.RunParked && status(t, b, "t1").State == host.RunParked, nil
	})
}

// A run that keeps failing is tried Retries times in a row, then left
// failed — no retry time, no job waiting — for a person to resume (once
// more) or abort.
func TestFailedRunRetriesAreBounded(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	var calls atomic.Int32
	a := w.reviewReplica(t, reviewOpts{provider: failingModel{w, &calls, 1000}, retries: 2, retryAfter: 100 * time.Millisecond})
	if _, _, err := a.h.Prompt(ctx, "t1", "t1\n$ echo one", nil); err != nil {
		t.Logf("prompt: %v", err)
	}
	eventually(t, "two failures in a row", 20*time.Second, func() (bool, error) {
		st := status(t, a, "t1")
		return st.State == host.RunFailed && st.Attempts == 2, nil
	})
	st := status(t, a, "t1")
	if !st.RetryAt.IsZero() || st.Err == nil {
		t.Errorf("after the last attempt: %+v, want no retry time and the error", st)
	}
	eventually(t, "no drive job left (the last one's completion recorded)", 10*time.Second, func() (bool, error) {
		var jobs int
		err := a.pg.Pool().QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'tollgate_drive' AND state NOT IN ('completed', 'discarded', 'cancelled')`).Scan(&jobs)
		return jobs == 0, err
	})
	if n := calls.Load(); n != 2 {
		t.Errorf("the model was called %d times, want 2", n)
	}
	if err := a.h.Resume(ctx, "t1"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the resumed run to fail once more", 10*time.Second, func() (bool, error) {
		st := status(t, a, "t1")
		return calls.Load() == 3 && st.State == host.RunFailed && st.Attempts == 3, nil
	})
}
