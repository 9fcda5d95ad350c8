package sqlite

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// ListToolCalls with call ids reads those calls, each once, however many
// (they are read toolCallChunk at a time) and whatever their bytes.
func TestListToolCallsByID(t *testing.T) {
	s, err := Open(t.Context(), ":memory:", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var all []string
	for i := range 30 {
		id := fmt.Sprintf("call_%02d", i)
		if i == 29 {
			id = "call_\xff\xfe" // not UTF-8: compared as bytes
		}
		all = append(all, id)
		if err := s.PutToolCall(t.Context(), &checkpoint.ToolCall{ThreadID: "t", RunID: "r", CallID: id, Tool: "bash", State: checkpoint.ToolCallExecuting}); err != nil {
			t.Fatal(err)
		}
		// The same id in another run and thread is another call.
		if err := s.PutToolCall(t.Context(), &checkpoint.ToolCall{ThreadID: "t", RunID: "r2", CallID: id, Tool: "other", State: checkpoint.ToolCallExecuting}); err != nil {
			t.Fatal(err)
		}
	}
	for _, ask := range [][]string{
		{"call_03"},
		{"call_07", "call_03", "call_07", "missing"},
		append(slices.Clone(all[:20]), "call_05", "call_\xff\xfe", "nope"),
		all,
	} {
		calls, err := s.ListToolCalls(t.Context(), "t", "r", ask...)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range calls {
			if c.Tool != "bash" || c.RunID != "r" || c.ThreadID != "t" {
				t.Errorf("%+v: another run's call", c)
			}
			got = append(got, c.CallID)
		}
		var want []string
		for _, id := range ask {
			if slices.Contains(all, id) && !slices.Contains(want, id) {
				want = append(want, id)
			}
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("ListToolCalls(%q) = %q, want %q", ask, got, want)
		}
	}
}

// walBytes is what the store has in its WAL since truncate was called.
func walBytes(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// truncateWAL empties the WAL. The store's own checkpointer may be
// copying it at that moment (it holds SQLite's checkpoint lock, and
// TRUNCATE then says busy): it is stopped for the test, its pending run
// waited for.
func truncateWAL(t *testing.T, s *Store) {
	t.Helper()
	if s.ckpt != nil {
		s.ckpt.stop()
	}
	var busy, frames, done int
	if err := s.w.QueryRowContext(t.Context(), "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &frames, &done); err != nil || busy != 0 {
		t.Fatalf("checkpoint: busy %d, %v", busy, err)
	}
}

// An append writes what it adds, whatever the thread holds: the WAL
// grows by as much for a step at message 10 as at message 1,000 of 4 KB
// each (4 MB), where a SaveThread writes the whole thread again.
func TestAppendWritesWhatItAdds(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 4 MB thread")
	}
	path := t.TempDir() + "/tollgate.db"
	s, err := Open(t.Context(), path, &Options{Synchronous: "OFF"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out := `{"role":"tool","content":"` + strings.Repeat("x", 4000) + `"}`
	th := &checkpoint.Thread{ID: "t", Status: checkpoint.ThreadRunning, RunID: "r", Messages: json.RawMessage(`[]`)}
	if err := s.CreateThread(t.Context(), th); err != nil {
		t.Fatal(err)
	}
	step := func() int64 {
		truncateWAL(t, s)
		w := &checkpoint.ThreadWrite{ID: th.ID, Version: th.Version, Status: th.Status, RunID: th.RunID, Append: []json.RawMessage{json.RawMessage(out)}}
		if _, err := s.Commit(t.Context(), &checkpoint.Batch{Thread: w, Events: []*checkpoint.Event{{ThreadID: th.ID, Type: "tool_result"}}}); err != nil {
			t.Fatal(err)
		}
		th.Version = w.Version
		return walBytes(t, path)
	}
	var at10, at1000 int64
	for i := 1; i <= 1000; i++ {
		n := step()
		switch i {
		case 10:
			at10 = n
		case 1000:
			at1000 = n
		}
	}
	t.Logf("WAL bytes of one step with a 4 KB message: %d at message 10, %d at message 1000", at10, at1000)
	if at1000 > 2*at10 || at1000 > 64<<10 {
		t.Errorf("a step at message 1000 wrote %d bytes to the WAL, at message 10 %d", at1000, at10)
	}
	got, err := s.LoadThread(t.Context(), th.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Messages) != 2+1000*len(out)+999 {
		t.Errorf("the thread has %d bytes of messages", len(got.Messages))
	}
}

// A thread write that keeps the status (qAppendSameStatus) and one that
// changes it (qAppendThread, after the first found no row) both move the
// version on and append; a stale version is a conflict either way, and
// the listing by status follows the status.
func TestAppendKeepingOrChangingStatus(t *testing.T) {
	s, err := Open(t.Context(), ":memory:", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	if err := s.CreateThread(ctx, &checkpoint.Thread{ID: "t", Status: checkpoint.ThreadRunning, RunID: "r", Messages: json.RawMessage(`["a"]`)}); err != nil {
		t.Fatal(err)
	}
	write := func(version int64, status checkpoint.ThreadStatus, msg string) error {
		w := &checkpoint.ThreadWrite{ID: "t", Version: version, Status: status, RunID: "r", Append: []json.RawMessage{json.RawMessage(msg)}}
		_, err := s.Commit(ctx, &checkpoint.Batch{Thread: w})
		return err
	}
	for _, c := range []struct {
		version int64
		status  checkpoint.ThreadStatus
		msg     string
		err     error
	}{
		{1, checkpoint.ThreadRunning, `"b"`, nil},
		{1, checkpoint.ThreadRunning, `"stale, same status"`, checkpoint.ErrConflict},
		{2, checkpoint.ThreadIdle, `"c"`, nil},
		{2, checkpoint.ThreadIdle, `"stale, idle"`, checkpoint.ErrConflict},
		{2, checkpoint.ThreadRunning, `"stale, other status"`, checkpoint.ErrConflict},
		{3, checkpoint.ThreadRunning, `"d"`, nil},
		{4, checkpoint.ThreadRunning, `"e"`, nil},
	} {
		if err := write(c.version, c.status, c.msg); !errors.Is(err, c.err) || (err == nil) != (c.err == nil) {
			t.Errorf("version %d, %s, %s: %v, want %v", c.version, c.status, c.msg, err, c.err)
		}
	}
	th, err := s.LoadThread(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if string(th.Messages) != `["a","b","c","d","e"]` || th.Version != 5 || th.Status != checkpoint.ThreadRunning {
		t.Errorf("thread: version %d, %s, %s; want 5, running, [a b c d e]", th.Version, th.Status, th.Messages)
	}
	for status, want := range map[checkpoint.ThreadStatus]int{checkpoint.ThreadIdle: 0, checkpoint.ThreadRunning: 1} {
		ts, _, err := s.ListThreads(ctx, checkpoint.ThreadFilter{Status: status})
		if err != nil || len(ts) != want {
			t.Errorf("threads %s: %d, %v; want %d", status, len(ts), err, want)
		}
	}
}
