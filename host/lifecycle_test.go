package host_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/internal/storetest"
)

// resyncStore hands the host a notification feed the test writes, and,
// once armed, holds the next listing of threads until the test lets it go.
type resyncStore struct {
	checkpoint.Store
	feed    chan checkpoint.Notification
	armed   atomic.Bool
	listing chan struct{} // closed when the held listing began
	release chan struct{}
}

func (s *resyncStore) Subscribe(ctx context.Context) (<-chan checkpoint.Notification, error) {
	return s.feed, nil
}

func (s *resyncStore) ListThreads(ctx context.Context, f checkpoint.ThreadFilter) ([]*checkpoint.Thread, string, error) {
	if s.armed.CompareAndSwap(true, false) {
		close(s.listing)
		<-ctx.Done()
		<-s.release
		return nil, "", ctx.Err()
	}
	return s.Store.ListThreads(ctx, f)
}

// The re-read of the store's runs a resync starts is the host's own
// goroutine: Shutdown waits for it, so that nothing of the host still
// reads the store (or resumes a run) once Shutdown has returned.
func TestShutdownWaitsForTheResyncItStarted(t *testing.T) {
	t.Parallel()
	s := &resyncStore{Store: storetest.New(t), feed: make(chan checkpoint.Notification, 1),
		listing: make(chan struct{}), release: make(chan struct{})}
	f := newFixture(t, s, time.Minute, nil)
	h, err := host.New(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.armed.Store(true)
	s.feed <- checkpoint.Notification{Kind: checkpoint.Resync}
	<-s.listing
	shut := make(chan struct{})
	go func() {
		defer close(shut)
		_, _ = h.Shutdown(context.Background())
	}()
	select {
	case <-shut:
		t.Fatal("Shutdown returned while the re-read a resync started still read the store")
	case <-time.After(100 * time.Millisecond): // long enough for a Shutdown that does not wait to return
	}
	close(s.release)
	<-shut
}

// gapStore's notifications are a silent feed until the test closes it:
// what happens meanwhile is never notified, as when a store's connection
// to its database drops. Once it is closed, Subscribe is the store's.
type gapStore struct {
	checkpoint.Store
	silent chan checkpoint.Notification
}

func (s *gapStore) Subscribe(ctx context.Context) (<-chan checkpoint.Notification, error) {
	select {
	case <-s.silent:
		return s.Store.Subscribe(ctx)
	default:
		return s.silent, nil
	}
}

// A feed that ends is subscribed again, and the host re-reads its runs
// then: a run whose question was answered in the gap resumes, though no
// notification of the answer ever came.
func TestFeedThatEndsIsFollowedAndTheRunsReRead(t *testing.T) {
	t.Parallel()
	s := &gapStore{Store: storetest.New(t), silent: make(chan checkpoint.Notification)}
	f := newFixture(t, s, 0, nil)
	h := f.start(t)
	q := f.promptParked(t, h, "t1", "$ touch x", 1)[0]
	other := hitl.NewCheckpointedChannel(s.Store, "t1", nil) // another process
	if err := other.Answer(context.Background(), q.ID, hitl.ApproveAnswer{Decision: "deny", Reason: "not today"}); err != nil {
		t.Fatal(err)
	}
	close(s.silent)
	eventually(t, "the run to end", f.idle(t, "t1"))
	_, msgs := f.thread(t, "t1")
	if !strings.Contains(lastText(msgs), "not today") {
		t.Fatalf("final message %q does not give the reason", lastText(msgs))
	}
}

// An abort asked once Shutdown has begun, of a thread no run of this host
// holds, is refused (ErrClosed) and writes nothing: Shutdown does not wait
// for it, so it could still be writing when the caller closes the store.
// The parked run stays as it was, pending, for the next start.
func TestAbortAfterShutdownIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, time.Minute, nil)
	h := f.start(t)
	f.promptParked(t, h, "t1", "$ touch a", 1)
	if _, err := h.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := h.Abort(context.Background(), "t1", "too late"); err != host.ErrClosed {
		t.Fatalf("Abort after Shutdown = %v, want ErrClosed", err)
	}
	if th, _ := f.thread(t, "t1"); th.Status != checkpoint.ThreadRunning || len(f.pending(t, "t1")) != 1 {
		t.Fatalf("after the refused abort: %s, %d pending", th.Status, len(f.pending(t, "t1")))
	}
	// A host never started aborts (a command line closing a thread).
	h2, err := host.New(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := h2.Abort(context.Background(), "t1", "closed from the command line"); err != nil {
		t.Fatal(err)
	}
	if th, _ := f.thread(t, "t1"); th.Status != checkpoint.ThreadIdle {
		t.Fatalf("after the abort: %s", th.Status)
	}
}
