//go:build unix

package mcpgate_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/checkpoint/sqlite"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/internal/mcptest"
	"github.com/tollgate-ai/tollgate/mcpgate"
	"github.com/tollgate-ai/tollgate/policy"
)

// The figures are in bench/README.md ("MCP gateway"); each is read beside
// BenchmarkDirect's from the same run, never on its own. Beside ns/op and
// allocs, each reports the process's CPU time per call (all threads: the
// servers' and the garbage collector's work count), and the gateway's the
// store's commits per call.

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measure runs call b.N times; store, if not nil, counts the commits.
func measure(b *testing.B, store *commits, call func()) {
	call() // warm
	if store != nil {
		store.n.Store(0)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	for range b.N {
		call()
	}
	b.StopTimer()
	b.ReportMetric(float64((processCPU()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
	if store != nil {
		b.ReportMetric(float64(store.n.Load())/float64(b.N), "commits/op")
	}
}

var echoArgs = map[string]any{"text": "hi"}

func mustCall(b *testing.B, cs *mcp.ClientSession, tool string, args any) {
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil || res.IsError {
		b.Fatalf("calling %s: %v %v", tool, err, res)
	}
}

// BenchmarkDirect is the raw limit: an SDK client calling echo on the
// in-process server over an in-memory transport.
func BenchmarkDirect(b *testing.B) {
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := mcptest.NewServer(nil, nil).Connect(ctx, st, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	measure(b, nil, func() { mustCall(b, cs, "echo", echoArgs) })
}

// upstreamURL serves an mcptest server over streamable HTTP. One server
// for every request, as a real one: the handler asks for it on each
// request, and building it (its tools' schemas) would cost more than the
// call.
func upstreamURL(b *testing.B) string {
	srv := mcptest.NewServer(nil, nil)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	b.Cleanup(ts.Close)
	return ts.URL
}

// BenchmarkUpstream is the gateway's own hop: Upstream.Call over
// streamable HTTP to an httptest server.
func BenchmarkUpstream(b *testing.B) {
	u, err := mcpgate.Connect(context.Background(), mcpgate.ServerConfig{Name: "t", URL: upstreamURL(b)}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer u.Close()
	args := json.RawMessage(`{"text":"hi"}`)
	measure(b, nil, func() {
		if res, err := u.Call(context.Background(), "echo", args); err != nil || res.IsError {
			b.Fatal(err, res)
		}
	})
}

// commits counts the store's transactions: every write method is one.
type commits struct {
	checkpoint.Store
	n atomic.Int64
}

func (c *commits) CreateThread(ctx context.Context, t *checkpoint.Thread) error {
	c.n.Add(1)
	return c.Store.CreateThread(ctx, t)
}
func (c *commits) SaveThread(ctx context.Context, t *checkpoint.Thread) error {
	c.n.Add(1)
	return c.Store.SaveThread(ctx, t)
}
func (c *commits) Commit(ctx context.Context, bt *checkpoint.Batch) (*checkpoint.Committed, error) {
	c.n.Add(1)
	return c.Store.Commit(ctx, bt)
}
func (c *commits) PutToolCall(ctx context.Context, tc *checkpoint.ToolCall) error {
	c.n.Add(1)
	return c.Store.PutToolCall(ctx, tc)
}
func (c *commits) CreateQuestion(ctx context.Context, q *checkpoint.Question) (*checkpoint.Question, bool, error) {
	c.n.Add(1)
	return c.Store.CreateQuestion(ctx, q)
}
func (c *commits) ResolveQuestion(ctx context.Context, thread, id string, r checkpoint.Resolution) (*checkpoint.Question, error) {
	c.n.Add(1)
	return c.Store.ResolveQuestion(ctx, thread, id, r)
}
func (c *commits) AppendEvent(ctx context.Context, e *checkpoint.Event) (int64, error) {
	c.n.Add(1)
	return c.Store.AppendEvent(ctx, e)
}

func benchStore(b *testing.B, kind string) checkpoint.Store {
	if kind == "memory" {
		return memory.New()
	}
	s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "gw.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// benchGateway is a started gateway on store (upstream over HTTP) and an
// SDK client connected to it in memory.
func benchGateway(b *testing.B, store checkpoint.Store) (*mcpgate.Gateway, *mcp.ClientSession) {
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	servers, err := mcpgate.ConnectAll(ctx, []mcpgate.ServerConfig{{Name: "t", URL: upstreamURL(b)}}, &mcpgate.Options{KeepResults: true, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { servers.Close() })
	pol, err := policy.Parse("bench.yaml", []byte("version: 1\ndefault: ask\nrules:\n  - {name: reads, tool: mcp__t__echo, action: allow}\n"), nil)
	if err != nil {
		b.Fatal(err)
	}
	g, err := mcpgate.NewGateway(mcpgate.GatewayConfig{Servers: servers, Store: store, Policy: pol.HITL(), Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	if err := g.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = g.Shutdown(context.Background()) })
	ct, st := mcp.NewInMemoryTransports()
	if _, err := g.Server().Connect(ctx, st, nil); err != nil {
		b.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	return g, cs
}

// BenchmarkGatewayAllowed: a client's call of an allowed tool through the
// gateway, to its result (no run: the thread and its claim in one
// commit, the upstream call, the result in a second commit once the
// client has it).
func BenchmarkGatewayAllowed(b *testing.B) {
	for _, kind := range []string{"memory", "sqlite"} {
		b.Run(kind, func(b *testing.B) {
			store := &commits{Store: benchStore(b, kind)}
			_, cs := benchGateway(b, store)
			measure(b, store, func() { mustCall(b, cs, "echo", echoArgs) })
		})
	}
}

// BenchmarkGatewayAsked: a call the policy asks about, answered through
// the host as soon as its question exists: what an approval costs in
// machinery, the person excluded.
func BenchmarkGatewayAsked(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) {
		store := &commits{Store: benchStore(b, "sqlite")}
		g, cs := benchGateway(b, store)
		events, unsub := g.Host().Subscribe(0)
		defer unsub()
		approve := func(q *checkpoint.Question) {
			raw, _ := json.Marshal(hitl.ApproveAnswer{Decision: hitl.DecisionApprove, Digest: q.Digest})
			if _, err := g.Host().Answer(context.Background(), q.ThreadID, q.ID, raw, "bench"); err != nil {
				b.Error(err)
			}
		}
		go func() {
			for ev := range events {
				if ev, ok := ev.(*agent.HitlRequestEvent); ok && ev.Question != nil && ev.Question.Status == checkpoint.QuestionPending {
					approve(ev.Question)
				}
			}
		}()
		args := map[string]any{"path": "/tmp/n", "text": "hello"}
		measure(b, store, func() { mustCall(b, cs, "write_note", args) })
	})
}
