package mcpgate

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/internal/display"
)

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
