//go:build linux

package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/checkpoint/sqlite"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/provider/scripted"
)

type echoArgs struct {
	Text string `json:"text"`
}

// BenchmarkRun measures one Prompt: a model turn with one tool call, the
// policy, the tool, and the final turn — every checkpoint write included.
// "approved" adds a question answered by a host.
func BenchmarkRun(b *testing.B) {
	echo := agent.NewTool("echo", "Echo.", func(ctx context.Context, a echoArgs) (string, error) { return a.Text, nil }, nil)
	for _, name := range []string{"memory", "sqlite"} {
		for _, ask := range []bool{false, true} {
			b.Run(fmt.Sprintf("store=%s/approved=%v", name, ask), func(b *testing.B) {
				store := benchStore(b, name)
				policy := func(ctx context.Context, c *hitl.PolicyContext) hitl.ApprovalDecision {
					if ask {
						return hitl.AskUser(hitl.AskOptions{})
					}
					return hitl.Approve()
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				channel := hitl.NewCheckpointedChannel(store, "", nil)
				go func() {
					for req, err := range channel.Subscribe(ctx) {
						if err == nil {
							_ = channel.AnswerIn(ctx, req.ThreadID, req.QuestionID, hitl.ApproveAnswer{Decision: "approve"})
						}
					}
				}()
				b.ResetTimer()
				for i := range b.N {
					model := scripted.New(
						scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "echo", echoArgs{"hi"})}},
						scripted.Turn{Text: "done"},
					)
					a, err := agent.New(agent.Config{Provider: model, Tools: []*agent.Tool{echo}, Checkpointer: store, Channel: channel,
						ThreadID: fmt.Sprint("t", i), Middleware: []agent.Middleware{hitl.NewApprovalPolicyMiddleware(channel, policy)}})
					if err != nil {
						b.Fatal(err)
					}
					if _, err := a.Prompt(ctx, "go"); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkCycleKinds drives the approval cycle both ways, like for like
// (the cycle's bash tool, policy, scripted.Demo and 1 KB prompt, a new
// thread a cycle), on each store:
//   - kind=channel: a goroutine waits in process — Agent.Prompt, the
//     question answered through hitl's channel by a subscriber;
//   - kind=host: the run parks on its question and the answer resumes it
//     — host.Prompt, host.Answer, as tollgate serve runs it (cycle.go).
//
// The kinds take turns, round by round, so that a change of load hits
// both. The host-driven cycle's share of the channel-driven one is
// channel ns/op ÷ host ns/op of the same round (cpu-ns/op likewise, for
// CPU, which a loaded machine moves less).
//
//	go test -run '^$' -bench CycleKinds -benchtime 2000x ./bench/
//
// With -kinds.stored N each store first holds N pending questions of
// threads no run drives (as bench cycle's -stored): what a host's
// deadline loop and a store's reads of questions must not scan.
func BenchmarkCycleKinds(b *testing.B) {
	prompt := cyclePrompt(1024)
	for _, store := range []string{"memory", "sqlite"} {
		for round := 1; round <= 3; round++ {
			for _, kind := range []string{"channel", "host"} {
				b.Run(fmt.Sprintf("store=%s/round=%d/kind=%s", store, round, kind), func(b *testing.B) {
					s := benchStore(b, store)
					if kind == "host" {
						benchHostCycles(b, s, prompt)
					} else {
						benchChannelCycles(b, s, prompt)
					}
				})
			}
		}
	}
}

// benchStore is a new store of that kind ("memory", "sqlite": a file of
// the benchmark's own), closed when it ends.
func benchStore(b *testing.B, kind string) checkpoint.Store {
	var s checkpoint.Store
	if kind == "memory" {
		s = memory.New()
	} else {
		sq, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "b.db"), nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { sq.Close() })
		s = sq
	}
	if *kindsStored > 0 {
		if err := storeQuestions(context.Background(), s, "ks-"+randomHex(4), *kindsStored); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// kindsStored: pending questions each store of BenchmarkCycleKinds holds
// before its cycles (none by default).
var kindsStored = flag.Int("kinds.stored", 0, "BenchmarkCycleKinds: pending questions stored before the cycles")

// kindsWarmup cycles run before the clock starts.
const kindsWarmup = 20

func benchHostCycles(b *testing.B, store checkpoint.Store, prompt string) {
	ctx := b.Context()
	ch, err := newCycleHost(ctx, store)
	if err != nil {
		b.Fatal(err)
	}
	defer ch.shutdown()
	tag := "kh-" + randomHex(4)
	for i := range kindsWarmup {
		if _, err := ch.cycle(ctx, fmt.Sprintf("%s-w%d", tag, i), prompt); err != nil {
			b.Fatal(err)
		}
	}
	if err := ch.waitQuiet(ctx); err != nil {
		b.Fatal(err)
	}
	done := measureCycles(b)
	for i := range b.N {
		if _, err := ch.cycle(ctx, fmt.Sprintf("%s-%d", tag, i), prompt); err != nil {
			b.Fatal(err)
		}
	}
	if err := ch.waitQuiet(ctx); err != nil {
		b.Fatal(err)
	}
	done()
}

func benchChannelCycles(b *testing.B, store checkpoint.Store, prompt string) {
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	channel := hitl.NewCheckpointedChannel(store, "", nil)
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		for req, err := range channel.Subscribe(ctx) {
			if err == nil {
				_ = channel.AnswerIn(ctx, req.ThreadID, req.QuestionID, hitl.ApproveAnswer{Decision: hitl.DecisionApprove, Digest: req.Digest})
			}
		}
	}()
	defer func() { cancel(); <-answered }()
	bash := agent.NewTool("bash", "Run a command.", func(ctx context.Context, a shellArgs) (string, error) { return "ok", nil }, nil)
	middleware := []agent.Middleware{hitl.NewApprovalPolicyMiddleware(channel, benchPolicy)}
	tag := "kc-" + randomHex(4)
	cycle := func(thread string) {
		a, err := agent.New(agent.Config{Provider: scripted.Demo{}, Tools: []*agent.Tool{bash}, Checkpointer: store, Channel: channel,
			ThreadID: thread, Logger: quiet, Middleware: middleware})
		if err != nil {
			b.Fatal(err)
		}
		msg, err := a.Prompt(ctx, prompt)
		if err != nil || msg == nil {
			b.Fatalf("%s: %v", thread, err)
		}
	}
	for i := range kindsWarmup {
		cycle(fmt.Sprintf("%s-w%d", tag, i))
	}
	done := measureCycles(b)
	for i := range b.N {
		cycle(fmt.Sprintf("%s-%d", tag, i))
	}
	done()
}

// measureCycles starts the clock of b's cycles; done stops it and
// reports, beside time and allocations, the process's CPU time a cycle
// (cpu-ns/op: what the cycle costs whatever else the machine runs).
func measureCycles(b *testing.B) (done func()) {
	b.ReportAllocs()
	b.ResetTimer()
	u0, s0 := cpuTime()
	return func() {
		u1, s1 := cpuTime()
		b.StopTimer()
		b.ReportMetric(float64(u1-u0+s1-s0)/float64(b.N), "cpu-ns/op")
	}
}
