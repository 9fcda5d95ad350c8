package hitl

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/tollgate-ai/tollgate/internal/jsontext"
)

// A question's payload is stored as jsontext.Marshal would write it,
// whichever way it is encoded.
func TestPayloadJSONMatchesMarshal(t *testing.T) {
	t.Parallel()
	odd := "<b> & \"q\" \\ \u2028 \xff é\n"
	args, err := decodeArgs(json.RawMessage(`{"cmd":"ls -l <dir> && rm","n":1.50,"e":1e400,"l":[1,"x",null,true,{"z":"é"}],"o":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	schema := json.RawMessage(`{"type":"object","properties":{"cmd":{"type":"string"}},"required":["cmd"]}`)
	cases := []Payload{
		{},
		{Kind: KindApprove, ToolName: "bash", Args: args, Details: map[string]any{"rule": odd, "impact": "high", "dir": "/tmp", "annotations": map[string]any{"readOnlyHint": true}}, ArgsSchema: schema},
		{Kind: KindApprove, ToolName: odd, Args: map[string]any{odd: odd}},
		{Kind: KindApprove, Args: map[string]any{}, Details: map[string]any{}, ArgsSchema: json.RawMessage{}},
		{Kind: KindApprove, ArgsSchema: json.RawMessage("{\n  \"type\": \"object\"\n}")},
		{Kind: KindApprove, Args: map[string]any{"x": struct{ A int }{1}}},
		{Kind: KindApprove, Details: map[string]any{"n": json.Number("bad")}},
		{Kind: KindAsk, Question: odd, Choices: []string{"a", odd}, Schema: schema},
		{Kind: KindAsk, Choices: []string{}},
		{Kind: KindConfirm, Message: odd, Raw: json.RawMessage(`{"x":1}`)},
	}
	for i, p := range cases {
		want, werr := jsontext.Marshal(p)
		enc := encodedPayload(p)
		got, gerr := jsontext.Marshal(enc)
		if (gerr == nil) != (werr == nil) || !bytes.Equal(got, want) {
			t.Errorf("%d: encoded %s, %v; jsontext.Marshal %s, %v", i, got, gerr, want, werr)
		}
		if _, raw := enc.(json.RawMessage); !raw && i < 4 {
			t.Errorf("%d: %+v was not encoded here", i, p)
		}
	}
}
