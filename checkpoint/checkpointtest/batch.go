package checkpointtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// state is what a batch test reads back: the thread, every call of its
// run, its questions and its events, to compare before and after a batch.
type state struct {
	thread    *checkpoint.Thread
	calls     []string
	questions []string
	events    []string
}

func readState(t *testing.T, s checkpoint.Store, thread string, qids ...string) state {
	t.Helper()
	var st state
	th, err := s.LoadThread(ctx(t), thread)
	switch {
	case errors.Is(err, checkpoint.ErrNotFound):
	case err != nil:
		t.Fatalf("LoadThread: %v", err)
	default:
		st.thread = th
	}
	calls, err := s.ListToolCalls(ctx(t), thread, "run-1")
	if err != nil {
		t.Fatalf("ListToolCalls: %v", err)
	}
	for _, c := range calls {
		st.calls = append(st.calls, c.CallID+"="+string(c.State))
	}
	slices.Sort(st.calls)
	for _, qid := range qids {
		q, err := s.GetQuestion(ctx(t), thread, qid)
		switch {
		case errors.Is(err, checkpoint.ErrNotFound):
			st.questions = append(st.questions, qid+"=none")
		case err != nil:
			t.Fatalf("GetQuestion: %v", err)
		default:
			st.questions = append(st.questions, qid+"="+string(q.Status)+"/"+q.AnsweredBy)
		}
	}
	evs, err := s.ListEvents(ctx(t), thread, 0, 1000)
	if err != nil {
		t.Fatalf("ListEvents: %v", err)
	}
	for _, e := range evs {
		st.events = append(st.events, e.Type)
	}
	return st
}

func (a state) same(b state) bool {
	if (a.thread == nil) != (b.thread == nil) {
		return false
	}
	if a.thread != nil && (a.thread.Version != b.thread.Version || a.thread.Status != b.thread.Status ||
		a.thread.RunID != b.thread.RunID || string(a.thread.Messages) != string(b.thread.Messages)) {
		return false
	}
	return slices.Equal(a.calls, b.calls) && slices.Equal(a.questions, b.questions) && slices.Equal(a.events, b.events)
}

func (a state) String() string {
	th := "no thread"
	if a.thread != nil {
		th = fmt.Sprintf("v%d %s %s %s", a.thread.Version, a.thread.Status, a.thread.RunID, clip(a.thread.Messages))
	}
	return fmt.Sprintf("{%s; calls %v; questions %v; events %v}", th, a.calls, a.questions, a.events)
}

func event(thread, typ string) *checkpoint.Event {
	return &checkpoint.Event{ThreadID: thread, RunID: "run-1", Type: typ, Data: json.RawMessage(`{"k": "v"}`)}
}

// resolve is the batch that resolves the thread's question qid with r,
// and the event that records it (newQuestion's, as a store would have
// read it).
func resolve(thread, qid string, r checkpoint.Resolution) *checkpoint.Batch {
	return checkpoint.ResolveBatch(newQuestion(thread, qid), r)
}

func appendTo(th *checkpoint.Thread, msgs ...string) *checkpoint.ThreadWrite {
	w := &checkpoint.ThreadWrite{ID: th.ID, Version: th.Version, Status: checkpoint.ThreadRunning, RunID: "run-1"}
	for _, m := range msgs {
		w.Append = append(w.Append, json.RawMessage(m))
	}
	return w
}

func testBatches(t *testing.T, setup setupFunc) {
	t.Run("CommitsEverything", func(t *testing.T) { testBatchesCommitsEverything(t, setup) })

	t.Run("Empty", func(t *testing.T) { testBatchesEmpty(t, setup) })

	// Every compare-and-set that can lose, each in a batch that would also
	// append messages, claim a call and log an event: nothing of it may be
	// written.
	t.Run("AllOrNothing", func(t *testing.T) { testBatchesAllOrNothing(t, setup) })

	t.Run("ExistingQuestionWritesNothing", func(t *testing.T) { testBatchesExistingQuestionWritesNothing(t, setup) })

	// A lost compare-and-set is the answer, also when the question exists
	// (every store decides the same way).
	t.Run("LostCASBeforeExistingQuestion", func(t *testing.T) { testBatchesLostCASBeforeExistingQuestion(t, setup) })

	// Every resolution is in the audit log: ResolveQuestion writes the
	// question_resolved event that records it, in the same commit (a
	// batch without one is refused: AllOrNothing/Unaudited).
	t.Run("ResolutionAudited", func(t *testing.T) { testBatchesResolutionAudited(t, setup) })

	t.Run("AppendsInOrder", func(t *testing.T) { testBatchesAppendsInOrder(t, setup) })

	t.Run("ConcurrentAppends", func(t *testing.T) { testBatchesConcurrentAppends(t, setup) })

	// Many batches at once, some of which lose: as a store that groups
	// them into one transaction must, each caller gets its own outcome and
	// the losers write nothing.
	t.Run("ManyWriters", func(t *testing.T) { testBatchesManyWriters(t, setup) })

	t.Run("Notifications", func(t *testing.T) { testBatchesNotifications(t, setup) })

	t.Run("TurnCalls", func(t *testing.T) { testBatchesTurnCalls(t, setup) })
}

func testBatchesCommitsEverything(t *testing.T, setup setupFunc) {
	s := setup(t)
	thread := id("thread")
	q := newQuestion(thread, "q")
	w := &checkpoint.ThreadWrite{ID: thread, Status: checkpoint.ThreadRunning, RunID: "run-1",
		Append: []json.RawMessage{json.RawMessage(`{"role":"user","text":"hi"}`), json.RawMessage(`{"role":"assistant", "x":[1, 2]}`)}}
	c, err := s.Commit(ctx(t), &checkpoint.Batch{
		Thread:    w,
		ToolCalls: []*checkpoint.ToolCall{{ThreadID: thread, RunID: "run-1", CallID: "c1", Tool: "bash", Args: json.RawMessage(`{}`), State: checkpoint.ToolCallExecuting}},
		Question:  q,
		Events:    []*checkpoint.Event{event(thread, "first"), event(thread, "second")},
	})
	if err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if w.Version != 1 || !recent(w.UpdatedAt) || !recent(w.CreatedAt) {
		t.Errorf("after a creating write: Version %d, CreatedAt %v, UpdatedAt %v; want 1 and the store's time", w.Version, w.CreatedAt, w.UpdatedAt)
	}
	if !c.Created || c.Question == nil || c.Question.ID != "q" || c.Question.Status != checkpoint.QuestionPending {
		t.Errorf("Committed question = %+v, created %v", c.Question, c.Created)
	}
	if len(c.EventSeqs) != 2 || c.EventSeqs[0] >= c.EventSeqs[1] {
		t.Errorf("EventSeqs = %v, want two, increasing", c.EventSeqs)
	}
	got := readState(t, s, thread, "q")
	want := `{v1 running run-1 [{"role":"user","text":"hi"},{"role":"assistant", "x":[1, 2]}]; calls [c1=executing]; questions [q=pending/]; events [first second]}`
	if got.String() != want {
		t.Errorf("after the batch: %s\nwant %s", got, want)
	}
	evs, err := s.ListEvents(ctx(t), thread, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range evs {
		if e.Seq != c.EventSeqs[i] {
			t.Errorf("event %d: Seq %d, Commit returned %d", i, e.Seq, c.EventSeqs[i])
		}
	}

	// A second write appends to the first, and resolves the question.
	th := got.thread
	w = appendTo(th, `{"role":"tool"}`)
	w.Status = checkpoint.ThreadIdle
	b := resolve(thread, "q", answer("alice", time.Time{}))
	b.Thread, b.Events = w, []*checkpoint.Event{event(thread, "third"), b.Events[0]}
	c, err = s.Commit(ctx(t), b)
	if err != nil {
		t.Fatalf("second Commit: %v", err)
	}
	if w.Version != 2 {
		t.Errorf("Version after the second write = %d, want 2", w.Version)
	}
	checkTime(t, "CreatedAt kept", w.CreatedAt, th.CreatedAt)
	if c.Resolved == nil || c.Resolved.Status != checkpoint.QuestionAnswered || c.Resolved.AnsweredBy != "alice" {
		t.Errorf("Committed.Resolved = %+v", c.Resolved)
	}
	got = readState(t, s, thread, "q")
	want = `{v2 idle run-1 [{"role":"user","text":"hi"},{"role":"assistant", "x":[1, 2]},{"role":"tool"}]; calls [c1=executing]; questions [q=answered/alice]; events [first second third question_resolved]}`
	if got.String() != want {
		t.Errorf("after the second batch: %s\nwant %s", got, want)
	}
}

func testBatchesEmpty(t *testing.T, setup setupFunc) {
	s := setup(t)
	b := &checkpoint.Batch{}
	if !b.Empty() {
		t.Fatal("Empty() = false for an empty batch")
	}
	if _, err := s.Commit(ctx(t), b); err != nil {
		t.Fatalf("Commit(empty) = %v", err)
	}
}

// allOrNothingCase is one of AllOrNothing's losing batches, built on the
// thread the subtest sets up, and the error its Commit must return.
type allOrNothingCase struct {
	batch setupCase
	want  error
}

type setupCase func(thread string, th *checkpoint.Thread) (*checkpoint.Batch, error)

func allOrNothingCases() map[string]allOrNothingCase {
	return map[string]allOrNothingCase{
		"StaleVersion": {func(thread string, th *checkpoint.Thread) (*checkpoint.Batch, error) {
			w := appendTo(th, `{"stale":true}`)
			w.Version--
			return &checkpoint.Batch{Thread: w}, nil
		}, checkpoint.ErrConflict},
		"FutureVersion": {func(thread string, th *checkpoint.Thread) (*checkpoint.Batch, error) {
			w := appendTo(th, `{"future":true}`)
			w.Version++
			return &checkpoint.Batch{Thread: w}, nil
		}, checkpoint.ErrConflict},
		"CreateExisting": {func(thread string, th *checkpoint.Thread) (*checkpoint.Batch, error) {
			w := appendTo(th, `{"again":true}`)
			w.Version = 0
			return &checkpoint.Batch{Thread: w}, nil
		}, checkpoint.ErrConflict},
		"ClaimedCall": {func(thread string, th *checkpoint.Thread) (*checkpoint.Batch, error) {
			return &checkpoint.Batch{ToolCalls: []*checkpoint.ToolCall{{ThreadID: thread, RunID: "run-1", CallID: "taken", Tool: "bash", State: checkpoint.ToolCallExecuting}}}, nil
		}, checkpoint.ErrConflict},
		"ClaimedTwiceInTheBatch": {func(thread string, th *checkpoint.Thread) (*checkpoint.Batch, error) {
			tc := &checkpoint.ToolCall{ThreadID: thread, RunID: "run-1", CallID: "twice", Tool: "bash", State: checkpoint.ToolCallExecuting}
			tc2 := *tc
			return &checkpoint.Batch{ToolCalls: []*checkpoint.ToolCall{tc, &tc2}}, nil
		}, checkpoint.ErrConflict},
		"AnsweredQuestion": {func(thread string, th *checkpoint.Thread) (*checkpoint.Batch, error) {
			return resolve(thread, "answered", answer("late", time.Time{})), nil
		}, checkpoint.ErrConflict},
		"AfterDeadline": {func(thread string, th *checkpoint.Thread) (*checkpoint.Batch, error) {
			return resolve(thread, "expiring", answer("late", t0.Add(2*time.Hour))), nil
		}, checkpoint.ErrExpired},
		"UnknownQuestion": {func(thread string, th *checkpoint.Thread) (*checkpoint.Batch, error) {
			return resolve(thread, "nobody", answer("x", time.Time{})), nil
		}, checkpoint.ErrNotFound},
		// A resolution commits with the event that records it, or not
		// at all: none, or one of another question, status or
		// resolver, or of another thread.
		"Unaudited": {func(thread string, th *checkpoint.Thread) (*checkpoint.Batch, error) {
			return &checkpoint.Batch{Resolve: &checkpoint.Resolve{ThreadID: thread, ID: "expiring", Resolution: answer("alice", time.Time{})}}, nil
		}, checkpoint.ErrUnaudited},
		"EventOfAnotherResolver": {func(thread string, th *checkpoint.Thread) (*checkpoint.Batch, error) {
			b := resolve(thread, "expiring", answer("mallory", time.Time{}))
			b.Resolve.Resolution.By = "alice"
			return b, nil
		}, checkpoint.ErrUnaudited},
		"EventOfAnotherStatus": {func(thread string, th *checkpoint.Thread) (*checkpoint.Batch, error) {
			b := resolve(thread, "expiring", checkpoint.Resolution{Status: checkpoint.QuestionAborted, By: "alice"})
			b.Resolve.Resolution = answer("alice", time.Time{})
			return b, nil
		}, checkpoint.ErrUnaudited},
		"EventOfAnotherQuestion": {func(thread string, th *checkpoint.Thread) (*checkpoint.Batch, error) {
			b := resolve(thread, "answered", answer("alice", time.Time{}))
			b.Resolve.ID = "expiring"
			return b, nil
		}, checkpoint.ErrUnaudited},
		"EventOfAnotherThread": {func(thread string, th *checkpoint.Thread) (*checkpoint.Batch, error) {
			b := resolve(thread, "expiring", answer("alice", time.Time{}))
			b.Events[0].ThreadID = thread + "-other"
			return b, nil
		}, checkpoint.ErrUnaudited},
		"UnknownThread": {func(thread string, th *checkpoint.Thread) (*checkpoint.Batch, error) {
			w := appendTo(th, `{"x":1}`)
			w.ID = thread + "-missing"
			return &checkpoint.Batch{Thread: w}, nil
		}, checkpoint.ErrNotFound},
	}
}

func testBatchesAllOrNothing(t *testing.T, setup setupFunc) {
	s := setup(t)
	extra := func(thread string, th *checkpoint.Thread, b *checkpoint.Batch) *checkpoint.Batch {
		if b.Thread == nil {
			b.Thread = appendTo(th, `{"lost":true}`)
		}
		b.ToolCalls = append(b.ToolCalls, &checkpoint.ToolCall{ThreadID: thread, RunID: "run-1", CallID: "fresh", Tool: "bash", Args: json.RawMessage(`{}`), State: checkpoint.ToolCallExecuting})
		b.Events = append(b.Events, event(thread, "lost"))
		return b
	}
	cases := allOrNothingCases()
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			thread := id("thread")
			th := mustCreateThread(t, s, &checkpoint.Thread{ID: thread, Status: checkpoint.ThreadRunning, RunID: "run-1", Messages: json.RawMessage(`["first"]`)})
			if err := s.PutToolCall(ctx(t), &checkpoint.ToolCall{ThreadID: thread, RunID: "run-1", CallID: "taken", Tool: "bash", State: checkpoint.ToolCallExecuting}); err != nil {
				t.Fatal(err)
			}
			mustCreateQuestion(t, s, newQuestion(thread, "answered"))
			if _, err := s.ResolveQuestion(ctx(t), thread, "answered", answer("first", time.Time{})); err != nil {
				t.Fatal(err)
			}
			exp := newQuestion(thread, "expiring")
			exp.CreatedAt, exp.Deadline = t0, t0.Add(time.Hour)
			mustCreateQuestion(t, s, exp)
			if _, err := s.AppendEvent(ctx(t), event(thread, "before")); err != nil {
				t.Fatal(err)
			}
			before := readState(t, s, thread, "answered", "expiring", "fresh-q")
			b, _ := c.batch(thread, th)
			b = extra(thread, th, b)
			if !strings.HasPrefix(name, "ClaimedTwice") && !strings.HasPrefix(name, "UnknownThread") {
				b.Question = newQuestion(thread, "fresh-q") // would be created
			}
			_, err := s.Commit(ctx(t), b)
			if !errors.Is(err, c.want) {
				t.Fatalf("Commit = %v, want %v", err, c.want)
			}
			if after := readState(t, s, thread, "answered", "expiring", "fresh-q"); !after.same(before) {
				t.Errorf("a batch that failed wrote something:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

func testBatchesExistingQuestionWritesNothing(t *testing.T, setup setupFunc) {
	s := setup(t)
	thread := id("thread")
	th := mustCreateThread(t, s, &checkpoint.Thread{ID: thread, Status: checkpoint.ThreadRunning, RunID: "run-1", Messages: json.RawMessage(`[]`)})
	first := mustCreateQuestion(t, s, newQuestion(thread, "q"))
	before := readState(t, s, thread, "q")
	again := newQuestion(thread, "q")
	again.Kind, again.Digest = "ask", "sha256:other"
	c, err := s.Commit(ctx(t), &checkpoint.Batch{
		Thread:    appendTo(th, `{"role":"assistant"}`),
		ToolCalls: []*checkpoint.ToolCall{{ThreadID: thread, RunID: "run-1", CallID: "c", Tool: "bash", State: checkpoint.ToolCallExecuting}},
		Question:  again,
		Events:    []*checkpoint.Event{event(thread, "question_asked")},
	})
	if err != nil {
		t.Fatalf("Commit = %v, want no error", err)
	}
	if c.Created || c.Question == nil || c.Question.Kind != first.Kind || c.Question.Digest != first.Digest {
		t.Errorf("Committed = created %v, question %+v; want the stored question", c.Created, c.Question)
	}
	if len(c.EventSeqs) != 0 {
		t.Errorf("EventSeqs = %v for a batch that wrote nothing", c.EventSeqs)
	}
	if after := readState(t, s, thread, "q"); !after.same(before) {
		t.Errorf("a batch whose question existed wrote something:\nbefore %s\nafter  %s", before, after)
	}
}

func testBatchesLostCASBeforeExistingQuestion(t *testing.T, setup setupFunc) {
	s := setup(t)
	thread := id("thread")
	th := mustCreateThread(t, s, &checkpoint.Thread{ID: thread, Status: checkpoint.ThreadRunning, RunID: "run-1", Messages: json.RawMessage(`[]`)})
	mustCreateQuestion(t, s, newQuestion(thread, "q"))
	w := appendTo(th, `{}`)
	w.Version++
	if _, err := s.Commit(ctx(t), &checkpoint.Batch{Thread: w, Question: newQuestion(thread, "q")}); !errors.Is(err, checkpoint.ErrConflict) {
		t.Errorf("stale version with an existing question: Commit = %v, want ErrConflict", err)
	}
	if _, err := s.ResolveQuestion(ctx(t), thread, "q", answer("first", time.Time{})); err != nil {
		t.Fatal(err)
	}
	b := resolve(thread, "q", answer("second", time.Time{}))
	b.Question = newQuestion(thread, "q")
	if _, err := s.Commit(ctx(t), b); !errors.Is(err, checkpoint.ErrConflict) {
		t.Errorf("a lost resolution with an existing question: Commit = %v, want ErrConflict", err)
	}
}

func testBatchesResolutionAudited(t *testing.T, setup setupFunc) {
	s := setup(t)
	thread := id("thread")
	for i, r := range []checkpoint.Resolution{answer("alice", time.Time{}), {Status: checkpoint.QuestionAborted, By: "abort", Reason: "closed"}} {
		qid := fmt.Sprint("q", i)
		mustCreateQuestion(t, s, newQuestion(thread, qid))
		if _, err := s.ResolveQuestion(ctx(t), thread, qid, r); err != nil {
			t.Fatal(err)
		}
		evs, err := eventsOfType(t, s, thread, checkpoint.EventQuestionResolved)
		if err != nil || len(evs) != i+1 {
			t.Fatalf("question_resolved events: %d, %v; want %d", len(evs), err, i+1)
		}
		var d map[string]any
		if err := json.Unmarshal(evs[i].Data, &d); err != nil || d["question_id"] != qid || d["status"] != string(r.Status) || d["by"] != r.By || d["call_id"] != "call-"+qid {
			t.Errorf("event of %s: %s (%v)", qid, evs[i].Data, err)
		}
	}
	// One refused writes nothing, its event neither.
	mustCreateQuestion(t, s, newQuestion(thread, "open"))
	if _, err := s.Commit(ctx(t), &checkpoint.Batch{Resolve: &checkpoint.Resolve{ThreadID: thread, ID: "open", Resolution: answer("mallory", time.Time{})},
		Events: []*checkpoint.Event{event(thread, "question_resolved")}}); !errors.Is(err, checkpoint.ErrUnaudited) {
		t.Errorf("a resolution whose event does not record it: Commit = %v, want ErrUnaudited", err)
	}
	if q := mustGetQuestion(t, s, thread, "open"); q.Status != checkpoint.QuestionPending {
		t.Errorf("the refused resolution was written: %s", q.Status)
	}
	if evs, _ := eventsOfType(t, s, thread, checkpoint.EventQuestionResolved); len(evs) != 2 {
		t.Errorf("%d question_resolved events after the refusal, want 2", len(evs))
	}
}

func testBatchesAppendsInOrder(t *testing.T, setup setupFunc) {
	s := setup(t)
	thread := id("thread")
	th := mustCreateThread(t, s, &checkpoint.Thread{ID: thread, Status: checkpoint.ThreadIdle})
	want := []string{}
	for i := range 120 {
		w := appendTo(th)
		for j := range i%3 + 1 {
			m := fmt.Sprintf(`{"i":%d,"j":%d}`, i, j)
			w.Append = append(w.Append, json.RawMessage(m))
			want = append(want, m)
		}
		if _, err := s.Commit(ctx(t), &checkpoint.Batch{Thread: w}); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		th.Version = w.Version
	}
	got, err := s.LoadThread(ctx(t), thread)
	if err != nil {
		t.Fatal(err)
	}
	checkJSON(t, "Messages", got.Messages, json.RawMessage("["+strings.Join(want, ",")+"]"))
	if got.Version != 121 {
		t.Errorf("Version = %d, want 121", got.Version)
	}
	// SaveThread still replaces them all, and appending goes on after.
	got.Messages = json.RawMessage(`["only"]`)
	if err := s.SaveThread(ctx(t), got); err != nil {
		t.Fatal(err)
	}
	w := &checkpoint.ThreadWrite{ID: thread, Version: got.Version, Status: checkpoint.ThreadIdle, Append: []json.RawMessage{json.RawMessage(`"next"`)}}
	if _, err := s.Commit(ctx(t), &checkpoint.Batch{Thread: w}); err != nil {
		t.Fatal(err)
	}
	again, err := s.LoadThread(ctx(t), thread)
	if err != nil {
		t.Fatal(err)
	}
	checkJSON(t, "Messages after SaveThread and an append", again.Messages, json.RawMessage(`["only","next"]`))
}

func testBatchesConcurrentAppends(t *testing.T, setup setupFunc) {
	s := setup(t)
	thread := id("thread")
	th := mustCreateThread(t, s, &checkpoint.Thread{ID: thread, Status: checkpoint.ThreadRunning, RunID: "run-1", Messages: json.RawMessage(`["start"]`)})
	errs := race(func(i int) error {
		w := appendTo(th, fmt.Sprintf(`{"racer":%d}`, i))
		_, err := s.Commit(ctx(t), &checkpoint.Batch{Thread: w, Events: []*checkpoint.Event{event(thread, fmt.Sprint("racer-", i))}})
		return err
	})
	winner := oneWinner(t, "appends on one version", errs)
	got := readState(t, s, thread)
	want := fmt.Sprintf(`{v2 running run-1 ["start",{"racer":%d}]; calls []; questions []; events [racer-%d]}`, winner, winner)
	if got.String() != want {
		t.Errorf("after the race: %s\nwant %s", got, want)
	}
}

func testBatchesManyWriters(t *testing.T, setup setupFunc) {
	s := setup(t)
	const writers, rounds = 16, 12
	threads := make([]*checkpoint.Thread, writers)
	for i := range threads {
		threads[i] = mustCreateThread(t, s, &checkpoint.Thread{ID: id("thread"), Status: checkpoint.ThreadRunning, RunID: "run-1", Messages: json.RawMessage(`[]`)})
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers*rounds)
	for i := range writers {
		wg.Go(func() {
			th := threads[i]
			for r := range rounds {
				w := appendTo(th, fmt.Sprintf(`{"r":%d}`, r))
				b := &checkpoint.Batch{Thread: w, Events: []*checkpoint.Event{event(th.ID, fmt.Sprint("r", r))}}
				if r%3 == 2 {
					w.Version-- // stale: must fail alone
				}
				_, err := s.Commit(ctx(t), b)
				switch {
				case r%3 == 2 && !errors.Is(err, checkpoint.ErrConflict):
					errs <- fmt.Errorf("thread %d round %d: a stale write got %v, want ErrConflict", i, r, err)
				case r%3 != 2 && err != nil:
					errs <- fmt.Errorf("thread %d round %d: %v", i, r, err)
				case err == nil:
					th.Version = w.Version
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, th := range threads {
		got := readState(t, s, th.ID)
		var msgs, evs []string
		for r := range rounds {
			if r%3 != 2 {
				msgs = append(msgs, fmt.Sprintf(`{"r":%d}`, r))
				evs = append(evs, fmt.Sprint("r", r))
			}
		}
		if string(got.thread.Messages) != "["+strings.Join(msgs, ",")+"]" || !slices.Equal(got.events, evs) {
			t.Errorf("thread %s: %s; want messages %v and events %v", th.ID, got, msgs, evs)
		}
	}
}

func testBatchesNotifications(t *testing.T, setup setupFunc) {
	s := setup(t)
	notes, err := s.Subscribe(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	thread := id("thread")
	th := mustCreateThread(t, s, &checkpoint.Thread{ID: thread, Status: checkpoint.ThreadRunning, RunID: "run-1"})
	// A batch that fails tells nobody of its question.
	w := appendTo(th, `{}`)
	w.Version = 7
	if _, err := s.Commit(ctx(t), &checkpoint.Batch{Thread: w, Question: newQuestion(thread, "lost")}); !errors.Is(err, checkpoint.ErrConflict) {
		t.Fatalf("stale batch: %v", err)
	}
	if _, err := s.Commit(ctx(t), &checkpoint.Batch{Thread: appendTo(th, `{}`), Question: newQuestion(thread, "q")}); err != nil {
		t.Fatal(err)
	}
	// Nothing is said of the failed batch's question, before q's
	// notification or in a short while after it.
	var drain <-chan time.Time
	limit := time.After(waitLimit)
heard:
	for {
		select {
		case n := <-notes:
			if n.QuestionID == "lost" {
				t.Errorf("notified of a question whose batch failed: %+v", n)
			}
			if n.Kind == checkpoint.QuestionCreated && n.QuestionID == "q" && drain == nil {
				drain = time.After(200 * time.Millisecond)
			}
		case <-drain:
			break heard
		case <-limit:
			t.Fatalf("no notification of q within %v", waitLimit)
		}
	}
	if _, err := s.Commit(ctx(t), resolve(thread, "q", answer("a", time.Time{}))); err != nil {
		t.Fatal(err)
	}
	waitNotification(t, notes, checkpoint.QuestionResolved, thread, "q")
	if _, err := s.GetQuestion(ctx(t), thread, "lost"); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("the failed batch's question: %v, want ErrNotFound", err)
	}
}

func testBatchesTurnCalls(t *testing.T, setup setupFunc) {
	s := setup(t)
	thread := id("thread")
	for i := range 30 {
		st := checkpoint.ToolCallDone
		if i%2 == 0 {
			st = checkpoint.ToolCallExecuting
		}
		if err := s.PutToolCall(ctx(t), &checkpoint.ToolCall{ThreadID: thread, RunID: "run-1", CallID: fmt.Sprint("c", i), Tool: "bash", Args: json.RawMessage(`{}`), State: st, Result: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	calls, err := s.ListToolCalls(ctx(t), thread, "run-1", "c28", "c29", "c3", "unknown", "c3")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range calls {
		got = append(got, c.CallID+"="+string(c.State))
	}
	slices.Sort(got)
	if want := []string{"c28=executing", "c29=done", "c3=done"}; !slices.Equal(got, want) {
		t.Errorf("ListToolCalls(c28, c29, c3, unknown, c3) = %v, want %v", got, want)
	}
	all, err := s.ListToolCalls(ctx(t), thread, "run-1")
	if err != nil || len(all) != 30 {
		t.Errorf("ListToolCalls() = %d calls, %v; want all 30", len(all), err)
	}
	other, err := s.ListToolCalls(ctx(t), thread, "run-2", "c3")
	if err != nil || len(other) != 0 {
		t.Errorf("ListToolCalls(other run, c3) = %d calls, %v; want none", len(other), err)
	}
}
