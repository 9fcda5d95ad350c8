package interrupt

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Predicate decides from a tool call's arguments whether the call needs
// approval. Where the Python original raises, a Predicate returns an error;
// [ShouldInterrupt] and [Check] count an error (and a panic) as a match, so a
// predicate that cannot decide asks a person (fail closed).
//
// Eval receives the arguments as the caller has them: a JSON object
// (json.RawMessage, []byte or a string of JSON text), a map with string
// keys, or the tool's typed argument struct.
//
// A predicate may also have a method
//
//	Err() error
//
// that reports a mistake made when it was built; [Validate] and [New] report
// it up front. The predicates of this package do.
type Predicate interface {
	Eval(args any) (bool, error)
}

// PredicateFunc adapts a function to a [Predicate].
type PredicateFunc func(args any) (bool, error)

// Eval calls f(args).
func (f PredicateFunc) Eval(args any) (bool, error) { return f(args) }

// builtin is the predicate type of this package. A predicate built wrong
// keeps the mistake in err and returns it from every Eval.
type builtin struct {
	desc string
	err  error
	eval func(object) (bool, error)
}

func (p *builtin) Eval(args any) (bool, error) {
	if p.err != nil {
		return false, fmt.Errorf("interrupt: %s: %w", p.desc, p.err)
	}
	obj, err := asObject(args)
	if err == nil {
		var ok bool
		if ok, err = p.eval(obj); err == nil {
			return ok, nil
		}
	}
	return false, fmt.Errorf("interrupt: %s: %w", p.desc, err)
}

// Err reports the mistake the predicate was built with, or nil.
func (p *builtin) Err() error {
	if p.err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", p.desc, p.err)
}

// String describes the predicate as it was built, for logs and traces.
func (p *builtin) String() string { return p.desc }

// Gt matches when argument field > value.
//
// A number value (any Go integer or float type, json.Number, *big.Int,
// *big.Rat, *big.Float) compares exactly with number arguments — integers of
// any size without rounding, floats by their exact value, so 1 == 1.0 and
// 2^53+1 > 2^53 — and never with booleans. Any other value needs an
// argument of its own kind: strings compare by code point, booleans with
// false < true, lists element by element (as in Python). nil and maps
// (objects) have no order: only [Eq] accepts them, the others are built
// wrong ([ErrInvalidRule]).
//
// The predicate's error wraps [ErrMissingField] for a missing field,
// [ErrWrongType] for arguments that are not an object or a field of the
// wrong type, and [ErrNaN] for a NaN field; a NaN value is [ErrInvalidRule].
// JSON numbers are read like Python's json module reads them: integer
// literals exactly, literals with a fraction or exponent as float64.
func Gt(field string, value any) Predicate { return comparison(opGt, field, value) }

// Ge matches when argument field >= value; see [Gt] for the rules.
func Ge(field string, value any) Predicate { return comparison(opGe, field, value) }

// Lt matches when argument field < value; see [Gt] for the rules.
func Lt(field string, value any) Predicate { return comparison(opLt, field, value) }

// Le matches when argument field <= value; see [Gt] for the rules.
func Le(field string, value any) Predicate { return comparison(opLe, field, value) }

// Eq matches when argument field == value; see [Gt] for the rules. Eq also
// accepts nil (the argument must be JSON null) and maps or structs (the
// argument must be an object with equal fields). A mismatch of kinds is an
// error, not false: Eq("flag", true) on {"flag": 1} fails.
func Eq(field string, value any) Predicate { return comparison(opEq, field, value) }

func comparison(o op, field string, v any) Predicate {
	p := &builtin{desc: fmt.Sprintf("%s(%q, %s)", o.name(), field, describe(v))}
	want, err := normalize(v)
	if err != nil {
		p.err = fmt.Errorf("%w: value: %w", ErrInvalidRule, err)
		return p
	}
	if o != opEq && !ordered(want.kind) {
		p.err = fmt.Errorf("%w: a %s value has no order; only Eq takes one", ErrInvalidRule, want.kind)
		return p
	}
	p.eval = func(obj object) (bool, error) {
		raw, ok := obj.get(field)
		if !ok {
			return false, missing(field)
		}
		arg, err := normalize(raw)
		if err != nil {
			return false, argErr(field, err)
		}
		if o == opEq {
			eq, err := equal(arg, want)
			if err != nil {
				return false, argErr(field, err)
			}
			return eq, nil
		}
		c, err := compare(arg, want)
		if err != nil {
			return false, argErr(field, err)
		}
		return o.holds(c), nil
	}
	return p
}

// Matches matches when the string argument field contains a match of the
// regular expression pattern: an unanchored search, like Python's
// re.search. Use ^ and $ (or \A and \z) to anchor.
//
// The syntax is Go's RE2 ([regexp/syntax]), not Python's re: there are no
// backreferences or lookaround; \d, \w, \s and \b are ASCII-only unless
// written as Unicode classes (\pL, \p{Nd}); and $ matches only at the end of
// the text (Python's $ also matches before a final newline; write \n?$ for
// that). A pattern that does not compile makes the predicate built wrong
// ([ErrInvalidRule], the *syntax.Error wrapped): it fails on every call, so
// the call needs approval, and [Validate] reports it.
//
// A missing argument is [ErrMissingField], a non-string one [ErrWrongType].
func Matches(field, pattern string) Predicate {
	p := &builtin{desc: fmt.Sprintf("Matches(%q, %q)", field, pattern)}
	re, err := regexp.Compile(pattern)
	if err != nil {
		p.err = fmt.Errorf("%w: pattern for %q: %w", ErrInvalidRule, field, err)
		return p
	}
	p.eval = func(obj object) (bool, error) {
		s, err := stringField(obj, field)
		if err != nil {
			return false, err
		}
		return re.MatchString(s), nil
	}
	return p
}

// AllFields matches when every named string argument matches its pattern
// (patterns maps argument names to regular expressions, searched like
// [Matches]). It checks every argument, in order of name, and fails like
// Matches for a missing or non-string one even when the outcome is already
// known; the errors of all of them are joined. With no pattern, or a
// pattern that does not compile, the predicate is built wrong
// ([ErrInvalidRule]).
func AllFields(patterns map[string]string) Predicate { return fieldPatterns(true, patterns) }

// AnyField matches when at least one named string argument matches its
// pattern; otherwise it is like [AllFields], including failing for any
// missing or non-string argument although another one matched.
func AnyField(patterns map[string]string) Predicate { return fieldPatterns(false, patterns) }

func fieldPatterns(all bool, patterns map[string]string) Predicate {
	names := slices.Sorted(maps.Keys(patterns))
	var desc strings.Builder
	if all {
		desc.WriteString("AllFields({")
	} else {
		desc.WriteString("AnyField({")
	}
	for i, name := range names {
		if i > 0 {
			desc.WriteString(", ")
		}
		fmt.Fprintf(&desc, "%q: %q", name, patterns[name])
	}
	desc.WriteString("})")
	p := &builtin{desc: desc.String()}
	if len(names) == 0 {
		p.err = fmt.Errorf("%w: no pattern given", ErrInvalidRule)
		return p
	}
	res := make([]*regexp.Regexp, len(names))
	var errs []error
	for i, name := range names {
		re, err := regexp.Compile(patterns[name])
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: pattern for %q: %w", ErrInvalidRule, name, err))
		}
		res[i] = re
	}
	if len(errs) > 0 {
		p.err = errors.Join(errs...)
		return p
	}
	p.eval = func(obj object) (bool, error) {
		matched := 0
		var errs []error
		for i, name := range names {
			s, err := stringField(obj, name)
			if err != nil {
				errs = append(errs, err)
			} else if res[i].MatchString(s) {
				matched++
			}
		}
		if len(errs) > 0 {
			return false, errors.Join(errs...)
		}
		if all {
			return matched == len(names), nil
		}
		return matched > 0, nil
	}
	return p
}

func stringField(obj object, field string) (string, error) {
	raw, ok := obj.get(field)
	if !ok {
		return "", missing(field)
	}
	if s, ok := raw.(string); ok {
		return s, nil
	}
	v, err := normalize(raw)
	if err != nil {
		return "", argErr(field, err)
	}
	if v.kind != kindString {
		return "", argErr(field, fmt.Errorf("%w: a %s, not a string", ErrWrongType, v.kind))
	}
	return v.s, nil
}

func missing(field string) error {
	return fmt.Errorf("argument %q: %w", field, ErrMissingField)
}

func argErr(field string, err error) error {
	return fmt.Errorf("argument %q: %w", field, err)
}

// describe writes a comparison value for a predicate's description.
func describe(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case json.Number:
		return string(x)
	case json.RawMessage:
		return string(x)
	case nil:
		return "nil"
	}
	return fmt.Sprintf("%v", v)
}
