package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"slices"
)

// The writer's statements run on the driver's connection itself, below
// database/sql: the writer is the connection's only user, one statement
// at a time, so database/sql's per-statement machinery (a *sql.Stmt bound
// to each transaction, a *sql.Rows with its close-on-cancel watch, the
// connection's locks and dependency maps) bought nothing and cost about a
// fifth of a cycle's allocations (bench/README.md, issue 26). The driver's
// prepared statements live as long as its connection.

// wconn is the writer's driver connection and its prepared statements.
type wconn struct {
	dc    driver.Conn
	st    [nWrite]driver.Stmt
	other map[string]driver.Stmt // the outbox's and the rules': prepared on first use
}

// writerConn returns the prepared statements of dc, the store's one write
// connection, preparing them again if database/sql ever opened another.
func (s *Store) writerConn(dc any) (*wconn, error) {
	if s.wc != nil && s.wc.dc == dc {
		return s.wc, nil
	}
	d, ok := dc.(driver.Conn)
	if !ok {
		return nil, fmt.Errorf("sqlite: driver connection %T", dc)
	}
	c := &wconn{dc: d, other: map[string]driver.Stmt{}}
	for i, q := range writeQueries {
		st, err := d.Prepare(q)
		if err != nil {
			c.close()
			return nil, fmt.Errorf("sqlite: prepare: %w", err)
		}
		c.st[i] = st
	}
	// The statements of a connection database/sql closed are not closed
	// here: the driver's connection they need is gone (a new connection
	// means the old one failed; it does not happen otherwise).
	s.wc = c
	return c, nil
}

func (c *wconn) close() {
	for _, st := range c.st {
		if st != nil {
			st.Close()
		}
	}
	for _, st := range c.other {
		st.Close()
	}
}

// prepared returns the statement of query, prepared on first use.
func (c *wconn) prepared(query string) (driver.Stmt, error) {
	if st := c.other[query]; st != nil {
		return st, nil
	}
	st, err := c.dc.Prepare(query)
	if err != nil {
		return nil, err
	}
	c.other[query] = st
	return st, nil
}

// wstmt is a prepared statement of the writer's, with database/sql's
// method names so that the writer's code reads as before.
type wstmt struct {
	st  driver.Stmt
	err error                // of preparing it
	nv  *[]driver.NamedValue // the writer's, reused: one statement at a time
	// vals, when set, is the writer's buffer of a row's values, reused
	// by the next statement: its row is scanned before that one runs.
	vals *[]driver.Value
}

// named converts args as database/sql does (driver.DefaultParameterConverter:
// an int becomes an int64, a []byte-kinded type a []byte, ...), into buf
// when there is one (the driver keeps none of them past the statement).
func named(buf *[]driver.NamedValue, args []any) ([]driver.NamedValue, error) {
	var nv []driver.NamedValue
	if buf != nil {
		nv = slices.Grow((*buf)[:0], len(args))[:len(args)]
		*buf = nv
	} else {
		nv = make([]driver.NamedValue, len(args))
	}
	for i, a := range args {
		v, err := driver.DefaultParameterConverter.ConvertValue(a)
		if err != nil {
			return nil, fmt.Errorf("sqlite: argument %d: %w", i+1, err)
		}
		nv[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	return nv, nil
}

// ExecContext runs the statement.
func (w wstmt) ExecContext(ctx context.Context, args ...any) (sql.Result, error) {
	if w.err != nil {
		return nil, w.err
	}
	nv, err := named(w.nv, args)
	if err != nil {
		return nil, err
	}
	return w.st.(driver.StmtExecContext).ExecContext(ctx, nv)
}

// QueryRowContext runs the statement and keeps its first row.
func (w wstmt) QueryRowContext(ctx context.Context, args ...any) wrow {
	if w.err != nil {
		return wrow{err: w.err}
	}
	nv, err := named(w.nv, args)
	if err != nil {
		return wrow{err: err}
	}
	rows, err := w.st.(driver.StmtQueryContext).QueryContext(ctx, nv)
	if err != nil {
		return wrow{err: err}
	}
	var r wrow
	if n := len(rows.Columns()); w.vals != nil {
		r.vals = slices.Grow((*w.vals)[:0], n)[:n]
		clear(r.vals)
		*w.vals = r.vals
	} else {
		r.vals = make([]driver.Value, n)
	}
	switch err := rows.Next(r.vals); {
	case errors.Is(err, io.EOF):
		r.err = sql.ErrNoRows
	case err != nil:
		r.err = err
	}
	if err := rows.Close(); err != nil && r.err == nil {
		r.err = err
	}
	return r
}

// wrow is a row the writer read (or a read below database/sql,
// readconn.go), or the error that came instead.
type wrow struct {
	vals []driver.Value
	err  error
}

// Scan assigns the row's columns to dest, for the types the store reads
// (its tables are STRICT: a column holds its declared type or NULL):
// *int64, *string, *bool (an integer), *any, and a [sql.Scanner] such as
// sql.NullInt64. As database/sql, NULL in a *int64 or *string is an
// error.
func (r wrow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	if len(dest) != len(r.vals) {
		return fmt.Errorf("sqlite: scan: %d destinations for %d columns", len(dest), len(r.vals))
	}
	for i, d := range dest {
		v := r.vals[i]
		ok := true
		switch d := d.(type) {
		case *int64:
			*d, ok = v.(int64)
		case *string:
			switch v := v.(type) {
			case string:
				*d = v
			case []byte:
				*d = string(v)
			default:
				ok = false
			}
		case *bool:
			var n int64
			n, ok = v.(int64)
			*d = n != 0
		case *any:
			if b, isBytes := v.([]byte); isBytes {
				v = slices.Clone(b) // the driver's buffer, as database/sql copies it
			}
			*d = v
		case sql.Scanner:
			if err := d.Scan(v); err != nil {
				return fmt.Errorf("sqlite: scan column %d: %w", i+1, err)
			}
		default:
			ok = false
		}
		if !ok {
			return fmt.Errorf("sqlite: scan column %d: %T into %T", i+1, v, d)
		}
	}
	return nil
}

// wsql runs statements given by their text on the writer's connection
// (prepared once each): the outbox's and the learned rules'.
type wsql struct{ c *wconn }

func (w wsql) stmt(query string) wstmt {
	st, err := w.c.prepared(query)
	return wstmt{st: st, err: err}
}

func (w wsql) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return w.stmt(query).ExecContext(ctx, args...)
}

func (w wsql) QueryRowContext(ctx context.Context, query string, args ...any) wrow {
	return w.stmt(query).QueryRowContext(ctx, args...)
}
