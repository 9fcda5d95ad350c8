package openai

import (
	"context"
	"fmt"
	"strings"

	sdk "github.com/openai/openai-go/v3"

	"github.com/tollgate-ai/tollgate/agent"
)

// streamed makes one streaming call and assembles the reply as it arrives.
func (p *Provider) streamed(ctx context.Context, params sdk.ChatCompletionNewParams, onText func(string)) (*agent.Message, error) {
	// Usage comes in a last chunk, only when asked for.
	params.StreamOptions.IncludeUsage = sdk.Bool(true)
	stream := p.client.Chat.Completions.NewStreaming(ctx, params)
	defer stream.Close()
	acc := accumulator{onText: onText}
	for stream.Next() {
		acc.add(stream.Current())
	}
	if err := stream.Err(); err != nil {
		return nil, p.fail(ctx, err, acc.chunks > 0)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("openai: %w", err)
	}
	if acc.finish == "" {
		return nil, fmt.Errorf("openai: %w: the stream ended before a finish_reason", ErrIncomplete)
	}
	return acc.message(), nil
}

// single makes one plain call.
func (p *Provider) single(ctx context.Context, params sdk.ChatCompletionNewParams, onText func(string)) (*agent.Message, error) {
	res, err := p.client.Chat.Completions.New(ctx, params)
	if err != nil {
		return nil, p.fail(ctx, err, false)
	}
	if len(res.Choices) == 0 {
		return nil, fmt.Errorf("openai: %w: the reply has no choices", ErrIncomplete)
	}
	choice := res.Choices[0]
	acc := accumulator{finish: choice.FinishReason}
	acc.text.WriteString(choice.Message.Content)
	acc.text.WriteString(choice.Message.Refusal)
	acc.refused = choice.Message.Refusal != ""
	for _, tc := range choice.Message.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			continue
		}
		c := &call{id: tc.ID, name: tc.Function.Name}
		c.args.WriteString(tc.Function.Arguments)
		acc.calls = append(acc.calls, c)
	}
	if res.JSON.Usage.Valid() {
		acc.usage = &agent.Usage{InputTokens: res.Usage.PromptTokens, OutputTokens: res.Usage.CompletionTokens}
	}
	msg := acc.message()
	if onText != nil && msg.Text != "" {
		onText(msg.Text)
	}
	return msg, nil
}

// call is one tool call, as far as it has arrived.
type call struct {
	id, name string
	args     strings.Builder
}

// accumulator assembles a reply from the chunks of a stream.
type accumulator struct {
	onText  func(string)
	chunks  int
	text    strings.Builder
	calls   []*call         // in the order the model made them
	byIndex map[int64]*call // the latest call at each index
	finish  string
	refused bool // refusal text arrived
	usage   *agent.Usage
}

func (a *accumulator) add(chunk sdk.ChatCompletionChunk) {
	a.chunks++
	if chunk.JSON.Usage.Valid() {
		a.usage = &agent.Usage{InputTokens: chunk.Usage.PromptTokens, OutputTokens: chunk.Usage.CompletionTokens}
	}
	for _, choice := range chunk.Choices {
		if choice.Index != 0 {
			continue // only one choice is asked for
		}
		a.emit(choice.Delta.Content)
		a.emit(choice.Delta.Refusal)
		if choice.Delta.Refusal != "" {
			a.refused = true
		}
		for _, tc := range choice.Delta.ToolCalls {
			a.toolDelta(tc)
		}
		if choice.FinishReason != "" {
			a.finish = choice.FinishReason
		}
	}
}

func (a *accumulator) emit(s string) {
	if s == "" {
		return
	}
	a.text.WriteString(s)
	if a.onText != nil {
		a.onText(s)
	}
}

// toolDelta adds a piece of a tool call. Pieces are matched by index; a
// new id at an index that already has a call with another id starts a new
// call, for servers that send every call at index 0.
func (a *accumulator) toolDelta(tc sdk.ChatCompletionChunkChoiceDeltaToolCall) {
	if a.byIndex == nil {
		a.byIndex = make(map[int64]*call)
	}
	c := a.byIndex[tc.Index]
	if c == nil || (tc.ID != "" && c.id != "" && tc.ID != c.id) {
		c = &call{}
		a.calls = append(a.calls, c)
		a.byIndex[tc.Index] = c
	}
	if tc.ID != "" {
		c.id = tc.ID
	}
	// Some servers repeat the whole name in every piece.
	if name := tc.Function.Name; name != "" && name != c.name {
		c.name += name
	}
	c.args.WriteString(tc.Function.Arguments)
}

func (a *accumulator) message() *agent.Message {
	// Usage stays nil when the server reported none.
	msg := &agent.Message{Role: agent.RoleAssistant, Text: a.text.String(), Usage: a.usage}
	for _, c := range a.calls {
		msg.ToolCalls = append(msg.ToolCalls, agent.ToolCall{ID: callID(c.id), Name: c.name, Arguments: arguments(c.args.String())})
	}
	msg.StopReason = stopReason(a.finish, a.refused, len(msg.ToolCalls))
	return msg
}
