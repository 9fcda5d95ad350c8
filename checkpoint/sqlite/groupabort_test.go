package sqlite

import (
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// A batch whose failure takes the whole transaction with it (SQLite rolls
// back by itself on SQLITE_FULL, IOERR, NOMEM; here a trigger's
// RAISE(ROLLBACK)): ROLLBACK TO then fails, the group aborts, and the
// batches after it in the group were never applied. Their callers must
// not be told they are committed.
func TestBatchesAfterAnAbortAreNotToldCommitted(t *testing.T) {
	s := openFile(t, nil)
	if _, err := s.w.ExecContext(t.Context(), `CREATE TRIGGER boom AFTER INSERT ON events WHEN new.type = 'boom' BEGIN SELECT RAISE(ROLLBACK, 'boom'); END;`); err != nil {
		t.Fatal(err)
	}
	release := holdWriter(t, s)
	ev := func(typ string) *checkpoint.Batch {
		return &checkpoint.Batch{Events: []*checkpoint.Event{{ThreadID: "t", Type: typ}}}
	}
	wait := commitAll(t, s, nil, []*checkpoint.Batch{ev("first"), ev("boom"), ev("approval")}, 0)
	release()
	out := wait()
	evs, err := s.ListEvents(t.Context(), "t", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range out {
		t.Logf("batch %d: err %v", i, o.err)
	}
	t.Logf("stored events: %d", len(evs))
	if out[2].err == nil && len(evs) == 0 {
		t.Errorf("the third batch was told it committed; nothing is stored")
	}
}
