package agent

import (
	"encoding/json"
	"time"
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
