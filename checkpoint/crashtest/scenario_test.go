package crashtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
)

// The scenario, one thread: the user says "go"; the model calls, in one
// turn, transfer (gated by an approval, not idempotent), note (not gated,
// not idempotent) and fetch (not gated, idempotent); then it says "done".
// Every tool's side effect is one line appended to the ledger file, which
// the parent reads: the count of executions kept outside the store.

const (
	toolTransfer = "transfer"
	toolNote     = "note"
	toolFetch    = "fetch"
	questionID   = "approve_c1"
)

// denied says which threads the parent denies: every third.
func denied(thread string) bool {
	var r, i int
	fmt.Sscanf(thread, "r%d-t%d", &r, &i)
	return i%3 == 2
}

type model struct{}

func (model) Complete(ctx context.Context, req *agent.Request, onText func(string)) (*agent.Message, error) {
	if last := req.Messages[len(req.Messages)-1]; last.Role == agent.RoleUser {
		return &agent.Message{Role: agent.RoleAssistant, StopReason: agent.StopToolUse, ToolCalls: []agent.ToolCall{
			{ID: "c1", Name: toolTransfer, Arguments: json.RawMessage(`{"amount":100}`)},
			{ID: "c2", Name: toolNote, Arguments: json.RawMessage(`{"text":"hello"}`)},
			{ID: "c3", Name: toolFetch, Arguments: json.RawMessage(`{"url":"https://example.com"}`)},
		}}, nil
	}
	return &agent.Message{Role: agent.RoleAssistant, Text: "done", StopReason: agent.StopEndTurn}, nil
}

type transferArgs struct {
	Amount int `json:"amount"`
}
type noteArgs struct {
	Text string `json:"text"`
}
type fetchArgs struct {
	URL string `json:"url"`
}

// ledger appends one line per execution; a single write(2) to an O_APPEND
// file, which a SIGKILL cannot split.
type ledger struct {
	mu sync.Mutex
	f  *os.File
}

func (l *ledger) record(ctx context.Context, tool string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err := fmt.Fprintf(l.f, "%s %s %d\n", tool, agent.IdempotencyKey(ctx), time.Now().UnixNano())
	return err
}

// pause widens the windows between a tool's effect and its checkpoint.
func pause() { time.Sleep(time.Duration(rand.IntN(15)) * time.Millisecond) }

func tools(l *ledger) []*agent.Tool {
	return []*agent.Tool{
		agent.NewTool(toolTransfer, "Move money.", func(ctx context.Context, a transferArgs) (string, error) {
			if err := l.record(ctx, toolTransfer); err != nil {
				return "", err
			}
			pause()
			return "transferred", nil
		}, nil),
		agent.NewTool(toolNote, "Write a note.", func(ctx context.Context, a noteArgs) (string, error) {
			if err := l.record(ctx, toolNote); err != nil {
				return "", err
			}
			pause()
			return "noted", nil
		}, nil),
		agent.NewTool(toolFetch, "Fetch a page.", func(ctx context.Context, a fetchArgs) (string, error) {
			if err := l.record(ctx, toolFetch); err != nil {
				return "", err
			}
			pause()
			return "fetched", nil
		}, &agent.ToolOptions{Idempotent: true}),
	}
}

// gate asks for an approval of every transfer; only {"approve":true} lets
// it run.
var gate = agent.BeforeToolFunc(func(ctx context.Context, c *agent.ToolCallContext) (agent.Decision, error) {
	if c.Call.Name != toolTransfer {
		return agent.Continue(), nil
	}
	q, err := c.Ask(ctx, agent.QuestionRequest{
		ID: "approve_" + agent.EscapeID(c.Call.ID), Kind: "approve",
		Payload: map[string]any{"tool": c.Call.Name, "args": c.RawArgs},
		Digest:  agent.ArgsDigest(c.Call.Name, c.RawArgs),
	})
	if err != nil {
		return agent.Decision{}, err
	}
	if q.Status == checkpoint.QuestionAnswered && string(q.Answer) == `{"approve":true}` {
		return agent.Continue(), nil
	}
	return agent.Block("not approved", map[string]any{"status": string(q.Status)}), nil
})

// runThread starts or resumes one thread until its run ends.
func runThread(ctx context.Context, store checkpoint.Store, l *ledger, thread string) error {
	a, err := agent.New(agent.Config{
		Provider: model{}, Checkpointer: store, ThreadID: thread,
		Tools: tools(l), Middleware: []agent.Middleware{gate}, MaxTurns: 5,
		Channel: &agent.StoreChannel{Store: store, PollInterval: 100 * time.Millisecond},
	})
	if err != nil {
		return err
	}
	th, err := store.LoadThread(ctx, thread)
	switch {
	case errors.Is(err, checkpoint.ErrNotFound):
		_, err = a.Prompt(ctx, "go")
	case err != nil:
	case th.Status == checkpoint.ThreadRunning:
		_, err = a.Resume(ctx)
	case string(th.Messages) == "[]" || len(th.Messages) == 0:
		// Created, then killed before the prompt was saved.
		_, err = a.Prompt(ctx, "go")
	}
	return err
}

func threadNames(round, threads int) []string {
	var out []string
	for i := range threads {
		out = append(out, fmt.Sprintf("r%d-t%d", round, i))
	}
	return out
}
