package postgres

import (
	"context"
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
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/clock"
)

var _ checkpoint.Store = (*Store)(nil)

// Errors of Open, for [errors.Is].
var (
	// ErrUnavailable: the server could not be reached: nothing listens
	// at the address, its host name does not resolve, or it was not
	// ready before [Options].ConnectTimeout. The error also wraps the
	// last failure.
	ErrUnavailable = errors.New("postgres: database unavailable")
	// ErrNoStore: [Options].MustExist was set and the database has no
	// tollgate schema. It wraps [fs.ErrNotExist].
	ErrNoStore error = noStore{}
	// ErrNewerSchema: the schema was migrated by a newer tollgate than
	// this binary. Upgrade tollgate to open it.
	ErrNewerSchema = errors.New("postgres: schema is newer than this tollgate")
	// ErrNotTollgate: the schema holds tables that are not tollgate's.
	// Open changes nothing in it.
	ErrNotTollgate = errors.New("postgres: not a tollgate schema")
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
	// reads or answers what another one wrote: a missing schema, or an
	// empty one, is [ErrNoStore] and Open creates nothing. A schema of an
	// older version is still brought up to date.
	MustExist bool
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
}

// Store is a [checkpoint.Store] in a PostgreSQL schema. Every write is one
// statement (one implicit transaction) or one explicit transaction, so a
// dropped connection never leaves part of a write behind. Any number of
// processes may share the schema.
type Store struct {
	pool   *pgxpool.Pool
	cfg    *pgx.ConnConfig // for the listener connection
	schema string
	clk    clock.Clock
	log    *slog.Logger
	hub    *hub

	closeOnce sync.Once
}

//go:embed migrations/*.sql
var migrationFS embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("postgres: migration %q: name must start with a version number", e.Name())
		}
		b, err := migrationFS.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: e.Name(), sql: string(b)})
	}
	slices.SortFunc(out, func(a, b migration) int { return a.version - b.version })
	for i, m := range out {
		if m.version != i+1 {
			return nil, fmt.Errorf("postgres: migration %q: want version %d", m.name, i+1)
		}
	}
	return out, nil
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
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	// Quoted, as in every statement: unquoted, PostgreSQL would fold a
	// name with capital letters to lowercase, another schema.
	cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{o.Schema}.Sanitize()
	if cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = "tollgate"
	}
	if o.MaxConns > 0 {
		cfg.MaxConns = o.MaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	s := &Store{pool: pool, cfg: cfg.ConnConfig.Copy(), schema: o.Schema, clk: o.Clock, log: o.Logger}
	if err := s.waitReady(ctx, o.ConnectTimeout); err != nil {
		pool.Close()
		return nil, err
	}
	if err := s.migrate(ctx, migs, o.MustExist); err != nil {
		pool.Close()
		return nil, err
	}
	s.hub = newHub(s, o.PollInterval)
	return s, nil
}

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

func (s *Store) logf(level slog.Level, msg string, args ...any) {
	s.log.Log(context.Background(), level, msg, args...)
}

// address names the server as the user wrote it, never with the password:
// host:port, or the UNIX socket; then the fallback hosts.
func (s *Store) address() string {
	one := func(host string, port uint16) string {
		if strings.HasPrefix(host, "/") {
			_, sock := pgconn.NetworkAddress(host, port)
			return "socket " + sock
		}
		return net.JoinHostPort(host, strconv.Itoa(int(port)))
	}
	addr := one(s.cfg.Host, s.cfg.Port)
	for _, fb := range s.cfg.Fallbacks {
		if fb.Host != s.cfg.Host || fb.Port != s.cfg.Port { // TLS then plain text: the same server
			addr += ", " + one(fb.Host, fb.Port)
		}
	}
	return addr
}

// connectError is the error of a connection that failed for good: one
// line, in the user's terms, naming the server.
func (s *Store) connectError(err error, attempts int, waited time.Duration) error {
	var pgErr *pgconn.PgError
	switch {
	case transient(err):
		msg := fmt.Sprintf("postgres: cannot connect to %s: %s", s.address(), reason(err))
		if attempts > 1 {
			msg = fmt.Sprintf("postgres: the database at %s was not ready after %v (%d attempts): %s",
				s.address(), waited.Round(100*time.Millisecond), attempts, reason(err))
		}
		return &connectError{msg: msg, errs: []error{ErrUnavailable, err}}
	case errors.As(err, &pgErr):
		return &connectError{msg: fmt.Sprintf("postgres: connect to %s as user %q, database %q: %s",
			s.address(), s.cfg.User, s.cfg.Database, reason(err)), errs: []error{err}}
	case unreachable(err):
		return &connectError{msg: fmt.Sprintf("postgres: cannot connect to %s: %s", s.address(), reason(err)),
			errs: []error{ErrUnavailable, err}}
	}
	return &connectError{msg: fmt.Sprintf("postgres: connect to %s: %s", s.address(), reason(err)), errs: []error{err}}
}

// connectError says why Open could not connect; it wraps [ErrUnavailable]
// when the server could not be reached, and the failure itself.
type connectError struct {
	msg  string
	errs []error
}

func (e *connectError) Error() string   { return e.msg }
func (e *connectError) Unwrap() []error { return e.errs }

// reason is why a connection attempt failed, in a few words.
func reason(err error) string {
	var dnsErr *net.DNSError
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr):
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
// a bad parameter). When several addresses were tried (a name with several
// addresses, fallback hosts, TLS then plain text), one transient failure
// is enough.
func transient(err error) bool {
	switch e := err.(type) {
	case nil:
		return false
	case interface{ Unwrap() []error }:
		for _, x := range e.Unwrap() {
			if transient(x) {
				return true
			}
		}
		return false
	case *pgconn.PgError:
		return e.Code == "57P03" || // cannot_connect_now: starting up or shutting down
			e.Code == "53300" || // too_many_connections
			strings.HasPrefix(e.Code, "08") // connection exceptions
	case *net.DNSError:
		return false
	case syscall.Errno:
		return !slices.Contains(permanentErrnos, e)
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	if u := errors.Unwrap(err); u != nil {
		return transient(u)
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
	if version == len(migs) {
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
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			return fmt.Errorf("postgres: migration %s: %w", m.name, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO schema_version (version, name) VALUES ($1, $2)", m.version, m.name); err != nil {
			return fmt.Errorf("postgres: migration %s: %w", m.name, err)
		}
	}
	if testHookBeforeMigrationCommit != nil {
		testHookBeforeMigrationCommit(ctx, tx)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("postgres: migrate: commit: %w", err)
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
