package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
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
	// ErrUnavailable: the server could not be reached before
	// [Options].ConnectTimeout; the error also wraps the last failure.
	ErrUnavailable = errors.New("postgres: database unavailable")
	// ErrNewerSchema: the schema was migrated by a newer tollgate than
	// this binary. Upgrade tollgate to open it.
	ErrNewerSchema = errors.New("postgres: schema is newer than this tollgate")
	// ErrNotTollgate: the schema holds tables that are not tollgate's.
	// Open changes nothing in it.
	ErrNotTollgate = errors.New("postgres: not a tollgate schema")
)

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
	// ConnectTimeout is how long Open keeps retrying, with backoff, while
	// the server is unreachable or starting up; zero means 30s, negative
	// means a single attempt. A wrong password or a missing database fails
	// at once. The context passed to Open bounds it too.
	ConnectTimeout time.Duration
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
	if err := s.migrate(ctx, migs); err != nil {
		pool.Close()
		return nil, err
	}
	s.hub = newHub(s, o.PollInterval)
	return s, nil
}

// waitReady pings the server until it answers, with exponential backoff
// and jitter, for at most timeout.
func (s *Store) waitReady(ctx context.Context, timeout time.Duration) error {
	start := time.Now()
	var deadline time.Time
	if timeout > 0 {
		deadline = start.Add(timeout)
	}
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := s.pool.Ping(actx)
		cancel()
		if err == nil {
			return nil
		}
		if !retryable(err) || ctx.Err() != nil || deadline.IsZero() || time.Now().Add(backoff).After(deadline) {
			host := fmt.Sprintf("%s:%d", s.cfg.Host, s.cfg.Port)
			if !retryable(err) {
				return fmt.Errorf("postgres: connect to %s: %w", host, err)
			}
			return fmt.Errorf("%w: cannot connect to %s (%d attempts over %v): %w",
				ErrUnavailable, host, attempt, time.Since(start).Round(time.Millisecond), err)
		}
		s.logf(slog.LevelInfo, "checkpoint/postgres: waiting for the database", "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(backoff/2 + rand.N(backoff/2+1)):
		}
		backoff = min(backoff*2, 3*time.Second)
	}
}

func (s *Store) logf(level slog.Level, msg string, args ...any) {
	s.log.Log(context.Background(), level, msg, args...)
}

// retryable tells a server that is not there yet (refused, unreachable,
// starting up, out of connections) from one that said no (authentication,
// no such database, a bad parameter): only the first is worth waiting for.
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "57P03", // cannot_connect_now: starting up or shutting down
			pgErr.Code == "53300",               // too_many_connections
			strings.HasPrefix(pgErr.Code, "08"): // connection exceptions
			return true
		}
		return false
	}
	return !errors.Is(err, context.Canceled)
}

// migrate creates the schema if missing and applies the migrations it
// lacks, in one transaction under an advisory lock.
func (s *Store) migrate(ctx context.Context, migs []migration) error {
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
