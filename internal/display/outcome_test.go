package display

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/interrupt"
)

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v) // HTML-escaped, as the stores hold it
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// stored is r as a reader of the store gets it back (numbers float64).
func stored(t *testing.T, r agent.ToolResult) agent.ToolResult {
	t.Helper()
	var out agent.ToolResult
	if err := json.Unmarshal(mustJSON(t, r), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func hitlResult(isError bool, content string, trace map[string]any) agent.ToolResult {
	return agent.ToolResult{CallID: "c1", ToolName: "bash", IsError: isError, Content: content, Details: map[string]any{"hitl": trace}}
}

func interruptResult(isError bool, content string, trace map[string]any) agent.ToolResult {
	return agent.ToolResult{CallID: "c1", ToolName: "bash", IsError: isError, Content: content, Details: map[string]any{"interrupt": trace}}
}

var created = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// question is a question of kind with payload, resolved as given.
func question(t *testing.T, kind string, payload any, status checkpoint.QuestionStatus, answer any, by, reason string) *checkpoint.Question {
	t.Helper()
	q := &checkpoint.Question{ThreadID: "t", ID: "q1", CallID: "c1", Kind: kind, Payload: mustJSON(t, payload),
		Status: status, AnsweredBy: by, Reason: reason, CreatedAt: created, Deadline: created.Add(5 * time.Minute)}
	if answer != nil {
		q.Answer = mustJSON(t, answer)
	}
	if kind == hitl.KindApprove || kind == interrupt.KindToolInterrupt {
		q.Tool = "bash"
	}
	return q
}

func approveQ(t *testing.T, args map[string]any, status checkpoint.QuestionStatus, answer any, by, reason string) *checkpoint.Question {
	t.Helper()
	return question(t, hitl.KindApprove, hitl.Payload{Kind: hitl.KindApprove, ToolName: "bash", Args: args,
		Details: map[string]any{"matched_rule": "ask-rm"}}, status, answer, by, reason)
}

func TestOutcome(t *testing.T) {
	t.Parallel()
	cmd := map[string]any{"cmd": "rm -r /tmp/x >> log"}
	edited := map[string]any{"cmd": "rm -r /tmp/x/cache \u202e"}
	answered := checkpoint.QuestionAnswered
	tests := []struct {
		name string
		r    agent.ToolResult
		q    *checkpoint.Question
		want string
	}{
		// the approval policy middleware
		{"allowed by a learned rule", hitlResult(false, "ran", map[string]any{"decision": "policy_allow", "learned_rule": "lr_1", "learned_by": "alice\u202e"}), nil,
			"allowed by rule lr_1, learned from alice⟨U+202E⟩'s answer"},
		{"policy block, no question", hitlResult(true, "destructive I/O", map[string]any{"decision": "policy_deny", "reason": "destructive I/O"}), nil,
			"blocked by the policy (destructive I/O)"},
		{"policy block with its rule", hitlResult(true, "dd writes disks", map[string]any{"decision": "policy_deny", "reason": "dd writes disks", "matched_rule": "no-dd"}), nil,
			"blocked by the policy (rule no-dd: dd writes disks)"},
		{"policy block, rule but no reason", hitlResult(true, "", map[string]any{"decision": "policy_deny", "rule": "no-dd"}), nil,
			"blocked by the policy (rule no-dd)"},
		{"policy block, nothing known", hitlResult(true, "", map[string]any{"decision": "policy_deny"}), nil, "blocked by the policy"},
		{"policy block, hostile reason", hitlResult(true, "x", map[string]any{"decision": "policy_deny", "reason": "no\n\u202ereally"}), nil,
			"blocked by the policy (no⟨U+000A⟩⟨U+202E⟩really)"},
		{"policy block of an edit", hitlResult(true, "x", map[string]any{"decision": "policy_deny", "reason": "the policy denies the edited call: dd", "edited_args": edited}),
			approveQ(t, cmd, answered, hitl.ApproveAnswer{Decision: "edit", EditedArgs: edited}, "alice", ""),
			"blocked: the edit by alice was refused (the policy denies the edited call: dd)"},
		{"answer for other arguments", hitlResult(true, "x", map[string]any{"decision": "policy_deny", "reason": "denied: digest", "digest_mismatch": true, "by": "mallory"}), nil,
			"blocked: the answer by mallory was given for other arguments than the call's"},
		{"denied by a person", hitlResult(true, "keep the logs", map[string]any{"decision": "human_deny", "reason": "keep the logs", "by": "bob"}),
			approveQ(t, cmd, answered, hitl.ApproveAnswer{Decision: "deny", Reason: "keep the logs"}, "bob", ""),
			"denied by bob (keep the logs)"},
		{"denied, no reason, name from the question", hitlResult(true, "denied by reviewer", map[string]any{"decision": "human_deny", "reason": ""}),
			approveQ(t, cmd, answered, hitl.ApproveAnswer{Decision: "deny"}, "bob", ""),
			"denied by bob"},
		{"denied, no one known", hitlResult(true, "no", map[string]any{"decision": "human_deny", "reason": "no"}), nil,
			"denied by the reviewer (no)"},
		{"timed out", hitlResult(true, "approval_timeout", map[string]any{"decision": "timed_out", "deny_reason": "approval_timeout", "timeout_seconds": 300}), nil,
			"timed out after 5m0s"},
		{"timed out, stored", stored(t, hitlResult(true, "approval_timeout", map[string]any{"decision": "timed_out", "deny_reason": "approval_timeout", "timeout_seconds": 180})), nil,
			"timed out after 3m0s"},
		{"timed out, time from the question", hitlResult(true, "approval_timeout", map[string]any{"decision": "timed_out"}),
			approveQ(t, cmd, checkpoint.QuestionTimedOut, nil, "timeout", ""), "timed out after 5m0s"},
		{"timed out, no time known", hitlResult(true, "approval_timeout", map[string]any{"decision": "timed_out"}), nil, "timed out"},
		{"aborted", hitlResult(true, "Tool call aborted: user closed tab", map[string]any{"decision": "aborted", "reason": "user closed tab"}), nil,
			"aborted (user closed tab)"},
		{"edited: what ran", stored(t, agent.ToolResult{Content: `{"exit_code":0,"stdout":"","stderr":""}`, Details: map[string]any{"hitl": map[string]any{
			"decision": "edit", "original_args": cmd, "edited_args": edited, "by": "alice"}}}),
			approveQ(t, cmd, answered, hitl.ApproveAnswer{Decision: "edit", EditedArgs: edited}, "alice", ""),
			"edited by alice; ran: rm -r /tmp/x/cache ⟨U+202E⟩"},
		{"edited, several arguments", hitlResult(false, "ok", map[string]any{"decision": "edit", "edited_args": map[string]any{"path": "/tmp/<x>", "n": 2}, "by": "alice"}), nil,
			`edited by alice; ran: {"n":2,"path":"/tmp/<x>"}`},
		{"approved by a person", agent.ToolResult{Content: "ok"},
			approveQ(t, cmd, answered, hitl.ApproveAnswer{Decision: "approve"}, "alice", ""), "approved by alice"},
		{"approved by the policy", agent.ToolResult{Content: "ok"}, nil, ""},
		{"still waiting", agent.ToolResult{}, approveQ(t, cmd, checkpoint.QuestionPending, nil, "", ""), ""},

		// the tool_interrupt middleware
		{"interrupt deny", interruptResult(true, "tool call denied by the reviewer: not now", map[string]any{"decision": "deny", "message": "not now", "question_id": "approve_c1", "by": "bob"}), nil,
			"denied by bob (not now)"},
		{"interrupt timed out", stored(t, interruptResult(true, "tool call denied: approval timed out: no answer in time", map[string]any{"decision": "timed_out", "message": "no answer in time", "by": "timeout"})),
			question(t, interrupt.KindToolInterrupt, interrupt.NewToolInterrupt("bash", "c1", cmd), checkpoint.QuestionTimedOut, nil, "timeout", ""),
			"timed out after 5m0s"},
		{"interrupt aborted", interruptResult(true, "tool call aborted: gone", map[string]any{"decision": "aborted", "message": "gone", "by": "abort"}), nil,
			"aborted (gone)"},
		{"interrupt invalid edit", interruptResult(true, "x", map[string]any{"decision": "invalid_edit", "message": "cmd: want string", "by": "alice"}), nil,
			"denied: the edit by alice is invalid (cmd: want string)"},
		{"interrupt edit merges over the original", stored(t, interruptResult(false, "ok", map[string]any{"decision": "edit", "by": "alice",
			"original_args": map[string]any{"cmd": "rm -rf /", "dir": "/"}, "edited_args": map[string]any{"dir": "/tmp"}})), nil,
			`edited by alice; ran: {"cmd":"rm -rf /","dir":"/tmp"}`},
		{"interrupt approved", agent.ToolResult{Content: "ok"},
			question(t, interrupt.KindToolInterrupt, interrupt.NewToolInterrupt("bash", "c1", cmd), answered, true, "alice", ""), "approved by alice"},

		// the agent
		{"abort of a call never decided", stored(t, hitlResult(true, "Tool call aborted: bye", map[string]any{"decision": "aborted", "reason": "bye"})), nil, "aborted (bye)"},
		{"invalid arguments", agent.ToolResult{IsError: true, Content: "bad", Details: map[string]any{"validation": []string{"cmd: required"}}}, nil,
			"refused: the arguments are invalid"},
		{"unknown tool", agent.ToolResult{IsError: true, Content: "Unknown tool", Details: map[string]any{"error": "unknown_tool"}}, nil, "refused: unknown tool"},
		{"unknown outcome", agent.ToolResult{IsError: true, Content: "?", Details: map[string]any{"outcome": "unknown"}}, nil,
			"outcome unknown: the run was interrupted while it ran"},
		// A call approved, then cut off while it ran: what is known first
		// is that nobody knows what it did, not that it was approved.
		{"unknown outcome of an approved call", stored(t, agent.ToolResult{IsError: true, Content: "The outcome of this call is unknown", Details: map[string]any{"outcome": "unknown"}}),
			approveQ(t, cmd, answered, hitl.ApproveAnswer{Decision: "approve"}, "kim", ""),
			"outcome unknown: the run was interrupted while it ran (approved by kim)"},
		{"unknown outcome of an interrupt approval", agent.ToolResult{IsError: true, Content: "?", Details: map[string]any{"outcome": "unknown"}},
			question(t, interrupt.KindToolInterrupt, interrupt.NewToolInterrupt("bash", "c1", cmd), answered, true, "kim", ""),
			"outcome unknown: the run was interrupted while it ran (approved by kim)"},
		{"unknown outcome of an edited call", agent.ToolResult{IsError: true, Content: "?", Details: map[string]any{"outcome": "unknown"}},
			approveQ(t, cmd, answered, hitl.ApproveAnswer{Decision: "edit", EditedArgs: edited}, "kim", ""),
			"outcome unknown: the run was interrupted while it ran (edited by kim: rm -r /tmp/x/cache ⟨U+202E⟩)"},
		{"unknown decision falls back to the question", hitlResult(true, "x", map[string]any{"decision": "something_new"}),
			approveQ(t, cmd, checkpoint.QuestionAborted, nil, "abort", "closed"), "aborted (closed)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Outcome(tt.r, tt.q)
			if got != tt.want {
				t.Errorf("Outcome =\n%s\nwant\n%s", got, tt.want)
			}
			if strings.Contains(got, "denied") && strings.Contains(got, "policy") {
				t.Errorf("a policy block must not be called denied: %q", got)
			}
		})
	}
}

func TestResolution(t *testing.T) {
	t.Parallel()
	cmd := map[string]any{"cmd": "ls"}
	answered := checkpoint.QuestionAnswered
	ti := interrupt.NewToolInterrupt("bash", "c1", cmd)
	tests := []struct {
		name string
		q    *checkpoint.Question
		want string
	}{
		{"nil", nil, ""},
		{"pending", approveQ(t, cmd, checkpoint.QuestionPending, nil, "", ""), "pending"},
		{"timed out", approveQ(t, cmd, checkpoint.QuestionTimedOut, nil, "timeout", ""), "timed out"},
		{"aborted", approveQ(t, cmd, checkpoint.QuestionAborted, nil, "abort", "user closed tab"), "aborted (user closed tab)"},
		{"aborted, no reason", approveQ(t, cmd, checkpoint.QuestionAborted, nil, "abort", ""), "aborted"},
		{"approved", approveQ(t, cmd, answered, hitl.ApproveAnswer{Decision: "approve"}, "alice", ""), "approved by alice"},
		{"denied", approveQ(t, cmd, answered, hitl.ApproveAnswer{Decision: "deny", Reason: "not >> there"}, "bob", ""), "denied by bob (not >> there)"},
		{"denied, hostile", approveQ(t, cmd, answered, hitl.ApproveAnswer{Decision: "deny", Reason: "a\nb\u202e"}, "b\x1bob", ""), "denied by b⟨U+001B⟩ob (a⟨U+000A⟩b⟨U+202E⟩)"},
		{"edited", approveQ(t, cmd, answered, hitl.ApproveAnswer{Decision: "edit", EditedArgs: map[string]any{"cmd": "ls >> out"}}, "alice", ""), "edited by alice: ls >> out"},
		{"edited, several", approveQ(t, cmd, answered, hitl.ApproveAnswer{Decision: "edit", EditedArgs: map[string]any{"cmd": "ls", "dir": "<d>"}}, "alice", ""),
			`edited by alice: {"cmd":"ls","dir":"<d>"}`},
		{"unknown decision", approveQ(t, cmd, answered, map[string]any{"decision": "maybe"}, "alice", ""), `answered by alice: {"decision":"maybe"}`},
		{"unreadable answer", approveQ(t, cmd, answered, []int{1}, "alice", ""), `answered by alice: [1]`},
		{"no name", approveQ(t, cmd, answered, hitl.ApproveAnswer{Decision: "approve"}, "", ""), "approved by the reviewer"},
		{"ask", question(t, hitl.KindAsk, hitl.Payload{Question: "which dir?"}, answered, "/tmp >> x", "alice", ""), "answered by alice: /tmp >> x"},
		{"ask, form", question(t, hitl.KindAsk, hitl.Payload{Question: "which?"}, answered, map[string]any{"dir": "<d>"}, "alice", ""), `answered by alice: {"dir":"<d>"}`},
		{"ask, multi-line", question(t, hitl.KindAsk, hitl.Payload{Question: "?"}, answered, "a\nb", "alice", ""), "answered by alice: a⟨U+000A⟩b"},
		{"confirm yes", question(t, hitl.KindConfirm, hitl.Payload{Message: "go?"}, answered, true, "alice", ""), "answered by alice: yes"},
		{"confirm no", question(t, hitl.KindConfirm, hitl.Payload{Message: "go?"}, answered, hitl.ConfirmAnswer{Yes: false}, "alice", ""), "answered by alice: no"},
		{"confirm odd", question(t, hitl.KindConfirm, hitl.Payload{Message: "go?"}, answered, "sure", "alice", ""), `answered by alice: "sure"`},
		{"interrupt true", question(t, interrupt.KindToolInterrupt, ti, answered, true, "alice", ""), "approved by alice"},
		{"interrupt false", question(t, interrupt.KindToolInterrupt, ti, answered, false, "bob", ""), "denied by bob"},
		{"interrupt approve", question(t, interrupt.KindToolInterrupt, ti, answered, interrupt.Approve(), "alice", ""), "approved by alice"},
		{"interrupt deny", question(t, interrupt.KindToolInterrupt, ti, answered, interrupt.Deny("later"), "bob", ""), "denied by bob (later)"},
		{"interrupt edit", question(t, interrupt.KindToolInterrupt, ti, answered, interrupt.Edit(map[string]any{"cmd": "ls -la"}), "alice", ""), "edited by alice: ls -la"},
		{"interrupt anything else denies", question(t, interrupt.KindToolInterrupt, ti, answered, "yes", "bob", ""), "denied by bob"},
		{"other status", &checkpoint.Question{Status: "exploded"}, "exploded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Resolution(tt.q); got != tt.want {
				t.Errorf("Resolution =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestSummary(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		q    *checkpoint.Question
		want string
	}{
		{"nil", nil, ""},
		{"approve, cmd as text", approveQ(t, map[string]any{"cmd": "rm -r /tmp/x >> log"}, checkpoint.QuestionPending, nil, "", ""), "bash: rm -r /tmp/x >> log"},
		{"approve, hostile", approveQ(t, map[string]any{"cmd": hostile + "\nrm -rf ~"}, checkpoint.QuestionPending, nil, "", ""),
			`bash: echo "<script>" >> /etc/passwd # ⟨U+202E⟩evil⟨U+202C⟩ ⟨U+200B⟩ ⟨U+001B⟩[31m⟨U+000A⟩rm -rf ~`},
		{"approve, several arguments", approveQ(t, map[string]any{"cmd": "ls", "dir": "<d>"}, checkpoint.QuestionPending, nil, "", ""), `bash: {"cmd":"ls","dir":"<d>"}`},
		{"approve, one other argument", approveQ(t, map[string]any{"path": "/etc"}, checkpoint.QuestionPending, nil, "", ""), `bash: {"path":"/etc"}`},
		{"approve, numbers exact", approveQ(t, map[string]any{"amount": json.Number("1000.10")}, checkpoint.QuestionPending, nil, "", ""), `bash: {"amount":1000.10}`},
		{"approve, no arguments", approveQ(t, nil, checkpoint.QuestionPending, nil, "", ""), "bash: {}"},
		{"ask", question(t, hitl.KindAsk, hitl.Payload{Kind: "ask", Question: "Which <dir>?\n(really)"}, checkpoint.QuestionPending, nil, "", ""), "Which <dir>?⟨U+000A⟩(really)"},
		{"confirm", question(t, hitl.KindConfirm, hitl.Payload{Kind: "confirm", Message: "Delete \u202e3 files?"}, checkpoint.QuestionPending, nil, "", ""), "Delete ⟨U+202E⟩3 files?"},
		{"tool_interrupt", question(t, interrupt.KindToolInterrupt, interrupt.NewToolInterrupt("bash", "c1", map[string]any{"cmd": "ls > f"}), checkpoint.QuestionPending, nil, "", ""), "bash: ls > f"},
		{"unreadable payload", &checkpoint.Question{Kind: hitl.KindApprove, Payload: json.RawMessage(`[1]`)}, "approve: [1]"},
		{"other kind", &checkpoint.Question{Kind: "survey\n", Payload: json.RawMessage(`{"q":"\u003c"}`)}, `survey⟨U+000A⟩: {"q":"<"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Summary(tt.q)
			if got != tt.want {
				t.Errorf("Summary =\n%s\nwant\n%s", got, tt.want)
			}
			if strings.ContainsAny(got, "\n\r\t") {
				t.Errorf("Summary is not one line: %q", got)
			}
		})
	}
}
