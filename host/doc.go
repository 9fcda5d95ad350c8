// Package host drives the runs of many threads on one checkpoint store in
// one process, for a service (tollgate serve) or a terminal (tollgate run).
//
// Quick start:
//
//	h, err := host.New(host.Config{
//		Store: store,
//		Agent: agent.Config{Provider: provider, Tools: tools,
//			Middleware: []agent.Middleware{hitl.NewApprovalPolicyMiddleware(
//				hitl.NewCheckpointedChannel(store, "", nil), policy)}},
//	})
//	err = h.Start(ctx)                                   // resumes what a crash left
//	runID, _, err := h.Prompt(ctx, "t1", "tidy up", nil) // returns once stored
//	q, err := h.Answer(ctx, "t1", questionID, answer, "alice")
//	stats, err := h.Shutdown(ctx)                         // runs stay resumable
//
// # Parking
//
// A run that asks a person and gets no answer at once parks: the agent's
// channel ([agent.Channel]) returns [agent.ErrParked], the run returns,
// and nothing of it stays in memory but its thread id — no goroutine,
// nothing that polls — and, for the last few hundred parked runs, the
// agent it parked on: a resume here goes on from the messages (up to
// 64 KB of them) and the
// validated arguments the run held, as a run that waited in process does,
// while the thread is at the version its park wrote (else it reads and
// decodes the thread, as a resume on any other host does). Calls of the
// same turn that need no answer go on first. Waiting costs a row in the
// store.
//
// The host resumes a parked run ([agent.Agent.Resume], which re-enters the
// middleware and finds the answer by the question's deterministic id) when
// one of its questions is resolved:
//   - by [Host.Answer] in this process: at once;
//   - by any other process on the same store (the CLI, a library call, a
//     second service): through the store's notifications, one
//     subscription for every parked run (subscribed again when the
//     store's feed ends, and the runs re-read: an answer may have come
//     meanwhile);
//   - by its deadline: the host keeps a timer for the earliest pending
//     deadline in the store (re-read at start-up, on each new question,
//     and every DeadlinePoll in case a notification was missed) and
//     resolves an expired question as timed out by the same
//     compare-and-set as an answer, so exactly one of them wins, whether
//     or not any run is waiting.
//
// A question asked from inside a tool that is not idempotent (hitl.Confirm
// in a tool that may have done something already) is waited for in
// process instead: parking would leave the tool's outcome unknown.
//
// # Start-up and shutdown
//
// [Host.Start] finds the store's unfinished runs. Those with a pending
// question stay parked; the others were cut off by a crash and are
// resumed, under the agent's at-most-once rule (a call found executing is
// not run again unless its tool is idempotent). [Host.Shutdown] stops
// taking work, gives the runs in progress until its context ends to finish
// or park, cancels the rest (left resumable) and reports the counts.
//
// # A store out of reach
//
// A run that stops because its store cannot be reached
// ([checkpoint.ErrUnavailable]: a restart, a failover, a network blip)
// is not failed: the host goes on with it, from what the store holds,
// once the store answers again (with backoff, up to 2 s apart) — under
// a [Coordinator], for as long as the run's lease can be trusted; alone,
// for two minutes. A tool's result that could not be written meanwhile is
// kept and written then (the agent does so).
//
// # One run per thread
//
// A thread has at most one run in progress: [Host.Prompt] on a thread whose
// run is active, queued or parked returns [ErrRunActive], never a second
// concurrent run. An idempotency key makes a retried Prompt return the run
// the first one started.
//
// # Answers are checked where they are taken
//
// [Host.Answer] checks the answer's shape, the digest the reviewer was
// shown, and for an edit the tool's schema (every problem listed) and every
// middleware that implements [agent.EditChecker] (the policy), before the
// compare-and-set. A refused answer leaves the question open. A command
// line that answers from another process builds a Host with the same tools
// and policy and calls Answer without starting it.
//
// One host per store, unless they share it through a [Coordinator]: two
// hosts on one SQLite file would both resume the same runs (the executing
// claim keeps a tool from running twice, but the model could be called
// twice for a turn). Several replicas on PostgreSQL use package cluster,
// a Coordinator on River: each thread is driven under a lease, by one
// host at a time; answers commit with jobs any replica works, and every
// replica's host fires deadlines (one wins each).
package host
