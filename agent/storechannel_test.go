package agent_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
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
