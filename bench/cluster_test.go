//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/internal/pgtest"
)

// TestClusterShort runs go run ./bench cluster -short so that the
// benchmark cannot rot: in-process replicas for the latency and the
// cycles, tollgate serve replicas (built from this checkout) for the
// memory and the idle cost. It checks that every answer led to its tool on the replica
// meant to run it, that every cycle and every answered run finished, and
// that each figure was taken, never timings.
func TestClusterShort(t *testing.T) {
	dsn := pgtest.Start(t)
	var out, errb bytes.Buffer
	if err := run(t.Context(), []string{"cluster", "-short", "-q", "-json", "-store", dsn}, &out, &errb); err != nil {
		t.Fatalf("bench cluster -short: %v\n%s", err, errb.String())
	}
	var rep clusterReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("output is not the report: %v\n%s", err, out.String())
	}
	o := rep.Options

	l := rep.Latency
	if l == nil {
		t.Fatal("no latency figures")
	}
	if len(l.Series) != 3 {
		t.Errorf("%d latency series, want 3 (one at a time on B, a burst on B, one at a time on A)", len(l.Series))
	}
	for _, s := range l.Series {
		if s.Samples < o.Latency || s.FromReturn.N != s.Samples || s.FromCall.N != s.Samples {
			t.Errorf("%s: %d samples (%d and %d measured), want at least %d", s.Name, s.Samples, s.FromReturn.N, s.FromCall.N, o.Latency)
		}
		if s.NotOnA != 0 || s.NoFetch != 0 {
			t.Errorf("%s: %d tools ran elsewhere than on A, %d answers' jobs never fetched", s.Name, s.NotOnA, s.NoFetch)
		}
	}
	if len(l.RawSeq) != o.Rounds || l.RawSeqPerS <= 0 {
		t.Errorf("latency: raw rounds %+v", l.RawSeq)
	}

	if len(rep.Cycles) != 3*len(o.Loops) {
		t.Fatalf("%d cycles results, want a host alone, one and %d replicas for each of %v loops", len(rep.Cycles), o.Replicas, o.Loops)
	}
	for _, c := range rep.Cycles {
		if len(c.Rounds) != o.Rounds || len(c.RawSeq) != o.Rounds || len(c.RawConc) != o.Rounds {
			t.Errorf("%d loops on %d replicas: %d rounds, %d and %d raw rounds, want %d", c.Loops, c.Replicas, len(c.Rounds), len(c.RawSeq), len(c.RawConc), o.Rounds)
		}
		for i, r := range c.Rounds {
			if r.Cycles != o.N || len(r.Prompts) != c.Replicas || len(r.ToolRuns) != c.Replicas {
				t.Errorf("%d loops on %d replicas, round %d: %d cycles, prompts %v, tools %v", c.Loops, c.Replicas, i, r.Cycles, r.Prompts, r.ToolRuns)
			}
			var prompts, answers, tools int64
			for k := range r.Prompts {
				prompts, answers, tools = prompts+r.Prompts[k], answers+r.Answers[k], tools+r.ToolRuns[k]
			}
			if prompts != int64(r.Cycles) || answers != int64(r.Cycles) || tools != int64(r.Cycles) {
				t.Errorf("%d loops on %d replicas, round %d: %d prompts, %d answers, %d tool runs for %d cycles", c.Loops, c.Replicas, i, prompts, answers, tools, r.Cycles)
			}
			if !c.Alone && len(r.Clusters) != c.Replicas {
				t.Errorf("%d loops on %d replicas, round %d: %d clusters' stats", c.Loops, c.Replicas, i, len(r.Clusters))
			}
			if r.Dropped != 0 || r.CPU <= 0 || r.XactCommit <= 0 || r.Cycle.N != r.Cycles {
				t.Errorf("%d loops on %d replicas, round %d: %d events dropped, CPU %v, %d commits, %d cycle times", c.Loops, c.Replicas, i, r.Dropped, r.CPU, r.XactCommit, r.Cycle.N)
			}
		}
		if c.CyclesPerS <= 0 || (c.Replicas > 1 || c.Alone) && c.VsOne <= 0 {
			t.Errorf("%d loops on %d replicas: %v cycles/s, %v of one replica's", c.Loops, c.Replicas, c.CyclesPerS, c.VsOne)
		}
	}

	m := rep.Memory
	if m == nil {
		t.Fatal("no memory figures")
	}
	if len(m.Start) != o.Replicas || len(m.After) != o.Replicas || m.Idle.RSSKB <= 0 || m.IdleAfterCycle.RSSKB <= 0 {
		t.Errorf("memory: %d and %d replicas measured, idle %+v", len(m.Start), len(m.After), m.Idle)
	}
	for _, p := range append(append([]procMem(nil), m.Start...), m.After...) {
		if p.RSSKB <= 0 || p.HWMKB < p.RSSKB || p.Goroutines <= 0 {
			t.Errorf("memory, replica %d: %+v", p.Replica, p)
		}
	}
	if m.Answered != o.Answers || m.Finished != int64(o.Answers) || m.ToolResults != int64(o.Answers) {
		t.Errorf("memory: %d answered, %d finished, %d tool results, want %d", m.Answered, m.Finished, m.ToolResults, o.Answers)
	}
	if m.DeadlineJobs != 0 || m.SchemaBytes <= m.SchemaBytesBefore || m.SeedPerS <= 0 || m.RawSeed.PerSecond <= 0 || m.Healthz.N == 0 || m.Queue.N == 0 {
		t.Errorf("memory: %d deadline jobs for %d parked runs (want none), schema %d → %d bytes, %v seeded/s, %d healthz", m.DeadlineJobs, o.Parked, m.SchemaBytesBefore, m.SchemaBytes, m.SeedPerS, m.Healthz.N)
	}

	if i := rep.Idle; i == nil || i.Replicas != o.Replicas || i.Seconds <= 0 || i.Transactions <= 0 || i.PerReplica < 0 {
		t.Errorf("idle: %+v, want the replicas' transactions counted", i)
	}

	var text bytes.Buffer
	rep.print(&text)
	for _, want := range []string{"Latency", "raw limit", "Cycles", "vs one", "Memory", "VmRSS", "seeding", "Idle", "per replica"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the tables have no %q", want)
		}
	}
	if t.Failed() {
		t.Logf("tables:\n%s", text.String())
	}
}
