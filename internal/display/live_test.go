package display_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/internal/display"
	"github.com/tollgate-ai/tollgate/interrupt"
	"github.com/tollgate-ai/tollgate/provider/scripted"
	"github.com/tollgate-ai/tollgate/tools/bash"
)

type bashArgs struct {
	Cmd string `json:"cmd"`
}

// fakeBash answers as the bash tool does (a bash.Result, encoded by the
// agent), without running anything.
func fakeBash() *agent.Tool {
	return agent.NewTool("bash", "Run a command (pretend).", func(ctx context.Context, a bashArgs) (bash.Result, error) {
		return bash.Result{Stdout: "ran: " + a.Cmd + "\n"}, nil
	}, nil)
}

// outcomes runs calls through an agent with middleware on channel, lets
// answer reply to each question, and returns, per call, the Outcome and
// Result shown from what the store holds.
func outcomes(t *testing.T, channel *hitl.CheckpointedChannel, mw agent.Middleware, calls []agent.ToolCall,
	answer func(q *checkpoint.Question) any) map[string][2]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	model := scripted.New(scripted.Turn{ToolCalls: calls}, scripted.Turn{Text: "done"})
	a, err := agent.New(agent.Config{Provider: model, Tools: []*agent.Tool{fakeBash()},
		Middleware: []agent.Middleware{mw}, Channel: channel, ThreadID: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := a.Prompt(ctx, "go"); done <- err }()
	store := channel.Store()
	waiting := true
	for waiting {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			waiting = false
		case <-time.After(5 * time.Millisecond):
			qs, _, err := store.ListQuestions(ctx, checkpoint.QuestionFilter{ThreadID: "t1", Status: checkpoint.QuestionPending})
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range qs {
				if ans := answer(q); ans != nil {
					rctx := hitl.WithReviewer(ctx, "alice")
					if err := channel.Answer(rctx, q.ID, ans); err != nil {
						t.Fatalf("answering %s: %v", q.ID, err)
					}
				}
			}
		}
	}
	msgs, err := a.Messages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	qs, _, err := store.ListQuestions(ctx, checkpoint.QuestionFilter{ThreadID: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][2]string{}
	for _, m := range msgs {
		r := m.Result
		if r == nil {
			continue
		}
		i := slices.IndexFunc(qs, func(q *checkpoint.Question) bool { return q.CallID == r.CallID })
		var q *checkpoint.Question
		if i >= 0 {
			q = qs[i]
		}
		out[r.CallID] = [2]string{display.Outcome(*r, q), display.Result(*r)}
	}
	return out
}

// TestOutcomeOfTheApprovalMiddleware reads what the approval policy
// middleware really records, every decision of the seed's table.
func TestOutcomeOfTheApprovalMiddleware(t *testing.T) {
	t.Parallel()
	policy := hitl.Typed(func(ctx context.Context, c *hitl.PolicyContext, a bashArgs) hitl.ApprovalDecision {
		switch {
		case strings.HasPrefix(a.Cmd, "ls"):
			return hitl.Approve()
		case strings.HasPrefix(a.Cmd, "dd"):
			return hitl.Deny("destructive I/O")
		case strings.HasPrefix(a.Cmd, "sleep"):
			return hitl.AskUser(hitl.AskOptions{Timeout: 200 * time.Millisecond})
		}
		return hitl.AskUser(hitl.AskOptions{Timeout: time.Minute, Details: map[string]any{"matched_rule": "ask"}})
	})
	channel := hitl.NewCheckpointedChannel(memory.New(), "t1", nil)
	calls := []agent.ToolCall{
		scripted.Call("c1", "bash", bashArgs{"ls >> out"}),
		scripted.Call("c2", "bash", bashArgs{"dd if=/dev/zero of=/dev/sda"}),
		scripted.Call("c3", "bash", bashArgs{"rm /tmp/logs"}),
		scripted.Call("c4", "bash", bashArgs{"rm -r /tmp/cache"}),
		scripted.Call("c5", "bash", bashArgs{"echo <a> >> b"}),
		scripted.Call("c6", "bash", bashArgs{"sleep 1"}),
	}
	got := outcomes(t, channel, hitl.NewApprovalPolicyMiddleware(channel, policy), calls, func(q *checkpoint.Question) any {
		switch q.CallID {
		case "c3":
			return hitl.ApproveAnswer{Decision: hitl.DecisionDeny, Reason: "keep the logs"}
		case "c4":
			return hitl.ApproveAnswer{Decision: hitl.DecisionEdit, EditedArgs: map[string]any{"cmd": "rm -r /tmp/cache/old >> log"}}
		case "c5":
			return hitl.ApproveAnswer{Decision: hitl.DecisionApprove}
		}
		return nil
	})
	want := map[string][2]string{
		"c1": {"", "exit 0\nstdout:\n  ran: ls >> out"},
		"c2": {"blocked by the policy (destructive I/O)", "error: destructive I/O"},
		"c3": {"denied by alice (keep the logs)", "error: keep the logs"},
		"c4": {"edited by alice; ran: rm -r /tmp/cache/old >> log", "exit 0\nstdout:\n  ran: rm -r /tmp/cache/old >> log"},
		"c5": {"approved by alice", "exit 0\nstdout:\n  ran: echo <a> >> b"},
		"c6": {"timed out after 200ms", "error: approval_timeout"},
	}
	check(t, got, want)
}

// TestOutcomeOfTheInterruptMiddleware reads what the tool_interrupt
// middleware really records.
func TestOutcomeOfTheInterruptMiddleware(t *testing.T) {
	t.Parallel()
	mw, err := interrupt.New(interrupt.Rule{Tool: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	channel := hitl.NewCheckpointedChannel(memory.New(), "t1", nil)
	calls := []agent.ToolCall{
		scripted.Call("c1", "bash", bashArgs{"ls >> out"}),
		scripted.Call("c2", "bash", bashArgs{"rm /tmp/logs"}),
		scripted.Call("c3", "bash", bashArgs{"rm -r /tmp/cache"}),
	}
	got := outcomes(t, channel, mw, calls, func(q *checkpoint.Question) any {
		switch q.CallID {
		case "c1":
			return interrupt.Approve()
		case "c2":
			return interrupt.Deny("keep the logs")
		case "c3":
			return interrupt.Edit(map[string]any{"cmd": "rm -r /tmp/cache/old"})
		}
		return nil
	})
	want := map[string][2]string{
		"c1": {"approved by alice", "exit 0\nstdout:\n  ran: ls >> out"},
		"c2": {"denied by alice (keep the logs)", "error: tool call denied by the reviewer: keep the logs"},
		"c3": {"edited by alice; ran: rm -r /tmp/cache/old", "exit 0\nstdout:\n  ran: rm -r /tmp/cache/old"},
	}
	check(t, got, want)
}

func check(t *testing.T, got, want map[string][2]string) {
	t.Helper()
	for id, w := range want {
		if g := got[id]; g != w {
			t.Errorf("call %s:\noutcome %q\nwant    %q\nresult\n%s\nwant\n%s", id, g[0], w[0], g[1], w[1])
		}
	}
	if len(got) != len(want) {
		t.Errorf("got results for %d calls, want %d", len(got), len(want))
	}
}
