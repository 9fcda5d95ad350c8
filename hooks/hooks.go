package hooks

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/hooks/client"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/policy"
)

// Config builds a [Service].
type Config struct {
	// Store is the store of the host that drives the hooks' threads.
	Store checkpoint.Store
	// Policy decides every call (a policy file's HITL(): the built-in
	// one for coding agents is examples/policies/coding-agent.yaml). It
	// sees the call's tool and input, the thread, and as Dir the
	// directory the agent works in. Required.
	Policy hitl.Policy
	// Explain, if set, is the policy file's decision on a call, asked of
	// the calls the policy allows: its rule is said to the agent, and
	// the sandbox profile it requires is what a confined Bash call runs
	// under (read-only when it requires none).
	Explain func(ctx context.Context, c policy.Call) policy.Decision
	// MaxTimeout, if set, is the longest a question of Policy waits
	// (policy.Policy.MaxTimeout, of the policy in force), which an
	// installed hook must outwait.
	MaxTimeout func() time.Duration
	// ThreadBytes bounds a session's thread: once its messages pass it,
	// the session's calls go on its next thread. A call the host runs
	// (one the policy asks about or blocks) reads and decodes its whole
	// thread: a session kept on one thread would make each such call
	// slower than the last, some 3 ms more for every 100 KiB on a busy
	// two-core machine (bench/README.md, "Coding agents' hooks"); a call
	// allowed at once reads none. Zero: 64 KiB, some 40 calls of a shell
	// or a small edit.
	ThreadBytes int
	// Logger receives the service's own messages. Zero: slog.Default().
	Logger *slog.Logger
}

// Service takes the hooks of coding agents (Claude Code, Codex): each
// tool call an agent is about to make is decided by the policy, asked of
// a person when the policy says so, and answered to the agent's hook;
// each result it reports is recorded. A session of an agent is a thread
// (named after the agent and the session id: claude-code:ID); each call
// is one run on it, driven by the host like every other run (or, for a
// call the policy allows at once, written as that run in one commit: see
// the package's doc), whose "model" relays the agent's call: so a
// relayed call gets the durable question bound to the call's digest, the
// compare-and-set answer, deadlines, edits checked against the tool's
// schema and the policy, and the audit log — the same mechanism as
// tollgate's own runs, not a copy.
//
// A call the agent makes while every thread of its session waits for a
// person (agents run some calls at once) goes on a further thread of the
// session, claude-code:ID~2, so that no call waits behind another's
// question; so does a call once the session's thread holds
// Config.ThreadBytes.
//
// Build it, give [Service.Kind] to the host's Config.Kinds, then
// [Service.Start] it with the host.
type Service struct {
	cfg      Config
	log      *slog.Logger
	tools    *toolSet
	host     *host.Host
	unsub    func()
	stop     chan struct{}
	stopped  sync.WaitGroup
	stopOnce sync.Once

	// slowOnly: every call is a run of the host (tests that compare
	// the fast path with it).
	slowOnly bool

	mu        sync.Mutex
	sessions  map[string]*session // by the session's first thread
	closing   chan struct{}       // closed by Shutdown
	lastSweep time.Time
	waiters   int           // hooks waiting for their call's outcome, in all sessions
	drained   chan struct{} // made by Shutdown while waiters > 0; closed when none is left
}

// New returns a service for cfg.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil || cfg.Policy == nil {
		return nil, errors.New("hooks: a service needs Store and Policy")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ThreadBytes <= 0 {
		cfg.ThreadBytes = 64 << 10
	}
	s := &Service{cfg: cfg, log: cfg.Logger, sessions: map[string]*session{}, closing: make(chan struct{}), stop: make(chan struct{})}
	s.tools = &toolSet{schemas: builtinSchemas(), handler: s.handOn}
	return s, nil
}

// Kind is the template of the hooks' threads, for host.Config.Kinds: the
// relay "model", the agents' tools, and the approval middleware with the
// service's policy.
func (s *Service) Kind() host.Kind {
	channel := hitl.NewCheckpointedChannel(s.cfg.Store, "", nil)
	return host.Kind{
		Name:  "coding agents' hooks",
		Match: IsThread,
		Agent: agent.Config{
			Provider: relay{s},
			ToolFor:  s.tools.tool,
			// One call a run: a second turn only ends it.
			MaxTurns:    2,
			MaxArgBytes: maxInput,
			Logger:      s.log,
			Middleware:  []agent.Middleware{hitl.NewApprovalPolicyMiddleware(channel, s.policy())},
		},
	}
}

// maxInput bounds a call's input: an agent writes whole files.
const maxInput = 8 << 20

// MaxTimeout is the longest a question waits for a person (Config's
// MaxTimeout; zero when unknown).
func (s *Service) MaxTimeout() time.Duration {
	if s.cfg.MaxTimeout == nil {
		return 0
	}
	return s.cfg.MaxTimeout()
}

// Start takes the host that drives the service's threads (one built with
// [Service.Kind]) and follows its events until [Service.Shutdown].
func (s *Service) Start(h *host.Host) error {
	if h == nil {
		return errors.New("hooks: Start needs the host")
	}
	s.host = h
	events, unsub := h.Subscribe(8192)
	s.unsub = unsub
	s.stopped.Add(1)
	go s.follow(events)
	return nil
}

// Shutdown stops taking calls. A hook waiting for a person is answered:
// tollgate's own command hook is told to send the call again (its
// question stays, and the service that comes next finds it); an agent's
// http hook, which would not, is denied and its question withdrawn (a
// later answer would be applied to a call no agent waits for). Call it
// before the host's Shutdown.
func (s *Service) Shutdown() {
	s.mu.Lock()
	select {
	case <-s.closing:
	default:
		close(s.closing)
	}
	if s.waiters > 0 && s.drained == nil {
		s.drained = make(chan struct{})
	}
	drained := s.drained
	s.mu.Unlock()
	// Waiters answer, and withdraw what they must, within a moment.
	if drained != nil {
		t := time.NewTimer(5 * time.Second)
		select {
		case <-drained:
		case <-t.C:
		}
		t.Stop()
	}
	s.stopOnce.Do(func() {
		if s.unsub != nil {
			close(s.stop)
			s.unsub()
			s.stopped.Wait()
		}
	})
}

// addWaiter counts a hook waiting for c's outcome; s.mu is held.
func (s *Service) addWaiter(c *call) {
	c.waiters++
	s.waiters++
}

// doneWaiter counts one less; the last one tells Shutdown. s.mu is held.
func (s *Service) doneWaiter(c *call) {
	c.waiters--
	s.waiters--
	if s.waiters == 0 && s.drained != nil {
		close(s.drained)
		s.drained = nil
	}
}

// CallOptions say who calls and how it waits.
type CallOptions struct {
	// Retries: the caller sends the call again when told to (tollgate's
	// own command hook does; an agent's http hook does not). Its question
	// then outlives its connection: the call is found again by its id.
	Retries bool
	// Wait is how long the caller can wait for an answer (its agent
	// stops the hook after its timeout). A question is given no longer;
	// a call still waiting when it passes is withdrawn and denied. Zero:
	// unknown, no bound.
	Wait time.Duration
	// Confine, if set, asks that a Bash call the policy allows run
	// confined by the kernel on the agent's machine (see [Confine]).
	Confine *Confine
}

// Confine is what a command hook says of confinement on its machine
// (client.Confine).
type Confine = client.Confine

// Response is the answer to a hook: an HTTP status and the body the
// agent reads.
type Response struct {
	// Status is 200, or 503 when the caller should send the call again
	// (only for callers that retry).
	Status int
	Body   []byte
}

// Handle serves one hook call of an agent: body is what the agent sent.
// A PreToolUse is decided (and waited for, while a person answers); a
// PostToolUse or PostToolUseFailure is recorded; other events are
// answered with nothing to do. Whatever goes wrong is a deny, never a
// silent allow.
func (s *Service) Handle(ctx context.Context, a Agent, body []byte, opts *CallOptions) Response {
	if opts == nil {
		opts = &CallOptions{}
	}
	p, err := parsePayload(body)
	if err != nil {
		return Response{Status: 200, Body: Refusal(a, err.Error())}
	}
	switch p.Event {
	case EventPreToolUse:
		return s.pre(ctx, a, p, opts)
	case EventPostToolUse, EventPostToolUseFailure:
		if err := s.post(ctx, a, p); err != nil {
			s.log.Warn("tollgate: recording a coding agent's tool result", "agent", a, "session", p.SessionID, "call", p.ToolUseID, "err", err)
		}
	}
	return Response{Status: 200, Body: emptyOutput}
}

func (s *Service) isClosing() bool {
	select {
	case <-s.closing:
		return true
	default:
		return false
	}
}

func (s *Service) pre(ctx context.Context, a Agent, p *payload, opts *CallOptions) Response {
	deny := func(reason string) Response {
		return Response{Status: 200, Body: render(a, verdict{decision: "deny", reason: "tollgate: " + reason}, p.ToolInput)}
	}
	if s.host == nil {
		return deny("the hooks service is not started")
	}
	if s.isClosing() {
		if opts.Retries {
			return Response{Status: 503, Body: render(a, verdict{decision: "deny", reason: "tollgate: the server is restarting; send the call again"}, p.ToolInput)}
		}
		return deny("the server is shutting down: the call was not decided")
	}
	sess, err := s.session(ctx, a, p.SessionID)
	if err != nil {
		return deny("the session's threads could not be read: " + err.Error())
	}
	c, err := s.callFor(ctx, sess, p, opts)
	if errors.Is(err, errOtherCall) {
		return deny(err.Error())
	}
	if err != nil {
		return deny("the call could not be recorded, so it was not decided: " + err.Error())
	}
	out, status := s.await(ctx, c, opts)
	switch status {
	case waitRetry:
		return Response{Status: 503, Body: render(a, verdict{decision: "deny", reason: "tollgate: the server is restarting; send the call again"}, p.ToolInput)}
	case waitGone:
		return deny("the hook stopped waiting")
	}
	v := verdict{decision: "deny", reason: out.reason}
	if out.allow {
		v = verdict{decision: "allow", reason: out.reason, input: out.input}
	}
	return Response{Status: 200, Body: render(a, v, p.ToolInput)}
}
