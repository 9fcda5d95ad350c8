package agent

import (
	"context"
	"testing"

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
	s := &fedStore{Store: memory.New(), notes: make(chan checkpoint.Notification)} // unbuffered: a send returns once the watcher has it
	wake, subscribed, _, leave := watch(s, 1<<40, "t", "q")
	defer leave()
	<-subscribed
	send := func(k checkpoint.NotificationKind, q string) {
		select {
		case s.notes <- checkpoint.Notification{Kind: k, ThreadID: "t", QuestionID: q}:
		case <-t.Context().Done():
		}
	}
	send(checkpoint.QuestionCreated, "q")
	// The watcher handles one notification at a time: once it takes the
	// next, it is done with the one before.
	send(checkpoint.QuestionCreated, "other")
	if len(wake) != 0 {
		t.Fatal("the question's creation woke its waiter")
	}
	send(checkpoint.QuestionResolved, "q")
	send(checkpoint.QuestionCreated, "other")
	if len(wake) != 1 {
		t.Fatal("the question's resolution did not wake its waiter")
	}
}
