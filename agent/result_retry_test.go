package agent_test

import (
	"context"
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

// failFirstResult fails the first write of a call's result for a moment
// (an error that is neither a conflict nor the store out of reach).
type failFirstResult struct {
	checkpoint.Store
	failed atomic.Bool
}

func (s *failFirstResult) Commit(ctx context.Context, b *checkpoint.Batch) (*checkpoint.Committed, error) {
	if len(b.ToolCalls) == 1 && b.ToolCalls[0].State == checkpoint.ToolCallDone && s.failed.CompareAndSwap(false, true) {
		return nil, errors.New("connection reset")
	}
	return s.Store.Commit(ctx, b)
}

// resultRetryAgent prompts an agent whose first result write fails, on a
// fake clock, in the background.
func resultRetryAgent(t *testing.T, ctx context.Context) (*clock.Fake, checkpoint.Store, <-chan error) {
	t.Helper()
	base := storetest.New(t)
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	model := scripted.New(scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "echo", echoArgs{"x"})}}, scripted.Turn{Text: "done"})
	a := newAgent(t, agent.Config{Provider: model, Checkpointer: &failFirstResult{Store: base}, ThreadID: "t1", Clock: clk, Tools: []*agent.Tool{echoTool()}})
	done := make(chan error, 1)
	go func() {
		_, err := a.Prompt(ctx, "go")
		done <- err
	}()
	return clk, base, done
}

func callDone(t *testing.T, s checkpoint.Store) {
	t.Helper()
	th, err := s.LoadThread(context.Background(), "t1")
	if err != nil {
		t.Fatal(err)
	}
	calls, err := s.ListToolCalls(context.Background(), "t1", th.RunID, "c1")
	if err != nil || len(calls) != 1 || calls[0].State != checkpoint.ToolCallDone {
		t.Fatalf("the call's record: %+v, %v; want it done", calls, err)
	}
}

// The write of a known result is tried again after the agent's clock
// (Config.Clock), not the system's: a test's fake clock moves it.
func TestResultRetryWaitsOnTheAgentsClock(t *testing.T) {
	t.Parallel()
	clk, store, done := resultRetryAgent(t, context.Background())
	if !clk.WaitForWaiters(1, 10*time.Second) {
		t.Fatal("the retry of the result's write does not wait on the agent's clock")
	}
	clk.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatalf("Prompt = %v", err)
	}
	callDone(t, store)
}

// A run stopped while it waits to write a known result again does not
// wait out the pause, and still writes the result.
func TestResultRetryHonoursTheRunsContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clk, store, done := resultRetryAgent(t, ctx)
	if !clk.WaitForWaiters(1, 10*time.Second) {
		t.Fatal("the retry of the result's write does not wait on the agent's clock")
	}
	cancel() // the clock never moves: only the context ends the pause
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Prompt = %v, want it cancelled", err)
	}
	callDone(t, store)
}
