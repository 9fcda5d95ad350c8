package cluster

// Review tests (issue 14): the lease SQL under concurrency. Internal to
// the package, to call renewOnce and expireLocal directly.

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/postgres"
	"github.com/tollgate-ai/tollgate/internal/pgtest"
)

func reviewStore(t *testing.T, dsn, schema string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), dsn, &postgres.Options{Schema: schema, MaxConns: 6})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// One fenced commit that waits (here for a thread row another transaction
// holds) keeps its lease row FOR SHARE; renew is one UPDATE of every
// lease of the replica, and its row lock (FOR NO KEY UPDATE) conflicts
// with FOR SHARE. So the renewal of ALL the replica's leases waits for
// that one commit, times out after margin, and once validUntil passes
// every run of the replica is cancelled -- including B, which nothing was
// wrong with. Meanwhile renew's lock on B's row (taken before it reached
// A's) stalls B's own fenced commits.
func TestRenewWaitsForOneFencedCommit(t *testing.T) {
	dsn := pgtest.Start(t)
	schema := pgtest.Schema(t, dsn)
	store := reviewStore(t, dsn, schema)
	ctx := t.Context()
	c, err := New(ctx, Config{Store: store, ID: "R", LeaseTTL: time.Second, ReconcileEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"A", "B"} {
		if err := store.CreateThread(ctx, &checkpoint.Thread{ID: id, Status: checkpoint.ThreadRunning}); err != nil {
			t.Fatal(err)
		}
	}
	// B first: renew's scan meets B's row before A's.
	lB, err := c.Acquire(ctx, "B")
	if err != nil {
		t.Fatal(err)
	}
	lA, err := c.Acquire(ctx, "A")
	if err != nil {
		t.Fatal(err)
	}

	// Another writer of A's thread row (an abort from another replica, a
	// frozen one...) holds it for 1.5 s.
	holder, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(context.Background())
	if _, err := holder.Exec(ctx, "SET search_path TO "+pgx.Identifier{schema}.Sanitize()+"; BEGIN; SELECT 1 FROM threads WHERE id = 'A' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// The run of A writes, fenced: it takes A's lease FOR SHARE, then
		// waits for the thread row.
		_, err := store.Commit(lA.Context(ctx), &checkpoint.Batch{
			Thread: &checkpoint.ThreadWrite{ID: "A", Version: 1, Status: checkpoint.ThreadRunning, Append: []json.RawMessage{json.RawMessage(`{"n":1}`)}},
		})
		t.Logf("A's fenced commit: %v", err)
	}()
	rolledBack := make(chan struct{})
	time.AfterFunc(1500*time.Millisecond, func() {
		defer close(rolledBack)
		holder.Exec(context.Background(), "ROLLBACK")
	})
	defer func() { <-rolledBack }() // before the deferred Close: one goroutine at a time on the connection
	time.Sleep(200 * time.Millisecond)

	var bLatency time.Duration
	bAfterRollback := false
	wg.Add(1)
	go func() {
		defer wg.Done()
		time.Sleep(300 * time.Millisecond) // after the first renewal (at ttl/4) locked B's row
		start := time.Now()
		_, err := store.Commit(lB.Context(ctx), &checkpoint.Batch{
			Thread: &checkpoint.ThreadWrite{ID: "B", Version: 1, Status: checkpoint.ThreadRunning},
		})
		bLatency = time.Since(start)
		select {
		case <-rolledBack:
			bAfterRollback = true
		default:
		}
		t.Logf("B's fenced commit, during the renewal: %v, took %v", err, bLatency.Round(time.Millisecond))
	}()
	// The replica's own renewal loop (every ttl/4, each given margin).
	// (It runs since the first lease was taken.)
	time.Sleep(1400 * time.Millisecond)
	c.Close()
	wg.Wait()
	if lB.(*lease).Lost() {
		t.Errorf("B's lease was lost (B's run cancelled) because one fenced commit on A waited for a row; stats %+v", c.Stats())
	}
	// Not a time limit (CI's busy cores made 286 ms of a healthy commit):
	// B's commit must not wait for A's row, that is, it ends before the
	// holder lets A's row go.
	if bAfterRollback {
		t.Errorf("B's fenced commit waited %v, until A's row was let go: behind the blocked renewal", bLatency.Round(time.Millisecond))
	}
}

// Two replicas acquiring one free thread at once, many times: exactly one
// wins each time, with an epoch greater than any before (sound).
func TestAcquireRace(t *testing.T) {
	dsn := pgtest.Start(t)
	schema := pgtest.Schema(t, dsn)
	s1, s2 := reviewStore(t, dsn, schema), reviewStore(t, dsn, schema)
	ctx := t.Context()
	c1, err := New(ctx, Config{Store: s1, ID: "R1", LeaseTTL: time.Second, ReconcileEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	c2, err := New(ctx, Config{Store: s2, ID: "R2", LeaseTTL: time.Second, ReconcileEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	var last int64
	for i := 0; i < 100; i++ {
		var wg sync.WaitGroup
		var l1, l2 any
		var e1, e2 error
		wg.Add(2)
		go func() { defer wg.Done(); l, err := c1.Acquire(ctx, "T"); l1, e1 = l, err }()
		go func() { defer wg.Done(); l, err := c2.Acquire(ctx, "T"); l2, e2 = l, err }()
		wg.Wait()
		if (e1 == nil) == (e2 == nil) {
			t.Fatalf("round %d: both or neither acquired: %v, %v", i, e1, e2)
		}
		var w *lease
		if e1 == nil {
			w = l1.(*lease)
		} else {
			w = l2.(*lease)
		}
		if w.epoch <= last {
			t.Fatalf("epoch %d after %d", w.epoch, last)
		}
		last = w.epoch
		w.Release(ctx, false)
	}
}

// Three replicas starting at once on a fresh schema: River's migrations
// run once, under the session lock, and every New succeeds (sound).
func TestMigrateRiverAtOnce(t *testing.T) {
	dsn := pgtest.Start(t)
	schema := pgtest.Schema(t, dsn)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := postgres.Open(t.Context(), dsn, &postgres.Options{Schema: schema, MaxConns: 4})
			if err != nil {
				errs[i] = err
				return
			}
			defer s.Close()
			_, errs[i] = New(t.Context(), Config{Store: s, ReconcileEvery: -1})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("replica %d: %v", i, err)
		}
	}
}

// A pool of one connection: migrateRiver holds the only connection for
// its session lock while River's migrator waits for another from the same
// pool -- New never returns.
func TestMigrateRiverPoolOfOne(t *testing.T) {
	dsn := pgtest.Start(t)
	schema := pgtest.Schema(t, dsn)
	s, err := postgres.Open(t.Context(), dsn, &postgres.Options{Schema: schema, MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	start := time.Now()
	_, err = New(ctx, Config{Store: s, ReconcileEvery: -1})
	t.Logf("New with MaxConns 1: %v after %v", err, time.Since(start).Round(time.Millisecond))
	if err != nil && ctx.Err() != nil {
		t.Errorf("cluster.New hangs on a pool of one connection (self-deadlock in migrateRiver)")
	}
}

// The blocked renewal has a transaction id (it updated B's row) and holds
// it for up to margin. A numbered writer that meanwhile waits for a lease
// row (B's fenced commit, which holds the writers' lock but no id yet)
// disables the horizon's refinement (events.go: a holder shown without an
// id), so every reader falls back to xmin -- the renewal's: questions and
// events committed by anyone after the renewal began are withheld, and
// ListQuestions fails after 1 s, on every replica.
func TestBlockedRenewalHoldsTheHorizon(t *testing.T) {
	dsn := pgtest.Start(t)
	schema := pgtest.Schema(t, dsn)
	store := reviewStore(t, dsn, schema)
	reader := reviewStore(t, dsn, schema) // another replica's store
	ctx := t.Context()
	c, err := New(ctx, Config{Store: store, ID: "R", LeaseTTL: 10 * time.Second, ReconcileEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"A", "B", "C"} {
		if err := store.CreateThread(ctx, &checkpoint.Thread{ID: id, Status: checkpoint.ThreadRunning}); err != nil {
			t.Fatal(err)
		}
	}
	lB, err := c.Acquire(ctx, "B")
	if err != nil {
		t.Fatal(err)
	}
	lA, err := c.Acquire(ctx, "A")
	if err != nil {
		t.Fatal(err)
	}
	holder, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(context.Background())
	if _, err := holder.Exec(ctx, "SET search_path TO "+pgx.Identifier{schema}.Sanitize()+"; BEGIN; SELECT 1 FROM threads WHERE id = 'A' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(5*time.Second, func() { holder.Exec(context.Background(), "ROLLBACK") })
	go store.Commit(lA.Context(ctx), &checkpoint.Batch{
		Thread: &checkpoint.ThreadWrite{ID: "A", Version: 1, Status: checkpoint.ThreadRunning},
	})
	time.Sleep(100 * time.Millisecond)
	defer c.Close() // its renewals run since the first lease
	time.Sleep(2700 * time.Millisecond)
	go store.Commit(lB.Context(ctx), &checkpoint.Batch{
		Thread: &checkpoint.ThreadWrite{ID: "B", Version: 1, Status: checkpoint.ThreadRunning},
		Events: []*checkpoint.Event{{ThreadID: "B", RunID: "r", Type: "step"}},
	})
	time.Sleep(100 * time.Millisecond)
	// Another replica asks a question on C: it commits at once.
	if _, _, err := reader.CreateQuestion(ctx, &checkpoint.Question{ThreadID: "C", ID: "q", RunID: "r", Kind: "approve", Payload: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	qs, _, err := reader.ListQuestions(ctx, checkpoint.QuestionFilter{Status: checkpoint.QuestionPending})
	t.Logf("ListQuestions(pending) on another replica: %d, %v, after %v", len(qs), err, time.Since(start).Round(time.Millisecond))
	if err != nil || len(qs) == 0 {
		t.Errorf("a committed question is not listed while a renewal waits for a fenced commit")
	}
}
