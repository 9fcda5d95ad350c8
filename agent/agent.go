package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/clock"
	"github.com/tollgate-ai/tollgate/internal/jsontext"
)

// Config builds an [Agent]. Provider is required; every other field has a
// usable zero value.
type Config struct {
	// Provider calls the model. Required.
	Provider Provider
	// Model says which model and how.
	Model Model
	// SystemPrompt is sent with every model call.
	SystemPrompt string
	// Tools the model may call. Names must be unique.
	Tools []*Tool
	// ToolFor, if set, gives the tool of a name the model called that is
	// not one of Tools (nil: the call is refused as an unknown tool). It
	// serves a provider that relays calls another program makes, whose
	// tool names are not known in advance (an MCP server's, a coding
	// agent's). Its tools are never offered to the model. It must give
	// the same tool (name and schema) for the same name every time: a
	// resumed run and an edit are checked against it again.
	ToolFor func(name string) *Tool
	// Middleware hooks, in order (see [Middleware] for the order of
	// after-hooks).
	Middleware []Middleware
	// Channel delivers answers to waiting questions. Zero: a
	// [StoreChannel] over the Checkpointer.
	Channel Channel
	// Checkpointer stores the thread. Required, unless Channel has a
	// Store method (hitl's channels do): then that store.
	Checkpointer checkpoint.Store
	// ThreadID names the thread. Zero: a random id.
	ThreadID string
	// MaxTurns bounds model calls in one run. Zero: 50.
	MaxTurns int
	// MaxParallelTools bounds tools executing at once within a turn.
	// Zero: 8.
	MaxParallelTools int
	// MaxArgBytes bounds the size of a tool call's arguments (their
	// JSON): a larger call gets an error result before its arguments are
	// validated or any middleware (a policy) sees them. Zero:
	// DefaultMaxArgBytes; negative: no bound.
	MaxArgBytes int
	// Clock times deadlines. Zero: the system clock.
	Clock clock.Clock
	// Logger receives warnings (audit failures, panics in hooks). Zero:
	// slog.Default().
	Logger *slog.Logger
	// SlowSubscriberTimeout is how long an event waits for a subscriber
	// whose buffer is full before dropping it. Zero: 5s.
	SlowSubscriberTimeout time.Duration
	// PolicyDigest names the policy the middleware decides by (package
	// policy's Digest, of the file in force): it is recorded, as
	// policy_digest, with every decision in the audit log — the
	// question_asked entry of a call asked about, the tool_result entry
	// of a call decided (allowed, blocked, or run after an answer) — so
	// that a decision can be traced to the policy that made it. Zero:
	// not recorded.
	PolicyDigest func() string
}

// Agent runs prompts on one thread. Its methods are safe for concurrent
// use; runs on the same Agent are serialized.
type Agent struct {
	provider    Provider
	model       Model
	system      string
	tools       []*Tool
	specs       []ToolSpec // the tools' specs, as every model request offers them
	modelHooks  bool       // a middleware is a BeforeModelHook
	toolsByName map[string]*Tool
	toolFor     func(name string) *Tool
	middleware  []Middleware
	channel     Channel
	store       checkpoint.Store
	threadID    string
	maxTurns    int
	maxParallel int
	maxArgBytes int
	policy      func() string
	clock       clock.Clock
	log         *slog.Logger
	events      *eventHub

	// cancelMu guards the run slot and how to stop what holds it.
	cancelMu sync.Mutex
	// running is held for the whole of a run or an abort (beginRun,
	// endRun): nil when free, else closed as it is let go.
	running   chan struct{}
	cancelRun context.CancelCauseFunc
	// abortCause, while an AbortPending waits for the slot (abortWaiters),
	// cancels a run the moment it registers its cancel function.
	abortCause   error
	abortWaiters int

	// kept: what the last run knew when it parked, for a resume here
	// (see keptRun). Read and written under the run slot.
	kept *keptRun
}

// beginRun takes the run slot for a run, or reports that a run or an
// abort holds it.
func (a *Agent) beginRun() bool {
	a.cancelMu.Lock()
	defer a.cancelMu.Unlock()
	if a.running != nil {
		return false
	}
	a.running = make(chan struct{})
	return true
}

// endRun lets go of the run slot, waking an AbortPending that waits.
func (a *Agent) endRun() {
	a.cancelMu.Lock()
	ended := a.running
	a.running = nil
	a.cancelMu.Unlock()
	close(ended)
}

// Errors returned by runs.
var (
	// ErrRunInProgress: Prompt on a thread whose last run has not ended
	// (it is waiting or was interrupted). Call Resume or AbortPending.
	ErrRunInProgress = errors.New("agent: the thread has an unfinished run; call Resume or AbortPending")
	// ErrNoRun: Resume on a thread with no unfinished run.
	ErrNoRun = errors.New("agent: the thread has no unfinished run")
	// ErrMaxTurns: the run reached Config.MaxTurns model calls.
	ErrMaxTurns = errors.New("agent: maximum number of turns reached")
	// ErrAborted is the cause of a run's context when AbortPending stops it.
	ErrAborted = errors.New("agent: run aborted")
	// ErrParked: the run stopped to wait for answers without holding a
	// goroutine, a lease or a connection in this process. A [Channel]
	// returns it from Wait (for a question still pending) when whoever
	// drives the run will call [Agent.Resume] once the question is
	// resolved, as package host does. The run returns an error wrapping
	// it, emits a [RunParkedEvent], and the thread stays running in the
	// store; every call of the turn that could go on without an answer
	// has gone on first. The agent keeps what the run knew (its messages
	// up to 64 KB, its call's validated arguments) for a Resume on the
	// same agent, used only while the thread is at the version the park
	// wrote: any resume, anywhere, goes on from the store alone.
	ErrParked = errors.New("agent: run parked until its questions are answered")
	// ErrRunIDUsed: PromptWith was given a run id the thread already has.
	ErrRunIDUsed = errors.New("agent: the thread already has a run with this id")
)

// New returns an agent for cfg.
func New(cfg Config) (*Agent, error) {
	if cfg.Provider == nil {
		return nil, errors.New("agent: Config.Provider is required")
	}
	a := &Agent{
		provider: cfg.Provider, model: cfg.Model, system: cfg.SystemPrompt,
		middleware: cfg.Middleware, channel: cfg.Channel, store: cfg.Checkpointer,
		threadID: cfg.ThreadID, maxTurns: cfg.MaxTurns, maxParallel: cfg.MaxParallelTools,
		maxArgBytes: cfg.MaxArgBytes,
		policy:      cfg.PolicyDigest,
		clock:       cfg.Clock, log: cfg.Logger, toolsByName: map[string]*Tool{}, toolFor: cfg.ToolFor,
	}
	for _, t := range cfg.Tools {
		if t == nil {
			return nil, errors.New("agent: nil tool in Config.Tools")
		}
		if _, dup := a.toolsByName[t.Name()]; dup {
			return nil, fmt.Errorf("agent: two tools named %q", t.Name())
		}
		a.toolsByName[t.Name()] = t
		a.tools = append(a.tools, t)
		a.specs = append(a.specs, t.Spec())
	}
	for i, m := range cfg.Middleware {
		switch m.(type) {
		case BeforeModelHook, AfterModelHook, BeforeToolHook, AfterToolHook:
		default:
			return nil, fmt.Errorf("agent: Config.Middleware[%d] (%T) implements no hook", i, m)
		}
		if _, ok := m.(BeforeModelHook); ok {
			a.modelHooks = true
		}
	}
	if cs, ok := a.channel.(interface{ Store() checkpoint.Store }); ok {
		// Questions are written to the Checkpointer and watched through the
		// channel: both must be the same store.
		switch {
		case a.store == nil:
			a.store = cs.Store()
		case a.store != cs.Store():
			return nil, errors.New("agent: Config.Channel watches another store than Config.Checkpointer")
		}
	}
	if a.store == nil {
		return nil, errors.New("agent: Config.Checkpointer is required (a store: checkpoint/memory's when nothing need outlive the process, checkpoint/sqlite's to survive it)")
	}
	if a.threadID == "" {
		a.threadID = "thread_" + randomID()
	}
	if ct, ok := a.channel.(interface{ ThreadID() string }); ok && ct.ThreadID() != "" && ct.ThreadID() != a.threadID {
		// Its host would never see this thread's questions.
		return nil, fmt.Errorf("agent: Config.Channel serves thread %q, the agent runs thread %q", ct.ThreadID(), a.threadID)
	}
	if a.channel == nil {
		a.channel = &StoreChannel{Store: a.store}
	}
	if a.maxTurns <= 0 {
		a.maxTurns = 50
	}
	if a.maxArgBytes == 0 {
		a.maxArgBytes = DefaultMaxArgBytes
	}
	if a.maxParallel <= 0 {
		a.maxParallel = 8
	}
	if a.clock == nil {
		a.clock = clock.Real
	}
	if a.log == nil {
		a.log = slog.Default()
	}
	slow := cfg.SlowSubscriberTimeout
	if slow <= 0 {
		slow = 5 * time.Second
	}
	a.events = &eventHub{slowTimeout: slow}
	return a, nil
}

func randomID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ThreadID is the thread this agent runs on.
func (a *Agent) ThreadID() string { return a.threadID }

// Store is the agent's checkpointer.
func (a *Agent) Store() checkpoint.Store { return a.store }

// Tools returns the agent's tools.
func (a *Agent) Tools() []*Tool { return slices.Clone(a.tools) }

// Tool returns the tool with that name (one of Config.Tools, else
// Config.ToolFor's), or nil.
func (a *Agent) Tool(name string) *Tool {
	if t := a.toolsByName[name]; t != nil {
		return t
	}
	if a.toolFor != nil {
		if t := a.toolFor(name); t != nil && t.Name() == name {
			return t
		}
	}
	return nil
}

// Subscribe returns a subscription to the agent's events with room for
// buffer events (zero: 256). See [Subscription] for what it sees.
func (a *Agent) Subscribe(buffer int) *Subscription { return a.events.subscribe(buffer) }

// SubscribeFunc calls f with each of the agent's events, in order, from
// the goroutine that emits it, until stop is called; once stop returns, f
// is not called again. f must not block (it holds up the run and every
// other subscriber) and must not subscribe to or emit the agent's events:
// it suits a subscriber that only hands events on, without a goroutine
// and a buffer of its own.
func (a *Agent) SubscribeFunc(f func(Event)) (stop func()) { return a.events.subscribeFunc(f) }

// Messages returns the thread's messages as stored.
func (a *Agent) Messages(ctx context.Context) ([]Message, error) {
	th, err := a.store.LoadThread(ctx, a.threadID)
	if errors.Is(err, checkpoint.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return decodeMessages(th.Messages)
}

func decodeMessages(raw json.RawMessage) ([]Message, error) {
	var msgs []Message
	if len(raw) == 0 {
		return nil, nil
	}
	if err := json.Unmarshal(raw, &msgs); err != nil {
		return nil, fmt.Errorf("agent: stored messages are not readable: %w", err)
	}
	return msgs, nil
}

// Prompt adds a user message and works the run to its end: model calls,
// tool calls (through the middleware), questions to people, until the
// model ends its turn. It returns the final assistant message.
//
// If ctx is cancelled, or the process stops, the thread is left with an
// unfinished run; [Agent.Resume] continues it and [Agent.AbortPending]
// closes it. Prompt on such a thread returns ErrRunInProgress.
func (a *Agent) Prompt(ctx context.Context, text string) (*Message, error) {
	return a.PromptWith(ctx, text, nil)
}

// PromptOptions tune one run started by [Agent.PromptWith]. A nil
// *PromptOptions means zero values.
type PromptOptions struct {
	// RunID names the run. Zero: a random id. A caller that derives it
	// from an idempotency key can tell a retried request from a new one:
	// a RunID the thread already has is refused with ErrRunIDUsed.
	RunID string
	// Thread is the thread as the caller has just read it (LoadThread of
	// the agent's thread; for a thread that does not exist, one with
	// Version zero), or nil: the run starts from it instead of reading it
	// again. Its Version is checked when the prompt is written, so a stale
	// copy costs a read, never a lost write; its Status and Messages are
	// used as given, so pass LoadThread's result as it came.
	Thread *checkpoint.Thread
}

// PromptWith is [Agent.Prompt] with options.
func (a *Agent) PromptWith(ctx context.Context, text string, opts *PromptOptions) (*Message, error) {
	if !a.beginRun() {
		return nil, fmt.Errorf("%w (a run is active in this process)", ErrRunInProgress)
	}
	defer a.endRun()
	a.kept = nil
	for attempt := 0; ; attempt++ {
		var th *checkpoint.Thread
		var err error
		if attempt == 0 && opts != nil && opts.Thread != nil && opts.Thread.ID == a.threadID {
			c := *opts.Thread
			th = &c
		} else {
			th, err = a.store.LoadThread(ctx, a.threadID)
		}
		if errors.Is(err, checkpoint.ErrNotFound) {
			th, err = &checkpoint.Thread{ID: a.threadID, Status: checkpoint.ThreadIdle}, nil // created by the first write
		}
		if err != nil {
			return nil, fmt.Errorf("agent: loading thread: %w", err)
		}
		if th.Status == checkpoint.ThreadRunning {
			return nil, fmt.Errorf("%w (thread %s, run %s)", ErrRunInProgress, th.ID, th.RunID)
		}
		msgs, err := decodeMessages(th.Messages)
		if err != nil {
			return nil, err
		}
		runID := "run_" + randomID()
		if opts != nil && opts.RunID != "" {
			runID = opts.RunID
			if th.RunID == runID || slices.ContainsFunc(msgs, func(m Message) bool { return m.RunID == runID }) {
				return nil, fmt.Errorf("%w (thread %s, run %s)", ErrRunIDUsed, th.ID, runID)
			}
		}
		user := Message{Role: RoleUser, Text: text, RunID: runID, CreatedAt: a.clock.Now()}
		th.RunID = runID
		rs := &runState{a: a, th: th}
		// The prompt's durable point: the message, the run and its first
		// audit entry in one write (which creates the thread if it is new).
		_, err = rs.commit(ctx, &checkpoint.Batch{Events: []*checkpoint.Event{a.event(runID, "run_started", map[string]any{"prompt": text})}}, []Message{user}, false)
		if errors.Is(err, checkpoint.ErrConflict) && attempt == 0 {
			continue // written meanwhile by another process: look again
		}
		if err != nil {
			return nil, err
		}
		a.emit(&RunStartedEvent{meta: a.meta(runID), Prompt: text})
		return a.drive(ctx, rs, append(msgs, user))
	}
}

// Resume continues the thread's unfinished run from its checkpoint: calls
// that have results keep them, a call found executing is not run again
// (its outcome is unknown) unless its tool is idempotent, and questions are
// found by their ids rather than asked again. ErrNoRun when there is
// nothing to resume.
//
// resolved are questions of the agent's thread the caller has just
// resolved (the Question a Commit with a Resolve returned) or read
// resolved, as a host has when an answer wakes a parked run: the run uses
// them instead of reading them again, a resolution never being changed.
// Pending questions, and questions of other threads, are ignored. Pass
// only what the store returned: the run takes these answers as the
// store's (the call's digest is still checked), so a made-up resolution
// would be acted on unaudited.
func (a *Agent) Resume(ctx context.Context, resolved ...*checkpoint.Question) (*Message, error) {
	if !a.beginRun() {
		return nil, fmt.Errorf("%w (a run is active in this process)", ErrRunInProgress)
	}
	defer a.endRun()
	th, err := a.store.LoadThread(ctx, a.threadID)
	if errors.Is(err, checkpoint.ErrNotFound) {
		return nil, ErrNoRun
	}
	if err != nil {
		return nil, fmt.Errorf("agent: loading thread: %w", err)
	}
	if th.Status != checkpoint.ThreadRunning {
		return nil, ErrNoRun
	}
	msgs, valid, err := a.resumeFrom(th)
	if err != nil {
		return nil, err
	}
	if len(msgs) == 0 {
		return nil, fmt.Errorf("agent: thread %s is running run %s but has no messages", th.ID, th.RunID)
	}
	rs := &runState{a: a, th: th, valid: valid}
	for _, q := range resolved {
		if q != nil && q.ThreadID == a.threadID && q.Status != checkpoint.QuestionPending {
			rs.noteRead(q)
		}
	}
	a.emit(&RunStartedEvent{meta: a.meta(th.RunID), Resumed: true})
	return a.drive(ctx, rs, msgs)
}

// drive works the run until the model ends its turn, registering a cancel
// function so AbortPending can stop it.
func (a *Agent) drive(ctx context.Context, rs *runState, msgs []Message) (*Message, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	a.cancelMu.Lock()
	a.cancelRun = cancel
	if a.abortCause != nil {
		cancel(a.abortCause) // an abort waits for this run's slot
	}
	a.cancelMu.Unlock()
	defer func() {
		a.cancelMu.Lock()
		a.cancelRun = nil
		a.cancelMu.Unlock()
	}()
	runID := rs.th.RunID
	msg, recorded, err := a.loop(ctx, rs, msgs)
	if err != nil && context.Cause(ctx) != nil && ctx.Err() != nil {
		err = fmt.Errorf("agent: run stopped: %w", context.Cause(ctx))
	}
	var parked *parkedError
	if errors.As(err, &parked) {
		// Not finished: waiting, with nothing held but what a resume on
		// this agent may go on from (keepParked).
		a.keepParked(rs)
		a.emit(&RunParkedEvent{meta: a.meta(runID), Questions: parked.questions})
		if !parked.recorded {
			a.audit(ctx, runID, "run_parked", map[string]any{"questions": parked.questions})
		}
		return nil, err
	}
	a.emit(&RunFinishedEvent{meta: a.meta(runID), Message: msg, Err: err})
	if !recorded && !errors.Is(err, checkpoint.ErrUnavailable) {
		// The run stopped on an error (its end was not written): say so.
		// Not when the store was out of reach: the entry could not be
		// written either, most likely, and the run is not over — whoever
		// drives it next (its host, once the store is back) goes on.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, cerr := a.store.Commit(ctx, &checkpoint.Batch{Events: []*checkpoint.Event{a.finishedEvent(runID, msg, err)}}); cerr != nil {
			a.log.Warn("tollgate: cannot append audit event", "type", "run_finished", "thread", a.threadID, "err", cerr)
		}
	}
	return msg, err
}

// loop works the run. recorded reports that the run's end, with its
// run_finished entry, was committed.
func (a *Agent) loop(ctx context.Context, rs *runState, msgs []Message) (final *Message, recorded bool, err error) {
	runID := rs.th.RunID
	turns := 0
	for _, m := range msgs {
		if m.Role == RoleAssistant && m.RunID == runID {
			turns++
		}
	}
	// end commits the run's last message, the thread going idle and the
	// run_finished entry in one write.
	end := func(last *Message, add []Message, runErr error) (*Message, bool, error) {
		b := &checkpoint.Batch{Events: []*checkpoint.Event{a.finishedEvent(runID, last, runErr)}}
		if _, err := rs.commit(ctx, b, add, true); err != nil {
			return nil, false, err
		}
		for i := range add {
			a.emit(&MessageEvent{meta: a.meta(runID), Message: add[i]})
		}
		return last, true, runErr
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		last := msgs[len(msgs)-1]
		switch {
		case last.Role == RoleAssistant && len(last.ToolCalls) > 0:
			add, committed, err := a.runTurn(ctx, rs, msgs)
			if err != nil {
				rs.mu.Lock()
				rs.last = msgs
				rs.mu.Unlock()
				return nil, false, err
			}
			if !committed { // else written with the turn's last result
				if _, err := rs.commit(ctx, &checkpoint.Batch{}, add, false); err != nil {
					return nil, false, err
				}
			}
			msgs = append(msgs, add...)
		case last.Role == RoleAssistant:
			// A final message written without its end (by an older
			// version): end the run now.
			return end(&last, nil, nil)
		default:
			if turns >= a.maxTurns {
				final := Message{Role: RoleAssistant, StopReason: StopError, RunID: runID, CreatedAt: a.clock.Now(),
					Text: fmt.Sprintf("The run was stopped after %d model turns (the limit).", a.maxTurns)}
				return end(&final, []Message{final}, ErrMaxTurns)
			}
			msg, err := a.callModel(ctx, rs, msgs)
			if err != nil {
				return nil, false, err
			}
			turns++
			if len(msg.ToolCalls) == 0 {
				// A final message ends the run in the same write.
				return end(msg, []Message{*msg}, nil)
			}
			// The message with its calls is committed with the first
			// write of its turn, before any call runs or is asked about:
			// a crash from then on never asks the model for this turn
			// again, and the call ids stay stable.
			rs.mu.Lock()
			rs.pending = append(rs.pending, *msg)
			rs.mu.Unlock()
			msgs = append(msgs, *msg)
		}
	}
}

func (a *Agent) callModel(ctx context.Context, rs *runState, msgs []Message) (*Message, error) {
	runID := rs.th.RunID
	// The run's own messages and the agent's specs, capped so that an
	// append to them cannot write into the run's: a provider reads a
	// request (Provider.Complete). Copied only for a hook that may change
	// it: a copy per turn costs what the thread holds.
	req := &Request{Model: a.model, System: a.system, Messages: msgs[:len(msgs):len(msgs)], Tools: a.specs[:len(a.specs):len(a.specs)]}
	if a.modelHooks {
		req.Messages, req.Tools = slices.Clone(msgs), slices.Clone(a.specs)
	}
	for _, m := range a.middleware {
		if h, ok := m.(BeforeModelHook); ok {
			if err := h.BeforeModel(ctx, req); err != nil {
				return nil, fmt.Errorf("agent: before-model hook %T: %w", m, err)
			}
		}
	}
	msg, err := a.provider.Complete(context.WithValue(ctx, threadCtxKey{}, a.threadID), req, func(delta string) {
		a.emit(&TextDeltaEvent{meta: a.meta(runID), Delta: delta})
	})
	if err != nil {
		return nil, fmt.Errorf("agent: model call: %w", err)
	}
	if msg == nil {
		return nil, errors.New("agent: model call returned no message")
	}
	for i := len(a.middleware) - 1; i >= 0; i-- {
		if h, ok := a.middleware[i].(AfterModelHook); ok {
			if err := h.AfterModel(ctx, req, msg); err != nil {
				return nil, fmt.Errorf("agent: after-model hook %T: %w", a.middleware[i], err)
			}
		}
	}
	msg.Role, msg.RunID, msg.CreatedAt = RoleAssistant, runID, a.clock.Now()
	if msg.StopReason == "" {
		msg.StopReason = StopEndTurn
		if len(msg.ToolCalls) > 0 {
			msg.StopReason = StopToolUse
		}
	}
	for i := range msg.ToolCalls {
		// Arguments that are not JSON at all cannot be stored as they are:
		// keep them as a JSON string, which validation then reports to the
		// model as not an object, quoting what it sent.
		if args := msg.ToolCalls[i].Arguments; len(bytes.TrimSpace(args)) == 0 {
			// No arguments at all (a provider's way of saying none): the
			// empty object, which is what validation reads them as.
			msg.ToolCalls[i].Arguments = json.RawMessage(`{}`)
		} else if !jsontext.Valid(args) {
			quoted, _ := json.Marshal(string(args))
			msg.ToolCalls[i].Arguments = quoted
		}
	}
	rs.callIDs.unique(msg, msgs, runID)
	return msg, nil
}

// callIDs are the call ids of a run's thread, gathered once a run: a
// model turn adds the ids of the messages since the last one, so its cost
// is what it adds, not the thread's length.
type callIDs struct {
	used map[string]bool
	seen int // history[:seen] is in used
}

// unique is [uniqueCallIDs] with the ids gathered so far.
func (c *callIDs) unique(msg *Message, history []Message, runID string) {
	if len(msg.ToolCalls) == 0 {
		return
	}
	if c.used == nil || c.seen > len(history) {
		c.used, c.seen = map[string]bool{}, 0
	}
	for _, m := range history[c.seen:] {
		for _, tc := range m.ToolCalls {
			c.used[tc.ID] = true
		}
	}
	c.seen = len(history)
	uniqueCallIDs(msg, c.used, len(history), runID)
}

// uniqueCallIDs makes every call id of msg unique in the whole thread.
// Results, tool call records and question ids are keyed by call id, so an
// id a provider repeats (or leaves empty) would otherwise find an earlier
// call's approval or result. A renamed id keeps the provider's id as its
// prefix; the message is persisted before any tool runs, so the new id is
// stable from then on.
// used holds the ids of the thread's earlier calls (of its first n
// messages); msg's ids are added to it.
func uniqueCallIDs(msg *Message, used map[string]bool, n int, runID string) {
	for i := range msg.ToolCalls {
		id := msg.ToolCalls[i].ID
		if id == "" {
			id = fmt.Sprintf("call_%s_%d_%d", strings.TrimPrefix(runID, "run_")[:8], n, i)
		}
		for n, base := 2, id; used[id]; n++ {
			id = fmt.Sprintf("%s_%d", base, n)
		}
		msg.ToolCalls[i].ID = id
		used[id] = true
	}
}

func (a *Agent) meta(runID string) EventMeta {
	return EventMeta{ThreadID: a.threadID, RunID: runID, At: a.clock.Now()}
}

type seqSetter interface{ setSeq(int64) }

func (m *EventMeta) setSeq(n int64) { m.Seq = n }

func (a *Agent) emit(e Event) {
	s, ok := e.(seqSetter)
	if !ok {
		panic(fmt.Sprintf("agent: event %T must be a pointer", e))
	}
	a.events.publish(e, s.setSeq)
}
