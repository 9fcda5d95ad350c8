package interrupt

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"regexp/syntax"
	"strings"
	"testing"
)

// result is what a predicate should do: match, not match, or fail with an
// error wrapping want.
type result struct {
	match bool
	err   error
}

var (
	yes = result{match: true}
	no  = result{}
)

func fails(err error) result { return result{err: err} }

type predCase struct {
	name string
	pred Predicate
	args any
	want result
}

func runPredCases(t *testing.T, cases []predCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := tc.pred.Eval(tc.args)
			if tc.want.err != nil {
				if !errors.Is(err, tc.want.err) {
					t.Fatalf("%v.Eval(%s) = %v, %v; want error wrapping %v", tc.pred, show(tc.args), got, err, tc.want.err)
				}
				if got {
					t.Errorf("a failing predicate returned true")
				}
				if !ShouldInterrupt([]Rule{{Tool: "t", Match: tc.pred}}, "t", tc.args) {
					t.Errorf("ShouldInterrupt = false for a failing predicate; want true (fail closed)")
				}
				return
			}
			if err != nil || got != tc.want.match {
				t.Fatalf("%v.Eval(%s) = %v, %v; want %v, nil", tc.pred, show(tc.args), got, err, tc.want.match)
			}
			if ShouldInterrupt([]Rule{{Tool: "t", Match: tc.pred}}, "t", tc.args) != tc.want.match {
				t.Errorf("ShouldInterrupt disagrees with Eval")
			}
		})
	}
}

func show(v any) string {
	if b, ok := v.(json.RawMessage); ok {
		return string(b)
	}
	return fmt.Sprintf("%#v", v)
}

func j(s string) json.RawMessage { return json.RawMessage(s) }

const two53 = 1 << 53

func TestComparisons(t *testing.T) {
	t.Parallel()
	runPredCases(t, []predCase{
		// "A number value compares with number arguments."
		{"gt above", Gt("amount", 1000), j(`{"amount": 1500}`), yes},
		{"gt equal", Gt("amount", 1000), j(`{"amount": 1000}`), no},
		{"gt below", Gt("amount", 1000), j(`{"amount": 999.5}`), no},
		{"gt fraction above", Gt("amount", 1000), j(`{"amount": 1000.5}`), yes},
		{"ge equal", Ge("amount", 1000), j(`{"amount": 1000}`), yes},
		{"ge float literal", Ge("amount", 1000), j(`{"amount": 1000.0}`), yes},
		{"ge below", Ge("amount", 1000), j(`{"amount": 999}`), no},
		{"lt below", Lt("amount", 10), j(`{"amount": -3}`), yes},
		{"lt equal", Lt("amount", 10), j(`{"amount": 10}`), no},
		{"le equal", Le("amount", 10), j(`{"amount": 1e1}`), yes},
		{"le above", Le("amount", 10), j(`{"amount": 10.000001}`), no},
		{"eq int", Eq("n", 3), j(`{"n": 3}`), yes},
		{"eq other", Eq("n", 3), j(`{"n": 4}`), no},
		{"1 equals 1.0", Eq("n", 1), j(`{"n": 1.0}`), yes},
		{"1.0 equals 1", Eq("n", 1.0), j(`{"n": 1}`), yes},
		{"0 equals -0.0", Eq("n", 0), j(`{"n": -0.0}`), yes},
		{"float value", Gt("ratio", 0.5), j(`{"ratio": 0.75}`), yes},
		{"float eq decimal literal", Eq("ratio", 0.1), j(`{"ratio": 0.1}`), yes},
		{"float32 value", Eq("ratio", float32(0.5)), j(`{"ratio": 0.5}`), yes},
		{"int8 value", Lt("n", int8(-5)), j(`{"n": -6}`), yes},
		{"uint value", Gt("n", uint(7)), j(`{"n": 8}`), yes},
		{"json.Number value", Eq("n", json.Number("12")), j(`{"n": 12.0}`), yes},
		{"json.Number float value", Lt("n", json.Number("2.5")), j(`{"n": 2}`), yes},
		{"map float64 argument", Gt("amount", 1000), map[string]any{"amount": 1000.5}, yes},
		{"map int argument", Eq("amount", 1000.0), map[string]any{"amount": 1000}, yes},

		// "Large integers compare exactly, not through float64 rounding."
		{"2^53+1 > 2^53", Gt("n", two53), j(`{"n": 9007199254740993}`), yes},
		{"2^53+1 != 2^53", Eq("n", two53), j(`{"n": 9007199254740993}`), no},
		{"2^53 == 2^53", Eq("n", two53), j(`{"n": 9007199254740992}`), yes},
		{"2^53+1 value", Gt("n", two53+1), j(`{"n": 9007199254740992}`), no},
		{"float 2^53 < int 2^53+1", Lt("n", two53+1), j(`{"n": 9007199254740992.0}`), yes},
		// A literal with a fraction is a float, as json.loads reads it.
		{"float literal rounds like Python", Eq("n", two53), j(`{"n": 9007199254740993.0}`), yes},
		{"2^60+4 > float(2^60)", Gt("n", float64(1<<60)), j(`{"n": 1152921504606846980}`), yes},
		{"uint64 max", Eq("n", uint64(math.MaxUint64)), j(`{"n": 18446744073709551615}`), yes},
		{"uint64 max-1", Eq("n", uint64(math.MaxUint64)), j(`{"n": 18446744073709551614}`), no},
		{"beyond uint64", Gt("n", uint64(math.MaxUint64)), j(`{"n": 18446744073709551616}`), yes},
		{"big.Int value", Lt("n", new(big.Int).Exp(big.NewInt(10), big.NewInt(30), nil)), j(`{"n": 999999999999999999999999999999}`), yes},
		{"big.Int value equal", Eq("n", new(big.Int).Exp(big.NewInt(10), big.NewInt(30), nil)), j(`{"n": 1000000000000000000000000000000}`), yes},
		{"big.Rat value", Gt("n", big.NewRat(1, 3)), j(`{"n": 0.3333333333333333}`), no},
		{"big.Float value", Eq("n", big.NewFloat(2.5)), j(`{"n": 2.5}`), yes},
		{"json.Number big value", Eq("n", json.Number("123456789012345678901234567890")), j(`{"n": 123456789012345678901234567890}`), yes},
		{"negative big", Lt("n", json.Number("-123456789012345678901234567890")), j(`{"n": -123456789012345678901234567891}`), yes},

		// Infinities compare like Python floats.
		{"1e400 is +inf", Gt("n", math.MaxFloat64), j(`{"n": 1e400}`), yes},
		{"-1e400 is -inf", Lt("n", -math.MaxFloat64), j(`{"n": -1e400}`), yes},
		{"inf == inf", Eq("n", math.Inf(1)), map[string]any{"n": math.Inf(1)}, yes},
		{"inf value", Lt("n", math.Inf(1)), j(`{"n": 123456789012345678901234567890}`), yes},

		// "A NaN argument is an error."
		{"NaN argument", Gt("n", 1), map[string]any{"n": math.NaN()}, fails(ErrNaN)},
		{"NaN argument eq", Eq("n", 1), map[string]any{"n": math.NaN()}, fails(ErrInvalidValue)},
		{"NaN float32 argument", Lt("n", 1), map[string]any{"n": float32(math.NaN())}, fails(ErrNaN)},
		{"NaN value", Gt("n", math.NaN()), j(`{"n": 1}`), fails(ErrInvalidRule)},
		{"NaN value is NaN", Gt("n", math.NaN()), j(`{"n": 1}`), fails(ErrNaN)},
		{"too long integer", Gt("n", 1), j(`{"n": ` + strings.Repeat("9", MaxIntDigits+1) + `}`), fails(ErrInvalidValue)},
		{"longest integer", Gt("n", 1), j(`{"n": ` + strings.Repeat("9", MaxIntDigits) + `}`), yes},

		// "A number value compares with number arguments, not booleans."
		{"true is not 1", Eq("n", 1), j(`{"n": true}`), fails(ErrWrongType)},
		{"false is not 0", Eq("n", 0), j(`{"n": false}`), fails(ErrWrongType)},
		{"bool not ordered against number", Gt("n", 0), j(`{"n": true}`), fails(ErrWrongType)},
		{"Go bool argument", Lt("n", 5), map[string]any{"n": true}, fails(ErrWrongType)},
		{"string is not a number", Gt("amount", 1000), j(`{"amount": "1500"}`), fails(ErrWrongType)},
		{"null is not a number", Gt("amount", 1000), j(`{"amount": null}`), fails(ErrWrongType)},
		{"list is not a number", Gt("amount", 1000), j(`{"amount": [1500]}`), fails(ErrWrongType)},
		{"object is not a number", Eq("amount", 1000), j(`{"amount": {"v": 1000}}`), fails(ErrWrongType)},

		// "Any other value needs an argument of its own type."
		{"string gt", Gt("name", "m"), j(`{"name": "n"}`), yes},
		{"string gt lexicographic", Gt("name", "m"), j(`{"name": "abc"}`), no},
		{"string prefix shorter", Lt("name", "abc"), j(`{"name": "ab"}`), yes},
		{"string code point order", Gt("name", "z"), j(`{"name": "é"}`), yes},
		{"string eq", Eq("env", "prod"), j(`{"env": "prod"}`), yes},
		{"string eq case", Eq("env", "prod"), j(`{"env": "PROD"}`), no},
		{"string vs number", Eq("env", "1"), j(`{"env": 1}`), fails(ErrWrongType)},
		{"string vs bool", Eq("env", "true"), j(`{"env": true}`), fails(ErrWrongType)},
		{"bool eq", Eq("force", true), j(`{"force": true}`), yes},
		{"bool eq false", Eq("force", true), j(`{"force": false}`), no},
		{"bool ordered false<true", Gt("force", false), j(`{"force": true}`), yes},
		{"bool ge", Ge("force", true), j(`{"force": false}`), no},
		{"bool vs number 1", Eq("force", true), j(`{"force": 1}`), fails(ErrWrongType)},
		{"bool vs string", Eq("force", true), j(`{"force": "true"}`), fails(ErrWrongType)},
		{"nil eq null", Eq("x", nil), j(`{"x": null}`), yes},
		{"nil vs 0", Eq("x", nil), j(`{"x": 0}`), fails(ErrWrongType)},
		{"nil has no order", Gt("x", nil), j(`{"x": null}`), fails(ErrInvalidRule)},
		{"list eq", Eq("tags", []string{"a", "b"}), j(`{"tags": ["a", "b"]}`), yes},
		{"list eq shorter", Eq("tags", []string{"a", "b"}), j(`{"tags": ["a"]}`), no},
		{"list eq numbers", Eq("v", []any{1, 2.5}), j(`{"v": [1.0, 2.5]}`), yes},
		{"list gt", Gt("v", []int{1, 2}), j(`{"v": [1, 3]}`), yes},
		{"list gt prefix", Gt("v", []int{1, 2}), j(`{"v": [1, 2, 0]}`), yes},
		{"list lt", Lt("v", []int{1, 2}), j(`{"v": [1]}`), yes},
		{"list element kinds", Gt("v", []int{1, 2}), j(`{"v": [1, "x"]}`), fails(ErrWrongType)},
		{"list vs string", Eq("v", []string{"a"}), j(`{"v": "a"}`), fails(ErrWrongType)},
		{"object eq", Eq("o", map[string]any{"a": 1, "b": "x"}), j(`{"o": {"b": "x", "a": 1.0}}`), yes},
		{"object eq differs", Eq("o", map[string]any{"a": 1}), j(`{"o": {"a": 2}}`), no},
		{"object eq extra key", Eq("o", map[string]any{"a": 1}), j(`{"o": {"a": 1, "b": 2}}`), no},
		{"object has no order", Lt("o", map[string]any{"a": 1}), j(`{"o": {"a": 1}}`), fails(ErrInvalidRule)},
		{"unsupported value", Eq("c", complex(1, 2)), j(`{"c": 1}`), fails(ErrInvalidRule)},
		{"invalid json.Number value", Eq("n", json.Number("1x")), j(`{"n": 1}`), fails(ErrInvalidRule)},
		{"NaN json.Number value", Eq("n", json.Number("NaN")), j(`{"n": 1}`), fails(ErrInvalidRule)},

		// "A missing field is an error."
		{"missing field", Gt("amount", 1000), j(`{"total": 1500}`), fails(ErrMissingField)},
		{"missing in empty object", Eq("x", nil), j(`{}`), fails(ErrMissingField)},
		{"missing in map", Lt("amount", 1), map[string]any{}, fails(ErrMissingField)},
		{"field names are exact", Gt("amount", 1000), j(`{"Amount": 1500}`), fails(ErrMissingField)},

		// Arguments that are not an object.
		{"json array", Gt("amount", 1), j(`[1, 2]`), fails(ErrWrongType)},
		{"json string", Gt("amount", 1), j(`"amount"`), fails(ErrWrongType)},
		{"json null", Gt("amount", 1), j(`null`), fails(ErrWrongType)},
		{"invalid json", Gt("amount", 1), j(`{"amount": 1`), fails(ErrWrongType)},
		{"trailing json", Gt("amount", 1), j(`{"amount": 2} {}`), fails(ErrWrongType)},
		{"empty json", Gt("amount", 1), j(``), fails(ErrWrongType)},
		{"nil arguments", Gt("amount", 1), nil, fails(ErrWrongType)},
		{"nil map", Gt("amount", 1), map[string]any(nil), fails(ErrWrongType)},
		{"int arguments", Gt("amount", 1), 42, fails(ErrWrongType)},
		{"slice arguments", Gt("amount", 1), []any{1}, fails(ErrWrongType)},
		{"int-keyed map", Gt("amount", 1), map[int]int{1: 1}, fails(ErrWrongType)},
		{"[]byte JSON", Gt("amount", 1), []byte(`{"amount": 2}`), yes},
		{"string JSON", Gt("amount", 1), `{"amount": 2}`, yes},
		{"string not JSON", Gt("amount", 1), `amount=2`, fails(ErrWrongType)},
		{"typed map", Gt("amount", 1), map[string]int{"amount": 2}, yes},
		{"named-key map", Gt("amount", 1), map[name]float64{"amount": 0.5}, no},
	})
}

type name string

type account struct {
	Account string `json:"account"`
	Region  string
}

type transferArgs struct {
	Amount   int64   `json:"amount"`
	Currency string  `json:"currency,omitempty"`
	Memo     *string `json:"memo"`
	Limit    *int    `json:"limit,omitempty"`
	Secret   string  `json:"-"`
	//lint:ignore SA5008 encoding/json names this field "-"; the test checks that.
	Dash     string `json:"-,"`
	Big      uint64 `json:"big,string"`
	Untagged float64
	Tags     []string    `json:"tags"`
	Raw      []byte      `json:"raw"`
	Nested   *account    `json:"nested"`
	Any      any         `json:"any"`
	Number   json.Number `json:"number"`
	internal int
	account
}

type marshalArgs struct{ v int }

func (m marshalArgs) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]int{"value": m.v})
}

func TestTypedArguments(t *testing.T) {
	t.Parallel()
	seven := 7
	memo := "rent"
	args := transferArgs{
		Amount:   1500,
		Memo:     &memo,
		Limit:    &seven,
		Secret:   "s3cret",
		Dash:     "dash",
		Big:      math.MaxUint64,
		Untagged: 2.5,
		Tags:     []string{"a", "b"},
		Raw:      []byte("hi"),
		Nested:   &account{Account: "acc-1"},
		Any:      json.Number("9007199254740993"),
		Number:   "1e3",
		internal: 3,
		account:  account{Account: "acc-0", Region: "eu"},
	}
	runPredCases(t, []predCase{
		{"struct field by JSON name", Gt("amount", 1000), args, yes},
		{"pointer to struct", Gt("amount", 1000), &args, yes},
		{"pointer to pointer", Gt("amount", 1000), func() any { p := &args; return &p }(), yes},
		{"omitempty field present at zero", Eq("currency", ""), args, yes},
		{"pointer field dereferenced", Eq("memo", "rent"), args, yes},
		{"pointer field matches", Matches("memo", "^re"), &args, yes},
		{"omitempty pointer field", Ge("limit", 7), args, yes},
		{"nil pointer is null", Eq("limit", nil), transferArgs{}, yes},
		{"nil pointer is not a string", Matches("memo", "x"), transferArgs{}, fails(ErrWrongType)},
		{"dash tag drops the field", Eq("Secret", "s3cret"), args, fails(ErrMissingField)},
		{"dash-comma tag names the field -", Eq("-", "dash"), args, yes},
		{"string option keeps the number", Eq("big", uint64(math.MaxUint64)), args, yes},
		{"untagged field by Go name", Eq("Untagged", 2.5), args, yes},
		{"Go name of a tagged field is not a name", Eq("Amount", 1500), args, fails(ErrMissingField)},
		{"unexported field", Eq("internal", 3), args, fails(ErrMissingField)},
		{"slice field", Eq("tags", []string{"a", "b"}), args, yes},
		{"byte slice is base64 like JSON", Eq("raw", "aGk="), args, yes},
		{"struct field as object", Eq("nested", map[string]any{"account": "acc-1", "Region": ""}), args, yes},
		{"embedded shallower tag loses to outer", Eq("account", "acc-0"), args, yes},
		{"embedded promoted field", Eq("Region", "eu"), args, yes},
		{"interface field", Gt("any", two53), args, yes},
		{"json.Number field", Eq("number", 1000), args, yes},
		{"MarshalJSON arguments", Eq("value", 4), marshalArgs{4}, yes},
		{"MarshalJSON hides fields", Eq("v", 4), marshalArgs{4}, fails(ErrMissingField)},
		{"nil struct pointer", Gt("amount", 1), (*transferArgs)(nil), fails(ErrWrongType)},
		{"func field", Eq("f", 1), struct{ F func() }{}, fails(ErrMissingField)},
		{"func field value", Eq("F", 1), struct{ F func() }{}, fails(ErrWrongType)},
	})
}

type (
	embA struct{ X int }
	embB struct{ X int }
	embC struct {
		X int `json:"X"`
	}
	ambiguous struct {
		embA
		embB
	}
	taggedWins struct {
		embA
		embC
	}
	nilEmbedded struct {
		*embA
		Y int
	}
)

func TestEmbeddedFields(t *testing.T) {
	t.Parallel()
	runPredCases(t, []predCase{
		{"ambiguous name dropped", Eq("X", 1), ambiguous{embA{1}, embB{1}}, fails(ErrMissingField)},
		{"tagged field wins a tie", Eq("X", 2), taggedWins{embA{1}, embC{2}}, yes},
		{"nil embedded pointer", Eq("X", 0), nilEmbedded{Y: 1}, fails(ErrMissingField)},
		{"set embedded pointer", Eq("X", 3), nilEmbedded{embA: &embA{3}}, yes},
	})
}

func TestMatches(t *testing.T) {
	t.Parallel()
	runPredCases(t, []predCase{
		{"unanchored search", Matches("command", `rm -rf`), j(`{"command": "sudo rm -rf /"}`), yes},
		{"no match", Matches("command", `rm -rf`), j(`{"command": "ls -la"}`), no},
		{"anchored", Matches("command", `^ls\b`), j(`{"command": "ls -la"}`), yes},
		{"anchored elsewhere", Matches("command", `^ls\b`), j(`{"command": "echo; ls"}`), no},
		{"RE2 $ is end of text", Matches("command", `^rm$`), j(`{"command": "rm\n"}`), no},
		{"empty pattern", Matches("command", ``), j(`{"command": ""}`), yes},
		{"unicode", Matches("name", `\p{Greek}`), j(`{"name": "λ"}`), yes},
		{"typed string", Matches("k", `^a`), map[string]name{"k": "abc"}, yes},
		{"missing", Matches("command", `x`), j(`{}`), fails(ErrMissingField)},
		{"number", Matches("command", `1`), j(`{"command": 1}`), fails(ErrWrongType)},
		{"null", Matches("command", `x`), j(`{"command": null}`), fails(ErrWrongType)},
		{"bool", Matches("command", `true`), j(`{"command": true}`), fails(ErrWrongType)},
		{"list", Matches("command", `x`), j(`{"command": ["x"]}`), fails(ErrWrongType)},
		{"bad pattern", Matches("command", `(`), j(`{"command": "("}`), fails(ErrInvalidRule)},
		{"backreference is not RE2", Matches("command", `(a)\1`), j(`{"command": "aa"}`), fails(ErrInvalidRule)},
		{"lookahead is not RE2", Matches("command", `a(?=b)`), j(`{"command": "ab"}`), fails(ErrInvalidRule)},
		{"not an object", Matches("command", `x`), j(`"x"`), fails(ErrWrongType)},
	})
}

func TestMatchesBadPatternError(t *testing.T) {
	t.Parallel()
	p := Matches("command", `(`)
	_, err := p.Eval(j(`{"command": "x"}`))
	var se *syntax.Error
	if !errors.As(err, &se) {
		t.Fatalf("err = %v; want a *syntax.Error inside", err)
	}
	if p.(interface{ Err() error }).Err() == nil {
		t.Fatal("Err() = nil for a bad pattern")
	}
	if Matches("command", `x`).(interface{ Err() error }).Err() != nil {
		t.Fatal("Err() != nil for a good pattern")
	}
}

func TestFields(t *testing.T) {
	t.Parallel()
	both := map[string]string{"command": `^rm\b`, "path": `^/etc`}
	runPredCases(t, []predCase{
		{"all match", AllFields(both), j(`{"command": "rm x", "path": "/etc/passwd"}`), yes},
		{"all one fails", AllFields(both), j(`{"command": "rm x", "path": "/tmp"}`), no},
		{"all none", AllFields(both), j(`{"command": "ls", "path": "/tmp"}`), no},
		{"any one", AnyField(both), j(`{"command": "ls", "path": "/etc"}`), yes},
		{"any both", AnyField(both), j(`{"command": "rm", "path": "/etc"}`), yes},
		{"any none", AnyField(both), j(`{"command": "ls", "path": "/tmp"}`), no},
		{"single pattern", AllFields(map[string]string{"x": "a"}), j(`{"x": "cat"}`), yes},
		// "Both check every named argument": a known outcome does not stop the check.
		{"any matched but another missing", AnyField(both), j(`{"command": "rm -rf /"}`), fails(ErrMissingField)},
		{"any matched but another not a string", AnyField(both), j(`{"command": "rm", "path": 3}`), fails(ErrWrongType)},
		{"all failed early but another missing", AllFields(both), j(`{"path": "/tmp"}`), fails(ErrMissingField)},
		{"all not a string", AllFields(both), j(`{"command": null, "path": "/etc"}`), fails(ErrWrongType)},
		{"all missing", AllFields(both), j(`{}`), fails(ErrMissingField)},
		{"not an object", AnyField(both), j(`[]`), fails(ErrWrongType)},
		{"typed struct", AllFields(map[string]string{"memo": "rent", "account": "acc"}), transferArgs{Memo: new("rent"), account: account{Account: "acc-1"}}, yes},
		// "Both need at least one pattern."
		{"all no pattern", AllFields(nil), j(`{"x": "y"}`), fails(ErrInvalidRule)},
		{"any no pattern", AnyField(map[string]string{}), j(`{"x": "y"}`), fails(ErrInvalidRule)},
		{"bad pattern", AnyField(map[string]string{"x": "[", "y": "ok"}), j(`{"x": "[", "y": "ok"}`), fails(ErrInvalidRule)},
	})
}

func TestFieldsJoinsEveryError(t *testing.T) {
	t.Parallel()
	_, err := AllFields(map[string]string{"b": "x", "a": "x"}).Eval(j(`{}`))
	msg := err.Error()
	if !strings.Contains(msg, `"a"`) || !strings.Contains(msg, `"b"`) || strings.Index(msg, `argument "a"`) > strings.Index(msg, `argument "b"`) {
		t.Fatalf("error = %q; want both arguments, in order of name", msg)
	}
	err = AnyField(map[string]string{"b": "(", "a": "["}).(interface{ Err() error }).Err()
	if err == nil || !strings.Contains(err.Error(), `pattern for "a"`) || !strings.Contains(err.Error(), `pattern for "b"`) {
		t.Fatalf("Err() = %v; want both bad patterns", err)
	}
}

func TestPredicateStringAndErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pred Predicate
		desc string
	}{
		{Gt("amount", 1000), `Gt("amount", 1000)`},
		{Eq("env", "prod"), `Eq("env", "prod")`},
		{Le("n", json.Number("2.5")), `Le("n", 2.5)`},
		{Eq("x", nil), `Eq("x", nil)`},
		{Matches("command", `rm\s`), `Matches("command", "rm\\s")`},
		{AllFields(map[string]string{"b": "2", "a": "1"}), `AllFields({"a": "1", "b": "2"})`},
		{AnyField(nil), `AnyField({})`},
	} {
		if got := tc.pred.(interface{ String() string }).String(); got != tc.desc {
			t.Errorf("String() = %s; want %s", got, tc.desc)
		}
	}
	_, err := Gt("amount", 1000).Eval(j(`{}`))
	if got, want := err.Error(), `interrupt: Gt("amount", 1000): argument "amount": missing argument`; got != want {
		t.Errorf("error = %q; want %q", got, want)
	}
	_, err = Gt("amount", 1000).Eval(j(`{"amount": true}`))
	if got, want := err.Error(), `interrupt: Gt("amount", 1000): argument "amount": wrong type: a bool does not compare with a number`; got != want {
		t.Errorf("error = %q; want %q", got, want)
	}
}

func TestNormalizeCycle(t *testing.T) {
	t.Parallel()
	type node struct {
		Next *node `json:"next"`
	}
	n := &node{}
	n.Next = n
	_, err := Eq("next", map[string]any{}).Eval(n)
	if !errors.Is(err, ErrWrongType) {
		t.Fatalf("err = %v; want ErrWrongType for a cycle", err)
	}
	m := map[string]any{}
	m["self"] = m
	if _, err := Eq("self", nil).Eval(m); !errors.Is(err, ErrWrongType) {
		t.Fatalf("err = %v; want ErrWrongType for a cyclic map", err)
	}
}

func TestIsJSONNumber(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{
		"0": true, "-0": true, "12": true, "1.5": true, "1e5": true, "1E+5": true, "-1.5e-3": true,
		"": false, "-": false, "01": false, "1.": false, ".5": false, "1e": false, "+1": false,
		"NaN": false, "Inf": false, "0x10": false, "1_000": false, " 1": false,
	} {
		if got := isJSONNumber(s); got != want {
			t.Errorf("isJSONNumber(%q) = %v", s, got)
		}
	}
}
