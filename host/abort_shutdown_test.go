package host_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/internal/storetest"
)

// gatedStore holds a Commit that resolves a question while gate is armed.
type gatedStore struct {
	checkpoint.Store
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (s *gatedStore) Commit(ctx context.Context, b *checkpoint.Batch) (*checkpoint.Committed, error) {
	if b.Resolve != nil && s.armed.CompareAndSwap(true, false) {
		close(s.entered)
		<-s.release
	}
	return s.Store.Commit(ctx, b)
}

// An abort of a thread no run holds, begun before Shutdown, is waited
// for: Shutdown returning while it still writes would let the caller
// close the store under it (an abort begun after is refused:
// TestAbortAfterShutdownIsRefused).
func TestShutdownWaitsForAnAbortBegunBefore(t *testing.T) {
	t.Parallel()
	gs := &gatedStore{Store: storetest.New(t), entered: make(chan struct{}), release: make(chan struct{})}
	f := newFixture(t, gs, time.Minute, nil)
	h := f.start(t)
	f.promptParked(t, h, "t1", "$ touch a", 1)
	gs.armed.Store(true)
	aborted := make(chan error, 1)
	go func() { aborted <- h.Abort(context.Background(), "t1", "closing") }()
	<-gs.entered // the abort is writing its resolution
	shut := make(chan struct{})
	go func() { h.Shutdown(context.Background()); close(shut) }()
	select {
	case <-shut:
		t.Errorf("Shutdown returned while an abort was still writing to the store")
	case <-time.After(500 * time.Millisecond):
	}
	close(gs.release)
	<-aborted
	<-shut
}
