package hitl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
)

// AskUserArgs are the arguments of the ask_user tool.
type AskUserArgs struct {
	Question string   `json:"question" jsonschema:"the question for the user"`
	Choices  []string `json:"choices,omitempty" jsonschema:"answers to choose from, if the question has a fixed set"`
}

// AskUserToolOptions tune the ask_user tool. Nil means zero values.
type AskUserToolOptions struct {
	// Name of the tool. Zero: "ask_user".
	Name string
	// Timeout is the time to answer. Zero: no deadline.
	Timeout time.Duration
}

// NewAskUserTool returns a tool the model calls to ask the user a question
// (a request of kind "ask"). The answer, as text, is the tool's result; no
// answer in time, or an abort, is an error result.
func NewAskUserTool(opts *AskUserToolOptions) *agent.Tool {
	o := AskUserToolOptions{}
	if opts != nil {
		o = *opts
	}
	if o.Name == "" {
		o.Name = "ask_user"
	}
	return agent.NewTool(o.Name, "Ask the user a question and wait for the answer.",
		func(ctx context.Context, a AskUserArgs) (string, error) {
			call := agent.ToolCallFrom(ctx)
			if call == nil {
				return "", errors.New("ask_user must run inside an agent run")
			}
			q, err := call.Ask(ctx, agent.QuestionRequest{
				ID: "ask_" + agent.EscapeID(call.Call.ID), Kind: KindAsk, Timeout: o.Timeout,
				Payload: Payload{Kind: KindAsk, Question: a.Question, Choices: a.Choices},
			})
			if err != nil {
				return "", err
			}
			if err := resolvedError(q); err != nil {
				return "", err
			}
			var s string
			if json.Unmarshal(q.Answer, &s) == nil {
				return s, nil
			}
			return string(q.Answer), nil
		}, &agent.ToolOptions{Idempotent: true}) // a rerun finds the stored question and its answer
}

func resolvedError(q *checkpoint.Question) error {
	switch q.Status {
	case checkpoint.QuestionTimedOut:
		return errors.New("the user did not answer in time")
	case checkpoint.QuestionAborted:
		return fmt.Errorf("the question was aborted: %s", q.Reason)
	}
	return nil
}

// Confirm asks the user a yes/no question from inside a tool (a request of
// kind "confirm") and reports the answer. key tells apart several
// confirmations in one tool call; it must be the same when an idempotent
// tool is run again, so the stored answer is found. Declare tools that call
// Confirm idempotent up to the confirmation (agent.ToolOptions.Idempotent):
// after a crash while waiting, such a tool is run again and finds the
// stored answer instead of reporting an unknown outcome. No answer by the
// deadline, or an abort, is an error.
func Confirm(ctx context.Context, key, message string, timeout time.Duration) (bool, error) {
	call := agent.ToolCallFrom(ctx)
	if call == nil {
		return false, errors.New("hitl.Confirm must be called from a tool running in an agent run")
	}
	q, err := call.Ask(ctx, agent.QuestionRequest{
		// '.' never survives EscapeID, so it separates call and key
		// unambiguously.
		ID: "confirm_" + agent.EscapeID(call.Call.ID) + "." + agent.EscapeID(key), Kind: KindConfirm, Timeout: timeout,
		Payload: Payload{Kind: KindConfirm, Message: message},
	})
	if err != nil {
		return false, err
	}
	if err := resolvedError(q); err != nil {
		return false, err
	}
	return parseConfirm(q.Answer)
}
