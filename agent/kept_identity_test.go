package agent_test

import (
	"context"
	"errors"
	"testing"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/internal/storetest"
	"github.com/tollgate-ai/tollgate/provider/scripted"
)

// switchStore is a store whose backing database can be swapped, as a
// failover to an asynchronous standby (which lost the last commits) or a
// restored backup swaps it under a running process. Swapped only while
// no run is active.
type switchStore struct{ checkpoint.Store }

// A thread at the version and run a park wrote is not necessarily the
// thread the park wrote: after the store lost its last commits (a
// failover), the same run (an idempotency key's run id) driven again can
// reach that version with another model turn and another call. A resume
// on the agent that parked must go on from the stored thread, not ask
// about, run and append the result of a call the thread does not hold.
func TestKeptRunNotUsedForAnotherThreadAtTheSameVersion(t *testing.T) {
	t.Parallel()
	primary, standby := storetest.New(t), storetest.New(t)
	sw := &switchStore{Store: primary}
	var ran []string
	tool := agent.NewTool("echo", "Echo text.", func(ctx context.Context, a echoArgs) (string, error) {
		ran = append(ran, a.Text)
		return "echo: " + a.Text, nil
	}, nil)
	cfg := func(st checkpoint.Store, call agent.ToolCall) agent.Config {
		return agent.Config{Provider: scripted.New(scripted.Turn{ToolCalls: []agent.ToolCall{call}}, scripted.Turn{Text: "done"}),
			Checkpointer: st, Channel: &parkingChannel{store: st}, ThreadID: "t1",
			Tools: []*agent.Tool{tool}, Middleware: []agent.Middleware{askMW(0)}}
	}
	a := newAgent(t, cfg(sw, scripted.Call("c_old", "echo", echoArgs{"old"})))
	if _, err := a.PromptWith(context.Background(), "go", &agent.PromptOptions{RunID: "run_key1"}); !errors.Is(err, agent.ErrParked) {
		t.Fatalf("Prompt = %v, want ErrParked", err)
	}
	// The standby never got the run's writes; the run is driven again
	// there (the client retried with its key) and the model chose another
	// call: the thread is at the same version, in the same run.
	b := newAgent(t, cfg(standby, scripted.Call("c_new", "echo", echoArgs{"new"})))
	if _, err := b.PromptWith(context.Background(), "go", &agent.PromptOptions{RunID: "run_key1"}); !errors.Is(err, agent.ErrParked) {
		t.Fatalf("Prompt on the standby = %v, want ErrParked", err)
	}
	p, _ := primary.LoadThread(context.Background(), "t1")
	s, _ := standby.LoadThread(context.Background(), "t1")
	if p.Version != s.Version || p.RunID != s.RunID || string(p.Messages) == string(s.Messages) {
		t.Fatalf("set-up: primary v%d %s, standby v%d %s", p.Version, p.RunID, s.Version, s.RunID)
	}
	sw.Store = standby // the failover
	answer(t, standby, "t1", "approve_c_new", "true")
	if _, err := a.Resume(context.Background()); err != nil && !errors.Is(err, agent.ErrParked) {
		t.Fatalf("Resume = %v", err)
	}
	if q, err := standby.GetQuestion(context.Background(), "t1", "approve_c_old"); err == nil {
		t.Errorf("the resume asked %s about call c_old, which the stored thread does not hold", q.ID)
		answer(t, standby, "t1", "approve_c_old", "true")
		a.Resume(context.Background())
	}
	th, _ := standby.LoadThread(context.Background(), "t1")
	if len(ran) != 1 || ran[0] != "new" {
		t.Logf("the standby's thread now: %s", th.Messages)
		t.Fatalf("the tool ran with %q, want only the stored call's %q", ran, "new")
	}
}
