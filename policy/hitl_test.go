package policy

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/internal/display"
	"github.com/tollgate-ai/tollgate/provider/scripted"
)

// bashArgs are the typed arguments of a bash tool.
type bashArgs struct {
	Cmd string `json:"cmd"`
}

func TestHITL(t *testing.T) {
	t.Parallel()
	p := mustParse(t, rulesSrc, nil)
	hp := p.HITL()
	tests := []struct {
		name   string
		pc     *hitl.PolicyContext
		action string
		text   string
	}{
		{"raw args, allow", &hitl.PolicyContext{Tool: "bash", RawArgs: json.RawMessage(`{"cmd":"ls -la"}`)}, "approve", ""},
		{"raw args, block", &hitl.PolicyContext{Tool: "bash", RawArgs: json.RawMessage(`{"cmd":"ls; rm -rf ~"}`)}, "deny", "deleting is not allowed"},
		{"typed args only", &hitl.PolicyContext{Tool: "bash", Args: bashArgs{Cmd: "cat x | wc -l"}}, "approve", ""},
		{"ask with timeout and details", &hitl.PolicyContext{Tool: "pay", RawArgs: json.RawMessage(`{"amount": 5000}`)}, "ask", "10m0s"},
		{"thread", &hitl.PolicyContext{Tool: "pay", ThreadID: "untrusted", RawArgs: json.RawMessage(`{"amount": 1}`)}, "deny", "payments are off"},
		{"arguments not an object", &hitl.PolicyContext{Tool: "bash", RawArgs: json.RawMessage(`[1]`)}, "ask", "policy_error"},
		{"no arguments", &hitl.PolicyContext{Tool: "bash"}, "ask", ""},
	}
	for _, tt := range tests {
		d := hp(context.Background(), tt.pc)
		if d.Action() != tt.action || !strings.Contains(d.String(), tt.text) {
			t.Errorf("%s: got %s (%s), want %s containing %q", tt.name, d.Action(), d, tt.action, tt.text)
		}
	}
	// A block names its rule, under the key an ask's details use.
	if d := hp(context.Background(), &hitl.PolicyContext{Tool: "bash", RawArgs: json.RawMessage(`{"cmd":"ls; rm -rf ~"}`)}); d.Action() != "deny" ||
		d.Details()["matched_rule"] != "no-rm" || len(d.Details()) != 1 {
		t.Errorf("block: %s, details %v, want matched_rule no-rm", d, d.Details())
	}
	if d := hp(context.Background(), &hitl.PolicyContext{Tool: "pay", ThreadID: "untrusted", RawArgs: json.RawMessage(`{"amount": 1}`)}); d.Details()["matched_rule"] != "pay-blocked-thread" {
		t.Errorf("thread block: details %v", d.Details())
	}
	d := hp(context.Background(), &hitl.PolicyContext{Tool: "pay", RawArgs: json.RawMessage(`{"amount": 5000}`)})
	if s := d.String(); !strings.Contains(s, "matched_rule:pay-big") || !strings.Contains(s, "impact:money leaves the account") {
		t.Errorf("ask details: %s", s)
	}
}

func TestReloadableHITL(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/p.yaml"
	writeFile(t, path, allowLs)
	r, err := NewReloadable(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	hp := r.HITL()
	pc := &hitl.PolicyContext{Tool: "bash", RawArgs: json.RawMessage(`{"cmd":"ls"}`)}
	if d := hp(context.Background(), pc); d.Action() != "approve" {
		t.Fatalf("got %s", d)
	}
	writeFile(t, path, blockLs)
	if _, err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	if d := hp(context.Background(), pc); d.Action() != "deny" {
		t.Errorf("after reload: %s", d)
	}
}

// TestHITLBlockNamesRule: a call the policy blocks, run through the
// approval middleware, carries the rule in its trace, and reads as a
// policy block with its rule, not as a denial.
func TestHITLBlockNamesRule(t *testing.T) {
	t.Parallel()
	p := mustParse(t, rulesSrc, nil)
	store := memory.New()
	ran := false
	bash := agent.NewTool("bash", "Run a command.", func(ctx context.Context, a bashArgs) (string, error) {
		ran = true
		return "", nil
	}, nil)
	ch := hitl.NewCheckpointedChannel(store, "t1", nil)
	a, err := agent.New(agent.Config{
		Provider: scripted.New(scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "bash", bashArgs{"ls; rm -rf ~"})}}, scripted.Turn{Text: "done"}),
		Tools:    []*agent.Tool{bash}, Middleware: []agent.Middleware{hitl.NewApprovalPolicyMiddleware(ch, p.HITL())},
		Channel: ch, Checkpointer: store, ThreadID: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Prompt(context.Background(), "go"); err != nil {
		t.Fatal(err)
	}
	msgs, err := a.Messages(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var r *agent.ToolResult
	for _, m := range msgs {
		if m.Role == agent.RoleTool {
			r = m.Result
		}
	}
	if r == nil || ran {
		t.Fatalf("result %v, ran %v", r, ran)
	}
	h, _ := r.Details["hitl"].(map[string]any)
	if !r.IsError || h["decision"] != "policy_deny" || h["reason"] != "deleting is not allowed (rm -rf ~)" || h["matched_rule"] != "no-rm" {
		t.Fatalf("result %+v", r)
	}
	if got, want := display.Outcome(*r, nil), "blocked by the policy (rule no-rm: deleting is not allowed (rm -rf ~))"; got != want {
		t.Errorf("outcome %q, want %q", got, want)
	}
}
