package mcpgate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/internal/agentlink"
	"github.com/tollgate-ai/tollgate/internal/jsontext"
)

// A call the policy allows as it stands needs none of a run's machinery
// (no question, no resume, no model turn to wait for): the gateway makes
// it itself, and writes the thread the run would have written in two
// commits instead of the run's four.
//
//  1. Before the call: the thread (the client's call as its prompt, the
//     relay's turn that makes it), the call's executing claim and the
//     run_started entry, in one write. So the call is in the audit log,
//     durably, before it reaches the server, and a store that cannot take
//     the write refuses the call (it is not made). Before, not together
//     with the call: a write that failed after the call was made would
//     leave a call that took effect with no record of it.
//  2. After: the result, the relay's last turn and the tool_result and
//     run_finished entries, in one write — once the client has its result
//     (which is the server's, as it came), and deferrable
//     ([checkpoint.Batch].Deferrable): the client's next call, whose first
//     write would wait for this one's sync, shares it instead. A gateway
//     that stops between the two leaves the thread running with the call
//     claimed: the next start resumes it, and the run records its outcome
//     as unknown, as it does for a call cut by a crash on the run's way.
//
// The thread is the run's, message for message and entry for entry, so
// the page, the threads list and tollgate audit read it as they read any.
// Unlike a run's, its steps are not told to the host's subscribers (the
// page shows the call once it reloads).

// allowedCallID is the relay's call id: the id of a run's only call.
const allowedCallID = "call_1"

// allowedCall is the call, if the policy allows it as it stands (no
// details: a rule learned from an answer goes the run's way, which
// records it), and its arguments are valid; ok false otherwise: the
// caller makes the call a run, which decides it again (the policy is
// free of side effects) and reports the arguments' problems.
type allowedCall struct {
	args       json.RawMessage // canonical: what the policy saw and the server gets
	user, asst agent.Message
}

func (g *Gateway) allowed(ctx context.Context, e exposedTool, thread, prompt string, args json.RawMessage) (ac allowedCall, ok bool) {
	at := g.host.Tool(e.agentName)
	if at == nil || len(args) > agent.DefaultMaxArgBytes {
		return ac, false
	}
	// at.Validate and agent.CanonicalArgs, from one decode of the arguments.
	typed, canonical, err := agentlink.Validate(at, args)
	if err != nil {
		return ac, false
	}
	now := g.clock.Now()
	runID := "run_" + newThreadID()[len("mcp-"):]
	ac = allowedCall{args: canonical,
		user: agent.Message{Role: agent.RoleUser, Text: prompt, RunID: runID, CreatedAt: now},
		asst: agent.Message{Role: agent.RoleAssistant, StopReason: agent.StopToolUse, RunID: runID, CreatedAt: now,
			ToolCalls: []agent.ToolCall{{ID: allowedCallID, Name: e.agentName, Arguments: args}}}}
	defer func() {
		if r := recover(); r != nil {
			// A policy that panics: the run's middleware logs it and asks
			// a person.
			ok = false
		}
	}()
	d := g.cfg.Policy(ctx, &hitl.PolicyContext{ThreadID: thread, CallID: allowedCallID, Tool: e.agentName,
		Args: typed, RawArgs: ac.args, Messages: []agent.Message{ac.user, ac.asst}, Annotations: at.Annotations()})
	return ac, d.Action() == "approve" && len(d.Details()) == 0
}

// runAllowed makes an allowed call (see allowedCall) for the client whose
// call lc is, and answers it.
func (g *Gateway) runAllowed(ctx context.Context, req *mcp.CallToolRequest, lc *liveCall, e exposedTool, ac allowedCall) *mcp.CallToolResult {
	runID := ac.user.RunID
	if ctx.Err() != nil {
		g.forget(lc)
		return retryable("the call was cancelled")
	}
	first, err := encodeMessages(ac.user, ac.asst)
	if err == nil {
		_, err = g.cfg.Store.Commit(context.WithoutCancel(ctx), &checkpoint.Batch{
			Thread: &checkpoint.ThreadWrite{ID: lc.thread, Status: checkpoint.ThreadRunning, RunID: runID, Append: first, CreatedAt: ac.user.CreatedAt},
			ToolCalls: []*checkpoint.ToolCall{{ThreadID: lc.thread, RunID: runID, CallID: allowedCallID, Tool: e.agentName,
				Args: ac.args, State: checkpoint.ToolCallExecuting}},
			Events: []*checkpoint.Event{g.entry(lc.thread, runID, "run_started", map[string]any{"prompt": ac.user.Text})},
		})
	}
	if err != nil {
		g.forget(lc)
		return retryable("tollgate could not record the call, so it was not made: " + err.Error())
	}
	token := req.Params.GetProgressToken()
	lc.progress.start(ctx, req.Session, token)
	defer lc.progress.stop()
	answer := make(chan *mcp.CallToolResult, 1)
	// The call is left to finish when its client goes (it was allowed, and
	// the server may be midway): its outcome goes to the thread. It runs
	// on a goroutine an earlier call ran on, when one is idle (see
	// maxIdleCallers).
	call := func() {
		defer g.forget(lc)
		// Bounded as the agent bounds the tool: the server's timeout, a
		// ping, a restart; and cancelled when Shutdown's grace is over.
		callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.upstream.cfg.callTimeout()+pingTimeout+restartWait)
		defer cancel()
		defer context.AfterFunc(g.cut, cancel)()
		// Checked once a cut cancels callCtx: one that comes after the
		// check cancels the call on its way.
		switch {
		case g.cut.Err() != nil:
			answer <- retryable(shuttingDown)
			g.recordAllowed(lc.thread, runID, ac, g.notMade(e, notMadeAtShutdown, shutdownTrace()))
			return
		case gone(ctx, lc):
			// Cancelled while its thread was written: not made, as a run's
			// liveness check refuses it.
			answer <- retryable("the call was cancelled")
			g.recordAllowed(lc.thread, runID, ac, g.notMade(e, notLive, notLiveTrace()))
			return
		}
		if token != nil {
			// The server's progress goes to the client only: a client that
			// wants none is not sent it, so the server is not asked for it
			// (its _meta is one more value each side decodes).
			callCtx = WithProgress(callCtx, func(n *mcp.ProgressNotificationParams) { lc.progress.forward(n, g.log) })
		}
		started := g.clock.Now()
		res, err := e.upstream.Call(callCtx, e.tool.Name, ac.args)
		r := agent.ToolResult{CallID: allowedCallID, ToolName: e.agentName, StartedAt: started, EndedAt: g.clock.Now()}
		switch {
		case err != nil && g.cut.Err() != nil && callCtx.Err() == context.Canceled:
			// Cut by Shutdown on its way: the server may have taken it.
			r.IsError, r.Content = true, fmt.Sprintf("the MCP gateway shut down while the call ran upstream: its outcome is unknown (%v)", err)
			r.Details = map[string]any{"outcome": "unknown"}
			answer <- errorResult("tollgate: " + r.Content)
		case err != nil:
			r.IsError, r.Content = true, err.Error()
			answer <- errorResult("tollgate: " + err.Error())
		default:
			// The client gets a copy: the SDK writes to a result it sends
			// (its type, and its _meta in place: the server's info), and
			// the thread keeps the server's result as it came, encoded
			// once the client has it.
			sent := *res
			sent.Meta = maps.Clone(res.Meta)
			answer <- &sent
			r.IsError, r.Content = res.IsError, ResultText(res)
			if b, err := json.Marshal(res); err == nil {
				r.Details = map[string]any{"mcp_result": json.RawMessage(b)}
			}
		}
		g.recordAllowed(lc.thread, runID, ac, r)
	}
	if g.cut.Err() != nil || !g.callers.Go(call) {
		// Shutdown's grace ended while the thread was written (its pool
		// refuses the call then): the gateway has stopped, the call is
		// not made.
		defer g.forget(lc)
		g.recordAllowed(lc.thread, runID, ac, g.notMade(e, notMadeAtShutdown, shutdownTrace()))
		return retryable(shuttingDown)
	}
	for {
		tick, stop := g.clock.After(g.cfg.Progress)
		select {
		case res := <-answer:
			stop()
			return res
		case <-ctx.Done():
			stop()
			return errorResult(fmt.Sprintf("tollgate: the call was cancelled after it reached the server; it is left to finish, its outcome goes to thread %s", lc.thread))
		case <-lc.ended:
			stop()
			return errorResult(fmt.Sprintf("tollgate: the client ended its session after the call reached the server; it is left to finish, its outcome goes to thread %s", lc.thread))
		case <-tick:
			if lc.progress.wanted() {
				lc.progress.tick(fmt.Sprintf("tollgate: %s of %s is running", e.tool.Name, e.upstream.Name()), g.log)
			}
		}
	}
}

// notMade is the result of an allowed call that was not made.
func (g *Gateway) notMade(e exposedTool, content string, trace map[string]any) agent.ToolResult {
	return agent.ToolResult{CallID: allowedCallID, ToolName: e.agentName, IsError: true,
		Content: content, Details: map[string]any{"hitl": trace}, EndedAt: g.clock.Now()}
}

// notMadeAtShutdown is the result of an allowed call that Shutdown's end
// came before.
const notMadeAtShutdown = "the MCP gateway shut down before the call was made: not made"

func shutdownTrace() map[string]any {
	return map[string]any{"decision": "aborted", "reason": "the MCP gateway shut down"}
}

// recordAllowed is an allowed call's second write: its result, the
// relay's last turn, the thread going idle, and their audit entries, as
// the run writes them. A store out of reach for a moment is tried again,
// a few times; past them the thread stays running, and the next start
// records the call's outcome as unknown.
func (g *Gateway) recordAllowed(thread, runID string, ac allowedCall, r agent.ToolResult) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	result, err := agentlink.Marshal(&r)
	if err != nil {
		g.log.Error("tollgate: encoding an allowed call's result", "thread", thread, "err", err)
		return
	}
	tm := agent.ToolResultMessage(r)
	tm.RunID, tm.CreatedAt = runID, r.EndedAt
	last := agent.Message{Role: agent.RoleAssistant, Text: relayedText, StopReason: agent.StopEndTurn, RunID: runID, CreatedAt: g.clock.Now()}
	msgs, err := encodeMessages(tm, last)
	if err != nil {
		g.log.Error("tollgate: encoding an allowed call's result", "thread", thread, "err", err)
		return
	}
	entry := map[string]any{"call_id": allowedCallID, "tool": r.ToolName, "is_error": r.IsError,
		"digest": agent.CallDigest(thread, allowedCallID, r.ToolName, ac.args)}
	if h, ok := r.Details["hitl"]; ok {
		entry["hitl"] = h
	}
	if r.IsError {
		entry["reason"] = r.Content
	}
	b := &checkpoint.Batch{
		Thread: &checkpoint.ThreadWrite{ID: thread, Version: 1, Status: checkpoint.ThreadIdle, RunID: runID, Append: msgs},
		ToolCalls: []*checkpoint.ToolCall{{ThreadID: thread, RunID: runID, CallID: allowedCallID, Tool: r.ToolName,
			Args: ac.args, State: checkpoint.ToolCallDone, Result: result}},
		Events: []*checkpoint.Event{
			g.entry(thread, runID, "tool_result", entry),
			g.entry(thread, runID, "run_finished", map[string]any{"stop_reason": string(agent.StopEndTurn)}),
		},
		// The client has its result: the write may share the next one's
		// sync (a client's next call, whose first write would otherwise
		// wait for this one's).
		Deferrable: true,
	}
	for try := 0; ; try++ {
		_, err = g.cfg.Store.Commit(ctx, b)
		if err == nil || !errors.Is(err, checkpoint.ErrUnavailable) || try == 3 {
			break
		}
		// Waited on the gateway's clock, and no longer than the write may take.
		wait, stop := g.clock.After(time.Duration(50<<try) * time.Millisecond)
		select {
		case <-wait:
		case <-ctx.Done():
		}
		stop()
	}
	if err != nil {
		g.log.Warn("tollgate: recording an allowed call's result; the next start records its outcome as unknown", "thread", thread, "err", err)
	}
}

// An allowed call's goroutine goes deep (the SDK's client, its HTTP and
// JSON, then the store's write): a new one grows its stack on the way,
// copying it at each doubling, on the call's path to its client (1–2% of
// the gateway's CPU in bench gateway's profile). At most maxIdleCallers
// wait for the next call, each for callerIdle at most; Shutdown ends them
// and waits for them within its grace.
const (
	maxIdleCallers = 8
	callerIdle     = 5 * time.Second
)

// gone: the client cancelled its call or ended its session.
func gone(ctx context.Context, lc *liveCall) bool {
	select {
	case <-lc.ended:
		return true
	default:
		return ctx.Err() != nil
	}
}

// relayedText is the relay's last turn of a call whose result it handed on.
const relayedText = "relayed the result to the MCP client"

// entry is an audit entry of a gateway thread, as the run writes it.
func (g *Gateway) entry(thread, runID, typ string, data map[string]any) *checkpoint.Event {
	raw, err := jsontext.Marshal(data)
	if err != nil {
		raw, _ = json.Marshal(map[string]string{"encoding_error": err.Error()})
	}
	return &checkpoint.Event{ThreadID: thread, RunID: runID, Type: typ, Data: raw, At: g.clock.Now()}
}

func encodeMessages(msgs ...agent.Message) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, len(msgs))
	for i := range msgs {
		raw, err := agentlink.Marshal(&msgs[i])
		if err != nil {
			return nil, fmt.Errorf("mcpgate: encoding a message: %w", err)
		}
		out[i] = raw
	}
	return out, nil
}
