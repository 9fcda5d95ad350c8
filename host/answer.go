package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/interrupt"
)

func resolvedKey(threadID, questionID string) string { return threadID + "\x00" + questionID }

func (h *Host) markSelfResolved(threadID, questionID string) {
	h.mu.Lock()
	h.selfResolved[resolvedKey(threadID, questionID)] = time.Now()
	h.mu.Unlock()
}

func (h *Host) consumeSelfResolved(threadID, questionID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := resolvedKey(threadID, questionID)
	if _, ok := h.selfResolved[k]; ok {
		delete(h.selfResolved, k)
		return true
	}
	return false
}

// Answer checks an answer where it is taken and records it: the kind's
// shape, the digest the reviewer was shown, and for an edit the tool's
// schema (every problem listed) and the policy on the edited arguments,
// all before the compare-and-set. On success the run resumes at once. The
// errors are hitl's: ErrUnknownQuestion, ErrAlreadyAnswered, ErrExpired,
// ErrAborted, ErrWrongKind, ErrDigestMismatch, ErrInvalidAnswer (the
// question then stays open for a corrected answer). The answer may leave
// the digest out; [Host.AnswerWith] can require it.
func (h *Host) Answer(ctx context.Context, threadID, questionID string, answer json.RawMessage, by string) (*checkpoint.Question, error) {
	return h.AnswerWith(ctx, threadID, questionID, answer, AnswerOptions{By: by})
}

// AnswerOptions tune [Host.AnswerWith].
type AnswerOptions struct {
	// By names who answers.
	By string
	// RequireDigest refuses an answer to a question bound to a digest
	// that does not carry it (hitl.ErrDigestRequired): an answer taken
	// from outside, as the HTTP API takes them, must say which call it
	// is about. Zero: the digest may be left out.
	RequireDigest bool
}

// AnswerWith is [Host.Answer] with options.
func (h *Host) AnswerWith(ctx context.Context, threadID, questionID string, answer json.RawMessage, o AnswerOptions) (*checkpoint.Question, error) {
	// Marked before the compare-and-set: its notification can arrive
	// before AnswerWith returns, and the run must be resumed once, after
	// the answer is in the audit log. (A host never started hears no
	// notifications: nothing would ever take the mark away.)
	h.mu.Lock()
	started := h.started
	h.mu.Unlock()
	if started {
		h.markSelfResolved(threadID, questionID)
	}
	q, err := h.answers.AnswerWith(ctx, threadID, questionID, answer, &hitl.AnswerOptions{By: o.By, Check: h.checkAnswer, RequireDigest: o.RequireDigest})
	if err != nil {
		// Whoever won may have had its notification taken for ours (the
		// mark is gone: the notification loop consumed it): then make
		// sure the run goes on. Only then: an answer refused because the
		// question was resolved before (409 already_answered, 410) must
		// not resume a run that waits for something else — it would park
		// again, with a run_parked entry and metric each time.
		if started && !h.consumeSelfResolved(threadID, questionID) &&
			!errors.Is(err, hitl.ErrInvalidAnswer) && !errors.Is(err, hitl.ErrWrongKind) && !errors.Is(err, hitl.ErrDigestMismatch) &&
			!errors.Is(err, hitl.ErrDigestRequired) {
			h.kick(threadID)
		}
		return nil, err
	}
	h.resolved(ctx, q)
	return q, nil
}

// resolved tells subscribers of a resolution this host recorded (its audit
// entry was committed with it) and resumes the run.
func (h *Host) resolved(ctx context.Context, q *checkpoint.Question) {
	h.events.publish(&ResolvedEvent{Question: q})
	h.kickWith(q.ThreadID, q)
}

// checkAnswer vets an answer with what the run itself would check: an
// edit's arguments against the tool's schema and every middleware that
// can check edits (the policy).
func (h *Host) checkAnswer(ctx context.Context, q *checkpoint.Question, raw json.RawMessage) error {
	var edited json.RawMessage
	var toolName string
	switch q.Kind {
	case hitl.KindApprove:
		var a struct {
			Decision   string          `json:"decision"`
			EditedArgs json.RawMessage `json:"edited_args"`
		}
		if err := json.Unmarshal(raw, &a); err != nil || a.Decision != hitl.DecisionEdit {
			return nil
		}
		var p struct {
			ToolName string `json:"tool_name"`
		}
		_ = json.Unmarshal(q.Payload, &p)
		edited, toolName = a.EditedArgs, p.ToolName
	case interrupt.KindToolInterrupt:
		var p struct {
			ToolName  string         `json:"tool_name"`
			Arguments map[string]any `json:"arguments"`
		}
		if err := json.Unmarshal(q.Payload, &p); err != nil {
			return fmt.Errorf("the question's payload is not readable: %w", err)
		}
		// Read exactly as the run will read it (interrupt.Interpret), so
		// that no spelling of an answer means "approve" here and "edit"
		// there.
		out := interrupt.Interpret(raw, p.Arguments)
		if out.Action != interrupt.ActionEdit {
			return nil
		}
		edited, _ = json.Marshal(out.Arguments)
		toolName = p.ToolName
	default:
		return nil
	}
	tmpl := h.templateOf(q.ThreadID)
	tool := tmpl.tool(toolName)
	if tool == nil {
		return fmt.Errorf("tool %q is not one this host runs, so an edit of it cannot be checked", toolName)
	}
	check := &agent.EditCheck{ThreadID: q.ThreadID, CallID: q.CallID, Tool: tool, Args: edited}
	checked := false
	for _, m := range tmpl.cfg.Middleware {
		ec, ok := m.(agent.EditChecker)
		if !ok {
			continue
		}
		if check.Messages == nil {
			if th, err := h.store.LoadThread(ctx, q.ThreadID); err == nil {
				var msgs []agent.Message
				if json.Unmarshal(th.Messages, &msgs) == nil {
					check.Messages = msgs
				}
			}
		}
		if err := ec.CheckEdit(ctx, check); err != nil {
			return err
		}
		checked = true
	}
	if !checked {
		if _, err := tool.Validate(edited); err != nil {
			return err
		}
	}
	return nil
}
