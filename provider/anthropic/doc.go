// Package anthropic is an agent.Provider for the Anthropic Messages API,
// built on the official SDK (github.com/anthropics/anthropic-sdk-go/v2).
//
// # Quick start
//
// With ANTHROPIC_API_KEY set:
//
//	a, err := agent.New(agent.Config{Provider: anthropic.New(nil), Model: agent.Model{ID: "claude-sonnet-4-6"},
//		Checkpointer: memory.New()}) // package checkpoint/memory
//	reply, err := a.Prompt(ctx, "Hello")
//
// [Options] set the key, base URL, HTTP client, retries, default model and
// reply cap in code; a nil *Options reads ANTHROPIC_API_KEY and
// ANTHROPIC_BASE_URL. [Provider.Complete] can also be called directly.
//
// # What goes out
//
// The system prompt becomes the system block; each tool becomes a tool
// whose input_schema is agent.ToolSpec.InputSchema, sent as written. User
// text is a text block. An assistant message is its text block followed by
// one tool_use block per call, or, when its ProviderData holds the reply's
// thinking, the reply's blocks in their original order (see below). Tool
// results become tool_result blocks
// (with is_error for denials, timeouts and failures, and the reason as
// their text) in the user message that follows; consecutive results share
// one message, ahead of any user text. max_tokens is agent.Model.MaxTokens,
// else Options.MaxTokens, else [DefaultMaxTokens]. agent.Model.Temperature
// is not sent: the API version this SDK speaks refuses sampling parameters,
// so it is ignored with a warning. Prompt caching of the conversation's
// prefix is on unless Options.DisablePromptCache is set.
//
// # What comes back
//
// Text deltas go to onText as they arrive. Tool calls are assembled from
// their input_json_delta pieces and keep the model's order. Arguments are
// always valid JSON, since the message is persisted before any tool runs:
// the object the model sent; {} when it sent nothing; and when the text does
// not parse (typically a call cut off at max_tokens), that text as a JSON
// string, which the runtime turns into an error result the model can
// correct (the runtime tells it "arguments are not valid JSON", quoting
// the text). Stop reasons: end_turn, stop_sequence and pause_turn become
// agent.StopEndTurn; max_tokens and model_context_window_exceeded
// agent.StopMaxTokens; refusal agent.StopRefusal; otherwise a reply with
// tool calls is agent.StopToolUse (a refused or cut-off reply keeps any
// calls it has, and the runtime answers them). Usage counts input tokens
// including cached ones (cache reads and writes), and output tokens.
//
// # Thinking and ProviderData
//
// Thinking blocks (current Claude models think by default) must go back
// unmodified and in order with their message, at least while its tool calls
// are answered. agent.Message has no content blocks, so a reply with
// thinking or redacted_thinking blocks gets an agent.Message.ProviderData
// holding them, signatures included, and the place of its text and tool
// calls among them:
//
//	{"anthropic": {"v": 1, "model": "claude-opus-4-7", "blocks": [
//	  {"type": "thinking", "thinking": "...", "signature": "..."},
//	  {"type": "redacted_thinking", "data": "..."},
//	  {"type": "text"},
//	  {"type": "tool_use", "id": "toolu_..."}
//	]}}
//
// ProviderData is persisted with the message, so a run resumed in another
// process, by another Provider, sends the blocks back too. The text and the
// calls themselves come from the message's Text and ToolCalls (an edit
// there goes out; a call not in the layout goes last). Signatures are bound
// to the model: the blocks go only to the model named in "model", and a
// request to another model sends the message without them. ProviderData
// this package cannot read (another shape or version, another provider's)
// is ignored, with one warning per Provider.
//
// # Errors
//
// The SDK retries 408, 409, 429, 5xx and connection errors with backoff, up
// to Options.MaxRetries times. What is left is an [*Error] that says what
// failed and wraps [ErrAuth] (401, 403: the message names
// ANTHROPIC_API_KEY), [ErrRateLimited] or [ErrServer] (also for an error
// event in the middle of a stream). A reply cut short (connection dropped,
// or no message_stop) is an error wrapping [ErrIncomplete], never a partial
// message. A cancelled context stops the stream at once, and the error
// wraps ctx.Err().
package anthropic
