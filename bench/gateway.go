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
	"runtime"
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

const gatewayUsage = `usage: go run ./bench gateway [-n N] [-rounds R] [-c 1,10] [-store sqlite|memory]
    [-cpuprofile FILE] [-memprofile FILE]

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
-cpuprofile profiles the gateway's calls only (its first run); -memprofile
writes the allocation profile after that run to FILE and one before it to
FILE.base (go tool pprof -sample_index=alloc_objects -base FILE.base ...).
`

// gatewayOptions are bench gateway's flags.
type gatewayOptions struct {
	n, rounds int
	cs        []int  // the concurrencies
	storeKind string // sqlite or memory
	profile   string // the CPU profile's file, or none
	memProf   string // the allocation profile's file, or none
}

func parseGatewayFlags(args []string, stderr io.Writer) (gatewayOptions, error) {
	fs := flag.NewFlagSet("bench gateway", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, gatewayUsage); fs.PrintDefaults() }
	n := fs.Int("n", 1000, "calls of each kind, at each concurrency, a round")
	rounds := fs.Int("rounds", 3, "rounds")
	conc := fs.String("c", "1,10", "the concurrencies, comma-separated")
	storeKind := fs.String("store", "sqlite", "the gateway's store: sqlite (synchronous=FULL, as mcp-gateway's default) or memory")
	profile := fs.String("cpuprofile", "", "write a CPU profile of the gateway's calls to `FILE`")
	memProf := fs.String("memprofile", "", "write an allocation profile after the gateway's first run to `FILE`, and one before it to FILE.base")
	if err := fs.Parse(args); err != nil {
		return gatewayOptions{}, err
	}
	var cs []int
	for _, f := range splitComma(*conc) {
		var c int
		if _, err := fmt.Sscan(f, &c); err != nil || c < 1 {
			return gatewayOptions{}, fmt.Errorf("-c %q: want concurrencies such as 1,10", *conc)
		}
		cs = append(cs, c)
	}
	if *n < 1 || *rounds < 1 {
		return gatewayOptions{}, fmt.Errorf("-n and -rounds take a number, 1 or more")
	}
	return gatewayOptions{n: *n, rounds: *rounds, cs: cs, storeKind: *storeKind, profile: *profile, memProf: *memProf}, nil
}

func gatewayCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseGatewayFlags(args, stderr)
	if err != nil {
		return err
	}
	if o.memProf != "" {
		// Before anything starts, as the runtime asks: it draws each
		// next sample at the rate it read when it drew the last, so work
		// already under way (the gateway's, its server's) is sampled at
		// the default for a while after a late change.
		runtime.MemProfileRate = 4096
	}
	g, err := newGatewayRig(ctx, o)
	if err != nil {
		return err
	}
	defer g.close()

	fmt.Fprintf(stdout, "MCP gateway, allowed echo over streamable HTTP, store %s; %s, %d calls a kind a round\n", o.storeKind, cpuModel(), o.n)
	fmt.Fprintf(stdout, "%-5s %-4s %-8s %9s %9s %9s %9s %9s %9s %8s %8s %8s  %s\n", "round", "c", "kind", "p50", "p99", "calls/s", "+p50", "x direct", "cpu/call", "commits", "txs", "reads", "load")
	all := map[gatewayKey][]gatewayFig{}
	for r := range o.rounds {
		for _, c := range o.cs {
			if err := g.round(ctx, r, c, o.n, all, stdout); err != nil {
				return err
			}
		}
	}
	printGatewayMedians(stdout, o.cs, all)
	return nil
}

// gatewayRig is what bench gateway calls: an MCP server over HTTP, and a
// started gateway in front of it on a store of its own, with sessions to
// each for the largest concurrency. close undoes it in reverse order.
type gatewayRig struct {
	base          checkpoint.Store
	store         *countingStore
	direct, gated []*mcp.ClientSession
	prof          *os.File // until the first gateway run has profiled
	memProf       string   // until the first gateway run has profiled
	closers       []func()
}

func (g *gatewayRig) close() {
	for i := len(g.closers) - 1; i >= 0; i-- {
		g.closers[i]()
	}
}

func newGatewayRig(ctx context.Context, o gatewayOptions) (_ *gatewayRig, err error) {
	g := &gatewayRig{}
	defer func() {
		if err != nil {
			g.close()
		}
	}()
	dir, err := os.MkdirTemp("", "tollgate-bench-gateway-")
	if err != nil {
		return nil, err
	}
	g.closers = append(g.closers, func() { _ = os.RemoveAll(dir) })
	quiet := slog.New(slog.DiscardHandler)

	srv := mcptest.NewServer(nil, nil)
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	g.closers = append(g.closers, up.Close)

	switch o.storeKind {
	case "memory":
		g.base = memory.New()
	case "sqlite":
		s, err := sqlite.Open(ctx, filepath.Join(dir, "gateway.db"), nil)
		if err != nil {
			return nil, err
		}
		g.base = s
	default:
		return nil, fmt.Errorf("-store %q: want sqlite or memory", o.storeKind)
	}
	g.closers = append(g.closers, func() { _ = g.base.Close() })
	g.store = newCountingStore(g.base)
	servers, err := mcpgate.ConnectAll(ctx, []mcpgate.ServerConfig{{Name: "t", URL: up.URL}}, &mcpgate.Options{KeepResults: true, Logger: quiet})
	if err != nil {
		return nil, err
	}
	g.closers = append(g.closers, func() { _ = servers.Close() })
	pol, err := policy.Parse("bench.yaml", []byte("version: 1\ndefault: ask\nrules:\n  - {name: reads, tool: mcp__t__echo, action: allow}\n"), nil)
	if err != nil {
		return nil, err
	}
	gate, err := mcpgate.NewGateway(mcpgate.GatewayConfig{Servers: servers, Store: g.store, Policy: pol.HITL(), Logger: quiet})
	if err != nil {
		return nil, err
	}
	if err := gate.Start(ctx); err != nil {
		return nil, err
	}
	g.closers = append(g.closers, func() { _ = gate.Shutdown(context.Background()) })
	const token = "bench-gateway-token-0123456789"
	h, err := gate.HTTPHandler(token)
	if err != nil {
		return nil, err
	}
	gw := httptest.NewServer(h)
	g.closers = append(g.closers, gw.Close)

	maxC := 0
	for _, c := range o.cs {
		maxC = max(maxC, c)
	}
	if err := g.connect(ctx, up.URL, gw.URL, token, maxC); err != nil {
		return nil, err
	}
	g.memProf = o.memProf
	if o.profile != "" {
		if g.prof, err = os.Create(o.profile); err != nil {
			return nil, err
		}
		prof := g.prof
		g.closers = append(g.closers, func() { _ = prof.Close() })
	}
	return g, nil
}

// connect opens n sessions to the server at direct and n to the gateway
// at gated, and warms both up.
func (g *gatewayRig) connect(ctx context.Context, direct, gated, token string, n int) error {
	var err error
	if g.direct, err = benchSessions(ctx, direct, "", n); err != nil {
		return err
	}
	if g.gated, err = benchSessions(ctx, gated, token, n); err != nil {
		return err
	}
	for _, s := range append(g.direct, g.gated...) {
		g.closers = append(g.closers, func() { _ = s.Close() })
	}
	// Warm both (connections, the SDK's schema caches, the store).
	for _, ss := range [][]*mcp.ClientSession{g.direct, g.gated} {
		if _, err := callMany(ctx, ss[:1], 20); err != nil {
			return err
		}
	}
	return nil
}

type gatewayKey struct {
	c    int
	kind string
}

type gatewayFig struct {
	p50, p99 time.Duration
	rate     float64
	cpu      time.Duration // the process's CPU time a call
}

// gatewayCost is the store's work a gateway call: write requests,
// SQLite's transactions (-1 without the figure) and reads.
type gatewayCost struct {
	commits, txs, reads float64
}

// round measures both kinds at concurrency c, in round r's order, prints
// a line for each and adds their figures to all.
func (g *gatewayRig) round(ctx context.Context, r, c, n int, all map[gatewayKey][]gatewayFig, stdout io.Writer) error {
	kinds := []string{"direct", "gateway"}
	if r%2 == 1 {
		kinds = []string{"gateway", "direct"}
	}
	got := map[string]gatewayFig{}
	var cost gatewayCost
	for _, kind := range kinds {
		f, kc, err := g.measure(ctx, kind, c, n)
		if err != nil {
			return err
		}
		got[kind] = f
		if kind == "gateway" {
			cost = kc
		}
	}
	load := loadAvg()
	for _, kind := range []string{"direct", "gateway"} {
		f := got[kind]
		all[gatewayKey{c, kind}] = append(all[gatewayKey{c, kind}], f)
		if kind == "direct" {
			fmt.Fprintf(stdout, "%-5d %-4d %-8s %9s %9s %9.0f %9s %9s %9s %8s %8s %8s  %s\n", r+1, c, kind, ms(f.p50), ms(f.p99), f.rate, "", "", ms(f.cpu), "", "", "", load)
			continue
		}
		d := got["direct"]
		fmt.Fprintf(stdout, "%-5d %-4d %-8s %9s %9s %9.0f %9s %8.0f%% %9s %8.1f %8.2f %8.1f  %s\n", r+1, c, kind, ms(f.p50), ms(f.p99), f.rate,
			ms(f.p50-d.p50), 100*f.rate/d.rate, ms(f.cpu), cost.commits, cost.txs, cost.reads, load)
	}
	return nil
}

// measure makes n calls of kind, c at a time; for the gateway it also
// counts the store's work.
func (g *gatewayRig) measure(ctx context.Context, kind string, c, n int) (gatewayFig, gatewayCost, error) {
	cost := gatewayCost{txs: -1} // SQLite transactions a call
	ss := g.direct[:c]
	if kind == "gateway" {
		ss = g.gated[:c]
	}
	before := g.store.snapshot()
	tx0, _, _ := writeStats(g.base)
	if g.prof != nil && kind == "gateway" {
		if err := pprof.StartCPUProfile(g.prof); err != nil {
			return gatewayFig{}, cost, err
		}
	}
	memProf := ""
	if kind == "gateway" {
		memProf, g.memProf = g.memProf, "" // one profile: the first gateway run
	}
	if memProf != "" {
		if err := writeHeapProfile(memProf + ".base"); err != nil {
			return gatewayFig{}, cost, err
		}
	}
	u0, s0 := cpuTime()
	start := time.Now()
	lat, err := callMany(ctx, ss, n)
	wall := time.Since(start)
	u1, s1 := cpuTime()
	if g.prof != nil && kind == "gateway" {
		pprof.StopCPUProfile()
		g.prof = nil // one profile: the first gateway run
	}
	if memProf != "" {
		if err := writeHeapProfile(memProf); err != nil {
			return gatewayFig{}, cost, err
		}
	}
	if err != nil {
		return gatewayFig{}, cost, err
	}
	if kind == "gateway" {
		if tx1, _, ok := writeStats(g.base); ok {
			cost.txs = float64(tx1-tx0) / float64(len(lat))
		}
		after := g.store.snapshot()
		for m, v := range after {
			d := float64(v-before[m]) / float64(len(lat))
			if writeMethods[m] {
				cost.commits += d
			} else {
				cost.reads += d
			}
		}
	}
	return gatewayFig{pct(lat, 50), pct(lat, 99), float64(len(lat)) / wall.Seconds(), (u1 - u0 + s1 - s0) / time.Duration(max(1, len(lat)))}, cost, nil
}

func printGatewayMedians(stdout io.Writer, cs []int, all map[gatewayKey][]gatewayFig) {
	fmt.Fprintln(stdout, "medians of the rounds:")
	for _, c := range cs {
		d, gw := all[gatewayKey{c, "direct"}], all[gatewayKey{c, "gateway"}]
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
