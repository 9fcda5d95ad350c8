package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/clock"
	"github.com/tollgate-ai/tollgate/internal/storetest"
	"github.com/tollgate-ai/tollgate/provider/scripted"
)

// parkingChannel parks every run whose question is pending, as package
// host does; waits counts the Wait calls that were not allowed to park.
type parkingChannel struct {
	store checkpoint.Store
	waits atomic.Int32
}

func (c *parkingChannel) Store() checkpoint.Store { return c.store }

func (c *parkingChannel) Wait(ctx context.Context, threadID, id string) (*checkpoint.Question, error) {
	if !agent.MayPark(ctx) {
		// Counted whether or not the answer is already there: which comes
		// first is up to the store's timing.
		c.waits.Add(1)
		return (&agent.StoreChannel{Store: c.store}).Wait(ctx, threadID, id)
	}
	q, err := c.store.GetQuestion(ctx, threadID, id)
	if err != nil || q.Status != checkpoint.QuestionPending {
		return q, err
	}
	return nil, agent.ErrParked
}

// allowC2 runs call c2 at once and asks about every other call.
func allowC2() agent.Middleware {
	return agent.BeforeToolFunc(func(ctx context.Context, c *agent.ToolCallContext) (agent.Decision, error) {
		if c.Call.ID == "c2" {
			return agent.Continue(), nil
		}
		return askMW(0).(agent.BeforeToolHook).BeforeTool(ctx, c)
	})
}

func TestParkedRunHoldsNothingAndResumes(t *testing.T) {
	t.Parallel()
	store := storetest.New(t)
	ch := &parkingChannel{store: store}
	var ran atomic.Int32
	counted := countingTool("echo", &ran, func(a echoArgs) string { return "echo: " + a.Text })
	allowSecond := allowC2()
	model := scripted.New(
		scripted.Turn{ToolCalls: []agent.ToolCall{
			scripted.Call("c1", "echo", echoArgs{"gated"}),
			scripted.Call("c2", "echo", echoArgs{"free"}),
		}},
		scripted.Turn{Text: "done"},
	)
	a := newAgent(t, agent.Config{Provider: model, Checkpointer: store, Channel: ch,
		Tools: []*agent.Tool{counted}, Middleware: []agent.Middleware{allowSecond}})
	sub := a.Subscribe(64)
	defer sub.Close()

	_, err := a.Prompt(context.Background(), "go")
	if !errors.Is(err, agent.ErrParked) {
		t.Fatalf("Prompt = %v, want ErrParked", err)
	}
	// The allowed call went on while the gated one parked.
	if ran.Load() != 1 {
		t.Fatalf("tools ran %d times before the answer, want 1 (the allowed call)", ran.Load())
	}
	th, _ := store.LoadThread(context.Background(), "t1")
	if th.Status != checkpoint.ThreadRunning {
		t.Fatalf("thread %s after parking, want running", th.Status)
	}
	var parked *agent.RunParkedEvent
	for parked == nil {
		e := <-sub.C
		if _, done := e.(*agent.RunFinishedEvent); done {
			t.Fatal("a parked run emitted RunFinishedEvent")
		}
		parked, _ = e.(*agent.RunParkedEvent)
	}
	if len(parked.Questions) != 1 || parked.Questions[0] != "approve_c1" {
		t.Fatalf("parked on %v", parked.Questions)
	}
	// Resuming before the answer parks again and runs nothing twice.
	if _, err := a.Resume(context.Background()); !errors.Is(err, agent.ErrParked) {
		t.Fatalf("early Resume = %v, want ErrParked", err)
	}
	answer(t, store, "t1", "approve_c1", "true")
	msg, err := a.Resume(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if msg.Text != "done" || ran.Load() != 2 {
		t.Fatalf("final %q, tools ran %d times, want done and 2", msg.Text, ran.Load())
	}
	if ch.waits.Load() != 0 {
		t.Fatalf("%d waits blocked in process", ch.waits.Load())
	}
}

func TestQuestionFromNonIdempotentToolWaitsInProcess(t *testing.T) {
	t.Parallel()
	store := storetest.New(t)
	ch := &parkingChannel{store: store}
	asking := agent.NewTool("asking", "Asks from inside.", func(ctx context.Context, a struct{}) (string, error) {
		q, err := agent.ToolCallFrom(ctx).Ask(ctx, agent.QuestionRequest{ID: "inner", Kind: "confirm", Payload: map[string]any{}})
		if err != nil {
			return "", err
		}
		return string(q.Answer), nil
	}, nil)
	model := scripted.New(scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "asking", struct{}{})}}, scripted.Turn{Text: "done"})
	a := newAgent(t, agent.Config{Provider: model, Checkpointer: store, Channel: ch, Tools: []*agent.Tool{asking}})
	done := make(chan error, 1)
	go func() { _, err := a.Prompt(context.Background(), "go"); done <- err }()
	waitPending(t, store, "t1", 1)
	answer(t, store, "t1", "inner", "true")
	if err := <-done; err != nil {
		t.Fatalf("run = %v; a non-idempotent tool must not park", err)
	}
	if res := toolResults(t, a); res[0].Content != "true" {
		t.Fatalf("result %+v", res[0])
	}
	if ch.waits.Load() != 1 {
		t.Fatalf("blocking waits %d, want 1", ch.waits.Load())
	}
}

func TestIdempotentToolParksAndIsRunAgain(t *testing.T) {
	t.Parallel()
	store := storetest.New(t)
	ch := &parkingChannel{store: store}
	var runs atomic.Int32
	asking := agent.NewTool("asking", "Asks from inside.", func(ctx context.Context, a struct{}) (string, error) {
		runs.Add(1)
		q, err := agent.ToolCallFrom(ctx).Ask(ctx, agent.QuestionRequest{ID: "inner", Kind: "confirm", Payload: map[string]any{}})
		if err != nil {
			return "", err
		}
		return string(q.Answer), nil
	}, &agent.ToolOptions{Idempotent: true})
	model := scripted.New(scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "asking", struct{}{})}}, scripted.Turn{Text: "done"})
	a := newAgent(t, agent.Config{Provider: model, Checkpointer: store, Channel: ch, Tools: []*agent.Tool{asking}})
	if _, err := a.Prompt(context.Background(), "go"); !errors.Is(err, agent.ErrParked) {
		t.Fatalf("Prompt = %v, want ErrParked", err)
	}
	answer(t, store, "t1", "inner", `"yes"`)
	if _, err := a.Resume(context.Background()); err != nil {
		t.Fatal(err)
	}
	if res := toolResults(t, a); res[0].Content != `"yes"` || res[0].IsError {
		t.Fatalf("result %+v; the parked tool must be run again and find its answer", res[0])
	}
	if runs.Load() != 2 || ch.waits.Load() != 0 {
		t.Fatalf("tool ran %d times (want 2: parked, then again), blocking waits %d", runs.Load(), ch.waits.Load())
	}
}

func TestPromptWithRunID(t *testing.T) {
	t.Parallel()
	store := storetest.New(t)
	model := scripted.New(scripted.Turn{Text: "one"}, scripted.Turn{Text: "two"})
	a := newAgent(t, agent.Config{Provider: model, Checkpointer: store})
	if _, err := a.PromptWith(context.Background(), "hi", &agent.PromptOptions{RunID: "run_fixed"}); err != nil {
		t.Fatal(err)
	}
	th, _ := store.LoadThread(context.Background(), "t1")
	if th.RunID != "run_fixed" {
		t.Fatalf("run id %q", th.RunID)
	}
	if _, err := a.PromptWith(context.Background(), "hi", &agent.PromptOptions{RunID: "run_fixed"}); !errors.Is(err, agent.ErrRunIDUsed) {
		t.Fatalf("second PromptWith = %v, want ErrRunIDUsed", err)
	}
}

// TestLiveResults: while a turn waits for an answer, the calls that ran
// have their results recorded, each with its own start and end time
// (OpenCalls names the turn's calls, ListToolCalls reads them); when
// the turn ends, each result message is dated when its result was known,
// not when the turn ended.
func TestLiveResults(t *testing.T) {
	t.Parallel()
	store := storetest.New(t)
	ch := &parkingChannel{store: store}
	fake := clock.NewFake(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC))
	slow := agent.NewTool("echo", "Echo.", func(ctx context.Context, a echoArgs) (string, error) {
		fake.Advance(2 * time.Second) // the command takes two seconds
		return "echo: " + a.Text, nil
	}, nil)
	allowSecond := allowC2()
	model := scripted.New(
		scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "echo", echoArgs{"gated"}), scripted.Call("c2", "echo", echoArgs{"free"})}},
		scripted.Turn{Text: "done"},
	)
	a := newAgent(t, agent.Config{Provider: model, Checkpointer: store, Channel: ch, Clock: fake,
		Tools: []*agent.Tool{slow}, Middleware: []agent.Middleware{allowSecond}})
	if _, err := a.Prompt(context.Background(), "go"); !errors.Is(err, agent.ErrParked) {
		t.Fatalf("Prompt = %v, want ErrParked", err)
	}
	ctx := context.Background()
	th, _ := store.LoadThread(ctx, "t1")
	open, err := agent.OpenCalls(th.Messages)
	if err != nil || len(open) != 2 || open[0].ID != "c1" || open[1].ID != "c2" {
		t.Fatalf("OpenCalls = %v, %v", open, err)
	}
	recs, err := store.ListToolCalls(ctx, "t1", th.RunID, "c1", "c2")
	if err != nil || len(recs) != 1 || recs[0].CallID != "c2" || recs[0].State != checkpoint.ToolCallDone {
		t.Fatalf("records %v, %v: want c2's result, before the turn ends", recs, err)
	}
	var free agent.ToolResult
	if err := json.Unmarshal(recs[0].Result, &free); err != nil || free.Content != "echo: free" ||
		!free.StartedAt.Equal(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)) || free.EndedAt.Sub(free.StartedAt) != 2*time.Second {
		t.Fatalf("c2's result %+v (%v): want its own start and end, two seconds apart", free, err)
	}

	progress, err := agent.TurnProgress(ctx, store, th)
	if err != nil || len(progress) != 2 || progress[0].State != agent.CallWaiting || progress[1].State != agent.CallDone ||
		progress[1].Result.Content != "echo: free" || !progress[1].StartedAt.Equal(free.StartedAt) {
		t.Fatalf("TurnProgress = %+v, %v", progress, err)
	}

	fake.Advance(time.Minute) // the reviewer takes a minute
	answer(t, store, "t1", "approve_c1", "true")
	if _, err := a.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	th, _ = store.LoadThread(ctx, "t1")
	if open, err := agent.OpenCalls(th.Messages); err != nil || len(open) != 0 {
		t.Fatalf("OpenCalls after the run = %v, %v", open, err)
	}
	var msgs []agent.Message
	if err := json.Unmarshal(th.Messages, &msgs); err != nil {
		t.Fatal(err)
	}
	dated := map[string]time.Time{}
	for _, m := range msgs {
		if m.Result != nil {
			dated[m.Result.CallID] = m.CreatedAt
			if !m.CreatedAt.Equal(m.Result.EndedAt) {
				t.Errorf("the result of %s is dated %s, its call ended %s", m.Result.CallID, m.CreatedAt, m.Result.EndedAt)
			}
		}
	}
	if got := dated["c1"].Sub(dated["c2"]); got != time.Minute+2*time.Second {
		t.Errorf("c1's result came %s after c2's, want 1m2s (each dated when it ended, not when the turn did)", got)
	}
}
