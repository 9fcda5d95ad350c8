package hitl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// Payload kinds.
const (
	// KindApprove asks a reviewer to approve, deny or edit a tool call.
	KindApprove = "approve"
	// KindAsk is a free-form question, answered with text or a form.
	KindAsk = "ask"
	// KindConfirm is a yes/no question.
	KindConfirm = "confirm"
)

// Payload is what a person is shown. Which fields are set depends on Kind.
// Questions of other kinds (such as interrupt's "tool_interrupt") keep
// their JSON in Raw.
type Payload struct {
	Kind string `json:"kind"`

	// approve: the tool, its arguments as a plain object, the policy's
	// details (matched rule, impact...), and the arguments' JSON Schema,
	// so that edits can be checked wherever the answer is given.
	ToolName   string          `json:"tool_name,omitempty"`
	Args       map[string]any  `json:"args,omitempty"`
	Details    map[string]any  `json:"details,omitempty"`
	ArgsSchema json.RawMessage `json:"args_schema,omitempty"`

	// ask: the question, and optionally the choices offered or a JSON
	// Schema for a form.
	Question string          `json:"question,omitempty"`
	Choices  []string        `json:"choices,omitempty"`
	Schema   json.RawMessage `json:"schema,omitempty"`

	// confirm: the message to say yes or no to.
	Message string `json:"message,omitempty"`

	// Raw is the stored payload as it is.
	Raw json.RawMessage `json:"-"`
}

// Request is a pending question as a host sees it.
type Request struct {
	QuestionID string
	ThreadID   string
	RunID      string
	CallID     string
	// TimeoutSeconds is the time the question was given, for a front
	// end's countdown; Deadline is the absolute end of it (zero: none).
	TimeoutSeconds int
	Deadline       time.Time
	CreatedAt      time.Time
	// Digest binds an answer to the tool and arguments shown: send it
	// back in ApproveAnswer.Digest to be sure of approving what you saw.
	Digest  string
	Payload Payload
}

// Remaining is the time left to answer at now (zero when there is no
// deadline or it has passed).
func (r *Request) Remaining(now time.Time) time.Duration {
	if r.Deadline.IsZero() || !now.Before(r.Deadline) {
		return 0
	}
	return r.Deadline.Sub(now)
}

// RequestOf turns a stored question into a Request.
func RequestOf(q *checkpoint.Question) (*Request, error) {
	r := &Request{QuestionID: q.ID, ThreadID: q.ThreadID, RunID: q.RunID, CallID: q.CallID,
		Deadline: q.Deadline, CreatedAt: q.CreatedAt, Digest: q.Digest}
	if !q.Deadline.IsZero() {
		r.TimeoutSeconds = int(q.Deadline.Sub(q.CreatedAt).Round(time.Second) / time.Second)
	}
	r.Payload.Raw = q.Payload
	switch q.Kind {
	case KindApprove, KindAsk, KindConfirm:
		dec := json.NewDecoder(bytes.NewReader(q.Payload))
		dec.UseNumber() // arguments shown digit for digit
		if err := dec.Decode(&r.Payload); err != nil {
			return nil, fmt.Errorf("hitl: payload of question %q is not readable: %w", q.ID, err)
		}
	}
	r.Payload.Kind = q.Kind
	return r, nil
}

// Decisions a reviewer can give to an approve question.
const (
	DecisionApprove = "approve"
	DecisionDeny    = "deny"
	DecisionEdit    = "edit"
)

// ApproveAnswer answers an approve question.
type ApproveAnswer struct {
	// Decision is "approve", "deny" or "edit".
	Decision string `json:"decision"`
	// Reason is given to the model when the call is denied.
	Reason string `json:"reason,omitempty"`
	// EditedArgs are the arguments to run with instead (edit only): the
	// whole arguments object, checked against the tool's schema.
	EditedArgs map[string]any `json:"edited_args,omitempty"`
	// Digest, when set, must equal the request's Digest: the answer is
	// refused if the call changed since the reviewer looked. The HTTP
	// API requires it; a program answering in its own process through
	// the channel may leave it out.
	Digest string `json:"digest,omitempty"`
}

// ConfirmAnswer answers a confirm question (a plain true or false works
// too).
type ConfirmAnswer struct {
	Yes bool `json:"yes"`
}

// Errors from Answer. Each wraps the checkpoint error of the same meaning,
// so errors.Is works with either.
var (
	ErrUnknownQuestion = fmt.Errorf("hitl: unknown question: %w", checkpoint.ErrNotFound)
	ErrAlreadyAnswered = fmt.Errorf("hitl: question already resolved: %w", checkpoint.ErrConflict)
	ErrExpired         = fmt.Errorf("hitl: question expired: %w", checkpoint.ErrExpired)
	ErrAborted         = fmt.Errorf("hitl: question aborted: %w", checkpoint.ErrConflict)
	ErrWrongKind       = errors.New("hitl: answer does not fit the question's kind")
	ErrDigestMismatch  = errors.New("hitl: the answer's digest does not match the question: the call changed since it was shown")
	// ErrDigestRequired: the answer carries no digest where one is
	// required ([AnswerOptions].RequireDigest); the question stays open.
	ErrDigestRequired = errors.New("hitl: the answer carries no digest: send the digest of the call that was shown")
	// ErrInvalidAnswer: the answer is refused (for example edited
	// arguments that fail the tool's schema, or that the policy denies);
	// the question stays open.
	ErrInvalidAnswer = errors.New("hitl: answer refused")
	// ErrOtherThread: a channel bound to one thread was asked to answer a
	// question of another.
	ErrOtherThread = errors.New("hitl: the question is not in the channel's thread")
)
