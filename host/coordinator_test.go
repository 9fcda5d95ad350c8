package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/host"
)

// fakeCoordinator hands out leases in memory, as package cluster does in
// the database, and records what the host does with them.
type fakeCoordinator struct {
	mu       sync.Mutex
	held     map[string]*fakeLease // by thread
	other    map[string]bool       // threads "another replica" holds
	released []fakeRelease
	h        *host.Host
}

type fakeRelease struct {
	thread string
	cutOff bool
}

type fakeLease struct {
	c      *fakeCoordinator
	thread string
	mu     sync.Mutex
	lost   bool
	cancel []context.CancelFunc
}

func newFakeCoordinator() *fakeCoordinator {
	return &fakeCoordinator{held: map[string]*fakeLease{}, other: map[string]bool{}}
}

func (c *fakeCoordinator) Start(ctx context.Context, h *host.Host) error {
	c.mu.Lock()
	c.h = h
	c.mu.Unlock()
	return nil
}

func (c *fakeCoordinator) Stop(ctx context.Context) error { return nil }

func (c *fakeCoordinator) Acquire(ctx context.Context, thread string) (host.Lease, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.other[thread] || c.held[thread] != nil {
		return nil, host.ErrHeldElsewhere
	}
	l := &fakeLease{c: c, thread: thread}
	c.held[thread] = l
	return l, nil
}

func (c *fakeCoordinator) Seize(ctx context.Context, thread string) (host.Lease, error) {
	c.mu.Lock()
	old := c.held[thread]
	c.mu.Unlock()
	if old != nil {
		old.takeOver()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.other, thread)
	l := &fakeLease{c: c, thread: thread}
	c.held[thread] = l
	return l, nil
}

func (l *fakeLease) Context(parent context.Context) context.Context {
	ctx, cancel := context.WithCancel(parent)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cancel = append(l.cancel, cancel)
	return ctx
}

func (l *fakeLease) Lost() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// takeOver: another replica took the lease; the run here is cancelled.
func (l *fakeLease) takeOver() {
	l.mu.Lock()
	l.lost = true
	for _, c := range l.cancel {
		c()
	}
	l.mu.Unlock()
	l.c.mu.Lock()
	delete(l.c.held, l.thread)
	l.c.other[l.thread] = true
	l.c.mu.Unlock()
}

func (l *fakeLease) Release(ctx context.Context, cutOff bool) {
	l.c.mu.Lock()
	defer l.c.mu.Unlock()
	if l.c.held[l.thread] == l {
		delete(l.c.held, l.thread)
	}
	l.c.released = append(l.c.released, fakeRelease{l.thread, cutOff})
}

func (c *fakeCoordinator) lease(thread string) *fakeLease {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held[thread]
}

func (c *fakeCoordinator) releases() []fakeRelease {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]fakeRelease(nil), c.released...)
}

func coordinated(t *testing.T) (*fixture, *fakeCoordinator, *host.Host) {
	f := newFixture(t, nil, time.Hour, nil)
	c := newFakeCoordinator()
	f.cfg.Coordinator = c
	return f, c, f.start(t)
}

// With a Coordinator a run is driven under its lease, which the host lets
// go of once the run parks or ends; an answer resumes nothing by itself
// (the coordinator's job does, here Drive).
func TestCoordinatedRunHoldsItsLease(t *testing.T) {
	t.Parallel()
	f, c, h := coordinated(t)
	qs := f.promptParked(t, h, "t1", "$ touch x", 1)
	eventually(t, "the lease to be let go", func() bool { return c.lease("t1") == nil && len(c.releases()) == 1 })
	if r := c.releases()[0]; r.cutOff {
		t.Errorf("a parked run's lease was released as cut off")
	}
	a, _ := json.Marshal(map[string]any{"decision": "approve", "digest": qs[0].Digest})
	if _, err := h.Answer(context.Background(), "t1", qs[0].ID, a, "alice"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if len(f.shell.runs()) != 0 {
		t.Fatalf("the run resumed without the coordinator")
	}
	if err := h.Drive(context.Background(), "t1"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the run to end", f.idle(t, "t1"))
	if got := f.shell.runs(); len(got) != 1 {
		t.Errorf("ran %v", got)
	}
}

// A thread another replica holds: Prompt says the run is active there,
// Drive says so to the coordinator, Resume leaves it to that replica.
func TestCoordinatedThreadHeldElsewhere(t *testing.T) {
	t.Parallel()
	f, c, h := coordinated(t)
	f.promptParked(t, h, "t1", "$ touch x", 1)
	c.mu.Lock()
	c.other["t1"], c.other["t2"] = true, true
	c.mu.Unlock()
	if err := h.Drive(context.Background(), "t1"); !errors.Is(err, host.ErrHeldElsewhere) {
		t.Errorf("Drive of a thread held elsewhere: %v", err)
	}
	if err := h.Resume(context.Background(), "t1"); err != nil {
		t.Errorf("Resume of a thread held elsewhere: %v, want nil (it goes on there)", err)
	}
	// Prompt tries again for about a second before it refuses (a lease
	// let go of just now); the bound only keeps a hang from lasting: CI
	// under -race at load 20 took more than 3 s for those tries.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, _, err := h.Prompt(ctx, "t2", "$ ls", nil); !errors.Is(err, host.ErrRunActive) {
		t.Errorf("Prompt on a thread held elsewhere: %v, want ErrRunActive", err)
	}
	if st := h.Stats(); st.Active != 0 {
		t.Errorf("%d runs active after refusals", st.Active)
	}
}

// A run whose lease is taken over stops without writing on, and is not
// reported as failed; a run cut off by shutdown is released as such, for
// another replica to go on with.
func TestCoordinatedLostAndCutOff(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, time.Hour, nil)
	f.shell.gate = make(chan struct{})
	c := newFakeCoordinator()
	f.cfg.Coordinator = c
	h, err := host.New(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// ls is allowed: the run holds its lease while the tool waits.
	if _, _, err := h.Prompt(context.Background(), "t1", "$ ls", nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.Prompt(context.Background(), "t2", "$ ls", nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "both runs to hold leases", func() bool { return c.lease("t1") != nil && c.lease("t2") != nil })
	c.lease("t1").takeOver()
	eventually(t, "t1's drive to end", func() bool { return h.Stats().Active == 1 })
	th, _ := f.thread(t, "t1")
	if st, err := h.State(th); st == host.RunFailed {
		t.Errorf("a run whose lease was lost is reported failed: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	h.Shutdown(ctx)
	var cut []string
	for _, r := range c.releases() {
		if r.cutOff {
			cut = append(cut, r.thread)
		}
		if r.thread == "t1" {
			t.Errorf("the lost lease of t1 was released")
		}
	}
	if len(cut) != 1 || cut[0] != "t2" {
		t.Errorf("released as cut off: %v, want [t2]", cut)
	}
}
