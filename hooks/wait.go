package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/host"
)

// decide records a call's outcome and wakes its waiters; the first
// outcome stands.
func (s *Service) decide(c *call, out outcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.decided {
		return
	}
	c.decided, c.out, c.at = true, out, time.Now()
	c.input = nil // a whole file, for a Write: no longer needed
	c.asking = false
	close(c.done)
}

type waitStatus int

const (
	waitDecided waitStatus = iota
	waitRetry              // the server stops: send the call again
	waitGone               // the caller went away
)

// pollEvery is how often a waiting call reads its outcome from the store,
// in case it was decided where this process did not see it (another
// replica resumed the run after an answer) or an event was lost.
const pollEvery = 500 * time.Millisecond

// await waits for the call's outcome, or for the caller's time to run out
// (the call is then withdrawn and denied).
func (s *Service) await(ctx context.Context, c *call, opts *CallOptions) (outcome, waitStatus) {
	defer func() {
		s.mu.Lock()
		s.doneWaiter(c)
		s.mu.Unlock()
	}()
	var limit <-chan time.Time
	if opts.Wait > 0 {
		// A moment before the agent stops the hook: a hook stopped by its
		// agent lets the agent's own rules decide.
		t := time.NewTimer(max(opts.Wait-waitMargin, opts.Wait/2))
		defer t.Stop()
		limit = t.C
	}
	poll := time.NewTicker(pollEvery)
	defer poll.Stop()
	for {
		select {
		case <-c.done:
			return c.out, waitDecided
		case <-poll.C:
			if out, ok := s.stored(ctx, c); ok {
				s.decide(c, out)
			}
		case <-limit:
			s.withdraw(c, "the agent's hook could wait no longer")
			// The withdrawal decides it, unless an answer came first.
			select {
			case <-c.done:
				return c.out, waitDecided
			case <-time.After(waitMargin / 2):
				return outcome{reason: "tollgate: nobody answered within the time the agent's hook waits, so the call was not run"}, waitDecided
			}
		case <-s.closing:
			if opts.Retries {
				return outcome{}, waitRetry
			}
			s.withdraw(c, "tollgate is shutting down and the agent's hook cannot wait for it")
			select {
			case <-c.done:
				return c.out, waitDecided
			case <-time.After(2 * time.Second):
				return outcome{reason: "tollgate: the server is shutting down: the call was not decided"}, waitDecided
			}
		case <-ctx.Done():
			if !opts.Retries {
				// An agent's http hook that went (its time ran out, the
				// agent stopped): nobody would run the call an answer
				// allows.
				s.withdraw(c, "the agent's hook stopped waiting")
			}
			return outcome{}, waitGone
		}
	}
}

// waitMargin is how long before the caller's limit a call is withdrawn.
const waitMargin = 3 * time.Second

// withdraw aborts a call's run if the call is still undecided: its
// question (if any) is aborted, a later answer is refused.
func (s *Service) withdraw(c *call, why string) {
	s.mu.Lock()
	decided := c.decided || c.waiters > 1
	thread := ""
	if c.lane != nil {
		thread = c.lane.thread
	}
	s.mu.Unlock()
	if decided || thread == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.host.Abort(ctx, thread, why); err != nil && !errors.Is(err, host.ErrClosed) {
		s.log.Warn("tollgate: withdrawing a coding agent's call", "thread", thread, "call", c.id, "err", err)
	}
}

// stored reads a call's outcome from the store: its run's record of the
// call.
func (s *Service) stored(ctx context.Context, c *call) (outcome, bool) {
	s.mu.Lock()
	thread, runID := "", c.runID
	if c.lane != nil {
		thread = c.lane.thread
	}
	s.mu.Unlock()
	if thread == "" || runID == "" {
		return outcome{}, false
	}
	recs, err := s.cfg.Store.ListToolCalls(ctx, thread, runID, c.id)
	if err != nil || len(recs) == 0 {
		return outcome{}, false
	}
	rec := recs[0]
	if rec.State != checkpoint.ToolCallDone {
		// Let through, and being handed on: its result says how (the
		// relay's tool is idempotent, so a run cut off here hands it on
		// again when it resumes).
		return outcome{}, false
	}
	var r agent.ToolResult
	if err := json.Unmarshal(rec.Result, &r); err != nil {
		return outcome{reason: "tollgate: the call's recorded result is not readable: " + err.Error()}, true
	}
	return s.resultOutcome(c, r, rec.Args), true
}

// allowed is an allow with the input that runs (nil when it is the
// agent's own).
func (s *Service) allowed(c *call, ran json.RawMessage, reason string) outcome {
	s.mu.Lock()
	own := c.input // nil once decided: then this outcome is not the one kept
	s.mu.Unlock()
	out := outcome{allow: true, reason: reason}
	if !sameJSON(ran, own) {
		out.input = ran
	}
	return out
}

// resultOutcome is what a call's result in its thread tells the agent.
func (s *Service) resultOutcome(c *call, r agent.ToolResult, ran json.RawMessage) outcome {
	if h, ok := r.Details["hook"].(map[string]any); ok && h["decision"] == "allow" {
		reason, _ := h["reason"].(string)
		var input json.RawMessage
		if raw, ok := h["input"]; ok {
			input, _ = json.Marshal(raw)
		} else {
			input = ran
		}
		return s.allowed(c, input, reason)
	}
	return outcome{reason: denyReason(c.tool, r)}
}
