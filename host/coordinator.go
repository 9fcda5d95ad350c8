package host

import (
	"context"
	"errors"
	"time"
)

// A Coordinator lets several hosts (replicas, in as many processes) share
// one store's threads: package cluster is one, on PostgreSQL and River. With
// a Coordinator the host drives a thread only under a lease it took from
// the coordinator (one driver per thread at a time), and the coordinator,
// not the host, decides when runs go on: it calls [Host.Drive] for a run
// to resume after an answer or a deadline (from any replica), and for one
// a dead replica left. The host then does not look for unfinished runs
// at start-up; an answer it takes, or a deadline it fires, is the
// coordinator's to act on (its store commits the resolution with the job
// that resumes the run). Every host fires deadlines from the store, as
// without a Coordinator: the compare-and-set lets one of them win.
type Coordinator interface {
	// Start begins handing h work; it is called by [Host.Start] once the
	// host takes runs.
	Start(ctx context.Context, h *Host) error
	// Acquire takes the thread for this host: [ErrHeldElsewhere] when
	// another host drives it now.
	Acquire(ctx context.Context, threadID string) (Lease, error)
	// Seize takes the thread for this host even from a live holder, for
	// [Host.Abort]: the holder's writes are refused from then on, and its
	// run is cancelled as soon as it hears of it.
	Seize(ctx context.Context, threadID string) (Lease, error)
	// Stop ends the work [Coordinator.Start] began; called by
	// [Host.Shutdown] before it waits for the runs in progress, so that no
	// new work comes.
	Stop(ctx context.Context) error
}

// A Lease is a thread held by one host: see [Coordinator].
type Lease interface {
	// Context is parent carrying the lease: the store's writes made with
	// it are fenced (refused once the lease is lost), and it is cancelled
	// when the lease is lost or can no longer be renewed in time, so that
	// a host never calls the model or runs a tool for a thread another
	// host may be driving.
	Context(parent context.Context) context.Context
	// Lost reports whether the lease was lost (or let go of): another
	// host may drive the thread now, and this one must neither write nor
	// report a failure.
	Lost() bool
	// Release lets the thread go, after the host's last write of the run.
	// cutOff says the run neither finished nor parked (the host shuts
	// down): the coordinator has another host go on with it.
	Release(ctx context.Context, cutOff bool)
}

// A FailingLease is a [Lease] that records, as it lets the thread go,
// that its run stopped with an error: the coordinator keeps the failure
// where every host reads it ([FailureReader]) and tries the run again
// later. The host calls ReleaseFailed instead of Release for such a run.
type FailingLease interface {
	Lease
	ReleaseFailed(ctx context.Context, err error)
}

// RunFailure is a run that stopped with an error, as a [FailureReader]
// keeps it.
type RunFailure struct {
	// Err is the error it stopped with, as text.
	Err string
	// Attempts counts the times in a row it stopped with an error.
	Attempts int
	// At is when it last stopped.
	At time.Time
	// RetryAt is when it is tried again; zero: not again, unless
	// resumed ([Host.Resume]) or aborted.
	RetryAt time.Time
}

// A FailureReader is a [Coordinator] that keeps the failures of runs
// ([FailingLease]) where every host reads them, so that a failed run
// reads failed from every host.
type FailureReader interface {
	// RunFailures returns the failures of those of the threads whose run
	// stopped with an error and that no host drives now.
	RunFailures(ctx context.Context, threadIDs []string) (map[string]*RunFailure, error)
}

// ErrHeldElsewhere: another host drives the thread now.
var ErrHeldElsewhere = errors.New("host: another replica drives the thread")

// ErrBusy: the host drives as many runs as Config.MaxResumes allows; the
// coordinator gives the run to another host or tries again.
var ErrBusy = errors.New("host: too many runs in progress")
