package sqlite

import (
	"context"
	crand "crypto/rand"
	"database/sql"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	msqlite "modernc.org/sqlite" // also registers the "sqlite" database/sql driver

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/internal/migrate"
	"github.com/tollgate-ai/tollgate/clock"
)

var _ checkpoint.Store = (*Store)(nil)

// Errors of Open, for [errors.Is].
var (
	// ErrNotTollgate: the file exists but is not a tollgate database (not
	// SQLite at all, or SQLite belonging to something else). Open leaves
	// such a file untouched.
	ErrNotTollgate = errors.New("sqlite: not a tollgate database")
	// ErrNewerSchema: the database was written by a newer tollgate, whose
	// schema this binary does not know. Upgrade tollgate to open it.
	ErrNewerSchema = errors.New("sqlite: database schema is newer than this tollgate")
	// ErrCorrupt: the file starts like an SQLite database but SQLite
	// cannot read it (damaged or truncated). Open leaves it untouched.
	ErrCorrupt = errors.New("sqlite: database file is corrupt")
	// ErrOlderSchema: [Options].MustExist or [Options].ReadOnly was set
	// and the database was written by an older tollgate: its schema needs
	// a migration, which only an Open without them does. Open leaves the
	// file untouched.
	ErrOlderSchema = errors.New("sqlite: database schema is older than this tollgate")
	// ErrReadOnly: the database may not be written: Open found the file
	// (or its directory, where SQLite keeps its -wal and -shm files)
	// read-only for this process, or a write was attempted on a store
	// opened with [Options].ReadOnly.
	ErrReadOnly = errors.New("sqlite: database is read-only")
)

// isReadOnly reports whether err is SQLite saying it may not write
// (SQLITE_READONLY, any extended code: the file, its directory, ...).
func isReadOnly(err error) bool {
	var e *msqlite.Error
	return errors.As(err, &e) && e.Code()&0xff == 8
}

// corrupt reports whether err is SQLite saying the file is damaged.
func corrupt(err error) bool {
	var e *msqlite.Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code() & 0xff {
	case 11, 26: // SQLITE_CORRUPT, SQLITE_NOTADB
		return true
	}
	return false
}

// applicationID marks a tollgate database in the SQLite header
// (PRAGMA application_id): 0x546F6C6C, "Toll". The first migration sets it.
const applicationID = 0x546F6C6C

// Options configure [Open]. A nil *Options means all defaults.
type Options struct {
	// Synchronous is SQLite's PRAGMA synchronous: "FULL" (the zero value:
	// every commit is on disk before it returns, so an answered question
	// survives a power cut), "EXTRA", "NORMAL" (a power cut may lose the
	// last commits, never corrupt the file) or "OFF".
	Synchronous string
	// BusyTimeout is how long a write waits for another process that holds
	// the write lock, and how long Open waits for others creating or
	// migrating the same file; zero means 10s.
	BusyTimeout time.Duration
	// Readers is the size of the pool of read connections; zero means 4.
	// A ":memory:" store has one connection for everything.
	Readers int
	// PollInterval is how often a store with subscribers looks for
	// questions created or resolved by other processes on the same file;
	// zero means 1s, negative turns polling off. Its own writes are
	// delivered at once.
	PollInterval time.Duration
	// Clock stamps the times the store fills in (creation, update, a
	// resolution without a time); nil means [clock.Real].
	Clock clock.Clock
	// Logger receives background errors (a failed poll); nil means
	// [slog.Default].
	Logger *slog.Logger
	// MustExist opens only a tollgate database that is already there, for
	// a program that answers what another one wrote: Open then creates
	// nothing (no file; no -wal or -shm but those SQLite keeps while the
	// store is open), fails with an error that [errors.Is]
	// [fs.ErrNotExist] when the file does not exist, with
	// [ErrNotTollgate] for an empty file or an SQLite database without
	// tollgate's tables, with [ErrOlderSchema] for a database whose
	// schema needs a migration (it is not migrated: that is for the
	// program that keeps the store), and with [ErrReadOnly] when this
	// process may not write it.
	MustExist bool
	// ReadOnly opens a tollgate database that is already there only to
	// read it, for a program that shows what another one wrote; it
	// implies MustExist. Nothing is written, not even by SQLite: the
	// connections are read-only (mode=ro, query_only), there is no
	// migration and no switch to WAL, and no -wal or -shm file is
	// created. A database that no process has open (no -wal file beside
	// it) is read as it is on disk (SQLite's immutable=1), so that a user
	// who may only read the file and its directory can read it; one that
	// is open elsewhere is read through its -wal and -shm, seeing every
	// commit. Every write of the store fails with [ErrReadOnly].
	ReadOnly bool
}

// Store is a [checkpoint.Store] in one SQLite file. All writes go through
// one connection, by one goroutine that commits concurrent writes together
// (BEGIN IMMEDIATE, a savepoint per batch: see [Store.Commit]); reads go
// through a pool, and WAL lets them run beside the writer. Several
// processes may open the same file.
type Store struct {
	w      *sql.DB // exactly one connection: every write
	r      *sql.DB // readers; the same *sql.DB as w for ":memory:"
	clk    clock.Clock
	log    *slog.Logger
	hub    *hub
	memory bool
	// readOnly: opened with [Options].ReadOnly; w is r, and every
	// write fails with ErrReadOnly.
	readOnly bool
	stmts    statements
	// rc is the reader connections' prepared statements of the cycle's
	// reads (readconn.go).
	rc rconns
	// wc is the write connection's prepared statements: used by the
	// writer's goroutine (Open's, Close's before and after it).
	wc *wconn
	// wr commits every write (nil when readOnly).
	wr *writer
	// ckpt checkpoints the WAL of a database file (nil in memory and
	// when readOnly).
	ckpt *walCheckpointer

	closeOnce sync.Once
	closeErr  error
}

//go:embed migrations/*.sql
var migrationFS embed.FS

// migration is one of the embedded migrations (NNNN_description.sql).
type migration = migrate.Migration

// migrationSteps are the parts of migrations that SQL cannot do, run in
// the same transaction right after the migration's SQL.
var migrationSteps = map[int]func(ctx context.Context, tx *sql.Tx) error{
	6: splitMessagesMigration,
}

// migrations returns the embedded migrations in order.
func migrations() ([]migration, error) {
	return migrate.Load(migrationFS, "migrations", "sqlite")
}

// Open opens (creating if needed) the tollgate database at path, or a
// private in-memory database for ":memory:", and brings its schema up to
// date. It refuses, leaving the file untouched, a file that is not a
// tollgate database ([ErrNotTollgate]) or one written by a newer tollgate
// ([ErrNewerSchema]). [Options].MustExist and [Options].ReadOnly open only
// a database that is there and up to date, and change nothing in it.
func Open(ctx context.Context, path string, opts *Options) (*Store, error) {
	o, err := openOptions(opts)
	if err != nil {
		return nil, err
	}
	migs, err := migrations()
	if err != nil {
		return nil, err
	}

	s := &Store{clk: o.Clock, log: o.Logger, readOnly: o.ReadOnly}
	if path == ":memory:" && o.MustExist {
		return nil, errors.New("sqlite: MustExist: an in-memory database never exists before Open")
	}
	if path == ":memory:" {
		if err := s.openMemory(); err != nil {
			return nil, err
		}
	} else {
		if path == "" {
			return nil, errors.New("sqlite: empty path")
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, err
		}
		// Look before touching: switching a file to WAL, or a migration,
		// would write to someone else's database.
		if err := inspect(ctx, abs, len(migs), o.BusyTimeout, o.MustExist, o.ReadOnly); err != nil {
			return nil, err
		}
		if o.ReadOnly {
			if err := s.openReadOnly(ctx, abs, o); err != nil {
				return nil, err
			}
			s.hub = newHub(s, o.PollInterval)
			return s, nil
		}
		if err := s.openFile(ctx, abs, o); err != nil {
			return nil, err
		}
	}
	if err := s.migrate(ctx, migs, o.MustExist); err != nil {
		s.closeDBs()
		return nil, openError(path, err)
	}
	if err := s.prepare(ctx); err != nil {
		s.closeDBs()
		return nil, openError(path, err)
	}
	poll := o.PollInterval
	if s.memory {
		poll = -1 // no other process can write to it
	}
	s.hub = newHub(s, poll)
	s.wr = newWriter(s)
	return s, nil
}

// openOptions is opts (which may be nil) with its defaults filled in.
func openOptions(opts *Options) (Options, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Synchronous == "" {
		o.Synchronous = "FULL"
	}
	if sync := strings.ToUpper(o.Synchronous); slices.Contains([]string{"OFF", "NORMAL", "FULL", "EXTRA"}, sync) {
		o.Synchronous = sync
	} else {
		return o, fmt.Errorf("sqlite: Synchronous %q: want FULL, EXTRA, NORMAL or OFF", o.Synchronous)
	}
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = 10 * time.Second
	}
	if o.Readers <= 0 {
		o.Readers = 4
	}
	if o.PollInterval == 0 {
		o.PollInterval = time.Second
	}
	if o.Clock == nil {
		o.Clock = clock.Real
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.ReadOnly {
		o.MustExist = true
	}
	return o, nil
}

// openMemory opens a private in-memory database.
func (s *Store) openMemory() error {
	s.memory = true
	// One connection that never closes: an in-memory database lives
	// and dies with its connection, so readers and the writer share it.
	db, err := sql.Open("sqlite", "file:tollgate-"+randomName()+"?mode=memory&_txlock=immediate")
	if err != nil {
		return err
	}
	singleConn(db)
	s.w, s.r = db, db
	return nil
}

// singleConn keeps db to one connection that is never closed.
func singleConn(db *sql.DB) {
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
}

// busyPragma is the busy_timeout pragma of o's connections.
func busyPragma(o Options) string {
	return "busy_timeout(" + strconv.FormatInt(o.BusyTimeout.Milliseconds(), 10) + ")"
}

// openReadOnly opens the database file abs, inspected, for reading only:
// one pool of query-only connections serves as writer and readers.
func (s *Store) openReadOnly(ctx context.Context, abs string, o Options) error {
	params, err := readOnlyParams(abs)
	if err != nil {
		return err
	}
	params["_pragma"] = []string{busyPragma(o), "query_only(1)"}
	r, err := sql.Open("sqlite", fileURI(abs, params))
	if err != nil {
		return err
	}
	r.SetMaxOpenConns(o.Readers)
	r.SetMaxIdleConns(o.Readers)
	s.w, s.r = r, r
	if err := s.prepare(ctx); err != nil {
		s.closeDBs()
		return openError(abs, err)
	}
	return nil
}

// openFile opens the database file abs, inspected: one writer
// connection and a pool of readers, in WAL mode.
func (s *Store) openFile(ctx context.Context, abs string, o Options) error {
	busy := busyPragma(o)
	// No journal_mode here: switching to WAL is done once, by
	// enableWAL (SQLite does not wait for a lock there), and is
	// persistent in the file.
	// The WAL is checkpointed beside the writer (walcheckpoint.go), and
	// by its commits only under a sustained load.
	// temp_store(memory): the sub-journal of a group's savepoints (the
	// pages a batch changed, to roll back to) stays in memory. By
	// default SQLite spills it to a temporary file past 64 KB, which a
	// group of a few batches reaches: a file made, written with a
	// syscall a page and removed, every group, in the writer's goroutine
	// (a fifth of its statements' CPU at 8 loops; bench/README.md). The
	// sub-journal serves only a rollback inside the transaction, so what
	// a crash leaves is the same. A group holds at most maxGroupBytes.
	wParams := url.Values{
		"_pragma": {busy, "synchronous(" + o.Synchronous + ")", "wal_autocheckpoint(" + strconv.Itoa(writerCheckpointPages) + ")", "temp_store(memory)"},
		"_txlock": {"immediate"},
	}
	cParams := url.Values{"_pragma": {busy}}
	rParams := url.Values{
		"_pragma": {busy, "query_only(1)"},
	}
	if o.MustExist {
		// A file removed since inspect is not created again.
		wParams.Set("mode", "rw")
		rParams.Set("mode", "rw")
	}
	cParams.Set("mode", "rw") // the writer's has made the file
	w, err := sql.Open("sqlite", fileURI(abs, wParams))
	if err != nil {
		return err
	}
	singleConn(w)
	r, err := sql.Open("sqlite", fileURI(abs, rParams))
	if err != nil {
		w.Close()
		return err
	}
	r.SetMaxOpenConns(o.Readers)
	r.SetMaxIdleConns(o.Readers)
	s.w, s.r = w, r
	if err := enableWAL(ctx, w, o.BusyTimeout); err != nil {
		s.closeDBs()
		return openError(abs, err)
	}
	c, err := sql.Open("sqlite", fileURI(abs, cParams))
	if err != nil {
		s.closeDBs()
		return err
	}
	singleConn(c)
	s.ckpt = newWALCheckpointer(c, s.log)
	return nil
}

// openError is err, wrapping [ErrReadOnly] too when SQLite said it may
// not write.
func openError(name string, err error) error {
	if isReadOnly(err) && !errors.Is(err, ErrReadOnly) {
		return fmt.Errorf("%w: %s may not be written by this process: %w", ErrReadOnly, name, err)
	}
	return err
}

// readOnlyParams are the URI parameters of a connection that reads the
// database at abs and never writes anything: not the file, nor a -wal or
// -shm beside it. SQLite reads a WAL database through its -shm file, and
// creates the -wal and -shm files when they are not there (where a
// read-only connection then cannot remove them again); it cannot create
// them in a directory it may not write, and fails. A WAL database without
// a -wal file is one that no connection has open (the last to close
// removes it; a crash leaves it): all of it is in the file, and it is read
// with immutable=1, which needs no -shm and takes no lock. Another process
// opening it while it is read writes to a new -wal, which is not seen:
// the read is of the moment it began.
func readOnlyParams(abs string) (url.Values, error) {
	params := url.Values{"mode": {"ro"}}
	wal, err := walMode(abs)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	if !wal {
		return params, nil // a rollback journal: shared locks, no file made
	}
	switch _, err := os.Lstat(abs + "-wal"); {
	case errors.Is(err, fs.ErrNotExist):
		params.Set("immutable", "1")
	case err != nil:
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	return params, nil
}

// walMode reports whether the SQLite file at abs is in WAL mode (its
// header's file format versions are 2).
func walMode(abs string) (bool, error) {
	f, err := os.Open(abs)
	if err != nil {
		return false, err
	}
	defer f.Close()
	var head [20]byte
	if _, err := io.ReadFull(f, head[:]); err != nil {
		return false, nil // too short to be in WAL mode; inspect says what it is
	}
	return head[18] == 2 && head[19] == 2, nil
}

func randomName() string {
	var b [8]byte
	crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// fileURI makes an SQLite URI of an absolute path, so that no character of
// the path is taken for a parameter.
func fileURI(abs string, params url.Values) string {
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs), OmitHost: true}
	return u.String() + "?" + params.Encode()
}

// enableWAL switches the database to WAL mode (a no-op if it is already),
// waiting up to timeout for other connections.
//
// The busy timeout does not cover this: PRAGMA journal_mode=WAL reads the
// header in a read transaction and then upgrades it to a write to change
// the header, and SQLite never waits to upgrade a read transaction (two
// waiting upgraders would deadlock): if another connection holds the write
// lock (it is switching the same new file, or migrating it), the pragma
// fails with SQLITE_BUSY at once. The pragma cannot run in a transaction of
// ours that takes the write lock first, so it is retried here.
func enableWAL(ctx context.Context, db *sql.DB, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	pause := time.Millisecond
	for {
		_, err := db.ExecContext(ctx, "PRAGMA journal_mode = WAL")
		if err == nil {
			return nil
		}
		if !isBusy(err) || time.Now().Add(pause).After(deadline) {
			return fmt.Errorf("sqlite: open: journal_mode=WAL: %w", err)
		}
		// Jittered, so that openers that collided do not collide again.
		t := time.NewTimer(pause/2 + rand.N(pause))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("sqlite: open: %w", ctx.Err())
		case <-t.C:
		}
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// isBusy reports whether err is SQLite's SQLITE_BUSY (any extended code).
func isBusy(err error) bool {
	var e *msqlite.Error
	return errors.As(err, &e) && e.Code()&0xff == 5
}

// migrate applies the migrations the database lacks, all in one
// transaction (BEGIN IMMEDIATE: two processes opening a new file at once
// take turns, and the second finds the work done). With mustExist it
// applies none: a database that lacks some is ErrOlderSchema.
func (s *Store) migrate(ctx context.Context, migs []migration, mustExist bool) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: open: %w", err)
	}
	defer tx.Rollback()
	st, err := readState(ctx, tx)
	if err != nil {
		return fmt.Errorf("sqlite: open: %w", err)
	}
	if err := st.check("the database", len(migs)); err != nil {
		return err
	}
	if mustExist {
		if err := st.current("the database", len(migs)); err != nil {
			return err
		}
	}
	if st.version == len(migs) {
		return tx.Commit()
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
	version    INTEGER PRIMARY KEY,
	name       TEXT NOT NULL,
	applied_at INTEGER NOT NULL
) STRICT`); err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	for _, m := range migs[st.version:] {
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return fmt.Errorf("sqlite: migration %s: %w", m.Name, err)
		}
		if step := migrationSteps[m.Version]; step != nil {
			if err := step(ctx, tx); err != nil {
				return fmt.Errorf("sqlite: migration %s: %w", m.Name, err)
			}
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO schema_version (version, name, applied_at) VALUES (?, ?, ?)",
			m.Version, m.Name, s.clk.Now().UnixNano()); err != nil {
			return fmt.Errorf("sqlite: migration %s: %w", m.Name, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	return nil
}

// Close commits the writes queued, refuses later ones, ends every
// subscription and closes the database. Safe to call more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if s.wr != nil {
			s.wr.close() // commits what is queued; later writes fail
		}
		s.hub.close()
		s.closeErr = s.closeDBs()
	})
	return s.closeErr
}

func (s *Store) closeDBs() error {
	s.stmts.close()
	s.rc.close(s.r)
	if s.wc != nil {
		// On the connection, as the writer used them (a ":memory:"
		// store's readers share it).
		if conn, err := s.w.Conn(bg); err == nil {
			conn.Raw(func(any) error { s.wc.close(); return nil })
			conn.Close()
		}
	}
	if s.ckpt != nil {
		s.ckpt.stop()
	}
	err := s.w.Close()
	if s.r != s.w {
		err = errors.Join(err, s.r.Close())
	}
	if s.ckpt != nil {
		// Last: the last connection to close copies what is left of
		// the WAL into the file and removes it.
		err = errors.Join(err, s.ckpt.db.Close())
	}
	return err
}
