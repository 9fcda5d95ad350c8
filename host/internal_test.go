package host

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/provider/scripted"
)

// The host keeps the agents of its last maxKeptAgents parked runs, the
// oldest let go first, and hands each out once.
func TestKeptAgentsBounded(t *testing.T) {
	t.Parallel()
	a, err := agent.New(agent.Config{Provider: scripted.Demo{}, Checkpointer: memory.New()})
	if err != nil {
		t.Fatal(err)
	}
	var k keptAgents
	n := maxKeptAgents + 10
	for i := range n {
		k.put(fmt.Sprint("t", i), a)
	}
	if len(k.by) != maxKeptAgents {
		t.Fatalf("%d kept, want %d", len(k.by), maxKeptAgents)
	}
	for i := range n {
		got := k.take(fmt.Sprint("t", i)) != nil
		if want := i >= 10; got != want {
			t.Fatalf("t%d kept: %v, want %v", i, got, want)
		}
	}
	if len(k.by) != 0 || k.take("t0") != nil {
		t.Fatalf("%d left after every one was taken", len(k.by))
	}
}

// Drives run on goroutines earlier drives ran on: at most maxIdleDrivers
// wait for work, and every one ends with the host's context.
func TestIdleDriversBoundedAndStopped(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	d := drivers{work: make(chan func())}
	var wg sync.WaitGroup
	release := make(chan struct{})
	for range 3 * maxIdleDrivers {
		wg.Add(1)
		d.goDrive(ctx, func() { <-release; wg.Done() })
	}
	close(release)
	wg.Wait()
	for deadline := time.Now().Add(5 * time.Second); d.idle.Load() != maxIdleDrivers; {
		if time.Now().After(deadline) {
			t.Fatalf("%d idle drivers, want %d", d.idle.Load(), maxIdleDrivers)
		}
		time.Sleep(time.Millisecond)
	}
	ran := make(chan struct{})
	d.goDrive(ctx, func() { close(ran) })
	<-ran
	cancel()
	d.wg.Wait() // every driver ends with the context
	if n := d.idle.Load(); n != 0 {
		t.Fatalf("%d idle after the end", n)
	}
}
