package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/clock"
	"github.com/tollgate-ai/tollgate/hitl"
)

// Config builds a [Host]. Store and Agent.Provider are required.
type Config struct {
	// Store holds every thread, question and event the host drives.
	Store checkpoint.Store
	// Agent is the template of every run: Provider, Model, SystemPrompt,
	// Tools, Middleware, MaxTurns, MaxParallelTools, Logger. The host sets
	// ThreadID, Checkpointer (Store), Channel (its parking channel) and,
	// when zero, Clock. Middleware built with a hitl channel must use one
	// over the same Store for every thread ("" thread id).
	Agent agent.Config
	// Clock times deadlines. Zero: Agent.Clock, else the system clock.
	Clock clock.Clock
	// Logger receives the host's own messages. Zero: Agent.Logger, else
	// slog.Default().
	Logger *slog.Logger
	// MaxResumes bounds the runs resumed at once (after answers,
	// deadlines and at start-up); more wait in a queue that holds only
	// thread ids. New prompts are not queued. Zero: 32.
	MaxResumes int
	// DeadlinePoll is how often the host re-reads the earliest pending
	// deadline from the store in case a notification was missed. It is one
	// query whatever the number of waiting runs. Zero: 30s.
	DeadlinePoll time.Duration
	// Coordinator shares the store's threads with other hosts (replicas
	// in other processes): see [Coordinator] and package cluster. Nil:
	// this host is the only one driving the store's runs.
	Coordinator Coordinator
	// Kinds are more templates, for threads whose runs are made of other
	// things than Agent's (package hooks' threads, where a coding agent's
	// calls are relayed): a thread runs with the first kind whose Match
	// accepts its id, else with Agent. Whatever takes a thread's answers
	// and drives its runs — this host, another replica, a command line —
	// must be given the same kinds.
	Kinds []Kind
	// Threads, when set, are the only threads this host drives: it
	// resumes, parks and continues these alone, and leaves every other
	// unfinished run of the store to whoever hosts it (it still records
	// the deadlines that pass, as any host may). tollgate run drives its
	// own thread this way: resuming every run of a store it shares with
	// a server ran their approved calls in run's directory, under its
	// policy, not where the reviewer was shown they would run. Nil: every
	// thread (a service's host).
	Threads func(threadID string) bool
}

// Kind is a template of runs for some threads: see [Config].Kinds.
type Kind struct {
	// Name names the kind in errors.
	Name string
	// Match reports whether a thread is of this kind. It must depend on
	// the id alone.
	Match func(threadID string) bool
	// Agent is the template of the kind's runs, set up as Config.Agent
	// is (Provider required; ThreadID, Checkpointer and Channel set by
	// the host; Clock when zero).
	Agent agent.Config
}

// Errors of the host's methods.
var (
	// ErrRunActive: a message was posted to a thread whose run has not
	// finished (it runs, or waits for answers). Wait for it, answer its
	// questions, or abort it.
	ErrRunActive = errors.New("host: the thread has a run in progress")
	// ErrClosed: the host is shutting down.
	ErrClosed = errors.New("host: shutting down")
	// ErrNotStarted: the method needs Start first.
	ErrNotStarted = errors.New("host: not started")
)

// Host drives the runs of many threads on one store in one process. A run
// that waits for a person parks: its state is in the store, and the host
// keeps nothing of it but its thread id (and, for the last few hundred,
// the agent it parked on, which a resume goes on from while the thread is
// as the park left it). The host resumes it when one of
// its questions is resolved — an answer given through [Host.Answer], by
// another process on the same store (the store's notifications), or the
// deadline, which the host fires from the store. At start-up it resumes
// every run a crash left unfinished. Every run is an [agent.Agent]: there
// is no second implementation of a run here.
type Host struct {
	store    checkpoint.Store
	template *template   // Config.Agent
	kinds    []*template // Config.Kinds
	clock    clock.Clock
	log      *slog.Logger
	answers  *hitl.CheckpointedChannel
	parkCh   *parkChannel
	maxRes   int
	poll     time.Duration
	coord    Coordinator
	only     func(threadID string) bool // Config.Threads

	mu       sync.Mutex
	started  bool
	closing  bool
	ctx      context.Context // runs' parent; cancelled last on Shutdown
	cancel   context.CancelFunc
	loops    sync.WaitGroup // notification and deadline loops
	runs     map[string]*run
	resuming int
	queue    []string
	queued   map[string]bool
	parked   map[string]struct{}
	kept     keptAgents // the agents of runs parked here
	failed   map[string]error
	// selfResolved holds questions this host resolved and already
	// resumed the run for, so that the store's notification of the same
	// resolution does not resume it a second time.
	selfResolved map[string]time.Time
	runsDone     sync.WaitGroup
	drivers      drivers // the goroutines drives run on
	wakeDeadline chan struct{}

	events eventFan
}

// New returns a host for cfg. Call [Host.Start] to resume and fire
// deadlines; [Host.Answer] works without it (a command line that answers
// one question uses a host it never starts).
func New(cfg Config) (*Host, error) {
	if cfg.Store == nil {
		return nil, errors.New("host: Config.Store is required")
	}
	if cfg.Agent.Provider == nil {
		return nil, errors.New("host: Config.Agent.Provider is required")
	}
	h := &Host{
		store: cfg.Store,
		clock: cfg.Clock, log: cfg.Logger, maxRes: cfg.MaxResumes, poll: cfg.DeadlinePoll, coord: cfg.Coordinator, only: cfg.Threads,
		runs: map[string]*run{}, queued: map[string]bool{}, parked: map[string]struct{}{},
		failed: map[string]error{}, selfResolved: map[string]time.Time{},
		wakeDeadline: make(chan struct{}, 1), drivers: drivers{work: make(chan func())},
	}
	if h.clock == nil {
		h.clock = cfg.Agent.Clock
	}
	if h.clock == nil {
		h.clock = clock.Real
	}
	if h.log == nil {
		h.log = cfg.Agent.Logger
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	if h.maxRes <= 0 {
		h.maxRes = 32
	}
	if h.poll <= 0 {
		h.poll = 30 * time.Second
	}
	h.template = newTemplate("", nil, cfg.Agent, h.clock)
	for i, k := range cfg.Kinds {
		if k.Match == nil || k.Agent.Provider == nil {
			return nil, fmt.Errorf("host: Config.Kinds[%d] (%s) needs Match and Agent.Provider", i, k.Name)
		}
		h.kinds = append(h.kinds, newTemplate(k.Name, k.Match, k.Agent, h.clock))
	}
	h.answers = hitl.NewCheckpointedChannel(h.store, "", &hitl.ChannelOptions{Clock: h.clock})
	h.parkCh = &parkChannel{h: h}
	// Built once to report a template that can never run (a nil tool,
	// two tools of one name) now rather than at the first run.
	for _, t := range append([]*template{h.template}, h.kinds...) {
		if _, err := t.newAgent("host-check", h); err != nil {
			if t.name != "" {
				err = fmt.Errorf("host: kind %s: %w", t.name, err)
			}
			return nil, err
		}
	}
	return h, nil
}

// Store is the host's store.
func (h *Host) Store() checkpoint.Store { return h.store }

// Tool returns the template's tool of that name (Config.Agent's, not a
// kind's), or nil.
func (h *Host) Tool(name string) *agent.Tool { return h.template.tool(name) }

// refusesWorkLocked says why the host takes no work now (ErrNotStarted,
// ErrClosed), or nil when it does.
func (h *Host) refusesWorkLocked() error {
	switch {
	case !h.started:
		return ErrNotStarted
	case h.closing:
		return ErrClosed
	}
	return nil
}

// Start subscribes to the store's notifications, fires the deadlines
// that passed while no host ran, and resumes every run a crash left
// unfinished (runs waiting for answers stay parked). It returns once the
// host is live; the host runs until [Host.Shutdown].
func (h *Host) Start(ctx context.Context) error {
	h.mu.Lock()
	if h.started {
		h.mu.Unlock()
		return errors.New("host: already started")
	}
	h.started = true
	h.ctx, h.cancel = context.WithCancel(context.WithoutCancel(ctx))
	h.mu.Unlock()
	// Subscribed before anything is read, so that nothing resolved during
	// start-up is missed.
	notes, err := h.follow()
	// stop ends a start that failed, and waits for follow's goroutine.
	stop := func() {
		h.cancel()
		for range notes {
		}
	}
	if err != nil {
		stop()
		return fmt.Errorf("host: subscribing to the store: %w", err)
	}
	if h.coord != nil {
		// The coordinator resumes runs; the notifications only tell the
		// runs driven here of answers. Deadlines are fired from the
		// store by every host, as without one: the compare-and-set lets
		// one win, and its commit carries the job that resumes the run,
		// so a deadline never waits for one replica (a job scheduler's
		// leader) to be alive.
		h.loops.Add(2)
		go h.notificationLoop(notes)
		go h.deadlineLoop()
		if err := h.coord.Start(h.ctx, h); err != nil {
			h.cancel()
			h.loops.Wait()
			return fmt.Errorf("host: starting the coordinator: %w", err)
		}
		return nil
	}
	if err := h.reconcile(h.ctx); err != nil {
		stop()
		return err
	}
	h.loops.Add(2)
	go h.notificationLoop(notes)
	go h.deadlineLoop()
	return nil
}

// Shutdown stops taking work and waits for the runs in progress to end or
// park until ctx ends; those still running then are cancelled, and left
// resumable (a tool cut off mid-way is found executing at the next start).
// It returns the counts at the end: Parked says how many runs wait for
// answers, Active how many were cut off.
func (h *Host) Shutdown(ctx context.Context) (Stats, error) {
	h.mu.Lock()
	if !h.started || h.closing {
		h.mu.Unlock()
		return h.Stats(), nil
	}
	h.closing = true
	h.queue, h.queued = nil, map[string]bool{}
	h.mu.Unlock()
	if h.coord != nil {
		// No new work first; the runs in progress go on below.
		if err := h.coord.Stop(ctx); err != nil {
			h.log.Warn("tollgate: stopping the coordinator", "err", err)
		}
	}

	finished := make(chan struct{})
	go func() {
		h.runsDone.Wait()
		close(finished)
	}()
	var cut int
	select {
	case <-finished:
	case <-ctx.Done():
		h.mu.Lock()
		cut = len(h.runs)
		h.mu.Unlock()
		h.cancel()
		<-finished
	}
	h.cancel()
	h.loops.Wait()
	h.drivers.wg.Wait()
	s := h.Stats()
	s.Active = cut
	h.events.closeAll()
	return s, nil
}
