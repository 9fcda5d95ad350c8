package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"

	sjs "github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// report words the error tree of one validation.
type report struct {
	c *compiledSchema
	// x is the validated value, to name what was given.
	x any
}

// problem is a Problem with what a type, const or enum keyword wanted, so
// that the refusals of a oneOf's alternatives can merge.
type problem struct {
	Problem
	types  []string
	values []any
	got    string // the type of the value, for those keywords
}

func (r *report) sorted(ps []problem) []Problem {
	out := make([]Problem, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.Problem)
	}
	slices.SortFunc(out, func(a, b Problem) int {
		if c := strings.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		return strings.Compare(a.Message, b.Message)
	})
	return slices.Compact(out)
}

// shift corrects an array index: v6.0.2 numbers the items after a
// prefixItems (2020-12) or an items array (additionalItems) from 0, so
// token depth of such an error's location is n too low.
type shift struct{ depth, n int }

// boundMessage words the failed keywords that bound a value (a number's
// range, a string's length and pattern, an array's or object's size) at
// the value's own path; ok false for any other kind.
func boundMessage(ek sjs.ErrorKind) (msg string, ok bool) {
	switch k := ek.(type) {
	case *kind.Minimum:
		return fmt.Sprintf("must be >= %s", ratString(k.Want)), true
	case *kind.Maximum:
		return fmt.Sprintf("must be <= %s", ratString(k.Want)), true
	case *kind.ExclusiveMinimum:
		return fmt.Sprintf("must be > %s", ratString(k.Want)), true
	case *kind.ExclusiveMaximum:
		return fmt.Sprintf("must be < %s", ratString(k.Want)), true
	case *kind.MultipleOf:
		return fmt.Sprintf("must be a multiple of %s", ratString(k.Want)), true
	case *kind.MinLength:
		return fmt.Sprintf("must be at least %s long (it has %d)", plural(k.Want, "character", "characters"), k.Got), true
	case *kind.MaxLength:
		return fmt.Sprintf("must be at most %s long (it has %d)", plural(k.Want, "character", "characters"), k.Got), true
	case *kind.Pattern:
		return fmt.Sprintf("must match the regular expression %q", k.Want), true
	case *kind.MinItems:
		return fmt.Sprintf("must have at least %s (it has %d)", plural(k.Want, "item", "items"), k.Got), true
	case *kind.MaxItems:
		return fmt.Sprintf("must have at most %s (it has %d)", plural(k.Want, "item", "items"), k.Got), true
	case *kind.AdditionalItems:
		return fmt.Sprintf("has %s more than the schema allows", plural(k.Count, "item", "items")), true
	case *kind.MinProperties:
		return fmt.Sprintf("must have at least %s (it has %d)", plural(k.Want, "property", "properties"), k.Got), true
	case *kind.MaxProperties:
		return fmt.Sprintf("must have at most %s (it has %d)", plural(k.Want, "property", "properties"), k.Got), true
	}
	return "", false
}

func (r *report) collect(e *sjs.ValidationError, shifts []shift, out []problem) []problem {
	c := r.c
	tail, isTail := c.tailItems(e)
	if isTail && tail > 0 && len(e.InstanceLocation) > 0 {
		shifts = append(slices.Clip(shifts), shift{len(e.InstanceLocation) - 1, tail})
	}
	loc := location(e.InstanceLocation, shifts)
	path := pointer(loc)
	add := func(p string, format string, args ...any) {
		out = append(out, problem{Problem: Problem{Path: p, Message: fmt.Sprintf(format, args...)}})
	}
	got := func() string {
		if v, ok := r.value(loc); ok {
			return jsonType(v)
		}
		return ""
	}
	if msg, ok := boundMessage(e.ErrorKind); ok {
		add(path, "%s", msg)
		return out
	}
	switch k := e.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.Reference, *kind.AllOf:
		for _, cause := range e.Causes {
			out = r.collect(cause, shifts, out)
		}
	case *kind.AnyOf:
		out = r.alternatives(e, path, shifts, "at least one", out)
	case *kind.OneOf:
		if len(k.Subschemas) == 0 {
			out = r.alternatives(e, path, shifts, "exactly one", out)
		} else {
			add(path, "matches alternatives %d and %d of the schema's oneOf; it must match exactly one", k.Subschemas[0]+1, k.Subschemas[1]+1)
		}
	case *kind.Type:
		g := got()
		if g == "" {
			g = k.Got
		}
		out = append(out, problem{Problem: Problem{Path: path, Message: fmt.Sprintf("want %s, got %s", strings.Join(k.Want, " or "), g)}, types: k.Want, got: g})
	case *kind.Enum:
		out = append(out, problem{Problem: Problem{Path: path, Message: "must be one of " + brief(k.Want)}, values: k.Want, got: got()})
	case *kind.Const:
		out = append(out, problem{Problem: Problem{Path: path, Message: "must equal " + brief(k.Want)}, values: []any{k.Want}, got: got()})
	case *kind.Required:
		for _, m := range k.Missing {
			add(path+"/"+escapePointer(m), "required")
		}
	case *kind.DependentRequired:
		for _, m := range k.Missing {
			add(path+"/"+escapePointer(m), "required when %q is given", k.Prop)
		}
	case *kind.Dependency:
		for _, m := range k.Missing {
			add(path+"/"+escapePointer(m), "required when %q is given", k.Prop)
		}
	case *kind.AdditionalProperties:
		allowed := c.allowedNames(c.at(e))
		for _, p := range k.Properties {
			add(path+"/"+escapePointer(p), "unknown %s (allowed: %s)", argumentOr(path, "property"), allowed)
		}
	case *kind.Format:
		msg := "must be a valid " + k.Want
		if ex, ok := formatExamples[k.Want]; ok {
			msg = "must be " + ex
		}
		if k.Err != nil {
			msg += " (" + k.Err.Error() + ")"
		}
		add(path, "%s", msg)
	case *kind.UniqueItems:
		add(path+"/"+strconv.Itoa(k.Duplicates[1]), "duplicate of item %d; items must be unique", k.Duplicates[0])
	case *kind.PropertyNames:
		var why []string
		for _, cause := range e.Causes {
			for _, p := range r.collect(cause, shifts, nil) {
				why = append(why, p.Message)
			}
		}
		add(path+"/"+escapePointer(k.Property), "the name %q is not allowed: %s", k.Property, strings.Join(why, "; "))
	case *kind.FalseSchema:
		_, frag, _ := strings.Cut(e.SchemaURL, "#")
		switch {
		case isTail:
			add(path, "not allowed: at most %s", plural(tail, "item is allowed", "items are allowed"))
		case strings.HasSuffix(frag, "/unevaluatedProperties") && len(loc) > 0:
			add(path, "unknown %s", argumentOr(pointer(loc[:len(loc)-1]), "property"))
		default:
			add(path, "not allowed")
		}
	case *kind.Not:
		out = r.not(path, c.keyword(e, "not"), out)
	case *kind.Contains:
		add(path, "must contain an item that matches %s", brief(c.keyword(e, "contains")))
	case *kind.MinContains:
		add(path, "must contain at least %s that match %s (it has %d)", plural(k.Want, "item", "items"), brief(c.keyword(e, "contains")), len(k.Got))
	case *kind.MaxContains:
		add(path, "must contain at most %s that match %s (it has %d)", plural(k.Want, "item", "items"), brief(c.keyword(e, "contains")), len(k.Got))
	default:
		if len(e.Causes) > 0 {
			for _, cause := range e.Causes {
				out = r.collect(cause, shifts, out)
			}
			break
		}
		msg := "invalid"
		if o := e.BasicOutput(); o.Error != nil {
			msg = o.Error.String()
		}
		add(path, "%s", msg)
	}
	return out
}

// not words a "not" that matched.
func (r *report) not(path string, not any, out []problem) []problem {
	m, _ := not.(map[string]any)
	req, _ := m["required"].([]any)
	var msg string
	switch {
	case not == true || (m != nil && len(m) == 0):
		msg = "not allowed"
	case len(m) == 1 && len(req) == 1:
		path += "/" + escapePointer(fmt.Sprint(req[0]))
		msg = "not allowed here"
	case len(m) == 1 && len(req) > 1:
		names := make([]string, len(req))
		for i, n := range req {
			names[i] = strconv.Quote(fmt.Sprint(n))
		}
		msg = strings.Join(names, ", ") + " cannot all be given together"
	default:
		msg = "must not match " + brief(not)
	}
	return append(out, problem{Problem: Problem{Path: path, Message: msg}})
}

// alternatives words an anyOf or oneOf none of whose alternatives matched
// (want: "at least one", "exactly one"). An alternative refused for its
// type, or for a const or enum at the value or at one of its properties
// (a tagged union's "kind"), is not the one meant: if one alternative is
// left, its problems are the value's; if none is and the refusals are at
// one place, they merge ("want string or integer", "must be one of ...");
// otherwise one problem lists each alternative's.
func (r *report) alternatives(e *sjs.ValidationError, path string, shifts []shift, want string, out []problem) []problem {
	branches := make([][]problem, len(e.Causes))
	var meant []int
	var tags []problem
	for i, cause := range e.Causes {
		branches[i] = r.collect(cause, shifts, nil)
		tag := slices.IndexFunc(branches[i], func(p problem) bool {
			return (p.types != nil && p.Path == path) || (p.values != nil && (p.Path == path || isChild(p.Path, path)))
		})
		if tag < 0 {
			meant = append(meant, i)
		} else {
			tags = append(tags, branches[i][tag])
		}
	}
	if len(meant) == 1 {
		return append(out, branches[meant[0]]...)
	}
	if len(meant) == 0 {
		if merged, ok := mergeTags(tags); ok {
			return append(out, merged)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "must match %s of the schema's alternatives", want)
	for i, br := range branches {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "alternative %d: ", i+1)
		for j, p := range br {
			if j == 3 {
				fmt.Fprintf(&b, ", and %d more", len(br)-3)
				break
			}
			if j > 0 {
				b.WriteString(", ")
			}
			if rel := strings.TrimPrefix(p.Path, path); rel != "" {
				b.WriteString(rel + " ")
			}
			b.WriteString(p.Message)
		}
	}
	return append(out, problem{Problem: Problem{Path: path, Message: b.String()}})
}

func isChild(p, parent string) bool {
	rest, ok := strings.CutPrefix(p, parent+"/")
	return ok && !strings.Contains(rest, "/")
}

// mergeTags merges the refusals of every alternative when they are at the
// same place: "want string or integer, got boolean", "must be one of
// ["read","write"]", "must be "auto" or of type integer, got string".
func mergeTags(tags []problem) (problem, bool) {
	if len(tags) == 0 {
		return problem{}, false
	}
	first := tags[0]
	var types []string
	var values []any
	for _, t := range tags {
		if t.Path != first.Path {
			return problem{}, false
		}
		for _, ty := range t.types {
			if !slices.Contains(types, ty) {
				types = append(types, ty)
			}
		}
		for _, v := range t.values {
			if !slices.ContainsFunc(values, func(w any) bool { return jsonEqual(v, w) }) {
				values = append(values, v)
			}
		}
	}
	p := problem{Problem: Problem{Path: first.Path}}
	switch {
	case values == nil:
		p.Message = fmt.Sprintf("want %s, got %s", strings.Join(types, " or "), first.got)
	case types == nil && len(values) == 1:
		p.Message = "must equal " + brief(values[0])
	case types == nil:
		p.Message = "must be one of " + brief(values)
	default:
		var parts []string
		for _, v := range values {
			parts = append(parts, brief(v))
		}
		one := strings.Join(parts, " or ")
		if len(values) > 2 {
			one = "one of " + brief(values)
		}
		p.Message = fmt.Sprintf("must be %s or of type %s, got %s", one, strings.Join(types, " or "), first.got)
	}
	return p, true
}

// argumentOr is "argument" for a name in the arguments object, else what.
func argumentOr(parent, what string) string {
	if parent == "" {
		return "argument"
	}
	return what
}

// allowedNames lists the property names an object schema declares.
func (c *compiledSchema) allowedNames(s map[string]any) string {
	var names []string
	if props, ok := s["properties"].(map[string]any); ok {
		names = slices.Sorted(maps.Keys(props))
	}
	if pp, ok := s["patternProperties"].(map[string]any); ok && len(pp) > 0 {
		pats := slices.Sorted(maps.Keys(pp))
		for i, p := range pats {
			pats[i] = strconv.Quote(p)
		}
		names = append(names, "names matching "+strings.Join(pats, " or "))
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// formatExamples say what a format means, for the formats tools use.
var formatExamples = map[string]string{
	"date-time": `a date and time in RFC 3339 form, such as "2025-01-31T14:05:00Z"`,
	"date":      `a date in RFC 3339 form, such as "2025-01-31"`,
	"time":      `a time in RFC 3339 form, such as "14:05:00Z"`,
	"duration":  `an ISO 8601 duration, such as "P1DT2H" or "PT30S"`,
	"email":     `an email address, such as "ada@example.com"`,
	"hostname":  `a host name, such as "api.example.com"`,
	"ipv4":      `an IPv4 address, such as "192.0.2.1"`,
	"ipv6":      `an IPv6 address, such as "2001:db8::1"`,
	"uri":       `an absolute URI, such as "https://example.com/path"`,
	"uuid":      `a UUID, such as "123e4567-e89b-12d3-a456-426614174000"`,
}

// tailItems tells whether e is of an "items" (2020-12) or
// "additionalItems" (earlier drafts) keyword that applies after n
// positional items.
func (c *compiledSchema) tailItems(e *sjs.ValidationError) (n int, ok bool) {
	_, frag, _ := strings.Cut(e.SchemaURL, "#")
	i := strings.LastIndexByte(frag, '/')
	if i < 0 {
		return 0, false
	}
	s := c.schemaAt(frag[:i])
	var positional any
	switch frag[i+1:] {
	case "items":
		positional = s["prefixItems"]
	case "additionalItems":
		positional = s["items"]
	}
	if a, ok := positional.([]any); ok {
		return len(a), true
	}
	return 0, false
}

// at returns the schema (as JSON) whose keyword e is.
func (c *compiledSchema) at(e *sjs.ValidationError) map[string]any {
	_, frag, _ := strings.Cut(e.SchemaURL, "#")
	return c.schemaAt(frag)
}

func (c *compiledSchema) keyword(e *sjs.ValidationError, kw string) any {
	return c.at(e)[kw]
}

// schemaAt returns the schema (as JSON) at a JSON pointer into the root.
func (c *compiledSchema) schemaAt(ptr string) map[string]any {
	x, _ := lookup(c.doc, splitPointer(ptr))
	m, _ := x.(map[string]any)
	return m
}

func splitPointer(ptr string) []string {
	if ptr == "" {
		return nil
	}
	toks := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	for i, t := range toks {
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return toks
}

// value is the part of the validated value at loc.
func (r *report) value(loc []string) (any, bool) {
	return lookup(r.x, loc)
}

func lookup(x any, loc []string) (any, bool) {
	for _, tok := range loc {
		switch v := x.(type) {
		case map[string]any:
			var ok bool
			if x, ok = v[tok]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(v) {
				return nil, false
			}
			x = v[i]
		default:
			return nil, false
		}
	}
	return x, true
}

// location is where an error is in the value, with the shifts applied.
func location(loc []string, shifts []shift) []string {
	if len(shifts) == 0 {
		return loc
	}
	loc = slices.Clone(loc)
	for _, s := range shifts {
		if s.depth < len(loc) {
			if i, err := strconv.Atoi(loc[s.depth]); err == nil {
				loc[s.depth] = strconv.Itoa(i + s.n)
			}
		}
	}
	return loc
}

func pointer(loc []string) string {
	var b strings.Builder
	for _, t := range loc {
		b.WriteByte('/')
		b.WriteString(escapePointer(t))
	}
	return b.String()
}

func ratString(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// brief is x as compact JSON, cut to 200 bytes.
func brief(x any) string {
	s := compactJSON(x)
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
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
