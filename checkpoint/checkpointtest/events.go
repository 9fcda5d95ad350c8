package checkpointtest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

func testEvents(t *testing.T, setup setupFunc) {
	t.Run("Append", func(t *testing.T) {
		s := setup(t)
		thread := id("thread")
		e1 := &checkpoint.Event{ThreadID: thread, RunID: "run-1", Type: "hitl_request", Data: json.RawMessage(`{"q": "approve_1"}`), At: t0}
		seq1, err := s.AppendEvent(ctx(t), e1)
		if err != nil {
			t.Fatalf("AppendEvent: %v", err)
		}
		if seq1 <= 0 || e1.Seq != seq1 {
			t.Errorf("AppendEvent = %d, event Seq %d; want the same positive number", seq1, e1.Seq)
		}
		checkTime(t, "At (given)", e1.At, t0)
		e2 := &checkpoint.Event{ThreadID: thread, RunID: "run-1", Type: "hitl_answer"}
		seq2, err := s.AppendEvent(ctx(t), e2)
		if err != nil {
			t.Fatalf("AppendEvent: %v", err)
		}
		if seq2 <= seq1 || e2.Seq != seq2 {
			t.Errorf("second Seq %d (event %d) after %d: want strictly increasing", seq2, e2.Seq, seq1)
		}
		if !recent(e2.At) {
			t.Errorf("At = %v, want the store's current time", e2.At)
		}
		got, err := s.ListEvents(ctx(t), thread, 0, 0)
		if err != nil {
			t.Fatalf("ListEvents: %v", err)
		}
		if len(got) != 2 {
			t.Fatalf("ListEvents = %d events, want 2", len(got))
		}
		for i, want := range []*checkpoint.Event{e1, e2} {
			g := got[i]
			if g.Seq != want.Seq || g.ThreadID != want.ThreadID || g.RunID != want.RunID || g.Type != want.Type {
				t.Errorf("event %d = %+v, want %+v", i, g, want)
			}
			checkJSON(t, "Data", g.Data, want.Data)
			checkTime(t, "At", g.At, want.At)
		}
	})

	t.Run("ListAfter", func(t *testing.T) {
		s := setup(t)
		a, b := id("thread-a"), id("thread-b")
		var seqs, ofA, ofB []int64
		for i := range 10 {
			thread := a
			if i%3 == 2 {
				thread = b
			}
			seq, err := s.AppendEvent(ctx(t), &checkpoint.Event{ThreadID: thread, RunID: "r", Type: fmt.Sprintf("e%d", i), At: t0.Add(time.Duration(i) * time.Second)})
			if err != nil {
				t.Fatalf("AppendEvent: %v", err)
			}
			seqs = append(seqs, seq)
			if thread == a {
				ofA = append(ofA, seq)
			} else {
				ofB = append(ofB, seq)
			}
		}
		list := func(thread string, after int64, limit int) []int64 {
			t.Helper()
			es, err := s.ListEvents(ctx(t), thread, after, limit)
			if err != nil {
				t.Fatalf("ListEvents(%q, %d, %d): %v", thread, after, limit, err)
			}
			out := []int64{}
			for _, e := range es {
				if thread != "" && e.ThreadID != thread {
					t.Errorf("ListEvents(%q) returned an event of %q", thread, e.ThreadID)
				}
				out = append(out, e.Seq)
			}
			return out
		}
		for _, c := range []struct {
			name   string
			thread string
			after  int64
			limit  int
			want   []int64
		}{
			{"all", "", 0, 0, seqs},
			{"all after the 4th", "", seqs[3], 0, seqs[4:]},
			{"all, 3 after the 2nd", "", seqs[1], 3, seqs[2:5]},
			{"after the last", "", seqs[9], 0, nil},
			{"a", a, 0, 0, ofA},
			{"a after its 2nd", a, ofA[1], 0, ofA[2:]},
			{"b, limit 2", b, 0, 2, ofB[:2]},
			{"b after a's 5th", b, ofA[4], 0, ofB[len(ofB)-1:]},
			{"nobody", id("nobody"), 0, 0, nil},
			{"negative after", a, -5, 0, ofA},
		} {
			got := list(c.thread, c.after, c.limit)
			if fmt.Sprint(got) != fmt.Sprint(append([]int64{}, c.want...)) {
				t.Errorf("%s: seqs %v, want %v", c.name, got, c.want)
			}
		}
	})

	t.Run("DefaultLimit", func(t *testing.T) {
		s := setup(t)
		thread := id("thread")
		for range 3 {
			if _, err := s.AppendEvent(ctx(t), &checkpoint.Event{ThreadID: thread, Type: "x"}); err != nil {
				t.Fatal(err)
			}
		}
		for _, limit := range []int{0, -1} {
			es, err := s.ListEvents(ctx(t), thread, 0, limit)
			if err != nil || len(es) != 3 {
				t.Errorf("ListEvents(limit %d) = %d events, %v; want all 3", limit, len(es), err)
			}
		}
	})
}
