package sqlite

import (
	"strings"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/internal/cursor"
	"github.com/tollgate-ai/tollgate/checkpoint/internal/listsql"
)

// plan returns SQLite's plan of query, one step a line.
func plan(t *testing.T, s *Store, query string, args []any) []string {
	t.Helper()
	rows, err := s.r.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	var steps []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		steps = append(steps, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return steps
}

// The reviewers' queue reads index ranges: a page of pending questions, in
// every order, of one tool or not, from the start or from a cursor, never
// scans the table and never sorts. This is what makes
// the first page take the same time with 100 or 100,000 pending (see
// BenchmarkQueue); the plan does not depend on the data (no ANALYZE).
func TestQueuePlans(t *testing.T) {
	s, err := Open(t.Context(), ":memory:", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d := time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)
	afters := map[checkpoint.QuestionOrder][]*cursor.Question{
		checkpoint.OldestFirst:   {nil, {Order: checkpoint.OldestFirst, Seq: 7}},
		checkpoint.NewestFirst:   {nil, {Order: checkpoint.NewestFirst, Seq: 7}},
		checkpoint.DeadlineFirst: {nil, {Order: checkpoint.DeadlineFirst, Seq: 7, Deadline: d}, {Order: checkpoint.DeadlineFirst, Seq: 7}},
	}
	for _, tool := range []string{"", "bash"} {
		for order, cs := range afters {
			for _, after := range cs {
				f := checkpoint.QuestionFilter{Status: checkpoint.QuestionPending, Tool: tool, Order: order}
				for _, st := range listsql.Questions(dialect, questionCols, f, after, 50) {
					steps := plan(t, s, st.SQL, st.Args)
					for _, step := range steps {
						if strings.HasPrefix(step, "SCAN questions") {
							t.Errorf("%+v after %+v: scans the table:\n%s", f, after, strings.Join(steps, "\n"))
						}
						if strings.Contains(step, "TEMP B-TREE") {
							t.Errorf("%+v after %+v: sorts:\n%s", f, after, strings.Join(steps, "\n"))
						}
						// Filtered by the index, not row by row after it.
						if tool != "" && strings.HasPrefix(step, "SEARCH questions") && !strings.Contains(step, "tool=?") {
							t.Errorf("%+v after %+v: reads pending questions of every tool:\n%s", f, after, strings.Join(steps, "\n"))
						}
					}
				}
			}
		}
		st := listsql.CountQuestions(dialect, checkpoint.QuestionFilter{Status: checkpoint.QuestionPending, Tool: tool})
		if steps := plan(t, s, st.SQL, st.Args); len(steps) != 1 || !strings.Contains(steps[0], "COVERING INDEX") {
			t.Errorf("count of pending, tool %q: not from an index alone:\n%s", tool, strings.Join(steps, "\n"))
		}
	}
}

// A page of threads, newest first, with a status or not, from the start
// or from a cursor, is an index range read backwards: no scan, no sort.
func TestThreadListPlans(t *testing.T) {
	s, err := Open(t.Context(), ":memory:", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	after := &cursor.Thread{CreatedAt: time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC), ID: "t"}
	for _, f := range []checkpoint.ThreadFilter{{}, {Status: checkpoint.ThreadRunning}} {
		for _, a := range []*cursor.Thread{nil, after} {
			st := listsql.Threads(dialect, threadCols, f, a, 100)
			steps := plan(t, s, st.SQL, st.Args)
			t.Logf("%+v after %v: %s", f, a != nil, strings.Join(steps, "; "))
			if len(steps) != 1 || !strings.HasPrefix(steps[0], "SEARCH threads USING INDEX") && !strings.HasPrefix(steps[0], "SCAN threads USING INDEX") {
				t.Errorf("%+v after %+v: not one index range:\n%s", f, a, strings.Join(steps, "\n"))
			}
		}
	}
}

// Reading a thread for a model call, and a turn's tool calls, are lookups
// of a primary key: no scan, and no sort (the messages come in the order of
// the key). Also the writes of a step, and the listing of a run's calls.
func TestThreadAndToolCallPlans(t *testing.T) {
	s, err := Open(t.Context(), ":memory:", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ids := make([]any, 2+toolCallChunk)
	for i := range ids {
		ids[i] = "x"
	}
	for _, c := range []struct {
		query string
		args  []any
	}{
		{qLoadThread, []any{"t"}},
		{qGetToolCalls, ids},
		{qListToolCalls, []any{"t", "r"}},
		{qAppendThread, []any{"running", "r", 1, 1, 10, "t", 1}},
		{qAppendSameStatus, []any{"r", 1, 1, 10, "t", 1, "running"}},
		{qReplaceThread, []any{"running", "r", 1, 1, 10, "t", 1}},
		{qDeleteMessages, []any{"t"}},
		{qThreadState, []any{"t"}},
	} {
		steps := plan(t, s, c.query, c.args)
		t.Logf("%s\n\t%s", strings.SplitN(c.query, "\n", 2)[0], strings.Join(steps, "\n\t"))
		for _, step := range steps {
			if strings.HasPrefix(step, "SCAN") || strings.Contains(step, "TEMP B-TREE") {
				t.Errorf("%s: scans or sorts:\n%s", c.query, strings.Join(steps, "\n"))
			}
		}
		if len(steps) == 0 {
			t.Errorf("%s: no plan", c.query)
		}
	}
}
