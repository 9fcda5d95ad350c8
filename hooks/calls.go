package hooks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/host"
)

// callFor finds the call of a hook sent again (by its id: in memory, or
// in the session's threads), or starts it on a thread of the session.
func (s *Service) callFor(ctx context.Context, sess *session, p *payload, opts *CallOptions) (*call, error) {
	s.mu.Lock()
	sess.seen = time.Now()
	if c := sess.calls[p.ToolUseID]; c != nil {
		if c.key != callKey(p) {
			s.mu.Unlock()
			return nil, otherCall(p)
		}
		s.addWaiter(c)
		s.mu.Unlock()
		return c, nil
	}
	forgotten := sess.forgotten
	s.mu.Unlock()
	if forgotten {
		if c, err := s.findStored(ctx, sess, p); c != nil || err != nil {
			return c, err
		}
	}
	return s.start(ctx, sess, p, opts)
}

// errOtherCall: a hook names a call id its session already used for
// another call (another tool or input). A call's answer is the answer to
// what its reviewer saw: an agent (or whoever holds its token) that sent
// a call again with other input under the id would have had the first
// call's answer applied to it — run as it was, by an agent that takes
// allow as "run your input".
var errOtherCall = errors.New("the call's id was used before in this session for another call")

func otherCall(p *payload) error {
	return fmt.Errorf("%w (call %s; a call id names one call, with one input), so this one was not decided", errOtherCall, p.ToolUseID)
}

// callKey is what binds a hook sent again to its call: the tool and the
// input's canonical JSON.
func callKey(p *payload) string { return agent.ArgsDigest(p.ToolName, p.ToolInput) }

// idempotencyKey makes the run of a call the same run however often its
// hook is sent.
func idempotencyKey(callID string) string { return "hook:" + callID }

// findStored looks for a call this process does not remember (it started
// after the call was made) in the session's threads: its run, by the id
// the call's idempotency key gives it.
func (s *Service) findStored(ctx context.Context, sess *session, p *payload) (*call, error) {
	s.mu.Lock()
	lanes := append([]*lane(nil), sess.lanes...)
	s.mu.Unlock()
	for _, l := range lanes {
		// Its question (a run that waits for a person), or its record (a
		// call decided): reads of one row, not of the thread.
		runID := host.IdempotentRunID(l.thread, idempotencyKey(p.ToolUseID))
		var recs []*checkpoint.ToolCall
		q, err := s.cfg.Store.GetQuestion(ctx, l.thread, hitl.QuestionID(p.ToolUseID))
		switch {
		case errors.Is(err, checkpoint.ErrNotFound):
			q = nil
			recs, err = s.cfg.Store.ListToolCalls(ctx, l.thread, runID, p.ToolUseID)
			if err != nil {
				return nil, err
			}
			if len(recs) == 0 {
				continue
			}
		case err != nil:
			return nil, err
		}
		if q != nil && !sameCall(q, l.thread, p) || q == nil && !sameRecord(recs[0], p) {
			return nil, otherCall(p)
		}
		running := q != nil && q.Status == checkpoint.QuestionPending
		c, isNew, err := s.register(sess, p, func(c *call) { c.lane, c.runID = l, runID })
		if err != nil || !isNew {
			return c, err
		}
		s.mu.Lock()
		if running && l.held {
			// Its run holds the lane: it is this call's.
			l.busy, l.held = c, false
		}
		s.mu.Unlock()
		if out, ok := s.stored(ctx, c); ok {
			s.decide(c, out)
		}
		return c, nil
	}
	return nil, nil
}

// sameCall reports whether a stored question of a thread is about p's
// call: its digest binds the thread, the id, the tool and the input the
// call was made with (an edit does not change it).
func sameCall(q *checkpoint.Question, thread string, p *payload) bool {
	return q.Tool == p.ToolName && (q.Digest == agent.CallDigest(thread, p.ToolUseID, p.ToolName, p.ToolInput) ||
		q.Digest == agent.ArgsDigest(p.ToolName, p.ToolInput))
}

// sameRecord reports whether a call's record, of a call decided with no
// question (so never edited), is p's call.
func sameRecord(rec *checkpoint.ToolCall, p *payload) bool {
	return rec.Tool == p.ToolName && sameJSON(rec.Args, p.ToolInput)
}

// register makes the session's call of p, or, if it has one already (the
// hook was sent twice at once), adds a waiter to it — unless that one was
// made with another tool or input (errOtherCall). set fills in a new call
// before anyone else sees it.
func (s *Service) register(sess *session, p *payload, set func(*call)) (c *call, isNew bool, err error) {
	key := callKey(p)
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := sess.calls[p.ToolUseID]; old != nil {
		if old.key != key {
			return nil, false, otherCall(p)
		}
		s.addWaiter(old)
		return old, false, nil
	}
	c = &call{id: p.ToolUseID, tool: p.ToolName, key: key, input: p.ToolInput, sess: sess, done: make(chan struct{})}
	s.addWaiter(c)
	if set != nil {
		set(c)
	}
	sess.calls[p.ToolUseID] = c
	return c, true, nil
}

// start puts the call on a thread of the session and starts its run.
func (s *Service) start(ctx context.Context, sess *session, p *payload, opts *CallOptions) (*call, error) {
	c, isNew, err := s.register(sess, p, nil)
	if err != nil || !isNew {
		return c, err
	}
	fail := func(err error) (*call, error) {
		s.mu.Lock()
		if sess.calls[c.id] == c {
			delete(sess.calls, c.id)
		}
		s.doneWaiter(c) // its hook does not await it
		s.mu.Unlock()
		return nil, err
	}
	env := envelope{Agent: sess.agent, Session: sess.id, Cwd: p.Cwd, Project: s.projectOf(sess, p.Cwd), Transcript: p.TranscriptPath, PermissionMode: p.PermissionMode,
		Turn: p.TurnID, Tool: p.ToolName, Call: p.ToolUseID, Input: p.ToolInput, Confine: opts.Confine}
	if opts.Wait > 0 {
		env.WaitSeconds = int(opts.Wait / time.Second)
	}
	for attempt := 0; ; attempt++ {
		l, err := s.pickLane(ctx, sess, c)
		if err != nil {
			return fail(err)
		}
		s.mu.Lock()
		c.runID = host.IdempotentRunID(l.thread, idempotencyKey(c.id))
		first := l.bytes == 0
		s.mu.Unlock()
		text, err := env.prompt(l.n, first, sess.base)
		if err != nil {
			s.freeLane(l, c)
			return fail(err)
		}
		switch err := s.fastAllow(ctx, l, c, &env, text); {
		case err == nil:
			s.freeLane(l, c)
			return c, nil
		case !errors.Is(err, errNotFast):
			s.freeLane(l, c)
			return fail(err)
		}
		// The host's run writes the thread: its version is read again
		// before the lane's next fast commit.
		s.mu.Lock()
		l.known = false
		s.mu.Unlock()
		_, _, err = s.host.Prompt(ctx, l.thread, text, &host.PromptOptions{IdempotencyKey: idempotencyKey(c.id)})
		if errors.Is(err, host.ErrRunActive) && attempt < 16 {
			// A run this process did not know of holds the thread (one
			// left by an earlier process, resumed or parked).
			s.mu.Lock()
			if l.busy == c {
				l.busy, l.held, l.checked, l.waiting = nil, true, time.Time{}, false
			}
			s.mu.Unlock()
			continue
		}
		if err != nil {
			s.freeLane(l, c)
			return fail(err)
		}
		s.mu.Lock()
		l.bytes += len(text) + 2*len(p.ToolInput) + 1024
		s.mu.Unlock()
		return c, nil
	}
}
