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
	"hash"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/host"
)

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

func (g *Gateway) liveCall(thread string) *liveCall {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.live[thread]
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
	// The envelope is signed: a message posted to a thread through the API
	// cannot pass for a client's call.
	prompt := fmt.Sprintf("MCP client %s calls tool %s of server %s.\n%s%s", client, e.tool.Name, e.upstream.Name(), envelopeMark, g.sign(string(env)))
	ac, ok := g.allowed(ctx, e, thread, prompt, args)
	lc := &liveCall{thread: thread, client: client, session: req.Session,
		result: make(chan agent.ToolResult, 1), failed: make(chan error, 1), elicitNow: make(chan *checkpoint.Question, 1),
		probe: make(chan struct{}, 1), ended: make(chan struct{})}
	g.mu.Lock()
	if g.closing {
		g.mu.Unlock()
		return retryable(shuttingDown)
	}
	g.live[thread] = lc
	g.lives.Enter()
	g.mu.Unlock()
	if ok {
		return g.runAllowed(ctx, req, lc, e, ac)
	}
	if _, _, err := g.host.Prompt(ctx, thread, prompt, nil); err != nil {
		g.forget(lc)
		if errors.Is(err, host.ErrClosed) {
			return retryable(shuttingDown)
		}
		return retryable("tollgate could not record the call, so it was not made: " + err.Error())
	}
	return g.await(ctx, req, lc, e)
}

func (g *Gateway) forget(lc *liveCall) {
	g.mu.Lock()
	if g.live[lc.thread] == lc {
		delete(g.live, lc.thread)
		g.lives.Leave()
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
	pinged := make(chan struct{})
	defer func() {
		endRound()
		<-pinged // the round's pinger has returned
	}()
	lc.progress.start(roundCtx, req.Session, req.Params.GetProgressToken())
	defer lc.progress.stop()
	go func() {
		defer close(pinged)
		g.pingClient(roundCtx, req.Session, lc.probe, gone)
	}()
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
	return agent.Block(notLive, map[string]any{"hitl": notLiveTrace()}), nil
}

// notLive is the result of a call no client waits for any more.
const notLive = "the MCP client's call no longer exists (it was cancelled, or the gateway restarted): not made"

func notLiveTrace() map[string]any {
	return map[string]any{"decision": "aborted", "reason": "no client waits for the call"}
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
	return &agent.Message{Role: agent.RoleAssistant, Text: relayedText, StopReason: agent.StopEndTurn}, nil
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

// sign and verify keep a call's request state from being forged: a
// client could otherwise answer another client's question.
// newSigner is an HMAC keyed with the gateway's key (see signers).
func (g *Gateway) newSigner() any { return hmac.New(sha256.New, g.key[:]) }

func (g *Gateway) sign(state string) string {
	m := g.signers.Get().(hash.Hash)
	m.Reset() // keyed again: an HMAC's Reset keeps its key
	m.Write([]byte(state))
	var sum [sha256.Size]byte
	m.Sum(sum[:0])
	g.signers.Put(m)
	return state + "." + hex.EncodeToString(sum[:])
}

func (g *Gateway) verify(signed string) (string, bool) {
	i := strings.LastIndexByte(signed, '.')
	if i < 0 {
		return "", false
	}
	state := signed[:i]
	return state, hmac.Equal([]byte(g.sign(state)), []byte(signed))
}

func newThreadID() string {
	var b [9]byte
	_, _ = rand.Read(b[:])
	return "mcp-" + hex.EncodeToString(b[:])
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
