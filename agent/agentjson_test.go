package agent

import (
	"bytes"
	"testing"

	"github.com/tollgate-ai/tollgate/internal/agentjson"
	"github.com/tollgate-ai/tollgate/internal/jsontext"
)

// internal/agentjson, which the MCP gateway encodes its threads' messages
// and results with, gives what jsontext.Marshal gives, for messages,
// results and any other value.
func TestAgentJSONMarshalsAsJSONText(t *testing.T) {
	t.Parallel()
	check := func(i int, v, direct any) {
		t.Helper()
		got, gerr := agentjson.Marshal(v)
		want, werr := jsontext.Marshal(direct)
		if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() || !bytes.Equal(got, want) {
			t.Errorf("%d: agentjson.Marshal = %s, %v\n  jsontext.Marshal = %s, %v", i, got, gerr, want, werr)
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
