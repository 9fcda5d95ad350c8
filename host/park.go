package host

import (
	"context"
	"encoding/json"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
)

// parkChannel is the agent.Channel of every run the host drives: a
// question still pending parks the run (agent.ErrParked) instead of
// holding a goroutine; the host resumes the run when the question is
// resolved.
type parkChannel struct{ h *Host }

// Store and ThreadID tell agent.New which store and threads the channel
// serves (all of the host's).
func (c *parkChannel) Store() checkpoint.Store { return c.h.store }
func (c *parkChannel) ThreadID() string        { return "" }

// Parks: every run the host drives parks on a question nobody answered
// yet (the agent asks only where it may park); the host resumes it on the
// answer's notification, and its deadline loop (told of the question by
// the same notifications) times it out.
func (c *parkChannel) Parks(ctx context.Context) bool { return true }

// HoldCheck hands the check of a question a run waits on in this process
// to the channel the host takes answers through ([Host.Answer]), so that
// an answer the run would refuse is refused to whoever gives it.
func (c *parkChannel) HoldCheck(threadID, questionID string, check func(context.Context, json.RawMessage) error) func() {
	return c.h.answers.HoldCheck(threadID, questionID, check)
}

func (c *parkChannel) Wait(ctx context.Context, threadID, questionID string) (*checkpoint.Question, error) {
	q, err := c.h.store.GetQuestion(ctx, threadID, questionID)
	if err != nil {
		return nil, err
	}
	if q.Status != checkpoint.QuestionPending {
		return q, nil
	}
	if !q.Deadline.IsZero() && !c.h.clock.Now().Before(q.Deadline) {
		return c.h.timeout(ctx, q)
	}
	if !agent.MayPark(ctx) {
		// Asked from inside a tool that cannot be run again: wait here.
		return (&agent.StoreChannel{Store: c.h.store}).Wait(ctx, threadID, questionID)
	}
	return nil, agent.ErrParked
}
