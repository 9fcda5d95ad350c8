package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/tollgate-ai/tollgate/internal/jsontext"
)

// EventQuestionResolved is the type of the audit event that records a
// question's resolution ([ResolutionEvent]).
const EventQuestionResolved = "question_resolved"

// ErrUnaudited: a batch resolves a question without the question_resolved
// event that records it (a [ResolutionEvent] of the same question, status
// and resolver). No store commits one: a resolution with no audit entry
// cannot exist. (PostgreSQL and SQLite also refuse it in the database,
// to a client that writes their tables by hand; see their migrations.)
var ErrUnaudited = errors.New("checkpoint: a resolution must commit with its question_resolved event")

// ResolutionEvent is the question_resolved audit entry of resolving q (as
// read, pending) with r, to be committed with the resolution (see
// [ResolveBatch]). r.At should be set: it is the event's time and the
// latency's end.
//
// Its data is a JSON object: question_id, call_id, kind, status, by,
// digest, latency_ms, and reason and decision when there are ones. The
// stores check question_id, status and by against the resolution (and the
// event's thread against the question's).
func ResolutionEvent(q *Question, r Resolution) *Event {
	entry := map[string]any{
		"question_id": q.ID, "call_id": q.CallID, "kind": q.Kind, "status": string(r.Status),
		"by": r.By, "digest": q.Digest,
	}
	if !r.At.IsZero() {
		entry["latency_ms"] = r.At.Sub(q.CreatedAt).Milliseconds()
	}
	if r.Reason != "" {
		entry["reason"] = r.Reason
	}
	if r.Status == QuestionAnswered {
		var d struct {
			Decision string `json:"decision"`
			Action   string `json:"action"`
			Reason   string `json:"reason"`
		}
		if json.Unmarshal(r.Answer, &d) == nil {
			if d.Decision == "" {
				d.Decision = d.Action
			}
			if d.Decision != "" {
				entry["decision"] = d.Decision
			}
			if d.Reason != "" {
				entry["reason"] = d.Reason
			}
		}
	}
	raw, err := jsontext.Marshal(entry)
	if err != nil {
		// Strings and numbers only: cannot happen. Still, the entry the
		// stores look for.
		raw, _ = json.Marshal(map[string]string{"question_id": q.ID, "status": string(r.Status), "by": r.By, "encoding_error": err.Error()})
	}
	return &Event{ThreadID: q.ThreadID, RunID: q.RunID, Type: EventQuestionResolved, Data: raw, At: r.At}
}

// ResolveBatch is the batch that resolves q (as read) with r and records
// it: the resolution and its [ResolutionEvent].
func ResolveBatch(q *Question, r Resolution) *Batch {
	return &Batch{
		Resolve: &Resolve{ThreadID: q.ThreadID, ID: q.ID, Resolution: r},
		Events:  []*Event{ResolutionEvent(q, r)},
	}
}

// ResolutionEventIndex returns the index in b.Events of the event that
// records b's resolution: the first question_resolved event of the
// question's thread whose data names the question, the status and the
// resolver. It returns -1 and nil when b resolves nothing, and an error
// wrapping ErrUnaudited when b resolves a question without such an event.
// Every store calls it before it writes a batch.
func ResolutionEventIndex(b *Batch) (int, error) {
	rv := b.Resolve
	if rv == nil {
		return -1, nil
	}
	for i, e := range b.Events {
		if e != nil && e.Type == EventQuestionResolved && e.ThreadID == rv.ThreadID && recordsResolution(e.Data, rv) {
			return i, nil
		}
	}
	return -1, fmt.Errorf("question %q of thread %q resolved as %s by %q with no event that records it: %w",
		rv.ID, rv.ThreadID, rv.Resolution.Status, rv.Resolution.By, ErrUnaudited)
}

func recordsResolution(data json.RawMessage, rv *Resolve) bool {
	var d struct {
		QuestionID *string `json:"question_id"`
		Status     *string `json:"status"`
		By         *string `json:"by"`
	}
	if json.Unmarshal(data, &d) != nil || d.QuestionID == nil || d.Status == nil || d.By == nil {
		return false
	}
	return *d.QuestionID == rv.ID && *d.Status == string(rv.Resolution.Status) && *d.By == rv.Resolution.By
}
