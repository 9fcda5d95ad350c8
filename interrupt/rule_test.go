package interrupt

import (
	"errors"
	"math"
	"strings"
	"testing"
)

type fakeTool struct{ name string }

func (f fakeTool) Name() string { return f.name }

var (
	always = PredicateFunc(func(any) (bool, error) { return true, nil })
	never  = PredicateFunc(func(any) (bool, error) { return false, nil })
	broken = PredicateFunc(func(any) (bool, error) { return false, errors.New("boom") })
	panics = PredicateFunc(func(any) (bool, error) { panic("kaboom") })
)

func TestShouldInterrupt(t *testing.T) {
	t.Parallel()
	args := j(`{"amount": 1500, "command": "ls"}`)
	for _, tc := range []struct {
		name  string
		rules []Rule
		tool  string
		want  bool
	}{
		{"no rules", nil, "bash", false},
		{"no predicate reviews every call", []Rule{{Tool: "bash"}}, "bash", true},
		{"other tool", []Rule{{Tool: "bash"}}, "python", false},
		{"star is every tool", []Rule{{Tool: "*"}}, "python", true},
		{"AnyTool", []Rule{{Tool: AnyTool, Match: Gt("amount", 1000)}}, "transfer", true},
		{"predicate true", []Rule{{Tool: "transfer", Match: Gt("amount", 1000)}}, "transfer", true},
		{"predicate false", []Rule{{Tool: "transfer", Match: Gt("amount", 2000)}}, "transfer", false},
		{"predicate error is a match", []Rule{{Tool: "transfer", Match: broken}}, "transfer", true},
		{"predicate panic is a match", []Rule{{Tool: "transfer", Match: panics}}, "transfer", true},
		{"missing field is a match", []Rule{{Tool: "transfer", Match: Gt("total", 1)}}, "transfer", true},
		{"built wrong is a match", []Rule{{Tool: "transfer", Match: Matches("command", "(")}}, "transfer", true},
		{"failing predicate of another tool", []Rule{{Tool: "bash", Match: broken}}, "transfer", false},
		{"any rule", []Rule{{Tool: "transfer", Match: never}, {Tool: "*", Match: Matches("command", "^ls")}}, "transfer", true},
		{"no rule", []Rule{{Tool: "transfer", Match: never}, {Tool: "*", Match: Matches("command", "^rm")}}, "transfer", false},
		{"tool names are exact", []Rule{{Tool: "Bash"}}, "bash", false},
		{"RuleFor takes the tool's name", []Rule{RuleFor(fakeTool{"transfer"}, always)}, "transfer", true},
		{"RuleFor with nil predicate", []Rule{RuleFor(fakeTool{"transfer"}, nil)}, "transfer", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := ShouldInterrupt(tc.rules, tc.tool, args); got != tc.want {
				t.Fatalf("ShouldInterrupt = %v; want %v", got, tc.want)
			}
			if got := len(Check(tc.rules, tc.tool, args)) > 0; got != tc.want {
				t.Fatalf("Check found a match = %v; want %v", got, tc.want)
			}
		})
	}
}

func TestCheckReportsEveryMatch(t *testing.T) {
	t.Parallel()
	rules := []Rule{
		{Tool: "transfer", Match: Gt("amount", 1000)},
		{Tool: "bash"},
		{Tool: "*", Match: never},
		{Tool: "*", Match: panics},
		{Tool: "transfer", Match: Lt("missing", 1)},
	}
	got := Check(rules, "transfer", j(`{"amount": 1500}`))
	if len(got) != 3 {
		t.Fatalf("Check = %v; want 3 matches", got)
	}
	if got[0].Index != 0 || got[0].Err != nil || got[0].Rule.Tool != "transfer" {
		t.Errorf("match 0 = %+v", got[0])
	}
	if got[1].Index != 3 || !errors.Is(got[1].Err, ErrPredicatePanic) || !strings.Contains(got[1].Err.Error(), "kaboom") {
		t.Errorf("match 1 = %+v; want the recovered panic", got[1])
	}
	if got[2].Index != 4 || !errors.Is(got[2].Err, ErrMissingField) {
		t.Errorf("match 2 = %+v; want the missing field", got[2])
	}
}

type nilPred struct{}

func (*nilPred) Eval(any) (bool, error) { return false, nil }

type customErr struct{}

func (customErr) Eval(any) (bool, error) { return false, nil }
func (customErr) Err() error             { return errors.New("custom mistake") }

func TestValidate(t *testing.T) {
	t.Parallel()
	good := []Rule{
		{Tool: "bash"},
		{Tool: "*", Match: Matches("command", `rm\s`)},
		{Tool: "transfer", Match: Gt("amount", 1000)},
		{Tool: "x", Match: AllFields(map[string]string{"a": "b"})},
		{Tool: "x", Match: always},
	}
	if err := Validate(good); err != nil {
		t.Fatalf("Validate(good) = %v", err)
	}
	if err := Validate(nil); err != nil {
		t.Fatalf("Validate(nil) = %v", err)
	}
	for _, tc := range []struct {
		name string
		rule Rule
		want string
	}{
		{"empty tool", Rule{Match: always}, "no tool name"},
		{"bad pattern", Rule{Tool: "bash", Match: Matches("command", "(")}, "missing closing )"},
		{"all no pattern", Rule{Tool: "bash", Match: AllFields(nil)}, "no pattern"},
		{"any no pattern", Rule{Tool: "bash", Match: AnyField(map[string]string{})}, "no pattern"},
		{"bad field pattern", Rule{Tool: "bash", Match: AnyField(map[string]string{"a": "x", "b": "*"})}, `pattern for "b"`},
		{"NaN value", Rule{Tool: "bash", Match: Gt("n", math.NaN())}, "NaN"},
		{"unordered value", Rule{Tool: "bash", Match: Lt("n", nil)}, "no order"},
		{"unsupported value", Rule{Tool: "bash", Match: Eq("n", make(chan int))}, "cannot compare"},
		{"nil func", Rule{Tool: "bash", Match: PredicateFunc(nil)}, "nil predicate"},
		{"nil pointer", Rule{Tool: "bash", Match: (*nilPred)(nil)}, "nil predicate"},
		{"custom Err", Rule{Tool: "bash", Match: customErr{}}, "custom mistake"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rules := append(append([]Rule{}, good...), tc.rule)
			err := Validate(rules)
			if !errors.Is(err, ErrInvalidRule) {
				t.Fatalf("Validate = %v; want ErrInvalidRule", err)
			}
			if !strings.Contains(err.Error(), "rule 5 ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %q; want rule 5 and %q", err, tc.want)
			}
		})
	}
	err := Validate([]Rule{{Tool: "a", Match: Matches("x", "(")}, {Tool: "b"}, {Tool: "", Match: AllFields(nil)}})
	msg := err.Error()
	if !strings.Contains(msg, `rule 0 (tool "a")`) || strings.Contains(msg, "rule 1") || !strings.Contains(msg, `rule 2 (tool "")`) {
		t.Fatalf("Validate = %q; want rules 0 and 2", msg)
	}
}
