package postgres

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// Messages and events go to the server as VALUES up to maxValues rows
// and as arrays beyond: both, and the boundary, keep order, bytes and
// NULLs.
func TestBatchSizes(t *testing.T) {
	s, _ := openTest(t, nil)
	ctx := t.Context()
	for _, n := range []int{0, 1, maxValues, maxValues + 1, 40} {
		thread := fmt.Sprint("sizes-", n)
		msgs := make([]json.RawMessage, n)
		evs := make([]*checkpoint.Event, n)
		for i := range n {
			msgs[i] = json.RawMessage(fmt.Sprintf(`{"i": %d, "s":"\u0000 <&>"}`, i))
			evs[i] = &checkpoint.Event{ThreadID: thread, RunID: "run", Type: fmt.Sprint("e", i)}
			if i%2 == 0 {
				evs[i].Data = json.RawMessage(fmt.Sprintf(`{"i" : %d}`, i))
			}
		}
		join := func(m []json.RawMessage) string {
			parts := make([]string, len(m))
			for i, x := range m {
				parts[i] = string(x)
			}
			return "[" + strings.Join(parts, ",") + "]"
		}
		// Created with n, appended n, saved with n, appended n again.
		th := &checkpoint.Thread{ID: thread, Status: checkpoint.ThreadRunning, RunID: "run", Messages: json.RawMessage(join(msgs))}
		if err := s.CreateThread(ctx, th); err != nil {
			t.Fatalf("n=%d: CreateThread: %v", n, err)
		}
		w := &checkpoint.ThreadWrite{ID: thread, Version: th.Version, Status: th.Status, RunID: "run", Append: msgs}
		c, err := s.Commit(ctx, &checkpoint.Batch{Thread: w, Events: evs})
		if err != nil {
			t.Fatalf("n=%d: Commit: %v", n, err)
		}
		got, err := s.LoadThread(ctx, thread)
		if err != nil {
			t.Fatal(err)
		}
		if want := join(append(slices.Clone(msgs), msgs...)); string(got.Messages) != want {
			t.Errorf("n=%d: Messages = %s\nwant %s", n, got.Messages, want)
		}
		if len(c.EventSeqs) != n || !slices.IsSorted(c.EventSeqs) {
			t.Errorf("n=%d: EventSeqs = %v", n, c.EventSeqs)
		}
		listed, err := s.ListEvents(ctx, thread, 0, 0)
		if err != nil || len(listed) != n {
			t.Fatalf("n=%d: ListEvents: %d, %v", n, len(listed), err)
		}
		for i, e := range listed {
			if e.Seq != c.EventSeqs[i] || e.Seq != evs[i].Seq || e.Type != evs[i].Type || string(e.Data) != string(evs[i].Data) {
				t.Errorf("n=%d: event %d = %+v, want %+v", n, i, e, evs[i])
			}
		}
		got.Messages = json.RawMessage(join(msgs))
		if err := s.SaveThread(ctx, got); err != nil {
			t.Fatal(err)
		}
		w = &checkpoint.ThreadWrite{ID: thread, Version: got.Version, Status: th.Status, RunID: "run", Append: msgs}
		if _, err := s.Commit(ctx, &checkpoint.Batch{Thread: w}); err != nil {
			t.Fatal(err)
		}
		if got, err = s.LoadThread(ctx, thread); err != nil {
			t.Fatal(err)
		} else if want := join(append(slices.Clone(msgs), msgs...)); string(got.Messages) != want {
			t.Errorf("n=%d: after SaveThread and an append: %s\nwant %s", n, got.Messages, want)
		}
		checkCounts(t, s, thread)
	}
}

// A notification whose payload would pass NOTIFY's 8000 bytes (a
// question's thread and id are the caller's) is a Resync; the batch
// commits.
func TestLongNotificationIsResync(t *testing.T) {
	s, _ := openTest(t, &Options{PollInterval: -1})
	ch, err := s.Subscribe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("q", 8000)
	if _, _, err := s.CreateQuestion(t.Context(), &checkpoint.Question{ThreadID: "t", ID: long}); err != nil {
		t.Fatal(err)
	}
	wait(t, ch, checkpoint.Notification{Kind: checkpoint.Resync})
	if _, err := s.ResolveQuestion(t.Context(), "t", long, checkpoint.Resolution{Status: checkpoint.QuestionAborted, By: "test"}); err != nil {
		t.Fatal(err)
	}
	wait(t, ch, checkpoint.Notification{Kind: checkpoint.Resync})
	if _, _, err := s.CreateQuestion(t.Context(), &checkpoint.Question{ThreadID: "t", ID: "short"}); err != nil {
		t.Fatal(err)
	}
	wait(t, ch, checkpoint.Notification{Kind: checkpoint.QuestionCreated, ThreadID: "t", QuestionID: "short"})
}

// checkCounts checks a thread's message_count and message_bytes against
// its messages' rows.
func checkCounts(t *testing.T, s *Store, thread string) {
	t.Helper()
	var count, size, rows, bytes int64
	err := s.pool.QueryRow(t.Context(), `SELECT message_count, message_bytes, (SELECT count(*) FROM messages WHERE thread_id = $1),
	(SELECT coalesce(sum(octet_length(body::text)), 0) FROM messages WHERE thread_id = $1) FROM threads WHERE id = $1`, thread).Scan(&count, &size, &rows, &bytes)
	if err != nil {
		t.Fatal(err)
	}
	if count != rows || size != bytes {
		t.Errorf("thread %s: message_count %d, message_bytes %d; its messages: %d, %d bytes", thread, count, size, rows, bytes)
	}
}
