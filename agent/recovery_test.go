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
	"github.com/tollgate-ai/tollgate/internal/storetest"
	"github.com/tollgate-ai/tollgate/provider/scripted"
)

// recordingStore logs the writes the agent makes, in order, and can be told
// to fail ("crash") on a write.
type recordingStore struct {
	checkpoint.Store
	mu     sync.Mutex
	log    []string
	failOn func(op string) bool
}

var errCrash = errors.New("simulated crash")

func (s *recordingStore) note(op string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failOn != nil && s.failOn(op) {
		return errCrash
	}
	s.log = append(s.log, op)
	return nil
}

func (s *recordingStore) ops() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.log...)
}

// Commit logs one line per batch: what it appends to the thread (the
// last message's role), the tool call states and the audit entries, in
// that order, joined by spaces.
func (s *recordingStore) Commit(ctx context.Context, b *checkpoint.Batch) (*checkpoint.Committed, error) {
	var parts []string
	if w := b.Thread; w != nil {
		for _, raw := range w.Append {
			var m agent.Message
			_ = json.Unmarshal(raw, &m)
			p := "append:" + string(m.Role)
			if len(m.ToolCalls) > 0 {
				p += "+calls"
			}
			parts = append(parts, p)
		}
		if w.Status == checkpoint.ThreadIdle {
			parts = append(parts, "idle")
		}
	}
	for _, tc := range b.ToolCalls {
		parts = append(parts, fmt.Sprintf("call:%s:%s", tc.CallID, tc.State))
	}
	if b.Question != nil {
		parts = append(parts, "question:"+b.Question.ID)
	}
	for _, e := range b.Events {
		parts = append(parts, "event:"+e.Type)
	}
	if err := s.note(strings.Join(parts, " ")); err != nil {
		return nil, err
	}
	return s.Store.Commit(ctx, b)
}

func TestPersistenceOrder(t *testing.T) {
	t.Parallel()
	rs := &recordingStore{Store: storetest.New(t)}
	var toolSawLog []string
	probe := agent.NewTool("probe", "Probe.", func(ctx context.Context, a struct{}) (string, error) {
		toolSawLog = rs.ops()
		return "ok", nil
	}, nil)
	model := scripted.New(scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "probe", `{}`)}}, scripted.Turn{Text: "done"})
	a := newAgent(t, agent.Config{Provider: model, Checkpointer: rs, Tools: []*agent.Tool{probe}})
	if _, err := a.Prompt(context.Background(), "go"); err != nil {
		t.Fatal(err)
	}
	// Four commits, one per durable point: the prompt; the model's message
	// with its call, written with the call's executing claim; the result
	// with the turn's result message; the final message ending the run.
	// Each carries the audit entries of what it records.
	want := []string{
		"append:user event:run_started",
		"append:assistant+calls call:c1:executing",
		"append:tool call:c1:done event:tool_result",
		"append:assistant idle event:run_finished",
	}
	if got := rs.ops(); !slices.Equal(got, want) {
		t.Fatalf("writes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// When the tool ran, the assistant message with its calls and the
	// "executing" state were already durable.
	if got := toolSawLog; !slices.Equal(got, want[:2]) {
		t.Fatalf("before the tool ran: %q", got)
	}
}

func TestExecutingCallOnResume(t *testing.T) {
	t.Parallel()
	for _, idempotent := range []bool{false, true} {
		t.Run(fmt.Sprintf("idempotent=%v", idempotent), func(t *testing.T) {
			t.Parallel()
			base := storetest.New(t)
			// Crash right after the tool ran, before its result is stored.
			rs := &recordingStore{Store: base, failOn: func(op string) bool { return strings.Contains(op, "call:c1:done") }}
			var runs atomic.Int32
			var keys sync.Map
			charge := agent.NewTool("charge", "Charge a card.", func(ctx context.Context, a struct{}) (string, error) {
				n := runs.Add(1)
				keys.Store(n, agent.IdempotencyKey(ctx))
				return "charged", nil
			}, &agent.ToolOptions{Idempotent: idempotent})
			a1 := newAgent(t, agent.Config{Provider: scripted.New(scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "charge", `{}`)}}),
				Checkpointer: rs, Tools: []*agent.Tool{charge}})
			if _, err := a1.Prompt(context.Background(), "charge"); !errors.Is(err, errCrash) {
				t.Fatalf("first run: %v", err)
			}
			a2 := newAgent(t, agent.Config{Provider: scripted.New(scripted.Turn{Text: "done"}), Checkpointer: base, Tools: []*agent.Tool{charge}})
			if _, err := a2.Resume(context.Background()); err != nil {
				t.Fatal(err)
			}
			r := toolResults(t, a2)[0]
			if !idempotent {
				if runs.Load() != 1 || !r.IsError || !strings.Contains(r.Content, "outcome of this call is unknown") || r.Details["outcome"] != "unknown" {
					t.Fatalf("runs %d, result %+v", runs.Load(), r)
				}
				return
			}
			k1, _ := keys.Load(int32(1))
			k2, _ := keys.Load(int32(2))
			if runs.Load() != 2 || r.IsError || r.Content != "charged" || k1 != k2 || !strings.HasSuffix(k1.(string), "/c1") {
				t.Fatalf("runs %d, result %+v, keys %v %v", runs.Load(), r, k1, k2)
			}
		})
	}
}

func TestAbortPending(t *testing.T) {
	t.Parallel()
	store := storetest.New(t)
	var ran atomic.Int32
	counted := agent.NewTool("echo", "Echo.", func(ctx context.Context, a echoArgs) (string, error) {
		ran.Add(1)
		return "echo: " + a.Text, nil
	}, nil)
	// c1 is allowed (no question); c2 and c3 wait for answers.
	gate := agent.BeforeToolFunc(func(ctx context.Context, c *agent.ToolCallContext) (agent.Decision, error) {
		if c.Call.ID == "c1" {
			return agent.Continue(), nil
		}
		return askMW(0).(agent.BeforeToolFunc)(ctx, c)
	})
	model := scripted.New(scripted.Turn{ToolCalls: []agent.ToolCall{
		scripted.Call("c1", "echo", echoArgs{"a"}), scripted.Call("c2", "echo", echoArgs{"b"}), scripted.Call("c3", "echo", echoArgs{"c"}),
	}})
	a := newAgent(t, agent.Config{Provider: model, Checkpointer: store, Tools: []*agent.Tool{counted}, Middleware: []agent.Middleware{gate}})
	sub := a.Subscribe(0)
	done := make(chan error, 1)
	go func() { _, err := a.Prompt(context.Background(), "go"); done <- err }()
	waitPending(t, store, "t1", 2)
	// c1 needs no answer: let it finish, so it has a real result to keep.
	var early []agent.Event
	for e := range sub.C {
		early = append(early, e)
		if f, ok := e.(*agent.ToolCallFinishedEvent); ok && f.Call.ID == "c1" {
			break
		}
	}
	if err := a.AbortPending(context.Background(), "user closed tab"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, agent.ErrAborted) {
		t.Fatalf("the stopped run returned %v", err)
	}
	msgs, _ := a.Messages(context.Background())
	last := msgs[len(msgs)-1]
	if last.Role != agent.RoleAssistant || last.StopReason != agent.StopAborted {
		t.Fatalf("last message %+v", last)
	}
	res := toolResults(t, a)
	if len(res) != 3 || res[0].IsError || res[0].Content != "echo: a" {
		t.Fatalf("results %+v", res)
	}
	for _, r := range res[1:] {
		h, _ := r.Details["hitl"].(map[string]any)
		if !r.IsError || !strings.Contains(r.Content, "user closed tab") || h["decision"] != "aborted" {
			t.Fatalf("synthetic deny %+v", r)
		}
	}
	// Every question is aborted; a later answer is refused.
	qs, _, _ := store.ListQuestions(context.Background(), checkpoint.QuestionFilter{ThreadID: "t1"})
	for _, q := range qs {
		if q.Status != checkpoint.QuestionAborted || q.Reason != "user closed tab" {
			t.Fatalf("question %+v", q)
		}
		if _, err := store.ResolveQuestion(context.Background(), "t1", q.ID, checkpoint.Resolution{Status: checkpoint.QuestionAnswered, At: time.Now()}); !errors.Is(err, checkpoint.ErrConflict) {
			t.Fatalf("late answer: %v", err)
		}
	}
	var sawAbort bool
	for _, e := range append(early, collect(drain(sub))...) {
		if ab, ok := e.(*agent.AgentAbortedEvent); ok && ab.Reason == "user closed tab" {
			sawAbort = true
		}
	}
	if !sawAbort || ran.Load() != 1 {
		t.Fatalf("aborted event %v, tool runs %d", sawAbort, ran.Load())
	}
	// The audit log records each step of the abort once, with its change:
	// both questions resolved as aborted, a result for every call, the
	// abort itself.
	evs, err := store.ListEvents(context.Background(), "t1", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, e := range evs {
		var d struct {
			Status string `json:"status"`
			Reason string `json:"reason"`
		}
		_ = json.Unmarshal(e.Data, &d)
		switch e.Type {
		case "question_resolved":
			if d.Status != string(checkpoint.QuestionAborted) || d.Reason != "user closed tab" {
				t.Errorf("question_resolved entry %s", e.Data)
			}
		case "aborted":
			if d.Reason != "user closed tab" {
				t.Errorf("aborted entry %s", e.Data)
			}
		}
		counts[e.Type]++
	}
	if counts["question_asked"] != 2 || counts["question_resolved"] != 2 || counts["tool_result"] != 3 || counts["aborted"] != 1 {
		t.Errorf("audit entries %v: want 2 questions asked and resolved, 3 results, 1 abort", counts)
	}
	// The next prompt starts afresh.
	a2 := newAgent(t, agent.Config{Provider: scripted.New(scripted.Turn{Text: "fresh"}), Checkpointer: store})
	if msg, err := a2.Prompt(context.Background(), "new task"); err != nil || msg.Text != "fresh" {
		t.Fatalf("next prompt: %+v %v", msg, err)
	}
	// Abort with nothing pending is a no-op.
	if err := a2.AbortPending(context.Background(), "again"); err != nil {
		t.Fatal(err)
	}
}

// drain returns the events already delivered to sub, then closes it.
func drain(sub *agent.Subscription) <-chan agent.Event {
	out := make(chan agent.Event, 1024)
	for {
		select {
		case e := <-sub.C:
			out <- e
		default:
			sub.Close()
			close(out)
			return out
		}
	}
}

func TestEventOrder(t *testing.T) {
	t.Parallel()
	store := storetest.New(t)
	model := scripted.New(
		scripted.Turn{Text: "Checking now", ToolCalls: []agent.ToolCall{scripted.Call("c1", "echo", echoArgs{"x"}), scripted.Call("c2", "echo", echoArgs{"y"})}},
		scripted.Turn{Text: "All done"},
	)
	gate := agent.BeforeToolFunc(func(ctx context.Context, c *agent.ToolCallContext) (agent.Decision, error) {
		if c.Call.ID == "c2" {
			return askMW(0).(agent.BeforeToolFunc)(ctx, c)
		}
		return agent.Continue(), nil
	})
	a := newAgent(t, agent.Config{Provider: model, Checkpointer: store, Tools: []*agent.Tool{echoTool()}, Middleware: []agent.Middleware{gate}})
	sub := a.Subscribe(0)
	done := make(chan error, 1)
	go func() { _, err := a.Prompt(context.Background(), "go"); done <- err }()
	q := waitPending(t, store, "t1", 1)[0]
	// c1 finishes before the answer is given, so the order is fixed.
	for {
		e := <-sub.C
		if f, ok := e.(*agent.ToolCallFinishedEvent); ok && f.Call.ID == "c1" {
			break
		}
	}
	answer(t, store, "t1", q.ID, "true")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	sub.Close()
	// A fresh agent and subscriber, to record one whole run from its start.
	var names []string
	var seqs []int64
	model2 := scripted.New(scripted.Turn{Text: "Checking now", ToolCalls: []agent.ToolCall{scripted.Call("d1", "echo", echoArgs{"x"})}}, scripted.Turn{Text: "All done"})
	a2 := newAgent(t, agent.Config{Provider: model2, Checkpointer: store, Tools: []*agent.Tool{echoTool()}})
	sub4 := a2.Subscribe(0)
	if _, err := a2.Prompt(context.Background(), "again"); err != nil {
		t.Fatal(err)
	}
	for e := range drain(sub4) {
		names = append(names, fmt.Sprintf("%T", e))
		seqs = append(seqs, e.Meta().Seq)
	}
	want := []string{
		"*agent.RunStartedEvent",
		"*agent.TextDeltaEvent", "*agent.TextDeltaEvent", "*agent.MessageEvent",
		"*agent.ToolCallStartedEvent", "*agent.ToolCallFinishedEvent",
		"*agent.TextDeltaEvent", "*agent.TextDeltaEvent", "*agent.MessageEvent",
		"*agent.RunFinishedEvent",
	}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(names, "\n"), strings.Join(want, "\n"))
	}
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Fatalf("seqs %v", seqs)
		}
	}
}

func TestSlowSubscriberIsDroppedNotBlocking(t *testing.T) {
	t.Parallel()
	model := scripted.New(scripted.Turn{Text: "one two three four five six seven eight nine ten"})
	a := newAgent(t, agent.Config{Provider: model, SlowSubscriberTimeout: 10 * time.Millisecond})
	slow := a.Subscribe(2) // never read until the run is over
	fast := a.Subscribe(0)
	start := time.Now()
	if _, err := a.Prompt(context.Background(), "go"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the run waited %s for a slow subscriber", d)
	}
	var got []int64
	for e := range slow.C {
		got = append(got, e.Meta().Seq)
	}
	if !errors.Is(slow.Err(), agent.ErrSlowSubscriber) || len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("slow subscriber saw %v, err %v; want the prefix [1 2] and ErrSlowSubscriber", got, slow.Err())
	}
	n := 0
	for range drain(fast) {
		n++
	}
	if n != 13 { // run started, 10 text deltas, the message, run finished
		t.Fatalf("fast subscriber saw %d events, want 13", n)
	}
}

func TestConcurrentPromptAndImmediateAbort(t *testing.T) {
	t.Parallel()
	store := storetest.New(t)
	model := scripted.New(scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "echo", echoArgs{"x"})}})
	a := newAgent(t, agent.Config{Provider: model, Checkpointer: store, Tools: []*agent.Tool{echoTool()}, Middleware: []agent.Middleware{askMW(0)}})
	done := make(chan error, 1)
	go func() { _, err := a.Prompt(context.Background(), "go"); done <- err }()
	waitPending(t, store, "t1", 1)
	if _, err := a.Prompt(context.Background(), "second"); !errors.Is(err, agent.ErrRunInProgress) {
		t.Fatalf("second Prompt while a run is active: %v", err)
	}
	if _, err := a.Resume(context.Background()); !errors.Is(err, agent.ErrRunInProgress) {
		t.Fatalf("Resume while a run is active: %v", err)
	}
	// Abort racing with the start of a run: it never waits for an answer,
	// and the run always ends (aborted, or refused because the abort held
	// the thread first).
	model2 := scripted.New(scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("d1", "echo", echoArgs{"y"})}})
	b := newAgent(t, agent.Config{Provider: model2, Tools: []*agent.Tool{echoTool()}, Middleware: []agent.Middleware{askMW(0)}})
	bDone := make(chan error, 1)
	go func() { _, err := b.Prompt(context.Background(), "go"); bDone <- err }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var bErr error
wait:
	for {
		if err := b.AbortPending(ctx, "closed"); err != nil {
			t.Fatal(err)
		}
		select {
		case bErr = <-bDone:
			break wait
		case <-time.After(time.Millisecond):
		}
	}
	if !errors.Is(bErr, agent.ErrAborted) && !errors.Is(bErr, agent.ErrRunInProgress) {
		t.Fatalf("the racing run ended with %v", bErr)
	}
	if err := a.AbortPending(context.Background(), "done"); err != nil {
		t.Fatal(err)
	}
	<-done
}

func TestAuditLog(t *testing.T) {
	t.Parallel()
	store := storetest.New(t)
	model := scripted.New(scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "echo", echoArgs{"x"})}}, scripted.Turn{Text: "ok"})
	a := newAgent(t, agent.Config{Provider: model, Checkpointer: store, Tools: []*agent.Tool{echoTool()}, Middleware: []agent.Middleware{askMW(0)}})
	done := make(chan error, 1)
	go func() { _, err := a.Prompt(context.Background(), "go"); done <- err }()
	q := waitPending(t, store, "t1", 1)[0]
	answer(t, store, "t1", q.ID, "true")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	events, err := store.ListEvents(context.Background(), "t1", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range events {
		types = append(types, e.Type)
	}
	if got := strings.Join(types, ","); got != "run_started,question_asked,question_resolved,tool_result,run_finished" {
		t.Fatalf("audit log: %s", got)
	}
	var resolved map[string]any
	_ = json.Unmarshal(events[2].Data, &resolved)
	if resolved["by"] != "tester" || resolved["status"] != "answered" {
		t.Fatalf("question_resolved entry %s", events[2].Data)
	}
	var result map[string]any
	_ = json.Unmarshal(events[3].Data, &result)
	if !strings.HasPrefix(fmt.Sprint(result["digest"]), "sha256:") {
		t.Fatalf("tool_result entry %s", events[3].Data)
	}
}

func collect(c <-chan agent.Event) []agent.Event {
	var out []agent.Event
	for e := range c {
		out = append(out, e)
	}
	return out
}

func TestCloseDoesNotWaitForABlockedPublisher(t *testing.T) {
	t.Parallel()
	model := scripted.New(scripted.Turn{Text: "a b c d e f g h"})
	a := newAgent(t, agent.Config{Provider: model, SlowSubscriberTimeout: time.Hour})
	sub := a.Subscribe(1)
	done := make(chan error, 1)
	go func() { _, err := a.Prompt(context.Background(), "go"); done <- err }()
	<-sub.C // the publisher is now (or soon) blocked on the full buffer
	time.Sleep(10 * time.Millisecond)
	start := time.Now()
	sub.Close()
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Close took %s", d)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if sub.Err() != nil {
		t.Fatalf("Err after Close = %v, want nil", sub.Err())
	}
}

func TestRepeatedCallIDsGetTheirOwnQuestions(t *testing.T) {
	t.Parallel()
	store := storetest.New(t)
	var ran []string
	var mu sync.Mutex
	tool := agent.NewTool("echo", "Echo.", func(ctx context.Context, a echoArgs) (string, error) {
		mu.Lock()
		ran = append(ran, a.Text)
		mu.Unlock()
		return "echo: " + a.Text, nil
	}, nil)
	// The provider reuses "c1" in a later turn and sends no id at all in
	// two turns: each call must still be asked about on its own.
	model := scripted.New(
		scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "echo", echoArgs{"first"})}},
		scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "echo", echoArgs{"second"})}},
		scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("", "echo", echoArgs{"third"})}},
		scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("", "echo", echoArgs{"fourth"})}},
		scripted.Turn{Text: "done"},
	)
	a := newAgent(t, agent.Config{Provider: model, Checkpointer: store, Tools: []*agent.Tool{tool}, Middleware: []agent.Middleware{askMW(0)}})
	done := make(chan error, 1)
	go func() { _, err := a.Prompt(context.Background(), "go"); done <- err }()
	answers := []string{"true", `"no"`, "true", `"no"`}
	for _, ans := range answers {
		var q *checkpoint.Question
		waitFor(t, func() bool {
			qs, _, _ := store.ListQuestions(context.Background(), checkpoint.QuestionFilter{ThreadID: "t1", Status: checkpoint.QuestionPending})
			if len(qs) == 1 {
				q = qs[0]
			}
			return q != nil
		})
		answer(t, store, "t1", q.ID, ans)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	all, _, _ := store.ListQuestions(context.Background(), checkpoint.QuestionFilter{ThreadID: "t1"})
	if len(all) != 4 || strings.Join(ran, ",") != "first,third" {
		t.Fatalf("%d questions, ran %v", len(all), ran)
	}
	msgs, _ := a.Messages(context.Background())
	ids := map[string]bool{}
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			if ids[c.ID] {
				t.Fatalf("call id %q used twice", c.ID)
			}
			ids[c.ID] = true
		}
	}
}

func TestTwoDriversExecuteOnce(t *testing.T) {
	t.Parallel()
	store := storetest.New(t)
	var runs atomic.Int32
	transfer := agent.NewTool("transfer", "Move money.", func(ctx context.Context, a struct{}) (string, error) {
		runs.Add(1)
		time.Sleep(20 * time.Millisecond)
		return "moved", nil
	}, nil)
	first := newAgent(t, agent.Config{Provider: scripted.New(scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "transfer", `{}`)}}, scripted.Turn{Text: "a"}),
		Checkpointer: store, Tools: []*agent.Tool{transfer}, Middleware: []agent.Middleware{askMW(0)}})
	done1 := make(chan error, 1)
	go func() { _, err := first.Prompt(context.Background(), "pay"); done1 <- err }()
	q := waitPending(t, store, "t1", 1)[0]
	// A second process resumes the same run while the first still waits.
	second := newAgent(t, agent.Config{Provider: scripted.New(scripted.Turn{Text: "b"}),
		Checkpointer: store, Tools: []*agent.Tool{transfer}, Middleware: []agent.Middleware{askMW(0)}})
	done2 := make(chan error, 1)
	go func() { _, err := second.Resume(context.Background()); done2 <- err }()
	time.Sleep(20 * time.Millisecond)
	answer(t, store, "t1", q.ID, "true")
	err1, err2 := <-done1, <-done2
	if runs.Load() != 1 {
		t.Fatalf("one approval, the tool ran %d times (errors %v / %v)", runs.Load(), err1, err2)
	}
	for _, err := range []error{err1, err2} {
		if err != nil && !errors.Is(err, agent.ErrCallClaimed) && !errors.Is(err, checkpoint.ErrConflict) {
			t.Fatalf("the losing driver stopped with %v", err)
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// conflictOnResult refuses, as a stale version, the write that appends a
// turn's results (another driver moved the thread), and counts the calls
// of Commit that fail for a moment.
type conflictOnResult struct {
	checkpoint.Store
	transient atomic.Int32
}

func (s *conflictOnResult) Commit(ctx context.Context, b *checkpoint.Batch) (*checkpoint.Committed, error) {
	if len(b.ToolCalls) == 1 && b.ToolCalls[0].State == checkpoint.ToolCallDone {
		if s.transient.Add(-1) >= 0 {
			return nil, errors.New("connection reset")
		}
		if b.Thread != nil {
			return nil, fmt.Errorf("thread moved: %w", checkpoint.ErrConflict)
		}
	}
	return s.Store.Commit(ctx, b)
}

// A result once known is kept: tried again after a transient failure, and
// recorded alone when the turn's messages cannot be appended, so whoever
// carries the run on finds it instead of an unknown outcome.
func TestResultKeptWhenThreadMoves(t *testing.T) {
	t.Parallel()
	base := storetest.New(t)
	s := &conflictOnResult{Store: base}
	s.transient.Store(2)
	model := scripted.New(scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "echo", echoArgs{"x"})}}, scripted.Turn{Text: "done"})
	a := newAgent(t, agent.Config{Provider: model, Checkpointer: s, ThreadID: "t1", Tools: []*agent.Tool{echoTool()}})
	if _, err := a.Prompt(context.Background(), "go"); !errors.Is(err, checkpoint.ErrConflict) {
		t.Fatalf("Prompt = %v, want the conflict", err)
	}
	th, err := base.LoadThread(context.Background(), "t1")
	if err != nil {
		t.Fatal(err)
	}
	calls, err := base.ListToolCalls(context.Background(), "t1", th.RunID, "c1")
	if err != nil || len(calls) != 1 || calls[0].State != checkpoint.ToolCallDone {
		t.Fatalf("the call's record: %+v, %v; want it done", calls, err)
	}
	if n := countEvents(t, base, "t1", "tool_result"); n != 1 {
		t.Errorf("%d tool_result entries, want 1", n)
	}
}

// countEvents counts the thread's audit entries of a type.
func countEvents(t *testing.T, s checkpoint.Store, thread, typ string) int {
	t.Helper()
	evs, err := s.ListEvents(context.Background(), thread, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// outageStore is a store out of reach from the first write of a tool's
// result on, for that write and the next few of its writes and reads of
// tool calls: each fails with checkpoint.ErrUnavailable. landed makes the
// first of those writes commit before it fails, as a commit does whose
// answer the lost connection took.
type outageStore struct {
	checkpoint.Store
	landed bool
	// claims: the outage begins at a claim's write, not a result's.
	claims bool
	mu     sync.Mutex
	left   int  // failures to come, once the outage began
	began  bool // the first result write came
	reads  int  // reads failed
}

var errOutage = fmt.Errorf("connection reset: %w", checkpoint.ErrUnavailable)

// fails reports whether this operation fails (the outage began and is
// not over).
func (s *outageStore) fails(result, read bool) (fail, first bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if result && !s.began {
		s.began, first = true, true
	}
	if !s.began || s.left == 0 {
		return false, first
	}
	s.left--
	if read {
		s.reads++
	}
	return true, first
}

func (s *outageStore) Commit(ctx context.Context, b *checkpoint.Batch) (*checkpoint.Committed, error) {
	want := checkpoint.ToolCallDone
	if s.claims {
		want = checkpoint.ToolCallExecuting
	}
	result := len(b.ToolCalls) == 1 && b.ToolCalls[0].State == want
	if fail, first := s.fails(result, false); fail {
		if first && s.landed {
			if _, err := s.Store.Commit(ctx, b); err != nil {
				return nil, err
			}
		}
		return nil, errOutage
	}
	return s.Store.Commit(ctx, b)
}

func (s *outageStore) ListToolCalls(ctx context.Context, threadID, runID string, callIDs ...string) ([]*checkpoint.ToolCall, error) {
	if fail, _ := s.fails(false, true); fail {
		return nil, errOutage
	}
	return s.Store.ListToolCalls(ctx, threadID, runID, callIDs...)
}

// Issue 22 item 6: a tool's result whose write finds the store out of
// reach is written once the store is back, while the run may still write
// — not lost and later reported "outcome unknown" — and exactly once,
// though the first write was committed and its answer lost (it is read
// back before it is made again). The run then goes on and ends, its
// thread's version counted right.
func TestResultKeptAcrossAnOutage(t *testing.T) {
	t.Parallel()
	for _, landed := range []bool{false, true} {
		t.Run(fmt.Sprintf("landed=%v", landed), func(t *testing.T) {
			base := storetest.New(t)
			s := &outageStore{Store: base, landed: landed, left: 4}
			model := scripted.New(scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "echo", echoArgs{"x"})}}, scripted.Turn{Text: "done"})
			a := newAgent(t, agent.Config{Provider: model, Checkpointer: s, ThreadID: "t1", Tools: []*agent.Tool{echoTool()}})
			if _, err := a.Prompt(context.Background(), "go"); err != nil {
				t.Fatalf("Prompt = %v, want the run to end once the store is back", err)
			}
			th, err := base.LoadThread(context.Background(), "t1")
			if err != nil || th.Status != checkpoint.ThreadIdle {
				t.Fatalf("thread %+v, %v: want it idle", th, err)
			}
			res := toolResults(t, a)
			if len(res) != 1 || res[0].IsError || res[0].Content != "echo: x" {
				t.Errorf("results %+v, want the tool's own", res)
			}
			if n := countEvents(t, base, "t1", "tool_result"); n != 1 {
				t.Errorf("%d tool_result entries, want 1", n)
			}
			if landed && s.reads == 0 {
				t.Errorf("the write was never read back")
			}
		})
	}
}

// A claim whose commit was made but whose answer the lost connection took
// is read back and found this run's when the run is its thread's sole
// driver (a fenced lease: agent.WithSoleDriver): the tool runs, once,
// instead of the call being reported "outcome unknown" though it never
// ran. Without it the claim may be another driver's: the run stops, and
// the call's outcome is unknown (at most once).
func TestClaimReadBackUnderASoleDriver(t *testing.T) {
	t.Parallel()
	for _, sole := range []bool{true, false} {
		t.Run(fmt.Sprintf("sole=%v", sole), func(t *testing.T) {
			base := storetest.New(t)
			s := &outageStore{Store: base, landed: true, claims: true, left: 3}
			var ran atomic.Int32
			tool := agent.NewTool("echo", "Echo text.", func(ctx context.Context, a echoArgs) (string, error) {
				ran.Add(1)
				return "echo: " + a.Text, nil
			}, nil)
			model := scripted.New(scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "echo", echoArgs{"x"})}}, scripted.Turn{Text: "done"})
			a := newAgent(t, agent.Config{Provider: model, Checkpointer: s, ThreadID: "t1", Tools: []*agent.Tool{tool}})
			ctx := context.Background()
			if sole {
				ctx = agent.WithSoleDriver(ctx)
			}
			_, err := a.Prompt(ctx, "go")
			if !sole {
				if !errors.Is(err, checkpoint.ErrUnavailable) {
					t.Fatalf("Prompt = %v, want the store's error", err)
				}
				// Resumed as its host would, until the store answers.
				for _, err = a.Resume(context.Background()); errors.Is(err, checkpoint.ErrUnavailable); _, err = a.Resume(context.Background()) {
				}
				if err != nil {
					t.Fatal(err)
				}
			} else if err != nil {
				t.Fatalf("Prompt = %v", err)
			}
			res := toolResults(t, a)
			switch {
			case len(res) != 1:
				t.Fatalf("results %+v", res)
			case sole && (ran.Load() != 1 || res[0].IsError):
				t.Errorf("sole driver: ran %d times, result %+v: want the tool run once", ran.Load(), res[0])
			case !sole && (ran.Load() != 0 || !strings.Contains(res[0].Content, "unknown")):
				t.Errorf("not the sole driver: ran %d times, result %+v: want it not run, its outcome unknown", ran.Load(), res[0])
			}
		})
	}
}
