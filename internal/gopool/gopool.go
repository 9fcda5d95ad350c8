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

	work chan func()   // unbuffered: only an idle goroutine takes from it
	stop chan struct{} // closed by End
	once sync.Once
	idle atomic.Int32

	alive Inflight // the pool's goroutines, busy or idle
}

// New returns a pool that keeps at most maxIdle goroutines idle, each for
// idleFor at most.
func New(maxIdle int, idleFor time.Duration) *Pool {
	return &Pool{maxIdle: int32(maxIdle), idleFor: idleFor, work: make(chan func()), stop: make(chan struct{})}
}

// Go runs f on an idle goroutine of the pool, or on a new one.
func (p *Pool) Go(f func()) {
	select {
	case p.work <- f:
		return
	default:
	}
	p.alive.Enter()
	go p.serve(f)
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
// is done. Work given to Go after End still runs, on a goroutine that
// then returns.
func (p *Pool) End() {
	p.once.Do(func() { close(p.stop) })
}

// Wait returns true once none of the pool's goroutines is left (call End
// first), false if ctx ends before.
func (p *Pool) Wait(ctx context.Context) bool {
	return p.alive.Wait(ctx)
}
