package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
)

// DefaultMaxArgBytes is the default bound on a tool call's arguments
// (Config.MaxArgBytes): 1 MiB of JSON.
const DefaultMaxArgBytes = 1 << 20

// checkArgSize returns the error result of a call whose arguments are
// over max bytes (max < 0: no bound), or nil.
func checkArgSize(call ToolCall, max int) *ToolResult {
	if max < 0 || len(call.Arguments) <= max {
		return nil
	}
	return &ToolResult{IsError: true,
		Content: fmt.Sprintf("The arguments of this call of %q are %d bytes, over the limit of %d bytes; they were not read. Call the tool with smaller arguments.", call.Name, len(call.Arguments), max),
		Details: map[string]any{"error": "arguments_too_large", "size": len(call.Arguments), "limit": max}}
}

// Problem is one reason arguments do not fit a tool's schema.
type Problem struct {
	// Path is a JSON Pointer to the offending value ("" for the whole
	// arguments object, "/count", "/items/2").
	Path    string `json:"path"`
	Message string `json:"message"`
}

// ValidationError lists every problem found in a tool's arguments, so the
// model (or a reviewer editing arguments) can fix them all at once.
type ValidationError struct {
	Tool     string    `json:"tool"`
	Problems []Problem `json:"problems"`
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "invalid arguments for tool %q: ", e.Tool)
	if len(e.Problems) == 1 {
		b.WriteString("1 problem: ")
	} else {
		fmt.Fprintf(&b, "%d problems: ", len(e.Problems))
	}
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("; ")
		}
		path := p.Path
		if path == "" {
			path = "(arguments)"
		}
		b.WriteString(path + ": " + p.Message)
	}
	return b.String()
}

// validator checks a decoded JSON value against a schema and collects every
// problem it can name. jsonschema-go (which stops at the first problem) is
// the final authority: when the walk finds nothing but the library does,
// its message is reported.
type validator struct {
	problems []Problem
}

func (v *validator) add(path, format string, args ...any) {
	v.problems = append(v.problems, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

func jsonType(x any) string {
	switch n := x.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		if _, err := n.Int64(); err == nil {
			return "integer"
		}
		if f, err := n.Float64(); err == nil && f == math.Trunc(f) && !strings.ContainsAny(string(n), "eE.") {
			return "integer"
		}
		return "number"
	case float64:
		if n == math.Trunc(n) {
			return "integer"
		}
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", x)
}

func typeOK(got string, want []string) bool {
	for _, w := range want {
		if got == w || (w == "number" && got == "integer") {
			return true
		}
	}
	return false
}

func numberOf(x any) (float64, bool) {
	switch n := x.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case float64:
		return n, true
	}
	return 0, false
}

func (v *validator) walk(path string, x any, s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if s.Not != nil && reflect.DeepEqual(s.Not, &jsonschema.Schema{}) {
		v.add(path, "not allowed")
		return
	}
	want := s.Types
	if s.Type != "" {
		want = []string{s.Type}
	}
	got := jsonType(x)
	if len(want) > 0 && !typeOK(got, want) {
		v.add(path, "want %s, got %s", strings.Join(want, " or "), got)
		return
	}
	if len(s.Enum) > 0 {
		ok := false
		for _, e := range s.Enum {
			if jsonEqual(e, x) {
				ok = true
				break
			}
		}
		if !ok {
			v.add(path, "must be one of %s", compactJSON(s.Enum))
		}
	}
	if s.Const != nil && !jsonEqual(*s.Const, x) {
		v.add(path, "must equal %s", compactJSON(*s.Const))
	}
	if f, ok := numberOf(x); ok {
		if s.Minimum != nil && f < *s.Minimum {
			v.add(path, "must be >= %v", *s.Minimum)
		}
		if s.Maximum != nil && f > *s.Maximum {
			v.add(path, "must be <= %v", *s.Maximum)
		}
		if s.ExclusiveMinimum != nil && f <= *s.ExclusiveMinimum {
			v.add(path, "must be > %v", *s.ExclusiveMinimum)
		}
		if s.ExclusiveMaximum != nil && f >= *s.ExclusiveMaximum {
			v.add(path, "must be < %v", *s.ExclusiveMaximum)
		}
	}
	switch x := x.(type) {
	case string:
		n := utf8.RuneCountInString(x)
		if s.MinLength != nil && n < *s.MinLength {
			v.add(path, "must be at least %d characters long", *s.MinLength)
		}
		if s.MaxLength != nil && n > *s.MaxLength {
			v.add(path, "must be at most %d characters long", *s.MaxLength)
		}
		if s.Pattern != "" {
			if re, err := regexp.Compile(s.Pattern); err == nil && !re.MatchString(x) {
				v.add(path, "must match %q", s.Pattern)
			}
		}
	case []any:
		if s.MinItems != nil && len(x) < *s.MinItems {
			v.add(path, "must have at least %d items", *s.MinItems)
		}
		if s.MaxItems != nil && len(x) > *s.MaxItems {
			v.add(path, "must have at most %d items", *s.MaxItems)
		}
		for i, item := range x {
			v.walk(fmt.Sprintf("%s/%d", path, i), item, s.Items)
		}
	case map[string]any:
		for _, r := range s.Required {
			if _, ok := x[r]; !ok {
				v.add(path+"/"+escapePointer(r), "required")
			}
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := path + "/" + escapePointer(k)
			if ps, ok := s.Properties[k]; ok {
				v.walk(p, x[k], ps)
				continue
			}
			if s.AdditionalProperties != nil {
				if s.AdditionalProperties.Not != nil && reflect.DeepEqual(s.AdditionalProperties.Not, &jsonschema.Schema{}) {
					v.add(p, "unknown argument (allowed: %s)", strings.Join(sortedKeys(s.Properties), ", "))
					continue
				}
				v.walk(p, x[k], s.AdditionalProperties)
			}
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func compactJSON(x any) string {
	b, err := json.Marshal(x)
	if err != nil {
		return fmt.Sprint(x)
	}
	return string(b)
}

// jsonEqual compares two JSON values by their canonical encoding, so that
// 1 and 1.0 and json.Number("1") are equal.
func jsonEqual(a, b any) bool {
	na, okA := numberOf(a)
	nb, okB := numberOf(b)
	if okA && okB {
		return na == nb
	}
	ca, err1 := json.Marshal(a)
	cb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ca, cb)
}

// decodeObject parses raw tool arguments. They must be one JSON object;
// numbers stay json.Number so nothing is rounded.
func decodeObject(raw json.RawMessage) (map[string]any, *Problem) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return nil, &Problem{Message: "arguments are not valid JSON: " + err.Error()}
	}
	if dec.More() {
		return nil, &Problem{Message: "arguments have trailing data after the JSON object"}
	}
	m, ok := x.(map[string]any)
	if !ok {
		if str, ok := x.(string); ok && !json.Valid([]byte(str)) {
			// Providers keep arguments that are not JSON as a JSON string.
			if len(str) > 200 {
				str = str[:200] + "..."
			}
			return nil, &Problem{Message: "arguments are not valid JSON: " + str}
		}
		quoted := string(raw)
		if len(quoted) > 200 {
			quoted = quoted[:200] + "..."
		}
		return nil, &Problem{Message: "arguments must be a JSON object, got " + jsonType(x) + ": " + quoted}
	}
	return m, nil
}

// ValidateArgs checks a JSON arguments object against a JSON Schema given as
// JSON (for example the args_schema a question carries), listing every
// problem like [Tool.Validate]. It lets a process that does not have the
// tool (a server answering for a run elsewhere) check edited arguments.
func ValidateArgs(toolName string, schema, args json.RawMessage) error {
	var s jsonschema.Schema
	if err := json.Unmarshal(schema, &s); err != nil {
		return fmt.Errorf("agent: schema of tool %q is not readable: %w", toolName, err)
	}
	resolved, err := s.Resolve(nil)
	if err != nil {
		return fmt.Errorf("agent: schema of tool %q is invalid: %w", toolName, err)
	}
	t := &Tool{name: toolName, schema: &s, resolved: resolved, decode: func(json.RawMessage) (any, error) { return nil, nil }}
	_, err = t.Validate(args)
	return err
}
