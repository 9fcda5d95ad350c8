// Command sandbox is the seed recipe "sandbox confirmation with
// ApprovalPolicyMiddleware", offline: a scripted model asks to "list files
// then delete temp logs"; the policy approves ls at once and asks a person
// about rm; a host loop answers. It runs the recipe three times, answering
// approve, deny with a reason, and edit, and prints what happened.
//
//	go run ./examples/sandbox
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/provider/scripted"
	"github.com/tollgate-ai/tollgate/tools/bash"
)

// classifyCommand is the seed's sample rule engine. Its prefix test would
// let "ls; rm -rf ~" through; real deployments use package policy.
func classifyCommand(cmd string) (tier, reason string) {
	for _, p := range []string{"ls", "cat", "head", "grep", "find"} {
		if strings.HasPrefix(cmd, p) {
			return "allow", ""
		}
	}
	if strings.Contains(cmd, "rm -rf /") || strings.HasPrefix(cmd, "dd") {
		return "block", "destructive I/O"
	}
	return "confirm", "needs human review"
}

var sandboxPolicy = hitl.Typed(func(ctx context.Context, c *hitl.PolicyContext, args bash.Args) hitl.ApprovalDecision {
	tier, reason := classifyCommand(args.Cmd)
	switch tier {
	case "allow":
		return hitl.Approve()
	case "block":
		return hitl.Deny(reason)
	}
	return hitl.AskUser(hitl.AskOptions{Timeout: 180 * time.Second,
		Details: map[string]any{"matched_rule": tier, "impact": reason}})
})

// model proposes `ls` and `rm -r tmp-logs` in one turn, then sums up the
// results the way the offline demo model does.
type model struct{}

func (model) Complete(ctx context.Context, req *agent.Request, onText func(string)) (*agent.Message, error) {
	if last := req.Messages[len(req.Messages)-1]; last.Role == agent.RoleTool {
		return scripted.Demo{}.Complete(ctx, req, onText)
	}
	return &agent.Message{Role: agent.RoleAssistant, Text: "I'll list the files, then delete the temp logs.", ToolCalls: []agent.ToolCall{
		scripted.Call("call_ls", "bash", bash.Args{Cmd: "ls"}),
		scripted.Call("call_rm", "bash", bash.Args{Cmd: "rm -r tmp-logs"}),
	}}, nil
}

// answerFor is what the reviewer in this example says.
func answerFor(choice string) hitl.ApproveAnswer {
	switch choice {
	case "deny":
		return hitl.ApproveAnswer{Decision: hitl.DecisionDeny, Reason: "keep the logs until the audit"}
	case "edit":
		return hitl.ApproveAnswer{Decision: hitl.DecisionEdit, EditedArgs: map[string]any{"cmd": "rm tmp-logs/old.log"}}
	}
	return hitl.ApproveAnswer{Decision: hitl.DecisionApprove}
}

// run plays the recipe once in a fresh sandbox directory, the reviewer
// answering choice.
func run(ctx context.Context, w io.Writer, choice string) error {
	dir, err := os.MkdirTemp("", "tollgate-sandbox-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for _, f := range []string{"README.md", "app.go", "tmp-logs/old.log", "tmp-logs/new.log"} {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte("x\n"), 0o644); err != nil {
			return err
		}
	}

	// Step 2: wire the agent. The checkpointer here is in memory; use
	// checkpoint/sqlite or checkpoint/postgres to survive restarts.
	store := memory.New()
	channel := hitl.NewCheckpointedChannel(store, "session-1", nil)
	a, err := agent.New(agent.Config{
		Provider:     model{},
		Model:        agent.Model{ID: "scripted", Provider: "scripted"},
		SystemPrompt: "You are a helpful assistant with access to a bash shell.",
		Tools:        []*agent.Tool{bash.New(&bash.Options{Dir: dir})},
		Middleware:   []agent.Middleware{hitl.NewApprovalPolicyMiddleware(channel, sandboxPolicy)},
		Channel:      channel,
		Checkpointer: store,
		ThreadID:     "session-1",
	})
	if err != nil {
		return err
	}
	type outcome struct {
		msg *agent.Message
		err error
	}
	events := a.Subscribe(0)
	defer events.Close()
	done := make(chan outcome, 1)
	go func() {
		msg, err := a.Prompt(ctx, "list files then delete temp logs")
		done <- outcome{msg, err}
	}()

	// Step 3: the host loop answers the pending request.
	hostCtx, stopHost := context.WithCancel(ctx)
	defer stopHost()
	for req, err := range channel.Subscribe(hostCtx) {
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "reviewer sees: %s %q (rule %v, impact %v, %ds to answer)\n", req.Payload.ToolName,
			req.Payload.Args["cmd"], req.Payload.Details["matched_rule"], req.Payload.Details["impact"], req.TimeoutSeconds)
		// ls was approved by the policy and runs at once, without waiting
		// for the reviewer; let it finish so the printout is the same
		// every time.
		for e := range events.C {
			if f, ok := e.(*agent.ToolCallFinishedEvent); ok && f.Call.ID == "call_ls" {
				fmt.Fprintln(w, "meanwhile ls ran at once (policy: approve)")
				break
			}
		}
		ans := answerFor(choice)
		fmt.Fprintf(w, "reviewer answers: %s\n", choice)
		if err := channel.Answer(ctx, req.QuestionID, ans); err != nil {
			return err
		}
		break
	}
	out := <-done
	if out.err != nil {
		return out.err
	}
	// Results in the model's call order (they finish in any order).
	msgs, err := a.Messages(ctx)
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if r := m.Result; r != nil {
			fmt.Fprintf(w, "tool result %s: is_error=%v %s%s\n", r.CallID, r.IsError, oneLine(r.Content), traceOf(*r))
		}
	}
	fmt.Fprintf(w, "model: %s\n", strings.ReplaceAll(out.msg.Text, "\n", "\n       "))
	left, _ := filepath.Glob(filepath.Join(dir, "tmp-logs", "*"))
	for i := range left {
		left[i] = filepath.Base(left[i])
	}
	sort.Strings(left)
	fmt.Fprintf(w, "tmp-logs now holds: %v\n", left)
	return nil
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", `\n`)
	if len(s) > 90 {
		s = s[:90] + "..."
	}
	return s
}

func traceOf(r agent.ToolResult) string {
	h, ok := r.Details["hitl"].(map[string]any)
	if !ok {
		return ""
	}
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		if h[k] != "" {
			parts = append(parts, fmt.Sprintf("%s=%v", k, h[k]))
		}
	}
	return "\n    hitl trace: " + strings.Join(parts, " ")
}

func main() {
	for _, choice := range []string{"approve", "deny", "edit"} {
		fmt.Printf("== reviewer chooses %s ==\n", choice)
		if err := run(context.Background(), os.Stdout, choice); err != nil {
			fmt.Fprintln(os.Stderr, "sandbox:", err)
			os.Exit(1)
		}
	}
}
