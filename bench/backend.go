//go:build linux

package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "modernc.org/sqlite" // the raw transactions' driver, the one the store uses

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/checkpoint/postgres"
	"github.com/tollgate-ai/tollgate/checkpoint/sqlite"
)

// appName marks this benchmark's PostgreSQL sessions, so that it can wait
// for them to end (a session's statistics reach pg_stat_database when it
// ends, or up to 10s after it goes idle).
const appName = "tollgate-bench"

// backend is one -store: it opens a fresh handle on the same database for
// every round, runs the raw transactions, and reads the database's own
// counters.
type backend struct {
	kind  string // memory, sqlite, postgres
	label string // as given, without a password
	path  string // sqlite: the database file
	dsn   string // postgres
	keep  bool

	// sqlite
	rawDB   *sql.DB
	rawPath string
	// postgres
	schema, rawSchema string
	monitor           *pgx.Conn
	hasWALStats       bool
	trace             *pgTrace   // the store's statements
	mu                sync.Mutex // the monitor connection

	cleanups []func()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// parseStores splits -store values: memory, sqlite, sqlite:PATH,
// postgres://... (a URL is never split on commas).
func parseStores(vals []string) ([]string, error) {
	var out []string
	for _, v := range vals {
		if strings.HasPrefix(v, "postgres://") || strings.HasPrefix(v, "postgresql://") {
			out = append(out, v)
			continue
		}
		for s := range strings.SplitSeq(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no -store")
	}
	return out, nil
}

func openBackend(ctx context.Context, spec string, keep bool) (*backend, error) {
	b := &backend{label: spec, keep: keep}
	switch {
	case spec == "memory":
		b.kind = "memory"
	case spec == "sqlite" || strings.HasPrefix(spec, "sqlite:"):
		b.kind = "sqlite"
		b.path = strings.TrimPrefix(strings.TrimPrefix(spec, "sqlite"), ":")
		if b.path == "" {
			dir, err := os.MkdirTemp("", "tollgate-bench-")
			if err != nil {
				return nil, err
			}
			b.cleanups = append(b.cleanups, func() { os.RemoveAll(dir) })
			b.path = filepath.Join(dir, "tollgate.db")
			b.label = "sqlite:" + b.path
		}
		abs, err := filepath.Abs(b.path)
		if err != nil {
			return nil, err
		}
		b.path = abs
		if err := b.openSQLiteRaw(); err != nil {
			b.close()
			return nil, err
		}
	case strings.HasPrefix(spec, "postgres://") || strings.HasPrefix(spec, "postgresql://"):
		b.kind = "postgres"
		b.dsn = spec
		if u, err := url.Parse(spec); err == nil {
			b.label = u.Redacted()
		}
		if err := b.openPostgres(ctx); err != nil {
			b.close()
			return nil, err
		}
	default:
		return nil, fmt.Errorf("-store %q: want memory, sqlite, sqlite:PATH or a postgres:// URL", spec)
	}
	return b, nil
}

// openSQLiteRaw opens the raw transactions' database: a file of its own in
// the store's directory (so the same file system), in WAL mode, with
// synchronous=FULL as the store's default, one connection, BEGIN
// IMMEDIATE: what the store's writer connection does.
func (b *backend) openSQLiteRaw() error {
	b.rawPath = filepath.Join(filepath.Dir(b.path), fmt.Sprintf("tollgate-bench-raw-%d-%s.db", os.Getpid(), randomHex(3)))
	params := url.Values{
		"_pragma": {"busy_timeout(10000)", "journal_mode(WAL)", "synchronous(FULL)"},
		"_txlock": {"immediate"},
	}
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(b.rawPath), OmitHost: true}
	db, err := sql.Open("sqlite", u.String()+"?"+params.Encode())
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	b.rawDB = db
	b.cleanups = append(b.cleanups, func() {
		db.Close()
		for _, suffix := range []string{"", "-wal", "-shm"} {
			os.Remove(b.rawPath + suffix)
		}
	})
	_, err = db.Exec(`CREATE TABLE IF NOT EXISTS bench_raw (id INTEGER PRIMARY KEY, v TEXT NOT NULL)`)
	return err
}

// withParam adds a run-time parameter to a postgres:// URL.
func withParam(dsn, k, v string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn
	}
	q := u.Query()
	q.Set(k, v)
	u.RawQuery = q.Encode()
	return u.String()
}

func (b *backend) openPostgres(ctx context.Context) error {
	tag := fmt.Sprintf("%d_%s", os.Getpid(), randomHex(3))
	b.schema = "tgbench_" + tag
	b.rawSchema = "tgbench_raw_" + tag
	conn, err := pgx.Connect(ctx, withParam(b.dsn, "application_name", appName+"-monitor"))
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	b.monitor = conn
	b.cleanups = append(b.cleanups, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if !b.keep {
			for _, s := range []string{b.schema, b.rawSchema} {
				if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{s}.Sanitize()+" CASCADE"); err != nil {
					fmt.Fprintf(os.Stderr, "bench: drop schema %s: %v\n", s, err)
				}
			}
		}
		conn.Close(ctx)
	})
	raw := pgx.Identifier{b.rawSchema}.Sanitize()
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+raw+"; CREATE TABLE "+raw+".bench_raw (id bigserial PRIMARY KEY, v text NOT NULL)"); err != nil {
		return fmt.Errorf("postgres: scratch schema for the raw transactions: %w", err)
	}
	var n int64
	b.hasWALStats = conn.QueryRow(ctx, `SELECT wal_sync FROM pg_stat_wal`).Scan(&n) == nil
	return nil
}

func (b *backend) close() {
	for i := len(b.cleanups) - 1; i >= 0; i-- {
		b.cleanups[i]()
	}
	b.cleanups = nil
}

// conns is the PostgreSQL pool size for loops concurrent loops: as many
// connections as loops (at least the store's default of 4), or -pg-conns.
func pgConns(loops, flag int) int {
	if flag > 0 {
		return flag
	}
	return max(4, loops)
}

// openStore opens a fresh handle on the backend's store.
func (b *backend) openStore(ctx context.Context, conns int) (checkpoint.Store, error) {
	switch b.kind {
	case "memory":
		return memory.New(), nil
	case "sqlite":
		return sqlite.Open(ctx, b.path, nil)
	case "postgres":
		if b.trace == nil {
			b.trace = &pgTrace{}
		}
		return postgres.Open(ctx, withParam(b.dsn, "application_name", appName), &postgres.Options{Schema: b.schema, MaxConns: int32(conns), Tracer: b.trace})
	}
	return nil, fmt.Errorf("unknown store kind %q", b.kind)
}

// serverCounters are PostgreSQL's own counts (cluster-wide but for
// xact_commit, which is the database's).
type serverCounters struct {
	XactCommit int64 // pg_stat_database.xact_commit: every commit, read-only ones too
	NextXID    int64 // transaction ids assigned: transactions that wrote
	WALSync    int64 // pg_stat_wal.wal_sync: WAL flushes
	WALBytes   int64
	WALLSN     int64 // pg_current_wal_insert_lsn as bytes
	ok         bool
}

func (b *backend) counters(ctx context.Context) (serverCounters, error) {
	if b.kind != "postgres" {
		return serverCounters{}, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var c serverCounters
	err := b.monitor.QueryRow(ctx, `SELECT
		(SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()),
		txid_snapshot_xmax(txid_current_snapshot()),
		pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint`).Scan(&c.XactCommit, &c.NextXID, &c.WALLSN)
	if err != nil {
		return c, fmt.Errorf("postgres: reading pg_stat_database: %w", err)
	}
	if b.hasWALStats {
		if err := b.monitor.QueryRow(ctx, `SELECT wal_sync, wal_bytes::bigint FROM pg_stat_wal`).Scan(&c.WALSync, &c.WALBytes); err != nil {
			return c, fmt.Errorf("postgres: reading pg_stat_wal: %w", err)
		}
	}
	c.ok = true
	return c, nil
}

// walLSN is the WAL insert position in bytes (PostgreSQL), for the bytes
// written per step.
func (b *backend) walLSN(ctx context.Context) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	var n int64
	if err := b.monitor.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint`).Scan(&n); err != nil {
		return -1
	}
	return n
}

// waitSessionsGone waits until this benchmark's sessions (the store's
// pool and listener, the raw pool) have ended, so that their statistics
// are in pg_stat_database and pg_stat_wal.
func (b *backend) waitSessionsGone(ctx context.Context) {
	if b.kind != "postgres" {
		return
	}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		b.mu.Lock()
		var n int64
		err := b.monitor.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, appName).Scan(&n)
		b.mu.Unlock()
		if err != nil || n == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A session's statistics are flushed on its way out; give the last
	// one a moment beyond leaving pg_stat_activity.
	time.Sleep(50 * time.Millisecond)
}

// serverCPU sums the user+system CPU time of the database server's
// processes (PostgreSQL on this machine: the pids pg_stat_activity lists,
// background processes included, read from /proc), by pid; nil when they
// cannot be read (a server elsewhere).
func (b *backend) serverCPU(ctx context.Context) map[int]time.Duration {
	if b.kind != "postgres" {
		return nil
	}
	b.mu.Lock()
	rows, err := b.monitor.Query(ctx, `SELECT pid FROM pg_stat_activity`)
	var pids []int
	if err == nil {
		for rows.Next() {
			var pid int
			if rows.Scan(&pid) == nil {
				pids = append(pids, pid)
			}
		}
		rows.Close()
	}
	b.mu.Unlock()
	out := map[int]time.Duration{}
	for _, pid := range pids {
		if t, ok := procCPU(pid); ok {
			out[pid] = t
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// procCPU reads utime+stime of a postgres process from /proc/PID/stat.
func procCPU(pid int) (time.Duration, bool) {
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil || !strings.HasPrefix(strings.TrimSpace(string(comm)), "postgres") {
		return 0, false
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	s := string(st)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	// Fields after the name: state is f[0]; utime and stime are fields
	// 14 and 15 of the line, f[11] and f[12] here, in clock ticks.
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	k, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	const tick = 10 * time.Millisecond // USER_HZ is 100 on Linux
	return time.Duration(u+k) * tick, true
}

func cpuDelta(before, after map[int]time.Duration) (time.Duration, bool) {
	if before == nil || after == nil {
		return 0, false
	}
	var d time.Duration
	for pid, t := range after {
		d += t - before[pid]
	}
	return d, true
}

// rawResult is one round of raw transactions.
type rawResult struct {
	Loops     int     `json:"loops"`
	Commits   int64   `json:"commits"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"commits_per_s"`
	// PostgreSQL: WAL flushes (pg_stat_wal.wal_sync) for the round's
	// commits and its warm-up commits together.
	WarmCommits int64 `json:"warm_commits,omitempty"`
	WALSyncs    int64 `json:"wal_syncs,omitempty"`
}

// raw runs single-row insert transactions from loops goroutines for d:
// the database's commit rate at the same durability as the store.
func (b *backend) raw(ctx context.Context, loops int, d time.Duration) (rawResult, error) {
	res := rawResult{Loops: loops}
	var insert func(ctx context.Context, i int64) error
	var done func()
	switch b.kind {
	case "sqlite":
		insert = func(ctx context.Context, i int64) error {
			tx, err := b.rawDB.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO bench_raw (v) VALUES (?)`, "row-"+strconv.FormatInt(i, 10)); err != nil {
				tx.Rollback()
				return err
			}
			return tx.Commit()
		}
		done = func() {}
	case "postgres":
		cfg, err := pgxpool.ParseConfig(withParam(b.dsn, "application_name", appName))
		if err != nil {
			return res, err
		}
		cfg.MaxConns = int32(max(1, loops))
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return res, err
		}
		stmt := "INSERT INTO " + pgx.Identifier{b.rawSchema}.Sanitize() + ".bench_raw (v) VALUES ($1)"
		insert = func(ctx context.Context, i int64) error {
			_, err := pool.Exec(ctx, stmt, "row-"+strconv.FormatInt(i, 10))
			return err
		}
		done = pool.Close
	default:
		return res, nil
	}
	before, _ := b.counters(ctx)
	// Warm up: every connection made, caches filled.
	var wg sync.WaitGroup
	errs := make(chan error, loops)
	for i := range loops {
		wg.Go(func() {
			for j := range 5 {
				if err := insert(ctx, int64(-i*10-j)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		done()
		return res, fmt.Errorf("raw insert: %w", err)
	default:
	}
	var n atomic.Int64
	stop := time.Now().Add(d)
	start := time.Now()
	for range loops {
		wg.Go(func() {
			for time.Now().Before(stop) {
				i := n.Add(1)
				if err := insert(ctx, i); err != nil {
					n.Add(-1)
					select {
					case errs <- err:
					default:
					}
					return
				}
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	done()
	select {
	case err := <-errs:
		return res, fmt.Errorf("raw insert: %w", err)
	default:
	}
	res.Commits = n.Load()
	res.WarmCommits = int64(5 * loops)
	res.Seconds = el.Seconds()
	res.PerSecond = float64(res.Commits) / el.Seconds()
	if b.kind == "postgres" {
		b.waitSessionsGone(ctx)
		after, err := b.counters(ctx)
		if err == nil && before.ok {
			res.WALSyncs = after.WALSync - before.WALSync
		}
	}
	return res, nil
}

// pgTrace counts what the store's connections send: statements, and
// round trips (a statement on its own, a batch of them, a prepare).
type pgTrace struct {
	statements, roundTrips atomic.Int64
}

func (t *pgTrace) counts() (statements, roundTrips int64) {
	return t.statements.Load(), t.roundTrips.Load()
}

func (t *pgTrace) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	t.statements.Add(1)
	t.roundTrips.Add(1)
	return ctx
}

func (t *pgTrace) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (t *pgTrace) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	t.roundTrips.Add(1)
	return ctx
}

func (t *pgTrace) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {
	t.statements.Add(1)
}

func (t *pgTrace) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (t *pgTrace) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	t.roundTrips.Add(1)
	return ctx
}

func (t *pgTrace) TracePrepareEnd(context.Context, *pgx.Conn, pgx.TracePrepareEndData) {}
