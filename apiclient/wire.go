package apiclient

import (
	"bytes"
	"encoding/json"
	"errors"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/policy/learn"
)

// The wire types: the API's JSON (server/API.md), encoded by the server
// and decoded by [Client] from the same declarations, so that the two
// cannot drift apart.

// TimeFormat is the API's: RFC 3339 in UTC with microseconds, the
// precision every store keeps.
const TimeFormat = "2006-01-02T15:04:05.000000Z07:00"

// Time is a time as the API writes it: [TimeFormat], or null when zero.
type Time time.Time

// MarshalJSON implements json.Marshaler.
func (t Time) MarshalJSON() ([]byte, error) {
	tt := time.Time(t)
	if tt.IsZero() {
		return []byte("null"), nil
	}
	return []byte(`"` + tt.UTC().Format(TimeFormat) + `"`), nil
}

// UnmarshalJSON implements json.Unmarshaler: RFC 3339, or null (the zero
// time).
func (t *Time) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*t = Time{}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	tt, err := time.Parse(time.RFC3339Nano, s)
	*t = Time(tt)
	return err
}

// RawJSON is stored JSON (payloads, arguments, answers, messages, event
// data) on the wire. Stored JSON was often written by json.Marshal, which
// escapes <, > and & as \u003c, \u003e and \u0026: MarshalJSON writes
// those three as themselves, compacts the text and keeps everything else
// as it was written (key order, numbers digit for digit, other escapes).
// UnmarshalJSON keeps the text as it came.
type RawJSON []byte

// MarshalJSON implements json.Marshaler.
func (r RawJSON) MarshalJSON() ([]byte, error) {
	if len(bytes.TrimSpace(r)) == 0 {
		return []byte("null"), nil
	}
	out, err := unescapeHTML(r)
	if err != nil {
		// Stores keep valid JSON; should one hold anything else, it is
		// shown as the text it is rather than failing the response.
		return json.Marshal(string(r))
	}
	return out, nil
}

// UnmarshalJSON implements json.Unmarshaler: null is nil, anything else
// is kept as it is.
func (r *RawJSON) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*r = nil
		return nil
	}
	*r = append((*r)[:0], b...)
	return nil
}

var errBadJSON = errors.New("apiclient: not valid JSON")

// unescapeHTML compacts valid JSON text and turns the escapes \u003c,
// \u003e and \u0026 (any case) back into <, > and &; other escapes stay
// as written. Text that is not valid JSON is an error.
func unescapeHTML(src []byte) ([]byte, error) {
	if !json.Valid(src) {
		return nil, errBadJSON
	}
	out := make([]byte, 0, len(src))
	inString := false
	for i := 0; i < len(src); i++ {
		c := src[i]
		if !inString {
			switch c {
			case ' ', '\t', '\n', '\r':
				continue
			case '"':
				inString = true
			}
			out = append(out, c)
			continue
		}
		switch c {
		case '"':
			inString = false
			out = append(out, c)
		case '\\':
			// json.Valid vouched for the escape: a letter after the
			// backslash, and four hex digits after a 'u'.
			if src[i+1] == 'u' {
				if lit, ok := htmlEscape(src[i+2 : i+6]); ok {
					out = append(out, lit)
				} else {
					out = append(out, src[i:i+6]...)
				}
				i += 5
				continue
			}
			out = append(out, c, src[i+1])
			i++
		default:
			out = append(out, c)
		}
	}
	return out, nil
}

// htmlEscape reports which of <, > and & the four hex digits name.
func htmlEscape(hex []byte) (byte, bool) {
	if hex[0] != '0' || hex[1] != '0' {
		return 0, false
	}
	switch {
	case hex[2] == '3' && (hex[3] == 'c' || hex[3] == 'C'):
		return '<', true
	case hex[2] == '3' && (hex[3] == 'e' || hex[3] == 'E'):
		return '>', true
	case hex[2] == '2' && hex[3] == '6':
		return '&', true
	}
	return 0, false
}

// Question is a question as the API shows it (API.md "Question").
type Question struct {
	ThreadID       string  `json:"thread_id"`
	ID             string  `json:"id"`
	RunID          string  `json:"run_id"`
	CallID         string  `json:"call_id"`
	Kind           string  `json:"kind"`
	Tool           string  `json:"tool"`
	Status         string  `json:"status"`
	Payload        RawJSON `json:"payload"`
	Digest         string  `json:"digest"`
	CreatedAt      Time    `json:"created_at"`
	Deadline       Time    `json:"deadline"`
	TimeoutSeconds int64   `json:"timeout_seconds"`
	Answer         RawJSON `json:"answer"`
	AnsweredBy     string  `json:"answered_by"`
	Reason         string  `json:"reason"`
	ResolvedAt     Time    `json:"resolved_at"`
}

// QuestionOf is a stored question as the API shows it.
func QuestionOf(q *checkpoint.Question) Question {
	return Question{
		ThreadID: q.ThreadID, ID: q.ID, RunID: q.RunID, CallID: q.CallID, Kind: q.Kind, Tool: q.Tool,
		Status: string(q.Status), Payload: RawJSON(q.Payload), Digest: q.Digest,
		CreatedAt: Time(q.CreatedAt), Deadline: Time(q.Deadline),
		TimeoutSeconds: int64(q.Timeout().Round(time.Second) / time.Second),
		Answer:         RawJSON(q.Answer), AnsweredBy: q.AnsweredBy, Reason: q.Reason, ResolvedAt: Time(q.ResolvedAt),
	}
}

// Record is the question as a store keeps it.
func (w *Question) Record() *checkpoint.Question {
	return &checkpoint.Question{
		ThreadID: w.ThreadID, ID: w.ID, RunID: w.RunID, CallID: w.CallID, Kind: w.Kind, Tool: w.Tool,
		Status: checkpoint.QuestionStatus(w.Status), Payload: json.RawMessage(w.Payload), Digest: w.Digest,
		CreatedAt: time.Time(w.CreatedAt), Deadline: time.Time(w.Deadline),
		Answer: json.RawMessage(w.Answer), AnsweredBy: w.AnsweredBy, Reason: w.Reason, ResolvedAt: time.Time(w.ResolvedAt),
	}
}

// QuestionList is a page of GET /v1/questions.
type QuestionList struct {
	Questions  []Question `json:"questions"`
	NextCursor string     `json:"next_cursor"`
	// Total counts every question that matches the filters; null for a
	// reviewer limited to some threads who names none of them (counting
	// would mean reading every question).
	Total *int64 `json:"total"`
}

// Thread is a thread as the API shows it (API.md "Thread"): in a list,
// without its messages, pending questions and open calls; alone
// (GET /v1/threads/{id}), with them.
type Thread struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	RunID    string `json:"run_id"`
	RunState string `json:"run_state"`
	RunError string `json:"run_error,omitempty"`
	// A failed run of a replica (cluster mode): how many times in a row
	// it stopped with an error, and when it is tried again (absent: not
	// again, unless resumed).
	RunAttempts int   `json:"run_attempts,omitempty"`
	RunRetryAt  *Time `json:"run_retry_at,omitempty"`
	CreatedAt   Time  `json:"created_at"`
	UpdatedAt   Time  `json:"updated_at"`
	// The thread alone: nil (absent) in a list.
	Messages         RawJSON    `json:"messages,omitzero"`
	PendingQuestions []Question `json:"pending_questions,omitzero"`
	OpenCalls        []OpenCall `json:"open_calls,omitzero"`
}

// Record is the thread as a store keeps it.
func (w *Thread) Record() *checkpoint.Thread {
	return &checkpoint.Thread{ID: w.ID, Status: checkpoint.ThreadStatus(w.Status), RunID: w.RunID,
		Messages: json.RawMessage(w.Messages), CreatedAt: time.Time(w.CreatedAt), UpdatedAt: time.Time(w.UpdatedAt)}
}

// OpenCall is a call of the turn in progress (agent.CallProgress): its
// result, once it has one, is here before the turn's end appends it to
// the messages.
type OpenCall struct {
	CallID    string            `json:"call_id"`
	Tool      string            `json:"tool"`
	State     string            `json:"state"`
	StartedAt Time              `json:"started_at"`
	Result    *agent.ToolResult `json:"result,omitempty"`
}

// OpenCallOf is a call's progress as the API shows it.
func OpenCallOf(p agent.CallProgress) OpenCall {
	return OpenCall{CallID: p.Call.ID, Tool: p.Call.Name, State: p.State, StartedAt: Time(p.StartedAt), Result: p.Result}
}

// Progress is the call's progress as package agent tells it.
func (c *OpenCall) Progress() agent.CallProgress {
	return agent.CallProgress{Call: agent.ToolCall{ID: c.CallID, Name: c.Tool}, State: c.State,
		StartedAt: time.Time(c.StartedAt), Result: c.Result}
}

// Event is an event of the audit log as the API shows it (API.md
// "Event").
type Event struct {
	Seq      int64   `json:"seq"`
	ThreadID string  `json:"thread_id"`
	RunID    string  `json:"run_id"`
	Type     string  `json:"type"`
	Data     RawJSON `json:"data"`
	At       Time    `json:"at"`
}

// EventOf is a stored event as the API shows it.
func EventOf(e *checkpoint.Event) Event {
	return Event{Seq: e.Seq, ThreadID: e.ThreadID, RunID: e.RunID, Type: e.Type, Data: RawJSON(e.Data), At: Time(e.At)}
}

// Record is the event as a store keeps it.
func (w *Event) Record() *checkpoint.Event {
	return &checkpoint.Event{Seq: w.Seq, ThreadID: w.ThreadID, RunID: w.RunID, Type: w.Type,
		Data: json.RawMessage(w.Data), At: time.Time(w.At)}
}

// EventList is a page of GET /v1/threads/{id}/events.
type EventList struct {
	Events    []Event `json:"events"`
	NextAfter int64   `json:"next_after"`
}

// Delivery is a notification's delivery as the API shows it (GET
// /v1/notify/deliveries).
type Delivery struct {
	ID         string `json:"id"`
	Event      string `json:"event"`
	ThreadID   string `json:"thread_id"`
	QuestionID string `json:"question_id"`
	Channel    string `json:"channel"`
	Target     string `json:"target"`
	State      string `json:"state"`
	Attempts   int    `json:"attempts"`
	NextAt     Time   `json:"next_at"`
	LastError  string `json:"last_error"`
	UpdatedAt  Time   `json:"updated_at"`
}

// DeliveryOf is a stored delivery as the API shows it.
func DeliveryOf(d *checkpoint.Delivery) Delivery {
	return Delivery{ID: d.ID, Event: d.Event, ThreadID: d.ThreadID, QuestionID: d.QuestionID, Channel: d.Channel,
		Target: d.Target, State: string(d.State), Attempts: d.Attempts, NextAt: Time(d.NextAt), LastError: d.LastError,
		UpdatedAt: Time(d.UpdatedAt)}
}

// Record is the delivery as a store keeps it.
func (w *Delivery) Record() *checkpoint.Delivery {
	return &checkpoint.Delivery{ID: w.ID, Event: w.Event, ThreadID: w.ThreadID, QuestionID: w.QuestionID, Channel: w.Channel,
		Target: w.Target, State: checkpoint.DeliveryState(w.State), Attempts: w.Attempts, NextAt: time.Time(w.NextAt),
		LastError: w.LastError, UpdatedAt: time.Time(w.UpdatedAt)}
}

// ErrorBody is the body of every error response: the error, and for a
// refused answer the question as it is now (who won, or what it is).
type ErrorBody struct {
	Error    ErrorDetail `json:"error"`
	Question *Question   `json:"question,omitempty"`
}

// ErrorDetail is an error in the API's terms: a code a program tests
// (not_found, already_answered, invalid_answer, ...), a message for
// people, and what is wrong with an invalid answer.
type ErrorDetail struct {
	Code     string          `json:"code"`
	Message  string          `json:"message"`
	Problems []agent.Problem `json:"problems,omitempty"`
}

// Rule is a learned rule as the API shows it (API.md "Rule").
type Rule struct {
	ID           string      `json:"id"`
	Tool         string      `json:"tool"`
	Status       string      `json:"status"`
	Summary      string      `json:"summary"`
	Spec         RawJSON     `json:"spec"`
	Scope        learn.Scope `json:"scope"`
	ScopeText    string      `json:"scope_text"`
	ThreadID     string      `json:"thread_id"`
	QuestionID   string      `json:"question_id"`
	Digest       string      `json:"digest"`
	CreatedBy    string      `json:"created_by"`
	CreatedAt    Time        `json:"created_at"`
	ExpiresAt    Time        `json:"expires_at"`
	ApprovedBy   string      `json:"approved_by"`
	ApprovedAt   Time        `json:"approved_at"`
	RevokedBy    string      `json:"revoked_by"`
	RevokedAt    Time        `json:"revoked_at"`
	RevokeReason string      `json:"revoke_reason"`
	YAML         string      `json:"yaml"`
}

// RuleOf is a stored rule as the API shows it, with its status
// (learn.Service.StatusOf).
func RuleOf(r *checkpoint.LearnedRule, status string) Rule {
	v := Rule{ID: r.ID, Tool: r.Tool, Status: status, Spec: RawJSON(r.Spec), Scope: learn.ScopeOf(r), ScopeText: learn.ScopeOf(r).String(),
		ThreadID: r.ThreadID, QuestionID: r.QuestionID, Digest: r.Digest, CreatedBy: r.CreatedBy, CreatedAt: Time(r.CreatedAt),
		ExpiresAt: Time(r.ExpiresAt), ApprovedBy: r.ApprovedBy, ApprovedAt: Time(r.ApprovedAt), RevokedBy: r.RevokedBy,
		RevokedAt: Time(r.RevokedAt), RevokeReason: r.RevokeReason}
	if spec, err := learn.ParseSpec(r.Spec); err == nil {
		v.Summary, v.YAML = spec.String(), learn.RuleYAML(r, spec)
	}
	return v
}
