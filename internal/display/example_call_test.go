package display_test

import (
	"fmt"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/internal/display"
)

func ExampleArgs() {
	args := map[string]any{
		"cmd":     "cat <<EOF >> notes\nhello\nEOF",
		"timeout": 30,
		"dir":     "/tmp",
	}
	for _, l := range display.Args(args) {
		fmt.Println(l)
	}
	// Output:
	// cmd:
	//   cat <<EOF >> notes
	//   hello
	//   EOF
	// dir: /tmp
	// timeout: 30
}

// A bash result reads as its exit code and output, not as the JSON the
// model gets.
func ExampleResult() {
	r := agent.ToolResult{ToolName: "bash",
		Content: `{"exit_code":1,"stdout":"a \u003e b\n","stderr":"grep: c: No such file or directory\n"}`}
	fmt.Println(display.Result(r))
	// Output:
	// exit 1
	// stdout:
	//   a > b
	// stderr:
	//   grep: c: No such file or directory
}

// A policy block, a person's deny, a timeout and an edit, as the approval
// middleware records them.
func ExampleOutcome() {
	results := []agent.ToolResult{
		{IsError: true, Content: "destructive I/O", Details: map[string]any{"hitl": map[string]any{
			"decision": "policy_deny", "reason": "destructive I/O"}}},
		{IsError: true, Content: "keep the logs", Details: map[string]any{"hitl": map[string]any{
			"decision": "human_deny", "reason": "keep the logs", "by": "bob"}}},
		{IsError: true, Content: "approval_timeout", Details: map[string]any{"hitl": map[string]any{
			"decision": "timed_out", "deny_reason": "approval_timeout", "timeout_seconds": 300}}},
		{Content: `{"exit_code":0,"stdout":"","stderr":""}`, Details: map[string]any{"hitl": map[string]any{
			"decision": "edit", "by": "alice",
			"original_args": map[string]any{"cmd": "rm -r /tmp"}, "edited_args": map[string]any{"cmd": "rm -r /tmp/cache"}}}},
	}
	for _, r := range results {
		fmt.Println(display.Outcome(r, nil))
	}
	// Output:
	// blocked by the policy (destructive I/O)
	// denied by bob (keep the logs)
	// timed out after 5m0s
	// edited by alice; ran: rm -r /tmp/cache
}
