package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/tollgate-ai/tollgate/internal/agentlink"
	"github.com/tollgate-ai/tollgate/internal/jsontext"
)

// internal/agentlink, which the MCP gateway encodes its threads' messages
// and results with, gives what jsontext.Marshal gives, for messages,
// results and any other value.
func TestAgentLinkMarshalsAsJSONText(t *testing.T) {
	t.Parallel()
	check := func(i int, v, direct any) {
		t.Helper()
		got, gerr := agentlink.Marshal(v)
		want, werr := jsontext.Marshal(direct)
		if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() || !bytes.Equal(got, want) {
			t.Errorf("%d: agentlink.Marshal = %s, %v\n  jsontext.Marshal = %s, %v", i, got, gerr, want, werr)
		}
	}
	for i, m := range messageCases() {
		check(i, &m, m)
		if m.Result != nil {
			check(i, m.Result, *m.Result)
		}
	}
	check(-1, map[string]any{"a": 1}, map[string]any{"a": 1})
	check(-2, []string{"<"}, []string{"<"})
}

// internal/agentlink's Validate gives what Tool.Validate and CanonicalArgs
// give, for a raw tool (the gateway's) and a typed one.
func TestAgentLinkValidateAsValidateAndCanonicalArgs(t *testing.T) {
	t.Parallel()
	for _, c := range canonicalArgsCases {
		checkLinkValidate(t, json.RawMessage(c))
	}
}

func FuzzAgentLinkValidate(f *testing.F) {
	for _, c := range canonicalArgsCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkLinkValidate(t, raw)
	})
}

func checkLinkValidate(t *testing.T, raw json.RawMessage) {
	t.Helper()
	type in struct {
		S string  `json:"s,omitempty"`
		N float64 `json:"n,omitempty"`
	}
	for _, tool := range []*Tool{
		NewRawTool("raw", "", func(context.Context, map[string]any) (ToolResult, error) { return ToolResult{}, nil }, nil),
		NewTool("typed", "", func(context.Context, in) (string, error) { return "", nil }, nil),
	} {
		typed, canonical, err := agentlink.Validate(tool, raw)
		want, werr := tool.Validate(raw)
		if (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() || !reflect.DeepEqual(typed, want) {
			t.Fatalf("%s: agentlink.Validate(%q) = %#v, %v; Validate %#v, %v", tool.Name(), raw, typed, err, want, werr)
		}
		if err == nil && !bytes.Equal(canonical, CanonicalArgs(raw)) {
			t.Fatalf("%s: agentlink.Validate(%q) canonical %q; CanonicalArgs %q", tool.Name(), raw, canonical, CanonicalArgs(raw))
		}
	}
}
