package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// Role says who wrote a message.
type Role string

const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	// RoleTool marks a tool result message.
	RoleTool Role = "tool"
)

// StopReason says why the model stopped, or why the run ended the turn.
type StopReason string

const (
	StopEndTurn   StopReason = "end_turn"
	StopToolUse   StopReason = "tool_use"
	StopMaxTokens StopReason = "max_tokens"
	// StopRefusal: the model declined to answer.
	StopRefusal StopReason = "refusal"
	// StopContentFilter: the provider filtered the reply.
	StopContentFilter StopReason = "content_filter"
	// StopAborted marks the terminal message AbortPending writes.
	StopAborted StopReason = "aborted"
	// StopError marks a run ended by the runtime (for example the
	// max-turns guard), not by the model.
	StopError StopReason = "error"
)

// Message is one entry of a thread. Which fields are set depends on Role:
// a user message has Text; an assistant message has Text, ToolCalls,
// StopReason and Usage; a tool message has Result.
type Message struct {
	Role       Role        `json:"role"`
	Text       string      `json:"text,omitempty"`
	ToolCalls  []ToolCall  `json:"tool_calls,omitempty"`
	StopReason StopReason  `json:"stop_reason,omitempty"`
	Usage      *Usage      `json:"usage,omitempty"`
	Result     *ToolResult `json:"result,omitempty"`
	// ProviderData is opaque data a provider needs back on later calls
	// (for example Anthropic's signed thinking blocks, which must be
	// returned unchanged with the turn's tool results). It is persisted
	// with the message, so a run resumed in another process still has it.
	ProviderData json.RawMessage `json:"provider_data,omitempty"`
	// RunID is the run that added the message.
	RunID     string    `json:"run_id,omitempty"`
	CreatedAt time.Time `json:"created_at,omitzero"`
}

// ToolCall is a model's request to run a tool. ID is the model's call id
// (stable across a restart, since the assistant message is persisted before
// any tool runs).
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ToolResult is what the model sees for one tool call.
type ToolResult struct {
	CallID   string `json:"call_id"`
	ToolName string `json:"tool_name"`
	// Content is the text the model reads: the tool's output, or the
	// reason it did not run.
	Content string `json:"content"`
	IsError bool   `json:"is_error,omitempty"`
	// Details carries structured data for hosts and audit, for example
	// Details["hitl"] with the approval trace.
	Details map[string]any `json:"details,omitempty"`
	// StartedAt is when the tool began to run (zero for a call that did
	// not run: blocked, denied, invalid); EndedAt when the result was
	// known. The agent sets them; models are not shown them.
	StartedAt time.Time `json:"started_at,omitzero"`
	EndedAt   time.Time `json:"ended_at,omitzero"`
}

// Usage counts tokens of one model call.
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

// UserMessage returns a user message with text.
func UserMessage(text string) Message { return Message{Role: RoleUser, Text: text} }

// ToolResultMessage wraps r in a tool message.
func ToolResultMessage(r ToolResult) Message { return Message{Role: RoleTool, Result: &r} }

// openCalls returns the tool calls of a thread's turn in progress: those
// of its last assistant message that no tool message answers yet (the
// agent appends a turn's results when the turn ends, while each call's
// result is recorded as it completes: [checkpoint.Store.ListToolCalls]
// with these ids reads them). messages is the thread's encoded messages
// ([checkpoint.Thread.Messages]); none when the last assistant message
// has all its results or calls no tool.
func openCalls(messages json.RawMessage) ([]ToolCall, error) {
	if len(messages) == 0 {
		return nil, nil
	}
	// Only what is needed of each message: a thread's conversation can be
	// long, and its texts and results are not.
	var msgs []struct {
		Role      Role       `json:"role"`
		ToolCalls []ToolCall `json:"tool_calls"`
		Result    *struct {
			CallID string `json:"call_id"`
		} `json:"result"`
	}
	if err := json.Unmarshal(messages, &msgs); err != nil {
		return nil, fmt.Errorf("agent: reading the thread's messages: %w", err)
	}
	last := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == RoleAssistant {
			last = i
			break
		}
	}
	if last < 0 {
		return nil, nil
	}
	answered := map[string]bool{}
	for _, m := range msgs[last+1:] {
		if m.Result != nil {
			answered[m.Result.CallID] = true
		}
	}
	var open []ToolCall
	for _, c := range msgs[last].ToolCalls {
		if !answered[c.ID] {
			open = append(open, c)
		}
	}
	return open, nil
}

// CallProgress is where one call of a thread's turn in progress is.
type CallProgress struct {
	Call ToolCall
	// State is "waiting" (being decided, or waiting for an answer),
	// "running" (the tool runs, since StartedAt) or "done" (Result is
	// its result, with its own start and end times).
	State     string
	StartedAt time.Time
	Result    *ToolResult
}

// The states of a [CallProgress].
const (
	CallWaiting = "waiting"
	CallRunning = "running"
	CallDone    = "done"
)

// TurnProgress returns the calls of a thread's turn in progress (those
// of its last assistant message that no tool message answers yet) and
// where each is, read from the tool call records the
// agent writes as each call starts and ends: a result shows as soon as
// its call completes, not when the whole turn does. None unless a run is
// in progress.
func TurnProgress(ctx context.Context, store checkpoint.Store, th *checkpoint.Thread) ([]CallProgress, error) {
	if th.Status != checkpoint.ThreadRunning {
		return nil, nil
	}
	open, err := openCalls(th.Messages)
	if err != nil || len(open) == 0 {
		return nil, err
	}
	ids := make([]string, len(open))
	for i, c := range open {
		ids[i] = c.ID
	}
	recs, err := store.ListToolCalls(ctx, th.ID, th.RunID, ids...)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]*checkpoint.ToolCall, len(recs))
	for _, r := range recs {
		byID[r.CallID] = r
	}
	out := make([]CallProgress, len(open))
	for i, c := range open {
		out[i] = CallProgress{Call: c, State: CallWaiting}
		switch r := byID[c.ID]; {
		case r == nil:
		case r.State == checkpoint.ToolCallExecuting:
			out[i].State, out[i].StartedAt = CallRunning, r.UpdatedAt
		case r.State == checkpoint.ToolCallDone:
			var res ToolResult
			if err := json.Unmarshal(r.Result, &res); err != nil {
				return nil, fmt.Errorf("agent: the recorded result of call %s is not readable: %w", c.ID, err)
			}
			out[i].State, out[i].StartedAt, out[i].Result = CallDone, res.StartedAt, &res
		}
	}
	return out, nil
}
