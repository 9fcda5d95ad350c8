package gopool

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Pool runs functions on its goroutines. Its methods are safe for
// concurrent use; the zero value is not usable: use [New].
type Pool struct {
	maxIdle int32
	idleFor time.Duration

	work  chan func()   // unbuffered: only an idle goroutine takes from it
	stop  chan struct{} // closed by End
	once  sync.Once
	ended atomic.Bool // set by End, before stop is closed
	idle  atomic.Int32

	alive Inflight // the pool's goroutines, busy or idle
}

// New returns a pool that keeps at most maxIdle goroutines idle, each for
// idleFor at most.
func New(maxIdle int, idleFor time.Duration) *Pool {
	return &Pool{maxIdle: int32(maxIdle), idleFor: idleFor, work: make(chan func()), stop: make(chan struct{})}
}

// Go runs f on an idle goroutine of the pool, or on a new one, and
// returns true; after End it returns false and f does not run. Work Go
// took is waited for by Wait, even when End comes while Go hands it on.
func (p *Pool) Go(f func()) bool {
	// Counted before the check: an End that comes after it finds the
	// count above zero, so its Wait waits for f.
	p.alive.Enter()
	if p.ended.Load() {
		p.alive.Leave()
		return false
	}
	select {
	case p.work <- f:
		p.alive.Leave() // the idle goroutine that took f is counted
	default:
		go p.serve(f)
	}
	return true
}

// serve runs f, then the work handed to it while it is one of the idle.
func (p *Pool) serve(f func()) {
	defer p.alive.Leave()
	var wait *time.Timer
	for f != nil {
		f()
		f = nil // an idle goroutine keeps nothing of the work it did
		if p.idle.Add(1) > p.maxIdle {
			p.idle.Add(-1)
			return
		}
		if wait == nil {
			wait = time.NewTimer(p.idleFor)
			defer wait.Stop()
		} else {
			wait.Reset(p.idleFor)
		}
		select {
		case f = <-p.work:
		case <-wait.C:
		case <-p.stop:
		}
		p.idle.Add(-1)
	}
}

// End makes the idle goroutines return, and the busy ones once their work
// is done. Go refuses work from then on.
func (p *Pool) End() {
	p.once.Do(func() {
		p.ended.Store(true)
		close(p.stop)
	})
}

// Wait returns true once none of the pool's goroutines is left (call End
// first), false if ctx ends before.
func (p *Pool) Wait(ctx context.Context) bool {
	return p.alive.Wait(ctx)
}
