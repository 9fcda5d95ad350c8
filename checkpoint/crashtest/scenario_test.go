package crashtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
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
//
// Every tool pauses after its effect, so that the parent, which watches the
// ledger, can kill the child while the call is executing. fetch waits for
// transfer's result to be written before it takes effect: a crash in its
// pause finds the run with the transfer's result and not finished
// ("result written").

const (
	toolTransfer = "transfer"
	toolNote     = "note"
	toolFetch    = "fetch"
	questionID   = "approve_c1"

	// lateTimeout is the time to answer of the questions the reviewer
	// answers late; inTimeTimeout of those it answers in time, with room
	// to spare on a loaded machine.
	lateTimeout   = 300 * time.Millisecond
	inTimeTimeout = 3 * time.Second
)

// kind is what the reviewer does with a thread's question.
type kind int

const (
	// approved: answered {"approve":true}, soon.
	approved kind = iota
	// denied: answered {"approve":false}, soon.
	denied
	// inTime: the question has a deadline, and is approved well before it.
	inTime
	// late: the question has a deadline, and the reviewer answers only
	// after it: the answer is refused (ErrExpired) while no child has
	// recorded the timeout, and the question ends timed out.
	late
)

func (k kind) String() string {
	return [...]string{"approved", "denied", "in time", "late"}[k]
}

// threadKind: of the six threads of a round, t1 is late, t4 is in time, t2
// and t5 are denied, t0 and t3 approved.
func threadKind(thread string) kind {
	var r, i int
	fmt.Sscanf(thread, "r%d-t%d", &r, &i)
	switch i % 6 {
	case 1:
		return late
	case 4:
		return inTime
	case 2, 5:
		return denied
	default:
		return approved
	}
}

func (k kind) timeout() time.Duration {
	switch k {
	case late:
		return lateTimeout
	case inTime:
		return inTimeTimeout
	}
	return 0
}

func (k kind) answer() json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"approve":%v}`, k != denied))
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
// file, which a SIGKILL can still cut where the line crosses a page of the
// file (readLedger reads such a torn record).
type ledger struct {
	mu sync.Mutex
	f  *os.File
}

func (l *ledger) record(ctx context.Context, tool string) error {
	return l.write(fmt.Sprintf("%s %s %d\n", tool, agent.IdempotencyKey(ctx), time.Now().UnixNano()))
}

func (l *ledger) write(line string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err := l.f.WriteString(line)
	return err
}

// pause widens the windows between a tool's effect and its checkpoint:
// 10 to 25ms, time enough for the parent to see the effect in the ledger
// and kill the child while the call is executing.
func pause() { time.Sleep(10*time.Millisecond + time.Duration(rand.IntN(15))*time.Millisecond) }

// waitForTransfer returns once the thread's transfer call (c1) of the run
// running in ctx has its result, or after 10s.
func waitForTransfer(ctx context.Context, store checkpoint.Store) error {
	thread, rest, _ := strings.Cut(agent.IdempotencyKey(ctx), "/")
	run, _, _ := strings.Cut(rest, "/")
	limit := time.Now().Add(10 * time.Second)
	for time.Now().Before(limit) {
		calls, err := store.ListToolCalls(ctx, thread, run)
		if err != nil {
			return err
		}
		for _, c := range calls {
			if c.CallID == "c1" && c.State == checkpoint.ToolCallDone {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

func tools(store checkpoint.Store, l *ledger) []*agent.Tool {
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
			if err := waitForTransfer(ctx, store); err != nil {
				return "", err
			}
			if err := l.record(ctx, toolFetch); err != nil {
				return "", err
			}
			pause()
			return "fetched", nil
		}, &agent.ToolOptions{Idempotent: true}),
	}
}

// gate asks for an approval of every transfer (with a deadline on the
// threads whose kind has one); only {"approve":true} lets it run. asking,
// if set, is told before each question is asked or looked up.
func gate(asking func(thread string)) agent.BeforeToolFunc {
	return func(ctx context.Context, c *agent.ToolCallContext) (agent.Decision, error) {
		if c.Call.Name != toolTransfer {
			return agent.Continue(), nil
		}
		if asking != nil {
			asking(c.ThreadID)
		}
		return ask(ctx, c)
	}
}

func ask(ctx context.Context, c *agent.ToolCallContext) (agent.Decision, error) {
	q, err := c.Ask(ctx, agent.QuestionRequest{
		ID: "approve_" + agent.EscapeID(c.Call.ID), Kind: "approve",
		Payload: map[string]any{"tool": c.Call.Name, "args": c.RawArgs},
		Digest:  c.CallDigest(),
		Timeout: threadKind(c.ThreadID).timeout(),
	})
	if err != nil {
		return agent.Decision{}, err
	}
	if q.Status == checkpoint.QuestionAnswered && string(q.Answer) == `{"approve":true}` {
		return agent.Continue(), nil
	}
	return agent.Block("not approved", map[string]any{"status": string(q.Status)}), nil
}

// runThread starts or resumes one thread until its run ends. A follower
// never starts a run (two prompts would be two runs): it waits for the
// thread's run to reach its tool calls, and drives it too from there.
func runThread(ctx context.Context, store checkpoint.Store, l *ledger, thread string, follower bool, asking func(string)) error {
	a, err := agent.New(agent.Config{
		Provider: model{}, Checkpointer: store, ThreadID: thread,
		Tools: tools(store, l), Middleware: []agent.Middleware{gate(asking)}, MaxTurns: 5,
		Channel: &agent.StoreChannel{Store: store, PollInterval: 50 * time.Millisecond},
	})
	if err != nil {
		return err
	}
	th, err := store.LoadThread(ctx, thread)
	if follower {
		for limit := time.Now().Add(10 * time.Second); ; {
			switch {
			case err == nil && th.Status == checkpoint.ThreadRunning && atToolCalls(th):
				_, err = a.Resume(ctx)
				return err
			case err == nil && th.Status == checkpoint.ThreadIdle && startedRun(th):
				return nil // finished by the other
			case err != nil && !errors.Is(err, checkpoint.ErrNotFound):
				return err
			case time.Now().After(limit):
				return nil
			}
			time.Sleep(2 * time.Millisecond)
			th, err = store.LoadThread(ctx, thread)
		}
	}
	switch {
	case errors.Is(err, checkpoint.ErrNotFound):
		_, err = a.Prompt(ctx, "go")
	case err != nil:
	case th.Status == checkpoint.ThreadRunning:
		_, err = a.Resume(ctx)
	case !startedRun(th):
		// Created, then killed before the prompt was saved.
		_, err = a.Prompt(ctx, "go")
	}
	return err
}

// startedRun reports whether a run was ever started on th: an idle thread
// without messages was created, and its process killed before the prompt
// was saved.
func startedRun(th *checkpoint.Thread) bool {
	return string(th.Messages) != "[]" && len(th.Messages) != 0
}

// atToolCalls reports whether th's last message is the model's turn with
// tool calls (saved before any of them runs).
func atToolCalls(th *checkpoint.Thread) bool {
	var msgs []agent.Message
	if json.Unmarshal(th.Messages, &msgs) != nil || len(msgs) == 0 {
		return false
	}
	last := msgs[len(msgs)-1]
	return last.Role == agent.RoleAssistant && len(last.ToolCalls) > 0
}

// lostRace reports whether err is how a driver finds that another process
// drives the same thread: the other claimed a tool call first, saved the
// thread first, or started or finished the run first. Only children run
// in pairs expect it; they leave the thread to the other.
func lostRace(err error) bool {
	return errors.Is(err, agent.ErrCallClaimed) || errors.Is(err, checkpoint.ErrConflict) ||
		errors.Is(err, agent.ErrRunInProgress) || errors.Is(err, agent.ErrNoRun)
}

func threadNames(round, threads int) []string {
	var out []string
	for i := range threads {
		out = append(out, fmt.Sprintf("r%d-t%d", round, i))
	}
	return out
}
