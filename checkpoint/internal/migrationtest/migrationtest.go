// Package migrationtest holds what the stores' migration tests share: the
// rule of each migration that fills a new column from old data, as cases
// and a check, so that SQLite and PostgreSQL are held to the same one.
package migrationtest

import (
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// ToolCase is a question written before questions had a tool column: its
// payload, and the Tool the migration must give it.
type ToolCase struct {
	ID      string
	Payload string // "" for none
	Tool    string
}

// ToolCases are valid JSON payloads (and none): only a top-level
// "tool_name" that is a string names the tool.
var ToolCases = []ToolCase{
	{"string", `{"tool_name":"bash","args":{"cmd":"ls"}}`, "bash"},
	{"escaped", `{"tool_name":"caf\u00e9"}`, "café"},
	{"number", `{"tool_name":5}`, ""},
	{"null", `{"tool_name":null}`, ""},
	{"nested", `{"args":{"tool_name":"bash"}}`, ""},
	{"array", `["tool_name"]`, ""},
	{"scalar", `"tool_name"`, ""},
	{"no-payload", ``, ""},
}

// CheckTools reads each case's question of thread from s after the
// migration: its Tool is the case's, and its payload is unchanged.
func CheckTools(t *testing.T, s checkpoint.Store, thread string, cases []ToolCase) {
	t.Helper()
	for _, c := range cases {
		q, err := s.GetQuestion(t.Context(), thread, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if q.Tool != c.Tool {
			t.Errorf("%s: Tool = %q, want %q (payload %s)", c.ID, q.Tool, c.Tool, c.Payload)
		}
		if string(q.Payload) != c.Payload {
			t.Errorf("%s: the migration changed the payload to %s", c.ID, q.Payload)
		}
	}
}
