package host

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
)

// timeout resolves q as timed out, its deadline having passed, by the
// compare-and-set an answer makes (the winner returned when an answer or
// another host came first), and tells the host's subscribers and the run.
// The host's deadline loop and its parking channel call it.
func (h *Host) timeout(ctx context.Context, q *checkpoint.Question) (*checkpoint.Question, error) {
	h.markSelfResolved(q.ThreadID, q.ID) // resolved() resumes the run, once
	r, won, err := agent.TimeOut(ctx, h.store, q, h.clock.Now())
	if !won {
		h.consumeSelfResolved(q.ThreadID, q.ID)
	}
	if err != nil {
		return nil, fmt.Errorf("host: question %s: %w", q.ID, err)
	}
	if won {
		h.resolved(ctx, r)
	}
	return r, nil
}

// poke makes the deadline loop re-read the earliest deadline now.
func (h *Host) poke() {
	select {
	case h.wakeDeadline <- struct{}{}:
	default:
	}
}

// deadlineRead is the least time between two reads of the earliest
// deadlines woken by new questions: under load every question would cost
// every host a read (a question due sooner than this after it was asked
// fires up to this late).
const deadlineRead = 100 * time.Millisecond

// deadlineLoop fires deadlines from the store: it reads the earliest
// pending deadlines, resolves those that passed as timed out, and sleeps
// until the next one, a new question, or the safety poll.
func (h *Host) deadlineLoop() {
	defer h.loops.Done()
	for {
		read := time.Now()
		next, err := h.fireDue(h.ctx)
		if err != nil && h.ctx.Err() == nil {
			h.log.Error("tollgate: firing deadlines", "err", err)
			next = h.clock.Now().Add(time.Second) // try again soon
		}
		wait := h.poll
		if !next.IsZero() {
			wait = min(wait, max(next.Sub(h.clock.Now()), 0))
		}
		timer, stop := h.clock.After(wait)
		select {
		case <-h.ctx.Done():
			stop()
			return
		case <-timer:
			h.pruneSelfResolved()
		case <-h.wakeDeadline:
			stop()
			// New questions: read once for those that come meanwhile.
			if d := deadlineRead - time.Since(read); d > 0 {
				select {
				case <-h.ctx.Done():
					return
				case <-time.After(d):
				}
			}
		}
	}
}

// fireDue times out every pending question whose deadline has passed and
// returns the earliest deadline still to come (zero: none).
func (h *Host) fireDue(ctx context.Context) (time.Time, error) {
	for {
		qs, _, err := h.store.ListQuestions(ctx, checkpoint.QuestionFilter{
			// Called on every question created: read a few (the next
			// deadline is the first), not a page of payloads.
			Status: checkpoint.QuestionPending, Order: checkpoint.DeadlineFirst, Limit: 8})
		if err != nil {
			return time.Time{}, err
		}
		now := h.clock.Now()
		fired := 0
		for _, q := range qs {
			if q.Deadline.IsZero() {
				return time.Time{}, nil
			}
			if q.Deadline.After(now) {
				return q.Deadline, nil
			}
			if _, err := h.timeout(ctx, q); err != nil {
				return time.Time{}, err
			}
			fired++
		}
		if fired == 0 {
			return time.Time{}, nil
		}
	}
}

func (h *Host) pruneSelfResolved() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, at := range h.selfResolved {
		if time.Since(at) > time.Minute {
			delete(h.selfResolved, k)
		}
	}
}
