package sqlite_test

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/checkpointtest"
	"github.com/tollgate-ai/tollgate/checkpoint/internal/migrationtest"
	"github.com/tollgate-ai/tollgate/checkpoint/sqlite"

	_ "modernc.org/sqlite"
)

func TestConformanceFile(t *testing.T) {
	checkpointtest.Run(t, func(t *testing.T) checkpoint.Store {
		s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "tollgate.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestConformanceMemory(t *testing.T) {
	checkpointtest.Run(t, func(t *testing.T) checkpoint.Store {
		s, err := sqlite.Open(t.Context(), ":memory:", nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// Two Stores on one file stand for two processes.
func TestConformanceShared(t *testing.T) {
	checkpointtest.RunShared(t, func(t *testing.T) (checkpoint.Store, checkpoint.Store) {
		path := filepath.Join(t.TempDir(), "tollgate.db")
		opts := &sqlite.Options{PollInterval: 20 * time.Millisecond}
		a, err := sqlite.Open(t.Context(), path, opts)
		if err != nil {
			t.Fatal(err)
		}
		b, err := sqlite.Open(t.Context(), path, opts)
		if err != nil {
			a.Close()
			t.Fatal(err)
		}
		return a, b
	})
}

func TestReopenKeepsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tollgate.db")
	s, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateQuestion(t.Context(), &checkpoint.Question{ThreadID: "t", ID: "q", Kind: "approve"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	q, err := s.GetQuestion(t.Context(), "t", "q")
	if err != nil || q.Status != checkpoint.QuestionPending {
		t.Fatalf("after reopen: %+v, %v", q, err)
	}
}

func TestOpenConcurrently(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tollgate.db")
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			s, err := sqlite.Open(t.Context(), path, nil)
			if err != nil {
				t.Errorf("Open: %v", err)
				return
			}
			s.Close()
		})
	}
	wg.Wait()
}

// openChildEnv makes the test binary a process of
// TestOpenConcurrentlyProcesses: "path|thread|start (Unix ns)".
const openChildEnv = "TOLLGATE_SQLITE_OPEN_CHILD"

// Processes opening a new file at the same instant: each one's Open waits
// for the others (switching the file to WAL, migrating) and succeeds.
func TestOpenConcurrentlyProcesses(t *testing.T) {
	if spec := os.Getenv(openChildEnv); spec != "" {
		openChild(t, spec)
		return
	}
	const rounds, procs = 3, 4
	for round := range rounds {
		path := filepath.Join(t.TempDir(), "tollgate.db")
		start := time.Now().Add(300 * time.Millisecond).UnixNano()
		var wg sync.WaitGroup
		for i := range procs {
			thread := fmt.Sprintf("r%d-p%d", round, i)
			cmd := exec.Command(os.Args[0], "-test.run=^TestOpenConcurrentlyProcesses$", "-test.count=1")
			cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s|%s|%d", openChildEnv, path, thread, start))
			wg.Go(func() {
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("process %s: %v\n%s", thread, err, out)
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		s, err := sqlite.Open(t.Context(), path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := range procs {
			if _, err := s.LoadThread(t.Context(), fmt.Sprintf("r%d-p%d", round, i)); err != nil {
				t.Errorf("LoadThread: %v", err)
			}
		}
		s.Close()
	}
}

func openChild(t *testing.T, spec string) {
	f := strings.Split(spec, "|")
	start, err := strconv.ParseInt(f[2], 10, 64)
	if len(f) != 3 || err != nil {
		t.Fatalf("%s=%q", openChildEnv, spec)
	}
	time.Sleep(time.Until(time.Unix(0, start)))
	s, err := sqlite.Open(t.Context(), f[0], nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	if err := s.CreateThread(t.Context(), &checkpoint.Thread{ID: f[1]}); err != nil {
		t.Fatalf("CreateThread: %v", err)
	}
}

func TestEmptyFileIsANewDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty.db")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatalf("Open(empty file): %v", err)
	}
	s.Close()
}

// refuses opens path, expects err to wrap want, and checks that the file's
// bytes are what they were.
func refuses(t *testing.T, path string, want error) {
	t.Helper()
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sqlite.Open(t.Context(), path, nil)
	if err == nil {
		s.Close()
		t.Fatalf("Open(%s) succeeded", filepath.Base(path))
	}
	if !errors.Is(err, want) {
		t.Fatalf("Open(%s) = %v, want %v", filepath.Base(path), err, want)
	}
	t.Logf("Open(%s): %v", filepath.Base(path), err)
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Errorf("Open changed the refused file")
	}
}

func TestNotASQLiteFile(t *testing.T) {
	for _, c := range []struct {
		name    string
		content []byte
		want    error
	}{
		{"text", []byte("these are my notes, not a database\n"), sqlite.ErrNotTollgate},
		{"short", []byte("SQL"), sqlite.ErrNotTollgate},
		{"corrupt", append([]byte("SQLite format 3\x00"), bytes.Repeat([]byte{0xde, 0xad}, 2048)...), sqlite.ErrCorrupt},
		{"truncated", []byte("SQLite format 3\x00\x10\x00"), sqlite.ErrCorrupt},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), c.name+".db")
			if err := os.WriteFile(path, c.content, 0o600); err != nil {
				t.Fatal(err)
			}
			refuses(t, path, c.want)
		})
	}
}

// A tollgate database damaged after its header: refused as corrupt, and
// left as it is for whoever will try to rescue it.
func TestCorruptTollgateDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tollgate.db")
	s, err := sqlite.Open(t.Context(), path, &sqlite.Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	execSQL(t, path, `PRAGMA journal_mode = DELETE`) // fold the WAL into the file
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := 100; i < len(b); i++ { // keep the 100-byte header, wreck the rest
		b[i] ^= 0x5a
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	refuses(t, path, sqlite.ErrCorrupt)
}

func TestForeignSQLiteDatabase(t *testing.T) {
	dir := t.TempDir()
	for name, setup := range map[string]string{
		"tables":         `CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO customers VALUES (1, 'ada');`,
		"application_id": `PRAGMA application_id = 42;`,
		"wal":            `PRAGMA journal_mode = WAL; CREATE TABLE t (x);`,
		// A table named like ours is not a marker.
		"lookalike": `CREATE TABLE schema_version (version INTEGER); INSERT INTO schema_version VALUES (1);`,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name+".db")
			execSQL(t, path, setup)
			refuses(t, path, sqlite.ErrNotTollgate)
		})
	}
}

func TestNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tollgate.db")
	s, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	execSQL(t, path, `INSERT INTO schema_version (version, name, applied_at) VALUES (999, '0999_future.sql', 0)`)
	refuses(t, path, sqlite.ErrNewerSchema)
}

func TestBadOptions(t *testing.T) {
	if _, err := sqlite.Open(t.Context(), ":memory:", &sqlite.Options{Synchronous: "sometimes"}); err == nil {
		t.Fatal("Synchronous \"sometimes\" accepted")
	}
	if _, err := sqlite.Open(t.Context(), "", nil); err == nil {
		t.Fatal("empty path accepted")
	}
}

func TestMemoryStoresAreSeparate(t *testing.T) {
	a, err := sqlite.Open(t.Context(), ":memory:", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := sqlite.Open(t.Context(), ":memory:", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := a.CreateThread(t.Context(), &checkpoint.Thread{ID: "x"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.LoadThread(t.Context(), "x"); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("b sees a's thread: %v", err)
	}
}

// A database of schema 1 (times in nanoseconds) is migrated to microseconds:
// every time reads back as it was, to the microsecond (rounded down, also
// before 1970), and the file then keeps deadlines past 2262.
func TestMigrateNanosecondsToMicroseconds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tollgate.db")
	init, err := os.ReadFile("migrations/0001_init.sql")
	if err != nil {
		t.Fatal(err)
	}
	created := time.Date(2031, 3, 4, 5, 6, 7, 123456789, time.UTC)
	before1970 := time.Date(1969, 12, 31, 23, 59, 59, 999999500, time.UTC)
	deadline := time.Date(2262, 4, 11, 23, 47, 16, 854775807, time.UTC) // the last nanosecond of schema 1
	ns := func(tm time.Time) string { return strconv.FormatInt(tm.UnixNano(), 10) }
	execSQL(t, path, string(init)+`
CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT;
INSERT INTO schema_version VALUES (1, '0001_init.sql', `+ns(created)+`);
INSERT INTO threads VALUES ('t', 3, 'idle', 'run-1', '[]', `+ns(before1970)+`, `+ns(created)+`);
INSERT INTO tool_calls VALUES ('t', 'run-1', 'c1', 'bash', '{}', 'done', '"ok"', `+ns(created)+`);
INSERT INTO questions (seq, thread_id, id, run_id, call_id, kind, payload, digest, status, answer, answered_by, reason, created_at, deadline, resolved_at, change_seq)
	VALUES (1, 't', 'open', 'run-1', 'c1', 'approve', NULL, '', 'pending', NULL, '', '', `+ns(created)+`, `+ns(deadline)+`, NULL, 1),
	       (2, 't', 'none', 'run-1', 'c1', 'approve', NULL, '', 'aborted', NULL, 'abort', '', `+ns(before1970)+`, NULL, `+ns(created)+`, 2);
INSERT INTO events (thread_id, run_id, type, data, at) VALUES ('t', 'run-1', 'x', NULL, `+ns(before1970)+`);
`)
	s, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	same := func(what string, got, want time.Time) {
		t.Helper()
		want = time.UnixMicro(want.UnixMicro()).UTC()
		if !got.Equal(want) {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	th, err := s.LoadThread(t.Context(), "t")
	if err != nil {
		t.Fatal(err)
	}
	// The threads table was rebuilt since (schema 5): the rest is kept too.
	if th.Version != 3 || th.Status != checkpoint.ThreadIdle || th.RunID != "run-1" || string(th.Messages) != "[]" {
		t.Errorf("thread after the migrations: %+v", th)
	}
	same("thread created", th.CreatedAt, before1970)
	same("thread updated", th.UpdatedAt, created)
	calls, err := s.ListToolCalls(t.Context(), "t", "run-1")
	if err != nil || len(calls) != 1 {
		t.Fatalf("ListToolCalls = %d, %v", len(calls), err)
	}
	same("tool call updated", calls[0].UpdatedAt, created)
	q, err := s.GetQuestion(t.Context(), "t", "open")
	if err != nil {
		t.Fatal(err)
	}
	same("question created", q.CreatedAt, created)
	same("question deadline", q.Deadline, deadline)
	if !q.ResolvedAt.IsZero() {
		t.Errorf("resolved at %v, want none", q.ResolvedAt)
	}
	q, err = s.GetQuestion(t.Context(), "t", "none")
	if err != nil {
		t.Fatal(err)
	}
	same("question created", q.CreatedAt, before1970)
	same("question resolved", q.ResolvedAt, created)
	if !q.Deadline.IsZero() {
		t.Errorf("deadline %v, want none", q.Deadline)
	}
	evs, err := s.ListEvents(t.Context(), "t", 0, 0)
	if err != nil || len(evs) != 1 {
		t.Fatalf("ListEvents = %d, %v", len(evs), err)
	}
	same("event", evs[0].At, before1970)

	far := time.Now().AddDate(300, 0, 0)
	if _, _, err := s.CreateQuestion(t.Context(), &checkpoint.Question{ThreadID: "t", ID: "far", Deadline: far}); err != nil {
		t.Fatal(err)
	}
	if q, err := s.GetQuestion(t.Context(), "t", "far"); err != nil || !q.Deadline.Equal(far.Truncate(time.Microsecond)) {
		t.Errorf("far deadline read back as %v (%v), want %v", q.Deadline, err, far)
	}
}

// A time the store cannot keep is refused with an error that says so.
func TestTimeOutOfRange(t *testing.T) {
	s, err := sqlite.Open(t.Context(), ":memory:", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, _, err = s.CreateQuestion(t.Context(), &checkpoint.Question{ThreadID: "t", ID: "q", Deadline: time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err == nil || !strings.Contains(err.Error(), "outside the range") {
		t.Fatalf("CreateQuestion(deadline in 300000) = %v, want a refusal", err)
	}
	t.Log(err)
}

// A database of schema 2 gets the tool column, filled from each question's
// payload ("tool_name", when it is a string); payloads that are not JSON
// objects, or not JSON at all, leave it empty and do not stop Open. The
// backfill is not a change of the questions: change_seq stays.
func TestMigrateQuestionTool(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tollgate.db")
	schema := migrationSQL(t, "0001_init.sql", "0002_microseconds.sql")
	// SQLite kept what PostgreSQL would have refused.
	cases := append(slices.Clone(migrationtest.ToolCases), migrationtest.ToolCase{ID: "not-json", Payload: `tool_name: bash`})
	var rows []string
	for i, c := range cases {
		payload := "NULL"
		if c.Payload != "" {
			payload = "'" + c.Payload + "'"
		}
		rows = append(rows, fmt.Sprintf("(%d, 't', '%s', 'run-1', '', 'approve', %s, '', 'pending', NULL, '', '', 1, NULL, NULL, %d)", i+1, c.ID, payload, 100+i))
	}
	execSQL(t, path, schema+`
CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT;
INSERT INTO schema_version VALUES (1, '0001_init.sql', 0), (2, '0002_microseconds.sql', 0);
INSERT INTO questions (seq, thread_id, id, run_id, call_id, kind, payload, digest, status, answer, answered_by, reason, created_at, deadline, resolved_at, change_seq)
VALUES `+strings.Join(rows, ",\n")+`;`)
	s, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	migrationtest.CheckTools(t, s, "t", cases)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var changed int
	if err := db.QueryRow(`SELECT count(*) FROM questions WHERE change_seq != seq + 99`).Scan(&changed); err != nil || changed != 0 {
		t.Errorf("%d questions have a new change_seq after the migration (%v)", changed, err)
	}
}
