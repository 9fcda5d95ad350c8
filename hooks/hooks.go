package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
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
	s.mu.Unlock()
	// Waiters answer, and withdraw what they must, within a moment.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && s.waiting() > 0 {
		time.Sleep(10 * time.Millisecond)
	}
	s.stopOnce.Do(func() {
		if s.unsub != nil {
			close(s.stop)
			s.unsub()
			s.stopped.Wait()
		}
	})
}

func (s *Service) waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, sess := range s.sessions {
		for _, c := range sess.calls {
			n += c.waiters
		}
	}
	return n
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

// session is what the service knows of an agent's session: its threads
// and its recent calls.
type session struct {
	agent  Agent
	base   string
	id     string
	lanes  []*lane
	calls  map[string]*call // by tool_use_id
	change chan struct{}    // closed (and replaced) when a lane is freed or asks
	seen   time.Time
	// project is the directory the session's first call was made in.
	project string
	// open: the lanes before it are full (openLanes).
	open int
	// forgotten: calls of the session may be in its threads and not in
	// calls (it was read from the store, or calls were swept): a call
	// not in calls is looked for there.
	forgotten bool
}

// lane is one thread of a session.
type lane struct {
	n      int
	thread string
	busy   *call // the call whose run holds the thread
	// held: the thread's run is one this process does not know (it was
	// running when the session was read: parked, or resumed at start).
	held  bool
	bytes int // the size of its messages, as last read or counted since
	// known: version is the thread's version as this process last read
	// or wrote it (0: no thread), for the fast path's compare-and-set;
	// false once a run of the host may have written it since.
	known   bool
	version int64
	// read: what the thread holds was read from the store (not only
	// written by this process): it may hold calls another process
	// decided, which the fast path looks for before it writes a call.
	read bool
	// checked is when a held thread was last read, to see whether its
	// run ended (an end this process may not have seen); waiting: it
	// then had a question pending.
	checked time.Time
	waiting bool
}

// call is one PreToolUse call of a session.
type call struct {
	id   string
	tool string
	// key is the tool and input the call was made with (callKey): a hook
	// sent again with the call's id is this call only if it has the same.
	key     string
	input   json.RawMessage
	sess    *session
	lane    *lane
	runID   string
	asking  bool // its question is pending
	done    chan struct{}
	decided bool
	out     outcome
	at      time.Time // when it was decided
	waiters int
}

// outcome is what the agent is told of a call.
type outcome struct {
	allow  bool
	input  json.RawMessage // allowed with another input (an edit, confinement)
	reason string
}

// openLanes is the index of the session's first thread that is not
// full: the ones before it take no call again (a thread only grows), so
// that picking a thread costs the same however long the session.
// Under s.mu.
func (sess *session) openLanes(limit int) int {
	for sess.open < len(sess.lanes) && sess.lanes[sess.open].bytes >= limit {
		sess.open++
	}
	return sess.open
}

// signal wakes whoever waits for a lane of the session. Under s.mu.
func (sess *session) signal() {
	close(sess.change)
	sess.change = make(chan struct{})
}

// session returns the session, reading its threads from the store the
// first time this process sees it.
func (s *Service) session(ctx context.Context, a Agent, id string) (*session, error) {
	base := sessionThread(a, id)
	s.mu.Lock()
	s.sweepLocked()
	sess := s.sessions[base]
	s.mu.Unlock()
	if sess != nil {
		return sess, nil
	}
	lanes, project, err := s.readLanes(ctx, base)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sess = s.sessions[base]; sess == nil {
		sess = &session{agent: a, base: base, id: id, lanes: lanes, project: project, calls: map[string]*call{},
			change: make(chan struct{}), seen: time.Now(), forgotten: len(lanes) > 0}
		s.sessions[base] = sess
	}
	return sess, nil
}

// projectOf is the session's project: the directory its first call was
// made in, which the policy's dir stays for the whole session (the agent
// may report another directory later: one it cd'd to, say).
func (s *Service) projectOf(sess *session, cwd string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sess.project == "" {
		sess.project = cwd
	}
	return sess.project
}

// readLanes reads the threads a session has in the store, and its
// project, from the first call of its first thread.
func (s *Service) readLanes(ctx context.Context, base string) (lanes []*lane, project string, err error) {
	for n := 1; ; n++ {
		th, err := s.cfg.Store.LoadThread(ctx, laneThread(base, n))
		if errors.Is(err, checkpoint.ErrNotFound) {
			return lanes, project, nil
		}
		if err != nil {
			return nil, "", err
		}
		if n == 1 {
			// The first message alone: the thread may be long.
			var first struct {
				Text string `json:"text"`
			}
			dec := json.NewDecoder(bytes.NewReader(th.Messages))
			if t, _ := dec.Token(); t == json.Delim('[') && dec.More() && dec.Decode(&first) == nil {
				if e, ok := parseEnvelope(first.Text); ok {
					project = e.dir()
				}
			}
		}
		held := th.Status == checkpoint.ThreadRunning
		lanes = append(lanes, &lane{n: n, thread: th.ID, held: held, bytes: len(th.Messages), known: !held, version: th.Version, read: true})
	}
}

// sweepInterval and keepSession say how long the service remembers a
// session with no call waiting, and a decided call (for a hook sent again
// and for the call's result).
const (
	sweepInterval = time.Minute
	keepSession   = time.Hour
	keepCall      = 30 * time.Minute
)

func (s *Service) sweepLocked() {
	now := time.Now()
	if now.Sub(s.lastSweep) < sweepInterval {
		return
	}
	s.lastSweep = now
	for base, sess := range s.sessions {
		live := false
		for id, c := range sess.calls {
			if c.decided && c.waiters == 0 && now.Sub(c.at) > keepCall {
				delete(sess.calls, id)
				sess.forgotten = true
				continue
			}
			live = true
		}
		busy := false
		for _, l := range sess.lanes {
			busy = busy || l.busy != nil
		}
		if !live && !busy && now.Sub(sess.seen) > keepSession {
			delete(s.sessions, base)
		}
	}
}

// callFor finds the call of a hook sent again (by its id: in memory, or
// in the session's threads), or starts it on a thread of the session.
func (s *Service) callFor(ctx context.Context, sess *session, p *payload, opts *CallOptions) (*call, error) {
	s.mu.Lock()
	sess.seen = time.Now()
	if c := sess.calls[p.ToolUseID]; c != nil {
		if c.key != callKey(p) {
			s.mu.Unlock()
			return nil, otherCall(p)
		}
		c.waiters++
		s.mu.Unlock()
		return c, nil
	}
	forgotten := sess.forgotten
	s.mu.Unlock()
	if forgotten {
		if c, err := s.findStored(ctx, sess, p); c != nil || err != nil {
			return c, err
		}
	}
	return s.start(ctx, sess, p, opts)
}

// errOtherCall: a hook names a call id its session already used for
// another call (another tool or input). A call's answer is the answer to
// what its reviewer saw: an agent (or whoever holds its token) that sent
// a call again with other input under the id would have had the first
// call's answer applied to it — run as it was, by an agent that takes
// allow as "run your input".
var errOtherCall = errors.New("the call's id was used before in this session for another call")

func otherCall(p *payload) error {
	return fmt.Errorf("%w (call %s; a call id names one call, with one input), so this one was not decided", errOtherCall, p.ToolUseID)
}

// callKey is what binds a hook sent again to its call: the tool and the
// input's canonical JSON.
func callKey(p *payload) string { return agent.ArgsDigest(p.ToolName, p.ToolInput) }

// idempotencyKey makes the run of a call the same run however often its
// hook is sent.
func idempotencyKey(callID string) string { return "hook:" + callID }

// findStored looks for a call this process does not remember (it started
// after the call was made) in the session's threads: its run, by the id
// the call's idempotency key gives it.
func (s *Service) findStored(ctx context.Context, sess *session, p *payload) (*call, error) {
	s.mu.Lock()
	lanes := append([]*lane(nil), sess.lanes...)
	s.mu.Unlock()
	for _, l := range lanes {
		// Its question (a run that waits for a person), or its record (a
		// call decided): reads of one row, not of the thread.
		runID := host.IdempotentRunID(l.thread, idempotencyKey(p.ToolUseID))
		var recs []*checkpoint.ToolCall
		q, err := s.cfg.Store.GetQuestion(ctx, l.thread, hitl.QuestionID(p.ToolUseID))
		switch {
		case errors.Is(err, checkpoint.ErrNotFound):
			q = nil
			recs, err = s.cfg.Store.ListToolCalls(ctx, l.thread, runID, p.ToolUseID)
			if err != nil {
				return nil, err
			}
			if len(recs) == 0 {
				continue
			}
		case err != nil:
			return nil, err
		}
		if q != nil && !sameCall(q, l.thread, p) || q == nil && !sameRecord(recs[0], p) {
			return nil, otherCall(p)
		}
		running := q != nil && q.Status == checkpoint.QuestionPending
		c, isNew, err := s.register(sess, p, func(c *call) { c.lane, c.runID = l, runID })
		if err != nil || !isNew {
			return c, err
		}
		s.mu.Lock()
		if running && l.held {
			// Its run holds the lane: it is this call's.
			l.busy, l.held = c, false
		}
		s.mu.Unlock()
		if out, ok := s.stored(ctx, c); ok {
			s.decide(c, out)
		}
		return c, nil
	}
	return nil, nil
}

// sameCall reports whether a stored question of a thread is about p's
// call: its digest binds the thread, the id, the tool and the input the
// call was made with (an edit does not change it).
func sameCall(q *checkpoint.Question, thread string, p *payload) bool {
	return q.Tool == p.ToolName && (q.Digest == agent.CallDigest(thread, p.ToolUseID, p.ToolName, p.ToolInput) ||
		q.Digest == agent.ArgsDigest(p.ToolName, p.ToolInput))
}

// sameRecord reports whether a call's record, of a call decided with no
// question (so never edited), is p's call.
func sameRecord(rec *checkpoint.ToolCall, p *payload) bool {
	return rec.Tool == p.ToolName && sameJSON(rec.Args, p.ToolInput)
}

// register makes the session's call of p, or, if it has one already (the
// hook was sent twice at once), adds a waiter to it — unless that one was
// made with another tool or input (errOtherCall). set fills in a new call
// before anyone else sees it.
func (s *Service) register(sess *session, p *payload, set func(*call)) (c *call, isNew bool, err error) {
	key := callKey(p)
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := sess.calls[p.ToolUseID]; old != nil {
		if old.key != key {
			return nil, false, otherCall(p)
		}
		old.waiters++
		return old, false, nil
	}
	c = &call{id: p.ToolUseID, tool: p.ToolName, key: key, input: p.ToolInput, sess: sess, done: make(chan struct{}), waiters: 1}
	if set != nil {
		set(c)
	}
	sess.calls[p.ToolUseID] = c
	return c, true, nil
}

// start puts the call on a thread of the session and starts its run.
func (s *Service) start(ctx context.Context, sess *session, p *payload, opts *CallOptions) (*call, error) {
	c, isNew, err := s.register(sess, p, nil)
	if err != nil || !isNew {
		return c, err
	}
	fail := func(err error) (*call, error) {
		s.mu.Lock()
		if sess.calls[c.id] == c {
			delete(sess.calls, c.id)
		}
		s.mu.Unlock()
		return nil, err
	}
	env := envelope{Agent: sess.agent, Session: sess.id, Cwd: p.Cwd, Project: s.projectOf(sess, p.Cwd), Transcript: p.TranscriptPath, PermissionMode: p.PermissionMode,
		Turn: p.TurnID, Tool: p.ToolName, Call: p.ToolUseID, Input: p.ToolInput, Confine: opts.Confine}
	if opts.Wait > 0 {
		env.WaitSeconds = int(opts.Wait / time.Second)
	}
	for attempt := 0; ; attempt++ {
		l, err := s.pickLane(ctx, sess, c)
		if err != nil {
			return fail(err)
		}
		s.mu.Lock()
		c.runID = host.IdempotentRunID(l.thread, idempotencyKey(c.id))
		first := l.bytes == 0
		s.mu.Unlock()
		text, err := env.prompt(l.n, first, sess.base)
		if err != nil {
			s.freeLane(l, c)
			return fail(err)
		}
		switch err := s.fastAllow(ctx, l, c, &env, text); {
		case err == nil:
			s.freeLane(l, c)
			return c, nil
		case !errors.Is(err, errNotFast):
			s.freeLane(l, c)
			return fail(err)
		}
		// The host's run writes the thread: its version is read again
		// before the lane's next fast commit.
		s.mu.Lock()
		l.known = false
		s.mu.Unlock()
		_, _, err = s.host.Prompt(ctx, l.thread, text, &host.PromptOptions{IdempotencyKey: idempotencyKey(c.id)})
		if errors.Is(err, host.ErrRunActive) && attempt < 16 {
			// A run this process did not know of holds the thread (one
			// left by an earlier process, resumed or parked).
			s.mu.Lock()
			if l.busy == c {
				l.busy, l.held, l.checked, l.waiting = nil, true, time.Time{}, false
			}
			s.mu.Unlock()
			continue
		}
		if err != nil {
			s.freeLane(l, c)
			return fail(err)
		}
		s.mu.Lock()
		l.bytes += len(text) + 2*len(p.ToolInput) + 1024
		s.mu.Unlock()
		return c, nil
	}
}

// laneWait is how long a call waits for a thread of its session whose
// run is deciding another call (not waiting for a person) before it takes
// a thread of its own.
const laneWait = 2 * time.Second

// pickLane finds the call a thread of the session: the first whose run
// is done, else (after waiting a moment for one that is only deciding) a
// new one.
func (s *Service) pickLane(ctx context.Context, sess *session, c *call) (*lane, error) {
	deadline := time.Now().Add(laneWait)
	for {
		s.recheckHeld(ctx, sess)
		s.mu.Lock()
		var candidates, deciding int
		for _, l := range sess.lanes[sess.openLanes(s.cfg.ThreadBytes):] {
			if l.bytes >= s.cfg.ThreadBytes {
				continue
			}
			candidates++
			if l.busy == nil && !l.held {
				l.busy = c
				c.lane = l
				s.mu.Unlock()
				return l, nil
			}
			if l.busy != nil && !l.busy.asking || l.held && !l.waiting {
				deciding++
			}
		}
		if deciding == 0 || time.Now().After(deadline) {
			l := &lane{n: len(sess.lanes) + 1, busy: c, known: true}
			l.thread = laneThread(sess.base, l.n)
			sess.lanes = append(sess.lanes, l)
			c.lane = l
			s.mu.Unlock()
			return l, nil
		}
		change := sess.change
		s.mu.Unlock()
		select {
		case <-change:
		case <-time.After(min(time.Until(deadline), recheckRunning)):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// How often a held thread is read again: one that waits for a person
// seldom, one whose run is going on often (it is about to end).
const (
	recheckWaiting = time.Second
	recheckRunning = 50 * time.Millisecond
)

// recheckHeld reads the session's held threads again: a run this process
// did not start may have ended unseen, or be waiting for a person.
func (s *Service) recheckHeld(ctx context.Context, sess *session) {
	s.mu.Lock()
	var check []*lane
	for _, l := range sess.lanes[sess.openLanes(s.cfg.ThreadBytes):] {
		every := recheckRunning
		if l.waiting {
			every = recheckWaiting
		}
		if l.held && time.Since(l.checked) >= every {
			l.checked = time.Now()
			check = append(check, l)
		}
	}
	s.mu.Unlock()
	for _, l := range check {
		qs, _, err := s.cfg.Store.ListQuestions(ctx, checkpoint.QuestionFilter{ThreadID: l.thread, Status: checkpoint.QuestionPending, Limit: 1})
		if err != nil {
			continue
		}
		waiting := len(qs) > 0
		idle, size, version := false, 0, int64(0)
		if !waiting {
			th, err := s.cfg.Store.LoadThread(ctx, l.thread)
			if err != nil {
				continue
			}
			idle, size, version = th.Status != checkpoint.ThreadRunning, len(th.Messages), th.Version
		}
		s.mu.Lock()
		if l.held {
			l.waiting = waiting
			if idle {
				l.held, l.bytes, l.known, l.version, l.read = false, size, true, version, true
			}
		}
		s.mu.Unlock()
	}
}

// freeLane lets go of a lane c held.
func (s *Service) freeLane(l *lane, c *call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.busy == c {
		l.busy = nil
		c.sess.signal()
	}
}

// decide records a call's outcome and wakes its waiters; the first
// outcome stands.
func (s *Service) decide(c *call, out outcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.decided {
		return
	}
	c.decided, c.out, c.at = true, out, time.Now()
	c.input = nil // a whole file, for a Write: no longer needed
	c.asking = false
	close(c.done)
}

type waitStatus int

const (
	waitDecided waitStatus = iota
	waitRetry              // the server stops: send the call again
	waitGone               // the caller went away
)

// pollEvery is how often a waiting call reads its outcome from the store,
// in case it was decided where this process did not see it (another
// replica resumed the run after an answer) or an event was lost.
const pollEvery = 500 * time.Millisecond

// await waits for the call's outcome, or for the caller's time to run out
// (the call is then withdrawn and denied).
func (s *Service) await(ctx context.Context, c *call, opts *CallOptions) (outcome, waitStatus) {
	defer func() {
		s.mu.Lock()
		c.waiters--
		s.mu.Unlock()
	}()
	var limit <-chan time.Time
	if opts.Wait > 0 {
		// A moment before the agent stops the hook: a hook stopped by its
		// agent lets the agent's own rules decide.
		t := time.NewTimer(max(opts.Wait-waitMargin, opts.Wait/2))
		defer t.Stop()
		limit = t.C
	}
	poll := time.NewTicker(pollEvery)
	defer poll.Stop()
	for {
		select {
		case <-c.done:
			return c.out, waitDecided
		case <-poll.C:
			if out, ok := s.stored(ctx, c); ok {
				s.decide(c, out)
			}
		case <-limit:
			s.withdraw(c, "the agent's hook could wait no longer")
			// The withdrawal decides it, unless an answer came first.
			select {
			case <-c.done:
				return c.out, waitDecided
			case <-time.After(waitMargin / 2):
				return outcome{reason: "tollgate: nobody answered within the time the agent's hook waits, so the call was not run"}, waitDecided
			}
		case <-s.closing:
			if opts.Retries {
				return outcome{}, waitRetry
			}
			s.withdraw(c, "tollgate is shutting down and the agent's hook cannot wait for it")
			select {
			case <-c.done:
				return c.out, waitDecided
			case <-time.After(2 * time.Second):
				return outcome{reason: "tollgate: the server is shutting down: the call was not decided"}, waitDecided
			}
		case <-ctx.Done():
			if !opts.Retries {
				// An agent's http hook that went (its time ran out, the
				// agent stopped): nobody would run the call an answer
				// allows.
				s.withdraw(c, "the agent's hook stopped waiting")
			}
			return outcome{}, waitGone
		}
	}
}

// waitMargin is how long before the caller's limit a call is withdrawn.
const waitMargin = 3 * time.Second

// withdraw aborts a call's run if the call is still undecided: its
// question (if any) is aborted, a later answer is refused.
func (s *Service) withdraw(c *call, why string) {
	s.mu.Lock()
	decided := c.decided || c.waiters > 1
	thread := ""
	if c.lane != nil {
		thread = c.lane.thread
	}
	s.mu.Unlock()
	if decided || thread == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.host.Abort(ctx, thread, why); err != nil && !errors.Is(err, host.ErrClosed) {
		s.log.Warn("tollgate: withdrawing a coding agent's call", "thread", thread, "call", c.id, "err", err)
	}
}

// stored reads a call's outcome from the store: its run's record of the
// call.
func (s *Service) stored(ctx context.Context, c *call) (outcome, bool) {
	s.mu.Lock()
	thread, runID := "", c.runID
	if c.lane != nil {
		thread = c.lane.thread
	}
	s.mu.Unlock()
	if thread == "" || runID == "" {
		return outcome{}, false
	}
	recs, err := s.cfg.Store.ListToolCalls(ctx, thread, runID, c.id)
	if err != nil || len(recs) == 0 {
		return outcome{}, false
	}
	rec := recs[0]
	if rec.State != checkpoint.ToolCallDone {
		// Let through, and being handed on: its result says how (the
		// relay's tool is idempotent, so a run cut off here hands it on
		// again when it resumes).
		return outcome{}, false
	}
	var r agent.ToolResult
	if err := json.Unmarshal(rec.Result, &r); err != nil {
		return outcome{reason: "tollgate: the call's recorded result is not readable: " + err.Error()}, true
	}
	return s.resultOutcome(c, r, rec.Args), true
}

// allowed is an allow with the input that runs (nil when it is the
// agent's own).
func (s *Service) allowed(c *call, ran json.RawMessage, reason string) outcome {
	s.mu.Lock()
	own := c.input // nil once decided: then this outcome is not the one kept
	s.mu.Unlock()
	out := outcome{allow: true, reason: reason}
	if !sameJSON(ran, own) {
		out.input = ran
	}
	return out
}

// resultOutcome is what a call's result in its thread tells the agent.
func (s *Service) resultOutcome(c *call, r agent.ToolResult, ran json.RawMessage) outcome {
	if h, ok := r.Details["hook"].(map[string]any); ok && h["decision"] == "allow" {
		reason, _ := h["reason"].(string)
		var input json.RawMessage
		if raw, ok := h["input"]; ok {
			input, _ = json.Marshal(raw)
		} else {
			input = ran
		}
		return s.allowed(c, input, reason)
	}
	return outcome{reason: denyReason(c.tool, r)}
}

// follow reads the host's events: a call's question (its thread now
// waits for a person), a call blocked or denied (its result), a run's end
// (its thread is free).
func (s *Service) follow(events <-chan agent.Event) {
	defer s.stopped.Done()
	for {
		select {
		case <-s.stop:
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			thread := ev.Meta().ThreadID
			if !IsThread(thread) {
				continue
			}
			switch ev := ev.(type) {
			case *agent.HitlRequestEvent:
				if ev.Question != nil && ev.Question.Status == checkpoint.QuestionPending {
					s.asked(thread, ev.Question.CallID, true)
				}
			case *host.ResolvedEvent:
				// Answered (or timed out): its thread goes on at once, and
				// a call that comes meanwhile waits for it.
				s.asked(thread, ev.Question.CallID, false)
			case *agent.HitlResolvedEvent:
				if ev.Question != nil {
					s.asked(thread, ev.Question.CallID, false)
				}
			case *agent.ToolCallFinishedEvent:
				if c := s.callOn(thread, ev.Call.ID); c != nil {
					s.decide(c, s.resultOutcome(c, ev.Result, ev.Call.Arguments))
				}
			case *agent.RunFinishedEvent:
				s.runEnded(thread, ev.Meta().RunID, ev.Err)
			case *agent.AgentAbortedEvent:
				s.runEnded(thread, ev.Meta().RunID, nil)
			}
		}
	}
}

// baseOf is the session thread of one of its threads.
func baseOf(thread string) string {
	if i := strings.LastIndexByte(thread, '~'); i > 0 {
		return thread[:i]
	}
	return thread
}

func (s *Service) callOn(thread, callID string) *call {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.sessions[baseOf(thread)]
	if sess == nil {
		return nil
	}
	c := sess.calls[callID]
	if c == nil || c.lane == nil || c.lane.thread != thread {
		return nil
	}
	return c
}

// asked records whether a call waits for a person.
func (s *Service) asked(thread, callID string, asking bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.sessions[baseOf(thread)]
	if sess == nil {
		return
	}
	if c := sess.calls[callID]; c != nil && c.asking != asking && (!asking || !c.decided) {
		c.asking = asking
		sess.signal()
	}
}

// runEnded frees the thread of a run that ended; a call it did not
// decide (the run stopped on an error) is denied, and the run closed, so
// that the thread takes calls again.
func (s *Service) runEnded(thread, runID string, runErr error) {
	s.mu.Lock()
	sess := s.sessions[baseOf(thread)]
	if sess == nil {
		s.mu.Unlock()
		return
	}
	var c *call
	for _, l := range sess.lanes {
		if l.thread != thread {
			continue
		}
		switch {
		case l.busy != nil && l.busy.runID == runID:
			c = l.busy
			l.busy = nil
			sess.signal()
		case l.held && runErr == nil:
			l.held = false
			sess.signal()
		}
	}
	s.mu.Unlock()
	if c == nil {
		return
	}
	if runErr != nil {
		s.decide(c, outcome{reason: "tollgate could not decide the call: " + runErr.Error()})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.host.Abort(ctx, thread, "the run stopped on an error: "+runErr.Error()); err != nil && !errors.Is(err, host.ErrClosed) {
			s.log.Warn("tollgate: closing a coding agent's call whose run failed", "thread", thread, "err", err)
		}
		return
	}
	if out, ok := s.stored(context.Background(), c); ok {
		s.decide(c, out)
	}
}

func sameJSON(a, b json.RawMessage) bool {
	return string(agent.CanonicalArgs(a)) == string(agent.CanonicalArgs(b))
}

// denyReason is what the agent (and its model) reads of a call that was
// not let through, from its result in the thread.
func denyReason(tool string, r agent.ToolResult) string {
	h, _ := r.Details["hitl"].(map[string]any)
	decision, _ := h["decision"].(string)
	switch decision {
	case "policy_deny":
		rule, _ := h["matched_rule"].(string)
		if rule != "" {
			return fmt.Sprintf("tollgate: blocked by the policy (rule %s): %s", rule, r.Content)
		}
		return "tollgate: blocked by the policy: " + r.Content
	case "human_deny":
		by, _ := h["by"].(string)
		if by == "" {
			by = "a reviewer"
		}
		why, _ := h["reason"].(string)
		if why == "" {
			return "tollgate: denied by " + by + " (no reason given)"
		}
		return "tollgate: denied by " + by + ": " + why
	case "timed_out":
		secs, _ := h["timeout_seconds"].(float64)
		if n, ok := h["timeout_seconds"].(int); ok {
			secs = float64(n)
		}
		return fmt.Sprintf("tollgate: timed out: nobody answered within %s, so the call was not run", time.Duration(secs)*time.Second)
	case "aborted":
		why, _ := h["reason"].(string)
		return "tollgate: withdrawn before anyone answered: " + why
	}
	if r.Details["validation"] != nil {
		return fmt.Sprintf("tollgate: the input of %s is not what %s takes: %s", tool, tool, r.Content)
	}
	if r.Content == "" {
		return "tollgate: the call was not allowed"
	}
	return "tollgate: " + r.Content
}
