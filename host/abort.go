package host

import (
	"context"
	"fmt"
)

// Abort closes the thread's unfinished run (SPEC "Abort"): a run in
// progress here is stopped, every unresolved call gets a synthetic deny,
// pending questions are aborted, and a terminal message with stop reason
// "aborted" is stored. Nothing to abort is not an error. Once Shutdown has
// begun, only a run in progress here is aborted; another thread's gets
// [ErrClosed]. A host not started aborts too (a command line closing a
// thread needs no loops).
func (h *Host) Abort(ctx context.Context, threadID, reason string) error {
	h.mu.Lock()
	r := h.runs[threadID]
	if r != nil {
		// The thread stays held until the abort is done: an answer that
		// comes meanwhile must not start a second driver that runs a call
		// the abort is closing.
		r.abortBegins()
		h.mu.Unlock()
		actx, release, err := h.seize(ctx, threadID)
		if err == nil {
			err = r.agent.AbortPending(actx, reason)
			release()
		}
		h.mu.Lock()
		h.abortEndedLocked(threadID, r)
		delete(h.parked, threadID)
		delete(h.failed, threadID)
		h.mu.Unlock()
		return err
	}
	if h.closing {
		// Shutdown may be past waiting for the runs: an abort begun now
		// could still be writing when the caller closes the store. The
		// run stays as it is, for the next start to abort or go on.
		h.mu.Unlock()
		return ErrClosed
	}
	h.kept.take(threadID) // the abort ends the run it parked
	a, err := h.newAgent(threadID)
	if err != nil {
		h.mu.Unlock()
		return err
	}
	// Counted before Shutdown can begin waiting (it sets closing under
	// h.mu first): Shutdown returns only once this abort has written.
	h.runsDone.Add(1)
	defer h.runsDone.Done()
	r = &run{agent: a, phase: phaseAborting, cancel: func() {}, done: make(chan struct{})}
	h.runs[threadID] = r
	h.mu.Unlock()
	actx, release, err := h.seize(ctx, threadID)
	if err != nil {
		h.mu.Lock()
		h.abortEndedLocked(threadID, r)
		h.mu.Unlock()
		return err
	}
	defer release()
	ctx = actx
	stopForwarding := h.forward(a)
	err = a.AbortPending(ctx, reason)
	stopForwarding()
	h.mu.Lock()
	h.abortEndedLocked(threadID, r)
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
