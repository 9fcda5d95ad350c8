package mcpgate_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/internal/mcptest"
	"github.com/tollgate-ai/tollgate/mcpgate"
	"github.com/tollgate-ai/tollgate/policy"
	"github.com/tollgate-ai/tollgate/provider/scripted"
)

// agentPolicy reads the tools' annotations: a write the server says is
// not destructive is asked with a timeout of its own; echo is allowed,
// deletes are blocked whatever the server says.
const agentPolicy = `version: 1
default: ask
rules:
  - name: echo
    tool: mcp__t__echo
    action: allow
  - name: no-deletes
    tool: "mcp__t__delete_*"
    action: block
    reason: deleting is not for agents
  - name: mcp-writes
    tool: "mcp__*"
    when: annotations.destructive == false && annotations.read_only == false
    action: ask
    timeout: 5m
    impact: writes through an MCP server
`

// A native agent calls an MCP server's tools through the approval
// middleware and a policy, with the real pieces: what reaches the server
// is what the policy and the reviewer let through, with the reviewer's
// edit, and arguments the tool's schema refuses reach neither.
func TestAgentThroughApprovals(t *testing.T) {
	t.Parallel()
	l := new(mcptest.Ledger)
	opts, _ := upOptions(t)
	u := upConnect(t, mcpgate.ServerConfig{Name: "t", URL: upServeHTTP(t, l, nil)}, opts)
	pol, err := policy.Parse("agent.yaml", []byte(agentPolicy), nil)
	if err != nil {
		t.Fatal(err)
	}

	channel := hitl.NewCheckpointedChannel(memory.New(), "s1", nil)
	model := scripted.New(
		scripted.Turn{ToolCalls: []agent.ToolCall{
			scripted.Call("echo", "mcp__t__echo", map[string]any{"text": "hi"}),
			scripted.Call("delete", "mcp__t__delete_repo", map[string]any{"repo": "acme/web"}),
			scripted.Call("approved", "mcp__t__write_note", map[string]any{"path": "a.txt", "text": "approved"}),
			scripted.Call("denied", "mcp__t__write_note", map[string]any{"path": "b.txt", "text": "denied"}),
			scripted.Call("edited", "mcp__t__write_note", map[string]any{"path": "c.txt", "text": "original"}),
			scripted.Call("invalid", "mcp__t__write_note", map[string]any{"path": "d.txt"}), // no text
		}},
		scripted.Turn{Text: "done"},
	)
	a, err := agent.New(agent.Config{
		Provider: model, Tools: u.AgentTools(),
		Middleware: []agent.Middleware{hitl.NewApprovalPolicyMiddleware(channel, pol.HITL())},
		Channel:    channel, ThreadID: "s1",
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := a.Prompt(context.Background(), "tidy up the repo"); done <- err }()

	// Three questions: the three valid write_note calls.
	ctx := context.Background()
	var reqs []*hitl.Request
	deadline := time.Now().Add(10 * time.Second)
	for len(reqs) < 3 {
		if reqs, err = channel.Pending(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			t.Fatalf("the run ended with %d questions asked: %v", len(reqs), err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d questions, want 3", len(reqs))
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	if reqs, _ = channel.Pending(ctx); len(reqs) != 3 {
		t.Fatalf("%d questions, want 3", len(reqs))
	}
	if calls := l.Calls(); len(calls) != 0 {
		t.Fatalf("calls reached the server before their answers: %+v", calls)
	}
	for _, req := range reqs {
		p := req.Payload
		ann, _ := p.Details["annotations"].(map[string]any)
		if p.ToolName != "mcp__t__write_note" || ann["mcp_server"] != "t" || ann["mcp_tool"] != "write_note" || ann["destructive"] != false {
			t.Errorf("question %s: tool %s, annotations %v", req.CallID, p.ToolName, p.Details["annotations"])
		}
		if p.Details["matched_rule"] != "mcp-writes" || p.Details["impact"] != "writes through an MCP server" || req.TimeoutSeconds != 300 {
			t.Errorf("question %s: details %v, timeout %ds", req.CallID, p.Details, req.TimeoutSeconds)
		}
		if !strings.Contains(string(p.ArgsSchema), `"text"`) {
			t.Errorf("question %s: the reviewer is not shown the MCP schema: %s", req.CallID, p.ArgsSchema)
		}
		var answer hitl.ApproveAnswer
		switch req.CallID {
		case "approved":
			answer = hitl.ApproveAnswer{Decision: hitl.DecisionApprove, Digest: req.Digest}
		case "denied":
			answer = hitl.ApproveAnswer{Decision: hitl.DecisionDeny, Reason: "not that note"}
		case "edited":
			// The MCP schema checks an edit: a wrong one is refused, the
			// question stays open.
			bad := hitl.ApproveAnswer{Decision: hitl.DecisionEdit, EditedArgs: map[string]any{"path": "c.txt"}, Digest: req.Digest}
			if err := channel.Answer(ctx, req.QuestionID, bad); err == nil || !strings.Contains(err.Error(), "text") {
				t.Errorf("an edit without text: %v", err)
			}
			answer = hitl.ApproveAnswer{Decision: hitl.DecisionEdit, EditedArgs: map[string]any{"path": "c.txt", "text": "edited"}, Digest: req.Digest}
		default:
			t.Fatalf("question for call %s", req.CallID)
		}
		if err := channel.Answer(ctx, req.QuestionID, answer); err != nil {
			t.Fatalf("answer %s: %v", req.CallID, err)
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the run did not end")
	}

	msgs, err := a.Messages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	results := map[string]agent.ToolResult{}
	for _, m := range msgs {
		if m.Result != nil {
			results[m.Result.CallID] = *m.Result
		}
	}
	for _, c := range []struct {
		call    string
		isError bool
		content string
	}{
		{"echo", false, "echo: hi"},
		{"delete", true, "deleting is not for agents"},
		{"approved", false, "wrote 8 bytes to a.txt"},
		{"denied", true, "not that note"},
		{"edited", false, "wrote 6 bytes to c.txt"},
		{"invalid", true, "text"},
	} {
		r, ok := results[c.call]
		if !ok {
			t.Errorf("%s: no result", c.call)
			continue
		}
		if r.IsError != c.isError || !strings.Contains(r.Content, c.content) {
			t.Errorf("%s: error=%v %q, want error=%v containing %q", c.call, r.IsError, r.Content, c.isError, c.content)
		}
	}
	if results["invalid"].Details["validation"] == nil {
		t.Errorf("invalid: no validation problems in %v", results["invalid"].Details)
	}

	// What reached the server: the approved note and the edited one, each
	// once; not the denied one, not the invalid one, not the delete.
	var got []string
	for _, c := range l.Calls() {
		got = append(got, fmt.Sprintf("%s %v %v", c.Tool, c.Args["path"], c.Args["text"]))
	}
	want := map[string]bool{"write_note a.txt approved": true, "write_note c.txt edited": true}
	if len(got) != 2 || !want[got[0]] || !want[got[1]] || got[0] == got[1] {
		t.Errorf("ledger %q, want the approved and the edited note, once each", got)
	}
	if n := len(model.Requests()); n != 2 {
		t.Errorf("%d model calls, want 2", n)
	}
}
