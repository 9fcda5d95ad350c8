package agent

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/internal/jsontext"
)

// messageCases are messages of every shape: marshalMessage must give each
// what jsontext.Marshal gives (the same bytes, or an error both times).
func messageCases() []Message {
	at := time.Date(2026, 12, 7, 20, 30, 1, 123456789, time.UTC)
	zoned := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 5*3600+30*60))
	odd := "tab\t nl\n quote\" back\\ <html> & é ✓ \u2028 \u2029 \x01 bad \xff\xfe end"
	return []Message{
		{},
		UserMessage("hello"),
		UserMessage(odd),
		{Role: RoleAssistant, Text: "t", StopReason: StopToolUse, Usage: &Usage{InputTokens: 12, OutputTokens: -3},
			ToolCalls: []ToolCall{{ID: "c1", Name: "bash", Arguments: json.RawMessage(`{"cmd":"ls -l \"a b\"","n":1.50,"x":[1,{"y":null}]}`)},
				{ID: odd, Name: odd, Arguments: nil}}, RunID: "r1", CreatedAt: at},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c", Name: "n", Arguments: json.RawMessage(`{"a": 1}`)}}},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c", Name: "n", Arguments: json.RawMessage(`{"a":"<b> & \u2028"}`)}}},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c", Name: "n", Arguments: json.RawMessage(`{"a":`)}}},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c", Name: "n", Arguments: json.RawMessage{}}}},
		{Role: RoleAssistant, ToolCalls: []ToolCall{}},
		{Role: RoleAssistant, ProviderData: json.RawMessage(`[{"type":"thinking","signature":"abc"}]`), CreatedAt: zoned},
		{Role: RoleAssistant, ProviderData: json.RawMessage("\n[1, 2]\n")},
		{Role: RoleAssistant, CreatedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		{Role: RoleAssistant, CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("far", 24*3600))},
		{Role: RoleAssistant, CreatedAt: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)},
		{Role: RoleAssistant, CreatedAt: time.Now()},
		ToolResultMessage(ToolResult{CallID: "c1", ToolName: "bash", Content: odd, IsError: true}),
		ToolResultMessage(ToolResult{CallID: "c1", ToolName: "bash", Content: "", StartedAt: at, EndedAt: zoned,
			Details: map[string]any{"hitl": map[string]any{"decision": "approve", "by": odd, "n": 3, "f": 0.000001, "big": 1e21,
				"l": []any{true, nil, "x", int64(7)}, "s": []string{"a", "<b>"}, "m": map[string]string{"z": "1", "a": "2"}}}}),
		ToolResultMessage(ToolResult{CallID: "c", Details: map[string]any{}}),
		ToolResultMessage(ToolResult{CallID: "c", Details: map[string]any{"raw": json.RawMessage(`{"a":1}`)}}),
		ToolResultMessage(ToolResult{CallID: "c", Details: map[string]any{"t": at, "u": uint8(3)}}),
		{Role: RoleTool, Result: &ToolResult{}, RunID: odd},
	}
}

func TestMessageJSONMatchesMarshal(t *testing.T) {
	t.Parallel()
	for i, m := range messageCases() {
		checkMessageJSON(t, i, m)
	}
}

// FuzzMessageJSON: texts, ids and arguments of any bytes encode as
// jsontext.Marshal encodes them.
func FuzzMessageJSON(f *testing.F) {
	f.Add("hello", "c1", []byte(`{"cmd":"ls"}`), "ok", int64(1))
	f.Add("<\u2028\xff\"\\\n", "", []byte(" {\"a\" : [1, 2] } "), "", int64(-1))
	f.Add("", "x", []byte(`"\u00e9\ud800"`), "é", int64(1e18))
	f.Fuzz(func(t *testing.T, text, id string, args []byte, content string, n int64) {
		at := time.Unix(0, n).UTC()
		checkMessageJSON(t, 0, Message{Role: RoleAssistant, Text: text, ToolCalls: []ToolCall{{ID: id, Name: text, Arguments: args}},
			ProviderData: args, RunID: id, CreatedAt: at, Usage: &Usage{InputTokens: n}})
		checkMessageJSON(t, 1, ToolResultMessage(ToolResult{CallID: id, ToolName: text, Content: content, IsError: n%2 == 0,
			Details: map[string]any{text: content, id: float64(n)}, StartedAt: at, EndedAt: at}))
	})
}

func checkMessageJSON(t *testing.T, i int, m Message) {
	t.Helper()
	got, gerr := marshalMessage(&m)
	want, werr := jsontext.Marshal(m)
	if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() || !bytes.Equal(got, want) {
		t.Errorf("%d: marshalMessage = %s, %v\n  jsontext.Marshal = %s, %v", i, got, gerr, want, werr)
	}
	if m.Result != nil {
		got, gerr := marshalResult(m.Result)
		want, werr := jsontext.Marshal(m.Result)
		if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() || !bytes.Equal(got, want) {
			t.Errorf("%d: marshalResult = %s, %v\n  jsontext.Marshal = %s, %v", i, got, gerr, want, werr)
		}
	}
}

// The plain path is the one taken by the usual messages (else the test
// above would prove nothing of it).
func TestMessageJSONPlainPathTaken(t *testing.T) {
	t.Parallel()
	for i, m := range messageCases()[:4] {
		if _, ok := appendMessage(nil, &m); !ok {
			t.Errorf("%d: %+v went to encoding/json", i, m)
		}
	}
}
