package host

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// A drive runs on a goroutine an earlier drive ran on, when one is idle:
// a drive goes deep (the agent's loop, the JSON of its writes, the
// store), and a new goroutine grows its stack there, copying it each time
// it doubles — about a tenth of the CPU of a host-driven cycle on the
// memory store, which a run that waits in process does not pay. At most
// maxIdleDrivers wait for work, each for driverIdle at most; they end
// when the host shuts down (Shutdown waits for them).
const (
	maxIdleDrivers = 4
	driverIdle     = 5 * time.Second
)

// drivers are the goroutines drives run on.
type drivers struct {
	work chan func() // unbuffered: taken only by an idle driver
	idle atomic.Int32
	wg   sync.WaitGroup
}

// goDrive runs f, a drive, on an idle driver or a new one. ctx is the
// host's: when it ends, idle drivers end.
func (d *drivers) goDrive(ctx context.Context, f func()) {
	select {
	case d.work <- f:
		return
	default:
	}
	d.wg.Add(1)
	go d.run(ctx, f)
}

func (d *drivers) run(ctx context.Context, f func()) {
	defer d.wg.Done()
	var t *time.Timer
	for {
		f()
		f = nil // an idle driver holds nothing of the drive it ran
		if d.idle.Add(1) > maxIdleDrivers {
			d.idle.Add(-1)
			return
		}
		if t == nil {
			t = time.NewTimer(driverIdle)
			defer t.Stop()
		} else {
			t.Reset(driverIdle)
		}
		select {
		case f = <-d.work:
			d.idle.Add(-1)
		case <-t.C:
			d.idle.Add(-1)
			return
		case <-ctx.Done():
			d.idle.Add(-1)
			return
		}
	}
}
