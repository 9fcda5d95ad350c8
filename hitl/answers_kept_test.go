package hitl_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/internal/storetest"
	"github.com/tollgate-ai/tollgate/provider/scripted"
)

// failOnce makes the first "done" write of a call fail, as a crash right
// after the decision would.
type failOnce struct {
	checkpoint.Store
	failed atomic.Bool
}

func (s *failOnce) PutToolCall(ctx context.Context, tc *checkpoint.ToolCall) error {
	if tc.State == checkpoint.ToolCallDone && s.failed.CompareAndSwap(false, true) {
		return errors.New("simulated crash")
	}
	return s.Store.PutToolCall(ctx, tc)
}

func TestHumanDenyStandsWhenThePolicyLoosens(t *testing.T) {
	t.Parallel()
	base := storetest.New(t)
	store := &failOnce{Store: base}
	var loose atomic.Bool
	policy := func(ctx context.Context, c *hitl.PolicyContext) hitl.ApprovalDecision {
		if loose.Load() {
			return hitl.Approve()
		}
		return hitl.AskUser(hitl.AskOptions{})
	}
	var ran atomic.Int32
	sql := agent.NewTool("sql", "Run SQL.", func(ctx context.Context, a struct {
		Q string `json:"q"`
	}) (string, error) {
		ran.Add(1)
		return "ok", nil
	}, nil)
	build := func(st checkpoint.Store, turns ...scripted.Turn) (*agent.Agent, *hitl.CheckpointedChannel) {
		ch := hitl.NewCheckpointedChannel(st, "t", nil)
		a, err := agent.New(agent.Config{Provider: scripted.New(turns...), Tools: []*agent.Tool{sql},
			Middleware: []agent.Middleware{hitl.NewApprovalPolicyMiddleware(ch, policy)}, Channel: ch, Checkpointer: st, ThreadID: "t"})
		if err != nil {
			t.Fatal(err)
		}
		return a, ch
	}
	a1, ch := build(store, scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "sql", `{"q":"drop table users"}`)}})
	done := make(chan error, 1)
	go func() { _, err := a1.Prompt(context.Background(), "go"); done <- err }()
	waitFor(t, func() bool { r, _ := ch.Pending(context.Background()); return len(r) == 1 })
	if err := ch.Answer(context.Background(), "hitl_c1", hitl.ApproveAnswer{Decision: "deny", Reason: "no"}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatal("the simulated crash did not stop the run")
	}
	loose.Store(true) // the policy file is edited to approve everything
	a2, _ := build(store, scripted.Turn{Text: "done"})
	if _, err := a2.Resume(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ran.Load() != 0 {
		t.Fatal("a reviewer's deny was overridden by a reloaded policy")
	}
}

func TestLargeIntegersShownAndEditedExactly(t *testing.T) {
	t.Parallel()
	var got atomic.Int64
	pay := agent.NewTool("pay", "Pay.", func(ctx context.Context, a struct {
		Account int64 `json:"account"`
	}) (string, error) {
		got.Store(a.Account)
		return "paid", nil
	}, nil)
	ch := hitl.NewCheckpointedChannel(storetest.New(t), "t", nil)
	a, _ := agent.New(agent.Config{Provider: scripted.New(scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "pay", `{"account":9007199254740993}`)}}, scripted.Turn{Text: "ok"}),
		Tools: []*agent.Tool{pay}, Middleware: []agent.Middleware{hitl.NewApprovalPolicyMiddleware(ch, nil)}, Channel: ch, ThreadID: "t"})
	done := make(chan error, 1)
	go func() { _, err := a.Prompt(context.Background(), "go"); done <- err }()
	var req *hitl.Request
	waitFor(t, func() bool {
		r, _ := ch.Pending(context.Background())
		if len(r) == 1 {
			req = r[0]
		}
		return req != nil
	})
	if shown, _ := json.Marshal(req.Payload.Args); string(shown) != `{"account":9007199254740993}` {
		t.Fatalf("reviewer was shown %s", shown)
	}
	if err := ch.Answer(context.Background(), req.QuestionID, json.RawMessage(`{"decision":"edit","edited_args":{"account":9007199254740995}}`)); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got.Load() != 9007199254740995 {
		t.Fatalf("the edit ran as %d", got.Load())
	}
}

func TestAskUserAnswerSurvivesAStoppedRun(t *testing.T) {
	t.Parallel()
	store := storetest.New(t)
	build := func(turns ...scripted.Turn) (*agent.Agent, *hitl.CheckpointedChannel) {
		ch := hitl.NewCheckpointedChannel(store, "t", nil)
		a, err := agent.New(agent.Config{Provider: scripted.New(turns...), Tools: []*agent.Tool{hitl.NewAskUserTool(&hitl.AskUserToolOptions{Timeout: time.Hour})},
			Channel: ch, ThreadID: "t"})
		if err != nil {
			t.Fatal(err)
		}
		return a, ch
	}
	a1, ch := build(scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "ask_user", hitl.AskUserArgs{Question: "Which env?"})}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := a1.Prompt(ctx, "deploy"); done <- err }()
	waitFor(t, func() bool { r, _ := ch.Pending(context.Background()); return len(r) == 1 })
	cancel() // the process stops while the question waits
	<-done
	if err := ch.Answer(context.Background(), "ask_c1", "staging"); err != nil {
		t.Fatal(err)
	}
	a2, _ := build(scripted.Turn{Text: "ok", Check: func(req *agent.Request) error {
		if r := req.Messages[len(req.Messages)-1].Result; r.Content != "staging" {
			return errors.New("the model saw " + r.Content)
		}
		return nil
	}})
	if _, err := a2.Resume(context.Background()); err != nil {
		t.Fatal(err)
	}
}
