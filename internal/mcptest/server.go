package mcptest

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options configures [NewServer].
type Options struct {
	// Hang adds the tool hang, whose calls block until their context is done
	// (the client cancels, or the session ends).
	Hang bool
}

// BadSchema is the input schema of the tool bad_schema: a JSON object, with
// type "object" as the SDK demands, but not a valid JSON Schema ("no-such-type"
// is not a type), so a schema compiler refuses it.
const BadSchema = `{"type":"object","properties":{"x":{"type":"no-such-type"}}}`

// ProgressInterval is how often the tool slow reports progress.
const ProgressInterval = 50 * time.Millisecond

// NewServer returns an in-process MCP server named "mcptest", version "1.0",
// that records the calls that take effect in l (which may be nil). Its tools:
//
//   - echo {text}: returns "echo: <text>". Read-only, titled "Echo".
//   - write_note {path, text}: records, returns "wrote <n> bytes to <path>"
//     (n the length of text). Not read-only, not destructive, not idempotent.
//   - delete_repo {repo}: records, returns "deleted <repo>". Destructive,
//     open-world.
//   - slow {ms}: sleeps ms milliseconds, reporting progress at once and every
//     [ProgressInterval] if the request has a progress token (progress is the
//     milliseconds slept, total is ms); then records and returns
//     "slept <ms> ms". If the context ends first it returns an error and
//     records nothing.
//   - structured {n?}: returns the structured content {"n": n, "double": 2n},
//     declared by its output schema, and the same JSON as text.
//   - fail {}: returns a result with IsError set and the text
//     "the tool failed on purpose".
//   - bad_schema {x?}: listed with the malformed input schema [BadSchema];
//     if called anyway, it records and returns "bad_schema called".
//   - hang {} (only with opts.Hang): blocks until its context is done, then
//     returns the context's error; records nothing (see [Ledger.Hanging]).
//
// Arguments are checked against each tool's input schema (all its fields
// required but structured's n), except bad_schema's, which cannot be; a
// call that fails the check gets a result with IsError set, and records
// nothing. Only echo, write_note and delete_repo have annotations.
func NewServer(l *Ledger, opts *Options) *mcp.Server {
	if opts == nil {
		opts = &Options{}
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "mcptest", Version: "1.0"}, nil)

	mcp.AddTool(s, &mcp.Tool{
		Name:        "echo",
		Description: "Returns its text.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, Title: "Echo"},
	}, func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		return text("echo: " + in.Text), nil, nil
	})

	mcp.AddTool(s, &mcp.Tool{
		Name:        "write_note",
		Description: "Writes a note (pretends to).",
		Annotations: &mcp.ToolAnnotations{
			ReadOnlyHint:    false,
			DestructiveHint: new(false),
			IdempotentHint:  false,
		},
	}, func(ctx context.Context, req *mcp.CallToolRequest, in writeNoteIn) (*mcp.CallToolResult, any, error) {
		if err := l.Record("write_note", args(req)); err != nil {
			return nil, nil, err
		}
		return text(fmt.Sprintf("wrote %d bytes to %s", len(in.Text), in.Path)), nil, nil
	})

	mcp.AddTool(s, &mcp.Tool{
		Name:        "delete_repo",
		Description: "Deletes a repository (pretends to).",
		Annotations: &mcp.ToolAnnotations{
			DestructiveHint: new(true),
			OpenWorldHint:   new(true),
		},
	}, func(ctx context.Context, req *mcp.CallToolRequest, in deleteRepoIn) (*mcp.CallToolResult, any, error) {
		if err := l.Record("delete_repo", args(req)); err != nil {
			return nil, nil, err
		}
		return text("deleted " + in.Repo), nil, nil
	})

	mcp.AddTool(s, &mcp.Tool{
		Name:        "slow",
		Description: "Sleeps ms milliseconds, reporting progress.",
	}, func(ctx context.Context, req *mcp.CallToolRequest, in slowIn) (*mcp.CallToolResult, any, error) {
		if err := sleep(ctx, req, in.Ms); err != nil {
			return nil, nil, err
		}
		if err := l.Record("slow", args(req)); err != nil {
			return nil, nil, err
		}
		return text(fmt.Sprintf("slept %d ms", in.Ms)), nil, nil
	})

	mcp.AddTool(s, &mcp.Tool{
		Name:        "structured",
		Description: "Returns n and its double as structured content.",
	}, func(ctx context.Context, req *mcp.CallToolRequest, in structuredIn) (*mcp.CallToolResult, structuredOut, error) {
		out := structuredOut{N: in.N, Double: 2 * in.N}
		b, err := json.Marshal(out)
		if err != nil {
			return nil, out, err
		}
		return text(string(b)), out, nil
	})

	mcp.AddTool(s, &mcp.Tool{
		Name:        "fail",
		Description: "Always fails.",
	}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		res := text("the tool failed on purpose")
		res.IsError = true
		return res, nil, nil
	})

	// The raw Server.AddTool only checks that the schema is an object of type
	// "object"; it neither compiles nor applies it, so it lists the tool as is.
	s.AddTool(&mcp.Tool{
		Name:        "bad_schema",
		Description: "Has a malformed input schema.",
		InputSchema: json.RawMessage(BadSchema),
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if err := l.Record("bad_schema", args(req)); err != nil {
			return nil, err
		}
		return text("bad_schema called"), nil
	})

	if opts.Hang {
		mcp.AddTool(s, &mcp.Tool{
			Name:        "hang",
			Description: "Blocks until cancelled.",
		}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			l.addHanging(1)
			defer l.addHanging(-1)
			<-ctx.Done()
			return nil, nil, ctx.Err()
		})
	}
	return s
}

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}

type writeNoteIn struct {
	Path string `json:"path" jsonschema:"where to write the note"`
	Text string `json:"text" jsonschema:"the note"`
}

type deleteRepoIn struct {
	Repo string `json:"repo" jsonschema:"the repository to delete"`
}

type slowIn struct {
	Ms int `json:"ms" jsonschema:"how many milliseconds to sleep"`
}

type structuredIn struct {
	N int `json:"n,omitempty" jsonschema:"the number to double"`
}

type structuredOut struct {
	N      int `json:"n" jsonschema:"the number given"`
	Double int `json:"double" jsonschema:"twice n"`
}

// sleep sleeps ms milliseconds or until ctx is done, reporting progress if
// the request asks for it.
func sleep(ctx context.Context, req *mcp.CallToolRequest, ms int) error {
	total := time.Duration(max(ms, 0)) * time.Millisecond
	start := time.Now()
	timer := time.NewTimer(total)
	defer timer.Stop()

	var tick <-chan time.Time
	token := req.Params.GetProgressToken()
	notify := func() {
		if req.Session == nil {
			return
		}
		// A lost notification is no reason to fail the call.
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			ProgressToken: token,
			Progress:      float64(min(time.Since(start), total).Milliseconds()),
			Total:         float64(ms),
			Message:       "sleeping",
		})
	}
	if token != nil {
		t := time.NewTicker(ProgressInterval)
		defer t.Stop()
		tick = t.C
		notify()
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick:
			notify()
		case <-timer.C:
			return nil
		}
	}
}

// args returns the call's arguments as received.
func args(req *mcp.CallToolRequest) map[string]any {
	m := map[string]any{}
	if len(req.Params.Arguments) > 0 {
		// The SDK has checked them against the tool's schema, or, for
		// bad_schema, they may be anything: keep what decodes.
		_ = json.Unmarshal(req.Params.Arguments, &m)
	}
	return m
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}
