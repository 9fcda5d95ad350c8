package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// unavailable marks err as [checkpoint.ErrUnavailable] when it says the
// server could not be reached or the connection was lost: the caller may
// try again once the server is back (and, for a write, must first read
// whether it was made). Any other error is returned as it is.
func unavailable(err error) error {
	if err == nil || errors.Is(err, checkpoint.ErrUnavailable) || !connectionLost(err) {
		return err
	}
	return &unavailableError{err}
}

type unavailableError struct{ err error }

func (e *unavailableError) Error() string   { return e.err.Error() }
func (e *unavailableError) Unwrap() []error { return []error{e.err, checkpoint.ErrUnavailable} }

// connectionLost reports whether err is the connection's, not the
// statement's: the server went away (a restart, a failover, a backend
// terminated), refused to connect, or the network dropped. A context
// that ended is the caller's doing, not the server's.
func connectionLost(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case len(pgErr.Code) == 5 && pgErr.Code[:2] == "08": // connection_exception
			return true
		case pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03": // admin or crash shutdown, cannot connect now
			return true
		case pgErr.Code == "53300": // too_many_connections
			return true
		}
		return false
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connectErr) || errors.As(err, &netErr) ||
		errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}
