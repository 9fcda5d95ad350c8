// Package gopool runs work on goroutines that earlier work ran on, when
// one is idle, and counts what is under way ([Inflight]).
//
// Work that goes deep (an SDK's client and its JSON, a store's write, an
// agent's loop) grows a new goroutine's stack on the way, copying it at
// each doubling; a goroutine that has done such work once keeps its
// stack. A [Pool] keeps a few of them idle for a while, and ends them
// when told ([Pool.End]), after which [Pool.Go] refuses work;
// [Pool.Wait] waits for every one to return.
//
// Quick start:
//
//	p := gopool.New(8, 5*time.Second)
//	p.Go(func() { ... })  // on an idle goroutine, or a new one; false after End
//	...
//	p.End()               // idle goroutines return
//	p.Wait(ctx)           // until none is left, or ctx ends
package gopool
