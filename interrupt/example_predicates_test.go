package interrupt_test

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/tollgate-ai/tollgate/interrupt"
)

// Numbers compare exactly and never with booleans; other values need an
// argument of their own type; a missing or mistyped argument is an error.
func ExampleGt() {
	over := interrupt.Gt("amount", 1<<53)
	for _, args := range []string{
		`{"amount": 9007199254740993}`, // 2^53 + 1: exact, not rounded to 2^53
		`{"amount": 9007199254740992}`,
		`{"amount": true}`,
		`{"amount": "9007199254740993"}`,
		`{"total": 1}`,
	} {
		ok, err := over.Eval(json.RawMessage(args))
		fmt.Println(ok, errors.Is(err, interrupt.ErrWrongType), errors.Is(err, interrupt.ErrMissingField))
	}
	// Output:
	// true false false
	// false false false
	// false true false
	// false true false
	// false false true
}

func ExampleEq() {
	fmt.Println(interrupt.Eq("n", 1).Eval(json.RawMessage(`{"n": 1.0}`)))
	fmt.Println(interrupt.Eq("env", "prod").Eval(json.RawMessage(`{"env": "prod"}`)))
	_, err := interrupt.Eq("force", true).Eval(json.RawMessage(`{"force": 1}`))
	fmt.Println(err)
	// Output:
	// true <nil>
	// true <nil>
	// interrupt: Eq("force", true): argument "force": wrong type: a number does not compare with a bool
}

// Matches searches anywhere in the string (Go RE2 syntax); anchor with ^ and $.
func ExampleMatches() {
	p := interrupt.Matches("url", `^https://[^/]*\.internal/`)
	fmt.Println(p.Eval(map[string]any{"url": "https://db.internal/drop"}))
	fmt.Println(p.Eval(map[string]any{"url": "https://example.com/?u=https://db.internal/"}))
	// Output:
	// true <nil>
	// false <nil>
}

func ExampleAllFields() {
	p := interrupt.AllFields(map[string]string{"method": `^(POST|PUT|DELETE)$`, "url": `/admin/`})
	fmt.Println(p.Eval(json.RawMessage(`{"method": "DELETE", "url": "https://x/admin/users"}`)))
	fmt.Println(p.Eval(json.RawMessage(`{"method": "GET", "url": "https://x/admin/users"}`)))
	// Output:
	// true <nil>
	// false <nil>
}

// AnyField checks every named argument: one missing is an error even when
// another one already matched.
func ExampleAnyField() {
	p := interrupt.AnyField(map[string]string{"path": `^/etc/`, "target": `^/etc/`})
	fmt.Println(p.Eval(json.RawMessage(`{"path": "/tmp/a", "target": "/etc/passwd"}`)))
	_, err := p.Eval(json.RawMessage(`{"target": "/etc/passwd"}`))
	fmt.Println(err)
	// Output:
	// true <nil>
	// interrupt: AnyField({"path": "^/etc/", "target": "^/etc/"}): argument "path": missing argument
}
