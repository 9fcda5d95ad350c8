package agent_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/provider/scripted"
)

// TestArgsOverLimit checks that a call whose arguments are over the
// limit is an error result before validation and before any middleware
// (a policy) sees it, and that the limit is configurable.
func TestArgsOverLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		limit int
		text  int
		ok    bool
	}{
		{"default, under", 0, 1000, true},
		{"default, over", 0, agent.DefaultMaxArgBytes, false},
		{"configured, over", 100, 100, false},
		{"configured, under", 100, 50, true},
		{"no bound", -1, agent.DefaultMaxArgBytes + 10, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var seen atomic.Int32
			hook := agent.BeforeToolFunc(func(ctx context.Context, call *agent.ToolCallContext) (agent.Decision, error) {
				seen.Add(1)
				return agent.Continue(), nil
			})
			model := scripted.New(
				scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "echo", echoArgs{strings.Repeat("x", tc.text)})}},
				scripted.Turn{Text: "done"},
			)
			a := newAgent(t, agent.Config{Provider: model, Tools: []*agent.Tool{echoTool()},
				Middleware: []agent.Middleware{hook}, MaxArgBytes: tc.limit})
			if _, err := a.Prompt(context.Background(), "go"); err != nil {
				t.Fatal(err)
			}
			res := toolResults(t, a)
			if len(res) != 1 {
				t.Fatalf("results = %+v", res)
			}
			if tc.ok {
				if res[0].IsError || seen.Load() != 1 {
					t.Fatalf("result %+v, hook called %d times", res[0], seen.Load())
				}
				return
			}
			if !res[0].IsError || res[0].Details["error"] != "arguments_too_large" || !strings.Contains(res[0].Content, "over the limit") {
				t.Fatalf("result = %.200s %v", res[0].Content, res[0].Details)
			}
			if seen.Load() != 0 {
				t.Fatalf("the middleware saw a call over the limit")
			}
		})
	}
}
