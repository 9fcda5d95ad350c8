package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/tollgate-ai/tollgate/agent"
)

// DefaultMaxTokens caps a reply when neither agent.Model.MaxTokens nor
// Options.MaxTokens says otherwise; the Messages API requires a cap.
const DefaultMaxTokens = 4096

// Options configure a [Provider]. A nil *Options is the same as a zero one.
type Options struct {
	// APIKey authenticates the requests. Zero: the SDK's credential chain,
	// which starts with $ANTHROPIC_API_KEY (then $ANTHROPIC_AUTH_TOKEN and
	// the profiles of the ant CLI).
	APIKey string
	// BaseURL is where the Messages API is served, without /v1. Zero:
	// $ANTHROPIC_BASE_URL, or https://api.anthropic.com when that is unset.
	BaseURL string
	// HTTPClient sends the requests. Zero: the SDK's default client.
	HTTPClient *http.Client
	// MaxRetries bounds how often a call that failed with 408, 409, 429,
	// 5xx or a connection error is retried, with the SDK's backoff (the
	// server's retry-after when given, otherwise 0.5s doubling up to 8s).
	// Zero: the SDK's default, 2. Negative: no retries.
	MaxRetries int
	// MaxTokens caps a reply when agent.Model.MaxTokens is zero.
	// Zero: [DefaultMaxTokens].
	MaxTokens int
	// Model is the model id used when agent.Model.ID is empty. Zero: every
	// request must name its model.
	Model string
	// DisableStreaming makes each call one plain request; onText then gets
	// the whole text at once. The SDK refuses a plain request whose reply
	// cap could take over 10 minutes (above about 21,000 tokens). Zero:
	// replies are streamed.
	DisableStreaming bool
	// DisablePromptCache leaves out the request's top-level cache_control,
	// which otherwise lets the API cache the conversation's prefix from
	// one turn to the next. Zero: caching on.
	DisablePromptCache bool
	// Logger receives warnings (such as an ignored temperature).
	// Zero: slog.Default().
	Logger *slog.Logger
}

// Provider calls the Anthropic Messages API. It implements agent.Provider
// and is safe for concurrent use.
type Provider struct {
	client     sdk.Client
	model      string
	maxTokens  int
	maxRetries int
	stream     bool
	cache      bool
	log        *slog.Logger
	warnTemp   sync.Once
	warnData   sync.Once
}

var _ agent.Provider = (*Provider)(nil)

// New returns a Provider configured by opts, which may be nil.
func New(opts *Options) *Provider { return newProvider(opts) }

// newProvider is New with extra SDK options, for tests.
func newProvider(opts *Options, extra ...option.RequestOption) *Provider {
	if opts == nil {
		opts = &Options{}
	}
	var ro []option.RequestOption
	if opts.APIKey != "" {
		ro = append(ro, option.WithAPIKey(opts.APIKey))
	}
	if opts.BaseURL != "" {
		ro = append(ro, option.WithBaseURL(opts.BaseURL))
	}
	if opts.HTTPClient != nil {
		ro = append(ro, option.WithHTTPClient(opts.HTTPClient))
	}
	maxRetries := 2
	switch {
	case opts.MaxRetries > 0:
		maxRetries = opts.MaxRetries
	case opts.MaxRetries < 0:
		maxRetries = 0
	}
	ro = append(ro, option.WithMaxRetries(maxRetries))
	ro = append(ro, extra...)
	p := &Provider{
		client:     sdk.NewClient(ro...),
		model:      opts.Model,
		maxTokens:  opts.MaxTokens,
		maxRetries: maxRetries,
		stream:     !opts.DisableStreaming,
		cache:      !opts.DisablePromptCache,
		log:        opts.Logger,
	}
	if p.maxTokens <= 0 {
		p.maxTokens = DefaultMaxTokens
	}
	if p.log == nil {
		p.log = slog.Default()
	}
	return p
}

// Complete sends req to the Messages API and returns the assistant message.
// See the package documentation for how messages, stop reasons, usage and
// errors are mapped.
func (p *Provider) Complete(ctx context.Context, req *agent.Request, onText func(string)) (*agent.Message, error) {
	if req == nil {
		return nil, errors.New("anthropic: nil request")
	}
	params, err := p.params(req)
	if err != nil {
		return nil, err
	}
	var msg *agent.Message
	var blocks []savedBlock
	if p.stream {
		msg, blocks, err = p.streamed(ctx, params, onText)
	} else {
		msg, blocks, err = p.single(ctx, params, onText)
	}
	if err != nil {
		return nil, err
	}
	msg.ProviderData = encodeProviderData(string(params.Model), blocks)
	return msg, nil
}

func (p *Provider) params(req *agent.Request) (sdk.MessageNewParams, error) {
	model := req.Model.ID
	if model == "" {
		model = p.model
	}
	if model == "" {
		return sdk.MessageNewParams{}, errors.New("anthropic: no model: set agent.Model.ID or Options.Model")
	}
	maxTokens := req.Model.MaxTokens
	if maxTokens <= 0 {
		maxTokens = p.maxTokens
	}
	if req.Model.Temperature != nil {
		// API version 2026-10-21, which this SDK speaks, rejects sampling
		// parameters with a 400 on every model.
		p.warnTemp.Do(func() {
			p.log.Warn("anthropic: temperature is not supported by the Messages API and is ignored", "model", model)
		})
	}
	params := sdk.MessageNewParams{
		Model:     sdk.Model(model),
		MaxTokens: int64(maxTokens),
	}
	if req.System != "" {
		params.System = []sdk.TextBlockParam{{Text: req.System}}
	}
	msgs, err := p.messages(req.Messages, model)
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
	if p.cache {
		params.CacheControl = sdk.NewCacheControlEphemeralParam()
	}
	return params, nil
}

// messages maps a thread to the API's alternating user and assistant
// messages. Tool results become tool_result blocks of a user message;
// consecutive results (and any user text after them) share one message,
// results first, as the API requires. model is the model the request goes
// to (see assistantBlocks).
func (p *Provider) messages(in []agent.Message, model string) ([]sdk.MessageParam, error) {
	var out []sdk.MessageParam
	var results, texts []sdk.ContentBlockParamUnion
	flush := func() {
		if blocks := append(results, texts...); len(blocks) > 0 {
			out = append(out, sdk.NewUserMessage(blocks...))
		}
		results, texts = nil, nil
	}
	for i, m := range in {
		switch m.Role {
		case agent.RoleUser:
			if m.Text != "" {
				texts = append(texts, sdk.NewTextBlock(m.Text))
			}
		case agent.RoleTool:
			if m.Result == nil {
				return nil, fmt.Errorf("anthropic: message %d: tool message without a result", i)
			}
			results = append(results, toolResult(m.Result))
		case agent.RoleAssistant:
			flush()
			if blocks := p.assistantBlocks(i, &m, model); len(blocks) > 0 {
				out = append(out, sdk.NewAssistantMessage(blocks...))
			}
		default:
			return nil, fmt.Errorf("anthropic: message %d: unknown role %q", i, m.Role)
		}
	}
	flush()
	return out, nil
}

func toolResult(r *agent.ToolResult) sdk.ContentBlockParamUnion {
	b := sdk.ToolResultBlockParam{ToolUseID: r.CallID}
	if r.Content != "" {
		// An empty text block is rejected; no content at all is fine.
		b.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: r.Content}}}
	}
	if r.IsError {
		b.IsError = sdk.Bool(true)
	}
	return sdk.ContentBlockParamUnion{OfToolResult: &b}
}

func toolParam(spec agent.ToolSpec) (sdk.ToolUnionParam, error) {
	schema := spec.InputSchema
	if len(strings.TrimSpace(string(schema))) == 0 {
		schema = json.RawMessage(`{"type":"object","properties":{}}`)
	} else if !isObject(schema) {
		return sdk.ToolUnionParam{}, fmt.Errorf("anthropic: tool %q: input schema is not a JSON object", spec.Name)
	}
	t := sdk.ToolParam{
		Name: spec.Name,
		// The schema goes out exactly as given.
		InputSchema: param.Override[sdk.ToolInputSchemaParam](schema),
	}
	if spec.Description != "" {
		t.Description = sdk.String(spec.Description)
	}
	return sdk.ToolUnionParam{OfTool: &t}, nil
}

// isObject reports whether raw is one valid JSON object.
func isObject(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return strings.HasPrefix(s, "{") && json.Valid(raw)
}

// arguments turns the tool input the model sent into ToolCall.Arguments,
// which must stay valid JSON (the message is persisted as JSON before any
// tool runs): a JSON value is kept as is, nothing becomes {}, and text that
// does not parse becomes a JSON string holding it, so the runtime sees a
// non-object and answers with an error result the model can correct.
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

// stopReason maps the API's stop reason. A turn that asks for tools is a
// tool-use stop whatever the API said, unless it ran out of tokens or was
// refused (the runtime answers the calls of any message that has them, so
// none is left unanswered either way).
func stopReason(r sdk.StopReason, toolCalls int) agent.StopReason {
	switch r {
	case sdk.StopReasonMaxTokens, sdk.StopReasonModelContextWindowExceeded:
		return agent.StopMaxTokens
	case sdk.StopReasonRefusal:
		return agent.StopRefusal
	}
	if toolCalls > 0 {
		return agent.StopToolUse
	}
	// end_turn, stop_sequence, and pause_turn (only server tools, which
	// tollgate does not use, pause a turn); also tool_use without a
	// complete call, which leaves nothing to run.
	return agent.StopEndTurn
}
