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
//	a, err := agent.New(agent.Config{Provider: provider, Tools: []*agent.Tool{echo},
//		Checkpointer: memory.New()}) // package checkpoint/memory; sqlite for a durable thread
//	msg, err := a.Prompt(ctx, "say hi")
//
// # The run, step by step
//
//  1. The user message is appended and the thread persisted.
//  2. The model is called; its message, with its tool calls, is persisted
//     before any tool runs or is asked about, so a crash never asks the
//     model for the same turn twice and call ids stay stable.
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
// # Durable points: what is written, when, and why no more
//
// Every write is one [checkpoint.Store.Commit] of one transaction, at a
// point a guarantee needs, and carries the audit entries of what it
// records (so an entry exists exactly when its change does). An approval
// cycle — a prompt, one call asked about, approved, run, and the model's
// final answer — is six commits:
//
//  1. The prompt: the user message, the thread running (created if new)
//     and run_started. Needed: a prompt acknowledged is never lost.
//  2. The question: the model's message with its calls, the question and
//     question_asked (and run_parked when the channel parks the run).
//     Needed: the message is durable before any of its calls is asked
//     about or run (a crash never asks the model for the turn again, call
//     ids stay stable), and the question before anyone is told.
//  3. The answer (written by whoever answers: hitl's channels, package
//     host): the compare-and-set and question_resolved.
//  4. The executing claim. Needed: a call found executing after a crash is
//     not run again (at most once), and of two drivers only one runs it.
//  5. The result: the call's record, tool_result and, for the turn's last
//     call, the turn's result messages. Needed: a result is never lost
//     once known (else a crash would turn it into an unknown outcome). A
//     store out of reach ([checkpoint.ErrUnavailable]) is waited for while
//     the run's context lasts (under a lease: while the lease can be
//     trusted), the write read back before it is made again (its commit
//     may have been made, its answer lost).
//  6. The end: the model's final message, the thread idle, run_finished.
//
// That is a turn of one call. A turn of N calls makes N claims and N
// results (each call's durable points are its own), then one write of the
// turn's result messages; a run parked by several questions records
// run_parked in a write of its own, as does a run that stops on an error
// (run_finished with the error: no change of state goes with it), but for
// a store out of reach: that run is not over, and goes on from what the
// store holds once it is back (package host does so).
//
// A turn's message is not written alone: it goes with the turn's first
// write (2, or 4 for a call allowed outright, or 5 for a blocked one). A
// crash before that loses only the model's answer, which is asked again:
// none of its calls can have run. Messages are appended, never rewritten,
// so a step writes what it adds whatever the thread's length; a resumed
// turn reads only its own calls' records. Stores may group concurrent
// callers' commits into one transaction (group commit), never acknowledging
// a write before it is durable.
//
// # Events
//
// [Agent.Subscribe] streams typed events in order; see [Subscription] for
// what a slow subscriber sees. [Agent.SubscribeFunc] hands them, in the
// same order, to a function that must not block, from the goroutine that
// emits them (a host hands every run's events on this way). Durable events also go to the
// checkpointer's event log, the audit trail.
//
// # Names
//
// [Decision] is what a before-tool middleware tells the run loop
// (continue, replace the arguments, block); the approval layers above
// have decisions of their own (policy.Decision, hitl.ApprovalDecision,
// interrupt.ToolDecision), which end in one of these. docs/ARCHITECTURE.md
// ("Names") says which is which.
package agent
