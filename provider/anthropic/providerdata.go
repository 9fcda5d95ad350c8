package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/tollgate-ai/tollgate/agent"
)

// Claude's thinking blocks (current models think by default) must come back
// unmodified, in their original order, with the assistant message they
// belong to: always while that message's tool calls are being answered, and
// in later turns too, since current models keep earlier thinking in
// context. agent.Message has no content blocks, so a reply with thinking
// carries them in Message.ProviderData, which is persisted with the
// message: a run resumed in another process sends them back as well.
//
// ProviderData is a JSON object with one member, "anthropic", in version 1:
//
//	{"anthropic": {"v": 1, "model": "claude-opus-4-7", "blocks": [
//	  {"type": "thinking", "thinking": "The user wants...", "signature": "EqQB..."},
//	  {"type": "redacted_thinking", "data": "EmwK..."},
//	  {"type": "text"},
//	  {"type": "tool_use", "id": "toolu_01..."}
//	]}}
//
// model is the model the request named; signatures are bound to it, so the
// blocks are sent back only to that model. blocks lists the reply's content
// blocks in their order. Thinking blocks are kept whole: "thinking" (left
// out when the API sent none, as with display "omitted") and "signature";
// redacted_thinking blocks keep "data". Text and tool_use blocks only mark
// their place: the text is Message.Text and the call is the
// Message.ToolCalls entry with that id, so what the host stored there is
// what goes out. Readers ignore members they do not know, but not block
// types: a new block type, or any change older readers would misread, needs
// a new "v".
//
// ProviderData is written only when the reply had thinking blocks. Data
// this package cannot read (not this shape, another version, or another
// provider's) is ignored, with one warning per Provider.
const providerDataVersion = 1

// providerData is the JSON form of Message.ProviderData.
type providerData struct {
	Anthropic *savedReply `json:"anthropic"`
}

// savedReply is what the provider keeps of one reply.
type savedReply struct {
	V      int          `json:"v"`
	Model  string       `json:"model,omitempty"`
	Blocks []savedBlock `json:"blocks"`
}

// savedBlock is one content block of a reply: a thinking or
// redacted_thinking block in full, or the place of a text or tool_use block.
type savedBlock struct {
	Type      string `json:"type"`
	Thinking  string `json:"thinking,omitempty"`
	Signature string `json:"signature,omitempty"`
	Data      string `json:"data,omitempty"`
	ID        string `json:"id,omitempty"`
}

const (
	blockThinking         = "thinking"
	blockRedactedThinking = "redacted_thinking"
	blockText             = "text"
	blockToolUse          = "tool_use"
)

// encodeProviderData returns the ProviderData of a reply whose blocks are
// given, or nil when there is no thinking block to keep.
func encodeProviderData(model string, blocks []savedBlock) json.RawMessage {
	thinking := false
	for _, b := range blocks {
		if b.Type == blockThinking || b.Type == blockRedactedThinking {
			thinking = true
			break
		}
	}
	if !thinking {
		return nil
	}
	// Strings and ints always marshal.
	raw, _ := json.Marshal(providerData{Anthropic: &savedReply{V: providerDataVersion, Model: model, Blocks: blocks}})
	return raw
}

// decodeProviderData reads what encodeProviderData wrote. It returns nil,
// nil when raw is empty or null.
func decodeProviderData(raw json.RawMessage) (*savedReply, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var d struct {
		Anthropic json.RawMessage `json:"anthropic"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	if d.Anthropic == nil {
		return nil, errors.New(`no "anthropic" member (another provider's data?)`)
	}
	var r savedReply
	if err := json.Unmarshal(d.Anthropic, &r); err != nil {
		return nil, fmt.Errorf(`"anthropic" member: %w`, err)
	}
	if r.V != providerDataVersion {
		return nil, fmt.Errorf("version %d, this package reads version %d", r.V, providerDataVersion)
	}
	for i, b := range r.Blocks {
		switch b.Type {
		case blockThinking, blockRedactedThinking, blockText:
		case blockToolUse:
			if b.ID == "" {
				return nil, fmt.Errorf("block %d: tool_use without an id", i)
			}
		default:
			return nil, fmt.Errorf("block %d: unknown type %q", i, b.Type)
		}
	}
	return &r, nil
}

// savedBlocks returns the blocks kept in m.ProviderData for model: none
// when there are none, when they were made by another model, or when the
// data cannot be read (logged once per Provider). i is m's index in the
// thread, for the log.
func (p *Provider) savedBlocks(i int, m *agent.Message, model string) []savedBlock {
	r, err := decodeProviderData(m.ProviderData)
	if err != nil {
		p.warnData.Do(func() {
			p.log.Warn("anthropic: ignoring provider data that is not this provider's (further cases are not logged)",
				"message", i, "error", err)
		})
		return nil
	}
	if r == nil || (r.Model != "" && r.Model != model) {
		return nil
	}
	return r.Blocks
}

// assistantBlocks returns the content of assistant message m (index i in
// the thread) for a request to model: the blocks of the original reply in
// their order, thinking included, when m carries them; otherwise its text
// followed by its tool calls. Text with no place in the kept layout goes
// before the first tool call; calls with none go last.
func (p *Provider) assistantBlocks(i int, m *agent.Message, model string) []sdk.ContentBlockParamUnion {
	if m.Text == "" && len(m.ToolCalls) == 0 {
		// Nothing to answer to; thinking alone is not sent.
		return nil
	}
	var out []sdk.ContentBlockParamUnion
	used := make([]bool, len(m.ToolCalls))
	textPlaced, firstCall := false, -1
	for _, b := range p.savedBlocks(i, m, model) {
		switch b.Type {
		case blockThinking:
			out = append(out, sdk.NewThinkingBlock(b.Signature, b.Thinking))
		case blockRedactedThinking:
			out = append(out, sdk.NewRedactedThinkingBlock(b.Data))
		case blockText:
			if !textPlaced && m.Text != "" {
				out = append(out, sdk.NewTextBlock(m.Text))
			}
			textPlaced = true
		case blockToolUse:
			for j, c := range m.ToolCalls {
				if !used[j] && c.ID == b.ID {
					used[j] = true
					if firstCall < 0 {
						firstCall = len(out)
					}
					out = append(out, toolUse(c))
					break
				}
			}
		}
	}
	for j, c := range m.ToolCalls {
		if !used[j] {
			if firstCall < 0 {
				firstCall = len(out)
			}
			out = append(out, toolUse(c))
		}
	}
	if !textPlaced && m.Text != "" {
		if firstCall < 0 {
			firstCall = len(out)
		}
		out = slices.Insert(out, firstCall, sdk.NewTextBlock(m.Text))
	}
	return out
}

// toolUse is the tool_use block of call c. The API needs an object: input
// the model sent that is not one (kept as a JSON string when it did not
// parse) goes back as {}.
func toolUse(c agent.ToolCall) sdk.ContentBlockParamUnion {
	input := json.RawMessage(`{}`)
	if isObject(c.Arguments) {
		input = c.Arguments
	}
	return sdk.NewToolUseBlock(c.ID, input, c.Name)
}
