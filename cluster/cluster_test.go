package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/postgres"
	"github.com/tollgate-ai/tollgate/cluster"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/internal/pgtest"
	"github.com/tollgate-ai/tollgate/provider/scripted"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

type cmdArgs struct {
	Cmd string `json:"cmd" jsonschema:"the command"`
}

// world is what the replicas of a test share: the database, the model's
// record of its calls, the tool's record of its runs.
type world struct {
	dsn, schema string

	mu    sync.Mutex
	calls map[string]int // model calls by thread and turn ("t1#1")
	ran   map[string]int // tool runs by command
	// inFlight counts model calls under way by thread; overlaps counts
	// the calls that began while another for the thread was under way.
	inFlight map[string]int
	overlaps int
	// modelDelay, when set, makes each model call take that long.
	modelDelay time.Duration
	// gate, when set, holds every tool run until it is closed or the
	// run's context ends.
	gate chan struct{}
}

func newWorld(t *testing.T) *world {
	dsn := pgtest.Start(t)
	return &world{dsn: dsn, schema: pgtest.Schema(t, dsn), calls: map[string]int{}, ran: map[string]int{}, inFlight: map[string]int{}}
}

// countingModel is the demo model, counting its calls by thread and turn
// (the number of assistant messages before the call).
type countingModel struct{ w *world }

func (m countingModel) Complete(ctx context.Context, req *agent.Request, onText func(string)) (*agent.Message, error) {
	turn := 1
	for _, msg := range req.Messages {
		if msg.Role == agent.RoleAssistant {
			turn++
		}
	}
	thread := ""
	if len(req.Messages) > 0 {
		thread, _, _ = strings.Cut(req.Messages[0].Text, "\n")
	}
	m.w.mu.Lock()
	m.w.calls[fmt.Sprintf("%s#%d", thread, turn)]++
	if m.w.inFlight[thread] > 0 {
		m.w.overlaps++
	}
	m.w.inFlight[thread]++
	delay := m.w.modelDelay
	m.w.mu.Unlock()
	defer func() {
		m.w.mu.Lock()
		m.w.inFlight[thread]--
		m.w.mu.Unlock()
	}()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return scripted.Demo{}.Complete(ctx, req, onText)
}

func (w *world) tool() *agent.Tool {
	return agent.NewTool("bash", "Run a command.", func(ctx context.Context, a cmdArgs) (string, error) {
		w.mu.Lock()
		gate := w.gate
		w.mu.Unlock()
		if gate != nil {
			select {
			case <-gate:
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		w.mu.Lock()
		w.ran[a.Cmd]++
		w.mu.Unlock()
		return "ran " + a.Cmd, nil
	}, nil)
}

// askAll asks a person for every call, with the timeout.
func askAll(timeout time.Duration) hitl.Policy {
	return hitl.Typed(func(ctx context.Context, c *hitl.PolicyContext, a cmdArgs) hitl.ApprovalDecision {
		return hitl.AskUser(hitl.AskOptions{Timeout: timeout})
	})
}

type replica struct {
	store *postgres.Store
	c     *cluster.Cluster
	h     *host.Host
}

// replica starts one replica on the world's database: its own store
// (pool, listener), cluster and host, as another process would have.
func (w *world) replica(t *testing.T, ttl, timeout time.Duration) *replica {
	t.Helper()
	return w.replicaWith(t, cluster.Config{LeaseTTL: ttl, ReconcileEvery: -1}, timeout)
}

func (w *world) replicaWith(t *testing.T, cfg cluster.Config, timeout time.Duration) *replica {
	t.Helper()
	r, err := w.startReplica(t, cfg, timeout)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// startReplica is replicaWith, returning Start's error (the replica then
// let go of).
func (w *world) startReplica(t *testing.T, cfg cluster.Config, timeout time.Duration) (*replica, error) {
	t.Helper()
	ctx := context.Background()
	store, err := postgres.Open(ctx, w.dsn, &postgres.Options{Schema: w.schema})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store = store
	c, err := cluster.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.New(host.Config{Store: store, Coordinator: c, Agent: agent.Config{
		Provider:   countingModel{w},
		Tools:      []*agent.Tool{w.tool()},
		Middleware: []agent.Middleware{hitl.NewApprovalPolicyMiddleware(hitl.NewCheckpointedChannel(store, "", nil), askAll(timeout))},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(ctx); err != nil {
		c.Close()
		store.Close()
		return nil, err
	}
	r := &replica{store: store, c: c, h: h}
	t.Cleanup(func() { r.stop(t) })
	return r, nil
}

func (r *replica) stop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r.h.Shutdown(ctx)
	r.c.Close()
	r.store.Close()
}

func eventually(t *testing.T, what string, d time.Duration, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// deadlinesFired is what the clusters count of the deadlines they fired,
// once it reaches want (or after 10 s): a replica counts a deadline after
// its commit returns, and the run that commit let go on may finish first,
// on either replica (CI at load 20 read 3 of 4). The caller checks the
// count is exactly want.
func deadlinesFired(t *testing.T, want int64, cs ...*cluster.Cluster) int64 {
	t.Helper()
	sum := func() (n int64) {
		for _, c := range cs {
			n += c.Stats().DeadlinesFired
		}
		return n
	}
	for deadline := time.Now().Add(10 * time.Second); sum() < want && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	return sum()
}

func pending(t *testing.T, store checkpoint.Store, thread string, n int) []*checkpoint.Question {
	t.Helper()
	var qs []*checkpoint.Question
	eventually(t, fmt.Sprintf("%d pending questions on %s", n, thread), 15*time.Second, func() (bool, error) {
		var err error
		qs, _, err = store.ListQuestions(context.Background(), checkpoint.QuestionFilter{ThreadID: thread, Status: checkpoint.QuestionPending})
		return len(qs) == n, err
	})
	return qs
}

func idle(t *testing.T, store checkpoint.Store, thread string) *checkpoint.Thread {
	t.Helper()
	var th *checkpoint.Thread
	eventually(t, thread+" to finish", 20*time.Second, func() (bool, error) {
		var err error
		th, err = store.LoadThread(context.Background(), thread)
		return err == nil && th.Status == checkpoint.ThreadIdle, nil
	})
	return th
}

func approve(t *testing.T, r *replica, q *checkpoint.Question) {
	t.Helper()
	a, _ := json.Marshal(map[string]any{"decision": "approve", "digest": q.Digest})
	if _, err := r.h.Answer(context.Background(), q.ThreadID, q.ID, a, "alice"); err != nil {
		t.Fatalf("answering %s on a replica: %v", q.ID, err)
	}
}

// An answer taken by one replica resumes the run that parked on another:
// the answer's commit inserts the job, whichever replica works it.
func TestAnswerOnAnotherReplica(t *testing.T) {
	w := newWorld(t)
	a := w.replica(t, 2*time.Second, time.Hour)
	b := w.replica(t, 2*time.Second, time.Hour)
	if _, _, err := a.h.Prompt(context.Background(), "t1", "t1\n$ echo one", nil); err != nil {
		t.Fatal(err)
	}
	qs := pending(t, a.store, "t1", 1)
	approve(t, b, qs[0])
	idle(t, a.store, "t1")
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ran["echo one"] != 1 {
		t.Errorf("the tool ran %d times, want 1", w.ran["echo one"])
	}
	for k, n := range w.calls {
		if n != 1 {
			t.Errorf("model call %s made %d times", k, n)
		}
	}
	if len(w.calls) != 2 {
		t.Errorf("model calls %v, want turns 1 and 2 of t1", w.calls)
	}
}

// Two answers to the two questions of one turn, given at once on two
// replicas: the run goes on with both, and no turn is run twice.
func TestTwoAnswersAtOnce(t *testing.T) {
	w := newWorld(t)
	a := w.replica(t, 2*time.Second, time.Hour)
	b := w.replica(t, 2*time.Second, time.Hour)
	const threads = 8
	for i := range threads {
		id := fmt.Sprintf("t%d", i)
		if _, _, err := a.h.Prompt(context.Background(), id, id+"\n$ echo "+id+"a\n$ echo "+id+"b", nil); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for i := range threads {
		id := fmt.Sprintf("t%d", i)
		qs := pending(t, a.store, id, 2)
		wg.Add(2)
		go func() { defer wg.Done(); approve(t, a, qs[0]) }()
		go func() { defer wg.Done(); approve(t, b, qs[1]) }()
	}
	wg.Wait()
	for i := range threads {
		idle(t, a.store, fmt.Sprintf("t%d", i))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for cmd, n := range w.ran {
		if n != 1 {
			t.Errorf("%s ran %d times", cmd, n)
		}
	}
	if len(w.ran) != 2*threads {
		t.Errorf("%d tools ran, want %d", len(w.ran), 2*threads)
	}
	for k, n := range w.calls {
		if n != 1 {
			t.Errorf("model call %s made %d times", k, n)
		}
	}
	if len(w.calls) != 2*threads {
		t.Errorf("%d model calls, want %d", len(w.calls), 2*threads)
	}
}

// A deadline fires once, on one of two replicas whose hosts both watch it,
// though no replica's run waits for it.
func TestDeadlineFiresOnce(t *testing.T) {
	w := newWorld(t)
	a := w.replica(t, 2*time.Second, 300*time.Millisecond)
	b := w.replica(t, 2*time.Second, 300*time.Millisecond)
	_ = b
	if _, _, err := a.h.Prompt(context.Background(), "t1", "t1\n$ echo late", nil); err != nil {
		t.Fatal(err)
	}
	th := idle(t, a.store, "t1")
	if !strings.Contains(string(th.Messages), "timed out") {
		t.Errorf("the run's last message does not say the call timed out: %s", th.Messages)
	}
	evs, err := a.store.ListEvents(context.Background(), "t1", 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	resolved := 0
	for _, e := range evs {
		if e.Type == "question_resolved" {
			resolved++
		}
	}
	if resolved != 1 {
		t.Errorf("%d question_resolved events, want 1", resolved)
	}
	qs, _, err := a.store.ListQuestions(context.Background(), checkpoint.QuestionFilter{ThreadID: "t1", Status: checkpoint.QuestionTimedOut})
	if err != nil || len(qs) != 1 {
		t.Fatalf("timed out questions: %v, %v", qs, err)
	}
	t.Logf("the deadline fired %s late", qs[0].ResolvedAt.Sub(qs[0].Deadline))
	if w.ran["echo late"] != 0 {
		t.Errorf("a call that timed out ran")
	}
}

// A replica that stops renewing its leases (frozen, cut off from the
// database) loses its runs to another replica, which goes on under the
// at-most-once rule; and whatever the first one writes after that is
// refused by the fence.
func TestRescueAndFence(t *testing.T) {
	w := newWorld(t)
	w.gate = make(chan struct{})
	const ttl = time.Second
	a := w.replica(t, ttl, time.Hour)
	if _, _, err := a.h.Prompt(context.Background(), "t1", "t1\n$ echo once", nil); err != nil {
		t.Fatal(err)
	}
	q := pending(t, a.store, "t1", 1)[0]
	approve(t, a, q)
	// The tool is running on a (held at the gate): its call is claimed.
	eventually(t, "the call to be claimed", 10*time.Second, func() (bool, error) {
		calls, err := a.store.ListToolCalls(context.Background(), "t1", q.RunID)
		return len(calls) == 1 && calls[0].State == checkpoint.ToolCallExecuting, err
	})
	// a freezes: no more renewals, and nothing of its own stops its run.
	a.c.Close()
	b := w.replica(t, ttl, time.Hour)
	th := idle(t, b.store, "t1")
	if !strings.Contains(string(th.Messages), "interrupted") && !strings.Contains(string(th.Messages), "not run again") {
		t.Logf("thread: %s", th.Messages)
	}
	if got := b.c.Stats().Rescued; got != 1 {
		t.Errorf("b rescued %d runs, want 1", got)
	}
	// a wakes: its tool ends, and its result is refused.
	close(w.gate)
	time.Sleep(500 * time.Millisecond)
	evs, err := b.store.ListEvents(context.Background(), "t1", 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	results := 0
	for _, e := range evs {
		if e.Type == "tool_result" {
			results++
		}
	}
	if results != 1 {
		t.Errorf("%d tool results in the audit log, want 1 (the rescue's)", results)
	}
	after, err := b.store.LoadThread(context.Background(), "t1")
	if err != nil {
		t.Fatal(err)
	}
	if after.Version != th.Version {
		t.Errorf("the thread moved on after the rescue finished it (version %d → %d): the frozen replica wrote", th.Version, after.Version)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.calls["t1#2"] != 1 {
		t.Errorf("turn 2 of t1 called the model %d times, want 1", w.calls["t1#2"])
	}
}

// The fence: a write made under a lease that was taken over is refused,
// all of it.
func TestFence(t *testing.T) {
	w := newWorld(t)
	a := w.replica(t, time.Second, time.Hour)
	b := w.replica(t, time.Second, time.Hour)
	ctx := context.Background()
	if err := a.store.CreateThread(ctx, &checkpoint.Thread{ID: "t1", Status: checkpoint.ThreadIdle}); err != nil {
		t.Fatal(err)
	}
	la, err := a.c.Acquire(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.c.Acquire(ctx, "t1"); !errors.Is(err, host.ErrHeldElsewhere) {
		t.Fatalf("a second replica took a held lease: %v", err)
	}
	fenced := la.Context(ctx)
	write := func(ctx context.Context, version int64) error {
		_, err := a.store.Commit(ctx, &checkpoint.Batch{Thread: &checkpoint.ThreadWrite{ID: "t1", Version: version, Status: checkpoint.ThreadIdle,
			Append: []json.RawMessage{json.RawMessage(`{"role":"user","text":"x"}`)}}})
		return err
	}
	if err := write(fenced, 1); err != nil {
		t.Fatalf("a write under a held lease: %v", err)
	}
	// The lease expires (a's renewals stopped) and b takes it.
	a.c.Close()
	if _, err := a.store.Pool().Exec(ctx, `UPDATE leases SET expires_at = now() - interval '1 second' WHERE thread_id = 't1'`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.c.Acquire(ctx, "t1"); err != nil {
		t.Fatalf("taking an expired lease: %v", err)
	}
	if err := write(fenced, 2); !errors.Is(err, postgres.ErrFenced) {
		t.Fatalf("a write under a lease taken over: %v, want ErrFenced", err)
	}
	th, err := a.store.LoadThread(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if th.Version != 2 {
		t.Errorf("thread at version %d after the refused write, want 2", th.Version)
	}
	if err := write(ctx, 2); err != nil {
		t.Errorf("an unfenced write: %v", err)
	}
}

// The replica's metrics: its leases and River's queue, read from the
// database at each scrape. A question leaves no job behind: its deadline
// is watched by the hosts (a deadline job used to wait, scheduled, until
// its time, answered or not: 170 of them after one run of the replicas
// test, issue 22 item 9).
func TestMetrics(t *testing.T) {
	w := newWorld(t)
	a := w.replica(t, 2*time.Second, time.Hour)
	if _, _, err := a.h.Prompt(context.Background(), "t1", "t1\n$ echo one", nil); err != nil {
		t.Fatal(err)
	}
	q := pending(t, a.store, "t1", 1)[0]
	reg := prometheus.NewRegistry()
	reg.MustRegister(a.c.Collector())
	gather := func() map[string]float64 {
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				name := f.GetName()
				for _, l := range m.GetLabel() {
					name += "{" + l.GetValue() + "}"
				}
				got[name] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
		return got
	}
	got := gather()
	if got["tollgate_cluster_jobs_scrape_ok"] != 1 {
		t.Errorf("the job counts could not be read: %v", got)
	}
	if got["tollgate_cluster_jobs{scheduled}"] != 0 {
		t.Errorf("scheduled jobs = %v with one question pending, want 0 (its deadline needs no job): %v", got["tollgate_cluster_jobs{scheduled}"], got)
	}
	if got["tollgate_cluster_leases_acquired_total"] != 1 {
		t.Errorf("leases acquired = %v, want 1", got["tollgate_cluster_leases_acquired_total"])
	}
	approve(t, a, q)
	idle(t, a.store, "t1")
	eventually(t, "the answer's job to complete", 10*time.Second, func() (bool, error) {
		got = gather()
		return got["tollgate_cluster_jobs{available}"]+got["tollgate_cluster_jobs{running}"] == 0, nil
	})
	if n := got["tollgate_cluster_jobs{scheduled}"] + got["tollgate_cluster_jobs{retryable}"]; n != 0 {
		t.Errorf("%v jobs wait after the run ended, want none: %v", n, got)
	}
}

// A replica that cannot renew its leases stops its runs (the tool is
// cancelled) before the database would let another replica take them.
func TestRenewalsFailingStopTheRuns(t *testing.T) {
	w := newWorld(t)
	w.gate = make(chan struct{})
	defer close(w.gate)
	var cut atomic.Bool
	cluster.FailRenewals(&cut)
	defer cut.Store(false)
	const ttl = 2 * time.Second
	a := w.replica(t, ttl, time.Hour)
	if _, _, err := a.h.Prompt(context.Background(), "t1", "t1\n$ echo once", nil); err != nil {
		t.Fatal(err)
	}
	q := pending(t, a.store, "t1", 1)[0]
	approve(t, a, q)
	var expires time.Time
	eventually(t, "the run to take its lease", 10*time.Second, func() (bool, error) {
		err := a.store.Pool().QueryRow(context.Background(), `SELECT expires_at FROM leases WHERE thread_id = 't1'`).Scan(&expires)
		return err == nil && a.c.Stats().Acquired >= 2, nil
	})
	cut.Store(true)
	eventually(t, "the run to stop", 2*ttl, func() (bool, error) { return a.h.Stats().Active == 0, nil })
	var dbNow, lastExpiry time.Time
	if err := a.store.Pool().QueryRow(context.Background(), `SELECT now(), expires_at FROM leases WHERE thread_id = 't1'`).Scan(&dbNow, &lastExpiry); err != nil {
		t.Fatal(err)
	}
	if !dbNow.Before(lastExpiry) {
		t.Errorf("the run stopped at %s, after its lease expired at %s", dbNow, lastExpiry)
	}
	if a.c.Stats().Lost != 1 {
		t.Errorf("leases lost = %d, want 1", a.c.Stats().Lost)
	}
	w.mu.Lock()
	ran := w.ran["echo once"]
	w.mu.Unlock()
	if ran != 0 {
		t.Errorf("the tool ran to its end though its lease could not be renewed")
	}
}

// Many threads, each with two questions in its turn, answered at once on
// three replicas picked at random, with a slow model: no thread's model is
// ever called by two replicas at once, no turn twice, no tool twice.
func TestNoTwoDrivers(t *testing.T) {
	w := newWorld(t)
	w.modelDelay = 20 * time.Millisecond
	rs := []*replica{w.replica(t, 2*time.Second, time.Hour), w.replica(t, 2*time.Second, time.Hour), w.replica(t, 2*time.Second, time.Hour)}
	const threads = 30
	for i := range threads {
		id := fmt.Sprintf("t%d", i)
		if _, _, err := rs[i%3].h.Prompt(context.Background(), id, id+"\n$ echo "+id+"a\n$ echo "+id+"b", nil); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for i := range threads {
		id := fmt.Sprintf("t%d", i)
		for j, q := range pending(t, rs[0].store, id, 2) {
			wg.Add(1)
			go func() { defer wg.Done(); approve(t, rs[(i+j+1)%3], q) }()
		}
	}
	wg.Wait()
	for i := range threads {
		idle(t, rs[0].store, fmt.Sprintf("t%d", i))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.overlaps != 0 {
		t.Errorf("%d model calls began while another replica's call for the thread was under way", w.overlaps)
	}
	for k, n := range w.calls {
		if n != 1 {
			t.Errorf("model call %s made %d times", k, n)
		}
	}
	if len(w.calls) != 2*threads {
		t.Errorf("%d model calls, want %d", len(w.calls), 2*threads)
	}
	for cmd, n := range w.ran {
		if n != 1 {
			t.Errorf("%s ran %d times", cmd, n)
		}
	}
	if len(w.ran) != 2*threads {
		t.Errorf("%d tools ran, want %d", len(w.ran), 2*threads)
	}
	var held int64
	for _, r := range rs {
		held += r.c.Stats().HeldElsewhere
	}
	t.Logf("%d threads, 3 replicas: %d jobs found their thread driven elsewhere and waited", threads, held)
}

// Parked runs hold nothing on any replica: no lease, no goroutine, no run
// in the host.
func TestParkedRunsHoldNothing(t *testing.T) {
	w := newWorld(t)
	a := w.replica(t, 2*time.Second, time.Hour)
	b := w.replica(t, 2*time.Second, time.Hour)
	time.Sleep(300 * time.Millisecond) // River's clients settle
	before := runGoroutines()
	const n = 40
	for i := range n {
		id := fmt.Sprintf("p%d", i)
		if _, _, err := a.h.Prompt(context.Background(), id, id+"\n$ echo "+id, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		pending(t, b.store, fmt.Sprintf("p%d", i), 1)
	}
	eventually(t, "every run to park", 10*time.Second, func() (bool, error) {
		var leases int
		err := a.store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM leases`).Scan(&leases)
		return err == nil && leases == 0 && a.h.Stats().Active == 0, err
	})
	// The total count is no measure: the pools open connections under the
	// burst, and River's producers come and go (CI saw 8 more after 40
	// parks). What a parked run would hold is a goroutine inside the run
	// loop; those must all be gone, with a little time for the last runs'
	// goroutines to return after they released their leases.
	deadline := time.Now().Add(5 * time.Second)
	for {
		after := runGoroutines()
		if after <= before {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines in the run loop with %d parked runs, %d before: parked runs hold goroutines", after, n, before)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// runGoroutines counts the goroutines whose stacks are inside the run
// loop or the approval middleware: a parked run that held one would show
// there, whatever the pools and River do with their own.
func runGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "tollgate/agent.") || strings.Contains(g, "tollgate/hitl.") || strings.Contains(g, "tollgate/interrupt.") {
			count++
		}
	}
	return count
}

// Questions asked and answered with no replica's hook (by a program that
// is not one, or before the store ran in cluster mode): a deadline
// already passed fires at start-up, one to come at its time (the hosts
// watch the store's deadlines), and the start-up reconcile resumes a run
// answered without its job.
func TestReconcileFindsWhatNoJobCovers(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	plain, err := postgres.Open(ctx, w.dsn, &postgres.Options{Schema: w.schema})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	// Three parked runs, made by a host with no coordinator.
	timeouts := map[string]time.Duration{"echo t0": 1500 * time.Millisecond, "echo t1": 4 * time.Second, "echo t2": time.Hour}
	policy := hitl.Typed(func(ctx context.Context, c *hitl.PolicyContext, a cmdArgs) hitl.ApprovalDecision {
		return hitl.AskUser(hitl.AskOptions{Timeout: timeouts[a.Cmd]})
	})
	h, err := host.New(host.Config{Store: plain, Agent: agent.Config{
		Provider: countingModel{w}, Tools: []*agent.Tool{w.tool()},
		Middleware: []agent.Middleware{hitl.NewApprovalPolicyMiddleware(hitl.NewCheckpointedChannel(plain, "", nil), policy)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"t0", "t1", "t2"} {
		if _, _, err := h.Prompt(ctx, id, id+"\n$ echo "+id, nil); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the runs to park", 5*time.Second, func() (bool, error) { return h.Stats().Parked == 3, nil })
	h.Shutdown(ctx)
	// t2's question is answered by a program that inserts no job.
	q := pending(t, plain, "t2", 1)[0]
	a, _ := json.Marshal(map[string]any{"decision": "approve", "digest": q.Digest})
	if _, err := hitl.NewCheckpointedChannel(plain, "", nil).AnswerWith(ctx, "t2", q.ID, a, &hitl.AnswerOptions{By: "bob"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1600 * time.Millisecond) // t0's deadline passes with no host
	r := w.replicaWith(t, cluster.Config{LeaseTTL: 2 * time.Second, ReconcileEvery: time.Hour}, time.Hour)
	for _, id := range []string{"t0", "t1", "t2"} {
		idle(t, r.store, id)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ran["echo t2"] != 1 || w.ran["echo t0"] != 0 || w.ran["echo t1"] != 0 {
		t.Errorf("tools ran %v, want only echo t2 once", w.ran)
	}
	if got := deadlinesFired(t, 2, r.c); got != 2 {
		t.Errorf("%d deadlines fired, want 2 (t0 at start-up, t1 at its time)", got)
	}
}
