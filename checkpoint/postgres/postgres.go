package postgres

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/internal/migrate"
	"github.com/tollgate-ai/tollgate/clock"
)

var _ checkpoint.Store = (*Store)(nil)

// Errors of Open, for [errors.Is].
var (
	// ErrUnavailable: the server could not be reached: nothing listens
	// at the address, its host name does not resolve, or it was not
	// ready before [Options].ConnectTimeout. The error also wraps the
	// last failure. It is [checkpoint.ErrUnavailable], which the store's
	// other methods return when a connection is lost.
	ErrUnavailable = fmt.Errorf("postgres: database unavailable: %w", checkpoint.ErrUnavailable)
	// ErrNoStore: [Options].MustExist was set and the database has no
	// tollgate schema. It wraps [fs.ErrNotExist].
	ErrNoStore error = noStore{}
	// ErrNewerSchema: the schema was migrated by a newer tollgate than
	// this binary. Upgrade tollgate to open it.
	ErrNewerSchema = errors.New("postgres: schema is newer than this tollgate")
	// ErrNotTollgate: the schema holds tables that are not tollgate's.
	// Open changes nothing in it.
	ErrNotTollgate = errors.New("postgres: not a tollgate schema")
	// ErrOlderSchema: [Options].MustExist or [Options].ReadOnly was set
	// and the schema was made by an older tollgate: it needs a migration,
	// which only an Open without them does. Open changes nothing in it.
	ErrOlderSchema = errors.New("postgres: schema is older than this tollgate")
	// ErrReadOnly: [Options].MustExist was set and the role may not
	// write tollgate's tables (no privilege, or a read-only server or
	// session).
	ErrReadOnly = errors.New("postgres: store is read-only")
)

// noStore is [ErrNoStore]: [errors.Is] fs.ErrNotExist, without saying
// "file does not exist".
type noStore struct{}

func (noStore) Error() string        { return "postgres: no tollgate store" }
func (noStore) Is(target error) bool { return target == fs.ErrNotExist }

// lockClass is the first key of every advisory lock tollgate takes
// (0x546F6C6C, "Toll"); the second is a hash of the schema and purpose.
const lockClass = 1416588396

// marker is the comment on schema_version that tells a tollgate schema from
// another application's table of the same name.
const marker = "tollgate checkpoint schema"

// Options configure [Open]. A nil *Options means all defaults.
type Options struct {
	// Schema holds tollgate's tables; created if missing. Zero means
	// "tollgate". ASCII letters, digits and underscores, not starting with
	// a digit, at most 50 bytes. Case matters: the name is always quoted,
	// so "Tollgate" and "tollgate" are two schemas.
	Schema string
	// MaxConns caps the connection pool; zero means pgxpool's default
	// (the larger of 4 and the number of CPUs). Subscribing uses one more
	// connection, outside the pool.
	MaxConns int32
	// ConnectTimeout is how long Open keeps retrying, quietly and with
	// backoff, while the server is there but not ready: starting up or
	// shutting down, out of connection slots, a connection broken or
	// unanswered midway. Zero means 30s, negative means a single attempt.
	// What waiting would not mend fails at once: nothing listening at the
	// address (connection refused, no such socket), a host name that does
	// not resolve, a wrong password, a missing database. The context
	// passed to Open bounds it too.
	ConnectTimeout time.Duration
	// MustExist opens only a schema tollgate has made, for a program that
	// answers what another one wrote: a missing schema, or an empty one,
	// is [ErrNoStore] and Open creates nothing; a schema of an older
	// version is [ErrOlderSchema] and is not migrated (that is for the
	// program that keeps the store); a role that may not write the
	// tables is [ErrReadOnly].
	MustExist bool
	// ReadOnly opens a schema tollgate has made only to read it, for a
	// program that shows what another one wrote; it implies MustExist,
	// but a role that may only read the tables is enough. Open writes
	// nothing and takes no lock; every session is read-only
	// (default_transaction_read_only), so a write of the store fails
	// (SQLSTATE 25006).
	ReadOnly bool
	// PollInterval is how often the listener connection, while subscribers
	// exist, also polls for changes (a safety net under LISTEN/NOTIFY and a
	// liveness check of the connection: a poll that gets no answer within
	// the larger of PollInterval and 5s counts as a lost connection, which
	// is replaced), and how often the pool polls while the listener is
	// down; zero means 5s, negative turns polling off (and with it the
	// liveness check).
	PollInterval time.Duration
	// Clock stamps the times the store fills in; nil means [clock.Real].
	Clock clock.Clock
	// Logger receives background errors (a lost listener connection);
	// nil means [slog.Default].
	Logger *slog.Logger
	// Tracer, if set, is told of every statement the store's connections
	// send (pgx's tracelog, an OpenTelemetry tracer, a counter); one that
	// also implements pgx.BatchTracer or pgx.PrepareTracer is told of
	// batches (one round trip for all their statements) and prepares.
	// Zero: the DSN's (none).
	Tracer pgx.QueryTracer
}

// Store is a [checkpoint.Store] in a PostgreSQL schema. Every write is one
// batch of statements sent together and run in one transaction (see
// [Store.Commit]), so a dropped connection never leaves part of a write
// behind. Any number of processes may share the schema.
type Store struct {
	pool       *pgxpool.Pool
	cfg        *pgx.ConnConfig // for the listener connection
	schema     string
	writersKey int32 // of the numbered writers' lock (events.go)
	clk        clock.Clock
	log        *slog.Logger
	hub        *hub
	// txHook: see SetTxHook.
	txHook atomic.Pointer[TxHook]

	closeOnce sync.Once
}

//go:embed migrations/*.sql
var migrationFS embed.FS

// migration is one of the embedded migrations (NNNN_description.sql).
type migration = migrate.Migration

// migrations returns the embedded migrations in order.
func migrations() ([]migration, error) {
	return migrate.Load(migrationFS, "migrations", "postgres")
}

var schemaName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,49}$`)

// Open connects to the database at dsn (a postgres:// URL or a key=value
// string, as pgx accepts), waiting for it with backoff up to
// [Options].ConnectTimeout, and creates or upgrades tollgate's schema under
// an advisory lock (replicas starting together take turns). It refuses a
// schema migrated by a newer tollgate ([ErrNewerSchema]) or holding other
// tables ([ErrNotTollgate]).
func Open(ctx context.Context, dsn string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Schema == "" {
		o.Schema = "tollgate"
	}
	if !schemaName.MatchString(o.Schema) {
		return nil, fmt.Errorf("postgres: schema name %q: want ASCII letters, digits and underscores, not starting with a digit, at most 50 bytes", o.Schema)
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = 30 * time.Second
	}
	if o.PollInterval == 0 {
		o.PollInterval = 5 * time.Second
	}
	if o.Clock == nil {
		o.Clock = clock.Real
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	migs, err := migrations()
	if err != nil {
		return nil, err
	}
	if o.ReadOnly {
		o.MustExist = true
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, parseError(err)
	}
	if err := checkHosts(cfg.ConnConfig); err != nil {
		return nil, err
	}
	if o.ReadOnly {
		cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	}
	// Quoted, as in every statement: unquoted, PostgreSQL would fold a
	// name with capital letters to lowercase, another schema.
	cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{o.Schema}.Sanitize()
	if o.Tracer != nil {
		cfg.ConnConfig.Tracer = o.Tracer
	}
	// The compare-and-sets are written for read committed: under a
	// stricter default (set in the URL or the role) a lost one would be a
	// serialization error, not a conflict.
	cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = "read committed"
	if cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = "tollgate"
	}
	// A writer that stops mid-transaction (a process frozen, a network
	// cut) would hold the numbered writers' lock, so every reader's
	// horizon, and its rows' locks until the server noticed (TCP: hours).
	// No transaction of the store waits for its client for long.
	if cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] == "" {
		cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = "5000"
	}
	if o.MaxConns > 0 {
		cfg.MaxConns = o.MaxConns
	}
	cfg.ShouldPing = shouldPing
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	s := &Store{pool: pool, cfg: cfg.ConnConfig.Copy(), schema: o.Schema, writersKey: writersKey(o.Schema), clk: o.Clock, log: o.Logger}
	if err := s.waitReady(ctx, o.ConnectTimeout); err != nil {
		pool.Close()
		return nil, err
	}
	if o.ReadOnly {
		err = s.check(ctx, len(migs))
	} else {
		err = s.migrate(ctx, migs, o.MustExist)
	}
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.hub = newHub(s, o.PollInterval)
	return s, nil
}

// pingIdle: a pooled connection idle this long is pinged before it is
// handed out. pgx's default, a second, pinged before nearly every
// statement of a replica nobody uses (a job poll every two seconds, the
// connection idle since the last): a ping is a transaction of the
// server's, and they were a third of such a replica's. The pool hands
// out the connection used last first, so one in steady use is never
// pinged; one idle longer is, as before. A connection that died since
// its last use fails its statement, which the pool then drops (writes of
// a run are retried, see checkpoint.ErrUnavailable).
const pingIdle = 10 * time.Second

func shouldPing(_ context.Context, p pgxpool.ShouldPingParams) bool { return p.IdleDuration > pingIdle }

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

// migrate creates the schema if missing and applies the migrations it
// lacks, in one transaction under an advisory lock.
func (s *Store) migrate(ctx context.Context, migs []migration, mustExist bool) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, hashtext($2))", lockClass, s.schema+".migrate"); err != nil {
		return fmt.Errorf("postgres: migrate: lock: %w", err)
	}
	ident := pgx.Identifier{s.schema}.Sanitize()
	var exists bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", s.schema).Scan(&exists); err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	if !exists && mustExist {
		return fmt.Errorf("%w: database %q at %s has no schema %s (tollgate serve creates it when it first starts on the database)",
			ErrNoStore, s.cfg.Database, s.address(), s.schema)
	}
	if !exists {
		// Only when missing: a role without CREATE on the database can use
		// a schema made for it.
		if _, err := tx.Exec(ctx, "CREATE SCHEMA "+ident); err != nil {
			return fmt.Errorf("postgres: create schema %s: %w", ident, err)
		}
	}
	if _, err := tx.Exec(ctx, "SET LOCAL search_path TO "+ident); err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}

	var tables []string
	rows, err := tx.Query(ctx, `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', 'f') ORDER BY c.relname`, s.schema)
	if err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	tables, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	version := 0
	if slices.Contains(tables, "schema_version") {
		var comment *string
		if err := tx.QueryRow(ctx, "SELECT obj_description(to_regclass('schema_version'), 'pg_class')").Scan(&comment); err != nil {
			return fmt.Errorf("postgres: migrate: %w", err)
		}
		if comment == nil || *comment != marker {
			return fmt.Errorf("%w: schema %s has a schema_version table that is not tollgate's", ErrNotTollgate, s.schema)
		}
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM schema_version").Scan(&version); err != nil {
			return fmt.Errorf("postgres: migrate: %w", err)
		}
	} else if len(tables) > 0 {
		shown := tables
		if len(shown) > 5 {
			shown = append(shown[:5:5], "...")
		}
		return fmt.Errorf("%w: schema %s holds other tables (%s); choose another schema", ErrNotTollgate, s.schema, strings.Join(shown, ", "))
	}
	if version == 0 && mustExist {
		return fmt.Errorf("%w: schema %s of database %q at %s is empty (tollgate serve creates its tables when it first starts on the database)",
			ErrNoStore, s.schema, s.cfg.Database, s.address())
	}
	if version > len(migs) {
		return fmt.Errorf("%w: schema %s is at version %d, this binary knows up to %d; upgrade tollgate", ErrNewerSchema, s.schema, version, len(migs))
	}
	if mustExist {
		if version < len(migs) {
			return s.olderSchema(version, len(migs))
		}
		if err := s.checkWritable(ctx, tx); err != nil {
			return err
		}
	}
	if version == len(migs) {
		if err := raiseSeqBase(ctx, tx, len(migs)); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	if version == 0 {
		if _, err := tx.Exec(ctx, `CREATE TABLE schema_version (
	version    integer PRIMARY KEY,
	name       text NOT NULL,
	applied_at timestamptz NOT NULL DEFAULT now()
)`); err != nil {
			return fmt.Errorf("postgres: migrate: %w", err)
		}
		if _, err := tx.Exec(ctx, "COMMENT ON TABLE schema_version IS '"+marker+"'"); err != nil {
			return fmt.Errorf("postgres: migrate: %w", err)
		}
	}
	for _, m := range migs[version:] {
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return fmt.Errorf("postgres: migration %s: %w", m.Name, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO schema_version (version, name) VALUES ($1, $2)", m.Version, m.Name); err != nil {
			return fmt.Errorf("postgres: migration %s: %w", m.Name, err)
		}
	}
	if err := raiseSeqBase(ctx, tx, len(migs)); err != nil {
		return err
	}
	if testHookBeforeMigrationCommit != nil {
		testHookBeforeMigrationCommit(ctx, tx)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("postgres: migrate: commit: %w", err)
	}
	return nil
}

// raiseSeqBase keeps new numbers (events' seq, questions' seq and
// change_seq) above the stored ones: they are numbered from transaction
// ids (events.go), which start again from small numbers in another cluster
// (a dump restored there). Then base rises so that the next id numbers
// above the highest; otherwise nothing is written. It runs under the
// migration lock, before any writer of the restored store.
func raiseSeqBase(ctx context.Context, tx pgx.Tx, version int) error {
	if version < 5 { // seq_base comes with schema 5 (tests make older ones)
		return nil
	}
	const highest = `greatest((SELECT max(seq) FROM events), (SELECT max(seq) FROM questions), (SELECT max(change_seq) FROM questions))`
	// A read first: most Opens find nothing to do, and a program that
	// only answers (MustExist) need not be allowed to update seq_base.
	var behind bool
	err := tx.QueryRow(ctx, `SELECT coalesce(`+highest+` >= (pg_snapshot_xmax(pg_current_snapshot())::text::bigint + base) * 65536, false)
FROM seq_base`).Scan(&behind)
	if err == nil && behind {
		_, err = tx.Exec(ctx, `UPDATE seq_base SET base = `+highest+` / 65536 + 1 - pg_snapshot_xmax(pg_current_snapshot())::text::bigint`)
	}
	if err != nil {
		return fmt.Errorf("postgres: open: numbering: %w", err)
	}
	return nil
}

func (s *Store) olderSchema(version, known int) error {
	return fmt.Errorf("%w: schema %s of database %q at %s is at version %d, this tollgate needs %d; a program that keeps the store (tollgate serve) upgrades it when it opens it",
		ErrOlderSchema, s.schema, s.cfg.Database, s.address(), version, known)
}

// writtenTables are the tables a store writes, and how.
var writtenTables = []struct{ table, privilege string }{
	{"threads", "INSERT"}, {"threads", "UPDATE"}, {"messages", "INSERT"}, {"messages", "DELETE"},
	{"tool_calls", "INSERT"}, {"tool_calls", "UPDATE"},
	{"questions", "INSERT"}, {"questions", "UPDATE"}, {"events", "INSERT"},
}

// checkWritable refuses a session that cannot write the store: a
// read-only server (a standby) or session, or a role without the
// privileges.
func (s *Store) checkWritable(ctx context.Context, tx pgx.Tx) error {
	var ro string
	if err := tx.QueryRow(ctx, "SELECT current_setting('transaction_read_only')").Scan(&ro); err != nil {
		return fmt.Errorf("postgres: open: %w", err)
	}
	if ro == "on" {
		return fmt.Errorf("%w: the session of user %q on database %q at %s is read-only (a standby, or default_transaction_read_only)",
			ErrReadOnly, s.cfg.User, s.cfg.Database, s.address())
	}
	for _, t := range writtenTables {
		var ok bool
		// The privilege check of the current role: also when it has the
		// privileges through membership of another.
		if err := tx.QueryRow(ctx, "SELECT has_table_privilege(to_regclass($1), $2)", pgx.Identifier{s.schema, t.table}.Sanitize(), t.privilege).Scan(&ok); err != nil {
			return fmt.Errorf("postgres: open: %w", err)
		}
		if !ok {
			return fmt.Errorf("%w: user %q may not write table %s of schema %s (%s) in database %q at %s",
				ErrReadOnly, s.cfg.User, t.table, s.schema, t.privilege, s.cfg.Database, s.address())
		}
	}
	return nil
}

// check is what migrate does for a store opened ReadOnly, without a
// write or a lock: the schema is tollgate's, and at this binary's
// version. One read-only snapshot: a migration elsewhere is seen whole
// or not at all.
func (s *Store) check(ctx context.Context, known int) error {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("postgres: open: %w", err)
	}
	defer tx.Rollback(context.Background())
	var tables []string
	rows, err := tx.Query(ctx, `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', 'f') ORDER BY c.relname`, s.schema)
	if err == nil {
		tables, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		return fmt.Errorf("postgres: open: %w", err)
	}
	var exists bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", s.schema).Scan(&exists); err != nil {
		return fmt.Errorf("postgres: open: %w", err)
	}
	if !exists {
		return fmt.Errorf("%w: database %q at %s has no schema %s (tollgate serve creates it when it first starts on the database)",
			ErrNoStore, s.cfg.Database, s.address(), s.schema)
	}
	if !slices.Contains(tables, "schema_version") {
		if len(tables) > 0 {
			shown := tables
			if len(shown) > 5 {
				shown = append(shown[:5:5], "...")
			}
			return fmt.Errorf("%w: schema %s holds other tables (%s); choose another schema", ErrNotTollgate, s.schema, strings.Join(shown, ", "))
		}
		return fmt.Errorf("%w: schema %s of database %q at %s is empty (tollgate serve creates its tables when it first starts on the database)",
			ErrNoStore, s.schema, s.cfg.Database, s.address())
	}
	versionTable := pgx.Identifier{s.schema, "schema_version"}.Sanitize()
	var comment *string
	if err := tx.QueryRow(ctx, "SELECT obj_description(to_regclass($1), 'pg_class')", versionTable).Scan(&comment); err != nil {
		return fmt.Errorf("postgres: open: %w", err)
	}
	if comment == nil || *comment != marker {
		return fmt.Errorf("%w: schema %s has a schema_version table that is not tollgate's", ErrNotTollgate, s.schema)
	}
	var version int
	if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+versionTable).Scan(&version); err != nil {
		return fmt.Errorf("postgres: open: %w", err)
	}
	switch {
	case version > known:
		return fmt.Errorf("%w: schema %s is at version %d, this binary knows up to %d; upgrade tollgate", ErrNewerSchema, s.schema, version, known)
	case version < known:
		return s.olderSchema(version, known)
	}
	return nil
}

// testHookBeforeMigrationCommit lets a test break the connection between
// the migration's statements and its commit.
var testHookBeforeMigrationCommit func(ctx context.Context, tx pgx.Tx)

// Schema returns the schema the store's tables live in.
func (s *Store) Schema() string { return s.schema }

// Close ends every subscription, stops the listener and closes the pool.
// Safe to call more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.hub.close()
		s.pool.Close()
	})
	return nil
}
