package agent

import (
	"context"
	"encoding/json"
)

// Model names the model a provider runs and how.
type Model struct {
	// ID is the provider's model id, such as "claude-sonnet-4-6".
	ID string
	// Provider names the provider, for logs ("anthropic", "openai", ...).
	Provider string
	// MaxTokens caps the reply; zero lets the provider choose.
	MaxTokens int
	// Temperature, when set, is passed to the model.
	Temperature *float64
}

// ToolSpec is what a model is told about a tool.
type ToolSpec struct {
	Name        string
	Description string
	// InputSchema is the JSON Schema of the arguments object.
	InputSchema json.RawMessage
}

// Request is one model call: the whole conversation so far.
type Request struct {
	Model    Model
	System   string
	Messages []Message
	Tools    []ToolSpec
}

// Provider calls a model. Implementations: provider/scripted (offline),
// provider/anthropic, provider/openai.
type Provider interface {
	// Complete sends req and returns the assistant message (Role
	// assistant, with Text, ToolCalls, StopReason and Usage). When the
	// provider streams, it calls onText with each piece of text as it
	// arrives; onText may be nil. A cancelled ctx stops the call.
	//
	// A tool call whose arguments are not a JSON object is returned as is
	// (the runtime turns it into an error result the model can correct).
	//
	// req is read, not changed: without a [BeforeModelHook] its Messages
	// are the run's own (not copied per turn: the copy would cost what
	// the thread holds). A provider that keeps req must not rely on more.
	Complete(ctx context.Context, req *Request, onText func(delta string)) (*Message, error)
}
