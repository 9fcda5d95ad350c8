package postgres

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/checkpointtest"
	"github.com/tollgate-ai/tollgate/internal/pgtest"
)

// BenchmarkStore runs [checkpointtest.Benchmark] on the throwaway cluster
// (fsync on, synchronous_commit on). The raw transaction is a single-row
// INSERT committed on its own (one round trip, one WAL flush) on the same
// pool and schema; raw_tx_explicit times BEGIN; INSERT; COMMIT against it.
//
//	go test -run '^$' -bench Store ./checkpoint/postgres/
func BenchmarkStore(b *testing.B) {
	dsn := pgtest.Start(b)
	s, err := Open(b.Context(), dsn, &Options{Schema: pgtest.Schema(b, dsn)})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if _, err := s.pool.Exec(b.Context(), `CREATE TABLE bench_raw (id bigserial PRIMARY KEY, v text NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	raw := func(ctx context.Context, i int) error {
		_, err := s.pool.Exec(ctx, `INSERT INTO bench_raw (v) VALUES ($1)`, fmt.Sprint("row-", i))
		return err
	}
	checkpointtest.Benchmark(b, s, raw)
	b.Run("raw_tx_explicit", func(b *testing.B) {
		var tRaw, tTx time.Duration
		for i := 0; b.Loop(); i++ {
			t0 := time.Now()
			if err := raw(b.Context(), i); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			err := pgx.BeginFunc(b.Context(), s.pool, func(tx pgx.Tx) error {
				_, err := tx.Exec(b.Context(), `INSERT INTO bench_raw (v) VALUES ($1)`, fmt.Sprint("tx-", i))
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
			tRaw, tTx = tRaw+t1.Sub(t0), tTx+time.Since(t1)
		}
		b.ReportMetric(float64(tTx.Nanoseconds())/float64(b.N)/1e3, "op-µs")
		b.ReportMetric(float64(tRaw.Nanoseconds())/float64(b.N)/1e3, "raw-µs")
		b.ReportMetric(float64(tTx)/float64(tRaw), "x-raw")
	})
}

// BenchmarkQueue runs [checkpointtest.BenchmarkQueue] on the throwaway
// cluster (synchronous_commit off: the fill does not wait for the disk;
// the reads are the same), beside SELECT 1 on the same pool, with ANALYZE
// after the fill.
//
//	go test -run '^$' -bench Queue -benchtime 2000x ./checkpoint/postgres/
func BenchmarkQueue(b *testing.B) {
	dsn := pgtest.WithParams(pgtest.Start(b), "synchronous_commit", "off")
	s, err := Open(b.Context(), dsn, &Options{Schema: pgtest.Schema(b, dsn), MaxConns: 8})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	checkpointtest.BenchmarkQueue(b, s, func(ctx context.Context) error {
		var one int
		return s.pool.QueryRow(ctx, "SELECT 1").Scan(&one)
	}, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, "ANALYZE questions")
		return err
	})
}

const childEnv = "TOLLGATE_NOTIFY_CHILD" // "dsn schema" for TestNotifyChild

// BenchmarkNotifyLatency measures how long after a question's commit a
// subscriber in another process (this test binary, re-executed) sees it.
// commit-p50/p99 run from CreateQuestion's return (the commit acknowledged
// to the writer; the subscriber may even be first, counted as 0) to the
// child's receipt; write-p50/p99 from the call.
//
//	go test -run '^$' -bench NotifyLatency -benchtime 2000x ./checkpoint/postgres/
func BenchmarkNotifyLatency(b *testing.B) {
	dsn := pgtest.Start(b)
	schema := pgtest.Schema(b, dsn)
	s, err := Open(b.Context(), dsn, &Options{Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()

	cmd := exec.Command(os.Args[0], "-test.run=^TestNotifyChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+dsn+" "+schema)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	lines := bufio.NewScanner(stdout)
	next := func() (string, int64) {
		for lines.Scan() {
			id, ns, ok := strings.Cut(lines.Text(), " ")
			if !ok {
				continue
			}
			n, err := strconv.ParseInt(ns, 10, 64)
			if err != nil {
				continue
			}
			return id, n
		}
		b.Fatalf("the subscriber process ended: %v", lines.Err())
		return "", 0
	}
	if id, _ := next(); id != "ready" {
		b.Fatalf("subscriber said %q", id)
	}

	var fromCommit, fromWrite []time.Duration
	for i := 0; b.Loop(); i++ {
		qid := fmt.Sprint("q", i)
		start := time.Now()
		if _, _, err := s.CreateQuestion(b.Context(), &checkpoint.Question{ThreadID: "t", ID: qid, Kind: "approve"}); err != nil {
			b.Fatal(err)
		}
		committed := time.Now()
		for {
			id, seen := next()
			if id != qid {
				continue
			}
			fromCommit = append(fromCommit, max(0, time.Unix(0, seen).Sub(committed)))
			fromWrite = append(fromWrite, time.Unix(0, seen).Sub(start))
			break
		}
	}
	pct := func(d []time.Duration, p float64) float64 {
		slices.Sort(d)
		return float64(d[int(float64(len(d)-1)*p)].Nanoseconds()) / 1e3
	}
	b.ReportMetric(pct(fromCommit, 0.50), "commit-p50-µs")
	b.ReportMetric(pct(fromCommit, 0.99), "commit-p99-µs")
	b.ReportMetric(pct(fromWrite, 0.50), "write-p50-µs")
	b.ReportMetric(pct(fromWrite, 0.99), "write-p99-µs")
}

// TestNotifyChild is the subscriber process of BenchmarkNotifyLatency: it
// prints "ready", then "<question id> <unix ns>" for every new question,
// until its stdin closes.
func TestNotifyChild(t *testing.T) {
	env := os.Getenv(childEnv)
	if env == "" {
		t.Skip("the subscriber process of BenchmarkNotifyLatency")
	}
	dsn, schema, _ := strings.Cut(env, " ")
	s, err := Open(t.Context(), dsn, &Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ch, err := s.Subscribe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		io.Copy(io.Discard, os.Stdin)
		s.Close()
	}()
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(out, "ready 0")
	out.Flush()
	for n := range ch {
		if n.Kind == checkpoint.QuestionCreated {
			seen := time.Now().UnixNano()
			fmt.Fprintf(out, "%s %d\n", n.QuestionID, seen)
			out.Flush()
		}
	}
}
