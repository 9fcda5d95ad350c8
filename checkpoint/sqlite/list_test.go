package sqlite

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// The host lists the running threads at start-up, to finish the runs a
// crash left: over 100,000 threads (a tenth running, created in bursts, so
// that many share their creation time), every page is an index range, and
// the pages hold every thread exactly once, newest first.
func TestListThreadsAtScale(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("fills 100,000 threads (a second; a minute under the race detector, and nothing runs concurrently)")
	}
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "tollgate.db"), &Options{Synchronous: "OFF"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 100_000
	base := time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC).UnixMicro()
	// One statement: 7919 is prime to n, so the IDs are a permutation,
	// not in creation order.
	msg := `{"role":"user","content":"` + strings.Repeat("a conversation ", 8) + `"}`
	if _, err := s.w.ExecContext(t.Context(), `WITH RECURSIVE i(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM i WHERE k + 1 < ?)
INSERT INTO threads (id, version, status, run_id, created_at, updated_at, message_count, message_bytes)
SELECT printf('thread-%06d', k * 7919 % ?), 1, CASE WHEN k % 10 = 3 THEN 'running' ELSE 'idle' END, 'run', ? + k / 7 * 1000, ?, 1, ? FROM i`,
		n, n, base, base, len(msg)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.ExecContext(t.Context(), `INSERT INTO messages (thread_id, position, body) SELECT id, 0, ? FROM threads`, msg); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		f    checkpoint.ThreadFilter
		want int
	}{
		{checkpoint.ThreadFilter{Status: checkpoint.ThreadRunning}, n / 10},
		{checkpoint.ThreadFilter{Limit: 1000}, n},
	} {
		start := time.Now()
		seen := make(map[string]bool, c.want)
		var prev *checkpoint.Thread
		var first time.Duration
		for f := c.f; ; {
			ts, next, err := s.ListThreads(t.Context(), f)
			if err != nil {
				t.Fatal(err)
			}
			if first == 0 {
				first = time.Since(start)
			}
			for _, th := range ts {
				if seen[th.ID] {
					t.Fatalf("%+v: %s twice", c.f, th.ID)
				}
				seen[th.ID] = true
				if prev != nil && (th.CreatedAt.After(prev.CreatedAt) || th.CreatedAt.Equal(prev.CreatedAt) && th.ID >= prev.ID) {
					t.Fatalf("%+v: %s after %s", c.f, th.ID, prev.ID)
				}
				if c.f.Status != "" && th.Status != c.f.Status || th.Messages != nil {
					t.Fatalf("%+v: %s is %s, messages %d bytes", c.f, th.ID, th.Status, len(th.Messages))
				}
				prev = th
			}
			if next == "" {
				break
			}
			f.After = next
		}
		if len(seen) != c.want {
			t.Errorf("%+v: %d threads, want %d", c.f, len(seen), c.want)
		}
		t.Logf("%+v: %d threads in %v (first page %v)", c.f, len(seen), time.Since(start).Round(time.Millisecond), first.Round(time.Microsecond))
	}
}
