package hitl_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/provider/scripted"
)

// The seed's three steps: a policy, the wiring, a host loop.
func Example() {
	type bashArgs struct {
		Cmd string `json:"cmd"`
	}
	bash := agent.NewTool("bash", "Run a command (pretend).", func(ctx context.Context, a bashArgs) (string, error) {
		return "ran: " + a.Cmd, nil
	}, nil)

	// Step 1: the policy gets the typed arguments.
	policy := hitl.Typed(func(ctx context.Context, c *hitl.PolicyContext, args bashArgs) hitl.ApprovalDecision {
		switch {
		case strings.HasPrefix(args.Cmd, "ls"):
			return hitl.Approve()
		case strings.HasPrefix(args.Cmd, "dd"):
			return hitl.Deny("destructive I/O")
		}
		return hitl.AskUser(hitl.AskOptions{Timeout: 180 * time.Second,
			Details: map[string]any{"matched_rule": "confirm", "impact": "needs human review"}})
	})

	// Step 2: wire the agent (the in-memory channel brings its own store).
	channel := hitl.NewCheckpointedChannel(memory.New(), "session-1", nil)
	model := scripted.New(
		scripted.Turn{ToolCalls: []agent.ToolCall{
			scripted.Call("c1", "bash", bashArgs{"ls"}),
			scripted.Call("c2", "bash", bashArgs{"dd if=/dev/zero of=/dev/sda"}),
			scripted.Call("c3", "bash", bashArgs{"rm /tmp/logs"}),
		}},
		scripted.Turn{Text: "done"},
	)
	a, _ := agent.New(agent.Config{
		Provider: model, Tools: []*agent.Tool{bash},
		Middleware: []agent.Middleware{hitl.NewApprovalPolicyMiddleware(channel, policy)},
		Channel:    channel, ThreadID: "session-1",
	})
	done := make(chan error)
	go func() { _, err := a.Prompt(context.Background(), "list files then delete temp logs"); done <- err }()

	// Step 3: the host answers pending requests.
	ctx, cancel := context.WithCancel(context.Background())
	for req := range channel.Subscribe(ctx) {
		fmt.Printf("asked: %s %v (%v, %ds)\n", req.Payload.ToolName, req.Payload.Args["cmd"], req.Payload.Details["matched_rule"], req.TimeoutSeconds)
		_ = channel.Answer(ctx, req.QuestionID, hitl.ApproveAnswer{Decision: hitl.DecisionDeny, Reason: "keep the logs"})
		break
	}
	cancel()
	<-done
	msgs, _ := a.Messages(context.Background())
	for _, m := range msgs {
		if r := m.Result; r != nil {
			trace, _ := r.Details["hitl"].(map[string]any)
			fmt.Printf("%s error=%v %q decision=%v\n", r.CallID, r.IsError, r.Content, trace["decision"])
		}
	}
	// Output:
	// asked: bash rm /tmp/logs (confirm, 180s)
	// c1 error=false "ran: ls" decision=<nil>
	// c2 error=true "destructive I/O" decision=policy_deny
	// c3 error=true "keep the logs" decision=human_deny
}
