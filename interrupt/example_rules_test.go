package interrupt_test

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/tollgate-ai/tollgate/interrupt"
)

// Rules as the seed writes them: every bash command that deletes, transfers
// above 1000, and every call of delete_file.
func ExampleShouldInterrupt() {
	rules := []interrupt.Rule{
		{Tool: "bash", Match: interrupt.Matches("command", `\brm\b`)},
		{Tool: "transfer", Match: interrupt.Gt("amount", 1000)},
		{Tool: "delete_file"}, // no predicate: every call
	}
	calls := []struct {
		tool string
		args string
	}{
		{"bash", `{"command": "ls -la"}`},
		{"bash", `{"command": "rm -rf /tmp/logs"}`},
		{"transfer", `{"amount": 250}`},
		{"transfer", `{"amount": 9007199254740993}`},
		{"transfer", `{"amount": "lots"}`}, // mistyped: fails, so it asks
		{"transfer", `{}`},                 // missing: fails, so it asks
		{"delete_file", `{"path": "a.txt"}`},
		{"read_file", `{"path": "a.txt"}`},
	}
	for _, c := range calls {
		fmt.Println(c.tool, c.args, interrupt.ShouldInterrupt(rules, c.tool, json.RawMessage(c.args)))
	}
	// Output:
	// bash {"command": "ls -la"} false
	// bash {"command": "rm -rf /tmp/logs"} true
	// transfer {"amount": 250} false
	// transfer {"amount": 9007199254740993} true
	// transfer {"amount": "lots"} true
	// transfer {} true
	// delete_file {"path": "a.txt"} true
	// read_file {"path": "a.txt"} false
}

// Predicates also read the tool's typed arguments, by their JSON names.
func ExampleShouldInterrupt_typedArguments() {
	type TransferArgs struct {
		Amount   int64  `json:"amount"`
		Currency string `json:"currency,omitempty"`
	}
	rules := []interrupt.Rule{
		{Tool: "*", Match: interrupt.Eq("currency", "BTC")},
		{Tool: "transfer", Match: interrupt.Ge("amount", 1000)},
	}
	fmt.Println(interrupt.ShouldInterrupt(rules, "transfer", TransferArgs{Amount: 999, Currency: "EUR"}))
	fmt.Println(interrupt.ShouldInterrupt(rules, "transfer", &TransferArgs{Amount: 5, Currency: "BTC"}))
	fmt.Println(interrupt.ShouldInterrupt(rules, "transfer", map[string]any{"amount": 1000.0, "currency": "EUR"}))
	// Output:
	// false
	// true
	// true
}

// Check tells which rules matched, and why a failing predicate failed.
func ExampleCheck() {
	rules := []interrupt.Rule{
		{Tool: "transfer", Match: interrupt.Gt("amount", 1000)},
		{Tool: "*", Match: interrupt.Eq("dry_run", false)},
	}
	for _, m := range interrupt.Check(rules, "transfer", json.RawMessage(`{"amount": 5000, "dry_run": 0}`)) {
		fmt.Printf("rule %d (%s): err=%v\n", m.Index, m.Rule.Match, m.Err)
	}
	// Output:
	// rule 0 (Gt("amount", 1000)): err=<nil>
	// rule 1 (Eq("dry_run", false)): err=interrupt: Eq("dry_run", false): argument "dry_run": wrong type: a number does not compare with a bool
}

// A rule built wrong asks on every call, and Validate says so up front.
func ExampleValidate() {
	rules := []interrupt.Rule{
		{Tool: "bash", Match: interrupt.Matches("command", `rm (?=-rf)`)}, // lookahead: not RE2
		{Tool: "http", Match: interrupt.AnyField(nil)},                    // no pattern
		{Tool: "transfer", Match: interrupt.Gt("amount", 1000)},
	}
	err := interrupt.Validate(rules)
	fmt.Println(errors.Is(err, interrupt.ErrInvalidRule))
	fmt.Println(err)
	fmt.Println(interrupt.ShouldInterrupt(rules, "bash", json.RawMessage(`{"command": "ls"}`)))
	// Output:
	// true
	// interrupt: rule 0 (tool "bash"): Matches("command", "rm (?=-rf)"): invalid rule: pattern for "command": error parsing regexp: invalid or unsupported Perl syntax: `(?=`
	// interrupt: rule 1 (tool "http"): AnyField({}): invalid rule: no pattern given
	// true
}
