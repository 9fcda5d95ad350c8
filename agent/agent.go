package agent

import (
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
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
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
	// Middleware hooks, in order (see [Middleware] for the order of
	// after-hooks).
	Middleware []Middleware
	// Channel delivers answers to waiting questions. Zero: a
	// [StoreChannel] over the Checkpointer.
	Channel Channel
	// Checkpointer stores the thread. Zero: a new in-memory store
	// (nothing survives the process).
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
}

// Agent runs prompts on one thread. Its methods are safe for concurrent
// use; runs on the same Agent are serialized.
type Agent struct {
	provider    Provider
	model       Model
	system      string
	tools       []*Tool
	toolsByName map[string]*Tool
	middleware  []Middleware
	channel     Channel
	store       checkpoint.Store
	threadID    string
	maxTurns    int
	maxParallel int
	maxArgBytes int
	clock       clock.Clock
	log         *slog.Logger
	events      *eventHub

	runMu sync.Mutex // held for the whole of a run or an abort

	cancelMu  sync.Mutex
	cancelRun context.CancelCauseFunc
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
	// ErrParked: the run stopped to wait for answers without holding
	// anything in this process. A [Channel] returns it from Wait (for a
	// question still pending) when whoever drives the run will call
	// [Agent.Resume] once the question is resolved, as package host does.
	// The run returns an error wrapping it, emits a [RunParkedEvent], and
	// the thread stays running in the store; every call of the turn that
	// could go on without an answer has gone on first.
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
		clock:       cfg.Clock, log: cfg.Logger, toolsByName: map[string]*Tool{},
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
	}
	for i, m := range cfg.Middleware {
		switch m.(type) {
		case BeforeModelHook, AfterModelHook, BeforeToolHook, AfterToolHook:
		default:
			return nil, fmt.Errorf("agent: Config.Middleware[%d] (%T) implements no hook", i, m)
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
		a.store = memory.New()
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

// Tool returns the tool with that name, or nil.
func (a *Agent) Tool(name string) *Tool { return a.toolsByName[name] }

// Subscribe returns a subscription to the agent's events with room for
// buffer events (zero: 256). See [Subscription] for what it sees.
func (a *Agent) Subscribe(buffer int) *Subscription { return a.events.subscribe(buffer) }

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
}

// PromptWith is [Agent.Prompt] with options.
func (a *Agent) PromptWith(ctx context.Context, text string, opts *PromptOptions) (*Message, error) {
	if !a.runMu.TryLock() {
		return nil, fmt.Errorf("%w (a run is active in this process)", ErrRunInProgress)
	}
	defer a.runMu.Unlock()
	th, err := a.store.LoadThread(ctx, a.threadID)
	if errors.Is(err, checkpoint.ErrNotFound) {
		th = &checkpoint.Thread{ID: a.threadID, Status: checkpoint.ThreadIdle, Messages: json.RawMessage("[]")}
		err = a.store.CreateThread(ctx, th)
		if errors.Is(err, checkpoint.ErrConflict) { // created concurrently elsewhere
			th, err = a.store.LoadThread(ctx, a.threadID)
		}
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
	msgs = append(msgs, Message{Role: RoleUser, Text: text, RunID: runID, CreatedAt: a.clock.Now()})
	th.Status, th.RunID = checkpoint.ThreadRunning, runID
	if err := a.saveThread(ctx, th, msgs); err != nil {
		return nil, err
	}
	a.emit(&RunStartedEvent{meta: a.meta(runID), Prompt: text})
	a.audit(ctx, runID, "run_started", map[string]any{"prompt": text})
	return a.drive(ctx, th, msgs)
}

// Resume continues the thread's unfinished run from its checkpoint: calls
// that have results keep them, a call found executing is not run again
// (its outcome is unknown) unless its tool is idempotent, and questions are
// found by their ids rather than asked again. ErrNoRun when there is
// nothing to resume.
func (a *Agent) Resume(ctx context.Context) (*Message, error) {
	if !a.runMu.TryLock() {
		return nil, fmt.Errorf("%w (a run is active in this process)", ErrRunInProgress)
	}
	defer a.runMu.Unlock()
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
	msgs, err := decodeMessages(th.Messages)
	if err != nil {
		return nil, err
	}
	a.emit(&RunStartedEvent{meta: a.meta(th.RunID), Resumed: true})
	return a.drive(ctx, th, msgs)
}

func (a *Agent) saveThread(ctx context.Context, th *checkpoint.Thread, msgs []Message) error {
	raw, err := jsontext.Marshal(msgs)
	if err != nil {
		return fmt.Errorf("agent: encoding messages: %w", err)
	}
	th.Messages = raw
	if err := a.store.SaveThread(ctx, th); err != nil {
		return fmt.Errorf("agent: saving thread: %w", err)
	}
	return nil
}

// drive works the run until the model ends its turn, registering a cancel
// function so AbortPending can stop it.
func (a *Agent) drive(ctx context.Context, th *checkpoint.Thread, msgs []Message) (*Message, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	a.cancelMu.Lock()
	a.cancelRun = cancel
	a.cancelMu.Unlock()
	defer func() {
		a.cancelMu.Lock()
		a.cancelRun = nil
		a.cancelMu.Unlock()
	}()
	msg, err := a.loop(ctx, th, msgs)
	if err != nil && context.Cause(ctx) != nil && ctx.Err() != nil {
		err = fmt.Errorf("agent: run stopped: %w", context.Cause(ctx))
	}
	var parked *parkedError
	if errors.As(err, &parked) {
		// Not finished: waiting, with nothing held here.
		a.emit(&RunParkedEvent{meta: a.meta(th.RunID), Questions: parked.questions})
		a.audit(context.WithoutCancel(ctx), th.RunID, "run_parked", map[string]any{"questions": parked.questions})
		return nil, err
	}
	a.emit(&RunFinishedEvent{meta: a.meta(th.RunID), Message: msg, Err: err})
	fin := map[string]any{}
	if msg != nil {
		fin["stop_reason"] = string(msg.StopReason)
	}
	if err != nil {
		fin["error"] = err.Error()
	}
	a.audit(context.WithoutCancel(ctx), th.RunID, "run_finished", fin)
	return msg, err
}

func (a *Agent) loop(ctx context.Context, th *checkpoint.Thread, msgs []Message) (*Message, error) {
	turns := 0
	for _, m := range msgs {
		if m.Role == RoleAssistant && m.RunID == th.RunID {
			turns++
		}
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		last := msgs[len(msgs)-1]
		switch {
		case last.Role == RoleAssistant && len(last.ToolCalls) > 0:
			results, err := a.runTurn(ctx, th, msgs)
			if err != nil {
				return nil, err
			}
			for _, r := range results {
				m := ToolResultMessage(r)
				m.RunID, m.CreatedAt = th.RunID, a.clock.Now()
				msgs = append(msgs, m)
			}
			if err := a.saveThread(ctx, th, msgs); err != nil {
				return nil, err
			}
		case last.Role == RoleAssistant:
			th.Status = checkpoint.ThreadIdle
			if err := a.saveThread(ctx, th, msgs); err != nil {
				return nil, err
			}
			return &last, nil
		default:
			if turns >= a.maxTurns {
				final := Message{Role: RoleAssistant, StopReason: StopError, RunID: th.RunID, CreatedAt: a.clock.Now(),
					Text: fmt.Sprintf("The run was stopped after %d model turns (the limit).", a.maxTurns)}
				msgs = append(msgs, final)
				th.Status = checkpoint.ThreadIdle
				if err := a.saveThread(ctx, th, msgs); err != nil {
					return nil, err
				}
				a.emit(&MessageEvent{meta: a.meta(th.RunID), Message: final})
				return &final, ErrMaxTurns
			}
			msg, err := a.callModel(ctx, th.RunID, msgs)
			if err != nil {
				return nil, err
			}
			turns++
			// Persisted with its tool calls before any tool runs: a crash
			// from here on never asks the model for this turn again, and
			// the call ids stay stable. A final message ends the run in the
			// same write.
			msgs = append(msgs, *msg)
			if len(msg.ToolCalls) == 0 {
				th.Status = checkpoint.ThreadIdle
			}
			if err := a.saveThread(ctx, th, msgs); err != nil {
				return nil, err
			}
			a.emit(&MessageEvent{meta: a.meta(th.RunID), Message: *msg})
			if len(msg.ToolCalls) == 0 {
				return msg, nil
			}
		}
	}
}

func (a *Agent) callModel(ctx context.Context, runID string, msgs []Message) (*Message, error) {
	req := &Request{Model: a.model, System: a.system, Messages: slices.Clone(msgs)}
	for _, t := range a.tools {
		req.Tools = append(req.Tools, t.Spec())
	}
	for _, m := range a.middleware {
		if h, ok := m.(BeforeModelHook); ok {
			if err := h.BeforeModel(ctx, req); err != nil {
				return nil, fmt.Errorf("agent: before-model hook %T: %w", m, err)
			}
		}
	}
	msg, err := a.provider.Complete(ctx, req, func(delta string) {
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
		if args := msg.ToolCalls[i].Arguments; len(args) > 0 && !json.Valid(args) {
			quoted, _ := json.Marshal(string(args))
			msg.ToolCalls[i].Arguments = quoted
		}
	}
	uniqueCallIDs(msg, msgs, runID)
	return msg, nil
}

// uniqueCallIDs makes every call id of msg unique in the whole thread.
// Results, tool call records and question ids are keyed by call id, so an
// id a provider repeats (or leaves empty) would otherwise find an earlier
// call's approval or result. A renamed id keeps the provider's id as its
// prefix; the message is persisted before any tool runs, so the new id is
// stable from then on.
func uniqueCallIDs(msg *Message, history []Message, runID string) {
	used := map[string]bool{}
	for _, m := range history {
		for _, c := range m.ToolCalls {
			used[c.ID] = true
		}
	}
	for i := range msg.ToolCalls {
		id := msg.ToolCalls[i].ID
		if id == "" {
			id = fmt.Sprintf("call_%s_%d_%d", strings.TrimPrefix(runID, "run_")[:8], len(history), i)
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

// audit appends an entry to the store's event log. A failure is logged,
// never fatal: the log is a record, not a decision.
func (a *Agent) audit(ctx context.Context, runID, typ string, data map[string]any) {
	raw, err := jsontext.Marshal(data)
	if err != nil {
		a.log.Warn("tollgate: cannot encode audit event", "type", typ, "err", err)
		return
	}
	// Recorded even when the run is being stopped: what happened, happened.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, err := a.store.AppendEvent(ctx, &checkpoint.Event{ThreadID: a.threadID, RunID: runID, Type: typ, Data: raw, At: a.clock.Now()}); err != nil {
		a.log.Warn("tollgate: cannot append audit event", "type", typ, "thread", a.threadID, "err", err)
	}
}
