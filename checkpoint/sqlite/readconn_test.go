package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// The cycle's reads run below database/sql on every connection of the
// readers' pool, beside the writer, each seeing a committed state; a read
// whose context has ended fails with its error; Close finalizes the
// statements prepared on each connection.
func TestReadsBelowDatabaseSQL(t *testing.T) {
	s := openFile(t, &Options{Readers: 3})
	th := &checkpoint.Thread{ID: "t", Status: checkpoint.ThreadRunning, RunID: "r", Messages: json.RawMessage(`[]`)}
	if err := s.CreateThread(t.Context(), th); err != nil {
		t.Fatal(err)
	}
	q := &checkpoint.Question{ThreadID: "t", ID: "q", RunID: "r", Kind: "approve", Payload: json.RawMessage(`{"a":1}`)}
	if _, _, err := s.CreateQuestion(t.Context(), q); err != nil {
		t.Fatal(err)
	}
	const steps = 40
	var wg sync.WaitGroup
	wg.Go(func() { // the writer: a message and a tool call a step
		for i := range steps {
			b := appendBatch(th, fmt.Sprintf(`{"i":%d}`, i), "step")
			b.ToolCalls = []*checkpoint.ToolCall{{ThreadID: "t", RunID: "r", CallID: fmt.Sprintf("c%02d", i), Tool: "bash", State: checkpoint.ToolCallExecuting}}
			if _, err := s.Commit(t.Context(), b); err != nil {
				t.Error(err)
				return
			}
			th.Version = b.Thread.Version
		}
	})
	for range 6 {
		wg.Go(func() {
			for range steps {
				got, err := s.LoadThread(t.Context(), "t")
				if err != nil {
					t.Error(err)
					return
				}
				var msgs []json.RawMessage
				if err := json.Unmarshal(got.Messages, &msgs); err != nil || int64(len(msgs)) != got.Version-1 {
					t.Errorf("version %d with %d messages (%v)", got.Version, len(msgs), err)
				}
				calls, err := s.ListToolCalls(t.Context(), "t", "r")
				if err != nil {
					t.Error(err)
					return
				}
				for i, c := range calls {
					if c.CallID != fmt.Sprintf("c%02d", i) {
						t.Errorf("call %d: %q", i, c.CallID)
					}
				}
				if got, err := s.GetQuestion(t.Context(), "t", "q"); err != nil || string(got.Payload) != `{"a":1}` {
					t.Errorf("question: %+v, %v", got, err)
				}
			}
		})
	}
	wg.Wait()
	if calls, err := s.ListToolCalls(t.Context(), "t", "r", "c03", "c01", "c03", "zz"); err != nil || len(calls) != 2 || calls[0].CallID != "c01" || calls[1].CallID != "c03" {
		t.Errorf("calls by id: %v, %v", calls, err)
	}
	if _, err := s.GetQuestion(t.Context(), "t", "none"); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("a question that is not there: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.LoadThread(ctx, "t"); !errors.Is(err, context.Canceled) {
		t.Errorf("LoadThread with an ended context: %v", err)
	}
	if _, err := s.GetQuestion(ctx, "t", "q"); !errors.Is(err, context.Canceled) {
		t.Errorf("GetQuestion with an ended context: %v", err)
	}
	s.rc.mu.Lock()
	conns := len(s.rc.by)
	s.rc.mu.Unlock()
	if conns == 0 || conns > 3 {
		t.Errorf("statements prepared on %d reader connections, want 1 to 3", conns)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if len(s.rc.by) != 0 {
		t.Errorf("statements of %d connections left after Close", len(s.rc.by))
	}
}
