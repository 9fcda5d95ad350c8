package host

import (
	"fmt"
	"testing"

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
