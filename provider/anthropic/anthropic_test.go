package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/tollgate-ai/tollgate/agent"
	pt "github.com/tollgate-ai/tollgate/internal/providertest"
)

// fastRetries makes every retry wait 1ms (as if the server had said so),
// keeping the retry tests quick; the retry logic itself is the SDK's.
func fastRetries() option.RequestOption {
	return option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		res, err := next(r)
		if res != nil && res.StatusCode >= 400 {
			res.Header.Set("Retry-After-Ms", "1")
		}
		return res, err
	})
}

func setup(t *testing.T, opts *Options, replies ...pt.Reply) (*Provider, *pt.Server) {
	t.Helper()
	srv := pt.New(t, replies...)
	if opts == nil {
		opts = &Options{}
	}
	o := *opts
	o.APIKey = "sk-ant-test"
	o.BaseURL = srv.URL
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return newProvider(&o, fastRetries()), srv
}

func fixture(t *testing.T, name string) string { return pt.File(t, "testdata/"+name) }

func request(msgs ...agent.Message) *agent.Request {
	return &agent.Request{
		Model:    agent.Model{ID: "claude-sonnet-4-6"},
		System:   "You are a careful shell assistant.",
		Messages: msgs,
	}
}

// complete runs one call, collecting the streamed text.
func complete(t *testing.T, p *Provider, req *agent.Request) (*agent.Message, []string, error) {
	t.Helper()
	var deltas []string
	msg, err := p.Complete(t.Context(), req, func(s string) { deltas = append(deltas, s) })
	return msg, deltas, err
}

func TestTextOnly(t *testing.T) {
	t.Parallel()
	var logged strings.Builder
	logger := slog.New(slog.NewTextHandler(&logged, nil))
	p, srv := setup(t, &Options{Logger: logger}, pt.SSE(fixture(t, "text.sse")))
	req := request(agent.UserMessage("hi"))
	temp := 0.2
	req.Model.Temperature = &temp // not sent: the API refuses sampling parameters
	msg, deltas, err := complete(t, p, req)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logged.String(), "temperature") {
		t.Errorf("no warning about the ignored temperature: %q", logged.String())
	}
	if want := []string{"Hello", "! How can I", " help you today?"}; !slices.Equal(deltas, want) {
		t.Errorf("deltas = %q, want %q", deltas, want)
	}
	if msg.Role != agent.RoleAssistant || msg.Text != "Hello! How can I help you today?" || len(msg.ToolCalls) != 0 {
		t.Errorf("message = %+v", msg)
	}
	if msg.StopReason != agent.StopEndTurn {
		t.Errorf("stop reason = %q", msg.StopReason)
	}
	if msg.Usage == nil || *msg.Usage != (agent.Usage{InputTokens: 25, OutputTokens: 12}) {
		t.Errorf("usage = %+v", msg.Usage)
	}

	r := srv.Request(0)
	if r.Method != http.MethodPost || r.Path != "/v1/messages" {
		t.Errorf("request %s %s", r.Method, r.Path)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer sk-ant-test" {
		t.Errorf("Authorization = %q", got)
	}
	if r.Header.Get("Anthropic-Version") == "" {
		t.Error("no anthropic-version header")
	}
	body := r.JSON(t)
	pt.JSONEq(t, "request", body, `{
		"model": "claude-sonnet-4-6",
		"max_tokens": 4096,
		"stream": true,
		"cache_control": {"type": "ephemeral"},
		"system": [{"type": "text", "text": "You are a careful shell assistant."}],
		"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
	}`)
}

func TestOneToolCall(t *testing.T) {
	t.Parallel()
	p, _ := setup(t, nil, pt.SSE(fixture(t, "tool_use.sse")))
	msg, deltas, err := complete(t, p, request(agent.UserMessage("list files")))
	if err != nil {
		t.Fatal(err)
	}
	if msg.Text != "I'll list the files first." || strings.Join(deltas, "") != msg.Text {
		t.Errorf("text = %q, deltas %q", msg.Text, deltas)
	}
	if msg.StopReason != agent.StopToolUse {
		t.Errorf("stop reason = %q", msg.StopReason)
	}
	pt.JSONEq(t, "tool calls", msg.ToolCalls, `[{"id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"bash","arguments":{"command":"ls"}}]`)
	if *msg.Usage != (agent.Usage{InputTokens: 472, OutputTokens: 54}) {
		t.Errorf("usage = %+v", msg.Usage)
	}
}

func TestParallelToolCalls(t *testing.T) {
	t.Parallel()
	p, _ := setup(t, nil, pt.SSE(fixture(t, "parallel.sse")))
	msg, _, err := complete(t, p, request(agent.UserMessage("list files then delete temp logs")))
	if err != nil {
		t.Fatal(err)
	}
	pt.JSONEq(t, "tool calls", msg.ToolCalls, `[
		{"id":"toolu_01A09q90qw90lq917835lq9","name":"bash","arguments":{"command":"ls /tmp"}},
		{"id":"toolu_01B2xY7pQmN4kL8vR3sT6wZ","name":"bash","arguments":{"command":"rm -r /tmp/logs"}}
	]`)
	if msg.StopReason != agent.StopToolUse {
		t.Errorf("stop reason = %q", msg.StopReason)
	}
	// Cached input is counted as input.
	if *msg.Usage != (agent.Usage{InputTokens: 611 + 402, OutputTokens: 97}) {
		t.Errorf("usage = %+v", msg.Usage)
	}
}

func TestToolCallSplitAcrossChunks(t *testing.T) {
	t.Parallel()
	p, _ := setup(t, nil, pt.SSE(fixture(t, "split.sse")))
	msg, deltas, err := complete(t, p, request(agent.UserMessage("write hello")))
	if err != nil {
		t.Fatal(err)
	}
	if len(deltas) != 0 || msg.Text != "" {
		t.Errorf("text %q, deltas %q", msg.Text, deltas)
	}
	if len(msg.ToolCalls) != 1 {
		t.Fatalf("tool calls = %+v", msg.ToolCalls)
	}
	want := strings.TrimSpace(fixture(t, "split.args.json"))
	if got := string(msg.ToolCalls[0].Arguments); got != want {
		t.Errorf("arguments:\n got %s\nwant %s", got, want)
	}
}

func TestMalformedToolArguments(t *testing.T) {
	t.Parallel()
	p, srv := setup(t, nil, pt.SSE(fixture(t, "malformed.sse")), pt.SSE(fixture(t, "text.sse")))
	msg, _, err := complete(t, p, request(agent.UserMessage("take notes")))
	if err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != agent.StopMaxTokens {
		t.Errorf("stop reason = %q", msg.StopReason)
	}
	// The text the model sent, kept whole as a JSON string: still valid
	// JSON (the message must persist), and not an object (the runtime
	// answers with an error result).
	var raw string
	if err := json.Unmarshal(msg.ToolCalls[0].Arguments, &raw); err != nil {
		t.Fatalf("arguments %s: %v", msg.ToolCalls[0].Arguments, err)
	}
	if want := "{\"path\": \"/tmp/notes.md\", \"content\": \"# Notes\\n- first point"; raw != want {
		t.Errorf("arguments hold %q, want %q", raw, want)
	}
	if _, err := json.Marshal(msg); err != nil {
		t.Errorf("message does not marshal: %v", err)
	}

	// The runtime tells the model what it sent does not parse, quoting it.
	invalid := agent.ValidateArgs("write_file", json.RawMessage(`{"type":"object"}`), msg.ToolCalls[0].Arguments)
	if invalid == nil || !strings.Contains(invalid.Error(), "arguments are not valid JSON: "+raw) {
		t.Errorf("the runtime says %v", invalid)
	}

	// Sent back, the call carries an empty input (the API needs an object)
	// and the runtime's error result says what was wrong.
	next := request(agent.UserMessage("take notes"), *msg, agent.ToolResultMessage(agent.ToolResult{
		CallID: msg.ToolCalls[0].ID, ToolName: "write_file", IsError: true, Content: invalid.Error(),
	}))
	if _, _, err := complete(t, p, next); err != nil {
		t.Fatal(err)
	}
	msgs := srv.Request(1).JSON(t)["messages"].([]any)
	pt.JSONEq(t, "assistant message", msgs[1], `{"role":"assistant","content":[
		{"type":"tool_use","id":"toolu_01Bad1nputJs0nFr0mCut","name":"write_file","input":{}}]}`)
}

func TestRequestMapping(t *testing.T) {
	t.Parallel()
	p, srv := setup(t, &Options{MaxTokens: 1000, DisablePromptCache: true}, pt.SSE(fixture(t, "text.sse")))
	schema := `{"type":"object","properties":{"command":{"type":"string","description":"shell command"}},"required":["command"],"additionalProperties":false}`
	req := &agent.Request{
		Model:  agent.Model{ID: "claude-opus-4-7", MaxTokens: 2048},
		System: "Be brief.",
		Tools: []agent.ToolSpec{
			{Name: "bash", Description: "Run a shell command.", InputSchema: json.RawMessage(schema)},
			{Name: "now"},
		},
		Messages: []agent.Message{
			agent.UserMessage("list files then delete temp logs"),
			{Role: agent.RoleAssistant, Text: "Listing, then deleting.", StopReason: agent.StopToolUse, ToolCalls: []agent.ToolCall{
				{ID: "toolu_1", Name: "bash", Arguments: json.RawMessage(`{"command":"ls"}`)},
				{ID: "toolu_2", Name: "bash", Arguments: json.RawMessage(`{"command":"rm -r /tmp/logs"}`)},
			}},
			agent.ToolResultMessage(agent.ToolResult{CallID: "toolu_1", ToolName: "bash", Content: "logs\nnotes.md"}),
			agent.ToolResultMessage(agent.ToolResult{CallID: "toolu_2", ToolName: "bash", IsError: true,
				Content: "denied by reviewer: not during business hours"}),
			{Role: agent.RoleAssistant, Text: "The deletion was denied.", StopReason: agent.StopEndTurn},
			agent.UserMessage("ok, then just show me the date"),
			{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: "toolu_3", Name: "now", Arguments: json.RawMessage(`{}`)}}},
			agent.ToolResultMessage(agent.ToolResult{CallID: "toolu_3", ToolName: "now", IsError: true, Content: ""}),
			agent.UserMessage("never mind"),
		},
	}
	if _, _, err := complete(t, p, req); err != nil {
		t.Fatal(err)
	}
	pt.JSONEq(t, "request", srv.Request(0).JSON(t), `{
		"model": "claude-opus-4-7",
		"max_tokens": 2048,
		"stream": true,
		"system": [{"type":"text","text":"Be brief."}],
		"tools": [
			{"name":"bash","description":"Run a shell command.","input_schema":`+schema+`},
			{"name":"now","input_schema":{"type":"object","properties":{}}}
		],
		"messages": [
			{"role":"user","content":[{"type":"text","text":"list files then delete temp logs"}]},
			{"role":"assistant","content":[
				{"type":"text","text":"Listing, then deleting."},
				{"type":"tool_use","id":"toolu_1","name":"bash","input":{"command":"ls"}},
				{"type":"tool_use","id":"toolu_2","name":"bash","input":{"command":"rm -r /tmp/logs"}}]},
			{"role":"user","content":[
				{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"logs\nnotes.md"}]},
				{"type":"tool_result","tool_use_id":"toolu_2","is_error":true,
				 "content":[{"type":"text","text":"denied by reviewer: not during business hours"}]}]},
			{"role":"assistant","content":[{"type":"text","text":"The deletion was denied."}]},
			{"role":"user","content":[{"type":"text","text":"ok, then just show me the date"}]},
			{"role":"assistant","content":[{"type":"tool_use","id":"toolu_3","name":"now","input":{}}]},
			{"role":"user","content":[
				{"type":"tool_result","tool_use_id":"toolu_3","is_error":true},
				{"type":"text","text":"never mind"}]}
		]
	}`)
}

func TestThinkingBlocksGoBackWithToolCalls(t *testing.T) {
	t.Parallel()
	p, srv := setup(t, nil, pt.SSE(fixture(t, "thinking_tool.sse")), pt.SSE(fixture(t, "text.sse")))
	msg, deltas, err := complete(t, p, request(agent.UserMessage("list files")))
	if err != nil {
		t.Fatal(err)
	}
	if len(deltas) != 0 || msg.Text != "" {
		t.Errorf("thinking leaked into the text: %q %q", msg.Text, deltas)
	}
	next := request(agent.UserMessage("list files"), *msg,
		agent.ToolResultMessage(agent.ToolResult{CallID: "toolu_01ThinkThenCallLs", ToolName: "bash", Content: "a.txt"}))
	if _, _, err := complete(t, p, next); err != nil {
		t.Fatal(err)
	}
	pt.JSONEq(t, "assistant message", srv.Request(1).JSON(t)["messages"].([]any)[1], thinkingToolSent)
}

func TestRefusal(t *testing.T) {
	t.Parallel()
	p, _ := setup(t, nil, pt.SSE(fixture(t, "refusal.sse")))
	msg, deltas, err := complete(t, p, request(agent.UserMessage("something bad")))
	if err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != agent.StopRefusal || msg.Text != "I can't help with" || strings.Join(deltas, "") != msg.Text {
		t.Errorf("message = %+v, deltas %q", msg, deltas)
	}
}

func TestStopReasonMapping(t *testing.T) {
	t.Parallel()
	tests := []struct {
		api   sdk.StopReason
		calls int
		want  agent.StopReason
	}{
		{sdk.StopReasonEndTurn, 0, agent.StopEndTurn},
		{sdk.StopReasonStopSequence, 0, agent.StopEndTurn},
		{sdk.StopReasonPauseTurn, 0, agent.StopEndTurn},
		{sdk.StopReasonToolUse, 0, agent.StopEndTurn}, // no complete call: nothing to run
		{sdk.StopReasonToolUse, 2, agent.StopToolUse},
		{sdk.StopReasonEndTurn, 1, agent.StopToolUse}, // calls are answered whatever the API said
		{sdk.StopReasonMaxTokens, 0, agent.StopMaxTokens},
		{sdk.StopReasonMaxTokens, 1, agent.StopMaxTokens},
		{sdk.StopReasonModelContextWindowExceeded, 0, agent.StopMaxTokens},
		{sdk.StopReasonRefusal, 0, agent.StopRefusal},
		{sdk.StopReasonRefusal, 1, agent.StopRefusal},
		{"some_future_reason", 0, agent.StopEndTurn},
	}
	for _, tt := range tests {
		if got := stopReason(tt.api, tt.calls); got != tt.want {
			t.Errorf("stopReason(%q, %d calls) = %q, want %q", tt.api, tt.calls, got, tt.want)
		}
	}
}

func TestNonStreaming(t *testing.T) {
	t.Parallel()
	p, srv := setup(t, &Options{DisableStreaming: true}, pt.JSON(200, fixture(t, "message.json")))
	msg, deltas, err := complete(t, p, request(agent.UserMessage("list files")))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(deltas, []string{"I'll list the files first."}) {
		t.Errorf("deltas = %q", deltas)
	}
	pt.JSONEq(t, "tool calls", msg.ToolCalls, `[{"id":"toolu_01NonStream3dCall","name":"bash","arguments":{"command":"ls"}}]`)
	if msg.StopReason != agent.StopToolUse || *msg.Usage != (agent.Usage{InputTokens: 472, OutputTokens: 54}) {
		t.Errorf("message = %+v usage %+v", msg, msg.Usage)
	}
	if _, ok := srv.Request(0).JSON(t)["stream"]; ok {
		t.Error("non-streaming request has a stream field")
	}
}

const (
	authError       = `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}`
	rateLimitError  = `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit (https://docs.claude.com/en/api/rate-limits); see the response headers for current usage. Please reduce the prompt length or the maximum tokens requested, or try again later."},"request_id":"req_011CSHoF2kLnFqv7dpVy9Nkt"}`
	serverError     = `{"type":"error","error":{"type":"api_error","message":"Internal server error"},"request_id":"req_011CSHoFa4GnfTr6mBVeJzsb"}`
	overloadedError = `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_011CSHoG5xZ1rFuZqZmrHkQ8"}`
	invalidRequest  = `{"type":"error","error":{"type":"invalid_request_error","message":"model: claude-sonnet-9 is not a valid model id"},"request_id":"req_011CSHoGhq3wU2a7nTsW8pYd"}`
)

func TestErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		retries  int
		replies  func(t *testing.T) []pt.Reply
		kind     error // nil: success
		status   int
		requests int
		contains []string
	}{
		{
			name:    "401 names the variable, no retry",
			retries: 3,
			replies: func(t *testing.T) []pt.Reply {
				return []pt.Reply{pt.JSON(401, authError, "request-id", "req_011CSHoEeqs5C35K2UUqR7Fy", "x-should-retry", "false")}
			},
			kind: ErrAuth, status: 401, requests: 1,
			contains: []string{"authentication failed", "ANTHROPIC_API_KEY", "invalid x-api-key", "req_011CSHoEeqs5C35K2UUqR7Fy"},
		},
		{
			name:    "429 then success",
			retries: 2,
			replies: func(t *testing.T) []pt.Reply {
				return []pt.Reply{pt.JSON(429, rateLimitError, "retry-after", "1"), pt.SSE(fixture(t, "text.sse"))}
			},
			requests: 2,
		},
		{
			name:    "429 until the retries run out",
			retries: 1,
			replies: func(t *testing.T) []pt.Reply {
				return []pt.Reply{pt.JSON(429, rateLimitError, "retry-after", "1"), pt.JSON(429, rateLimitError, "retry-after", "1")}
			},
			kind: ErrRateLimited, status: 429, requests: 2,
			contains: []string{"rate limited", "per-minute rate limit", "after 1 retry"},
		},
		{
			name:    "500 retried, then a clear error",
			retries: 2,
			replies: func(t *testing.T) []pt.Reply {
				return []pt.Reply{pt.JSON(500, serverError), pt.JSON(500, serverError), pt.JSON(500, serverError)}
			},
			kind: ErrServer, status: 500, requests: 3,
			contains: []string{"server error", "HTTP 500", "Internal server error", "after 2 retries"},
		},
		{
			name:    "529 overloaded, then success",
			retries: 2,
			replies: func(t *testing.T) []pt.Reply {
				return []pt.Reply{pt.JSON(529, overloadedError), pt.SSE(fixture(t, "text.sse"))}
			},
			requests: 2,
		},
		{
			name:    "no retries when MaxRetries is negative",
			retries: -1,
			replies: func(t *testing.T) []pt.Reply {
				return []pt.Reply{pt.JSON(529, overloadedError)}
			},
			kind: ErrServer, status: 529, requests: 1,
			contains: []string{"overloaded_error"},
		},
		{
			name:    "400 is not retried",
			retries: 2,
			replies: func(t *testing.T) []pt.Reply {
				return []pt.Reply{pt.JSON(400, invalidRequest)}
			},
			status: 400, requests: 1,
			contains: []string{"request failed", "HTTP 400", "not a valid model id"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, srv := setup(t, &Options{MaxRetries: tt.retries}, tt.replies(t)...)
			msg, _, err := complete(t, p, request(agent.UserMessage("hi")))
			if n := len(srv.Requests()); n != tt.requests {
				t.Errorf("%d requests, want %d", n, tt.requests)
			}
			if tt.status == 0 {
				if err != nil || msg.Text == "" {
					t.Fatalf("got %v, %+v", err, msg)
				}
				return
			}
			if err == nil || msg != nil {
				t.Fatalf("got %+v, nil error", msg)
			}
			if tt.kind != nil && !errors.Is(err, tt.kind) {
				t.Errorf("error %v is not %v", err, tt.kind)
			}
			var apiErr *Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != tt.status {
				t.Errorf("error %v: not an *Error with status %d", err, tt.status)
			}
			for _, s := range tt.contains {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
		})
	}
}

func TestErrorEventInStream(t *testing.T) {
	t.Parallel()
	p, _ := setup(t, nil, pt.SSE(fixture(t, "overloaded.sse")))
	msg, deltas, err := complete(t, p, request(agent.UserMessage("hi")))
	if msg != nil || !errors.Is(err, ErrServer) {
		t.Fatalf("got %+v, %v; want ErrServer", msg, err)
	}
	var apiErr *Error
	if !errors.As(err, &apiErr) || apiErr.Type != "overloaded_error" || apiErr.Message != "Overloaded" {
		t.Errorf("error = %#v", apiErr)
	}
	if !slices.Equal(deltas, []string{"Let me"}) {
		t.Errorf("deltas = %q", deltas)
	}
}

func TestStreamCut(t *testing.T) {
	t.Parallel()
	stream := fixture(t, "tool_use.sse")
	for name, reply := range map[string]pt.Reply{
		"connection dropped": pt.Cut(stream, 7),
		"body ended early":   pt.Truncated(stream, 7),
		"before any event":   pt.Cut(stream, 0),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p, _ := setup(t, &Options{MaxRetries: -1}, reply)
			msg, _, err := complete(t, p, request(agent.UserMessage("list files")))
			if msg != nil || err == nil {
				t.Fatalf("got %+v, %v; want an error and no message", msg, err)
			}
			if name != "before any event" && !errors.Is(err, ErrIncomplete) {
				t.Errorf("error %v is not ErrIncomplete", err)
			}
		})
	}
}

func TestCancelStopsTheStream(t *testing.T) {
	t.Parallel()
	p, _ := setup(t, nil, pt.Hang(fixture(t, "text.sse"), 4, nil))
	ctx, cancel := context.WithCancel(t.Context())
	first := make(chan struct{})
	go func() {
		<-first // the client is now waiting for the rest, which never comes
		cancel()
	}()
	start := time.Now()
	var deltas []string
	msg, err := p.Complete(ctx, request(agent.UserMessage("hi")), func(s string) {
		if deltas = append(deltas, s); len(deltas) == 1 {
			close(first)
		}
	})
	if msg != nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("got %+v, %v; want context.Canceled", msg, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v to stop", d)
	}
	if !slices.Equal(deltas, []string{"Hello"}) {
		t.Errorf("deltas before the cancel = %q", deltas)
	}
}

func TestCancelledBeforeTheCall(t *testing.T) {
	t.Parallel()
	p, srv := setup(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := p.Complete(ctx, request(agent.UserMessage("hi")), nil); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v", err)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

func TestEnvironment(t *testing.T) {
	srv := pt.New(t, pt.SSE(pt.File(t, "testdata/text.sse")))
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-from-env")
	t.Setenv("ANTHROPIC_AUTH_TOKEN", "")
	t.Setenv("ANTHROPIC_BASE_URL", srv.URL)
	p := New(&Options{Model: "claude-haiku-4-5"})
	if _, err := p.Complete(t.Context(), &agent.Request{Messages: []agent.Message{agent.UserMessage("hi")}}, nil); err != nil {
		t.Fatal(err)
	}
	r := srv.Request(0)
	if got := r.Header.Get("Authorization"); got != "Bearer sk-ant-from-env" {
		t.Errorf("Authorization = %q", got)
	}
	if got := r.JSON(t)["model"]; got != "claude-haiku-4-5" {
		t.Errorf("model = %v", got)
	}
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	p, srv := setup(t, nil)
	for name, req := range map[string]*agent.Request{
		"no model": {Messages: []agent.Message{agent.UserMessage("hi")}},
		"bad schema": {Model: agent.Model{ID: "m"}, Messages: []agent.Message{agent.UserMessage("hi")},
			Tools: []agent.ToolSpec{{Name: "x", InputSchema: json.RawMessage(`[1]`)}}},
		"tool message without result": {Model: agent.Model{ID: "m"}, Messages: []agent.Message{{Role: agent.RoleTool}}},
		"unknown role":                {Model: agent.Model{ID: "m"}, Messages: []agent.Message{{Role: "system", Text: "x"}}},
		"nil":                         nil,
	} {
		if _, err := p.Complete(t.Context(), req, nil); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

func TestOddStreams(t *testing.T) {
	t.Parallel()
	events := pt.Events(fixture(t, "text.sse"))
	with := func(i int, extra ...string) string {
		return strings.Join(slices.Insert(slices.Clone(events), i, extra...), "\n\n") + "\n\n"
	}
	tests := map[string]struct {
		stream string
		ok     bool
	}{
		"unknown event type is skipped": {with(3, "event: future_event\ndata: {\"type\":\"future_event\",\"index\":0}"), true},
		"comment lines are skipped":     {with(3, ": keep-alive"), true},
		"delta for a block not started": {with(1, `event: content_block_delta`+"\n"+`data: {"type":"content_block_delta","index":4,"delta":{"type":"text_delta","text":"x"}}`), false},
		"block out of order":            {with(1, `event: content_block_start`+"\n"+`data: {"type":"content_block_start","index":2,"content_block":{"type":"text","text":""}}`), false},
		"data that is not JSON":         {with(3, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"ind"), false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p, _ := setup(t, nil, pt.SSE(tt.stream))
			msg, _, err := complete(t, p, request(agent.UserMessage("hi")))
			if tt.ok && (err != nil || msg.Text != "Hello! How can I help you today?") {
				t.Errorf("got %+v, %v", msg, err)
			}
			if !tt.ok && (err == nil || msg != nil) {
				t.Errorf("got %+v, %v; want an error", msg, err)
			}
		})
	}
}
