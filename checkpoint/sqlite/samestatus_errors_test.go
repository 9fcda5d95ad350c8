package sqlite_test

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/sqlite"
)

// A running thread's write (qAppendSameStatus tried first) that updates
// no row fails as a write of another status does: a missing thread is
// ErrNotFound, a stale version ErrConflict, a thread whose messages an
// older tollgate kept as something else than an array the same refusal;
// and none of them writes anything.
func TestRunningWriteMissedAsBefore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tollgate.db")
	s, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, id := range []string{"running", "legacy"} {
		if err := s.CreateThread(ctx, &checkpoint.Thread{ID: id, Status: checkpoint.ThreadRunning, RunID: "r"}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	execSQL(t, path, `UPDATE threads SET messages = '{"not":"an array"}' WHERE id = 'legacy'`)
	s, err = sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	write := func(id string, version int64, status checkpoint.ThreadStatus) error {
		w := &checkpoint.ThreadWrite{ID: id, Version: version, Status: status, RunID: "r", Append: []json.RawMessage{json.RawMessage(`"m"`)}}
		_, err := s.Commit(ctx, &checkpoint.Batch{Thread: w})
		return err
	}
	for _, c := range []struct {
		id      string
		version int64
		check   func(error) bool
	}{
		{"missing", 1, func(err error) bool { return errors.Is(err, checkpoint.ErrNotFound) }},
		{"running", 7, func(err error) bool { return errors.Is(err, checkpoint.ErrConflict) }},
		{"legacy", 1, func(err error) bool { return err != nil && strings.Contains(err.Error(), "not a JSON array") }},
	} {
		running, idle := write(c.id, c.version, checkpoint.ThreadRunning), write(c.id, c.version, checkpoint.ThreadIdle)
		if !c.check(running) || !c.check(idle) {
			t.Errorf("%s at version %d: running %v, idle %v", c.id, c.version, running, idle)
		}
	}
	for _, id := range []string{"running", "legacy"} {
		th, err := s.LoadThread(ctx, id)
		if err != nil || th.Version != 1 || th.Status != checkpoint.ThreadRunning {
			t.Errorf("%s after the refused writes: %+v, %v", id, th, err)
		}
	}
}
