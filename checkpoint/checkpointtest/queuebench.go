package checkpointtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// Queue sizes of [BenchmarkQueue].
const (
	benchPending = 100_000
	benchThreads = 10_000
)

var benchTools = []string{"bash", "edit_file", "http_request", "deploy", "send_email"}

// BenchmarkQueue times the reviewers' queue on a store that holds 100,000
// pending questions (over 10,000 threads, a third with a deadline, five
// tools), each beside rawRead: the cheapest read the store's database can
// do (SELECT 1 on the same connection pool), in turns first as [Benchmark]
// does. s must be empty; it is filled once, through the Store interface,
// with writers in parallel (fill-s reports how long it took, so a store
// opened for the benchmark may well skip waiting for the disk). Then
// settle, if not nil, does what the database would soon do by itself
// after such a fill (PostgreSQL: ANALYZE, which autovacuum runs after a
// bulk change; without statistics its planner may sort a deep page of the
// deadline order instead of reading its index range).
//
// Sub-benchmarks: raw_vs_raw, the first page (Limit 50) of the pending
// questions oldest_first, newest_first, deadline_first, by_tool (oldest
// first) and by_tool_deadline_first; deadline_first_deep, a page from a
// cursor half-way down the list; count_pending and count_by_tool.
//
// Before timing, it pages through the whole deadline order (Limit 1000)
// and checks that every pending question comes exactly once, in order.
func BenchmarkQueue(b *testing.B, s checkpoint.Store, rawRead, settle func(ctx context.Context) error) {
	raw := func(b *testing.B, _ int) {
		if err := rawRead(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
	start := time.Now()
	fillQueue(b, s)
	fill := time.Since(start)
	if settle != nil {
		if err := settle(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
	deep := walkQueue(b, s)

	b.Run("raw_vs_raw", func(b *testing.B) { paired(b, nil, raw, raw) })
	list := func(f checkpoint.QuestionFilter) func(b *testing.B, _ int) {
		f.Status, f.Limit = checkpoint.QuestionPending, 50
		return func(b *testing.B, _ int) {
			qs, next, err := s.ListQuestions(b.Context(), f)
			if err != nil || len(qs) != 50 || next == "" {
				b.Fatalf("ListQuestions(%+v) = %d questions, cursor %q, %v", f, len(qs), next, err)
			}
		}
	}
	count := func(f checkpoint.QuestionFilter, want int64) func(b *testing.B, _ int) {
		return func(b *testing.B, _ int) {
			if n, err := s.CountQuestions(b.Context(), f); err != nil || n != want {
				b.Fatalf("CountQuestions(%+v) = %d, %v; want %d", f, n, err, want)
			}
		}
	}
	for _, c := range []struct {
		name string
		op   func(b *testing.B, _ int)
	}{
		{"oldest_first", list(checkpoint.QuestionFilter{})},
		{"newest_first", list(checkpoint.QuestionFilter{Order: checkpoint.NewestFirst})},
		{"deadline_first", list(checkpoint.QuestionFilter{Order: checkpoint.DeadlineFirst})},
		{"deadline_first_deep", list(checkpoint.QuestionFilter{Order: checkpoint.DeadlineFirst, After: deep})},
		{"by_tool", list(checkpoint.QuestionFilter{Tool: benchTools[3]})},
		{"by_tool_deadline_first", list(checkpoint.QuestionFilter{Tool: benchTools[3], Order: checkpoint.DeadlineFirst})},
		{"count_pending", count(checkpoint.QuestionFilter{Status: checkpoint.QuestionPending}, benchPending)},
		{"count_by_tool", count(checkpoint.QuestionFilter{Status: checkpoint.QuestionPending, Tool: benchTools[3]}, benchPending/int64(len(benchTools)))},
	} {
		b.Run(c.name, func(b *testing.B) {
			paired(b, nil, raw, c.op)
			b.ReportMetric(fill.Seconds(), "fill-s")
		})
	}
}

// fillQueue creates the benchmark's questions, eight writers at a time.
func fillQueue(b *testing.B, s checkpoint.Store) {
	now := time.Now()
	payload := []byte(`{"tool_name":"bash","args":{"cmd":"rm -rf ./build && make"},"rule":"shell-write"}`)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for i := w; i < benchPending; i += 8 {
				q := &checkpoint.Question{
					ThreadID: fmt.Sprintf("thread-%05d", i%benchThreads), ID: fmt.Sprintf("approve_call-%06d", i),
					RunID: "run-1", CallID: fmt.Sprintf("call-%06d", i), Tool: benchTools[i%len(benchTools)],
					Kind: "approve", Payload: payload, Digest: "sha256:0123456789abcdef",
				}
				if i%3 == 0 {
					// Whole minutes: many questions share a deadline.
					q.Deadline = now.Add(time.Duration(1+rng.IntN(24*60)) * time.Minute).Truncate(time.Minute)
				}
				if _, _, err := s.CreateQuestion(context.Background(), q); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatalf("fill: %v", err)
	}
}

// walkQueue pages through the pending questions in deadline order and
// returns the cursor half-way.
func walkQueue(b *testing.B, s checkpoint.Store) (middle string) {
	f := checkpoint.QuestionFilter{Status: checkpoint.QuestionPending, Order: checkpoint.DeadlineFirst, Limit: 1000}
	seen := make(map[string]bool, benchPending)
	var prev *checkpoint.Question
	for {
		qs, next, err := s.ListQuestions(b.Context(), f)
		if err != nil {
			b.Fatalf("walk: %v", err)
		}
		for _, q := range qs {
			key := q.ThreadID + "/" + q.ID
			if seen[key] {
				b.Fatalf("walk: %s twice", key)
			}
			seen[key] = true
			// Deadlines never go back, and none comes after "none".
			if prev != nil && !q.Deadline.IsZero() && (prev.Deadline.IsZero() || q.Deadline.Before(prev.Deadline)) {
				b.Fatalf("walk: %s (due %v) after %s/%s (due %v)", key, q.Deadline, prev.ThreadID, prev.ID, prev.Deadline)
			}
			prev = q
		}
		if len(seen) == benchPending/2 {
			middle = next
		}
		if next == "" {
			break
		}
		f.After = next
	}
	if len(seen) != benchPending || middle == "" {
		b.Fatalf("walk: %d questions, want %d", len(seen), benchPending)
	}
	return middle
}
