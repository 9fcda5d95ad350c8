package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/clock"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/interrupt"
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

// template is a template of runs with its tools by name.
type template struct {
	name  string
	match func(threadID string) bool
	cfg   agent.Config
	tools map[string]*agent.Tool
}

func newTemplate(name string, match func(string) bool, cfg agent.Config, c clock.Clock) *template {
	if cfg.Clock == nil {
		cfg.Clock = c
	}
	t := &template{name: name, match: match, cfg: cfg, tools: map[string]*agent.Tool{}}
	for _, tl := range cfg.Tools {
		if tl != nil {
			t.tools[tl.Name()] = tl
		}
	}
	return t
}

// tool is the template's tool of that name (Tools, else ToolFor's), or
// nil.
func (t *template) tool(name string) *agent.Tool {
	if tl := t.tools[name]; tl != nil {
		return tl
	}
	if t.cfg.ToolFor != nil {
		if tl := t.cfg.ToolFor(name); tl != nil && tl.Name() == name {
			return tl
		}
	}
	return nil
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
// keeps nothing of it but its thread id. The host resumes it when one of
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
	failed   map[string]error
	// selfResolved holds questions this host resolved and already
	// resumed the run for, so that the store's notification of the same
	// resolution does not resume it a second time.
	selfResolved map[string]time.Time
	runsDone     sync.WaitGroup
	wakeDeadline chan struct{}

	events eventFan
}

// run is a thread being driven by this host.
type run struct {
	agent *agent.Agent
	runID string
	again bool // a question was resolved while it ran: resume once more
	// handed: questions this host resolved for the run since it last
	// resumed, handed to the next resume so that it need not read them.
	handed []*checkpoint.Question
	resume bool // counted in Host.resuming
	// aborting: Abort is closing this run; the thread stays held (no
	// other driver may start) until both the drive and the abort are done.
	aborting, driveDone, abortDone bool
	cancel                         context.CancelFunc
	done                           chan struct{} // closed when the host lets go of the thread
	// With a Coordinator: the lease the run is driven under, and where
	// the drive says whether it got it (nil error) before anything ran.
	lease    Lease
	acquired chan error
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
		wakeDeadline: make(chan struct{}, 1),
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

// templateOf is the template a thread runs with.
func (h *Host) templateOf(threadID string) *template {
	for _, k := range h.kinds {
		if k.match(threadID) {
			return k
		}
	}
	return h.template
}

func (h *Host) newAgent(threadID string) (*agent.Agent, error) {
	return h.templateOf(threadID).newAgent(threadID, h)
}

func (t *template) newAgent(threadID string, h *Host) (*agent.Agent, error) {
	cfg := t.cfg
	cfg.ThreadID = threadID
	cfg.Checkpointer = h.store
	cfg.Channel = h.parkCh
	return agent.New(cfg)
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
	notes, err := h.store.Subscribe(h.ctx)
	if err != nil {
		h.cancel()
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
		h.cancel()
		return err
	}
	h.loops.Add(2)
	go h.notificationLoop(notes)
	go h.deadlineLoop()
	return nil
}

// reconcile finds the store's unfinished runs: those with a pending
// question are parked, the others are resumed.
func (h *Host) reconcile(ctx context.Context) error {
	waiting := map[string]bool{}
	cursor := ""
	for {
		qs, next, err := h.store.ListQuestions(ctx, checkpoint.QuestionFilter{Status: checkpoint.QuestionPending, After: cursor, Limit: 1000})
		if err != nil {
			return fmt.Errorf("host: listing pending questions: %w", err)
		}
		for _, q := range qs {
			waiting[q.ThreadID] = true
		}
		if next == "" {
			break
		}
		cursor = next
	}
	var resume []string
	cursor = ""
	for {
		ths, next, err := h.store.ListThreads(ctx, checkpoint.ThreadFilter{Status: checkpoint.ThreadRunning, After: cursor, Limit: 1000})
		if err != nil {
			return fmt.Errorf("host: listing unfinished runs: %w", err)
		}
		h.mu.Lock()
		for _, th := range ths {
			if h.only != nil && !h.only(th.ID) {
				continue // another host's
			}
			if waiting[th.ID] {
				h.parked[th.ID] = struct{}{}
			} else {
				resume = append(resume, th.ID)
			}
		}
		h.mu.Unlock()
		if next == "" {
			break
		}
		cursor = next
	}
	if len(resume) > 0 {
		h.log.Info("tollgate: resuming unfinished runs", "runs", len(resume))
	}
	for _, id := range resume {
		h.kick(id)
	}
	h.poke()
	return nil
}

func (h *Host) notificationLoop(notes <-chan checkpoint.Notification) {
	defer h.loops.Done()
	var lastResub time.Time
	for {
		select {
		case <-h.ctx.Done():
			return
		case n, ok := <-notes:
			if !ok {
				if h.ctx.Err() != nil {
					return
				}
				// The store ended the feed: subscribe again, and read
				// what may have been missed meanwhile.
				h.log.Warn("tollgate: store notifications ended; subscribing again")
				// A store that ends every feed at once (being closed) must
				// not turn this into a busy loop.
				if time.Since(lastResub) < time.Second {
					select {
					case <-h.ctx.Done():
						return
					case <-time.After(time.Second):
					}
				}
				lastResub = time.Now()
				notes = h.resubscribe()
				continue
			}
			switch n.Kind {
			case checkpoint.QuestionResolved:
				if h.coord != nil {
					// Whichever replica takes its job resumes it: it is no
					// longer parked as far as this host knows.
					h.forget(n.ThreadID, true)
				}
				if h.consumeSelfResolved(n.ThreadID, n.QuestionID) {
					continue
				}
				h.kick(n.ThreadID)
			case checkpoint.QuestionCreated:
				if h.coord != nil {
					// The run went on (here or on another replica): it did
					// not stay failed. (Parked it may be: by this host, the
					// notification coming after the park.)
					h.forget(n.ThreadID, false)
				}
				h.poke()
			case checkpoint.Resync:
				if h.coord != nil {
					// The coordinator has its own record of runs; a
					// question created meanwhile may have a deadline.
					h.poke()
					continue
				}
				go func() {
					if err := h.reconcile(h.ctx); err != nil && h.ctx.Err() == nil {
						h.log.Error("tollgate: re-reading runs after a resync", "err", err)
					}
				}()
			}
		}
	}
}

func (h *Host) resubscribe() <-chan checkpoint.Notification {
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, 5*time.Second) {
		notes, err := h.store.Subscribe(h.ctx)
		if err == nil {
			if h.coord != nil {
				return notes
			}
			if err := h.reconcile(h.ctx); err != nil && h.ctx.Err() == nil {
				h.log.Error("tollgate: re-reading runs after subscribing again", "err", err)
			}
			return notes
		}
		h.log.Error("tollgate: subscribing to the store", "err", err)
		select {
		case <-h.ctx.Done():
			return nil
		case <-time.After(delay):
		}
	}
}

// forget drops what this host knew of a thread's run that another host
// may be driving now (with a Coordinator), unless it drives it itself.
func (h *Host) forget(threadID string, parked bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.runs[threadID] != nil {
		return
	}
	if parked {
		delete(h.parked, threadID)
	}
	delete(h.failed, threadID)
}

func resolvedKey(threadID, questionID string) string { return threadID + "\x00" + questionID }

func (h *Host) markSelfResolved(threadID, questionID string) {
	h.mu.Lock()
	h.selfResolved[resolvedKey(threadID, questionID)] = time.Now()
	h.mu.Unlock()
}

func (h *Host) consumeSelfResolved(threadID, questionID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := resolvedKey(threadID, questionID)
	if _, ok := h.selfResolved[k]; ok {
		delete(h.selfResolved, k)
		return true
	}
	return false
}

// kick makes the thread's run go on: at once if a resume slot is free,
// after the run in progress if there is one, else in the queue. With a
// Coordinator only a run driven here is told (the coordinator resumes
// the others, from whichever host).
func (h *Host) kick(threadID string) { h.kickWith(threadID, nil) }

// kickWith is kick with the question just resolved (nil if none), handed
// to the run that resumes here.
func (h *Host) kickWith(threadID string, resolved *checkpoint.Question) {
	if h.only != nil && !h.only(threadID) {
		return // another host's (Config.Threads)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.started || h.closing || threadID == "" {
		return
	}
	if r := h.runs[threadID]; r != nil {
		r.again = true
		if resolved != nil {
			r.handed = append(r.handed, resolved)
		}
		return
	}
	if h.coord != nil {
		return
	}
	if h.queued[threadID] {
		return
	}
	if h.resuming >= h.maxRes {
		h.queued[threadID] = true
		h.queue = append(h.queue, threadID)
		return
	}
	if r := h.startResumeLocked(threadID); r != nil && resolved != nil {
		r.handed = append(r.handed, resolved)
	}
}

func (h *Host) startResumeLocked(threadID string) *run {
	a, err := h.newAgent(threadID)
	if err != nil {
		h.failed[threadID] = err
		return nil
	}
	ctx, cancel := context.WithCancel(h.ctx)
	r := &run{agent: a, resume: true, cancel: cancel, done: make(chan struct{})}
	if h.coord != nil {
		r.acquired = make(chan error, 1)
	}
	h.runs[threadID] = r
	h.resuming++
	delete(h.parked, threadID)
	delete(h.failed, threadID)
	h.runsDone.Add(1)
	go h.drive(ctx, threadID, r, h.resumeStep(r))
	return r
}

// resumeStep resumes r's run, handing it the questions this host resolved
// for it meanwhile.
func (h *Host) resumeStep(r *run) func(context.Context) (*agent.Message, error) {
	return func(ctx context.Context) (*agent.Message, error) {
		h.mu.Lock()
		qs := r.handed
		r.handed = nil
		h.mu.Unlock()
		return r.agent.ResumeWith(ctx, &agent.ResumeOptions{Resolved: qs})
	}
}

// Drive makes the thread's run go on here: the [Coordinator]'s call, for
// a run to resume after an answer or a deadline, or one another host
// left. It returns once the run holds its lease, or [ErrHeldElsewhere]
// (another host drives it: that one goes on), [ErrBusy], or [ErrClosed].
// A run driven here already is resumed once more when it would stop.
func (h *Host) Drive(ctx context.Context, threadID string) error {
	h.mu.Lock()
	switch {
	case !h.started:
		h.mu.Unlock()
		return ErrNotStarted
	case h.closing:
		h.mu.Unlock()
		return ErrClosed
	}
	if r := h.runs[threadID]; r != nil {
		r.again = true
		h.mu.Unlock()
		return nil
	}
	if h.resuming >= h.maxRes {
		h.mu.Unlock()
		return ErrBusy
	}
	r := h.startResumeLocked(threadID)
	h.mu.Unlock()
	if r == nil {
		return fmt.Errorf("host: thread %s: %w", threadID, h.failure(threadID))
	}
	if r.acquired == nil {
		return nil
	}
	select {
	case err := <-r.acquired:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *Host) failure(threadID string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.failed[threadID]
}

// drive works one thread until its run ends, parks or fails, resuming it
// again when a question was resolved meanwhile.
func (h *Host) drive(ctx context.Context, threadID string, r *run, step func(context.Context) (*agent.Message, error)) {
	defer h.runsDone.Done()
	defer r.cancel()
	if h.coord != nil {
		lease, err := h.acquire(ctx, threadID, r)
		if err != nil {
			// Nothing ran. Whoever holds the thread goes on with it: a
			// question resolved meanwhile is theirs.
			h.mu.Lock()
			r.again = false
			h.driveEndedLocked(threadID, r)
			h.mu.Unlock()
			return
		}
		h.mu.Lock()
		r.lease = lease
		h.mu.Unlock()
		// The lease's writes are fenced: no other host writes the run
		// while its context lasts.
		ctx = agent.WithSoleDriver(lease.Context(ctx))
	}
	sub := r.agent.Subscribe(1024)
	forwarded := make(chan struct{})
	go func() {
		defer close(forwarded)
		for e := range sub.C {
			h.events.publish(e)
		}
	}()
	defer func() {
		sub.Close()
		<-forwarded
	}()
	var outage storeOutage
	for {
		_, err := step(ctx)
		if !errors.Is(err, checkpoint.ErrUnavailable) {
			outage.over(h, threadID)
		} else if h.waitForStore(ctx, threadID, r, &outage) {
			// The store was out of reach, and the run may still write:
			// it goes on from what the store holds, under the same lease.
			step = h.resumeStep(r)
			continue
		}
		parked := errors.Is(err, agent.ErrParked)
		// Nothing ran: no run to resume, or a prompt refused (Prompt
		// reports those to its caller).
		noRun := errors.Is(err, agent.ErrNoRun) || errors.Is(err, agent.ErrRunInProgress) || errors.Is(err, agent.ErrRunIDUsed)
		lost := r.lease != nil && r.lease.Lost()
		// Decided now: letting go of the lease below ends its context.
		failed := err != nil && !parked && !noRun && ctx.Err() == nil && !lost
		cut := err != nil && !parked && !noRun && ctx.Err() != nil && !lost
		h.mu.Lock()
		switch {
		case r.aborting:
		case lost:
			h.log.Warn("tollgate: lost the lease of a thread; another replica goes on with its run", "thread", threadID, "err", err)
		case failed:
			h.log.Warn("tollgate: run stopped with an error; it can be resumed or aborted", "thread", threadID, "err", err)
		}
		if r.again && !h.closing && ctx.Err() == nil && !r.aborting {
			r.again = false
			h.mu.Unlock()
			step = h.resumeStep(r)
			continue
		}
		if r.lease != nil && !lost {
			// Let go of the lease after the run's last write, outside the
			// lock (a round trip). A question resolved meanwhile makes
			// releaseLocked take it again. A run cut off by the shutdown,
			// or one a resolution was to resume once more (the shutdown
			// drops that), is handed on: its job went to this host. (An
			// abort seized the thread under a lease of its own: letting go
			// of this one then changes nothing.)
			handOn := !r.aborting && (cut || (r.again && h.closing))
			h.mu.Unlock()
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			if fl, ok := r.lease.(FailingLease); ok && failed && !r.aborting {
				// Every host reads the failure where the coordinator keeps
				// it, and it tries the run again later.
				fl.ReleaseFailed(rctx, err)
			} else {
				r.lease.Release(rctx, handOn)
			}
			cancel()
			h.mu.Lock()
		}
		switch {
		case r.aborting:
		case parked:
			h.parked[threadID] = struct{}{}
		case failed:
			h.failed[threadID] = err
		}
		h.driveEndedLocked(threadID, r)
		h.mu.Unlock()
		return
	}
}

// storeOutage is how long a drive has waited for the store.
type storeOutage struct {
	since time.Time
	tries int
}

// storeWaitFor bounds how long a run without a lease (a host alone)
// waits for its store to come back before it stops with the error; a
// run under a lease waits as long as the lease can be trusted.
var storeWaitFor = 2 * time.Minute

// waitForStore waits, with backoff, before a run that stopped because
// the store could not be reached goes on: false when it must not (its
// lease is lost or can no longer be trusted, the host closes, an abort
// takes the thread, or a host alone waited storeWaitFor).
func (h *Host) waitForStore(ctx context.Context, threadID string, r *run, o *storeOutage) bool {
	h.mu.Lock()
	stop := h.closing || r.aborting || r.lease != nil && r.lease.Lost()
	h.mu.Unlock()
	if stop || ctx.Err() != nil {
		return false
	}
	if o.since.IsZero() {
		o.since = time.Now()
		h.log.Warn("tollgate: the store is out of reach; the run goes on once it is back", "thread", threadID)
	}
	if h.coord == nil && time.Since(o.since) > storeWaitFor {
		return false
	}
	d := min(100*time.Millisecond<<min(o.tries, 5), 2*time.Second)
	o.tries++
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// over notes that the drive got past the store's outage, if it waited.
func (o *storeOutage) over(h *Host, threadID string) {
	if !o.since.IsZero() {
		h.log.Info("tollgate: the store is back; the run went on", "thread", threadID, "after", time.Since(o.since).Round(time.Millisecond))
		*o = storeOutage{}
	}
}

// acquire takes the thread's lease for r's drive and tells whoever waits
// (Drive, Prompt) how it went. A resume whose lease cannot be taken for
// a reason other than another holder (the database) tries again, with
// backoff, while the host runs: a resolution may have handed it on to
// this host alone. A prompt does not: its caller has the error.
func (h *Host) acquire(ctx context.Context, threadID string, r *run) (Lease, error) {
	lease, err := h.coord.Acquire(ctx, threadID)
	r.acquired <- err
	for wait := 100 * time.Millisecond; err != nil && r.resume && !errors.Is(err, ErrHeldElsewhere) && ctx.Err() == nil; wait = min(2*wait, 5*time.Second) {
		h.log.Warn("tollgate: taking a thread's lease; trying again", "thread", threadID, "in", wait, "err", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		lease, err = h.coord.Acquire(ctx, threadID)
	}
	if err != nil && !errors.Is(err, ErrHeldElsewhere) && ctx.Err() == nil {
		h.log.Warn("tollgate: taking a thread's lease", "thread", threadID, "err", err)
	}
	return lease, err
}

// driveEndedLocked: r's drive is over; the thread is let go unless an
// abort still closes it, and the queue moves.
func (h *Host) driveEndedLocked(threadID string, r *run) {
	r.driveDone = true
	if r.resume {
		h.resuming--
	}
	if !r.aborting || r.abortDone {
		h.releaseLocked(threadID, r)
	}
	h.dispatchLocked()
}

// releaseLocked lets go of the thread r held, resuming it once more if a
// question was resolved meanwhile.
func (h *Host) releaseLocked(threadID string, r *run) {
	if h.runs[threadID] != r {
		return
	}
	delete(h.runs, threadID)
	close(r.done)
	if r.again && !h.closing {
		r.again = false
		// With a Coordinator nothing else would resume it: no job is left
		// (the one that told this run was done), so it starts over the
		// bound rather than wait in a queue another replica cannot see.
		if h.resuming < h.maxRes || h.coord != nil {
			h.startResumeLocked(threadID)
		} else if !h.queued[threadID] {
			h.queued[threadID] = true
			h.queue = append(h.queue, threadID)
		}
	}
}

// dispatchLocked starts queued resumes while slots are free.
func (h *Host) dispatchLocked() {
	for len(h.queue) > 0 && h.resuming < h.maxRes && !h.closing {
		id := h.queue[0]
		h.queue = h.queue[1:]
		delete(h.queued, id)
		if h.runs[id] != nil {
			h.runs[id].again = true
			continue
		}
		h.startResumeLocked(id)
	}
	if len(h.queue) == 0 {
		h.queue = nil // let a long queue's array go
	}
}

// PromptOptions tune [Host.Prompt]. A nil *PromptOptions means zero values.
type PromptOptions struct {
	// IdempotencyKey makes a retried request return the run the first one
	// started instead of starting another. The run id is derived from the
	// thread and the key, so this holds across restarts.
	IdempotencyKey string
}

// Prompt starts a run of text on the thread (created if new) and returns
// once the message is durably stored, with the run's id; the run goes on
// in the background. ErrRunActive while the thread's run has not finished.
// With an IdempotencyKey already used on the thread, it returns that run's
// id and existing true, starting nothing.
func (h *Host) Prompt(ctx context.Context, threadID, text string, opts *PromptOptions) (runID string, existing bool, err error) {
	if h.coord == nil {
		return h.prompt(ctx, threadID, text, opts)
	}
	// Another replica may still hold a thread whose run has just ended
	// there (it lets go of the lease after its last write): try again
	// for a moment rather than refuse a message that comes right after.
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		runID, existing, err = h.prompt(ctx, threadID, text, opts)
		if !errors.Is(err, ErrHeldElsewhere) {
			return runID, existing, err
		}
		th, lerr := h.store.LoadThread(ctx, threadID)
		if lerr == nil && th.Status == checkpoint.ThreadRunning && opts != nil && opts.IdempotencyKey != "" &&
			th.RunID == IdempotentRunID(threadID, opts.IdempotencyKey) {
			return th.RunID, true, nil // the retried request's run, going on there
		}
		if lerr == nil && th.Status == checkpoint.ThreadRunning || wait >= time.Second {
			return "", false, fmt.Errorf("%w: thread %s is being driven by another replica", ErrRunActive, threadID)
		}
		select {
		case <-ctx.Done():
			return "", false, ctx.Err()
		case <-time.After(wait):
		}
	}
}

func (h *Host) prompt(ctx context.Context, threadID, text string, opts *PromptOptions) (runID string, existing bool, err error) {
	var key string
	if opts != nil {
		key = opts.IdempotencyKey
	}
	if key != "" {
		runID = IdempotentRunID(threadID, key)
	}
	h.mu.Lock()
	switch {
	case !h.started:
		h.mu.Unlock()
		return "", false, ErrNotStarted
	case h.closing:
		h.mu.Unlock()
		return "", false, ErrClosed
	}
	if r := h.runs[threadID]; r != nil {
		h.mu.Unlock()
		if runID != "" && r.runID == runID {
			return runID, true, nil
		}
		// A run that has just ended in the store may not have let go of
		// the thread yet (it was resumed once more for nothing): wait for
		// it rather than refuse a message that comes right after.
		th, err := h.store.LoadThread(ctx, threadID)
		if err == nil && th.Status != checkpoint.ThreadRunning {
			select {
			case <-r.done:
				return h.prompt(ctx, threadID, text, opts)
			case <-time.After(5 * time.Second):
			case <-ctx.Done():
				return "", false, ctx.Err()
			}
		}
		cur := r.runID
		if th != nil && err == nil {
			cur = th.RunID
		}
		return "", false, fmt.Errorf("%w: thread %s is running (run %s)", ErrRunActive, threadID, cur)
	}
	h.mu.Unlock()
	// A thread whose run is unfinished (parked, or cut off) is refused
	// without starting anything.
	loaded, err := h.store.LoadThread(ctx, threadID)
	if err == nil && loaded.Status == checkpoint.ThreadRunning {
		if runID != "" && loaded.RunID == runID {
			return runID, true, nil
		}
		return "", false, fmt.Errorf("%w: thread %s has an unfinished run (run %s) waiting for answers", ErrRunActive, threadID, loaded.RunID)
	}
	switch {
	case errors.Is(err, checkpoint.ErrNotFound):
		loaded = &checkpoint.Thread{ID: threadID, Status: checkpoint.ThreadIdle} // the prompt creates it
	case err != nil:
		loaded = nil // unreadable just now: the run reads it again
	}
	h.mu.Lock()
	if h.runs[threadID] != nil || h.closing {
		// Taken meanwhile: decide again.
		h.mu.Unlock()
		return h.prompt(ctx, threadID, text, opts)
	}
	a, err := h.newAgent(threadID)
	if err != nil {
		h.mu.Unlock()
		return "", false, err
	}
	runCtx, cancel := context.WithCancel(h.ctx)
	r := &run{agent: a, runID: runID, cancel: cancel, done: make(chan struct{})}
	if h.coord != nil {
		r.acquired = make(chan error, 1)
	}
	acquired := r.acquired
	h.runs[threadID] = r
	delete(h.failed, threadID)
	h.runsDone.Add(1)
	h.mu.Unlock()

	// Subscribed before the run starts, to see it start.
	started := a.Subscribe(64)
	type outcome struct{ err error }
	done := make(chan outcome, 1)
	go h.drive(runCtx, threadID, r, func(ctx context.Context) (*agent.Message, error) {
		msg, err := a.PromptWith(ctx, text, &agent.PromptOptions{RunID: runID, Thread: loaded})
		done <- outcome{err}
		return msg, err
	})
	defer started.Close()
	for {
		select {
		case err := <-acquired:
			acquired = nil
			if err != nil {
				<-r.done // nothing ran: the thread is let go
				return "", false, err
			}
		case e, ok := <-started.C:
			if !ok {
				continue
			}
			if s, isStart := e.(*agent.RunStartedEvent); isStart {
				h.mu.Lock()
				r.runID = s.Meta().RunID
				h.mu.Unlock()
				return s.Meta().RunID, false, nil
			}
		case o := <-done:
			if errors.Is(o.err, agent.ErrRunIDUsed) || errors.Is(o.err, agent.ErrRunInProgress) {
				// Nothing was started: let the thread go before answering,
				// so that State never shows a run that is not there.
				<-r.done
			}
			switch {
			case o.err == nil:
				// Finished before its start event was read here.
				return h.lastRunID(ctx, threadID, runID)
			case errors.Is(o.err, agent.ErrRunIDUsed):
				return runID, true, nil
			case errors.Is(o.err, agent.ErrRunInProgress):
				th, _ := h.store.LoadThread(ctx, threadID)
				cur := ""
				if th != nil {
					cur = th.RunID
				}
				if runID != "" && cur == runID {
					return runID, true, nil
				}
				return "", false, fmt.Errorf("%w: thread %s has an unfinished run (run %s) waiting for answers", ErrRunActive, threadID, cur)
			default:
				// It may still have started (a model error after the
				// message was stored): report the run if it did.
				select {
				case e := <-started.C:
					if s, isStart := e.(*agent.RunStartedEvent); isStart {
						return s.Meta().RunID, false, nil
					}
				default:
				}
				return "", false, o.err
			}
		case <-ctx.Done():
			return "", false, ctx.Err()
		}
	}
}

func (h *Host) lastRunID(ctx context.Context, threadID, want string) (string, bool, error) {
	if want != "" {
		return want, false, nil
	}
	th, err := h.store.LoadThread(ctx, threadID)
	if err != nil {
		return "", false, err
	}
	return th.RunID, false, nil
}

// IdempotentRunID is the run id [Host.Prompt] gives the run started with
// an idempotency key on a thread.
func IdempotentRunID(threadID, key string) string {
	sum := sha256.Sum256([]byte(threadID + "\x00" + key))
	return "run_k" + hex.EncodeToString(sum[:12])
}

// Resume retries the thread's unfinished run now: one that stopped with an
// error (a model or store failure), or one a notification was missed for.
// It returns at once; the run goes on in the background.
func (h *Host) Resume(ctx context.Context, threadID string) error {
	th, err := h.store.LoadThread(ctx, threadID)
	if err != nil {
		return err
	}
	if th.Status != checkpoint.ThreadRunning {
		return agent.ErrNoRun
	}
	h.mu.Lock()
	switch {
	case !h.started:
		h.mu.Unlock()
		return ErrNotStarted
	case h.closing:
		h.mu.Unlock()
		return ErrClosed
	}
	h.mu.Unlock()
	if h.coord != nil {
		switch err := h.Drive(ctx, threadID); {
		case errors.Is(err, ErrHeldElsewhere):
			return nil // it is going on, there
		default:
			return err
		}
	}
	h.kick(threadID)
	return nil
}

// Abort closes the thread's unfinished run (SPEC "Abort"): a run in
// progress here is stopped, every unresolved call gets a synthetic deny,
// pending questions are aborted, and a terminal message with stop reason
// "aborted" is stored. Nothing to abort is not an error.
func (h *Host) Abort(ctx context.Context, threadID, reason string) error {
	h.mu.Lock()
	r := h.runs[threadID]
	if r != nil {
		// The thread stays held until the abort is done: an answer that
		// comes meanwhile must not start a second driver that runs a call
		// the abort is closing.
		r.aborting = true
		h.mu.Unlock()
		actx, release, err := h.seize(ctx, threadID)
		if err == nil {
			err = r.agent.AbortPending(actx, reason)
			release()
		}
		h.mu.Lock()
		r.abortDone = true
		if r.driveDone {
			h.releaseLocked(threadID, r)
		}
		delete(h.parked, threadID)
		delete(h.failed, threadID)
		h.mu.Unlock()
		return err
	}
	a, err := h.newAgent(threadID)
	if err != nil {
		h.mu.Unlock()
		return err
	}
	r = &run{agent: a, cancel: func() {}, done: make(chan struct{}), aborting: true, driveDone: true}
	h.runs[threadID] = r
	h.mu.Unlock()
	actx, release, err := h.seize(ctx, threadID)
	if err != nil {
		h.mu.Lock()
		r.abortDone = true
		h.releaseLocked(threadID, r)
		h.mu.Unlock()
		return err
	}
	defer release()
	ctx = actx
	sub := a.Subscribe(64)
	go func() {
		for e := range sub.C {
			h.events.publish(e)
		}
	}()
	err = a.AbortPending(ctx, reason)
	sub.Close()
	h.mu.Lock()
	r.abortDone = true
	h.releaseLocked(threadID, r)
	delete(h.parked, threadID)
	delete(h.failed, threadID)
	h.mu.Unlock()
	return err
}

// seize takes the thread's lease for an abort, from whoever holds it —
// this host's own drive, another replica's, nobody — so that no replica
// goes on with the run while it is being closed, and whatever the holder
// still writes is refused. Without a Coordinator it returns ctx.
func (h *Host) seize(ctx context.Context, threadID string) (context.Context, func(), error) {
	if h.coord == nil {
		return ctx, func() {}, nil
	}
	lease, err := h.coord.Seize(ctx, threadID)
	if err != nil {
		return nil, nil, fmt.Errorf("host: taking thread %s to abort its run: %w", threadID, err)
	}
	return lease.Context(ctx), func() { lease.Release(context.WithoutCancel(ctx), false) }, nil
}

// RunState says what the host knows of a thread's run.
type RunState string

const (
	// RunIdle: no run in progress.
	RunIdle RunState = "idle"
	// RunActive: a run is being driven in this process (or queued to be).
	RunActive RunState = "active"
	// RunParked: the run waits for answers, holding nothing in memory.
	RunParked RunState = "parked"
	// RunFailed: the run stopped with an error; Resume retries it,
	// Abort closes it.
	RunFailed RunState = "failed"
)

// RunStatus is a thread's run as the host sees it.
type RunStatus struct {
	State RunState
	// Err is the error a failed run stopped with.
	Err error
	// Attempts and RetryAt, for a failed run under a [Coordinator] that
	// keeps failures ([FailureReader]: package cluster): the times in a
	// row it stopped with an error, and when it is tried again (zero:
	// not again, unless resumed).
	Attempts int
	RetryAt  time.Time
}

// State reports the run state of a stored thread and, when failed, the
// error it stopped with: [Host.States] of one thread.
func (h *Host) State(th *checkpoint.Thread) (RunState, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st := h.States(ctx, []*checkpoint.Thread{th})[0]
	return st.State, st.Err
}

// States reports the run status of stored threads, in their order. With
// a [Coordinator] that keeps failures ([FailureReader]), whether a run
// failed is read from it (one read for all the threads), so that every
// host reports the same; should that read fail, this host's own
// knowledge is reported.
func (h *Host) States(ctx context.Context, ths []*checkpoint.Thread) []RunStatus {
	out := make([]RunStatus, len(ths))
	var ask []string
	h.mu.Lock()
	for i, th := range ths {
		switch {
		case th.Status != checkpoint.ThreadRunning:
			out[i].State = RunIdle
		case h.runs[th.ID] != nil || h.queued[th.ID]:
			out[i].State = RunActive
		default:
			out[i].State = RunParked
			if err := h.failed[th.ID]; err != nil {
				out[i] = RunStatus{State: RunFailed, Err: err}
			}
			ask = append(ask, th.ID)
		}
	}
	h.mu.Unlock()
	fr, ok := h.coord.(FailureReader)
	if !ok || len(ask) == 0 {
		return out
	}
	failures, err := fr.RunFailures(ctx, ask)
	if err != nil {
		h.log.Warn("tollgate: reading which runs failed; this replica's own record is shown", "err", err)
		return out
	}
	for i, th := range ths {
		if s := out[i].State; s != RunParked && s != RunFailed {
			continue
		}
		if f := failures[th.ID]; f != nil {
			out[i] = RunStatus{State: RunFailed, Err: errors.New(f.Err), Attempts: f.Attempts, RetryAt: f.RetryAt}
		} else {
			// Not failed as the store has it: retried on another host,
			// or gone on since.
			out[i] = RunStatus{State: RunParked}
		}
	}
	return out
}

// Stats counts the runs of the host at one moment.
type Stats struct {
	// Active runs are being driven; Queued wait for a resume slot.
	Active, Queued int
	// Parked runs wait for answers (as far as this host knows: runs it
	// parked or found waiting at start-up).
	Parked int
	// Failed runs stopped with an error.
	Failed int
}

// Stats returns the host's counts.
func (h *Host) Stats() Stats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return Stats{Active: len(h.runs), Queued: len(h.queue), Parked: len(h.parked), Failed: len(h.failed)}
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
	s := h.Stats()
	s.Active = cut
	h.events.closeAll()
	return s, nil
}

// Answer checks an answer where it is taken and records it: the kind's
// shape, the digest the reviewer was shown, and for an edit the tool's
// schema (every problem listed) and the policy on the edited arguments,
// all before the compare-and-set. On success the run resumes at once. The
// errors are hitl's: ErrUnknownQuestion, ErrAlreadyAnswered, ErrExpired,
// ErrAborted, ErrWrongKind, ErrDigestMismatch, ErrInvalidAnswer (the
// question then stays open for a corrected answer). The answer may leave
// the digest out; [Host.AnswerWith] can require it.
func (h *Host) Answer(ctx context.Context, threadID, questionID string, answer json.RawMessage, by string) (*checkpoint.Question, error) {
	return h.AnswerWith(ctx, threadID, questionID, answer, AnswerOptions{By: by})
}

// AnswerOptions tune [Host.AnswerWith].
type AnswerOptions struct {
	// By names who answers.
	By string
	// RequireDigest refuses an answer to a question bound to a digest
	// that does not carry it (hitl.ErrDigestRequired): an answer taken
	// from outside, as the HTTP API takes them, must say which call it
	// is about. Zero: the digest may be left out.
	RequireDigest bool
}

// AnswerWith is [Host.Answer] with options.
func (h *Host) AnswerWith(ctx context.Context, threadID, questionID string, answer json.RawMessage, o AnswerOptions) (*checkpoint.Question, error) {
	// Marked before the compare-and-set: its notification can arrive
	// before AnswerWith returns, and the run must be resumed once, after
	// the answer is in the audit log. (A host never started hears no
	// notifications: nothing would ever take the mark away.)
	h.mu.Lock()
	started := h.started
	h.mu.Unlock()
	if started {
		h.markSelfResolved(threadID, questionID)
	}
	q, err := h.answers.AnswerWith(ctx, threadID, questionID, answer, &hitl.AnswerOptions{By: o.By, Check: h.checkAnswer, RequireDigest: o.RequireDigest})
	if err != nil {
		// Whoever won may have had its notification taken for ours (the
		// mark is gone: the notification loop consumed it): then make
		// sure the run goes on. Only then: an answer refused because the
		// question was resolved before (409 already_answered, 410) must
		// not resume a run that waits for something else — it would park
		// again, with a run_parked entry and metric each time.
		if started && !h.consumeSelfResolved(threadID, questionID) &&
			!errors.Is(err, hitl.ErrInvalidAnswer) && !errors.Is(err, hitl.ErrWrongKind) && !errors.Is(err, hitl.ErrDigestMismatch) &&
			!errors.Is(err, hitl.ErrDigestRequired) {
			h.kick(threadID)
		}
		return nil, err
	}
	h.resolved(ctx, q)
	return q, nil
}

// resolved tells subscribers of a resolution this host recorded (its audit
// entry was committed with it) and resumes the run.
func (h *Host) resolved(ctx context.Context, q *checkpoint.Question) {
	h.events.publish(&ResolvedEvent{Question: q})
	h.kickWith(q.ThreadID, q)
}

// ResolvedEvent is published by the host when it records an answer or a
// timeout (the run's own HitlResolvedEvent follows when it resumes).
type ResolvedEvent struct {
	Question *checkpoint.Question
}

func (e *ResolvedEvent) Meta() agent.EventMeta {
	return agent.EventMeta{ThreadID: e.Question.ThreadID, RunID: e.Question.RunID, At: e.Question.ResolvedAt}
}

// checkAnswer vets an answer with what the run itself would check: an
// edit's arguments against the tool's schema and every middleware that
// can check edits (the policy).
func (h *Host) checkAnswer(ctx context.Context, q *checkpoint.Question, raw json.RawMessage) error {
	var edited json.RawMessage
	var toolName string
	switch q.Kind {
	case hitl.KindApprove:
		var a struct {
			Decision   string          `json:"decision"`
			EditedArgs json.RawMessage `json:"edited_args"`
		}
		if err := json.Unmarshal(raw, &a); err != nil || a.Decision != hitl.DecisionEdit {
			return nil
		}
		var p struct {
			ToolName string `json:"tool_name"`
		}
		_ = json.Unmarshal(q.Payload, &p)
		edited, toolName = a.EditedArgs, p.ToolName
	case interrupt.KindToolInterrupt:
		var p struct {
			ToolName  string         `json:"tool_name"`
			Arguments map[string]any `json:"arguments"`
		}
		if err := json.Unmarshal(q.Payload, &p); err != nil {
			return fmt.Errorf("the question's payload is not readable: %w", err)
		}
		// Read exactly as the run will read it (interrupt.Interpret), so
		// that no spelling of an answer means "approve" here and "edit"
		// there.
		out := interrupt.Interpret(raw, p.Arguments)
		if out.Action != interrupt.ActionEdit {
			return nil
		}
		edited, _ = json.Marshal(out.Arguments)
		toolName = p.ToolName
	default:
		return nil
	}
	tmpl := h.templateOf(q.ThreadID)
	tool := tmpl.tool(toolName)
	if tool == nil {
		return fmt.Errorf("tool %q is not one this host runs, so an edit of it cannot be checked", toolName)
	}
	check := &agent.EditCheck{ThreadID: q.ThreadID, CallID: q.CallID, Tool: tool, Args: edited}
	checked := false
	for _, m := range tmpl.cfg.Middleware {
		ec, ok := m.(agent.EditChecker)
		if !ok {
			continue
		}
		if check.Messages == nil {
			if th, err := h.store.LoadThread(ctx, q.ThreadID); err == nil {
				var msgs []agent.Message
				if json.Unmarshal(th.Messages, &msgs) == nil {
					check.Messages = msgs
				}
			}
		}
		if err := ec.CheckEdit(ctx, check); err != nil {
			return err
		}
		checked = true
	}
	if !checked {
		if _, err := tool.Validate(edited); err != nil {
			return err
		}
	}
	return nil
}

// Subscribe returns the events of every run this host drives, and the
// host's own [ResolvedEvent]s, with room for buffer events (zero: 1024).
// A subscriber that falls behind loses events (counted by Dropped): read
// the store's event log for a complete record. Call the returned function
// to unsubscribe.
func (h *Host) Subscribe(buffer int) (<-chan agent.Event, func()) {
	if buffer <= 0 {
		buffer = 1024
	}
	return h.events.subscribe(buffer)
}

// Dropped counts events that subscribers lost by falling behind.
func (h *Host) Dropped() int64 { return h.events.droppedCount() }

// eventFan hands events to subscribers without ever blocking a run.
type eventFan struct {
	mu      sync.Mutex
	subs    []chan agent.Event
	closed  bool
	dropped int64
}

func (f *eventFan) subscribe(buffer int) (<-chan agent.Event, func()) {
	ch := make(chan agent.Event, buffer)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		close(ch)
		return ch, func() {}
	}
	f.subs = append(f.subs, ch)
	return ch, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if i := slices.Index(f.subs, ch); i >= 0 {
			f.subs = slices.Delete(f.subs, i, i+1)
			close(ch)
		}
	}
}

func (f *eventFan) publish(e agent.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ch := range f.subs {
		select {
		case ch <- e:
		default:
			f.dropped++
		}
	}
}

func (f *eventFan) droppedCount() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dropped
}

func (f *eventFan) closeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ch := range f.subs {
		close(ch)
	}
	f.subs, f.closed = nil, true
}
