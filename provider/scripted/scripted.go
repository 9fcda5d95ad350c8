// Package scripted provides deterministic models: [Model] plays a script of
// turns (for tests and examples) and [Demo] is the offline demo model that
// turns "$ command" lines into bash tool calls. Neither needs a network.
package scripted

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/internal/jsontext"
)

// Turn is one scripted model reply.
type Turn struct {
	// Text is the assistant text; it is streamed word by word.
	Text string
	// ToolCalls the model makes in this turn.
	ToolCalls []agent.ToolCall
	// StopReason defaults to tool_use when there are calls, else end_turn.
	StopReason agent.StopReason
	// Usage is reported on the message.
	Usage *agent.Usage
	// Check, when set, inspects the request the model receives for this
	// turn; an error fails the model call.
	Check func(req *agent.Request) error
	// Err, when set, is returned instead of a reply (a failing model).
	Err error
}

// ErrScriptExhausted: the model was called more times than it has turns.
var ErrScriptExhausted = errors.New("scripted: no turns left in the script")

// Model plays its turns in order, one per call. Safe for concurrent use.
type Model struct {
	mu       sync.Mutex
	turns    []Turn
	next     int
	requests []*agent.Request
}

// New returns a model that plays turns in order.
func New(turns ...Turn) *Model { return &Model{turns: turns} }

// Call builds a tool call; args is encoded as JSON (a string or
// json.RawMessage is used as is).
func Call(id, name string, args any) agent.ToolCall {
	var raw json.RawMessage
	switch v := args.(type) {
	case string:
		raw = json.RawMessage(v)
	case json.RawMessage:
		raw = v
	default:
		b, err := jsontext.Marshal(args)
		if err != nil {
			panic(fmt.Sprintf("scripted.Call: %v", err))
		}
		raw = b
	}
	return agent.ToolCall{ID: id, Name: name, Arguments: raw}
}

// Complete implements agent.Provider.
func (m *Model) Complete(ctx context.Context, req *agent.Request, onText func(string)) (*agent.Message, error) {
	m.mu.Lock()
	m.requests = append(m.requests, req)
	if m.next >= len(m.turns) {
		m.mu.Unlock()
		return nil, fmt.Errorf("%w (%d turns played)", ErrScriptExhausted, m.next)
	}
	t := m.turns[m.next]
	m.next++
	m.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if t.Check != nil {
		if err := t.Check(req); err != nil {
			return nil, fmt.Errorf("scripted: turn %d: request check failed: %w", m.Played(), err)
		}
	}
	if t.Err != nil {
		return nil, t.Err
	}
	return reply(t.Text, t.ToolCalls, t.StopReason, t.Usage, onText), nil
}

func reply(text string, calls []agent.ToolCall, stop agent.StopReason, usage *agent.Usage, onText func(string)) *agent.Message {
	if onText != nil && text != "" {
		words := strings.SplitAfter(text, " ")
		for _, w := range words {
			onText(w)
		}
	}
	if stop == "" {
		stop = agent.StopEndTurn
		if len(calls) > 0 {
			stop = agent.StopToolUse
		}
	}
	return &agent.Message{Role: agent.RoleAssistant, Text: text, ToolCalls: append([]agent.ToolCall(nil), calls...), StopReason: stop, Usage: usage}
}

// Played is the number of turns played so far.
func (m *Model) Played() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.next
}

// Requests returns the requests the model received, in order.
func (m *Model) Requests() []*agent.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*agent.Request(nil), m.requests...)
}
