package interrupt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
)

// ErrNoCallID: a call that needs approval has no tool call id, so its
// question could not be found again (Python ValueError). The call is
// blocked.
var ErrNoCallID = errors.New("interrupt: the tool call needing approval has no tool call id")

// Middleware is ToolInterruptMiddleware: an agent middleware
// ([agent.BeforeToolHook]) that pauses the tool calls matching its rules
// until a person answers. Build it with [New].
//
// For each call whose tool and arguments match a rule (see
// [ShouldInterrupt]; the predicates get the call's validated arguments as
// a JSON object, json.RawMessage), it asks a question through the agent's
// durable question primitive: id [ID] of the call id, kind
// "tool_interrupt", payload [ToolInterrupt]. The answer is read by
// [Interpret]:
//
//   - approve (true, {"action": "approve"}): the call runs as it is;
//   - edit ({"action": "edit", "arguments": {...}}): the call runs with
//     the edited keys merged over its arguments, after they pass the tool's
//     schema; the result's Details["interrupt"] records the original and
//     edited arguments and who answered;
//   - anything else: the call is refused with a [*ToolDeniedError] whose
//     message the model sees as the call's error result.
//
// An edit whose arguments fail the tool's schema is refused to whoever
// answers, with every problem listed, and the question stays open: the
// agent hands the answer to the middleware before it is recorded (through
// a channel that is an [agent.AnswerChecker]; hitl's channels are, refusing
// with hitl.ErrInvalidAnswer, and errors.As finds the
// *agent.ValidationError). That check needs the run to be waiting, on the
// channel that takes the answer (or on a host that takes it), in that
// process; an answer recorded with no run waiting (between a crash and the
// resume, say) is checked when the run resumes, and an invalid edit is then
// denied, since the question is already closed.
//
// A question that times out or is aborted denies the call. The code before
// the question has no side effects, so a resumed run asks nothing twice: it
// finds the stored question, and its answer.
type Middleware struct {
	rules []Rule
	log   *slog.Logger
}

var _ agent.BeforeToolHook = (*Middleware)(nil)

// New returns the middleware for rules, or the mistakes [Validate] finds in
// them (each wrapping [ErrInvalidRule]): a rule built wrong would ask on
// every call, or on none.
func New(rules ...Rule) (*Middleware, error) {
	if err := Validate(rules); err != nil {
		return nil, err
	}
	return &Middleware{rules: slices.Clone(rules), log: slog.Default()}, nil
}

// Rules returns the middleware's rules.
func (m *Middleware) Rules() []Rule { return slices.Clone(m.rules) }

// BeforeTool implements [agent.BeforeToolHook].
func (m *Middleware) BeforeTool(ctx context.Context, call *agent.ToolCallContext) (agent.Decision, error) {
	name := call.Call.Name
	matches := Check(m.rules, name, call.RawArgs)
	if len(matches) == 0 {
		// A question already stored for this call decides even if the
		// rules no longer ask (they may have changed between a crash and
		// the resume): a reviewer's deny stands.
		if call.Call.ID == "" || call.Fresh() { // Fresh: no question about the call can be stored yet
			return agent.Continue(), nil
		}
		_, err := call.Question(ctx, ID(call.Call.ID))
		if errors.Is(err, checkpoint.ErrNotFound) {
			return agent.Continue(), nil
		}
		if err != nil {
			return agent.Decision{}, fmt.Errorf("%w %q: %w", agent.ErrQuestion, ID(call.Call.ID), err)
		}
	}
	for _, mt := range matches {
		if mt.Err != nil {
			m.log.WarnContext(ctx, "tollgate: interrupt predicate failed; asking for approval",
				"tool", name, "call", call.Call.ID, "rule", mt.Index, "err", mt.Err)
		}
	}
	id := call.Call.ID
	if id == "" {
		return agent.Decision{}, fmt.Errorf("%w (tool %q)", ErrNoCallID, name)
	}
	args, err := decodeArgs(call.RawArgs)
	if err != nil {
		return agent.Decision{}, err
	}
	q, err := call.Ask(ctx, agent.QuestionRequest{
		ID:      ID(id),
		Kind:    KindToolInterrupt,
		Payload: NewToolInterrupt(name, id, args),
		Digest:  call.CallDigest(),
		Check: func(ctx context.Context, answer json.RawMessage) error {
			out := Interpret(answer, args)
			if out.Action != ActionEdit {
				return nil
			}
			_, err := validateEdit(call.Tool, out.Arguments)
			return err
		},
	})
	if err != nil {
		return agent.Decision{}, err
	}
	denied := &ToolDeniedError{ToolName: name, ToolCallID: id, QuestionID: q.ID, By: q.AnsweredBy}
	switch q.Status {
	case checkpoint.QuestionAnswered:
	case checkpoint.QuestionTimedOut:
		denied.Decision, denied.Message = "timed_out", "no answer in time"
		return agent.Decision{}, denied
	case checkpoint.QuestionAborted:
		denied.Decision, denied.Message = "aborted", q.Reason
		return agent.Decision{}, denied
	default:
		return agent.Decision{}, fmt.Errorf("interrupt: question %q came back %s", q.ID, q.Status)
	}
	out := Interpret(q.Answer, args)
	switch out.Action {
	case ActionApprove:
		return agent.Continue(), nil
	case ActionEdit:
		raw, err := validateEdit(call.Tool, out.Arguments)
		if err != nil {
			denied.Decision, denied.Message = "invalid_edit", err.Error()
			return agent.Decision{}, denied
		}
		return agent.ReplaceArgs(raw).WithDetails(map[string]any{"interrupt": map[string]any{
			"decision": ActionEdit, "question_id": q.ID, "by": q.AnsweredBy,
			"original_args": args, "edited_args": out.Edits,
		}}), nil
	}
	denied.Decision, denied.Message = ActionDeny, out.Message
	return agent.Decision{}, denied
}

// decodeArgs reads a call's validated arguments, numbers kept exact.
func decodeArgs(raw json.RawMessage) (map[string]any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return map[string]any{}, nil
	}
	v, err := decodeJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("interrupt: the call's arguments: %w", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("interrupt: the call's arguments are not an object: %w", ErrWrongType)
	}
	return m, nil
}

// validateEdit checks edited arguments against the tool's schema; the error
// is the tool's *agent.ValidationError listing every problem.
func validateEdit(tool *agent.Tool, args map[string]any) (json.RawMessage, error) {
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("interrupt: the edited arguments cannot be encoded: %w", err)
	}
	if tool == nil {
		return raw, nil
	}
	if _, err := tool.Validate(raw); err != nil {
		return nil, err
	}
	return raw, nil
}
