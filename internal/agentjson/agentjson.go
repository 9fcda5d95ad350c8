// Package agentjson hands tollgate's own packages package agent's
// encoders of its messages and tool results (without reflection, byte for
// byte what jsontext.Marshal writes of them through encoding/json)
// without making them part of agent's API. Package agent sets them when
// it is initialised, before any code that holds one of its messages runs.
package agentjson

import "github.com/tollgate-ai/tollgate/internal/jsontext"

// encoder is package agent's: ok false for a value it does not encode.
var encoder func(v any) (b []byte, ok bool, err error)

// Handle sets what Marshal asks first: package agent's encoders. Called
// from agent's init only.
func Handle(f func(v any) ([]byte, bool, error)) { encoder = f }

// Marshal is jsontext.Marshal(v): for an *agent.Message or an
// *agent.ToolResult, by agent's encoders.
func Marshal(v any) ([]byte, error) {
	if encoder != nil {
		if b, ok, err := encoder(v); ok {
			return b, err
		}
	}
	return jsontext.Marshal(v)
}
