package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/internal/jsontext"
)

// A call the policy lets through at once is decided in one commit: the
// run a host would have made of it (its prompt, the relay's message with
// the call, the call's record and result, the run's end, and their audit
// entries: run_started, tool_result, run_finished), written as one
// append to the session's thread — a compare-and-set on the thread's
// version this process knows from its own last write, so that no thread
// is read and no message decoded. The agent is told allow once that
// commit is durable. Anything else (a call asked about, blocked, whose
// input is not the tool's, a thread this process does not know the
// version of or that another process wrote meanwhile) is a run of the
// host, as before: see [Service.start].
//
// The store stays the truth: the version is a cache, and a commit on a
// stale one writes nothing (ErrConflict); the call then goes the host's
// way, which reads the thread. The commit is the same whether the host
// made the run or this function did (TestFastPathIsTheHostsRun).

// errNotFast says a call is not one the fast path decides: the host's
// run decides it.
var errNotFast = errors.New("hooks: not decided at once")

// fastAllow decides c on lane l, which it holds, in one commit when the
// policy lets the call through at once; errNotFast when it does not (or
// the lane's thread is not as this process last wrote it): nothing was
// written. text is the run's prompt.
func (s *Service) fastAllow(ctx context.Context, l *lane, c *call, env *envelope, text string) error {
	if s.slowOnly {
		return errNotFast
	}
	s.mu.Lock()
	known, version, runID, read := l.known, l.version, c.runID, l.read
	s.mu.Unlock()
	if !known {
		// Read once, after a run of the host (or another process) wrote
		// it: the next calls of the lane know it.
		th, err := s.cfg.Store.LoadThread(ctx, l.thread)
		switch {
		case errors.Is(err, checkpoint.ErrNotFound):
			version = 0
		case err != nil:
			return errNotFast
		case th.Status == checkpoint.ThreadRunning:
			return errNotFast // the host's Prompt finds whose run it is
		default:
			version, read = th.Version, true
			s.mu.Lock()
			l.bytes, l.read = len(th.Messages), true
			s.mu.Unlock()
		}
	}
	tool := s.tools.tool(env.Tool)
	if tool == nil || len(env.Input) > maxInput {
		return errNotFast
	}
	// The input as the run's call holds it: the envelope's, compacted by
	// its encoding.
	var compact bytes.Buffer
	if err := json.Compact(&compact, env.Input); err != nil {
		return errNotFast
	}
	input := json.RawMessage(compact.Bytes())
	args, err := tool.Validate(input)
	if err != nil {
		return errNotFast // the run says what is wrong with it
	}
	prompt := agent.Message{Role: agent.RoleUser, Text: text, RunID: runID, CreatedAt: time.Now()}
	pc := &hitl.PolicyContext{ThreadID: l.thread, CallID: c.id, Tool: env.Tool, Args: args, RawArgs: input,
		Messages: []agent.Message{prompt}, Annotations: tool.Annotations()}
	if !s.allowsAtOnce(ctx, pc, env) {
		return errNotFast
	}
	// Sent again after another process decided it (the hook's retry
	// reached another replica), on a thread read from the store: that
	// run's record stands. Read before the commit, whose compare-and-set
	// fails if the run is written after. A thread only this process has
	// written holds no call it does not know.
	if read {
		if recs, err := s.cfg.Store.ListToolCalls(ctx, l.thread, runID, c.id); err != nil || len(recs) > 0 {
			return errNotFast
		}
	}
	hook := map[string]any{"decision": "allow", "agent": string(env.Agent)}
	ran, reason, err := s.policyAllows(ctx, hook, l.thread, env.Tool, input, env)
	if err != nil {
		return err
	}
	call := agent.ToolCall{ID: c.id, Name: env.Tool, Arguments: input}
	started := time.Now()
	res := allowResult(env, hook, reason, ran)
	res.CallID, res.ToolName, res.StartedAt, res.EndedAt = c.id, env.Tool, started, started
	resRaw, err := jsontext.Marshal(res)
	if err != nil {
		return err
	}
	msgs := []agent.Message{
		prompt,
		{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{call}, StopReason: agent.StopToolUse, RunID: runID, CreatedAt: prompt.CreatedAt},
		{Role: agent.RoleTool, Result: &res, RunID: runID, CreatedAt: started},
		{Role: agent.RoleAssistant, Text: endText(env, true), StopReason: agent.StopEndTurn, RunID: runID, CreatedAt: started},
	}
	w := &checkpoint.ThreadWrite{ID: l.thread, Version: version, Status: checkpoint.ThreadIdle, RunID: runID}
	size := 0
	for _, m := range msgs {
		raw, err := jsontext.Marshal(m)
		if err != nil {
			return fmt.Errorf("hooks: encoding a message: %w", err)
		}
		w.Append = append(w.Append, raw)
		size += len(raw) + 1
	}
	event := func(typ string, data map[string]any) *checkpoint.Event {
		raw, _ := jsontext.Marshal(data) // strings and booleans
		return &checkpoint.Event{ThreadID: l.thread, RunID: runID, Type: typ, Data: raw, At: started}
	}
	b := &checkpoint.Batch{
		Thread: w,
		ToolCalls: []*checkpoint.ToolCall{{ThreadID: l.thread, RunID: runID, CallID: c.id, Tool: env.Tool,
			Args: input, State: checkpoint.ToolCallDone, Result: resRaw}},
		Events: []*checkpoint.Event{
			event("run_started", map[string]any{"prompt": text}),
			event("tool_result", map[string]any{"call_id": c.id, "tool": env.Tool, "is_error": false,
				"digest": agent.CallDigest(l.thread, c.id, env.Tool, input)}),
			event("run_finished", map[string]any{"stop_reason": string(agent.StopEndTurn)}),
		},
	}
	if _, err := s.cfg.Store.Commit(ctx, b); err != nil {
		s.mu.Lock()
		l.known = false
		s.mu.Unlock()
		if errors.Is(err, checkpoint.ErrConflict) {
			return errNotFast // written meanwhile elsewhere: the host's run reads it
		}
		return err
	}
	s.mu.Lock()
	l.known, l.version = true, w.Version
	if w.Version <= version {
		l.known = false // a store that does not say: read it next time
	}
	l.bytes += size
	s.mu.Unlock()
	s.decide(c, s.allowed(c, ran, reason))
	return nil
}

// allowsAtOnce reports whether the policy lets the call through with no
// question (a panicking policy does not: the host's run asks).
func (s *Service) allowsAtOnce(ctx context.Context, pc *hitl.PolicyContext, env *envelope) (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("tollgate: the hooks' policy panicked; the call goes to its run", "tool", pc.Tool, "call", pc.CallID, "panic", r, "stack", string(debug.Stack()))
			ok = false
		}
	}()
	return s.policyFor(ctx, pc, env).Action() == "approve"
}
