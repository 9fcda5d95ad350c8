package display

import (
	"strings"
	"testing"
)

// TestDetails: a question's details in words, in the order a reviewer
// needs them; a value cannot break out of its line.
func TestDetails(t *testing.T) {
	t.Parallel()
	details := map[string]any{
		"matched_rule": "(default)",
		"why":          "no rule matched rm -rf build: the policy's default is ask",
		"risk":         "high",
		"effects": []any{
			map[string]any{"kind": "delete", "text": "deletes build recursively", "risk": "high"},
			map[string]any{"kind": "write", "text": "writes evil\nrisk: low", "risk": "medium"},
		},
		"runs":   "in /srv/ws, sandbox workspace-write: it writes only inside the working directory, reaches no network",
		"review": []any{"sh: reads commands from its standard input"},
		"annotations": map[string]any{"mcp_server": "fs", "mcp_tool": "write_file", "title": "Write a file",
			"read_only": false, "destructive": true, "idempotent": false, "open_world": true, "working_directory": "/srv/ws"},
		"team": "finance",
	}
	got := strings.Join(FactLines(Details(details)), "\n")
	want := `why: no rule matched rm -rf build: the policy's default is ask
risk: high
effects:
  - deletes build recursively (high)
  - writes evil⟨U+000A⟩risk: low (medium)
runs: in /srv/ws, sandbox workspace-write: it writes only inside the working directory, reaches no network
review:
  - sh: reads commands from its standard input
the tool:
  - tool write_file of the MCP server fs, titled “Write a file”
  - the server says: destructive, reaches the outside world (its word, not checked)
team: finance`
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	// Without why, the rule is named; bash's annotations say where it runs.
	got = strings.Join(FactLines(Details(map[string]any{"matched_rule": "ask-all", "impact": "runs a shell command",
		"annotations": map[string]any{"working_directory": "/w", "sandbox": "unconfined"}})), "\n")
	if want := "rule: ask-all\nimpact: runs a shell command\nthe tool: runs in /w, sandbox unconfined"; got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestDetailsRoute(t *testing.T) {
	got := FactLines(Details(map[string]any{"notify": map[string]any{"to": []any{"team-infra"},
		"escalate": map[string]any{"after": "2m0s", "to": []any{"oncall"}}}}))
	want := []string{"told:", "  - team-infra", "  - then oncall if it still waits after 2m0s"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got %q", got)
	}
}
