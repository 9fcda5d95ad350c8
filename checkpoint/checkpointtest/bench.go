package checkpointtest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// Benchmark times a store's hot writes, each beside rawTx: the cheapest
// durable write the store's database can do (a single-row insert
// transaction, in the same database, with the same durability settings).
// Each iteration runs both, in turns first, so that both see the disk at
// the same moment (fsync latency on a shared machine drifts by 2x within a
// minute). The figures are op-µs, raw-µs, their ratio x-raw and op/s;
// ns/op counts both and any setup. raw_vs_raw pairs the raw transaction
// with itself: the noise floor of x-raw.
//
// Sub-benchmarks: question_create, question_answer, thread_save,
// toolcall_put, and thread_step (save the thread with the assistant's tool
// call, put the call executing, put it done: three writes, against one raw
// transaction).
func Benchmark(b *testing.B, s checkpoint.Store, rawTx func(ctx context.Context, i int) error) {
	raw := func(b *testing.B, i int) {
		if err := rawTx(b.Context(), i); err != nil {
			b.Fatal(err)
		}
	}
	payload := json.RawMessage(`{"tool":"bash","args":{"cmd":"rm -rf ./build && make"},"rule":"shell-write"}`)
	run := 0

	b.Run("raw_vs_raw", func(b *testing.B) { paired(b, nil, raw, raw) })

	b.Run("question_create", func(b *testing.B) {
		run++
		paired(b, nil, raw, func(b *testing.B, i int) {
			q := &checkpoint.Question{ThreadID: fmt.Sprint("t", run), ID: fmt.Sprint("approve_", i), Kind: "approve", Payload: payload, Deadline: time.Now().Add(time.Hour)}
			if _, _, err := s.CreateQuestion(b.Context(), q); err != nil {
				b.Fatal(err)
			}
		})
	})

	b.Run("question_answer", func(b *testing.B) {
		run++
		thread := fmt.Sprint("a", run)
		create := func(b *testing.B, i int) {
			if _, _, err := s.CreateQuestion(b.Context(), &checkpoint.Question{ThreadID: thread, ID: fmt.Sprint("approve_", i), Kind: "approve", Payload: payload}); err != nil {
				b.Fatal(err)
			}
		}
		paired(b, create, raw, func(b *testing.B, i int) {
			_, err := s.ResolveQuestion(b.Context(), thread, fmt.Sprint("approve_", i), checkpoint.Resolution{
				Status: checkpoint.QuestionAnswered, Answer: json.RawMessage(`{"decision":"approve"}`), By: "alice"})
			if err != nil {
				b.Fatal(err)
			}
		})
	})

	b.Run("thread_save", func(b *testing.B) {
		run++
		th := &checkpoint.Thread{ID: fmt.Sprint("save", run), Status: checkpoint.ThreadRunning, RunID: "r", Messages: json.RawMessage(`[]`)}
		if err := s.CreateThread(b.Context(), th); err != nil {
			b.Fatal(err)
		}
		paired(b, nil, raw, func(b *testing.B, i int) {
			if err := s.SaveThread(b.Context(), th); err != nil {
				b.Fatal(err)
			}
		})
	})

	b.Run("toolcall_put", func(b *testing.B) {
		run++
		paired(b, nil, raw, func(b *testing.B, i int) {
			tc := &checkpoint.ToolCall{ThreadID: fmt.Sprint("put", run), RunID: "r", CallID: fmt.Sprint("c", i), Tool: "bash", Args: json.RawMessage(`{"cmd":"make"}`), State: checkpoint.ToolCallExecuting}
			if err := s.PutToolCall(b.Context(), tc); err != nil {
				b.Fatal(err)
			}
		})
	})

	b.Run("thread_step", func(b *testing.B) {
		run++
		th := &checkpoint.Thread{ID: fmt.Sprint("step", run), Status: checkpoint.ThreadRunning, RunID: "r", Messages: json.RawMessage(`[]`)}
		if err := s.CreateThread(b.Context(), th); err != nil {
			b.Fatal(err)
		}
		msgs := json.RawMessage(`[{"role":"user","content":"build it"},{"role":"assistant","tool_calls":[{"id":"c1","name":"bash","args":{"cmd":"make"}}]}]`)
		paired(b, nil, raw, func(b *testing.B, i int) {
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
		})
	})
}

// paired runs raw and op once per iteration, in turns first (whichever
// runs second may find caches warm), after an untimed setup if not nil,
// and reports both.
func paired(b *testing.B, setup, raw, op func(b *testing.B, i int)) {
	var tRaw, tOp time.Duration
	timed := func(f func(*testing.B, int), i int) time.Duration {
		t0 := time.Now()
		f(b, i)
		return time.Since(t0)
	}
	for i := 0; b.Loop(); i++ {
		if setup != nil {
			setup(b, i)
		}
		if i%2 == 0 {
			tRaw += timed(raw, i)
			tOp += timed(op, i)
		} else {
			tOp += timed(op, i)
			tRaw += timed(raw, i)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(tOp.Nanoseconds())/n/1e3, "op-µs")
	b.ReportMetric(float64(tRaw.Nanoseconds())/n/1e3, "raw-µs")
	b.ReportMetric(float64(tOp)/float64(tRaw), "x-raw")
	b.ReportMetric(n/tOp.Seconds(), "op/s")
}
