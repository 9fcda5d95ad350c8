package mcpgate

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-ai/tollgate/agent"
)

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
