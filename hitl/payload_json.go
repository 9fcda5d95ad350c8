package hitl

import (
	"encoding/json"

	"github.com/tollgate-ai/tollgate/internal/jsontext"
)

// encodedPayload is p as the question stores it — what jsontext.Marshal(p)
// gives, encoded here without reflection (TestPayloadJSONMatchesMarshal) —
// or p itself where that cannot be said of it (an argument or detail of a
// type the appenders do not know, a schema with white space to take
// out): the agent then encodes it.
func encodedPayload(p Payload) any {
	return encodedPayloadArgs(p, nil, nil)
}

// encodedPayloadArgs is encodedPayload of p with its Args given as their
// text (argsText, from canonicalArgsText of raw; nil: p.Args as they
// are). p itself, its Args decoded from raw, where p cannot be encoded
// here.
func encodedPayloadArgs(p Payload, argsText, raw []byte) any {
	n := 256 + len(p.ArgsSchema) + len(p.Schema) + len(p.Question) + len(p.Message) + len(argsText)
	if len(p.Args) > 0 {
		n += 1024
	}
	if b, ok := appendPayload(make([]byte, 0, n), &p, argsText); ok {
		return json.RawMessage(b)
	}
	if argsText != nil {
		p.Args, _ = decodeArgs(raw)
	}
	return p
}

// appendPayload appends p as encoding/json would (without HTML escaping),
// the fields in their order, the empty ones left out; argsText, when not
// nil, is the text of its Args.
func appendPayload(b []byte, p *Payload, argsText []byte) ([]byte, bool) {
	ok := true
	b = jsontext.AppendString(append(b, `{"kind":`...), p.Kind)
	if p.ToolName != "" {
		b = jsontext.AppendString(append(b, `,"tool_name":`...), p.ToolName)
	}
	switch {
	case argsText != nil:
		b = append(append(b, `,"args":`...), argsText...)
	case len(p.Args) > 0:
		if b, ok = jsontext.AppendValue(append(b, `,"args":`...), p.Args); !ok {
			return b, false
		}
	}
	if len(p.Details) > 0 {
		if b, ok = jsontext.AppendValue(append(b, `,"details":`...), p.Details); !ok {
			return b, false
		}
	}
	if len(p.ArgsSchema) > 0 {
		if b, ok = jsontext.AppendRaw(append(b, `,"args_schema":`...), p.ArgsSchema); !ok {
			return b, false
		}
	}
	if p.Question != "" {
		b = jsontext.AppendString(append(b, `,"question":`...), p.Question)
	}
	if len(p.Choices) > 0 {
		b, _ = jsontext.AppendValue(append(b, `,"choices":`...), p.Choices)
	}
	if len(p.Schema) > 0 {
		if b, ok = jsontext.AppendRaw(append(b, `,"schema":`...), p.Schema); !ok {
			return b, false
		}
	}
	if p.Message != "" {
		b = jsontext.AppendString(append(b, `,"message":`...), p.Message)
	}
	return append(b, '}'), true
}
