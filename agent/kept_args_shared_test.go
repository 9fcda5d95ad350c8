package agent_test

import (
	"context"
	"errors"
	"testing"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/internal/storetest"
	"github.com/tollgate-ai/tollgate/provider/scripted"
)

type envArgs struct {
	Env map[string]string `json:"env"`
}

// A before-tool hook sees a fresh decode of the call's arguments on every
// decision of it: a resume on the agent that parked must not hand it the
// value an earlier decision (before the park) already changed in place,
// or a change made once per decision is applied twice, and the tool runs
// with what neither the model nor the reviewer sent. A resume on another
// agent (another process) decodes the arguments again.
func TestKeptResumeHandsHooksAFreshArgsValue(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		newAgent bool
	}{{"same agent", false}, {"other agent", true}} {
		t.Run(c.name, func(t *testing.T) {
			store := storetest.New(t)
			ch := &parkingChannel{store: store}
			var got string
			tool := agent.NewTool("envrun", "Runs with env.", func(ctx context.Context, a envArgs) (string, error) {
				got = a.Env["PATH"]
				return "ok", nil
			}, nil)
			// A hook that adds a directory to PATH, in place.
			addPath := agent.BeforeToolFunc(func(ctx context.Context, tc *agent.ToolCallContext) (agent.Decision, error) {
				if a, ok := tc.Args.(envArgs); ok && a.Env != nil {
					a.Env["PATH"] += ":/sandbox/bin"
				}
				return agent.Continue(), nil
			})
			model := scripted.New(scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "envrun", envArgs{Env: map[string]string{"PATH": "/bin"}})}}, scripted.Turn{Text: "done"})
			cfg := agent.Config{Provider: model, Checkpointer: store, Channel: ch, ThreadID: "t1",
				Tools: []*agent.Tool{tool}, Middleware: []agent.Middleware{addPath, askMW(0)}}
			a := newAgent(t, cfg)
			if _, err := a.Prompt(context.Background(), "go"); !errors.Is(err, agent.ErrParked) {
				t.Fatalf("Prompt = %v, want ErrParked", err)
			}
			answer(t, store, "t1", "approve_c1", "true")
			if c.newAgent {
				a = newAgent(t, cfg)
			}
			if _, err := a.Resume(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got != "/bin:/sandbox/bin" {
				t.Fatalf("the tool ran with PATH %q, want %q (the hook's change once)", got, "/bin:/sandbox/bin")
			}
		})
	}
}
