package openai

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/tollgate-ai/tollgate/agent"
)

// DefaultBaseURL is OpenAI's own API.
const DefaultBaseURL = "https://api.openai.com/v1"

// Names of the request field that caps the reply, for Options.MaxTokensField.
const (
	// MaxCompletionTokens is OpenAI's current name, which its reasoning
	// models require.
	MaxCompletionTokens = "max_completion_tokens"
	// MaxTokens is the older name, the one Ollama, LM Studio, llama.cpp's
	// server and most other OpenAI-compatible servers read.
	MaxTokens = "max_tokens"
)

// Options configure a [Provider]. A nil *Options is the same as a zero one.
type Options struct {
	// APIKey is sent as a bearer token. Zero: $OPENAI_API_KEY; when that is
	// unset too, no Authorization header is sent, which local servers such
	// as Ollama accept.
	APIKey string
	// BaseURL is the API's root, up to and including /v1, for example
	// http://localhost:11434/v1 for Ollama. Zero: $OPENAI_BASE_URL, or
	// [DefaultBaseURL] when that is unset.
	BaseURL string
	// HTTPClient sends the requests. Zero: the SDK's default client.
	HTTPClient *http.Client
	// MaxRetries bounds how often a call that failed with 408, 409, 429,
	// 5xx or a connection error is retried, with the SDK's backoff (the
	// server's retry-after when given, otherwise 0.5s doubling up to 8s).
	// Zero: the SDK's default, 2. Negative: no retries.
	MaxRetries int
	// MaxTokens caps a reply when agent.Model.MaxTokens is zero. Zero: no
	// cap is sent and the server decides.
	MaxTokens int
	// MaxTokensField names the request field that carries the cap:
	// [MaxCompletionTokens] or [MaxTokens]. Zero: max_completion_tokens when
	// the base URL is api.openai.com, max_tokens for any other server.
	MaxTokensField string
	// Model is the model id used when agent.Model.ID is empty. Zero: every
	// request must name its model.
	Model string
	// DisableStreaming makes each call one plain request (for servers that
	// do not stream tool calls); onText then gets the whole text at once.
	// Zero: replies are streamed.
	DisableStreaming bool
}

// Provider calls an OpenAI-compatible Chat Completions API. It implements
// agent.Provider and is safe for concurrent use.
type Provider struct {
	client     sdk.Client
	baseURL    string
	keyed      bool // an API key is configured
	model      string
	maxTokens  int
	tokenField string
	maxRetries int
	stream     bool
}

var _ agent.Provider = (*Provider)(nil)

// New returns a Provider configured by opts, which may be nil.
func New(opts *Options) *Provider { return newProvider(opts) }

// newProvider is New with extra SDK options, for tests.
func newProvider(opts *Options, extra ...option.RequestOption) *Provider {
	if opts == nil {
		opts = &Options{}
	}
	baseURL := opts.BaseURL
	if baseURL == "" {
		baseURL = os.Getenv("OPENAI_BASE_URL")
	}
	if baseURL == "" {
		baseURL = DefaultBaseURL
	}
	key := opts.APIKey
	if key == "" {
		key = os.Getenv("OPENAI_API_KEY")
	}
	maxRetries := 2
	switch {
	case opts.MaxRetries > 0:
		maxRetries = opts.MaxRetries
	case opts.MaxRetries < 0:
		maxRetries = 0
	}
	ro := []option.RequestOption{
		option.WithBaseURL(baseURL),
		option.WithAPIKey(key),
		option.WithMaxRetries(maxRetries),
		option.WithMiddleware(normalizeErrorBody),
	}
	if opts.HTTPClient != nil {
		ro = append(ro, option.WithHTTPClient(opts.HTTPClient))
	}
	ro = append(ro, extra...)
	field := opts.MaxTokensField
	if field == "" {
		field = MaxTokens
		if u, err := url.Parse(baseURL); err == nil && u.Hostname() == "api.openai.com" {
			field = MaxCompletionTokens
		}
	}
	return &Provider{
		client:     sdk.NewClient(ro...),
		baseURL:    baseURL,
		keyed:      key != "",
		model:      opts.Model,
		maxTokens:  opts.MaxTokens,
		tokenField: field,
		maxRetries: maxRetries,
		stream:     !opts.DisableStreaming,
	}
}

// Complete sends req to the Chat Completions API and returns the assistant
// message. See the package documentation for how messages, stop reasons,
// usage and errors are mapped.
func (p *Provider) Complete(ctx context.Context, req *agent.Request, onText func(string)) (*agent.Message, error) {
	if req == nil {
		return nil, errors.New("openai: nil request")
	}
	params, err := p.params(req)
	if err != nil {
		return nil, err
	}
	if p.stream {
		return p.streamed(ctx, params, onText)
	}
	return p.single(ctx, params, onText)
}

func (p *Provider) params(req *agent.Request) (sdk.ChatCompletionNewParams, error) {
	model := req.Model.ID
	if model == "" {
		model = p.model
	}
	if model == "" {
		return sdk.ChatCompletionNewParams{}, errors.New("openai: no model: set agent.Model.ID or Options.Model")
	}
	params := sdk.ChatCompletionNewParams{Model: shared.ChatModel(model)}
	maxTokens := req.Model.MaxTokens
	if maxTokens <= 0 {
		maxTokens = p.maxTokens
	}
	if maxTokens > 0 {
		switch p.tokenField {
		case MaxCompletionTokens:
			params.MaxCompletionTokens = sdk.Int(int64(maxTokens))
		case MaxTokens:
			params.MaxTokens = sdk.Int(int64(maxTokens))
		default:
			return params, fmt.Errorf("openai: Options.MaxTokensField %q is neither %q nor %q", p.tokenField, MaxCompletionTokens, MaxTokens)
		}
	}
	if t := req.Model.Temperature; t != nil {
		params.Temperature = sdk.Float(*t)
	}
	msgs, err := messages(req.System, req.Messages)
	if err != nil {
		return params, err
	}
	params.Messages = msgs
	for _, spec := range req.Tools {
		tool, err := toolParam(spec)
		if err != nil {
			return params, err
		}
		params.Tools = append(params.Tools, tool)
	}
	return params, nil
}

func messages(system string, in []agent.Message) ([]sdk.ChatCompletionMessageParamUnion, error) {
	var out []sdk.ChatCompletionMessageParamUnion
	if system != "" {
		out = append(out, sdk.SystemMessage(system))
	}
	for i, m := range in {
		switch m.Role {
		case agent.RoleUser:
			if m.Text != "" {
				out = append(out, sdk.UserMessage(m.Text))
			}
		case agent.RoleAssistant:
			if a := assistant(&m); a != nil {
				out = append(out, sdk.ChatCompletionMessageParamUnion{OfAssistant: a})
			}
		case agent.RoleTool:
			if m.Result == nil {
				return nil, fmt.Errorf("openai: message %d: tool message without a result", i)
			}
			out = append(out, sdk.ToolMessage(toolContent(m.Result), m.Result.CallID))
		default:
			return nil, fmt.Errorf("openai: message %d: unknown role %q", i, m.Role)
		}
	}
	return out, nil
}

func assistant(m *agent.Message) *sdk.ChatCompletionAssistantMessageParam {
	if m.Text == "" && len(m.ToolCalls) == 0 {
		return nil
	}
	a := &sdk.ChatCompletionAssistantMessageParam{}
	if m.Text != "" {
		a.Content.OfString = sdk.String(m.Text)
	}
	for _, c := range m.ToolCalls {
		a.ToolCalls = append(a.ToolCalls, sdk.ChatCompletionMessageToolCallUnionParam{
			OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
				ID: c.ID,
				Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{
					Name:      c.Name,
					Arguments: argumentText(c.Arguments),
				},
			},
		})
	}
	return a
}

// toolContent is what the model reads for a result. The API has no error
// flag, so an error result says so in its text.
func toolContent(r *agent.ToolResult) string {
	if !r.IsError {
		return r.Content
	}
	if r.Content == "" {
		return "Error: the tool call failed."
	}
	if strings.HasPrefix(strings.ToLower(r.Content), "error") {
		return r.Content
	}
	return "Error: " + r.Content
}

func toolParam(spec agent.ToolSpec) (sdk.ChatCompletionToolUnionParam, error) {
	params := shared.FunctionParameters{"type": "object", "properties": map[string]any{}}
	if len(bytes.TrimSpace(spec.InputSchema)) > 0 {
		// Each member stays raw JSON, so the schema goes out as written.
		var members map[string]json.RawMessage
		if err := json.Unmarshal(spec.InputSchema, &members); err != nil || members == nil {
			return sdk.ChatCompletionToolUnionParam{}, fmt.Errorf("openai: tool %q: input schema is not a JSON object", spec.Name)
		}
		params = make(shared.FunctionParameters, len(members))
		for k, v := range members {
			params[k] = v
		}
	}
	fn := shared.FunctionDefinitionParam{Name: spec.Name, Parameters: params}
	if spec.Description != "" {
		fn.Description = sdk.String(spec.Description)
	}
	return sdk.ChatCompletionFunctionTool(fn), nil
}

// arguments turns the arguments text the model sent into
// ToolCall.Arguments, which must stay valid JSON (the message is persisted
// as JSON before any tool runs): a JSON value is kept as is, nothing
// becomes {}, and text that does not parse becomes a JSON string holding
// it, so the runtime sees a non-object and answers with an error result
// the model can correct.
func arguments(raw string) json.RawMessage {
	s := strings.TrimSpace(raw)
	if s == "" {
		return json.RawMessage(`{}`)
	}
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(raw) // a string always marshals
	return b
}

// argumentText is the inverse of arguments, for sending a call back: a
// JSON string is the text the model sent.
func argumentText(args json.RawMessage) string {
	var s string
	if json.Unmarshal(args, &s) == nil {
		return s
	}
	if len(bytes.TrimSpace(args)) == 0 {
		return "{}"
	}
	return string(args)
}

// callID returns id, or a fresh one for servers that send none: the
// runtime derives question ids from call ids, so they must be unique
// within a thread.
func callID(id string) string {
	if id != "" {
		return id
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "call_" + hex.EncodeToString(b[:])
}

// stopReason maps a finish reason; refused says the reply carried refusal
// text. A turn that asks for tools is a tool-use stop whatever the server
// said (some local servers say "stop"), unless it ran out of tokens, was
// filtered or was refused (the runtime answers the calls of any message that
// has them, so none is left unanswered either way).
func stopReason(finish string, refused bool, toolCalls int) agent.StopReason {
	switch {
	case finish == "length":
		return agent.StopMaxTokens
	case finish == "content_filter":
		return agent.StopContentFilter
	case refused:
		return agent.StopRefusal
	case toolCalls > 0:
		return agent.StopToolUse
	}
	// stop, and tool_calls without a call.
	return agent.StopEndTurn
}
