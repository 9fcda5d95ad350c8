package agent

// The hand-written validator Tool.Validate used before it moved to
// santhosh-tekuri/jsonschema (see validate.go), kept as the baseline of
// TestValidateCoverage and BenchmarkValidate: a walk over part of JSON
// Schema that lists every problem it knows, then jsonschema-go (which
// stops at the first problem and names no place) as the authority on
// what the walk does not know ($ref, oneOf, allOf, not, if, uniqueItems,
// prefixItems, dependentRequired, ...). Delete it with those tests'
// "handwritten" columns once the comparison is no longer wanted.

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
)

// baselineTool is a tool's schema as the hand-written validator used it.
type baselineTool struct {
	name     string
	schema   *jsonschema.Schema
	resolved *jsonschema.Resolved
	decode   func(json.RawMessage) (any, error)
}

func newBaselineTool(name string, schemaJSON []byte, decode func(json.RawMessage) (any, error)) (*baselineTool, error) {
	var s jsonschema.Schema
	if err := json.Unmarshal(schemaJSON, &s); err != nil {
		return nil, err
	}
	resolved, err := s.Resolve(nil)
	if err != nil {
		return nil, err
	}
	return &baselineTool{name: name, schema: &s, resolved: resolved, decode: decode}, nil
}

// validate is the former Tool.Validate.
func (t *baselineTool) validate(raw json.RawMessage) (any, error) {
	obj, p := decodeObject(raw)
	if p != nil {
		return nil, &ValidationError{Tool: t.name, Problems: []Problem{*p}}
	}
	v := &baselineWalker{}
	v.walk("", obj, t.schema)
	if len(v.problems) > 0 {
		sort.SliceStable(v.problems, func(i, j int) bool { return v.problems[i].Path < v.problems[j].Path })
		return nil, &ValidationError{Tool: t.name, Problems: v.problems}
	}
	var plain any
	if err := json.Unmarshal(orEmptyObject(raw), &plain); err == nil {
		if err := t.resolved.Validate(plain); err != nil {
			return nil, &ValidationError{Tool: t.name, Problems: []Problem{{Message: err.Error()}}}
		}
	}
	typed, err := t.decode(orEmptyObject(raw))
	if err != nil {
		return nil, &ValidationError{Tool: t.name, Problems: []Problem{{Message: err.Error()}}}
	}
	return typed, nil
}

type baselineWalker struct {
	problems []Problem
}

func (v *baselineWalker) add(path, format string, args ...any) {
	v.problems = append(v.problems, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

func baselineTypeOK(got string, want []string) bool {
	for _, w := range want {
		if got == w || (w == "number" && got == "integer") {
			return true
		}
	}
	return false
}

func (v *baselineWalker) walk(path string, x any, s *jsonschema.Schema) {
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
	if len(want) > 0 && !baselineTypeOK(got, want) {
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
					v.add(p, "unknown argument (allowed: %s)", strings.Join(slices.Sorted(maps.Keys(s.Properties)), ", "))
					continue
				}
				v.walk(p, x[k], s.AdditionalProperties)
			}
		}
	}
}
