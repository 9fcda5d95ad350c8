package checkpointtest

import (
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// The reviewers' queue: ListQuestions with every filter and order, its
// cursors, and CountQuestions.

var orders = []checkpoint.QuestionOrder{checkpoint.OldestFirst, checkpoint.NewestFirst, checkpoint.DeadlineFirst}

// queued is what the tests know of a question they created: the order of
// creation and what the filters and orders look at.
type queued struct {
	thread, id, tool, kind string
	n                      int // creation order in the test's store
	deadline               time.Time
	status                 checkpoint.QuestionStatus
}

func (q queued) key() string { return q.thread + "/" + q.id }

// queue creates questions in one store and remembers them.
type queue struct {
	t  *testing.T
	s  checkpoint.Store
	qs []*queued
}

// add creates a pending question; a zero deadline means none.
func (qu *queue) add(thread, qid, tool, kind string, deadline time.Time) *queued {
	qu.t.Helper()
	q := newQuestion(thread, qid)
	q.Tool, q.Kind, q.CreatedAt, q.Deadline = tool, kind, t0, deadline
	mustCreateQuestion(qu.t, qu.s, q)
	m := &queued{thread: thread, id: qid, tool: tool, kind: kind, n: len(qu.qs), deadline: deadline, status: checkpoint.QuestionPending}
	qu.qs = append(qu.qs, m)
	return m
}

// resolve aborts q (whatever its deadline).
func (qu *queue) resolve(q *queued) {
	qu.t.Helper()
	if _, err := qu.s.ResolveQuestion(ctx(qu.t), q.thread, q.id, checkpoint.Resolution{Status: checkpoint.QuestionAborted, By: "abort", At: t0}); err != nil {
		qu.t.Fatalf("ResolveQuestion(%s): %v", q.key(), err)
	}
	q.status = checkpoint.QuestionAborted
}

// before is the definition of the orders, written again from the Store
// documentation rather than taken from any store.
func before(o checkpoint.QuestionOrder, a, b *queued) bool {
	switch o {
	case checkpoint.NewestFirst:
		return a.n > b.n
	case checkpoint.DeadlineFirst:
		if a.deadline.IsZero() != b.deadline.IsZero() {
			return !a.deadline.IsZero()
		}
		if !a.deadline.Equal(b.deadline) {
			return a.deadline.Before(b.deadline)
		}
	}
	return a.n < b.n
}

func (q *queued) matches(f checkpoint.QuestionFilter) bool {
	return (f.ThreadID == "" || q.thread == f.ThreadID) && (f.Status == "" || q.status == f.Status) &&
		(f.Tool == "" || q.tool == f.Tool) && (f.Kind == "" || q.kind == f.Kind)
}

// want lists the keys of the questions that match f, in f.Order.
func (qu *queue) want(f checkpoint.QuestionFilter) []string {
	var ms []*queued
	for _, q := range qu.qs {
		if q.matches(f) {
			ms = append(ms, q)
		}
	}
	slices.SortFunc(ms, func(a, b *queued) int {
		if before(f.Order, a, b) {
			return -1
		}
		return 1
	})
	keys := make([]string, len(ms))
	for i, q := range ms {
		keys[i] = q.key()
	}
	return keys
}

// page reads one page, checking what every page must be.
func (qu *queue) page(f checkpoint.QuestionFilter) ([]*checkpoint.Question, string) {
	qu.t.Helper()
	qs, next, err := qu.s.ListQuestions(ctx(qu.t), f)
	if err != nil {
		qu.t.Fatalf("ListQuestions(%+v): %v", f, err)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	if len(qs) > limit {
		qu.t.Fatalf("ListQuestions(%+v): %d questions, more than the limit", f, len(qs))
	}
	if next != "" && len(qs) < limit {
		qu.t.Fatalf("ListQuestions(%+v): a page of %d, short of the limit, with a next cursor", f, len(qs))
	}
	for _, q := range qs {
		if f.ThreadID != "" && q.ThreadID != f.ThreadID || f.Status != "" && q.Status != f.Status ||
			f.Tool != "" && q.Tool != f.Tool || f.Kind != "" && q.Kind != f.Kind {
			qu.t.Errorf("ListQuestions(%+v) returned %s/%s (%s, tool %q, kind %q)", f, q.ThreadID, q.ID, q.Status, q.Tool, q.Kind)
		}
	}
	return qs, next
}

// all walks every page of f; between reads is called after each page
// but the last, with the page.
func (qu *queue) all(f checkpoint.QuestionFilter, between func([]*checkpoint.Question)) []string {
	qu.t.Helper()
	var keys []string
	for pages := 0; ; pages++ {
		qs, next := qu.page(f)
		for _, q := range qs {
			keys = append(keys, q.ThreadID+"/"+q.ID)
		}
		if next == "" {
			return keys
		}
		if pages > 1000 {
			qu.t.Fatalf("ListQuestions(%+v): no end after 1000 pages", f)
		}
		if between != nil {
			between(qs)
		}
		f.After = next
	}
}

func (qu *queue) find(key string) *queued {
	for _, q := range qu.qs {
		if q.key() == key {
			return q
		}
	}
	qu.t.Fatalf("ListQuestions returned %s, which the test did not create", key)
	return nil
}

func testQueue(t *testing.T, setup setupFunc) {
	// Every filter alone and together, in every order and page size, and
	// the counts of the same filters.
	t.Run("Filters", func(t *testing.T) { testQueueFilters(t, setup) })

	// Ties: equal creation times (all questions here have CreatedAt t0),
	// equal deadlines, deadlines a microsecond apart, none; deadlines in
	// another order than creation, before 1970 and centuries away.
	t.Run("Orders", func(t *testing.T) { testQueueOrders(t, setup) })

	// Questions are created and resolved between pages: the questions
	// that were there from the start and stay pending come exactly once,
	// the new ones at most once, and all in order. With OldestFirst the
	// new ones all come (they are created after every position so far).
	t.Run("PagingWhileWriting", func(t *testing.T) { testQueuePagingWhileWriting(t, setup) })

	t.Run("BadCursors", func(t *testing.T) { testQueueBadCursors(t, setup) })
}

func testQueueFilters(t *testing.T, setup setupFunc) {
	qu := &queue{t: t, s: setup(t)}
	a, b := id("thread-a"), id("thread-b")
	tools := []string{"bash", "deploy", ""}
	kinds := []string{"approve", "ask"}
	for i := range 24 {
		thread := a
		if i%4 >= 2 {
			thread = b
		}
		var deadline time.Time
		if i%3 != 0 {
			deadline = t0.Add(time.Duration(24-i%7) * time.Minute)
		}
		q := qu.add(thread, fmt.Sprintf("q%02d", i), tools[i%3], kinds[i%2], deadline)
		if i%5 == 0 {
			qu.resolve(q)
		}
	}
	pending := checkpoint.QuestionPending
	filters := []checkpoint.QuestionFilter{
		{},
		{ThreadID: a},
		{Status: pending},
		{Status: checkpoint.QuestionAborted},
		{Status: checkpoint.QuestionAnswered},
		{Tool: "bash"},
		{Tool: "deploy", Status: pending},
		{Tool: "nothing"},
		{Kind: "ask"},
		{Kind: "ask", Status: pending},
		{ThreadID: b, Status: pending, Tool: "bash"},
		{ThreadID: b, Status: pending, Tool: "deploy", Kind: "approve"},
		{ThreadID: a, Kind: "approve", Tool: ""},
		{ThreadID: id("nobody")},
	}
	for _, f := range filters {
		for _, o := range orders {
			for _, limit := range []int{0, 1, 3, 25} {
				f := f
				f.Order, f.Limit = o, limit
				if got, want := qu.all(f, nil), qu.want(f); !slices.Equal(got, want) {
					t.Errorf("ListQuestions(%+v):\n got %v\nwant %v", f, got, want)
				}
			}
		}
		want := int64(len(qu.want(f)))
		// Count ignores the order, the cursor (even one that is not)
		// and the limit.
		for _, g := range []checkpoint.QuestionFilter{f, {Order: checkpoint.DeadlineFirst, After: "not a cursor", Limit: 1}} {
			g.ThreadID, g.Status, g.Tool, g.Kind = f.ThreadID, f.Status, f.Tool, f.Kind
			if n, err := qu.s.CountQuestions(ctx(t), g); err != nil || n != want {
				t.Errorf("CountQuestions(%+v) = %d, %v; want %d", g, n, err, want)
			}
		}
	}
}

func testQueueOrders(t *testing.T, setup setupFunc) {
	qu := &queue{t: t, s: setup(t)}
	thread := id("thread")
	for i, d := range []time.Time{
		{},
		t0.Add(time.Hour),
		t0.Add(time.Minute),
		{},
		t0.Add(time.Minute),
		t0.Add(time.Minute + time.Microsecond),
		time.Date(1969, 7, 20, 20, 17, 40, 0, time.UTC),
		t0.AddDate(500, 0, 0),
		t0.Add(time.Minute),
		{},
		t0.Add(time.Minute - time.Microsecond),
	} {
		qu.add(thread, fmt.Sprintf("q%02d", i), "bash", "approve", d)
	}
	for _, o := range orders {
		for _, limit := range []int{1, 2, 3, 4, 10, 11, 0} {
			f := checkpoint.QuestionFilter{ThreadID: thread, Order: o, Limit: limit}
			if got, want := qu.all(f, nil), qu.want(f); !slices.Equal(got, want) {
				t.Errorf("%s by %d:\n got %v\nwant %v", o, limit, got, want)
			}
		}
	}
	// Spelled out once, for a reader: the deadline order.
	var want []string
	for _, qid := range strings.Fields("q06 q10 q02 q04 q08 q05 q01 q07 q00 q03 q09") {
		want = append(want, thread+"/"+qid)
	}
	if got := qu.all(checkpoint.QuestionFilter{Order: checkpoint.DeadlineFirst, Limit: 4}, nil); !slices.Equal(got, want) {
		t.Errorf("deadline first:\n got %v\nwant %v", got, want)
	}
}

func testQueuePagingWhileWriting(t *testing.T, setup setupFunc) {
	for _, o := range orders {
		t.Run(strings.ReplaceAll(o.String(), " ", "_"), func(t *testing.T) {
			qu := &queue{t: t, s: setup(t)}
			thread := id("thread")
			deadline := func(i int) time.Time {
				if i%3 == 0 {
					return time.Time{}
				}
				return t0.Add(time.Duration(i%11) * time.Minute)
			}
			for i := range 30 {
				qu.add(thread, fmt.Sprintf("q%02d", i), "bash", "approve", deadline(i))
			}
			initial := slices.Clone(qu.qs)
			var seen []*queued
			round := 0
			f := checkpoint.QuestionFilter{Status: checkpoint.QuestionPending, Order: o, Limit: 4}
			got := qu.all(f, func(page []*checkpoint.Question) {
				round++
				// New questions: one due before anything so far, one
				// with the page's last deadline, and one due after
				// everything or without a deadline. Three, fewer than
				// a page, so that the list has an end.
				last, later := page[len(page)-1], t0.Add(time.Hour)
				if round%2 == 0 {
					later = time.Time{}
				}
				for j, d := range []time.Time{t0.Add(-time.Hour), last.Deadline, later} {
					qu.add(thread, fmt.Sprintf("new%02d-%d", round, j), "bash", "approve", d)
				}
				// Resolve one question not yet listed, and one listed.
				for _, q := range initial {
					if q.status == checkpoint.QuestionPending && !slices.Contains(seen, q) && !slices.ContainsFunc(page, func(p *checkpoint.Question) bool { return p.ID == q.id }) {
						qu.resolve(q)
						break
					}
				}
				qu.resolve(qu.find(thread + "/" + page[0].ID))
				for _, p := range page {
					seen = append(seen, qu.find(thread+"/"+p.ID))
				}
			})
			if round < 5 {
				t.Fatalf("only %d pages", round+1)
			}
			var prev *queued
			count := map[string]int{}
			for _, key := range got {
				q := qu.find(key)
				count[key]++
				if count[key] > 1 {
					t.Errorf("%s listed twice", key)
				}
				if prev != nil && !before(o, prev, q) {
					t.Errorf("%s listed after %s: out of order", key, prev.key())
				}
				prev = q
			}
			for _, q := range initial {
				if q.status == checkpoint.QuestionPending && count[q.key()] != 1 {
					t.Errorf("%s, pending from start to end, listed %d times", q.key(), count[q.key()])
				}
			}
			if o == checkpoint.OldestFirst {
				for _, q := range qu.qs[len(initial):] {
					if count[q.key()] != 1 {
						t.Errorf("oldest first: %s, created while paging, listed %d times", q.key(), count[q.key()])
					}
				}
			}
		})
	}
}

func testQueueBadCursors(t *testing.T, setup setupFunc) {
	qu := &queue{t: t, s: setup(t)}
	thread := id("thread")
	for i := range 5 {
		d := time.Time{}
		if i%2 == 0 {
			d = t0.Add(time.Duration(i) * time.Minute)
		}
		qu.add(thread, fmt.Sprintf("q%d", i), "bash", "approve", d)
	}
	// A cursor of each order, with a deadline and without.
	cursors := map[checkpoint.QuestionOrder][]string{}
	for _, o := range orders {
		for _, limit := range []int{1, 4} {
			_, next := qu.page(checkpoint.QuestionFilter{Order: o, Limit: limit})
			if next == "" {
				t.Fatalf("%s by %d: no next cursor", o, limit)
			}
			cursors[o] = append(cursors[o], next)
		}
	}
	refused := func(f checkpoint.QuestionFilter, what string) {
		t.Helper()
		qs, next, err := qu.s.ListQuestions(ctx(t), f)
		if !errors.Is(err, checkpoint.ErrBadCursor) {
			t.Errorf("ListQuestions(%s, %s) = %d questions, cursor %q, %v; want ErrBadCursor", f.Order, what, len(qs), next, err)
		}
	}
	for _, o := range orders {
		for _, other := range orders {
			if other == o {
				continue
			}
			for _, c := range cursors[other] {
				refused(checkpoint.QuestionFilter{Order: o, After: c}, "a cursor of "+other.String())
			}
		}
		for _, c := range cursors[o] {
			b, _ := base64.RawURLEncoding.DecodeString(c)
			for what, bad := range map[string]string{
				"a truncated cursor":          c[:len(c)-1],
				"a cursor with padding":       base64.URLEncoding.EncodeToString(b),
				"a cursor in standard base64": strings.NewReplacer("-", "+", "_", "/").Replace(c) + "+",
				"a cursor and more":           c + c,
				"a cursor with a space":       " " + c,
			} {
				if bad != c {
					refused(checkpoint.QuestionFilter{Order: o, After: bad}, what)
				}
			}
		}
		for _, bad := range []string{"not a cursor!", "0", "1", "5", "-1", "q1", "%00", "\x00", strings.Repeat("A", 10000),
			base64.RawURLEncoding.EncodeToString([]byte("q1.0.-5")),
			base64.RawURLEncoding.EncodeToString([]byte("q1.0.1.2.3")),
			base64.RawURLEncoding.EncodeToString([]byte("q1.2.1")),
			base64.RawURLEncoding.EncodeToString([]byte("q1.2.1.1.1000000000")),
			base64.RawURLEncoding.EncodeToString([]byte("q1.9.1")),
			base64.RawURLEncoding.EncodeToString([]byte("t1.0.0.thread")),
		} {
			refused(checkpoint.QuestionFilter{Order: o, After: bad}, fmt.Sprintf("%q", bad))
		}
	}
	// Nothing is remembered of refusals: the cursors still work.
	for _, o := range orders {
		f := checkpoint.QuestionFilter{Order: o, Limit: 1, After: cursors[o][0]}
		if qs, _ := qu.page(f); len(qs) != 1 || qs[0].ID != strings.TrimPrefix(qu.want(f)[1], thread+"/") {
			t.Errorf("%s: the cursor of page 1 after the refusals gives %v", o, qs)
		}
	}
	if _, _, err := qu.s.ListQuestions(ctx(t), checkpoint.QuestionFilter{Order: checkpoint.QuestionOrder(7)}); err == nil {
		t.Errorf("ListQuestions(order 7): no error")
	}
}
