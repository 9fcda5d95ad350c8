package agent_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/internal/resolution"
)

// slowSubscribe is a store whose Subscribe takes long (PostgreSQL's waits
// for its first LISTEN, a connect to a server that does not answer).
type slowSubscribe struct {
	*memory.Store
	release chan struct{}
}

func (s *slowSubscribe) Subscribe(ctx context.Context) (<-chan checkpoint.Notification, error) {
	select {
	case <-s.release:
	case <-ctx.Done():
	}
	return s.Store.Subscribe(ctx)
}

// Waiters share a watcher per store; one store slow to subscribe must not
// hold up waiters of another, and a waiter's ctx ends its wait whatever the
// store does.
func TestStoreChannelSlowSubscribe(t *testing.T) {
	t.Parallel()
	slow := &slowSubscribe{Store: memory.New(), release: make(chan struct{})}
	defer close(slow.release)
	if _, _, err := slow.CreateQuestion(t.Context(), &checkpoint.Question{ThreadID: "t", ID: "q", Kind: "approve"}); err != nil {
		t.Fatal(err)
	}
	waitSlow, cancelSlow := context.WithCancel(context.Background())
	slowDone := make(chan error, 1)
	go func() { _, err := (&agent.StoreChannel{Store: slow}).Wait(waitSlow, "t", "q"); slowDone <- err }()

	other := memory.New()
	if _, _, err := other.CreateQuestion(t.Context(), &checkpoint.Question{ThreadID: "t", ID: "q", Kind: "approve"}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.ResolveQuestion(t.Context(), "t", "q", checkpoint.Resolution{Status: checkpoint.QuestionAborted, By: "x", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second) // a guard, not a timing
	defer cancel()
	q, err := (&agent.StoreChannel{Store: other}).Wait(ctx, "t", "q")
	if err != nil || q.Status != checkpoint.QuestionAborted {
		t.Fatalf("Wait on another store = %v, %v", q, err)
	}
	cancelSlow()
	select {
	case err := <-slowDone:
		if err == nil {
			t.Error("a cancelled wait returned no error")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a wait whose ctx ended is still waiting for the store to subscribe")
	}
}

// readCounting counts GetQuestion and tells each read's status. It
// sends no notifications: nothing but resolution.Tell wakes a waiter.
type readCounting struct {
	*memory.Store
	reads chan checkpoint.QuestionStatus
}

func (s *readCounting) Subscribe(ctx context.Context) (<-chan checkpoint.Notification, error) {
	return make(chan checkpoint.Notification), nil
}

func (s *readCounting) GetQuestion(ctx context.Context, thread, id string) (*checkpoint.Question, error) {
	q, err := s.Store.GetQuestion(ctx, thread, id)
	if err == nil {
		s.reads <- q.Status
	}
	return q, err
}

// A question resolved in the process (resolution.Tell after its commit) is
// handed to the run waiting for it, which need not read it again.
func TestStoreChannelResolvedHanded(t *testing.T) {
	t.Parallel()
	s := &readCounting{Store: memory.New(), reads: make(chan checkpoint.QuestionStatus, 16)}
	ctx := t.Context()
	if _, _, err := s.CreateQuestion(ctx, &checkpoint.Question{ThreadID: "t", ID: "q", Kind: "approve"}); err != nil {
		t.Fatal(err)
	}
	type result struct {
		q   *checkpoint.Question
		err error
	}
	done := make(chan result, 1)
	go func() {
		q, err := (&agent.StoreChannel{Store: s, PollInterval: time.Hour}).Wait(ctx, "t", "q")
		done <- result{q, err}
	}()
	if st := <-s.reads; st != checkpoint.QuestionPending { // the wait's first read
		t.Fatalf("first read: %s", st)
	}
	res := checkpoint.Resolution{Status: checkpoint.QuestionAnswered, Answer: []byte(`{"decision":"approve"}`), By: "ann", At: time.Now()}
	c, err := s.Commit(ctx, &checkpoint.Batch{
		Resolve: &checkpoint.Resolve{ThreadID: "t", ID: "q", Resolution: res},
		Events:  []*checkpoint.Event{checkpoint.ResolutionEvent(&checkpoint.Question{ThreadID: "t", ID: "q", Kind: "approve"}, res)},
	})
	if err != nil {
		t.Fatal(err)
	}
	resolution.Tell(s, c.Resolved)
	r := <-done
	if r.err != nil || r.q.Status != checkpoint.QuestionAnswered || r.q.AnsweredBy != "ann" {
		t.Fatalf("Wait = %+v, %v", r.q, r.err)
	}
	if n := len(s.reads); n != 0 {
		t.Errorf("the wait read the question %d more times after it was handed the resolution", n)
	}
}

// gapFeed's notifications are a silent feed until the test closes it (a
// store's connection to its database dropped); then Subscribe is the
// store's, once the test closes again. Each read tells its status, as
// readCounting's do.
type gapFeed struct {
	*readCounting
	silent chan checkpoint.Notification
	again  chan struct{}
}

func (s *gapFeed) Subscribe(ctx context.Context) (<-chan checkpoint.Notification, error) {
	select {
	case <-s.silent:
	default:
		return s.silent, nil
	}
	select {
	case <-s.again:
	case <-ctx.Done():
	}
	return s.Store.Subscribe(ctx)
}

// A feed that ends wakes the waiters to read, and is subscribed again
// (not at the next poll, an hour away): they read again after it, and
// hear a resolution on the new feed.
func TestStoreChannelFollowsAFeedThatEnds(t *testing.T) {
	t.Parallel()
	s := &gapFeed{readCounting: &readCounting{Store: memory.New(), reads: make(chan checkpoint.QuestionStatus, 16)},
		silent: make(chan checkpoint.Notification), again: make(chan struct{})}
	ctx := t.Context()
	if _, _, err := s.CreateQuestion(ctx, &checkpoint.Question{ThreadID: "t", ID: "q", Kind: "approve"}); err != nil {
		t.Fatal(err)
	}
	var got *checkpoint.Question
	waited := make(chan error, 1)
	go func() {
		var err error
		got, err = (&agent.StoreChannel{Store: s, PollInterval: time.Hour}).Wait(ctx, "t", "q")
		waited <- err
	}()
	guard := time.After(10 * time.Second) // a guard, not a timing
	read := func(what string) {
		t.Helper()
		select {
		case st := <-s.reads:
			if st != checkpoint.QuestionPending {
				t.Fatalf("%s: %s", what, st)
			}
		case <-guard:
			t.Fatalf("no %s in 10 s", what)
		}
	}
	read("first read")
	close(s.silent)
	read("read when the feed ended")
	// Subscribed again only now: the read the Resync causes cannot be
	// the one before.
	close(s.again)
	read("read after subscribing again")
	if _, err := s.ResolveQuestion(ctx, "t", "q", checkpoint.Resolution{Status: checkpoint.QuestionAborted, By: "x", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waited:
		if err != nil || got.Status != checkpoint.QuestionAborted {
			t.Fatalf("Wait = %+v, %v", got, err)
		}
	case <-guard:
		t.Fatal("the resolution on the new feed did not end the wait in 10 s")
	}
}
