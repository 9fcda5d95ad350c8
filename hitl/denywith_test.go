package hitl_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/internal/storetest"
	"github.com/tollgate-ai/tollgate/provider/scripted"
)

// rulePolicy blocks "dd" by a named rule (with details that also try to
// set the trace's own fields, which would make the block read as a
// person's answer) and asks for everything else.
var rulePolicy = hitl.Typed(func(ctx context.Context, c *hitl.PolicyContext, a cmdArgs) hitl.ApprovalDecision {
	if strings.HasPrefix(a.Cmd, "dd") {
		return hitl.DenyWith("destructive I/O", map[string]any{"matched_rule": "no-dd", "decision": "approve", "reason": "other",
			"by": "alice", "edited_args": map[string]any{}, "digest_mismatch": true})
	}
	return hitl.AskUser(hitl.AskOptions{Details: map[string]any{"matched_rule": "confirm"}})
})

func ruleAgent(t *testing.T, store checkpoint.Store, turns ...scripted.Turn) (*agent.Agent, *[]string) {
	t.Helper()
	var ran []string
	bash := agent.NewTool("bash", "Run a command.", func(ctx context.Context, a cmdArgs) (string, error) {
		ran = append(ran, a.Cmd)
		return "ran " + a.Cmd, nil
	}, nil)
	ch := hitl.NewCheckpointedChannel(store, "session-1", nil)
	a, err := agent.New(agent.Config{Provider: scripted.New(turns...), Tools: []*agent.Tool{bash},
		Middleware: []agent.Middleware{hitl.NewApprovalPolicyMiddleware(ch, rulePolicy)},
		Channel:    ch, Checkpointer: store, ThreadID: "session-1"})
	if err != nil {
		t.Fatal(err)
	}
	return a, &ran
}

// TestDenyWithDetails: the details of a policy's DenyWith are in the
// policy_deny trace (and the audit log), beside the decision and reason
// they cannot replace; Deny alone traces decision and reason only.
func TestDenyWithDetails(t *testing.T) {
	t.Parallel()
	d := hitl.DenyWith("no", map[string]any{"matched_rule": "r"})
	if d.Action() != "deny" || d.Reason() != "no" || d.Details()["matched_rule"] != "r" || hitl.Deny("no").Details() != nil {
		t.Fatalf("DenyWith: %s %v", d, d.Details())
	}
	store := storetest.New(t)
	a, ran := ruleAgent(t, store, oneCall("dd if=/dev/zero of=/dev/sda")...)
	if _, err := a.Prompt(context.Background(), "go"); err != nil {
		t.Fatal(err)
	}
	r := lastResult(t, a)
	h := hitlTrace(r)
	want := map[string]any{"decision": "policy_deny", "reason": "destructive I/O", "matched_rule": "no-dd"}
	if !r.IsError || r.Content != "destructive I/O" || len(*ran) != 0 || !sameMap(h, want) {
		t.Fatalf("result %+v, trace %v, want %v", r, h, want)
	}
	events, err := store.ListEvents(context.Background(), "session-1", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	audited := false
	for _, e := range events {
		audited = audited || e.Type == "tool_result" && strings.Contains(string(e.Data), `"matched_rule":"no-dd"`)
	}
	if !audited {
		t.Error("the rule is not in the audit log")
	}

	f := newFixture(t, nil, oneCall("dd if=/dev/zero")...)
	if _, err := f.agent.Prompt(context.Background(), "go"); err != nil {
		t.Fatal(err)
	}
	if h := hitlTrace(lastResult(t, f.agent)); !sameMap(h, map[string]any{"decision": "policy_deny", "reason": "destructive I/O"}) {
		t.Errorf("Deny's trace: %v", h)
	}
}

// TestDenyWithEditRefused: an edit the policy blocks by a named rule,
// found when the run reads the answer (it was stored by other code), is
// blocked with the rule in its trace, and the edit and reason as before.
func TestDenyWithEditRefused(t *testing.T) {
	t.Parallel()
	store := storetest.New(t)
	bg := context.Background()
	a, _ := ruleAgent(t, store, oneCall("rm /tmp/logs")[:1]...)
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() { _, err := a.Prompt(ctx, "go"); done <- err }()
	ch := hitl.NewCheckpointedChannel(store, "session-1", nil)
	waitFor(t, func() bool { reqs, _ := ch.Pending(bg); return len(reqs) == 1 })
	cancel()
	<-done
	if _, err := store.ResolveQuestion(bg, "session-1", "hitl_call_1", checkpoint.Resolution{Status: checkpoint.QuestionAnswered,
		Answer: json.RawMessage(`{"decision":"edit","edited_args":{"cmd":"dd of=/dev/sda"}}`), By: "alice"}); err != nil {
		t.Fatal(err)
	}
	a2, ran := ruleAgent(t, store, scripted.Turn{Text: "done"})
	if _, err := a2.Resume(bg); err != nil {
		t.Fatal(err)
	}
	r := lastResult(t, a2)
	h := hitlTrace(r)
	const reason = "the policy denies the edited call: destructive I/O"
	if !r.IsError || r.Content != reason || len(*ran) != 0 || h["decision"] != "policy_deny" || h["reason"] != reason ||
		h["matched_rule"] != "no-dd" || h["edited_args"] == nil {
		t.Fatalf("result %+v, trace %v", r, h)
	}
}

func sameMap(a, b map[string]any) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return true
}
