package sqlite_test

import (
	"bufio"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint/sqlite"
)

// A process killed while it migrates a file of schema 11 to 12 leaves
// the file at 11 or 12, whole: the next Open migrates it (or finds it
// migrated) and every row is there. Killed at several moments of the
// migration (whichever it reaches: the check is the same at any).
func TestMigrateRowLayoutKilled(t *testing.T) {
	if path := os.Getenv("TOLLGATE_MIGRATE_CHILD"); path != "" {
		os.Stdout.WriteString("opening\n")
		s, err := sqlite.Open(t.Context(), path, nil)
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		os.Stdout.WriteString("done\n")
		return
	}
	if testing.Short() {
		t.Skip("builds a file of 30 MB a run")
	}
	for _, after := range []time.Duration{0, 100 * time.Millisecond, 300 * time.Millisecond, 600 * time.Millisecond} {
		path := filepath.Join(t.TempDir(), "tollgate.db")
		schema11File(t, path, `PRAGMA journal_mode=WAL;
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM n WHERE i < 199)
INSERT INTO threads (id, version, status, run_id, created_at, updated_at, messages, message_count, message_bytes)
	SELECT 't'||i, 1, 'idle', 'r', i, i, NULL, 25, 0 FROM n;
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM n WHERE i < 4999)
INSERT INTO messages (thread_id, position, body) SELECT 't'||(i/25), i%25, '"'||hex(randomblob(1500))||'"' FROM n;
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM n WHERE i < 999)
INSERT INTO tool_calls (thread_id, run_id, call_id, tool, args, state, result, updated_at) SELECT 't'||(i/5), 'r', 'c'||i, 'bash', hex(randomblob(800)), 'done', NULL, i FROM n;`)
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		before := dumpRowTables(t, db)
		db.Close()

		cmd := exec.Command(os.Args[0], "-test.run=^TestMigrateRowLayoutKilled$")
		cmd.Env = append(os.Environ(), "TOLLGATE_MIGRATE_CHILD="+path)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(out)
		r.ReadString('\n') // opening
		time.Sleep(after)
		cmd.Process.Kill()
		rest, _ := r.ReadString('\n')
		cmd.Wait()
		t.Logf("killed after %v: the child had finished: %v", after, rest == "done\n")

		s, err := sqlite.Open(t.Context(), path, nil)
		if err != nil {
			t.Fatalf("killed after %v: open: %v", after, err)
		}
		s.Close()
		db, err = sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		var v int
		db.QueryRow(`SELECT max(version) FROM schema_version`).Scan(&v)
		if got := dumpRowTables(t, db); got != before || v != latestSchema(t) {
			t.Errorf("killed after %v: schema %d, rows kept %v", after, v, got == before)
		}
		db.Close()
	}
}
