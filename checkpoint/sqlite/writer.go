package sqlite

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Bounds of a group: the batches one transaction takes at most, and about
// the bytes (a batch larger than that goes alone).
const (
	maxGroup      = 64
	maxGroupBytes = 4 << 20
)

// deferWait is how long the writer holds a queue of deferrable batches
// only ([checkpoint.Batch].Deferrable) for another write to share their
// transaction: an MCP gateway's result, written once its client has it,
// then shares the sync of the client's next call, which would otherwise
// wait for the result's own sync to end before beginning its own.
const deferWait = 2 * time.Millisecond

// errClosed: a write after Close.
var errClosed = errors.New("sqlite: store is closed")

// writer is the store's single writer: one goroutine that commits every
// batch, gathering those that wait for it into one transaction (group
// commit). It waits for nothing else, but for deferrable batches: when one
// batch is queued it goes alone, at once, and the batches that arrive
// while a transaction is being committed (the disk's sync, most of its
// time) form the next one. A queue of deferrable batches only is held up
// to deferWait, until another batch comes or the store closes.
type writer struct {
	s *Store

	mu     sync.Mutex
	queue  []*op
	closed bool

	wake   chan struct{} // capacity 1: something is queued, or closed
	exited chan struct{}

	deferWait time.Duration // the constant, but in tests

	transactions, batches atomic.Int64
}

// WriteStats counts what the store has written since Open.
type WriteStats struct {
	// Transactions is the number of write transactions committed to the
	// database: one COMMIT, and with synchronous=FULL one sync of the
	// WAL, each. (The migrations of Open are not counted.)
	Transactions int64
	// Batches is the number of batches those transactions wrote: Commit
	// calls and the single-record writes (CreateThread, SaveThread,
	// PutToolCall, CreateQuestion, ResolveQuestion, AppendEvent), which
	// are Commit of one record. Not counted: a batch that wrote nothing
	// (empty, refused, or whose question existed). Batches/Transactions is
	// how many writes shared each commit.
	Batches int64
}

// WriteStats returns the store's write counters.
func (s *Store) WriteStats() WriteStats {
	if s.wr == nil {
		return WriteStats{}
	}
	return WriteStats{Transactions: s.wr.transactions.Load(), Batches: s.wr.batches.Load()}
}

func newWriter(s *Store) *writer {
	w := &writer{s: s, wake: make(chan struct{}, 1), exited: make(chan struct{}), deferWait: deferWait}
	go w.loop()
	return w
}

// submit queues o and waits until the writer is done with it (o.err and
// the rest are then set), or until ctx ends while o is still queued: o is
// then taken out of the queue, never written, and ctx's error returned.
func (w *writer) submit(ctx context.Context, o *op) error {
	o.ctx, o.done = ctx, make(chan struct{})
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return errClosed
	}
	w.queue = append(w.queue, o)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	select {
	case <-o.done:
		return nil
	case <-ctx.Done():
	}
	w.mu.Lock()
	if !o.taken {
		if i := slices.Index(w.queue, o); i >= 0 {
			w.queue = slices.Delete(w.queue, i, i+1)
		}
		w.mu.Unlock()
		return notWritten(ctx)
	}
	w.mu.Unlock()
	<-o.done // the writer has it: it may commit, and the caller is told
	return nil
}

func notWritten(ctx context.Context) error {
	return fmt.Errorf("sqlite: not written: %w", context.Cause(ctx))
}

// close stops taking batches, lets the writer commit those queued, and
// waits for it to end.
func (w *writer) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	<-w.exited
}

func (w *writer) loop() {
	defer close(w.exited)
	for {
		w.mu.Lock()
		for len(w.queue) == 0 {
			if w.closed {
				w.mu.Unlock()
				return
			}
			w.mu.Unlock()
			<-w.wake
			w.mu.Lock()
		}
		held := w.deferOnly()
		w.mu.Unlock()
		if held {
			w.hold()
			w.mu.Lock()
			empty := len(w.queue) == 0 // their callers gave up
			w.mu.Unlock()
			if empty {
				continue
			}
		}
		w.group()
	}
}

// deferOnly reports whether every queued batch may wait (w.mu held), and
// the store is open.
func (w *writer) deferOnly() bool {
	if w.closed {
		return false
	}
	for _, o := range w.queue {
		if !o.b.Deferrable {
			return false
		}
	}
	return true
}

// hold waits up to deferWait while only deferrable batches are queued.
func (w *writer) hold() {
	t := time.NewTimer(w.deferWait)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return
		case <-w.wake:
			w.mu.Lock()
			still := w.deferOnly()
			w.mu.Unlock()
			if !still {
				return
			}
		}
	}
}

// take removes from the queue the batches of the next transaction: what
// is there, up to the bounds.
func (w *writer) take() []*op {
	w.mu.Lock()
	defer w.mu.Unlock()
	var size int64
	n := 0
	for n < len(w.queue) && n < maxGroup {
		o := w.queue[n]
		if n > 0 && size+o.size > maxGroupBytes {
			break
		}
		size += o.size
		o.taken = true
		n++
	}
	g := slices.Clone(w.queue[:n])
	w.queue = slices.Delete(w.queue, 0, n)
	return g
}

// group commits one transaction: BEGIN IMMEDIATE first (it may wait for
// another process's write), then the batches queued by then, each in a
// savepoint when there are several, and COMMIT. Each caller is answered
// once COMMIT has returned.
func (w *writer) group() {
	var g []*op
	defer func() {
		for _, o := range g {
			close(o.done)
		}
	}()
	conn, err := w.s.w.Conn(bg)
	if err == nil {
		defer conn.Close()
		err = conn.Raw(func(dc any) error {
			c, err := w.s.writerConn(dc)
			if err != nil {
				return err
			}
			// BEGIN, COMMIT and ROLLBACK are the writer's prepared
			// statements: the driver's BeginTx and Commit prepare, run
			// and finalize each anew, a parse of SQL twice a
			// transaction in the writer's goroutine.
			_, err = wstmt{st: c.st[wBegin]}.ExecContext(bg)
			g = w.take()
			if err != nil {
				return err
			}
			w.groupOn(c, g)
			return nil
		})
	}
	if err != nil {
		if g == nil {
			g = w.take()
		}
		for _, o := range g {
			o.err = fmt.Errorf("sqlite: begin: %w", err)
		}
	}
}

// groupOn is group's transaction, begun, on the writer's connection c.
func (w *writer) groupOn(c *wconn, g []*op) {
	s := w.s
	t := &wtx{s: s, c: c, tx: wsql{c}}
	rollback := func() { t.stmt(wRollback).ExecContext(bg) }
	savepoints := len(g) > 1
	var written []*op
	// applied: every batch the transaction saw. When it fails, none of
	// their outcomes stands, not even a lost compare-and-set or a question
	// found: they may have lost to, or found, a write that is not there.
	var applied []*op
	// abort: the transaction itself failed (a savepoint could not be
	// taken, released or rolled back to): nothing of the group is written.
	var abort error
	for _, o := range g {
		if o.ctx.Err() != nil {
			o.err = notWritten(o.ctx) // not begun with: its caller may be gone
			continue
		}
		if savepoints {
			if _, err := t.stmt(wSavepoint).ExecContext(bg); err != nil {
				abort = err
				break
			}
		}
		applied = append(applied, o)
		err := s.apply(t, o)
		if err == nil {
			if savepoints {
				if _, err := t.stmt(wRelease).ExecContext(bg); err != nil {
					abort = err
					break
				}
			}
			o.written = true
			written = append(written, o)
			continue
		}
		o.notes, o.out.EventSeqs = nil, nil
		if errors.Is(err, errQuestionExists) {
			o.out.Created = false
		} else {
			o.err = err
		}
		if savepoints {
			if _, err := t.stmt(wRollbackTo).ExecContext(bg); err != nil {
				abort = err
				break
			}
			if _, err := t.stmt(wRelease).ExecContext(bg); err != nil {
				abort = err
				break
			}
		}
	}
	failAll := func(err error) {
		for _, o := range applied {
			o.err, o.written, o.notes, o.out.EventSeqs = err, false, nil, nil
		}
	}
	if abort != nil {
		rollback()
		err := fmt.Errorf("sqlite: write transaction: %w", abort)
		failAll(err)
		// The batches the loop did not reach (and the one whose savepoint
		// failed) were not written either.
		for _, o := range g {
			if o.err == nil {
				o.err, o.written, o.notes, o.out.EventSeqs = err, false, nil, nil
			}
		}
		return
	}
	if len(written) == 0 {
		rollback()
		return
	}
	var changes []int64
	for _, o := range written {
		for _, n := range o.notes {
			changes = append(changes, n.change)
		}
	}
	// The poller may see the changes as soon as they commit: it must know
	// them for this store's own before.
	s.hub.expect(changes)
	if _, err := t.stmt(wCommit).ExecContext(bg); err != nil {
		// A COMMIT that fails may leave the transaction open (SQLite:
		// SQLITE_BUSY): it must not hold the next group's writes.
		rollback()
		s.hub.forget(changes)
		failAll(fmt.Errorf("sqlite: commit: %w", err))
		return
	}
	w.transactions.Add(1)
	w.batches.Add(int64(len(written)))
	if s.ckpt != nil {
		s.ckpt.committed()
	}
	for _, o := range written {
		s.hub.published(o.notes)
	}
}
