package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/postgres"
	"github.com/tollgate-ai/tollgate/host"
)

func reviewApprove(t *testing.T, r *reviewReplica, q *checkpoint.Question) {
	t.Helper()
	a, _ := json.Marshal(map[string]any{"decision": "approve", "digest": q.Digest})
	if _, err := r.h.Answer(context.Background(), q.ThreadID, q.ID, a, "alice"); err != nil {
		t.Fatalf("answering %s: %v", q.ID, err)
	}
}

// Found in review (fixed): Abort taken by a replica that does not drive the run (behind a
// load balancer, most of them) goes on without the lease
// (host/host.go Abort, "case !errors.Is(err, ErrHeldElsewhere)") and
// returns success while the run goes on on its replica: its tool is not
// cancelled and runs to its end after the user was told the run was
// aborted.
func TestAbortOnAnotherReplicaLeavesTheToolRunning(t *testing.T) {
	w := newWorld(t)
	w.gate = make(chan struct{})
	ctx := context.Background()
	a := w.replica(t, 2*time.Second, time.Hour)
	b := w.replica(t, 2*time.Second, time.Hour)
	if _, _, err := a.h.Prompt(ctx, "t1", "t1\n$ echo once", nil); err != nil {
		t.Fatal(err)
	}
	q := pending(t, a.store, "t1", 1)[0]
	approve(t, a, q)
	eventually(t, "the call to be claimed", 10*time.Second, func() (bool, error) {
		calls, err := a.store.ListToolCalls(ctx, "t1", q.RunID)
		return len(calls) == 1 && calls[0].State == checkpoint.ToolCallExecuting, err
	})
	// The abort comes to the replica that does not drive the run.
	other := b
	if leaseOwner(t, a.store, "t1") == b.c.ID() {
		other = a
	}
	if err := other.h.Abort(ctx, "t1", "stop it"); err != nil {
		t.Fatalf("abort: %v", err)
	}
	th, err := a.store.LoadThread(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after Abort returned: thread %s; lease held by the driver: %v", th.Status, leaseOwner(t, a.store, "t1") != "")
	// The tool would now finish.
	close(w.gate)
	time.Sleep(time.Second)
	w.mu.Lock()
	ran := w.ran["echo once"]
	w.mu.Unlock()
	if ran != 0 {
		t.Errorf("Abort returned success on one replica, and then the run's tool ran to its end on the other (%d run): the run in progress was not stopped", ran)
	}
}

// Found in review (fixed): the same, with the call claimed by the driving replica between
// the abort's read of the call records and its write: the abort records
// the call as "aborted" (what the model and the reviewer read: it did not
// run) and the tool runs anyway.
func TestAbortOnAnotherReplicaRecordsAbortedYetTheToolRuns(t *testing.T) {
	w := newWorld(t)
	w.gate = make(chan struct{})
	ctx := context.Background()

	listed, claimed, claiming := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var onceClaim, onceList sync.Once
	var armA, armC bool
	var claimErr error
	var mu sync.Mutex
	holdA := &holdStore{
		beforeCommit: func(ctx context.Context, b *checkpoint.Batch) {
			mu.Lock()
			armed := armA
			mu.Unlock()
			if !armed || len(b.ToolCalls) != 1 || b.ToolCalls[0].State != checkpoint.ToolCallExecuting {
				return
			}
			onceClaim.Do(func() {
				close(claiming)
				<-listed
			})
		},
		afterCommit: func(ctx context.Context, b *checkpoint.Batch, err error) {
			if len(b.ToolCalls) == 1 && b.ToolCalls[0].State == checkpoint.ToolCallExecuting {
				mu.Lock()
				claimErr = err
				mu.Unlock()
				select {
				case <-claimed:
				default:
					close(claimed)
				}
			}
		},
	}
	holdC := &holdStore{
		afterListToolCalls: func(ctx context.Context) {
			mu.Lock()
			armed := armC
			mu.Unlock()
			if !armed {
				return
			}
			onceList.Do(func() {
				close(listed)
				<-claimed
			})
		},
	}
	a := w.reviewReplica(t, reviewOpts{hold: holdA})
	// c is a command line's host (tollgate abort on the store): it works
	// no jobs, so a drives the run.
	c := w.reviewReplica(t, reviewOpts{hold: holdC, noStart: true})
	if _, _, err := a.h.Prompt(ctx, "t1", "t1\n$ echo once", nil); err != nil {
		t.Fatal(err)
	}
	q := pending(t, a.pg, "t1", 1)[0]
	mu.Lock()
	armA, armC = true, true
	mu.Unlock()
	reviewApprove(t, a, q)
	<-claiming // a holds the lease and is about to claim the call
	abortErr := make(chan error, 1)
	go func() { abortErr <- c.h.Abort(ctx, "t1", "stop it") }()
	select {
	case err := <-abortErr:
		t.Fatalf("abort: %v", err)
	case <-claimed:
	case <-time.After(10 * time.Second):
		t.Fatal("the abort never read the call records")
	}
	if err := <-abortErr; err != nil {
		t.Fatalf("abort: %v", err)
	}
	mu.Lock()
	refused := claimErr
	mu.Unlock()
	// The abort took the lease first: the driver's claim, made after,
	// is refused (or its run was already cancelled, having heard of the
	// seizure), and the tool never starts.
	if !errors.Is(refused, postgres.ErrFenced) && !errors.Is(refused, context.Canceled) {
		t.Errorf("the driver's claim after the abort took the lease: %v, want ErrFenced or the run cancelled", refused)
	}
	close(w.gate)
	time.Sleep(500 * time.Millisecond)
	w.mu.Lock()
	ran := w.ran["echo once"]
	w.mu.Unlock()
	if ran != 0 {
		t.Errorf("the tool ran %d times after the abort", ran)
	}
	th, err := a.pg.LoadThread(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(th.Messages), "Tool call aborted") {
		t.Errorf("the thread does not say the call was aborted: %s", th.Messages)
	}
	evs, err := a.pg.ListEvents(ctx, "t1", 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	results := 0
	for _, e := range evs {
		if e.Type == "tool_result" {
			results++
		}
	}
	if results != 1 {
		t.Errorf("%d tool_result audit entries for one call, want 1", results)
	}
}

type markKey struct{}

// Found in review (fixed): Abort on the replica that drives the run (host/host.go Abort with
// r != nil) stops the run, and drive() then lets go of the lease at once
// (host/host.go drive, "r.lease.Release") while the abort still reads and
// writes the thread, unfenced. Another replica (a drive job snoozing on
// HeldElsewhere since an answer, a rescue, the reconcile's orphans, a
// Resume) takes the lease and goes on with the run: here it calls the
// model for the next turn and finishes the run, and the abort finds
// nothing to abort.
func TestAbortOnTheDriverLetsAnotherReplicaDrive(t *testing.T) {
	w := newWorld(t)
	w.gate = make(chan struct{})
	defer close(w.gate)
	ctx := context.Background()
	held := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	hold := &holdStore{beforeLoadThread: func(ctx context.Context) {
		if ctx.Value(markKey{}) == nil {
			return
		}
		once.Do(func() {
			close(held)
			<-release
		})
	}}
	a := w.reviewReplica(t, reviewOpts{hold: hold})
	if _, _, err := a.h.Prompt(ctx, "t1", "t1\n$ echo once", nil); err != nil {
		t.Fatal(err)
	}
	q := pending(t, a.pg, "t1", 1)[0]
	reviewApprove(t, a, q)
	eventually(t, "the call to be claimed", 10*time.Second, func() (bool, error) {
		calls, err := a.pg.ListToolCalls(ctx, "t1", q.RunID)
		return len(calls) == 1 && calls[0].State == checkpoint.ToolCallExecuting, err
	})
	b := w.replica(t, 2*time.Second, time.Hour)
	abortErr := make(chan error, 1)
	go func() { abortErr <- a.h.Abort(context.WithValue(ctx, markKey{}, true), "t1", "stop it") }()
	<-held // the abort has stopped the run and is about to read the thread
	// What a drive job does on b: the abort holds the thread.
	time.Sleep(200 * time.Millisecond)
	if err := b.h.Drive(ctx, "t1"); !errors.Is(err, host.ErrHeldElsewhere) {
		t.Errorf("b's Drive during the abort: %v, want ErrHeldElsewhere (the abort holds the lease)", err)
	}
	close(release)
	idle(t, b.store, "t1")
	if err := <-abortErr; err != nil {
		t.Fatalf("abort: %v", err)
	}
	th, _ := b.store.LoadThread(ctx, "t1")
	w.mu.Lock()
	turn2 := w.calls["t1#2"]
	w.mu.Unlock()
	if turn2 != 0 {
		t.Errorf("another replica drove the run while it was being aborted: the model was called for turn 2 (%d)", turn2)
	}
	if !strings.Contains(string(th.Messages), "Aborted: stop it") {
		t.Errorf("the abort returned nil and the run was not aborted: %s", th.Messages)
	}
}
