package postgres

// Connecting: waiting for a server that is not ready yet, and saying in
// the user's words why one cannot be reached.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// waitReady pings the server until it answers. Only a server that is
// there but not ready is waited for (see [Options].ConnectTimeout): with
// exponential backoff and jitter, for at most timeout, and with one log
// line when the wait starts, not one per attempt.
func (s *Store) waitReady(ctx context.Context, timeout time.Duration) error {
	start := time.Now()
	var deadline time.Time
	if timeout > 0 {
		deadline = start.Add(timeout)
	}
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		limit := 10 * time.Second // one attempt: a server that never answers
		if !deadline.IsZero() {
			limit = max(min(limit, time.Until(deadline)), 100*time.Millisecond)
		}
		actx, cancel := context.WithTimeout(ctx, limit)
		err := s.pool.Ping(actx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("postgres: connect to %s: %w", s.address(), ctx.Err())
		}
		if !transient(err) || deadline.IsZero() || time.Now().Add(backoff).After(deadline) {
			return s.connectError(err, attempt, time.Since(start))
		}
		if attempt == 1 {
			s.logf(slog.LevelInfo, "checkpoint/postgres: the database is not ready; waiting for it", "address", s.address(), "up_to", timeout, "reason", reason(err))
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff/2 + rand.N(backoff/2+1)):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

// parseError is pgx's error for a connection string it cannot parse,
// without the string: pgx hides the passwords it recognizes in it, but
// cannot know where a password is in a string that does not parse.
func parseError(err error) error {
	var pe *pgconn.ParseConfigError
	if !errors.As(err, &pe) {
		return fmt.Errorf("postgres: %w", err)
	}
	msg := pe.Error()
	if rest, ok := strings.CutPrefix(msg, "cannot parse `"); ok {
		if i := strings.LastIndex(rest, "`: "); i >= 0 {
			msg = rest[i+len("`: "):]
		}
	}
	if pe.ConnString != "" && strings.Contains(msg, pe.ConnString) {
		msg = "invalid connection string"
	}
	return &connectError{msg: "postgres: cannot parse the connection string: " + msg, errs: []error{err}}
}

// checkHosts refuses a host name with an @ in it. No host name has one:
// it comes from a password (or user name) with an @ not written as %40,
// where the URL's user information ends at the first @ and the rest of
// the password is taken for the host, to be shown in every error.
func checkHosts(cfg *pgx.ConnConfig) error {
	hosts := []string{cfg.Host}
	for _, fb := range cfg.Fallbacks {
		hosts = append(hosts, fb.Host)
	}
	for _, h := range hosts {
		if !strings.HasPrefix(h, "/") && strings.Contains(h, "@") {
			return errors.New("postgres: the connection URL has an @ after its user information: write an @ in the user name or the password as %40")
		}
	}
	return nil
}

func (s *Store) logf(level slog.Level, msg string, args ...any) {
	s.log.Log(context.Background(), level, msg, args...)
}

// address names the server as the user wrote it, never with the password:
// host:port, or the UNIX socket; then the fallback hosts, each once.
func (s *Store) address() string {
	one := func(host string, port uint16) string {
		if strings.HasPrefix(host, "/") {
			_, sock := pgconn.NetworkAddress(host, port)
			return "socket " + sock
		}
		// Never more than a host: what is before an @ would be part of
		// a password (checkHosts refuses it before connecting).
		if at := strings.LastIndex(host, "@"); at >= 0 {
			host = host[at+1:]
		}
		return net.JoinHostPort(host, strconv.Itoa(int(port)))
	}
	addrs := []string{one(s.cfg.Host, s.cfg.Port)}
	for _, fb := range s.cfg.Fallbacks { // TLS then plain text: the same server
		if a := one(fb.Host, fb.Port); !slices.Contains(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	return strings.Join(addrs, ", ")
}

// scrub hides the password in a message, should it be there.
func (s *Store) scrub(msg string) string {
	if pw := s.cfg.Password; len(pw) >= 4 {
		msg = strings.ReplaceAll(msg, pw, "xxxxx")
	}
	return msg
}

// connectError is the error of a connection that failed for good: one
// line, in the user's terms, naming the server.
func (s *Store) connectError(err error, attempts int, waited time.Duration) error {
	var pgErr *pgconn.PgError
	var e *connectError
	switch {
	case transient(err):
		msg := fmt.Sprintf("postgres: cannot connect to %s: %s", s.address(), reason(err))
		if attempts > 1 {
			msg = fmt.Sprintf("postgres: the database at %s was not ready after %v (%d attempts): %s",
				s.address(), waited.Round(100*time.Millisecond), attempts, reason(err))
		}
		e = &connectError{msg: msg, errs: []error{ErrUnavailable, err}}
	case errors.As(err, &pgErr):
		msg := fmt.Sprintf("postgres: connect to %s as user %q, database %q: %s", s.address(), s.cfg.User, s.cfg.Database, reason(err))
		if hint := refusalHint(pgErr.Code); hint != "" {
			msg += "; " + hint
		}
		e = &connectError{msg: msg, errs: []error{err}}
	case unreachable(err):
		e = &connectError{msg: fmt.Sprintf("postgres: cannot connect to %s: %s", s.address(), reason(err)),
			errs: []error{ErrUnavailable, err}}
	default:
		e = &connectError{msg: fmt.Sprintf("postgres: connect to %s: %s", s.address(), reason(err)), errs: []error{err}}
	}
	e.msg = s.scrub(e.msg)
	return e
}

// refusalHint says what to check when the server refused the connection
// for good.
func refusalHint(code string) string {
	switch {
	case code == "28P01":
		return "check the user name and password in the connection URL"
	case code == "3D000":
		return "check the database name in the connection URL (or create the database)"
	case code == "42501":
		return "the role may not connect to that database (GRANT CONNECT)"
	case strings.HasPrefix(code, "28"):
		return "the server does not let this user in from here (pg_hba.conf, the role's name)"
	}
	return ""
}

// connectError says why Open could not connect; it wraps [ErrUnavailable]
// when the server could not be reached, and the failure itself.
type connectError struct {
	msg  string
	errs []error
}

func (e *connectError) Error() string   { return e.msg }
func (e *connectError) Unwrap() []error { return e.errs }

// reason is why a connection attempt failed, in a few words: the server's
// own refusal first, when it gave one.
func reason(err error) string {
	var dnsErr *net.DNSError
	var pgErr *pgconn.PgError
	if p := permanentPgError(err); p != nil {
		pgErr = p
	}
	switch {
	case pgErr != nil || errors.As(err, &pgErr):
		return fmt.Sprintf("%s (SQLSTATE %s)", pgErr.Message, pgErr.Code)
	case errors.As(err, &dnsErr):
		if dnsErr.IsNotFound {
			return fmt.Sprintf("the host name %s does not resolve", dnsErr.Name)
		}
		return fmt.Sprintf("the host name %s could not be resolved: %s", dnsErr.Name, dnsErr.Err)
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused: nothing listens there (is PostgreSQL running, on that port?)"
	case errors.Is(err, syscall.ENOENT):
		return "no such socket (is PostgreSQL running?)"
	case errors.Is(err, context.DeadlineExceeded):
		return "no answer in time"
	}
	// A dial or TLS failure: pgconn's text, on one line.
	return strings.Join(strings.Fields(err.Error()), " ")
}

// unreachable reports whether every address failed in a way waiting would
// not mend: refused, no such socket, no route, a name that does not
// resolve.
func unreachable(err error) bool {
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return true
	}
	for _, errno := range permanentErrnos {
		if errors.Is(err, errno) {
			return true
		}
	}
	return false
}

// permanentErrnos are the dial errors of an address where nothing will
// answer however long one waits: nothing listens, no such socket, no
// route, no such address here.
var permanentErrnos = []syscall.Errno{syscall.ECONNREFUSED, syscall.ENOENT, syscall.EADDRNOTAVAIL,
	syscall.ENETUNREACH, syscall.EHOSTUNREACH, syscall.EACCES, syscall.EAFNOSUPPORT}

// transient reports whether a failed connection attempt is worth
// repeating: the server is there but not ready (starting up or shutting
// down, out of connection slots, a connection broken or unanswered
// midway). Not: nothing listening at the address, a host name that does
// not resolve, a server that said no (authentication, no such database,
// a bad parameter), a TLS handshake that cannot succeed (no TLS there, a
// certificate not trusted). When several addresses were tried (a name with
// several addresses, fallback hosts, TLS then plain text), a server that
// said no is final, and otherwise one transient failure is enough.
func transient(err error) bool {
	if permanentPgError(err) != nil {
		return false
	}
	return transientAttempt(err)
}

// transientPgCode reports whether a server's refusal is one of a server
// not ready yet.
func transientPgCode(code string) bool {
	return code == "57P01" || // admin_shutdown: the server is shutting down
		code == "57P02" || // crash_shutdown
		code == "57P03" || // cannot_connect_now: starting up or shutting down
		strings.HasPrefix(code, "53") || // insufficient resources: too many connections, out of memory
		(strings.HasPrefix(code, "08") && code != "08P01") // connection exceptions, but a protocol violation
}

// permanentPgError is the first refusal of the server in err that waiting
// would not mend: a wrong password (28P01), a role not let in (28000), no
// such database (3D000), no CONNECT privilege (42501), a bad parameter.
func permanentPgError(err error) *pgconn.PgError {
	switch e := err.(type) {
	case nil:
		return nil
	case *pgconn.PgError:
		if transientPgCode(e.Code) {
			return nil
		}
		return e
	case interface{ Unwrap() []error }:
		for _, x := range e.Unwrap() {
			if p := permanentPgError(x); p != nil {
				return p
			}
		}
		return nil
	}
	return permanentPgError(errors.Unwrap(err))
}

// tlsFailure reports whether err is a TLS handshake that cannot succeed
// by waiting: the server does not speak TLS, or its certificate is not
// trusted.
func tlsFailure(err error) bool {
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	var header tls.RecordHeaderError
	var alert tls.AlertError
	return errors.As(err, &unknownCA) || errors.As(err, &hostname) || errors.As(err, &invalid) ||
		errors.As(err, &verify) || errors.As(err, &header) || errors.As(err, &alert)
}

// transientAttempt is [transient] without the search for a refusal.
func transientAttempt(err error) bool {
	if err != nil && (err.Error() == "server refused TLS connection" || tlsFailure(err)) {
		return false
	}
	switch e := err.(type) {
	case nil:
		return false
	case interface{ Unwrap() []error }:
		for _, x := range e.Unwrap() {
			if transientAttempt(x) {
				return true
			}
		}
		return false
	case *pgconn.PgError:
		return transientPgCode(e.Code)
	case *net.DNSError:
		return false
	case syscall.Errno:
		return !slices.Contains(permanentErrnos, e)
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	if u := errors.Unwrap(err); u != nil {
		return transientAttempt(u)
	}
	return true // io.EOF, a reset, a timeout: the connection broke midway
}
