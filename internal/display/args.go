package display

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"

	"github.com/tollgate-ai/tollgate/agent"
)

// indent is put before each line of a multi-line value.
const indent = "  "

// Args renders a tool call's arguments as lines "key: value", keys
// sorted. A string value is shown as its text ([Text], not quoted; an empty
// one as ""), a multi-line string on the following lines, indented; any
// other value as [JSON]. No line holds a newline.
func Args(args map[string]any) []string {
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	lines := make([]string, 0, len(keys))
	for _, k := range keys {
		key := Line(k) + ":"
		s, isString := args[k].(string)
		switch {
		case !isString:
			lines = append(lines, key+" "+JSON(args[k]))
		case s == "":
			lines = append(lines, key+` ""`)
		case !strings.Contains(s, "\n"):
			lines = append(lines, key+" "+Text(s))
		default:
			lines = append(lines, key)
			for _, l := range textLines(s) {
				lines = append(lines, indent+l)
			}
		}
	}
	return lines
}

// textLines splits s into its lines, each shown by [Text]; a final newline
// ends the last line rather than starting an empty one.
func textLines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	return strings.Split(Text(s), "\n")
}

// indented is s with indent before each of its lines.
func indented(s string) string {
	var b strings.Builder
	for _, l := range textLines(s) {
		b.WriteString(indent + l + "\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// decodeObject reads a JSON object keeping numbers exact; nil if raw is
// not one.
func decodeObject(raw []byte) map[string]any {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if dec.Decode(&m) != nil || dec.More() {
		return nil
	}
	return m
}

// Result renders a tool result for a person, over one or more lines.
//
// A bash result (content {"exit_code":..,"stdout":..,"stderr":..} of
// tools/bash.Result) is "exit N" ("timed out" when it did), then
// "stdout:" and "stderr:" each followed by that output indented, each only
// when not empty, and "(output truncated)" when it was. Other content that
// is a JSON object or array is shown by [JSONIndent], anything else by
// [Text]. An error result starts with "error: ".
func Result(r agent.ToolResult) string {
	var b strings.Builder
	if r.IsError {
		b.WriteString("error: ")
	}
	if out, ok := bashResult(r.Content); ok {
		if out.TimedOut {
			b.WriteString("timed out")
		} else {
			b.WriteString("exit " + itoa(out.ExitCode))
		}
		if out.Stdout != "" {
			b.WriteString("\nstdout:\n" + indented(out.Stdout))
		}
		if out.Stderr != "" {
			b.WriteString("\nstderr:\n" + indented(out.Stderr))
		}
		if out.Truncated {
			b.WriteString("\n(output truncated)")
		}
		return b.String()
	}
	c := strings.TrimSpace(r.Content)
	if c != "" && (c[0] == '{' || c[0] == '[') && json.Valid([]byte(c)) {
		b.WriteString(JSONIndent(c))
		return b.String()
	}
	if r.Content == "" {
		if r.IsError {
			return "error"
		}
		return "(no output)"
	}
	b.WriteString(Text(r.Content))
	return b.String()
}

// bashOutput mirrors tools/bash.Result (kept apart so that this package
// does not depend on the tool).
type bashOutput struct {
	ExitCode  int    `json:"exit_code"`
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	TimedOut  bool   `json:"timed_out"`
	Truncated bool   `json:"truncated"`
}

// bashResult decodes content that is a bash result: a JSON object with
// exit_code, stdout and stderr and no keys but those of bash.Result.
func bashResult(content string) (bashOutput, bool) {
	var out bashOutput
	m := decodeObject([]byte(content))
	if m == nil {
		return out, false
	}
	for _, k := range []string{"exit_code", "stdout", "stderr"} {
		if _, ok := m[k]; !ok {
			return out, false
		}
	}
	for k := range m {
		switch k {
		case "exit_code", "stdout", "stderr", "timed_out", "truncated":
		default:
			return out, false
		}
	}
	if json.Unmarshal([]byte(content), &out) != nil {
		return out, false
	}
	return out, true
}
