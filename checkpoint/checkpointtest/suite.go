package checkpointtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// NewStore returns a fresh, empty store for one subtest. The suite closes it
// when the subtest ends (Close must therefore tolerate being called twice
// if the factory registers its own Close too); anything else the store
// needs cleaned up (a temporary file, a schema) the factory registers with
// t.Cleanup.
type NewStore func(t *testing.T) checkpoint.Store

// OpenShared returns two handles on the same fresh, empty data, as two
// processes would hold them: two stores on one SQLite file, or two pools on
// one PostgreSQL schema. The suite closes both.
type OpenShared func(t *testing.T) (a, b checkpoint.Store)

// waitLimit bounds every wait for something asynchronous (a notification, a
// goroutine). It is a guard against hanging, never a timed assertion.
const waitLimit = 20 * time.Second

// Run runs the whole conformance suite; every leaf test gets its own store
// from newStore and runs in parallel with the others.
func Run(t *testing.T, newStore NewStore) {
	t.Helper()
	setup := func(t *testing.T) checkpoint.Store {
		t.Helper()
		t.Parallel()
		s := newStore(t)
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		return s
	}
	t.Run("Threads", func(t *testing.T) { testThreads(t, setup) })
	t.Run("ThreadList", func(t *testing.T) { testListThreads(t, setup); testListThreadsFiltered(t, setup) })
	t.Run("ToolCalls", func(t *testing.T) { testToolCalls(t, setup) })
	t.Run("Questions", func(t *testing.T) { testQuestions(t, setup) })
	t.Run("Queue", func(t *testing.T) { testQueue(t, setup) })
	t.Run("Events", func(t *testing.T) { testEvents(t, setup) })
	t.Run("Batches", func(t *testing.T) { testBatches(t, setup) })
	t.Run("Times", func(t *testing.T) { testTimes(t, setup) })
	t.Run("JSON", func(t *testing.T) { testJSON(t, setup) })
	t.Run("Notifications", func(t *testing.T) { testNotifications(t, setup) })
	t.Run("Concurrency", func(t *testing.T) { testConcurrency(t, setup) })
	t.Run("Rules", func(t *testing.T) { testRules(t, setup) })
}

// RunShared runs the tests that need two handles on the same data: what one
// writes the other reads, compare-and-set holds across them, and a
// subscriber on one sees the questions the other creates and resolves.
func RunShared(t *testing.T, open OpenShared) {
	t.Helper()
	setup := func(t *testing.T) (checkpoint.Store, checkpoint.Store) {
		t.Helper()
		t.Parallel()
		a, b := open(t)
		t.Cleanup(func() {
			if err := a.Close(); err != nil {
				t.Errorf("Close a: %v", err)
			}
			if err := b.Close(); err != nil {
				t.Errorf("Close b: %v", err)
			}
		})
		return a, b
	}
	testShared(t, setup)
	testSharedRules(t, setup)
}

type setupFunc func(t *testing.T) checkpoint.Store

// t0 is a fixed, microsecond-aligned instant far from now, so that tests
// with explicit times never depend on the wall clock.
var t0 = time.Date(2031, 3, 4, 5, 6, 7, 123456000, time.UTC)

var uniq atomic.Int64

// id returns a name unique within the test binary, so that leftovers of one
// test never satisfy another.
func id(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, uniq.Add(1))
}

func sameTime(a, b time.Time) bool {
	if a.IsZero() || b.IsZero() {
		return a.IsZero() && b.IsZero()
	}
	return a.Truncate(time.Microsecond).Equal(b.Truncate(time.Microsecond))
}

func checkTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if !sameTime(got, want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// recent reports whether tm is within a minute of the wall clock: how the
// suite checks a time the store filled in.
func recent(tm time.Time) bool {
	d := time.Since(tm)
	return d > -time.Minute && d < time.Minute
}

func checkJSON(t *testing.T, what string, got, want json.RawMessage) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Errorf("%s = %q, want %q (byte for byte)", what, clip(got), clip(want))
	}
}

// clip shortens b for a message.
func clip(b []byte) string {
	if len(b) > 300 {
		return fmt.Sprintf("%s... (%d bytes)", b[:300], len(b))
	}
	return string(b)
}

func ctx(t *testing.T) context.Context { return t.Context() }

func mustCreateThread(t *testing.T, s checkpoint.Store, th *checkpoint.Thread) *checkpoint.Thread {
	t.Helper()
	if err := s.CreateThread(ctx(t), th); err != nil {
		t.Fatalf("CreateThread(%q): %v", th.ID, err)
	}
	return th
}

func newQuestion(thread, qid string) *checkpoint.Question {
	return &checkpoint.Question{
		ThreadID: thread,
		ID:       qid,
		RunID:    "run-1",
		CallID:   "call-" + qid,
		Tool:     "bash",
		Kind:     "approve",
		Payload:  json.RawMessage(`{"tool": "bash",  "args":{"cmd":"ls -la"}}`),
		Digest:   "sha256:" + qid,
	}
}

func mustCreateQuestion(t *testing.T, s checkpoint.Store, q *checkpoint.Question) *checkpoint.Question {
	t.Helper()
	stored, created, err := s.CreateQuestion(ctx(t), q)
	if err != nil {
		t.Fatalf("CreateQuestion(%q, %q): %v", q.ThreadID, q.ID, err)
	}
	if !created {
		t.Fatalf("CreateQuestion(%q, %q): created = false for a new question", q.ThreadID, q.ID)
	}
	return stored
}

func mustGetQuestion(t *testing.T, s checkpoint.Store, thread, qid string) *checkpoint.Question {
	t.Helper()
	q, err := s.GetQuestion(ctx(t), thread, qid)
	if err != nil {
		t.Fatalf("GetQuestion(%q, %q): %v", thread, qid, err)
	}
	return q
}

func answer(by string, at time.Time) checkpoint.Resolution {
	return checkpoint.Resolution{
		Status: checkpoint.QuestionAnswered,
		Answer: json.RawMessage(`{"decision":"approve","by":"` + by + `"}`),
		By:     by,
		At:     at,
	}
}
