package checkpointtest

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// Listing threads: newest first, by status, paged, without messages.

// threadOrder is the definition of the order, written again from the
// Store documentation: CreatedAt, the latest first, then ID, bytes in
// descending order.
func threadOrder(a, b *checkpoint.Thread) int {
	if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
		return c
	}
	return strings.Compare(b.ID, a.ID)
}

// listThreads walks every page of f; between is called after each page
// but the last, with the page.
func listThreads(t *testing.T, s checkpoint.Store, f checkpoint.ThreadFilter, between func([]*checkpoint.Thread)) []*checkpoint.Thread {
	t.Helper()
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	var all []*checkpoint.Thread
	for pages := 0; ; pages++ {
		ts, next, err := s.ListThreads(ctx(t), f)
		if err != nil {
			t.Fatalf("ListThreads(%+v): %v", f, err)
		}
		if len(ts) > limit || next != "" && len(ts) < limit {
			t.Fatalf("ListThreads(%+v): a page of %d, cursor %q", f, len(ts), next)
		}
		for _, th := range ts {
			if f.Status != "" && th.Status != f.Status {
				t.Errorf("ListThreads(%+v) returned %s (%s)", f, th.ID, th.Status)
			}
			if th.Messages != nil {
				t.Errorf("ListThreads(%+v) returned %s with its messages", f, th.ID)
			}
		}
		all = append(all, ts...)
		if next == "" {
			return all
		}
		if pages > 1000 {
			t.Fatalf("ListThreads(%+v): no end after 1000 pages", f)
		}
		if between != nil {
			between(ts)
		}
		f.After = next
	}
}

func threadIDs(ts []*checkpoint.Thread) []string {
	ids := make([]string, len(ts))
	for i, th := range ts {
		ids[i] = th.ID
	}
	return ids
}

func testListThreads(t *testing.T, setup setupFunc) {
	// Every field but Messages, in order: ties of CreatedAt broken by ID
	// in byte order (not a collation's: "B" before "_" before "a").
	t.Run("List", func(t *testing.T) { testListThreadsList(t, setup) })

	t.Run("ListDefaultLimit", func(t *testing.T) { testListThreadsListDefaultLimit(t, setup) })

	// Threads are created, and runs start and end, between pages: the
	// threads that run from start to end come exactly once, the others at
	// most once, and all newest first.
	t.Run("ListPagingWhileWriting", func(t *testing.T) { testListThreadsListPagingWhileWriting(t, setup) })

	t.Run("ListBadCursors", func(t *testing.T) { testListThreadsListBadCursors(t, setup) })
}

func testListThreadsList(t *testing.T, setup setupFunc) {
	s := setup(t)
	base := id("thread")
	var want []*checkpoint.Thread
	for i, suffix := range []string{"A", "a", "B", "_", "é", "b", "A0", "z", "Z", "-"} {
		th := &checkpoint.Thread{
			ID: base + "/" + suffix, Status: checkpoint.ThreadIdle, RunID: fmt.Sprint("run-", i),
			Messages: []byte(`[{"role":"user","content":"` + strings.Repeat("long conversation ", 1000) + `"}]`),
			// Three instants, so that most threads tie with others.
			CreatedAt: t0.Add(time.Duration(i%3) * time.Second),
		}
		if i%2 == 1 {
			th.Status = checkpoint.ThreadRunning
		}
		mustCreateThread(t, s, th)
		if i%4 == 0 { // a few saves: Version and UpdatedAt of a saved thread
			th.RunID = "run-again"
			if err := s.SaveThread(ctx(t), th); err != nil {
				t.Fatal(err)
			}
		}
		loaded, err := s.LoadThread(ctx(t), th.ID)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, loaded)
	}
	slices.SortFunc(want, threadOrder)
	for _, f := range []checkpoint.ThreadFilter{
		{}, {Limit: 1}, {Limit: 3}, {Limit: 10}, {Limit: 11},
		{Status: checkpoint.ThreadRunning}, {Status: checkpoint.ThreadRunning, Limit: 2},
		{Status: checkpoint.ThreadIdle, Limit: 4}, {Status: "stopped"},
	} {
		var w []*checkpoint.Thread
		for _, th := range want {
			if f.Status == "" || th.Status == f.Status {
				w = append(w, th)
			}
		}
		got := listThreads(t, s, f, nil)
		if !slices.Equal(threadIDs(got), threadIDs(w)) {
			t.Errorf("ListThreads(%+v):\n got %q\nwant %q", f, threadIDs(got), threadIDs(w))
			continue
		}
		for i, g := range got {
			l := w[i]
			if g.Version != l.Version || g.Status != l.Status || g.RunID != l.RunID {
				t.Errorf("listed %s = version %d, %s, run %q; LoadThread says %d, %s, %q", g.ID, g.Version, g.Status, g.RunID, l.Version, l.Status, l.RunID)
			}
			checkTime(t, g.ID+" CreatedAt", g.CreatedAt, l.CreatedAt)
			checkTime(t, g.ID+" UpdatedAt", g.UpdatedAt, l.UpdatedAt)
		}
	}
}

func testListThreadsListDefaultLimit(t *testing.T, setup setupFunc) {
	s := setup(t)
	for i := range 101 {
		mustCreateThread(t, s, &checkpoint.Thread{ID: id("thread"), CreatedAt: t0.Add(time.Duration(i) * time.Millisecond)})
	}
	ts, next, err := s.ListThreads(ctx(t), checkpoint.ThreadFilter{})
	if err != nil || len(ts) != 100 || next == "" {
		t.Fatalf("ListThreads(no limit) = %d threads, cursor %q, %v; want 100 and a cursor", len(ts), next, err)
	}
	rest, next, err := s.ListThreads(ctx(t), checkpoint.ThreadFilter{After: next})
	if err != nil || len(rest) != 1 || next != "" || !rest[0].CreatedAt.Equal(t0) {
		t.Fatalf("ListThreads(page 2) = %d threads, cursor %q, %v; want the first one created", len(rest), next, err)
	}
}

func testListThreadsListPagingWhileWriting(t *testing.T, setup setupFunc) {
	s := setup(t)
	byID := map[string]*checkpoint.Thread{}
	create := func(name string, created time.Time, status checkpoint.ThreadStatus) *checkpoint.Thread {
		th := mustCreateThread(t, s, &checkpoint.Thread{ID: id(name), Status: status, RunID: "run-1", CreatedAt: created})
		byID[th.ID] = th
		return th
	}
	var initial []*checkpoint.Thread
	for i := range 30 {
		initial = append(initial, create("thread", t0.Add(time.Duration(i/2)*time.Second), checkpoint.ThreadRunning))
	}
	setStatus := func(th *checkpoint.Thread, status checkpoint.ThreadStatus) {
		th.Status = status
		if err := s.SaveThread(ctx(t), th); err != nil {
			t.Fatal(err)
		}
	}
	ended := map[string]bool{}
	seen := map[string]bool{}
	round := 0
	got := listThreads(t, s, checkpoint.ThreadFilter{Status: checkpoint.ThreadRunning, Limit: 4}, func(page []*checkpoint.Thread) {
		round++
		last := page[len(page)-1]
		for _, th := range page {
			seen[th.ID] = true
		}
		// Created while paging: after everything, before everything,
		// and at the instant of the position reached.
		create(fmt.Sprint("new-late-", round), t0.Add(time.Hour), checkpoint.ThreadRunning)
		create(fmt.Sprint("new-early-", round), t0.Add(-time.Hour), checkpoint.ThreadRunning)
		create(fmt.Sprint("new-same-", round), last.CreatedAt, checkpoint.ThreadRunning)
		// A run not listed yet ends; a listed one ends; one starts
		// on an idle thread.
		for _, th := range initial {
			if !seen[th.ID] && !ended[th.ID] {
				setStatus(th, checkpoint.ThreadIdle)
				ended[th.ID] = true
				break
			}
		}
		setStatus(byID[page[0].ID], checkpoint.ThreadIdle)
		ended[page[0].ID] = true
		setStatus(create(fmt.Sprint("idle-", round), t0.Add(time.Duration(round)*time.Second), checkpoint.ThreadIdle), checkpoint.ThreadRunning)
	})
	if round < 4 {
		t.Fatalf("only %d pages", round+1)
	}
	count := map[string]int{}
	for i, th := range got {
		count[th.ID]++
		if count[th.ID] > 1 {
			t.Errorf("%s listed twice", th.ID)
		}
		if i > 0 && threadOrder(got[i-1], th) >= 0 {
			t.Errorf("%s listed after %s: not newest first", th.ID, got[i-1].ID)
		}
	}
	for _, th := range initial {
		if !ended[th.ID] && count[th.ID] != 1 {
			t.Errorf("%s, running from start to end, listed %d times", th.ID, count[th.ID])
		}
	}
	for key := range count {
		if strings.HasPrefix(key, "new-late-") {
			t.Errorf("%s, created after the first page with a later CreatedAt, was listed", key)
		}
	}
}

func testListThreadsListBadCursors(t *testing.T, setup setupFunc) {
	s := setup(t)
	for i := range 3 {
		mustCreateThread(t, s, &checkpoint.Thread{ID: id("thread"), CreatedAt: t0.Add(time.Duration(i) * time.Second)})
	}
	_, good, err := s.ListThreads(ctx(t), checkpoint.ThreadFilter{Limit: 1})
	if err != nil || good == "" {
		t.Fatalf("ListThreads(1) = cursor %q, %v", good, err)
	}
	mustCreateQuestion(t, s, newQuestion(id("thread"), "q1"))
	mustCreateQuestion(t, s, newQuestion(id("thread"), "q2"))
	_, questionCursor, err := s.ListQuestions(ctx(t), checkpoint.QuestionFilter{Limit: 1})
	if err != nil || questionCursor == "" {
		t.Fatalf("ListQuestions(1) = cursor %q, %v", questionCursor, err)
	}
	b, _ := base64.RawURLEncoding.DecodeString(good)
	padded := base64.URLEncoding.EncodeToString(b)
	if padded == good {
		// A cursor of a length that needs no padding (the thread IDs'
		// numbers differ with the tests run): give it one.
		padded += "=="
	}
	for what, bad := range map[string]string{
		"a cursor of ListQuestions": questionCursor,
		"a truncated cursor":        good[:len(good)-1],
		"a cursor with padding":     padded,
		"a cursor and more":         good + "A",
		"garbage":                   "not a cursor!",
		"a number":                  "5",
		"a forged cursor":           base64.RawURLEncoding.EncodeToString([]byte("t1.0.0.thread")),
	} {
		if ts, next, err := s.ListThreads(ctx(t), checkpoint.ThreadFilter{After: bad}); !errors.Is(err, checkpoint.ErrBadCursor) {
			t.Errorf("ListThreads(%s) = %d threads, cursor %q, %v; want ErrBadCursor", what, len(ts), next, err)
		}
	}
	if ts, _, err := s.ListThreads(ctx(t), checkpoint.ThreadFilter{After: good}); err != nil || len(ts) != 2 {
		t.Errorf("ListThreads(good cursor) after the refusals = %d threads, %v; want 2", len(ts), err)
	}
}

func testListThreadsFiltered(t *testing.T, setup setupFunc) {
	// Questions keeps the threads with a question in a status; Search the
	// threads whose ID, messages or questions' tools hold a text, ASCII
	// letters in either case, % and _ as themselves. Every filter here
	// has base in it, so threads of other tests in a shared database do
	// not count.
	t.Run("ListFiltered", func(t *testing.T) {
		s := setup(t)
		base := id("filtered")
		mk := func(suffix string, i int, status checkpoint.ThreadStatus, msgs ...string) string {
			th := &checkpoint.Thread{ID: base + "/" + suffix, Status: status, RunID: "run-1",
				Messages: json.RawMessage("[" + strings.Join(msgs, ",") + "]"), CreatedAt: t0.Add(time.Duration(i) * time.Second)}
			mustCreateThread(t, s, th)
			return th.ID
		}
		a := mk("a", 1, checkpoint.ThreadRunning, `{"role":"user","text":"please RM -rf build-`+base+`"}`)
		b := mk("b", 2, checkpoint.ThreadRunning, `{"role":"assistant","tool_calls":[{"id":"c1","name":"mcp__fs__write_file","arguments":{}}]}`)
		c := mk("c", 3, checkpoint.ThreadIdle, `{"role":"user","text":"héllo wörld `+base+`"}`)
		d := mk("dé", 4, checkpoint.ThreadIdle)
		e := mk("50%_x", 5, checkpoint.ThreadIdle)
		mustCreateQuestion(t, s, newQuestion(a, "q1"))
		qb := newQuestion(b, "q2")
		qb.Tool, qb.Deadline = "mcp__fs__write_file", t0
		mustCreateQuestion(t, s, qb)
		if _, err := s.Commit(ctx(t), resolve(b, "q2", checkpoint.Resolution{Status: checkpoint.QuestionTimedOut, By: "timeout", At: t0.Add(time.Second)})); err != nil {
			t.Fatal(err)
		}
		mine := func(ts []*checkpoint.Thread) []string {
			var out []string
			for _, th := range ts {
				if strings.HasPrefix(th.ID, base+"/") {
					out = append(out, th.ID)
				}
			}
			return out
		}
		for _, tc := range []struct {
			f    checkpoint.ThreadFilter
			want []string
		}{
			{checkpoint.ThreadFilter{Search: base}, []string{e, d, c, b, a}},
			{checkpoint.ThreadFilter{Search: base, Limit: 2}, []string{e, d, c, b, a}},
			{checkpoint.ThreadFilter{Search: strings.ToUpper(base)}, []string{e, d, c, b, a}},
			{checkpoint.ThreadFilter{Search: "rm -RF BUILD-" + strings.ToUpper(base)}, []string{a}},
			{checkpoint.ThreadFilter{Search: "héllo wörld " + base}, []string{c}},
			{checkpoint.ThreadFilter{Search: base + "/dé"}, []string{d}},
			{checkpoint.ThreadFilter{Search: base + "/50%_"}, []string{e}},
			{checkpoint.ThreadFilter{Search: base + "/%"}, nil},
			{checkpoint.ThreadFilter{Search: base + "/_"}, nil},
			{checkpoint.ThreadFilter{Search: base, Status: checkpoint.ThreadIdle}, []string{e, d, c}},
			{checkpoint.ThreadFilter{Search: base, Questions: checkpoint.QuestionPending}, []string{a}},
			{checkpoint.ThreadFilter{Search: base, Questions: checkpoint.QuestionTimedOut}, []string{b}},
			{checkpoint.ThreadFilter{Search: base, Questions: checkpoint.QuestionAnswered}, nil},
			{checkpoint.ThreadFilter{Search: base, Questions: checkpoint.QuestionPending, Status: checkpoint.ThreadIdle}, nil},
		} {
			if got := mine(listThreads(t, s, tc.f, nil)); !slices.Equal(got, tc.want) {
				t.Errorf("ListThreads(%+v) = %q, want %q", tc.f, got, tc.want)
			}
		}
		// A tool's name finds its threads; the others do not match.
		got := mine(listThreads(t, s, checkpoint.ThreadFilter{Search: "FS__WRITE_FILE"}, nil))
		if !slices.Equal(got, []string{b}) {
			t.Errorf("ListThreads(Search: FS__WRITE_FILE) = %q, want %q", got, []string{b})
		}
	})
}
