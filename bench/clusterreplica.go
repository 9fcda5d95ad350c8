//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/postgres"
	"github.com/tollgate-ai/tollgate/cluster"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/provider/scripted"
)

// clusterWorld is what the in-process replicas of one measurement share:
// the waiters of the cycles in progress, by thread, and the record of the
// tool's runs and of what the replicas logged.
type clusterWorld struct {
	waiters sync.Map // thread id -> *clusterWaiter
	runs    atomic.Int64
	log     *warnCounter
	// statements: the server has pg_stat_statements (cycles rounds read
	// it).
	statements bool
}

// clusterWaiter is what one cycle waits for: its question (from the
// replica that drives the run when it asks), the run's end (from the
// replica that drives it then) and the tool's start (from the replica
// that runs it).
type clusterWaiter struct {
	question chan *checkpoint.Question
	finished chan *agent.RunFinishedEvent
	tool     chan toolStart
}

type toolStart struct {
	at      time.Time
	replica int
}

func newClusterWorld() *clusterWorld { return &clusterWorld{log: &warnCounter{}} }

func (w *clusterWorld) wait(thread string) *clusterWaiter {
	cw := &clusterWaiter{question: make(chan *checkpoint.Question, 1), finished: make(chan *agent.RunFinishedEvent, 1), tool: make(chan toolStart, 2)}
	w.waiters.Store(thread, cw)
	return cw
}

func (w *clusterWorld) done(thread string) { w.waiters.Delete(thread) }

func (w *clusterWorld) toolRan(ctx context.Context, replica int, at time.Time) {
	w.runs.Add(1)
	c := agent.ToolCallFrom(ctx)
	if c == nil {
		return
	}
	if v, ok := w.waiters.Load(c.ThreadID); ok {
		select {
		case v.(*clusterWaiter).tool <- toolStart{at: at, replica: replica}:
		default:
		}
	}
}

// warnCounter is the replicas' logger: it counts what they log at Warn
// and above (River's messages included) and keeps the first few, for the
// report; the rest is dropped.
type warnCounter struct {
	mu    sync.Mutex
	n     int
	first []string
}

func (c *warnCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (c *warnCounter) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	if len(c.first) < 5 {
		s := r.Level.String() + " " + r.Message
		r.Attrs(func(a slog.Attr) bool { s += " " + a.String(); return true })
		c.first = append(c.first, s)
	}
	return nil
}

func (c *warnCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *warnCounter) WithGroup(string) slog.Handler      { return c }

func (c *warnCounter) snapshot() (int, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n, append([]string(nil), c.first...)
}

// askWithTimeout asks a person about every bash call, with a deadline,
// as tollgate serve's policies do (every replica's host then watches it).
func askWithTimeout(timeout time.Duration) hitl.Policy {
	return hitl.ByTool(map[string]hitl.Policy{
		"bash": func(ctx context.Context, c *hitl.PolicyContext) hitl.ApprovalDecision {
			return hitl.AskUser(hitl.AskOptions{Timeout: timeout, Details: map[string]any{"matched_rule": "bench-ask-bash", "impact": "runs a command"}})
		},
	}, nil)
}

// inReplica is one replica in this process, built as another process
// would build it (cluster/cluster_test.go): its own store (pool and
// listener), cluster and host.
type inReplica struct {
	n       int
	store   *postgres.Store
	c       *cluster.Cluster // nil: a host alone
	h       *host.Host
	started bool
	events  chan struct{} // closed when the event dispatch ends
}

// replicaConfig says how to build an in-process replica.
type replicaConfig struct {
	dsn, schema string
	conns       int
	timeout     time.Duration
	// start: the host is started (it works jobs); else it only takes
	// answers.
	start bool
	// alone: a host without a cluster, the single-process host of
	// before cluster mode (the reference for what the cluster costs).
	alone bool
}

// newInReplica builds replica n on the schema. A replica that is not
// started takes answers (its store's commits insert their jobs) and
// works no jobs.
func newInReplica(ctx context.Context, w *clusterWorld, n int, rc replicaConfig) (*inReplica, error) {
	store, err := postgres.Open(ctx, withParam(rc.dsn, "application_name", appName+"-replica"), &postgres.Options{Schema: rc.schema, MaxConns: int32(rc.conns)})
	if err != nil {
		return nil, err
	}
	logger := slog.New(w.log)
	var c *cluster.Cluster
	var coord host.Coordinator
	if !rc.alone {
		if c, err = cluster.New(ctx, cluster.Config{Store: store, Logger: logger}); err != nil {
			store.Close()
			return nil, err
		}
		coord = c
	}
	bash := agent.NewTool("bash", "Run a command.", func(ctx context.Context, a shellArgs) (string, error) {
		w.toolRan(ctx, n, time.Now())
		return "ok", nil
	}, nil)
	h, err := host.New(host.Config{Store: store, Coordinator: coord, Logger: logger, Agent: agent.Config{
		Provider: scripted.Demo{}, // "$ cmd" becomes one bash call
		Tools:    []*agent.Tool{bash},
		Logger:   logger,
		Middleware: []agent.Middleware{hitl.NewApprovalPolicyMiddleware(
			hitl.NewCheckpointedChannel(store, "", nil), askWithTimeout(rc.timeout))},
	}})
	if err != nil {
		if c != nil {
			c.Close()
		}
		store.Close()
		return nil, err
	}
	r := &inReplica{n: n, store: store, c: c, h: h, events: make(chan struct{})}
	if !rc.start {
		close(r.events)
		return r, nil
	}
	events, _ := h.Subscribe(1 << 16)
	if err := h.Start(ctx); err != nil {
		if c != nil {
			c.Close()
		}
		store.Close()
		return nil, err
	}
	r.started = true
	go func() {
		defer close(r.events)
		for e := range events {
			switch ev := e.(type) {
			case *agent.HitlRequestEvent:
				if v, ok := w.waiters.Load(ev.Meta().ThreadID); ok {
					select {
					case v.(*clusterWaiter).question <- ev.Question:
					default:
					}
				}
			case *agent.RunFinishedEvent:
				if v, ok := w.waiters.Load(ev.Meta().ThreadID); ok {
					select {
					case v.(*clusterWaiter).finished <- ev:
					default:
					}
				}
			}
		}
	}()
	return r, nil
}

func (r *inReplica) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if r.started {
		r.h.Shutdown(ctx)
	}
	<-r.events
	if r.c != nil {
		r.c.Close()
	}
	r.store.Close()
}

// quiet reports whether the replica drives no run.
func (r *inReplica) quiet() bool {
	s := r.h.Stats()
	return s.Active == 0 && s.Queued == 0
}

// waitQuiet waits until no replica drives a run: the runs parked or
// ended, and their leases were let go.
func waitQuiet(ctx context.Context, rs ...*inReplica) error {
	deadline := time.Now().Add(waitLimit)
	for {
		all := true
		for _, r := range rs {
			all = all && (!r.started || r.quiet())
		}
		if all {
			return nil
		}
		if time.Now().After(deadline) {
			var s []string
			for _, r := range rs {
				st := r.h.Stats()
				s = append(s, fmt.Sprintf("replica %d: %d active, %d queued", r.n, st.Active, st.Queued))
			}
			return fmt.Errorf("the replicas still drive runs after %s: %v", waitLimit, s)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(500 * time.Microsecond)
	}
}

func approveAnswer(q *checkpoint.Question) json.RawMessage {
	a, _ := json.Marshal(hitl.ApproveAnswer{Decision: hitl.DecisionApprove, Digest: q.Digest})
	return a
}

// describeThread says where a thread that timed out stands.
func describeThread(ctx context.Context, store checkpoint.Store, thread string, rs ...*inReplica) string {
	s := ""
	if th, err := store.LoadThread(ctx, thread); err != nil {
		s = "thread: " + err.Error()
	} else {
		s = fmt.Sprintf("thread %s, version %d", th.Status, th.Version)
		if qs, _, err := store.ListQuestions(ctx, checkpoint.QuestionFilter{ThreadID: thread}); err == nil {
			for _, q := range qs {
				s += fmt.Sprintf("; question %s %s", q.ID, q.Status)
			}
		}
	}
	for _, r := range rs {
		st := r.h.Stats()
		s += fmt.Sprintf("; replica %d: %d active, %d queued, %d parked, %d failed", r.n, st.Active, st.Queued, st.Parked, st.Failed)
		if r.c != nil {
			s += fmt.Sprintf(", cluster %+v", r.c.Stats())
		}
	}
	return s
}
