package mcpgate

import (
	"context"
	"errors"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-ai/tollgate/host"
)

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
