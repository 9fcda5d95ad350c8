package hooks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/hooks"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/policy"
	"github.com/tollgate-ai/tollgate/provider/scripted"
)

// A Claude Code session's calls, decided by a policy file: ls runs at
// once, a write outside the project waits for a person, who denies it.
func Example() {
	ctx := context.Background()
	store := memory.New()
	p, _ := policy.Parse("coding.yaml", []byte(`version: 1
default: ask
shell: {Bash: command}
rules:
  - {name: reads, tool: Bash, command: [ls, cat], action: allow}
  - {name: edits-inside, tool: Write, when: "path_inside(args.file_path, dir)", action: allow}
`), nil)
	svc, _ := hooks.New(hooks.Config{Store: store, Policy: p.HITL(), Explain: p.Evaluate, MaxTimeout: p.MaxTimeout})
	h, _ := host.New(host.Config{Store: store, Agent: agent.Config{Provider: scripted.Demo{}}, Kinds: []host.Kind{svc.Kind()}})
	_ = h.Start(ctx)
	_ = svc.Start(h)
	defer h.Shutdown(ctx)
	defer svc.Shutdown()

	// What Claude Code's PreToolUse hook sends.
	call := func(id, tool string, input string) string {
		payload := fmt.Sprintf(`{"session_id": "abc", "cwd": "/home/me/project", "hook_event_name": "PreToolUse",
			"tool_name": %q, "tool_input": %s, "tool_use_id": %q}`, tool, input, id)
		resp := svc.Handle(ctx, hooks.ClaudeCode, []byte(payload), &hooks.CallOptions{Wait: 10 * time.Minute})
		var out struct {
			H struct {
				Decision string `json:"permissionDecision"`
				Reason   string `json:"permissionDecisionReason"`
			} `json:"hookSpecificOutput"`
		}
		_ = json.Unmarshal(resp.Body, &out)
		return out.H.Decision + ": " + out.H.Reason
	}
	fmt.Println(call("toolu_1", "Bash", `{"command": "ls -la"}`))

	// A reviewer answers the question (on the page, the command line...).
	go func() {
		for {
			qs, _, _ := store.ListQuestions(ctx, checkpoint.QuestionFilter{Status: checkpoint.QuestionPending})
			if len(qs) == 1 {
				fmt.Printf("asked on thread %s: %s\n", qs[0].ThreadID, qs[0].Tool)
				a, _ := json.Marshal(hitl.ApproveAnswer{Decision: hitl.DecisionDeny, Reason: "not outside the project", Digest: qs[0].Digest})
				_, _ = h.Answer(ctx, qs[0].ThreadID, qs[0].ID, a, "alice")
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	fmt.Println(call("toolu_2", "Write", `{"file_path": "/etc/hosts", "content": ""}`))
	// Output:
	// allow: tollgate: allowed by the policy (rule reads)
	// asked on thread claude-code:abc: Write
	// deny: tollgate: denied by alice: not outside the project
}
