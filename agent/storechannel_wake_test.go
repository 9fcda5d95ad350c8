package agent

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
)

// fedStore is a store whose notifications the test sends.
type fedStore struct {
	*memory.Store
	notes chan checkpoint.Notification
}

func (s *fedStore) Subscribe(ctx context.Context) (<-chan checkpoint.Notification, error) {
	return s.notes, nil
}

// A waiter waits for its question's resolution: the notification of its
// creation (which the asking run often hears after its wait began) must
// not make it read the question again; a resolution's does.
func TestWatcherIgnoresCreated(t *testing.T) {
	t.Parallel()
	s := &fedStore{Store: memory.New(), notes: make(chan checkpoint.Notification)}
	wake, subscribed, _, leave := watch(s, 1<<40, "t", "q")
	defer leave()
	// A second waiter, on the same watcher, marks where the watcher is:
	// it handles notifications in order, so once the marker's resolution
	// woke its waiter, it is done with every notification before.
	mark, _, _, leaveMark := watch(s, 1<<40, "t", "mark")
	defer leaveMark()
	<-subscribed
	send := func(k checkpoint.NotificationKind, q string) {
		select {
		case s.notes <- checkpoint.Notification{Kind: k, ThreadID: "t", QuestionID: q}:
		case <-t.Context().Done():
		}
	}
	handled := func() {
		send(checkpoint.QuestionResolved, "mark")
		select {
		case <-mark:
		case <-time.After(10 * time.Second): // a guard, not a timing
			t.Fatal("the watcher did not get to the marker in 10 s")
		}
	}
	send(checkpoint.QuestionCreated, "q")
	handled()
	if len(wake) != 0 {
		t.Fatal("the question's creation woke its waiter")
	}
	send(checkpoint.QuestionResolved, "q")
	handled()
	if len(wake) != 1 {
		t.Fatal("the question's resolution did not wake its waiter")
	}
}
