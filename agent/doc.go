// Package agent is tollgate's run loop: a model proposes tool calls, every
// call passes the middleware (where policies and people decide), allowed
// calls run, and the results go back to the model until it ends its turn.
//
// Quick start:
//
//	echo := agent.NewTool("echo", "Echo text.", func(ctx context.Context, a struct {
//		Text string `json:"text"`
//	}) (string, error) {
//		return a.Text, nil
//	}, nil)
//	a, err := agent.New(agent.Config{Provider: provider, Tools: []*agent.Tool{echo}})
//	msg, err := a.Prompt(ctx, "say hi")
//
// # The run, step by step
//
//  1. The user message is appended and the thread persisted.
//  2. The model is called; its message, with its tool calls, is persisted
//     before any tool runs, so a crash never asks the model for the same
//     turn twice and call ids stay stable.
//  3. Each call's arguments are validated against the tool's schema
//     (invalid: an error result listing every problem), then the
//     [BeforeToolHook]s decide: [Continue], [ReplaceArgs] or [Block], or
//     ask a person with [ToolCallContext.Ask].
//  4. Asking writes a question to the checkpointer before anyone is told,
//     with an absolute deadline, emits a [HitlRequestEvent], and waits on
//     the [Channel] until it is answered, times out or is aborted.
//  5. "Executing" is persisted before a tool runs and the result after.
//     Calls of one turn are decided and run concurrently (bounded by
//     Config.MaxParallelTools); results go back in the model's call order.
//  6. When every call has a result the model is called again; the run ends
//     when the model ends its turn.
//
// A run stopped by a crash or a cancelled context is continued by
// [Agent.Resume] (a call found executing is not run again unless its tool
// is idempotent; questions are found by their deterministic ids) or closed
// by [Agent.AbortPending].
//
// # Events
//
// [Agent.Subscribe] streams typed events in order; see [Subscription] for
// what a slow subscriber sees. Durable events also go to the
// checkpointer's event log, the audit trail.
package agent
