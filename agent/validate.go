package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	sjs "github.com/santhosh-tekuri/jsonschema/v6"
)

// DefaultMaxArgBytes is the default bound on a tool call's arguments
// (Config.MaxArgBytes): 1 MiB of JSON.
const DefaultMaxArgBytes = 1 << 20

// checkArgSize returns the error result of a call whose arguments are
// over max bytes (max < 0: no bound), or nil.
func checkArgSize(call ToolCall, max int) *ToolResult {
	if max < 0 || len(call.Arguments) <= max {
		return nil
	}
	return &ToolResult{IsError: true,
		Content: fmt.Sprintf("The arguments of this call of %q are %d bytes, over the limit of %d bytes; they were not read. Call the tool with smaller arguments.", call.Name, len(call.Arguments), max),
		Details: map[string]any{"error": "arguments_too_large", "size": len(call.Arguments), "limit": max}}
}

// Problem is one reason arguments do not fit a tool's schema.
type Problem struct {
	// Path is a JSON Pointer to the offending value ("" for the whole
	// arguments object, "/count", "/items/2").
	Path    string `json:"path"`
	Message string `json:"message"`
}

// ValidationError lists every problem found in a tool's arguments, so the
// model (or a reviewer editing arguments) can fix them all at once.
type ValidationError struct {
	Tool     string    `json:"tool"`
	Problems []Problem `json:"problems"`
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "invalid arguments for tool %q: ", e.Tool)
	if len(e.Problems) == 1 {
		b.WriteString("1 problem: ")
	} else {
		fmt.Fprintf(&b, "%d problems: ", len(e.Problems))
	}
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("; ")
		}
		path := p.Path
		if path == "" {
			path = "(arguments)"
		}
		b.WriteString(path + ": " + p.Message)
	}
	return b.String()
}

// Arguments are validated by github.com/santhosh-tekuri/jsonschema/v6,
// which implements all of draft 2020-12 (and the earlier drafts a $schema
// may name) and reports every failure with its place in the arguments;
// its error tree is worded here for a model to act on. A tool's schema is
// compiled once; references are resolved inside the schema only, never
// loaded from a file or the network; formats are asserted.

// argsSchemaURL names a tool's schema while it is compiled; it never
// leaves this process.
const argsSchemaURL = "urn:tollgate:args"

// compiledSchema is a tool's argument schema, compiled.
type compiledSchema struct {
	schema *sjs.Schema
	// doc is the schema as JSON values, to name what a keyword allows
	// (the properties an "additionalProperties": false keeps, the schema
	// a "not" refuses).
	doc any
}

// noLoader refuses every schema outside the tool's own: a $ref is
// resolved within the schema ($defs, anchors), never from a file or the
// network.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("only references inside the schema are allowed, not %s", url)
}

// compileArgsSchema compiles a tool's argument schema (JSON Schema 2020-12
// unless its $schema names another draft).
func compileArgsSchema(schemaJSON []byte) (*compiledSchema, error) {
	doc, err := sjs.UnmarshalJSON(bytes.NewReader(schemaJSON))
	if err != nil {
		return nil, fmt.Errorf("the schema is not JSON: %w", err)
	}
	c := sjs.NewCompiler()
	c.UseLoader(noLoader{})
	c.DefaultDraft(sjs.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(argsSchemaURL, doc); err != nil {
		return nil, err
	}
	s, err := c.Compile(argsSchemaURL)
	if err != nil {
		return nil, schemaError(doc, err)
	}
	return &compiledSchema{schema: s, doc: doc}, nil
}

// schemaError words a compilation error: where the schema breaks the
// rules of JSON Schema, each place and why, and without the library's
// name for the schema.
func schemaError(doc any, err error) error {
	var se *sjs.SchemaValidationError
	var ve *sjs.ValidationError
	if errors.As(err, &se) && errors.As(se.Err, &ve) {
		r := &report{c: &compiledSchema{}, x: doc}
		var msgs []string
		for _, p := range r.sorted(r.collect(ve, nil, nil)) {
			at := p.Path
			if at == "" {
				at = "(root)"
			}
			msgs = append(msgs, at+": "+p.Message)
		}
		if len(msgs) > 0 {
			return errors.New("not a valid JSON Schema: " + strings.Join(msgs, "; "))
		}
	}
	msg := strings.ReplaceAll(err.Error(), argsSchemaURL+"#", "")
	msg = strings.ReplaceAll(msg, argsSchemaURL, "(schema)")
	return errors.New(strings.TrimPrefix(msg, "jsonschema: "))
}

// validateCompiled checks raw arguments against a compiled schema and
// decodes them.
func validateCompiled(name string, c *compiledSchema, decode func(json.RawMessage) (any, error), raw json.RawMessage) (any, error) {
	typed, _, err := validateDecoded(name, c, decode, raw)
	return typed, err
}

// validateDecoded is validateCompiled that also returns the arguments as
// decoded for the schema (numbers as json.Number), so that the caller can
// encode their canonical form without decoding them again. A nil decode
// is decodeObject's (a raw tool's): the value is the object decoded for
// the schema, not decoded a second time — the caller encodes the
// canonical form before the value goes to anyone who may change it.
func validateDecoded(name string, c *compiledSchema, decode func(json.RawMessage) (any, error), raw json.RawMessage) (any, map[string]any, error) {
	obj, p := decodeObject(raw)
	if p != nil {
		return nil, nil, &ValidationError{Tool: name, Problems: []Problem{*p}}
	}
	if ps := c.problems(obj); len(ps) > 0 {
		return nil, nil, &ValidationError{Tool: name, Problems: ps}
	}
	if decode == nil {
		return obj, obj, nil
	}
	typed, err := decode(orEmptyObject(raw))
	if err != nil {
		return nil, nil, &ValidationError{Tool: name, Problems: []Problem{{Message: err.Error()}}}
	}
	return typed, obj, nil
}

// problems returns every problem of x, ordered by path.
func (c *compiledSchema) problems(x any) []Problem {
	err := c.schema.Validate(x)
	if err == nil {
		return nil
	}
	var ve *sjs.ValidationError
	if !errors.As(err, &ve) {
		return []Problem{{Message: err.Error()}}
	}
	r := &report{c: c, x: x}
	return r.sorted(r.collect(ve, nil, nil))
}

// decodeObject parses raw tool arguments. They must be one JSON object;
// numbers stay json.Number so nothing is rounded.
func decodeObject(raw json.RawMessage) (map[string]any, *Problem) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return nil, &Problem{Message: "arguments are not valid JSON: " + err.Error()}
	}
	if dec.More() {
		return nil, &Problem{Message: "arguments have trailing data after the JSON object"}
	}
	m, ok := x.(map[string]any)
	if !ok {
		if str, ok := x.(string); ok && !json.Valid([]byte(str)) {
			// Providers keep arguments that are not JSON as a JSON string.
			if len(str) > 200 {
				str = str[:200] + "..."
			}
			return nil, &Problem{Message: "arguments are not valid JSON: " + str}
		}
		quoted := string(raw)
		if len(quoted) > 200 {
			quoted = quoted[:200] + "..."
		}
		return nil, &Problem{Message: "arguments must be a JSON object, got " + jsonType(x) + ": " + quoted}
	}
	return m, nil
}

// argsSchemas keeps the schemas ValidateArgs compiled, by their JSON: a
// server checks edits against the few schemas of its tools.
var argsSchemas struct {
	sync.Mutex
	m map[string]*compiledSchema
}

// ValidateArgs checks a JSON arguments object against a JSON Schema given as
// JSON (for example the args_schema a question carries), listing every
// problem like [Tool.Validate]. It lets a process that does not have the
// tool (a server answering for a run elsewhere) check edited arguments.
func ValidateArgs(toolName string, schema, args json.RawMessage) error {
	argsSchemas.Lock()
	c := argsSchemas.m[string(schema)]
	argsSchemas.Unlock()
	if c == nil {
		if !json.Valid(schema) {
			var x any
			err := json.Unmarshal(schema, &x)
			return fmt.Errorf("agent: schema of tool %q is not readable: %w", toolName, err)
		}
		var err error
		if c, err = compileArgsSchema(schema); err != nil {
			return fmt.Errorf("agent: schema of tool %q is invalid: %w", toolName, err)
		}
		argsSchemas.Lock()
		if argsSchemas.m == nil || len(argsSchemas.m) >= 256 {
			argsSchemas.m = map[string]*compiledSchema{}
		}
		argsSchemas.m[string(schema)] = c
		argsSchemas.Unlock()
	}
	_, err := validateCompiled(toolName, c, func(json.RawMessage) (any, error) { return nil, nil }, args)
	return err
}
