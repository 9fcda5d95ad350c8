package sqlite

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// BenchmarkStore times the store's hot writes beside the cheapest durable
// write the same database can do: one single-row insert transaction on the
// same writer connection with the same settings. x-raw is each operation's
// time divided by the raw transaction's (from the raw sub-benchmark, which
// runs first).
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
	var raw float64 // ns per raw transaction
	ratio := func(b *testing.B) {
		if raw > 0 {
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/raw, "x-raw")
		}
	}
	payload := json.RawMessage(`{"tool":"bash","args":{"cmd":"rm -rf ./build && make"},"rule":"shell-write"}`)
	run := 0

	b.Run("raw_insert_tx", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			tx, err := s.w.BeginTx(b.Context(), nil)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := tx.Exec(`INSERT INTO bench_raw (v) VALUES (?)`, fmt.Sprint("row-", i)); err != nil {
				b.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
		}
		raw = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
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
		n := 0
		create := func() {
			if _, _, err := s.CreateQuestion(b.Context(), &checkpoint.Question{ThreadID: thread, ID: fmt.Sprint("approve_", n), Kind: "approve", Payload: payload}); err != nil {
				b.Fatal(err)
			}
			n++
		}
		i := 0
		for b.Loop() {
			b.StopTimer()
			for n <= i {
				create()
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
