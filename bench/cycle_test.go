//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/internal/pgtest"
	"github.com/tollgate-ai/tollgate/tools/bash"
)

func TestMain(m *testing.M) {
	bash.MaybeRunHelper() // TestSandboxShort
	pgtest.Main(m)
}

// TestCycleShort runs go run ./bench cycle -short on every store so that
// the benchmark cannot rot. It checks that the output makes sense — every
// cycle finished, its tool ran once, commits were counted — never timings.
func TestCycleShort(t *testing.T) {
	stores := []struct {
		name string
		spec func(t *testing.T) string
	}{
		{"memory", func(t *testing.T) string { return "memory" }},
		{"sqlite", func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "bench.db") }},
		{"postgres", func(t *testing.T) string { return pgtest.Start(t) }},
	}
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			spec := s.spec(t)
			var out, errb bytes.Buffer
			if err := run(t.Context(), []string{"cycle", "-short", "-q", "-json", "-store", spec}, &out, &errb); err != nil {
				t.Fatalf("bench cycle -short -store %s: %v\n%s", s.name, err, errb.String())
			}
			var rep report
			if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
				t.Fatalf("output is not the report: %v\n%s", err, out.String())
			}
			checkReport(t, s.name, &rep)
			var text bytes.Buffer
			rep.print(&text)
			for _, want := range []string{"cycles/s", "ratio", "turn", "parked"} {
				if !strings.Contains(text.String(), want) {
					t.Errorf("the table has no %q:\n%s", want, text.String())
				}
			}
			if t.Failed() {
				t.Logf("table:\n%s", text.String())
			}
		})
	}
}

func checkReport(t *testing.T, kind string, rep *report) {
	t.Helper()
	if len(rep.Results) != 2 {
		t.Fatalf("%d results, want one per loop count of -short (1 and 4)", len(rep.Results))
	}
	for _, l := range rep.Results {
		if len(l.Rounds) != rep.Options.Rounds {
			t.Errorf("%d loops: %d rounds, want %d", l.Loops, len(l.Rounds), rep.Options.Rounds)
		}
		for i, r := range l.Rounds {
			if r.Cycles != rep.Options.N {
				t.Errorf("%d loops, round %d: %d cycles finished, want %d", l.Loops, i, r.Cycles, rep.Options.N)
			}
			if r.ToolRuns != int64(r.Cycles) {
				t.Errorf("%d loops, round %d: the tool ran %d times in %d cycles", l.Loops, i, r.ToolRuns, r.Cycles)
			}
			if r.Dropped != 0 {
				t.Errorf("%d loops, round %d: %d events dropped", l.Loops, i, r.Dropped)
			}
			if r.Writes < int64(r.Cycles) || r.Reads == 0 {
				t.Errorf("%d loops, round %d: %d writes and %d reads counted for %d cycles", l.Loops, i, r.Writes, r.Reads, r.Cycles)
			}
			if r.ByMethod["Commit"]+r.ByMethod["CreateThread"] < int64(r.Cycles) {
				t.Errorf("%d loops, round %d: store calls %v do not create a thread per cycle", l.Loops, i, r.ByMethod)
			}
			if r.CPU <= 0 || r.Mallocs == 0 || r.CycleP50 <= 0 {
				t.Errorf("%d loops, round %d: CPU %v, %d allocations, cycle p50 %v", l.Loops, i, r.CPU, r.Mallocs, r.CycleP50)
			}
		}
		if l.CyclesPerS <= 0 {
			t.Errorf("%d loops: %v cycles/s", l.Loops, l.CyclesPerS)
		}
		if kind == "memory" {
			continue
		}
		if l.CommitsPerCyc < 1 {
			t.Errorf("%d loops: %.2f commits per cycle (%s)", l.Loops, l.CommitsPerCyc, l.CommitsFrom)
		}
		if len(l.RawSeq) != rep.Options.Rounds || len(l.RawConc) != rep.Options.Rounds {
			t.Errorf("%d loops: %d and %d raw rounds, want %d", l.Loops, len(l.RawSeq), len(l.RawConc), rep.Options.Rounds)
		}
		for _, r := range append(append([]rawResult(nil), l.RawSeq...), l.RawConc...) {
			if r.Commits <= 0 || r.PerSecond <= 0 {
				t.Errorf("%d loops: raw round %+v", l.Loops, r)
			}
		}
		if l.Ratio <= 0 {
			t.Errorf("%d loops: ratio %v", l.Loops, l.Ratio)
		}
		if kind == "postgres" && (l.XactPerCyc < l.CommitsPerCyc || l.WALBytesCyc <= 0) {
			t.Errorf("%d loops: %.2f xact_commit and %.0f WAL bytes per cycle for %.2f write transactions", l.Loops, l.XactPerCyc, l.WALBytesCyc, l.CommitsPerCyc)
		}
		// A commit is at least one round trip, and a round trip carries a
		// statement at least (a prepare carries none).
		if kind == "postgres" && (l.TripsPerCyc < l.CommitsPerCyc || l.StmtsPerCyc < l.CommitsPerCyc) {
			t.Errorf("%d loops: %.2f statements and %.2f round trips per cycle for %.2f write transactions", l.Loops, l.StmtsPerCyc, l.TripsPerCyc, l.CommitsPerCyc)
		}
	}
	if len(rep.Turns) != 1 {
		t.Fatalf("%d thread-turns results, want 1", len(rep.Turns))
	}
	tr := rep.Turns[0]
	if tr.Turns != rep.Options.ThreadTurns || len(tr.Marks) == 0 || tr.ThreadBytes < tr.Turns*tr.ResultBytes {
		t.Errorf("thread-turns: %d turns, marks %v, a thread of %d bytes", tr.Turns, tr.Marks, tr.ThreadBytes)
	}
	for _, m := range tr.Marks {
		if m.StepTime <= 0 || m.Content < float64(tr.ResultBytes) {
			t.Errorf("thread-turns, turn %d: step %v, content %.0f bytes", m.Turn, m.StepTime, m.Content)
		}
		if kind != "memory" && m.Written <= 0 {
			t.Errorf("thread-turns, turn %d: %.0f bytes written per step (%s)", m.Turn, m.Written, tr.WrittenBy)
		}
	}
	if len(rep.Parked) != 1 || rep.Parked[0].Parked != rep.Options.Parked || rep.Parked[0].RSSAfterKB <= 0 {
		t.Errorf("parked: %+v", rep.Parked)
	}
}

// Every method of the counting store counts under its own name, as a
// write or as a read.
func TestCountingStore(t *testing.T) {
	ctx := t.Context()
	s := newCountingStore(memory.New())
	th := &checkpoint.Thread{ID: "t", Status: checkpoint.ThreadIdle, Messages: json.RawMessage(`[]`)}
	_ = s.CreateThread(ctx, th)
	_, _ = s.LoadThread(ctx, "t")
	_ = s.SaveThread(ctx, th)
	_, _, _ = s.ListThreads(ctx, checkpoint.ThreadFilter{})
	_, _ = s.Commit(ctx, &checkpoint.Batch{})
	_ = s.PutToolCall(ctx, &checkpoint.ToolCall{ThreadID: "t", RunID: "r", CallID: "c", Tool: "x", Args: json.RawMessage(`{}`), State: checkpoint.ToolCallExecuting})
	_, _ = s.ListToolCalls(ctx, "t", "r")
	_, _, _ = s.CreateQuestion(ctx, &checkpoint.Question{ThreadID: "t", ID: "q", Kind: "approve", Payload: json.RawMessage(`{}`)})
	_, _ = s.GetQuestion(ctx, "t", "q")
	_, _, _ = s.ListQuestions(ctx, checkpoint.QuestionFilter{})
	_, _ = s.CountQuestions(ctx, checkpoint.QuestionFilter{})
	_, _ = s.ResolveQuestion(ctx, "t", "q", checkpoint.Resolution{Status: checkpoint.QuestionAborted})
	_, _ = s.AppendEvent(ctx, &checkpoint.Event{ThreadID: "t", Type: "x", Data: json.RawMessage(`{}`)})
	_, _ = s.ListEvents(ctx, "t", 0, 10)
	got := s.snapshot()
	// A method the Store interface gains must be counted too.
	st := reflect.TypeFor[checkpoint.Store]()
	for i := range st.NumMethod() {
		if m := st.Method(i).Name; m != "Subscribe" && m != "Close" {
			if _, ok := got[m]; !ok {
				t.Errorf("checkpoint.Store.%s is not counted", m)
			}
		}
	}
	for m, n := range got {
		if n != 1 {
			t.Errorf("%s counted %d times, want 1", m, n)
		}
	}
}
