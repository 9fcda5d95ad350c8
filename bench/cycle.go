//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/provider/scripted"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// shellArgs are the arguments of the cycle's tool, as scripted.Demo writes
// them: {"cmd": "..."}.
type shellArgs struct {
	Cmd string `json:"cmd"`
}

// readArgs are the arguments of the thread-turns tool.
type readArgs struct {
	Path string `json:"path"`
}

// benchPolicy asks for every bash call (the cycle's tool) and allows
// reads (the thread-turns tool): rules as a user writes them.
var benchPolicy = hitl.ByTool(map[string]hitl.Policy{
	"bash": func(ctx context.Context, c *hitl.PolicyContext) hitl.ApprovalDecision {
		return hitl.AskUser(hitl.AskOptions{Details: map[string]any{"matched_rule": "bench-ask-bash", "impact": "runs a command"}})
	},
	"read": func(ctx context.Context, c *hitl.PolicyContext) hitl.ApprovalDecision { return hitl.Approve() },
}, nil)

// waiter is what one cycle waits for, fed by the host's events and the
// tool.
type waiter struct {
	question chan *checkpoint.Question
	finished chan *agent.RunFinishedEvent
	tool     chan time.Time
}

// cycleHost is a host set up as a user sets one up, and the waiters of
// the cycles in progress.
type cycleHost struct {
	h       *host.Host
	waiters sync.Map // thread id -> *waiter
	runs    atomic.Int64
	done    chan struct{}
}

func newCycleHost(ctx context.Context, store checkpoint.Store) (*cycleHost, error) {
	ch := &cycleHost{done: make(chan struct{})}
	// A trivial tool that is not idempotent: the claim before it runs is
	// one of the durable points.
	bash := agent.NewTool("bash", "Run a command.", func(ctx context.Context, a shellArgs) (string, error) {
		now := time.Now()
		ch.runs.Add(1)
		if c := agent.ToolCallFrom(ctx); c != nil {
			if v, ok := ch.waiters.Load(c.ThreadID); ok {
				select {
				case v.(*waiter).tool <- now:
				default:
				}
			}
		}
		return "ok", nil
	}, nil)
	h, err := host.New(host.Config{Store: store, Logger: quiet, Agent: agent.Config{
		Provider: scripted.Demo{}, // "$ cmd" becomes one bash call
		Tools:    []*agent.Tool{bash},
		Logger:   quiet,
		Middleware: []agent.Middleware{hitl.NewApprovalPolicyMiddleware(
			hitl.NewCheckpointedChannel(store, "", nil), benchPolicy)},
	}})
	if err != nil {
		return nil, err
	}
	ch.h = h
	events, _ := h.Subscribe(1 << 16)
	if err := h.Start(ctx); err != nil {
		return nil, err
	}
	go func() {
		defer close(ch.done)
		for e := range events {
			switch ev := e.(type) {
			case *agent.HitlRequestEvent:
				if v, ok := ch.waiters.Load(ev.Meta().ThreadID); ok {
					select {
					case v.(*waiter).question <- ev.Question:
					default:
					}
				}
			case *agent.RunFinishedEvent:
				if v, ok := ch.waiters.Load(ev.Meta().ThreadID); ok {
					select {
					case v.(*waiter).finished <- ev:
					default:
					}
				}
			}
		}
	}()
	return ch, nil
}

// waitQuiet waits until the host drives no run (the last cycles' trailing
// writes are done).
func (c *cycleHost) waitQuiet(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		s := c.h.Stats()
		if s.Active == 0 && s.Queued == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the host still drives %d runs after 60s", s.Active)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(time.Millisecond)
	}
}

func (c *cycleHost) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c.h.Shutdown(ctx)
	<-c.done
}

// describe says where a thread that timed out stands in the store and
// the host, and with TOLLGATE_BENCH_STACKS=1 prints every goroutine.
func (c *cycleHost) describe(ctx context.Context, thread, question string) string {
	if os.Getenv("TOLLGATE_BENCH_STACKS") == "1" {
		pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
	}
	var parts []string
	if th, err := c.h.Store().LoadThread(ctx, thread); err != nil {
		parts = append(parts, "thread: "+err.Error())
	} else {
		state, _ := c.h.State(th)
		parts = append(parts, fmt.Sprintf("thread %s, version %d, host %s", th.Status, th.Version, state))
	}
	if question != "" {
		if q, err := c.h.Store().GetQuestion(ctx, thread, question); err != nil {
			parts = append(parts, "question: "+err.Error())
		} else {
			parts = append(parts, "question "+string(q.Status))
		}
	}
	s := c.h.Stats()
	parts = append(parts, fmt.Sprintf("host: %d active, %d queued, %d parked, %d failed", s.Active, s.Queued, s.Parked, s.Failed))
	return strings.Join(parts, "; ")
}

type sample struct {
	answerToTool time.Duration
	early        bool // the tool started before Answer returned
	cycle        time.Duration
}

const waitLimit = 60 * time.Second

// cycle is one approval cycle on a new thread.
func (c *cycleHost) cycle(ctx context.Context, thread, prompt string) (sample, error) {
	w := &waiter{question: make(chan *checkpoint.Question, 1), finished: make(chan *agent.RunFinishedEvent, 1), tool: make(chan time.Time, 2)}
	c.waiters.Store(thread, w)
	defer c.waiters.Delete(thread)
	timer := time.NewTimer(waitLimit)
	defer timer.Stop()
	t0 := time.Now()
	if _, _, err := c.h.Prompt(ctx, thread, prompt, nil); err != nil {
		return sample{}, fmt.Errorf("prompt %s: %w", thread, err)
	}
	var q *checkpoint.Question
	select {
	case q = <-w.question:
	case <-timer.C:
		return sample{}, fmt.Errorf("%s: no question after %s (events dropped: %d; %s)", thread, waitLimit, c.h.Dropped(), c.describe(ctx, thread, ""))
	case <-ctx.Done():
		return sample{}, ctx.Err()
	}
	answer, _ := json.Marshal(hitl.ApproveAnswer{Decision: hitl.DecisionApprove, Digest: q.Digest})
	if _, err := c.h.Answer(ctx, thread, q.ID, answer, "bench"); err != nil {
		return sample{}, fmt.Errorf("answer %s/%s: %w", thread, q.ID, err)
	}
	t1 := time.Now()
	var fin *agent.RunFinishedEvent
	select {
	case fin = <-w.finished:
	case <-timer.C:
		return sample{}, fmt.Errorf("%s: the run did not finish within %s of its prompt (events dropped: %d; %s)", thread, waitLimit, c.h.Dropped(), c.describe(ctx, thread, q.ID))
	case <-ctx.Done():
		return sample{}, ctx.Err()
	}
	t2 := time.Now()
	if fin.Err != nil || fin.Message == nil {
		return sample{}, fmt.Errorf("%s: the run ended with %v", thread, fin.Err)
	}
	var tt time.Time
	select {
	case tt = <-w.tool:
	default:
		return sample{}, fmt.Errorf("%s: the run finished (%q) but the tool never ran", thread, fin.Message.Text)
	}
	if len(w.tool) > 0 {
		return sample{}, fmt.Errorf("%s: the tool ran twice", thread)
	}
	s := sample{answerToTool: tt.Sub(t1), cycle: t2.Sub(t0)}
	if s.answerToTool < 0 {
		s.answerToTool, s.early = 0, true
	}
	return s, nil
}

// loops runs cycles from loops goroutines, back to back, until total
// cycles have started (or, with total 0, until d has passed).
func (c *cycleHost) loops(ctx context.Context, loops, total int, d time.Duration, tag, prompt string) ([]sample, error) {
	deadline := time.Now().Add(d)
	stop := func(k int64) bool { return total > 0 && k > int64(total) || total == 0 && time.Now().After(deadline) }
	return runLoops(ctx, loops, stop, func(ctx context.Context, k int64) (sample, error) {
		return c.cycle(ctx, fmt.Sprintf("%s-%d", tag, k), prompt)
	})
}

// runLoops calls cycle from loops goroutines, back to back, with 1, 2,
// 3... until stop says so, or the first error, which cancels the others.
func runLoops[S any](ctx context.Context, loops int, stop func(k int64) bool, cycle func(ctx context.Context, k int64) (S, error)) ([]S, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	per := make([][]S, loops)
	var wg sync.WaitGroup
	for i := range loops {
		wg.Go(func() {
			for {
				k := next.Add(1)
				if stop(k) {
					return
				}
				s, err := cycle(ctx, k)
				if err != nil {
					cancel(err)
					return
				}
				per[i] = append(per[i], s)
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	var all []S
	for _, p := range per {
		all = append(all, p...)
	}
	return all, nil
}

// cycleRound is one measured round of cycles on a fresh store handle and
// host.
type cycleRound struct {
	Cycles    int     `json:"cycles"`
	Warmup    int     `json:"warmup"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"cycles_per_s"`
	// Store calls through the counting wrapper, measured phase.
	Writes   int64            `json:"writes"`
	Reads    int64            `json:"reads"`
	ByMethod map[string]int64 `json:"by_method,omitempty"`
	// SQLite WriteStats, measured phase.
	HasWriteStats bool  `json:"has_write_stats"`
	Transactions  int64 `json:"transactions,omitempty"`
	Batches       int64 `json:"batches,omitempty"`
	// PostgreSQL counters over the whole round (store opened to store
	// closed: warm-up and measured cycles).
	ServerCycles int64 `json:"server_cycles,omitempty"`
	XactCommit   int64 `json:"xact_commit,omitempty"`
	WriteTx      int64 `json:"write_tx,omitempty"`
	WALSyncs     int64 `json:"wal_syncs,omitempty"`
	WALBytes     int64 `json:"wal_bytes,omitempty"`
	// PostgreSQL, measured phase, as the store's pgx tracer saw them.
	Statements int64 `json:"statements,omitempty"`
	RoundTrips int64 `json:"round_trips,omitempty"`
	// Process CPU and heap objects, measured phase.
	CPU       time.Duration `json:"cpu_ns"`
	UserCPU   time.Duration `json:"user_cpu_ns"`
	SysCPU    time.Duration `json:"sys_cpu_ns"`
	ServerCPU time.Duration `json:"server_cpu_ns,omitempty"`
	HasSrvCPU bool          `json:"has_server_cpu"`
	Mallocs   uint64        `json:"mallocs"`
	ToolRuns  int64         `json:"tool_runs"`
	Early     int           `json:"tool_before_answer_returned"`
	Dropped   int64         `json:"events_dropped"`
	latencies
}

// latencies: from host.Answer returning to the tool starting, and of the
// whole cycle.
type latencies struct {
	AnswerToToolP50 time.Duration `json:"answer_to_tool_p50_ns"`
	AnswerToToolP99 time.Duration `json:"answer_to_tool_p99_ns"`
	CycleP50        time.Duration `json:"cycle_p50_ns"`
	CycleP99        time.Duration `json:"cycle_p99_ns"`
}

type roundConfig struct {
	loops, n, warmup int
	d                time.Duration
	conns            int
	wrap             bool
	prompt           string
	cpuProfile       string
	memProfile       string
	stored           int
}

func runCycleRound(ctx context.Context, b *backend, rc roundConfig) (*cycleRound, error) {
	pgBefore, err := b.counters(ctx)
	if err != nil {
		return nil, err
	}
	raw, err := b.openStore(ctx, rc.conns)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", b.label, err)
	}
	store := raw
	var cs *countingStore
	if rc.wrap {
		cs = newCountingStore(raw)
		store = cs
	}
	ch, err := newCycleHost(ctx, store)
	if err != nil {
		raw.Close()
		return nil, err
	}
	closed := false
	closeAll := func() {
		if !closed {
			closed = true
			ch.shutdown()
			raw.Close()
		}
	}
	defer closeAll()
	tag := "cyc-" + randomHex(4)
	if err := storeQuestions(ctx, raw, tag, rc.stored); err != nil {
		return nil, err
	}
	if _, err := ch.loops(ctx, rc.loops, rc.warmup, 0, tag+"w", rc.prompt); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	if err := ch.waitQuiet(ctx); err != nil {
		return nil, err
	}
	var countsBefore map[string]int64
	if cs != nil {
		countsBefore = cs.snapshot()
	}
	txBefore, batchesBefore, hasWS := writeStats(raw)
	runsBefore := ch.runs.Load()
	var stmts0, trips0 int64
	if b.trace != nil {
		stmts0, trips0 = b.trace.counts()
	}
	srvBefore := b.serverCPU(ctx)
	runtime.GC()
	if rc.memProfile != "" {
		if err := writeHeapProfile(rc.memProfile + ".base"); err != nil {
			return nil, err
		}
	}
	var samples []sample
	sec, err := measureSection(rc.cpuProfile, func() (err error) {
		samples, err = ch.loops(ctx, rc.loops, rc.n, rc.d, tag, rc.prompt)
		return err
	}, func() error { return ch.waitQuiet(ctx) })
	var stmts1, trips1 int64
	if b.trace != nil {
		stmts1, trips1 = b.trace.counts()
	}
	if err != nil {
		return nil, err
	}
	if rc.memProfile != "" {
		if err := writeHeapProfile(rc.memProfile); err != nil {
			return nil, err
		}
	}
	r := &cycleRound{Cycles: len(samples), Warmup: rc.warmup, Seconds: sec.elapsed.Seconds(), PerSecond: float64(len(samples)) / sec.elapsed.Seconds(),
		CPU: sec.user + sec.sys, UserCPU: sec.user, SysCPU: sec.sys, Mallocs: sec.mallocs, ToolRuns: ch.runs.Load() - runsBefore, Dropped: ch.h.Dropped(),
		Statements: stmts1 - stmts0, RoundTrips: trips1 - trips0}
	if d, ok := cpuDelta(srvBefore, b.serverCPU(ctx)); ok {
		r.ServerCPU, r.HasSrvCPU = d, true
	}
	if cs != nil {
		r.countCalls(countsBefore, cs.snapshot())
	}
	if tx, batches, ok := writeStats(raw); ok && hasWS {
		r.HasWriteStats, r.Transactions, r.Batches = true, tx-txBefore, batches-batchesBefore
	}
	r.setLatencies(samples)
	closeAll()
	if b.kind == "postgres" {
		b.waitSessionsGone(ctx)
		pgAfter, err := b.counters(ctx)
		if err != nil {
			return nil, err
		}
		r.ServerCycles = int64(rc.warmup + len(samples))
		r.XactCommit = pgAfter.XactCommit - pgBefore.XactCommit
		r.WriteTx = pgAfter.NextXID - pgBefore.NextXID
		r.WALSyncs = pgAfter.WALSync - pgBefore.WALSync
		r.WALBytes = pgAfter.WALLSN - pgBefore.WALLSN
	}
	return r, nil
}

// measureSection runs run, then quiet, under a CPU profile written to
// cpuProfile (if named), and measures them: the wall time of run alone,
// the process's CPU time and its allocations through both.
func measureSection(cpuProfile string, run, quiet func() error) (section, error) {
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return section{}, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return section{}, err
		}
		defer f.Close()
	}
	m0 := mallocs()
	user0, sys0 := cpuTime()
	start := time.Now()
	err := run()
	el := time.Since(start)
	if err == nil {
		err = quiet()
	}
	user1, sys1 := cpuTime()
	m1 := mallocs()
	if cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	return section{elapsed: el, user: user1 - user0, sys: sys1 - sys0, mallocs: m1 - m0}, err
}

// section is what measureSection measured.
type section struct {
	elapsed, user, sys time.Duration
	mallocs            uint64
}

// countCalls sets the store calls made between two snapshots of the
// counting store, by method, and the writes and reads among them.
func (r *cycleRound) countCalls(before, after map[string]int64) {
	r.ByMethod = map[string]int64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			r.ByMethod[k] = d
			if writeMethods[k] {
				r.Writes += d
			} else {
				r.Reads += d
			}
		}
	}
}

// setLatencies sets the round's latencies from its cycles.
func (r *cycleRound) setLatencies(samples []sample) {
	var a2t, cyc []time.Duration
	for _, s := range samples {
		a2t = append(a2t, s.answerToTool)
		cyc = append(cyc, s.cycle)
		if s.early {
			r.Early++
		}
	}
	r.AnswerToToolP50, r.AnswerToToolP99 = pct(a2t, 50), pct(a2t, 99)
	r.CycleP50, r.CycleP99 = pct(cyc, 50), pct(cyc, 99)
}

// writeHeapProfile writes the allocation profile to path, after a GC:
// the profile is as of the last one, and would miss what was allocated
// since.
func writeHeapProfile(path string) error {
	runtime.GC()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.Lookup("allocs").WriteTo(f, 0)
}

// cyclePrompt is the prompt of every cycle: one "$ " line that
// scripted.Demo turns into a bash call whose arguments are about
// argBytes long.
func cyclePrompt(argBytes int) string {
	const overhead = len(`{"cmd":""}`)
	n := max(argBytes-overhead, 8)
	var sb strings.Builder
	sb.WriteString("printf '%s\\n' ")
	for sb.Len() < n {
		sb.WriteString("abcdefghijklmnopqrstuvwxyz0123456789")
	}
	return "$ " + sb.String()[:n]
}

// storeQuestions stores n pending questions, each on a thread of its own
// that no run drives, a third with a deadline a day away: what the
// deadline loop of a host lists past on every new question.
func storeQuestions(ctx context.Context, store checkpoint.Store, tag string, n int) error {
	now := time.Now()
	for i := range n {
		q := &checkpoint.Question{ThreadID: fmt.Sprintf("%s-stored-%d", tag, i), ID: "q", Kind: hitl.KindApprove, Tool: "bash",
			Payload: json.RawMessage(`{}`), CreatedAt: now}
		if i%3 == 0 {
			q.Deadline = now.Add(24*time.Hour + time.Duration(i)*time.Millisecond)
		}
		if _, _, err := store.CreateQuestion(ctx, q); err != nil {
			return fmt.Errorf("storing question %d of %d: %w", i+1, n, err)
		}
	}
	return nil
}
