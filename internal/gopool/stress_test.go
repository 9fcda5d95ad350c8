package gopool

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Work given from many goroutines at once, while goroutines go idle, time
// out and are ended, all runs; Wait returns true only once every
// goroutine of the pool has returned.
func TestPoolGoFromManyGoroutinesThenEndAndWait(t *testing.T) {
	for round := range 50 {
		p := New(3, time.Duration(round%3)*time.Microsecond)
		var ran atomic.Int32
		goFrom(p, 8, 50, &ran, nil).Wait()
		p.End()
		if !p.Wait(context.Background()) {
			t.Fatal("Wait")
		}
		if n := p.count(); n != 0 {
			t.Fatalf("round %d: %d goroutines after Wait", round, n)
		}
		if got := ran.Load(); got != 400 {
			t.Fatalf("round %d: %d of 400 ran by Wait's return", round, got)
		}
	}
}

// Go from many goroutines while End comes: every piece of work Go took
// has run by Wait's return, and none it refused runs.
func TestPoolGoRacingEnd(t *testing.T) {
	for round := range 50 {
		p := New(2, time.Hour)
		var took, ran atomic.Int32
		wg := goFrom(p, 4, 50, &ran, &took)
		p.End()
		if !p.Wait(context.Background()) {
			t.Fatal("Wait")
		}
		// took may still lag behind a Go that has returned true.
		if got, want := ran.Load(), took.Load(); got < want {
			t.Fatalf("round %d: %d of the %d pieces of work Go took ran by Wait's return", round, got, want)
		}
		wg.Wait()
		if got, want := ran.Load(), took.Load(); got != want {
			t.Fatalf("round %d: %d ran, %d taken", round, got, want)
		}
	}
}

// goFrom gives p work from n goroutines, each times times: the work
// counts in ran, what Go takes in took (if not nil).
func goFrom(p *Pool, n, times int, ran, took *atomic.Int32) *sync.WaitGroup {
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range times {
				if p.Go(func() { ran.Add(1) }) && took != nil {
					took.Add(1)
				}
			}
		}()
	}
	return &wg
}
