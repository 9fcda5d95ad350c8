package gopool

import (
	"bytes"
	"context"
	"runtime"
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
// A goroutine counts itself idle just before it waits for work, so one
// hand-off in a while may still find it not yet waiting and start
// another: the test counts the goroutines the work ran on over many
// pieces of work one after the other, not one hand-off.
func TestPoolReusesAnIdleGoroutine(t *testing.T) {
	p := New(2, time.Hour)
	const pieces = 50
	ran := map[string]bool{}
	for i := range pieces {
		if i > 0 {
			until(t, "a goroutine to go idle", func() bool { return p.idle.Load() >= 1 })
		}
		id := make(chan string, 1)
		p.Go(func() { id <- goroutineID() })
		ran[<-id] = true
	}
	if len(ran) > pieces/2 {
		t.Errorf("%d pieces of work one after the other ran on %d goroutines, want most of them on a reused one", pieces, len(ran))
	}
	// A late miss's goroutine may still be on its way out.
	until(t, "the goroutines past maxIdle (2) to return", func() bool { return p.count() <= 2 })
	p.End()
	if !p.Wait(context.Background()) {
		t.Fatal("Wait after End")
	}
	if n := p.count(); n != 0 {
		t.Errorf("%d goroutines left after End", n)
	}
}

// goroutineID is the running goroutine's number, from its stack's first
// line ("goroutine 18 [running]:").
func goroutineID() string {
	var buf [64]byte
	line := buf[:runtime.Stack(buf[:], false)]
	line, _, _ = bytes.Cut(bytes.TrimPrefix(line, []byte("goroutine ")), []byte(" "))
	return string(line)
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
