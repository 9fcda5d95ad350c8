package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
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
	channelArg any // channel(), made a parameter once
	// textJSON: JSON and message parameters go as strings, not as the
	// bytes they are — in the query modes where pgx types a parameter by
	// its Go value (exec, simple_protocol: PgBouncer's), a []byte is bytea.
	textJSON   bool
	writersKey int32 // of the numbered writers' lock (events.go)
	clk        clock.Clock
	log        *slog.Logger
	hub        *hub
	// txHook: see SetTxHook.
	txHook atomic.Pointer[TxHook]
	// gaveUp counts the reads that returned with visible rows still
	// withheld when eventWait ran out (events.go's settle): a test tells
	// by it, not by a clock, whether the horizon let an event through.
	gaveUp atomic.Int64

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
	s.channelArg = s.channel()
	switch cfg.ConnConfig.DefaultQueryExecMode {
	case pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol:
		s.textJSON = true
	}
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
