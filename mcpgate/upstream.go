package mcpgate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os/exec"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options tune connections to MCP servers. A nil *Options means all zero
// values.
type Options struct {
	// Logger receives what the servers write on stderr (at debug), their
	// restarts and their tools left out. Zero: slog.Default().
	Logger *slog.Logger
	// MaxRestarts bounds the restarts of a server that keeps failing: a
	// start that fails, or a session that ends within a minute of its
	// start, counts; a session that lasts a minute resets the count. Past
	// it, the server stays down and its calls fail with the last error.
	// Zero: 5.
	MaxRestarts int
	// RestartBackoff is the wait before the first restart; it doubles
	// with each failure up to 30 s. Zero: 250 ms.
	RestartBackoff time.Duration
	// KeepResults keeps each call's whole MCP result in the agent tool
	// result's Details["mcp_result"] (the gateway hands it to its client
	// as it came). Zero: only the text the model reads.
	KeepResults bool
	// ToolsChanged is called when a server's list of tools changes (it
	// said so, or it was restarted), with the server's name.
	ToolsChanged func(server string)
	// Client is the name tollgate gives itself to servers. Zero:
	// "tollgate".
	Client string
}

func (o *Options) orDefault() Options {
	var v Options
	if o != nil {
		v = *o
	}
	if v.Logger == nil {
		v.Logger = slog.Default()
	}
	if v.MaxRestarts == 0 {
		v.MaxRestarts = 5
	}
	if v.RestartBackoff == 0 {
		v.RestartBackoff = 250 * time.Millisecond
	}
	if v.Client == "" {
		v.Client = "tollgate"
	}
	return v
}

const (
	maxBackoff   = 30 * time.Second
	healthyAfter = time.Minute
	pingTimeout  = 5 * time.Second
	// restartWait bounds how long a call waits for a restart under way
	// (twice half of it: a restart, then one more); the agent tool's
	// timeout leaves it room beside the call's own.
	restartWait = 30 * time.Second
	// connectTimeout bounds a start: the process, initialize, tools/list.
	connectTimeout = 30 * time.Second
)

// Upstream is a connection to one MCP server, kept up: a server that dies
// or hangs is restarted, with backoff and a bound, and its tools are read
// again. Its methods are safe for concurrent use.
type Upstream struct {
	cfg  ServerConfig
	opts Options
	log  *slog.Logger

	ctx    context.Context // ends with Close
	cancel context.CancelFunc

	mu       sync.Mutex
	session  *mcp.ClientSession
	gen      int           // counts sessions; a stale session's news is ignored
	ended    chan struct{} // closed when the current session ends
	ready    chan struct{} // closed when a session is up, or the server is given up
	started  time.Time
	down     error // why no session is up
	gaveUp   bool
	failures int
	tools    []*mcp.Tool // the usable tools, in the server's order
	problems []string
	closed   bool
	stderr   *tail
	starting *exec.Cmd // the stdio process being started
	proc     *exec.Cmd // the current session's stdio process, if any

	// web is an HTTP server's connection pool, kept across sessions.
	web *http.Transport

	// progress routes the server's progress notifications to the calls
	// that asked for them, by the token each call gave.
	progressMu sync.Mutex
	progress   map[string]func(*mcp.ProgressNotificationParams)
	tokens     int
}

type progressKey struct{}

// WithProgress returns a context whose calls of a server's tool
// ([Upstream.Call], and the tools of [Upstream.AgentTools]) ask the server
// for progress notifications and hand each to report, as the server sent
// it, while the call runs.
func WithProgress(ctx context.Context, report func(*mcp.ProgressNotificationParams)) context.Context {
	return context.WithValue(ctx, progressKey{}, report)
}

// followProgress gives a call a progress token routed to report; done
// forgets it.
func (u *Upstream) followProgress(report func(*mcp.ProgressNotificationParams)) (token string, done func()) {
	u.progressMu.Lock()
	defer u.progressMu.Unlock()
	u.tokens++
	token = fmt.Sprintf("tollgate-%d", u.tokens)
	if u.progress == nil {
		u.progress = map[string]func(*mcp.ProgressNotificationParams){}
	}
	u.progress[token] = report
	return token, func() {
		u.progressMu.Lock()
		defer u.progressMu.Unlock()
		delete(u.progress, token)
	}
}

// onProgress hands a progress notification to the call whose token it
// carries; one for no call of ours (a late one) is dropped.
func (u *Upstream) onProgress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	token, _ := req.Params.ProgressToken.(string)
	u.progressMu.Lock()
	report := u.progress[token]
	u.progressMu.Unlock()
	if report != nil {
		report(req.Params)
	}
}

// Connect starts (or reaches) the server, initializes a session and reads
// its tools. A server that cannot be reached is an error: its tools are not
// known, so an agent could not be given them.
func Connect(ctx context.Context, cfg ServerConfig, opts *Options) (*Upstream, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	o := opts.orDefault()
	u := &Upstream{cfg: cfg, opts: o, log: o.Logger.With("mcp_server", cfg.Name), ready: make(chan struct{}), stderr: newTail(4096)}
	if cfg.URL != "" {
		// Each call is a request of its own, and calls run side by side:
		// http.DefaultTransport keeps 2 idle connections a host, so at 10
		// calls at once 8 connections were opened and closed for each
		// round of calls (issue 26: connect and close were 4% of the
		// gateway's CPU).
		u.web = http.DefaultTransport.(*http.Transport).Clone()
		u.web.MaxIdleConnsPerHost = maxIdlePerServer
	}
	u.ctx, u.cancel = context.WithCancel(context.Background())
	if err := u.start(ctx, false); err != nil {
		u.cancel()
		return nil, err
	}
	return u, nil
}

// Name is the server's name.
func (u *Upstream) Name() string { return u.cfg.Name }

// Config is the server's config.
func (u *Upstream) Config() ServerConfig { return u.cfg }

// Tools returns the server's usable tools as it listed them last.
func (u *Upstream) Tools() []*mcp.Tool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.tools)
}

// Problems says which tools were left out, and why (Connect does not log
// them: say them to the user).
func (u *Upstream) Problems() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.problems)
}

// Err is why the server is down, or nil if it is up.
func (u *Upstream) Err() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.down
}

// Close ends the session (and a stdio server's process).
func (u *Upstream) Close() error {
	u.mu.Lock()
	if u.closed {
		u.mu.Unlock()
		return nil
	}
	u.closed = true
	cs := u.session
	u.session = nil
	u.down = errors.New("closed")
	select { // calls waiting for a restart end now, not after 15 s
	case <-u.ready:
	default:
		close(u.ready)
	}
	u.mu.Unlock()
	u.cancel()
	var err error
	if cs != nil {
		err = cs.Close()
	}
	if u.web != nil {
		u.web.CloseIdleConnections()
	}
	return err
}

// start connects a session and reads its tools; on success it is the
// current session. The tools left out are logged on a restart (Connect's
// caller reads them from Problems, to say them in its own terms).
func (u *Upstream) start(ctx context.Context, restart bool) error {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	transport, err := u.transport()
	if err != nil {
		return err
	}
	client := mcp.NewClient(&mcp.Implementation{Name: u.opts.Client, Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler:      func(context.Context, *mcp.ToolListChangedRequest) { go u.refreshTools() },
		ProgressNotificationHandler: u.onProgress,
	})
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return u.explain(fmt.Errorf("mcpgate: starting server %s: %w", u.cfg.describe(), err))
	}
	tools, problems, err := u.listTools(ctx, cs)
	if err != nil {
		_ = cs.Close()
		return u.explain(fmt.Errorf("mcpgate: server %s: listing its tools: %w", u.cfg.describe(), err))
	}
	if restart {
		for _, p := range problems {
			u.log.Warn("tollgate: an MCP server's tool is left out", "problem", p)
		}
	}
	u.mu.Lock()
	if u.closed {
		u.mu.Unlock()
		_ = cs.Close()
		return errors.New("mcpgate: closed")
	}
	u.gen++
	gen := u.gen
	u.session, u.down, u.started = cs, nil, time.Now()
	u.proc, u.starting = u.starting, nil
	u.tools, u.problems = tools, problems
	u.ended = make(chan struct{})
	ended := u.ended
	select {
	case <-u.ready:
	default:
		close(u.ready)
	}
	u.mu.Unlock()
	go func() {
		err := cs.Wait()
		// lost first: a call that sees ended closed must find the session
		// gone (its next call waits for the restart instead of reaching
		// the dead session) and the reason in Err.
		u.lost(gen, err)
		close(ended)
	}()
	return nil
}

// lost is told that session gen ended: unless tollgate closed it, the
// server is restarted.
func (u *Upstream) lost(gen int, err error) {
	u.mu.Lock()
	if u.closed || gen != u.gen {
		u.mu.Unlock()
		return
	}
	if err == nil {
		err = errors.New("it closed the connection")
	}
	if time.Since(u.started) >= healthyAfter {
		u.failures = 0
	} else {
		u.failures++
	}
	u.session = nil
	u.down = u.explain(fmt.Errorf("the MCP server %s stopped: %w", u.cfg.describe(), err))
	u.ready = make(chan struct{})
	failures := u.failures
	u.mu.Unlock()
	u.log.Warn("tollgate: an MCP server stopped; restarting it", "err", u.redact(err), "stderr", u.stderr.String(), "failures", failures)
	go u.restart()
}

// restart starts the server again, with backoff, until it is up or has
// failed MaxRestarts times in a row.
func (u *Upstream) restart() {
	for {
		u.mu.Lock()
		if u.closed {
			u.mu.Unlock()
			return
		}
		if u.failures > u.opts.MaxRestarts {
			u.gaveUp = true
			u.down = fmt.Errorf("tollgate stopped restarting the MCP server %s after %d failures in a row (fix the server and restart tollgate); the last: %w", u.cfg.Name, u.failures, u.down)
			close(u.ready)
			u.mu.Unlock()
			u.log.Error("tollgate: an MCP server keeps failing; not restarting it again", "err", u.Err())
			return
		}
		wait := u.opts.RestartBackoff << max(u.failures-1, 0)
		u.mu.Unlock()
		select {
		case <-time.After(min(wait, maxBackoff)):
		case <-u.ctx.Done():
			return
		}
		if err := u.start(u.ctx, true); err == nil {
			u.log.Info("tollgate: an MCP server is up again")
			if u.opts.ToolsChanged != nil {
				u.opts.ToolsChanged(u.cfg.Name)
			}
			return
		} else {
			u.mu.Lock()
			u.failures++
			u.down = err
			u.mu.Unlock()
			u.log.Warn("tollgate: restarting an MCP server failed", "err", err)
		}
	}
}

// current returns the session, waiting (within ctx and a bound) for a
// restart under way.
func (u *Upstream) current(ctx context.Context) (*mcp.ClientSession, int, chan struct{}, error) {
	for range 2 {
		u.mu.Lock()
		cs, gen, ended, ready, down := u.session, u.gen, u.ended, u.ready, u.down
		gaveUp, closed := u.gaveUp, u.closed
		u.mu.Unlock()
		switch {
		case cs != nil:
			return cs, gen, ended, nil
		case closed, gaveUp:
			return nil, 0, nil, down
		}
		wait := time.NewTimer(restartWait / 2)
		select {
		case <-ready:
			wait.Stop()
		case <-wait.C:
			return nil, 0, nil, fmt.Errorf("%w; it is being restarted: try again in a moment", down)
		case <-ctx.Done():
			wait.Stop()
			return nil, 0, nil, ctx.Err()
		}
	}
	return nil, 0, nil, u.Err()
}

// ErrOutcomeUnknown marks a call that may or may not have taken effect:
// the server stopped, or did not answer in time, after it got the call.
var ErrOutcomeUnknown = errors.New("whether the call took effect is unknown")

// Call calls a tool of the server with JSON object arguments. An error
// result (the tool's own failure) is a result, not an error; an error is
// tollgate's or the connection's, and says whether the call may have taken
// effect (ErrOutcomeUnknown).
//
// The error's message is fit for the client and the thread: no URL query,
// no command line, no stderr (those are in the log).
func (u *Upstream) Call(ctx context.Context, tool string, args json.RawMessage) (*mcp.CallToolResult, error) {
	res, err := u.call(ctx, tool, args)
	return res, u.public(err)
}

func (u *Upstream) call(ctx context.Context, tool string, args json.RawMessage) (*mcp.CallToolResult, error) {
	cs, gen, ended, err := u.current(ctx)
	if err != nil {
		return nil, fmt.Errorf("mcpgate: calling %s of server %s: %w", tool, u.cfg.Name, err)
	}
	timeout := u.cfg.callTimeout()
	callCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	params := &mcp.CallToolParams{Name: tool, Arguments: args}
	if report, _ := ctx.Value(progressKey{}).(func(*mcp.ProgressNotificationParams)); report != nil {
		token, done := u.followProgress(report)
		defer done()
		params.SetProgressToken(token)
	}
	res, err := cs.CallTool(callCtx, params)
	if err == nil {
		return res, nil
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("mcpgate: calling %s of server %s: %w (%w)", tool, u.cfg.Name, ctx.Err(), ErrOutcomeUnknown)
	}
	select {
	case <-ended:
		return nil, fmt.Errorf("mcpgate: server %s stopped during the call of %s (%w); it is being restarted: %w", u.cfg.Name, tool, ErrOutcomeUnknown, u.sessionError())
	case <-time.After(200 * time.Millisecond):
	}
	if callCtx.Err() != nil {
		go u.checkAlive(gen, cs)
		return nil, fmt.Errorf("mcpgate: server %s did not answer the call of %s within %s (%w)", u.cfg.Name, tool, timeout, ErrOutcomeUnknown)
	}
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) {
		return nil, fmt.Errorf("mcpgate: server %s refused the call of %s: %w", u.cfg.Name, tool, err)
	}
	return nil, fmt.Errorf("mcpgate: calling %s of server %s: %w", tool, u.cfg.Name, err)
}

func (u *Upstream) sessionError() error {
	if err := u.Err(); err != nil {
		return err
	}
	return errors.New("the server ended the session")
}

// checkAlive pings a server whose call timed out: one that does not answer
// hangs, and is stopped (and so restarted).
func (u *Upstream) checkAlive(gen int, cs *mcp.ClientSession) {
	ctx, cancel := context.WithTimeout(u.ctx, min(pingTimeout, u.cfg.callTimeout()))
	defer cancel()
	if err := cs.Ping(ctx, nil); err == nil || u.ctx.Err() != nil {
		return
	}
	u.mu.Lock()
	current := u.gen == gen && u.session == cs
	proc := u.proc
	u.mu.Unlock()
	if !current {
		return
	}
	u.log.Warn("tollgate: an MCP server does not answer a ping after a call timed out; stopping it to restart it")
	// A hung process heeds neither a closed stdin nor SIGTERM (a stopped
	// one cannot): kill it, rather than wait the polite close's seconds.
	if proc != nil && proc.Process != nil {
		_ = proc.Process.Kill()
	}
	_ = cs.Close() // ends the session: lost restarts it
}
