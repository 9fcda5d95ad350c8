package agent_test

import (
	"context"
	"testing"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/provider/scripted"
)

// SubscribeFunc sees the events a Subscription sees, in the same order,
// and nothing once stop has returned.
func TestSubscribeFuncSeesWhatASubscriptionSees(t *testing.T) {
	t.Parallel()
	model := scripted.New(
		scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "echo", echoArgs{"x"})}},
		scripted.Turn{Text: "done"},
		scripted.Turn{Text: "again"},
	)
	a := newAgent(t, agent.Config{Provider: model, Tools: []*agent.Tool{echoTool()}})
	sub := a.Subscribe(256)
	defer sub.Close()
	var seen []int64
	stop := a.SubscribeFunc(func(e agent.Event) { seen = append(seen, e.Meta().Seq) })
	if _, err := a.Prompt(context.Background(), "go"); err != nil {
		t.Fatal(err)
	}
	stop()
	var want []int64
	for len(want) < len(seen) {
		want = append(want, (<-sub.C).Meta().Seq)
	}
	if len(seen) == 0 || len(sub.C) != 0 {
		t.Fatalf("the function saw %d events, the subscription %d more", len(seen), len(sub.C))
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Fatalf("event %d: the function saw seq %d, the subscription %d", i, seen[i], want[i])
		}
	}
	n := len(seen)
	if _, err := a.Prompt(context.Background(), "more"); err != nil {
		t.Fatal(err)
	}
	if len(seen) != n {
		t.Fatalf("called %d times after stop", len(seen)-n)
	}
	stop() // twice is harmless
}
