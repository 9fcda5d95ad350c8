package host

import (
	"context"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
)

// run is a thread held by this host: driven (Prompt, a resume), closed by
// Abort, or both at once.
type run struct {
	agent *agent.Agent
	runID string
	// phase is where the run is in its life: see runPhase. Read and
	// written under Host.mu, by the transitions alone.
	phase runPhase
	again bool // a question was resolved while it ran: resume once more
	// handed: questions this host resolved for the run since it last
	// resumed, handed to the next resume so that it need not read them.
	handed []*checkpoint.Question
	resume bool // counted in Host.resuming
	cancel context.CancelFunc
	done   chan struct{} // closed when the host lets go of the thread
	// With a Coordinator: the lease the run is driven under, and where
	// the drive says whether it got it (nil error) before anything ran.
	lease    Lease
	acquired chan error
}

// runPhase is where a run this host holds is in its life. The thread is
// held (it is in Host.runs, and no second driver starts here) from the
// first phase until phaseReleased; an abort keeps it held until both the
// abort and the drive it interrupted are done, so that an answer that
// comes meanwhile cannot start a driver that runs a call the abort is
// closing. The phase changes only by the transitions below, under
// Host.mu:
//
//	driving ──abortBegins──▶ abortDriving ──driveEnds──▶ aborting
//	   │                          │                         │
//	driveEnds                 abortEnds                 abortEnds
//	   ▼                          ▼                         ▼
//	released ◀──driveEnds── abortedDriving              released
//
// A run a drive holds (Prompt, a resume: startResumeLocked) starts in
// phaseDriving, the zero phase; one Abort takes without a drive (the
// thread was idle, parked or failed here, or driven by another replica)
// starts in phaseAborting; releaseLocked ends every run in
// phaseReleased.
// While aborting (abortDriving, aborting, abortedDriving) the drive
// records nothing of how it ended — not parked, not failed — and resumes
// nothing: the abort decides the run's end.
type runPhase int

const (
	// phaseDriving: a drive works the run.
	phaseDriving runPhase = iota
	// phaseAbortDriving: Abort closes the run while its drive ends.
	phaseAbortDriving
	// phaseAborting: Abort closes the run; no drive is left.
	phaseAborting
	// phaseAbortedDriving: the abort is done; the drive still ends.
	phaseAbortedDriving
	// phaseReleased: the host let go of the thread (done is closed).
	phaseReleased
)

// aborting reports whether an abort took the run over.
func (p runPhase) aborting() bool {
	return p == phaseAbortDriving || p == phaseAborting || p == phaseAbortedDriving
}

// abortBegins: Abort takes the run over. A second abort of the same run
// changes nothing.
func (r *run) abortBegins() {
	if r.phase == phaseDriving {
		r.phase = phaseAbortDriving
	}
}

// driveEnds: the run's drive is over. It reports whether the thread is to
// be let go now (no abort holds it).
func (r *run) driveEnds() (release bool) {
	switch r.phase {
	case phaseDriving, phaseAbortedDriving:
		return true
	case phaseAbortDriving:
		r.phase = phaseAborting
	}
	return false
}

// abortEnds: the abort is over. It reports whether the thread is to be
// let go now (no drive holds it).
func (r *run) abortEnds() (release bool) {
	switch r.phase {
	case phaseAborting:
		return true
	case phaseAbortDriving:
		r.phase = phaseAbortedDriving
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
	a := h.kept.take(threadID)
	if a == nil {
		var err error
		if a, err = h.newAgent(threadID); err != nil {
			h.failed[threadID] = err
			return nil
		}
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
	step := h.resumeStep(r)
	h.drivers.goDrive(h.ctx, func() { h.drive(ctx, threadID, r, step) })
	return r
}

func (h *Host) failure(threadID string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.failed[threadID]
}

// driveEndedLocked: r's drive is over; the thread is let go unless an
// abort still closes it, and the queue moves.
func (h *Host) driveEndedLocked(threadID string, r *run) {
	if r.resume {
		h.resuming--
	}
	if r.driveEnds() {
		h.releaseLocked(threadID, r)
	}
	h.dispatchLocked()
}

// abortEndedLocked: the abort of r is over; the thread is let go unless
// r's drive still ends.
func (h *Host) abortEndedLocked(threadID string, r *run) {
	if r.abortEnds() {
		h.releaseLocked(threadID, r)
	}
}

// releaseLocked lets go of the thread r held, resuming it once more if a
// question was resolved meanwhile.
func (h *Host) releaseLocked(threadID string, r *run) {
	if h.runs[threadID] != r {
		return
	}
	delete(h.runs, threadID)
	r.phase = phaseReleased
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
