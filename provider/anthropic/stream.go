package anthropic

import (
	"context"
	"fmt"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/tollgate-ai/tollgate/agent"
)

// streamed makes one streaming call and assembles the reply as it arrives.
func (p *Provider) streamed(ctx context.Context, params sdk.MessageNewParams, onText func(string)) (*agent.Message, []savedBlock, error) {
	stream := p.client.Messages.NewStreaming(ctx, params)
	defer stream.Close()
	acc := accumulator{onText: onText}
	for stream.Next() {
		if err := acc.add(stream.Current()); err != nil {
			return nil, nil, err
		}
	}
	if err := stream.Err(); err != nil {
		return nil, nil, p.fail(ctx, err, acc.started)
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("anthropic: %w", err)
	}
	if !acc.stopped {
		return nil, nil, fmt.Errorf("anthropic: %w: the stream ended before message_stop", ErrIncomplete)
	}
	msg, blocks := acc.message()
	return msg, blocks, nil
}

// single makes one plain call.
func (p *Provider) single(ctx context.Context, params sdk.MessageNewParams, onText func(string)) (*agent.Message, []savedBlock, error) {
	res, err := p.client.Messages.New(ctx, params)
	if err != nil {
		return nil, nil, p.fail(ctx, err, false)
	}
	var acc accumulator
	acc.setUsage(res.Usage.InputTokens, res.Usage.CacheCreationInputTokens, res.Usage.CacheReadInputTokens)
	acc.output = res.Usage.OutputTokens
	acc.stop = res.StopReason
	for _, c := range res.Content {
		b := &block{kind: c.Type, id: c.ID, name: c.Name, startInput: string(c.Input), data: c.Data}
		b.text.WriteString(c.Text)
		b.thinking.WriteString(c.Thinking)
		b.signature.WriteString(c.Signature)
		acc.blocks = append(acc.blocks, b)
	}
	msg, blocks := acc.message()
	if onText != nil && msg.Text != "" {
		onText(msg.Text)
	}
	return msg, blocks, nil
}

// block is one content block of the reply, as far as it has arrived.
type block struct {
	kind       string // "text", "tool_use", "thinking", "redacted_thinking", ...
	id, name   string
	startInput string // the input given in content_block_start
	input      strings.Builder
	text       strings.Builder
	thinking   strings.Builder
	signature  strings.Builder
	data       string
}

// accumulator assembles a reply from the events of a stream.
type accumulator struct {
	onText  func(string)
	blocks  []*block
	started bool // message_start arrived
	stopped bool // message_stop arrived
	stop    sdk.StopReason

	input, cacheWrite, cacheRead, output int64
}

func (a *accumulator) setUsage(input, cacheWrite, cacheRead int64) {
	a.input, a.cacheWrite, a.cacheRead = input, cacheWrite, cacheRead
}

func (a *accumulator) add(ev sdk.MessageStreamEventUnion) error {
	switch ev.Type {
	case "message_start":
		a.started = true
		u := ev.Message.Usage
		a.setUsage(u.InputTokens, u.CacheCreationInputTokens, u.CacheReadInputTokens)
		a.output = u.OutputTokens
	case "content_block_start":
		if ev.Index != int64(len(a.blocks)) {
			return fmt.Errorf("anthropic: unexpected stream: block %d started, want block %d", ev.Index, len(a.blocks))
		}
		cb := ev.ContentBlock
		b := &block{kind: cb.Type, id: cb.ID, name: cb.Name, data: cb.Data}
		if cb.Type == "tool_use" {
			b.startInput = cb.JSON.Input.Raw()
		}
		b.thinking.WriteString(cb.Thinking)
		b.signature.WriteString(cb.Signature)
		a.blocks = append(a.blocks, b)
		if cb.Type == "text" {
			a.text(b, cb.Text)
		}
	case "content_block_delta":
		if ev.Index < 0 || ev.Index >= int64(len(a.blocks)) {
			return fmt.Errorf("anthropic: unexpected stream: delta for block %d, which has not started", ev.Index)
		}
		b := a.blocks[ev.Index]
		switch ev.Delta.Type {
		case "text_delta":
			a.text(b, ev.Delta.Text)
		case "input_json_delta":
			b.input.WriteString(ev.Delta.PartialJSON)
		case "thinking_delta":
			b.thinking.WriteString(ev.Delta.Thinking)
		case "signature_delta":
			b.signature.WriteString(ev.Delta.Signature)
		}
	case "message_delta":
		a.stop = ev.Delta.StopReason
		// Counts here are totals for the message so far.
		u := ev.Usage
		a.output = u.OutputTokens
		if u.JSON.InputTokens.Valid() {
			a.input = u.InputTokens
		}
		if u.JSON.CacheCreationInputTokens.Valid() {
			a.cacheWrite = u.CacheCreationInputTokens
		}
		if u.JSON.CacheReadInputTokens.Valid() {
			a.cacheRead = u.CacheReadInputTokens
		}
	case "message_stop":
		a.stopped = true
	}
	return nil
}

func (a *accumulator) text(b *block, s string) {
	if s == "" {
		return
	}
	b.text.WriteString(s)
	if a.onText != nil {
		a.onText(s)
	}
}

// message returns the assembled assistant message and the layout of the
// reply's blocks (see providerdata.go), thinking blocks in full.
func (a *accumulator) message() (*agent.Message, []savedBlock) {
	msg := &agent.Message{Role: agent.RoleAssistant}
	var text strings.Builder
	var layout []savedBlock
	for _, b := range a.blocks {
		switch b.kind {
		case blockText:
			if b.text.Len() == 0 {
				continue
			}
			text.WriteString(b.text.String())
			layout = append(layout, savedBlock{Type: blockText})
		case blockToolUse:
			raw := b.input.String()
			if strings.TrimSpace(raw) == "" {
				raw = b.startInput
			}
			msg.ToolCalls = append(msg.ToolCalls, agent.ToolCall{ID: b.id, Name: b.name, Arguments: arguments(raw)})
			if b.id != "" { // a call without an id gets one from the runtime, and goes last
				layout = append(layout, savedBlock{Type: blockToolUse, ID: b.id})
			}
		case blockThinking:
			layout = append(layout, savedBlock{Type: blockThinking, Thinking: b.thinking.String(), Signature: b.signature.String()})
		case blockRedactedThinking:
			layout = append(layout, savedBlock{Type: blockRedactedThinking, Data: b.data})
		}
	}
	msg.Text = text.String()
	msg.StopReason = stopReason(a.stop, len(msg.ToolCalls))
	// Cached input is input too; the API counts it apart.
	msg.Usage = &agent.Usage{InputTokens: a.input + a.cacheWrite + a.cacheRead, OutputTokens: a.output}
	return msg, layout
}
