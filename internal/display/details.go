package display

import (
	"fmt"
	"slices"
	"strings"
)

// Fact is one entry of what a question's details say of the call, in
// words: a label and one line or more.
type Fact struct {
	Label string
	Lines []string
}

// detailOrder are the details that [Details] says in words, in the order
// it says them; the others follow, sorted.
var detailOrder = []string{"why", "matched_rule", "risk", "effects", "runs", "impact", "review", "policy_error",
	"mcp_client", "mcp_server", "mcp_tool", "annotations", "notify"}

// Details says what a question's details (the policy's, stored with the
// question: [policy.Decision.Details]) tell a reviewer, most important
// first: why it was asked, the risk, each effect of the call, where it
// runs, the rule's impact, why the shell analysis cannot vouch for it,
// which MCP client and server it came through and what the server says
// of its tool (its word, not checked), then any other detail as its text
// or JSON. The rule's name is said only when there is no "why" (which
// names it). Every line is one line ([Line]): a detail cannot forge
// another.
func Details(details map[string]any) []Fact {
	var out []Fact
	add := func(label string, lines ...string) {
		if len(lines) > 0 {
			out = append(out, Fact{Label: label, Lines: lines})
		}
	}
	for _, k := range detailOrder {
		v, ok := details[k]
		if !ok || v == nil {
			continue
		}
		switch k {
		case "matched_rule":
			if _, why := details["why"]; !why {
				add("rule", value(v))
			}
		case "effects":
			list, _ := v.([]any)
			var lines []string
			for _, e := range list {
				m, ok := e.(map[string]any)
				if !ok {
					lines = append(lines, value(e))
					continue
				}
				l := Line(str(m, "text"))
				if r := str(m, "risk"); r != "" {
					l += " (" + Line(r) + ")"
				}
				lines = append(lines, l)
			}
			add("effects", lines...)
		case "review":
			add("review", list(v)...)
		case "policy_error":
			add("policy error", value(v))
		case "mcp_client":
			add("MCP client", value(v))
		case "mcp_server":
			add("MCP server", value(v))
		case "mcp_tool":
			add("MCP tool", value(v))
		case "notify":
			add("told", route(v)...)
		case "annotations":
			m, _ := v.(map[string]any)
			if m == nil {
				add("annotations", value(v))
				continue
			}
			_, runs := details["runs"]
			add("the tool", Annotations(m, runs)...)
		default:
			add(k, value(v))
		}
	}
	for _, k := range otherKeys(details, detailOrder) {
		add(Line(k), value(details[k]))
	}
	return out
}

// route says whom a rule's notify: and escalate: tell (package notify).
func route(v any) []string {
	m, _ := v.(map[string]any)
	if m == nil {
		return []string{value(v)}
	}
	var lines []string
	if to, _ := m["to"].([]any); len(to) > 0 {
		lines = append(lines, strings.Join(strs(to), ", "))
	}
	if e, _ := m["escalate"].(map[string]any); e != nil {
		to, _ := e["to"].([]any)
		lines = append(lines, "then "+strings.Join(strs(to), ", ")+" if it still waits after "+Line(fmt.Sprint(e["after"])))
	}
	return lines
}

func strs(vs []any) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = Line(fmt.Sprint(v))
	}
	return out
}

// otherKeys returns the keys of m that known does not hold, sorted.
func otherKeys(m map[string]any, known []string) []string {
	var rest []string
	for k := range m {
		if !slices.Contains(known, k) {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	return rest
}

// Annotations says what a tool says of itself, in words: an MCP tool's
// server, name, title and hints ("the server says: destructive, not
// idempotent" — its word), and where the bash tool runs unless runs is
// said elsewhere.
func Annotations(m map[string]any, runsSaid bool) []string {
	var lines []string
	if s := str(m, "mcp_server"); s != "" {
		l := "tool " + Line(str(m, "mcp_tool")) + " of the MCP server " + Line(s)
		if t := str(m, "title"); t != "" {
			l += ", titled “" + Line(t) + "”"
		}
		lines = append(lines, l)
	} else if t := str(m, "title"); t != "" {
		lines = append(lines, "titled “"+Line(t)+"”")
	}
	if d := str(m, "description"); d != "" {
		lines = append(lines, "described as “"+Line(d)+"”")
	}
	var says []string
	hint := func(k, yes, no string) {
		if b, ok := m[k].(bool); ok {
			if b {
				says = append(says, yes)
			} else if no != "" {
				says = append(says, no)
			}
		}
	}
	hint("read_only", "read-only", "")
	hint("destructive", "destructive", "not destructive")
	hint("idempotent", "idempotent", "")
	hint("open_world", "reaches the outside world", "")
	if len(says) > 0 {
		lines = append(lines, "the server says: "+strings.Join(says, ", ")+" (its word, not checked)")
	}
	if !runsSaid {
		dir, profile := str(m, "working_directory"), str(m, "sandbox")
		switch {
		case dir != "" && profile != "":
			lines = append(lines, "runs in "+Line(dir)+", sandbox "+Line(profile))
		case dir != "":
			lines = append(lines, "runs in "+Line(dir))
		case profile != "":
			lines = append(lines, "runs under sandbox "+Line(profile))
		}
	}
	known := []string{"mcp_server", "mcp_tool", "title", "description", "read_only", "destructive", "idempotent", "open_world", "working_directory", "sandbox"}
	for _, k := range otherKeys(m, known) {
		lines = append(lines, Line(k)+": "+value(m[k]))
	}
	return lines
}

// value is a detail as one line: a string as its text, else JSON.
func value(v any) string {
	if s, ok := v.(string); ok {
		return Line(s)
	}
	return Line(JSON(v))
}

// list is a list detail one line an item; anything else its value.
func list(v any) []string {
	switch l := v.(type) {
	case []any:
		out := make([]string, len(l))
		for i, x := range l {
			out[i] = value(x)
		}
		return out
	case []string:
		out := make([]string, len(l))
		for i, x := range l {
			out[i] = Line(x)
		}
		return out
	}
	return []string{value(v)}
}

// FactLines writes facts as "label: line" lines, a fact of several lines
// as its label and then each line indented by two spaces with "- ".
func FactLines(facts []Fact) []string {
	var out []string
	for _, f := range facts {
		if len(f.Lines) == 1 && f.Label != "effects" && f.Label != "review" {
			out = append(out, f.Label+": "+f.Lines[0])
			continue
		}
		out = append(out, f.Label+":")
		for _, l := range f.Lines {
			out = append(out, fmt.Sprintf("  - %s", l))
		}
	}
	return out
}
