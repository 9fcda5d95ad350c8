package gopool

import (
	"context"
	"sync"
	"testing"
	"time"
)

func (p *Pool) count() int {
	p.alive.mu.Lock()
	defer p.alive.mu.Unlock()
	return p.alive.n
}

// until polls cond (10 s at most).
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// Work goes to an idle goroutine when there is one: no new one starts.
func TestPoolReusesAnIdleGoroutine(t *testing.T) {
	p := New(2, time.Hour)
	done := make(chan struct{})
	p.Go(func() { close(done) })
	<-done
	until(t, "the goroutine to go idle", func() bool { return p.idle.Load() == 1 })
	ran := make(chan struct{})
	p.Go(func() { close(ran) })
	<-ran
	if n := p.count(); n != 1 {
		t.Errorf("%d goroutines after two pieces of work one after the other, want 1", n)
	}
	p.End()
	if !p.Wait(context.Background()) {
		t.Fatal("Wait after End")
	}
	if n := p.count(); n != 0 {
		t.Errorf("%d goroutines left after End", n)
	}
}

// At most maxIdle stay; the others return once their work is done.
func TestPoolKeepsAtMostMaxIdle(t *testing.T) {
	p := New(1, time.Hour)
	release := make(chan struct{})
	var started sync.WaitGroup
	for range 3 {
		started.Add(1)
		p.Go(func() { started.Done(); <-release })
	}
	started.Wait()
	if n := p.count(); n != 3 {
		t.Fatalf("%d goroutines for 3 pieces of busy work", n)
	}
	close(release)
	until(t, "all but one to return", func() bool { return p.count() == 1 && p.idle.Load() == 1 })
	p.End()
	p.Wait(context.Background())
}

// An idle goroutine returns after idleFor.
func TestPoolIdleGoroutineReturns(t *testing.T) {
	p := New(1, time.Millisecond)
	p.Go(func() {})
	until(t, "the idle goroutine to return", func() bool { return p.count() == 0 })
	if !p.Wait(context.Background()) {
		t.Fatal("Wait with none left")
	}
}

// Wait gives up with its context while work is under way; Go refuses
// work after End (it does not run).
func TestPoolWaitBoundedAndWorkAfterEnd(t *testing.T) {
	p := New(1, time.Hour)
	release := make(chan struct{})
	p.Go(func() { <-release })
	p.End()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if p.Wait(ctx) {
		t.Fatal("Wait returned true with work under way")
	}
	close(release)
	ran := make(chan struct{})
	if p.Go(func() { close(ran) }) {
		t.Fatal("Go after End took the work")
	}
	if !p.Wait(context.Background()) {
		t.Fatal("Wait after the work is done")
	}
	select {
	case <-ran:
		t.Fatal("work given after End ran")
	default:
	}
}
