package mcpgate

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/clock"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/internal/display"
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
// Each forwarded call is one run of an [agent.Agent] on a thread of its
// own, driven by a [host.Host]: its "model" relays the client's call and
// reports its result, so the call gets everything a native tool call
// gets — the policy, the durable question bound to the arguments' digest,
// edits checked against the schema, deadlines, the audit log. The run
// loop is the agent's; the gateway adds no second one.
type Gateway struct {
	cfg    GatewayConfig
	log    *slog.Logger
	host   *host.Host
	server *mcp.Server
	clock  clock.Clock

	mu      sync.Mutex
	live    map[string]*liveCall // by thread: calls whose client waits
	closing bool
	exposed map[string]exposedTool // by the name the client sees
	hidden  map[string]exposedTool // tools the policy blocks whatever their arguments
	unsub   func()
	cancel  context.CancelFunc
	key     [32]byte // signs request states
}

// exposedTool is an upstream tool as the gateway's clients see it.
type exposedTool struct {
	upstream  *Upstream
	tool      *mcp.Tool
	agentName string
}

// liveCall is a client's call that waits for its result.
type liveCall struct {
	thread    string
	client    string
	session   *mcp.ServerSession
	result    chan agent.ToolResult     // one result: buffered
	failed    chan error                // the run stopped on an error
	elicitNow chan *checkpoint.Question // a question to ask the client's user

	mu      sync.Mutex
	pending *checkpoint.Question
	round   int // counts the rounds of input requests
	// awaiting: between an input request and the client's next round;
	// back is closed when the round ends (the client came back, or the
	// call was given up).
	awaiting bool
	back     chan struct{}
	elicit   sync.Once

	// probe asks the round's pinger to ping the client now: an HTTP
	// request of its session ended because its connection was lost.
	probe chan struct{}
	// ended is closed when the client ends its session (an HTTP DELETE):
	// the call is given up at once, as a cancel gives it up.
	ended   chan struct{}
	endOnce sync.Once

	progress progress
}

// progress is where the notifications of a call's progress go: the
// client's round (its session, its request's context, its token), with
// what was sent on its token (progress must increase).
type progress struct {
	mu    sync.Mutex // held while sending: the values go out in order
	ss    *mcp.ServerSession
	ctx   context.Context // the round's: its notifications go on the call's own stream
	token any
	last  float64
	// shift is added to the upstream's progress and total: the gateway's
	// own notifications while the call waited came first, and the
	// upstream's values start again from zero. The work left (total -
	// progress) is the upstream's.
	shift    float64
	upstream bool // the upstream reports progress: the gateway's own notifications stop
	sent     bool // a notification went out on this token
}

// The relay "model" finds the call in the run's prompt: the envelope is
// the prompt's last line.
type envelope struct {
	Thread    string          `json:"thread"`
	Client    string          `json:"client"`
	Server    string          `json:"server"`
	Tool      string          `json:"tool"`
	AgentTool string          `json:"agent_tool"`
	Arguments json.RawMessage `json:"arguments"`
}

const envelopeMark = "mcp-call: "

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
	g := &Gateway{cfg: cfg, log: cfg.Logger, clock: cfg.Clock, live: map[string]*liveCall{}}
	_, _ = rand.Read(g.key[:])
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

// Start starts the host and closes what a previous process left: a call
// a client waited for when the gateway stopped no longer exists (the
// client was told, or lost its connection), so its pending questions are
// aborted and an answer given later is refused, not applied.
func (g *Gateway) Start(ctx context.Context) error {
	if err := g.host.Start(ctx); err != nil {
		return err
	}
	events, unsub := g.host.Subscribe(4096)
	g.unsub = unsub
	evCtx, cancel := context.WithCancel(context.Background())
	g.cancel = cancel
	go g.watch(evCtx, events)
	return g.abortOrphans(ctx)
}

func (g *Gateway) abortOrphans(ctx context.Context) error {
	seen := map[string]bool{}
	after := ""
	for {
		qs, next, err := g.cfg.Store.ListQuestions(ctx, checkpoint.QuestionFilter{Status: checkpoint.QuestionPending, After: after})
		if err != nil {
			return fmt.Errorf("mcpgate: listing the questions a previous gateway left: %w", err)
		}
		for _, q := range qs {
			if seen[q.ThreadID] || g.isLive(q.ThreadID) {
				continue
			}
			seen[q.ThreadID] = true
			if err := g.host.Abort(ctx, q.ThreadID, "the MCP gateway restarted: the client's call no longer exists"); err != nil {
				g.log.Warn("tollgate: closing a call a previous gateway left", "thread", q.ThreadID, "err", err)
			}
		}
		if next == "" {
			break
		}
		after = next
	}
	if len(seen) > 0 {
		g.log.Info("tollgate: closed the calls a previous gateway left waiting for approval; their clients were told to retry or lost their connection", "calls", len(seen))
	}
	return nil
}

// Shutdown stops taking calls; every call still waiting for a person is
// answered with a retryable error (its question is aborted, so no answer
// is applied to it later); calls already running finish within ctx.
func (g *Gateway) Shutdown(ctx context.Context) error {
	g.mu.Lock()
	g.closing = true
	waiting := make([]string, 0, len(g.live))
	for id := range g.live {
		waiting = append(waiting, id)
	}
	g.mu.Unlock()
	for _, id := range waiting {
		if lc := g.liveCall(id); lc != nil {
			lc.mu.Lock()
			awaiting := lc.awaiting
			lc.mu.Unlock()
			if awaiting {
				// Between rounds no handler holds the call: the client's
				// next round finds it gone and is told to retry.
				g.forget(lc)
			}
		}
		// A call running upstream is left to finish within ctx; one that
		// waits for a person is answered now.
		if qs, _, err := g.cfg.Store.ListQuestions(ctx, checkpoint.QuestionFilter{ThreadID: id, Status: checkpoint.QuestionPending, Limit: 1}); err == nil && len(qs) == 0 {
			continue
		}
		if err := g.host.Abort(ctx, id, "the MCP gateway is shutting down"); err != nil && !errors.Is(err, host.ErrClosed) {
			g.log.Warn("tollgate: aborting a waiting call at shutdown", "thread", id, "err", err)
		}
		if lc := g.liveCall(id); lc != nil {
			g.settle(ctx, lc)
		}
	}
	// Calls running upstream finish within ctx, and every client's
	// answer goes out before its session closes (an HTTP client's event
	// stream would otherwise hold the listener's shutdown for its whole
	// grace).
	for ctx.Err() == nil {
		g.mu.Lock()
		n := len(g.live)
		g.mu.Unlock()
		if n == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Past the grace, what still runs is cut (host.Shutdown leaves it
	// resumable; the next start aborts it, as no client waits).
	g.mu.Lock()
	left := len(g.live)
	g.mu.Unlock()
	if left > 0 {
		g.log.Warn("tollgate: calls still running upstream at the end of the shutdown grace are cut; their outcome is unknown", "calls", left)
	}
	time.Sleep(50 * time.Millisecond) // the last responses leave their handlers
	// A session whose client is gone can take its Close with it (the SDK
	// waits for a handler stuck asking that client): the closes are
	// bounded by ctx.
	closed := make(chan struct{})
	go func() {
		for ss := range g.server.Sessions() {
			_ = ss.Close()
		}
		close(closed)
	}()
	select {
	case <-closed:
	case <-ctx.Done():
		g.log.Warn("tollgate: MCP sessions still closing at the end of the shutdown grace; leaving them")
	}
	_, err := g.host.Shutdown(ctx)
	if g.unsub != nil {
		g.unsub()
		g.cancel()
	}
	return err
}

func (g *Gateway) isLive(thread string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.live[thread]
	return ok
}

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
			return retryable("the MCP gateway is shutting down: the call was not made; call it again in a moment"), nil
		case !ok:
			return errorResult(fmt.Sprintf("tollgate: no tool %q (the policy hides it, or its server no longer lists it)", name)), nil
		}
		return g.call(ctx, req, e), nil
	}
}

// call forwards one client call through a run, and waits for its result.
func (g *Gateway) call(ctx context.Context, req *mcp.CallToolRequest, e exposedTool) *mcp.CallToolResult {
	if req.Params.RequestState != "" {
		return g.resumeCall(ctx, req, e)
	}
	client := describeClient(req.Session)
	args := req.Params.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage(`{}`)
	}
	thread := newThreadID()
	env, err := json.Marshal(envelope{Thread: thread, Client: client, Server: e.upstream.Name(), Tool: e.tool.Name, AgentTool: e.agentName, Arguments: args})
	if err != nil {
		return errorResult("tollgate: the call's arguments are not JSON: " + err.Error())
	}
	lc := &liveCall{thread: thread, client: client, session: req.Session,
		result: make(chan agent.ToolResult, 1), failed: make(chan error, 1), elicitNow: make(chan *checkpoint.Question, 1),
		probe: make(chan struct{}, 1), ended: make(chan struct{})}
	g.mu.Lock()
	if g.closing {
		g.mu.Unlock()
		return retryable("the MCP gateway is shutting down: the call was not made; call it again in a moment")
	}
	g.live[thread] = lc
	g.mu.Unlock()
	// The envelope is signed: a message posted to a thread through the API
	// cannot pass for a client's call.
	prompt := fmt.Sprintf("MCP client %s calls tool %s of server %s.\n%s%s", client, e.tool.Name, e.upstream.Name(), envelopeMark, g.sign(string(env)))
	if _, _, err := g.host.Prompt(ctx, thread, prompt, nil); err != nil {
		g.forget(lc)
		if errors.Is(err, host.ErrClosed) {
			return retryable("the MCP gateway is shutting down: the call was not made; call it again in a moment")
		}
		return retryable("tollgate could not record the call, so it was not made: " + err.Error())
	}
	return g.await(ctx, req, lc, e)
}

func (g *Gateway) forget(lc *liveCall) {
	g.mu.Lock()
	if g.live[lc.thread] == lc {
		delete(g.live, lc.thread)
	}
	g.mu.Unlock()
	lc.endRound()
}

// endRound ends an input round, if one is on: whoever waits for the
// client's return is told.
func (lc *liveCall) endRound() {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.awaiting {
		lc.awaiting = false
		close(lc.back)
	}
}

// await waits for the call's outcome, keeping the client informed. It
// returns early, with the call still live, to have the client's own user
// asked (an input request: the client answers it and calls again with
// the answer and the request state, see resumeCall).
func (g *Gateway) await(ctx context.Context, req *mcp.CallToolRequest, lc *liveCall, e exposedTool) *mcp.CallToolResult {
	thread := lc.thread
	// A client that is gone without a word (an HTTP client killed, its
	// connection dropped) cancels nothing: it is pinged, and a ping its
	// transport could not deliver, or two missed in a row, end the call
	// as a cancel does.
	gone := make(chan struct{})
	roundCtx, endRound := context.WithCancel(ctx)
	defer endRound()
	lc.progress.start(roundCtx, req.Session, req.Params.GetProgressToken())
	defer lc.progress.stop()
	go g.pingClient(roundCtx, req.Session, lc.probe, gone)
	for {
		tick, stop := g.clock.After(g.cfg.Progress)
		select {
		case <-gone:
			stop()
			select {
			case r := <-lc.result: // it finished as the pings failed
				g.forget(lc)
				return g.clientResult(r)
			default:
			}
			qs, _, err := g.cfg.Store.ListQuestions(ctx, checkpoint.QuestionFilter{ThreadID: thread, Status: checkpoint.QuestionPending, Limit: 1})
			if err != nil || len(qs) == 0 {
				// Past its approval, the call may be running upstream: it
				// is left to finish (its outcome goes to the thread); only
				// a call still waiting for a person is given up.
				gone = nil
				continue
			}
			g.forget(lc)
			g.abandon(thread, "the MCP client stopped answering pings")
			return retryable("the client stopped answering; the call was cancelled")
		case r := <-lc.result:
			stop()
			g.forget(lc)
			return g.clientResult(r)
		case err := <-lc.failed:
			stop()
			g.forget(lc)
			return errorResult(fmt.Sprintf("tollgate could not finish the call (thread %s): %v; whether it took effect: see the thread", thread, err))
		case q := <-lc.elicitNow:
			stop()
			if res := g.inputRequest(lc, q); res != nil {
				return res
			}
		case <-ctx.Done():
			stop()
			g.forget(lc)
			g.abandon(thread, "the MCP client cancelled the call or disconnected")
			return retryable("the call was cancelled")
		case <-lc.ended:
			stop()
			g.forget(lc)
			g.abandon(thread, "the MCP client ended its session")
			return retryable("the client ended its session; the call was cancelled")
		case <-tick:
			g.settle(ctx, lc)
			if lc.progress.wanted() {
				lc.progress.tick(g.waitingMessage(thread, e), g.log)
			}
		}
	}
}

// start points the call's progress at a round of the client's: its
// session, its context and its token (nil: the client wants none).
func (p *progress) start(ctx context.Context, ss *mcp.ServerSession, token any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ctx, p.ss, p.token = ctx, ss, token
	p.last, p.shift, p.upstream, p.sent = 0, 0, false, false // a new token: a new count
}

func (p *progress) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ctx, p.ss, p.token = nil, nil, nil
}

// wanted: the client gave a token, and the upstream does not report
// progress itself.
func (p *progress) wanted() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.token != nil && !p.upstream
}

// forward passes a progress notification of the upstream's on to the
// client, with its total. From the first, the gateway's own notifications
// stop, and the upstream's values are shifted past those the client was
// sent already, so that its progress keeps increasing and what is left
// (total - progress) is the upstream's.
func (p *progress) forward(n *mcp.ProgressNotificationParams, log *slog.Logger) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.token == nil {
		return
	}
	if !p.upstream {
		p.upstream = true
		if p.sent {
			p.shift = max(0, p.last+1-n.Progress)
		}
	}
	v := p.shift + n.Progress
	if p.sent && v <= p.last {
		return // not an increase: a client may refuse it
	}
	var total float64
	if n.Total > 0 {
		total = p.shift + n.Total
	}
	p.send(v, total, n.Message, log)
}

// withClientProgress is the context an upstream call of the gateway runs
// in: the upstream's progress goes to the client whose call it is, to
// the round the client waits in when it comes.
func (g *Gateway) withClientProgress(ctx context.Context) context.Context {
	tc := agent.ToolCallFrom(ctx)
	if tc == nil {
		return ctx
	}
	thread := tc.ThreadID
	return WithProgress(ctx, func(n *mcp.ProgressNotificationParams) {
		if lc := g.liveCall(thread); lc != nil {
			lc.progress.forward(n, g.log)
		}
	})
}

// tick is the gateway's own notification that the call is still on.
func (p *progress) tick(msg string, log *slog.Logger) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.token == nil || p.upstream {
		return
	}
	p.send(p.last+1, 0, msg, log)
}

func (p *progress) send(v, total float64, msg string, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(p.ctx, 2*time.Second)
	defer cancel()
	p.last, p.sent = v, true
	if err := p.ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: p.token, Progress: v, Total: total, Message: msg}); err != nil {
		log.Debug("tollgate: sending progress to an MCP client", "err", err)
	}
}

// errRejected matches the go-sdk's jsonrpc2.ErrRejected (code -32005,
// internal to the SDK), which wraps a message its transport could not
// deliver: over streamable HTTP, a request on the stream of a call whose
// client is gone ("undelivered message: stream not connected or already
// closed"). jsonrpc.Error's Is compares codes only.
var errRejected = &jsonrpc.Error{Code: -32005}

// clientAnswered: the ping's error is one the client sent (the SDK
// hands a JSON-RPC error response on as a *jsonrpc.Error). Its own
// errors are also *jsonrpc.Error, but a transport's rejection is not an
// answer: nobody heard the ping.
func clientAnswered(err error) bool {
	var rpcErr *jsonrpc.Error
	return errors.As(err, &rpcErr) && !errors.Is(err, errRejected)
}

// pingClient closes gone when the client's transport could not deliver a
// ping (the call's stream is gone: so would its result be), or when it
// misses two pings in a row. A probe pings at once, beside a ping still
// waiting for its answer (sent before the stream was gone, it would wait
// its whole timeout).
func (g *Gateway) pingClient(ctx context.Context, ss *mcp.ServerSession, probe <-chan struct{}, gone chan struct{}) {
	if ss == nil {
		return
	}
	every := max(2*g.cfg.Progress, 200*time.Millisecond)
	results := make(chan error, 2) // at most two pings out at once
	outstanding := 0
	send := func() {
		outstanding++
		go func() {
			pctx, cancel := context.WithTimeout(ctx, g.cfg.PingTimeout)
			defer cancel()
			results <- ss.Ping(pctx, nil)
		}()
	}
	var wait <-chan time.Time
	stop := func() {}
	defer func() { stop() }()
	missed := 0
	for {
		if wait == nil && outstanding == 0 {
			wait, stop = g.clock.After(every)
		}
		select {
		case <-ctx.Done():
			return
		case <-wait:
			wait = nil
			send()
		case <-probe:
			if outstanding < 2 {
				stop()
				wait = nil
				send()
			}
		case err := <-results:
			outstanding--
			if ctx.Err() != nil {
				return
			}
			switch {
			case err == nil || clientAnswered(err):
				// Any answer, an error too, shows the client is there.
				missed = 0
				continue
			case errors.Is(err, errRejected):
				g.log.Info("tollgate: the connection of an MCP client whose call waits is gone; the call is given up", "err", err)
				close(gone)
				return
			}
			if missed++; missed >= 2 {
				g.log.Info("tollgate: an MCP client whose call waits does not answer pings; the call is given up", "err", err)
				close(gone)
				return
			}
		}
	}
}

// sessionLost is told that an HTTP request of a session ended because
// its client's connection was lost: the session's waiting calls ping
// their client now, rather than at their next ping.
func (g *Gateway) sessionLost(session string) {
	for _, lc := range g.sessionCalls(session) {
		select {
		case lc.probe <- struct{}{}:
		default:
		}
	}
}

// sessionEnded is told that a client ends its session (an HTTP DELETE):
// its calls are given up now, as a cancel gives them up (the SDK's close
// of the session waits for their handlers).
func (g *Gateway) sessionEnded(session string) {
	for _, lc := range g.sessionCalls(session) {
		lc.mu.Lock()
		awaiting := lc.awaiting
		lc.mu.Unlock()
		if awaiting {
			// Between rounds no handler holds the call.
			g.forget(lc)
			g.abandon(lc.thread, "the MCP client ended its session")
			continue
		}
		lc.endOnce.Do(func() { close(lc.ended) })
	}
}

// sessionCalls are the live calls of a session (by its MCP session ID).
func (g *Gateway) sessionCalls(session string) []*liveCall {
	if session == "" {
		return nil
	}
	g.mu.Lock()
	calls := make([]*liveCall, 0, len(g.live))
	for _, lc := range g.live {
		calls = append(calls, lc)
	}
	g.mu.Unlock()
	var out []*liveCall
	for _, lc := range calls {
		lc.mu.Lock()
		ss := lc.session
		lc.mu.Unlock()
		if ss != nil && ss.ID() == session {
			out = append(out, lc)
		}
	}
	return out
}

// abandon aborts a call no client waits for: nothing is applied for it
// any more (a call already running upstream is cancelled there).
func (g *Gateway) abandon(thread, reason string) {
	g.mu.Lock()
	closing := g.closing
	g.mu.Unlock()
	if closing {
		return // Shutdown aborts it
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.host.Abort(ctx, thread, reason); err != nil && !errors.Is(err, host.ErrClosed) {
		g.log.Warn("tollgate: aborting a call its client left", "thread", thread, "err", err)
	}
}

// maxElicitArgs bounds the arguments shown in a client's form.
const maxElicitArgs = 4000

// inputAnswer is the id of the gateway's one input request.
const inputAnswer = "tollgate_approval"

// inputRequest ends this round of the call with a request that the
// client's own user approve it. The call stays live for the client's
// next round; if none comes before the question's deadline (or half an
// hour), the call is abandoned.
func (g *Gateway) inputRequest(lc *liveCall, q *checkpoint.Question) *mcp.CallToolResult {
	r, err := hitl.RequestOf(q)
	if err != nil {
		return nil
	}
	raw, _ := json.MarshalIndent(r.Payload.Args, "", "  ")
	if len(raw) > maxElicitArgs {
		// The client's user would approve what they could not see whole:
		// the question is left to the page, which shows all of it.
		g.log.Info("tollgate: a call's arguments are too long to ask the MCP client's user; the question waits on the page", "thread", lc.thread, "bytes", len(raw))
		return nil
	}
	// Invisible and direction-changing characters are shown, as the page
	// shows them: what the user reads is what runs.
	args := display.Text(string(raw))
	msg := fmt.Sprintf("tollgate asks you to approve a tool call.\n\nTool: %s\nServer: %v\nArguments:\n%s", r.Payload.ToolName, r.Payload.Details["mcp_server"], args)
	if n := display.Hidden(string(raw)); n > 0 {
		msg += fmt.Sprintf("\n\n⚠ The arguments hold %d invisible or direction-changing characters, shown as ⟨U+…⟩: read them carefully.", n)
	}
	if impact, ok := r.Payload.Details["impact"].(string); ok && impact != "" {
		msg += "\n\nWhy it asks: " + impact
	}
	grace := 30 * time.Minute
	if !q.Deadline.IsZero() {
		grace = min(grace, time.Until(q.Deadline)+5*time.Second)
	}
	lc.mu.Lock()
	lc.pending = q
	lc.round++
	round := lc.round
	if !lc.awaiting {
		lc.awaiting, lc.back = true, make(chan struct{})
	}
	lc.mu.Unlock()
	time.AfterFunc(grace, func() {
		lc.mu.Lock()
		stale := lc.round == round
		lc.mu.Unlock()
		if stale && g.liveCall(lc.thread) == lc {
			g.forget(lc)
			g.abandon(lc.thread, "the MCP client did not come back with its user's answer")
		}
	})
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{inputAnswer: &mcp.ElicitParams{Mode: "form", Message: msg, RequestedSchema: elicitSchema}},
		RequestState:  g.sign(lc.thread + "/" + q.ID),
	}
}

// resumeCall is the client's next round of a call whose user was asked:
// the answer is recorded as theirs, and the call waits on.
func (g *Gateway) resumeCall(ctx context.Context, req *mcp.CallToolRequest, e exposedTool) *mcp.CallToolResult {
	state, ok := g.verify(req.Params.RequestState)
	thread, qid, _ := strings.Cut(state, "/")
	if !ok {
		return retryable("the call this answer is for no longer exists (the gateway restarted): not made; call it again")
	}
	lc := g.liveCall(thread)
	if lc == nil {
		// A round replayed after its call ended (a lost response): what
		// the thread holds is the call's outcome, made or not.
		if r := g.outcome(ctx, thread); r != nil {
			return g.clientResult(*r)
		}
		return retryable("the call this answer is for was given up before it ran: not made; call it again")
	}
	lc.mu.Lock()
	lc.round++ // the grace timer of the last round is void
	lc.session = req.Session
	q := lc.pending
	lc.mu.Unlock()
	if q != nil && q.ID == qid {
		if resp, ok := req.Params.InputResponses[inputAnswer].(*mcp.ElicitResult); ok {
			g.answerElicited(lc, q, resp)
		}
	}
	lc.endRound() // after the answer: a run that waited for the client's return goes on
	return g.await(ctx, req, lc, e)
}

// answerElicited records the client's user's answer. The question is on
// the page too: whichever answer comes first wins, the other is refused
// as already answered. A dismissed form (cancel) leaves it waiting.
func (g *Gateway) answerElicited(lc *liveCall, q *checkpoint.Question, res *mcp.ElicitResult) {
	var a hitl.ApproveAnswer
	switch res.Action {
	case "accept":
		a.Decision = hitl.DecisionDeny
		if res.Content["approve"] == true {
			a.Decision = hitl.DecisionApprove
		}
		a.Reason, _ = res.Content["reason"].(string)
	case "decline":
		a = hitl.ApproveAnswer{Decision: hitl.DecisionDeny, Reason: "the MCP client's user declined the call"}
	default:
		return
	}
	a.Digest = q.Digest
	raw, _ := json.Marshal(a)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := g.host.Answer(ctx, q.ThreadID, q.ID, raw, "user of MCP client "+lc.client); err != nil {
		g.log.Info("tollgate: the MCP client's user answered, and the answer was not taken", "thread", q.ThreadID, "question", q.ID, "err", err)
	}
}

// sign and verify keep a call's request state from being forged: a
// client could otherwise answer another client's question.
func (g *Gateway) sign(state string) string {
	m := hmac.New(sha256.New, g.key[:])
	m.Write([]byte(state))
	return state + "." + hex.EncodeToString(m.Sum(nil))
}

func (g *Gateway) verify(signed string) (string, bool) {
	i := strings.LastIndexByte(signed, '.')
	if i < 0 {
		return "", false
	}
	state := signed[:i]
	return state, hmac.Equal([]byte(g.sign(state)), []byte(signed))
}

func (g *Gateway) waitingMessage(thread string, e exposedTool) string {
	qs, _, err := g.cfg.Store.ListQuestions(context.Background(), checkpoint.QuestionFilter{ThreadID: thread, Status: checkpoint.QuestionPending, Limit: 1})
	if err != nil || len(qs) == 0 {
		return fmt.Sprintf("tollgate: %s of %s is running", e.tool.Name, e.upstream.Name())
	}
	msg := fmt.Sprintf("tollgate: waiting for a person to approve %s of %s (question %s, thread %s)", e.tool.Name, e.upstream.Name(), qs[0].ID, thread)
	if !qs[0].Deadline.IsZero() {
		msg += fmt.Sprintf("; it times out at %s", qs[0].Deadline.UTC().Format(time.RFC3339))
	}
	if g.cfg.ReviewURL != "" {
		msg += "; answer at " + g.cfg.ReviewURL
	}
	return msg
}

// clientResult is what the client receives for the run's tool result: the
// upstream's result as it came, or an error result that says why the call
// was not made.
func (g *Gateway) clientResult(r agent.ToolResult) *mcp.CallToolResult {
	if raw, ok := r.Details["mcp_result"]; ok {
		res := decodeResult(raw)
		if res == nil {
			return errorResult("tollgate: the server's result could not be read back")
		}
		// A reviewer's edit is the client's to know: what ran is not what
		// it asked for.
		if trace, _ := r.Details["hitl"].(map[string]any); trace["decision"] == "edit" {
			by, _ := trace["by"].(string)
			edited, _ := json.Marshal(trace["edited_args"])
			note := fmt.Sprintf("tollgate: a reviewer (%s) edited the arguments before the call ran; it ran with %s", by, edited)
			res.Content = append([]mcp.Content{&mcp.TextContent{Text: note}}, res.Content...)
			if res.Meta == nil {
				res.Meta = mcp.Meta{}
			}
			res.Meta["tollgate/edited_args"] = trace["edited_args"]
		}
		return res
	}
	trace, _ := r.Details["hitl"].(map[string]any)
	decision, _ := trace["decision"].(string)
	g.mu.Lock()
	closing := g.closing
	g.mu.Unlock()
	if closing && decision == "aborted" {
		return retryable("the MCP gateway is shutting down: the call was not made; call it again in a moment")
	}
	switch decision {
	case "policy_deny":
		return errorResult("tollgate: the call was blocked by the policy: " + r.Content)
	case "human_deny":
		by, _ := trace["by"].(string)
		if by != "" {
			by = " (" + by + ")"
		}
		return errorResult("tollgate: a reviewer denied the call" + by + ": " + r.Content)
	case "timed_out":
		return errorResult("tollgate: nobody approved the call in time, so it was not made")
	case "aborted":
		return errorResult("tollgate: the call was aborted: " + r.Content)
	}
	if r.IsError {
		return errorResult("tollgate: " + r.Content)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: r.Content}}}
}

// decodeResult reads back the server's result kept in a tool result's
// details (json.RawMessage in the run, a decoded value once stored).
func decodeResult(raw any) *mcp.CallToolResult {
	var b []byte
	switch v := raw.(type) {
	case json.RawMessage:
		b = v
	default:
		b, _ = json.Marshal(v)
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(b, &res); err != nil {
		return nil
	}
	return &res
}

func errorResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// retryable is an error result a client may retry: the call was not made.
func retryable(text string) *mcp.CallToolResult {
	r := errorResult("tollgate: " + text)
	r.Meta = mcp.Meta{"tollgate/retryable": true}
	return r
}

func describeClient(ss *mcp.ServerSession) string {
	name := "unknown client"
	if ss == nil {
		return name
	}
	if p := ss.InitializeParams(); p != nil && p.ClientInfo != nil {
		name = p.ClientInfo.Name
		if p.ClientInfo.Version != "" {
			name += " " + p.ClientInfo.Version
		}
	}
	if id := ss.ID(); id != "" {
		name += " (session " + shorten(id, 12) + ")"
	}
	return name
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

func newThreadID() string {
	var b [9]byte
	_, _ = rand.Read(b[:])
	return "mcp-" + hex.EncodeToString(b[:])
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

// callOf finds the call of a thread's run: the envelope in the thread's
// first message, signed by this process, naming this thread. A run that
// is not a live client's call (a message posted through the API, a thread
// a previous process left) has none.
func (g *Gateway) callOf(thread string, msgs []agent.Message) (envelope, bool) {
	if len(msgs) == 0 || msgs[0].Role != agent.RoleUser || msgs[0].Result != nil {
		return envelope{}, false
	}
	text := msgs[0].Text
	i := strings.LastIndex(text, "\n"+envelopeMark)
	if i < 0 {
		return envelope{}, false
	}
	raw, ok := g.verify(text[i+1+len(envelopeMark):])
	if !ok {
		return envelope{}, false
	}
	var env envelope
	if err := json.Unmarshal([]byte(raw), &env); err != nil || env.Thread != thread {
		return envelope{}, false
	}
	return env, true
}

// watch follows the host's events: a run that stopped on an error is
// reported to its client, and an approval question for a call whose rule
// asks the client's own user goes to that user by elicitation.
func (g *Gateway) watch(ctx context.Context, events <-chan agent.Event) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				return
			}

			switch ev := ev.(type) {
			case *agent.RunFinishedEvent, *agent.AgentAbortedEvent:
				if lc := g.liveCall(ev.Meta().ThreadID); lc != nil {
					g.settle(ctx, lc)
				}
			case *agent.HitlRequestEvent:
				if lc := g.liveCall(ev.Meta().ThreadID); lc != nil && ev.Question != nil && ev.Question.Status == checkpoint.QuestionPending {
					lc.mu.Lock()
					ss := lc.session // a later round's, after an input request
					lc.mu.Unlock()
					if wantsElicit(ev.Question) && supportsElicitation(ss) {
						q := ev.Question
						lc.elicit.Do(func() { lc.elicitNow <- q })
					}
				}
			}
		}
	}
}

// outcome is the result a finished thread holds, or nil.
func (g *Gateway) outcome(ctx context.Context, thread string) *agent.ToolResult {
	th, err := g.cfg.Store.LoadThread(ctx, thread)
	if err != nil {
		return nil
	}
	if state, _ := g.host.State(th); state != host.RunIdle {
		return nil
	}
	var msgs []agent.Message
	if err := json.Unmarshal(th.Messages, &msgs); err != nil {
		return nil
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Result != nil {
			return msgs[i].Result
		}
	}
	return nil
}

// settle hands a call the outcome its thread holds, if its run is over:
// the relay hands on every result a run reaches, but a run can end
// without reaching one (an abort from the page writes the result without
// a model call; a run can stop on an error), and an event can be missed.
func (g *Gateway) settle(ctx context.Context, lc *liveCall) {
	th, err := g.cfg.Store.LoadThread(ctx, lc.thread)
	if err != nil {
		return
	}
	state, runErr := g.host.State(th)
	switch state {
	case host.RunFailed:
		if runErr == nil {
			runErr = errors.New("the run stopped on an error")
		}
		select {
		case lc.failed <- runErr:
		default:
		}
	case host.RunIdle:
		var msgs []agent.Message
		if err := json.Unmarshal(th.Messages, &msgs); err != nil {
			return
		}
		for i := len(msgs) - 1; i >= 0; i-- {
			if r := msgs[i].Result; r != nil {
				select {
				case lc.result <- *r:
				default:
				}
				return
			}
		}
		if len(msgs) > 0 {
			select {
			case lc.failed <- errors.New("the run ended without a result"):
			default:
			}
		}
	}
}

func (g *Gateway) liveCall(thread string) *liveCall {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.live[thread]
}

// returnWait bounds how long an approved call waits for its client to
// come back from asking its user; past it the call is not made.
const returnWait = 30 * time.Second

// liveCheck refuses a call no client waits for any more.
type liveCheck struct{ g *Gateway }

func (l *liveCheck) BeforeTool(ctx context.Context, call *agent.ToolCallContext) (agent.Decision, error) {
	lc := l.g.liveCall(call.ThreadID)
	if lc != nil {
		// Answered on the page while the client's user was being asked in
		// the client: the call runs only once the client is back (it may
		// have failed the form and gone).
		lc.mu.Lock()
		awaiting, back := lc.awaiting, lc.back
		lc.mu.Unlock()
		if awaiting {
			// Bounded: the wait holds one of the host's resume slots.
			wait, stop := l.g.clock.After(returnWait)
			select {
			case <-back:
			case <-wait:
				// The client did not come back: its call is given up.
				l.g.forget(lc) // and so the call is blocked below
			case <-ctx.Done():
				stop()
				return agent.Decision{}, ctx.Err()
			}
			stop()
		}
		if l.g.liveCall(call.ThreadID) == lc {
			return agent.Continue(), nil
		}
	}
	return agent.Block("the MCP client's call no longer exists (it was cancelled, or the gateway restarted): not made", map[string]any{
		"hitl": map[string]any{"decision": "aborted", "reason": "no client waits for the call"}}), nil
}

// relay is the gateway's "model": the first turn makes the client's call;
// the next hands the call's result to the waiting client and ends the run.
type relay struct{ g *Gateway }

func (r relay) Complete(ctx context.Context, req *agent.Request, _ func(string)) (*agent.Message, error) {
	// The run is a call only if the thread's one user message is a live
	// client's envelope: a message posted to a gateway thread through the
	// API starts a run that makes nothing.
	users := 0
	for _, m := range req.Messages {
		if m.Role == agent.RoleUser && m.Result == nil {
			users++
		}
	}
	env, ok := r.g.callOf(agent.ThreadFrom(ctx), req.Messages)
	if !ok || users != 1 {
		return &agent.Message{Role: agent.RoleAssistant, StopReason: agent.StopEndTurn,
			Text: "This thread is a call an MCP client made through tollgate's gateway; a message here makes no call."}, nil
	}
	var result *agent.ToolResult
	for i := len(req.Messages) - 1; i > 0; i-- {
		if req.Messages[i].Result != nil {
			result = req.Messages[i].Result
			break
		}
	}
	if result == nil {
		return &agent.Message{Role: agent.RoleAssistant, StopReason: agent.StopToolUse,
			ToolCalls: []agent.ToolCall{{ID: "call_1", Name: env.AgentTool, Arguments: env.Arguments}}}, nil
	}
	// The turn's result was stored before this call: hand it on. (A call
	// made twice, after a crash, hands it on twice: the first is taken.)
	if lc := r.g.liveCall(env.Thread); lc != nil {
		select {
		case lc.result <- *result:
		default:
		}
	}
	return &agent.Message{Role: agent.RoleAssistant, Text: "relayed the result to the MCP client", StopReason: agent.StopEndTurn}, nil
}

// wantsElicit: the rule that asked says the client's own user may answer.
func wantsElicit(q *checkpoint.Question) bool {
	if q.Kind != hitl.KindApprove {
		return false
	}
	r, err := hitl.RequestOf(q)
	return err == nil && r.Payload.Details["elicit"] == true
}

func supportsElicitation(ss *mcp.ServerSession) bool {
	if ss == nil {
		return false
	}
	p := ss.InitializeParams()
	return p != nil && p.Capabilities != nil && p.Capabilities.Elicitation != nil &&
		(p.Capabilities.Elicitation.Form != nil || p.Capabilities.Elicitation.URL == nil)
}

// elicitSchema is the form the client's user answers: approve or not,
// and why not.
var elicitSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"approve": map[string]any{"type": "boolean", "title": "Approve this call", "description": "Run the call exactly as shown"},
		"reason":  map[string]any{"type": "string", "title": "Reason", "description": "If you deny it: what the agent should do instead"},
	},
	"required": []string{"approve"},
}
