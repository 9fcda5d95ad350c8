package host

import (
	"context"
	"errors"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

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
