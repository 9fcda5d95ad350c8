package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint/checkpointtest"
)

// BenchmarkStore runs [checkpointtest.Benchmark] with synchronous=FULL (the
// default) and NORMAL; the raw transaction is a single-row insert on the
// same writer connection, BEGIN IMMEDIATE, same settings.
//
//	go test -run '^$' -bench Store ./checkpoint/sqlite/
func BenchmarkStore(b *testing.B) {
	for _, sync := range []string{"FULL", "NORMAL"} {
		b.Run("sync="+sync, func(b *testing.B) { benchStore(b, sync) })
	}
}

func benchStore(b *testing.B, sync string) {
	s, err := Open(b.Context(), filepath.Join(b.TempDir(), "bench.db"), &Options{Synchronous: sync})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if _, err := s.w.Exec(`CREATE TABLE bench_raw (id INTEGER PRIMARY KEY, v TEXT NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	raw := func(ctx context.Context, i int) error {
		tx, err := s.w.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.Exec(`INSERT INTO bench_raw (v) VALUES (?)`, fmt.Sprint("row-", i)); err != nil {
			return err
		}
		return tx.Commit()
	}
	checkpointtest.Benchmark(b, s, raw)
}

// BenchmarkQueue runs [checkpointtest.BenchmarkQueue]: 100,000 pending
// questions in a file (synchronous=OFF: the fill does not wait for the
// disk; the reads are the same), beside SELECT 1 on the same reader pool.
//
//	go test -run '^$' -bench Queue -benchtime 2000x ./checkpoint/sqlite/
func BenchmarkQueue(b *testing.B) {
	s, err := Open(b.Context(), filepath.Join(b.TempDir(), "bench.db"), &Options{Synchronous: "OFF"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	checkpointtest.BenchmarkQueue(b, s, func(ctx context.Context) error {
		var one int
		return s.r.QueryRowContext(ctx, "SELECT 1").Scan(&one)
	}, nil)
}
