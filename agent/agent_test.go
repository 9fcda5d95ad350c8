package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/clock"
	"github.com/tollgate-ai/tollgate/internal/storetest"
	"github.com/tollgate-ai/tollgate/provider/scripted"
)

type echoArgs struct {
	Text string `json:"text"`
}

func echoTool() *agent.Tool {
	return agent.NewTool("echo", "Echo text.", func(ctx context.Context, a echoArgs) (string, error) {
		return "echo: " + a.Text, nil
	}, nil)
}

type transferArgs struct {
	To     string `json:"to"`
	Amount int    `json:"amount" jsonschema:"amount in cents"`
	Memo   string `json:"memo,omitempty"`
}

func newAgent(t *testing.T, cfg agent.Config) *agent.Agent {
	t.Helper()
	if cfg.ThreadID == "" {
		cfg.ThreadID = "t1"
	}
	if cfg.Checkpointer == nil && cfg.Channel == nil {
		cfg.Checkpointer = storetest.New(t)
	}
	a, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// toolResults returns the tool result messages of the thread, in order.
func toolResults(t *testing.T, a *agent.Agent) []agent.ToolResult {
	t.Helper()
	msgs, err := a.Messages(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []agent.ToolResult
	for _, m := range msgs {
		if m.Role == agent.RoleTool {
			out = append(out, *m.Result)
		}
	}
	return out
}

func TestMultiTurnRun(t *testing.T) {
	t.Parallel()
	model := scripted.New(
		scripted.Turn{Text: "Let me echo.", ToolCalls: []agent.ToolCall{scripted.Call("c1", "echo", echoArgs{"hi"})}},
		scripted.Turn{Text: "Once more.", ToolCalls: []agent.ToolCall{scripted.Call("c2", "echo", echoArgs{"again"})},
			Check: func(req *agent.Request) error {
				last := req.Messages[len(req.Messages)-1]
				if last.Role != agent.RoleTool || last.Result.Content != "echo: hi" {
					return fmt.Errorf("model did not see the first result: %+v", last)
				}
				return nil
			}},
		scripted.Turn{Text: "Done."},
	)
	a := newAgent(t, agent.Config{Provider: model, Tools: []*agent.Tool{echoTool()}, SystemPrompt: "be brief"})
	msg, err := a.Prompt(context.Background(), "echo twice")
	if err != nil {
		t.Fatal(err)
	}
	if msg.Text != "Done." || msg.StopReason != agent.StopEndTurn {
		t.Fatalf("final message = %+v", msg)
	}
	msgs, _ := a.Messages(context.Background())
	var roles []string
	for _, m := range msgs {
		roles = append(roles, string(m.Role))
	}
	if got, want := strings.Join(roles, ","), "user,assistant,tool,assistant,tool,assistant"; got != want {
		t.Fatalf("roles = %s, want %s", got, want)
	}
	if reqs := model.Requests(); reqs[0].System != "be brief" || len(reqs[0].Tools) != 1 || reqs[0].Tools[0].Name != "echo" {
		t.Fatalf("first request = %+v", reqs[0])
	}
	// A second prompt continues the same thread.
	model2 := scripted.New(scripted.Turn{Text: "Hello again.", Check: func(req *agent.Request) error {
		if len(req.Messages) != 7 {
			return fmt.Errorf("want 7 messages of history, got %d", len(req.Messages))
		}
		return nil
	}})
	a2 := newAgent(t, agent.Config{Provider: model2, Checkpointer: a.Store(), ThreadID: a.ThreadID()})
	if _, err := a2.Prompt(context.Background(), "hi"); err != nil {
		t.Fatal(err)
	}
}

func TestParallelCallsResultsInCallOrder(t *testing.T) {
	t.Parallel()
	var running, peak atomic.Int32
	release := make(chan struct{})
	gate := agent.NewTool("gate", "Wait for the test.", func(ctx context.Context, a struct {
		Name string `json:"name"`
	}) (string, error) {
		n := running.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		<-release
		running.Add(-1)
		return "done " + a.Name, nil
	}, nil)
	model := scripted.New(
		scripted.Turn{ToolCalls: []agent.ToolCall{
			scripted.Call("a", "gate", `{"name":"a"}`),
			scripted.Call("b", "gate", `{"name":"b"}`),
			scripted.Call("c", "gate", `{"name":"c"}`),
		}},
		scripted.Turn{Text: "ok"},
	)
	a := newAgent(t, agent.Config{Provider: model, Tools: []*agent.Tool{gate}, MaxParallelTools: 2})
	done := make(chan error, 1)
	go func() { _, err := a.Prompt(context.Background(), "go"); done <- err }()
	// Two run at once; the third waits for a slot.
	waitFor(t, func() bool { return running.Load() == 2 })
	time.Sleep(20 * time.Millisecond)
	if p := peak.Load(); p != 2 {
		t.Fatalf("peak concurrency %d, want 2 (bounded by MaxParallelTools)", p)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range toolResults(t, a) {
		got = append(got, r.CallID+"="+r.Content)
	}
	if want := "a=done a,b=done b,c=done c"; strings.Join(got, ",") != want {
		t.Fatalf("results %v, want %s", got, want)
	}
	if p := peak.Load(); p != 2 {
		t.Fatalf("peak concurrency %d, want 2", p)
	}
}

func TestInvalidArgumentsListEveryProblem(t *testing.T) {
	t.Parallel()
	var ran atomic.Bool
	transfer := agent.NewTool("transfer", "Move money.", func(ctx context.Context, a transferArgs) (string, error) {
		ran.Store(true)
		return "ok", nil
	}, nil)
	var hookSaw atomic.Bool
	mw := agent.BeforeToolFunc(func(ctx context.Context, c *agent.ToolCallContext) (agent.Decision, error) {
		hookSaw.Store(true)
		return agent.Continue(), nil
	})
	model := scripted.New(
		scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "transfer", `{"amount":"ten","extra":1}`)}},
		scripted.Turn{Text: "sorry", Check: func(req *agent.Request) error {
			r := req.Messages[len(req.Messages)-1].Result
			for _, want := range []string{"3 problems", "/amount: want integer, got string", "/extra: unknown argument", "/to: required"} {
				if !strings.Contains(r.Content, want) {
					return fmt.Errorf("result %q lacks %q", r.Content, want)
				}
			}
			if !r.IsError {
				return errors.New("not an error result")
			}
			return nil
		}},
	)
	a := newAgent(t, agent.Config{Provider: model, Tools: []*agent.Tool{transfer}, Middleware: []agent.Middleware{mw}})
	if _, err := a.Prompt(context.Background(), "pay"); err != nil {
		t.Fatal(err)
	}
	if ran.Load() || hookSaw.Load() {
		t.Fatalf("tool ran=%v, middleware saw=%v; invalid arguments must reach neither", ran.Load(), hookSaw.Load())
	}
}

func TestNotAnObjectAndUnknownToolAndPanic(t *testing.T) {
	t.Parallel()
	boom := agent.NewTool("boom", "Panics.", func(ctx context.Context, a struct{}) (string, error) { panic("kaboom") }, nil)
	fails := agent.NewTool("fails", "Fails.", func(ctx context.Context, a struct{}) (string, error) {
		return "", errors.New("disk full")
	}, nil)
	slow := agent.NewTool("slow", "Slow.", func(ctx context.Context, a struct{}) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	}, &agent.ToolOptions{Timeout: 20 * time.Millisecond})
	model := scripted.New(
		scripted.Turn{ToolCalls: []agent.ToolCall{
			scripted.Call("c1", "nope", `{}`),
			scripted.Call("c2", "boom", `{}`),
			scripted.Call("c3", "fails", `{}`),
			scripted.Call("c4", "fails", `[1, 2]`),
			scripted.Call("c5", "slow", `{}`),
			scripted.Call("c6", "fails", `{bad json`),
		}},
		scripted.Turn{Text: "ok"},
	)
	a := newAgent(t, agent.Config{Provider: model, Tools: []*agent.Tool{boom, fails, slow}})
	if _, err := a.Prompt(context.Background(), "go"); err != nil {
		t.Fatal(err)
	}
	res := toolResults(t, a)
	wants := []string{
		`Unknown tool "nope". Available tools: boom, fails, slow.`,
		`tool "boom" panicked: kaboom`,
		"disk full",
		"arguments must be a JSON object, got array: [1, 2]",
		`tool "slow" timed out after 20ms`,
		"arguments are not valid JSON: {bad json",
	}
	for i, w := range wants {
		if !res[i].IsError || !strings.Contains(res[i].Content, w) {
			t.Errorf("result %d = %+v, want error containing %q", i, res[i], w)
		}
	}
}

type orderMW struct {
	name string
	log  *[]string
	mu   *sync.Mutex
}

func (m orderMW) add(s string) {
	m.mu.Lock()
	*m.log = append(*m.log, m.name+":"+s)
	m.mu.Unlock()
}
func (m orderMW) BeforeModel(ctx context.Context, req *agent.Request) error {
	m.add("before-model")
	return nil
}
func (m orderMW) AfterModel(ctx context.Context, req *agent.Request, msg *agent.Message) error {
	m.add("after-model")
	return nil
}
func (m orderMW) BeforeTool(ctx context.Context, c *agent.ToolCallContext) (agent.Decision, error) {
	m.add("before-tool:" + c.Args.(echoArgs).Text)
	if m.name == "first" {
		return agent.ReplaceArgs(echoArgs{Text: "replaced"}), nil
	}
	return agent.Continue(), nil
}
func (m orderMW) AfterTool(ctx context.Context, c *agent.ToolCallContext, r *agent.ToolResult) error {
	m.add("after-tool")
	r.Content += " [" + m.name + "]"
	return nil
}

func TestMiddlewareOrderAndReplacement(t *testing.T) {
	t.Parallel()
	var log []string
	var mu sync.Mutex
	model := scripted.New(
		scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "echo", echoArgs{"original"})}},
		scripted.Turn{Text: "ok"},
	)
	a := newAgent(t, agent.Config{Provider: model, Tools: []*agent.Tool{echoTool()}, Middleware: []agent.Middleware{
		orderMW{"first", &log, &mu}, orderMW{"second", &log, &mu},
	}})
	if _, err := a.Prompt(context.Background(), "go"); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"first:before-model", "second:before-model", "second:after-model", "first:after-model",
		"first:before-tool:original", "second:before-tool:replaced", "second:after-tool", "first:after-tool",
		"first:before-model", "second:before-model", "second:after-model", "first:after-model",
	}
	if !slices.Equal(log, want) {
		t.Fatalf("order:\n%s\nwant:\n%s", strings.Join(log, "\n"), strings.Join(want, "\n"))
	}
	if got := toolResults(t, a)[0].Content; got != "echo: replaced [second] [first]" {
		t.Fatalf("result %q", got)
	}
}

func TestInvalidReplacementAndBlock(t *testing.T) {
	t.Parallel()
	var ran atomic.Int32
	transfer := agent.NewTool("transfer", "Move money.", func(ctx context.Context, a transferArgs) (string, error) {
		ran.Add(1)
		return "ok", nil
	}, nil)
	mw := agent.BeforeToolFunc(func(ctx context.Context, c *agent.ToolCallContext) (agent.Decision, error) {
		args := c.Args.(transferArgs)
		switch {
		case args.Amount > 1000:
			return agent.Block("amount over limit", map[string]any{"limit": 1000}), nil
		case args.To == "mallory":
			return agent.ReplaceArgs(map[string]any{"to": 5}), nil
		}
		return agent.Continue(), nil
	})
	model := scripted.New(
		scripted.Turn{ToolCalls: []agent.ToolCall{
			scripted.Call("c1", "transfer", transferArgs{To: "bob", Amount: 5000}),
			scripted.Call("c2", "transfer", transferArgs{To: "mallory", Amount: 1}),
			scripted.Call("c3", "transfer", transferArgs{To: "bob", Amount: 1}),
		}},
		scripted.Turn{Text: "ok"},
	)
	a := newAgent(t, agent.Config{Provider: model, Tools: []*agent.Tool{transfer}, Middleware: []agent.Middleware{mw}})
	if _, err := a.Prompt(context.Background(), "go"); err != nil {
		t.Fatal(err)
	}
	res := toolResults(t, a)
	if !res[0].IsError || res[0].Content != "amount over limit" || res[0].Details["limit"] != float64(1000) {
		t.Errorf("blocked result = %+v", res[0])
	}
	if !res[1].IsError || !strings.Contains(res[1].Content, "/amount: required") || !strings.Contains(res[1].Content, "/to: want string, got integer") {
		t.Errorf("invalid replacement result = %+v", res[1])
	}
	if res[2].IsError || ran.Load() != 1 {
		t.Errorf("allowed call: %+v, ran %d times", res[2], ran.Load())
	}
}

// askMW asks about every call and runs it only if the answer is true.
func askMW(timeout time.Duration) agent.Middleware {
	return agent.BeforeToolFunc(func(ctx context.Context, c *agent.ToolCallContext) (agent.Decision, error) {
		q, err := c.Ask(ctx, agent.QuestionRequest{
			ID: "approve_" + agent.EscapeID(c.Call.ID), Kind: "approve", Timeout: timeout,
			Payload: map[string]any{"tool": c.Call.Name, "args": c.RawArgs},
		})
		if err != nil {
			return agent.Decision{}, err
		}
		switch {
		case q.Status == checkpoint.QuestionTimedOut:
			return agent.Block("approval_timeout", map[string]any{"hitl": map[string]any{"decision": "timed_out"}}), nil
		case q.Status == checkpoint.QuestionAnswered && string(q.Answer) == "true":
			return agent.Continue(), nil
		}
		return agent.Block("denied", nil), nil
	})
}

func waitPending(t *testing.T, s checkpoint.Store, thread string, n int) []*checkpoint.Question {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		qs, _, err := s.ListQuestions(context.Background(), checkpoint.QuestionFilter{ThreadID: thread, Status: checkpoint.QuestionPending})
		if err != nil {
			t.Fatal(err)
		}
		if len(qs) >= n {
			return qs
		}
		if time.Now().After(deadline) {
			t.Fatalf("want %d pending questions, have %d", n, len(qs))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func answer(t *testing.T, s checkpoint.Store, thread, id, ans string) {
	t.Helper()
	q, err := s.GetQuestion(context.Background(), thread, id)
	if err != nil {
		t.Fatal(err)
	}
	// As a channel answers: the answer and its audit entry in one write.
	r := checkpoint.Resolution{Status: checkpoint.QuestionAnswered, Answer: json.RawMessage(ans), By: "tester", At: time.Now()}
	if _, err := s.Commit(context.Background(), &checkpoint.Batch{
		Resolve: &checkpoint.Resolve{ThreadID: thread, ID: id, Resolution: r},
		Events:  []*checkpoint.Event{checkpoint.ResolutionEvent(q, r)},
	}); err != nil {
		t.Fatal(err)
	}
}

func TestQuestionsAnsweredInAnyOrder(t *testing.T) {
	t.Parallel()
	store := storetest.New(t)
	model := scripted.New(
		scripted.Turn{ToolCalls: []agent.ToolCall{
			scripted.Call("c:1", "echo", echoArgs{"one"}),
			scripted.Call("c:2", "echo", echoArgs{"two"}),
		}},
		scripted.Turn{Text: "ok"},
	)
	a := newAgent(t, agent.Config{Provider: model, Checkpointer: store, Tools: []*agent.Tool{echoTool()}, Middleware: []agent.Middleware{askMW(0)}})
	done := make(chan error, 1)
	go func() { _, err := a.Prompt(context.Background(), "go"); done <- err }()
	waitPending(t, store, "t1", 2)
	answer(t, store, "t1", "approve_c.3a2", "true")
	answer(t, store, "t1", "approve_c.3a1", `"no"`)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	res := toolResults(t, a)
	if res[0].CallID != "c:1" || !res[0].IsError || res[1].CallID != "c:2" || res[1].Content != "echo: two" {
		t.Fatalf("results %+v", res)
	}
}

func TestQuestionSurvivesRestart(t *testing.T) {
	t.Parallel()
	store := storetest.New(t)
	var runs atomic.Int32
	counted := agent.NewTool("echo", "Echo.", func(ctx context.Context, a echoArgs) (string, error) {
		runs.Add(1)
		return "echo: " + a.Text, nil
	}, nil)
	first := scripted.New(scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "echo", echoArgs{"x"})}})
	a1 := newAgent(t, agent.Config{Provider: first, Checkpointer: store, Tools: []*agent.Tool{counted}, Middleware: []agent.Middleware{askMW(time.Hour)}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := a1.Prompt(ctx, "go"); done <- err }()
	qs := waitPending(t, store, "t1", 1)
	cancel() // the process "dies" while the question is pending
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if _, err := a1.Prompt(context.Background(), "again"); !errors.Is(err, agent.ErrRunInProgress) {
		t.Fatalf("Prompt on an unfinished run: %v", err)
	}

	// A new agent on the same store: the question is found, not asked again.
	second := scripted.New(scripted.Turn{Text: "done"})
	a2 := newAgent(t, agent.Config{Provider: second, Checkpointer: store, Tools: []*agent.Tool{counted}, Middleware: []agent.Middleware{askMW(time.Hour)}})
	sub := a2.Subscribe(0)
	done2 := make(chan error, 1)
	go func() { _, err := a2.Resume(context.Background()); done2 <- err }()
	// The resumed run announces the stored question again.
	for e := range sub.C {
		if r, ok := e.(*agent.HitlRequestEvent); ok {
			if !r.Existing || r.Question.ID != qs[0].ID {
				t.Fatalf("request event %+v", r)
			}
			break
		}
	}
	answer(t, store, "t1", qs[0].ID, "true")
	if err := <-done2; err != nil {
		t.Fatal(err)
	}
	all, _, _ := store.ListQuestions(context.Background(), checkpoint.QuestionFilter{ThreadID: "t1"})
	if len(all) != 1 || runs.Load() != 1 || second.Played() != 1 {
		t.Fatalf("questions %d, tool runs %d, model turns %d", len(all), runs.Load(), second.Played())
	}
}

func TestQuestionTimeoutWithFakeClock(t *testing.T) {
	t.Parallel()
	store := storetest.New(t)
	fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	model := scripted.New(scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "echo", echoArgs{"x"})}}, scripted.Turn{Text: "timed out"})
	a := newAgent(t, agent.Config{Provider: model, Checkpointer: store, Clock: fake, Tools: []*agent.Tool{echoTool()}, Middleware: []agent.Middleware{askMW(180 * time.Second)}})
	done := make(chan error, 1)
	go func() { _, err := a.Prompt(context.Background(), "go"); done <- err }()
	if !fake.WaitForWaiters(1, 5*time.Second) {
		t.Fatal("the run never waited on the deadline")
	}
	q := waitPending(t, store, "t1", 1)[0]
	if got := q.Deadline.Sub(q.CreatedAt); got != 180*time.Second {
		t.Fatalf("deadline %s after creation", got)
	}
	fake.Advance(179 * time.Second)
	select {
	case <-done:
		t.Fatal("timed out early")
	case <-time.After(20 * time.Millisecond):
	}
	fake.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	r := toolResults(t, a)[0]
	if !r.IsError || r.Content != "approval_timeout" {
		t.Fatalf("result %+v", r)
	}
	q, _ = store.GetQuestion(context.Background(), "t1", q.ID)
	if q.Status != checkpoint.QuestionTimedOut {
		t.Fatalf("status %s", q.Status)
	}
	// A late answer is refused.
	_, err := store.ResolveQuestion(context.Background(), "t1", q.ID, checkpoint.Resolution{Status: checkpoint.QuestionAnswered, Answer: json.RawMessage("true"), At: fake.Now()})
	if !errors.Is(err, checkpoint.ErrConflict) {
		t.Fatalf("late answer: %v", err)
	}
}

func TestMaxTurns(t *testing.T) {
	t.Parallel()
	var turns []scripted.Turn
	for i := range 5 {
		turns = append(turns, scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call(fmt.Sprint("c", i), "echo", echoArgs{"x"})}})
	}
	a := newAgent(t, agent.Config{Provider: scripted.New(turns...), Tools: []*agent.Tool{echoTool()}, MaxTurns: 3})
	msg, err := a.Prompt(context.Background(), "loop")
	if !errors.Is(err, agent.ErrMaxTurns) || msg == nil || msg.StopReason != agent.StopError {
		t.Fatalf("msg %+v err %v", msg, err)
	}
	// The thread is usable again.
	if _, err := a.Resume(context.Background()); !errors.Is(err, agent.ErrNoRun) {
		t.Fatalf("resume: %v", err)
	}
}

func TestModelErrorLeavesRunResumable(t *testing.T) {
	t.Parallel()
	store := storetest.New(t)
	a := newAgent(t, agent.Config{Provider: scripted.New(scripted.Turn{Err: errors.New("503 overloaded")}), Checkpointer: store})
	if _, err := a.Prompt(context.Background(), "hi"); err == nil || !strings.Contains(err.Error(), "503 overloaded") {
		t.Fatalf("err %v", err)
	}
	a2 := newAgent(t, agent.Config{Provider: scripted.New(scripted.Turn{Text: "hello"}), Checkpointer: store})
	msg, err := a2.Resume(context.Background())
	if err != nil || msg.Text != "hello" {
		t.Fatalf("msg %+v err %v", msg, err)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	if _, err := agent.New(agent.Config{}); err == nil {
		t.Error("no provider accepted")
	}
	if _, err := agent.New(agent.Config{Provider: scripted.Demo{}, Tools: []*agent.Tool{echoTool(), echoTool()}}); err == nil {
		t.Error("duplicate tools accepted")
	}
	if _, err := agent.New(agent.Config{Provider: scripted.Demo{}, Middleware: []agent.Middleware{42}}); err == nil {
		t.Error("middleware without hooks accepted")
	}
}

type threadChannel struct {
	agent.StoreChannel
	thread string
}

func (c *threadChannel) ThreadID() string { return c.thread }

func TestNewRefusesAChannelForAnotherThread(t *testing.T) {
	t.Parallel()
	store := memory.New()
	_, err := agent.New(agent.Config{Provider: scripted.Demo{}, Checkpointer: store, ThreadID: "a",
		Channel: &threadChannel{StoreChannel: agent.StoreChannel{Store: store}, thread: "b"}})
	if err == nil || !strings.Contains(err.Error(), `serves thread "b"`) {
		t.Fatalf("err = %v", err)
	}
}

// The digest a run computes once for a call (ToolCallContext.CallDigest,
// which hitl and interrupt bind questions to) is CallDigest of the thread,
// the call and the arguments as the model sent them, whatever their
// spelling, also after a middleware replaced them; ArgsDigest likewise.
func TestCallDigestOfTheRun(t *testing.T) {
	t.Parallel()
	tool := agent.NewRawTool("raw", "Anything.", func(ctx context.Context, args map[string]any) (agent.ToolResult, error) {
		return agent.ToolResult{Content: "ok"}, nil
	}, nil)
	for _, args := range []string{
		`{}`, ``, `{"b":1,"a":2}`, "{ \"x\" : [1, 2.50, 1e3],\n\"y\":{\"z\":null} }",
		`{"html":"<a href='x'>&amp;</a>","u":"\u00e9\u2028😀","big":123456789012345678901234567890}`,
	} {
		var seen, seenArgs, replacedSeen, replacedArgs string
		replaced := json.RawMessage(`{"replaced": "<b>" , "n": 1.0}`)
		mw := agent.BeforeToolFunc(func(ctx context.Context, c *agent.ToolCallContext) (agent.Decision, error) {
			if seen == "" {
				seen, seenArgs = c.CallDigest(), c.ArgsDigest()
				return agent.ReplaceArgs(replaced), nil
			}
			return agent.Continue(), nil
		})
		after := agent.BeforeToolFunc(func(ctx context.Context, c *agent.ToolCallContext) (agent.Decision, error) {
			replacedSeen, replacedArgs = c.CallDigest(), c.ArgsDigest()
			return agent.Continue(), nil
		})
		model := scripted.New(scripted.Turn{ToolCalls: []agent.ToolCall{{ID: "c1", Name: "raw", Arguments: json.RawMessage(args)}}}, scripted.Turn{Text: "done"})
		a := newAgent(t, agent.Config{Provider: model, Tools: []*agent.Tool{tool}, Middleware: []agent.Middleware{mw, after}, ThreadID: "t1"})
		if _, err := a.Prompt(context.Background(), "go"); err != nil {
			t.Fatal(err)
		}
		if want := agent.CallDigest("t1", "c1", "raw", json.RawMessage(args)); seen != want {
			t.Errorf("args %s: ToolCallContext.CallDigest = %s, CallDigest = %s", args, seen, want)
		}
		if want := agent.CallDigest("t1", "c1", "raw", replaced); replacedSeen != want {
			t.Errorf("replaced args: ToolCallContext.CallDigest = %s, CallDigest = %s", replacedSeen, want)
		}
		if want := agent.ArgsDigest("raw", json.RawMessage(args)); seenArgs != want {
			t.Errorf("args %s: ToolCallContext.ArgsDigest = %s, ArgsDigest = %s", args, seenArgs, want)
		}
		if want := agent.ArgsDigest("raw", replaced); replacedArgs != want {
			t.Errorf("replaced args: ToolCallContext.ArgsDigest = %s, ArgsDigest = %s", replacedArgs, want)
		}
	}
}

// A call's digest changes with each thing it binds — the thread, the call
// id, the tool, the arguments — and a field's bytes cannot move into the
// next one; it never equals the arguments-only digest.
func TestCallDigestBindsEachField(t *testing.T) {
	t.Parallel()
	args := json.RawMessage(`{"cmd":"rm -r build"}`)
	base := agent.CallDigest("t1", "call_1", "bash", args)
	for name, d := range map[string]string{
		"another thread":        agent.CallDigest("t2", "call_1", "bash", args),
		"another call":          agent.CallDigest("t1", "call_2", "bash", args),
		"another tool":          agent.CallDigest("t1", "call_1", "sh", args),
		"other arguments":       agent.CallDigest("t1", "call_1", "bash", json.RawMessage(`{"cmd":"rm -r buil"}`)),
		"thread bytes into id":  agent.CallDigest("t", "1call_1", "bash", args),
		"id bytes into tool":    agent.CallDigest("t1", "call_", "1bash", args),
		"the arguments' digest": agent.ArgsDigest("bash", args),
	} {
		if d == base {
			t.Errorf("%s: same digest %s", name, d)
		}
	}
	if spaced := agent.CallDigest("t1", "call_1", "bash", json.RawMessage(`{ "cmd" : "rm -r build" }`)); spaced != base {
		t.Errorf("spacing changed the digest: %s, %s", spaced, base)
	}
}

// A caller that passes the thread as it read it saves the run a read; a
// stale copy costs a read again, never a message.
func TestPromptWithStaleThread(t *testing.T) {
	t.Parallel()
	store := storetest.New(t)
	model := scripted.New(scripted.Turn{Text: "one"}, scripted.Turn{Text: "two"})
	a := newAgent(t, agent.Config{Provider: model, Checkpointer: store, ThreadID: "t1"})
	if _, err := a.PromptWith(context.Background(), "first", &agent.PromptOptions{Thread: &checkpoint.Thread{ID: "t1", Status: checkpoint.ThreadIdle}}); err != nil {
		t.Fatal(err)
	}
	// "Not there" again, though it is now: the write is refused, the run
	// reads the thread and appends after what is there.
	if _, err := a.PromptWith(context.Background(), "second", &agent.PromptOptions{Thread: &checkpoint.Thread{ID: "t1", Status: checkpoint.ThreadIdle}}); err != nil {
		t.Fatal(err)
	}
	msgs, err := a.Messages(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range msgs {
		got = append(got, m.Text)
	}
	if strings.Join(got, ",") != "first,one,second,two" {
		t.Fatalf("messages %q", got)
	}
}

// A tool no Config.Tools names comes from ToolFor: validated against its
// schema and run like any other, never offered to the model; a name
// ToolFor has nothing for (or gives another tool for) is unknown.
func TestToolFor(t *testing.T) {
	t.Parallel()
	made := map[string]int{}
	var mu sync.Mutex
	toolFor := func(name string) *agent.Tool {
		mu.Lock()
		made[name]++
		mu.Unlock()
		switch {
		case strings.HasPrefix(name, "mcp__"):
			return agent.NewTool(name, "relayed", func(ctx context.Context, a echoArgs) (string, error) {
				return name + ": " + a.Text, nil
			}, nil)
		case name == "liar":
			return echoTool() // named echo: not the tool called
		}
		return nil
	}
	model := scripted.New(
		scripted.Turn{ToolCalls: []agent.ToolCall{
			scripted.Call("c1", "mcp__s__say", echoArgs{"hi"}),
			scripted.Call("c2", "mcp__s__say", map[string]any{"text": 5}),
			scripted.Call("c3", "nope", echoArgs{"x"}),
			scripted.Call("c4", "liar", echoArgs{"x"}),
		}, Check: func(req *agent.Request) error {
			for _, tl := range req.Tools {
				if tl.Name != "echo" {
					return fmt.Errorf("the model was offered %q", tl.Name)
				}
			}
			return nil
		}},
		scripted.Turn{Text: "done"},
	)
	a := newAgent(t, agent.Config{Provider: model, Tools: []*agent.Tool{echoTool()}, ToolFor: toolFor})
	if _, err := a.Prompt(context.Background(), "go"); err != nil {
		t.Fatal(err)
	}
	rs := toolResults(t, a)
	if len(rs) != 4 || rs[0].IsError || rs[0].Content != "mcp__s__say: hi" {
		t.Fatalf("ToolFor's tool did not run: %+v", rs)
	}
	if !rs[1].IsError || !strings.Contains(rs[1].Content, "want string") {
		t.Errorf("ToolFor's tool's schema was not checked: %+v", rs[1])
	}
	for _, r := range rs[2:] {
		if !r.IsError || !strings.Contains(r.Content, "Unknown tool") {
			t.Errorf("%s: want an unknown tool, got %+v", r.CallID, r)
		}
	}
	if a.Tool("mcp__x__y") == nil || a.Tool("liar") != nil || a.Tool("echo") == nil {
		t.Error("Agent.Tool does not consult ToolFor as the run does")
	}
}

// Issue 22 item 7: every decision's audit entry names the policy that
// made it (Config.PolicyDigest, as it was when the call was decided): a
// call allowed under one policy, a call asked about and answered under
// the next (a reload between the runs).
func TestDecisionsRecordThePolicy(t *testing.T) {
	t.Parallel()
	store := storetest.New(t)
	var mu sync.Mutex
	digest := "policy-one"
	current := func() string { mu.Lock(); defer mu.Unlock(); return digest }
	askTwo := agent.BeforeToolFunc(func(ctx context.Context, c *agent.ToolCallContext) (agent.Decision, error) {
		if c.Args.(echoArgs).Text != "two" {
			return agent.Continue(), nil
		}
		return askMW(0).(agent.BeforeToolFunc)(ctx, c)
	})
	model := scripted.New(
		scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "echo", echoArgs{"one"})}}, scripted.Turn{Text: "ok"},
		scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c2", "echo", echoArgs{"two"})}}, scripted.Turn{Text: "ok"})
	a := newAgent(t, agent.Config{Provider: model, Checkpointer: store, Tools: []*agent.Tool{echoTool()},
		Middleware: []agent.Middleware{askTwo}, PolicyDigest: current})
	if _, err := a.Prompt(context.Background(), "go"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	digest = "policy-two" // a reload
	mu.Unlock()
	done := make(chan error, 1)
	go func() { _, err := a.Prompt(context.Background(), "again"); done <- err }()
	waitPending(t, store, "t1", 1)
	answer(t, store, "t1", "approve_c2", "true")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	evs, err := store.ListEvents(context.Background(), "t1", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		var d map[string]any
		json.Unmarshal(e.Data, &d)
		if e.Type == "question_asked" || e.Type == "tool_result" {
			got = append(got, fmt.Sprintf("%s %v %v", e.Type, d["call_id"], d["policy_digest"]))
		}
	}
	want := []string{"tool_result c1 policy-one", "question_asked c2 policy-two", "tool_result c2 policy-two"}
	if !slices.Equal(got, want) {
		t.Errorf("the audit's decisions: %q, want %q", got, want)
	}
}

// The store is the caller's to choose: none is an error that says which
// field to set, not a thread kept silently in memory.
func TestNewRequiresAStore(t *testing.T) {
	t.Parallel()
	_, err := agent.New(agent.Config{Provider: scripted.Demo{}})
	if err == nil || !strings.Contains(err.Error(), "Config.Checkpointer is required") {
		t.Fatalf("New without a store = %v, want Config.Checkpointer required", err)
	}
}

// scribbler is a provider that writes on the request it is given: it
// appends to its lists and, with a hook, the hook rewrites them. Neither
// reaches the run's messages or the tools offered on the next turn.
type scribbler struct{ next agent.Provider }

func (s scribbler) Complete(ctx context.Context, req *agent.Request, onText func(string)) (*agent.Message, error) {
	_ = append(req.Messages, agent.Message{Role: agent.RoleUser, Text: "appended by the provider"})
	_ = append(req.Tools, agent.ToolSpec{Name: "appended"})
	return s.next.Complete(ctx, req, onText)
}

// rewriteHook notes what each request holds, then rewrites it.
type rewriteHook struct{ saw *[]string }

func (h rewriteHook) BeforeModel(ctx context.Context, req *agent.Request) error {
	*h.saw = append(*h.saw, req.Messages[0].Text+" | "+req.Tools[0].Description)
	req.Messages[0].Text = "rewritten by the hook"
	req.Tools[0].Description = "rewritten by the hook"
	return nil
}

// A model request is built from the run's own messages and the agent's
// tool specs without a copy per turn; what a provider appends, and what
// a BeforeModelHook changes (it gets a copy), stays out of the run and of
// the next request.
func TestModelRequestLeavesTheRunAlone(t *testing.T) {
	t.Parallel()
	for _, hook := range []bool{false, true} {
		model := scripted.New(
			scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "echo", echoArgs{"x"})}},
			scripted.Turn{Text: "ok"},
		)
		cfg := agent.Config{Provider: scribbler{model}, Tools: []*agent.Tool{echoTool()}}
		var saw []string
		if hook {
			cfg.Middleware = []agent.Middleware{rewriteHook{&saw}}
		}
		a := newAgent(t, cfg)
		if _, err := a.Prompt(context.Background(), "go"); err != nil {
			t.Fatal(err)
		}
		msgs, err := a.Messages(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != 4 || msgs[0].Text != "go" {
			t.Errorf("hook %v: the run's messages %+v", hook, msgs)
		}
		reqs := model.Requests()
		second := reqs[len(reqs)-1]
		if len(second.Messages) != 3 || len(second.Tools) != 1 || second.Tools[0].Name != "echo" {
			t.Errorf("hook %v: second request %d messages, tools %+v", hook, len(second.Messages), second.Tools)
		}
		if !hook && (second.Messages[0].Text != "go" || second.Tools[0].Description != echoTool().Spec().Description) {
			t.Errorf("the second request: %q, %q", second.Messages[0].Text, second.Tools[0].Description)
		}
		orig := "go | " + echoTool().Spec().Description
		if hook && !slices.Equal(saw, []string{orig, orig}) {
			t.Errorf("the hook saw %q, want the run's message and the tool's spec as they are, twice", saw)
		}
	}
}
