package mcpgate

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/clock"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/internal/gopool"
)

// GatewayConfig configures a [Gateway].
type GatewayConfig struct {
	// Servers are the upstream MCP servers the gateway fronts, connected
	// with Options.KeepResults (so that a client gets each result as the
	// server gave it).
	Servers *Servers
	// Store keeps every call the gateway forwards as a thread: the call,
	// its decision, its question and answer, its result. The gateway owns
	// its store's runs: do not let another host (a tollgate serve) drive
	// the same store.
	Store checkpoint.Store
	// Policy decides each call, as for an agent's tools: the tools are
	// named mcp__<server>__<tool> and carry the server's annotations.
	Policy hitl.Policy
	// Hidden says which tools tools/list leaves out: those the policy
	// blocks whatever their arguments (see policy.Policy.Blocks). A
	// hidden tool called anyway is refused by the policy. Nil: none
	// hidden.
	Hidden func(tool string, annotations map[string]any) bool
	// Progress is how often a client whose call waits is sent a progress
	// notification (when it gave a progress token), so that it does not
	// time out. Zero: 5 s.
	Progress time.Duration
	// PingTimeout is how long a client whose call waits has to answer a
	// ping; two pings missed in a row give its call up (a client killed
	// without a word cancels nothing). Zero: 10 s.
	PingTimeout time.Duration
	// ReviewURL, if set, is named in progress messages: where the
	// question can be answered.
	ReviewURL string
	Logger    *slog.Logger
	Clock     clock.Clock
	// Name and Version are the gateway's own, as its clients see them.
	// Zero: "tollgate-mcp-gateway".
	Name, Version string
}

// Gateway is an MCP server that fronts MCP servers for any MCP client and
// holds every call for the policy: allowed calls go through, blocked ones
// are refused (and hidden from tools/list when blocked whatever their
// arguments), asked ones wait for a person — on the tollgate page, the
// command line, the API, or the client's own user by elicitation — while
// the client gets progress notifications.
//
// Each forwarded call the policy does not allow outright is one run of an
// [agent.Agent] on a thread of its own, driven by a [host.Host]: its
// "model" relays the client's call and reports its result, so the call
// gets everything a native tool call gets — the policy, the durable
// question bound to the arguments' digest, edits checked against the
// schema, deadlines, the audit log. The run loop is the agent's; the
// gateway adds no second one. A call the policy allows as it stands needs
// none of that: the gateway writes the thread such a run would write, in
// two commits, the first before the call is made.
type Gateway struct {
	cfg    GatewayConfig
	log    *slog.Logger
	host   *host.Host
	server *mcp.Server
	clock  clock.Clock

	mu   sync.Mutex
	live map[string]*liveCall // by thread: calls whose client waits
	// lives counts the entries of live, handlers the tools/call handlers
	// under way: Shutdown waits for each to come to none.
	lives, handlers gopool.Inflight
	// watched is closed when the goroutine that follows the host's
	// events (watch) has returned.
	watched chan struct{}
	closing bool
	exposed map[string]exposedTool // by the name the client sees
	hidden  map[string]exposedTool // tools the policy blocks whatever their arguments
	unsub   func()
	cancel  context.CancelFunc
	// callers are the goroutines allowed calls run on (see runAllowed).
	callers *gopool.Pool
	// cut ends when Shutdown's grace is over (cutCalls): an allowed call
	// not yet made is not made, one running upstream is cancelled.
	cut      context.Context
	cutCalls context.CancelFunc
	key      [32]byte // signs request states
	// signers are HMACs keyed with key, kept for the next signature
	// (hmac.New derives the key's pads again: 10 allocations an
	// envelope's signature, one every call).
	signers sync.Pool
}

// exposedTool is an upstream tool as the gateway's clients see it.
type exposedTool struct {
	upstream  *Upstream
	tool      *mcp.Tool
	agentName string
}

// NewGateway builds a gateway; Start it, then serve it over stdio
// ([Gateway.ServeStdio]) or HTTP ([Gateway.HTTPHandler]).
func NewGateway(cfg GatewayConfig) (*Gateway, error) {
	if cfg.Servers == nil || cfg.Store == nil || cfg.Policy == nil {
		return nil, errors.New("mcpgate: a gateway needs Servers, Store and Policy")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real
	}
	if cfg.Progress <= 0 {
		cfg.Progress = 5 * time.Second
	}
	if cfg.PingTimeout <= 0 {
		cfg.PingTimeout = 10 * time.Second
	}
	if cfg.Name == "" {
		cfg.Name = "tollgate-mcp-gateway"
	}
	if cfg.Version == "" {
		cfg.Version = "1"
	}
	g := &Gateway{cfg: cfg, log: cfg.Logger, clock: cfg.Clock, live: map[string]*liveCall{},
		callers: gopool.New(maxIdleCallers, callerIdle)}
	g.cut, g.cutCalls = context.WithCancel(context.Background())
	_, _ = rand.Read(g.key[:])
	g.signers.New = g.newSigner
	channel := hitl.NewCheckpointedChannel(cfg.Store, "", nil)
	// The same liveness check goes before the approval (no question is
	// asked for a call no client waits for: a run resumed after a
	// restart) and after it (an approval given after the client left, or
	// after a restart, is applied to nothing).
	live := &liveCheck{g: g}
	var tools []*agent.Tool
	for _, u := range cfg.Servers.Upstreams() {
		tools = append(tools, u.agentTools(g.withClientProgress)...)
	}
	h, err := host.New(host.Config{Store: cfg.Store, Clock: cfg.Clock, Logger: cfg.Logger, Agent: agent.Config{
		Provider: relay{g}, Tools: tools, Logger: cfg.Logger, Clock: cfg.Clock, MaxTurns: 3,
		Middleware: []agent.Middleware{live, hitl.NewApprovalPolicyMiddleware(channel, g.policy(cfg.Policy)), live},
	}})
	if err != nil {
		return nil, err
	}
	g.host = h
	g.server = mcp.NewServer(&mcp.Implementation{Name: cfg.Name, Version: cfg.Version}, &mcp.ServerOptions{
		Logger: cfg.Logger,
		// Tools even when the policy hides them all (for now).
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
	})
	// tools/list reflects the upstreams and the policy as they are now.
	g.server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch method {
			case "tools/list":
				g.syncTools()
			case "tools/call":
				g.handlers.Enter()
				defer g.handlers.Leave()
				// A hidden tool called anyway (a client that cached an
				// older list) goes through the policy like any call, so
				// that its refusal says why and is in the audit log.
				if r, ok := req.(*mcp.CallToolRequest); ok && r.Params != nil {
					g.mu.Lock()
					e, hidden := g.hidden[r.Params.Name]
					g.mu.Unlock()
					if hidden {
						return g.call(ctx, r, e), nil
					}
				}
			}
			return next(ctx, method, req)
		}
	})
	g.syncTools()
	return g, nil
}

// ToolsChanged tells the gateway that a server's tools changed: give it
// as [Options.ToolsChanged] of the servers. Clients are told of the new
// list (notifications/tools/list_changed).
func (g *Gateway) ToolsChanged(server string) {
	if g.host != nil {
		g.syncTools()
	}
}

// Host is the host that drives the gateway's calls: give it to a
// tollgate server (package server) for the page and the API.
func (g *Gateway) Host() *host.Host { return g.host }

// Server is the MCP server the gateway's clients talk to.
func (g *Gateway) Server() *mcp.Server { return g.server }

// syncTools makes the MCP server's tools the upstreams' tools the policy
// does not hide (of those the gateway started with). It runs at each
// tools/list and when an upstream's tools change ([Gateway.ToolsChanged]).
func (g *Gateway) syncTools() {
	ups := g.cfg.Servers.Upstreams()
	want := map[string]exposedTool{}
	hidden := map[string]exposedTool{}
	for _, u := range ups {
		for _, t := range u.Tools() {
			name := t.Name
			if len(ups) > 1 {
				name = u.Name() + "__" + t.Name
			}
			agentName := AgentName(u.Name(), t.Name)
			if at := g.host.Tool(agentName); at == nil || !sameSchema(at, t) {
				// A tool the server listed after the gateway started, or
				// one whose schema changed (a restarted server): the runs'
				// agent would validate it against what it does not have,
				// so it is not offered until the gateway restarts.
				continue
			}
			if g.cfg.Hidden != nil && g.cfg.Hidden(agentName, Annotations(u.Name(), t)) {
				hidden[name] = exposedTool{upstream: u, tool: t, agentName: agentName}
				continue
			}
			want[name] = exposedTool{upstream: u, tool: t, agentName: agentName}
		}
	}
	g.mu.Lock()
	old := g.exposed
	g.exposed, g.hidden = want, hidden
	g.mu.Unlock()
	var gone []string
	for name := range old {
		if _, ok := want[name]; !ok {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		g.server.RemoveTools(gone...)
	}
	for name, e := range want {
		if o, ok := old[name]; ok && o.tool == e.tool {
			continue
		}
		t := *e.tool
		t.Name = name
		g.server.AddTool(&t, g.handler(name))
	}
}

// sameSchema: the agent tool validates against the MCP tool's input
// schema as it is now.
func sameSchema(at *agent.Tool, t *mcp.Tool) bool {
	now, err := inputSchema(t)
	if err != nil {
		return false
	}
	b, err := json.Marshal(now)
	return err == nil && string(b) == string(at.Schema())
}

// handler is the tools/call handler of one exposed tool.
func (g *Gateway) handler(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		g.mu.Lock()
		e, ok := g.exposed[name]
		closing := g.closing
		g.mu.Unlock()
		switch {
		case closing:
			return retryable(shuttingDown), nil
		case !ok:
			return errorResult(fmt.Sprintf("tollgate: no tool %q (the policy hides it, or its server no longer lists it)", name)), nil
		}
		return g.call(ctx, req, e), nil
	}
}

// policy wraps the gateway's policy: an ask shows the reviewer which
// client asked and through which server (from the run's prompt, so it
// holds when the run is resumed).
func (g *Gateway) policy(p hitl.Policy) hitl.Policy {
	return func(ctx context.Context, c *hitl.PolicyContext) hitl.ApprovalDecision {
		d := p(ctx, c)
		env, ok := g.callOf(c.ThreadID, c.Messages)
		if !ok {
			return d
		}
		if d.Action() != "ask" {
			return d
		}
		return d.WithDetails(map[string]any{"mcp_client": env.Client, "mcp_server": env.Server, "mcp_tool": env.Tool})
	}
}
