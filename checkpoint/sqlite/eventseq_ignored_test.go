package sqlite_test

import (
	"fmt"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// An event insert that inserts nothing — a BEFORE INSERT trigger of the
// file that says RAISE(IGNORE), as a tool that found the file may add to
// drop some events — leaves last_insert_rowid at the connection's
// previous insert: Commit returns that number (another event's seq) as
// the dropped event's. With RETURNING (before 8c2b374) no row came back
// and the commit failed. The insert's RowsAffected says 0.
func TestEventSeqOfAnInsertThatInsertsNothing(t *testing.T) {
	s := storeWithSQL(t, `CREATE TRIGGER dropped BEFORE INSERT ON events WHEN NEW.type = 'noise' BEGIN SELECT RAISE(IGNORE); END;`)
	b := &checkpoint.Batch{}
	for i, typ := range []string{"note", "noise"} {
		b.Events = append(b.Events, &checkpoint.Event{ThreadID: "t", RunID: "r", Type: typ, Data: []byte(fmt.Sprintf(`{"i":%d}`, i))})
	}
	c, err := s.Commit(t.Context(), b)
	if err != nil {
		return // refused: no number given for an event not stored
	}
	evs, err := s.ListEvents(t.Context(), "t", 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[int64]string{}
	for _, e := range evs {
		stored[e.Seq] = e.Type
	}
	for i, e := range b.Events {
		if got := stored[c.EventSeqs[i]]; got != e.Type {
			t.Errorf("event %d (%s): Commit numbered it %d, which is stored as %q (stored: %v)", i, e.Type, c.EventSeqs[i], got, stored)
		}
	}
}
