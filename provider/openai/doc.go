// Package openai is an agent.Provider for the OpenAI Chat Completions API
// and the servers that speak it (Ollama, vLLM, llama.cpp's server, LM
// Studio, ...), built on the official SDK (github.com/openai/openai-go/v3).
//
// # Quick start
//
// Against OpenAI, with OPENAI_API_KEY set:
//
//	a, err := agent.New(agent.Config{Provider: openai.New(nil), Model: agent.Model{ID: "gpt-4.1"},
//		Checkpointer: memory.New()}) // package checkpoint/memory
//	reply, err := a.Prompt(ctx, "Hello")
//
// Against Ollama (no key needed), after `ollama pull qwen3:8b`:
//
//	a, err := agent.New(agent.Config{Provider: openai.New(&openai.Options{BaseURL: "http://localhost:11434/v1"}),
//		Model: agent.Model{ID: "qwen3:8b"}, Checkpointer: memory.New()})
//	reply, err := a.Prompt(ctx, "Hello")
//
// vLLM (http://localhost:8000/v1), llama.cpp's server
// (http://localhost:8080/v1) and LM Studio (http://localhost:1234/v1) work
// the same way. OPENAI_BASE_URL does what Options.BaseURL does; a nil
// *Options reads OPENAI_API_KEY and OPENAI_BASE_URL. [Provider.Complete]
// can also be called directly.
//
// # What goes out
//
// The system prompt is the first message (role system); each tool is a
// function tool whose parameters are agent.ToolSpec.InputSchema, sent as
// written. An assistant message carries its text and a tool_calls entry per
// call, with the arguments text the model wrote. A tool result is a tool
// message with its tool_call_id. The API has no error flag, so the content
// of an error result (a denial, a timeout, a failure) starts with "Error: ",
// followed by the reason. The reply cap (agent.Model.MaxTokens, else
// Options.MaxTokens, else none) goes in max_completion_tokens for
// api.openai.com and max_tokens for other servers (Options.MaxTokensField
// overrides); agent.Model.Temperature is sent when set. Streamed requests
// ask for usage with stream_options.include_usage.
//
// # What comes back
//
// Text deltas (and refusal text) go to onText as they arrive. Tool calls
// are assembled from their indexed deltas and keep the model's order; a
// call without an id (some local servers) gets a fresh unique one, since
// the runtime derives question ids from call ids. Arguments are always
// valid JSON, since the message is persisted before any tool runs: the
// object the model sent; {} when it sent nothing; and when the text does
// not parse, that text as a JSON string, which the runtime turns into an
// error result the model can correct ("arguments are not valid JSON",
// quoting the text; sent back, the call carries the original text).
// Finish reasons: stop becomes agent.StopEndTurn, length
// agent.StopMaxTokens, content_filter agent.StopContentFilter; a reply with
// refusal text is agent.StopRefusal; otherwise a reply with tool calls is
// agent.StopToolUse (local servers often say "stop" there). A cut-off,
// filtered or refused reply keeps any calls it has, and the runtime answers
// them. Usage is prompt and completion tokens, nil when the server reports
// none. The provider sets no agent.Message.ProviderData.
//
// # Errors
//
// The SDK retries 408, 409, 429, 5xx and connection errors with backoff, up
// to Options.MaxRetries times. What is left is an [*Error] that says what
// failed and where, and wraps [ErrAuth] (401, 403: the message names
// OPENAI_API_KEY), [ErrRateLimited] or [ErrServer] (also for an error in
// the middle of a stream). Error bodies in other servers' shapes (vLLM,
// FastAPI, plain text) are read too. A server that cannot be reached says
// so with its URL. A reply cut short (connection dropped, or no
// finish_reason) is an error wrapping [ErrIncomplete], never a partial
// message. A cancelled context stops the stream at once, and the error
// wraps ctx.Err().
package openai
