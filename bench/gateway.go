//go:build linux

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/checkpoint/sqlite"
	"github.com/tollgate-ai/tollgate/internal/mcptest"
	"github.com/tollgate-ai/tollgate/mcpgate"
	"github.com/tollgate-ai/tollgate/policy"
)

const gatewayUsage = `usage: go run ./bench gateway [-n N] [-rounds R] [-c 1,10] [-store sqlite|memory] [-cpuprofile FILE]

What the MCP gateway adds to a call its policy allows, beside the raw
limit measured in the same run: an MCP client (the official Go SDK, one
session per concurrent caller) calls the echo tool of an MCP server over
streamable HTTP on loopback

  direct   straight to the server (the raw limit)
  gateway  through a started mcpgate.Gateway served over streamable HTTP
           (its bearer token), whose policy allows echo, on a store in
           this benchmark's temporary directory, the gateway reaching the
           same server over HTTP (one kept session)

The kinds take turns, N calls each, at each concurrency of -c, -rounds
times (the order of the two kinds alternates from round to round). For
each: the latency's p50 and p99, calls a second, the process's CPU time a
call, and for the gateway the store's write requests (commits), SQLite's
transactions (txs: write requests committed together share one) and
reads a call. The load average is
printed with every round: figures are only comparable within a round.
-cpuprofile profiles the gateway's calls only.
`

func gatewayCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench gateway", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, gatewayUsage); fs.PrintDefaults() }
	n := fs.Int("n", 1000, "calls of each kind, at each concurrency, a round")
	rounds := fs.Int("rounds", 3, "rounds")
	conc := fs.String("c", "1,10", "the concurrencies, comma-separated")
	storeKind := fs.String("store", "sqlite", "the gateway's store: sqlite (synchronous=FULL, as mcp-gateway's default) or memory")
	profile := fs.String("cpuprofile", "", "write a CPU profile of the gateway's calls to `FILE`")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var cs []int
	for _, f := range splitComma(*conc) {
		var c int
		if _, err := fmt.Sscan(f, &c); err != nil || c < 1 {
			return fmt.Errorf("-c %q: want concurrencies such as 1,10", *conc)
		}
		cs = append(cs, c)
	}
	if *n < 1 || *rounds < 1 {
		return fmt.Errorf("-n and -rounds take a number, 1 or more")
	}
	dir, err := os.MkdirTemp("", "tollgate-bench-gateway-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	quiet := slog.New(slog.DiscardHandler)

	srv := mcptest.NewServer(nil, nil)
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	defer up.Close()

	var base checkpoint.Store
	switch *storeKind {
	case "memory":
		base = memory.New()
	case "sqlite":
		s, err := sqlite.Open(ctx, filepath.Join(dir, "gateway.db"), nil)
		if err != nil {
			return err
		}
		base = s
	default:
		return fmt.Errorf("-store %q: want sqlite or memory", *storeKind)
	}
	defer base.Close()
	store := newCountingStore(base)
	servers, err := mcpgate.ConnectAll(ctx, []mcpgate.ServerConfig{{Name: "t", URL: up.URL}}, &mcpgate.Options{KeepResults: true, Logger: quiet})
	if err != nil {
		return err
	}
	defer servers.Close()
	pol, err := policy.Parse("bench.yaml", []byte("version: 1\ndefault: ask\nrules:\n  - {name: reads, tool: mcp__t__echo, action: allow}\n"), nil)
	if err != nil {
		return err
	}
	g, err := mcpgate.NewGateway(mcpgate.GatewayConfig{Servers: servers, Store: store, Policy: pol.HITL(), Logger: quiet})
	if err != nil {
		return err
	}
	if err := g.Start(ctx); err != nil {
		return err
	}
	defer func() { _ = g.Shutdown(context.Background()) }()
	const token = "bench-gateway-token-0123456789"
	h, err := g.HTTPHandler(token)
	if err != nil {
		return err
	}
	gw := httptest.NewServer(h)
	defer gw.Close()

	maxC := 0
	for _, c := range cs {
		maxC = max(maxC, c)
	}
	direct, err := benchSessions(ctx, up.URL, "", maxC)
	if err != nil {
		return err
	}
	gated, err := benchSessions(ctx, gw.URL, token, maxC)
	if err != nil {
		return err
	}
	for _, s := range append(direct, gated...) {
		defer s.Close()
	}
	// Warm both (connections, the SDK's schema caches, the store).
	for _, ss := range [][]*mcp.ClientSession{direct, gated} {
		if _, err := callMany(ctx, ss[:1], 20); err != nil {
			return err
		}
	}
	var prof *os.File
	if *profile != "" {
		if prof, err = os.Create(*profile); err != nil {
			return err
		}
		defer prof.Close()
	}

	fmt.Fprintf(stdout, "MCP gateway, allowed echo over streamable HTTP, store %s; %s, %d calls a kind a round\n", *storeKind, cpuModel(), *n)
	fmt.Fprintf(stdout, "%-5s %-4s %-8s %9s %9s %9s %9s %9s %9s %8s %8s %8s  %s\n", "round", "c", "kind", "p50", "p99", "calls/s", "+p50", "x direct", "cpu/call", "commits", "txs", "reads", "load")
	type key struct {
		c    int
		kind string
	}
	type fig struct {
		p50, p99 time.Duration
		rate     float64
		cpu      time.Duration // the process's CPU time a call
	}
	all := map[key][]fig{}
	for r := range *rounds {
		for _, c := range cs {
			kinds := []string{"direct", "gateway"}
			if r%2 == 1 {
				kinds = []string{"gateway", "direct"}
			}
			got := map[string]fig{}
			var commits, reads float64
			txs := -1.0 // SQLite transactions a call
			for _, kind := range kinds {
				ss := direct[:c]
				if kind == "gateway" {
					ss = gated[:c]
				}
				before := store.snapshot()
				tx0, _, _ := writeStats(base)
				if prof != nil && kind == "gateway" {
					if err := pprof.StartCPUProfile(prof); err != nil {
						return err
					}
				}
				u0, s0 := cpuTime()
				start := time.Now()
				lat, err := callMany(ctx, ss, *n)
				wall := time.Since(start)
				u1, s1 := cpuTime()
				if prof != nil && kind == "gateway" {
					pprof.StopCPUProfile()
					prof = nil // one profile: the first gateway run
				}
				if err != nil {
					return err
				}
				if kind == "gateway" {
					if tx1, _, ok := writeStats(base); ok {
						txs = float64(tx1-tx0) / float64(len(lat))
					}
					after := store.snapshot()
					for m, v := range after {
						d := float64(v-before[m]) / float64(len(lat))
						if writeMethods[m] {
							commits += d
						} else {
							reads += d
						}
					}
				}
				got[kind] = fig{pct(lat, 50), pct(lat, 99), float64(len(lat)) / wall.Seconds(), (u1 - u0 + s1 - s0) / time.Duration(max(1, len(lat)))}
			}
			load := loadAvg()
			for _, kind := range []string{"direct", "gateway"} {
				f := got[kind]
				all[key{c, kind}] = append(all[key{c, kind}], f)
				if kind == "direct" {
					fmt.Fprintf(stdout, "%-5d %-4d %-8s %9s %9s %9.0f %9s %9s %9s %8s %8s %8s  %s\n", r+1, c, kind, ms(f.p50), ms(f.p99), f.rate, "", "", ms(f.cpu), "", "", "", load)
					continue
				}
				d := got["direct"]
				fmt.Fprintf(stdout, "%-5d %-4d %-8s %9s %9s %9.0f %9s %8.0f%% %9s %8.1f %8.2f %8.1f  %s\n", r+1, c, kind, ms(f.p50), ms(f.p99), f.rate,
					ms(f.p50-d.p50), 100*f.rate/d.rate, ms(f.cpu), commits, txs, reads, load)
			}
		}
	}
	fmt.Fprintln(stdout, "medians of the rounds:")
	for _, c := range cs {
		d, gw := all[key{c, "direct"}], all[key{c, "gateway"}]
		var dp, gp, dq, gq, dr, gr, dc, gc []float64
		for i := range d {
			dp, gp = append(dp, float64(d[i].p50)), append(gp, float64(gw[i].p50))
			dq, gq = append(dq, float64(d[i].p99)), append(gq, float64(gw[i].p99))
			dr, gr = append(dr, d[i].rate), append(gr, gw[i].rate)
			dc, gc = append(dc, float64(d[i].cpu)), append(gc, float64(gw[i].cpu))
		}
		dur := func(xs []float64) string { return ms(time.Duration(median(xs))) }
		fmt.Fprintf(stdout, "  c=%d: direct p50 %s p99 %s, %.0f calls/s, CPU %s a call; gateway p50 %s (+%s) p99 %s, %.0f calls/s (%.0f%% of direct), CPU %s a call\n", c,
			dur(dp), dur(dq), median(dr), dur(dc), dur(gp), ms(time.Duration(median(gp)-median(dp))), dur(gq), median(gr), 100*median(gr)/median(dr), dur(gc))
	}
	return nil
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}

// bearer adds the gateway's token to each request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// benchSessions connects n client sessions to the MCP endpoint at url.
func benchSessions(ctx context.Context, url, token string, n int) ([]*mcp.ClientSession, error) {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4 * n}}
	if token != "" {
		hc.Transport = bearer{token, hc.Transport}
	}
	var out []*mcp.ClientSession
	for range n {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
		if err != nil {
			return nil, fmt.Errorf("connecting to %s: %w", url, err)
		}
		out = append(out, cs)
	}
	return out, nil
}

// callMany makes n echo calls, len(ss) at a time (one session each), and
// returns each one's latency.
func callMany(ctx context.Context, ss []*mcp.ClientSession, n int) ([]time.Duration, error) {
	var (
		mu   sync.Mutex
		lat  = make([]time.Duration, 0, n)
		next = 0
		fail error
		wg   sync.WaitGroup
	)
	args := map[string]any{"text": "hi"}
	for _, s := range ss {
		wg.Go(func() {
			for {
				mu.Lock()
				if next >= n || fail != nil {
					mu.Unlock()
					return
				}
				next++
				mu.Unlock()
				t := time.Now()
				res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: args})
				d := time.Since(t)
				if err == nil && res.IsError {
					err = fmt.Errorf("echo failed: %v", res.Content)
				}
				mu.Lock()
				if err != nil && fail == nil {
					fail = err
				}
				lat = append(lat, d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat, fail
}
