package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"slices"
	"sync/atomic"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/tollgate-ai/tollgate/internal/jsontext"
)

// Tool is a function the model can call. Build one with [NewTool] (typed
// arguments, schema inferred from the argument struct) or [NewRawTool] (a
// JSON Schema you give, arguments as a map).
//
// Arguments are validated against the schema before any middleware sees
// them; invalid arguments become an error result listing every problem.
type Tool struct {
	name        string
	description string
	schema      *jsonschema.Schema
	schemaJSON  json.RawMessage
	compiled    *compiledSchema
	opts        ToolOptions
	// decode turns validated JSON arguments into the value the handler
	// and policies receive (the typed struct for NewTool).
	decode func(raw json.RawMessage) (any, error)
	run    func(ctx context.Context, args any) (ToolResult, error)
	// validations counts the schema checks of calls' arguments a run's
	// decisions made (the tests of a resume's kept arguments read it).
	validations atomic.Int64
	// argsByValue: the decoded arguments hold nothing a hook could change
	// in place (no map, slice, pointer or interface in them), so one value
	// may be handed to every decision of a call.
	argsByValue bool
	// objectArgs: decode is decodeObject (NewRawTool), so validation
	// hands on the object it decoded for the schema (see validate).
	objectArgs bool
}

// byValue reports whether a value of type t is all values: copied whole
// when assigned, nothing in it shared.
func byValue(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128, reflect.String:
		return true
	case reflect.Array:
		return byValue(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if !byValue(t.Field(i).Type) {
				return false
			}
		}
		return true
	}
	return false
}

// ToolOptions tune a tool. A nil *ToolOptions means all zero values.
type ToolOptions struct {
	// Idempotent declares that running the tool twice with the same
	// arguments and idempotency key has the effect of running it once.
	// A call found "executing" after a crash is then run again (with the
	// same key, see [IdempotencyKey]) instead of being reported as having
	// an unknown outcome. Zero: not idempotent.
	Idempotent bool
	// Timeout bounds one execution; the tool's context is cancelled when
	// it passes and the result is an error. Zero: no limit but the run's.
	Timeout time.Duration
	// Schema overrides the inferred input schema (NewTool) and is the
	// schema for NewRawTool. Zero: inferred; for NewRawTool, any object.
	Schema *jsonschema.Schema
	// Annotations describe the tool for policies and reviewers, as the
	// tool's author states them: for a tool of an MCP server, its server,
	// its name there and its hints (read_only, destructive, ...). They are
	// shown, never trusted: no policy allows a call because of them unless
	// a rule written by the policy's owner says so. Read only once given.
	Annotations map[string]any
}

// NewTool returns a tool whose arguments are the JSON object form of In (a
// struct; fields by their JSON names, `omitempty` fields optional, others
// required, unknown fields refused). The handler's Out becomes the result:
// a string as is, a [ToolResult] as is, anything else as JSON. An error
// from the handler becomes an error result the model sees.
//
// NewTool panics if no schema can be inferred from In: that is a
// programming mistake found the first time the program starts.
func NewTool[In, Out any](name, description string, handler func(ctx context.Context, args In) (Out, error), opts *ToolOptions) *Tool {
	o := ToolOptions{}
	if opts != nil {
		o = *opts
	}
	schema := o.Schema
	if schema == nil {
		s, err := jsonschema.For[In](nil)
		if err != nil {
			panic(fmt.Sprintf("agent.NewTool(%q): cannot infer a schema for %v: %v", name, reflect.TypeFor[In](), err))
		}
		schema = s
	}
	t := newTool(name, description, schema, o)
	t.argsByValue = byValue(reflect.TypeFor[In]())
	t.decode = func(raw json.RawMessage) (any, error) {
		var in In
		if len(raw) == 0 {
			raw = json.RawMessage("{}")
		}
		if err := json.Unmarshal(raw, &in); err != nil {
			return nil, err
		}
		return in, nil
	}
	t.run = func(ctx context.Context, args any) (ToolResult, error) {
		in, ok := args.(In)
		if !ok {
			return ToolResult{}, fmt.Errorf("tool %q: arguments of type %T, want %v", name, args, reflect.TypeFor[In]())
		}
		out, err := handler(ctx, in)
		if err != nil {
			return ToolResult{}, err
		}
		return resultOf(out)
	}
	return t
}

// NewRawTool returns a tool whose handler receives the validated arguments
// as a map (numbers as json.Number). opts.Schema is the input schema; nil
// accepts any object.
func NewRawTool(name, description string, handler func(ctx context.Context, args map[string]any) (ToolResult, error), opts *ToolOptions) *Tool {
	o := ToolOptions{}
	if opts != nil {
		o = *opts
	}
	schema := o.Schema
	if schema == nil {
		schema = &jsonschema.Schema{Type: "object"}
	}
	t := newTool(name, description, schema, o)
	t.objectArgs = true
	t.decode = func(raw json.RawMessage) (any, error) {
		m, p := decodeObject(raw)
		if p != nil {
			return nil, errors.New(p.Message)
		}
		return m, nil
	}
	t.run = func(ctx context.Context, args any) (ToolResult, error) {
		m, _ := args.(map[string]any)
		return handler(ctx, m)
	}
	return t
}

// CheckSchema reports whether schema can be a tool's input schema: it
// encodes, compiles, and describes an object. [NewRawTool] panics on a
// schema this refuses; check schemas that come from elsewhere (an MCP
// server) first.
func CheckSchema(schema *jsonschema.Schema) error {
	if schema == nil {
		return nil
	}
	if schema.Type != "object" && !slices.Contains(schema.Types, "object") {
		return fmt.Errorf("the input schema does not describe an object (type %q)", schema.Type)
	}
	b, err := json.Marshal(schema)
	if err != nil {
		return fmt.Errorf("the input schema does not encode: %w", err)
	}
	if _, err := compileArgsSchema(b); err != nil {
		return err
	}
	return nil
}

func newTool(name, description string, schema *jsonschema.Schema, o ToolOptions) *Tool {
	b, err := json.Marshal(schema)
	if err != nil {
		panic(fmt.Sprintf("agent: tool %q: cannot encode schema: %v", name, err))
	}
	compiled, err := compileArgsSchema(b)
	if err != nil {
		panic(fmt.Sprintf("agent: tool %q: invalid schema: %v", name, err))
	}
	return &Tool{name: name, description: description, schema: schema, schemaJSON: b, compiled: compiled, opts: o}
}

func resultOf(out any) (ToolResult, error) {
	switch v := out.(type) {
	case string:
		return ToolResult{Content: v}, nil
	case ToolResult:
		return v, nil
	case *ToolResult:
		if v == nil {
			return ToolResult{}, nil
		}
		return *v, nil
	case []byte:
		return ToolResult{Content: string(v)}, nil
	}
	// The model and people read this text: "a > b" stays "a > b", not
	// json.Marshal's "a \u003e b".
	b, err := jsontext.Marshal(out)
	if err != nil {
		return ToolResult{}, fmt.Errorf("cannot encode the tool's output: %w", err)
	}
	return ToolResult{Content: string(b)}, nil
}

// Name is the tool's name as the model calls it.
func (t *Tool) Name() string { return t.name }

// Description tells the model what the tool does.
func (t *Tool) Description() string { return t.description }

// Schema is the JSON Schema of the tool's arguments.
func (t *Tool) Schema() json.RawMessage { return t.schemaJSON }

// Annotations are the tool's [ToolOptions.Annotations]; nil if none.
// Read only.
func (t *Tool) Annotations() map[string]any {
	if t == nil {
		return nil
	}
	return t.opts.Annotations
}

// Idempotent reports whether the tool may be re-run after a crash.
func (t *Tool) Idempotent() bool { return t.opts.Idempotent }

// Spec is what the model is told about the tool.
func (t *Tool) Spec() ToolSpec {
	return ToolSpec{Name: t.name, Description: t.description, InputSchema: t.schemaJSON}
}

// Validate checks raw arguments against the tool's schema and returns the
// value the handler and policies receive (the typed struct for [NewTool]).
// Every problem is listed in the returned *[ValidationError].
func (t *Tool) Validate(raw json.RawMessage) (any, error) {
	typed, _, err := t.validate(raw)
	return typed, err
}

// validateCanonical is internal/agentlink's Validate: t.Validate(raw)
// and, for valid arguments, canonicalArgs(raw), from one decode of them
// (t is a *Tool). The canonical form is encoded before the value is
// handed on: a raw tool's value is the decoded object itself.
func validateCanonical(t any, raw json.RawMessage) (any, json.RawMessage, error) {
	tool := t.(*Tool)
	typed, obj, err := tool.validate(raw)
	if err != nil {
		return nil, nil, err
	}
	if jsontext.CanonicalHTML(raw) {
		return typed, raw, nil
	}
	return typed, encodeCanonical(obj, raw), nil
}

// validate is validateDecoded for the tool's arguments. A raw tool's value
// is the object decoded for the schema, not decoded again: its decode
// gave an equal map, a second decode of the arguments on every call.
func (t *Tool) validate(raw json.RawMessage) (any, map[string]any, error) {
	decode := t.decode
	if t.objectArgs {
		decode = nil
	}
	return validateDecoded(t.name, t.compiled, decode, raw)
}

func orEmptyObject(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("{}")
	}
	return raw
}

// execute runs the handler with the tool's timeout, turning errors and
// panics into error results.
// execute runs the tool. The error is set only when the tool parked (it
// asked a question through a channel that parks the run, see ErrParked):
// the call then has no result yet.
func (t *Tool) execute(ctx context.Context, args any) (res ToolResult, parked error) {
	if t.opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.opts.Timeout)
		defer cancel()
	}
	defer func() {
		if r := recover(); r != nil {
			res, parked = ToolResult{IsError: true, Content: fmt.Sprintf("tool %q panicked: %v", t.name, r),
				Details: map[string]any{"panic": fmt.Sprint(r), "stack": string(debug.Stack())}}, nil
		}
	}()
	out, err := t.run(ctx, args)
	if err != nil {
		if errors.Is(err, ErrParked) {
			return ToolResult{}, err
		}
		if t.opts.Timeout > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return ToolResult{IsError: true, Content: fmt.Sprintf("tool %q timed out after %s: %v", t.name, t.opts.Timeout, err)}, nil
		}
		return ToolResult{IsError: true, Content: err.Error()}, nil
	}
	return out, nil
}

type idempotencyKeyCtx struct{}

// IdempotencyKey returns the key of the tool call running in ctx:
// "thread/run/call". It is the same when a crashed call of an idempotent
// tool is run again, so the tool can tell a retry from a new call.
func IdempotencyKey(ctx context.Context) string {
	k, _ := ctx.Value(idempotencyKeyCtx{}).(string)
	return k
}
