package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/checkpointtest"
	"github.com/tollgate-ai/tollgate/checkpoint/internal/messages"
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
	checkpointtest.Benchmark(b, s, rawTx(b, s))
}

// rawTx makes the raw transaction of the benchmarks: a single-row insert
// on the store's writer connection, BEGIN IMMEDIATE, the store's settings.
func rawTx(b *testing.B, s *Store) func(ctx context.Context, i int) error {
	if _, err := s.w.Exec(`CREATE TABLE bench_raw (id INTEGER PRIMARY KEY, v TEXT NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	return func(ctx context.Context, i int) error {
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

// BenchmarkCommit times a step's write, a Commit of a thread append (a
// message of about 1 KB) and an audit event, beside the raw single-row
// insert transaction of BenchmarkStore, with 1 and 8 writers. Each
// iteration runs both, each writer doing perWriter of one then of the
// other (in turns first), so that both see the disk at the same moment.
// commit/s and raw/s are writes per second; x-raw is commit/s over raw/s
// (above 1: the commits are shared); batches/tx is how many batches each
// transaction wrote ([Store.WriteStats]).
//
//	go test -run '^$' -bench Commit ./checkpoint/sqlite/
func BenchmarkCommit(b *testing.B) {
	for _, sync := range []string{"FULL", "NORMAL"} {
		for _, writers := range []int{1, 8} {
			b.Run(fmt.Sprintf("sync=%s/writers=%d", sync, writers), func(b *testing.B) { benchCommit(b, sync, writers) })
		}
	}
}

func benchCommit(b *testing.B, sync string, writers int) {
	const perWriter = 16
	s, err := Open(b.Context(), filepath.Join(b.TempDir(), "bench.db"), &Options{Synchronous: sync})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	rawOne := rawTx(b, s)
	raw := func(w, i int) error { return rawOne(b.Context(), w*1_000_000_000+i) }
	msg := json.RawMessage(`{"role":"assistant","tool_calls":[{"id":"call_1","name":"bash","arguments":{"cmd":"` + strings.Repeat("make -j8 all && ", 60) + `true"}}]}`)
	data := json.RawMessage(`{"call_id":"call_1","tool":"bash","decision":"ask","rule":"shell-write"}`)
	ths := make([]*checkpoint.Thread, writers)
	for w := range ths {
		ths[w] = &checkpoint.Thread{ID: fmt.Sprint("bench-", w), Status: checkpoint.ThreadRunning, RunID: "run-1", Messages: json.RawMessage(`[]`)}
		if err := s.CreateThread(b.Context(), ths[w]); err != nil {
			b.Fatal(err)
		}
	}
	step := func(w, i int) error {
		th := ths[w]
		tw := &checkpoint.ThreadWrite{ID: th.ID, Version: th.Version, Status: th.Status, RunID: th.RunID, Append: []json.RawMessage{msg}}
		_, err := s.Commit(b.Context(), &checkpoint.Batch{Thread: tw,
			Events: []*checkpoint.Event{{ThreadID: th.ID, RunID: th.RunID, Type: "tool_call_asked", Data: data}}})
		th.Version = tw.Version
		return err
	}
	phase := func(f func(w, i int) error) time.Duration {
		start := time.Now()
		var wg gosync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for i := range perWriter {
					if err := f(w, i); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	before := s.WriteStats()
	var tRaw, tOp time.Duration
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			tRaw += phase(raw)
			tOp += phase(step)
		} else {
			tOp += phase(step)
			tRaw += phase(raw)
		}
	}
	st := s.WriteStats()
	n := float64(b.N * writers * perWriter)
	b.ReportMetric(n/tOp.Seconds(), "commit/s")
	b.ReportMetric(n/tRaw.Seconds(), "raw/s")
	b.ReportMetric(tRaw.Seconds()/tOp.Seconds(), "x-raw")
	b.ReportMetric(float64(st.Batches-before.Batches)/float64(st.Transactions-before.Transactions), "batches/tx")
	b.ReportMetric(float64(tOp.Nanoseconds())/n/1e3, "commit-µs")
}

// BenchmarkLongThread times a step of a thread that holds 10 or 1,000
// messages of 4 KB (a tool's output): its Commit (an append of one more
// and an event, synchronous=FULL) and LoadThread (the whole thread, one
// query). The step writes what it adds, whatever the thread holds; the
// load reads the thread.
//
//	go test -run '^$' -bench LongThread ./checkpoint/sqlite/
func BenchmarkLongThread(b *testing.B) {
	out := json.RawMessage(`{"role":"tool","call_id":"call_1","content":"` + strings.Repeat("drwxr-xr-x 2 kim kim 4096 build\\n", 125) + `"}`)
	for _, held := range []int{10, 1000} {
		s, err := Open(b.Context(), filepath.Join(b.TempDir(), "bench.db"), nil)
		if err != nil {
			b.Fatal(err)
		}
		msgs := make([]json.RawMessage, held)
		for i := range msgs {
			msgs[i] = out
		}
		th := &checkpoint.Thread{ID: "long", Status: checkpoint.ThreadRunning, RunID: "run-1", Messages: messages.Join(msgs)}
		if err := s.CreateThread(b.Context(), th); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("messages=%d/append", held), func(b *testing.B) {
			for b.Loop() {
				tw := &checkpoint.ThreadWrite{ID: th.ID, Version: th.Version, Status: th.Status, RunID: th.RunID, Append: []json.RawMessage{out}}
				if _, err := s.Commit(b.Context(), &checkpoint.Batch{Thread: tw, Events: []*checkpoint.Event{{ThreadID: th.ID, Type: "tool_result"}}}); err != nil {
					b.Fatal(err)
				}
				th.Version = tw.Version
				b.StopTimer()
				// Back to held messages, so that every step is at the same length.
				if _, err := s.w.Exec(`DELETE FROM messages WHERE thread_id = ? AND position >= ?`, th.ID, held); err != nil {
					b.Fatal(err)
				}
				if _, err := s.w.Exec(`UPDATE threads SET message_count = ?, message_bytes = ? WHERE id = ?`, held, held*len(out), th.ID); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
		b.Run(fmt.Sprintf("messages=%d/load", held), func(b *testing.B) {
			for b.Loop() {
				got, err := s.LoadThread(b.Context(), th.ID)
				if err != nil {
					b.Fatal(err)
				}
				if len(got.Messages) != held*(len(out)+1)+1 {
					b.Fatalf("%d bytes", len(got.Messages))
				}
			}
			b.ReportMetric(float64(held*len(out))/1e6, "MB")
		})
		s.Close()
	}
}
