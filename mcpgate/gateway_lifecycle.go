package mcpgate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/host"
)

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
	g.watched = make(chan struct{})
	go func() {
		defer close(g.watched)
		g.watch(evCtx, events)
	}()
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
	// grace): each call leaves live when its handler has its answer, and
	// the handler's return hands the answer to the SDK, which writes it
	// before a session's Close returns (Close waits for the requests in
	// flight).
	g.lives.Wait(ctx)
	// Past the grace, what still runs is cut: an allowed call is
	// cancelled, or not made if it has not started (its thread says
	// which); a run's call is left resumable by host.Shutdown, and the
	// next start aborts it, as no client waits.
	g.cutCalls()
	g.mu.Lock()
	left := len(g.live)
	g.mu.Unlock()
	if left > 0 {
		g.log.Warn("tollgate: calls still running upstream at the end of the shutdown grace are cut; their outcome is unknown", "calls", left)
	}
	g.handlers.Wait(ctx)
	g.callers.End()
	if !g.callers.Wait(ctx) {
		g.log.Warn("tollgate: allowed calls still ending at the end of the shutdown grace; a result not recorded yet is recorded as unknown at the next start")
	}
	// The SDK writes a handler's response after the handler returns, and
	// no event says when it has (go-sdk v1.8.0): a session closed at once
	// cut the last answer (the client read EOF in a CI run under -race,
	// TestGatewayShutdownLetsRunningCallsFinish). A short grace, bounded
	// by ctx, as before the handlers were counted.
	select {
	case <-time.After(responseGrace):
	case <-ctx.Done():
	}
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
		<-g.watched
	}
	return err
}

// responseGrace is how long Shutdown leaves the SDK to write the answers
// of handlers that have returned before it closes their sessions.
const responseGrace = 50 * time.Millisecond

func (g *Gateway) isLive(thread string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.live[thread]
	return ok
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
