package postgres

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/internal/pgtest"
)

// BenchmarkStore times the store's hot writes beside the cheapest durable
// write the same database can do: a single-row INSERT committed on its own
// (one round trip, one WAL flush), on the same pool and schema, with
// synchronous_commit on. raw_insert_tx_explicit is the same in
// BEGIN/INSERT/COMMIT. x-raw is each operation's time divided by the raw
// autocommit insert's (which runs first).
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
	var raw float64
	ratio := func(b *testing.B) {
		if raw > 0 {
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/raw, "x-raw")
		}
	}
	payload := json.RawMessage(`{"tool":"bash","args":{"cmd":"rm -rf ./build && make"},"rule":"shell-write"}`)
	run := 0

	b.Run("raw_insert", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, err := s.pool.Exec(b.Context(), `INSERT INTO bench_raw (v) VALUES ($1)`, fmt.Sprint("row-", i)); err != nil {
				b.Fatal(err)
			}
		}
		raw = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})

	b.Run("raw_insert_tx_explicit", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			tx, err := s.pool.Begin(b.Context())
			if err != nil {
				b.Fatal(err)
			}
			if _, err := tx.Exec(b.Context(), `INSERT INTO bench_raw (v) VALUES ($1)`, fmt.Sprint("row-", i)); err != nil {
				b.Fatal(err)
			}
			if err := tx.Commit(b.Context()); err != nil {
				b.Fatal(err)
			}
		}
		ratio(b)
	})

	b.Run("question_create", func(b *testing.B) {
		run++
		for i := 0; b.Loop(); i++ {
			q := &checkpoint.Question{ThreadID: fmt.Sprint("t", run), ID: fmt.Sprint("approve_", i), Kind: "approve", Payload: payload, Deadline: time.Now().Add(time.Hour)}
			if _, _, err := s.CreateQuestion(b.Context(), q); err != nil {
				b.Fatal(err)
			}
		}
		ratio(b)
	})

	b.Run("question_answer", func(b *testing.B) {
		run++
		thread := fmt.Sprint("a", run)
		n, i := 0, 0
		for b.Loop() {
			b.StopTimer()
			for ; n <= i; n++ {
				if _, _, err := s.CreateQuestion(b.Context(), &checkpoint.Question{ThreadID: thread, ID: fmt.Sprint("approve_", n), Kind: "approve", Payload: payload}); err != nil {
					b.Fatal(err)
				}
			}
			b.StartTimer()
			_, err := s.ResolveQuestion(b.Context(), thread, fmt.Sprint("approve_", i), checkpoint.Resolution{
				Status: checkpoint.QuestionAnswered, Answer: json.RawMessage(`{"decision":"approve"}`), By: "alice"})
			if err != nil {
				b.Fatal(err)
			}
			i++
		}
		ratio(b)
	})

	b.Run("thread_step", func(b *testing.B) {
		run++
		th := &checkpoint.Thread{ID: fmt.Sprint("step", run), Status: checkpoint.ThreadRunning, RunID: "r", Messages: json.RawMessage(`[]`)}
		if err := s.CreateThread(b.Context(), th); err != nil {
			b.Fatal(err)
		}
		msgs := json.RawMessage(`[{"role":"user","content":"build it"},{"role":"assistant","tool_calls":[{"id":"c1","name":"bash","args":{"cmd":"make"}}]}]`)
		for i := 0; b.Loop(); i++ {
			th.Messages = msgs
			if err := s.SaveThread(b.Context(), th); err != nil {
				b.Fatal(err)
			}
			tc := &checkpoint.ToolCall{ThreadID: th.ID, RunID: "r", CallID: fmt.Sprint("c", i), Tool: "bash", Args: json.RawMessage(`{"cmd":"make"}`), State: checkpoint.ToolCallExecuting}
			if err := s.PutToolCall(b.Context(), tc); err != nil {
				b.Fatal(err)
			}
			tc.State, tc.Result = checkpoint.ToolCallDone, json.RawMessage(`{"output":"ok"}`)
			if err := s.PutToolCall(b.Context(), tc); err != nil {
				b.Fatal(err)
			}
		}
		ratio(b)
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
