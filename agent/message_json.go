package agent

import (
	"github.com/tollgate-ai/tollgate/internal/agentlink"
	"github.com/tollgate-ai/tollgate/internal/jsontext"
)

// Messages and tool results are encoded on every write of a run (the
// thread's appends, a call's recorded result): here without reflection,
// byte for byte as jsontext.Marshal encodes them through encoding/json
// (TestMessageJSONMatchesMarshal). A value this cannot say the same of —
// arguments or provider data with white space to take out or not valid,
// details of a type it does not know, a time MarshalJSON refuses — goes
// to jsontext.Marshal whole, which also reports what is wrong.

// Packages of tollgate that write a thread themselves (the MCP gateway's
// allowed calls) encode its messages and results here too, and check a
// call's arguments as a run does, through internal/agentlink.
func init() { agentlink.Handle(marshalOwn, validateCanonical) }

// marshalOwn encodes a *Message or a *ToolResult (ok false for any other
// value).
func marshalOwn(v any) (b []byte, ok bool, err error) {
	switch v := v.(type) {
	case *Message:
		b, err = marshalMessage(v)
	case *ToolResult:
		b, err = marshalResult(v)
	default:
		return nil, false, nil
	}
	return b, true, err
}

// marshalMessage is jsontext.Marshal(m).
func marshalMessage(m *Message) ([]byte, error) {
	if b, ok := appendMessage(make([]byte, 0, messageSize(m)), m); ok {
		return b, nil
	}
	return jsontext.Marshal(*m) // a copy: m itself stays off the heap
}

// marshalResult is jsontext.Marshal(r).
func marshalResult(r *ToolResult) ([]byte, error) {
	if b, ok := appendResult(make([]byte, 0, resultSize(r)), r); ok {
		return b, nil
	}
	return jsontext.Marshal(*r)
}

// messageSize and resultSize guess the encoded size, so that the buffer
// is made once: the names, times and a few escapes.
func messageSize(m *Message) int {
	n := 160 + len(m.Text) + len(m.ProviderData) + len(m.RunID)
	for _, c := range m.ToolCalls {
		n += 32 + len(c.ID) + len(c.Name) + len(c.Arguments)
	}
	if m.Result != nil {
		n += resultSize(m.Result)
	}
	return n
}

func resultSize(r *ToolResult) int {
	n := 160 + len(r.CallID) + len(r.ToolName) + len(r.Content)
	if len(r.Details) > 0 {
		n += 256
	}
	return n
}

func appendMessage(b []byte, m *Message) ([]byte, bool) {
	ok := true
	b = append(b, `{"role":`...)
	b = jsontext.AppendString(b, string(m.Role))
	if m.Text != "" {
		b = jsontext.AppendString(append(b, `,"text":`...), m.Text)
	}
	if len(m.ToolCalls) > 0 {
		b = append(b, `,"tool_calls":[`...)
		for i := range m.ToolCalls {
			c := &m.ToolCalls[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = jsontext.AppendString(append(b, `{"id":`...), c.ID)
			b = jsontext.AppendString(append(b, `,"name":`...), c.Name)
			if b, ok = jsontext.AppendRaw(append(b, `,"arguments":`...), c.Arguments); !ok {
				return b, false
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if m.StopReason != "" {
		b = jsontext.AppendString(append(b, `,"stop_reason":`...), string(m.StopReason))
	}
	if u := m.Usage; u != nil {
		b = append(b, `,"usage":{"input_tokens":`...)
		b, _ = jsontext.AppendValue(b, u.InputTokens)
		b = append(b, `,"output_tokens":`...)
		b, _ = jsontext.AppendValue(b, u.OutputTokens)
		b = append(b, '}')
	}
	if m.Result != nil {
		if b, ok = appendResult(append(b, `,"result":`...), m.Result); !ok {
			return b, false
		}
	}
	if len(m.ProviderData) > 0 {
		if b, ok = jsontext.AppendRaw(append(b, `,"provider_data":`...), m.ProviderData); !ok {
			return b, false
		}
	}
	if m.RunID != "" {
		b = jsontext.AppendString(append(b, `,"run_id":`...), m.RunID)
	}
	if !m.CreatedAt.IsZero() {
		if b, ok = jsontext.AppendTime(append(b, `,"created_at":`...), m.CreatedAt); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}

func appendResult(b []byte, r *ToolResult) ([]byte, bool) {
	ok := true
	b = jsontext.AppendString(append(b, `{"call_id":`...), r.CallID)
	b = jsontext.AppendString(append(b, `,"tool_name":`...), r.ToolName)
	b = jsontext.AppendString(append(b, `,"content":`...), r.Content)
	if r.IsError {
		b = append(b, `,"is_error":true`...)
	}
	if len(r.Details) > 0 {
		if b, ok = jsontext.AppendValue(append(b, `,"details":`...), r.Details); !ok {
			return b, false
		}
	}
	if !r.StartedAt.IsZero() {
		if b, ok = jsontext.AppendTime(append(b, `,"started_at":`...), r.StartedAt); !ok {
			return b, false
		}
	}
	if !r.EndedAt.IsZero() {
		if b, ok = jsontext.AppendTime(append(b, `,"ended_at":`...), r.EndedAt); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}
