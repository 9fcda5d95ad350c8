// Package listsql writes the SQL of the stores' lists and counts, once for
// SQLite and PostgreSQL: the same keyset conditions and orders over the
// same columns, so that both stores page alike. Each store's migrations
// make the indexes these statements are written for.
package listsql

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/internal/cursor"
)

// Dialect is what differs between the databases.
type Dialect struct {
	// Param is the placeholder of the n-th argument, from 1.
	Param func(n int) string
	// Time is a time as the store's columns hold it.
	Time func(time.Time) any
	// Bytewise is col compared byte by byte, as Go compares strings (the
	// order of thread IDs must not depend on a database's collation).
	Bytewise func(col string) string
	// Contains is the condition that the text of col (a JSON column's
	// text as stored) contains the argument p, ASCII letters in either
	// case.
	Contains func(col, p string) string
}

type query struct {
	d    Dialect
	n    int // placeholders so far, across statements
	args []any
}

func (q *query) arg(v any) string {
	q.n++
	q.args = append(q.args, v)
	return q.d.Param(q.n)
}

// questionWhere is the filter of f, as conditions joined by AND.
func (q *query) questionWhere(f checkpoint.QuestionFilter) []string {
	var w []string
	if f.ThreadID != "" {
		w = append(w, "thread_id = "+q.arg(f.ThreadID))
	}
	switch f.Status {
	case "":
	case checkpoint.QuestionPending:
		// A literal, so that PostgreSQL's planner may use the partial
		// indexes of the pending queue (WHERE status = 'pending').
		w = append(w, "status = 'pending'")
	default:
		w = append(w, "status = "+q.arg(string(f.Status)))
	}
	if f.Tool != "" {
		w = append(w, "tool = "+q.arg(f.Tool))
	}
	if f.Kind != "" {
		w = append(w, "kind = "+q.arg(f.Kind))
	}
	return w
}

func where(w []string) string {
	if len(w) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(w, " AND ")
}

// Stmt is one statement and its arguments.
type Stmt struct {
	SQL  string
	Args []any
}

// Questions returns the SELECTs of cols (which start with seq) of a page
// of the questions that match f, after the position after (nil: from the
// start), in f.Order. Their rows, one statement after the other, are the
// list in order; each returns at most limit+1 rows (the page, and one more
// to tell whether a next page exists), so a caller reads them in turn
// until it has limit+1 rows. Placeholders are numbered across the
// statements, as [Union] joins them.
//
// DeadlineFirst has two: those with a deadline, from the position on, and
// then those without (from the start, or from the position when it is
// among them): two ranges of an index on (deadline, seq), with the NULL
// deadlines at one end of it (the start in SQLite, the end in PostgreSQL),
// which no single range serves in this order.
// The other orders, and a position among those without a deadline, have
// one.
func Questions(d Dialect, cols string, f checkpoint.QuestionFilter, after *cursor.Question, limit int) []Stmt {
	q := &query{d: d}
	n := " LIMIT " + strconv.Itoa(limit+1)
	sel := "SELECT " + cols + " FROM questions"
	if f.Order != checkpoint.DeadlineFirst {
		w, op, dir := q.questionWhere(f), " > ", ""
		if f.Order == checkpoint.NewestFirst {
			op, dir = " < ", " DESC"
		}
		if after != nil {
			w = append(w, "seq"+op+q.arg(after.Seq))
		}
		return []Stmt{{sel + where(w) + " ORDER BY seq" + dir + n, q.args}}
	}
	var parts []Stmt
	if after == nil || !after.Deadline.IsZero() {
		w := append(q.questionWhere(f), "deadline IS NOT NULL")
		if after != nil {
			// A row value: both databases scan an index range from it.
			w = append(w, "(deadline, seq) > ("+q.arg(q.d.Time(after.Deadline))+", "+q.arg(after.Seq)+")")
		}
		parts = append(parts, Stmt{sel + where(w) + " ORDER BY deadline, seq" + n, q.args})
		q.args = nil
	}
	w := append(q.questionWhere(f), "deadline IS NULL")
	if after != nil && after.Deadline.IsZero() {
		w = append(w, "seq > "+q.arg(after.Seq))
	}
	// By deadline (NULL in all of them), then seq: the order of the index
	// the range is in. Ordered by seq alone, PostgreSQL does not see that
	// the range is in that order, and sorts it.
	return append(parts, Stmt{sel + where(w) + " ORDER BY deadline, seq" + n, q.args})
}

// Union joins the statements of a page of [Questions] into one: one round
// trip and one snapshot, at the cost of reading both ranges in full
// (at most 2*(limit+1) rows, sorted again).
func Union(parts []Stmt, limit int) Stmt {
	if len(parts) == 1 {
		return parts[0]
	}
	return Stmt{
		"SELECT * FROM (SELECT * FROM (" + parts[0].SQL + ") a UNION ALL SELECT * FROM (" + parts[1].SQL + ") b) page" +
			" ORDER BY deadline IS NULL, deadline, seq LIMIT " + strconv.Itoa(limit+1),
		append(slices.Clip(parts[0].Args), parts[1].Args...),
	}
}

// CountQuestions is the count of the questions that match f.
func CountQuestions(d Dialect, f checkpoint.QuestionFilter) Stmt {
	q := &query{d: d}
	return Stmt{"SELECT count(*) FROM questions" + where(q.questionWhere(f)), q.args}
}

// Threads is the SELECT of cols of up to limit+1 threads (the page, and
// one more) that match f, after the position after (nil: from the start),
// newest first: a range of an index on (created_at, id), or on (status,
// created_at, id) when f has a Status, read backwards.
func Threads(d Dialect, cols string, f checkpoint.ThreadFilter, after *cursor.Thread, limit int) Stmt {
	q := &query{d: d}
	var w []string
	if f.Status != "" {
		w = append(w, "status = "+q.arg(string(f.Status)))
	}
	if f.Questions != "" {
		w = append(w, "EXISTS (SELECT 1 FROM questions q WHERE q.thread_id = threads.id AND q.status = "+q.arg(string(f.Questions))+")")
	}
	if f.Search != "" {
		w = append(w, "("+d.Contains("threads.id", q.arg(f.Search))+
			" OR EXISTS (SELECT 1 FROM messages m WHERE m.thread_id = threads.id AND "+d.Contains("m.body", q.arg(f.Search))+")"+
			" OR EXISTS (SELECT 1 FROM questions q WHERE q.thread_id = threads.id AND "+d.Contains("q.tool", q.arg(f.Search))+"))")
	}
	id := d.Bytewise("id")
	if after != nil {
		w = append(w, "(created_at, "+id+") < ("+q.arg(d.Time(after.CreatedAt))+", "+q.arg(after.ID)+")")
	}
	return Stmt{"SELECT " + cols + " FROM threads" + where(w) + " ORDER BY created_at DESC, " + id + " DESC LIMIT " + strconv.Itoa(limit+1), q.args}
}
