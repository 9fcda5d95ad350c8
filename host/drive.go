package host

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
)

// resumeStep resumes r's run, handing it the questions this host resolved
// for it meanwhile.
func (h *Host) resumeStep(r *run) func(context.Context) (*agent.Message, error) {
	return func(ctx context.Context) (*agent.Message, error) {
		h.mu.Lock()
		qs := r.handed
		r.handed = nil
		h.mu.Unlock()
		return r.agent.Resume(ctx, qs...)
	}
}

// Drive makes the thread's run go on here: the [Coordinator]'s call, for
// a run to resume after an answer or a deadline, or one another host
// left. It returns once the run holds its lease, or [ErrHeldElsewhere]
// (another host drives it: that one goes on), [ErrBusy], or [ErrClosed].
// A run driven here already is resumed once more when it would stop.
func (h *Host) Drive(ctx context.Context, threadID string) error {
	h.mu.Lock()
	if err := h.refusesWorkLocked(); err != nil {
		h.mu.Unlock()
		return err
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
	// Forwarding stops before the drive's end lets another drive take the
	// agent (a parked one is kept for its resume): the two would both
	// hand on its events.
	stopForwarding := sync.OnceFunc(h.forward(r.agent))
	defer stopForwarding()
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
		e := endingOf(ctx, r, err)
		h.mu.Lock()
		switch {
		case r.phase.aborting():
		case e.lost:
			h.log.Warn("tollgate: lost the lease of a thread; another replica goes on with its run", "thread", threadID, "err", err)
		case e.failed:
			h.log.Warn("tollgate: run stopped with an error; it can be resumed or aborted", "thread", threadID, "err", err)
		}
		if r.again && !h.closing && ctx.Err() == nil && !r.phase.aborting() {
			r.again = false
			h.mu.Unlock()
			step = h.resumeStep(r)
			continue
		}
		stopForwarding()
		h.endDriveLocked(ctx, threadID, r, e)
		h.mu.Unlock()
		return
	}
}

// ending is how a step of a drive ended, decided as it returned (letting
// go of the lease later ends the context).
type ending struct {
	err error
	// parked: the run waits for answers. lost: the lease was lost
	// (another replica goes on). failed: it stopped with an error. cut:
	// the host's shutdown cut it off.
	parked, lost, failed, cut bool
}

func endingOf(ctx context.Context, r *run, err error) ending {
	parked := errors.Is(err, agent.ErrParked)
	// Nothing ran: no run to resume, or a prompt refused (Prompt reports
	// those to its caller).
	noRun := errors.Is(err, agent.ErrNoRun) || errors.Is(err, agent.ErrRunInProgress) || errors.Is(err, agent.ErrRunIDUsed)
	lost := r.lease != nil && r.lease.Lost()
	stopped := err != nil && !parked && !noRun && !lost
	return ending{err: err, parked: parked, lost: lost,
		failed: stopped && ctx.Err() == nil, cut: stopped && ctx.Err() != nil}
}

// endDriveLocked ends r's drive as e says: it lets go of the lease, notes
// the run parked or failed (unless an abort took it over), and leaves the
// thread to driveEndedLocked. Called with h.mu held, it lets go of it
// while the lease is released (a round trip).
func (h *Host) endDriveLocked(ctx context.Context, threadID string, r *run, e ending) {
	if r.lease != nil && !e.lost {
		// Let go of the lease after the run's last write. A question
		// resolved meanwhile makes releaseLocked take it again. A run cut
		// off by the shutdown, or one a resolution was to resume once more
		// (the shutdown drops that), is handed on: its job went to this
		// host. (An abort seized the thread under a lease of its own:
		// letting go of this one then changes nothing.)
		aborting := r.phase.aborting()
		handOn := !aborting && (e.cut || (r.again && h.closing))
		h.mu.Unlock()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if fl, ok := r.lease.(FailingLease); ok && e.failed && !aborting {
			// Every host reads the failure where the coordinator keeps
			// it, and it tries the run again later.
			fl.ReleaseFailed(rctx, e.err)
		} else {
			r.lease.Release(rctx, handOn)
		}
		cancel()
		h.mu.Lock()
	}
	switch {
	case r.phase.aborting():
	case e.parked:
		h.parked[threadID] = struct{}{}
		h.kept.put(threadID, r.agent)
	case e.failed:
		h.failed[threadID] = e.err
	}
	h.driveEndedLocked(threadID, r)
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
	stop := h.closing || r.phase.aborting() || r.lease != nil && r.lease.Lost()
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
	if err := h.refusesWorkLocked(); err != nil {
		h.mu.Unlock()
		return err
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
