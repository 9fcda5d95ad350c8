package host

import (
	"context"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
)

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

func (h *Host) failure(threadID string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.failed[threadID]
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
