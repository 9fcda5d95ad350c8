package checkpointtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

func testQuestions(t *testing.T, setup setupFunc) {
	t.Run("Create", func(t *testing.T) { testQuestionsCreate(t, setup) })

	t.Run("CreateDefaults", func(t *testing.T) { testQuestionsCreateDefaults(t, setup) })

	// Tool is kept as given, whatever the payload says (the migrations
	// fill it from an old payload's "tool_name" once; new questions never
	// are), and every read returns it.
	t.Run("Tool", func(t *testing.T) { testQuestionsTool(t, setup) })

	t.Run("CreateIdempotent", func(t *testing.T) { testQuestionsCreateIdempotent(t, setup) })

	t.Run("KeyedByThreadAndID", func(t *testing.T) { testQuestionsKeyedByThreadAndID(t, setup) })

	t.Run("GetNotFound", func(t *testing.T) { testQuestionsGetNotFound(t, setup) })

	t.Run("List", func(t *testing.T) { testListQuestions(t, setup(t)) })

	t.Run("Answer", func(t *testing.T) { testQuestionsAnswer(t, setup) })

	t.Run("FirstWriterWins", func(t *testing.T) { testQuestionsFirstWriterWins(t, setup) })

	t.Run("Expired", func(t *testing.T) { testQuestionsExpired(t, setup) })

	t.Run("ZeroAtIsNow", func(t *testing.T) { testQuestionsZeroAtIsNow(t, setup) })

	t.Run("TimeoutBeforeDeadline", func(t *testing.T) { testQuestionsTimeoutBeforeDeadline(t, setup) })

	t.Run("Abort", func(t *testing.T) { testQuestionsAbort(t, setup) })

	t.Run("BadResolution", func(t *testing.T) { testQuestionsBadResolution(t, setup) })

	t.Run("ResolveNotFound", func(t *testing.T) { testQuestionsResolveNotFound(t, setup) })
}

func testQuestionsCreate(t *testing.T, setup setupFunc) {
	s := setup(t)
	q := newQuestion(id("thread"), "approve_call-1")
	q.CreatedAt = t0
	q.Deadline = t0.Add(time.Hour)
	// Whatever the caller says, a new question is pending and unanswered.
	q.Status = checkpoint.QuestionAnswered
	q.Answer = json.RawMessage(`{"forged":true}`)
	q.AnsweredBy = "mallory"
	stored := mustCreateQuestion(t, s, q)
	for _, got := range []*checkpoint.Question{stored, mustGetQuestion(t, s, q.ThreadID, q.ID)} {
		if got.ThreadID != q.ThreadID || got.ID != q.ID || got.RunID != q.RunID || got.CallID != q.CallID ||
			got.Tool != q.Tool || got.Kind != q.Kind || got.Digest != q.Digest {
			t.Errorf("stored question = %+v, want %+v", got, q)
		}
		if got.Status != checkpoint.QuestionPending || len(got.Answer) != 0 || got.AnsweredBy != "" || got.Reason != "" {
			t.Errorf("new question: status %q, answer %q, by %q, reason %q; want pending and unanswered",
				got.Status, got.Answer, got.AnsweredBy, got.Reason)
		}
		checkJSON(t, "Payload", got.Payload, q.Payload)
		checkTime(t, "CreatedAt", got.CreatedAt, t0)
		checkTime(t, "Deadline", got.Deadline, t0.Add(time.Hour))
		checkTime(t, "ResolvedAt", got.ResolvedAt, time.Time{})
		if got.Timeout() != time.Hour {
			t.Errorf("Timeout() = %v, want 1h", got.Timeout())
		}
	}
}

func testQuestionsCreateDefaults(t *testing.T, setup setupFunc) {
	s := setup(t)
	q := newQuestion(id("thread"), "q")
	q.Payload, q.Digest, q.CallID, q.Tool = nil, "", "", ""
	stored := mustCreateQuestion(t, s, q)
	if !recent(stored.CreatedAt) {
		t.Errorf("CreatedAt = %v, want the store's current time", stored.CreatedAt)
	}
	got := mustGetQuestion(t, s, q.ThreadID, q.ID)
	if !got.Deadline.IsZero() || got.Timeout() != 0 {
		t.Errorf("Deadline = %v, want none", got.Deadline)
	}
	if len(got.Payload) != 0 || got.Digest != "" || got.CallID != "" || got.Tool != "" {
		t.Errorf("empty fields came back as payload %q, digest %q, call %q, tool %q", got.Payload, got.Digest, got.CallID, got.Tool)
	}
	checkTime(t, "CreatedAt", got.CreatedAt, stored.CreatedAt)
}

func testQuestionsTool(t *testing.T, setup setupFunc) {
	s := setup(t)
	for _, c := range []struct{ qid, tool, payload string }{
		{"given", "deploy", `{"tool_name":"bash"}`},
		{"none", "", `{"tool_name":"bash"}`},
		{"unicode", "outil-é ☃", `[]`},
		{"no-payload", "bash", ``},
	} {
		thread := id("thread")
		q := newQuestion(thread, c.qid)
		q.Tool, q.Payload = c.tool, json.RawMessage(c.payload)
		if c.payload == "" {
			q.Payload = nil
		}
		stored := mustCreateQuestion(t, s, q)
		again, _, err := s.CreateQuestion(ctx(t), newQuestion(thread, c.qid))
		if err != nil {
			t.Fatalf("CreateQuestion(again): %v", err)
		}
		listed, _, err := s.ListQuestions(ctx(t), checkpoint.QuestionFilter{ThreadID: thread})
		if err != nil || len(listed) != 1 {
			t.Fatalf("ListQuestions = %d questions, %v; want 1", len(listed), err)
		}
		resolved, err := s.ResolveQuestion(ctx(t), thread, c.qid, answer("alice", time.Time{}))
		if err != nil {
			t.Fatalf("ResolveQuestion: %v", err)
		}
		for what, got := range map[string]*checkpoint.Question{
			"created": stored, "found by CreateQuestion": again, "listed": listed[0],
			"resolved": resolved, "got": mustGetQuestion(t, s, thread, c.qid),
		} {
			if got.Tool != c.tool {
				t.Errorf("%s: %s question: Tool = %q, want %q", c.qid, what, got.Tool, c.tool)
			}
		}
	}
}

func testQuestionsCreateIdempotent(t *testing.T, setup setupFunc) {
	s := setup(t)
	q := newQuestion(id("thread"), "approve_call-1")
	q.CreatedAt = t0
	mustCreateQuestion(t, s, q)

	again := newQuestion(q.ThreadID, q.ID)
	again.Payload = json.RawMessage(`{"different":true}`)
	again.CreatedAt = t0.Add(time.Minute)
	stored, created, err := s.CreateQuestion(ctx(t), again)
	if err != nil {
		t.Fatalf("CreateQuestion(again): %v", err)
	}
	if created {
		t.Errorf("CreateQuestion(again): created = true, want false")
	}
	checkJSON(t, "Payload of the stored question", stored.Payload, q.Payload)
	checkTime(t, "CreatedAt of the stored question", stored.CreatedAt, t0)

	// Once resolved, a re-entering run finds the resolution.
	if _, err := s.ResolveQuestion(ctx(t), q.ThreadID, q.ID, answer("alice", time.Time{})); err != nil {
		t.Fatalf("ResolveQuestion: %v", err)
	}
	stored, created, err = s.CreateQuestion(ctx(t), newQuestion(q.ThreadID, q.ID))
	if err != nil || created {
		t.Fatalf("CreateQuestion(after answer) = created %v, %v; want the stored one", created, err)
	}
	if stored.Status != checkpoint.QuestionAnswered || stored.AnsweredBy != "alice" {
		t.Errorf("stored question after its answer: status %q by %q", stored.Status, stored.AnsweredBy)
	}
}

func testQuestionsKeyedByThreadAndID(t *testing.T, setup setupFunc) {
	s := setup(t)
	a, b := id("thread-a"), id("thread-b")
	mustCreateQuestion(t, s, newQuestion(a, "q1"))
	if _, err := s.GetQuestion(ctx(t), b, "q1"); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("GetQuestion(other thread) = %v, want ErrNotFound", err)
	}
	mustCreateQuestion(t, s, newQuestion(b, "q1")) // same id, other thread: a new question
	if _, err := s.ResolveQuestion(ctx(t), b, "q1", answer("bob", time.Time{})); err != nil {
		t.Fatalf("ResolveQuestion(b/q1): %v", err)
	}
	if got := mustGetQuestion(t, s, a, "q1"); got.Status != checkpoint.QuestionPending {
		t.Errorf("answering b/q1 changed a/q1 to %q", got.Status)
	}
}

func testQuestionsGetNotFound(t *testing.T, setup setupFunc) {
	s := setup(t)
	if _, err := s.GetQuestion(ctx(t), id("thread"), "nope"); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("GetQuestion(missing) = %v, want ErrNotFound", err)
	}
}

func testQuestionsAnswer(t *testing.T, setup setupFunc) {
	s := setup(t)
	q := newQuestion(id("thread"), "q")
	q.CreatedAt = t0
	q.Deadline = t0.Add(time.Hour)
	mustCreateQuestion(t, s, q)
	r := answer("alice", t0.Add(time.Hour-time.Millisecond))
	r.Reason = "looks fine"
	got, err := s.ResolveQuestion(ctx(t), q.ThreadID, q.ID, r)
	if err != nil {
		t.Fatalf("ResolveQuestion(answer before deadline): %v", err)
	}
	for _, g := range []*checkpoint.Question{got, mustGetQuestion(t, s, q.ThreadID, q.ID)} {
		if g.Status != checkpoint.QuestionAnswered || g.AnsweredBy != "alice" || g.Reason != "looks fine" {
			t.Errorf("answered question: status %q, by %q, reason %q", g.Status, g.AnsweredBy, g.Reason)
		}
		checkJSON(t, "Answer", g.Answer, r.Answer)
		checkTime(t, "ResolvedAt", g.ResolvedAt, r.At)
		checkJSON(t, "Payload", g.Payload, q.Payload)
	}
}

func testQuestionsFirstWriterWins(t *testing.T, setup setupFunc) {
	for _, first := range []checkpoint.QuestionStatus{checkpoint.QuestionAnswered, checkpoint.QuestionTimedOut, checkpoint.QuestionAborted} {
		t.Run(string(first), func(t *testing.T) {
			s := setup(t)
			q := newQuestion(id("thread"), "q")
			q.CreatedAt = t0
			q.Deadline = t0.Add(time.Hour)
			mustCreateQuestion(t, s, q)
			resolutions := map[checkpoint.QuestionStatus]checkpoint.Resolution{
				checkpoint.QuestionAnswered: answer("alice", t0.Add(time.Minute)),
				checkpoint.QuestionTimedOut: {Status: checkpoint.QuestionTimedOut, By: "timeout", At: t0.Add(time.Hour)},
				checkpoint.QuestionAborted:  {Status: checkpoint.QuestionAborted, By: "abort", Reason: "user cancelled", At: t0.Add(time.Minute)},
			}
			if _, err := s.ResolveQuestion(ctx(t), q.ThreadID, q.ID, resolutions[first]); err != nil {
				t.Fatalf("first resolution (%s): %v", first, err)
			}
			for status, r := range resolutions {
				if status == checkpoint.QuestionTimedOut {
					r.At = t0.Add(2 * time.Hour)
				} else if status == checkpoint.QuestionAnswered {
					r = answer("bob", t0.Add(2*time.Minute))
				}
				got, err := s.ResolveQuestion(ctx(t), q.ThreadID, q.ID, r)
				if !errors.Is(err, checkpoint.ErrConflict) {
					t.Errorf("%s after %s = %v, want ErrConflict", status, first, err)
					continue
				}
				if got == nil {
					t.Errorf("%s after %s: the stored question is not returned with ErrConflict", status, first)
				} else if got.Status != first {
					t.Errorf("%s after %s: returned status %q", status, first, got.Status)
				}
			}
			final := mustGetQuestion(t, s, q.ThreadID, q.ID)
			if final.Status != first {
				t.Errorf("final status %q, want %q", final.Status, first)
			}
			if first == checkpoint.QuestionAnswered && final.AnsweredBy != "alice" {
				t.Errorf("the second answer replaced the first: answered by %q", final.AnsweredBy)
			}
			checkTime(t, "ResolvedAt", final.ResolvedAt, resolutions[first].At)
		})
	}
}

func testQuestionsExpired(t *testing.T, setup setupFunc) {
	s := setup(t)
	q := newQuestion(id("thread"), "q")
	q.CreatedAt = t0
	q.Deadline = t0.Add(time.Hour)
	mustCreateQuestion(t, s, q)
	for _, at := range []time.Time{q.Deadline, q.Deadline.Add(time.Nanosecond), q.Deadline.Add(time.Hour)} {
		got, err := s.ResolveQuestion(ctx(t), q.ThreadID, q.ID, answer("late", at))
		if !errors.Is(err, checkpoint.ErrExpired) {
			t.Fatalf("answer at deadline%+v = %v, want ErrExpired", at.Sub(q.Deadline), err)
		}
		if got == nil || got.Status != checkpoint.QuestionPending {
			t.Errorf("ErrExpired should come with the stored, still pending question; got %+v", got)
		}
	}
	if got := mustGetQuestion(t, s, q.ThreadID, q.ID); got.Status != checkpoint.QuestionPending {
		t.Fatalf("after refused late answers: status %q, want pending", got.Status)
	}
	// The timeout is then recorded by the same compare-and-set.
	if _, err := s.ResolveQuestion(ctx(t), q.ThreadID, q.ID, checkpoint.Resolution{Status: checkpoint.QuestionTimedOut, By: "timeout", At: q.Deadline}); err != nil {
		t.Fatalf("timeout at the deadline: %v", err)
	}
	if got := mustGetQuestion(t, s, q.ThreadID, q.ID); got.Status != checkpoint.QuestionTimedOut || got.AnsweredBy != "timeout" {
		t.Errorf("after timeout: status %q by %q", got.Status, got.AnsweredBy)
	}
}

func testQuestionsZeroAtIsNow(t *testing.T, setup setupFunc) {
	s := setup(t)
	// A deadline in the past: an answer without a time must not slip through.
	late := newQuestion(id("thread"), "late")
	late.CreatedAt = time.Now().Add(-2 * time.Hour)
	late.Deadline = time.Now().Add(-time.Hour)
	mustCreateQuestion(t, s, late)
	if _, err := s.ResolveQuestion(ctx(t), late.ThreadID, late.ID, answer("alice", time.Time{})); !errors.Is(err, checkpoint.ErrExpired) {
		t.Fatalf("answer with zero At after the deadline = %v, want ErrExpired", err)
	}
	// A future deadline: the answer counts, stamped with the store's time.
	ok := newQuestion(late.ThreadID, "ok")
	ok.Deadline = time.Now().Add(time.Hour)
	mustCreateQuestion(t, s, ok)
	got, err := s.ResolveQuestion(ctx(t), ok.ThreadID, ok.ID, answer("alice", time.Time{}))
	if err != nil {
		t.Fatalf("answer with zero At before the deadline: %v", err)
	}
	if !recent(got.ResolvedAt) {
		t.Errorf("ResolvedAt = %v, want the store's current time", got.ResolvedAt)
	}
}

func testQuestionsTimeoutBeforeDeadline(t *testing.T, setup setupFunc) {
	s := setup(t)
	q := newQuestion(id("thread"), "q")
	q.CreatedAt = t0
	q.Deadline = t0.Add(time.Hour)
	mustCreateQuestion(t, s, q)
	_, err := s.ResolveQuestion(ctx(t), q.ThreadID, q.ID, checkpoint.Resolution{Status: checkpoint.QuestionTimedOut, By: "timeout", At: q.Deadline.Add(-time.Millisecond)})
	if err == nil {
		t.Fatalf("timeout before the deadline was accepted")
	}
	noDeadline := newQuestion(q.ThreadID, "forever")
	mustCreateQuestion(t, s, noDeadline)
	if _, err := s.ResolveQuestion(ctx(t), q.ThreadID, noDeadline.ID, checkpoint.Resolution{Status: checkpoint.QuestionTimedOut, By: "timeout", At: t0.Add(1000 * time.Hour)}); err == nil {
		t.Fatalf("timeout of a question without a deadline was accepted")
	}
	for _, qid := range []string{q.ID, noDeadline.ID} {
		if got := mustGetQuestion(t, s, q.ThreadID, qid); got.Status != checkpoint.QuestionPending {
			t.Errorf("%s after a refused timeout: status %q, want pending", qid, got.Status)
		}
	}
	// Still answerable in time.
	if _, err := s.ResolveQuestion(ctx(t), q.ThreadID, q.ID, answer("alice", t0.Add(time.Minute))); err != nil {
		t.Fatalf("answer after a refused timeout: %v", err)
	}
}

func testQuestionsAbort(t *testing.T, setup setupFunc) {
	s := setup(t)
	q := newQuestion(id("thread"), "q")
	q.Deadline = t0 // long past: an abort does not care
	q.CreatedAt = t0.Add(-time.Hour)
	mustCreateQuestion(t, s, q)
	got, err := s.ResolveQuestion(ctx(t), q.ThreadID, q.ID, checkpoint.Resolution{Status: checkpoint.QuestionAborted, By: "abort", Reason: "run aborted", At: t0.Add(time.Hour)})
	if err != nil {
		t.Fatalf("abort: %v", err)
	}
	if got.Status != checkpoint.QuestionAborted || got.Reason != "run aborted" || got.AnsweredBy != "abort" || len(got.Answer) != 0 {
		t.Errorf("aborted question = %+v", got)
	}
}

func testQuestionsBadResolution(t *testing.T, setup setupFunc) {
	s := setup(t)
	q := newQuestion(id("thread"), "q")
	mustCreateQuestion(t, s, q)
	for _, st := range []checkpoint.QuestionStatus{checkpoint.QuestionPending, "", "approved"} {
		if _, err := s.ResolveQuestion(ctx(t), q.ThreadID, q.ID, checkpoint.Resolution{Status: st, At: t0}); err == nil {
			t.Errorf("resolution to %q accepted", st)
		}
	}
	if got := mustGetQuestion(t, s, q.ThreadID, q.ID); got.Status != checkpoint.QuestionPending {
		t.Errorf("status %q, want pending", got.Status)
	}
}

func testQuestionsResolveNotFound(t *testing.T, setup setupFunc) {
	s := setup(t)
	thread := id("thread")
	mustCreateQuestion(t, s, newQuestion(thread, "exists"))
	for _, k := range [][2]string{{thread, "nope"}, {id("other"), "exists"}} {
		if _, err := s.ResolveQuestion(ctx(t), k[0], k[1], answer("alice", time.Time{})); !errors.Is(err, checkpoint.ErrNotFound) {
			t.Errorf("ResolveQuestion(%s/%s) = %v, want ErrNotFound", k[0], k[1], err)
		}
	}
}

func testListQuestions(t *testing.T, s checkpoint.Store) {
	a, b := id("thread-a"), id("thread-b")
	// 12 questions, alternating threads; every third is answered.
	var all, ofA, pending, pendingOfB []string
	for i := range 12 {
		thread := a
		if i%2 == 1 {
			thread = b
		}
		q := newQuestion(thread, fmt.Sprintf("q%02d", i))
		mustCreateQuestion(t, s, q)
		key := thread + "/" + q.ID
		all = append(all, key)
		if thread == a {
			ofA = append(ofA, key)
		}
		if i%3 == 0 {
			if _, err := s.ResolveQuestion(ctx(t), thread, q.ID, answer("alice", time.Time{})); err != nil {
				t.Fatalf("ResolveQuestion: %v", err)
			}
			continue
		}
		pending = append(pending, key)
		if thread == b {
			pendingOfB = append(pendingOfB, key)
		}
	}
	var answeredOfA []string
	for i := 0; i < 12; i += 6 {
		answeredOfA = append(answeredOfA, fmt.Sprintf("%s/q%02d", a, i))
	}

	// listAll walks the pages, checking each page's size.
	listAll := func(f checkpoint.QuestionFilter) []string {
		t.Helper()
		var keys []string
		for page := 0; ; page++ {
			qs, next, err := s.ListQuestions(ctx(t), f)
			if err != nil {
				t.Fatalf("ListQuestions(%+v): %v", f, err)
			}
			if f.Limit > 0 && len(qs) > f.Limit {
				t.Fatalf("ListQuestions(%+v): %d questions, more than the limit", f, len(qs))
			}
			if next != "" && len(qs) == 0 {
				t.Fatalf("ListQuestions(%+v): an empty page with a next cursor", f)
			}
			for _, q := range qs {
				if f.ThreadID != "" && q.ThreadID != f.ThreadID || f.Status != "" && q.Status != f.Status {
					t.Errorf("ListQuestions(%+v) returned %s/%s (%s)", f, q.ThreadID, q.ID, q.Status)
				}
				keys = append(keys, q.ThreadID+"/"+q.ID)
			}
			if next == "" {
				return keys
			}
			if page > 100 {
				t.Fatalf("ListQuestions(%+v): no end after 100 pages", f)
			}
			f.After = next
		}
	}
	for _, c := range []struct {
		name string
		f    checkpoint.QuestionFilter
		want []string
	}{
		{"all", checkpoint.QuestionFilter{}, all},
		{"all by 5", checkpoint.QuestionFilter{Limit: 5}, all},
		{"all by 1", checkpoint.QuestionFilter{Limit: 1}, all},
		{"all by 12", checkpoint.QuestionFilter{Limit: 12}, all},
		{"all by 13", checkpoint.QuestionFilter{Limit: 13}, all},
		{"thread a by 2", checkpoint.QuestionFilter{ThreadID: a, Limit: 2}, ofA},
		{"pending by 3", checkpoint.QuestionFilter{Status: checkpoint.QuestionPending, Limit: 3}, pending},
		{"pending of b by 2", checkpoint.QuestionFilter{ThreadID: b, Status: checkpoint.QuestionPending, Limit: 2}, pendingOfB},
		{"answered of a", checkpoint.QuestionFilter{ThreadID: a, Status: checkpoint.QuestionAnswered}, answeredOfA},
		{"timed out", checkpoint.QuestionFilter{Status: checkpoint.QuestionTimedOut, Limit: 4}, nil},
		{"unknown thread", checkpoint.QuestionFilter{ThreadID: id("nobody")}, nil},
	} {
		got := listAll(c.f)
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: got %v\nwant %v (in creation order)", c.name, got, c.want)
		}
	}

	// A page fetched, then a new question: the cursor still leads on to it.
	first, next, err := s.ListQuestions(ctx(t), checkpoint.QuestionFilter{ThreadID: a, Limit: 4})
	if err != nil || len(first) != 4 || next == "" {
		t.Fatalf("ListQuestions(a, 4) = %d, cursor %q, %v", len(first), next, err)
	}
	mustCreateQuestion(t, s, newQuestion(a, "q99"))
	rest := listAll(checkpoint.QuestionFilter{ThreadID: a, Limit: 4, After: next})
	if want := []string{a + "/q08", a + "/q10", a + "/q99"}; fmt.Sprint(rest) != fmt.Sprint(want) {
		t.Errorf("after a new question, the next pages = %v, want %v", rest, want)
	}

	// The default page is 100.
	many := id("thread-many")
	for i := range 101 {
		mustCreateQuestion(t, s, newQuestion(many, fmt.Sprintf("m%03d", i)))
	}
	page, next, err := s.ListQuestions(ctx(t), checkpoint.QuestionFilter{ThreadID: many})
	if err != nil || len(page) != 100 || next == "" {
		t.Errorf("ListQuestions(no limit) = %d questions, cursor %q, %v; want 100 and a cursor", len(page), next, err)
	}

	if _, _, err := s.ListQuestions(ctx(t), checkpoint.QuestionFilter{After: "not a cursor!"}); err == nil {
		t.Errorf("ListQuestions with a malformed cursor: no error")
	}
}
