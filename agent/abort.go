package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// AbortPending closes the thread's unfinished run cleanly, as when a user
// closes the tab: a run in progress in this process is stopped; every tool
// call of the last turn without a result gets a synthetic deny result;
// every pending question of the thread is resolved as aborted (a later
// answer is refused); a terminal assistant message with stop reason
// "aborted" is persisted; and an [AgentAbortedEvent] is emitted. The next
// Prompt starts afresh. With no unfinished run it does nothing.
func (a *Agent) AbortPending(ctx context.Context, reason string) error {
	if err := a.takeRunForAbort(ctx, fmt.Errorf("%w: %s", ErrAborted, reason)); err != nil {
		return err
	}
	defer a.endRun()
	// A process driving the run elsewhere may save the thread between our
	// read and our write: read again and redo, a few times.
	for attempt := 1; ; attempt++ {
		err := a.abortOnce(ctx, reason)
		if !errors.Is(err, checkpoint.ErrConflict) || attempt == 5 {
			return err
		}
	}
}

// takeRunForAbort stops the run active in this process, if any, and
// takes its slot. A run may take the slot before the abort does (a
// resume): it is cancelled too, as soon as it registers (abortCause).
func (a *Agent) takeRunForAbort(ctx context.Context, cause error) error {
	a.cancelMu.Lock()
	a.abortWaiters++
	a.abortCause = cause
	defer func() {
		if a.abortWaiters--; a.abortWaiters == 0 {
			a.abortCause = nil
		}
		a.cancelMu.Unlock()
	}()
	for a.running != nil {
		if a.cancelRun != nil {
			a.cancelRun(cause)
		}
		ended := a.running
		a.cancelMu.Unlock()
		select {
		case <-ctx.Done():
			a.cancelMu.Lock()
			return ctx.Err()
		case <-ended:
		}
		a.cancelMu.Lock()
	}
	a.running = make(chan struct{})
	return nil
}

func (a *Agent) abortOnce(ctx context.Context, reason string) error {
	th, err := a.store.LoadThread(ctx, a.threadID)
	if errors.Is(err, checkpoint.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("agent: loading thread: %w", err)
	}
	if th.Status != checkpoint.ThreadRunning {
		return nil
	}
	msgs, err := decodeMessages(th.Messages)
	if err != nil {
		return err
	}
	// Questions first: once they are aborted no answer can slip in and
	// have a call run after this point.
	if err := a.abortQuestions(ctx, reason); err != nil {
		return err
	}
	rs := &runState{a: a, th: th}
	var add []Message
	if last := msgs[len(msgs)-1]; last.Role == RoleAssistant && len(last.ToolCalls) > 0 {
		ids := make([]string, len(last.ToolCalls))
		for i, c := range last.ToolCalls {
			ids[i] = c.ID
		}
		records, err := a.store.ListToolCalls(ctx, th.ID, th.RunID, ids...)
		if err != nil {
			return fmt.Errorf("agent: reading tool call states: %w", err)
		}
		byID := map[string]*checkpoint.ToolCall{}
		for _, r := range records {
			byID[r.CallID] = r
		}
		for _, call := range last.ToolCalls {
			var res ToolResult
			r := byID[call.ID]
			switch {
			case r != nil && r.State == checkpoint.ToolCallDone:
				if err := json.Unmarshal(r.Result, &res); err != nil {
					return fmt.Errorf("agent: stored result of call %s is not readable: %w", call.ID, err)
				}
			case r != nil:
				// It started and may have run: saying "denied" would be a
				// lie.
				res = unknownOutcome(call.Name)
				res.CallID, res.ToolName = call.ID, call.Name
				if err := a.recordDone(ctx, rs, call, r.Args, "", "", res, nil); err != nil {
					return err
				}
				a.emit(&ToolCallFinishedEvent{meta: a.meta(th.RunID), Call: call, Result: res})
			default:
				res = ToolResult{CallID: call.ID, ToolName: call.Name, IsError: true,
					Content: "Tool call aborted: " + reason,
					Details: map[string]any{"hitl": map[string]any{"decision": "aborted", "reason": reason}}}
				if err := a.recordDone(ctx, rs, call, call.Arguments, "", "", res, nil); err != nil {
					return err
				}
				a.emit(&ToolCallFinishedEvent{meta: a.meta(th.RunID), Call: call, Result: res})
			}
			m := ToolResultMessage(res)
			m.RunID, m.CreatedAt = th.RunID, a.clock.Now()
			add = append(add, m)
		}
	}
	final := Message{Role: RoleAssistant, Text: "Aborted: " + reason, StopReason: StopAborted, RunID: th.RunID, CreatedAt: a.clock.Now()}
	add = append(add, final)
	// The end of the run: the results, the final message, the thread idle
	// and the audit entry in one write.
	b := &checkpoint.Batch{Events: []*checkpoint.Event{a.event(th.RunID, "aborted", map[string]any{"reason": reason})}}
	if _, err := rs.commit(ctx, b, add, true); err != nil {
		return err
	}
	a.emit(&MessageEvent{meta: a.meta(th.RunID), Message: final})
	a.emit(&AgentAbortedEvent{meta: a.meta(th.RunID), Reason: reason})
	return nil
}

func (a *Agent) abortQuestions(ctx context.Context, reason string) error {
	for q, err := range checkpoint.Questions(ctx, a.store, checkpoint.QuestionFilter{ThreadID: a.threadID, Status: checkpoint.QuestionPending}) {
		if err != nil {
			return fmt.Errorf("agent: listing pending questions: %w", err)
		}
		r := checkpoint.Resolution{Status: checkpoint.QuestionAborted, By: "abort", Reason: reason, At: a.clock.Now()}
		_, cerr := a.store.Commit(ctx, &checkpoint.Batch{
			Resolve: &checkpoint.Resolve{ThreadID: q.ThreadID, ID: q.ID, Resolution: r},
			Events:  []*checkpoint.Event{checkpoint.ResolutionEvent(q, r)},
		})
		if cerr != nil && !errors.Is(cerr, checkpoint.ErrConflict) {
			return fmt.Errorf("agent: aborting question %s: %w", q.ID, cerr)
		}
	}
	return nil
}
