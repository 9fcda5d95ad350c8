package providertest

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/clock"
	"github.com/tollgate-ai/tollgate/hitl"
)

// SeedArgs are the arguments of the seed scenario's bash tool.
type SeedArgs struct {
	Command string `json:"command"`
}

// SeedTimeout is how long the seed's policy gives a reviewer.
const SeedTimeout = 180 * time.Second

// Seed is what happened in a [RunSeed].
type Seed struct {
	// Final is the message the run ended with.
	Final *agent.Message
	// Asked are the approval requests the host received, in order.
	Asked []*hitl.Request
	// Ran are the commands the bash tool ran, in order.
	Ran []string
	// Messages is the thread at the end.
	Messages []agent.Message
}

// RunSeed plays the seed scenario (seeds/003) with p as the model: the
// prompt "list files then delete temp logs", a bash tool that records the
// commands it is given (and runs nothing), a policy that approves commands
// starting with "ls" and asks a person about any other (180s to answer),
// and a host that answers each request with answer. When answer returns
// nil the host lets the question time out (on a fake clock).
func RunSeed(t testing.TB, p agent.Provider, model agent.Model, answer func(*hitl.Request) *hitl.ApproveAnswer) *Seed {
	t.Helper()
	seed := &Seed{}
	var mu sync.Mutex
	bash := agent.NewTool("bash", "Run a shell command.", func(ctx context.Context, a SeedArgs) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		seed.Ran = append(seed.Ran, a.Command)
		return "ran: " + a.Command, nil
	}, nil)
	policy := hitl.Typed(func(ctx context.Context, c *hitl.PolicyContext, a SeedArgs) hitl.ApprovalDecision {
		if strings.HasPrefix(a.Command, "ls") {
			return hitl.Approve()
		}
		return hitl.AskUser(hitl.AskOptions{Timeout: SeedTimeout,
			Details: map[string]any{"matched_rule": "confirm-writes", "impact": "deletes files"}})
	})
	clk := clock.NewFake(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	channel := hitl.NewCheckpointedChannel(memory.New(), "seed", &hitl.ChannelOptions{Clock: clk, PollInterval: 20 * time.Millisecond})
	a, err := agent.New(agent.Config{
		Provider:     p,
		Model:        model,
		SystemPrompt: "You are a careful shell assistant.",
		Tools:        []*agent.Tool{bash},
		Middleware:   []agent.Middleware{hitl.NewApprovalPolicyMiddleware(channel, policy)},
		Channel:      channel,
		ThreadID:     "seed",
		Clock:        clk,
	})
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	type result struct {
		msg *agent.Message
		err error
	}
	done := make(chan result, 1)
	go func() {
		msg, err := a.Prompt(ctx, "list files then delete temp logs")
		done <- result{msg, err}
	}()
	hostCtx, stopHost := context.WithCancel(ctx)
	hostDone := make(chan struct{})
	go func() {
		defer close(hostDone)
		for req, err := range channel.Subscribe(hostCtx) {
			if err != nil {
				t.Errorf("host: %v", err)
				continue
			}
			seed.Asked = append(seed.Asked, req)
			ans := answer(req)
			if ans == nil {
				// The run waits on the clock for the deadline: let it pass.
				clk.WaitForWaiters(1, 5*time.Second)
				clk.Advance(SeedTimeout + time.Second)
				continue
			}
			if err := channel.Answer(hostCtx, req.QuestionID, *ans); err != nil {
				t.Errorf("host: answer %s: %v", req.QuestionID, err)
			}
		}
	}()
	res := <-done
	stopHost()
	<-hostDone
	if res.err != nil {
		t.Fatalf("run: %v", res.err)
	}
	seed.Final = res.msg
	if seed.Messages, err = a.Messages(ctx); err != nil {
		t.Fatal(err)
	}
	return seed
}
