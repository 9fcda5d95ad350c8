//go:build linux

package main

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/checkpoint/sqlite"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/provider/scripted"
)

type echoArgs struct {
	Text string `json:"text"`
}

// BenchmarkRun measures one Prompt: a model turn with one tool call, the
// policy, the tool, and the final turn — every checkpoint write included.
// "approved" adds a question answered by a host.
func BenchmarkRun(b *testing.B) {
	stores := map[string]func(b *testing.B) checkpoint.Store{
		"memory": func(b *testing.B) checkpoint.Store { return memory.New() },
		"sqlite": func(b *testing.B) checkpoint.Store {
			s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "b.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s
		},
	}
	echo := agent.NewTool("echo", "Echo.", func(ctx context.Context, a echoArgs) (string, error) { return a.Text, nil }, nil)
	for _, name := range []string{"memory", "sqlite"} {
		for _, ask := range []bool{false, true} {
			b.Run(fmt.Sprintf("store=%s/approved=%v", name, ask), func(b *testing.B) {
				store := stores[name](b)
				policy := func(ctx context.Context, c *hitl.PolicyContext) hitl.ApprovalDecision {
					if ask {
						return hitl.AskUser(hitl.AskOptions{})
					}
					return hitl.Approve()
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				channel := hitl.NewCheckpointedChannel(store, "", nil)
				go func() {
					for req, err := range channel.Subscribe(ctx) {
						if err == nil {
							_ = channel.AnswerIn(ctx, req.ThreadID, req.QuestionID, hitl.ApproveAnswer{Decision: "approve"})
						}
					}
				}()
				b.ResetTimer()
				for i := range b.N {
					model := scripted.New(
						scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "echo", echoArgs{"hi"})}},
						scripted.Turn{Text: "done"},
					)
					a, err := agent.New(agent.Config{Provider: model, Tools: []*agent.Tool{echo}, Checkpointer: store, Channel: channel,
						ThreadID: fmt.Sprint("t", i), Middleware: []agent.Middleware{hitl.NewApprovalPolicyMiddleware(channel, policy)}})
					if err != nil {
						b.Fatal(err)
					}
					if _, err := a.Prompt(ctx, "go"); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
