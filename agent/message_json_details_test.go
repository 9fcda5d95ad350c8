package agent

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// Details of any decoded JSON (json.Number, nested lists and maps), a raw
// value of any bytes among them, and times in any zone and year: the hand
// encoder gives what encoding/json gives.
func FuzzMessageJSONDecodedDetails(f *testing.F) {
	f.Add([]byte(`{"a":[1,"<b>",{"c":-0,"d":1e400}],"b":null}`), int64(0), int32(0))
	f.Add([]byte(" [1, 2] "), int64(-62135596800000000), int32(86400))
	f.Add([]byte(`"\u2028"`), int64(253402300800000000), int32(-3601))
	f.Fuzz(func(t *testing.T, raw []byte, n int64, off int32) {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var v any
		_ = dec.Decode(&v)
		at := time.Unix(n/1e9, n%1e9).In(time.FixedZone("z", int(off)))
		details := map[string]any{"v": v, "raw": json.RawMessage(raw), "l": []any{v, json.Number(string(raw))}}
		checkMessageJSON(t, 0, ToolResultMessage(ToolResult{CallID: "c", ToolName: "t", Details: details, StartedAt: at}))
		checkMessageJSON(t, 1, ToolResultMessage(ToolResult{CallID: "c", ToolName: "t", Details: map[string]any{"v": v}, EndedAt: at}))
		checkMessageJSON(t, 2, Message{Role: RoleAssistant, ProviderData: raw, CreatedAt: at,
			ToolCalls: []ToolCall{{ID: "c", Name: "n", Arguments: raw}}})
	})
}
