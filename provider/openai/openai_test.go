package openai

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/option"

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
	if o.APIKey == "" {
		o.APIKey = "sk-proj-test"
	}
	o.BaseURL = srv.URL + "/v1"
	return newProvider(&o, fastRetries()), srv
}

func fixture(t *testing.T, name string) string { return pt.File(t, "testdata/"+name) }

func request(msgs ...agent.Message) *agent.Request {
	return &agent.Request{
		Model:    agent.Model{ID: "gpt-4.1"},
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
	p, srv := setup(t, nil, pt.SSE(fixture(t, "text.sse")))
	msg, deltas, err := complete(t, p, request(agent.UserMessage("hi")))
	if err != nil {
		t.Fatal(err)
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
	if msg.Usage == nil || *msg.Usage != (agent.Usage{InputTokens: 19, OutputTokens: 10}) {
		t.Errorf("usage = %+v", msg.Usage)
	}

	r := srv.Request(0)
	if r.Method != http.MethodPost || r.Path != "/v1/chat/completions" {
		t.Errorf("request %s %s", r.Method, r.Path)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer sk-proj-test" {
		t.Errorf("Authorization = %q", got)
	}
	pt.JSONEq(t, "request", r.JSON(t), `{
		"model": "gpt-4.1",
		"stream": true,
		"stream_options": {"include_usage": true},
		"messages": [
			{"role": "system", "content": "You are a careful shell assistant."},
			{"role": "user", "content": "hi"}
		]
	}`)
}

func TestOneToolCall(t *testing.T) {
	t.Parallel()
	p, _ := setup(t, nil, pt.SSE(fixture(t, "tool_call.sse")))
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
	pt.JSONEq(t, "tool calls", msg.ToolCalls, `[{"id":"call_DdmO9pD3xa9XTPNJ32zg2hcA","name":"bash","arguments":{"command":"ls"}}]`)
	if *msg.Usage != (agent.Usage{InputTokens: 96, OutputTokens: 18}) {
		t.Errorf("usage = %+v", msg.Usage)
	}
}

func TestParallelToolCalls(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"parallel.sse", "ollama_parallel.sse"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p, _ := setup(t, nil, pt.SSE(fixture(t, name)))
			msg, _, err := complete(t, p, request(agent.UserMessage("list files then delete temp logs")))
			if err != nil {
				t.Fatal(err)
			}
			if len(msg.ToolCalls) != 2 {
				t.Fatalf("tool calls = %+v", msg.ToolCalls)
			}
			for i, want := range []string{`{"command":"ls /tmp"}`, `{"command":"rm -r /tmp/logs"}`} {
				c := msg.ToolCalls[i]
				if c.Name != "bash" || c.ID == "" || string(c.Arguments) != want {
					t.Errorf("call %d = %s %s %s, want bash %s", i, c.ID, c.Name, c.Arguments, want)
				}
			}
			if msg.ToolCalls[0].ID == msg.ToolCalls[1].ID {
				t.Errorf("both calls have id %s", msg.ToolCalls[0].ID)
			}
			// Ollama says "stop" even when it calls tools.
			if msg.StopReason != agent.StopToolUse {
				t.Errorf("stop reason = %q", msg.StopReason)
			}
		})
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
	if len(msg.ToolCalls) != 1 || msg.ToolCalls[0].ID != "call_SpL1tAcr055ManyChunk5xyz" {
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
	msg, _, err := complete(t, p, request(agent.UserMessage("list /tmp")))
	if err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != agent.StopToolUse {
		t.Errorf("stop reason = %q", msg.StopReason)
	}
	// The text the model sent, kept whole as a JSON string: still valid
	// JSON (the message must persist), and not an object (the runtime
	// answers with an error result).
	var raw string
	if err := json.Unmarshal(msg.ToolCalls[0].Arguments, &raw); err != nil {
		t.Fatalf("arguments %s: %v", msg.ToolCalls[0].Arguments, err)
	}
	if want := `{"command": "ls -la /tmp}`; raw != want {
		t.Errorf("arguments hold %q, want %q", raw, want)
	}
	if _, err := json.Marshal(msg); err != nil {
		t.Errorf("message does not marshal: %v", err)
	}
	if *msg.Usage != (agent.Usage{InputTokens: 210, OutputTokens: 21}) {
		t.Errorf("usage = %+v", msg.Usage)
	}

	// The runtime tells the model what it sent does not parse, quoting it.
	invalid := agent.ValidateArgs("bash", json.RawMessage(`{"type":"object"}`), msg.ToolCalls[0].Arguments)
	if invalid == nil || !strings.Contains(invalid.Error(), "arguments are not valid JSON: "+raw) {
		t.Errorf("the runtime says %v", invalid)
	}

	// Sent back, the call carries exactly the text the model wrote, and
	// the error result says what was wrong.
	next := request(agent.UserMessage("list /tmp"), *msg, agent.ToolResultMessage(agent.ToolResult{
		CallID: msg.ToolCalls[0].ID, ToolName: "bash", IsError: true, Content: invalid.Error(),
	}))
	if _, _, err := complete(t, p, next); err != nil {
		t.Fatal(err)
	}
	msgs := srv.Request(1).JSON(t)["messages"].([]any)
	pt.JSONEq(t, "conversation", msgs[2:], `[
		{"role":"assistant","tool_calls":[{"id":"chatcmpl-tool-7d3b0f1c2a9e4b5f8c6d","type":"function",
			"function":{"name":"bash","arguments":"{\"command\": \"ls -la /tmp}"}}]},
		{"role":"tool","tool_call_id":"chatcmpl-tool-7d3b0f1c2a9e4b5f8c6d",
			"content":"Error: invalid arguments for tool \"bash\": 1 problem: (arguments): arguments are not valid JSON: {\"command\": \"ls -la /tmp}"}]`)
}

func TestRequestMapping(t *testing.T) {
	t.Parallel()
	p, srv := setup(t, &Options{MaxTokens: 1000}, pt.SSE(fixture(t, "text.sse")))
	schema := `{"type":"object","properties":{"command":{"type":"string","description":"shell command"},"timeout":{"type":"number","maximum":1e3}},"required":["command"],"additionalProperties":false}`
	temp := 0.2
	req := &agent.Request{
		Model:  agent.Model{ID: "qwen3:8b", Temperature: &temp},
		System: "Be brief.",
		Tools: []agent.ToolSpec{
			{Name: "bash", Description: "Run a shell command.", InputSchema: json.RawMessage(schema)},
			{Name: "now"},
		},
		Messages: []agent.Message{
			agent.UserMessage("list files then delete temp logs"),
			{Role: agent.RoleAssistant, Text: "Listing, then deleting.", StopReason: agent.StopToolUse, ToolCalls: []agent.ToolCall{
				{ID: "call_1", Name: "bash", Arguments: json.RawMessage(`{"command":"ls"}`)},
				{ID: "call_2", Name: "bash", Arguments: json.RawMessage(`{"command":"rm -r /tmp/logs"}`)},
			}},
			agent.ToolResultMessage(agent.ToolResult{CallID: "call_1", ToolName: "bash", Content: "logs\nnotes.md"}),
			agent.ToolResultMessage(agent.ToolResult{CallID: "call_2", ToolName: "bash", IsError: true,
				Content: "denied by reviewer: not during business hours"}),
			{Role: agent.RoleAssistant, Text: "The deletion was denied.", StopReason: agent.StopEndTurn},
			agent.UserMessage("ok, then just show me the date"),
			{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: "call_3", Name: "now", Arguments: json.RawMessage(`{}`)}}},
			agent.ToolResultMessage(agent.ToolResult{CallID: "call_3", ToolName: "now", IsError: true, Content: "Error: approval_timeout"}),
			agent.ToolResultMessage(agent.ToolResult{CallID: "call_4", ToolName: "now", IsError: true}),
		},
	}
	if _, _, err := complete(t, p, req); err != nil {
		t.Fatal(err)
	}
	pt.JSONEq(t, "request", srv.Request(0).JSON(t), `{
		"model": "qwen3:8b",
		"max_tokens": 1000,
		"temperature": 0.2,
		"stream": true,
		"stream_options": {"include_usage": true},
		"tools": [
			{"type":"function","function":{"name":"bash","description":"Run a shell command.","parameters":`+schema+`}},
			{"type":"function","function":{"name":"now","parameters":{"type":"object","properties":{}}}}
		],
		"messages": [
			{"role":"system","content":"Be brief."},
			{"role":"user","content":"list files then delete temp logs"},
			{"role":"assistant","content":"Listing, then deleting.","tool_calls":[
				{"id":"call_1","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}},
				{"id":"call_2","type":"function","function":{"name":"bash","arguments":"{\"command\":\"rm -r /tmp/logs\"}"}}]},
			{"role":"tool","tool_call_id":"call_1","content":"logs\nnotes.md"},
			{"role":"tool","tool_call_id":"call_2","content":"Error: denied by reviewer: not during business hours"},
			{"role":"assistant","content":"The deletion was denied."},
			{"role":"user","content":"ok, then just show me the date"},
			{"role":"assistant","tool_calls":[{"id":"call_3","type":"function","function":{"name":"now","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"call_3","content":"Error: approval_timeout"},
			{"role":"tool","tool_call_id":"call_4","content":"Error: the tool call failed."}
		]
	}`)
}

func TestMaxTokensField(t *testing.T) {
	t.Parallel()
	tests := []struct {
		opts Options
		want string
	}{
		{Options{MaxTokens: 300}, `"max_tokens":300`},
		{Options{MaxTokens: 300, MaxTokensField: MaxCompletionTokens}, `"max_completion_tokens":300`},
	}
	for _, tt := range tests {
		p, srv := setup(t, &tt.opts, pt.SSE(fixture(t, "text.sse")))
		if _, _, err := complete(t, p, request(agent.UserMessage("hi"))); err != nil {
			t.Fatal(err)
		}
		if body := string(srv.Request(0).Body); !strings.Contains(body, tt.want) {
			t.Errorf("%+v: body %s lacks %s", tt.opts, body, tt.want)
		}
	}
	// OpenAI's own API gets the current name.
	if p := New(&Options{APIKey: "x", BaseURL: DefaultBaseURL}); p.tokenField != MaxCompletionTokens {
		t.Errorf("api.openai.com: field %q", p.tokenField)
	}
	if p := New(&Options{APIKey: "x", BaseURL: "http://localhost:11434/v1"}); p.tokenField != MaxTokens {
		t.Errorf("ollama: field %q", p.tokenField)
	}
}

func TestStopReasons(t *testing.T) {
	t.Parallel()
	p, _ := setup(t, nil, pt.SSE(fixture(t, "refusal.sse")), pt.SSE(fixture(t, "length.sse")), pt.SSE(fixture(t, "content_filter.sse")))
	msg, deltas, err := complete(t, p, request(agent.UserMessage("something bad")))
	if err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != agent.StopRefusal || msg.Text != "I'm sorry, I can't help with that." || len(deltas) != 1 {
		t.Errorf("refusal: %+v, deltas %q", msg, deltas)
	}
	msg, _, err = complete(t, p, request(agent.UserMessage("write a lot")))
	if err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != agent.StopMaxTokens || msg.Text != "The first" {
		t.Errorf("length: %+v", msg)
	}
	msg, deltas, err = complete(t, p, request(agent.UserMessage("something filtered")))
	if err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != agent.StopContentFilter || msg.Text != "Here is how" || strings.Join(deltas, "") != msg.Text {
		t.Errorf("content filter: %+v, deltas %q", msg, deltas)
	}
	if *msg.Usage != (agent.Usage{InputTokens: 28, OutputTokens: 3}) {
		t.Errorf("content filter: usage %+v", msg.Usage)
	}
}

func TestStopReasonsNonStreaming(t *testing.T) {
	t.Parallel()
	reply := func(finish, refusal string) pt.Reply {
		return pt.JSON(200, `{"id":"chatcmpl-x","object":"chat.completion","created":1764482400,"model":"gpt-4.1-2025-04-14",
			"choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":`+refusal+`},"logprobs":null,"finish_reason":"`+finish+`"}],
			"usage":{"prompt_tokens":28,"completion_tokens":3,"total_tokens":31}}`)
	}
	p, _ := setup(t, &Options{DisableStreaming: true}, reply("content_filter", "null"), reply("stop", `"I can't help with that."`))
	for _, want := range []agent.StopReason{agent.StopContentFilter, agent.StopRefusal} {
		msg, _, err := complete(t, p, request(agent.UserMessage("something bad")))
		if err != nil {
			t.Fatal(err)
		}
		if msg.StopReason != want {
			t.Errorf("stop reason = %q, want %q", msg.StopReason, want)
		}
	}
}

func TestStopReasonMapping(t *testing.T) {
	t.Parallel()
	tests := []struct {
		finish  string
		refused bool
		calls   int
		want    agent.StopReason
	}{
		{"stop", false, 0, agent.StopEndTurn},
		{"stop", false, 1, agent.StopToolUse}, // local servers say stop with calls
		{"tool_calls", false, 0, agent.StopEndTurn},
		{"tool_calls", false, 2, agent.StopToolUse},
		{"length", false, 0, agent.StopMaxTokens},
		{"length", false, 1, agent.StopMaxTokens},
		{"content_filter", false, 0, agent.StopContentFilter},
		{"content_filter", false, 1, agent.StopContentFilter},
		{"stop", true, 0, agent.StopRefusal},
		{"some_future_reason", false, 0, agent.StopEndTurn},
	}
	for _, tt := range tests {
		if got := stopReason(tt.finish, tt.refused, tt.calls); got != tt.want {
			t.Errorf("stopReason(%q, refused %v, %d calls) = %q, want %q", tt.finish, tt.refused, tt.calls, got, tt.want)
		}
	}
}

func TestNonStreaming(t *testing.T) {
	t.Parallel()
	p, srv := setup(t, &Options{DisableStreaming: true}, pt.JSON(200, fixture(t, "completion.json")))
	msg, deltas, err := complete(t, p, request(agent.UserMessage("list files")))
	if err != nil {
		t.Fatal(err)
	}
	if len(deltas) != 0 {
		t.Errorf("deltas = %q", deltas)
	}
	pt.JSONEq(t, "tool calls", msg.ToolCalls, `[{"id":"call_N0nStr3amedCa11abc123","name":"bash","arguments":{"command":"ls"}}]`)
	if msg.StopReason != agent.StopToolUse || *msg.Usage != (agent.Usage{InputTokens: 96, OutputTokens: 18}) {
		t.Errorf("message = %+v usage %+v", msg, msg.Usage)
	}
	body := srv.Request(0).JSON(t)
	if _, ok := body["stream"]; ok {
		t.Error("non-streaming request has a stream field")
	}
	if _, ok := body["stream_options"]; ok {
		t.Error("non-streaming request has stream_options")
	}
}

const (
	authError      = `{"error":{"message":"Incorrect API key provided: sk-proj-****test. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`
	rateLimitError = `{"error":{"message":"Rate limit reached for gpt-4.1 in organization org-abc on tokens per min (TPM): Limit 30000, Used 29800, Requested 1200. Please try again in 2.4s.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`
	serverError    = `{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`
	ollamaNotFound = `{"error":{"message":"model \"llama3\" not found, try pulling it first","type":"api_error","param":null,"code":null}}`
	vllmNotFound   = `{"object":"error","message":"The model ` + "`llama3`" + ` does not exist.","type":"NotFoundError","param":null,"code":404}`
	llamacppBusy   = `{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}`
	proxyHTML      = `<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>`
)

func TestErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		retries  int
		noKey    bool
		replies  func(t *testing.T) []pt.Reply
		kind     error // nil: no kind
		status   int   // 0: success
		requests int
		contains []string
	}{
		{
			name: "401 names the variable, no retry", retries: 3,
			replies: func(t *testing.T) []pt.Reply { return []pt.Reply{pt.JSON(401, authError)} },
			kind:    ErrAuth, status: 401, requests: 1,
			contains: []string{"authentication failed", "OPENAI_API_KEY", "invalid_api_key", "Incorrect API key"},
		},
		{
			name: "401 without a key says none is set", noKey: true,
			replies: func(t *testing.T) []pt.Reply {
				return []pt.Reply{pt.JSON(401, `{"error":{"message":"You didn't provide an API key.","type":"invalid_request_error","param":null,"code":null}}`)}
			},
			kind: ErrAuth, status: 401, requests: 1,
			contains: []string{"no API key is set", "OPENAI_API_KEY"},
		},
		{
			name: "429 then success", retries: 2,
			replies: func(t *testing.T) []pt.Reply {
				return []pt.Reply{pt.JSON(429, rateLimitError, "retry-after", "1"), pt.SSE(fixture(t, "text.sse"))}
			},
			requests: 2,
		},
		{
			name: "429 until the retries run out", retries: 1,
			replies: func(t *testing.T) []pt.Reply {
				return []pt.Reply{pt.JSON(429, rateLimitError), pt.JSON(429, rateLimitError)}
			},
			kind: ErrRateLimited, status: 429, requests: 2,
			contains: []string{"rate limited", "rate_limit_exceeded", "after 1 retry"},
		},
		{
			name: "500 retried, then a clear error", retries: 2,
			replies: func(t *testing.T) []pt.Reply {
				return []pt.Reply{pt.JSON(500, serverError), pt.JSON(500, serverError), pt.JSON(500, serverError)}
			},
			kind: ErrServer, status: 500, requests: 3,
			contains: []string{"server error", "HTTP 500", "Sorry about that", "after 2 retries"},
		},
		{
			name: "llama.cpp loading, numeric code", retries: -1,
			replies: func(t *testing.T) []pt.Reply { return []pt.Reply{pt.JSON(503, llamacppBusy)} },
			kind:    ErrServer, status: 503, requests: 1,
			contains: []string{"Loading model"},
		},
		{
			name: "proxy HTML page", retries: -1,
			replies: func(t *testing.T) []pt.Reply {
				return []pt.Reply{func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "text/html")
					w.WriteHeader(502)
					_, _ = w.Write([]byte(proxyHTML))
				}}
			},
			kind: ErrServer, status: 502, requests: 1,
			contains: []string{"HTTP 502", "502 Bad Gateway"},
		},
		{
			name: "Ollama: model not pulled", retries: 2,
			replies: func(t *testing.T) []pt.Reply { return []pt.Reply{pt.JSON(404, ollamaNotFound)} },
			status:  404, requests: 1,
			contains: []string{"request failed", "HTTP 404", "try pulling it first"},
		},
		{
			name: "FastAPI validation detail", retries: 2,
			replies: func(t *testing.T) []pt.Reply {
				return []pt.Reply{pt.JSON(422, `{"detail":[{"loc":["body","messages"],"msg":"field required","type":"value_error.missing"}]}`)}
			},
			status: 422, requests: 1,
			contains: []string{"HTTP 422", "field required"},
		},
		{
			name: "vLLM: error at the top level", retries: 2,
			replies: func(t *testing.T) []pt.Reply { return []pt.Reply{pt.JSON(404, vllmNotFound)} },
			status:  404, requests: 1,
			contains: []string{"HTTP 404", "NotFoundError", "does not exist"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			opts := &Options{MaxRetries: tt.retries}
			srv := pt.New(t, tt.replies(t)...)
			opts.BaseURL = srv.URL + "/v1"
			if !tt.noKey {
				opts.APIKey = "sk-proj-test"
			}
			p := newProvider(opts, fastRetries())
			p.keyed = !tt.noKey // whatever $OPENAI_API_KEY holds here
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
	p, _ := setup(t, nil, pt.SSE(fixture(t, "error_event.sse")))
	msg, deltas, err := complete(t, p, request(agent.UserMessage("hi")))
	if msg != nil || !errors.Is(err, ErrServer) {
		t.Fatalf("got %+v, %v; want ErrServer", msg, err)
	}
	var apiErr *Error
	if !errors.As(err, &apiErr) || apiErr.Type != "server_error" || !strings.Contains(apiErr.Message, "Sorry about that") {
		t.Errorf("error = %#v", apiErr)
	}
	if !slices.Equal(deltas, []string{"Let me"}) {
		t.Errorf("deltas = %q", deltas)
	}
}

func TestStreamCut(t *testing.T) {
	t.Parallel()
	stream := fixture(t, "tool_call.sse")
	for name, reply := range map[string]pt.Reply{
		"connection dropped":      pt.Cut(stream, 4),
		"body ended early":        pt.Truncated(stream, 4),
		"no [DONE], no finish":    pt.Truncated(stream, 7),
		"before any event":        pt.Cut(stream, 0),
		"usage chunk but no stop": pt.SSE(strings.Join(slices.Delete(pt.Events(stream), 7, 8), "\n\n")),
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
	p, _ := setup(t, nil, pt.Hang(fixture(t, "text.sse"), 2, nil))
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

func TestEnvironment(t *testing.T) {
	srv := pt.New(t, pt.SSE(pt.File(t, "testdata/text.sse")), pt.SSE(pt.File(t, "testdata/text.sse")))
	t.Setenv("OPENAI_API_KEY", "sk-from-env")
	t.Setenv("OPENAI_BASE_URL", srv.URL+"/v1")
	p := New(&Options{Model: "gpt-4.1-mini"})
	if _, err := p.Complete(t.Context(), &agent.Request{Messages: []agent.Message{agent.UserMessage("hi")}}, nil); err != nil {
		t.Fatal(err)
	}
	r := srv.Request(0)
	if got := r.Header.Get("Authorization"); got != "Bearer sk-from-env" {
		t.Errorf("Authorization = %q", got)
	}
	if got := r.JSON(t)["model"]; got != "gpt-4.1-mini" {
		t.Errorf("model = %v", got)
	}

	// A local server without a key: no Authorization header at all.
	t.Setenv("OPENAI_API_KEY", "")
	p = New(&Options{BaseURL: srv.URL + "/v1"})
	if _, err := p.Complete(t.Context(), request(agent.UserMessage("hi")), nil); err != nil {
		t.Fatal(err)
	}
	if got, ok := srv.Request(1).Header["Authorization"]; ok {
		t.Errorf("Authorization = %q, want none", got)
	}
}

func TestServerDown(t *testing.T) {
	t.Parallel()
	p := New(&Options{BaseURL: "http://127.0.0.1:1/v1", MaxRetries: -1})
	_, err := p.Complete(t.Context(), request(agent.UserMessage("hi")), nil)
	if err == nil || !strings.Contains(err.Error(), "cannot reach http://127.0.0.1:1/v1") {
		t.Errorf("err = %v", err)
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
	bad := New(&Options{APIKey: "x", BaseURL: srv.URL, MaxTokens: 10, MaxTokensField: "max_output_tokens"})
	if _, err := bad.Complete(t.Context(), request(agent.UserMessage("hi")), nil); err == nil {
		t.Error("bad MaxTokensField: no error")
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
		"comment lines are skipped":   {with(2, ": OPENROUTER PROCESSING"), true},
		"other choices are ignored":   {with(2, `data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":1,"delta":{"content":"other"},"finish_reason":null}]}`), true},
		"usage-only chunk, null list": {with(5, `data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":null,"usage":{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29}}`), true},
		"data that is not JSON":       {with(2, `data: {"id":"x","object":"chat.comp`), false},
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
