package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"sync"
)

// The reads of the approval cycle (a thread, its tool calls, a question)
// run their statements on the driver's connection, below database/sql, as
// the writer's do (conn.go): database/sql still lends the connection
// (sql.Conn.Raw), but its per-query machinery — a statement bound to the
// connection, a *sql.Rows with a goroutine that watches the context, the
// argument and row conversions — was about a third of a read's
// allocations (bench/README.md, issue 26). Each connection of the pool
// prepares these statements once, on its first such read.

// rq names a read statement of the cycle: its index in hotReads.
type rq int

const (
	rLoadThread rq = iota
	rListToolCalls
	rGetToolCalls
	rGetQuestion
	nRead
)

var hotReads = [nRead]string{
	rLoadThread: qLoadThread, rListToolCalls: qListToolCalls, rGetToolCalls: qGetToolCalls, rGetQuestion: qGetQuestion,
}

// rconns are the prepared statements of the reader connections, by driver
// connection. A connection database/sql closes (it closes one only when
// the driver says it is unusable) leaves its entry: its statements cannot
// be finalized without it.
type rconns struct {
	mu     sync.Mutex
	by     map[driver.Conn]*[nRead]driver.Stmt
	closed bool // close has begun: nothing is prepared any more
}

// stmt returns the statement q prepared on dc, preparing it on first use.
// dc is held by the caller (sql.Conn.Raw): no other goroutine uses it.
func (rc *rconns) stmt(dc any, q rq) (driver.Stmt, error) {
	d, ok := dc.(driver.Conn)
	if !ok {
		return nil, fmt.Errorf("sqlite: driver connection %T", dc)
	}
	rc.mu.Lock()
	if rc.by == nil {
		rc.by = map[driver.Conn]*[nRead]driver.Stmt{}
	}
	sts := rc.by[d]
	if sts == nil && rc.closed {
		rc.mu.Unlock()
		return nil, errClosed
	}
	if sts == nil {
		sts = new([nRead]driver.Stmt)
		rc.by[d] = sts
	}
	rc.mu.Unlock()
	if sts[q] == nil { // sts is dc's: only its holder reads or writes it
		st, err := d.Prepare(hotReads[q])
		if err != nil {
			return nil, fmt.Errorf("sqlite: prepare: %w", err)
		}
		sts[q] = st
	}
	return sts[q], nil
}

// closeOn finalizes the statements prepared on dc.
func (rc *rconns) closeOn(dc any) {
	d, _ := dc.(driver.Conn)
	rc.mu.Lock()
	sts := rc.by[d]
	delete(rc.by, d)
	rc.mu.Unlock()
	if sts == nil {
		return
	}
	for _, st := range sts {
		if st != nil {
			st.Close()
		}
	}
}

// close finalizes the statements of every reader connection, on each
// connection: it takes the pool's connections one after the other and
// holds them (waiting for the reads in flight), until it has visited each
// one that has statements or holds them all.
func (rc *rconns) close(db *sql.DB) {
	rc.mu.Lock()
	rc.closed = true
	rc.mu.Unlock()
	left := func() bool {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		return len(rc.by) > 0
	}
	var conns []*sql.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for n := db.Stats().MaxOpenConnections; left() && len(conns) < n; {
		c, err := db.Conn(bg)
		if err != nil {
			return
		}
		conns = append(conns, c)
		c.Raw(func(dc any) error { rc.closeOn(dc); return nil })
	}
}

// query runs the read statement q on a reader connection and hands fn
// each row (its values are the driver's, valid until fn returns; strings
// are copies). The rows end early when ctx does, with its error, as
// database/sql's do.
func (s *Store) query(ctx context.Context, q rq, fn func(row wrow) error, args ...any) error {
	conn, err := s.r.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) (err error) {
		defer func() {
			// A connection database/sql is about to discard (the driver
			// says an interrupted one is unusable; a panic): its
			// statements are finalized first, on it.
			if v, ok := dc.(driver.Validator); err != nil && ok && !v.IsValid() {
				s.rc.closeOn(dc)
			}
		}()
		st, err := s.rc.stmt(dc, q)
		if err != nil {
			return err
		}
		nv, err := named(nil, args)
		if err != nil {
			return err
		}
		rows, err := st.(driver.StmtQueryContext).QueryContext(ctx, nv)
		if err != nil {
			return err
		}
		defer rows.Close()
		vals := make([]driver.Value, len(rows.Columns()))
		for {
			if err := ctx.Err(); err != nil {
				return err
			}
			switch err := rows.Next(vals); {
			case errors.Is(err, io.EOF):
				return nil
			case err != nil:
				return err
			}
			if err := fn(wrow{vals: vals}); err != nil {
				return err
			}
		}
	})
}

// queryRow runs the read statement q and returns its first row, or
// sql.ErrNoRows.
func (s *Store) queryRow(ctx context.Context, q rq, args ...any) wrow {
	var r wrow
	err := s.query(ctx, q, func(row wrow) error {
		r.vals = append([]driver.Value(nil), row.vals...)
		return errFirstRow
	}, args...)
	switch {
	case errors.Is(err, errFirstRow):
	case err != nil:
		r.err = err
	default:
		r.err = sql.ErrNoRows
	}
	return r
}

// errFirstRow ends queryRow's query at its first row.
var errFirstRow = errors.New("first row")
