package interrupt_test

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
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/internal/storetest"
	"github.com/tollgate-ai/tollgate/interrupt"
	"github.com/tollgate-ai/tollgate/provider/scripted"
)

type transferArgs struct {
	Amount int64  `json:"amount"`
	To     string `json:"to"`
}

type bashArgs struct {
	Command string `json:"command"`
}

// fixture: an agent with a transfer and a bash tool that record what they
// ran, the seed's kind of rules, and a checkpointed channel for the host.
type fixture struct {
	store   checkpoint.Store
	thread  string
	channel *hitl.CheckpointedChannel
	agent   *agent.Agent
	mu      sync.Mutex
	ran     []string
}

func testRules() []interrupt.Rule {
	return []interrupt.Rule{
		{Tool: "transfer", Match: interrupt.Gt("amount", 1000)},
		{Tool: "bash", Match: interrupt.Matches("command", `\brm\b`)},
	}
}

func newFixture(t *testing.T, store checkpoint.Store, turns ...scripted.Turn) *fixture {
	t.Helper()
	if store == nil {
		store = storetest.New(t)
	}
	// One thread per test: the agent keeps the answer checks of waiting
	// questions per process, by thread and question id.
	thread := t.Name()
	f := &fixture{store: store, thread: thread}
	f.channel = hitl.NewCheckpointedChannel(store, thread, &hitl.ChannelOptions{PollInterval: 10 * time.Millisecond})
	transfer := agent.NewTool("transfer", "Send money.", func(ctx context.Context, a transferArgs) (string, error) {
		return f.record(fmt.Sprintf("sent %d to %s", a.Amount, a.To)), nil
	}, nil)
	bash := agent.NewTool("bash", "Run a command.", func(ctx context.Context, a bashArgs) (string, error) {
		return f.record("ran " + a.Command), nil
	}, nil)
	mw, err := interrupt.New(testRules()...)
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Config{
		Provider: scripted.New(turns...), Tools: []*agent.Tool{transfer, bash},
		Middleware: []agent.Middleware{mw}, Channel: f.channel, Checkpointer: store, ThreadID: thread,
	})
	if err != nil {
		t.Fatal(err)
	}
	f.agent = a
	return f
}

func (f *fixture) record(s string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ran = append(f.ran, s)
	return s
}

func (f *fixture) ranAll() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(slices.Values(f.ran))
}

// results maps call ids to the results the model saw.
func results(t *testing.T, a *agent.Agent) map[string]agent.ToolResult {
	t.Helper()
	msgs, err := a.Messages(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]agent.ToolResult{}
	for _, m := range msgs {
		if m.Role == agent.RoleTool {
			out[m.Result.CallID] = *m.Result
		}
	}
	return out
}

func trace(r agent.ToolResult) map[string]any {
	h, _ := r.Details["interrupt"].(map[string]any)
	return h
}

func waitPending(t *testing.T, c *hitl.CheckpointedChannel, n int) []*hitl.Request {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		reqs, err := c.Pending(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(reqs) == n {
			return reqs
		}
		if time.Now().After(deadline) {
			t.Fatalf("want %d pending questions, have %d", n, len(reqs))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func call(id, tool string, args any) agent.ToolCall { return scripted.Call(id, tool, args) }

// The scripted model proposes calls; some match rules; a host answers
// approve / edit / deny / true / garbage, first trying an invalid edit; the
// results the model sees are checked.
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil,
		scripted.Turn{ToolCalls: []agent.ToolCall{
			call("c1", "transfer", transferArgs{50, "bob"}),                    // no rule matches
			call("c2", "transfer", transferArgs{5000, "bob"}),                  // answered true
			call("c3", "bash", bashArgs{"ls -la"}),                             // no rule matches
			call("c4", "bash", bashArgs{"rm -rf /tmp/x"}),                      // answered deny with a message
			call("c5", "transfer", transferArgs{2000, "eve"}),                  // answered edit (after an invalid one)
			call("c6", "bash", bashArgs{"rm a"}),                               // answered garbage
			call("c7", "transfer", transferArgs{3000, "carl"}),                 // answered {"action":"approve"}
			call("c:8", "transfer", `{"amount": 9007199254740993, "to": "x"}`), // answered false
		}},
		scripted.Turn{Text: "done"},
	)
	answers := map[string][]any{
		"c2": {true},
		"c4": {interrupt.Deny("not on prod")},
		"c5": {
			json.RawMessage(`{"action": "edit", "arguments": {"amount": "lots", "to": 5, "memo": "x"}}`),
			json.RawMessage(`{"action": "edit", "arguments": {"amount": 900}}`),
		},
		"c6":  {"maybe"},
		"c7":  {json.RawMessage(`{"action": "approve"}`)},
		"c:8": {false},
	}
	var refusals sync.Map // call id -> error of the first attempt
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	hostDone := make(chan struct{})
	go func() {
		defer close(hostDone)
		for req, err := range f.channel.Subscribe(ctx) {
			if err != nil {
				continue
			}
			var p interrupt.ToolInterrupt
			if err := json.Unmarshal(req.Payload.Raw, &p); err != nil || p.Kind != interrupt.KindToolInterrupt ||
				p.ToolCallID != req.CallID || req.QuestionID != interrupt.ID(req.CallID) || req.Payload.Kind != "tool_interrupt" {
				t.Errorf("request %+v, payload %s", req, req.Payload.Raw)
			}
			for i, a := range answers[req.CallID] {
				err := f.channel.Answer(ctx, req.QuestionID, a)
				if i == 0 && err != nil {
					refusals.Store(req.CallID, err)
				}
				if err == nil {
					break
				}
			}
		}
	}()
	if _, err := f.agent.Prompt(context.Background(), "pay everyone"); err != nil {
		t.Fatal(err)
	}
	stop()
	<-hostDone

	// The invalid edit was refused to the host, listing every problem.
	v, _ := refusals.Load("c5")
	err, _ := v.(error)
	var ve *agent.ValidationError
	if !errors.Is(err, hitl.ErrInvalidAnswer) || !errors.As(err, &ve) || len(ve.Problems) < 3 {
		t.Fatalf("invalid edit: %v", err)
	}
	for _, want := range []string{"/amount", "/to", "memo"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not name %s", err, want)
		}
	}

	res := results(t, f.agent)
	for id, want := range map[string]struct {
		content  string
		isError  bool
		decision any
	}{
		"c1":  {"sent 50 to bob", false, nil},
		"c2":  {"sent 5000 to bob", false, nil},
		"c3":  {"ran ls -la", false, nil},
		"c4":  {"tool call denied by the reviewer: not on prod", true, "deny"},
		"c5":  {"sent 900 to eve", false, "edit"},
		"c6":  {"tool call denied by the reviewer", true, "deny"},
		"c7":  {"sent 3000 to carl", false, nil},
		"c:8": {"tool call denied by the reviewer", true, "deny"},
	} {
		r := res[id]
		if r.Content != want.content || r.IsError != want.isError || trace(r)["decision"] != want.decision {
			t.Errorf("%s: model saw %+v; want %q (error %v, decision %v)", id, r, want.content, want.isError, want.decision)
		}
	}
	h := trace(res["c5"])
	orig, _ := h["original_args"].(map[string]any)
	edited, _ := h["edited_args"].(map[string]any)
	if fmt.Sprint(orig["amount"]) != "2000" || fmt.Sprint(edited["amount"]) != "900" || len(edited) != 1 {
		t.Errorf("edit trace %v", h)
	}
	if h := trace(res["c4"]); h["message"] != "not on prod" || h["question_id"] != "approve_c4" {
		t.Errorf("deny trace %v", h)
	}
	want := []string{"ran ls -la", "sent 3000 to carl", "sent 50 to bob", "sent 5000 to bob", "sent 900 to eve"}
	if got := f.ranAll(); !slices.Equal(got, want) {
		t.Errorf("ran %v; want %v", got, want)
	}
	// Every question was asked once, under the seed's id.
	qs, _, err := f.store.ListQuestions(context.Background(), checkpoint.QuestionFilter{ThreadID: f.thread})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, q := range qs {
		ids = append(ids, q.ID)
	}
	slices.Sort(ids)
	if wantIDs := []string{"approve_c.3a8", "approve_c2", "approve_c4", "approve_c5", "approve_c6", "approve_c7"}; !slices.Equal(ids, wantIDs) {
		t.Errorf("questions %v; want %v", ids, wantIDs)
	}
}

// crash starts a run, waits until it asks n questions and stops it, as a
// process that dies while waiting would.
func crash(t *testing.T, f *fixture, n int) []*hitl.Request {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := f.agent.Prompt(ctx, "go"); done <- err }()
	reqs := waitPending(t, f.channel, n)
	// The call no rule gates (c3) runs at once; let it finish, so what the
	// resumed process runs does not depend on timing.
	deadline := time.Now().Add(5 * time.Second)
	for !hasDoneCall(f.agent) && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the run ended without its answer")
	}
	return reqs
}

// hasDoneCall reports whether a call of the thread's current run has its
// result recorded.
func hasDoneCall(a *agent.Agent) bool {
	th, err := a.Store().LoadThread(context.Background(), a.ThreadID())
	if err != nil {
		return false
	}
	recs, _ := a.Store().ListToolCalls(context.Background(), th.ID, th.RunID)
	for _, r := range recs {
		if r.State == checkpoint.ToolCallDone {
			return true
		}
	}
	return false
}

func TestRestartBetweenQuestionAndAnswer(t *testing.T) {
	t.Parallel()
	turn1 := scripted.Turn{ToolCalls: []agent.ToolCall{
		call("c1", "transfer", transferArgs{5000, "bob"}),
		call("c2", "bash", bashArgs{"rm -rf /srv"}),
		call("c3", "transfer", transferArgs{10, "ann"}),
	}}
	t.Run("answered while no process runs the thread", func(t *testing.T) {
		t.Parallel()
		store := storetest.New(t)
		f := newFixture(t, store, turn1)
		crash(t, f, 2)
		if err := f.channel.Answer(context.Background(), interrupt.ID("c1"), interrupt.Edit(map[string]any{"amount": 900})); err != nil {
			t.Fatal(err)
		}
		if err := f.channel.Answer(context.Background(), interrupt.ID("c2"), interrupt.Deny("no")); err != nil {
			t.Fatal(err)
		}
		f2 := newFixture(t, store, scripted.Turn{Text: "done"})
		if _, err := f2.agent.Resume(context.Background()); err != nil {
			t.Fatal(err)
		}
		res := results(t, f2.agent)
		if res["c1"].Content != "sent 900 to bob" || res["c2"].Content != "tool call denied by the reviewer: no" || res["c3"].Content != "sent 10 to ann" {
			t.Fatalf("results %+v", res)
		}
		if got := f2.ranAll(); !slices.Equal(got, []string{"sent 900 to bob"}) {
			t.Fatalf("resumed process ran %v", got)
		}
		if got := f.ranAll(); !slices.Equal(got, []string{"sent 10 to ann"}) {
			t.Fatalf("crashed process ran %v", got)
		}
	})
	t.Run("answered after the resume, invalid edit refused", func(t *testing.T) {
		t.Parallel()
		store := storetest.New(t)
		f := newFixture(t, store, turn1)
		crash(t, f, 2)
		f2 := newFixture(t, store, scripted.Turn{Text: "done"})
		sub := f2.agent.Subscribe(0)
		defer sub.Close()
		done := make(chan error, 1)
		go func() { _, err := f2.agent.Resume(context.Background()); done <- err }()
		// The resumed run waits on the stored questions: none is asked twice.
		for waiting := 0; waiting < 2; {
			if e, ok := (<-sub.C).(*agent.HitlRequestEvent); ok {
				if !e.Existing {
					t.Errorf("question %s asked again", e.Question.ID)
				}
				waiting++
			}
		}
		reqs := waitPending(t, f2.channel, 2)
		ctx := context.Background()
		err := f2.channel.Answer(ctx, interrupt.ID("c1"), json.RawMessage(`{"action": "edit", "arguments": {"amount": -1.5}}`))
		var ve *agent.ValidationError
		if !errors.As(err, &ve) || !errors.Is(err, hitl.ErrInvalidAnswer) {
			t.Fatalf("invalid edit: %v", err)
		}
		if err := f2.channel.Answer(ctx, interrupt.ID("c1"), true); err != nil {
			t.Fatal(err)
		}
		if err := f2.channel.Answer(ctx, interrupt.ID("c2"), map[string]any{"action": "approve"}); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := f2.ranAll(); !slices.Equal(got, []string{"ran rm -rf /srv", "sent 5000 to bob"}) {
			t.Fatalf("ran %v", got)
		}
		if len(reqs) != 2 {
			t.Fatalf("pending %v", reqs)
		}
		qs, _, _ := store.ListQuestions(ctx, checkpoint.QuestionFilter{ThreadID: f.thread})
		if len(qs) != 2 {
			t.Fatalf("%d questions stored; want 2", len(qs))
		}
	})
	t.Run("invalid edit recorded with no run waiting is denied on resume", func(t *testing.T) {
		t.Parallel()
		store := storetest.New(t)
		f := newFixture(t, store, turn1)
		crash(t, f, 2)
		if err := f.channel.Answer(context.Background(), interrupt.ID("c1"), interrupt.Edit(map[string]any{"amount": "lots", "to": nil})); err != nil {
			t.Fatal(err) // nobody waits, so nobody can check it
		}
		if err := f.channel.Answer(context.Background(), interrupt.ID("c2"), true); err != nil {
			t.Fatal(err)
		}
		f2 := newFixture(t, store, scripted.Turn{Text: "done"})
		if _, err := f2.agent.Resume(context.Background()); err != nil {
			t.Fatal(err)
		}
		r := results(t, f2.agent)["c1"]
		if !r.IsError || trace(r)["decision"] != "invalid_edit" || !strings.Contains(r.Content, "/amount") || !strings.Contains(r.Content, "/to") {
			t.Fatalf("model saw %+v", r)
		}
		if got := f2.ranAll(); !slices.Equal(got, []string{"ran rm -rf /srv"}) {
			t.Fatalf("ran %v", got)
		}
	})
}

func TestAbortDenies(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, scripted.Turn{ToolCalls: []agent.ToolCall{call("c1", "transfer", transferArgs{5000, "bob"})}})
	done := make(chan error, 1)
	go func() { _, err := f.agent.Prompt(context.Background(), "go"); done <- err }()
	waitPending(t, f.channel, 1)
	if err := f.agent.AbortPending(context.Background(), "user closed tab"); err != nil {
		t.Fatal(err)
	}
	<-done
	if err := f.channel.Answer(context.Background(), interrupt.ID("c1"), true); !errors.Is(err, hitl.ErrAborted) {
		t.Fatalf("answer after abort: %v", err)
	}
	if r := results(t, f.agent)["c1"]; !r.IsError || len(f.ranAll()) != 0 {
		t.Fatalf("model saw %+v; ran %v", r, f.ranAll())
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	if _, err := interrupt.New(); err != nil {
		t.Fatalf("New() = %v", err)
	}
	m, err := interrupt.New(testRules()...)
	if err != nil || len(m.Rules()) != 2 {
		t.Fatalf("New = %v, %v", m, err)
	}
	_, err = interrupt.New(interrupt.Rule{Tool: "bash", Match: interrupt.Matches("command", "(")}, interrupt.Rule{Tool: "x", Match: interrupt.AllFields(nil)})
	if !errors.Is(err, interrupt.ErrInvalidRule) || !strings.Contains(err.Error(), "rule 0") || !strings.Contains(err.Error(), "rule 1") {
		t.Fatalf("New with bad rules = %v", err)
	}
}

// Outside a run (no agent behind the call context) a call that needs no
// approval goes on, and one that needs it but has no call id is an error,
// found before anything is asked.
func TestBeforeToolWithoutAsking(t *testing.T) {
	t.Parallel()
	m, err := interrupt.New(testRules()...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d, err := m.BeforeTool(ctx, &agent.ToolCallContext{Call: agent.ToolCall{ID: "c1", Name: "transfer"}, RawArgs: json.RawMessage(`{"amount": 10}`)})
	if blocked, _ := d.Blocked(); err != nil || blocked {
		t.Fatalf("BeforeTool = %v, %v; want Continue", d, err)
	}
	_, err = m.BeforeTool(ctx, &agent.ToolCallContext{Call: agent.ToolCall{Name: "transfer"}, RawArgs: json.RawMessage(`{"amount": 5000}`)})
	if !errors.Is(err, interrupt.ErrNoCallID) {
		t.Fatalf("BeforeTool without a call id = %v; want ErrNoCallID", err)
	}
}

func TestIDAgreesWithAgentEscapeID(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"fc:1", "a.b", "é", "\xff", "toolu_01-X", ""} {
		if got, want := interrupt.ID(s), "approve_"+agent.EscapeID(s); got != want {
			t.Errorf("ID(%q) = %q; agent.EscapeID gives %q", s, got, want)
		}
	}
}

func TestStoredDenyStandsWhenRulesChange(t *testing.T) {
	store := storetest.New(t)
	var ran atomic.Int32
	tool := agent.NewTool("transfer", "Move money.", func(ctx context.Context, a struct {
		Amount int `json:"amount"`
	}) (string, error) {
		ran.Add(1)
		return "moved", nil
	}, nil)
	strict, err := interrupt.New(interrupt.Rule{Tool: "transfer"})
	if err != nil {
		t.Fatal(err)
	}
	ch := hitl.NewCheckpointedChannel(store, "rules", nil)
	a1, _ := agent.New(agent.Config{Provider: scripted.New(scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "transfer", `{"amount":5000}`)}}),
		Tools: []*agent.Tool{tool}, Middleware: []agent.Middleware{strict}, Channel: ch, ThreadID: "rules"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := a1.Prompt(ctx, "pay"); done <- err }()
	for {
		if reqs, _ := ch.Pending(context.Background()); len(reqs) == 1 {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	cancel() // the process stops while the question waits
	<-done
	if err := ch.Answer(context.Background(), interrupt.ID("c1"), interrupt.Deny("too much")); err != nil {
		t.Fatal(err)
	}
	// The new process runs with rules that no longer review transfers.
	loose, _ := interrupt.New(interrupt.Rule{Tool: "other"})
	a2, _ := agent.New(agent.Config{Provider: scripted.New(scripted.Turn{Text: "ok"}),
		Tools: []*agent.Tool{tool}, Middleware: []agent.Middleware{loose}, Channel: ch, ThreadID: "rules"})
	if _, err := a2.Resume(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ran.Load() != 0 {
		t.Fatal("a reviewer's deny was ignored after the rules changed")
	}
}

// countReads counts GetQuestion.
type countReads struct {
	checkpoint.Store
	n atomic.Int64
}

func (s *countReads) GetQuestion(ctx context.Context, thread, id string) (*checkpoint.Question, error) {
	s.n.Add(1)
	return s.Store.GetQuestion(ctx, thread, id)
}

// A call no rule matches, on a turn the store does not hold yet, runs
// without a read of the question no one can have asked about it.
func TestUnmatchedCallReadsNothing(t *testing.T) {
	store := &countReads{Store: storetest.New(t)}
	f := newFixture(t, store,
		scripted.Turn{ToolCalls: []agent.ToolCall{call("c1", "bash", bashArgs{"ls"})}},
		scripted.Turn{Text: "done"})
	if _, err := f.agent.Prompt(t.Context(), "go"); err != nil {
		t.Fatal(err)
	}
	if got := f.ranAll(); len(got) != 1 || got[0] != "ran ls" {
		t.Fatalf("ran %v", got)
	}
	if n := store.n.Load(); n != 0 {
		t.Errorf("the run read questions %d times", n)
	}
}
