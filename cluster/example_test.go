package cluster_test

import (
	"context"
	"log"
	"os"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint/postgres"
	"github.com/tollgate-ai/tollgate/cluster"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/provider/scripted"
	"github.com/tollgate-ai/tollgate/tools/bash"
)

// A replica: every process built this way on one database shares its
// threads. Run as many as you like; any of them takes any answer. (It
// needs a PostgreSQL server, so it is not run by go test; the package's
// tests run replicas like it.)
func Example() {
	ctx := context.Background()
	store, err := postgres.Open(ctx, os.Getenv("DATABASE_URL"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	c, err := cluster.New(ctx, cluster.Config{Store: store, LeaseTTL: 15 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close() // after the host's Shutdown: leases are renewed until then
	ask := func(ctx context.Context, pc *hitl.PolicyContext) hitl.ApprovalDecision {
		return hitl.AskUser(hitl.AskOptions{Timeout: time.Hour})
	}
	h, err := host.New(host.Config{Store: store, Coordinator: c, Agent: agent.Config{
		Provider:   scripted.Demo{},
		Tools:      []*agent.Tool{bash.New(&bash.Options{Dir: "."})},
		Middleware: []agent.Middleware{hitl.NewApprovalPolicyMiddleware(hitl.NewCheckpointedChannel(store, "", nil), ask)},
	}})
	if err != nil {
		log.Fatal(err)
	}
	if err := h.Start(ctx); err != nil { // starts c: River's jobs, lease renewal, rescue
		log.Fatal(err)
	}
	// ... serve h (package server), or call h.Prompt and h.Answer ...
	if _, err := h.Shutdown(ctx); err != nil {
		log.Fatal(err)
	}
}
