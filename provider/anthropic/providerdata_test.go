package anthropic

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	pt "github.com/tollgate-ai/tollgate/internal/providertest"
)

const (
	thinkingSig  = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxDSrv2IgQ0Z2r5YSEiMFmmbGzJxK8tmFv+k2jrJDPFuuV9xSBWKzqh6aCsfR6mF5JPyq6Gx0cuyl1swKh5UpTgnoICAdRrk2T1LVLCS2vKbIdm"
	redactedData = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ7vB9URj2pLmN3kF8/dW5hR7xJ"

	// thinkingToolData is the ProviderData of thinking_tool.sse, asked of
	// claude-sonnet-4-6.
	thinkingToolData = `{"anthropic":{"v":1,"model":"claude-sonnet-4-6","blocks":[
		{"type":"thinking","thinking":"The user wants the files listed. I'll run ls.","signature":"` + thinkingSig + `"},
		{"type":"redacted_thinking","data":"` + redactedData + `"},
		{"type":"tool_use","id":"toolu_01ThinkThenCallLs"}]}}`

	// thinkingToolSent is that reply's assistant message as sent back.
	thinkingToolSent = `{"role":"assistant","content":[
		{"type":"thinking","thinking":"The user wants the files listed. I'll run ls.","signature":"` + thinkingSig + `"},
		{"type":"redacted_thinking","data":"` + redactedData + `"},
		{"type":"tool_use","id":"toolu_01ThinkThenCallLs","name":"bash","input":{"command":"ls"}}]}`
)

// persisted is m after a trip through JSON, as a checkpoint store keeps it.
func persisted(t *testing.T, m *agent.Message) agent.Message {
	t.Helper()
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var out agent.Message
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestThinkingGoesIntoProviderData(t *testing.T) {
	t.Parallel()
	p, _ := setup(t, nil, pt.SSE(fixture(t, "thinking_tool.sse")))
	msg, _, err := complete(t, p, request(agent.UserMessage("list files")))
	if err != nil {
		t.Fatal(err)
	}
	pt.JSONEq(t, "provider data", msg.ProviderData, thinkingToolData)

	// No thinking, no provider data.
	p, _ = setup(t, nil, pt.SSE(fixture(t, "parallel.sse")))
	if msg, _, err = complete(t, p, request(agent.UserMessage("list files"))); err != nil {
		t.Fatal(err)
	}
	if msg.ProviderData != nil {
		t.Errorf("provider data without thinking: %s", msg.ProviderData)
	}
}

// The thinking blocks of a reply come back from the message alone: a
// brand-new Provider (as in another process, after a restart) given the
// persisted message sends them as the API returned them.
func TestProviderDataSurvivesRestart(t *testing.T) {
	t.Parallel()
	before, _ := setup(t, nil, pt.SSE(fixture(t, "thinking_tool.sse")))
	msg, _, err := complete(t, before, request(agent.UserMessage("list files")))
	if err != nil {
		t.Fatal(err)
	}
	stored := persisted(t, msg)

	after, srv := setup(t, nil, pt.SSE(fixture(t, "text.sse")))
	next := request(agent.UserMessage("list files"), stored,
		agent.ToolResultMessage(agent.ToolResult{CallID: "toolu_01ThinkThenCallLs", ToolName: "bash", Content: "a.txt"}))
	if _, _, err := complete(t, after, next); err != nil {
		t.Fatal(err)
	}
	pt.JSONEq(t, "messages", srv.Request(0).JSON(t)["messages"], `[
		{"role":"user","content":[{"type":"text","text":"list files"}]},
		`+thinkingToolSent+`,
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01ThinkThenCallLs","content":[{"type":"text","text":"a.txt"}]}]}]`)
}

// The same through the runtime: a run stopped while its tool runs is
// resumed by another Agent with its own Provider over the same store, and
// the model call it makes carries the first process's thinking blocks.
func TestResumedRunSendsThinking(t *testing.T) {
	t.Parallel()
	store := memory.New()
	type args struct {
		Command string `json:"command"`
	}
	newAgent := func(p *Provider, bash func(context.Context, args) (string, error)) *agent.Agent {
		a, err := agent.New(agent.Config{
			Provider:     p,
			Model:        agent.Model{ID: "claude-sonnet-4-6"},
			SystemPrompt: "You are a careful shell assistant.",
			Tools:        []*agent.Tool{agent.NewTool("bash", "Run a shell command.", bash, &agent.ToolOptions{Idempotent: true})},
			Checkpointer: store,
			ThreadID:     "restart",
			Logger:       slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}

	// The first process stops (its context is cancelled) once the model's
	// turn is stored and the tool has started.
	first, _ := setup(t, nil, pt.SSE(fixture(t, "thinking_tool.sse")))
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	var once sync.Once
	a := newAgent(first, func(ctx context.Context, _ args) (string, error) {
		once.Do(stop)
		<-ctx.Done()
		return "", ctx.Err()
	})
	if _, err := a.Prompt(ctx, "list files"); err == nil {
		t.Fatal("the first run ended; want it stopped")
	}

	second, srv := setup(t, nil, pt.SSE(fixture(t, "text.sse")))
	b := newAgent(second, func(context.Context, args) (string, error) { return "ran", nil })
	final, err := b.Resume(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if final.Text != "Hello! How can I help you today?" {
		t.Errorf("final message = %+v", final)
	}
	msgs := srv.Request(0).JSON(t)["messages"].([]any)
	if len(msgs) != 3 {
		t.Fatalf("%d messages sent, want 3: %s", len(msgs), pt.Canon(t, msgs))
	}
	pt.JSONEq(t, "assistant message", msgs[1], thinkingToolSent)
	// Whatever the runtime made of the stopped call, it is answered.
	results := msgs[2].(map[string]any)["content"].([]any)
	if len(results) != 1 || results[0].(map[string]any)["tool_use_id"] != "toolu_01ThinkThenCallLs" {
		t.Errorf("tool results = %s", pt.Canon(t, msgs[2]))
	}
}

// Blocks go back in the order they came, thinking between tool calls
// included; text and calls come from the message, so edits to them go out.
func TestInterleavedThinkingKeepsItsOrder(t *testing.T) {
	t.Parallel()
	p, srv := setup(t, nil, pt.SSE(fixture(t, "interleaved.sse")), pt.SSE(fixture(t, "text.sse")), pt.SSE(fixture(t, "text.sse")))
	msg, _, err := complete(t, p, request(agent.UserMessage("list files then delete temp logs")))
	if err != nil {
		t.Fatal(err)
	}
	const (
		sig1 = "EqMBCkYIBxgCKkDf1rstS1gnatur3Int3rl3av3dTh1nk1ngAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
		sig2 = "EqMBCkYIBxgCKkDs3c0ndS1gnatur3Om1tt3dTh1nk1ngBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB"
	)
	// The second thinking block's text was omitted by the API: it is left
	// out of the data and sent back empty.
	pt.JSONEq(t, "provider data", msg.ProviderData, `{"anthropic":{"v":1,"model":"claude-sonnet-4-6","blocks":[
		{"type":"thinking","thinking":"First list /tmp, then remove the logs.","signature":"`+sig1+`"},
		{"type":"text"},
		{"type":"tool_use","id":"toolu_01Int3rLs"},
		{"type":"thinking","signature":"`+sig2+`"},
		{"type":"tool_use","id":"toolu_01Int3rRm"}]}}`)
	results := []agent.Message{
		agent.ToolResultMessage(agent.ToolResult{CallID: "toolu_01Int3rLs", ToolName: "bash", Content: "logs"}),
		agent.ToolResultMessage(agent.ToolResult{CallID: "toolu_01Int3rRm", ToolName: "bash", Content: "done"}),
	}
	send := func(i int, m agent.Message) any {
		t.Helper()
		if _, _, err := complete(t, p, request(append([]agent.Message{agent.UserMessage("go"), m}, results...)...)); err != nil {
			t.Fatal(err)
		}
		return srv.Request(i).JSON(t)["messages"].([]any)[1]
	}

	pt.JSONEq(t, "as returned", send(1, persisted(t, msg)), `{"role":"assistant","content":[
		{"type":"thinking","thinking":"First list /tmp, then remove the logs.","signature":"`+sig1+`"},
		{"type":"text","text":"Two steps."},
		{"type":"tool_use","id":"toolu_01Int3rLs","name":"bash","input":{"command":"ls /tmp"}},
		{"type":"thinking","thinking":"","signature":"`+sig2+`"},
		{"type":"tool_use","id":"toolu_01Int3rRm","name":"bash","input":{"command":"rm -r /tmp/logs"}}]}`)

	// A host that edited the arguments, and added a call the reply did not
	// have: the edit goes out in place, the new call last.
	edited := persisted(t, msg)
	edited.ToolCalls[1].Arguments = json.RawMessage(`{"command":"rm -r /tmp/logs/2024"}`)
	edited.ToolCalls = append(edited.ToolCalls, agent.ToolCall{ID: "call_extra", Name: "bash", Arguments: json.RawMessage(`{"command":"pwd"}`)})
	pt.JSONEq(t, "edited", send(2, edited), `{"role":"assistant","content":[
		{"type":"thinking","thinking":"First list /tmp, then remove the logs.","signature":"`+sig1+`"},
		{"type":"text","text":"Two steps."},
		{"type":"tool_use","id":"toolu_01Int3rLs","name":"bash","input":{"command":"ls /tmp"}},
		{"type":"thinking","thinking":"","signature":"`+sig2+`"},
		{"type":"tool_use","id":"toolu_01Int3rRm","name":"bash","input":{"command":"rm -r /tmp/logs/2024"}},
		{"type":"tool_use","id":"call_extra","name":"bash","input":{"command":"pwd"}}]}`)
}

func TestNonStreamingThinking(t *testing.T) {
	t.Parallel()
	p, _ := setup(t, &Options{DisableStreaming: true}, pt.JSON(200, fixture(t, "thinking_message.json")))
	msg, _, err := complete(t, p, request(agent.UserMessage("list files")))
	if err != nil {
		t.Fatal(err)
	}
	pt.JSONEq(t, "provider data", msg.ProviderData, `{"anthropic":{"v":1,"model":"claude-sonnet-4-6","blocks":[
		{"type":"thinking","thinking":"The user wants the files listed.","signature":"EqQBCgIYAhIMN0nStr3am3dS1gnatur3"},
		{"type":"redacted_thinking","data":"EmwKAhgBEgyN0nStr3am3dR3dact3d"},
		{"type":"text"},
		{"type":"tool_use","id":"toolu_01NonStreamThink"}]}}`)
}

// Signatures are bound to the model that made them: asked of another
// model, the message goes out without its thinking.
func TestThinkingIsNotSentToAnotherModel(t *testing.T) {
	t.Parallel()
	p, srv := setup(t, nil, pt.SSE(fixture(t, "thinking_tool.sse")), pt.SSE(fixture(t, "text.sse")))
	msg, _, err := complete(t, p, request(agent.UserMessage("list files")))
	if err != nil {
		t.Fatal(err)
	}
	next := request(agent.UserMessage("list files"), persisted(t, msg),
		agent.ToolResultMessage(agent.ToolResult{CallID: "toolu_01ThinkThenCallLs", ToolName: "bash", Content: "a.txt"}))
	next.Model.ID = "claude-opus-4-7"
	if _, _, err := complete(t, p, next); err != nil {
		t.Fatal(err)
	}
	pt.JSONEq(t, "assistant message", srv.Request(1).JSON(t)["messages"].([]any)[1], `{"role":"assistant","content":[
		{"type":"tool_use","id":"toolu_01ThinkThenCallLs","name":"bash","input":{"command":"ls"}}]}`)
}

// Provider data this package cannot read is ignored, with one warning for
// the Provider however often it is met; the message goes out as if it had
// none.
func TestUnreadableProviderData(t *testing.T) {
	t.Parallel()
	var logged strings.Builder
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{mu: &mu, w: &logged}, nil))
	garbage := []string{
		`not json at all`,
		`"a string"`,
		`[1,2]`,
		`{"openai":{"v":1}}`,
		`{"anthropic":null}`,
		`{"anthropic":"x"}`,
		`{"anthropic":{"v":2,"blocks":[{"type":"thinking","thinking":"t","signature":"s"}]}}`,
		`{"anthropic":{"v":1,"blocks":[{"type":"hologram"}]}}`,
		`{"anthropic":{"v":1,"blocks":[{"type":"tool_use"}]}}`,
		`{"anthropic":{"v":1,"blocks":{"type":"text"}}}`,
	}
	var replies []pt.Reply
	for range garbage {
		replies = append(replies, pt.SSE(fixture(t, "text.sse")))
	}
	p, srv := setup(t, &Options{Logger: logger}, replies...)
	for i, g := range garbage {
		m := agent.Message{Role: agent.RoleAssistant, Text: "Listing.", StopReason: agent.StopToolUse,
			ToolCalls:    []agent.ToolCall{{ID: "toolu_1", Name: "bash", Arguments: json.RawMessage(`{"command":"ls"}`)}},
			ProviderData: json.RawMessage(g)}
		req := request(agent.UserMessage("list files"), m,
			agent.ToolResultMessage(agent.ToolResult{CallID: "toolu_1", ToolName: "bash", Content: "a.txt"}))
		if _, _, err := complete(t, p, req); err != nil {
			t.Fatalf("%s: %v", g, err)
		}
		pt.JSONEq(t, g, srv.Request(i).JSON(t)["messages"].([]any)[1], `{"role":"assistant","content":[
			{"type":"text","text":"Listing."},
			{"type":"tool_use","id":"toolu_1","name":"bash","input":{"command":"ls"}}]}`)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(logged.String(), "level=WARN"); n != 1 || !strings.Contains(logged.String(), "provider data") {
		t.Errorf("%d warnings, want 1:\n%s", n, logged.String())
	}
}

// An empty or null ProviderData is no data: nothing is logged.
func TestNoProviderData(t *testing.T) {
	t.Parallel()
	var logged strings.Builder
	p, srv := setup(t, &Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))}, pt.SSE(fixture(t, "text.sse")))
	req := request(agent.UserMessage("hi"),
		agent.Message{Role: agent.RoleAssistant, Text: "Hello.", ProviderData: json.RawMessage(`null`)},
		agent.UserMessage("again"),
		agent.Message{Role: agent.RoleAssistant, Text: "Hello again.", ProviderData: json.RawMessage(` `)},
		agent.UserMessage("bye"))
	if _, _, err := complete(t, p, req); err != nil {
		t.Fatal(err)
	}
	if logged.Len() != 0 {
		t.Errorf("logged: %s", logged.String())
	}
	if n := len(srv.Request(0).JSON(t)["messages"].([]any)); n != 5 {
		t.Errorf("%d messages sent", n)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
