package interrupt

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"strings"
	"testing"
)

// FuzzID checks that ID is ASCII, starts with the prefix, never panics and is
// one-to-one: parseID inverts it, and parseID accepts only what ID returns.
func FuzzID(f *testing.F) {
	for _, s := range []string{"fc:1", "", "call_1", "a.b", "é", "\xff", "approve_.3a", "toolu_01ABC"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id := ID(s)
		if !isASCII(id) {
			t.Fatalf("ID(%q) = %q is not ASCII", s, id)
		}
		if !strings.HasPrefix(id, IDPrefix) {
			t.Fatalf("ID(%q) = %q lacks the prefix", s, id)
		}
		if back, ok := parseID(id); !ok || back != s {
			t.Fatalf("parseID(ID(%q)) = %q, %v", s, back, ok)
		}
		// s read as an id: if it parses, it is the id of what it parses to.
		if back, ok := parseID(s); ok && ID(back) != s {
			t.Fatalf("parseID(%q) = %q but ID of that is %q", s, back, ID(back))
		}
	})
}

// FuzzPredicates checks that no predicate panics on any JSON input (nor on
// its decoded forms), that a failing predicate returns false, that the
// comparisons are consistent with each other (exactly one of < == > when
// none fails), and that Interpret reads any answer without panicking.
func FuzzPredicates(f *testing.F) {
	f.Add([]byte(`{"amount": 1500, "command": "rm -rf /"}`), "amount", `rm\s`, "1000")
	f.Add([]byte(`{"n": 9007199254740993}`), "n", `^\d+$`, "9007199254740992")
	f.Add([]byte(`{"n": 1e400, "s": "x"}`), "n", `(`, "1.5")
	f.Add([]byte(`{"action": "edit", "arguments": {"n": 1}}`), "action", `edit`, "-0")
	f.Add([]byte(`[1, 2]`), "", ``, "x")
	f.Add([]byte(`{"f": true, "g": null, "h": [1, "a"], "i": {"j": 1}}`), "f", `.`, "1")
	f.Fuzz(func(t *testing.T, data []byte, field, pattern, num string) {
		values := []any{1000, 1.5, math.Copysign(0, -1), json.Number("123456789012345678901234567890"), "m", true, false,
			[]any{1, "a"}, big.NewRat(1, 3)}
		if isJSONNumber(num) {
			values = append(values, json.Number(num))
		}
		preds := []Predicate{
			Eq(field, nil), Eq(field, map[string]any{"j": 1}),
			Matches(field, pattern),
			AllFields(map[string]string{field: pattern, "command": `rm`}),
			AnyField(map[string]string{field: pattern, "command": `rm`}),
		}
		for _, v := range values {
			preds = append(preds, Gt(field, v), Ge(field, v), Lt(field, v), Le(field, v), Eq(field, v))
		}
		inputs := []any{json.RawMessage(data), string(data)}
		var decoded any
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if dec.Decode(&decoded) == nil {
			inputs = append(inputs, decoded)
		}
		var floats any
		if json.Unmarshal(data, &floats) == nil {
			inputs = append(inputs, floats)
		}
		for _, in := range inputs {
			for _, p := range preds {
				ok, err := p.Eval(in) // not through ShouldInterrupt: a panic must crash
				if err != nil && ok {
					t.Fatalf("%v returned true with error %v", p, err)
				}
				if err != nil && !ShouldInterrupt([]Rule{{Tool: "t", Match: p}}, "t", in) {
					t.Fatalf("%v failed but ShouldInterrupt is false", p)
				}
			}
			for _, v := range values {
				gt, e1 := Gt(field, v).Eval(in)
				lt, e2 := Lt(field, v).Eval(in)
				eq, e3 := Eq(field, v).Eval(in)
				ge, e4 := Ge(field, v).Eval(in)
				le, e5 := Le(field, v).Eval(in)
				if err := errors.Join(e1, e2, e3, e4, e5); err != nil {
					continue
				}
				n := 0
				for _, b := range []bool{gt, lt, eq} {
					if b {
						n++
					}
				}
				if n != 1 || ge != (gt || eq) || le != (lt || eq) {
					t.Fatalf("%s vs %v: gt=%v lt=%v eq=%v ge=%v le=%v", data, v, gt, lt, eq, ge, le)
				}
			}
			if m, ok := in.(map[string]any); ok {
				out := Interpret(json.RawMessage(data), m)
				switch out.Action {
				case ActionApprove, ActionEdit:
					if out.Arguments == nil && m != nil {
						t.Fatalf("Interpret(%s) = %+v without arguments", data, out)
					}
				case ActionDeny:
					if out.Arguments != nil {
						t.Fatalf("Interpret(%s) denies with arguments", data)
					}
				default:
					t.Fatalf("Interpret(%s) = unknown action %q", data, out.Action)
				}
			}
		}
	})
}
