package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/host"
)

// follow reads the host's events: a call's question (its thread now
// waits for a person), a call blocked or denied (its result), a run's end
// (its thread is free).
func (s *Service) follow(events <-chan agent.Event) {
	defer s.stopped.Done()
	for {
		select {
		case <-s.stop:
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			thread := ev.Meta().ThreadID
			if !IsThread(thread) {
				continue
			}
			switch ev := ev.(type) {
			case *agent.HitlRequestEvent:
				if ev.Question != nil && ev.Question.Status == checkpoint.QuestionPending {
					s.asked(thread, ev.Question.CallID, true)
				}
			case *host.ResolvedEvent:
				// Answered (or timed out): its thread goes on at once, and
				// a call that comes meanwhile waits for it.
				s.asked(thread, ev.Question.CallID, false)
			case *agent.HitlResolvedEvent:
				if ev.Question != nil {
					s.asked(thread, ev.Question.CallID, false)
				}
			case *agent.ToolCallFinishedEvent:
				if c := s.callOn(thread, ev.Call.ID); c != nil {
					s.decide(c, s.resultOutcome(c, ev.Result, ev.Call.Arguments))
				}
			case *agent.RunFinishedEvent:
				s.runEnded(thread, ev.Meta().RunID, ev.Err)
			case *agent.AgentAbortedEvent:
				s.runEnded(thread, ev.Meta().RunID, nil)
			}
		}
	}
}

// baseOf is the session thread of one of its threads.
func baseOf(thread string) string {
	if i := strings.LastIndexByte(thread, '~'); i > 0 {
		return thread[:i]
	}
	return thread
}

func (s *Service) callOn(thread, callID string) *call {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.sessions[baseOf(thread)]
	if sess == nil {
		return nil
	}
	c := sess.calls[callID]
	if c == nil || c.lane == nil || c.lane.thread != thread {
		return nil
	}
	return c
}

// asked records whether a call waits for a person.
func (s *Service) asked(thread, callID string, asking bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.sessions[baseOf(thread)]
	if sess == nil {
		return
	}
	if c := sess.calls[callID]; c != nil && c.asking != asking && (!asking || !c.decided) {
		c.asking = asking
		sess.signal()
	}
}

// runEnded frees the thread of a run that ended; a call it did not
// decide (the run stopped on an error) is denied, and the run closed, so
// that the thread takes calls again.
func (s *Service) runEnded(thread, runID string, runErr error) {
	s.mu.Lock()
	sess := s.sessions[baseOf(thread)]
	if sess == nil {
		s.mu.Unlock()
		return
	}
	var c *call
	for _, l := range sess.lanes {
		if l.thread != thread {
			continue
		}
		switch {
		case l.busy != nil && l.busy.runID == runID:
			c = l.busy
			l.busy = nil
			sess.signal()
		case l.held && runErr == nil:
			l.held = false
			sess.signal()
		}
	}
	s.mu.Unlock()
	if c == nil {
		return
	}
	if runErr != nil {
		s.decide(c, outcome{reason: "tollgate could not decide the call: " + runErr.Error()})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.host.Abort(ctx, thread, "the run stopped on an error: "+runErr.Error()); err != nil && !errors.Is(err, host.ErrClosed) {
			s.log.Warn("tollgate: closing a coding agent's call whose run failed", "thread", thread, "err", err)
		}
		return
	}
	if out, ok := s.stored(context.Background(), c); ok {
		s.decide(c, out)
	}
}

func sameJSON(a, b json.RawMessage) bool {
	return string(agent.CanonicalArgs(a)) == string(agent.CanonicalArgs(b))
}

// denyReason is what the agent (and its model) reads of a call that was
// not let through, from its result in the thread.
func denyReason(tool string, r agent.ToolResult) string {
	h, _ := r.Details["hitl"].(map[string]any)
	decision, _ := h["decision"].(string)
	switch decision {
	case "policy_deny":
		rule, _ := h["matched_rule"].(string)
		if rule != "" {
			return fmt.Sprintf("tollgate: blocked by the policy (rule %s): %s", rule, r.Content)
		}
		return "tollgate: blocked by the policy: " + r.Content
	case "human_deny":
		by, _ := h["by"].(string)
		if by == "" {
			by = "a reviewer"
		}
		why, _ := h["reason"].(string)
		if why == "" {
			return "tollgate: denied by " + by + " (no reason given)"
		}
		return "tollgate: denied by " + by + ": " + why
	case "timed_out":
		secs, _ := h["timeout_seconds"].(float64)
		if n, ok := h["timeout_seconds"].(int); ok {
			secs = float64(n)
		}
		return fmt.Sprintf("tollgate: timed out: nobody answered within %s, so the call was not run", time.Duration(secs)*time.Second)
	case "aborted":
		why, _ := h["reason"].(string)
		return "tollgate: withdrawn before anyone answered: " + why
	}
	if r.Details["validation"] != nil {
		return fmt.Sprintf("tollgate: the input of %s is not what %s takes: %s", tool, tool, r.Content)
	}
	if r.Content == "" {
		return "tollgate: the call was not allowed"
	}
	return "tollgate: " + r.Content
}
