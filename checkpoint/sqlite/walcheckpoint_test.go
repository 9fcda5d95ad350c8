package sqlite

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// The WAL is checkpointed beside the writer: its connection checkpoints
// only past writerCheckpointPages (not SQLite's 1,000), the checkpointer
// runs every checkpointEvery commits, and under commits back to back —
// where the checkpointer alone never catches up, so the WAL would never
// start again — the WAL stays bounded (these commits write ~140 MB).
func TestWALCheckpointedBesideTheWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tollgate.db")
	s, err := Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var autockpt int
	if err := s.w.QueryRowContext(t.Context(), "PRAGMA wal_autocheckpoint").Scan(&autockpt); err != nil || autockpt != writerCheckpointPages {
		t.Fatalf("the writer's wal_autocheckpoint = %d, %v; want %d", autockpt, err, writerCheckpointPages)
	}
	th := &checkpoint.Thread{ID: "t1"}
	if err := s.CreateThread(t.Context(), th); err != nil {
		t.Fatal(err)
	}
	msg := `{"role":"user","text":"` + strings.Repeat("x", 4000) + `"}`
	for i := range 4000 {
		if _, err := s.Commit(t.Context(), appendBatch(th, msg, fmt.Sprintf("e%d", i))); err != nil {
			t.Fatal(err)
		}
		th.Version++
	}
	// The file is as large as the WAL ever was: SQLite starts it again
	// from its beginning, it does not shrink it.
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	if runs := s.ckpt.runs.Load(); runs < 4000/checkpointEvery/2 {
		t.Errorf("%d checkpoints beside the writer over 4,000 commits", runs)
	}
	if fi.Size() > 16<<20 {
		t.Fatalf("the WAL grew to %d bytes over 4,000 commits: not checkpointed", fi.Size())
	}
	t.Logf("the WAL's largest: %d bytes", fi.Size())
}
