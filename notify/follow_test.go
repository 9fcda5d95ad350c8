package notify_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/clock"
	"github.com/tollgate-ai/tollgate/notify"
)

// endingFeed is a store whose first feed of notifications ends at once,
// as a PostgreSQL store's does when its listening connection drops.
type endingFeed struct {
	checkpoint.Store
	subscribed atomic.Int32
}

func (s *endingFeed) Subscribe(ctx context.Context) (<-chan checkpoint.Notification, error) {
	if s.subscribed.Add(1) == 1 {
		ended := make(chan checkpoint.Notification)
		close(ended)
		return ended, nil
	}
	return s.Store.Subscribe(ctx)
}

// When the store's feed ends, Run subscribes again: a question asked
// afterwards is sent on its notification, not at the next poll (the fake
// clock never reaches it) — before, Run subscribed once, and from then on
// only its poll was left.
func TestRunFollowsAFeedThatEnds(t *testing.T) {
	store := &endingFeed{Store: memory.New()}
	clk := clock.NewFake(time.Now())
	rcv := newReceiver(t, 0)
	n, err := notify.New(notify.Options{Config: webhookConfig(t, rcv.srv.URL, ""), Store: store, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	start(t, n)
	for i := 0; store.subscribed.Load() < 2; i++ {
		if i > 500 {
			t.Fatal("Run did not subscribe again after its feed ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // the Resync's wake goes first
	ask(t, store, "t1", "hitl_c1", "rm -r logs", clk.Now(), 3*time.Minute, nil)
	rcv.wait(t, 1)
}
