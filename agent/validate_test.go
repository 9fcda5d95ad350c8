package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

// How the hand-written baseline (validate_baseline_test.go) did on a case,
// against the problems the santhosh-tekuri validator gives.
const (
	baseSame     = "same"     // the same problems, places and words
	basePlaces   = "places"   // every problem at the right place, in other words
	baseOne      = "one"      // one problem without a place: jsonschema-go's first error
	baseMissed   = "missed"   // some problems missing, the ones given are right
	baseWrong    = "wrong"    // a problem at a wrong place, or one that is not a problem
	baseAccepted = "accepted" // the invalid arguments passed
	baseRejects  = "rejects"  // the arguments that fit did not pass
)

type coverageCase struct {
	name   string
	schema string
	ok     string // arguments that fit
	bad    string // arguments that do not
	want   []Problem
	// baseline records how the hand-written validator did on bad.
	baseline string
}

var coverageCases = []coverageCase{
	{"type", `{"type":"object","properties":{"n":{"type":"integer"},"s":{"type":"string"},"f":{"type":"number"}}}`,
		`{"n":1,"s":"x","f":1.5}`, `{"n":"x","s":1,"f":true}`,
		[]Problem{{"/f", "want number, got boolean"}, {"/n", "want integer, got string"}, {"/s", "want string, got integer"}}, baseSame},
	{"required", `{"type":"object","required":["a","b"],"properties":{"a":{},"b":{}}}`,
		`{"a":1,"b":2}`, `{}`,
		[]Problem{{"/a", "required"}, {"/b", "required"}}, baseSame},
	{"additionalProperties false", `{"type":"object","properties":{"a":{}},"additionalProperties":false}`,
		`{"a":1}`, `{"a":1,"x":2,"y":3}`,
		[]Problem{{"/x", "unknown argument (allowed: a)"}, {"/y", "unknown argument (allowed: a)"}}, baseSame},
	{"additionalProperties schema", `{"type":"object","additionalProperties":{"type":"string"}}`,
		`{"a":"x"}`, `{"a":1,"b":"ok","c":null}`,
		[]Problem{{"/a", "want string, got integer"}, {"/c", "want string, got null"}}, baseSame},
	{"enum", `{"type":"object","properties":{"m":{"enum":["r","w"]}}}`,
		`{"m":"r"}`, `{"m":"x"}`,
		[]Problem{{"/m", `must be one of ["r","w"]`}}, baseSame},
	{"const", `{"type":"object","properties":{"v":{"const":2}}}`,
		`{"v":2.0}`, `{"v":3}`,
		[]Problem{{"/v", "must equal 2"}}, baseSame},
	{"minimum, maximum, exclusive, multipleOf", `{"type":"object","properties":{"a":{"type":"integer","minimum":1,"maximum":5},"b":{"type":"number","exclusiveMaximum":1},"c":{"type":"number","multipleOf":0.5}}}`,
		`{"a":5,"b":0.5,"c":1.5}`, `{"a":9,"b":1,"c":0.3}`,
		[]Problem{{"/a", "must be <= 5"}, {"/b", "must be < 1"}, {"/c", "must be a multiple of 0.5"}}, baseMissed}, // no multipleOf, and jsonschema-go is not asked once the walk found a problem
	{"minLength, maxLength", `{"type":"object","properties":{"a":{"type":"string","minLength":3},"b":{"type":"string","maxLength":2}}}`,
		`{"a":"xyz","b":"é"}`, `{"a":"x","b":"xyz"}`,
		[]Problem{{"/a", "must be at least 3 characters long (it has 1)"}, {"/b", "must be at most 2 characters long (it has 3)"}}, basePlaces},
	{"pattern", `{"type":"object","properties":{"id":{"type":"string","pattern":"^[a-z]+$"}}}`,
		`{"id":"abc"}`, `{"id":"A1"}`,
		[]Problem{{"/id", `must match the regular expression "^[a-z]+$"`}}, basePlaces},
	{"items", `{"type":"object","properties":{"xs":{"type":"array","items":{"type":"integer"}}}}`,
		`{"xs":[1,2]}`, `{"xs":[1,"a",3,"b"]}`,
		[]Problem{{"/xs/1", "want integer, got string"}, {"/xs/3", "want integer, got string"}}, baseSame},
	{"prefixItems, items false", `{"type":"object","properties":{"p":{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false}}}`,
		`{"p":["a",1]}`, `{"p":[1,"a",true]}`,
		[]Problem{{"/p/0", "want string, got integer"}, {"/p/1", "want integer, got string"}, {"/p/2", "not allowed: at most 2 items are allowed"}}, baseRejects}, // items applied from index 0: ["a",1] gets "not allowed" twice
	{"prefixItems, items schema", `{"type":"object","properties":{"p":{"type":"array","prefixItems":[{"type":"string"}],"items":{"type":"integer","minimum":0}}}}`,
		`{"p":["a",1,2]}`, `{"p":["a",1,-2,"x"]}`,
		[]Problem{{"/p/2", "must be >= 0"}, {"/p/3", "want integer, got string"}}, baseRejects},
	{"minItems, maxItems", `{"type":"object","properties":{"xs":{"type":"array","minItems":2,"maxItems":3},"ys":{"type":"array","maxItems":1}}}`,
		`{"xs":[1,2]}`, `{"xs":[1],"ys":[1,2]}`,
		[]Problem{{"/xs", "must have at least 2 items (it has 1)"}, {"/ys", "must have at most 1 item (it has 2)"}}, basePlaces},
	{"uniqueItems", `{"type":"object","properties":{"xs":{"type":"array","uniqueItems":true}}}`,
		`{"xs":[1,2,"1"]}`, `{"xs":[1,2,1.0]}`,
		[]Problem{{"/xs/2", "duplicate of item 0; items must be unique"}}, baseOne},
	{"$ref, $defs", `{"type":"object","$defs":{"port":{"type":"integer","minimum":1,"maximum":65535}},"properties":{"from":{"$ref":"#/$defs/port"},"to":{"$ref":"#/$defs/port"}}}`,
		`{"from":1,"to":65535}`, `{"from":0,"to":"x"}`,
		[]Problem{{"/from", "must be >= 1"}, {"/to", "want integer, got string"}}, baseOne},
	{"$ref, recursive", `{"type":"object","$defs":{"node":{"type":"object","properties":{"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["name"]}},"properties":{"tree":{"$ref":"#/$defs/node"}}}`,
		`{"tree":{"name":"a","children":[{"name":"b"}]}}`, `{"tree":{"name":"a","children":[{"name":"b"},{"children":[{"name":1}]}]}}`,
		[]Problem{{"/tree/children/1/children/0/name", "want string, got integer"}, {"/tree/children/1/name", "required"}}, baseOne},
	{"oneOf, tagged union", `{"type":"object","properties":{"op":{"oneOf":[{"type":"object","properties":{"kind":{"const":"read"},"path":{"type":"string"}},"required":["kind","path"]},{"type":"object","properties":{"kind":{"const":"write"},"path":{"type":"string"},"content":{"type":"string"}},"required":["kind","path","content"]}]}}}`,
		`{"op":{"kind":"write","path":"f","content":""}}`, `{"op":{"kind":"write","path":"f"}}`,
		[]Problem{{"/op/content", "required"}}, baseOne},
	{"oneOf, unknown tag", `{"type":"object","properties":{"op":{"oneOf":[{"type":"object","properties":{"kind":{"const":"read"}},"required":["kind"]},{"type":"object","properties":{"kind":{"const":"write"}},"required":["kind"]}]}}}`,
		`{"op":{"kind":"read"}}`, `{"op":{"kind":"delete"}}`,
		[]Problem{{"/op/kind", `must be one of ["read","write"]`}}, baseOne},
	{"oneOf, types", `{"type":"object","properties":{"t":{"oneOf":[{"type":"string"},{"type":"integer"}]}}}`,
		`{"t":"x"}`, `{"t":true}`,
		[]Problem{{"/t", "want string or integer, got boolean"}}, baseOne},
	{"oneOf, const or type", `{"type":"object","properties":{"n":{"oneOf":[{"const":"auto"},{"type":"integer","minimum":1}]}}}`,
		`{"n":"auto"}`, `{"n":"x"}`,
		[]Problem{{"/n", `must be "auto" or of type integer, got string`}}, baseOne},
	{"oneOf, two match", `{"type":"object","properties":{"t":{"oneOf":[{"type":"integer"},{"minimum":0}]}}}`,
		`{"t":-1}`, `{"t":5}`,
		[]Problem{{"/t", "matches alternatives 1 and 2 of the schema's oneOf; it must match exactly one"}}, baseOne},
	{"oneOf, no alternative meant", `{"type":"object","properties":{"t":{"oneOf":[{"type":"object","required":["a"]},{"type":"object","required":["b"]}]}}}`,
		`{"t":{"a":1}}`, `{"t":{}}`,
		[]Problem{{"/t", "must match exactly one of the schema's alternatives: alternative 1: /a required; alternative 2: /b required"}}, baseOne},
	{"anyOf", `{"type":"object","properties":{"t":{"anyOf":[{"type":"string","minLength":5},{"type":"integer"}]}}}`,
		`{"t":3}`, `{"t":"ab"}`,
		[]Problem{{"/t", "must be at least 5 characters long (it has 2)"}}, baseOne},
	{"allOf", `{"type":"object","allOf":[{"required":["a"]},{"required":["b"]}]}`,
		`{"a":1,"b":2}`, `{}`,
		[]Problem{{"/a", "required"}, {"/b", "required"}}, baseOne},
	{"not, together", `{"type":"object","properties":{"a":{},"b":{}},"not":{"required":["a","b"]}}`,
		`{"a":1}`, `{"a":1,"b":2}`,
		[]Problem{{"", `"a", "b" cannot all be given together`}}, baseOne},
	{"not, schema", `{"type":"object","properties":{"cmd":{"type":"string","not":{"pattern":"rm -rf"}}}}`,
		`{"cmd":"ls"}`, `{"cmd":"rm -rf /"}`,
		[]Problem{{"/cmd", `must not match {"pattern":"rm -rf"}`}}, baseOne},
	{"if, then, else", `{"type":"object","properties":{"mode":{"type":"string"},"file":{"type":"string"},"text":{"type":"string"}},"if":{"properties":{"mode":{"const":"file"}}},"then":{"required":["file"]},"else":{"required":["text"]}}`,
		`{"mode":"file","file":"a"}`, `{"mode":"file"}`,
		[]Problem{{"/file", "required"}}, baseOne},
	{"format", `{"type":"object","properties":{"at":{"type":"string","format":"date-time"},"u":{"type":"string","format":"email"},"id":{"type":"string","format":"uuid"}}}`,
		`{"at":"2025-01-31T14:05:00Z","u":"ada@example.com","id":"123e4567-e89b-12d3-a456-426614174000"}`, `{"at":"yesterday","u":"nope","id":"x"}`,
		[]Problem{
			{"/at", `must be a date and time in RFC 3339 form, such as "2025-01-31T14:05:00Z" (less than 20 characters long)`},
			{"/id", `must be a UUID, such as "123e4567-e89b-12d3-a456-426614174000" (must have 5 elements)`},
			{"/u", `must be an email address, such as "ada@example.com" (missing @)`}}, baseAccepted}, // jsonschema-go does not assert formats
	{"dependentRequired", `{"type":"object","dependentRequired":{"user":["password","host"]}}`,
		`{"user":"a","password":"b","host":"h"}`, `{"user":"a"}`,
		[]Problem{{"/host", `required when "user" is given`}, {"/password", `required when "user" is given`}}, baseOne},
	{"propertyNames", `{"type":"object","additionalProperties":{"type":"string"},"propertyNames":{"pattern":"^[A-Z_]+$"}}`,
		`{"PATH":"x"}`, `{"path":"x"}`,
		[]Problem{{"/path", `the name "path" is not allowed: must match the regular expression "^[A-Z_]+$"`}}, baseOne},
	{"unevaluatedProperties", `{"type":"object","allOf":[{"properties":{"a":{}}}],"unevaluatedProperties":false}`,
		`{"a":1}`, `{"a":1,"b":2}`,
		[]Problem{{"/b", "unknown argument"}}, baseOne},
	{"nested", `{"type":"object","properties":{"env":{"type":"object","additionalProperties":{"type":"string"}},"cfg":{"type":"object","additionalProperties":false,"properties":{"depth":{"type":"object","properties":{"n":{"type":"integer","minimum":0}},"required":["n","m"]}}}}}`,
		`{"env":{"A":"1"},"cfg":{"depth":{"n":0,"m":1}}}`, `{"env":{"A":1},"cfg":{"depth":{"n":-1},"x":1}}`,
		[]Problem{{"/cfg/depth/m", "required"}, {"/cfg/depth/n", "must be >= 0"}, {"/cfg/x", "unknown property (allowed: depth)"}, {"/env/A", "want string, got integer"}}, basePlaces},
	{"names to escape", `{"type":"object","properties":{"a/b":{"type":"string"},"c~d":{"type":"string"}},"required":["e/f"]}`,
		`{"e/f":1}`, `{"a/b":1,"c~d":2}`,
		[]Problem{{"/a~1b", "want string, got integer"}, {"/c~0d", "want string, got integer"}, {"/e~1f", "required"}}, baseSame},
	{"bash tool, many at once", `{"type":"object","properties":{"cmd":{"type":"string","minLength":1},"cwd":{"type":"string"},"timeout_ms":{"type":"integer","minimum":1},"env":{"type":"object","additionalProperties":{"type":"string"}}},"required":["cmd","cwd"],"additionalProperties":false}`,
		`{"cmd":"ls","cwd":"/"}`, `{"cmd":"","timeout_ms":1.5,"env":{"A":true},"x":1}`,
		[]Problem{{"/cmd", "must be at least 1 character long (it has 0)"}, {"/cwd", "required"}, {"/env/A", "want string, got boolean"}, {"/timeout_ms", "want integer, got number"}, {"/x", "unknown argument (allowed: cmd, cwd, env, timeout_ms)"}}, basePlaces},
}

// TestValidateCoverage checks every problem the validator reports, with
// its place and words, for the JSON Schema features tools use, and that
// arguments that fit pass; it also checks what the hand-written baseline
// reported, as recorded in each case (-v prints the comparison).
func TestValidateCoverage(t *testing.T) {
	t.Parallel()
	for _, c := range coverageCases {
		t.Run(c.name, func(t *testing.T) {
			tool := NewRawTool("t", "", func(context.Context, map[string]any) (ToolResult, error) { return ToolResult{}, nil }, &ToolOptions{Schema: googleSchema(t, c.schema)})
			if _, err := tool.Validate(json.RawMessage(c.ok)); err != nil {
				t.Errorf("%s: %v", c.ok, err)
			}
			got := problemsOf(tool.Validate(json.RawMessage(c.bad)))
			if !slices.Equal(got, c.want) {
				t.Errorf("%s:\n got %q\nwant %q", c.bad, got, c.want)
			}
			// The same through ValidateArgs (a question's args_schema).
			if got := problemsOf(nil, ValidateArgs("t", tool.Schema(), json.RawMessage(c.bad))); !slices.Equal(got, c.want) {
				t.Errorf("ValidateArgs %s:\n got %q\nwant %q", c.bad, got, c.want)
			}

			base, err := newBaselineTool("t", tool.Schema(), func(json.RawMessage) (any, error) { return nil, nil })
			if err != nil {
				t.Fatal(err)
			}
			baseGot := problemsOf(base.validate(json.RawMessage(c.bad)))
			class := baselineClass(baseGot, c.want)
			if _, err := base.validate(json.RawMessage(c.ok)); err != nil {
				class = baseRejects
				baseGot = problemsOf(nil, err)
			}
			if class != c.baseline {
				t.Errorf("baseline: %s, recorded %s: %q", class, c.baseline, baseGot)
			}
			t.Logf("%-10s baseline %q", c.baseline, baseGot)
		})
	}
}

func googleSchema(t testing.TB, s string) *jsonschema.Schema {
	t.Helper()
	var gs jsonschema.Schema
	if err := json.Unmarshal([]byte(s), &gs); err != nil {
		t.Fatal(err)
	}
	return &gs
}

func problemsOf(_ any, err error) []Problem {
	var ve *ValidationError
	if errors.As(err, &ve) {
		return ve.Problems
	}
	if err != nil {
		return []Problem{{Path: "?", Message: err.Error()}}
	}
	return nil
}

func baselineClass(got, want []Problem) string {
	paths := func(ps []Problem) []string {
		var s []string
		for _, p := range ps {
			s = append(s, p.Path)
		}
		return s
	}
	switch {
	case len(got) == 0:
		return baseAccepted
	case slices.Equal(got, want):
		return baseSame
	case len(got) == 1 && got[0].Path == "" && strings.HasPrefix(got[0].Message, "validating"):
		return baseOne
	case slices.Equal(paths(got), paths(want)):
		return basePlaces
	}
	for _, p := range got {
		if !slices.Contains(want, p) {
			return baseWrong
		}
	}
	return baseMissed
}

// TestValidateSchemaErrors checks that a schema that cannot work is refused
// with where and why, and that no reference leaves the schema.
func TestValidateSchemaErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ schema, want string }{
		{`{"type":"object","properties":{"a":{"type":"strin"}}}`, `/properties/a/type: must be one of ["array","boolean","integer","null","number","object","string"] or of type array, got string`},
		{`{"type":"object","properties":{"a":{"minLength":-1}}}`, `/properties/a/minLength: must be >= 0`},
		{`{"type":"object","properties":{"a":{"pattern":"(("}}}`, `/properties/a/pattern: must be a valid regex`},
		{`{"type":"object","properties":{"a":{"$ref":"#/$defs/nope"}}}`, `"/$defs/nope" not found`},
		{`{"type":"object","properties":{"a":{"$ref":"https://example.com/s.json"}}}`, `only references inside the schema are allowed, not https://example.com/s.json`},
		{`{"type":"object","properties":{"a":{"$ref":"file:///etc/hostname"}}}`, `only references inside the schema are allowed, not file:///etc/hostname`},
		{`{"$schema":"https://example.com/meta","type":"object"}`, `only references inside the schema are allowed`},
		{`{"type":`, `not JSON`},
	} {
		_, err := compileArgsSchema([]byte(c.schema))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.schema, err, c.want)
		}
		if err := ValidateArgs("t", json.RawMessage(c.schema), json.RawMessage(`{}`)); err == nil || errors.As(err, new(*ValidationError)) {
			t.Errorf("ValidateArgs with %s: %v, want a schema error", c.schema, err)
		}
	}
	// A tool with such a schema is refused when it is made, or, where
	// the schema is compiled at its first call, tells the model that the
	// mistake is the tool's.
	func() {
		defer func() {
			if r := recover(); r != nil && !strings.Contains(fmt.Sprint(r), `tool "bad": invalid schema: not a valid JSON Schema: /type:`) {
				t.Errorf("NewRawTool with a bad schema panicked with %v", r)
			}
		}()
		bad := NewRawTool("bad", "", nil, &ToolOptions{Schema: &jsonschema.Schema{Type: "strin"}})
		if _, err := bad.Validate(json.RawMessage(`{}`)); err == nil || !strings.Contains(err.Error(), "a mistake in the tool, not in the call") {
			t.Errorf("tool with a bad schema: %v", err)
		}
	}()
	// The metaschemas a $schema names are built in.
	for _, s := range []string{`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object"}`, `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"p":{"items":[{"type":"string"}],"additionalItems":false}}}`} {
		c, err := compileArgsSchema([]byte(s))
		if err != nil {
			t.Errorf("%s: %v", s, err)
			continue
		}
		if strings.Contains(s, "draft-07") {
			got := c.problems(map[string]any{"p": []any{"a", "b", "c"}})
			if want := []Problem{{"/p", "has 2 items more than the schema allows"}}; !slices.Equal(got, want) {
				t.Errorf("draft-07 additionalItems: %q, want %q", got, want)
			}
		}
	}
}

// TestValidateArgsNotAnObject keeps the messages of arguments that are not
// one JSON object.
func TestValidateArgsNotAnObject(t *testing.T) {
	t.Parallel()
	schema := json.RawMessage(`{"type":"object"}`)
	for args, want := range map[string]string{
		`[1, 2]`:   "arguments must be a JSON object, got array: [1, 2]",
		`{bad`:     "arguments are not valid JSON",
		`{} {}`:    "arguments have trailing data after the JSON object",
		`"{oops"`:  "arguments are not valid JSON: {oops",
		``:         "",
		`{"a": 1}`: "",
	} {
		err := ValidateArgs("t", schema, json.RawMessage(args))
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: %v, want %q", args, err, want)
		}
	}
	if err := ValidateArgs("t", json.RawMessage(`not json`), json.RawMessage(`{}`)); err == nil || !strings.Contains(err.Error(), "is not readable") {
		t.Errorf("unreadable schema: %v", err)
	}
}

// TestValidateTyped checks a NewTool tool: the inferred schema's problems,
// then the typed value.
func TestValidateTyped(t *testing.T) {
	t.Parallel()
	type args struct {
		Cmd       string            `json:"cmd"`
		TimeoutMS int               `json:"timeout_ms,omitempty"`
		Env       map[string]string `json:"env,omitempty"`
	}
	tool := NewTool("bash", "", func(ctx context.Context, a args) (string, error) { return "", nil }, nil)
	v, err := tool.Validate(json.RawMessage(`{"cmd":"ls","env":{"A":"b"}}`))
	if a, ok := v.(args); err != nil || !ok || a.Cmd != "ls" || a.Env["A"] != "b" {
		t.Fatalf("Validate = %#v, %v", v, err)
	}
	_, err = tool.Validate(json.RawMessage(`{"timeout_ms":"5","env":{"A":1},"shell":"sh"}`))
	want := `invalid arguments for tool "bash": 4 problems: /cmd: required; /env/A: want string, got integer; /shell: unknown argument (allowed: cmd, env, timeout_ms); /timeout_ms: want integer, got string`
	if err == nil || err.Error() != want {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
}

// TestValidateConcurrent validates with one new tool from many goroutines
// (its schema may be compiled by the first of them).
func TestValidateConcurrent(t *testing.T) {
	t.Parallel()
	tool := NewRawTool("t", "", nil, &ToolOptions{Schema: googleSchema(t, richSchema)})
	_, rich := benchArgs()
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			var err error
			for range 20 {
				if _, err = tool.Validate(rich); err != nil {
					break
				}
				if _, err = tool.Validate(json.RawMessage(`{"ops":[{"kind":"move","from":"a"}]}`)); err == nil || !strings.Contains(err.Error(), "/ops/0/to: required") {
					err = fmt.Errorf("got %v, want /ops/0/to: required", err)
					break
				}
				err = nil
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

type benchBash struct {
	Cmd       string            `json:"cmd"`
	Cwd       string            `json:"cwd"`
	TimeoutMS int               `json:"timeout_ms,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
}

// richSchema is a file-editing tool: a list of operations, each one of
// three shapes ($ref into $defs, oneOf with a "kind" tag).
const richSchema = `{
 "type":"object",
 "$defs":{
  "path":{"type":"string","minLength":1,"maxLength":4096,"pattern":"^[^\\x00]+$"},
  "write":{"type":"object","properties":{"kind":{"const":"write"},"path":{"$ref":"#/$defs/path"},"content":{"type":"string"},"mode":{"type":"integer","minimum":0,"maximum":511}},"required":["kind","path","content"],"additionalProperties":false},
  "delete":{"type":"object","properties":{"kind":{"const":"delete"},"path":{"$ref":"#/$defs/path"}},"required":["kind","path"],"additionalProperties":false},
  "move":{"type":"object","properties":{"kind":{"const":"move"},"from":{"$ref":"#/$defs/path"},"to":{"$ref":"#/$defs/path"}},"required":["kind","from","to"],"additionalProperties":false}
 },
 "properties":{
  "ops":{"type":"array","minItems":1,"maxItems":50,"items":{"oneOf":[{"$ref":"#/$defs/write"},{"$ref":"#/$defs/delete"},{"$ref":"#/$defs/move"}]}},
  "dry_run":{"type":"boolean"},
  "message":{"type":"string","maxLength":500}
 },
 "required":["ops"],
 "additionalProperties":false
}`

func benchArgs() (bash, rich json.RawMessage) {
	env := map[string]string{}
	for i := range 8 {
		env[fmt.Sprintf("VAR_%d", i)] = strings.Repeat("v", 30)
	}
	bash, _ = json.Marshal(benchBash{Cmd: "cd src && go test ./... -run 'TestFoo|TestBar' -count=1 2>&1 | tee /tmp/out.log; " + strings.Repeat("echo hello world; ", 25), Cwd: "/home/user/project", TimeoutMS: 120000, Env: env})
	rich, _ = json.Marshal(map[string]any{"ops": []map[string]any{
		{"kind": "write", "path": "src/main.go", "content": strings.Repeat("package main\n", 30), "mode": 420},
		{"kind": "move", "from": "src/old.go", "to": "src/new.go"},
		{"kind": "delete", "path": "src/tmp.go"},
		{"kind": "write", "path": "README.md", "content": strings.Repeat("# hi\n", 60)},
	}, "dry_run": false, "message": "refactor"})
	return bash, rich
}

// BenchmarkValidate measures validating one call of ~1 KB: a bash-like
// tool (typed, schema inferred) and a richer one ($ref, oneOf), with the
// validator (Tool.Validate, and the compiled schema alone) and with the
// hand-written baseline; decode is the JSON decoding both include.
func BenchmarkValidate(b *testing.B) {
	bashArgs, richArgs := benchArgs()
	bash := NewTool("bash", "", func(ctx context.Context, a benchBash) (string, error) { return "", nil }, nil)
	rich := NewRawTool("edit", "", func(context.Context, map[string]any) (ToolResult, error) { return ToolResult{}, nil }, &ToolOptions{Schema: googleSchema(b, richSchema)})
	for _, tc := range []struct {
		name string
		t    *Tool
		args json.RawMessage
	}{{"bash", bash, bashArgs}, {"rich", rich, richArgs}} {
		if _, err := tc.t.Validate(tc.args); err != nil {
			b.Fatal(err)
		}
		c, err := compileArgsSchema(tc.t.Schema())
		if err != nil {
			b.Fatal(err)
		}
		base, err := newBaselineTool(tc.t.name, tc.t.Schema(), tc.t.decode)
		if err != nil {
			b.Fatal(err)
		}
		for _, v := range []struct {
			name     string
			validate func(json.RawMessage) (any, error)
		}{
			{"Tool.Validate", tc.t.Validate},
			{"compiled", func(raw json.RawMessage) (any, error) { return validateCompiled(tc.t.name, c, tc.t.decode, raw) }},
			{"handwritten", base.validate},
			{"decode", func(raw json.RawMessage) (any, error) {
				decodeObject(raw)
				return tc.t.decode(raw)
			}},
		} {
			b.Run(fmt.Sprintf("%s/%s/%dB", tc.name, v.name, len(tc.args)), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := v.validate(tc.args); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
	b.Run("rich/compile", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := compileArgsSchema(rich.Schema()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
