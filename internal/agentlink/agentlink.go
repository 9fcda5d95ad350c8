// Package agentlink hands tollgate's own packages some of package agent's
// unexported machinery without making it part of agent's API (issue 27
// keeps that from growing): the MCP gateway writes an allowed call's
// thread itself, and needs what a run uses to check the call's arguments
// and to encode its messages. Package agent sets each function when it is
// initialised, before any code that holds one of its tools or messages
// runs.
package agentlink

import (
	"encoding/json"

	"github.com/tollgate-ai/tollgate/internal/jsontext"
)

var (
	// encoder: ok false for a value it does not encode.
	encoder func(v any) (b []byte, ok bool, err error)
	// validator: tool is an *agent.Tool.
	validator func(tool any, raw json.RawMessage) (typed any, canonical json.RawMessage, err error)
)

// Handle sets package agent's functions. Called from agent's init only.
func Handle(encode func(v any) ([]byte, bool, error), validate func(tool any, raw json.RawMessage) (any, json.RawMessage, error)) {
	encoder, validator = encode, validate
}

// Marshal is jsontext.Marshal(v): for an *agent.Message or an
// *agent.ToolResult, by agent's encoders (without reflection, byte for
// byte what jsontext.Marshal writes of them through encoding/json).
func Marshal(v any) ([]byte, error) {
	if encoder != nil {
		if b, ok, err := encoder(v); ok {
			return b, err
		}
	}
	return jsontext.Marshal(v)
}

// Validate is tool.Validate(raw) (tool an *agent.Tool) and, when the
// arguments are valid, agent.CanonicalArgs(raw), from one decode of them.
func Validate(tool any, raw json.RawMessage) (typed any, canonical json.RawMessage, err error) {
	if validator == nil {
		// Only a program that never links package agent gets here, and
		// it cannot hold an *agent.Tool: say so rather than a nil call.
		panic("agentlink: package agent is not linked in, so it has not set Validate")
	}
	return validator(tool, raw)
}
