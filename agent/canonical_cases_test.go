package agent

import (
	"encoding/json"
	"github.com/tollgate-ai/tollgate/internal/agentlink"
	"github.com/tollgate-ai/tollgate/internal/jsontext"
	"strings"
	"testing"
)

func TestCanonicalArgsAsBeforeUnicodeAndNumbers(t *testing.T) {
	cases := []string{
		"{\"s\":\"\xef\xbf\xbd\"}", "{\"\xef\xbf\xbd\":1}", "{\"s\":\"\x7f\"}", "{\"\x7f\":1}",
		"{\"s\":\"\xef\xbb\xbf\"}", "{\"s\":\"\xef\xbf\xbe\"}", "{\"s\":\"\xf4\x8f\xbf\xbf\"}",
		"{\"s\":\"\xc2\x80\xc2\x85\"}", "{\"s\":\"\\u0000\\u001f\\u000b\\u0010\"}", "{\"s\":\"'\"}",
		`{"n":-0.0e-0}`, `{"n":0E+00}`, `{"n":1e-400}`, `{"n":-1234567890123456789012345678901234567890.5e999999999}`,
		`{"a":[[[]],{},[{}],""]}`, `{"a":"","b":"\\","c":"\""}`, `{"":{"":{"":[]}}}`,
		"{\"a\":1,\"a\\u0000\":2}", "{\"a\":1,\"\xc3\xa9\":2,\"\xf0\x9f\x98\x80\":3,\"\xef\xbd\x81\":4}",
		"{\"\xf0\x9f\x98\x80\":3,\"\xef\xbd\x81\":4}",
		"{\"s\":\"" + strings.Repeat("\\u2028", 3) + "\"}",
	}
	for _, c := range cases {
		checkCanonicalArgsAsBefore(t, []byte(c))
	}
}

func TestAgentLinkMarshalsGatewayResults(t *testing.T) {
	for i, raw := range []string{`{"content":[{"type":"text","text":"<b>\u2028&"}]}`, `{ "a" : [ 1 , 2 ] }`, "{\"s\":\"\xff\"}", `{"s":"\u003c"}`, `[]`, `null`, `1e400`} {
		r := ToolResult{CallID: "call_1", ToolName: "mcp__s__t", IsError: i%2 == 0, Content: "x<y>&\u2028\xff",
			Details: map[string]any{"mcp_result": json.RawMessage(raw), "hitl": map[string]any{"decision": "aborted"}, "outcome": "unknown"}}
		got, gerr := agentlink.Marshal(&r)
		want, werr := jsontext.Marshal(r)
		if string(got) != string(want) || (gerr == nil) != (werr == nil) {
			t.Errorf("%d: %s %v\n want %s %v", i, got, gerr, want, werr)
		}
	}
}
