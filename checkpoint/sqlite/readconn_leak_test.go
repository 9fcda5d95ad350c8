package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// endsInStep is a context that ends while the driver runs the read's
// statement: its Done channel is closed when the driver's
// context-watching goroutine (interruptOnDone) first asks for it, and the
// driver's check after the step waits until that goroutine has
// interrupted the connection. Not timing: the order is forced.
type endsInStep struct {
	context.Context
	ch      chan struct{}
	once    sync.Once
	watched atomic.Bool
	queried int // Done calls from the driver's query, its goroutine's
}

func newEndsInStep() *endsInStep {
	return &endsInStep{Context: context.Background(), ch: make(chan struct{})}
}

func callerName() string {
	pc, _, _, _ := runtime.Caller(2)
	if f := runtime.FuncForPC(pc); f != nil {
		return f.Name()
	}
	return ""
}

func watcherRunning() bool {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	return strings.Contains(string(buf[:n]), "interruptOnDone.func1")
}

func (c *endsInStep) Done() <-chan struct{} {
	name := callerName()
	switch {
	case strings.Contains(name, "interruptOnDone"):
		c.watched.Store(true)
		c.once.Do(func() { close(c.ch) })
	case strings.Contains(name, "(*stmt).query"):
		// The first is the check before the step, the second the
		// check after it: let the watcher interrupt before that.
		if c.queried++; c.queried == 2 {
			for !c.watched.Load() || watcherRunning() {
				runtime.Gosched()
			}
		}
	}
	return c.ch
}

func (c *endsInStep) Err() error {
	select {
	case <-c.ch:
		return context.Canceled
	default:
		return nil
	}
}

// openFDs counts this process's open descriptors of files under dir.
func openFDs(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.HasPrefix(l, dir) {
			n++
		}
	}
	return n
}

// A read whose context ends while its statement runs: the driver
// interrupts the connection, database/sql then discards it (the driver's
// IsValid reports an interrupted connection as unusable) — with the
// cycle's statements still prepared on it (readconn.go's rconns keeps
// them, "cannot be finalized without it"). sqlite3_close_v2 on a
// connection with unfinalized statements leaves it a zombie: its file
// descriptors, page cache and WAL locks stay for the life of the process,
// one more for every such read, and the store's Close cannot finish the
// WAL. Before 8afe838 database/sql finalized its own statements before
// closing the connection.
func TestCancelledReadLeaksNoConnection(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tollgate.db")
	s, err := Open(t.Context(), path, &Options{Readers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	th := &checkpoint.Thread{ID: "t", Status: checkpoint.ThreadRunning, RunID: "r", Messages: json.RawMessage(`[]`)}
	if err := s.CreateThread(t.Context(), th); err != nil {
		t.Fatal(err)
	}
	const reads = 5
	hit := 0
	for range reads {
		ctx := newEndsInStep()
		_, err := s.LoadThread(ctx, "t")
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("LoadThread: %v, want context.Canceled", err)
		}
		if ctx.watched.Load() {
			hit++
		}
	}
	if hit == 0 {
		t.Skip("the driver's watcher never ran during a step")
	}
	if _, err := s.LoadThread(t.Context(), "t"); err != nil {
		t.Fatal(err)
	}
	s.rc.mu.Lock()
	prepared := len(s.rc.by)
	s.rc.mu.Unlock()
	if open := s.r.Stats().OpenConnections; prepared > open {
		t.Errorf("statements prepared on %d reader connections, %d open: %d discarded with statements left on them", prepared, open, prepared-open)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(s.rc.by); n != 0 {
		t.Errorf("after Close, statements of %d connections never finalized", n)
	}
	if n := openFDs(t, dir); n != 0 {
		t.Errorf("after Close, %d descriptors of the store's files still open (%d reads cancelled in their step)", n, hit)
	}
	if _, err := os.Stat(path + "-wal"); err == nil {
		t.Errorf("after Close, the WAL is still there")
	}
}

// A read that gets a reader connection after Close's rconns.close has
// visited it (Close waits for the pool's connections one by one, then
// gives them back) prepares the cycle's statements on it again; nothing
// finalizes them, and database/sql's Close then closes the connection
// under them: a zombie connection, its descriptors open for the life of
// the process. Close and the read both wait for the one reader
// connection the test holds; database/sql hands it to one of them at
// random, so the test tries a few stores.
func TestReadRacingCloseLeaksNoConnection(t *testing.T) {
	for try := range 12 {
		dir := t.TempDir()
		path := filepath.Join(dir, "tollgate.db")
		s, err := Open(t.Context(), path, &Options{Readers: 1})
		if err != nil {
			t.Fatal(err)
		}
		th := &checkpoint.Thread{ID: "t", Status: checkpoint.ThreadRunning, RunID: "r", Messages: json.RawMessage(`[]`)}
		if err := s.CreateThread(t.Context(), th); err != nil {
			t.Fatal(err)
		}
		if _, err := s.LoadThread(t.Context(), "t"); err != nil { // statements prepared
			t.Fatal(err)
		}
		held, err := s.r.Conn(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		waits := s.r.Stats().WaitCount
		waitFor := func(n int64) {
			for i := 0; s.r.Stats().WaitCount < waits+n; i++ {
				if i > 1e7 {
					t.Skip("Close does not wait for the reader connection")
				}
				runtime.Gosched()
			}
		}
		closed := make(chan error, 1)
		go func() { closed <- s.Close() }()
		waitFor(1) // Close waits for the reader connection
		read := make(chan error, 1)
		go func() { _, err := s.LoadThread(context.Background(), "t"); read <- err }()
		waitFor(2) // so does the read
		held.Close()
		if err := <-closed; err != nil {
			t.Fatal(err)
		}
		readErr := <-read
		fds := openFDs(t, dir)
		_, walErr := os.Stat(path + "-wal")
		if fds != 0 || walErr == nil {
			t.Fatalf("try %d: the read (%v) ran after Close visited its connection: after Close %d descriptors of the store's files open, WAL left: %v; statements of %d connections never finalized",
				try, readErr, fds, walErr == nil, len(s.rc.by))
		}
	}
}
