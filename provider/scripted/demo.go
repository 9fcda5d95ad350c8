package scripted

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/internal/jsontext"
)

// Demo is the offline demo model. Each line of the latest user message that
// starts with "$ " becomes a bash tool call {"cmd": "..."}, all in one
// turn; once the results are in, it replies with one short line per call:
// ran (with the exit code), denied (with the reason), timed out, or failed.
// A message with no such line gets a one-line hint.
type Demo struct{}

// Complete implements agent.Provider.
func (Demo) Complete(ctx context.Context, req *agent.Request, onText func(string)) (*agent.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	msgs := req.Messages
	if len(msgs) == 0 {
		return reply("Nothing to do.", nil, "", nil, onText), nil
	}
	if msgs[len(msgs)-1].Role == agent.RoleTool {
		return reply(summarize(msgs), nil, "", nil, onText), nil
	}
	var user *agent.Message
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == agent.RoleUser {
			user = &msgs[i]
			break
		}
	}
	var calls []agent.ToolCall
	if user != nil {
		n := 0
		for _, line := range strings.Split(user.Text, "\n") {
			line = strings.TrimRight(line, "\r")
			cmd, ok := strings.CutPrefix(line, "$ ")
			if !ok || strings.TrimSpace(cmd) == "" {
				continue
			}
			n++
			args, _ := jsontext.Marshal(map[string]string{"cmd": cmd})
			calls = append(calls, agent.ToolCall{ID: fmt.Sprintf("call_%d_%d", len(msgs), n), Name: "bash", Arguments: args})
		}
	}
	if len(calls) == 0 {
		return reply(`Nothing to run: start a line with "$ " to run it as a command.`, nil, "", nil, onText), nil
	}
	return reply(fmt.Sprintf("Running %d command(s).", len(calls)), calls, "", nil, onText), nil
}

// summarize describes the results of the last turn's calls.
func summarize(msgs []agent.Message) string {
	var calls []agent.ToolCall
	start := len(msgs)
	for start > 0 && msgs[start-1].Role == agent.RoleTool {
		start--
	}
	if start > 0 {
		calls = msgs[start-1].ToolCalls
	}
	cmdOf := map[string]string{}
	for _, c := range calls {
		var a struct {
			Cmd string `json:"cmd"`
		}
		_ = json.Unmarshal(c.Arguments, &a)
		cmdOf[c.ID] = a.Cmd
	}
	var lines []string
	for _, m := range msgs[start:] {
		r := m.Result
		if r == nil {
			continue
		}
		label := "`" + cmdOf[r.CallID] + "`"
		if cmdOf[r.CallID] == "" {
			label = r.ToolName
		}
		// After an edit, what ran is the edited command: name it first.
		if ran := editedCmd(r); ran != "" {
			label = "`" + ran + "` (edited from " + label + ")"
		}
		lines = append(lines, fmt.Sprintf("%s: %s", label, Outcome(r)))
	}
	return strings.Join(lines, "\n")
}

// Outcome describes a tool result in a few words: "ran, exit 0",
// "denied: reason" (by a person), "blocked by the policy: reason",
// "timed out waiting for approval", "aborted: reason", "failed: ...".
func Outcome(r *agent.ToolResult) string {
	decision := hitlDecision(r)
	switch {
	case decision == "timed_out":
		return "timed out waiting for approval"
	case r.IsError && decision == "policy_deny":
		return "blocked by the policy: " + r.Content
	case r.IsError && decision == "aborted":
		return "aborted: " + r.Content
	case r.IsError && (strings.Contains(decision, "deny") || r.Details["denied"] == true):
		return "denied: " + r.Content
	case r.IsError:
		return "failed: " + firstLine(r.Content)
	}
	var out struct {
		ExitCode *int `json:"exit_code"`
	}
	if json.Unmarshal([]byte(r.Content), &out) == nil && out.ExitCode != nil {
		return fmt.Sprintf("ran, exit %d", *out.ExitCode)
	}
	return "ran"
}

func hitlDecision(r *agent.ToolResult) string {
	h, _ := r.Details["hitl"].(map[string]any)
	d, _ := h["decision"].(string)
	return d
}

// editedCmd is the command that ran after a reviewer's edit ("" when
// there was none).
func editedCmd(r *agent.ToolResult) string {
	h, _ := r.Details["hitl"].(map[string]any)
	if d, _ := h["decision"].(string); d != "edit" {
		return ""
	}
	args, _ := h["edited_args"].(map[string]any)
	cmd, _ := args["cmd"].(string)
	return cmd
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
