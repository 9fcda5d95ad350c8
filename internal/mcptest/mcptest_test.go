package mcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

func TestMain(m *testing.M) {
	code := m.Run()
	removeStdioServer()
	os.Exit(code)
}

// connect connects a client to s in process.
func connect(t *testing.T, s *mcp.Server, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatalf("server connect: %v", err)
	}
	t.Cleanup(func() { ss.Close() })
	c := mcp.NewClient(&mcp.Implementation{Name: "mcptest-client", Version: "1.0"}, opts)
	cs, err := c.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatalf("client connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func listTools(t *testing.T, cs *mcp.ClientSession) map[string]*mcp.Tool {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	tools := map[string]*mcp.Tool{}
	for _, tool := range res.Tools {
		tools[tool.Name] = tool
	}
	return tools
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("CallTool %s: %v", name, err)
	}
	return res
}

func resultText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	var b strings.Builder
	for _, c := range res.Content {
		tc, ok := c.(*mcp.TextContent)
		if !ok {
			t.Fatalf("content %T, want text", c)
		}
		b.WriteString(tc.Text)
	}
	return b.String()
}

func wantText(t *testing.T, res *mcp.CallToolResult, want string) {
	t.Helper()
	if res.IsError {
		t.Fatalf("IsError, text %q; want %q", resultText(t, res), want)
	}
	if got := resultText(t, res); got != want {
		t.Fatalf("text %q, want %q", got, want)
	}
}

func sortedNames(tools map[string]*mcp.Tool) []string {
	var names []string
	for n := range tools {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func ptr(b *bool) string {
	if b == nil {
		return "nil"
	}
	if *b {
		return "true"
	}
	return "false"
}

// checkAnnotations checks the annotations of the tools both servers have.
func checkAnnotations(t *testing.T, tools map[string]*mcp.Tool) {
	t.Helper()
	type hints struct {
		readOnly, idempotent          bool
		destructive, openWorld, title string
	}
	want := map[string]hints{
		"echo":        {readOnly: true, destructive: "nil", openWorld: "nil", title: "Echo"},
		"write_note":  {destructive: "false", openWorld: "nil"},
		"delete_repo": {destructive: "true", openWorld: "true"},
	}
	for name, w := range want {
		a := tools[name].Annotations
		if a == nil {
			t.Errorf("%s: no annotations", name)
			continue
		}
		got := hints{a.ReadOnlyHint, a.IdempotentHint, ptr(a.DestructiveHint), ptr(a.OpenWorldHint), a.Title}
		if got != w {
			t.Errorf("%s annotations %+v, want %+v", name, got, w)
		}
	}
	for _, name := range []string{"slow", "structured", "fail", "bad_schema"} {
		if a := tools[name].Annotations; a != nil {
			t.Errorf("%s annotations %+v, want none", name, a)
		}
	}
	for name, req := range map[string][]string{
		"echo":        {"text"},
		"write_note":  {"path", "text"},
		"delete_repo": {"repo"},
		"slow":        {"ms"},
		"structured":  nil,
	} {
		schema, _ := tools[name].InputSchema.(map[string]any)
		var got []string
		if r, ok := schema["required"].([]any); ok {
			for _, v := range r {
				got = append(got, v.(string))
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, req) {
			t.Errorf("%s required %v, want %v (schema %v)", name, got, req, schema)
		}
	}
}

func TestToolsListed(t *testing.T) {
	cs := connect(t, NewServer(nil, nil), nil)
	if got, want := cs.InitializeResult().ServerInfo, (&mcp.Implementation{Name: "mcptest", Version: "1.0"}); got.Name != want.Name || got.Version != want.Version {
		t.Errorf("server info %+v, want %+v", got, want)
	}
	tools := listTools(t, cs)
	want := []string{"bad_schema", "delete_repo", "echo", "fail", "slow", "structured", "write_note"}
	if got := sortedNames(tools); !slices.Equal(got, want) {
		t.Fatalf("tools %v, want %v", got, want)
	}
	checkAnnotations(t, tools)

	out, _ := tools["structured"].OutputSchema.(map[string]any)
	props, _ := out["properties"].(map[string]any)
	for _, p := range []string{"n", "double"} {
		if pp, _ := props[p].(map[string]any); pp["type"] != "integer" {
			t.Errorf("structured output schema property %s: %v", p, props[p])
		}
	}

	hang := listTools(t, connect(t, NewServer(nil, &Options{Hang: true}), nil))
	if _, ok := hang["hang"]; !ok || len(hang) != len(want)+1 {
		t.Errorf("with Hang: tools %v", sortedNames(hang))
	}
}

func TestCalls(t *testing.T) {
	l := new(Ledger)
	cs := connect(t, NewServer(l, nil), nil)
	start := time.Now()

	wantText(t, call(t, cs, "echo", map[string]any{"text": "hi"}), "echo: hi")
	wantText(t, call(t, cs, "write_note", map[string]any{"path": "a/b.txt", "text": "hello"}), "wrote 5 bytes to a/b.txt")
	wantText(t, call(t, cs, "delete_repo", map[string]any{"repo": "acme/widgets"}), "deleted acme/widgets")
	wantText(t, call(t, cs, "slow", map[string]any{"ms": 1}), "slept 1 ms")
	wantText(t, call(t, cs, "bad_schema", map[string]any{"x": 1}), "bad_schema called")

	res := call(t, cs, "fail", nil)
	if !res.IsError || resultText(t, res) != "the tool failed on purpose" {
		t.Errorf("fail: IsError %v, text %q", res.IsError, resultText(t, res))
	}

	res = call(t, cs, "structured", map[string]any{"n": 21})
	if res.IsError {
		t.Fatalf("structured: %s", resultText(t, res))
	}
	b, _ := json.Marshal(res.StructuredContent)
	var sc map[string]any
	if err := json.Unmarshal(b, &sc); err != nil || sc["n"] != 21.0 || sc["double"] != 42.0 || len(sc) != 2 {
		t.Errorf("structured content %s", b)
	}
	var tc map[string]any
	if err := json.Unmarshal([]byte(resultText(t, res)), &tc); err != nil || tc["double"] != 42.0 {
		t.Errorf("structured text %q", resultText(t, res))
	}

	calls := l.Calls()
	var tools []string
	for _, c := range calls {
		tools = append(tools, c.Tool)
		if c.At.Before(start) || c.At.After(time.Now()) {
			t.Errorf("%s at %v", c.Tool, c.At)
		}
	}
	if want := []string{"write_note", "delete_repo", "slow", "bad_schema"}; !slices.Equal(tools, want) {
		t.Fatalf("recorded %v, want %v", tools, want)
	}
	if a := calls[0].Args; a["path"] != "a/b.txt" || a["text"] != "hello" || len(a) != 2 {
		t.Errorf("write_note args %v", a)
	}
	if a := calls[2].Args; a["ms"] != 1.0 {
		t.Errorf("slow args %v", a)
	}
	if l.Count("write_note") != 1 || l.Count("echo") != 0 {
		t.Errorf("counts: write_note %d, echo %d", l.Count("write_note"), l.Count("echo"))
	}
}

func TestMissingArgumentRefused(t *testing.T) {
	l := new(Ledger)
	cs := connect(t, NewServer(l, nil), nil)
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"echo", nil},
		{"write_note", map[string]any{"path": "x"}},
		{"delete_repo", map[string]any{}},
		{"slow", map[string]any{"ms": "ten"}},
	} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		if err == nil && !res.IsError {
			t.Errorf("%s %v: accepted: %q", c.tool, c.args, resultText(t, res))
		}
	}
	if calls := l.Calls(); len(calls) != 0 {
		t.Errorf("refused calls recorded: %v", calls)
	}
}

// progressRecorder collects the progress notifications a client receives.
type progressRecorder struct {
	mu     sync.Mutex
	got    []*mcp.ProgressNotificationParams
	signal chan struct{}
}

func newProgressRecorder() *progressRecorder {
	return &progressRecorder{signal: make(chan struct{}, 100)}
}

func (p *progressRecorder) handle(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	p.mu.Lock()
	p.got = append(p.got, req.Params)
	p.mu.Unlock()
	select {
	case p.signal <- struct{}{}:
	default:
	}
}

// wait waits for n notifications and returns them all.
func (p *progressRecorder) wait(t *testing.T, n int) []*mcp.ProgressNotificationParams {
	t.Helper()
	deadline := time.After(2 * time.Second)
	for {
		p.mu.Lock()
		got := slices.Clone(p.got)
		p.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-p.signal:
		case <-deadline:
			t.Fatalf("%d progress notifications, want %d", len(got), n)
		}
	}
}

func slowWithProgress(t *testing.T, cs *mcp.ClientSession, p *progressRecorder) {
	t.Helper()
	params := &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"ms": 120}}
	params.SetProgressToken("tok-1")
	res, err := cs.CallTool(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	wantText(t, res, "slept 120 ms")
	// At once, at 50 ms and at 100 ms.
	got := p.wait(t, 3)
	last := -1.0
	for _, n := range got {
		if n.ProgressToken != "tok-1" || n.Total != 120 || n.Progress < last {
			t.Errorf("progress %+v", n)
		}
		last = n.Progress
	}
}

func TestSlowProgress(t *testing.T) {
	p := newProgressRecorder()
	cs := connect(t, NewServer(nil, nil), &mcp.ClientOptions{ProgressNotificationHandler: p.handle})
	slowWithProgress(t, cs, p)

	// No token, no progress.
	q := newProgressRecorder()
	cs = connect(t, NewServer(nil, nil), &mcp.ClientOptions{ProgressNotificationHandler: q.handle})
	wantText(t, call(t, cs, "slow", map[string]any{"ms": 60}), "slept 60 ms")
	time.Sleep(20 * time.Millisecond)
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.got) != 0 {
		t.Errorf("progress without a token: %v", q.got)
	}
}

func TestSlowCancelledNotRecorded(t *testing.T) {
	l := new(Ledger)
	cs := connect(t, NewServer(l, nil), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"ms": 5000}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("CallTool: %v, want deadline exceeded", err)
	}
	// The session is still usable, and the cut-short call took no effect.
	wantText(t, call(t, cs, "echo", map[string]any{"text": "after"}), "echo: after")
	time.Sleep(20 * time.Millisecond)
	if n := l.Count("slow"); n != 0 {
		t.Errorf("slow recorded %d times", n)
	}
}

func TestHang(t *testing.T) {
	l := new(Ledger)
	cs := connect(t, NewServer(l, &Options{Hang: true}), nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "hang"})
		done <- err
	}()
	waitFor(t, "the call to hang", func() bool { return l.Hanging() == 1 })
	select {
	case err := <-done:
		t.Fatalf("hang returned: %v", err)
	case <-time.After(30 * time.Millisecond):
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("CallTool: %v, want canceled", err)
	}
	// The client's cancellation reaches the tool.
	waitFor(t, "hang to end", func() bool { return l.Hanging() == 0 })
	if calls := l.Calls(); len(calls) != 0 {
		t.Errorf("recorded %v", calls)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// compile compiles schema as a draft 2020-12 JSON Schema, as the gateway does.
func compile(schema any) error {
	b, err := json.Marshal(schema)
	if err != nil {
		return err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("mem:///schema.json", doc); err != nil {
		return err
	}
	_, err = c.Compile("mem:///schema.json")
	return err
}

func TestBadSchemaListedButRefusedByCompiler(t *testing.T) {
	tools := listTools(t, connect(t, NewServer(nil, nil), nil))
	bad, ok := tools["bad_schema"]
	if !ok {
		t.Fatal("the SDK does not list bad_schema")
	}
	got, _ := json.Marshal(bad.InputSchema)
	var want any
	_ = json.Unmarshal([]byte(BadSchema), &want)
	if w, _ := json.Marshal(want); !bytes.Equal(got, w) {
		t.Errorf("bad_schema listed with %s, want %s", got, w)
	}
	err := compile(bad.InputSchema)
	if err == nil {
		t.Fatal("the compiler accepts bad_schema's schema")
	}
	t.Logf("compiler: %v", err)
	for name, tool := range tools {
		if name == "bad_schema" {
			continue
		}
		if err := compile(tool.InputSchema); err != nil {
			t.Errorf("%s input schema: %v", name, err)
		}
		if tool.OutputSchema != nil {
			if err := compile(tool.OutputSchema); err != nil {
				t.Errorf("%s output schema: %v", name, err)
			}
		}
	}
}

func TestLedgerNil(t *testing.T) {
	var l *Ledger
	if err := l.Record("x", nil); err != nil || l.Calls() != nil || l.Count("x") != 0 || l.Hanging() != 0 {
		t.Error("nil ledger")
	}
	cs := connect(t, NewServer(nil, nil), nil)
	wantText(t, call(t, cs, "delete_repo", map[string]any{"repo": "r"}), "deleted r")
}
