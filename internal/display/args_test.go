package display

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/tools/bash"
)

func TestArgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   map[string]any
		want []string
	}{
		{"none", nil, []string{}},
		{"hostile command as its text", map[string]any{"cmd": hostile},
			[]string{`cmd: echo "<script>" >> /etc/passwd # ⟨U+202E⟩evil⟨U+202C⟩ ⟨U+200B⟩ ⟨U+001B⟩[31m`}},
		{"keys sorted, other values as JSON", map[string]any{"z": json.Number("1.50"), "a": true, "m": map[string]any{"k": "<v>"}, "n": nil, "l": []any{"x\u202e"}},
			[]string{"a: true", `l: ["x⟨U+202E⟩"]`, `m: {"k":"<v>"}`, "n: null", "z: 1.50"}},
		{"empty string shown", map[string]any{"path": ""}, []string{`path: ""`}},
		{"multi-line string on indented lines", map[string]any{"cmd": "cat <<EOF > f\nline\tone\r\nEOF\n", "dir": "/tmp"},
			[]string{"cmd:", "  cat <<EOF > f", "  line\tone⟨U+000D⟩", "  EOF", "dir: /tmp"}},
		{"hostile key", map[string]any{"a\nb\u202e": "v"}, []string{"a⟨U+000A⟩b⟨U+202E⟩: v"}},
		{"quotes not added", map[string]any{"q": `"quoted"`}, []string{`q: "quoted"`}},
		{"padding counted, the rest in view", map[string]any{"cmd": "echo hi" + strings.Repeat(" ", 3000) + "&& rm -rf ~"},
			[]string{"cmd: echo hi⟨3000 spaces⟩&& rm -rf ~"}},
		{"blank lines counted, the rest in view", map[string]any{"cmd": "ls\n" + strings.Repeat("\n", 200) + "rm -rf ~\n"},
			[]string{"cmd:", "  ls", "  ⟨200 blank lines⟩", "  rm -rf ~"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Args(tt.in); !slices.Equal(got, tt.want) {
				t.Errorf("Args(%v) =\n%q\nwant\n%q", tt.in, got, tt.want)
			}
		})
	}
}

// bashContent is a bash result as the agent gives it to the model and
// stores it (json.Marshal: HTML-escaped).
func bashContent(t *testing.T, r bash.Result) string {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestResult(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   agent.ToolResult
		want string
	}{
		{"bash, both outputs", agent.ToolResult{Content: bashContent(t, bash.Result{ExitCode: 2, Stdout: "a >> b && <c>\n", Stderr: "ls: x: No such file\n"})},
			"exit 2\nstdout:\n  a >> b && <c>\nstderr:\n  ls: x: No such file"},
		{"bash, nothing printed", agent.ToolResult{Content: bashContent(t, bash.Result{})}, "exit 0"},
		{"bash, stderr only", agent.ToolResult{Content: bashContent(t, bash.Result{ExitCode: 1, Stderr: "no"})}, "exit 1\nstderr:\n  no"},
		{"bash, hostile output", agent.ToolResult{Content: bashContent(t, bash.Result{Stdout: "\x1b[2J\u202eok\nline2"})},
			"exit 0\nstdout:\n  ⟨U+001B⟩[2J⟨U+202E⟩ok\n  line2"},
		{"bash, timed out and truncated", agent.ToolResult{Content: bashContent(t, bash.Result{ExitCode: -1, TimedOut: true, Truncated: true, Stdout: "partial"})},
			"timed out\nstdout:\n  partial\n(output truncated)"},
		{"bash, key order of its own", agent.ToolResult{Content: `{"stderr":"","stdout":"x","exit_code":0}`}, "exit 0\nstdout:\n  x"},
		{"not bash: extra key", agent.ToolResult{Content: `{"exit_code":0,"stdout":"","stderr":"","pid":1}`},
			"{\n  \"exit_code\": 0,\n  \"stdout\": \"\",\n  \"stderr\": \"\",\n  \"pid\": 1\n}"},
		{"not bash: missing key", agent.ToolResult{Content: `{"exit_code":0}`}, "{\n  \"exit_code\": 0\n}"},
		{"not bash: wrong type", agent.ToolResult{Content: `{"exit_code":"0","stdout":"","stderr":""}`},
			"{\n  \"exit_code\": \"0\",\n  \"stdout\": \"\",\n  \"stderr\": \"\"\n}"},
		{"other JSON, unescaped", agent.ToolResult{Content: `{"html":"\u003cp\u003e"}`}, "{\n  \"html\": \"<p>\"\n}"},
		{"plain text", agent.ToolResult{Content: "ran: ls\n"}, "ran: ls\n"},
		{"hostile text", agent.ToolResult{Content: hostile}, `echo "<script>" >> /etc/passwd # ⟨U+202E⟩evil⟨U+202C⟩ ⟨U+200B⟩ ⟨U+001B⟩[31m`},
		{"invalid UTF-8", agent.ToolResult{Content: "a\xffb"}, "a⟨0xFF⟩b"},
		{"error", agent.ToolResult{IsError: true, Content: "approval_timeout"}, "error: approval_timeout"},
		{"error, bash", agent.ToolResult{IsError: true, Content: bashContent(t, bash.Result{ExitCode: 3})}, "error: exit 3"},
		{"error, empty", agent.ToolResult{IsError: true}, "error"},
		{"empty", agent.ToolResult{}, "(no output)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Result(tt.in); got != tt.want {
				t.Errorf("Result(%q) =\n%s\nwant\n%s", tt.in.Content, got, tt.want)
			}
		})
	}
}

// TestBashOutputMirrorsResult: bashResult recognises only the keys it
// knows, so a field added to bash.Result must be added here too (else
// bash results fall back to JSON).
func TestBashOutputMirrorsResult(t *testing.T) {
	t.Parallel()
	keys := func(v any) []string {
		var out []string
		rt := reflect.TypeOf(v)
		for i := range rt.NumField() {
			name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
			out = append(out, name)
		}
		return out
	}
	if got, want := keys(bashOutput{}), keys(bash.Result{}); !slices.Equal(got, want) {
		t.Errorf("bashOutput has keys %v, bash.Result %v", got, want)
	}
}
