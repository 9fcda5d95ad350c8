package interrupt

import (
	"errors"
	"fmt"
	"reflect"
)

// AnyTool is the tool name of a [Rule] that applies to every tool.
const AnyTool = "*"

// Rule says which tool calls need approval: the calls of the tool named Tool
// (every tool for [AnyTool], "*") whose arguments Match. A nil Match reviews
// every call of the tool. Match returning true, returning an error or
// panicking all mean the call needs approval.
type Rule struct {
	Tool  string
	Match Predicate
}

// Named is a tool value, such as an agent tool, that has a name.
type Named interface{ Name() string }

// RuleFor is the rule for the calls of tool that match (nil: every call);
// the tool is turned into its name.
func RuleFor(tool Named, match Predicate) Rule {
	return Rule{Tool: tool.Name(), Match: match}
}

func (r Rule) applies(tool string) bool {
	return r.Tool == AnyTool || r.Tool == tool
}

// eval runs the rule's predicate on args, failing closed: an error or a
// panic is a match, reported in err.
func (r Rule) eval(args any) (matched bool, err error) {
	if r.Match == nil {
		return true, nil
	}
	defer func() {
		if v := recover(); v != nil {
			matched, err = true, fmt.Errorf("interrupt: %w: %v", ErrPredicatePanic, v)
		}
	}()
	ok, err := r.Match.Eval(args)
	if err != nil {
		return true, err
	}
	return ok, nil
}

// ShouldInterrupt reports whether any rule requires approval for a call of
// the tool named tool with the arguments rawInput. A predicate that fails
// (returns an error or panics) counts as a match. Rules are tried in order
// and the first match decides; use [Check] to learn which rules matched and
// why.
func ShouldInterrupt(rules []Rule, tool string, rawInput any) bool {
	for _, r := range rules {
		if r.applies(tool) {
			if ok, _ := r.eval(rawInput); ok {
				return true
			}
		}
	}
	return false
}

// Match is a rule that requires approval for a tool call, as [Check] reports
// it.
type Match struct {
	Index int   // position of the rule in the list given to Check
	Rule  Rule  // the rule
	Err   error // why the predicate failed, or nil when it returned true
}

// Check is [ShouldInterrupt] that evaluates every rule that applies to the
// tool and returns those that require approval, in order; the call needs
// approval when the result is not empty. A Match with a non-nil Err is a
// predicate that failed, worth logging: it asks a person on every call.
func Check(rules []Rule, tool string, rawInput any) []Match {
	var matches []Match
	for i, r := range rules {
		if !r.applies(tool) {
			continue
		}
		if ok, err := r.eval(rawInput); ok {
			matches = append(matches, Match{Index: i, Rule: r, Err: err})
		}
	}
	return matches
}

// Validate reports the mistakes in rules that would make them fire on
// every call or on none: an empty tool name, a nil predicate hidden in a
// non-nil interface, or a predicate built wrong (its Err method returns an
// error; see [Predicate]). The errors, one per problem and naming the rule by
// index and tool, are joined; each wraps [ErrInvalidRule].
func Validate(rules []Rule) error {
	var errs []error
	for i, r := range rules {
		if err := validateRule(r); err != nil {
			errs = append(errs, fmt.Errorf("interrupt: rule %d (tool %q): %w", i, r.Tool, err))
		}
	}
	return errors.Join(errs...)
}

func validateRule(r Rule) error {
	if r.Tool == "" {
		return fmt.Errorf("%w: no tool name (use %q for every tool)", ErrInvalidRule, AnyTool)
	}
	if r.Match == nil {
		return nil
	}
	switch rv := reflect.ValueOf(r.Match); rv.Kind() {
	case reflect.Func, reflect.Pointer, reflect.Map, reflect.Slice, reflect.Chan, reflect.Interface:
		if rv.IsNil() {
			return fmt.Errorf("%w: nil predicate of type %T (leave Match nil to review every call)", ErrInvalidRule, r.Match)
		}
	}
	if v, ok := r.Match.(interface{ Err() error }); ok {
		if err := v.Err(); err != nil {
			if !errors.Is(err, ErrInvalidRule) {
				err = fmt.Errorf("%w: %w", ErrInvalidRule, err)
			}
			return err
		}
	}
	return nil
}
