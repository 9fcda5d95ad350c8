// Package clock lets deadlines be tested without sleeping: code takes a
// [Clock], production passes [Real], tests pass a [Fake] and move it with
// [Fake.Advance].
package clock

import (
	"sync"
	"time"
)

// Clock tells the time and wakes waiters at a deadline.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives once d has passed, and a stop
	// function that releases the timer early.
	After(d time.Duration) (<-chan time.Time, func())
}

// Real is the system clock.
var Real Clock = realClock{}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) After(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTimer(d)
	return t.C, func() { t.Stop() }
}

// Fake is a clock that moves only when told. Safe for concurrent use.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*fakeWaiter
	changed chan struct{} // closed and replaced whenever waiters change
}

type fakeWaiter struct {
	at time.Time
	ch chan time.Time
}

// NewFake returns a fake clock set to t.
func NewFake(t time.Time) *Fake {
	return &Fake{now: t, changed: make(chan struct{})}
}

func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *Fake) After(d time.Duration) (<-chan time.Time, func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := &fakeWaiter{at: f.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		w.ch <- f.now
		return w.ch, func() {}
	}
	f.waiters = append(f.waiters, w)
	f.signalLocked()
	return w.ch, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		for i, x := range f.waiters {
			if x == w {
				f.waiters = append(f.waiters[:i], f.waiters[i+1:]...)
				f.signalLocked()
				return
			}
		}
	}
}

func (f *Fake) signalLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// Advance moves the clock forward by d and fires every waiter whose time
// has come.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	kept := f.waiters[:0]
	for _, w := range f.waiters {
		if !w.at.After(f.now) {
			w.ch <- f.now
		} else {
			kept = append(kept, w)
		}
	}
	f.waiters = kept
	f.signalLocked()
}

// Waiters reports how many timers are waiting.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.waiters)
}

// WaitForWaiters blocks until at least n timers are waiting or timeout
// (real time) passes, and reports whether they are. Tests use it to know
// that the code under test has reached its wait before they Advance.
func (f *Fake) WaitForWaiters(n int, timeout time.Duration) bool {
	deadline := time.After(timeout)
	for {
		f.mu.Lock()
		ok, ch := len(f.waiters) >= n, f.changed
		f.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ch:
		case <-deadline:
			return false
		}
	}
}
