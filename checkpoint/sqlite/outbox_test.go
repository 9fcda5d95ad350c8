package sqlite_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/sqlite"
)

// The outbox: a delivery is added once by id (a second add keeps the
// first, tried or not), the cursor only moves on, both in one
// transaction; due deliveries come earliest first; all of it survives a
// reopen.
func TestOutbox(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tollgate.db")
	s, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	d1 := &checkpoint.Delivery{ID: "msg_1", Event: "question.created", ThreadID: "t", QuestionID: "q", Channel: "webhook",
		Target: "https://h.example/x", Payload: []byte(`{"a":1}`), NextAt: now.Add(time.Second)}
	d2 := &checkpoint.Delivery{ID: "msg_2", Event: "question.created", ThreadID: "t", QuestionID: "q", Channel: "slack", Target: "C1", NextAt: now}
	if err := s.AddDeliveries(ctx, []*checkpoint.Delivery{d1, d2}, 7); err != nil {
		t.Fatal(err)
	}
	d1.Attempts, d1.LastError = 2, "500"
	if err := s.UpdateDelivery(ctx, d1); err != nil {
		t.Fatal(err)
	}
	again := *d1
	again.Attempts, again.Payload = 0, []byte(`{"b":2}`)
	if err := s.AddDeliveries(ctx, []*checkpoint.Delivery{&again}, 3); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateDelivery(ctx, &checkpoint.Delivery{ID: "nope"}); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("updating a delivery that does not exist: %v", err)
	}
	s.Close()
	s, err = sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if c, err := s.OutboxCursor(ctx); err != nil || c != 7 {
		t.Errorf("cursor %d, %v; want 7", c, err)
	}
	due, err := s.DueDeliveries(ctx, now.Add(time.Second), 10)
	if err != nil || len(due) != 2 || due[0].ID != "msg_2" || due[1].ID != "msg_1" {
		t.Fatalf("due: %v %v", due, err)
	}
	if got := due[1]; got.Attempts != 2 || string(got.Payload) != `{"a":1}` || got.State != checkpoint.DeliveryPending || got.LastError != "500" {
		t.Errorf("msg_1 as read: %+v", got)
	}
	if due, _ := s.DueDeliveries(ctx, now, 10); len(due) != 1 {
		t.Errorf("due at now: %d, want 1", len(due))
	}
	d2.State = checkpoint.DeliveryDead
	if err := s.UpdateDelivery(ctx, d2); err != nil {
		t.Fatal(err)
	}
	if dead, _ := s.ListDeliveries(ctx, checkpoint.DeliveryDead, 10); len(dead) != 1 || dead[0].ID != "msg_2" {
		t.Errorf("dead: %v", dead)
	}
	if all, _ := s.ListDeliveries(ctx, "", 10); len(all) != 2 {
		t.Errorf("all: %v", all)
	}
	if g, err := s.GetDelivery(ctx, "msg_1"); err != nil || g.Channel != "webhook" {
		t.Errorf("get: %+v %v", g, err)
	}
}
