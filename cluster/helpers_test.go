package cluster_test

// Helpers of the review tests (review_*_test.go): replicas whose store can
// be held at chosen points, and replicas that are never started (a
// command line's).

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/postgres"
	"github.com/tollgate-ai/tollgate/cluster"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/host"
)

// holdStore is a store whose calls can be held by the test.
type holdStore struct {
	checkpoint.Store
	// beforeCommit, when set, runs before each Commit.
	beforeCommit func(ctx context.Context, b *checkpoint.Batch)
	// afterCommit, when set, runs after each Commit.
	afterCommit func(ctx context.Context, b *checkpoint.Batch, err error)
	// afterListToolCalls, when set, runs after each ListToolCalls.
	afterListToolCalls func(ctx context.Context)
	// beforeLoadThread, when set, runs before each LoadThread.
	beforeLoadThread func(ctx context.Context)
}

func (s *holdStore) Commit(ctx context.Context, b *checkpoint.Batch) (*checkpoint.Committed, error) {
	if s.beforeCommit != nil {
		s.beforeCommit(ctx, b)
	}
	c, err := s.Store.Commit(ctx, b)
	if s.afterCommit != nil {
		s.afterCommit(ctx, b, err)
	}
	return c, err
}

func (s *holdStore) ListToolCalls(ctx context.Context, threadID, runID string, callIDs ...string) ([]*checkpoint.ToolCall, error) {
	r, err := s.Store.ListToolCalls(ctx, threadID, runID, callIDs...)
	if s.afterListToolCalls != nil {
		s.afterListToolCalls(ctx)
	}
	return r, err
}

func (s *holdStore) LoadThread(ctx context.Context, id string) (*checkpoint.Thread, error) {
	if s.beforeLoadThread != nil {
		s.beforeLoadThread(ctx)
	}
	return s.Store.LoadThread(ctx, id)
}

type reviewOpts struct {
	ttl      time.Duration
	timeout  time.Duration
	provider agent.Provider
	// hold wraps the host's store (the cluster keeps the real one).
	hold *holdStore
	// noStart: a host and cluster that are never started (a command
	// line that answers or aborts).
	noStart bool
	// retries and retryAfter are cluster.Config's.
	retries    int
	retryAfter time.Duration
}

type reviewReplica struct {
	pg *postgres.Store
	c  *cluster.Cluster
	h  *host.Host
}

func (w *world) reviewReplica(t *testing.T, o reviewOpts) *reviewReplica {
	t.Helper()
	ctx := context.Background()
	pg, err := postgres.Open(ctx, w.dsn, &postgres.Options{Schema: w.schema})
	if err != nil {
		t.Fatal(err)
	}
	if o.ttl == 0 {
		o.ttl = 2 * time.Second
	}
	if o.timeout == 0 {
		o.timeout = time.Hour
	}
	c, err := cluster.New(ctx, cluster.Config{Store: pg, LeaseTTL: o.ttl, ReconcileEvery: -1, Retries: o.retries, RetryAfter: o.retryAfter})
	if err != nil {
		t.Fatal(err)
	}
	var store checkpoint.Store = pg
	if o.hold != nil {
		o.hold.Store = pg
		store = o.hold
	}
	prov := o.provider
	if prov == nil {
		prov = countingModel{w}
	}
	h, err := host.New(host.Config{Store: store, Coordinator: c, Agent: agent.Config{
		Provider:   prov,
		Tools:      []*agent.Tool{w.tool()},
		Middleware: []agent.Middleware{hitl.NewApprovalPolicyMiddleware(hitl.NewCheckpointedChannel(store, "", nil), askAll(o.timeout))},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !o.noStart {
		if err := h.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	r := &reviewReplica{pg: pg, c: c, h: h}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if !o.noStart {
			r.h.Shutdown(ctx)
			r.c.Close()
		}
		r.pg.Close()
	})
	return r
}

func leaseOwner(t *testing.T, pg *postgres.Store, thread string) string {
	t.Helper()
	var owner string
	err := pg.Pool().QueryRow(context.Background(), `SELECT coalesce((SELECT owner FROM leases WHERE thread_id = $1), '')`, thread).Scan(&owner)
	if err != nil {
		t.Fatal(err)
	}
	return owner
}
