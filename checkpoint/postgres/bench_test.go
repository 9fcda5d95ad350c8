package postgres

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/checkpointtest"
	"github.com/tollgate-ai/tollgate/checkpoint/internal/messages"
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

// walCounters are the cluster's WAL flushes (pg_stat_wal) and the
// database's commits (pg_stat_database), once every idle connection of
// the pool has flushed its statistics (a backend reports them when it goes
// idle, at most once a second unless told to).
func walCounters(b *testing.B, s *Store) (syncs, commits int64) {
	b.Helper()
	ctx := context.Background()
	for _, c := range s.pool.AcquireAllIdle(ctx) {
		if _, err := c.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
			b.Fatal(err)
		}
		c.Release()
	}
	if err := s.pool.QueryRow(ctx, `SELECT (SELECT wal_sync FROM pg_stat_wal), (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database())`).Scan(&syncs, &commits); err != nil {
		b.Fatal(err)
	}
	return syncs, commits
}

// BenchmarkCommit times a step's write, a Commit of a thread append (a
// message of about 1 KB) and an audit event, beside the raw single-row
// insert transaction of BenchmarkStore, on the throwaway cluster (fsync
// on; synchronous_commit on, and off), with 1 and 8 writers. Each iteration runs
// both, each writer doing perWriter of one then of the other (in turns
// first), so that both see the disk at the same moment. commit/s and raw/s
// are writes per second; x-raw is commit/s over raw/s; commits/flush and
// raw-commits/flush are writes per WAL flush (pg_stat_wal wal_sync: above
// 1, concurrent commits shared flushes).
//
//	go test -run '^$' -bench Commit ./checkpoint/postgres/
func BenchmarkCommit(b *testing.B) {
	// synchronous_commit off: what a commit costs but the flush (the CPU
	// and the round trips).
	for _, sync := range []string{"on", "off"} {
		dsn := pgtest.WithParams(pgtest.Start(b), "synchronous_commit", sync)
		s, err := Open(b.Context(), dsn, &Options{Schema: pgtest.Schema(b, dsn), MaxConns: 16})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		if _, err := s.pool.Exec(b.Context(), `CREATE TABLE bench_raw (id bigserial PRIMARY KEY, v text NOT NULL)`); err != nil {
			b.Fatal(err)
		}
		for _, writers := range []int{1, 8} {
			b.Run(fmt.Sprintf("sync=%s/writers=%d", sync, writers), func(b *testing.B) { benchCommit(b, s, writers) })
		}
	}
}

var benchRun atomic.Int64

func benchCommit(b *testing.B, s *Store, writers int) {
	const perWriter = 16
	raw := func(w, i int) error {
		_, err := s.pool.Exec(b.Context(), `INSERT INTO bench_raw (v) VALUES ($1)`, fmt.Sprint("row-", w, "-", i))
		return err
	}
	msg := json.RawMessage(`{"role":"assistant","tool_calls":[{"id":"call_1","name":"bash","arguments":{"cmd":"` + strings.Repeat("make -j8 all && ", 60) + `true"}}]}`)
	data := json.RawMessage(`{"call_id":"call_1","tool":"bash","decision":"ask","rule":"shell-write"}`)
	run := benchRun.Add(1)
	ths := make([]*checkpoint.Thread, writers)
	for w := range ths {
		ths[w] = &checkpoint.Thread{ID: fmt.Sprint("bench-", run, "-", w), Status: checkpoint.ThreadRunning, RunID: "run-1", Messages: json.RawMessage(`[]`)}
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
	var syncs [2]int64
	phase := func(which int, f func(w, i int) error) time.Duration {
		s0, _ := walCounters(b, s)
		b.StartTimer()
		start := time.Now()
		var wg sync.WaitGroup
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
		d := time.Since(start)
		b.StopTimer()
		s1, _ := walCounters(b, s)
		syncs[which] += s1 - s0
		return d
	}
	var tRaw, tOp time.Duration
	b.StopTimer()
	b.ResetTimer()
	for i := range b.N { // not b.Loop: the counters are read with the timer stopped
		if i%2 == 0 {
			tRaw += phase(0, raw)
			tOp += phase(1, step)
		} else {
			tOp += phase(1, step)
			tRaw += phase(0, raw)
		}
	}
	n := float64(b.N * writers * perWriter)
	b.ReportMetric(n/tOp.Seconds(), "commit/s")
	b.ReportMetric(n/tRaw.Seconds(), "raw/s")
	b.ReportMetric(tRaw.Seconds()/tOp.Seconds(), "x-raw")
	b.ReportMetric(float64(tOp.Nanoseconds())/n/1e3, "commit-µs")
	b.ReportMetric(float64(tRaw.Nanoseconds())/n/1e3, "raw-µs")
	b.ReportMetric(n/float64(syncs[1]), "commits/flush")
	b.ReportMetric(n/float64(syncs[0]), "raw-commits/flush")
}

// BenchmarkCycleWrites times the six commits of an approval cycle as
// agent/doc.go lists them (the prompt; the model's message with its call
// of ~1 KB of arguments, the question; the answer; the executing claim;
// the result; the end — each with its audit event), by 1 and 8 writers,
// each on threads of its own, on the throwaway cluster (fsync and
// synchronous_commit on), without the reads a run makes between them.
// commits/flush is commits per WAL flush (pg_stat_wal wal_sync): the
// question's two commits take the questions' lock (held to commit: their
// creation order is their commit order), the others take none.
//
//	go test -run '^$' -bench CycleWrites ./checkpoint/postgres/
func BenchmarkCycleWrites(b *testing.B) {
	dsn := pgtest.Start(b)
	s, err := Open(b.Context(), dsn, &Options{Schema: pgtest.Schema(b, dsn), MaxConns: 16})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for _, writers := range []int{1, 8} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			run := benchRun.Add(1)
			var next atomic.Int64
			s0, _ := walCounters(b, s)
			b.ResetTimer()
			var wg sync.WaitGroup
			for range writers {
				wg.Go(func() {
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							return
						}
						if err := cycleWrites(b.Context(), s, fmt.Sprint("cycle-", run, "-", i)); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			s1, _ := walCounters(b, s)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cycles/s")
			b.ReportMetric(float64(6*b.N)/float64(s1-s0), "commits/flush")
		})
	}
}

// cycleWrites makes the six commits of one approval cycle on thread id.
func cycleWrites(ctx context.Context, s *Store, id string) error {
	args := json.RawMessage(`{"cmd":"` + strings.Repeat("make -j8 all && ", 60) + `true"}`)
	ev := func(typ string) []*checkpoint.Event {
		return []*checkpoint.Event{{ThreadID: id, RunID: "run-1", Type: typ, Data: json.RawMessage(`{"call_id":"call_1"}`)}}
	}
	w := &checkpoint.ThreadWrite{ID: id, Status: checkpoint.ThreadRunning, RunID: "run-1",
		Append: []json.RawMessage{json.RawMessage(`{"role":"user","content":"build it"}`)}}
	grow := func(msgs ...string) *checkpoint.ThreadWrite {
		w = &checkpoint.ThreadWrite{ID: id, Version: w.Version, Status: checkpoint.ThreadRunning, RunID: "run-1"}
		for _, m := range msgs {
			w.Append = append(w.Append, json.RawMessage(m))
		}
		return w
	}
	call := &checkpoint.ToolCall{ThreadID: id, RunID: "run-1", CallID: "call_1", Tool: "bash", Args: args, State: checkpoint.ToolCallExecuting}
	for _, b := range []func() *checkpoint.Batch{
		func() *checkpoint.Batch { return &checkpoint.Batch{Thread: w, Events: ev("run_started")} },
		func() *checkpoint.Batch {
			return &checkpoint.Batch{Thread: grow(`{"role":"assistant","tool_calls":[{"id":"call_1","name":"bash","arguments":` + string(args) + `}]}`),
				Question: &checkpoint.Question{ThreadID: id, ID: "approve_call_1", RunID: "run-1", CallID: "call_1", Tool: "bash", Kind: "approve", Payload: args},
				Events:   ev("question_asked")}
		},
		func() *checkpoint.Batch {
			return checkpoint.ResolveBatch(&checkpoint.Question{ThreadID: id, ID: "approve_call_1", RunID: "run-1", CallID: "call_1", Kind: "approve"},
				checkpoint.Resolution{Status: checkpoint.QuestionAnswered, Answer: json.RawMessage(`{"decision":"approve"}`), By: "bench"})
		},
		func() *checkpoint.Batch {
			return &checkpoint.Batch{ToolCalls: []*checkpoint.ToolCall{call}, Events: ev("tool_started")}
		},
		func() *checkpoint.Batch {
			done := *call
			done.State, done.Result = checkpoint.ToolCallDone, json.RawMessage(`{"output":"ok","exit":0}`)
			return &checkpoint.Batch{Thread: grow(`{"role":"tool","call_id":"call_1","content":"ok"}`), ToolCalls: []*checkpoint.ToolCall{&done}, Events: ev("tool_result")}
		},
		func() *checkpoint.Batch {
			end := grow(`{"role":"assistant","content":"built"}`)
			end.Status = checkpoint.ThreadIdle
			return &checkpoint.Batch{Thread: end, Events: ev("run_finished")}
		},
	} {
		if _, err := s.Commit(ctx, b()); err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkLongThread times a step of a thread that holds 10 or 1,000
// messages of 4 KB (a tool's output), on the throwaway cluster (fsync and
// synchronous_commit on): its Commit (an append of one more and an event)
// with the WAL it writes (pg_current_wal_insert_lsn before and after),
// and LoadThread (the whole thread, one statement). The step writes what
// it adds, whatever the thread holds; the load reads the thread.
//
//	go test -run '^$' -bench LongThread ./checkpoint/postgres/
func BenchmarkLongThread(b *testing.B) {
	dsn := pgtest.Start(b)
	s, err := Open(b.Context(), dsn, &Options{Schema: pgtest.Schema(b, dsn)})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	out := json.RawMessage(`{"role":"tool","call_id":"call_1","content":"` + strings.Repeat("drwxr-xr-x 2 kim kim 4096 build\\n", 125) + `"}`)
	lsn := func() (n int64) {
		if err := s.pool.QueryRow(b.Context(), `SELECT pg_current_wal_insert_lsn() - '0/0'`).Scan(&n); err != nil {
			b.Fatal(err)
		}
		return n
	}
	for _, held := range []int{10, 1000} {
		msgs := make([]json.RawMessage, held)
		for i := range msgs {
			msgs[i] = out
		}
		th := &checkpoint.Thread{ID: fmt.Sprint("long-", held), Status: checkpoint.ThreadRunning, RunID: "run-1", Messages: messages.Join(msgs)}
		if err := s.CreateThread(b.Context(), th); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("messages=%d/append", held), func(b *testing.B) {
			var wal int64
			for b.Loop() {
				b.StopTimer()
				before := lsn()
				b.StartTimer()
				tw := &checkpoint.ThreadWrite{ID: th.ID, Version: th.Version, Status: th.Status, RunID: th.RunID, Append: []json.RawMessage{out}}
				if _, err := s.Commit(b.Context(), &checkpoint.Batch{Thread: tw, Events: []*checkpoint.Event{{ThreadID: th.ID, Type: "tool_result"}}}); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				wal += lsn() - before
				th.Version = tw.Version
				// Back to held messages, so that every step is at the same length.
				if _, err := s.pool.Exec(b.Context(), `DELETE FROM messages WHERE thread_id = $1 AND position >= $2`, th.ID, held); err != nil {
					b.Fatal(err)
				}
				if _, err := s.pool.Exec(b.Context(), `UPDATE threads SET message_count = $2, message_bytes = $3 WHERE id = $1`, th.ID, held, held*len(out)); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(wal)/float64(b.N), "wal-B/op")
			b.ReportMetric(float64(len(out)), "message-B")
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
	}
}
