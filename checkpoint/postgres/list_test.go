package postgres

import (
	"strings"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/internal/cursor"
	"github.com/tollgate-ai/tollgate/checkpoint/internal/listsql"
	"github.com/tollgate-ai/tollgate/internal/pgtest"
)

// explain returns PostgreSQL's plan of st, one node a line.
func explain(t *testing.T, s *Store, st listsql.Stmt) string {
	t.Helper()
	rows, err := s.pool.Query(t.Context(), "EXPLAIN (COSTS OFF) "+st.SQL, st.Args...)
	if err != nil {
		t.Fatalf("%s: %v", st.SQL, err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

// With 20,000 threads and 30,000 pending questions (analyzed, as
// autovacuum leaves a table), the pages of both lists are index ranges:
// no sequential scan, no sort but the deadline order's of its two short
// ranges.
func TestListPlans(t *testing.T) {
	dsn := pgtest.WithParams(pgtest.Start(t), "synchronous_commit", "off")
	s, err := Open(t.Context(), dsn, &Options{Schema: pgtest.Schema(t, dsn)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, fill := range []string{
		`INSERT INTO threads (id, version, status, run_id, created_at, updated_at)
SELECT 'thread-' || i, 1, CASE WHEN i % 10 = 0 THEN 'running' ELSE 'idle' END, 'run', now() - i * interval '1 second', now()
FROM generate_series(1, 20000) i`,
		// Answered questions, written as they are (schema 7's triggers
		// would refuse them: a question is created pending).
		`ALTER TABLE questions DISABLE TRIGGER USER`,
		`INSERT INTO questions (seq, change_seq, thread_id, id, run_id, call_id, tool, kind, payload, digest, status, answered_by, reason, created_at, deadline)
SELECT i, i, 'thread-' || (i % 10000), 'q' || i, 'run', 'call', (ARRAY['bash','edit','http','deploy','mail'])[1 + i % 5], 'approve', '{}', '',
	CASE WHEN i % 4 = 0 THEN 'answered' ELSE 'pending' END, '', '', now(),
	CASE WHEN i % 3 = 0 THEN now() + (i % 1440) * interval '1 minute' END
FROM generate_series(1, 40000) i`,
		`ALTER TABLE questions ENABLE TRIGGER USER`,
		`ANALYZE`,
	} {
		if _, err := s.pool.Exec(t.Context(), fill); err != nil {
			t.Fatal(err)
		}
	}
	at := time.Now()
	check := func(what string, st listsql.Stmt, sorts int) {
		t.Helper()
		p := explain(t, s, st)
		if strings.Contains(p, "Seq Scan") || strings.Count(p, "Sort") > sorts || !strings.Contains(p, "Index") {
			t.Errorf("%s:\n%s", what, p)
		}
	}
	for _, f := range []checkpoint.ThreadFilter{{}, {Status: checkpoint.ThreadRunning}} {
		for _, a := range []*cursor.Thread{nil, {CreatedAt: at.Add(-time.Hour), ID: "thread-3600"}} {
			check("threads", listsql.Threads(dialect, threadCols, f, a, 100), 0)
		}
	}
	afters := map[checkpoint.QuestionOrder][]*cursor.Question{
		checkpoint.OldestFirst:   {nil, {Order: checkpoint.OldestFirst, Seq: 20000}},
		checkpoint.NewestFirst:   {nil, {Order: checkpoint.NewestFirst, Seq: 20000}},
		checkpoint.DeadlineFirst: {nil, {Order: checkpoint.DeadlineFirst, Seq: 20001, Deadline: at.Add(12 * time.Hour)}, {Order: checkpoint.DeadlineFirst, Seq: 20000}},
	}
	for _, tool := range []string{"", "deploy"} {
		for order, as := range afters {
			for _, a := range as {
				f := checkpoint.QuestionFilter{Status: checkpoint.QuestionPending, Tool: tool, Order: order}
				// "Sort Key" lines come with the sort of the union.
				check(f.Order.String()+" "+tool, listsql.Union(listsql.Questions(dialect, questionCols, f, a, 50), 50), 2)
			}
		}
	}
}

// Threads created at the same instant are in byte order of their IDs
// even where the column's collation orders them otherwise (ICU: "a"
// before "B"; bytes: "B" before "a").
func TestThreadOrderIgnoresCollation(t *testing.T) {
	dsn := pgtest.Start(t)
	s, err := Open(t.Context(), dsn, &Options{Schema: pgtest.Schema(t, dsn)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var icu bool
	if err := s.pool.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_collation WHERE collname = 'und-x-icu')`).Scan(&icu); err != nil {
		t.Fatal(err)
	}
	if !icu {
		t.Skip("PostgreSQL without ICU collations")
	}
	if _, err := s.pool.Exec(t.Context(), `ALTER TABLE threads ALTER COLUMN id TYPE text COLLATE "und-x-icu"`); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)
	for _, id := range []string{"a", "B", "b", "A", "_"} {
		if err := s.CreateThread(t.Context(), &checkpoint.Thread{ID: id, CreatedAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for f := (checkpoint.ThreadFilter{Limit: 2}); ; {
		ts, next, err := s.ListThreads(t.Context(), f)
		if err != nil {
			t.Fatal(err)
		}
		for _, th := range ts {
			got = append(got, th.ID)
		}
		if next == "" {
			break
		}
		f.After = next
	}
	if want := "b a _ B A"; strings.Join(got, " ") != want {
		t.Errorf("threads of one instant: %v, want %s", got, want)
	}
}

// The write path's reads, on a store of 1,000 threads of 40 messages,
// 50,000 tool calls and 50,000 events (analyzed): a thread's messages
// are a range of the messages' primary key, a turn's calls entries of
// the calls' primary key, a page of events a range of an index.
func TestWritePathPlans(t *testing.T) {
	dsn := pgtest.WithParams(pgtest.Start(t), "synchronous_commit", "off")
	s, err := Open(t.Context(), dsn, &Options{Schema: pgtest.Schema(t, dsn)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, fill := range []string{
		`INSERT INTO threads (id, version, status, run_id, message_count, created_at, updated_at)
SELECT 'thread-' || i, 1, 'idle', 'run', 40, now(), now() FROM generate_series(1, 1000) i`,
		`INSERT INTO messages (thread_id, position, body)
SELECT 'thread-' || i, p, '{"role":"user","content":"hello"}' FROM generate_series(1, 1000) i, generate_series(0, 39) p`,
		`INSERT INTO tool_calls (thread_id, run_id, call_id, tool, args, state, result, updated_at)
SELECT 'thread-' || (i % 1000), 'run', 'call-' || i, 'bash', '{}', 'done', '{}', now() FROM generate_series(1, 50000) i`,
		`INSERT INTO events (seq, thread_id, run_id, type, data, at)
SELECT i::bigint * 65536, 'thread-' || (i % 1000), 'run', 'step', '{}', now() FROM generate_series(1, 50000) i`,
		`ANALYZE`,
	} {
		if _, err := s.pool.Exec(t.Context(), fill); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		what  string
		st    listsql.Stmt
		index string
	}{
		{"LoadThread", listsql.Stmt{SQL: loadThread, Args: []any{"thread-7"}}, "messages_pkey"},
		{"ListToolCalls of a turn", listsql.Stmt{SQL: `SELECT call_id FROM tool_calls WHERE thread_id = $1 AND run_id = $2 AND call_id = ANY($3) ORDER BY call_id`,
			Args: []any{"thread-7", "run", []string{"call-7", "call-1007"}}}, "tool_calls_pkey"},
		{"ListEvents", listsql.Stmt{SQL: listEvents, Args: []any{int64(25000 * 65536), 500}}, "events_pkey"},
		{"ListEvents of a thread", listsql.Stmt{SQL: listThreadEvents, Args: []any{int64(25000 * 65536), 500, "thread-7"}}, "events_by_thread"},
	} {
		p := explain(t, s, c.st)
		if strings.Contains(p, "Seq Scan on messages") || strings.Contains(p, "Seq Scan on tool_calls") || strings.Contains(p, "Seq Scan on events") || !strings.Contains(p, c.index) {
			t.Errorf("%s:\n%s", c.what, p)
		} else {
			t.Logf("%s:\n%s", c.what, p)
		}
	}
}
