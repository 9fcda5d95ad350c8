//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"time"
)

// idleResult is what idle replicas cost the database: its transactions
// (pg_stat_database xact_commit + xact_rollback, the database's own, so
// read-only ones too) over a window in which tollgate serve replicas run
// and nobody uses them, beside the same window's count with no replica
// (the benchmark's own reads, autovacuum).
type idleResult struct {
	Binary   string  `json:"binary"`
	Replicas int     `json:"replicas"`
	Seconds  float64 `json:"seconds"`
	// Baseline: transactions a second with no replica running.
	Baseline        float64 `json:"baseline_tx_per_s"`
	BaselineSeconds float64 `json:"baseline_seconds"`
	// Transactions in the window, and a second: all replicas together,
	// and each (less the baseline, divided among them).
	Transactions int64   `json:"transactions"`
	PerSecond    float64 `json:"tx_per_s"`
	PerReplica   float64 `json:"tx_per_s_per_replica"`
	// Statements: the most called in the window, from pg_stat_statements
	// when the server has it loaded.
	Statements []stmtStat `json:"statements,omitempty"`
	Load       string     `json:"load"`
}

// xacts reads the database's transactions so far.
func xacts(ctx context.Context, b *backend) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var n int64
	err := b.monitor.QueryRow(ctx, `SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("postgres: reading pg_stat_database: %w", err)
	}
	return n, nil
}

// countXacts is the database's transactions a second over d. A backend
// reports its counts at most once a second, and the window is read
// between two such reports, so a window of a minute is good to a few
// transactions.
func countXacts(ctx context.Context, b *backend, d time.Duration) (int64, float64, error) {
	before, err := xacts(ctx, b)
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	select {
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	case <-time.After(d):
	}
	after, err := xacts(ctx, b)
	if err != nil {
		return 0, 0, err
	}
	return after - before, time.Since(start).Seconds(), nil
}

// measureIdle starts o.replicas tollgate serve replicas on an empty
// store, lets them settle, and counts the database's transactions while
// nobody uses them.
func measureIdle(ctx context.Context, b *backend, dsn string, o clusterOptions, progress func(string, ...any)) (*idleResult, error) {
	res := &idleResult{Replicas: o.replicas}
	f, err := newServeFleet(ctx, dsn, o.bin, "idle", progress)
	if err != nil {
		return nil, err
	}
	defer f.close()
	res.Binary = f.binLabel
	// The store's tables first (one replica, stopped), so that the
	// baseline is taken on the database the replicas will use.
	r0, err := f.start(ctx, 0)
	if err != nil {
		return nil, err
	}
	r0.stop()
	f.replicas = nil
	// Past the stopped replica's last statistics, and the autovacuum
	// of the tables it made. (-short: a check that the part works.)
	pause, least := 10*time.Second, 10*time.Second
	if o.short {
		pause, least = time.Second, time.Second
	}
	time.Sleep(pause)
	base := max(o.idleTime/2, least)
	progress("idle: baseline, no replica, %v", base)
	n, secs, err := countXacts(ctx, b, base)
	if err != nil {
		return nil, err
	}
	res.Baseline, res.BaselineSeconds = float64(n)/secs, secs
	var rs []*serveReplica
	for i := 1; i <= o.replicas; i++ {
		r, err := f.start(ctx, i)
		if err != nil {
			return nil, err
		}
		rs = append(rs, r)
	}
	if _, err := settleReplicas(ctx, rs, o.settleMax); err != nil {
		return nil, err
	}
	// Past the start-up's work (River's first election, the reconcile).
	time.Sleep(pause / 2)
	stmts := statementsAvailable(ctx, b)
	if stmts {
		resetStatements(ctx, b)
	}
	progress("idle: %d replicas, %v", o.replicas, o.idleTime)
	if res.Transactions, res.Seconds, err = countXacts(ctx, b, o.idleTime); err != nil {
		return nil, err
	}
	res.PerSecond = float64(res.Transactions) / res.Seconds
	res.PerReplica = max(res.PerSecond-res.Baseline, 0) / float64(o.replicas)
	if stmts {
		res.Statements = readStatements(ctx, b, 12, "calls")
	}
	res.Load = loadAvg()
	progress("idle: %.2f transactions/s with %d replicas (%.2f with none): %.2f a replica", res.PerSecond, o.replicas, res.Baseline, res.PerReplica)
	return res, nil
}

func (r *idleResult) print(w io.Writer) {
	fmt.Fprintf(w, "\nIdle: %d tollgate serve replicas (%s) that nobody uses, %.0f s; load average %s\n", r.Replicas, r.Binary, r.Seconds, r.Load)
	fmt.Fprintf(w, "  database transactions (pg_stat_database xact_commit + xact_rollback): %d, %.2f/s; %.2f/s with no replica (%.0f s)\n",
		r.Transactions, r.PerSecond, r.Baseline, r.BaselineSeconds)
	fmt.Fprintf(w, "  per replica: %.2f transactions/s\n", r.PerReplica)
	if len(r.Statements) > 0 {
		fmt.Fprintf(w, "  the most called statements (pg_stat_statements), calls/s a replica:\n")
		for _, s := range r.Statements {
			fmt.Fprintf(w, "    %7.3f  %s\n", float64(s.Calls)/r.Seconds/float64(r.Replicas), s.Query)
		}
	}
}
