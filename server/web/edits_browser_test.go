package web_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/agent"
)

// TestBrowserEdits: a coding agent's Edit and MultiEdit calls (package
// hooks relays them with these names and arguments) are shown as what
// they change — the file, and each replacement as removed and added
// lines — in the question and in the conversation, as text: markup, an
// invisible character and a line that pretends to be the page's own in
// the edited text are shown as they are, never run or built. A call of
// another shape is shown as its JSON.
func TestBrowserEdits(t *testing.T) {
	b := newBrowser(t)
	edited := func(ctx context.Context, _ map[string]any) (agent.ToolResult, error) {
		return agent.ToolResult{Content: "edited"}, nil
	}
	e := newEnvWith(t, envOptions{tools: []*agent.Tool{
		agent.NewRawTool("Edit", "Edit a file.", edited, nil),
		agent.NewRawTool("MultiEdit", "Edit a file, several times.", edited, nil),
	}})
	hostile := `<img src=x onerror="window.__pwned=1">` + "\u202e" + `txt.exe`
	edit, _ := json.Marshal(map[string]any{"file_path": "/home/me/p/main.go", "old_string": "package main\nfunc a() {}\n// end",
		"new_string": "package main\nfunc a() { " + hostile + " }\n// end", "replace_all": false})
	tb, _ := review(t, b, e, "edit-1", "call: Edit "+string(edit), 1)
	tb.wait("the diff", `!!document.querySelector('#question .edits .diff .d.add')`)
	if got := tb.text("#question .edits dd"); got != "/home/me/p/main.go" {
		t.Errorf("the file: %q", got)
	}
	if got := tb.text("#question .edits .d.del"); got != "-func a() {}" {
		t.Errorf("the removed line: %q", got)
	}
	if got := tb.text("#question .edits .d.add"); !strings.Contains(got, `<img src=x onerror="window.__pwned=1">⟨U+202E⟩txt.exe`) {
		t.Errorf("the added line, as text: %q", got)
	}
	if got := js[int](tb, `document.querySelectorAll('#question .edits .d.ctx').length`); got != 2 {
		t.Errorf("%d unchanged lines shown, want 2 (the first and the last)", got)
	}
	if got := tb.text("#question .edits .dname"); !strings.Contains(got, "replaces one occurrence") {
		t.Errorf("the edit says %q", got)
	}
	if strings.Contains(tb.text("#question"), `"old_string"`) {
		t.Error("the question shows the call's JSON too")
	}
	// The conversation shows the call the same way.
	tb.wait("the call in the conversation", `!!document.querySelector('#thread-body .call .edits .d.add')`)
	tb.shot("edit-diff")
	tb.noScriptRan()

	// MultiEdit: each edit, in order; a field the view does not know is
	// still shown.
	multi, _ := json.Marshal(map[string]any{"file_path": "/home/me/p/a.go", "extra": "look at me",
		"edits": []map[string]any{{"old_string": "a", "new_string": "b"}, {"old_string": "x", "new_string": "y", "replace_all": true}}})
	qs := e.prompt("edit-2", "call: MultiEdit "+string(multi), 1)
	tb.show(qs[0])
	tb.wait("both edits", `document.querySelectorAll('#question .edits .dkey').length === 2`)
	if got := tb.text("#question .edits .dkey:nth-child(2) .dname"); !strings.Contains(got, "edit 2 of 2") || !strings.Contains(got, "every occurrence") {
		t.Errorf("the second edit says %q", got)
	}
	if got := tb.text("#question .edits"); !strings.Contains(got, "extra") || !strings.Contains(got, "look at me") {
		t.Errorf("the unknown field is not shown: %q", got)
	}

	// Not an edit's shape (old_string is not text): the JSON, as before.
	odd, _ := json.Marshal(map[string]any{"file_path": "/home/me/p/a.go", "old_string": 1, "new_string": "b"})
	qs = e.prompt("edit-3", "call: Edit "+string(odd), 1)
	tb.show(qs[0])
	tb.wait("the arguments", `document.querySelector('#question .qbody') && !document.querySelector('#question .edits') && document.querySelector('#question .qbody').textContent.includes('old_string')`)
	tb.noScriptRan()
}
