package hitl_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/clock"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/internal/storetest"
	"github.com/tollgate-ai/tollgate/provider/scripted"
)

type cmdArgs struct {
	Cmd string `json:"cmd"`
}

// fixture is an agent with a fake "bash" tool that records what it ran,
// the seed's sandbox policy, and a checkpointed channel.
type fixture struct {
	store   checkpoint.Store
	channel *hitl.CheckpointedChannel
	agent   *agent.Agent
	clock   *clock.Fake
	mu      sync.Mutex
	ran     []string
	policyN atomic.Int32
}

func sandboxPolicy(f *fixture) hitl.Policy {
	return hitl.Typed(func(ctx context.Context, c *hitl.PolicyContext, args cmdArgs) hitl.ApprovalDecision {
		f.policyN.Add(1)
		switch {
		case strings.HasPrefix(args.Cmd, "ls"):
			return hitl.Approve()
		case strings.Contains(args.Cmd, "rm -rf /"), strings.HasPrefix(args.Cmd, "dd"):
			return hitl.Deny("destructive I/O")
		case args.Cmd == "panic":
			panic("policy bug")
		}
		return hitl.AskUser(hitl.AskOptions{Timeout: 180 * time.Second, Details: map[string]any{"matched_rule": "confirm", "impact": "needs human review"}})
	})
}

func newFixture(t *testing.T, store checkpoint.Store, turns ...scripted.Turn) *fixture {
	t.Helper()
	return newThreadFixture(t, store, "session-1", turns...)
}

// newThreadFixture is newFixture for another thread than session-1.
func newThreadFixture(t *testing.T, store checkpoint.Store, thread string, turns ...scripted.Turn) *fixture {
	t.Helper()
	return newDirFixture(t, store, thread, "", turns...)
}

// newDirFixture is newThreadFixture whose approval middleware is told its
// tools work in dir (InDir; "": not told).
func newDirFixture(t *testing.T, store checkpoint.Store, thread, dir string, turns ...scripted.Turn) *fixture {
	t.Helper()
	if store == nil {
		store = storetest.New(t)
	}
	f := &fixture{store: store, clock: clock.NewFake(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))}
	f.channel = hitl.NewCheckpointedChannel(store, thread, &hitl.ChannelOptions{Clock: f.clock, PollInterval: 20 * time.Millisecond})
	bash := agent.NewTool("bash", "Run a command.", func(ctx context.Context, a cmdArgs) (string, error) {
		f.mu.Lock()
		f.ran = append(f.ran, a.Cmd)
		f.mu.Unlock()
		return "ran " + a.Cmd, nil
	}, nil)
	a, err := agent.New(agent.Config{
		Provider: scripted.New(turns...), Tools: []*agent.Tool{bash},
		Middleware: []agent.Middleware{hitl.NewApprovalPolicyMiddleware(f.channel, sandboxPolicy(f)).InDir(dir)},
		Channel:    f.channel, Checkpointer: store, ThreadID: thread, Clock: f.clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	f.agent = a
	return f
}

func (f *fixture) ranCmds() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.ran...)
}

func oneCall(cmd string) []scripted.Turn {
	return []scripted.Turn{
		{ToolCalls: []agent.ToolCall{scripted.Call("call_1", "bash", cmdArgs{cmd})}},
		{Text: "done"},
	}
}

// start runs a prompt in the background and waits for n pending requests.
func (f *fixture) start(t *testing.T, n int) (<-chan error, []*hitl.Request) {
	t.Helper()
	done := make(chan error, 1)
	go func() { _, err := f.agent.Prompt(context.Background(), "go"); done <- err }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		reqs, err := f.channel.Pending(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(reqs) >= n {
			return done, reqs
		}
		select {
		case err := <-done:
			t.Fatalf("run ended before asking: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("want %d pending requests, have %d", n, len(reqs))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func lastResult(t *testing.T, a *agent.Agent) agent.ToolResult {
	t.Helper()
	msgs, err := a.Messages(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == agent.RoleTool {
			return *msgs[i].Result
		}
	}
	t.Fatal("no tool result")
	return agent.ToolResult{}
}

func hitlTrace(r agent.ToolResult) map[string]any {
	h, _ := r.Details["hitl"].(map[string]any)
	return h
}

func TestDecisionTable(t *testing.T) {
	t.Parallel()
	t.Run("policy approve runs at once with no hitl details", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, nil, oneCall("ls -la")...)
		if _, err := f.agent.Prompt(context.Background(), "go"); err != nil {
			t.Fatal(err)
		}
		r := lastResult(t, f.agent)
		if r.IsError || r.Content != "ran ls -la" || r.Details != nil {
			t.Fatalf("result %+v", r)
		}
	})
	t.Run("policy deny", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, nil, oneCall("rm -rf /")...)
		if _, err := f.agent.Prompt(context.Background(), "go"); err != nil {
			t.Fatal(err)
		}
		r := lastResult(t, f.agent)
		if !r.IsError || r.Content != "destructive I/O" || hitlTrace(r)["decision"] != "policy_deny" || len(f.ranCmds()) != 0 {
			t.Fatalf("result %+v ran %v", r, f.ranCmds())
		}
	})
	t.Run("human approve", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, nil, oneCall("rm /tmp/logs")...)
		done, reqs := f.start(t, 1)
		req := reqs[0]
		if req.Payload.Kind != hitl.KindApprove || req.Payload.ToolName != "bash" || req.Payload.Args["cmd"] != "rm /tmp/logs" ||
			req.Payload.Details["matched_rule"] != "confirm" || req.TimeoutSeconds != 180 || req.QuestionID != "hitl_call_1" {
			t.Fatalf("request %+v", req)
		}
		if err := f.channel.Answer(context.Background(), req.QuestionID, hitl.ApproveAnswer{Decision: "approve", Digest: req.Digest}); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		r := lastResult(t, f.agent)
		if r.IsError || r.Content != "ran rm /tmp/logs" || r.Details != nil {
			t.Fatalf("result %+v", r)
		}
	})
	t.Run("human deny", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, nil, oneCall("rm /tmp/logs")...)
		done, reqs := f.start(t, 1)
		if err := f.channel.Answer(hitl.WithReviewer(context.Background(), "alice"), reqs[0].QuestionID, hitl.ApproveAnswer{Decision: "deny", Reason: "keep the logs"}); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		r := lastResult(t, f.agent)
		h := hitlTrace(r)
		if !r.IsError || r.Content != "keep the logs" || h["decision"] != "human_deny" || h["by"] != "alice" || len(f.ranCmds()) != 0 {
			t.Fatalf("result %+v", r)
		}
	})
	t.Run("human edit", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, nil, oneCall("rm /tmp/logs")...)
		done, reqs := f.start(t, 1)
		if err := f.channel.Answer(context.Background(), reqs[0].QuestionID, hitl.ApproveAnswer{Decision: "edit", EditedArgs: map[string]any{"cmd": "rm /tmp/logs/*.log"}}); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		r := lastResult(t, f.agent)
		h := hitlTrace(r)
		orig, _ := h["original_args"].(map[string]any)
		edited, _ := h["edited_args"].(map[string]any)
		if r.IsError || r.Content != "ran rm /tmp/logs/*.log" || h["decision"] != "edit" || orig["cmd"] != "rm /tmp/logs" || edited["cmd"] != "rm /tmp/logs/*.log" {
			t.Fatalf("result %+v", r)
		}
		if got := f.ranCmds(); len(got) != 1 || got[0] != "rm /tmp/logs/*.log" {
			t.Fatalf("ran %v", got)
		}
	})
	t.Run("policy that panics asks", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, nil, oneCall("panic")...)
		done, reqs := f.start(t, 1)
		if !strings.Contains(fmt.Sprint(reqs[0].Payload.Details["policy_error"]), "policy bug") {
			t.Fatalf("details %v", reqs[0].Payload.Details)
		}
		_ = f.channel.Answer(context.Background(), reqs[0].QuestionID, hitl.ApproveAnswer{Decision: "deny"})
		<-done
	})
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, append(oneCall("rm /tmp/logs")[:1], scripted.Turn{Text: "The approval timed out.", Check: func(req *agent.Request) error {
		r := req.Messages[len(req.Messages)-1].Result
		if !r.IsError || hitlTrace(*r)["decision"] != "timed_out" || r.Content != "approval_timeout" {
			return fmt.Errorf("model saw %+v", r)
		}
		return nil
	}})...)
	done, reqs := f.start(t, 1)
	if !f.clock.WaitForWaiters(1, 5*time.Second) {
		t.Fatal("no deadline timer")
	}
	f.clock.Advance(180 * time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// A late answer is refused with a clear error.
	err := f.channel.Answer(context.Background(), reqs[0].QuestionID, hitl.ApproveAnswer{Decision: "approve"})
	if !errors.Is(err, hitl.ErrExpired) || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("late answer: %v", err)
	}
	if len(f.ranCmds()) != 0 {
		t.Fatal("the tool ran")
	}
}

func TestDeadlineSurvivesRestart(t *testing.T) {
	t.Parallel()
	store := storetest.New(t)
	f := newFixture(t, store, oneCall("rm /tmp/logs")[:1]...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := f.agent.Prompt(ctx, "go"); done <- err }()
	waitFor(t, func() bool { reqs, _ := f.channel.Pending(context.Background()); return len(reqs) == 1 })
	cancel() // crash
	<-done
	// The process comes back after the deadline.
	f2 := newFixture(t, store, scripted.Turn{Text: "timed out"})
	f2.clock.Advance(181 * time.Second)
	if err := f2.channel.Answer(context.Background(), "hitl_call_1", hitl.ApproveAnswer{Decision: "approve"}); !errors.Is(err, hitl.ErrExpired) {
		t.Fatalf("answer after the deadline: %v", err)
	}
	if _, err := f2.agent.Resume(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := lastResult(t, f2.agent); hitlTrace(r)["decision"] != "timed_out" {
		t.Fatalf("result %+v", r)
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

func TestRestartBetweenQuestionAndAnswer(t *testing.T) {
	t.Parallel()
	store := storetest.New(t)
	f := askThenStop(t, store, "rm /tmp/logs")
	// Answered while no process runs the thread.
	if err := f.channel.Answer(context.Background(), "hitl_call_1", hitl.ApproveAnswer{Decision: "approve"}); err != nil {
		t.Fatal(err)
	}
	f2 := newFixture(t, store, scripted.Turn{Text: "done"})
	if _, err := f2.agent.Resume(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := f2.ranCmds(); len(got) != 1 || got[0] != "rm /tmp/logs" {
		t.Fatalf("ran %v", got)
	}
	if len(f.ranCmds()) != 0 {
		t.Fatal("the crashed process ran it")
	}
}

func TestAbortRefusesLaterAnswers(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, oneCall("rm /tmp/logs")[:1]...)
	done, reqs := f.start(t, 1)
	if err := f.agent.AbortPending(context.Background(), "user closed tab"); err != nil {
		t.Fatal(err)
	}
	<-done
	err := f.channel.Answer(context.Background(), reqs[0].QuestionID, hitl.ApproveAnswer{Decision: "approve"})
	if !errors.Is(err, hitl.ErrAborted) || !strings.Contains(err.Error(), "user closed tab") {
		t.Fatalf("answer after abort: %v", err)
	}
}

func TestRefusedAnswers(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, oneCall("rm /tmp/logs")...)
	done, reqs := f.start(t, 1)
	id := reqs[0].QuestionID
	ctx := context.Background()
	cases := []struct {
		name   string
		id     string
		answer any
		want   error
		text   string
	}{
		{"unknown question", "nope", hitl.ApproveAnswer{Decision: "approve"}, hitl.ErrUnknownQuestion, "nope"},
		{"wrong kind: bool for approve", id, true, hitl.ErrWrongKind, "decision"},
		{"unknown decision", id, hitl.ApproveAnswer{Decision: "maybe"}, hitl.ErrWrongKind, "maybe"},
		{"edit without arguments", id, hitl.ApproveAnswer{Decision: "edit"}, hitl.ErrWrongKind, "edited_args"},
		{"edit failing the schema", id, hitl.ApproveAnswer{Decision: "edit", EditedArgs: map[string]any{"cmd": 5, "x": 1}}, hitl.ErrInvalidAnswer, "2 problems"},
		{"edit the policy denies", id, hitl.ApproveAnswer{Decision: "edit", EditedArgs: map[string]any{"cmd": "rm -rf /"}}, hitl.ErrInvalidAnswer, "destructive I/O"},
		{"digest mismatch", id, hitl.ApproveAnswer{Decision: "approve", Digest: "sha256:00"}, hitl.ErrDigestMismatch, ""},
	}
	for _, c := range cases {
		err := f.channel.Answer(ctx, c.id, c.answer)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.text) {
			t.Errorf("%s: err = %v, want %v containing %q", c.name, err, c.want, c.text)
		}
	}
	var ve *agent.ValidationError
	if err := f.channel.Answer(ctx, id, hitl.ApproveAnswer{Decision: "edit", EditedArgs: map[string]any{"other": 1}}); !errors.As(err, &ve) || ve.Problems[0].Path != "/cmd" {
		t.Errorf("validation error not reachable with errors.As: %v", err)
	}
	// The question is still open after every refusal: the right answer works.
	if err := f.channel.Answer(ctx, id, hitl.ApproveAnswer{Decision: "approve"}); err != nil {
		t.Fatal(err)
	}
	if err := f.channel.Answer(ctx, id, hitl.ApproveAnswer{Decision: "deny"}); !errors.Is(err, hitl.ErrAlreadyAnswered) {
		t.Errorf("second answer: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestSixteenAnswersOneWins(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, oneCall("rm /tmp/logs")...)
	done, reqs := f.start(t, 1)
	var wins, conflicts atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			decision := []string{"approve", "deny"}[i%2]
			err := f.channel.Answer(hitl.WithReviewer(context.Background(), fmt.Sprint("r", i)), reqs[0].QuestionID, hitl.ApproveAnswer{Decision: decision})
			switch {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, hitl.ErrAlreadyAnswered):
				conflicts.Add(1)
			default:
				t.Errorf("unexpected error %v", err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if wins.Load() != 1 || conflicts.Load() != 15 {
		t.Fatalf("wins %d conflicts %d", wins.Load(), conflicts.Load())
	}
	if n := len(f.ranCmds()); n > 1 {
		t.Fatalf("ran %d times", n)
	}
}

func TestSubscribeSeesPendingFirstThenNew(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil,
		scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "bash", cmdArgs{"rm a"})}},
		scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c2", "bash", cmdArgs{"rm b"})}},
		scripted.Turn{Text: "done"},
	)
	done, _ := f.start(t, 1) // c1 is pending before anyone subscribes
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []string
	for req, err := range f.channel.Subscribe(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, req.Payload.Args["cmd"].(string))
		if err := f.channel.Answer(ctx, req.QuestionID, hitl.ApproveAnswer{Decision: "approve"}); err != nil {
			t.Fatal(err)
		}
		if len(got) == 2 {
			break
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "rm a,rm b" {
		t.Fatalf("subscriber saw %v", got)
	}
}

func TestAskUserToolAndConfirm(t *testing.T) {
	t.Parallel()
	channel := hitl.NewCheckpointedChannel(memory.New(), "t", nil)
	deploy := agent.NewTool("deploy", "Deploy.", func(ctx context.Context, a struct{}) (string, error) {
		ok, err := hitl.Confirm(ctx, "go", "Deploy to production?", time.Minute)
		if err != nil {
			return "", err
		}
		if !ok {
			return "not deployed", nil
		}
		return "deployed", nil
	}, nil)
	model := scripted.New(
		scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "ask_user", hitl.AskUserArgs{Question: "Which region?", Choices: []string{"eu", "us"}}), scripted.Call("c2", "deploy", `{}`)}},
		scripted.Turn{Text: "ok"},
	)
	a, err := agent.New(agent.Config{Provider: model, Tools: []*agent.Tool{hitl.NewAskUserTool(nil), deploy}, Channel: channel, ThreadID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := a.Prompt(context.Background(), "deploy"); done <- err }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	for req := range channel.Subscribe(ctx) {
		switch req.Payload.Kind {
		case hitl.KindAsk:
			if req.Payload.Question != "Which region?" {
				t.Fatalf("ask %+v", req.Payload)
			}
			if err := channel.Answer(ctx, req.QuestionID, "mars"); !errors.Is(err, hitl.ErrWrongKind) {
				t.Fatalf("answer outside the choices: %v", err)
			}
			if err := channel.Answer(ctx, req.QuestionID, "eu"); err != nil {
				t.Fatal(err)
			}
		case hitl.KindConfirm:
			if req.Payload.Message != "Deploy to production?" || req.TimeoutSeconds != 60 {
				t.Fatalf("confirm %+v", req)
			}
			if err := channel.Answer(ctx, req.QuestionID, "yes please"); !errors.Is(err, hitl.ErrWrongKind) {
				t.Fatalf("non-bool confirm answer: %v", err)
			}
			if err := channel.Answer(ctx, req.QuestionID, true); err != nil {
				t.Fatal(err)
			}
		}
		if n++; n == 2 {
			break
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	msgs, _ := a.Messages(context.Background())
	if msgs[2].Result.Content != "eu" || msgs[3].Result.Content != "deployed" {
		t.Fatalf("results %+v %+v", msgs[2].Result, msgs[3].Result)
	}
}
