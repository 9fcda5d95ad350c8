package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
)

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
	if err := h.refusesWorkLocked(); err != nil {
		h.mu.Unlock()
		return "", false, err
	}
	if r := h.runs[threadID]; r != nil {
		held := r.runID
		h.mu.Unlock()
		return h.promptHeld(ctx, threadID, text, opts, runID, r, held)
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
	h.kept.take(threadID) // a new run: what an earlier one kept is of no use
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

	// Subscribed before the run starts, to see it start: told on the
	// emitting goroutine (no channel of every event of the run's start).
	started := make(chan *agent.RunStartedEvent, 1)
	stopStarted := a.SubscribeFunc(func(e agent.Event) {
		if s, ok := e.(*agent.RunStartedEvent); ok {
			select {
			case started <- s:
			default:
			}
		}
	})
	type outcome struct{ err error }
	done := make(chan outcome, 1)
	h.drivers.goDrive(h.ctx, func() {
		h.drive(runCtx, threadID, r, func(ctx context.Context) (*agent.Message, error) {
			msg, err := a.PromptWith(ctx, text, &agent.PromptOptions{RunID: runID, Thread: loaded})
			done <- outcome{err}
			return msg, err
		})
	})
	defer stopStarted()
	for {
		select {
		case err := <-acquired:
			acquired = nil
			if err != nil {
				<-r.done // nothing ran: the thread is let go
				return "", false, err
			}
		case s := <-started:
			h.mu.Lock()
			r.runID = s.Meta().RunID
			h.mu.Unlock()
			return s.Meta().RunID, false, nil
		case o := <-done:
			return h.promptEnded(ctx, threadID, runID, r, started, o.err)
		case <-ctx.Done():
			return "", false, ctx.Err()
		}
	}
}

// promptHeld answers a prompt on a thread r holds here (held: its run id
// as it was read): the run of the
// same idempotency key, or ErrRunActive — after r lets go, if the store
// says its run has just ended (it was resumed once more for nothing).
func (h *Host) promptHeld(ctx context.Context, threadID, text string, opts *PromptOptions, runID string, r *run, held string) (string, bool, error) {
	if runID != "" && held == runID {
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
	cur := held
	if th != nil && err == nil {
		cur = th.RunID
	}
	return "", false, fmt.Errorf("%w: thread %s is running (run %s)", ErrRunActive, threadID, cur)
}

// promptEnded answers a prompt whose run returned err before its start
// event was read here.
func (h *Host) promptEnded(ctx context.Context, threadID, runID string, r *run, started <-chan *agent.RunStartedEvent, err error) (string, bool, error) {
	if errors.Is(err, agent.ErrRunIDUsed) || errors.Is(err, agent.ErrRunInProgress) {
		// Nothing was started: let the thread go before answering,
		// so that State never shows a run that is not there.
		<-r.done
	}
	switch {
	case err == nil:
		// Finished before its start event was read here.
		return h.lastRunID(ctx, threadID, runID)
	case errors.Is(err, agent.ErrRunIDUsed):
		return runID, true, nil
	case errors.Is(err, agent.ErrRunInProgress):
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
		case s := <-started:
			return s.Meta().RunID, false, nil
		default:
		}
		return "", false, err
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
