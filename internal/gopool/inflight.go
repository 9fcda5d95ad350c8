package gopool

import (
	"context"
	"sync"
)

// Inflight counts what is under way and says when none is, without
// polling: idle is closed while the count is zero and made anew when it
// leaves zero. The zero value counts none.
type Inflight struct {
	mu   sync.Mutex
	n    int
	idle chan struct{}
}

// Enter counts one more under way.
func (f *Inflight) Enter() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == 0 {
		f.idle = make(chan struct{})
	}
	f.n++
}

// Leave counts one fewer under way.
func (f *Inflight) Leave() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n--; f.n == 0 {
		close(f.idle)
	}
}

// Wait returns true once none is under way, false if ctx ends first.
func (f *Inflight) Wait(ctx context.Context) bool {
	f.mu.Lock()
	if f.n == 0 {
		f.mu.Unlock()
		return true
	}
	idle := f.idle
	f.mu.Unlock()
	select {
	case <-idle:
		return true
	case <-ctx.Done():
		return false
	}
}
