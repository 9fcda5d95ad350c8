package checkpoint_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
)

// ask stores a pending question in thread.
func ask(t testing.TB, s checkpoint.Store, thread, id string) {
	t.Helper()
	q := &checkpoint.Question{ThreadID: thread, ID: id, Kind: "approve", Payload: []byte(`{}`), Deadline: time.Now().Add(time.Hour)}
	if _, err := s.Commit(context.Background(), &checkpoint.Batch{Question: q}); err != nil {
		t.Fatal(err)
	}
}

// TestQuestionsPages: every question, across pages, once each, in order;
// breaking off reads no further page; an error ends the sequence.
func TestQuestionsPages(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	for i := range 7 {
		ask(t, s, "t", fmt.Sprintf("q%d", i))
	}
	counted := &countingLister{store: s}
	var got []string
	for q, err := range checkpoint.Questions(ctx, counted, checkpoint.QuestionFilter{Order: checkpoint.OldestFirst, Limit: 3}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, q.ID)
	}
	if fmt.Sprint(got) != "[q0 q1 q2 q3 q4 q5 q6]" || counted.pages != 3 {
		t.Fatalf("got %v in %d pages, want q0..q6 in 3", got, counted.pages)
	}
	// The same sequence ranged again starts again.
	all := checkpoint.Questions(ctx, s, checkpoint.QuestionFilter{Order: checkpoint.OldestFirst, Limit: 3})
	for range 2 {
		n := 0
		for range all {
			n++
		}
		if n != 7 {
			t.Fatalf("ranged again, the sequence gave %d questions, want 7", n)
		}
	}
	counted.pages = 0
	for q, err := range checkpoint.Questions(ctx, counted, checkpoint.QuestionFilter{Order: checkpoint.OldestFirst, Limit: 3}) {
		if err != nil || q.ID == "q1" {
			break
		}
	}
	if counted.pages != 1 {
		t.Fatalf("a loop broken off in the first page read %d pages", counted.pages)
	}
	boom := errors.New("boom")
	n := 0
	for q, err := range checkpoint.Questions(ctx, failing{boom}, checkpoint.QuestionFilter{}) {
		n++
		if q != nil || !errors.Is(err, boom) {
			t.Fatalf("got %v, %v; want the lister's error", q, err)
		}
	}
	if n != 1 {
		t.Fatalf("the error was yielded %d times", n)
	}
	// A lister that returns a cursor with an empty page does not spin.
	for range checkpoint.Questions(ctx, emptyForever{}, checkpoint.QuestionFilter{}) {
		t.Fatal("an empty page yielded a question")
	}
}

func TestThreadsPages(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	for i := range 5 {
		th := &checkpoint.ThreadWrite{ID: fmt.Sprintf("t%d", i), Status: checkpoint.ThreadIdle}
		if _, err := s.Commit(ctx, &checkpoint.Batch{Thread: th}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	for th, err := range checkpoint.Threads(ctx, s, checkpoint.ThreadFilter{Limit: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		if seen[th.ID] {
			t.Fatalf("%s twice", th.ID)
		}
		seen[th.ID] = true
	}
	if len(seen) != 5 {
		t.Fatalf("saw %d threads, want 5", len(seen))
	}
}

type countingLister struct {
	store checkpoint.Store
	pages int
}

func (c *countingLister) ListQuestions(ctx context.Context, f checkpoint.QuestionFilter) ([]*checkpoint.Question, string, error) {
	c.pages++
	return c.store.ListQuestions(ctx, f)
}

type failing struct{ err error }

func (f failing) ListQuestions(context.Context, checkpoint.QuestionFilter) ([]*checkpoint.Question, string, error) {
	return nil, "", f.err
}

type emptyForever struct{}

func (emptyForever) ListQuestions(context.Context, checkpoint.QuestionFilter) ([]*checkpoint.Question, string, error) {
	return nil, "more", nil
}

// Every pending question of a store, page by page, without a cursor loop.
func ExampleQuestions() {
	ctx := context.Background()
	store := memory.New()
	for _, id := range []string{"q1", "q2", "q3"} {
		store.Commit(ctx, &checkpoint.Batch{Question: &checkpoint.Question{ThreadID: "t1", ID: id, Kind: "approve",
			Payload: []byte(`{}`), Deadline: time.Now().Add(time.Hour)}})
	}
	for q, err := range checkpoint.Questions(ctx, store, checkpoint.QuestionFilter{Status: checkpoint.QuestionPending, Order: checkpoint.OldestFirst, Limit: 2}) {
		if err != nil {
			fmt.Println("error:", err)
			break
		}
		fmt.Println(q.ThreadID, q.ID)
	}
	// Output:
	// t1 q1
	// t1 q2
	// t1 q3
}

// flaky is a Subscriber whose feeds the test ends, and whose
// subscriptions fail while fail > 0.
type flaky struct {
	mu    sync.Mutex
	fail  int
	feeds []chan checkpoint.Notification
	tries int
}

func (f *flaky) Subscribe(ctx context.Context) (<-chan checkpoint.Notification, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tries++
	if f.fail > 0 {
		f.fail--
		return nil, errors.New("database away")
	}
	c := make(chan checkpoint.Notification, 4)
	f.feeds = append(f.feeds, c)
	return c, nil
}

func (f *flaky) feed() chan checkpoint.Notification {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.feeds[len(f.feeds)-1]
}

func receive(t *testing.T, c <-chan checkpoint.Notification) checkpoint.Notification {
	t.Helper()
	select {
	case n := <-c:
		return n
	case <-time.After(10 * time.Second):
		t.Fatal("no notification in 10 s")
		return checkpoint.Notification{}
	}
}

// TestFollow: notifications pass through; a feed that ends is subscribed
// again (failures retried, each told to OnError) and a Resync follows;
// the channel closes when ctx ends; a first subscription that fails is
// returned and retried.
func TestFollow(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	store := &flaky{}
	var errs, lost atomic.Int32
	opts := &checkpoint.FollowOptions{Backoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond,
		OnError: func(error) { errs.Add(1) }, OnLost: func() { lost.Add(1) }}
	notes, err := checkpoint.Follow(ctx, store, opts)
	if err != nil {
		t.Fatal(err)
	}
	store.feed() <- checkpoint.Notification{Kind: checkpoint.QuestionCreated, ThreadID: "t", QuestionID: "q"}
	if n := receive(t, notes); n.QuestionID != "q" {
		t.Fatalf("got %+v", n)
	}
	store.mu.Lock()
	store.fail = 3
	close(store.feeds[0])
	store.mu.Unlock()
	if n := receive(t, notes); n.Kind != checkpoint.Resync {
		t.Fatalf("after the feed ended: %+v, want a resync", n)
	}
	if errs.Load() != 3 || lost.Load() != 1 || store.tries != 5 {
		t.Fatalf("%d errors, %d ends, %d subscriptions: want 3, 1, 5", errs.Load(), lost.Load(), store.tries)
	}
	store.feed() <- checkpoint.Notification{Kind: checkpoint.QuestionResolved, ThreadID: "t", QuestionID: "q2"}
	if n := receive(t, notes); n.QuestionID != "q2" {
		t.Fatalf("on the new feed: %+v", n)
	}
	cancel()
	for range notes {
	}

	// The first subscription fails: its error, and the channel subscribes
	// again.
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	notes, err = checkpoint.Follow(ctx2, &flaky{fail: 1}, opts)
	if err == nil {
		t.Fatal("the first subscription's error was not returned")
	}
	if n := receive(t, notes); n.Kind != checkpoint.Resync {
		t.Fatalf("after the first subscription failed: %+v, want a resync", n)
	}
}
