package hitl_test

import (
	"context"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/internal/storetest"
	"github.com/tollgate-ai/tollgate/provider/scripted"
)

// TestApproveWithDetails: a policy's ApproveWith runs the call, and its
// details (a learned rule and who taught it) are in the call's
// policy_allow trace and the audit log, without the fields a person's
// answer writes; a plain Approve leaves no trace.
func TestApproveWithDetails(t *testing.T) {
	t.Parallel()
	store := storetest.New(t)
	var ran []string
	bash := agent.NewTool("bash", "Run a command.", func(ctx context.Context, a cmdArgs) (string, error) {
		ran = append(ran, a.Cmd)
		return "ran " + a.Cmd, nil
	}, nil)
	policy := hitl.Typed(func(ctx context.Context, c *hitl.PolicyContext, a cmdArgs) hitl.ApprovalDecision {
		if a.Cmd == "plain" {
			return hitl.Approve()
		}
		return hitl.ApproveWith(map[string]any{"learned_rule": "lr_1", "learned_by": "alice", "decision": "approve", "by": "mallory"})
	})
	ch := hitl.NewCheckpointedChannel(store, "session-1", nil)
	a, err := agent.New(agent.Config{Provider: scripted.New(oneCall("git diff")...), Tools: []*agent.Tool{bash},
		Middleware: []agent.Middleware{hitl.NewApprovalPolicyMiddleware(ch, policy)},
		Channel:    ch, Checkpointer: store, ThreadID: "session-1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Prompt(context.Background(), "go"); err != nil {
		t.Fatal(err)
	}
	r := lastResult(t, a)
	want := map[string]any{"decision": "policy_allow", "learned_rule": "lr_1", "learned_by": "alice"}
	if r.IsError || len(ran) != 1 || !sameMap(hitlTrace(r), want) {
		t.Fatalf("result %+v (ran %v), trace %v, want %v", r, ran, hitlTrace(r), want)
	}
	events, err := store.ListEvents(context.Background(), "session-1", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	audited := false
	for _, e := range events {
		audited = audited || e.Type == "tool_result" && strings.Contains(string(e.Data), `"learned_rule":"lr_1"`) && strings.Contains(string(e.Data), `"learned_by":"alice"`)
	}
	if !audited {
		t.Error("the learned rule and its author are not in the audit log")
	}
	if d := hitl.Approve(); d.Details() != nil || d.Action() != "approve" {
		t.Errorf("Approve() = %s with details %v", d, d.Details())
	}
}
